/* Cluster scenarios of the Raft core: snapshots (the driver:
 * scenario.h). */
#include "harness.h" /* h_lone_leader */
#include "scenario.h"

/* ======================================================================== */
/* Snapshots.                                                               */

static void trailing3(struct baton_raft_options *o)
{
	o->snapshot_trailing_entries = 3;
}

/* Commands "s-0".."s-<n-1>" proposed to a lone core and committed, each
 * persistence reported at once. */
static void lone_propose(struct baton_raft *r, uint64_t now, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		char text[16];
		int len = snprintf(text, sizeof text, "s-%u", k);
		struct baton_buffer b = {text, (size_t)len};
		struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
		ev.u.propose.n = 1;
		ev.u.propose.bufs = &b;
		struct baton_update u;
		cr_assert_eq(baton_raft_step(r, now, &ev, &u), 0);
		ev.type = BATON_EVENT_PERSISTED;
		ev.u.persisted.index = u.persist_index;
		ev.u.persisted.term = u.persist_term;
		cr_assert_eq(baton_raft_step(r, now, &ev, &u), 0);
	}
}

static int lone_snapshot_taken(struct baton_raft *r, uint64_t now,
			       baton_index index, baton_index *compact_upto)
{
	const char data[] = "state";
	struct baton_event ev = {.type = BATON_EVENT_SNAPSHOT_TAKEN};
	ev.u.snapshot_taken.index = index;
	ev.u.snapshot_taken.data = (const uint8_t *)data;
	ev.u.snapshot_taken.len = sizeof data;
	struct baton_update u;
	int rv = baton_raft_step(r, now, &ev, &u);
	if (compact_upto != NULL)
		*compact_upto = u.compact_upto;
	return rv;
}

/* The core's side of a snapshot the driver took (the pipeline takes them
 * at the applied index; the core takes any index it may). */
Test(snap, snapshot_taken_compacts_keeping_trailing_entries)
{
	uint64_t now = 0;
	struct baton_raft *r = h_lone_leader(trailing3, &now);
	lone_propose(r, now, 10);
	struct baton_raft_status st;
	baton_raft_status(r, &st);
	cr_assert_eq(st.applied_index, 12);

	struct baton_snapshot_meta meta;
	cr_assert_eq(baton_raft_snapshot_meta(r, 10, &meta), 0);
	cr_assert_eq(meta.index, 10);
	cr_assert_eq(meta.term, st.term);
	cr_assert_eq(meta.config.n, 1);
	cr_assert_eq(meta.config_index, 1);
	cr_assert_eq(baton_raft_snapshot_meta(r, 13, &meta), BATON_EINVAL,
		     "13 is not applied");

	baton_index compact = 0;
	cr_assert_eq(lone_snapshot_taken(r, now, 10, &compact), 0);
	cr_assert_eq(compact, 7, "10 minus 3 trailing entries");
	baton_raft_status(r, &st);
	cr_assert_eq(st.first_index, 8);
	cr_assert_eq(st.snapshot_index, 10);
	cr_assert_eq(st.snapshot_term, meta.term);
	cr_assert_eq(st.last_index, 12);
	cr_assert_null(baton_raft_entry(r, 7));
	cr_assert_not_null(baton_raft_entry(r, 8));
	baton_term t;
	cr_assert(baton_raft_term_at(r, 10, &t));
	cr_assert_not(baton_raft_term_at(r, 6, &t));

	cr_assert_eq(lone_snapshot_taken(r, now, 10, NULL), BATON_EINVAL,
		     "not newer than the current snapshot");
	cr_assert_eq(lone_snapshot_taken(r, now, 13, NULL), BATON_EINVAL,
		     "beyond what is applied");
	cr_assert_eq(lone_snapshot_taken(r, now, 12, &compact), 0);
	cr_assert_eq(compact, 9);
	baton_raft_status(r, &st);
	cr_assert_eq(st.first_index, 10);
	baton_raft_destroy(r);
}

