/*
 * One EDN map per line, as in Jepsen's history.edn and Porcupine's kv
 * test data:
 *
 *   {:process 0, :type :invoke, :f :append, :key "0", :value "x 0 0 y"}
 *
 * :process (an integer; anything else, like :nemesis, skips the line),
 * :type, :f, and optionally :key (without it: one register) and :value;
 * other entries are ignored. Times are line numbers. A missing key reads
 * as "" (Porcupine's model).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Nesting of collections in a value the parser skips. */
#define EDN_DEPTH_MAX 32u

enum edn_type {
	EDN_NIL,
	EDN_KEYWORD,
	EDN_STRING,
	EDN_INT,
	EDN_VECTOR,
	EDN_OTHER,
};

/* A value's type and raw text (a string with its quotes). */
struct edn_value {
	enum edn_type type;
	const char *s;
	size_t n;
};

struct eparser {
	struct lincheck_history *h;
	struct lincheck_error *err;
	uint32_t line;
	uint32_t register_key;
	const char *p;
	const char *end;
	uint8_t *scratch;
	size_t scratch_cap;
};

static int bad(struct eparser *p, const char *what)
{
	return lincheck__fail(p->err, LINCHECK_EMALFORMED, p->h->name, p->line,
			      "%s", what);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == ',';
}

static bool is_delimiter(char c)
{
	return is_blank(c) || c == '{' || c == '}' || c == '[' || c == ']' ||
	       c == '(' || c == ')' || c == '"' || c == ';';
}

static void skip_blank(struct eparser *p)
{
	while (p->p < p->end && is_blank(*p->p))
		p->p++;
}

static bool is_int(const char *s, size_t n)
{
	if (n > 0 && s[n - 1] == 'N')
		n--;
	size_t i = n > 0 && (s[0] == '-' || s[0] == '+') ? 1 : 0;
	if (i == n)
		return false;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
	}
	return true;
}

static int read_value(struct eparser *p, struct edn_value *v, unsigned depth);

/* Elements up to the closing bracket. */
static int read_collection(struct eparser *p, char close, unsigned depth)
{
	if (depth >= EDN_DEPTH_MAX)
		return bad(p, "values nested too deeply");
	for (;;) {
		skip_blank(p);
		if (p->p >= p->end)
			return bad(p, "unterminated collection");
		if (*p->p == close) {
			p->p++;
			return 0;
		}
		struct edn_value e;
		int rv = read_value(p, &e, depth + 1);
		if (rv != 0)
			return rv;
	}
}

static int read_string(struct eparser *p)
{
	for (p->p++; p->p < p->end; p->p++) {
		if (*p->p == '\\') {
			p->p++;
			if (p->p >= p->end)
				break;
		} else if (*p->p == '"') {
			p->p++;
			return 0;
		}
	}
	return bad(p, "unterminated string");
}

static int read_value(struct eparser *p, struct edn_value *v, unsigned depth)
{
	skip_blank(p);
	if (p->p >= p->end)
		return bad(p, "a value is missing");
	const char *start = p->p;
	char c = *p->p;
	int rv = 0;
	v->type = EDN_OTHER;
	if (c == '"') {
		v->type = EDN_STRING;
		rv = read_string(p);
	} else if (c == '[' || c == '(' || c == '{') {
		v->type = c == '[' ? EDN_VECTOR : EDN_OTHER;
		p->p++;
		rv = read_collection(p,
				     c == '['	? ']'
				     : c == '(' ? ')'
						: '}',
				     depth);
	} else if (c == '#' && p->end - p->p > 1 && p->p[1] == '{') {
		p->p += 2;
		rv = read_collection(p, '}', depth);
	} else if (c == '}' || c == ']' || c == ')' || c == ';') {
		return bad(p, "a value is missing");
	} else {
		while (p->p < p->end && !is_delimiter(*p->p))
			p->p++;
		size_t n = (size_t)(p->p - start);
		if (n == 3 && memcmp(start, "nil", 3) == 0)
			v->type = EDN_NIL;
		else if (c == ':' && n > 1)
			v->type = EDN_KEYWORD;
		else if (is_int(start, n))
			v->type = EDN_INT;
		else if (c == '#' && depth < EDN_DEPTH_MAX) {
			/* A tag: the value it tags follows. */
			struct edn_value tagged;
			rv = read_value(p, &tagged, depth + 1);
		}
	}
	v->s = start;
	v->n = (size_t)(p->p - start);
	return rv;
}

