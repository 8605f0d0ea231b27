/*
 * The burn-in hold in a version state on the wire (VersionState.held,
 * proto/peer.proto, an appended field): carried by a snapshot's metadata
 * in every protocol version, and absent (the bytes of the releases before
 * it) when not held.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "peer_fixtures.h"

static void encode(struct baton_proto_version v, const struct baton_msg *m,
		   struct baton_buf *b)
{
	baton_buf_init(b);
	cr_assert_eq(baton_peer_encode_raft(v, m, b), 0, "at %u", v.value);
}

Test(peer_hold, a_snapshot_meta_carries_it_and_only_when_held)
{
	uint32_t n = 0, top = 0;
	const struct baton_profile *t = baton_releases(&n);
	for (uint32_t i = 0; i < n; i++)
		if (t[i].proto_max.value > top)
			top = t[i].proto_max.value;
	for (uint32_t pv = 1; pv <= top; pv++) {
		struct baton_proto_version v = {pv};
		if (!baton_peer_proto_supported(v))
			continue;
		struct baton_msg m;
		fix_raft(8, &m);
		struct baton_buf plain, held;
		encode(v, &m, &plain);
		m.u.snapshot.meta.versions.held = true;
		encode(v, &m, &held);
		/* Two bytes more: field 5's tag and the value 1. */
		cr_assert_eq(held.len, plain.len + 2, "at %u", pv);
		size_t body = 0;
		cr_assert_eq(baton_peer_split(held.data, held.len, &body), 1);
		struct baton_peer_frame f;
		int rv = baton_peer_decode(v, held.data + BATON_PEER_PREFIX_LEN,
					   body, &f);
		cr_assert_eq(rv, 0, "at %u: %s", pv, f.why);
		cr_assert(f.raft.u.snapshot.meta.versions.held, "at %u", pv);
		baton_peer_frame_free(&f);
		cr_assert_eq(baton_peer_split(plain.data, plain.len, &body), 1);
		rv = baton_peer_decode(v, plain.data + BATON_PEER_PREFIX_LEN,
				       body, &f);
		cr_assert_eq(rv, 0, "at %u: %s", pv, f.why);
		cr_assert_not(f.raft.u.snapshot.meta.versions.held);
		baton_peer_frame_free(&f);
		baton_buf_free(&plain);
		baton_buf_free(&held);
	}
}
