/*
 * The fault-injecting file layer in memory (see fault_vfs.h).
 *
 * Inodes live in one array in creation order; each counts its cached
 * names, durable names and open descriptors and is freed when all three are
 * zero. A name map is an array of (path, inode). Descriptor fd is slot
 * fd - FD_BASE of a table that only grows, so no number is ever reused.
 *
 * To keep a sync cheap, each inode keeps the hull [dirty_lo, dirty_hi) of
 * the bytes that may differ from durable: pwrite marks what it writes, a
 * shrink marks what it cuts. Growth marks nothing: the grown bytes are
 * zeros and so are the bytes a sync adds to the durable file.
 */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_vfs.h"

#define FD_BASE 100

struct content {
	uint8_t *buf;
	uint64_t size;
	uint64_t cap;
};

struct inode {
	struct content cached;
	struct content durable;
	uint64_t dirty_lo, dirty_hi; /* empty when equal */
	int lock_fd;		     /* holder of the lock, or -1 */
	uint32_t n_cached, n_durable, n_open;
	/* The last pwrite since the last sync, for FAULT_CRASH_TEAR. */
	bool has_last;
	uint64_t last_offset;
	uint8_t *last_buf;
	size_t last_len;
};

struct name {
	char *path;
	struct inode *ino;
};

struct namemap {
	struct name *v;
	size_t n, cap;
	bool durable; /* which counter of the inodes it holds */
};

struct fault_vfs__state {
	pthread_mutex_t mu;
	struct inode **inodes;
	size_t n_inodes, cap_inodes;
	struct namemap cached, durable;
	char **dirs;
	size_t n_dirs, cap_dirs;
	struct inode **fds; /* slot i is descriptor FD_BASE + i; NULL closed */
	size_t n_fds, cap_fds;
	uint64_t sync_fail_in, write_fail_in, halt_in; /* 0: disarmed */
	int sync_errno, write_errno;
	bool halted;
	struct fault_vfs_stats stats;
};

/* ------------------------------------------------------------------------ */
/* Helpers: growth, contents, paths.                                       */

/* Where failing has no way out (a crash cannot fail). */
static void must(int rv)
{
	if (rv != 0) {
		fprintf(stderr, "fault_vfs: %s\n", strerror(-rv));
		abort();
	}
}

/* The array arr (n items used, *cap held, each item bytes) with room for
 * one more: arr itself, a larger copy, or NULL if out of memory (then arr
 * is still valid). */
static void *grow(void *arr, size_t *cap, size_t n, size_t item)
{
	if (n < *cap)
		return arr;
	size_t c = *cap ? *cap * 2 : 8;
	void *q = realloc(arr, c * item);
	if (q != NULL)
		*cap = c;
	return q;
}

/* Set the size to n; bytes past the old size read as zeros. */
static int content_resize(struct content *c, uint64_t n)
{
	assert(n <= FAULT_VFS_MAX_FILE_BYTES);
	if (n > c->cap) {
		uint64_t cap = c->cap * 2 > n ? c->cap * 2 : n;
		if (cap > FAULT_VFS_MAX_FILE_BYTES)
			cap = FAULT_VFS_MAX_FILE_BYTES;
		uint8_t *b = realloc(c->buf, (size_t)cap);
		if (b == NULL)
			return -ENOMEM;
		c->buf = b;
		c->cap = cap;
	}
	if (n > c->size)
		memset(c->buf + c->size, 0, (size_t)(n - c->size));
	c->size = n;
	return 0;
}

static int content_write(struct content *c, const void *buf, size_t len,
			 uint64_t offset)
{
	if (offset + len > c->size) {
		int rv = content_resize(c, offset + len);
		if (rv != 0)
			return rv;
	}
	if (len > 0)
		memcpy(c->buf + offset, buf, len);
	return 0;
}

static size_t content_read(const struct content *c, void *buf, size_t len,
			   uint64_t offset)
{
	if (offset >= c->size)
		return 0;
	size_t n = (size_t)(c->size - offset) < len ? (size_t)(c->size - offset)
						    : len;
	memcpy(buf, c->buf + offset, n);
	return n;
}

