/* A snapshot written on the sink's own thread (snapshot_sink.c): many
 * writes read back exactly; a full queue answers BATON_EAGAIN, taking
 * nothing, and the notify after it lets the write in; a failed write or
 * sync on the thread surfaces at a later write or at the commit and stops
 * the storage's writes; the thread syncs as it goes; abort while the
 * thread writes; close with a sink open. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fault_vfs.h"
#include "internal.h"
#include "store_util.h"

static char dir[256];

static void setup(void)
{
	tmpdir_make(dir, sizeof dir);
}

static void teardown(void)
{
	tmpdir_remove(dir);
}

TestSuite(snapshot_sink, .init = setup, .fini = teardown);

static atomic_uint notified;

static void count_notify(void *data)
{
	(void)data;
	atomic_fetch_add(&notified, 1);
}

/* Wait (5 s at most) until notify has fired more than `seen` times. */
static void wait_notified(unsigned seen)
{
	for (int i = 0; i < 5000 && atomic_load(&notified) <= seen; i++)
		store_sleep_ms(1);
	cr_assert_gt(atomic_load(&notified), seen, "no notify within 5 s");
}

/* A loaded storage in `path` over `vfs` (NULL: the OS's), queueing at most
 * queue_bytes of a snapshot, notifying count_notify. */
static struct baton_storage *open_with(const char *path, struct baton_vfs *vfs,
				       uint64_t queue_bytes)
{
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = path;
	o.vfs = vfs;
	o.snapshot_queue_bytes = queue_bytes;
	o.notify = count_notify;
	struct baton_storage *s;
	char err[256];
	cr_assert_eq(baton_fs_storage_open(&o, &s, err, sizeof err), 0, "%s",
		     err);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	atomic_store(&notified, 0);
	return s;
}

static struct baton_snapshot_sink *begin(struct baton_storage *s,
					 baton_index index)
{
	struct baton_snapshot_header h = {0};
	h.meta.index = index;
	h.meta.term = 1;
	h.meta.config.n = 1;
	h.meta.config.members[0].id = 1;
	h.meta.config.members[0].role = BATON_VOTER;
	h.meta.config_index = 1;
	baton_version_state_initial(&h.meta.versions);
	struct baton_snapshot_sink *k;
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), 0, "%s",
		     s->ops->errmsg(s));
	return k;
}

/* Write len bytes in writes of varying sizes up to max_write, as a loop
 * would: after BATON_EAGAIN, wait for the notify and write again. */
static void write_all(struct baton_storage *s, struct baton_snapshot_sink *k,
		      const uint8_t *data, size_t len, size_t max_write,
		      unsigned *refusals)
{
	size_t off = 0;
	for (unsigned i = 0; off < len; i++) {
		size_t n = 1 + (size_t)(i * 7919u) % max_write;
		if (n > len - off)
			n = len - off;
		unsigned seen = atomic_load(&notified);
		int rv = s->ops->snapshot_write(k, data + off, n);
		if (rv == BATON_EAGAIN) {
			(*refusals)++;
			wait_notified(seen);
			continue;
		}
		cr_assert_eq(rv, 0, "write at %zu: %s", off, s->ops->errmsg(s));
		off += n;
	}
}

/* The durable snapshot at `index` reads back as data. */
static void expect_snapshot(struct baton_storage *s, baton_index index,
			    const uint8_t *data, size_t len)
{
	uint8_t *got = malloc(len + 1);
	size_t off = 0, n;
	do {
		cr_assert_eq(s->ops->snapshot_read(s, index, off, got + off,
						   len + 1 - off, &n),
			     0, "%s", s->ops->errmsg(s));
		off += n;
	} while (n > 0 && off <= len);
	cr_assert_eq(off, len);
	cr_assert_arr_eq(got, data, len);
	free(got);
}

static uint8_t *payload(size_t len, baton_index index)
{
	uint8_t *b = malloc(len);
	payload_fill(b, (uint32_t)len, index, 1);
	return b;
}

