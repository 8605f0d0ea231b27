/*
 * Golden bytes of peer protocol version 1: what a release speaking it puts
 * on the wire. Every later release must still decode these to the same
 * values (formats only grow), and encoding the same values must still give
 * exactly these bytes (fields at their default are never sent, so a field
 * added later does not change them). Never edit a vector; add new ones.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "peer_fixtures.h"

static const uint8_t golden_handshake[] = {
	0x29, 0x00, 0x00, 0x00, 0x0a, 0x27, 0x0a, 0x04, 0x70, 0x72, 0x6f, 0x64,
	0x10, 0x03, 0x1a, 0x0e, 0x0a, 0x06, 0x08, 0x01, 0x10, 0x04, 0x18, 0x02,
	0x10, 0x02, 0x18, 0x05, 0x20, 0x03, 0x22, 0x0d, 0x31, 0x30, 0x2e, 0x30,
	0x2e, 0x30, 0x2e, 0x33, 0x3a, 0x37, 0x30, 0x30, 0x31,
};
static const uint8_t golden_handshake_reply[] = {
	0x2d, 0x00, 0x00, 0x00, 0x12, 0x2b, 0x08, 0x01, 0x10, 0x04,
	0x22, 0x25, 0x0a, 0x04, 0x70, 0x72, 0x6f, 0x64, 0x10, 0x01,
	0x1a, 0x0c, 0x0a, 0x04, 0x08, 0x01, 0x10, 0x05, 0x10, 0x03,
	0x18, 0x06, 0x20, 0x04, 0x22, 0x0d, 0x31, 0x30, 0x2e, 0x30,
	0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x37, 0x30, 0x30, 0x31,
};
static const uint8_t golden_vote[] = {
	0x23, 0x00, 0x00, 0x00, 0x1a, 0x21, 0x08, 0x01, 0x10, 0x09,
	0x18, 0x02, 0x20, 0x01, 0x2a, 0x17, 0x08, 0xac, 0x02, 0x10,
	0x08, 0x18, 0x01, 0x2a, 0x0e, 0x0a, 0x06, 0x08, 0x01, 0x10,
	0x04, 0x18, 0x02, 0x10, 0x02, 0x18, 0x05, 0x20, 0x03,
};
static const uint8_t golden_append[] = {
	0x3c, 0x00, 0x00, 0x00, 0x1a, 0x3a, 0x08, 0x03, 0x10, 0x09, 0x18,
	0x01, 0x20, 0x02, 0x3a, 0x30, 0x08, 0xac, 0x02, 0x10, 0x08, 0x18,
	0xab, 0x02, 0x20, 0x11, 0x2a, 0x07, 0x08, 0x09, 0x10, 0xad, 0x02,
	0x18, 0x01, 0x2a, 0x0d, 0x08, 0x09, 0x10, 0xae, 0x02, 0x18, 0x02,
	0x22, 0x04, 0x4b, 0x00, 0x01, 0xff, 0x32, 0x0c, 0x0a, 0x04, 0x08,
	0x01, 0x10, 0x05, 0x10, 0x03, 0x18, 0x06, 0x20, 0x04,
};
static const uint8_t golden_snapshot[] = {
	0x2c, 0x00, 0x00, 0x00, 0x1a, 0x2a, 0x08, 0x05, 0x10, 0x09, 0x18, 0x01,
	0x20, 0x03, 0x4a, 0x20, 0x0a, 0x13, 0x08, 0xfa, 0x01, 0x10, 0x07, 0x1a,
	0x04, 0x08, 0x01, 0x10, 0x01, 0x1a, 0x04, 0x08, 0x03, 0x10, 0x02, 0x20,
	0x03, 0x10, 0x0a, 0x18, 0x07, 0x22, 0x03, 0x01, 0x02, 0x03, 0x28, 0x01,
};
static const uint8_t golden_read_index_result[] = {
	0x15, 0x00, 0x00, 0x00, 0x1a, 0x13, 0x08, 0x09, 0x10,
	0x09, 0x18, 0x01, 0x20, 0x02, 0x6a, 0x09, 0x08, 0x05,
	0x10, 0xae, 0x02, 0x18, 0xe5, 0xd4, 0x03,
};
static const uint8_t golden_forward[] = {
	0x0e, 0x00, 0x00, 0x00, 0x22, 0x0c, 0x08, 0x2a, 0x12,
	0x03, 0x53, 0x45, 0x54, 0x12, 0x01, 0x6b, 0x12, 0x00,
};
static const uint8_t golden_forward_reply[] = {
	0x0b, 0x00, 0x00, 0x00, 0x2a, 0x09, 0x08, 0x2a,
	0x12, 0x05, 0x2b, 0x4f, 0x4b, 0x0d, 0x0a,
};
static const uint8_t golden_forward_error[] = {
	0x0f, 0x00, 0x00, 0x00, 0x2a, 0x0d, 0x08, 0x2b, 0x1a, 0x09,
	0x6e, 0x6f, 0x20, 0x6c, 0x65, 0x61, 0x64, 0x65, 0x72,
};

/* Check one vector against the frame it must decode to (kind and the
 * matching member of `want`), and the encoding of that frame. */
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

