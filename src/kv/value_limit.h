/*
 * The value limit (batond's --max-value-bytes; docs/kv.md "The value
 * limit"): no write the leader appends to the log may leave a string value,
 * a hash field or a hash value longer than the limit.
 *
 * The limit is the leader's, checked before a write is appended, never at
 * apply: applying stays what it was (KV_VALUE_BYTES_MAX is the machine's
 * own bound, a constant of machine version 1), so every replica, and every
 * replay of an old log, computes the same map whatever limit each node
 * was started with. What the leader cannot read from its map is the writes
 * it appended and has not applied yet, so it keeps, per key, a bound on
 * the value's length once they are all applied (struct kv_limit): an
 * APPEND is checked against that bound, not against the map alone.
 *
 * Every function here is pure bookkeeping: no clock, no I/O.
 */
#ifndef BATON_KV_VALUE_LIMIT_H
#define BATON_KV_VALUE_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/buf.h"
#include "id_index.h"
#include "kv.h"

/* The smallest limit batond takes: any number INCRBYFLOAT can write (5
 * KiB of text) fits many times over. */
#define KV_LIMIT_BYTES_MIN ((uint64_t)64 << 10)

/* Redis 7's reply to an APPEND or SETRANGE past proto-max-bulk-len; every
 * write the value limit refuses gets it. */
#define KV_ERR_VALUE_TOO_BIG                                                   \
	"ERR string exceeds maximum allowed size (proto-max-bulk-len)"

/* What one write does to the length of one key's value. */
enum kv_bound_kind {
	KV_BOUND_FIXED, /* a length written as it is, into no string that
			 * may grow (a hash field or value): checked only */
	KV_BOUND_SET,	/* the value becomes `bytes` long (SET, MSET, ...) */
	KV_BOUND_GROW,	/* the value grows by `bytes` (APPEND) */
	KV_BOUND_RAISE, /* at most max(its length, `bytes`) (SETRANGE; the
			 * numbers INCR and INCRBYFLOAT write) */
	KV_BOUND_FROM,	/* the value of argument `from` (RENAME, COPY) */
};

struct kv_bound {
	enum kv_bound_kind kind;
	int key; /* the argument naming the key written */
	uint64_t bytes;
	int from; /* KV_BOUND_FROM: the argument naming the source key */
};

/* Call fn for every key a write command (kv_check()ed) writes, with what
 * it does to that key's value, in the order apply writes them; stop at
 * fn's first non-zero return and return it, else 0. Reads, and writes
 * that only shorten or delete values, call nothing. */
int kv_value_bounds(const struct kv_command *c, int argc,
		    const uint8_t *const *argv, const size_t *lens,
		    int (*fn)(void *arg, const struct kv_bound *b), void *arg);

/* The length of the string value of key now (live at machine time), 0 if
 * the key is absent, expired or a hash. */
uint64_t kv_value_len(struct baton_kv *kv, const uint8_t *key, size_t len);

/* The longest string value, hash field or hash value in the map (what a
 * restore needs the limit to be at least). */
uint64_t kv_value_len_max(const struct baton_kv *kv);

/* The leader's bookkeeping: per key hash with writes in flight, the bound
 * on its value once they applied and how many claims hold it. Keys are
 * known by their 64-bit hash: two keys that collide share one bound, the
 * larger, which can only refuse more. A zeroed struct with max set is
 * ready. */
struct kv_limit {
	uint64_t max; /* the limit in bytes, >= KV_LIMIT_BYTES_MIN */
	struct baton_id_index pending;
};

/* The keys one write holds in kv_limit until it is applied or dropped. */
struct kv_limit_claim {
	uint64_t *hashes; /* free()d by kv_limit_release */
	size_t n, cap;
};

/* Check the write (the commands of one entry: one, or a transaction's, in
 * order, with `transaction` set) against l->max on map kv (the leader's,
 * applied so far) and the writes in flight. 0: it fits; its keys' bounds
 * now include it and *claim holds them until kv_limit_release().
 * BATON_EINVAL: a value would exceed the limit; KV_ERR_VALUE_TOO_BIG (for
 * a transaction: EXECABORT with it) is appended to err, nothing is held.
 * BATON_ENOMEM: nothing held. The leader must have applied every entry it
 * did not propose itself (a new leader's inherited log): their writes are
 * in no bound (batond holds a new leader's writes until then). */
int kv_limit_claim(struct kv_limit *l, struct baton_kv *kv, bool transaction,
		   size_t n_commands, const struct kv_txn_command *commands,
		   struct kv_limit_claim *claim, struct baton_buf *err);

/* The same for a write already encoded (kv_encode, kv_encode_v2,
 * kv_encode_txn): its commands are read back from the payload. A payload
 * of another kind holds nothing (0). BATON_ECORRUPT: not a payload. */
int kv_limit_claim_payload(struct kv_limit *l, struct baton_kv *kv,
			   const uint8_t *payload, size_t len,
			   struct kv_limit_claim *claim, struct baton_buf *err);

/* The write was applied, or will never be: drop what it held. */
void kv_limit_release(struct kv_limit *l, struct kv_limit_claim *claim);

/* Keys with a bound held now (tests, INFO). */
uint32_t kv_limit_pending(const struct kv_limit *l);

/* Free everything (claims still out must not be released afterwards). */
void kv_limit_free(struct kv_limit *l);

#endif /* BATON_KV_VALUE_LIMIT_H */
