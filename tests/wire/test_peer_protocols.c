/*
 * What each peer protocol version puts on the wire, and which releases of
 * the table talk to each other. Golden bytes per version: the same message
 * encodes differently in 1, 2 and 3 (docs/peer-protocol.md, "Versions"), a
 * decoder of 3 ignores what 3 dropped, 4 is 3 with a checksum ending each
 * frame, and what a version cannot carry is refused. Never edit a vector;
 * add new ones.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "peer_fixtures.h"

/* Append{prev 300/8, commit 299, heartbeat 17, one entry, leader 1.2.0
 * {2..3, 2}} from node 1 to node 2, term 9. 1 and 2 carry `from` (18 01)
 * and the leader profile (32 0c ...); 3 carries neither. */
static const uint8_t golden_append_p1[] = {
	0x33, 0x00, 0x00, 0x00, 0x1a, 0x31, 0x08, 0x03, 0x10, 0x09, 0x18,
	0x01, 0x20, 0x02, 0x3a, 0x27, 0x08, 0xac, 0x02, 0x10, 0x08, 0x18,
	0xab, 0x02, 0x20, 0x11, 0x2a, 0x0d, 0x08, 0x09, 0x10, 0xad, 0x02,
	0x18, 0x02, 0x22, 0x04, 0x4b, 0x00, 0x01, 0xff, 0x32, 0x0c, 0x0a,
	0x04, 0x08, 0x01, 0x10, 0x02, 0x10, 0x02, 0x18, 0x03, 0x20, 0x02,
};
static const uint8_t golden_append_p3[] = {
	0x23, 0x00, 0x00, 0x00, 0x1a, 0x21, 0x08, 0x03, 0x10, 0x09,
	0x20, 0x02, 0x3a, 0x19, 0x08, 0xac, 0x02, 0x10, 0x08, 0x18,
	0xab, 0x02, 0x20, 0x11, 0x2a, 0x0d, 0x08, 0x09, 0x10, 0xad,
	0x02, 0x18, 0x02, 0x22, 0x04, 0x4b, 0x00, 0x01, 0xff,
};
/* Forward{42, SET k v}: 1 and 2 in argv (field 2), 3 as a one-command
 * list (field 3). */
static const uint8_t golden_forward_p1[] = {
	0x0f, 0x00, 0x00, 0x00, 0x22, 0x0d, 0x08, 0x2a, 0x12, 0x03,
	0x53, 0x45, 0x54, 0x12, 0x01, 0x6b, 0x12, 0x01, 0x76,
};
static const uint8_t golden_forward_p3[] = {
	0x11, 0x00, 0x00, 0x00, 0x22, 0x0f, 0x08, 0x2a, 0x1a, 0x0b, 0x0a,
	0x03, 0x53, 0x45, 0x54, 0x0a, 0x01, 0x6b, 0x0a, 0x01, 0x76,
};
/* The same two frames in 4: 3's bytes, then XXH3-64 of them, little-endian
 * (computed apart from this codec, with libxxhash's XXH3_64bits). */
static const uint8_t golden_append_p4[] = {
	0x23, 0x00, 0x00, 0x00, 0x1a, 0x21, 0x08, 0x03, 0x10, 0x09, 0x20, 0x02,
	0x3a, 0x19, 0x08, 0xac, 0x02, 0x10, 0x08, 0x18, 0xab, 0x02, 0x20, 0x11,
	0x2a, 0x0d, 0x08, 0x09, 0x10, 0xad, 0x02, 0x18, 0x02, 0x22, 0x04, 0x4b,
	0x00, 0x01, 0xff, 0x67, 0xd0, 0xc2, 0x29, 0xcc, 0xc2, 0x38, 0xdb,
};
static const uint8_t golden_forward_p4[] = {
	0x11, 0x00, 0x00, 0x00, 0x22, 0x0f, 0x08, 0x2a, 0x1a, 0x0b,
	0x0a, 0x03, 0x53, 0x45, 0x54, 0x0a, 0x01, 0x6b, 0x0a, 0x01,
	0x76, 0xc4, 0xe4, 0xf5, 0x11, 0xea, 0x51, 0x07, 0x6e,
};
/* A transaction, 2 and later: Forward{43, commands [SET k v, INCR n],
 * watches [{k, 0x0123456789abcdef}], transaction}. */
