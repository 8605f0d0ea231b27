/*
 * Shared by the files of the peer codec (peer_common.c, peer_encode.c,
 * peer_decode.c, peer_decode_versions.c); not part of its interface, which
 * is peer.h.
 */
#ifndef BATON_WIRE_PEER_INTERNAL_H
#define BATON_WIRE_PEER_INTERNAL_H

#include "peer.h"
#include "peer.pb-c.h"

/* The first protocol whose Append and AppendResult carry clock samples
 * (struct baton_clock_sample): below it they are neither sent nor read,
 * so the frames of 1 to 3 stay what those releases send. */
#define BATON_PEER_PROTO_CLOCK 4u

/* What a struct baton_msg must satisfy to travel. The encoder refuses to
 * send what the decoder would refuse to accept, so both call this. Returns
 * 0, BATON_ETOOBIG or BATON_ECORRUPT, with *why set. */
int baton__peer_check_msg(const struct baton_msg *m, const char **why);

/* ---- decoders shared by peer_decode.c and peer_decode_versions.c ----------
 * Each fills *out from what protobuf-c unpacked and returns 0, or an error
 * code with *why set to a static text. */

/* A missing profile reads as zeros (proto3: absent means default). */
int baton__peer_profile_out(const Batonpeer__Profile *p,
			    struct baton_profile *out, const char **why);
/* A string within max bytes (NULL reads as ""); `what` names the excess. */
int baton__peer_string_out(const char *s, size_t max, const char **out,
			   const char *what, const char **why);
/* A version state; absent reads as the initial state, an absent
 * downgrade as none in progress. Checked here: the shape, and a present
 * downgrade's rules (naming the one broken); the caller then checks
 * baton_version_state_valid(). */
int baton__peer_versions_out(const Batonpeer__VersionState *v,
			     struct baton_version_state *out, const char **why);
/* A bytes field of fixed length (a nonce, a MAC, a digest): absent (length
 * 0) gives *present false; exactly `len` bytes are copied to out; any
 * other length is BATON_ECORRUPT with *why = what. */
int baton__peer_fixed_out(ProtobufCBinaryData in, size_t len, uint8_t *out,
			  bool *present, const char *what, const char **why);
/* The frozen handshake frames. */
int baton__peer_handshake_out(const Batonpeer__Handshake *h,
			      struct baton_peer_handshake *out,
			      const char **why);
int baton__peer_handshake_reply_out(const Batonpeer__HandshakeReply *r,
				    struct baton_peer_handshake_reply *out,
				    const char **why);
int baton__peer_handshake_auth_out(const Batonpeer__HandshakeAuth *a,
				   struct baton_peer_handshake_auth *out,
				   const char **why);

#endif /* BATON_WIRE_PEER_INTERNAL_H */
