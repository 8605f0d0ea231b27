/*
 * The peer protocol codec: round trips of every message, version
 * negotiation, stream splitting, limits, unknown kinds and malformed input.
 * (Fuzzing is in test_peer_fuzz.c, golden bytes in test_peer_golden.c.)
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "peer_fixtures.h"

/* ---- helpers ----------------------------------------------------------------
 */

/* Encode Raft message m alone, decode it, and compare. */
static void raft_round_trip(const struct baton_msg *m)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, m, &b), 0, "type %u",
		     m->type);
	uint32_t n = (uint32_t)b.data[0] | (uint32_t)b.data[1] << 8 |
		     (uint32_t)b.data[2] << 16 | (uint32_t)b.data[3] << 24;
	cr_assert_eq((size_t)n + BATON_PEER_PREFIX_LEN, b.len);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0, "%s", f.why);
	cr_assert_eq(f.kind, BATON_PEER_RAFT);
	const char *diff = NULL;
	cr_assert(fix_msg_eq(m, &f.raft, &diff), "type %u differs in %s",
		  m->type, diff);
	if (f.raft.type == BATON_MSG_APPEND) {
		for (uint32_t i = 0; i < f.raft.u.append.n_entries; i++)
			cr_assert_not_null(f.raft.u.append.entries[i].buf);
	}
	if (f.raft.type == BATON_MSG_SNAPSHOT)
		cr_assert_not_null(f.raft.u.snapshot.chunk);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

/* Decode an envelope built by hand (no prefix). */
static int decode_env(const struct baton_buf *env, struct baton_peer_frame *f)
{
	return baton_peer_decode(FIX_P1,
				 env->len > 0 ? env->data : (const uint8_t *)"",
				 env->len, f);
}

/* A Raft envelope with the given type, term and one body. */
static void raft_env(struct baton_buf *env, uint32_t type, uint32_t body_field,
		     const struct baton_buf *body)
{
	struct baton_buf r;
	baton_buf_init(&r);
	pw_uint(&r, 1, type);
	pw_uint(&r, 2, 7);
	pw_uint(&r, 3, 1);
	pw_uint(&r, 4, 2);
	if (body != NULL)
		pw_msg(&r, body_field, body);
	baton_buf_reset(env);
	pw_msg(env, 3, &r);
	baton_buf_free(&r);
}

static void expect_decode(const struct baton_buf *env, int want,
			  const char *what)
{
	struct baton_peer_frame f;
	int rv = decode_env(env, &f);
	cr_assert_eq(rv, want, "%s: got %d (%s), want %d", what, rv,
		     rv != 0 ? f.why : "ok", want);
	if (rv != 0)
		cr_assert_not_null(f.why, "%s: no reason given", what);
	baton_peer_frame_free(&f);
}

/* ---- Raft round trips -------------------------------------------------------
 */

Test(peer_raft, every_variant_round_trips)
{
	for (uint32_t i = 0; i < FIX_N_RAFT; i++) {
		struct baton_msg m;
		fix_raft(i, &m);
		raft_round_trip(&m);
	}
}

/* An info result tells the member's memory bound in an extra key (read
 * back as it was sent); without one it encodes as before, with no extra
 * key, and decodes as 0. */
Test(peer_raft, info_result_carries_the_memory_bound)
{
	struct baton_msg m;
	fix_raft(0, &m);
	for (uint32_t i = 0; i < FIX_N_RAFT; i++) {
		fix_raft(i, &m);
		if (m.type == BATON_MSG_INFO_RESULT)
			break;
	}
	cr_assert_eq(m.type, BATON_MSG_INFO_RESULT);
	struct baton_buf plain, told;
	baton_buf_init(&plain);
	baton_buf_init(&told);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &plain), 0);
	m.u.info_result.memory_max_bytes = 0x0102030405060708u;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &told), 0);
	cr_assert_gt(told.len, plain.len);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(told.data, told.len, &f), 0);
	cr_assert_eq(f.raft.u.info_result.memory_max_bytes,
		     0x0102030405060708u);
	cr_assert_eq(f.raft.u.info_result.seq, m.u.info_result.seq);
	baton_peer_frame_free(&f);
	cr_assert_eq(fix_decode_one(plain.data, plain.len, &f), 0);
	cr_assert_eq(f.raft.u.info_result.memory_max_bytes, 0);
	baton_peer_frame_free(&f);
	baton_buf_free(&plain);
	baton_buf_free(&told);
}

Test(peer_raft, entries_keep_empty_binary_and_unknown_types)
{
	struct baton_msg m;
	fix_raft(4, &m);
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	const struct baton_msg_append *a = &f.raft.u.append;
	cr_assert_eq(a->n_entries, 5);
	cr_assert_eq(a->entries[0].len, 0);
	cr_assert_eq(a->entries[1].len, 256);
	for (uint32_t i = 0; i < 256; i++)
		cr_assert_eq(a->entries[1].buf[i], i);
	cr_assert_eq(a->entries[2].type, 99);
	cr_assert_eq(a->entries[4].type, UINT32_MAX);
	cr_assert_eq(a->entries[3].len, 17);
	cr_assert_eq(a->entries[3].buf[16], 0);
	/* The decoded data lives in the frame, not in the sender's memory. */
	cr_assert_neq(a->entries[1].buf, m.u.append.entries[1].buf);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

Test(peer_raft, max_entries_round_trip)
{
	uint32_t n = BATON_PEER_ENTRIES_MAX;
	struct baton_entry *es = calloc(n, sizeof *es);
	cr_assert_not_null(es);
	static uint8_t byte = 0x5a;
	for (uint32_t i = 0; i < n; i++)
		es[i] = (struct baton_entry){.term = 9,
					     .index = 11 + i,
					     .type = BATON_ENTRY_COMMAND,
					     .len = i % 2,
					     .buf = &byte};
	struct baton_msg m = {.type = BATON_MSG_APPEND, .term = 9};
	m.u.append.prev_index = 10;
	m.u.append.prev_term = 9;
	m.u.append.n_entries = n;
	m.u.append.entries = es;
	raft_round_trip(&m);

	struct baton_buf b;
	baton_buf_init(&b);
	m.u.append.n_entries = n + 1;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_ETOOBIG);
	cr_assert_eq(b.len, 0);
	baton_buf_free(&b);
	free(es);
}

