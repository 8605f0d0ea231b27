/* Cluster scenarios of the Raft core: replication and the commit
 * rule (the driver: scenario.h). */
#include "harness.h" /* h_lone_leader */
#include "scenario.h"

/* ======================================================================== */
/* Replication.                                                             */

Test(repl, proposals_commit_and_apply_in_order_everywhere)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	char cmd[32];
	baton_index idx;
	for (int k = 0; k < 5; k++) {
		snprintf(cmd, sizeof cmd, "cmd-%d", k);
		cr_assert_eq(c_propose(c, l, cmd, &idx), 0);
		cr_assert_eq(idx, (baton_index)(3 + k));
	}
	baton_index first;
	cr_assert_eq(c_propose_n(c, l, "batch", 5, &first), 0);
	cr_assert_eq(first, 8);
	c_run(c, 300);
	for (baton_node_id id = 1; id <= 3; id++) {
		struct c_node *nd = c_node(c, id);
		cr_assert_eq(c_commit(c, id), 12);
		cr_assert_eq(nd->last_applied, 12);
		cr_assert_eq(nd->n_applied, 12, "node %llu",
			     (unsigned long long)id);
		for (uint32_t k = 0; k < 12; k++)
			cr_assert_eq(nd->applied[k].index, k + 1);
		for (int k = 0; k < 10; k++) {
			const struct c_applied *a =
				&nd->applied[2 + k]; /* index 3 + k */
			if (k < 5)
				snprintf(cmd, sizeof cmd, "cmd-%d", k);
			else
				snprintf(cmd, sizeof cmd, "batch-%d", k - 5);
			cr_assert_eq(a->type, BATON_ENTRY_COMMAND);
			cr_assert_eq(a->len, strlen(cmd));
			cr_assert_arr_eq(a->buf, cmd, a->len);
		}
	}
	c_assert_logs_equal(c, 1, 2, 1, 12);
	c_assert_logs_equal(c, 1, 3, 1, 12);
	c_free(c);
}

/* A follower holds and persists an entry before it is committed, but
 * applies it only once the leader says it is committed. */
Test(repl, follower_applies_only_what_is_committed)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "a", &idx), 0);
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert_eq(c_last(c, f), idx);
	cr_assert_eq(c_status(c, f).persisted_index, idx);
	cr_assert_lt(c_commit(c, f), idx);
	cr_assert_not(c_applied_cmd(c, f, "a"));

	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	cr_assert_eq(c_commit(c, l), idx, "leader and f are a quorum");
	cr_assert(c_applied_cmd(c, l, "a"));
	cr_assert_not(c_applied_cmd(c, f, "a"));

	c_run(c, 2 * C_HEARTBEAT_MS); /* the commit index travels */
	cr_assert_eq(c_commit(c, f), idx);
	cr_assert(c_applied_cmd(c, f, "a"));
	c_free(c);
}

/* An old leader's uncommitted suffix is replaced by the new leader's log. */
Test(repl, conflicting_suffix_is_truncated)
{
	baton_node_id a;
	struct cluster *c = c_three(NULL, &a);
	baton_term t1 = c_term(c, a);
	c_isolate(c, a, true);
	cr_assert_eq(c_propose_n(c, a, "old", 3, NULL), 0); /* 3, 4, 5 */
	cr_assert_eq(c_last(c, a), 5);

	baton_node_id b = c_tick_until_leader(c, 20000);
	cr_assert_neq(b, a);
	cr_assert_gt(c_term(c, b), t1);
	cr_assert_eq(c_propose(c, b, "new", NULL), 0); /* noop 3, "new" 4 */
	c_run(c, 300);
	baton_index last = c_last(c, b);
	cr_assert_eq(last, 4);
	cr_assert_eq(c_commit(c, b), 4);

	c_isolate(c, a, false);
	c_run(c, 1000);
	struct baton_raft_status s = c_status(c, a);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_eq(s.leader_id, b);
	cr_assert_eq(c_node(c, a)->min_truncate_from, 3,
		     "the update told the driver to delete from 3");
	cr_assert_eq(s.last_index, last);
	c_assert_logs_equal(c, a, b, 1, last);
	cr_assert(c_applied_cmd(c, a, "new"));
	cr_assert_not(c_applied_cmd(c, a, "old-0"));
	cr_assert_not(c_applied_cmd(c, a, "old-2"));
	c_free(c);
}

