/*
 * Converting the map between machine versions (kv_convert, kv_convert_loss;
 * docs/kv.md, "Converting down"): down to version 1 every live key keeps
 * its value and loses its expiry, keys already expired are deleted,
 * machine time goes back to 0, and the result is the map a version-1
 * snapshot restores to; down from 3 every hash is deleted and the strings
 * stay as they were; the same content converts to the same bytes whatever
 * its history; up nothing changes.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"

static const struct baton_machine_version V1 = {1}, V2 = {2}, V3 = {3};
#define T0 1700000000000ull

static struct baton_kv *kv;

static void setup(void)
{
	kv = kvt_new();
}

static void teardown(void)
{
	kv_destroy(kv);
}

TestSuite(convert, .init = setup, .fini = teardown);

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

static void snap(const struct baton_kv *k, struct baton_machine_version v,
		 struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(kv_snapshot(k, v, sink, out), 0);
}

static void assert_same(const struct baton_buf *a, const struct baton_buf *b)
{
	cr_assert_eq(a->len, b->len, "%zu != %zu bytes", a->len, b->len);
	cr_assert_eq(memcmp(a->data, b->data, a->len), 0);
}

static void run(struct baton_kv *k, const char *line, const char *want)
{
	const char *got = kvt_run(k, line);
	cr_assert_str_eq(got, want, "%s: %s", line, got);
}

/* Under version 2 at T0: a persistent key, two keys with a live expiry,
 * and one that expired (not yet swept) once machine time moved on. */
static void fill(struct baton_kv *k)
{
	kvt_use(2, T0);
	run(k, "SET plain 1", "+OK\r\n");
	run(k, "SET soon 2 PX 50", "+OK\r\n");
	run(k, "SET later 3 EX 100", "+OK\r\n");
	run(k, "SET counter 7", "+OK\r\n");
	run(k, "PEXPIRE counter 200000", ":1\r\n");
	kvt_use(2, T0 + 1000);
	run(k, "SET other 4", "+OK\r\n"); /* machine time T0 + 1000 */
}

/* a and b hold the same state, as snapshots at v show it. */
static void assert_same_state(struct baton_kv *a, struct baton_kv *b,
			      struct baton_machine_version v)
{
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	snap(a, v, &sa);
	snap(b, v, &sb);
	assert_same(&sa, &sb);
	baton_buf_free(&sa);
	baton_buf_free(&sb);
}

Test(convert, down_keeps_live_keys_without_expiry)
{
	fill(kv);
	cr_assert_eq(kv_dbsize(kv), 5);
	cr_assert_eq(kv_expiry_count(kv), 3);
	cr_assert_eq(kv_convert_loss(kv, V2, V1), 2); /* 'soon' is gone */
	cr_assert_eq(kv_convert(kv, V2, V1), 0);
	cr_assert_eq(kv_dbsize(kv), 4);
	cr_assert_eq(kv_expiry_count(kv), 0);
	cr_assert_eq(kv_machine_time_ms(kv), 0);
	cr_assert_eq(kv_convert_loss(kv, V2, V1), 0);
	uint64_t at;
	cr_assert_not(kv_expiry_next(kv, &at));
	/* The values stay; version 1's commands see them. */
	kvt_use(1, 0);
	run(kv, "MGET plain soon later counter other",
	    "*5\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n$1\r\n7\r\n$1\r\n4\r\n");
	run(kv, "INCR counter", ":8\r\n");
	/* A version-1 snapshot can be taken (it cannot hold an expiry). */
	struct baton_buf s;
	baton_buf_init(&s);
	snap(kv, V1, &s);
	baton_buf_free(&s);
	/* Upgraded again later: no key comes back with an expiry. */
	cr_assert_eq(kv_convert(kv, V1, V2), 0);
	kvt_use(2, T0 + 500000);
	run(kv, "TTL later", ":-1\r\n");
	run(kv, "GET later", "$1\r\n3\r\n");
}

