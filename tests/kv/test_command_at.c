/*
 * kv's command table as COMMAND walks it (kv_command_at): every row once,
 * each found again by kv_lookup under its name, machine version 3's
 * further string and key commands with their version, kind and keys; and
 * a map those commands wrote converted down to machine version 2: the
 * hashes COPY and RENAME made are deleted like any hash, the strings
 * SETRANGE, INCRBYFLOAT and SETEX made stay with their expiry, and the
 * result is the map a version-2 snapshot restores to (the data format of
 * version 3 did not change for them).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "kv_util.h"

#define T0 1700000000000ull

/* Rows the kv layer is not expected to outgrow; only a bound for the
 * walk, so a table that never ends fails instead of hanging. */
#define TABLE_ROWS_BOUND 1000u

Test(command_at, walks_every_row_once_and_ends)
{
	size_t n = 0;
	for (const struct kv_command *c; (c = kv_command_at(n)) != NULL; n++) {
		cr_assert_lt(n, TABLE_ROWS_BOUND, "the table does not end");
		cr_assert_eq(
			kv_lookup((const uint8_t *)c->name, strlen(c->name)), c,
			"%s is not found under its own name", c->name);
		for (size_t j = 0; j < n; j++)
			cr_assert_str_neq(kv_command_at(j)->name, c->name);
		cr_assert(c->machine_min >= 1 && c->machine_min <= 3, "%s",
			  c->name);
		cr_assert(((c->flags & KV_READ) != 0) !=
				  ((c->flags & KV_WRITE) != 0),
			  "%s is neither or both a read and a write", c->name);
	}
	cr_assert_gt(n, 0);
	cr_assert_null(kv_command_at(n));
	cr_assert_null(kv_command_at(n + 1));
	cr_assert_null(kv_command_at((size_t)-1));
}

Test(command_at, version_3_string_and_key_commands)
{
	static const struct {
		const char *name;
		int arity;
		bool write;
		int key_first, key_last, key_step;
	} rows[] = {
		{"unlink", -2, true, 1, -1, 1},
		{"getdel", 2, true, 1, 1, 1},
		{"getset", 3, true, 1, 1, 1},
		{"setnx", 3, true, 1, 1, 1},
		{"setex", 4, true, 1, 1, 1},
		{"psetex", 4, true, 1, 1, 1},
		{"msetnx", -3, true, 1, -1, 2},
		{"getrange", 4, false, 1, 1, 1},
		{"setrange", 4, true, 1, 1, 1},
		{"incrbyfloat", 3, true, 1, 1, 1},
		{"rename", 3, true, 1, 2, 1},
		{"renamenx", 3, true, 1, 2, 1},
		{"copy", -3, true, 1, 2, 1},
		{"flushdb", -1, true, 0, 0, 0},
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct kv_command *c = kv_lookup(
			(const uint8_t *)rows[i].name, strlen(rows[i].name));
		cr_assert_not_null(c, "%s", rows[i].name);
		cr_assert_eq(c->machine_min, 3, "%s", rows[i].name);
		cr_assert_eq(c->arity, rows[i].arity, "%s", rows[i].name);
		cr_assert_eq((c->flags & KV_WRITE) != 0, rows[i].write, "%s",
			     rows[i].name);
		cr_assert_eq(c->key_first, rows[i].key_first, "%s",
			     rows[i].name);
		cr_assert_eq(c->key_last, rows[i].key_last, "%s", rows[i].name);
		cr_assert_eq(c->key_step, rows[i].key_step, "%s", rows[i].name);
	}
}

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

#define RUN(k, line, want)                                                     \
	do {                                                                   \
		const char *got_ = kvt_run(k, line);                           \
		cr_assert_str_eq(got_, want, "%s: %s", line, got_);            \
	} while (0)

Test(command_at, down_to_2_after_the_new_commands)
{
	const struct baton_machine_version v2 = {2}, v3 = {3};
	struct baton_kv *kv = kvt_new();
	kvt_use(3, T0);
	RUN(kv, "HSET h f v", ":1\r\n");
	RUN(kv, "EXPIRE h 100", ":1\r\n");
	RUN(kv, "COPY h h2", ":1\r\n");
	RUN(kv, "RENAME h h3", "+OK\r\n");
	RUN(kv, "SETEX s 100 abc", "+OK\r\n");
	RUN(kv, "SETRANGE s 5 z", ":6\r\n");
	RUN(kv, "INCRBYFLOAT f 1.5", "$3\r\n1.5\r\n");
	RUN(kv, "MSETNX m 1 n 2", ":1\r\n");
	RUN(kv, "RENAMENX n o", ":1\r\n");
	cr_assert_eq(kv_convert_loss(kv, v3, v2), 2); /* h2 and h3 */
	cr_assert_eq(kv_convert(kv, v3, v2), 0);
	cr_assert_eq(kv_convert_loss(kv, v3, v2), 0);

	/* Under version 2 the strings are there, s with its expiry. */
	kvt_use(2, T0);
	RUN(kv, "DBSIZE", ":4\r\n");
	RUN(kv, "EXISTS h2 h3", ":0\r\n");
	RUN(kv, "STRLEN s", ":6\r\n");
	/* The reply holds zero bytes: compared whole, not as a C string. */
	cr_assert_eq(memcmp(kvt_run(kv, "GET s"), "$6\r\nabc\0\0z\r\n", 13), 0);
	RUN(kv, "TTL s", ":100\r\n");
	RUN(kv, "GET f", "$3\r\n1.5\r\n");
	RUN(kv, "MGET m o", "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");

	/* The converted map is the one its version-2 snapshot restores to. */
	struct baton_buf a = {0}, b = {0};
	cr_assert_eq(kv_snapshot(kv, v2, sink, &a), 0);
	struct baton_kv *restored = kvt_new();
	cr_assert_eq(kv_restore(restored, v2, a.data, a.len), 0);
	cr_assert_eq(kv_snapshot(restored, v2, sink, &b), 0);
	cr_assert_eq(a.len, b.len);
	cr_assert_eq(memcmp(a.data, b.data, a.len), 0);
	kv_destroy(restored);
	kv_destroy(kv);
	baton_buf_free(&a);
	baton_buf_free(&b);
}

