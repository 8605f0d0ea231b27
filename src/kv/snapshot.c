/*
 * Snapshots of the map. Format 1 (machine version 1):
 *
 *   "BKVS"  magic, 4 bytes
 *   u32     format 1
 *   u64     count of entries
 *   count times: u32 key length, key, u32 value length, value
 *   u64     XXH3-64 of every byte before it
 *
 * Format 2 (machine version 2) adds machine time and expiries:
 *
 *   "BKVS", u32 format 2, u64 machine time (unix ms), u64 count
 *   count times: u32 key length, key, u32 value length, value,
 *                u64 expiry (unix ms, 1..INT64_MAX; 0 for none)
 *   u64     XXH3-64 of every byte before it
 *
 * Format 3 (machine version 3) adds a type to each entry:
 *
 *   "BKVS", u32 format 3, u64 machine time (unix ms), u64 count
 *   count times: u32 key length, key, u8 type, then
 *                type 1 (string): u32 value length, value
 *                type 2 (hash):   u64 fields (>= 1), each u32 field
 *                                 length, field, u32 value length, value
 *                u64 expiry (unix ms, 1..INT64_MAX; 0 for none)
 *   u64     XXH3-64 of every byte before it
 *
 * A map that applied a migration payload (migration.c) has a migration
 * section between the entries and the checksum, in every format; a map
 * that never did has none, and its bytes are those of a release without
 * migrations:
 *
 *   "MIGR"  tag, u32 section format 1,
 *   u8 flags (1 fenced, 2 importing, 4 snapshot open, 8 authority),
 *   u8 fence target length (<= 255), the target (no NUL),
 *   u64 import index, u64 snapshot index, u32 snapshot chunks,
 *   u64 authority from, u64 import fence index
 *   section format 2 only (written when one of these is set, so a map
 *   without them has the bytes of format 1): u8 flags (1 aborted,
 *   2 sealed, 4 source UUID known), u32 unfences, the source cluster's
 *   16-byte UUID (zeros when not known)
 *
 * Little-endian. Entries, and a hash's fields, come in the table's
 * canonical order (sorted by reversed hash, then key), so equal maps give
 * equal bytes. The expiry heap is not written: a restore rebuilds it, and
 * its order depends on the keys and expiries alone.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "le.h"

#define SNAP_HEADER_BYTES 16u	/* format 1 */
#define SNAP_HEADER_2_BYTES 24u /* format 2: machine time too */
#define SNAP_TRAILER_BYTES 8u
#define SNAP_ENTRY_MIN_BYTES 8u	   /* format 1 */
#define SNAP_ENTRY_2_MIN_BYTES 16u /* format 2: the expiry too */
#define SNAP_ENTRY_3_MIN_BYTES 17u /* format 3: and the type */
#define SNAP_FIELD_MIN_BYTES 8u	   /* a hash's field: two lengths */
/* The type byte of a format-3 entry. */
#define SNAP_TYPE_STRING 1u
#define SNAP_TYPE_HASH 2u
/* The migration section. */
#define SNAP_MIGRATION_TAG "MIGR"
#define SNAP_MIGRATION_FORMAT 2u
#define SNAP_MIGRATION_FIXED_BYTES 46u /* format 1: all but the target */
#define SNAP_MIGRATION_2_BYTES (1u + 4u + KV_CLUSTER_UUID_BYTES)
#define SNAP_MIG2_ABORTED 1u
#define SNAP_MIG2_SEALED 2u
#define SNAP_MIG2_SOURCE_UUID 4u
#define SNAP_MIG2_FLAGS 7u
#define SNAP_MIG_FENCED 1u
#define SNAP_MIG_IMPORTING 2u
#define SNAP_MIG_SNAPSHOT_OPEN 4u
#define SNAP_MIG_AUTHORITY 8u
#define SNAP_MIG_FLAGS 15u
/* Small pieces are gathered into chunks of this size for the sink. */
#define SNAP_CHUNK_BYTES ((size_t)64 << 10)

int kv__snap_writer_init(struct kv__snap_writer *w)
{
	memset(w, 0, sizeof *w);
	w->sum = baton__hasher_new();
	w->chunk = kv__malloc(SNAP_CHUNK_BYTES);
	return w->sum != NULL && w->chunk != NULL ? 0 : BATON_ENOMEM;
}

