/* Elections: one leader, pre-vote, leader stickiness, durable votes,
 * check-quorum, restore. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

Test(election, three_nodes_elect_one_leader_with_a_version_entry)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	h_run(&h, 200);
	uint32_t leaders = 0;
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		leaders += s.role == BATON_LEADER;
		cr_assert_eq(s.leader_id, l);
	}
	cr_assert_eq(leaders, 1);
	struct baton_raft_status s = h_status(&h, l);
	const struct baton_entry *e = baton_raft_entry(h.r[l], s.last_index);
	cr_assert_eq(e->type, BATON_ENTRY_VERSION, "the leader's first entry");
	cr_assert_eq(e->term, s.term);
	cr_assert_eq(s.commit_index, s.last_index, "it commits");
	h_free(&h);
}

Test(election, single_node_commits_after_persisting)
{
	struct harness h;
	h_init(&h, 1, NULL);
	cr_assert_eq(h_elect(&h), 1);
	cr_assert_eq(h_propose(&h, 1, "x"), 0);
	/* h_step persisted at once, so the entry committed and applied. */
	struct baton_raft_status s = h_status(&h, 1);
	cr_assert_eq(s.commit_index, s.last_index);
	cr_assert_eq(h.applied_commands[1], 1);
	h_free(&h);
}

static struct baton_msg vote_request(baton_term term, baton_node_id from,
				     baton_index last, baton_term last_term,
				     bool pre)
{
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = BATON_MSG_VOTE;
	m.term = term;
	m.from = from;
	m.to = 1;
	m.u.vote.last_log_index = last;
	m.u.vote.last_log_term = last_term;
	m.u.vote.pre_vote = pre;
	return m;
}

/* Node id receives m through its pipeline; what its core answered. */
static struct baton_update receive(struct harness *h, baton_node_id id,
				   struct baton_msg *m)
{
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = m;
	cr_assert_eq(h_step(h, id, &ev), 0);
	return h->last[id];
}

Test(election, pre_vote_changes_no_term_and_vote_waits_for_disk)
{
	struct harness h;
	h_init(&h, 3, NULL);
	/* Node 1 has the bootstrap entry (index 1, term 1). */
	struct baton_msg pre = vote_request(2, 2, 1, 1, true);
	struct baton_update u = receive(&h, 1, &pre);
	cr_assert_eq(u.n_msgs, 1, "a pre-vote answer goes at once");
	cr_assert(u.msgs[0].u.vote_result.granted);
	cr_assert(u.msgs[0].u.vote_result.pre_vote);
	cr_assert(!u.hard_state_changed);
	cr_assert_eq(h_status(&h, 1).term, 1);

	struct baton_msg real = vote_request(2, 2, 1, 1, false);
	u = receive(&h, 1, &real);
	cr_assert_eq(u.n_msgs, 0);
	cr_assert_eq(u.n_msgs_after_persist, 1,
		     "a grant must not outrun the disk");
	cr_assert(u.msgs_after_persist[0].u.vote_result.granted);
	cr_assert(u.hard_state_changed);
	cr_assert_eq(u.hs_term, 2);
	cr_assert_eq(u.hs_vote, 2);

	/* Another candidate of the same term is refused. */
	struct baton_msg other = vote_request(2, 3, 1, 1, false);
	u = receive(&h, 1, &other);
	cr_assert(!u.msgs_after_persist[0].u.vote_result.granted);
	h_free(&h);
}

Test(election, stale_log_is_refused)
{
	struct harness h;
	h_init(&h, 3, NULL);
	/* The candidate's last entry is older than ours (index 1, term 1). */
	struct baton_msg m = vote_request(5, 2, 0, 0, false);
	struct baton_update u = receive(&h, 1, &m);
	cr_assert_eq(u.term, 5, "the newer term is adopted anyway");
	cr_assert(!u.msgs_after_persist[0].u.vote_result.granted);
	h_free(&h);
}

Test(election, follower_with_live_leader_refuses_pre_vote)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	baton_node_id f = l == 1 ? 2 : 1, c = 6 - l - f;
	struct baton_raft_status s = h_status(&h, f);
	struct baton_msg m =
		vote_request(s.term + 1, c, s.last_index, s.last_term, true);
	m.to = f;
	struct baton_update u = receive(&h, f, &m);
	cr_assert_eq(u.n_msgs, 1);
	cr_assert(!u.msgs[0].u.vote_result.granted,
		  "a node that hears its leader refuses candidates");
	h_free(&h);
}

Test(election, isolated_leader_steps_down_and_others_elect)
{
	struct harness h;
	h_init(&h, 3, NULL);
	baton_node_id l = h_elect(&h);
	baton_term t = h_status(&h, l).term;
	h.down[l] = true; /* its messages go nowhere, none reach it */
	/* It still ticks: check-quorum must make it step down. */
	for (int i = 0; i < 60; i++) {
		h.now_ms += 10;
		h_step(&h, l, &(struct baton_event){.type = BATON_EVENT_TICK});
		for (baton_node_id k = 1; k <= 3; k++)
			if (k != l)
				h_step(&h, k,
				       &(struct baton_event){
					       .type = BATON_EVENT_TICK});
		h_deliver_all(&h);
	}
	cr_assert_neq(h_status(&h, l).role, BATON_LEADER);
	baton_node_id l2 = h_leader(&h);
	cr_assert_neq(l2, 0);
	cr_assert_neq(l2, l);
	cr_assert_gt(h_status(&h, l2).term, t);
	h_free(&h);
}

Test(election, restore_rebuilds_state)
{
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	o.id = 1;
	struct baton_raft *r;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	struct baton_snapshot_meta snap = {.index = 10, .term = 2};
	snap.config.n = 1;
	snap.config.members[0] = (struct baton_member){1, BATON_VOTER};
	snap.config_index = 1;
	baton_version_state_initial(&snap.versions);
	uint8_t cfg[64];
	size_t len;
	struct baton_config c2 = snap.config;
	c2.members[1] = (struct baton_member){2, BATON_LEARNER};
	c2.n = 2;
	cr_assert_eq(baton_config_encode(&c2, cfg, sizeof cfg, &len), 0);
	struct baton_entry e[3] = {
		{.term = 2,
		 .index = 11,
		 .type = BATON_ENTRY_COMMAND,
		 .len = 1,
		 .buf = (uint8_t *)"a"},
		{.term = 3,
		 .index = 12,
		 .type = BATON_ENTRY_CONFIG,
		 .len = (uint32_t)len,
		 .buf = cfg},
		{.term = 3,
		 .index = 13,
		 .type = BATON_ENTRY_COMMAND,
		 .len = 1,
		 .buf = (uint8_t *)"b"},
	};
	cr_assert_eq(baton_raft_restore(r, 3, 1, &snap, (const uint8_t *)"S", 1,
					e, 3),
		     0);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.commit_index, 10);
	cr_assert_eq(s.last_index, 13);
	cr_assert_eq(s.term, 3);
	cr_assert_eq(s.vote, 1);
	cr_assert_eq(s.config.n, 2);
	cr_assert_eq(s.config_index, 12);
	cr_assert_eq(baton_raft_restore(r, 3, 1, NULL, NULL, 0, NULL, 0),
		     BATON_ESTATE, "restore only into an empty instance");
	baton_raft_destroy(r);

	/* A gap in the entries is corruption, not something to guess at. */
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	cr_assert_eq(baton_raft_restore(r, 3, 1, &snap, (const uint8_t *)"S", 1,
					e + 1, 2),
		     BATON_ECORRUPT);
	baton_raft_destroy(r);
}
