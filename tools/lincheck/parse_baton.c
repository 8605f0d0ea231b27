/* The baton history format (docs/history-format.md): parser. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BATON_MAGIC "baton-history"

struct field {
	const char *s;
	size_t n;
};

struct parser {
	struct lincheck_history *h;
	struct lincheck_error *err;
	uint32_t line;
	struct field f[LINCHECK_FIELDS_MAX];
	size_t n_fields;
	uint8_t *scratch; /* unescaped bytes of one field */
	size_t scratch_cap;
};

static int bad(struct parser *p, const char *what, size_t field)
{
	if (field < p->n_fields) {
		int shown = p->f[field].n > 40 ? 40 : (int)p->f[field].n;
		return lincheck__fail(p->err, LINCHECK_EMALFORMED, p->h->name,
				      p->line, "%s (field %zu: \"%.*s%s\")",
				      what, field + 1, shown, p->f[field].s,
				      p->f[field].n > 40 ? "..." : "");
	}
	return lincheck__fail(p->err, LINCHECK_EMALFORMED, p->h->name, p->line,
			      "%s", what);
}

static int split(struct parser *p, const char *s, size_t n)
{
	p->n_fields = 0;
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '\t')
			continue;
		if (p->n_fields == LINCHECK_FIELDS_MAX)
			return bad(p, "too many fields", LINCHECK_FIELDS_MAX);
		p->f[p->n_fields].s = s + start;
		p->f[p->n_fields].n = i - start;
		p->n_fields++;
		start = i + 1;
	}
	return 0;
}

/* Unescaped bytes of field i into the scratch buffer. */
static int unescape(struct parser *p, size_t i, const char *s, size_t n,
		    size_t *len)
{
	if (n > p->scratch_cap) {
		uint8_t *q = realloc(p->scratch, n);
		if (q == NULL)
			return lincheck__fail(p->err, LINCHECK_ENOMEM,
					      p->h->name, p->line,
					      "out of memory");
		p->scratch = q;
		p->scratch_cap = n;
	}
	if (!lincheck__unescape(s, n, p->scratch, len))
		return bad(p,
			   "bad escaping (bytes outside 0x20-0x7e and '%' "
			   "are written %HH)",
			   i);
	return 0;
}

/* Field i as a value: "-" absent, "=bytes" present, and "?" unknown if
 * allowed. */
static int value(struct parser *p, size_t i, bool absent_ok,
		 struct lincheck_value *out)
{
	struct field f = p->f[i];
	memset(out, 0, sizeof(*out));
	if (f.n == 1 && f.s[0] == '-' && absent_ok) {
		out->tag = LINCHECK_ABSENT;
		return 0;
	}
	if (f.n == 0 || f.s[0] != '=')
		return bad(p,
			   absent_ok
				   ? "a value must be \"-\" or \"=\" and bytes"
				   : "a value must be \"=\" and bytes",
			   i);
	size_t len = 0;
	int rv = unescape(p, i, f.s + 1, f.n - 1, &len);
	if (rv != 0)
		return rv;
	return lincheck_history_store(p->h, p->scratch, len, out, p->err);
}

static int integer(struct parser *p, size_t i, int64_t *out)
{
	if (!lincheck__parse_i64(p->f[i].s, p->f[i].n, out))
		return bad(p, "not a decimal integer", i);
	return 0;
}

/* Field i as a count, or "?" (not recorded). */
static int result_int(struct parser *p, size_t i, struct lincheck_op *op)
{
	if (p->f[i].n == 1 && p->f[i].s[0] == '?')
		return 0;
	op->out_known = true;
	return integer(p, i, &op->out_int);
}

static bool field_is(const struct field *f, const char *s)
{
	return f->n == strlen(s) && memcmp(f->s, s, f->n) == 0;
}

static int kind_of(struct parser *p, size_t i, enum lincheck_kind *out)
{
	for (unsigned k = 0; k < LINCHECK_KIND_COUNT; k++) {
		if (field_is(&p->f[i], lincheck_kind_name(k))) {
			*out = (enum lincheck_kind)k;
			return 0;
		}
	}
	return bad(p, "unknown operation (get, set, append, del, incr, cas)",
		   i);
}

static int want_fields(struct parser *p, size_t n)
{
	if (p->n_fields == n)
		return 0;
	return lincheck__fail(p->err, LINCHECK_EMALFORMED, p->h->name, p->line,
			      "%zu fields where this event has %zu",
			      p->n_fields, n);
}

/* Fields 5 on of an invocation. */
static int invoke_args(struct parser *p, struct lincheck_op *op)
{
	int rv;
	switch (op->kind) {
	case LINCHECK_GET:
	case LINCHECK_DEL:
		return want_fields(p, 5);
	case LINCHECK_SET:
	case LINCHECK_APPEND:
		if ((rv = want_fields(p, 6)) != 0)
			return rv;
		return value(p, 5, false, &op->arg);
	case LINCHECK_INCR:
		if ((rv = want_fields(p, 6)) != 0)
			return rv;
		return integer(p, 5, &op->delta);
	default:
		if ((rv = want_fields(p, 7)) != 0)
			return rv;
		if ((rv = value(p, 5, true, &op->arg)) != 0)
			return rv;
		return value(p, 6, false, &op->arg2);
	}
}