static const uint8_t golden_transaction_p2[] = {
	0x2c, 0x00, 0x00, 0x00, 0x22, 0x2a, 0x08, 0x2b, 0x1a, 0x0b, 0x0a, 0x03,
	0x53, 0x45, 0x54, 0x0a, 0x01, 0x6b, 0x0a, 0x01, 0x76, 0x1a, 0x09, 0x0a,
	0x04, 0x49, 0x4e, 0x43, 0x52, 0x0a, 0x01, 0x6e, 0x22, 0x0c, 0x0a, 0x01,
	0x6b, 0x11, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, 0x28, 0x01,
};

static struct baton_msg golden_append_msg(void)
{
	static uint8_t data[] = {'K', 0, 1, 0xff};
	static struct baton_entry es[1];
	es[0] = (struct baton_entry){.term = 9,
				     .index = 301,
				     .type = BATON_ENTRY_COMMAND,
				     .len = sizeof data,
				     .buf = data};
	struct baton_msg m = {
		.type = BATON_MSG_APPEND, .term = 9, .from = 1, .to = 2};
	m.u.append = (struct baton_msg_append){
		.prev_index = 300,
		.prev_term = 8,
		.leader_commit = 299,
		.heartbeat_seq = 17,
		.n_entries = 1,
		.entries = es,
		.leader = fix_profile(1, 2, 0, 2, 3, 2)};
	return m;
}

static const uint8_t *set_argv[3] = {
	(const uint8_t *)"SET", (const uint8_t *)"k", (const uint8_t *)"v"};
static const size_t set_lens[3] = {3, 1, 1};
static const uint8_t *incr_argv[2] = {(const uint8_t *)"INCR",
				      (const uint8_t *)"n"};
static const size_t incr_lens[2] = {4, 1};
static struct baton_peer_command txn_cmds[2] = {{3, set_argv, set_lens},
						{2, incr_argv, incr_lens}};
static struct baton_peer_watch txn_watch = {(const uint8_t *)"k", 1,
					    0x0123456789abcdefull};

static struct baton_peer_frame single_forward(void)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_FORWARD};
	w.forward = (struct baton_peer_forward){
		.request_id = 42, .n_commands = 1, .commands = &txn_cmds[0]};
	return w;
}

static struct baton_peer_frame transaction(void)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_FORWARD};
	w.forward = (struct baton_peer_forward){.request_id = 43,
						.transaction = true,
						.n_commands = 2,
						.commands = txn_cmds,
						.n_watches = 1,
						.watches = &txn_watch};
	return w;
}

/* `want` encodes in v to exactly golden, and golden decodes in v to
 * `decoded`. */
static void check_at(struct baton_proto_version v, const uint8_t *golden,
		     size_t len, const struct baton_peer_frame *want,
		     const struct baton_peer_frame *decoded, const char *name)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_frame(v, want, &b), 0, "%s at %u", name,
		     v.value);
	cr_assert_eq(b.len, len, "%s at %u: %zu bytes, golden %zu", name,
		     v.value, b.len, len);
	cr_assert_eq(memcmp(b.data, golden, len), 0, "%s at %u: bytes differ",
		     name, v.value);
	baton_buf_free(&b);
	size_t body = 0, whole = 0;
	cr_assert_eq(baton_peer_split_framed(v, golden, len, &body, &whole), 1,
		     "%s at %u: not one whole frame", name, v.value);
	cr_assert_eq(whole, len, "%s at %u", name, v.value);
	struct baton_peer_frame f;
	int rv = baton_peer_decode(v, golden + BATON_PEER_PREFIX_LEN, body, &f);
	cr_assert_eq(rv, 0, "%s at %u: %s", name, v.value, f.why);
	const char *diff = NULL;
	cr_assert(fix_frame_eq(decoded, &f, &diff), "%s at %u: %s", name,
		  v.value, diff);
	baton_peer_frame_free(&f);
}

