/*
 * Shared by the peer codec tests: sample frames of every kind, field by
 * field comparison of decoded frames, and a re-encoder for any decoded
 * frame.
 */
#ifndef BATON_TESTS_PEER_FIXTURES_H
#define BATON_TESTS_PEER_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/buf.h"
#include "peer.h"

/* Peer protocol versions: the samples are encoded in version 1. */
#define FIX_P1 ((struct baton_proto_version){1})
#define FIX_P2 ((struct baton_proto_version){2})
#define FIX_P3 ((struct baton_proto_version){3})
#define FIX_P4 ((struct baton_proto_version){4})

struct baton_profile fix_profile(uint16_t major, uint16_t minor, uint16_t patch,
				 uint32_t proto_min, uint32_t proto_max,
				 uint32_t machine_max);

/* A version state with n rows (n <= BATON_MAX_MEMBERS), all fields set. */
void fix_versions(uint32_t n, struct baton_version_state *out);

/* Give s (valid, its floor 0.0.0 or above 0.9.7) a downgrade in progress
 * as the entry enabling it leaves the state: the floor lowered to the
 * target 0.9.7 (a floor of 0.0.0 recorded as 1.0.0), the machine version
 * lowered by one if it was above 1, since 4321. */
void fix_downgrade(struct baton_version_state *s);

/* Raft messages of every type and shape; the data they point to is static. */
#define FIX_N_RAFT 19u
void fix_raft(uint32_t i, struct baton_msg *m);

/* Every sample frame (Raft ones included), encoded: appends sample i to
 * out. FIX_N_FRAMES samples. */
#define FIX_N_FRAMES (FIX_N_RAFT + 12u)
void fix_encode_sample(uint32_t i, struct baton_buf *out);

/* A cluster view with leader 1003 and fix_versions(n). */
void fix_view(uint32_t n, struct baton_peer_cluster_view *out);

/* Equal field by field; on a difference, *diff names the field. */
bool fix_versions_eq(const struct baton_version_state *a,
		     const struct baton_version_state *b, const char **diff);
bool fix_msg_eq(const struct baton_msg *a, const struct baton_msg *b,
		const char **diff);
bool fix_frame_eq(const struct baton_peer_frame *a,
		  const struct baton_peer_frame *b, const char **diff);

/* Encode a decoded frame again (any known kind), in FIX_P1. */
int fix_encode_frame(const struct baton_peer_frame *f, struct baton_buf *out);

/* baton_peer_encode_forward() in FIX_P1, from separate arguments. */
int fix_encode_forward(uint64_t request_id, int argc,
		       const uint8_t *const *argv, const size_t *lens,
		       struct baton_buf *out);

/* Split and decode (in FIX_P1) the single whole frame in (data, len): it
 * must be exactly one frame. Returns what baton_peer_decode returns, or -1
 * if the bytes are not exactly one frame. */
int fix_decode_one(const uint8_t *data, size_t len, struct baton_peer_frame *f);

/* A minimal protobuf writer, to craft envelopes the encoder would refuse
 * to make (malformed, or from a newer release). Appends to w. */
void pw_varint(struct baton_buf *w, uint64_t v);
void pw_uint(struct baton_buf *w, uint32_t field, uint64_t v);
void pw_bytes(struct baton_buf *w, uint32_t field, const void *p, size_t n);
void pw_msg(struct baton_buf *w, uint32_t field, const struct baton_buf *m);

#endif
