/*
 * Wall clocks (src/node/clock.c): every node's is the world's time plus
 * SIM_EPOCH_MS plus its skew, 0 unless the clock fault set one. The fault
 * (EV_CLOCK, its own random stream, so that the runs without it draw what
 * they drew before) sets one node's clock far off, ahead or behind, the
 * leader's half of the time, and sets it right again later; the liveness
 * phase sets every clock right.
 *
 * The invariants, checked at every tick of a node (a failure says `clock
 * safety:` for machine time below a stamp or ahead of the correct clocks,
 * which scripts/mutants counts, and `clock liveness:` for the others):
 *   - machine time, as the leader would stamp it now
 *     (baton_pipeline_machine_stamp, with the largest stamp of the run as
 *     the machine time applied): never below a stamp before it, never
 *     ahead of the correct clocks by more than the bound (no key expires
 *     before its TTL as the correct majority counts it) while the leader
 *     and a majority of its voters (two at least) exchange clock samples,
 *     and moving at least as fast as time while one leader keeps its term
 *     (no TTL is frozen);
 *   - a node whose clock is correct is never barred (one skewed follower
 *     deposes nobody), and one set right is not barred for long;
 *   - a skewed leader with a majority of voters that measure it (alive,
 *     correct, speaking a protocol with clock samples, not cut off) steps
 *     down within CLOCK_STEP_DOWN_TIMEOUTS election timeouts.
 */
#include "world.h"

#include "pipeline.h"

#include <stdlib.h>

/* The first peer protocol whose appends carry clock samples
 * (BATON_PEER_PROTO_CLOCK in src/wire/peer_internal.h). */
#define SIM_PROTO_CLOCK 4u
#define CLOCK_STEP_DOWN_TIMEOUTS 6u
/* How long a node set right may stay barred: the bar's 30 s, and more. */
#define CLOCK_BAR_LIMIT_MS 40000u

uint64_t sim_clock_wall_ms(const struct sim_node *n)
{
	return (uint64_t)((int64_t)(SIM_EPOCH_MS + n->w->now_ms) +
			  n->clock_skew_ms);
}

bool sim_clock_carried(uint32_t proto)
{
	return proto >= SIM_PROTO_CLOCK;
}

static bool speaks_clock(const struct sim_world *w, const struct sim_node *n)
{
	return sim_profile(w, n)->proto_max.value >= SIM_PROTO_CLOCK;
}

void sim_clock_start(struct sim_world *w)
{
	w->clock_rng.state = w->seed ^ 0x636c6f636b736b77ull;
	if (w->p.clock_skew_per_mille == 0 ||
	    !sim_chance(&w->clock_rng, w->p.clock_skew_per_mille))
		return;
	uint64_t at = sim_range(&w->clock_rng, 1, w->p.safety_ms / 2);
	sim_schedule(w, at, EV_CLOCK, 0, NULL);
}

static struct sim_node *skewed_node(struct sim_world *w)
{
	for (uint32_t i = 1; i <= w->n_ids; i++)
		if (w->nodes[i].clock_skew_ms != 0)
			return &w->nodes[i];
	return NULL;
}

void sim_clock_heal(struct sim_world *w)
{
	struct sim_node *n = skewed_node(w);
	if (n == NULL)
		return;
	sim_trace(w, "clock: node %llu's clock set right (was %+lld ms)",
		  (unsigned long long)n->id, (long long)n->clock_skew_ms);
	n->clock_skew_ms = 0;
	n->clock_right_since_ms = w->now_ms;
}

void sim_clock_fault(struct sim_world *w)
{
	if (w->liveness)
		return;
	if (skewed_node(w) != NULL) {
		sim_clock_heal(w);
		sim_schedule(w, sim_range(&w->clock_rng, 1, w->p.safety_ms / 4),
			     EV_CLOCK, 0, NULL);
		return;
	}
	struct sim_node *n =
		sim_chance(&w->clock_rng, 500) ? sim_find_leader(w) : NULL;
	if (n == NULL)
		n = sim_random_alive(w);
	if (n != NULL) {
		uint64_t b = w->p.max_clock_offset_ms;
		int64_t skew = (int64_t)sim_range(&w->clock_rng, 3 * b + 200,
						  3600u * 1000u);
		n->clock_skew_ms =
			sim_chance(&w->clock_rng, 500) ? skew : -skew;
		w->stats.clock_skews++;
		sim_trace(w, "clock: node %llu's clock set %+lld ms off",
			  (unsigned long long)n->id,
			  (long long)n->clock_skew_ms);
	}
	sim_schedule(
		w,
		sim_range(&w->clock_rng, 10 * w->p.election_timeout_ms, 20000),
		EV_CLOCK, 0, NULL);
}

/* Whether n and a majority of the voters of its configuration (at least
 * two) speak a protocol with clock samples: else the check cannot run,
 * and a leader's clock is trusted as before it (src/node/clock.c). */
static bool clock_measurable(struct sim_world *w, struct sim_node *n)
{
	if (!speaks_clock(w, n))
		return false;
	struct baton_raft_status st;
	baton_raft_status(n->raft, &st);
	uint32_t voters = 0, speaking = 0;
	for (uint32_t i = 0; i < st.config.n; i++) {
		const struct baton_member *mb = &st.config.members[i];
		if (mb->role != BATON_VOTER)
			continue;
		voters++;
		speaking += mb->id <= SIM_MAX_NODES &&
			    speaks_clock(w, &w->nodes[mb->id]);
	}
	return voters >= 2 && speaking >= voters / 2 + 1;
}

