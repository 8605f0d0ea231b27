/*
 * The simulated disk behind struct baton_storage: a FIFO of deep-copied
 * submissions in front of the durable state of sim_disk.h. Nothing here
 * draws on the seed; the world decides when each submission completes.
 *
 * A snapshot commit in the background (snapshot_commit_start) takes its
 * place in the same FIFO and tells the world as a submission does, so it
 * ends when the world completes it, neither at once nor never; its sink
 * then holds the result until snapshot_commit_wait. A blocking wait
 * finishes it at once and leaves its place in the FIFO empty, so the
 * world's count of completions still matches. A crash loses it.
 *
 * A snapshot's writes go into a queue, as on the real disk, where a thread
 * writes them while the loop goes on: the first write into an empty queue
 * puts a "drain" in the FIFO (and tells the world, as a submission does),
 * and the queue is empty again when the world completes it. Meanwhile the
 * queue takes at most SIM_SINK_QUEUE_WRITES writes and SIM_SINK_QUEUE_BYTES
 * bytes (a bigger write only into an empty queue); a write that does not
 * fit gets BATON_EAGAIN and is not taken, and the node writes it again
 * after the drain's completion (its storage_ready). So a node that writes
 * faster than its disk meets BATON_EAGAIN, decided by the world's disk
 * latencies alone. A crash drops the drain with the sink. Without a hook
 * (sim_disk_on_submit: a harness completing the submissions it made) the
 * queue drains at once and writes never wait.
 */
#include "world.h"

#include <stdlib.h>
#include <string.h>

/* A sink's queue: a few of the simulator's small slices (1 to 256 bytes,
 * 32 by default), so that a snapshot of a few kilobytes waits for its
 * disk now and then. */
#define SIM_SINK_QUEUE_WRITES 4u
#define SIM_SINK_QUEUE_BYTES 1024u

/* One submission: the persistence one update asked for, copied. */
struct sim_write {
	uint64_t seq;
	bool hs;
	baton_term term;
	baton_node_id vote;
	bool has_snap;
	struct baton_snapshot_header snap;
	uint8_t *snap_data;
	size_t snap_len;
	baton_index truncate_from;
	struct baton_entry *entries;
	uint32_t n_entries;
	baton_index compact_upto;
	/* Not a submission but an application snapshot's commit or the
	 * drain of its queue (no seq); its sink, or NULL once the sink went
	 * (a commit finished early by a blocking wait, an abort). */
	bool snapshot_commit;
	bool snapshot_drain;
	struct baton_snapshot_sink *sink;
	struct sim_write *next;
};

struct sim_storage {
	struct baton_storage base; /* first: the handle the world holds */
	struct sim_disk *disk;
	baton_node_id id;
	bool loaded;
	struct sim_write *queue, *queue_tail;
	uint64_t submitted; /* the last sequence number handed out */
	uint64_t durable;   /* submissions up to this one are durable */
	uint64_t reported;  /* ... and up to this one reported by poll */
	const char *err;
	void (*on_submit)(void *data);
	void *on_submit_data;
	/* The one application snapshot being written or committed (as the
	 * real storage, one at a time), until its commit, abort or wait. */
	struct baton_snapshot_sink *sink;
};

/* One application snapshot being written. */
struct baton_snapshot_sink {
	struct sim_storage *s; /* NULL once the storage let go (crash, close) */
	struct baton_snapshot_header h;
	uint8_t *buf;
	size_t len, cap;
	/* Taken since the last drain, which is in the FIFO (draining). */
	size_t queued_bytes;
	uint32_t queued_writes;
	bool draining;
	bool done; /* its commit ended: result is what wait returns */
	int result;
};

static const struct baton_storage_ops sim_disk_ops;

static struct sim_storage *to_sim(struct baton_storage *s)
{
	if (s == NULL || s->ops != &sim_disk_ops)
		abort(); /* not a simulated disk */
	return (struct sim_storage *)s;
}

/* ---- the durable state ---------------------------------------------------
 */

static void disk_truncate(struct sim_disk *d, baton_index from)
{
	while (d->log_n > 0 && d->log[d->log_n - 1].index >= from)
		free(d->log[--d->log_n].buf);
}

static void disk_compact(struct sim_disk *d, baton_index upto)
{
	uint32_t drop = 0;
	while (drop < d->log_n && d->log[drop].index <= upto)
		free(d->log[drop++].buf);
	if (drop == 0)
		return;
	memmove(d->log, d->log + drop, (d->log_n - drop) * sizeof *d->log);
	d->log_n -= drop;
}

