/*
 * The peer codec and versions: which protocol versions it implements (those
 * of the table of releases), refusing the others, the dialling side's check
 * of the chosen version and the refusal texts, the frozen handshake decoder,
 * the version state in a snapshot's metadata, and the profiles in Vote and
 * Append.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "peer_fixtures.h"

/* ---- helpers ------------------------------------------------------------ */

/* The highest peer protocol version any release of the table speaks. */
static uint32_t table_proto_max(void)
{
	uint32_t n = 0, max = 0;
	const struct baton_profile *t = baton_releases(&n);
	for (uint32_t i = 0; i < n; i++)
		if (t[i].proto_max.value > max)
			max = t[i].proto_max.value;
	return max;
}

/* Decode an envelope built by hand (no prefix), in FIX_P1. */
static int decode_env(const struct baton_buf *env, struct baton_peer_frame *f)
{
	return baton_peer_decode(FIX_P1, env->data, env->len, f);
}

/* Envelope{raft: Raft{type SNAPSHOT, snapshot: Snapshot{meta, total_len 3,
 * chunk "abc"}}} around the SnapshotMeta bytes `meta`. */
static void snapshot_env(struct baton_buf *env, const struct baton_buf *meta)
{
	struct baton_buf snap, raft;
	baton_buf_init(&snap);
	baton_buf_init(&raft);
	pw_msg(&snap, 1, meta);
	pw_uint(&snap, 2, 3);
	pw_bytes(&snap, 4, "abc", 3);
	pw_uint(&raft, 1, BATON_MSG_SNAPSHOT);
	pw_uint(&raft, 2, 4);
	pw_msg(&raft, 9, &snap);
	baton_buf_reset(env);
	pw_msg(env, 3, &raft);
	baton_buf_free(&snap);
	baton_buf_free(&raft);
}

/* SnapshotMeta{index 9, term 4, members [{1, voter}], config_index 2}. */
static void old_meta(struct baton_buf *meta)
{
	struct baton_buf member;
	baton_buf_init(&member);
	pw_uint(&member, 1, 1);
	pw_uint(&member, 2, BATON_VOTER);
	baton_buf_reset(meta);
	pw_uint(meta, 1, 9);
	pw_uint(meta, 2, 4);
	pw_msg(meta, 3, &member);
	pw_uint(meta, 4, 2);
	baton_buf_free(&member);
}

static bool state_is_initial(const struct baton_version_state *s)
{
	struct baton_version_state init;
	baton_version_state_initial(&init);
	return s->machine.value == init.machine.value && s->n == 0 &&
	       baton_release_compare(s->floor, init.floor) == 0;
}

static void round_trip_at(struct baton_proto_version v,
			  const struct baton_msg *m)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(v, m, &b), 0, "type %u at %u",
		     m->type, v.value);
	size_t body = 0;
	cr_assert_eq(baton_peer_split(b.data, b.len, &body), 1);
	struct baton_peer_frame f;
	int rv = baton_peer_decode(v, b.data + BATON_PEER_PREFIX_LEN, body, &f);
	cr_assert_eq(rv, 0, "type %u at %u: %s", m->type, v.value, f.why);
	/* Protocol 3 dropped `from` and Append's leader profile: its decoder
	 * reads them as zeros. */
	struct baton_msg want = *m;
	if (v.value >= 3) {
		want.from = 0;
		if (want.type == BATON_MSG_APPEND)
			memset(&want.u.append.leader, 0,
			       sizeof want.u.append.leader);
	}
	const char *diff = NULL;
	cr_assert(fix_msg_eq(&want, &f.raft, &diff), "type %u at %u: %s",
		  m->type, v.value, diff);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

/* ---- the versions the codec implements ------------------------------------
 */

Test(peer_versions, those_of_the_table_and_no_other)
{
	uint32_t n = 0;
	const struct baton_profile *t = baton_releases(&n);
	cr_assert_geq(n, 1);
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t v = t[i].proto_min.value;
		     v <= t[i].proto_max.value; v++)
			cr_assert(baton_peer_proto_supported(
					  (struct baton_proto_version){v}),
				  "version %u of the table", v);
	cr_assert_not(
		baton_peer_proto_supported((struct baton_proto_version){0}));
	cr_assert_not(baton_peer_proto_supported(
		(struct baton_proto_version){table_proto_max() + 1}));
	cr_assert_not(baton_peer_proto_supported(
		(struct baton_proto_version){UINT32_MAX}));
	/* The binary's own release speaks what the codec implements. */
	const struct baton_profile *me = baton_release_current();
	cr_assert(baton_peer_proto_supported(me->proto_min));
	cr_assert(baton_peer_proto_supported(me->proto_max));
}