#define CHECK_AT(v, golden, want, decoded)                                     \
	check_at(v, golden, sizeof golden, want, decoded, #golden)

/* Decode bytes of one frame in v (in v's envelope: from 4 on, its
 * checksum checked first): the code, the frame freed. */
static int decode_at(struct baton_proto_version v, const uint8_t *frame,
		     size_t len)
{
	size_t body = 0, whole = 0;
	int split = baton_peer_split_framed(v, frame, len, &body, &whole);
	if (split != 1)
		return split == 0 ? BATON_ECORRUPT : split;
	cr_assert_eq(whole, len, "bytes after the frame");
	struct baton_peer_frame f;
	int rv = baton_peer_decode(v, frame + BATON_PEER_PREFIX_LEN, body, &f);
	if (rv != 0)
		cr_assert_not_null(f.why);
	baton_peer_frame_free(&f);
	return rv;
}

/* ---- Raft: 3 drops `from` and Append's leader ------------------------------
 */

Test(peer_protocols, append_differs_in_3)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_RAFT};
	w.raft = golden_append_msg();
	CHECK_AT(FIX_P1, golden_append_p1, &w, &w);
	/* 2 adds nothing to Raft messages: the same bytes as 1. */
	CHECK_AT(FIX_P2, golden_append_p1, &w, &w);
	struct baton_peer_frame d = w;
	d.raft.from = 0;
	memset(&d.raft.u.append.leader, 0, sizeof d.raft.u.append.leader);
	CHECK_AT(FIX_P3, golden_append_p3, &w, &d);
	/* 4: the messages of 3, each frame ending with its checksum. */
	CHECK_AT(FIX_P4, golden_append_p4, &w, &d);
}

Test(peer_protocols, frames_of_4_end_with_a_checksum_of_header_and_body)
{
	cr_assert(!baton_peer_proto_checksummed(FIX_P3));
	cr_assert(baton_peer_proto_checksummed(FIX_P4));
	struct baton_peer_frame w = single_forward();
	CHECK_AT(FIX_P4, golden_forward_p4, &w, &w);
	cr_assert_eq(sizeof golden_forward_p4,
		     sizeof golden_forward_p3 + BATON_PEER_CHECKSUM_LEN);
	cr_assert_eq(memcmp(golden_forward_p4, golden_forward_p3,
			    sizeof golden_forward_p3),
		     0);
	/* A frame of 3 on a link of 4 has no checksum: refused, and so is
	 * a frame of 4 any of whose bits (prefix, envelope or checksum)
	 * changed on the way. */
	uint8_t frame[sizeof golden_forward_p4 + BATON_PEER_CHECKSUM_LEN];
	memcpy(frame, golden_forward_p3, sizeof golden_forward_p3);
	memset(frame + sizeof golden_forward_p3, 0, BATON_PEER_CHECKSUM_LEN);
	size_t body = 0, whole = 0;
	cr_assert_eq(baton_peer_split_framed(FIX_P4, frame,
					     sizeof golden_forward_p4, &body,
					     &whole),
		     BATON_ECORRUPT);
	for (size_t bit = 0; bit < 8 * sizeof golden_forward_p4; bit++) {
		memcpy(frame, golden_forward_p4, sizeof golden_forward_p4);
		frame[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		/* Room after it: a damaged length may announce more. */
		memset(frame + sizeof golden_forward_p4, 0,
		       BATON_PEER_CHECKSUM_LEN);
		int rv = baton_peer_split_framed(FIX_P4, frame, sizeof frame,
						 &body, &whole);
		cr_assert(rv == BATON_ECORRUPT || rv == 0 ||
				  rv == BATON_ETOOBIG,
			  "bit %zu: %d", bit, rv);
		if (bit >= 8 * BATON_PEER_PREFIX_LEN)
			cr_assert_eq(rv, BATON_ECORRUPT, "bit %zu", bit);
	}
	/* Cut short: more bytes needed, nothing returned. */
	cr_assert_eq(baton_peer_split_framed(FIX_P4, golden_forward_p4,
					     sizeof golden_forward_p4 - 1,
					     &body, &whole),
		     0);
	/* The frozen handshake frames never carry one (version 0). */
	struct baton_buf b;
	baton_buf_init(&b);
	struct baton_peer_handshake h = {.cluster_id = "c", .node_id = 1};
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), 0);
	cr_assert_eq(baton_peer_split_framed((struct baton_proto_version){0},
					     b.data, b.len, &body, &whole),
		     1);
	cr_assert_eq(whole, b.len);
	/* ... unless sealed for a link of 4 (a refusal after the handshake). */
	cr_assert_eq(baton_peer_seal(FIX_P4, &b, 0), 0);
	cr_assert_eq(whole + BATON_PEER_CHECKSUM_LEN, b.len);
	cr_assert_eq(
		baton_peer_split_framed(FIX_P4, b.data, b.len, &body, &whole),
		1);
	cr_assert_eq(whole, b.len);
	baton_buf_free(&b);
}

