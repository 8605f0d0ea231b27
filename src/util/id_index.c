/* Pointers by 64-bit id (see id_index.h). */
#include "id_index.h"

#include <stdbool.h>
#include <stdlib.h>

#include "baton/assert.h"
#include "baton/errors.h"

#define CAP_MIN_BITS 6u /* 64 slots */

void baton_id_index_free(struct baton_id_index *x)
{
	free(x->slots);
	*x = (struct baton_id_index){0};
}

static uint32_t home(const struct baton_id_index *x, uint64_t id)
{
	return (uint32_t)((id * 0x9e3779b97f4a7c15u) >> (64 - x->bits));
}

static void place(struct baton_id_index *x, struct baton_id_slot s)
{
	uint32_t i = home(x, s.id);
	while (x->slots[i].item != NULL)
		i = (i + 1) & (x->cap - 1);
	x->slots[i] = s;
}

int baton_id_index_reserve(struct baton_id_index *x)
{
	if ((x->n + 1) * 2 <= x->cap)
		return 0;
	uint32_t bits = x->cap == 0 ? CAP_MIN_BITS : x->bits + 1;
	BATON_ASSERT(bits < 32);
	uint32_t cap = 1u << bits;
	struct baton_id_slot *slots = calloc(cap, sizeof *slots);
	if (slots == NULL)
		return BATON_ENOMEM;
	struct baton_id_slot *old = x->slots;
	uint32_t old_cap = x->cap;
	x->slots = slots;
	x->cap = cap;
	x->bits = bits;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].item != NULL)
			place(x, old[i]);
	free(old);
	return 0;
}

/* The slot holding id, or cap. */
static uint32_t slot_of(const struct baton_id_index *x, uint64_t id)
{
	if (x->n == 0)
		return x->cap;
	for (uint32_t i = home(x, id); x->slots[i].item != NULL;
	     i = (i + 1) & (x->cap - 1))
		if (x->slots[i].id == id)
			return i;
	return x->cap;
}

void baton_id_index_put(struct baton_id_index *x, uint64_t id, void *item)
{
	BATON_ASSERT(item != NULL && (x->n + 1) * 2 <= x->cap);
	BATON_ASSERT(slot_of(x, id) == x->cap);
	place(x, (struct baton_id_slot){id, item});
	x->n++;
}

void *baton_id_index_find(const struct baton_id_index *x, uint64_t id)
{
	uint32_t i = slot_of(x, id);
	return i < x->cap ? x->slots[i].item : NULL;
}

void *baton_id_index_take(struct baton_id_index *x, uint64_t id)
{
	uint32_t i = slot_of(x, id);
	if (i == x->cap)
		return NULL;
	void *item = x->slots[i].item;
	uint32_t mask = x->cap - 1;
	x->slots[i].item = NULL;
	x->n--;
	/* Move back every item after the hole that probed past it: one
	 * whose home lies cyclically in (hole, j] stays. */
	for (uint32_t j = (i + 1) & mask; x->slots[j].item != NULL;
	     j = (j + 1) & mask) {
		uint32_t h = home(x, x->slots[j].id);
		bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
		if (stays)
			continue;
		x->slots[i] = x->slots[j];
		x->slots[j].item = NULL;
		i = j;
	}
	return item;
}
