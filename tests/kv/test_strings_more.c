/*
 * Machine version 3's further string and key commands (UNLINK, GETDEL,
 * GETSET, SETNX, SETEX, PSETEX, MSETNX, GETRANGE, SETRANGE, RENAME,
 * RENAMENX, COPY, FLUSHDB, INCRBYFLOAT) with Redis 7.0's replies: errors,
 * expiries carried or cleared, WRONGTYPE on hashes, the version gate, and a map
 * written by them restored from its snapshot unchanged.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kv_util.h"
#include "resp.h"

#define T0 1700000000000ull

static struct baton_kv *kv;

static void setup(void)
{
	kv = kvt_new();
	kvt_use(3, T0);
}

static void teardown(void)
{
	kv_destroy(kv);
}

TestSuite(strings_more, .init = setup, .fini = teardown);

#define RUN(line, want) cr_assert_str_eq(kvt_run(kv, line), want, "%s", line)

Test(strings_more, unlink_is_del)
{
	RUN("MSET a 1 b 2", "+OK\r\n");
	RUN("UNLINK a b c", ":2\r\n");
	RUN("EXISTS a b", ":0\r\n");
	RUN("UNLINK",
	    "-ERR wrong number of arguments for 'unlink' command\r\n");
}

Test(strings_more, getdel)
{
	RUN("GETDEL a", "$-1\r\n");
	RUN("SET a v EX 100", "+OK\r\n");
	RUN("GETDEL a", "$1\r\nv\r\n");
	RUN("EXISTS a", ":0\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("GETDEL h", "-WRONGTYPE Operation against a key holding the "
			"wrong kind of value\r\n");
	RUN("EXISTS h", ":1\r\n");
}

Test(strings_more, getset_clears_the_expiry)
{
	RUN("GETSET a x", "$-1\r\n");
	RUN("GET a", "$1\r\nx\r\n");
	RUN("SET a v PX 5000", "+OK\r\n");
	RUN("GETSET a w", "$1\r\nv\r\n");
	RUN("PTTL a", ":-1\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("GETSET h w", "-WRONGTYPE Operation against a key holding the "
			  "wrong kind of value\r\n");
	RUN("TYPE h", "+hash\r\n");
}

Test(strings_more, setnx)
{
	RUN("SETNX a 1", ":1\r\n");
	RUN("SETNX a 2", ":0\r\n");
	RUN("GET a", "$1\r\n1\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("SETNX h 2", ":0\r\n");
}

Test(strings_more, setex_and_psetex)
{
	RUN("SETEX a 10 v", "+OK\r\n");
	RUN("PTTL a", ":10000\r\n");
	RUN("PSETEX a 1500 w", "+OK\r\n");
	RUN("PTTL a", ":1500\r\n");
	RUN("GET a", "$1\r\nw\r\n");
	RUN("SETEX a 0 v", "-ERR invalid expire time in 'setex' command\r\n");
	RUN("PSETEX a -5 v",
	    "-ERR invalid expire time in 'psetex' command\r\n");
	RUN("SETEX a 9223372036854775807 v",
	    "-ERR invalid expire time in 'setex' command\r\n");
	RUN("SETEX a x v", "-ERR value is not an integer or out of range\r\n");
	RUN("SETEX a 1", "-ERR wrong number of arguments for 'setex' "
			 "command\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("SETEX h 10 s", "+OK\r\n"); /* replaces any type, as SET */
	RUN("TYPE h", "+string\r\n");
	/* Expired at the machine time of a later write. */
	kvt_use(3, T0 + 2000);
	RUN("SET z 1", "+OK\r\n"); /* moves machine time on */
	RUN("EXISTS a", ":0\r\n");
	RUN("TTL h", ":8\r\n");
}

Test(strings_more, msetnx)
{
	RUN("MSETNX a 1 b 2", ":1\r\n");
	RUN("MSETNX b 3 c 4", ":0\r\n");
	RUN("EXISTS c", ":0\r\n");
	RUN("MSETNX c 1 c 2", ":1\r\n");
	RUN("GET c", "$1\r\n2\r\n");
	RUN("MSETNX c", "-ERR wrong number of arguments for 'msetnx' "
			"command\r\n");
	RUN("MSETNX d 1 e", "-ERR wrong number of arguments for 'msetnx' "
			    "command\r\n");
}