static void pipeline4(struct baton_raft_options *o)
{
	o->max_inflight_appends = 4;
	o->max_entries_per_append = 1;
}

Test(repl, pipelining_sends_several_appends_before_any_reply)
{
	baton_node_id l;
	struct cluster *c = c_three(pipeline4, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_count(c, 0, 0, 0), 0);
	cr_assert_eq(c_propose_n(c, l, "p", 10, NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 4,
		     "max_inflight_appends appends in flight");
	cr_assert_eq(c_count(c, BATON_MSG_APPEND_RESULT, 0, 0), 0);
	for (uint32_t k = 0; k < 4; k++) {
		const struct baton_msg *m =
			c_find(c, BATON_MSG_APPEND, l, f, k);
		cr_assert_eq(m->u.append.n_entries, 1);
		cr_assert_eq(m->u.append.prev_index, 2 + k);
		cr_assert_eq(m->u.append.entries[0].index, 3 + k);
	}
	/* Each answer frees a slot. */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 4);
	c_deliver_all(c);
	c_run(c, 300);
	for (baton_node_id id = 1; id <= 3; id++)
		cr_assert_eq(c_commit(c, id), 12);
	c_free(c);
}

Test(repl, pipeline_recovers_from_a_lost_append)
{
	baton_node_id l;
	struct cluster *c = c_three(pipeline4, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	cr_assert_eq(c_propose_n(c, l, "p", 10, NULL), 0);
	cr_assert(c_drop_first(c, BATON_MSG_APPEND, l, f), "entry 3 is lost");
	/* The appends still in flight (4, 5, 6) reach f: it must refuse
	 * them, it lacks 3. */
	for (int k = 0; k < 3; k++)
		cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert_eq(c_last(c, f), 2, "f took entries after a gap");
	cr_assert_eq(c_count(c, BATON_MSG_APPEND_RESULT, f, l), 3);
	const struct baton_msg *rej =
		c_find(c, BATON_MSG_APPEND_RESULT, f, l, 0);
	cr_assert_not(rej->u.append_result.success);
	cr_assert_eq(rej->u.append_result.hint_index, 2);
	/* The refusals make the leader back off and resend from 3, at
	 * once (no timer needed). */
	c_deliver_all(c);
	cr_assert_eq(c_commit(c, l), 12);
	cr_assert_eq(c_last(c, f), 12);
	cr_assert_eq(c_commit(c, f), 12);
	c_assert_logs_equal(c, f, l, 1, 12);
	c_assert_logs_equal(c, g, l, 1, 12);
	cr_assert(c_applied_cmd(c, f, "p-9"));
	c_free(c);
}

Test(repl, five_nodes_commit_with_three_not_two)
{
	struct cluster *c = c_new(5, NULL);
	baton_node_id l = c_tick_until_leader(c, 20000);
	c_run(c, 300);
	c_isolate(c, c_follower(c, l, 0), true);
	c_isolate(c, c_follower(c, l, 0), true); /* another one */
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "three", &idx), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), idx, "3 of 5 commit");
	c_isolate(c, c_follower(c, l, 0), true);
	cr_assert_eq(c_follower(c, l, c_follower(c, l, 0)), 0,
		     "one follower is left");
	cr_assert_eq(c_propose(c, l, "two", &idx), 0);
	c_run(c, 300);
	cr_assert_lt(c_commit(c, l), idx, "2 of 5 do not");
	c_free(c);
}

static void pipeline1(struct baton_raft_options *o)
{
	o->max_inflight_appends = 1;
}

