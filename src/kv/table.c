/*
 * The hash table: 2^n buckets of chains, resized incrementally, a bounded
 * number of buckets per insert or delete (reads never change the table).
 *
 * A key lives in bucket hash & (size - 1), and each chain is kept sorted
 * by (rev64(hash), key). Visiting the buckets in reverse-binary order
 * therefore yields the keys sorted by (rev64(hash), key) for any table
 * size: the order of KEYS, SCAN and snapshots depends on the keys alone.
 * During a resize the same holds with the buckets of the larger array: the
 * keys of one are either a whole chain or a run of one chain of the other
 * array (its keys share their low bits, so they are adjacent in the sort).
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Spare room an appended value gets, doubling up to this, then by it
 * (like Redis's sds). */
#define KV_APPEND_SLACK_BYTES_MAX ((size_t)1 << 20)
/* A value rewritten in place keeps a buffer up to this much too big. */
#define KV_VALUE_SLACK_BYTES 64u
/* The largest table: 2^40 buckets is far beyond any memory. */
#define KV_TABLE_BUCKETS_MAX ((uint64_t)1 << 40)
/* Bucket arrays from this size on are mapped from the system, not taken
 * from malloc: glibc's malloc merges every small block freed since its
 * last large request or large free before serving the next one, so after
 * a million expired keys were freed one 2 MiB array took 40 ms. Smaller
 * arrays are small-bin requests, which never merge. */
#define KV_TABLE_MAP_BYTES_MIN 1024u

static uint64_t pow2_at_least(uint64_t n)
{
	uint64_t size = KV_TABLE_BUCKETS_MIN;
	while (size < n && size < KV_TABLE_BUCKETS_MAX)
		size *= 2;
	return size;
}

/* Is t's bucket array of `size` buckets mapped, rather than malloc'd? */
static bool mapped(const struct kv__table *t, uint64_t size)
{
	return !t->of_fields &&
	       size * sizeof(struct kv__entry *) >= KV_TABLE_MAP_BYTES_MIN;
}

/* A zeroed array of `size` buckets for t, or NULL. */
static struct kv__entry **buckets_new(const struct kv__table *t, uint64_t size)
{
	if (size > SIZE_MAX / sizeof(struct kv__entry *))
		return NULL;
	size_t bytes = (size_t)size * sizeof(struct kv__entry *);
	if (!mapped(t, size))
		return kv__calloc((size_t)size, sizeof(struct kv__entry *));
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	kv__mapped(bytes, true);
	return p;
}

static void buckets_free(const struct kv__table *t, struct kv__entry **buckets,
			 uint64_t size)
{
	size_t bytes = (size_t)size * sizeof(struct kv__entry *);
	if (buckets == NULL || !mapped(t, size)) {
		kv__free(buckets);
		return;
	}
	int rv = munmap(buckets, bytes);
	assert(rv == 0);
	kv__mapped(bytes, false);
	(void)rv;
}

static int table_init(struct kv__table *t, uint64_t hint, bool of_fields)
{
	memset(t, 0, sizeof *t);
	t->of_fields = of_fields;
	t->size = pow2_at_least(hint);
	t->buckets = buckets_new(t, t->size);
	return t->buckets != NULL ? 0 : BATON_ENOMEM;
}

int kv__table_init(struct kv__table *t, uint64_t hint)
{
	return table_init(t, hint, false);
}

static void free_array(struct kv__entry **buckets, uint64_t size)
{
	for (uint64_t i = 0; i < size; i++) {
		struct kv__entry *e = buckets[i];
		while (e != NULL) {
			struct kv__entry *next = e->next;
			kv__entry_free(e);
			e = next;
		}
		buckets[i] = NULL;
	}
}

/* Free every entry and the old array, ending any resize. */
static void free_chains(struct kv__table *t)
{
	if (t->old != NULL) {
		free_array(t->old, t->old_size);
		buckets_free(t, t->old, t->old_size);
		t->old = NULL;
	}
	t->old_size = 0;
	t->moved = 0;
	free_array(t->buckets, t->size);
	t->count = 0;
	t->hashes = 0;
	t->expiring.n = 0;
}