Test(peer_versions, every_implemented_version_round_trips_every_message)
{
	for (uint32_t v = 1; v <= table_proto_max(); v++) {
		struct baton_proto_version pv = {v};
		if (!baton_peer_proto_supported(pv))
			continue;
		for (uint32_t i = 0; i < FIX_N_RAFT; i++) {
			struct baton_msg m;
			fix_raft(i, &m);
			round_trip_at(pv, &m);
		}
	}
}

Test(peer_versions, a_version_not_implemented_is_refused)
{
	const struct baton_proto_version bad[] = {
		{0}, {table_proto_max() + 1}, {UINT32_MAX}};
	struct baton_msg m;
	fix_raft(4, &m);
	const uint8_t *argv[1] = {(const uint8_t *)"GET"};
	const size_t lens[1] = {3};
	struct baton_peer_command cmd = {1, argv, lens};
	struct baton_peer_forward fw = {
		.request_id = 1, .n_commands = 1, .commands = &cmd};
	struct baton_peer_forward_reply fr = {.request_id = 1, .error = "x"};
	struct baton_peer_frame frame = {.kind = BATON_PEER_FORWARD};
	frame.forward = fw;
	struct baton_buf good;
	baton_buf_init(&good);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &good), 0);

	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_buf_append(&b, "keep", 4), 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct baton_proto_version v = bad[i];
		cr_assert_eq(baton_peer_encode_raft(v, &m, &b), BATON_EVERSION);
		cr_assert_eq(baton_peer_encode_forward(v, &fw, &b),
			     BATON_EVERSION);
		cr_assert_eq(baton_peer_encode_forward_reply(v, &fr, &b),
			     BATON_EVERSION);
		cr_assert_eq(baton_peer_encode_frame(v, &frame, &b),
			     BATON_EVERSION);
		cr_assert_eq(b.len, 4, "the buffer is left as it was");
		struct baton_peer_frame f;
		cr_assert_eq(
			baton_peer_decode(v, good.data + BATON_PEER_PREFIX_LEN,
					  good.len - BATON_PEER_PREFIX_LEN, &f),
			BATON_EVERSION, "decode at version %u", v.value);
		cr_assert_not_null(f.why);
		baton_peer_frame_free(&f);
	}
	baton_buf_free(&b);
	baton_buf_free(&good);
}

Test(peer_versions, encode_frame_takes_only_what_follows_the_handshake)
{
	struct baton_peer_frame f = {.kind = BATON_PEER_HANDSHAKE};
	f.handshake = (struct baton_peer_handshake){.node_id = 1};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &f, &b), BATON_EINVAL);
	f.kind = BATON_PEER_UNKNOWN;
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &f, &b), BATON_EINVAL);
	cr_assert_eq(b.len, 0);
	f.kind = BATON_PEER_RAFT;
	fix_raft(0, &f.raft);
	cr_assert_eq(baton_peer_encode_frame(FIX_P1, &f, &b), 0);
	struct baton_peer_frame g;
	cr_assert_eq(fix_decode_one(b.data, b.len, &g), 0);
	const char *diff = NULL;
	cr_assert(fix_frame_eq(&f, &g, &diff), "%s", diff);
	baton_peer_frame_free(&g);
	baton_buf_free(&b);
}

/* ---- the handshake, before any version ------------------------------------
 */

