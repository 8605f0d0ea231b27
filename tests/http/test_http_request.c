/* The --metrics endpoint's request judge (src/server/http_request.c):
 * what it serves, what it refuses and with which status, and that no
 * input makes it read outside what it was given. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "http_request.h"

/* The verdict on a whole head given as a string (copied to the heap, so a
 * sanitizer catches a read past it). */
static int judge(const char *text, struct http_request *req)
{
	size_t len = strlen(text);
	char *copy = malloc(len > 0 ? len : 1);
	cr_assert_not_null(copy);
	memcpy(copy, text, len);
	size_t head = http_head_end(copy, len);
	cr_assert_eq(head, len, "the whole text is one head: %s", text);
	int code = http_request_parse(copy, head, req);
	if (code == 200) {
		/* Point back into the caller's text, which outlives copy. */
		req->path = text + (req->path - copy);
		req->query = text + (req->query - copy);
	}
	free(copy);
	return code;
}

Test(http_request, a_get_gives_its_path_and_query)
{
	struct http_request r;
	const char *t = "GET /health?max_lag=5 HTTP/1.1\r\nHost: x\r\n\r\n";
	cr_assert_eq(judge(t, &r), 200);
	cr_assert_eq(r.path_len, 7);
	cr_assert(memcmp(r.path, "/health", 7) == 0);
	cr_assert_eq(r.query_len, 9);
	cr_assert(memcmp(r.query, "max_lag=5", 9) == 0);
	cr_assert_eq(judge("GET /metrics HTTP/1.0\n\n", &r), 200);
	cr_assert_eq(r.path_len, 8);
	cr_assert_eq(r.query_len, 0);
	cr_assert_eq(judge("GET /metrics HTTP/1.1\r\nContent-Length: 0 \r\n"
			   "\r\n",
			   &r),
		     200);
}

Test(http_request, the_head_ends_at_the_first_blank_line_only)
{
	cr_assert_eq(http_head_end("GET / HTTP/1.1\r\nHost: x\r\n", 25), 0);
	cr_assert_eq(http_head_end("GET / HTTP/1.1\r\n\r\nrest", 22), 18);
	cr_assert_eq(http_head_end("GET / HTTP/1.1\n\nrest", 20), 16);
	cr_assert_eq(http_head_end("", 0), 0);
	cr_assert_eq(http_head_end("\n", 1), 0);
}

Test(http_request, other_methods_are_405)
{
	struct http_request r;
	cr_assert_eq(judge("POST /metrics HTTP/1.1\r\n\r\n", &r), 405);
	cr_assert_eq(judge("HEAD /metrics HTTP/1.1\r\n\r\n", &r), 405);
	cr_assert_eq(judge("get /metrics HTTP/1.1\r\n\r\n", &r), 405);
	cr_assert_not_null(r.why);
}

