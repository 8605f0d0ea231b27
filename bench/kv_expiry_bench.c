/*
 * Expiry benchmark: 1,000,000 keys that all expire at the same
 * millisecond, removed by sweep entries of KV_SWEEP_BATCH_KEYS keys the way
 * the leader's sweeper proposes them. Prints the time to load the keys,
 * the total sweep time and the longest single apply (what a client of the
 * apply loop could notice as a pause). See docs/kv.md.
 *
 *   bench-kv-expiry [keys] [batch]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv.h"

#define KEYS_DEFAULT 1000000u
#define T0_MS 1700000000000ull

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check(int rv, const char *what)
{
	if (rv != 0) {
		fprintf(stderr, "bench-kv-expiry: %s: %s\n", what,
			baton_strerror(rv));
		exit(1);
	}
}

/* CPU seconds of this thread: unlike the wall clock, not inflated when
 * other processes take the (shared) cores mid-apply. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Apply one payload; the seconds it took, and its CPU seconds in *cpu
 * (the larger of the two so far). */
static double apply(struct baton_kv *kv, const struct baton_buf *p,
		    struct baton_buf *reply, double *cpu)
{
	struct baton_machine_version v2 = {2};
	baton_buf_reset(reply);
	double t = now_s(), c = cpu_s();
	check(kv_apply(kv, v2, p->data, p->len, reply), "apply");
	c = cpu_s() - c;
	if (c > *cpu)
		*cpu = c;
	return now_s() - t;
}

int main(int argc, char **argv)
{
	unsigned long keys =
		argc > 1 ? strtoul(argv[1], NULL, 10) : KEYS_DEFAULT;
	unsigned long batch =
		argc > 2 ? strtoul(argv[2], NULL, 10) : KV_SWEEP_BATCH_KEYS;
	if (keys == 0 || batch == 0 || batch > KV_SWEEP_KEYS_MAX) {
		fprintf(stderr, "usage: bench-kv-expiry [keys] [batch <= %u]\n",
			KV_SWEEP_KEYS_MAX);
		return 2;
	}
	struct baton_kv *kv;
	check(kv_create(&kv), "create");
	struct baton_buf p, reply;
	baton_buf_init(&p);
	baton_buf_init(&reply);

	/* Load: SET key:<i> <i> PXAT T0+1000, each its own stamped entry. */
	double t = now_s(), load_max = 0, load_cpu_max = 0;
	char key[32], val[32], at[32];
	snprintf(at, sizeof at, "%llu", T0_MS + 1000);
	for (unsigned long i = 0; i < keys; i++) {
		int kn = snprintf(key, sizeof key, "key:%lu", i);
		int vn = snprintf(val, sizeof val, "%lu", i);
		const uint8_t *args[] = {
			(const uint8_t *)"SET", (const uint8_t *)key,
			(const uint8_t *)val, (const uint8_t *)"PXAT",
			(const uint8_t *)at};
		size_t lens[] = {3, (size_t)kn, (size_t)vn, 4, strlen(at)};
		baton_buf_reset(&p);
		check(kv_encode_v2(T0_MS, 5, args, lens, &p), "encode");
		double d = apply(kv, &p, &reply, &load_cpu_max);
		if (d > load_max)
			load_max = d;
	}
	double load = now_s() - t;

	/* Sweep once all are due, batch by batch, as the sweeper does. */
	uint64_t wall = T0_MS + 2000;
	unsigned long sweeps = 0, cap = keys / batch + 2;
	double *took = calloc(cap, sizeof *took);
	if (took == NULL)
		check(BATON_ENOMEM, "calloc");
	double sweep_cpu_max = 0;
	t = now_s();
	while (kv_expiry_due(kv, wall) && sweeps < cap) {
		baton_buf_reset(&p);
		check(kv_encode_sweep(wall, (uint32_t)batch, &p), "encode");
		took[sweeps++] = apply(kv, &p, &reply, &sweep_cpu_max);
	}
	double total = now_s() - t;
	qsort(took, sweeps, sizeof *took, by_value);
	if (kv_dbsize(kv) != 0) {
		fprintf(stderr, "bench-kv-expiry: %llu keys left\n",
			(unsigned long long)kv_dbsize(kv));
		return 1;
	}
	printf("keys                     %lu (all expiring at the same ms)\n",
	       keys);
	printf("load                     %.3f s (longest apply %.3f ms, "
	       "%.3f ms cpu)\n",
	       load, load_max * 1e3, load_cpu_max * 1e3);
	printf("sweep batch              %lu keys, %lu sweep entries\n", batch,
	       sweeps);
	printf("sweep total              %.3f s (%.0f keys/s)\n", total,
	       (double)keys / total);
	printf("sweep apply median       %.3f ms, p99 %.3f ms\n",
	       took[sweeps / 2] * 1e3, took[sweeps * 99 / 100] * 1e3);
	printf("longest sweep apply      %.3f ms (%.3f ms cpu)\n",
	       took[sweeps - 1] * 1e3, sweep_cpu_max * 1e3);
	free(took);
	baton_buf_free(&p);
	baton_buf_free(&reply);
	kv_destroy(kv);
	return 0;
}
