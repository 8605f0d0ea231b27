/*
 * The state machine as Raft drives it: payloads (golden bytes, round trips,
 * corrupt ones), machine versions, determinism across replicas, and
 * snapshots (golden bytes, 100k keys, corrupt ones).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "le.h"
#include "kv_util.h"
#include "resp.h"

static const struct baton_machine_version V1 = {1};

/* Format 1 payload of "SET b xy", written by the first release: every
 * later release must read it. */
static const uint8_t golden_payload_v1[] = {
	0x01, 0x03, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x53, 0x45, 0x54,
	0x01, 0x00, 0x00, 0x00, 0x62, 0x02, 0x00, 0x00, 0x00, 0x78, 0x79};

/* Format 1 snapshot of {"a": "1", "b": "xy", "": "empty key",
 * "bin\r\n\x01": "v"}, written by the first release. */
static const uint8_t golden_snapshot_v1[] = {
	0x42, 0x4b, 0x56, 0x53, 0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00,
	0x00, 0x00, 0x65, 0x6d, 0x70, 0x74, 0x79, 0x20, 0x6b, 0x65, 0x79,
	0x06, 0x00, 0x00, 0x00, 0x62, 0x69, 0x6e, 0x0d, 0x0a, 0x01, 0x01,
	0x00, 0x00, 0x00, 0x76, 0x01, 0x00, 0x00, 0x00, 0x61, 0x01, 0x00,
	0x00, 0x00, 0x31, 0x01, 0x00, 0x00, 0x00, 0x62, 0x02, 0x00, 0x00,
	0x00, 0x78, 0x79, 0x9b, 0x9d, 0xee, 0xf3, 0x95, 0xe5, 0x54, 0x23};

static struct baton_kv *kv;
static struct baton_buf reply, payload, snap;

static void setup(void)
{
	kv = kvt_new();
	baton_buf_init(&reply);
	baton_buf_init(&payload);
	baton_buf_init(&snap);
}

static void teardown(void)
{
	kv_destroy(kv);
	baton_buf_free(&reply);
	baton_buf_free(&payload);
	baton_buf_free(&snap);
}

TestSuite(payload, .init = setup, .fini = teardown);
TestSuite(determinism, .init = setup, .fini = teardown);
TestSuite(snapshot, .init = setup, .fini = teardown);

static void assert_reply(const char *want)
{
	cr_assert_eq(reply.len, strlen(want), "%.*s", (int)reply.len,
		     (const char *)reply.data);
	cr_assert_eq(memcmp(reply.data, want, reply.len), 0, "%.*s",
		     (int)reply.len, (const char *)reply.data);
	baton_buf_reset(&reply);
}

static int apply_line(struct baton_kv *k, const char *line)
{
	baton_buf_reset(&payload);
	kvt_encode(line, &payload);
	return kv_apply(k, V1, payload.data, payload.len, &reply);
}

/* ---- payloads ---- */

Test(payload, golden_v1)
{
	kvt_encode("SET b xy", &payload);
	cr_assert_eq(payload.len, sizeof golden_payload_v1);
	cr_assert_eq(memcmp(payload.data, golden_payload_v1, payload.len), 0);
	cr_assert_eq(kv_apply(kv, V1, golden_payload_v1,
			      sizeof golden_payload_v1, &reply),
		     0);
	assert_reply("+OK\r\n");
	cr_assert_str_eq(kvt_run(kv, "GET b"), "$2\r\nxy\r\n");
}

Test(payload, encode_appends_and_round_trips)
{
	baton_buf_append(&payload, "K", 1); /* batond's kind byte */
	const uint8_t *argv[] = {(const uint8_t *)"APPEND",
				 (const uint8_t *)"k\0\r\n",
				 (const uint8_t *)""};
	size_t lens[] = {6, 4, 0};
	cr_assert_eq(kv_encode(3, argv, lens, &payload), 0);
	cr_assert_eq(payload.data[0], 'K');
	cr_assert_eq(payload.len, 1 + 5 + 4 * 3 + 6 + 4 + 0);
	cr_assert_eq(
		kv_apply(kv, V1, payload.data + 1, payload.len - 1, &reply), 0);
	assert_reply(":0\r\n");
	cr_assert_eq(kv_dbsize(kv), 1);
	cr_assert_not_null(kv__table_find(&kv->table, argv[1], 4));
}

