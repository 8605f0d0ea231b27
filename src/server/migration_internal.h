/* The migration's state, shared by migration*.c only (see migration.h). */
#ifndef BATON_SERVER_MIGRATION_INTERNAL_H
#define BATON_SERVER_MIGRATION_INTERNAL_H

#include <uv.h>

#include "client.h"   /* src/relay: the node-side relay client */
#include "protocol.h" /* src/relay: BATON_RELAY_NODES_MAX */
#include "migration.h"
#include "server.h"

/* How often the migration's timer runs: it pumps the export and checks
 * the import, so it bounds the stream's added latency. */
#define MIG_TICK_MS 10u
/* The new leader asks for the export again when nothing came for this
 * long (the old leader died or changed, or the relay restarted). */
#define MIG_STALL_MS 1500u
/* The old leader says where its log is when it sent nothing else. */
#define MIG_HEAD_EVERY_MS 200u
/* Bytes of export records per CHUNK; the most chunks, and entries, sent
 * and not yet acknowledged by the importer (beyond them the stream waits:
 * the new leader's pipeline must not overflow). */
#define MIG_CHUNK_BYTES ((size_t)256 << 10)
#define MIG_WINDOW_CHUNKS 16u
#define MIG_WINDOW_ENTRIES 20000u
/* The most entries the old leader keeps for the stream (not yet
 * acknowledged): beyond it the session ends and the next starts from a
 * new snapshot. */
#define MIG_TEE_BYTES_MAX ((size_t)256 << 20)
/* Hand-off: the import is close enough to the old log (entries) ... */
#define MIG_HANDOFF_LAG_MAX 1000u
/* ... and this many voters of the new cluster hold what its leader
 * committed (the scheduler's rule, docs/relay.md). */
#define MIG_HANDOFF_VOTERS 2u
/* A new node reports ready (B1's rule) when its import lags the old log
 * by at most this many entries. */
#define MIG_READY_LAG_MAX 1000u

/* Hand-off: a new node that learned the old cluster fenced holds its
 * clients' commands (at most MIG_PARKED_MAX, each at most MIG_PARK_MS)
 * until its cluster takes authority, for MIG_HANDOFF_WAIT_MS after it
 * learned it. */
#define MIG_PARKED_MAX 100000u
#define MIG_PARK_MS 3000u
#define MIG_HANDOFF_WAIT_MS 5000u

/* Nodes of the other cluster remembered across views, and how long an
 * address that could not be reached is passed over. */
#define MIG_KNOWN_MAX 64u
#define MIG_UNREACHABLE_MS 1000u

/* One node of the relay's view, copied. */
struct mig_view_node {
	char cluster[MIG_CLUSTER_MAX + 1];
	baton_node_id id;
	uint64_t incarnation;
	struct baton_release release; /* as it registered */
	char address[SERVER_ADDR_MAX];
	bool connected;
};

/* A committed kv payload kept for the stream (old side). */
struct mig_tee {
	struct mig_tee *next;
	uint64_t index;
	size_t len;
	uint8_t payload[];
};

struct mig_export {
	bool open;
	uint64_t session;
	char to_cluster[MIG_CLUSTER_MAX + 1];
	baton_node_id to_node;
	/* The snapshot: taken at snap_index; records still being sent while
	 * snap_running. */
	uint64_t snap_index;
	bool snap_begun; /* BEGIN sent */
	bool snap_running, snap_sent;
	uint32_t chunks, chunks_acked;
	struct baton_buf chunk;
	/* Entries applied after snap_index, oldest first. */
	struct mig_tee *head, *tail;
	size_t tee_bytes;
	uint64_t sent_index; /* the last ENTRY sent (or snap_index) */
	/* The entry after sent_index when it is too long for one message:
	 * its bytes sent so far in ENTRY_PARTs. */
	uint64_t part_index;
	size_t part_sent;
	uint64_t acked; /* the importer's import index */
	/* The fence: its index once applied here (0 before). */
	uint64_t fence_index;
	bool fence_proposed;
	uint64_t last_sent_ms;
	uint64_t last_fenced_ms;
	uint64_t refused_log_ms;
	/* An authenticated AUTHORITY followed this cluster's fence; the
	 * SEAL saying so proposed, not yet applied. */
	bool authority_seen;
	bool seal_proposed;
};

/* The longest entry of the old log an import reassembles from parts:
 * what one log entry may hold (the core's max_entry_bytes default). */
#define MIG_ENTRY_BYTES_MAX ((size_t)16u << 20)

