/*
 * The frames of joining and of the version table: the cluster view in the
 * frozen handshake reply (its round trip, its absence in older replies,
 * its bounds), join requests and replies, and info requests and results
 * (with extra keys decoded and ignored), with golden bytes.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "peer_fixtures.h"

/* HandshakeReply{accepted, proto 2, self{prod, 1, 1.2.0 {2..3, 2},
 * 10.0.0.1:7001}, cluster{leader 2 at 10.0.0.2:7001, machine 2, floor
 * 1.1.0, rows 1: 1.2.0 {2..3, 2}, 2: 1.1.0 {1..2, 2}, strict 1.2.0}}. */
static const uint8_t golden_handshake_reply_view[] = {
	0x74, 0x00, 0x00, 0x00, 0x12, 0x72, 0x08, 0x01, 0x10, 0x02, 0x22, 0x25,
	0x0a, 0x04, 0x70, 0x72, 0x6f, 0x64, 0x10, 0x01, 0x1a, 0x0c, 0x0a, 0x04,
	0x08, 0x01, 0x10, 0x02, 0x10, 0x02, 0x18, 0x03, 0x20, 0x02, 0x22, 0x0d,
	0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x37, 0x30, 0x30,
	0x31, 0x2a, 0x45, 0x08, 0x02, 0x12, 0x0d, 0x31, 0x30, 0x2e, 0x30, 0x2e,
	0x30, 0x2e, 0x32, 0x3a, 0x37, 0x30, 0x30, 0x31, 0x1a, 0x2c, 0x08, 0x02,
	0x12, 0x04, 0x08, 0x01, 0x10, 0x01, 0x1a, 0x10, 0x08, 0x01, 0x12, 0x0c,
	0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x10, 0x02, 0x18, 0x03, 0x20, 0x02,
	0x1a, 0x10, 0x08, 0x02, 0x12, 0x0c, 0x0a, 0x04, 0x08, 0x01, 0x10, 0x01,
	0x10, 0x01, 0x18, 0x02, 0x20, 0x02, 0x22, 0x04, 0x08, 0x01, 0x10, 0x02,
};
/* The reply of a release before the view (test_peer_golden.c's). */
static const uint8_t golden_handshake_reply_old[] = {
	0x2d, 0x00, 0x00, 0x00, 0x12, 0x2b, 0x08, 0x01, 0x10, 0x04,
	0x22, 0x25, 0x0a, 0x04, 0x70, 0x72, 0x6f, 0x64, 0x10, 0x01,
	0x1a, 0x0c, 0x0a, 0x04, 0x08, 0x01, 0x10, 0x05, 0x10, 0x03,
	0x18, 0x06, 0x20, 0x04, 0x22, 0x0d, 0x31, 0x30, 0x2e, 0x30,
	0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x37, 0x30, 0x30, 0x31,
};
/* JoinRequest{4, 10.0.0.4:7001, 10.0.0.4:6379, 1.2.0 {2..3, 2}}. */
static const uint8_t golden_join[] = {
	0x30, 0x00, 0x00, 0x00, 0x32, 0x2e, 0x08, 0x04, 0x12, 0x0d, 0x31,
	0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x34, 0x3a, 0x37, 0x30, 0x30,
	0x31, 0x1a, 0x0d, 0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x34,
	0x3a, 0x36, 0x33, 0x37, 0x39, 0x22, 0x0c, 0x0a, 0x04, 0x08, 0x01,
	0x10, 0x02, 0x10, 0x02, 0x18, 0x03, 0x20, 0x02,
};
/* JoinReply{refused "no", leader 1 at 10.0.0.1:7001 / :6379, 1.0.0 {1..1,
 * 1}}. */
