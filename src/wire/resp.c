/*
 * RESP2 (resp.h): reply writers and the incremental request parser.
 *
 * The parser keeps every byte fed since the first unreturned command in one
 * buffer and remembers where it stopped, so bytes arriving one at a time
 * cost no rescanning: line searches resume at `scan`, and a bulk argument
 * is taken once all its bytes are there. Arguments are kept as offsets
 * (the buffer moves when it grows) and turned into pointers on return.
 * Inline arguments are unquoted in place: the result is never longer than
 * the line it comes from.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/raft.h"
#include "resp.h"

/* ------------------------------------------------------------------------ */
/* Reply writers.                                                           */

/* Longest "$<n>\r\n" or ":<n>\r\n" header: a sign, 20 digits, 3 bytes. */
#define RESP_HEADER_BYTES_MAX 32u

/* Copy len bytes to dst, turning \r and \n into spaces. */
static void copy_line(uint8_t *dst, const char *src, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = src[i];
		dst[i] = (uint8_t)(c == '\r' || c == '\n' ? ' ' : c);
	}
}

/* "<kind><v>\r\n": the header of a bulk string or an array. */
static int put_header(struct baton_buf *b, char kind, uint64_t v)
{
	char tmp[RESP_HEADER_BYTES_MAX];
	int n = snprintf(tmp, sizeof tmp, "%c%" PRIu64 "\r\n", kind, v);
	assert(n > 0 && (size_t)n < sizeof tmp);
	return baton_buf_append(b, tmp, (size_t)n);
}

int resp_simple(struct baton_buf *b, const char *s)
{
	size_t len = strlen(s);
	int rv = baton_buf_reserve(b, len + 3);
	if (rv != 0)
		return rv;
	uint8_t *p = b->data + b->len;
	p[0] = '+';
	copy_line(p + 1, s, len);
	memcpy(p + 1 + len, "\r\n", 2);
	b->len += len + 3;
	return 0;
}

