/* A brute-force reference checker and a random history generator. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* lincheck__mix */
#include "reference.h"

#define REF_KEYS_MAX 4u
#define REF_VALUE_BYTES 128u
/* Bytes of one memoised configuration: the mask, then per key a presence
 * byte, a length byte and the bytes. */
#define REF_CONFIG_BYTES (8u + REF_KEYS_MAX * (2u + REF_VALUE_BYTES))

#ifndef BATON_HISTORIES_DIR
#define BATON_HISTORIES_DIR ""
#endif

struct rvalue {
	bool present;
	size_t len;
	char bytes[REF_VALUE_BYTES];
};

/* Configurations already explored (they failed): an open-addressing set
 * of serialised configurations in an arena. */
struct rmemo {
	uint8_t *arena;
	size_t used;
	size_t cap;
	size_t *slots; /* offset + 1; 0: empty */
	size_t n_slots;
	size_t count;
};

struct rctx {
	const struct lincheck_history *h;
	bool empty_is_missing;
	struct rmemo memo;
};

static void normalise(const struct rctx *c, struct rvalue *v)
{
	if (c->empty_is_missing && v->present && v->len == 0)
		v->present = false;
	if (!v->present)
		v->len = 0;
}

static struct rvalue from_history(const struct rctx *c,
				  struct lincheck_value hv)
{
	struct rvalue v;
	memset(&v, 0, sizeof(v));
	cr_assert(hv.tag != LINCHECK_UNKNOWN);
	v.present = hv.tag == LINCHECK_PRESENT;
	if (v.present) {
		cr_assert_leq(hv.len, REF_VALUE_BYTES);
		v.len = hv.len;
		memcpy(v.bytes, lincheck_value_bytes(c->h, hv), hv.len);
	}
	normalise(c, &v);
	return v;
}

static bool same(const struct rvalue *a, const struct rvalue *b)
{
	return a->present == b->present && a->len == b->len &&
	       memcmp(a->bytes, b->bytes, a->len) == 0;
}

/* Redis's INCR: false if refused. */
static bool incr(struct rvalue *v, int64_t delta, int64_t *out)
{
	int64_t x = 0;
	if (v->present) {
		char text[REF_VALUE_BYTES + 1];
		memcpy(text, v->bytes, v->len);
		text[v->len] = 0;
		char *end;
		long long parsed = strtoll(text, &end, 10);
		char canon[32];
		snprintf(canon, sizeof(canon), "%lld", parsed);
		if (v->len == 0 || *end != 0 || strcmp(canon, text) != 0)
			return false;
		x = parsed;
	}
	if ((delta > 0 && x > INT64_MAX - delta) ||
	    (delta < 0 && x < INT64_MIN - delta))
		return false;
	x += delta;
	v->present = true;
	v->len = (size_t)snprintf(v->bytes, sizeof(v->bytes), "%lld",
				  (long long)x);
	*out = x;
	return true;
}

/* Applies op to v; false if its recorded result contradicts v. */
static bool apply(const struct rctx *c, const struct lincheck_op *op,
		  struct rvalue *v)
{
	bool ok = op->status == LINCHECK_OK;
	struct rvalue w;
	int64_t n;
	switch (op->kind) {
	case LINCHECK_GET:
		if (!ok)
			return true;
		w = from_history(c, op->out);
		return same(&w, v);
	case LINCHECK_SET:
		*v = from_history(c, op->arg);
		return true;
	case LINCHECK_APPEND:
		w = from_history(c, op->arg);
		if (!v->present)
			v->len = 0;
		cr_assert_leq(v->len + w.len, REF_VALUE_BYTES);
		memcpy(v->bytes + v->len, w.bytes, w.len);
		v->len += w.len;
		v->present = true;
		normalise(c, v);
		return !(ok && op->out_known && op->out_int != (int64_t)v->len);
	case LINCHECK_DEL:
		n = v->present ? 1 : 0;
		v->present = false;
		v->len = 0;
		return !(ok && op->out_known && op->out_int != n);
	case LINCHECK_INCR:
		w = *v;
		if (!incr(&w, op->delta, &n))
			return !ok;
		*v = w;
		return !(ok && op->out_known && op->out_int != n);
	case LINCHECK_CAS:
		w = from_history(c, op->arg);
		if (ok && (op->out_int == 1) != same(&w, v))
			return false;
		if (same(&w, v))
			*v = from_history(c, op->arg2);
		return true;
	default:
		cr_assert_fail("kind %u", op->kind);
		return false;
	}
}