static const uint8_t golden_join_reply[] = {
	0x32, 0x00, 0x00, 0x00, 0x3a, 0x30, 0x12, 0x02, 0x6e, 0x6f, 0x18,
	0x01, 0x22, 0x0d, 0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31,
	0x3a, 0x37, 0x30, 0x30, 0x31, 0x2a, 0x0d, 0x31, 0x30, 0x2e, 0x30,
	0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x36, 0x33, 0x37, 0x39, 0x32, 0x0a,
	0x0a, 0x02, 0x08, 0x01, 0x10, 0x01, 0x18, 0x01, 0x20, 0x01,
};
/* Raft{INFO, term 9, 1 -> 2, Info{seq 5}} in 1 (and 2). */
static const uint8_t golden_info_p1[] = {
	0x0e, 0x00, 0x00, 0x00, 0x1a, 0x0c, 0x08, 0x0a, 0x10,
	0x09, 0x18, 0x01, 0x20, 0x02, 0x72, 0x02, 0x08, 0x05,
};
/* Raft{INFO_RESULT, term 9, 2 -> 1, {seq 5, 1.1.0 {1..2, 2}}}: in 1, and
 * in 3 without `from`. */
static const uint8_t golden_info_result_p1[] = {
	0x1c, 0x00, 0x00, 0x00, 0x1a, 0x1a, 0x08, 0x0b, 0x10, 0x09, 0x18,
	0x02, 0x20, 0x01, 0x7a, 0x10, 0x08, 0x05, 0x12, 0x0c, 0x0a, 0x04,
	0x08, 0x01, 0x10, 0x01, 0x10, 0x01, 0x18, 0x02, 0x20, 0x02,
};
static const uint8_t golden_info_result_p3[] = {
	0x1a, 0x00, 0x00, 0x00, 0x1a, 0x18, 0x08, 0x0b, 0x10, 0x09,
	0x20, 0x01, 0x7a, 0x10, 0x08, 0x05, 0x12, 0x0c, 0x0a, 0x04,
	0x08, 0x01, 0x10, 0x01, 0x10, 0x01, 0x18, 0x02, 0x20, 0x02,
};

static struct baton_peer_handshake_reply view_reply(void)
{
	struct baton_peer_handshake_reply r = {
		.accepted = true,
		.proto = {2},
		.reason = "",
		.self = {.cluster_id = "prod",
			 .node_id = 1,
			 .profile = fix_profile(1, 2, 0, 2, 3, 2),
			 .peer_addr = "10.0.0.1:7001"},
		.has_cluster = true};
	struct baton_peer_cluster_view *c = &r.cluster;
	c->leader_id = 2;
	c->leader_peer_addr = "10.0.0.2:7001";
	c->versions.machine.value = 2;
	c->versions.floor = (struct baton_release){1, 1, 0};
	c->versions.n = 2;
	c->versions.members[0] = (struct baton_member_versions){
		1, fix_profile(1, 2, 0, 2, 3, 2)};
	c->versions.members[1] = (struct baton_member_versions){
		2, fix_profile(1, 1, 0, 1, 2, 2)};
	c->strict_release = (struct baton_release){1, 2, 0};
	return r;
}

/* Encode want in v (the frozen frames without one) to exactly golden;
 * decode golden in every version to want. */
static void check(const uint8_t *golden, size_t len,
		  const struct baton_peer_frame *want, const char *name)
{
	for (uint32_t v = 1; v <= 3; v++) {
		struct baton_proto_version pv = {v};
		struct baton_buf b;
		baton_buf_init(&b);
		int rv = want->kind == BATON_PEER_HANDSHAKE_REPLY
				 ? baton_peer_encode_handshake_reply(
					   &want->handshake_reply, &b)
				 : baton_peer_encode_frame(pv, want, &b);
		cr_assert_eq(rv, 0, "%s at %u", name, v);
		cr_assert_eq(b.len, len, "%s at %u: %zu bytes, golden %zu",
			     name, v, b.len, len);
		cr_assert_eq(memcmp(b.data, golden, len), 0,
			     "%s at %u: bytes differ", name, v);
		baton_buf_free(&b);
		struct baton_peer_frame f;
		rv = baton_peer_decode(pv, golden + BATON_PEER_PREFIX_LEN,
				       len - BATON_PEER_PREFIX_LEN, &f);
		cr_assert_eq(rv, 0, "%s at %u: %s", name, v, f.why);
		const char *diff = NULL;
		cr_assert(fix_frame_eq(want, &f, &diff), "%s at %u: %s", name,
			  v, diff);
		baton_peer_frame_free(&f);
	}
}

