/*
 * Machine version 3's formats and conversions: hash writes in format-2
 * payloads (round trip), snapshot format 3 (golden layout, round trips
 * with hashes, strings and expiries, older formats restored, refusals,
 * damage), incremental snapshots and KEYS while hashes change under them,
 * converting 3 -> 2, 3 -> 1 and 2 -> 3 (docs/kv.md, "Converting down"),
 * and random version-3 payloads (hash, string and key commands) applied to
 * replicas that must agree byte for byte, one of them restored half-way.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "resp.h"

static const struct baton_machine_version V1 = {1}, V2 = {2}, V3 = {3};
#define T0 1700000000000ull

static struct baton_kv *kv;
/* The stamp of the writes kvt_run() makes (machine time moves with it). */
static uint64_t stamp;

/* A fresh map, the helpers still under version 3 (kvt_new resets them). */
static struct baton_kv *fresh(void)
{
	struct baton_kv *k = kvt_new();
	kvt_use(3, stamp);
	return k;
}

static void setup(void)
{
	stamp = T0;
	kv = fresh();
}

static void teardown(void)
{
	kv_destroy(kv);
}

TestSuite(v3, .init = setup, .fini = teardown);
TestSuite(snap3, .init = setup, .fini = teardown);
TestSuite(convert3, .init = setup, .fini = teardown);

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

static void snap(const struct baton_kv *k, struct baton_machine_version v,
		 struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(kv_snapshot(k, v, sink, out), 0, "%s", kv_errmsg(k));
}

static void assert_same_bytes(const struct baton_buf *a,
			      const struct baton_buf *b)
{
	cr_assert_eq(a->len, b->len, "%zu bytes, not %zu", a->len, b->len);
	cr_assert_eq(memcmp(a->data, b->data, a->len), 0, "the bytes differ");
}

/* Both maps' version-3 snapshots are the same bytes. */
static void assert_same(const struct baton_kv *a, const struct baton_kv *b)
{
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	snap(a, V3, &sa);
	snap(b, V3, &sb);
	assert_same_bytes(&sa, &sb);
	baton_buf_free(&sa);
	baton_buf_free(&sb);
}

/* Move machine time to ms with a sweep of max_keys keys. */
static void sweep_at(struct baton_kv *k, uint64_t ms, uint32_t max_keys)
{
	struct baton_buf b, r;
	baton_buf_init(&b);
	baton_buf_init(&r);
	cr_assert_eq(kv_encode_sweep(ms, max_keys, &b), 0);
	cr_assert_eq(kv_apply(k, V3, b.data, b.len, &r), 0);
	stamp = ms;
	kvt_use(3, ms);
	baton_buf_free(&b);
	baton_buf_free(&r);
}

/* ---- payloads ---- */

Test(v3, hash_writes_round_trip_through_format_2)
{
	const uint8_t field[] = {0, 'f', '\r', '\n', 0xff};
	const uint8_t *argv[] = {(const uint8_t *)"HSET", (const uint8_t *)"h",
				 field, (const uint8_t *)""};
	size_t lens[] = {4, 1, sizeof field, 0};
	struct baton_buf p;
	baton_buf_init(&p);
	cr_assert_eq(kv_encode_v2(T0 + 1, 4, argv, lens, &p), 0);
	struct kv__decoded d;
	cr_assert_eq(kv__decode(p.data, p.len, &d), 0);
	cr_assert_eq(d.format, 2);
	cr_assert_eq(d.kind, KV_KIND_COMMAND);
	cr_assert_eq(d.stamp_ms, (int64_t)(T0 + 1));
	cr_assert_eq(d.cmd.args.argc, 4);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(d.cmd.args.lens[i], lens[i]);
		cr_assert_eq(memcmp(d.cmd.args.argv[i], argv[i], lens[i]), 0);
	}
	kv__decoded_free(&d);
	/* Applied, the field is binary-safe. */
	struct baton_buf r;
	baton_buf_init(&r);
	cr_assert_eq(kv_apply(kv, V3, p.data, p.len, &r), 0);
	cr_assert_eq(r.len, 4);
	cr_assert_eq(memcmp(r.data, ":1\r\n", 4), 0);
	const uint8_t *get[] = {(const uint8_t *)"HEXISTS",
				(const uint8_t *)"h", field};
	size_t get_lens[] = {7, 1, sizeof field};
	baton_buf_reset(&r);
	cr_assert_eq(kv_read(kv, 3, get, get_lens, &r), 0);
	cr_assert_eq(memcmp(r.data, ":1\r\n", 4), 0);
	baton_buf_free(&p);
	baton_buf_free(&r);
}

