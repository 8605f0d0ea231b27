/*
 * The map's part of a migration to another cluster (docs/relay.md, the
 * design; docs/kv.md "Migration", the rules): export records, the
 * replicated migration state, and applying the payloads of kinds 4 to 9.
 *
 * Old side: FENCE makes every later write a no-op replying
 * KV_FENCED_REPLY, until an UNFENCE (CONTROL) lifts it, which a SEAL
 * (the new cluster's authority seen) forbids for good. New side: IMPORT_BEGIN
 * empties the map, IMPORT_CHUNKs in sequence load the old map's export records,
 * IMPORT_END closes the snapshot at its old index S, IMPORT_ENTRYs replay the
 * old log's payloads after S exactly as the old map applied them, and AUTHORITY
 * ends the import: from then on the map takes writes. Until then a plain write
 * is a no-op replying KV_IMPORTING_REPLY.
 *
 * Every refusal is a no-op with a reply, the same on every node; only a
 * malformed payload (BATON_ECORRUPT) or lack of memory is an error.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resp.h"

/* The type byte of an export record. */
#define RECORD_STRING 1u
#define RECORD_HASH 2u
/* A string too long for one record: its length and first piece, then
 * pieces at their offsets (kv__export_string_part). */
#define RECORD_STRING_HEAD 3u
#define RECORD_STRING_PIECE 4u
/* More fields of the hash the records before it began (a hash too big for
 * one step: kv__export_fields). */
#define RECORD_HASH_MORE 5u
#define RECORD_FIELD_MIN_BYTES 8u /* a hash's field: two lengths */

bool kv__migration_any(const struct kv_migration *m)
{
	return m->fenced || m->fence_target[0] != '\0' || m->importing ||
	       m->import_index != 0 || m->snapshot_open ||
	       m->snapshot_index != 0 || m->snapshot_chunks != 0 ||
	       m->authority || m->authority_from != 0 ||
	       m->import_fence_index != 0 || kv__migration_any_2(m);
}

bool kv__migration_any_2(const struct kv_migration *m)
{
	return m->aborted || m->sealed || m->unfences != 0 ||
	       m->has_source_uuid;
}

void kv_migration_state(const struct baton_kv *kv, struct kv_migration *out)
{
	*out = kv->mig;
}

/* ---- export records ---- */

static int put_u32(struct baton_buf *out, size_t v)
{
	assert(v <= UINT32_MAX);
	uint8_t n[4];
	baton_le_put_u32(n, (uint32_t)v);
	return baton_buf_append(out, n, sizeof n);
}

static int put_u64(struct baton_buf *out, uint64_t v)
{
	uint8_t n[8];
	baton_le_put_u64(n, v);
	return baton_buf_append(out, n, sizeof n);
}

/* u32 length, then the bytes. */
static int put_bytes(struct baton_buf *out, const uint8_t *p, size_t len)
{
	int rv = put_u32(out, len);
	return rv == 0 && len > 0 ? baton_buf_append(out, p, len) : rv;
}

/* A hash's field count, then its fields in the canonical order. */
static int put_fields(struct baton_buf *out, const struct kv__table *t)
{
	assert(t->count > 0);
	int rv = put_u64(out, t->count);
	uint64_t cursor = 0;
	do {
		const struct kv__entry *f = kv__table_bucket(t, cursor);
		for (; rv == 0 && f != NULL; f = kv__table_after(t, f)) {
			rv = put_bytes(out, f->key, f->key_len);
			if (rv == 0)
				rv = put_bytes(out, f->val, f->val_len);
		}
		cursor = kv__table_next(t, cursor);
	} while (rv == 0 && cursor != 0);
	return rv;
}

int kv__export_record(struct baton_buf *out, const struct kv__entry *e,
		      uint64_t at)
{
	assert(at <= INT64_MAX);
	size_t start = out->len;
	uint8_t type = kv__is_hash(e) ? RECORD_HASH : RECORD_STRING;
	int rv = baton_buf_append(out, &type, 1);
	if (rv == 0)
		rv = put_bytes(out, e->key, e->key_len);
	if (rv == 0)
		rv = kv__is_hash(e) ? put_fields(out, e->fields)
				    : put_bytes(out, e->val, e->val_len);
	if (rv == 0)
		rv = put_u64(out, at);
	if (rv != 0)
		out->len = start;
	return rv;
}

