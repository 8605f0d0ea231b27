/*
 * RESP2: every reply writer byte for byte, and the request parser on
 * multibulk, inline and pipelined input split at every byte boundary, on
 * each limit and each malformed case, and on seeded random bytes.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_util.h"
#include "resp.h"

/* ------------------------------------------------------------------------ */
/* Writers.                                                                 */

static struct baton_buf out;

static void out_setup(void)
{
	baton_buf_init(&out);
}

static void out_teardown(void)
{
	baton_buf_free(&out);
}

TestSuite(resp_write, .init = out_setup, .fini = out_teardown);

#define ASSERT_OUT(lit)                                                        \
	do {                                                                   \
		cr_assert_eq(out.len, sizeof(lit) - 1, "%.*s", (int)out.len,   \
			     (const char *)out.data);                          \
		cr_assert_eq(memcmp(out.data, lit, sizeof(lit) - 1), 0,        \
			     "%.*s", (int)out.len, (const char *)out.data);    \
		baton_buf_reset(&out);                                         \
	} while (0)

Test(resp_write, simple)
{
	cr_assert_eq(resp_simple(&out, "OK"), 0);
	ASSERT_OUT("+OK\r\n");
	resp_simple(&out, "");
	ASSERT_OUT("+\r\n");
	resp_simple(&out, "two\r\nlines\n");
	ASSERT_OUT("+two  lines \r\n");
}

Test(resp_write, error)
{
	cr_assert_eq(resp_error(&out, "ERR syntax error"), 0);
	ASSERT_OUT("-ERR syntax error\r\n");
	resp_error(&out, "ERR wrong number of arguments for '%s' command",
		   "get");
	ASSERT_OUT("-ERR wrong number of arguments for 'get' command\r\n");
	resp_error(&out, "ERR unknown command '%s'", "x\r\n+OK\r\n");
	ASSERT_OUT("-ERR unknown command 'x  +OK  '\r\n");
	resp_error(&out, "TRYAGAIN %d", 42);
	ASSERT_OUT("-TRYAGAIN 42\r\n");
}

Test(resp_write, error_is_cut_at_the_limit)
{
	char *long_text = malloc(RESP_ERROR_BYTES_MAX * 2);
	memset(long_text, 'x', RESP_ERROR_BYTES_MAX * 2 - 1);
	long_text[RESP_ERROR_BYTES_MAX * 2 - 1] = '\0';
	cr_assert_eq(resp_error(&out, "ERR %s", long_text), 0);
	cr_assert_eq(out.len, 1 + RESP_ERROR_BYTES_MAX + 2);
	cr_assert_eq(memcmp(out.data, "-ERR xxx", 8), 0);
	cr_assert_eq(memcmp(out.data + out.len - 3, "x\r\n", 3), 0);
	free(long_text);
}

Test(resp_write, integer)
{
	resp_int(&out, 0);
	ASSERT_OUT(":0\r\n");
	resp_int(&out, -1);
	ASSERT_OUT(":-1\r\n");
	resp_int(&out, INT64_MAX);
	ASSERT_OUT(":9223372036854775807\r\n");
	resp_int(&out, INT64_MIN);
	ASSERT_OUT(":-9223372036854775808\r\n");
}

Test(resp_write, bulk)
{
	cr_assert_eq(resp_bulk(&out, "hello", 5), 0);
	ASSERT_OUT("$5\r\nhello\r\n");
	resp_bulk(&out, NULL, 0);
	ASSERT_OUT("$0\r\n\r\n");
	resp_bulk(&out, "a\r\n\0b", 5);
	ASSERT_OUT("$5\r\na\r\n\0b\r\n");
	char big[1000];
	memset(big, 'z', sizeof big);
	resp_bulk(&out, big, sizeof big);
	cr_assert_eq(out.len, 7 + 1000 + 2);
	cr_assert_eq(memcmp(out.data, "$1000\r\nzz", 9), 0);
	baton_buf_reset(&out);
}

