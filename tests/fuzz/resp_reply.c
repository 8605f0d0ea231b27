/*
 * The RESP reply scanner (src/wire/resp_reply.c), which a node proxying a
 * client's commands to another cluster's node runs over that node's
 * replies. The input is scanned as a stream of replies twice with the same
 * small limits (so that every limit is within reach): all at once, and fed
 * in pieces of sizes drawn from the input as a socket would deliver them.
 * Both must find the same replies and end the same way (waiting for more,
 * or the same error, with a message): where the bytes happen to be cut
 * must never matter. Each reply found, copied alone into a buffer of its
 * exact size, must scan to its own length, and each of its shorter
 * prefixes must ask for more.
 */
#include <stdbool.h>
#include <string.h>

#include "baton/errors.h"
#include "fuzz.h"
#include "resp.h"

static const struct resp_reply_limits limits = {
	.reply_bytes_max = 2048,
	.line_bytes_max = 64,
	.depth_max = 8,
};

/* At most this many replies are compared (the input is at most 4 KiB, and
 * a reply takes at least 3 bytes). */
#define REPLIES_MAX 2048u

struct outcome {
	size_t lens[REPLIES_MAX];
	size_t n;
	int rv; /* RESP_NEED_MORE or the error */
};

static void check_end(const struct resp_reply_scanner *sc, int rv)
{
	FUZZ_CHECK(rv == RESP_NEED_MORE || rv == BATON_ECORRUPT ||
			   rv == BATON_ETOOBIG,
		   "returned %d", rv);
	if (rv != RESP_NEED_MORE)
		FUZZ_CHECK(resp_reply_scanner_error(sc)[0] != '\0',
			   "error %d without a message", rv);
}

/* Pieces: byte i of the input (cycled) gives the size of piece i, 1..16. */
static void scan_stream(const uint8_t *data, size_t size, bool pieces,
			struct outcome *o)
{
	struct resp_reply_scanner sc;
	resp_reply_scanner_init(&sc, &limits);
	size_t start = 0, have = pieces ? 0 : size, piece = 0;
	o->n = 0;
	for (;;) {
		size_t n = 0;
		int rv = resp_reply_scan(&sc, data + start, have - start, &n);
		if (rv == RESP_OK) {
			FUZZ_CHECK(n >= 3 && n <= have - start,
				   "a reply of %zu bytes in %zu", n,
				   have - start);
			FUZZ_CHECK(o->n < REPLIES_MAX, "too many replies");
			o->lens[o->n++] = n;
			start += n;
			continue;
		}
		if (rv == RESP_NEED_MORE && have < size) {
			size_t step = 1 + data[piece++ % size] % 16;
			have = have + step < size ? have + step : size;
			continue;
		}
		check_end(&sc, rv);
		/* An error sticks. */
		if (rv != RESP_NEED_MORE)
			FUZZ_CHECK(resp_reply_scan(&sc, data + start,
						   have - start, &n) == rv,
				   "error %d did not stick", rv);
		o->rv = rv;
		return;
	}
}

/* A reply alone, in a buffer of its exact size. */
static void check_alone(const uint8_t *reply, size_t len)
{
	uint8_t *copy = malloc(len);
	FUZZ_CHECK(copy != NULL, "out of memory");
	memcpy(copy, reply, len);
	struct resp_reply_scanner sc;
	resp_reply_scanner_init(&sc, &limits);
	size_t n = 0;
	FUZZ_CHECK(resp_reply_scan(&sc, copy, len, &n) == RESP_OK && n == len,
		   "a reply of %zu bytes scanned alone", len);
	/* Every shorter prefix, fresh (small replies: it is quadratic). */
	for (size_t cut = 0; len <= 256 && cut < len; cut++) {
		resp_reply_scanner_init(&sc, &limits);
		FUZZ_CHECK(resp_reply_scan(&sc, copy, cut, &n) ==
				   RESP_NEED_MORE,
			   "a prefix of %zu of a %zu-byte reply", cut, len);
	}
	free(copy);
}

static struct outcome whole, pieces;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	scan_stream(data, size, false, &whole);
	scan_stream(data, size, true, &pieces);
	FUZZ_CHECK(whole.n == pieces.n, "%zu replies at once, %zu in pieces",
		   whole.n, pieces.n);
	FUZZ_CHECK(whole.rv == pieces.rv, "ended %d at once, %d in pieces",
		   whole.rv, pieces.rv);
	size_t at = 0;
	for (size_t i = 0; i < whole.n; i++) {
		FUZZ_CHECK(whole.lens[i] == pieces.lens[i],
			   "reply %zu: %zu bytes at once, %zu in pieces", i,
			   whole.lens[i], pieces.lens[i]);
		check_alone(data + at, whole.lens[i]);
		at += whole.lens[i];
	}
	return 0;
}
