/*
 * The storage on files: struct baton_storage over wal.c, meta.c and
 * snapshot_file.c, with group commit on a writer thread.
 *
 * submit() encodes an update's records on the caller's thread (one copy)
 * and queues them. The writer thread takes everything queued (up to
 * max_batch_bytes), writes term/vote and installed snapshots first, then all
 * records as one batch with one fdatasync, and reports the whole group done.
 * While it syncs, new submissions pile up and form the next group, so the
 * batch grows with the load by itself and the caller's loop never waits for
 * the disk.
 *
 * A failed write or sync is never retried: after EIO the kernel may have
 * dropped the dirty pages and marked them clean, so a later successful sync
 * proves nothing. The error is latched; that group and every later
 * submission fail with BATON_EIO, and the node stops accepting writes.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "internal.h"

#define LOCK_NAME "LOCK"

/* One submitted update, as the writer needs it. */
struct request {
	uint64_t seq;
	bool hs;
	baton_term term;
	baton_node_id vote;
	bool has_snap;
	struct baton_snapshot_meta snap;
	uint8_t *snap_data;
	size_t snap_len;
	uint8_t *records; /* encoded, ready for a batch body */
	size_t records_len;
	uint32_t n_records;
	baton_index first_index, max_index;
	baton_index compact_upto;
	struct request *next;
};

struct completion {
	uint64_t seq;
	int status;
};

struct fs_storage {
	struct baton_storage base;
	struct baton_fs_options o;
	char dir[STORAGE_PATH_MAX];
	struct baton_vfs *vfs;
	int lock_fd;
	struct baton__wal wal; /* the writer thread's, after open */
	struct baton_durable_state loaded;
	bool loaded_taken;
	/* What the identity file records (o.identity set), under mu. */
	struct baton_identity identity;

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu; /* guards everything down to errmsg */
	pthread_cond_t work, idle;
	struct request *head, *tail;
	uint64_t next_seq, completed_seq;
	struct completion *done;
	uint32_t n_done, cap_done;
	bool stopping;
	int failed; /* latched BATON_EIO */
	char errmsg[STORAGE_ERR_MAX + 64];
	char errmsg_out[STORAGE_ERR_MAX + 64]; /* what errmsg() returns */
	struct baton_fs_stats stats;

	/* The writer's batch buffer. */
	uint8_t *batch;
	size_t batch_cap;

	struct baton__fs_snaps snaps; /* the application's (fs_snapshot.c) */
};

static struct fs_storage *fs_of(struct baton_storage *b)
{
	return (struct fs_storage *)b;
}

static void set_error(struct fs_storage *s, const char *msg)
{
	pthread_mutex_lock(&s->mu);
	snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
	pthread_mutex_unlock(&s->mu);
}

/* A failed write or sync stops all writes for good (see the top). */
static void latch_failure(struct fs_storage *s, const char *msg)
{
	pthread_mutex_lock(&s->mu);
	if (s->failed == 0) {
		s->failed = BATON_EIO;
		s->stats.failed = BATON_EIO;
		snprintf(s->errmsg, sizeof s->errmsg,
			 "storage stopped accepting writes: %s", msg);
	}
	pthread_mutex_unlock(&s->mu);
}

void baton__fs_set_error(struct baton_storage *b, const char *msg)
{
	set_error(fs_of(b), msg);
}

void baton__fs_latch_failure(struct baton_storage *b, const char *msg)
{
	latch_failure(fs_of(b), msg);
}

int baton__fs_failed(struct baton_storage *b)
{
	struct fs_storage *s = fs_of(b);
	pthread_mutex_lock(&s->mu);
	int failed = s->failed;
	pthread_mutex_unlock(&s->mu);
	return failed;
}

/* ---- the writer thread --------------------------------------------------- */

static int install_snapshot(struct fs_storage *s, const struct request *r,
			    char *err, size_t errlen)
{
	struct baton_snapshot_header h = {.meta = r->snap};
	struct baton__snap_writer *w;
	int rv = baton__snap_writer_open(s->vfs, s->dir, FS_SNAP_INSTALL_TMP,
					 &h, &w, err, errlen);
	if (rv != 0)
		return rv;
	rv = baton__snap_writer_write(w, r->snap_data, r->snap_len, err,
				      errlen);
	bool skipped = false;
	if (rv == 0)
		rv = baton__fs_snaps_commit(&s->snaps, w, r->snap.index,
					    &skipped, err, errlen);
	baton__snap_writer_free(w);
	return rv;
}