static bool counts(const struct lincheck_op *op)
{
	return op->status != LINCHECK_FAIL;
}

static size_t serialise(const struct rctx *c, uint64_t done,
			const struct rvalue *values, uint8_t *out)
{
	size_t n = 0;
	memcpy(out, &done, 8);
	n += 8;
	for (uint32_t k = 0; k < c->h->n_keys; k++) {
		out[n++] = values[k].present;
		out[n++] = (uint8_t)values[k].len;
		memcpy(out + n, values[k].bytes, values[k].len);
		n += values[k].len;
	}
	return n;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 14695981039346656037u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211u;
	return h;
}

/* Adds the configuration; false if it was there. */
static bool memo_add(struct rmemo *m, const uint8_t *key, size_t n)
{
	if (m->count * 2 >= m->n_slots) {
		size_t cap = m->n_slots == 0 ? 1024 : m->n_slots * 2;
		size_t *slots = calloc(cap, sizeof(*slots));
		cr_assert_not_null(slots);
		for (size_t i = 0; i < m->n_slots; i++) {
			if (m->slots[i] == 0)
				continue;
			const uint8_t *k = m->arena + m->slots[i] - 1 + 2;
			size_t kn = (size_t)m->arena[m->slots[i] - 1] |
				    (size_t)m->arena[m->slots[i]] << 8;
			size_t j = fnv(k, kn);
			while (slots[j & (cap - 1)] != 0)
				j++;
			slots[j & (cap - 1)] = m->slots[i];
		}
		free(m->slots);
		m->slots = slots;
		m->n_slots = cap;
	}
	size_t j = fnv(key, n);
	for (;; j++) {
		size_t slot = m->slots[j & (m->n_slots - 1)];
		if (slot == 0)
			break;
		size_t kn = (size_t)m->arena[slot - 1] | (size_t)m->arena[slot]
								 << 8;
		if (kn == n && memcmp(m->arena + slot + 1, key, n) == 0)
			return false;
	}
	if (m->used + n + 2 > m->cap) {
		m->cap = (m->cap + n + 2) * 2;
		m->arena = realloc(m->arena, m->cap);
		cr_assert_not_null(m->arena);
	}
	m->arena[m->used] = (uint8_t)(n & 0xff);
	m->arena[m->used + 1] = (uint8_t)(n >> 8);
	memcpy(m->arena + m->used + 2, key, n);
	m->slots[j & (m->n_slots - 1)] = m->used + 1;
	m->used += n + 2;
	m->count++;
	return true;
}

static bool search(struct rctx *c, uint64_t done, const struct rvalue *values)
{
	const struct lincheck_history *h = c->h;
	uint8_t key[REF_CONFIG_BYTES];
	if (!memo_add(&c->memo, key, serialise(c, done, values, key)))
		return false; /* explored, and it failed */
	bool all = true;
	for (uint32_t i = 0; i < h->n_ops && all; i++)
		all = (done >> i & 1) || h->ops[i].status != LINCHECK_OK;
	if (all)
		return true;
	for (uint32_t i = 0; i < h->n_ops; i++) {
		const struct lincheck_op *op = &h->ops[i];
		if ((done >> i & 1) || !counts(op))
			continue;
		bool blocked = false;
		for (uint32_t j = 0; j < h->n_ops && !blocked; j++) {
			blocked = j != i && !(done >> j & 1) &&
				  h->ops[j].status == LINCHECK_OK &&
				  h->ops[j].return_time < op->invoke_time;
		}
		if (blocked)
			continue;
		struct rvalue next[REF_KEYS_MAX];
		memcpy(next, values, sizeof(next));
		if (apply(c, op, &next[op->key]) &&
		    search(c, done | (uint64_t)1 << i, next))
			return true;
	}
	return false;
}