int kv__export_string_part(struct baton_buf *out, const struct kv__entry *e,
			   uint64_t at, struct kv__part *part, size_t room,
			   bool *complete)
{
	assert(!kv__is_hash(e) && at <= INT64_MAX);
	assert(part->off <= e->val_len);
	*complete = false;
	size_t start = out->len;
	size_t left = e->val_len - part->off;
	size_t n = room < KV_PART_BYTES_MIN ? KV_PART_BYTES_MIN : room;
	n = n < left ? n : left;
	uint8_t type = part->open ? RECORD_STRING_PIECE : RECORD_STRING_HEAD;
	int rv = baton_buf_append(out, &type, 1);
	if (rv == 0)
		rv = put_bytes(out, e->key, e->key_len);
	if (rv == 0)
		rv = put_u64(out, part->open ? part->off : e->val_len);
	if (rv == 0)
		rv = put_bytes(out, e->val + part->off, n);
	if (rv == 0 && !part->open)
		rv = put_u64(out, at);
	if (rv != 0) {
		out->len = start;
		return rv;
	}
	part->open = true;
	part->off += n;
	if (part->off == e->val_len) {
		part->open = false;
		*complete = true;
	}
	return 0;
}

int kv__export_fields(struct baton_buf *out, const struct kv__entry *e,
		      uint64_t at, bool head,
		      const struct kv__entry *const *fields, size_t n)
{
	assert(kv__is_hash(e) && n >= 1 && at <= INT64_MAX);
	size_t start = out->len;
	uint8_t type = head ? RECORD_HASH : RECORD_HASH_MORE;
	int rv = baton_buf_append(out, &type, 1);
	if (rv == 0)
		rv = put_bytes(out, e->key, e->key_len);
	if (rv == 0)
		rv = put_u64(out, n);
	for (size_t i = 0; rv == 0 && i < n; i++) {
		rv = put_bytes(out, fields[i]->key, fields[i]->key_len);
		if (rv == 0)
			rv = put_bytes(out, fields[i]->val, fields[i]->val_len);
	}
	if (rv == 0 && head)
		rv = put_u64(out, at);
	if (rv != 0)
		out->len = start;
	return rv;
}

/* u32 length (at most max), then the bytes. */
static bool read_bytes(struct baton_le_reader *r, size_t max, const uint8_t **p,
		       uint32_t *len)
{
	return baton_le_read_u32(r, len) && *len <= max &&
	       baton_le_read_bytes(r, *len, p);
}

/* One record from r: its key, its type, for a string the value, for a
 * hash its field count and a reader over the fields; and its expiry. A
 * string's head has the value's length in `total` and its first piece in
 * val; a piece its offset in `total` and its bytes in val (no expiry). */
struct record {
	uint8_t type;
	const uint8_t *key, *val;
	uint32_t klen, vlen;
	uint64_t total;
	uint64_t n_fields;
	struct baton_le_reader fields;
	uint64_t at;
};

/* The length or offset, then the piece, of a type 3 or 4 record. */
static bool read_piece(struct baton_le_reader *r, struct record *rec)
{
	if (!baton_le_read_u64(r, &rec->total) ||
	    rec->total > KV_VALUE_BYTES_MAX ||
	    !read_bytes(r, KV_VALUE_BYTES_MAX, &rec->val, &rec->vlen))
		return false;
	if (rec->type == RECORD_STRING_HEAD)
		return rec->vlen <= rec->total;
	rec->at = 0;
	return rec->vlen <= KV_VALUE_BYTES_MAX - rec->total;
}

