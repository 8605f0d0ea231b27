/*
 * Stalling on data a node cannot interpret (src/core/versions.c): a
 * configuration or version entry of a future format, or an entry or
 * snapshot the state machine refuses (the pipeline then reports
 * BATON_EVENT_APPLY_STOPPED to the core). A stalled node
 * applies nothing at or after the index, never stands for election, hands
 * over its leadership, and keeps voting, replicating and acknowledging.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <string.h>

/* A configuration entry and a version entry of format 2, which this
 * release does not know. */
static uint8_t future_config[] = {2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xaa};
static uint8_t future_versions[] = {2, 9, 9, 9};

/* Node 1, made leader of term `term` by hand (a newer release, say),
 * sends `to` a no-op and then `e`, committing n_commit (0..2) of them.
 * Returns the index of e. The real node 1 must be down. */
static baton_index send_as_leader(struct harness *h, baton_node_id to,
				  baton_term term, struct baton_entry *e,
				  baton_index n_commit)
{
	struct baton_raft_status s = h_status(h, to);
	struct baton_entry ents[2] = {
		{.term = term,
		 .index = s.last_index + 1,
		 .type = BATON_ENTRY_NOOP},
		*e,
	};
	ents[1].term = term;
	ents[1].index = s.last_index + 2;
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = BATON_MSG_APPEND;
	m.term = term;
	m.from = 1;
	m.to = to;
	m.u.append.prev_index = s.last_index;
	m.u.append.prev_term = s.last_term;
	m.u.append.leader_commit = s.last_index + n_commit;
	m.u.append.n_entries = 2;
	m.u.append.entries = ents;
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = &m;
	cr_assert_eq(h_step(h, to, &ev), 0);
	return s.last_index + 2;
}

/* Node id's machine refuses the next entry, a command the leader l
 * proposes now: node id stalls there. Returns the entry's index. */
static baton_index refuse_next(struct harness *h, baton_node_id l,
			       baton_node_id id)
{
	baton_index at = h_status(h, l).last_index + 1;
	h->node[id].machine.refuse_from = at;
	cr_assert_eq(h_propose(h, l, "refused"), 0);
	cr_assert_eq(h_status(h, l).last_index, at);
	return at;
}

/* Run with node 1 down and count the vote requests nodes 2 and 3 send. */
static uint32_t campaigns_without_node_1(struct harness *h)
{
	uint32_t before = h->delivered[BATON_MSG_VOTE];
	uint32_t sent = 0;
	for (int t = 0; t < 100; t++) {
		h->now_ms += 10;
		for (baton_node_id i = 2; i <= 3; i++) {
			h_step(h, i,
			       &(struct baton_event){.type = BATON_EVENT_TICK});
			sent += h_count(h, BATON_MSG_VOTE, i, 0);
		}
		h_deliver_all(h);
	}
	return sent + h->delivered[BATON_MSG_VOTE] - before;
}

/* Both followers receive, committed, an entry of `type` with `buf`. */
static void both_followers_receive(uint32_t type, uint8_t *buf, uint32_t len,
				   bool expect_stall)
{
	struct harness h;
	h_init(&h, 3, NULL);
	h.down[1] = true; /* node 1 is played by hand */
	baton_term term = h_status(&h, 2).term + 1;
	struct baton_config before = h_status(&h, 2).config;
	baton_index at = 0;
	for (baton_node_id i = 2; i <= 3; i++) {
		struct baton_entry e = {.type = type, .len = len, .buf = buf};
		at = send_as_leader(&h, i, term, &e, 2);
		struct baton_raft_status s = h_status(&h, i);
		cr_assert_eq(s.commit_index, at, "committed");
		cr_assert_eq(s.last_index, at);
		if (!expect_stall) {
			cr_assert_eq(s.stalled_index, 0);
			cr_assert_eq(s.applied_index, at);
			continue;
		}
		cr_assert_eq(s.stalled_index, at);
		cr_assert_eq(s.applied_index, at - 1, "stops before it");
		cr_assert_eq(h.applied[i], at - 1, "nothing handed at it");
		/* The entry is acknowledged like any other. */
		const struct baton_update *u = &h.last[i];
		cr_assert_eq(u->n_msgs_after_persist, 1);
		/* What this node cannot read changes nothing it knows. */
		cr_assert_eq(s.config.n, before.n);
		cr_assert_eq(s.versions.machine.value, 1);
		cr_assert_eq(s.versions_index, 0);
	}
	uint32_t votes = campaigns_without_node_1(&h);
	if (expect_stall) {
		cr_assert_eq(votes, 0, "a stalled node never stands");
		for (baton_node_id i = 2; i <= 3; i++) {
			cr_assert_eq(h_status(&h, i).role, BATON_FOLLOWER);
			cr_assert_eq(h_status(&h, i).term, term);
			cr_assert_eq(h.applied[i], at - 1);
		}
	} else {
		cr_assert_gt(votes, 0, "the control campaigns");
	}
	h_free(&h);
}

