/*
 * The storage's modules and how they call each other:
 *   meta.c          term and vote, replaced atomically
 *   identity.c      whose the directory is: node id, cluster name, UUID
 *   snapshot_file.c snapshot files: streamed write, header, chunked read
 *   wal.c           log segments: recovery, group-commit batches, compaction
 *   fs_snapshot.c   the storage's application snapshot: the durable one
 *                   (reads) and the commit that replaces it
 *   snapshot_sink.c a snapshot being written: a queue, a thread that
 *                   writes, syncs as it goes and commits in the background
 *   fs_storage.c    the struct baton_storage on files: queue, writer thread
 * Errors: BATON_E* codes; the message goes into a caller's buffer.
 */
#ifndef BATON_STORAGE_INTERNAL_H
#define BATON_STORAGE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>

#include "baton/storage.h"
#include "vfs.h"

#define STORAGE_PATH_MAX 4096u
#define STORAGE_ERR_MAX 512u

/* Write "dir/name" into out (STORAGE_PATH_MAX); BATON_ETOOBIG if long. */
int baton__path(char *out, const char *dir, const char *name);

/* Format an error message into err (errlen bytes) and return code. */
int baton__errf(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A vfs error (negative errno) as BATON_EIO with "what path: strerror". */
int baton__io_err(char *err, size_t errlen, int neg_errno, const char *what,
		  const char *path);

/* ---- meta.c ---------------------------------------------------------- */

/* A missing file is term 0, no vote. */
int baton__meta_read(struct baton_vfs *v, const char *dir, baton_term *term,
		     baton_node_id *vote, char *err, size_t errlen);
int baton__meta_write(struct baton_vfs *v, const char *dir, baton_term term,
		      baton_node_id vote, char *err, size_t errlen);

/* Read dir/name, a file that is all header (at most cap bytes), into buf
 * and check its header against k; path gets its path (STORAGE_PATH_MAX)
 * for messages. A missing file: 0 with *found false. */
struct baton__file_kind;
struct baton__file_head;
int baton__small_file_read(struct baton_vfs *v, const char *dir,
			   const char *name, const struct baton__file_kind *k,
			   uint8_t *buf, size_t cap, char *path, bool *found,
			   struct baton__file_head *head, char *err,
			   size_t errlen);

/* Replace dir/name with the len bytes at b, atomically: write tmp_name,
 * fsync, rename over name, fsync the directory. A crash leaves the old
 * file or the new one. */
int baton__file_replace(struct baton_vfs *v, const char *dir,
			const char *tmp_name, const char *name,
			const uint8_t *b, size_t len, char *err, size_t errlen);

/* ---- identity.c --------------------------------------------------------- */

/* The identity file (format.h): *found false when the directory has none
 * (a new directory, or one a release before the file wrote). */
int baton__identity_read(struct baton_vfs *v, const char *dir,
			 struct baton_identity *out, bool *found, char *err,
			 size_t errlen);
int baton__identity_write(struct baton_vfs *v, const char *dir,
			  const struct baton_identity *id, char *err,
			  size_t errlen);
/* Check the directory's identity against `want` (node id and cluster
 * name), recording `want` when it has none; *have gets what the
 * directory records (its cluster UUID, if known, included). */
int baton__identity_check(struct baton_vfs *v, const char *dir,
			  const struct baton_identity *want,
			  struct baton_identity *have, char *err,
			  size_t errlen);
/* Record uuid in the identity `id` of the directory (written and synced,
 * then copied into *id): 0 also when id holds it already; BATON_ESTATE
 * when id holds another (the message names both); BATON_EINVAL when the
 * directory was opened without an identity (id->node_id 0). */
int baton__identity_set_uuid(struct baton_vfs *v, const char *dir,
			     struct baton_identity *id,
			     const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
			     char *err, size_t errlen);

/* ---- snapshot_file.c ---------------------------------------------------- */

struct baton__snap_writer;

/* Start writing `tmp_name` in dir; data follows with _write. */
int baton__snap_writer_open(struct baton_vfs *v, const char *dir,
			    const char *tmp_name,
			    const struct baton_snapshot_header *h,
			    struct baton__snap_writer **out, char *err,
			    size_t errlen);
int baton__snap_writer_write(struct baton__snap_writer *w, const void *buf,
			     size_t len, char *err, size_t errlen);
/* Header, sync, rename over `final_name`, sync the directory: _sync
 * then _publish, which a caller may also run apart (the slow sync outside
 * its lock, the rename under it). */
int baton__snap_writer_commit(struct baton__snap_writer *w,
			      const char *final_name, char *err, size_t errlen);
/* Sync the data written so far (not the header), so that the final sync
 * has little left to write. */
int baton__snap_writer_sync_data(struct baton__snap_writer *w, char *err,
				 size_t errlen);
/* Write the header and sync the temporary file. */
int baton__snap_writer_sync(struct baton__snap_writer *w, char *err,
			    size_t errlen);
/* Rename the synced temporary file over `final_name`, sync the directory. */
int baton__snap_writer_publish(struct baton__snap_writer *w,
			       const char *final_name, char *err,
			       size_t errlen);
/* Close and delete the temporary file; frees w (also after commit). */
void baton__snap_writer_free(struct baton__snap_writer *w);

/* Read and verify a snapshot file's header. *data_offset is where the
 * data starts. */
int baton__snap_read_header(struct baton_vfs *v, int fd, const char *path,
			    struct baton_snapshot_header *h,
			    uint64_t *data_offset, uint64_t *data_len,
			    uint64_t *data_checksum, char *err, size_t errlen);

/* Load `name` in dir whole (header checked, data verified). *found is
 * false when the file does not exist. */
int baton__snap_load(struct baton_vfs *v, const char *dir, const char *name,
		     uint64_t max_bytes, bool *found,
		     struct baton_snapshot_header *h, uint8_t **data,
		     size_t *len, char *err, size_t errlen);

/* ---- fs_snapshot.c ------------------------------------------------------ */

/* The file names in the storage's directory. */
#define FS_SNAP_NAME "snapshot"
#define FS_SNAP_OWN_TMP "snapshot-own.tmp"
#define FS_SNAP_INSTALL_TMP "snapshot-install.tmp"
/* A sink's queue (baton_fs_options.snapshot_queue_bytes): 32 slices of
 * the node's default 256 KiB, enough to ride out a slow write or a sync
 * of the thread, little next to the state being snapshotted. */
#define FS_SNAP_QUEUE_BYTES_DEFAULT (8ull << 20)

/* The storage's application snapshot: the durable one (what snapshot_read
 * serves, and where the writer's compaction stops), and the one sink being
 * written or committed. Embedded in the storage; `mu` guards all but the
 * fields set at init. */
struct baton__fs_snaps {
	struct baton_storage *owner; /* its errors: baton__fs_* below */
	struct baton_vfs *vfs;
	const char *dir;
	void (*notify)(void *data); /* the storage's, may be NULL */
	void *notify_data;
	pthread_mutex_t mu;
	bool has_snap;
	struct baton_snapshot_header h;
	uint64_t offset, len; /* of the data in fd */
	int fd;
	/* Bytes a sink may queue for its thread (snapshot_sink.c). */
	uint64_t queue_bytes;
	/* Begun, not yet committed, aborted or waited for. */
	struct baton_snapshot_sink *sink;
	struct baton_snapshot_sink *committing; /* started, not waited for */
};

void baton__fs_snaps_init(struct baton__fs_snaps *sn,
			  struct baton_storage *owner, struct baton_vfs *vfs,
			  const char *dir, uint64_t queue_bytes,
			  void (*notify)(void *data), void *notify_data);
/* Waits for a commit still in flight, or aborts a sink still being
 * written, and frees it (nobody may use it any more), then closes the
 * durable snapshot. */
void baton__fs_snaps_close(struct baton__fs_snaps *sn);
/* Point reads at the file now named FS_SNAP_NAME. */
int baton__fs_snaps_adopt(struct baton__fs_snaps *sn, char *err, size_t errlen);
/* The durable snapshot's index, or 0. Any thread. */
baton_index baton__fs_snaps_index(struct baton__fs_snaps *sn);
/* Make the snapshot written by w (at `index`) the durable one, unless one
 * at a higher or equal index is durable already (*skipped). Any thread:
 * the sync runs outside the lock, the check, rename and switch under it. */
int baton__fs_snaps_commit(struct baton__fs_snaps *sn,
			   struct baton__snap_writer *w, baton_index index,
			   bool *skipped, char *err, size_t errlen);

/* ---- snapshot_sink.c ---------------------------------------------------- */

/* The storage's snapshot operations (struct baton_storage_ops): a sink
 * queues what snapshot_write copies for a thread of its own, which writes
 * it, syncs it as it goes, and commits. */
int baton__fs_snapshot_begin(struct baton__fs_snaps *sn,
			     const struct baton_snapshot_header *h,
			     struct baton_snapshot_sink **out);
int baton__fs_snapshot_write(struct baton_snapshot_sink *k, const void *buf,
			     size_t len);
int baton__fs_snapshot_commit(struct baton_snapshot_sink *k);
void baton__fs_snapshot_abort(struct baton_snapshot_sink *k);
int baton__fs_snapshot_commit_start(struct baton_snapshot_sink *k);
int baton__fs_snapshot_commit_wait(struct baton_snapshot_sink *k, bool block);
int baton__fs_snapshot_read(struct baton__fs_snaps *sn, baton_index index,
			    uint64_t offset, void *buf, size_t cap,
			    size_t *n_out);

/* fs_storage.c: the storage's error state, for the above. */
void baton__fs_set_error(struct baton_storage *s, const char *msg);
/* A failed write or sync: every later write fails with BATON_EIO. */
void baton__fs_latch_failure(struct baton_storage *s, const char *msg);
/* 0, or the latched BATON_EIO. */
int baton__fs_failed(struct baton_storage *s);

/* ---- wal.c ------------------------------------------------------------ */

/* Recovery reads a segment in windows of this many bytes (wal.c's
 * read_segment says why): big enough that a read call costs little next
 * to its copy, small enough to stay in the CPU's cache. */
#define WAL_READ_WINDOW_BYTES (1u << 20)

struct baton__segment {
	uint64_t seq;
	baton_index first_index;
	baton_index max_index; /* highest entry index written in it */
	uint64_t end;	       /* where the next batch goes */
	int fd;		       /* open for the last segment only, else -1 */
};

struct baton__wal {
	struct baton_vfs *vfs;
	const char *dir;
	uint64_t segment_bytes;
	struct baton__segment *segs;
	uint32_t n_segs, cap_segs;
	uint64_t syncs, batches, bytes_written;
};

/* Scan every segment, verify it, repair a torn tail, and return the log
 * after snap_index (entries malloc'd as in struct baton_durable_state).
 * Refuses (BATON_ECORRUPT) on damage anywhere but a torn tail, touching
 * nothing. Creates the first segment when there is none. */
int baton__wal_open(struct baton__wal *w, struct baton_vfs *v, const char *dir,
		    uint64_t segment_bytes, baton_index snap_index,
		    struct baton_entry **entries, uint32_t *n_entries,
		    char *err, size_t errlen);
void baton__wal_close(struct baton__wal *w);

/* Bytes one record takes in a batch body. */
size_t baton__wal_record_len(uint32_t payload_len);
/* Encode a record at p (baton__wal_record_len bytes). */
void baton__wal_encode_entry(uint8_t *p, const struct baton_entry *e);
void baton__wal_encode_truncate(uint8_t *p, baton_index from);

/* Write one batch and make it durable with one fdatasync. `buf` holds
 * WAL_BATCH_HEADER_LEN free bytes, then body_len bytes of records, then
 * WAL_TRAILER_LEN free bytes; the header and trailer are filled here. */
int baton__wal_append(struct baton__wal *w, uint8_t *buf, size_t body_len,
		      uint32_t n_records, baton_index first_index,
		      baton_index max_index, char *err, size_t errlen);

/* Bytes the log's segments hold (their headers and batches, not the
 * preallocated space after them). */
uint64_t baton__wal_bytes(const struct baton__wal *w);

/* Delete whole segments, oldest first, whose entries are all <= upto
 * (never the one being written). */
void baton__wal_compact(struct baton__wal *w, baton_index upto);

#endif /* BATON_STORAGE_INTERNAL_H */
