/*
 * The reply scanner (resp.h): where each reply ends, for every RESP2 and
 * RESP3 type, fed whole, split at every byte and one byte at a time;
 * nested aggregates to the depth limit; every malformed case and every
 * limit refused with its error, which then sticks.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/raft.h"
#include "resp.h"

static struct resp_reply_limits limits_default(void)
{
	struct resp_reply_limits l = {
		.reply_bytes_max = (size_t)1 << 20,
		.line_bytes_max = RESP_REPLY_LINE_BYTES_MAX_DEFAULT,
		.depth_max = RESP_REPLY_DEPTH_MAX,
	};
	return l;
}

/* Scan s (whole) with the limits l: the return value, and the length. */
static int scan_with(const struct resp_reply_limits *l, const char *s,
		     size_t len, size_t *out)
{
	struct resp_reply_scanner sc;
	resp_reply_scanner_init(&sc, l);
	*out = 0;
	return resp_reply_scan(&sc, (const uint8_t *)s, len, out);
}

/* Every reply of the tests, each one complete. */
static const char *const replies[] = {
	"+OK\r\n",
	"+\r\n",
	"-ERR unknown command 'FOO'\r\n",
	"-WRONGTYPE Operation against a key holding the wrong kind\r\n",
	":0\r\n",
	":-9223372036854775808\r\n",
	":42\r\n",
	"$-1\r\n",
	"$0\r\n\r\n",
	"$5\r\nhello\r\n",
	"$4\r\na\r\nb\r\n", /* a bulk may hold CR and LF */
	"*-1\r\n",
	"*0\r\n",
	"*2\r\n$1\r\na\r\n$-1\r\n",
	"*3\r\n:1\r\n*2\r\n+x\r\n-E y\r\n$3\r\nabc\r\n",
	"*2\r\n*2\r\n*0\r\n*-1\r\n*1\r\n*1\r\n:7\r\n",
	"_\r\n",
	",3.25\r\n",
	",-inf\r\n",
	",nan\r\n",
	",1e-7\r\n",
	"#t\r\n",
	"#f\r\n",
	"(3492890328409238509324850943850943825024385\r\n",
	"(-1\r\n",
	"!21\r\nSYNTAX invalid syntax\r\n",
	"=15\r\ntxt:Some string\r\n",
	"%2\r\n+first\r\n:1\r\n+second\r\n*1\r\n_\r\n",
	"%0\r\n",
	"~3\r\n+a\r\n:1\r\n#f\r\n",
	">2\r\n+message\r\n$2\r\nhi\r\n",
	"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n$3\r\nval\r\n",
	"*2\r\n|1\r\n+k\r\n+v\r\n:1\r\n:2\r\n",
};
#define N_REPLIES (sizeof replies / sizeof replies[0])

Test(resp_reply, every_type_whole)
{
	struct resp_reply_limits l = limits_default();
	for (size_t i = 0; i < N_REPLIES; i++) {
		size_t n, len = strlen(replies[i]);
		int rv = scan_with(&l, replies[i], len, &n);
		cr_assert_eq(rv, RESP_OK, "%s: %d", replies[i], rv);
		cr_assert_eq(n, len, "%s: %zu", replies[i], n);
	}
}

/* Every prefix shorter than the reply needs more; the whole one (and the
 * whole one followed by the next reply) ends exactly at its length. */
Test(resp_reply, split_at_every_byte)
{
	struct resp_reply_limits l = limits_default();
	for (size_t i = 0; i < N_REPLIES; i++) {
		char both[512];
		size_t len = strlen(replies[i]);
		snprintf(both, sizeof both, "%s%s", replies[i],
			 replies[(i + 1) % N_REPLIES]);
		for (size_t cut = 0; cut < len; cut++) {
			size_t n;
			int rv = scan_with(&l, both, cut, &n);
			cr_assert_eq(rv, RESP_NEED_MORE, "%s cut at %zu: %d",
				     replies[i], cut, rv);
		}
		size_t n;
		cr_assert_eq(scan_with(&l, both, strlen(both), &n), RESP_OK);
		cr_assert_eq(n, len, "%s then more: %zu", replies[i], n);
	}
}

/* One scanner fed one more byte at each call resumes where it stopped;
 * a stream of every reply comes out reply by reply. */
