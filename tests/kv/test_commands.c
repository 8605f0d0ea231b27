/*
 * Each command of machine version 1 against what Redis 7 replies, errors
 * included, run the way batond runs them (check, encode, apply / read).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "resp.h"

static struct baton_kv *kv;

static void setup(void)
{
	kv = kvt_new();
}

static void teardown(void)
{
	kv_destroy(kv);
}

TestSuite(commands, .init = setup, .fini = teardown);

#define RUN(line, want) cr_assert_str_eq(kvt_run(kv, line), want, "%s", line)

Test(commands, lookup_is_case_insensitive)
{
	const struct kv_command *c = kv_lookup((const uint8_t *)"gEt", 3);
	cr_assert_not_null(c);
	cr_assert_str_eq(c->name, "get");
	cr_assert_eq(c->arity, 2);
	cr_assert(c->flags & KV_READ);
	cr_assert_null(kv_lookup((const uint8_t *)"GETX", 4));
	cr_assert_null(kv_lookup((const uint8_t *)"GE", 2));
	cr_assert_null(kv_lookup((const uint8_t *)"", 0));
	const char *writes[] = {"SET",	  "DEL",    "INCR", "INCRBY",  "DECR",
				"DECRBY", "APPEND", "MSET", "FLUSHALL"};
	for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
		c = kv_lookup((const uint8_t *)writes[i], strlen(writes[i]));
		cr_assert_not_null(c, "%s", writes[i]);
		cr_assert_eq(c->flags & ~(uint32_t)KV_GROWS, (uint32_t)KV_WRITE,
			     "%s", writes[i]);
		/* --maxmemory refuses the writes that may grow the map, and
		 * never those that only shrink it. */
		bool shrinks = strcmp(writes[i], "DEL") == 0 ||
			       strcmp(writes[i], "FLUSHALL") == 0;
		cr_assert_eq((c->flags & KV_GROWS) == 0, shrinks, "%s",
			     writes[i]);
	}
	const char *reads[] = {"GET",	 "EXISTS", "STRLEN", "MGET",
			       "DBSIZE", "SCAN",   "KEYS"};
	for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
		c = kv_lookup((const uint8_t *)reads[i], strlen(reads[i]));
		cr_assert_not_null(c, "%s", reads[i]);
		cr_assert_eq(c->flags, KV_READ, "%s", reads[i]);
	}
}

Test(commands, get_set)
{
	RUN("GET a", "$-1\r\n");
	RUN("SET a hello", "+OK\r\n");
	RUN("GET a", "$5\r\nhello\r\n");
	RUN("set a world", "+OK\r\n");
	RUN("get a", "$5\r\nworld\r\n");
	RUN("SET e ", "+OK\r\n"); /* an empty value */
	RUN("GET e", "$0\r\n\r\n");
	RUN("SET  v", "+OK\r\n"); /* an empty key */
	RUN("GET ", "$1\r\nv\r\n");
}

Test(commands, set_nx_xx)
{
	RUN("SET a 1 XX", "$-1\r\n");
	RUN("GET a", "$-1\r\n");
	RUN("SET a 1 NX", "+OK\r\n");
	RUN("SET a 2 nx", "$-1\r\n");
	RUN("GET a", "$1\r\n1\r\n");
	RUN("SET a 3 xx", "+OK\r\n");
	RUN("GET a", "$1\r\n3\r\n");
	RUN("SET a 4 NX NX", "$-1\r\n");
	RUN("SET a 4 XX XX", "+OK\r\n");
	RUN("SET a 5 NX XX", "-ERR syntax error\r\n");
	RUN("SET a 5 XX NX", "-ERR syntax error\r\n");
	/* Options of machine version 2 are refused under version 1 (they
	 * were syntax errors before version 2 existed); test_expire.c runs
	 * them under version 2. */
	RUN("SET a 5 EX 10",
	    "-ERR option 'ex' of command 'set' needs machine "
	    "version 2; the effective machine version is 1\r\n");
	RUN("SET a 5 PX 10",
	    "-ERR option 'px' of command 'set' needs machine "
	    "version 2; the effective machine version is 1\r\n");
	RUN("SET a 5 KEEPTTL",
	    "-ERR option 'keepttl' of command 'set' needs machine version 2; "
	    "the effective machine version is 1\r\n");
	RUN("SET a 5 GET", "-ERR option 'get' of command 'set' needs machine "
			   "version 2; the effective machine version is 1\r\n");
	RUN("SET a 5 NXX", "-ERR syntax error\r\n");
	RUN("GET a", "$1\r\n4\r\n");
}

