/* The peer codec's version state decoder (peer_decode_versions.c), reached
 * the two ways a node meets one: the input is the VersionState of a
 * handshake reply's cluster view, and of a snapshot message's metadata.
 * Both must accept the same states and decode them alike; each frame then
 * goes through the round trip of peer_target.h. */
#include "fuzz.h"
#include "peer_fixtures.h"
#include "peer_target.h"

/* Envelope{handshake_reply: {cluster: {versions: state}}}. */
static void in_view(const uint8_t *state, size_t len, struct baton_buf *env)
{
	struct baton_buf view, reply;
	baton_buf_init(&view);
	baton_buf_init(&reply);
	pw_bytes(&view, 3, state, len);
	pw_msg(&reply, 5, &view);
	pw_msg(env, FUZZ_ENV_HANDSHAKE_REPLY, &reply);
	baton_buf_free(&view);
	baton_buf_free(&reply);
}

/* Envelope{raft: {type: snapshot, snapshot: {meta: {versions: state}}}}. */
static void in_snapshot(const uint8_t *state, size_t len, struct baton_buf *env)
{
	struct baton_buf meta, snap, raft;
	baton_buf_init(&meta);
	baton_buf_init(&snap);
	baton_buf_init(&raft);
	pw_bytes(&meta, 5, state, len);
	pw_msg(&snap, 1, &meta);
	pw_uint(&raft, 1, BATON_MSG_SNAPSHOT);
	pw_msg(&raft, 9, &snap);
	pw_msg(env, FUZZ_ENV_RAFT, &raft);
	baton_buf_free(&meta);
	baton_buf_free(&snap);
	baton_buf_free(&raft);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct baton_proto_version v = {1};
	struct baton_buf a, b;
	baton_buf_init(&a);
	baton_buf_init(&b);
	in_view(data, size, &a);
	in_snapshot(data, size, &b);
	struct baton_peer_frame fa, fb;
	int ra = baton_peer_decode(v, a.data, a.len, &fa);
	int rb = baton_peer_decode(v, b.data, b.len, &fb);
	FUZZ_CHECK((ra == 0) == (rb == 0),
		   "a version state decodes in a cluster view (%d: %s) but "
		   "not in a snapshot (%d: %s), or the other way",
		   ra, ra != 0 ? fa.why : "", rb, rb != 0 ? fb.why : "");
	if (ra == 0) {
		const char *diff = "";
		FUZZ_CHECK(fa.kind == BATON_PEER_HANDSHAKE_REPLY &&
				   fb.kind == BATON_PEER_RAFT,
			   "kinds %u and %u", fa.kind, fb.kind);
		FUZZ_CHECK(fix_versions_eq(&fa.handshake_reply.cluster.versions,
					   &fb.raft.u.snapshot.meta.versions,
					   &diff),
			   "the two decodings differ in %s", diff);
	}
	baton_peer_frame_free(&fa);
	baton_peer_frame_free(&fb);
	for (uint8_t sel = 1; sel <= 3; sel++) {
		fuzz_peer_envelope(fuzz_peer_version(sel), a.data, a.len);
		fuzz_peer_envelope(fuzz_peer_version(sel), b.data, b.len);
	}
	baton_buf_free(&a);
	baton_buf_free(&b);
	return 0;
}