#define CHECK(golden, want) check(golden, sizeof golden, want, #golden)

/* Decode an envelope built by hand in version v. */
static int decode_env_at(struct baton_proto_version v,
			 const struct baton_buf *env)
{
	struct baton_peer_frame f;
	int rv = baton_peer_decode(v, env->data, env->len, &f);
	if (rv != 0)
		cr_assert_not_null(f.why);
	baton_peer_frame_free(&f);
	return rv;
}

/* ---- the cluster view -----------------------------------------------------
 */

Test(peer_view, golden_round_trip)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_HANDSHAKE_REPLY};
	w.handshake_reply = view_reply();
	CHECK(golden_handshake_reply_view, &w);
	/* The frozen decoder reads it too, as a release that cannot talk to
	 * this one would. */
	struct baton_peer_frame f;
	cr_assert_eq(
		baton_peer_decode_handshake(golden_handshake_reply_view +
						    BATON_PEER_PREFIX_LEN,
					    sizeof golden_handshake_reply_view -
						    BATON_PEER_PREFIX_LEN,
					    &f),
		0);
	cr_assert(f.handshake_reply.has_cluster);
	cr_assert_eq(f.handshake_reply.cluster.versions.n, 2);
	cr_assert_str_eq(f.handshake_reply.cluster.leader_peer_addr,
			 "10.0.0.2:7001");
	baton_peer_frame_free(&f);
}

Test(peer_view, an_older_reply_has_no_view)
{
	struct baton_peer_frame f;
	cr_assert_eq(baton_peer_decode_handshake(
			     golden_handshake_reply_old + BATON_PEER_PREFIX_LEN,
			     sizeof golden_handshake_reply_old -
				     BATON_PEER_PREFIX_LEN,
			     &f),
		     0);
	cr_assert_eq(f.kind, BATON_PEER_HANDSHAKE_REPLY);
	cr_assert_not(f.handshake_reply.has_cluster);
	cr_assert_eq(f.handshake_reply.self.node_id, 1);
	baton_peer_frame_free(&f);
	/* And a reply without a view is still the old bytes. */
	struct baton_peer_handshake_reply r = view_reply();
	r.has_cluster = false;
	r.proto.value = 4;
	r.self.profile = fix_profile(1, 5, 0, 3, 6, 4);
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), 0);
	cr_assert_eq(b.len, sizeof golden_handshake_reply_old);
	cr_assert_eq(memcmp(b.data, golden_handshake_reply_old, b.len), 0);
	baton_buf_free(&b);
}

Test(peer_view, every_table_size_and_a_refusal)
{
	for (uint32_t n = 0; n <= BATON_MAX_MEMBERS; n++) {
		struct baton_peer_handshake_reply r = view_reply();
		r.accepted = n % 2 == 0;
		r.reason = r.accepted ? "" : "no common peer protocol version";
		fix_view(n, &r.cluster);
		if (n == 0) { /* the initial state, no leader: still a view */
			memset(&r.cluster, 0, sizeof r.cluster);
			baton_version_state_initial(&r.cluster.versions);
		}
		struct baton_buf b;
		baton_buf_init(&b);
		cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), 0);
		struct baton_peer_frame f;
		cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0, "%s", f.why);
		struct baton_peer_frame w = {
			.kind = BATON_PEER_HANDSHAKE_REPLY};
		w.handshake_reply = r;
		const char *diff = NULL;
		cr_assert(fix_frame_eq(&w, &f, &diff), "%u rows: %s", n, diff);
		baton_peer_frame_free(&f);
		baton_buf_free(&b);
	}
}

