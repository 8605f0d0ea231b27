/*
 * The hash commands and TYPE of machine version 3 against what Redis 7
 * replies (the expected bytes were taken from redis-server 7.0), run the
 * way batond runs them: gate, check, encode with a stamp, apply / read.
 * WRONGTYPE both ways, arity, HINCRBY's errors, the last field's delete,
 * expiry on a hash, HSCAN's guarantee, a replica-independent field order,
 * and each command refused under versions 1 and 2.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "resp.h"

static struct baton_kv *kv;

#define T0 1700000000000ull
#define WRONGTYPE                                                              \
	"-WRONGTYPE Operation against a key holding the wrong kind of "        \
	"value\r\n"

/* Move machine time to ms by a stamped sweep of max_keys keys, and stamp
 * later writes with it. */
static void sweep_at(struct baton_kv *k, uint64_t ms, uint32_t max_keys)
{
	struct baton_buf b, r;
	baton_buf_init(&b);
	baton_buf_init(&r);
	cr_assert_eq(kv_encode_sweep(ms, max_keys, &b), 0);
	cr_assert_eq(kv_apply(k, (struct baton_machine_version){3}, b.data,
			      b.len, &r),
		     0);
	kvt_use(3, ms);
	baton_buf_free(&b);
	baton_buf_free(&r);
}

static void setup(void)
{
	kv = kvt_new();
	sweep_at(kv, T0, 0);
}

static void teardown(void)
{
	kv_destroy(kv);
}

TestSuite(hash, .init = setup, .fini = teardown);

#define RUN(line, want) cr_assert_str_eq(kvt_run(kv, line), want, "%s", line)

/* RUN with a formatted command line. */
static void runf(const char *want, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void runf(const char *want, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	RUN(line, want);
}

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

/* The map's version-3 snapshot into out (reset first). */
static void image(const struct baton_kv *k, struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(
		kv_snapshot(k, (struct baton_machine_version){3}, sink, out),
		0);
}

Test(hash, hset_counts_fields_added)
{
	RUN("HSET h a 1 b 2 a 3", ":2\r\n"); /* the later pair wins */
	RUN("HGET h a", "$1\r\n3\r\n");
	RUN("HSET h a 4 c 5", ":1\r\n");
	RUN("HLEN h", ":3\r\n");
	RUN("HGET h a", "$1\r\n4\r\n");
	RUN("HGET h zz", "$-1\r\n");
	RUN("HGET missing a", "$-1\r\n");
	RUN("HSET h e ", ":1\r\n"); /* an empty value */
	RUN("HGET h e", "$0\r\n\r\n");
	RUN("HEXISTS h e", ":1\r\n");
	RUN("HEXISTS h zz", ":0\r\n");
	RUN("HEXISTS missing a", ":0\r\n");
	RUN("HLEN missing", ":0\r\n");
	RUN("HMGET h a zz c", "*3\r\n$1\r\n4\r\n$-1\r\n$1\r\n5\r\n");
	RUN("HMGET missing a b", "*2\r\n$-1\r\n$-1\r\n");
	RUN("TYPE h", "+hash\r\n");
	RUN("DBSIZE", ":1\r\n");
}

Test(hash, arity_as_redis)
{
	static const char *const lines[][2] = {
		{"HSET h a", "hset"},
		{"HSET h a 1 b", "hset"},
		{"HSET h", "hset"},
		{"HGET h", "hget"},
		{"HGET h a b", "hget"},
		{"HDEL h", "hdel"},
		{"HMGET h", "hmget"},
		{"HEXISTS h", "hexists"},
		{"HLEN", "hlen"},
		{"HLEN h x", "hlen"},
		{"HGETALL", "hgetall"},
		{"HKEYS", "hkeys"},
		{"HVALS h x", "hvals"},
		{"HINCRBY h f", "hincrby"},
		{"HINCRBY h f 1 2", "hincrby"},
		{"HSCAN h", "hscan"},
		{"TYPE", "type"},
		{"TYPE a b", "type"},
	};
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		char want[128];
		snprintf(want, sizeof want,
			 "-ERR wrong number of arguments for '%s' command\r\n",
			 lines[i][1]);
		RUN(lines[i][0], want);
	}
	RUN("DBSIZE", ":0\r\n");
}