Test(repl, without_pipelining_one_append_at_a_time)
{
	baton_node_id l;
	struct cluster *c = c_three(pipeline1, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_propose(c, l, "a", NULL), 0);
	cr_assert_eq(c_propose(c, l, "b", NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 1);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, f), 4);
	c_free(c);
}

static void batch3(struct baton_raft_options *o)
{
	o->max_entries_per_append = 3;
}

Test(repl, batching_limits_entries_per_append)
{
	baton_node_id l;
	struct cluster *c = c_three(batch3, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_propose_n(c, l, "b", 10, NULL), 0);
	uint32_t n = c_count(c, BATON_MSG_APPEND, l, f);
	cr_assert_eq(n, 4, "3 + 3 + 3 + 1");
	uint32_t total = 0;
	baton_index prev = 2;
	for (uint32_t k = 0; k < n; k++) {
		const struct baton_msg *m =
			c_find(c, BATON_MSG_APPEND, l, f, k);
		cr_assert_leq(m->u.append.n_entries, 3);
		cr_assert_eq(m->u.append.prev_index, prev);
		prev += m->u.append.n_entries;
		total += m->u.append.n_entries;
	}
	cr_assert_eq(total, 10);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, f), 12);
	c_free(c);
}

static void bytes100(struct baton_raft_options *o)
{
	o->max_bytes_per_append = 100;
}

Test(repl, batching_limits_bytes_per_append)
{
	baton_node_id l;
	struct cluster *c = c_three(bytes100, &l);
	baton_node_id f = c_follower(c, l, 0);
	char big[41];
	memset(big, 'z', 40);
	big[40] = '\0';
	struct baton_buffer b[5];
	for (int k = 0; k < 5; k++)
		b[k] = (struct baton_buffer){big, 40};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 5;
	ev.u.propose.bufs = b;
	cr_assert_eq(c_step(c, l, &ev, NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 3, "2 + 2 + 1");
	cr_assert_eq(c_find(c, BATON_MSG_APPEND, l, f, 0)->u.append.n_entries,
		     2);
	cr_assert_eq(c_find(c, BATON_MSG_APPEND, l, f, 2)->u.append.n_entries,
		     1);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, f), 7);
	c_free(c);
}

static void small_entries(struct baton_raft_options *o)
{
	o->max_entry_bytes = 8;
	o->max_uncommitted_entries = 3;
}

Test(repl, proposal_errors)
{
	baton_node_id l;
	struct cluster *c = c_three(small_entries, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_index last = c_last(c, l);

	cr_assert_eq(c_propose(c, f, "x", NULL), BATON_ENOTLEADER);
	cr_assert_eq(c_last(c, f), last);

	cr_assert_eq(c_propose(c, l, "123456789", NULL), BATON_ETOOBIG);
	cr_assert_eq(c_last(c, l), last, "nothing appended");
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, 0, 0), 0,
		     "a refused proposal sends nothing");
	/* The pipeline refuses a command too big on its own: the others of
	 * its batch still go in (the core's batch is all or nothing, below). */
	struct baton_buffer b[2] = {{"ok", 2}, {"123456789", 9}};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 2;
	ev.u.propose.bufs = b;
	cr_assert_eq(c_step(c, l, &ev, NULL), BATON_ETOOBIG);
	c_run(c, 300);
	cr_assert_eq(c_last(c, l), last + 1, "\"ok\" alone");
	cr_assert_eq(c_commit(c, l), last + 1);

	cr_assert_eq(c_propose(c, l, "12345678", NULL), 0, "at the limit");

	/* Back-pressure: at most 3 entries beyond the commit index. */
	c_isolate(c, f, true);
	c_isolate(c, c_follower(c, l, f), true);
	cr_assert_eq(c_propose(c, l, "b", NULL), 0);
	cr_assert_eq(c_propose(c, l, "c", NULL), 0);
	cr_assert_eq(c_propose(c, l, "d", NULL), BATON_EOVERLOADED);
	c_free(c);
}

