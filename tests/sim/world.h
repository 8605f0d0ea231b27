/*
 * The deterministic simulator: N core instances in one process, a
 * simulated network and simulated disks, driven by one discrete-event queue.
 * Everything is drawn from one seed, so a run replays bit for bit.
 *
 * world.c    the world: event queue, nodes, network, nemesis, clients; it
 *            drives each node's disk only through struct baton_storage_ops
 * sim_disk.c the simulated disk: a struct baton_storage (sim_disk.h) whose
 *            durable state survives crashes
 * checks.c   the invariants, checked after every step
 * main.c     the command line: seeds, swarm mode, replay, summaries
 */
#ifndef BATON_SIM_WORLD_H
#define BATON_SIM_WORLD_H

#include "sim_disk.h"

#include <baton/raft.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_MAX_NODES 12	 /* founders (up to 7) plus fresh ids to add */
#define SIM_MAX_EVENTS 4000000u	 /* per run: a bound on the whole run */
#define SIM_MAX_IN_FLIGHT 20000u /* messages; beyond, sends are lost */

/* ---- randomness: splitmix64, the only source of chance ----------------- */

struct sim_rng {
	uint64_t state;
};

uint64_t sim_rand(struct sim_rng *g);
/* Uniform in [lo, hi]. */
uint64_t sim_range(struct sim_rng *g, uint64_t lo, uint64_t hi);
/* True with probability per_mille / 1000. */
bool sim_chance(struct sim_rng *g, uint32_t per_mille);

/* ---- memory (world.c): the simulator aborts when it runs out ---------- */

void *sim_xmalloc(size_t n);
void *sim_xdup(const void *src, size_t n);
/* Deep copies of n entries into dst (each buf malloc'd), and their release
 * (the bufs, then the array). */
void sim_copy_entries(struct baton_entry *dst, const struct baton_entry *src,
		      uint32_t n);
void sim_free_entries(struct baton_entry *e, uint32_t n);

/* ---- run parameters, all drawn from the seed in swarm mode ------------- */

struct sim_params {
	uint32_t n_nodes;
	uint32_t election_timeout_ms;
	uint32_t heartbeat_ms;
	uint32_t tick_ms;
	uint32_t net_min_ms, net_max_ms;
	uint32_t loss_per_mille, dup_per_mille;
	uint32_t reorder_per_mille; /* else a link delivers in order, as TCP */
	uint32_t disk_min_ms, disk_max_ms;
	uint32_t nemesis_every_ms; /* mean gap between faults; 0: none */
	uint32_t downtime_max_ms;
	uint32_t partition_max_ms;
	uint32_t client_every_ms;
	uint32_t read_every_ms;
	uint32_t member_every_ms; /* 0: no membership changes */
	uint32_t transfer_every_ms;
	uint32_t snapshot_every; /* applied entries between snapshots */
	uint32_t trailing;
	uint32_t chunk_bytes;
	uint32_t inflight;
	uint32_t batch;
	uint32_t max_uncommitted;
	/* Faults at the worst moments ("buggify"): a power blip right after
	 * a node grants a vote, a leader crash right after it commits. */
	uint32_t blip_after_vote_per_mille;
	uint32_t crash_on_commit_per_mille;
	uint32_t crash_after_propose_per_mille;	  /* mid-replication */
	uint32_t crash_on_election_per_mille;	  /* before its no-op spreads */
	uint32_t crash_on_first_commit_per_mille; /* a new leader's first */
	uint32_t disk_slowest_factor; /* per-node disk speeds differ up to this
				       */
	uint64_t safety_ms;
	uint64_t liveness_ms;
};

/* A message in flight: a deep copy, since updates live only one step. */
struct sim_packet {
	struct baton_msg m;
	struct baton_entry *entries;
	uint8_t *chunk;
};

/* The application: a hash chain over every applied command. */
struct sim_machine {
	baton_index applied;
	uint64_t hash;
	uint64_t commands;
};

struct sim_read {
	uint64_t id;
	uint32_t node;
	uint64_t incarnation;
	baton_index must_see; /* highest index applied anywhere at invocation */
};