Test(stall, a_future_config_entry_stalls_and_is_never_led_on)
{
	both_followers_receive(BATON_ENTRY_CONFIG, future_config,
			       sizeof future_config, true);
}

Test(stall, a_future_version_entry_stalls_and_is_never_led_on)
{
	both_followers_receive(BATON_ENTRY_VERSION, future_versions,
			       sizeof future_versions, true);
}

Test(stall, a_known_entry_in_the_same_place_does_not_stall)
{
	/* The control: the same path with a configuration it can read. */
	uint8_t cfg[2 + 9 * 3];
	size_t len = 0;
	struct baton_config c = {0};
	for (uint32_t i = 1; i <= 3; i++)
		c.members[c.n++] = (struct baton_member){i, BATON_VOTER};
	cr_assert_eq(baton_config_encode(&c, cfg, sizeof cfg, &len), 0);
	both_followers_receive(BATON_ENTRY_CONFIG, cfg, (uint32_t)len, false);
}

Test(stall, a_corrupt_version_entry_stalls_too)
{
	uint8_t bad[] = {1, 0, 0, 0, 0}; /* format 1, cut short */
	both_followers_receive(BATON_ENTRY_VERSION, bad, sizeof bad, true);
}

Test(stall, truncating_the_entry_lifts_the_stall)
{
	struct harness h;
	h_init(&h, 3, NULL);
	h.down[1] = true;
	/* A term above any the real node 1 reaches before the others learn
	 * it, so the hand-played leader never shares a term with it. */
	baton_term term = h_status(&h, 2).term + 3;
	struct baton_entry e = {.type = BATON_ENTRY_CONFIG,
				.len = sizeof future_config,
				.buf = future_config};
	/* Nothing of it committed: the others never saw it. */
	baton_index at = send_as_leader(&h, 2, term, &e, 0);
	cr_assert_eq(h_status(&h, 2).stalled_index, at);
	cr_assert_lt(h_status(&h, 2).applied_index, at);
	/* Nodes 1 and 3 never saw it; they elect a leader whose entries
	 * replace node 2's suffix. */
	h.down[1] = false;
	baton_node_id l = 0;
	for (int k = 0; k < 300 && (l == 0 || l == 2); k++) {
		h_run(&h, 10);
		l = h_leader(&h);
	}
	cr_assert(l == 1 || l == 3, "leader %llu", (unsigned long long)l);
	cr_assert_eq(h_propose(&h, l, "after"), 0);
	h_run(&h, 300);
	struct baton_raft_status s = h_status(&h, 2);
	cr_assert_eq(s.stalled_index, 0, "the entry is gone");
	cr_assert_eq(s.last_index, h_status(&h, l).last_index);
	cr_assert_eq(s.applied_index, s.commit_index, "applying again");
	cr_assert_eq(h.applied[2], s.commit_index);
	h_free(&h);
}