Test(peer_versions, the_handshake_decoder_reads_only_handshakes)
{
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		struct baton_buf b;
		baton_buf_init(&b);
		fix_encode_sample(i, &b);
		struct baton_peer_frame f, g;
		const uint8_t *body = b.data + BATON_PEER_PREFIX_LEN;
		size_t len = b.len - BATON_PEER_PREFIX_LEN;
		cr_assert_eq(baton_peer_decode(FIX_P1, body, len, &g), 0);
		int rv = baton_peer_decode_handshake(body, len, &f);
		if (g.kind == BATON_PEER_HANDSHAKE ||
		    g.kind == BATON_PEER_HANDSHAKE_REPLY) {
			cr_assert_eq(rv, 0, "sample %u: %s", i, f.why);
			const char *diff = NULL;
			cr_assert(fix_frame_eq(&g, &f, &diff), "sample %u: %s",
				  i, diff);
		} else {
			cr_assert_eq(rv, BATON_ECORRUPT, "sample %u", i);
			cr_assert_str_eq(f.why, "expected a handshake");
		}
		baton_peer_frame_free(&f);
		baton_peer_frame_free(&g);
		baton_buf_free(&b);
	}
	struct baton_peer_frame f;
	cr_assert_eq(
		baton_peer_decode_handshake((const uint8_t *)"\xff", 1, &f),
		BATON_ECORRUPT);
	cr_assert_not_null(f.why);
}

Test(peer_versions, the_dialler_checks_the_chosen_version)
{
	struct baton_profile mine = fix_profile(0, 3, 0, 1, 1, 1);
	cr_assert_eq(baton_peer_check_choice(mine, FIX_P1), 0);
	cr_assert_eq(
		baton_peer_check_choice(mine, (struct baton_proto_version){0}),
		BATON_EVERSION);
	cr_assert_eq(
		baton_peer_check_choice(mine, (struct baton_proto_version){2}),
		BATON_EVERSION);
	/* Within our range but not implemented (a made-up profile). */
	struct baton_profile wide = fix_profile(0, 3, 0, 1, UINT32_MAX, 1);
	cr_assert_eq(baton_peer_check_choice(wide,
					     (struct baton_proto_version){
						     table_proto_max() + 1}),
		     BATON_EVERSION);
	/* Below our range. */
	struct baton_profile high = fix_profile(0, 3, 0, 2, 3, 1);
	cr_assert_eq(baton_peer_check_choice(high, FIX_P1), BATON_EVERSION);
	/* Whatever negotiation picks passes the check. */
	struct baton_proto_version v;
	const struct baton_profile *me = baton_release_current();
	cr_assert_eq(baton_peer_choose_proto(*me, *me, &v), 0);
	cr_assert_eq(baton_peer_check_choice(*me, v), 0);
}

Test(peer_versions, the_bad_choice_text_names_both_ranges_and_releases)
{
	char text[BATON_PEER_REFUSAL_MAX];
	struct baton_member_versions me = {1, fix_profile(0, 1, 0, 1, 1, 1)};
	struct baton_member_versions it = {2, fix_profile(9, 0, 0, 7, 8, 3)};
	const char *s = baton_peer_proto_bad_choice(
		&me, &it, (struct baton_proto_version){7}, text, sizeof text);
	cr_assert_eq(s, text);
	cr_assert_str_eq(text,
			 "node 2 chose peer protocol version 7, outside the "
			 "range of node 1: node 1 (release 0.1.0) speaks "
			 "1..1, node 2 (release 9.0.0) speaks 7..8");
	char tiny[5];
	baton_peer_proto_bad_choice(&me, &it, (struct baton_proto_version){7},
				    tiny, sizeof tiny);
	cr_assert_str_eq(tiny, "node");
}

/* ---- the version state in a snapshot's metadata ---------------------------
 */

Test(peer_snapshot_versions, full_table_initial_and_extremes_round_trip)
{
	static const uint32_t samples[] = {8, 9, 15};
	for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
		struct baton_msg m;
		fix_raft(samples[i], &m);
		cr_assert_eq(m.type, BATON_MSG_SNAPSHOT);
		round_trip_at(FIX_P1, &m);
	}
	/* A table of every size. */
	for (uint32_t n = 0; n <= BATON_MAX_MEMBERS; n++) {
		struct baton_msg m;
		fix_raft(9, &m);
		fix_versions(n, &m.u.snapshot.meta.versions);
		m.u.snapshot.meta.versions_index = n;
		round_trip_at(FIX_P1, &m);
	}
	/* The initial state with a version entry behind it still carries
	 * the entry's index. */
	struct baton_msg m;
	fix_raft(9, &m);
	m.u.snapshot.meta.versions_index = 7;
	round_trip_at(FIX_P1, &m);
}