/* A cluster whose nodes take snapshots themselves goes on replicating. */
Test(snap, nodes_snapshot_on_their_own_and_replication_goes_on)
{
	struct cluster *c = c_new_snapshots(3, trailing3, 10, 16);
	baton_node_id l = c_tick_until_leader(c, 20000);
	c_run(c, 3 * C_HEARTBEAT_MS);
	cr_assert_eq(c_propose_n(c, l, "s", 10, NULL), 0);
	c_run(c, 300);
	for (baton_node_id id = 1; id <= 3; id++) {
		struct baton_raft_status st = c_status(c, id);
		cr_assert_eq(st.applied_index, 12);
		cr_assert_geq(st.snapshot_index, 10, "node %llu",
			      (unsigned long long)id);
		cr_assert_eq(st.first_index, st.snapshot_index - 2,
			     "three trailing entries kept");
		cr_assert_eq(c_node(c, id)->last_compact_upto,
			     st.snapshot_index - 3);
		/* On the disk too. */
		const struct sim_disk *d = &c_node(c, id)->disk.durable;
		cr_assert(d->has_snap &&
			  d->snap.meta.index == st.snapshot_index);
		cr_assert_eq(d->snap_len, 16);
	}
	cr_assert_eq(c_propose(c, l, "after", NULL), 0);
	c_run(c, 300);
	for (baton_node_id id = 1; id <= 3; id++)
		cr_assert(c_applied_cmd(c, id, "after"));
	c_free(c);
}

static void small_chunks(struct baton_raft_options *o)
{
	o->snapshot_trailing_entries = 0;
	o->snapshot_chunk_bytes = 16;
}

struct chunk_stats {
	baton_node_id to;
	uint32_t chunks;
	uint32_t max_len;
	bool aligned; /* every chunk starts on a chunk boundary, in bounds */
	bool saw_last;
};

static void count_chunks(void *ctx, const struct baton_msg *m)
{
	struct chunk_stats *cs = ctx;
	const struct baton_msg_snapshot *sn = &m->u.snapshot;
	if (m->type != BATON_MSG_SNAPSHOT || m->to != cs->to)
		return;
	cs->chunks++;
	if (sn->chunk_len > cs->max_len)
		cs->max_len = sn->chunk_len;
	if (sn->offset % 16 != 0 || sn->offset + sn->chunk_len > sn->total_len)
		cs->aligned = false;
	if (sn->last_chunk) {
		cs->saw_last = true;
		if (sn->offset + sn->chunk_len != sn->total_len)
			cs->aligned = false;
	}
}

/* A cluster whose nodes snapshot every `every` applied entries, `bytes`
 * each, with a leader whose no-op every node has committed. */
static struct cluster *c_three_snapshots(uint64_t every, size_t bytes,
					 baton_node_id *leader)
{
	struct cluster *c = c_new_snapshots(3, small_chunks, every, bytes);
	*leader = c_tick_until_leader(c, 20000);
	c_run(c, 3 * C_HEARTBEAT_MS);
	return c;
}

/* The durable snapshot of node id (its bytes, as the machine made them). */
static const struct sim_disk *c_disk(struct cluster *c, baton_node_id id)
{
	const struct sim_disk *d = &c_node(c, id)->disk.durable;
	cr_assert(d->has_snap, "node %llu has a snapshot",
		  (unsigned long long)id);
	return d;
}