Test(peer_protocols, a_decoder_of_3_ignores_what_3_dropped)
{
	/* A frame with `from` and the leader's profile (what 1 and 2 send),
	 * read in 3: both read as zeros. */
	struct baton_peer_frame f;
	cr_assert_eq(baton_peer_decode(
			     FIX_P3, golden_append_p1 + BATON_PEER_PREFIX_LEN,
			     sizeof golden_append_p1 - BATON_PEER_PREFIX_LEN,
			     &f),
		     0, "%s", f.why);
	cr_assert_eq(f.raft.from, 0);
	cr_assert_eq(f.raft.to, 2);
	cr_assert_eq(f.raft.u.append.leader.proto_max.value, 0);
	cr_assert_eq(f.raft.u.append.leader.release.minor, 0);
	cr_assert_eq(f.raft.u.append.n_entries, 1);
	baton_peer_frame_free(&f);
	/* The other way, a decoder of 1 reads a frame of 3 with no sender:
	 * the transport fills it from the handshake. */
	cr_assert_eq(baton_peer_decode(
			     FIX_P1, golden_append_p3 + BATON_PEER_PREFIX_LEN,
			     sizeof golden_append_p3 - BATON_PEER_PREFIX_LEN,
			     &f),
		     0, "%s", f.why);
	cr_assert_eq(f.raft.from, 0);
	baton_peer_frame_free(&f);
	/* Every message type carries `from` in 1 and 2 and not in 3. */
	for (uint32_t i = 0; i < FIX_N_RAFT; i++) {
		struct baton_msg m;
		fix_raft(i, &m);
		cr_assert_neq(m.from, 0);
		struct baton_buf b2, b3;
		baton_buf_init(&b2);
		baton_buf_init(&b3);
		cr_assert_eq(baton_peer_encode_raft(FIX_P2, &m, &b2), 0);
		cr_assert_eq(baton_peer_encode_raft(FIX_P3, &m, &b3), 0);
		cr_assert_lt(b3.len, b2.len, "sample %u is shorter in 3", i);
		baton_buf_free(&b2);
		baton_buf_free(&b3);
	}
}

/* The Append above with a clock sample {wall 1000, echo 900, hold 5} in 4:
 * fields 7, 8, 9 appended to Append (38 e8 07 40 84 07 48 05), the lengths
 * grown by 8, and XXH3-64 of it all (libxxhash, apart from this codec). */
