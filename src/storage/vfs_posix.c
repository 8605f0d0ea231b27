/* The file layer on the operating system's files. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vfs.h"

static int posix_open(struct baton_vfs *v, const char *path, int flags,
		      int *fd_out)
{
	(void)v;
	int oflags = O_RDWR | O_CLOEXEC;
	if (flags & BATON_VFS_CREATE)
		oflags |= O_CREAT;
	if (flags & BATON_VFS_EXCL)
		oflags |= O_EXCL;
	if (flags & BATON_VFS_TRUNC)
		oflags |= O_TRUNC;
	int fd = open(path, oflags, 0644);
	if (fd < 0)
		return -errno;
	*fd_out = fd;
	return 0;
}

static int posix_close(struct baton_vfs *v, int fd)
{
	(void)v;
	return close(fd) == 0 ? 0 : -errno;
}

static int posix_pwrite(struct baton_vfs *v, int fd, const void *buf,
			size_t len, uint64_t offset)
{
	(void)v;
	const char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)offset);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return 0;
}

static int posix_pread(struct baton_vfs *v, int fd, void *buf, size_t len,
		       uint64_t offset, size_t *n_out)
{
	(void)v;
	char *p = buf;
	size_t done = 0;
	while (done < len) {
		ssize_t n =
			pread(fd, p + done, len - done, (off_t)(offset + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*n_out = done;
	return 0;
}

static int posix_fdatasync(struct baton_vfs *v, int fd)
{
	(void)v;
	return fdatasync(fd) == 0 ? 0 : -errno;
}

static int posix_fsync(struct baton_vfs *v, int fd)
{
	(void)v;
	return fsync(fd) == 0 ? 0 : -errno;
}

static int posix_truncate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	return ftruncate(fd, (off_t)len) == 0 ? 0 : -errno;
}

static int posix_allocate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	/* posix_fallocate returns the error instead of setting errno; on a
	 * file system without the call glibc emulates it by writing. */
	int rv = posix_fallocate(fd, 0, (off_t)len);
	return -rv;
}

static int posix_size(struct baton_vfs *v, int fd, uint64_t *out)
{
	(void)v;
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	*out = (uint64_t)st.st_size;
	return 0;
}

static int posix_rename(struct baton_vfs *v, const char *from, const char *to)
{
	(void)v;
	return rename(from, to) == 0 ? 0 : -errno;
}

static int posix_unlink(struct baton_vfs *v, const char *path)
{
	(void)v;
	return unlink(path) == 0 ? 0 : -errno;
}

static int posix_mkdir(struct baton_vfs *v, const char *path)
{
	(void)v;
	if (mkdir(path, 0755) == 0 || errno == EEXIST)
		return 0;
	return -errno;
}

static int posix_sync_dir(struct baton_vfs *v, const char *path)
{
	(void)v;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rv = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return rv;
}

static int posix_list(struct baton_vfs *v, const char *path, char ***names_out,
		      size_t *n_out)
{
	(void)v;
	DIR *d = opendir(path);
	if (d == NULL)
		return -errno;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rv = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **grown = realloc(names, cap * sizeof *names);
			if (grown == NULL) {
				rv = -ENOMEM;
				break;
			}
			names = grown;
		}
		names[n] = strdup(e->d_name);
		if (names[n] == NULL) {
			rv = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (rv != 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return rv;
	}
	*names_out = names;
	*n_out = n;
	return 0;
}

static int posix_lock(struct baton_vfs *v, int fd)
{
	(void)v;
	return flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : -errno;
}

static const struct baton_vfs_ops posix_ops = {
	.open = posix_open,
	.close = posix_close,
	.pwrite = posix_pwrite,
	.pread = posix_pread,
	.fdatasync = posix_fdatasync,
	.fsync = posix_fsync,
	.truncate = posix_truncate,
	.allocate = posix_allocate,
	.size = posix_size,
	.rename = posix_rename,
	.unlink = posix_unlink,
	.mkdir = posix_mkdir,
	.sync_dir = posix_sync_dir,
	.list = posix_list,
	.lock = posix_lock,
};

static struct baton_vfs posix_vfs = {.ops = &posix_ops};

struct baton_vfs *baton_vfs_posix(void)
{
	return &posix_vfs;
}
