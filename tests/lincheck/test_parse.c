/*
 * The parsers: the documented example, a round trip through the baton
 * format, the Jepsen and EDN formats, detection, malformed input (each
 * case refused with file:line), and a seeded random mutation loop that
 * must never crash.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

#define FUZZ_ROUNDS 20000u
#define FUZZ_SEED 20240601u
#define FUZZ_EDITS_MAX 8u
#define FUZZ_TEXT_BYTES 8192u
#define ROUND_TRIP_HISTORIES 3000u
#define ROUND_TRIP_OPS_MAX 24u

static bool same_value(const struct lincheck_history *a,
		       struct lincheck_value x,
		       const struct lincheck_history *b,
		       struct lincheck_value y)
{
	if (x.tag != y.tag)
		return false;
	if (x.tag != LINCHECK_PRESENT)
		return true;
	return x.len == y.len && memcmp(lincheck_value_bytes(a, x),
					lincheck_value_bytes(b, y), x.len) == 0;
}

static void assert_same_history(const struct lincheck_history *a,
				const struct lincheck_history *b)
{
	cr_assert_eq(a->n_ops, b->n_ops);
	for (uint32_t i = 0; i < a->n_ops; i++) {
		const struct lincheck_op *x = &a->ops[i];
		const struct lincheck_op *y = &b->ops[i];
		cr_assert_eq(x->client, y->client, "op %u", i);
		cr_assert_eq(x->invoke_time, y->invoke_time, "op %u", i);
		cr_assert_eq(x->return_time, y->return_time, "op %u", i);
		cr_assert_eq(x->complete_time, y->complete_time, "op %u", i);
		cr_assert_eq(x->kind, y->kind, "op %u", i);
		cr_assert_eq(x->status, y->status, "op %u", i);
		cr_assert(same_value(a, a->keys[x->key], b, b->keys[y->key]));
		cr_assert(same_value(a, x->arg, b, y->arg), "op %u", i);
		cr_assert(same_value(a, x->arg2, b, y->arg2), "op %u", i);
		cr_assert(same_value(a, x->out, b, y->out), "op %u", i);
		cr_assert_eq(x->delta, y->delta, "op %u", i);
		cr_assert_eq(x->out_known, y->out_known, "op %u", i);
		if (x->out_known)
			cr_assert_eq(x->out_int, y->out_int, "op %u", i);
	}
}

/* ------------------------------------------------------------------------ */

static const char doc_example[] =
	"baton-history\t1\n"
	"# a comment: the seed, the cluster\n"
	"1000\t1\tinvoke\tget\tk1\n"
	"1200\t2\tinvoke\tset\tk1\t=hello\n"
	"1500\t1\tok\tget\tk1\t-\n"
	"1600\t3\tinvoke\tappend\tk1\t= world\n"
	"1900\t2\tok\tset\tk1\n"
	"2100\t3\tinfo\tappend\tk1\ttimeout\n"
	"2200\t13\tinvoke\tincr\tcounter\t1\n"
	"2300\t13\tok\tincr\tcounter\t1\n"
	"2400\t4\tinvoke\tcas\tk1\t=hello%20world\t=bye\n"
	"2500\t4\tok\tcas\tk1\t1\n"
	"2600\t5\tinvoke\tget\tk%25\n";

Test(parse, documented_example)
{
	struct lincheck_history h;
	struct lincheck_error err;
	cr_assert_eq(ref_parse(doc_example, LINCHECK_FORMAT_AUTO, &h, &err), 0,
		     "%s", err.text);
	cr_assert_eq(h.format, LINCHECK_FORMAT_BATON);
	cr_assert_eq(h.n_ops, 6u);
	cr_assert_eq(h.n_keys, 3u);
	const struct lincheck_op *get = &h.ops[0];
	cr_assert_eq(get->status, LINCHECK_OK);
	cr_assert_eq(get->out.tag, LINCHECK_ABSENT);
	const struct lincheck_op *append = &h.ops[2];
	cr_assert_eq(append->status, LINCHECK_INFO);
	cr_assert_eq(append->return_time, INT64_MAX);
	cr_assert_eq(append->complete_line, 8u);
	cr_assert_eq(append->arg.len, 6u);
	cr_assert_eq(memcmp(lincheck_value_bytes(&h, append->arg), " world", 6),
		     0);
	const struct lincheck_op *cas = &h.ops[4];
	cr_assert_eq(
		memcmp(lincheck_value_bytes(&h, cas->arg), "hello world", 11),
		0);
	const struct lincheck_op *pending = &h.ops[5];
	cr_assert_eq(pending->status, LINCHECK_INFO);
	cr_assert_eq(pending->complete_line, 0u);
	struct lincheck_value k = h.keys[pending->key];
	cr_assert_eq(k.len, 2u);
	cr_assert_eq(memcmp(lincheck_value_bytes(&h, k), "k%", 2), 0);
	cr_assert_eq(ref_check(&h), LINCHECK_LINEARIZABLE);
	lincheck_history_free(&h);
}

