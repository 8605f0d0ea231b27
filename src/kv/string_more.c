/*
 * The string and key commands machine version 3 adds beside hashes:
 * GETDEL, GETSET, SETNX, SETEX, PSETEX, MSETNX, GETRANGE, SETRANGE,
 * RENAME, RENAMENX, COPY and INCRBYFLOAT, with Redis 7.0's replies, errors and
 * TTL rules (RENAME and COPY carry the expiry, SETRANGE keeps it, GETSET and
 * SETEX replace it). UNLINK and FLUSHDB are DEL and FLUSHALL's rows in
 * commands.c. Relative expiries count from machine time, never a clock.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resp.h"

#define ERR_TOO_BIG                                                            \
	"ERR string exceeds maximum allowed size (proto-max-bulk-len)"
/* Room for a bulk reply's header and CRLFs beside its bytes. */
#define BULK_OVERHEAD_BYTES 32u

/* At apply, a refusal is the reply: 0 once it is appended. */
static int as_reply(int rv)
{
	return rv == BATON_EINVAL ? 0 : rv;
}

/* Replace or add the string value of key at argument k (any type before),
 * with at_ms as its expiry (0: none). 0 or BATON_ENOMEM, map unchanged. */
static int put_string(struct baton_kv *kv, const struct kv__args *a, int k,
		      const uint8_t *val, size_t len, int64_t at_ms)
{
	struct kv__table *t = &kv->table;
	int rv = at_ms > 0 ? kv__heap_reserve(&t->expiring, 1) : 0;
	if (rv != 0)
		return rv;
	struct kv__entry *e = kv__find(kv, a, k);
	if (e != NULL) {
		rv = kv__entry_set(t, e, val, len);
		if (rv != 0)
			return rv;
	} else {
		e = kv__entry_new(a->argv[k], a->lens[k], val, len);
		if (e == NULL)
			return BATON_ENOMEM;
		kv__table_insert(t, e);
	}
	if (at_ms > 0)
		kv__expire_set(t, e, at_ms);
	else
		kv__expire_clear(t, e);
	return 0;
}

/* ---- GETDEL, GETSET, SETNX ---- */

int kv__run_getdel(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply)
{
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e == NULL)
		return resp_null(reply);
	if (kv__is_hash(e))
		return resp_error(reply, "%s", KV_ERR_WRONGTYPE);
	int rv = resp_bulk(reply, e->val, e->val_len);
	if (rv == 0)
		kv__table_delete(&kv->table, a->argv[1], a->lens[1]);
	return rv;
}

int kv__run_getset(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply)
{
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e != NULL && kv__is_hash(e))
		return resp_error(reply, "%s", KV_ERR_WRONGTYPE);
	size_t start = reply->len;
	int rv = e != NULL ? resp_bulk(reply, e->val, e->val_len)
			   : resp_null(reply);
	if (rv == 0)
		rv = put_string(kv, a, 1, a->argv[2], a->lens[2], 0);
	if (rv != 0)
		reply->len = start; /* nothing changed, no reply */
	return rv;
}

int kv__run_setnx(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply)
{
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	if (kv__find(kv, a, 1) != NULL)
		return resp_int(reply, 0);
	rv = put_string(kv, a, 1, a->argv[2], a->lens[2], 0);
	return rv != 0 ? rv : resp_int(reply, 1);
}

/* ---- SETEX, PSETEX ---- */

/* The expiry of SETEX/PSETEX in ms from now, as Redis checks it. */
static int setex_ms(const struct kv__args *a, struct baton_buf *err,
		    int64_t *ms)
{
	bool seconds = a->lens[0] == 5; /* "setex", not "psetex" */
	int64_t v;
	if (!resp_parse_int(a->argv[2], a->lens[2], &v))
		return kv__refuse(err, KV_ERR_NOT_INT);
	if (v <= 0 || (seconds && v > INT64_MAX / 1000))
		return resp_error(err,
				  "ERR invalid expire time in '%s' command",
				  seconds ? "setex" : "psetex") == 0
			       ? BATON_EINVAL
			       : BATON_ENOMEM;
	*ms = seconds ? v * 1000 : v;
	return 0;
}