Test(snapshot_sink, many_writes_through_a_small_queue_read_back_exactly)
{
	enum { LEN = 3 * 1024 * 1024 + 17 };
	struct baton_storage *s = open_with(dir, NULL, 256 * 1024);
	uint8_t *data = payload(LEN, 40);
	struct baton_snapshot_sink *k = begin(s, 40);
	unsigned refusals = 0;
	write_all(s, k, data, LEN, 64 * 1024, &refusals);
	cr_log_info("%u writes refused with BATON_EAGAIN", refusals);
	cr_assert_eq(s->ops->snapshot_commit(k), 0, "%s", s->ops->errmsg(s));
	expect_snapshot(s, 40, data, LEN);
	s->ops->close(s);
	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, 40);
	cr_assert_eq(d.snapshot_len, LEN);
	cr_assert_arr_eq(d.snapshot_data, data, LEN);
	baton_durable_state_free(&d);
	s->ops->close(s);
	free(data);
}

/* ---- a file layer whose snapshot writes wait at a gate -------------------
 */

/* The OS's files, but a pwrite to the snapshot's temporary file waits while
 * the gate is closed, fails (EIO) when told; counts those that succeeded. */
static struct gate_vfs {
	struct baton_vfs base;
	struct baton_vfs *inner;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool closed;
	bool fail;
	int fd; /* the temporary file's, or -1 */
	unsigned writes, waiting;
} gate;

static int g_open(struct baton_vfs *v, const char *path, int flags, int *fd)
{
	(void)v;
	int rv = gate.inner->ops->open(gate.inner, path, flags, fd);
	size_t n = strlen(path), t = strlen(FS_SNAP_OWN_TMP);
	if (rv == 0 && n >= t && strcmp(path + n - t, FS_SNAP_OWN_TMP) == 0) {
		pthread_mutex_lock(&gate.mu);
		gate.fd = *fd;
		pthread_mutex_unlock(&gate.mu);
	}
	return rv;
}

static int g_pwrite(struct baton_vfs *v, int fd, const void *buf, size_t len,
		    uint64_t offset)
{
	(void)v;
	pthread_mutex_lock(&gate.mu);
	bool ours = fd == gate.fd;
	if (ours) {
		gate.waiting++;
		pthread_cond_broadcast(&gate.cond);
		while (gate.closed)
			pthread_cond_wait(&gate.cond, &gate.mu);
		gate.waiting--;
	}
	bool fail = ours && gate.fail;
	pthread_mutex_unlock(&gate.mu);
	int rv = fail ? -EIO
		      : gate.inner->ops->pwrite(gate.inner, fd, buf, len,
						offset);
	pthread_mutex_lock(&gate.mu);
	gate.writes += ours && rv == 0;
	pthread_mutex_unlock(&gate.mu);
	return rv;
}

static int g_close(struct baton_vfs *v, int fd)
{
	(void)v;
	pthread_mutex_lock(&gate.mu);
	if (fd == gate.fd)
		gate.fd = -1;
	pthread_mutex_unlock(&gate.mu);
	return gate.inner->ops->close(gate.inner, fd);
}

static int g_pread(struct baton_vfs *v, int fd, void *buf, size_t len,
		   uint64_t offset, size_t *n)
{
	(void)v;
	return gate.inner->ops->pread(gate.inner, fd, buf, len, offset, n);
}

static int g_fdatasync(struct baton_vfs *v, int fd)
{
	(void)v;
	return gate.inner->ops->fdatasync(gate.inner, fd);
}

static int g_fsync(struct baton_vfs *v, int fd)
{
	(void)v;
	return gate.inner->ops->fsync(gate.inner, fd);
}

static int g_truncate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	return gate.inner->ops->truncate(gate.inner, fd, len);
}

static int g_allocate(struct baton_vfs *v, int fd, uint64_t len)
{
	(void)v;
	return gate.inner->ops->allocate(gate.inner, fd, len);
}

static int g_size(struct baton_vfs *v, int fd, uint64_t *out)
{
	(void)v;
	return gate.inner->ops->size(gate.inner, fd, out);
}

static int g_rename(struct baton_vfs *v, const char *from, const char *to)
{
	(void)v;
	return gate.inner->ops->rename(gate.inner, from, to);
}

static int g_unlink(struct baton_vfs *v, const char *path)
{
	(void)v;
	return gate.inner->ops->unlink(gate.inner, path);
}

static int g_mkdir(struct baton_vfs *v, const char *path)
{
	(void)v;
	return gate.inner->ops->mkdir(gate.inner, path);
}

static int g_sync_dir(struct baton_vfs *v, const char *path)
{
	(void)v;
	return gate.inner->ops->sync_dir(gate.inner, path);
}

static int g_list(struct baton_vfs *v, const char *path, char ***names,
		  size_t *n)
{
	(void)v;
	return gate.inner->ops->list(gate.inner, path, names, n);
}

