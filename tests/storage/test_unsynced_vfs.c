/*
 * The file layer that keeps unsynced writes in memory (vfs_unsynced.c), on
 * real files in a temporary directory: what the real file holds before and
 * after a sync, what reads see, what forget() (kill -9) loses, and the
 * storage on it keeping everything it reported durable across a "kill".
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_util.h"
#include "vfs.h"

static char dir[256];
static struct baton_vfs *vfs;

static void setup(void)
{
	tmpdir_make(dir, sizeof dir);
	vfs = baton_vfs_unsynced();
}

static void teardown(void)
{
	baton_vfs_unsynced_forget();
	tmpdir_remove(dir);
}

TestSuite(unsynced_vfs, .init = setup, .fini = teardown);

static const char *path_of(const char *name)
{
	static char p[2][512];
	static int k;
	k ^= 1;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

static int open_file(const char *name, int flags)
{
	int fd = -1;
	int rv = vfs->ops->open(vfs, path_of(name), flags, &fd);
	cr_assert_eq(rv, 0, "open %s: %s", name, strerror(-rv));
	return fd;
}

static void write_at(int fd, const char *s, uint64_t offset)
{
	cr_assert_eq(vfs->ops->pwrite(vfs, fd, s, strlen(s), offset), 0);
}

/* What the real file holds, read with plain open/read, as a string with
 * '.' for zero bytes; NULL if it does not exist. */
static char *real_contents(const char *name)
{
	int fd = open(path_of(name), O_RDONLY);
	if (fd < 0) {
		cr_assert_eq(errno, ENOENT);
		return NULL;
	}
	static char buf[4096];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
		cr_assert_geq(r, 0);
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = '.';
	buf[n] = '\0';
	return buf;
}

/* What the layer reads at [offset, offset + len), as above. */
static char *layer_read(int fd, uint64_t offset, size_t len)
{
	static char buf[4096];
	cr_assert_lt(len, sizeof buf);
	memset(buf, 'X', sizeof buf);
	size_t n = 99999;
	cr_assert_eq(vfs->ops->pread(vfs, fd, buf, len, offset, &n), 0);
	cr_assert_leq(n, len);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = '.';
	buf[n] = '\0';
	return buf;
}

static uint64_t layer_size(int fd)
{
	uint64_t size = 0;
	cr_assert_eq(vfs->ops->size(vfs, fd, &size), 0);
	return size;
}

Test(unsynced_vfs, unsynced_write_reaches_only_the_layer)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "hello", 0);
	cr_assert_str_eq(real_contents("f"), "");
	cr_assert_str_eq(layer_read(fd, 0, 100), "hello");
	cr_assert_eq(layer_size(fd), 5);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, fdatasync_and_fsync_write_through)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "hello", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "hello");
	write_at(fd, " world", 5);
	cr_assert_str_eq(real_contents("f"), "hello");
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "hello world");
	cr_assert_str_eq(layer_read(fd, 0, 100), "hello world");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, forget_loses_only_unsynced_writes)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	int g = open_file("g", BATON_VFS_CREATE);
	write_at(fd, "durable", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	write_at(fd, "DU", 0);
	write_at(fd, "+more", 7);
	write_at(g, "lost", 0);
	cr_assert_str_eq(layer_read(fd, 0, 100), "DUrable+more");
	baton_vfs_unsynced_forget();
	cr_assert_str_eq(layer_read(fd, 0, 100), "durable");
	cr_assert_eq(layer_size(fd), 7);
	cr_assert_str_eq(layer_read(g, 0, 100), "");
	cr_assert_eq(layer_size(g), 0);
	/* The descriptors still work, and a sync now writes nothing old. */
	write_at(g, "new", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, g), 0);
	cr_assert_str_eq(real_contents("g"), "new");
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "durable");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, g), 0);
}

