/*
 * The expiry index: a binary min-heap of the entries that have an expiry,
 * ordered by (expire_at_ms, key), each entry holding its own position.
 *
 * The order is total (keys are unique), so the keys a sweep deletes and
 * the order it deletes them in depend only on the map's contents, never
 * on the heap's shape or history: a node that restored a snapshot (and
 * rebuilt its heap) sweeps exactly as one that applied the whole log.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The smallest heap array allocated. */
#define KV_HEAP_CAP_MIN 16u

/* Does a come before b? */
static bool before(const struct kv__entry *a, const struct kv__entry *b)
{
	if (a->expire_at_ms != b->expire_at_ms)
		return a->expire_at_ms < b->expire_at_ms;
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = n > 0 ? memcmp(a->key, b->key, n) : 0;
	if (c != 0)
		return c < 0;
	return a->key_len < b->key_len;
}

static void place(struct kv__heap *h, size_t i, struct kv__entry *e)
{
	h->v[i] = e;
	e->heap_pos = i;
}

static void sift_up(struct kv__heap *h, size_t i)
{
	struct kv__entry *e = h->v[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!before(e, h->v[parent]))
			break;
		place(h, i, h->v[parent]);
		i = parent;
	}
	place(h, i, e);
}

static void sift_down(struct kv__heap *h, size_t i)
{
	struct kv__entry *e = h->v[i];
	for (;;) {
		size_t child = 2 * i + 1;
		if (child >= h->n)
			break;
		if (child + 1 < h->n && before(h->v[child + 1], h->v[child]))
			child++;
		if (!before(h->v[child], e))
			break;
		place(h, i, h->v[child]);
		i = child;
	}
	place(h, i, e);
}

int kv__heap_reserve(struct kv__heap *h, size_t extra)
{
	if (extra <= h->cap - h->n)
		return 0;
	if (extra > SIZE_MAX / sizeof *h->v - h->n)
		return BATON_ENOMEM;
	size_t cap = h->cap > 0 ? h->cap : KV_HEAP_CAP_MIN;
	while (cap < h->n + extra)
		cap = cap <= SIZE_MAX / sizeof *h->v / 2
			      ? cap * 2
			      : SIZE_MAX / sizeof *h->v;
	struct kv__entry **v = kv__realloc(h->v, cap * sizeof *v);
	if (v == NULL)
		return BATON_ENOMEM;
	h->v = v;
	h->cap = cap;
	return 0;
}

void kv__heap_free(struct kv__heap *h)
{
	kv__free(h->v);
	h->v = NULL;
	h->n = 0;
	h->cap = 0;
}

struct kv__entry *kv__heap_top(const struct kv__heap *h)
{
	return h->n > 0 ? h->v[0] : NULL;
}

void kv__expire_set(struct kv__table *t, struct kv__entry *e, int64_t at_ms)
{
	struct kv__heap *h = &t->expiring;
	if (t->snap != NULL)
		kv__snap_touch(t->snap, e, e->hash, e->key, e->key_len);
	if (!kv__has_expiry(e)) {
		assert(h->n < h->cap); /* reserved */
		e->expire_at_ms = at_ms;
		place(h, h->n++, e);
		sift_up(h, e->heap_pos);
		return;
	}
	assert(e->heap_pos < h->n && h->v[e->heap_pos] == e);
	int64_t old = e->expire_at_ms;
	e->expire_at_ms = at_ms;
	if (at_ms < old)
		sift_up(h, e->heap_pos);
	else
		sift_down(h, e->heap_pos);
}

void kv__expire_clear(struct kv__table *t, struct kv__entry *e)
{
	if (!kv__has_expiry(e))
		return;
	if (t->snap != NULL)
		kv__snap_touch(t->snap, e, e->hash, e->key, e->key_len);
	struct kv__heap *h = &t->expiring;
	size_t i = e->heap_pos;
	assert(i < h->n && h->v[i] == e);
	e->heap_pos = KV_HEAP_NONE;
	e->expire_at_ms = 0;
	struct kv__entry *last = h->v[--h->n];
	if (i == h->n)
		return;
	place(h, i, last);
	/* The moved entry may belong above or below its new place. */
	if (i > 0 && before(last, h->v[(i - 1) / 2]))
		sift_up(h, i);
	else
		sift_down(h, i);
}