Test(resp_write, nulls_and_arrays)
{
	resp_null(&out);
	ASSERT_OUT("$-1\r\n");
	resp_null_array(&out);
	ASSERT_OUT("*-1\r\n");
	resp_array(&out, 0);
	ASSERT_OUT("*0\r\n");
	resp_array(&out, 3);
	ASSERT_OUT("*3\r\n");
	resp_array(&out, 2);
	resp_bulk(&out, "a", 1);
	resp_int(&out, 7);
	ASSERT_OUT("*2\r\n$1\r\na\r\n:7\r\n");
}

Test(resp_write, appends_after_existing_contents)
{
	baton_buf_append(&out, "x", 1);
	resp_simple(&out, "OK");
	resp_int(&out, 1);
	ASSERT_OUT("x+OK\r\n:1\r\n");
}

Test(resp_write, parse_int_follows_string2ll)
{
	struct {
		const char *s;
		bool ok;
		int64_t v;
	} cases[] = {
		{"0", true, 0},
		{"1", true, 1},
		{"-1", true, -1},
		{"123456", true, 123456},
		{"9223372036854775807", true, INT64_MAX},
		{"-9223372036854775808", true, INT64_MIN},
		{"9223372036854775808", false, 0},
		{"-9223372036854775809", false, 0},
		{"99999999999999999999999", false, 0},
		{"", false, 0},
		{"-", false, 0},
		{"-0", false, 0},
		{"00", false, 0},
		{"01", false, 0},
		{"+1", false, 0},
		{" 1", false, 0},
		{"1 ", false, 0},
		{"1a", false, 0},
		{"1.0", false, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int64_t v = 12345;
		bool ok = resp_parse_int((const uint8_t *)cases[i].s,
					 strlen(cases[i].s), &v);
		cr_assert_eq(ok, cases[i].ok, "'%s'", cases[i].s);
		if (ok)
			cr_assert_eq(v, cases[i].v, "'%s'", cases[i].s);
	}
}

/* ------------------------------------------------------------------------ */
/* The parser.                                                              */

/* A readable record of commands: args joined by '|', each command ended
 * by ';', bytes outside printable ASCII as \xHH. */
static void describe(struct baton_buf *d, const struct resp_command *c)
{
	for (int i = 0; i < c->argc; i++) {
		if (i > 0)
			baton_buf_append(d, "|", 1);
		for (size_t j = 0; j < c->lens[i]; j++) {
			uint8_t b = c->argv[i][j];
			char tmp[8];
			if (b >= 0x20 && b < 0x7f && b != '|' && b != ';' &&
			    b != '\\')
				snprintf(tmp, sizeof tmp, "%c", b);
			else
				snprintf(tmp, sizeof tmp, "\\x%02x", b);
			baton_buf_append(d, tmp, strlen(tmp));
		}
	}
	baton_buf_append(d, ";", 1);
}

struct run {
	struct resp_parser p;
	struct baton_buf text;
	int rv; /* the last result of next(), or of a failed feed() */
};

/* Take every complete command, as batond does after each read. */
static void drain(struct run *r)
{
	struct resp_command cmd;
	for (;;) {
		r->rv = resp_parser_next(&r->p, &cmd);
		if (r->rv != RESP_OK)
			break;
		cr_assert_geq(cmd.argc, 0);
		describe(&r->text, &cmd);
	}
	resp_parser_consumed(&r->p);
}

static void feed(struct run *r, const void *data, size_t len)
{
	int rv = resp_parser_feed(&r->p, data, len);
	if (rv != 0) {
		r->rv = rv;
		return;
	}
	drain(r);
}

static void run_init(struct run *r, const struct resp_limits *l)
{
	resp_parser_init(&r->p, l);
	baton_buf_init(&r->text);
	r->rv = RESP_NEED_MORE;
}

static void run_free(struct run *r)
{
	resp_parser_free(&r->p);
	baton_buf_free(&r->text);
}

static const char *run_text(struct run *r)
{
	baton_buf_append(&r->text, "", 1);
	r->text.len--;
	return (const char *)r->text.data;
}

/* Parse data fed in pieces of `step` bytes (0: at once); check the
 * commands found and the final result. */
static void expect_split(const void *data, size_t len, size_t step,
			 const struct resp_limits *l, const char *want, int rv)
{
	struct run r;
	run_init(&r, l);
	if (step == 0)
		step = len > 0 ? len : 1;
	for (size_t off = 0; off < len && r.rv == RESP_NEED_MORE; off += step)
		feed(&r, (const uint8_t *)data + off,
		     len - off < step ? len - off : step);
	cr_assert_str_eq(run_text(&r), want, "step %zu: %s", step,
			 run_text(&r));
	cr_assert_eq(r.rv, rv, "step %zu: %d, want %d (%s)", step, r.rv, rv,
		     resp_parser_error(&r.p));
	run_free(&r);
}

/* At once, byte by byte, and cut in two at every position. */
static void expect_all_splits(const void *data, size_t len,
			      const struct resp_limits *l, const char *want,
			      int rv)
{
	expect_split(data, len, 0, l, want, rv);
	expect_split(data, len, 1, l, want, rv);
	expect_split(data, len, 7, l, want, rv);
	for (size_t cut = 0; cut <= len; cut++) {
		struct run r;
		run_init(&r, l);
		feed(&r, data, cut);
		if (r.rv == RESP_NEED_MORE || r.rv == RESP_OK)
			feed(&r, (const uint8_t *)data + cut, len - cut);
		cr_assert_str_eq(run_text(&r), want, "cut at %zu", cut);
		cr_assert_eq(r.rv, rv, "cut at %zu", cut);
		run_free(&r);
	}
}

#define EXPECT(lit, want)                                                      \
	expect_all_splits(lit, sizeof(lit) - 1, NULL, want, RESP_NEED_MORE)

Test(resp_parse, multibulk)
{
	EXPECT("*3\r\n$3\r\nSET\r\n$1\r\na\r\n$5\r\nhello\r\n", "SET|a|hello;");
	EXPECT("*1\r\n$4\r\nPING\r\n", "PING;");
	EXPECT("*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n", "GET|0123456789;");
}

Test(resp_parse, empty_bulk)
{
	EXPECT("*3\r\n$3\r\nSET\r\n$0\r\n\r\n$0\r\n\r\n", "SET||;");
}

Test(resp_parse, binary_safe_bulk)
{
	EXPECT("*2\r\n$3\r\nGET\r\n$6\r\n\r\n\0*$\n\r\n",
	       "GET|\\x0d\\x0a\\x00*$\\x0a;");
	EXPECT("*1\r\n$4\r\n\r\n\r\n\r\n", "\\x0d\\x0a\\x0d\\x0a;");
}

Test(resp_parse, empty_multibulk_is_ignored)
{
	EXPECT("*0\r\n", ";");
	EXPECT("*-1\r\n*1\r\n$1\r\nx\r\n", ";x;");
}

Test(resp_parse, inline)
{
	EXPECT("SET a b\r\n", "SET|a|b;");
	EXPECT("SET a b\n", "SET|a|b;");
	EXPECT("  PING  \r\n", "PING;");
	EXPECT("a\tb\r\n", "a|b;");
	EXPECT("\r\n", ";");
	EXPECT("\n", ";");
	EXPECT("   \r\n", ";");
	EXPECT("GET a", ""); /* no end of line yet */
}

Test(resp_parse, inline_quoting)
{
	EXPECT("SET \"a b\" 'c d'\r\n", "SET|a b|c d;");
	EXPECT("SET k \"\\x41\\x7a\\n\\r\\t\\\\\\\"q\"\r\n",
	       "SET|k|Az\\x0a\\x0d\\x09\\x5c\"q;");
	EXPECT("SET k 'it\\'s'\r\n", "SET|k|it's;");
	EXPECT("SET k '\\n'\r\n", "SET|k|\\x5cn;");
	EXPECT("SET k \"\"\r\n", "SET|k|;");
	EXPECT("SET k ab\"c d\" x\r\n", "SET|k|abc d|x;");
	EXPECT("SET k \"\\xZZ\"\r\n", "SET|k|xZZ;");
}

Test(resp_parse, inline_unbalanced_quotes)
{
	const char *bad[] = {"SET \"a\r\n",    "SET 'a\r\n",
			     "SET \"a\"b\r\n", "SET 'a'b\r\n",
			     "SET \"a\\\r\n",  "SET ab\"c d\"e\r\n"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		expect_all_splits(bad[i], strlen(bad[i]), NULL, "",
				  BATON_ECORRUPT);
		struct resp_parser p;
		resp_parser_init(&p, NULL);
		struct resp_command c;
		resp_parser_feed(&p, (const uint8_t *)bad[i], strlen(bad[i]));
		cr_assert_eq(resp_parser_next(&p, &c), BATON_ECORRUPT);
		cr_assert_str_eq(resp_parser_error(&p),
				 "Protocol error: unbalanced quotes in "
				 "request");
		cr_assert_eq(resp_parser_error_kind(&p),
			     RESP_PERR_UNBALANCED_QUOTES);
		resp_parser_free(&p);
	}
}

Test(resp_parse, pipelined)
{
	EXPECT("*1\r\n$4\r\nPING\r\nSET a 1\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
	       "\r\nDEL a\n*1\r\n$6\r\nDBSIZE\r\n",
	       "PING;SET|a|1;GET|a;;DEL|a;DBSIZE;");
}

Test(resp_parse, arguments_stay_valid_until_the_next_feed)
{
	struct resp_parser p;
	resp_parser_init(&p, NULL);
	const char *in = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\nECHO hi\r\n";
	cr_assert_eq(resp_parser_feed(&p, (const uint8_t *)in, strlen(in)), 0);
	struct resp_command a, b;
	cr_assert_eq(resp_parser_next(&p, &a), RESP_OK);
	cr_assert_eq(a.argc, 2);
	const uint8_t *get = a.argv[0], *key = a.argv[1];
	cr_assert_eq(resp_parser_next(&p, &b), RESP_OK);
	cr_assert_eq(b.argc, 2);
	/* The bytes of the first command are still there. */
	cr_assert_eq(memcmp(get, "GET", 3), 0);
	cr_assert_eq(memcmp(key, "k", 1), 0);
	cr_assert_eq(memcmp(b.argv[1], "hi", 2), 0);
	cr_assert_eq(resp_parser_next(&p, &b), RESP_NEED_MORE);
	resp_parser_consumed(&p);
	cr_assert_eq(p.in.len, 0);
	resp_parser_free(&p);
}

Test(resp_parse, a_big_bulk_in_pieces)
{
	size_t n = 3u << 20;
	struct baton_buf in;
	baton_buf_init(&in);
	char head[64];
	int h = snprintf(head, sizeof head, "*2\r\n$3\r\nSET\r\n$%zu\r\n", n);
	baton_buf_append(&in, head, (size_t)h);
	cr_assert_eq(baton_buf_reserve(&in, n + 2), 0);
	for (size_t i = 0; i < n; i++)
		in.data[in.len + i] = (uint8_t)(i * 7);
	in.len += n;
	baton_buf_append(&in, "\r\nPING\r\n", 8);
	struct resp_parser p;
	resp_parser_init(&p, NULL);
	struct resp_command c;
	int got = 0;
	for (size_t off = 0; off < in.len; off += 4096) {
		size_t k = in.len - off < 4096 ? in.len - off : 4096;
		cr_assert_eq(resp_parser_feed(&p, in.data + off, k), 0);
		int rv;
		while ((rv = resp_parser_next(&p, &c)) == RESP_OK) {
			if (got == 0) {
				cr_assert_eq(c.argc, 2);
				cr_assert_eq(c.lens[1], n);
				for (size_t i = 0; i < n; i++)
					cr_assert_eq(c.argv[1][i],
						     (uint8_t)(i * 7));
			} else {
				cr_assert_eq(c.argc, 1);
				cr_assert_eq(memcmp(c.argv[0], "PING", 4), 0);
			}
			got++;
		}
		cr_assert_eq(rv, RESP_NEED_MORE);
		resp_parser_consumed(&p);
	}
	cr_assert_eq(got, 2);
	resp_parser_free(&p);
	baton_buf_free(&in);
}

Test(resp_parse, default_limits)
{
	struct resp_limits l;
	resp_limits_default(&l);
	cr_assert_eq(l.args_max, RESP_ARGS_MAX_DEFAULT);
	/* Within the core's 16 MiB log entry, with room for the rest. */
	cr_assert_eq(l.bulk_bytes_max, (size_t)16711680);
	cr_assert_eq(l.request_bytes_max, (size_t)16773120);
	cr_assert_eq(l.inline_bytes_max, (size_t)64 << 10);
	cr_assert_eq(l.query_bytes_max, (size_t)16773120 + (1u << 20));
}

/* A parser on data at once; its result and message. */
static void expect_error(const char *data, size_t len,
			 const struct resp_limits *l, int rv,
			 enum resp_protocol_error kind, const char *msg,
			 const char *before)
{
	expect_all_splits(data, len, l, before, rv);
	struct resp_parser p;
	resp_parser_init(&p, l);
	struct resp_command c;
	int got = resp_parser_feed(&p, (const uint8_t *)data, len);
	while (got == 0)
		got = resp_parser_next(&p, &c);
	cr_assert_eq(got, rv);
	cr_assert_eq(resp_parser_error_kind(&p), kind);
	cr_assert_str_eq(resp_parser_error(&p), msg);
	/* Sticky: the parser is done. */
	cr_assert_eq(resp_parser_next(&p, &c), rv);
	cr_assert_eq(resp_parser_feed(&p, (const uint8_t *)"PING\r\n", 6), rv);
	cr_assert_eq(resp_parser_next(&p, &c), rv);
	resp_parser_consumed(&p);
	cr_assert_eq(resp_parser_next(&p, &c), rv);
	resp_parser_free(&p);
}

#define EXPECT_ERROR(lit, l, rv, kind, msg, before)                            \
	expect_error(lit, sizeof(lit) - 1, l, rv, kind, msg, before)

Test(resp_parse, malformed)
{
	EXPECT_ERROR("*x\r\n", NULL, BATON_ECORRUPT, RESP_PERR_MBULK_LEN,
		     "Protocol error: invalid multibulk length", "");
	EXPECT_ERROR("*\r\n", NULL, BATON_ECORRUPT, RESP_PERR_MBULK_LEN,
		     "Protocol error: invalid multibulk length", "");
	EXPECT_ERROR("*01\r\n", NULL, BATON_ECORRUPT, RESP_PERR_MBULK_LEN,
		     "Protocol error: invalid multibulk length", "");
	EXPECT_ERROR("*1\rx", NULL, BATON_ECORRUPT, RESP_PERR_MBULK_LEN,
		     "Protocol error: invalid multibulk length", "");
	EXPECT_ERROR("*99999999999999999999\r\n", NULL, BATON_ECORRUPT,
		     RESP_PERR_MBULK_LEN,
		     "Protocol error: invalid multibulk length", "");
	EXPECT_ERROR("*1\r\nx", NULL, BATON_ECORRUPT, RESP_PERR_EXPECTED_DOLLAR,
		     "Protocol error: expected '$', got 'x'", "");
	EXPECT_ERROR("PING\r\n*2\r\n$1\r\na\r\n:1\r\n", NULL, BATON_ECORRUPT,
		     RESP_PERR_EXPECTED_DOLLAR,
		     "Protocol error: expected '$', got ':'", "PING;");
	EXPECT_ERROR("*1\r\n$-1\r\n", NULL, BATON_ECORRUPT, RESP_PERR_BULK_LEN,
		     "Protocol error: invalid bulk length", "");
	EXPECT_ERROR("*1\r\n$x\r\n", NULL, BATON_ECORRUPT, RESP_PERR_BULK_LEN,
		     "Protocol error: invalid bulk length", "");
	EXPECT_ERROR("*1\r\n$01\r\nx\r\n", NULL, BATON_ECORRUPT,
		     RESP_PERR_BULK_LEN, "Protocol error: invalid bulk length",
		     "");
	EXPECT_ERROR("*1\r\n$1\r\nab\r\n", NULL, BATON_ECORRUPT,
		     RESP_PERR_BULK_CRLF,
		     "Protocol error: bulk argument not followed by CRLF", "");
	EXPECT_ERROR("*1\r\n$1\r\na\n\r", NULL, BATON_ECORRUPT,
		     RESP_PERR_BULK_CRLF,
		     "Protocol error: bulk argument not followed by CRLF", "");
}

Test(resp_parse, limit_on_arguments)
{
	struct resp_limits l;
	resp_limits_default(&l);
	l.args_max = 3;
	expect_all_splits("*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", 25, &l,
			  "a|b|c;", RESP_NEED_MORE);
	EXPECT_ERROR("*4\r\n", &l, BATON_ETOOBIG, RESP_PERR_MBULK_LEN,
		     "Protocol error: invalid multibulk length (4 arguments "
		     "exceed the limit of 3)",
		     "");
	expect_all_splits("a b c\r\n", 7, &l, "a|b|c;", RESP_NEED_MORE);
	EXPECT_ERROR("a b c d\r\n", &l, BATON_ETOOBIG, RESP_PERR_INLINE_TOO_BIG,
		     "Protocol error: too big inline request", "");
}

Test(resp_parse, limit_on_bulk_length)
{
	struct resp_limits l;
	resp_limits_default(&l);
	l.bulk_bytes_max = 4;
	expect_all_splits("*1\r\n$4\r\nabcd\r\n", 14, &l, "abcd;",
			  RESP_NEED_MORE);
	EXPECT_ERROR("*1\r\n$5\r\n", &l, BATON_ETOOBIG, RESP_PERR_BULK_TOO_BIG,
		     "Protocol error: bulk of 5 bytes exceeds the limit of 4",
		     "");
	/* The default, refused at the header: no body needed. */
	EXPECT_ERROR("*1\r\n$16711681\r\n", NULL, BATON_ETOOBIG,
		     RESP_PERR_BULK_TOO_BIG,
		     "Protocol error: bulk of 16711681 bytes exceeds the limit "
		     "of 16711680",
		     "");
	EXPECT_ERROR(
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$419430400\r\nxx", NULL,
		BATON_ETOOBIG, RESP_PERR_BULK_TOO_BIG,
		"Protocol error: bulk of 419430400 bytes exceeds the limit "
		"of 16711680",
		"");
	struct resp_parser p;
	resp_parser_init(&p, NULL);
	const char *ok = "*1\r\n$16711680\r\n";
	resp_parser_feed(&p, (const uint8_t *)ok, strlen(ok));
	struct resp_command c;
	cr_assert_eq(resp_parser_next(&p, &c), RESP_NEED_MORE);
	resp_parser_free(&p);
}

/* What the size of the refused header said. */
static uint64_t error_size(const char *data, const struct resp_limits *l)
{
	struct resp_parser p;
	resp_parser_init(&p, l);
	struct resp_command c;
	int rv = resp_parser_feed(&p, (const uint8_t *)data, strlen(data));
	while (rv == RESP_OK)
		rv = resp_parser_next(&p, &c);
	cr_assert_eq(rv, BATON_ETOOBIG);
	uint64_t size = resp_parser_error_size(&p);
	resp_parser_free(&p);
	return size;
}

Test(resp_parse, limit_on_request_size)
{
	struct resp_limits l;
	resp_limits_default(&l);
	l.request_bytes_max = 32;
	/* 32 bytes exactly: "*2\r\n" 4, "$3\r\nGET\r\n" 9, "$12\r\n" 5,
	 * 12 and 2. */
	expect_all_splits("*2\r\n$3\r\nGET\r\n$12\r\n0123456789ab\r\n", 32, &l,
			  "GET|0123456789ab;", RESP_NEED_MORE);
	/* One byte more, refused at the header that crosses the limit. */
	EXPECT_ERROR("*2\r\n$3\r\nGET\r\n$13\r\n", &l, BATON_ETOOBIG,
		     RESP_PERR_REQUEST_TOO_BIG,
		     "Protocol error: request of at least 33 bytes exceeds the "
		     "limit of 32",
		     "");
	cr_assert_eq(error_size("*2\r\n$3\r\nGET\r\n$13\r\n", &l), 33);
	/* Arguments still to come count at their least ("$0\r\n\r\n"): a
	 * count that cannot fit is refused at the "*N" line. */
	EXPECT_ERROR("*6\r\n", &l, BATON_ETOOBIG, RESP_PERR_REQUEST_TOO_BIG,
		     "Protocol error: request of at least 40 bytes exceeds the "
		     "limit of 32",
		     "");
	EXPECT_ERROR("*3\r\n$3\r\nSET\r\n$13\r\n", &l, BATON_ETOOBIG,
		     RESP_PERR_REQUEST_TOO_BIG,
		     "Protocol error: request of at least 39 bytes exceeds the "
		     "limit of 32",
		     "");
	/* Each request counts alone: many of them pipelined pass. */
	expect_all_splits("*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
			  "*2\r\n$3\r\nGET\r\n$1\r\nb\r\n"
			  "*2\r\n$3\r\nGET\r\n$1\r\nc\r\n",
			  60, &l, "GET|a;GET|b;GET|c;", RESP_NEED_MORE);
	/* 0: no limit on the whole (older callers' zero-initialised
	 * limits). */
	l.request_bytes_max = 0;
	expect_all_splits("*2\r\n$3\r\nGET\r\n$13\r\n0123456789abc\r\n", 33, &l,
			  "GET|0123456789abc;", RESP_NEED_MORE);
	/* The bulk's own size is what a refused bulk reports. */
	l.bulk_bytes_max = 4;
	cr_assert_eq(error_size("*1\r\n$419430400\r\n", &l), 419430400u);
}

Test(resp_parse, limit_on_inline_length)
{
	struct resp_limits l;
	resp_limits_default(&l);
	l.inline_bytes_max = 8;
	expect_all_splits("12345678\r\n", 10, &l, "12345678;", RESP_NEED_MORE);
	expect_all_splits("1234567\n", 8, &l, "1234567;", RESP_NEED_MORE);
	EXPECT_ERROR("123456789\r\n", &l, BATON_ETOOBIG,
		     RESP_PERR_INLINE_TOO_BIG,
		     "Protocol error: too big inline request", "");
	/* No end of line in sight is enough. */
	EXPECT_ERROR("1234567890", &l, BATON_ETOOBIG, RESP_PERR_INLINE_TOO_BIG,
		     "Protocol error: too big inline request", "");
	/* Headers are lines too. */
	EXPECT_ERROR("*000000000", &l, BATON_ETOOBIG,
		     RESP_PERR_MBULK_COUNT_TOO_BIG,
		     "Protocol error: too big mbulk count string", "");
	EXPECT_ERROR("*1\r\n$000000000", &l, BATON_ETOOBIG,
		     RESP_PERR_BULK_COUNT_TOO_BIG,
		     "Protocol error: too big bulk count string", "");
}

Test(resp_parse, default_inline_limit)
{
	size_t n = RESP_INLINE_BYTES_MAX_DEFAULT + 2;
	char *line = malloc(n);
	memset(line, 'a', n);
	struct resp_parser p;
	resp_parser_init(&p, NULL);
	struct resp_command c;
	cr_assert_eq(resp_parser_feed(&p, (const uint8_t *)line, n), 0);
	cr_assert_eq(resp_parser_next(&p, &c), BATON_ETOOBIG);
	cr_assert_str_eq(resp_parser_error(&p),
			 "Protocol error: too big inline request");
	resp_parser_free(&p);
	/* Exactly the limit is fine. */
	memcpy(line + n - 2, "\r\n", 2);
	resp_parser_init(&p, NULL);
	cr_assert_eq(resp_parser_feed(&p, (const uint8_t *)line, n), 0);
	cr_assert_eq(resp_parser_next(&p, &c), RESP_OK);
	cr_assert_eq(c.argc, 1);
	cr_assert_eq(c.lens[0], RESP_INLINE_BYTES_MAX_DEFAULT);
	resp_parser_free(&p);
	free(line);
}

Test(resp_parse, limit_on_query_bytes)
{
	struct resp_limits l;
	resp_limits_default(&l);
	l.query_bytes_max = 32;
	struct resp_parser p;
	resp_parser_init(&p, &l);
	const char *big = "*1\r\n$100\r\n0123456789012345678901";
	cr_assert_eq(resp_parser_feed(&p, (const uint8_t *)big, 32), 0);
	struct resp_command c;
	cr_assert_eq(resp_parser_next(&p, &c), RESP_NEED_MORE);
	cr_assert_eq(resp_parser_feed(&p, (const uint8_t *)"x", 1),
		     BATON_ETOOBIG);
	cr_assert_eq(resp_parser_error_kind(&p), RESP_PERR_QUERY_TOO_BIG);
	cr_assert_eq(resp_parser_next(&p, &c), BATON_ETOOBIG);
	resp_parser_free(&p);
	/* Consumed commands do not count. */
	resp_parser_init(&p, &l);
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(
			resp_parser_feed(&p, (const uint8_t *)"PING\r\n", 6),
			0);
		cr_assert_eq(resp_parser_next(&p, &c), RESP_OK);
		cr_assert_eq(resp_parser_next(&p, &c), RESP_NEED_MORE);
		resp_parser_consumed(&p);
	}
	resp_parser_free(&p);
}

