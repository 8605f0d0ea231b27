/* The peer transport on libuv (see transport.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "address_uv.h"
#include "baton/assert.h"
#include "le.h"
#include "log.h"
#include "transport_internal.h"

/* A connection that has not completed its handshake by then is closed
 * (someone connected to the peer port and said nothing useful). */
#define HANDSHAKE_TIMEOUT_MS 10000u
/* How often a peer's name that does not resolve is logged. */
#define RESOLVE_LOG_INTERVAL_MS 30000u

int baton_parse_addr(const char *addr, char *why, size_t why_cap)
{
	struct baton_addr a;
	if (strlen(addr) >= BATON_ADDR_MAX) {
		if (why != NULL && why_cap > 0)
			snprintf(why, why_cap,
				 "address '%.40s...' is longer than %u "
				 "characters",
				 addr, BATON_ADDR_MAX - 1);
		return BATON_EINVAL;
	}
	return baton_addr_parse(addr, &a, why, why_cap);
}

static uint32_t jitter(struct baton_transport *t, uint32_t ms)
{
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	return ms / 2 + (uint32_t)(t->rng % (ms + 1));
}

struct peer *baton__transport_peer_find(struct baton_transport *t,
					baton_node_id id)
{
	for (uint32_t i = 0; i < MAX_PEERS; i++)
		if (t->peers[i].id == id)
			return &t->peers[i];
	return NULL;
}

static void dial(struct peer *p);

/* ---- closing ----------------------------------------------------------- */

/* The transport goes once its last handle has closed. */
static void handle_gone(struct baton_transport *t)
{
	BATON_ASSERT(t->open_handles > 0);
	if (--t->open_handles == 0 && t->stopping) {
		baton_peer_secret_wipe(&t->secret);
		free(t);
	}
}

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	struct baton_transport *t = c->t;
	if (c->all_prev != NULL)
		c->all_prev->all_next = c->all_next;
	else
		t->all = c->all_next;
	if (c->all_next != NULL)
		c->all_next->all_prev = c->all_prev;
	baton_buf_free(&c->in);
	baton_buf_free(&c->pending);
	baton_buf_free(&c->spare);
	free(c);
	handle_gone(t);
}

static void on_timer_closed(uv_handle_t *h)
{
	struct peer *p = h->data;
	handle_gone(p->t);
}

static void on_sweep_closed(uv_handle_t *h)
{
	handle_gone(h->data);
}

static void on_flush_handle_closed(uv_handle_t *h)
{
	handle_gone(h->data);
}

static void on_redial(uv_timer_t *timer);

static void schedule_redial(struct peer *p)
{
	struct baton_transport *t = p->t;
	if (t->stopping || p->id == 0 || p->addr[0] == '\0' || !p->redial_init)
		return;
	p->backoff_ms = p->backoff_ms == 0 ? BATON_TRANSPORT_BACKOFF_MIN_MS
			: p->backoff_ms * 2 > BATON_TRANSPORT_BACKOFF_MAX_MS
				? BATON_TRANSPORT_BACKOFF_MAX_MS
				: p->backoff_ms * 2;
	uv_timer_start(&p->redial, on_redial, jitter(t, p->backoff_ms), 0);
}

void baton__transport_probe_done(struct conn *c, int rv, const char *why,
				 const struct baton_peer_handshake_reply *r)
{
	baton_transport_probe_cb cb = c->probe_cb;
	if (cb == NULL)
		return;
	BATON_ASSERT((rv == 0) == (r != NULL));
	c->probe_cb = NULL; /* once */
	if (!c->t->stopping)
		cb(c->probe_data, c->probe_addr, rv, why, r);
}

