/*
 * The deterministic simulator: N core instances in one process, a
 * simulated network and simulated disks, driven by one discrete-event queue.
 * Everything is drawn from one seed, so a run replays bit for bit.
 *
 * world.c    the event queue, the run's parameters and phases, dispatch
 * node.c     driving one node: its core, its storage (only through struct
 *            baton_storage_ops), its machine; boot, crash, snapshots
 * net.c      the simulated network
 * nemesis.c  faults: crashes, pauses, partitions, and faults timed to
 *            protocol moments ("buggify")
 * workload.c clients, readers, membership changes, transfers, the liveness
 *            probe
 * machine.c  the simulated state machine
 * sim_disk.c the simulated disk: a struct baton_storage (sim_disk.h) whose
 *            durable state survives crashes
 * checks.c   the invariants, checked after every step
 * versions.c releases: each node's, the rolling upgrades, what the network
 *            lets through between releases, and the invariants of the
 *            effective machine version, the release floor and downgrades
 * rules.c    leader eligibility: each node's election policy, the
 *            invariants of the rules and their liveness (the staged
 *            upgrade of the liveness phase)
 * downgrade.c explicit downgrades by the operator: enable, restarts at the
 *            target release, cancels
 * careless.c the careless operator: requests of every kind at any moment,
 *            judged by a model of the documented rules
 * steady.c   leader stability: no leader that keeps a majority is deposed
 *            by a spurious event
 * main.c     the command line: seeds, swarm mode, replay, summaries
 */
#ifndef BATON_SIM_WORLD_H
#define BATON_SIM_WORLD_H

#include "sim_disk.h"

#include <baton/machine.h>
#include <baton/raft.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_MAX_NODES 12	 /* founders (up to 7) plus fresh ids to add */
#define SIM_MAX_EVENTS 4000000u	 /* per run: a bound on the whole run */
#define SIM_MAX_IN_FLIGHT 20000u /* messages; beyond, sends are lost */
/* Proposals a full-length run must see accepted: below, a seed is a
 * formality rather than a scenario. */
#define SIM_MIN_PROPOSALS 1000u

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
	uint32_t slice_bytes; /* the pipeline's snapshot_slice_bytes */
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
	/* Faults timed to protocol moments, each a per-seed probability
	 * (nemesis.c): a node crashes or is cut off right after it appends
	 * a configuration entry; a new leader crashes while its term and vote
	 * are not yet durable; at a leadership transfer's TIMEOUT_NOW one
	 * direction of a link is lost and reads keep arriving at the old
	 * leader; a membership request right after an election. */
	uint32_t fault_after_config_per_mille;
	uint32_t crash_undurable_leader_per_mille;
	uint32_t link_at_transfer_per_mille;
	uint32_t member_after_election_per_mille;
	/* Releases (versions.c): which release each founder starts at, how
	 * often a node is restarted at a newer one (0: never in the safety
	 * phase; the liveness phase upgrades every node to the newest), and
	 * the strategy of the machine upgrade (enum baton_machine_upgrade). */
	uint32_t start_releases; /* enum sim_start_releases */
	uint32_t upgrade_every_ms;
	uint32_t fresh_old_per_mille; /* a fresh node runs an older release */
	uint32_t machine_upgrade;
	/* Leader eligibility (rules.c): enum baton_election_policy of every
	 * node that knows the rules. Explicit downgrades (downgrade.c): the
	 * mean gap between the operator's moves (0: none), and how often a
	 * move cancels the downgrade in progress rather than restarting a
	 * node at its target. */
	uint32_t election_policy;
	uint32_t downgrade_every_ms;
	uint32_t cancel_per_mille;
	/* Connections (fast failure detection): how often a crash is a
	 * killed process, whose kernel closes its sockets, so the peers it
	 * can reach learn it by a closed connection a network delay later
	 * (else the machine vanished: no close); how often a nemesis fault
	 * also resets a connection to the leader while both ends live; and
	 * the failover scenario (--failover): the leader killed this often
	 * (0: never), each next leader owed within an election timeout. */
	uint32_t close_per_mille;
	uint32_t spurious_close_per_mille;
	uint32_t failover_every_ms;
	/* Clocks (clock.c): the pipelines' max_clock_offset_ms, and the
	 * chance that a run sets one node's wall clock far off (then back). */
	uint32_t max_clock_offset_ms;
	uint32_t clock_skew_per_mille;
	/* The careless operator (careless.c): the mean gap between its
	 * requests (0: none), drawn from its own stream. */
	uint32_t careless_every_ms;
	uint64_t safety_ms;
	uint64_t liveness_ms;
	/* The workload: the safety phase is extended (by a quarter at a
	 * time, up to safety_max_ms in all) until this many proposals were
	 * accepted; a run that still falls short fails with "workload:". */
	uint64_t min_proposals;
	uint64_t safety_max_ms;
};

