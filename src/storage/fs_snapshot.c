/*
 * The application snapshot of the storage on files (fs_storage.c): the
 * durable snapshot, which snapshot_read serves and the writer thread's
 * compaction stops at; the one sink being written; and its commit, either
 * on the caller's thread (snapshot_commit) or on a thread of its own
 * (snapshot_commit_start, then snapshot_commit_wait), so that an event
 * loop never waits for the sync of a big file. Both commits run the same
 * code (commit_sink). The commit thread is not the writer thread: log
 * group commits go on while a snapshot syncs.
 *
 * Locking: mu guards the durable snapshot and the sink's bookkeeping. A
 * commit syncs its temporary file outside mu (long for a big file, and
 * neither snapshot_read nor the writer's compaction may wait for it), then
 * takes mu to check again that it is newer than the durable one, rename it
 * over that one, sync the directory and switch reads to it. So a reader
 * sees the old snapshot or the new one, whole, and the writer never
 * compacts the log past a snapshot whose name is not durable yet.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct baton_snapshot_sink {
	struct baton__fs_snaps *sn;
	struct baton__snap_writer *w;
	baton_index index;
	/* The commit in the background. */
	pthread_t thread;
	atomic_bool done; /* result is set; the thread only notifies */
	int result;
};

void baton__fs_snaps_init(struct baton__fs_snaps *sn,
			  struct baton_storage *owner, struct baton_vfs *vfs,
			  const char *dir, void (*notify)(void *data),
			  void *notify_data)
{
	memset(sn, 0, sizeof *sn);
	sn->owner = owner;
	sn->vfs = vfs;
	sn->dir = dir;
	sn->notify = notify;
	sn->notify_data = notify_data;
	sn->fd = -1;
	pthread_mutex_init(&sn->mu, NULL);
}

/* ---- the durable snapshot ------------------------------------------------ */

/* Point reads at the file now named FS_SNAP_NAME. Holds mu. */
static int adopt_locked(struct baton__fs_snaps *sn, char *err, size_t errlen)
{
	char path[STORAGE_PATH_MAX];
	baton__path(path, sn->dir, FS_SNAP_NAME);
	struct baton_vfs *v = sn->vfs;
	int fd;
	int rv = v->ops->open(v, path, 0, &fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "open", path);
	uint64_t sum, off, len;
	struct baton_snapshot_header h;
	rv = baton__snap_read_header(v, fd, path, &h, &off, &len, &sum, err,
				     errlen);
	if (rv != 0) {
		v->ops->close(v, fd);
		return rv;
	}
	if (sn->fd >= 0)
		v->ops->close(v, sn->fd);
	sn->fd = fd;
	sn->has_snap = true;
	sn->h = h;
	sn->offset = off;
	sn->len = len;
	return 0;
}

int baton__fs_snaps_adopt(struct baton__fs_snaps *sn, char *err, size_t errlen)
{
	pthread_mutex_lock(&sn->mu);
	int rv = adopt_locked(sn, err, errlen);
	pthread_mutex_unlock(&sn->mu);
	return rv;
}

baton_index baton__fs_snaps_index(struct baton__fs_snaps *sn)
{
	pthread_mutex_lock(&sn->mu);
	baton_index i = sn->has_snap ? sn->h.meta.index : 0;
	pthread_mutex_unlock(&sn->mu);
	return i;
}

/* A snapshot at `index` or above is durable. Holds mu. */
static bool superseded(const struct baton__fs_snaps *sn, baton_index index)
{
	return sn->has_snap && sn->h.meta.index >= index;
}

int baton__fs_snaps_commit(struct baton__fs_snaps *sn,
			   struct baton__snap_writer *w, baton_index index,
			   bool *skipped, char *err, size_t errlen)
{
	pthread_mutex_lock(&sn->mu);
	*skipped = superseded(sn, index);
	pthread_mutex_unlock(&sn->mu);
	if (*skipped)
		return 0;
	int rv = baton__snap_writer_sync(w, err, errlen);
	if (rv != 0)
		return rv;
	/* Another commit (an installed snapshot, on the writer thread) may
	 * have gone first while this one synced. */
	pthread_mutex_lock(&sn->mu);
	*skipped = superseded(sn, index);
	if (!*skipped)
		rv = baton__snap_writer_publish(w, FS_SNAP_NAME, err, errlen);
	if (!*skipped && rv == 0)
		rv = adopt_locked(sn, err, errlen);
	pthread_mutex_unlock(&sn->mu);
	return rv;
}