static bool record_read(struct baton_le_reader *r, struct record *rec)
{
	const uint8_t *type;
	if (!baton_le_read_bytes(r, 1, &type) ||
	    (type[0] < RECORD_STRING || type[0] > RECORD_HASH_MORE) ||
	    !read_bytes(r, KV_KEY_BYTES_MAX, &rec->key, &rec->klen))
		return false;
	rec->type = type[0];
	if (rec->type == RECORD_STRING_PIECE)
		return read_piece(r, rec);
	if (rec->type == RECORD_STRING_HEAD) {
		if (!read_piece(r, rec))
			return false;
	} else if (rec->type == RECORD_STRING) {
		if (!read_bytes(r, KV_VALUE_BYTES_MAX, &rec->val, &rec->vlen))
			return false;
	} else {
		if (!baton_le_read_u64(r, &rec->n_fields) ||
		    rec->n_fields == 0 ||
		    rec->n_fields > baton_le_left(r) / RECORD_FIELD_MIN_BYTES)
			return false;
		const uint8_t *start = r->p;
		for (uint64_t i = 0; i < rec->n_fields; i++) {
			const uint8_t *p;
			uint32_t n;
			if (!read_bytes(r, KV_VALUE_BYTES_MAX, &p, &n) ||
			    !read_bytes(r, KV_VALUE_BYTES_MAX, &p, &n))
				return false;
		}
		rec->fields = baton_le_reader(start, (size_t)(r->p - start));
		if (rec->type == RECORD_HASH_MORE) {
			rec->at = 0; /* the hash's first record gave it */
			return true;
		}
	}
	return baton_le_read_u64(r, &rec->at) && rec->at <= INT64_MAX;
}

int kv__records_check(const uint8_t *buf, size_t len)
{
	struct baton_le_reader r = baton_le_reader(buf, len);
	struct record rec;
	while (baton_le_left(&r) > 0)
		if (!record_read(&r, &rec))
			return BATON_ECORRUPT;
	return 0;
}

/* The next field and value of a hash record's fields, which record_read
 * walked already. */
static void next_field(struct baton_le_reader *r, const uint8_t **field,
		       uint32_t *flen, const uint8_t **val, uint32_t *vlen)
{
	bool ok = read_bytes(r, KV_VALUE_BYTES_MAX, field, flen) &&
		  read_bytes(r, KV_VALUE_BYTES_MAX, val, vlen);
	assert(ok);
	(void)ok;
}

/* The entry a record makes (no expiry yet): 0, BATON_ECORRUPT (a field
 * given twice) or BATON_ENOMEM. */
static int record_entry(const struct record *rec, struct kv__entry **out)
{
	if (rec->type == RECORD_STRING_HEAD) {
		*out = kv__entry_new_zeroed(rec->key, rec->klen,
					    (size_t)rec->total);
		if (*out == NULL)
			return BATON_ENOMEM;
		if (rec->vlen > 0)
			memcpy((*out)->val, rec->val, rec->vlen);
		return 0;
	}
	if (rec->type == RECORD_STRING) {
		*out = kv__entry_new(rec->key, rec->klen, rec->val, rec->vlen);
		return *out != NULL ? 0 : BATON_ENOMEM;
	}
	struct kv__entry *e = kv__hash_new(rec->key, rec->klen);
	if (e == NULL)
		return BATON_ENOMEM;
	struct baton_le_reader r = rec->fields;
	for (uint64_t i = 0; i < rec->n_fields; i++) {
		const uint8_t *field, *val;
		uint32_t flen, vlen;
		next_field(&r, &field, &flen, &val, &vlen);
		struct kv__entry *f = NULL;
		int rv = BATON_ECORRUPT;
		if (kv__table_find(e->fields, field, flen) == NULL) {
			f = kv__entry_new(field, flen, val, vlen);
			rv = f != NULL ? 0 : BATON_ENOMEM;
		}
		if (rv != 0) {
			kv__entry_free(e);
			return rv;
		}
		kv__table_insert(e->fields, f);
	}
	*out = e;
	return 0;
}

/* ---- applying ---- */

