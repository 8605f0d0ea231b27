/*
 * Jepsen's log lines for a single register:
 *
 *   INFO  jepsen.util - 3	:invoke	:cas	[1 2]
 *
 * (process, type, function, value; tabs or spaces). Lines without
 * "jepsen.util - <number>" are skipped (other loggers, the nemesis).
 * Times are line numbers.
 */
#include <string.h>

#include "internal.h"

#define JEPSEN_MARKER "jepsen.util"

struct cursor {
	const char *s;
	size_t n;
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

static void skip_space(struct cursor *c)
{
	while (c->n > 0 && is_space(*c->s)) {
		c->s++;
		c->n--;
	}
}

/* The next whitespace-delimited token. */
static struct cursor token(struct cursor *c)
{
	skip_space(c);
	struct cursor t = {c->s, 0};
	while (c->n > 0 && !is_space(*c->s)) {
		c->s++;
		c->n--;
		t.n++;
	}
	return t;
}

static bool token_is(struct cursor t, const char *s)
{
	return t.n == strlen(s) && memcmp(t.s, s, t.n) == 0;
}

/* Positions the cursor after "jepsen.util -"; false if absent. */
static bool find_marker(struct cursor *c)
{
	size_t k = strlen(JEPSEN_MARKER);
	for (size_t i = 0; i + k <= c->n; i++) {
		if (memcmp(c->s + i, JEPSEN_MARKER, k) != 0)
			continue;
		struct cursor r = {c->s + i + k, c->n - i - k};
		if (!token_is(token(&r), "-"))
			return false;
		*c = r;
		return true;
	}
	return false;
}

struct jparser {
	struct lincheck_history *h;
	struct lincheck_error *err;
	uint32_t line;
	uint32_t key;
};

static int bad(struct jparser *p, const char *what, struct cursor t)
{
	int shown = t.n > 40 ? 40 : (int)t.n;
	return lincheck__fail(p->err, LINCHECK_EMALFORMED, p->h->name, p->line,
			      "%s: \"%.*s%s\"", what, shown, t.s,
			      t.n > 40 ? "..." : "");
}

/* A register value: nil (absent) or one token. */
static int value(struct jparser *p, struct cursor t, bool nil_ok,
		 struct lincheck_value *out)
{
	if (t.n == 0)
		return bad(p, "missing value", t);
	if (token_is(t, "nil")) {
		if (!nil_ok)
			return bad(p, "nil where a value is needed", t);
		memset(out, 0, sizeof(*out));
		out->tag = LINCHECK_ABSENT;
		return 0;
	}
	for (size_t i = 0; i < t.n; i++) {
		if (t.s[i] == '[' || t.s[i] == ']')
			return bad(p, "not a register value", t);
	}
	return lincheck_history_store(p->h, t.s, t.n, out, p->err);
}

/* The rest of the line as exactly one value. */
static int sole_value(struct jparser *p, struct cursor rest, bool nil_ok,
		      struct lincheck_value *out)
{
	struct cursor t = token(&rest);
	skip_space(&rest);
	if (rest.n > 0)
		return bad(p, "more than one value", rest);
	return value(p, t, nil_ok, out);
}

/* "[old new]" of a cas. */
static int cas_pair(struct jparser *p, struct cursor rest,
		    struct lincheck_op *op)
{
	skip_space(&rest);
	while (rest.n > 0 && is_space(rest.s[rest.n - 1]))
		rest.n--;
	if (rest.n < 2 || rest.s[0] != '[' || rest.s[rest.n - 1] != ']')
		return bad(p, "a cas needs [old new]", rest);
	struct cursor in = {rest.s + 1, rest.n - 2};
	struct cursor old = token(&in);
	struct cursor new_value = token(&in);
	skip_space(&in);
	if (in.n > 0 || new_value.n == 0)
		return bad(p, "a cas needs [old new]", rest);
	int rv = value(p, old, true, &op->arg);
	if (rv != 0)
		return rv;
	return value(p, new_value, false, &op->arg2);
}

static int kind_of(struct jparser *p, struct cursor f, uint8_t *kind)
{
	if (token_is(f, ":read"))
		*kind = LINCHECK_GET;
	else if (token_is(f, ":write"))
		*kind = LINCHECK_SET;
	else if (token_is(f, ":cas"))
		*kind = LINCHECK_CAS;
	else
		return bad(p, "unknown function (:read, :write, :cas)", f);
	return 0;
}

static int line_event(struct jparser *p, struct cursor c)
{
	if (!find_marker(&c))
		return 0;
	struct cursor process = token(&c);
	uint64_t client;
	if (!lincheck__parse_u64(process.s, process.n, &client))
		return 0; /* the nemesis, or another logger's line */
	struct cursor type = token(&c);
	struct cursor f = token(&c);
	struct lincheck_op op;
	memset(&op, 0, sizeof(op));
	op.client = client;
	op.key = p->key;
	int rv = kind_of(p, f, &op.kind);
	if (rv != 0)
		return rv;
	int64_t time = (int64_t)p->line;
	if (token_is(type, ":invoke")) {
		op.invoke_time = time;
		if (op.kind == LINCHECK_SET)
			rv = sole_value(p, c, false, &op.arg);
		else if (op.kind == LINCHECK_CAS)
			rv = cas_pair(p, c, &op);
		if (rv != 0)
			return rv;
		return lincheck_history_invoke(p->h, &op, p->line, p->err);
	}
	enum lincheck_status status;
	if (token_is(type, ":ok")) {
		status = LINCHECK_OK;
		if (op.kind == LINCHECK_GET)
			rv = sole_value(p, c, true, &op.out);
		/* An ok cas swapped (a failed compare is :fail). */
		op.out_known = op.kind == LINCHECK_CAS;
		op.out_int = op.kind == LINCHECK_CAS;
	} else if (token_is(type, ":fail")) {
		status = LINCHECK_FAIL;
	} else if (token_is(type, ":info")) {
		status = LINCHECK_INFO;
	} else {
		return bad(p, "unknown type (:invoke, :ok, :fail, :info)",
			   type);
	}
	if (rv != 0)
		return rv;
	return lincheck_history_complete(p->h, client, time, p->line, status,
					 &op, true, p->err);
}

int lincheck__parse_jepsen(struct lincheck_history *h, const char *data,
			   size_t len, struct lincheck_error *err)
{
	struct jparser p = {h, err, 0, 0};
	h->times_are_events = true;
	h->missing_reads_empty = false;
	int rv = lincheck_history_key(h, "", 0, &p.key, err);
	if (rv != 0)
		return rv;
	struct lincheck__lines l;
	lincheck__lines_init(&l, data, len);
	const char *s;
	size_t n;
	int got;
	while ((got = lincheck__lines_next(&l, &s, &n)) != 0) {
		p.line = l.line;
		if (got < 0)
			return lincheck__line_error(err, got, h->name, l.line);
		struct cursor c = {s, n};
		if ((rv = line_event(&p, c)) != 0)
			return rv;
	}
	return 0;
}
