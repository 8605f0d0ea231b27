/*
 * The handshake of a peer connection (see transport.h): the dialler's
 * Handshake, the acceptor's HandshakeReply with the chosen protocol
 * version, the dialler's check of that choice, and the refusals, which
 * each side logs and sends to the other so both logs tell why.
 *
 * With a peer secret, the handshake also authenticates both ends: the
 * dialler's Handshake carries its nonce; the acceptor's reply carries its
 * own (in `self`) and its proof over both; the dialler checks that proof
 * and sends its own in a HandshakeAuth, which the acceptor checks before
 * it takes the connection as ready (and gives it a peer slot).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/storage.h"
#include "log.h"
#include "transport_internal.h"

static void fill_handshake(struct baton_transport *t,
			   struct baton_peer_handshake *h)
{
	memset(h, 0, sizeof *h);
	h->cluster_id = t->cluster_id;
	h->node_id = t->c.id;
	h->profile = t->c.profile;
	h->peer_addr = t->c.listen_addr;
	h->has_cluster_uuid = t->has_uuid;
	memcpy(h->cluster_uuid, t->uuid, sizeof h->cluster_uuid);
}

void baton_transport_set_cluster_uuid(
	struct baton_transport *t,
	const uint8_t uuid[BATON_PEER_CLUSTER_UUID_LEN])
{
	BATON_ASSERT(!t->has_uuid ||
		     memcmp(t->uuid, uuid, sizeof t->uuid) == 0);
	memcpy(t->uuid, uuid, sizeof t->uuid);
	t->has_uuid = true;
}

/* Cluster identity: a peer that knows its cluster's UUID and it is not
 * ours (both known) belongs to another cluster, founded apart; a peer
 * removed from the cluster is told so (c->refusing_removed). False with
 * the reason. */
static bool identity_ok(struct conn *c, baton_node_id them, bool has_uuid,
			const uint8_t *uuid, char *reason, size_t cap)
{
	struct baton_transport *t = c->t;
	char ours[BATON_CLUSTER_UUID_STR_MAX],
		theirs[BATON_CLUSTER_UUID_STR_MAX];
	if (t->has_uuid && has_uuid &&
	    memcmp(t->uuid, uuid, sizeof t->uuid) != 0) {
		snprintf(reason, cap,
			 "node %" PRIu64 " belongs to cluster uuid %s, not to "
			 "this cluster (uuid %s): the two were founded apart "
			 "(a --bootstrap on a wiped or another cluster's "
			 "data directory?)",
			 them, baton_cluster_uuid_format(uuid, theirs),
			 baton_cluster_uuid_format(t->uuid, ours));
		return false;
	}
	if (t->c.is_removed != NULL && t->c.is_removed(t->c.data, them)) {
		c->refusing_removed = true;
		snprintf(reason, cap,
			 "node %" PRIu64 " was removed from the cluster and "
			 "may never be a member again: stop it (a new node "
			 "joins under a new id)",
			 them);
		return false;
	}
	return true;
}

/* A refusal from a member told us this node was removed: believed only
 * from a member that proved itself (checked by the caller). */
static void told_removed(struct conn *c, baton_node_id by,
			 const struct baton_peer_handshake_reply *r)
{
	struct baton_transport *t = c->t;
	if (r->removed && t->c.removed != NULL)
		t->c.removed(t->c.data, by, r->reason);
}

void baton__transport_hello(struct conn *c)
{
	struct baton_peer_handshake h;
	fill_handshake(c->t, &h);
	if (c->t->has_secret) {
		if (baton__transport_nonce(c->nonce) != 0) {
			LOG_ERROR("peer authentication: no random nonce from "
				  "OpenSSL; not connecting");
			baton__transport_close(c, "no nonce");
			return;
		}
		h.has_auth = true;
		memcpy(h.auth_nonce, c->nonce, sizeof h.auth_nonce);
	}
	struct baton_buf b;
	baton_buf_init(&b);
	if (baton_peer_encode_handshake(&h, &b) == 0)
		baton__transport_write(c, b.data, b.len);
	baton_buf_free(&b);
}

