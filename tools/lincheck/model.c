/*
 * The model of one key: a Redis string that may be missing, under get,
 * set, append, del, incr and compare-and-set.
 *
 * An OK operation must produce its recorded result; an INFO one has no
 * result to match, so the model always allows it (an INCR on a value that
 * is not an integer, or a CAS whose compare fails, then changes nothing),
 * which is what lets the search put it last, i.e. leave it out.
 *
 * All values holding a lost append are one state, m->lost: no get or cas
 * compare can match any of them, appending keeps them lost, and a set or
 * del leaves them alike. (The search marks an append lost only when its
 * key has no incr and no append whose length was recorded, the two things
 * that could still tell such values apart.)
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MODEL_SLOTS_MIN 64u
/* Entries of the transition cache (a power of two). */
#define MODEL_MEMO_ENTRIES ((uint32_t)1 << 16)
/* Bytes of an int64 in decimal, sign included. */
#define MODEL_INT_BYTES 20u
/* States one model may intern (ids are uint32, one spare). */
#define MODEL_STATES_MAX (UINT32_MAX - 1)

void lincheck__model_free(struct lincheck__model *m)
{
	free(m->states);
	free(m->slots);
	free(m->bytes);
	free(m->scratch);
	free(m->memo);
	memset(m, 0, sizeof(*m));
}

uint64_t lincheck__model_bytes(const struct lincheck__model *m)
{
	return (uint64_t)m->cap_states * sizeof(*m->states) +
	       (uint64_t)m->cap_slots * sizeof(*m->slots) + m->cap_bytes +
	       m->cap_scratch + (uint64_t)MODEL_MEMO_ENTRIES * sizeof(*m->memo);
}

static bool state_equals(const struct lincheck__model *m, uint32_t id,
			 uint64_t hash, const uint8_t *p, size_t len,
			 bool present)
{
	const struct lincheck__state *s = &m->states[id];
	return s->hash == hash && s->present == present && s->len == len &&
	       (len == 0 || memcmp(m->bytes + s->off, p, len) == 0);
}

static int grow_slots(struct lincheck__model *m)
{
	uint32_t cap = m->cap_slots == 0 ? MODEL_SLOTS_MIN : m->cap_slots * 2;
	if (cap <= m->cap_slots)
		return LINCHECK_ENOMEM;
	uint32_t *slots = calloc(cap, sizeof(*slots));
	if (slots == NULL)
		return LINCHECK_ENOMEM;
	for (uint32_t id = 0; id < m->n_states; id++) {
		uint64_t i = m->states[id].hash;
		while (slots[i & (cap - 1)] != 0)
			i++;
		slots[i & (cap - 1)] = id + 1;
	}
	free(m->slots);
	m->slots = slots;
	m->cap_slots = cap;
	return 0;
}

static int append_state(struct lincheck__model *m, uint64_t hash,
			const uint8_t *p, size_t len, bool present)
{
	if (m->n_states == m->cap_states) {
		if (m->n_states >= MODEL_STATES_MAX)
			return LINCHECK_ENOMEM;
		uint32_t cap = m->cap_states == 0 ? MODEL_SLOTS_MIN
						  : m->cap_states * 2;
		void *q = realloc(m->states, (size_t)cap * sizeof(*m->states));
		if (q == NULL)
			return LINCHECK_ENOMEM;
		m->states = q;
		m->cap_states = cap;
	}
	if (m->n_bytes + len > m->cap_bytes) {
		uint64_t cap = m->cap_bytes < 4096 ? 4096 : m->cap_bytes;
		while (cap < m->n_bytes + len)
			cap *= 2;
		void *q = realloc(m->bytes, (size_t)cap);
		if (q == NULL)
			return LINCHECK_ENOMEM;
		m->bytes = q;
		m->cap_bytes = cap;
	}
	struct lincheck__state *s = &m->states[m->n_states];
	s->hash = hash;
	s->off = m->n_bytes;
	s->len = (uint32_t)len;
	s->present = present;
	s->lost = 0;
	s->int_ok = present && lincheck__strict_i64(p, len, &s->int_value);
	if (!s->int_ok)
		s->int_value = 0;
	if (len > 0)
		memcpy(m->bytes + m->n_bytes, p, len);
	m->n_bytes += len;
	m->n_states++;
	return 0;
}

