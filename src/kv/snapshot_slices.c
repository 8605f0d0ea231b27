/*
 * Views of the map as it was at their begin, read in slices while
 * kv_apply() goes on changing it (docs/node.md, "Snapshots off the event
 * loop", option 3 with pre-images). Three kinds share one walk: incremental
 * snapshots (kv_snapshot_begin..end), which encode each key, KEYS
 * (kv_keys_begin..end), which lists the keys live at begin that match its
 * pattern, and a migration's export (kv_export_begin..end), which writes
 * each key live at begin as an export record (migration.c). One view is
 * open at a time: the table tells only one.
 *
 * Below, "the snapshot" is the view of either kind. It walks the keys in the
 * canonical order (kv__rev64(hash), then the key: the order of kv_snapshot,
 * KEYS and SCAN, whatever the table's size) and remembers P, the position of
 * the last key it passed. Each step finds the first key after P afresh, from
 * P's bucket under the table's current mask, so a resize (growth or shrink)
 * between steps changes nothing; within a step the table does not change.
 *
 * The table tells the snapshot before it changes a key (t->snap,
 * kv__snap_touch). A key after P the snapshot holds nothing of is still
 * as it was at begin, since any earlier change would have been told: its
 * entry is copied into `kept`, or, if the key is absent, noted in `born`.
 * A step merges the table with `kept` in position order: a copy speaks for
 * its key (the table's entry is newer), a key in `born` is passed over.
 * A hash changed in place (HSET, HDEL, HINCRBY) is told of too
 * (kv__entry_touch) and copied whole, every field, before its first
 * change: a step writes a hash in one piece.
 *
 * FLUSHALL (kv__table_clear) takes the whole table aside as `frozen`
 * instead of copying every key: the map goes on from an empty table, and
 * the snapshot reads frozen from then on. Frozen is never changed again,
 * so no later write needs a copy.
 *
 * What a step passes it frees (copies, born notes, frozen entries), so that
 * no step frees much more than it wrote and memory comes back as the
 * snapshot goes.
 *
 * A copy that cannot be made (out of memory) fails the snapshot, not the
 * write: the next step returns BATON_ENOMEM. The map never depends on the
 * snapshot, so every node applies alike whatever its snapshots do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "internal.h"
#include "resp.h"

enum view_kind {
	VIEW_SNAPSHOT, /* kv_snapshot_begin */
	VIEW_KEYS,     /* kv_keys_begin */
	VIEW_EXPORT,   /* kv_export_begin */
};

struct kv__snap {
	struct baton_kv *kv;
	enum view_kind kind;
	int64_t now_ms;	  /* machine time at begin */
	uint64_t count;	  /* keys at begin */
	uint64_t visited; /* keys at begin handed on so far */
	/* Copies and their bytes: kv->snap_stats for a snapshot (INFO shows
	 * them), own_stats for KEYS. */
	struct kv_snapshot_stats *stats;
	struct kv_snapshot_stats own_stats;
	/* VIEW_SNAPSHOT: the encoding. */
	uint32_t format;
	struct kv__snap_writer w;
	bool header_written;
	struct kv_migration mig; /* the map's at begin */
	/* VIEW_EXPORT: where the records go during a step, and the bytes
	 * appended there so far. */
	struct baton_buf *out;
	uint64_t out_bytes;
	/* VIEW_KEYS: the pattern (owned; NULL for '*') and, during a step,
	 * where the matched keys go and how many went. */
	uint8_t *pattern;
	size_t pattern_len;
	struct baton_buf *bulks;
	uint64_t *matched;
	/* A string value written across steps: the key after P whose value
	 * the last step left part-way (a snapshot or an export). */
	struct kv__part part;
	/* A hash written across steps (a snapshot): the last field written
	 * (part.open tells whether one is). */
	struct kv__position field_p;
	bool finished; /* every key handed on (a snapshot: the trailer too) */
	int failed;    /* 0, or what every later step returns */
	struct kv__position p;
	struct kv__position
		p_before; /* P before the last step (spare buffer) */
	/* Keys present at begin and changed since, as they were; a copy's
	 * expiry is in expire_at_ms (0 for none): copies are in no heap. */
	struct kv__table kept;
	/* Keys absent at begin and created since (no value). */
	struct kv__table born;
	/* After a FLUSHALL: the table as it was (frozen_active). */
	struct kv__table frozen;
	bool frozen_active;
};