int kv__check_setex(const struct kv__args *a, struct baton_buf *err)
{
	int64_t ms = 0;
	return setex_ms(a, err, &ms);
}

int kv__run_setex(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply)
{
	int64_t ms = 0;
	int rv = setex_ms(a, reply, &ms);
	if (rv != 0)
		return as_reply(rv);
	if (ms > INT64_MAX - kv->now_ms)
		return resp_error(reply,
				  "ERR invalid expire time in '%s' command",
				  a->lens[0] == 5 ? "setex" : "psetex");
	rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv == 0)
		rv = put_string(kv, a, 1, a->argv[3], a->lens[3],
				kv->now_ms + ms);
	return rv != 0 ? rv : resp_simple(reply, "OK");
}

/* ---- MSETNX ---- */

int kv__check_msetnx(const struct kv__args *a, struct baton_buf *err)
{
	if (a->argc % 2 == 1)
		return 0;
	return resp_error(
		       err,
		       "ERR wrong number of arguments for 'msetnx' command") ==
			       0
		       ? BATON_EINVAL
		       : BATON_ENOMEM;
}

int kv__run_msetnx(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply)
{
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	for (int k = 1; k < a->argc; k += 2)
		if (kv__find(kv, a, k) != NULL)
			return resp_int(reply, 0);
	rv = kv__put_pairs(kv, a);
	return rv != 0 ? rv : resp_int(reply, 1);
}

/* ---- GETRANGE, SETRANGE ---- */

int kv__check_getrange(const struct kv__args *a, struct baton_buf *err)
{
	int64_t v;
	if (!resp_parse_int(a->argv[2], a->lens[2], &v) ||
	    !resp_parse_int(a->argv[3], a->lens[3], &v))
		return kv__refuse(err, KV_ERR_NOT_INT);
	return 0;
}

int kv__run_getrange(struct baton_kv *kv, const struct kv__args *a,
		     struct baton_buf *reply)
{
	int64_t start, end;
	if (!resp_parse_int(a->argv[2], a->lens[2], &start) ||
	    !resp_parse_int(a->argv[3], a->lens[3], &end))
		return resp_error(reply, "%s", KV_ERR_NOT_INT);
	const struct kv__entry *e = kv__find(kv, a, 1);
	if (e != NULL && kv__is_hash(e))
		return resp_error(reply, "%s", KV_ERR_WRONGTYPE);
	int64_t len = e != NULL ? (int64_t)e->val_len : 0;
	/* Redis 7.0's arithmetic, step by step. */
	if (start < 0 && end < 0 && start > end)
		return resp_bulk(reply, (const uint8_t *)"", 0);
	if (start < 0)
		start += len;
	if (end < 0)
		end += len;
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if (end >= len)
		end = len - 1;
	if (start > end || len == 0)
		return resp_bulk(reply, (const uint8_t *)"", 0);
	return resp_bulk(reply, e->val + start, (size_t)(end - start + 1));
}

/* SETRANGE's offset: a non-negative integer. */
static int setrange_offset(const struct kv__args *a, struct baton_buf *err,
			   int64_t *offset)
{
	if (!resp_parse_int(a->argv[2], a->lens[2], offset))
		return kv__refuse(err, KV_ERR_NOT_INT);
	if (*offset < 0)
		return kv__refuse(err, "ERR offset is out of range");
	return 0;
}

/* Would offset + len bytes pass KV_VALUE_BYTES_MAX? */
static bool setrange_too_big(int64_t offset, size_t len)
{
	return (uint64_t)offset > KV_VALUE_BYTES_MAX ||
	       len > KV_VALUE_BYTES_MAX - (uint64_t)offset;
}

int kv__check_setrange(const struct kv__args *a, struct baton_buf *err)
{
	int64_t offset;
	int rv = setrange_offset(a, err, &offset);
	if (rv == 0 && a->lens[3] > 0 && setrange_too_big(offset, a->lens[3]))
		rv = kv__refuse(err, ERR_TOO_BIG);
	return rv;
}

