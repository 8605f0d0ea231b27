/*
 * baton-sim: runs the deterministic simulator for one seed or many.
 *
 *   baton-sim --seed S [--swarm] [--verbose] [--trace-hash]
 *   baton-sim --seeds N [--first-seed F] [--swarm] [--stop-on-failure]
 *
 * A failing seed prints the broken invariant and the command that replays
 * it; the same seed always produces the same run.
 */
#define _POSIX_C_SOURCE 200809L
#include "world.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cli {
	uint64_t first_seed;
	uint64_t seeds;
	bool one_seed;
	bool swarm;
	bool verbose;
	bool quiet;
	bool trace_hash;
	bool stop_on_failure;
	uint32_t nodes;
	uint64_t time_ms;
};

/* The seed being run, for the abort handler: a core assertion kills the
 * process, and the seed must still be named. */
static volatile uint64_t running_seed;
static volatile int running_swarm;

static void on_abort(int sig)
{
	char buf[160];
	int n = snprintf(buf, sizeof buf,
			 "\nbaton-sim: aborted in seed %llu\nreplay: "
			 "build/baton-sim%s --seed %llu --verbose\n",
			 (unsigned long long)running_seed,
			 running_swarm ? " --swarm" : "",
			 (unsigned long long)running_seed);
	if (n > 0)
		(void)!write(2, buf, (size_t)n);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: baton-sim [options]\n"
		"  --seed S            run one seed\n"
		"  --seeds N           run N seeds (default 100)\n"
		"  --first-seed F      first seed of --seeds (default 1)\n"
		"  --swarm             draw every fault rate from the seed\n"
		"  --nodes N           cluster size (3, 5 or 7; default: "
		"seed)\n"
		"  --time-ms T         simulated time of the safety phase "
		"(default 60000)\n"
		"  --stop-on-failure   stop at the first failing seed\n"
		"  --verbose           trace every event (for one seed)\n"
		"  --trace-hash        print a hash of the whole trace\n"
		"  --quiet             only the summary\n");
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*s == '\0' || *end != '\0')
		return false;
	*out = v;
	return true;
}

static int parse(int argc, char **argv, struct cli *c)
{
	*c = (struct cli){.first_seed = 1, .seeds = 100};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x = 0;
		if (strcmp(a, "--swarm") == 0) {
			c->swarm = true;
		} else if (strcmp(a, "--verbose") == 0) {
			c->verbose = true;
		} else if (strcmp(a, "--quiet") == 0) {
			c->quiet = true;
		} else if (strcmp(a, "--trace-hash") == 0) {
			c->trace_hash = true;
		} else if (strcmp(a, "--stop-on-failure") == 0) {
			c->stop_on_failure = true;
		} else if (v != NULL && parse_u64(v, &x) &&
			   (strcmp(a, "--seed") == 0 ||
			    strcmp(a, "--seeds") == 0 ||
			    strcmp(a, "--first-seed") == 0 ||
			    strcmp(a, "--nodes") == 0 ||
			    strcmp(a, "--time-ms") == 0)) {
			i++;
			if (strcmp(a, "--seed") == 0) {
				c->first_seed = x;
				c->seeds = 1;
				c->one_seed = true;
			} else if (strcmp(a, "--seeds") == 0) {
				c->seeds = x;
			} else if (strcmp(a, "--first-seed") == 0) {
				c->first_seed = x;
			} else if (strcmp(a, "--nodes") == 0) {
				if (x != 3 && x != 5 && x != 7)
					return -1;
				c->nodes = (uint32_t)x;
			} else {
				c->time_ms = x;
			}
		} else {
			if (strcmp(a, "--help") != 0)
				fprintf(stderr,
					"baton-sim: bad argument '%s'\n", a);
			return -1;
		}
	}
	return 0;
}