/* Say why in kv->err and return rv. */
static int fail(struct baton_kv *kv, int rv, const char *why)
{
	snprintf(kv->err, sizeof kv->err, "%s", why);
	return rv;
}

/* The bytes a copy holds (a hash's: every field). */
static uint64_t record_bytes(const struct kv__entry *e)
{
	return kv__entry_bytes(e);
}

/* Free the copies and the frozen table, and stop listening to the map's
 * writes: once finished or failed, nothing needs them. */
static void release(struct kv__snap *s)
{
	if (s->kv->table.snap == s)
		s->kv->table.snap = NULL;
	kv__table_free(&s->kept);
	kv__table_free(&s->born);
	kv__table_free(&s->frozen);
	s->frozen_active = false;
	s->stats->bytes_kept = 0;
}

/* Fail the snapshot: every later step returns rv. */
static int snap_fail(struct kv__snap *s, int rv, const char *why)
{
	BATON_ASSERT(rv < 0);
	BATON_ASSERT(!s->finished);
	if (s->failed == 0) {
		s->failed = rv;
		fail(s->kv, rv, why);
	}
	release(s);
	return rv;
}

/* Open a view of the kind on kv (nothing open): 0 or BATON_ENOMEM. */
static int view_open(struct baton_kv *kv, enum view_kind kind,
		     struct kv__snap **out)
{
	BATON_ASSERT(kv->snap == NULL && kv->table.snap == NULL);
	struct kv__snap *s = kv__calloc(1, sizeof *s);
	if (s == NULL)
		return fail(kv, BATON_ENOMEM, "out of memory");
	s->kv = kv;
	s->kind = kind;
	int rv = kind == VIEW_SNAPSHOT ? kv__snap_writer_init(&s->w) : 0;
	if (rv == 0)
		rv = kv__table_init(&s->kept, 0);
	if (rv == 0)
		rv = kv__table_init(&s->born, 0);
	if (rv != 0) {
		kv__snap_writer_free(&s->w);
		kv__table_free(&s->kept);
		kv__table_free(&s->born);
		kv__free(s);
		return fail(kv, rv, "out of memory");
	}
	s->now_ms = kv->now_ms;
	s->count = kv->table.count;
	s->mig = kv->mig;
	s->stats = kind == VIEW_SNAPSHOT ? &kv->snap_stats : &s->own_stats;
	memset(s->stats, 0, sizeof *s->stats);
	kv->snap = s;
	kv->table.snap = s;
	*out = s;
	return 0;
}

/* Close kv's view (of the kind), finished or not. */
static void view_close(struct baton_kv *kv, enum view_kind kind)
{
	struct kv__snap *s = kv->snap;
	if (s == NULL || s->kind != kind)
		return;
	release(s);
	BATON_ASSERT(kv->table.snap == NULL);
	kv__snap_writer_free(&s->w);
	kv__free(s->pattern);
	kv__free(s->p.key);
	kv__free(s->p_before.key);
	kv__free(s->field_p.key);
	kv__free(s);
	kv->snap = NULL;
}

/* BATON_EBUSY if a view of another kind than `kind` is open (the one
 * that asks must wait for it), else 0. */
static int other_kind_open(struct baton_kv *kv, enum view_kind kind)
{
	if (kv->snap == NULL || kv->snap->kind == kind)
		return 0;
	return fail(kv, BATON_EBUSY,
		    kv->snap->kind == VIEW_KEYS
			    ? "a KEYS is reading the map in slices: try again "
			      "when it ends"
		    : kv->snap->kind == VIEW_EXPORT
			    ? "a migration's export is reading the map: try "
			      "again when it ends"
			    : "an incremental snapshot is open: try again "
			      "when it ends");
}