/* The id of the value (p, len) or of a missing key. */
static int intern(struct lincheck__model *m, const uint8_t *p, size_t len,
		  bool present, uint32_t *id)
{
	if (len > UINT32_MAX)
		return LINCHECK_ENOMEM;
	if (!present && m->h->missing_reads_empty) {
		present = true;
		len = 0;
	}
	uint64_t hash = present ? lincheck__hash(p, len) : 0;
	if (m->cap_slots == 0 || m->n_states >= m->cap_slots / 2) {
		int rv = grow_slots(m);
		if (rv != 0)
			return rv;
	}
	uint32_t mask = m->cap_slots - 1;
	uint64_t i = hash;
	for (;; i++) {
		uint32_t slot = m->slots[i & mask];
		if (slot == 0)
			break;
		if (state_equals(m, slot - 1, hash, p, len, present)) {
			*id = slot - 1;
			return 0;
		}
	}
	int rv = append_state(m, hash, p, len, present);
	if (rv != 0)
		return rv;
	m->slots[i & mask] = m->n_states;
	*id = m->n_states - 1;
	return 0;
}

int lincheck__model_intern(struct lincheck__model *m, struct lincheck_value v,
			   uint32_t *id)
{
	assert(v.tag == LINCHECK_ABSENT || v.tag == LINCHECK_PRESENT);
	if (v.tag == LINCHECK_ABSENT)
		return intern(m, NULL, 0, false, id);
	return intern(m, lincheck_value_bytes(m->h, v), v.len, true, id);
}

int lincheck__model_init(struct lincheck__model *m,
			 const struct lincheck_history *h)
{
	memset(m, 0, sizeof(*m));
	m->h = h;
	m->memo = calloc(MODEL_MEMO_ENTRIES, sizeof(*m->memo));
	if (m->memo == NULL)
		return LINCHECK_ENOMEM;
	struct lincheck_value v = {0, 0, LINCHECK_ABSENT};
	if (h->missing_reads_empty)
		v.tag = LINCHECK_PRESENT;
	int rv = lincheck__model_intern(m, v, &m->absent);
	if (rv != 0)
		return rv;
	/* Not in the index: interning never finds it. */
	rv = append_state(m, 0, NULL, 0, true);
	if (rv != 0)
		return rv;
	m->lost = m->n_states - 1;
	m->states[m->lost].lost = 1;
	return 0;
}

static int scratch_reserve(struct lincheck__model *m, size_t n)
{
	if (n <= m->cap_scratch)
		return 0;
	size_t cap = m->cap_scratch < 256 ? 256 : m->cap_scratch;
	while (cap < n)
		cap *= 2;
	void *q = realloc(m->scratch, cap);
	if (q == NULL)
		return LINCHECK_ENOMEM;
	m->scratch = q;
	m->cap_scratch = cap;
	return 0;
}

static int append_to(struct lincheck__model *m, const struct lincheck_op *op,
		     uint32_t from, uint32_t *to)
{
	if (from == m->lost) {
		*to = m->lost;
		return 0;
	}
	const struct lincheck__state *s = &m->states[from];
	size_t len = (size_t)s->len + op->arg.len;
	int rv = scratch_reserve(m, len);
	if (rv != 0)
		return rv;
	if (s->len > 0)
		memcpy(m->scratch, m->bytes + s->off, s->len);
	if (op->arg.len > 0)
		memcpy(m->scratch + s->len, lincheck_value_bytes(m->h, op->arg),
		       op->arg.len);
	return intern(m, m->scratch, len, true, to);
}

/* INCR's new value; false if Redis would refuse (not an integer, or
 * overflow). */