/* Fields 5 on of an ok completion. */
static int ok_results(struct parser *p, struct lincheck_op *op)
{
	if (op->kind == LINCHECK_SET)
		return want_fields(p, 5);
	int rv = want_fields(p, 6);
	if (rv != 0)
		return rv;
	if (op->kind == LINCHECK_GET)
		return value(p, 5, true, &op->out);
	if (op->kind == LINCHECK_CAS && field_is(&p->f[5], "?"))
		return bad(p, "an ok cas records 1 (swapped) or 0 (not)", 5);
	return result_int(p, 5, op);
}

static int event(struct parser *p)
{
	if (p->n_fields < 5)
		return lincheck__fail(p->err, LINCHECK_EMALFORMED, p->h->name,
				      p->line,
				      "%zu fields; an event has at least 5 "
				      "(time, client, type, op, key)",
				      p->n_fields);
	struct lincheck_op op;
	memset(&op, 0, sizeof(op));
	int64_t time;
	int rv = integer(p, 0, &time);
	if (rv != 0)
		return rv;
	if (time < 0 || time == INT64_MAX)
		return bad(p, "time out of range", 0);
	if (!lincheck__parse_u64(p->f[1].s, p->f[1].n, &op.client))
		return bad(p, "client is not a decimal integer", 1);
	enum lincheck_kind kind = LINCHECK_GET;
	if ((rv = kind_of(p, 3, &kind)) != 0)
		return rv;
	op.kind = (uint8_t)kind;
	size_t key_len = 0;
	if ((rv = unescape(p, 4, p->f[4].s, p->f[4].n, &key_len)) != 0)
		return rv;
	if ((rv = lincheck_history_key(p->h, p->scratch, key_len, &op.key,
				       p->err)) != 0)
		return rv;
	struct field *type = &p->f[2];
	if (field_is(type, "invoke")) {
		op.invoke_time = time;
		if ((rv = invoke_args(p, &op)) != 0)
			return rv;
		return lincheck_history_invoke(p->h, &op, p->line, p->err);
	}
	enum lincheck_status status;
	if (field_is(type, "ok")) {
		status = LINCHECK_OK;
		rv = ok_results(p, &op);
	} else if (field_is(type, "fail") || field_is(type, "info")) {
		status = type->s[0] == 'f' ? LINCHECK_FAIL : LINCHECK_INFO;
		size_t reason_len = 0;
		if (p->n_fields > 6)
			rv = want_fields(p, 6);
		else if (p->n_fields == 6)
			rv = unescape(p, 5, p->f[5].s, p->f[5].n, &reason_len);
	} else {
		return bad(p, "type is not invoke, ok, fail or info", 2);
	}
	if (rv != 0)
		return rv;
	return lincheck_history_complete(p->h, op.client, time, p->line, status,
					 &op, true, p->err);
}

static int header(struct parser *p, const char *s, size_t n)
{
	int rv = split(p, s, n);
	if (rv != 0)
		return rv;
	if (p->n_fields != 2 || !field_is(&p->f[0], BATON_MAGIC))
		return lincheck__fail(p->err, LINCHECK_EMALFORMED, p->h->name,
				      p->line,
				      "the first line must be \"" BATON_MAGIC
				      "<TAB><version>\"");
	uint64_t version;
	if (!lincheck__parse_u64(p->f[1].s, p->f[1].n, &version) ||
	    version == 0)
		return bad(p, "bad format version", 1);
	if (version > LINCHECK_BATON_FORMAT_VERSION)
		return lincheck__fail(p->err, LINCHECK_EVERSION, p->h->name,
				      p->line,
				      "baton history format version %llu is "
				      "newer than this checker's (%u)",
				      (unsigned long long)version,
				      LINCHECK_BATON_FORMAT_VERSION);
	return 0;
}

int lincheck__parse_baton(struct lincheck_history *h, const char *data,
			  size_t len, struct lincheck_error *err)
{
	struct parser p;
	memset(&p, 0, sizeof(p));
	p.h = h;
	p.err = err;
	h->times_are_events = false;
	h->missing_reads_empty = false;
	struct lincheck__lines l;
	lincheck__lines_init(&l, data, len);
	const char *s;
	size_t n;
	int rv = 0;
	bool seen_header = false;
	int got;
	while ((got = lincheck__lines_next(&l, &s, &n)) != 0) {
		p.line = l.line;
		if (got < 0) {
			rv = lincheck__line_error(err, got, h->name, l.line);
			break;
		}
		if (!seen_header) {
			if ((rv = header(&p, s, n)) != 0)
				break;
			seen_header = true;
			continue;
		}
		if (n == 0 || s[0] == '#')
			continue;
		if ((rv = split(&p, s, n)) != 0 || (rv = event(&p)) != 0)
			break;
	}
	if (rv == 0 && !seen_header)
		rv = lincheck__fail(err, LINCHECK_EMALFORMED, h->name, 0,
				    "empty: no \"" BATON_MAGIC "\" line");
	free(p.scratch);
	return rv;
}