void kv__table_free(struct kv__table *t)
{
	if (t->buckets != NULL)
		free_chains(t);
	buckets_free(t, t->buckets, t->size);
	t->buckets = NULL;
	t->size = 0;
	kv__heap_free(&t->expiring);
}

void kv__table_clear(struct kv__table *t)
{
	if (t->snap != NULL && kv__snap_take_table(t->snap, t))
		return;
	free_chains(t);
	if (t->size == KV_TABLE_BUCKETS_MIN)
		return;
	struct kv__entry **small = buckets_new(t, KV_TABLE_BUCKETS_MIN);
	if (small == NULL)
		return; /* keep the big, now empty, table */
	buckets_free(t, t->buckets, t->size);
	t->buckets = small;
	t->size = KV_TABLE_BUCKETS_MIN;
}

/* ---- entries ---- */

struct kv__entry *kv__entry_new(const uint8_t *key, size_t klen,
				const uint8_t *val, size_t vlen)
{
	assert(klen <= KV_KEY_BYTES_MAX && vlen <= KV_VALUE_BYTES_MAX);
	struct kv__entry *e = kv__malloc(sizeof *e + klen);
	if (e == NULL)
		return NULL;
	e->val = kv__malloc(vlen > 0 ? vlen : 1);
	if (e->val == NULL) {
		kv__free(e);
		return NULL;
	}
	if (klen > 0)
		memcpy(e->key, key, klen);
	if (vlen > 0)
		memcpy(e->val, val, vlen);
	e->next = NULL;
	e->hash = kv__hash(key, klen);
	e->key_len = klen;
	e->val_len = vlen;
	e->val_cap = vlen > 0 ? vlen : 1;
	e->fields = NULL;
	e->expire_at_ms = 0;
	e->heap_pos = KV_HEAP_NONE;
	return e;
}

struct kv__entry *kv__hash_new(const uint8_t *key, size_t klen)
{
	assert(klen <= KV_KEY_BYTES_MAX);
	struct kv__entry *e = kv__malloc(sizeof *e + klen);
	struct kv__table *fields = kv__calloc(1, sizeof *fields);
	if (e == NULL || fields == NULL || table_init(fields, 0, true) != 0) {
		if (fields != NULL)
			kv__table_free(fields);
		kv__free(fields);
		kv__free(e);
		return NULL;
	}
	if (klen > 0)
		memcpy(e->key, key, klen);
	e->next = NULL;
	e->hash = kv__hash(key, klen);
	e->key_len = klen;
	e->val = NULL;
	e->val_len = 0;
	e->val_cap = 0;
	e->fields = fields;
	e->expire_at_ms = 0;
	e->heap_pos = KV_HEAP_NONE;
	return e;
}

struct kv__entry *kv__entry_copy(const struct kv__entry *e)
{
	return kv__entry_copy_as(e, e->key, e->key_len);
}

struct kv__entry *kv__entry_copy_as(const struct kv__entry *e,
				    const uint8_t *key, size_t klen)
{
	if (!kv__is_hash(e))
		return kv__entry_new(key, klen, e->val, e->val_len);
	struct kv__entry *copy = kv__hash_new(key, klen);
	if (copy == NULL)
		return NULL;
	const struct kv__table *from = e->fields;
	uint64_t cursor = 0;
	do {
		const struct kv__entry *f = kv__table_bucket(from, cursor);
		for (; f != NULL; f = kv__table_after(from, f)) {
			struct kv__entry *g = kv__entry_new(f->key, f->key_len,
							    f->val, f->val_len);
			if (g == NULL) {
				kv__entry_free(copy);
				return NULL;
			}
			kv__table_insert(copy->fields, g);
		}
		cursor = kv__table_next(from, cursor);
	} while (cursor != 0);
	assert(copy->fields->count == from->count);
	return copy;
}

/* The bytes of a table's bucket arrays and entries. */
static uint64_t table_bytes(const struct kv__table *t)
{
	uint64_t n = sizeof *t + (t->size + t->old_size) * sizeof(void *);
	uint64_t cursor = 0;
	do {
		const struct kv__entry *e = kv__table_bucket(t, cursor);
		for (; e != NULL; e = kv__table_after(t, e))
			n += kv__entry_bytes(e);
		cursor = kv__table_next(t, cursor);
	} while (cursor != 0);
	return n;
}

