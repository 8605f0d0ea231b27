/*
 * A snapshot being written to the storage on files, off the caller's
 * thread. Writing a big snapshot from an event loop stalls it: once a lot
 * of the page cache is dirty the kernel makes each write() wait for
 * writeback (balance_dirty_pages), and a final sync of the whole file
 * holds up the log's own syncs behind it (ext4, data=ordered).
 *
 * So each sink has a thread of its own (not the log's writer thread, which
 * must never wait for snapshot I/O). snapshot_write copies the bytes into
 * the sink's queue and returns; the thread writes them through the vfs,
 * with the snapshot file's checksum as before (snapshot_file.c), and syncs
 * every SINK_SYNC_EVERY_BYTES, so dirty data never piles up and the sync at
 * the commit is small. The queue holds at most sn->queue_bytes (counting
 * the buffer being written): a write that does not fit gets BATON_EAGAIN
 * and takes nothing, and once the queue has drained to half (or a write
 * failed) the thread calls the storage's notify so the caller's loop comes
 * back and writes again.
 *
 * snapshot_commit_start hands the commit to the same thread, which drains
 * the queue, then syncs and renames (fs_snapshot.c) and notifies;
 * snapshot_commit is commit_start and a blocking wait. A write or sync
 * error on the thread is latched in the sink (later writes and the commit
 * return it) and, being BATON_EIO, stops the storage's writes as a failed
 * sync of the log does. snapshot_abort stops the thread (it finishes the
 * one write or sync it is in), drops the queue and removes the file.
 *
 * Lifetime: the caller owns the sink until commit, commit_wait or abort
 * free it; each of those joins the thread first, so the thread never
 * outlives its sink, and it calls notify only while the storage is open
 * (close ends the sink's thread before anything else of the snapshot).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* The thread syncs the data written so far once this much is unsynced.
 * Big enough that a sync costs little per byte, small enough that the
 * dirty page cache stays far below the kernel's writeback thresholds (the
 * writes then never wait for writeback), and that a sync never has much
 * to write ahead of the log's fdatasync on the same disk. */
#define SINK_SYNC_EVERY_BYTES (4u << 20)
/* After each of those syncs the thread rests SINK_REST_PER_SYNC times as
 * long as the sync took (up to SINK_REST_MAX_MS): the snapshot then has the
 * disk at most a quarter of the time, and the log's fdatasync, which a
 * disk cache flush makes wait for every write issued before it, never
 * queues behind a long run of snapshot writes. Measured on a shared VM
 * disk: without the rest, SETs waited 100-300 ms around a 132 MB snapshot
 * although the loop was free; with a rest as long as the sync, the SETs
 * around three nodes' snapshots of a 500 MB value still had a p99 of 25
 * to 390 ms, and with three times that 15 to 35 ms in five runs
 * (bench/big_value_snapshot.py; the snapshot took no longer: the loop's
 * slices, not the disk, set its pace). */
#define SINK_REST_PER_SYNC 3u
#define SINK_REST_MAX_MS 200u

/* One copied write, queued for the thread. */
struct sink_chunk {
	struct sink_chunk *next;
	size_t len;
	uint8_t data[];
};

struct baton_snapshot_sink {
	struct baton__fs_snaps *sn;
	struct baton__snap_writer *w; /* the thread's, after begin */
	baton_index index;
	pthread_t thread;
	uint64_t unsynced; /* the thread's: bytes written since its last sync */

	pthread_mutex_t mu; /* guards everything down to errmsg */
	pthread_cond_t work;
	struct sink_chunk *head, *tail;
	uint64_t queued; /* bytes queued, and those being written */
	bool refused;	 /* BATON_EAGAIN given, the notify still owed */
	bool commit;	 /* commit once the queue is drained */
	bool abort;	 /* stop after the write or sync under way */
	int error;	 /* the first failed write or sync, latched */
	char errmsg[STORAGE_ERR_MAX];

	atomic_bool done; /* the commit ended: result is set */
	int result;
};

static void notify(struct baton__fs_snaps *sn)
{
	if (sn->notify != NULL)
		sn->notify(sn->notify_data);
}

static void report(struct baton_storage *owner, int rv, const char *msg)
{
	if (rv == BATON_EIO)
		baton__fs_latch_failure(owner, msg);
	else
		baton__fs_set_error(owner, msg);
}

/* The commit, on the sink's thread: durable, refused or failed (a failed
 * sync stops the storage's writes, as in the log). */