Test(payload, encode_refuses_bad_commands)
{
	const uint8_t *argv[] = {(const uint8_t *)"SET", (const uint8_t *)"a",
				 (const uint8_t *)"b"};
	size_t lens[] = {3, 1, KV_VALUE_BYTES_MAX + 1};
	baton_buf_append(&payload, "K", 1);
	cr_assert_eq(kv_encode(0, argv, lens, &payload), BATON_EINVAL);
	cr_assert_eq(kv_encode(3, argv, lens, &payload), BATON_EINVAL);
	cr_assert_eq(kv_encode((int)KV_ARGS_MAX + 1, argv, lens, &payload),
		     BATON_EINVAL);
	cr_assert_eq(payload.len, 1);
}

Test(payload, many_arguments)
{
	char line[8192] = "MSET";
	for (int i = 0; i < 300; i++)
		snprintf(line + strlen(line), sizeof line - strlen(line),
			 " k%d %d", i, i);
	cr_assert_eq(apply_line(kv, line), 0);
	assert_reply("+OK\r\n");
	cr_assert_eq(kv_dbsize(kv), 300);
	strcpy(line, "DEL");
	for (int i = 0; i < 300; i += 2)
		snprintf(line + strlen(line), sizeof line - strlen(line),
			 " k%d", i);
	cr_assert_eq(apply_line(kv, line), 0);
	assert_reply(":150\r\n");
	cr_assert_eq(kv_dbsize(kv), 150);
}

Test(payload, nobody_waiting)
{
	kvt_encode("INCR n", &payload);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(kv_apply(kv, V1, payload.data, payload.len, NULL),
			     0);
	cr_assert_str_eq(kvt_run(kv, "GET n"), "$2\r\n10\r\n");
}

Test(payload, refused_commands_apply_as_errors)
{
	/* What another release let into the log: refused alike everywhere. */
	cr_assert_eq(apply_line(kv, "SET a b NX XX"), 0);
	assert_reply("-ERR syntax error\r\n");
	/* A syntax error before machine version 2; now refused as an option
	 * of version 2 under version 1 (test_v2.c covers the gating). */
	cr_assert_eq(apply_line(kv, "SET a b EX 10"), 0);
	assert_reply("-ERR option 'ex' of command 'set' needs machine version "
		     "2; the effective machine version is 1\r\n");
	cr_assert_eq(apply_line(kv, "SET a"), 0);
	assert_reply("-ERR wrong number of arguments for 'set' command\r\n");
	cr_assert_eq(apply_line(kv, "INCRBY a x"), 0);
	assert_reply("-ERR value is not an integer or out of range\r\n");
	cr_assert_eq(kv_dbsize(kv), 0);
}

Test(payload, unknown_versions_change_nothing)
{
	kvt_encode("SET a b", &payload);
	struct baton_machine_version v0 = {0}, v4 = {4};
	cr_assert_eq(kv_apply(kv, v0, payload.data, payload.len, &reply),
		     BATON_EVERSION);
	cr_assert_eq(kv_apply(kv, v4, payload.data, payload.len, &reply),
		     BATON_EVERSION);
	payload.data[0] = KV_PAYLOAD_FORMAT + 1;
	cr_assert_eq(kv_apply(kv, V1, payload.data, payload.len, &reply),
		     BATON_EVERSION);
	payload.data[0] = 0;
	cr_assert_eq(kv_apply(kv, V1, payload.data, payload.len, &reply),
		     BATON_ECORRUPT);
	cr_assert_eq(reply.len, 0);
	cr_assert_eq(kv_dbsize(kv), 0);
}

Test(payload, unknown_and_read_commands)
{
	cr_assert_eq(apply_line(kv, "ZADD a 1 b"), BATON_EVERSION);
	cr_assert_eq(apply_line(kv, "GET a"), BATON_ECORRUPT);
	cr_assert_eq(apply_line(kv, "KEYS *"), BATON_ECORRUPT);
	cr_assert_eq(reply.len, 0);
}