Test(peer_raft, encode_appends_to_the_buffer)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_buf_append(&b, "xyz", 3), 0);
	struct baton_msg m1, m2;
	fix_raft(0, &m1);
	fix_raft(8, &m2);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m1, &b), 0);
	size_t first = b.len;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m2, &b), 0);
	cr_assert_eq(memcmp(b.data, "xyz", 3), 0);

	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data + 3, first - 3, &f), 0);
	const char *diff = NULL;
	cr_assert(fix_msg_eq(&m1, &f.raft, &diff), "%s", diff);
	baton_peer_frame_free(&f);
	cr_assert_eq(fix_decode_one(b.data + first, b.len - first, &f), 0);
	cr_assert(fix_msg_eq(&m2, &f.raft, &diff), "%s", diff);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

Test(peer_raft, encoder_refuses_what_the_decoder_would)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_buf_append(&b, "ab", 2), 0);
	struct baton_msg m;

	fix_raft(0, &m);
	m.type = 0;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);
	m.type = BATON_MSG_INFO_RESULT + 1;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);

	fix_raft(4, &m);
	m.u.append.entries = NULL;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);
	fix_raft(4, &m);
	m.u.append.prev_index = 99; /* entries start at 101 */
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);

	fix_raft(8, &m);
	m.u.snapshot.meta.config.n = BATON_MAX_MEMBERS + 1;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);
	fix_raft(8, &m);
	m.u.snapshot.meta.config.members[3].role = 7;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);
	fix_raft(8, &m);
	m.u.snapshot.meta.config.members[3].id =
		m.u.snapshot.meta.config.members[5].id;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);
	fix_raft(8, &m);
	m.u.snapshot.total_len = 1999; /* offset 1000 + 1000 bytes */
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);
	fix_raft(8, &m);
	m.u.snapshot.chunk = NULL;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);

	fix_raft(13, &m);
	m.u.read_index_result.status = 1;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_EINVAL);

	cr_assert_eq(b.len, 2, "a failed encode must leave the buffer as is");
	baton_buf_free(&b);
}

/* ---- connection messages ----------------------------------------------------
 */

Test(peer_conn, samples_round_trip)
{
	/* Every sample, Raft or not, survives decode -> encode -> decode. */
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		struct baton_buf b, b2;
		baton_buf_init(&b);
		baton_buf_init(&b2);
		fix_encode_sample(i, &b);
		struct baton_peer_frame f, f2;
		cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0,
			     "sample %u: %s", i, f.why);
		cr_assert_eq(fix_encode_frame(&f, &b2), 0, "sample %u", i);
		cr_assert_eq(b2.len, b.len, "sample %u", i);
		cr_assert_eq(memcmp(b.data, b2.data, b.len), 0, "sample %u", i);
		cr_assert_eq(fix_decode_one(b2.data, b2.len, &f2), 0);
		const char *diff = NULL;
		cr_assert(fix_frame_eq(&f, &f2, &diff), "sample %u: %s", i,
			  diff);
		baton_peer_frame_free(&f);
		baton_peer_frame_free(&f2);
		baton_buf_free(&b);
		baton_buf_free(&b2);
	}
}

Test(peer_conn, handshake)
{
	struct baton_peer_handshake h = {.cluster_id = "prod",
					 .node_id = 12,
					 .profile =
						 fix_profile(1, 2, 3, 4, 6, 9),
					 .peer_addr = "[::1]:7001"};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_eq(f.kind, BATON_PEER_HANDSHAKE);
	cr_assert_str_eq(f.handshake.cluster_id, "prod");
	cr_assert_eq(f.handshake.node_id, 12);
	cr_assert_str_eq(f.handshake.peer_addr, "[::1]:7001");
	cr_assert_eq(f.handshake.profile.release.major, 1);
	cr_assert_eq(f.handshake.profile.release.minor, 2);
	cr_assert_eq(f.handshake.profile.release.patch, 3);
	cr_assert_eq(f.handshake.profile.proto_min.value, 4);
	cr_assert_eq(f.handshake.profile.proto_max.value, 6);
	cr_assert_eq(f.handshake.profile.machine_max.value, 9);
	baton_peer_frame_free(&f);

	/* NULL strings travel as "". */
	baton_buf_reset(&b);
	h.cluster_id = NULL;
	h.peer_addr = NULL;
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), 0);
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_str_eq(f.handshake.cluster_id, "");
	cr_assert_str_eq(f.handshake.peer_addr, "");
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

Test(peer_conn, handshake_reply)
{
	struct baton_peer_handshake_reply r = {
		.accepted = true,
		.proto = {3},
		.reason = "",
		.self = {.cluster_id = "c",
			 .node_id = 4,
			 .profile = fix_profile(0, 9, 1, 1, 3, 2),
			 .peer_addr = "h:1"}};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_eq(f.kind, BATON_PEER_HANDSHAKE_REPLY);
	cr_assert(f.handshake_reply.accepted);
	cr_assert_eq(f.handshake_reply.proto.value, 3);
	cr_assert_str_eq(f.handshake_reply.reason, "");
	cr_assert_eq(f.handshake_reply.self.node_id, 4);
	cr_assert_str_eq(f.handshake_reply.self.cluster_id, "c");
	cr_assert_str_eq(f.handshake_reply.self.peer_addr, "h:1");
	cr_assert_eq(f.handshake_reply.self.profile.release.minor, 9);
	cr_assert_eq(f.handshake_reply.self.profile.proto_max.value, 3);
	cr_assert_eq(f.handshake_reply.self.profile.machine_max.value, 2);
	baton_peer_frame_free(&f);

	baton_buf_reset(&b);
	r.accepted = false;
	r.proto.value = 0;
	r.reason = "cluster id 'x' is not this cluster's ('c')";
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), 0);
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_not(f.handshake_reply.accepted);
	cr_assert_eq(f.handshake_reply.proto.value, 0);
	cr_assert_str_eq(f.handshake_reply.reason, r.reason);
	baton_peer_frame_free(&f);

	/* Accepting without a version is a bug on the sender's side. */
	baton_buf_reset(&b);
	r.accepted = true;
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), BATON_EINVAL);
	cr_assert_eq(b.len, 0);
	baton_buf_free(&b);
}

