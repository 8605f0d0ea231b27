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
#include "le.h"

/* A command's arguments: argv[0] is the name. Not owned. */
struct kv__args {
	int argc;
	const uint8_t *const *argv;
	const size_t *lens;
};

/* ---- mem.c: what kv holds (kv_memory_bytes) ---- */

/* malloc, calloc, realloc and free, counting the bytes held. Every
 * allocation of src/kv goes through them, and only those: a pointer from
 * elsewhere is never given to kv__free. */
void *kv__malloc(size_t n);
void *kv__calloc(size_t n, size_t size);
void *kv__realloc(void *p, size_t n);
void kv__free(void *p);
/* Count a bucket array mapped from the system (mapped) or unmapped. */
void kv__mapped(size_t bytes, bool mapped);

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

/* heap_pos of an entry without an expiry. */
#define KV_HEAP_NONE SIZE_MAX

/* A key and its value; the key is stored after the struct. The value is
 * a string (val) or, from machine version 3, a hash (fields). */
struct kv__entry {
	struct kv__entry *next; /* in the bucket chain */
	uint64_t hash;		/* kv__hash(key) */
	uint8_t *val;		/* a string's bytes, owned; NULL for a hash */
	size_t val_len;		/* 0 for a hash */
	size_t val_cap;		/* 0 for a hash */
	/* A hash's fields, owned, never empty: a table whose entries are
	 * strings keyed by field name. NULL for a string. */
	struct kv__table *fields;
	/* The expiry, machine time in unix ms, when heap_pos is not
	 * KV_HEAP_NONE (then e is in the table's expiry heap there). */
	int64_t expire_at_ms;
	size_t heap_pos;
	size_t key_len;
	uint8_t key[];
};

/* The keys with an expiry: a binary min-heap ordered by (expire_at_ms,
 * key), each entry knowing its position, so that adding, changing and
 * removing an expiry is O(log n) and the due keys come out in one order
 * on every node. */
struct kv__heap {
	struct kv__entry **v;
	size_t n, cap;
};

/* Every chain is sorted by (kv__rev64(hash), key), so walking the buckets
 * in reverse-binary order (kv__table_next) visits keys in an order that
 * depends on the keys alone, not on the table's size, history or resize.
 *
 * Resizing is incremental: while `old` is set, the old bucket array is
 * being emptied into `buckets`, a bounded number of buckets per insert or
 * delete (kv__table_step). Old buckets below `moved` have moved; a key
 * whose old bucket has not lives there still (inserts too), so each key is
 * in exactly one chain, found from its hash alone. */
struct kv__table {
	struct kv__entry **buckets; /* during a resize, the new array */
	uint64_t size;		/* a power of two, >= KV_TABLE_BUCKETS_MIN */
	struct kv__entry **old; /* the array being emptied, or NULL */
	uint64_t old_size;	/* 0 when not resizing */
	uint64_t moved;		/* old buckets [0, moved) are empty */
	uint64_t count;
	uint64_t hashes; /* entries whose value is a hash */
	/* A hash's fields: bucket arrays come from malloc, never mapped
	 * (a map may hold millions of hashes; mappings are few per
	 * process). */
	bool of_fields;
	struct kv__heap expiring; /* the entries with an expiry */
	/* The incremental snapshot open on this table, or NULL: every change
	 * of a key goes through the functions below, which tell it first
	 * (kv__snap_touch), so that it can keep the key as it was. */
	struct kv__snap *snap;
};

#define KV_TABLE_BUCKETS_MIN 4u
/* Grow (double) when count > size; shrink when count * this < size. */
#define KV_TABLE_SHRINK_RATIO 8u
/* One resize step moves old buckets until it has visited this many or
 * moved at least KV_TABLE_STEP_ENTRIES keys (a bucket moves whole). A
 * shrink to a quarter must move every old bucket before about 3/32 of
 * them have been deleted, so it needs > 11 buckets per delete. */
#define KV_TABLE_STEP_BUCKETS 32u
#define KV_TABLE_STEP_ENTRIES 64u

