/*
 * Peer authentication on the wire (docs/peer-protocol.md, "Peer
 * authentication"): golden bytes of the appended fields and the new
 * HandshakeAuth frame, which the handshake decoder reads before any
 * version exists, and the lengths the decoder insists on. Never edit a
 * vector; add new ones.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "baton/buf.h"
#include "peer_fixtures.h"

/* golden_handshake of test_peer_golden.c with Handshake.auth_nonce (field
 * 5): the bytes 0x00..0x1f. */
static const uint8_t golden_handshake_nonce[] = {
	0x4b, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x0a, 0x04, 0x70, 0x72, 0x6f, 0x64,
	0x10, 0x03, 0x1a, 0x0e, 0x0a, 0x06, 0x08, 0x01, 0x10, 0x04, 0x18, 0x02,
	0x10, 0x02, 0x18, 0x05, 0x20, 0x03, 0x22, 0x0d, 0x31, 0x30, 0x2e, 0x30,
	0x2e, 0x30, 0x2e, 0x33, 0x3a, 0x37, 0x30, 0x30, 0x31, 0x2a, 0x20, 0x00,
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
	0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
	0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
};
/* golden_handshake_reply with self.auth_nonce 0x40..0x5f and auth_mac
 * (field 6) 0x80..0x9f. */
static const uint8_t golden_handshake_reply_proof[] = {
	0x71, 0x00, 0x00, 0x00, 0x12, 0x6f, 0x08, 0x01, 0x10, 0x04, 0x22, 0x47,
	0x0a, 0x04, 0x70, 0x72, 0x6f, 0x64, 0x10, 0x01, 0x1a, 0x0c, 0x0a, 0x04,
	0x08, 0x01, 0x10, 0x05, 0x10, 0x03, 0x18, 0x06, 0x20, 0x04, 0x22, 0x0d,
	0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x37, 0x30, 0x30,
	0x31, 0x2a, 0x20, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
	0x49, 0x4a, 0x4b, 0x4c, 0x4d, 0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53, 0x54,
	0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f, 0x32,
	0x20, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a,
	0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96,
	0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
};
/* Envelope field 8: HandshakeAuth{mac: 0xc0..0xdf}. */
static const uint8_t golden_handshake_auth[] = {
	0x24, 0x00, 0x00, 0x00, 0x42, 0x22, 0x0a, 0x20, 0xc0, 0xc1,
	0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb,
	0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd5,
	0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf,
};
/* golden_forward (protocol 1) with Forward.client_auth (field 6)
 * 0x80..0x9f. */
static const uint8_t golden_forward_client_auth[] = {
	0x30, 0x00, 0x00, 0x00, 0x22, 0x2e, 0x08, 0x2a, 0x12, 0x03, 0x53,
	0x45, 0x54, 0x12, 0x01, 0x6b, 0x12, 0x00, 0x32, 0x20, 0x80, 0x81,
	0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c,
	0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97,
	0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
};

static void fill(uint8_t *p, size_t n, uint8_t first)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(first + i);
}

static void check(const uint8_t *golden, size_t len,
		  const struct baton_peer_frame *want, const char *name)
{
	struct baton_peer_frame f;
	int rv = fix_decode_one(golden, len, &f);
	cr_assert_eq(rv, 0, "%s: %d (%s)", name, rv, rv != 0 ? f.why : "");
	const char *diff = NULL;
	cr_assert(fix_frame_eq(want, &f, &diff), "%s differs in %s", name,
		  diff);
	baton_peer_frame_free(&f);
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(fix_encode_frame(want, &b), 0, "%s", name);
	cr_assert_eq(b.len, len, "%s: %zu bytes, golden %zu", name, b.len, len);
	cr_assert_eq(memcmp(b.data, golden, len), 0, "%s: bytes differ", name);
	baton_buf_free(&b);
}

#define CHECK(golden, want) check(golden, sizeof golden, want, #golden)

static struct baton_peer_handshake dialler(void)
{
	struct baton_peer_handshake h = {.cluster_id = "prod",
					 .node_id = 3,
					 .profile =
						 fix_profile(1, 4, 2, 2, 5, 3),
					 .peer_addr = "10.0.0.3:7001",
					 .has_auth = true};
	fill(h.auth_nonce, sizeof h.auth_nonce, 0x00);
	return h;
}

