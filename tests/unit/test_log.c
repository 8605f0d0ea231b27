/*
 * The in-memory log (src/core/log.c, through the internal header core.h):
 * entries since the last compaction in one array, `base` the index just
 * before the first held entry.
 */
#include "core.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* Payload of entry i: "e<i>" so every entry's bytes are distinct. */
static uint32_t payload(baton_index i, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "e%llu", (unsigned long long)i);
	cr_assert_gt(n, 0);
	return (uint32_t)n;
}

static void append_i(struct baton__log *l, baton_term term)
{
	char buf[32];
	baton_index i = baton__log_last_index(l) + 1;
	uint32_t len = payload(i, buf, sizeof buf);
	cr_assert_eq(baton__log_append(l, term, BATON_ENTRY_COMMAND, buf, len),
		     0);
	cr_assert_eq(baton__log_last_index(l), i);
}

/* The entry at i holds what append_i() put there. */
static void check_entry(const struct baton__log *l, baton_index i,
			baton_term term)
{
	char buf[32];
	uint32_t len = payload(i, buf, sizeof buf);
	const struct baton_entry *e = baton__log_get(l, i);
	cr_assert_not_null(e, "entry %llu missing", (unsigned long long)i);
	cr_assert_eq(e->index, i);
	cr_assert_eq(e->term, term, "term of %llu", (unsigned long long)i);
	cr_assert_eq(e->type, BATON_ENTRY_COMMAND);
	cr_assert_eq(e->len, len);
	cr_assert_arr_eq(e->buf, buf, len);
	baton_term t = 0;
	cr_assert(baton__log_term(l, i, &t));
	cr_assert_eq(t, term);
}

Test(memlog, empty_log)
{
	struct baton__log l;
	baton__log_init(&l);
	baton_term t = 99;
	cr_assert_eq(baton__log_last_index(&l), 0);
	cr_assert_eq(baton__log_last_term(&l), 0);
	cr_assert_null(baton__log_get(&l, 0));
	cr_assert_null(baton__log_get(&l, 1));
	cr_assert(baton__log_term(&l, 0, &t), "index 0 is the base");
	cr_assert_eq(t, 0);
	cr_assert_not(baton__log_term(&l, 1, &t));
	baton__log_free(&l);
}

Test(memlog, append_and_get_copy_the_payload)
{
	struct baton__log l;
	baton__log_init(&l);
	char cmd[] = "hello";
	cr_assert_eq(baton__log_append(&l, 1, BATON_ENTRY_CONFIG, cmd, 5), 0);
	cr_assert_eq(baton__log_append(&l, 1, BATON_ENTRY_NOOP, NULL, 0), 0);
	cr_assert_eq(baton__log_append(&l, 3, BATON_ENTRY_COMMAND, cmd, 3), 0);
	memcpy(cmd, "XXXXX", 5); /* the log holds its own copy */

	cr_assert_eq(baton__log_last_index(&l), 3);
	cr_assert_eq(baton__log_last_term(&l), 3);
	const struct baton_entry *e = baton__log_get(&l, 1);
	cr_assert_eq(e->index, 1);
	cr_assert_eq(e->term, 1);
	cr_assert_eq(e->type, BATON_ENTRY_CONFIG);
	cr_assert_eq(e->len, 5);
	cr_assert_arr_eq(e->buf, "hello", 5);
	e = baton__log_get(&l, 2);
	cr_assert_eq(e->type, BATON_ENTRY_NOOP);
	cr_assert_eq(e->len, 0);
	e = baton__log_get(&l, 3);
	cr_assert_eq(e->term, 3);
	cr_assert_arr_eq(e->buf, "hel", 3);
	cr_assert_null(baton__log_get(&l, 4));

	baton_term t;
	cr_assert(baton__log_term(&l, 2, &t));
	cr_assert_eq(t, 1);
	cr_assert(baton__log_term(&l, 3, &t));
	cr_assert_eq(t, 3);
	cr_assert_not(baton__log_term(&l, 4, &t));
	baton__log_free(&l);
	cr_assert_eq(baton__log_last_index(&l), 0, "free leaves a usable log");
}

Test(memlog, truncate_drops_the_suffix)
{
	struct baton__log l;
	baton__log_init(&l);
	for (int i = 0; i < 5; i++)
		append_i(&l, i < 3 ? 1 : 2);
	baton__log_truncate(&l, 9); /* beyond the end: nothing */
	cr_assert_eq(baton__log_last_index(&l), 5);
	baton__log_truncate(&l, 4);
	cr_assert_eq(baton__log_last_index(&l), 3);
	cr_assert_eq(baton__log_last_term(&l), 1);
	cr_assert_null(baton__log_get(&l, 4));
	check_entry(&l, 3, 1);
	/* The freed slots are reused by the next appends. */
	append_i(&l, 5);
	check_entry(&l, 4, 5);
	cr_assert_eq(baton__log_last_term(&l), 5);
	baton__log_truncate(&l, 1);
	cr_assert_eq(baton__log_last_index(&l), 0);
	cr_assert_eq(baton__log_last_term(&l), 0);
	baton__log_free(&l);
}