Test(unsynced_vfs, overlapping_writes_apply_in_order)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "aaaaaaaa", 0);
	write_at(fd, "bbbb", 2);
	write_at(fd, "cc", 4);
	write_at(fd, "d", 7);
	cr_assert_str_eq(layer_read(fd, 0, 100), "aabbccad");
	cr_assert_str_eq(layer_read(fd, 3, 3), "bcc");
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "aabbccad");
	/* Pending writes over synced bytes. */
	write_at(fd, "ZZ", 1);
	cr_assert_str_eq(layer_read(fd, 0, 100), "aZZbccad");
	cr_assert_str_eq(real_contents("f"), "aabbccad");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, reads_across_the_pending_end_and_holes)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "0123", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	write_at(fd, "XY", 10); /* a hole 4..9 */
	cr_assert_eq(layer_size(fd), 12);
	cr_assert_str_eq(layer_read(fd, 0, 100), "0123......XY");
	cr_assert_str_eq(layer_read(fd, 2, 3), "23.");
	cr_assert_str_eq(layer_read(fd, 5, 3), "...");
	cr_assert_str_eq(layer_read(fd, 9, 2), ".X");
	cr_assert_str_eq(layer_read(fd, 11, 5), "Y");
	cr_assert_str_eq(layer_read(fd, 12, 5), "");
	cr_assert_str_eq(layer_read(fd, 50, 5), "");
	/* A pending write across the real end. */
	write_at(fd, "ab", 3);
	cr_assert_str_eq(layer_read(fd, 0, 6), "012ab.");
	cr_assert_eq(layer_size(fd), 12);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "012ab.....XY");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, size_is_the_larger_of_real_and_pending)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	cr_assert_eq(layer_size(fd), 0);
	cr_assert_eq(vfs->ops->allocate(vfs, fd, 64), 0);
	cr_assert_eq(layer_size(fd), 64);
	write_at(fd, "x", 10);
	cr_assert_eq(layer_size(fd), 64);
	write_at(fd, "y", 99);
	cr_assert_eq(layer_size(fd), 100);
	cr_assert_str_eq(layer_read(fd, 9, 3), ".x.");
	baton_vfs_unsynced_forget();
	cr_assert_eq(layer_size(fd), 64);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, reopen_after_close_sees_pending_writes)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "cached", 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "");
	fd = open_file("f", 0);
	int other = open_file("f", 0);
	cr_assert_str_eq(layer_read(fd, 0, 100), "cached");
	cr_assert_str_eq(layer_read(other, 0, 100), "cached");
	/* A sync through either descriptor writes the file's writes. */
	write_at(fd, "C", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, other), 0);
	cr_assert_str_eq(real_contents("f"), "Cached");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, other), 0);
}

Test(unsynced_vfs, rename_carries_pending_state)
{
	int fd = open_file("a.tmp", BATON_VFS_CREATE);
	write_at(fd, "new", 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	int old = open_file("a", BATON_VFS_CREATE);
	write_at(old, "old unsynced", 0);
	cr_assert_eq(vfs->ops->close(vfs, old), 0);

	cr_assert_eq(vfs->ops->rename(vfs, path_of("a.tmp"), path_of("a")), 0);
	cr_assert_null(real_contents("a.tmp"));
	cr_assert_str_eq(real_contents("a"), "");
	fd = open_file("a", 0);
	cr_assert_str_eq(layer_read(fd, 0, 100), "new"); /* not "old ..." */
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("a"), "new");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);

	/* A new file under the old name starts empty. */
	fd = open_file("a.tmp", BATON_VFS_CREATE);
	cr_assert_eq(layer_size(fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, rename_over_an_open_file_keeps_its_descriptor)
{
	int snap = open_file("snap", BATON_VFS_CREATE);
	write_at(snap, "v1", 0);
	cr_assert_eq(vfs->ops->fsync(vfs, snap), 0);
	int tmp = open_file("snap.tmp", BATON_VFS_CREATE);
	write_at(tmp, "v2", 0);
	cr_assert_eq(
		vfs->ops->rename(vfs, path_of("snap.tmp"), path_of("snap")), 0);
	/* The old descriptor still reads the old file, the new name the
	 * new one's pending bytes. */
	cr_assert_str_eq(layer_read(snap, 0, 10), "v1");
	int fd = open_file("snap", 0);
	cr_assert_str_eq(layer_read(fd, 0, 10), "v2");
	cr_assert_str_eq(real_contents("snap"), "");
	cr_assert_eq(vfs->ops->close(vfs, snap), 0);
	cr_assert_eq(vfs->ops->close(vfs, tmp), 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, unlink_drops_pending_state)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "gone", 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->unlink(vfs, path_of("f")), 0);
	cr_assert_null(real_contents("f"));
	fd = open_file("f", BATON_VFS_CREATE);
	cr_assert_eq(layer_size(fd), 0);
	cr_assert_str_eq(layer_read(fd, 0, 100), "");
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->unlink(vfs, path_of("f")), 0);
	cr_assert_eq(vfs->ops->unlink(vfs, path_of("f")), -ENOENT);
}