static int commit_sink(struct baton_snapshot_sink *k)
{
	struct baton_storage *owner = k->sn->owner;
	int rv = baton__fs_failed(owner);
	if (rv != 0)
		return rv; /* the message names the first failure */
	char err[STORAGE_ERR_MAX];
	bool skipped = false;
	rv = baton__fs_snaps_commit(k->sn, k->w, k->index, &skipped, err,
				    sizeof err);
	if (rv == 0 && skipped) {
		snprintf(err, sizeof err,
			 "snapshot at %" PRIu64
			 " is not newer than the durable one",
			 k->index);
		rv = BATON_ESTATE;
	}
	if (rv != 0)
		report(owner, rv, err);
	return rv;
}

static uint64_t monotonic_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Wait `ms` (at most SINK_REST_MAX_MS), or less if an abort comes. */
static void rest(struct baton_snapshot_sink *k, uint64_t ms)
{
	if (ms > SINK_REST_MAX_MS)
		ms = SINK_REST_MAX_MS;
	if (ms == 0)
		return;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(ms / 1000u);
	until.tv_nsec += (long)(ms % 1000u) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&k->mu);
	while (!k->abort &&
	       pthread_cond_timedwait(&k->work, &k->mu, &until) == 0)
		;
	pthread_mutex_unlock(&k->mu);
}

/* Write one chunk, and sync if enough is unsynced (unless an abort came
 * meanwhile). Outside mu. */
static int write_chunk(struct baton_snapshot_sink *k,
		       const struct sink_chunk *c, char *err, size_t errlen)
{
	int rv = baton__snap_writer_write(k->w, c->data, c->len, err, errlen);
	if (rv != 0)
		return rv;
	k->unsynced += c->len;
	if (k->unsynced < SINK_SYNC_EVERY_BYTES)
		return 0;
	pthread_mutex_lock(&k->mu);
	bool aborting = k->abort;
	pthread_mutex_unlock(&k->mu);
	if (aborting)
		return 0;
	k->unsynced = 0;
	uint64_t t0 = monotonic_ms();
	rv = baton__snap_writer_sync_data(k->w, err, errlen);
	if (rv == 0)
		rest(k, SINK_REST_PER_SYNC * (monotonic_ms() - t0));
	return rv;
}

/* The written chunk leaves the queue; a failure latches and drops the
 * rest. Holds mu. Returns whether the caller is owed a notify. */
static bool chunk_done_locked(struct baton_snapshot_sink *k,
			      struct sink_chunk *c, int rv, const char *err)
{
	k->queued -= c->len;
	free(c);
	if (rv != 0 && k->error == 0) {
		k->error = rv;
		snprintf(k->errmsg, sizeof k->errmsg, "%s", err);
		while (k->head != NULL) {
			struct sink_chunk *next = k->head->next;
			k->queued -= k->head->len;
			free(k->head);
			k->head = next;
		}
		k->tail = NULL;
	}
	bool owed = k->refused &&
		    (k->queued <= k->sn->queue_bytes / 2 || k->error != 0);
	if (owed)
		k->refused = false;
	return owed;
}

static void *sink_main(void *arg)
{
	struct baton_snapshot_sink *k = arg;
	char err[STORAGE_ERR_MAX];
	pthread_mutex_lock(&k->mu);
	for (;;) {
		while (k->head == NULL && !k->commit && !k->abort)
			pthread_cond_wait(&k->work, &k->mu);
		if (k->abort) {
			pthread_mutex_unlock(&k->mu);
			return NULL;
		}
		if (k->head == NULL)
			break; /* drained, and the commit is asked for */
		struct sink_chunk *c = k->head;
		k->head = c->next;
		if (k->head == NULL)
			k->tail = NULL;
		pthread_mutex_unlock(&k->mu);
		int rv = write_chunk(k, c, err, sizeof err);
		if (rv != 0)
			report(k->sn->owner, rv, err);
		pthread_mutex_lock(&k->mu);
		if (chunk_done_locked(k, c, rv, err)) {
			pthread_mutex_unlock(&k->mu);
			notify(k->sn);
			pthread_mutex_lock(&k->mu);
		}
	}
	int error = k->error;
	pthread_mutex_unlock(&k->mu);
	/* A failed write was reported (and latched) when it happened. */
	k->result = error != 0 ? error : commit_sink(k);
	atomic_store(&k->done, true);
	/* As the writer does for completions; k may be waited for (and
	 * freed by the join's caller) only after this thread ends. */
	notify(k->sn);
	return NULL;
}

/* ---- the operations ------------------------------------------------------ */

static void sink_release(struct baton__fs_snaps *sn,
			 struct baton_snapshot_sink *k)
{
	pthread_mutex_lock(&sn->mu);
	if (sn->sink == k)
		sn->sink = NULL;
	if (sn->committing == k)
		sn->committing = NULL;
	pthread_mutex_unlock(&sn->mu);
}

