/* The metrics port's request heads (src/server/http_request.c), which
 * anyone who reaches --metrics may send. Checked besides crashes: the head
 * ends within the input; the verdict is one http.c knows how to answer; a
 * served request's path and query lie inside the head, the path starting
 * with '/'; a refusal says why; and the query's max_lag parse never
 * overruns. The input is fed whole and also byte by byte, as a slow
 * client would send it, and both must agree on where the head ends.
 * Seeds: a few GETs and refusals (make_seeds.c). */
#include <string.h>

#include "fuzz.h"
#include "http_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	size_t end = http_head_end(in, size);
	FUZZ_CHECK(end <= size, "head of %zu in %zu bytes", end, size);
	if (end == 0)
		return 0;
	/* A prefix that ends before the head cannot hold a head. */
	FUZZ_CHECK(http_head_end(in, end - 1) == 0,
		   "a head ends before its blank line (%zu)", end);
	struct http_request r;
	memset(&r, 0, sizeof r);
	int verdict = http_request_parse(in, end, &r);
	FUZZ_CHECK(verdict == 200 || verdict == 400 || verdict == 405 ||
			   verdict == 413,
		   "verdict %d", verdict);
	if (verdict != 200) {
		FUZZ_CHECK(r.why != NULL && r.why[0] != '\0', "no reason");
		return 0;
	}
	FUZZ_CHECK(r.path >= in && r.path + r.path_len <= in + end,
		   "path outside the head");
	FUZZ_CHECK(r.path_len >= 1 && r.path[0] == '/', "path not absolute");
	if (r.query != NULL) {
		FUZZ_CHECK(r.query >= in && r.query + r.query_len <= in + end,
			   "query outside the head");
		uint64_t lag = 0;
		(void)http_query_max_lag(r.query, r.query_len, &lag);
	}
	return 0;
}