int kv_snapshot_begin(struct baton_kv *kv, struct baton_machine_version v)
{
	int rv = other_kind_open(kv, VIEW_SNAPSHOT);
	if (rv != 0)
		return rv;
	/* Not a misuse: a backup and the node's own snapshot both read the
	 * map as snapshots, and whichever comes second waits. */
	if (kv->snap != NULL)
		return fail(kv, BATON_EBUSY,
			    "an incremental snapshot is open already: try "
			    "again when it ends");
	uint32_t format;
	rv = kv__snap_format(kv, v, &format);
	if (rv != 0)
		return rv;
	struct kv__snap *s;
	rv = view_open(kv, VIEW_SNAPSHOT, &s);
	if (rv != 0)
		return rv;
	s->format = format;
	return 0;
}

void kv_snapshot_end(struct baton_kv *kv)
{
	view_close(kv, VIEW_SNAPSHOT);
}

bool kv_snapshot_open(const struct baton_kv *kv)
{
	return kv->snap != NULL && kv->snap->kind == VIEW_SNAPSHOT;
}

void kv_snapshot_stats(const struct baton_kv *kv, struct kv_snapshot_stats *out)
{
	*out = kv->snap_stats;
}

int kv_keys_begin(struct baton_kv *kv, const uint8_t *pattern, size_t len)
{
	int rv = other_kind_open(kv, VIEW_KEYS);
	if (rv != 0)
		return rv;
	if (kv->snap != NULL)
		return fail(kv, BATON_EBUSY,
			    "a KEYS is reading the map in slices already: "
			    "try again when it ends");
	uint8_t *copy = NULL;
	bool every = len == 1 && pattern[0] == '*';
	if (!every) {
		copy = kv__malloc(len > 0 ? len : 1);
		if (copy == NULL)
			return fail(kv, BATON_ENOMEM, "out of memory");
		if (len > 0)
			memcpy(copy, pattern, len);
	}
	struct kv__snap *s;
	rv = view_open(kv, VIEW_KEYS, &s);
	if (rv != 0) {
		kv__free(copy);
		return rv;
	}
	s->pattern = copy;
	s->pattern_len = every ? 0 : len;
	return 0;
}

void kv_keys_end(struct baton_kv *kv)
{
	view_close(kv, VIEW_KEYS);
}

bool kv_keys_open(const struct baton_kv *kv)
{
	return kv->snap != NULL && kv->snap->kind == VIEW_KEYS;
}

/* ---- what the table tells ---- */

static bool holds(const struct kv__table *t, const uint8_t *key, size_t len)
{
	return t->count > 0 && kv__table_find(t, key, len) != NULL;
}

void kv__snap_touch(struct kv__snap *s, const struct kv__entry *cur,
		    uint64_t hash, const uint8_t *key, size_t len)
{
	/* Finished, failed or frozen snapshots stop listening (release,
	 * kv__snap_take_table). */
	BATON_ASSERT(s->failed == 0 && !s->finished && !s->frozen_active);
	BATON_ASSERT(cur == NULL || cur->hash == hash);
	if (kv__position_passed(&s->p, hash, key, len) ||
	    holds(&s->kept, key, len) || holds(&s->born, key, len))
		return;
	/* KEYS needs the key and its expiry, not the value. A hash is
	 * copied whole, every field: the snapshot writes it in one piece. */
	bool value = cur != NULL && s->kind != VIEW_KEYS;
	struct kv__entry *copy =
		value ? kv__entry_copy(cur) : kv__entry_new(key, len, NULL, 0);
	if (copy == NULL) {
		snap_fail(s, BATON_ENOMEM,
			  "out of memory keeping a key as it was for the "
			  "snapshot in progress");
		return;
	}
	if (cur != NULL) {
		copy->expire_at_ms =
			kv__has_expiry(cur) ? cur->expire_at_ms : 0;
		kv__table_insert(&s->kept, copy);
		s->stats->preimages++;
	} else {
		kv__table_insert(&s->born, copy);
	}
	s->stats->bytes_kept += record_bytes(copy);
}