static bool incr_value(const struct lincheck__model *m, uint32_t from,
		       int64_t delta, int64_t *out)
{
	const struct lincheck__state *s = &m->states[from];
	int64_t v = 0;
	if (from != m->absent && s->present) {
		if (!s->int_ok)
			return false;
		v = s->int_value;
	}
	if ((delta > 0 && v > INT64_MAX - delta) ||
	    (delta < 0 && v < INT64_MIN - delta))
		return false;
	*out = v + delta;
	return true;
}

static int incr_to(struct lincheck__model *m, int64_t value, uint32_t *to)
{
	char text[MODEL_INT_BYTES + 2];
	int n = snprintf(text, sizeof(text), "%lld", (long long)value);
	assert(n > 0 && (size_t)n < sizeof(text));
	return intern(m, (const uint8_t *)text, (size_t)n, true, to);
}

/* APPEND's and INCR's successor of `from`, through the memo. */
static int derived(struct lincheck__model *m, const struct lincheck_op *op,
		   uint32_t tag, uint32_t from, int64_t incr, uint32_t *to)
{
	uint64_t key = (((uint64_t)from << 32) | tag) + 1;
	struct lincheck__memo *e =
		&m->memo[lincheck__mix(key) & (MODEL_MEMO_ENTRIES - 1)];
	if (e->key == key) {
		*to = e->to;
		return 0;
	}
	int rv = op->kind == LINCHECK_APPEND ? append_to(m, op, from, to)
					     : incr_to(m, incr, to);
	if (rv != 0)
		return rv;
	e->key = key;
	e->to = *to;
	return 0;
}

bool lincheck__model_pure(const struct lincheck_op *op)
{
	if (op->status != LINCHECK_OK)
		return false;
	switch (op->kind) {
	case LINCHECK_GET:
		return true;
	case LINCHECK_CAS:
	case LINCHECK_DEL:
		return op->out_known && op->out_int == 0;
	default:
		return false;
	}
}

int lincheck__model_step(struct lincheck__model *m,
			 const struct lincheck_op *op,
			 const struct lincheck__op_facts *facts, uint32_t from,
			 struct lincheck__step *out)
{
	uint32_t want = facts->want;
	uint32_t target = facts->target;
	assert(from < m->n_states);
	bool known = op->status == LINCHECK_OK;
	const struct lincheck__state *s = &m->states[from];
	out->ok = true;
	out->to = from;
	int64_t v;
	switch (op->kind) {
	case LINCHECK_GET:
		out->ok = !known || from == want;
		return 0;
	case LINCHECK_SET:
		out->to = target;
		return 0;
	case LINCHECK_APPEND:
		assert(!(from == m->lost && known && op->out_known));
		if (known && op->out_known &&
		    op->out_int != (int64_t)s->len + (int64_t)op->arg.len) {
			out->ok = false;
			return 0;
		}
		if (facts->lost) {
			out->to = m->lost;
			return 0;
		}
		return derived(m, op, facts->tag, from, 0, &out->to);
	case LINCHECK_DEL:
		if (known && op->out_known &&
		    op->out_int != (from != m->absent ? 1 : 0)) {
			out->ok = false;
			return 0;
		}
		out->to = m->absent;
		return 0;
	case LINCHECK_INCR:
		if (!incr_value(m, from, op->delta, &v)) {
			out->ok = !known; /* Redis refuses: no effect */
			return 0;
		}
		if (known && op->out_known && op->out_int != v) {
			out->ok = false;
			return 0;
		}
		return derived(m, op, facts->tag, from, v, &out->to);
	case LINCHECK_CAS:
		if (!known) {
			out->to = from == want ? target : from;
			return 0;
		}
		out->ok = (from == want) == (op->out_int == 1);
		out->to = op->out_int == 1 ? target : from;
		return 0;
	default:
		assert(false && "an operation kind the model lacks");
		return LINCHECK_EMALFORMED;
	}
}