static int reply_fixed(struct baton_buf *out, const char *reply)
{
	return baton_buf_append(out, reply, strlen(reply));
}

static int apply_fence(struct baton_kv *kv, const struct kv__decoded *d,
		       struct baton_buf *out)
{
	assert(d->target_len <= KV_FENCE_TARGET_BYTES_MAX);
	assert(sizeof kv->mig.fence_target > KV_FENCE_TARGET_BYTES_MAX);
	if (kv->mig.aborted && !kv->mig.fenced)
		return resp_error(out, "ERR fence refused: the migration was "
				       "aborted (batonctl migrate abort)");
	int rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	/* A second FENCE changes nothing: the first named the target. The
	 * stamp does not move machine time, so that the new map, which
	 * takes a fence as an index step, ends at the same time. */
	if (!kv->mig.fenced) {
		kv->mig.fenced = true;
		if (d->target_len > 0)
			memcpy(kv->mig.fence_target, d->target, d->target_len);
		kv->mig.fence_target[d->target_len] = '\0';
	}
	return resp_simple(out, "OK");
}

static int apply_begin(struct baton_kv *kv, const struct kv__decoded *d,
		       struct baton_buf *out)
{
	struct kv_migration *m = &kv->mig;
	if (d->source_uuid != NULL && m->has_source_uuid &&
	    memcmp(d->source_uuid, m->source_uuid, KV_CLUSTER_UUID_BYTES) != 0)
		return resp_error(out, "ERR import refused: it comes from "
				       "another cluster (UUID) than the one "
				       "this cluster imported from first");
	int rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	if (d->source_uuid != NULL && !m->has_source_uuid) {
		m->has_source_uuid = true;
		memcpy(m->source_uuid, d->source_uuid, KV_CLUSTER_UUID_BYTES);
	}
	/* A BEGIN while a snapshot is open restarts it: the exporter starts
	 * over after a broken stream. */
	kv__table_clear(&kv->table);
	kv->mig.importing = true;
	kv->mig.snapshot_open = true;
	kv->mig.snapshot_index = d->old_index;
	kv->mig.snapshot_chunks = 0;
	kv->mig.import_fence_index = 0;
	kv->now_ms = d->time_ms;
	return resp_simple(out, "OK");
}

/* The refusal of a CHUNK or END that does not continue the open
 * snapshot. */
static int refuse_sequence(const struct baton_kv *kv, const char *what,
			   const struct kv__decoded *d, struct baton_buf *out)
{
	const struct kv_migration *m = &kv->mig;
	if (!m->snapshot_open)
		return resp_error(out,
				  "ERR import %s of snapshot %llu refused: no "
				  "snapshot is open (the import index is "
				  "%llu)",
				  what, (unsigned long long)d->old_index,
				  (unsigned long long)m->import_index);
	return resp_error(out,
			  "ERR import %s refused: expected snapshot %llu "
			  "chunk %u, found snapshot %llu chunk %u",
			  what, (unsigned long long)m->snapshot_index,
			  m->snapshot_chunks, (unsigned long long)d->old_index,
			  d->seq);
}

/* An export record made into an entry, waiting to be inserted; or a
 * piece (e NULL), written in place when its turn comes. */
struct staged {
	struct kv__entry *e;
	uint64_t at;
	struct record piece;
	/* A hash's further fields (type 5), made before the map changes. */
	struct kv__entry **more;
	size_t n_more;
};

/* The fields of a type 5 record as entries: 0 or BATON_ENOMEM. */
static int stage_more(const struct record *rec, struct staged *v)
{
	v->more = kv__calloc((size_t)rec->n_fields, sizeof *v->more);
	if (v->more == NULL)
		return BATON_ENOMEM;
	struct baton_le_reader r = rec->fields;
	for (uint64_t i = 0; i < rec->n_fields; i++) {
		const uint8_t *field, *val;
		uint32_t flen, vlen;
		next_field(&r, &field, &flen, &val, &vlen);
		v->more[i] = kv__entry_new(field, flen, val, vlen);
		if (v->more[i] == NULL)
			return BATON_ENOMEM;
		v->n_more++;
	}
	return 0;
}