static int grow_batch(struct fs_storage *s, size_t need)
{
	if (need <= s->batch_cap)
		return 0;
	size_t cap = s->batch_cap ? s->batch_cap : 1u << 16;
	while (cap < need)
		cap *= 2;
	uint8_t *b = realloc(s->batch, cap);
	if (b == NULL)
		return BATON_ENOMEM;
	s->batch = b;
	s->batch_cap = cap;
	return 0;
}

/* Make a group of requests durable, in their order. */
static int process(struct fs_storage *s, struct request *group, char *err,
		   size_t errlen)
{
	const struct request *hs = NULL;
	size_t body = 0;
	uint32_t n_records = 0;
	baton_index first = 0, max = 0, compact = 0;
	for (struct request *r = group; r != NULL; r = r->next) {
		if (r->hs)
			hs = r;
		body += r->records_len;
		n_records += r->n_records;
		if (r->n_records > 0 && first == 0)
			first = r->first_index;
		if (r->max_index > max)
			max = r->max_index;
		if (r->compact_upto > compact)
			compact = r->compact_upto;
		if (r->has_snap && r->snap.index > compact)
			compact = r->snap.index;
	}
	/* Term and vote first: entries of a term never reach the disk
	 * before the term itself. */
	int rv = 0;
	if (hs != NULL)
		rv = baton__meta_write(s->vfs, s->dir, hs->term, hs->vote, err,
				       errlen);
	for (struct request *r = group; r != NULL && rv == 0; r = r->next)
		if (r->has_snap)
			rv = install_snapshot(s, r, err, errlen);
	if (rv == 0 && n_records > 0) {
		rv = grow_batch(s,
				WAL_BATCH_HEADER_LEN + body + WAL_TRAILER_LEN);
		if (rv != 0)
			return baton__errf(err, errlen, rv, "out of memory");
		uint8_t *p = s->batch + WAL_BATCH_HEADER_LEN;
		for (struct request *r = group; r != NULL; r = r->next) {
			if (r->records_len == 0)
				continue;
			memcpy(p, r->records, r->records_len);
			p += r->records_len;
		}
		rv = baton__wal_append(&s->wal, s->batch, body, n_records,
				       first, max, err, errlen);
	}
	if (rv == 0 && compact > 0) {
		/* Only what a durable snapshot covers may go. */
		baton_index snap = baton__fs_snaps_index(&s->snaps);
		baton__wal_compact(&s->wal, compact < snap ? compact : snap);
	}
	return rv;
}

static void request_free(struct request *r)
{
	free(r->snap_data);
	free(r->records);
	free(r);
}

static void push_completions(struct fs_storage *s, struct request *group,
			     int status)
{
	for (struct request *r = group; r != NULL; r = r->next) {
		if (s->n_done == s->cap_done) {
			uint32_t cap = s->cap_done ? s->cap_done * 2 : 64;
			struct completion *g =
				realloc(s->done, cap * sizeof *g);
			if (g == NULL)
				abort(); /* cannot lose a completion */
			s->done = g;
			s->cap_done = cap;
		}
		s->done[s->n_done++] = (struct completion){r->seq, status};
		s->completed_seq = r->seq;
	}
}

static void *writer_main(void *arg)
{
	struct fs_storage *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->head == NULL && !s->stopping)
			pthread_cond_wait(&s->work, &s->mu);
		if (s->head == NULL)
			break;
		/* Take a group: everything queued, up to the batch limit. */
		struct request *group = s->head, *last = group;
		size_t bytes = group->records_len;
		while (last->next != NULL && bytes + last->next->records_len <=
						     s->o.max_batch_bytes) {
			last = last->next;
			bytes += last->records_len;
		}
		s->head = last->next;
		if (s->head == NULL)
			s->tail = NULL;
		last->next = NULL;
		int failed = s->failed;
		pthread_mutex_unlock(&s->mu);

		char err[STORAGE_ERR_MAX] = "";
		int rv = failed ? failed : process(s, group, err, sizeof err);

		if (rv != 0) {
			latch_failure(s, err);
			rv = BATON_EIO;
		}
		pthread_mutex_lock(&s->mu);
		push_completions(s, group, rv);
		s->stats.syncs = s->wal.syncs;
		s->stats.batches = s->wal.batches;
		s->stats.bytes_written = s->wal.bytes_written;
		s->stats.segments = s->wal.n_segs;
		s->stats.wal_bytes = baton__wal_bytes(&s->wal);
		pthread_cond_broadcast(&s->idle);
		pthread_mutex_unlock(&s->mu);
		while (group != NULL) {
			struct request *next = group->next;
			request_free(group);
			group = next;
		}
		if (s->o.notify != NULL)
			s->o.notify(s->o.notify_data);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- the interface ------------------------------------------------------- */

