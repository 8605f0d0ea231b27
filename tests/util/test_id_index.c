/*
 * The id index (src/util/id_index.c) against a plain array model: ids in
 * increasing order taken mostly in order (request ids and their replies),
 * a few long-lived ones that stretch the window over the table's size so
 * that probes collide and wrap, and random ids; every find agrees with
 * the model after every step, through growth and deletion.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdlib.h>

#include "id_index.h"

struct item {
	uint64_t id;
	bool in;
};

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define ITEMS 20000u

/* Every item's presence as the model says, and absent ids absent. */
static void check(const struct baton_id_index *x, struct item *items,
		  uint32_t n)
{
	uint32_t in = 0;
	for (uint32_t i = 0; i < n; i++) {
		void *got = baton_id_index_find(x, items[i].id);
		cr_assert_eq(got, items[i].in ? &items[i] : NULL,
			     "id %llu (item %u)",
			     (unsigned long long)items[i].id, i);
		in += items[i].in;
	}
	cr_assert_eq(x->n, in);
	cr_assert_leq(x->n * 2, x->cap);
}

static void run(uint64_t (*make_id)(uint32_t i), uint32_t keep_every)
{
	struct baton_id_index x = {0};
	struct item *items = calloc(ITEMS, sizeof *items);
	cr_assert_not_null(items);
	uint32_t oldest = 0;
	for (uint32_t i = 0; i < ITEMS; i++) {
		items[i].id = make_id(i);
		cr_assert_eq(baton_id_index_reserve(&x), 0);
		baton_id_index_put(&x, items[i].id, &items[i]);
		items[i].in = true;
		/* Take some, mostly the oldest first; every keep_every-th
		 * lives long (an old leader's write). */
		uint32_t takes = (uint32_t)(next() % 3);
		for (uint32_t k = 0; k < takes && oldest <= i; k++) {
			uint32_t t =
				next() % 4 == 0
					? oldest + (uint32_t)(next() %
							      (i - oldest + 1))
					: oldest;
			if (!items[t].in ||
			    (t % keep_every == 0 && i - t < 3000))
				continue;
			cr_assert_eq(baton_id_index_take(&x, items[t].id),
				     &items[t]);
			items[t].in = false;
			cr_assert_null(baton_id_index_take(&x, items[t].id));
		}
		while (oldest <= i && !items[oldest].in)
			oldest++;
		if (i % 997 == 0)
			check(&x, items, i + 1);
	}
	check(&x, items, ITEMS);
	for (uint32_t i = 0; i < ITEMS; i++)
		if (items[i].in)
			cr_assert_eq(baton_id_index_take(&x, items[i].id),
				     &items[i]);
	cr_assert_eq(x.n, 0);
	baton_id_index_free(&x);
	cr_assert_null(baton_id_index_find(&x, 1));
	free(items);
}

static uint64_t increasing(uint32_t i)
{
	return (uint64_t)i + 1;
}

static uint64_t random_id(uint32_t i)
{
	/* Distinct: the index in the high bits, noise below. */
	return ((uint64_t)i << 32) | (next() & 0xffffffffu);
}

static uint64_t spaced(uint32_t i)
{
	/* All share their low bits: a plain mask would give them one
	 * home. */
	return ((uint64_t)i + 1) << 20;
}

Test(id_index, increasing_ids_with_long_lived_ones)
{
	run(increasing, 50);
}

Test(id_index, random_ids)
{
	run(random_id, 1000000);
}

Test(id_index, ids_sharing_their_low_bits)
{
	struct baton_id_index x = {0};
	struct item items[300];
	for (uint32_t i = 0; i < 300; i++) {
		items[i] = (struct item){spaced(i), true};
		cr_assert_eq(baton_id_index_reserve(&x), 0);
		baton_id_index_put(&x, items[i].id, &items[i]);
	}
	/* Out of the middle of the run, then the rest. */
	for (uint32_t i = 100; i < 200; i++) {
		cr_assert_eq(baton_id_index_take(&x, items[i].id), &items[i]);
		items[i].in = false;
	}
	check(&x, items, 300);
	for (uint32_t i = 0; i < 300; i++)
		if (items[i].in)
			cr_assert_eq(baton_id_index_take(&x, items[i].id),
				     &items[i]);
	cr_assert_eq(x.n, 0);
	baton_id_index_free(&x);
}

Test(id_index, missing_ids_in_an_empty_or_unused_index)
{
	struct baton_id_index x = {0};
	cr_assert_null(baton_id_index_find(&x, 7));
	cr_assert_null(baton_id_index_take(&x, 7));
	cr_assert_eq(baton_id_index_reserve(&x), 0);
	cr_assert_null(baton_id_index_find(&x, 7));
	baton_id_index_free(&x);
	baton_id_index_free(&x); /* twice is harmless */
}