Test(stall, restore_finds_a_future_entry_in_the_log)
{
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	o.id = 1;
	struct baton_raft *r;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	uint8_t cfg[2 + 9];
	size_t len = 0;
	struct baton_config c = {.n = 1};
	c.members[0] = (struct baton_member){1, BATON_VOTER};
	cr_assert_eq(baton_config_encode(&c, cfg, sizeof cfg, &len), 0);
	struct baton_entry e[3] = {
		{1, 1, BATON_ENTRY_CONFIG, (uint32_t)len, cfg},
		{1, 2, BATON_ENTRY_NOOP, 0, NULL},
		{1, 3, BATON_ENTRY_VERSION, sizeof future_versions,
		 future_versions},
	};
	cr_assert_eq(baton_raft_restore(r, 1, 1, NULL, NULL, 0, e, 3), 0);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.stalled_index, 3);
	cr_assert_eq(s.config_index, 1);
	/* A single voter that is stalled never leads. */
	struct baton_update u;
	for (uint64_t t = 0; t < 10000; t += 100)
		baton_raft_step(r, t,
				&(struct baton_event){.type = BATON_EVENT_TICK},
				&u);
	baton_raft_status(r, &s);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_eq(s.term, 1);
	baton_raft_destroy(r);
}

/* ---- what the machine refuses (BATON_EVENT_APPLY_STOPPED) ---------------- */

/* The core's side alone: a driver's report needs an index, and the lowest
 * index reported wins. */
Test(stall, apply_stopped_needs_an_index)
{
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	o.id = 1;
	struct baton_raft *r;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	struct baton_entry e[3] = {
		{1, 1, BATON_ENTRY_NOOP, 0, NULL},
		{1, 2, BATON_ENTRY_NOOP, 0, NULL},
		{1, 3, BATON_ENTRY_NOOP, 0, NULL},
	};
	cr_assert_eq(baton_raft_restore(r, 1, 0, NULL, NULL, 0, e, 3), 0);
	struct baton_event ev = {.type = BATON_EVENT_APPLY_STOPPED};
	struct baton_update u;
	cr_assert_eq(baton_raft_step(r, 0, &ev, &u), BATON_EINVAL);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.stalled_index, 0);
	ev.u.apply_stopped.index = 2;
	cr_assert_eq(baton_raft_step(r, 0, &ev, &u), 0);
	ev.u.apply_stopped.index = 3;
	cr_assert_eq(baton_raft_step(r, 0, &ev, &u), 0);
	baton_raft_status(r, &s);
	cr_assert_eq(s.stalled_index, 2, "a higher index changes nothing");
	ev.u.apply_stopped.index = 1;
	cr_assert_eq(baton_raft_step(r, 0, &ev, &u), 0);
	baton_raft_status(r, &s);
	cr_assert_eq(s.stalled_index, 1, "the lowest wins");
	baton_raft_destroy(r);
}

Test(stall, a_stalled_follower_replicates_votes_and_refuses_reads)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_node_id f = l == 2 ? 3 : 2;
	baton_node_id other = 6 - l - f;
	baton_index at = refuse_next(&h, l, f);
	h_run(&h, 100);
	struct baton_raft_status s = h_status(&h, f);
	cr_assert_eq(s.stalled_index, at);
	cr_assert_eq(s.applied_index, at - 1, "it was not applied");
	cr_assert_eq(h.applied[f], at - 1);
	struct baton_pipeline_status ps;
	baton_pipeline_status(h.node[f].p, &ps);
	cr_assert_eq(ps.stalled_index, at);
	cr_assert(strstr(ps.stalled_why, "refused by the test") != NULL, "%s",
		  ps.stalled_why);
	struct baton_event rd = {.type = BATON_EVENT_READ};
	rd.u.read.request_id = 7;
	cr_assert_eq(h_step(&h, f, &rd), BATON_ESTALLED);

	/* With the other follower down, commits need f's acknowledgements. */
	h.down[other] = true;
	for (int i = 0; i < 5; i++)
		cr_assert_eq(h_propose(&h, l, "w"), 0);
	h_run(&h, 100);
	baton_index last = h_status(&h, l).last_index;
	cr_assert_eq(h_status(&h, l).commit_index, last);
	cr_assert_eq(baton_raft_match_index(h.r[l], f), last);
	cr_assert_eq(h_status(&h, f).commit_index, last);
	cr_assert_eq(h_status(&h, f).applied_index, at - 1);
	cr_assert_eq(h.applied[f], at - 1, "nothing more handed over");

	/* The other catches up; then the leader goes: f never stands, but
	 * votes the other in. */
	h.down[other] = false;
	h_run(&h, 100);
	cr_assert_eq(h_status(&h, other).last_index, last);
	h.down[l] = true;
	h.down[other] = false;
	baton_node_id l2 = 0;
	for (int k = 0; k < 300 && l2 == 0; k++) {
		h_run(&h, 10);
		cr_assert_eq(h_status(&h, f).role, BATON_FOLLOWER);
		if (h_status(&h, other).role == BATON_LEADER)
			l2 = other;
	}
	cr_assert_eq(l2, other, "elected with the stalled node's vote");
	cr_assert_eq(h_status(&h, f).stalled_index, at);
	h_free(&h);
}

