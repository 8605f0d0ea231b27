/*
 * Machine version 2 as a state machine: payload format 2 (golden bytes,
 * malformed ones, stamps and machine time), gating under version 1,
 * sweeps, transactions with WATCH, snapshot format 2 and restores across
 * versions, determinism of replicas fed random and mutated payloads, and
 * a large number of keys expiring at once.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "checksum.h"
#include "internal.h"
#include "kv_util.h"
#include "resp.h"

static const struct baton_machine_version V1 = {1}, V2 = {2};
#define T0 1700000000000ull

static struct baton_kv *kv;
static struct baton_buf payload, reply;

static void setup(void)
{
	kv = kvt_new();
	baton_buf_init(&payload);
	baton_buf_init(&reply);
}

static void teardown(void)
{
	kv_destroy(kv);
	baton_buf_free(&payload);
	baton_buf_free(&reply);
}

TestSuite(v2, .init = setup, .fini = teardown);
TestSuite(sweep, .init = setup, .fini = teardown);
TestSuite(txn, .init = setup, .fini = teardown);
TestSuite(snap2, .init = setup, .fini = teardown);
TestSuite(replicas, .init = setup, .fini = teardown);

static void assert_reply(const char *want)
{
	cr_assert_eq(reply.len, strlen(want), "%.*s", (int)reply.len,
		     (const char *)reply.data);
	cr_assert_eq(memcmp(reply.data, want, reply.len), 0, "%.*s",
		     (int)reply.len, (const char *)reply.data);
	baton_buf_reset(&reply);
}

/* ---- splitting command lines ---- */

#define ARGS_MAX 16
#define LINES_MAX 16

struct line {
	int argc;
	const uint8_t *argv[ARGS_MAX];
	size_t lens[ARGS_MAX];
};

static void split(const char *s, struct line *l)
{
	l->argc = 0;
	for (;;) {
		const char *sp = strchr(s, ' ');
		size_t n = sp != NULL ? (size_t)(sp - s) : strlen(s);
		cr_assert_lt(l->argc, ARGS_MAX);
		l->argv[l->argc] = (const uint8_t *)s;
		l->lens[l->argc++] = n;
		if (sp == NULL)
			return;
		s = sp + 1;
	}
}

/* Apply a format-2 command at stamp under v. */
static int apply2(struct baton_kv *k, struct baton_machine_version v,
		  uint64_t stamp, const char *s)
{
	struct line l;
	split(s, &l);
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_v2(stamp, l.argc, l.argv, l.lens, &payload), 0);
	return kv_apply(k, v, payload.data, payload.len, &reply);
}

/* Apply a format-1 command under v. */
static int apply1(struct baton_kv *k, struct baton_machine_version v,
		  const char *s)
{
	baton_buf_reset(&payload);
	kvt_encode(s, &payload);
	return kv_apply(k, v, payload.data, payload.len, &reply);
}

static int sweep(struct baton_kv *k, uint64_t stamp, uint32_t max)
{
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_sweep(stamp, max, &payload), 0);
	return kv_apply(k, V2, payload.data, payload.len, &reply);
}

/* Encode a transaction of the lines, watching keys with hashes. */
static void encode_txn(uint64_t stamp, const struct kv_watch *w, size_t nw,
		       const char *const *lines, size_t n)
{
	static struct line l[LINES_MAX];
	struct kv_txn_command c[LINES_MAX];
	cr_assert_leq(n, LINES_MAX);
	for (size_t i = 0; i < n; i++) {
		split(lines[i], &l[i]);
		c[i] = (struct kv_txn_command){l[i].argc, l[i].argv, l[i].lens};
	}
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_txn(stamp, nw, w, n, c, &payload), 0);
}

static int txn(struct baton_kv *k, uint64_t stamp, const struct kv_watch *w,
	       size_t nw, const char *const *lines, size_t n)
{
	encode_txn(stamp, w, nw, lines, n);
	return kv_apply(k, V2, payload.data, payload.len, &reply);
}

static struct kv_watch watch(struct baton_kv *k, const char *key)
{
	return (struct kv_watch){
		(const uint8_t *)key, strlen(key),
		kv_watch_hash(k, (const uint8_t *)key, strlen(key))};
}

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

static void assert_same(const struct baton_kv *a, const struct baton_kv *b)
{
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	snap(a, V2, &sa);
	snap(b, V2, &sb);
	cr_assert_eq(sa.len, sb.len);
	cr_assert_eq(memcmp(sa.data, sb.data, sa.len), 0);
	baton_buf_free(&sa);
	baton_buf_free(&sb);
}

/* ---- payload format 2 ---- */