Test(convert, down_equals_a_version_1_snapshot_round_trip)
{
	fill(kv);
	cr_assert_eq(kv_convert(kv, V2, V1), 0);
	struct baton_buf a, b;
	baton_buf_init(&a);
	baton_buf_init(&b);
	/* A node that installs a snapshot taken after the entry. */
	snap(kv, V1, &a);
	struct baton_kv *restored = kvt_new();
	cr_assert_eq(kv_restore(restored, V1, a.data, a.len), 0);
	/* Compared as version 2 writes them (machine time and expiries
	 * included), so a later upgrade starts alike on both. */
	snap(kv, V2, &a);
	snap(restored, V2, &b);
	assert_same(&a, &b);
	kv_destroy(restored);
	baton_buf_free(&a);
	baton_buf_free(&b);
}

Test(convert, down_depends_on_content_not_history)
{
	/* Two replicas of the same content reached differently: one grew
	 * its table and dropped most keys again, the other set the
	 * expiries in another order. */
	struct baton_kv *other = kvt_new();
	kvt_use(2, T0);
	char line[96];
	for (int i = 0; i < 3000; i++) {
		snprintf(line, sizeof line, "SET tmp%d x PX %d", i, 10 + i);
		run(kv, line, "+OK\r\n");
	}
	for (int i = 0; i < 200; i++) {
		snprintf(line, sizeof line, "SET k%d v%d PX %d", i, i,
			 i % 2 ? 100 : 900000);
		run(kv, line, "+OK\r\n");
	}
	for (int i = 0; i < 3000; i++) {
		snprintf(line, sizeof line, "DEL tmp%d", i);
		run(kv, line, ":1\r\n");
	}
	for (int i = 199; i >= 0; i--) {
		snprintf(line, sizeof line, "SET k%d v%d", i, i);
		run(other, line, "+OK\r\n");
		snprintf(line, sizeof line, "PEXPIRE k%d %d", i,
			 i % 2 ? 100 : 900000);
		run(other, line, ":1\r\n");
	}
	kvt_use(2, T0 + 5000); /* the odd keys have expired */
	run(kv, "SET z 1", "+OK\r\n");
	run(other, "SET z 1", "+OK\r\n");
	cr_assert_eq(kv_convert_loss(kv, V2, V1), 100);
	cr_assert_eq(kv_convert_loss(other, V2, V1), 100);
	cr_assert_eq(kv_convert(kv, V2, V1), 0);
	cr_assert_eq(kv_convert(other, V2, V1), 0);
	cr_assert_eq(kv_dbsize(kv), 101);
	assert_same_state(kv, other, V2);
	kv_destroy(other);
}

/* Converting `kv` from each of froms[] up to `to` (or to the same
 * version) loses nothing and changes nothing, snapshot at `to` compared. */
static void assert_up_changes_nothing(struct baton_machine_version to,
				      const struct baton_machine_version *froms,
				      int n)
{
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	snap(kv, to, &before);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(kv_convert_loss(kv, froms[i], to), 0);
		cr_assert_eq(kv_convert(kv, froms[i], to), 0);
	}
	snap(kv, to, &after);
	assert_same(&before, &after);
	cr_assert_eq(kv_machine_time_ms(kv), T0 + 1000);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(convert, up_and_same_version_change_nothing)
{
	fill(kv);
	const struct baton_machine_version froms[] = {V1, V2};
	assert_up_changes_nothing(V2, froms, 2);
}