static const uint8_t golden_append_clock_p4[] = {
	0x2b, 0x00, 0x00, 0x00, 0x1a, 0x29, 0x08, 0x03, 0x10, 0x09, 0x20,
	0x02, 0x3a, 0x21, 0x08, 0xac, 0x02, 0x10, 0x08, 0x18, 0xab, 0x02,
	0x20, 0x11, 0x2a, 0x0d, 0x08, 0x09, 0x10, 0xad, 0x02, 0x18, 0x02,
	0x22, 0x04, 0x4b, 0x00, 0x01, 0xff, 0x38, 0xe8, 0x07, 0x40, 0x84,
	0x07, 0x48, 0x05, 0xe9, 0x0d, 0x52, 0x6a, 0x7b, 0xf4, 0x85, 0x17,
};

Test(peer_protocols, clock_samples_travel_from_4_on)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_RAFT};
	w.raft = golden_append_msg();
	w.raft.u.append.clock = (struct baton_clock_sample){
		.wall_ms = 1000, .echo_wall_ms = 900, .echo_hold_ms = 5};
	struct baton_peer_frame d = w;
	d.raft.from = 0;
	memset(&d.raft.u.append.leader, 0, sizeof d.raft.u.append.leader);
	CHECK_AT(FIX_P4, golden_append_clock_p4, &w, &d);
	/* Not sent below 4: the frames of 1 to 3 stay as they were. */
	memset(&d.raft.u.append.clock, 0, sizeof d.raft.u.append.clock);
	CHECK_AT(FIX_P3, golden_append_p3, &w, &d);
	/* Nor read: a decoder of 3 given 4's envelope reads no sample. */
	struct baton_peer_frame f;
	cr_assert_eq(
		baton_peer_decode(
			FIX_P3, golden_append_clock_p4 + BATON_PEER_PREFIX_LEN,
			sizeof golden_append_clock_p4 - BATON_PEER_PREFIX_LEN -
				BATON_PEER_CHECKSUM_LEN,
			&f),
		0, "%s", f.why);
	cr_assert_eq(f.raft.u.append.clock.wall_ms, 0);
	cr_assert_eq(f.raft.u.append.clock.echo_wall_ms, 0);
	baton_peer_frame_free(&f);
	/* An AppendResult carries one too, in 4 only. */
	struct baton_msg r = {
		.type = BATON_MSG_APPEND_RESULT, .term = 9, .from = 2, .to = 1};
	r.u.append_result = (struct baton_msg_append_result){
		.success = true,
		.index = 301,
		.heartbeat_seq = 17,
		.clock = {.wall_ms = 1767225600123ull,
			  .echo_wall_ms = 1767225600100ull,
			  .echo_hold_ms = 3}};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P4, &r, &b), 0);
	cr_assert_eq(baton_peer_decode(FIX_P4, b.data + BATON_PEER_PREFIX_LEN,
				       b.len - BATON_PEER_PREFIX_LEN -
					       BATON_PEER_CHECKSUM_LEN,
				       &f),
		     0, "%s", f.why);
	cr_assert_eq(f.raft.u.append_result.clock.wall_ms, 1767225600123ull);
	cr_assert_eq(f.raft.u.append_result.clock.echo_wall_ms,
		     1767225600100ull);
	cr_assert_eq(f.raft.u.append_result.clock.echo_hold_ms, 3);
	baton_peer_frame_free(&f);
	size_t len4 = b.len - BATON_PEER_CHECKSUM_LEN;
	baton_buf_reset(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P3, &r, &b), 0);
	cr_assert_lt(b.len, len4, "3 carries no sample");
	baton_buf_free(&b);
}

/* ---- Forward: 2 adds transactions, 3 drops the single-command form ---------
 */