Test(v2, golden_payloads)
{
	const uint8_t cmd[] = {2, 8, 7, 6,   5, 4, 3, 2,   1,	1,   3,
			       0, 0, 0, 3,   0, 0, 0, 'S', 'E', 'T', 1,
			       0, 0, 0, 'a', 1, 0, 0, 0,   'b'};
	const uint8_t swp[] = {2, 0xe8, 3, 0, 0, 0, 0, 0, 0, 3, 0xd0, 7, 0, 0};
	const uint8_t tx[] = {2,    1,	  0,	0,    0,    0,	  0,	0,
			      0,    2,	  1,	0,    0,    0,	  1,	0,
			      0,    0,	  'k',	0x88, 0x77, 0x66, 0x55, 0x44,
			      0x33, 0x22, 0x11, 1,    0,    0,	  0,	2,
			      0,    0,	  0,	3,    0,    0,	  0,	'G',
			      'E',  'T',  1,	0,    0,    0,	  'k'};
	struct line l;
	split("SET a b", &l);
	cr_assert_eq(kv_encode_v2(0x0102030405060708u, l.argc, l.argv, l.lens,
				  &payload),
		     0);
	cr_assert_eq(payload.len, sizeof cmd);
	cr_assert_eq(memcmp(payload.data, cmd, sizeof cmd), 0);
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_sweep(1000, 2000, &payload), 0);
	cr_assert_eq(payload.len, sizeof swp);
	cr_assert_eq(memcmp(payload.data, swp, sizeof swp), 0);
	struct kv_watch w = {(const uint8_t *)"k", 1, 0x1122334455667788u};
	const char *get[] = {"GET k"};
	encode_txn(1, &w, 1, get, 1);
	cr_assert_eq(payload.len, sizeof tx);
	cr_assert_eq(memcmp(payload.data, tx, sizeof tx), 0);
	/* They apply: SET, then the sweep (nothing due), then the
	 * transaction (its watch fails: the key is absent, hash 0). */
	cr_assert_eq(kv_apply(kv, V2, cmd, sizeof cmd, &reply), 0);
	assert_reply("+OK\r\n");
	cr_assert_eq(kv_machine_time_ms(kv), 0x0102030405060708u);
	cr_assert_eq(kv_apply(kv, V2, swp, sizeof swp, &reply), 0);
	assert_reply(":0\r\n");
	cr_assert_eq(kv_apply(kv, V2, tx, sizeof tx, &reply), 0);
	assert_reply("*-1\r\n");
	cr_assert_eq(kv_machine_time_ms(kv), 0x0102030405060708u);
}

Test(v2, encoders_refuse_bad_input)
{
	struct line l;
	split("SET a b", &l);
	uint64_t big = (uint64_t)INT64_MAX + 1;
	cr_assert_eq(kv_encode_v2(big, l.argc, l.argv, l.lens, &payload),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_v2(1, 0, l.argv, l.lens, &payload),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_sweep(big, 1, &payload), BATON_EINVAL);
	cr_assert_eq(kv_encode_sweep(1, KV_SWEEP_KEYS_MAX + 1, &payload),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_txn(1, KV_TXN_WATCHES_MAX + 1, NULL, 0, NULL,
				   &payload),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_txn(1, 0, NULL, KV_TXN_COMMANDS_MAX + 1, NULL,
				   &payload),
		     BATON_EINVAL);
	struct kv_txn_command empty = {0, l.argv, l.lens};
	cr_assert_eq(kv_encode_txn(1, 0, NULL, 1, &empty, &payload),
		     BATON_EINVAL);
	cr_assert_eq(payload.len, 0);
	cr_assert_eq(kv_encode_txn(1, 0, NULL, 0, NULL, &payload), 0);
	cr_assert_eq(kv_apply(kv, V2, payload.data, payload.len, &reply), 0);
	assert_reply("*0\r\n"); /* an empty EXEC */
}

Test(v2, machine_time_is_the_largest_stamp)
{
	cr_assert_eq(kv_machine_time_ms(kv), 0);
	cr_assert_eq(apply2(kv, V2, T0, "SET a 1"), 0);
	cr_assert_eq(kv_machine_time_ms(kv), T0);
	cr_assert_eq(apply2(kv, V2, T0 - 5000, "SET b 1 PX 1000"), 0);
	cr_assert_eq(kv_machine_time_ms(kv), T0); /* never goes back */
	assert_reply("+OK\r\n+OK\r\n");
	/* Relative expiries count from machine time, not the stamp. */
	cr_assert_eq(kv_read(kv, 2,
			     (const uint8_t *const[]){(const uint8_t *)"PTTL",
						      (const uint8_t *)"b"},
			     (const size_t[]){4, 1}, &reply),
		     0);
	assert_reply(":1000\r\n");
	/* Format 1 under version 2: applies, machine time unchanged. */
	cr_assert_eq(apply1(kv, V2, "EXPIRE a 10"), 0);
	assert_reply(":1\r\n");
	cr_assert_eq(kv_machine_time_ms(kv), T0);
	uint64_t at;
	cr_assert(kv_expiry_next(kv, &at));
	cr_assert_eq(at, T0 + 1000);
}