static bool value_is(const struct edn_value *v, const char *s)
{
	return v->n == strlen(s) && memcmp(v->s, s, v->n) == 0;
}

static int hex4(const char *s, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		uint32_t d;
		if (c >= '0' && c <= '9')
			d = (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (uint32_t)(c - 'A' + 10);
		else
			return -1;
		v = v * 16 + d;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(uint8_t *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | (cp >> 6));
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | (cp >> 12));
		o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (uint8_t)(0xf0 | (cp >> 18));
	o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/* A "\uXXXX" escape at s (n bytes left, backslash included) into o. */
static int unicode_escape(const char *s, size_t n, uint8_t *o, size_t *used,
			  size_t *wrote)
{
	uint32_t cp;
	if (n < 6 || hex4(s + 2, &cp) != 0)
		return -1;
	*used = 6;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return -1;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		uint32_t lo;
		if (n < 12 || s[6] != '\\' || s[7] != 'u' ||
		    hex4(s + 8, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
			return -1;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		*used = 12;
	}
	*wrote = put_utf8(o, cp);
	return 0;
}

/* The bytes a string literal stands for, into the scratch buffer. */
static int decode_string(struct eparser *p, const struct edn_value *v,
			 size_t *len)
{
	const char *s = v->s + 1;
	size_t n = v->n - 2;
	if (n > p->scratch_cap) {
		uint8_t *q = realloc(p->scratch, n);
		if (q == NULL)
			return lincheck__fail(p->err, LINCHECK_ENOMEM,
					      p->h->name, p->line,
					      "out of memory");
		p->scratch = q;
		p->scratch_cap = n;
	}
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '\\') {
			p->scratch[o++] = (uint8_t)s[i];
			continue;
		}
		if (i + 1 >= n)
			return bad(p, "bad escape in a string");
		char e = s[i + 1];
		const char *from = "\"\\/ntrbf";
		const char *to = "\"\\/\n\t\r\b\f";
		const char *at = strchr(from, e);
		if (e != '\0' && at != NULL) {
			p->scratch[o++] = (uint8_t)to[at - from];
			i++;
			continue;
		}
		size_t used, wrote;
		if (e != 'u' || unicode_escape(s + i, n - i, p->scratch + o,
					       &used, &wrote) != 0)
			return bad(p, "bad escape in a string");
		o += wrote;
		i += used - 1;
	}
	*len = o;
	return 0;
}

/* A scalar as bytes in the history: a string's contents, or the text of
 * an integer or keyword. */
static int scalar(struct eparser *p, const struct edn_value *v, bool nil_ok,
		  struct lincheck_value *out)
{
	memset(out, 0, sizeof(*out));
	if (v->type == EDN_NIL && nil_ok) {
		out->tag = LINCHECK_ABSENT;
		return 0;
	}
	if (v->type == EDN_STRING) {
		size_t len = 0;
		int rv = decode_string(p, v, &len);
		if (rv != 0)
			return rv;
		return lincheck_history_store(p->h, p->scratch, len, out,
					      p->err);
	}
	if (v->type == EDN_INT || v->type == EDN_KEYWORD)
		return lincheck_history_store(p->h, v->s, v->n, out, p->err);
	return bad(p, nil_ok ? "a value must be a string, integer or nil"
			     : "a value must be a string or integer");
}