Test(http_request, a_body_is_413)
{
	struct http_request r;
	cr_assert_eq(judge("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &r),
		     413);
	cr_assert_eq(judge("GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n"
			   "\r\n",
			   &r),
		     413);
}

Test(http_request, malformed_heads_are_400)
{
	static const char *const bad[] = {
		"\r\n\r\n",
		"GET\r\n\r\n",
		"GET /metrics\r\n\r\n",
		"GET  /metrics HTTP/1.1\r\n\r\n",
		"GET /metrics HTTP/2.0\r\n\r\n",
		"GET /metrics HTTP/1.1 extra\r\n\r\n",
		"GET /met rics HTTP/1.1\r\n\r\n",
		"G(T /metrics HTTP/1.1\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
		"GET /metrics HTTP/1.1\r\n: empty name\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nX: a\x01z\r\n\r\n",
		/* Only a path is a target here (the fuzz target found
		 * "GET ohealth" served as a path). */
		"GET metrics HTTP/1.1\r\n\r\n",
		"GET * HTTP/1.1\r\n\r\n",
		"GET http://x/metrics HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct http_request r;
		cr_assert_eq(judge(bad[i], &r), 400, "%zu: %s", i, bad[i]);
		cr_assert_not_null(r.why);
	}
}

Test(http_request, nul_bytes_are_never_token_characters)
{
	static const char head[] = "GET /metrics HTTP/1.1\r\nX\0Y: z\r\n\r\n";
	static const char method[] = "G\0T /metrics HTTP/1.1\r\n\r\n";
	struct http_request r;
	cr_assert_eq(http_request_parse(head, sizeof head - 1, &r), 400);
	cr_assert_eq(http_request_parse(method, sizeof method - 1, &r), 400);
}

Test(http_request, max_lag_is_a_number_or_refused)
{
	uint64_t v;
	cr_assert(http_query_max_lag("", 0, &v));
	cr_assert_eq(v, HTTP_MAX_LAG_DEFAULT);
	cr_assert(http_query_max_lag("x=1&max_lag=42", 14, &v));
	cr_assert_eq(v, 42);
	cr_assert(http_query_max_lag("max_lag=0", 9, &v));
	cr_assert_eq(v, 0);
	cr_assert_not(http_query_max_lag("max_lag=", 8, &v));
	cr_assert_not(http_query_max_lag("max_lag", 7, &v));
	cr_assert_not(http_query_max_lag("max_lag=-1", 10, &v));
	cr_assert_not(http_query_max_lag("max_lag=1x", 10, &v));
	cr_assert_not(http_query_max_lag("max_lagx=1", 10, &v));
	cr_assert_not(
		http_query_max_lag("max_lag=1234567890123456789", 27, &v));
}

/* Every prefix and a sweep of byte flips of a good head: each gets a
 * verdict in the allowed set, and the sanitizer sees no stray read. */
Test(http_request, arbitrary_bytes_get_a_verdict)
{
	const char *good = "GET /health?max_lag=3 HTTP/1.1\r\nHost: a\r\n"
			   "Accept: */*\r\n\r\n";
	size_t len = strlen(good);
	char *buf = malloc(len);
	cr_assert_not_null(buf);
	for (size_t flip = 0; flip < len; flip++) {
		for (int byte = 0; byte < 256; byte += 7) {
			memcpy(buf, good, len);
			buf[flip] = (char)byte;
			for (size_t n = 0; n <= len; n++) {
				size_t head = http_head_end(buf, n);
				cr_assert(head <= n);
				if (head == 0)
					continue;
				struct http_request r;
				int code = http_request_parse(buf, head, &r);
				cr_assert(code == 200 || code == 400 ||
						  code == 405 || code == 413,
					  "%d", code);
				if (code == 200) {
					cr_assert(r.path >= buf &&
						  r.path + r.path_len <=
							  buf + head);
					cr_assert(r.query >= buf &&
						  r.query + r.query_len <=
							  buf + head);
				}
			}
		}
	}
	free(buf);
}

/* ---- admission (http_admit) ---- */

#define CAP 4u
#define PER_SOURCE 3u

Test(http_admit, room_is_accepted)
{
	struct http_admit_conn c[] = {{1, false}, {2, true}};
	cr_assert_eq(http_admit(c, 0, 1, CAP, PER_SOURCE), HTTP_ADMIT_ACCEPT);
	cr_assert_eq(http_admit(c, 2, 1, CAP, PER_SOURCE), HTTP_ADMIT_ACCEPT);
}

Test(http_admit, a_full_port_closes_the_oldest_half_sent)
{
	/* Oldest first: the answered ones are never closed for a
	 * newcomer; the oldest half-sent of the biggest source is. */
	struct http_admit_conn c[] = {
		{7, true}, {1, false}, {7, false}, {7, false}};
	cr_assert_eq(http_admit(c, 4, 9, CAP, PER_SOURCE), 2);
	/* Equal sources: the oldest half-sent of the first biggest. */
	struct http_admit_conn d[] = {
		{1, false}, {2, false}, {1, false}, {2, false}};
	cr_assert_eq(http_admit(d, 4, 9, CAP, PER_SOURCE), 0);
	/* The biggest source has none half-sent: the oldest of any. */
	struct http_admit_conn e[] = {
		{5, true}, {5, true}, {1, false}, {2, true}};
	cr_assert_eq(http_admit(e, 4, 9, CAP, PER_SOURCE), 2);
}

Test(http_admit, a_full_port_of_answered_requests_refuses)
{
	struct http_admit_conn c[] = {
		{1, true}, {2, true}, {3, true}, {4, true}};
	cr_assert_eq(http_admit(c, 4, 9, CAP, PER_SOURCE), HTTP_ADMIT_REFUSE);
}

Test(http_admit, one_source_holds_at_most_its_share)
{
	/* Room on the port, but source 1 is at its cap: its own oldest
	 * half-sent goes, so a health check from the slow clients' address
	 * still gets in. */
	struct http_admit_conn c[] = {{1, true}, {1, false}, {1, false}};
	cr_assert_eq(http_admit(c, 3, 1, CAP, PER_SOURCE), 1);
	/* Another source is not held back by source 1. */
	cr_assert_eq(http_admit(c, 3, 2, CAP, PER_SOURCE), HTTP_ADMIT_ACCEPT);
	/* Source 1 at its cap with every request sent: refused. */
	struct http_admit_conn d[] = {{1, true}, {1, true}, {1, true}};
	cr_assert_eq(http_admit(d, 3, 1, CAP, PER_SOURCE), HTTP_ADMIT_REFUSE);
}

static size_t count_from(const struct http_admit_conn *c, size_t n,
			 uint64_t source, bool half_only)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += c[i].source == source && (!half_only || !c[i].complete);
	return k;
}

