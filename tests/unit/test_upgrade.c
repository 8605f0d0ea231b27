/*
 * The version rules a leader follows (src/core/upgrade.c): info requests
 * and replies, the version table written into the log, the effective
 * machine version under ALL and QUORUM, needs-upgrade (a node whose
 * release lacks the effective machine version stalls, refuses such a
 * snapshot, and resumes after a restart on a newer release), and the join
 * check. Nodes run releases of the table (baton_releases()), as the
 * operator's --as-release would make them.
 */
#include "harness.h"

#include "core.h"

#include <criterion/criterion.h>
#include <string.h>

/* ---- releases per node ----------------------------------------------------
 */

static const struct baton_profile *rel(uint16_t major, uint16_t minor)
{
	const struct baton_profile *p =
		baton_release_find((struct baton_release){major, minor, 0});
	cr_assert_not_null(p, "release %u.%u.0 is in the table", major, minor);
	return p;
}

/* Each test sets these before h_init (a test is a process of its own). */
static const struct baton_profile *runs[H_MAX + 1]; /* NULL: the newest */
static uint32_t slow[H_MAX + 1];		    /* election timeouts */
static uint32_t strategy = BATON_UPGRADE_ALL;
/* 0: the core's default (version-aware). The tests of the machine version
 * alone that keep a node on a release below a leader's run under ANY:
 * otherwise the release floor the leader raises would hold that node from
 * the leader's first entry on, and rule 2 would move leadership
 * (test_eligibility.c tests those). */
static uint32_t policy;

static void tweak(struct baton_raft_options *o)
{
	if (runs[o->id] != NULL)
		o->profile = *runs[o->id];
	if (slow[o->id] != 0)
		o->election_timeout_ms = slow[o->id];
	o->machine_upgrade = strategy;
	if (policy != 0)
		o->election_policy = policy;
}

static void no_trailing(struct baton_raft_options *o)
{
	tweak(o);
	o->snapshot_trailing_entries = 0;
}

/* Restart node id on another release, on the same disk. */
static void restart_on(struct harness *h, baton_node_id id,
		       const struct baton_profile *p)
{
	h->o[id].profile = *p;
	h_restart(h, id, false);
}

static uint32_t machine(struct harness *h, baton_node_id id)
{
	uint32_t v = h_status(h, id).versions.machine.value;
	/* The cheap accessor servers gate commands on says the same. */
	cr_assert_eq(baton_raft_machine_version(h->r[id]).value, v);
	return v;
}

static struct baton_upgrade_status upgrade_status(struct harness *h,
						  baton_node_id id)
{
	struct baton_upgrade_status u;
	baton_raft_upgrade_status(h->r[id], &u);
	return u;
}

static const struct baton_member_versions *
row(struct harness *h, baton_node_id at, baton_node_id id)
{
	static struct baton_raft_status s;
	s = h_status(h, at);
	return baton_version_state_find(&s.versions, id);
}

static bool same_profile(const struct baton_profile *a,
			 const struct baton_profile *b)
{
	return baton_release_compare(a->release, b->release) == 0 &&
	       a->proto_min.value == b->proto_min.value &&
	       a->proto_max.value == b->proto_max.value &&
	       a->machine_max.value == b->machine_max.value;
}

static baton_node_id other_than(baton_node_id a, baton_node_id b)
{
	for (baton_node_id i = 1; i <= 3; i++)
		if (i != a && i != b)
			return i;
	return 0;
}

/* ---- info requests and replies ------------------------------------------- */

