/*
 * The hash table's incremental resize: keys stay reachable in both arrays,
 * iteration order and snapshot bytes never depend on the resize stage,
 * SCAN keeps its guarantee across a resize, and a failed allocation only
 * postpones a resize.
 */
#define _DEFAULT_SOURCE /* getrlimit */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "internal.h"
#include "kv_util.h"

#define KEY_TEXT_MAX 32

static size_t key_text(char *out, char prefix, int i)
{
	int n = snprintf(out, KEY_TEXT_MAX, "%c%d", prefix, i);
	cr_assert(n > 0 && n < KEY_TEXT_MAX);
	return (size_t)n;
}

static void add(struct kv__table *t, char prefix, int i)
{
	char k[KEY_TEXT_MAX];
	size_t n = key_text(k, prefix, i);
	struct kv__entry *e =
		kv__entry_new((const uint8_t *)k, n, (const uint8_t *)k, n);
	cr_assert_not_null(e);
	kv__table_insert(t, e);
}

static bool del(struct kv__table *t, char prefix, int i)
{
	char k[KEY_TEXT_MAX];
	size_t n = key_text(k, prefix, i);
	return kv__table_delete(t, (const uint8_t *)k, n);
}

static const struct kv__entry *find(const struct kv__table *t, char prefix,
				    int i)
{
	char k[KEY_TEXT_MAX];
	size_t n = key_text(k, prefix, i);
	return kv__table_find(t, (const uint8_t *)k, n);
}

/* Keys [0, n) of prefix are present with their own value, [n, n + 100)
 * absent. */
static void check_keys(const struct kv__table *t, char prefix, int lo, int n)
{
	for (int i = lo; i < n + 100; i++) {
		const struct kv__entry *e = find(t, prefix, i);
		if (i < n) {
			cr_assert_not_null(e, "%c%d missing", prefix, i);
			cr_assert_eq(memcmp(e->key, e->val, e->key_len), 0);
		} else {
			cr_assert_null(e, "%c%d present", prefix, i);
		}
	}
}

/* Every key in iteration order into out ("key,"), and the count. */
static uint64_t walk(const struct kv__table *t, struct baton_buf *out)
{
	baton_buf_reset(out);
	uint64_t cursor = 0, n = 0;
	do {
		for (const struct kv__entry *e = kv__table_bucket(t, cursor);
		     e != NULL; e = kv__table_after(t, e), n++) {
			cr_assert_eq(baton_buf_append(out, e->key, e->key_len),
				     0);
			cr_assert_eq(baton_buf_append(out, ",", 1), 0);
		}
		cursor = kv__table_next(t, cursor);
	} while (cursor != 0);
	return n;
}

/* Old buckets not yet moved that hold a key, and new buckets that do. */
static void where(const struct kv__table *t, uint64_t *in_old, uint64_t *in_new)
{
	*in_old = *in_new = 0;
	for (uint64_t o = t->moved; o < t->old_size; o++)
		*in_old += t->old[o] != NULL;
	for (uint64_t b = 0; b < t->size; b++)
		*in_new += t->buckets[b] != NULL;
}

Test(table, grows_and_shrinks_a_step_at_a_time)
{
	struct kv__table t;
	cr_assert_eq(kv__table_init(&t, 0), 0);
	int n = 0, grow_steps = 0, shrink_steps = 0;
	while (n < 20000) {
		add(&t, 'k', n++);
		if (kv__table_resizing(&t)) {
			cr_assert_eq(t.size, t.old_size * 2);
			grow_steps++;
			if (n % 97 == 0)
				check_keys(&t, 'k', 0, n);
		}
	}
	cr_assert_gt(grow_steps, 100);
	check_keys(&t, 'k', 0, n);
	int lo = 0;
	while (lo < n) {
		cr_assert(del(&t, 'k', lo++));
		if (kv__table_resizing(&t)) {
			cr_assert_lt(t.size, t.old_size);
			shrink_steps++;
			if (lo % 97 == 0)
				check_keys(&t, 'k', lo, n);
		}
		cr_assert_eq(t.count, (uint64_t)(n - lo));
	}
	cr_assert_gt(shrink_steps, 100);
	cr_assert_lt(t.size, 64, "shrank back (size %" PRIu64 ")", t.size);
	kv__table_free(&t);
}

