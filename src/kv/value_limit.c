/*
 * The value limit: what each write does to the length of the values it
 * writes, and the leader's per-key bounds over the writes in flight
 * (value_limit.h; docs/kv.md "The value limit").
 */
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "internal.h"
#include "resp.h"
#include "value_limit.h"

/* The longest text INCR, INCRBY, DECR and DECRBY write (a signed int64),
 * and INCRBYFLOAT (string_more.c's FLOAT_TEXT_BYTES_MAX). */
#define BOUND_INT_TEXT_BYTES 20u
#define BOUND_FLOAT_TEXT_BYTES (5u * 1024u)

/* ---- what a command writes ---- */

struct bounds_walk {
	int (*fn)(void *arg, const struct kv_bound *b);
	void *arg;
};

static int emit(struct bounds_walk *w, enum kv_bound_kind kind, int key,
		uint64_t bytes, int from)
{
	struct kv_bound b = {kind, key, bytes, from};
	return w->fn(w->arg, &b);
}

static bool is(const struct kv_command *c, const char *name)
{
	return strcmp(c->name, name) == 0;
}

int kv_value_bounds(const struct kv_command *c, int argc,
		    const uint8_t *const *argv, const size_t *lens,
		    int (*fn)(void *arg, const struct kv_bound *b), void *arg)
{
	struct bounds_walk w = {fn, arg};
	if (!(c->flags & KV_WRITE) || argc < 2)
		return 0;
	if (is(c, "set") || is(c, "setnx") || is(c, "getset"))
		return argc >= 3 ? emit(&w, KV_BOUND_SET, 1, lens[2], 0) : 0;
	if (is(c, "setex") || is(c, "psetex"))
		return argc >= 4 ? emit(&w, KV_BOUND_SET, 1, lens[3], 0) : 0;
	if (is(c, "mset") || is(c, "msetnx")) {
		int rv = 0;
		for (int i = 1; rv == 0 && i + 1 < argc; i += 2)
			rv = emit(&w, KV_BOUND_SET, i, lens[i + 1], 0);
		return rv;
	}
	if (is(c, "append"))
		return argc >= 3 ? emit(&w, KV_BOUND_GROW, 1, lens[2], 0) : 0;
	if (is(c, "setrange")) {
		int64_t offset;
		if (argc < 4 || lens[3] == 0 ||
		    !resp_parse_int(argv[2], lens[2], &offset) || offset < 0)
			return 0; /* refused at apply, or changes nothing */
		/* No overflow: a length is below 2^63 and so is offset. */
		return emit(&w, KV_BOUND_RAISE, 1, (uint64_t)offset + lens[3],
			    0);
	}
	if (is(c, "incr") || is(c, "incrby") || is(c, "decr") ||
	    is(c, "decrby"))
		return emit(&w, KV_BOUND_RAISE, 1, BOUND_INT_TEXT_BYTES, 0);
	if (is(c, "incrbyfloat"))
		return emit(&w, KV_BOUND_RAISE, 1, BOUND_FLOAT_TEXT_BYTES, 0);
	if (is(c, "rename") || is(c, "renamenx") || is(c, "copy"))
		return argc >= 3 ? emit(&w, KV_BOUND_FROM, 2, 0, 1) : 0;
	if (is(c, "hset")) {
		int rv = 0;
		for (int i = 2; rv == 0 && i < argc; i++)
			rv = emit(&w, KV_BOUND_FIXED, i, lens[i], 0);
		return rv;
	}
	if (is(c, "hincrby"))
		return argc >= 3 ? emit(&w, KV_BOUND_FIXED, 2, lens[2], 0) : 0;
	return 0; /* del, expire, getdel, hdel, ...: nothing grows */
}

uint64_t kv_value_len(struct baton_kv *kv, const uint8_t *key, size_t len)
{
	const struct kv__entry *e = kv__table_find(&kv->table, key, len);
	if (e == NULL || kv__expired(e, kv->now_ms) || kv__is_hash(e))
		return 0;
	return e->val_len;
}

static uint64_t table_len_max(const struct kv__table *t, bool fields)
{
	uint64_t max = 0, cursor = 0;
	if (t->count == 0)
		return 0;
	do {
		const struct kv__entry *e = kv__table_bucket(t, cursor);
		for (; e != NULL; e = kv__table_after(t, e)) {
			uint64_t n = kv__is_hash(e)
					     ? table_len_max(e->fields, true)
					     : e->val_len;
			if (fields && e->key_len > n)
				n = e->key_len;
			if (n > max)
				max = n;
		}
		cursor = kv__table_next(t, cursor);
	} while (cursor != 0);
	return max;
}