Test(payload, every_truncation_and_extension_is_corrupt)
{
	kvt_encode("MSET key value other 12345", &payload);
	for (size_t n = 0; n < payload.len; n++)
		cr_assert_eq(kv_apply(kv, V1, payload.data, n, &reply),
			     BATON_ECORRUPT, "length %zu", n);
	baton_buf_append(&payload, "", 1);
	cr_assert_eq(kv_apply(kv, V1, payload.data, payload.len, &reply),
		     BATON_ECORRUPT);
	cr_assert_eq(kv_apply(kv, V1, NULL, 0, &reply), BATON_ECORRUPT);
	cr_assert_eq(reply.len, 0);
	cr_assert_eq(kv_dbsize(kv), 0);
}

Test(payload, absurd_counts_are_corrupt)
{
	/* argc far beyond the bytes; argc 0; a length past the end. */
	const uint8_t big_argc[] = {1, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0};
	const uint8_t no_args[] = {1, 0, 0, 0, 0};
	const uint8_t long_arg[] = {1, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'x'};
	cr_assert_eq(kv_apply(kv, V1, big_argc, sizeof big_argc, &reply),
		     BATON_ECORRUPT);
	cr_assert_eq(kv_apply(kv, V1, no_args, sizeof no_args, &reply),
		     BATON_ECORRUPT);
	cr_assert_eq(kv_apply(kv, V1, long_arg, sizeof long_arg, &reply),
		     BATON_ECORRUPT);
}

/* A random write command line, from a small key space. */
static void random_line(uint64_t *rng, char *line, size_t cap)
{
	int k = (int)(kvt_rand(rng) % 64);
	long long n = (long long)(kvt_rand(rng) % 2000) - 1000;
	switch (kvt_rand(rng) % 10) {
	case 0:
		snprintf(line, cap, "SET k%d v%lld", k, n);
		break;
	case 1:
		snprintf(line, cap, "SET k%d %lld %s", k, n,
			 n % 2 ? "NX" : "XX");
		break;
	case 2:
		snprintf(line, cap, "DEL k%d k%d", k, (k * 7) % 64);
		break;
	case 3:
		snprintf(line, cap, "INCRBY k%d %lld", k, n);
		break;
	case 4:
		snprintf(line, cap, "DECR k%d", k);
		break;
	case 5:
		snprintf(line, cap, "APPEND k%d x%lld", k, n);
		break;
	case 6:
		snprintf(line, cap, "MSET k%d %lld k%d a", k, n, (k + 1) % 64);
		break;
	case 7:
		snprintf(line, cap, "%s", n == 0 ? "FLUSHALL" : "INCR kz");
		break;
	case 8:
		snprintf(line, cap, "SET x%lld %d", n + 1000 * k, k);
		break;
	default:
		snprintf(line, cap, "SET k%d 5 EX 1", k); /* refused */
		break;
	}
}

Test(payload, mutated_payloads_never_crash_and_stay_deterministic)
{
	struct baton_kv *twin = kvt_new();
	struct baton_buf r2, s2;
	baton_buf_init(&r2);
	baton_buf_init(&s2);
	for (uint64_t seed = 1; seed <= 30000; seed++) {
		uint64_t rng = seed;
		char line[128];
		random_line(&rng, line, sizeof line);
		baton_buf_reset(&payload);
		kvt_encode(line, &payload);
		int flips = (int)(kvt_rand(&rng) % 4);
		for (int i = 0; i < flips; i++)
			payload.data[kvt_rand(&rng) % payload.len] ^=
				(uint8_t)(1u << (kvt_rand(&rng) % 8));
		size_t len = payload.len;
		if (kvt_rand(&rng) % 8 == 0)
			len = kvt_rand(&rng) % (len + 1);
		baton_buf_reset(&reply);
		baton_buf_reset(&r2);
		int a = kv_apply(kv, V1, payload.data, len, &reply);
		int b = kv_apply(twin, V1, payload.data, len, &r2);
		cr_assert_eq(a, b, "seed %" PRIu64, seed);
		cr_assert(a == 0 || a == BATON_ECORRUPT || a == BATON_EVERSION,
			  "seed %" PRIu64 ": %d", seed, a);
		cr_assert_eq(reply.len, r2.len, "seed %" PRIu64, seed);
		if (a != 0)
			cr_assert_eq(reply.len, 0);
	}
	kvt_snapshot(kv, &snap);
	kvt_snapshot(twin, &s2);
	cr_assert_eq(snap.len, s2.len);
	cr_assert_eq(memcmp(snap.data, s2.data, snap.len), 0);
	baton_buf_free(&r2);
	baton_buf_free(&s2);
	kv_destroy(twin);
}

