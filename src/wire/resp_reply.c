/*
 * The RESP reply scanner (resp.h): where one reply ends.
 *
 * A proxy passes another server's replies on byte for byte, so the scanner
 * only checks each element and counts what the open aggregates still owe.
 * It resumes where it stopped: `pos` is the element being scanned and a
 * line search resumes at `scan`, so bytes arriving one at a time cost no
 * rescanning.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "baton/raft.h"
#include "resp.h"

void resp_reply_scanner_init(struct resp_reply_scanner *sc,
			     const struct resp_reply_limits *l)
{
	assert(l->reply_bytes_max >= 1 && l->line_bytes_max >= 1);
	assert(l->depth_max >= 1 && l->depth_max <= RESP_REPLY_DEPTH_MAX);
	memset(sc, 0, sizeof *sc);
	sc->limits = *l;
}

const char *resp_reply_scanner_error(const struct resp_reply_scanner *sc)
{
	return sc->errmsg;
}

static int scan_fail(struct resp_reply_scanner *sc, int rv, const char *fmt,
		     ...) __attribute__((format(printf, 3, 4)));

/* Make the error sticky, with its text. */
static int scan_fail(struct resp_reply_scanner *sc, int rv, const char *fmt,
		     ...)
{
	assert(rv == BATON_ECORRUPT || rv == BATON_ETOOBIG);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sc->errmsg, sizeof sc->errmsg, fmt, ap);
	va_end(ap);
	sc->rv = rv;
	return rv;
}

/* The line of the element at sc->pos (its type byte, the content, \r\n):
 * RESP_OK with the content's length, or RESP_NEED_MORE, or an error. */
static int scan_line(struct resp_reply_scanner *sc, const uint8_t *data,
		     size_t len, size_t *content_len)
{
	size_t start = sc->pos + 1;
	size_t i = sc->scan > start ? sc->scan : start;
	const uint8_t *nl = i < len ? memchr(data + i, '\n', len - i) : NULL;
	if (nl == NULL) {
		sc->scan = len > start ? len : start;
		size_t have = len > start ? len - start : 0;
		/* The line may still end in the \r it holds last. */
		if (have > sc->limits.line_bytes_max + 1)
			return scan_fail(sc, BATON_ETOOBIG,
					 "a reply line of more than %zu bytes "
					 "at byte %zu",
					 sc->limits.line_bytes_max, sc->pos);
		if (len > sc->limits.reply_bytes_max)
			return scan_fail(sc, BATON_ETOOBIG,
					 "a reply of more than %zu bytes",
					 sc->limits.reply_bytes_max);
		return RESP_NEED_MORE;
	}
	size_t end = (size_t)(nl - data);
	/* The limits first, as they were checked while the line was
	 * incomplete: the outcome must not depend on where reads cut. */
	if (end - start > sc->limits.line_bytes_max + 1)
		return scan_fail(sc, BATON_ETOOBIG,
				 "a reply line of more than %zu bytes at byte "
				 "%zu",
				 sc->limits.line_bytes_max, sc->pos);
	if (end > sc->limits.reply_bytes_max)
		return scan_fail(sc, BATON_ETOOBIG,
				 "a reply of more than %zu bytes",
				 sc->limits.reply_bytes_max);
	if (end == start || data[end - 1] != '\r')
		return scan_fail(sc, BATON_ECORRUPT,
				 "a line ends in \\n without \\r at byte %zu",
				 end);
	size_t n = end - 1 - start;
	if (memchr(data + start, '\r', n) != NULL)
		return scan_fail(sc, BATON_ECORRUPT,
				 "a \\r inside a line at byte %zu", sc->pos);
	assert(n <= sc->limits.line_bytes_max);
	*content_len = n;
	return RESP_OK;
}