Test(parse, baton_round_trip)
{
	for (uint32_t i = 0; i < ROUND_TRIP_HISTORIES; i++) {
		struct lincheck_history h, back;
		struct lincheck_error err;
		ref_random_history(1000 + i, ROUND_TRIP_OPS_MAX, 4, &h);
		size_t len;
		char *text = ref_baton_text(&h, &len);
		lincheck_history_init(&back);
		cr_assert_eq(lincheck_parse("rt", text, len,
					    LINCHECK_FORMAT_BATON, &back, &err),
			     0, "seed %u: %s\n%s", 1000 + i, err.text, text);
		assert_same_history(&h, &back);
		/* Writing it again gives the same bytes. */
		size_t len2;
		char *text2 = ref_baton_text(&back, &len2);
		cr_assert_eq(len, len2);
		cr_assert_eq(memcmp(text, text2, len), 0);
		free(text);
		free(text2);
		lincheck_history_free(&h);
		lincheck_history_free(&back);
	}
}

Test(parse, baton_every_byte_escaped)
{
	struct lincheck_history h;
	lincheck_history_init(&h);
	uint8_t all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	struct lincheck_op op;
	memset(&op, 0, sizeof(op));
	op.kind = LINCHECK_SET;
	cr_assert_eq(lincheck_history_key(&h, all, sizeof(all), &op.key, NULL),
		     0);
	cr_assert_eq(
		lincheck_history_store(&h, all, sizeof(all), &op.arg, NULL), 0);
	cr_assert_eq(lincheck_history_invoke(&h, &op, 1, NULL), 0);
	lincheck_history_finish(&h);
	size_t len;
	char *text = ref_baton_text(&h, &len);
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)text[i];
		cr_assert(c == '\t' || c == '\n' || (c >= 0x20 && c <= 0x7e));
	}
	struct lincheck_history back;
	struct lincheck_error err;
	lincheck_history_init(&back);
	cr_assert_eq(lincheck_parse("b", text, len, LINCHECK_FORMAT_AUTO, &back,
				    &err),
		     0, "%s", err.text);
	assert_same_history(&h, &back);
	free(text);
	lincheck_history_free(&h);
	lincheck_history_free(&back);
}

Test(parse, jepsen_lines)
{
	const char *text = "2015 something else entirely\n"
			   "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"
			   "INFO  jepsen.util - 1   :invoke :write  3\n"
			   "INFO  jepsen.util - :nemesis\t:info\t:start\tnil\n"
			   "INFO  jepsen.util - 0\t:ok\t:read\tnil\n"
			   "INFO  jepsen.util - 1\t:ok\t:write\t3\n"
			   "INFO  jepsen.util - 2\t:invoke\t:cas\t[3 4]\n"
			   "INFO  jepsen.util - 3\t:invoke\t:cas\t[nil 1]\n"
			   "INFO  jepsen.util - 2\t:fail\t:cas\t[3 4]\n"
			   "INFO  jepsen.util - 3\t:info\t:cas\t:timed-out\n"
			   "INFO  jepsen.util - 4\t:invoke\t:read\tnil\n"
			   "INFO  jepsen.util - 4\t:ok\t:read\t3\n";
	struct lincheck_history h;
	struct lincheck_error err;
	cr_assert_eq(ref_parse(text, LINCHECK_FORMAT_AUTO, &h, &err), 0, "%s",
		     err.text);
	cr_assert_eq(h.format, LINCHECK_FORMAT_JEPSEN);
	cr_assert_eq(h.n_ops, 5u);
	cr_assert_eq(h.ops[0].out.tag, LINCHECK_ABSENT);
	cr_assert_eq(h.ops[0].invoke_time, 2);
	cr_assert_eq(h.ops[0].return_time, 5);
	cr_assert_eq(h.ops[2].status, LINCHECK_FAIL);
	cr_assert_eq(h.ops[3].arg.tag, LINCHECK_ABSENT);
	cr_assert_eq(h.ops[3].status, LINCHECK_INFO);
	cr_assert_eq(ref_check(&h), LINCHECK_LINEARIZABLE);
	lincheck_history_free(&h);
}