uint64_t kv__entry_bytes(const struct kv__entry *e)
{
	uint64_t n = sizeof *e + e->key_len + e->val_cap;
	return kv__is_hash(e) ? n + table_bytes(e->fields) : n;
}

void kv__entry_free(struct kv__entry *e)
{
	if (e == NULL)
		return;
	if (e->fields != NULL) {
		kv__table_free(e->fields);
		kv__free(e->fields);
	}
	kv__free(e->val);
	kv__free(e);
}

/* Tell t's open snapshot, if any, that e is about to change. */
static void touch(struct kv__table *t, const struct kv__entry *e)
{
	if (t->snap != NULL)
		kv__snap_touch(t->snap, e, e->hash, e->key, e->key_len);
}

void kv__entry_touch(struct kv__table *t, const struct kv__entry *e)
{
	assert(kv__is_hash(e));
	touch(t, e);
}

struct kv__entry *kv__entry_new_zeroed(const uint8_t *key, size_t klen,
				       size_t vlen)
{
	struct kv__entry *e = kv__entry_new(key, klen, NULL, 0);
	if (e == NULL)
		return NULL;
	uint8_t *v = kv__calloc(vlen > 0 ? vlen : 1, 1);
	if (v == NULL) {
		kv__entry_free(e);
		return NULL;
	}
	kv__free(e->val);
	e->val = v;
	e->val_len = vlen;
	e->val_cap = vlen > 0 ? vlen : 1;
	return e;
}

void kv__entry_write_at(struct kv__table *t, struct kv__entry *e, size_t off,
			const uint8_t *bytes, size_t len)
{
	assert(!kv__is_hash(e) && off <= e->val_len && len <= e->val_len - off);
	touch(t, e);
	if (len > 0)
		memcpy(e->val + off, bytes, len);
}

/* SET on a hash: e becomes a string holding a copy of val. */
static int hash_to_string(struct kv__table *t, struct kv__entry *e,
			  const uint8_t *val, size_t len)
{
	uint8_t *v = kv__malloc(len > 0 ? len : 1);
	if (v == NULL)
		return BATON_ENOMEM;
	touch(t, e);
	if (len > 0)
		memcpy(v, val, len);
	kv__table_free(e->fields);
	kv__free(e->fields);
	e->fields = NULL;
	assert(t->hashes > 0);
	t->hashes--;
	e->val = v;
	e->val_len = len;
	e->val_cap = len > 0 ? len : 1;
	return 0;
}

int kv__entry_set(struct kv__table *t, struct kv__entry *e, const uint8_t *val,
		  size_t len)
{
	assert(len <= KV_VALUE_BYTES_MAX);
	if (kv__is_hash(e))
		return hash_to_string(t, e, val, len);
	touch(t, e);
	if (len <= e->val_cap && e->val_cap - len <= KV_VALUE_SLACK_BYTES) {
		if (len > 0)
			memmove(e->val, val, len);
		e->val_len = len;
		return 0;
	}
	uint8_t *v = kv__malloc(len > 0 ? len : 1);
	if (v == NULL)
		return BATON_ENOMEM;
	if (len > 0)
		memcpy(v, val, len);
	kv__free(e->val);
	e->val = v;
	e->val_len = len;
	e->val_cap = len > 0 ? len : 1;
	return 0;
}

int kv__entry_append(struct kv__table *t, struct kv__entry *e,
		     const uint8_t *val, size_t len)
{
	assert(!kv__is_hash(e) && kv__append_fits(e->val_len, len));
	touch(t, e);
	size_t need = e->val_len + len;
	if (need > e->val_cap) {
		size_t slack = need < KV_APPEND_SLACK_BYTES_MAX
				       ? need
				       : KV_APPEND_SLACK_BYTES_MAX;
		size_t cap = need + slack;
		if (cap > KV_VALUE_BYTES_MAX)
			cap = need;
		uint8_t *v = kv__realloc(e->val, cap);
		if (v == NULL)
			return BATON_ENOMEM;
		e->val = v;
		e->val_cap = cap;
	}
	if (len > 0)
		memcpy(e->val + e->val_len, val, len);
	e->val_len = need;
	return 0;
}