void kv__snap_writer_free(struct kv__snap_writer *w)
{
	if (w->sum != NULL)
		baton__hasher_free(w->sum);
	kv__free(w->chunk);
	w->sum = NULL;
	w->chunk = NULL;
}

int kv__snap_writer_flush(struct kv__snap_writer *w)
{
	if (w->used == 0)
		return 0;
	baton__hasher_update(w->sum, w->chunk, w->used);
	int rv = w->sink(w->arg, w->chunk, w->used);
	w->used = 0;
	return rv;
}

/* Gather small pieces; hand big ones to the sink as they are. */
static int put(struct kv__snap_writer *w, const void *buf, size_t len)
{
	w->bytes += len;
	if (len <= SNAP_CHUNK_BYTES - w->used) {
		if (len > 0)
			memcpy(w->chunk + w->used, buf, len);
		w->used += len;
		return 0;
	}
	int rv = kv__snap_writer_flush(w);
	if (rv != 0)
		return rv;
	if (len <= SNAP_CHUNK_BYTES / 2) {
		memcpy(w->chunk, buf, len);
		w->used = len;
		return 0;
	}
	baton__hasher_update(w->sum, buf, len);
	return w->sink(w->arg, buf, len);
}

/* u32 length, then the bytes. */
static int put_bytes(struct kv__snap_writer *w, const uint8_t *p, size_t len)
{
	assert(len <= KV_KEY_BYTES_MAX && len <= KV_VALUE_BYTES_MAX);
	uint8_t n[4];
	baton_le_put_u32(n, (uint32_t)len);
	int rv = put(w, n, 4);
	return rv == 0 ? put(w, p, len) : rv;
}

/* A hash's field count, then its fields in the canonical order. */
static int put_fields(struct kv__snap_writer *w, const struct kv__table *t)
{
	assert(t->count > 0);
	uint8_t n[8];
	baton_le_put_u64(n, t->count);
	int rv = put(w, n, sizeof n);
	uint64_t cursor = 0, written = 0;
	do {
		const struct kv__entry *f = kv__table_bucket(t, cursor);
		for (; rv == 0 && f != NULL;
		     f = kv__table_after(t, f), written++) {
			rv = put_bytes(w, f->key, f->key_len);
			if (rv == 0)
				rv = put_bytes(w, f->val, f->val_len);
		}
		cursor = kv__table_next(t, cursor);
	} while (rv == 0 && cursor != 0);
	assert(rv != 0 || written == t->count);
	return rv;
}

int kv__snap_put_entry(struct kv__snap_writer *w, uint32_t format,
		       const struct kv__entry *e, uint64_t expire_at_ms)
{
	assert(expire_at_ms <= INT64_MAX);
	assert(format == KV_SNAPSHOT_FORMAT_3 || !kv__is_hash(e));
	int rv = put_bytes(w, e->key, e->key_len);
	if (rv == 0 && format == KV_SNAPSHOT_FORMAT_3) {
		uint8_t type =
			kv__is_hash(e) ? SNAP_TYPE_HASH : SNAP_TYPE_STRING;
		rv = put(w, &type, 1);
	}
	if (rv == 0)
		rv = kv__is_hash(e) ? put_fields(w, e->fields)
				    : put_bytes(w, e->val, e->val_len);
	if (rv == 0 && format >= KV_SNAPSHOT_FORMAT_2) {
		uint8_t at[8];
		baton_le_put_u64(at, expire_at_ms);
		rv = put(w, at, sizeof at);
	}
	return rv;
}

int kv__snap_put_hash_head(struct kv__snap_writer *w, const struct kv__entry *e)
{
	assert(kv__is_hash(e) && e->fields->count > 0);
	int rv = put_bytes(w, e->key, e->key_len);
	uint8_t type = SNAP_TYPE_HASH;
	if (rv == 0)
		rv = put(w, &type, 1);
	uint8_t n[8];
	baton_le_put_u64(n, e->fields->count);
	return rv == 0 ? put(w, n, sizeof n) : rv;
}

int kv__snap_put_field(struct kv__snap_writer *w, const struct kv__entry *f)
{
	int rv = put_bytes(w, f->key, f->key_len);
	return rv == 0 ? put_bytes(w, f->val, f->val_len) : rv;
}