Test(peer_protocols, single_forward_differs_in_3)
{
	struct baton_peer_frame w = single_forward();
	CHECK_AT(FIX_P1, golden_forward_p1, &w, &w);
	CHECK_AT(FIX_P2, golden_forward_p1, &w, &w);
	CHECK_AT(FIX_P3, golden_forward_p3, &w, &w);
	CHECK_AT(FIX_P4, golden_forward_p4, &w, &w);
	/* 3 no longer reads the single-command form, and 1 and 2 do not
	 * read a list where they expect argv. */
	cr_assert_eq(
		decode_at(FIX_P3, golden_forward_p1, sizeof golden_forward_p1),
		BATON_ECORRUPT);
	cr_assert_eq(
		decode_at(FIX_P1, golden_forward_p3, sizeof golden_forward_p3),
		BATON_ECORRUPT);
	cr_assert_eq(
		decode_at(FIX_P2, golden_forward_p3, sizeof golden_forward_p3),
		BATON_ECORRUPT);
}

Test(peer_protocols, transactions_from_2_on)
{
	struct baton_peer_frame w = transaction();
	CHECK_AT(FIX_P2, golden_transaction_p2, &w, &w);
	CHECK_AT(FIX_P3, golden_transaction_p2, &w, &w);
	/* Protocol 1 cannot carry it: refused, nothing written. */
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &w, &b), BATON_EVERSION);
	w.forward.n_commands = 1; /* one command, still a transaction */
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &w, &b), BATON_EVERSION);
	w.forward.n_watches = 0;
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &w, &b), BATON_EVERSION);
	cr_assert_eq(b.len, 0);
	/* A decoder of 1 skips the fields 1 does not know, as a release of
	 * 1 does: what is left is a forward without a command. */
	cr_assert_eq(decode_at(FIX_P1, golden_transaction_p2,
			       sizeof golden_transaction_p2),
		     BATON_ECORRUPT);
	baton_buf_free(&b);
}

Test(peer_protocols, empty_transactions_and_many_watches)
{
	static struct baton_peer_watch ws[3] = {
		{(const uint8_t *)"a", 1, 0},
		{NULL, 0, UINT64_MAX}, /* the empty key */
		{(const uint8_t *)"\0\xff", 2, 7}};
	struct baton_peer_frame w = {.kind = BATON_PEER_FORWARD};
	w.forward = (struct baton_peer_forward){.request_id = 1,
						.transaction = true,
						.n_watches = 3,
						.watches = ws};
	for (uint32_t v = 2; v <= 3; v++) {
		struct baton_proto_version pv = {v};
		struct baton_buf b;
		baton_buf_init(&b);
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b), 0);
		struct baton_peer_frame f;
		cr_assert_eq(baton_peer_decode(pv, b.data + 4, b.len - 4, &f),
			     0, "%s", f.why);
		const char *diff = NULL;
		cr_assert(fix_frame_eq(&w, &f, &diff), "at %u: %s", v, diff);
		cr_assert_not_null(f.forward.watches[1].key);
		baton_peer_frame_free(&f);
		baton_buf_free(&b);
	}
}

Test(peer_protocols, the_forward_encoder_refuses_what_cannot_travel)
{
	struct baton_buf b;
	baton_buf_init(&b);
	struct baton_peer_frame w = single_forward();
	for (uint32_t v = 1; v <= 3; v++) {
		struct baton_proto_version pv = {v};
		w = single_forward();
		w.forward.n_commands = 0; /* a single command needs one */
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b), BATON_EINVAL);
		w = single_forward();
		w.forward.n_commands = 2;
		w.forward.commands = txn_cmds;
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b), BATON_EINVAL,
			     "several commands are a transaction");
		w = single_forward();
		w.forward.n_watches = 1;
		w.forward.watches = &txn_watch;
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b), BATON_EINVAL,
			     "watches are a transaction's");
		w = transaction();
		w.forward.n_watches = BATON_PEER_FORWARD_WATCHES_MAX + 1;
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b),
			     BATON_ETOOBIG);
		w = transaction();
		w.forward.n_commands = BATON_PEER_FORWARD_COMMANDS_MAX + 1;
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b),
			     BATON_ETOOBIG);
		w = transaction();
		struct baton_peer_watch nokey = {NULL, 3, 1};
		w.forward.watches = &nokey;
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b), BATON_EINVAL);
		w = transaction();
		struct baton_peer_command cs[2] = {txn_cmds[0],
						   {0, NULL, NULL}};
		w.forward.commands = cs;
		cr_assert_eq(baton_peer_encode_frame(pv, &w, &b), BATON_EINVAL);
	}
	cr_assert_eq(b.len, 0);
	baton_buf_free(&b);
}