int kv__run_setrange(struct baton_kv *kv, const struct kv__args *a,
		     struct baton_buf *reply)
{
	int64_t offset;
	int rv = setrange_offset(a, reply, &offset);
	if (rv != 0)
		return as_reply(rv);
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e != NULL && kv__is_hash(e))
		return resp_error(reply, "%s", KV_ERR_WRONGTYPE);
	size_t have = e != NULL ? e->val_len : 0;
	size_t add = a->lens[3];
	if (add == 0)
		return resp_int(reply, (int64_t)have);
	if (setrange_too_big(offset, add))
		return resp_error(reply, "%s", ERR_TOO_BIG);
	size_t len = (size_t)offset + add > have ? (size_t)offset + add : have;
	uint8_t *val = kv__calloc(len, 1);
	rv = val != NULL ? baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES)
			 : BATON_ENOMEM;
	if (rv == 0) {
		if (have > 0)
			memcpy(val, e->val, have);
		memcpy(val + offset, a->argv[3], add);
		if (e != NULL) { /* the expiry stays, as in Redis */
			rv = kv__entry_set(&kv->table, e, val, len);
		} else {
			e = kv__entry_new(a->argv[1], a->lens[1], val, len);
			if (e != NULL)
				kv__table_insert(&kv->table, e);
			else
				rv = BATON_ENOMEM;
		}
	}
	kv__free(val);
	return rv != 0 ? rv : resp_int(reply, (int64_t)len);
}

/* ---- RENAME, RENAMENX, COPY ---- */

static bool same_key(const struct kv__args *a, int i, int j)
{
	return a->lens[i] == a->lens[j] &&
	       memcmp(a->argv[i], a->argv[j], a->lens[i]) == 0;
}

/* A copy of e under key k (expiry included) put in place of any entry of
 * that key; 0 or BATON_ENOMEM with the map unchanged. */
static int copy_to(struct baton_kv *kv, const struct kv__entry *e,
		   const struct kv__args *a, int k)
{
	struct kv__table *t = &kv->table;
	bool expiring = kv__has_expiry(e);
	int64_t at = e->expire_at_ms;
	int rv = expiring ? kv__heap_reserve(&t->expiring, 1) : 0;
	if (rv != 0)
		return rv;
	struct kv__entry *copy = kv__entry_copy_as(e, a->argv[k], a->lens[k]);
	if (copy == NULL)
		return BATON_ENOMEM;
	kv__table_delete(t, a->argv[k], a->lens[k]);
	kv__table_insert(t, copy);
	if (expiring)
		kv__expire_set(t, copy, at);
	return 0;
}

int kv__run_rename(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply)
{
	bool nx = a->lens[0] == 8; /* "renamenx" */
	const struct kv__entry *e = kv__find(kv, a, 1);
	if (e == NULL)
		return resp_error(reply, "ERR no such key");
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	if (same_key(a, 1, 2))
		return nx ? resp_int(reply, 0) : resp_simple(reply, "OK");
	if (nx && kv__find(kv, a, 2) != NULL)
		return resp_int(reply, 0);
	rv = copy_to(kv, e, a, 2);
	if (rv != 0)
		return rv;
	kv__table_delete(&kv->table, a->argv[1], a->lens[1]);
	return nx ? resp_int(reply, 1) : resp_simple(reply, "OK");
}

/* COPY's options: REPLACE, and DB 0 (the only database). */
static int copy_options(const struct kv__args *a, struct baton_buf *err,
			bool *replace)
{
	*replace = false;
	for (int i = 3; i < a->argc; i++) {
		int64_t db;
		if (kv__arg_is(a, i, "replace")) {
			*replace = true;
		} else if (kv__arg_is(a, i, "db") && i + 1 < a->argc) {
			i++;
			if (!resp_parse_int(a->argv[i], a->lens[i], &db))
				return kv__refuse(err, KV_ERR_NOT_INT);
			if (db != 0) /* baton has the one database */
				return kv__refuse(
					err, "ERR DB index is out of range");
		} else {
			return kv__refuse(err, KV_ERR_SYNTAX);
		}
	}
	if (same_key(a, 1, 2))
		return kv__refuse(err, "ERR source and destination objects "
				       "are the same");
	return 0;
}

