/*
 * The command table (machine versions 1 to 3), the checks and the
 * commands of version 1, with Redis's replies and error texts. SET and
 * the expiry commands (version 2) live in expire.c, the hash commands and
 * TYPE (version 3) in hash_commands.c. The string commands answer
 * WRONGTYPE on a hash, as Redis's do; there are hashes only from version
 * 3 on, so under versions 1 and 2 they answer as they always did.
 *
 * A check runs before a write is logged (kv_check) and again when it is
 * applied (the log may hold what another release checked). A write first
 * makes every allocation it needs and reserves room for its reply, then
 * changes the map: an out-of-memory failure leaves the map untouched.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "name_memo.h"
#include "resp.h"

/* SCAN's COUNT when none is given (Redis: 10). */
#define KV_SCAN_COUNT_DEFAULT 10u
/* Buckets SCAN visits per COUNT asked, at most (Redis: 10). */
#define KV_SCAN_BUCKETS_PER_COUNT 10u

#define ERR_SYNTAX KV_ERR_SYNTAX
#define ERR_NOT_INT KV_ERR_NOT_INT
#define ERR_OVERFLOW KV_ERR_OVERFLOW
#define ERR_TOO_BIG                                                            \
	"ERR string exceeds maximum allowed size (proto-max-bulk-len)"

/* ---- helpers ---- */

static uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c - 'A' + 'a') : c;
}

bool kv__arg_is(const struct kv__args *a, int i, const char *word)
{
	size_t n = strlen(word);
	if (a->lens[i] != n)
		return false;
	for (size_t j = 0; j < n; j++)
		if (lower(a->argv[i][j]) != (uint8_t)word[j])
			return false;
	return true;
}

int kv__refuse(struct baton_buf *b, const char *msg)
{
	return resp_error(b, "%s", msg) == 0 ? BATON_EINVAL : BATON_ENOMEM;
}

/* What a run does with a refusal found while applying: it is the reply. */
static int reply_error(struct baton_buf *b, const char *msg)
{
	return resp_error(b, "%s", msg);
}

int kv__list_push(struct kv__list *l, const struct kv__entry *e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap > 0 ? l->cap * 2 : 16;
		const struct kv__entry **v = kv__realloc(l->v, cap * sizeof *v);
		if (v == NULL)
			return BATON_ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = e;
	return 0;
}

/* An array of the listed keys. */
static int reply_keys(struct baton_buf *b, const struct kv__list *l)
{
	int rv = resp_array(b, l->n);
	for (size_t i = 0; rv == 0 && i < l->n; i++)
		rv = resp_bulk(b, l->v[i]->key, l->v[i]->key_len);
	return rv;
}

struct kv__entry *kv__find(struct baton_kv *kv, const struct kv__args *a, int i)
{
	struct kv__entry *e =
		kv__table_find(&kv->table, a->argv[i], a->lens[i]);
	return e != NULL && !kv__expired(e, kv->now_ms) ? e : NULL;
}

void kv__expire_if_due(struct baton_kv *kv, const struct kv__args *a, int i)
{
	/* The first key to expire is not due: none is (saves a lookup). */
	const struct kv__entry *first = kv__heap_top(&kv->table.expiring);
	if (first == NULL || !kv__expired(first, kv->now_ms))
		return;
	struct kv__entry *e =
		kv__table_find(&kv->table, a->argv[i], a->lens[i]);
	if (e != NULL && kv__expired(e, kv->now_ms))
		kv__table_delete(&kv->table, a->argv[i], a->lens[i]);
}

bool kv__append_fits(size_t have, size_t add)
{
	return have <= KV_VALUE_BYTES_MAX && add <= KV_VALUE_BYTES_MAX - have;
}

/* ---- option parsing, shared by checks and runs ---- */

/* An increment argument, as INCRBY and DECRBY take it. */
static int increment(const struct kv__args *a, bool decrement, int64_t *by,
		     struct baton_buf *err)
{
	int64_t v;
	if (!resp_parse_int(a->argv[2], a->lens[2], &v))
		return kv__refuse(err, ERR_NOT_INT);
	if (decrement && v == INT64_MIN)
		return kv__refuse(err, "ERR decrement would overflow");
	*by = decrement ? -v : v;
	return 0;
}

