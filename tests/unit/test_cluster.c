/* Snapshots, membership changes, linearizable reads, leadership transfer. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

static void tiny_snapshots(struct baton_raft_options *o)
{
	o->snapshot_trailing_entries = 2;
	o->snapshot_chunk_bytes = 6;
}

Test(snapshot, compaction_and_install_in_chunks)
{
	struct harness h;
	/* A snapshot every 30 applied entries, of 20 bytes (the machine's). */
	h_init_snapshots(&h, 3, tiny_snapshots, 30);
	baton_node_id l = h_elect(&h);
	baton_node_id f = l == 1 ? 2 : 1;
	h.down[f] = true;
	for (int i = 0; i < 30; i++)
		h_propose(&h, l, "x");
	h_run(&h, 100);
	struct baton_raft_status s = h_status(&h, l);
	baton_index snap = s.snapshot_index;
	cr_assert_geq(snap, 30, "the leader took a snapshot");
	cr_assert_eq(s.first_index, snap - 1, "two trailing entries kept");
	/* The disk was told to compact up to there, too. */
	const struct sim_disk *d = &h.node[l].disk.durable;
	cr_assert(d->has_snap && d->snap.meta.index == snap);
	cr_assert(d->log_n > 0 && d->log[0].index == snap - 1);

	h.down[f] = false;
	for (int i = 0; i < 100 && h.snapshot_installed[f] == 0; i++)
		h_run(&h, 10);
	cr_assert_eq(h.snapshot_installed[f], snap);
	cr_assert_geq(h.delivered[BATON_MSG_SNAPSHOT], 4,
		      "20 bytes in chunks of 6");
	cr_assert_eq(h.node[f].machine.restores, 1, "the machine restored it");
	h_run(&h, 200);
	cr_assert_eq(h_status(&h, f).commit_index,
		     h_status(&h, l).commit_index);
	cr_assert_eq(h.applied_commands[f], 30);
	h_free(&h);
}

Test(snapshot, out_of_order_chunk_gets_the_expected_offset)
{
	struct harness h;
	h_init(&h, 3, NULL);
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = BATON_MSG_SNAPSHOT;
	m.term = 5;
	m.from = 2;
	m.to = 1;
	m.u.snapshot.meta.index = 100;
	m.u.snapshot.meta.term = 4;
	baton_version_state_initial(&m.u.snapshot.meta.versions);
	m.u.snapshot.total_len = 10;
	m.u.snapshot.offset = 4; /* nothing received yet */
	m.u.snapshot.chunk_len = 3;
	m.u.snapshot.chunk = (const uint8_t *)"abc";
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = &m;
	cr_assert_eq(h_step(&h, 1, &ev), 0);
	const struct baton_update *u = &h.last[1];
	cr_assert_eq(u->n_msgs_after_persist, 1);
	const struct baton_msg *r = &u->msgs_after_persist[0];
	cr_assert_eq(r->type, BATON_MSG_SNAPSHOT_RESULT);
	cr_assert_eq(r->u.snapshot_result.next_offset, 0);
	cr_assert(!r->u.snapshot_result.done);
	cr_assert_null(u->snapshot);
	cr_assert_eq(h.snapshot_installed[1], 0);
	h_free(&h);
}

static int member_event(struct harness *h, baton_node_id at, uint32_t type,
			baton_node_id id)
{
	struct baton_event ev = {.type = type};
	ev.u.member.id = id;
	return h_step(h, at, &ev);
}

static const struct baton_member *member(struct harness *h, baton_node_id at,
					 baton_node_id id)
{
	struct baton_raft_status s = h_status(h, at);
	static struct baton_member m;
	const struct baton_member *p = baton_config_find(&s.config, id);
	if (p == NULL)
		return NULL;
	m = *p;
	return &m;
}

Test(membership, learner_then_voter_then_removed)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	h_add_empty(&h, 4);
	cr_assert_eq(member_event(&h, l, BATON_EVENT_ADD_LEARNER, 4), 0);
	cr_assert_eq(member_event(&h, l, BATON_EVENT_ADD_LEARNER, 5),
		     BATON_EBUSY, "one change at a time");
	h_run(&h, 200);
	cr_assert_eq(member(&h, 4, 4)->role, BATON_LEARNER);
	cr_assert_eq(h.applied[4], h.applied[l], "a learner gets the log");
	cr_assert_eq(member_event(&h, l, BATON_EVENT_ADD_LEARNER, 4),
		     BATON_EEXISTS);
	cr_assert_eq(member_event(&h, l, BATON_EVENT_PROMOTE, 9),
		     BATON_ENOTFOUND);
	cr_assert_eq(member_event(&h, l, BATON_EVENT_PROMOTE, 4), 0);
	h_run(&h, 200);
	cr_assert_eq(member(&h, l, 4)->role, BATON_VOTER);
	baton_node_id f = l == 1 ? 2 : 1;
	cr_assert_eq(member_event(&h, l, BATON_EVENT_REMOVE, f), 0);
	h_run(&h, 200);
	cr_assert_null(member(&h, l, f));
	cr_assert_eq(h_status(&h, l).config.n, 3);
	h_free(&h);
}

