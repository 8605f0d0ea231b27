/* Building a history: the byte arena, the key index, clients' pending ops. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HISTORY_GROW_MIN 64u

void lincheck_history_init(struct lincheck_history *h)
{
	memset(h, 0, sizeof(*h));
}

void lincheck_history_free(struct lincheck_history *h)
{
	free(h->ops);
	free(h->keys);
	free(h->key_ops);
	free(h->bytes);
	free(h->key_slots);
	free(h->clients);
	lincheck_history_init(h);
}

const char *lincheck_kind_name(enum lincheck_kind kind)
{
	static const char *const names[LINCHECK_KIND_COUNT] = {
		"get", "set", "append", "del", "incr", "cas"};
	assert((unsigned)kind < LINCHECK_KIND_COUNT);
	return names[kind];
}

const uint8_t *lincheck_value_bytes(const struct lincheck_history *h,
				    struct lincheck_value v)
{
	assert(v.tag == LINCHECK_PRESENT);
	assert(v.off + v.len <= h->n_bytes);
	return h->bytes != NULL ? h->bytes + v.off : (const uint8_t *)"";
}

/* Grows an array of *cap elements of size to hold need, up to max. */
static int grow(void **p, uint32_t *cap, uint32_t need, size_t size,
		uint32_t max)
{
	if (need <= *cap)
		return 0;
	if (need > max)
		return LINCHECK_ELIMIT;
	uint64_t n = *cap < HISTORY_GROW_MIN ? HISTORY_GROW_MIN : *cap;
	while (n < need)
		n *= 2;
	if (n > max)
		n = max;
	void *q = realloc(*p, (size_t)n * size);
	if (q == NULL)
		return LINCHECK_ENOMEM;
	*p = q;
	*cap = (uint32_t)n;
	return 0;
}

int lincheck_history_store(struct lincheck_history *h, const void *data,
			   size_t len, struct lincheck_value *out,
			   struct lincheck_error *err)
{
	if (len > UINT32_MAX || h->n_bytes + len > LINCHECK_HISTORY_BYTES_MAX)
		return lincheck__fail(err, LINCHECK_ELIMIT, h->name, 0,
				      "keys and values exceed %zu bytes",
				      (size_t)LINCHECK_HISTORY_BYTES_MAX);
	if (h->n_bytes + len > h->cap_bytes) {
		uint64_t n = h->cap_bytes < 4096 ? 4096 : h->cap_bytes;
		while (n < h->n_bytes + len)
			n *= 2;
		uint8_t *q = realloc(h->bytes, (size_t)n);
		if (q == NULL)
			return lincheck__fail(err, LINCHECK_ENOMEM, h->name, 0,
					      "out of memory");
		h->bytes = q;
		h->cap_bytes = n;
	}
	if (len > 0)
		memcpy(h->bytes + h->n_bytes, data, len);
	out->off = h->n_bytes;
	out->len = (uint32_t)len;
	out->tag = LINCHECK_PRESENT;
	h->n_bytes += len;
	return 0;
}

static bool key_equals(const struct lincheck_history *h, uint32_t key,
		       const void *data, size_t len)
{
	struct lincheck_value k = h->keys[key];
	return k.len == len &&
	       (len == 0 || memcmp(h->bytes + k.off, data, len) == 0);
}

static int rehash_keys(struct lincheck_history *h, uint32_t cap)
{
	uint32_t *slots = calloc(cap, sizeof(*slots));
	if (slots == NULL)
		return LINCHECK_ENOMEM;
	for (uint32_t k = 0; k < h->n_keys; k++) {
		struct lincheck_value v = h->keys[k];
		uint64_t i = lincheck__hash(h->bytes + v.off, v.len);
		while (slots[i & (cap - 1)] != 0)
			i++;
		slots[i & (cap - 1)] = k + 1;
	}
	free(h->key_slots);
	h->key_slots = slots;
	h->key_slots_cap = cap;
	return 0;
}