static int fs_load(struct baton_storage *b, struct baton_durable_state *out)
{
	struct fs_storage *s = fs_of(b);
	if (s->loaded_taken) {
		set_error(s, "load: the durable state was already handed over");
		return BATON_ESTATE;
	}
	*out = s->loaded;
	memset(&s->loaded, 0, sizeof s->loaded);
	s->loaded_taken = true;
	return 0;
}

static void *memdup(const void *p, size_t n)
{
	void *q = malloc(n > 0 ? n : 1);
	if (q != NULL && n > 0)
		memcpy(q, p, n);
	return q;
}

/* Encode what u asks to persist into r. */
static int build_request(struct fs_storage *s, const struct baton_update *u,
			 struct request *r)
{
	r->hs = u->hard_state_changed;
	r->term = u->hs_term;
	r->vote = u->hs_vote;
	if (u->snapshot != NULL) {
		r->has_snap = true;
		r->snap = *u->snapshot;
		r->snap_len = u->snapshot_len;
		r->snap_data = memdup(u->snapshot_data, u->snapshot_len);
		if (r->snap_data == NULL)
			return BATON_ENOMEM;
	}
	size_t len = u->truncate_from ? baton__wal_record_len(0) : 0;
	for (uint32_t i = 0; i < u->n_entries; i++) {
		if (u->entries[i].len > s->o.max_entry_bytes)
			return BATON_ETOOBIG;
		len += baton__wal_record_len(u->entries[i].len);
	}
	r->compact_upto = u->compact_upto;
	if (len == 0)
		return 0;
	r->records = malloc(len);
	if (r->records == NULL)
		return BATON_ENOMEM;
	uint8_t *p = r->records;
	if (u->truncate_from) {
		baton__wal_encode_truncate(p, u->truncate_from);
		p += baton__wal_record_len(0);
		r->n_records++;
		r->first_index = u->truncate_from;
	}
	for (uint32_t i = 0; i < u->n_entries; i++) {
		const struct baton_entry *e = &u->entries[i];
		baton__wal_encode_entry(p, e);
		p += baton__wal_record_len(e->len);
		r->n_records++;
		if (r->first_index == 0)
			r->first_index = e->index;
		r->max_index = e->index;
	}
	r->records_len = len;
	return 0;
}