/* More fields for the key's hash, in place: a later one of a field
 * replaces it. A key that is no hash (its first record skipped as
 * expired) takes nothing, on every node alike. Frees what it does not
 * keep; cannot fail. */
static void put_more(struct baton_kv *kv, const struct record *rec,
		     struct staged *v)
{
	struct kv__entry *h = kv__table_find(&kv->table, rec->key, rec->klen);
	bool take = h != NULL && kv__is_hash(h);
	if (take)
		kv__entry_touch(&kv->table, h);
	for (size_t i = 0; i < v->n_more; i++) {
		if (take)
			kv__table_put(h->fields, v->more[i]);
		else
			kv__entry_free(v->more[i]);
		v->more[i] = NULL;
	}
}

static void staged_free(struct staged *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		kv__entry_free(v[i].e);
		for (size_t j = 0; j < v[i].n_more; j++)
			kv__entry_free(v[i].more[j]);
		kv__free(v[i].more);
	}
	kv__free(v);
}

/* Make every record of the chunk into an entry, before the map changes:
 * 0, BATON_ECORRUPT or BATON_ENOMEM (nothing made). */
static int stage_records(const struct kv__decoded *d, struct staged **out,
			 size_t *n_out, size_t *expiring)
{
	struct baton_le_reader r = baton_le_reader(d->body, d->body_len);
	struct record rec;
	size_t n = 0;
	while (baton_le_left(&r) > 0) {
		bool ok = record_read(&r, &rec);
		assert(ok); /* decoded */
		(void)ok;
		n++;
	}
	struct staged *v = kv__calloc(n > 0 ? n : 1, sizeof *v);
	if (v == NULL)
		return BATON_ENOMEM;
	r = baton_le_reader(d->body, d->body_len);
	*expiring = 0;
	for (size_t i = 0; i < n; i++) {
		record_read(&r, &rec);
		if (rec.type == RECORD_STRING_PIECE ||
		    rec.type == RECORD_HASH_MORE) {
			v[i].piece = rec;
			int rv = rec.type == RECORD_HASH_MORE
					 ? stage_more(&rec, &v[i])
					 : 0;
			if (rv != 0) {
				staged_free(v, i + 1);
				return rv;
			}
			continue;
		}
		int rv = record_entry(&rec, &v[i].e);
		if (rv != 0) {
			staged_free(v, i);
			return rv;
		}
		v[i].at = rec.at;
		*expiring += rec.at != 0;
	}
	*out = v;
	*n_out = n;
	return 0;
}

/* A piece goes into its key's string at its offset; a key that is not a
 * string that long (its head was skipped as expired, or another record
 * replaced it) takes nothing: the same on every node. */
static void put_piece(struct baton_kv *kv, const struct record *rec)
{
	struct kv__entry *e = kv__table_find(&kv->table, rec->key, rec->klen);
	if (e == NULL || kv__is_hash(e) || rec->total > e->val_len ||
	    rec->vlen > e->val_len - rec->total)
		return;
	kv__entry_write_at(&kv->table, e, (size_t)rec->total, rec->val,
			   rec->vlen);
}

