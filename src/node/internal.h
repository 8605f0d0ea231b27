/*
 * The node pipeline's insides, shared by its files:
 *
 *   pipeline.c  life cycle, the step, the persist chain and its held
 *               messages, snapshots, the driver's inputs, status;
 *   apply.c     committed entries into the machine, the version state in
 *               force, and the stall;
 *   requests.c  proposals, reads, membership and leadership waiters, and
 *               requests deferred to the next flush.
 */
#ifndef BATON_NODE_INTERNAL_H
#define BATON_NODE_INTERNAL_H

#include "baton/assert.h"
#include "baton/buf.h"
#include "pipeline.h"

/* One update's persistence submitted to the storage, in submission order. */
struct pl_write {
	uint64_t seq;
	bool report; /* step PERSISTED with index/term once durable */
	baton_index index;
	baton_term term;
	struct baton_msg_copy *held; /* sent once durable */
	uint32_t n_held;
	struct pl_write *next;
};

/* A proposal in the log, waiting for its entry to be applied. */
struct pl_proposal {
	baton_index index;
	baton_term term;
	uint64_t deadline_ms;
	baton_propose_cb cb;
	void *data;
};

/* A proposal not yet given to the core (the next flush batches it). */
/* A queued proposal's payload lives in the pipeline's queue_bytes at
 * offset: one buffer kept between batches instead of an allocation each. */
struct pl_queued {
	size_t offset;
	size_t len;
	baton_propose_cb cb;
	void *data;
};

/* A read barrier. read_index is PL_READ_UNSENT until its group is given to
 * the core, then 0 until the core resolves it. */
#define PL_READ_UNSENT UINT64_MAX
struct pl_read {
	uint64_t group;
	uint64_t deadline_ms;
	baton_index read_index;
	bool resolved;
	baton_done_cb cb;
	void *data;
};

enum pl_wait_kind {
	PL_WAIT_ADD = 1,
	PL_WAIT_PROMOTE,
	PL_WAIT_REMOVE,
	PL_WAIT_TRANSFER,
	PL_WAIT_VERSIONS,
};

struct pl_waiter {
	enum pl_wait_kind kind;
	baton_node_id id;
	/* PL_WAIT_VERSIONS: the version entry, done once applied. */
	baton_index index;
	baton_term term;
	uint64_t deadline_ms;
	baton_done_cb cb;
	void *data;
};

/* A membership, leadership or versions request made while stepping. */
struct pl_deferred {
	enum pl_wait_kind kind;
	baton_node_id id;
	struct baton_version_state *versions; /* PL_WAIT_VERSIONS, malloc'd */
	baton_done_cb cb;
	void *data;
};

/* The node's own snapshot in progress (snapshot.c). */
enum pl_snap_phase {
	PL_SNAP_NONE = 0,
	PL_SNAP_WRITING,    /* the machine's slices go to the sink */
	PL_SNAP_COMMITTING, /* the storage syncs it in the background */
};

struct pl_snapshot {
	uint32_t phase; /* enum pl_snap_phase */
	struct baton_snapshot_header h;
	struct baton_snapshot_sink *sink;
	/* The machine's snapshot is open (its last step not taken yet). */
	bool machine_open;
	/* The storage's queue was full: wait for its notify. */
	bool blocked;
	struct baton_buf slice; /* the bytes of one step not written yet */
	uint64_t bytes;		/* written to the sink so far */
	uint32_t slices;
	uint64_t began_ms;
};

/* What clock.c keeps of one peer's clock. */
struct pl_clock_peer {
	baton_node_id id;
	/* The last wall time it sent us, and when it arrived (monotonic):
	 * echoed in our next Append or AppendResult to it. */
	uint64_t last_wall_ms;
	uint64_t last_recv_ms;
	/* The last sample with a small round trip (known), and when. */
	bool known;
	int64_t offset_ms; /* its clock minus ours */
	uint64_t rtt_ms;
	uint64_t sample_ms;
	/* Our wall clock minus our monotonic clock at the sample: a step of
	 * our own wall clock since makes the sample stale. */
	int64_t wall_mono_ms;
	/* Its last Append or AppendResult carried no clock sample: it
	 * measures nothing (an older protocol, or no wall clock). Only such
	 * a message says so: not hearing from a peer says nothing. */
	bool bare;
};

