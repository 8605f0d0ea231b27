/*
 * SCAN's guarantee, as Redis gives it: a key present from the start of a
 * full scan to its end is returned at least once, however the table grows
 * or shrinks between the calls. And the order of keys depends on the keys
 * alone.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"

#define KEYS_STABLE 2000
#define KEY_TEXT_MAX 32

static struct baton_kv *kv;

static void setup(void)
{
	kv = kvt_new();
}

static void teardown(void)
{
	kv_destroy(kv);
}

TestSuite(scan, .init = setup, .fini = teardown);

static size_t read_num(const char **p, char kind)
{
	cr_assert_eq(**p, kind, "at '%s'", *p);
	char *end;
	unsigned long long n = strtoull(*p + 1, &end, 10);
	cr_assert_eq(memcmp(end, "\r\n", 2), 0);
	*p = end + 2;
	return (size_t)n;
}

/* Parse a SCAN reply: the next cursor; calls seen(key) for each key. */
static uint64_t parse_scan(const char *r, void (*seen)(const char *, size_t))
{
	const char *p = r;
	cr_assert_eq(read_num(&p, '*'), 2);
	size_t n = read_num(&p, '$');
	uint64_t cursor = strtoull(p, NULL, 10);
	p += n + 2;
	size_t k = read_num(&p, '*');
	for (size_t i = 0; i < k; i++) {
		size_t len = read_num(&p, '$');
		seen(p, len);
		p += len + 2;
	}
	cr_assert_eq(*p, '\0');
	return cursor;
}

static int stable_seen[KEYS_STABLE];
static size_t total_seen;

static void count_key(const char *key, size_t len)
{
	total_seen++;
	if (len > 1 && key[0] == 's') {
		int i = atoi(key + 1);
		cr_assert(i >= 0 && i < KEYS_STABLE);
		stable_seen[i]++;
	}
}

static void set_key(char prefix, int i)
{
	char line[64];
	snprintf(line, sizeof line, "SET %c%d v", prefix, i);
	cr_assert_str_eq(kvt_run(kv, line), "+OK\r\n");
}

static void del_key(char prefix, int i)
{
	char line[64];
	snprintf(line, sizeof line, "DEL %c%d", prefix, i);
	kvt_run(kv, line);
}

static uint64_t scan_step(uint64_t cursor, int count)
{
	char line[96];
	snprintf(line, sizeof line, "SCAN %" PRIu64 " COUNT %d", cursor, count);
	return parse_scan(kvt_run(kv, line), count_key);
}

Test(scan, a_quiet_scan_returns_every_key_once)
{
	for (int i = 0; i < KEYS_STABLE; i++)
		set_key('s', i);
	uint64_t cursor = 0;
	int calls = 0;
	do {
		cursor = scan_step(cursor, 7);
		calls++;
	} while (cursor != 0);
	cr_assert_gt(calls, 10);
	for (int i = 0; i < KEYS_STABLE; i++)
		cr_assert_eq(stable_seen[i], 1, "s%d seen %d times", i,
			     stable_seen[i]);
	cr_assert_eq(total_seen, KEYS_STABLE);
}

Test(scan, growth_between_calls_neither_misses_nor_repeats)
{
	for (int i = 0; i < KEYS_STABLE; i++)
		set_key('s', i);
	uint64_t cursor = 0, size0 = kv->table.size;
	int next_new = 0;
	do {
		cursor = scan_step(cursor, 5);
		for (int k = 0; k < 300 && next_new < 40000; k++)
			set_key('n', next_new++);
	} while (cursor != 0);
	cr_assert_gt(kv->table.size, size0 * 4, "the table grew");
	for (int i = 0; i < KEYS_STABLE; i++)
		cr_assert_eq(stable_seen[i], 1, "s%d seen %d times", i,
			     stable_seen[i]);
}

