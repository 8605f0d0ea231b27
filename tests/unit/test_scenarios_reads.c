/* Cluster scenarios of the Raft core: linearizable reads through the
 * read index (the driver: scenario.h). */
#include "scenario.h"

/* ======================================================================== */
/* Read index.                                                              */

Test(readidx, leader_releases_a_read_only_after_a_quorum_round)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);

	/* A heartbeat round sent before the read: its answers prove
	 * nothing about the read. */
	c_advance(c, C_HEARTBEAT_MS);
	cr_assert_eq(c_tick_node(c, l, NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 1);

	struct c_sum s;
	cr_assert_eq(c_read(c, l, 7, &s), 0);
	cr_assert_eq(s.n_reads, 0, "not before a quorum confirms");
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_APPEND, f), 1,
		     "the read starts a heartbeat round");
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_APPEND, g), 1);

	/* The old round's answer from f: still nothing. */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	cr_assert_null(c_read_result(c, l, 7),
		       "an answer to an earlier round released the read");
	/* The new round reaches f; its answer is not back yet. */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert_null(c_read_result(c, l, 7));
	/* f's answer makes a quorum with the leader (g never answered). */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	const struct baton_read_result *r = c_read_result(c, l, 7);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, 0);
	cr_assert_eq(r->read_index, c_commit(c, l));
	cr_assert_eq(r->read_index, 2);
	cr_assert_eq(c_node(c, l)->n_reads, 1);
	c_free(c);
}

Test(readidx, read_index_covers_the_latest_commit)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "w", &idx), 0);
	c_deliver_all(c);
	cr_assert_eq(c_commit(c, l), idx);
	cr_assert_eq(c_read(c, l, 1, NULL), 0);
	c_deliver_all(c);
	const struct baton_read_result *r = c_read_result(c, l, 1);
	cr_assert_not_null(r);
	cr_assert_eq(r->read_index, idx);
	c_free(c);
}

Test(readidx, follower_read_goes_through_the_leader)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	struct c_sum s;
	cr_assert_eq(c_read(c, f, 9, &s), 0);
	cr_assert_eq(s.n_reads, 0);
	const struct baton_msg *m =
		c_sum_find(&s, false, BATON_MSG_READ_INDEX, l);
	cr_assert_not_null(m);
	cr_assert_eq(m->u.read_index.request_id, 9);
	c_deliver_all(c);
	cr_assert_eq(c->delivered[BATON_MSG_READ_INDEX_RESULT], 1);
	const struct baton_read_result *r = c_read_result(c, f, 9);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, 0);
	cr_assert_eq(r->read_index, c_commit(c, l));
	cr_assert_null(c_read_result(c, l, 9),
		       "the leader answered by message, not locally");
	c_free(c);
}

Test(readidx, read_index_request_to_a_follower_is_refused)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	struct baton_msg m = c_msg(BATON_MSG_READ_INDEX, c_term(c, l), g, f);
	m.u.read_index.request_id = 5;
	struct c_sum s;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, false, BATON_MSG_READ_INDEX_RESULT, g);
	cr_assert_not_null(res);
	cr_assert_eq(res->u.read_index_result.request_id, 5);
	cr_assert_eq(res->u.read_index_result.status, BATON_ENOTLEADER);
	c_free(c);
}

Test(readidx, read_without_a_leader_fails)
{
	struct cluster *c = c_new(3, NULL);
	cr_assert_eq(c_read(c, 1, 1, NULL), BATON_ENOLEADER);
	/* A pre-candidate knows no leader either. */
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 2, NULL), 0);
	cr_assert_eq(c_role(c, 2), BATON_PRE_CANDIDATE);
	cr_assert_eq(c_read(c, 2, 2, NULL), BATON_ENOLEADER);
	cr_assert_eq(c_node(c, 2)->n_reads, 0);
	c_free(c);
}

Test(readidx, pending_reads_fail_when_the_leader_steps_down)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	cr_assert_eq(c_read(c, l, 11, NULL), 0);
	c_run(c, 3 * C_ELECTION_MS); /* check-quorum: steps down */
	cr_assert_neq(c_role(c, l), BATON_LEADER);
	const struct baton_read_result *r = c_read_result(c, l, 11);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, BATON_ELEADERCHANGED);
	c_free(c);
}

Test(readidx, forwarded_read_fails_when_the_leader_steps_down)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	baton_term t = c_term(c, l);
	cr_assert_eq(c_read(c, f, 12, NULL), 0);
	cr_assert(c_deliver_match(c, BATON_MSG_READ_INDEX, f, l));
	c_drop(c, BATON_MSG_APPEND, l, 0); /* its round is lost */
	/* News of a higher term makes the leader step down. */
	struct baton_msg m = c_msg(BATON_MSG_APPEND_RESULT, t + 1, g, l);
	cr_assert_eq(c_receive(c, l, &m, NULL), 0);
	cr_assert_eq(c_role(c, l), BATON_FOLLOWER);
	cr_assert_eq(c_count(c, BATON_MSG_READ_INDEX_RESULT, l, f), 1);
	c_deliver_all(c);
	const struct baton_read_result *r = c_read_result(c, f, 12);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, BATON_ELEADERCHANGED);
	c_free(c);
}

Test(readidx, single_voter_answers_at_once)
{
	struct cluster *c = c_new(1, NULL);
	c_run(c, 3 * C_ELECTION_MS);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	struct c_sum s;
	cr_assert_eq(c_read(c, 1, 5, &s), 0);
	cr_assert_eq(s.n_reads, 1);
	cr_assert_eq(s.reads[0].request_id, 5);
	cr_assert_eq(s.reads[0].status, 0);
	cr_assert_eq(s.reads[0].read_index, 2);
	c_free(c);
}
