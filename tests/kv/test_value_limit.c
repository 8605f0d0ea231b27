/*
 * The value limit (value_limit.h): the leader's check of what a write
 * leaves, counting the writes in flight; and the long values that
 * snapshots and exports write in parts, so a step stays near its budget
 * whatever one value's size, with the same bytes (snapshot) and the same
 * map (export, imported) as in one piece.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "resp.h"
#include "value_limit.h"

#define LIMIT ((uint64_t)100 << 10)
#define BIG_BYTES ((size_t)3 << 20)
#define BUDGET ((size_t)64 << 10)
#define T0 1700000000000ull

static const char too_big[] = "-" KV_ERR_VALUE_TOO_BIG "\r\n";

/* ---- the leader's check ---- */

struct line {
	int argc;
	const uint8_t *argv[8];
	size_t lens[8];
};

/* A command of words; "#N" stands for N bytes of 'x'. */
static struct kv_txn_command cmd(struct line *l, const char *const *words)
{
	static uint8_t xs[LIMIT * 2];
	memset(xs, 'x', sizeof xs);
	l->argc = 0;
	for (; *words != NULL; words++, l->argc++) {
		const char *w = *words;
		l->argv[l->argc] = w[0] == '#' ? xs : (const uint8_t *)w;
		l->lens[l->argc] =
			w[0] == '#' ? strtoull(w + 1, NULL, 10) : strlen(w);
	}
	return (struct kv_txn_command){l->argc, l->argv, l->lens};
}