static void disk_append(struct sim_storage *s, const struct baton_entry *e,
			uint32_t count)
{
	struct sim_disk *d = s->disk;
	for (uint32_t i = 0; i < count; i++) {
		if (d->log_n > 0 &&
		    d->log[d->log_n - 1].index + 1 != e[i].index) {
			fprintf(stderr, "baton-sim: node %llu: disk gap\n",
				(unsigned long long)s->id);
			abort();
		}
		if (d->log_n == d->log_cap) {
			d->log_cap = d->log_cap ? d->log_cap * 2 : 256;
			d->log = realloc(d->log, d->log_cap * sizeof *d->log);
			if (d->log == NULL)
				abort();
		}
		d->log[d->log_n] = e[i];
		d->log[d->log_n].buf = sim_xdup(e[i].buf, e[i].len);
		d->log_n++;
	}
}

/* Takes ownership of data (malloc'd). */
static void disk_set_snapshot(struct sim_disk *d,
			      const struct baton_snapshot_header *h,
			      uint8_t *data, size_t len)
{
	free(d->snap_data);
	d->has_snap = true;
	d->snap = *h;
	d->snap_data = data;
	d->snap_len = len;
}

/* The commit, at once or in the background: durable, or refused when the
 * durable snapshot is as new. */
static int commit_now(struct baton_snapshot_sink *k)
{
	struct sim_storage *s = k->s;
	struct sim_disk *d = s->disk;
	if (d->has_snap && d->snap.meta.index >= k->h.meta.index) {
		s->err = "a snapshot at a higher or equal index is durable";
		return BATON_ESTATE;
	}
	disk_set_snapshot(d, &k->h, k->buf, k->len);
	k->buf = NULL;
	return 0;
}

static void commit_end(struct baton_snapshot_sink *k)
{
	k->result = commit_now(k);
	k->done = true;
}

/* Power loss before the commit ended: it never becomes durable. */
static void commit_lost(struct baton_snapshot_sink *k)
{
	k->result = BATON_EIO;
	k->done = true;
	k->s = NULL;
}

void sim_disk_free(struct sim_disk *d)
{
	disk_truncate(d, 0);
	free(d->log);
	free(d->snap_data);
	memset(d, 0, sizeof *d);
}

/* ---- submissions ----------------------------------------------------------
 */

static void write_free(struct sim_write *wr)
{
	free(wr->snap_data);
	if (wr->entries != NULL)
		sim_free_entries(wr->entries, wr->n_entries);
	free(wr);
}

static int sim_load(struct baton_storage *bs, struct baton_durable_state *out)
{
	struct sim_storage *s = to_sim(bs);
	const struct sim_disk *d = s->disk;
	memset(out, 0, sizeof *out);
	out->term = d->term;
	out->vote = d->vote;
	out->has_snapshot = d->has_snap;
	if (d->has_snap) {
		out->snapshot = d->snap;
		out->snapshot_data = sim_xdup(d->snap_data, d->snap_len);
		out->snapshot_len = d->snap_len;
	}
	out->entries = sim_xmalloc(d->log_n * sizeof *out->entries);
	sim_copy_entries(out->entries, d->log, d->log_n);
	out->n_entries = d->log_n;
	s->loaded = true;
	return 0;
}

/* Queue wr behind everything submitted before it; the world schedules
 * its completion (on_submit). */
static void enqueue(struct sim_storage *s, struct sim_write *wr)
{
	if (s->queue_tail != NULL)
		s->queue_tail->next = wr;
	else
		s->queue = wr;
	s->queue_tail = wr;
	if (s->on_submit != NULL)
		s->on_submit(s->on_submit_data);
}

static int sim_submit(struct baton_storage *bs, const struct baton_update *u,
		      uint64_t *seq_out)
{
	struct sim_storage *s = to_sim(bs);
	if (!s->loaded)
		abort(); /* the contract: load() before the first submit */
	struct sim_write *wr = sim_xmalloc(sizeof *wr);
	memset(wr, 0, sizeof *wr);
	wr->seq = ++s->submitted;
	wr->hs = u->hard_state_changed;
	wr->term = u->hs_term;
	wr->vote = u->hs_vote;
	if (u->snapshot != NULL) {
		/* The core sends only the metadata; the version fields of an
		 * installed snapshot stay zero until the version rules. */
		wr->has_snap = true;
		wr->snap.meta = *u->snapshot;
		wr->snap_data = sim_xdup(u->snapshot_data, u->snapshot_len);
		wr->snap_len = u->snapshot_len;
	}
	wr->truncate_from = u->truncate_from;
	if (u->n_entries > 0) {
		wr->entries = sim_xmalloc(u->n_entries * sizeof *wr->entries);
		sim_copy_entries(wr->entries, u->entries, u->n_entries);
		wr->n_entries = u->n_entries;
	}
	wr->compact_upto = u->compact_upto;
	*seq_out = wr->seq;
	enqueue(s, wr);
	return 0;
}

