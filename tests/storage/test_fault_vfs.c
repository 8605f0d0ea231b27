/*
 * The fault-injecting file layer (fault_vfs.c): what survives a power loss,
 * torn writes, flipped bits, failing syncs and writes, and the plain file
 * semantics (names, lists, locks, errors) the storage relies on.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault_vfs.h"

static struct fault_vfs *fv;
static struct baton_vfs *vfs;

static void setup(void)
{
	fv = fault_vfs_new();
	cr_assert_not_null(fv);
	vfs = &fv->base;
	cr_assert_eq(vfs->ops->mkdir(vfs, "d"), 0);
}

static void teardown(void)
{
	fault_vfs_free(fv);
}

TestSuite(fault_vfs, .init = setup, .fini = teardown);

static int open_file(const char *path, int flags)
{
	int fd = -1;
	int rv = vfs->ops->open(vfs, path, flags, &fd);
	cr_assert_eq(rv, 0, "open %s: %s", path, strerror(-rv));
	return fd;
}

static void write_at(int fd, const char *s, uint64_t offset)
{
	cr_assert_eq(vfs->ops->pwrite(vfs, fd, s, strlen(s), offset), 0);
}

/* A new file d/<name> holding s, its data synced and its name durable. */
static void make_durable(const char *path, const char *s)
{
	int fd = open_file(path, BATON_VFS_CREATE | BATON_VFS_TRUNC);
	write_at(fd, s, 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0);
}

/* The whole file at path as a NUL-terminated string (through open/pread);
 * NULL if it does not exist. */
static char *slurp(const char *path)
{
	int fd = -1;
	int rv = vfs->ops->open(vfs, path, 0, &fd);
	if (rv == -ENOENT)
		return NULL;
	cr_assert_eq(rv, 0);
	uint64_t size = 0;
	cr_assert_eq(vfs->ops->size(vfs, fd, &size), 0);
	char *buf = malloc((size_t)size + 1);
	size_t n = 0;
	cr_assert_eq(vfs->ops->pread(vfs, fd, buf, (size_t)size + 16, 0, &n),
		     0);
	cr_assert_eq(n, size);
	buf[n] = '\0';
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	return buf;
}

static void expect_file(const char *path, const char *want)
{
	char *got = slurp(path);
	cr_assert_not_null(got, "%s is missing", path);
	cr_assert_str_eq(got, want, "%s", path);
	free(got);
}

static void expect_missing(const char *path)
{
	char *got = slurp(path);
	cr_assert_null(got, "%s exists: \"%s\"", path, got);
}

/* ------------------------------------------------------------------------ */
/* Power loss.                                                             */

Test(fault_vfs, unsynced_write_is_lost)
{
	make_durable("d/a", "old");
	int fd = open_file("d/a", 0);
	write_at(fd, "NEW!", 0);
	expect_file("d/a", "NEW!");
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/a", "old");
}

Test(fault_vfs, synced_write_survives)
{
	make_durable("d/a", "old");
	int fd = open_file("d/a", 0);
	write_at(fd, "NEW!", 0);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	write_at(fd, "x", 10); /* after the sync: lost */
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/a", "NEW!");
}

Test(fault_vfs, truncate_and_allocate_durable_only_after_sync)
{
	make_durable("d/a", "abcdef");
	int fd = open_file("d/a", 0);
	cr_assert_eq(vfs->ops->truncate(vfs, fd, 2), 0);
	expect_file("d/a", "ab");
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/a", "abcdef");

	/* Shrink then grow: the regrown bytes are zeros, on disk too. */
	fd = open_file("d/a", 0);
	cr_assert_eq(vfs->ops->truncate(vfs, fd, 1), 0);
	cr_assert_eq(vfs->ops->allocate(vfs, fd, 8), 0);
	cr_assert_eq(vfs->ops->allocate(vfs, fd, 4), 0, "never shrinks");
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	char buf[16];
	size_t n = 0;
	cr_assert_eq(fault_vfs_read_durable(fv, "d/a", 0, buf, sizeof buf, &n),
		     0);
	cr_assert_eq(n, 8);
	cr_assert_arr_eq(buf, "a\0\0\0\0\0\0\0", 8);
}