Test(peer_conn, forward)
{
	static const uint8_t bin[] = {0, 0xff, '\r', '\n', 0};
	const uint8_t *argv[] = {(const uint8_t *)"SET", bin,
				 (const uint8_t *)"", NULL};
	const size_t lens[] = {3, sizeof bin, 0, 0};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(fix_encode_forward(99, 4, argv, lens, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_eq(f.kind, BATON_PEER_FORWARD);
	cr_assert_eq(f.forward.request_id, 99);
	cr_assert_not(f.forward.transaction);
	cr_assert_eq(f.forward.n_commands, 1);
	cr_assert_eq(f.forward.n_watches, 0);
	const struct baton_peer_command *c = &f.forward.commands[0];
	cr_assert_eq(c->argc, 4);
	cr_assert_eq(c->lens[0], 3);
	cr_assert_eq(memcmp(c->argv[0], "SET", 3), 0);
	cr_assert_eq(c->lens[1], sizeof bin);
	cr_assert_eq(memcmp(c->argv[1], bin, sizeof bin), 0);
	cr_assert_eq(c->lens[2], 0);
	cr_assert_eq(c->lens[3], 0);
	cr_assert_not_null(c->argv[2]);
	cr_assert_not_null(c->argv[3]);
	baton_peer_frame_free(&f);

	baton_buf_reset(&b);
	cr_assert_eq(fix_encode_forward(1, 0, argv, lens, &b), BATON_EINVAL);
	cr_assert_eq(fix_encode_forward(1, -1, argv, lens, &b), BATON_EINVAL);
	const uint8_t *bad[] = {NULL};
	const size_t bad_len[] = {2};
	cr_assert_eq(fix_encode_forward(1, 1, bad, bad_len, &b), BATON_EINVAL);
	cr_assert_eq(b.len, 0);
	baton_buf_free(&b);
}

Test(peer_conn, forward_reply)
{
	struct baton_peer_forward_reply r = {.request_id = 5,
					     .resp_reply =
						     (const uint8_t *)"$-1\r\n",
					     .resp_len = 5};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_forward_reply(FIX_P1, &r, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_eq(f.kind, BATON_PEER_FORWARD_REPLY);
	cr_assert_eq(f.forward_reply.request_id, 5);
	cr_assert_null(f.forward_reply.error);
	cr_assert_eq(f.forward_reply.resp_len, 5);
	cr_assert_eq(memcmp(f.forward_reply.resp_reply, "$-1\r\n", 5), 0);
	baton_peer_frame_free(&f);

	/* An empty reply is still a reply, not an error. */
	baton_buf_reset(&b);
	r.resp_len = 0;
	r.resp_reply = NULL;
	cr_assert_eq(baton_peer_encode_forward_reply(FIX_P1, &r, &b), 0);
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_null(f.forward_reply.error);
	cr_assert_eq(f.forward_reply.resp_len, 0);
	baton_peer_frame_free(&f);

	baton_buf_reset(&b);
	r.error = "not the leader any more";
	cr_assert_eq(baton_peer_encode_forward_reply(FIX_P1, &r, &b), 0);
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	cr_assert_str_eq(f.forward_reply.error, "not the leader any more");
	cr_assert_eq(f.forward_reply.resp_len, 0);
	baton_peer_frame_free(&f);

	baton_buf_reset(&b);
	r.error = NULL;
	r.resp_len = 3;
	cr_assert_eq(baton_peer_encode_forward_reply(FIX_P1, &r, &b),
		     BATON_EINVAL);
	baton_buf_free(&b);
}

Test(peer_conn, frame_free_is_idempotent)
{
	struct baton_buf b;
	baton_buf_init(&b);
	fix_encode_sample(4, &b);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0);
	baton_peer_frame_free(&f);
	baton_peer_frame_free(&f);
	baton_peer_frame_free(NULL);
	/* After a failed decode nothing is held, and free is harmless. */
	cr_assert_neq(baton_peer_decode(FIX_P1, b.data, 3, &f), 0);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

/* ---- version negotiation ----------------------------------------------------
 */

static int choose(uint32_t amin, uint32_t amax, uint32_t bmin, uint32_t bmax,
		  uint32_t *chosen)
{
	struct baton_profile a = fix_profile(1, 0, 0, amin, amax, 1);
	struct baton_profile b = fix_profile(2, 0, 0, bmin, bmax, 1);
	struct baton_proto_version v1 = {99}, v2 = {99};
	int rv = baton_peer_choose_proto(a, b, &v1);
	int rv2 = baton_peer_choose_proto(b, a, &v2);
	cr_assert_eq(rv, rv2, "negotiation must be symmetric");
	cr_assert_eq(v1.value, v2.value, "negotiation must be symmetric");
	*chosen = v1.value;
	return rv;
}

Test(peer_negotiate, overlapping_ranges_pick_the_highest_common)
{
	uint32_t v;
	cr_assert_eq(choose(1, 3, 2, 5, &v), 0);
	cr_assert_eq(v, 3);
	cr_assert_eq(choose(1, 10, 3, 4, &v), 0);
	cr_assert_eq(v, 4);
	cr_assert_eq(choose(1, 2, 2, 3, &v), 0);
	cr_assert_eq(v, 2);
}

Test(peer_negotiate, equal_ranges)
{
	uint32_t v;
	cr_assert_eq(choose(2, 2, 2, 2, &v), 0);
	cr_assert_eq(v, 2);
	cr_assert_eq(choose(1, 7, 1, 7, &v), 0);
	cr_assert_eq(v, 7);
}

Test(peer_negotiate, disjoint_ranges_are_refused)
{
	uint32_t v;
	cr_assert_eq(choose(1, 2, 3, 4, &v), BATON_EVERSION);
	cr_assert_eq(v, 0);
	cr_assert_eq(choose(5, 9, 1, 4, &v), BATON_EVERSION);
	cr_assert_eq(v, 0);
	/* An empty range, or version 0, overlaps nothing. */
	cr_assert_eq(choose(3, 1, 1, 5, &v), BATON_EVERSION);
	cr_assert_eq(choose(0, 0, 0, 0, &v), BATON_EVERSION);
	cr_assert_eq(choose(0, 0, 0, 3, &v), BATON_EVERSION);
	cr_assert_eq(choose(0, 2, 0, 3, &v), 0);
	cr_assert_eq(v, 2);
}

Test(peer_negotiate, refusal_text_names_both_ranges)
{
	char text[BATON_PEER_REFUSAL_MAX];
	struct baton_member_versions a = {1, fix_profile(1, 2, 3, 1, 2, 1)};
	struct baton_member_versions b = {9, fix_profile(3, 0, 0, 3, 4, 1)};
	const char *s = baton_peer_proto_mismatch(&a, &b, text, sizeof text);
	cr_assert_eq(s, text);
	cr_assert_str_eq(text, "no common peer protocol version: node 1 "
			       "(release 1.2.3) speaks 1..2, node 9 (release "
			       "3.0.0) speaks 3..4");
	char tiny[8];
	baton_peer_proto_mismatch(&a, &b, tiny, sizeof tiny);
	cr_assert_eq(strlen(tiny), sizeof tiny - 1);
	/* The largest values fit, and within what a reason may carry. */
	struct baton_member_versions big = {
		UINT64_MAX, fix_profile(UINT16_MAX, UINT16_MAX, UINT16_MAX,
					UINT32_MAX, UINT32_MAX, UINT32_MAX)};
	baton_peer_proto_mismatch(&big, &big, text, sizeof text);
	cr_assert_lt(strlen(text), sizeof text - 1);
	cr_assert_leq(strlen(text), BATON_PEER_REASON_MAX);
	cr_assert_not_null(strstr(text, "4294967295..4294967295, node"), "%s",
			   text);
}

/* ---- splitting a stream -----------------------------------------------------
 */

static void all_samples(struct baton_buf *stream, size_t *ends)
{
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		fix_encode_sample(i, stream);
		ends[i] = stream->len;
	}
}

Test(peer_split, every_prefix_of_a_frame)
{
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		struct baton_buf b;
		baton_buf_init(&b);
		fix_encode_sample(i, &b);
		size_t whole = b.len;
		cr_assert_eq(baton_buf_append(&b, "\x05\x00\x00\x00", 4), 0);
		for (size_t p = 0; p <= b.len; p++) {
			size_t body = 12345;
			int rv = baton_peer_split(b.data, p, &body);
			if (p < whole) {
				cr_assert_eq(rv, 0, "sample %u, %zu bytes", i,
					     p);
				continue;
			}
			cr_assert_eq(rv, 1, "sample %u, %zu bytes", i, p);
			cr_assert_eq(body + BATON_PEER_PREFIX_LEN, whole);
		}
		baton_buf_free(&b);
	}
}

/* Take every whole frame out of `in`, decode it, and check it against the
 * reference decodes; returns how many frames were taken. */
static uint32_t drain(struct baton_buf *in, uint32_t next,
		      struct baton_peer_frame *want)
{
	size_t off = 0;
	for (;;) {
		size_t body = 0;
		int rv = baton_peer_split(in->data + off, in->len - off, &body);
		cr_assert_geq(rv, 0);
		if (rv == 0)
			break;
		struct baton_peer_frame f;
		cr_assert_lt(next, FIX_N_FRAMES);
		cr_assert_eq(baton_peer_decode(FIX_P1,
					       in->data + off +
						       BATON_PEER_PREFIX_LEN,
					       body, &f),
			     0);
		const char *diff = NULL;
		cr_assert(fix_frame_eq(&want[next], &f, &diff), "frame %u: %s",
			  next, diff);
		baton_peer_frame_free(&f);
		next++;
		off += BATON_PEER_PREFIX_LEN + body;
	}
	if (off > 0) {
		memmove(in->data, in->data + off, in->len - off);
		in->len -= off;
	}
	return next;
}

Test(peer_split, a_stream_cut_at_every_byte)
{
	struct baton_buf stream;
	baton_buf_init(&stream);
	size_t ends[FIX_N_FRAMES];
	all_samples(&stream, ends);
	struct baton_peer_frame want[FIX_N_FRAMES];
	size_t start = 0;
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		cr_assert_eq(fix_decode_one(stream.data + start,
					    ends[i] - start, &want[i]),
			     0);
		start = ends[i];
	}

	struct baton_buf in;
	baton_buf_init(&in);
	for (size_t cut = 0; cut <= stream.len; cut++) {
		baton_buf_reset(&in);
		cr_assert_eq(baton_buf_append(&in, stream.data, cut), 0);
		uint32_t got = drain(&in, 0, want);
		cr_assert_eq(baton_buf_append(&in, stream.data + cut,
					      stream.len - cut),
			     0);
		got = drain(&in, got, want);
		cr_assert_eq(got, FIX_N_FRAMES, "cut at %zu", cut);
		cr_assert_eq(in.len, 0);
	}

	/* One byte at a time. */
	baton_buf_reset(&in);
	uint32_t got = 0;
	for (size_t i = 0; i < stream.len; i++) {
		cr_assert_eq(baton_buf_append(&in, stream.data + i, 1), 0);
		got = drain(&in, got, want);
	}
	cr_assert_eq(got, FIX_N_FRAMES);

	for (uint32_t i = 0; i < FIX_N_FRAMES; i++)
		baton_peer_frame_free(&want[i]);
	baton_buf_free(&in);
	baton_buf_free(&stream);
}

