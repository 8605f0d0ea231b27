/*
 * The burn-in hold (src/core/hold.c, docs/upgrading.md "Hold and
 * finalize"): under BATON_UPGRADE_MANUAL the leader records a hold in the
 * version state, and no leader raises the release floor or the machine
 * version while the log holds it, whatever its own strategy; a finalize
 * (BATON_EVENT_DOWNGRADE, op BATON_UPGRADE_FINALIZE) raises both once
 * every member answered and runs the newest release a member runs.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <string.h>

static const struct baton_profile *rel(uint16_t major, uint16_t minor)
{
	const struct baton_profile *p =
		baton_release_find((struct baton_release){major, minor, 0});
	cr_assert_not_null(p);
	return p;
}

static bool floor_is(struct harness *h, baton_node_id id, uint16_t major,
		     uint16_t minor)
{
	struct baton_release f = h_status(h, id).versions.floor;
	return f.major == major && f.minor == minor && f.patch == 0;
}

/* Each test sets this before h_init (a test is a process of its own). */
static uint32_t strategy = BATON_UPGRADE_MANUAL;

static void tweak(struct baton_raft_options *o)
{
	o->profile = *rel(1, 0);
	o->machine_upgrade = strategy;
}

static void restart_on(struct harness *h, baton_node_id id,
		       const struct baton_profile *p, uint32_t s)
{
	h->o[id].profile = *p;
	h->o[id].machine_upgrade = s;
	h_restart(h, id, false);
}

static int finalize(struct harness *h, baton_node_id l,
		    struct baton_downgrade_plan *plan, char *why, size_t cap)
{
	int rv = baton_raft_downgrade_check(h->r[l], BATON_UPGRADE_FINALIZE,
					    (struct baton_release){0, 0, 0},
					    plan, why, cap);
	if (rv != 0)
		return rv;
	struct baton_event ev = {.type = BATON_EVENT_DOWNGRADE};
	ev.u.downgrade.op = BATON_UPGRADE_FINALIZE;
	return h_step(h, l, &ev);
}

/* Three 1.0.0 nodes under MANUAL, rolled to 1.1.0: held at floor 1.0.0
 * and machine version 1, then finalized. */
static baton_node_id held_on_1_1(struct harness *h)
{
	h_init(h, 3, tweak);
	h->info = true;
	h_elect(h);
	h_run(h, 300);
	baton_node_id l = h_leader(h);
	/* A fresh log takes its first floor and machine version. */
	for (baton_node_id i = 1; i <= 3; i++) {
		cr_assert(floor_is(h, i, 1, 0));
		cr_assert(h_status(h, i).versions.held, "node %llu",
			  (unsigned long long)i);
	}
	for (baton_node_id i = 1; i <= 3; i++) {
		restart_on(h, i, rel(1, 1), strategy);
		h_run(h, 600);
	}
	h_run(h, 1000);
	l = h_leader(h);
	cr_assert_neq(l, 0);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(h, i);
		cr_assert(floor_is(h, i, 1, 0), "node %llu: floor rose",
			  (unsigned long long)i);
		cr_assert_eq(s.versions.machine.value, 1);
		cr_assert(s.versions.held);
	}
	return l;
}

Test(hold, nothing_rises_until_a_finalize_raises_both)
{
	struct harness h;
	baton_node_id l = held_on_1_1(&h);
	struct baton_downgrade_plan plan;
	char why[256];
	cr_assert_eq(finalize(&h, l, &plan, why, sizeof why), 0, "%s", why);
	cr_assert_eq(plan.machine_from.value, 1);
	cr_assert_eq(plan.machine_to.value, 2);
	cr_assert_eq(plan.floor_to.minor, 1);
	h_run(&h, 300);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		cr_assert(floor_is(&h, i, 1, 1));
		cr_assert_eq(s.versions.machine.value, 2);
		cr_assert(s.versions.held, "kept under MANUAL");
	}
	/* Again: nothing to raise, and no entry. */
	baton_index last = h_status(&h, l).last_index;
	cr_assert_eq(finalize(&h, l, &plan, why, sizeof why), 0, "%s", why);
	cr_assert_eq(plan.machine_from.value, plan.machine_to.value);
	cr_assert_eq(h_status(&h, l).last_index, last);
	h_free(&h);
}