int baton__fs_snapshot_read(struct baton__fs_snaps *sn, baton_index index,
			    uint64_t offset, void *buf, size_t cap,
			    size_t *n_out)
{
	int rv = 0;
	char err[STORAGE_ERR_MAX];
	pthread_mutex_lock(&sn->mu);
	if (!sn->has_snap || sn->h.meta.index != index) {
		rv = BATON_ENOTFOUND;
		snprintf(err, sizeof err,
			 "snapshot at %" PRIu64 " is no longer the durable one",
			 index);
	} else {
		uint64_t left = offset >= sn->len ? 0 : sn->len - offset;
		size_t want = left < cap ? (size_t)left : cap;
		*n_out = 0;
		struct baton_vfs *v = sn->vfs;
		int e = want == 0 ? 0
				  : v->ops->pread(v, sn->fd, buf, want,
						  sn->offset + offset, n_out);
		if (e != 0)
			rv = baton__io_err(err, sizeof err, e, "read",
					   "snapshot");
	}
	pthread_mutex_unlock(&sn->mu);
	if (rv != 0)
		baton__fs_set_error(sn->owner, err);
	return rv;
}

/* ---- the sink ------------------------------------------------------------ */

int baton__fs_snapshot_begin(struct baton__fs_snaps *sn,
			     const struct baton_snapshot_header *h,
			     struct baton_snapshot_sink **out)
{
	int failed = baton__fs_failed(sn->owner);
	if (failed)
		return failed;
	pthread_mutex_lock(&sn->mu);
	bool busy = sn->sink_open;
	sn->sink_open = true;
	pthread_mutex_unlock(&sn->mu);
	if (busy) {
		baton__fs_set_error(sn->owner,
				    "snapshot_begin: another snapshot is being "
				    "written or committed");
		return BATON_EBUSY;
	}
	char err[STORAGE_ERR_MAX];
	struct baton_snapshot_sink *k = calloc(1, sizeof *k);
	int rv = k == NULL ? BATON_ENOMEM
			   : baton__snap_writer_open(sn->vfs, sn->dir,
						     FS_SNAP_OWN_TMP, h, &k->w,
						     err, sizeof err);
	if (rv != 0) {
		baton__fs_set_error(sn->owner,
				    k == NULL ? "out of memory" : err);
		free(k);
		pthread_mutex_lock(&sn->mu);
		sn->sink_open = false;
		pthread_mutex_unlock(&sn->mu);
		return rv;
	}
	k->sn = sn;
	k->index = h->meta.index;
	*out = k;
	return 0;
}

int baton__fs_snapshot_write(struct baton_snapshot_sink *k, const void *buf,
			     size_t len)
{
	char err[STORAGE_ERR_MAX];
	int rv = baton__snap_writer_write(k->w, buf, len, err, sizeof err);
	if (rv == BATON_EIO)
		baton__fs_latch_failure(k->sn->owner, err);
	else if (rv != 0)
		baton__fs_set_error(k->sn->owner, err);
	return rv;
}

static void sink_free(struct baton_snapshot_sink *k)
{
	struct baton__fs_snaps *sn = k->sn;
	baton__snap_writer_free(k->w);
	pthread_mutex_lock(&sn->mu);
	sn->sink_open = false;
	if (sn->committing == k)
		sn->committing = NULL;
	pthread_mutex_unlock(&sn->mu);
	free(k);
}

void baton__fs_snapshot_abort(struct baton_snapshot_sink *k)
{
	sink_free(k);
}

/* The commit, on whichever thread: durable, refused or failed (a failed
 * write or sync stops the storage's writes, as in the log). */
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
	if (rv == BATON_EIO)
		baton__fs_latch_failure(owner, err);
	else if (rv != 0)
		baton__fs_set_error(owner, err);
	return rv;
}

int baton__fs_snapshot_commit(struct baton_snapshot_sink *k)
{
	int rv = commit_sink(k);
	sink_free(k);
	return rv;
}

static void *commit_main(void *arg)
{
	struct baton_snapshot_sink *k = arg;
	struct baton__fs_snaps *sn = k->sn;
	k->result = commit_sink(k);
	atomic_store(&k->done, true);
	/* As the writer does for completions; k may be waited for (and
	 * freed by the join's caller) only after this thread ends. */
	if (sn->notify != NULL)
		sn->notify(sn->notify_data);
	return NULL;
}

int baton__fs_snapshot_commit_start(struct baton_snapshot_sink *k)
{
	struct baton__fs_snaps *sn = k->sn;
	atomic_init(&k->done, false);
	pthread_mutex_lock(&sn->mu);
	sn->committing = k;
	pthread_mutex_unlock(&sn->mu);
	if (pthread_create(&k->thread, NULL, commit_main, k) != 0) {
		baton__fs_set_error(sn->owner,
				    "snapshot_commit_start: cannot start the "
				    "commit thread");
		sink_free(k);
		return BATON_ENOMEM;
	}
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

void baton__fs_snaps_close(struct baton__fs_snaps *sn)
{
	pthread_mutex_lock(&sn->mu);
	struct baton_snapshot_sink *k = sn->committing;
	pthread_mutex_unlock(&sn->mu);
	if (k != NULL)
		baton__fs_snapshot_commit_wait(k, true);
	if (sn->fd >= 0)
		sn->vfs->ops->close(sn->vfs, sn->fd);
	sn->fd = -1;
	pthread_mutex_destroy(&sn->mu);
}