Test(peer_view, the_encoder_refuses_a_bad_view)
{
	struct baton_buf b;
	baton_buf_init(&b);
	struct baton_peer_handshake_reply r = view_reply();
	r.cluster.versions.machine.value = 0;
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), BATON_EINVAL);
	r = view_reply();
	r.cluster.versions.n = BATON_MAX_MEMBERS + 1;
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), BATON_EINVAL);
	r = view_reply();
	r.cluster.versions.members[1].id = 1;
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), BATON_EINVAL);
	char addr[BATON_PEER_ADDR_MAX + 2];
	memset(addr, 'a', sizeof addr - 1);
	addr[sizeof addr - 1] = '\0';
	r = view_reply();
	r.cluster.leader_peer_addr = addr;
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), BATON_ETOOBIG);
	addr[BATON_PEER_ADDR_MAX] = '\0'; /* the longest allowed */
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), 0);
	baton_buf_free(&b);
}

/* Envelope{handshake_reply{accepted false, cluster: view}}. */
static int decode_view(const struct baton_buf *view)
{
	struct baton_buf reply, env;
	baton_buf_init(&reply);
	baton_buf_init(&env);
	pw_bytes(&reply, 3, "no", 2);
	pw_msg(&reply, 5, view);
	pw_msg(&env, 2, &reply);
	struct baton_peer_frame f;
	int rv = baton_peer_decode_handshake(env.data, env.len, &f);
	if (rv != 0)
		cr_assert_not_null(f.why);
	baton_peer_frame_free(&f);
	baton_buf_free(&reply);
	baton_buf_free(&env);
	return rv;
}

/* MemberVersions{id, Profile{proto 1..1}} appended to a VersionState. */
static void row(struct baton_buf *st, uint64_t id)
{
	struct baton_buf r, p;
	baton_buf_init(&r);
	baton_buf_init(&p);
	pw_uint(&p, 2, 1);
	pw_uint(&p, 3, 1);
	pw_uint(&r, 1, id);
	pw_msg(&r, 2, &p);
	pw_msg(st, 3, &r);
	baton_buf_free(&r);
	baton_buf_free(&p);
}

Test(peer_view, the_decoder_refuses_a_bad_view)
{
	struct baton_buf view, st, rel;
	baton_buf_init(&view);
	baton_buf_init(&st);
	baton_buf_init(&rel);

	pw_uint(&st, 1, 1);
	for (uint32_t i = 0; i < BATON_MAX_MEMBERS; i++)
		row(&st, i + 1);
	pw_uint(&view, 1, 2);
	pw_msg(&view, 3, &st);
	cr_assert_eq(decode_view(&view), 0, "the most rows allowed");
	row(&st, BATON_MAX_MEMBERS + 1);
	baton_buf_reset(&view);
	pw_msg(&view, 3, &st);
	cr_assert_eq(decode_view(&view), BATON_ECORRUPT, "17 rows");

	baton_buf_reset(&view);
	pw_uint(&view, 1, 2);
	cr_assert_eq(decode_view(&view), BATON_ECORRUPT, "no version state");

	baton_buf_reset(&st);
	baton_buf_reset(&view);
	pw_uint(&st, 1, 1);
	row(&st, 3);
	row(&st, 3);
	pw_msg(&view, 3, &st);
	cr_assert_eq(decode_view(&view), BATON_ECORRUPT, "a row twice");

	baton_buf_reset(&st);
	baton_buf_reset(&view);
	pw_msg(&view, 3, &st); /* machine version 0 */
	cr_assert_eq(decode_view(&view), BATON_ECORRUPT, "machine 0");

	baton_buf_reset(&st);
	baton_buf_reset(&view);
	pw_uint(&st, 1, 1);
	pw_msg(&view, 3, &st);
	pw_uint(&rel, 1, 65536);
	pw_msg(&view, 4, &rel);
	cr_assert_eq(decode_view(&view), BATON_ECORRUPT, "strict release");

	char addr[BATON_PEER_ADDR_MAX + 1];
	memset(addr, 'a', sizeof addr);
	baton_buf_reset(&view);
	pw_msg(&view, 3, &st);
	pw_bytes(&view, 2, addr, BATON_PEER_ADDR_MAX);
	cr_assert_eq(decode_view(&view), 0, "the longest address");
	pw_bytes(&view, 2, addr, BATON_PEER_ADDR_MAX + 1);
	cr_assert_eq(decode_view(&view), BATON_ETOOBIG, "address");
	baton_buf_free(&view);
	baton_buf_free(&st);
	baton_buf_free(&rel);
}