struct pl_clock {
	struct pl_clock_peer peers[BATON_CLOCK_PEERS_MAX];
	uint32_t n_peers;
	/* The last leader other than us (its samples say what we thought of
	 * our clock before we led). */
	baton_node_id last_leader;
	uint64_t leader_since_ms; /* when we became leader (monotonic) */
	bool was_leader;
	/* The bar told to the core, and until when it holds unless renewed
	 * by a sample that still disagrees. */
	bool barred;
	uint64_t barred_until_ms;
	uint64_t barred_total;
	uint64_t warned_ms; /* the last warning (monotonic), for the rate */
	bool warned_once;
	uint64_t warnings;
	/* The voters' verdict on our clock at the last tick (we count as
	 * agreeing with ourselves). */
	uint32_t voters, agree, disagree;
	/* Voters other than us whose last Append or AppendResult carried
	 * no clock sample (peers of an older protocol). */
	uint32_t bare;
	bool verdict_as_leader; /* judged as leader, from this term's samples */
	/* Machine-time stamps: the last one and the anchor they move from
	 * (a stamp and the monotonic time it was made at). */
	bool anchored;
	uint64_t anchor_ms, anchor_mono_ms;
	uint64_t last_stamp_ms;
};

struct baton_pipeline {
	struct baton_pipeline_config c;
	struct baton_pipeline_env env;
	struct baton_raft *raft;
	struct baton_storage *storage;
	struct baton_machine *machine;
	bool stepping;
	bool storage_failed;
	bool storage_failed_due; /* tell the driver at the next flush */
	/* Removed from the cluster (baton_pipeline_retire). */
	bool retired;
	/* Peers whose connection closed while stepping (a send that failed
	 * at once closes it): told to the core at the next flush. */
	baton_node_id closed_due[BATON_MAX_MEMBERS];
	uint32_t n_closed_due;

	struct pl_write *writes, *writes_tail;

	/* Proposals in the log, by increasing index: a ring. */
	struct pl_proposal *props;
	uint32_t props_head, props_n, props_cap;
	struct pl_queued *queue;
	uint32_t queue_n, queue_cap;
	uint8_t *queue_bytes;
	size_t queue_bytes_len, queue_bytes_cap;

	struct pl_read *reads;
	uint32_t reads_n, reads_cap;
	uint64_t next_read_group;
	bool reads_unsent;

	struct pl_waiter *waiters;
	uint32_t waiters_n, waiters_cap;
	struct pl_deferred *deferred;
	uint32_t deferred_n, deferred_cap;

	/* What the machine holds: every entry up to `applied`, under the
	 * version facts in force there. */
	baton_index applied;
	struct baton_version_state versions;
	baton_index snapshot_index;
	/* Payload bytes applied since the last snapshot began (the config's
	 * snapshot_log_bytes). */
	uint64_t applied_bytes;
	bool snapshot_due;
	struct pl_snapshot snap;
	struct baton_pipeline_snapshot_stats stats;
	/* Where a snapshot chunk read back from storage goes before it is
	 * sent (the core gave its snapshot without the bytes). */
	uint8_t *chunk;
	size_t chunk_cap;
	uint32_t role;
	baton_node_id leader;
	struct baton_buf reply;

	/* The stall (0: none): the first index not applied, the term of the
	 * entry there (0 for a snapshot), and why. `stop_due` is an index
	 * still to report to the core with BATON_EVENT_APPLY_STOPPED. */
	baton_index stalled_index;
	baton_term stalled_term;
	bool stalled_snapshot;
	/* The core stalled first (it decodes what stopped it itself, and
	 * lifts the stall itself: a floor lowered by a downgrade). */
	bool stalled_by_core;
	/* The last core refusal logged (baton_raft_last_refusal). */
	uint64_t refusal_logged;
	char stalled_why[BATON_STALL_TEXT_MAX];
	baton_index stop_due;
	struct pl_clock clock;
};

