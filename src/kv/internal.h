/*
 * What the files of src/kv share (names kv__*): the argument vector, the
 * hash, the table, glob matching and the command checks.
 */
#ifndef BATON_KV_INTERNAL_H
#define BATON_KV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checksum.h"
#include "kv.h"

/* A command's arguments: argv[0] is the name. Not owned. */
struct kv__args {
	int argc;
	const uint8_t *const *argv;
	const size_t *lens;
};

/* ---- hash.c ---- */

/* The hash of a key: XXH3-64 with no seed, the same on every node and in
 * every release (it fixes the iteration order, so it is part of what makes
 * replicas agree byte for byte). */
uint64_t kv__hash(const uint8_t *key, size_t len);
/* v with its 64 bits in reverse order. */
uint64_t kv__rev64(uint64_t v);
/* Checksums of snapshots: baton__checksum and baton__hasher_* (the one
 * XXH3 wrapper, src/util/checksum.h). */

/* ---- table.c: a chained hash table of 2^n buckets ---- */

/* A key and its value; the key is stored after the struct. */
struct kv__entry {
	struct kv__entry *next; /* in the bucket chain */
	uint64_t hash;		/* kv__hash(key) */
	uint8_t *val;		/* owned; never NULL */
	size_t val_len;
	size_t val_cap;
	size_t key_len;
	uint8_t key[];
};

/* Every chain is sorted by (kv__rev64(hash), key), so walking the buckets
 * in reverse-binary order (kv__table_next) visits keys in an order that
 * depends on the keys alone, not on the table's size or history. */
struct kv__table {
	struct kv__entry **buckets;
	uint64_t size; /* a power of two, >= KV_TABLE_BUCKETS_MIN */
	uint64_t count;
};

#define KV_TABLE_BUCKETS_MIN 4u
/* Grow (double) when count > size; shrink when count * this < size. */
#define KV_TABLE_SHRINK_RATIO 8u

/* An empty table with room for `hint` keys. 0 or BATON_ENOMEM. */
int kv__table_init(struct kv__table *t, uint64_t hint);
/* Free every entry and the buckets. */
void kv__table_free(struct kv__table *t);
/* Remove every entry (FLUSHALL); shrinks when memory allows. */
void kv__table_clear(struct kv__table *t);

/* A new entry holding copies of key and value; NULL when out of memory. */
struct kv__entry *kv__entry_new(const uint8_t *key, size_t klen,
				const uint8_t *val, size_t vlen);
void kv__entry_free(struct kv__entry *e);
/* Replace e's value by a copy of val; 0, or BATON_ENOMEM with e unchanged. */
int kv__entry_set(struct kv__entry *e, const uint8_t *val, size_t len);
/* Append to e's value (growing greedily); 0, or BATON_ENOMEM with e
 * unchanged. The caller checked kv__append_fits(). */
int kv__entry_append(struct kv__entry *e, const uint8_t *val, size_t len);

struct kv__entry *kv__table_find(const struct kv__table *t, const uint8_t *key,
				 size_t len);
/* Insert e, whose key must be absent. May grow the table (best effort: a
 * failed allocation leaves longer chains, never a failure). */
void kv__table_insert(struct kv__table *t, struct kv__entry *e);
/* Insert e, or if its key is present give that entry e's value and free
 * e. Cannot fail. */
void kv__table_put(struct kv__table *t, struct kv__entry *e);
/* Remove and free the key's entry; false if absent. May shrink. */
bool kv__table_delete(struct kv__table *t, const uint8_t *key, size_t len);

/* The chain of the bucket a scan cursor points at. */
const struct kv__entry *kv__table_bucket(const struct kv__table *t,
					 uint64_t cursor);
/* The cursor after `cursor`, Redis's dictScan way: increment the masked
 * cursor with its bits reversed. 0 when the scan is complete. Every key
 * present for a whole scan is visited at least once even if the table is
 * resized between steps. */
uint64_t kv__table_next(const struct kv__table *t, uint64_t cursor);

/* ---- glob.c ---- */

/* Redis's glob (stringmatchlen): *, ?, [abc], [^abc], [a-z], and \ to
 * quote the next character. Iterative: no recursion, O(plen * slen). */
bool kv__glob_match(const uint8_t *pat, size_t plen, const uint8_t *s,
		    size_t slen);

/* ---- commands.c ---- */

/* The arity, limit and option checks of kv_check(): 0; BATON_EINVAL with
 * the -ERR reply appended to err; or BATON_ENOMEM if the command is bad
 * but its reply could not be appended (err unchanged). */
int kv__check(const struct kv_command *c, const struct kv__args *a,
	      struct baton_buf *err);
/* Whether a value of `have` bytes may grow by `add` (KV_VALUE_BYTES_MAX). */
bool kv__append_fits(size_t have, size_t add);

/* ---- payload.c ---- */

/* Arguments decoded without an allocation up to this many. */
#define KV_PAYLOAD_ARGS_INLINE 16u

struct kv__payload {
	struct kv__args args; /* points into the payload and the arrays */
	const uint8_t *argv_inline[KV_PAYLOAD_ARGS_INLINE];
	size_t lens_inline[KV_PAYLOAD_ARGS_INLINE];
	const uint8_t **argv_heap;
	size_t *lens_heap;
};

/* Decode a payload, bounds-checked: 0, BATON_ECORRUPT, BATON_EVERSION (a
 * newer format) or BATON_ENOMEM. Free with kv__payload_free() after 0. */
int kv__payload_decode(const uint8_t *buf, size_t len, struct kv__payload *p);
void kv__payload_free(struct kv__payload *p);

/* ---- kv.c ---- */

struct baton_kv {
	struct kv__table table;
	struct baton_buf scratch; /* replies nobody waits for */
};

#endif /* BATON_KV_INTERNAL_H */