Test(hash, wrongtype_both_ways)
{
	RUN("SET s 1", "+OK\r\n");
	RUN("HSET h f 7", ":1\r\n");
	/* Hash commands on a string. */
	static const char *const on_string[] = {
		"HSET s f v", "HGET s f",    "HMGET s a",     "HDEL s a",
		"HLEN s",     "HEXISTS s a", "HINCRBY s b 5", "HGETALL s",
		"HKEYS s",    "HVALS s",     "HSCAN s 0",
	};
	for (size_t i = 0; i < sizeof on_string / sizeof on_string[0]; i++)
		RUN(on_string[i], WRONGTYPE);
	/* String commands on a hash. */
	static const char *const on_hash[] = {
		"GET h",      "SET h x GET", "GETEX h",	       "GETEX h PX 10",
		"APPEND h x", "INCR h",	     "DECR h",	       "INCRBY h 2",
		"DECRBY h 2", "STRLEN h",    "SET h x NX GET",
	};
	for (size_t i = 0; i < sizeof on_hash / sizeof on_hash[0]; i++)
		RUN(on_hash[i], WRONGTYPE);
	/* Nothing changed. */
	RUN("GET s", "$1\r\n1\r\n");
	RUN("HGETALL h", "*2\r\n$1\r\nf\r\n$1\r\n7\r\n");
	RUN("TTL h", ":-1\r\n");
	/* MGET answers nil for a hash; HINCRBY checks its increment first. */
	RUN("MGET h s", "*2\r\n$-1\r\n$1\r\n1\r\n");
	RUN("HINCRBY s a abc",
	    "-ERR value is not an integer or out of range\r\n");
	/* SET and MSET replace a hash, as in Redis; SET NX does not. */
	RUN("SET h x NX", "$-1\r\n");
	RUN("TYPE h", "+hash\r\n");
	RUN("SET h x", "+OK\r\n");
	RUN("TYPE h", "+string\r\n");
	RUN("GET h", "$1\r\nx\r\n");
	RUN("HSET h2 f v", ":1\r\n");
	RUN("MSET h2 y s 2", "+OK\r\n");
	RUN("GET h2", "$1\r\ny\r\n");
	RUN("HSET h3 f v", ":1\r\n");
	RUN("SET h3 z EX 100", "+OK\r\n");
	RUN("TTL h3", ":100\r\n");
	RUN("TYPE nothing", "+none\r\n");
	RUN("TYPE s", "+string\r\n");
}

Test(hash, hdel_of_the_last_field_removes_the_key)
{
	RUN("HSET h a 1 b 2 c 3", ":3\r\n");
	RUN("HDEL h a zz a", ":1\r\n");
	RUN("HDEL missing a", ":0\r\n");
	RUN("HLEN h", ":2\r\n");
	RUN("HDEL h b c", ":2\r\n");
	RUN("EXISTS h", ":0\r\n");
	RUN("TYPE h", "+none\r\n");
	RUN("KEYS *", "*0\r\n");
	RUN("DBSIZE", ":0\r\n");
	RUN("HGETALL h", "*0\r\n");
	cr_assert_eq(kv->table.hashes, 0);
	/* A hash made again starts afresh. */
	RUN("HSET h a 1", ":1\r\n");
	RUN("HLEN h", ":1\r\n");
}

