/*
 * The application snapshot of the storage on files (fs_storage.c): the
 * durable snapshot, which snapshot_read serves and the writer thread's
 * compaction stops at, and the step that makes a written snapshot the
 * durable one (baton__fs_snaps_commit). The sink that writes and commits
 * a snapshot on a thread of its own is in snapshot_sink.c.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void baton__fs_snaps_init(struct baton__fs_snaps *sn,
			  struct baton_storage *owner, struct baton_vfs *vfs,
			  const char *dir, uint64_t queue_bytes,
			  void (*notify)(void *data), void *notify_data)
{
	memset(sn, 0, sizeof *sn);
	sn->owner = owner;
	sn->vfs = vfs;
	sn->dir = dir;
	sn->queue_bytes = queue_bytes;
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

void baton__fs_snaps_close(struct baton__fs_snaps *sn)
{
	pthread_mutex_lock(&sn->mu);
	struct baton_snapshot_sink *k = sn->sink;
	bool committing = k != NULL && sn->committing == k;
	pthread_mutex_unlock(&sn->mu);
	/* Nobody may use the sink after close: a commit ends, a snapshot
	 * still being written is dropped with its temporary file. */
	if (committing)
		baton__fs_snapshot_commit_wait(k, true);
	else if (k != NULL)
		baton__fs_snapshot_abort(k);
	if (sn->fd >= 0)
		sn->vfs->ops->close(sn->vfs, sn->fd);
	sn->fd = -1;
	pthread_mutex_destroy(&sn->mu);
}