/* ---- snapshot format 3 ---- */

/* "SET s ab PXAT T0+5000" and "HSET h f1 x f2 yz" at machine time T0:
 * the header (machine time, 2 keys), then h (type 2: 2 fields, f1 x and
 * f2 yz, no expiry) and s (type 1: ab, expiry T0 + 5000) in canonical
 * order, then the checksum. */
static const uint8_t golden_v3[] = {
	0x42, 0x4b, 0x56, 0x53, 0x03, 0x00, 0x00, 0x00, 0x00, 0x68, 0xe5,
	0xcf, 0x8b, 0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x68, 0x02, 0x02, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x66, 0x31,
	0x01, 0x00, 0x00, 0x00, 0x78, 0x02, 0x00, 0x00, 0x00, 0x66, 0x32,
	0x02, 0x00, 0x00, 0x00, 0x79, 0x7a, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x73, 0x01, 0x02, 0x00,
	0x00, 0x00, 0x61, 0x62, 0x88, 0x7b, 0xe5, 0xcf, 0x8b, 0x01, 0x00,
	0x00, 0xfc, 0x9f, 0xaa, 0x44, 0xc3, 0x51, 0x16, 0xd0,
};

static void golden_map(struct baton_kv *k)
{
	char line[64];
	snprintf(line, sizeof line, "SET s ab PXAT %llu",
		 (unsigned long long)(T0 + 5000));
	cr_assert_str_eq(kvt_run(k, line), "+OK\r\n");
	cr_assert_str_eq(kvt_run(k, "HSET h f1 x f2 yz"), ":2\r\n");
}

static void put_u32(struct baton_buf *b, uint32_t v)
{
	uint8_t x[4];
	baton_le_put_u32(x, v);
	cr_assert_eq(baton_buf_append(b, x, 4), 0);
}

static void put_u64(struct baton_buf *b, uint64_t v)
{
	uint8_t x[8];
	baton_le_put_u64(x, v);
	cr_assert_eq(baton_buf_append(b, x, 8), 0);
}

static void put_str(struct baton_buf *b, const char *s)
{
	put_u32(b, (uint32_t)strlen(s));
	cr_assert_eq(baton_buf_append(b, s, strlen(s)), 0);
}

static void put_u8(struct baton_buf *b, uint8_t v)
{
	cr_assert_eq(baton_buf_append(b, &v, 1), 0);
}

/* Append the checksum of everything in b. */
static void seal(struct baton_buf *b)
{
	put_u64(b, baton__checksum(b->data, b->len));
}

/* Does (a) sort before (b) in the canonical order? */
static bool before(const char *a, const char *b)
{
	return kv__position_cmp(kv__hash((const uint8_t *)a, strlen(a)),
				(const uint8_t *)a, strlen(a),
				kv__hash((const uint8_t *)b, strlen(b)),
				(const uint8_t *)b, strlen(b)) < 0;
}

