/* A fixed-bucket, lock-free latency histogram (histogram.h). */
#include "histogram.h"

#include <string.h>

const double baton_histogram_latency_bounds[] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05,	0.1,	 0.25,	 0.5,	1,	2.5,   5,    10,
};
_Static_assert(sizeof baton_histogram_latency_bounds /
			       sizeof baton_histogram_latency_bounds[0] ==
		       BATON_HISTOGRAM_LATENCY_N_BOUNDS,
	       "the latency bounds and their count agree");

int baton_histogram_init(struct baton_histogram *h, const double *bounds,
			 size_t n_bounds)
{
	if (n_bounds == 0 || n_bounds > BATON_HISTOGRAM_BOUNDS_MAX)
		return -1;
	for (size_t i = 1; i < n_bounds; i++)
		if (!(bounds[i] > bounds[i - 1]))
			return -1;
	h->bounds = bounds;
	h->n_bounds = n_bounds;
	for (size_t i = 0; i <= BATON_HISTOGRAM_BOUNDS_MAX; i++)
		atomic_init(&h->counts[i], 0);
	atomic_init(&h->sum_ns, 0);
	return 0;
}

void baton_histogram_observe_ns(struct baton_histogram *h, uint64_t ns)
{
	if (h->n_bounds == 0)
		return; /* never initialised: nobody reads it */
	double seconds = (double)ns / 1e9;
	size_t i = 0;
	while (i < h->n_bounds && seconds > h->bounds[i])
		i++;
	atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void baton_histogram_read(const struct baton_histogram *h,
			  struct baton_histogram_snapshot *out)
{
	memset(out, 0, sizeof *out);
	out->n_bounds = h->n_bounds;
	uint64_t running = 0;
	for (size_t i = 0; i <= h->n_bounds; i++) {
		running += atomic_load_explicit(&h->counts[i],
						memory_order_relaxed);
		out->cumulative[i] = running;
	}
	out->count = running;
	out->sum_seconds =
		(double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) /
		1e9;
}