static void content_copy(struct content *dst, const struct content *src)
{
	must(content_resize(dst, src->size));
	if (src->size > 0)
		memcpy(dst->buf, src->buf, (size_t)src->size);
}

static void mark_dirty(struct inode *ino, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return;
	if (ino->dirty_lo == ino->dirty_hi) {
		ino->dirty_lo = lo;
		ino->dirty_hi = hi;
		return;
	}
	if (lo < ino->dirty_lo)
		ino->dirty_lo = lo;
	if (hi > ino->dirty_hi)
		ino->dirty_hi = hi;
}

static void forget_last(struct inode *ino)
{
	free(ino->last_buf);
	ino->last_buf = NULL;
	ino->last_len = 0;
	ino->has_last = false;
}

/* Both contents are the same again (after a sync, a failed one, or a
 * crash). */
static void mark_clean(struct inode *ino)
{
	ino->dirty_lo = ino->dirty_hi = 0;
	forget_last(ino);
}

/* Normalise a path: no empty or "." components, no trailing '/'. "" is the
 * current directory, "/" the root. Returns a malloc'd copy in *out. */
static int normalize(const char *path, char **out)
{
	if (path == NULL)
		return -EINVAL;
	size_t len = strlen(path);
	if (len >= FAULT_VFS_MAX_PATH_BYTES)
		return -ENAMETOOLONG;
	char *s = malloc(len + 1);
	if (s == NULL)
		return -ENOMEM;
	size_t n = 0;
	if (path[0] == '/')
		s[n++] = '/';
	const char *p = path;
	while (*p != '\0') {
		while (*p == '/')
			p++;
		const char *e = p;
		while (*e != '\0' && *e != '/')
			e++;
		size_t k = (size_t)(e - p);
		if (k > 0 && !(k == 1 && p[0] == '.')) {
			if (n > 0 && s[n - 1] != '/')
				s[n++] = '/';
			memcpy(s + n, p, k);
			n += k;
		}
		p = e;
	}
	s[n] = '\0';
	*out = s;
	return 0;
}

static bool is_root(const char *d)
{
	return d[0] == '\0' || strcmp(d, "/") == 0;
}

/* Length of the parent's part of a normalised path: "a/b" -> 1 ("a"),
 * "/b" -> 1 ("/"), "b" -> 0 (""). */
static size_t parent_len(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		return 0;
	if (slash == path)
		return 1;
	return (size_t)(slash - path);
}

/* Is dir the parent of the normalised path? Then *base is its last
 * component. */
static bool in_dir(const char *path, const char *dir, const char **base)
{
	size_t pl = parent_len(path);
	if (is_root(path) || pl != strlen(dir) || strncmp(path, dir, pl) != 0)
		return false;
	*base = path + pl + (path[pl] == '/' ? 1 : 0);
	return true;
}

/* ------------------------------------------------------------------------ */
/* Inodes, names and directories. The caller holds the mutex.               */

static struct inode *inode_new(struct fault_vfs__state *s)
{
	void *arr =
		grow(s->inodes, &s->cap_inodes, s->n_inodes, sizeof *s->inodes);
	if (arr == NULL)
		return NULL;
	s->inodes = arr;
	struct inode *ino = calloc(1, sizeof *ino);
	if (ino == NULL)
		return NULL;
	ino->lock_fd = -1;
	s->inodes[s->n_inodes++] = ino;
	return ino;
}

static void inode_free(struct inode *ino)
{
	free(ino->cached.buf);
	free(ino->durable.buf);
	free(ino->last_buf);
	free(ino);
}

/* Free the inodes that nothing refers to any more (keeps the order). */
static void inodes_gc(struct fault_vfs__state *s)
{
	size_t j = 0;
	for (size_t i = 0; i < s->n_inodes; i++) {
		struct inode *ino = s->inodes[i];
		if (ino->n_cached == 0 && ino->n_durable == 0 &&
		    ino->n_open == 0)
			inode_free(ino);
		else
			s->inodes[j++] = ino;
	}
	s->n_inodes = j;
}