Test(commands, wrong_number_of_arguments)
{
	RUN("GET", "-ERR wrong number of arguments for 'get' command\r\n");
	RUN("GET a b", "-ERR wrong number of arguments for 'get' command\r\n");
	RUN("SET a", "-ERR wrong number of arguments for 'set' command\r\n");
	RUN("DEL", "-ERR wrong number of arguments for 'del' command\r\n");
	RUN("EXISTS",
	    "-ERR wrong number of arguments for 'exists' command\r\n");
	RUN("INCR", "-ERR wrong number of arguments for 'incr' command\r\n");
	RUN("INCRBY a",
	    "-ERR wrong number of arguments for 'incrby' command\r\n");
	RUN("DECR a b",
	    "-ERR wrong number of arguments for 'decr' command\r\n");
	RUN("DECRBY a 1 2",
	    "-ERR wrong number of arguments for 'decrby' command\r\n");
	RUN("APPEND a",
	    "-ERR wrong number of arguments for 'append' command\r\n");
	RUN("STRLEN",
	    "-ERR wrong number of arguments for 'strlen' command\r\n");
	RUN("MGET", "-ERR wrong number of arguments for 'mget' command\r\n");
	RUN("MSET a", "-ERR wrong number of arguments for 'mset' command\r\n");
	RUN("MSET a 1 b",
	    "-ERR wrong number of arguments for 'mset' command\r\n");
	RUN("DBSIZE x",
	    "-ERR wrong number of arguments for 'dbsize' command\r\n");
	RUN("SCAN", "-ERR wrong number of arguments for 'scan' command\r\n");
	RUN("KEYS", "-ERR wrong number of arguments for 'keys' command\r\n");
	RUN("KEYS a b",
	    "-ERR wrong number of arguments for 'keys' command\r\n");
	RUN("DBSIZE", ":0\r\n"); /* nothing was written */
}

Test(commands, del_and_exists)
{
	RUN("MSET a 1 b 2 c 3", "+OK\r\n");
	RUN("EXISTS a", ":1\r\n");
	RUN("EXISTS a a a", ":3\r\n"); /* duplicates count, as in Redis */
	RUN("EXISTS a b z", ":2\r\n");
	RUN("DEL a z", ":1\r\n");
	RUN("DEL b b", ":1\r\n");
	RUN("EXISTS a b c", ":1\r\n");
	RUN("DEL a", ":0\r\n");
	RUN("DBSIZE", ":1\r\n");
}

Test(commands, incr_decr)
{
	RUN("INCR n", ":1\r\n");
	RUN("INCR n", ":2\r\n");
	RUN("INCRBY n 40", ":42\r\n");
	RUN("DECR n", ":41\r\n");
	RUN("DECRBY n 50", ":-9\r\n");
	RUN("GET n", "$2\r\n-9\r\n");
	RUN("INCRBY n -1", ":-10\r\n");
	RUN("DECRBY n -10", ":0\r\n");
	RUN("DECR m", ":-1\r\n");
	RUN("INCRBY k 0", ":0\r\n");
	RUN("GET k", "$1\r\n0\r\n");
	RUN("SET s 0010", "+OK\r\n");
	RUN("INCR s", "-ERR value is not an integer or out of range\r\n");
	RUN("SET s abc", "+OK\r\n");
	RUN("INCR s", "-ERR value is not an integer or out of range\r\n");
	const char *spaced[] = {"SET", "s", " 1"};
	size_t spaced_lens[] = {3, 1, 2};
	cr_assert_str_eq(kvt_runv(kv, 3, spaced, spaced_lens), "+OK\r\n");
	RUN("INCR s", "-ERR value is not an integer or out of range\r\n");
	RUN("SET s 9223372036854775808", "+OK\r\n");
	RUN("INCR s", "-ERR value is not an integer or out of range\r\n");
	RUN("GET s", "$19\r\n9223372036854775808\r\n");
	RUN("INCRBY n x", "-ERR value is not an integer or out of range\r\n");
	RUN("INCRBY n 1.5", "-ERR value is not an integer or out of range\r\n");
	RUN("INCRBY n +1", "-ERR value is not an integer or out of range\r\n");
	RUN("DECRBY n ", "-ERR value is not an integer or out of range\r\n");
	RUN("GET n", "$1\r\n0\r\n");
}

Test(commands, incr_overflow)
{
	RUN("SET n 9223372036854775807", "+OK\r\n");
	RUN("INCR n", "-ERR increment or decrement would overflow\r\n");
	RUN("INCRBY n 1", "-ERR increment or decrement would overflow\r\n");
	RUN("INCRBY n 0", ":9223372036854775807\r\n");
	RUN("DECRBY n -1", "-ERR increment or decrement would overflow\r\n");
	RUN("SET n -9223372036854775808", "+OK\r\n");
	RUN("DECR n", "-ERR increment or decrement would overflow\r\n");
	RUN("INCRBY n -1", "-ERR increment or decrement would overflow\r\n");
	RUN("INCRBY n 9223372036854775807", ":-1\r\n");
	RUN("DECRBY n -9223372036854775808",
	    "-ERR decrement would overflow\r\n");
	RUN("INCRBY n -9223372036854775808",
	    "-ERR increment or decrement would overflow\r\n");
	RUN("INCRBY n -9223372036854775807", ":-9223372036854775808\r\n");
	RUN("GET n", "$20\r\n-9223372036854775808\r\n");
}