/* "[old new]" of a cas. */
static int cas_pair(struct eparser *p, const struct edn_value *v,
		    struct lincheck_op *op)
{
	if (v->type != EDN_VECTOR)
		return bad(p, "a cas value must be [old new]");
	struct eparser in = *p;
	in.p = v->s + 1;
	in.end = v->s + v->n - 1;
	struct edn_value old, new_value;
	int rv = read_value(&in, &old, 1);
	if (rv == 0)
		rv = read_value(&in, &new_value, 1);
	skip_blank(&in);
	if (rv != 0 || in.p != in.end)
		return bad(p, "a cas value must be [old new]");
	rv = scalar(p, &old, true, &op->arg);
	if (rv != 0)
		return rv;
	return scalar(p, &new_value, false, &op->arg2);
}

static const struct {
	const char *name;
	enum lincheck_kind kind;
} edn_functions[] = {
	{":get", LINCHECK_GET},	  {":read", LINCHECK_GET},
	{":put", LINCHECK_SET},	  {":write", LINCHECK_SET},
	{":set", LINCHECK_SET},	  {":append", LINCHECK_APPEND},
	{":del", LINCHECK_DEL},	  {":delete", LINCHECK_DEL},
	{":incr", LINCHECK_INCR}, {":cas", LINCHECK_CAS},
};

struct edn_map {
	struct edn_value process, type, f, key, value;
	bool has_process, has_type, has_f, has_key, has_value;
};

static int read_map(struct eparser *p, struct edn_map *m)
{
	memset(m, 0, sizeof(*m));
	skip_blank(p);
	if (p->p >= p->end || *p->p != '{')
		return bad(p, "a line must be one EDN map {...}");
	p->p++;
	for (;;) {
		skip_blank(p);
		if (p->p < p->end && *p->p == '}') {
			p->p++;
			break;
		}
		struct edn_value k, v;
		int rv = read_value(p, &k, 1);
		if (rv == 0)
			rv = read_value(p, &v, 1);
		if (rv != 0)
			return rv;
		struct {
			const char *name;
			struct edn_value *slot;
			bool *has;
		} known[] = {
			{":process", &m->process, &m->has_process},
			{":type", &m->type, &m->has_type},
			{":f", &m->f, &m->has_f},
			{":key", &m->key, &m->has_key},
			{":value", &m->value, &m->has_value},
		};
		for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++) {
			if (!value_is(&k, known[i].name))
				continue;
			if (*known[i].has)
				return bad(p, "an entry appears twice");
			*known[i].slot = v;
			*known[i].has = true;
		}
	}
	skip_blank(p);
	if (p->p < p->end && *p->p != ';')
		return bad(p, "text after the map");
	return 0;
}

static int invoke_args(struct eparser *p, const struct edn_map *m,
		       struct lincheck_op *op)
{
	switch (op->kind) {
	case LINCHECK_SET:
	case LINCHECK_APPEND:
		if (!m->has_value)
			return bad(p, "no :value");
		return scalar(p, &m->value, false, &op->arg);
	case LINCHECK_CAS:
		if (!m->has_value)
			return bad(p, "no :value");
		return cas_pair(p, &m->value, op);
	case LINCHECK_INCR:
		op->delta = 1;
		if (!m->has_value || m->value.type == EDN_NIL)
			return 0;
		if (m->value.type != EDN_INT ||
		    !lincheck__parse_i64(m->value.s, m->value.n, &op->delta))
			return bad(p, "an incr's :value must be an integer");
		return 0;
	default:
		return 0;
	}
}

static int ok_results(struct eparser *p, const struct edn_map *m,
		      struct lincheck_op *op)
{
	switch (op->kind) {
	case LINCHECK_GET:
		if (!m->has_value)
			return bad(p, "an ok read without :value");
		return scalar(p, &m->value, true, &op->out);
	case LINCHECK_CAS:
		/* An ok cas swapped (a failed compare is :fail). */
		op->out_known = true;
		op->out_int = 1;
		return 0;
	case LINCHECK_INCR:
		if (!m->has_value || m->value.type == EDN_NIL)
			return 0;
		if (m->value.type != EDN_INT ||
		    !lincheck__parse_i64(m->value.s, m->value.n, &op->out_int))
			return bad(p, "an incr's :value must be an integer");
		op->out_known = true;
		return 0;
	default:
		return 0;
	}
}