int resp_error(struct baton_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return BATON_EINVAL;
	size_t len = (size_t)n < RESP_ERROR_BYTES_MAX ? (size_t)n
						      : RESP_ERROR_BYTES_MAX;
	/* '-', the message and its NUL, then the NUL becomes "\r\n". */
	int rv = baton_buf_reserve(b, len + 3);
	if (rv != 0)
		return rv;
	char *msg = (char *)b->data + b->len + 1;
	va_start(ap, fmt);
	int m = vsnprintf(msg, len + 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return BATON_EINVAL;
	b->data[b->len] = '-';
	copy_line((uint8_t *)msg, msg, len);
	memcpy(msg + len, "\r\n", 2);
	b->len += len + 3;
	return 0;
}

int resp_int(struct baton_buf *b, int64_t v)
{
	char tmp[RESP_HEADER_BYTES_MAX];
	int n = snprintf(tmp, sizeof tmp, ":%" PRId64 "\r\n", v);
	assert(n > 0 && (size_t)n < sizeof tmp);
	return baton_buf_append(b, tmp, (size_t)n);
}

int resp_bulk(struct baton_buf *b, const void *data, size_t len)
{
	assert(data != NULL || len == 0);
	if (len > BATON_BUF_BYTES_MAX - RESP_HEADER_BYTES_MAX)
		return BATON_ENOMEM;
	/* All at once, so that a failure leaves no half reply. */
	int rv = baton_buf_reserve(b, RESP_HEADER_BYTES_MAX + len + 2);
	if (rv != 0)
		return rv;
	rv = put_header(b, '$', (uint64_t)len);
	assert(rv == 0);
	if (len > 0)
		memcpy(b->data + b->len, data, len);
	memcpy(b->data + b->len + len, "\r\n", 2);
	b->len += len + 2;
	return 0;
}

int resp_null(struct baton_buf *b)
{
	return baton_buf_append(b, "$-1\r\n", 5);
}

int resp_null_array(struct baton_buf *b)
{
	return baton_buf_append(b, "*-1\r\n", 5);
}

int resp_array(struct baton_buf *b, size_t n)
{
	return put_header(b, '*', (uint64_t)n);
}

bool resp_parse_int(const uint8_t *s, size_t len, int64_t *out)
{
	if (len == 0)
		return false;
	if (len == 1 && s[0] == '0') {
		*out = 0;
		return true;
	}
	size_t i = 0;
	bool negative = s[0] == '-';
	if (negative)
		i++;
	if (i == len || s[i] < '1' || s[i] > '9')
		return false;
	uint64_t v = 0;
	for (; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (negative) {
		if (v > (uint64_t)INT64_MAX + 1)
			return false;
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
		return true;
	}
	if (v > (uint64_t)INT64_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

/* ------------------------------------------------------------------------ */
/* The request parser.                                                      */

/* Argument slots allocated at first; they double up to args_max. */
#define RESP_ARGS_FIRST 16u
/* Memory an idle connection keeps: more is released by consumed(). */
#define RESP_IDLE_BUF_BYTES_MAX ((size_t)64 << 10)
#define RESP_IDLE_ARGS_MAX 1024u

/* What the byte at pos is expected to be. */
enum {
	S_START = 0,   /* the first byte of a command */
	S_BULK_HEADER, /* a "$<len>\r\n" line */
	S_BULK_DATA,   /* bulk_len bytes and "\r\n" */
};

/* A step of next() that made progress without finishing a command. */
#define PARSE_CONTINUE 2

void resp_limits_default(struct resp_limits *l)
{
	l->args_max = RESP_ARGS_MAX_DEFAULT;
	l->bulk_bytes_max = RESP_BULK_BYTES_MAX_DEFAULT;
	l->inline_bytes_max = RESP_INLINE_BYTES_MAX_DEFAULT;
	l->query_bytes_max = RESP_QUERY_BYTES_MAX_DEFAULT;
	l->request_bytes_max = RESP_REQUEST_BYTES_MAX_DEFAULT;
}

void resp_parser_init(struct resp_parser *p, const struct resp_limits *l)
{
	memset(p, 0, sizeof *p);
	if (l != NULL)
		p->limits = *l;
	else
		resp_limits_default(&p->limits);
	assert(p->limits.args_max >= 1);
	assert(p->limits.bulk_bytes_max >= 1);
	assert(p->limits.bulk_bytes_max <= BATON_BUF_BYTES_MAX / 2);
	assert(p->limits.inline_bytes_max >= 1);
	assert(p->limits.query_bytes_max >= 1);
	baton_buf_init(&p->in);
	p->state = S_START;
}

static void free_args(struct resp_parser *p)
{
	free(p->offs);
	free(p->lens);
	free(p->argv);
	p->offs = NULL;
	p->lens = NULL;
	p->argv = NULL;
	p->args_cap = 0;
}

void resp_parser_free(struct resp_parser *p)
{
	baton_buf_free(&p->in);
	free_args(p);
	p->argc = 0;
}

static const char *perr_message(enum resp_protocol_error e)
{
	switch (e) {
	case RESP_PERR_INLINE_TOO_BIG:
		return "Protocol error: too big inline request";
	case RESP_PERR_UNBALANCED_QUOTES:
		return "Protocol error: unbalanced quotes in request";
	case RESP_PERR_MBULK_COUNT_TOO_BIG:
		return "Protocol error: too big mbulk count string";
	case RESP_PERR_MBULK_LEN:
		return "Protocol error: invalid multibulk length";
	case RESP_PERR_BULK_COUNT_TOO_BIG:
		return "Protocol error: too big bulk count string";
	case RESP_PERR_EXPECTED_DOLLAR:
		return "Protocol error: expected '$'";
	case RESP_PERR_BULK_LEN:
		return "Protocol error: invalid bulk length";
	case RESP_PERR_BULK_CRLF:
		return "Protocol error: bulk argument not followed by CRLF";
	case RESP_PERR_QUERY_TOO_BIG:
		return "Protocol error: request exceeds the query buffer limit";
	case RESP_PERR_BULK_TOO_BIG:
		return "Protocol error: bulk above the bulk length limit";
	case RESP_PERR_REQUEST_TOO_BIG:
		return "Protocol error: request above the request size limit";
	case RESP_PERR_NOMEM:
		return "out of memory";
	case RESP_PERR_NONE:
		break;
	}
	return "";
}

/* Enter the sticky error state. */
static int fail(struct resp_parser *p, int rv, enum resp_protocol_error e)
{
	assert(rv < 0 && e != RESP_PERR_NONE);
	p->rv = rv;
	p->perr = e;
	snprintf(p->errmsg, sizeof p->errmsg, "%s", perr_message(e));
	return rv;
}

/* Drop the bytes of returned commands. */
static void compact(struct resp_parser *p)
{
	size_t d = p->start;
	if (d == 0)
		return;
	assert(d <= p->pos && p->pos <= p->in.len && d <= p->scan);
	memmove(p->in.data, p->in.data + d, p->in.len - d);
	p->in.len -= d;
	p->pos -= d;
	p->scan -= d;
	for (uint32_t i = 0; i < p->argc; i++) {
		assert(p->offs[i] >= d);
		p->offs[i] -= d;
	}
	p->start = 0;
}

int resp_parser_feed(struct resp_parser *p, const uint8_t *data, size_t len)
{
	if (p->rv != 0)
		return p->rv;
	if (len == 0)
		return 0;
	compact(p);
	assert(p->in.len <= p->limits.query_bytes_max);
	if (len > p->limits.query_bytes_max - p->in.len)
		return fail(p, BATON_ETOOBIG, RESP_PERR_QUERY_TOO_BIG);
	if (baton_buf_append(&p->in, data, len) != 0)
		return fail(p, BATON_ENOMEM, RESP_PERR_NOMEM);
	return 0;
}

void resp_parser_consumed(struct resp_parser *p)
{
	if (p->rv != 0)
		return;
	compact(p);
	if (p->in.len == 0 && p->in.cap > RESP_IDLE_BUF_BYTES_MAX)
		baton_buf_free(&p->in);
	if (p->argc == 0 && p->args_cap > RESP_IDLE_ARGS_MAX)
		free_args(p);
}

const char *resp_parser_error(const struct resp_parser *p)
{
	return p->errmsg;
}

enum resp_protocol_error resp_parser_error_kind(const struct resp_parser *p)
{
	return p->perr;
}

uint64_t resp_parser_error_size(const struct resp_parser *p)
{
	return p->too_big;
}

/* A size announced in a header broke a limit: say both numbers. */
static int fail_size(struct resp_parser *p, enum resp_protocol_error e,
		     uint64_t size, size_t limit)
{
	assert(size > limit);
	assert(e == RESP_PERR_BULK_TOO_BIG || e == RESP_PERR_REQUEST_TOO_BIG);
	int rv = fail(p, BATON_ETOOBIG, e);
	p->too_big = size;
	snprintf(p->errmsg, sizeof p->errmsg,
		 "Protocol error: %s of %s%" PRIu64
		 " bytes exceeds the limit of %zu",
		 e == RESP_PERR_BULK_TOO_BIG ? "bulk" : "request",
		 e == RESP_PERR_BULK_TOO_BIG ? "" : "at least ", size, limit);
	return rv;
}

/* Bytes of the request being parsed up to pos, plus `more`. */
static uint64_t request_bytes(const struct resp_parser *p, uint64_t more)
{
	assert(p->start <= p->pos);
	return (uint64_t)(p->pos - p->start) + more;
}

/* Find byte c at or after pos; a failed search is not repeated. */
static bool find(struct resp_parser *p, uint8_t c, size_t *at)
{
	size_t from = p->scan > p->pos ? p->scan : p->pos;
	if (from < p->in.len) {
		const uint8_t *hit =
			memchr(p->in.data + from, c, p->in.len - from);
		if (hit != NULL) {
			*at = (size_t)(hit - p->in.data);
			return true;
		}
	}
	p->scan = p->in.len;
	return false;
}

/* Make room for one more argument. */
static int grow_args(struct resp_parser *p)
{
	if (p->argc < p->args_cap)
		return 0;
	uint32_t max = p->limits.args_max;
	uint32_t cap = p->args_cap == 0 ? RESP_ARGS_FIRST : p->args_cap;
	if (p->args_cap != 0)
		cap = cap <= max / 2 ? cap * 2 : max;
	if (cap > max)
		cap = max;
	assert(cap > p->argc);
	/* A failure half-way leaves bigger arrays and the old args_cap. */
	size_t *offs = realloc(p->offs, cap * sizeof *offs);
	if (offs == NULL)
		return fail(p, BATON_ENOMEM, RESP_PERR_NOMEM);
	p->offs = offs;
	size_t *lens = realloc(p->lens, cap * sizeof *lens);
	if (lens == NULL)
		return fail(p, BATON_ENOMEM, RESP_PERR_NOMEM);
	p->lens = lens;
	const uint8_t **argv = realloc(p->argv, cap * sizeof *argv);
	if (argv == NULL)
		return fail(p, BATON_ENOMEM, RESP_PERR_NOMEM);
	p->argv = argv;
	p->args_cap = cap;
	return 0;
}

static int add_arg(struct resp_parser *p, size_t off, size_t len)
{
	assert(p->argc < p->limits.args_max);
	int rv = grow_args(p);
	if (rv != 0)
		return rv;
	p->offs[p->argc] = off;
	p->lens[p->argc] = len;
	p->argc++;
	return 0;
}

/* Hand the parsed arguments out and start the next command. */
static int emit(struct resp_parser *p, struct resp_command *cmd)
{
	for (uint32_t i = 0; i < p->argc; i++) {
		assert(p->offs[i] + p->lens[i] <= p->in.len);
		p->argv[i] = p->in.data + p->offs[i];
	}
	cmd->argc = (int)p->argc;
	cmd->argv = p->argv;
	cmd->lens = p->lens;
	p->argc = 0;
	p->state = S_START;
	p->start = p->pos;
	p->scan = p->pos;
	return RESP_OK;
}

/* ---- inline requests ---- */

static bool is_space(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
	       c == '\r';
}

static bool ends_word(uint8_t c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static int hex_value(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static uint8_t unescape(uint8_t c)
{
	switch (c) {
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	case 'b':
		return '\b';
	case 'a':
		return '\a';
	default:
		return c;
	}
}

/* Scan one argument starting at s[*i] (not a space) up to end, writing its
 * unquoted bytes at s[*w...]. Redis's sdssplitargs rules: "..." with \xHH,
 * \n, \r, \t, \b, \a and \<c> escapes; '...' with \' only; a closing quote
 * must be followed by a space or the end of the line. */
static bool scan_word(uint8_t *s, size_t *i, size_t end, size_t *w)
{
	bool dq = false, sq = false;
	size_t r = *i, o = *w;
	for (;;) {
		if (dq) {
			if (r == end)
				return false;
			if (s[r] == '\\' && r + 3 < end && s[r + 1] == 'x' &&
			    hex_value(s[r + 2]) >= 0 &&
			    hex_value(s[r + 3]) >= 0) {
				s[o++] = (uint8_t)(hex_value(s[r + 2]) * 16 +
						   hex_value(s[r + 3]));
				r += 4;
			} else if (s[r] == '\\' && r + 1 < end) {
				s[o++] = unescape(s[r + 1]);
				r += 2;
			} else if (s[r] == '"') {
				if (r + 1 < end && !is_space(s[r + 1]))
					return false;
				r++;
				break;
			} else {
				s[o++] = s[r++];
			}
		} else if (sq) {
			if (r == end)
				return false;
			if (s[r] == '\\' && r + 1 < end && s[r + 1] == '\'') {
				s[o++] = '\'';
				r += 2;
			} else if (s[r] == '\'') {
				if (r + 1 < end && !is_space(s[r + 1]))
					return false;
				r++;
				break;
			} else {
				s[o++] = s[r++];
			}
		} else if (r == end) {
			break;
		} else if (ends_word(s[r])) {
			r++;
			break;
		} else if (s[r] == '"') {
			dq = true;
			r++;
		} else if (s[r] == '\'') {
			sq = true;
			r++;
		} else {
			s[o++] = s[r++];
		}
	}
	assert(o <= r);
	*i = r;
	*w = o;
	return true;
}

/* Split the line s[from..end) into arguments, in place. */
static int split_inline(struct resp_parser *p, size_t from, size_t end)
{
	uint8_t *s = p->in.data;
	size_t i = from, w = from;
	p->argc = 0;
	for (;;) {
		while (i < end && is_space(s[i]))
			i++;
		if (i == end)
			return 0;
		size_t arg = w;
		if (!scan_word(s, &i, end, &w))
			return fail(p, BATON_ECORRUPT,
				    RESP_PERR_UNBALANCED_QUOTES);
		if (p->argc == p->limits.args_max)
			return fail(p, BATON_ETOOBIG, RESP_PERR_INLINE_TOO_BIG);
		int rv = add_arg(p, arg, w - arg);
		if (rv != 0)
			return rv;
	}
}

static int parse_inline(struct resp_parser *p, struct resp_command *cmd)
{
	size_t max = p->limits.inline_bytes_max;
	size_t nl;
	if (!find(p, '\n', &nl)) {
		/* The line so far may end in the \r of its terminator. */
		if (p->in.len - p->pos > max + 1)
			return fail(p, BATON_ETOOBIG, RESP_PERR_INLINE_TOO_BIG);
		return RESP_NEED_MORE;
	}
	size_t end = nl;
	if (end > p->pos && p->in.data[end - 1] == '\r')
		end--;
	if (end - p->pos > max)
		return fail(p, BATON_ETOOBIG, RESP_PERR_INLINE_TOO_BIG);
	int rv = split_inline(p, p->pos, end);
	if (rv != 0)
		return rv;
	p->pos = nl + 1;
	return emit(p, cmd);
}

/* ---- multibulk requests ---- */

/* A "*<n>\r\n" or "$<n>\r\n" line at pos: 1 with *v set and pos past it,
 * 0 when incomplete, or an error. */
static int header_line(struct resp_parser *p, enum resp_protocol_error big,
		       enum resp_protocol_error bad, int64_t *v)
{
	size_t max = p->limits.inline_bytes_max;
	size_t cr;
	if (!find(p, '\r', &cr)) {
		if (p->in.len - p->pos > max)
			return fail(p, BATON_ETOOBIG, big);
		return 0;
	}
	if (cr - p->pos > max)
		return fail(p, BATON_ETOOBIG, big);
	if (cr + 1 == p->in.len)
		return 0;
	const uint8_t *s = p->in.data + p->pos + 1;
	if (p->in.data[cr + 1] != '\n' ||
	    !resp_parse_int(s, cr - p->pos - 1, v))
		return fail(p, BATON_ECORRUPT, bad);
	p->pos = cr + 2;
	return 1;
}

static int multibulk_header(struct resp_parser *p, struct resp_command *cmd)
{
	assert(p->in.data[p->pos] == '*' && p->argc == 0);
	int64_t n;
	int rv = header_line(p, RESP_PERR_MBULK_COUNT_TOO_BIG,
			     RESP_PERR_MBULK_LEN, &n);
	if (rv <= 0)
		return rv == 0 ? RESP_NEED_MORE : rv;
	if (n <= 0) /* Redis ignores it */
		return emit(p, cmd);
	if ((uint64_t)n > p->limits.args_max) {
		/* Redis's text (its limit is INT_MAX), and baton's limit. */
		rv = fail(p, BATON_ETOOBIG, RESP_PERR_MBULK_LEN);
		snprintf(p->errmsg, sizeof p->errmsg,
			 "Protocol error: invalid multibulk length (%" PRId64
			 " arguments exceed the limit of %" PRIu32 ")",
			 n, p->limits.args_max);
		return rv;
	}
	/* Each argument takes at least "$0\r\n\r\n". */
	size_t max = p->limits.request_bytes_max;
	uint64_t least = request_bytes(p, (uint64_t)n * 6u);
	if (max != 0 && least > max)
		return fail_size(p, RESP_PERR_REQUEST_TOO_BIG, least, max);
	p->want = (uint32_t)n;
	p->state = S_BULK_HEADER;
	return PARSE_CONTINUE;
}

static int bulk_header(struct resp_parser *p)
{
	if (p->pos == p->in.len)
		return RESP_NEED_MORE;
	uint8_t c = p->in.data[p->pos];
	if (c != '$') {
		int rv = fail(p, BATON_ECORRUPT, RESP_PERR_EXPECTED_DOLLAR);
		snprintf(p->errmsg, sizeof p->errmsg,
			 "Protocol error: expected '$', got '%c'", (char)c);
		return rv;
	}
	int64_t n;
	int rv = header_line(p, RESP_PERR_BULK_COUNT_TOO_BIG,
			     RESP_PERR_BULK_LEN, &n);
	if (rv <= 0)
		return rv == 0 ? RESP_NEED_MORE : rv;
	if (n < 0)
		return fail(p, BATON_ECORRUPT, RESP_PERR_BULK_LEN);
	if ((uint64_t)n > p->limits.bulk_bytes_max)
		return fail_size(p, RESP_PERR_BULK_TOO_BIG, (uint64_t)n,
				 p->limits.bulk_bytes_max);
	/* This bulk, its CRLF, and "$0\r\n\r\n" for each one still to come. */
	size_t max = p->limits.request_bytes_max;
	uint64_t least = request_bytes(
		p, (uint64_t)n + 2u + (uint64_t)(p->want - p->argc - 1) * 6u);
	if (max != 0 && least > max)
		return fail_size(p, RESP_PERR_REQUEST_TOO_BIG, least, max);
	p->bulk_len = (size_t)n;
	p->state = S_BULK_DATA;
	return PARSE_CONTINUE;
}

static int bulk_data(struct resp_parser *p, struct resp_command *cmd)
{
	size_t n = p->bulk_len;
	if (p->in.len - p->pos < n + 2)
		return RESP_NEED_MORE;
	const uint8_t *end = p->in.data + p->pos + n;
	if (end[0] != '\r' || end[1] != '\n')
		return fail(p, BATON_ECORRUPT, RESP_PERR_BULK_CRLF);
	assert(p->argc < p->want);
	int rv = add_arg(p, p->pos, n);
	if (rv != 0)
		return rv;
	p->pos += n + 2;
	if (p->argc == p->want)
		return emit(p, cmd);
	p->state = S_BULK_HEADER;
	return PARSE_CONTINUE;
}

int resp_parser_next(struct resp_parser *p, struct resp_command *cmd)
{
	if (p->rv != 0)
		return p->rv;
	for (;;) {
		assert(p->start <= p->pos && p->pos <= p->in.len);
		int rv;
		switch (p->state) {
		case S_START:
			if (p->pos == p->in.len)
				return RESP_NEED_MORE;
			if (p->in.data[p->pos] != '*')
				return parse_inline(p, cmd);
			rv = multibulk_header(p, cmd);
			break;
		case S_BULK_HEADER:
			rv = bulk_header(p);
			break;
		default:
			assert(p->state == S_BULK_DATA);
			rv = bulk_data(p, cmd);
			break;
		}
		if (rv != PARSE_CONTINUE)
			return rv;
	}
}
