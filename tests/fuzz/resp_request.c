/*
 * The RESP request parser (src/wire/resp.c). The input is what a client
 * sent. It is parsed twice with the same small limits (so that every limit
 * is within reach): fed at once, and fed in pieces of sizes drawn from the
 * input, with resp_parser_consumed() after every command as the server
 * calls it. Both must return the same commands and end the same way
 * (waiting for more, or the same protocol error): where the bytes happen to
 * be cut must never matter. Then every command, written back as a
 * multibulk request with the reply writers, must parse to itself, and
 * resp_parse_int() must read every argument as strtoll() does under
 * Redis's strict syntax.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "baton/errors.h"
#include "fuzz.h"
#include "resp.h"

static const struct resp_limits limits = {
	.args_max = 64,
	.bulk_bytes_max = 1024,
	.inline_bytes_max = 512,
	.query_bytes_max = 1u << 20,
};

/* The commands of one parse, flattened: for each, argc, then per argument
 * its length and bytes. */
struct outcome {
	struct baton_buf commands;
	uint32_t n;
	int rv; /* RESP_NEED_MORE or the error */
	enum resp_protocol_error perr;
};

static void put(struct baton_buf *b, const void *p, size_t n)
{
	int rv = baton_buf_append(b, p, n);
	FUZZ_CHECK(rv == 0, "out of memory");
}

/* Redis's strict integer syntax ("0", or an optional '-' and digits
 * without a leading zero) and strtoll()'s range. */
static bool reference_int(const uint8_t *s, size_t len, int64_t *out)
{
	char text[32];
	if (len == 0 || len >= sizeof text || memchr(s, '\0', len) != NULL)
		return false;
	memcpy(text, s, len);
	text[len] = '\0';
	if (strcmp(text, "0") != 0) {
		size_t i = text[0] == '-';
		if (text[i] < '1' || text[i] > '9')
			return false;
		for (; i < len; i++)
			if (text[i] < '0' || text[i] > '9')
				return false;
	}
	errno = 0;
	long long v = strtoll(text, NULL, 10);
	if (errno == ERANGE)
		return false;
	*out = v;
	return true;
}

static void check_int(const uint8_t *s, size_t len)
{
	int64_t got = 0, want = 0;
	bool ok = resp_parse_int(s, len, &got);
	bool want_ok = reference_int(s, len, &want);
	FUZZ_CHECK(ok == want_ok && (!ok || got == want),
		   "resp_parse_int(\"%.*s\"): %d %lld, strtoll: %d %lld",
		   (int)len, (const char *)s, ok, (long long)got, want_ok,
		   (long long)want);
}

static void record(struct outcome *o, const struct resp_command *cmd)
{
	FUZZ_CHECK(cmd->argc >= 0 && (uint32_t)cmd->argc <= limits.args_max,
		   "argc %d", cmd->argc);
	size_t argc = (size_t)cmd->argc;
	put(&o->commands, &argc, sizeof argc);
	for (int i = 0; i < cmd->argc; i++) {
		FUZZ_CHECK(cmd->argv[i] != NULL &&
				   cmd->lens[i] <= limits.bulk_bytes_max,
			   "argument %d: %zu bytes", i, cmd->lens[i]);
		put(&o->commands, &cmd->lens[i], sizeof cmd->lens[i]);
		put(&o->commands, cmd->argv[i], cmd->lens[i]);
		check_int(cmd->argv[i], cmd->lens[i]);
	}
	o->n++;
}

/* Take every command the parser has; false once it failed. */
static bool drain(struct resp_parser *p, struct outcome *o, bool consume)
{
	for (;;) {
		struct resp_command cmd;
		int rv = resp_parser_next(p, &cmd);
		if (rv != RESP_OK) {
			FUZZ_CHECK(rv == RESP_NEED_MORE ||
					   rv == BATON_ECORRUPT ||
					   rv == BATON_ETOOBIG,
				   "next returned %d", rv);
			o->rv = rv;
			o->perr = resp_parser_error_kind(p);
			FUZZ_CHECK((rv == RESP_NEED_MORE) ==
					   (o->perr == RESP_PERR_NONE),
				   "error %d of kind %d", rv, o->perr);
			return rv == RESP_NEED_MORE;
		}
		record(o, &cmd);
		if (consume)
			resp_parser_consumed(p);
	}
}