Test(snap3, golden_layout)
{
	golden_map(kv);
	struct baton_buf got, want;
	baton_buf_init(&got);
	baton_buf_init(&want);
	snap(kv, V3, &got);
	/* The layout, built by its rule. */
	cr_assert_eq(baton_buf_append(&want, "BKVS", 4), 0);
	put_u32(&want, 3);
	put_u64(&want, T0);
	put_u64(&want, 2);
	bool h_first = before("h", "s");
	bool f1_first = before("f1", "f2");
	for (int i = 0; i < 2; i++) {
		if ((i == 0) == h_first) {
			put_str(&want, "h");
			put_u8(&want, 2);
			put_u64(&want, 2);
			put_str(&want, f1_first ? "f1" : "f2");
			put_str(&want, f1_first ? "x" : "yz");
			put_str(&want, f1_first ? "f2" : "f1");
			put_str(&want, f1_first ? "yz" : "x");
			put_u64(&want, 0);
		} else {
			put_str(&want, "s");
			put_u8(&want, 1);
			put_str(&want, "ab");
			put_u64(&want, T0 + 5000);
		}
	}
	seal(&want);
	assert_same_bytes(&got, &want);
	/* And the golden bytes, which must restore forever. */
	cr_assert_eq(got.len, sizeof golden_v3);
	cr_assert_eq(memcmp(got.data, golden_v3, got.len), 0);
	struct baton_kv *copy = fresh();
	cr_assert_eq(kv_restore(copy, V3, golden_v3, sizeof golden_v3), 0);
	assert_same(kv, copy);
	cr_assert_eq(kv_machine_time_ms(copy), T0);
	cr_assert_eq(kv_expiry_count(copy), 1);
	cr_assert_eq(copy->table.hashes, 1);
	/* Format 3 is refused under versions 1 and 2, the old map kept. */
	struct baton_kv *old = fresh();
	kvt_use(2, T0);
	kvt_run(old, "SET keep me");
	kvt_use(3, T0);
	cr_assert_eq(kv_restore(old, V2, golden_v3, sizeof golden_v3),
		     BATON_EVERSION);
	cr_assert_eq(kv_restore(old, V1, golden_v3, sizeof golden_v3),
		     BATON_EVERSION);
	cr_assert_str_eq(kvt_run(old, "GET keep"), "$2\r\nme\r\n");
	kv_destroy(old);
	kv_destroy(copy);
	baton_buf_free(&got);
	baton_buf_free(&want);
}

/* The golden snapshot with its byte at `at` set to v, resealed. */
static void damaged(struct baton_buf *b, size_t at, uint8_t v)
{
	baton_buf_reset(b);
	cr_assert_eq(baton_buf_append(b, golden_v3, sizeof golden_v3 - 8), 0);
	b->data[at] = v;
	seal(b);
}

Test(snap3, malformed_is_corrupt_and_keeps_the_map)
{
	kvt_run(kv, "HSET keep f v");
	struct baton_buf b;
	baton_buf_init(&b);
	/* Every truncation. */
	for (size_t n = 0; n < sizeof golden_v3; n++)
		cr_assert_eq(kv_restore(kv, V3, golden_v3, n), BATON_ECORRUPT,
			     "length %zu", n);
	/* h's type byte is at 29, its field count at 30, f1's length at 38,
	 * f2's name at 55. */
	static const struct {
		size_t at;
		uint8_t v;
	} bad[] = {
		{29, 0},    /* type 0 */
		{29, 3},    /* an unknown type */
		{30, 0},    /* a hash of no field */
		{30, 3},    /* more fields than there are */
		{30, 1},    /* fewer: the rest does not parse */
		{37, 1},    /* a count far beyond the bytes */
		{56, '1'},  /* f2 renamed f1: a duplicate field */
		{38, 0xff}, /* a field longer than the snapshot */
		{76, 3},    /* s's type */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		damaged(&b, bad[i].at, bad[i].v);
		cr_assert_eq(kv_restore(kv, V3, b.data, b.len), BATON_ECORRUPT,
			     "byte %zu = %u", bad[i].at, bad[i].v);
	}
	/* Random damage, resealed: refused or restored, never a crash, and
	 * a refusal keeps the old map. */
	uint64_t rng = 3;
	for (int i = 0; i < 20000; i++) {
		size_t at = kvt_rand(&rng) % (sizeof golden_v3 - 8);
		damaged(&b, at, (uint8_t)kvt_rand(&rng));
		int rv = kv_restore(kv, V3, b.data, b.len);
		cr_assert(rv == 0 || rv == BATON_ECORRUPT ||
				  (rv == BATON_EVERSION && at >= 4 && at < 8),
			  "%d", rv);
		if (rv == 0) {
			/* Restored: it snapshots and restores again. */
			struct baton_buf again;
			baton_buf_init(&again);
			snap(kv, V3, &again);
			struct baton_kv *copy = fresh();
			cr_assert_eq(
				kv_restore(copy, V3, again.data, again.len), 0);
			assert_same(kv, copy);
			kv_destroy(copy);
			baton_buf_free(&again);
			cr_assert_eq(
				kv_restore(kv, V3, golden_v3, sizeof golden_v3),
				0);
			cr_assert_str_eq(kvt_run(kv, "HSET keep f v"),
					 ":1\r\n");
		}
		cr_assert_str_eq(kvt_run(kv, "HGET keep f"), "$1\r\nv\r\n");
	}
	baton_buf_free(&b);
}

