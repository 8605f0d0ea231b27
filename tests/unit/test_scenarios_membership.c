/* Cluster scenarios of the Raft core: membership changes (the
 * driver: scenario.h). */
#include "scenario.h"

/* ======================================================================== */
/* Membership.                                                              */

/* Node id's view of member `who` (NULL: not a member). The result points
 * into a static copy of the status: use it before the next call. */
static const struct baton_member *
c_member_of(struct cluster *c, baton_node_id id, baton_node_id who)
{
	static struct baton_raft_status s;
	s = c_status(c, id);
	return baton_config_find(&s.config, who);
}

static uint32_t c_voter_count(struct cluster *c, baton_node_id id)
{
	struct baton_raft_status s = c_status(c, id);
	uint32_t n = 0;
	for (uint32_t i = 0; i < s.config.n; i++)
		n += s.config.members[i].role == BATON_VOTER;
	return n;
}

Test(member, learner_receives_entries_but_never_votes_or_counts)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	c_add_node(c, 4, NULL);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), 0);
	/* The configuration takes effect as soon as it is in the log. */
	const struct baton_member *m = c_member_of(c, l, 4);
	cr_assert_not_null(m);
	cr_assert_eq(m->role, BATON_LEARNER);
	cr_assert_eq(c_voter_count(c, l), 3);
	c_run(c, 500);

	for (baton_node_id id = 1; id <= 4; id++) {
		m = c_member_of(c, id, 4);
		cr_assert_not_null(m, "node %llu knows the learner",
				   (unsigned long long)id);
		cr_assert_eq(m->role, BATON_LEARNER);
		cr_assert_eq(c_status(c, id).config_index, 3);
	}
	struct baton_raft_status ls = c_status(c, 4);
	cr_assert_eq(ls.role, BATON_FOLLOWER);
	cr_assert_eq(ls.leader_id, l);
	cr_assert_eq(ls.last_index, c_last(c, l));
	cr_assert_eq(ls.commit_index, c_commit(c, l));
	c_assert_logs_equal(c, 4, l, 1, ls.last_index);

	/* It never counts for commit: with both voting followers cut off,
	 * the leader and the learner are not a quorum. */
	baton_node_id f = c_follower(c, l, 4);
	baton_node_id g = c_follower(c, l, f);
	cr_assert_neq(g, 4);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	baton_index before = c_commit(c, l);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "only-learner", &idx), 0);
	c_run(c, 500);
	cr_assert_eq(c_last(c, 4), idx, "the learner has the entry");
	cr_assert_eq(c_commit(c, l), before, "but it does not count");
	cr_assert_not(c_applied_cmd(c, l, "only-learner"));
	c_isolate(c, f, false);
	c_run(c, 500);
	cr_assert_geq(c_commit(c, l), idx);
	cr_assert(c_applied_cmd(c, 4, "only-learner"));

	/* It never stands for election, even cut off for long. */
	c_isolate(c, 4, true);
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_not(c_node(c, 4)->campaigned);
	cr_assert_eq(c_term(c, 4), c_term(c, l));
	c_free(c);
}

/* A candidate asks no learner for its vote, and a learner's grant does not
 * count towards the quorum. */
Test(member, learner_grant_does_not_count_in_an_election)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	baton_node_id f = c_follower(c, l, 4);
	baton_node_id g = c_follower(c, l, f);
	cr_assert(g != 4 && g != l);
	baton_term t = c_term(c, l);
	c_isolate(c, l, true);

	/* Make f stand at once (as a transfer would). */
	struct baton_msg m = c_msg(BATON_MSG_TIMEOUT_NOW, t, l, f);
	struct c_sum s;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(s.role, BATON_CANDIDATE);
	cr_assert_eq(s.term, t + 1);
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE, g), 1);
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE, 4), 0,
		     "no vote request to a learner");
	c_drop(c, 0, 0, 0);

	m = c_msg(BATON_MSG_VOTE_RESULT, t + 1, 4, f);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(c_role(c, f), BATON_CANDIDATE,
		     "self + a learner is not a quorum of 3 voters");

	m.from = g;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(c_role(c, f), BATON_LEADER, "self + g is");
	c_free(c);
}

Test(member, learner_acks_confirm_no_read_and_no_leadership)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	baton_node_id f = c_follower(c, l, 4);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	cr_assert_eq(c_read(c, l, 21, NULL), 0);
	c_deliver_all(c); /* the learner answers the round */
	cr_assert_null(c_read_result(c, l, 21),
		       "a learner's answer confirmed a read");
	/* Check-quorum counts voters only: the leader steps down. */
	c_run(c, 3 * C_ELECTION_MS);
	cr_assert_neq(c_role(c, l), BATON_LEADER);
	const struct baton_read_result *r = c_read_result(c, l, 21);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, BATON_ELEADERCHANGED);
	c_free(c);
}

Test(member, promoted_learner_becomes_a_voter_that_counts)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	cr_assert_eq(c_last(c, 4), c_last(c, l), "caught up");
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, 4), 0);
	c_run(c, 500);
	for (baton_node_id id = 1; id <= 4; id++) {
		const struct baton_member *m = c_member_of(c, id, 4);
		cr_assert_not_null(m);
		cr_assert_eq(m->role, BATON_VOTER, "on node %llu",
			     (unsigned long long)id);
		cr_assert_eq(c_voter_count(c, id), 4);
	}
	/* Four voters: a quorum is three. With one old follower cut off,
	 * the leader, the other follower and 4 commit: 4 counts. */
	baton_node_id f = c_follower(c, l, 4);
	c_isolate(c, f, true);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "with-4", &idx), 0);
	c_run(c, 500);
	cr_assert_eq(c_commit(c, l), idx);
	/* With 4 cut off too, two of four voters are not a quorum. */
	c_isolate(c, 4, true);
	cr_assert_eq(c_propose(c, l, "without-4", &idx), 0);
	c_run(c, 500);
	cr_assert_lt(c_commit(c, l), idx);
	c_free(c);
}

