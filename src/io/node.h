/*
 * A node: the node pipeline (src/node/pipeline.h) driven with real I/O on
 * a libuv loop — ticks from a timer, messages over the peer transport,
 * persistence through the file storage (group commit on its writer thread,
 * completions back through uv_async), the pipeline's flush at the end of
 * each loop iteration. Everything between the core and the world (persist
 * chain, proposals, reads, apply, snapshots, the stall) is the pipeline's;
 * this layer is glue only.
 *
 * The application (src/server) supplies the state machine (struct
 * baton_machine) and asks for writes (propose), linearizable read barriers
 * (read) and membership changes; each completes through a callback on the
 * loop thread, exactly once.
 */
#ifndef BATON_IO_NODE_H
#define BATON_IO_NODE_H

#include <uv.h>

#include "baton/buf.h"
#include "baton/machine.h"
#include "baton/raft.h"
#include "baton/storage.h"
#include "peer.h"
#include "pipeline.h"
#include "transport.h"

/* Limits on what waits inside a node. */
#define BATON_NODE_PENDING_MAX BATON_PIPELINE_PENDING_MAX
#define BATON_NODE_TICK_MS 10u

struct baton_node;

struct baton_node_app {
	void *data;
	/* The state machine (baton/machine.h), owned by the application and
	 * kept alive until baton_node_close returns. */
	struct baton_machine *machine;
	/* A frame from a peer that is not a Raft message (forwarded client
	 * writes and their replies). */
	void (*peer_frame)(void *data, baton_node_id from,
			   const struct baton_peer_frame *f);
	/* The storage failed (a write or sync returned an error): the node
	 * no longer persists anything and should be stopped. */
	void (*storage_failed)(void *data);
	/* Role or leader changed (for logs and waiting clients). */
	void (*leader_changed)(void *data, baton_node_id leader);
	/* The node stopped applying at `index` (it logged `why` at ERROR
	 * already); reads and proposals now fail with BATON_ESTALLED until
	 * the stall lifts. May be NULL. */
	void (*stalled)(void *data, baton_index index, const char *why);
	/* Where member id listens for peers ("" or NULL if unknown): for the
	 * cluster view in handshake replies (the leader's address). May be
	 * NULL. */
	const char *(*peer_addr)(void *data, baton_node_id id);
	/* Cluster identity: whether node id was removed from the cluster
	 * (its connections are refused, telling it so), and a member's word,
	 * refusing our connection, that this node was. May be NULL. */
	bool (*is_removed)(void *data, baton_node_id id);
	void (*removed)(void *data, baton_node_id by, const char *reason);
	/* The last connection to peer id closed (a stopped or killed node:
	 * the kernel closes its sockets). May be NULL. */
	void (*peer_down)(void *data, baton_node_id id);
};

struct baton_node_config {
	baton_node_id id;
	const char *cluster_id;
	struct baton_profile profile;
	const char *data_dir;
	const char *peer_addr; /* listen */
	uint32_t election_timeout_ms;
	uint32_t heartbeat_ms;
	uint64_t snapshot_entries; /* take a snapshot every this many */
	/* ...or once this many payload bytes were applied since (0: no). */
	uint64_t snapshot_log_bytes;
	/* Payload bytes kept behind a snapshot at most (0: no bound). */
	uint64_t snapshot_trailing_bytes;
	/* The embedder's memory bound, told to the leader in info replies
	 * (baton_raft_options.memory_max_bytes; 0: none). */
	uint64_t memory_max_bytes;
	/* Write a snapshot in slices of about this many bytes, one per loop
	 * iteration (0: the pipeline's default). */
	size_t snapshot_slice_bytes;
	/* Entries kept behind a snapshot for followers a little behind. */
	bool snapshot_trailing_set;
	uint32_t snapshot_trailing;
	/* Size of each log segment, preallocated (0: the storage's default). */
	uint64_t wal_segment_bytes;
	/* Founding members (bootstrap): ids and peer addresses. */
	uint32_t n_founders;
	baton_node_id founders[BATON_MAX_MEMBERS];
	const char *founder_addrs[BATON_MAX_MEMBERS];
	/* An empty node with founders does not found at start but waits for
	 * baton_node_found (the server first asks the founders whether the
	 * cluster exists already). */
	bool defer_bootstrap;
	/* NULL: the OS's files; tests may pass another */
	struct baton_vfs *vfs;
	/* Refuse peers of another release (the transport's strict_release). */
	bool strict_release;
	/* enum baton_machine_upgrade; 0: the core's default (all). */
	uint32_t machine_upgrade;
	/* enum baton_election_policy; 0: the core's default (version-aware). */
	uint32_t election_policy;
	/* The cluster's peer secret (the transport's: peers must prove they
	 * hold it); NULL: no peer authentication. */
	const struct baton_peer_secret *peer_secret;
	/* The pipeline's max_clock_offset_ms (0: the clock is not checked). */
	uint32_t max_clock_offset_ms;
};

