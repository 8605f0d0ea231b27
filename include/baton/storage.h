/*
 * baton — durable storage of a node's Raft state.
 *
 * The core (raft.h) says in each struct baton_update what must become
 * durable; a struct baton_storage makes it so. One interface, two
 * implementations: the real one on files (baton_fs_storage_open below:
 * write-ahead log segments, group commit on a writer thread, atomic term/vote
 * file, snapshot files), and the simulator's disk in tests/sim, so the
 * simulator drives exactly the contract the server relies on.
 *
 * The contract:
 *   - load() once, before the first submit, returns what is durable;
 *   - submit() queues the persistence one update asks for (hard state,
 *     installed snapshot, truncation, entries, compaction, in that order),
 *     copying what it needs; it returns at once with a sequence number
 *     (1, 2, 3, ... per instance);
 *   - submissions become durable in submission order; poll() reports each
 *     completion, in order, on the caller's thread. Status 0 means durable;
 *     a negative BATON_E* code means it is not and never will be: after a
 *     failed sync the storage refuses every later write (BATON_EIO), because
 *     the page cache cannot be trusted after EIO;
 *   - the application's own snapshots go through snapshot_begin/write/
 *     commit (streamed, durable when commit returns); a snapshot is only
 *     ever replaced by a newer one (higher index).
 *
 * Errors are negative BATON_E* codes; errmsg() says more about the last one.
 */
#ifndef BATON_STORAGE_H
#define BATON_STORAGE_H

#include "baton/raft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a snapshot records besides the state machine's bytes: the core's
 * metadata (baton_raft_snapshot_meta), the version state in force at its
 * index included (meta.versions, meta.versions_index). snapshot_begin
 * refuses (BATON_EINVAL) metadata the core could not have made: more than
 * BATON_MAX_MEMBERS members, an invalid version state, or a config or
 * version index above meta.index. */
struct baton_snapshot_header {
	struct baton_snapshot_meta meta;
};

/* Everything durable, as found at start. Owned by the caller; release with
 * baton_durable_state_free(). Entries follow the snapshot consecutively. */
struct baton_durable_state {
	baton_term term;
	baton_node_id vote;
	bool has_snapshot;
	struct baton_snapshot_header snapshot;
	uint8_t *snapshot_data; /* malloc'd */
	size_t snapshot_len;
	struct baton_entry *entries; /* malloc'd, each buf malloc'd */
	uint32_t n_entries;
};

void baton_durable_state_free(struct baton_durable_state *s);

/* One completion: submission `seq` is durable (status 0) or failed. */
typedef void (*baton_storage_done_cb)(void *data, uint64_t seq, int status);

struct baton_storage;
struct baton_snapshot_sink; /* one snapshot being written */

struct baton_storage_ops {
	int (*load)(struct baton_storage *s, struct baton_durable_state *out);
	/* BATON_EIO once a sync failed; BATON_ENOMEM; BATON_ETOOBIG for an
	 * entry above the configured limit. */
	int (*submit)(struct baton_storage *s, const struct baton_update *u,
		      uint64_t *seq_out);
	/* Calls cb for each completion ready now, in order; returns how
	 * many. Never blocks. */
	unsigned (*poll)(struct baton_storage *s, baton_storage_done_cb cb,
			 void *data);
	/* Stream a snapshot of the application's state: begin, write any
	 * number of times, then commit (durable on return; BATON_ESTATE if a
	 * snapshot at a higher or equal index is already durable) or abort.
	 * Safe to use from another thread than submit/poll.
	 * snapshot_write may hand the bytes to a thread of the storage (it
	 * copies them) rather than write them on the caller's thread; when
	 * that thread's queue is full it returns BATON_EAGAIN having taken
	 * nothing, and the caller tries again after the storage's notify
	 * callback fired. A write error found by that thread is returned by
	 * a later write or by the commit. */
	int (*snapshot_begin)(struct baton_storage *s,
			      const struct baton_snapshot_header *h,
			      struct baton_snapshot_sink **out);
	int (*snapshot_write)(struct baton_snapshot_sink *k, const void *buf,
			      size_t len);
	int (*snapshot_commit)(struct baton_snapshot_sink *k);
	void (*snapshot_abort)(struct baton_snapshot_sink *k);
	/* The same commit, in the background (optional: both or neither;
	 * without them the node calls snapshot_commit). start returns at
	 * once: 0, or an error (k is then freed). The sync and rename run on
	 * a thread of the storage; when they end, the storage's notify
	 * callback fires (as for completions). snapshot_commit_wait then
	 * returns BATON_EAGAIN while the commit still runs (block false),
	 * else what snapshot_commit would have returned, and frees k; with
	 * block true it waits for the end first. A commit in flight when
	 * the node crashes may or may not be durable; a snapshot is never
	 * half there. */
	int (*snapshot_commit_start)(struct baton_snapshot_sink *k);
	int (*snapshot_commit_wait)(struct baton_snapshot_sink *k, bool block);
	/* Read up to cap bytes of the durable snapshot at `index`, from
	 * `offset`; *n_out is 0 at the end. BATON_ENOTFOUND if the durable
	 * snapshot is not the one at `index` any more. */
	int (*snapshot_read)(struct baton_storage *s, baton_index index,
			     uint64_t offset, void *buf, size_t cap,
			     size_t *n_out);
	/* More about the last error: a buffer of the instance, valid until
	 * the next errmsg() call; call it from one thread at a time. */
	const char *(*errmsg)(const struct baton_storage *s);
	/* Waits for queued writes, then frees everything. */
	void (*close)(struct baton_storage *s);
};