static void two_rounds(struct baton_raft_options *o)
{
	o->promotion_rounds = 2;
}

Test(member, promotion_of_a_learner_that_lags_fails)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(two_rounds, &l);
	c_isolate(c, 4, true);
	cr_assert_eq(c_propose_n(c, l, "lag", 5, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, 4), 0);
	c_run(c, 2 * C_ELECTION_MS + 200);
	cr_assert_eq(c_node(c, l)->promotion_failed, 4);
	cr_assert_eq(c_member_of(c, l, 4)->role, BATON_LEARNER);
	cr_assert_eq(c_voter_count(c, l), 3);
	c_free(c);
}

Test(member, remove_a_follower)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	baton_term t = c_term(c, l);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, f), 0);
	cr_assert_null(c_member_of(c, l, f));
	c_run(c, 300);
	cr_assert_eq(c_status(c, l).config.n, 2);
	cr_assert_null(c_member_of(c, g, f));
	cr_assert_eq(c_commit(c, l), 3, "the removal committed");

	/* The leader no longer replicates to f; l and g commit alone. */
	c->sent_to[f] = 0;
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "two", &idx), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), idx);
	cr_assert(c_applied_cmd(c, g, "two"));
	cr_assert_eq(c->sent_to[f], 0, "nothing is sent to a removed node");

	/* The removed node does not disturb the cluster. */
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_eq(c_leader(c), l);
	cr_assert_eq(c_term(c, l), t);
	c_free(c);
}

Test(member, removed_leader_steps_down_and_the_rest_elect)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_term t = c_term(c, l);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, l), 0);
	cr_assert_null(c_member_of(c, l, l));
	cr_assert_eq(c_role(c, l), BATON_LEADER, "until the change commits");
	baton_index cfg = c_status(c, l).config_index;
	cr_assert_eq(cfg, 3);
	c_deliver_all(c);
	struct baton_raft_status s = c_status(c, l);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_geq(s.commit_index, cfg);

	baton_node_id n = c_tick_until_leader(c, 20000);
	cr_assert_neq(n, l);
	cr_assert_gt(c_term(c, n), t);
	struct baton_raft_status ns = c_status(c, n);
	cr_assert_eq(ns.config.n, 2);
	cr_assert_null(baton_config_find(&ns.config, l));
	cr_assert_eq(c_propose(c, n, "after", NULL), 0);
	c_run(c, 300);
	cr_assert(c_applied_cmd(c, c_follower(c, n, l), "after"));

	/* The old leader, no longer a voter, never stands again. */
	c_node(c, l)->campaigned = false;
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_not(c_node(c, l)->campaigned);
	cr_assert_eq(c_leader(c), n);
	c_free(c);
}

/* A configuration takes effect when appended, so a truncated
 * configuration entry must give the previous configuration back. */
Test(member, truncated_config_entry_is_undone)
{
	baton_node_id a;
	struct cluster *c = c_three(NULL, &a);
	c_add_node(c, 4, NULL);
	cr_assert_eq(c_member(c, a, BATON_EVENT_ADD_LEARNER, 4), 0);
	c_isolate(c, a, true); /* the entry never leaves a */
	struct baton_raft_status s = c_status(c, a);
	cr_assert_eq(s.config_index, 3);
	cr_assert_eq(s.config.n, 4);

	baton_node_id b = c_tick_until_leader(c, 20000);
	cr_assert_neq(b, a);
	c_run(c, 300);
	c_isolate(c, a, false);
	c_run(c, 1000);
	s = c_status(c, a);
	cr_assert_eq(s.leader_id, b);
	cr_assert_eq(c_node(c, a)->min_truncate_from, 3);
	cr_assert_eq(baton_raft_entry(c_raft(c, a), 3)->type,
		     BATON_ENTRY_VERSION);
	cr_assert_eq(s.config_index, 1, "back to the bootstrap config");
	cr_assert_eq(s.config.n, 3);
	cr_assert_null(baton_config_find(&s.config, 4));
	c_free(c);
}

Test(member, one_change_at_a_time)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	c_add_node(c, 4, NULL);
	c_add_node(c, 5, NULL);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_member(c, f, BATON_EVENT_ADD_LEARNER, 4),
		     BATON_ENOTLEADER);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), 0);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 5), BATON_EBUSY);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, f), BATON_EBUSY);
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, 4), BATON_EBUSY);
	cr_assert_null(c_member_of(c, l, 5), "a refused change is not made");
	c_run(c, 300);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), BATON_EEXISTS);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 0), BATON_EINVAL);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, 7), BATON_ENOTFOUND);
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, f), BATON_EINVAL,
		     "already a voter");
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 5), 0,
		     "the first change committed");
	c_free(c);
}

Test(member, no_change_before_the_leaders_noop_commits)
{
	struct cluster *c = c_new(1, NULL);
	c_add_node(c, 2, NULL);
	c_set_manual(c, 1, true);
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	cr_assert_eq(c_member(c, 1, BATON_EVENT_ADD_LEARNER, 2), BATON_EBUSY);
	c_persist(c, 1);
	cr_assert_eq(c_member(c, 1, BATON_EVENT_ADD_LEARNER, 2), 0);
	c_free(c);
}