/* An empty table with room for `hint` keys. 0 or BATON_ENOMEM. */
int kv__table_init(struct kv__table *t, uint64_t hint);
/* Free every entry and the buckets. */
void kv__table_free(struct kv__table *t);
/* Remove every entry (FLUSHALL); shrinks when memory allows. */
void kv__table_clear(struct kv__table *t);

/* A new entry holding copies of key and value; NULL when out of memory. */
struct kv__entry *kv__entry_new(const uint8_t *key, size_t klen,
				const uint8_t *val, size_t vlen);
/* A new entry for key whose value is a hash with no field yet (the caller
 * adds one before it inserts the entry); NULL when out of memory. */
struct kv__entry *kv__hash_new(const uint8_t *key, size_t klen);
/* A deep copy of e's key and value (every field of a hash), without its
 * expiry or place in a table; NULL when out of memory. */
struct kv__entry *kv__entry_copy(const struct kv__entry *e);
/* The same, under another key (RENAME, COPY). */
struct kv__entry *kv__entry_copy_as(const struct kv__entry *e,
				    const uint8_t *key, size_t klen);
/* The bytes e holds: the entry, its key, its value or every field. */
uint64_t kv__entry_bytes(const struct kv__entry *e);
/* Frees a hash's fields too. NULL is fine. */
void kv__entry_free(struct kv__entry *e);
static inline bool kv__is_hash(const struct kv__entry *e)
{
	return e->fields != NULL;
}
/* Replace the value of e (in t) by a copy of val, a hash's fields
 * included (SET on a hash); 0, or BATON_ENOMEM with e unchanged. */
int kv__entry_set(struct kv__table *t, struct kv__entry *e, const uint8_t *val,
		  size_t len);
/* What a write calls before it changes the fields of the hash e (in t) in
 * place: t's open snapshot keeps e as it was, if it needs to. */
void kv__entry_touch(struct kv__table *t, const struct kv__entry *e);
/* Append to the value of e (in t), growing greedily; 0, or BATON_ENOMEM
 * with e unchanged. The caller checked kv__append_fits(). */
int kv__entry_append(struct kv__table *t, struct kv__entry *e,
		     const uint8_t *val, size_t len);
/* A string entry whose value is vlen zero bytes (an import's value in
 * pieces), or NULL when out of memory. */
struct kv__entry *kv__entry_new_zeroed(const uint8_t *key, size_t klen,
				       size_t vlen);
/* Overwrite len bytes of the string e (in t) at off, within its length
 * (an import's piece): cannot fail. */
void kv__entry_write_at(struct kv__table *t, struct kv__entry *e, size_t off,
			const uint8_t *bytes, size_t len);
/* <0, 0, >0 as the key (hash_a, key_a) sorts before, with or after
 * (hash_b, key_b) in the canonical order: kv__rev64(hash), then the key's
 * bytes, then its length. */
int kv__position_cmp(uint64_t hash_a, const uint8_t *key_a, size_t len_a,
		     uint64_t hash_b, const uint8_t *key_b, size_t len_b);

struct kv__entry *kv__table_find(const struct kv__table *t, const uint8_t *key,
				 size_t len);
/* Insert e, whose key must be absent. Takes a resize step, and may start
 * a growth (best effort: a failed allocation postpones it, leaving longer
 * chains, never a failure). */
void kv__table_insert(struct kv__table *t, struct kv__entry *e);
/* Insert e, or if its key is present give that entry e's value, whatever
 * the types (dropping its expiry, as SET does) and free e. Cannot fail. */
void kv__table_put(struct kv__table *t, struct kv__entry *e);
/* Remove and free the key's entry (and its expiry); false if absent.
 * Takes a resize step, and may start a shrink. */
bool kv__table_delete(struct kv__table *t, const uint8_t *key, size_t len);

/* Move a bounded number of old buckets if a resize is under way (inserts
 * and deletes call it; reads never change the table). */
void kv__table_step(struct kv__table *t);
static inline bool kv__table_resizing(const struct kv__table *t)
{
	return t->old != NULL;
}