bool kv__parse_cursor(const uint8_t *s, size_t len, uint64_t *out)
{
	if (len == 0)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

int kv__scan_options(const struct kv__args *a, int cursor_arg, bool hash,
		     struct kv__scan_options *o, struct baton_buf *err)
{
	o->count = KV_SCAN_COUNT_DEFAULT;
	o->pattern = NULL;
	o->pattern_len = 0;
	o->novalues = false;
	o->type = NULL;
	o->type_len = 0;
	if (!kv__parse_cursor(a->argv[cursor_arg], a->lens[cursor_arg],
			      &o->cursor))
		return kv__refuse(err, "ERR invalid cursor");
	for (int i = cursor_arg + 1; i < a->argc; i += 2) {
		bool has_value = a->argc - i >= 2;
		if (hash && kv__arg_is(a, i, "novalues")) {
			o->novalues = true;
			i--; /* a flag: no value follows */
		} else if (has_value && kv__arg_is(a, i, "count")) {
			int64_t n;
			if (!resp_parse_int(a->argv[i + 1], a->lens[i + 1], &n))
				return kv__refuse(err, ERR_NOT_INT);
			if (n < 1)
				return kv__refuse(err, ERR_SYNTAX);
			o->count = (uint64_t)n;
		} else if (has_value && kv__arg_is(a, i, "match")) {
			o->pattern = a->argv[i + 1];
			o->pattern_len = a->lens[i + 1];
			if (o->pattern_len == 1 && o->pattern[0] == '*')
				o->pattern = NULL;
		} else if (!hash && has_value && kv__arg_is(a, i, "type")) {
			o->type = a->argv[i + 1];
			o->type_len = a->lens[i + 1];
		} else {
			return kv__refuse(err, ERR_SYNTAX);
		}
	}
	return 0;
}

uint32_t kv__scan_machine_min(const struct kv__args *a, const char **opt)
{
	/* SCAN's options come in pairs from argument 2 on. */
	for (int i = 2; i < a->argc; i += 2) {
		if (kv__arg_is(a, i, "type")) {
			*opt = "type";
			return 3;
		}
	}
	return 1;
}

/* ---- checks beyond arity ---- */

static int check_incrby(const struct kv__args *a, struct baton_buf *err)
{
	int64_t by;
	return increment(a, false, &by, err);
}

static int check_decrby(const struct kv__args *a, struct baton_buf *err)
{
	int64_t by;
	return increment(a, true, &by, err);
}

static int wrong_arity(const char *name, struct baton_buf *err)
{
	return resp_error(err, "ERR wrong number of arguments for '%s' command",
			  name) == 0
		       ? BATON_EINVAL
		       : BATON_ENOMEM;
}

static int check_mset(const struct kv__args *a, struct baton_buf *err)
{
	return a->argc % 2 == 0 ? wrong_arity("mset", err) : 0;
}

static int check_scan(const struct kv__args *a, struct baton_buf *err)
{
	struct kv__scan_options o;
	return kv__scan_options(a, 1, false, &o, err);
}

static int check_flushall(const struct kv__args *a, struct baton_buf *err)
{
	if (a->argc > 2 || (a->argc == 2 && !kv__arg_is(a, 1, "sync") &&
			    !kv__arg_is(a, 1, "async")))
		return kv__refuse(err, ERR_SYNTAX);
	return 0;
}

/* ---- reads ---- */

static int run_get(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply)
{
	const struct kv__entry *e = kv__find(kv, a, 1);
	if (e != NULL && kv__is_hash(e))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	return e != NULL ? resp_bulk(reply, e->val, e->val_len)
			 : resp_null(reply);
}

static int run_exists(struct baton_kv *kv, const struct kv__args *a,
		      struct baton_buf *reply)
{
	int64_t n = 0;
	for (int i = 1; i < a->argc; i++)
		if (kv__find(kv, a, i) != NULL)
			n++;
	return resp_int(reply, n);
}

static int run_strlen(struct baton_kv *kv, const struct kv__args *a,
		      struct baton_buf *reply)
{
	const struct kv__entry *e = kv__find(kv, a, 1);
	if (e != NULL && kv__is_hash(e))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	return resp_int(reply, e != NULL ? (int64_t)e->val_len : 0);
}

static int run_mget(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	int rv = resp_array(reply, (size_t)a->argc - 1);
	for (int i = 1; rv == 0 && i < a->argc; i++) {
		const struct kv__entry *e = kv__find(kv, a, i);
		rv = e != NULL && !kv__is_hash(e)
			     ? resp_bulk(reply, e->val, e->val_len)
			     : resp_null(reply); /* Redis: nil for a hash */
	}
	return rv;
}

static int run_dbsize(struct baton_kv *kv, const struct kv__args *a,
		      struct baton_buf *reply)
{
	(void)a;
	return resp_int(reply, (int64_t)kv->table.count);
}

/* Is e of the type SCAN's TYPE names (Redis: without case; a name that
 * is no type matches nothing)? */
static bool type_matches(const struct kv__scan_options *o,
			 const struct kv__entry *e)
{
	if (o->type == NULL)
		return true;
	const char *name = kv__is_hash(e) ? "hash" : "string";
	return o->type_len == strlen(name) &&
	       strncasecmp((const char *)o->type, name, o->type_len) == 0;
}

/* Is e live at now_ms and matched by the pattern (NULL: any)? */
static bool matches(const uint8_t *pattern, size_t plen,
		    const struct kv__entry *e, int64_t now_ms)
{
	return !kv__expired(e, now_ms) &&
	       (pattern == NULL ||
		kv__glob_match(pattern, plen, e->key, e->key_len));
}

static int run_keys(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	const uint8_t *pattern = a->argv[1];
	size_t plen = a->lens[1];
	if (plen == 1 && pattern[0] == '*')
		pattern = NULL;
	struct kv__list l = {0};
	int rv = 0;
	uint64_t cursor = 0;
	do {
		const struct kv__entry *e =
			kv__table_bucket(&kv->table, cursor);
		for (; rv == 0 && e != NULL; e = kv__table_after(&kv->table, e))
			if (matches(pattern, plen, e, kv->now_ms))
				rv = kv__list_push(&l, e);
		cursor = kv__table_next(&kv->table, cursor);
	} while (rv == 0 && cursor != 0);
	if (rv == 0)
		rv = reply_keys(reply, &l);
	kv__free(l.v);
	return rv;
}

int kv__scan_table(const struct kv__table *t, const struct kv__scan_options *o,
		   int64_t now_ms, struct kv__list *l, uint64_t *next)
{
	uint64_t buckets = o->count <= UINT64_MAX / KV_SCAN_BUCKETS_PER_COUNT
				   ? o->count * KV_SCAN_BUCKETS_PER_COUNT
				   : UINT64_MAX;
	uint64_t seen = 0, cursor = o->cursor;
	int rv = 0;
	do {
		const struct kv__entry *e = kv__table_bucket(t, cursor);
		for (; rv == 0 && e != NULL; e = kv__table_after(t, e)) {
			seen++;
			if (matches(o->pattern, o->pattern_len, e, now_ms) &&
			    type_matches(o, e))
				rv = kv__list_push(l, e);
		}
		cursor = kv__table_next(t, cursor);
		buckets--;
	} while (rv == 0 && cursor != 0 && buckets > 0 && seen < o->count);
	*next = cursor;
	return rv;
}

int kv__reply_cursor(struct baton_buf *b, uint64_t cursor)
{
	char text[KV_INT_TEXT_BYTES];
	int n = snprintf(text, sizeof text, "%" PRIu64, cursor);
	assert(n > 0 && (size_t)n < sizeof text);
	int rv = resp_array(b, 2);
	return rv == 0 ? resp_bulk(b, text, (size_t)n) : rv;
}

static int run_scan(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	struct kv__scan_options o;
	int rv = kv__scan_options(a, 1, false, &o, reply);
	assert(rv == 0); /* checked */
	struct kv__list l = {0};
	uint64_t next;
	rv = kv__scan_table(&kv->table, &o, kv->now_ms, &l, &next);
	if (rv == 0)
		rv = kv__reply_cursor(reply, next);
	if (rv == 0)
		rv = reply_keys(reply, &l);
	kv__free(l.v);
	return rv;
}

/* ---- writes ---- */

static int run_del(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply)
{
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	int64_t n = 0;
	for (int i = 1; i < a->argc; i++)
		if (kv__table_delete(&kv->table, a->argv[i], a->lens[i]))
			n++;
	return resp_int(reply, n);
}

static int incr_by(struct baton_kv *kv, const struct kv__args *a, int64_t by,
		   struct baton_buf *reply)
{
	struct kv__entry *e = kv__find(kv, a, 1);
	int64_t v = 0;
	if (e != NULL && kv__is_hash(e))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	if (e != NULL && !resp_parse_int(e->val, e->val_len, &v))
		return reply_error(reply, ERR_NOT_INT);
	if (kv__add_overflows(v, by))
		return reply_error(reply, ERR_OVERFLOW);
	v += by;
	char text[KV_INT_TEXT_BYTES];
	int n = snprintf(text, sizeof text, "%" PRId64, v);
	assert(n > 0 && (size_t)n < sizeof text);
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	if (e != NULL) {
		rv = kv__entry_set(&kv->table, e, (const uint8_t *)text,
				   (size_t)n);
		if (rv != 0)
			return rv;
	} else {
		e = kv__entry_new(a->argv[1], a->lens[1], (const uint8_t *)text,
				  (size_t)n);
		if (e == NULL)
			return BATON_ENOMEM;
		kv__table_insert(&kv->table, e);
	}
	return resp_int(reply, v);
}

static int run_incr(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	return incr_by(kv, a, 1, reply);
}

static int run_decr(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	return incr_by(kv, a, -1, reply);
}

static int run_incrby(struct baton_kv *kv, const struct kv__args *a,
		      struct baton_buf *reply)
{
	int64_t by;
	int rv = increment(a, false, &by, reply);
	assert(rv == 0); /* checked */
	return incr_by(kv, a, by, reply);
}

static int run_decrby(struct baton_kv *kv, const struct kv__args *a,
		      struct baton_buf *reply)
{
	int64_t by;
	int rv = increment(a, true, &by, reply);
	assert(rv == 0); /* checked */
	return incr_by(kv, a, by, reply);
}

static int run_append(struct baton_kv *kv, const struct kv__args *a,
		      struct baton_buf *reply)
{
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e != NULL && kv__is_hash(e))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	if (e != NULL && !kv__append_fits(e->val_len, a->lens[2]))
		return reply_error(reply, ERR_TOO_BIG);
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	if (e != NULL) {
		rv = kv__entry_append(&kv->table, e, a->argv[2], a->lens[2]);
		if (rv != 0)
			return rv;
	} else {
		e = kv__entry_new(a->argv[1], a->lens[1], a->argv[2],
				  a->lens[2]);
		if (e == NULL)
			return BATON_ENOMEM;
		kv__table_insert(&kv->table, e);
	}
	return resp_int(reply, (int64_t)e->val_len);
}