int kv__snap_put_expiry(struct kv__snap_writer *w, uint32_t format,
			uint64_t expire_at_ms)
{
	assert(expire_at_ms <= INT64_MAX);
	if (format < KV_SNAPSHOT_FORMAT_2)
		return 0;
	uint8_t at[8];
	baton_le_put_u64(at, expire_at_ms);
	return put(w, at, sizeof at);
}

int kv__snap_put_string_part(struct kv__snap_writer *w, uint32_t format,
			     const struct kv__entry *e, uint64_t expire_at_ms,
			     struct kv__part *part, size_t room, bool *complete)
{
	assert(!kv__is_hash(e) && expire_at_ms <= INT64_MAX);
	int rv = 0;
	*complete = false;
	if (!part->open) {
		/* The bytes before the value's, exactly as put_entry. */
		rv = put_bytes(w, e->key, e->key_len);
		if (rv == 0 && format == KV_SNAPSHOT_FORMAT_3) {
			uint8_t type = SNAP_TYPE_STRING;
			rv = put(w, &type, 1);
		}
		uint8_t n[4];
		baton_le_put_u32(n, (uint32_t)e->val_len);
		if (rv == 0)
			rv = put(w, n, sizeof n);
		if (rv != 0)
			return rv;
		part->open = true;
		part->off = 0;
	}
	assert(part->off <= e->val_len);
	size_t left = e->val_len - part->off;
	size_t n = room < KV_PART_BYTES_MIN ? KV_PART_BYTES_MIN : room;
	n = n < left ? n : left;
	rv = put(w, e->val + part->off, n);
	if (rv != 0)
		return rv;
	part->off += n;
	if (part->off < e->val_len)
		return 0;
	rv = kv__snap_put_expiry(w, format, expire_at_ms);
	part->open = false;
	*complete = rv == 0;
	return rv;
}

int kv__snap_put_header(struct kv__snap_writer *w, uint32_t format,
			int64_t now_ms, uint64_t count)
{
	assert(format >= KV_SNAPSHOT_FORMAT &&
	       format <= KV_SNAPSHOT_FORMAT_MAX);
	assert(now_ms >= 0);
	uint8_t head[SNAP_HEADER_2_BYTES];
	memcpy(head, KV_SNAPSHOT_MAGIC, 4);
	baton_le_put_u32(head + 4, format);
	size_t n = SNAP_HEADER_BYTES;
	if (format >= KV_SNAPSHOT_FORMAT_2) {
		baton_le_put_u64(head + 8, (uint64_t)now_ms);
		n = SNAP_HEADER_2_BYTES;
	}
	baton_le_put_u64(head + n - 8, count);
	return put(w, head, n);
}

int kv__snap_put_migration(struct kv__snap_writer *w,
			   const struct kv_migration *m)
{
	assert(kv__migration_any(m));
	size_t target = strlen(m->fence_target);
	assert(target <= KV_FENCE_TARGET_BYTES_MAX);
	uint8_t b[SNAP_MIGRATION_FIXED_BYTES + KV_FENCE_TARGET_BYTES_MAX +
		  SNAP_MIGRATION_2_BYTES];
	uint8_t *p = b;
	bool format_2 = kv__migration_any_2(m);
	memcpy(p, SNAP_MIGRATION_TAG, 4);
	baton_le_put_u32(p + 4, format_2 ? 2u : 1u);
	p[8] = (uint8_t)((m->fenced ? SNAP_MIG_FENCED : 0) |
			 (m->importing ? SNAP_MIG_IMPORTING : 0) |
			 (m->snapshot_open ? SNAP_MIG_SNAPSHOT_OPEN : 0) |
			 (m->authority ? SNAP_MIG_AUTHORITY : 0));
	p[9] = (uint8_t)target;
	memcpy(p + 10, m->fence_target, target);
	p += 10 + target;
	baton_le_put_u64(p, m->import_index);
	baton_le_put_u64(p + 8, m->snapshot_index);
	baton_le_put_u32(p + 16, m->snapshot_chunks);
	baton_le_put_u64(p + 20, m->authority_from);
	baton_le_put_u64(p + 28, m->import_fence_index);
	p += 36;
	assert((size_t)(p - b) == SNAP_MIGRATION_FIXED_BYTES + target);
	if (format_2) {
		p[0] = (uint8_t)((m->aborted ? SNAP_MIG2_ABORTED : 0) |
				 (m->sealed ? SNAP_MIG2_SEALED : 0) |
				 (m->has_source_uuid ? SNAP_MIG2_SOURCE_UUID
						     : 0));
		baton_le_put_u32(p + 1, m->unfences);
		memcpy(p + 5, m->source_uuid, KV_CLUSTER_UUID_BYTES);
		p += SNAP_MIGRATION_2_BYTES;
	}
	return put(w, b, (size_t)(p - b));
}