/* The node's cluster view into r, if it gives one. */
static void fill_view(struct baton_transport *t,
		      struct baton_peer_handshake_reply *r)
{
	if (t->c.cluster_view == NULL)
		return;
	memset(&r->cluster, 0, sizeof r->cluster);
	if (!t->c.cluster_view(t->c.data, &r->cluster))
		return;
	r->has_cluster = true;
	if (t->c.strict_release)
		r->cluster.strict_release = t->c.profile.release;
}

/* Our nonce and proof into r, for the dialler whose nonce is in
 * c->their_nonce: false if OpenSSL gives no nonce. */
static bool fill_proof(struct conn *c, struct baton_peer_handshake_reply *r)
{
	struct baton_transport *t = c->t;
	BATON_ASSERT(t->has_secret && c->claimed_id != 0);
	if (baton__transport_nonce(c->nonce) != 0)
		return false;
	r->self.has_auth = true;
	memcpy(r->self.auth_nonce, c->nonce, sizeof c->nonce);
	r->has_auth_mac = true;
	baton__transport_auth_mac(&t->secret, BATON__AUTH_ACCEPTOR,
				  t->cluster_id, c->claimed_id, t->c.id,
				  c->their_nonce, c->nonce, r->auth_mac);
	return true;
}

/* with_view: the other end is of this cluster, so it may read our view.
 * with_proof: it offered a nonce and we hold the secret: prove it (the
 * view rides on it, so that a joiner can trust what it reads). framing:
 * the envelope the other end reads it in (0 while its handshake is not
 * done; the version it took the connection at once it is). Returns false
 * when the proof could not be made (nothing sent). */
static bool reply_handshake(struct conn *c, bool accepted,
			    struct baton_proto_version proto,
			    const char *reason, bool with_view, bool with_proof,
			    struct baton_proto_version framing)
{
	struct baton_peer_handshake_reply r;
	memset(&r, 0, sizeof r);
	fill_handshake(c->t, &r.self);
	/* With a secret, this reply goes out before the dialler proved it
	 * holds it: a stranger learns nothing of the cluster's identity
	 * from it. The dialler's own handshake carried its UUID, checked
	 * here (on_handshake); each pair of members dials both ways, so
	 * every pair is still checked in both directions. */
	if (c->t->has_secret) {
		r.self.has_cluster_uuid = false;
		memset(r.self.cluster_uuid, 0, sizeof r.self.cluster_uuid);
	}
	r.accepted = accepted;
	r.proto = proto;
	r.reason = reason;
	r.removed = !accepted && c->refusing_removed;
	if (with_proof && !fill_proof(c, &r)) {
		LOG_ERROR("peer authentication: no random nonce from OpenSSL");
		return false;
	}
	if (with_view)
		fill_view(c->t, &r);
	struct baton_buf b;
	baton_buf_init(&b);
	int rv = baton_peer_encode_handshake_reply(&r, &b);
	if (rv != 0 && r.has_cluster) {
		/* A view the codec refuses (a bug of the node): say so, and
		 * still answer without it. */
		LOG_ERROR("cannot send our cluster view: %s",
			  baton_strerror(rv));
		r.has_cluster = false;
		rv = baton_peer_encode_handshake_reply(&r, &b);
	}
	if (rv == 0)
		rv = baton_peer_seal(framing, &b, 0);
	if (rv == 0)
		baton__transport_write(c, b.data, b.len);
	baton_buf_free(&b);
	return true;
}