static int apply_chunk(struct baton_kv *kv, const struct kv__decoded *d,
		       struct baton_buf *out)
{
	struct kv_migration *m = &kv->mig;
	if (!m->snapshot_open || d->old_index != m->snapshot_index ||
	    d->seq != m->snapshot_chunks)
		return refuse_sequence(kv, "chunk", d, out);
	struct staged *v;
	size_t n, expiring;
	int rv = stage_records(d, &v, &n, &expiring);
	if (rv == BATON_ECORRUPT)
		snprintf(kv->err, sizeof kv->err,
			 "import chunk %u of snapshot %llu gives a hash field "
			 "twice",
			 d->seq, (unsigned long long)d->old_index);
	if (rv != 0)
		return rv;
	rv = kv__heap_reserve(&kv->table.expiring, expiring);
	if (rv == 0)
		rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
	if (rv != 0) {
		staged_free(v, n);
		return rv;
	}
	/* A key given twice in an import: the last record wins. A record
	 * already expired at the import's machine time is not a live key
	 * (the exporter skips those; a chunk from elsewhere may not). */
	for (size_t i = 0; i < n; i++) {
		struct kv__entry *e = v[i].e;
		v[i].e = NULL;
		if (e == NULL && v[i].piece.type == RECORD_HASH_MORE) {
			put_more(kv, &v[i].piece, &v[i]);
			continue;
		}
		if (e == NULL) {
			put_piece(kv, &v[i].piece);
			continue;
		}
		if (v[i].at != 0 && v[i].at <= (uint64_t)kv->now_ms) {
			kv__entry_free(e);
			continue;
		}
		kv__table_delete(&kv->table, e->key, e->key_len);
		kv__table_insert(&kv->table, e);
		if (v[i].at != 0)
			kv__expire_set(&kv->table, e, (int64_t)v[i].at);
	}
	staged_free(v, n);
	m->snapshot_chunks++;
	return resp_simple(out, "OK");
}

static int apply_end(struct baton_kv *kv, const struct kv__decoded *d,
		     struct baton_buf *out)
{
	struct kv_migration *m = &kv->mig;
	if (!m->snapshot_open || d->old_index != m->snapshot_index ||
	    d->seq != m->snapshot_chunks)
		return refuse_sequence(kv, "end", d, out);
	int rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	m->snapshot_open = false;
	m->import_index = d->old_index;
	return resp_simple(out, "OK");
}

static int apply_entry(struct baton_kv *kv, struct baton_machine_version v,
		       const struct kv__decoded *d, struct baton_buf *out)
{
	struct kv_migration *m = &kv->mig;
	if (!m->importing)
		return resp_error(out,
				  "ERR import entry %llu refused: no "
				  "import is in progress (no IMPORT_BEGIN "
				  "applied)",
				  (unsigned long long)d->old_index);
	if (m->snapshot_open)
		return resp_error(out,
				  "ERR import entry %llu refused: the snapshot "
				  "at old index %llu is still open (%u chunks "
				  "applied); entries apply after its end",
				  (unsigned long long)d->old_index,
				  (unsigned long long)m->snapshot_index,
				  m->snapshot_chunks);
	if (d->old_index <= m->import_index)
		return resp_simple(out, "SKIPPED"); /* a resend */
	struct kv__decoded inner;
	int rv = kv__decode(d->body, d->body_len, &inner);
	if (rv != 0)
		return rv; /* BATON_ENOMEM: decoded once already */
	assert(inner.format <= v.value && !kv__kind_imports(inner.kind));
	if (m->import_fence_index != 0) {
		/* The old map refused every write after its fence. */
		rv = reply_fixed(out, KV_FENCED_REPLY);
	} else if (inner.kind == KV_KIND_CONTROL) {
		/* The old cluster's own decisions: nothing to do here. */
		rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
		if (rv == 0)
			rv = resp_simple(out, "OK");
	} else if (inner.kind == KV_KIND_FENCE) {
		/* Not a fence here: the new map must not fence itself. */
		rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
		if (rv == 0) {
			m->import_fence_index = d->old_index;
			rv = resp_simple(out, "OK");
		}
	} else {
		rv = kv__apply_write(kv, v, &inner, out);
	}
	kv__decoded_free(&inner);
	if (rv == 0)
		m->import_index = d->old_index;
	return rv;
}

static int apply_authority(struct baton_kv *kv, const struct kv__decoded *d,
			   struct baton_buf *out)
{
	struct kv_migration *m = &kv->mig;
	if (!m->importing)
		return resp_error(out, "ERR authority refused: no import is in "
				       "progress (no IMPORT_BEGIN applied)");
	if (m->snapshot_open)
		return resp_error(out,
				  "ERR authority refused: the snapshot at old "
				  "index %llu is still open",
				  (unsigned long long)m->snapshot_index);
	if (m->aborted)
		return resp_error(out, "ERR authority refused: the migration "
				       "was aborted (batonctl migrate abort)");
	if (m->import_index < d->old_index)
		return resp_error(out,
				  "ERR authority from old index %llu refused: "
				  "the import has applied the old log through "
				  "index %llu only",
				  (unsigned long long)d->old_index,
				  (unsigned long long)m->import_index);
	int rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	m->authority = true;
	m->authority_from = d->old_index;
	m->importing = false;
	return resp_simple(out, "OK");
}