static void ref(struct namemap *m, struct inode *ino, int delta)
{
	uint32_t *c = m->durable ? &ino->n_durable : &ino->n_cached;
	assert(delta > 0 || *c > 0);
	*c = delta > 0 ? *c + 1 : *c - 1;
}

static struct name *map_find(struct namemap *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->v[i].path, path) == 0)
			return &m->v[i];
	return NULL;
}

/* path -> ino (ino NULL: remove path). Does not take path. */
static int map_set(struct namemap *m, const char *path, struct inode *ino)
{
	struct name *e = map_find(m, path);
	if (e != NULL) {
		ref(m, e->ino, -1);
		if (ino == NULL) {
			free(e->path);
			*e = m->v[--m->n];
			return 0;
		}
		e->ino = ino;
		ref(m, ino, +1);
		return 0;
	}
	if (ino == NULL)
		return 0;
	void *arr = grow(m->v, &m->cap, m->n, sizeof *m->v);
	if (arr == NULL)
		return -ENOMEM;
	m->v = arr;
	char *copy = strdup(path);
	if (copy == NULL)
		return -ENOMEM;
	m->v[m->n++] = (struct name){.path = copy, .ino = ino};
	ref(m, ino, +1);
	return 0;
}

static void map_clear(struct namemap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		ref(m, m->v[i].ino, -1);
		free(m->v[i].path);
	}
	m->n = 0;
}

static bool dir_exists(struct fault_vfs__state *s, const char *d)
{
	if (is_root(d))
		return true;
	for (size_t i = 0; i < s->n_dirs; i++)
		if (strcmp(s->dirs[i], d) == 0)
			return true;
	return false;
}

/* The directory of a normalised file path exists. */
static bool parent_exists(struct fault_vfs__state *s, const char *path)
{
	size_t pl = parent_len(path);
	char d[FAULT_VFS_MAX_PATH_BYTES];
	memcpy(d, path, pl);
	d[pl] = '\0';
	return dir_exists(s, d);
}

/* Room for one more descriptor. */
static int reserve_fd(struct fault_vfs__state *s)
{
	if (s->n_fds >= (size_t)(INT_MAX - FD_BASE))
		return -EMFILE;
	void *arr = grow(s->fds, &s->cap_fds, s->n_fds, sizeof *s->fds);
	if (arr == NULL)
		return -ENOMEM;
	s->fds = arr;
	return 0;
}

/* The inode of an open descriptor, or NULL. */
static struct inode *fd_inode(struct fault_vfs__state *s, int fd)
{
	if (fd < FD_BASE || (size_t)(fd - FD_BASE) >= s->n_fds)
		return NULL;
	return s->fds[fd - FD_BASE];
}

/* The gate of every call: a halted machine does nothing. Mutating calls
 * count, and may be the one that halts it. */
static int gate(struct fault_vfs__state *s, bool mutating)
{
	if (s->halted)
		return -EIO;
	if (!mutating)
		return 0;
	if (s->halt_in > 0 && --s->halt_in == 0) {
		s->halted = true;
		return -EIO;
	}
	s->stats.mutations++;
	return 0;
}

/* Is the armed fault counting down in *in due now? */
static bool fault_due(uint64_t *in)
{
	return *in > 0 && --*in == 0;
}

static struct fault_vfs__state *state_of(struct baton_vfs *v)
{
	return ((struct fault_vfs *)(void *)v)->state;
}

/* ------------------------------------------------------------------------ */
/* The operations. Each takes the mutex and calls a do_* under it.          */