int kv__put_pairs(struct baton_kv *kv, const struct kv__args *a)
{
	size_t n = (size_t)(a->argc - 1) / 2;
	struct kv__entry **fresh = kv__calloc(n, sizeof *fresh);
	int rv = fresh != NULL ? 0 : BATON_ENOMEM;
	for (size_t i = 0; rv == 0 && i < n; i++) {
		int k = 1 + 2 * (int)i;
		fresh[i] = kv__entry_new(a->argv[k], a->lens[k], a->argv[k + 1],
					 a->lens[k + 1]);
		if (fresh[i] == NULL)
			rv = BATON_ENOMEM;
	}
	if (rv == 0) /* nothing can fail from here on; later pairs win */
		for (size_t i = 0; i < n; i++)
			kv__table_put(&kv->table, fresh[i]);
	else
		for (size_t i = 0; fresh != NULL && i < n; i++)
			kv__entry_free(fresh[i]);
	kv__free(fresh);
	return rv;
}

static int run_mset(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv == 0)
		rv = kv__put_pairs(kv, a);
	return rv != 0 ? rv : resp_simple(reply, "OK");
}

static int run_flushall(struct baton_kv *kv, const struct kv__args *a,
			struct baton_buf *reply)
{
	(void)a;
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	kv__table_clear(&kv->table);
	return resp_simple(reply, "OK");
}