struct baton_storage {
	const struct baton_storage_ops *ops;
};

/* ------------------------------------------------------------------------ */
/* The real storage: files in one directory.                               */

struct baton_vfs; /* src/storage/vfs.h: the file layer, swappable in tests */

/* Whose a data directory is (docs/storage.md, "The identity file"): the
 * node id it was made for, the name of its cluster (--cluster-id) and,
 * once known, the cluster's UUID, drawn at random when the cluster was
 * born. */
#define BATON_CLUSTER_NAME_MAX 127u
#define BATON_CLUSTER_UUID_LEN 16u
/* "8-4-4-4-12" hex digits and the NUL. */
#define BATON_CLUSTER_UUID_STR_MAX 37u
struct baton_identity {
	baton_node_id node_id;
	char cluster_name[BATON_CLUSTER_NAME_MAX + 1];
	bool has_uuid; /* false: not known yet (no leader told it) */
	uint8_t cluster_uuid[BATON_CLUSTER_UUID_LEN];
};

/* The usual text form of a UUID, lowercase "8-4-4-4-12" hex; returns buf. */
char *baton_cluster_uuid_format(const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
				char buf[BATON_CLUSTER_UUID_STR_MAX]);

struct baton_fs_options {
	const char *dir; /* created if missing; must not be shared */
	/* A segment rolls over once it holds this much (default 64 MiB);
	 * each new segment is preallocated to this size. */
	uint64_t segment_bytes;
	/* Group commit: at most this much goes into one sync (default
	 * 8 MiB; at least one whole submission always does). */
	uint64_t max_batch_bytes;
	/* Entries above this are refused by submit (default 64 MiB). */
	uint32_t max_entry_bytes;
	/* Snapshots above this are refused by load (default 4 GiB). */
	uint64_t max_snapshot_bytes;
	/* An application snapshot's writes wait on a thread of the storage
	 * in a queue of at most this many bytes (default 8 MiB; 0 means the
	 * default): snapshot_write answers BATON_EAGAIN when its bytes would
	 * not fit, unless nothing is queued (then it takes any size). */
	uint64_t snapshot_queue_bytes;
	/* Called on the writer thread when completions are ready for poll()
	 * (e.g. uv_async_send). May be NULL: then the caller polls. */
	void (*notify)(void *data);
	void *notify_data;
	/* NULL: the operating system's files. Tests pass a faulty one. */
	struct baton_vfs *vfs;
	/* Whose the directory must be (has_uuid is ignored). NULL: not
	 * checked (tests of the log alone). Otherwise open refuses a
	 * directory recorded for another node id or cluster name
	 * (BATON_ESTATE, the message naming what it found and what it was
	 * given), and records this one in a directory without an identity
	 * file (a new one, or one from a release before the file). */
	const struct baton_identity *identity;
};

void baton_fs_options_default(struct baton_fs_options *o);

/* Open (and recover) the storage in o->dir. On failure returns a BATON_E*
 * code and writes a specific message into err (errlen bytes):
 *   BATON_ECORRUPT  damage that is not a torn tail: refuses to start and
 *                   leaves every file untouched;
 *   BATON_EVERSION  a file written by a newer format (both versions named);
 *   BATON_EIO       the file system failed;
 *   BATON_ESTATE    another process holds the directory, or it belongs
 *                   to another node or cluster (o->identity).
 * A torn tail (a batch whose write was interrupted) is repaired by cutting
 * it off: it was never reported durable. */
int baton_fs_storage_open(const struct baton_fs_options *o,
			  struct baton_storage **out, char *err, size_t errlen);

/* What the directory records of its owner (zeros when opened without
 * o->identity). */
void baton_fs_storage_identity(struct baton_storage *s,
			       struct baton_identity *out);
/* Record the cluster's UUID once it is known: 0 (written and synced, or
 * recorded already), BATON_ESTATE if the directory records another one
 * (the message names both), BATON_EIO, or BATON_EINVAL when opened
 * without an identity. Writes a small file and syncs it on the caller's
 * thread: call it once, not per request. */
int baton_fs_storage_set_cluster_uuid(
	struct baton_storage *s, const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
	char *err, size_t errlen);

/* Figures for status commands and benchmarks. */
struct baton_fs_stats {
	uint64_t syncs;	      /* fdatasync calls on the log */
	uint64_t batches;     /* group commits */
	uint64_t submissions; /* updates submitted */
	uint64_t bytes_written;
	/* Bytes the log's segments hold now (headers and batches); the
	 * files are preallocated to the segment size, so take more. */
	uint64_t wal_bytes;
	uint32_t segments;
	int failed; /* 0, or the error that stopped writes */
};
void baton_fs_storage_stats(struct baton_storage *s,
			    struct baton_fs_stats *out);
/* The log's fdatasync latencies, observed on the writer thread (lock-free;
 * one per process: batond has one storage). For the metrics endpoint. */
struct baton_histogram;
extern struct baton_histogram baton_storage_fsync_seconds;

/* Wait until everything submitted so far has completed (for shutdown,
 * tests and benchmarks; a server polls instead). Returns the latched error,
 * if any. Completions still go through poll(). */
int baton_fs_storage_flush(struct baton_storage *s);

#ifdef __cplusplus
}
#endif

#endif /* BATON_STORAGE_H */