void baton__transport_close(struct conn *c, const char *why)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->connecting != NULL) {
		baton_addr_connect_cancel(c->connecting);
		c->connecting = NULL;
	}
	baton__transport_probe_done(c, BATON_EIO, why, NULL);
	struct peer *p = c->peer;
	if (p != NULL) {
		if (c->ready)
			LOG_INFO("connection %s node %" PRIu64 " closed: %s",
				 c->outbound ? "to" : "from", p->id, why);
		if (p->out == c) {
			p->out = NULL;
			p->dialling = false;
		}
		if (p->in == c)
			p->in = NULL;
		if (c->outbound)
			schedule_redial(p);
	}
	bool down =
		c->ready && (p == NULL || (p->out == NULL && p->in == NULL));
	if (down && c->t->stats.connected_peers > 0)
		c->t->stats.connected_peers--;
	baton_node_id down_id = down && p != NULL ? p->id : 0;
	/* A node we never dial (a joiner, or anyone who reached the port)
	 * holds its slot only while connected: otherwise 64 made-up ids
	 * would leave no room for the next real one. */
	if (p != NULL && p->addr[0] == '\0' && !p->redial_init &&
	    p->out == NULL && p->in == NULL) {
		BATON_ASSERT(!c->outbound);
		c->peer = NULL;
		memset(p, 0, sizeof *p);
	}
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
	if (down_id != 0 && c->t->c.peer_down != NULL)
		c->t->c.peer_down(c->t->c.data, down_id);
}

/* ---- reading ------------------------------------------------------------- */

/* A frame on a connection whose handshake is done. */
static void on_ready_frame(struct conn *c, const uint8_t *body, size_t len)
{
	struct baton_transport *t = c->t;
	baton_node_id from = c->peer->id;
	struct baton_peer_frame f;
	int rv = baton_peer_decode(c->proto, body, len, &f);
	if (rv != 0) {
		/* The stream's framing is intact: skip just this frame. */
		t->stats.bad_frames++;
		LOG_WARN_LIMITED(
			"dropped a frame from node %" PRIu64
			" that does not decode in protocol %u: %s (%s)",
			from, c->proto.value, f.why, baton_strerror(rv));
		return;
	}
	switch (f.kind) {
	case BATON_PEER_RAFT:
	case BATON_PEER_FORWARD:
	case BATON_PEER_FORWARD_REPLY:
	case BATON_PEER_JOIN:
	case BATON_PEER_JOIN_REPLY:
		/* Trust the handshake's identity, not the frame's. */
		if (f.kind == BATON_PEER_RAFT)
			f.raft.from = from;
		t->stats.frames_in++;
		t->stats.bytes_in += len;
		t->c.on_frame(t->c.data, from, &f);
		break;
	case BATON_PEER_HANDSHAKE_REPLY:
		if (!f.handshake_reply.accepted) {
			baton__transport_refused_late(c, &f.handshake_reply);
			break;
		}
		/* fall through */
	default:
		t->stats.unknown++;
		LOG_DEBUG("ignored a frame of kind %u (body %u, Raft type %u) "
			  "from node %" PRIu64,
			  f.kind,
			  f.kind == BATON_PEER_UNKNOWN ? f.unknown.body : 0,
			  f.kind == BATON_PEER_UNKNOWN ? f.unknown.raft_type
						       : 0,
			  from);
		break;
	}
	baton_peer_frame_free(&f);
}