Test(unsynced_vfs, unlinked_open_file_keeps_its_pending_writes)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "still here", 0);
	cr_assert_eq(vfs->ops->unlink(vfs, path_of("f")), 0);
	cr_assert_str_eq(layer_read(fd, 0, 100), "still here");
	int g = open_file("f", BATON_VFS_CREATE);
	cr_assert_eq(layer_size(g), 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, g), 0);
}

Test(unsynced_vfs, file_replaced_behind_the_layer_starts_clean)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "stale", 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	/* Another file under the name, made without the layer. */
	cr_assert_eq(unlink(path_of("f")), 0);
	int keep = open(path_of("keep"), O_CREAT | O_WRONLY, 0644);
	cr_assert_geq(keep, 0); /* so "f" cannot get the old inode back */
	int raw = open(path_of("f"), O_CREAT | O_WRONLY, 0644);
	cr_assert_geq(raw, 0);
	cr_assert_eq(write(raw, "fresh", 5), 5);
	close(raw);
	close(keep);
	fd = open_file("f", 0);
	cr_assert_str_eq(layer_read(fd, 0, 100), "fresh");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, truncate_applies_pending_writes_then_cuts)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "0123456789", 0);
	cr_assert_eq(vfs->ops->truncate(vfs, fd, 4), 0);
	cr_assert_str_eq(real_contents("f"), "0123");
	cr_assert_eq(layer_size(fd), 4);
	cr_assert_str_eq(layer_read(fd, 0, 100), "0123");
	cr_assert_eq(vfs->ops->truncate(vfs, fd, 6), 0);
	cr_assert_str_eq(layer_read(fd, 0, 100), "0123..");
	baton_vfs_unsynced_forget();
	cr_assert_str_eq(layer_read(fd, 0, 100), "0123..");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, open_with_trunc_drops_pending_writes)
{
	int fd = open_file("f", BATON_VFS_CREATE);
	write_at(fd, "synced", 0);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	write_at(fd, "pending", 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	fd = open_file("f", BATON_VFS_CREATE | BATON_VFS_TRUNC);
	cr_assert_eq(layer_size(fd), 0);
	write_at(fd, "x", 0);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	cr_assert_str_eq(real_contents("f"), "x");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
}

Test(unsynced_vfs, directory_calls_and_errors_pass_through)
{
	cr_assert_eq(vfs->ops->mkdir(vfs, path_of("sub")), 0);
	cr_assert_eq(vfs->ops->sync_dir(vfs, path_of("sub")), 0);
	int fd = open_file("sub/f", BATON_VFS_CREATE | BATON_VFS_EXCL);
	cr_assert_eq(vfs->ops->lock(vfs, fd), 0);
	int again = -1;
	cr_assert_eq(vfs->ops->open(vfs, path_of("sub/f"),
				    BATON_VFS_CREATE | BATON_VFS_EXCL, &again),
		     -EEXIST);
	cr_assert_eq(vfs->ops->open(vfs, path_of("none"), 0, &again), -ENOENT);
	char **names = NULL;
	size_t n = 0;
	cr_assert_eq(vfs->ops->list(vfs, path_of("sub"), &names, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(names[0], "f");
	free(names[0]);
	free(names);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	/* A descriptor the layer did not open is refused. */
	char b[4];
	size_t got;
	cr_assert_eq(vfs->ops->pwrite(vfs, 12345, "x", 1, 0), -EBADF);
	cr_assert_eq(vfs->ops->pread(vfs, 12345, b, 4, 0, &got), -EBADF);
	cr_assert_eq(vfs->ops->fdatasync(vfs, 12345), -EBADF);
	cr_assert_eq(vfs->ops->close(vfs, 12345), -EBADF);
	cr_assert_eq(vfs->ops->close(vfs, fd), -EBADF, "closed twice");
}

/* ---- two threads, as the storage's writer and the loop ------------------ */

#define BLOCK 64u
#define N_BLOCKS 200u

struct race {
	int fd;
	pthread_mutex_t mu;
	unsigned synced; /* blocks the writer has synced */
};

static void *race_writer(void *arg)
{
	struct race *r = arg;
	uint8_t b[BLOCK];
	for (unsigned i = 0; i < N_BLOCKS; i++) {
		memset(b, (int)(i % 250) + 1, sizeof b);
		int rv = vfs->ops->pwrite(vfs, r->fd, b, BLOCK / 2,
					  (uint64_t)i * BLOCK);
		if (rv == 0)
			rv = vfs->ops->pwrite(vfs, r->fd, b + BLOCK / 2,
					      BLOCK / 2,
					      (uint64_t)i * BLOCK + BLOCK / 2);
		if (rv == 0)
			rv = vfs->ops->fdatasync(vfs, r->fd);
		if (rv != 0)
			return (void *)1;
		pthread_mutex_lock(&r->mu);
		r->synced = i + 1;
		pthread_mutex_unlock(&r->mu);
	}
	return NULL;
}

Test(unsynced_vfs, reads_during_writes_and_syncs_see_whole_writes)
{
	struct race r = {.fd = open_file("f", BATON_VFS_CREATE)};
	pthread_mutex_init(&r.mu, NULL);
	int rd = open_file("f", 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, race_writer, &r), 0);
	static uint8_t buf[BLOCK * N_BLOCKS];
	for (;;) {
		pthread_mutex_lock(&r.mu);
		unsigned synced = r.synced;
		pthread_mutex_unlock(&r.mu);
		size_t n = 0;
		cr_assert_eq(vfs->ops->pread(vfs, rd, buf, sizeof buf, 0, &n),
			     0);
		cr_assert_geq(n, (size_t)synced * BLOCK);
		/* Each half block is all its byte or all zeros (not yet
		 * written), never a mix. */
		for (size_t h = 0; h * (BLOCK / 2) < n; h++) {
			uint8_t want = (uint8_t)((h / 2) % 250 + 1);
			const uint8_t *p = buf + h * (BLOCK / 2);
			bool all = true, none = true;
			for (size_t j = 0; j < BLOCK / 2; j++) {
				all = all && p[j] == want;
				none = none && p[j] == 0;
			}
			cr_assert(all || (none && h / 2 >= synced),
				  "half block %zu torn or lost", h);
		}
		if (synced == N_BLOCKS)
			break;
	}
	void *res;
	pthread_join(t, &res);
	cr_assert_null(res);
	cr_assert_eq(vfs->ops->close(vfs, rd), 0);
	cr_assert_eq(vfs->ops->close(vfs, r.fd), 0);
	pthread_mutex_destroy(&r.mu);
}

/* ---- the storage on this layer ------------------------------------------ */

static void expect_entries(struct baton_storage *s, baton_index first,
			   baton_index last, uint32_t len)
{
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.n_entries, last - first + 1, "have %u entries",
		     d.n_entries);
	for (uint32_t i = 0; i < d.n_entries; i++) {
		cr_assert_eq(d.entries[i].index, first + i);
		cr_assert(entry_intact(&d.entries[i], len), "entry %llu",
			  (unsigned long long)d.entries[i].index);
	}
	baton_durable_state_free(&d);
}

Test(unsynced_vfs, storage_keeps_what_it_reported_durable_across_a_kill)
{
	struct baton_storage *s = store_open(dir, 16384, vfs);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	cr_assert_eq(store_hard_state(s, 3, 2), 0);
	struct baton_entry *e = entries_make(1, 300, 3, 100);
	for (uint32_t i = 0; i < 300; i += 30)
		cr_assert_eq(store_append(s, 0, e + i, 30), 0);
	cr_assert_eq(store_snapshot(s, 100, 3, 5000), 0);
	entries_free(e, 300);
	/* Everything was reported durable and the writer is idle: a kill
	 * now loses nothing. Forget before close (the kill) and after it. */
	baton_vfs_unsynced_forget();
	s->ops->close(s);
	baton_vfs_unsynced_forget();

	s = store_open(dir, 16384, vfs);
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.term, 3);
	cr_assert_eq(d.vote, 2);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, 100);
	cr_assert_eq(d.snapshot_len, 5000);
	cr_assert_eq(d.n_entries, 200, "have %u entries", d.n_entries);
	for (uint32_t i = 0; i < d.n_entries; i++) {
		cr_assert_eq(d.entries[i].index, 101 + i);
		cr_assert(entry_intact(&d.entries[i], 100));
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
}