Test(resp_reply, incremental_stream)
{
	struct resp_reply_limits l = limits_default();
	char stream[4096] = "";
	for (size_t i = 0; i < N_REPLIES; i++)
		strcat(stream, replies[i]);
	size_t total = strlen(stream), start = 0, found = 0;
	struct resp_reply_scanner sc;
	resp_reply_scanner_init(&sc, &l);
	for (size_t have = start; have <= total; have++) {
		size_t n;
		int rv = resp_reply_scan(&sc, (const uint8_t *)stream + start,
					 have - start, &n);
		if (rv == RESP_NEED_MORE)
			continue;
		cr_assert_eq(rv, RESP_OK, "at %zu: %s", have,
			     resp_reply_scanner_error(&sc));
		cr_assert_lt(found, N_REPLIES);
		cr_assert_eq(n, strlen(replies[found]), "reply %zu", found);
		cr_assert_eq(memcmp(stream + start, replies[found], n), 0);
		start += n;
		found++;
		have = start - 1; /* the loop adds one back */
	}
	cr_assert_eq(found, N_REPLIES);
	cr_assert_eq(start, total);
}

/* n arrays of one element nested, around :1. */
static char *nested(uint32_t n)
{
	char *s = malloc((size_t)n * 4 + 8);
	cr_assert_not_null(s);
	s[0] = '\0';
	for (uint32_t i = 0; i < n; i++)
		strcat(s, "*1\r\n");
	strcat(s, ":1\r\n");
	return s;
}

Test(resp_reply, nesting_to_the_limit)
{
	struct resp_reply_limits l = limits_default();
	char *ok = nested(RESP_REPLY_DEPTH_MAX);
	size_t n;
	cr_assert_eq(scan_with(&l, ok, strlen(ok), &n), RESP_OK);
	cr_assert_eq(n, strlen(ok));
	char *deep = nested(RESP_REPLY_DEPTH_MAX + 1);
	struct resp_reply_scanner sc;
	resp_reply_scanner_init(&sc, &l);
	cr_assert_eq(
		resp_reply_scan(&sc, (const uint8_t *)deep, strlen(deep), &n),
		BATON_ETOOBIG);
	cr_assert_not_null(
		strstr(resp_reply_scanner_error(&sc), "nested more than 64"));
	/* A lower limit of its own. */
	l.depth_max = 2;
	char *three = nested(3);
	cr_assert_eq(scan_with(&l, three, strlen(three), &n), BATON_ETOOBIG);
	char *two = nested(2);
	cr_assert_eq(scan_with(&l, two, strlen(two), &n), RESP_OK);
	free(ok);
	free(deep);
	free(three);
	free(two);
}

struct bad {
	const char *bytes;
	const char *error; /* a part of the error's text */
};

static const struct bad malformed[] = {
	{"?x\r\n", "unknown reply type byte 0x3f"},
	{"+OK\n", "\\n without \\r"},
	{"\n", "unknown reply type byte 0x0a"},
	{"+O\rK\r\n", "\\r inside a line"},
	{":12a\r\n", "malformed ':' line"},
	{":\r\n", "malformed ':' line"},
	{":01\r\n", "malformed ':' line"},
	{"$abc\r\n", "malformed '$' line"},
	{"$-2\r\n", "negative length -2"},
	{"!-1\r\n", "negative length -1"},
	{"$3\r\nabcd\r\n", "not followed by \\r\\n"},
	{"$3\r\nabc\n\n", "not followed by \\r\\n"},
	{"*x\r\n", "malformed '*' line"},
	{"*-2\r\n", "negative count -2"},
	{"%-1\r\n", "negative count -1"},
	{"~-1\r\n", "negative count -1"},
	{"*1\r\n&\r\n", "unknown reply type byte 0x26"},
	{"_x\r\n", "malformed '_' line"},
	{"#x\r\n", "malformed '#' line"},
	{"#tt\r\n", "malformed '#' line"},
	{",\r\n", "malformed ',' line"},
	{",1.5x\r\n", "malformed ',' line"},
	{"(\r\n", "malformed '(' line"},
	{"(1-2\r\n", "malformed '(' line"},
	{"=3\r\ntxt\r\n", "verbatim string"},
	{"=5\r\ntxt-x\r\n", "verbatim string"},
};