Test(commands, append_and_strlen)
{
	RUN("STRLEN a", ":0\r\n");
	RUN("APPEND a hello", ":5\r\n");
	RUN("APPEND a _world", ":11\r\n");
	RUN("GET a", "$11\r\nhello_world\r\n");
	RUN("STRLEN a", ":11\r\n");
	RUN("APPEND a ", ":11\r\n");
	RUN("APPEND e ", ":0\r\n");
	RUN("EXISTS e", ":1\r\n");
	RUN("SET n 41", "+OK\r\n");
	RUN("APPEND n 0", ":3\r\n");
	RUN("INCR n", ":411\r\n");
	RUN("APPEND n x", ":4\r\n");
	RUN("INCR n", "-ERR value is not an integer or out of range\r\n");
}

Test(commands, append_grows_many_times)
{
	char want[64];
	for (int i = 1; i <= 3000; i++) {
		snprintf(want, sizeof want, ":%d\r\n", i * 3);
		RUN("APPEND a abc", want);
	}
	RUN("STRLEN a", ":9000\r\n");
	RUN("SET a x", "+OK\r\n"); /* shrinks the buffer back */
	RUN("GET a", "$1\r\nx\r\n");
}

Test(commands, append_limit)
{
	cr_assert(kv__append_fits(0, KV_VALUE_BYTES_MAX));
	cr_assert(kv__append_fits(KV_VALUE_BYTES_MAX - 1, 1));
	cr_assert(!kv__append_fits(KV_VALUE_BYTES_MAX, 1));
	cr_assert(!kv__append_fits(1, KV_VALUE_BYTES_MAX));
	cr_assert(!kv__append_fits(KV_VALUE_BYTES_MAX / 2 + 1,
				   KV_VALUE_BYTES_MAX / 2));
	cr_assert(!kv__append_fits(SIZE_MAX, SIZE_MAX));
}

Test(commands, mget_mset)
{
	RUN("MSET a 1 b 2 a 3", "+OK\r\n"); /* the later pair wins */
	RUN("MGET a b c", "*3\r\n$1\r\n3\r\n$1\r\n2\r\n$-1\r\n");
	RUN("MGET c", "*1\r\n$-1\r\n");
	RUN("DBSIZE", ":2\r\n");
	RUN("MSET b 20", "+OK\r\n");
	RUN("GET b", "$2\r\n20\r\n");
}

Test(commands, dbsize_and_flushall)
{
	RUN("DBSIZE", ":0\r\n");
	RUN("MSET a 1 b 2 c 3", "+OK\r\n");
	RUN("DBSIZE", ":3\r\n");
	cr_assert_eq(kv_dbsize(kv), 3);
	RUN("FLUSHALL x", "-ERR syntax error\r\n");
	RUN("FLUSHALL SYNC ASYNC", "-ERR syntax error\r\n");
	RUN("DBSIZE", ":3\r\n");
	RUN("FLUSHALL", "+OK\r\n");
	RUN("DBSIZE", ":0\r\n");
	RUN("SET a 1", "+OK\r\n");
	RUN("FLUSHALL async", "+OK\r\n");
	RUN("FLUSHALL SYNC", "+OK\r\n");
	RUN("GET a", "$-1\r\n");
	cr_assert_eq(kv_dbsize(kv), 0);
}

Test(commands, keys)
{
	RUN("KEYS *", "*0\r\n");
	RUN("MSET hello 1 hallo 2 hxllo 3 hllo 4 heeeello 5", "+OK\r\n");
	const char *r = kvt_run(kv, "KEYS h?llo");
	cr_assert_eq(strncmp(r, "*3\r\n", 4), 0, "%s", r);
	cr_assert(strstr(r, "$5\r\nhello\r\n") &&
		  strstr(r, "$5\r\nhallo\r\n") && strstr(r, "$5\r\nhxllo\r\n"));
	r = kvt_run(kv, "KEYS h*llo");
	cr_assert_eq(strncmp(r, "*5\r\n", 4), 0, "%s", r);
	r = kvt_run(kv, "KEYS h[ae]llo");
	cr_assert_eq(strncmp(r, "*2\r\n", 4), 0, "%s", r);
	r = kvt_run(kv, "KEYS h[^e]llo");
	cr_assert_eq(strncmp(r, "*2\r\n", 4), 0, "%s", r);
	cr_assert(strstr(r, "hallo") && strstr(r, "hxllo"));
	RUN("KEYS hllo", "*1\r\n$4\r\nhllo\r\n");
	RUN("KEYS nothing*", "*0\r\n");
	r = kvt_run(kv, "KEYS *");
	cr_assert_eq(strncmp(r, "*5\r\n", 4), 0, "%s", r);
}

