/*
 * The peer codec's decoders of the version facts (peer.h): releases,
 * profiles and version states, which Raft messages and the frozen
 * handshake frames both carry, and the handshake frames themselves, with
 * the cluster view of a handshake reply. The rest of the decoder is in
 * peer_decode.c.
 */
#include <string.h>

#include "baton/assert.h"
#include "peer_internal.h"

/* A missing release reads as 0.0.0; false when a part does not fit. */
static bool release_out(const Batonpeer__Release *r, struct baton_release *out)
{
	memset(out, 0, sizeof *out);
	if (r == NULL)
		return true;
	if (r->major > UINT16_MAX || r->minor > UINT16_MAX ||
	    r->patch > UINT16_MAX)
		return false;
	out->major = (uint16_t)r->major;
	out->minor = (uint16_t)r->minor;
	out->patch = (uint16_t)r->patch;
	return true;
}

/* A missing profile reads as zeros (proto3: absent means default). */
int baton__peer_profile_out(const Batonpeer__Profile *p,
			    struct baton_profile *out, const char **why)
{
	memset(out, 0, sizeof *out);
	if (p == NULL)
		return 0;
	if (!release_out(p->release, &out->release)) {
		*why = "release part above 65535";
		return BATON_ECORRUPT;
	}
	out->proto_min.value = p->proto_min;
	out->proto_max.value = p->proto_max;
	out->machine_max.value = p->machine_max;
	return 0;
}

int baton__peer_string_out(const char *s, size_t max, const char **out,
			   const char *what, const char **why)
{
	if (s == NULL)
		s = "";
	if (strlen(s) > max) {
		*why = what;
		return BATON_ETOOBIG;
	}
	*out = s;
	return 0;
}

/* An absent downgrade is none in progress. A present one is what an
 * enabling entry recorded: each rule of baton_version_state_valid() for
 * it is checked here to say which one it breaks (the caller's check of
 * the whole state stays the judge). */
static int downgrade_out(const Batonpeer__Downgrade *d,
			 struct baton_version_state *out, const char **why)
{
	if (d == NULL)
		return 0;
	struct baton_downgrade *g = &out->downgrade;
	if (!release_out(d->target, &g->target) ||
	    !release_out(d->prev_floor, &g->prev_floor)) {
		*why = "downgrade release part above 65535";
		return BATON_ECORRUPT;
	}
	g->prev_machine.value = d->prev_machine;
	g->since = d->since;
	struct baton_release none = {0, 0, 0};
	if (baton_release_compare(g->target, none) == 0)
		*why = "downgrade without a target release";
	else if (baton_release_compare(g->target, g->prev_floor) >= 0)
		*why = "downgrade target not below the floor it lowered";
	else if (g->prev_machine.value == 0 ||
		 g->prev_machine.value < out->machine.value)
		*why = "downgrade's previous machine version below the "
		       "effective one";
	else if (g->since == 0)
		*why = "downgrade without the index of its enabling entry";
	else
		return 0;
	return BATON_ECORRUPT;
}

/* An absent version state (from a release before it) reads as the state
 * of a log without version entries; baton__peer_check_msg() then checks
 * that what arrived is a valid state. */
int baton__peer_versions_out(const Batonpeer__VersionState *v,
			     struct baton_version_state *out, const char **why)
{
	baton_version_state_initial(out);
	if (v == NULL)
		return 0;
	if (v->n_members > BATON_MAX_MEMBERS) {
		*why = "more version table rows than BATON_MAX_MEMBERS";
		return BATON_ECORRUPT;
	}
	out->machine.value = v->machine;
	if (!release_out(v->floor, &out->floor)) {
		*why = "release part above 65535";
		return BATON_ECORRUPT;
	}
	out->n = (uint32_t)v->n_members;
	for (size_t i = 0; i < v->n_members; i++) {
		const Batonpeer__MemberVersions *row = v->members[i];
		if (row == NULL) {
			*why = "version table row missing";
			return BATON_ECORRUPT;
		}
		out->members[i].id = row->id;
		int rv = baton__peer_profile_out(row->profile,
						 &out->members[i].profile, why);
		if (rv != 0)
			return rv;
	}
	out->held = v->held; /* absent (a release before it): false */
	return downgrade_out(v->downgrade, out, why);
}

/* A view's version state is always sent (a missing one is garbage), and
 * must be one a log may hold. */