static void totals_add(struct sim_stats *t, const struct sim_stats *s)
{
	t->steps += s->steps;
	t->proposals += s->proposals;
	t->committed += s->committed;
	t->elections += s->elections;
	t->crashes += s->crashes;
	t->partitions += s->partitions;
	t->snapshots_taken += s->snapshots_taken;
	t->snapshots_installed += s->snapshots_installed;
	t->member_changes += s->member_changes;
	t->transfers += s->transfers;
	t->reads_ok += s->reads_ok;
	t->reads_failed += s->reads_failed;
	t->msgs_sent += s->msgs_sent;
	t->msgs_lost += s->msgs_lost;
}

static void print_stats(const char *what, const struct sim_stats *s)
{
	printf("%s: %llu proposals accepted, %llu entries committed, %llu "
	       "elections, %llu crashes, %llu partitions, %llu snapshots "
	       "taken, "
	       "%llu installed, %llu membership changes, %llu transfers, %llu "
	       "reads ok (%llu failed), %llu messages (%llu lost)\n",
	       what, (unsigned long long)s->proposals,
	       (unsigned long long)s->committed,
	       (unsigned long long)s->elections, (unsigned long long)s->crashes,
	       (unsigned long long)s->partitions,
	       (unsigned long long)s->snapshots_taken,
	       (unsigned long long)s->snapshots_installed,
	       (unsigned long long)s->member_changes,
	       (unsigned long long)s->transfers,
	       (unsigned long long)s->reads_ok,
	       (unsigned long long)s->reads_failed,
	       (unsigned long long)s->msgs_sent,
	       (unsigned long long)s->msgs_lost);
}

/* Below this, a seed is a formality rather than a scenario. */
#define MIN_PROPOSALS 1000u

static int run_seed(const struct cli *c, uint64_t seed, struct sim_stats *tot)
{
	struct sim_world *w = calloc(1, sizeof *w);
	if (w == NULL)
		abort();
	w->seed = seed;
	w->verbose = c->verbose;
	struct sim_rng params_rng = {seed ^ 0x5eedull};
	if (c->swarm)
		sim_params_swarm(&w->p, &params_rng);
	else
		sim_params_default(&w->p);
	if (c->nodes != 0)
		w->p.n_nodes = c->nodes;
	if (c->time_ms != 0)
		w->p.safety_ms = c->time_ms;
	running_seed = seed;
	int rv = sim_run(w);
	if (rv == 0 && w->stats.proposals < MIN_PROPOSALS &&
	    w->p.safety_ms >= 60000) {
		snprintf(w->failure, sizeof w->failure,
			 "only %llu proposals accepted (need %u)",
			 (unsigned long long)w->stats.proposals, MIN_PROPOSALS);
		rv = 1;
	}
	if (rv != 0) {
		printf("seed %llu FAILED at %llu ms (%u nodes): %s\n"
		       "replay: build/baton-sim%s --seed %llu --verbose\n",
		       (unsigned long long)seed, (unsigned long long)w->now_ms,
		       w->p.n_nodes, w->failure, c->swarm ? " --swarm" : "",
		       (unsigned long long)seed);
	}
	if (c->one_seed && !c->quiet)
		print_stats("stats", &w->stats);
	if (c->trace_hash)
		printf("trace hash %016llx\n",
		       (unsigned long long)w->trace_hash);
	totals_add(tot, &w->stats);
	sim_world_free(w);
	free(w);
	return rv;
}

int main(int argc, char **argv)
{
	struct cli c;
	if (parse(argc, argv, &c) != 0) {
		usage();
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	running_swarm = c.swarm;
	signal(SIGABRT, on_abort);
	signal(SIGSEGV, on_abort);
	struct sim_stats tot = {0};
	uint64_t passed = 0, failed = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t s = c.first_seed; s < c.first_seed + c.seeds; s++) {
		if (run_seed(&c, s, &tot) == 0) {
			passed++;
		} else {
			failed++;
			if (c.stop_on_failure)
				break;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) +
		      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (!c.one_seed) {
		if (!c.quiet)
			print_stats("totals", &tot);
		printf("%.1f seeds/second (%.1f s)\n",
		       secs > 0 ? (double)(passed + failed) / secs : 0.0, secs);
	}
	printf("%llu passed, %llu failed\n", (unsigned long long)passed,
	       (unsigned long long)failed);
	return failed == 0 ? 0 : 1;
}