Test(peer_snapshot_versions, old_frames_read_as_the_initial_state)
{
	struct baton_buf meta, env;
	baton_buf_init(&meta);
	baton_buf_init(&env);
	old_meta(&meta);
	snapshot_env(&env, &meta);
	struct baton_peer_frame f;
	cr_assert_eq(decode_env(&env, &f), 0, "%s", f.why);
	cr_assert_eq(f.kind, BATON_PEER_RAFT);
	const struct baton_snapshot_meta *sm = &f.raft.u.snapshot.meta;
	cr_assert_eq(sm->index, 9);
	cr_assert_eq(sm->config.n, 1);
	cr_assert(state_is_initial(&sm->versions));
	cr_assert_eq(sm->versions_index, 0);
	baton_peer_frame_free(&f);

	/* Nor does the encoder send the initial state: the frame of a
	 * snapshot in that state is what an older release sends. */
	struct baton_msg m;
	fix_raft(9, &m);
	struct baton_buf a, b;
	baton_buf_init(&a);
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &a), 0);
	fix_versions(0, &m.u.snapshot.meta.versions);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), 0);
	cr_assert_gt(b.len, a.len, "a non-initial state is sent");
	baton_buf_free(&a);
	baton_buf_free(&b);
	baton_buf_free(&meta);
	baton_buf_free(&env);
}

/* SnapshotMeta of old_meta() plus versions (5) = `state`. */
static int decode_with_state(const struct baton_buf *state)
{
	struct baton_buf meta, env;
	baton_buf_init(&meta);
	baton_buf_init(&env);
	old_meta(&meta);
	pw_msg(&meta, 5, state);
	snapshot_env(&env, &meta);
	struct baton_peer_frame f;
	int rv = decode_env(&env, &f);
	if (rv != 0)
		cr_assert_not_null(f.why);
	baton_peer_frame_free(&f);
	baton_buf_free(&meta);
	baton_buf_free(&env);
	return rv;
}

/* A MemberVersions row {id, profile{proto 1..max}}. */
static void row(struct baton_buf *state, uint64_t id, uint32_t proto_max,
		uint32_t major)
{
	struct baton_buf r, prof, rel;
	baton_buf_init(&r);
	baton_buf_init(&prof);
	baton_buf_init(&rel);
	pw_uint(&rel, 1, major);
	pw_msg(&prof, 1, &rel);
	pw_uint(&prof, 2, 1);
	pw_uint(&prof, 3, proto_max);
	pw_uint(&r, 1, id);
	pw_msg(&r, 2, &prof);
	pw_msg(state, 3, &r);
	baton_buf_free(&r);
	baton_buf_free(&prof);
	baton_buf_free(&rel);
}

Test(peer_snapshot_versions, the_decoder_refuses_a_state_that_is_not_valid)
{
	struct baton_buf st, rel;
	baton_buf_init(&st);
	baton_buf_init(&rel);

	pw_uint(&st, 1, 2);
	row(&st, 1, 1, 0);
	row(&st, 5, 2, 0);
	cr_assert_eq(decode_with_state(&st), 0, "a valid state");

	baton_buf_reset(&st); /* present but empty: machine version 0 */
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT);
	baton_buf_reset(&st);
	pw_uint(&st, 1, 2);
	row(&st, 5, 1, 0);
	row(&st, 5, 1, 0);
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT, "repeated id");
	baton_buf_reset(&st);
	pw_uint(&st, 1, 2);
	row(&st, 5, 1, 0);
	row(&st, 4, 1, 0);
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT, "descending");
	baton_buf_reset(&st);
	pw_uint(&st, 1, 2);
	row(&st, 0, 1, 0);
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT, "id 0");
	baton_buf_reset(&st);
	pw_uint(&st, 1, 2);
	row(&st, 3, 0, 0);
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT, "empty range");
	baton_buf_reset(&st);
	pw_uint(&st, 1, 2);
	row(&st, 3, 1, 65536);
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT, "row release");
	baton_buf_reset(&st);
	pw_uint(&st, 1, 2);
	pw_uint(&rel, 2, 65536);
	pw_msg(&st, 2, &rel);
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT, "floor release");
	baton_buf_reset(&st);
	pw_uint(&st, 1, 2);
	for (uint32_t i = 0; i <= BATON_MAX_MEMBERS; i++)
		row(&st, i + 1, 1, 0);
	cr_assert_eq(decode_with_state(&st), BATON_ECORRUPT, "17 rows");
	baton_buf_free(&st);
	baton_buf_free(&rel);
}

