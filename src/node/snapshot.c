/*
 * The node's own snapshots, written without pausing it (docs/node.md,
 * "Snapshots off the event loop"). A snapshot at the applied index s
 * goes through three phases:
 *
 *   begin      the core's metadata at s, a sink of the storage, and the
 *              machine's snapshot_begin (it fixes its state as of s);
 *   writing    one slice per baton_pipeline_work() call: the machine's
 *              next `snapshot_slice_bytes`, handed to the storage's sink
 *              (into the page cache). Applies go on between slices: the
 *              machine keeps what the snapshot still needs;
 *   committing the storage syncs and renames the file on a thread of its
 *              own and says so through its notify callback.
 *
 * Then BATON_EVENT_SNAPSHOT_TAKEN tells the core the index and size, not
 * the bytes: the core compacts its log, and its chunks to followers are
 * read back from the durable file (fill_chunk), so no copy of the whole
 * state is ever held in memory. A machine without snapshot_begin is asked
 * for its bytes in one call, and a storage without a background commit
 * commits on the spot; both are still correct, just not pause-free.
 *
 * A snapshot being written is abandoned when the machine is about to be
 * restored (a leader's snapshot) or converted (a version entry), when the
 * storage fails, and at destroy; the next one is due again at once.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SNAPSHOT_SLICE_BYTES_DEFAULT ((size_t)64 << 10)

static bool incremental(const struct baton_pipeline *p)
{
	return p->machine->ops->snapshot_begin != NULL;
}

static size_t slice_budget(const struct baton_pipeline *p)
{
	return p->c.snapshot_slice_bytes > 0 ? p->c.snapshot_slice_bytes
					     : SNAPSHOT_SLICE_BYTES_DEFAULT;
}

static void reset(struct pl_snapshot *s)
{
	s->phase = PL_SNAP_NONE;
	s->sink = NULL;
	s->machine_open = false;
	s->blocked = false;
	baton_buf_free(&s->slice);
}

/* The machine's part is over (done or not): let it free its copies. */
static void machine_end(struct baton_pipeline *p)
{
	if (!p->snap.machine_open)
		return;
	p->snap.machine_open = false;
	p->machine->ops->snapshot_end(p->machine);
}

/* Drop the snapshot being written: the machine's part, the sink. */
static void drop(struct baton_pipeline *p)
{
	struct pl_snapshot *s = &p->snap;
	BATON_ASSERT(s->phase == PL_SNAP_WRITING);
	machine_end(p);
	p->storage->ops->snapshot_abort(s->sink);
	reset(s);
}

/* Why a snapshot did not make it, for the log; EIO stops the node. */
static void failed(struct baton_pipeline *p, int rv, const char *what)
{
	if (rv == BATON_EIO) {
		pl_storage_failed(p, rv);
		return;
	}
	pl_log(p, BATON_PIPELINE_LOG_WARN,
	       "snapshot at index %" PRIu64 " %s: %s", p->snap.h.meta.index,
	       what, baton_strerror(rv));
}

void pl_snapshot_abandon(struct baton_pipeline *p, const char *why)
{
	struct pl_snapshot *s = &p->snap;
	if (s->phase != PL_SNAP_WRITING)
		return; /* a commit in flight finishes on its own */
	pl_log(p, BATON_PIPELINE_LOG_INFO,
	       "snapshot at index %" PRIu64 " abandoned after %" PRIu64
	       " bytes: %s",
	       s->h.meta.index, s->bytes, why);
	drop(p);
	p->stats.snapshots_abandoned++;
}

