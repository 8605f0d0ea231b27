/*
 * The in-memory log: every entry after the last compaction point, in one
 * contiguous array so that an update can hand the driver a slice of it
 * without copying. Compaction advances `head`; the array is shifted down
 * only when appending finds no room at the end.
 *
 * Compaction after a snapshot drops a whole snapshot's worth of entries
 * (100000 by default). Freeing their payloads at once held the loop for
 * tens of milliseconds, so the compacted slots keep their payloads as
 * garbage, slots[head - garbage, head), freed a bounded number per step
 * (baton__log_collect), and at the latest before the array moves.
 */
#include "core.h"

#include <string.h>

void baton__log_init(struct baton__log *l)
{
	memset(l, 0, sizeof *l);
}

static void free_range(struct baton__log *l, size_t from, size_t to)
{
	BATON_ASSERT(from <= to && to <= l->cap);
	for (size_t k = from; k < to; k++) {
		BATON_ASSERT(l->bytes >= l->slots[k].len);
		l->bytes -= l->slots[k].len;
		free(l->slots[k].buf);
		l->slots[k].buf = NULL;
	}
}

/* Free up to `budget` payloads of compacted entries, oldest first. */
void baton__log_collect(struct baton__log *l, size_t budget)
{
	BATON_ASSERT(l->garbage <= l->head);
	size_t n = l->garbage < budget ? l->garbage : budget;
	size_t from = l->head - l->garbage;
	free_range(l, from, from + n);
	l->garbage -= n;
	BATON_ASSERT(l->garbage <= l->head);
}

void baton__log_free(struct baton__log *l)
{
	BATON_ASSERT(l->head + l->n <= l->cap);
	baton__log_collect(l, SIZE_MAX);
	free_range(l, l->head, l->head + l->n);
	free(l->slots);
	baton__log_init(l);
	BATON_ASSERT(l->slots == NULL && l->n == 0);
}

baton_index baton__log_last_index(const struct baton__log *l)
{
	BATON_ASSERT(l->base + l->n >= l->base); /* no wrap */
	return l->base + l->n;
}

baton_term baton__log_last_term(const struct baton__log *l)
{
	BATON_ASSERT(l->n == 0 || l->slots[l->head + l->n - 1].term >=
					  l->base_term); /* terms only grow */
	return l->n == 0 ? l->base_term : l->slots[l->head + l->n - 1].term;
}

struct baton_entry *baton__log_get(const struct baton__log *l, baton_index i)
{
	if (i <= l->base || i > l->base + l->n)
		return NULL;
	struct baton_entry *e = &l->slots[l->head + (size_t)(i - l->base - 1)];
	BATON_ASSERT(e->index == i);
	return e;
}

bool baton__log_term(const struct baton__log *l, baton_index i,
		     baton_term *term)
{
	if (i == l->base) {
		*term = l->base_term;
		return true;
	}
	const struct baton_entry *e = baton__log_get(l, i);
	if (e == NULL)
		return false;
	*term = e->term;
	BATON_ASSERT(e->term >= l->base_term);
	return true;
}

static int make_room(struct baton__log *l)
{
	BATON_ASSERT(l->head + l->n <= l->cap);
	if (l->head + l->n < l->cap)
		return 0;
	if (l->head > 0 && l->head >= l->cap / 2) {
		baton__log_collect(l, SIZE_MAX); /* their slots are reused */
		memmove(l->slots, l->slots + l->head, l->n * sizeof *l->slots);
		l->head = 0;
		return 0;
	}
	size_t cap = l->cap == 0 ? 64 : l->cap * 2;
	struct baton_entry *s = realloc(l->slots, cap * sizeof *s);
	if (s == NULL)
		return BATON_ENOMEM;
	l->slots = s;
	l->cap = cap;
	BATON_ASSERT(l->head + l->n < l->cap);
	return 0;
}

int baton__log_append(struct baton__log *l, baton_term term, uint32_t type,
		      const void *buf, uint32_t len)
{
	BATON_ASSERT(term >= baton__log_last_term(l)); /* terms only grow */
	BATON_ASSERT(len == 0 || buf != NULL);
	if (make_room(l) != 0)
		return BATON_ENOMEM;
	uint8_t *copy = malloc(len > 0 ? len : 1);
	if (copy == NULL)
		return BATON_ENOMEM;
	if (len > 0)
		memcpy(copy, buf, len);
	struct baton_entry *e = &l->slots[l->head + l->n];
	e->term = term;
	e->index = baton__log_last_index(l) + 1;
	e->type = type;
	e->len = len;
	e->buf = copy;
	l->bytes += len;
	l->n++;
	BATON_ASSERT(baton__log_get(l, e->index) == e);
	return 0;
}

void baton__log_truncate(struct baton__log *l, baton_index i)
{
	if (i > baton__log_last_index(l))
		return;
	BATON_ASSERT(i > l->base);
	size_t keep = (size_t)(i - l->base - 1);
	free_range(l, l->head + keep, l->head + l->n);
	l->n = keep;
	BATON_ASSERT(baton__log_last_index(l) == i - 1);
}

void baton__log_compact(struct baton__log *l, baton_index i)
{
	if (i <= l->base)
		return;
	BATON_ASSERT(i <= baton__log_last_index(l));
	size_t drop = (size_t)(i - l->base);
	baton_term t = l->slots[l->head + drop - 1].term;
	l->head += drop;
	l->garbage += drop; /* freed by baton__log_collect */
	l->n -= drop;
	l->base = i;
	l->base_term = t;
	BATON_ASSERT(l->base == i &&
		     (l->n == 0 || l->slots[l->head].index == i + 1));
}

void baton__log_reset(struct baton__log *l, baton_index base,
		      baton_term base_term)
{
	baton__log_collect(l, SIZE_MAX);
	free_range(l, l->head, l->head + l->n);
	l->head = 0;
	l->n = 0;
	l->base = base;
	l->base_term = base_term;
	BATON_ASSERT(baton__log_last_index(l) == base);
}