static void became_ready(struct conn *c, struct baton_proto_version proto)
{
	struct peer *p = c->peer;
	BATON_ASSERT(p != NULL && !c->ready);
	BATON_ASSERT(baton_peer_proto_supported(proto));
	c->ready = true;
	c->proto = proto;
	p->backoff_ms = 0;
	p->known = true;
	p->profile = c->profile;
	if (!(p->out != NULL && p->out != c && p->out->ready) &&
	    !(p->in != NULL && p->in != c && p->in->ready))
		c->t->stats.connected_peers++;
	char rel[BATON_RELEASE_STR_MAX];
	LOG_INFO("connected %s node %" PRIu64 " (release %s, protocol %u)",
		 c->outbound ? "to" : "from", p->id,
		 baton_release_format(c->profile.release, rel), proto.value);
}

static void on_refused_shutdown(uv_shutdown_t *req, int status)
{
	struct conn *c = req->handle->data;
	(void)status;
	free(req);
	baton__transport_close(c, "refused");
}

/* The envelope of a frame to an end whose handshake is not done. */
#define HANDSHAKE_FRAMING ((struct baton_proto_version){0})

/* A peer that reconnects after a stall replaces its old connection once;
 * two processes started with the same --id replace each other's over and
 * over (each handshake closes the other's connection), which nothing else
 * would show: this many replacements within the window are warned of. */
#define REPLACED_WARN_COUNT 5u
#define REPLACED_WINDOW_MS 10000u

/* p's accepted connection is being replaced by a newer one. */
static void count_replaced(struct baton_transport *t, struct peer *p)
{
	uint64_t now = uv_now(t->c.loop);
	if (p->replaced_n == 0 ||
	    now - p->replaced_since_ms > REPLACED_WINDOW_MS) {
		p->replaced_n = 0;
		p->replaced_since_ms = now;
	}
	if (++p->replaced_n == REPLACED_WARN_COUNT)
		LOG_WARN_LIMITED("node %" PRIu64 " connected %u times within "
				 "%u s, each connection replacing the one "
				 "before: do two nodes run with --id %" PRIu64
				 "? (they take turns, and neither stays "
				 "connected)",
				 p->id, REPLACED_WARN_COUNT,
				 REPLACED_WINDOW_MS / 1000, p->id);
}

/* Tell the other end why with a refusing HandshakeReply (in the envelope
 * it reads: `framing`, as reply_handshake()), let it go out, then close.
 * The caller has logged the reason. */
static void refuse(struct conn *c, const char *reason, bool with_view,
		   bool with_proof, struct baton_proto_version framing)
{
	c->t->stats.refused++;
	reply_handshake(c, false, (struct baton_proto_version){0}, reason,
			with_view, with_proof, framing);
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_shutdown_t *req = malloc(sizeof *req);
	if (req == NULL || uv_shutdown(req, (uv_stream_t *)&c->tcp,
				       on_refused_shutdown) != 0) {
		free(req);
		baton__transport_close(c, reason);
	}
}

/* The two sides of a connection, for the refusal texts. */
static void sides(const struct conn *c, baton_node_id theirs_id,
		  struct baton_member_versions *mine,
		  struct baton_member_versions *theirs)
{
	mine->id = c->t->c.id;
	mine->profile = c->t->c.profile;
	theirs->id = theirs_id;
	theirs->profile = c->profile;
}

/* Give an accepted connection from node id its peer slot and make it
 * ready; the reply that accepts it is sent first unless it went out
 * already (with a peer secret, before the dialler's proof). */
static void admit(struct conn *c, baton_node_id id,
		  struct baton_proto_version v, bool send_reply)
{
	struct baton_transport *t = c->t;
	BATON_ASSERT(!c->outbound && !c->ready && id != 0);
	struct peer *p = baton__transport_peer_find(t, id);
	if (p == NULL)
		p = baton__transport_peer_find(t, 0);
	if (p == NULL) {
		const char *reason = "too many peers";
		LOG_WARN_LIMITED("refused a peer connection from node %" PRIu64
				 ": %s",
				 id, reason);
		/* After the dialler's proof, it took the connection at v. */
		refuse(c, reason, false, false,
		       send_reply ? HANDSHAKE_FRAMING : v);
		return;
	}
	if (p->id == 0) {
		p->id = id;
		p->t = t;
	}
	if (p->in != NULL && p->in != c) {
		count_replaced(t, p);
		baton__transport_close(p->in, "replaced by a newer one");
	}
	p->in = c;
	c->peer = p;
	if (send_reply)
		reply_handshake(c, true, v, "", true, false, HANDSHAKE_FRAMING);
	became_ready(c, v);
}

