/*
 * A file layer that loses unsynced writes on kill -9. FOR TEST BUILDS ONLY
 * (the batond-lose-unsynced server and the storage tests); a release batond
 * never uses it.
 *
 * Why: when a process is killed, the operating system keeps the writes it
 * had not synced in the page cache and writes them out later, so kill -9
 * alone never shows whether the storage synced what it reported durable.
 * A power loss would. This layer, over the real files (baton_vfs_posix()),
 * keeps every write in this process's memory until the file is synced, so
 * that a kill loses exactly the file contents a power loss would lose.
 *
 * Contents:
 *   - pwrite does not reach the file: (offset, bytes) goes onto the file's
 *     list of pending writes;
 *   - pread sees the real file overlaid with the pending writes in order,
 *     up to size = max(real size, end of the pending writes); a hole
 *     between the real end and a pending write reads as zeros;
 *   - fdatasync and fsync first write the file's pending writes to the real
 *     file, in order, then sync it for real;
 *   - close keeps the pending writes: the page cache outlives close, so a
 *     file opened again sees them. They belong to the file, found by its
 *     path: rename moves them (replacing those of a file it replaces),
 *     unlink drops them.
 *
 * Approximations (what a kill keeps although a power loss might not):
 *   - directory entries: open with CREATE, rename, unlink and mkdir change
 *     the real file system at once, so they survive a kill without
 *     sync_dir. This layer models lost file contents, not lost names.
 *   - sizes: truncate writes the file's pending writes, then truncates the
 *     real file (so the cut applies to them as it would); open with TRUNC
 *     empties the real file and drops its pending writes; allocate goes
 *     straight to the real file. All three survive a kill unsynced.
 *   - a clean exit loses pending writes too; a storage that syncs what it
 *     needs does not notice.
 *
 * Paths are compared as strings, so a file must always be named the same
 * way (the storage builds every path as "dir/name" from one dir); renaming
 * a directory is not tracked. A file replaced behind the layer's back is
 * told apart by its device and inode at open, and its stale pending writes
 * are dropped.
 *
 * Thread-safe: the storage's writer thread writes and syncs while the event
 * loop's thread may read a snapshot. One mutex guards the table; it is held
 * across a pread (so a sync cannot move bytes from memory to the file
 * between the real read and the overlay) and while a sync writes the
 * pending bytes to the file, but not during the real fdatasync/fsync, so a
 * reader never waits for the disk.
 *
 * Memory: pending writes only pile up between syncs, and the storage syncs
 * after every batch (and a snapshot file before its rename), so nothing
 * bounds them here.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "vfs.h"

/* One write that has not reached the file. */
struct pending {
	struct pending *next;
	uint64_t offset;
	size_t len;
	uint8_t data[];
};

/* A file with pending writes or open descriptors (like an inode: it may
 * have lost its name and still be open). */
struct ufile {
	char *path; /* NULL once unlinked or replaced */
	dev_t dev;
	ino_t ino;
	struct pending *head, *tail; /* in write order */
	uint64_t pending_end;	     /* max offset + len over the list */
	uint32_t n_open;
};

static struct {
	pthread_mutex_t mu;
	struct ufile **files;
	size_t n_files, cap_files;
	struct ufile **by_fd; /* descriptor -> file, NULL if not ours */
	size_t cap_fds;
} st = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const struct baton_vfs_ops *real(void)
{
	return baton_vfs_posix()->ops;
}

/* ---- the table; the caller holds st.mu ---------------------------------- */

static struct ufile *fd_file(int fd)
{
	if (fd < 0 || (size_t)fd >= st.cap_fds)
		return NULL;
	return st.by_fd[fd];
}

static struct ufile *path_file(const char *path)
{
	for (size_t i = 0; i < st.n_files; i++)
		if (st.files[i]->path != NULL &&
		    strcmp(st.files[i]->path, path) == 0)
			return st.files[i];
	return NULL;
}

static void drop_pending(struct ufile *f)
{
	while (f->head != NULL) {
		struct pending *p = f->head;
		f->head = p->next;
		free(p);
	}
	f->tail = NULL;
	f->pending_end = 0;
}