Test(scan, shrinking_between_calls_misses_nothing)
{
	for (int i = 0; i < KEYS_STABLE; i++)
		set_key('s', i);
	for (int i = 0; i < 60000; i++)
		set_key('x', i);
	uint64_t cursor = 0, size0 = kv->table.size;
	int next_del = 0;
	do {
		cursor = scan_step(cursor, 20);
		for (int k = 0; k < 2000 && next_del < 60000; k++)
			del_key('x', next_del++);
	} while (cursor != 0);
	cr_assert_lt(kv->table.size, size0 / 4, "the table shrank");
	for (int i = 0; i < KEYS_STABLE; i++)
		cr_assert_geq(stable_seen[i], 1, "s%d missed", i);
}

Test(scan, random_resizes_between_calls_miss_nothing)
{
	for (uint64_t seed = 1; seed <= 20; seed++) {
		kv_destroy(kv);
		kv = kvt_new();
		memset(stable_seen, 0, sizeof stable_seen);
		uint64_t rng = seed;
		int stable = 200 + (int)(kvt_rand(&rng) % 800);
		for (int i = 0; i < stable; i++)
			set_key('s', i);
		int live_lo = 0, live_hi = 0; /* 'v' keys [lo, hi) exist */
		uint64_t cursor = 0;
		do {
			int count = 1 + (int)(kvt_rand(&rng) % 30);
			cursor = scan_step(cursor, count);
			uint64_t r = kvt_rand(&rng) % 3;
			int n = (int)(kvt_rand(&rng) % 3000);
			if (r == 0) {
				for (int k = 0; k < n; k++)
					set_key('v', live_hi++);
			} else if (r == 1) {
				for (int k = 0; k < n && live_lo < live_hi; k++)
					del_key('v', live_lo++);
			}
		} while (cursor != 0);
		for (int i = 0; i < stable; i++)
			cr_assert_geq(stable_seen[i], 1,
				      "seed %" PRIu64 ": s%d missed", seed, i);
	}
}

Test(scan, match_filters_and_count_is_a_hint)
{
	for (int i = 0; i < 100; i++)
		set_key('s', i);
	for (int i = 0; i < 100; i++)
		set_key('o', i);
	uint64_t cursor = 0;
	do {
		char line[96];
		snprintf(line, sizeof line, "SCAN %" PRIu64 " MATCH s* COUNT 3",
			 cursor);
		cursor = parse_scan(kvt_run(kv, line), count_key);
	} while (cursor != 0);
	cr_assert_eq(total_seen, 100);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(stable_seen[i], 1);
	/* A big COUNT returns everything at once. */
	total_seen = 0;
	cr_assert_eq(parse_scan(kvt_run(kv, "SCAN 0 COUNT 100000"), count_key),
		     0);
	cr_assert_eq(total_seen, 200);
}

static struct baton_buf order_a;

static void record(const char *key, size_t len)
{
	baton_buf_append(&order_a, key, len);
	baton_buf_append(&order_a, ",", 1);
}

Test(scan, order_depends_on_the_keys_alone)
{
	/* One map grew big and shrank back; the other never grew. */
	for (int i = 0; i < 50000; i++)
		set_key('x', i);
	for (int i = 0; i < 300; i++)
		set_key('s', i);
	for (int i = 0; i < 50000; i++)
		del_key('x', i);
	struct baton_kv *other = kvt_new();
	for (int i = 299; i >= 0; i--) {
		char line[64];
		snprintf(line, sizeof line, "SET s%d v", i);
		kvt_run(other, line);
	}
	cr_assert_neq(kv->table.size, other->table.size);
	char a[1 << 14], b[1 << 14];
	snprintf(a, sizeof a, "%s", kvt_run(kv, "KEYS *"));
	snprintf(b, sizeof b, "%s", kvt_run(other, "KEYS *"));
	cr_assert_str_eq(a, b);
	baton_buf_init(&order_a);
	parse_scan(kvt_run(kv, "SCAN 0 COUNT 1000000"), record);
	struct baton_buf first = order_a;
	baton_buf_init(&order_a);
	parse_scan(kvt_run(other, "SCAN 0 COUNT 1000000"), record);
	cr_assert_eq(first.len, order_a.len);
	cr_assert_eq(memcmp(first.data, order_a.data, first.len), 0);
	baton_buf_free(&first);
	baton_buf_free(&order_a);
	kv_destroy(other);
}