/* A layer over the unsynced one whose next fdatasync, once armed, waits
 * until released; after crash() every write and sync fails, so that the
 * storage cannot go on after the "kill". */
struct gate_vfs {
	struct baton_vfs base;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool armed, blocked, crashed;
};

static struct gate_vfs gate;

static struct baton_vfs *inner(void)
{
	return baton_vfs_unsynced();
}

static bool gate_crashed(void)
{
	pthread_mutex_lock(&gate.mu);
	bool c = gate.crashed;
	pthread_mutex_unlock(&gate.mu);
	return c;
}

static int g_open(struct baton_vfs *v, const char *path, int flags, int *fd)
{
	(void)v;
	if (flags != 0 && gate_crashed())
		return -EIO;
	return inner()->ops->open(inner(), path, flags, fd);
}

static int g_close(struct baton_vfs *v, int fd)
{
	(void)v;
	return inner()->ops->close(inner(), fd);
}

static int g_pwrite(struct baton_vfs *v, int fd, const void *buf, size_t len,
		    uint64_t offset)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->pwrite(inner(), fd, buf, len, offset);
}

static int g_pread(struct baton_vfs *v, int fd, void *buf, size_t len,
		   uint64_t offset, size_t *n_out)
{
	(void)v;
	return inner()->ops->pread(inner(), fd, buf, len, offset, n_out);
}