/* ---- the table ---- */

int kv__position_cmp(uint64_t hash_a, const uint8_t *key_a, size_t len_a,
		     uint64_t hash_b, const uint8_t *key_b, size_t len_b)
{
	uint64_t ra = kv__rev64(hash_a), rb = kv__rev64(hash_b);
	if (ra != rb)
		return ra < rb ? -1 : 1;
	size_t n = len_a < len_b ? len_a : len_b;
	int c = n > 0 ? memcmp(key_a, key_b, n) : 0;
	if (c != 0)
		return c;
	return len_a < len_b ? -1 : len_a > len_b ? 1 : 0;
}

/* <0, 0, >0 as (hash, key) sorts before, with or after entry b. */
static int order(uint64_t hash, const uint8_t *key, size_t len,
		 const struct kv__entry *b)
{
	return kv__position_cmp(hash, key, len, b->hash, b->key, b->key_len);
}

/* Link e into its place in the sorted chain *pp. */
static void link_sorted(struct kv__entry **pp, struct kv__entry *e)
{
	while (*pp != NULL && order(e->hash, e->key, e->key_len, *pp) > 0)
		pp = &(*pp)->next;
	assert(*pp == NULL || order(e->hash, e->key, e->key_len, *pp) < 0);
	e->next = *pp;
	*pp = e;
}

/* The chain that holds (or would hold) the keys whose hash has these low
 * bits: the old array's bucket if it has not moved yet, else the new one.
 * Only the bits of the larger array's mask matter. */
static struct kv__entry **chain_of(const struct kv__table *t, uint64_t hash)
{
	if (t->old != NULL) {
		uint64_t o = hash & (t->old_size - 1);
		if (o >= t->moved)
			return &t->old[o];
	}
	return &t->buckets[hash & (t->size - 1)];
}

/* Start resizing to `size` buckets. The one allocation of a resize is
 * here: if it fails, the table stays as it is (longer or sparser chains,
 * same contents and order) and a later write tries again. */
static void resize_start(struct kv__table *t, uint64_t size)
{
	assert(size >= KV_TABLE_BUCKETS_MIN && (size & (size - 1)) == 0);
	assert(t->old == NULL);
	if (size == t->size)
		return;
	struct kv__entry **buckets = buckets_new(t, size);
	if (buckets == NULL)
		return;
	t->old = t->buckets;
	t->old_size = t->size;
	t->moved = 0;
	t->buckets = buckets;
	t->size = size;
}

/* Start a growth (inserts) or a shrink (deletes) if due and no resize is
 * under way (the next starts once it ends). */
static void maybe_grow(struct kv__table *t)
{
	if (t->old == NULL && t->count > t->size &&
	    t->size < KV_TABLE_BUCKETS_MAX)
		resize_start(t, t->size * 2);
}

static void maybe_shrink(struct kv__table *t)
{
	if (t->old == NULL && t->size > KV_TABLE_BUCKETS_MIN &&
	    t->count * KV_TABLE_SHRINK_RATIO < t->size)
		resize_start(t, pow2_at_least(t->count * 2));
}

/* Move old bucket o into the new array; the number of keys moved. Its
 * chain splits into runs, one per new bucket (growing), or is one run
 * (shrinking); a run's keys are adjacent in the order of the new chain
 * too, so each is spliced in whole after a walk to its place. */
static uint64_t move_bucket(struct kv__table *t, uint64_t o)
{
	struct kv__entry *e = t->old[o];
	t->old[o] = NULL;
	uint64_t mask = t->size - 1, moved = 0;
	while (e != NULL) {
		struct kv__entry *last = e;
		moved++;
		while (last->next != NULL &&
		       ((last->next->hash ^ e->hash) & mask) == 0) {
			last = last->next;
			moved++;
		}
		struct kv__entry *rest = last->next;
		struct kv__entry **pp = &t->buckets[e->hash & mask];
		while (*pp != NULL &&
		       order(e->hash, e->key, e->key_len, *pp) > 0)
			pp = &(*pp)->next;
		assert(*pp == NULL ||
		       order(last->hash, last->key, last->key_len, *pp) < 0);
		last->next = *pp;
		*pp = e;
		e = rest;
	}
	return moved;
}