Test(v2, version_1_gates_and_refuses_format_2)
{
	/* A v2 command in a format-1 payload under v1: a deterministic
	 * -ERR, nothing changed, never a stall. */
	cr_assert_eq(apply1(kv, V1, "SET a 1"), 0);
	cr_assert_eq(apply1(kv, V1, "EXPIRE a 10"), 0);
	cr_assert_eq(apply1(kv, V1, "SET a 2 KEEPTTL"), 0);
	cr_assert_eq(apply1(kv, V1, "PERSIST a"), 0);
	assert_reply("+OK\r\n"
		     "-ERR command 'expire' needs machine version 2; the "
		     "effective machine version is 1\r\n"
		     "-ERR option 'keepttl' of command 'set' needs machine "
		     "version 2; the effective machine version is 1\r\n"
		     "-ERR command 'persist' needs machine version 2; the "
		     "effective machine version is 1\r\n");
	cr_assert_eq(kv_expiry_count(kv), 0);
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	snap(kv, V1, &before);
	/* Format 2 under v1 (written before a downgrade's entry, logged
	 * after it): a deterministic -ERR for each kind, nothing changed,
	 * machine time included; never a stall. */
	static const char refused[] =
		"-ERR this write was encoded for machine version 2 but its "
		"entry applies under machine version 1 (a downgrade came first "
		"in the log); it was not applied\r\n";
	cr_assert_eq(apply2(kv, V1, T0, "SET a 3"), 0);
	assert_reply(refused);
	cr_assert_eq(sweep(kv, T0, 1), 0); /* (under v2: fine) */
	baton_buf_reset(&reply);
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_sweep(T0 + 1, 1, &payload), 0);
	cr_assert_eq(kv_apply(kv, V1, payload.data, payload.len, &reply), 0);
	assert_reply(refused);
	const char *cmds[] = {"SET a 4"};
	encode_txn(T0 + 2, NULL, 0, cmds, 1);
	cr_assert_eq(kv_apply(kv, V1, payload.data, payload.len, &reply), 0);
	assert_reply(refused);
	/* Nobody waiting: the same, the reply dropped. */
	cr_assert_eq(kv_apply(kv, V1, payload.data, payload.len, NULL), 0);
	cr_assert_eq(kv_machine_time_ms(kv), T0);
	snap(kv, V1, &after);
	cr_assert_eq(before.len, after.len);
	cr_assert_eq(memcmp(before.data, after.data, before.len), 0);
	baton_buf_free(&before);
	baton_buf_free(&after);
	/* kv_gate itself. */
	struct line l;
	split("GETEX a", &l);
	const struct kv_command *c = kv_lookup(l.argv[0], l.lens[0]);
	cr_assert_eq(kv_gate(c, l.argc, l.argv, l.lens, V1, &reply),
		     BATON_EVERSION);
	assert_reply("-ERR command 'getex' needs machine version 2; the "
		     "effective machine version is 1\r\n");
	cr_assert_eq(kv_gate(c, l.argc, l.argv, l.lens, V2, &reply), 0);
	cr_assert_eq(reply.len, 0);
}

