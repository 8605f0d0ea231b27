/*
 * RESP2 replies rewritten for a RESP3 connection (resp3.c): nulls become
 * "_", a top array becomes a map only when asked and even, every other
 * byte is copied (bulk contents that look like nulls included), and a
 * malformed or truncated reply is refused with the output unchanged.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "baton/errors.h"
#include "resp.h"

/* A buffer the rewrites append to, holding "pre" already: what was there
 * must be kept as it is, on failure too. */
static void start(struct baton_buf *b)
{
	baton_buf_init(b);
	baton_buf_append(b, "pre", 3);
}

/* b's bytes as a NUL-terminated string in out (cap bytes); b freed. */
static void take(struct baton_buf *b, char *out, size_t cap)
{
	cr_assert_lt(b->len, cap);
	memcpy(out, b->data, b->len);
	out[b->len] = '\0';
	baton_buf_free(b);
}

/* The rewrite of in as a NUL-terminated string in out (cap bytes). */
static int convert(const char *in, bool top_map, char *out, size_t cap)
{
	struct baton_buf b;
	start(&b);
	int rv = resp3_from_resp2((const uint8_t *)in, strlen(in), top_map, &b);
	take(&b, out, cap);
	return rv;
}

Test(resp3, nulls_become_resp3_null)
{
	char out[256];
	cr_assert_eq(convert("$-1\r\n", false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre_\r\n");
	cr_assert_eq(convert("*-1\r\n", false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre_\r\n");
	cr_assert_eq(convert("*3\r\n$1\r\na\r\n$-1\r\n:5\r\n", false, out,
			     sizeof out),
		     0);
	cr_assert_str_eq(out, "pre*3\r\n$1\r\na\r\n_\r\n:5\r\n");
}

Test(resp3, bulk_contents_are_copied_not_parsed)
{
	char out[256];
	cr_assert_eq(convert("$5\r\n$-1\r\n\r\n", false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre$5\r\n$-1\r\n\r\n");
	cr_assert_eq(
		convert("$0\r\n\r\n+OK\r\n-ERR x\r\n", false, out, sizeof out),
		0);
	cr_assert_str_eq(out, "pre$0\r\n\r\n+OK\r\n-ERR x\r\n");
}

Test(resp3, top_map_only_when_asked_and_even)
{
	char out[256];
	const char *pairs =
		"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$1\r\nw\r\n";
	cr_assert_eq(convert(pairs, true, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre%2\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n"
			      "$1\r\nw\r\n");
	cr_assert_eq(convert(pairs, false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n"
			      "$1\r\nw\r\n");
	cr_assert_eq(convert("*0\r\n", true, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre%0\r\n");
	cr_assert_eq(convert("*1\r\n:1\r\n", true, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre*1\r\n:1\r\n");
	/* An error reply stays an error. */
	cr_assert_eq(convert("-WRONGTYPE x\r\n", true, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre-WRONGTYPE x\r\n");
	/* Only the outer array: a nested one is left alone. */
	cr_assert_eq(convert("*2\r\n*2\r\n:1\r\n:2\r\n:3\r\n", true, out,
			     sizeof out),
		     0);
	cr_assert_str_eq(out, "pre%1\r\n*2\r\n:1\r\n:2\r\n:3\r\n");
}

Test(resp3, resp3_lines_pass_unchanged)
{
	char out[256];
	const char *hello = "%1\r\n$5\r\nproto\r\n:3\r\n_\r\n";
	cr_assert_eq(convert(hello, false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre%1\r\n$5\r\nproto\r\n:3\r\n_\r\n");
	/* A verbatim string (INFO) passes whole, even with "\r\n" inside. */
	const char *info = "=8\r\ntxt:a\r\nb\r\n";
	cr_assert_eq(convert(info, false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre=8\r\ntxt:a\r\nb\r\n");
	/* COMMAND INFO's sets. */
	const char *flags = "*2\r\n~1\r\n+readonly\r\n~0\r\n";
	cr_assert_eq(convert(flags, false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre*2\r\n~1\r\n+readonly\r\n~0\r\n");
}

static int convert_elements(const char *in, const bool *maps, size_t n,
			    char *out, size_t cap)
{
	struct baton_buf b;
	start(&b);
	int rv = resp3_from_resp2_elements((const uint8_t *)in, strlen(in),
					   maps, n, &b);
	take(&b, out, cap);
	return rv;
}

Test(resp3, exec_elements_become_maps)
{
	char out[512];
	/* HSET, HGETALL, HSCAN (nested arrays), HGETALL of nothing, GET. */
	const char *exec = "*5\r\n:2\r\n"
			   "*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$1\r\nw\r\n"
			   "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
			   "*0\r\n$-1\r\n";
	const bool maps[] = {false, true, false, true, false};
	cr_assert_eq(convert_elements(exec, maps, 5, out, sizeof out), 0);
	cr_assert_str_eq(out,
			 "pre*5\r\n:2\r\n"
			 "%2\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$1\r\nw\r\n"
			 "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
			 "%0\r\n_\r\n");
	/* After a nested reply, the next element is still counted right. */
	const bool second[] = {false, true};
	cr_assert_eq(convert_elements("*2\r\n*2\r\n*1\r\n:1\r\n:2\r\n"
				      "*2\r\n:3\r\n:4\r\n",
				      second, 2, out, sizeof out),
		     0);
	cr_assert_str_eq(out, "pre*2\r\n*2\r\n*1\r\n:1\r\n:2\r\n"
			      "%1\r\n:3\r\n:4\r\n");
	/* EXECABORT, and a WATCH that stopped EXEC: as without masks. */
	cr_assert_eq(
		convert_elements("-EXECABORT x\r\n", maps, 5, out, sizeof out),
		0);
	cr_assert_str_eq(out, "pre-EXECABORT x\r\n");
	cr_assert_eq(convert_elements("*-1\r\n", maps, 5, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre_\r\n");
	/* Too deep for the masks: refused, the output unchanged. */
	char deep[4 * (RESP3_DEPTH_MAX + 2) + 8] = "";
	for (unsigned i = 0; i <= RESP3_DEPTH_MAX; i++)
		strcat(deep, "*1\r\n");
	strcat(deep, ":1\r\n");
	cr_assert_eq(convert_elements(deep, maps, 5, out, sizeof out),
		     BATON_ECORRUPT);
	cr_assert_str_eq(out, "pre");
	cr_assert_eq(convert(deep, false, out, sizeof out), 0);
}

Test(resp3, malformed_is_refused_and_output_unchanged)
{
	char out[256];
	const char *bad[] = {
		"$5\r\nab\r\n", /* bulk shorter than announced */
		"$2\r\nabXY",	/* no CRLF after the bulk */
		"$x\r\n",	/* no number */
		"*2",		/* no CRLF */
		"?what\r\n",	/* no such type */
		"$-2\r\n",	/* a negative length other than -1 */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(convert(bad[i], false, out, sizeof out),
			     BATON_ECORRUPT, "%s", bad[i]);
		cr_assert_str_eq(out, "pre");
	}
	cr_assert_eq(convert("", false, out, sizeof out), 0);
	cr_assert_str_eq(out, "pre");
}
