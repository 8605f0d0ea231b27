/*
 * The downgrade in progress in a version state on the wire
 * (VersionState.downgrade, proto/peer.proto): carried by a snapshot's
 * metadata and by the cluster view of a handshake reply in every protocol
 * version, sent only while a downgrade is in progress (else the bytes are
 * those of the releases before it), and refused with a reason naming the
 * broken rule when malformed.
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

static bool downgrade_none(const struct baton_downgrade *d)
{
	return d->target.major == 0 && d->target.minor == 0 &&
	       d->target.patch == 0 && d->prev_floor.major == 0 &&
	       d->prev_floor.minor == 0 && d->prev_floor.patch == 0 &&
	       d->prev_machine.value == 0 && d->since == 0;
}

/* What fix_downgrade() records. */
static void expect_fix_downgrade(const struct baton_downgrade *d,
				 struct baton_release prev_floor,
				 uint32_t prev_machine)
{
	cr_assert_eq(baton_release_compare(d->target,
					   (struct baton_release){0, 9, 7}),
		     0);
	cr_assert_eq(baton_release_compare(d->prev_floor, prev_floor), 0);
	cr_assert_eq(d->prev_machine.value, prev_machine);
	cr_assert_eq(d->since, 4321);
}

/* Encode m in version v, decode it back into *f (to be freed). */
static void raft_round_trip(struct baton_proto_version v,
			    const struct baton_msg *m,
			    struct baton_peer_frame *f)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_raft(v, m, &b), 0, "at %u", v.value);
	size_t body = 0;
	cr_assert_eq(baton_peer_split(b.data, b.len, &body), 1);
	int rv = baton_peer_decode(v, b.data + BATON_PEER_PREFIX_LEN, body, f);
	cr_assert_eq(rv, 0, "at %u: %s", v.value, f->why);
	cr_assert_eq(f->kind, BATON_PEER_RAFT);
	baton_buf_free(&b);
}

/* A handshake reply with fix_view(3) as its cluster view. */
static struct baton_peer_handshake_reply view_reply(void)
{
	struct baton_peer_handshake_reply r = {
		.accepted = true,
		.proto = {3},
		.reason = "",
		.self = {.cluster_id = "prod",
			 .node_id = 1,
			 .profile = fix_profile(1, 2, 0, 2, 3, 2),
			 .peer_addr = "10.0.0.1:7001"},
		.has_cluster = true};
	fix_view(3, &r.cluster);
	return r;
}

/* ---- round trips ------------------------------------------------------------
 */

Test(peer_downgrade, a_snapshot_meta_round_trips_with_and_without_one)
{
	for (uint32_t pv = 1; pv <= table_proto_max(); pv++) {
		struct baton_proto_version v = {pv};
		if (!baton_peer_proto_supported(v))
			continue;
		struct baton_msg m;
		fix_raft(8, &m); /* no downgrade */
		struct baton_peer_frame f;
		raft_round_trip(v, &m, &f);
		const struct baton_version_state *got =
			&f.raft.u.snapshot.meta.versions;
		const char *diff = NULL;
		cr_assert(fix_versions_eq(&m.u.snapshot.meta.versions, got,
					  &diff),
			  "at %u: %s", pv, diff);
		cr_assert(downgrade_none(&got->downgrade), "at %u", pv);
		baton_peer_frame_free(&f);

		fix_raft(18, &m); /* sample 8 during a downgrade */
		raft_round_trip(v, &m, &f);
		got = &f.raft.u.snapshot.meta.versions;
		cr_assert(fix_versions_eq(&m.u.snapshot.meta.versions, got,
					  &diff),
			  "at %u: %s", pv, diff);
		expect_fix_downgrade(&got->downgrade,
				     (struct baton_release){1, 4, 2}, 3);
		cr_assert_eq(got->machine.value, 2);
		cr_assert_eq(f.raft.u.snapshot.meta.versions_index, 4500);
		baton_peer_frame_free(&f);
	}
}