Test(peer_auth, golden_frames)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_HANDSHAKE};
	w.handshake = dialler();
	CHECK(golden_handshake_nonce, &w);

	w.kind = BATON_PEER_HANDSHAKE_REPLY;
	w.handshake_reply = (struct baton_peer_handshake_reply){
		.accepted = true,
		.proto = {4},
		.reason = "",
		.self = {.cluster_id = "prod",
			 .node_id = 1,
			 .profile = fix_profile(1, 5, 0, 3, 6, 4),
			 .peer_addr = "10.0.0.1:7001",
			 .has_auth = true},
		.has_auth_mac = true};
	fill(w.handshake_reply.self.auth_nonce, BATON_PEER_AUTH_NONCE_LEN,
	     0x40);
	fill(w.handshake_reply.auth_mac, BATON_PEER_AUTH_MAC_LEN, 0x80);
	CHECK(golden_handshake_reply_proof, &w);

	w.kind = BATON_PEER_HANDSHAKE_AUTH;
	fill(w.handshake_auth.mac, BATON_PEER_AUTH_MAC_LEN, 0xc0);
	CHECK(golden_handshake_auth, &w);

	const uint8_t *argv[3] = {(const uint8_t *)"SET", (const uint8_t *)"k",
				  (const uint8_t *)""};
	const size_t lens[3] = {3, 1, 0};
	struct baton_peer_command c = {3, argv, lens};
	w.kind = BATON_PEER_FORWARD;
	w.forward = (struct baton_peer_forward){.request_id = 42,
						.n_commands = 1,
						.commands = &c,
						.has_client_auth = true};
	fill(w.forward.client_auth, BATON_PEER_CLIENT_AUTH_LEN, 0x80);
	CHECK(golden_forward_client_auth, &w);
}

/* The handshake decoder, which reads a connection's frames before its
 * handshake completes, takes the dialler's proof as well. */
Test(peer_auth, handshake_decoder_reads_the_proof)
{
	struct baton_peer_frame f;
	int rv = baton_peer_decode_handshake(golden_handshake_auth + 4,
					     sizeof golden_handshake_auth - 4,
					     &f);
	cr_assert_eq(rv, 0, "%s", f.why);
	cr_assert_eq(f.kind, BATON_PEER_HANDSHAKE_AUTH);
	cr_assert_eq(f.handshake_auth.mac[0], 0xc0);
	cr_assert_eq(f.handshake_auth.mac[31], 0xdf);
	baton_peer_frame_free(&f);
}

/* A nonce, a MAC or a client proof of another length than 32 is garbage,
 * and so is a HandshakeAuth without its MAC. */
Test(peer_auth, wrong_lengths_are_corrupt)
{
	uint8_t bytes[40] = {0};
	struct {
		uint32_t envelope_field, inner_field;
		size_t len;
		const char *why;
	} cases[] = {
		{1, 5, 31, "authentication nonce not 32 bytes"},
		{1, 5, 33, "authentication nonce not 32 bytes"},
		{2, 6, 16, "authentication MAC not 32 bytes"},
		{8, 1, 31, "authentication MAC not 32 bytes"},
		{8, 1, 0, "authentication without a MAC"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct baton_buf inner, env;
		baton_buf_init(&inner);
		baton_buf_init(&env);
		if (cases[i].envelope_field == 2) /* a refusal: no version */
			pw_uint(&inner, 1, 0);
		pw_bytes(&inner, cases[i].inner_field, bytes, cases[i].len);
		pw_msg(&env, cases[i].envelope_field, &inner);
		struct baton_peer_frame f;
		int rv = baton_peer_decode_handshake(env.data, env.len, &f);
		cr_assert_eq(rv, BATON_ECORRUPT, "case %zu: %d", i, rv);
		cr_assert_str_eq(f.why, cases[i].why, "case %zu", i);
		baton_buf_free(&inner);
		baton_buf_free(&env);
	}
	/* A forward's client proof, likewise. */
	struct baton_buf cmd, fw, env;
	baton_buf_init(&cmd);
	baton_buf_init(&fw);
	baton_buf_init(&env);
	pw_uint(&fw, 1, 7);
	pw_bytes(&fw, 2, "GET", 3);
	pw_bytes(&fw, 6, bytes, 20);
	pw_msg(&env, 4, &fw);
	struct baton_peer_frame f;
	int rv = baton_peer_decode(FIX_P1, env.data, env.len, &f);
	cr_assert_eq(rv, BATON_ECORRUPT);
	cr_assert_str_eq(f.why, "client authentication proof not 32 bytes");
	baton_buf_free(&cmd);
	baton_buf_free(&fw);
	baton_buf_free(&env);
}

/* Frames without the fields (every release before them) read as "no
 * authentication offered". */
Test(peer_auth, absent_fields_read_as_none)
{
	struct baton_peer_handshake h = dialler();
	h.has_auth = false;
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(baton_peer_decode_handshake(b.data + 4, b.len - 4, &f), 0);
	cr_assert(!f.handshake.has_auth);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}