/* The migration section from r, exactly to its end, into *m: 0,
 * BATON_ECORRUPT or BATON_EVERSION (a later section format). */
static int read_migration(struct baton_le_reader *r, struct kv_migration *m)
{
	memset(m, 0, sizeof *m);
	const uint8_t *tag, *head, *target;
	uint32_t format;
	if (!baton_le_read_bytes(r, 4, &tag) ||
	    memcmp(tag, SNAP_MIGRATION_TAG, 4) != 0 ||
	    !baton_le_read_u32(r, &format) || format == 0)
		return BATON_ECORRUPT;
	if (format > SNAP_MIGRATION_FORMAT)
		return BATON_EVERSION;
	if (!baton_le_read_bytes(r, 2, &head) || (head[0] & ~SNAP_MIG_FLAGS) ||
	    !baton_le_read_bytes(r, head[1], &target) ||
	    memchr(target, 0, head[1]) != NULL ||
	    !baton_le_read_u64(r, &m->import_index) ||
	    !baton_le_read_u64(r, &m->snapshot_index) ||
	    !baton_le_read_u32(r, &m->snapshot_chunks) ||
	    !baton_le_read_u64(r, &m->authority_from) ||
	    !baton_le_read_u64(r, &m->import_fence_index))
		return BATON_ECORRUPT;
	if (format >= 2) {
		const uint8_t *f2, *uuid;
		if (!baton_le_read_bytes(r, 1, &f2) ||
		    (f2[0] & ~SNAP_MIG2_FLAGS) ||
		    !baton_le_read_u32(r, &m->unfences) ||
		    !baton_le_read_bytes(r, KV_CLUSTER_UUID_BYTES, &uuid))
			return BATON_ECORRUPT;
		m->aborted = f2[0] & SNAP_MIG2_ABORTED;
		m->sealed = f2[0] & SNAP_MIG2_SEALED;
		m->has_source_uuid = f2[0] & SNAP_MIG2_SOURCE_UUID;
		memcpy(m->source_uuid, uuid, KV_CLUSTER_UUID_BYTES);
		/* One form per state: format 2 only when it holds more. */
		if (!kv__migration_any_2(m))
			return BATON_ECORRUPT;
	}
	if (baton_le_left(r) != 0)
		return BATON_ECORRUPT;
	m->fenced = head[0] & SNAP_MIG_FENCED;
	m->importing = head[0] & SNAP_MIG_IMPORTING;
	m->snapshot_open = head[0] & SNAP_MIG_SNAPSHOT_OPEN;
	m->authority = head[0] & SNAP_MIG_AUTHORITY;
	memcpy(m->fence_target, target, head[1]);
	m->fence_target[head[1]] = '\0';
	/* One form per state: a map without one has no section. */
	return kv__migration_any(m) ? 0 : BATON_ECORRUPT;
}

int kv__snap_put_trailer(struct kv__snap_writer *w)
{
	int rv = kv__snap_writer_flush(w);
	if (rv != 0)
		return rv;
	uint8_t trailer[SNAP_TRAILER_BYTES];
	baton_le_put_u64(trailer, baton__hasher_digest(w->sum));
	return w->sink(w->arg, trailer, sizeof trailer);
}

static uint64_t expiry_of(const struct kv__entry *e)
{
	return kv__has_expiry(e) ? (uint64_t)e->expire_at_ms : 0;
}

static int write_all(struct kv__snap_writer *w, const struct baton_kv *kv,
		     uint32_t format)
{
	const struct kv__table *t = &kv->table;
	int rv = kv__snap_put_header(w, format, kv->now_ms, t->count);
	uint64_t written = 0, cursor = 0;
	do {
		const struct kv__entry *e = kv__table_bucket(t, cursor);
		for (; rv == 0 && e != NULL;
		     e = kv__table_after(t, e), written++)
			rv = kv__snap_put_entry(w, format, e, expiry_of(e));
		cursor = kv__table_next(t, cursor);
	} while (rv == 0 && cursor != 0);
	if (rv != 0)
		return rv;
	assert(written == t->count);
	if (kv__migration_any(&kv->mig))
		rv = kv__snap_put_migration(w, &kv->mig);
	return rv == 0 ? kv__snap_put_trailer(w) : rv;
}