Test(snap, lagging_follower_receives_the_snapshot_in_chunks)
{
	baton_node_id l;
	/* The leader's snapshot lands on entry 22: 100 bytes. */
	struct cluster *c = c_three_snapshots(22, 100, &l);
	baton_node_id f = c_follower(c, l, 0);
	c_isolate(c, f, true);
	cr_assert_eq(c_propose_n(c, l, "pre", 20, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), 22);
	cr_assert_eq(c_last(c, f), 2);
	cr_assert_eq(c_status(c, l).snapshot_index, 22);
	cr_assert_eq(c_node(c, l)->last_compact_upto, 22);
	cr_assert_eq(c_status(c, l).first_index, 23);
	const struct sim_disk *ld = c_disk(c, l);
	cr_assert_eq(ld->snap_len, 100);
	cr_assert_eq(c_propose_n(c, l, "post", 2, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), 24);

	struct chunk_stats cs = {.to = f, .aligned = true};
	c->hook = count_chunks;
	c->hook_ctx = &cs;
	c_isolate(c, f, false);
	c_run(c, 3000);

	struct c_node *nd = c_node(c, f);
	cr_assert_eq(nd->n_snapshots, 1, "installed once");
	cr_assert_eq(nd->snap.index, 22);
	cr_assert_eq(nd->snap.term, c_term(c, l));
	cr_assert_eq(nd->snap.config.n, 3);
	cr_assert_eq(nd->snap_len, ld->snap_len);
	cr_assert_arr_eq(nd->snap_data, ld->snap_data, ld->snap_len);
	cr_assert_eq(nd->machine.restores, 1, "its machine restored it");
	cr_assert_geq(cs.chunks, 7, "100 bytes in chunks of 16");
	cr_assert_leq(cs.max_len, 16);
	cr_assert(cs.aligned);
	cr_assert(cs.saw_last);

	struct baton_raft_status fs = c_status(c, f);
	cr_assert_eq(fs.commit_index, c_commit(c, l));
	cr_assert_eq(fs.snapshot_index, 22);
	cr_assert_eq(fs.last_index, 24);
	c_assert_logs_equal(c, f, l, 23, 24);
	cr_assert(c_applied_cmd(c, f, "post-0"));
	cr_assert(c_applied_cmd(c, f, "post-1"));
	cr_assert_not(c_applied_cmd(c, f, "pre-0"),
		      "covered by the snapshot, never applied one by one");
	c_free(c);
}

/* A snapshot transfer to a follower that was cut off, in which the
 * second message of type `lost` (a chunk, or a chunk's acknowledgement) is
 * lost on the way. The leader must send the missing chunk again (on a
 * later heartbeat) and the follower must end up with the snapshot. */