/* Free f once nothing can reach its pending writes any more. */
static void file_gc(struct ufile *f)
{
	if (f->n_open > 0 || (f->path != NULL && f->head != NULL))
		return;
	for (size_t i = 0; i < st.n_files; i++) {
		if (st.files[i] == f) {
			st.files[i] = st.files[--st.n_files];
			break;
		}
	}
	drop_pending(f);
	free(f->path);
	free(f);
}

/* f no longer has a name (unlinked, or replaced by another file). */
static void detach(struct ufile *f)
{
	free(f->path);
	f->path = NULL;
	file_gc(f);
}

static struct ufile *file_new(const char *path, const struct stat *sb)
{
	if (st.n_files == st.cap_files) {
		size_t cap = st.cap_files ? st.cap_files * 2 : 16;
		struct ufile **g = realloc(st.files, cap * sizeof *g);
		if (g == NULL)
			return NULL;
		st.files = g;
		st.cap_files = cap;
	}
	struct ufile *f = calloc(1, sizeof *f);
	char *copy = strdup(path);
	if (f == NULL || copy == NULL) {
		free(f);
		free(copy);
		return NULL;
	}
	f->path = copy;
	f->dev = sb->st_dev;
	f->ino = sb->st_ino;
	st.files[st.n_files++] = f;
	return f;
}

static int fd_table_fit(int fd)
{
	if ((size_t)fd < st.cap_fds)
		return 0;
	size_t cap = st.cap_fds ? st.cap_fds : 64;
	while (cap <= (size_t)fd)
		cap *= 2;
	struct ufile **g = realloc(st.by_fd, cap * sizeof *g);
	if (g == NULL)
		return -ENOMEM;
	memset(g + st.cap_fds, 0, (cap - st.cap_fds) * sizeof *g);
	st.by_fd = g;
	st.cap_fds = cap;
	return 0;
}

/* Write f's pending writes to the real file through fd, in order. On a
 * failure the ones not yet written stay pending. */
static int apply_pending(struct ufile *f, int fd)
{
	int rv = 0;
	while (f->head != NULL) {
		struct pending *p = f->head;
		rv = real()->pwrite(baton_vfs_posix(), fd, p->data, p->len,
				    p->offset);
		if (rv != 0)
			break;
		f->head = p->next;
		free(p);
	}
	if (f->head == NULL)
		f->tail = NULL;
	f->pending_end = 0;
	for (struct pending *p = f->head; p != NULL; p = p->next)
		if (p->offset + p->len > f->pending_end)
			f->pending_end = p->offset + p->len;
	return rv;
}

/* Copy the pending writes over buf, which holds [offset, offset + len). */
static void overlay(const struct ufile *f, uint8_t *buf, size_t len,
		    uint64_t offset)
{
	uint64_t end = offset + len;
	for (const struct pending *p = f->head; p != NULL; p = p->next) {
		uint64_t lo = p->offset > offset ? p->offset : offset;
		uint64_t p_end = p->offset + p->len;
		uint64_t hi = p_end < end ? p_end : end;
		if (lo < hi)
			memcpy(buf + (lo - offset), p->data + (lo - p->offset),
			       (size_t)(hi - lo));
	}
}

/* ---- the layer ---------------------------------------------------------- */

static int u_open(struct baton_vfs *v, const char *path, int flags, int *fd_out)
{
	(void)v;
	pthread_mutex_lock(&st.mu);
	int fd = -1;
	int rv = real()->open(baton_vfs_posix(), path, flags, &fd);
	bool opened = rv == 0;
	struct stat sb;
	if (rv == 0 && fstat(fd, &sb) != 0)
		rv = -errno;
	if (rv == 0)
		rv = fd_table_fit(fd);
	struct ufile *f = NULL;
	if (rv == 0) {
		f = path_file(path);
		/* Another file now has this name: the old one's pending
		 * writes can never be read under it again. */
		if (f != NULL && (f->dev != sb.st_dev || f->ino != sb.st_ino)) {
			detach(f);
			f = NULL;
		}
		if (f == NULL)
			f = file_new(path, &sb);
		else if (flags & BATON_VFS_TRUNC)
			drop_pending(f); /* the truncation cut them off */
		if (f == NULL)
			rv = -ENOMEM;
	}
	if (rv == 0) {
		f->n_open++;
		st.by_fd[fd] = f;
		*fd_out = fd;
	} else if (opened) {
		real()->close(baton_vfs_posix(), fd);
	}
	pthread_mutex_unlock(&st.mu);
	return rv;
}