Test(parse, edn_lines)
{
	const char *text =
		"{:process 0, :type :invoke, :f :put, :key \"a\\\"b\", "
		":value \"caf\\u00e9\\n\"}\n"
		"; a comment\n"
		"{:process :nemesis, :type :info, :f :start, :value "
		"{:x [1 2 #{3}]}}\n"
		"{:type :ok, :process 0, :f :put, :key \"a\\\"b\", :value "
		"\"caf\\u00e9\\n\", :time 123, :error [:a {:b \"}\"}]}\n"
		"{:process 1, :type :invoke, :f :get, :key \"a\\\"b\"}\n"
		"{:process 1, :type :ok, :f :get, :key \"a\\\"b\", :value "
		"\"caf\\u00e9\\n\"}\n"
		"{:process 2, :type :invoke, :f :cas, :key 7, :value [nil 5]}\n"
		"{:process 2, :type :ok, :f :cas, :key 7, :value [nil 5]}\n"
		"{:process 3, :type :invoke, :f :incr, :key 7, :value 2}\n"
		"{:process 3, :type :ok, :f :incr, :key 7, :value 7}\n"
		"{:process 4, :type :invoke, :f :read, :value nil}\n"
		"{:process 4, :type :ok, :f :read, :value nil}\n";
	struct lincheck_history h;
	struct lincheck_error err;
	cr_assert_eq(ref_parse(text, LINCHECK_FORMAT_AUTO, &h, &err), 0, "%s",
		     err.text);
	cr_assert_eq(h.format, LINCHECK_FORMAT_EDN);
	cr_assert(h.missing_reads_empty);
	cr_assert_eq(h.n_ops, 5u);
	struct lincheck_value key = h.keys[h.ops[0].key];
	cr_assert_eq(key.len, 3u);
	cr_assert_eq(memcmp(lincheck_value_bytes(&h, key), "a\"b", 3), 0);
	cr_assert_eq(h.ops[0].arg.len, 6u);
	cr_assert_eq(memcmp(lincheck_value_bytes(&h, h.ops[0].arg),
			    "caf\xc3\xa9\n", 6),
		     0);
	cr_assert_eq(h.ops[3].delta, 2);
	cr_assert_eq(h.ops[3].out_int, 7);
	cr_assert_eq(ref_check(&h), LINCHECK_LINEARIZABLE);
	lincheck_history_free(&h);
}

Test(parse, detection_and_empty_files)
{
	cr_assert_eq(lincheck_format_detect("", 0), LINCHECK_FORMAT_AUTO);
	cr_assert_eq(lincheck_format_detect("hello\n", 6),
		     LINCHECK_FORMAT_AUTO);
	struct lincheck_history h;
	struct lincheck_error err;
	cr_assert_eq(ref_parse(" \n\n", LINCHECK_FORMAT_AUTO, &h, &err), 0);
	cr_assert_eq(h.n_ops, 0u);
	cr_assert_eq(ref_check(&h), LINCHECK_LINEARIZABLE);
	lincheck_history_free(&h);
	cr_assert_eq(ref_parse("hello\n", LINCHECK_FORMAT_AUTO, &h, &err),
		     LINCHECK_EMALFORMED);
	lincheck_history_free(&h);
	/* A named format is used as named. */
	cr_assert_eq(ref_parse(doc_example, LINCHECK_FORMAT_EDN, &h, &err),
		     LINCHECK_EMALFORMED);
	cr_assert_not_null(strstr(err.text, "test:1:"), "%s", err.text);
	lincheck_history_free(&h);
	enum lincheck_format f;
	cr_assert_eq(lincheck_format_parse("jepsen", &f), 0);
	cr_assert_eq(f, LINCHECK_FORMAT_JEPSEN);
	cr_assert_eq(lincheck_format_parse("json", &f), LINCHECK_EUSAGE);
}