static void on_frame(struct conn *c, const uint8_t *body, size_t len)
{
	if (c->ready)
		on_ready_frame(c, body, len);
	else
		baton__transport_first_frame(c, body, len);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;
	(void)suggested;
	if (baton_buf_reserve(&c->in, 64 * 1024) != 0) {
		buf->base = NULL;
		buf->len = 0;
		return;
	}
	buf->base = (char *)c->in.data + c->in.len;
	buf->len = c->in.cap - c->in.len;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = s->data;
	(void)buf;
	if (nread < 0) {
		baton__transport_close(c, nread == UV_EOF
						  ? "closed by the peer"
						  : uv_strerror((int)nread));
		return;
	}
	c->in.len += (size_t)nread;
	size_t off = 0;
	while (!c->closing) {
		size_t len = 0;
		if (!c->ready && c->in.len - off >= BATON_PEER_PREFIX_LEN &&
		    baton_le_get_u32(c->in.data + off) >
			    BATON_PEER_HANDSHAKE_FRAME_MAX) {
			/* Before the handshake only small frames: nothing is
			 * buffered for a peer that has not said who it is. */
			c->t->stats.malformed++;
			LOG_WARN_LIMITED(
				"a frame of %u bytes from a peer connection "
				"whose handshake is not complete exceeds the "
				"limit of %u bytes before a handshake; closing",
				baton_le_get_u32(c->in.data + off),
				BATON_PEER_HANDSHAKE_FRAME_MAX);
			baton__transport_close(c, "oversized handshake frame");
			break;
		}
		/* The handshake's frames are frozen; after it, the frames
		 * are in the envelope of the version negotiated. */
		struct baton_proto_version framing =
			c->ready ? c->proto : (struct baton_proto_version){0};
		size_t whole = 0;
		int rv = baton_peer_split_framed(framing, c->in.data + off,
						 c->in.len - off, &len, &whole);
		if (rv == BATON_ECORRUPT) {
			/* Damaged on the way, or not a frame of this
			 * protocol: nothing of it may reach the decoder, and
			 * where the next frame starts is unknown too. */
			c->t->stats.malformed++;
			c->t->stats.bad_checksums++;
			LOG_WARN_LIMITED(
				"closing the connection %s node %" PRIu64
				": a frame's checksum differs from its header "
				"and body (peer protocol %u); the frame was "
				"refused without decoding it",
				c->outbound ? "to" : "from", c->peer->id,
				framing.value);
			baton__transport_close(c, "frame checksum differs");
			break;
		}
		if (rv == BATON_ETOOBIG) {
			c->t->stats.malformed++;
			LOG_WARN_LIMITED(
				"a frame from %s exceeds the limit of %u "
				"bytes; closing",
				c->peer ? c->peer->addr : "a peer",
				(unsigned)BATON_PEER_FRAME_MAX);
			baton__transport_close(c, "oversized frame");
			break;
		}
		if (rv == 0)
			break;
		on_frame(c, c->in.data + off + BATON_PEER_PREFIX_LEN, len);
		off += whole;
	}
	if (off > 0 && !c->closing) {
		memmove(c->in.data, c->in.data + off, c->in.len - off);
		c->in.len -= off;
	}
}

static struct conn *conn_new(struct baton_transport *t, bool outbound)
{
	struct conn *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->t = t;
	c->outbound = outbound;
	baton_buf_init(&c->in);
	baton_buf_init(&c->pending);
	baton_buf_init(&c->spare);
	uv_tcp_init(t->c.loop, &c->tcp);
	uv_tcp_nodelay(&c->tcp, 1);
	c->tcp.data = c;
	c->opened_ms = uv_now(t->c.loop);
	c->all_next = t->all;
	if (t->all != NULL)
		t->all->all_prev = c;
	t->all = c;
	t->open_handles++;
	return c;
}

static void on_sweep(uv_timer_t *timer)
{
	struct baton_transport *t = timer->data;
	uint64_t now = uv_now(t->c.loop);
	for (struct conn *c = t->all; c != NULL; c = c->all_next) {
		if (c->ready || c->closing ||
		    now - c->opened_ms < HANDSHAKE_TIMEOUT_MS)
			continue;
		t->stats.malformed++;
		LOG_WARN_LIMITED(
			"closing a peer connection: no handshake within %u ms",
			HANDSHAKE_TIMEOUT_MS);
		baton__transport_close(c, "handshake timeout");
	}
}

/* ---- dialling and accepting --------------------------------------------- */

/* A name that does not resolve is worth a warning, but not at every
 * redial. */