/* Which releases the founders start at. */
enum sim_start_releases {
	SIM_START_NEWEST = 0, /* all run the binary's own release */
	SIM_START_MIXED = 1,  /* each a release drawn from the table */
	SIM_START_OLDEST = 2, /* all an old one, then upgraded one by one */
};

/* A message in flight: a deep copy, since updates live only one step. */
struct sim_packet {
	struct baton_msg m;
	uint32_t sender_release; /* what the sender ran when it sent it */
	struct baton_entry *entries;
	uint8_t *chunk;
};

/* What the invariants see of a node's machine: the state after the last
 * applied command, as of the check being made (node.c feeds it entry by
 * entry, after the step's own checks). */
struct sim_machine {
	baton_index applied; /* the last command applied */
	uint64_t hash;	     /* chained over every applied command */
	uint64_t commands;
};

/* ---- the key-value machine (machine.c) ---------------------------------- */

#define SIM_KV_SLOTS 16u      /* key k lives in slot k % SIM_KV_SLOTS */
#define SIM_KV_VALUE_MAX 160u /* bytes of one value */
#define SIM_KV_PAD_MAX 40u    /* padding bytes after a command */
#define SIM_KV_COMMAND_MAX (6u + SIM_KV_VALUE_MAX + SIM_KV_PAD_MAX)

enum sim_kv_op {
	SIM_KV_SET = 'S',
	SIM_KV_APPEND = 'A',
	SIM_KV_INCR = 'I',
	SIM_KV_DEL = 'D',
	SIM_KV_MARKER = 'M', /* the liveness probe: changes nothing */
	SIM_KV_NOISE = 'N',  /* load no client checks: changes nothing */
};

struct sim_kv_slot {
	uint32_t key; /* 0: never used */
	bool present;
	uint32_t len;
	char val[SIM_KV_VALUE_MAX + 1];
};

struct sim_node;

/* A node's state machine, rebuilt at each boot from its snapshot and log. */
struct sim_kv {
	struct baton_machine base; /* first: the handle the pipeline holds */
	struct sim_node *n;
	baton_index applied; /* the last command applied */
	uint64_t hash;
	uint64_t commands;
	/* Machine version 2: its own clock, advanced by every command applied
	 * under it, set by the conversion from version 1 to the index of the
	 * version entry, and mixed into the hash chain. */
	uint32_t version;
	uint64_t ticks;
	struct sim_kv_slot slots[SIM_KV_SLOTS];
	const char *err;
	/* The incremental snapshot open: its bytes as of begin (the state is
	 * small, so a copy of it all is the machine's "pre-image"), and how
	 * many of them the steps handed out. */
	bool snap_open;
	struct baton_buf snap;
	size_t snap_sent;
};

/* An empty machine for node n. */
void sim_kv_init(struct sim_kv *kv, struct sim_node *n);
/* Encode a command into buf (cap bytes); returns its length. */
size_t sim_kv_encode(uint8_t *buf, size_t cap, uint8_t op, uint32_t key,
		     const char *value, size_t pad);
/* The value of key: false if its slot serves a newer key (retired). */
bool sim_kv_get(const struct sim_kv *kv, uint32_t key, bool *present,
		const char **val, uint32_t *len);

/* One applied command or restored snapshot, waiting to be checked. */
struct sim_settle {
	bool restore;
	struct baton_entry e;  /* a copy (apply) */
	struct sim_machine sm; /* the machine's state after it */
};