/* A random map of strings and hashes, some with expiries, some expired
 * but not swept, under version 3 at machine time around T0. */
static void random_map(struct baton_kv *k, uint64_t seed, int keys)
{
	uint64_t rng = seed;
	char line[256];
	stamp = T0;
	kvt_use(3, T0);
	for (int i = 0; i < keys; i++) {
		uint64_t x = kvt_rand(&rng) % 10;
		if (x < 4) {
			snprintf(line, sizeof line, "SET k%d v%llu", i,
				 (unsigned long long)kvt_rand(&rng));
			kvt_run(k, line);
		} else {
			for (uint64_t f = 0, n = 1 + kvt_rand(&rng) % 20; f < n;
			     f++) {
				snprintf(line, sizeof line,
					 "HSET k%d f%llu %llu", i,
					 (unsigned long long)(kvt_rand(&rng) %
							      40),
					 (unsigned long long)kvt_rand(&rng));
				kvt_run(k, line);
			}
		}
		if (kvt_rand(&rng) % 4 == 0) {
			snprintf(line, sizeof line, "PEXPIRE k%d %llu", i,
				 (unsigned long long)(1 +
						      kvt_rand(&rng) % 2000));
			kvt_run(k, line);
		}
	}
	sweep_at(k, T0 + 1000, 0); /* some expired, none deleted */
}

Test(snap3, round_trip_with_hashes_strings_and_expiries)
{
	random_map(kv, 11, 3000);
	cr_assert_gt(kv->table.hashes, 1000);
	struct baton_buf s, again;
	baton_buf_init(&s);
	baton_buf_init(&again);
	snap(kv, V3, &s);
	struct baton_kv *copy = fresh();
	cr_assert_eq(kv_restore(copy, V3, s.data, s.len), 0, "%s",
		     kv_errmsg(copy));
	snap(copy, V3, &again);
	assert_same_bytes(&s, &again);
	cr_assert_eq(kv_dbsize(copy), kv_dbsize(kv));
	cr_assert_eq(kv_expiry_count(copy), kv_expiry_count(kv));
	cr_assert_eq(copy->table.hashes, kv->table.hashes);
	cr_assert_eq(kv_machine_time_ms(copy), kv_machine_time_ms(kv));
	/* Every key answers alike. */
	char line[64];
	for (int i = 0; i < 3000; i++) {
		static const char *const reads[] = {"TYPE", "HGETALL", "GET",
						    "PTTL"};
		for (size_t j = 0; j < 4; j++) {
			snprintf(line, sizeof line, "%s k%d", reads[j], i);
			char want[4096];
			snprintf(want, sizeof want, "%s", kvt_run(kv, line));
			cr_assert_str_eq(kvt_run(copy, line), want, "%s", line);
		}
	}
	/* Under version 2 a map with hashes has no snapshot. */
	baton_buf_reset(&again);
	cr_assert_eq(kv_snapshot(kv, V2, sink, &again), BATON_EVERSION);
	cr_assert(strstr(kv_errmsg(kv), "hashes") != NULL, "%s", kv_errmsg(kv));
	cr_assert_eq(again.len, 0);
	cr_assert_eq(kv_snapshot_begin(kv, V2), BATON_EVERSION);
	cr_assert(!kv_snapshot_open(kv));
	kv_destroy(copy);
	baton_buf_free(&s);
	baton_buf_free(&again);
}

