/*
 * The node pipeline: everything between the Raft core and the world, free
 * of any event loop, clock, socket or file of its own. It owns the core,
 * drives the storage and the state machine it is given, and keeps:
 *
 *   - the persist chain: each update's persistence is submitted to the
 *     storage in order, and the messages that must not outrun the disk
 *     (votes, acknowledgements) are held until their write and every
 *     earlier one is durable;
 *   - proposals: queued by the application, batched into one PROPOSE event
 *     per flush, completed once applied (with the machine's reply) or
 *     failed when their entry was overwritten or timed out;
 *   - linearizable reads: reads arriving between two flushes share one
 *     read index; each completes once the machine applied it;
 *   - membership and leadership requests and their waiters;
 *   - apply: committed entries handed to the machine with the machine
 *     version in force at their index; version entries change it; data the
 *     node cannot interpret stops applying (a stall) and is reported;
 *   - snapshots: taken every `snapshot_entries` applied entries.
 *
 * Two drivers exist, and they are the only ones: src/io/node.c (libuv,
 * TCP, files) and the simulator (tests/sim: simulated network, disks and
 * clock). The driver feeds events in (tick, receive, storage completions,
 * flush) and supplies the world through struct baton_pipeline_env.
 *
 * Re-entrancy: requests made from inside a callback (a completion asking
 * for more work) are queued and run at the next flush. Every callback of a
 * request is called exactly once, on the driver's thread.
 */
#ifndef BATON_NODE_PIPELINE_H
#define BATON_NODE_PIPELINE_H

#include "baton/machine.h"
#include "baton/raft.h"
#include "baton/storage.h"

/* Limits on what waits inside a node. */
#define BATON_PIPELINE_PENDING_MAX 100000u /* proposals and reads waiting */
#define BATON_PIPELINE_BATCH_MAX 1024u	   /* proposals in one PROPOSE event */
#define BATON_STALL_TEXT_MAX 512u

struct baton_pipeline;

/* Levels of env.log's lines. */
enum {
	BATON_PIPELINE_LOG_DEBUG = 0,
	BATON_PIPELINE_LOG_INFO = 1,
	BATON_PIPELINE_LOG_WARN = 2,
	BATON_PIPELINE_LOG_ERROR = 3,
};

/* What the driver supplies. Only `now_ms` and `send` are required. */
struct baton_pipeline_env {
	void *data;
	/* The driver's monotonic clock. */
	uint64_t (*now_ms)(void *data);
	/* Deliver a message to m->to now (best effort, like the network).
	 * `m` and what it points to are valid during the call only. */
	void (*send)(void *data, const struct baton_msg *m);
	/* The known leader changed (0: none known). */
	void (*leader_changed)(void *data, baton_node_id leader);
	/* The storage failed: nothing more is persisted; the driver should
	 * stop the node (leadership is handed over first). Called from a
	 * flush, once. */
	void (*storage_failed)(void *data);
	/* The node stopped applying (once per stall, with the text that
	 * status reports): for the log. */
	void (*stalled)(void *data, baton_index index, const char *why);
	/* A line for the log, without newline: what the pipeline did
	 * (snapshots taken and installed, a bootstrap) or met (a storage
	 * error). level: BATON_PIPELINE_LOG_*. May be NULL. */
	void (*log)(void *data, int level, const char *text);
	/* The driver's wall clock, unix ms (CLOCK_REALTIME in src/io). May
	 * be NULL: then no clock samples are sent, the clock is never
	 * checked, and machine-time stamps follow the monotonic clock. */
	uint64_t (*wall_ms)(void *data);
	/* Observer of every step (the simulator's invariants); NULL in
	 * production. Called after the pipeline handled the update. */
	void (*observe)(void *data, const struct baton_event *ev, int rv,
			const struct baton_update *u);
};

struct baton_pipeline_config {
	/* The core's options (id, profile, timeouts, limits, seed). */
	struct baton_raft_options raft;
	/* Opened by the driver, loaded by baton_pipeline_create; the driver
	 * polls it through baton_pipeline_storage_ready and closes it after
	 * baton_pipeline_destroy. */
	struct baton_storage *storage;
	/* The state machine, owned by the driver. */
	struct baton_machine *machine;
	/* Take a snapshot every this many applied entries (0: never). */
	uint64_t snapshot_entries;
	/* Also once entries of this many payload bytes were applied since
	 * the last snapshot began (0: never): the log is held in memory
	 * until a snapshot compacts it, so a bound on memory needs one on
	 * the log's bytes too, whatever the entries' size. */
	uint64_t snapshot_log_bytes;
	/* A snapshot is written in slices of about this many bytes, one per
	 * baton_pipeline_work() (0: 64 KiB, a fraction of a millisecond). */
	size_t snapshot_slice_bytes;
	/* How long requests may wait before failing with a retryable error
	 * (0: the defaults, 5 s for reads, 10 s for proposals, 30 s for
	 * membership changes and transfers). */
	uint32_t read_timeout_ms;
	uint32_t proposal_timeout_ms;
	uint32_t admin_timeout_ms;
	/* A brand-new node (empty storage) with founders bootstraps a cluster
	 * of these voters. */
	uint32_t n_founders;
	baton_node_id founders[BATON_MAX_MEMBERS];
	/* Not at create: the driver first asks the founders whether a
	 * cluster already exists, then calls baton_pipeline_bootstrap. */
	bool bootstrap_deferred;
	/* The largest offset between this node's wall clock and another's
	 * that is tolerated (batond --max-clock-offset; 0: not checked, and
	 * the wall clock is trusted for machine time). Beyond it the node
	 * warns, and a leader whose clock a majority of the voters disagree
	 * with hands leadership over (src/node/clock.c). */
	uint32_t max_clock_offset_ms;
};