static int do_open(struct fault_vfs__state *s, const char *path, int flags,
		   int *fd_out)
{
	if (flags & ~(BATON_VFS_CREATE | BATON_VFS_EXCL | BATON_VFS_TRUNC))
		return -EINVAL;
	int rv = gate(s, flags & (BATON_VFS_CREATE | BATON_VFS_TRUNC));
	if (rv != 0)
		return rv;
	char *p;
	rv = normalize(path, &p);
	if (rv != 0)
		return rv;
	struct name *e = map_find(&s->cached, p);
	struct inode *ino = e != NULL ? e->ino : NULL;
	if (is_root(p) || dir_exists(s, p))
		rv = -EISDIR;
	else if (ino != NULL && (flags & BATON_VFS_CREATE) &&
		 (flags & BATON_VFS_EXCL))
		rv = -EEXIST;
	else if (ino == NULL && !(flags & BATON_VFS_CREATE))
		rv = -ENOENT;
	else if (ino == NULL && !parent_exists(s, p))
		rv = -ENOENT;
	else
		rv = reserve_fd(s);
	if (rv == 0 && ino == NULL) {
		ino = inode_new(s);
		rv = ino == NULL ? -ENOMEM : map_set(&s->cached, p, ino);
	}
	free(p);
	if (rv != 0) {
		inodes_gc(s);
		return rv;
	}
	if ((flags & BATON_VFS_TRUNC) && ino->cached.size > 0) {
		mark_dirty(ino, 0, ino->cached.size);
		ino->cached.size = 0;
	}
	ino->n_open++;
	s->fds[s->n_fds] = ino;
	*fd_out = FD_BASE + (int)s->n_fds;
	s->n_fds++;
	return 0;
}

static int do_close(struct fault_vfs__state *s, int fd)
{
	/* Even a halted machine lets the process drop its descriptors. */
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	s->fds[fd - FD_BASE] = NULL;
	if (ino->lock_fd == fd)
		ino->lock_fd = -1;
	ino->n_open--;
	inodes_gc(s);
	return 0;
}

static int do_pwrite(struct fault_vfs__state *s, int fd, const void *buf,
		     size_t len, uint64_t offset)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	if (offset > FAULT_VFS_MAX_FILE_BYTES ||
	    len > FAULT_VFS_MAX_FILE_BYTES - offset)
		return -EFBIG;
	if (fault_due(&s->write_fail_in)) {
		s->stats.write_failures++;
		return -s->write_errno;
	}
	uint8_t *copy = malloc(len > 0 ? len : 1);
	if (copy == NULL)
		return -ENOMEM;
	rv = content_write(&ino->cached, buf, len, offset);
	if (rv != 0) {
		free(copy);
		return rv;
	}
	if (len > 0)
		memcpy(copy, buf, len);
	forget_last(ino);
	ino->has_last = true;
	ino->last_offset = offset;
	ino->last_buf = copy;
	ino->last_len = len;
	mark_dirty(ino, offset, offset + len);
	s->stats.writes++;
	s->stats.bytes_written += len;
	return 0;
}

static int do_pread(struct fault_vfs__state *s, int fd, void *buf, size_t len,
		    uint64_t offset, size_t *n_out)
{
	int rv = gate(s, false);
	if (rv != 0)
		return rv;
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	if (offset > FAULT_VFS_MAX_FILE_BYTES || len > FAULT_VFS_MAX_FILE_BYTES)
		return -EFBIG;
	*n_out = content_read(&ino->cached, buf, len, offset);
	return 0;
}

/* fdatasync and fsync: the same here (both make the size durable). */
static int do_sync(struct fault_vfs__state *s, int fd)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	s->stats.syncs++;
	if (fault_due(&s->sync_fail_in)) {
		/* The dirty data is dropped, as Linux marks it clean. */
		s->stats.sync_failures++;
		content_copy(&ino->cached, &ino->durable);
		mark_clean(ino);
		return -s->sync_errno;
	}
	rv = content_resize(&ino->durable, ino->cached.size);
	if (rv != 0)
		return rv;
	uint64_t hi = ino->dirty_hi < ino->cached.size ? ino->dirty_hi
						       : ino->cached.size;
	if (ino->dirty_lo < hi)
		memcpy(ino->durable.buf + ino->dirty_lo,
		       ino->cached.buf + ino->dirty_lo,
		       (size_t)(hi - ino->dirty_lo));
	mark_clean(ino);
	return 0;
}