Test(fault_vfs, created_file_without_sync_dir_vanishes)
{
	int fd = open_file("d/new", BATON_VFS_CREATE);
	write_at(fd, "data", 0);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0, "data synced, name not");
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	expect_file("d/new", "data");
	uint64_t size = 0;
	cr_assert_eq(fault_vfs_durable_size(fv, "d/new", &size), -ENOENT);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_missing("d/new");

	/* The same with sync_dir survives. */
	make_durable("d/new", "data");
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/new", "data");
}

Test(fault_vfs, sync_dir_covers_only_its_directory)
{
	cr_assert_eq(vfs->ops->mkdir(vfs, "e"), 0);
	int fd1 = open_file("d/x", BATON_VFS_CREATE);
	int fd2 = open_file("e/x", BATON_VFS_CREATE);
	cr_assert_neq(fd1, fd2);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/x", "");
	expect_missing("e/x");
}

Test(fault_vfs, rename_is_atomic_and_durable_after_sync_dir)
{
	make_durable("d/f", "old");
	int fd = open_file("d/f.tmp", BATON_VFS_CREATE | BATON_VFS_EXCL);
	write_at(fd, "new", 0);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->rename(vfs, "d/f.tmp", "d/f"), 0);
	expect_file("d/f", "new");
	expect_missing("d/f.tmp");

	/* Crash before sync_dir: the old name and contents. */
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/f", "old");
	expect_missing("d/f.tmp");

	/* Again, with sync_dir: the new contents, and never both names. */
	fd = open_file("d/f.tmp", BATON_VFS_CREATE | BATON_VFS_EXCL);
	write_at(fd, "new", 0);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0, "f.tmp durable");
	cr_assert_eq(vfs->ops->rename(vfs, "d/f.tmp", "d/f"), 0);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/f", "old");
	expect_file("d/f.tmp", "new");
	cr_assert_eq(vfs->ops->rename(vfs, "d/f.tmp", "d/f"), 0);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/f", "new");
	expect_missing("d/f.tmp");
}

Test(fault_vfs, unlink_is_durable_after_sync_dir)
{
	make_durable("d/a", "keep");
	cr_assert_eq(vfs->ops->unlink(vfs, "d/a"), 0);
	expect_missing("d/a");
	cr_assert_eq(vfs->ops->unlink(vfs, "d/a"), -ENOENT);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/a", "keep");
	cr_assert_eq(vfs->ops->unlink(vfs, "d/a"), 0);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_missing("d/a");
}

Test(fault_vfs, open_unlinked_file_keeps_its_data_until_crash)
{
	make_durable("d/a", "abc");
	int fd = open_file("d/a", 0);
	cr_assert_eq(vfs->ops->unlink(vfs, "d/a"), 0);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0);
	write_at(fd, "xyz", 3);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	char buf[8];
	size_t n = 0;
	cr_assert_eq(vfs->ops->pread(vfs, fd, buf, sizeof buf, 0, &n), 0);
	cr_assert_eq(n, 6);
	cr_assert_arr_eq(buf, "abcxyz", 6);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_missing("d/a");
	cr_assert_eq(vfs->ops->pread(vfs, fd, buf, sizeof buf, 0, &n), -EBADF,
		     "descriptors die with the crash");
}

/* ------------------------------------------------------------------------ */
/* Torn writes.                                                            */

#define TEAR_BASE 200
#define TEAR_OFF 10
#define TEAR_LEN 100

/* Durable "A"*200; then unsynced: a write at 150, and last 100 bytes of
 * 'a'..'z' at 10. After a torn crash, returns the length of the prefix of
 * the last write that survived, checking that everything else is 'A'. */
