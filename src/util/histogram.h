/*
 * A fixed-bucket latency histogram for the metrics endpoint
 * (docs/metrics.md): cumulative-ready counts per upper bound, a sum and a
 * count, as Prometheus's histogram type wants them.
 *
 * Observations may come from any thread (the storage's group-commit fsync
 * runs on its own): every counter is a relaxed atomic, so an observation
 * never takes a lock. A reader on another thread may see an observation in
 * its bucket before it is in the count; baton_histogram_read() therefore
 * derives the count from the buckets it read, so what it returns is always
 * self-consistent (+Inf == count).
 */
#ifndef BATON_HISTOGRAM_H
#define BATON_HISTOGRAM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bounds a histogram may have (the +Inf bucket comes on top). */
#define BATON_HISTOGRAM_BOUNDS_MAX 20u

struct baton_histogram {
	/* Ascending upper bounds in seconds, and how many. */
	const double *bounds;
	size_t n_bounds;
	/* counts[i]: observations <= bounds[i] and > bounds[i-1];
	 * counts[n_bounds]: above the last bound. Not cumulative. */
	_Atomic uint64_t counts[BATON_HISTOGRAM_BOUNDS_MAX + 1];
	/* The sum of observations in nanoseconds (an integer, so it can be
	 * added atomically). */
	_Atomic uint64_t sum_ns;
};

/* What a reader sees: cumulative counts (cumulative[i] = observations
 * <= bounds[i]; cumulative[n_bounds] = all), sum in seconds. */
struct baton_histogram_snapshot {
	size_t n_bounds;
	uint64_t cumulative[BATON_HISTOGRAM_BOUNDS_MAX + 1];
	uint64_t count;
	double sum_seconds;
};

/* Latency bounds from 100 us to 10 s, for commands and fsyncs. A
 * histogram with static storage may start as
 * BATON_HISTOGRAM_LATENCY_INIT instead of calling baton_histogram_init. */
#define BATON_HISTOGRAM_LATENCY_N_BOUNDS 16u
extern const double baton_histogram_latency_bounds[];
#define BATON_HISTOGRAM_LATENCY_INIT                                           \
	{                                                                      \
		.bounds = baton_histogram_latency_bounds,                      \
		.n_bounds = BATON_HISTOGRAM_LATENCY_N_BOUNDS                   \
	}

/* bounds must be strictly ascending, n_bounds in 1..BOUNDS_MAX, and
 * outlive h. Returns 0, or -1 for bounds that break those rules. */
int baton_histogram_init(struct baton_histogram *h, const double *bounds,
			 size_t n_bounds);
/* Count one observation of ns nanoseconds (thread-safe, lock-free). */
void baton_histogram_observe_ns(struct baton_histogram *h, uint64_t ns);
void baton_histogram_read(const struct baton_histogram *h,
			  struct baton_histogram_snapshot *out);

#endif /* BATON_HISTOGRAM_H */