/* Forward{1, <fields>} in version v. */
static int decode_forward(struct baton_proto_version v,
			  const struct baton_buf *fw)
{
	struct baton_buf env;
	baton_buf_init(&env);
	pw_msg(&env, 4, fw);
	struct baton_peer_frame f;
	int rv = baton_peer_decode(v, env.data, env.len, &f);
	if (rv != 0)
		cr_assert_not_null(f.why);
	baton_peer_frame_free(&f);
	baton_buf_free(&env);
	return rv;
}

Test(peer_protocols, malformed_transactions)
{
	struct baton_buf fw, cmd, watch;
	baton_buf_init(&fw);
	baton_buf_init(&cmd);
	baton_buf_init(&watch);
	pw_bytes(&cmd, 1, "GET", 3);
	pw_bytes(&watch, 1, "k", 1);

	/* A list without the transaction flag in 2: refused. */
	pw_uint(&fw, 1, 1);
	pw_msg(&fw, 3, &cmd);
	cr_assert_eq(decode_forward(FIX_P2, &fw), BATON_ECORRUPT);
	cr_assert_eq(decode_forward(FIX_P3, &fw), 0, "3's single form");
	/* Both forms at once in 2. */
	pw_uint(&fw, 5, 1);
	cr_assert_eq(decode_forward(FIX_P2, &fw), 0);
	pw_bytes(&fw, 2, "GET", 3);
	cr_assert_eq(decode_forward(FIX_P2, &fw), BATON_ECORRUPT);
	/* A command without arguments. */
	baton_buf_reset(&fw);
	baton_buf_reset(&cmd);
	pw_uint(&fw, 5, 1);
	pw_msg(&fw, 3, &cmd);
	cr_assert_eq(decode_forward(FIX_P2, &fw), BATON_ECORRUPT);
	cr_assert_eq(decode_forward(FIX_P3, &fw), BATON_ECORRUPT);
	/* Watches on a single command in 3. */
	baton_buf_reset(&fw);
	pw_bytes(&cmd, 1, "GET", 3);
	pw_msg(&fw, 3, &cmd);
	pw_msg(&fw, 4, &watch);
	cr_assert_eq(decode_forward(FIX_P3, &fw), BATON_ECORRUPT);
	/* Two commands without the flag in 3. */
	baton_buf_reset(&fw);
	pw_msg(&fw, 3, &cmd);
	pw_msg(&fw, 3, &cmd);
	cr_assert_eq(decode_forward(FIX_P3, &fw), BATON_ECORRUPT);
	/* Too many watches (the most allowed pass). */
	baton_buf_reset(&fw);
	pw_uint(&fw, 5, 1);
	for (uint32_t i = 0; i < BATON_PEER_FORWARD_WATCHES_MAX; i++)
		pw_msg(&fw, 4, &watch);
	cr_assert_eq(decode_forward(FIX_P3, &fw), 0);
	pw_msg(&fw, 4, &watch);
	cr_assert_eq(decode_forward(FIX_P3, &fw), BATON_ETOOBIG);
	baton_buf_free(&fw);
	baton_buf_free(&cmd);
	baton_buf_free(&watch);
}

/* ---- every pair of releases ------------------------------------------------
 */

/* The releases of the table and what each pair negotiates (0: refused,
 * no common version), written out. */
static const struct baton_release releases[] = {
	{0, 1, 0}, {1, 0, 0}, {1, 1, 0}, {1, 2, 0}, {1, 3, 0}, {2, 0, 0}};