Test(upgrade, a_new_leader_asks_every_member_and_learns_their_releases)
{
	runs[3] = rel(1, 0);
	slow[3] = 1000; /* 1 or 2 leads */
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	baton_node_id l = h_elect(&h);
	cr_assert_neq(l, 3);
	/* Asked at once, both answered: both are known. */
	h_run(&h, 30);
	cr_assert_geq(h.delivered_to[other_than(l, 3)][BATON_MSG_INFO], 1);
	cr_assert_geq(h.delivered_to[3][BATON_MSG_INFO], 1);
	cr_assert_geq(h.delivered_to[l][BATON_MSG_INFO_RESULT], 2);
	struct baton_upgrade_status u = upgrade_status(&h, l);
	cr_assert(u.leader);
	cr_assert_eq(u.strategy, BATON_UPGRADE_ALL);
	cr_assert_eq(u.target.value,
		     baton_release_current()->machine_max.value);
	cr_assert_eq(u.n, 3);
	for (uint32_t i = 0; i < 3; i++) {
		baton_node_id id = u.members[i].id;
		cr_assert_eq(id, i + 1, "by increasing id");
		cr_assert(u.members[i].known, "node %llu answered",
			  (unsigned long long)id);
		cr_assert(
			same_profile(&u.members[i].profile, &h.o[id].profile));
	}
	/* Node 3's machine_max (1) holds the upgrade back. */
	cr_assert_eq(u.n_waiting, 1);
	cr_assert_eq(u.waiting[0], 3);
	/* A follower has no live table. */
	struct baton_upgrade_status f = upgrade_status(&h, 3);
	cr_assert_not(f.leader);
	cr_assert_eq(f.n, 0);
	cr_assert_eq(f.n_waiting, 0);
	h_free(&h);
}

Test(upgrade, any_node_answers_an_info_request_with_its_profile)
{
	runs[2] = rel(1, 1);
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	baton_term term = h_status(&h, 2).term;
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = BATON_MSG_INFO;
	m.term = term;
	m.from = 1;
	m.to = 2;
	m.u.info.seq = 77;
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = &m;
	cr_assert_eq(h_step(&h, 2, &ev), 0);
	const struct baton_update *u = &h.last[2];
	cr_assert_eq(u->n_msgs, 1);
	cr_assert_eq(u->msgs[0].type, BATON_MSG_INFO_RESULT);
	cr_assert_eq(u->msgs[0].to, 1);
	cr_assert_eq(u->msgs[0].term, term);
	cr_assert_eq(u->msgs[0].u.info_result.seq, 77);
	cr_assert(same_profile(&u->msgs[0].u.info_result.profile, rel(1, 1)));
	/* A request of an older term is not answered. */
	m.term = term - 1;
	cr_assert_eq(h_step(&h, 2, &ev), 0);
	cr_assert_eq(h.last[2].n_msgs, 0);
	h_free(&h);
}

Test(upgrade, replies_count_from_members_for_a_round_we_sent_newest_first)
{
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	baton_node_id l = h_elect(&h);
	h_run(&h, 200);
	baton_node_id f = other_than(l, 0);
	const struct baton_raft *r = h.r[l];
	cr_assert_eq(r->n_live, 2);
	uint64_t seq = r->info_seq;
	cr_assert_geq(seq, 2, "a round per heartbeat to the unknown");
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = BATON_MSG_INFO_RESULT;
	m.term = h_status(&h, l).term;
	m.to = l;
	m.u.info_result.profile = *rel(1, 0);
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = &m;
	/* Not a member. */
	m.from = 7;
	m.u.info_result.seq = seq;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	cr_assert_eq(upgrade_status(&h, l).n, 3);
	cr_assert_eq(r->n_live, 2);
	/* A round never sent, and an older round than the one it answered. */
	m.from = f;
	m.u.info_result.seq = r->info_seq + 1;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	m.u.info_result.seq = 1;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	/* Malformed: a range upside down. */
	m.u.info_result.seq = r->info_seq;
	m.u.info_result.profile.proto_min.value = 3;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	struct baton_upgrade_status u = upgrade_status(&h, l);
	cr_assert(same_profile(&u.members[f - 1].profile,
			       baton_release_current()));
	/* The answer to the latest round counts. */
	m.u.info_result.profile = *rel(1, 1);
	cr_assert_eq(h_step(&h, l, &ev), 0);
	u = upgrade_status(&h, l);
	cr_assert(same_profile(&u.members[f - 1].profile, rel(1, 1)));
	h_free(&h);
}

/* Members unknown or behind are asked every heartbeat; everyone once per
 * election timeout (100 ms here, heartbeats every 20 ms). */
