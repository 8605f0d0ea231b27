/* The metrics histogram (src/util/histogram.c): buckets, bounds, threads. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "histogram.h"

static const double bounds[] = {0.001, 0.01, 0.1};

Test(histogram, counts_each_observation_in_the_first_bucket_that_holds_it)
{
	static struct baton_histogram h;
	cr_assert_eq(baton_histogram_init(&h, bounds, 3), 0);
	baton_histogram_observe_ns(&h, 500000);	    /* 0.0005 s */
	baton_histogram_observe_ns(&h, 1000000);    /* 0.001 s: le 0.001 */
	baton_histogram_observe_ns(&h, 50000000);   /* 0.05 s */
	baton_histogram_observe_ns(&h, 2000000000); /* 2 s: +Inf only */
	struct baton_histogram_snapshot s;
	baton_histogram_read(&h, &s);
	cr_assert_eq(s.n_bounds, 3);
	cr_assert_eq(s.cumulative[0], 2);
	cr_assert_eq(s.cumulative[1], 2);
	cr_assert_eq(s.cumulative[2], 3);
	cr_assert_eq(s.cumulative[3], 4);
	cr_assert_eq(s.count, 4);
	cr_assert_float_eq(s.sum_seconds, 2.0515, 1e-9);
}

Test(histogram, an_empty_one_reads_zeros)
{
	static struct baton_histogram h;
	cr_assert_eq(baton_histogram_init(&h, bounds, 3), 0);
	struct baton_histogram_snapshot s;
	baton_histogram_read(&h, &s);
	for (size_t i = 0; i <= 3; i++)
		cr_assert_eq(s.cumulative[i], 0);
	cr_assert_eq(s.count, 0);
	cr_assert_float_eq(s.sum_seconds, 0.0, 1e-12);
}

Test(histogram, refuses_bounds_not_strictly_ascending_or_too_many)
{
	static struct baton_histogram h;
	static const double flat[] = {0.1, 0.1};
	static const double down[] = {0.2, 0.1};
	static double many[BATON_HISTOGRAM_BOUNDS_MAX + 1];
	for (size_t i = 0; i <= BATON_HISTOGRAM_BOUNDS_MAX; i++)
		many[i] = (double)(i + 1);
	cr_assert_eq(baton_histogram_init(&h, flat, 2), -1);
	cr_assert_eq(baton_histogram_init(&h, down, 2), -1);
	cr_assert_eq(baton_histogram_init(&h, bounds, 0), -1);
	cr_assert_eq(
		baton_histogram_init(&h, many, BATON_HISTOGRAM_BOUNDS_MAX + 1),
		-1);
	cr_assert_eq(baton_histogram_init(&h, many, BATON_HISTOGRAM_BOUNDS_MAX),
		     0);
}

Test(histogram, the_static_latency_one_needs_no_init)
{
	static struct baton_histogram h = BATON_HISTOGRAM_LATENCY_INIT;
	baton_histogram_observe_ns(&h, 3000000); /* 3 ms */
	struct baton_histogram_snapshot s;
	baton_histogram_read(&h, &s);
	cr_assert_eq(s.n_bounds, BATON_HISTOGRAM_LATENCY_N_BOUNDS);
	cr_assert_eq(s.count, 1);
	for (size_t i = 1; i < s.n_bounds; i++)
		cr_assert(baton_histogram_latency_bounds[i] >
			  baton_histogram_latency_bounds[i - 1]);
	/* 0.0025 < 0.003 <= 0.005 */
	for (size_t i = 0; i < s.n_bounds; i++)
		cr_assert_eq(s.cumulative[i],
			     baton_histogram_latency_bounds[i] >= 0.003 ? 1u
									: 0u);
}

Test(histogram, a_zero_histogram_ignores_observations)
{
	static struct baton_histogram h; /* never initialised */
	baton_histogram_observe_ns(&h, 1000);
	struct baton_histogram_snapshot s;
	baton_histogram_read(&h, &s);
	cr_assert_eq(s.count, 0);
}

#define THREADS 4
#define PER_THREAD 100000

static struct baton_histogram shared;

static void *observe_many(void *arg)
{
	uint64_t ns = (uint64_t)(uintptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++)
		baton_histogram_observe_ns(&shared, ns);
	return NULL;
}

Test(histogram, observations_from_several_threads_are_all_counted)
{
	cr_assert_eq(baton_histogram_init(&shared, bounds, 3), 0);
	pthread_t t[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, observe_many,
					    (void *)(i * 5000000u)),
			     0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	struct baton_histogram_snapshot s;
	baton_histogram_read(&shared, &s);
	cr_assert_eq(s.count, (uint64_t)THREADS * PER_THREAD);
	/* 0, 5, 10, 15 ms: 0 in le 0.001; 0, 5, 10 in le 0.01. */
	cr_assert_eq(s.cumulative[0], PER_THREAD);
	cr_assert_eq(s.cumulative[1], 3u * PER_THREAD);
	cr_assert_eq(s.cumulative[2], 4u * PER_THREAD);
}