/* Whether an accepting node and the dialler agree on authentication: both
 * hold a secret (a proof follows) or neither does. Else the reason. */
static bool auth_offer_ok(const struct baton_transport *t,
			  const struct baton_peer_handshake *h, char *reason,
			  size_t cap)
{
	if (t->has_secret && !h->has_auth) {
		snprintf(reason, cap,
			 "peer authentication failed: node %" PRIu64
			 " offered no proof of the peer secret (it runs "
			 "without --peer-secret-file, or a release without "
			 "peer authentication)",
			 h->node_id);
		return false;
	}
	if (!t->has_secret && h->has_auth) {
		snprintf(reason, cap,
			 "peer authentication failed: node %" PRIu64
			 " holds a peer secret and node %" PRIu64
			 " has none (give every node the same "
			 "--peer-secret-file)",
			 h->node_id, t->c.id);
		return false;
	}
	return true;
}

/* An inbound connection introduces itself. */
static void on_handshake(struct conn *c, const struct baton_peer_handshake *h)
{
	struct baton_transport *t = c->t;
	char reason[BATON_PEER_REFUSAL_MAX];
	struct baton_proto_version v;
	struct baton_member_versions mine, theirs;
	c->profile = h->profile;
	c->claimed_id = h->node_id;
	if (h->has_auth)
		memcpy(c->their_nonce, h->auth_nonce, sizeof c->their_nonce);
	sides(c, h->node_id, &mine, &theirs);
	/* Only a node of this cluster may read our view, and (with a
	 * secret) only with our proof, which needs its nonce. */
	bool ours = strcmp(h->cluster_id, t->cluster_id) == 0;
	bool proof = t->has_secret && h->has_auth;
	/* What the dialler is told, when it differs from what is logged:
	 * it has proved nothing yet. */
	char told[BATON_PEER_REFUSAL_MAX] = "";
	if (!ours) {
		snprintf(reason, sizeof reason,
			 "cluster id '%s' is not this cluster's ('%s')",
			 h->cluster_id, t->cluster_id);
	} else if (h->node_id == 0 || h->node_id == t->c.id) {
		ours = false;
		snprintf(reason, sizeof reason, "bad node id %" PRIu64,
			 h->node_id);
	} else if (!identity_ok(c, h->node_id, h->has_cluster_uuid,
				h->cluster_uuid, reason, sizeof reason)) {
		/* A removed member reads our proof and view with it. */
		ours = c->refusing_removed;
		if (!ours && t->has_secret)
			snprintf(
				told, sizeof told,
				"node %" PRIu64 " belongs to another cluster "
				"than this one (its cluster uuid differs): the "
				"two were founded apart (a --bootstrap on a "
				"wiped or another cluster's data directory?)",
				h->node_id);
	} else if (baton_peer_choose_proto(t->c.profile, h->profile, &v) != 0 ||
		   baton_peer_check_choice(t->c.profile, v) != 0) {
		baton_peer_proto_mismatch(&mine, &theirs, reason,
					  sizeof reason);
	} else if (t->c.strict_release &&
		   baton_release_compare(t->c.profile.release,
					 h->profile.release) != 0) {
		baton_peer_release_mismatch(&mine, &theirs, reason,
					    sizeof reason);
	} else if (!auth_offer_ok(t, h, reason, sizeof reason)) {
		t->stats.auth_failed++;
		ours = false;
	} else if (t->has_secret) {
		/* Our proof now, the connection once the dialler's arrives. */
		if (!reply_handshake(c, true, v, "", true, true,
				     HANDSHAKE_FRAMING)) {
			baton__transport_close(c, "no nonce");
			return;
		}
		c->authenticating = true;
		c->pending_proto = v;
		return;
	} else {
		admit(c, h->node_id, v, true);
		return;
	}
	LOG_WARN_LIMITED("refused a peer connection from node %" PRIu64 ": %s",
			 h->node_id, reason);
	refuse(c, told[0] != '\0' ? told : reason, ours, ours && proof,
	       HANDSHAKE_FRAMING);
}