Test(commands, scan_errors)
{
	RUN("SCAN x", "-ERR invalid cursor\r\n");
	RUN("SCAN -1", "-ERR invalid cursor\r\n");
	RUN("SCAN 18446744073709551616", "-ERR invalid cursor\r\n");
	RUN("SCAN 0 COUNT", "-ERR syntax error\r\n");
	RUN("SCAN 0 COUNT 0", "-ERR syntax error\r\n");
	RUN("SCAN 0 COUNT -1", "-ERR syntax error\r\n");
	RUN("SCAN 0 COUNT x",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("SCAN 0 MATCH", "-ERR syntax error\r\n");
	/* TYPE is machine version 3's (test_strings_more.c). */
	RUN("SCAN 0 TYPE string", "-ERR option 'type' of command 'scan' needs "
				  "machine version 3; the effective machine "
				  "version is 1\r\n");
	RUN("SCAN 0 MATCH type", "*2\r\n$1\r\n0\r\n*0\r\n");
	RUN("SCAN 0 FOO bar", "-ERR syntax error\r\n");
	RUN("SCAN 0", "*2\r\n$1\r\n0\r\n*0\r\n");
	RUN("SCAN 18446744073709551615 count 5 match a*",
	    "*2\r\n$1\r\n0\r\n*0\r\n");
}

Test(commands, scan_small)
{
	RUN("MSET a 1 b 2 c 3", "+OK\r\n");
	const char *r = kvt_run(kv, "SCAN 0 COUNT 100");
	cr_assert_eq(strncmp(r, "*2\r\n$1\r\n0\r\n*3\r\n", 14), 0, "%s", r);
	r = kvt_run(kv, "SCAN 0 MATCH b COUNT 100");
	cr_assert_str_eq(r, "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n");
}

Test(commands, unknown_command)
{
	RUN("ZADD a 1 b", "-ERR unknown command\r\n");
}

Test(commands, binary_safe_keys_and_values)
{
	const char *set[] = {"SET", "k\0\r\n", "v\0\r\nx"};
	size_t set_lens[] = {3, 4, 5};
	cr_assert_str_eq(kvt_runv(kv, 3, set, set_lens), "+OK\r\n");
	const char *get[] = {"GET", "k\0\r\n"};
	size_t get_lens[] = {3, 4};
	const char *r = kvt_runv(kv, 2, get, get_lens);
	cr_assert_eq(memcmp(r, "$5\r\nv\0\r\nx\r\n", 11), 0);
	const char *other[] = {"GET", "k"};
	size_t other_lens[] = {3, 1};
	cr_assert_str_eq(kvt_runv(kv, 2, other, other_lens), "$-1\r\n");
}

Test(commands, key_and_value_limits_checked_before_logging)
{
	/* Only lengths are looked at: a lie about them is enough. */
	static const uint8_t small[8];
	const uint8_t *argv[] = {(const uint8_t *)"SET", small, small};
	size_t lens[] = {3, 1, KV_VALUE_BYTES_MAX + 1};
	struct baton_buf err;
	baton_buf_init(&err);
	const struct kv_command *c = kv_lookup(argv[0], 3);
	cr_assert_eq(kv_check(c, 3, argv, lens, &err), BATON_EINVAL);
	cr_assert_eq(err.len, strlen("-ERR string exceeds maximum allowed "
				     "size (proto-max-bulk-len)\r\n"));
	baton_buf_reset(&err);
	lens[1] = KV_KEY_BYTES_MAX + 1;
	lens[2] = 1;
	cr_assert_eq(kv_check(c, 3, argv, lens, &err), BATON_EINVAL);
	cr_assert_eq(memcmp(err.data, "-ERR key exceeds", 16), 0);
	baton_buf_reset(&err);
	lens[1] = 1;
	cr_assert_eq(kv_check(c, 3, argv, lens, &err), 0);
	cr_assert_eq(err.len, 0);
	baton_buf_free(&err);
}

Test(commands, read_of_a_write_is_refused)
{
	const uint8_t *argv[] = {(const uint8_t *)"SET", (const uint8_t *)"a",
				 (const uint8_t *)"b"};
	size_t lens[] = {3, 1, 1};
	struct baton_buf r;
	baton_buf_init(&r);
	cr_assert_eq(kv_read(kv, 3, argv, lens, &r), BATON_EINVAL);
	cr_assert_eq(memcmp(r.data, "-ERR", 4), 0);
	cr_assert_eq(kv_dbsize(kv), 0);
	baton_buf_free(&r);
}
