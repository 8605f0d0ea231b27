/*
 * Hand-made tiny histories with known verdicts. Lines are written with
 * '|' for TAB; each is checked by the checker and, being small, by the
 * brute-force reference too (ref_verdict).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

#define SMALL_TEXT_BYTES 4096u

/* The verdict of the events (header added, '|' made TAB). */
static enum lincheck_verdict verdict_of(const char *events,
					struct lincheck_result *res)
{
	static char text[SMALL_TEXT_BYTES];
	int n = snprintf(text, sizeof(text), "baton-history\t1\n%s", events);
	cr_assert(n > 0 && (size_t)n < sizeof(text));
	for (char *p = text; *p; p++) {
		if (*p == '|')
			*p = '\t';
	}
	return ref_verdict(text, res);
}

#define LIN(events)                                                            \
	cr_assert_eq(verdict_of(events, NULL), LINCHECK_LINEARIZABLE)
#define NOT(events)                                                            \
	cr_assert_eq(verdict_of(events, NULL), LINCHECK_NOT_LINEARIZABLE)

Test(small, empty_and_sequential)
{
	LIN("");
	LIN("0|1|invoke|get|k\n1|1|ok|get|k|-\n");
	NOT("0|1|invoke|get|k\n1|1|ok|get|k|=\n"); /* "" is not missing */
	LIN("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|get|k\n3|1|ok|get|k|=a\n");
	NOT("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|get|k\n3|1|ok|get|k|-\n");
}

Test(small, stale_read)
{
	const char *writes = "0|1|invoke|set|x|=1\n1|1|ok|set|x\n"
			     "2|2|invoke|set|x|=2\n3|2|ok|set|x\n";
	char text[SMALL_TEXT_BYTES];
	snprintf(text, sizeof(text), "%s4|3|invoke|get|x\n5|3|ok|get|x|=1\n",
		 writes);
	NOT(text);
	snprintf(text, sizeof(text), "%s4|3|invoke|get|x\n5|3|ok|get|x|=2\n",
		 writes);
	LIN(text);
	/* A read concurrent with the second write may see either. */
	LIN("0|1|invoke|set|x|=1\n1|1|ok|set|x\n2|2|invoke|set|x|=2\n"
	    "3|3|invoke|get|x\n4|3|ok|get|x|=1\n5|2|ok|set|x\n");
}

Test(small, equal_times_overlap)
{
	/* The get is invoked at the instant the set completes: either
	 * order. */
	LIN("0|1|invoke|set|k|=a\n5|2|invoke|get|k\n5|1|ok|set|k\n"
	    "6|2|ok|get|k|-\n");
	NOT("0|1|invoke|set|k|=a\n5|1|ok|set|k\n6|2|invoke|get|k\n"
	    "7|2|ok|get|k|-\n");
}

Test(small, indeterminate_only_if_it_took_effect)
{
	LIN("0|1|invoke|set|k|=a\n1|1|info|set|k|timeout\n"
	    "2|2|invoke|get|k\n3|2|ok|get|k|=a\n");
	/* Its effect can come long after its info line. */
	LIN("0|1|invoke|set|k|=a\n1|1|info|set|k\n"
	    "10|2|invoke|get|k\n11|2|ok|get|k|-\n"
	    "20|2|invoke|get|k\n21|2|ok|get|k|=a\n");
	/* But it takes effect once: a, then missing, is impossible. */
	NOT("0|1|invoke|set|k|=a\n1|1|info|set|k\n"
	    "10|2|invoke|get|k\n11|2|ok|get|k|=a\n"
	    "20|2|invoke|get|k\n21|2|ok|get|k|-\n");
	/* Never before its invocation. */
	NOT("0|2|invoke|get|k\n1|2|ok|get|k|=a\n"
	    "5|1|invoke|set|k|=a\n6|1|info|set|k\n");
	/* An invocation never completed is indeterminate too. */
	LIN("0|1|invoke|append|k|=x\n5|2|invoke|get|k\n6|2|ok|get|k|=x\n");
	/* Two indeterminate appends, seen in either order. */
	LIN("0|1|invoke|append|k|=a\n0|2|invoke|append|k|=b\n"
	    "1|1|info|append|k\n1|2|info|append|k\n"
	    "5|3|invoke|get|k\n6|3|ok|get|k|=ba\n");
	NOT("0|1|invoke|append|k|=a\n0|2|invoke|append|k|=b\n"
	    "1|1|info|append|k\n1|2|info|append|k\n"
	    "5|3|invoke|get|k\n6|3|ok|get|k|=bab\n");
}

Test(small, indeterminate_only_if_it_did_not)
{
	/* The set timed out but the later reads never see it: fine. */
	LIN("0|1|invoke|set|k|=a\n1|1|info|set|k\n"
	    "2|2|invoke|set|k|=b\n3|2|ok|set|k\n"
	    "4|3|invoke|get|k\n5|3|ok|get|k|=b\n");
	/* An indeterminate incr of a value that is not a number does
	 * nothing; the next ok incr then fails too. */
	LIN("0|1|invoke|set|k|=x\n1|1|ok|set|k\n"
	    "2|2|invoke|incr|k|1\n3|2|info|incr|k\n"
	    "4|3|invoke|get|k\n5|3|ok|get|k|=x\n");
	/* An indeterminate read says nothing. */
	LIN("0|1|invoke|get|k\n1|1|info|get|k\n");
	/* An indeterminate cas whose compare fails changes nothing. */
	LIN("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|2|invoke|cas|k|=b|=c\n3|2|info|cas|k\n"
	    "4|3|invoke|get|k\n5|3|ok|get|k|=a\n");
}

