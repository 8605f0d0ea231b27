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

/* Admission of a new connection (http.c). The port holds at most
 * conns_max connections, at most per_source_max of them from one source
 * (a peer address), so that one host cannot take every place. When a
 * newcomer finds no room it does not lose to the connections already
 * there: a connection that has not sent its whole request yet (a slow
 * client, or a deliberate trickle) is closed to make room, the oldest
 * first, so a monitoring system that sends its request at once always
 * gets through, even from the address of the slow clients. */
struct http_admit_conn {
	uint64_t source; /* the peer's address as a key (http_source_key) */
	bool complete;	 /* its whole request head came (it is answered) */
};
/* http_admit's verdicts besides the index of a connection to close. */
#define HTTP_ADMIT_ACCEPT ((size_t)-1)
#define HTTP_ADMIT_REFUSE ((size_t)-2)

/* The verdict for a newcomer from `source`, with conns[0, n) open, oldest
 * first: HTTP_ADMIT_ACCEPT (there is room), the index of the connection
 * to close first (then accept), or HTTP_ADMIT_REFUSE (every connection
 * in the way sent its request: it is being answered and closes soon).
 * At the per-source cap the victim is that source's oldest half-sent
 * connection; at the total cap, that of the source holding the most
 * connections, else the oldest half-sent of any. */
size_t http_admit(const struct http_admit_conn *conns, size_t n,
		  uint64_t source, size_t conns_max, size_t per_source_max);

/* A key for the peer address addr[0, len) (the address bytes, without the
 * port): equal for one address, and different for others but by chance. */
uint64_t http_source_key(const uint8_t *addr, size_t len);

#endif /* BATON_HTTP_REQUEST_H */