bool ref_linearizable(const struct lincheck_history *h)
{
	cr_assert_leq(h->n_ops, REF_OPS_MAX);
	cr_assert_leq(h->n_keys, REF_KEYS_MAX);
	struct rctx c;
	memset(&c, 0, sizeof(c));
	c.h = h;
	c.empty_is_missing = h->missing_reads_empty;
	struct rvalue values[REF_KEYS_MAX];
	memset(values, 0, sizeof(values));
	bool ok = search(&c, 0, values);
	free(c.memo.arena);
	free(c.memo.slots);
	return ok;
}

enum lincheck_verdict ref_check(const struct lincheck_history *h)
{
	struct lincheck_limits limits = {0, 0};
	struct lincheck_result res;
	cr_assert_eq(lincheck_check(h, &limits, &res), 0);
	cr_assert_neq(res.verdict, LINCHECK_VERDICT_UNKNOWN);
	return res.verdict;
}

/* ------------------------------------------------------------------------ */
/* Random histories.                                                        */

struct rng {
	uint64_t s;
};

/* splitmix64: the finaliser of a Weyl sequence. */
static uint64_t next_u64(struct rng *r)
{
	return lincheck__mix(r->s += 0x9e3779b97f4a7c15u);
}

static uint32_t below(struct rng *r, uint32_t n)
{
	return (uint32_t)(next_u64(r) % n);
}

static const char *pick(struct rng *r, const char *const *pool, uint32_t n)
{
	return pool[below(r, n)];
}

static struct lincheck_value store(struct lincheck_history *h, const char *s)
{
	struct lincheck_value v;
	memset(&v, 0, sizeof(v));
	if (s == NULL) {
		v.tag = LINCHECK_ABSENT;
		return v;
	}
	cr_assert_eq(lincheck_history_store(h, s, strlen(s), &v, NULL), 0);
	return v;
}

struct revent {
	int64_t t;
	uint32_t i;
	bool done;
};

struct planned {
	struct lincheck_op op;
	int64_t lin;
	int64_t ret;
	uint8_t status;
	bool applies; /* an indeterminate op that took effect */
	bool known;   /* the result of an append, del or incr is recorded */
};

static int by_lin(const void *a, const void *b)
{
	const struct planned *x = *(const struct planned *const *)a;
	const struct planned *y = *(const struct planned *const *)b;
	if (x->lin != y->lin)
		return x->lin < y->lin ? -1 : 1;
	return x->op.invoke_time < y->op.invoke_time
		       ? -1
		       : x->op.invoke_time > y->op.invoke_time;
}

/* Fills op's results by running it on v (a string or missing). */
static void run(struct lincheck_history *h, struct planned *p, struct rvalue *v,
		bool empty_is_missing)
{
	struct rctx c;
	memset(&c, 0, sizeof(c));
	c.h = h;
	c.empty_is_missing = empty_is_missing;
	struct lincheck_op *op = &p->op;
	int64_t n = 0;
	switch (op->kind) {
	case LINCHECK_GET:
		op->out.tag = v->present ? LINCHECK_PRESENT : LINCHECK_ABSENT;
		if (v->present) {
			char text[REF_VALUE_BYTES + 1];
			memcpy(text, v->bytes, v->len);
			text[v->len] = 0;
			op->out = store(h, text);
		}
		break;
	case LINCHECK_INCR:
		if (!incr(v, op->delta, &n)) {
			p->status = LINCHECK_FAIL; /* Redis refused it */
			break;
		}
		op->out_int = n;
		op->out_known = p->known;
		break;
	case LINCHECK_CAS: {
		struct rvalue w = from_history(&c, op->arg);
		op->out_int = same(&w, v);
		op->out_known = true;
		if (same(&w, v))
			*v = from_history(&c, op->arg2);
		break;
	}
	case LINCHECK_DEL:
		op->out_int = v->present;
		op->out_known = p->known;
		/* fall through */
	default:
		cr_assert(apply(&c, op, v));
		break;
	}
	if (op->kind == LINCHECK_APPEND) {
		op->out_int = (int64_t)v->len;
		op->out_known = p->known;
	}
}