/* Insert keys k(n).. until a growth is under way with keys in both
 * arrays, past 3000 keys (so that it lasts many steps). The keys after. */
static int fill_until_mid_grow(struct kv__table *t, int n)
{
	uint64_t in_old = 0, in_new = 0;
	while (n < 3000)
		add(t, 'k', n++);
	do {
		add(t, 'k', n++);
		if (kv__table_resizing(t))
			where(t, &in_old, &in_new);
	} while (!(in_old > 50 && in_new > 50));
	return n;
}

Test(table, lookups_and_deletes_reach_both_arrays)
{
	struct kv__table t;
	cr_assert_eq(kv__table_init(&t, 0), 0);
	int n = fill_until_mid_grow(&t, 0);
	check_keys(&t, 'k', 0, n);
	/* Delete every third key: each delete steps the resize on. */
	int deleted = 0;
	for (int i = 0; i < n; i += 3) {
		cr_assert(del(&t, 'k', i));
		cr_assert_not(del(&t, 'k', i));
		deleted++;
	}
	for (int i = 0; i < n; i++)
		cr_assert_eq(find(&t, 'k', i) == NULL, i % 3 == 0, "k%d", i);
	cr_assert_eq(t.count, (uint64_t)(n - deleted));
	/* Now mid-shrink: delete down until a shrink is under way. */
	uint64_t in_old = 0, in_new = 0;
	int lo = 0;
	while (!(kv__table_resizing(&t) && t.old_size > t.size && in_old > 10 &&
		 in_new > 10)) {
		cr_assert_lt(lo, n);
		if (lo % 3 != 0)
			cr_assert(del(&t, 'k', lo));
		lo++;
		if (kv__table_resizing(&t))
			where(&t, &in_old, &in_new);
	}
	for (int i = 0; i < n; i++)
		cr_assert_eq(find(&t, 'k', i) == NULL, i < lo || i % 3 == 0,
			     "k%d", i);
	kv__table_free(&t);
}

/* The order of k0..k(n-1) in a table that never resized. */
static void fresh_order(int n, struct baton_buf *out)
{
	struct kv__table fresh;
	cr_assert_eq(kv__table_init(&fresh, (uint64_t)n), 0);
	for (int i = n - 1; i >= 0; i--)
		add(&fresh, 'k', i);
	cr_assert_not(kv__table_resizing(&fresh));
	cr_assert_eq(walk(&fresh, out), (uint64_t)n);
	kv__table_free(&fresh);
}

Test(table, iteration_order_is_the_same_at_every_resize_stage)
{
	struct baton_buf want, got;
	baton_buf_init(&want);
	baton_buf_init(&got);
	struct kv__table grown;
	cr_assert_eq(kv__table_init(&grown, 0), 0);
	int n = fill_until_mid_grow(&grown, 0);
	fresh_order(n, &want);
	/* Every stage of the growth, one step at a time. */
	int stages = 0;
	for (; kv__table_resizing(&grown); stages++) {
		cr_assert_eq(walk(&grown, &got), (uint64_t)n);
		cr_assert_eq(got.len, want.len);
		cr_assert_eq(memcmp(got.data, want.data, got.len), 0,
			     "stage %d", stages);
		kv__table_step(&grown);
	}
	cr_assert_gt(stages, 2);
	cr_assert_eq(walk(&grown, &got), (uint64_t)n);
	cr_assert_eq(memcmp(got.data, want.data, got.len), 0);
	/* Every stage of a shrink: delete k(m)..k(n-1) until one starts. */
	int m = n;
	while (!kv__table_resizing(&grown)) {
		cr_assert_gt(m, 0);
		cr_assert(del(&grown, 'k', --m));
	}
	cr_assert_gt(grown.old_size, grown.size);
	fresh_order(m, &want);
	for (stages = 0; kv__table_resizing(&grown); stages++) {
		cr_assert_eq(walk(&grown, &got), (uint64_t)m);
		cr_assert_eq(memcmp(got.data, want.data, got.len), 0,
			     "stage %d", stages);
		kv__table_step(&grown);
	}
	cr_assert_gt(stages, 2);
	kv__table_free(&grown);
	baton_buf_free(&want);
	baton_buf_free(&got);
}