static int g_fdatasync(struct baton_vfs *v, int fd)
{
	(void)v;
	pthread_mutex_lock(&gate.mu);
	if (gate.armed) {
		gate.blocked = true;
		pthread_cond_broadcast(&gate.cv);
		while (gate.armed)
			pthread_cond_wait(&gate.cv, &gate.mu);
	}
	bool crashed = gate.crashed;
	pthread_mutex_unlock(&gate.mu);
	if (crashed)
		return -EIO;
	return inner()->ops->fdatasync(inner(), fd);
}

static int g_fsync(struct baton_vfs *v, int fd)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->fsync(inner(), fd);
}

static int g_truncate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->truncate(inner(), fd, len);
}

static int g_allocate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->allocate(inner(), fd, len);
}

static int g_size(struct baton_vfs *v, int fd, uint64_t *out)
{
	(void)v;
	return inner()->ops->size(inner(), fd, out);
}

static int g_rename(struct baton_vfs *v, const char *from, const char *to)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->rename(inner(), from, to);
}

static int g_unlink(struct baton_vfs *v, const char *path)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->unlink(inner(), path);
}

static int g_mkdir(struct baton_vfs *v, const char *path)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->mkdir(inner(), path);
}

static int g_sync_dir(struct baton_vfs *v, const char *path)
{
	(void)v;
	if (gate_crashed())
		return -EIO;
	return inner()->ops->sync_dir(inner(), path);
}