int kv__check_copy(const struct kv__args *a, struct baton_buf *err)
{
	bool replace;
	return copy_options(a, err, &replace);
}

int kv__run_copy(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply)
{
	bool replace;
	int rv = copy_options(a, reply, &replace);
	if (rv != 0)
		return as_reply(rv);
	rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	const struct kv__entry *e = kv__find(kv, a, 1);
	if (e == NULL || (!replace && kv__find(kv, a, 2) != NULL))
		return resp_int(reply, 0);
	rv = copy_to(kv, e, a, 2);
	return rv != 0 ? rv : resp_int(reply, 1);
}

/* ---- INCRBYFLOAT ---- */

/* Redis's longest float text (MAX_LONG_DOUBLE_CHARS). */
#define FLOAT_TEXT_BYTES_MAX (5u * 1024u)
#define ERR_NOT_FLOAT "ERR value is not a valid float"

/* Redis 7.0's string2ld: the whole text a long double, no leading space,
 * no NaN, no overflow (infinity written as such is fine). */
static bool parse_float(const uint8_t *s, size_t len, long double *v)
{
	char text[FLOAT_TEXT_BYTES_MAX + 1];
	if (len == 0 || len >= FLOAT_TEXT_BYTES_MAX)
		return false;
	memcpy(text, s, len);
	text[len] = '\0';
	if (isspace((unsigned char)text[0]))
		return false;
	char *end;
	errno = 0;
	*v = strtold(text, &end);
	/* A NUL inside the value ends strtold's text early: not a float. */
	if ((size_t)(end - text) != len || isnan(*v))
		return false;
	return !(errno == ERANGE && (*v == HUGE_VALL || *v == -HUGE_VALL ||
				     fpclassify(*v) == FP_ZERO));
}

int kv__check_incrbyfloat(const struct kv__args *a, struct baton_buf *err)
{
	long double by;
	return parse_float(a->argv[2], a->lens[2], &by)
		       ? 0
		       : kv__refuse(err, ERR_NOT_FLOAT);
}

/* Redis 7.0's ld2string(LD_STR_HUMAN): %.17Lf without trailing zeros or
 * point, "-0" as "0". The same bytes on every node of one architecture
 * (x86-64's 80-bit long double), as the map must be. */
static size_t format_float(long double v, char *text, size_t cap)
{
	int n = snprintf(text, cap, "%.17Lf", v);
	assert(n > 0 && (size_t)n < cap);
	size_t len = (size_t)n;
	if (strchr(text, '.') != NULL) {
		while (text[len - 1] == '0')
			len--;
		if (text[len - 1] == '.')
			len--;
	}
	if (len == 2 && text[0] == '-' && text[1] == '0') {
		text[0] = '0';
		len = 1;
	}
	text[len] = '\0';
	return len;
}

int kv__run_incrbyfloat(struct baton_kv *kv, const struct kv__args *a,
			struct baton_buf *reply)
{
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e != NULL && kv__is_hash(e))
		return resp_error(reply, "%s", KV_ERR_WRONGTYPE);
	long double v = 0, by;
	if ((e != NULL && !parse_float(e->val, e->val_len, &v)) ||
	    !parse_float(a->argv[2], a->lens[2], &by))
		return resp_error(reply, "%s", ERR_NOT_FLOAT);
	v += by;
	if (isnan(v) || isinf(v))
		return resp_error(
			reply, "ERR increment would produce NaN or Infinity");
	char text[FLOAT_TEXT_BYTES_MAX];
	size_t len = format_float(v, text, sizeof text);
	int rv = baton_buf_reserve(reply, BULK_OVERHEAD_BYTES + len);
	if (rv != 0)
		return rv;
	if (e != NULL) { /* the expiry stays, as in Redis */
		rv = kv__entry_set(&kv->table, e, (const uint8_t *)text, len);
		if (rv != 0)
			return rv;
	} else {
		e = kv__entry_new(a->argv[1], a->lens[1], (const uint8_t *)text,
				  len);
		if (e == NULL)
			return BATON_ENOMEM;
		kv__table_insert(&kv->table, e);
	}
	return resp_bulk(reply, (const uint8_t *)text, len);
}