int lincheck_history_key(struct lincheck_history *h, const void *data,
			 size_t len, uint32_t *out, struct lincheck_error *err)
{
	if (h->key_slots_cap == 0 || h->n_keys >= h->key_slots_cap / 2) {
		uint32_t cap = h->key_slots_cap == 0 ? HISTORY_GROW_MIN
						     : h->key_slots_cap * 2;
		if (h->key_slots_cap >= LINCHECK_OPS_MAX * 2u)
			return lincheck__fail(err, LINCHECK_ELIMIT, h->name, 0,
					      "more than %u keys",
					      LINCHECK_OPS_MAX);
		if (rehash_keys(h, cap) != 0)
			return lincheck__fail(err, LINCHECK_ENOMEM, h->name, 0,
					      "out of memory");
	}
	uint32_t mask = h->key_slots_cap - 1;
	uint64_t i = lincheck__hash(len > 0 ? data : "", len);
	for (;; i++) {
		uint32_t slot = h->key_slots[i & mask];
		if (slot == 0)
			break;
		if (key_equals(h, slot - 1, data, len)) {
			*out = slot - 1;
			return 0;
		}
	}
	int rv = grow((void **)&h->keys, &h->cap_keys, h->n_keys + 1,
		      sizeof(*h->keys), LINCHECK_OPS_MAX);
	if (rv != 0)
		return lincheck__fail(err, rv, h->name, 0, "%s",
				      lincheck_strerror(rv));
	rv = grow((void **)&h->key_ops, &h->cap_key_ops, h->n_keys + 1,
		  sizeof(*h->key_ops), LINCHECK_OPS_MAX);
	if (rv != 0)
		return lincheck__fail(err, rv, h->name, 0, "%s",
				      lincheck_strerror(rv));
	struct lincheck_value v;
	rv = lincheck_history_store(h, data, len, &v, err);
	if (rv != 0)
		return rv;
	h->keys[h->n_keys] = v;
	h->key_ops[h->n_keys] = 0;
	h->key_slots[i & mask] = h->n_keys + 1;
	*out = h->n_keys++;
	return 0;
}

/* The client's slot (inserted if new), or NULL past the limit / OOM. */
static struct lincheck__client *client_slot(struct lincheck_history *h,
					    uint64_t id, int *rv)
{
	if (h->clients_cap == 0 || h->n_clients >= h->clients_cap / 2) {
		if (h->n_clients >= LINCHECK_CLIENTS_MAX) {
			*rv = LINCHECK_ELIMIT;
			return NULL;
		}
		uint32_t cap = h->clients_cap == 0 ? HISTORY_GROW_MIN
						   : h->clients_cap * 2;
		struct lincheck__client *c = calloc(cap, sizeof(*c));
		if (c == NULL) {
			*rv = LINCHECK_ENOMEM;
			return NULL;
		}
		for (uint32_t j = 0; j < h->clients_cap; j++) {
			if (!h->clients[j].used)
				continue;
			uint64_t i = lincheck__mix(h->clients[j].id);
			while (c[i & (cap - 1)].used)
				i++;
			c[i & (cap - 1)] = h->clients[j];
		}
		free(h->clients);
		h->clients = c;
		h->clients_cap = cap;
	}
	uint32_t mask = h->clients_cap - 1;
	for (uint64_t i = lincheck__mix(id);; i++) {
		struct lincheck__client *c = &h->clients[i & mask];
		if (c->used && c->id == id)
			return c;
		if (!c->used) {
			c->used = 1;
			c->id = id;
			c->pending = LINCHECK__NONE;
			c->last_time = INT64_MIN;
			h->n_clients++;
			return c;
		}
	}
}

static bool args_fit(const struct lincheck_op *op)
{
	switch (op->kind) {
	case LINCHECK_SET:
	case LINCHECK_APPEND:
		return op->arg.tag == LINCHECK_PRESENT;
	case LINCHECK_CAS:
		return op->arg.tag != LINCHECK_UNKNOWN &&
		       op->arg2.tag == LINCHECK_PRESENT;
	default:
		return true;
	}
}

int lincheck_history_invoke(struct lincheck_history *h,
			    const struct lincheck_op *op, uint32_t line,
			    struct lincheck_error *err)
{
	if (op->kind >= LINCHECK_KIND_COUNT || op->key >= h->n_keys ||
	    !args_fit(op))
		return lincheck__fail(err, LINCHECK_EMALFORMED, h->name, line,
				      "an invocation without its arguments");
	int rv = 0;
	struct lincheck__client *c = client_slot(h, op->client, &rv);
	if (c == NULL)
		return lincheck__fail(err, rv, h->name, line,
				      rv == LINCHECK_ELIMIT
					      ? "more than %u clients"
					      : "out of memory (%u clients)",
				      LINCHECK_CLIENTS_MAX);
	if (c->pending != LINCHECK__NONE)
		return lincheck__fail(
			err, LINCHECK_EMALFORMED, h->name, line,
			"client %llu invokes an operation while its previous "
			"one (line %u) is pending",
			(unsigned long long)op->client,
			h->ops[c->pending].invoke_line);
	if (h->key_ops[op->key] >= LINCHECK_KEY_OPS_MAX)
		return lincheck__fail(err, LINCHECK_ELIMIT, h->name, line,
				      "more than %u operations on one key",
				      LINCHECK_KEY_OPS_MAX);
	if (op->invoke_time < c->last_time)
		return lincheck__fail(
			err, LINCHECK_EMALFORMED, h->name, line,
			"client %llu invokes at %lld, before its previous "
			"operation completed (at %lld)",
			(unsigned long long)op->client,
			(long long)op->invoke_time, (long long)c->last_time);
	rv = grow((void **)&h->ops, &h->cap_ops, h->n_ops + 1, sizeof(*h->ops),
		  LINCHECK_OPS_MAX);
	if (rv != 0)
		return lincheck__fail(err, rv, h->name, line,
				      rv == LINCHECK_ELIMIT
					      ? "more than %u operations"
					      : "out of memory (%u operations)",
				      LINCHECK_OPS_MAX);
	struct lincheck_op *o = &h->ops[h->n_ops];
	*o = *op;
	o->invoke_line = line;
	o->status = LINCHECK_PENDING;
	o->return_time = INT64_MAX;
	o->complete_time = -1;
	o->complete_line = 0;
	if (o->kind != LINCHECK_CAS)
		o->arg2.tag = LINCHECK_UNKNOWN;
	if (o->kind != LINCHECK_INCR)
		o->delta = 0;
	memset(&o->out, 0, sizeof(o->out));
	o->out_int = 0;
	o->out_known = false;
	h->key_ops[op->key]++;
	c->pending = h->n_ops++;
	return 0;
}

