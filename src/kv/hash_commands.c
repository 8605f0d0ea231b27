/*
 * The commands of machine version 3: hashes (HSET, HDEL, HINCRBY, HGET,
 * HMGET, HEXISTS, HLEN, HGETALL, HKEYS, HVALS, HSCAN) and TYPE, with
 * Redis 7's replies and error texts.
 *
 * A hash is a key whose entry holds a table of fields (kv__entry.fields),
 * the same kind of table as the map's: its fields come in the canonical
 * order (reversed hash of the field, then the field's bytes) whatever the
 * hash's history, so HGETALL, HKEYS, HVALS and snapshots list them in one
 * order on every replica, and HSCAN walks them with SCAN's cursor. A hash
 * is never empty: the write that removes its last field removes the key,
 * as in Redis.
 *
 * A write first makes every allocation it needs and reserves room for its
 * reply, then tells the table it is about to change the hash in place
 * (kv__entry_touch: an open snapshot keeps the hash as it was), then
 * changes it: out of memory leaves the map untouched.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "resp.h"

#define ERR_HASH_NOT_INT "ERR hash value is not an integer"

/* What a run does with a refusal found while applying: it is the reply. */
static int reply_error(struct baton_buf *b, const char *msg)
{
	return resp_error(b, "%s", msg);
}

/* The live key of argument 1 in *h, NULL if absent: false if it holds a
 * string, which the hash commands refuse with WRONGTYPE. */
static bool hash_of(struct baton_kv *kv, const struct kv__args *a,
		    struct kv__entry **h)
{
	*h = kv__find(kv, a, 1);
	return *h == NULL || kv__is_hash(*h);
}

/* The field named by argument i of the hash h (NULL: no hash), or NULL. */
static struct kv__entry *field_of(const struct kv__entry *h,
				  const struct kv__args *a, int i)
{
	return h != NULL ? kv__table_find(h->fields, a->argv[i], a->lens[i])
			 : NULL;
}

/* ---- TYPE ---- */

int kv__run_type(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply)
{
	const struct kv__entry *e = kv__find(kv, a, 1);
	return resp_simple(reply, e == NULL	   ? "none"
				  : kv__is_hash(e) ? "hash"
						   : "string");
}

/* ---- HSET ---- */

int kv__check_hset(const struct kv__args *a, struct baton_buf *err)
{
	/* key, then field value pairs */
	if (a->argc % 2 == 0)
		return 0;
	return resp_error(err,
			  "ERR wrong number of arguments for 'hset' command") ==
			       0
		       ? BATON_EINVAL
		       : BATON_ENOMEM;
}

static void free_fields(struct kv__entry **fresh, size_t n)
{
	for (size_t i = 0; fresh != NULL && i < n; i++)
		kv__entry_free(fresh[i]);
	kv__free(fresh);
}

int kv__run_hset(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply)
{
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	size_t n = (size_t)(a->argc - 2) / 2;
	assert(n >= 1);
	struct kv__entry **fresh = kv__calloc(n, sizeof *fresh);
	struct kv__entry *made = NULL;
	int rv = fresh != NULL ? baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES)
			       : BATON_ENOMEM;
	if (rv == 0 && h == NULL) {
		made = kv__hash_new(a->argv[1], a->lens[1]);
		rv = made != NULL ? 0 : BATON_ENOMEM;
	}
	for (size_t i = 0; rv == 0 && i < n; i++) {
		int k = 2 + 2 * (int)i;
		fresh[i] = kv__entry_new(a->argv[k], a->lens[k], a->argv[k + 1],
					 a->lens[k + 1]);
		rv = fresh[i] != NULL ? 0 : BATON_ENOMEM;
	}
	if (rv != 0) {
		free_fields(fresh, n);
		kv__entry_free(made);
		return rv;
	}
	/* Nothing can fail from here on. A later pair for the same field
	 * wins, as in Redis, and counts as an update. */
	if (made == NULL)
		kv__entry_touch(&kv->table, h);
	struct kv__table *fields = made != NULL ? made->fields : h->fields;
	int64_t added = 0;
	for (size_t i = 0; i < n; i++) {
		added += kv__table_find(fields, fresh[i]->key,
					fresh[i]->key_len) == NULL;
		kv__table_put(fields, fresh[i]);
	}
	kv__free(fresh);
	if (made != NULL)
		kv__table_insert(&kv->table, made);
	return resp_int(reply, added);
}