/* CONTROL: every refusal a no-op with an -ERR, alike everywhere. */
static int apply_control(struct baton_kv *kv, const struct kv__decoded *d,
			 struct baton_buf *out)
{
	struct kv_migration *m = &kv->mig;
	int rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	switch (d->control_op) {
	case KV_CONTROL_ABORT:
		if (m->authority)
			return resp_error(
				out,
				"ERR abort refused: this cluster "
				"holds write authority since old "
				"index %llu",
				(unsigned long long)m->authority_from);
		if (m->sealed)
			return resp_error(out,
					  "ERR abort refused: cluster %s took "
					  "write authority after this "
					  "cluster's fence",
					  m->fence_target);
		m->aborted = true;
		break;
	case KV_CONTROL_RESUME:
		m->aborted = false;
		break;
	case KV_CONTROL_UNFENCE:
		if (!m->fenced)
			return resp_error(out, "ERR unfence refused: this "
					       "cluster is not fenced");
		if (m->sealed)
			return resp_error(out,
					  "ERR unfence refused: cluster %s "
					  "took write authority after this "
					  "fence; lifting it would give two "
					  "clusters write authority",
					  m->fence_target);
		m->fenced = false;
		m->fence_target[0] = '\0';
		m->aborted = true;
		m->unfences++;
		break;
	default:
		assert(d->control_op == KV_CONTROL_SEAL);
		if (!m->fenced)
			return resp_error(out, "ERR seal refused: this cluster "
					       "is not fenced");
		m->sealed = true;
	}
	return resp_simple(out, "OK");
}

int kv__apply_migration(struct baton_kv *kv, struct baton_machine_version v,
			const struct kv__decoded *d, struct baton_buf *out)
{
	assert(d->kind >= KV_KIND_FENCE && d->kind <= KV_KIND_CONTROL);
	assert(d->format == KV_PAYLOAD_FORMAT_2 && v.value >= 2);
	if (d->kind == KV_KIND_FENCE)
		return apply_fence(kv, d, out);
	if (d->kind == KV_KIND_CONTROL)
		return apply_control(kv, d, out);
	if (kv->mig.fenced)
		return reply_fixed(out, KV_FENCED_REPLY);
	if (v.value < 3)
		return resp_error(out,
				  "ERR an import payload (kind %u) needs "
				  "machine version 3; the effective machine "
				  "version is %u",
				  d->kind, v.value);
	if (kv->mig.authority) {
		if (d->kind == KV_KIND_AUTHORITY)
			return resp_simple(out, "OK"); /* held already */
		return resp_error(
			out,
			"ERR import refused: this cluster holds write "
			"authority since old index %llu",
			(unsigned long long)kv->mig.authority_from);
	}
	/* batonctl migrate abort: the import stops at the abort's index,
	 * what was proposed before it applied included. */
	if (kv->mig.aborted && d->kind != KV_KIND_AUTHORITY)
		return resp_error(out, "ERR import refused: the migration was "
				       "aborted (batonctl migrate resume)");
	switch (d->kind) {
	case KV_KIND_IMPORT_BEGIN:
		return apply_begin(kv, d, out);
	case KV_KIND_IMPORT_CHUNK:
		return apply_chunk(kv, d, out);
	case KV_KIND_IMPORT_END:
		return apply_end(kv, d, out);
	case KV_KIND_IMPORT_ENTRY:
		return apply_entry(kv, v, d, out);
	default:
		assert(d->kind == KV_KIND_AUTHORITY);
		return apply_authority(kv, d, out);
	}
}