/* ---- the table ---- */

static const struct kv_command commands[] = {
	{"get", 2, KV_READ, 1, 1, 1, 1, NULL, run_get},
	{"set", -3, KV_WRITE | KV_GROWS, 1, 1, 1, 1, kv__check_set,
	 kv__run_set},
	{"del", -2, KV_WRITE, 1, 1, -1, 1, NULL, run_del},
	{"exists", -2, KV_READ, 1, 1, -1, 1, NULL, run_exists},
	{"incr", 2, KV_WRITE | KV_GROWS, 1, 1, 1, 1, NULL, run_incr},
	{"incrby", 3, KV_WRITE | KV_GROWS, 1, 1, 1, 1, check_incrby,
	 run_incrby},
	{"decr", 2, KV_WRITE | KV_GROWS, 1, 1, 1, 1, NULL, run_decr},
	{"decrby", 3, KV_WRITE | KV_GROWS, 1, 1, 1, 1, check_decrby,
	 run_decrby},
	{"append", 3, KV_WRITE | KV_GROWS, 1, 1, 1, 1, NULL, run_append},
	{"strlen", 2, KV_READ, 1, 1, 1, 1, NULL, run_strlen},
	{"mget", -2, KV_READ, 1, 1, -1, 1, NULL, run_mget},
	{"mset", -3, KV_WRITE | KV_GROWS, 1, 1, -1, 2, check_mset, run_mset},
	{"dbsize", 1, KV_READ, 1, 0, 0, 0, NULL, run_dbsize},
	{"scan", -2, KV_READ, 1, 0, 0, 0, check_scan, run_scan},
	{"keys", 2, KV_READ, 1, 0, 0, 0, NULL, run_keys},
	{"flushall", -1, KV_WRITE, 1, 0, 0, 0, check_flushall, run_flushall},
	/* Machine version 2: expiry. */
	{"getex", -2, KV_WRITE, 2, 1, 1, 1, kv__check_getex, kv__run_getex},
	{"expire", -3, KV_WRITE, 2, 1, 1, 1, kv__check_expire, kv__run_expire},
	{"pexpire", -3, KV_WRITE, 2, 1, 1, 1, kv__check_expire, kv__run_expire},
	{"expireat", -3, KV_WRITE, 2, 1, 1, 1, kv__check_expire,
	 kv__run_expire},
	{"pexpireat", -3, KV_WRITE, 2, 1, 1, 1, kv__check_expire,
	 kv__run_expire},
	{"persist", 2, KV_WRITE, 2, 1, 1, 1, NULL, kv__run_persist},
	{"ttl", 2, KV_READ, 2, 1, 1, 1, NULL, kv__run_ttl},
	{"pttl", 2, KV_READ, 2, 1, 1, 1, NULL, kv__run_ttl},
	{"expiretime", 2, KV_READ, 2, 1, 1, 1, NULL, kv__run_ttl},
	{"pexpiretime", 2, KV_READ, 2, 1, 1, 1, NULL, kv__run_ttl},
	/* Machine version 3: hashes and TYPE. */
	{"type", 2, KV_READ, 3, 1, 1, 1, NULL, kv__run_type},
	{"hset", -4, KV_WRITE | KV_GROWS, 3, 1, 1, 1, kv__check_hset,
	 kv__run_hset},
	{"hdel", -3, KV_WRITE, 3, 1, 1, 1, NULL, kv__run_hdel},
	{"hincrby", 4, KV_WRITE | KV_GROWS, 3, 1, 1, 1, kv__check_hincrby,
	 kv__run_hincrby},
	{"hget", 3, KV_READ, 3, 1, 1, 1, NULL, kv__run_hget},
	{"hmget", -3, KV_READ, 3, 1, 1, 1, NULL, kv__run_hmget},
	{"hexists", 3, KV_READ, 3, 1, 1, 1, NULL, kv__run_hget},
	{"hlen", 2, KV_READ, 3, 1, 1, 1, NULL, kv__run_hlen},
	{"hgetall", 2, KV_READ, 3, 1, 1, 1, NULL, kv__run_hgetall},
	{"hkeys", 2, KV_READ, 3, 1, 1, 1, NULL, kv__run_hgetall},
	{"hvals", 2, KV_READ, 3, 1, 1, 1, NULL, kv__run_hgetall},
	{"hscan", -3, KV_READ, 3, 1, 1, 1, kv__check_hscan, kv__run_hscan},
	/* Machine version 3: the rest of Redis's string and key commands. */
	{"unlink", -2, KV_WRITE, 3, 1, -1, 1, NULL, run_del},
	{"getdel", 2, KV_WRITE, 3, 1, 1, 1, NULL, kv__run_getdel},
	{"getset", 3, KV_WRITE | KV_GROWS, 3, 1, 1, 1, NULL, kv__run_getset},
	{"setnx", 3, KV_WRITE | KV_GROWS, 3, 1, 1, 1, NULL, kv__run_setnx},
	{"setex", 4, KV_WRITE | KV_GROWS, 3, 1, 1, 1, kv__check_setex,
	 kv__run_setex},
	{"psetex", 4, KV_WRITE | KV_GROWS, 3, 1, 1, 1, kv__check_setex,
	 kv__run_setex},
	{"msetnx", -3, KV_WRITE | KV_GROWS, 3, 1, -1, 2, kv__check_msetnx,
	 kv__run_msetnx},
	{"getrange", 4, KV_READ, 3, 1, 1, 1, kv__check_getrange,
	 kv__run_getrange},
	{"setrange", 4, KV_WRITE | KV_GROWS, 3, 1, 1, 1, kv__check_setrange,
	 kv__run_setrange},
	{"rename", 3, KV_WRITE, 3, 1, 2, 1, NULL, kv__run_rename},
	{"renamenx", 3, KV_WRITE, 3, 1, 2, 1, NULL, kv__run_rename},
	{"copy", -3, KV_WRITE | KV_GROWS, 3, 1, 2, 1, kv__check_copy,
	 kv__run_copy},
	{"flushdb", -1, KV_WRITE, 3, 0, 0, 0, check_flushall, run_flushall},
	{"incrbyfloat", 3, KV_WRITE | KV_GROWS, 3, 1, 1, 1,
	 kv__check_incrbyfloat, kv__run_incrbyfloat},
};