/* After the thread ended (or never started). */
static void sink_free(struct baton_snapshot_sink *k)
{
	struct baton__fs_snaps *sn = k->sn;
	baton__snap_writer_free(k->w);
	while (k->head != NULL) {
		struct sink_chunk *next = k->head->next;
		free(k->head);
		k->head = next;
	}
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->work);
	/* The temporary file is gone: the next snapshot may begin. */
	sink_release(sn, k);
	free(k);
}

int baton__fs_snapshot_begin(struct baton__fs_snaps *sn,
			     const struct baton_snapshot_header *h,
			     struct baton_snapshot_sink **out)
{
	int failed = baton__fs_failed(sn->owner);
	if (failed)
		return failed;
	struct baton_snapshot_sink *k = calloc(1, sizeof *k);
	if (k == NULL) {
		baton__fs_set_error(sn->owner, "out of memory");
		return BATON_ENOMEM;
	}
	pthread_mutex_lock(&sn->mu);
	bool busy = sn->sink != NULL;
	if (!busy)
		sn->sink = k;
	pthread_mutex_unlock(&sn->mu);
	if (busy) {
		free(k);
		baton__fs_set_error(sn->owner,
				    "snapshot_begin: another snapshot is being "
				    "written or committed");
		return BATON_EBUSY;
	}
	k->sn = sn;
	k->index = h->meta.index;
	atomic_init(&k->done, false);
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->work, NULL);
	char err[STORAGE_ERR_MAX];
	int rv = baton__snap_writer_open(sn->vfs, sn->dir, FS_SNAP_OWN_TMP, h,
					 &k->w, err, sizeof err);
	if (rv == 0 && pthread_create(&k->thread, NULL, sink_main, k) != 0)
		rv = baton__errf(err, sizeof err, BATON_ENOMEM,
				 "snapshot_begin: cannot start the snapshot "
				 "writer thread");
	if (rv != 0) {
		baton__fs_set_error(sn->owner, err);
		sink_free(k);
		return rv;
	}
	*out = k;
	return 0;
}

int baton__fs_snapshot_write(struct baton_snapshot_sink *k, const void *buf,
			     size_t len)
{
	struct baton_storage *owner = k->sn->owner;
	int rv = baton__fs_failed(owner);
	if (rv != 0)
		return rv;
	pthread_mutex_lock(&k->mu);
	int error = k->error;
	char errmsg[STORAGE_ERR_MAX];
	if (error != 0)
		memcpy(errmsg, k->errmsg, sizeof errmsg);
	/* Only the thread empties the queue meanwhile: a write that fits
	 * now still fits once it is copied. */
	bool full = k->queued > 0 && k->queued + len > k->sn->queue_bytes;
	if (full && error == 0)
		k->refused = true;
	pthread_mutex_unlock(&k->mu);
	if (error != 0) {
		report(owner, error, errmsg);
		return error;
	}
	if (full)
		return BATON_EAGAIN;
	if (len == 0)
		return 0;
	struct sink_chunk *c = malloc(sizeof *c + len);
	if (c == NULL) {
		baton__fs_set_error(owner,
				    "out of memory for a snapshot write");
		return BATON_ENOMEM;
	}
	c->next = NULL;
	c->len = len;
	memcpy(c->data, buf, len);
	pthread_mutex_lock(&k->mu);
	if (k->tail != NULL)
		k->tail->next = c;
	else
		k->head = c;
	k->tail = c;
	k->queued += len;
	pthread_cond_signal(&k->work);
	pthread_mutex_unlock(&k->mu);
	return 0;
}

void baton__fs_snapshot_abort(struct baton_snapshot_sink *k)
{
	pthread_mutex_lock(&k->mu);
	k->abort = true;
	pthread_cond_signal(&k->work);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thread, NULL);
	sink_free(k);
}

int baton__fs_snapshot_commit_start(struct baton_snapshot_sink *k)
{
	struct baton__fs_snaps *sn = k->sn;
	pthread_mutex_lock(&sn->mu);
	sn->committing = k;
	pthread_mutex_unlock(&sn->mu);
	pthread_mutex_lock(&k->mu);
	k->commit = true;
	pthread_cond_signal(&k->work);
	pthread_mutex_unlock(&k->mu);
	return 0;
}

int baton__fs_snapshot_commit_wait(struct baton_snapshot_sink *k, bool block)
{
	if (!block && !atomic_load(&k->done))
		return BATON_EAGAIN;
	pthread_join(k->thread, NULL);
	int rv = k->result;
	sink_free(k);
	return rv;
}

int baton__fs_snapshot_commit(struct baton_snapshot_sink *k)
{
	baton__fs_snapshot_commit_start(k);
	return baton__fs_snapshot_commit_wait(k, true);
}