/* The stamp the leader would put on an entry now. */
static void check_stamp(struct sim_world *w, struct sim_node *n)
{
	uint64_t stamp =
		baton_pipeline_machine_stamp(n->pipe, w->clock_machine_ms);
	uint64_t now = w->now_ms,
		 ceiling = SIM_EPOCH_MS + now + w->p.max_clock_offset_ms;
	if (stamp < w->clock_machine_ms)
		sim_fail(w,
			 "clock safety: node %llu stamped machine time %llu, "
			 "below "
			 "%llu stamped before",
			 (unsigned long long)n->id, (unsigned long long)stamp,
			 (unsigned long long)w->clock_machine_ms);
	if (w->p.max_clock_offset_ms > 0 && stamp > ceiling &&
	    clock_measurable(w, n))
		sim_fail(w,
			 "clock safety: node %llu (clock %+lld ms) stamped "
			 "machine "
			 "time %llu ms ahead of the correct clocks (bound "
			 "%u ms): keys would expire early",
			 (unsigned long long)n->id, (long long)n->clock_skew_ms,
			 (unsigned long long)(stamp - SIM_EPOCH_MS - now),
			 w->p.max_clock_offset_ms);
	if (n->clock_term == n->term && n->clock_stamp != 0 &&
	    stamp < n->clock_stamp + (now - n->clock_now))
		sim_fail(w,
			 "clock liveness: node %llu's machine time moved %llu "
			 "ms in "
			 "%llu ms of its term: TTLs frozen",
			 (unsigned long long)n->id,
			 (unsigned long long)(stamp - n->clock_stamp),
			 (unsigned long long)(now - n->clock_now));
	n->clock_term = n->term;
	n->clock_stamp = stamp;
	n->clock_now = now;
	if (stamp > w->clock_machine_ms)
		w->clock_machine_ms = stamp;
}

/* Do the voters of n's configuration that could measure it (correct,
 * alive, awake, reachable both ways, speaking clock samples) make a
 * majority? */
static bool measured_by_majority(struct sim_world *w, struct sim_node *n)
{
	struct baton_raft_status st;
	baton_raft_status(n->raft, &st);
	uint32_t voters = 0, able = 0;
	for (uint32_t i = 0; i < st.config.n; i++) {
		const struct baton_member *mb = &st.config.members[i];
		if (mb->role != BATON_VOTER)
			continue;
		voters++;
		if (mb->id == n->id || mb->id > SIM_MAX_NODES)
			continue;
		struct sim_node *f = &w->nodes[mb->id];
		able += f->alive && f->clock_skew_ms == 0 &&
			f->paused_until_ms <= w->now_ms && speaks_clock(w, f) &&
			!w->blocked[n->id][f->id] && !w->blocked[f->id][n->id];
	}
	return voters >= 3 && able >= voters / 2 + 1;
}

static void check_step_down(struct sim_world *w, struct sim_node *n)
{
	uint64_t b = w->p.max_clock_offset_ms;
	bool skewed = (uint64_t)llabs(n->clock_skew_ms) > 3 * b;
	if (!skewed || n->role != BATON_LEADER || !speaks_clock(w, n) ||
	    !measured_by_majority(w, n)) {
		n->clock_owed_since_ms = 0;
		return;
	}
	if (n->clock_owed_since_ms == 0) {
		n->clock_owed_since_ms = w->now_ms;
		return;
	}
	uint64_t limit = CLOCK_STEP_DOWN_TIMEOUTS * w->p.election_timeout_ms;
	if (w->now_ms - n->clock_owed_since_ms > limit)
		sim_fail(w,
			 "clock liveness: node %llu leads with its clock %+lld "
			 "ms off "
			 "(bound %llu ms) for %llu ms, measured by a majority",
			 (unsigned long long)n->id, (long long)n->clock_skew_ms,
			 (unsigned long long)b,
			 (unsigned long long)(w->now_ms -
					      n->clock_owed_since_ms));
}

void sim_clock_check(struct sim_world *w, struct sim_node *n)
{
	if (!n->alive || n->pipe == NULL)
		return;
	struct baton_pipeline_clock k;
	baton_pipeline_clock(n->pipe, &k);
	/* A node set right may stay barred until a leader's clock agrees
	 * with its own, or the bar runs out (30 s in src/node/clock.c). */
	if (k.barred && n->clock_skew_ms == 0 &&
	    (n->clock_right_since_ms == 0 ||
	     w->now_ms - n->clock_right_since_ms > CLOCK_BAR_LIMIT_MS))
		sim_fail(w,
			 "clock liveness: node %llu, whose clock is right, was "
			 "barred",
			 (unsigned long long)n->id);
	if (n->was_barred != k.barred) {
		n->was_barred = k.barred;
		if (k.barred)
			w->stats.clock_bars++;
		sim_trace(w, "clock: node %llu %s", (unsigned long long)n->id,
			  k.barred ? "barred" : "no longer barred");
	}
	if (n->role == BATON_LEADER)
		check_stamp(w, n);
	else
		n->clock_stamp = 0;
	check_step_down(w, n);
}