/* ---- determinism ---- */

Test(determinism, replicas_agree_byte_for_byte)
{
	/* Two replicas apply the same log; a third joins from a snapshot of
	 * the first half-way. All end with identical snapshots. */
	struct baton_kv *b = kvt_new(), *c = kvt_new();
	struct baton_buf rb, sb, sc;
	baton_buf_init(&rb);
	baton_buf_init(&sb);
	baton_buf_init(&sc);
	uint64_t rng = 2024;
	const int n = 20000;
	for (int i = 0; i < n; i++) {
		char line[128];
		random_line(&rng, line, sizeof line);
		baton_buf_reset(&payload);
		kvt_encode(line, &payload);
		baton_buf_reset(&reply);
		baton_buf_reset(&rb);
		cr_assert_eq(
			kv_apply(kv, V1, payload.data, payload.len, &reply), 0);
		cr_assert_eq(kv_apply(b, V1, payload.data, payload.len, &rb),
			     0);
		cr_assert_eq(reply.len, rb.len, "%s", line);
		cr_assert_eq(memcmp(reply.data, rb.data, rb.len), 0, "%s",
			     line);
		if (i == n / 2) {
			kvt_snapshot(kv, &snap);
			cr_assert_eq(kv_restore(c, V1, snap.data, snap.len), 0);
		} else if (i > n / 2) {
			cr_assert_eq(kv_apply(c, V1, payload.data, payload.len,
					      NULL),
				     0);
		}
	}
	kvt_snapshot(kv, &snap);
	kvt_snapshot(b, &sb);
	kvt_snapshot(c, &sc);
	cr_assert_gt(kv_dbsize(kv), 10);
	cr_assert_eq(snap.len, sb.len);
	cr_assert_eq(memcmp(snap.data, sb.data, snap.len), 0);
	cr_assert_eq(snap.len, sc.len);
	cr_assert_eq(memcmp(snap.data, sc.data, snap.len), 0);
	baton_buf_free(&rb);
	baton_buf_free(&sb);
	baton_buf_free(&sc);
	kv_destroy(b);
	kv_destroy(c);
}

Test(determinism, reads_change_nothing)
{
	for (int i = 0; i < 100; i++) {
		char line[64];
		snprintf(line, sizeof line, "SET k%d %d", i, i);
		apply_line(kv, line);
	}
	kvt_snapshot(kv, &snap);
	kvt_run(kv, "KEYS *");
	kvt_run(kv, "SCAN 0 COUNT 7");
	kvt_run(kv, "MGET k1 k2 nope");
	kvt_run(kv, "EXISTS k1");
	struct baton_buf again;
	baton_buf_init(&again);
	kvt_snapshot(kv, &again);
	cr_assert_eq(again.len, snap.len);
	cr_assert_eq(memcmp(again.data, snap.data, snap.len), 0);
	baton_buf_free(&again);
}

/* ---- snapshots ---- */

Test(snapshot, golden_v1)
{
	cr_assert_eq(kv_restore(kv, V1, golden_snapshot_v1,
				sizeof golden_snapshot_v1),
		     0);
	cr_assert_eq(kv_dbsize(kv), 4);
	cr_assert_str_eq(kvt_run(kv, "GET a"), "$1\r\n1\r\n");
	cr_assert_str_eq(kvt_run(kv, "GET b"), "$2\r\nxy\r\n");
	const char *get[] = {"GET", ""};
	size_t lens[] = {3, 0};
	cr_assert_str_eq(kvt_runv(kv, 2, get, lens), "$9\r\nempty key\r\n");
	const char *bin[] = {"GET", "bin\r\n\x01"};
	size_t bin_lens[] = {3, 6};
	cr_assert_str_eq(kvt_runv(kv, 2, bin, bin_lens), "$1\r\nv\r\n");
	/* The writer is stable too: same map, same bytes. */
	kvt_snapshot(kv, &snap);
	cr_assert_eq(snap.len, sizeof golden_snapshot_v1);
	cr_assert_eq(memcmp(snap.data, golden_snapshot_v1, snap.len), 0);
}

Test(snapshot, empty_map)
{
	kvt_snapshot(kv, &snap);
	cr_assert_eq(snap.len, 16 + 8);
	apply_line(kv, "SET a b");
	cr_assert_eq(kv_restore(kv, V1, snap.data, snap.len), 0);
	cr_assert_eq(kv_dbsize(kv), 0);
}

