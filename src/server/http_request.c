/* Judging an HTTP request's head for --metrics (http_request.h). */
#include "http_request.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

size_t http_head_end(const char *in, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (in[i] != '\n')
			continue;
		if (in[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && in[i + 1] == '\r' && in[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* RFC 9110's tchar; never NUL (strchr would find the terminator). */
static bool is_token_char(char ch)
{
	return ch != '\0' && (isalnum((unsigned char)ch) ||
			      strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Header lines up to the blank line: each "name: value" with a token
 * name and no control characters but tab in the value. Sets *body when
 * one announces a body (Content-Length other than 0, or a
 * Transfer-Encoding). */
static bool headers_valid(const char *p, const char *end, bool *body)
{
	*body = false;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == NULL)
			eol = end;
		const char *line_end =
			eol > p && eol[-1] == '\r' ? eol - 1 : eol;
		if (line_end == p)
			return true; /* the blank line that ends them */
		const char *colon = memchr(p, ':', (size_t)(line_end - p));
		if (colon == NULL || colon == p)
			return false;
		for (const char *q = p; q < colon; q++)
			if (!is_token_char(*q))
				return false;
		for (const char *q = colon + 1; q < line_end; q++)
			if (((unsigned char)*q < 0x20 && *q != '\t') ||
			    *q == 0x7f)
				return false;
		size_t name_len = (size_t)(colon - p);
		const char *v = colon + 1;
		while (v < line_end && (*v == ' ' || *v == '\t'))
			v++;
		const char *v_end = line_end;
		while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
			v_end--;
		if (name_len == 17 &&
		    strncasecmp(p, "Transfer-Encoding", 17) == 0)
			*body = true;
		if (name_len == 14 &&
		    strncasecmp(p, "Content-Length", 14) == 0 &&
		    !(v_end - v == 1 && *v == '0'))
			*body = true;
		p = eol + 1;
	}
	return false; /* no blank line: not a whole head */
}

static int refuse(struct http_request *out, int code, const char *why)
{
	out->why = why;
	return code;
}

int http_request_parse(const char *head, size_t head_len,
		       struct http_request *out)
{
	memset(out, 0, sizeof *out);
	const char *p = head, *end = head + head_len;
	const char *eol = memchr(p, '\n', head_len);
	if (eol == NULL)
		return refuse(out, 400, "bad request: no request line\n");
	const char *line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
	/* METHOD SP TARGET SP HTTP/1.x */
	const char *sp1 = memchr(p, ' ', (size_t)(line_end - p));
	const char *sp2 =
		sp1 != NULL ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1))
			    : NULL;
	if (sp1 == NULL || sp2 == NULL || sp1 == p || sp2 == sp1 + 1 ||
	    line_end - sp2 - 1 != 8 ||
	    (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 &&
	     memcmp(sp2 + 1, "HTTP/1.0", 8) != 0))
		return refuse(out, 400,
			      "bad request: expected 'GET /metrics "
			      "HTTP/1.1'\n");
	for (const char *q = p; q < sp1; q++)
		if (!is_token_char(*q))
			return refuse(out, 400, "bad request: bad method\n");
	const char *target = sp1 + 1;
	/* Origin form only ("/metrics"): no absolute URI, no "*". */
	if (target >= sp2 || *target != '/')
		return refuse(out, 400,
			      "bad request: the target must be a path such as "
			      "/metrics\n");
	for (const char *q = target; q < sp2; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return refuse(out, 400, "bad request: bad target\n");
	bool body;
	if (!headers_valid(eol + 1, end, &body))
		return refuse(out, 400, "bad request: malformed header line\n");
	if (sp1 - p != 3 || memcmp(p, "GET", 3) != 0)
		return refuse(out, 405, "method not allowed: only GET\n");
	if (body)
		return refuse(out, 413, "a GET takes no body\n");
	const char *q = memchr(target, '?', (size_t)(sp2 - target));
	out->path = target;
	out->path_len = (size_t)((q != NULL ? q : sp2) - target);
	out->query = q != NULL ? q + 1 : sp2;
	out->query_len = q != NULL ? (size_t)(sp2 - q - 1) : 0;
	return 200;
}

bool http_query_max_lag(const char *q, size_t len, uint64_t *max_lag)
{
	*max_lag = HTTP_MAX_LAG_DEFAULT;
	size_t i = 0;
	while (i < len) {
		size_t end = i;
		while (end < len && q[end] != '&')
			end++;
		if (end - i >= 7 && memcmp(q + i, "max_lag", 7) == 0) {
			if (end - i < 9 || q[i + 7] != '=' || end - i - 8 > 18)
				return false;
			uint64_t v = 0;
			for (size_t k = i + 8; k < end; k++) {
				if (!isdigit((unsigned char)q[k]))
					return false;
				v = v * 10 + (uint64_t)(q[k] - '0');
			}
			*max_lag = v;
		}
		i = end + 1;
	}
	return true;
}

/* The oldest half-sent connection of `source` (any source when all), or
 * HTTP_ADMIT_REFUSE. */
static size_t oldest_half_sent(const struct http_admit_conn *conns, size_t n,
			       uint64_t source, bool all)
{
	for (size_t i = 0; i < n; i++)
		if (!conns[i].complete && (all || conns[i].source == source))
			return i;
	return HTTP_ADMIT_REFUSE;
}

static size_t count_source(const struct http_admit_conn *conns, size_t n,
			   uint64_t source)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += conns[i].source == source;
	return k;
}

size_t http_admit(const struct http_admit_conn *conns, size_t n,
		  uint64_t source, size_t conns_max, size_t per_source_max)
{
	if (count_source(conns, n, source) >= per_source_max)
		return oldest_half_sent(conns, n, source, false);
	if (n < conns_max)
		return HTTP_ADMIT_ACCEPT;
	/* The source holding the most (O(n^2) over at most conns_max). */
	size_t best = 0, best_count = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = count_source(conns, n, conns[i].source);
		if (k > best_count) {
			best = i;
			best_count = k;
		}
	}
	size_t v = best_count > 0 ? oldest_half_sent(conns, n,
						     conns[best].source, false)
				  : HTTP_ADMIT_REFUSE;
	return v != HTTP_ADMIT_REFUSE ? v : oldest_half_sent(conns, n, 0, true);
}

uint64_t http_source_key(const uint8_t *addr, size_t len)
{
	/* FNV-1a: a key for equality, not a defence (the cap per source is
	 * what bounds one host; a collision only shares two hosts' cap). */
	uint64_t h = 0xcbf29ce484222325u;
	for (size_t i = 0; i < len; i++) {
		h ^= addr[i];
		h *= 0x100000001b3u;
	}
	return h;
}