Test(v2, malformed_and_unknown_payloads)
{
	cr_assert_eq(apply2(kv, V2, T0, "SET a 1"), 0);
	baton_buf_reset(&reply);
	/* An unknown command or kind: a later release's, refused without
	 * a change (machine time included). */
	cr_assert_eq(apply2(kv, V2, T0 + 9, "ZADD a 1 b"), BATON_EVERSION);
	cr_assert_eq(kv_machine_time_ms(kv), T0);
	/* (Kinds 4 to 10 are the migration's, docs/kv.md "Migration".) */
	uint8_t p[14] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 0};
	cr_assert_eq(kv_apply(kv, V2, p, sizeof p, &reply), BATON_EVERSION);
	p[9] = 0;
	cr_assert_eq(kv_apply(kv, V2, p, sizeof p, &reply), BATON_ECORRUPT);
	p[0] = 3;
	cr_assert_eq(kv_apply(kv, V2, p, sizeof p, &reply), BATON_EVERSION);
	/* A stamp above INT64_MAX. */
	uint8_t s[14] = {2, 0, 0, 0, 0, 0, 0, 0, 0x80, 3, 1, 0, 0, 0};
	cr_assert_eq(kv_apply(kv, V2, s, sizeof s, &reply), BATON_ECORRUPT);
	s[8] = 0x7f;
	cr_assert_eq(kv_apply(kv, V2, s, sizeof s, &reply), 0);
	baton_buf_reset(&reply);
	/* A read command alone is corrupt; in a transaction it is fine. */
	cr_assert_eq(apply2(kv, V2, T0, "GET a"), BATON_ECORRUPT);
	/* A sweep above its limit. */
	uint8_t w[14] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0};
	cr_assert_eq(kv_apply(kv, V2, w, sizeof w, &reply), BATON_ECORRUPT);
	/* Every truncation and extension of each kind. */
	const char *lines[] = {"SET x y", "GET a", "TTL a"};
	struct kv_watch wt = {(const uint8_t *)"a", 1, 5};
	for (int kind = 1; kind <= 3; kind++) {
		if (kind == 1) {
			struct line l;
			split("SET q r EX 10", &l);
			baton_buf_reset(&payload);
			kv_encode_v2(T0, l.argc, l.argv, l.lens, &payload);
		} else if (kind == 2) {
			encode_txn(T0, &wt, 1, lines, 3);
		} else {
			baton_buf_reset(&payload);
			kv_encode_sweep(T0, 5, &payload);
		}
		for (size_t n = 0; n < payload.len; n++)
			cr_assert_eq(kv_apply(kv, V2, payload.data, n, &reply),
				     BATON_ECORRUPT, "kind %d length %zu", kind,
				     n);
		baton_buf_append(&payload, "", 1);
		cr_assert_eq(
			kv_apply(kv, V2, payload.data, payload.len, &reply),
			BATON_ECORRUPT);
	}
	cr_assert_eq(reply.len, 0);
	cr_assert_eq(kv_dbsize(kv), 1);
}

/* ---- sweeps ---- */

Test(sweep, deletes_due_keys_in_order_in_batches)
{
	/* 60 keys due at T0 + (i * 7 % 5) ms, 10 not due until later. */
	char line[64];
	for (int i = 0; i < 60; i++) {
		snprintf(line, sizeof line, "SET k%02d v PXAT %llu", i,
			 T0 + (unsigned long long)(i * 7 % 5));
		cr_assert_eq(apply2(kv, V2, 1, line), 0);
	}
	for (int i = 0; i < 10; i++) {
		snprintf(line, sizeof line, "SET late%d v PXAT %llu", i,
			 T0 + 100000);
		cr_assert_eq(apply2(kv, V2, 1, line), 0);
	}
	baton_buf_reset(&reply);
	cr_assert(!kv_expiry_due(kv, T0 - 1));
	cr_assert(kv_expiry_due(kv, T0));
	uint64_t at;
	cr_assert(kv_expiry_next(kv, &at));
	cr_assert_eq(at, T0);
	/* The expected order: by (expiry, key). */
	char order[60][8];
	int n = 0;
	for (int t = 0; t < 5; t++)
		for (int i = 0; i < 60; i++)
			if (i * 7 % 5 == t)
				snprintf(order[n++], 8, "k%02d", i);
	cr_assert_eq(n, 60);
	int deleted = 0;
	while (deleted < 60) {
		cr_assert_eq(sweep(kv, T0 + 10, 7), 0);
		int want = 60 - deleted < 7 ? 60 - deleted : 7;
		char r[16];
		snprintf(r, sizeof r, ":%d\r\n", want);
		assert_reply(r);
		deleted += want;
		for (int i = 0; i < 60; i++) {
			const struct kv__entry *e = kv__table_find(
				&kv->table, (const uint8_t *)order[i], 3);
			cr_assert_eq(e == NULL, i < deleted, "%s after %d",
				     order[i], deleted);
		}
	}
	cr_assert_eq(sweep(kv, T0 + 10, 7), 0);
	assert_reply(":0\r\n");
	cr_assert_eq(kv_dbsize(kv), 10);
	cr_assert(!kv_expiry_due(kv, T0 + 99999));
	cr_assert(kv_expiry_due(kv, T0 + 100000));
	/* A sweep stamped earlier deletes nothing more. */
	cr_assert_eq(sweep(kv, T0 + 200000, 0), 0);
	assert_reply(":0\r\n");
	cr_assert_eq(kv_dbsize(kv), 10);
	cr_assert_eq(sweep(kv, 5, 100), 0);
	assert_reply(":10\r\n"); /* machine time is T0 + 200000 */
	cr_assert_eq(kv_dbsize(kv), 0);
	cr_assert(!kv_expiry_next(kv, &at));
}