Test(upgrade, info_cadence)
{
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	baton_node_id l = h_elect(&h);
	h_run(&h, 200);
	baton_node_id a = other_than(l, 0), b = other_than(l, a);
	uint32_t a0 = h.delivered_to[a][BATON_MSG_INFO];
	uint32_t b0 = h.delivered_to[b][BATON_MSG_INFO];
	h_run(&h, 1000);
	uint32_t da = h.delivered_to[a][BATON_MSG_INFO] - a0;
	uint32_t db = h.delivered_to[b][BATON_MSG_INFO] - b0;
	cr_assert(da >= 8 && da <= 12, "%u requests in 10 timeouts", da);
	cr_assert(db >= 8 && db <= 12, "%u requests in 10 timeouts", db);
	cr_assert_eq(h_leader(&h), l);
	/* b restarts on an older release: once the leader notices, it asks
	 * b every heartbeat. */
	restart_on(&h, b, rel(1, 1));
	h_run(&h, 200);
	a0 = h.delivered_to[a][BATON_MSG_INFO];
	b0 = h.delivered_to[b][BATON_MSG_INFO];
	h_run(&h, 1000);
	da = h.delivered_to[a][BATON_MSG_INFO] - a0;
	db = h.delivered_to[b][BATON_MSG_INFO] - b0;
	cr_assert(da >= 8 && da <= 12, "%u requests", da);
	cr_assert(db >= 45, "%u requests in 50 heartbeats", db);
	h_free(&h);
}

/* ---- the version table in the log --------------------------------------- */

Test(upgrade, the_table_is_written_into_the_log_when_it_changes)
{
	for (baton_node_id i = 1; i <= 3; i++)
		runs[i] = rel(1, 1);
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	baton_node_id l = h_elect(&h);
	h_run(&h, 300);
	struct baton_raft_status sl = h_status(&h, l);
	cr_assert_eq(sl.versions.n, 3);
	cr_assert_eq(sl.versions.machine.value, 2, "every member implements 2");
	baton_index at = sl.versions_index;
	cr_assert_leq(at, sl.commit_index);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		cr_assert_eq(s.versions_index, at, "the same table everywhere");
		for (baton_node_id k = 1; k <= 3; k++)
			cr_assert(same_profile(&row(&h, i, k)->profile,
					       rel(1, 1)));
	}
	/* Nothing changes, nothing is written. */
	h_run(&h, 1000);
	cr_assert_eq(h_status(&h, l).versions_index, at);
	/* A follower restarts on a newer release: its row follows. */
	baton_node_id f = other_than(l, 0);
	restart_on(&h, f, rel(1, 2));
	h_run(&h, 300);
	baton_node_id l2 = h_leader(&h);
	struct baton_raft_status s2 = h_status(&h, l2);
	cr_assert_gt(s2.versions_index, at);
	cr_assert_eq(s2.versions.machine.value, 2);
	for (baton_node_id i = 1; i <= 3; i++) {
		cr_assert_eq(h_status(&h, i).versions_index, s2.versions_index);
		cr_assert(same_profile(&row(&h, i, f)->profile, rel(1, 2)));
	}
	h_free(&h);
}

/* ---- ALL -------------------------------------------------------------------
 */

Test(upgrade, all_waits_for_an_unknown_member)
{
	for (baton_node_id i = 1; i <= 3; i++)
		runs[i] = rel(1, 1);
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	h.down[3] = true;
	baton_node_id l = h_elect(&h);
	h_run(&h, 500);
	cr_assert_eq(machine(&h, l), 1);
	struct baton_upgrade_status u = upgrade_status(&h, l);
	cr_assert_not(u.members[2].known);
	cr_assert_eq(u.n_waiting, 1);
	cr_assert_eq(u.waiting[0], 3);
	cr_assert_null(row(&h, l, 3), "no row for a member never heard of");
	cr_assert_not_null(row(&h, l, other_than(l, 3)));
	h.down[3] = false;
	h_run(&h, 500);
	for (baton_node_id i = 1; i <= 3; i++)
		cr_assert_eq(machine(&h, i), 2);
	cr_assert_eq(upgrade_status(&h, h_leader(&h)).n_waiting, 0);
	h_free(&h);
}