/* ---- HDEL ---- */

int kv__run_hdel(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply)
{
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	int rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	int64_t n = 0;
	for (int i = 2; h != NULL && i < a->argc; i++) {
		if (field_of(h, a, i) == NULL)
			continue;
		if (n == 0)
			kv__entry_touch(&kv->table, h);
		bool deleted =
			kv__table_delete(h->fields, a->argv[i], a->lens[i]);
		assert(deleted);
		(void)deleted;
		n++;
	}
	if (h != NULL && h->fields->count == 0)
		kv__table_delete(&kv->table, a->argv[1], a->lens[1]);
	return resp_int(reply, n);
}

/* ---- HINCRBY ---- */

static int hincrby_amount(const struct kv__args *a, int64_t *by,
			  struct baton_buf *err)
{
	return resp_parse_int(a->argv[3], a->lens[3], by)
		       ? 0
		       : kv__refuse(err, KV_ERR_NOT_INT);
}

int kv__check_hincrby(const struct kv__args *a, struct baton_buf *err)
{
	int64_t by;
	return hincrby_amount(a, &by, err);
}

/* Add the new field (named by argument 2, holding text) to the hash h,
 * or to a new hash for argument 1 when h is NULL. */
static int add_field(struct baton_kv *kv, const struct kv__args *a,
		     struct kv__entry *h, const char *text, size_t len)
{
	struct kv__entry *made =
		h == NULL ? kv__hash_new(a->argv[1], a->lens[1]) : NULL;
	struct kv__entry *f = kv__entry_new(a->argv[2], a->lens[2],
					    (const uint8_t *)text, len);
	if (f == NULL || (h == NULL && made == NULL)) {
		kv__entry_free(f);
		kv__entry_free(made);
		return BATON_ENOMEM;
	}
	if (made != NULL) {
		kv__table_insert(made->fields, f);
		kv__table_insert(&kv->table, made);
	} else {
		kv__entry_touch(&kv->table, h);
		kv__table_insert(h->fields, f);
	}
	return 0;
}

int kv__run_hincrby(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	int64_t by;
	int rv = hincrby_amount(a, &by, reply);
	assert(rv == 0); /* checked */
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	struct kv__entry *f = field_of(h, a, 2);
	int64_t v = 0;
	if (f != NULL && !resp_parse_int(f->val, f->val_len, &v))
		return reply_error(reply, ERR_HASH_NOT_INT);
	if (kv__add_overflows(v, by))
		return reply_error(reply, KV_ERR_OVERFLOW);
	v += by;
	char text[KV_INT_TEXT_BYTES];
	int n = snprintf(text, sizeof text, "%" PRId64, v);
	assert(n > 0 && (size_t)n < sizeof text);
	rv = baton_buf_reserve(reply, KV_WRITE_REPLY_BYTES);
	if (rv == 0 && f != NULL) {
		kv__entry_touch(&kv->table, h);
		rv = kv__entry_set(h->fields, f, (const uint8_t *)text,
				   (size_t)n);
	} else if (rv == 0) {
		rv = add_field(kv, a, h, text, (size_t)n);
	}
	return rv == 0 ? resp_int(reply, v) : rv;
}

/* ---- HGET, HEXISTS, HMGET, HLEN ---- */

int kv__run_hget(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply)
{
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	const struct kv__entry *f = field_of(h, a, 2);
	if (kv__arg_is(a, 0, "hexists"))
		return resp_int(reply, f != NULL);
	return f != NULL ? resp_bulk(reply, f->val, f->val_len)
			 : resp_null(reply);
}

