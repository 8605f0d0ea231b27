/*
 * A file layer in memory that models what survives a power loss, for the
 * storage's crash tests (in the spirit of SQLite's test_vfs.c).
 *
 * Every file (inode) has two contents: `cached`, what reads see, and
 * `durable`, what a power loss leaves. pwrite, truncate and allocate change
 * the cached contents; fdatasync and fsync copy the cached contents (and the
 * size) of that inode to durable.
 *
 * Names work the same way: the namespace maps full, normalised path strings
 * ("dir/x") to inodes, once cached and once durable. open with CREATE,
 * rename (an atomic replace) and unlink change the cached map; sync_dir(d)
 * makes the cached entries of directory d durable, all at once. An inode
 * whose data was synced but whose name never reached a durable directory is
 * lost on power loss (the strict POSIX model; ext4 is kinder). Directories
 * themselves are durable as soon as mkdir returns (mkdir creates missing
 * parents, like mkdir -p); files can only be created in a directory that
 * mkdir made (or in "" and "/", which always exist).
 *
 * Faults, all deterministic:
 *   - fault_vfs_crash(): power loss (clean, or tearing the last unsynced
 *     write of each file);
 *   - fault_vfs_flip(): flip bits on the "disk";
 *   - fault_vfs_fail_sync_after() / fault_vfs_fail_write_after(): one sync
 *     or write fails with a chosen errno;
 *   - fault_vfs_halt() / fault_vfs_halt_after(): the machine stops (every
 *     later call fails with -EIO and changes nothing) until the crash.
 *
 * Limits, to catch bugs: files and offsets above FAULT_VFS_MAX_FILE_BYTES
 * give -EFBIG; paths above FAULT_VFS_MAX_PATH_BYTES give -ENAMETOOLONG.
 * File descriptors are never reused, so a stale one gives -EBADF.
 *
 * All calls, including the fault_vfs_* ones, are thread-safe (one mutex):
 * the storage writes from its writer thread while a test injects faults.
 */
#ifndef BATON_TESTS_FAULT_VFS_H
#define BATON_TESTS_FAULT_VFS_H

#include <stddef.h>
#include <stdint.h>

#include "vfs.h"

#define FAULT_VFS_MAX_FILE_BYTES ((uint64_t)1 << 30)
#define FAULT_VFS_MAX_PATH_BYTES 4096

struct fault_vfs__state;

struct fault_vfs {
	struct baton_vfs base; /* first: &v->base is the file layer */
	struct fault_vfs__state *state;
};

/* A new, empty file system (no files; "" and "/" exist). NULL if out of
 * memory. Free with fault_vfs_free(). */
struct fault_vfs *fault_vfs_new(void);

/* Frees everything, open files included. v may be NULL. Nobody may use
 * &v->base any more (stop the storage first). */
void fault_vfs_free(struct fault_vfs *v);

enum fault_crash_mode {
	/* Everything not synced is lost. */
	FAULT_CRASH_CLEAN = 0,
	/* As CLEAN, but for each file, of its last pwrite since its last
	 * sync a prefix reaches the durable contents: the cut is a byte
	 * position in [0, len) drawn from the seed, so at least the last byte
	 * of that write is lost (and with cut 0 all of it). A prefix past the
	 * durable end extends the durable file (a gap reads as zeros). */
	FAULT_CRASH_TEAR = 1,
};

/* Power loss and reboot. Every file descriptor becomes invalid (-EBADF),
 * locks are released, the names revert to the durable map, contents to the
 * durable contents (after tearing, in FAULT_CRASH_TEAR); inodes without a
 * durable name are gone. Armed faults (fail_sync_after, fail_write_after,
 * halt_after) are disarmed and a halted machine runs again. The same seed
 * on the same history tears the same bytes.
 *
 * The old "process" must not go on using the layer after the crash: its
 * path calls (open, rename, unlink) would act on the rebooted files. With a
 * storage running, call fault_vfs_halt() first, close the storage (its
 * calls then fail), then crash. */
void fault_vfs_crash(struct fault_vfs *v, enum fault_crash_mode mode,
		     uint64_t rng_seed);

/* XOR the byte at `offset` of the file that `path` names durably with
 * xor_mask, in the durable contents and (if the cached file is that long)
 * the cached contents. -ENOENT if path has no durable name, -EINVAL if
 * offset is not below the durable size. */
int fault_vfs_flip(struct fault_vfs *v, const char *path, uint64_t offset,
		   uint8_t xor_mask);

/* The durable size of the file that `path` names durably: what a clean
 * crash now would leave. -ENOENT if path has no durable name. */
int fault_vfs_durable_size(struct fault_vfs *v, const char *path,
			   uint64_t *size_out);

/* Read up to len bytes of those durable contents from offset; *n_out < len
 * only at the durable end. -ENOENT as above. */
int fault_vfs_read_durable(struct fault_vfs *v, const char *path,
			   uint64_t offset, void *buf, size_t len,
			   size_t *n_out);

/* The n-th next fdatasync or fsync (on any file; n >= 1) fails with
 * -errno_value, once; n = 0 disarms. Like Linux after a writeback error, the
 * failed sync drops the inode's dirty data: Linux marks the pages clean, so
 * the next sync "succeeds" without writing them and they may be evicted at
 * any time. This layer takes the worst reading: the inode's cached contents
 * revert to its durable contents (the writes since its last good sync are
 * gone from reads too) and nothing reaches the disk. */
void fault_vfs_fail_sync_after(struct fault_vfs *v, uint64_t n,
			       int errno_value);

/* The n-th next pwrite or allocate (any file; n >= 1) fails with
 * -errno_value (say ENOSPC) and writes nothing, once; n = 0 disarms. */
void fault_vfs_fail_write_after(struct fault_vfs *v, uint64_t n,
				int errno_value);

/* The machine stops: every later call fails with -EIO and changes nothing
 * (close still releases the descriptor), until fault_vfs_crash(). */
void fault_vfs_halt(struct fault_vfs *v);

/* Halt at the n-th next mutating call (n >= 1; 0 disarms): that call
 * already fails. Mutating calls are open with CREATE or TRUNC, pwrite,
 * truncate, allocate, fdatasync, fsync, rename, unlink, mkdir and sync_dir;
 * stats.mutations counts them, so a test can run a workload once and then
 * stop it before each of its mutations in turn. */
void fault_vfs_halt_after(struct fault_vfs *v, uint64_t n);

struct fault_vfs_stats {
	uint64_t syncs;		 /* fdatasync + fsync calls, failed ones too */
	uint64_t sync_failures;	 /* injected by fault_vfs_fail_sync_after */
	uint64_t sync_dirs;	 /* sync_dir calls that succeeded */
	uint64_t writes;	 /* pwrite calls that succeeded */
	uint64_t write_failures; /* injected by fault_vfs_fail_write_after */
	uint64_t bytes_written;	 /* by the successful pwrite calls */
	uint64_t mutations;	 /* mutating calls (see halt_after) */
	uint64_t crashes;
};

/* The counters since fault_vfs_new() (crashes do not reset them). */
void fault_vfs_stats(struct fault_vfs *v, struct fault_vfs_stats *out);

#endif /* BATON_TESTS_FAULT_VFS_H */