static int claim1(struct kv_limit *l, struct baton_kv *kv,
		  const char *const *words, struct kv_limit_claim *c,
		  struct baton_buf *err)
{
	struct line ln;
	struct kv_txn_command t = cmd(&ln, words);
	return kv_limit_claim(l, kv, false, 1, &t, c, err);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

static bool refused_too_big(const struct baton_buf *err)
{
	return err->len == strlen(too_big) &&
	       memcmp(err->data, too_big, err->len) == 0;
}

Test(value_limit, fixed_lengths_refused)
{
	struct baton_kv *kv = kvt_new();
	struct kv_limit l = {.max = LIMIT};
	struct kv_limit_claim c;
	struct baton_buf err;
	baton_buf_init(&err);
	const char *const *bad[] = {
		W("SET", "k", "#102401"),
		W("SETEX", "k", "10", "#102401"),
		W("GETSET", "k", "#102401"),
		W("MSET", "a", "1", "b", "#102401"),
		W("HSET", "h", "f", "#102401"),
		W("HSET", "h", "#102401", "v"),
		W("SETRANGE", "k", "500000000", "x"),
		W("SETRANGE", "k", "102400", "x"),
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		baton_buf_reset(&err);
		cr_assert_eq(claim1(&l, kv, bad[i], &c, &err), BATON_EINVAL,
			     "case %zu", i);
		cr_assert(refused_too_big(&err), "case %zu", i);
		cr_assert_eq(c.n, 0);
		cr_assert_eq(kv_limit_pending(&l), 0, "case %zu held", i);
	}
	/* At the limit: fine, and held until released. */
	baton_buf_reset(&err);
	cr_assert_eq(claim1(&l, kv, W("SET", "k", "#102400"), &c, &err), 0);
	cr_assert_eq(err.len, 0);
	cr_assert_eq(kv_limit_pending(&l), 1);
	kv_limit_release(&l, &c);
	cr_assert_eq(kv_limit_pending(&l), 0);
	cr_assert_eq(
		claim1(&l, kv, W("SETRANGE", "k", "102399", "x"), &c, &err), 0);
	kv_limit_release(&l, &c);
	/* SETRANGE of nothing changes nothing, whatever the offset. */
	cr_assert_eq(
		claim1(&l, kv, W("SETRANGE", "k", "900000000", ""), &c, &err),
		0);
	kv_limit_release(&l, &c);
	kv_limit_free(&l);
	baton_buf_free(&err);
	kv_destroy(kv);
}

Test(value_limit, appends_in_flight_count)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(3, T0);
	struct kv_limit l = {.max = LIMIT};
	struct kv_limit_claim a, b, c;
	struct baton_buf err;
	baton_buf_init(&err);
	/* 60 KiB applied; two APPENDs of 30 KiB each fit the map alone. */
	const char *argv[] = {"SET", "k", NULL};
	static uint8_t v60[60 << 10];
	memset(v60, 'y', sizeof v60);
	size_t lens[] = {3, 1, sizeof v60};
	argv[2] = (const char *)v60;
	kvt_runv(kv, 3, argv, lens);
	cr_assert_eq(kv_value_len(kv, (const uint8_t *)"k", 1), sizeof v60);
	cr_assert_eq(claim1(&l, kv, W("APPEND", "k", "#30720"), &a, &err), 0);
	cr_assert_eq(claim1(&l, kv, W("APPEND", "k", "#30720"), &b, &err),
		     BATON_EINVAL,
		     "the first APPEND in flight was not counted");
	cr_assert(refused_too_big(&err));
	/* A SET in flight resets the bound: an APPEND after it fits. */
	baton_buf_reset(&err);
	cr_assert_eq(claim1(&l, kv, W("SET", "k", "#10"), &b, &err), 0);
	cr_assert_eq(claim1(&l, kv, W("APPEND", "k", "#90000"), &c, &err), 0);
	kv_limit_release(&l, &c);
	kv_limit_release(&l, &b);
	kv_limit_release(&l, &a);
	cr_assert_eq(kv_limit_pending(&l), 0);
	/* RENAME carries the source's bound to the destination. */
	cr_assert_eq(claim1(&l, kv, W("RENAME", "k", "d"), &a, &err), 0);
	cr_assert_eq(claim1(&l, kv, W("APPEND", "d", "#51200"), &b, &err),
		     BATON_EINVAL);
	kv_limit_release(&l, &a);
	/* A write held as a payload (a new leader's) is claimed the same. */
	struct baton_buf pl;
	baton_buf_init(&pl);
	struct line ln;
	struct kv_txn_command t = cmd(&ln, W("APPEND", "k", "#40000"));
	cr_assert_eq(kv_encode_v2(T0, t.argc, t.argv, t.lens, &pl), 0);
	cr_assert_eq(claim1(&l, kv, W("APPEND", "k", "#2000"), &a, &err), 0);
	baton_buf_reset(&err);
	cr_assert_eq(kv_limit_claim_payload(&l, kv, pl.data, pl.len, &b, &err),
		     BATON_EINVAL);
	cr_assert(refused_too_big(&err));
	kv_limit_release(&l, &a);
	cr_assert_eq(kv_limit_claim_payload(&l, kv, pl.data, pl.len, &b, &err),
		     0);
	cr_assert_eq(b.n, 1);
	kv_limit_release(&l, &b);
	baton_buf_reset(&pl);
	struct line l2;
	struct kv_txn_command tx[2] = {cmd(&ln, W("SET", "t", "#60000")),
				       cmd(&l2, W("APPEND", "t", "#60000"))};
	cr_assert_eq(kv_encode_txn(T0, 0, NULL, 2, tx, &pl), 0);
	cr_assert_eq(kv_limit_claim_payload(&l, kv, pl.data, pl.len, &b, &err),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_sweep(T0, 10, &pl), 0);
	cr_assert_eq(kv_limit_claim_payload(&l, kv, pl.data, pl.len, &b, &err),
		     BATON_ECORRUPT, "two payloads in one buffer");
	baton_buf_free(&pl);
	cr_assert_eq(kv_limit_pending(&l), 0);
	kv_limit_free(&l);
	baton_buf_free(&err);
	kv_destroy(kv);
}

Test(value_limit, transaction_refused_whole)
{
	struct baton_kv *kv = kvt_new();
	struct kv_limit l = {.max = LIMIT};
	struct kv_limit_claim c;
	struct baton_buf err;
	baton_buf_init(&err);
	struct line l1, l2, l3;
	struct kv_txn_command t[3] = {cmd(&l1, W("SET", "o", "1")),
				      cmd(&l2, W("SET", "t", "#60000")),
				      cmd(&l3, W("APPEND", "t", "#60000"))};
	cr_assert_eq(kv_limit_claim(&l, kv, true, 3, t, &c, &err),
		     BATON_EINVAL);
	const char want[] = "-EXECABORT Transaction discarded because of: "
			    "string exceeds maximum allowed size "
			    "(proto-max-bulk-len)\r\n";
	cr_assert_eq(err.len, strlen(want));
	cr_assert(memcmp(err.data, want, err.len) == 0);
	cr_assert_eq(kv_limit_pending(&l), 0, "a refused claim held keys");
	cr_assert_eq(kv_limit_claim(&l, kv, true, 2, t, &c, &err), 0);
	cr_assert_eq(c.n, 2);
	kv_limit_release(&l, &c);
	kv_limit_free(&l);
	baton_buf_free(&err);
	kv_destroy(kv);
}