static int u_close(struct baton_vfs *v, int fd)
{
	(void)v;
	pthread_mutex_lock(&st.mu);
	struct ufile *f = fd_file(fd);
	if (f == NULL) {
		pthread_mutex_unlock(&st.mu);
		return -EBADF; /* not ours: never close someone else's */
	}
	int rv = real()->close(baton_vfs_posix(), fd);
	/* Whatever close returned, the descriptor is gone; the pending
	 * writes stay with the file (the page cache outlives close). */
	st.by_fd[fd] = NULL;
	f->n_open--;
	file_gc(f);
	pthread_mutex_unlock(&st.mu);
	return rv;
}

static int u_pwrite(struct baton_vfs *v, int fd, const void *buf, size_t len,
		    uint64_t offset)
{
	(void)v;
	if (offset > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - offset)
		return -EFBIG;
	/* Copy outside the lock: writes can be megabytes. */
	struct pending *p = NULL;
	if (len > 0) {
		p = malloc(sizeof *p + len);
		if (p == NULL)
			return -ENOMEM;
		p->next = NULL;
		p->offset = offset;
		p->len = len;
		memcpy(p->data, buf, len);
	}
	pthread_mutex_lock(&st.mu);
	struct ufile *f = fd_file(fd);
	int rv = f == NULL ? -EBADF : 0;
	if (rv == 0 && p != NULL) {
		if (f->tail != NULL)
			f->tail->next = p;
		else
			f->head = p;
		f->tail = p;
		if (offset + len > f->pending_end)
			f->pending_end = offset + len;
		p = NULL;
	}
	pthread_mutex_unlock(&st.mu);
	free(p);
	return rv;
}

static int u_pread(struct baton_vfs *v, int fd, void *buf, size_t len,
		   uint64_t offset, size_t *n_out)
{
	(void)v;
	pthread_mutex_lock(&st.mu);
	struct ufile *f = fd_file(fd);
	int rv = f == NULL ? -EBADF : 0;
	if (rv == 0 && f->head == NULL) {
		rv = real()->pread(baton_vfs_posix(), fd, buf, len, offset,
				   n_out);
		pthread_mutex_unlock(&st.mu);
		return rv;
	}
	uint64_t size = 0;
	if (rv == 0)
		rv = real()->size(baton_vfs_posix(), fd, &size);
	if (rv != 0) {
		pthread_mutex_unlock(&st.mu);
		return rv;
	}
	uint64_t real_size = size;
	if (f->pending_end > size)
		size = f->pending_end;
	size_t want = 0;
	if (offset < size)
		want = size - offset < len ? (size_t)(size - offset) : len;
	if (want > 0) {
		/* Zeros where neither the real file nor a pending write
		 * reaches (a hole before a write past the real end). */
		memset(buf, 0, want);
		size_t got = 0;
		if (offset < real_size)
			rv = real()->pread(baton_vfs_posix(), fd, buf, want,
					   offset, &got);
		if (rv == 0)
			overlay(f, buf, want, offset);
	}
	if (rv == 0)
		*n_out = want;
	pthread_mutex_unlock(&st.mu);
	return rv;
}

/* Pending writes to the file under the lock, the real sync outside it. */
static int sync_with(int fd, bool data_only)
{
	pthread_mutex_lock(&st.mu);
	struct ufile *f = fd_file(fd);
	int rv = f == NULL ? -EBADF : apply_pending(f, fd);
	pthread_mutex_unlock(&st.mu);
	if (rv != 0)
		return rv;
	return data_only ? real()->fdatasync(baton_vfs_posix(), fd)
			 : real()->fsync(baton_vfs_posix(), fd);
}

static int u_fdatasync(struct baton_vfs *v, int fd)
{
	(void)v;
	return sync_with(fd, true);
}