void kv__table_step(struct kv__table *t)
{
	if (t->old == NULL)
		return;
	uint64_t visited = 0, moved = 0;
	while (t->moved < t->old_size && visited < KV_TABLE_STEP_BUCKETS &&
	       moved < KV_TABLE_STEP_ENTRIES) {
		moved += move_bucket(t, t->moved);
		t->moved++;
		visited++;
	}
	if (t->moved < t->old_size)
		return;
	buckets_free(t, t->old, t->old_size);
	t->old = NULL;
	t->old_size = 0;
	t->moved = 0;
}

struct kv__entry *kv__table_find(const struct kv__table *t, const uint8_t *key,
				 size_t len)
{
	uint64_t h = kv__hash(key, len);
	for (struct kv__entry *e = *chain_of(t, h); e != NULL; e = e->next) {
		if (e->hash == h && e->key_len == len &&
		    (len == 0 || memcmp(e->key, key, len) == 0))
			return e;
	}
	return NULL;
}

void kv__table_insert(struct kv__table *t, struct kv__entry *e)
{
	assert(kv__table_find(t, e->key, e->key_len) == NULL);
	if (t->snap != NULL)
		kv__snap_touch(t->snap, NULL, e->hash, e->key, e->key_len);
	kv__table_step(t);
	link_sorted(chain_of(t, e->hash), e);
	t->count++;
	t->hashes += kv__is_hash(e);
	maybe_grow(t);
}

void kv__table_put(struct kv__table *t, struct kv__entry *e)
{
	struct kv__entry *old = kv__table_find(t, e->key, e->key_len);
	if (old == NULL) {
		kv__table_insert(t, e);
		return;
	}
	touch(t, old);
	t->hashes += kv__is_hash(e);
	t->hashes -= kv__is_hash(old);
	uint8_t *val = old->val;
	size_t len = old->val_len, cap = old->val_cap;
	struct kv__table *fields = old->fields;
	old->val = e->val;
	old->val_len = e->val_len;
	old->val_cap = e->val_cap;
	old->fields = e->fields;
	e->val = val;
	e->val_len = len;
	e->val_cap = cap;
	e->fields = fields;
	kv__entry_free(e);
	kv__expire_clear(t, old);
}

bool kv__table_delete(struct kv__table *t, const uint8_t *key, size_t len)
{
	uint64_t h = kv__hash(key, len);
	kv__table_step(t);
	for (struct kv__entry **pp = chain_of(t, h); *pp != NULL;
	     pp = &(*pp)->next) {
		struct kv__entry *e = *pp;
		if (e->hash != h || e->key_len != len ||
		    (len > 0 && memcmp(e->key, key, len) != 0))
			continue;
		touch(t, e);
		*pp = e->next;
		kv__expire_clear(t, e);
		assert(t->count > 0 && t->hashes >= kv__is_hash(e));
		t->hashes -= kv__is_hash(e);
		kv__entry_free(e);
		t->count--;
		maybe_shrink(t);
		return true;
	}
	return false;
}

/* The mask of the buckets iteration walks: the larger array's. */
static uint64_t scan_mask(const struct kv__table *t)
{
	return (t->old_size > t->size ? t->old_size : t->size) - 1;
}

const struct kv__entry *kv__table_bucket(const struct kv__table *t,
					 uint64_t cursor)
{
	uint64_t mask = scan_mask(t), b = cursor & mask;
	const struct kv__entry *e = *chain_of(t, b);
	while (e != NULL && (e->hash & mask) != b)
		e = e->next;
	return e;
}

const struct kv__entry *kv__table_after(const struct kv__table *t,
					const struct kv__entry *e)
{
	const struct kv__entry *n = e->next;
	return n != NULL && ((n->hash ^ e->hash) & scan_mask(t)) == 0 ? n
								      : NULL;
}

uint64_t kv__table_next(const struct kv__table *t, uint64_t cursor)
{
	uint64_t mask = scan_mask(t);
	/* Set the bits above the mask so that the increment of the reversed
	 * cursor carries through them into the masked bits. */
	cursor |= ~mask;
	cursor = kv__rev64(cursor);
	cursor++;
	return kv__rev64(cursor);
}