struct sim_node {
	baton_node_id id;
	uint32_t release; /* index in baton_releases(): what it runs */
	bool exists;	  /* started at least once */
	bool alive;
	bool retired; /* removed from the cluster: never restarted */
	uint64_t incarnation;
	struct sim_world *w;
	/* The shipping node pipeline (src/node/pipeline.h), while alive, and
	 * its core, read-only, for the invariants. */
	struct baton_pipeline *pipe;
	const struct baton_raft *raft;
	struct sim_disk disk;	       /* durable: survives crashes */
	struct baton_storage *storage; /* over `disk`, while alive */
	uint64_t last_write_done_ms;
	uint32_t disk_factor;
	struct sim_kv kv;	   /* the machine the pipeline drives */
	struct sim_machine sm;	   /* what the invariants see of it */
	struct sim_settle *settle; /* applied, not yet checked */
	uint32_t n_settle, settle_cap;
	bool booting;
	/* For the invariants. */
	uint32_t role;
	baton_term term;
	baton_index commit;
	bool committed_this_term; /* as leader: its first commit happened */
	bool work_scheduled;	  /* an EV_WORK is queued for it */
	uint64_t paused_until_ms; /* SIGSTOP: frozen, then resumes as if
				   * no time had passed for it */
	baton_index leader_last_index;
	baton_term leader_last_term;
	/* A stall the pipeline reported, to be judged once the step is seen
	 * (versions.c: needs-upgrade is allowed, anything else fails). */
	baton_index stall_pending;
	char stall_why[256];
	/* Stalled because the log's machine version exceeds its release's
	 * (needs-upgrade), or its release floor does (the floor hold): the
	 * index, or 0. */
	baton_index needs_upgrade;
	/* The term whose opening version entry this node checked as leader
	 * (versions.c: the floor raise). */
	baton_term opened_term;
	uint64_t refusal_seq; /* the core's refusals traced so far */
	/* Clocks (clock.c): the wall clock's skew; the last stamp checked as
	 * leader (0: none), its term and time; a step-down owed since. */
	int64_t clock_skew_ms;
	uint64_t clock_stamp, clock_now;
	baton_term clock_term;
	uint64_t clock_owed_since_ms;
	uint64_t clock_right_since_ms; /* set right again then (0: never off) */
	bool was_barred;
	/* The release it booted last, and since when it runs it (careless.c:
	 * what a leader must know of it). */
	uint32_t boot_release;
	uint64_t release_since_ms;
};

struct sim_stats {
	uint64_t steps, proposals, committed, elections, crashes, partitions,
		snapshots_taken, snapshots_installed, member_changes, transfers,
		reads_ok, reads_failed, msgs_sent, msgs_lost, ops_ok,
		ops_failed, ops_unknown, extensions, upgrades, msgs_refused,
		version_raises, needs_upgrade, floor_raises, floor_holds,
		votes_refused, downgrades, downgrade_restarts, cancels,
		downgrade_ends, rules_steps, snapshot_slices,
		applied_mid_snapshot, closes, spurious_closes, fast_failovers,
		slow_failovers, clock_skews, clock_bars;
	/* Leaders deposed while running (steady.c); the operator's careless
	 * requests (careless.c): made, refused as they must be, accepted. */
	uint64_t deposals, careless, careless_refused, careless_accepted;
	/* The longest waits the liveness checks of the rules saw (rules.c),
	 * in thousandths of their bounds: for a leader, for leadership to
	 * reach the majority release. */
	uint64_t leader_wait_per_mille, majority_wait_per_mille;
};

/* Leader stability (steady.c): when each node and each way of each link
 * was last impaired (a time, possibly in the future: an impairment's end),
 * the losses of each way since its last message sent, each node's last
 * TIMEOUT_NOW and configuration entry, and when it last won (with the
 * highest term any node held then). */
