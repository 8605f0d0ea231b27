/*
 * The file layer under the storage. Everything the storage does to files
 * goes through these calls, so tests can swap in a layer that loses
 * unsynced writes, tears writes, flips bytes or fails a sync (as SQLite's
 * test_vfs does). Paths are absolute or relative to the process; every call
 * returns 0 or a negative errno value.
 */
#ifndef BATON_STORAGE_VFS_H
#define BATON_STORAGE_VFS_H

#include <stddef.h>
#include <stdint.h>

struct baton_vfs;

enum {
	BATON_VFS_CREATE = 1, /* create if missing */
	BATON_VFS_EXCL = 2,   /* with CREATE: fail with -EEXIST if present */
	BATON_VFS_TRUNC = 4,  /* empty it */
};

struct baton_vfs_ops {
	int (*open)(struct baton_vfs *v, const char *path, int flags,
		    int *fd_out);
	int (*close)(struct baton_vfs *v, int fd);
	/* Writes all len bytes or fails. */
	int (*pwrite)(struct baton_vfs *v, int fd, const void *buf, size_t len,
		      uint64_t offset);
	/* Reads up to len bytes; *n_out < len only at the end of the file. */
	int (*pread)(struct baton_vfs *v, int fd, void *buf, size_t len,
		     uint64_t offset, size_t *n_out);
	int (*fdatasync)(struct baton_vfs *v, int fd);
	int (*fsync)(struct baton_vfs *v, int fd);
	int (*truncate)(struct baton_vfs *v, int fd, uint64_t len);
	/* Reserve blocks up to len (the size becomes len; new bytes read as
	 * zero). -EOPNOTSUPP is not an error for callers: they go on. */
	int (*allocate)(struct baton_vfs *v, int fd, uint64_t len);
	int (*size)(struct baton_vfs *v, int fd, uint64_t *out);
	int (*rename)(struct baton_vfs *v, const char *from, const char *to);
	int (*unlink)(struct baton_vfs *v, const char *path);
	int (*mkdir)(struct baton_vfs *v, const char *path);
	/* Make the directory's entries (creates, renames, unlinks) durable. */
	int (*sync_dir)(struct baton_vfs *v, const char *path);
	/* The names in a directory (no "." or ".."); free each and the
	 * array with free(). */
	int (*list)(struct baton_vfs *v, const char *path, char ***names_out,
		    size_t *n_out);
	/* Take an exclusive advisory lock on an open file (-EWOULDBLOCK if
	 * another process has it). */
	int (*lock)(struct baton_vfs *v, int fd);
};

struct baton_vfs {
	const struct baton_vfs_ops *ops;
};

/* The operating system's files (POSIX). Static, never freed. */
struct baton_vfs *baton_vfs_posix(void);

/* FOR TESTS ONLY (vfs_unsynced.c): the OS's files, but every write stays
 * in this process's memory until its file is synced, so that kill -9 loses
 * what a power loss would. Directory changes (create, rename, unlink) still
 * reach the disk at once. Static, never freed; thread-safe. */
struct baton_vfs *baton_vfs_unsynced(void);

/* Drop every write baton_vfs_unsynced() holds (what kill -9 does), so a
 * test can crash in-process. Descriptors stay open. A killed process stops
 * at once; a test must make sure the storage does not go on either (let it
 * go idle first, or fail its next sync): a writer between a write and its
 * sync would otherwise sync nothing and report the lost data durable. */
void baton_vfs_unsynced_forget(void);

#endif /* BATON_STORAGE_VFS_H */