Test(value_limit, longest_value)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(3, T0);
	kvt_run(kv, "SET a 12345");
	kvt_run(kv, "HSET h abcdefghijklmnopqrs v");
	cr_assert_eq(kv_value_len_max(kv), 19);
	kvt_run(kv, "HSET h f abcdefghijklmnopqrst");
	cr_assert_eq(kv_value_len_max(kv), 20);
	kv_destroy(kv);
}

/* ---- values in parts ---- */

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

/* A map of small keys around one BIG_BYTES value with an expiry. */
static struct baton_kv *map_with_big_value(uint8_t **big)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(3, T0);
	*big = malloc(BIG_BYTES);
	cr_assert_not_null(*big);
	for (size_t i = 0; i < BIG_BYTES; i++)
		(*big)[i] = (uint8_t)(i * 7 + i / 4096);
	const char *argv[] = {"SET", "big", (const char *)*big};
	size_t lens[] = {3, 3, BIG_BYTES};
	cr_assert_str_eq(kvt_runv(kv, 3, argv, lens), "+OK\r\n");
	kvt_run(kv, "PEXPIREAT big 1800000000000");
	char line[64];
	for (int i = 0; i < 200; i++) {
		snprintf(line, sizeof line, "SET k%d value-%d", i, i);
		kvt_run(kv, line);
	}
	kvt_run(kv, "HSET h a 1 b 2");
	return kv;
}

Test(value_limit, snapshot_steps_slice_inside_a_value)
{
	uint8_t *big;
	struct baton_kv *kv = map_with_big_value(&big);
	struct baton_buf whole, steps, one;
	baton_buf_init(&steps);
	baton_buf_init(&one);
	baton_buf_init(&whole);
	kvt_snapshot(kv, &whole);
	struct baton_machine_version v = {3};
	cr_assert_eq(kv_snapshot_begin(kv, v), 0);
	bool done = false;
	int n = 0;
	size_t largest = 0;
	while (!done) {
		baton_buf_reset(&one);
		cr_assert_eq(kv_snapshot_step(kv, BUDGET, sink, &one, &done),
			     0);
		largest = one.len > largest ? one.len : largest;
		cr_assert_eq(baton_buf_append(&steps, one.data, one.len), 0);
		if (++n == 3) /* mid-value: the key changes under the view */
			kvt_run(kv, "SET big overwritten");
	}
	kv_snapshot_end(kv);
	/* Before parts, the value went out whole in one step. */
	cr_assert_leq(largest, BUDGET + (16u << 10), "a step of %zu bytes",
		      largest);
	cr_assert_geq(n, (int)(BIG_BYTES / BUDGET));
	cr_assert_eq(steps.len, whole.len);
	cr_assert(memcmp(steps.data, whole.data, whole.len) == 0);
	baton_buf_free(&whole);
	baton_buf_free(&steps);
	baton_buf_free(&one);
	free(big);
	kv_destroy(kv);
}

/* Apply a migration payload under version 3; expect +OK. */
static void apply_ok(struct baton_kv *kv, struct baton_buf *p)
{
	struct baton_buf reply;
	baton_buf_init(&reply);
	cr_assert_eq(kv_apply(kv, (struct baton_machine_version){3}, p->data,
			      p->len, &reply),
		     0);
	cr_assert(reply.len >= 3 && memcmp(reply.data, "+OK", 3) == 0,
		  "reply %.*s", (int)reply.len, (const char *)reply.data);
	baton_buf_free(&reply);
	baton_buf_reset(p);
}