/* Nodes 1 and 2 run 1.1.0 (machine 2), node 3 1.0.0 (machine 1), under
 * ANY (see `policy`). */
static baton_node_id mixed(struct harness *h)
{
	policy = BATON_ELECTION_ANY;
	runs[1] = rel(1, 1);
	runs[2] = rel(1, 1);
	runs[3] = rel(1, 0);
	slow[3] = 1000; /* 1 or 2 leads */
	h_init(h, 3, tweak);
	h->info = true;
	baton_node_id l = h_elect(h);
	cr_assert_neq(l, 3);
	h_run(h, 500);
	return l;
}

Test(upgrade, all_waits_for_a_member_behind_and_goes_once_it_upgrades)
{
	struct harness h;
	baton_node_id l = mixed(&h);
	for (baton_node_id i = 1; i <= 3; i++) {
		cr_assert_eq(machine(&h, i), 1);
		cr_assert_eq(h_status(&h, i).stalled_index, 0);
	}
	cr_assert_eq(row(&h, l, 3)->profile.machine_max.value, 1);
	struct baton_upgrade_status u = upgrade_status(&h, l);
	cr_assert_eq(u.n_waiting, 1);
	cr_assert_eq(u.waiting[0], 3);
	cr_assert_eq(u.members[2].profile.machine_max.value, 1);
	/* Node 3 restarts on 1.1.0: the upgrade goes through. */
	restart_on(&h, 3, rel(1, 1));
	h_run(&h, 300);
	l = h_leader(&h);
	for (baton_node_id i = 1; i <= 3; i++) {
		cr_assert_eq(machine(&h, i), 2);
		cr_assert_eq(h_status(&h, i).stalled_index, 0);
	}
	cr_assert_eq(upgrade_status(&h, l).n_waiting, 0);
	/* Everyone applies past the raise. */
	cr_assert_eq(h_propose(&h, l, "after"), 0);
	h_run(&h, 100);
	for (baton_node_id i = 1; i <= 3; i++)
		cr_assert_eq(h.applied[i], h_status(&h, l).commit_index);
	h_free(&h);
}

/* Reads start heartbeat rounds of their own, which push the heartbeat
 * timer back: under a steady stream of them the timer never fires. Info
 * rounds keep their own clock, so the upgrade still goes through. */
Test(upgrade, info_rounds_go_on_under_a_steady_stream_of_reads)
{
	struct harness h;
	baton_node_id l = mixed(&h);
	cr_assert_eq(upgrade_status(&h, l).n_waiting, 1);
	restart_on(&h, 3, rel(1, 1));
	uint64_t id = 1;
	for (int t = 0; t < 60 && machine(&h, l) < 2; t++) {
		struct baton_event ev = {.type = BATON_EVENT_READ};
		ev.u.read.request_id = id++;
		h_step(&h, l, &ev);
		h_run(&h, 10);
		cr_assert_eq(h_leader(&h), l, "no election in between");
	}
	cr_assert_eq(machine(&h, l), 2,
		     "the leader learnt node 3's upgrade while serving reads");
	h_free(&h);
}

Test(upgrade, removing_the_member_behind_lets_the_upgrade_go)
{
	struct harness h;
	baton_node_id l = mixed(&h);
	cr_assert_eq(machine(&h, l), 1);
	struct baton_event ev = {.type = BATON_EVENT_REMOVE};
	ev.u.member.id = 3;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	h_run(&h, 200);
	cr_assert_eq(machine(&h, l), 2, "re-checked on the membership change");
	cr_assert_null(row(&h, l, 3), "the row of a non-member goes");
	cr_assert_eq(machine(&h, other_than(l, 3)), 2);
	h_free(&h);
}

Test(upgrade, a_single_node_upgrades_at_once)
{
	runs[1] = rel(1, 1);
	struct harness h;
	h_init(&h, 1, tweak);
	cr_assert_eq(h_elect(&h), 1);
	struct baton_raft_status s = h_status(&h, 1);
	/* In its first entry: no round trip to wait for. */
	cr_assert_eq(s.versions_index, 2);
	cr_assert_eq(s.versions.machine.value, 2);
	cr_assert_eq(s.versions.n, 1);
	cr_assert(same_profile(&s.versions.members[0].profile, rel(1, 1)));
	/* On a newer release, its next term's first entry updates its row;
	 * the machine version never goes down. */
	restart_on(&h, 1, rel(1, 2));
	h_elect(&h);
	s = h_status(&h, 1);
	cr_assert_eq(s.versions.machine.value, 2);
	cr_assert(same_profile(&s.versions.members[0].profile, rel(1, 2)));
	h_free(&h);
}