Test(membership, learner_never_counts)
{
	struct harness h;
	h_init(&h, 1, NULL);
	cr_assert_eq(h_elect(&h), 1);
	h_add_empty(&h, 2);
	cr_assert_eq(member_event(&h, 1, BATON_EVENT_ADD_LEARNER, 2), 0);
	h_run(&h, 100);
	/* With the learner down, the single voter still commits alone. */
	h.down[2] = true;
	cr_assert_eq(h_propose(&h, 1, "x"), 0);
	h_run(&h, 50);
	cr_assert_eq(h_status(&h, 1).commit_index, h_status(&h, 1).last_index);
	/* And a learner never stands for election. */
	h.down[2] = false;
	h.down[1] = true;
	h_run(&h, 2000);
	cr_assert_eq(h_status(&h, 2).role, BATON_FOLLOWER);
	h_free(&h);
}

Test(membership, leader_removes_itself_and_steps_down)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	cr_assert_eq(member_event(&h, l, BATON_EVENT_REMOVE, l), 0);
	h_run(&h, 100);
	cr_assert_neq(h_status(&h, l).role, BATON_LEADER);
	h_run(&h, 1000);
	baton_node_id l2 = h_leader(&h);
	cr_assert_neq(l2, 0);
	cr_assert_neq(l2, l);
	cr_assert_null(member(&h, l2, l));
	cr_assert_eq(h_propose(&h, l2, "after"), 0);
	h_free(&h);
}

static struct baton_event read_event(uint64_t id)
{
	struct baton_event ev = {.type = BATON_EVENT_READ};
	ev.u.read.request_id = id;
	return ev;
}

Test(read_index, leader_waits_for_a_quorum_round)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	struct baton_event ev = read_event(7);
	cr_assert_eq(h_step(&h, l, &ev), 0);
	cr_assert_eq(h.n_reads, 0, "not before leadership is confirmed");
	cr_assert_geq(h_count(&h, BATON_MSG_APPEND, l, 0), 2,
		      "a heartbeat round goes out");
	h_deliver_all(&h);
	cr_assert_eq(h.n_reads, 1);
	cr_assert_eq(h.reads_id[0], 7);
	cr_assert_eq(h.reads_status[0], 0);
	cr_assert_eq(h.reads_index[0], h_status(&h, l).commit_index);
	h_free(&h);
}

Test(read_index, follower_asks_the_leader)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_node_id f = l == 1 ? 2 : 1;
	struct baton_event ev = read_event(9);
	cr_assert_eq(h_step(&h, f, &ev), 0);
	cr_assert_eq(h_count(&h, BATON_MSG_READ_INDEX, f, l), 1);
	h_deliver_all(&h);
	cr_assert_eq(h.n_reads, 1);
	cr_assert_eq(h.reads_id[0], 9);
	cr_assert_eq(h.reads_status[0], 0);
	cr_assert_geq(h.reads_index[0], 2);
	h_free(&h);
}

/* The core refuses a read with no leader, and fails its reads when it
 * loses leadership; the pipeline asks again until a leader serves them or
 * their deadline passes. */
Test(read_index, no_leader_and_leader_change_retry_reads_until_deadline)
{
	struct harness h;
	h_init(&h, 3, NULL);
	struct baton_event ev = read_event(1);
	cr_assert_eq(h_step(&h, 1, &ev), BATON_ENOLEADER);
	cr_assert_eq(h.n_reads, 0);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	cr_assert_eq(h.n_reads, 1, "the read waited for the leader");
	cr_assert_eq(h.reads_id[0], 1);
	cr_assert_eq(h.reads_status[0], 0);
	for (baton_node_id k = 1; k <= 3; k++)
		if (k != l)
			h.down[k] = true;
	ev = read_event(2);
	cr_assert_eq(h_step(&h, l, &ev), 0);
	h_run(&h, 400); /* check-quorum deposes the lonely leader */
	cr_assert_eq(h.n_reads, 1, "failed at once, not asked again");
	h_run(&h, 6000); /* the read's deadline, 5 s */
	cr_assert_eq(h.n_reads, 2);
	cr_assert_eq(h.reads_id[1], 2);
	cr_assert_eq(h.reads_status[1], BATON_ENOLEADER);
	h_free(&h);
}

Test(transfer, target_becomes_leader)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_node_id target = l == 3 ? 1 : 3;
	struct baton_event ev = {.type = BATON_EVENT_TRANSFER};
	ev.u.transfer.target = target;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	/* A proposal meanwhile waits in the pipeline: nothing is appended
	 * while leadership is handed over. */
	baton_index before = h_status(&h, l).last_index;
	cr_assert_eq(h_propose(&h, l, "x"), 0);
	cr_assert_eq(h_status(&h, l).last_index, before);
	h_deliver_all(&h);
	cr_assert_eq(h_leader(&h), target);
	cr_assert_eq(h_status(&h, l).role, BATON_FOLLOWER);
	h_free(&h);
}
