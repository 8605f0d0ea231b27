/* Cluster scenarios of the Raft core: elections and check-quorum
 * (the driver: scenario.h). */
#include "harness.h" /* h_lone_leader */
#include "scenario.h"

/* ======================================================================== */
/* Elections.                                                               */

Test(elect, three_nodes_elect_exactly_one_leader)
{
	struct cluster *c = c_new(3, NULL);
	baton_node_id l = c_tick_until_leader(c, 20000);
	cr_assert_neq(l, 0);
	c_run(c, 2000);
	cr_assert_eq(c_count_leaders(c), 1);
	cr_assert_eq(c_leader(c), l, "a healthy cluster keeps its leader");
	baton_term t = c_term(c, l);
	cr_assert_geq(t, 2);
	for (baton_node_id id = 1; id <= 3; id++) {
		struct baton_raft_status s = c_status(c, id);
		cr_assert_eq(s.term, t);
		cr_assert_eq(s.leader_id, l, "node %llu follows %llu",
			     (unsigned long long)id, (unsigned long long)l);
		if (id != l)
			cr_assert_eq(s.role, BATON_FOLLOWER);
	}
	cr_assert_eq(c_status(c, l).vote, l, "a leader voted for itself");
	c_free(c);
}

/* The Raft no-op of a new leader is a version entry carrying the version
 * state as the leader sees it: the log's (initial here), with its own row
 * in the table (info replies are dropped in these scenarios). */
Test(elect, new_leader_appends_a_version_entry_of_its_term)
{
	struct cluster *c = c_new(3, NULL);
	baton_node_id l = c_tick_until_leader(c, 20000);
	c_run(c, 300);
	struct baton_raft_status s = c_status(c, l);
	cr_assert_eq(s.last_index, 2, "config entry, then the version entry");
	const struct baton_entry *e = baton_raft_entry(c_raft(c, l), 2);
	cr_assert_not_null(e);
	cr_assert_eq(e->type, BATON_ENTRY_VERSION);
	cr_assert_eq(e->term, s.term);
	struct baton_version_state v;
	cr_assert_eq(baton_version_state_decode(e->buf, e->len, &v), 0);
	cr_assert_eq(v.machine.value, 1, "no member known: no upgrade");
	cr_assert_eq(v.n, 1);
	cr_assert_eq(v.members[0].id, l);
	cr_assert_eq(v.members[0].profile.machine_max.value,
		     baton_release_current()->machine_max.value);
	cr_assert_eq(s.versions_index, 2);
	cr_assert_eq(baton_raft_entry(c_raft(c, l), 1)->type,
		     BATON_ENTRY_CONFIG);
	for (baton_node_id id = 1; id <= 3; id++) {
		cr_assert_eq(c_commit(c, id), 2);
		const struct c_applied *a = c_applied_at(c, id, 2);
		cr_assert_not_null(a, "node %llu applied the version entry",
				   (unsigned long long)id);
		cr_assert_eq(a->type, BATON_ENTRY_VERSION);
		cr_assert_eq(a->term, s.term);
		cr_assert_eq(c_applied_at(c, id, 1)->type, BATON_ENTRY_CONFIG);
	}
	c_free(c);
}

/* The pre-candidate asks at term+1 but changes nobody's term, its own
 * included, and a voter's grant records no vote. */
Test(elect, pre_vote_changes_no_term)
{
	struct cluster *c = c_new(3, NULL);
	struct c_sum s;

	/* The candidate side. */
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, &s), 0);
	cr_assert_eq(s.role, BATON_PRE_CANDIDATE);
	cr_assert_eq(s.term, 1);
	cr_assert_not(s.hard_state_changed, "a pre-vote persists nothing");
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE, 0), 2);
	cr_assert_eq(s.n_msgs_after, 0);
	const struct baton_msg *pv = c_sum_find(&s, false, BATON_MSG_VOTE, 2);
	cr_assert_not_null(pv);
	cr_assert(pv->u.vote.pre_vote);
	cr_assert_eq(pv->term, 2, "asks for the next term");
	cr_assert_eq(pv->u.vote.last_log_index, 1);
	cr_assert_eq(pv->u.vote.last_log_term, 1);

	/* The voter side. */
	struct baton_msg m = *pv;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert_not(s.hard_state_changed);
	cr_assert_eq(s.term, 1);
	const struct baton_msg *res =
		c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, 1);
	cr_assert_not_null(res, "a pre-vote answer goes at once");
	cr_assert(res->u.vote_result.pre_vote);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(res->term, 2);
	cr_assert_eq(c_sum_count(&s, true, 0, 0), 0);
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.term, 1);
	cr_assert_eq(st.vote, 0);

	/* Having granted a pre-vote binds nothing: a real vote from another
	 * candidate in term 2 is still granted. */
	m = c_msg(BATON_MSG_VOTE, 2, 3, 2);
	m.u.vote.last_log_index = 1;
	m.u.vote.last_log_term = 1;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 3);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(c_status(c, 2).vote, 3);
	c_free(c);
}