/* Iteration: the keys of the bucket a scan cursor points at, in order, are
 * kv__table_bucket(), then kv__table_after() of each until NULL (during a
 * resize a bucket's keys may be a run in the middle of a chain). Buckets
 * are those of the larger array while resizing. */
const struct kv__entry *kv__table_bucket(const struct kv__table *t,
					 uint64_t cursor);
const struct kv__entry *kv__table_after(const struct kv__table *t,
					const struct kv__entry *e);
/* The cursor after `cursor`, Redis's dictScan way: increment the masked
 * cursor with its bits reversed. 0 when the scan is complete. Every key
 * present for a whole scan is visited at least once even if the table is
 * resized between steps. */
uint64_t kv__table_next(const struct kv__table *t, uint64_t cursor);

/* ---- heap.c: the expiry index ---- */

/* Room for `extra` more expiries without an allocation: 0 or
 * BATON_ENOMEM. Call before changing the map. */
int kv__heap_reserve(struct kv__heap *h, size_t extra);
void kv__heap_free(struct kv__heap *h);
/* Give e (in t) the expiry at_ms; room was reserved if e had none. */
void kv__expire_set(struct kv__table *t, struct kv__entry *e, int64_t at_ms);
/* Drop e's expiry, if any. */
void kv__expire_clear(struct kv__table *t, struct kv__entry *e);
/* The entry that expires first (smallest (expire_at_ms, key)), or NULL. */
struct kv__entry *kv__heap_top(const struct kv__heap *h);

static inline bool kv__has_expiry(const struct kv__entry *e)
{
	return e->heap_pos != KV_HEAP_NONE;
}

/* Is e logically gone at machine time now_ms? */
static inline bool kv__expired(const struct kv__entry *e, int64_t now_ms)
{
	return kv__has_expiry(e) && e->expire_at_ms <= now_ms;
}

/* ---- snapshot.c: the encoding both kinds of snapshot share ---- */

/* Gathers a snapshot's bytes into chunks for the sink and checksums them.
 * The sink may change between calls (one per incremental step). */
struct kv__snap_writer {
	int (*sink)(void *arg, const void *buf, size_t len);
	void *arg;
	struct baton__hasher *sum;
	uint8_t *chunk;
	size_t used;
	uint64_t bytes; /* put so far, the trailer not included */
};

/* 0, or BATON_ENOMEM (free what was made with kv__snap_writer_free). */
int kv__snap_writer_init(struct kv__snap_writer *w);
void kv__snap_writer_free(struct kv__snap_writer *w);
/* Hand the gathered bytes to the sink: 0 or the sink's error. */
int kv__snap_writer_flush(struct kv__snap_writer *w);
/* The header: magic, format, [formats 2, 3: machine time], count. */
int kv__snap_put_header(struct kv__snap_writer *w, uint32_t format,
			int64_t now_ms, uint64_t count);
/* The entry e (a hash only in format 3) with the expiry expire_at_ms, 0
 * for none (formats 2 and 3 write it). */
int kv__snap_put_entry(struct kv__snap_writer *w, uint32_t format,
		       const struct kv__entry *e, uint64_t expire_at_ms);
/* A string value written across steps (snapshot_slices.c): whether its
 * first bytes went out, and how many of the value's. */
struct kv__part {
	bool open;
	size_t off;
};
/* A string value longer than this is written in parts when it does not
 * fit what is left of a step; no part is shorter (unless it is the last),
 * so a step always gets on. */
#define KV_PART_BYTES_MIN ((size_t)4 << 10)
#define KV_PART_VALUE_BYTES_MIN ((size_t)64 << 10)
/* The string entry e as kv__snap_put_entry writes it, in parts: the first
 * call writes the bytes before the value and opens *part; each call
 * writes at most max(room, KV_PART_BYTES_MIN) of the value; the last one
 * writes the expiry, closes *part and sets *complete. 0 or the sink's
 * error. */
int kv__snap_put_string_part(struct kv__snap_writer *w, uint32_t format,
			     const struct kv__entry *e, uint64_t expire_at_ms,
			     struct kv__part *part, size_t room,
			     bool *complete);