static void snapshot_transfer_with_a_loss(uint32_t lost)
{
	baton_node_id l;
	/* The leader's snapshot lands on entry 12: 64 bytes. */
	struct cluster *c = c_three_snapshots(12, 64, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id lost_to = lost == BATON_MSG_SNAPSHOT ? f : l;
	c_isolate(c, f, true);
	cr_assert_eq(c_propose_n(c, l, "pre", 10, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_status(c, l).snapshot_index, 12);
	const struct sim_disk *ld = c_disk(c, l);
	cr_assert_eq(ld->snap_len, 64);
	c_isolate(c, f, false);

	uint32_t seen = 0;
	bool dropped = false;
	/* 30 s: 300 heartbeat rounds, 30 election timeouts. */
	for (int t = 0; t < 3000; t++) {
		c_advance(c, C_TICK_MS);
		c_tick_all(c);
		for (int guard = 0; c->q_n > 0; guard++) {
			cr_assert_lt(guard, 100000);
			if (!dropped && c->q[0].m.type == lost &&
			    c->q[0].m.to == lost_to && ++seen == 2) {
				cr_assert(c_drop_first(c, lost, 0, lost_to));
				dropped = true;
				continue;
			}
			c_deliver_one(c);
		}
	}
	cr_assert(dropped);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	struct c_node *nd = c_node(c, f);
	const struct baton__progress *p = c_progress(c, l, f);
	cr_assert_eq(nd->n_snapshots, 1,
		     "snapshot never installed after one lost %s: leader "
		     "progress for %llu still state %u (3 = snapshot) at "
		     "offset %llu of %zu; %llu chunks delivered in 30 s",
		     lost == BATON_MSG_SNAPSHOT ? "chunk" : "chunk ack",
		     (unsigned long long)f, p->state,
		     (unsigned long long)p->snap_offset, ld->snap_len,
		     (unsigned long long)c->delivered[BATON_MSG_SNAPSHOT]);
	cr_assert_eq(nd->snap_len, ld->snap_len);
	cr_assert_arr_eq(nd->snap_data, ld->snap_data, ld->snap_len);
	cr_assert_eq(c_commit(c, f), c_commit(c, l));
	c_free(c);
}

Test(snap, snapshot_transfer_survives_a_lost_chunk)
{
	snapshot_transfer_with_a_loss(BATON_MSG_SNAPSHOT);
}

Test(snap, snapshot_transfer_survives_a_lost_chunk_ack)
{
	snapshot_transfer_with_a_loss(BATON_MSG_SNAPSHOT_RESULT);
}

/* A follower reassembling a snapshot answers each chunk with the offset it
 * expects next; a chunk out of order changes nothing. */
Test(snap, out_of_order_chunk_gets_the_expected_offset)
{
	struct cluster *c = c_new(3, NULL);
	uint8_t data[30];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(0xa0 + i);
	struct baton_msg m = c_msg(BATON_MSG_SNAPSHOT, 2, 1, 2);
	m.u.snapshot.meta.index = 10;
	m.u.snapshot.meta.term = 2;
	c_voters(&m.u.snapshot.meta.config, 3);
	baton_version_state_initial(&m.u.snapshot.meta.versions);
	m.u.snapshot.meta.config_index = 1;
	m.u.snapshot.total_len = sizeof data;
	m.u.snapshot.chunk_len = 10;
	struct c_sum s;
	const struct baton_msg *res;

	m.u.snapshot.offset = 0;
	m.u.snapshot.chunk = data;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_not_null(res, "acknowledged after persistence");
	cr_assert_eq(res->u.snapshot_result.index, 10);
	cr_assert_eq(res->u.snapshot_result.next_offset, 10);
	cr_assert_not(res->u.snapshot_result.done);

	/* Skip [10, 20). */
	m.u.snapshot.offset = 20;
	m.u.snapshot.chunk = data + 20;
	m.u.snapshot.last_chunk = true;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_not_null(res);
	cr_assert_eq(res->u.snapshot_result.next_offset, 10,
		     "asks again for the missing bytes");
	cr_assert_not(res->u.snapshot_result.done);
	cr_assert_not(s.has_snapshot);

	m.u.snapshot.offset = 10;
	m.u.snapshot.chunk = data + 10;
	m.u.snapshot.last_chunk = false;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_eq(res->u.snapshot_result.next_offset, 20);
	/* A duplicate of that chunk is answered the same way. */
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_eq(res->u.snapshot_result.next_offset, 20);
	cr_assert_not(s.has_snapshot);

	m.u.snapshot.offset = 20;
	m.u.snapshot.chunk = data + 20;
	m.u.snapshot.last_chunk = true;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert(res->u.snapshot_result.done);
	cr_assert_eq(res->u.snapshot_result.next_offset, 30);
	cr_assert(s.has_snapshot);
	cr_assert_eq(s.snapshot_index, 10);
	cr_assert(s.persist_needed);
	struct c_node *nd = c_node(c, 2);
	cr_assert_eq(nd->snap_len, sizeof data);
	cr_assert_arr_eq(nd->snap_data, data, sizeof data);
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.commit_index, 10);
	cr_assert_eq(st.applied_index, 10);
	cr_assert_eq(st.snapshot_index, 10);
	cr_assert_eq(st.first_index, 11);
	cr_assert_eq(st.last_index, 10);
	cr_assert_eq(st.last_term, 2);
	cr_assert_eq(st.leader_id, 1);

	/* A snapshot the node already covers is acknowledged as done. */
	m.u.snapshot.offset = 0;
	m.u.snapshot.chunk = data;
	m.u.snapshot.last_chunk = false;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert(res->u.snapshot_result.done);
	cr_assert_not(s.has_snapshot);
	c_free(c);
}

Test(snap, chunk_of_another_snapshot_restarts_from_zero)
{
	struct cluster *c = c_new(3, NULL);
	uint8_t data[30] = {0};
	struct baton_msg m = c_msg(BATON_MSG_SNAPSHOT, 2, 1, 2);
	m.u.snapshot.meta.index = 10;
	m.u.snapshot.meta.term = 2;
	c_voters(&m.u.snapshot.meta.config, 3);
	baton_version_state_initial(&m.u.snapshot.meta.versions);
	m.u.snapshot.total_len = sizeof data;
	m.u.snapshot.chunk_len = 10;
	m.u.snapshot.chunk = data;
	struct c_sum s;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	/* A middle chunk of a different snapshot (index 12). */
	m.u.snapshot.meta.index = 12;
	m.u.snapshot.offset = 10;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_not_null(res);
	cr_assert_eq(res->u.snapshot_result.index, 12);
	cr_assert_eq(res->u.snapshot_result.next_offset, 0);
	cr_assert_not(res->u.snapshot_result.done);
	c_free(c);
}

/* Single-chunk snapshot message for node 2 from node 1. */
static struct baton_msg c_one_chunk(baton_term term, baton_index index,
				    baton_term snap_term, const char *data)
{
	struct baton_msg m = c_msg(BATON_MSG_SNAPSHOT, term, 1, 2);
	m.u.snapshot.meta.index = index;
	m.u.snapshot.meta.term = snap_term;
	c_voters(&m.u.snapshot.meta.config, 3);
	baton_version_state_initial(&m.u.snapshot.meta.versions);
	m.u.snapshot.meta.config_index = 1;
	m.u.snapshot.total_len = strlen(data);
	m.u.snapshot.chunk_len = (uint32_t)strlen(data);
	m.u.snapshot.chunk = (const uint8_t *)data;
	m.u.snapshot.last_chunk = true;
	return m;
}

/* A follower that holds the snapshot's last entry keeps what follows it
 * (Raft, figure 13, rule 6). */
Test(snap, install_keeps_a_matching_suffix)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 9); /* 2..10 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_last(c, 2), 10);

	struct baton_msg m = c_one_chunk(2, 8, 2, "hello");
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert(s.has_snapshot);
	cr_assert_eq(s.snapshot_index, 8);
	cr_assert_eq(s.truncate_from, 0, "nothing after 8 is deleted");
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.snapshot_index, 8);
	cr_assert_eq(st.first_index, 9);
	cr_assert_eq(st.last_index, 10);
	cr_assert_eq(st.commit_index, 8);
	cr_assert_eq(st.applied_index, 8);
	cr_assert_not_null(baton_raft_entry(c_raft(c, 2), 9));
	cr_assert_not_null(baton_raft_entry(c_raft(c, 2), 10));
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert(res->u.snapshot_result.done);

	/* The kept entries commit and apply after the snapshot. */
	c_make_append(&a, 2, 1, 2, 10, 2, 10, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(s.n_apply, 2);
	cr_assert_eq(c_node(c, 2)->last_applied, 10);
	c_free(c);
}

/* A follower whose entry at the snapshot's index has another term drops
 * its whole log. */
Test(snap, install_replaces_a_conflicting_log)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 9); /* 2..10 of term 2 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);

	struct baton_msg m = c_one_chunk(3, 8, 3, "world");
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert(s.has_snapshot);
	cr_assert_eq(s.truncate_from, 9);
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.last_index, 8);
	cr_assert_eq(st.last_term, 3);
	cr_assert_eq(st.first_index, 9);
	cr_assert_eq(st.commit_index, 8);
	cr_assert_null(baton_raft_entry(c_raft(c, 2), 9));
	cr_assert_arr_eq(c_node(c, 2)->snap_data, "world", 5);
	c_free(c);
}