/* Say why in kv->err (a diagnostic, writable through const). */
static int fail(const struct baton_kv *kv, int rv, const char *why)
{
	char *err = (char *)kv->err;
	snprintf(err, sizeof kv->err, "%s", why);
	return rv;
}

int kv__snap_format(const struct baton_kv *kv, struct baton_machine_version v,
		    uint32_t *format)
{
	if (v.value < KV_MACHINE_VERSION_MIN ||
	    v.value > KV_MACHINE_VERSION_MAX)
		return fail(kv, BATON_EVERSION,
			    "a snapshot under an unknown machine version");
	/* Each machine version has its own format so far. */
	*format = v.value;
	if (*format == KV_SNAPSHOT_FORMAT && kv->table.expiring.n > 0)
		return fail(kv, BATON_EVERSION,
			    "keys have expiries, which snapshot format 1 "
			    "(machine version 1) cannot hold");
	if (*format < KV_SNAPSHOT_FORMAT_3 && kv->table.hashes > 0)
		return fail(kv, BATON_EVERSION,
			    "keys are hashes, which snapshot formats 1 and 2 "
			    "(machine versions 1 and 2) cannot hold");
	return 0;
}

int kv_snapshot(const struct baton_kv *kv, struct baton_machine_version v,
		int (*sink)(void *arg, const void *buf, size_t len), void *arg)
{
	uint32_t format;
	int rv = kv__snap_format(kv, v, &format);
	if (rv != 0)
		return rv;
	struct kv__snap_writer w;
	rv = kv__snap_writer_init(&w);
	if (rv == 0) {
		w.sink = sink;
		w.arg = arg;
		rv = write_all(&w, kv, format);
	}
	kv__snap_writer_free(&w);
	return rv;
}

/* u32 length (at most max), then the bytes. */
static bool read_bytes(struct baton_le_reader *r, size_t max, const uint8_t **p,
		       uint32_t *len)
{
	return baton_le_read_u32(r, len) && *len <= max &&
	       baton_le_read_bytes(r, *len, p);
}