Test(sweep, a_large_number_expiring_at_once)
{
	enum { KEYS = 200000 };
	char line[64];
	for (int i = 0; i < KEYS; i++) {
		snprintf(line, sizeof line, "SET key:%d v%d PXAT %llu", i, i,
			 T0 + 1000 + (unsigned long long)(i % 3));
		cr_assert_eq(apply2(kv, V2, T0, line), 0);
		baton_buf_reset(&reply);
	}
	cr_assert_eq(kv_expiry_count(kv), KEYS);
	cr_assert(!kv_expiry_due(kv, T0 + 999));
	int64_t last_at = 0;
	uint64_t total = 0, sweeps = 0;
	while (kv_expiry_due(kv, T0 + 5000)) {
		uint64_t at;
		cr_assert(kv_expiry_next(kv, &at));
		cr_assert_geq((int64_t)at, last_at); /* never backwards */
		last_at = (int64_t)at;
		uint64_t before = kv_dbsize(kv);
		cr_assert_eq(sweep(kv, T0 + 5000, KV_SWEEP_BATCH_KEYS), 0);
		uint64_t done = before - kv_dbsize(kv);
		cr_assert_leq(done, KV_SWEEP_BATCH_KEYS);
		cr_assert_gt(done, 0);
		char want[32];
		snprintf(want, sizeof want, ":%llu\r\n",
			 (unsigned long long)done);
		assert_reply(want);
		total += done;
		sweeps++;
	}
	cr_assert_eq(total, KEYS);
	cr_assert_eq(sweeps,
		     (KEYS + KV_SWEEP_BATCH_KEYS - 1) / KV_SWEEP_BATCH_KEYS);
	cr_assert_eq(kv_dbsize(kv), 0);
	cr_assert_eq(kv_expiry_count(kv), 0);
}

/* ---- transactions ---- */

Test(txn, commands_run_in_order_with_their_replies)
{
	const char *lines[] = {
		"SET a 1", "INCR a",	  "GET a", "INCR a x", "APPEND a x",
		"INCR a",  "EXPIRE a 10", "TTL a", "KEYS *",   "DBSIZE"};
	cr_assert_eq(txn(kv, T0, NULL, 0, lines, 10), 0);
	assert_reply("*10\r\n+OK\r\n:2\r\n$1\r\n2\r\n"
		     "-ERR wrong number of arguments for 'incr' command\r\n"
		     ":2\r\n"
		     "-ERR value is not an integer or out of range\r\n"
		     ":1\r\n:10\r\n*1\r\n$1\r\na\r\n:1\r\n");
	cr_assert_eq(kv_machine_time_ms(kv), T0);
	cr_assert_eq(kv_expiry_count(kv), 1);
}

Test(txn, watch_by_content)
{
	cr_assert_eq(apply2(kv, V2, T0, "SET a 1"), 0);
	struct kv_watch w[3] = {watch(kv, "a"), watch(kv, "absent"),
				watch(kv, "a")};
	cr_assert_neq(w[0].hash, 0);
	cr_assert_eq(w[1].hash, 0);
	const char *lines[] = {"INCR a", "SET b x"};
	/* Nothing changed: it runs. */
	cr_assert_eq(txn(kv, T0, w, 3, lines, 2), 0);
	baton_buf_reset(&reply);
	/* a changed (2 now): aborted, nothing ran. */
	cr_assert_eq(apply2(kv, V2, T0, "DEL b"), 0);
	baton_buf_reset(&reply);
	cr_assert_eq(txn(kv, T0, w, 1, lines, 2), 0);
	assert_reply("*-1\r\n");
	cr_assert_null(kv__table_find(&kv->table, (const uint8_t *)"b", 1));
	/* A -> B -> A: contents compared, so it runs (docs/kv.md). */
	w[0] = watch(kv, "a");
	cr_assert_eq(apply2(kv, V2, T0, "SET a other"), 0);
	cr_assert_eq(apply2(kv, V2, T0, "SET a 2"), 0);
	baton_buf_reset(&reply);
	cr_assert_eq(txn(kv, T0, w, 1, lines, 1), 0);
	assert_reply("*1\r\n:3\r\n");
	/* An absent key that appears aborts it. */
	cr_assert_eq(apply2(kv, V2, T0, "SET absent 1"), 0);
	baton_buf_reset(&reply);
	cr_assert_eq(txn(kv, T0, &w[1], 1, lines, 1), 0);
	assert_reply("*-1\r\n");
	/* A new expiry changes the hash too. */
	w[0] = watch(kv, "a");
	cr_assert_eq(apply2(kv, V2, T0, "EXPIRE a 100"), 0);
	baton_buf_reset(&reply);
	cr_assert_eq(txn(kv, T0, w, 1, lines, 1), 0);
	assert_reply("*-1\r\n");
	/* So does expiring between WATCH and EXEC. */
	w[0] = watch(kv, "a");
	cr_assert_eq(txn(kv, T0 + 100000, w, 1, lines, 1), 0);
	assert_reply("*-1\r\n");
	cr_assert_eq(kv_machine_time_ms(kv), T0 + 100000); /* stamped */
	cr_assert_eq(kv_watch_hash(kv, (const uint8_t *)"a", 1), 0);
}