/* pipeline.c */
uint64_t pl_now(const struct baton_pipeline *p);
/* A line to env.log, if the driver takes them. */
void pl_log(const struct baton_pipeline *p, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Feed one event to the core and handle its update (never re-entered). */
int pl_step(struct baton_pipeline *p, struct baton_event *ev);
/* Grow an array of elem-sized items to hold at least one more; 0 or
 * BATON_ENOMEM (the array is then unchanged). */
int pl_grow(void **v, uint32_t *cap, size_t elem);

/* The storage failed (rv): stop accepting writes, tell the driver. */
void pl_storage_failed(struct baton_pipeline *p, int rv);

/* clock.c */
/* Send m (env.send), with this node's clock sample on an Append or an
 * AppendResult. */
void pl_send(struct baton_pipeline *p, const struct baton_msg *m);
/* A message arrived: take its clock sample. */
void pl_clock_receive(struct baton_pipeline *p, const struct baton_msg *m);
/* After each tick: judge the samples, warn, bar or lift the bar. */
void pl_clock_tick(struct baton_pipeline *p);

/* snapshot.c */
/* Start a snapshot at the applied index, if none is in progress. */
void pl_snapshot_begin(struct baton_pipeline *p);
/* The machine is about to be restored or converted: drop the snapshot
 * being written (a commit in flight goes on). */
void pl_snapshot_abandon(struct baton_pipeline *p, const char *why);
/* A background commit may have ended: finish it. */
void pl_snapshot_poll(struct baton_pipeline *p);
/* At destroy: abandon, or wait for the commit in flight. */
void pl_snapshot_destroy(struct baton_pipeline *p);
/* Fill a snapshot message whose chunk the core left NULL from the
 * durable snapshot; false if it cannot be read (the message is dropped,
 * the leader sends it again). */
bool pl_snapshot_fill_chunk(struct baton_pipeline *p, struct baton_msg *m);

/* apply.c */
/* Hand the update's committed entries (and its installed snapshot) to the
 * machine, stalling at what it cannot interpret. */
void pl_apply_update(struct baton_pipeline *p, const struct baton_update *u);
/* Restore the machine from the snapshot found at start: 0, or a stall (the
 * node starts stalled); never an error. */
void pl_restore_at_start(struct baton_pipeline *p,
			 const struct baton_snapshot_meta *meta,
			 const uint8_t *data, size_t len);
/* After a step: follow the core's stall (it found one of its own, or the
 * entry that caused ours is gone). */
void pl_stall_sync(struct baton_pipeline *p);

/* requests.c */
/* The entry at e->index is applied (reply: the machine's, or NULL when it
 * did not go to the machine): complete the proposal waiting for it. */
void pl_proposal_applied(struct baton_pipeline *p, const struct baton_entry *e,
			 bool waited, const struct baton_buf *reply);
/* Whether a proposal waits for the entry (index, term): then the machine
 * is asked for a reply. */
bool pl_proposal_waits(const struct baton_pipeline *p,
		       const struct baton_entry *e);
/* Fail proposals at or below index (their fate is unknown). */
void pl_props_fail_upto(struct baton_pipeline *p, baton_index index,
			int status);
/* A version entry was applied (waiters of set_versions). */
void pl_versions_applied(struct baton_pipeline *p, const struct baton_entry *e);
/* The node stalled: fail what can no longer complete here. */
void pl_requests_stalled(struct baton_pipeline *p);
/* The node was removed from the cluster: its own removal is done. */
void pl_requests_retired(struct baton_pipeline *p);
void pl_resolve_reads(struct baton_pipeline *p, const struct baton_update *u);
/* The leader changed: reads whose index was asked of the old one (its
 * answer may never come) are asked again. */
void pl_reads_leader_changed(struct baton_pipeline *p);
void pl_serve_reads(struct baton_pipeline *p);
void pl_check_waiters(struct baton_pipeline *p, baton_node_id failed_promotion);
void pl_expire(struct baton_pipeline *p);
void pl_flush_requests(struct baton_pipeline *p);
/* The pipeline goes away: fail proposals not yet appended and reads as
 * "not leader" (they may go elsewhere), appended proposals as "leadership
 * changed" (their outcome is unknown), every other request with `status`,
 * and free the request arrays. */
void pl_requests_free(struct baton_pipeline *p, int status);

#endif /* BATON_NODE_INTERNAL_H */