Test(upgrade, a_single_node_on_an_old_release_stays)
{
	runs[1] = rel(1, 0);
	struct harness h;
	h_init(&h, 1, tweak);
	h_elect(&h);
	h_run(&h, 500);
	cr_assert_eq(machine(&h, 1), 1);
	cr_assert_eq(upgrade_status(&h, 1).n_waiting, 0, "at its target");
	h_free(&h);
}

/* ---- QUORUM and needs-upgrade ----------------------------------------------
 */

static void assert_needs_upgrade(struct harness *h, baton_node_id id,
				 baton_index at, uint32_t m)
{
	struct baton_raft_status s = h_status(h, id);
	cr_assert_eq(s.stalled_index, at);
	cr_assert_eq(s.needs_machine.value, m);
	cr_assert_lt(h->applied[id], at);
	struct baton_pipeline_status ps;
	baton_pipeline_status(h->node[id].p, &ps);
	char want[BATON_STALL_TEXT_MAX], r[BATON_RELEASE_STR_MAX];
	snprintf(want, sizeof want,
		 "needs-upgrade: the effective machine version becomes %u at "
		 "index %llu, but release %s implements machine versions up "
		 "to %u; restart this node with a release that implements "
		 "machine version %u",
		 m, (unsigned long long)at,
		 baton_release_format(h->o[id].profile.release, r),
		 h->o[id].profile.machine_max.value, m);
	cr_assert_str_eq(ps.stalled_why, want);
}

Test(upgrade, quorum_goes_without_the_member_behind_which_stalls)
{
	strategy = BATON_UPGRADE_QUORUM;
	struct harness h;
	baton_node_id l = mixed(&h);
	struct baton_raft_status sl = h_status(&h, l);
	cr_assert_eq(sl.versions.machine.value, 2);
	baton_index at = sl.versions_index;
	cr_assert_eq(upgrade_status(&h, l).strategy, BATON_UPGRADE_QUORUM);
	cr_assert_eq(upgrade_status(&h, l).n_waiting, 0, "a quorum is ready");
	/* The raise is the first entry with machine version 2. */
	struct baton_version_state v;
	baton_index raise = 0;
	for (baton_index i = 1; i <= at && raise == 0; i++) {
		const struct baton_entry *e = baton_raft_entry(h.r[l], i);
		if (e->type == BATON_ENTRY_VERSION &&
		    baton_version_state_decode(e->buf, e->len, &v) == 0 &&
		    v.machine.value == 2)
			raise = i;
	}
	cr_assert_neq(raise, 0);
	assert_needs_upgrade(&h, 3, raise, 2);
	/* Node 3 keeps replicating and acknowledging; its answers still
	 * reach the leader's table. */
	cr_assert_eq(h_propose(&h, l, "x"), 0);
	h_run(&h, 100);
	cr_assert_eq(h_status(&h, 3).last_index, h_status(&h, l).last_index);
	cr_assert_eq(baton_raft_match_index(h.r[l], 3),
		     h_status(&h, l).last_index);
	cr_assert(upgrade_status(&h, l).members[2].known);
	assert_needs_upgrade(&h, 3, raise, 2);
	/* Without the leader, node 3 never stands: the other leads. */
	h.down[l] = true;
	h_run(&h, 1500);
	baton_node_id l2 = other_than(l, 3);
	cr_assert_eq(h_status(&h, l2).role, BATON_LEADER);
	cr_assert_neq(h_status(&h, 3).role, BATON_LEADER);
	h.down[l] = false;
	/* Restarted on 1.1.0, node 3 applies everything. */
	restart_on(&h, 3, rel(1, 1));
	h_run(&h, 300);
	struct baton_raft_status s3 = h_status(&h, 3);
	cr_assert_eq(s3.stalled_index, 0);
	cr_assert_eq(s3.needs_machine.value, 0);
	cr_assert_eq(h.applied[3], h_status(&h, h_leader(&h)).commit_index);
	h_free(&h);
}