Test(elect, node_with_a_live_leader_refuses_pre_votes)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	struct baton_raft_status before = c_status(c, f);

	struct baton_msg m = c_msg(BATON_MSG_VOTE, before.term + 1, g, f);
	m.u.vote.pre_vote = true;
	m.u.vote.last_log_index = before.last_index + 5; /* better log */
	m.u.vote.last_log_term = before.last_term;
	struct c_sum s;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.pre_vote);
	cr_assert_not(res->u.vote_result.granted,
		      "heard from the leader within the election timeout");
	cr_assert_eq(res->term, before.term, "a refusal carries our term");
	struct baton_raft_status after = c_status(c, f);
	cr_assert_eq(after.term, before.term);
	cr_assert_eq(after.leader_id, l);
	cr_assert_not(s.hard_state_changed);

	/* A real vote request at a higher term is ignored altogether. */
	m.u.vote.pre_vote = false;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(s.n_msgs + s.n_msgs_after, 0);
	cr_assert_eq(c_term(c, f), before.term);
	cr_assert_eq(c_status(c, f).leader_id, l);

	/* Once the leader has been silent for an election timeout, the same
	 * pre-vote is granted. */
	c_drop(c, 0, 0, 0);
	c_advance(c, C_ELECTION_MS + 1);
	m.u.vote.pre_vote = true;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	res = c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(c_term(c, f), before.term);
	c_free(c);
}

/* The voter compares (last term, last index): a candidate whose log is
 * behind is refused, for real votes and pre-votes alike. */
Test(elect, candidate_with_a_stale_log_is_refused)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	cr_assert_eq(c_propose_n(c, l, "x", 3, NULL), 0);
	c_run(c, 300);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	struct baton_raft_status fs = c_status(c, f);
	cr_assert_eq(fs.last_index, 5);
	c_drop(c, 0, 0, 0);
	c_advance(c, C_ELECTION_MS + 1); /* the leader lease is over */

	struct c_sum s;
	/* Same last term, shorter log. */
	struct baton_msg m = c_msg(BATON_MSG_VOTE, fs.term + 1, g, f);
	m.u.vote.pre_vote = true;
	m.u.vote.last_log_index = fs.last_index - 1;
	m.u.vote.last_log_term = fs.last_term;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_not(c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g)
			      ->u.vote_result.granted);

	/* Longer log but an older last term. */
	m.u.vote.last_log_index = fs.last_index + 10;
	m.u.vote.last_log_term = fs.last_term - 1;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_not(c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g)
			      ->u.vote_result.granted);

	/* A real vote: the term moves on, the vote is refused. */
	m.u.vote.pre_vote = false;
	m.u.vote.last_log_index = fs.last_index - 1;
	m.u.vote.last_log_term = fs.last_term;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, g);
	cr_assert_not_null(res);
	cr_assert_not(res->u.vote_result.granted);
	struct baton_raft_status after = c_status(c, f);
	cr_assert_eq(after.term, fs.term + 1);
	cr_assert_eq(after.vote, 0);
	cr_assert(s.hard_state_changed);
	cr_assert_eq(s.hs_vote, 0);

	/* An up-to-date candidate in that term gets the vote. */
	m = c_msg(BATON_MSG_VOTE, fs.term + 1, l, f);
	m.u.vote.last_log_index = fs.last_index;
	m.u.vote.last_log_term = fs.last_term;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, l);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(c_status(c, f).vote, l);
	c_free(c);
}

/* A granted vote is persisted with the update (hard state: term and vote)
 * and its answer rides in msgs_after_persist, never in msgs. */
