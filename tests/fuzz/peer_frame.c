/* The peer codec's framing and envelope decoder (peer_target.h): the
 * first byte selects the protocol version, the rest is what a connection
 * received, split into frames in that version's envelope with
 * baton_peer_split_framed() as the transport does (from 4 on, a frame
 * whose checksum differs ends the stream undecoded); each whole frame's
 * envelope is decoded. */
#include "fuzz.h"
#include "peer_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct baton_proto_version v = fuzz_peer_version(data[0]);
	const uint8_t *p = data + 1;
	size_t left = size - 1;
	for (;;) {
		size_t body_len = 0, whole = 0;
		int rv = baton_peer_split_framed(v, p, left, &body_len, &whole);
		FUZZ_CHECK(rv == 0 || rv == 1 || rv == BATON_ETOOBIG ||
				   (rv == BATON_ECORRUPT &&
				    baton_peer_proto_checksummed(v)),
			   "split returned %d", rv);
		if (rv != 1)
			break;
		FUZZ_CHECK(whole <= left &&
				   body_len + BATON_PEER_PREFIX_LEN <= whole &&
				   body_len <= BATON_PEER_FRAME_MAX,
			   "a frame of %zu bytes in %zu", body_len, left);
		fuzz_peer_envelope(v, p + BATON_PEER_PREFIX_LEN, body_len);
		p += whole;
		left -= whole;
	}
	return 0;
}