/* Whether done's results fit an OK completion of kind. */
static bool results_fit(enum lincheck_kind kind, const struct lincheck_op *d)
{
	switch (kind) {
	case LINCHECK_GET:
		return d->out.tag != LINCHECK_UNKNOWN;
	case LINCHECK_APPEND:
		return !d->out_known || d->out_int >= 0;
	case LINCHECK_DEL:
		return !d->out_known || d->out_int == 0 || d->out_int == 1;
	case LINCHECK_CAS:
		return d->out_known && (d->out_int == 0 || d->out_int == 1);
	default:
		return true;
	}
}

int lincheck_history_complete(struct lincheck_history *h, uint64_t client,
			      int64_t time, uint32_t line,
			      enum lincheck_status status,
			      const struct lincheck_op *done, bool check_key,
			      struct lincheck_error *err)
{
	assert(status == LINCHECK_OK || status == LINCHECK_FAIL ||
	       status == LINCHECK_INFO);
	int rv = 0;
	struct lincheck__client *c = client_slot(h, client, &rv);
	if (c == NULL)
		return lincheck__fail(err, rv, h->name, line, "%s",
				      lincheck_strerror(rv));
	if (c->pending == LINCHECK__NONE)
		return lincheck__fail(err, LINCHECK_EMALFORMED, h->name, line,
				      "client %llu completes an operation it "
				      "has not invoked",
				      (unsigned long long)client);
	struct lincheck_op *o = &h->ops[c->pending];
	if (done->kind != o->kind || (check_key && done->key != o->key))
		return lincheck__fail(
			err, LINCHECK_EMALFORMED, h->name, line,
			"client %llu completes a %s, but its pending operation "
			"(line %u) is a %s%s",
			(unsigned long long)client,
			done->kind < LINCHECK_KIND_COUNT
				? lincheck_kind_name(done->kind)
				: "?",
			o->invoke_line, lincheck_kind_name(o->kind),
			done->kind == o->kind ? " of another key" : "");
	if (time < o->invoke_time)
		return lincheck__fail(err, LINCHECK_EMALFORMED, h->name, line,
				      "completion at %lld is before the "
				      "invocation at %lld (line %u)",
				      (long long)time,
				      (long long)o->invoke_time,
				      o->invoke_line);
	if (status == LINCHECK_OK) {
		if (!results_fit(o->kind, done))
			return lincheck__fail(err, LINCHECK_EMALFORMED, h->name,
					      line,
					      "a result that does not fit %s",
					      lincheck_kind_name(o->kind));
		o->out = done->out;
		o->out_int = done->out_int;
		o->out_known = done->out_known;
	}
	o->status = (uint8_t)status;
	o->return_time = status == LINCHECK_INFO ? INT64_MAX : time;
	o->complete_time = time;
	o->complete_line = line;
	c->pending = LINCHECK__NONE;
	c->last_time = time;
	return 0;
}

void lincheck_history_finish(struct lincheck_history *h)
{
	for (uint32_t i = 0; i < h->n_ops; i++) {
		if (h->ops[i].status == LINCHECK_PENDING) {
			h->ops[i].status = LINCHECK_INFO;
			h->ops[i].return_time = INT64_MAX;
		}
	}
	for (uint32_t j = 0; j < h->clients_cap; j++)
		h->clients[j].pending = LINCHECK__NONE;
}