Test(peer_downgrade, a_cluster_view_round_trips_with_and_without_one)
{
	for (int with = 0; with <= 1; with++) {
		struct baton_peer_handshake_reply r = view_reply();
		if (with)
			fix_downgrade(&r.cluster.versions);
		struct baton_buf b;
		baton_buf_init(&b);
		cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), 0);
		/* The frozen decoder, as any release reads it. */
		struct baton_peer_frame f;
		cr_assert_eq(baton_peer_decode_handshake(
				     b.data + BATON_PEER_PREFIX_LEN,
				     b.len - BATON_PEER_PREFIX_LEN, &f),
			     0, "%s", f.why);
		struct baton_peer_frame w = {
			.kind = BATON_PEER_HANDSHAKE_REPLY};
		w.handshake_reply = r;
		const char *diff = NULL;
		cr_assert(fix_frame_eq(&w, &f, &diff), "with %d: %s", with,
			  diff);
		const struct baton_downgrade *d =
			&f.handshake_reply.cluster.versions.downgrade;
		if (with)
			expect_fix_downgrade(d, (struct baton_release){1, 4, 2},
					     3);
		else
			cr_assert(downgrade_none(d));
		baton_peer_frame_free(&f);
		baton_buf_free(&b);
	}
	/* A view in the initial state (machine 1, no floor) with a
	 * downgrade is not the initial state: it is sent in full. */
	struct baton_peer_handshake_reply r = view_reply();
	memset(&r.cluster.versions, 0, sizeof r.cluster.versions);
	baton_version_state_initial(&r.cluster.versions);
	fix_downgrade(&r.cluster.versions);
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b), 0);
	struct baton_peer_frame f;
	cr_assert_eq(fix_decode_one(b.data, b.len, &f), 0, "%s", f.why);
	expect_fix_downgrade(&f.handshake_reply.cluster.versions.downgrade,
			     (struct baton_release){1, 0, 0}, 1);
	baton_peer_frame_free(&f);
	baton_buf_free(&b);
}

/* ---- the bytes
 * ---------------------------------------------------------------- A snapshot
 * built field by field with the protobuf writer, as protobuf-c packs it (fields
 * in number order, zero scalars left out): Envelope{raft: Raft{type SNAPSHOT,
 * term 9, snapshot: Snapshot{meta{index 50, term 9, members [{1, voter}],
 * config_index 3, versions{machine 1, floor 1.0.0, rows [{1, 1.1.0 {1..2, 2}}],
 * downgrade?}, versions_index 44}, total_len 3, chunk "abc", last_chunk}}}. The
 * downgrade, when asked for, is {target 1.0.0, prev_floor 1.1.0, prev_machine
 * 2, since 44}. */

static void pw_release(struct baton_buf *w, uint32_t field, uint32_t major,
		       uint32_t minor, uint32_t patch)
{
	struct baton_buf r;
	baton_buf_init(&r);
	if (major != 0)
		pw_uint(&r, 1, major);
	if (minor != 0)
		pw_uint(&r, 2, minor);
	if (patch != 0)
		pw_uint(&r, 3, patch);
	pw_msg(w, field, &r);
	baton_buf_free(&r);
}

static void hand_built(struct baton_buf *env, bool with_downgrade)
{
	struct baton_buf prof, row, vs, dg, member, meta, snap, raft;
	struct baton_buf *all[] = {&prof,   &row,  &vs,	  &dg,
				   &member, &meta, &snap, &raft};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		baton_buf_init(all[i]);
	pw_release(&prof, 1, 1, 1, 0);
	pw_uint(&prof, 2, 1);
	pw_uint(&prof, 3, 2);
	pw_uint(&prof, 4, 2);
	pw_uint(&row, 1, 1);
	pw_msg(&row, 2, &prof);
	pw_uint(&vs, 1, 1);
	pw_release(&vs, 2, 1, 0, 0);
	pw_msg(&vs, 3, &row);
	if (with_downgrade) {
		pw_release(&dg, 1, 1, 0, 0);
		pw_release(&dg, 2, 1, 1, 0);
		pw_uint(&dg, 3, 2);
		pw_uint(&dg, 4, 44);
		pw_msg(&vs, 4, &dg);
	}
	pw_uint(&member, 1, 1);
	pw_uint(&member, 2, BATON_VOTER);
	pw_uint(&meta, 1, 50);
	pw_uint(&meta, 2, 9);
	pw_msg(&meta, 3, &member);
	pw_uint(&meta, 4, 3);
	pw_msg(&meta, 5, &vs);
	pw_uint(&meta, 6, 44);
	pw_msg(&snap, 1, &meta);
	pw_uint(&snap, 2, 3);
	pw_bytes(&snap, 4, "abc", 3);
	pw_uint(&snap, 5, 1);
	pw_uint(&raft, 1, BATON_MSG_SNAPSHOT);
	pw_uint(&raft, 2, 9);
	pw_msg(&raft, 9, &snap);
	baton_buf_reset(env);
	pw_msg(env, 3, &raft);
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		baton_buf_free(all[i]);
}