/* The dialler's check of the acceptor's proof, with a secret: 0 and the
 * dialler's own proof in *mine, or the reason for refusing. */
static bool check_acceptor_proof(struct conn *c,
				 const struct baton_peer_handshake_reply *r,
				 struct baton_peer_handshake_auth *mine,
				 char *reason, size_t cap)
{
	struct baton_transport *t = c->t;
	baton_node_id them = r->self.node_id;
	BATON_ASSERT(t->has_secret);
	if (!r->self.has_auth || !r->has_auth_mac) {
		snprintf(reason, cap,
			 "peer authentication failed: node %" PRIu64
			 " gave no proof of the peer secret (it runs without "
			 "--peer-secret-file, or a release without peer "
			 "authentication)",
			 them);
		return false;
	}
	uint8_t want[BATON_PEER_AUTH_MAC_LEN];
	baton__transport_auth_mac(&t->secret, BATON__AUTH_ACCEPTOR,
				  t->cluster_id, t->c.id, them, c->nonce,
				  r->self.auth_nonce, want);
	if (!baton_equal_secret(want, r->auth_mac, sizeof want)) {
		snprintf(reason, cap,
			 "peer authentication failed: the proof of node "
			 "%" PRIu64 " does not match the peer secret of node "
			 "%" PRIu64 " (their --peer-secret-file contents "
			 "differ)",
			 them, t->c.id);
		return false;
	}
	baton__transport_auth_mac(&t->secret, BATON__AUTH_DIALLER,
				  t->cluster_id, t->c.id, them, c->nonce,
				  r->self.auth_nonce, mine->mac);
	return true;
}

static void send_proof(struct conn *c,
		       const struct baton_peer_handshake_auth *mine)
{
	struct baton_buf b;
	baton_buf_init(&b);
	if (baton_peer_encode_handshake_auth(mine, &b) == 0)
		baton__transport_write(c, b.data, b.len);
	baton_buf_free(&b);
}

/* A refusal from a node we share no protocol version with may carry an
 * older release's text: say in our own words why, and what to do. */
static void say_no_common_proto(struct conn *c,
				const struct baton_peer_handshake_reply *r)
{
	struct baton_transport *t = c->t;
	struct baton_proto_version unused;
	if (r->self.node_id != c->peer->id ||
	    baton_peer_choose_proto(t->c.profile, r->self.profile, &unused) ==
		    0)
		return;
	char reason[BATON_PEER_REFUSAL_MAX];
	struct baton_member_versions mine, theirs;
	c->profile = r->self.profile;
	sides(c, c->peer->id, &mine, &theirs);
	LOG_WARN("cannot connect to node %" PRIu64 ": %s", c->peer->id,
		 baton_peer_proto_mismatch(&mine, &theirs, reason,
					   sizeof reason));
}