static void log_unresolved(struct conn *c, int status)
{
	struct peer *p = c->peer;
	uint64_t now = uv_now(c->t->c.loop);
	LOG_DEBUG("dial node %" PRIu64 " at %s: cannot resolve: %s",
		  p ? p->id : 0, p ? p->addr : c->probe_addr,
		  uv_strerror(status));
	if (p == NULL || p->unresolved_logged_ms == 0 ||
	    now >= p->unresolved_logged_ms + RESOLVE_LOG_INTERVAL_MS) {
		LOG_WARN("cannot resolve the address of node %" PRIu64
			 " (%s): %s; retrying",
			 p ? p->id : 0, p ? p->addr : c->probe_addr,
			 uv_strerror(status));
		if (p != NULL)
			p->unresolved_logged_ms = now;
	}
}

static void on_connected(void *data, int status)
{
	struct conn *c = data;
	c->connecting = NULL;
	if (status != 0 && baton_addr_resolve_failed(status)) {
		log_unresolved(c, status);
		char why[BATON_ADDR_MAX + 64];
		snprintf(why, sizeof why, "cannot resolve %s: %s",
			 c->peer ? c->peer->addr : c->probe_addr,
			 uv_strerror(status));
		baton__transport_close(c, why);
		return;
	}
	if (status != 0) {
		LOG_DEBUG("dial node %" PRIu64 " at %s: %s",
			  c->peer ? c->peer->id : 0,
			  c->peer ? c->peer->addr : "?", uv_strerror(status));
		baton__transport_close(c, uv_strerror(status));
		return;
	}
	if (c->closing)
		return;
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	baton__transport_hello(c);
}

static void dial(struct peer *p)
{
	struct baton_transport *t = p->t;
	if (t->stopping || p->out != NULL || p->addr[0] == '\0')
		return;
	char why[BATON_ADDR_WHY_MAX];
	if (baton_parse_addr(p->addr, why, sizeof why) != 0) {
		LOG_ERROR("node %" PRIu64 ": %s", p->id, why);
		return;
	}
	struct conn *c = conn_new(t, true);
	if (c == NULL)
		return;
	c->peer = p;
	p->out = c;
	p->dialling = true;
	int rv = baton_addr_connect(t->c.loop, &c->tcp, p->addr, on_connected,
				    c, &c->connecting);
	if (rv != 0)
		baton__transport_close(c, uv_strerror(rv));
}

static void on_redial(uv_timer_t *timer)
{
	dial(timer->data);
}

int baton_transport_probe(struct baton_transport *t, const char *addr,
			  baton_transport_probe_cb cb, void *data)
{
	BATON_ASSERT(t != NULL && addr != NULL && cb != NULL);
	if (t->stopping || baton_parse_addr(addr, NULL, 0) != 0)
		return BATON_EINVAL;
	struct conn *c = conn_new(t, true);
	if (c == NULL)
		return BATON_ENOMEM;
	snprintf(c->probe_addr, sizeof c->probe_addr, "%s", addr);
	c->probe_data = data;
	c->probe_cb = cb; /* from here on, cb answers every outcome */
	int rv = baton_addr_connect(t->c.loop, &c->tcp, addr, on_connected, c,
				    &c->connecting);
	if (rv != 0)
		baton__transport_close(c, uv_strerror(rv));
	return 0;
}

/* At most BATON_TRANSPORT_HANDSHAKING_MAX accepted connections in their
 * handshake: make room for one more by closing the oldest. A real peer
 * completes its handshake in a round trip, so whoever floods the port
 * mostly closes its own connections. */
static void cap_handshaking(struct baton_transport *t)
{
	uint32_t n = 0;
	struct conn *oldest = NULL;
	for (struct conn *c = t->all; c != NULL; c = c->all_next) {
		if (c->outbound || c->ready || c->closing)
			continue;
		n++;
		if (oldest == NULL || c->opened_ms <= oldest->opened_ms)
			oldest = c;
	}
	if (n < BATON_TRANSPORT_HANDSHAKING_MAX)
		return;
	BATON_ASSERT(oldest != NULL);
	t->stats.handshaking_evicted++;
	uint64_t now = uv_now(t->c.loop);
	if (now >= t->evicted_logged_ms + 1000) {
		LOG_WARN("%u peer connections are in their handshake, the "
			 "limit: closing the oldest for a new one (%" PRIu64
			 " so closed in all)",
			 n, t->stats.handshaking_evicted);
		t->evicted_logged_ms = now;
	}
	baton__transport_close(oldest, "too many connections in handshake");
}