Test(upgrade, a_leader_never_raises_above_its_own_machine_max)
{
	strategy = BATON_UPGRADE_QUORUM;
	policy = BATON_ELECTION_ANY; /* node 1 leads on: no rule 2 */
	runs[1] = rel(1, 0);
	runs[2] = rel(1, 1);
	runs[3] = rel(1, 1);
	slow[2] = slow[3] = 1000; /* node 1 leads */
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	cr_assert_eq(h_elect(&h), 1);
	h_run(&h, 500);
	cr_assert_eq(machine(&h, 1), 1, "a quorum could, node 1 cannot");
	struct baton_upgrade_status u = upgrade_status(&h, 1);
	cr_assert_eq(u.target.value, 1);
	cr_assert_eq(u.n_waiting, 0);
	/* Leadership moves to node 2: it raises, node 1 stalls. */
	struct baton_event ev = {.type = BATON_EVENT_TRANSFER};
	ev.u.transfer.target = 2;
	cr_assert_eq(h_step(&h, 1, &ev), 0);
	h_run(&h, 500);
	cr_assert_eq(h_leader(&h), 2);
	cr_assert_eq(machine(&h, 2), 2);
	struct baton_raft_status s1 = h_status(&h, 1);
	cr_assert_eq(s1.needs_machine.value, 2);
	assert_needs_upgrade(&h, 1, s1.stalled_index, 2);
	/* Asked to record machine version 3 by hand, it refuses. */
	struct baton_version_state v = h_status(&h, 2).versions;
	v.machine.value = 3;
	struct baton_event ve = {.type = BATON_EVENT_VERSIONS};
	ve.u.versions.state = &v;
	cr_assert_eq(h_step(&h, 2, &ve), BATON_EINVAL);
	h_free(&h);
}

Test(upgrade, a_snapshot_of_a_machine_version_it_lacks_is_never_installed)
{
	strategy = BATON_UPGRADE_QUORUM;
	runs[1] = rel(1, 1);
	runs[2] = rel(1, 1);
	runs[3] = rel(1, 0);
	slow[3] = 1000;
	struct harness h;
	h_init_snapshots(&h, 3, no_trailing, 4);
	h.info = true;
	h.down[3] = true;
	baton_node_id l = h_elect(&h);
	h_run(&h, 300);
	cr_assert_eq(machine(&h, l), 2);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(h_propose(&h, l, "c"), 0);
	h_run(&h, 200);
	struct baton_raft_status sl = h_status(&h, l);
	cr_assert_gt(sl.snapshot_index, sl.versions_index);
	cr_assert_gt(sl.first_index, 2, "node 3 needs the snapshot");
	/* Node 3 comes back: it refuses the snapshot and stalls there. */
	h.down[3] = false;
	h_run(&h, 300);
	/* One of the leader's snapshots (it takes more meanwhile). */
	baton_index snap = h_status(&h, 3).stalled_index;
	cr_assert_gt(snap, sl.versions_index);
	cr_assert_leq(snap, h_status(&h, l).snapshot_index);
	cr_assert_eq(snap % 4, 0);
	cr_assert_eq(h.snapshot_installed[3], 0);
	cr_assert_eq(h_status(&h, 3).snapshot_index, 0);
	cr_assert_eq(h.node[3].machine.restores, 0);
	assert_needs_upgrade(&h, 3, snap, 2);
	/* The leader stops streaming it: a chunk every other heartbeat at
	 * most (50 heartbeats in a second). */
	uint32_t chunks = h.delivered_to[3][BATON_MSG_SNAPSHOT];
	h_run(&h, 1000);
	chunks = h.delivered_to[3][BATON_MSG_SNAPSHOT] - chunks;
	cr_assert_leq(chunks, 30, "%u chunks", chunks);
	assert_needs_upgrade(&h, 3, snap, 2);
	/* On 1.1.0 it installs it and catches up. */
	restart_on(&h, 3, rel(1, 1));
	h_run(&h, 300);
	struct baton_raft_status s3 = h_status(&h, 3);
	cr_assert_eq(s3.stalled_index, 0);
	cr_assert_eq(s3.needs_machine.value, 0);
	cr_assert_geq(s3.snapshot_index, snap);
	cr_assert_eq(h.applied[3], h_status(&h, h_leader(&h)).commit_index);
	h_free(&h);
}