Test(txn, unknown_commands_refuse_it_all)
{
	cr_assert_eq(apply2(kv, V2, T0, "SET a 1"), 0);
	baton_buf_reset(&reply);
	const char *lines[] = {"INCR a", "ZADD z 1 m"};
	cr_assert_eq(txn(kv, T0 + 5, NULL, 0, lines, 2), BATON_EVERSION);
	cr_assert_eq(reply.len, 0);
	cr_assert_eq(kv_machine_time_ms(kv), T0);
	cr_assert_eq(apply2(kv, V2, T0, "INCR a"), 0);
	assert_reply(":2\r\n");
}

/* ---- snapshots ---- */

static void put_u32(struct baton_buf *b, uint32_t v)
{
	uint8_t x[4];
	baton_le_put_u32(x, v);
	baton_buf_append(b, x, 4);
}

static void put_u64(struct baton_buf *b, uint64_t v)
{
	uint8_t x[8];
	baton_le_put_u64(x, v);
	baton_buf_append(b, x, 8);
}

static void seal(struct baton_buf *b)
{
	put_u64(b, baton__checksum(b->data, b->len));
}

/* A format-2 snapshot of one key, by hand. */
static void one_key(struct baton_buf *b, uint32_t format, uint64_t now,
		    uint64_t at)
{
	baton_buf_reset(b);
	baton_buf_append(b, "BKVS", 4);
	put_u32(b, format);
	put_u64(b, now);
	put_u64(b, 1);
	put_u32(b, 1);
	baton_buf_append(b, "a", 1);
	put_u32(b, 2);
	baton_buf_append(b, "xy", 2);
	put_u64(b, at);
	seal(b);
}

Test(snap2, golden_layout)
{
	cr_assert_eq(apply2(kv, V2, T0, "SET a xy PX 5000"), 0);
	struct baton_buf s, want;
	baton_buf_init(&s);
	baton_buf_init(&want);
	snap(kv, V2, &s);
	one_key(&want, 2, T0, T0 + 5000);
	cr_assert_eq(s.len, want.len);
	cr_assert_eq(memcmp(s.data, want.data, s.len), 0);
	/* And back. */
	struct baton_kv *copy = kvt_new();
	cr_assert_eq(kv_restore(copy, V2, want.data, want.len), 0);
	cr_assert_eq(kv_machine_time_ms(copy), T0);
	cr_assert_eq(kv_expiry_count(copy), 1);
	assert_same(kv, copy);
	/* Expiry 0 is none; above INT64_MAX is corrupt; so is a machine
	 * time above it. */
	one_key(&want, 2, T0, 0);
	cr_assert_eq(kv_restore(copy, V2, want.data, want.len), 0);
	cr_assert_eq(kv_expiry_count(copy), 0);
	one_key(&want, 2, T0, (uint64_t)INT64_MAX + 1);
	cr_assert_eq(kv_restore(copy, V2, want.data, want.len), BATON_ECORRUPT);
	one_key(&want, 2, (uint64_t)INT64_MAX + 1, 5);
	cr_assert_eq(kv_restore(copy, V2, want.data, want.len), BATON_ECORRUPT);
	cr_assert_eq(kv_expiry_count(copy), 0); /* the old contents stay */
	one_key(&want, 3, T0, 5);
	cr_assert_eq(kv_restore(copy, V2, want.data, want.len), BATON_EVERSION);
	one_key(&want, 2, T0, 5);
	cr_assert_eq(kv_restore(copy, V1, want.data, want.len), BATON_EVERSION);
	struct baton_machine_version v4 = {4};
	cr_assert_eq(kv_restore(copy, v4, want.data, want.len), BATON_EVERSION);
	for (size_t n = 0; n < want.len; n++)
		cr_assert_eq(kv_restore(copy, V2, want.data, n), BATON_ECORRUPT,
			     "length %zu", n);
	kv_destroy(copy);
	baton_buf_free(&s);
	baton_buf_free(&want);
}