/* ---- join frames ----------------------------------------------------------
 */

Test(peer_join, golden_in_every_version)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_JOIN};
	w.join = (struct baton_peer_join){
		.node_id = 4,
		.peer_addr = "10.0.0.4:7001",
		.client_addr = "10.0.0.4:6379",
		.profile = fix_profile(1, 2, 0, 2, 3, 2)};
	CHECK(golden_join, &w);
	w.kind = BATON_PEER_JOIN_REPLY;
	w.join_reply = (struct baton_peer_join_reply){
		.reason = "no",
		.leader_id = 1,
		.leader_peer_addr = "10.0.0.1:7001",
		.leader_client_addr = "10.0.0.1:6379",
		.leader = fix_profile(1, 0, 0, 1, 1, 1)};
	CHECK(golden_join_reply, &w);
	/* Accepted, all strings empty. */
	w.join_reply = (struct baton_peer_join_reply){.accepted = true};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_frame(FIX_P3, &w, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(baton_peer_decode(FIX_P3, b.data + 4, b.len - 4, &f), 0);
	cr_assert(f.join_reply.accepted);
	cr_assert_str_eq(f.join_reply.reason, "");
	cr_assert_str_eq(f.join_reply.leader_client_addr, "");
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

Test(peer_join, limits_and_bad_input)
{
	char s[BATON_PEER_REASON_MAX + 2];
	memset(s, 'x', sizeof s - 1);
	s[sizeof s - 1] = '\0';
	struct baton_buf b;
	baton_buf_init(&b);
	struct baton_peer_join j = {.node_id = 0};
	cr_assert_eq(baton_peer_encode_join(FIX_P1, &j, &b), BATON_EINVAL);
	j.node_id = 5;
	j.peer_addr = s + sizeof s - 2 - BATON_PEER_ADDR_MAX; /* 256 bytes */
	cr_assert_eq(baton_peer_encode_join(FIX_P1, &j, &b), BATON_ETOOBIG);
	j.peer_addr = NULL;
	j.client_addr = s;
	cr_assert_eq(baton_peer_encode_join(FIX_P1, &j, &b), BATON_ETOOBIG);
	struct baton_peer_join_reply r = {.reason = s};
	cr_assert_eq(baton_peer_encode_join_reply(FIX_P1, &r, &b),
		     BATON_ETOOBIG);
	r.reason = s + 1; /* BATON_PEER_REASON_MAX bytes: fine */
	cr_assert_eq(baton_peer_encode_join_reply(FIX_P1, &r, &b), 0);
	baton_buf_reset(&b);
	cr_assert_eq(
		baton_peer_encode_join((struct baton_proto_version){0}, &j, &b),
		BATON_EVERSION);
	cr_assert_eq(b.len, 0);

	/* Decoding: id 0, strings above their limits. */
	struct baton_buf body, env;
	baton_buf_init(&body);
	baton_buf_init(&env);
	pw_bytes(&body, 2, "a:1", 3);
	pw_msg(&env, 6, &body);
	cr_assert_eq(decode_env_at(FIX_P2, &env), BATON_ECORRUPT, "id 0");
	baton_buf_reset(&body);
	baton_buf_reset(&env);
	pw_uint(&body, 1, 9);
	pw_bytes(&body, 3, s, BATON_PEER_ADDR_MAX + 1);
	pw_msg(&env, 6, &body);
	cr_assert_eq(decode_env_at(FIX_P2, &env), BATON_ETOOBIG);
	baton_buf_reset(&body);
	baton_buf_reset(&env);
	pw_bytes(&body, 2, s, BATON_PEER_REASON_MAX + 1);
	pw_msg(&env, 7, &body);
	cr_assert_eq(decode_env_at(FIX_P1, &env), BATON_ETOOBIG);
	baton_buf_reset(&body);
	baton_buf_reset(&env);
	pw_bytes(&body, 5, s, BATON_PEER_ADDR_MAX + 1);
	pw_msg(&env, 7, &body);
	cr_assert_eq(decode_env_at(FIX_P3, &env), BATON_ETOOBIG);
	baton_buf_free(&body);
	baton_buf_free(&env);
	baton_buf_free(&b);
}

/* ---- info frames ----------------------------------------------------------
 */

Test(peer_info, golden_in_every_version)
{
	struct baton_peer_frame w = {.kind = BATON_PEER_RAFT};
	w.raft = (struct baton_msg){
		.type = BATON_MSG_INFO, .term = 9, .from = 1, .to = 2};
	w.raft.u.info.seq = 5;
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &w, &b), 0);
	cr_assert_eq(b.len, sizeof golden_info_p1);
	cr_assert_eq(memcmp(b.data, golden_info_p1, b.len), 0);
	baton_buf_reset(&b);
	cr_assert_eq(baton_peer_encode_frame(FIX_P2, &w, &b), 0);
	cr_assert_eq(memcmp(b.data, golden_info_p1, b.len), 0);

	w.raft = (struct baton_msg){
		.type = BATON_MSG_INFO_RESULT, .term = 9, .from = 2, .to = 1};
	w.raft.u.info_result.seq = 5;
	w.raft.u.info_result.profile = fix_profile(1, 1, 0, 1, 2, 2);
	baton_buf_reset(&b);
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &w, &b), 0);
	cr_assert_eq(b.len, sizeof golden_info_result_p1);
	cr_assert_eq(memcmp(b.data, golden_info_result_p1, b.len), 0);
	baton_buf_reset(&b);
	cr_assert_eq(baton_peer_encode_frame(FIX_P3, &w, &b), 0);
	cr_assert_eq(b.len, sizeof golden_info_result_p3);
	cr_assert_eq(memcmp(b.data, golden_info_result_p3, b.len), 0);

	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(golden_info_result_p1,
				    sizeof golden_info_result_p1, &f),
		     0);
	const char *diff = NULL;
	cr_assert(fix_frame_eq(&w, &f, &diff), "%s", diff);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

