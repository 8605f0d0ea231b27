/*
 * The request side of http.c (--metrics): finding the end of a request's
 * head and judging it, free of libuv and the server so that unit tests
 * can throw anything at it (tests/http).
 */
#ifndef BATON_HTTP_REQUEST_H
#define BATON_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest request line and headers together. */
#define HTTP_HEADERS_MAX 8192u
#define HTTP_MAX_LAG_DEFAULT 1000u

/* Where the head (request line, headers, blank line) ends in in[0, len):
 * the length up to and including the blank line, or 0 while it has not
 * come. Lines end in CRLF or LF. */
size_t http_head_end(const char *in, size_t len);

struct http_request {
	/* The target's path and query (without '?'), pointing into the
	 * head; set when the verdict is 200. */
	const char *path, *query;
	size_t path_len, query_len;
	/* The body of a refusal: one short line. */
	const char *why;
};

/* Judge a whole head (head_len from http_head_end): 200 for a GET to
 * serve; 400 (malformed request line, header line or HTTP version), 405
 * (a method but GET) or 413 (a body announced) with why. */
int http_request_parse(const char *head, size_t head_len,
		       struct http_request *out);

/* "max_lag=N" in a query of '&'-separated pairs (other keys ignored):
 * true with *max_lag (HTTP_MAX_LAG_DEFAULT when absent), false when
 * max_lag is there and not a number of at most 18 digits. */
bool http_query_max_lag(const char *q, size_t len, uint64_t *max_lag);

#endif /* BATON_HTTP_REQUEST_H */
