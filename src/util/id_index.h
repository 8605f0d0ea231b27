/*
 * Pointers found by a 64-bit id in O(1): an open-addressing table with
 * linear probing and backward-shift deletion (no tombstones), kept at most
 * half full. Ids are scattered by Fibonacci hashing (a multiply by 2^64
 * over the golden ratio, the top bits): ids handed out in increasing order
 * (request ids) would otherwise fill one run of consecutive slots, and a
 * deletion at its start would scan the whole run.
 *
 * The caller owns the items; the index holds pointers. An id is in the
 * index at most once. A zeroed struct is an empty index.
 */
#ifndef BATON_ID_INDEX_H
#define BATON_ID_INDEX_H

#include <stdint.h>

struct baton_id_slot {
	uint64_t id;
	void *item; /* NULL: a free slot */
};

struct baton_id_index {
	struct baton_id_slot *slots;
	uint32_t n, cap; /* cap: 0 or 2^bits */
	uint32_t bits;
};

/* Frees the table (not the items); the index is empty and usable again. */
void baton_id_index_free(struct baton_id_index *x);
/* Room for one more item, so the next put cannot fail: 0 or
 * BATON_ENOMEM (the index is unchanged). */
int baton_id_index_reserve(struct baton_id_index *x);
/* Add an item (not NULL) under an id not in the index, after a reserve. */
void baton_id_index_put(struct baton_id_index *x, uint64_t id, void *item);
/* The item with this id, or NULL. */
void *baton_id_index_find(const struct baton_id_index *x, uint64_t id);
/* Remove and return the item with this id, or NULL. */
void *baton_id_index_take(struct baton_id_index *x, uint64_t id);

#endif /* BATON_ID_INDEX_H */