/* A hash entry in parts (format 3, snapshot_slices.c): the bytes before
 * its fields (key, type, field count); each field as put_entry writes it;
 * the expiry (formats 2 and 3; nothing in format 1). 0 or the sink's
 * error. */
int kv__snap_put_hash_head(struct kv__snap_writer *w,
			   const struct kv__entry *e);
int kv__snap_put_field(struct kv__snap_writer *w, const struct kv__entry *f);
int kv__snap_put_expiry(struct kv__snap_writer *w, uint32_t format,
			uint64_t expire_at_ms);
/* Flush, then the trailer: the checksum of everything put. */
int kv__snap_put_trailer(struct kv__snap_writer *w);
/* The migration section (docs/kv.md), written before the trailer when
 * kv__migration_any(m). */
int kv__snap_put_migration(struct kv__snap_writer *w,
			   const struct kv_migration *m);
/* The snapshot format of machine version v for this map: 0, or
 * BATON_EVERSION with kv_errmsg() saying why (v unknown, version 1 while
 * keys have expiries, or a version below 3 while keys are hashes). */
int kv__snap_format(const struct baton_kv *kv, struct baton_machine_version v,
		    uint32_t *format);

/* ---- walk.c: walks in the canonical order, resumed at a position ---- */

/* A position in the canonical order: the last key a walk passed. The key
 * buffer is owned (free() it). */
struct kv__position {
	bool started; /* false: before every key */
	uint64_t hash;
	uint8_t *key;
	size_t len, cap;
};

/* Is (hash, key, len) at or before p? */
bool kv__position_passed(const struct kv__position *p, uint64_t hash,
			 const uint8_t *key, size_t len);
/* Make p the position of e, after p: 0 or BATON_ENOMEM (p unchanged). */
int kv__position_remember(struct kv__position *p, const struct kv__entry *e);

/* A walk over one table's keys in canonical order. */
struct kv__walk {
	const struct kv__table *t;
	uint64_t cursor;
	const struct kv__entry *e; /* NULL once past the last key */
};

/* Start at t's first key after p: in p's bucket under t's mask now, else
 * in the buckets that follow it. The table must not change during a
 * walk. */
void kv__walk_start(struct kv__walk *w, const struct kv__table *t,
		    const struct kv__position *p);
/* On to the next key (w->e not NULL). */
void kv__walk_next(struct kv__walk *w);

/* ---- snapshot_slices.c: incremental snapshots ---- */

/* What a table with t->snap set calls before it changes the key (hash,
 * key, len): `cur` is its entry now, NULL if absent. If the snapshot has
 * not written the key yet and holds no copy of it, it copies cur (or
 * notes the key was absent): cur is still the key as it was at begin, as
 * any earlier change would have made the copy. Cannot fail: out of
 * memory, the snapshot (not the write) fails, at its next step. */
void kv__snap_touch(struct kv__snap *s, const struct kv__entry *cur,
		    uint64_t hash, const uint8_t *key, size_t len);
/* What kv__table_clear(t) calls first: true if the snapshot took t's
 * entries (they are its state at begin, but for its copies) and left t
 * empty; false if t must be cleared as usual. */
bool kv__snap_take_table(struct kv__snap *s, struct kv__table *t);
/* Make t (the table s listens to) the view's frozen table, leaving t
 * zeroed for the caller to replace (kv_restore under an open KEYS).
 * Cannot fail. */
void kv__snap_set_aside(struct kv__snap *s, struct kv__table *t);

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
/* Is argument i the (lower-case) word, in any case? */
bool kv__arg_is(const struct kv__args *a, int i, const char *word);
/* Append the -ERR reply msg: BATON_EINVAL, or BATON_ENOMEM if it could not
 * be appended. */
int kv__refuse(struct baton_buf *b, const char *msg);
/* The live entry of argument i: NULL if absent or expired at the
 * machine time. Never changes the map. */
struct kv__entry *kv__find(struct baton_kv *kv, const struct kv__args *a,
			   int i);