static void on_connection(uv_stream_t *server, int status)
{
	struct baton_transport *t = server->data;
	if (status != 0)
		return;
	cap_handshaking(t);
	struct conn *c = conn_new(t, false);
	if (c == NULL)
		return;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		baton__transport_close(c, "accept failed");
		return;
	}
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- the API ----------------------------------------------------------------
 */

static void on_listener_closed(uv_handle_t *h)
{
	handle_gone(h->data);
}

int baton_transport_start(const struct baton_transport_config *c,
			  struct baton_transport **out)
{
	/* Resolved once: a listening address does not move. */
	struct sockaddr_storage sa;
	char why[BATON_ADDR_WHY_MAX];
	if (baton_parse_addr(c->listen_addr, why, sizeof why) != 0 ||
	    baton_addr_resolve(c->listen_addr, &sa, why, sizeof why) != 0) {
		LOG_ERROR("cannot listen for peers: %s", why);
		return BATON_EINVAL;
	}
	struct baton_transport *t = calloc(1, sizeof *t);
	if (t == NULL)
		return BATON_ENOMEM;
	t->c = *c;
	if (c->secret != NULL) {
		BATON_ASSERT(c->secret->len >= BATON_PEER_SECRET_MIN &&
			     c->secret->len <= BATON_PEER_SECRET_MAX);
		t->secret = *c->secret;
		t->has_secret = true;
	}
	t->c.secret = NULL; /* ours is t->secret */
	snprintf(t->cluster_id, sizeof t->cluster_id, "%s", c->cluster_id);
	t->c.cluster_id = t->cluster_id;
	t->rng = uv_hrtime() | 1;
	uv_tcp_init(c->loop, &t->listener);
	t->listener.data = t;
	t->open_handles = 1;
	int rv = uv_tcp_bind(&t->listener, (struct sockaddr *)&sa, 0);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)&t->listener, 128, on_connection);
	if (rv != 0) {
		LOG_ERROR("cannot listen for peers on %s: %s", c->listen_addr,
			  uv_strerror(rv));
		t->stopping = true;
		uv_close((uv_handle_t *)&t->listener, on_listener_closed);
		return BATON_EIO;
	}
	LOG_INFO("listening for peers on %s", c->listen_addr);
	uv_timer_init(c->loop, &t->sweep);
	t->sweep.data = t;
	t->open_handles++;
	uv_timer_start(&t->sweep, on_sweep, 1000, 1000);
	/* Started before the node's own check handle, which libuv runs
	 * first (the latest started first): the frames its flush queues
	 * (Appends of the proposals of this turn) go out in this turn. */
	baton__transport_flush_start(t, c->loop);
	*out = t;
	return 0;
}

/* A slot for a member when every slot is taken: the one of a node we never
 * dial (anyone who connected, a joiner), whose connection is closed. */
static struct peer *evict_for_member(struct baton_transport *t)
{
	for (uint32_t i = 0; i < MAX_PEERS; i++) {
		struct peer *p = &t->peers[i];
		if (p->addr[0] != '\0' || p->redial_init || p->out != NULL)
			continue;
		BATON_ASSERT(p->id != 0);
		LOG_WARN_LIMITED(
			"peer table full: closing the connection of node "
			"%" PRIu64 ", which is not a member, for a member",
			p->id);
		if (p->in != NULL) /* closing frees a slot nobody dials */
			baton__transport_close(p->in, "slot taken by a member");
		else
			memset(p, 0, sizeof *p);
		BATON_ASSERT(p->id == 0);
		return p;
	}
	return NULL;
}

