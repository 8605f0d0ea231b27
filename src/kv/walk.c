/*
 * Walks over a table's keys in the canonical order from a position, which
 * the views of snapshot_slices.c resume at each step (the map's keys, and
 * a hash's fields when one is written in parts). A position is a key's
 * (hash, key): a walk finds the first key after it afresh, from its
 * bucket under the table's mask now, so a resize between two walks
 * changes nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "internal.h"

/* The smallest buffer for a position's key. */
#define POSITION_KEY_BYTES_MIN 64u

bool kv__position_passed(const struct kv__position *p, uint64_t hash,
			 const uint8_t *key, size_t len)
{
	return p->started &&
	       kv__position_cmp(hash, key, len, p->hash, p->key, p->len) <= 0;
}

/* Move on to the next bucket with a key unless at one. */
static void walk_settle(struct kv__walk *w)
{
	while (w->e == NULL) {
		w->cursor = kv__table_next(w->t, w->cursor);
		if (w->cursor == 0)
			return; /* every bucket visited */
		w->e = kv__table_bucket(w->t, w->cursor);
	}
}

void kv__walk_start(struct kv__walk *w, const struct kv__table *t,
		    const struct kv__position *p)
{
	w->t = t;
	w->cursor = p->started ? p->hash : 0;
	w->e = NULL;
	if (t->count == 0)
		return;
	w->e = kv__table_bucket(t, w->cursor);
	while (p->started && w->e != NULL &&
	       kv__position_cmp(w->e->hash, w->e->key, w->e->key_len, p->hash,
				p->key, p->len) <= 0)
		w->e = kv__table_after(t, w->e);
	walk_settle(w);
}

void kv__walk_next(struct kv__walk *w)
{
	BATON_ASSERT(w->e != NULL);
	w->e = kv__table_after(w->t, w->e);
	walk_settle(w);
}

int kv__position_remember(struct kv__position *p, const struct kv__entry *e)
{
	BATON_ASSERT(!p->started ||
		     kv__position_cmp(e->hash, e->key, e->key_len, p->hash,
				      p->key, p->len) > 0);
	if (e->key_len > p->cap) {
		size_t cap = p->cap > POSITION_KEY_BYTES_MIN
				     ? p->cap
				     : POSITION_KEY_BYTES_MIN;
		while (cap < e->key_len)
			cap *= 2;
		uint8_t *key = kv__realloc(p->key, cap);
		if (key == NULL)
			return BATON_ENOMEM;
		p->key = key;
		p->cap = cap;
	}
	if (e->key_len > 0)
		memcpy(p->key, e->key, e->key_len);
	p->len = e->key_len;
	p->hash = e->hash;
	p->started = true;
	return 0;
}