Test(snapshot, hundred_thousand_keys_round_trip)
{
	const int n = 100000;
	for (int i = 0; i < n; i++) {
		char line[64];
		snprintf(line, sizeof line, "SET key:%d value-%d", i, i * 3);
		cr_assert_eq(apply_line(kv, line), 0);
	}
	baton_buf_reset(&reply);
	kvt_snapshot(kv, &snap);
	struct baton_kv *copy = kvt_new();
	apply_line(copy, "SET stale 1"); /* replaced, not merged */
	cr_assert_eq(kv_restore(copy, V1, snap.data, snap.len), 0);
	cr_assert_eq(kv_dbsize(copy), (uint64_t)n);
	cr_assert_str_eq(kvt_run(copy, "GET stale"), "$-1\r\n");
	for (int i = 0; i < n; i += 997) {
		char line[64], want[64];
		snprintf(line, sizeof line, "GET key:%d", i);
		int len = snprintf(want, sizeof want, "value-%d", i * 3);
		char full[80];
		snprintf(full, sizeof full, "$%d\r\n%s\r\n", len, want);
		cr_assert_str_eq(kvt_run(copy, line), full);
	}
	struct baton_buf again;
	baton_buf_init(&again);
	kvt_snapshot(copy, &again);
	cr_assert_eq(again.len, snap.len);
	cr_assert_eq(memcmp(again.data, snap.data, snap.len), 0);
	baton_buf_free(&again);
	kv_destroy(copy);
}

Test(snapshot, big_values_round_trip)
{
	size_t n = 300000;
	char *big = malloc(n);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)('a' + i % 26);
	const char *argv[] = {"SET", "big", big};
	size_t lens[] = {3, 3, n};
	cr_assert_str_eq(kvt_runv(kv, 3, argv, lens), "+OK\r\n");
	apply_line(kv, "SET small x");
	kvt_snapshot(kv, &snap);
	struct baton_kv *copy = kvt_new();
	cr_assert_eq(kv_restore(copy, V1, snap.data, snap.len), 0);
	struct kv__entry *e =
		kv__table_find(&copy->table, (const uint8_t *)"big", 3);
	cr_assert_not_null(e);
	cr_assert_eq(e->val_len, n);
	cr_assert_eq(memcmp(e->val, big, n), 0);
	kv_destroy(copy);
	free(big);
}

struct failing_sink {
	size_t left;
	size_t calls;
};

static int fail_after(void *arg, const void *buf, size_t len)
{
	struct failing_sink *f = arg;
	(void)buf;
	f->calls++;
	if (len > f->left)
		return BATON_EIO;
	f->left -= len;
	return 0;
}

Test(snapshot, sink_errors_stop_it)
{
	for (int i = 0; i < 5000; i++) {
		char line[64];
		snprintf(line, sizeof line, "SET k%d %d", i, i);
		apply_line(kv, line);
	}
	kvt_snapshot(kv, &snap);
	for (size_t left = 0; left < snap.len; left += 1000) {
		struct failing_sink f = {left, 0};
		cr_assert_eq(kv_snapshot(kv, V1, fail_after, &f), BATON_EIO);
	}
	struct failing_sink ok = {snap.len, 0};
	cr_assert_eq(kv_snapshot(kv, V1, fail_after, &ok), 0);
	cr_assert_lt(ok.calls, 10, "small entries are batched");
}