Test(snap3, older_formats_restore_under_version_3)
{
	kvt_use(1, 0);
	kvt_run(kv, "MSET a 1 b 2");
	struct baton_buf s1, s2, s3;
	baton_buf_init(&s1);
	baton_buf_init(&s2);
	baton_buf_init(&s3);
	snap(kv, V1, &s1);
	kvt_use(2, T0);
	kvt_run(kv, "EXPIRE a 100");
	snap(kv, V2, &s2);
	snap(kv, V3, &s3);
	cr_assert_eq(baton_le_get_u32(s3.data + 4), 3);
	struct baton_kv *copy = fresh();
	cr_assert_eq(kv_restore(copy, V3, s1.data, s1.len), 0);
	cr_assert_eq(kv_machine_time_ms(copy), 0);
	cr_assert_eq(kv_restore(copy, V3, s2.data, s2.len), 0);
	assert_same(kv, copy);
	cr_assert_eq(kv_machine_time_ms(copy), T0);
	/* Without hashes, format 3 holds the same map as format 2. */
	cr_assert_eq(kv_restore(copy, V3, s3.data, s3.len), 0);
	baton_buf_reset(&s3);
	snap(copy, V2, &s3);
	assert_same_bytes(&s2, &s3);
	kv_destroy(copy);
	baton_buf_free(&s1);
	baton_buf_free(&s2);
	baton_buf_free(&s3);
}

/* ---- incremental snapshots and KEYS while hashes change ---- */

static void runf(struct baton_kv *k, const char *fmt, int i)
{
	char line[96];
	snprintf(line, sizeof line, fmt, i, i);
	kvt_run(k, line);
}

/* One change to key k<i> (a hash of 20 fields at first) of each kind. */
static void change_key(struct baton_kv *k, int i)
{
	switch (i % 6) {
	case 0: /* every field deleted: the key goes */
		for (int f = 0; f < 20; f++) {
			char line[64];
			snprintf(line, sizeof line, "HDEL k%d f%d", i, f);
			kvt_run(k, line);
		}
		break;
	case 1:
		runf(k, "SET k%d now-a-string-%d", i);
		break;
	case 2:
		runf(k, "HSET k%d f0 changed-%d", i);
		runf(k, "HDEL k%d f1", i);
		break;
	case 3:
		runf(k, "HINCRBY k%d n %d", i);
		break;
	case 4:
		runf(k, "EXPIRE k%d %d", i + 1);
		break;
	default:
		runf(k, "HSET new%d f v%d", i); /* a hash born after begin */
	}
}

Test(v3, sliced_snapshot_keeps_hashes_changed_ahead_of_it)
{
	char line[64];
	for (int i = 0; i < 200; i++)
		for (int f = 0; f < 20; f++) {
			snprintf(line, sizeof line, "HSET k%d f%d v%d", i, f,
				 i * f);
			kvt_run(kv, line);
		}
	struct baton_buf expected, got;
	baton_buf_init(&expected);
	baton_buf_init(&got);
	snap(kv, V3, &expected);
	cr_assert_eq(kv_snapshot_begin(kv, V3), 0);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
	cr_assert(!done);
	/* One hash written; every other one changes before the walk gets
	 * there, several times over. */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 200; i++)
			change_key(kv, i);
	struct kv_snapshot_stats st;
	kv_snapshot_stats(kv, &st);
	/* Every key changed but the one written and those of case 5. */
	cr_assert_geq(st.preimages, 199 - 34);
	/* Each copy holds its 20 fields. */
	cr_assert_gt(st.bytes_kept, 165u * 20u * sizeof(struct kv__entry));
	while (!done)
		cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0,
			     "%s", kv_errmsg(kv));
	kv_snapshot_stats(kv, &st);
	cr_assert_eq(st.entries, 200);
	cr_assert_eq(st.bytes_kept, 0);
	kv_snapshot_end(kv);
	assert_same_bytes(&got, &expected);
	baton_buf_free(&expected);
	baton_buf_free(&got);
}