struct sim_steady {
	uint64_t node_bad_ms[SIM_MAX_NODES + 1];
	uint64_t pair_bad_ms[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	uint64_t last_ok_ms[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	bool loss_open[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	uint64_t transfer_ms[SIM_MAX_NODES + 1];
	uint64_t config_ms[SIM_MAX_NODES + 1];
	uint64_t won_ms[SIM_MAX_NODES + 1];
	baton_term high_at_win[SIM_MAX_NODES + 1];
};

struct sim_event;   /* world.c */
struct sim_history; /* workload.c */

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
	uint64_t liveness_from_ms; /* when the liveness phase began */
	baton_node_id last_leader; /* the latest node seen becoming leader */
	/* Liveness probe: a marker command that every member must apply. */
	uint32_t marker_key;	  /* its key field: which probe */
	bool marker_waiting;	  /* a probe proposal awaits its completion */
	baton_index marker_index; /* where it was applied; 0: not yet */
	/* The releases of the table (versions.c), and what the run saw. */
	const struct baton_profile *releases;
	uint32_t n_releases;
	/* The newest release of the run (an index in releases): the
	 * table's newest when the founders start there, else the newest
	 * one that an older release can be rolled to (a release no older
	 * one talks to, as 2.0.0 and 1.x, is reached through the relay,
	 * which the simulator does not model). */
	uint32_t top_release;
	uint32_t max_machine; /* highest machine version appended */
	/* The operator's downgrade (downgrade.c): a cancel awaits its
	 * outcome (no node is restarted at the target meanwhile). */
	bool cancel_waiting;
	/* The liveness phase's first stage (rules.c): the cluster as the
	 * safety phase left it, then upgraded one node at a time, each step
	 * checked; the marker probe follows once every node runs the newest
	 * release. */
	bool rules_done;
	bool rules_up;		 /* past the staged downgrade */
	bool down_seen;		 /* a downgrade was in progress in it */
	uint64_t stage_from_ms;	 /* the current stage began */
	uint64_t step_from_ms;	 /* the current step began */
	uint64_t leader_ok_ms;	 /* last time no leader was owed */
	uint64_t majority_ok_ms; /* last time leadership was where owed */
	uint64_t down_owed_ms;	 /* a downgrade's end owed since (0: not) */
	uint64_t rules_probe_ms; /* the latest probe tick */
	uint64_t rules_tick_ms;	 /* since the one before it */
	uint64_t cancel_sent_ms; /* the probe's last cancel request */
	/* A leader was killed with its peers told (nemesis.c): since when,
	 * its term; the next leader is timed against it. */
	bool kill_watch;
	uint64_t kill_ms;
	baton_term kill_term;
	/* Clocks (clock.c): the fault's own random stream, and the largest
	 * machine-time stamp of the run. */
	struct sim_rng clock_rng;
	uint64_t clock_machine_ms;
	/* Leader stability (steady.c); the careless operator's own random
	 * stream (careless.c), so that the other draws stay as they were. */
	struct sim_steady steady;
	struct sim_rng careless_rng;
	uint32_t careless_last_op; /* its last accepted request, to repeat */
	struct baton_release careless_last_target;
	/* Clients and their recorded history (workload.c). */
	struct sim_history *history;
	struct sim_stats stats;
	/* Invariant state (checks.c). */
	struct sim_checks *checks;
	/* Outcome. */
	bool failed;
	char failure[512];
	/* Output. */
	bool verbose;
	const char *history_path; /* write the clients' history there */
	uint64_t trace_hash;
};

/* ---- world.c: events ---------------------------------------------------- */

enum sim_event_kind {
	EV_TICK = 1,
	EV_DELIVER,
	EV_DISK,
	EV_RESTART,
	EV_NEMESIS,
	EV_HEAL,
	EV_CLIENT,
	EV_READ,
	EV_MEMBER,
	EV_TRANSFER,
	EV_READ_AT, /* a read on one node, after an election or transfer */
	EV_PHASE,
	EV_LIVENESS,
	EV_CRASH,
	EV_MEMBER_NOW, /* one membership request (nemesis.c, after elections) */
	EV_UPGRADE,    /* restart a node at a newer release (versions.c) */
	EV_DOWNGRADE,  /* the operator's next downgrade move (downgrade.c) */
	EV_WORK,       /* a turn of a node's loop with snapshot work to do */
	EV_PEER_CLOSED, /* a node's connection to a peer closed */
	EV_FAILOVER,	/* the failover scenario kills the leader */
	EV_CLOCK,	/* a node's wall clock is set off, or right (clock.c) */
	EV_CARELESS,	/* the careless operator's next request (careless.c) */
};

/* Queue an event `delay` ms from now. An event for a node (node != 0) is
 * void once that node crashes; `packet` (EV_DELIVER) is owned by the queue. */
void sim_schedule(struct sim_world *w, uint64_t delay, uint32_t kind,
		  uint32_t node, struct sim_packet *packet);

/* EV_PEER_CLOSED: node `to` learns, `delay` ms from now, that its
 * connection to `closed` closed (void if `to` crashes meanwhile). */
void sim_schedule_close(struct sim_world *w, uint64_t delay, uint32_t to,
			uint32_t closed);

/* ---- net.c: the network ------------------------------------------------- */

/* A deep copy of m, and its release (NULL is fine). */
struct sim_packet *sim_packet_copy(const struct baton_msg *m);
void sim_packet_free(struct sim_packet *p);
/* Send p (owned by the network from now on): lost, delayed, duplicated or
 * reordered as the seed says. */
void sim_net_send(struct sim_world *w, struct sim_packet *p);

/* ---- node.c: driving nodes through the shipping pipeline ----------------- */

/* Boot from its disk, as after a power cycle (founders, ids 1..n_nodes,
 * bootstrap an empty disk); crash, losing what was not durable and failing
 * every request waiting on the node. */
void sim_node_boot(struct sim_world *w, struct sim_node *n);
void sim_node_crash(struct sim_world *w, struct sim_node *n);
/* The end of one turn of the node's loop, after every event it was given
 * (tick, message, disk completion, client request): the pipeline's flush,
 * then the invariants of what it applied. */
void sim_node_turn(struct sim_world *w, struct sim_node *n);
/* One turn each: time passed (the node's timers); a message arrived; the
 * world's clock says the node's oldest submission reached its disk. */
void sim_node_tick(struct sim_world *w, struct sim_node *n);
void sim_node_receive(struct sim_world *w, struct sim_node *n,
		      const struct baton_msg *m);
void sim_disk_done(struct sim_world *w, struct sim_node *n);
/* Node n's connection to peer id closed (EV_PEER_CLOSED). */
void sim_node_peer_closed(struct sim_world *w, struct sim_node *n,
			  baton_node_id id);
/* A turn of the loop that writes the next slice of a snapshot. */
void sim_node_work(struct sim_world *w, struct sim_node *n);
/* From the node's machine (machine.c): it applied e, its hash now `hash`;
 * it restored a snapshot. Checked after the step's own invariants. */
void sim_node_applied(struct sim_node *n, const struct baton_entry *e,
		      uint64_t hash);
void sim_node_restored(struct sim_node *n, baton_index applied, uint64_t hash,
		       uint64_t commands);
/* Running and not frozen: a client can reach it. */
bool sim_usable(const struct sim_world *w, const struct sim_node *n);
/* The usable leader of the highest term, or NULL. */
struct sim_node *sim_find_leader(struct sim_world *w);
/* A random usable node, or NULL. */
struct sim_node *sim_random_alive(struct sim_world *w);

/* ---- nemesis.c: faults ----------------------------------------------------
 */

/* Faults at random moments (EV_NEMESIS), and the end of a partition. */
void sim_nemesis(struct sim_world *w);
void sim_heal(struct sim_world *w);
/* Faults timed to protocol moments ("buggify"): called after node n
 * stepped to update u (before the invariants), before a node sends m, and
 * after node n accepted a proposal. */
void sim_buggify_update(struct sim_world *w, struct sim_node *n,
			const struct baton_update *u);
void sim_buggify_send(struct sim_world *w, const struct baton_msg *m);
void sim_buggify_propose(struct sim_world *w, struct sim_node *n);
/* EV_CRASH: a power blip of node n, back before long. */
void sim_power_blip(struct sim_world *w, struct sim_node *n);
/* Node n is crashing: tell the peers it reaches, as its kernel would
 * (close_per_mille of crashes). */
void sim_crash_closes(struct sim_world *w, struct sim_node *n);
/* EV_FAILOVER: kill the leader (the failover scenario), and the next. */
void sim_failover_kill(struct sim_world *w);
/* Node n became leader of `term`: timed against a watched kill. */
void sim_failover_leader(struct sim_world *w, struct sim_node *n,
			 baton_term term);

/* ---- workload.c: clients and operators ----------------------------------- */

/* Clients: key-value operations proposed through the pipeline, reads
 * through its read barrier, each recorded with the simulated time. */
void sim_client(struct sim_world *w);
void sim_reader(struct sim_world *w);
/* EV_READ_AT: a read on node n (after an election or a transfer). */
void sim_read_at(struct sim_world *w, struct sim_node *n);
/* EV_MEMBER: a membership request, and the next one scheduled;
 * EV_MEMBER_NOW: one request only. */
void sim_membership(struct sim_world *w);
void sim_membership_change(struct sim_world *w);
void sim_transfer(struct sim_world *w);
/* EV_LIVENESS: probe the healed cluster until a marker is applied by every
 * member (done) or the liveness phase runs out (failure). */
void sim_liveness_check(struct sim_world *w);
/* Every step of node n, before the invariants see it (n->role is the
 * role before the step): counts, and reads right after elections. */
void sim_workload_observe(struct sim_world *w, struct sim_node *n,
			  const struct baton_event *ev, int rv,
			  const struct baton_update *u);
/* A marker command was applied at `index` by some node. */
void sim_workload_marker(struct sim_world *w, baton_index index);
/* At the end of a run: the recorded history must be linearizable. */
void sim_history_check(struct sim_world *w);
void sim_history_free(struct sim_world *w);

/* ---- versions.c: releases, upgrades, version invariants ------------------ */

/* Draw the founders' releases (world's rng) and fill w->releases. */
void sim_versions_init(struct sim_world *w);
/* The profile node n runs. */
const struct baton_profile *sim_profile(const struct sim_world *w,
					const struct sim_node *n);
/* May a message of packet p reach node `to` (its current release)? False
 * when their peer protocol ranges do not meet (the transport refuses the
 * connection) or the receiver's release predates the message type. Also
 * strips what the negotiated protocol does not carry. */
bool sim_versions_deliverable(struct sim_world *w, struct sim_packet *p,
			      const struct sim_node *to);
/* EV_UPGRADE: restart a node at a newer release, and schedule the next
 * (none while a downgrade is in progress). */
void sim_upgrade(struct sim_world *w);
/* Stop node n and bring it back at release r (an index of the table) on
 * the same disk: later (after a short while) or not (the caller boots
 * it). A node that is down comes up at r when it restarts. */
void sim_restart_at(struct sim_world *w, struct sim_node *n, uint32_t r,
		    bool later);
/* The index of release r in the table, or UINT32_MAX. */
uint32_t sim_release_index(const struct sim_world *w, struct baton_release r);
/* Before the version rules (0.1.0): no info requests, no rules. */
bool sim_before_rules(const struct baton_profile *p);
/* The version state in force just before index i of n's log: false if
 * the log no longer tells. */
bool sim_versions_before(const struct sim_node *n, baton_index i,
			 struct baton_version_state *out);
/* A release for a fresh node joining the leader l's cluster, as the join
 * check would let it in; false if none may join. */
bool sim_fresh_release(struct sim_world *w, struct sim_node *l,
		       uint32_t *release);
/* A version entry e appended by node n in update u (checks.c calls it for
 * every appended VERSION entry). */
void sim_check_version_entry(struct sim_world *w, struct sim_node *n,
			     const struct baton_update *u,
			     const struct baton_entry *e);
/* The machine of node n was asked to work under machine version v (what:
 * "apply entry 12", "restore the snapshot at 40", ...): a violation if
 * its release does not implement v. True when it does. */
bool sim_check_machine_version(struct sim_node *n, uint32_t v, const char *what,
			       baton_index index);
/* The pipeline of n reported a stall; judge it after the step (hint: the
 * snapshot the step installed, or NULL). */
void sim_stall_reported(struct sim_node *n, baton_index index, const char *why);
void sim_stall_judge(struct sim_world *w, struct sim_node *n,
		     const struct baton_snapshot_meta *hint);
/* The liveness phase: has every member of configuration c applied the
 * version entry that raises the effective machine version to the newest
 * release's machine_max? */
bool sim_versions_live(struct sim_world *w, const struct baton_config *c);
/* "1.2.0" of a release index, for traces. */
const char *sim_release_name(const struct sim_world *w, uint32_t release,
			     char buf[BATON_RELEASE_STR_MAX]);

/* ---- rules.c: leader eligibility ------------------------------------------
 */

/* The election policy node n runs (enum baton_election_policy). */
uint32_t sim_policy(const struct sim_world *w, const struct sim_node *n);
/* After every step of node n (ev and its update u): a leader is not below
 * the floor of its own log; a voter grants no vote below the floor of its
 * log. */
void sim_check_rules(struct sim_world *w, struct sim_node *n,
		     const struct baton_event *ev,
		     const struct baton_update *u);
/* Node n applied commands up to `upto` in one turn: not while the floor of
 * its log holds it (future data). */
void sim_check_floor_hold(struct sim_world *w, struct sim_node *n,
			  baton_index first, baton_index upto);
/* The liveness phase's first stage, every probe tick: true once it is
 * over (every node runs the newest release). */
bool sim_rules_liveness(struct sim_world *w);

/* ---- downgrade.c: the operator's explicit downgrades ----------------------
 */

/* EV_DOWNGRADE: enable a downgrade to the release before the floor, restart
 * a node at its target, or cancel it; and schedule the next move. */
void sim_downgrade(struct sim_world *w);
/* The downgrade in progress as leader l reports it (applied there, and
 * not cleared by a later entry of its log), or NULL; s is filled. */
const struct baton_downgrade *sim_downgrade_of(const struct sim_node *l,
					       struct baton_raft_status *s);
/* The target of a downgrade the operator would enable now, from the
 * floor of leader l's log (status s), or NULL. */
const struct baton_profile *
sim_downgrade_target(struct sim_world *w, const struct baton_raft_status *s);
/* Validate op (enum baton_downgrade_op) to target on leader l, then ask
 * its pipeline: true if the request was accepted. */
bool sim_downgrade_request(struct sim_world *w, struct sim_node *l, uint32_t op,
			   struct baton_release target);
/* Node n may restart at the target of d: its durable snapshot covers the
 * entry that enabled d, so it replays nothing written before it. */
bool sim_downgrade_ready(const struct sim_node *n,
			 const struct baton_downgrade *d);
/* The liveness phase: cancel a downgrade left in progress (every node was
 * upgraded again), retrying while it is not done. */
void sim_downgrade_cancel_left(struct sim_world *w, struct sim_node *l);

/* ---- steady.c: leader stability ------------------------------------------
 */

/* Node n was impaired (booted, crashed) until `until`. */
void sim_steady_node(struct sim_world *w, const struct sim_node *n,
		     uint64_t until);
/* Node n submitted a write that completes at done_ms. */
void sim_steady_disk(struct sim_world *w, const struct sim_node *n,
		     uint64_t done_ms);
/* Every cut link heals now. */
void sim_steady_heal(struct sim_world *w);
/* A node sent m (lost: dropped by chance or by the network's bound). */
void sim_steady_sent(struct sim_world *w, const struct baton_msg *m, bool lost);
/* Every step of node n (n->role the role before it): a leader deposed by
 * nothing but spurious events fails the run. */
void sim_steady_step(struct sim_world *w, struct sim_node *n,
		     const struct baton_update *u);

/* ---- careless.c: the careless operator ------------------------------------
 */

/* Draw whether and how often the careless operator acts (its own stream),
 * and schedule its first request. */
void sim_careless_start(struct sim_world *w);
/* EV_CARELESS: one request of any kind on a random node, judged by the
 * model of the documented rules; and the next one scheduled. */
void sim_careless(struct sim_world *w);

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
/* After every step of node n that produced update u (also checks, when a
 * leader's commit index advances, that the entry is stored by a majority
 * and that no node lacking it could win an election). */
void sim_check_update(struct sim_world *w, struct sim_node *n,
		      const struct baton_update *u);
/* One applied entry, after the machine applied it. */
void sim_check_apply(struct sim_world *w, struct sim_node *n,
		     const struct baton_entry *e);
/* A snapshot the node restored its machine from. */
void sim_check_snapshot(struct sim_world *w, struct sim_node *n,
			baton_index index, uint64_t hash);
/* Node n's storage just made its snapshot at index (len bytes) durable:
 * it must read back, and hold the machine's state at index. */
void sim_check_snapshot_saved(struct sim_world *w, struct sim_node *n,
			      baton_index index, size_t len);
/* Highest index applied by any node so far. */
baton_index sim_max_applied(const struct sim_world *w);
/* Did every node that applied index i apply the entry of this term? */
bool sim_committed_term(const struct sim_world *w, baton_index i,
			baton_term *term);

/* ---- clock.c: wall clocks ---------------------------------------------- */

/* The world's time 0 on the wall clocks (2026-01-01): stamps are never 0. */
#define SIM_EPOCH_MS 1767225600000ull
uint64_t sim_clock_wall_ms(const struct sim_node *n);
/* Whether a negotiated peer protocol carries clock samples. */
bool sim_clock_carried(uint32_t proto);
void sim_clock_start(struct sim_world *w);
void sim_clock_fault(struct sim_world *w); /* EV_CLOCK */
void sim_clock_heal(struct sim_world *w);
/* After each tick of n: the invariants of clocks and machine time. */
void sim_clock_check(struct sim_world *w, struct sim_node *n);

#endif