/* Our dialled connection hears back. */
static void on_handshake_reply(struct conn *c,
			       const struct baton_peer_handshake_reply *r)
{
	struct baton_transport *t = c->t;
	if (!r->accepted) {
		t->stats.refused++;
		LOG_WARN("node %" PRIu64 " refused our connection: %s",
			 c->peer->id, r->reason);
		say_no_common_proto(c, r);
		struct baton_peer_handshake_auth unused;
		char why[BATON_PEER_REFUSAL_MAX];
		if (r->self.node_id == c->peer->id &&
		    (!t->has_secret ||
		     check_acceptor_proof(c, r, &unused, why, sizeof why)))
			told_removed(c, c->peer->id, r);
		baton__transport_close(c, "refused");
		return;
	}
	if (r->self.node_id != c->peer->id) {
		LOG_WARN("%s is node %" PRIu64 ", not node %" PRIu64,
			 c->peer->addr, r->self.node_id, c->peer->id);
		baton__transport_close(c, "wrong node");
		return;
	}
	c->profile = r->self.profile;
	char reason[BATON_PEER_REFUSAL_MAX];
	struct baton_member_versions mine, theirs;
	struct baton_peer_handshake_auth proof;
	sides(c, c->peer->id, &mine, &theirs);
	if (baton_peer_check_choice(t->c.profile, r->proto) != 0) {
		/* A broken or hostile peer, or a release whose negotiation
		 * differs: never speak a version outside our range. */
		baton_peer_proto_bad_choice(&mine, &theirs, r->proto, reason,
					    sizeof reason);
	} else if (t->c.strict_release &&
		   baton_release_compare(t->c.profile.release,
					 r->self.profile.release) != 0) {
		/* It may not run strict itself: we refuse for both. */
		baton_peer_release_mismatch(&mine, &theirs, reason,
					    sizeof reason);
	} else if (t->has_secret &&
		   !check_acceptor_proof(c, r, &proof, reason, sizeof reason)) {
		t->stats.auth_failed++;
	} else if (!identity_ok(c, c->peer->id, r->self.has_cluster_uuid,
				r->self.cluster_uuid, reason, sizeof reason)) {
		/* Refused below, after its proof was checked: a removed
		 * member believes a refusal from a proven member only. */
	} else {
		if (t->has_secret)
			send_proof(c, &proof);
		became_ready(c, r->proto);
		return;
	}
	LOG_WARN("refused the connection to node %" PRIu64 ": %s", c->peer->id,
		 reason);
	/* An acceptor holding a secret (it sent its proof) waits for ours,
	 * its handshake not done; one without took the connection as ready
	 * at the version it chose, if that is one we speak. */
	bool acceptor_ready =
		!r->has_auth_mac &&
		baton_peer_check_choice(t->c.profile, r->proto) == 0;
	refuse(c, reason, false, false,
	       acceptor_ready ? r->proto : HANDSHAKE_FRAMING);
}

/* The dialler's proof, on a connection we accepted with a secret. */
static void on_handshake_auth(struct conn *c,
			      const struct baton_peer_handshake_auth *a)
{
	struct baton_transport *t = c->t;
	BATON_ASSERT(c->authenticating && t->has_secret);
	c->authenticating = false;
	uint8_t want[BATON_PEER_AUTH_MAC_LEN];
	baton__transport_auth_mac(&t->secret, BATON__AUTH_DIALLER,
				  t->cluster_id, c->claimed_id, t->c.id,
				  c->their_nonce, c->nonce, want);
	if (baton_equal_secret(want, a->mac, sizeof want)) {
		admit(c, c->claimed_id, c->pending_proto, false);
		return;
	}
	char reason[BATON_PEER_REFUSAL_MAX];
	snprintf(reason, sizeof reason,
		 "peer authentication failed: the proof of node %" PRIu64
		 " does not match the peer secret of node %" PRIu64
		 " (their --peer-secret-file contents differ)",
		 c->claimed_id, t->c.id);
	t->stats.auth_failed++;
	LOG_WARN_LIMITED("refused a peer connection from node %" PRIu64 ": %s",
			 c->claimed_id, reason);
	/* The dialler took the connection as ready when it sent its proof. */
	refuse(c, reason, false, false, c->pending_proto);
}

void baton__transport_refused_late(struct conn *c,
				   const struct baton_peer_handshake_reply *r)
{
	BATON_ASSERT(c->ready && !r->accepted);
	c->t->stats.refused++;
	LOG_WARN("node %" PRIu64 " refused the connection: %s", c->peer->id,
		 r->reason);
	/* The dialler proved itself before we took the connection. */
	told_removed(c, c->peer->id, r);
	baton__transport_close(c, "refused by the peer");
}