/* Load the storage, restore the machine and the core, bootstrap if the
 * storage is empty and there are founders. A snapshot the machine cannot
 * interpret does not fail the start: the node starts stalled. On failure
 * returns a BATON_E* code and a message in err. */
int baton_pipeline_create(const struct baton_pipeline_config *c,
			  const struct baton_pipeline_env *env,
			  struct baton_pipeline **out, char *err,
			  size_t errlen);
/* Fail every waiting request with BATON_ESTATE, drop held messages and
 * pending writes' bookkeeping, free. Neither the storage nor the machine
 * is touched: a crash in the simulator is exactly this. */
void baton_pipeline_destroy(struct baton_pipeline *p);

/* Whether the node holds no state at all: term 0, no log, no snapshot. */
bool baton_pipeline_empty(const struct baton_pipeline *p);
/* The deferred bootstrap (c->bootstrap_deferred): found the cluster of
 * c->founders now. 0, or BATON_ESTATE when the node is no longer empty
 * (nothing done). The next step persists the configuration entry. */
int baton_pipeline_bootstrap(struct baton_pipeline *p);

/* The node was removed from the cluster: from now on the core is no
 * longer ticked (it never stands for election again) and messages are
 * dropped; ticks still expire waiting requests. For good: a removed id
 * never comes back. */
void baton_pipeline_retire(struct baton_pipeline *p);

/* ---- driver inputs ------------------------------------------------------ */

/* Time passed: the core's timers, request deadlines, waiters. */
void baton_pipeline_tick(struct baton_pipeline *p);
/* A message arrived; the driver has set m->from. */
void baton_pipeline_receive(struct baton_pipeline *p,
			    const struct baton_msg *m);
/* The driver's last connection to peer `id` closed (EOF, reset, read
 * error; not a partition, which closes nothing): the core's fast failure
 * detection (BATON_EVENT_PEER_CLOSED). Ignored once retired. */
void baton_pipeline_peer_closed(struct baton_pipeline *p, baton_node_id id);
/* The storage has completions: poll them (release held messages, report
 * persistence to the core). */
void baton_pipeline_storage_ready(struct baton_pipeline *p);
/* End of a turn of the driver's loop: run deferred requests, batch queued
 * proposals and reads into the core, take a snapshot if one is due. */
void baton_pipeline_flush(struct baton_pipeline *p);
/* Whether a snapshot is being written: then the driver calls
 * baton_pipeline_work() regularly, between its other work, until this
 * says false (src/io/node.c: once a millisecond, from a timer; as often
 * as once per turn of its loop is fine too). */
bool baton_pipeline_has_work(const struct baton_pipeline *p);
/* Memory pressure: make a snapshot due now, so that it compacts the log,
 * if entries of at least min_bytes payload bytes were applied since the
 * last one began and none is in progress. True if one became due (taken
 * at the next baton_pipeline_flush). */
bool baton_pipeline_compact_soon(struct baton_pipeline *p, uint64_t min_bytes);
/* Write the next slice of the snapshot in progress (a bounded amount of
 * work: the loop stays responsive). */
void baton_pipeline_work(struct baton_pipeline *p);

/* ---- application requests ------------------------------------------------
 * Each returns 0 (cb will be called exactly once) or a BATON_E* code (cb
 * will not be called). */

/* Completion of a proposal: status 0 with the machine's reply, or
 * ENOTLEADER, LEADERCHANGED (overwritten, or its fate unknown after a
 * timeout), OVERLOADED, IO, STALLED, STATE (the node is going away). */
typedef void (*baton_propose_cb)(void *data, int status, const uint8_t *reply,
				 size_t len);
int baton_pipeline_propose(struct baton_pipeline *p, const uint8_t *payload,
			   size_t len, baton_propose_cb cb, void *data);

/* A linearizable read barrier: cb(0) once the machine holds everything
 * committed before the call; or NOLEADER (timeout), NOTLEADER, STALLED,
 * STATE. */
typedef void (*baton_done_cb)(void *data, int status);
int baton_pipeline_read(struct baton_pipeline *p, baton_done_cb cb, void *data);

/* Membership and leadership, on the leader; cb once committed (or the
 * transfer done) or failed (timeout, CATCHUP for a promotion). */
int baton_pipeline_add_learner(struct baton_pipeline *p, baton_node_id id,
			       baton_done_cb cb, void *data);
int baton_pipeline_promote(struct baton_pipeline *p, baton_node_id id,
			   baton_done_cb cb, void *data);
