/* Clocks through the pipeline that ships (src/node/clock.c, and the core's
 * BATON_EVENT_CLOCK, docs/core.md "The clock bar"): nodes measure each
 * other's wall clocks from the samples in appends and their results; a
 * leader whose clock a majority disagrees with hands leadership over and
 * does not stand again; one skewed follower deposes nobody; machine-time
 * stamps never trust a wall clock the others disagree with, and keep
 * moving after a leader whose clock ran fast. */
#include <criterion/criterion.h>

#include "harness.h"
#include "pipeline.h"

#define BOUND_MS 500u
#define HOUR_MS 3600000

static struct baton_pipeline_clock clock_of(struct harness *h, baton_node_id id)
{
	struct baton_pipeline_clock k;
	baton_pipeline_clock(h->node[id].p, &k);
	return k;
}

static baton_node_id other(baton_node_id l)
{
	return l == 1 ? 2 : 1;
}

Test(clock, a_skewed_follower_is_measured_and_deposes_nobody)
{
	struct harness h;
	h_init_clocks(&h, 3, BOUND_MS);
	baton_node_id l = h_elect(&h), f = other(l);
	h.clock_skew_ms[f] = HOUR_MS;
	h_run(&h, 3000);
	cr_assert_eq(h_leader(&h), l, "the correct leader keeps leading");
	struct baton_pipeline_clock k = clock_of(&h, f);
	cr_assert(k.checked && k.offset_known);
	cr_assert(k.offset_ms > HOUR_MS - 100 && k.offset_ms < HOUR_MS + 100,
		  "offset %lld", (long long)k.offset_ms);
	cr_assert(!k.barred && k.warnings >= 1);
	struct baton_pipeline_clock lk = clock_of(&h, l);
	cr_assert(!lk.barred && lk.trusted);
	cr_assert(lk.offset_known && lk.offset_ms > -100 && lk.offset_ms < 100,
		  "the closest follower agrees: %lld", (long long)lk.offset_ms);
	h_free(&h);
}

Test(clock, a_skewed_leader_hands_over_and_does_not_stand_again)
{
	struct harness h;
	h_init_clocks(&h, 3, BOUND_MS);
	baton_node_id l = h_elect(&h);
	baton_term t = h_status(&h, l).term;
	h.clock_skew_ms[l] = HOUR_MS;
	baton_node_id nl = 0;
	for (int i = 0; i < 300 && (nl == 0 || nl == l); i++) {
		h_run(&h, 10);
		nl = h_leader(&h);
	}
	cr_assert(nl != 0 && nl != l, "another node leads");
	cr_assert_gt(h_status(&h, nl).term, t);
	cr_assert(clock_of(&h, l).barred);
	cr_assert(h_status(&h, l).clock_barred);
	/* A transfer to it is refused by the bar, and it never stands. */
	struct baton_event ev = {.type = BATON_EVENT_TRANSFER};
	ev.u.transfer.target = l;
	h_step(&h, nl, &ev);
	for (int i = 0; i < 500; i++) {
		h_run(&h, 10);
		cr_assert_neq(h_leader(&h), l, "the skewed node leads again");
	}
	/* Its clock set right, the next sample from the leader lifts it. */
	h.clock_skew_ms[l] = 0;
	h_run(&h, 2000);
	cr_assert(!clock_of(&h, l).barred);
	h_free(&h);
}

Test(clock, stamps_trust_no_wall_clock_a_majority_disagrees_with)
{
	struct harness h;
	h_init_clocks(&h, 3, BOUND_MS);
	baton_node_id l = h_elect(&h);
	h_run(&h, 500);
	/* Agreed with: the wall clock. */
	uint64_t s = baton_pipeline_machine_stamp(h.node[l].p, 0);
	cr_assert_eq(s, H_EPOCH_MS + h.now_ms);
	uint64_t machine = s;
	/* An hour fast: not a millisecond of it reaches machine time. */
	h.clock_skew_ms[l] = HOUR_MS;
	for (int i = 0; i < 100 && h_leader(&h) == l; i++) {
		h_run(&h, 10);
		if (h_leader(&h) != l)
			break;
		s = baton_pipeline_machine_stamp(h.node[l].p, machine);
		cr_assert_leq(s, H_EPOCH_MS + h.now_ms + BOUND_MS,
			      "stamp %llu ms ahead",
			      (unsigned long long)(s - H_EPOCH_MS - h.now_ms));
		machine = s;
	}
	h_free(&h);
}

Test(clock, after_a_fast_leader_machine_time_keeps_moving)
{
	struct harness h;
	h_init_clocks(&h, 3, BOUND_MS);
	baton_node_id l = h_elect(&h);
	h_run(&h, 500);
	/* The log's machine time is an hour ahead (a former leader with the
	 * check off): the stamps go on from there at the speed of time. */
	uint64_t ahead = H_EPOCH_MS + h.now_ms + HOUR_MS;
	uint64_t s0 = baton_pipeline_machine_stamp(h.node[l].p, ahead);
	cr_assert_geq(s0, ahead);
	uint64_t t0 = h.now_ms;
	h_run(&h, 2000);
	cr_assert_eq(h_leader(&h), l);
	uint64_t s1 = baton_pipeline_machine_stamp(h.node[l].p, s0);
	cr_assert_geq(s1 - s0, h.now_ms - t0, "frozen: %llu ms in %llu",
		      (unsigned long long)(s1 - s0),
		      (unsigned long long)(h.now_ms - t0));
	cr_assert_lt(s1 - s0, h.now_ms - t0 + 100);
	h_free(&h);
}