/* Room for any reply of a write once the map changed: +OK, :<n>, $-1. */
#define KV_WRITE_REPLY_BYTES 32u
/* The longest decimal int64: a sign and 19 digits. */
#define KV_INT_TEXT_BYTES 24u

#define KV_ERR_SYNTAX "ERR syntax error"
#define KV_ERR_NOT_INT "ERR value is not an integer or out of range"
#define KV_ERR_OVERFLOW "ERR increment or decrement would overflow"
/* Would v + by leave int64_t (INCRBY, HINCRBY: KV_ERR_OVERFLOW)? */
static inline bool kv__add_overflows(int64_t v, int64_t by)
{
	return (by < 0 && v < 0 && by < INT64_MIN - v) ||
	       (by > 0 && v > 0 && by > INT64_MAX - v);
}
#define KV_ERR_WRONGTYPE                                                       \
	"WRONGTYPE Operation against a key holding the wrong kind of value"

/* A growable list of entries, for replies whose length is known late. */
struct kv__list {
	const struct kv__entry **v; /* free() it */
	size_t n, cap;
};
int kv__list_push(struct kv__list *l, const struct kv__entry *e);

/* SCAN's and HSCAN's cursor and options. */
struct kv__scan_options {
	uint64_t cursor;
	uint64_t count;
	const uint8_t *pattern; /* NULL: every key */
	size_t pattern_len;
	bool novalues; /* HSCAN: fields only */
	/* SCAN's TYPE (machine version 3): keys of that type only, the name
	 * compared as Redis does, without case; NULL: every type. */
	const uint8_t *type;
	size_t type_len;
};
/* SCAN's TYPE option needs machine version 3: the version SCAN with
 * these arguments needs, 1 or 3 (with *opt "type"). */
uint32_t kv__scan_machine_min(const struct kv__args *a, const char **opt);
/* A cursor: an unsigned decimal that fits 64 bits. */
bool kv__parse_cursor(const uint8_t *s, size_t len, uint64_t *out);
/* The cursor at argument cursor_arg and the options after it (MATCH,
 * COUNT, for the map TYPE, for a hash NOVALUES): 0, or the -ERR refusal
 * as kv__refuse. */
int kv__scan_options(const struct kv__args *a, int cursor_arg, bool hash,
		     struct kv__scan_options *o, struct baton_buf *err);
/* One call of SCAN over t (the map's keys or a hash's fields): pushes on
 * l the entries seen from o->cursor on that are live at now_ms and match
 * o's pattern, and sets *next to the cursor to reply. 0 or BATON_ENOMEM. */
int kv__scan_table(const struct kv__table *t, const struct kv__scan_options *o,
		   int64_t now_ms, struct kv__list *l, uint64_t *next);
/* A scan reply's start: the array of 2 and the cursor's bulk. */
int kv__reply_cursor(struct baton_buf *b, uint64_t cursor);

/* ---- expire.c: SET and the commands of machine version 2 ---- */

int kv__check_set(const struct kv__args *a, struct baton_buf *err);
int kv__run_set(struct baton_kv *kv, const struct kv__args *a,
		struct baton_buf *reply);
int kv__check_getex(const struct kv__args *a, struct baton_buf *err);
int kv__run_getex(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply);
int kv__check_expire(const struct kv__args *a, struct baton_buf *err);
int kv__run_expire(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply);
int kv__run_ttl(struct baton_kv *kv, const struct kv__args *a,
		struct baton_buf *reply);
int kv__run_persist(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply);
/* The lowest machine version whose SET takes these options: 2 for any of
 * EX, PX, EXAT, PXAT, KEEPTTL, GET (writes the option to *opt), else 1. */
uint32_t kv__set_machine_min(const struct kv__args *a, const char **opt);

/* ---- hash_commands.c: the hash commands and TYPE (machine version 3) ---- */

