/*
 * The simulated world: one event queue ordered by (time, sequence), the
 * run's parameters and phases, and the dispatch of each event to the part
 * of the simulator that owns it.
 */
#include "world.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- randomness ---------------------------------------------------------- */

uint64_t sim_rand(struct sim_rng *g)
{
	uint64_t z = (g->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t sim_range(struct sim_rng *g, uint64_t lo, uint64_t hi)
{
	return hi <= lo ? lo : lo + sim_rand(g) % (hi - lo + 1);
}

bool sim_chance(struct sim_rng *g, uint32_t per_mille)
{
	return sim_rand(g) % 1000 < per_mille;
}

/* FNV-1a over 8-byte words, then the tail: fast enough to hash every trace
 * line and applied command. */
uint64_t sim_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	h ^= 0xcbf29ce484222325ull;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t word;
		memcpy(&word, b + i, 8);
		h = (h ^ word) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

void *sim_xmalloc(size_t n)
{
	void *p = malloc(n > 0 ? n : 1);
	if (p == NULL) {
		fprintf(stderr, "baton-sim: out of memory\n");
		abort();
	}
	return p;
}

void *sim_xdup(const void *src, size_t n)
{
	void *p = sim_xmalloc(n);
	if (n > 0)
		memcpy(p, src, n);
	return p;
}

/* ---- parameters ---------------------------------------------------------- */

void sim_params_default(struct sim_params *p)
{
	*p = (struct sim_params){
		.n_nodes = 3,
		.election_timeout_ms = 200,
		.heartbeat_ms = 40,
		.tick_ms = 10,
		.net_min_ms = 1,
		.net_max_ms = 15,
		.loss_per_mille = 20,
		.dup_per_mille = 10,
		.reorder_per_mille = 20,
		.disk_min_ms = 1,
		.disk_max_ms = 5,
		.nemesis_every_ms = 1500,
		.downtime_max_ms = 2000,
		.partition_max_ms = 3000,
		.client_every_ms = 15,
		.read_every_ms = 60,
		.member_every_ms = 4000,
		.transfer_every_ms = 6000,
		.snapshot_every = 200,
		.trailing = 50,
		.chunk_bytes = 64,
		.slice_bytes = 32,
		.inflight = 8,
		.batch = 64,
		.max_uncommitted = 256,
		.blip_after_vote_per_mille = 50,
		.crash_on_commit_per_mille = 1,
		.crash_after_propose_per_mille = 1,
		.crash_on_election_per_mille = 20,
		.crash_on_first_commit_per_mille = 50,
		.disk_slowest_factor = 4,
		.fault_after_config_per_mille = 100,
		.crash_undurable_leader_per_mille = 200,
		.link_at_transfer_per_mille = 200,
		.member_after_election_per_mille = 100,
		.start_releases = SIM_START_NEWEST,
		.upgrade_every_ms = 0,
		.fresh_old_per_mille = 0,
		.machine_upgrade = BATON_UPGRADE_ALL,
		.election_policy = BATON_ELECTION_VERSION_AWARE,
		.downgrade_every_ms = 0,
		.cancel_per_mille = 0,
		.close_per_mille = 700,
		.spurious_close_per_mille = 100,
		.failover_every_ms = 0,
		.max_clock_offset_ms = 200,
		.clock_skew_per_mille = 0,
		.safety_ms = 60000,
		.liveness_ms = 60000,
		.min_proposals = SIM_MIN_PROPOSALS,
		.safety_max_ms = 3 * 60000,
	};
}

/* Swarm testing: every rate from the seed, so some runs are calm and some
 * are storms, and different bugs surface under different mixes. */
void sim_params_swarm(struct sim_params *p, struct sim_rng *g)
{
	/* Small clusters see the subtle interleavings most often. */
	static const uint32_t sizes[] = {3, 3, 3, 3, 3, 5, 5, 5, 7, 7};
	static const uint32_t inflights[] = {1, 2, 4, 16};
	static const uint32_t batches[] = {1, 4, 64};
	sim_params_default(p);
	p->n_nodes = sizes[sim_rand(g) % 10];
	p->election_timeout_ms = (uint32_t)sim_range(g, 100, 300);
	p->heartbeat_ms = p->election_timeout_ms / (uint32_t)sim_range(g, 3, 8);
	p->net_min_ms = (uint32_t)sim_range(g, 0, 5);
	p->net_max_ms = p->net_min_ms + (uint32_t)sim_range(g, 1, 60);
	p->loss_per_mille = (uint32_t)sim_range(g, 0, 200);
	p->dup_per_mille = (uint32_t)sim_range(g, 0, 100);
	p->reorder_per_mille = (uint32_t)sim_range(g, 0, 200);
	p->disk_min_ms = (uint32_t)sim_range(g, 0, 3);
	p->disk_max_ms = p->disk_min_ms + (uint32_t)sim_range(g, 0, 30);
	p->nemesis_every_ms = (uint32_t)sim_range(g, 250, 3000);
	p->downtime_max_ms = (uint32_t)sim_range(g, 10, 4000);
	p->partition_max_ms = (uint32_t)sim_range(g, 100, 6000);
	p->client_every_ms = (uint32_t)sim_range(g, 4, 25);
	p->read_every_ms = (uint32_t)sim_range(g, 10, 200);
	p->member_every_ms =
		sim_chance(g, 700) ? (uint32_t)sim_range(g, 500, 6000) : 0;
	p->transfer_every_ms = (uint32_t)sim_range(g, 1000, 10000);
	p->snapshot_every = (uint32_t)sim_range(g, 10, 500);
	p->trailing = (uint32_t)sim_range(g, 0, 100);
	p->chunk_bytes = (uint32_t)sim_range(g, 8, 200);
	p->inflight = inflights[sim_rand(g) % 4];
	p->batch = batches[sim_rand(g) % 3];
	if (p->batch == 1)
		p->inflight = 16; /* one entry per round trip cannot keep up */
	p->max_uncommitted = (uint32_t)sim_range(g, 128, 1024);
	p->blip_after_vote_per_mille = (uint32_t)sim_range(g, 0, 500);
	p->crash_on_commit_per_mille = (uint32_t)sim_range(g, 0, 20);
	p->crash_after_propose_per_mille = (uint32_t)sim_range(g, 0, 10);
	p->crash_on_election_per_mille = (uint32_t)sim_range(g, 0, 200);
	p->crash_on_first_commit_per_mille = (uint32_t)sim_range(g, 0, 500);
	p->disk_slowest_factor = (uint32_t)sim_range(g, 1, 8);
	/* The timed faults (nemesis.c): off in some seeds, frequent in
	 * others. Drawn last, so the draws above stay as they were. */
	p->fault_after_config_per_mille =
		sim_chance(g, 700) ? (uint32_t)sim_range(g, 0, 600) : 0;
	p->crash_undurable_leader_per_mille =
		sim_chance(g, 700) ? (uint32_t)sim_range(g, 0, 1000) : 0;
	p->link_at_transfer_per_mille =
		sim_chance(g, 700) ? (uint32_t)sim_range(g, 0, 1000) : 0;
	p->member_after_election_per_mille =
		sim_chance(g, 700) ? (uint32_t)sim_range(g, 0, 500) : 0;
	/* Releases (versions.c), drawn after everything above for the same
	 * reason: a quarter of the seeds run the newest release throughout,
	 * the others start mixed or all at an old release and are upgraded
	 * while the faults go on; the machine upgrade's strategy is either. */
	uint64_t start = sim_range(g, 0, 99);
	p->start_releases = start < 25	 ? SIM_START_NEWEST
			    : start < 65 ? SIM_START_MIXED
					 : SIM_START_OLDEST;
	p->upgrade_every_ms = (uint32_t)sim_range(g, 300, 6000);
	if (p->start_releases == SIM_START_NEWEST)
		p->upgrade_every_ms = 0;
	p->fresh_old_per_mille =
		sim_chance(g, 500) ? (uint32_t)sim_range(g, 0, 700) : 0;
	p->machine_upgrade =
		sim_chance(g, 550) ? BATON_UPGRADE_ALL : BATON_UPGRADE_QUORUM;
	/* Leader eligibility and downgrades (rules.c, downgrade.c), last
	 * again: plain Raft in some seeds; the operator downgrades in about
	 * half of them, cancelling now and then. */
	p->election_policy = sim_chance(g, 150) ? BATON_ELECTION_ANY
						: BATON_ELECTION_VERSION_AWARE;
	p->downgrade_every_ms =
		sim_chance(g, 500) ? (uint32_t)sim_range(g, 1000, 6000) : 0;
	p->cancel_per_mille = (uint32_t)sim_range(g, 0, 300);
	/* Snapshots in slices (docs/node.md): from a few bytes per slice,
	 * so many applies fall between them, to all of it in one. */
	p->slice_bytes =
		sim_chance(g, 800) ? (uint32_t)sim_range(g, 1, 256) : 1u << 20;
	/* Closed connections (fast failure detection), last again: some
	 * seeds see none, as when machines vanish; spurious resets in half. */
	p->close_per_mille =
		sim_chance(g, 800) ? (uint32_t)sim_range(g, 0, 1000) : 0;
	p->spurious_close_per_mille =
		sim_chance(g, 500) ? (uint32_t)sim_range(g, 0, 500) : 0;
	/* Clocks (clock.c), last again: the bound, and skewed clocks in
	 * about a third of the seeds. */
	p->max_clock_offset_ms = (uint32_t)sim_range(g, 100, 500);
	p->clock_skew_per_mille = sim_chance(g, 330) ? 1000 : 0;
}

/* ---- output -------------------------------------------------------------- */

void sim_trace(struct sim_world *w, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	w->trace_hash = sim_hash_bytes(w->trace_hash, line, strlen(line));
	if (w->verbose)
		printf("%8llu.%03llu  %s\n",
		       (unsigned long long)(w->now_ms / 1000),
		       (unsigned long long)(w->now_ms % 1000), line);
}

void sim_fail(struct sim_world *w, const char *fmt, ...)
{
	if (w->failed)
		return; /* the first violation is the one that matters */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->failure, sizeof w->failure, fmt, ap);
	va_end(ap);
	w->failed = true;
	w->done = true;
}

/* ---- the event queue: a binary heap on (time, sequence) ----------------- */

static const char *const kind_names[] = {
	"?",	 "tick",     "deliver",	 "disk",       "restart",  "nemesis",
	"heal",	 "client",   "read",	 "member",     "transfer", "read-at",
	"phase", "liveness", "crash",	 "member-now", "upgrade",  "downgrade",
	"work",	 "closed",   "failover", "clock",      "careless",
};

struct sim_event {
	uint64_t at;
	uint64_t seq;
	uint32_t kind;
	uint32_t node;
	uint64_t incarnation;
	struct sim_packet *packet;
	uint32_t arg; /* EV_PEER_CLOSED: the peer whose connection closed */
};

static bool before(const struct sim_event *a, const struct sim_event *b)
{
	return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

static void push_event(struct sim_world *w, const struct sim_event *ev);

void sim_schedule(struct sim_world *w, uint64_t delay, uint32_t kind,
		  uint32_t node, struct sim_packet *packet)
{
	struct sim_event e = {
		.at = w->now_ms + delay,
		.seq = w->seq++,
		.kind = kind,
		.node = node,
		.incarnation = node ? w->nodes[node].incarnation : 0,
		.packet = packet,
	};
	push_event(w, &e);
}

void sim_schedule_close(struct sim_world *w, uint64_t delay, uint32_t to,
			uint32_t closed)
{
	struct sim_event e = {
		.at = w->now_ms + delay,
		.seq = w->seq++,
		.kind = EV_PEER_CLOSED,
		.node = to,
		.incarnation = w->nodes[to].incarnation,
		.arg = closed,
	};
	push_event(w, &e);
}

static void push_event(struct sim_world *w, const struct sim_event *ev)
{
	if (w->heap_n == w->heap_cap) {
		w->heap_cap = w->heap_cap ? w->heap_cap * 2 : 1024;
		w->heap = realloc(w->heap, w->heap_cap * sizeof *w->heap);
		if (w->heap == NULL)
			abort();
	}
	struct sim_event e = *ev;
	uint32_t i = w->heap_n++;
	while (i > 0 && before(&e, &w->heap[(i - 1) / 2])) {
		w->heap[i] = w->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->heap[i] = e;
}

static struct sim_event pop(struct sim_world *w)
{
	struct sim_event top = w->heap[0];
	struct sim_event last = w->heap[--w->heap_n];
	uint32_t i = 0;
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= w->heap_n)
			break;
		if (c + 1 < w->heap_n && before(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!before(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (w->heap_n > 0)
		w->heap[i] = last;
	return top;
}

/* ---- phases ------------------------------------------------------------- */

/* The safety phase ends: heal everything, stop injecting faults, and give
 * the cluster a bounded time to show it is alive again. */
static void start_liveness(struct sim_world *w)
{
	w->liveness = true;
	w->liveness_from_ms = w->now_ms;
	sim_heal(w);
	sim_clock_heal(w);
	w->p.loss_per_mille = 0;
	w->p.dup_per_mille = 0;
	w->p.reorder_per_mille = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		w->nodes[i].paused_until_ms = 0;
	/* Every node comes back at the release it has; the liveness checks
	 * of the rules then upgrade them one at a time (rules.c) before the
	 * marker probe. */
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		struct sim_node *n = &w->nodes[i];
		if (n->exists && !n->alive)
			sim_node_boot(w, n);
	}
	w->stage_from_ms = w->step_from_ms = w->leader_ok_ms =
		w->majority_ok_ms = w->rules_probe_ms = w->now_ms;
	sim_trace(w, "liveness phase: faults healed");
	sim_schedule(w, 100, EV_LIVENESS, 0, NULL);
}

/* A seed whose faults starved its clients gets more time under the same
 * faults, a quarter of the safety phase at a time, up to a bound: the
 * workload is long enough for every seed, and a cluster that makes no
 * progress still fails (main.c, "workload:"). */
static void end_safety(struct sim_world *w)
{
	uint64_t more = w->p.safety_ms / 4;
	if (w->stats.proposals < w->p.min_proposals && more > 0 &&
	    w->now_ms + more <= w->p.safety_max_ms) {
		w->stats.extensions++;
		sim_trace(w,
			  "workload: %llu proposals accepted, safety phase "
			  "extended by %llu ms",
			  (unsigned long long)w->stats.proposals,
			  (unsigned long long)more);
		sim_schedule(w, more, EV_PHASE, 0, NULL);
		return;
	}
	start_liveness(w);
}

/* ---- the run ----------------------------------------------------------- */

static void dispatch(struct sim_world *w, struct sim_event *e)
{
	struct sim_node *n = e->node ? &w->nodes[e->node] : NULL;
	bool current =
		n != NULL && n->alive && e->incarnation == n->incarnation;
	/* A frozen node's timers, disk completions and incoming messages
	 * wait, in order, until it resumes. */
	struct sim_node *target =
		e->kind == EV_DELIVER ? &w->nodes[e->packet->m.to] : n;
	if (target != NULL && target->alive &&
	    target->paused_until_ms > w->now_ms &&
	    (e->kind == EV_TICK || e->kind == EV_DISK ||
	     e->kind == EV_DELIVER || e->kind == EV_WORK ||
	     e->kind == EV_PEER_CLOSED)) {
		struct sim_event later = *e;
		later.at = target->paused_until_ms;
		later.seq = w->seq++;
		push_event(w, &later);
		return;
	}
	switch (e->kind) {
	case EV_TICK:
		if (!current)
			return;
		sim_schedule(w, w->p.tick_ms, EV_TICK, e->node, NULL);
		sim_node_tick(w, n);
		return;
	case EV_DELIVER: {
		w->in_flight--;
		struct sim_packet *p = e->packet;
		struct sim_node *to = &w->nodes[p->m.to];
		if (to->alive && !w->blocked[p->m.from][p->m.to] &&
		    sim_versions_deliverable(w, p, to))
			sim_node_receive(w, to, &p->m);
		sim_packet_free(p);
		return;
	}
	case EV_DISK:
		if (current)
			sim_disk_done(w, n);
		return;
	case EV_WORK:
		if (current)
			sim_node_work(w, n);
		return;
	case EV_RESTART:
		if (n != NULL && !n->alive && !w->liveness)
			sim_node_boot(w, n);
		return;
	case EV_CRASH:
		if (current)
			sim_power_blip(w, n);
		return;
	case EV_NEMESIS:
		sim_nemesis(w);
		return;
	case EV_HEAL:
		sim_heal(w);
		return;
	case EV_CLIENT:
		sim_client(w);
		return;
	case EV_READ:
		sim_reader(w);
		return;
	case EV_MEMBER:
		sim_membership(w);
		return;
	case EV_MEMBER_NOW:
		sim_membership_change(w);
		return;
	case EV_TRANSFER:
		sim_transfer(w);
		return;
	case EV_READ_AT:
		if (current)
			sim_read_at(w, n);
		return;
	case EV_PHASE:
		end_safety(w);
		return;
	case EV_LIVENESS:
		sim_liveness_check(w);
		return;
	case EV_CLOCK:
		sim_clock_fault(w);
		return;
	case EV_UPGRADE:
		sim_upgrade(w);
		return;
	case EV_DOWNGRADE:
		sim_downgrade(w);
		return;
	case EV_CARELESS:
		sim_careless(w);
		return;
	case EV_PEER_CLOSED:
		if (current)
			sim_node_peer_closed(w, n, e->arg);
		return;
	case EV_FAILOVER:
		sim_failover_kill(w);
		return;
	default:
		abort();
	}
}

/* The founders boot on empty disks and bootstrap one configuration of all
 * of them, as batond's founders do. */
static void bootstrap(struct sim_world *w)
{
	w->n_ids = w->p.n_nodes;
	w->next_fresh_id = w->p.n_nodes + 1;
	for (uint32_t i = 1; i <= w->p.n_nodes; i++) {
		struct sim_node *n = &w->nodes[i];
		n->id = i;
		sim_node_boot(w, n);
	}
}

int sim_run(struct sim_world *w)
{
	w->rng.state = w->seed;
	w->checks = sim_checks_new();
	sim_versions_init(w);
	bootstrap(w);
	sim_schedule(w, 1, EV_CLIENT, 0, NULL);
	sim_schedule(w, 1, EV_READ, 0, NULL);
	if (w->p.nemesis_every_ms > 0)
		sim_schedule(w, w->p.nemesis_every_ms, EV_NEMESIS, 0, NULL);
	if (w->p.member_every_ms > 0)
		sim_schedule(w, w->p.member_every_ms, EV_MEMBER, 0, NULL);
	if (w->p.transfer_every_ms > 0)
		sim_schedule(w, w->p.transfer_every_ms, EV_TRANSFER, 0, NULL);
	if (w->p.upgrade_every_ms > 0)
		sim_schedule(w, w->p.upgrade_every_ms, EV_UPGRADE, 0, NULL);
	if (w->p.downgrade_every_ms > 0)
		sim_schedule(w, w->p.downgrade_every_ms, EV_DOWNGRADE, 0, NULL);
	if (w->p.failover_every_ms > 0)
		sim_schedule(w, w->p.failover_every_ms, EV_FAILOVER, 0, NULL);
	sim_clock_start(w);
	sim_careless_start(w);
	sim_schedule(w, w->p.safety_ms, EV_PHASE, 0, NULL);
	while (!w->done && w->heap_n > 0) {
		if (++w->events > SIM_MAX_EVENTS) {
			sim_fail(w, "event budget of %u exhausted",
				 SIM_MAX_EVENTS);
			break;
		}
		struct sim_event e = pop(w);
		w->now_ms = e.at;
		if (w->verbose && e.kind != EV_TICK && e.kind != EV_DELIVER &&
		    e.kind != EV_DISK)
			sim_trace(w, "event %s", kind_names[e.kind]);
		dispatch(w, &e);
	}
	if (!w->failed)
		sim_history_check(w);
	return w->failed ? 1 : 0;
}

void sim_world_free(struct sim_world *w)
{
	w->done = true; /* the crashes below schedule nothing */
	while (w->heap_n > 0) {
		struct sim_event e = pop(w);
		sim_packet_free(e.packet);
	}
	free(w->heap);
	for (uint32_t i = 1; i <= SIM_MAX_NODES; i++) {
		struct sim_node *n = &w->nodes[i];
		if (n->alive)
			sim_node_crash(w, n);
		sim_disk_free(&n->disk);
		free(n->settle);
	}
	sim_history_free(w);
	sim_checks_free(w->checks);
}