/* A hash's fields (format 3) into the new entry *out, for key. */
static int read_hash(struct baton_le_reader *r, const uint8_t *key,
		     uint32_t klen, struct kv__entry **out)
{
	uint64_t n;
	if (!baton_le_read_u64(r, &n) || n == 0 ||
	    n > baton_le_left(r) / SNAP_FIELD_MIN_BYTES)
		return BATON_ECORRUPT;
	struct kv__entry *e = kv__hash_new(key, klen);
	if (e == NULL)
		return BATON_ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *field, *val;
		uint32_t flen, vlen;
		struct kv__entry *f = NULL;
		int rv = BATON_ECORRUPT;
		if (read_bytes(r, KV_VALUE_BYTES_MAX, &field, &flen) &&
		    read_bytes(r, KV_VALUE_BYTES_MAX, &val, &vlen) &&
		    kv__table_find(e->fields, field, flen) == NULL) {
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

/* One entry's value, as its format writes it, into the new entry *out. */
static int read_value(struct baton_le_reader *r, uint32_t format,
		      const uint8_t *key, uint32_t klen, struct kv__entry **out)
{
	uint8_t type = SNAP_TYPE_STRING;
	const uint8_t *p;
	if (format == KV_SNAPSHOT_FORMAT_3) {
		if (!baton_le_read_bytes(r, 1, &p))
			return BATON_ECORRUPT;
		type = p[0];
	}
	if (type == SNAP_TYPE_HASH)
		return read_hash(r, key, klen, out);
	const uint8_t *val;
	uint32_t vlen;
	if (type != SNAP_TYPE_STRING ||
	    !read_bytes(r, KV_VALUE_BYTES_MAX, &val, &vlen))
		return BATON_ECORRUPT;
	*out = kv__entry_new(key, klen, val, vlen);
	return *out != NULL ? 0 : BATON_ENOMEM;
}

/* Read the entries into t, and the migration section after them, if
 * any, into *m; ECORRUPT unless they fill [off, end) exactly. */
static int read_entries(struct kv__table *t, struct kv_migration *m,
			const uint8_t *buf, size_t off, size_t end,
			uint64_t count, uint32_t format)
{
	struct baton_le_reader r = baton_le_reader(buf + off, end - off);
	for (uint64_t i = 0; i < count; i++) {
		uint32_t klen;
		const uint8_t *key;
		if (!read_bytes(&r, KV_KEY_BYTES_MAX, &key, &klen) ||
		    kv__table_find(t, key, klen) != NULL)
			return BATON_ECORRUPT;
		struct kv__entry *e;
		int rv = read_value(&r, format, key, klen, &e);
		if (rv != 0)
			return rv;
		uint64_t at = 0;
		if (format >= KV_SNAPSHOT_FORMAT_2 &&
		    (!baton_le_read_u64(&r, &at) || at > INT64_MAX))
			rv = BATON_ECORRUPT;
		if (rv == 0 && at != 0 &&
		    kv__heap_reserve(&t->expiring, 1) != 0)
			rv = BATON_ENOMEM;
		if (rv != 0) {
			kv__entry_free(e);
			return rv;
		}
		kv__table_insert(t, e);
		if (at != 0)
			kv__expire_set(t, e, (int64_t)at);
	}
	memset(m, 0, sizeof *m);
	return baton_le_left(&r) == 0 ? 0 : read_migration(&r, m);
}

int kv_restore(struct baton_kv *kv, struct baton_machine_version v,
	       const uint8_t *buf, size_t len)
{
	kv_snapshot_end(kv);
	kv->err[0] = '\0';
	if (v.value < KV_MACHINE_VERSION_MIN ||
	    v.value > KV_MACHINE_VERSION_MAX)
		return fail(kv, BATON_EVERSION,
			    "a snapshot under an unknown machine version");
	if (len < 8 || memcmp(buf, KV_SNAPSHOT_MAGIC, 4) != 0)
		return fail(kv, BATON_ECORRUPT,
			    "no " KV_SNAPSHOT_MAGIC " magic");
	uint32_t format = baton_le_get_u32(buf + 4);
	if (format == 0)
		return fail(kv, BATON_ECORRUPT, "snapshot format 0");
	if (format > KV_SNAPSHOT_FORMAT_MAX || format > v.value)
		return fail(kv, BATON_EVERSION,
			    "a snapshot format newer than the machine "
			    "version allows (format N needs version N)");
	bool v2 = format >= KV_SNAPSHOT_FORMAT_2;
	size_t head = v2 ? SNAP_HEADER_2_BYTES : SNAP_HEADER_BYTES;
	if (len < head + SNAP_TRAILER_BYTES)
		return fail(kv, BATON_ECORRUPT, "a truncated snapshot");
	size_t end = len - SNAP_TRAILER_BYTES;
	if (baton__checksum(buf, end) != baton_le_get_u64(buf + end))
		return fail(kv, BATON_ECORRUPT, "a bad snapshot checksum");
	uint64_t now = v2 ? baton_le_get_u64(buf + 8) : 0;
	uint64_t count = baton_le_get_u64(buf + head - 8);
	size_t entry_min = format == KV_SNAPSHOT_FORMAT_3
				   ? SNAP_ENTRY_3_MIN_BYTES
			   : v2 ? SNAP_ENTRY_2_MIN_BYTES
				: SNAP_ENTRY_MIN_BYTES;
	if (now > INT64_MAX || count > (end - head) / entry_min)
		return fail(kv, BATON_ECORRUPT, "a bad snapshot header");
	struct kv__table t;
	struct kv_migration m;
	int rv = kv__table_init(&t, count);
	if (rv == 0)
		rv = read_entries(&t, &m, buf, head, end, count, format);
	if (rv != 0) {
		kv__table_free(&t);
		return fail(kv, rv,
			    rv == BATON_ENOMEM ? "out of memory"
			    : rv == BATON_EVERSION
				    ? "a snapshot's migration section of a "
				      "later format"
				    : "malformed snapshot entries or "
				      "migration section");
	}
	assert(t.count == count);
	/* An open KEYS lists the map as it was at its begin: the old table
	 * is its from now on (as after FLUSHALL). */
	if (kv->table.snap != NULL)
		kv__snap_set_aside(kv->table.snap, &kv->table);
	else
		kv__table_free(&kv->table);
	kv->table = t;
	kv->now_ms = (int64_t)now;
	kv->mig = m;
	return 0;
}