Test(value_limit, export_in_parts_imports_the_same_map)
{
	uint8_t *big;
	struct baton_kv *old = map_with_big_value(&big);
	struct baton_kv *imp = kvt_new();
	kvt_use(3, T0); /* kvt_new went back to version 1 */
	struct baton_buf records, payload, a, b;
	baton_buf_init(&records);
	baton_buf_init(&payload);
	baton_buf_init(&a);
	baton_buf_init(&b);
	cr_assert_eq(
		kv_encode_import_begin(7, kv_machine_time_ms(old), &payload),
		0);
	apply_ok(imp, &payload);
	cr_assert_eq(kv_export_begin(old), 0);
	bool done = false;
	uint32_t seq = 0;
	size_t largest = 0;
	while (!done) {
		baton_buf_reset(&records);
		cr_assert_eq(kv_export_step(old, BUDGET, &records, &done), 0);
		largest = records.len > largest ? records.len : largest;
		if (seq == 2) /* mid-value: the key changes under the view */
			kvt_run(old, "APPEND big tail");
		if (records.len == 0)
			continue;
		cr_assert_eq(kv_encode_import_chunk(7, seq++, records.data,
						    records.len, &payload),
			     0);
		apply_ok(imp, &payload);
	}
	kv_export_end(old);
	cr_assert_leq(largest, BUDGET + (16u << 10), "a chunk of %zu bytes",
		      largest);
	cr_assert_eq(kv_encode_import_end(7, seq, &payload), 0);
	apply_ok(imp, &payload);
	/* The imported map is the old one as it was at begin. */
	kvt_run(old, "SET big x");
	const char *argv[] = {"SET", "big", (const char *)big};
	size_t lens[] = {3, 3, BIG_BYTES};
	kvt_runv(old, 3, argv, lens);
	kvt_run(old, "PEXPIREAT big 1800000000000");
	cr_assert_eq(kv_value_len(imp, (const uint8_t *)"big", 3), BIG_BYTES);
	kvt_snapshot(old, &a);
	kvt_snapshot(imp, &b);
	cr_assert_eq(kv_dbsize(imp), kv_dbsize(old));
	cr_assert_eq(kv_machine_time_ms(imp), kv_machine_time_ms(old));
	/* The same entries; the importer's snapshot then has its migration
	 * section where the old one's has its checksum. */
	cr_assert_gt(b.len, a.len);
	cr_assert(memcmp(a.data, b.data, a.len - 8) == 0);
	cr_assert(memcmp(b.data + a.len - 8, "MIGR", 4) == 0);
	baton_buf_free(&records);
	baton_buf_free(&payload);
	baton_buf_free(&a);
	baton_buf_free(&b);
	free(big);
	kv_destroy(old);
	kv_destroy(imp);
}

Test(value_limit, pieces_checked_and_skipped)
{
	/* A piece past the machine's limit is corrupt; a head whose piece
	 * is longer than its value too. */
	uint8_t rec[64];
	size_t n = 0;
	rec[n++] = 4;
	baton_le_put_u32(rec + n, 1);
	n += 4;
	rec[n++] = 'k';
	baton_le_put_u64(rec + n, KV_VALUE_BYTES_MAX);
	n += 8;
	baton_le_put_u32(rec + n, 1);
	n += 4;
	rec[n++] = 'x';
	cr_assert_eq(kv__records_check(rec, n), BATON_ECORRUPT);
	baton_le_put_u64(rec + 6, 5);
	cr_assert_eq(kv__records_check(rec, n), 0);
	rec[0] = 3; /* a head: value of 5 bytes, piece of 1, then expiry */
	uint8_t at[8] = {0};
	memcpy(rec + n, at, 8);
	cr_assert_eq(kv__records_check(rec, n + 8), 0);
	baton_le_put_u64(rec + 6, 0); /* a value shorter than its piece */
	cr_assert_eq(kv__records_check(rec, n + 8), BATON_ECORRUPT);
	/* A piece for a key that is no string that long takes nothing. */
	struct baton_kv *imp = kvt_new();
	kvt_use(3, T0);
	struct baton_buf p;
	baton_buf_init(&p);
	cr_assert_eq(kv_encode_import_begin(3, T0, &p), 0);
	apply_ok(imp, &p);
	rec[0] = 4;
	baton_le_put_u64(rec + 6, 2);
	cr_assert_eq(kv_encode_import_chunk(3, 0, rec, n, &p), 0);
	apply_ok(imp, &p);
	cr_assert_eq(kv_dbsize(imp), 0);
	/* More fields for a key that is no hash: nothing either. */
	uint8_t more[] = {5, 1, 0, 0, 0, 'k', 1,   0, 0, 0, 0, 0,
			  0, 0, 1, 0, 0, 0,   'f', 1, 0, 0, 0, 'v'};
	cr_assert_eq(kv__records_check(more, sizeof more), 0);
	cr_assert_eq(kv__records_check(more, sizeof more - 1), BATON_ECORRUPT);
	cr_assert_eq(kv_encode_import_chunk(3, 1, more, sizeof more, &p), 0);
	apply_ok(imp, &p);
	cr_assert_eq(kv_dbsize(imp), 0);
	baton_buf_free(&p);
	kv_destroy(imp);
}