bool kv__snap_take_table(struct kv__snap *s, struct kv__table *t)
{
	BATON_ASSERT(t->snap == s && t == &s->kv->table);
	BATON_ASSERT(!s->frozen_active && s->failed == 0 && !s->finished);
	struct kv__table fresh;
	if (kv__table_init(&fresh, 0) != 0) {
		kv__table_free(&fresh);
		snap_fail(s, BATON_ENOMEM,
			  "out of memory setting the table aside for the "
			  "snapshot in progress");
		return false;
	}
	kv__snap_set_aside(s, t);
	/* The new table needs no copies: the snapshot reads frozen now. */
	*t = fresh;
	return true;
}

void kv__snap_set_aside(struct kv__snap *s, struct kv__table *t)
{
	BATON_ASSERT(t->snap == s && t == &s->kv->table);
	BATON_ASSERT(!s->frozen_active && s->failed == 0 && !s->finished);
	s->frozen = *t;
	s->frozen.snap = NULL;
	memset(t, 0, sizeof *t);
	s->frozen_active = true;
}

/* ---- the steps ---- */

static int put_hash_part(struct kv__snap *s, const struct kv__entry *e,
			 uint64_t at, size_t room, bool *complete)
{
	BATON_ASSERT(s->format == KV_SNAPSHOT_FORMAT_3);
	struct kv__snap_writer *w = &s->w;
	*complete = false;
	int rv = 0;
	if (!s->part.open) {
		rv = kv__snap_put_hash_head(w, e);
		if (rv != 0)
			return rv;
		s->part.open = true;
		s->field_p.started = false;
	}
	uint64_t start = w->bytes;
	struct kv__walk f;
	kv__walk_start(&f, e->fields, &s->field_p);
	const struct kv__entry *last = NULL;
	while (f.e != NULL && (last == NULL || w->bytes - start < room)) {
		rv = kv__snap_put_field(w, f.e);
		if (rv != 0)
			return rv;
		last = f.e;
		kv__walk_next(&f);
	}
	if (last != NULL) {
		rv = kv__position_remember(&s->field_p, last);
		if (rv != 0)
			return rv;
	}
	if (f.e != NULL)
		return 0;
	rv = kv__snap_put_expiry(w, s->format, at);
	s->part.open = false;
	*complete = rv == 0;
	return rv;
}

static int export_hash_part(struct kv__snap *s, const struct kv__entry *e,
			    uint64_t at, size_t room, bool *complete)
{
	*complete = false;
	bool head = !s->part.open;
	if (head)
		s->field_p.started = false;
	struct kv__walk f;
	kv__walk_start(&f, e->fields, &s->field_p);
	BATON_ASSERT(f.e != NULL);
	/* The fields of this part: one at least, then while within room. */
	size_t n = 0, cap = 16, bytes = 0;
	const struct kv__entry **v = kv__malloc(cap * sizeof *v);
	if (v == NULL)
		return BATON_ENOMEM;
	while (f.e != NULL && (n == 0 || bytes < room)) {
		if (n == cap) {
			const struct kv__entry **w =
				kv__realloc(v, 2 * cap * sizeof *v);
			if (w == NULL) {
				kv__free(v);
				return BATON_ENOMEM;
			}
			v = w;
			cap *= 2;
		}
		v[n++] = f.e;
		bytes += 8 + f.e->key_len + f.e->val_len;
		kv__walk_next(&f);
	}
	int rv = kv__export_fields(s->out, e, at, head, v, n);
	if (rv == 0)
		rv = kv__position_remember(&s->field_p, v[n - 1]);
	kv__free(v);
	if (rv != 0)
		return rv;
	s->part.open = f.e != NULL;
	*complete = f.e == NULL;
	return 0;
}