/* Recover from the data directory, start the transport and the timers.
 * A message goes to *err on failure. */
int baton_node_start(uv_loop_t *loop, const struct baton_node_config *c,
		     const struct baton_node_app *app, struct baton_node **out,
		     char *err, size_t errlen);
/* ---- whose the node is (docs/batond.md, "Identity") ---- */

/* Still waiting to found (defer_bootstrap, and empty at start): Raft
 * messages are not heard until baton_node_found. */
bool baton_node_founding(struct baton_node *n);
/* Found the cluster of the founders now: 0, or BATON_ESTATE if the node
 * is no longer empty (nothing done). Ends the wait either way. */
int baton_node_found(struct baton_node *n);
/* What the data directory records: node id, cluster name, cluster UUID. */
void baton_node_identity(struct baton_node *n, struct baton_identity *out);
/* Record the cluster's UUID in the data directory (see
 * baton_fs_storage_set_cluster_uuid: a synced write, once). */
int baton_node_set_cluster_uuid(struct baton_node *n,
				const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
				char *err, size_t errlen);
/* This node was removed from the cluster: it never stands for election
 * again and hears no Raft message (the pipeline's retire); reads and
 * proposals are the server's to refuse. */
void baton_node_retire(struct baton_node *n);

/* Hand leadership over if leader (cb when done or after a timeout), then
 * nothing more; baton_node_close frees. */
void baton_node_shutdown(struct baton_node *n, void (*cb)(void *data),
			 void *data);
void baton_node_close(struct baton_node *n);

/* Completion of a proposal: status 0 with the apply reply, or a BATON_E*
 * code (ENOTLEADER before proposing; LEADERCHANGED when the entry was
 * overwritten or its fate is unknown; EOVERLOADED; EIO; ESTALLED when this
 * node stopped applying). The call itself returns those of them it knows
 * at once (cb is then not called). */
typedef void (*baton_node_propose_cb)(void *data, int status,
				      const uint8_t *reply, size_t len);
int baton_node_propose(struct baton_node *n, const uint8_t *payload, size_t len,
		       baton_node_propose_cb cb, void *data);

/* A linearizable read barrier: cb(status) once the state machine holds
 * everything committed before the call; BATON_ESTALLED at once on a node
 * that stopped applying. */
typedef void (*baton_node_done_cb)(void *data, int status);
int baton_node_read(struct baton_node *n, baton_node_done_cb cb, void *data);

/* Membership and leadership; cb once done (see docs/batond.md). */
int baton_node_add_learner(struct baton_node *n, baton_node_id id,
			   baton_node_done_cb cb, void *data);
int baton_node_promote(struct baton_node *n, baton_node_id id,
		       baton_node_done_cb cb, void *data);
int baton_node_remove(struct baton_node *n, baton_node_id id,
		      baton_node_done_cb cb, void *data);
int baton_node_transfer(struct baton_node *n, baton_node_id id,
			baton_node_done_cb cb, void *data);

/* Send a forwarded write or its reply (kind BATON_PEER_FORWARD or
 * BATON_PEER_FORWARD_REPLY) to a peer; the transport encodes it in the
 * protocol version of the connection (baton_transport_send_frame()). */
int baton_node_send_frame(struct baton_node *n, baton_node_id to,
			  const struct baton_peer_frame *f);