uint64_t kv_value_len_max(const struct baton_kv *kv)
{
	return table_len_max(&kv->table, false);
}

/* ---- the leader's bounds ---- */

struct pending {
	uint64_t bound; /* bytes, once every write holding it applied */
	uint32_t holders;
};

/* One change of the claim being made, to undo it on refusal. */
struct undo {
	uint64_t hash;
	uint64_t bound; /* before */
};

struct claim_walk {
	struct kv_limit *l;
	struct baton_kv *kv;
	const struct kv_txn_command *cmd;
	struct kv_limit_claim *claim;
	struct undo *undo; /* one per hash in claim */
	size_t undo_cap;
	bool too_big;
};

static uint64_t key_hash(const struct kv_txn_command *cmd, int i)
{
	return kv__hash(cmd->argv[i], cmd->lens[i]);
}

/* The bound of the key at argument i: its pending one, else its length
 * in the map. */
static uint64_t bound_of(struct claim_walk *w, int i, bool *held)
{
	struct pending *p =
		baton_id_index_find(&w->l->pending, key_hash(w->cmd, i));
	*held = p != NULL;
	if (p != NULL)
		return p->bound;
	return kv_value_len(w->kv, w->cmd->argv[i], w->cmd->lens[i]);
}

/* Hold the key's bound at `bound`: 0 or BATON_ENOMEM (nothing held). */
static int hold(struct claim_walk *w, uint64_t hash, uint64_t bound)
{
	struct kv_limit_claim *c = w->claim;
	if (c->n == c->cap || c->n == w->undo_cap) {
		size_t cap = c->cap > 0 ? c->cap * 2 : 4;
		uint64_t *h = realloc(c->hashes, cap * sizeof *h);
		if (h == NULL)
			return BATON_ENOMEM;
		c->hashes = h;
		c->cap = cap;
		struct undo *u = realloc(w->undo, cap * sizeof *u);
		if (u == NULL)
			return BATON_ENOMEM;
		w->undo = u;
		w->undo_cap = cap;
	}
	struct pending *p = baton_id_index_find(&w->l->pending, hash);
	if (p == NULL) {
		if (baton_id_index_reserve(&w->l->pending) != 0)
			return BATON_ENOMEM;
		p = calloc(1, sizeof *p);
		if (p == NULL)
			return BATON_ENOMEM;
		baton_id_index_put(&w->l->pending, hash, p);
	}
	w->undo[c->n] = (struct undo){hash, p->bound};
	c->hashes[c->n++] = hash;
	p->bound = bound;
	p->holders++;
	return 0;
}

static int on_bound(void *arg, const struct kv_bound *b)
{
	struct claim_walk *w = arg;
	uint64_t max = w->l->max;
	bool held = false;
	uint64_t bound;
	switch (b->kind) {
	case KV_BOUND_FIXED:
		w->too_big = b->bytes > max;
		return w->too_big ? BATON_EINVAL : 0;
	case KV_BOUND_SET:
		bound = b->bytes;
		break;
	case KV_BOUND_GROW:
		bound = bound_of(w, b->key, &held);
		/* Both are at most 2^63: no overflow. */
		bound += b->bytes;
		break;
	case KV_BOUND_RAISE:
		bound = bound_of(w, b->key, &held);
		bound = bound > b->bytes ? bound : b->bytes;
		break;
	default:
		BATON_ASSERT(b->kind == KV_BOUND_FROM);
		bound = bound_of(w, b->from, &held);
		break;
	}
	if (bound > max) {
		w->too_big = true;
		return BATON_EINVAL;
	}
	return hold(w, key_hash(w->cmd, b->key), bound);
}

/* Drop the hold on one hash (its last holder frees the bound). */
static void unhold(struct kv_limit *l, uint64_t hash)
{
	struct pending *p = baton_id_index_find(&l->pending, hash);
	BATON_ASSERT(p != NULL && p->holders > 0);
	if (--p->holders == 0)
		free(baton_id_index_take(&l->pending, hash));
}