int baton_transport_set_peer(struct baton_transport *t, baton_node_id id,
			     const char *addr)
{
	if (strlen(addr) >= BATON_ADDR_MAX)
		return BATON_EINVAL;
	struct peer *p = baton__transport_peer_find(t, id);
	if (p == NULL)
		p = baton__transport_peer_find(t, 0);
	if (p == NULL)
		p = evict_for_member(t);
	if (p == NULL) {
		LOG_ERROR("peer table full (%u): cannot reach node %" PRIu64
			  " at %s",
			  MAX_PEERS, id, addr);
		return BATON_ETOOBIG;
	}
	if (p->id == id && strcmp(p->addr, addr) == 0)
		return 0;
	p->id = id;
	p->t = t;
	snprintf(p->addr, sizeof p->addr, "%s", addr);
	if (!p->redial_init) {
		uv_timer_init(t->c.loop, &p->redial);
		p->redial.data = p;
		p->redial_init = true;
		t->open_handles++;
	}
	if (p->out != NULL)
		baton__transport_close(p->out, "address changed");
	dial(p);
	return 0;
}

void baton_transport_forget_peer(struct baton_transport *t, baton_node_id id)
{
	struct peer *p = baton__transport_peer_find(t, id);
	if (p == NULL)
		return;
	p->addr[0] = '\0';
	if (p->redial_init)
		uv_timer_stop(&p->redial);
	baton__transport_flush_all(
		t); /* what was sent to it before it was removed */
	if (p->out != NULL)
		baton__transport_close(p->out, "member removed");
	if (p->in != NULL)
		baton__transport_close(p->in, "member removed");
}

struct baton_proto_version baton_transport_peer_proto(struct baton_transport *t,
						      baton_node_id id)
{
	struct conn *c = baton__transport_ready_conn(t, id);
	return c != NULL ? c->proto : (struct baton_proto_version){0};
}

static void peer_view(struct baton_transport *t, const struct peer *p,
		      struct baton_transport_peer *out)
{
	memset(out, 0, sizeof *out);
	out->id = p->id;
	out->known = p->known;
	out->profile = p->profile;
	out->proto = baton_transport_peer_proto(t, p->id);
	out->connected = out->proto.value != 0;
}

int baton_transport_peer(struct baton_transport *t, baton_node_id id,
			 struct baton_transport_peer *out)
{
	struct peer *p = id != 0 ? baton__transport_peer_find(t, id) : NULL;
	if (p == NULL)
		return BATON_ENOTFOUND;
	peer_view(t, p, out);
	return 0;
}

void baton_transport_stats(struct baton_transport *t,
			   struct baton_transport_stats *out)
{
	*out = t->stats;
	out->n_peers = 0;
	for (uint32_t i = 0; i < MAX_PEERS; i++)
		if (t->peers[i].id != 0)
			peer_view(t, &t->peers[i], &out->peers[out->n_peers++]);
	BATON_ASSERT(out->n_peers <= BATON_TRANSPORT_PEERS_MAX);
}

void baton_transport_stop(struct baton_transport *t)
{
	/* What this turn of the loop queued goes as far as the sockets
	 * take it now, as it did when every frame was written at once. */
	baton__transport_flush_all(t);
	t->stopping = true;
	for (uint32_t i = 0; i < MAX_PEERS; i++) {
		struct peer *p = &t->peers[i];
		if (p->redial_init) {
			uv_timer_stop(&p->redial);
			uv_close((uv_handle_t *)&p->redial, on_timer_closed);
		}
		if (p->out != NULL)
			baton__transport_close(p->out, "shutting down");
		if (p->in != NULL)
			baton__transport_close(p->in, "shutting down");
	}
	/* Connections still in their handshake are in no peer's slot. */
	for (struct conn *c = t->all; c != NULL; c = c->all_next)
		baton__transport_close(c, "shutting down");
	uv_timer_stop(&t->sweep);
	uv_close((uv_handle_t *)&t->sweep, on_sweep_closed);
	uv_close((uv_handle_t *)&t->flush_before_poll, on_flush_handle_closed);
	uv_close((uv_handle_t *)&t->flush_after_poll, on_flush_handle_closed);
	uv_close((uv_handle_t *)&t->listener, on_listener_closed);
}