Test(v3, sliced_keys_lists_hashes_as_at_begin)
{
	for (int i = 0; i < 200; i++)
		runf(kv, "HSET k%d f%d v", i);
	for (int i = 0; i < 100; i++)
		runf(kv, "SET s%d v%d", i);
	char want[8192];
	snprintf(want, sizeof want, "%s", kvt_run(kv, "KEYS k*"));
	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"k*", 2), 0);
	struct baton_buf bulks;
	baton_buf_init(&bulks);
	uint64_t matched = 0;
	bool done = false;
	for (int i = 0; !done; i++) {
		cr_assert_eq(kv_keys_step(kv, 1, &bulks, &matched, &done), 0);
		if (i < 200)
			change_key(kv, 199 - i);
	}
	kv_keys_end(kv);
	struct baton_buf reply;
	baton_buf_init(&reply);
	cr_assert_eq(resp_array(&reply, matched), 0);
	cr_assert_eq(baton_buf_append(&reply, bulks.data, bulks.len), 0);
	cr_assert_eq(baton_buf_append(&reply, "", 1), 0);
	cr_assert_str_eq((const char *)reply.data, want);
	cr_assert_eq(matched, 200);
	baton_buf_free(&bulks);
	baton_buf_free(&reply);
}

/* ---- replicas ---- */

/* A random version-3 command line on a few keys and fields, so that
 * types collide (WRONGTYPE), hashes empty out and expire. */
static void random_line(uint64_t *rng, char *line, size_t cap)
{
	static const char *const keys[] = {"a", "b", "c", "d", "e", "f"};
	const char *k = keys[kvt_rand(rng) % 6];
	unsigned f = (unsigned)(kvt_rand(rng) % 5), g = f + 1;
	int n = (int)(kvt_rand(rng) % 200) - 100;
	switch (kvt_rand(rng) % 26) {
	case 0:
	case 1:
		snprintf(line, cap, "HSET %s f%u %d f%u x%d", k, f, n, g, n);
		break;
	case 2:
		snprintf(line, cap, "HSET %s f%u %d", k, f, n);
		break;
	case 3:
		snprintf(line, cap, "HDEL %s f%u f%u", k, f, g);
		break;
	case 4:
		snprintf(line, cap, "HINCRBY %s f%u %d", k, f, n);
		break;
	case 5:
		snprintf(line, cap, "SET %s %d", k, n);
		break;
	case 6:
		snprintf(line, cap, "INCRBY %s %d", k, n);
		break;
	case 7:
		snprintf(line, cap, "APPEND %s x", k);
		break;
	case 8:
		snprintf(line, cap, "PEXPIRE %s %d", k, n + 60);
		break;
	case 9:
		snprintf(line, cap, "DEL %s", k);
		break;
	case 10:
		snprintf(line, cap, "SET %s v GET", k);
		break;
	case 11:
		snprintf(line, cap, "GETEX %s PX %d", k, n + 200);
		break;
	case 12:
		snprintf(line, cap, "MSET %s 1 %s 2", k, keys[f]);
		break;
	case 13:
		snprintf(line, cap, "PERSIST %s", k);
		break;
	case 14:
		snprintf(line, cap, "RENAME %s %s", k, keys[f]);
		break;
	case 15:
		snprintf(line, cap, "COPY %s %s REPLACE", k, keys[g]);
		break;
	case 16:
		snprintf(line, cap, "SETRANGE %s %u xy", k, f);
		break;
	case 17:
		snprintf(line, cap, "INCRBYFLOAT %s %d.25", k, n);
		break;
	case 18:
		snprintf(line, cap, "GETSET %s %d", k, n);
		break;
	case 19:
		snprintf(line, cap, "PSETEX %s %d v", k, n + 200);
		break;
	case 20:
		snprintf(line, cap, "GETDEL %s", k);
		break;
	case 21:
		snprintf(line, cap, "MSETNX %s 1 %s 2", k, keys[f]);
		break;
	case 22:
		snprintf(line, cap, "SETNX %s %d", k, n);
		break;
	case 23:
		snprintf(line, cap, "RENAMENX %s %s", k, keys[g]);
		break;
	default:
		snprintf(line, cap, "HSET %s f%u v", k, f);
	}
}