Test(peer_split, oversized_frames_are_rejected_from_the_prefix)
{
	uint8_t p[4];
	size_t body = 0;
	uint32_t lens[] = {BATON_PEER_FRAME_MAX + 1, UINT32_MAX};
	for (size_t i = 0; i < 2; i++) {
		p[0] = (uint8_t)lens[i];
		p[1] = (uint8_t)(lens[i] >> 8);
		p[2] = (uint8_t)(lens[i] >> 16);
		p[3] = (uint8_t)(lens[i] >> 24);
		cr_assert_eq(baton_peer_split(p, 4, &body), BATON_ETOOBIG);
		cr_assert_eq(baton_peer_split(p, 3, &body), 0);
	}
	uint32_t max = BATON_PEER_FRAME_MAX;
	p[0] = (uint8_t)max;
	p[1] = (uint8_t)(max >> 8);
	p[2] = (uint8_t)(max >> 16);
	p[3] = (uint8_t)(max >> 24);
	cr_assert_eq(baton_peer_split(p, 4, &body), 0, "the maximum is fine");

	/* A zero-length frame splits, and decodes as garbage. */
	memset(p, 0, sizeof p);
	cr_assert_eq(baton_peer_split(p, 4, &body), 1);
	cr_assert_eq(body, 0);
	struct baton_peer_frame f;
	cr_assert_eq(baton_peer_decode(FIX_P1, p + 4, 0, &f), BATON_ECORRUPT);
}