struct mig_import {
	uint64_t session;
	uint64_t progress_ms; /* the last message of the session */
	char from_cluster[MIG_CLUSTER_MAX + 1];
	baton_node_id from_node; /* the exporter */
	uint64_t old_applied;	 /* the exporter's applied index */
	uint64_t fenced_at;	 /* FENCED's F, 0 before */
	bool handoff_asked;	 /* BATON.MIGRATION HANDOFF */
	uint64_t handoff_sent_ms;
	bool authority_proposed;
	uint64_t acked_sent;
	uint64_t ack_ms;
	uint64_t authority_sent_ms;
	uint32_t proposing; /* import entries proposed, not yet applied */
	/* An entry arriving in parts (ENTRY_PART..., ENTRY): its old index
	 * and the bytes so far. */
	uint64_t part_index;
	struct baton_buf part;
	uint64_t handoff_ms, authority_ms; /* logged once */
};

struct migration {
	struct server *s;
	struct relay_client *relay;
	/* Sealing (migration_wire.c): the keys, this node's next sequence
	 * number, the opened data of the message being handled, and the
	 * senders' last sequence numbers. */
	struct migration_keys keys;
	uint64_t seq_next;
	struct baton_buf plain;
	struct migration_replay replay;
	uv_timer_t tick;
	bool active;
	uint64_t view_number;
	uint32_t n_view;
	struct mig_view_node view[BATON_RELAY_NODES_MAX];
	/* New side without --migrate-from-unsealed: the release of a node of
	 * the --migrate-from cluster that registered with a release before
	 * sealing (it cannot read this node's sealed messages, nor this node
	 * its), or none; said in the log and as migration_not_ready. */
	struct baton_release old_unsealed;
	char old_unsealed_why[1024];
	/* Old side: the new cluster told us it holds authority. */
	char authority_cluster[MIG_CLUSTER_MAX + 1];
	baton_node_id authority_leader;
	/* The other cluster's nodes of every view so far (the latest
	 * incarnation and address of each). */
	uint32_t n_known;
	struct mig_view_node known[MIG_KNOWN_MAX];
	struct mig_export ex;
	struct mig_import im;
	/* When this (new) node learned that the old cluster fenced, and that
	 * its own cluster took authority (its state may lag). */
	uint64_t handoff_seen_ms;
	uint64_t authority_seen_ms;
	struct {
		struct mig_parked *head, *tail;
		uint32_t n;
	} parked;
	bool draining;
	uint32_t closing; /* handles still closing (migration_stop) */
	struct {
		uint64_t msgs_in, msgs_out, bad_msgs, sessions, snapshots;
		uint64_t parked;
		/* Dropped: not authenticated (forged, altered, another
		 * secret), replayed, or from a cluster not named by the
		 * operator (or to a node that migrates nothing). */
		uint64_t forged, replayed, refused;
		/* Format-1 messages accepted from, and sent to, the cluster
		 * named by --migrate-from-unsealed. */
		uint64_t unsealed_in, unsealed_out;
	} stats;
};

/* migration.c */
bool mig_is_new_side(const struct migration *m);
bool mig_leads(const struct migration *m);
uint64_t mig_now(const struct migration *m);
/* Send m to one node (to_node != 0) or every node of to_cluster. */
int mig_send(struct migration *g, const char *to_cluster, baton_node_id to_node,
	     const struct migration_msg *msg);
/* Does the view hold a connected node of `cluster`, this one aside? */
bool mig_cluster_in_view(const struct migration *g, const char *cluster);
/* Does this node speak the unsealed format 1 with `cluster` (it is the
 * --migrate-from cluster and --migrate-from-unsealed was given)? */
bool mig_unsealed_with(const struct migration *g, const char *cluster);
/* The kv migration state of this node's map. */
void mig_kv_state(const struct migration *g, struct kv_migration *out);

/* migration_serve.c */
struct mig_parked;
void mig_serve_tick(struct migration *g);
void mig_serve_close(struct migration *g);

/* migration_export.c (old side) */
void mig_export_on_msg(struct migration *g, const char *from_cluster,
		       baton_node_id from_node,
		       const struct migration_msg *msg);
void mig_export_tick(struct migration *g);
void mig_export_applied(struct migration *g, uint64_t index,
			const uint8_t *payload, size_t len);
void mig_export_close(struct migration *g);
/* An authenticated AUTHORITY for this cluster's fence came: the fence
 * can no longer be lifted. */
void mig_export_authority_seen(struct migration *g);
/* Propose a CONTROL entry (kv.h): 0 or the proposal's error. */
int mig_propose_control(struct server *s, enum kv_control_op op,
			baton_node_propose_cb cb, void *data);
/* A member known to run a release that does not know the FENCE and
 * CONTROL entries (it would stop applying there): its id, or 0. */
baton_node_id mig_member_without_fence(struct server *s,
				       struct baton_release *its);

/* migration_import.c (new side) */
void mig_import_on_msg(struct migration *g, const char *from_cluster,
		       baton_node_id from_node,
		       const struct migration_msg *msg);
void mig_import_tick(struct migration *g);
/* B1's and later nodes' readiness (docs/relay.md). */
bool mig_import_ready(struct migration *g, const char **why);

#endif /* BATON_SERVER_MIGRATION_INTERNAL_H */