/* The hold is the log's: leaders under ALL honour it; a finalize by one
 * of them ends it. */
Test(hold, it_outlives_its_leader_and_binds_every_strategy)
{
	struct harness h;
	held_on_1_1(&h);
	for (baton_node_id i = 1; i <= 3; i++) {
		restart_on(&h, i, rel(1, 1), BATON_UPGRADE_ALL);
		h_run(&h, 600);
	}
	h_run(&h, 1000);
	baton_node_id l = h_leader(&h);
	cr_assert_neq(l, 0);
	for (baton_node_id i = 1; i <= 3; i++) {
		cr_assert(floor_is(&h, i, 1, 0));
		cr_assert_eq(h_status(&h, i).versions.machine.value, 1);
		cr_assert(h_status(&h, i).versions.held);
	}
	struct baton_downgrade_plan plan;
	char why[256];
	cr_assert_eq(finalize(&h, l, &plan, why, sizeof why), 0, "%s", why);
	h_run(&h, 300);
	for (baton_node_id i = 1; i <= 3; i++) {
		cr_assert(floor_is(&h, i, 1, 1));
		cr_assert_eq(h_status(&h, i).versions.machine.value, 2);
		cr_assert_not(h_status(&h, i).versions.held, "ended");
	}
	h_free(&h);
}

/* While held, the binaries roll back by restarts: no node holds. */
Test(hold, rolling_back_while_held_is_a_plain_roll)
{
	struct harness h;
	held_on_1_1(&h);
	for (baton_node_id i = 1; i <= 3; i++) {
		restart_on(&h, i, rel(1, 0), strategy);
		h_run(&h, 600);
	}
	h_run(&h, 1000);
	baton_node_id l = h_leader(&h);
	cr_assert_neq(l, 0);
	cr_assert_eq(h_propose(&h, l, "x"), 0);
	h_run(&h, 300);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		cr_assert_eq(s.stalled_index, 0, "node %llu holds",
			     (unsigned long long)i);
		cr_assert_eq(h.applied[i], h_status(&h, l).commit_index);
	}
	h_free(&h);
}

Test(hold, finalize_refuses_mid_roll_during_a_downgrade_and_without_hold)
{
	struct harness h;
	h_init(&h, 3, tweak);
	h.info = true;
	h_elect(&h);
	h_run(&h, 300);
	baton_node_id l = h_leader(&h);
	baton_node_id other = l == 3 ? 2 : 3;
	restart_on(&h, other, rel(1, 1), strategy);
	h_run(&h, 600);
	l = h_leader(&h);
	struct baton_downgrade_plan plan;
	char why[256];
	cr_assert_eq(finalize(&h, l, &plan, why, sizeof why), BATON_ESTATE);
	cr_assert(strstr(why, "not yet 1.1.0") != NULL, "%s", why);
	/* The plan is still told: what it would raise. */
	cr_assert_eq(plan.floor_from.minor, 0);
	h_free(&h);

	/* A member the leader has not heard from: try again later. */
	h_init(&h, 3, tweak);
	h_elect(&h);
	h_run(&h, 300); /* info replies dropped */
	l = h_leader(&h);
	cr_assert_eq(finalize(&h, l, &plan, why, sizeof why), BATON_EBUSY);
	cr_assert(strstr(why, "has not answered") != NULL, "%s", why);
	h_free(&h);

	/* No hold: ALL, and no hold in the log. */
	strategy = BATON_UPGRADE_ALL;
	h_init(&h, 3, tweak);
	h.info = true;
	h_elect(&h);
	h_run(&h, 300);
	l = h_leader(&h);
	cr_assert_eq(finalize(&h, l, &plan, why, sizeof why), BATON_ESTATE);
	cr_assert(strstr(why, "nothing is held") != NULL, "%s", why);
	h_free(&h);
}