/* ---- through the machine: SCAN and snapshots ---- */

static int seen[4096];

static void set_key(struct baton_kv *kv, char prefix, int i)
{
	char line[64];
	snprintf(line, sizeof line, "SET %c%d v", prefix, i);
	cr_assert_str_eq(kvt_run(kv, line), "+OK\r\n");
}

static void del_key(struct baton_kv *kv, char prefix, int i)
{
	char line[64];
	snprintf(line, sizeof line, "DEL %c%d", prefix, i);
	cr_assert_str_eq(kvt_run(kv, line), ":1\r\n");
}

/* One SCAN call; marks the 's' keys it returns in seen[]. */
static uint64_t scan_step(struct baton_kv *kv, uint64_t cursor)
{
	char line[96];
	snprintf(line, sizeof line, "SCAN %" PRIu64 " COUNT 4", cursor);
	const char *p = kvt_run(kv, line);
	cr_assert_eq(sscanf(p, "*2\r\n$%*d\r\n%" SCNu64, &cursor), 1);
	p = strchr(strchr(p + 4, '\n') + 1, '\n') + 1;
	int k = 0;
	cr_assert_eq(sscanf(p, "*%d\r\n", &k), 1);
	p = strchr(p, '\n') + 1;
	for (int i = 0; i < k; i++) {
		int len = 0;
		cr_assert_eq(sscanf(p, "$%d\r\n", &len), 1);
		p = strchr(p, '\n') + 1;
		if (p[0] == 's') {
			int j = atoi(p + 1);
			cr_assert(j >= 0 && j < 4096);
			seen[j]++;
		}
		p += len + 2;
	}
	return cursor;
}

Test(table, scan_across_a_resize_in_both_directions)
{
	for (int shrink = 0; shrink <= 1; shrink++) {
		struct baton_kv *kv = kvt_new();
		memset(seen, 0, sizeof seen);
		int stable = 3000, extra = 0;
		for (int i = 0; i < stable; i++)
			set_key(kv, 's', i);
		if (shrink)
			for (; extra < 40000; extra++)
				set_key(kv, 'x', extra);
		int calls_mid_resize = 0, x = 0;
		uint64_t cursor = 0;
		do {
			cursor = scan_step(kv, cursor);
			/* A few writes between calls step the resize. */
			for (int k = 0; k < 8; k++) {
				if (!shrink)
					set_key(kv, 'g', x++);
				else if (x < extra)
					del_key(kv, 'x', x++);
			}
			calls_mid_resize += kv__table_resizing(&kv->table);
		} while (cursor != 0);
		cr_assert_gt(calls_mid_resize, 10, "shrink %d", shrink);
		for (int i = 0; i < stable; i++) {
			cr_assert_geq(seen[i], 1, "s%d missed", i);
			if (!shrink) /* growth never repeats a key */
				cr_assert_eq(seen[i], 1, "s%d repeated", i);
		}
		kv_destroy(kv);
	}
}

static void snapshot_of(const struct baton_kv *kv, struct baton_buf *out)
{
	kvt_snapshot(kv, out);
	cr_assert_gt(out->len, 0);
}