/* Free t's entries after `from` and up to P, which the snapshot has passed
 * and will not read again. */
static void drop_passed(struct kv__snap *s, struct kv__table *t,
			const struct kv__position *from, bool copies)
{
	BATON_ASSERT(t->snap == NULL);
	for (;;) {
		struct kv__walk w;
		kv__walk_start(&w, t, from);
		if (w.e == NULL || !kv__position_passed(&s->p, w.e->hash,
							w.e->key, w.e->key_len))
			return;
		if (copies) {
			BATON_ASSERT(s->stats->bytes_kept >= record_bytes(w.e));
			s->stats->bytes_kept -= record_bytes(w.e);
		}
		/* The walk restarts: a delete may step the table's resize. */
		bool deleted = kv__table_delete(t, w.e->key, w.e->key_len);
		BATON_ASSERT(deleted);
	}
}

/* Is the string e written in parts, with `room` bytes left in the step?
 * A long value that does not fit: one step never writes much more than
 * its budget, whatever a value's size (a value of 500 MB written in one
 * go held the loop for seconds). */
static bool in_parts(const struct kv__snap *s, const struct kv__entry *e,
		     size_t room)
{
	if (s->part.open)
		return true;
	if (!kv__is_hash(e))
		return e->val_len > KV_PART_VALUE_BYTES_MIN &&
		       e->val_len > room;
	/* A hash in parts, a field or more at a time; one field cannot be
	 * cut. */
	if (e->fields->count < 2)
		return false;
	uint64_t bytes = kv__entry_bytes(e);
	return bytes > KV_PART_VALUE_BYTES_MIN && bytes > room;
}

/* The hash e in parts: its head first, then fields after the last one
 * written until `room` bytes went (one field at least), the expiry after
 * the last field. The fields are those of the hash at begin (e, or the
 * copy the first write to it made), walked from the last one by position
 * as the keys are, so the bytes are put_entry's. */
static int put_hash_part(struct kv__snap *s, const struct kv__entry *e,
			 uint64_t at, size_t room, bool *complete);
/* The same as export records: the first part a type 2 record of its
 * fields with the expiry, the others type 5 records of theirs. */
static int export_hash_part(struct kv__snap *s, const struct kv__entry *e,
			    uint64_t at, size_t room, bool *complete);

/* Hand the key e, as it was at begin with its expiry then (0: none), to
 * the view: a snapshot encodes it, KEYS lists it if it was live and
 * matches. With `room` bytes left in the step, a long string goes in
 * parts: *complete is false while some of it is still to write (the step
 * ends there, and the next one resumes it: P stays before the key, so it
 * is still as it was at begin, in the table or in `kept`). */
static int visit(struct kv__snap *s, const struct kv__entry *e, uint64_t at,
		 size_t room, bool *complete)
{
	*complete = true;
	if (s->kind == VIEW_SNAPSHOT && in_parts(s, e, room))
		return kv__is_hash(e)
			       ? put_hash_part(s, e, at, room, complete)
			       : kv__snap_put_string_part(&s->w, s->format, e,
							  at, &s->part, room,
							  complete);
	if (s->kind == VIEW_SNAPSHOT)
		return kv__snap_put_entry(&s->w, s->format, e, at);
	if (at != 0 && at <= (uint64_t)s->now_ms)
		return 0; /* expired at begin, as run_keys skips it */
	if (s->kind == VIEW_EXPORT) {
		size_t before = s->out->len;
		int rv = !in_parts(s, e, room)
				 ? kv__export_record(s->out, e, at)
			 : kv__is_hash(e)
				 ? export_hash_part(s, e, at, room, complete)
				 : kv__export_string_part(s->out, e, at,
							  &s->part, room,
							  complete);
		s->out_bytes += s->out->len - before;
		return rv;
	}
	if (s->pattern != NULL &&
	    !kv__glob_match(s->pattern, s->pattern_len, e->key, e->key_len))
		return 0;
	int rv = resp_bulk(s->bulks, e->key, e->key_len);
	if (rv == 0)
		(*s->matched)++;
	return rv;
}