/* Undo a claim made in part, newest first. */
static void undo_claim(struct claim_walk *w)
{
	struct kv_limit_claim *c = w->claim;
	while (c->n > 0) {
		c->n--;
		struct pending *p =
			baton_id_index_find(&w->l->pending, c->hashes[c->n]);
		BATON_ASSERT(p != NULL);
		p->bound = w->undo[c->n].bound;
		unhold(w->l, c->hashes[c->n]);
	}
}

int kv_limit_claim(struct kv_limit *l, struct baton_kv *kv, bool transaction,
		   size_t n_commands, const struct kv_txn_command *commands,
		   struct kv_limit_claim *claim, struct baton_buf *err)
{
	BATON_ASSERT(l->max >= KV_LIMIT_BYTES_MIN);
	struct claim_walk w = {.l = l, .kv = kv};
	memset(claim, 0, sizeof *claim);
	w.claim = claim;
	int rv = 0;
	for (size_t i = 0; rv == 0 && i < n_commands; i++) {
		const struct kv_txn_command *t = &commands[i];
		const struct kv_command *c =
			t->argc >= 1 ? kv_lookup(t->argv[0], t->lens[0]) : NULL;
		if (c == NULL)
			continue; /* refused elsewhere */
		w.cmd = t;
		rv = kv_value_bounds(c, t->argc, t->argv, t->lens, on_bound,
				     &w);
	}
	if (rv != 0)
		undo_claim(&w);
	free(w.undo);
	if (rv != 0) {
		free(claim->hashes);
		memset(claim, 0, sizeof *claim);
	}
	if (w.too_big && transaction)
		return kv__refuse(err, "EXECABORT Transaction discarded "
				       "because of: string exceeds maximum "
				       "allowed size (proto-max-bulk-len)");
	if (w.too_big)
		return kv__refuse(err, KV_ERR_VALUE_TOO_BIG);
	return rv;
}

/* A transaction's commands read back: 0 or BATON_ENOMEM. */
static int claim_txn(struct kv_limit *l, struct baton_kv *kv,
		     const struct kv__decoded *d, struct kv_limit_claim *claim,
		     struct baton_buf *err)
{
	size_t n = d->n_commands;
	struct kv__payload *ps = calloc(n > 0 ? n : 1, sizeof *ps);
	struct kv_txn_command *ts = calloc(n > 0 ? n : 1, sizeof *ts);
	int rv = ps != NULL && ts != NULL ? 0 : BATON_ENOMEM;
	struct baton_le_reader r = d->commands;
	size_t read = 0;
	for (; rv == 0 && read < n; read++) {
		rv = kv__args_read(&r, &ps[read]);
		const struct kv__args *a = &ps[read].args;
		ts[read] = (struct kv_txn_command){a->argc, a->argv, a->lens};
	}
	if (rv == 0)
		rv = kv_limit_claim(l, kv, true, n, ts, claim, err);
	for (size_t i = 0; ps != NULL && i < read; i++)
		kv__payload_free(&ps[i]);
	free(ps);
	free(ts);
	return rv;
}

int kv_limit_claim_payload(struct kv_limit *l, struct baton_kv *kv,
			   const uint8_t *payload, size_t len,
			   struct kv_limit_claim *claim, struct baton_buf *err)
{
	memset(claim, 0, sizeof *claim);
	struct kv__decoded d;
	int rv = kv__decode(payload, len, &d);
	if (rv != 0)
		return rv;
	if (d.kind == KV_KIND_COMMAND) {
		const struct kv__args *a = &d.cmd.args;
		struct kv_txn_command t = {a->argc, a->argv, a->lens};
		rv = kv_limit_claim(l, kv, false, 1, &t, claim, err);
	} else if (d.kind == KV_KIND_TXN) {
		rv = claim_txn(l, kv, &d, claim, err);
	}
	kv__decoded_free(&d);
	return rv;
}

void kv_limit_release(struct kv_limit *l, struct kv_limit_claim *claim)
{
	for (size_t i = 0; i < claim->n; i++)
		unhold(l, claim->hashes[i]);
	free(claim->hashes);
	memset(claim, 0, sizeof *claim);
}

uint32_t kv_limit_pending(const struct kv_limit *l)
{
	return l->pending.n;
}

void kv_limit_free(struct kv_limit *l)
{
	for (uint32_t i = 0; i < l->pending.cap; i++)
		free(l->pending.slots[i].item);
	baton_id_index_free(&l->pending);
}