static void corrupt(struct rng *r, struct lincheck_history *h,
		    struct planned *p)
{
	static const char *const values[] = {"", "1", "2", "a", "ab", "b"};
	struct lincheck_op *op = &p->op;
	switch (op->kind) {
	case LINCHECK_GET:
		op->out = below(r, 4) == 0 ? store(h, NULL)
					   : store(h, pick(r, values, 6));
		break;
	case LINCHECK_CAS:
	case LINCHECK_DEL:
		op->out_int = !op->out_int;
		break;
	case LINCHECK_APPEND:
		op->out_int += 1;
		break;
	default:
		op->out_int += below(r, 2) ? 1 : -1;
		break;
	}
}

void ref_random_history(uint64_t seed, uint32_t ops_max, uint32_t clients_max,
			struct lincheck_history *h)
{
	static const char *const set_values[] = {"1", "2", "a", "ab"};
	static const char *const append_values[] = {"a", "b", "1", ""};
	static const char *const cas_old[] = {NULL, "1", "2", "a", "ab", ""};
	static const int64_t deltas[] = {1, -1, 5};
	struct rng r = {seed};
	cr_assert_leq(ops_max, REF_OPS_MAX);
	lincheck_history_init(h);
	h->format = LINCHECK_FORMAT_BATON;
	h->missing_reads_empty = below(&r, 5) == 0;
	uint32_t n = 1 + below(&r, ops_max);
	cr_assert(clients_max >= 1 && clients_max <= REF_CLIENTS_MAX);
	uint32_t clients = 1 + below(&r, clients_max);
	uint32_t keys = 1 + below(&r, 2);
	/* Distinct appended values, as Jepsen's append tests use. */
	bool unique = below(&r, 3) == 0;
	uint32_t key_ids[2];
	for (uint32_t k = 0; k < keys; k++)
		cr_assert_eq(lincheck_history_key(h, k ? "k1" : "k0", 2,
						  &key_ids[k], NULL),
			     0);
	struct planned plan[REF_OPS_MAX];
	struct planned *order[REF_OPS_MAX];
	int64_t free_at[REF_CLIENTS_MAX] = {0};
	bool gone[REF_CLIENTS_MAX] = {false};
	uint32_t made = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = below(&r, clients);
		if (gone[c])
			continue;
		struct planned *p = &plan[made];
		memset(p, 0, sizeof(*p));
		struct lincheck_op *op = &p->op;
		op->client = c;
		op->key = key_ids[below(&r, keys)];
		uint32_t roll = below(&r, 100);
		op->kind = roll < 30   ? LINCHECK_GET
			   : roll < 45 ? LINCHECK_SET
			   : roll < 65 ? LINCHECK_APPEND
			   : roll < 75 ? LINCHECK_DEL
			   : roll < 85 ? LINCHECK_INCR
				       : LINCHECK_CAS;
		if (op->kind == LINCHECK_SET)
			op->arg = store(h, pick(&r, set_values, 4));
		if (op->kind == LINCHECK_APPEND && unique) {
			char text[2] = {(char)('A' + i % 60), 0};
			op->arg = store(h, text);
		} else if (op->kind == LINCHECK_APPEND) {
			op->arg = store(h, pick(&r, append_values, 4));
		}
		if (op->kind == LINCHECK_INCR)
			op->delta = deltas[below(&r, 3)];
		if (op->kind == LINCHECK_CAS) {
			op->arg = store(h, pick(&r, cas_old, 6));
			op->arg2 = store(h, pick(&r, set_values, 4));
		}
		op->invoke_time = free_at[c] + below(&r, 4);
		p->lin = op->invoke_time + below(&r, 4);
		p->ret = p->lin + below(&r, 4);
		roll = below(&r, 100);
		p->status = roll < 70	? LINCHECK_OK
			    : roll < 80 ? LINCHECK_FAIL
			    : roll < 92 ? LINCHECK_INFO
					: LINCHECK_PENDING;
		p->applies = below(&r, 2) == 0;
		p->known = below(&r, 2) == 0;
		if (p->status == LINCHECK_PENDING)
			gone[c] = true;
		free_at[c] = p->ret + 1;
		order[made] = p;
		made++;
	}
	/* Run the operations in the order of their linearization points. */
	qsort(order, made, sizeof(*order), by_lin);
	struct rvalue values[2];
	memset(values, 0, sizeof(values));
	for (uint32_t i = 0; i < made; i++) {
		struct planned *p = order[i];
		bool takes_effect = p->status == LINCHECK_OK ||
				    ((p->status == LINCHECK_INFO ||
				      p->status == LINCHECK_PENDING) &&
				     p->applies);
		struct rvalue scratch = values[p->op.key];
		run(h, p, takes_effect ? &values[p->op.key] : &scratch,
		    h->missing_reads_empty);
	}
	if (made > 0 && below(&r, 100) < 45) {
		struct planned *p = &plan[below(&r, made)];
		if (p->status == LINCHECK_OK)
			corrupt(&r, h, p);
	}
	/* Record the events by time. */
	struct revent ev[2 * REF_OPS_MAX];
	uint32_t n_ev = 0;
	for (uint32_t i = 0; i < made; i++) {
		ev[n_ev].t = plan[i].op.invoke_time;
		ev[n_ev].i = i;
		ev[n_ev++].done = false;
		if (plan[i].status != LINCHECK_PENDING) {
			ev[n_ev].t = plan[i].ret;
			ev[n_ev].i = i;
			ev[n_ev++].done = true;
		}
	}
	for (uint32_t a = 1; a < n_ev; a++) {
		for (uint32_t b = a; b > 0 && (ev[b - 1].t > ev[b].t ||
					       (ev[b - 1].t == ev[b].t &&
						ev[b - 1].i > ev[b].i));
		     b--) {
			struct revent t = ev[b];
			ev[b] = ev[b - 1];
			ev[b - 1] = t;
		}
	}
	for (uint32_t e = 0; e < n_ev; e++) {
		struct planned *p = &plan[ev[e].i];
		if (!ev[e].done) {
			cr_assert_eq(
				lincheck_history_invoke(h, &p->op, e + 1, NULL),
				0);
			continue;
		}
		struct lincheck_op done = p->op;
		struct lincheck_error err;
		cr_assert_eq(lincheck_history_complete(h, p->op.client, p->ret,
						       e + 1, p->status, &done,
						       true, &err),
			     0, "%s", err.text);
	}
	lincheck_history_finish(h);
}