/* ---- limits -----------------------------------------------------------------
 */

Test(peer_limits, decode_refuses_a_frame_above_the_maximum)
{
	size_t len = (size_t)BATON_PEER_FRAME_MAX + 1;
	uint8_t *big = calloc(1, len);
	cr_assert_not_null(big);
	struct baton_peer_frame f;
	cr_assert_eq(baton_peer_decode(FIX_P1, big, len, &f), BATON_ETOOBIG);
	cr_assert_not_null(f.why);
	free(big);
}

Test(peer_limits, encode_refuses_a_frame_above_the_maximum)
{
	/* Two entries each within the entry limit, together above the
	 * frame limit. */
	size_t len = 40u << 20;
	uint8_t *data = calloc(1, len);
	cr_assert_not_null(data);
	struct baton_entry es[2] = {{.term = 1,
				     .index = 1,
				     .type = 2,
				     .len = (uint32_t)len,
				     .buf = data},
				    {.term = 1,
				     .index = 2,
				     .type = 2,
				     .len = (uint32_t)len,
				     .buf = data}};
	struct baton_msg m = {.type = BATON_MSG_APPEND, .term = 1};
	m.u.append.n_entries = 2;
	m.u.append.entries = es;
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_ETOOBIG);
	cr_assert_eq(b.len, 0);

	const uint8_t *argv[2] = {data, data};
	size_t lens[2] = {len, len};
	cr_assert_eq(fix_encode_forward(1, 2, argv, lens, &b), BATON_ETOOBIG);
	struct baton_peer_forward_reply r = {.resp_reply = data,
					     .resp_len = 2 * len};
	cr_assert_eq(baton_peer_encode_forward_reply(FIX_P1, &r, &b),
		     BATON_ETOOBIG);
	cr_assert_eq(b.len, 0);
	baton_buf_free(&b);
	free(data);
}

Test(peer_limits, entry_and_chunk_sizes)
{
	size_t len = (size_t)BATON_PEER_ENTRY_BYTES_MAX + 1;
	uint8_t *data = calloc(1, len);
	cr_assert_not_null(data);
	struct baton_buf b, env, body, e;
	baton_buf_init(&b);
	baton_buf_init(&env);
	baton_buf_init(&body);
	baton_buf_init(&e);

	/* Encode: one byte over each limit. */
	struct baton_entry es[1] = {{.term = 1,
				     .index = 1,
				     .type = 2,
				     .len = (uint32_t)len,
				     .buf = data}};
	struct baton_msg m = {.type = BATON_MSG_APPEND, .term = 1};
	m.u.append.n_entries = 1;
	m.u.append.entries = es;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), BATON_ETOOBIG);
	struct baton_msg s = {.type = BATON_MSG_SNAPSHOT, .term = 1};
	baton_version_state_initial(&s.u.snapshot.meta.versions);
	s.u.snapshot.total_len = len;
	s.u.snapshot.chunk_len = BATON_PEER_CHUNK_MAX + 1;
	s.u.snapshot.chunk = data;
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &s, &b), BATON_ETOOBIG);

	/* Decode: the same, crafted by hand. */
	pw_uint(&e, 1, 1);
	pw_uint(&e, 2, 1);
	pw_uint(&e, 3, 2);
	pw_bytes(&e, 4, data, len);
	pw_msg(&body, 5, &e);
	raft_env(&env, BATON_MSG_APPEND, 7, &body);
	expect_decode(&env, BATON_ETOOBIG, "entry above the limit");

	baton_buf_reset(&body);
	pw_uint(&body, 2, len);
	pw_bytes(&body, 4, data, BATON_PEER_CHUNK_MAX + 1);
	raft_env(&env, BATON_MSG_SNAPSHOT, 9, &body);
	expect_decode(&env, BATON_ETOOBIG, "chunk above the limit");

	/* Exactly at the limit is fine. */
	s.u.snapshot.chunk_len = BATON_PEER_CHUNK_MAX;
	s.u.snapshot.last_chunk = true;
	raft_round_trip(&s);

	baton_buf_free(&e);
	baton_buf_free(&body);
	baton_buf_free(&env);
	baton_buf_free(&b);
	free(data);
}

Test(peer_limits, too_many_entries_on_decode)
{
	struct baton_buf body, env;
	baton_buf_init(&body);
	baton_buf_init(&env);
	for (uint32_t i = 0; i <= BATON_PEER_ENTRIES_MAX; i++)
		pw_bytes(&body, 5, "", 0);
	raft_env(&env, BATON_MSG_APPEND, 7, &body);
	expect_decode(&env, BATON_ETOOBIG, "too many entries");
	baton_buf_free(&body);
	baton_buf_free(&env);
}