Test(small, fail_did_not_happen)
{
	NOT("0|1|invoke|set|k|=a\n1|1|fail|set|k|refused\n"
	    "2|2|invoke|get|k\n3|2|ok|get|k|=a\n");
	LIN("0|1|invoke|set|k|=a\n1|1|fail|set|k\n"
	    "2|2|invoke|get|k\n3|2|ok|get|k|-\n");
}

Test(small, cas)
{
	LIN("0|1|invoke|cas|k|-|=a\n1|1|ok|cas|k|1\n"
	    "2|1|invoke|get|k\n3|1|ok|get|k|=a\n");
	NOT("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|cas|k|=b|=c\n3|1|ok|cas|k|1\n");
	/* A failed compare is a read: it says the value differed. */
	NOT("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|cas|k|=a|=c\n3|1|ok|cas|k|0\n");
	LIN("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|cas|k|=b|=c\n3|1|ok|cas|k|0\n"
	    "4|1|invoke|cas|k|=a|=c\n5|1|ok|cas|k|1\n"
	    "6|1|invoke|get|k\n7|1|ok|get|k|=c\n");
	/* Two concurrent cas from the same value: only one can win. */
	NOT("0|1|invoke|set|k|=0\n1|1|ok|set|k\n"
	    "2|1|invoke|cas|k|=0|=1\n2|2|invoke|cas|k|=0|=2\n"
	    "3|1|ok|cas|k|1\n3|2|ok|cas|k|1\n");
}

Test(small, incr)
{
	LIN("0|1|invoke|incr|n|1\n1|1|ok|incr|n|1\n"
	    "2|1|invoke|incr|n|-5\n3|1|ok|incr|n|-4\n"
	    "4|1|invoke|get|n\n5|1|ok|get|n|=-4\n");
	NOT("0|1|invoke|incr|n|1\n1|1|ok|incr|n|2\n");
	/* Redis refuses to increment a string that is not a number. */
	NOT("0|1|invoke|set|n|=abc\n1|1|ok|set|n\n"
	    "2|1|invoke|incr|n|1\n3|1|ok|incr|n|?\n");
	NOT("0|1|invoke|set|n|=01\n1|1|ok|set|n\n"
	    "2|1|invoke|incr|n|1\n3|1|ok|incr|n|2\n");
	LIN("0|1|invoke|set|n|=abc\n1|1|ok|set|n\n"
	    "2|1|invoke|incr|n|1\n3|1|fail|incr|n|not an integer\n");
	/* Overflow is refused too. */
	NOT("0|1|invoke|set|n|=9223372036854775807\n1|1|ok|set|n\n"
	    "2|1|invoke|incr|n|1\n3|1|ok|incr|n|?\n");
	/* Concurrent increments: the results tell the order. */
	LIN("0|1|invoke|incr|n|1\n0|2|invoke|incr|n|10\n"
	    "1|1|ok|incr|n|11\n1|2|ok|incr|n|10\n");
	NOT("0|1|invoke|incr|n|1\n0|2|invoke|incr|n|10\n"
	    "1|1|ok|incr|n|11\n1|2|ok|incr|n|11\n");
}

Test(small, append)
{
	LIN("0|1|invoke|append|k|=a\n1|1|ok|append|k|1\n"
	    "2|1|invoke|append|k|=bc\n3|1|ok|append|k|3\n"
	    "4|1|invoke|get|k\n5|1|ok|get|k|=abc\n");
	NOT("0|1|invoke|append|k|=a\n1|1|ok|append|k|1\n"
	    "2|1|invoke|append|k|=b\n3|1|ok|append|k|2\n"
	    "4|1|invoke|get|k\n5|1|ok|get|k|=ba\n");
	NOT("0|1|invoke|append|k|=a\n1|1|ok|append|k|2\n");
	LIN("0|1|invoke|append|k|=a\n0|2|invoke|append|k|=b\n"
	    "1|1|ok|append|k|?\n1|2|ok|append|k|?\n"
	    "2|3|invoke|get|k\n3|3|ok|get|k|=ba\n");
	/* An append no read saw must have been overwritten. */
	LIN("0|1|invoke|append|k|=a\n0|2|invoke|set|k|=s\n"
	    "1|1|ok|append|k|?\n1|2|ok|set|k\n"
	    "2|3|invoke|get|k\n3|3|ok|get|k|=s\n");
	NOT("0|1|invoke|append|k|=a\n1|1|ok|append|k|?\n"
	    "2|2|invoke|set|k|=s\n3|2|ok|set|k\n"
	    "2|3|invoke|get|k\n3|3|ok|get|k|=a\n"
	    "4|3|invoke|get|k\n5|3|ok|get|k|=a\n");
}