static void parse_whole(const uint8_t *data, size_t size, struct outcome *o)
{
	struct resp_parser p;
	resp_parser_init(&p, &limits);
	int rv = resp_parser_feed(&p, data, size);
	FUZZ_CHECK(rv == 0, "feed returned %d", rv);
	drain(&p, o, false);
	resp_parser_free(&p);
}

/* Pieces of 1 to 16 bytes, their sizes taken from the input itself. */
static void parse_pieces(const uint8_t *data, size_t size, struct outcome *o)
{
	struct resp_parser p;
	resp_parser_init(&p, &limits);
	o->rv = RESP_NEED_MORE;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 16777619u;
	for (size_t off = 0; off < size;) {
		h = h * 1103515245u + 12345u;
		size_t n = 1 + (h >> 16) % 16u;
		if (n > size - off)
			n = size - off;
		int rv = resp_parser_feed(&p, data + off, n);
		FUZZ_CHECK(rv == 0, "feed returned %d", rv);
		off += n;
		if (!drain(&p, o, true))
			break;
	}
	resp_parser_free(&p);
}

/* Every command written back as multibulk parses to itself. */
static void round_trip(const struct outcome *o)
{
	const uint8_t *c = o->commands.data;
	for (uint32_t k = 0; k < o->n; k++) {
		size_t argc;
		memcpy(&argc, c, sizeof argc);
		const uint8_t *args = c + sizeof argc;
		struct baton_buf req;
		baton_buf_init(&req);
		FUZZ_CHECK(resp_array(&req, argc) == 0, "out of memory");
		const uint8_t *a = args;
		for (size_t i = 0; i < argc; i++) {
			size_t len;
			memcpy(&len, a, sizeof len);
			FUZZ_CHECK(resp_bulk(&req, a + sizeof len, len) == 0,
				   "out of memory");
			a += sizeof len + len;
		}
		struct outcome again = {.rv = 0};
		baton_buf_init(&again.commands);
		parse_whole(req.data, req.len, &again);
		size_t n = (size_t)(a - c);
		FUZZ_CHECK(again.rv == RESP_NEED_MORE && again.n == 1,
			   "command %u with %zu arguments parses again to %u "
			   "commands, ending in %d",
			   k, argc, again.n, again.rv);
		FUZZ_CHECK(again.commands.len == n &&
				   memcmp(again.commands.data, c, n) == 0,
			   "command %u changed in the round trip", k);
		baton_buf_free(&again.commands);
		baton_buf_free(&req);
		c += n;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole = {.rv = 0}, pieces = {.rv = 0};
	baton_buf_init(&whole.commands);
	baton_buf_init(&pieces.commands);
	parse_whole(data, size, &whole);
	parse_pieces(data, size, &pieces);
	FUZZ_CHECK(whole.n == pieces.n && whole.rv == pieces.rv &&
			   whole.perr == pieces.perr,
		   "fed at once: %u commands, then %d (kind %d); in pieces: "
		   "%u commands, then %d (kind %d)",
		   whole.n, whole.rv, whole.perr, pieces.n, pieces.rv,
		   pieces.perr);
	FUZZ_CHECK(whole.commands.len == pieces.commands.len &&
			   (whole.commands.len == 0 ||
			    memcmp(whole.commands.data, pieces.commands.data,
				   whole.commands.len) == 0),
		   "the commands differ with where the bytes were cut");
	round_trip(&whole);
	baton_buf_free(&whole.commands);
	baton_buf_free(&pieces.commands);
	return 0;
}
