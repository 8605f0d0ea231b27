/*
 * baton-sim: runs the deterministic simulator for one seed or many.
 *
 *   baton-sim --seed S [--swarm] [--verbose] [--trace-hash] [--history F]
 *   baton-sim --seeds N [--first-seed F] [--swarm] [--stop-on-failure]
 *             [--jobs J]
 *   either with [--upgrade all|quorum] [--releases newest|mixed|oldest]
 *   [--election-policy version-aware|any] [--downgrades on|off]
 *   [--failover]
 *
 * A failing seed prints the broken invariant and the command that replays
 * it; the same seed always produces the same run.
 */
#define _POSIX_C_SOURCE 200809L
#include "world.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define JOBS_MAX 64u

struct cli {
	uint64_t first_seed;
	uint64_t seeds;
	bool one_seed;
	bool swarm;
	bool verbose;
	const char *history_path;
	bool quiet;
	bool trace_hash;
	bool stop_on_failure;
	uint32_t nodes;
	uint64_t time_ms;
	uint32_t jobs;
	uint32_t machine_upgrade; /* 0: the seed's */
	int start_releases;	  /* -1: the seed's */
	uint32_t election_policy; /* 0: the seed's */
	int downgrades;		  /* -1: the seed's, 0 off, 1 on */
	bool failover;		  /* the failover scenario */
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
		"  --upgrade all|quorum  the machine upgrade strategy "
		"(default: seed)\n"
		"  --releases newest|mixed|oldest  the founders' releases "
		"(default:\n"
		"                      seed; not newest: nodes are upgraded "
		"during the run)\n"
		"  --election-policy version-aware|any  who may lead "
		"(default: seed)\n"
		"  --downgrades on|off explicit downgrades by the operator "
		"(default: seed)\n"
		"  --failover          the failover scenario: no other "
		"faults; the leader\n"
		"                      killed every 3 s (its peers see the "
		"connection close),\n"
		"                      each next leader owed within an "
		"election timeout\n"
		"  --stop-on-failure   stop at the first failing seed\n"
		"  --jobs J            run the seeds in J processes (default "
		"1)\n"
		"  --verbose           trace every event (for one seed)\n"
		"  --trace-hash        print a hash of the whole trace\n"
		"  --history FILE      write the clients' history there (the\n"
		"                      baton format of baton-lincheck)\n"
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
	*c = (struct cli){.first_seed = 1,
			  .seeds = 100,
			  .jobs = 1,
			  .start_releases = -1,
			  .downgrades = -1};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x = 0;
		if (strcmp(a, "--swarm") == 0) {
			c->swarm = true;
		} else if (strcmp(a, "--verbose") == 0) {
			c->verbose = true;
		} else if (strcmp(a, "--history") == 0 && v != NULL) {
			c->history_path = v;
			i++;
		} else if (strcmp(a, "--upgrade") == 0 && v != NULL) {
			if (strcmp(v, "all") == 0)
				c->machine_upgrade = BATON_UPGRADE_ALL;
			else if (strcmp(v, "quorum") == 0)
				c->machine_upgrade = BATON_UPGRADE_QUORUM;
			else
				return -1;
			i++;
		} else if (strcmp(a, "--releases") == 0 && v != NULL) {
			if (strcmp(v, "newest") == 0)
				c->start_releases = SIM_START_NEWEST;
			else if (strcmp(v, "mixed") == 0)
				c->start_releases = SIM_START_MIXED;
			else if (strcmp(v, "oldest") == 0)
				c->start_releases = SIM_START_OLDEST;
			else
				return -1;
			i++;
		} else if (strcmp(a, "--election-policy") == 0 && v != NULL) {
			if (strcmp(v, "version-aware") == 0)
				c->election_policy =
					BATON_ELECTION_VERSION_AWARE;
			else if (strcmp(v, "any") == 0)
				c->election_policy = BATON_ELECTION_ANY;
			else
				return -1;
			i++;
		} else if (strcmp(a, "--downgrades") == 0 && v != NULL) {
			if (strcmp(v, "on") == 0)
				c->downgrades = 1;
			else if (strcmp(v, "off") == 0)
				c->downgrades = 0;
			else
				return -1;
			i++;
		} else if (strcmp(a, "--failover") == 0) {
			c->failover = true;
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
			    strcmp(a, "--jobs") == 0 ||
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
			} else if (strcmp(a, "--jobs") == 0) {
				if (x < 1 || x > JOBS_MAX)
					return -1;
				c->jobs = (uint32_t)x;
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
	t->deposals += s->deposals;
	t->careless += s->careless;
	t->careless_refused += s->careless_refused;
	t->careless_accepted += s->careless_accepted;
	t->committed += s->committed;
	t->elections += s->elections;
	t->crashes += s->crashes;
	t->partitions += s->partitions;
	t->snapshots_taken += s->snapshots_taken;
	t->snapshots_installed += s->snapshots_installed;
	t->snapshot_slices += s->snapshot_slices;
	t->applied_mid_snapshot += s->applied_mid_snapshot;
	t->member_changes += s->member_changes;
	t->transfers += s->transfers;
	t->reads_ok += s->reads_ok;
	t->reads_failed += s->reads_failed;
	t->msgs_sent += s->msgs_sent;
	t->msgs_lost += s->msgs_lost;
	t->ops_ok += s->ops_ok;
	t->ops_failed += s->ops_failed;
	t->ops_unknown += s->ops_unknown;
	t->extensions += s->extensions;
	t->upgrades += s->upgrades;
	t->msgs_refused += s->msgs_refused;
	t->version_raises += s->version_raises;
	t->needs_upgrade += s->needs_upgrade;
	t->floor_raises += s->floor_raises;
	t->floor_holds += s->floor_holds;
	t->votes_refused += s->votes_refused;
	t->downgrades += s->downgrades;
	t->downgrade_restarts += s->downgrade_restarts;
	t->cancels += s->cancels;
	t->downgrade_ends += s->downgrade_ends;
	t->rules_steps += s->rules_steps;
	t->closes += s->closes;
	t->spurious_closes += s->spurious_closes;
	t->fast_failovers += s->fast_failovers;
	t->slow_failovers += s->slow_failovers;
	t->clock_skews += s->clock_skews;
	t->clock_bars += s->clock_bars;
	if (s->leader_wait_per_mille > t->leader_wait_per_mille)
		t->leader_wait_per_mille = s->leader_wait_per_mille;
	if (s->majority_wait_per_mille > t->majority_wait_per_mille)
		t->majority_wait_per_mille = s->majority_wait_per_mille;
}

static void print_stats(const char *what, const struct sim_stats *s)
{
	printf("%s: %llu leaders deposed while running; careless operator: "
	       "%llu requests, %llu refused, %llu accepted\n",
	       what, (unsigned long long)s->deposals,
	       (unsigned long long)s->careless,
	       (unsigned long long)s->careless_refused,
	       (unsigned long long)s->careless_accepted);
	printf("%s: %llu proposals accepted, %llu entries committed, %llu "
	       "elections, %llu crashes, %llu partitions, %llu snapshots "
	       "taken (%llu slices, %llu commands applied between them), "
	       "%llu installed, %llu membership changes, %llu transfers, %llu "
	       "reads ok (%llu failed), %llu messages (%llu lost); client "
	       "operations: %llu ok, %llu failed, %llu indeterminate; "
	       "%llu safety phase extensions; %llu upgrades, %llu messages "
	       "refused between releases, %llu machine version raises, %llu "
	       "needs-upgrade stalls; %llu release floor raises, %llu floor "
	       "holds, %llu votes refused below the floor; %llu downgrades "
	       "enabled (%llu nodes restarted at the target, %llu cancelled, "
	       "%llu ended); %llu staged steps in the liveness phase, "
	       "longest wait for a leader %llu/1000 of its bound, for the "
	       "majority release %llu/1000\n",
	       what, (unsigned long long)s->proposals,
	       (unsigned long long)s->committed,
	       (unsigned long long)s->elections, (unsigned long long)s->crashes,
	       (unsigned long long)s->partitions,
	       (unsigned long long)s->snapshots_taken,
	       (unsigned long long)s->snapshot_slices,
	       (unsigned long long)s->applied_mid_snapshot,
	       (unsigned long long)s->snapshots_installed,
	       (unsigned long long)s->member_changes,
	       (unsigned long long)s->transfers,
	       (unsigned long long)s->reads_ok,
	       (unsigned long long)s->reads_failed,
	       (unsigned long long)s->msgs_sent,
	       (unsigned long long)s->msgs_lost, (unsigned long long)s->ops_ok,
	       (unsigned long long)s->ops_failed,
	       (unsigned long long)s->ops_unknown,
	       (unsigned long long)s->extensions,
	       (unsigned long long)s->upgrades,
	       (unsigned long long)s->msgs_refused,
	       (unsigned long long)s->version_raises,
	       (unsigned long long)s->needs_upgrade,
	       (unsigned long long)s->floor_raises,
	       (unsigned long long)s->floor_holds,
	       (unsigned long long)s->votes_refused,
	       (unsigned long long)s->downgrades,
	       (unsigned long long)s->downgrade_restarts,
	       (unsigned long long)s->cancels,
	       (unsigned long long)s->downgrade_ends,
	       (unsigned long long)s->rules_steps,
	       (unsigned long long)s->leader_wait_per_mille,
	       (unsigned long long)s->majority_wait_per_mille);
	printf("%s: %llu crashes told by closed connections, %llu spurious "
	       "closes; after a leader's death its peers heard of, %llu new "
	       "leaders within an election timeout, %llu later\n",
	       what, (unsigned long long)s->closes,
	       (unsigned long long)s->spurious_closes,
	       (unsigned long long)s->fast_failovers,
	       (unsigned long long)s->slow_failovers);
	printf("%s: %llu clocks set far off, %llu nodes barred for their "
	       "clock\n",
	       what, (unsigned long long)s->clock_skews,
	       (unsigned long long)s->clock_bars);
}

/* The failover scenario: a calm cluster on the core's default timers whose
 * leader is killed every 3 s, its peers told by closed connections; every
 * next leader is owed within one election timeout (sim_failover_leader),
 * which only the fast path can give (the timeout alone waits >= 900 ms). */
static void failover_params(struct sim_params *p)
{
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	p->election_timeout_ms = o.election_timeout_ms;
	p->heartbeat_ms = o.heartbeat_interval_ms;
	p->net_min_ms = 1;
	p->net_max_ms = 5;
	p->loss_per_mille = p->dup_per_mille = p->reorder_per_mille = 0;
	p->nemesis_every_ms = 0;
	p->member_every_ms = p->transfer_every_ms = 0;
	p->upgrade_every_ms = p->downgrade_every_ms = 0;
	p->start_releases = SIM_START_NEWEST;
	p->blip_after_vote_per_mille = p->crash_on_commit_per_mille = 0;
	p->crash_after_propose_per_mille = p->crash_on_election_per_mille = 0;
	p->crash_on_first_commit_per_mille = 0;
	p->fault_after_config_per_mille = p->crash_undurable_leader_per_mille =
		0;
	p->link_at_transfer_per_mille = p->member_after_election_per_mille = 0;
	p->close_per_mille = 1000;
	p->spurious_close_per_mille = 0;
	p->failover_every_ms = 3000;
}

static int run_seed(const struct cli *c, uint64_t seed, struct sim_stats *tot)
{
	struct sim_world *w = calloc(1, sizeof *w);
	if (w == NULL)
		abort();
	w->seed = seed;
	w->verbose = c->verbose;
	w->history_path = c->history_path;
	struct sim_rng params_rng = {seed ^ 0x5eedull};
	if (c->swarm)
		sim_params_swarm(&w->p, &params_rng);
	else
		sim_params_default(&w->p);
	if (c->failover)
		failover_params(&w->p);
	if (c->nodes != 0)
		w->p.n_nodes = c->nodes;
	if (c->machine_upgrade != 0)
		w->p.machine_upgrade = c->machine_upgrade;
	if (c->start_releases >= 0) {
		w->p.start_releases = (uint32_t)c->start_releases;
		if (w->p.start_releases == SIM_START_NEWEST)
			w->p.upgrade_every_ms = 0;
		else if (w->p.upgrade_every_ms == 0)
			w->p.upgrade_every_ms = 2000;
	}
	if (c->election_policy != 0)
		w->p.election_policy = c->election_policy;
	if (c->downgrades == 0) {
		w->p.downgrade_every_ms = 0;
	} else if (c->downgrades == 1 && w->p.downgrade_every_ms == 0) {
		w->p.downgrade_every_ms = 3000;
		w->p.cancel_per_mille = 150;
	}
	if (c->time_ms != 0) {
		/* A short run is a quick look, not a scenario: no target. */
		w->p.safety_ms = c->time_ms;
		w->p.safety_max_ms = 3 * c->time_ms;
		if (c->time_ms < 60000)
			w->p.min_proposals = 0;
	}
	running_seed = seed;
	int rv = sim_run(w);
	/* Not a safety failure: the seed's faults left the clients too
	 * little to do even in the extended safety phase. */
	if (rv == 0 && w->stats.proposals < w->p.min_proposals) {
		snprintf(w->failure, sizeof w->failure,
			 "workload: only %llu proposals accepted in %llu ms "
			 "of faults (need %llu)",
			 (unsigned long long)w->stats.proposals,
			 (unsigned long long)w->liveness_from_ms,
			 (unsigned long long)w->p.min_proposals);
		rv = 1;
	}
	/* The failover scenario: nothing else happens, so a next leader
	 * later than an election timeout means the closes went unheeded. A
	 * vote split between followers that stood together costs a few
	 * retries, seldom more: one in ten is allowed. */
	uint64_t fast = w->stats.fast_failovers, slow = w->stats.slow_failovers;
	if (rv == 0 && c->failover &&
	    (fast + slow < 5 || slow * 10 > fast + slow)) {
		snprintf(w->failure, sizeof w->failure,
			 "fast failover: of %llu leaders killed (their peers "
			 "told), %llu were followed by a new leader only after "
			 "an election timeout (%u ms)",
			 (unsigned long long)(fast + slow),
			 (unsigned long long)slow, w->p.election_timeout_ms);
		rv = 1;
	}
	if (rv != 0) {
		static const char *const starts[] = {" --releases newest",
						     " --releases mixed",
						     " --releases oldest"};
		static const char *const policies[] = {
			"", " --election-policy version-aware",
			" --election-policy any"};
		static const char *const downs[] = {" --downgrades off",
						    " --downgrades on"};
		printf("seed %llu FAILED at %llu ms (%u nodes): %s\n"
		       "replay: build/baton-sim%s%s%s%s%s%s --seed %llu "
		       "--verbose\n",
		       (unsigned long long)seed, (unsigned long long)w->now_ms,
		       w->p.n_nodes, w->failure, c->swarm ? " --swarm" : "",
		       c->failover ? " --failover" : "",
		       c->machine_upgrade == BATON_UPGRADE_ALL
			       ? " --upgrade all"
		       : c->machine_upgrade == BATON_UPGRADE_QUORUM
			       ? " --upgrade quorum"
			       : "",
		       c->start_releases >= 0 ? starts[c->start_releases] : "",
		       policies[c->election_policy],
		       c->downgrades >= 0 ? downs[c->downgrades] : "",
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

struct tally {
	struct sim_stats tot;
	uint64_t passed, failed;
};

/* Every jobs-th seed from the first + job. */
static void run_seeds(const struct cli *c, uint32_t job, uint32_t jobs,
		      struct tally *t)
{
	for (uint64_t s = c->first_seed + job; s < c->first_seed + c->seeds;
	     s += jobs) {
		if (run_seed(c, s, &t->tot) == 0) {
			t->passed++;
		} else {
			t->failed++;
			if (c->stop_on_failure)
				break;
		}
		fflush(stdout); /* one seed's lines in one write */
	}
}

/* --jobs: the seeds dealt round-robin to worker processes, each sending
 * its tally back through a pipe. A worker that dies (an assertion in the
 * code under test) counts as a failure; its abort handler named the
 * seed. */
static void run_parallel(const struct cli *c, struct tally *t)
{
	int fds[JOBS_MAX];
	pid_t pids[JOBS_MAX];
	fflush(stdout);
	for (uint32_t k = 0; k < c->jobs; k++) {
		int p[2];
		if (pipe(p) != 0) {
			perror("baton-sim: pipe");
			exit(2);
		}
		pids[k] = fork();
		if (pids[k] < 0) {
			perror("baton-sim: fork");
			exit(2);
		}
		if (pids[k] == 0) {
			close(p[0]);
			setvbuf(stdout, NULL, _IOFBF, 1 << 16);
			struct tally mine = {0};
			run_seeds(c, k, c->jobs, &mine);
			fflush(stdout);
			ssize_t n = write(p[1], &mine, sizeof mine);
			_exit(n == (ssize_t)sizeof mine ? 0 : 2);
		}
		close(p[1]);
		fds[k] = p[0];
	}
	for (uint32_t k = 0; k < c->jobs; k++) {
		struct tally mine;
		size_t got = 0;
		while (got < sizeof mine) {
			ssize_t n = read(fds[k], (char *)&mine + got,
					 sizeof mine - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		close(fds[k]);
		int status = 0;
		waitpid(pids[k], &status, 0);
		if (got != sizeof mine) {
			printf("baton-sim: worker %u died (its seed is named "
			       "above)\n",
			       k);
			t->failed++;
			continue;
		}
		totals_add(&t->tot, &mine.tot);
		t->passed += mine.passed;
		t->failed += mine.failed;
	}
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
	struct tally t = {0};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (c.jobs > 1 && !c.one_seed)
		run_parallel(&c, &t);
	else
		run_seeds(&c, 0, 1, &t);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) +
		      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (!c.one_seed) {
		if (!c.quiet)
			print_stats("totals", &t.tot);
		printf("%.1f seeds/second (%.1f s)\n",
		       secs > 0 ? (double)(t.passed + t.failed) / secs : 0.0,
		       secs);
	}
	printf("%llu passed, %llu failed\n", (unsigned long long)t.passed,
	       (unsigned long long)t.failed);
	return t.failed == 0 ? 0 : 1;
}