static int g_lock(struct baton_vfs *v, int fd)
{
	(void)v;
	return gate.inner->ops->lock(gate.inner, fd);
}

static const struct baton_vfs_ops gate_ops = {
	g_open,	  g_close,    g_pwrite,	  g_pread, g_fdatasync,
	g_fsync,  g_truncate, g_allocate, g_size,  g_rename,
	g_unlink, g_mkdir,    g_sync_dir, g_list,  g_lock,
};

static struct baton_vfs *gate_vfs(void)
{
	gate.base.ops = &gate_ops;
	gate.inner = baton_vfs_posix();
	pthread_mutex_init(&gate.mu, NULL);
	pthread_cond_init(&gate.cond, NULL);
	gate.closed = false;
	gate.fail = false;
	gate.fd = -1;
	gate.writes = 0;
	gate.waiting = 0;
	return &gate.base;
}

static void gate_set(bool closed)
{
	pthread_mutex_lock(&gate.mu);
	gate.closed = closed;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.mu);
}

/* Wait until the sink's thread waits at the closed gate (5 s at most). */
static void gate_wait_for_writer(void)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&gate.mu);
	int rv = 0;
	while (gate.waiting == 0 && rv == 0)
		rv = pthread_cond_timedwait(&gate.cond, &gate.mu, &until);
	unsigned waiting = gate.waiting;
	pthread_mutex_unlock(&gate.mu);
	cr_assert_eq(waiting, 1, "the snapshot writer never reached the gate");
}

static unsigned gate_writes(void)
{
	pthread_mutex_lock(&gate.mu);
	unsigned n = gate.writes;
	pthread_mutex_unlock(&gate.mu);
	return n;
}

Test(snapshot_sink, a_full_queue_says_eagain_then_notifies_when_drained)
{
	enum { KIB = 1024, QUEUE = 64 * KIB, PART = 40 * KIB };
	struct baton_storage *s = open_with(dir, gate_vfs(), QUEUE);
	uint8_t *data = payload(5 * PART + 4 * QUEUE, 9);
	struct baton_snapshot_sink *k = begin(s, 9);
	gate_set(true);
	/* The thread takes the first part and waits at the gate with it. */
	cr_assert_eq(s->ops->snapshot_write(k, data, PART), 0);
	gate_wait_for_writer();
	/* 40 + 40 KiB do not fit in 64: refused, nothing taken. */
	cr_assert_eq(s->ops->snapshot_write(k, data + PART, PART),
		     BATON_EAGAIN);
	cr_assert_eq(s->ops->snapshot_write(k, data + PART, PART),
		     BATON_EAGAIN);
	/* What fits is still taken. */
	cr_assert_eq(s->ops->snapshot_write(k, data + PART, QUEUE - PART), 0);
	cr_assert_eq(atomic_load(&notified), 0);
	size_t off = PART + (QUEUE - PART);
	gate_set(false);
	wait_notified(0);
	cr_assert_eq(s->ops->snapshot_write(k, data + off, PART), 0);
	off += PART;
	/* A write above the limit is taken once nothing is queued. */
	int rv;
	do {
		unsigned seen = atomic_load(&notified);
		rv = s->ops->snapshot_write(k, data + off, 4 * QUEUE);
		if (rv == BATON_EAGAIN)
			wait_notified(seen);
	} while (rv == BATON_EAGAIN);
	cr_assert_eq(rv, 0);
	off += 4 * QUEUE;
	cr_assert_eq(s->ops->snapshot_commit(k), 0, "%s", s->ops->errmsg(s));
	expect_snapshot(s, 9, data, off);
	s->ops->close(s);
	free(data);
}

static void *open_gate_later(void *arg)
{
	(void)arg;
	store_sleep_ms(50);
	gate_set(false);
	return NULL;
}

/* Abort while the thread is in a write: that write ends, nothing queued
 * after it is written, the temporary file goes, the next snapshot may
 * begin. */