/* A connection to peer `to` is up (its handshake completed). */
bool baton_node_peer_connected(struct baton_node *n, baton_node_id to);
/* Tell the transport where a member listens. */
void baton_node_set_peer_addr(struct baton_node *n, baton_node_id id,
			      const char *addr);
/* Stop dialling a node that is not a member (a leader a refused joiner
 * talked to). */
void baton_node_forget_peer(struct baton_node *n, baton_node_id id);
/* Read the cluster view in the handshake reply of the node at `addr`
 * (baton_transport_probe()); cb exactly once unless the node closes. */
int baton_node_probe(struct baton_node *n, const char *addr,
		     baton_transport_probe_cb cb, void *data);
/* The leader's live version table and what a machine upgrade waits for
 * (baton_raft_upgrade_status(); out->leader false elsewhere). */
void baton_node_upgrade_status(struct baton_node *n,
			       struct baton_upgrade_status *out);
/* The effective machine version of this node's log (its latest version
 * entry, committed or not): cheap, for every command. */
struct baton_machine_version baton_node_machine_version(struct baton_node *n);

/* Leader eligibility of this node now (baton_raft_eligibility()). */
uint32_t baton_node_eligibility(struct baton_node *n, char *why, size_t cap);
/* The core's half of an explicit downgrade (baton_raft_downgrade_check()):
 * validate before asking the state machine, and before enabling. */
int baton_node_downgrade_check(struct baton_node *n, uint32_t op,
			       struct baton_release target,
			       struct baton_downgrade_plan *plan, char *why,
			       size_t cap);
/* Enable or cancel a downgrade (BATON_EVENT_DOWNGRADE), on the leader; cb
 * once the version entry is applied here. Returns the check's errors. */
int baton_node_downgrade(struct baton_node *n, uint32_t op,
			 struct baton_release target, baton_node_done_cb cb,
			 void *data);

struct baton_node_status {
	struct baton_raft_status raft;
	baton_index match[BATON_MAX_MEMBERS]; /* leader only, by config */
	baton_index applied;		      /* by the state machine */
	/* The version facts in force at `applied`. */
	struct baton_version_state applied_versions;
	bool storage_failed;
	/* A stall: the first index not applied and why (0 and "": none). */
	baton_index stalled_index;
	char stalled_why[BATON_STALL_TEXT_MAX];
	struct baton_transport_stats transport;
	/* Raft messages and forwarded writes (or their replies) dropped
	 * because their sender is not in this node's latest configuration. */
	uint64_t peer_msgs_dropped_not_member;
	/* The node's own snapshots, and the longest slice of snapshot work
	 * the loop ran in one go (the current or last snapshot's, and the
	 * longest since start), in microseconds. */
	struct baton_pipeline_snapshot_stats snapshots;
	uint64_t snapshot_slice_max_us;
	uint64_t snapshot_slice_max_us_ever;
	/* Entries proposed through baton_node_propose (accepted or not), and
	 * the log's files (metrics). */
	uint64_t proposals;
	struct baton_fs_stats storage;
};
void baton_node_status(struct baton_node *n, struct baton_node_status *out);

/* The clock check (src/node/clock.c): offsets, the bar, warnings. */
void baton_node_clock(struct baton_node *n, struct baton_pipeline_clock *out);
/* The machine-time stamp for an entry proposed now, machine_ms being the
 * machine time applied last (baton_pipeline_machine_stamp). */
uint64_t baton_node_machine_stamp(struct baton_node *n, uint64_t machine_ms);
/* The bytes of log entries held in memory (baton_raft_log_bytes). */
uint64_t baton_node_log_bytes(struct baton_node *n);
/* Take a snapshot soon, to compact the log, if at least min_bytes of
 * entries were applied since the last (baton_pipeline_compact_soon). */
bool baton_node_compact_soon(struct baton_node *n, uint64_t min_bytes);

/* The stall, cheaply (for every client command): the first index this
 * node did not apply, 0 if none, and why in *why (valid until the loop
 * runs on). */
baton_index baton_node_stalled(struct baton_node *n, const char **why);

#endif /* BATON_IO_NODE_H */