/* The core takes a batch all or nothing: one command too big, none in. */
Test(repl, a_batch_with_one_command_too_big_appends_none)
{
	uint64_t now = 0;
	struct baton_raft *r = h_lone_leader(small_entries, &now);
	struct baton_raft_status st;
	baton_raft_status(r, &st);
	struct baton_buffer b[2] = {{"ok", 2}, {"123456789", 9}};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 2;
	ev.u.propose.bufs = b;
	struct baton_update u;
	cr_assert_eq(baton_raft_step(r, now, &ev, &u), BATON_ETOOBIG);
	cr_assert_eq(u.n_entries, 0);
	cr_assert_eq(u.n_msgs, 0);
	struct baton_raft_status after;
	baton_raft_status(r, &after);
	cr_assert_eq(after.last_index, st.last_index);
	baton_raft_destroy(r);
}

/* The pipeline never proposes an empty batch; the core refuses one. */
Test(repl, an_empty_batch_is_refused)
{
	uint64_t now = 0;
	struct baton_raft *r = h_lone_leader(NULL, &now);
	struct baton_raft_status st;
	baton_raft_status(r, &st);
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 0;
	struct baton_update u;
	cr_assert_eq(baton_raft_step(r, now, &ev, &u), BATON_EINVAL);
	cr_assert_eq(u.n_entries, 0);
	struct baton_raft_status after;
	baton_raft_status(r, &after);
	cr_assert_eq(after.last_index, st.last_index);
	baton_raft_destroy(r);
}

/* A late, shorter AppendEntries of the current leader must not cut a
 * matching suffix; a follower learns a commit index only up to what it
 * knows matches the leader. */
Test(repl, stale_append_keeps_a_matching_suffix_and_bounds_commit)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[5] = {2, 2, 2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 5);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_last(c, 2), 6);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 1);
	cr_assert_not_null(res, "an acknowledgement waits for the disk");
	cr_assert(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 6);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_APPEND_RESULT, 0), 0);

	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 2); /* entries 2, 3 again */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(s.truncate_from, 0);
	cr_assert_eq(s.n_entries, 0);
	cr_assert_eq(c_last(c, 2), 6, "the matching suffix 4..6 stays");
	res = c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 1);
	cr_assert(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 3);

	/* Anchored at 3 with leader_commit 6: only 3 is known to match. */
	c_make_append(&a, 2, 1, 2, 3, 2, 6, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_commit(c, 2), 3);
	cr_assert_eq(c_node(c, 2)->last_applied, 3);
	c_make_append(&a, 2, 1, 2, 6, 2, 6, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_commit(c, 2), 6);
	cr_assert_eq(c_node(c, 2)->last_applied, 6);
	c_free(c);
}

/* A rejection carries the follower's last index whose term is <= the term
 * the leader sent, so the leader can skip a whole conflicting term. */
Test(repl, rejection_hints_skip_a_conflicting_term)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[3] = {2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 3); /* [1:t1 2:t2 3:t2 4:t2] */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_last(c, 2), 4);

	/* A leader of term 4 whose entry 4 is of term 3. */
	c_make_append(&a, 4, 3, 2, 4, 3, 1, NULL, 0);
	a.m.u.append.heartbeat_seq = 77;
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 3);
	cr_assert_not_null(res);
	cr_assert_not(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 4);
	cr_assert_eq(res->u.append_result.hint_index, 4);
	cr_assert_eq(res->u.append_result.hint_term, 2);
	cr_assert_eq(res->u.append_result.heartbeat_seq, 77);
	cr_assert_eq(c_last(c, 2), 4, "a rejection deletes nothing");

	/* Its entry 4 is of term 1: the whole of term 2 is skipped. */
	c_make_append(&a, 4, 3, 2, 4, 1, 1, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 3);
	cr_assert_not(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.hint_index, 1);
	cr_assert_eq(res->u.append_result.hint_term, 1);

	/* A prev_index beyond our log: the hint is our last entry. */
	c_make_append(&a, 4, 3, 2, 10, 4, 1, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 3);
	cr_assert_not(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 10);
	cr_assert_eq(res->u.append_result.hint_index, 4);
	cr_assert_eq(res->u.append_result.hint_term, 2);
	c_free(c);
}