#define N_RELEASES (sizeof releases / sizeof releases[0])
static const uint32_t expected[N_RELEASES][N_RELEASES] = {
	/*            0.1.0 1.0.0 1.1.0 1.2.0 1.3.0 2.0.0 */
	/* 0.1.0 */ {1, 1, 1, 0, 0, 0},
	/* 1.0.0 */ {1, 1, 1, 0, 0, 0},
	/* 1.1.0 */ {1, 1, 2, 2, 2, 0},
	/* 1.2.0 */ {0, 0, 2, 3, 3, 0},
	/* 1.3.0 */ {0, 0, 2, 3, 3, 0},
	/* 2.0.0 */ {0, 0, 0, 0, 0, 4},
};

Test(peer_protocols, every_pair_of_releases)
{
	uint32_t n = 0;
	baton_releases(&n);
	cr_assert_eq(n, N_RELEASES, "a new release: add it to this table");
	for (size_t i = 0; i < N_RELEASES; i++) {
		const struct baton_profile *a = baton_release_find(releases[i]);
		cr_assert_not_null(a);
		for (size_t j = 0; j < N_RELEASES; j++) {
			const struct baton_profile *b =
				baton_release_find(releases[j]);
			struct baton_proto_version v = {99};
			int rv = baton_peer_choose_proto(*a, *b, &v);
			uint32_t want = expected[i][j];
			cr_assert_eq(v.value, want, "%zu,%zu", i, j);
			cr_assert_eq(rv, want == 0 ? BATON_EVERSION : 0);
			if (want == 0) {
				char text[BATON_PEER_REFUSAL_MAX], ra[32],
					rb[32];
				struct baton_member_versions ma = {1, *a},
							     mb = {2, *b};
				baton_peer_proto_mismatch(&ma, &mb, text,
							  sizeof text);
				/* With 2.0.0 on one side and 1.x on the
				 * other no release bridges: the relay. */
				bool relay = (i == N_RELEASES - 1) !=
					     (j == N_RELEASES - 1);
				if (relay) {
					char want_text[128];
					snprintf(
						want_text, sizeof want_text,
						"no common peer protocol (ours "
						"%u-%u, theirs %u-%u): upgrade "
						"through the relay, "
						"docs/relay.md",
						a->proto_min.value,
						a->proto_max.value,
						b->proto_min.value,
						b->proto_max.value);
					cr_assert_str_eq(text, want_text);
					continue;
				}
				cr_assert_not_null(strstr(
					text,
					baton_release_format(a->release, ra)));
				cr_assert_not_null(strstr(
					text,
					baton_release_format(b->release, rb)));
				continue;
			}
			/* Both ends accept the choice and speak it. */
			cr_assert_eq(baton_peer_check_choice(*a, v), 0);
			cr_assert_eq(baton_peer_check_choice(*b, v), 0);
			struct baton_buf buf;
			baton_buf_init(&buf);
			struct baton_peer_frame w = single_forward();
			cr_assert_eq(baton_peer_encode_frame(v, &w, &buf), 0);
			cr_assert_eq(decode_at(v, buf.data, buf.len), 0);
			w = transaction();
			baton_buf_reset(&buf);
			cr_assert_eq(baton_peer_encode_frame(v, &w, &buf),
				     v.value >= 2 ? 0 : BATON_EVERSION);
			baton_buf_free(&buf);
		}
	}
}

Test(peer_protocols, the_strict_release_text_names_both_releases)
{
	char text[BATON_PEER_REFUSAL_MAX];
	struct baton_member_versions me = {1, fix_profile(1, 2, 0, 2, 3, 2)};
	struct baton_member_versions it = {4, fix_profile(1, 1, 0, 1, 2, 2)};
	cr_assert_eq(baton_peer_release_mismatch(&me, &it, text, sizeof text),
		     text);
	cr_assert_str_eq(text, "strict release: node 1 runs release 1.2.0, "
			       "node 4 runs release 1.1.0, and mixed "
			       "releases are refused");
	char tiny[7];
	baton_peer_release_mismatch(&me, &it, tiny, sizeof tiny);
	cr_assert_str_eq(tiny, "strict");
}