/* Restore must fail with `want` and keep the old contents. */
static void expect_refused(const uint8_t *buf, size_t len, int want)
{
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	kvt_snapshot(kv, &before);
	cr_assert_eq(kv_restore(kv, V1, buf, len), want);
	kvt_snapshot(kv, &after);
	cr_assert_eq(before.len, after.len);
	cr_assert_eq(memcmp(before.data, after.data, before.len), 0);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

/* Put a correct checksum on a hand-made snapshot. */
static void seal(struct baton_buf *b)
{
	uint8_t t[8];
	baton_le_put_u64(t, baton__checksum(b->data, b->len));
	baton_buf_append(b, t, 8);
}

static void put_u32(struct baton_buf *b, uint32_t v)
{
	uint8_t x[4];
	baton_le_put_u32(x, v);
	baton_buf_append(b, x, 4);
}

static void header(struct baton_buf *b, uint32_t format, uint64_t count)
{
	baton_buf_reset(b);
	baton_buf_append(b, KV_SNAPSHOT_MAGIC, 4);
	put_u32(b, format);
	put_u32(b, (uint32_t)count);
	put_u32(b, (uint32_t)(count >> 32));
}

static void entry(struct baton_buf *b, const char *k, const char *v)
{
	put_u32(b, (uint32_t)strlen(k));
	baton_buf_append(b, k, strlen(k));
	put_u32(b, (uint32_t)strlen(v));
	baton_buf_append(b, v, strlen(v));
}

Test(snapshot, malformed_ones_are_refused)
{
	apply_line(kv, "MSET keep 1 these 2");
	struct baton_buf b;
	baton_buf_init(&b);
	expect_refused(NULL, 0, BATON_ECORRUPT);
	expect_refused((const uint8_t *)"BKV", 3, BATON_ECORRUPT);
	header(&b, 1, 0);
	b.data[0] = 'X';
	seal(&b);
	expect_refused(b.data, b.len, BATON_ECORRUPT); /* magic */
	header(&b, 2, 0);
	expect_refused(b.data, b.len, BATON_EVERSION); /* even unsealed */
	header(&b, 0, 0);
	seal(&b);
	expect_refused(b.data, b.len, BATON_ECORRUPT);
	header(&b, 1, 1);
	entry(&b, "a", "b");
	seal(&b);
	cr_assert_eq(kv_restore(kv, V1, b.data, b.len), 0); /* well made */
	apply_line(kv, "MSET keep 1 these 2");
	b.data[b.len - 1] ^= 1;
	expect_refused(b.data, b.len, BATON_ECORRUPT); /* checksum */
	header(&b, 1, 2);
	entry(&b, "a", "b");
	seal(&b);
	expect_refused(b.data, b.len, BATON_ECORRUPT); /* too few */
	header(&b, 1, 1);
	entry(&b, "a", "b");
	entry(&b, "c", "d");
	seal(&b);
	expect_refused(b.data, b.len, BATON_ECORRUPT); /* too many */
	header(&b, 1, 2);
	entry(&b, "a", "b");
	entry(&b, "a", "c");
	seal(&b);
	expect_refused(b.data, b.len, BATON_ECORRUPT); /* duplicate */
	header(&b, 1, 1);
	put_u32(&b, 0xffffffffu);
	baton_buf_append(&b, "abcd", 4);
	seal(&b);
	expect_refused(b.data, b.len, BATON_ECORRUPT); /* past the end */
	header(&b, 1, UINT64_MAX);
	seal(&b);
	expect_refused(b.data, b.len, BATON_ECORRUPT); /* absurd count */
	baton_buf_free(&b);
}

Test(snapshot, damaged_ones_are_refused)
{
	for (int i = 0; i < 300; i++) {
		char line[64];
		snprintf(line, sizeof line, "SET k%d v%d", i, i);
		apply_line(kv, line);
	}
	struct baton_buf good, bad;
	baton_buf_init(&good);
	baton_buf_init(&bad);
	kvt_snapshot(kv, &good);
	apply_line(kv, "FLUSHALL");
	apply_line(kv, "SET survivor yes");
	for (size_t n = 0; n < good.len; n += 7)
		expect_refused(good.data, n, BATON_ECORRUPT);
	for (uint64_t seed = 1; seed <= 3000; seed++) {
		uint64_t rng = seed;
		baton_buf_reset(&bad);
		baton_buf_append(&bad, good.data, good.len);
		int flips = 1 + (int)(kvt_rand(&rng) % 3);
		for (int i = 0; i < flips; i++)
			bad.data[kvt_rand(&rng) % bad.len] ^=
				(uint8_t)(1u << (kvt_rand(&rng) % 8));
		int rv = kv_restore(kv, V1, bad.data, bad.len);
		cr_assert(rv == BATON_ECORRUPT || rv == BATON_EVERSION,
			  "seed %" PRIu64 ": %d", seed, rv);
	}
	cr_assert_eq(kv_dbsize(kv), 1);
	cr_assert_str_eq(kvt_run(kv, "GET survivor"), "$3\r\nyes\r\n");
	baton_buf_free(&good);
	baton_buf_free(&bad);
}