/* After a truncation, a late PERSISTED report for the replaced entries
 * must not make the new, not yet durable, entries count as durable. */
Test(repl, stale_persistence_report_after_a_truncation)
{
	struct cluster *c = c_new(3, NULL);
	c_set_manual(c, 2, true);
	const baton_term t2[3] = {2, 2, 2}, t3[1] = {3};
	struct c_append a;
	struct c_sum s1, s2;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 3); /* 2, 3, 4 of term 2 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s1), 0);
	cr_assert_eq(s1.n_entries, 3);
	cr_assert_eq(s1.persist_index, 4);
	cr_assert_eq(s1.persist_term, 2);
	c_make_append(&a, 3, 3, 2, 2, 2, 1, t3, 1); /* 3 of term 3 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s2), 0);
	cr_assert_eq(s2.truncate_from, 3,
		     "entries already handed to the disk are deleted");
	cr_assert_eq(s2.n_entries, 1);
	cr_assert_eq(s2.persist_index, 3);
	cr_assert_eq(s2.persist_term, 3);
	cr_assert_eq(c_status(c, 2).persisted_index, 1);

	c_persist_one(c, 2); /* reports (4, term 2) */
	cr_assert_leq(c_status(c, 2).persisted_index, 2,
		      "the new entry 3 is not durable yet");
	c_persist_one(c, 2); /* reports (3, term 3) */
	cr_assert_eq(c_status(c, 2).persisted_index, 3);
	c_free(c);
}

/* ======================================================================== */
/* The commit rule (Raft, figure 8): a leader never commits an entry of an
 * earlier term by counting replicas; it commits it only along with an entry
 * of its own term.                                                         */

static void one_entry_per_append(struct baton_raft_options *o)
{
	o->max_entries_per_append = 1;
}

Test(commitrule, old_term_entry_waits_for_the_new_leaders_noop)
{
	baton_node_id a;
	struct cluster *c = c_three(one_entry_per_append, &a);
	baton_term t1 = c_term(c, a);
	baton_node_id b = c_follower(c, a, 0);
	baton_node_id x = c_follower(c, a, b);

	/* Entry 3 (term t1) reaches b only, and a never hears it did. */
	cr_assert_eq(c_propose(c, a, "x", NULL), 0);
	cr_assert_eq(c_drop(c, BATON_MSG_APPEND, a, x), 1);
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, a, b));
	cr_assert_eq(c_drop_to(c, a), 1);
	cr_assert_eq(c_last(c, b), 3);
	cr_assert_eq(c_last(c, x), 2);
	cr_assert_eq(c_commit(c, a), 2);
	c_isolate(c, a, true);

	/* b stands (only b's timer runs) and x elects it. */
	c_advance(c, 3 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, b, NULL), 0);
	bool saw_old_entry_on_quorum = false;
	for (int guard = 0; c_deliver_one(c); guard++) {
		cr_assert_lt(guard, 1000);
		if (c_role(c, b) != BATON_LEADER)
			continue;
		const struct baton__progress *p = c_progress(c, b, x);
		cr_assert_not_null(p);
		if (p->match == 3 && c_last(c, x) == 3) {
			/* Entry 3 is now on b and x, a quorum, but it is of
			 * term t1: counting replicas must not commit it. */
			saw_old_entry_on_quorum = true;
			cr_assert_eq(c_commit(c, b), 2,
				     "committed an entry of an earlier term "
				     "by counting replicas");
		}
	}
	cr_assert_eq(c_role(c, b), BATON_LEADER);
	cr_assert_gt(c_term(c, b), t1);
	cr_assert(saw_old_entry_on_quorum,
		  "the scenario never had entry 3 on a quorum alone");
	/* Once the no-op (term of b) is on x too, both commit. */
	cr_assert_eq(c_last(c, x), 4);
	cr_assert_eq(c_commit(c, b), 4);
	cr_assert(c_applied_cmd(c, b, "x"));
	c_free(c);
}