Test(small, del)
{
	LIN("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|del|k\n3|1|ok|del|k|1\n"
	    "4|1|invoke|get|k\n5|1|ok|get|k|-\n"
	    "6|1|invoke|del|k\n7|1|ok|del|k|0\n");
	NOT("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|del|k\n3|1|ok|del|k|0\n");
	NOT("0|1|invoke|del|k\n1|1|ok|del|k|1\n");
	LIN("0|1|invoke|set|k|=a\n1|1|ok|set|k\n"
	    "2|1|invoke|del|k\n3|1|ok|del|k|?\n"
	    "4|1|invoke|append|k|=b\n5|1|ok|append|k|1\n");
}

Test(small, keys_are_independent)
{
	struct lincheck_result res;
	/* Each key alone is fine; the stale read is on k2. */
	cr_assert_eq(verdict_of("0|1|invoke|set|k1|=a\n1|1|ok|set|k1\n"
				"2|1|invoke|set|k2|=a\n3|1|ok|set|k2\n"
				"4|2|invoke|get|k1\n5|2|ok|get|k1|=a\n"
				"6|2|invoke|get|k2\n7|2|ok|get|k2|-\n",
				&res),
		     LINCHECK_NOT_LINEARIZABLE);
	cr_assert_eq(res.why.key, 1u); /* k2 was the second key seen */
}

Test(small, explanation)
{
	struct lincheck_result res;
	cr_assert_eq(verdict_of("0|1|invoke|set|x|=1\n1|1|ok|set|x\n"
				"2|2|invoke|set|x|=2\n3|2|ok|set|x\n"
				"4|3|invoke|get|x\n5|3|ok|get|x|=1\n",
				&res),
		     LINCHECK_NOT_LINEARIZABLE);
	const struct lincheck_explanation *e = &res.why;
	cr_assert_eq(e->key_ops, 3u);
	/* After the first set, the second must come (it completes before
	 * the get is invoked), and then the get cannot read 1. */
	cr_assert_eq(e->prefix_len, 1u);
	cr_assert_eq(e->n_tail, 1u);
	cr_assert_eq(e->tail[0], 0u);
	cr_assert_eq(e->stuck, 1u);
	cr_assert_eq(e->n_pending, 1u);
	cr_assert_eq(e->pending[0], 1u);
	cr_assert_eq(e->why[0], LINCHECK_WHY_UNREADABLE);
	cr_assert_eq(e->blocker[0], 2u);
	cr_assert_eq(e->value_tag, LINCHECK_PRESENT);
	cr_assert_eq(e->value_len, 1u);
	cr_assert_eq(e->value[0], '1');
}

Test(small, explanation_lists_concurrent_ops)
{
	struct lincheck_result res;
	/* After the set, none of the three can happen. */
	cr_assert_eq(verdict_of("0|1|invoke|set|x|=1\n1|1|ok|set|x\n"
				"2|2|invoke|cas|x|=2|=5\n"
				"2|3|invoke|cas|x|=3|=6\n"
				"2|4|invoke|del|x\n"
				"4|2|ok|cas|x|1\n4|3|ok|cas|x|1\n"
				"4|4|ok|del|x|0\n",
				&res),
		     LINCHECK_NOT_LINEARIZABLE);
	const struct lincheck_explanation *e = &res.why;
	cr_assert_eq(e->prefix_len, 1u);
	cr_assert_eq(e->stuck, 1u);
	cr_assert_eq(e->n_pending, 3u);
	for (uint32_t k = 0; k < 3; k++) {
		cr_assert_eq(e->pending[k], k + 1);
		cr_assert_eq(e->why[k], LINCHECK_WHY_MODEL);
	}
}

Test(small, explanation_printed)
{
	struct lincheck_history h;
	struct lincheck_error err;
	const char *text = "baton-history\t1\n"
			   "0\t1\tinvoke\tset\tx\t=1\n1\t1\tok\tset\tx\n"
			   "2\t2\tinvoke\tget\tx\n3\t2\tok\tget\tx\t=%00\n";
	cr_assert_eq(ref_parse(text, LINCHECK_FORMAT_AUTO, &h, &err), 0);
	struct lincheck_limits limits = {0, 0};
	struct lincheck_result res;
	cr_assert_eq(lincheck_check(&h, &limits, &res), 0);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	cr_assert_not_null(out);
	lincheck_result_print(out, "h.txt", &h, &res, true);
	fclose(out);
	cr_assert_not_null(strstr(buf, "h.txt: NOT linearizable (key \"x\""),
			   "%s", buf);
	cr_assert_not_null(strstr(buf, "client 1    set \"1\""), "%s", buf);
	cr_assert_not_null(strstr(buf, "\"\\x00\""), "%s", buf);
	cr_assert_not_null(
		strstr(buf,
		       "[ok, invoked 0 ns, line 2, completed 1 ns, line 3]"),
		"%s", buf);
	cr_assert_not_null(strstr(buf, "the get of client 2 at line 4"), "%s",
			   buf);
	free(buf);
	lincheck_history_free(&h);
}