static const char *const reads3[] = {
	"HGETALL a",	"HGET b f1", "HMGET c f0 f2", "TYPE d",	   "HLEN e",
	"HEXISTS f f3", "HKEYS a",   "HVALS b",	      "HSCAN c 0", "GET d",
};

/* Encode one random payload: a command, a transaction of 1-4 commands
 * (reads among them) watching a key of ref, or a sweep. */
static void random_payload(uint64_t *rng, struct baton_kv *ref, uint64_t now,
			   struct baton_buf *p)
{
	baton_buf_reset(p);
	uint64_t x = kvt_rand(rng) % 10;
	if (x == 0) {
		cr_assert_eq(
			kv_encode_sweep(now, (uint32_t)(kvt_rand(rng) % 4), p),
			0);
		return;
	}
	char lines[4][96];
	const char *argv[4][8];
	size_t lens[4][8];
	struct kv_txn_command cmds[4];
	size_t n = x == 1 ? 1 + kvt_rand(rng) % 4 : 1;
	for (size_t i = 0; i < n; i++) {
		if (x == 1 && kvt_rand(rng) % 3 == 0)
			snprintf(lines[i], sizeof lines[i], "%s",
				 reads3[kvt_rand(rng) % 10]);
		else
			random_line(rng, lines[i], sizeof lines[i]);
		int argc = 0;
		for (char *t = strtok(lines[i], " "); t != NULL;
		     t = strtok(NULL, " ")) {
			argv[i][argc] = t;
			lens[i][argc++] = strlen(t);
		}
		cmds[i] = (struct kv_txn_command){
			argc, (const uint8_t *const *)argv[i], lens[i]};
	}
	if (x != 1) {
		cr_assert_eq(kv_encode_v2(now, cmds[0].argc, cmds[0].argv,
					  cmds[0].lens, p),
			     0);
		return;
	}
	const char *wk = kvt_rand(rng) % 2 ? "a" : "c";
	struct kv_watch w = {(const uint8_t *)wk, 1,
			     kv_watch_hash(ref, (const uint8_t *)wk, 1)};
	cr_assert_eq(kv_encode_txn(now, 1, &w, n, cmds, p), 0);
}

Test(v3, replicas_agree_byte_for_byte, .timeout = 60)
{
	struct baton_kv *a = kv, *b = fresh(), *c = fresh();
	struct baton_buf p, ra, rb, rc, s;
	baton_buf_init(&p);
	baton_buf_init(&ra);
	baton_buf_init(&rb);
	baton_buf_init(&rc);
	baton_buf_init(&s);
	uint64_t rng = 5, now = T0;
	int hashes_seen = 0, wrongtype = 0;
	for (int i = 0; i < 20000; i++) {
		now += kvt_rand(&rng) % 30;
		random_payload(&rng, a, now, &p);
		baton_buf_reset(&ra);
		baton_buf_reset(&rb);
		baton_buf_reset(&rc);
		cr_assert_eq(kv_apply(a, V3, p.data, p.len, &ra), 0);
		cr_assert_eq(kv_apply(b, V3, p.data, p.len, &rb), 0);
		cr_assert_eq(kv_apply(c, V3, p.data, p.len, &rc), 0);
		assert_same_bytes(&ra, &rb);
		assert_same_bytes(&ra, &rc);
		hashes_seen += a->table.hashes > 0;
		cr_assert_eq(baton_buf_append(&ra, "", 1), 0);
		wrongtype += strstr((const char *)ra.data, "WRONGTYPE") != NULL;
		cr_assert_null(
			strstr((const char *)ra.data, "machine version"));
		if (i == 10000) {
			/* c installs a snapshot of a instead. */
			snap(a, V3, &s);
			kv_destroy(c);
			c = fresh();
			cr_assert_eq(kv_restore(c, V3, s.data, s.len), 0);
		}
	}
	cr_assert_gt(hashes_seen, 10000);
	cr_assert_gt(wrongtype, 1000);
	assert_same(a, b);
	assert_same(a, c);
	kv_destroy(b);
	kv_destroy(c);
	baton_buf_free(&p);
	baton_buf_free(&ra);
	baton_buf_free(&rb);
	baton_buf_free(&rc);
	baton_buf_free(&s);
}