static int u_fsync(struct baton_vfs *v, int fd)
{
	(void)v;
	return sync_with(fd, false);
}

static int u_truncate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	pthread_mutex_lock(&st.mu);
	struct ufile *f = fd_file(fd);
	/* Write the pending bytes first so the cut applies to them; the
	 * truncation itself then survives a kill unsynced (see the top). */
	int rv = f == NULL ? -EBADF : apply_pending(f, fd);
	if (rv == 0)
		rv = real()->truncate(baton_vfs_posix(), fd, len);
	pthread_mutex_unlock(&st.mu);
	return rv;
}

static int u_allocate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	/* New bytes read as zeros and pending writes still lie over them,
	 * so the real call is right as it is. */
	return real()->allocate(baton_vfs_posix(), fd, len);
}

static int u_size(struct baton_vfs *v, int fd, uint64_t *out)
{
	(void)v;
	pthread_mutex_lock(&st.mu);
	struct ufile *f = fd_file(fd);
	uint64_t size = 0;
	int rv =
		f == NULL ? -EBADF : real()->size(baton_vfs_posix(), fd, &size);
	if (rv == 0)
		*out = f->pending_end > size ? f->pending_end : size;
	pthread_mutex_unlock(&st.mu);
	return rv;
}

static int u_rename(struct baton_vfs *v, const char *from, const char *to)
{
	(void)v;
	char *to_copy = strdup(to); /* before anything changes */
	if (to_copy == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&st.mu);
	int rv = real()->rename(baton_vfs_posix(), from, to);
	if (rv == 0 && strcmp(from, to) != 0) {
		struct ufile *replaced = path_file(to);
		if (replaced != NULL)
			detach(replaced);
		struct ufile *f = path_file(from);
		if (f != NULL) {
			free(f->path);
			f->path = to_copy;
			to_copy = NULL;
		}
	}
	pthread_mutex_unlock(&st.mu);
	free(to_copy);
	return rv;
}

static int u_unlink(struct baton_vfs *v, const char *path)
{
	(void)v;
	pthread_mutex_lock(&st.mu);
	int rv = real()->unlink(baton_vfs_posix(), path);
	if (rv == 0) {
		struct ufile *f = path_file(path);
		if (f != NULL)
			detach(f);
	}
	pthread_mutex_unlock(&st.mu);
	return rv;
}

static int u_mkdir(struct baton_vfs *v, const char *path)
{
	(void)v;
	return real()->mkdir(baton_vfs_posix(), path);
}

static int u_sync_dir(struct baton_vfs *v, const char *path)
{
	(void)v;
	return real()->sync_dir(baton_vfs_posix(), path);
}

static int u_list(struct baton_vfs *v, const char *path, char ***names_out,
		  size_t *n_out)
{
	(void)v;
	return real()->list(baton_vfs_posix(), path, names_out, n_out);
}

static int u_lock(struct baton_vfs *v, int fd)
{
	(void)v;
	return real()->lock(baton_vfs_posix(), fd);
}

static const struct baton_vfs_ops unsynced_ops = {
	.open = u_open,
	.close = u_close,
	.pwrite = u_pwrite,
	.pread = u_pread,
	.fdatasync = u_fdatasync,
	.fsync = u_fsync,
	.truncate = u_truncate,
	.allocate = u_allocate,
	.size = u_size,
	.rename = u_rename,
	.unlink = u_unlink,
	.mkdir = u_mkdir,
	.sync_dir = u_sync_dir,
	.list = u_list,
	.lock = u_lock,
};

static struct baton_vfs unsynced_vfs = {.ops = &unsynced_ops};

struct baton_vfs *baton_vfs_unsynced(void)
{
	return &unsynced_vfs;
}

void baton_vfs_unsynced_forget(void)
{
	pthread_mutex_lock(&st.mu);
	/* Backwards: file_gc swaps the last file into the freed slot. */
	for (size_t i = st.n_files; i > 0; i--) {
		struct ufile *f = st.files[i - 1];
		drop_pending(f);
		file_gc(f);
	}
	pthread_mutex_unlock(&st.mu);
}