Test(hash, hincrby_as_redis)
{
	RUN("HINCRBY h f -3", ":-3\r\n"); /* a missing key and field */
	RUN("HINCRBY h f 5", ":2\r\n");
	RUN("HINCRBY h g 0", ":0\r\n");
	RUN("HGETALL h", "*4\r\n$1\r\nf\r\n$1\r\n2\r\n$1\r\ng\r\n$1\r\n0\r\n");
	RUN("HINCRBY h f x",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("HINCRBY h f 1.5",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("HINCRBY h f 99999999999999999999",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("HINCRBY h n 9223372036854775807", ":9223372036854775807\r\n");
	RUN("HINCRBY h n 1", "-ERR increment or decrement would overflow\r\n");
	RUN("HINCRBY h n -1", ":9223372036854775806\r\n");
	RUN("HINCRBY h m -9223372036854775808", ":-9223372036854775808\r\n");
	RUN("HINCRBY h m -1", "-ERR increment or decrement would overflow\r\n");
	RUN("HGET h m", "$20\r\n-9223372036854775808\r\n");
	static const char *const not_int[] = {"abc", "010", "+1",
					      "-0",  "",    "1.0"};
	for (size_t i = 0; i < sizeof not_int / sizeof not_int[0]; i++) {
		runf(":1\r\n", "HSET s%zu v %s", i, not_int[i]);
		runf("-ERR hash value is not an integer\r\n",
		     "HINCRBY s%zu v 1", i);
		/* The refusal left no empty hash behind either. */
		runf("*1\r\n$1\r\nv\r\n", "HKEYS s%zu", i);
	}
	RUN("HINCRBY z f 0", ":0\r\n");
	RUN("HGET z f", "$1\r\n0\r\n");
}

/* Fill two maps with the same fields through different histories. */
static void same_fields_other_history(struct baton_kv *a, struct baton_kv *b)
{
	char line[64];
	for (int i = 0; i < 300; i++) {
		snprintf(line, sizeof line, "HSET h f%d v%d", i, i);
		kvt_run(a, line);
	}
	/* b: backwards, via far more fields (the table grows, then
	 * shrinks), and via other values. */
	for (int i = 2999; i >= 0; i--) {
		snprintf(line, sizeof line, "HSET h f%d old", i);
		kvt_run(b, line);
	}
	for (int i = 2999; i >= 300; i--) {
		snprintf(line, sizeof line, "HDEL h f%d", i);
		kvt_run(b, line);
	}
	for (int i = 0; i < 300; i++) {
		snprintf(line, sizeof line, "HSET h f%d v%d", i, i);
		kvt_run(b, line);
	}
}

Test(hash, field_order_depends_on_the_fields_alone)
{
	struct baton_kv *other = kvt_new();
	kvt_use(3, T0);
	same_fields_other_history(kv, other);
	static const char *const reads[] = {"HGETALL h", "HKEYS h", "HVALS h",
					    "HSCAN h 0 COUNT 1000"};
	for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
		const char *r = kvt_run(kv, reads[i]);
		size_t n = strlen(r) + 1;
		char *a = malloc(n);
		cr_assert_not_null(a);
		memcpy(a, r, n);
		cr_assert_str_eq(kvt_run(other, reads[i]), a, "%s", reads[i]);
		free(a);
	}
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	image(kv, &sa);
	image(other, &sb);
	cr_assert_eq(sa.len, sb.len);
	cr_assert_eq(memcmp(sa.data, sb.data, sa.len), 0);
	cr_assert_eq(kv_watch_hash(kv, (const uint8_t *)"h", 1),
		     kv_watch_hash(other, (const uint8_t *)"h", 1));
	baton_buf_free(&sa);
	baton_buf_free(&sb);
	kv_destroy(other);
}

Test(hash, hkeys_hvals_hgetall_agree)
{
	RUN("HSET h a 1 b 2 c 3 d 4", ":4\r\n");
	/* The fields and values of HGETALL, split, are HKEYS and HVALS:
	 * each element is "$1\r\nX\r\n", 7 bytes. */
	char all[256], keys[128], vals[128];
	snprintf(all, sizeof all, "%s", kvt_run(kv, "HGETALL h"));
	snprintf(keys, sizeof keys, "%s", kvt_run(kv, "HKEYS h"));
	snprintf(vals, sizeof vals, "%s", kvt_run(kv, "HVALS h"));
	cr_assert_eq(strncmp(all, "*8\r\n", 4), 0);
	cr_assert_eq(strlen(all), 4 + 8 * 7);
	char k2[64] = "*4\r\n", v2[64] = "*4\r\n";
	for (int i = 0; i < 8; i++)
		memcpy((i % 2 == 0 ? k2 : v2) + 4 + 7 * (i / 2),
		       all + 4 + 7 * i, 7);
	k2[4 + 4 * 7] = v2[4 + 4 * 7] = '\0';
	cr_assert_str_eq(keys, k2);
	cr_assert_str_eq(vals, v2);
	RUN("HKEYS missing", "*0\r\n");
	RUN("HVALS missing", "*0\r\n");
}

Test(hash, hscan_options_as_redis)
{
	RUN("SET s 1", "+OK\r\n");
	RUN("HSET h new 5 old 6", ":2\r\n");
	/* A missing key is the empty scan, whatever the options say. */
	RUN("HSCAN missing 0 FOO", "*2\r\n$1\r\n0\r\n*0\r\n");
	RUN("HSCAN missing x", "-ERR invalid cursor\r\n");
	RUN("HSCAN s 0", WRONGTYPE);
	RUN("HSCAN h x", "-ERR invalid cursor\r\n");
	RUN("HSCAN h -1", "-ERR invalid cursor\r\n");
	RUN("HSCAN h 0 FOO", "-ERR syntax error\r\n");
	RUN("HSCAN h 0 COUNT", "-ERR syntax error\r\n");
	RUN("HSCAN h 0 COUNT 0", "-ERR syntax error\r\n");
	RUN("HSCAN h 0 COUNT x",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("HSCAN h 0 TYPE string", "-ERR syntax error\r\n");
	RUN("HSCAN h 0 MATCH n*",
	    "*2\r\n$1\r\n0\r\n*2\r\n$3\r\nnew\r\n$1\r\n5\r\n");
	RUN("HSCAN h 0 MATCH o* NOVALUES",
	    "*2\r\n$1\r\n0\r\n*1\r\n$3\r\nold\r\n");
	RUN("HSCAN h 0 NOVALUES MATCH z*", "*2\r\n$1\r\n0\r\n*0\r\n");
	RUN("DBSIZE", ":2\r\n");
}

/* Parse an HSCAN reply: the cursor, and each field seen counted in seen[]
 * (fields are "f<number>"). */
static uint64_t hscan_reply(const char *r, int *seen, int n_fields)
{
	cr_assert_eq(strncmp(r, "*2\r\n$", 5), 0, "%s", r);
	const char *q = strchr(r + 5, '\n') + 1;
	uint64_t cursor = strtoull(q, NULL, 10);
	q = strchr(q, '\n') + 1;
	cr_assert_eq(*q, '*');
	long items = strtol(q + 1, NULL, 10);
	q = strchr(q, '\n') + 1;
	for (long i = 0; i < items; i++) {
		long len = strtol(q + 1, NULL, 10);
		q = strchr(q, '\n') + 1;
		if (i % 2 == 0) {
			cr_assert_eq(*q, 'f');
			int f = atoi(q + 1);
			cr_assert(f >= 0 && f < n_fields);
			seen[f]++;
		}
		q += len + 2;
	}
	cr_assert_eq(*q, '\0');
	return cursor;
}

Test(hash, hscan_sees_every_field_present_throughout)
{
	enum { FIELDS = 6000, STABLE = 2000 };
	static int seen[FIELDS];
	memset(seen, 0, sizeof seen);
	char line[128];
	for (int i = 0; i < STABLE; i++) {
		snprintf(line, sizeof line, "HSET h f%d %d", i, i);
		kvt_run(kv, line);
	}
	/* Fields STABLE.. come and go between the calls: the table grows
	 * past 4096 buckets, then shrinks back. */
	uint64_t cursor = 0, calls = 0, rng = 7;
	int next = STABLE;
	do {
		snprintf(line, sizeof line, "HSCAN h %llu COUNT %u",
			 (unsigned long long)cursor,
			 1 + (unsigned)(kvt_rand(&rng) % 40));
		cursor = hscan_reply(kvt_run(kv, line), seen, FIELDS);
		calls++;
		for (int i = 0; i < 40 && calls < 60 && next < FIELDS; i++) {
			snprintf(line, sizeof line, "HSET h f%d x", next++);
			kvt_run(kv, line);
		}
		if (calls >= 60 && next > STABLE) {
			for (int i = 0; i < 60 && next > STABLE; i++) {
				snprintf(line, sizeof line, "HDEL h f%d",
					 --next);
				kvt_run(kv, line);
			}
		}
		cr_assert_lt(calls, 100000u);
	} while (cursor != 0);
	for (int i = 0; i < STABLE; i++)
		cr_assert_geq(seen[i], 1, "field f%d never returned", i);
	cr_assert_gt(calls, 10u);
	RUN("HLEN h", ":2000\r\n");
}

Test(hash, hscan_with_match_and_count_over_a_big_hash)
{
	enum { FIELDS = 5000 };
	static int seen[FIELDS];
	memset(seen, 0, sizeof seen);
	char line[128];
	for (int i = 0; i < FIELDS; i++) {
		snprintf(line, sizeof line, "HSET big f%d %d", i, i);
		kvt_run(kv, line);
	}
	uint64_t cursor = 0, calls = 0;
	do {
		snprintf(line, sizeof line,
			 "HSCAN big %llu MATCH f1* COUNT 100",
			 (unsigned long long)cursor);
		cursor = hscan_reply(kvt_run(kv, line), seen, FIELDS);
		calls++;
	} while (cursor != 0);
	for (int i = 0; i < FIELDS; i++) {
		char name[16];
		snprintf(name, sizeof name, "%d", i);
		cr_assert_eq(seen[i], name[0] == '1' ? 1 : 0, "f%d", i);
	}
	/* COUNT 100 over 5000 fields: about 50 calls, never one. */
	cr_assert_gt(calls, 20u);
	cr_assert_lt(calls, 200u);
}

Test(hash, expiry_on_a_hash_works_as_on_a_string)
{
	RUN("HSET h a 1", ":1\r\n");
	RUN("EXPIRE h 100", ":1\r\n");
	RUN("TTL h", ":100\r\n");
	RUN("HSET h b 2", ":1\r\n"); /* a hash write keeps the TTL */
	RUN("HINCRBY h a 1", ":2\r\n");
	RUN("HDEL h b", ":1\r\n");
	RUN("PTTL h", ":100000\r\n");
	RUN("PERSIST h", ":1\r\n");
	RUN("TTL h", ":-1\r\n");
	RUN("PEXPIRE h 50", ":1\r\n");
	/* Lazily absent once machine time passes it. */
	sweep_at(kv, T0 + 50, 0);
	RUN("HGET h a", "$-1\r\n");
	RUN("HLEN h", ":0\r\n");
	RUN("TYPE h", "+none\r\n");
	RUN("EXISTS h", ":0\r\n");
	RUN("KEYS *", "*0\r\n");
	RUN("DBSIZE", ":1\r\n"); /* not deleted yet, as in Redis */
	/* A write finds it gone and makes a fresh hash, without a TTL. */
	RUN("HSET h c 3", ":1\r\n");
	RUN("HGETALL h", "*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
	RUN("TTL h", ":-1\r\n");
	/* A sweep deletes a due hash. */
	RUN("HSET g a 1 b 2", ":2\r\n");
	RUN("PEXPIRE g 10", ":1\r\n");
	RUN("HSET k a 1", ":1\r\n");
	RUN("PEXPIREAT k 1", ":1\r\n"); /* in the past: deleted at once */
	RUN("EXISTS k", ":0\r\n");
	sweep_at(kv, T0 + 100, 10);
	RUN("DBSIZE", ":1\r\n");
	cr_assert_eq(kv->table.hashes, 1);
	cr_assert_eq(kv_expiry_count(kv), 0);
	/* SET KEEPTTL on a hash keeps its TTL, plain SET drops it. */
	RUN("HSET t a 1", ":1\r\n");
	RUN("EXPIRE t 100", ":1\r\n");
	RUN("SET t v KEEPTTL", "+OK\r\n");
	RUN("TTL t", ":100\r\n");
	RUN("HSET u a 1", ":1\r\n");
	RUN("EXPIRE u 100", ":1\r\n");
	RUN("SET u v", "+OK\r\n");
	RUN("TTL u", ":-1\r\n");
}

Test(hash, hash_keys_are_keys)
{
	RUN("HSET h a 1", ":1\r\n");
	RUN("SET s 1", "+OK\r\n");
	RUN("EXISTS h s h missing", ":3\r\n");
	RUN("SCAN 0 MATCH h", "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nh\r\n");
	RUN("KEYS h", "*1\r\n$1\r\nh\r\n");
	RUN("DBSIZE", ":2\r\n");
	RUN("DEL h s", ":2\r\n");
	cr_assert_eq(kv->table.hashes, 0);
	RUN("HSET h a 1", ":1\r\n");
	RUN("HSET h2 a 1", ":1\r\n");
	RUN("FLUSHALL", "+OK\r\n");
	RUN("DBSIZE", ":0\r\n");
	cr_assert_eq(kv->table.hashes, 0);
}

Test(hash, transactions_and_watch)
{
	RUN("HSET h a 1", ":1\r\n");
	uint64_t w = kv_watch_hash(kv, (const uint8_t *)"h", 1);
	cr_assert_neq(w, 0);
	RUN("HSET h a 2", ":0\r\n");
	cr_assert_neq(kv_watch_hash(kv, (const uint8_t *)"h", 1), w);
	RUN("HSET h a 1", ":0\r\n"); /* A -> B -> A: the same content */
	cr_assert_eq(kv_watch_hash(kv, (const uint8_t *)"h", 1), w);
	RUN("EXPIRE h 100", ":1\r\n");
	cr_assert_neq(kv_watch_hash(kv, (const uint8_t *)"h", 1), w);
	RUN("PERSIST h", ":1\r\n");
	/* A string of the same bytes hashes apart from the hash. */
	RUN("SET s a", "+OK\r\n");
	cr_assert_neq(kv_watch_hash(kv, (const uint8_t *)"s", 1), w);
	/* An EXEC of hash commands: one entry, replies in order. */
	const char *cmds[][4] = {
		{"HSET", "h", "b", "5"},
		{"HINCRBY", "h", "b", "2"},
		{"HGETALL", "h", NULL, NULL},
		{"GET", "h", NULL, NULL},
	};
	int argcs[] = {4, 4, 2, 2};
	struct kv_txn_command txn[4];
	size_t lens[4][4];
	for (int i = 0; i < 4; i++) {
		for (int j = 0; j < argcs[i]; j++)
			lens[i][j] = strlen(cmds[i][j]);
		txn[i] = (struct kv_txn_command){
			argcs[i], (const uint8_t *const *)cmds[i], lens[i]};
	}
	struct kv_watch watch = {(const uint8_t *)"h", 1,
				 kv_watch_hash(kv, (const uint8_t *)"h", 1)};
	struct baton_buf p, r;
	baton_buf_init(&p);
	baton_buf_init(&r);
	cr_assert_eq(kv_encode_txn(T0 + 1, 1, &watch, 4, txn, &p), 0);
	cr_assert_eq(kv_apply(kv, (struct baton_machine_version){3}, p.data,
			      p.len, &r),
		     0);
	cr_assert_eq(baton_buf_append(&r, "", 1), 0);
	cr_assert_str_eq((const char *)r.data,
			 "*4\r\n:1\r\n:7\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n"
			 "$1\r\nb\r\n$1\r\n7\r\n" WRONGTYPE);
	/* The same EXEC again: the watched hash changed, nothing runs. */
	baton_buf_reset(&r);
	cr_assert_eq(kv_apply(kv, (struct baton_machine_version){3}, p.data,
			      p.len, &r),
		     0);
	cr_assert_eq(r.len, 5);
	cr_assert_eq(memcmp(r.data, "*-1\r\n", 5), 0);
	baton_buf_free(&p);
	baton_buf_free(&r);
}

/* ---- gating ---- */

static const char *const v3_commands[][2] = {
	{"TYPE h", "type"},	      {"HSET h f v", "hset"},
	{"HGET h f", "hget"},	      {"HMGET h f g", "hmget"},
	{"HDEL h f", "hdel"},	      {"HGETALL h", "hgetall"},
	{"HLEN h", "hlen"},	      {"HEXISTS h f", "hexists"},
	{"HINCRBY h f 1", "hincrby"}, {"HKEYS h", "hkeys"},
	{"HVALS h", "hvals"},	      {"HSCAN h 0", "hscan"},
};
#define V3_COMMANDS (sizeof v3_commands / sizeof v3_commands[0])

Test(hash, refused_under_versions_1_and_2)
{
	for (uint32_t v = 1; v <= 2; v++) {
		kvt_use(v, v >= 2 ? T0 : 0);
		for (size_t i = 0; i < V3_COMMANDS; i++) {
			char want[160];
			snprintf(want, sizeof want,
				 "-ERR command '%s' needs machine version 3; "
				 "the effective machine version is %u\r\n",
				 v3_commands[i][1], v);
			RUN(v3_commands[i][0], want);
		}
	}
	kvt_use(3, T0);
	RUN("DBSIZE", ":0\r\n");
	for (size_t i = 0; i < V3_COMMANDS; i++)
		cr_assert_eq(strstr(kvt_run(kv, v3_commands[i][0]),
				    "machine version"),
			     NULL, "%s", v3_commands[i][0]);
	/* HSET, then HDEL removed it, then HINCRBY made it again. */
	RUN("HGETALL h", "*2\r\n$1\r\nf\r\n$1\r\n1\r\n");
}

Test(hash, a_version_3_write_in_the_log_under_version_2_is_a_no_op)
{
	/* Encoded under version 3, logged after a downgrade's entry: every
	 * node replies the gate's -ERR and changes nothing. */
	struct baton_buf p, r;
	baton_buf_init(&p);
	baton_buf_init(&r);
	const char *argv[] = {"HSET", "h", "f", "v"};
	size_t lens[] = {4, 1, 1, 1};
	cr_assert_eq(
		kv_encode_v2(T0 + 5, 4, (const uint8_t *const *)argv, lens, &p),
		0);
	cr_assert_eq(kv_apply(kv, (struct baton_machine_version){2}, p.data,
			      p.len, &r),
		     0);
	cr_assert_eq(baton_buf_append(&r, "", 1), 0);
	cr_assert_str_eq((const char *)r.data,
			 "-ERR command 'hset' needs machine version 3; the "
			 "effective machine version is 2\r\n");
	cr_assert_eq(kv_dbsize(kv), 0);
	/* Format 1 under version 1 alike. */
	baton_buf_reset(&p);
	baton_buf_reset(&r);
	cr_assert_eq(kv_encode(4, (const uint8_t *const *)argv, lens, &p), 0);
	cr_assert_eq(kv_apply(kv, (struct baton_machine_version){1}, p.data,
			      p.len, &r),
		     0);
	cr_assert(strstr((const char *)r.data, "needs machine version 3") !=
		  NULL);
	cr_assert_eq(kv_dbsize(kv), 0);
	baton_buf_free(&p);
	baton_buf_free(&r);
}