/* ------------------------------------------------------------------------ */
/* Malformed input: the error and the line it names.                       */

struct bad_case {
	enum lincheck_format format;
	const char *text;
	int rv;
	uint32_t line;
};

#define H "baton-history\t1\n"
#define INV "1\t1\tinvoke\tset\tk\t=v\n"

static const struct bad_case bad_cases[] = {
	{LINCHECK_FORMAT_BATON, "", LINCHECK_EMALFORMED, 0},
	{LINCHECK_FORMAT_BATON, "baton-history\t2\n", LINCHECK_EVERSION, 1},
	{LINCHECK_FORMAT_BATON, "baton-history\t0\n", LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_BATON, "baton-history\n", LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_BATON, "# x\n" H, LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_BATON, H "x\t1\tinvoke\tget\tk\n", LINCHECK_EMALFORMED,
	 2},
	{LINCHECK_FORMAT_BATON, H "-1\t1\tinvoke\tget\tk\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "9223372036854775807\t1\tinvoke\tget\tk\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "99999999999999999999\t1\tinvoke\tget\tk\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t-1\tinvoke\tget\tk\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tstart\tget\tk\n", LINCHECK_EMALFORMED,
	 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tpop\tk\n", LINCHECK_EMALFORMED,
	 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tget\n", LINCHECK_EMALFORMED,
	 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tget\tk\t=x\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tget\tk\t\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\n", LINCHECK_EMALFORMED,
	 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\tv\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\t-\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\t=%G1\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\t=%4\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\t=a%\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\xff\t=a\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tset\tk\r\r\t=a\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tincr\tk\t1.5\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tcas\tk\t=a\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tcas\tk\t=a\t-\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_BATON, H "1\t1\tok\tget\tk\t-\n", LINCHECK_EMALFORMED,
	 2},
	{LINCHECK_FORMAT_BATON, H INV INV, LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H INV "2\t1\tok\tget\tk\t-\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H INV "2\t1\tok\tset\tj\n", LINCHECK_EMALFORMED,
	 3},
	{LINCHECK_FORMAT_BATON, H INV "0\t1\tok\tset\tk\n", LINCHECK_EMALFORMED,
	 3},
	{LINCHECK_FORMAT_BATON,
	 H INV "5\t1\tok\tset\tk\n0\t1\tinvoke\tget\tk\n", LINCHECK_EMALFORMED,
	 4},
	{LINCHECK_FORMAT_BATON, H INV "2\t1\tok\tset\tk\t=v\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tget\tk\n2\t1\tok\tget\tk\t?\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tget\tk\n2\t1\tok\tget\tk\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON,
	 H "1\t1\tinvoke\tcas\tk\t-\t=a\n2\t1\tok\tcas\tk\t2\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON,
	 H "1\t1\tinvoke\tcas\tk\t-\t=a\n2\t1\tok\tcas\tk\t?\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tdel\tk\n2\t1\tok\tdel\tk\t2\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON,
	 H "1\t1\tinvoke\tappend\tk\t=a\n2\t1\tok\tappend\tk\t-1\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H INV "2\t1\tfail\tset\tk\tr\tx\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H INV "2\t1\tinfo\tset\tk\t%zz\n",
	 LINCHECK_EMALFORMED, 3},
	{LINCHECK_FORMAT_BATON, H "1\t1\tinvoke\tget\tk\t\t\t\t\t\t\n",
	 LINCHECK_EMALFORMED, 2},
	{LINCHECK_FORMAT_JEPSEN, "INFO jepsen.util - 1\t:invoke\t:frob\t1\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_JEPSEN, "INFO jepsen.util - 1\t:start\t:read\tnil\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_JEPSEN, "INFO jepsen.util - 1\t:invoke\t:write\tnil\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_JEPSEN, "INFO jepsen.util - 1\t:invoke\t:write\t1 2\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_JEPSEN, "INFO jepsen.util - 1\t:invoke\t:cas\t[1]\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_JEPSEN, "INFO jepsen.util - 1\t:invoke\t:cas\t[1 2\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_JEPSEN, "INFO jepsen.util - 1\t:ok\t:read\t1\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN, "[1 2]\n", LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN, "{:process 1, :type :invoke, :f :get\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN, "{:process 1, :type :invoke}\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN, "{:process 1, :type :invoke, :f :zap}\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN, "{:process -1, :type :invoke, :f :get}\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN,
	 "{:process 1, :type :invoke, :f :get, :key \"a\\q\"}\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN,
	 "{:process 1, :type :invoke, :f :get, :key \"\\ud800\"}\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN, "{:process 1, :type :invoke, :f :put}\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN,
	 "{:process 1, :type :invoke, :f :cas, :value [1 2 3]}\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN, "{:process 1, :process 2}\n", LINCHECK_EMALFORMED,
	 1},
	{LINCHECK_FORMAT_EDN, "{:process 1, :type :invoke, :f :get} x\n",
	 LINCHECK_EMALFORMED, 1},
	{LINCHECK_FORMAT_EDN,
	 "{:process 1, :type :invoke, :f :get, :x "
	 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
	 "]"
	 "]]]]]]]]]]]}\n",
	 LINCHECK_EMALFORMED, 1},
};

Test(parse, malformed_input_is_refused_with_its_line)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(*bad_cases); i++) {
		const struct bad_case *c = &bad_cases[i];
		struct lincheck_history h;
		struct lincheck_error err;
		memset(&err, 0, sizeof(err));
		int rv = ref_parse(c->text, c->format, &h, &err);
		cr_expect_eq(rv, c->rv, "case %zu: %s (%s)", i,
			     lincheck_err_name(rv), err.text);
		char want[64];
		if (c->line > 0)
			snprintf(want, sizeof(want), "test:%u: ", c->line);
		else
			snprintf(want, sizeof(want), "test: ");
		cr_expect_eq(strncmp(err.text, want, strlen(want)), 0,
			     "case %zu: \"%s\" should start \"%s\"", i,
			     err.text, want);
		lincheck_history_free(&h);
	}
}

