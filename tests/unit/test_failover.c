/* Fast failure detection (BATON_EVENT_PEER_CLOSED): a follower that learns
 * its leader's connection closed stands within a heartbeat interval; a
 * close while the leader lives disturbs nothing. The nodes run the core's
 * default timers (election timeout 1000 ms, heartbeat 100 ms), so without
 * the close no follower could stand within 1000 ms of its leader's last
 * heartbeat. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

/* Well under one election timeout: only the fast path elects by then. */
#define FAST_MS 400u

static void closed(struct harness *h, baton_node_id at, baton_node_id peer)
{
	struct baton_event ev = {.type = BATON_EVENT_PEER_CLOSED};
	ev.u.peer_closed.id = peer;
	cr_assert_eq(h_step(h, at, &ev), 0);
}

/* The other two nodes of three, given one. */
static void others(baton_node_id l, baton_node_id *a, baton_node_id *b)
{
	*a = l == 1 ? 2 : 1;
	*b = 6 - l - *a;
}

/* Run until a node other than `old` leads or `ms` pass; its id or 0. */
static baton_node_id new_leader_within(struct harness *h, baton_node_id old,
				       uint64_t ms)
{
	for (uint64_t t = 0; t < ms; t += 10) {
		h_run(h, 10);
		baton_node_id l = h_leader(h);
		if (l != 0 && l != old)
			return l;
	}
	return 0;
}

static void default_timers(struct baton_raft_options *o)
{
	struct baton_raft_options d;
	baton_raft_options_default(&d);
	o->election_timeout_ms = d.election_timeout_ms;
	o->heartbeat_interval_ms = d.heartbeat_interval_ms;
	cr_assert_geq(d.election_timeout_ms, 2 * FAST_MS);
}

/* A settled cluster: the leader's heartbeats just went out. */
static baton_node_id settled(struct harness *h)
{
	h_init(h, 3, default_timers);
	baton_node_id l = h_elect(h);
	h_run(h, 300);
	cr_assert_eq(h_leader(h), l);
	return l;
}

Test(failover, leader_killed_both_followers_told_new_leader_fast)
{
	struct harness h;
	baton_node_id l = settled(&h), a, b;
	others(l, &a, &b);
	baton_term t = h_status(&h, l).term;
	h.down[l] = true; /* killed: no ticks, no messages */
	closed(&h, a, l);
	closed(&h, b, l);
	cr_assert_eq(h_status(&h, a).leader_id, 0, "the lease is dropped");
	baton_node_id nl = new_leader_within(&h, l, FAST_MS);
	cr_assert(nl == a || nl == b, "a follower leads within %u ms", FAST_MS);
	cr_assert_gt(h_status(&h, nl).term, t);
	h_free(&h);
}

Test(failover, followers_told_in_turn_the_second_wins)
{
	struct harness h;
	baton_node_id l = settled(&h), a, b;
	others(l, &a, &b);
	h.down[l] = true;
	closed(&h, a, l);
	/* a's pre-vote reaches b, still in lease: refused. */
	h_run(&h, 150);
	cr_assert_neq(h_status(&h, a).role, BATON_LEADER, "b refused");
	cr_assert_neq(h_status(&h, b).role, BATON_LEADER);
	closed(&h, b, l);
	baton_node_id nl = new_leader_within(&h, l, FAST_MS - 150);
	cr_assert(nl == a || nl == b);
	h_free(&h);
}

Test(failover, the_voter_with_the_longer_log_stands_again_and_wins)
{
	struct harness h;
	baton_node_id l = settled(&h), a, b;
	others(l, &a, &b);
	/* An entry only a has: b cannot win, and must not be needed. */
	h.down[b] = true;
	cr_assert_eq(h_propose(&h, l, "only-a"), 0);
	h_run(&h, 20);
	h.down[b] = false;
	cr_assert_gt(h_status(&h, a).last_index, h_status(&h, b).last_index);
	h.down[l] = true;
	/* a learns first; b, in lease, refuses it. Then b learns and asks
	 * a, which refuses a shorter log and stands again at once. */
	closed(&h, a, l);
	h_run(&h, 150);
	closed(&h, b, l);
	baton_node_id nl = new_leader_within(&h, l, FAST_MS - 150);
	cr_assert_eq(nl, a, "the longer log leads, well within a timeout");
	h_free(&h);
}