Test(memlog, compact_moves_the_base)
{
	struct baton__log l;
	baton__log_init(&l);
	for (int i = 0; i < 6; i++)
		append_i(&l, (baton_term)(1 + i / 2)); /* terms 1 1 2 2 3 3 */
	baton__log_compact(&l, 3);
	cr_assert_eq(l.base, 3);
	cr_assert_eq(l.base_term, 2);
	cr_assert_null(baton__log_get(&l, 3));
	cr_assert_null(baton__log_get(&l, 1));
	baton_term t;
	cr_assert(baton__log_term(&l, 3, &t), "the base's term is known");
	cr_assert_eq(t, 2);
	cr_assert_not(baton__log_term(&l, 2, &t));
	check_entry(&l, 4, 2);
	check_entry(&l, 6, 3);
	cr_assert_eq(baton__log_last_index(&l), 6);

	baton__log_compact(&l, 2); /* below the base: nothing */
	cr_assert_eq(l.base, 3);
	baton__log_compact(&l, 3); /* at the base: nothing */
	cr_assert_eq(l.base, 3);

	/* Compacting everything keeps the last index and term. */
	baton__log_compact(&l, 6);
	cr_assert_eq(l.n, 0);
	cr_assert_eq(baton__log_last_index(&l), 6);
	cr_assert_eq(baton__log_last_term(&l), 3);
	append_i(&l, 3);
	check_entry(&l, 7, 3);
	baton__log_free(&l);
}

Test(memlog, truncate_after_compact)
{
	struct baton__log l;
	baton__log_init(&l);
	for (int i = 0; i < 10; i++)
		append_i(&l, 1);
	baton__log_compact(&l, 4);
	baton__log_truncate(&l, 8);
	cr_assert_eq(baton__log_last_index(&l), 7);
	check_entry(&l, 5, 1);
	check_entry(&l, 7, 1);
	baton__log_truncate(&l, 5); /* the first held entry */
	cr_assert_eq(baton__log_last_index(&l), 4);
	cr_assert_eq(baton__log_last_term(&l), 1, "the base's term");
	append_i(&l, 2);
	check_entry(&l, 5, 2);
	baton__log_free(&l);
}

Test(memlog, reset_restarts_after_a_base)
{
	struct baton__log l;
	baton__log_init(&l);
	for (int i = 0; i < 4; i++)
		append_i(&l, 1);
	baton__log_reset(&l, 100, 7);
	cr_assert_eq(baton__log_last_index(&l), 100);
	cr_assert_eq(baton__log_last_term(&l), 7);
	cr_assert_null(baton__log_get(&l, 100));
	cr_assert_null(baton__log_get(&l, 4));
	baton_term t;
	cr_assert(baton__log_term(&l, 100, &t));
	cr_assert_eq(t, 7);
	cr_assert_not(baton__log_term(&l, 99, &t));
	append_i(&l, 7);
	check_entry(&l, 101, 7);
	append_i(&l, 8);
	check_entry(&l, 102, 8);
	/* A reset to zero empties the log entirely. */
	baton__log_reset(&l, 0, 0);
	cr_assert_eq(baton__log_last_index(&l), 0);
	cr_assert_eq(baton__log_last_term(&l), 0);
	append_i(&l, 1);
	check_entry(&l, 1, 1);
	baton__log_free(&l);
}

Test(memlog, grows_past_the_initial_capacity)
{
	struct baton__log l;
	baton__log_init(&l);
	const baton_index n = 1000;
	for (baton_index i = 1; i <= n; i++)
		append_i(&l, 1 + i / 100);
	cr_assert_geq(l.cap, n);
	for (baton_index i = 1; i <= n; i++)
		check_entry(&l, i, 1 + i / 100);
	cr_assert_eq(baton__log_last_term(&l), 11);
	baton__log_free(&l);
}

/* The usual life of a log: appends with compactions that keep a tail. The
 * array is reused (entries shifted down) rather than grown without bound,
 * and every held entry stays intact through each shift. */
Test(memlog, growth_with_interleaved_compaction)
{
	struct baton__log l;
	baton__log_init(&l);
	const baton_index total = 5000;
	const baton_index keep = 40;
	size_t max_cap = 0;
	for (baton_index i = 1; i <= total; i++) {
		append_i(&l, 1 + i / 700);
		if (i % 97 == 0 && i > keep) {
			baton__log_compact(&l, i - keep);
			cr_assert_eq(l.base, i - keep);
			cr_assert_eq(baton__log_last_index(&l), i);
		}
		if (i % 251 == 0) {
			/* Everything held is intact. */
			for (baton_index k = l.base + 1; k <= i; k++)
				check_entry(&l, k, 1 + k / 700);
			baton_term t;
			cr_assert(baton__log_term(&l, l.base, &t));
			cr_assert_eq(t, 1 + l.base / 700);
		}
		if (l.cap > max_cap)
			max_cap = l.cap;
	}
	cr_assert_leq(max_cap, 512,
		      "capacity %zu: compaction should make room, not growth",
		      max_cap);
	for (baton_index k = l.base + 1; k <= total; k++)
		check_entry(&l, k, 1 + k / 700);
	/* A truncation in the middle of a shifted array still works. */
	baton_index cut = l.base + 5;
	baton__log_truncate(&l, cut);
	cr_assert_eq(baton__log_last_index(&l), cut - 1);
	append_i(&l, 99);
	check_entry(&l, cut, 99);
	baton__log_free(&l);
}