Test(parse, nul_bytes_and_long_lines)
{
	struct lincheck_history h;
	struct lincheck_error err;
	const char nul[] = "baton-history\t1\n1\t1\tinvoke\tget\tk\0x\n";
	lincheck_history_init(&h);
	cr_assert_eq(lincheck_parse("test", nul, sizeof(nul) - 1,
				    LINCHECK_FORMAT_BATON, &h, &err),
		     LINCHECK_EMALFORMED);
	cr_assert_not_null(strstr(err.text, "test:2: NUL"), "%s", err.text);
	lincheck_history_free(&h);
	size_t n = LINCHECK_LINE_BYTES_MAX + 100;
	char *big = malloc(n + 32);
	cr_assert_not_null(big);
	for (int f = LINCHECK_FORMAT_BATON; f <= LINCHECK_FORMAT_EDN; f++) {
		/* Line 2 is too long (line 1 is valid, or skipped). */
		int head =
			snprintf(big, 32, "%s\n",
				 f == LINCHECK_FORMAT_BATON ? "baton-history\t1"
				 : f == LINCHECK_FORMAT_EDN ? "; edn"
							    : "jepsen");
		memset(big + head, '{', n);
		big[(size_t)head + n] = '\n';
		lincheck_history_init(&h);
		cr_assert_eq(lincheck_parse("test", big, (size_t)head + n + 1,
					    (enum lincheck_format)f, &h, &err),
			     LINCHECK_ELIMIT, "%s", err.text);
		cr_assert_not_null(strstr(err.text, "test:2: line longer"),
				   "%s", err.text);
		lincheck_history_free(&h);
	}
	free(big);
}

/* ------------------------------------------------------------------------ */
/* Random mutations of valid input: no crash, no leak, a clean answer.     */