const struct kv_command *kv_lookup(const uint8_t *name, size_t len)
{
	/* The last name asked for and its answer: a pipeline repeats its
	 * command, and a command is looked up at the client, then at
	 * apply. Per thread, as kv_lookup may be called anywhere. */
	static _Thread_local struct baton_name_memo memo;
	static _Thread_local const struct kv_command *last;
	if (baton_name_memo_is(&memo, name, len))
		return last;
	struct kv__args a = {1, &name, &len};
	const struct kv_command *found = NULL;
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (kv__arg_is(&a, 0, commands[i].name)) {
			found = &commands[i];
			break;
		}
	if (baton_name_memo_set(&memo, name, len))
		last = found;
	return found;
}

const struct kv_command *kv_command_at(size_t i)
{
	return i < sizeof commands / sizeof commands[0] ? &commands[i] : NULL;
}

int kv__check(const struct kv_command *c, const struct kv__args *a,
	      struct baton_buf *err)
{
	assert(c != NULL && a->argc >= 1);
	if ((c->arity > 0 && a->argc != c->arity) || a->argc < -c->arity)
		return wrong_arity(c->name, err);
	if ((unsigned)a->argc > KV_ARGS_MAX)
		return resp_error(err, "ERR too many arguments (at most %u)",
				  KV_ARGS_MAX) == 0
			       ? BATON_EINVAL
			       : BATON_ENOMEM;
	if (c->key_first > 0) {
		int last =
			c->key_last < 0 ? a->argc + c->key_last : c->key_last;
		for (int i = c->key_first; i <= last; i += c->key_step)
			if (a->lens[i] > KV_KEY_BYTES_MAX)
				return kv__refuse(err,
						  "ERR key exceeds maximum "
						  "allowed size");
	}
	for (int i = 1; i < a->argc; i++)
		if (a->lens[i] > KV_VALUE_BYTES_MAX)
			return kv__refuse(err, ERR_TOO_BIG);
	return c->check != NULL ? c->check(a, err) : 0;
}

int kv_check(const struct kv_command *c, int argc, const uint8_t *const *argv,
	     const size_t *lens, struct baton_buf *err)
{
	struct kv__args a = {argc, argv, lens};
	return kv__check(c, &a, err);
}

int kv_gate(const struct kv_command *c, int argc, const uint8_t *const *argv,
	    const size_t *lens, struct baton_machine_version v,
	    struct baton_buf *err)
{
	assert(c != NULL && argc >= 1);
	struct kv__args a = {argc, argv, lens};
	const char *opt = NULL;
	uint32_t need = c->machine_min;
	if (need <= v.value && c->run == kv__run_set)
		need = kv__set_machine_min(&a, &opt);
	if (need <= v.value && c->run == run_scan)
		need = kv__scan_machine_min(&a, &opt);
	if (need <= v.value)
		return 0;
	int rv = opt != NULL
			 ? resp_error(err,
				      "ERR option '%s' of command '%s' needs "
				      "machine version %u; the effective "
				      "machine version is %u",
				      opt, c->name, need, v.value)
			 : resp_error(err,
				      "ERR command '%s' needs machine version "
				      "%u; the effective machine version is %u",
				      c->name, need, v.value);
	return rv == 0 ? BATON_EVERSION : BATON_ENOMEM;
}