static int key_of(struct eparser *p, const struct edn_map *m, uint32_t *key)
{
	if (!m->has_key) {
		if (p->register_key == LINCHECK__NONE) {
			int rv = lincheck_history_key(p->h, "", 0,
						      &p->register_key, p->err);
			if (rv != 0)
				return rv;
		}
		*key = p->register_key;
		return 0;
	}
	struct lincheck_value v;
	int rv = scalar(p, &m->key, false, &v);
	if (rv != 0)
		return rv;
	/* The key's bytes are stored twice; keys are few. */
	return lincheck_history_key(p->h, lincheck_value_bytes(p->h, v), v.len,
				    key, p->err);
}

static int line_event(struct eparser *p)
{
	struct edn_map m;
	int rv = read_map(p, &m);
	if (rv != 0)
		return rv;
	if (!m.has_process || !m.has_type || !m.has_f)
		return bad(p, "a map needs :process, :type and :f");
	uint64_t client;
	if (m.process.type != EDN_INT)
		return 0; /* the nemesis */
	if (!lincheck__parse_u64(m.process.s, m.process.n, &client))
		return bad(p, ":process must be a non-negative integer");
	struct lincheck_op op;
	memset(&op, 0, sizeof(op));
	op.client = client;
	size_t i = 0;
	size_t n_functions = sizeof(edn_functions) / sizeof(*edn_functions);
	while (i < n_functions && !value_is(&m.f, edn_functions[i].name))
		i++;
	if (i == n_functions)
		return bad(p, "unknown :f (:get, :put, :append, :read, "
			      ":write, :cas, :del, :incr)");
	op.kind = (uint8_t)edn_functions[i].kind;
	if ((rv = key_of(p, &m, &op.key)) != 0)
		return rv;
	int64_t time = (int64_t)p->line;
	if (value_is(&m.type, ":invoke")) {
		op.invoke_time = time;
		if ((rv = invoke_args(p, &m, &op)) != 0)
			return rv;
		return lincheck_history_invoke(p->h, &op, p->line, p->err);
	}
	enum lincheck_status status;
	if (value_is(&m.type, ":ok")) {
		status = LINCHECK_OK;
		if ((rv = ok_results(p, &m, &op)) != 0)
			return rv;
	} else if (value_is(&m.type, ":fail")) {
		status = LINCHECK_FAIL;
	} else if (value_is(&m.type, ":info")) {
		status = LINCHECK_INFO;
	} else {
		return bad(p, "unknown :type (:invoke, :ok, :fail, :info)");
	}
	return lincheck_history_complete(p->h, client, time, p->line, status,
					 &op, true, p->err);
}

int lincheck__parse_edn(struct lincheck_history *h, const char *data,
			size_t len, struct lincheck_error *err)
{
	struct eparser p;
	memset(&p, 0, sizeof(p));
	p.h = h;
	p.err = err;
	h->times_are_events = true;
	h->missing_reads_empty = true;
	p.register_key = LINCHECK__NONE;
	int rv = 0;
	struct lincheck__lines l;
	lincheck__lines_init(&l, data, len);
	const char *s;
	size_t n;
	int got;
	while (rv == 0 && (got = lincheck__lines_next(&l, &s, &n)) != 0) {
		p.line = l.line;
		if (got < 0) {
			rv = lincheck__line_error(err, got, h->name, l.line);
			break;
		}
		p.p = s;
		p.end = s + n;
		skip_blank(&p);
		if (p.p == p.end || *p.p == ';')
			continue;
		rv = line_event(&p);
	}
	free(p.scratch);
	return rv;
}