static size_t tear_once(uint64_t seed)
{
	char base[TEAR_BASE + 1];
	memset(base, 'A', TEAR_BASE);
	base[TEAR_BASE] = '\0';
	make_durable("d/t", base);
	int fd = open_file("d/t", 0);
	write_at(fd, "EARLIER", 150);
	char last[TEAR_LEN + 1];
	for (size_t i = 0; i < TEAR_LEN; i++)
		last[i] = (char)('a' + i % 26);
	last[TEAR_LEN] = '\0';
	write_at(fd, last, TEAR_OFF);
	fault_vfs_crash(fv, FAULT_CRASH_TEAR, seed);

	char got[TEAR_BASE + 16];
	size_t n = 0;
	cr_assert_eq(fault_vfs_read_durable(fv, "d/t", 0, got, sizeof got, &n),
		     0);
	cr_assert_eq(n, TEAR_BASE, "size unchanged");
	size_t k = 0;
	while (k < TEAR_LEN && got[TEAR_OFF + k] == last[k])
		k++;
	cr_assert_lt(k, TEAR_LEN, "seed %llu: the whole write survived",
		     (unsigned long long)seed);
	for (size_t i = 0; i < TEAR_BASE; i++) {
		if (i >= TEAR_OFF && i < TEAR_OFF + k)
			continue;
		cr_assert_eq(got[i], 'A', "seed %llu: byte %zu is '%c'",
			     (unsigned long long)seed, i, got[i]);
	}
	return k;
}

Test(fault_vfs, torn_write_keeps_a_prefix_of_the_last_write)
{
	size_t seen[TEAR_LEN] = {0};
	size_t distinct = 0;
	for (uint64_t seed = 1; seed <= 64; seed++) {
		size_t k = tear_once(seed);
		if (seen[k]++ == 0)
			distinct++;
		/* Reads after the reboot see the torn contents. */
		char *s = slurp("d/t");
		cr_assert_eq(strlen(s), TEAR_BASE);
		cr_assert_eq(memcmp(s + TEAR_OFF, "abcdefghijklmnopqrstuvwxyz",
				    k < 26 ? k : 26),
			     0);
		free(s);
	}
	cr_assert_gt(distinct, 20, "cuts vary with the seed (%zu)", distinct);
}

Test(fault_vfs, torn_write_same_seed_same_cut)
{
	size_t k1 = tear_once(42);
	size_t k2 = tear_once(42);
	cr_assert_eq(k1, k2);
}

/* A short write shows both outcomes, and never lands whole. */
Test(fault_vfs, torn_short_write_never_lands_whole)
{
	int outcomes[2] = {0, 0};
	for (uint64_t seed = 0; seed < 200; seed++) {
		make_durable("d/t", "..");
		int fd = open_file("d/t", 0);
		write_at(fd, "ab", 0);
		fault_vfs_crash(fv, FAULT_CRASH_TEAR, seed);
		char *s = slurp("d/t");
		cr_assert_str_neq(s, "ab", "seed %llu",
				  (unsigned long long)seed);
		if (strcmp(s, "..") == 0)
			outcomes[0]++;
		else if (strcmp(s, "a.") == 0)
			outcomes[1]++;
		else
			cr_assert_fail("seed %llu: \"%s\"",
				       (unsigned long long)seed, s);
		free(s);
	}
	cr_assert_gt(outcomes[0], 0);
	cr_assert_gt(outcomes[1], 0);
}

Test(fault_vfs, torn_append_extends_the_durable_file)
{
	make_durable("d/t", "");
	int fd = open_file("d/t", 0);
	write_at(fd, "0123456789", 0);
	fault_vfs_crash(fv, FAULT_CRASH_TEAR, 7);
	uint64_t size = 99;
	cr_assert_eq(fault_vfs_durable_size(fv, "d/t", &size), 0);
	cr_assert_lt(size, 10);
	char *s = slurp("d/t");
	cr_assert_eq(strlen(s), size);
	cr_assert_eq(memcmp(s, "0123456789", (size_t)size), 0);
	free(s);
}