static int fs_submit(struct baton_storage *b, const struct baton_update *u,
		     uint64_t *seq_out)
{
	struct fs_storage *s = fs_of(b);
	pthread_mutex_lock(&s->mu);
	int failed = s->failed;
	pthread_mutex_unlock(&s->mu);
	if (failed)
		return failed;
	struct request *r = calloc(1, sizeof *r);
	if (r == NULL)
		return BATON_ENOMEM;
	int rv = build_request(s, u, r);
	if (rv != 0) {
		set_error(s,
			  rv == BATON_ETOOBIG
				  ? "submit: an entry exceeds max_entry_bytes"
				  : "submit: out of memory");
		request_free(r);
		return rv;
	}
	pthread_mutex_lock(&s->mu);
	r->seq = ++s->next_seq;
	s->stats.submissions++;
	if (s->tail != NULL)
		s->tail->next = r;
	else
		s->head = r;
	s->tail = r;
	*seq_out = r->seq;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static unsigned fs_poll(struct baton_storage *b, baton_storage_done_cb cb,
			void *data)
{
	struct fs_storage *s = fs_of(b);
	pthread_mutex_lock(&s->mu);
	struct completion *done = s->done;
	uint32_t n = s->n_done;
	s->done = NULL;
	s->n_done = s->cap_done = 0;
	pthread_mutex_unlock(&s->mu);
	for (uint32_t i = 0; i < n; i++)
		cb(data, done[i].seq, done[i].status);
	free(done);
	return n;
}

static int fs_snapshot_begin(struct baton_storage *b,
			     const struct baton_snapshot_header *h,
			     struct baton_snapshot_sink **out)
{
	return baton__fs_snapshot_begin(&fs_of(b)->snaps, h, out);
}

static int fs_snapshot_read(struct baton_storage *b, baton_index index,
			    uint64_t offset, void *buf, size_t cap,
			    size_t *n_out)
{
	return baton__fs_snapshot_read(&fs_of(b)->snaps, index, offset, buf,
				       cap, n_out);
}

static const char *fs_errmsg(const struct baton_storage *b)
{
	/* A copy, since the writer thread may set a new message meanwhile. */
	struct fs_storage *s = (struct fs_storage *)b;
	pthread_mutex_lock(&s->mu);
	memcpy(s->errmsg_out, s->errmsg, sizeof s->errmsg_out);
	pthread_mutex_unlock(&s->mu);
	return s->errmsg_out;
}

static void fs_close(struct baton_storage *b)
{
	struct fs_storage *s = fs_of(b);
	if (s->thread_started) {
		pthread_mutex_lock(&s->mu);
		s->stopping = true;
		pthread_cond_signal(&s->work);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	baton__fs_snaps_close(&s->snaps);
	baton__wal_close(&s->wal);
	if (s->lock_fd >= 0)
		s->vfs->ops->close(s->vfs, s->lock_fd);
	baton_durable_state_free(&s->loaded);
	free(s->done);
	free(s->batch);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->idle);
	free(s);
}

static const struct baton_storage_ops fs_ops = {
	.load = fs_load,
	.submit = fs_submit,
	.poll = fs_poll,
	.snapshot_begin = fs_snapshot_begin,
	.snapshot_write = baton__fs_snapshot_write,
	.snapshot_commit = baton__fs_snapshot_commit,
	.snapshot_abort = baton__fs_snapshot_abort,
	.snapshot_commit_start = baton__fs_snapshot_commit_start,
	.snapshot_commit_wait = baton__fs_snapshot_commit_wait,
	.snapshot_read = fs_snapshot_read,
	.errmsg = fs_errmsg,
	.close = fs_close,
};

/* ---- opening ------------------------------------------------------------- */

void baton_fs_options_default(struct baton_fs_options *o)
{
	memset(o, 0, sizeof *o);
	o->segment_bytes = 64ull << 20;
	o->max_batch_bytes = 8ull << 20;
	o->max_entry_bytes = 64u << 20;
	o->max_snapshot_bytes = 4ull << 30;
	o->snapshot_queue_bytes = FS_SNAP_QUEUE_BYTES_DEFAULT;
}

/* Take the directory: create it, lock it, clear temporary files. */
static int take_dir(struct fs_storage *s, char *err, size_t errlen)
{
	struct baton_vfs *v = s->vfs;
	int rv = v->ops->mkdir(v, s->dir);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "create directory",
				     s->dir);
	char path[STORAGE_PATH_MAX];
	baton__path(path, s->dir, LOCK_NAME);
	rv = v->ops->open(v, path, BATON_VFS_CREATE, &s->lock_fd);
	if (rv != 0) {
		s->lock_fd = -1;
		return baton__io_err(err, errlen, rv, "open", path);
	}
	rv = v->ops->lock(v, s->lock_fd);
	if (rv == -EWOULDBLOCK)
		return baton__errf(err, errlen, BATON_ESTATE,
				   "%s is in use by another process", s->dir);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "lock", path);
	/* Leftovers of writes a crash interrupted; never the real files. */
	static const char *const tmps[] = {"meta.tmp", "identity.tmp",
					   FS_SNAP_OWN_TMP,
					   FS_SNAP_INSTALL_TMP};
	for (size_t i = 0; i < sizeof tmps / sizeof tmps[0]; i++) {
		baton__path(path, s->dir, tmps[i]);
		v->ops->unlink(v, path);
	}
	return 0;
}