static void hand_built_msg(struct baton_msg *m, bool with_downgrade)
{
	memset(m, 0, sizeof *m);
	m->type = BATON_MSG_SNAPSHOT;
	m->term = 9;
	struct baton_snapshot_meta *meta = &m->u.snapshot.meta;
	meta->index = 50;
	meta->term = 9;
	meta->config.n = 1;
	meta->config.members[0] = (struct baton_member){1, BATON_VOTER};
	meta->config_index = 3;
	meta->versions.machine.value = 1;
	meta->versions.floor = (struct baton_release){1, 0, 0};
	meta->versions.n = 1;
	meta->versions.members[0] = (struct baton_member_versions){
		1, fix_profile(1, 1, 0, 1, 2, 2)};
	if (with_downgrade)
		meta->versions.downgrade =
			(struct baton_downgrade){.target = {1, 0, 0},
						 .prev_floor = {1, 1, 0},
						 .prev_machine = {2},
						 .since = 44};
	meta->versions_index = 44;
	m->u.snapshot.total_len = 3;
	m->u.snapshot.chunk = (const uint8_t *)"abc";
	m->u.snapshot.chunk_len = 3;
	m->u.snapshot.last_chunk = true;
}

Test(peer_downgrade, sent_only_during_a_downgrade_as_an_appended_field)
{
	for (uint32_t pv = 1; pv <= table_proto_max(); pv++) {
		struct baton_proto_version v = {pv};
		if (!baton_peer_proto_supported(v))
			continue;
		for (int with = 0; with <= 1; with++) {
			struct baton_buf want, got;
			baton_buf_init(&want);
			baton_buf_init(&got);
			hand_built(&want, with);
			struct baton_msg m;
			hand_built_msg(&m, with);
			cr_assert_eq(baton_peer_encode_raft(v, &m, &got), 0);
			/* From 4 on the frame ends with its checksum. */
			size_t trailer = baton_peer_proto_checksummed(v)
						 ? BATON_PEER_CHECKSUM_LEN
						 : 0;
			cr_assert_eq(got.len - BATON_PEER_PREFIX_LEN - trailer,
				     want.len, "at %u, with %d", pv, with);
			cr_assert_arr_eq(got.data + BATON_PEER_PREFIX_LEN,
					 want.data, want.len, "at %u, with %d",
					 pv, with);
			/* And the hand-built bytes read back as m. */
			struct baton_peer_frame f;
			cr_assert_eq(
				baton_peer_decode(v, want.data, want.len, &f),
				0, "%s", f.why);
			const char *diff = NULL;
			cr_assert(fix_msg_eq(&m, &f.raft, &diff), "%s", diff);
			cr_assert_eq(
				downgrade_none(&f.raft.u.snapshot.meta.versions
							.downgrade),
				!with);
			baton_peer_frame_free(&f);
			baton_buf_free(&want);
			baton_buf_free(&got);
		}
	}
}

/* ---- malformed downgrades ---------------------------------------------------
 */

/* A Downgrade message; a field of ~0u is left out. */
struct dg_fields {
	uint32_t target[3];
	uint32_t prev_floor[3];
	uint32_t prev_machine;
	uint64_t since;
};

#define ABSENT UINT32_MAX

static void pw_downgrade(struct baton_buf *vs, const struct dg_fields *d)
{
	struct baton_buf dg;
	baton_buf_init(&dg);
	if (d->target[0] != ABSENT)
		pw_release(&dg, 1, d->target[0], d->target[1], d->target[2]);
	if (d->prev_floor[0] != ABSENT)
		pw_release(&dg, 2, d->prev_floor[0], d->prev_floor[1],
			   d->prev_floor[2]);
	if (d->prev_machine != ABSENT)
		pw_uint(&dg, 3, d->prev_machine);
	if (d->since != ABSENT)
		pw_uint(&dg, 4, d->since);
	pw_msg(vs, 4, &dg);
	baton_buf_free(&dg);
}

