/* The round trip of the peer codec's fuzz targets (peer_target.h). */
#include <stdbool.h>
#include <string.h>

#include "baton/buf.h"
#include "fuzz.h"
#include "peer_fixtures.h"
#include "peer_target.h"

struct baton_proto_version fuzz_peer_version(uint8_t selector)
{
	/* 0..7: every version of the table (4 with its checksums) and
	 * some this codec does not implement. */
	return (struct baton_proto_version){selector & 7u};
}

/* What every decode returns: 0 or an error that says why, holding
 * nothing. */
static void check_contract(int rv, const struct baton_peer_frame *f,
			   bool version_known)
{
	if (rv == 0) {
		FUZZ_CHECK(f->kind <= BATON_PEER_JOIN_REPLY, "kind %u",
			   f->kind);
		return;
	}
	FUZZ_CHECK(rv == BATON_ECORRUPT || rv == BATON_ETOOBIG ||
			   rv == BATON_ENOMEM ||
			   (rv == BATON_EVERSION && !version_known),
		   "decode returned %d", rv);
	FUZZ_CHECK(f->why != NULL && f->why[0] != '\0',
		   "error %d without a reason", rv);
	FUZZ_CHECK(f->owned_arena == NULL && f->owned_arrays == NULL,
		   "a failed decode holds memory (%s)", f->why);
}

static bool frozen(uint32_t kind)
{
	return kind == BATON_PEER_HANDSHAKE ||
	       kind == BATON_PEER_HANDSHAKE_REPLY;
}

static int encode(struct baton_proto_version v,
		  const struct baton_peer_frame *f, struct baton_buf *out)
{
	switch (f->kind) {
	case BATON_PEER_HANDSHAKE:
		return baton_peer_encode_handshake(&f->handshake, out);
	case BATON_PEER_HANDSHAKE_REPLY:
		return baton_peer_encode_handshake_reply(&f->handshake_reply,
							 out);
	default:
		return baton_peer_encode_frame(v, f, out);
	}
}

/* The envelope of the one whole frame in b, framed in version v (0: a
 * frozen handshake frame): its checksum, from 4 on, must check. */
static void unframe(struct baton_proto_version v, const struct baton_buf *b,
		    const uint8_t **body, size_t *len)
{
	size_t n = 0, whole = 0;
	int rv = baton_peer_split_framed(v, b->data, b->len, &n, &whole);
	FUZZ_CHECK(rv == 1 && whole == b->len,
		   "an encoded frame of %zu bytes does not split as one (%d)",
		   b->len, rv);
	*body = b->data + BATON_PEER_PREFIX_LEN;
	*len = n;
}

/* f decoded in v: it encodes, decodes the same, and encodes the same. */
static void round_trip(struct baton_proto_version v,
		       const struct baton_peer_frame *f)
{
	if (f->kind == BATON_PEER_UNKNOWN)
		return; /* nothing this release could send */
	struct baton_buf first, second;
	baton_buf_init(&first);
	baton_buf_init(&second);
	int rv = encode(v, f, &first);
	FUZZ_CHECK(rv == 0,
		   "a frame of kind %u decoded in version %u does not encode "
		   "again: %d",
		   f->kind, v.value, rv);
	const uint8_t *body = NULL;
	size_t len = 0;
	unframe(frozen(f->kind) ? (struct baton_proto_version){0} : v, &first,
		&body, &len);
	struct baton_peer_frame again;
	rv = frozen(f->kind) ? baton_peer_decode_handshake(body, len, &again)
			     : baton_peer_decode(v, body, len, &again);
	FUZZ_CHECK(rv == 0,
		   "a re-encoded frame of kind %u does not decode "
		   "in version %u: %d (%s)",
		   f->kind, v.value, rv, again.why);
	const char *diff = "";
	FUZZ_CHECK(fix_frame_eq(f, &again, &diff),
		   "kind %u in version %u: the round trip changed %s", f->kind,
		   v.value, diff);
	rv = encode(v, &again, &second);
	FUZZ_CHECK(rv == 0 && second.len == first.len &&
			   memcmp(second.data, first.data, first.len) == 0,
		   "kind %u in version %u: encoding is not stable", f->kind,
		   v.value);
	baton_peer_frame_free(&again);
	baton_buf_free(&first);
	baton_buf_free(&second);
}

void fuzz_peer_envelope(struct baton_proto_version v, const uint8_t *body,
			size_t len)
{
	bool known = baton_peer_proto_supported(v);
	struct baton_peer_frame f, first;
	int rv = baton_peer_decode(v, body, len, &f);
	check_contract(rv, &f, known);
	if (!known)
		FUZZ_CHECK(rv == BATON_EVERSION,
			   "version %u decoded as %d, not refused", v.value,
			   rv);
	int frv = baton_peer_decode_handshake(body, len, &first);
	check_contract(frv, &first, true);
	if (frv == 0) {
		FUZZ_CHECK(frozen(first.kind), "a first frame of kind %u",
			   first.kind);
		round_trip(v, &first);
	}
	if (rv == 0 && frozen(f.kind)) {
		/* The frozen frames read the same in every version. */
		const char *diff = "";
		FUZZ_CHECK(frv == 0 && fix_frame_eq(&f, &first, &diff),
			   "a handshake frame decodes differently as a "
			   "first frame (%d, %s)",
			   frv, diff);
	}
	if (rv == 0 && !frozen(f.kind))
		round_trip(v, &f);
	baton_peer_frame_free(&f);
	baton_peer_frame_free(&first);
}

int fuzz_peer_message(uint32_t field, const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct baton_buf env;
	baton_buf_init(&env);
	pw_bytes(&env, field, data + 1, size - 1);
	fuzz_peer_envelope(fuzz_peer_version(data[0]), env.data, env.len);
	baton_buf_free(&env);
	return 0;
}