/* Set the cached size (truncate and allocate). */
static int set_size(struct inode *ino, uint64_t len)
{
	uint64_t old = ino->cached.size;
	int rv = content_resize(&ino->cached, len);
	if (rv == 0 && len < old)
		mark_dirty(ino, len, old);
	return rv;
}

static int do_truncate(struct fault_vfs__state *s, int fd, uint64_t len)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	if (len > FAULT_VFS_MAX_FILE_BYTES)
		return -EFBIG;
	return set_size(ino, len);
}

static int do_allocate(struct fault_vfs__state *s, int fd, uint64_t len)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	if (len > FAULT_VFS_MAX_FILE_BYTES)
		return -EFBIG;
	if (fault_due(&s->write_fail_in)) {
		s->stats.write_failures++;
		return -s->write_errno;
	}
	if (len <= ino->cached.size)
		return 0;
	return set_size(ino, len);
}

static int do_size(struct fault_vfs__state *s, int fd, uint64_t *out)
{
	int rv = gate(s, false);
	if (rv != 0)
		return rv;
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	*out = ino->cached.size;
	return 0;
}

static int rename_paths(struct fault_vfs__state *s, const char *from,
			const char *to)
{
	struct name *e = map_find(&s->cached, from);
	if (e == NULL)
		return dir_exists(s, from) ? -EOPNOTSUPP : -ENOENT;
	if (is_root(to) || dir_exists(s, to))
		return -EISDIR;
	if (!parent_exists(s, to))
		return -ENOENT;
	if (strcmp(from, to) == 0)
		return 0;
	struct inode *ino = e->ino;
	/* Replace first (may allocate), then remove: never without either
	 * name pointing at ino. */
	int rv = map_set(&s->cached, to, ino);
	if (rv != 0)
		return rv;
	return map_set(&s->cached, from, NULL);
}

static int do_rename(struct fault_vfs__state *s, const char *from,
		     const char *to)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	char *f = NULL, *t = NULL;
	rv = normalize(from, &f);
	if (rv == 0)
		rv = normalize(to, &t);
	if (rv == 0)
		rv = rename_paths(s, f, t);
	free(f);
	free(t);
	inodes_gc(s);
	return rv;
}

static int do_unlink(struct fault_vfs__state *s, const char *path)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	char *p;
	rv = normalize(path, &p);
	if (rv != 0)
		return rv;
	if (is_root(p) || dir_exists(s, p))
		rv = -EISDIR;
	else if (map_find(&s->cached, p) == NULL)
		rv = -ENOENT;
	else
		rv = map_set(&s->cached, p, NULL);
	free(p);
	inodes_gc(s);
	return rv;
}

/* Record directory p and its missing parents (p normalised, writable). */
static int add_dirs(struct fault_vfs__state *s, char *p)
{
	if (dir_exists(s, p))
		return 0;
	if (map_find(&s->cached, p) != NULL)
		return -EEXIST;
	size_t pl = parent_len(p);
	char saved = p[pl];
	p[pl] = '\0';
	int rv = add_dirs(s, p);
	p[pl] = saved;
	if (rv != 0)
		return rv;
	void *arr = grow(s->dirs, &s->cap_dirs, s->n_dirs, sizeof *s->dirs);
	if (arr == NULL)
		return -ENOMEM;
	s->dirs = arr;
	char *copy = strdup(p);
	if (copy == NULL)
		return -ENOMEM;
	s->dirs[s->n_dirs++] = copy;
	return 0;
}

static int do_mkdir(struct fault_vfs__state *s, const char *path)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	char *p;
	rv = normalize(path, &p);
	if (rv != 0)
		return rv;
	rv = add_dirs(s, p);
	free(p);
	return rv;
}

/* Make the durable entries of directory d what the cached ones are. */
static int sync_entries(struct fault_vfs__state *s, const char *d)
{
	const char *base;
	for (size_t i = 0; i < s->cached.n; i++) {
		struct name *e = &s->cached.v[i];
		if (!in_dir(e->path, d, &base))
			continue;
		int rv = map_set(&s->durable, e->path, e->ino);
		if (rv != 0)
			return rv;
	}
	for (size_t i = 0; i < s->durable.n;) {
		struct name *e = &s->durable.v[i];
		if (in_dir(e->path, d, &base) &&
		    map_find(&s->cached, e->path) == NULL) {
			/* Swaps the last entry into slot i: look again. */
			int rv = map_set(&s->durable, e->path, NULL);
			assert(rv == 0);
			continue;
		}
		i++;
	}
	return 0;
}