Test(peer_snapshot_versions, the_encoder_refuses_what_the_decoder_would)
{
	struct baton_buf b;
	baton_buf_init(&b);
	struct baton_msg m;
	struct baton_version_state *vs = &m.u.snapshot.meta.versions;
#define REFUSED(change, what)                                                  \
	do {                                                                   \
		fix_raft(8, &m);                                               \
		change;                                                        \
		cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b),           \
			     BATON_EINVAL, what);                              \
		cr_assert_eq(b.len, 0);                                        \
	} while (0)
	REFUSED(vs->machine.value = 0, "machine version 0");
	REFUSED(vs->n = BATON_MAX_MEMBERS + 1, "too many rows");
	REFUSED(vs->members[3].id = 0, "id 0");
	REFUSED(vs->members[3].id = vs->members[2].id, "repeated id");
	REFUSED(vs->members[3].profile.proto_min.value = 9, "empty range");
	REFUSED(memset(vs, 0, sizeof *vs), "a zeroed state");
#undef REFUSED
	baton_buf_free(&b);
}

/* ---- the profiles in Vote and Append --------------------------------------
 */

static void expect_profile(const struct baton_profile *p, uint16_t major,
			   uint16_t minor, uint16_t patch, uint32_t proto_min,
			   uint32_t proto_max, uint32_t machine_max)
{
	cr_assert_eq(p->release.major, major);
	cr_assert_eq(p->release.minor, minor);
	cr_assert_eq(p->release.patch, patch);
	cr_assert_eq(p->proto_min.value, proto_min);
	cr_assert_eq(p->proto_max.value, proto_max);
	cr_assert_eq(p->machine_max.value, machine_max);
}

Test(peer_profiles, vote_candidate_and_append_leader_round_trip)
{
	struct baton_msg m = {.type = BATON_MSG_VOTE, .term = 3, .to = 2};
	m.u.vote.candidate = fix_profile(2, 7, 65535, 3, 9, 4);
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0, "%s", f.why);
	expect_profile(&f.raft.u.vote.candidate, 2, 7, 65535, 3, 9, 4);
	baton_peer_frame_free(&f);

	m = (struct baton_msg){.type = BATON_MSG_APPEND, .term = 3, .to = 2};
	m.u.append.leader = fix_profile(0, 1, 0, 1, 1, UINT32_MAX);
	baton_buf_reset(&b);
	cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b), 0);
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0, "%s", f.why);
	expect_profile(&f.raft.u.append.leader, 0, 1, 0, 1, 1, UINT32_MAX);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

Test(peer_profiles, absent_profiles_read_as_zeros)
{
	/* Vote{last_log_index 5} and Append{prev_index 5}, no profile. */
	struct baton_buf body, raft, env;
	baton_buf_init(&body);
	baton_buf_init(&raft);
	baton_buf_init(&env);
	static const struct {
		uint32_t type, field;
	} cases[] = {{BATON_MSG_VOTE, 5}, {BATON_MSG_APPEND, 7}};
	for (size_t i = 0; i < 2; i++) {
		baton_buf_reset(&body);
		baton_buf_reset(&raft);
		baton_buf_reset(&env);
		pw_uint(&body, 1, 5);
		pw_uint(&raft, 1, cases[i].type);
		pw_uint(&raft, 2, 1);
		pw_msg(&raft, cases[i].field, &body);
		pw_msg(&env, 3, &raft);
		struct baton_peer_frame f;
		cr_assert_eq(decode_env(&env, &f), 0, "%s", f.why);
		const struct baton_profile *p =
			cases[i].type == BATON_MSG_VOTE
				? &f.raft.u.vote.candidate
				: &f.raft.u.append.leader;
		expect_profile(p, 0, 0, 0, 0, 0, 0);
		baton_peer_frame_free(&f);
	}
	baton_buf_free(&body);
	baton_buf_free(&raft);
	baton_buf_free(&env);
}