Test(resp_reply, malformed_refused_and_sticky)
{
	struct resp_reply_limits l = limits_default();
	for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
		const struct bad *b = &malformed[i];
		struct resp_reply_scanner sc;
		resp_reply_scanner_init(&sc, &l);
		size_t n;
		int rv = resp_reply_scan(&sc, (const uint8_t *)b->bytes,
					 strlen(b->bytes), &n);
		cr_assert_eq(rv, BATON_ECORRUPT, "%s: %d", b->bytes, rv);
		cr_assert_not_null(
			strstr(resp_reply_scanner_error(&sc), b->error),
			"%s: '%s'", b->bytes, resp_reply_scanner_error(&sc));
		/* Sticky, even given a good reply. */
		cr_assert_eq(
			resp_reply_scan(&sc, (const uint8_t *)"+OK\r\n", 5, &n),
			BATON_ECORRUPT);
	}
}

Test(resp_reply, limits_at_the_header)
{
	struct resp_reply_limits l = limits_default();
	l.reply_bytes_max = 100;
	l.line_bytes_max = 16;
	size_t n;
	/* The largest bulk that fits: "$93\r\n" + 93 + "\r\n" = 100 bytes. */
	char fits[128];
	int len = snprintf(fits, sizeof fits, "$93\r\n%093d\r\n", 0);
	cr_assert_eq(len, 100);
	cr_assert_eq(scan_with(&l, fits, (size_t)len, &n), RESP_OK);
	cr_assert_eq(n, 100);
	/* One byte more is refused at its header, before any body. */
	struct resp_reply_scanner sc;
	resp_reply_scanner_init(&sc, &l);
	cr_assert_eq(resp_reply_scan(&sc, (const uint8_t *)"$94\r\n", 5, &n),
		     BATON_ETOOBIG);
	cr_assert_not_null(
		strstr(resp_reply_scanner_error(&sc), "bulk of 94 bytes"));
	cr_assert_eq(scan_with(&l, "$99999999999\r\n", 14, &n), BATON_ETOOBIG);
	/* An aggregate whose count cannot fit. */
	cr_assert_eq(scan_with(&l, "*33\r\n", 5, &n), BATON_ETOOBIG);
	cr_assert_eq(scan_with(&l, "*31\r\n", 5, &n), RESP_NEED_MORE);
	cr_assert_eq(scan_with(&l, "%16\r\n", 5, &n), BATON_ETOOBIG);
	cr_assert_eq(scan_with(&l, "*9223372036854775807\r\n", 22, &n),
		     BATON_ETOOBIG);
	/* A line: 16 bytes is fine, 17 refused, also before its end. */
	cr_assert_eq(scan_with(&l, "+0123456789abcdef\r\n", 19, &n), RESP_OK);
	cr_assert_eq(scan_with(&l, "+0123456789abcdefg\r\n", 20, &n),
		     BATON_ETOOBIG);
	cr_assert_eq(scan_with(&l, "+0123456789abcdefgh", 19, &n),
		     BATON_ETOOBIG);
	cr_assert_eq(scan_with(&l, "+0123456789abcdef\r", 18, &n),
		     RESP_NEED_MORE);
	/* Many small elements past the reply limit. */
	char many[256] = "*30\r\n";
	for (int i = 0; i < 30; i++)
		strcat(many, ":1\r\n");
	resp_reply_scanner_init(&sc, &l);
	cr_assert_eq(
		resp_reply_scan(&sc, (const uint8_t *)many, strlen(many), &n),
		BATON_ETOOBIG);
	cr_assert_not_null(
		strstr(resp_reply_scanner_error(&sc), "more than 100 bytes"));
}

/* Bytes from a fixed seed: the scanner returns one of its answers and,
 * when it finds a reply, a length within the bytes. */
Test(resp_reply, random_bytes)
{
	struct resp_reply_limits l = limits_default();
	l.reply_bytes_max = 4096;
	uint64_t x = 0x9e3779b97f4a7c15u;
	static const char alphabet[] = "+-:$*_,#(!=%~>|\r\n0123456789-ab";
	for (int round = 0; round < 20000; round++) {
		uint8_t buf[64];
		size_t len = (size_t)(round % 64);
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = (uint8_t)alphabet[x % (sizeof alphabet - 1)];
		}
		struct resp_reply_scanner sc;
		resp_reply_scanner_init(&sc, &l);
		size_t n = 0;
		int rv = resp_reply_scan(&sc, buf, len, &n);
		cr_assert(rv == RESP_OK || rv == RESP_NEED_MORE ||
			  rv == BATON_ECORRUPT || rv == BATON_ETOOBIG);
		if (rv == RESP_OK)
			cr_assert(n >= 3 && n <= len);
	}
}
