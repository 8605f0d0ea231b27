/*
 * SET's options and the expiry commands of machine version 2 against what
 * Redis 7 replies, errors included, run the way batond runs them (gate,
 * check, encode with a stamp, apply / read), with machine time moved by
 * stamped sweep entries only.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "resp.h"

static struct baton_kv *kv;

/* Machine time at the start of each test: 2023-11-14T22:13:20Z. */
#define T0 1700000000000ull
#define T0_S 1700000000ull

/* Move machine time to ms by a stamped sweep that deletes nothing, and
 * stamp later writes with it. */
static void clock_to(uint64_t ms)
{
	struct baton_buf b, r;
	baton_buf_init(&b);
	baton_buf_init(&r);
	cr_assert_eq(kv_encode_sweep(ms, 0, &b), 0);
	struct baton_machine_version v2 = {2};
	cr_assert_eq(kv_apply(kv, v2, b.data, b.len, &r), 0);
	cr_assert_eq(r.len, 4); /* ":0\r\n" */
	kvt_use(2, ms);
	baton_buf_free(&b);
	baton_buf_free(&r);
}

static void setup(void)
{
	kv = kvt_new();
	clock_to(T0);
}

static void teardown(void)
{
	kv_destroy(kv);
}

TestSuite(expire, .init = setup, .fini = teardown);

#define RUN(line, want) cr_assert_str_eq(kvt_run(kv, line), want, "%s", line)

/* RUN with a formatted command line. */
static void runf(const char *want, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void runf(const char *want, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	RUN(line, want);
}

Test(expire, lookup_flags_and_versions)
{
	const char *writes[] = {"GETEX",    "EXPIRE",	 "PEXPIRE",
				"EXPIREAT", "PEXPIREAT", "PERSIST"};
	for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
		const struct kv_command *c = kv_lookup(
			(const uint8_t *)writes[i], strlen(writes[i]));
		cr_assert_not_null(c, "%s", writes[i]);
		cr_assert_eq(c->flags, KV_WRITE, "%s", writes[i]);
		cr_assert_eq(c->machine_min, 2, "%s", writes[i]);
	}
	const char *reads[] = {"TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"};
	for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
		const struct kv_command *c =
			kv_lookup((const uint8_t *)reads[i], strlen(reads[i]));
		cr_assert_not_null(c, "%s", reads[i]);
		cr_assert_eq(c->flags, KV_READ, "%s", reads[i]);
		cr_assert_eq(c->machine_min, 2, "%s", reads[i]);
	}
	const char *old[] = {"GET", "SET", "DEL", "MSET", "SCAN", "FLUSHALL"};
	for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
		cr_assert_eq(kv_lookup((const uint8_t *)old[i], strlen(old[i]))
				     ->machine_min,
			     1, "%s", old[i]);
}

Test(expire, set_ex_ttl_and_machine_time)
{
	RUN("SET a v EX 100", "+OK\r\n");
	RUN("TTL a", ":100\r\n");
	RUN("PTTL a", ":100000\r\n");
	runf(":1700000100\r\n", "EXPIRETIME a");
	runf(":1700000100000\r\n", "PEXPIRETIME a");
	clock_to(T0 + 40500);
	RUN("TTL a", ":60\r\n"); /* 59.5 s rounds to 60, as Redis */
	RUN("PTTL a", ":59500\r\n");
	clock_to(T0 + 40501);
	RUN("TTL a", ":59\r\n");
	clock_to(T0 + 99999);
	RUN("GET a", "$1\r\nv\r\n");
	RUN("PTTL a", ":1\r\n");
	clock_to(T0 + 100000);
	RUN("GET a", "$-1\r\n");
	RUN("TTL a", ":-2\r\n");
	RUN("PTTL a", ":-2\r\n");
	RUN("EXPIRETIME a", ":-2\r\n");
	RUN("EXISTS a", ":0\r\n");
	/* Not deleted until a sweep or a write touches it (as Redis). */
	RUN("DBSIZE", ":1\r\n");
	RUN("DEL a", ":0\r\n");
	RUN("DBSIZE", ":0\r\n");
	cr_assert_eq(kv_expiry_count(kv), 0);
	cr_assert_eq(kv_machine_time_ms(kv), T0 + 100000);
}