Test(resp_parse, idle_memory_is_released)
{
	struct resp_parser p;
	resp_parser_init(&p, NULL);
	struct baton_buf in;
	baton_buf_init(&in);
	resp_array(&in, 2000);
	for (int i = 0; i < 2000; i++)
		resp_bulk(&in, "abcdefghijklmnopqrstuvwxyz0123456789", 36);
	cr_assert_eq(resp_parser_feed(&p, in.data, in.len), 0);
	struct resp_command c;
	cr_assert_eq(resp_parser_next(&p, &c), RESP_OK);
	cr_assert_eq(c.argc, 2000);
	resp_parser_consumed(&p);
	cr_assert_eq(p.in.cap, 0);
	cr_assert_eq(p.args_cap, 0);
	cr_assert_eq(resp_parser_feed(&p, (const uint8_t *)"PING\r\n", 6), 0);
	cr_assert_eq(resp_parser_next(&p, &c), RESP_OK);
	resp_parser_free(&p);
	baton_buf_free(&in);
}

/* Bytes that look like RESP often enough to get deep into the parser. */
static size_t random_input(uint64_t *seed, uint8_t *buf, size_t cap)
{
	static const char *const tokens[] = {"*",
					     "$",
					     "\r\n",
					     "\r",
					     "\n",
					     "0",
					     "1",
					     "2",
					     "3",
					     "-1",
					     "-",
					     "9",
					     " ",
					     "\"",
					     "'",
					     "\\",
					     "x",
					     "\\x4",
					     "a",
					     "SET",
					     "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
					     "PING\r\n",
					     "$5\r\nhello\r\n",
					     "99999999999999999999"};
	size_t len = 0, want = kvt_rand(seed) % cap;
	while (len < want) {
		uint64_t r = kvt_rand(seed);
		if (r % 4 == 0) {
			buf[len++] = (uint8_t)(r >> 8);
			continue;
		}
		const char *t =
			tokens[(r >> 8) % (sizeof tokens / sizeof tokens[0])];
		size_t n = strlen(t);
		if (n > want - len)
			break;
		memcpy(buf + len, t, n);
		len += n;
	}
	return len;
}