Test(http_admit, refuses_only_when_no_half_sent_request_is_in_the_way)
{
	/* Random mixes of sources and states: a newcomer is refused only
	 * when nothing half-sent could make room; only half-sent
	 * connections are closed, those of its own source when it is at
	 * its cap; the port and a source never exceed their caps. */
	uint64_t seed = 42;
	for (int round = 0; round < 5000; round++) {
		struct http_admit_conn c[CAP];
		seed = seed * 6364136223846793005u + 1442695040888963407u;
		size_t n = (size_t)(seed >> 60) % (CAP + 1);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005u +
			       1442695040888963407u;
			c[i] = (struct http_admit_conn){(seed >> 40) % 3,
							(seed >> 20) % 2 == 0};
		}
		uint64_t from = (seed >> 10) % 3;
		bool at_source_cap =
			count_from(c, n, from, false) >= PER_SOURCE;
		size_t half_any = 0;
		for (size_t i = 0; i < n; i++)
			half_any += !c[i].complete;
		size_t v = http_admit(c, n, from, CAP, PER_SOURCE);
		if (v == HTTP_ADMIT_REFUSE) {
			cr_assert(at_source_cap
					  ? count_from(c, n, from, true) == 0
					  : n == CAP && half_any == 0,
				  "round %d: refused with room to make", round);
		} else if (v == HTTP_ADMIT_ACCEPT) {
			cr_assert(n < CAP && !at_source_cap, "round %d", round);
		} else {
			cr_assert_lt(v, n);
			cr_assert_not(c[v].complete, "round %d", round);
			cr_assert(n == CAP || at_source_cap, "round %d", round);
			if (at_source_cap)
				cr_assert_eq(c[v].source, from, "round %d",
					     round);
		}
	}
}

Test(http_admit, source_keys)
{
	uint8_t a[4] = {127, 0, 0, 1}, b[4] = {127, 0, 0, 2};
	cr_assert_eq(http_source_key(a, 4), http_source_key(a, 4));
	cr_assert_neq(http_source_key(a, 4), http_source_key(b, 4));
}