Test(snap2, versions_and_formats)
{
	cr_assert_eq(apply1(kv, V1, "MSET a 1 b 2"), 0);
	struct baton_buf s1, s2;
	baton_buf_init(&s1);
	baton_buf_init(&s2);
	snap(kv, V1, &s1);
	cr_assert_eq(baton_le_get_u32(s1.data + 4), 1);
	/* A format-1 snapshot restores under version 2 (machine time 0). */
	struct baton_kv *copy = kvt_new();
	cr_assert_eq(kv_restore(copy, V2, s1.data, s1.len), 0);
	cr_assert_eq(kv_machine_time_ms(copy), 0);
	assert_same(kv, copy);
	/* With expiries, format 1 cannot be written: nothing reaches the
	 * sink. */
	cr_assert_eq(apply2(kv, V2, T0, "EXPIRE a 100"), 0);
	baton_buf_reset(&s1);
	cr_assert_eq(kv_snapshot(kv, V1, sink, &s1), BATON_EVERSION);
	cr_assert_eq(s1.len, 0);
	struct baton_machine_version v0 = {0}, v4 = {4};
	cr_assert_eq(kv_snapshot(kv, v0, sink, &s1), BATON_EVERSION);
	cr_assert_eq(kv_snapshot(kv, v4, sink, &s1), BATON_EVERSION);
	/* Format 2 round trip keeps expiries and machine time. */
	snap(kv, V2, &s2);
	cr_assert_eq(baton_le_get_u32(s2.data + 4), 2);
	cr_assert_eq(kv_restore(copy, V2, s2.data, s2.len), 0);
	assert_same(kv, copy);
	cr_assert_eq(kv_machine_time_ms(copy), T0);
	cr_assert_eq(kv_watch_hash(copy, (const uint8_t *)"a", 1),
		     kv_watch_hash(kv, (const uint8_t *)"a", 1));
	/* Both sweep alike. */
	baton_buf_reset(&reply);
	cr_assert_eq(sweep(kv, T0 + 100000, 10), 0);
	cr_assert_eq(sweep(copy, T0 + 100000, 10), 0);
	assert_reply(":1\r\n:1\r\n");
	assert_same(kv, copy);
	kv_destroy(copy);
	baton_buf_free(&s1);
	baton_buf_free(&s2);
}

/* ---- replicas fed the same random payloads ---- */

static const char *random_key(uint64_t *rng)
{
	static char k[8];
	snprintf(k, sizeof k, "k%u", (unsigned)(kvt_rand(rng) % 24));
	return k;
}

/* A random command line of machine version 2 (sometimes a bad one). */
static void random_line(uint64_t *rng, uint64_t now, char *line, size_t cap)
{
	char key[8];
	snprintf(key, sizeof key, "%s", random_key(rng));
	unsigned n = (unsigned)(kvt_rand(rng) % 3000);
	unsigned long long abs = now + n - 500;
	static const char *set_opts[] = {"",	    " NX",	" XX",
					 " GET",    " KEEPTTL", " EX 2",
					 " PX 900", " PXAT",	" EX 0"};
	static const char *exp_opts[] = {"", " NX", " XX", " GT", " LT"};
	switch (kvt_rand(rng) % 12) {
	case 0:
	case 1: {
		const char *o = set_opts[kvt_rand(rng) % 9];
		if (strcmp(o, " PXAT") == 0)
			snprintf(line, cap, "SET %s %u PXAT %llu", key, n, abs);
		else
			snprintf(line, cap, "SET %s %u%s", key, n, o);
		break;
	}
	case 2:
		snprintf(line, cap, "PEXPIRE %s %d%s", key, (int)n - 300,
			 exp_opts[kvt_rand(rng) % 5]);
		break;
	case 3:
		snprintf(line, cap, "PEXPIREAT %s %llu%s", key, abs,
			 exp_opts[kvt_rand(rng) % 5]);
		break;
	case 4:
		snprintf(line, cap, "GETEX %s %s", key,
			 n % 2 ? "PERSIST" : "PX 700");
		break;
	case 5:
		snprintf(line, cap, "PERSIST %s", key);
		break;
	case 6:
		snprintf(line, cap, "INCR %s", key);
		break;
	case 7:
		snprintf(line, cap, "APPEND %s z", key);
		break;
	case 8:
		snprintf(line, cap, "DEL %s", key);
		break;
	case 9:
		snprintf(line, cap, "MSET %s 1 %s 2", key, random_key(rng));
		break;
	case 10:
		snprintf(line, cap, "EXPIRE %s %u", key, n % 4);
		break;
	default:
		snprintf(line, cap, "SET %s v PX %u", key, n + 1);
	}
}

static const char *const reads[] = {"GET k1", "TTL k2",		 "PTTL k3",
				    "KEYS *", "EXISTS k1 k2 k3", "DBSIZE"};