static int g_list(struct baton_vfs *v, const char *path, char ***names_out,
		  size_t *n_out)
{
	(void)v;
	return inner()->ops->list(inner(), path, names_out, n_out);
}

static int g_lock(struct baton_vfs *v, int fd)
{
	(void)v;
	return inner()->ops->lock(inner(), fd);
}

static const struct baton_vfs_ops gate_ops = {
	.open = g_open,
	.close = g_close,
	.pwrite = g_pwrite,
	.pread = g_pread,
	.fdatasync = g_fdatasync,
	.fsync = g_fsync,
	.truncate = g_truncate,
	.allocate = g_allocate,
	.size = g_size,
	.rename = g_rename,
	.unlink = g_unlink,
	.mkdir = g_mkdir,
	.sync_dir = g_sync_dir,
	.list = g_list,
	.lock = g_lock,
};

struct completions {
	uint64_t max_durable; /* highest seq completed with status 0 */
	uint64_t failed;      /* completions with an error */
	uint64_t seen;
};

static void on_done(void *data, uint64_t seq, int status)
{
	struct completions *c = data;
	c->seen++;
	if (status == 0) {
		cr_assert_eq(c->failed, 0, "seq %llu durable after a failure",
			     (unsigned long long)seq);
		c->max_durable = seq;
	} else {
		c->failed++;
	}
}

Test(unsynced_vfs, kill_between_write_and_sync_loses_the_batch_only)
{
	gate.base.ops = &gate_ops;
	pthread_mutex_init(&gate.mu, NULL);
	pthread_cond_init(&gate.cv, NULL);
	struct baton_storage *s = store_open(dir, 0, &gate.base);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	struct baton_entry *e = entries_make(1, 60, 1, 48);
	struct completions c = {0};
	uint64_t seq;
	for (uint32_t i = 0; i < 50; i += 10) {
		struct baton_update u = {.entries = e + i, .n_entries = 10};
		cr_assert_eq(s->ops->submit(s, &u, &seq), 0);
	}
	cr_assert_eq(baton_fs_storage_flush(s), 0);
	s->ops->poll(s, on_done, &c);
	cr_assert_eq(c.max_durable, 5);

	/* The next batch stops between its write and its sync. */
	pthread_mutex_lock(&gate.mu);
	gate.armed = true;
	pthread_mutex_unlock(&gate.mu);
	struct baton_update u = {.entries = e + 50, .n_entries = 10};
	cr_assert_eq(s->ops->submit(s, &u, &seq), 0);
	pthread_mutex_lock(&gate.mu);
	while (!gate.blocked)
		pthread_cond_wait(&gate.cv, &gate.mu);
	/* kill -9: the unsynced batch is gone and the storage stops. */
	gate.crashed = true;
	baton_vfs_unsynced_forget();
	gate.armed = false;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	cr_assert_eq(baton_fs_storage_flush(s), BATON_EIO);
	s->ops->poll(s, on_done, &c);
	cr_assert_eq(c.seen, 6);
	cr_assert_eq(c.max_durable, 5, "the lost batch was reported durable");
	s->ops->close(s);
	entries_free(e, 60);

	/* Restart: entries 1..50 (reported durable), not 51..60. */
	s = store_open(dir, 0, vfs);
	expect_entries(s, 1, 50, 48);
	s->ops->close(s);
	pthread_cond_destroy(&gate.cv);
	pthread_mutex_destroy(&gate.mu);
}