Test(upgrade, a_restart_on_the_same_old_release_stalls_again)
{
	strategy = BATON_UPGRADE_QUORUM;
	struct harness h;
	baton_node_id l = mixed(&h);
	baton_index at = h_status(&h, 3).stalled_index;
	cr_assert_neq(at, 0);
	(void)l;
	h_restart(&h, 3, false);
	/* The core finds it in the log on restore, before any message. */
	struct baton_raft_status s = h_status(&h, 3);
	cr_assert_eq(s.stalled_index, at);
	cr_assert_eq(s.needs_machine.value, 2);
	h_run(&h, 100);
	assert_needs_upgrade(&h, 3, at, 2);
	h_free(&h);
}

/* ---- the join check ----------------------------------------------------- */

static struct baton_version_state cluster_of(uint32_t machine_version,
					     const struct baton_profile *a,
					     const struct baton_profile *b,
					     const struct baton_profile *c)
{
	const struct baton_profile *p[3] = {a, b, c};
	struct baton_version_state s;
	baton_version_state_initial(&s);
	s.machine.value = machine_version;
	for (uint32_t i = 0; i < 3; i++) {
		if (p[i] == NULL)
			continue;
		s.members[s.n].id = i + 1;
		s.members[s.n].profile = *p[i];
		s.n++;
	}
	return s;
}

Test(join, a_joiner_needs_a_protocol_common_to_every_member)
{
	struct baton_version_state s =
		cluster_of(1, rel(1, 0), rel(1, 1), rel(1, 1));
	char why[256];
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 1), NULL, why, sizeof why),
		     0);
	cr_assert_str_eq(why, "");
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 0), NULL, why, sizeof why),
		     0);
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 2), NULL, why, sizeof why),
		     BATON_EVERSION);
	cr_assert_str_eq(why,
			 "release 1.2.0 speaks peer protocol versions 2..3, "
			 "but the members together speak only 1..1 (node 1 "
			 "runs release 1.0.0): no version in common");
	/* Once node 1 runs 1.1.0, the members speak 1..2: 1.2.0 may join. */
	s.members[0].profile = *rel(1, 1);
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 2), NULL, why, sizeof why),
		     0);
	/* Members that share nothing admit nobody. */
	s = cluster_of(1, rel(1, 0), rel(1, 2), NULL);
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 1), NULL, why, sizeof why),
		     BATON_EVERSION);
	cr_assert(strstr(why, "the members speak no peer protocol version in "
			      "common") != NULL,
		  "%s", why);
	/* An empty table: nothing to meet. */
	baton_version_state_initial(&s);
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 2), NULL, why, sizeof why),
		     0);
}

Test(join, a_joiner_needs_the_effective_machine_version)
{
	struct baton_version_state s =
		cluster_of(2, rel(1, 1), rel(1, 1), rel(1, 1));
	char why[256];
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 0), NULL, why, sizeof why),
		     BATON_EVERSION);
	cr_assert_str_eq(why, "release 1.0.0 implements machine versions up "
			      "to 1, but the cluster's effective machine "
			      "version is 2");
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 1), NULL, why, sizeof why),
		     0);
}

Test(join, strict_admits_only_the_clusters_release)
{
	struct baton_version_state s =
		cluster_of(2, rel(1, 1), rel(1, 1), rel(1, 1));
	struct baton_release strict = {1, 1, 0};
	char why[256];
	cr_assert_eq(
		baton_join_check(&s, 4, rel(1, 2), &strict, why, sizeof why),
		BATON_EVERSION);
	cr_assert_str_eq(why, "strict release: the cluster runs release 1.1.0 "
			      "and admits no other, the joiner runs 1.2.0");
	cr_assert_eq(
		baton_join_check(&s, 4, rel(1, 1), &strict, why, sizeof why),
		0);
	/* Without strict, the same joiner is welcome. */
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 2), NULL, why, sizeof why),
		     0);
}