Test(elect, vote_result_waits_for_the_disk)
{
	struct cluster *c = c_new(3, NULL);
	c_set_manual(c, 2, true);
	struct baton_msg m = c_msg(BATON_MSG_VOTE, 2, 1, 2);
	m.u.vote.last_log_index = 1;
	m.u.vote.last_log_term = 1;
	struct c_sum s;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert(s.hard_state_changed);
	cr_assert_eq(s.hs_term, 2);
	cr_assert_eq(s.hs_vote, 1);
	cr_assert(s.persist_needed);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE_RESULT, 0), 0,
		     "a vote never goes before it is durable");
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE_RESULT, 1), 1);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 1);
	cr_assert(res->u.vote_result.granted);
	cr_assert_not(res->u.vote_result.pre_vote);
	cr_assert_eq(res->term, 2);

	/* The manual disk holds it back until the write completes. */
	cr_assert_eq(c_count(c, BATON_MSG_VOTE_RESULT, 2, 1), 0);
	c_persist(c, 2);
	cr_assert_eq(c_count(c, BATON_MSG_VOTE_RESULT, 2, 1), 1);
	cr_assert_eq(c_node(c, 2)->hs_vote, 1);
	cr_assert_eq(c_node(c, 2)->hs_term, 2);

	/* A second request for the same vote is answered the same way. */
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE_RESULT, 0), 0);
	cr_assert(c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 1)
			  ->u.vote_result.granted);
	/* And another candidate of the same term is refused. */
	m.from = 3;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert_not(c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 3)
			      ->u.vote_result.granted);
	c_free(c);
}

static void no_pre_vote(struct baton_raft_options *o)
{
	o->pre_vote = false;
}

/* The candidate's own vote requests also wait for its self-vote. */
Test(elect, vote_requests_wait_for_the_candidates_disk)
{
	struct cluster *c = c_new(3, no_pre_vote);
	c_set_manual(c, 1, true);
	c_advance(c, 2 * C_ELECTION_MS);
	struct c_sum s;
	cr_assert_eq(c_tick_node(c, 1, &s), 0);
	cr_assert_eq(s.role, BATON_CANDIDATE);
	cr_assert_eq(s.term, 2);
	cr_assert(s.hard_state_changed);
	cr_assert_eq(s.hs_vote, 1);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE, 0), 0);
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE, 0), 2);
	cr_assert_eq(c_count(c, BATON_MSG_VOTE, 1, 0), 0);
	c_persist(c, 1);
	cr_assert_eq(c_count(c, BATON_MSG_VOTE, 1, 0), 2);
	c_deliver_all(c);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	c_free(c);
}

Test(elect, duplicate_grants_count_once)
{
	struct cluster *c = c_new(5, no_pre_vote);
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_CANDIDATE);
	c_drop(c, 0, 0, 0);
	struct baton_msg m = c_msg(BATON_MSG_VOTE_RESULT, 2, 2, 1);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_CANDIDATE,
		     "self + node 2 (thrice) is 2 of 5");
	/* A grant from an earlier term does not count either. */
	m = c_msg(BATON_MSG_VOTE_RESULT, 1, 4, 1);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_CANDIDATE);
	m = c_msg(BATON_MSG_VOTE_RESULT, 2, 3, 1);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	c_free(c);
}

Test(elect, a_majority_of_refusals_ends_the_campaign)
{
	struct cluster *c = c_new(5, no_pre_vote);
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, NULL), 0);
	c_drop(c, 0, 0, 0);
	for (baton_node_id id = 2; id <= 4; id++) {
		cr_assert_eq(c_role(c, 1), BATON_CANDIDATE);
		struct baton_msg m = c_msg(BATON_MSG_VOTE_RESULT, 2, id, 1);
		cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	}
	struct baton_raft_status s = c_status(c, 1);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_eq(s.term, 2);
	cr_assert_eq(s.vote, 1, "the vote of the term stays cast");
	c_free(c);
}