int ref_parse(const char *text, enum lincheck_format format,
	      struct lincheck_history *h, struct lincheck_error *err)
{
	lincheck_history_init(h);
	return lincheck_parse("test", text, strlen(text), format, h, err);
}

enum lincheck_verdict ref_verdict(const char *text, struct lincheck_result *res)
{
	struct lincheck_history h;
	struct lincheck_error err;
	int rv = ref_parse(text, LINCHECK_FORMAT_BATON, &h, &err);
	cr_assert_eq(rv, 0, "%s", err.text);
	struct lincheck_limits limits = {0, 0};
	struct lincheck_result local;
	if (res == NULL)
		res = &local;
	cr_assert_eq(lincheck_check(&h, &limits, res), 0);
	cr_assert_neq(res->verdict, LINCHECK_VERDICT_UNKNOWN);
	/* The reference agrees on histories small enough for it. */
	if (h.n_ops <= REF_OPS_MAX && h.n_keys <= REF_KEYS_MAX)
		cr_assert_eq(ref_linearizable(&h),
			     res->verdict == LINCHECK_LINEARIZABLE,
			     "the reference disagrees on:\n%s", text);
	lincheck_history_free(&h);
	return res->verdict;
}

const char *ref_histories_dir(void)
{
	return BATON_HISTORIES_DIR;
}

char *ref_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	cr_assert_geq(n, 0);
	cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
	char *data = malloc((size_t)n + 1);
	cr_assert_not_null(data);
	cr_assert_eq(fread(data, 1, (size_t)n, f), (size_t)n);
	data[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return data;
}

char *ref_baton_text(const struct lincheck_history *h, size_t *len)
{
	char *buf = NULL;
	FILE *out = open_memstream(&buf, len);
	cr_assert_not_null(out);
	cr_assert_eq(lincheck_write_baton(out, h), 0);
	fclose(out);
	return buf;
}