/* Raft{INFO_RESULT, InfoResult{seq 7, profile, extra...}} in v. */
static int decode_info_result(struct baton_proto_version v,
			      const struct baton_buf *extra, uint64_t *seq)
{
	struct baton_buf ir, prof, raft, env;
	baton_buf_init(&ir);
	baton_buf_init(&prof);
	baton_buf_init(&raft);
	baton_buf_init(&env);
	pw_uint(&prof, 2, 1);
	pw_uint(&prof, 3, 2);
	pw_uint(&prof, 4, 2);
	pw_uint(&ir, 1, 7);
	pw_msg(&ir, 2, &prof);
	int rv = baton_buf_append(&ir, extra->data, extra->len);
	cr_assert_eq(rv, 0);
	pw_uint(&raft, 1, BATON_MSG_INFO_RESULT);
	pw_uint(&raft, 2, 3);
	pw_msg(&raft, 15, &ir);
	pw_msg(&env, 3, &raft);
	struct baton_peer_frame f;
	rv = baton_peer_decode(v, env.data, env.len, &f);
	if (rv == 0) {
		*seq = f.raft.u.info_result.seq;
		cr_assert_eq(f.raft.u.info_result.profile.proto_max.value, 2);
		cr_assert_eq(f.raft.u.info_result.profile.machine_max.value, 2);
	} else {
		cr_assert_not_null(f.why);
	}
	baton_peer_frame_free(&f);
	baton_buf_free(&ir);
	baton_buf_free(&prof);
	baton_buf_free(&raft);
	baton_buf_free(&env);
	return rv;
}