struct sim_pending; /* world.c: an update waiting for its submission */

struct sim_node {
	baton_node_id id;
	bool exists; /* started at least once */
	bool alive;
	bool retired; /* removed from the cluster: never restarted */
	uint64_t incarnation;
	struct baton_raft *raft;
	struct sim_disk disk;	       /* durable: survives crashes */
	struct baton_storage *storage; /* over `disk`, while alive */
	struct sim_pending *pending, *pending_tail; /* submitted, not done */
	uint64_t last_write_done_ms;
	uint32_t disk_factor;
	struct sim_machine sm;
	struct baton_raft_options opts;
	/* For the invariants. */
	uint32_t role;
	baton_term term;
	baton_index commit;
	bool committed_this_term; /* as leader: its first commit happened */
	uint64_t paused_until_ms; /* SIGSTOP: frozen, then resumes as if
				   * no time had passed for it */
	baton_index leader_last_index;
	baton_term leader_last_term;
};

struct sim_stats {
	uint64_t steps, proposals, committed, elections, crashes, partitions,
		snapshots_taken, snapshots_installed, member_changes, transfers,
		reads_ok, reads_failed, msgs_sent, msgs_lost;
};

struct sim_event; /* world.c */

struct sim_world {
	uint64_t seed;
	struct sim_params p;
	struct sim_rng rng;
	uint64_t now_ms;
	uint64_t seq;
	struct sim_event *heap;
	uint32_t heap_n, heap_cap;
	uint64_t events;
	uint32_t in_flight;
	struct sim_node nodes[SIM_MAX_NODES + 1]; /* index = node id */
	uint32_t n_ids; /* ids 1..n_ids exist or may be added */
	uint32_t next_fresh_id;
	bool blocked[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	uint64_t link_last_ms[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	bool liveness;
	bool done;
	/* Liveness probe: a marker command that every member must apply. */
	baton_index marker_index;
	baton_term marker_term;
	uint64_t next_payload;
	uint64_t next_read_id;
	struct sim_read *reads;
	uint32_t n_reads, reads_cap;
	struct sim_stats stats;
	/* Invariant state (checks.c). */
	struct sim_checks *checks;
	/* Outcome. */
	bool failed;
	char failure[512];
	/* Output. */
	bool verbose;
	uint64_t trace_hash;
};

/* world.c */
void sim_params_swarm(struct sim_params *p, struct sim_rng *g);
void sim_params_default(struct sim_params *p);
int sim_run(struct sim_world *w);
void sim_world_free(struct sim_world *w);
void sim_trace(struct sim_world *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void sim_fail(struct sim_world *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
uint64_t sim_hash_bytes(uint64_t h, const void *p, size_t n);

/* checks.c: invariants. */
struct sim_checks *sim_checks_new(void);
void sim_checks_free(struct sim_checks *c);
/* After every step of node n that produced update u. */
void sim_check_update(struct sim_world *w, struct sim_node *n,
		      const struct baton_update *u);
/* One applied entry, after the machine applied it. */
void sim_check_apply(struct sim_world *w, struct sim_node *n,
		     const struct baton_entry *e);
/* A snapshot the node restored its machine from. */
void sim_check_snapshot(struct sim_world *w, struct sim_node *n,
			baton_index index, uint64_t hash);
/* Node n's storage just made this snapshot durable: it must read back. */
void sim_check_snapshot_saved(struct sim_world *w, struct sim_node *n,
			      baton_index index, const uint8_t *buf,
			      size_t len);
/* A leader just committed `index`: no voter lacking it may be able to win
 * an election against the durable logs of the others. */
void sim_check_commit_safe(struct sim_world *w, struct sim_node *leader,
			   baton_index index);
/* Highest index applied by any node so far. */
baton_index sim_max_applied(const struct sim_world *w);
/* Did every node that applied index i apply the entry of this term? */
bool sim_committed_term(const struct sim_world *w, baton_index i,
			baton_term *term);

#endif