Test(value_limit, snapshot_steps_slice_inside_a_hash)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(3, T0);
	static char field_value[1024];
	memset(field_value, 'h', sizeof field_value);
	char field[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(field, sizeof field, "f%d", i);
		const char *argv[] = {"HSET", "big", field, field_value};
		size_t lens[] = {4, 3, strlen(field), sizeof field_value};
		kvt_runv(kv, 4, argv, lens);
	}
	kvt_run(kv, "PEXPIREAT big 1800000000000");
	kvt_run(kv, "SET a 1");
	kvt_run(kv, "SET z 2");
	struct baton_buf whole, steps, one;
	baton_buf_init(&whole);
	baton_buf_init(&steps);
	baton_buf_init(&one);
	kvt_snapshot(kv, &whole);
	cr_assert_eq(kv_snapshot_begin(kv, (struct baton_machine_version){3}),
		     0);
	bool done = false;
	int n = 0;
	size_t largest = 0;
	while (!done) {
		baton_buf_reset(&one);
		cr_assert_eq(kv_snapshot_step(kv, BUDGET, sink, &one, &done),
			     0);
		largest = one.len > largest ? one.len : largest;
		cr_assert_eq(baton_buf_append(&steps, one.data, one.len), 0);
		if (++n == 4) { /* mid-hash: it changes under the view */
			kvt_run(kv, "HSET big f1 changed new-field x");
			kvt_run(kv, "HDEL big f2999 f7");
		}
	}
	kv_snapshot_end(kv);
	cr_assert_leq(largest, BUDGET + (4u << 10), "a step of %zu bytes",
		      largest);
	cr_assert_geq(n, 3000 * 1024 / (int)BUDGET);
	cr_assert_eq(steps.len, whole.len);
	cr_assert(memcmp(steps.data, whole.data, whole.len) == 0);
	baton_buf_free(&whole);
	baton_buf_free(&steps);
	baton_buf_free(&one);
	kv_destroy(kv);
}

Test(value_limit, export_of_a_big_hash_in_parts_imports_the_same_map)
{
	struct baton_kv *old = kvt_new();
	struct baton_kv *imp = kvt_new();
	kvt_use(3, T0);
	static char field_value[1024];
	memset(field_value, 'h', sizeof field_value);
	char field[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(field, sizeof field, "f%d", i);
		const char *argv[] = {"HSET", "big", field, field_value};
		size_t lens[] = {4, 3, strlen(field), sizeof field_value};
		kvt_runv(old, 4, argv, lens);
	}
	kvt_run(old, "PEXPIREAT big 1800000000000");
	kvt_run(old, "HSET small a 1 b 2");
	struct baton_buf at_begin, records, payload, b;
	baton_buf_init(&at_begin);
	baton_buf_init(&records);
	baton_buf_init(&payload);
	baton_buf_init(&b);
	kvt_snapshot(old, &at_begin);
	cr_assert_eq(
		kv_encode_import_begin(9, kv_machine_time_ms(old), &payload),
		0);
	apply_ok(imp, &payload);
	cr_assert_eq(kv_export_begin(old), 0);
	bool done = false;
	uint32_t seq = 0;
	size_t largest = 0;
	while (!done) {
		baton_buf_reset(&records);
		cr_assert_eq(kv_export_step(old, BUDGET, &records, &done), 0);
		largest = records.len > largest ? records.len : largest;
		if (seq == 3) { /* mid-hash: it changes under the view */
			kvt_run(old, "HSET big f1 changed new-field x");
			kvt_run(old, "HDEL big f2999 f7");
		}
		if (records.len == 0)
			continue;
		cr_assert_eq(kv_encode_import_chunk(9, seq++, records.data,
						    records.len, &payload),
			     0);
		apply_ok(imp, &payload);
	}
	kv_export_end(old);
	cr_assert_geq(seq, 3000 * 1024 / (uint32_t)BUDGET);
	cr_assert_leq(largest, BUDGET + (4u << 10), "a chunk of %zu bytes",
		      largest);
	cr_assert_eq(kv_encode_import_end(9, seq, &payload), 0);
	apply_ok(imp, &payload);
	kvt_snapshot(imp, &b);
	cr_assert_gt(b.len, at_begin.len);
	cr_assert(memcmp(at_begin.data, b.data, at_begin.len - 8) == 0);
	baton_buf_free(&at_begin);
	baton_buf_free(&records);
	baton_buf_free(&payload);
	baton_buf_free(&b);
	kv_destroy(old);
	kv_destroy(imp);
}