void sim_disk_on_submit(struct baton_storage *bs, void (*cb)(void *data),
			void *data)
{
	struct sim_storage *s = to_sim(bs);
	s->on_submit = cb;
	s->on_submit_data = data;
}

void sim_disk_complete_next(struct baton_storage *bs)
{
	struct sim_storage *s = to_sim(bs);
	struct sim_write *wr = s->queue;
	if (wr == NULL)
		abort();
	s->queue = wr->next;
	if (s->queue == NULL)
		s->queue_tail = NULL;
	if (wr->snapshot_commit) {
		if (wr->sink != NULL)
			commit_end(wr->sink);
		free(wr);
		return;
	}
	if (wr->snapshot_drain) {
		if (wr->sink != NULL) {
			wr->sink->queued_bytes = 0;
			wr->sink->queued_writes = 0;
			wr->sink->draining = false;
		}
		free(wr);
		return;
	}
	struct sim_disk *d = s->disk;
	if (wr->hs) {
		d->term = wr->term;
		d->vote = wr->vote;
	}
	if (wr->has_snap) {
		/* The node may have saved a newer snapshot of its own while
		 * this one waited in the queue: never go back to an older
		 * one, or the log would no longer join up with it. */
		if (!d->has_snap || wr->snap.meta.index > d->snap.meta.index) {
			disk_set_snapshot(d, &wr->snap, wr->snap_data,
					  wr->snap_len);
			wr->snap_data = NULL;
		}
		disk_compact(d, wr->snap.meta.index);
	}
	if (wr->truncate_from != 0)
		disk_truncate(d, wr->truncate_from);
	disk_append(s, wr->entries, wr->n_entries);
	if (wr->compact_upto != 0)
		disk_compact(d, wr->compact_upto);
	s->durable = wr->seq;
	write_free(wr);
}

static unsigned sim_poll(struct baton_storage *bs, baton_storage_done_cb cb,
			 void *data)
{
	struct sim_storage *s = to_sim(bs);
	unsigned n = 0;
	/* cb may submit more: read the counters afresh each time. */
	while (s->reported < s->durable) {
		cb(data, ++s->reported, 0);
		n++;
	}
	return n;
}

void sim_disk_crash(struct baton_storage *bs)
{
	struct sim_storage *s = to_sim(bs);
	while (s->queue != NULL) {
		struct sim_write *wr = s->queue;
		s->queue = wr->next;
		if (wr->snapshot_commit && wr->sink != NULL)
			commit_lost(wr->sink);
		write_free(wr);
	}
	s->queue_tail = NULL;
	/* A snapshot still being written dies with the process. */
	if (s->sink != NULL)
		s->sink->s = NULL;
	s->sink = NULL;
}

/* ---- the application's snapshots ----------------------------------------
 */

static int sim_snapshot_begin(struct baton_storage *bs,
			      const struct baton_snapshot_header *h,
			      struct baton_snapshot_sink **out)
{
	struct sim_storage *s = to_sim(bs);
	if (s->sink != NULL) {
		s->err = "another snapshot is being written or committed";
		return BATON_EBUSY;
	}
	struct baton_snapshot_sink *k = sim_xmalloc(sizeof *k);
	memset(k, 0, sizeof *k);
	k->s = s;
	k->h = *h;
	s->sink = k;
	*out = k;
	return 0;
}

/* Behind the submissions queued so far, tell the world. */
static void queue_snapshot_item(struct sim_storage *s,
				struct baton_snapshot_sink *k, bool commit)
{
	struct sim_write *wr = sim_xmalloc(sizeof *wr);
	memset(wr, 0, sizeof *wr);
	wr->snapshot_commit = commit;
	wr->snapshot_drain = !commit;
	wr->sink = k;
	enqueue(s, wr);
}

static int sim_snapshot_write(struct baton_snapshot_sink *k, const void *buf,
			      size_t len)
{
	if (k->queued_writes > 0 &&
	    (k->queued_writes >= SIM_SINK_QUEUE_WRITES ||
	     k->queued_bytes + len > SIM_SINK_QUEUE_BYTES))
		return BATON_EAGAIN; /* until the drain in the FIFO ends */
	if (k->len + len > k->cap) {
		k->cap = k->len + len > 2 * k->cap ? k->len + len : 2 * k->cap;
		k->buf = realloc(k->buf, k->cap);
		if (k->buf == NULL)
			abort();
	}
	if (len > 0)
		memcpy(k->buf + k->len, buf, len);
	k->len += len;
	/* Without the hook, a harness completes only the submissions it
	 * made, and nobody would complete a drain: the queue stays empty. */
	if (k->s == NULL || k->s->on_submit == NULL)
		return 0;
	k->queued_bytes += len;
	k->queued_writes++;
	if (!k->draining) {
		k->draining = true;
		queue_snapshot_item(k->s, k, false);
	}
	return 0;
}