Test(resp_parse, random_bytes_never_crash)
{
	struct resp_limits l;
	resp_limits_default(&l);
	l.args_max = 8;
	l.bulk_bytes_max = 64;
	l.inline_bytes_max = 64;
	l.query_bytes_max = 4096;
	l.request_bytes_max = 256;
	uint8_t buf[2048];
	for (uint64_t iter = 0; iter < 20000; iter++) {
		uint64_t seed = iter * 0x9E3779B97F4A7C15u + 1;
		size_t len = random_input(&seed, buf, sizeof buf);
		struct resp_parser p;
		resp_parser_init(&p, iter % 2 ? &l : NULL);
		size_t off = 0;
		int rv = 0;
		while (off < len && rv >= 0) {
			size_t k = 1 + kvt_rand(&seed) % 64;
			if (k > len - off)
				k = len - off;
			rv = resp_parser_feed(&p, buf + off, k);
			off += k;
			struct resp_command c;
			while (rv == 0 &&
			       (rv = resp_parser_next(&p, &c)) == RESP_OK) {
				cr_assert_geq(c.argc, 0);
				for (int i = 0; i < c.argc; i++)
					cr_assert_leq(c.lens[i], len,
						      "seed %" PRIu64, iter);
				/* Touch every byte (ASan checks). */
				for (int i = 0; i < c.argc; i++)
					for (size_t j = 0; j < c.lens[i]; j++)
						seed += c.argv[i][j];
			}
			if (rv == RESP_NEED_MORE)
				rv = 0;
			if (kvt_rand(&seed) % 2)
				resp_parser_consumed(&p);
		}
		if (rv < 0)
			cr_assert_neq(resp_parser_error(&p)[0], '\0',
				      "seed %" PRIu64, iter);
		resp_parser_free(&p);
	}
}