Test(peer_limits, forward_arguments)
{
	uint32_t n = BATON_PEER_FORWARD_ARGS_MAX;
	const uint8_t **argv = calloc(n + 1, sizeof *argv);
	size_t *lens = calloc(n + 1, sizeof *lens);
	cr_assert(argv != NULL && lens != NULL);
	for (uint32_t i = 0; i <= n; i++) {
		argv[i] = (const uint8_t *)"k";
		lens[i] = 1;
	}
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(fix_encode_forward(3, (int)n + 1, argv, lens, &b),
		     BATON_ETOOBIG);
	/* The most arguments allowed decode fine. */
	cr_assert_eq(fix_encode_forward(3, (int)n, argv, lens, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0, "%s", f.why);
	cr_assert_eq(f.forward.n_commands, 1);
	cr_assert_eq(f.forward.commands[0].argc, (int)n);
	cr_assert_eq(f.forward.commands[0].lens[n - 1], 1);
	cr_assert_eq(f.forward.commands[0].argv[n - 1][0], 'k');
	baton_peer_frame_free(&f);

	/* One more, crafted by hand. */
	struct baton_buf fw, env;
	baton_buf_init(&fw);
	baton_buf_init(&env);
	pw_uint(&fw, 1, 3);
	for (uint32_t i = 0; i <= n; i++)
		pw_bytes(&fw, 2, "k", 1);
	pw_msg(&env, 4, &fw);
	expect_decode(&env, BATON_ETOOBIG, "too many arguments");
	baton_buf_free(&fw);
	baton_buf_free(&env);
	baton_buf_free(&b);
	free(argv);
	free(lens);
}

/* s filled with n letters. */
static const char *letters(char *s, size_t n)
{
	memset(s, 'a', n);
	s[n] = '\0';
	return s;
}

Test(peer_limits, strings)
{
	static char s[BATON_PEER_ERROR_MAX + 2];
	struct baton_buf b;
	baton_buf_init(&b);

	struct baton_peer_handshake h = {.cluster_id = "c", .peer_addr = "a"};
	h.cluster_id = letters(s, BATON_PEER_CLUSTER_ID_MAX);
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), 0, "at the limit");
	baton_buf_reset(&b);
	h.cluster_id = letters(s, BATON_PEER_CLUSTER_ID_MAX + 1);
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), BATON_ETOOBIG);
	h.cluster_id = "c";
	h.peer_addr = letters(s, BATON_PEER_ADDR_MAX + 1);
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), BATON_ETOOBIG);
	h.peer_addr = "a";

	struct baton_peer_handshake_reply r = {
		.reason = letters(s, BATON_PEER_REASON_MAX + 1), .self = h};
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), BATON_ETOOBIG);
	r.self.peer_addr = letters(s, BATON_PEER_ADDR_MAX + 1);
	r.reason = "";
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), BATON_ETOOBIG);
	struct baton_peer_forward_reply fr = {
		.error = letters(s, BATON_PEER_ERROR_MAX + 1)};
	cr_assert_eq(baton_peer_encode_forward_reply(FIX_P1, &fr, &b),
		     BATON_ETOOBIG);
	cr_assert_eq(b.len, 0);
	fr.error = letters(s, BATON_PEER_ERROR_MAX);
	cr_assert_eq(baton_peer_encode_forward_reply(FIX_P1, &fr, &b), 0);

	/* And on decode. */
	struct {
		uint32_t body, field;
		size_t len;
		const char *what;
	} cases[] = {
		{1, 1, BATON_PEER_CLUSTER_ID_MAX + 1, "long cluster id"},
		{1, 4, BATON_PEER_ADDR_MAX + 1, "long address"},
		{2, 3, BATON_PEER_REASON_MAX + 1, "long reason"},
		{5, 3, BATON_PEER_ERROR_MAX + 1, "long error"},
	};
	struct baton_buf hs, env;
	baton_buf_init(&hs);
	baton_buf_init(&env);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		baton_buf_reset(&hs);
		baton_buf_reset(&env);
		pw_bytes(&hs, cases[i].field, letters(s, cases[i].len),
			 cases[i].len);
		pw_msg(&env, cases[i].body, &hs);
		expect_decode(&env, BATON_ETOOBIG, cases[i].what);
	}
	baton_buf_free(&hs);
	baton_buf_free(&env);
	baton_buf_free(&b);
}

Test(peer_limits, decoding_memory_is_bounded)
{
	/* Millions of tiny elements: cheap on the wire, dear in memory. */
	struct baton_buf env, body;
	baton_buf_init(&env);
	baton_buf_init(&body);
	for (uint32_t i = 0; i < 3000000; i++)
		pw_uint(&env, 15, 0);
	expect_decode(&env, BATON_ETOOBIG, "many unknown fields");

	baton_buf_reset(&env);
	for (uint32_t i = 0; i < 2000000; i++)
		pw_bytes(&body, 5, "", 0);
	raft_env(&env, BATON_MSG_APPEND, 7, &body);
	expect_decode(&env, BATON_ETOOBIG, "many empty entries");
	baton_buf_free(&body);
	baton_buf_free(&env);
}

/* ---- frames from newer peers ------------------------------------------------
 */

Test(peer_unknown, body_of_a_newer_release)
{
	struct baton_buf env, inner;
	baton_buf_init(&env);
	baton_buf_init(&inner);
	pw_uint(&inner, 1, 12345);
	pw_bytes(&inner, 2, "future", 6);
	pw_msg(&env, 40, &inner);
	struct baton_peer_frame f;
	cr_assert_eq(decode_env(&env, &f), 0, "%s", f.why);
	cr_assert_eq(f.kind, BATON_PEER_UNKNOWN);
	cr_assert_eq(f.unknown.body, 40);
	cr_assert_eq(f.unknown.raft_type, 0);
	baton_peer_frame_free(&f);

	/* Scalar bodies too (9: the first field number no release uses). */
	baton_buf_reset(&env);
	pw_uint(&env, 9, 1);
	cr_assert_eq(decode_env(&env, &f), 0);
	cr_assert_eq(f.kind, BATON_PEER_UNKNOWN);
	cr_assert_eq(f.unknown.body, 9);
	baton_peer_frame_free(&f);
	baton_buf_free(&inner);
	baton_buf_free(&env);
}

Test(peer_unknown, raft_type_of_a_newer_release)
{
	struct baton_buf env, body;
	baton_buf_init(&env);
	baton_buf_init(&body);
	pw_uint(&body, 1, 7);
	raft_env(&env, BATON_MSG_INFO_RESULT + 1, 16, &body);
	struct baton_peer_frame f;
	cr_assert_eq(decode_env(&env, &f), 0, "%s", f.why);
	cr_assert_eq(f.kind, BATON_PEER_UNKNOWN);
	cr_assert_eq(f.unknown.body, 3);
	cr_assert_eq(f.unknown.raft_type, BATON_MSG_INFO_RESULT + 1);
	baton_peer_frame_free(&f);

	/* Even with a body this release knows. */
	raft_env(&env, 1000, 5, &body);
	cr_assert_eq(decode_env(&env, &f), 0, "%s", f.why);
	cr_assert_eq(f.kind, BATON_PEER_UNKNOWN);
	cr_assert_eq(f.unknown.raft_type, 1000);
	baton_peer_frame_free(&f);
	baton_buf_free(&body);
	baton_buf_free(&env);
}