int kv__run_type(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply);
int kv__check_hset(const struct kv__args *a, struct baton_buf *err);
int kv__run_hset(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply);
int kv__run_hdel(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply);
int kv__check_hincrby(const struct kv__args *a, struct baton_buf *err);
int kv__run_hincrby(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply);
/* HGET and HEXISTS. */
int kv__run_hget(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply);
int kv__run_hmget(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply);
int kv__run_hlen(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply);
/* HGETALL, HKEYS and HVALS. */
int kv__run_hgetall(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply);
int kv__check_hscan(const struct kv__args *a, struct baton_buf *err);
int kv__run_hscan(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply);
/* A hash's fields, in the canonical order, chained into h (WATCH). */
uint64_t kv__fields_digest(const struct kv__table *fields, uint64_t h);

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

/* Read one command (u32 argc, then argc times u32 length + bytes) from r
 * into p, bounds-checked: 0, BATON_ECORRUPT or BATON_ENOMEM. Free with
 * kv__payload_free() (also fine after an error). */
int kv__args_read(struct baton_le_reader *r, struct kv__payload *p);
void kv__payload_free(struct kv__payload *p);

enum kv__kind {
	KV_KIND_COMMAND = 1,
	KV_KIND_TXN = 2,
	KV_KIND_SWEEP = 3,
	/* Migration (migration.c, docs/kv.md "Migration"). */
	KV_KIND_FENCE = 4,
	KV_KIND_IMPORT_BEGIN = 5,
	KV_KIND_IMPORT_CHUNK = 6,
	KV_KIND_IMPORT_END = 7,
	KV_KIND_IMPORT_ENTRY = 8,
	KV_KIND_AUTHORITY = 9,
	KV_KIND_CONTROL = 10,
};

/* The kinds of a migration's new side (machine version 3). */
static inline bool kv__kind_imports(uint8_t kind)
{
	return kind >= KV_KIND_IMPORT_BEGIN && kind <= KV_KIND_AUTHORITY;
}

/* A decoded payload of either format. */
struct kv__decoded {
	uint8_t format;		/* 1 or 2 */
	uint8_t kind;		/* enum kv__kind; format 1 is a command */
	int64_t stamp_ms;	/* format 2: the leader's stamp; format 1: -1 */
	struct kv__payload cmd; /* KV_KIND_COMMAND */
	uint32_t sweep_keys;	/* KV_KIND_SWEEP */
	uint32_t n_watches;	/* KV_KIND_TXN: the watches, then */
	struct baton_le_reader watches;
	uint32_t n_commands; /* the commands, each as kv__args_read */
	struct baton_le_reader commands;
	/* KV_KIND_FENCE: the target cluster id (not NUL-terminated). */
	const uint8_t *target;
	uint8_t target_len;
	/* The migration kinds 5..9: the old index they name (BEGIN, CHUNK,
	 * END: the snapshot's; ENTRY: the entry's; AUTHORITY: from), BEGIN's
	 * machine time, CHUNK's sequence number or END's chunk count. */
	uint64_t old_index;
	int64_t time_ms;
	uint32_t seq;
	/* IMPORT_BEGIN: the source cluster's UUID (NULL: not named);
	 * CONTROL: the operation. */
	const uint8_t *source_uuid;
	uint8_t control_op;
	/* CHUNK: its export records (checked whole); ENTRY: the old
	 * payload (decoded once, to check it). */
	const uint8_t *body;
	size_t body_len;
};

/* Decode a payload's framing, bounds-checked to its last byte (a
 * transaction's commands are only walked: read them with kv__args_read):
 * 0, BATON_ECORRUPT, BATON_EVERSION (a newer format or kind) or
 * BATON_ENOMEM. Free with kv__decoded_free(). */
int kv__decode(const uint8_t *buf, size_t len, struct kv__decoded *d);
void kv__decoded_free(struct kv__decoded *d);
/* One watch of a transaction from r (decoded already checked it). */
void kv__watch_read(struct baton_le_reader *r, const uint8_t **key, size_t *len,
		    uint64_t *hash);

/* ---- migration.c ---- */

/* Append e's export record (kv.h) with the expiry at (0: none): 0 or
 * BATON_ENOMEM (out unchanged). */
int kv__export_record(struct baton_buf *out, const struct kv__entry *e,
		      uint64_t at);