Test(table, snapshot_bytes_do_not_depend_on_the_resize_stage)
{
	struct baton_kv *a = kvt_new(), *b = kvt_new();
	kvt_use(2, 1700000000000ull);
	/* Mid-growth, some keys with an expiry. */
	int n = 0;
	while (!(kv__table_resizing(&a->table) && a->table.moved > 0 &&
		 n > 2000)) {
		char line[64];
		snprintf(line, sizeof line, "SET k%d v%d PX %d", n, n,
			 1000 + n % 7);
		if (n % 3 != 0)
			snprintf(line, sizeof line, "SET k%d v%d", n, n);
		cr_assert_str_eq(kvt_run(a, line), "+OK\r\n");
		n++;
	}
	struct kv__table *t = &a->table;
	cr_assert(t->moved > 0 && t->moved < t->old_size);
	struct baton_buf mid, other;
	baton_buf_init(&mid);
	baton_buf_init(&other);
	snapshot_of(a, &mid);
	/* A map restored from it holds a fresh table: same bytes. */
	struct baton_machine_version v2 = {2};
	cr_assert_eq(kv_restore(b, v2, mid.data, mid.len), 0);
	cr_assert_not(kv__table_resizing(&b->table));
	snapshot_of(b, &other);
	cr_assert_eq(other.len, mid.len);
	cr_assert_eq(memcmp(other.data, mid.data, mid.len), 0);
	/* Mid-shrink after deletes; b applies the same deletes in another
	 * order, with no resize under way when it is done. */
	int lo = 0;
	while (!(kv__table_resizing(&a->table) &&
		 a->table.old_size > a->table.size))
		del_key(a, 'k', lo++);
	del_key(a, 'k', lo++); /* one step on */
	cr_assert(a->table.moved > 0 && a->table.moved < a->table.old_size);
	for (int i = lo - 1; i >= 0; i--)
		del_key(b, 'k', i);
	while (kv__table_resizing(&b->table))
		kv__table_step(&b->table);
	snapshot_of(a, &mid);
	snapshot_of(b, &other);
	cr_assert_eq(other.len, mid.len);
	cr_assert_eq(memcmp(other.data, mid.data, mid.len), 0);
	baton_buf_free(&mid);
	baton_buf_free(&other);
	kv_destroy(a);
	kv_destroy(b);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif

#ifndef SANITIZED
/* The process's address space in bytes, from /proc/self/statm. */
static uint64_t address_space_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	cr_assert_not_null(f);
	unsigned long long pages = 0;
	cr_assert_eq(fscanf(f, "%llu", &pages), 1);
	fclose(f);
	return pages * 4096u;
}
#endif

/* Criterion runs each test in its own process, so the limit set here
 * ends with it. */
Test(table, a_failed_allocation_postpones_the_resize)
{
#ifdef SANITIZED
	cr_skip_test("address space limits and sanitizers do not mix");
#else
	struct kv__table t;
	cr_assert_eq(kv__table_init(&t, 1u << 16), 0);
	for (int i = 0; i < (1 << 16); i++)
		add(&t, 'k', i);
	cr_assert_not(kv__table_resizing(&t));
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	walk(&t, &before);
	struct kv__entry *e = kv__entry_new((const uint8_t *)"last", 4,
					    (const uint8_t *)"last", 4);
	cr_assert_not_null(e);
	cr_assert_eq(baton_buf_reserve(&after, before.len + 16), 0);
	/* No room for the 1 MiB array of 2^17 buckets. */
	struct rlimit old, low;
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	low = old;
	low.rlim_cur = address_space_bytes() + (256u << 10);
	cr_assert_eq(setrlimit(RLIMIT_AS, &low), 0);
	kv__table_insert(&t, e);
	uint64_t size = t.size;
	bool resizing = kv__table_resizing(&t);
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_not(resizing);
	cr_assert_eq(size, 1u << 16);
	cr_assert_eq(t.count, (1u << 16) + 1);
	check_keys(&t, 'k', 0, 1 << 16);
	cr_assert_not_null(kv__table_find(&t, (const uint8_t *)"last", 4));
	/* With memory back, the next insert starts it. */
	add(&t, 'n', 0);
	cr_assert(kv__table_resizing(&t));
	cr_assert_eq(t.size, 1u << 17);
	cr_assert(del(&t, 'n', 0));
	cr_assert(kv__table_delete(&t, (const uint8_t *)"last", 4));
	walk(&t, &after);
	cr_assert_eq(after.len, before.len);
	cr_assert_eq(memcmp(after.data, before.data, before.len), 0);
	baton_buf_free(&before);
	baton_buf_free(&after);
	kv__table_free(&t);
#endif
}
