/*
 * The peer codec's fuzz targets share this (peer_target.c): every target
 * hands an envelope to fuzz_peer_envelope(), which decodes it as a node
 * does and checks the round trip of whatever decoded. The message targets
 * wrap their input in the envelope fields that lead to their message, so
 * that libFuzzer spends its time inside that message's decoder.
 */
#ifndef BATON_TESTS_FUZZ_PEER_TARGET_H
#define BATON_TESTS_FUZZ_PEER_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "peer.h"

/* Field numbers of Envelope's bodies (proto/peer.proto). */
enum {
	FUZZ_ENV_HANDSHAKE = 1,
	FUZZ_ENV_HANDSHAKE_REPLY = 2,
	FUZZ_ENV_RAFT = 3,
	FUZZ_ENV_FORWARD = 4,
	FUZZ_ENV_FORWARD_REPLY = 5,
	FUZZ_ENV_JOIN = 6,
	FUZZ_ENV_JOIN_REPLY = 7,
};

/* The peer protocol version a selector byte picks: 1, 2 or 3, or 0 (one
 * byte in four), a version no release speaks, which must be refused. */
struct baton_proto_version fuzz_peer_version(uint8_t selector);

/* Decode the envelope (body, len) of one frame in version v, and with the
 * decoder of a connection's first frame; check both decoders' contracts,
 * that they agree on the handshake frames, and that whatever decoded
 * encodes again (in v), decodes to the same frame and encodes to the same
 * bytes. Aborts on a broken property. */
void fuzz_peer_envelope(struct baton_proto_version v, const uint8_t *body,
			size_t len);

/* The input of a message target: its first byte selects the version, the
 * rest is the message, wrapped in the envelope field `field`; then
 * fuzz_peer_envelope(). */
int fuzz_peer_message(uint32_t field, const uint8_t *data, size_t size);

#endif /* BATON_TESTS_FUZZ_PEER_TARGET_H */