/* The next random payload into `payload`. */
static void random_payload(uint64_t *rng, struct baton_kv *ref, uint64_t *now)
{
	*now += kvt_rand(rng) % 400;
	uint64_t stamp = *now - kvt_rand(rng) % 300; /* leaders' clocks */
	char lines[4][96];
	const char *ptrs[4];
	baton_buf_reset(&payload);
	switch (kvt_rand(rng) % 8) {
	case 0:
		kv_encode_sweep(stamp, (uint32_t)(kvt_rand(rng) % 5), &payload);
		return;
	case 1:
	case 2: {
		size_t n = kvt_rand(rng) % 4, nw = kvt_rand(rng) % 3;
		for (size_t i = 0; i < n; i++) {
			if (kvt_rand(rng) % 4 == 0)
				snprintf(lines[i], sizeof lines[i], "%s",
					 reads[kvt_rand(rng) % 6]);
			else
				random_line(rng, *now, lines[i],
					    sizeof lines[i]);
			ptrs[i] = lines[i];
		}
		struct kv_watch w[2];
		char keys[2][8];
		for (size_t i = 0; i < nw; i++) {
			snprintf(keys[i], 8, "%s", random_key(rng));
			w[i] = watch(ref, keys[i]);
		}
		encode_txn(stamp, w, nw, ptrs, n);
		return;
	}
	default: {
		random_line(rng, *now, lines[0], sizeof lines[0]);
		struct line l;
		split(lines[0], &l);
		if (kvt_rand(rng) % 5 == 0)
			kv_encode(l.argc, l.argv, l.lens, &payload);
		else
			kv_encode_v2(stamp, l.argc, l.argv, l.lens, &payload);
	}
	}
}

Test(replicas, agree_byte_for_byte)
{
	struct baton_kv *b = kvt_new(), *c = kvt_new();
	struct baton_buf rb, s;
	baton_buf_init(&rb);
	baton_buf_init(&s);
	uint64_t rng = 0x9e3779b97f4a7c15u, now = T0;
	size_t aborted = 0, expired = 0;
	for (int i = 0; i < 20000; i++) {
		random_payload(&rng, kv, &now);
		baton_buf_reset(&reply);
		baton_buf_reset(&rb);
		cr_assert_eq(
			kv_apply(kv, V2, payload.data, payload.len, &reply), 0,
			"payload %d: %s", i, kv_errmsg(kv));
		cr_assert_eq(kv_apply(b, V2, payload.data, payload.len, &rb),
			     0);
		cr_assert_eq(reply.len, rb.len, "payload %d", i);
		cr_assert_eq(memcmp(reply.data, rb.data, rb.len), 0);
		if (reply.len == 5 && memcmp(reply.data, "*-1\r\n", 5) == 0)
			aborted++;
		if (i == 10000) { /* c joins from a snapshot */
			snap(kv, V2, &s);
			cr_assert_eq(kv_restore(c, V2, s.data, s.len), 0);
		} else if (i > 10000) {
			cr_assert_eq(kv_apply(c, V2, payload.data, payload.len,
					      NULL),
				     0);
		}
		if (i % 1000 == 999) {
			assert_same(kv, b);
			if (i > 10000)
				assert_same(kv, c);
		}
		expired += kv_expiry_count(kv) > 0;
	}
	assert_same(kv, b);
	assert_same(kv, c);
	cr_assert_gt(aborted, 10, "watches aborted some transactions");
	cr_assert_gt(expired, 1000, "keys had expiries");
	kv_destroy(b);
	kv_destroy(c);
	baton_buf_free(&rb);
	baton_buf_free(&s);
}

Test(replicas, mutated_payloads_never_crash_and_agree)
{
	struct baton_kv *b = kvt_new();
	struct baton_buf rb;
	baton_buf_init(&rb);
	uint64_t rng = 12345, now = T0;
	int applied = 0;
	for (int i = 0; i < 20000; i++) {
		random_payload(&rng, kv, &now);
		int flips = (int)(kvt_rand(&rng) % 4);
		for (int f = 0; f < flips && payload.len > 0; f++)
			payload.data[kvt_rand(&rng) % payload.len] ^=
				(uint8_t)(1u << (kvt_rand(&rng) % 8));
		size_t len = payload.len;
		if (kvt_rand(&rng) % 4 == 0)
			len = (size_t)(kvt_rand(&rng) % (payload.len + 1));
		struct baton_machine_version v = kvt_rand(&rng) % 8 ? V2 : V1;
		baton_buf_reset(&reply);
		baton_buf_reset(&rb);
		int x = kv_apply(kv, v, payload.data, len, &reply);
		int y = kv_apply(b, v, payload.data, len, &rb);
		cr_assert_eq(x, y);
		cr_assert(x == 0 || x == BATON_ECORRUPT || x == BATON_EVERSION);
		cr_assert(x == 0 || reply.len == 0);
		cr_assert_eq(reply.len, rb.len);
		cr_assert_eq(memcmp(reply.data, rb.data, rb.len), 0);
		applied += x == 0;
		if (i % 2000 == 0)
			assert_same(kv, b);
	}
	assert_same(kv, b);
	cr_assert_gt(applied, 5000);
	kv_destroy(b);
	baton_buf_free(&rb);
}