/* KeyValue{key, value of n bytes} as InfoResult.extra (field 3). */
static void extra_kv(struct baton_buf *extra, const char *key, size_t klen,
		     size_t n)
{
	static uint8_t value[BATON_PEER_INFO_VALUE_MAX + 1];
	struct baton_buf kv;
	baton_buf_init(&kv);
	pw_bytes(&kv, 1, key, klen);
	pw_bytes(&kv, 2, value, n);
	pw_msg(extra, 3, &kv);
	baton_buf_free(&kv);
}

Test(peer_info, extra_keys_are_decoded_and_ignored_within_limits)
{
	struct baton_buf extra;
	baton_buf_init(&extra);
	uint64_t seq = 0;
	for (uint32_t v = 1; v <= 3; v++) {
		baton_buf_reset(&extra);
		extra_kv(&extra, "build", 5, 3);
		extra_kv(&extra, "", 0, 0);
		cr_assert_eq(decode_info_result((struct baton_proto_version){v},
						&extra, &seq),
			     0);
		cr_assert_eq(seq, 7);
	}
	baton_buf_reset(&extra);
	for (uint32_t i = 0; i < BATON_PEER_INFO_EXTRA_MAX; i++)
		extra_kv(&extra, "k", 1, 1);
	cr_assert_eq(decode_info_result(FIX_P2, &extra, &seq), 0);
	extra_kv(&extra, "k", 1, 1);
	cr_assert_eq(decode_info_result(FIX_P2, &extra, &seq), BATON_ETOOBIG,
		     "one extra key too many");

	static char key[BATON_PEER_INFO_KEY_MAX + 1];
	memset(key, 'k', sizeof key);
	baton_buf_reset(&extra);
	extra_kv(&extra, key, BATON_PEER_INFO_KEY_MAX, 0);
	cr_assert_eq(decode_info_result(FIX_P3, &extra, &seq), 0);
	extra_kv(&extra, key, BATON_PEER_INFO_KEY_MAX + 1, 0);
	cr_assert_eq(decode_info_result(FIX_P3, &extra, &seq), BATON_ETOOBIG);

	baton_buf_reset(&extra);
	extra_kv(&extra, "v", 1, BATON_PEER_INFO_VALUE_MAX);
	cr_assert_eq(decode_info_result(FIX_P1, &extra, &seq), 0);
	extra_kv(&extra, "v", 1, BATON_PEER_INFO_VALUE_MAX + 1);
	cr_assert_eq(decode_info_result(FIX_P1, &extra, &seq), BATON_ETOOBIG);
	baton_buf_free(&extra);
}

Test(peer_info, body_must_match_type)
{
	/* INFO with an InfoResult body, and INFO_RESULT without a body. */
	struct baton_buf raft, env, body;
	baton_buf_init(&raft);
	baton_buf_init(&env);
	baton_buf_init(&body);
	pw_uint(&body, 1, 1);
	pw_uint(&raft, 1, BATON_MSG_INFO);
	pw_msg(&raft, 15, &body);
	pw_msg(&env, 3, &raft);
	cr_assert_eq(decode_env_at(FIX_P1, &env), BATON_ECORRUPT);
	baton_buf_reset(&raft);
	baton_buf_reset(&env);
	pw_uint(&raft, 1, BATON_MSG_INFO_RESULT);
	pw_msg(&env, 3, &raft);
	cr_assert_eq(decode_env_at(FIX_P3, &env), BATON_ECORRUPT);
	baton_buf_free(&raft);
	baton_buf_free(&env);
	baton_buf_free(&body);
}