static int recover(struct fs_storage *s, char *err, size_t errlen)
{
	struct baton_durable_state *d = &s->loaded;
	int rv = baton__meta_read(s->vfs, s->dir, &d->term, &d->vote, err,
				  errlen);
	if (rv != 0)
		return rv;
	rv = baton__snap_load(s->vfs, s->dir, FS_SNAP_NAME,
			      s->o.max_snapshot_bytes, &d->has_snapshot,
			      &d->snapshot, &d->snapshot_data, &d->snapshot_len,
			      err, errlen);
	if (rv != 0)
		return rv;
	if (d->has_snapshot) {
		rv = baton__fs_snaps_adopt(&s->snaps, err, errlen);
		if (rv != 0)
			return rv;
	}
	return baton__wal_open(&s->wal, s->vfs, s->dir, s->o.segment_bytes,
			       d->has_snapshot ? d->snapshot.meta.index : 0,
			       &d->entries, &d->n_entries, err, errlen);
}

int baton_fs_storage_open(const struct baton_fs_options *o,
			  struct baton_storage **out, char *err, size_t errlen)
{
	if (o->dir == NULL || o->dir[0] == '\0' ||
	    strlen(o->dir) + 64 > STORAGE_PATH_MAX || o->segment_bytes < 4096 ||
	    o->max_batch_bytes == 0)
		return baton__errf(err, errlen, BATON_EINVAL,
				   "storage options: need a directory (path "
				   "below %u bytes), segment_bytes >= 4096 "
				   "and max_batch_bytes > 0",
				   STORAGE_PATH_MAX - 64);
	struct fs_storage *s = calloc(1, sizeof *s);
	if (s == NULL)
		return baton__errf(err, errlen, BATON_ENOMEM, "out of memory");
	s->base.ops = &fs_ops;
	s->o = *o;
	snprintf(s->dir, sizeof s->dir, "%s", o->dir);
	s->o.dir = s->dir;
	s->vfs = o->vfs != NULL ? o->vfs : baton_vfs_posix();
	s->lock_fd = -1;
	baton__fs_snaps_init(&s->snaps, &s->base, s->vfs, s->dir,
			     o->snapshot_queue_bytes != 0
				     ? o->snapshot_queue_bytes
				     : FS_SNAP_QUEUE_BYTES_DEFAULT,
			     o->notify, o->notify_data);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->idle, NULL);
	int rv = take_dir(s, err, errlen);
	if (rv == 0 && o->identity != NULL)
		rv = baton__identity_check(s->vfs, s->dir, o->identity,
					   &s->identity, err, errlen);
	s->o.identity = NULL; /* the caller's; s->identity is ours */
	if (rv == 0)
		rv = recover(s, err, errlen);
	s->stats.segments = s->wal.n_segs;
	s->stats.wal_bytes = baton__wal_bytes(&s->wal);
	if (rv == 0 && pthread_create(&s->thread, NULL, writer_main, s) != 0)
		rv = baton__errf(err, errlen, BATON_ENOMEM,
				 "cannot start the writer thread");
	if (rv != 0) {
		fs_close(&s->base);
		return rv;
	}
	s->thread_started = true;
	*out = &s->base;
	return 0;
}

void baton_fs_storage_stats(struct baton_storage *b, struct baton_fs_stats *out)
{
	struct fs_storage *s = fs_of(b);
	pthread_mutex_lock(&s->mu);
	*out = s->stats;
	pthread_mutex_unlock(&s->mu);
}

void baton_fs_storage_identity(struct baton_storage *b,
			       struct baton_identity *out)
{
	struct fs_storage *s = fs_of(b);
	pthread_mutex_lock(&s->mu);
	*out = s->identity;
	pthread_mutex_unlock(&s->mu);
}

int baton_fs_storage_set_cluster_uuid(
	struct baton_storage *b, const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
	char *err, size_t errlen)
{
	struct fs_storage *s = fs_of(b);
	pthread_mutex_lock(&s->mu);
	struct baton_identity id = s->identity;
	pthread_mutex_unlock(&s->mu);
	int rv = baton__identity_set_uuid(s->vfs, s->dir, &id, uuid, err,
					  errlen);
	if (rv != 0)
		return rv;
	pthread_mutex_lock(&s->mu);
	s->identity = id;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int baton_fs_storage_flush(struct baton_storage *b)
{
	struct fs_storage *s = fs_of(b);
	pthread_mutex_lock(&s->mu);
	while (s->completed_seq < s->next_seq)
		pthread_cond_wait(&s->idle, &s->mu);
	int rv = s->failed;
	pthread_mutex_unlock(&s->mu);
	return rv;
}