Test(peer_golden, handshake)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_HANDSHAKE};
	w.handshake = (struct baton_peer_handshake){
		.cluster_id = "prod",
		.node_id = 3,
		.profile = fix_profile(1, 4, 2, 2, 5, 3),
		.peer_addr = "10.0.0.3:7001"};
	CHECK(golden_handshake, &w);

	w.kind = BATON_PEER_HANDSHAKE_REPLY;
	w.handshake_reply = (struct baton_peer_handshake_reply){
		.accepted = true,
		.proto = {4},
		.reason = "",
		.self = {.cluster_id = "prod",
			 .node_id = 1,
			 .profile = fix_profile(1, 5, 0, 3, 6, 4),
			 .peer_addr = "10.0.0.1:7001"}};
	CHECK(golden_handshake_reply, &w);
}

Test(peer_golden, raft)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_RAFT};
	struct baton_msg *m = &w.raft;
	*m = (struct baton_msg){
		.type = BATON_MSG_VOTE, .term = 9, .from = 2, .to = 1};
	m->u.vote = (struct baton_msg_vote){
		.last_log_index = 300,
		.last_log_term = 8,
		.pre_vote = true,
		.candidate = fix_profile(1, 4, 2, 2, 5, 3)};
	CHECK(golden_vote, &w);

	static uint8_t data[] = {'K', 0, 1, 0xff};
	struct baton_entry es[2] = {
		{.term = 9, .index = 301, .type = BATON_ENTRY_NOOP},
		{.term = 9,
		 .index = 302,
		 .type = BATON_ENTRY_COMMAND,
		 .len = sizeof data,
		 .buf = data}};
	*m = (struct baton_msg){
		.type = BATON_MSG_APPEND, .term = 9, .from = 1, .to = 2};
	m->u.append = (struct baton_msg_append){
		.prev_index = 300,
		.prev_term = 8,
		.leader_commit = 299,
		.heartbeat_seq = 17,
		.n_entries = 2,
		.entries = es,
		.leader = fix_profile(1, 5, 0, 3, 6, 4)};
	CHECK(golden_append, &w);

	static uint8_t chunk[] = {1, 2, 3};
	*m = (struct baton_msg){
		.type = BATON_MSG_SNAPSHOT, .term = 9, .from = 1, .to = 3};
	m->u.snapshot.meta.index = 250;
	m->u.snapshot.meta.term = 7;
	m->u.snapshot.meta.config_index = 3;
	m->u.snapshot.meta.config.n = 2;
	m->u.snapshot.meta.config.members[0] =
		(struct baton_member){.id = 1, .role = BATON_VOTER};
	m->u.snapshot.meta.config.members[1] =
		(struct baton_member){.id = 3, .role = BATON_LEARNER};
	m->u.snapshot.total_len = 10;
	m->u.snapshot.offset = 7;
	m->u.snapshot.chunk_len = sizeof chunk;
	m->u.snapshot.chunk = chunk;
	m->u.snapshot.last_chunk = true;
	CHECK(golden_snapshot, &w);

	*m = (struct baton_msg){.type = BATON_MSG_READ_INDEX_RESULT,
				.term = 9,
				.from = 1,
				.to = 2};
	m->u.read_index_result = (struct baton_msg_read_index_result){
		.request_id = 5, .read_index = 302, .status = -30003};
	CHECK(golden_read_index_result, &w);
}

Test(peer_golden, forward)
{
	const uint8_t *argv[3] = {(const uint8_t *)"SET", (const uint8_t *)"k",
				  (const uint8_t *)""};
	const size_t lens[3] = {3, 1, 0};
	struct baton_peer_frame w = {.kind = BATON_PEER_FORWARD};
	w.forward = (struct baton_peer_forward){
		.request_id = 42, .argc = 3, .argv = argv, .lens = lens};
	CHECK(golden_forward, &w);

	w.kind = BATON_PEER_FORWARD_REPLY;
	w.forward_reply = (struct baton_peer_forward_reply){
		.request_id = 42,
		.resp_reply = (const uint8_t *)"+OK\r\n",
		.resp_len = 5};
	CHECK(golden_forward_reply, &w);

	w.forward_reply = (struct baton_peer_forward_reply){
		.request_id = 43, .error = "no leader"};
	CHECK(golden_forward_error, &w);
}