int baton_pipeline_remove(struct baton_pipeline *p, baton_node_id id,
			  baton_done_cb cb, void *data);
int baton_pipeline_transfer(struct baton_pipeline *p, baton_node_id id,
			    baton_done_cb cb, void *data);
/* Leader only: record new version facts in the log (BATON_EVENT_VERSIONS).
 * cb once the entry is applied. */
int baton_pipeline_set_versions(struct baton_pipeline *p,
				const struct baton_version_state *s,
				baton_done_cb cb, void *data);
/* Leader only: enable or cancel an explicit downgrade
 * (BATON_EVENT_DOWNGRADE; op is enum baton_downgrade_op). cb once its
 * version entry is applied here. BATON_EBUSY when called from inside a
 * step (a callback): call it from the loop. */
int baton_pipeline_downgrade(struct baton_pipeline *p, uint32_t op,
			     struct baton_release target, baton_done_cb cb,
			     void *data);

/* ---- messages that outlive a step ----------------------------------------
 * A message and what it points to (entries and their payloads, a snapshot
 * chunk) in one block of its own: for whoever keeps a message past the call
 * that produced it (held messages here, a simulated network, a test queue). */
struct baton_msg_copy {
	struct baton_msg msg;
	void *mem; /* NULL when the message points to nothing */
};
/* 0, or BATON_ENOMEM with *out empty. */
int baton_msg_copy(struct baton_msg_copy *out, const struct baton_msg *m);
/* Safe on an empty copy; leaves it empty. */
void baton_msg_copy_free(struct baton_msg_copy *c);

/* ---- introspection ------------------------------------------------------- */

/* The node's own snapshots since start. */
struct baton_pipeline_snapshot_stats {
	bool in_progress; /* being written or committed */
	uint64_t snapshots_taken;
	uint64_t snapshots_abandoned;
	/* The last one taken: its index, size, slices, and the time from
	 * its start to durable. */
	baton_index last_index;
	uint64_t last_bytes;
	uint32_t last_slices;
	uint64_t last_ms;
};

struct baton_pipeline_status {
	struct baton_raft_status raft;
	baton_index match[BATON_MAX_MEMBERS]; /* leader only, by config */
	baton_index applied;		      /* by the machine */
	/* The version facts in force at `applied`. */
	struct baton_version_state applied_versions;
	bool storage_failed;
	/* A stall: the first index not applied and why (empty: none). */
	baton_index stalled_index;
	char stalled_why[BATON_STALL_TEXT_MAX];
	uint32_t proposals_waiting, reads_waiting;
	struct baton_pipeline_snapshot_stats snapshots;
};
void baton_pipeline_status(const struct baton_pipeline *p,
			   struct baton_pipeline_status *out);

/* ---- clocks (clock.c) -----------------------------------------------------
 * What this node knows of its wall clock against its peers'. An offset is
 * the peer's clock minus ours, measured from the wall times carried by
 * AppendEntries and their results, half the round trip taken off. */
#define BATON_CLOCK_PEERS_MAX BATON_MAX_MEMBERS
struct baton_pipeline_clock {
	bool checked; /* a wall clock and a bound: the check runs */
	uint32_t max_offset_ms;
	/* This node's clock minus the cluster's: on a follower, minus its
	 * leader's; on a leader, minus the clock of the follower that
	 * completes a majority with it (the (majority - 1)th closest). Valid
	 * when offset_known. */
	bool offset_known;
	int64_t offset_ms;
	/* The bar (BATON_EVENT_CLOCK): a majority disagreed with our clock
	 * while we led; we do not stand until our clock agrees with the
	 * leader's again. */
	bool barred;
	uint64_t barred_total; /* times barred since start */
	uint64_t warnings;     /* warnings logged (rate-limited) */
	/* Whether machine-time stamps may follow the wall clock now. */
	bool trusted;
	uint32_t n_peers;
	struct {
		baton_node_id id;
		bool known;	   /* a sample with a small round trip */
		int64_t offset_ms; /* theirs minus ours */
		uint64_t rtt_ms;
		uint64_t age_ms; /* since that sample */
	} peers[BATON_CLOCK_PEERS_MAX];
};
void baton_pipeline_clock(const struct baton_pipeline *p,
			  struct baton_pipeline_clock *out);

/* The machine-time stamp a leader puts on an entry it proposes now, given
 * the machine time its state machine applied last (`machine_ms`, 0:
 * nothing stamped applied; the log counts as never stamped only while no
 * command waits after the applied index). Machine time never goes backwards
 * and, between stamps, moves with this node's monotonic clock; it follows the
 * wall clock only while that clock is trusted (agreed with by a majority, or
 * the check is off, or the node is alone), so a wall clock far ahead cannot
 * expire keys early and one behind a former leader's cannot freeze them
 * (docs/kv.md, "Machine time"). */
uint64_t baton_pipeline_machine_stamp(struct baton_pipeline *p,
				      uint64_t machine_ms);

/* The core, for read-only introspection (status, invariants). */
const struct baton_raft *baton_pipeline_raft(const struct baton_pipeline *p);

#endif /* BATON_NODE_PIPELINE_H */