Test(join, the_joiners_own_row_is_ignored)
{
	/* Node 1 ran 1.0.0 and comes back on 1.2.0: judged on what it runs
	 * now and what the others run. */
	struct baton_version_state s =
		cluster_of(1, rel(1, 0), rel(1, 1), rel(1, 1));
	char why[256];
	cr_assert_eq(baton_join_check(&s, 1, rel(1, 2), NULL, why, sizeof why),
		     0);
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 2), NULL, why, sizeof why),
		     BATON_EVERSION);
}

Test(join, malformed_input_and_short_buffers)
{
	struct baton_version_state s =
		cluster_of(2, rel(1, 1), rel(1, 1), NULL);
	struct baton_profile bad = *rel(1, 1);
	bad.proto_min.value = 5;
	char why[256];
	cr_assert_eq(baton_join_check(&s, 4, &bad, NULL, why, sizeof why),
		     BATON_EINVAL);
	cr_assert_str_eq(why, "malformed versions");
	cr_assert_eq(
		baton_join_check(NULL, 4, rel(1, 1), NULL, why, sizeof why),
		BATON_EINVAL);
	s.machine.value = 0;
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 1), NULL, why, sizeof why),
		     BATON_EINVAL);
	s.machine.value = 2;
	/* Cut to the buffer, the verdict unchanged; no buffer at all. */
	char tiny[8];
	cr_assert_eq(
		baton_join_check(&s, 4, rel(1, 0), NULL, tiny, sizeof tiny),
		BATON_EVERSION);
	cr_assert_eq(strlen(tiny), sizeof tiny - 1);
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 0), NULL, NULL, 0),
		     BATON_EVERSION);
}

Test(join, a_joiner_below_the_release_floor_is_refused)
{
	/* The cluster has been led by 1.1.0: a 1.0.0 node could neither lead
	 * nor apply (DESIGN.md, "Future data"). */
	struct baton_version_state s =
		cluster_of(1, rel(1, 1), rel(1, 1), NULL);
	s.floor = rel(1, 1)->release;
	char why[512];
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 0), NULL, why, sizeof why),
		     BATON_EVERSION);
	cr_assert(strstr(why, "release 1.0.0 is below") != NULL, "%s", why);
	cr_assert(strstr(why, "release floor 1.1.0") != NULL, "%s", why);
	cr_assert(strstr(why, "downgrade") != NULL, "says what to do: %s", why);
	/* At or above the floor: welcome. */
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 1), NULL, why, sizeof why),
		     0);
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 2), NULL, why, sizeof why),
		     0);
	/* A node re-joining is judged by what it runs now, not by its row. */
	cr_assert_eq(baton_join_check(&s, 1, rel(1, 0), NULL, why, sizeof why),
		     BATON_EVERSION);
	/* The floor comes before the machine version: with both broken the
	 * reason is the floor's. */
	s.machine.value = 2;
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 0), NULL, why, sizeof why),
		     BATON_EVERSION);
	cr_assert(strstr(why, "release floor 1.1.0") != NULL, "%s", why);
	/* And strict comes before the floor. */
	struct baton_release strict = {1, 1, 0};
	cr_assert_eq(
		baton_join_check(&s, 4, rel(1, 0), &strict, why, sizeof why),
		BATON_EVERSION);
	cr_assert(strncmp(why, "strict release", 14) == 0, "%s", why);
	/* Once a downgrade to 1.0.0 lowered the floor, 1.0.0 may join. */
	s.downgrade.target = rel(1, 0)->release;
	s.downgrade.prev_floor = s.floor;
	s.downgrade.prev_machine.value = 2;
	s.downgrade.since = 9;
	s.floor = rel(1, 0)->release;
	s.machine.value = 1;
	cr_assert_eq(baton_join_check(&s, 4, rel(1, 0), NULL, why, sizeof why),
		     0);
	cr_assert_str_eq(why, "");
}
