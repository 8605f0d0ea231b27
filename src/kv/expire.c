/*
 * SET with its options, and the expiry commands of machine version 2:
 * GETEX, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, PERSIST, TTL, PTTL,
 * EXPIRETIME, PEXPIRETIME, with Redis 7's replies and errors.
 *
 * Time is machine time (kv->now_ms), never a clock: relative expiries are
 * computed when the entry is applied, from the machine time after its
 * stamp, so every node computes the same instant. An expiry at or before
 * the machine time deletes the key at once, as Redis does.
 */
#include <assert.h>
#include <string.h>

#include "internal.h"
#include "resp.h"

#define ERR_SYNTAX KV_ERR_SYNTAX
#define ERR_NOT_INT KV_ERR_NOT_INT
/* Room for a bulk reply's header and trailer beyond its bytes. */
#define KV_BULK_OVERHEAD_BYTES 32u

enum set_cond { SET_ALWAYS, SET_NX, SET_XX };
enum exp_kind { EXP_NONE, EXP_EX, EXP_PX, EXP_EXAT, EXP_PXAT };

/* The options of SET and GETEX, as Redis parses them. */
struct str_opts {
	enum set_cond cond;
	bool get, keepttl, persist;
	enum exp_kind exp;
	int exp_arg; /* the index of the expiry's argument */
};

/* EX, PX, EXAT or PXAT at argument i, or EXP_NONE. */
static enum exp_kind exp_word(const struct kv__args *a, int i)
{
	if (kv__arg_is(a, i, "ex"))
		return EXP_EX;
	if (kv__arg_is(a, i, "px"))
		return EXP_PX;
	if (kv__arg_is(a, i, "exat"))
		return EXP_EXAT;
	if (kv__arg_is(a, i, "pxat"))
		return EXP_PXAT;
	return EXP_NONE;
}

/* Redis 7's parser of SET's (is_set) or GETEX's options: NX and XX
 * exclude each other, KEEPTTL (SET) and PERSIST (GETEX) exclude any
 * expiry, two different expiry kinds exclude each other; repeating the
 * same option is fine (the last value wins). */
static int string_options(const struct kv__args *a, bool is_set,
			  struct str_opts *o, struct baton_buf *err)
{
	memset(o, 0, sizeof *o);
	for (int i = is_set ? 3 : 2; i < a->argc; i++) {
		enum exp_kind k = exp_word(a, i);
		bool plain = o->exp == EXP_NONE;
		if (is_set && kv__arg_is(a, i, "nx") && o->cond != SET_XX) {
			o->cond = SET_NX;
		} else if (is_set && kv__arg_is(a, i, "xx") &&
			   o->cond != SET_NX) {
			o->cond = SET_XX;
		} else if (is_set && kv__arg_is(a, i, "get")) {
			o->get = true;
		} else if (is_set && kv__arg_is(a, i, "keepttl") && plain) {
			o->keepttl = true;
		} else if (!is_set && kv__arg_is(a, i, "persist") && plain) {
			o->persist = true;
		} else if (k != EXP_NONE && !o->keepttl && !o->persist &&
			   (plain || o->exp == k) && i + 1 < a->argc) {
			o->exp = k;
			o->exp_arg = ++i;
		} else {
			return kv__refuse(err, ERR_SYNTAX);
		}
	}
	return 0;
}

static int invalid_expire(struct baton_buf *err, const char *name)
{
	return resp_error(err, "ERR invalid expire time in '%s' command",
			  name) == 0
		       ? BATON_EINVAL
		       : BATON_ENOMEM;
}

/* The expiry argument of SET/GETEX in ms, before any base time is added:
 * a positive integer, and seconds must fit in ms. */
static int expire_arg_ms(const struct kv__args *a, const struct str_opts *o,
			 const char *name, int64_t *ms, struct baton_buf *err)
{
	int64_t v;
	if (!resp_parse_int(a->argv[o->exp_arg], a->lens[o->exp_arg], &v))
		return kv__refuse(err, ERR_NOT_INT);
	bool seconds = o->exp == EXP_EX || o->exp == EXP_EXAT;
	if (v <= 0 || (seconds && v > INT64_MAX / 1000))
		return invalid_expire(err, name);
	*ms = seconds ? v * 1000 : v;
	return 0;
}

/* The absolute expiry of SET/GETEX at machine time now_ms. */
static int expire_at(const struct kv__args *a, const struct str_opts *o,
		     const char *name, int64_t now_ms, int64_t *at_ms,
		     struct baton_buf *err)
{
	int64_t ms;
	int rv = expire_arg_ms(a, o, name, &ms, err);
	if (rv != 0)
		return rv;
	if (o->exp == EXP_EX || o->exp == EXP_PX) {
		if (ms > INT64_MAX - now_ms)
			return invalid_expire(err, name);
		ms += now_ms;
	}
	*at_ms = ms;
	return 0;
}

/* At apply, a refusal is the reply: 0 once it is appended. */
static int as_reply(int rv)
{
	return rv == BATON_EINVAL ? 0 : rv;
}

