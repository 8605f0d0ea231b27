/* Cluster scenarios of the Raft core: leadership transfer (the
 * driver: scenario.h). */
#include "scenario.h"

/* ======================================================================== */
/* Leadership transfer.                                                     */

Test(xfer, target_becomes_leader)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id x = c_follower(c, l, 0);
	baton_term t = c_term(c, l);
	struct c_sum s;
	cr_assert_eq(c_transfer(c, l, x, &s), 0);
	cr_assert_eq(c_status(c, l).transfer_target, x);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_TIMEOUT_NOW, x), 1,
		     "the target is up to date: TimeoutNow at once");
	c_deliver_all(c);
	cr_assert_eq(c->delivered[BATON_MSG_TIMEOUT_NOW], 1);
	cr_assert_eq(c_role(c, x), BATON_LEADER);
	cr_assert_eq(c_term(c, x), t + 1, "a real election, no pre-vote");
	cr_assert_neq(c_role(c, l), BATON_LEADER);
	c_run(c, 300);
	cr_assert_eq(c_leader(c), x);
	cr_assert_eq(c_status(c, l).leader_id, x);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	cr_assert_eq(c_count_leaders(c), 1);
	c_free(c);
}

Test(xfer, lagging_target_is_caught_up_first)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id x = c_follower(c, l, 0);
	c_isolate(c, x, true);
	cr_assert_eq(c_propose_n(c, l, "lag", 4, NULL), 0);
	c_run(c, 300);
	cr_assert_lt(c_last(c, x), c_last(c, l));
	struct c_sum s;
	cr_assert_eq(c_transfer(c, l, x, &s), 0);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_TIMEOUT_NOW, x), 0,
		     "not before the target has the whole log");
	c_isolate(c, x, false);
	c_run(c, 500);
	cr_assert_eq(c_leader(c), x);
	cr_assert(c_applied_cmd(c, x, "lag-3"));
	c_free(c);
}

Test(xfer, proposals_and_changes_wait_during_a_transfer)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id x = c_follower(c, l, 0);
	c_add_node(c, 4, NULL);
	cr_assert_eq(c_transfer(c, l, x, NULL), 0);
	/* A proposal waits in the pipeline (the core would refuse it):
	 * neither appended nor failed. */
	cr_assert_eq(c_propose(c, l, "during", NULL), 0);
	cr_assert_eq(c_transfer(c, l, x, NULL), BATON_EBUSY);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), BATON_EBUSY);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, 0), 0,
		     "nothing was appended");

	/* The TimeoutNow is lost: the transfer is abandoned after an
	 * election timeout and the leader takes proposals again. */
	cr_assert_eq(c_drop(c, BATON_MSG_TIMEOUT_NOW, l, x), 1);
	c_run(c, C_ELECTION_MS + 100);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	cr_assert_eq(c_propose(c, l, "after", NULL), 0);
	c_run(c, 200);
	cr_assert(c_applied_cmd(c, l, "during"),
		  "the proposal that waited went in");
	cr_assert(c_applied_cmd(c, l, "after"));
	c_free(c);
}

Test(xfer, bad_targets)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_transfer(c, f, l, NULL), BATON_ENOTLEADER);
	cr_assert_eq(c_transfer(c, l, l, NULL), BATON_EINVAL);
	cr_assert_eq(c_transfer(c, l, 7, NULL), BATON_ENOTFOUND);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	c_free(c);
}

Test(xfer, learner_is_not_a_transfer_target)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	cr_assert_eq(c_transfer(c, l, 4, NULL), BATON_EINVAL);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	cr_assert_eq(c_propose(c, l, "still-leader", NULL), 0);
	c_free(c);
}

Test(xfer, target_zero_picks_the_most_up_to_date_voter)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, g, true);
	cr_assert_eq(c_propose(c, l, "only-f", NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_transfer(c, l, 0, NULL), 0);
	cr_assert_eq(c_status(c, l).transfer_target, f);
	c_deliver_all(c);
	cr_assert_eq(c_role(c, f), BATON_LEADER);
	c_free(c);
}