/* The string e as export records in parts (docs/kv.md "Export records":
 * a type 3 record with the value's length and first piece, then type 4
 * records of the pieces after it), each piece at most max(room,
 * KV_PART_BYTES_MIN): as kv__snap_put_string_part. 0 or BATON_ENOMEM
 * (out unchanged). */
int kv__export_string_part(struct baton_buf *out, const struct kv__entry *e,
			   uint64_t at, struct kv__part *part, size_t room,
			   bool *complete);
/* Some fields of the hash e as one export record: with `head`, a type 2
 * record of these n fields and the expiry at (the hash's first part),
 * else a type 5 record adding them to the hash. 0 or BATON_ENOMEM (out
 * unchanged). */
int kv__export_fields(struct baton_buf *out, const struct kv__entry *e,
		      uint64_t at, bool head,
		      const struct kv__entry *const *fields, size_t n);
/* Are [buf, buf + len) whole, well-formed export records? 0 or
 * BATON_ECORRUPT (a field given twice inside a hash is found only when
 * the records are applied). */
int kv__records_check(const uint8_t *buf, size_t len);
/* Does m hold anything (else the map never saw a migration payload)? */
bool kv__migration_any(const struct kv_migration *m);
/* Does m hold any of the fields of the section's format 2 (abort, seal,
 * unfences, the source UUID)? */
bool kv__migration_any_2(const struct kv_migration *m);
/* Apply a decoded payload of a migration kind (4..9) under v: 0 with its
 * reply (maybe a refusal) appended, or an error as kv_apply. */
int kv__apply_migration(struct baton_kv *kv, struct baton_machine_version v,
			const struct kv__decoded *d, struct baton_buf *out);

/* ---- kv.c ---- */

/* Apply a decoded command, transaction or sweep under v (no migration
 * gate): 0 with its reply appended, or an error as kv_apply. */
int kv__apply_write(struct baton_kv *kv, struct baton_machine_version v,
		    const struct kv__decoded *d, struct baton_buf *out);

struct baton_kv {
	struct kv__table table;
	int64_t now_ms;		  /* machine time: the largest stamp applied */
	struct baton_buf scratch; /* replies nobody waits for */
	char err[160];		  /* why the last call failed (kv_errmsg) */
	struct kv__snap *snap;	  /* the view open (snapshot, KEYS), or NULL */
	struct kv_snapshot_stats snap_stats; /* of it, or the last one */
	struct kv_migration mig;	     /* replicated, in snapshots */
};

/* MSET's and MSETNX's writes: every KEY VALUE pair of argv[1..] as a new
 * string without expiry, all or nothing. 0, or BATON_ENOMEM with the map
 * unchanged. */
int kv__put_pairs(struct baton_kv *kv, const struct kv__args *a);

/* The string and key commands of string_more.c (machine version 3). */
int kv__run_getdel(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply);
int kv__run_getset(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply);
int kv__run_setnx(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply);
int kv__run_setex(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply);
int kv__run_msetnx(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply);
int kv__run_getrange(struct baton_kv *kv, const struct kv__args *a,
		     struct baton_buf *reply);
int kv__run_setrange(struct baton_kv *kv, const struct kv__args *a,
		     struct baton_buf *reply);
int kv__run_rename(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply);
int kv__run_copy(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply);
int kv__check_setex(const struct kv__args *a, struct baton_buf *err);
int kv__check_msetnx(const struct kv__args *a, struct baton_buf *err);
int kv__check_getrange(const struct kv__args *a, struct baton_buf *err);
int kv__check_setrange(const struct kv__args *a, struct baton_buf *err);
int kv__check_copy(const struct kv__args *a, struct baton_buf *err);
int kv__run_incrbyfloat(struct baton_kv *kv, const struct kv__args *a,
			struct baton_buf *reply);
int kv__check_incrbyfloat(const struct kv__args *a, struct baton_buf *err);

/* Remove the key of argument i if it has expired at the machine time. */
void kv__expire_if_due(struct baton_kv *kv, const struct kv__args *a, int i);

#endif /* BATON_KV_INTERNAL_H */