Test(fault_vfs, tear_spares_synced_and_unnamed_files)
{
	make_durable("d/t", "synced");
	int fd = open_file("d/t", 0);
	write_at(fd, "SYNCED", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	int fd2 = open_file("d/u", BATON_VFS_CREATE);
	write_at(fd2, "unnamed", 0);
	for (uint64_t seed = 0; seed < 16; seed++) {
		fault_vfs_crash(fv, FAULT_CRASH_TEAR, seed);
		expect_file("d/t", "SYNCED");
		expect_missing("d/u");
	}
}

/* ------------------------------------------------------------------------ */
/* Bit flips.                                                              */

Test(fault_vfs, flip_changes_exactly_one_byte)
{
	make_durable("d/a", "hello world");
	int fd = open_file("d/a", 0);
	cr_assert_eq(fault_vfs_flip(fv, "d/a", 4, 0x01), 0);
	char buf[16];
	size_t n = 0;
	cr_assert_eq(vfs->ops->pread(vfs, fd, buf, sizeof buf, 0, &n), 0);
	cr_assert_eq(n, 11);
	cr_assert_arr_eq(buf, "helln world", 11, "cached sees the flip");
	cr_assert_eq(fault_vfs_read_durable(fv, "d/a", 0, buf, sizeof buf, &n),
		     0);
	cr_assert_arr_eq(buf, "helln world", 11, "durable has it");
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/a", "helln world");

	cr_assert_eq(fault_vfs_flip(fv, "d/a", 0, 0x20), 0);
	expect_file("d/a", "Helln world");
	cr_assert_eq(fault_vfs_flip(fv, "d/a", 11, 1), -EINVAL);
	cr_assert_eq(fault_vfs_flip(fv, "d/none", 0, 1), -ENOENT);
	int fd2 = open_file("d/b", BATON_VFS_CREATE);
	write_at(fd2, "x", 0);
	cr_assert_eq(fault_vfs_flip(fv, "d/b", 0, 1), -ENOENT,
		     "not durably named");
}

/* ------------------------------------------------------------------------ */
/* Failing syncs and writes.                                               */

Test(fault_vfs, failed_sync_returns_error_and_drops_dirty_data)
{
	make_durable("d/a", "v1");
	int fd = open_file("d/a", 0);
	fault_vfs_fail_sync_after(fv, 2, EIO);
	write_at(fd, "v2", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0, "first sync is fine");
	write_at(fd, "v3+more", 0);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), -EIO);
	/* Dropped from reads and never durable. */
	expect_file("d/a", "v2");
	char buf[8];
	size_t n = 0;
	cr_assert_eq(fault_vfs_read_durable(fv, "d/a", 0, buf, sizeof buf, &n),
		     0);
	cr_assert_eq(n, 2);
	cr_assert_arr_eq(buf, "v2", 2);
	/* Once: the next sync succeeds, with nothing left to write. */
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	fault_vfs_crash(fv, FAULT_CRASH_TEAR, 3);
	expect_file("d/a", "v2");

	struct fault_vfs_stats st;
	fault_vfs_stats(fv, &st);
	cr_assert_eq(st.syncs, 4); /* make_durable's, and three */
	cr_assert_eq(st.sync_failures, 1);
}

Test(fault_vfs, failed_write_writes_nothing)
{
	make_durable("d/a", "abc");
	int fd = open_file("d/a", 0);
	fault_vfs_fail_write_after(fv, 1, ENOSPC);
	cr_assert_eq(vfs->ops->pwrite(vfs, fd, "xyz", 3, 3), -ENOSPC);
	expect_file("d/a", "abc");
	write_at(fd, "def", 3);
	expect_file("d/a", "abcdef");

	fault_vfs_fail_write_after(fv, 2, ENOSPC);
	cr_assert_eq(vfs->ops->allocate(vfs, fd, 100), 0);
	cr_assert_eq(vfs->ops->allocate(vfs, fd, 200), -ENOSPC);
	uint64_t size = 0;
	cr_assert_eq(vfs->ops->size(vfs, fd, &size), 0);
	cr_assert_eq(size, 100);

	fault_vfs_fail_write_after(fv, 1, ENOSPC);
	fault_vfs_fail_write_after(fv, 0, 0);
	write_at(fd, "g", 6);

	struct fault_vfs_stats st;
	fault_vfs_stats(fv, &st);
	cr_assert_eq(st.writes, 3);
	cr_assert_eq(st.bytes_written, 3 + 3 + 1);
	cr_assert_eq(st.write_failures, 2);
}