/* The file is durable (rv 0) or not: tell the core, or say why. */
static void finish(struct baton_pipeline *p, int rv)
{
	struct pl_snapshot *s = &p->snap;
	baton_index index = s->h.meta.index;
	uint64_t bytes = s->bytes;
	uint32_t slices = s->slices;
	uint64_t took_ms = pl_now(p) - s->began_ms;
	reset(s);
	if (rv != 0) {
		failed(p, rv, "not saved");
		return;
	}
	struct baton_event ev = {.type = BATON_EVENT_SNAPSHOT_TAKEN};
	ev.u.snapshot_taken.index = index;
	ev.u.snapshot_taken.data = NULL; /* served from storage */
	ev.u.snapshot_taken.len = (size_t)bytes;
	/* Before the step: its update judges the next snapshot due from
	 * this one. */
	baton_index before = p->snapshot_index;
	if (index > p->snapshot_index)
		p->snapshot_index = index;
	rv = pl_step(p, &ev);
	if (rv != 0) {
		/* A newer snapshot (a leader's) took its place meanwhile. */
		if (p->snapshot_index == index)
			p->snapshot_index = before;
		pl_log(p, BATON_PIPELINE_LOG_INFO,
		       "snapshot at index %" PRIu64
		       " saved but superseded (%s)",
		       index, baton_strerror(rv));
		return;
	}
	p->stats.snapshots_taken++;
	p->stats.last_index = index;
	p->stats.last_bytes = bytes;
	p->stats.last_slices = slices;
	p->stats.last_ms = took_ms;
	pl_log(p, BATON_PIPELINE_LOG_INFO,
	       "snapshot at index %" PRIu64 " (%" PRIu64
	       " bytes, %u slices, %" PRIu64 " ms)",
	       index, bytes, slices, took_ms);
}

/* Everything is written: make it durable, in the background if the
 * storage can. */
static void commit(struct baton_pipeline *p)
{
	struct pl_snapshot *s = &p->snap;
	const struct baton_storage_ops *ops = p->storage->ops;
	if (ops->snapshot_commit_start == NULL) {
		finish(p, ops->snapshot_commit(s->sink));
		return;
	}
	int rv = ops->snapshot_commit_start(s->sink);
	if (rv != 0) {
		finish(p, rv);
		return;
	}
	s->phase = PL_SNAP_COMMITTING;
}

/* Hand the slice to the sink. BATON_EAGAIN: the storage's queue is full
 * and took nothing; the slice waits for its notify (pl_snapshot_poll). */
static int write_slice(struct baton_pipeline *p)
{
	struct pl_snapshot *s = &p->snap;
	if (s->slice.len == 0)
		return 0;
	int rv = p->storage->ops->snapshot_write(s->sink, s->slice.data,
						 s->slice.len);
	if (rv == BATON_EAGAIN) {
		s->blocked = true;
		return rv;
	}
	s->bytes += s->slice.len;
	s->slice.len = 0;
	return rv;
}

void pl_snapshot_begin(struct baton_pipeline *p)
{
	struct pl_snapshot *s = &p->snap;
	/* One at a time; never past a stall: the machine does not hold what
	 * follows; and only news: a leader's snapshot installed since it
	 * became due may cover everything applied. */
	if (s->phase != PL_SNAP_NONE)
		return; /* still due: after this one */
	p->snapshot_due = false;
	if (p->stalled_index != 0 || p->storage_failed || p->retired ||
	    p->applied <= p->snapshot_index)
		return;
	memset(&s->h, 0, sizeof s->h);
	int rv = baton_raft_snapshot_meta(p->raft, p->applied, &s->h.meta);
	if (rv != 0)
		return;
	BATON_ASSERT(s->h.meta.index == p->applied);
	BATON_ASSERT(s->h.meta.versions.machine.value ==
		     p->versions.machine.value);
	/* The bytes due for the next one count from here (snapshot_log_bytes).
	 */
	p->applied_bytes = 0;
	/* The machine first, before any file: busy (a read of its own, as
	 * batond's KEYS in slices, holds its one view), it is asked again
	 * at the next flush, quietly. */
	if (incremental(p)) {
		rv = p->machine->ops->snapshot_begin(p->machine,
						     p->versions.machine);
		if (rv == BATON_EBUSY) {
			p->snapshot_due = true;
			return;
		}
		if (rv != 0) {
			failed(p, rv, "failed");
			return;
		}
		s->machine_open = true;
	}
	rv = p->storage->ops->snapshot_begin(p->storage, &s->h, &s->sink);
	if (rv != 0) {
		machine_end(p);
		failed(p, rv, "not started");
		return;
	}
	s->bytes = 0;
	s->slices = 0;
	s->began_ms = pl_now(p);
	baton_buf_init(&s->slice);
	if (!incremental(p)) {
		/* The whole state in one call, on the loop; then written
		 * like the last slice. */
		rv = p->machine->ops->snapshot(p->machine, p->versions.machine,
					       &s->slice);
		s->slices = 1;
	}
	if (rv != 0) {
		p->storage->ops->snapshot_abort(s->sink);
		reset(s);
		failed(p, rv, "failed");
		return;
	}
	s->phase = PL_SNAP_WRITING;
}