Test(snapshot_sink, abort_while_the_thread_writes)
{
	struct baton_storage *s = open_with(dir, gate_vfs(), 1 << 20);
	uint8_t *data = payload(300000, 3);
	cr_assert_eq(store_snapshot(s, 2, 1, 1000), 0);
	struct baton_snapshot_sink *k = begin(s, 3);
	gate_set(true);
	cr_assert_eq(s->ops->snapshot_write(k, data, 100000), 0);
	gate_wait_for_writer();
	cr_assert_eq(s->ops->snapshot_write(k, data + 100000, 100000), 0);
	cr_assert_eq(s->ops->snapshot_write(k, data + 200000, 100000), 0);
	unsigned before = gate_writes();
	pthread_t opener;
	cr_assert_eq(pthread_create(&opener, NULL, open_gate_later, NULL), 0);
	s->ops->snapshot_abort(k);
	pthread_join(opener, NULL);
	cr_assert_eq(gate_writes(), before + 1, "only the write under way");
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, FS_SNAP_OWN_TMP);
	cr_assert_neq(access(path, F_OK), 0, "%s is still there", path);
	k = begin(s, 3);
	cr_assert_eq(s->ops->snapshot_write(k, data, 300000), 0);
	cr_assert_eq(s->ops->snapshot_commit(k), 0, "%s", s->ops->errmsg(s));
	expect_snapshot(s, 3, data, 300000);
	s->ops->close(s);
	free(data);
}

/* close() with a sink still being written (and data queued) drops it:
 * no leak, no temporary file, the previous snapshot stays. */
Test(snapshot_sink, close_with_a_sink_open_drops_it)
{
	struct baton_storage *s = open_with(dir, gate_vfs(), 1 << 20);
	cr_assert_eq(store_snapshot(s, 5, 1, 2000), 0);
	uint8_t *data = payload(200000, 6);
	struct baton_snapshot_sink *k = begin(s, 6);
	gate_set(true);
	cr_assert_eq(s->ops->snapshot_write(k, data, 100000), 0);
	gate_wait_for_writer();
	cr_assert_eq(s->ops->snapshot_write(k, data + 100000, 100000), 0);
	pthread_t opener;
	cr_assert_eq(pthread_create(&opener, NULL, open_gate_later, NULL), 0);
	s->ops->close(s);
	pthread_join(opener, NULL);
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, FS_SNAP_OWN_TMP);
	cr_assert_neq(access(path, F_OK), 0, "%s is still there", path);
	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, 5);
	baton_durable_state_free(&d);
	s->ops->close(s);
	free(data);
}

/* ---- failures on the thread ---------------------------------------------
 */

#define FAULT_DIR "/data"

/* The storage stopped its writes, and a reopen finds the snapshot at
 * `index` durable. */
static void expect_latched_then_durable(struct fault_vfs *fv,
					struct baton_storage *s,
					baton_index index)
{
	struct baton_fs_stats st;
	baton_fs_storage_stats(s, &st);
	cr_assert_eq(st.failed, BATON_EIO);
	struct baton_update u = {.persist_needed = true};
	uint64_t seq;
	cr_assert_eq(s->ops->submit(s, &u, &seq), BATON_EIO);
	struct baton_snapshot_sink *k2;
	cr_assert_eq(store_snapshot_written(s, 20, 1, 10, &k2), BATON_EIO);
	fault_vfs_halt(fv);
	s->ops->close(s);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	s = store_open(FAULT_DIR, 0, &fv->base);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, index);
	baton_durable_state_free(&d);
	s->ops->close(s);
}

Test(snapshot_sink, a_failed_background_write_surfaces_at_the_commit)
{
	struct fault_vfs *fv = fault_vfs_new();
	struct baton_storage *s = open_with(FAULT_DIR, &fv->base, 0);
	cr_assert_eq(store_snapshot(s, 5, 1, 1000), 0);
	uint8_t *data = payload(3000, 9);
	struct baton_snapshot_sink *k = begin(s, 9);
	/* The log's writer is idle: the next write is the snapshot's. */
	fault_vfs_fail_write_after(fv, 1, ENOSPC);
	cr_assert_eq(s->ops->snapshot_write(k, data, 3000), 0);
	cr_assert_eq(s->ops->snapshot_commit(k), BATON_EIO);
	cr_assert(strstr(s->ops->errmsg(s), "No space") != NULL, "%s",
		  s->ops->errmsg(s));
	expect_latched_then_durable(fv, s, 5);
	fault_vfs_free(fv);
	free(data);
}