/* ---- SET ---- */

uint32_t kv__set_machine_min(const struct kv__args *a, const char **opt)
{
	static const char *const v2[] = {"ex",	 "px",	    "exat",
					 "pxat", "keepttl", "get"};
	for (int i = 3; i < a->argc; i++)
		for (size_t j = 0; j < sizeof v2 / sizeof v2[0]; j++)
			if (kv__arg_is(a, i, v2[j])) {
				*opt = v2[j];
				return 2;
			}
	return 1;
}

int kv__check_set(const struct kv__args *a, struct baton_buf *err)
{
	struct str_opts o;
	int rv = string_options(a, true, &o, err);
	int64_t ms;
	if (rv == 0 && o.exp != EXP_NONE)
		rv = expire_arg_ms(a, &o, "set", &ms, err);
	return rv;
}

int kv__run_set(struct baton_kv *kv, const struct kv__args *a,
		struct baton_buf *reply)
{
	struct kv__table *t = &kv->table;
	struct str_opts o;
	int rv = string_options(a, true, &o, reply);
	assert(rv == 0); /* checked */
	int64_t at = 0;
	if (o.exp != EXP_NONE) {
		rv = expire_at(a, &o, "set", kv->now_ms, &at, reply);
		if (rv != 0)
			return as_reply(rv);
	}
	struct kv__entry *e = kv__find(kv, a, 1);
	if (o.get && e != NULL && kv__is_hash(e)) /* plain SET replaces it */
		return resp_error(reply, "%s", KV_ERR_WRONGTYPE);
	size_t old = o.get && e != NULL ? e->val_len : 0;
	rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES +
					      KV_BULK_OVERHEAD_BYTES + old);
	if (rv == 0 && o.exp != EXP_NONE)
		rv = kv__heap_reserve(&t->expiring, 1);
	if (rv == 0 && o.get)
		rv = e != NULL ? resp_bulk(reply, e->val, e->val_len)
			       : resp_null(reply);
	if (rv != 0)
		return rv;
	if ((o.cond == SET_NX && e != NULL) || (o.cond == SET_XX && e == NULL))
		return o.get ? 0 : resp_null(reply);
	if (o.exp != EXP_NONE && at <= kv->now_ms) {
		/* Already expired (EXAT/PXAT in the past): gone at once. */
		if (e != NULL)
			kv__table_delete(t, a->argv[1], a->lens[1]);
		return o.get ? 0 : resp_simple(reply, "OK");
	}
	if (e != NULL) {
		rv = kv__entry_set(t, e, a->argv[2], a->lens[2]);
		if (rv != 0)
			return rv;
	} else {
		e = kv__entry_new(a->argv[1], a->lens[1], a->argv[2],
				  a->lens[2]);
		if (e == NULL)
			return BATON_ENOMEM;
		kv__table_insert(t, e);
	}
	if (o.exp != EXP_NONE)
		kv__expire_set(t, e, at);
	else if (!o.keepttl)
		kv__expire_clear(t, e);
	return o.get ? 0 : resp_simple(reply, "OK");
}

/* ---- GETEX ---- */

int kv__check_getex(const struct kv__args *a, struct baton_buf *err)
{
	/* Redis checks the expiry's value only when the key exists. */
	struct str_opts o;
	return string_options(a, false, &o, err);
}

int kv__run_getex(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply)
{
	struct kv__table *t = &kv->table;
	struct str_opts o;
	int rv = string_options(a, false, &o, reply);
	assert(rv == 0); /* checked */
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e == NULL)
		return resp_null(reply);
	if (kv__is_hash(e))
		return resp_error(reply, "%s", KV_ERR_WRONGTYPE);
	int64_t at = 0;
	if (o.exp != EXP_NONE) {
		rv = expire_at(a, &o, "getex", kv->now_ms, &at, reply);
		if (rv != 0)
			return as_reply(rv);
	}
	rv = o.exp != EXP_NONE ? kv__heap_reserve(&t->expiring, 1) : 0;
	if (rv == 0)
		rv = resp_bulk(reply, e->val, e->val_len);
	if (rv != 0)
		return rv;
	if (o.exp != EXP_NONE && at <= kv->now_ms)
		kv__table_delete(t, a->argv[1], a->lens[1]);
	else if (o.exp != EXP_NONE)
		kv__expire_set(t, e, at);
	else if (o.persist)
		kv__expire_clear(t, e);
	return 0;
}

/* ---- EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT ---- */

enum { EXPIRE_NX = 1, EXPIRE_XX = 2, EXPIRE_GT = 4, EXPIRE_LT = 8 };

struct expire_cmd {
	const char *name;
	bool seconds;  /* EXPIRE, EXPIREAT */
	bool relative; /* EXPIRE, PEXPIRE */
};