/* A big number: an optional '-', then at least one digit. */
static bool is_big_number(const uint8_t *s, size_t n)
{
	size_t i = n > 0 && s[0] == '-' ? 1 : 0;
	if (i == n)
		return false;
	for (; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* A double: "inf", "-inf", "nan", or digits with a sign, '.', an
 * exponent (checked loosely: those characters, at least one digit). */
static bool is_double(const uint8_t *s, size_t n)
{
	static const char *const words[] = {"inf", "-inf", "nan", "+inf"};
	for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
		if (n == strlen(words[w]) && memcmp(s, words[w], n) == 0)
			return true;
	bool digit = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			digit = true;
		else if (strchr("+-.eE", s[i]) == NULL || s[i] == '\0')
			return false;
	}
	return digit;
}

/* A bulk-like element ($ ! =) whose header line says `v`: its body must
 * be there whole. Sets *next past it. */
static int scan_body(struct resp_reply_scanner *sc, const uint8_t *data,
		     size_t len, uint8_t type, int64_t v, size_t *next)
{
	if (v < 0)
		return scan_fail(sc, BATON_ECORRUPT,
				 "a negative length %" PRId64 " of a '%c' "
				 "reply at byte %zu",
				 v, type, sc->pos);
	/* *next <= the limit (checked): room is what the reply has left. */
	size_t room = sc->limits.reply_bytes_max - *next;
	if ((uint64_t)v > room || room - (size_t)v < 2)
		return scan_fail(sc, BATON_ETOOBIG,
				 "a bulk of %" PRId64 " bytes at byte %zu "
				 "exceeds the reply limit of %zu bytes",
				 v, sc->pos, sc->limits.reply_bytes_max);
	size_t end = *next + (size_t)v;
	if (len < end + 2)
		return RESP_NEED_MORE;
	if (data[end] != '\r' || data[end + 1] != '\n')
		return scan_fail(sc, BATON_ECORRUPT,
				 "a bulk not followed by \\r\\n at byte %zu",
				 end);
	if (type == '=' && (v < 4 || data[*next + 3] != ':'))
		return scan_fail(sc, BATON_ECORRUPT,
				 "a verbatim string without its 'xxx:' "
				 "format at byte %zu",
				 sc->pos);
	*next = end + 2;
	return RESP_OK;
}

/* The elements an aggregate header announces (0: none, or a null). */
static int scan_aggregate(struct resp_reply_scanner *sc, uint8_t type,
			  int64_t v, size_t next, uint64_t *elements)
{
	if (v == -1 && type == '*') {
		*elements = 0; /* the null array */
		return RESP_OK;
	}
	if (v < 0)
		return scan_fail(sc, BATON_ECORRUPT,
				 "a negative count %" PRId64 " of a '%c' "
				 "reply at byte %zu",
				 v, type, sc->pos);
	/* Maps and attributes hold pairs; an attribute then the value it
	 * describes. Each element takes at least 3 bytes ("_\r\n"). */
	uint64_t per = type == '%' || type == '|' ? 2 : 1;
	uint64_t room = (uint64_t)(sc->limits.reply_bytes_max - next) / 3;
	if ((uint64_t)v > room / per)
		return scan_fail(sc, BATON_ETOOBIG,
				 "an aggregate of %" PRId64 " elements at "
				 "byte %zu cannot fit the reply limit of %zu "
				 "bytes",
				 v, sc->pos, sc->limits.reply_bytes_max);
	*elements = (uint64_t)v * per + (type == '|' ? 1 : 0);
	return RESP_OK;
}

/* One element at sc->pos whose line is `line` (n bytes): check it and set
 * *next past it and *elements to what it opens (aggregates). */
static int scan_element(struct resp_reply_scanner *sc, const uint8_t *data,
			size_t len, const uint8_t *line, size_t n, size_t *next,
			uint64_t *elements)
{
	uint8_t type = data[sc->pos];
	int64_t v = 0;
	*elements = 0;
	switch (type) {
	case '+':
	case '-':
		return RESP_OK;
	case ':':
		if (!resp_parse_int(line, n, &v))
			break;
		return RESP_OK;
	case '(':
		if (!is_big_number(line, n))
			break;
		return RESP_OK;
	case ',':
		if (!is_double(line, n))
			break;
		return RESP_OK;
	case '#':
		if (n != 1 || (line[0] != 't' && line[0] != 'f'))
			break;
		return RESP_OK;
	case '_':
		if (n != 0)
			break;
		return RESP_OK;
	case '$':
	case '!':
	case '=':
		if (!resp_parse_int(line, n, &v))
			break;
		if (v == -1 && type == '$')
			return RESP_OK; /* the null bulk */
		return scan_body(sc, data, len, type, v, next);
	case '*':
	case '~':
	case '>':
	case '%':
	case '|':
		if (!resp_parse_int(line, n, &v))
			break;
		return scan_aggregate(sc, type, v, *next, elements);
	default:
		assert(0 && "resp_reply_scan checked the type");
	}
	return scan_fail(sc, BATON_ECORRUPT,
			 "a malformed '%c' line at byte %zu: '%.*s'", type,
			 sc->pos, (int)(n < 32 ? n : 32), (const char *)line);
}

int resp_reply_scan(struct resp_reply_scanner *sc, const uint8_t *data,
		    size_t len, size_t *reply_len)
{
	if (sc->rv != 0)
		return sc->rv;
	for (;;) {
		assert(sc->depth <= sc->limits.depth_max);
		if (sc->pos >= len)
			return RESP_NEED_MORE;
		uint8_t type = data[sc->pos];
		if (type == '\0' || strchr("+-:$*_,#(!=%~>|", type) == NULL)
			return scan_fail(sc, BATON_ECORRUPT,
					 "an unknown reply type byte 0x%02x at "
					 "byte %zu",
					 type, sc->pos);
		size_t n = 0;
		int rv = scan_line(sc, data, len, &n);
		if (rv != RESP_OK)
			return rv;
		size_t next = sc->pos + 1 + n + 2;
		if (next > sc->limits.reply_bytes_max)
			return scan_fail(sc, BATON_ETOOBIG,
					 "a reply of more than %zu bytes",
					 sc->limits.reply_bytes_max);
		uint64_t elements = 0;
		rv = scan_element(sc, data, len, data + sc->pos + 1, n, &next,
				  &elements);
		if (rv != RESP_OK)
			return rv; /* the body is not all there, or bad */
		sc->pos = next;
		sc->scan = 0;
		if (elements > 0) {
			if (sc->depth == sc->limits.depth_max)
				return scan_fail(sc, BATON_ETOOBIG,
						 "aggregates nested more than "
						 "%u deep",
						 sc->limits.depth_max);
			sc->left[sc->depth++] = elements;
			continue;
		}
		/* A whole element: it ends every aggregate it completes. */
		while (sc->depth > 0 && --sc->left[sc->depth - 1] == 0)
			sc->depth--;
		if (sc->depth == 0) {
			*reply_len = sc->pos;
			sc->pos = 0;
			sc->scan = 0;
			return RESP_OK;
		}
	}
}