Test(expire, set_options)
{
	RUN("SET a v PX 1500", "+OK\r\n");
	RUN("PTTL a", ":1500\r\n");
	RUN("SET a v2", "+OK\r\n"); /* a plain SET drops the expiry */
	RUN("TTL a", ":-1\r\n");
	RUN("SET a v EX 10", "+OK\r\n");
	RUN("SET a v3 KEEPTTL", "+OK\r\n");
	RUN("TTL a", ":10\r\n");
	RUN("GET a", "$2\r\nv3\r\n");
	runf("+OK\r\n", "SET a v exat %llu", T0_S + 20);
	RUN("TTL a", ":20\r\n");
	runf("+OK\r\n", "SET a v pxat %llu", T0 + 5000);
	RUN("PTTL a", ":5000\r\n");
	RUN("SET a v EX 10 EX 20", "+OK\r\n"); /* the last one wins */
	RUN("TTL a", ":20\r\n");
	RUN("SET a v KEEPTTL KEEPTTL", "+OK\r\n");
	RUN("TTL a", ":20\r\n");
	/* An absolute time in the past: set and gone at once. */
	runf("+OK\r\n", "SET a v EXAT %llu", T0_S - 1);
	RUN("GET a", "$-1\r\n");
	RUN("DBSIZE", ":0\r\n");
	runf("+OK\r\n", "SET b v PXAT %llu", T0);
	RUN("EXISTS b", ":0\r\n");
	RUN("DBSIZE", ":0\r\n");
	cr_assert_eq(kv_expiry_count(kv), 0);
}

Test(expire, set_nx_xx_get)
{
	RUN("SET a 1 GET", "$-1\r\n");
	RUN("SET a 2 GET", "$1\r\n1\r\n");
	RUN("SET a 3 NX GET", "$1\r\n2\r\n"); /* not set: the old value */
	RUN("GET a", "$1\r\n2\r\n");
	RUN("SET b 1 XX GET", "$-1\r\n");
	RUN("EXISTS b", ":0\r\n");
	RUN("SET b 1 NX GET", "$-1\r\n");
	RUN("GET b", "$1\r\n1\r\n");
	RUN("SET a 4 XX GET EX 10", "$1\r\n2\r\n");
	RUN("TTL a", ":10\r\n");
	RUN("SET a 5 get get", "$1\r\n4\r\n");
	RUN("TTL a", ":-1\r\n");
	RUN("SET c 1 NX EX 5", "+OK\r\n");
	RUN("SET c 2 NX EX 50", "$-1\r\n");
	RUN("TTL c", ":5\r\n");
	RUN("SET c 2 XX PX 50", "+OK\r\n");
	RUN("PTTL c", ":50\r\n");
	runf("$1\r\n5\r\n", "SET a 6 GET EXAT %llu", T0_S);
	RUN("GET a", "$-1\r\n");
}