Test(strings_more, getrange)
{
	RUN("SET s Hello", "+OK\r\n");
	RUN("GETRANGE s 0 3", "$4\r\nHell\r\n");
	RUN("GETRANGE s -3 -1", "$3\r\nllo\r\n");
	RUN("GETRANGE s 0 -1", "$5\r\nHello\r\n");
	RUN("GETRANGE s 10 100", "$0\r\n\r\n");
	RUN("GETRANGE s -1 -5", "$0\r\n\r\n");
	RUN("GETRANGE s -100 1", "$2\r\nHe\r\n");
	RUN("GETRANGE s 3 1", "$0\r\n\r\n");
	RUN("GETRANGE nokey 0 -1", "$0\r\n\r\n");
	RUN("GETRANGE s a 1", "-ERR value is not an integer or out of "
			      "range\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("GETRANGE h 0 1", "-WRONGTYPE Operation against a key holding "
			      "the wrong kind of value\r\n");
}

Test(strings_more, setrange_keeps_the_expiry)
{
	RUN("SET s Hello EX 100", "+OK\r\n");
	RUN("SETRANGE s 1 ipp", ":5\r\n");
	RUN("GET s", "$5\r\nHippo\r\n");
	RUN("TTL s", ":100\r\n");
	RUN("SETRANGE s 7 !", ":8\r\n");
	cr_assert_eq(memcmp(kvt_run(kv, "GET s"), "$8\r\nHippo\0\0!\r\n", 14),
		     0);
	RUN("SETRANGE n 0 ", ":0\r\n"); /* empty value, absent key */
	RUN("EXISTS n", ":0\r\n");
	RUN("SETRANGE s 100 ", ":8\r\n");
	RUN("SETRANGE n 2 ab", ":4\r\n");
	RUN("SETRANGE s -1 x", "-ERR offset is out of range\r\n");
	RUN("SETRANGE s x x", "-ERR value is not an integer or out of "
			      "range\r\n");
	RUN("SETRANGE s 9223372036854775807 x",
	    "-ERR string exceeds maximum allowed size "
	    "(proto-max-bulk-len)\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("SETRANGE h 0 x", "-WRONGTYPE Operation against a key holding "
			      "the wrong kind of value\r\n");
}

Test(strings_more, rename_carries_the_expiry)
{
	RUN("RENAME a b", "-ERR no such key\r\n");
	RUN("RENAMENX a b", "-ERR no such key\r\n");
	RUN("SET a 1 EX 50", "+OK\r\n");
	RUN("SET b 2", "+OK\r\n");
	RUN("RENAME a a", "+OK\r\n");
	RUN("RENAMENX a a", ":0\r\n");
	RUN("RENAMENX a b", ":0\r\n");
	RUN("RENAME a b", "+OK\r\n");
	RUN("EXISTS a", ":0\r\n");
	RUN("GET b", "$1\r\n1\r\n");
	RUN("TTL b", ":50\r\n");
	RUN("RENAMENX b c", ":1\r\n");
	RUN("TTL c", ":50\r\n");
	RUN("HSET h f v g w", ":2\r\n");
	RUN("RENAME h c", "+OK\r\n"); /* a hash moves whole */
	RUN("HGET c g", "$1\r\nw\r\n");
	RUN("TTL c", ":-1\r\n");
	RUN("EXISTS h", ":0\r\n");
}