/* VersionState{machine, floor 1.0.0, one row, downgrade d}. */
static void state_with(struct baton_buf *vs, uint32_t machine,
		       const struct dg_fields *d)
{
	struct baton_buf prof, row;
	baton_buf_init(&prof);
	baton_buf_init(&row);
	pw_uint(&prof, 2, 1);
	pw_uint(&prof, 3, 2);
	pw_uint(&row, 1, 7);
	pw_msg(&row, 2, &prof);
	baton_buf_reset(vs);
	pw_uint(vs, 1, machine);
	pw_release(vs, 2, 1, 0, 0);
	pw_msg(vs, 3, &row);
	if (d != NULL)
		pw_downgrade(vs, d);
	baton_buf_free(&prof);
	baton_buf_free(&row);
}

/* Decode the state vs inside a snapshot's metadata (in every version) and
 * inside a cluster view (frozen): both must give rv, and on an error the
 * same why. The decoded downgrade of a good one goes to *out. */
static void decode_both(const struct baton_buf *vs, int rv, const char *why,
			struct baton_downgrade *out)
{
	struct baton_buf meta, snap, raft, env, view, reply;
	struct baton_buf *all[] = {&meta, &snap, &raft, &env, &view, &reply};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		baton_buf_init(all[i]);
	pw_uint(&meta, 1, 9);
	pw_msg(&meta, 5, vs);
	pw_uint(&meta, 6, 9);
	pw_msg(&snap, 1, &meta);
	pw_uint(&raft, 1, BATON_MSG_SNAPSHOT);
	pw_uint(&raft, 2, 4);
	pw_msg(&raft, 9, &snap);
	pw_msg(&env, 3, &raft);
	for (uint32_t pv = 1; pv <= table_proto_max(); pv++) {
		struct baton_proto_version v = {pv};
		if (!baton_peer_proto_supported(v))
			continue;
		struct baton_peer_frame f;
		int got = baton_peer_decode(v, env.data, env.len, &f);
		cr_assert_eq(got, rv, "snapshot at %u: %d (%s), want %s", pv,
			     got, got != 0 ? f.why : "", why);
		if (rv != 0)
			cr_assert_str_eq(f.why, why, "snapshot at %u", pv);
		else if (out != NULL)
			*out = f.raft.u.snapshot.meta.versions.downgrade;
		baton_peer_frame_free(&f);
	}

	pw_uint(&view, 1, 2);
	pw_msg(&view, 3, vs);
	pw_uint(&reply, 1, 0); /* a refusal: no version needed */
	pw_bytes(&reply, 3, "no", 2);
	pw_msg(&reply, 5, &view);
	baton_buf_reset(&env);
	pw_msg(&env, 2, &reply);
	struct baton_peer_frame f;
	int got = baton_peer_decode_handshake(env.data, env.len, &f);
	cr_assert_eq(got, rv, "view: %d (%s), want %s", got,
		     got != 0 ? f.why : "", why);
	if (rv != 0)
		cr_assert_str_eq(f.why, why, "view");
	else
		cr_assert(f.handshake_reply.has_cluster);
	baton_peer_frame_free(&f);
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		baton_buf_free(all[i]);
}

static const char no_target[] = "downgrade without a target release";
static const char not_below[] =
	"downgrade target not below the floor it lowered";
static const char machine_below[] =
	"downgrade's previous machine version below the effective one";
static const char no_since[] =
	"downgrade without the index of its enabling entry";
static const char part[] = "downgrade release part above 65535";

Test(peer_downgrade, a_state_without_the_field_reads_as_none)
{
	struct baton_buf vs;
	baton_buf_init(&vs);
	state_with(&vs, 2, NULL);
	struct baton_downgrade d;
	memset(&d, 0xa5, sizeof d);
	decode_both(&vs, 0, NULL, &d);
	cr_assert(downgrade_none(&d));
	baton_buf_free(&vs);
}

Test(peer_downgrade, a_good_one_is_read_field_by_field)
{
	struct baton_buf vs;
	baton_buf_init(&vs);
	struct dg_fields ok = {{1, 0, 0}, {1, 1, 65535}, 2, UINT64_MAX};
	state_with(&vs, 2, &ok);
	struct baton_downgrade d;
	memset(&d, 0, sizeof d);
	decode_both(&vs, 0, NULL, &d);
	cr_assert_eq(baton_release_compare(d.target,
					   (struct baton_release){1, 0, 0}),
		     0);
	cr_assert_eq(baton_release_compare(d.prev_floor,
					   (struct baton_release){1, 1, 65535}),
		     0);
	cr_assert_eq(d.prev_machine.value, 2);
	cr_assert_eq(d.since, UINT64_MAX);
	baton_buf_free(&vs);
}