Test(peer_unknown, new_fields_are_skipped)
{
	/* A vote from a newer release: extra fields at every level. */
	struct baton_buf rel, prof, vote, raft, env;
	baton_buf_init(&rel);
	baton_buf_init(&prof);
	baton_buf_init(&vote);
	baton_buf_init(&raft);
	baton_buf_init(&env);
	pw_uint(&rel, 1, 2);
	pw_uint(&rel, 3, 4);
	pw_uint(&rel, 9, 77); /* new */
	pw_msg(&prof, 1, &rel);
	pw_uint(&prof, 3, 5);
	pw_bytes(&prof, 20, "new", 3); /* new */
	pw_uint(&vote, 1, 10);
	pw_uint(&vote, 3, 1);
	pw_msg(&vote, 5, &prof);
	pw_uint(&vote, 31, 1); /* new */
	pw_uint(&raft, 1, BATON_MSG_VOTE);
	pw_uint(&raft, 2, 8);
	pw_uint(&raft, 99, 5); /* new */
	pw_msg(&raft, 5, &vote);
	pw_msg(&env, 3, &raft);
	pw_bytes(&env, 100, "x", 1); /* new */

	struct baton_peer_frame f;
	cr_assert_eq(decode_env(&env, &f), 0, "%s", f.why);
	cr_assert_eq(f.kind, BATON_PEER_RAFT);
	cr_assert_eq(f.raft.type, BATON_MSG_VOTE);
	cr_assert_eq(f.raft.term, 8);
	cr_assert_eq(f.raft.u.vote.last_log_index, 10);
	cr_assert(f.raft.u.vote.pre_vote);
	cr_assert_eq(f.raft.u.vote.candidate.release.major, 2);
	cr_assert_eq(f.raft.u.vote.candidate.release.minor, 0);
	cr_assert_eq(f.raft.u.vote.candidate.release.patch, 4);
	cr_assert_eq(f.raft.u.vote.candidate.proto_max.value, 5);
	baton_peer_frame_free(&f);
	baton_buf_free(&rel);
	baton_buf_free(&prof);
	baton_buf_free(&vote);
	baton_buf_free(&raft);
	baton_buf_free(&env);
}

Test(peer_unknown, missing_fields_read_as_defaults)
{
	/* An append with nothing in it but its type: a heartbeat at 0. */
	struct baton_buf env, body;
	baton_buf_init(&env);
	baton_buf_init(&body);
	raft_env(&env, BATON_MSG_APPEND, 7, &body);
	struct baton_peer_frame f;
	cr_assert_eq(decode_env(&env, &f), 0, "%s", f.why);
	cr_assert_eq(f.raft.u.append.n_entries, 0);
	cr_assert_eq(f.raft.u.append.leader.proto_max.value, 0);
	baton_peer_frame_free(&f);
	baton_buf_free(&body);
	baton_buf_free(&env);
}

/* ---- malformed input --------------------------------------------------------
 */

Test(peer_corrupt, raft_type_and_body)
{
	struct baton_buf env, body;
	baton_buf_init(&env);
	baton_buf_init(&body);
	pw_uint(&body, 1, 1);
	raft_env(&env, 0, 5, &body);
	expect_decode(&env, BATON_ECORRUPT, "type 0");
	raft_env(&env, BATON_MSG_VOTE, 7, &body);
	expect_decode(&env, BATON_ECORRUPT, "vote with an append body");
	raft_env(&env, BATON_MSG_APPEND, 7, NULL);
	expect_decode(&env, BATON_ECORRUPT, "append without a body");
	raft_env(&env, BATON_MSG_TIMEOUT_NOW, 11, NULL);
	expect_decode(&env, BATON_ECORRUPT, "timeout_now without a body");
	baton_buf_reset(&body);
	raft_env(&env, BATON_MSG_TIMEOUT_NOW, 11, &body);
	expect_decode(&env, 0, "timeout_now");
	baton_buf_free(&body);
	baton_buf_free(&env);
}

static void entry_at(struct baton_buf *body, uint64_t term, uint64_t index)
{
	struct baton_buf e;
	baton_buf_init(&e);
	pw_uint(&e, 1, term);
	pw_uint(&e, 2, index);
	pw_uint(&e, 3, 2);
	pw_msg(body, 5, &e);
	baton_buf_free(&e);
}

Test(peer_corrupt, entries_must_follow_prev_index)
{
	struct baton_buf env, body;
	baton_buf_init(&env);
	baton_buf_init(&body);
	pw_uint(&body, 1, 10);
	entry_at(&body, 7, 11);
	entry_at(&body, 7, 12);
	raft_env(&env, BATON_MSG_APPEND, 7, &body);
	expect_decode(&env, 0, "consecutive");
	entry_at(&body, 7, 14);
	raft_env(&env, BATON_MSG_APPEND, 7, &body);
	expect_decode(&env, BATON_ECORRUPT, "a gap");

	baton_buf_reset(&body);
	pw_uint(&body, 1, UINT64_MAX);
	entry_at(&body, 7, 0); /* prev_index + 1 wraps around */
	raft_env(&env, BATON_MSG_APPEND, 7, &body);
	expect_decode(&env, BATON_ECORRUPT, "index wraps");
	baton_buf_free(&body);
	baton_buf_free(&env);
}

/* A snapshot message with these members (id, role pairs). */
static void snapshot_env(struct baton_buf *env, const uint64_t *members,
			 uint32_t n, uint64_t total, uint64_t offset,
			 size_t chunk_len)
{
	struct baton_buf meta, m, body;
	baton_buf_init(&meta);
	baton_buf_init(&m);
	baton_buf_init(&body);
	pw_uint(&meta, 1, 50);
	pw_uint(&meta, 2, 3);
	for (uint32_t i = 0; i < n; i++) {
		baton_buf_reset(&m);
		pw_uint(&m, 1, members[2 * i]);
		pw_uint(&m, 2, members[2 * i + 1]);
		pw_msg(&meta, 3, &m);
	}
	pw_msg(&body, 1, &meta);
	pw_uint(&body, 2, total);
	pw_uint(&body, 3, offset);
	static const uint8_t chunk[64];
	pw_bytes(&body, 4, chunk, chunk_len);
	raft_env(env, BATON_MSG_SNAPSHOT, 9, &body);
	baton_buf_free(&meta);
	baton_buf_free(&m);
	baton_buf_free(&body);
}