/* ------------------------------------------------------------------------ */
/* Halting the machine.                                                    */

Test(fault_vfs, halted_machine_changes_nothing)
{
	make_durable("d/a", "abc");
	int fd = open_file("d/a", 0);
	fault_vfs_halt(fv);
	cr_assert_eq(vfs->ops->pwrite(vfs, fd, "x", 1, 0), -EIO);
	cr_assert_eq(vfs->ops->unlink(vfs, "d/a"), -EIO);
	cr_assert_eq(vfs->ops->fsync(vfs, fd), -EIO);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0, "close still works");
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_file("d/a", "abc");
}

Test(fault_vfs, halt_after_stops_at_the_nth_mutation)
{
	struct fault_vfs_stats before, after;
	fault_vfs_stats(fv, &before);
	fault_vfs_halt_after(fv, 3);
	int fd = open_file("d/a", BATON_VFS_CREATE); /* 1 */
	write_at(fd, "abc", 0);			     /* 2 */
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), -EIO);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), -EIO);
	fault_vfs_stats(fv, &after);
	cr_assert_eq(after.mutations - before.mutations, 2);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	expect_missing("d/a");
	make_durable("d/a", "ok"); /* running again */
	expect_file("d/a", "ok");
}

/* ------------------------------------------------------------------------ */
/* Names, lists, locks and errors.                                         */