static struct expire_cmd expire_cmd(const struct kv__args *a)
{
	if (kv__arg_is(a, 0, "pexpire"))
		return (struct expire_cmd){"pexpire", false, true};
	if (kv__arg_is(a, 0, "expireat"))
		return (struct expire_cmd){"expireat", true, false};
	if (kv__arg_is(a, 0, "pexpireat"))
		return (struct expire_cmd){"pexpireat", false, false};
	assert(kv__arg_is(a, 0, "expire"));
	return (struct expire_cmd){"expire", true, true};
}

/* The NX/XX/GT/LT options and the time argument, in Redis's order; the
 * time in ms, base time not added yet. */
static int expire_args(const struct kv__args *a, const struct expire_cmd *x,
		       int *flags, int64_t *when, struct baton_buf *err)
{
	*flags = 0;
	for (int i = 3; i < a->argc; i++) {
		if (kv__arg_is(a, i, "nx"))
			*flags |= EXPIRE_NX;
		else if (kv__arg_is(a, i, "xx"))
			*flags |= EXPIRE_XX;
		else if (kv__arg_is(a, i, "gt"))
			*flags |= EXPIRE_GT;
		else if (kv__arg_is(a, i, "lt"))
			*flags |= EXPIRE_LT;
		else
			return resp_error(err, "ERR Unsupported option %.*s",
					  (int)(a->lens[i] < 128 ? a->lens[i]
								 : 128),
					  (const char *)a->argv[i]) == 0
				       ? BATON_EINVAL
				       : BATON_ENOMEM;
	}
	if ((*flags & EXPIRE_NX) &&
	    (*flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT)))
		return kv__refuse(err, "ERR NX and XX, GT or LT options at "
				       "the same time are not compatible");
	if ((*flags & EXPIRE_GT) && (*flags & EXPIRE_LT))
		return kv__refuse(err, "ERR GT and LT options at the same "
				       "time are not compatible");
	if (!resp_parse_int(a->argv[2], a->lens[2], when))
		return kv__refuse(err, ERR_NOT_INT);
	if (x->seconds) {
		if (*when > INT64_MAX / 1000 || *when < INT64_MIN / 1000)
			return invalid_expire(err, x->name);
		*when *= 1000;
	}
	return 0;
}

int kv__check_expire(const struct kv__args *a, struct baton_buf *err)
{
	struct expire_cmd x = expire_cmd(a);
	int flags;
	int64_t when;
	return expire_args(a, &x, &flags, &when, err);
}

/* Does the condition of NX/XX/GT/LT let the new expiry `when` replace
 * e's (Redis: no expiry counts as an infinite one)? */
static bool expire_allowed(const struct kv__entry *e, int flags, int64_t when)
{
	bool has = kv__has_expiry(e);
	if ((flags & EXPIRE_NX) && has)
		return false;
	if ((flags & EXPIRE_XX) && !has)
		return false;
	if ((flags & EXPIRE_GT) && (!has || when <= e->expire_at_ms))
		return false;
	if ((flags & EXPIRE_LT) && has && when >= e->expire_at_ms)
		return false;
	return true;
}

int kv__run_expire(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply)
{
	struct kv__table *t = &kv->table;
	struct expire_cmd x = expire_cmd(a);
	int flags;
	int64_t when;
	int rv = expire_args(a, &x, &flags, &when, reply);
	assert(rv == 0); /* checked */
	if (x.relative) {
		if (when > INT64_MAX - kv->now_ms)
			return as_reply(invalid_expire(reply, x.name));
		when += kv->now_ms;
	}
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e == NULL || !expire_allowed(e, flags, when))
		return resp_int(reply, 0);
	rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv == 0)
		rv = kv__heap_reserve(&t->expiring, 1);
	if (rv != 0)
		return rv;
	if (when <= kv->now_ms)
		kv__table_delete(t, a->argv[1], a->lens[1]);
	else
		kv__expire_set(t, e, when);
	return resp_int(reply, 1);
}

/* ---- PERSIST ---- */

int kv__run_persist(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	struct kv__entry *e = kv__find(kv, a, 1);
	if (e == NULL || !kv__has_expiry(e))
		return resp_int(reply, 0);
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	kv__expire_clear(&kv->table, e);
	return resp_int(reply, 1);
}

/* ---- TTL, PTTL, EXPIRETIME, PEXPIRETIME ---- */

int kv__run_ttl(struct baton_kv *kv, const struct kv__args *a,
		struct baton_buf *reply)
{
	bool ms = kv__arg_is(a, 0, "pttl") || kv__arg_is(a, 0, "pexpiretime");
	bool abs = kv__arg_is(a, 0, "expiretime") ||
		   kv__arg_is(a, 0, "pexpiretime");
	const struct kv__entry *e = kv__find(kv, a, 1);
	if (e == NULL)
		return resp_int(reply, -2);
	if (!kv__has_expiry(e))
		return resp_int(reply, -1);
	int64_t v = abs ? e->expire_at_ms : e->expire_at_ms - kv->now_ms;
	if (v < 0)
		v = 0;
	if (!ms) /* rounded to the nearest second, as Redis */
		v = v / 1000 + (v % 1000 >= 500 ? 1 : 0);
	return resp_int(reply, v);
}