static int do_sync_dir(struct fault_vfs__state *s, const char *path)
{
	int rv = gate(s, true);
	if (rv != 0)
		return rv;
	char *d;
	rv = normalize(path, &d);
	if (rv != 0)
		return rv;
	if (!dir_exists(s, d))
		rv = map_find(&s->cached, d) != NULL ? -ENOTDIR : -ENOENT;
	else
		rv = sync_entries(s, d);
	free(d);
	inodes_gc(s);
	if (rv == 0)
		s->stats.sync_dirs++;
	return rv;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Append the base name of path to names if path is in dir d. */
static int list_add(const char *path, const char *d, char ***names, size_t *n,
		    size_t *cap)
{
	const char *base;
	if (!in_dir(path, d, &base))
		return 0;
	void *arr = grow(*names, cap, *n, sizeof **names);
	if (arr == NULL)
		return -ENOMEM;
	*names = arr;
	char *copy = strdup(base);
	if (copy == NULL)
		return -ENOMEM;
	(*names)[(*n)++] = copy;
	return 0;
}

static int list_dir(struct fault_vfs__state *s, const char *d,
		    char ***names_out, size_t *n_out)
{
	if (!dir_exists(s, d))
		return map_find(&s->cached, d) != NULL ? -ENOTDIR : -ENOENT;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rv = 0;
	for (size_t i = 0; rv == 0 && i < s->cached.n; i++)
		rv = list_add(s->cached.v[i].path, d, &names, &n, &cap);
	for (size_t i = 0; rv == 0 && i < s->n_dirs; i++)
		rv = list_add(s->dirs[i], d, &names, &n, &cap);
	if (rv != 0) {
		free_names(names, n);
		return rv;
	}
	if (n > 0)
		qsort(names, n, sizeof *names, cmp_names);
	*names_out = names;
	*n_out = n;
	return 0;
}

static int do_list(struct fault_vfs__state *s, const char *path,
		   char ***names_out, size_t *n_out)
{
	int rv = gate(s, false);
	if (rv != 0)
		return rv;
	char *d;
	rv = normalize(path, &d);
	if (rv != 0)
		return rv;
	rv = list_dir(s, d, names_out, n_out);
	free(d);
	return rv;
}

static int do_lock(struct fault_vfs__state *s, int fd)
{
	int rv = gate(s, false);
	if (rv != 0)
		return rv;
	struct inode *ino = fd_inode(s, fd);
	if (ino == NULL)
		return -EBADF;
	if (ino->lock_fd != -1 && ino->lock_fd != fd)
		return -EWOULDBLOCK;
	ino->lock_fd = fd;
	return 0;
}

/* The wrappers: take the mutex around each do_*. */
#define LOCKED(v, call)                                                        \
	do {                                                                   \
		struct fault_vfs__state *s_ = state_of(v);                     \
		pthread_mutex_lock(&s_->mu);                                   \
		int rv_ = call;                                                \
		pthread_mutex_unlock(&s_->mu);                                 \
		return rv_;                                                    \
	} while (0)

static int f_open(struct baton_vfs *v, const char *path, int flags, int *out)
{
	LOCKED(v, do_open(s_, path, flags, out));
}

static int f_close(struct baton_vfs *v, int fd)
{
	LOCKED(v, do_close(s_, fd));
}

static int f_pwrite(struct baton_vfs *v, int fd, const void *buf, size_t len,
		    uint64_t offset)
{
	LOCKED(v, do_pwrite(s_, fd, buf, len, offset));
}

static int f_pread(struct baton_vfs *v, int fd, void *buf, size_t len,
		   uint64_t offset, size_t *n_out)
{
	LOCKED(v, do_pread(s_, fd, buf, len, offset, n_out));
}

static int f_sync(struct baton_vfs *v, int fd)
{
	LOCKED(v, do_sync(s_, fd));
}

static int f_truncate(struct baton_vfs *v, int fd, uint64_t len)
{
	LOCKED(v, do_truncate(s_, fd, len));
}

static int f_allocate(struct baton_vfs *v, int fd, uint64_t len)
{
	LOCKED(v, do_allocate(s_, fd, len));
}

static int f_size(struct baton_vfs *v, int fd, uint64_t *out)
{
	LOCKED(v, do_size(s_, fd, out));
}

static int f_rename(struct baton_vfs *v, const char *from, const char *to)
{
	LOCKED(v, do_rename(s_, from, to));
}

static int f_unlink(struct baton_vfs *v, const char *path)
{
	LOCKED(v, do_unlink(s_, path));
}

static int f_mkdir(struct baton_vfs *v, const char *path)
{
	LOCKED(v, do_mkdir(s_, path));
}

static int f_sync_dir(struct baton_vfs *v, const char *path)
{
	LOCKED(v, do_sync_dir(s_, path));
}

static int f_list(struct baton_vfs *v, const char *path, char ***names_out,
		  size_t *n_out)
{
	LOCKED(v, do_list(s_, path, names_out, n_out));
}

static int f_lock(struct baton_vfs *v, int fd)
{
	LOCKED(v, do_lock(s_, fd));
}

static const struct baton_vfs_ops fault_ops = {
	.open = f_open,
	.close = f_close,
	.pwrite = f_pwrite,
	.pread = f_pread,
	.fdatasync = f_sync,
	.fsync = f_sync,
	.truncate = f_truncate,
	.allocate = f_allocate,
	.size = f_size,
	.rename = f_rename,
	.unlink = f_unlink,
	.mkdir = f_mkdir,
	.sync_dir = f_sync_dir,
	.list = f_list,
	.lock = f_lock,
};

/* ------------------------------------------------------------------------ */
/* Life cycle and faults.                                                  */

struct fault_vfs *fault_vfs_new(void)
{
	struct fault_vfs *v = calloc(1, sizeof *v);
	struct fault_vfs__state *s = calloc(1, sizeof *s);
	if (v == NULL || s == NULL || pthread_mutex_init(&s->mu, NULL) != 0) {
		free(v);
		free(s);
		return NULL;
	}
	s->durable.durable = true;
	v->base.ops = &fault_ops;
	v->state = s;
	return v;
}

void fault_vfs_free(struct fault_vfs *v)
{
	if (v == NULL)
		return;
	struct fault_vfs__state *s = v->state;
	map_clear(&s->cached);
	map_clear(&s->durable);
	free(s->cached.v);
	free(s->durable.v);
	for (size_t i = 0; i < s->n_inodes; i++)
		inode_free(s->inodes[i]);
	free(s->inodes);
	free_names(s->dirs, s->n_dirs);
	free(s->fds);
	pthread_mutex_destroy(&s->mu);
	free(s);
	free(v);
}

/* splitmix64: a small, seeded, well-mixed generator. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A prefix of each file's last unsynced write reaches the disk. */
static void tear(struct fault_vfs__state *s, uint64_t seed)
{
	uint64_t rng = seed;
	for (size_t i = 0; i < s->n_inodes; i++) {
		struct inode *ino = s->inodes[i];
		if (!ino->has_last || ino->n_durable == 0 || ino->last_len == 0)
			continue;
		size_t cut = (size_t)(splitmix64(&rng) % ino->last_len);
		must(content_write(&ino->durable, ino->last_buf, cut,
				   ino->last_offset));
	}
}

void fault_vfs_crash(struct fault_vfs *v, enum fault_crash_mode mode,
		     uint64_t rng_seed)
{
	struct fault_vfs__state *s = v->state;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_fds; i++) {
		if (s->fds[i] != NULL)
			s->fds[i]->n_open--;
		s->fds[i] = NULL;
	}
	if (mode == FAULT_CRASH_TEAR)
		tear(s, rng_seed);
	map_clear(&s->cached);
	for (size_t i = 0; i < s->durable.n; i++)
		must(map_set(&s->cached, s->durable.v[i].path,
			     s->durable.v[i].ino));
	inodes_gc(s);
	for (size_t i = 0; i < s->n_inodes; i++) {
		struct inode *ino = s->inodes[i];
		content_copy(&ino->cached, &ino->durable);
		mark_clean(ino);
		ino->lock_fd = -1;
	}
	s->sync_fail_in = s->write_fail_in = s->halt_in = 0;
	s->halted = false;
	s->stats.crashes++;
	pthread_mutex_unlock(&s->mu);
}