Test(fault_vfs, list_names_in_one_directory)
{
	cr_assert_eq(vfs->ops->mkdir(vfs, "d/sub"), 0);
	cr_assert_eq(vfs->ops->mkdir(vfs, "other"), 0);
	open_file("d/b", BATON_VFS_CREATE);
	open_file("d/a", BATON_VFS_CREATE);
	open_file("d/sub/deep", BATON_VFS_CREATE);
	open_file("other/c", BATON_VFS_CREATE);
	open_file("top", BATON_VFS_CREATE);
	char **names = NULL;
	size_t n = 0;
	cr_assert_eq(vfs->ops->list(vfs, "d/", &names, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(names[0], "a");
	cr_assert_str_eq(names[1], "b");
	cr_assert_str_eq(names[2], "sub");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);

	cr_assert_eq(vfs->ops->list(vfs, "d/sub", &names, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(names[0], "deep");
	free(names[0]);
	free(names);

	cr_assert_eq(vfs->ops->unlink(vfs, "d/a"), 0);
	cr_assert_eq(vfs->ops->list(vfs, "./d", &names, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(names[0], "b");
	free(names[0]);
	free(names[1]);
	free(names);

	cr_assert_eq(vfs->ops->list(vfs, "nodir", &names, &n), -ENOENT);
	cr_assert_eq(vfs->ops->list(vfs, "top", &names, &n), -ENOTDIR);
}

Test(fault_vfs, lock_once_per_file_until_close_or_crash)
{
	int fd1 = open_file("d/LOCK", BATON_VFS_CREATE);
	int fd2 = open_file("d/LOCK", 0);
	cr_assert_eq(vfs->ops->lock(vfs, fd1), 0);
	cr_assert_eq(vfs->ops->lock(vfs, fd1), 0, "again on the same fd");
	cr_assert_eq(vfs->ops->lock(vfs, fd2), -EWOULDBLOCK);
	cr_assert_eq(vfs->ops->close(vfs, fd1), 0);
	cr_assert_eq(vfs->ops->lock(vfs, fd2), 0);
	int fd3 = open_file("d/LOCK", 0);
	cr_assert_eq(vfs->ops->lock(vfs, fd3), -EWOULDBLOCK);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	int fd4 = open_file("d/LOCK", 0);
	cr_assert_eq(vfs->ops->lock(vfs, fd4), 0, "the crash released it");
	int fd5 = open_file("d/OTHER", BATON_VFS_CREATE);
	cr_assert_eq(vfs->ops->lock(vfs, fd5), 0, "locks are per file");
}

Test(fault_vfs, open_errors)
{
	int fd = -1;
	cr_assert_eq(vfs->ops->open(vfs, "d/none", 0, &fd), -ENOENT);
	cr_assert_eq(vfs->ops->open(vfs, "nodir/x", BATON_VFS_CREATE, &fd),
		     -ENOENT);
	cr_assert_eq(vfs->ops->open(vfs, "d", BATON_VFS_CREATE, &fd), -EISDIR);
	open_file("d/x", BATON_VFS_CREATE | BATON_VFS_EXCL);
	cr_assert_eq(vfs->ops->open(vfs, "d/x",
				    BATON_VFS_CREATE | BATON_VFS_EXCL, &fd),
		     -EEXIST);
	int fd2 = open_file("d//./x", BATON_VFS_CREATE); /* the same file */
	write_at(fd2, "same", 0);
	expect_file("d/x", "same");
	cr_assert_eq(vfs->ops->mkdir(vfs, "d/x"), -EEXIST);
	cr_assert_eq(vfs->ops->rename(vfs, "d/none", "d/y"), -ENOENT);
	cr_assert_eq(vfs->ops->rename(vfs, "d/x", "nodir/y"), -ENOENT);
}

Test(fault_vfs, trunc_empties_the_file)
{
	make_durable("d/a", "abc");
	int fd = open_file("d/a", BATON_VFS_TRUNC);
	uint64_t size = 9;
	cr_assert_eq(vfs->ops->size(vfs, fd, &size), 0);
	cr_assert_eq(size, 0);
	cr_assert_eq(fault_vfs_durable_size(fv, "d/a", &size), 0);
	cr_assert_eq(size, 3, "until synced");
	cr_assert_eq(vfs->ops->fsync(vfs, fd), 0);
	cr_assert_eq(fault_vfs_durable_size(fv, "d/a", &size), 0);
	cr_assert_eq(size, 0);
}

Test(fault_vfs, bad_descriptors_and_limits)
{
	char buf[4];
	size_t n = 0;
	uint64_t size = 0;
	cr_assert_eq(vfs->ops->pread(vfs, 12345, buf, 4, 0, &n), -EBADF);
	cr_assert_eq(vfs->ops->close(vfs, -1), -EBADF);
	int fd = open_file("d/a", BATON_VFS_CREATE);
	cr_assert_eq(vfs->ops->close(vfs, fd), 0);
	cr_assert_eq(vfs->ops->close(vfs, fd), -EBADF);
	cr_assert_eq(vfs->ops->size(vfs, fd, &size), -EBADF);
	fd = open_file("d/a", 0);
	uint64_t max = FAULT_VFS_MAX_FILE_BYTES;
	cr_assert_eq(vfs->ops->pwrite(vfs, fd, "x", 1, max), -EFBIG);
	cr_assert_eq(vfs->ops->pwrite(vfs, fd, "x", 1, UINT64_MAX), -EFBIG);
	cr_assert_eq(vfs->ops->truncate(vfs, fd, max + 1), -EFBIG);
	cr_assert_eq(vfs->ops->allocate(vfs, fd, max + 1), -EFBIG);
	cr_assert_eq(vfs->ops->size(vfs, fd, &size), 0);
	cr_assert_eq(size, 0);
	/* A read past the end reads nothing. */
	cr_assert_eq(vfs->ops->pread(vfs, fd, buf, 4, 1000, &n), 0);
	cr_assert_eq(n, 0);
}

Test(fault_vfs, counters)
{
	int fd = open_file("d/a", BATON_VFS_CREATE);
	write_at(fd, "hello", 0);
	write_at(fd, "!", 5);
	cr_assert_eq(vfs->ops->fdatasync(vfs, fd), 0);
	cr_assert_eq(vfs->ops->sync_dir(vfs, "d"), 0);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	struct fault_vfs_stats st;
	fault_vfs_stats(fv, &st);
	cr_assert_eq(st.writes, 2);
	cr_assert_eq(st.bytes_written, 6);
	cr_assert_eq(st.syncs, 1);
	cr_assert_eq(st.sync_dirs, 1);
	cr_assert_eq(st.crashes, 1);
	/* mkdir in setup, open, 2 writes, 2 syncs. */
	cr_assert_eq(st.mutations, 6);
}