Test(peer_downgrade, a_malformed_one_is_refused_with_its_reason)
{
	static const struct {
		uint32_t machine;
		struct dg_fields d;
		const char *why;
	} cases[] = {
		/* Present but empty: a target of 0.0.0. */
		{2, {{ABSENT}, {ABSENT}, ABSENT, ABSENT}, no_target},
		{2, {{0, 0, 0}, {1, 1, 0}, 2, 5}, no_target},
		{2, {{ABSENT}, {1, 1, 0}, 2, 5}, no_target},
		{2, {{1, 1, 0}, {1, 1, 0}, 2, 5}, not_below},
		{2, {{1, 2, 0}, {1, 1, 0}, 2, 5}, not_below},
		{2, {{1, 0, 0}, {ABSENT}, 2, 5}, not_below},
		{2, {{1, 0, 0}, {1, 1, 0}, 0, 5}, machine_below},
		{2, {{1, 0, 0}, {1, 1, 0}, ABSENT, 5}, machine_below},
		{3, {{1, 0, 0}, {1, 1, 0}, 2, 5}, machine_below},
		{2, {{1, 0, 0}, {1, 1, 0}, 2, 0}, no_since},
		{2, {{1, 0, 0}, {1, 1, 0}, 2, ABSENT}, no_since},
		{2, {{65536, 0, 0}, {1, 1, 0}, 2, 5}, part},
		{2, {{1, 0, 0}, {1, 1, 65536}, 2, 5}, part},
	};
	struct baton_buf vs;
	baton_buf_init(&vs);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cr_log_info("case %zu: %s", i, cases[i].why);
		state_with(&vs, cases[i].machine, &cases[i].d);
		decode_both(&vs, BATON_ECORRUPT, cases[i].why, NULL);
	}
	/* The same bytes with a good downgrade are accepted (the cases
	 * above fail for their own reason only). */
	struct dg_fields ok = {{1, 0, 0}, {1, 1, 0}, 2, 5};
	state_with(&vs, 2, &ok);
	decode_both(&vs, 0, NULL, NULL);
	/* A Downgrade that is not a message at all. */
	state_with(&vs, 2, NULL);
	pw_uint(&vs, 4, 1);
	struct baton_buf env, meta, snap, raft;
	baton_buf_init(&env);
	baton_buf_init(&meta);
	baton_buf_init(&snap);
	baton_buf_init(&raft);
	pw_uint(&meta, 1, 9);
	pw_msg(&meta, 5, &vs);
	pw_msg(&snap, 1, &meta);
	pw_uint(&raft, 1, BATON_MSG_SNAPSHOT);
	pw_msg(&raft, 9, &snap);
	pw_msg(&env, 3, &raft);
	struct baton_peer_frame f;
	cr_assert_eq(baton_peer_decode(FIX_P1, env.data, env.len, &f),
		     BATON_ECORRUPT);
	cr_assert_not_null(f.why);
	baton_buf_free(&env);
	baton_buf_free(&meta);
	baton_buf_free(&snap);
	baton_buf_free(&raft);
	baton_buf_free(&vs);
}

Test(peer_downgrade, the_encoder_refuses_what_the_decoder_would)
{
	struct baton_buf b;
	baton_buf_init(&b);
	struct baton_msg m;
	struct baton_peer_handshake_reply r;
	struct baton_downgrade *dm = &m.u.snapshot.meta.versions.downgrade;
	struct baton_downgrade *dr = &r.cluster.versions.downgrade;
#define REFUSED(change, what)                                                  \
	do {                                                                   \
		fix_raft(18, &m);                                              \
		r = view_reply();                                              \
		fix_downgrade(&r.cluster.versions);                            \
		struct baton_downgrade *d = dm;                                \
		change;                                                        \
		d = dr;                                                        \
		change;                                                        \
		cr_assert_eq(baton_peer_encode_raft(FIX_P1, &m, &b),           \
			     BATON_EINVAL, "snapshot: " what);                 \
		cr_assert_eq(baton_peer_encode_handshake_reply(&r, &b),        \
			     BATON_EINVAL, "view: " what);                     \
		cr_assert_eq(b.len, 0);                                        \
	} while (0)
	REFUSED(d->target = d->prev_floor, "target not below");
	REFUSED(d->prev_machine.value = 0, "previous machine 0");
	REFUSED(d->since = 0, "since 0");
	REFUSED(memset(&d->target, 0, sizeof d->target), "no target");
#undef REFUSED
	baton_buf_free(&b);
}