Test(elect, single_node_leads_and_commits_after_persisting)
{
	struct cluster *c = c_new(1, NULL);
	c_set_manual(c, 1, true);
	c_advance(c, 2 * C_ELECTION_MS);
	struct c_sum s;
	cr_assert_eq(c_tick_node(c, 1, &s), 0);
	cr_assert_eq(s.role, BATON_LEADER, "a single voter elects itself");
	cr_assert_eq(s.term, 2);
	cr_assert_eq(s.leader_id, 1);
	cr_assert_eq(s.n_entries, 1, "its version entry");
	cr_assert(s.persist_needed);
	cr_assert_eq(s.persist_index, 2);
	cr_assert_eq(s.persist_term, 2);
	cr_assert_lt(s.commit_index, 2, "not before the disk says so");
	cr_assert_eq(s.n_apply, 0);
	cr_assert_eq(c_node(c, 1)->n_applied, 0);

	c_persist(c, 1);
	cr_assert_eq(c_commit(c, 1), 2);
	cr_assert_eq(c_node(c, 1)->n_applied, 2);
	cr_assert_eq(c_applied_at(c, 1, 2)->type, BATON_ENTRY_VERSION);

	baton_index idx;
	cr_assert_eq(c_propose(c, 1, "solo", &idx), 0);
	cr_assert_eq(idx, 3);
	cr_assert_eq(c_commit(c, 1), 2);
	cr_assert_not(c_applied_cmd(c, 1, "solo"));
	c_persist(c, 1);
	cr_assert_eq(c_commit(c, 1), 3);
	cr_assert(c_applied_cmd(c, 1, "solo"));
	c_free(c);
}

/* The pipeline reports each write once; the core, driven by anyone, takes
 * a stale report for what it is. */
Test(elect, a_stale_persistence_report_changes_nothing)
{
	uint64_t now = 0;
	struct baton_raft *r = h_lone_leader(NULL, &now);
	struct baton_raft_status st;
	baton_raft_status(r, &st);
	baton_index old = st.commit_index;
	struct baton_buffer b = {"solo", 4};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 1;
	ev.u.propose.bufs = &b;
	struct baton_update u;
	cr_assert_eq(baton_raft_step(r, now, &ev, &u), 0);
	cr_assert(u.persist_needed);
	ev.type = BATON_EVENT_PERSISTED;
	ev.u.persisted.index = u.persist_index;
	ev.u.persisted.term = u.persist_term;
	cr_assert_eq(baton_raft_step(r, now, &ev, &u), 0);
	cr_assert_eq(u.commit_index, old + 1);
	cr_assert_eq(u.n_apply, 1);
	ev.u.persisted.index = old;
	cr_assert_eq(baton_raft_step(r, now, &ev, &u), 0);
	cr_assert_eq(u.commit_index, old + 1);
	cr_assert_eq(u.n_apply, 0);
	baton_raft_destroy(r);
}

Test(elect, a_learner_or_unknown_node_never_campaigns)
{
	struct cluster *c = c_new(3, NULL);
	c_add_node(c, 4, NULL); /* empty: not in any configuration */
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_not(c_node(c, 4)->campaigned);
	cr_assert_eq(c_term(c, 4), 0);
	cr_assert_neq(c_leader(c), 0);
	c_free(c);
}

/* ======================================================================== */
/* Check-quorum.                                                            */

Test(checkquorum, leader_hearing_from_nobody_steps_down)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_term t = c_term(c, l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	c_run(c, C_ELECTION_MS - 100);
	cr_assert_eq(c_role(c, l), BATON_LEADER,
		     "not before an election timeout");
	c_run(c, C_ELECTION_MS + 200);
	struct baton_raft_status s = c_status(c, l);
	cr_assert_neq(s.role, BATON_LEADER, "steps down within two timeouts");
	cr_assert_eq(s.term, t, "stepping down bumps no term (pre-vote)");
	cr_assert_eq(s.leader_id, 0);
	c_free(c);
}

Test(checkquorum, leader_with_one_live_follower_stays)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	c_isolate(c, c_follower(c, l, 0), true);
	c_run(c, 5 * C_ELECTION_MS);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	c_free(c);
}

static void no_check_quorum(struct baton_raft_options *o)
{
	o->check_quorum = false;
}

Test(checkquorum, disabled_keeps_an_isolated_leader)
{
	baton_node_id l;
	struct cluster *c = c_three(no_check_quorum, &l);
	baton_node_id f = c_follower(c, l, 0);
	c_isolate(c, f, true);
	c_isolate(c, c_follower(c, l, f), true);
	c_run(c, 5 * C_ELECTION_MS);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	c_free(c);
}