/* Has a step that began with `start` bytes put and has handed on n keys
 * used its budget (bytes for a snapshot, keys for KEYS)? */
static bool step_full(const struct kv__snap *s, uint64_t start, size_t budget,
		      uint64_t n)
{
	if (s->kind == VIEW_SNAPSHOT)
		return s->w.bytes - start >= budget;
	if (s->kind == VIEW_EXPORT)
		return s->out_bytes - start >= budget;
	return n >= budget;
}

/* The bytes left in the step's budget (0 for KEYS, which has no parts). */
static size_t step_room(const struct kv__snap *s, uint64_t start, size_t budget)
{
	uint64_t used = s->kind == VIEW_SNAPSHOT ? s->w.bytes - start
			: s->kind == VIEW_EXPORT ? s->out_bytes - start
						 : budget;
	return used < budget ? budget - (size_t)used : 0;
}

/* Hand the keys after P, in order, to visit() until the step's budget is
 * used (one key at least) or none is left (*end). */
static int walk_entries(struct kv__snap *s, uint64_t start, size_t budget,
			bool *end)
{
	const struct kv__table *t =
		s->frozen_active ? &s->frozen : &s->kv->table;
	struct kv__walk table, kept;
	kv__walk_start(&table, t, &s->p);
	kv__walk_start(&kept, &s->kept, &s->p);
	const struct kv__entry *last = NULL;
	uint64_t n = 0;
	int rv = 0;
	*end = false;
	for (;;) {
		if (table.e == NULL && kept.e == NULL) {
			*end = true;
			break;
		}
		if (n > 0 && step_full(s, start, budget, n))
			break;
		int c = table.e == NULL ? 1
			: kept.e == NULL
				? -1
				: kv__position_cmp(table.e->hash, table.e->key,
						   table.e->key_len,
						   kept.e->hash, kept.e->key,
						   kept.e->key_len);
		const struct kv__entry *e;
		uint64_t at;
		if (c < 0) {
			e = table.e;
			kv__walk_next(&table);
			if (holds(&s->born, e->key, e->key_len)) {
				last = e;
				continue; /* created after begin */
			}
			at = kv__has_expiry(e) ? (uint64_t)e->expire_at_ms : 0;
		} else {
			/* The copy is the key at begin; on a tie the
			 * table's entry is newer. */
			e = kept.e;
			kv__walk_next(&kept);
			if (c == 0)
				kv__walk_next(&table);
			at = (uint64_t)e->expire_at_ms;
		}
		bool complete;
		rv = visit(s, e, at, step_room(s, start, budget), &complete);
		if (rv != 0)
			return rv;
		if (!complete)
			break; /* the next step resumes e; P stays before it */
		last = e;
		n++;
		s->visited++;
	}
	if (last == NULL)
		return 0;
	struct kv__position before = s->p;
	s->p = s->p_before;
	rv = kv__position_remember(&s->p, last);
	s->p_before = before;
	if (rv != 0)
		return rv;
	drop_passed(s, &s->kept, &s->p_before, true);
	drop_passed(s, &s->born, &s->p_before, true);
	if (s->frozen_active)
		drop_passed(s, &s->frozen, &s->p_before, false);
	return 0;
}

/* The view open on kv if it is of the kind, else NULL with kv_errmsg()
 * saying so. */
static struct kv__snap *open_view(struct baton_kv *kv, enum view_kind kind)
{
	if (kv->snap != NULL && kv->snap->kind == kind)
		return kv->snap;
	fail(kv, BATON_ESTATE,
	     kind == VIEW_SNAPSHOT ? "no incremental snapshot is open"
				   : "no KEYS is open");
	return NULL;
}

/* The key count and release at the end of a walk. */
static void view_finished(struct kv__snap *s)
{
	/* Each key at begin exactly once, else a write went untold. */
	BATON_ASSERT(s->visited == s->count);
	BATON_ASSERT(!s->finished && s->failed == 0);
	s->finished = true;
	release(s);
}

