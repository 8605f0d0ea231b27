/* Replication: commit and apply everywhere, pipelining, batching, conflict
 * truncation, the figure-8 commit rule, back-pressure, limits. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

Test(replication, commands_commit_and_apply_everywhere_in_order)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(h_propose(&h, l, "cmd"), 0);
	h_run(&h, 100);
	for (baton_node_id i = 1; i <= 3; i++) {
		cr_assert_eq(h.applied_commands[i], 50);
		cr_assert_eq(h.applied[i], h_status(&h, l).last_index);
	}
	h_free(&h);
}

Test(replication, follower_refuses_proposals_and_limits_hold)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	baton_node_id f = l == 1 ? 2 : 1;
	cr_assert_eq(h_propose(&h, f, "x"), BATON_ENOTLEADER);
	char *big = malloc(h.o[l].max_entry_bytes + 2u);
	memset(big, 'a', h.o[l].max_entry_bytes + 1u);
	big[h.o[l].max_entry_bytes + 1u] = 0;
	cr_assert_eq(h_propose(&h, l, big), BATON_ETOOBIG);
	free(big);
	h_free(&h);
}

static void small_window(struct baton_raft_options *o)
{
	o->max_uncommitted_entries = 5;
}

Test(replication, back_pressure_on_uncommitted_entries)
{
	struct harness h;
	h_init(&h, 3, small_window);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	int ok = 0, rv;
	while ((rv = h_propose(&h, l, "x")) == 0)
		ok++;
	cr_assert_eq(rv, BATON_EOVERLOADED);
	cr_assert_eq(ok, 5);
	h_deliver_all(&h);
	cr_assert_eq(h_propose(&h, l, "x"), 0, "room again once committed");
	h_free(&h);
}

static void pipelined(struct baton_raft_options *o)
{
	o->max_inflight_appends = 4;
	o->max_entries_per_append = 2;
}

Test(replication, pipelining_and_batching)
{
	struct harness h;
	h_init(&h, 3, pipelined);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50); /* followers in the replicate state */
	baton_node_id f = l == 1 ? 2 : 1;
	struct baton_buffer b[20];
	for (int i = 0; i < 20; i++)
		b[i] = (struct baton_buffer){"abc", 3};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 20;
	ev.u.propose.bufs = b;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	/* Four appends in flight before any answer, two entries each. */
	cr_assert_eq(h_count(&h, BATON_MSG_APPEND, l, f), 4);
	for (uint32_t i = 0; i < h.q_n; i++)
		if (h.q[i].m.type == BATON_MSG_APPEND)
			cr_assert_leq(h.q[i].m.u.append.n_entries, 2);
	h_deliver_all(&h);
	h_run(&h, 100);
	cr_assert_eq(h.applied_commands[f], 20);
	h_free(&h);
}

Test(replication, conflicting_suffix_is_truncated)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	/* Cut the leader off, let it take writes nobody sees. */
	h.down[l] = true;
	for (int i = 0; i < 3; i++)
		h_propose(&h, l, "lost");
	baton_index stale_last = h_status(&h, l).last_index;
	h_run(&h, 1000); /* the others elect a new leader */
	baton_node_id l2 = h_leader(&h);
	cr_assert_neq(l2, l);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(h_propose(&h, l2, "kept"), 0);
	h.down[l] = false;
	bool truncated = false;
	for (int i = 0; i < 100 && !truncated; i++) {
		h_run(&h, 10);
		truncated = h.last[l].truncate_from != 0 &&
			    h.last[l].truncate_from <= stale_last;
	}
	h_run(&h, 500);
	struct baton_raft_status a = h_status(&h, l), b = h_status(&h, l2);
	cr_assert_eq(a.last_index, b.last_index);
	for (baton_index i = 1; i <= a.last_index; i++) {
		baton_term ta, tb;
		cr_assert(baton_raft_term_at(h.r[l], i, &ta));
		cr_assert(baton_raft_term_at(h.r[l2], i, &tb));
		cr_assert_eq(ta, tb, "logs differ at %llu",
			     (unsigned long long)i);
	}
	cr_assert_eq(h.applied_commands[l], 5, "the lost writes never apply");
	h_free(&h);
}

Test(replication, no_commit_of_an_older_term_by_counting)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_node_id f = l == 1 ? 2 : 1, g = 6 - l - f;
	/* Replicate one entry from l to f only; g sees nothing. */
	h.down[g] = true;
	cr_assert_eq(h_propose(&h, l, "old"), 0);
	baton_index old = h_status(&h, l).last_index;
	h_deliver_all(&h);
	/* l dies. g comes back; f must win (it holds the entry). */
	h.down[l] = true;
	h.down[g] = false;
	baton_node_id l2 = 0;
	for (int i = 0; i < 300 && l2 == 0; i++) {
		h_run(&h, 10);
		l2 = h_leader(&h);
	}
	cr_assert_eq(l2, f);
	/* The new leader's no-op carries the old entry with it: it is
	 * committed only together with an entry of the new term. */
	struct baton_raft_status s = h_status(&h, f);
	baton_term t;
	cr_assert(baton_raft_term_at(h.r[f], s.commit_index, &t));
	cr_assert(s.commit_index < old || t == s.term,
		  "commit %llu has term %llu, not the leader's %llu",
		  (unsigned long long)s.commit_index, (unsigned long long)t,
		  (unsigned long long)s.term);
	cr_assert_geq(s.commit_index, old);
	h_free(&h);
}