/* The inode that path names durably, or NULL. */
static struct inode *durable_inode(struct fault_vfs__state *s, const char *path,
				   int *rv)
{
	char *p;
	*rv = normalize(path, &p);
	if (*rv != 0)
		return NULL;
	struct name *e = map_find(&s->durable, p);
	free(p);
	if (e == NULL)
		*rv = -ENOENT;
	return e != NULL ? e->ino : NULL;
}

int fault_vfs_flip(struct fault_vfs *v, const char *path, uint64_t offset,
		   uint8_t xor_mask)
{
	struct fault_vfs__state *s = v->state;
	int rv;
	pthread_mutex_lock(&s->mu);
	struct inode *ino = durable_inode(s, path, &rv);
	if (ino != NULL && offset >= ino->durable.size)
		rv = -EINVAL;
	if (rv == 0) {
		ino->durable.buf[offset] ^= xor_mask;
		if (offset < ino->cached.size)
			ino->cached.buf[offset] ^= xor_mask;
	}
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int fault_vfs_durable_size(struct fault_vfs *v, const char *path,
			   uint64_t *size_out)
{
	struct fault_vfs__state *s = v->state;
	int rv;
	pthread_mutex_lock(&s->mu);
	struct inode *ino = durable_inode(s, path, &rv);
	if (ino != NULL)
		*size_out = ino->durable.size;
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int fault_vfs_read_durable(struct fault_vfs *v, const char *path,
			   uint64_t offset, void *buf, size_t len,
			   size_t *n_out)
{
	struct fault_vfs__state *s = v->state;
	int rv;
	pthread_mutex_lock(&s->mu);
	struct inode *ino = durable_inode(s, path, &rv);
	if (ino != NULL)
		*n_out = content_read(&ino->durable, buf, len, offset);
	pthread_mutex_unlock(&s->mu);
	return rv;
}

void fault_vfs_fail_sync_after(struct fault_vfs *v, uint64_t n, int errno_value)
{
	struct fault_vfs__state *s = v->state;
	assert(n == 0 || errno_value > 0);
	pthread_mutex_lock(&s->mu);
	s->sync_fail_in = n;
	s->sync_errno = errno_value;
	pthread_mutex_unlock(&s->mu);
}

void fault_vfs_fail_write_after(struct fault_vfs *v, uint64_t n,
				int errno_value)
{
	struct fault_vfs__state *s = v->state;
	assert(n == 0 || errno_value > 0);
	pthread_mutex_lock(&s->mu);
	s->write_fail_in = n;
	s->write_errno = errno_value;
	pthread_mutex_unlock(&s->mu);
}

void fault_vfs_halt(struct fault_vfs *v)
{
	struct fault_vfs__state *s = v->state;
	pthread_mutex_lock(&s->mu);
	s->halted = true;
	pthread_mutex_unlock(&s->mu);
}

void fault_vfs_halt_after(struct fault_vfs *v, uint64_t n)
{
	struct fault_vfs__state *s = v->state;
	pthread_mutex_lock(&s->mu);
	s->halt_in = n;
	pthread_mutex_unlock(&s->mu);
}

void fault_vfs_stats(struct fault_vfs *v, struct fault_vfs_stats *out)
{
	struct fault_vfs__state *s = v->state;
	pthread_mutex_lock(&s->mu);
	*out = s->stats;
	pthread_mutex_unlock(&s->mu);
}