static int view_out(const Batonpeer__ClusterView *v,
		    struct baton_peer_cluster_view *out, const char **why)
{
	out->leader_id = v->leader_id;
	int rv = baton__peer_string_out(
		v->leader_peer_addr, BATON_PEER_ADDR_MAX,
		&out->leader_peer_addr, "leader address above the limit", why);
	if (rv != 0)
		return rv;
	if (v->versions == NULL) {
		*why = "cluster view without its version state";
		return BATON_ECORRUPT;
	}
	rv = baton__peer_versions_out(v->versions, &out->versions, why);
	if (rv != 0)
		return rv;
	if (!baton_version_state_valid(&out->versions)) {
		*why = "cluster view version state not valid";
		return BATON_ECORRUPT;
	}
	if (!release_out(v->strict_release, &out->strict_release)) {
		*why = "release part above 65535";
		return BATON_ECORRUPT;
	}
	out->last_index = v->last_index;
	return 0;
}

int baton__peer_fixed_out(ProtobufCBinaryData in, size_t len, uint8_t *out,
			  bool *present, const char *what, const char **why)
{
	BATON_ASSERT(len > 0 && out != NULL && present != NULL);
	*present = in.len > 0;
	if (in.len == 0)
		return 0;
	if (in.len != len) {
		*present = false;
		*why = what;
		return BATON_ECORRUPT;
	}
	BATON_ASSERT(in.data != NULL);
	memcpy(out, in.data, len);
	return 0;
}

int baton__peer_handshake_out(const Batonpeer__Handshake *h,
			      struct baton_peer_handshake *out,
			      const char **why)
{
	Batonpeer__Handshake none;
	if (h == NULL) {
		batonpeer__handshake__init(&none);
		h = &none;
	}
	out->node_id = h->node_id;
	int rv = baton__peer_string_out(
		h->cluster_id, BATON_PEER_CLUSTER_ID_MAX, &out->cluster_id,
		"cluster id above the limit", why);
	if (rv == 0)
		rv = baton__peer_string_out(h->peer_addr, BATON_PEER_ADDR_MAX,
					    &out->peer_addr,
					    "address above the limit", why);
	if (rv == 0)
		rv = baton__peer_profile_out(h->profile, &out->profile, why);
	if (rv == 0)
		rv = baton__peer_fixed_out(
			h->auth_nonce, sizeof out->auth_nonce, out->auth_nonce,
			&out->has_auth, "authentication nonce not 32 bytes",
			why);
	if (rv == 0)
		rv = baton__peer_fixed_out(
			h->cluster_uuid, sizeof out->cluster_uuid,
			out->cluster_uuid, &out->has_cluster_uuid,
			"cluster uuid not 16 bytes", why);
	return rv;
}

int baton__peer_handshake_reply_out(const Batonpeer__HandshakeReply *r,
				    struct baton_peer_handshake_reply *out,
				    const char **why)
{
	out->accepted = r->accepted;
	out->removed = r->removed;
	out->proto.value = r->proto;
	if (r->accepted && r->proto == 0) {
		*why = "handshake accepted without a protocol version";
		return BATON_ECORRUPT;
	}
	int rv = baton__peer_string_out(r->reason, BATON_PEER_REASON_MAX,
					&out->reason,
					"refusal reason above the limit", why);
	if (rv == 0)
		rv = baton__peer_handshake_out(r->self, &out->self, why);
	if (rv == 0 && r->cluster != NULL) {
		out->has_cluster = true;
		rv = view_out(r->cluster, &out->cluster, why);
	}
	if (rv == 0)
		rv = baton__peer_fixed_out(r->auth_mac, sizeof out->auth_mac,
					   out->auth_mac, &out->has_auth_mac,
					   "authentication MAC not 32 bytes",
					   why);
	return rv;
}

int baton__peer_handshake_auth_out(const Batonpeer__HandshakeAuth *a,
				   struct baton_peer_handshake_auth *out,
				   const char **why)
{
	bool present = false;
	int rv = baton__peer_fixed_out(a->mac, sizeof out->mac, out->mac,
				       &present,
				       "authentication MAC not 32 bytes", why);
	if (rv == 0 && !present) {
		*why = "authentication without a MAC";
		rv = BATON_ECORRUPT;
	}
	return rv;
}