/* A probe's answer. With a secret, a reply is believed only with the
 * other end's valid proof: an accepted one without it fails the probe,
 * and a refusal without it loses its view. */
static void probe_answer(struct conn *c, struct baton_peer_handshake_reply *r)
{
	struct baton_transport *t = c->t;
	char reason[BATON_PEER_REFUSAL_MAX];
	struct baton_peer_handshake_auth unused;
	if (t->has_secret &&
	    !check_acceptor_proof(c, r, &unused, reason, sizeof reason)) {
		if (r->accepted) {
			t->stats.auth_failed++;
			LOG_WARN("probe of %s: %s", c->probe_addr, reason);
			baton__transport_probe_done(c, BATON_EIO, reason, NULL);
			return;
		}
		r->has_cluster = false;
	}
	baton__transport_probe_done(c, 0, NULL, r);
}

/* A frame on an accepted connection waiting for the dialler's proof. */
static void while_authenticating(struct conn *c, struct baton_peer_frame *f)
{
	struct baton_transport *t = c->t;
	if (f->kind == BATON_PEER_HANDSHAKE_AUTH) {
		on_handshake_auth(c, &f->handshake_auth);
	} else if (f->kind == BATON_PEER_HANDSHAKE_REPLY &&
		   !f->handshake_reply.accepted) {
		/* The dialler refused what we chose, or our proof. */
		t->stats.refused++;
		LOG_WARN("node %" PRIu64 " refused the connection: %s",
			 c->claimed_id, f->handshake_reply.reason);
		baton__transport_close(c, "refused by the peer");
	} else {
		t->stats.malformed++;
		t->stats.auth_failed++;
		LOG_WARN_LIMITED(
			"closing a peer connection from node %" PRIu64
			": peer authentication failed: expected its proof of "
			"the peer secret, got a frame of kind %u",
			c->claimed_id, f->kind);
		baton__transport_close(c, "expected a proof");
	}
}

void baton__transport_first_frame(struct conn *c, const uint8_t *body,
				  size_t len)
{
	struct baton_transport *t = c->t;
	BATON_ASSERT(!c->ready && !c->closing);
	struct baton_peer_frame f;
	if (baton_peer_decode_handshake(body, len, &f) != 0) {
		t->stats.malformed++;
		LOG_WARN_LIMITED(
			"closing a peer connection: its first frame is not a "
			"valid handshake (%s)",
			f.why != NULL ? f.why : "malformed");
		if (c->probe_cb != NULL)
			baton__transport_probe_done(c, BATON_ECORRUPT, f.why,
						    NULL);
		baton__transport_close(c, "malformed handshake");
		return;
	}
	if (c->probe_cb != NULL) {
		/* A probe wants the reply only: answer it and hang up. */
		if (f.kind == BATON_PEER_HANDSHAKE_REPLY) {
			probe_answer(c, &f.handshake_reply);
		} else {
			t->stats.malformed++;
			baton__transport_probe_done(
				c, BATON_ECORRUPT, "expected a handshake reply",
				NULL);
		}
		baton__transport_close(c, "probe done");
	} else if (c->authenticating) {
		while_authenticating(c, &f);
	} else if (!c->outbound && f.kind == BATON_PEER_HANDSHAKE) {
		on_handshake(c, &f.handshake);
	} else if (c->outbound && f.kind == BATON_PEER_HANDSHAKE_REPLY) {
		on_handshake_reply(c, &f.handshake_reply);
	} else {
		t->stats.malformed++;
		LOG_WARN_LIMITED(
			"closing a peer connection: expected a %s, got a "
			"frame of kind %u",
			c->outbound ? "handshake reply" : "handshake", f.kind);
		baton__transport_close(c, "expected a handshake");
	}
	baton_peer_frame_free(&f);
}