Test(strings_more, copy_copies_the_expiry)
{
	RUN("COPY a b", ":0\r\n");
	RUN("SET a 1 PX 9000", "+OK\r\n");
	RUN("COPY a b", ":1\r\n");
	RUN("PTTL b", ":9000\r\n");
	RUN("PTTL a", ":9000\r\n");
	RUN("SET c x", "+OK\r\n");
	RUN("COPY a c", ":0\r\n");
	RUN("COPY a c REPLACE", ":1\r\n");
	RUN("GET c", "$1\r\n1\r\n");
	RUN("COPY a c DB 0 replace", ":1\r\n");
	RUN("COPY a c DB 1", "-ERR DB index is out of range\r\n");
	RUN("COPY a c DB x",
	    "-ERR value is not an integer or out of range\r\n");
	RUN("COPY a c FOO", "-ERR syntax error\r\n");
	RUN("COPY a a", "-ERR source and destination objects are the "
			"same\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("COPY h h2", ":1\r\n");
	RUN("HSET h f changed", ":0\r\n");
	RUN("HGET h2 f", "$1\r\nv\r\n"); /* a deep copy */
}

Test(strings_more, incrbyfloat)
{
	RUN("INCRBYFLOAT f 10.5", "$4\r\n10.5\r\n");
	RUN("INCRBYFLOAT f 0.1", "$4\r\n10.6\r\n");
	RUN("INCRBYFLOAT f -5", "$3\r\n5.6\r\n");
	RUN("SET g 5.0e3 EX 60", "+OK\r\n");
	RUN("INCRBYFLOAT g 2.0e2", "$4\r\n5200\r\n");
	RUN("TTL g", ":60\r\n"); /* the expiry stays */
	RUN("SET z -1", "+OK\r\n");
	RUN("INCRBYFLOAT z 1", "$1\r\n0\r\n");
	RUN("INCRBYFLOAT z 3.0000000000000001",
	    "$18\r\n3.0000000000000001\r\n");
	RUN("INCRBYFLOAT f x", "-ERR value is not a valid float\r\n");
	RUN("INCRBYFLOAT f nan", "-ERR value is not a valid float\r\n");
	RUN("INCRBYFLOAT f inf",
	    "-ERR increment would produce NaN or Infinity\r\n");
	RUN("SET s abc", "+OK\r\n");
	RUN("INCRBYFLOAT s 1", "-ERR value is not a valid float\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("INCRBYFLOAT h 1", "-WRONGTYPE Operation against a key holding "
			       "the wrong kind of value\r\n");
}

Test(strings_more, incrbyfloat_refuses_a_value_with_a_nul)
{
	/* Redis's string2ld: the whole text must be the number. */
	const char *set[] = {"SET", "n", "1\0002"};
	const size_t set_lens[] = {3, 1, 3};
	cr_assert_str_eq(kvt_runv(kv, 3, set, set_lens), "+OK\r\n");
	RUN("INCRBYFLOAT n 1", "-ERR value is not a valid float\r\n");
	const char *by[] = {"INCRBYFLOAT", "m", "1\0002"};
	const size_t by_lens[] = {11, 1, 3};
	cr_assert_str_eq(kvt_runv(kv, 3, by, by_lens),
			 "-ERR value is not a valid float\r\n");
	RUN("EXISTS m", ":0\r\n");
}

Test(strings_more, scan_type)
{
	RUN("SET s1 v", "+OK\r\n");
	RUN("SET s2 v", "+OK\r\n");
	RUN("HSET h1 f v", ":1\r\n");
	RUN("SCAN 0 TYPE hash", "*2\r\n$1\r\n0\r\n*1\r\n$2\r\nh1\r\n");
	RUN("SCAN 0 TYPE HASH COUNT 100",
	    "*2\r\n$1\r\n0\r\n*1\r\n$2\r\nh1\r\n");
	RUN("SCAN 0 TYPE string MATCH s1",
	    "*2\r\n$1\r\n0\r\n*1\r\n$2\r\ns1\r\n");
	/* A name that is no type matches nothing, as in Redis 7.0. */
	RUN("SCAN 0 TYPE list", "*2\r\n$1\r\n0\r\n*0\r\n");
	RUN("SCAN 0 TYPE", "-ERR syntax error\r\n");
	RUN("HSCAN h1 0 TYPE string", "-ERR syntax error\r\n");
	kvt_use(2, T0);
	RUN("SCAN 0 TYPE hash", "-ERR option 'type' of command 'scan' needs "
				"machine version 3; the effective machine "
				"version is 2\r\n");
}

Test(strings_more, flushdb)
{
	RUN("MSET a 1 b 2", "+OK\r\n");
	RUN("FLUSHDB ASYNC", "+OK\r\n");
	RUN("DBSIZE", ":0\r\n");
	RUN("FLUSHDB sync", "+OK\r\n");
	RUN("FLUSHDB now", "-ERR syntax error\r\n");
}

Test(strings_more, refused_under_machine_version_2)
{
	static const char *const lines[] = {
		"UNLINK a",	  "GETDEL a",	     "GETSET a b",
		"SETNX a b",	  "SETEX a 1 b",     "PSETEX a 1 b",
		"MSETNX a b",	  "INCRBYFLOAT a 1", "GETRANGE a 0 1",
		"SETRANGE a 0 b", "RENAME a b",	     "RENAMENX a b",
		"COPY a b",	  "FLUSHDB",
	};
	for (uint32_t v = 1; v <= 2; v++) {
		kvt_use(v, T0);
		for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
			char name[16] = {0};
			const char *sp = strchr(lines[i], ' ');
			size_t n = sp != NULL ? (size_t)(sp - lines[i])
					      : strlen(lines[i]);
			for (size_t j = 0; j < n; j++)
				name[j] = (char)(lines[i][j] - 'A' + 'a');
			char want[160];
			snprintf(want, sizeof want,
				 "-ERR command '%s' needs machine version 3; "
				 "the effective machine version is %u\r\n",
				 name, v);
			RUN(lines[i], want);
		}
	}
}

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