/* Logged under version 3, applied after a downgrade's entry: every node
 * replies the gate's -ERR and the map does not change. */
Test(command_at, new_writes_in_the_log_under_version_2_are_no_ops)
{
	static const char *const lines[][5] = {
		{"SETEX", "a", "10", "v", NULL},   {"RENAME", "k", "b", NULL},
		{"COPY", "k", "c", NULL},	   {"FLUSHDB", NULL},
		{"INCRBYFLOAT", "k", "1.5", NULL}, {"UNLINK", "k", NULL},
	};
	struct baton_kv *kv = kvt_new();
	/* Machine time at the refused entries' stamp already: only the
	 * map could differ. */
	kvt_use(2, T0 + 5);
	RUN(kv, "SET k 1", "+OK\r\n");
	struct baton_buf p = {0}, r = {0}, before = {0}, after = {0};
	kvt_snapshot(kv, &before);
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		const uint8_t *argv[5];
		size_t lens[5];
		int argc = 0;
		for (; lines[i][argc] != NULL; argc++) {
			argv[argc] = (const uint8_t *)lines[i][argc];
			lens[argc] = strlen(lines[i][argc]);
		}
		baton_buf_reset(&p);
		baton_buf_reset(&r);
		cr_assert_eq(kv_encode_v2(T0 + 5, argc, argv, lens, &p), 0);
		cr_assert_eq(kv_apply(kv, (struct baton_machine_version){2},
				      p.data, p.len, &r),
			     0);
		cr_assert_eq(baton_buf_append(&r, "", 1), 0);
		cr_assert(strstr((const char *)r.data,
				 "needs machine version 3; the effective "
				 "machine version is 2") != NULL,
			  "%s: %s", lines[i][0], (const char *)r.data);
	}
	kvt_snapshot(kv, &after);
	cr_assert_eq(before.len, after.len);
	cr_assert_eq(memcmp(before.data, after.data, before.len), 0);
	RUN(kv, "GET k", "$1\r\n1\r\n");
	baton_buf_free(&p);
	baton_buf_free(&r);
	baton_buf_free(&before);
	baton_buf_free(&after);
	kv_destroy(kv);
}

/* What docs/kv.md says differs from Redis's order: kv_check refuses these
 * before the map is read, so a hash gets that error, not WRONGTYPE. */
Test(command_at, errors_refused_before_the_map_is_read)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(3, T0);
	RUN(kv, "HSET h f v", ":1\r\n");
	RUN(kv, "INCRBYFLOAT h x", "-ERR value is not a valid float\r\n");
	RUN(kv, "SETRANGE h 536870912 x",
	    "-ERR string exceeds maximum allowed size "
	    "(proto-max-bulk-len)\r\n");
	/* The largest offset that still fits is only refused by the type. */
	RUN(kv, "SETRANGE h 536870911 x",
	    "-WRONGTYPE Operation against a key holding the wrong kind of "
	    "value\r\n");
	kv_destroy(kv);
}

/* INCRBYFLOAT's text at the edges of long double: the longest text
 * (thousands of digits, no exponent, as %.17Lf writes it) and an
 * overflow refused with the map unchanged. */
Test(command_at, incrbyfloat_at_the_edges_of_long_double)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(3, T0);
	const char *got = kvt_run(kv, "INCRBYFLOAT f 1e4000");
	cr_assert(strncmp(got, "$400", 4) == 0, "%.20s", got);
	cr_assert_null(strchr(got + 4, 'e'), "no exponent in the text");
	RUN(kv, "SET big 1e4932", "+OK\r\n");
	RUN(kv, "INCRBYFLOAT big 1e4932",
	    "-ERR increment would produce NaN or Infinity\r\n");
	RUN(kv, "GET big", "$6\r\n1e4932\r\n");
	RUN(kv, "INCRBYFLOAT big 1e5000",
	    "-ERR value is not a valid float\r\n");
	RUN(kv, "INCRBYFLOAT big -inf",
	    "-ERR increment would produce NaN or Infinity\r\n");
	RUN(kv, "INCRBYFLOAT n 0x10", "$2\r\n16\r\n"); /* strtold's hex */
	const char *spaced[] = {"INCRBYFLOAT", "n", " 1"};
	size_t spaced_lens[] = {11, 1, 2};
	cr_assert_str_eq(kvt_runv(kv, 3, spaced, spaced_lens),
			 "-ERR value is not a valid float\r\n");
	kv_destroy(kv);
}