bool baton_pipeline_compact_soon(struct baton_pipeline *p, uint64_t min_bytes)
{
	if (p->snapshot_due || p->snap.phase != PL_SNAP_NONE ||
	    p->stalled_index != 0 || p->applied_bytes == 0 ||
	    p->applied_bytes < min_bytes)
		return false;
	p->snapshot_due = true;
	return true;
}

bool baton_pipeline_has_work(const struct baton_pipeline *p)
{
	return p->snap.phase == PL_SNAP_WRITING && !p->snap.blocked;
}

/* One turn: the slice the storage could not take yet, else the machine's
 * next one; once the machine is done and all is written, the commit. */
void baton_pipeline_work(struct baton_pipeline *p)
{
	BATON_ASSERT(!p->stepping);
	struct pl_snapshot *s = &p->snap;
	if (s->phase != PL_SNAP_WRITING || s->blocked)
		return;
	int rv = write_slice(p);
	if (rv == 0 && s->machine_open) {
		bool done = false;
		rv = p->machine->ops->snapshot_step(p->machine, slice_budget(p),
						    &s->slice, &done);
		s->slices++;
		if (rv == 0 && done)
			machine_end(p);
		if (rv == 0)
			rv = write_slice(p);
	}
	if (rv == BATON_EAGAIN)
		return;
	if (rv != 0) {
		drop(p);
		failed(p, rv, "failed");
		return;
	}
	if (s->machine_open)
		return;
	BATON_ASSERT(s->slice.len == 0);
	baton_buf_free(&s->slice);
	commit(p);
}

void pl_snapshot_poll(struct baton_pipeline *p)
{
	struct pl_snapshot *s = &p->snap;
	/* The storage's queue has room again: the next turn writes. */
	if (s->phase == PL_SNAP_WRITING)
		s->blocked = false;
	if (s->phase != PL_SNAP_COMMITTING)
		return;
	int rv = p->storage->ops->snapshot_commit_wait(s->sink, false);
	if (rv != BATON_EAGAIN)
		finish(p, rv);
}

void pl_snapshot_destroy(struct baton_pipeline *p)
{
	struct pl_snapshot *s = &p->snap;
	if (s->phase == PL_SNAP_WRITING) {
		drop(p);
	} else if (s->phase == PL_SNAP_COMMITTING) {
		/* The storage's thread may be using the sink: wait. Whether
		 * it became durable, the next start will see. */
		(void)p->storage->ops->snapshot_commit_wait(s->sink, true);
	}
	reset(s);
}

/* ---- serving the core's chunks from storage ------------------------------ */

bool pl_snapshot_fill_chunk(struct baton_pipeline *p, struct baton_msg *m)
{
	struct baton_msg_snapshot *c = &m->u.snapshot;
	BATON_ASSERT(m->type == BATON_MSG_SNAPSHOT && c->chunk == NULL);
	if (c->chunk_len == 0)
		return true;
	if (p->chunk_cap < c->chunk_len) {
		uint8_t *g = realloc(p->chunk, c->chunk_len);
		if (g == NULL)
			return false; /* dropped: the leader sends it again */
		p->chunk = g;
		p->chunk_cap = c->chunk_len;
	}
	size_t got = 0;
	while (got < c->chunk_len) {
		size_t n = 0;
		int rv = p->storage->ops->snapshot_read(
			p->storage, c->meta.index, c->offset + got,
			p->chunk + got, c->chunk_len - got, &n);
		if (rv != 0 || n == 0) {
			pl_log(p, BATON_PIPELINE_LOG_WARN,
			       "snapshot at index %" PRIu64
			       " could not be read back at offset %" PRIu64
			       " for node %" PRIu64 ": %s",
			       c->meta.index, c->offset + got, m->to,
			       rv != 0 ? p->storage->ops->errmsg(p->storage)
				       : "it ends early");
			return false;
		}
		got += n;
	}
	c->chunk = p->chunk;
	return true;
}