/* The start of a step of either kind: *out is the open view to go on
 * with, or NULL and the return value says why not (BATON_ESTATE: none of
 * this kind is open; its latched failure; 0 with *done: finished). */
static int step_view(struct baton_kv *kv, enum view_kind kind, bool *done,
		     struct kv__snap **out)
{
	struct kv__snap *s = open_view(kv, kind);
	*done = false;
	*out = NULL;
	if (s == NULL)
		return BATON_ESTATE;
	if (s->failed != 0)
		return s->failed;
	if (s->finished) {
		*done = true;
		return 0;
	}
	*out = s;
	return 0;
}

int kv_snapshot_step(struct baton_kv *kv, size_t budget,
		     int (*sink)(void *arg, const void *buf, size_t len),
		     void *arg, bool *done)
{
	struct kv__snap *s;
	int rv = step_view(kv, VIEW_SNAPSHOT, done, &s);
	if (s == NULL)
		return rv;
	s->w.sink = sink;
	s->w.arg = arg;
	uint64_t start = s->w.bytes;
	if (!s->header_written) {
		rv = kv__snap_put_header(&s->w, s->format, s->now_ms, s->count);
		s->header_written = true;
	}
	bool end = false;
	if (rv == 0)
		rv = walk_entries(s, start, budget, &end);
	kv->snap_stats.entries = s->visited;
	if (rv == 0 && end && kv__migration_any(&s->mig))
		rv = kv__snap_put_migration(&s->w, &s->mig);
	if (rv == 0 && end)
		rv = kv__snap_put_trailer(&s->w);
	else if (rv == 0)
		rv = kv__snap_writer_flush(&s->w);
	if (rv != 0)
		return snap_fail(s, rv,
				 rv == BATON_ENOMEM
					 ? "out of memory writing a snapshot"
					 : "the snapshot's sink failed");
	if (end) {
		view_finished(s);
		*done = true;
	}
	return 0;
}

int kv_keys_step(struct baton_kv *kv, size_t budget, struct baton_buf *bulks,
		 uint64_t *matched, bool *done)
{
	struct kv__snap *s;
	int rv = step_view(kv, VIEW_KEYS, done, &s);
	if (s == NULL)
		return rv;
	s->bulks = bulks;
	s->matched = matched;
	bool end = false;
	rv = walk_entries(s, 0, budget > 0 ? budget : 1, &end);
	s->bulks = NULL;
	s->matched = NULL;
	if (rv != 0)
		return snap_fail(s, rv, "out of memory listing keys");
	if (end) {
		view_finished(s);
		*done = true;
	}
	return 0;
}

int kv_export_begin(struct baton_kv *kv)
{
	int rv = other_kind_open(kv, VIEW_EXPORT);
	if (rv != 0)
		return rv;
	if (kv->snap != NULL)
		return fail(kv, BATON_ESTATE,
			    "an export is open already: end it first");
	struct kv__snap *s;
	return view_open(kv, VIEW_EXPORT, &s);
}

int kv_export_step(struct baton_kv *kv, size_t budget, struct baton_buf *out,
		   bool *done)
{
	struct kv__snap *s;
	int rv = step_view(kv, VIEW_EXPORT, done, &s);
	if (s == NULL)
		return rv;
	BATON_ASSERT(s->out == NULL);
	s->out = out;
	uint64_t start = s->out_bytes;
	bool end = false;
	rv = walk_entries(s, start, budget > 0 ? budget : 1, &end);
	s->out = NULL;
	if (rv != 0)
		return snap_fail(s, rv, "out of memory exporting the map");
	if (end) {
		view_finished(s);
		*done = true;
	}
	return 0;
}

void kv_export_end(struct baton_kv *kv)
{
	view_close(kv, VIEW_EXPORT);
}

bool kv_export_open(const struct baton_kv *kv)
{
	return kv->snap != NULL && kv->snap->kind == VIEW_EXPORT;
}
