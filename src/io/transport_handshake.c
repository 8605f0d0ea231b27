/*
 * The handshake of a peer connection (see transport.h): the dialler's
 * Handshake, the acceptor's HandshakeReply with the chosen protocol
 * version, the dialler's check of that choice, and the refusals, which
 * each side logs and sends to the other so both logs tell why.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
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
}

void baton__transport_hello(struct conn *c)
{
	struct baton_peer_handshake h;
	fill_handshake(c->t, &h);
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

/* with_view: the other end is of this cluster, so it may read our view. */
static void reply_handshake(struct conn *c, bool accepted,
			    struct baton_proto_version proto,
			    const char *reason, bool with_view)
{
	struct baton_peer_handshake_reply r;
	memset(&r, 0, sizeof r);
	fill_handshake(c->t, &r.self);
	r.accepted = accepted;
	r.proto = proto;
	r.reason = reason;
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
		baton__transport_write(c, b.data, b.len);
	baton_buf_free(&b);
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

/* Tell the other end why with a refusing HandshakeReply, let it go out,
 * then close. The caller has logged the reason. */
static void refuse(struct conn *c, const char *reason, bool with_view)
{
	c->t->stats.refused++;
	reply_handshake(c, false, (struct baton_proto_version){0}, reason,
			with_view);
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

/* An inbound connection introduces itself. */
static void on_handshake(struct conn *c, const struct baton_peer_handshake *h)
{
	struct baton_transport *t = c->t;
	char reason[BATON_PEER_REFUSAL_MAX];
	struct baton_proto_version v;
	struct baton_member_versions mine, theirs;
	c->profile = h->profile;
	sides(c, h->node_id, &mine, &theirs);
	/* Only a node of this cluster may read our view. */
	bool ours = strcmp(h->cluster_id, t->cluster_id) == 0;
	if (!ours) {
		snprintf(reason, sizeof reason,
			 "cluster id '%s' is not this cluster's ('%s')",
			 h->cluster_id, t->cluster_id);
	} else if (h->node_id == 0 || h->node_id == t->c.id) {
		ours = false;
		snprintf(reason, sizeof reason, "bad node id %" PRIu64,
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
	} else {
		struct peer *p = baton__transport_peer_find(t, h->node_id);
		if (p == NULL)
			p = baton__transport_peer_find(t, 0);
		if (p == NULL) {
			snprintf(reason, sizeof reason, "too many peers");
		} else {
			if (p->id == 0) {
				p->id = h->node_id;
				p->t = t;
			}
			if (p->in != NULL && p->in != c)
				baton__transport_close(
					p->in, "replaced by a newer one");
			p->in = c;
			c->peer = p;
			reply_handshake(c, true, v, "", true);
			became_ready(c, v);
			return;
		}
	}
	LOG_WARN("refused a peer connection from node %" PRIu64 ": %s",
		 h->node_id, reason);
	refuse(c, reason, ours);
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
	} else {
		became_ready(c, r->proto);
		return;
	}
	LOG_WARN("refused the connection to node %" PRIu64 ": %s", c->peer->id,
		 reason);
	refuse(c, reason, false);
}

void baton__transport_refused_by_dialler(
	struct conn *c, const struct baton_peer_handshake_reply *r)
{
	BATON_ASSERT(c->ready && !c->outbound && !r->accepted);
	c->t->stats.refused++;
	LOG_WARN("node %" PRIu64 " refused the connection: %s", c->peer->id,
		 r->reason);
	baton__transport_close(c, "refused by the peer");
}

void baton__transport_first_frame(struct conn *c, const uint8_t *body,
				  size_t len)
{
	struct baton_transport *t = c->t;
	BATON_ASSERT(!c->ready && !c->closing);
	struct baton_peer_frame f;
	if (baton_peer_decode_handshake(body, len, &f) != 0) {
		t->stats.malformed++;
		LOG_WARN("closing a peer connection: its first frame is not a "
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
			baton__transport_probe_done(c, 0, NULL,
						    &f.handshake_reply);
		} else {
			t->stats.malformed++;
			baton__transport_probe_done(
				c, BATON_ECORRUPT, "expected a handshake reply",
				NULL);
		}
		baton__transport_close(c, "probe done");
	} else if (!c->outbound && f.kind == BATON_PEER_HANDSHAKE) {
		on_handshake(c, &f.handshake);
	} else if (c->outbound && f.kind == BATON_PEER_HANDSHAKE_REPLY) {
		on_handshake_reply(c, &f.handshake_reply);
	} else {
		t->stats.malformed++;
		LOG_WARN("closing a peer connection: expected a %s, got a "
			 "frame of kind %u",
			 c->outbound ? "handshake reply" : "handshake", f.kind);
		baton__transport_close(c, "expected a handshake");
	}
	baton_peer_frame_free(&f);
}