static const char *const fuzz_seeds[] = {
	doc_example,
	"baton-history\t1\n"
	"1\t1\tinvoke\tappend\tk\t=a\n1\t2\tinvoke\tdel\tk\n"
	"2\t1\tok\tappend\tk\t1\n3\t2\tok\tdel\tk\t?\n"
	"4\t3\tinvoke\tcas\tk\t-\t=z\n5\t3\tok\tcas\tk\t0\n"
	"6\t4\tinvoke\tincr\tk\t-3\n7\t4\tfail\tincr\tk\n",
	"INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"
	"INFO  jepsen.util - 1\t:invoke\t:cas\t[1 2]\n"
	"INFO  jepsen.util - 0\t:ok\t:read\t1\n"
	"INFO  jepsen.util - 1\t:info\t:cas\t:timed-out\n"
	"INFO  jepsen.util - 2   :invoke :write  2\n"
	"INFO  jepsen.util - 2   :ok :write  2\n",
	"{:process 0, :type :invoke, :f :append, :key \"0\", :value \"x\"}\n"
	"{:process 1, :type :invoke, :f :get, :key \"0\", :value nil}\n"
	"{:process 0, :type :ok, :f :append, :key \"0\", :value \"x\"}\n"
	"{:process 1, :type :ok, :f :get, :key \"0\", :value \"x\"}\n"
	"{:process 2, :type :invoke, :f :cas, :value [nil \"\\u0041\"]}\n"
	"{:process 2, :type :info, :f :cas, :error {:a [1 #{2}]}}\n",
};

static const char fuzz_bytes[] = "\t\n\r%=-?{}[]()\":;,\\#0123456789 nilkok";

static size_t mutate(uint64_t *rng, char *buf, size_t len)
{
	uint64_t x = *rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	size_t at = len > 0 ? (size_t)(x >> 8) % len : 0;
	char c = fuzz_bytes[(x >> 40) % (sizeof(fuzz_bytes) - 1)];
	if ((x >> 50) % 7 == 0)
		c = (char)(x >> 32);
	switch (x % 6) {
	case 0: /* replace */
		if (len > 0)
			buf[at] = c;
		return len;
	case 1: /* insert */
		if (len + 1 >= FUZZ_TEXT_BYTES)
			return len;
		memmove(buf + at + 1, buf + at, len - at);
		buf[at] = c;
		return len + 1;
	case 2: /* delete */
		if (len == 0)
			return len;
		memmove(buf + at, buf + at + 1, len - at - 1);
		return len - 1;
	case 3: /* truncate */
		return at;
	case 4: { /* duplicate a span */
		size_t span = (size_t)(x >> 20) % 64;
		if (at + span > len || len + span >= FUZZ_TEXT_BYTES)
			return len;
		memmove(buf + at + span, buf + at, len - at);
		return len + span;
	}
	default: /* a digit run */
		if (len > 0)
			buf[at] = (char)('0' + (x >> 24) % 10);
		return len;
	}
}

Test(parse, random_mutations_never_crash)
{
	static char buf[FUZZ_TEXT_BYTES];
	uint64_t rng = FUZZ_SEED;
	uint32_t parsed = 0;
	for (uint32_t round = 0; round < FUZZ_ROUNDS; round++) {
		const char *seed = fuzz_seeds[round % (sizeof(fuzz_seeds) /
						       sizeof(*fuzz_seeds))];
		size_t len = strlen(seed);
		memcpy(buf, seed, len);
		uint32_t edits = 1 + (uint32_t)(rng % FUZZ_EDITS_MAX);
		for (uint32_t e = 0; e < edits; e++)
			len = mutate(&rng, buf, len);
		enum lincheck_format format =
			(enum lincheck_format)(round / 4 % 4);
		struct lincheck_history h;
		struct lincheck_error err;
		lincheck_history_init(&h);
		int rv = lincheck_parse("fuzz", buf, len, format, &h, &err);
		if (rv != 0) {
			cr_assert(rv == LINCHECK_EMALFORMED ||
					  rv == LINCHECK_EVERSION ||
					  rv == LINCHECK_ELIMIT,
				  "round %u: %s", round, lincheck_err_name(rv));
			cr_assert_eq(strncmp(err.text, "fuzz:", 5), 0);
			lincheck_history_free(&h);
			continue;
		}
		parsed++;
		struct lincheck_limits limits = {
			lincheck_now_ns() + 100 * 1000 * 1000, 64u << 20};
		struct lincheck_result res;
		cr_assert_eq(lincheck_check(&h, &limits, &res), 0);
		FILE *sink = fopen("/dev/null", "w");
		cr_assert_not_null(sink);
		lincheck_result_print(sink, "fuzz", &h, &res, true);
		cr_assert_eq(lincheck_write_baton(sink, &h), 0);
		fclose(sink);
		lincheck_history_free(&h);
	}
	/* The mutations must leave some input valid, or the loop tests
	 * little past the first error. */
	cr_assert_gt(parsed, FUZZ_ROUNDS / 20, "only %u parsed", parsed);
}