Test(failover, close_while_the_leader_lives_disturbs_nothing)
{
	struct harness h;
	baton_node_id l = settled(&h), a, b;
	others(l, &a, &b);
	baton_term t = h_status(&h, l).term;
	/* A reset of one follower's connection: the leader lives. */
	closed(&h, a, l);
	cr_assert_eq(h_status(&h, a).leader_id, 0);
	h_run(&h, 1000);
	cr_assert_eq(h_leader(&h), l, "the leader and b refused");
	cr_assert_eq(h_status(&h, l).term, t, "no term was raised");
	cr_assert_eq(h_status(&h, a).leader_id, l, "a heartbeat restores it");
	cr_assert_eq(h_status(&h, b).leader_id, l);
	h_free(&h);
}

Test(failover, close_of_a_peer_that_is_not_the_leader_changes_nothing)
{
	struct harness h;
	baton_node_id l = settled(&h), a, b;
	others(l, &a, &b);
	struct baton_raft_status before = h_status(&h, a);
	closed(&h, a, b);
	closed(&h, l, a); /* a leader is told of a follower's close */
	struct baton_raft_status after = h_status(&h, a);
	cr_assert_eq(after.leader_id, before.leader_id);
	cr_assert_eq(after.role, BATON_FOLLOWER);
	cr_assert_eq(h_status(&h, l).role, BATON_LEADER);
	h_free(&h);
}

static void no_check_quorum(struct baton_raft_options *o)
{
	default_timers(o);
	o->check_quorum = false;
}

Test(failover, without_leases_a_close_is_ignored)
{
	struct harness h;
	h_init(&h, 3, no_check_quorum);
	baton_node_id l = h_elect(&h), a, b;
	h_run(&h, 300);
	cr_assert_eq(h_leader(&h), l);
	others(l, &a, &b);
	h.down[l] = true;
	closed(&h, a, l);
	closed(&h, b, l);
	cr_assert_eq(h_status(&h, a).leader_id, l,
		     "a spurious close could depose a live leader");
	cr_assert_eq(new_leader_within(&h, l, FAST_MS), 0,
		     "only the election timeout counts");
	h_free(&h);
}

Test(failover, peer_closed_of_id_zero_is_refused)
{
	struct harness h;
	h_init(&h, 1, NULL);
	h_elect(&h);
	const struct baton_raft *r = h.r[1];
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	o.id = 9;
	struct baton_raft *lone;
	cr_assert_eq(baton_raft_create(&o, &lone), 0);
	struct baton_event ev = {.type = BATON_EVENT_PEER_CLOSED};
	struct baton_update u;
	cr_assert_eq(baton_raft_step(lone, 1, &ev, &u), BATON_EINVAL);
	baton_raft_destroy(lone);
	cr_assert_not_null(r);
	h_free(&h);
}

Test(failover, a_learner_forgets_the_leader_but_never_stands)
{
	struct harness h;
	baton_node_id l = settled(&h), a, b;
	others(l, &a, &b);
	h_add_empty(&h, 4);
	struct baton_event add = {.type = BATON_EVENT_ADD_LEARNER};
	add.u.member.id = 4;
	cr_assert_eq(h_step(&h, l, &add), 0);
	h_run(&h, 300);
	cr_assert_eq(h_status(&h, 4).leader_id, l, "the learner follows");
	baton_term t = h_status(&h, l).term;
	/* A reset of the learner's connection alone disturbs nobody. */
	closed(&h, 4, l);
	cr_assert_eq(h_status(&h, 4).leader_id, 0);
	h_run(&h, 300);
	cr_assert_eq(h_leader(&h), l);
	cr_assert_eq(h_status(&h, l).term, t);
	cr_assert_eq(h_status(&h, 4).leader_id, l, "a heartbeat restores it");
	/* The leader dies: the voters elect, the learner does not stand. */
	h.down[l] = true;
	closed(&h, a, l);
	closed(&h, b, l);
	closed(&h, 4, l);
	baton_node_id nl = new_leader_within(&h, l, FAST_MS);
	cr_assert(nl == a || nl == b);
	cr_assert_eq(h_status(&h, 4).role, BATON_FOLLOWER);
	cr_assert_eq(h_status(&h, 4).term, h_status(&h, nl).term);
	h_free(&h);
}

Test(failover, a_close_during_a_transfer_leaves_it_to_the_target)
{
	struct harness h;
	baton_node_id l = settled(&h), a, b;
	others(l, &a, &b);
	struct baton_event tr = {.type = BATON_EVENT_TRANSFER};
	tr.u.transfer.target = a;
	cr_assert_eq(h_step(&h, l, &tr), 0);
	/* The old leader's connection to b resets as it hands over. */
	closed(&h, b, l);
	h_run(&h, 500);
	cr_assert_eq(h_leader(&h), a, "the transfer's target leads");
	cr_assert_eq(h_status(&h, b).leader_id, a);
	cr_assert_eq(h_status(&h, l).leader_id, a);
	h_free(&h);
}