Test(strings_more, restored_snapshot_is_the_same_map)
{
	RUN("SET a Hello EX 100", "+OK\r\n");
	RUN("SETRANGE a 10 x", ":11\r\n");
	RUN("HSET h f v", ":1\r\n");
	RUN("COPY h h2", ":1\r\n");
	RUN("RENAME a b", "+OK\r\n");
	RUN("SETEX c 5 y", "+OK\r\n");
	RUN("MSETNX d 1 e 2", ":1\r\n");
	RUN("GETSET d 3", "$1\r\n1\r\n");
	RUN("GETDEL e", "$1\r\n2\r\n");
	struct baton_buf a = {0}, b = {0};
	struct baton_machine_version v3 = {3};
	cr_assert_eq(kv_snapshot(kv, v3, sink, &a), 0);
	struct baton_kv *copy = kvt_new();
	cr_assert_eq(kv_restore(copy, v3, a.data, a.len), 0);
	cr_assert_eq(kv_snapshot(copy, v3, sink, &b), 0);
	cr_assert_eq(a.len, b.len);
	cr_assert_eq(memcmp(a.data, b.data, a.len), 0);
	kvt_use(3, T0);
	cr_assert_str_eq(kvt_run(copy, "GET b"), kvt_run(kv, "GET b"));
	cr_assert_str_eq(kvt_run(copy, "TTL c"), ":5\r\n");
	kv_destroy(copy);
	baton_buf_free(&a);
	baton_buf_free(&b);
}

/* A sliced snapshot begun before the new writes holds the map as it was
 * at its beginning, whatever they move, copy or change ahead of it. */
Test(strings_more, sliced_snapshot_keeps_the_map_as_at_begin)
{
	char line[96];
	for (int i = 0; i < 300; i++) {
		snprintf(line, sizeof line, "SET s%d value%d EX %d", i, i,
			 100 + i);
		kvt_run(kv, line);
		snprintf(line, sizeof line, "HSET h%d f %d g x", i, i);
		kvt_run(kv, line);
	}
	struct baton_machine_version v3 = {3};
	struct baton_buf expected = {0}, got = {0};
	cr_assert_eq(kv_snapshot(kv, v3, sink, &expected), 0);
	cr_assert_eq(kv_snapshot_begin(kv, v3), 0);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
	for (int i = 0; i < 300; i++) {
		static const char *const forms[] = {
			"RENAME s%d moved%d", "COPY h%d h%d REPLACE",
			"SETRANGE s%d %d zz", "INCRBYFLOAT s%d %d.5",
			"GETSET s%d %d",      "GETDEL s%d",
			"SETEX h%d 5%d v",    "RENAMENX h%d s%d",
			"MSETNX n%d 1 s%d 2", "UNLINK h%d s%d",
		};
		snprintf(line, sizeof line, forms[i % 10], i, (i * 7) % 300);
		kvt_run(kv, line);
	}
	while (!done)
		cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0,
			     "%s", kv_errmsg(kv));
	kv_snapshot_end(kv);
	cr_assert_eq(got.len, expected.len);
	cr_assert_eq(memcmp(got.data, expected.data, got.len), 0);
	baton_buf_free(&expected);
	baton_buf_free(&got);
}