/* The sink goes: the storage may begin the next one; its places in the
 * FIFO stay, empty, so the world's completions still line up. */
static void sink_free(struct baton_snapshot_sink *k)
{
	if (k->s != NULL) {
		k->s->sink = NULL;
		for (struct sim_write *wr = k->s->queue; wr != NULL;
		     wr = wr->next)
			if (wr->sink == k)
				wr->sink = NULL;
	}
	free(k->buf);
	free(k);
}

static void sim_snapshot_abort(struct baton_snapshot_sink *k)
{
	sink_free(k);
}

static int sim_snapshot_commit(struct baton_snapshot_sink *k)
{
	/* Durable at once: the caller waits for it, as on the real disk. */
	int rv = k->s != NULL ? commit_now(k) : BATON_EIO;
	sink_free(k);
	return rv;
}

static int sim_snapshot_commit_start(struct baton_snapshot_sink *k)
{
	struct sim_storage *s = k->s;
	if (s == NULL) {
		sink_free(k); /* the storage is gone: as the contract says */
		return BATON_EIO;
	}
	queue_snapshot_item(s, k, true);
	return 0;
}

/* A blocking wait ends the commit now; its place in the FIFO stays, empty,
 * so the world's completions still line up with the queue. */
static void commit_finish_early(struct baton_snapshot_sink *k)
{
	if (k->s == NULL)
		abort(); /* waited for without a start */
	for (struct sim_write *wr = k->s->queue; wr != NULL; wr = wr->next)
		if (wr->snapshot_commit && wr->sink == k) {
			wr->sink = NULL;
			commit_end(k);
			return;
		}
	abort(); /* started, neither ended nor queued */
}

static int sim_snapshot_commit_wait(struct baton_snapshot_sink *k, bool block)
{
	if (!k->done && !block)
		return BATON_EAGAIN;
	if (!k->done)
		commit_finish_early(k);
	int rv = k->result;
	sink_free(k);
	return rv;
}

static int sim_snapshot_read(struct baton_storage *bs, baton_index index,
			     uint64_t offset, void *buf, size_t cap,
			     size_t *n_out)
{
	struct sim_storage *s = to_sim(bs);
	const struct sim_disk *d = s->disk;
	*n_out = 0;
	if (!d->has_snap || d->snap.meta.index != index) {
		s->err = "the durable snapshot is not the one asked for";
		return BATON_ENOTFOUND;
	}
	if (offset > d->snap_len) {
		s->err = "read beyond the end of the snapshot";
		return BATON_EINVAL;
	}
	size_t left = d->snap_len - (size_t)offset;
	size_t n = left < cap ? left : cap;
	if (n > 0)
		memcpy(buf, d->snap_data + offset, n);
	*n_out = n;
	return 0;
}

/* ---- the instance ---------------------------------------------------------
 */

static const char *sim_errmsg(const struct baton_storage *bs)
{
	const struct sim_storage *s = (const struct sim_storage *)bs;
	return s->err;
}

static void sim_close(struct baton_storage *bs)
{
	struct sim_storage *s = to_sim(bs);
	while (s->queue != NULL)
		sim_disk_complete_next(bs);
	/* A sink outlives the storage: its wait or abort must not reach it. */
	if (s->sink != NULL)
		s->sink->s = NULL;
	free(s);
}

static const struct baton_storage_ops sim_disk_ops = {
	.load = sim_load,
	.submit = sim_submit,
	.poll = sim_poll,
	.snapshot_begin = sim_snapshot_begin,
	.snapshot_write = sim_snapshot_write,
	.snapshot_commit = sim_snapshot_commit,
	.snapshot_abort = sim_snapshot_abort,
	.snapshot_commit_start = sim_snapshot_commit_start,
	.snapshot_commit_wait = sim_snapshot_commit_wait,
	.snapshot_read = sim_snapshot_read,
	.errmsg = sim_errmsg,
	.close = sim_close,
};

struct baton_storage *sim_disk_open(struct sim_disk *d, baton_node_id id)
{
	struct sim_storage *s = sim_xmalloc(sizeof *s);
	memset(s, 0, sizeof *s);
	s->base.ops = &sim_disk_ops;
	s->disk = d;
	s->id = id;
	s->err = "no error";
	return &s->base;
}
