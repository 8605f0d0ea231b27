/*
 * RESP3 for connections that asked for it with HELLO 3 (docs/clients.md,
 * "RESP3"). The key-value layer writes RESP2; a connection in RESP3 has
 * each reply rewritten as it is finished: RESP2's two nulls become RESP3's
 * one null, and the reply of a command whose Redis 7 reply is a map (as
 * HGETALL's) has its top array turned into a map header. Every other byte
 * is copied as it is, so the rewrite costs one pass over the reply. A
 * reply already in RESP3 (a map, set, null, double, boolean or big number
 * line a local command wrote) passes unchanged. EXEC's reply may have some
 * of its elements turned into maps (an HGETALL inside the transaction).
 */
#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "resp.h"

int resp3_map(struct baton_buf *b, size_t pairs)
{
	char head[32];
	int n = snprintf(head, sizeof head, "%%%zu\r\n", pairs);
	BATON_ASSERT(n > 0 && (size_t)n < sizeof head);
	return baton_buf_append(b, head, (size_t)n);
}

int resp3_set(struct baton_buf *b, size_t n)
{
	char head[32];
	int len = snprintf(head, sizeof head, "~%zu\r\n", n);
	BATON_ASSERT(len > 0 && (size_t)len < sizeof head);
	return baton_buf_append(b, head, (size_t)len);
}

int resp3_verbatim(struct baton_buf *b, const char *format, const void *data,
		   size_t len)
{
	BATON_ASSERT(strlen(format) == 3);
	BATON_ASSERT(data != NULL || len == 0);
	char head[48];
	int n = snprintf(head, sizeof head, "=%zu\r\n%s:", len + 4, format);
	BATON_ASSERT(n > 0 && (size_t)n < sizeof head);
	int rv = baton_buf_append(b, head, (size_t)n);
	if (rv == 0 && len > 0)
		rv = baton_buf_append(b, data, len);
	return rv == 0 ? baton_buf_append(b, "\r\n", 2) : rv;
}

int resp3_null(struct baton_buf *b)
{
	return baton_buf_append(b, "_\r\n", 3);
}

/* The end of the line starting at in[pos] (the index of its '\r'), or
 * len if it has none. */
static size_t line_end(const uint8_t *in, size_t len, size_t pos)
{
	for (size_t i = pos; i + 1 < len; i++)
		if (in[i] == '\r' && in[i + 1] == '\n')
			return i;
	return len;
}

/* The number after a header's type byte; false if there is none. */
static bool header_number(const uint8_t *in, size_t pos, size_t end, int64_t *v)
{
	return resp_parse_int(in + pos + 1, end - pos - 1, v);
}

/* Where a line stands in the reply's nesting: the elements each open
 * aggregate still waits for, innermost last. */
struct nesting {
	uint64_t left[RESP3_DEPTH_MAX];
	uint32_t depth;
};

/* A value ended: it counts against its parent, and an aggregate whose last
 * element it was ends too. */
static void value_ended(struct nesting *at)
{
	while (at->depth > 0 && --at->left[at->depth - 1] == 0)
		at->depth--;
}

/* The line is an aggregate header of n (n > 0) elements. False when the
 * nesting is deeper than RESP3_DEPTH_MAX. */
static bool aggregate_opened(struct nesting *at, uint64_t n)
{
	BATON_ASSERT(n > 0);
	if (at->depth == RESP3_DEPTH_MAX)
		return false;
	at->left[at->depth++] = n;
	return true;
}

/* maps: NULL, or n_maps flags saying which elements of a top array become
 * maps (EXEC's); top_map: the top array itself does. */
static int convert(const uint8_t *in, size_t len, bool top_map,
		   const bool *maps, size_t n_maps, struct baton_buf *out)
{
	BATON_ASSERT(in != NULL || len == 0);
	BATON_ASSERT(maps != NULL || n_maps == 0);
	size_t start_len = out->len;
	size_t pos = 0, element = 0;
	struct nesting at = {{0}, 0};
	int rv = 0;
	while (rv == 0 && pos < len) {
		size_t end = line_end(in, len, pos);
		int64_t n = 0;
		if (end == len) {
			rv = BATON_ECORRUPT;
			break;
		}
		uint8_t type = in[pos];
		size_t next = end + 2;
		bool counted = strchr("*$%~=", type) != NULL && type != 0;
		if (counted && !header_number(in, pos, end, &n)) {
			rv = BATON_ECORRUPT;
			break;
		}
		/* An element of the top array starts here: the i-th. */
		bool map_here =
			(pos == 0 && top_map) ||
			(at.depth == 1 && element < n_maps && maps[element]);
		if (at.depth == 1)
			element++;
		if ((type == '$' || type == '*') && n == -1) {
			rv = resp3_null(out);
		} else if (type == '*' && map_here && n % 2 == 0) {
			rv = resp3_map(out, (size_t)n / 2);
		} else if (type == '$' || type == '=') {
			if (n < 0 || (uint64_t)n > len - next ||
			    len - next - (size_t)n < 2 ||
			    memcmp(in + next + n, "\r\n", 2) != 0) {
				rv = BATON_ECORRUPT;
				break;
			}
			next += (size_t)n + 2;
			rv = baton_buf_append(out, in + pos, next - pos);
		} else if (strchr("*+-:%_,#(~", type) != NULL && type != 0) {
			/* RESP2's lines, and RESP3's a local command wrote. */
			rv = baton_buf_append(out, in + pos, next - pos);
		} else {
			rv = BATON_ECORRUPT;
		}
		pos = next;
		uint64_t elements = type == '%' ? 2 * (uint64_t)n : (uint64_t)n;
		bool blob = type == '$' || type == '=';
		if (rv == 0 && !blob && counted && n > 0) {
			/* Only the element masks need the nesting. */
			if (!aggregate_opened(&at, elements) && maps != NULL)
				rv = BATON_ECORRUPT;
		} else {
			value_ended(&at);
		}
	}
	if (rv != 0)
		out->len = start_len;
	BATON_ASSERT(rv != 0 || out->len >= start_len);
	return rv;
}

int resp3_from_resp2(const uint8_t *in, size_t len, bool top_map,
		     struct baton_buf *out)
{
	return convert(in, len, top_map, NULL, 0, out);
}

int resp3_from_resp2_elements(const uint8_t *in, size_t len, const bool *maps,
			      size_t n_maps, struct baton_buf *out)
{
	BATON_ASSERT(maps != NULL && n_maps > 0);
	return convert(in, len, false, maps, n_maps, out);
}