Test(peer_corrupt, snapshot_configuration)
{
	struct baton_buf env;
	baton_buf_init(&env);
	uint64_t ms[2 * (BATON_MAX_MEMBERS + 1)];
	for (uint32_t i = 0; i <= BATON_MAX_MEMBERS; i++) {
		ms[2 * i] = i + 1;
		ms[2 * i + 1] = BATON_VOTER;
	}
	snapshot_env(&env, ms, BATON_MAX_MEMBERS, 10, 0, 10);
	expect_decode(&env, 0, "the most members");
	snapshot_env(&env, ms, BATON_MAX_MEMBERS + 1, 10, 0, 10);
	expect_decode(&env, BATON_ECORRUPT, "too many members");

	uint64_t zero_id[] = {1, BATON_VOTER, 0, BATON_VOTER};
	snapshot_env(&env, zero_id, 2, 10, 0, 10);
	expect_decode(&env, BATON_ECORRUPT, "member id 0");
	uint64_t twice[] = {4, BATON_VOTER, 4, BATON_LEARNER};
	snapshot_env(&env, twice, 2, 10, 0, 10);
	expect_decode(&env, BATON_ECORRUPT, "member twice");
	uint64_t role0[] = {4, 0};
	snapshot_env(&env, role0, 1, 10, 0, 10);
	expect_decode(&env, BATON_ECORRUPT, "role 0");
	uint64_t role3[] = {4, 3};
	snapshot_env(&env, role3, 1, 10, 0, 10);
	expect_decode(&env, BATON_ECORRUPT, "role 3");
	uint64_t learner[] = {4, BATON_LEARNER};
	snapshot_env(&env, learner, 1, 10, 0, 10);
	expect_decode(&env, 0, "a learner");
	baton_buf_free(&env);
}

Test(peer_corrupt, snapshot_chunk_bounds)
{
	struct baton_buf env;
	baton_buf_init(&env);
	uint64_t ms[] = {1, BATON_VOTER};
	snapshot_env(&env, ms, 1, 64, 0, 64);
	expect_decode(&env, 0, "whole snapshot in one chunk");
	snapshot_env(&env, ms, 1, 64, 64, 0);
	expect_decode(&env, 0, "empty chunk at the end");
	snapshot_env(&env, ms, 1, 10, 5, 6);
	expect_decode(&env, BATON_ECORRUPT, "chunk past total_len");
	snapshot_env(&env, ms, 1, 10, 11, 0);
	expect_decode(&env, BATON_ECORRUPT, "offset past total_len");
	snapshot_env(&env, ms, 1, UINT64_MAX, UINT64_MAX, 1);
	expect_decode(&env, BATON_ECORRUPT, "offset + chunk wraps");
	baton_buf_free(&env);
}

Test(peer_corrupt, release_parts_and_status)
{
	struct baton_buf rel, prof, body, env, hs;
	baton_buf_init(&rel);
	baton_buf_init(&prof);
	baton_buf_init(&body);
	baton_buf_init(&env);
	baton_buf_init(&hs);
	pw_uint(&rel, 2, 65536);
	pw_msg(&prof, 1, &rel);
	pw_msg(&body, 5, &prof);
	raft_env(&env, BATON_MSG_VOTE, 5, &body);
	expect_decode(&env, BATON_ECORRUPT, "minor 65536 in a vote");
	baton_buf_reset(&env);
	pw_msg(&hs, 3, &prof);
	pw_msg(&env, 1, &hs);
	expect_decode(&env, BATON_ECORRUPT, "minor 65536 in a handshake");

	baton_buf_reset(&body);
	pw_uint(&body, 3, 2 * 5); /* sint32 5, zigzag */
	raft_env(&env, BATON_MSG_READ_INDEX_RESULT, 13, &body);
	expect_decode(&env, BATON_ECORRUPT, "positive status");
	baton_buf_reset(&body);
	pw_uint(&body, 3, 2 * 30003 - 1); /* sint32 -30003 */
	raft_env(&env, BATON_MSG_READ_INDEX_RESULT, 13, &body);
	expect_decode(&env, 0, "an error status");

	baton_buf_free(&rel);
	baton_buf_free(&prof);
	baton_buf_free(&body);
	baton_buf_free(&env);
	baton_buf_free(&hs);
}

Test(peer_corrupt, connection_messages)
{
	struct baton_buf body, env;
	baton_buf_init(&body);
	baton_buf_init(&env);
	expect_decode(&env, BATON_ECORRUPT, "empty envelope");

	pw_uint(&body, 1, 5);
	pw_msg(&env, 4, &body);
	expect_decode(&env, BATON_ECORRUPT, "forward without arguments");
	baton_buf_reset(&env);
	pw_msg(&env, 5, &body);
	expect_decode(&env, BATON_ECORRUPT, "forward reply without result");

	baton_buf_reset(&body);
	baton_buf_reset(&env);
	pw_uint(&body, 1, 1);
	pw_msg(&env, 2, &body);
	expect_decode(&env, BATON_ECORRUPT, "accepted without a version");

	/* Wire-level garbage. */
	baton_buf_reset(&env);
	cr_assert_eq(baton_buf_append(&env, "\x1a\x05\x08", 3), 0);
	expect_decode(&env, BATON_ECORRUPT, "truncated submessage");
	baton_buf_reset(&env);
	cr_assert_eq(baton_buf_append(&env, "\x08\xff\xff", 3), 0);
	expect_decode(&env, BATON_ECORRUPT, "truncated varint");
	baton_buf_reset(&env);
	cr_assert_eq(baton_buf_append(&env, "\x18\x01", 2), 0);
	expect_decode(&env, BATON_ECORRUPT, "raft body as a varint");
	baton_buf_free(&body);
	baton_buf_free(&env);
}

Test(peer_corrupt, every_truncation_of_every_sample)
{
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		struct baton_buf b;
		baton_buf_init(&b);
		fix_encode_sample(i, &b);
		const uint8_t *body = b.data + BATON_PEER_PREFIX_LEN;
		size_t len = b.len - BATON_PEER_PREFIX_LEN;
		for (size_t n = 0; n < len; n++) {
			/* A copy of exactly n bytes, so ASan sees overreads. */
			uint8_t *copy = malloc(n > 0 ? n : 1);
			cr_assert_not_null(copy);
			if (n > 0)
				memcpy(copy, body, n);
			struct baton_peer_frame f;
			int rv = baton_peer_decode(FIX_P1, copy, n, &f);
			if (rv != 0)
				cr_assert_not_null(f.why);
			baton_peer_frame_free(&f);
			free(copy);
		}
		baton_buf_free(&b);
	}
}