int kv__run_hmget(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply)
{
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	int rv = resp_array(reply, (size_t)a->argc - 2);
	for (int i = 2; rv == 0 && i < a->argc; i++) {
		const struct kv__entry *f = field_of(h, a, i);
		rv = f != NULL ? resp_bulk(reply, f->val, f->val_len)
			       : resp_null(reply);
	}
	return rv;
}

int kv__run_hlen(struct baton_kv *kv, const struct kv__args *a,
		 struct baton_buf *reply)
{
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	return resp_int(reply, h != NULL ? (int64_t)h->fields->count : 0);
}

/* ---- HGETALL, HKEYS, HVALS ---- */

int kv__run_hgetall(struct baton_kv *kv, const struct kv__args *a,
		    struct baton_buf *reply)
{
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	bool names = !kv__arg_is(a, 0, "hvals");
	bool values = !kv__arg_is(a, 0, "hkeys");
	if (h == NULL)
		return resp_array(reply, 0);
	const struct kv__table *t = h->fields;
	size_t per = (size_t)names + (size_t)values;
	int rv = resp_array(reply, (size_t)t->count * per);
	uint64_t cursor = 0;
	do {
		const struct kv__entry *f = kv__table_bucket(t, cursor);
		for (; rv == 0 && f != NULL; f = kv__table_after(t, f)) {
			if (names)
				rv = resp_bulk(reply, f->key, f->key_len);
			if (rv == 0 && values)
				rv = resp_bulk(reply, f->val, f->val_len);
		}
		cursor = kv__table_next(t, cursor);
	} while (rv == 0 && cursor != 0);
	return rv;
}

/* ---- HSCAN ---- */

int kv__check_hscan(const struct kv__args *a, struct baton_buf *err)
{
	/* Redis reads the cursor first; the options only once it found a
	 * hash (a missing key gets the empty scan whatever they say). */
	uint64_t cursor;
	return kv__parse_cursor(a->argv[2], a->lens[2], &cursor)
		       ? 0
		       : kv__refuse(err, "ERR invalid cursor");
}

int kv__run_hscan(struct baton_kv *kv, const struct kv__args *a,
		  struct baton_buf *reply)
{
	struct kv__entry *h;
	if (!hash_of(kv, a, &h))
		return reply_error(reply, KV_ERR_WRONGTYPE);
	if (h == NULL) {
		int rv = kv__reply_cursor(reply, 0);
		return rv == 0 ? resp_array(reply, 0) : rv;
	}
	struct kv__scan_options o;
	int rv = kv__scan_options(a, 2, true, &o, reply);
	if (rv != 0)
		return rv == BATON_EINVAL ? 0 : rv; /* the -ERR is the reply */
	struct kv__list l = {0};
	uint64_t next;
	rv = kv__scan_table(h->fields, &o, kv->now_ms, &l, &next);
	if (rv == 0)
		rv = kv__reply_cursor(reply, next);
	if (rv == 0)
		rv = resp_array(reply, l.n * (o.novalues ? 1 : 2));
	for (size_t i = 0; rv == 0 && i < l.n; i++) {
		rv = resp_bulk(reply, l.v[i]->key, l.v[i]->key_len);
		if (rv == 0 && !o.novalues)
			rv = resp_bulk(reply, l.v[i]->val, l.v[i]->val_len);
	}
	kv__free(l.v);
	return rv;
}

/* ---- WATCH ---- */

uint64_t kv__fields_digest(const struct kv__table *t, uint64_t h)
{
	uint64_t cursor = 0;
	do {
		const struct kv__entry *f = kv__table_bucket(t, cursor);
		for (; f != NULL; f = kv__table_after(t, f)) {
			uint8_t link[24];
			baton_le_put_u64(link, h);
			baton_le_put_u64(link + 8, f->key_len);
			baton_le_put_u64(link + 16, f->val_len);
			h = baton__checksum2(link, sizeof link, f->key,
					     f->key_len);
			baton_le_put_u64(link, h);
			h = baton__checksum2(link, 8, f->val, f->val_len);
		}
		cursor = kv__table_next(t, cursor);
	} while (cursor != 0);
	return h;
}