Test(convert, unknown_versions_are_refused_unchanged)
{
	fill(kv);
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	snap(kv, V2, &before);
	const struct baton_machine_version v0 = {0}, v4 = {4};
	cr_assert_eq(kv_convert(kv, v4, V1), BATON_EVERSION);
	cr_assert(strstr(kv_errmsg(kv), "from machine version 4 to 1") != NULL);
	cr_assert_eq(kv_convert(kv, V2, v0), BATON_EVERSION);
	snap(kv, V2, &after);
	assert_same(&before, &after);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(convert, empty_map_and_no_expiry)
{
	cr_assert_eq(kv_convert_loss(kv, V2, V1), 0);
	cr_assert_eq(kv_convert(kv, V2, V1), 0);
	cr_assert_eq(kv_dbsize(kv), 0);
	kvt_use(2, T0);
	run(kv, "SET a 1", "+OK\r\n");
	cr_assert_eq(kv_convert_loss(kv, V2, V1), 0);
	cr_assert_eq(kv_convert(kv, V2, V1), 0);
	cr_assert_eq(kv_dbsize(kv), 1);
	cr_assert_eq(kv_machine_time_ms(kv), 0);
}

/* ---- from machine version 3 ---- */

/* fill(), then under version 3: hashes, one with a live expiry and one
 * expired (not yet swept), and a string that replaced a hash. */
static void fill3(struct baton_kv *k)
{
	fill(k);
	kvt_use(3, T0 + 1000);
	run(k, "HSET h1 a 1 b 2", ":2\r\n");
	run(k, "HSET h2 a 1", ":1\r\n");
	run(k, "EXPIRE h2 100", ":1\r\n");
	run(k, "HSET gone a 1", ":1\r\n");
	run(k, "PEXPIRE gone 10", ":1\r\n");
	run(k, "HSET was a 1", ":1\r\n");
	run(k, "SET was string", "+OK\r\n");
	kvt_use(3, T0 + 1100); /* 'gone' has expired */
	run(k, "SET other 5", "+OK\r\n");
}

/* The strings of fill3() alone, written under version 2. */
static void fill3_strings(struct baton_kv *k)
{
	fill(k);
	kvt_use(2, T0 + 1000);
	run(k, "SET was string", "+OK\r\n");
	kvt_use(2, T0 + 1100);
	run(k, "SET other 5", "+OK\r\n");
}

Test(convert, down_from_3_deletes_hashes_and_keeps_strings)
{
	fill3(kv);
	struct baton_buf s;
	baton_buf_init(&s);
	cr_assert_eq(kv_snapshot(kv, V2, sink, &s), BATON_EVERSION);
	/* Lost: the two live hashes ('gone' is absent already). */
	cr_assert_eq(kv_convert_loss(kv, V3, V2), 2);
	char text[256];
	kv_convert_loss_text(kv, V3, V2, text, sizeof text);
	cr_assert_str_eq(text, "2 keys are hashes, which machine version 2 "
			       "cannot hold; with FORCE they are deleted");
	cr_assert_eq(kv_convert(kv, V3, V2), 0);
	cr_assert_eq(kv->table.hashes, 0);
	cr_assert_eq(kv_convert_loss(kv, V3, V2), 0);
	kv_convert_loss_text(kv, V3, V2, text, sizeof text);
	cr_assert_str_eq(text, "");
	cr_assert_eq(kv_machine_time_ms(kv), T0 + 1100);
	/* Exactly the strings, expiries and machine time included. */
	struct baton_kv *want = kvt_new();
	fill3_strings(want);
	struct baton_buf w;
	baton_buf_init(&w);
	snap(kv, V2, &s);
	snap(want, V2, &w);
	assert_same(&s, &w);
	kvt_use(2, T0 + 1200);
	run(kv, "TTL later", ":99\r\n");
	/* Upgraded again: no hash comes back. */
	cr_assert_eq(kv_convert(kv, V2, V3), 0);
	kvt_use(3, T0 + 1200);
	run(kv, "TYPE h1", "+none\r\n");
	run(kv, "TYPE was", "+string\r\n");
	kv_destroy(want);
	baton_buf_free(&s);
	baton_buf_free(&w);
}

Test(convert, down_from_3_to_1_deletes_hashes_and_drops_expiries)
{
	fill3(kv);
	/* 2 live hashes; 'later' and 'counter' have a TTL ('soon' expired,
	 * h2's TTL goes with it). */
	cr_assert_eq(kv_convert_loss(kv, V3, V1), 4);
	char text[256];
	kv_convert_loss_text(kv, V3, V1, text, sizeof text);
	cr_assert_str_eq(text,
			 "2 keys are hashes, which machine version 1 cannot "
			 "hold, and 2 other keys have a TTL that machine "
			 "version 1 cannot keep; with FORCE the hashes are "
			 "deleted and the keys with a TTL become persistent");
	cr_assert_eq(kv_convert(kv, V3, V1), 0);
	cr_assert_eq(kv_expiry_count(kv), 0);
	cr_assert_eq(kv->table.hashes, 0);
	cr_assert_eq(kv_machine_time_ms(kv), 0);
	/* The same as the strings converted from version 2. */
	struct baton_kv *want = kvt_new();
	fill3_strings(want);
	cr_assert_eq(kv_convert(want, V2, V1), 0);
	assert_same_state(kv, want, V1);
	kv_destroy(want);
}

Test(convert, loss_texts_in_the_singular)
{
	kvt_use(3, T0);
	run(kv, "HSET h a 1", ":1\r\n");
	char text[256];
	kv_convert_loss_text(kv, V3, V2, text, sizeof text);
	cr_assert_str_eq(text, "1 key is a hash, which machine version 2 "
			       "cannot hold; with FORCE it is deleted");
	run(kv, "SET s 1 EX 10", "+OK\r\n");
	kv_convert_loss_text(kv, V3, V1, text, sizeof text);
	cr_assert(strstr(text, "1 key is a hash") != NULL, "%s", text);
	cr_assert(strstr(text, "1 other key has a TTL") != NULL, "%s", text);
	run(kv, "DEL h", ":1\r\n");
	kv_convert_loss_text(kv, V3, V1, text, sizeof text);
	cr_assert_str_eq(text, "1 key has a TTL that machine version 1 "
			       "cannot keep; with FORCE it becomes "
			       "persistent");
	/* Cut to the room given, always terminated. */
	kv_convert_loss_text(kv, V3, V1, text, 8);
	cr_assert_str_eq(text, "1 key h");
}

Test(convert, down_from_3_on_a_big_map_whatever_its_history)
{
	/* Thousands of hashes among strings: deleting them shrinks the
	 * table while the walk goes on. The other map holds the same
	 * content reached in another order. */
	struct baton_kv *other = kvt_new();
	kvt_use(3, T0);
	char line[96];
	for (int i = 0; i < 6000; i++) {
		snprintf(line, sizeof line,
			 i % 6 == 0 ? "SET k%d v" : "HSET k%d f v", i);
		kvt_run(kv, line);
	}
	for (int i = 5999; i >= 0; i -= 6) {
		snprintf(line, sizeof line, "SET k%d v", i - 5);
		kvt_run(other, line);
	}
	cr_assert_eq(kv_convert_loss(kv, V3, V2), 5000);
	cr_assert_eq(kv_convert(kv, V3, V2), 0);
	cr_assert_eq(kv_convert(other, V3, V2), 0);
	cr_assert_eq(kv_dbsize(kv), 1000);
	cr_assert_lt(kv->table.size, 4096u); /* it shrank */
	assert_same_state(kv, other, V2);
	kv_destroy(other);
}

Test(convert, up_to_3_changes_nothing)
{
	fill(kv);
	const struct baton_machine_version froms[] = {V2, V1, V3};
	assert_up_changes_nothing(V3, froms, 3);
}

Test(convert, an_open_keys_lists_the_hashes_converted_away)
{
	fill3(kv);
	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"h*", 2), 0);
	cr_assert_eq(kv_convert(kv, V3, V2), 0);
	struct baton_buf bulks;
	baton_buf_init(&bulks);
	uint64_t matched = 0;
	bool done = false;
	while (!done)
		cr_assert_eq(kv_keys_step(kv, 1, &bulks, &matched, &done), 0);
	kv_keys_end(kv);
	cr_assert_eq(matched, 2); /* h1 and h2, as at begin */
	cr_assert_eq(kv_dbsize(kv), 6);
	baton_buf_free(&bulks);
}