Test(snapshot_sink, a_failed_background_write_surfaces_at_a_later_write)
{
	struct fault_vfs *fv = fault_vfs_new();
	struct baton_storage *s = open_with(FAULT_DIR, &fv->base, 0);
	cr_assert_eq(store_snapshot(s, 5, 1, 1000), 0);
	uint8_t *data = payload(1000, 9);
	struct baton_snapshot_sink *k = begin(s, 9);
	fault_vfs_fail_write_after(fv, 1, EIO);
	cr_assert_eq(s->ops->snapshot_write(k, data, 1000), 0);
	int rv = 0;
	for (int i = 0; i < 5000 && rv == 0; i++) {
		store_sleep_ms(1);
		rv = s->ops->snapshot_write(k, data, 10);
	}
	cr_assert_eq(rv, BATON_EIO, "%s", baton_err_name(rv));
	/* Latched: the sink says so again, and the commit too. */
	cr_assert_eq(s->ops->snapshot_write(k, data, 10), BATON_EIO);
	cr_assert(strstr(s->ops->errmsg(s), "write") != NULL, "%s",
		  s->ops->errmsg(s));
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	cr_assert_eq(s->ops->snapshot_commit_wait(k, true), BATON_EIO);
	expect_latched_then_durable(fv, s, 5);
	fault_vfs_free(fv);
	free(data);
}

/* A write refused with BATON_EAGAIN is owed a notify even when the thread
 * fails instead of draining: the caller then finds the error. */
Test(snapshot_sink, a_failure_notifies_a_refused_writer)
{
	struct baton_storage *s = open_with(dir, gate_vfs(), 4096);
	uint8_t *data = payload(8192, 4);
	struct baton_snapshot_sink *k = begin(s, 4);
	gate_set(true);
	cr_assert_eq(s->ops->snapshot_write(k, data, 4096), 0);
	gate_wait_for_writer();
	cr_assert_eq(s->ops->snapshot_write(k, data, 4096), BATON_EAGAIN);
	/* The write under way fails. */
	pthread_mutex_lock(&gate.mu);
	gate.fail = true;
	pthread_mutex_unlock(&gate.mu);
	gate_set(false);
	wait_notified(0);
	cr_assert_eq(s->ops->snapshot_write(k, data, 4096), BATON_EIO);
	s->ops->snapshot_abort(k);
	s->ops->close(s);
	free(data);
}

/* The thread syncs every 4 MiB as it goes, so the commit's sync has
 * little left; a failed sync on the way surfaces as a failed write. */
Test(snapshot_sink, the_thread_syncs_as_it_goes)
{
	enum { MIB = 1024 * 1024, LEN = 33 * MIB };
	struct fault_vfs *fv = fault_vfs_new();
	struct baton_storage *s = open_with(FAULT_DIR, &fv->base, 0);
	uint8_t *data = payload(LEN, 7);
	struct fault_vfs_stats before, after;
	fault_vfs_stats(fv, &before);
	struct baton_snapshot_sink *k = begin(s, 7);
	unsigned refusals = 0;
	write_all(s, k, data, LEN, MIB, &refusals);
	cr_assert_eq(s->ops->snapshot_commit(k), 0, "%s", s->ops->errmsg(s));
	fault_vfs_stats(fv, &after);
	/* About one per 4 MiB on the way (where the counting starts depends
	 * on the file's header), and the commit's: far more than the commit's
	 * alone, and never more than one per 4 MiB and the commit's. */
	uint64_t syncs = after.syncs - before.syncs;
	cr_assert(syncs >= 8 && syncs <= 9, "%llu syncs",
		  (unsigned long long)syncs);
	expect_snapshot(s, 7, data, LEN);
	uint64_t durable = 0;
	cr_assert_eq(
		fault_vfs_durable_size(fv, FAULT_DIR "/snapshot", &durable), 0);
	cr_assert_gt(durable, LEN);

	k = begin(s, 8);
	fault_vfs_fail_sync_after(fv, 1, EIO);
	int rv = 0;
	for (size_t off = 0; off < LEN && rv == 0;) {
		rv = s->ops->snapshot_write(k, data + off, MIB);
		if (rv == BATON_EAGAIN) {
			store_sleep_ms(1);
			rv = 0;
		} else if (rv == 0) {
			off += MIB;
		}
	}
	if (rv == 0)
		rv = s->ops->snapshot_commit(k);
	else
		s->ops->snapshot_abort(k);
	cr_assert_eq(rv, BATON_EIO, "%s", baton_err_name(rv));
	cr_assert(strstr(s->ops->errmsg(s), "fdatasync") != NULL, "%s",
		  s->ops->errmsg(s));
	expect_latched_then_durable(fv, s, 7);
	fault_vfs_free(fv);
	free(data);
}