Test(stall, a_stalled_leader_hands_leadership_over)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_index at = refuse_next(&h, l, l);
	h_deliver_all(&h);
	struct baton_raft_status s = h_status(&h, l);
	cr_assert_eq(s.stalled_index, at);
	cr_assert(s.transfer_target != 0 || s.role != BATON_LEADER,
		  "a transfer started");
	cr_assert_eq(h_propose(&h, l, "x"), BATON_ESTALLED);
	h_run(&h, 300);
	baton_node_id l2 = h_leader(&h);
	cr_assert(l2 != 0 && l2 != l, "leader %llu", (unsigned long long)l2);
	cr_assert_eq(h_status(&h, l).role, BATON_FOLLOWER);
	/* And it stays out, while the cluster goes on. */
	cr_assert_eq(h_propose(&h, l2, "y"), 0);
	h_run(&h, 2000);
	cr_assert_neq(h_leader(&h), l);
	cr_assert_eq(h_status(&h, l).applied_index, at - 1);
	cr_assert_eq(h_status(&h, l).commit_index,
		     h_status(&h, l2).commit_index, "still replicating");
	h_free(&h);
}

Test(stall, a_stalled_single_voter_steps_down)
{
	struct harness h;
	h_init(&h, 1, NULL);
	baton_node_id l = h_elect(&h);
	cr_assert_eq(l, 1);
	h_run(&h, 50);
	baton_index at = refuse_next(&h, 1, 1);
	cr_assert_eq(h_status(&h, 1).stalled_index, at);
	cr_assert_eq(h_status(&h, 1).role, BATON_FOLLOWER, "no one to hand to");
	h_run(&h, 2000);
	cr_assert_eq(h_leader(&h), 0);
	h_free(&h);
}

static void no_trailing(struct baton_raft_options *o)
{
	o->snapshot_trailing_entries = 0;
}

/* The log: 1 the configuration, 2 the no-op, 3 the refused command, then
 * five commands; the leader's snapshot lands on the last (entry 8). */
#define STALL_SNAP_EVERY 8u

Test(stall, a_leaders_snapshot_covering_the_stall_lifts_it)
{
	struct harness h;
	h_init_snapshots(&h, 3, no_trailing, STALL_SNAP_EVERY);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_node_id f = l == 2 ? 3 : 2;
	baton_index at = refuse_next(&h, l, f);
	h_run(&h, 100);
	cr_assert_eq(h_status(&h, f).stalled_index, at);
	h.down[f] = true;
	for (int i = 0; i < 5; i++)
		cr_assert_eq(h_propose(&h, l, "s"), 0);
	h_run(&h, 100);
	baton_index snap = h_status(&h, l).snapshot_index;
	cr_assert_eq(snap, STALL_SNAP_EVERY);
	cr_assert_eq(h_status(&h, l).first_index, snap + 1);
	h.down[f] = false;
	h_run(&h, 500);
	cr_assert_eq(h.snapshot_installed[f], snap);
	struct baton_raft_status s = h_status(&h, f);
	cr_assert_eq(s.stalled_index, 0, "the snapshot replaced it");
	cr_assert_eq(s.applied_index, s.commit_index);
	cr_assert_eq(h.applied[f], s.commit_index);
	/* A node that cannot restore it says so: restarted by a release
	 * whose machine refuses the snapshot, it is stalled there. */
	h.node[f].machine.refuse_restore = true;
	h_restart(&h, f, false);
	s = h_status(&h, f);
	cr_assert_eq(s.stalled_index, snap);
	cr_assert_lt(s.applied_index, snap);
	struct baton_pipeline_status ps;
	baton_pipeline_status(h.node[f].p, &ps);
	cr_assert_eq(ps.stalled_index, snap);
	cr_assert_eq(ps.applied, 0, "the machine holds nothing");
	h_free(&h);
}