Test(expire, set_errors)
{
	RUN("SET a old", "+OK\r\n");
	const char *syntax[] = {
		"SET a v EX 10 PX 10",	 "SET a v EX 10 KEEPTTL",
		"SET a v KEEPTTL EX 10", "SET a v EX",
		"SET a v NX XX",	 "SET a v PERSIST",
		"SET a v EXAT 10 EXAT",	 "SET a v PX 1 PXAT 2",
		"SET a v EXAT 5 PXAT 5", "SET a v KEEPTTL PXAT 5",
		"SET a v EXX 1"};
	for (size_t i = 0; i < sizeof syntax / sizeof syntax[0]; i++)
		RUN(syntax[i], "-ERR syntax error\r\n");
	const char *invalid = "-ERR invalid expire time in 'set' command\r\n";
	RUN("SET a v EX 0", invalid);
	RUN("SET a v PX -1", invalid);
	RUN("SET a v EXAT 0", invalid);
	RUN("SET a v EX 9223372036854776", invalid);	 /* seconds to ms */
	RUN("SET a v EXAT 9223372036854775", "+OK\r\n"); /* it fits */
	RUN("SET a v EX 9223372036854775", invalid);	 /* + machine time */
	RUN("SET a old", "+OK\r\n");
	/* Relative: overflows once the machine time is added (at apply). */
	RUN("SET a v PX 9223372036854775807", invalid);
	RUN("SET a v EX abc",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("SET a v EX 1.5",
	    "-ERR value is not an integer or out of range\r\n");
	/* The syntax comes first, then the value. */
	RUN("SET a v EX abc NX XX", "-ERR syntax error\r\n");
	RUN("GET a", "$3\r\nold\r\n");
	RUN("TTL a", ":-1\r\n");
}

Test(expire, getex)
{
	RUN("GETEX missing", "$-1\r\n");
	RUN("GETEX missing EX abc", "$-1\r\n"); /* key first, as Redis */
	RUN("GETEX", "-ERR wrong number of arguments for 'getex' command\r\n");
	RUN("SET a v", "+OK\r\n");
	RUN("GETEX a", "$1\r\nv\r\n");
	RUN("TTL a", ":-1\r\n");
	RUN("GETEX a EX 100", "$1\r\nv\r\n");
	RUN("TTL a", ":100\r\n");
	RUN("GETEX a", "$1\r\nv\r\n"); /* no option keeps it */
	RUN("TTL a", ":100\r\n");
	RUN("GETEX a PERSIST", "$1\r\nv\r\n");
	RUN("TTL a", ":-1\r\n");
	RUN("GETEX a PX 2000", "$1\r\nv\r\n");
	RUN("PTTL a", ":2000\r\n");
	runf("$1\r\nv\r\n", "GETEX a EXAT %llu", T0_S + 7);
	RUN("TTL a", ":7\r\n");
	runf("$1\r\nv\r\n", "GETEX a PXAT %llu", T0 + 7001);
	RUN("PTTL a", ":7001\r\n");
	const char *syntax[] = {"GETEX a NX",
				"GETEX a XX",
				"GETEX a KEEPTTL",
				"GETEX a GET",
				"GETEX a EX 10 PERSIST",
				"GETEX a PERSIST EX 10",
				"GETEX a EX 1 PX 1",
				"GETEX a EX"};
	for (size_t i = 0; i < sizeof syntax / sizeof syntax[0]; i++)
		RUN(syntax[i], "-ERR syntax error\r\n");
	RUN("GETEX a EX 0", "-ERR invalid expire time in 'getex' command\r\n");
	RUN("GETEX a PXAT -5",
	    "-ERR invalid expire time in 'getex' command\r\n");
	RUN("GETEX a EX abc",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("PTTL a", ":7001\r\n");
	/* An absolute time in the past: the value, then the key is gone. */
	runf("$1\r\nv\r\n", "GETEX a PXAT %llu", T0 - 1);
	RUN("GET a", "$-1\r\n");
	RUN("DBSIZE", ":0\r\n");
}

Test(expire, expire_family)
{
	RUN("EXPIRE missing 10", ":0\r\n");
	RUN("SET a v", "+OK\r\n");
	RUN("EXPIRE a 100", ":1\r\n");
	RUN("TTL a", ":100\r\n");
	RUN("PEXPIRE a 5000", ":1\r\n");
	RUN("PTTL a", ":5000\r\n");
	runf(":1\r\n", "EXPIREAT a %llu", T0_S + 50);
	RUN("TTL a", ":50\r\n");
	runf(":1\r\n", "PEXPIREAT a %llu", T0 + 7000);
	RUN("PTTL a", ":7000\r\n");
	RUN("EXPIRE a -1", ":1\r\n"); /* in the past: deleted */
	RUN("EXISTS a", ":0\r\n");
	RUN("SET a v", "+OK\r\n");
	RUN("EXPIRE a 0", ":1\r\n");
	RUN("EXISTS a", ":0\r\n");
	RUN("SET a v", "+OK\r\n");
	RUN("PEXPIREAT a 0", ":1\r\n");
	RUN("DBSIZE", ":0\r\n");
	RUN("SET a v", "+OK\r\n");
	RUN("EXPIREAT a 9223372036854775", ":1\r\n"); /* absolute: fits */
	RUN("TTL a", ":9223370336854775\r\n");
	RUN("EXPIRE a", "-ERR wrong number of arguments for 'expire' "
			"command\r\n");
}

Test(expire, expire_conditions)
{
	RUN("SET a v", "+OK\r\n");
	RUN("EXPIRE a 100 XX", ":0\r\n"); /* no expiry yet */
	RUN("EXPIRE a 100 GT", ":0\r\n"); /* none counts as infinite */
	RUN("EXPIRE a 100 NX", ":1\r\n");
	RUN("EXPIRE a 200 NX", ":0\r\n");
	RUN("EXPIRE a 50 GT", ":0\r\n");
	RUN("EXPIRE a 100 GT", ":0\r\n"); /* equal is not greater */
	RUN("EXPIRE a 200 gt", ":1\r\n");
	RUN("EXPIRE a 300 LT", ":0\r\n");
	RUN("EXPIRE a 200 LT", ":0\r\n");
	RUN("EXPIRE a 100 lt", ":1\r\n");
	RUN("TTL a", ":100\r\n");
	RUN("EXPIRE a 150 XX GT", ":1\r\n");
	RUN("EXPIRE a 120 XX LT", ":1\r\n");
	RUN("TTL a", ":120\r\n");
	RUN("PERSIST a", ":1\r\n");
	RUN("EXPIRE a 100 LT", ":1\r\n"); /* below infinite */
	RUN("EXPIRE a 100 XX XX", ":1\r\n");
	RUN("EXPIRE missing 100 NX", ":0\r\n");
	const char *nx = "-ERR NX and XX, GT or LT options at the same time "
			 "are not compatible\r\n";
	RUN("EXPIRE a 10 NX XX", nx);
	RUN("EXPIRE a 10 GT NX", nx);
	RUN("PEXPIRE a 10 NX LT", nx);
	RUN("EXPIRE a 10 GT LT",
	    "-ERR GT and LT options at the same time are not compatible\r\n");
	RUN("EXPIRE a 10 FOO", "-ERR Unsupported option FOO\r\n");
	RUN("EXPIRE a abc FOO", "-ERR Unsupported option FOO\r\n");
	RUN("EXPIRE a abc", "-ERR value is not an integer or out of range\r\n");
	RUN("EXPIRE a 9223372036854776",
	    "-ERR invalid expire time in 'expire' command\r\n");
	RUN("EXPIREAT a -9223372036854776",
	    "-ERR invalid expire time in 'expireat' command\r\n");
	RUN("PEXPIRE a 9223372036854775807",
	    "-ERR invalid expire time in 'pexpire' command\r\n");
	RUN("TTL a", ":100\r\n");
}

Test(expire, persist_and_ttl)
{
	RUN("PERSIST missing", ":0\r\n");
	RUN("TTL missing", ":-2\r\n");
	RUN("PEXPIRETIME missing", ":-2\r\n");
	RUN("SET a v", "+OK\r\n");
	RUN("PERSIST a", ":0\r\n");
	RUN("TTL a", ":-1\r\n");
	RUN("PTTL a", ":-1\r\n");
	RUN("EXPIRETIME a", ":-1\r\n");
	RUN("PEXPIRETIME a", ":-1\r\n");
	RUN("PEXPIRE a 1499", ":1\r\n");
	RUN("TTL a", ":1\r\n");
	RUN("PEXPIRE a 1500", ":1\r\n");
	RUN("TTL a", ":2\r\n");
	RUN("PEXPIRE a 499", ":1\r\n");
	RUN("TTL a", ":0\r\n");
	runf(":1700000000\r\n", "EXPIRETIME a"); /* T0 + 499 ms rounds down */
	RUN("PERSIST a", ":1\r\n");
	RUN("PERSIST a", ":0\r\n");
	RUN("TTL a", ":-1\r\n");
	RUN("TTL", "-ERR wrong number of arguments for 'ttl' command\r\n");
	RUN("PERSIST a b",
	    "-ERR wrong number of arguments for 'persist' command\r\n");
	cr_assert_eq(kv_expiry_count(kv), 0);
}

Test(expire, other_writes_keep_or_drop_the_expiry)
{
	RUN("SET n 1 EX 100", "+OK\r\n");
	RUN("INCR n", ":2\r\n");
	RUN("INCRBY n 5", ":7\r\n");
	RUN("DECR n", ":6\r\n");
	RUN("TTL n", ":100\r\n"); /* as Redis: INCR keeps it */
	RUN("APPEND n x", ":2\r\n");
	RUN("TTL n", ":100\r\n");
	RUN("MSET n 1 m 2", "+OK\r\n"); /* MSET is SET: drops it */
	RUN("TTL n", ":-1\r\n");
	RUN("SET a v EX 10", "+OK\r\n");
	RUN("SET b v EX 10", "+OK\r\n");
	cr_assert_eq(kv_expiry_count(kv), 2);
	RUN("DEL a", ":1\r\n");
	cr_assert_eq(kv_expiry_count(kv), 1);
	RUN("FLUSHALL", "+OK\r\n");
	cr_assert_eq(kv_expiry_count(kv), 0);
	uint64_t at;
	cr_assert(!kv_expiry_next(kv, &at));
}

Test(expire, an_expired_key_is_absent_to_every_command)
{
	const char *setup_lines[] = {"SET k 5 PX 10", "SET k2 x PX 10",
				     "SET live y"};
	for (size_t i = 0; i < 3; i++)
		RUN(setup_lines[i], "+OK\r\n");
	clock_to(T0 + 10);
	RUN("GET k", "$-1\r\n");
	RUN("MGET k live", "*2\r\n$-1\r\n$1\r\ny\r\n");
	RUN("EXISTS k k2 live", ":1\r\n");
	RUN("STRLEN k", ":0\r\n");
	RUN("KEYS *", "*1\r\n$4\r\nlive\r\n");
	RUN("SCAN 0 COUNT 100", "*2\r\n$1\r\n0\r\n*1\r\n$4\r\nlive\r\n");
	RUN("TTL k", ":-2\r\n");
	RUN("PERSIST k", ":0\r\n");
	RUN("EXPIRE k 100", ":0\r\n");
	RUN("GETEX k PERSIST", "$-1\r\n");
	RUN("SET k v XX", "$-1\r\n");
	RUN("INCR k", ":1\r\n"); /* a fresh key, without the old expiry */
	RUN("TTL k", ":-1\r\n");
	RUN("SET k2 v NX", "+OK\r\n");
	RUN("TTL k2", ":-1\r\n");
	RUN("DBSIZE", ":3\r\n");
	cr_assert_eq(kv_expiry_count(kv), 0);
}

Test(expire, version_1_refuses_them)
{
	kvt_use(1, 0);
	const char *lines[] = {"EXPIRE a 10", "TTL a",	       "PERSIST a",
			       "GETEX a",     "PEXPIREAT a 5", "EXPIRETIME a"};
	const char *names[] = {"expire", "ttl",	      "persist",
			       "getex",	 "pexpireat", "expiretime"};
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		char want[160];
		snprintf(want, sizeof want,
			 "-ERR command '%s' needs machine version 2; the "
			 "effective machine version is 1\r\n",
			 names[i]);
		RUN(lines[i], want);
	}
	RUN("SET a v NX", "+OK\r\n");
	RUN("SET a v XX KEEPTTL",
	    "-ERR option 'keepttl' of command 'set' needs machine version 2; "
	    "the effective machine version is 1\r\n");
}
