/* The peer transport on libuv (see transport.h). */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/buf.h"
#include "log.h"
#include "peer.h"
#include "transport.h"

#define MAX_PEERS 64u
/* A connection that has not completed its handshake by then is closed
 * (someone connected to the peer port and said nothing useful). */
#define HANDSHAKE_TIMEOUT_MS 10000u

struct conn;

struct peer {
	baton_node_id id; /* 0: free slot */
	char addr[BATON_ADDR_MAX];
	struct conn *out; /* dialled by us */
	struct conn *in;  /* accepted, after its handshake */
	uv_timer_t redial;
	bool redial_init;
	uint32_t backoff_ms;
	bool dialling;
	struct baton_transport *t;
};

struct conn {
	uv_tcp_t tcp;
	struct baton_transport *t;
	struct peer *peer; /* NULL for an inbound one before its handshake */
	bool outbound;
	bool ready; /* handshake done */
	bool closing;
	uint32_t proto;
	struct baton_buf in;
	size_t queued;
	uint64_t opened_ms;
	struct conn *all_prev, *all_next; /* every open connection */
};

struct write_req {
	uv_write_t req;
	struct conn *c;
	size_t len;
	uint8_t data[];
};

struct baton_transport {
	struct baton_transport_config c;
	char cluster_id[128];
	uv_tcp_t listener;
	struct peer peers[MAX_PEERS];
	struct baton_transport_stats stats;
	uint64_t rng;
	bool stopping;
	uint32_t open_handles;
	struct conn *all;
	uv_timer_t sweep;
};

int baton_parse_addr(const char *addr, struct sockaddr_in *out)
{
	char host[BATON_ADDR_MAX];
	const char *colon = strrchr(addr, ':');
	if (colon == NULL || (size_t)(colon - addr) >= sizeof host)
		return BATON_EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || port == 0 || port > 65535)
		return BATON_EINVAL;
	return uv_ip4_addr(host, (int)port, out) == 0 ? 0 : BATON_EINVAL;
}

static uint32_t jitter(struct baton_transport *t, uint32_t ms)
{
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	return ms / 2 + (uint32_t)(t->rng % (ms + 1));
}

static struct peer *peer_find(struct baton_transport *t, baton_node_id id)
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
	assert(t->open_handles > 0);
	if (--t->open_handles == 0 && t->stopping)
		free(t);
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

static void conn_close(struct conn *c, const char *why)
{
	if (c->closing)
		return;
	c->closing = true;
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
	if (c->ready && c->t->stats.connected_peers > 0 &&
	    (p == NULL || (p->out == NULL && p->in == NULL)))
		c->t->stats.connected_peers--;
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* ---- writing ------------------------------------------------------------- */

static void on_written(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	w->c->queued -= w->len;
	if (status != 0 && status != UV_ECANCELED)
		conn_close(w->c, uv_strerror(status));
	free(w);
}

static int conn_write(struct conn *c, const uint8_t *data, size_t len)
{
	if (c->closing)
		return BATON_ENOTFOUND;
	if (c->queued + len > BATON_TRANSPORT_QUEUE_MAX)
		return BATON_EOVERLOADED;
	struct write_req *w = malloc(sizeof *w + len);
	if (w == NULL)
		return BATON_ENOMEM;
	memcpy(w->data, data, len);
	w->c = c;
	w->len = len;
	uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)len);
	int rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written);
	if (rv != 0) {
		free(w);
		conn_close(c, uv_strerror(rv));
		return BATON_ENOTFOUND;
	}
	c->queued += len;
	return 0;
}

/* ---- the handshake ------------------------------------------------------- */

static void fill_handshake(struct baton_transport *t,
			   struct baton_peer_handshake *h)
{
	memset(h, 0, sizeof *h);
	h->cluster_id = t->cluster_id;
	h->node_id = t->c.id;
	h->profile = t->c.profile;
	h->peer_addr = t->c.listen_addr;
}

static void send_handshake(struct conn *c)
{
	struct baton_peer_handshake h;
	fill_handshake(c->t, &h);
	struct baton_buf b;
	baton_buf_init(&b);
	if (baton_peer_encode_handshake(&h, &b) == 0)
		conn_write(c, b.data, b.len);
	baton_buf_free(&b);
}

static void reply_handshake(struct conn *c, bool accepted, uint32_t proto,
			    const char *reason)
{
	struct baton_peer_handshake_reply r;
	memset(&r, 0, sizeof r);
	fill_handshake(c->t, &r.self);
	r.accepted = accepted;
	r.proto.value = proto;
	r.reason = reason;
	struct baton_buf b;
	baton_buf_init(&b);
	if (baton_peer_encode_handshake_reply(&r, &b) == 0)
		conn_write(c, b.data, b.len);
	baton_buf_free(&b);
}

static void became_ready(struct conn *c, uint32_t proto)
{
	struct peer *p = c->peer;
	c->ready = true;
	c->proto = proto;
	p->backoff_ms = 0;
	if (!(p->out != NULL && p->out != c && p->out->ready) &&
	    !(p->in != NULL && p->in != c && p->in->ready))
		c->t->stats.connected_peers++;
	LOG_INFO("connected %s node %" PRIu64 " (protocol %u)",
		 c->outbound ? "to" : "from", p->id, proto);
}

static void on_refused_shutdown(uv_shutdown_t *req, int status)
{
	struct conn *c = req->handle->data;
	(void)status;
	free(req);
	conn_close(c, "refused");
}

/* An inbound connection introduces itself. */
static void on_handshake(struct conn *c, const struct baton_peer_handshake *h)
{
	struct baton_transport *t = c->t;
	char reason[256];
	struct baton_proto_version v;
	if (strcmp(h->cluster_id, t->cluster_id) != 0) {
		snprintf(reason, sizeof reason,
			 "cluster id '%s' is not this cluster's ('%s')",
			 h->cluster_id, t->cluster_id);
	} else if (h->node_id == 0 || h->node_id == t->c.id) {
		snprintf(reason, sizeof reason, "bad node id %" PRIu64,
			 h->node_id);
	} else if (baton_peer_choose_proto(t->c.profile, h->profile, &v) != 0) {
		snprintf(reason, sizeof reason,
			 "no common peer protocol: this node speaks %u..%u, "
			 "node %" PRIu64 " speaks %u..%u",
			 t->c.profile.proto_min.value,
			 t->c.profile.proto_max.value, h->node_id,
			 h->profile.proto_min.value,
			 h->profile.proto_max.value);
	} else {
		struct peer *p = peer_find(t, h->node_id);
		if (p == NULL)
			p = peer_find(t, 0);
		if (p == NULL) {
			snprintf(reason, sizeof reason, "too many peers");
		} else {
			if (p->id == 0) {
				p->id = h->node_id;
				p->t = t;
			}
			if (p->in != NULL && p->in != c)
				conn_close(p->in, "replaced by a newer one");
			p->in = c;
			c->peer = p;
			reply_handshake(c, true, v.value, "");
			became_ready(c, v.value);
			return;
		}
	}
	t->stats.refused++;
	LOG_WARN("refused a peer connection: %s", reason);
	reply_handshake(c, false, 0, reason);
	/* Let the reply go out before closing. */
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_shutdown_t *req = malloc(sizeof *req);
	if (req == NULL || uv_shutdown(req, (uv_stream_t *)&c->tcp,
				       on_refused_shutdown) != 0) {
		free(req);
		conn_close(c, reason);
	}
}

/* Our dialled connection hears back. */
static void on_handshake_reply(struct conn *c,
			       const struct baton_peer_handshake_reply *r)
{
	if (!r->accepted) {
		c->t->stats.refused++;
		LOG_WARN("node %" PRIu64 " refused our connection: %s",
			 c->peer->id, r->reason);
		conn_close(c, "refused");
		return;
	}
	if (r->self.node_id != c->peer->id) {
		LOG_WARN("%s is node %" PRIu64 ", not node %" PRIu64,
			 c->peer->addr, r->self.node_id, c->peer->id);
		conn_close(c, "wrong node");
		return;
	}
	became_ready(c, r->proto.value);
}

/* ---- reading ------------------------------------------------------------- */

static void on_frame(struct conn *c, const uint8_t *body, size_t len)
{
	struct baton_transport *t = c->t;
	if (c->ready) {
		t->stats.frames_in++;
		t->c.on_frame(t->c.data, c->peer->id, body, len);
		return;
	}
	struct baton_peer_frame f;
	if (baton_peer_decode(body, len, &f) != 0) {
		t->stats.malformed++;
		LOG_WARN("closing a peer connection: its first frame is not a "
			 "valid handshake (%s)",
			 f.why != NULL ? f.why : "malformed");
		conn_close(c, "malformed handshake");
		return;
	}
	if (!c->outbound && f.kind == BATON_PEER_HANDSHAKE) {
		on_handshake(c, &f.handshake);
	} else if (c->outbound && f.kind == BATON_PEER_HANDSHAKE_REPLY) {
		on_handshake_reply(c, &f.handshake_reply);
	} else {
		t->stats.malformed++;
		LOG_WARN("closing a peer connection: expected a handshake, got "
			 "a frame of kind %u",
			 f.kind);
		conn_close(c, "expected a handshake");
	}
	baton_peer_frame_free(&f);
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
		conn_close(c, nread == UV_EOF ? "closed by the peer"
					      : uv_strerror((int)nread));
		return;
	}
	c->in.len += (size_t)nread;
	size_t off = 0;
	while (!c->closing && c->in.len - off >= 4) {
		const uint8_t *p = c->in.data + off;
		uint32_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
			       (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		if (len > BATON_PEER_FRAME_MAX) {
			c->t->stats.malformed++;
			LOG_WARN("frame of %u bytes from %s exceeds the limit "
				 "of %u; closing",
				 len, c->peer ? c->peer->addr : "a peer",
				 (unsigned)BATON_PEER_FRAME_MAX);
			conn_close(c, "oversized frame");
			break;
		}
		if (c->in.len - off - 4 < len)
			break;
		on_frame(c, p + 4, len);
		off += 4 + (size_t)len;
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
		LOG_WARN("closing a peer connection: no handshake within %u ms",
			 HANDSHAKE_TIMEOUT_MS);
		conn_close(c, "handshake timeout");
	}
}

/* ---- dialling and accepting --------------------------------------------- */

static void on_connected(uv_connect_t *req, int status)
{
	struct conn *c = req->data;
	free(req);
	if (status != 0) {
		LOG_DEBUG("dial node %" PRIu64 " at %s: %s",
			  c->peer ? c->peer->id : 0,
			  c->peer ? c->peer->addr : "?", uv_strerror(status));
		conn_close(c, uv_strerror(status));
		return;
	}
	if (c->closing)
		return;
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	send_handshake(c);
}

static void dial(struct peer *p)
{
	struct baton_transport *t = p->t;
	if (t->stopping || p->out != NULL || p->addr[0] == '\0')
		return;
	struct sockaddr_in sa;
	if (baton_parse_addr(p->addr, &sa) != 0) {
		LOG_ERROR("node %" PRIu64 ": bad address '%s'", p->id, p->addr);
		return;
	}
	struct conn *c = conn_new(t, true);
	uv_connect_t *req = malloc(sizeof *req);
	if (c == NULL || req == NULL) {
		free(req);
		if (c != NULL)
			conn_close(c, "out of memory");
		return;
	}
	c->peer = p;
	p->out = c;
	p->dialling = true;
	req->data = c;
	int rv = uv_tcp_connect(req, &c->tcp, (struct sockaddr *)&sa,
				on_connected);
	if (rv != 0) {
		free(req);
		conn_close(c, uv_strerror(rv));
	}
}

static void on_redial(uv_timer_t *timer)
{
	dial(timer->data);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct baton_transport *t = server->data;
	if (status != 0)
		return;
	struct conn *c = conn_new(t, false);
	if (c == NULL)
		return;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c, "accept failed");
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
	struct sockaddr_in sa;
	if (baton_parse_addr(c->listen_addr, &sa) != 0) {
		LOG_ERROR("bad peer address '%s' (want host:port)",
			  c->listen_addr);
		return BATON_EINVAL;
	}
	struct baton_transport *t = calloc(1, sizeof *t);
	if (t == NULL)
		return BATON_ENOMEM;
	t->c = *c;
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
	*out = t;
	return 0;
}

int baton_transport_set_peer(struct baton_transport *t, baton_node_id id,
			     const char *addr)
{
	if (strlen(addr) >= BATON_ADDR_MAX)
		return BATON_EINVAL;
	struct peer *p = peer_find(t, id);
	if (p == NULL)
		p = peer_find(t, 0);
	if (p == NULL)
		return BATON_ETOOBIG;
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
		conn_close(p->out, "address changed");
	dial(p);
	return 0;
}

void baton_transport_forget_peer(struct baton_transport *t, baton_node_id id)
{
	struct peer *p = peer_find(t, id);
	if (p == NULL)
		return;
	p->addr[0] = '\0';
	if (p->redial_init)
		uv_timer_stop(&p->redial);
	if (p->out != NULL)
		conn_close(p->out, "member removed");
	if (p->in != NULL)
		conn_close(p->in, "member removed");
}

int baton_transport_send(struct baton_transport *t, baton_node_id id,
			 const uint8_t *frame, size_t len)
{
	struct peer *p = peer_find(t, id);
	struct conn *c = NULL;
	if (p != NULL && p->out != NULL && p->out->ready)
		c = p->out;
	else if (p != NULL && p->in != NULL && p->in->ready)
		c = p->in;
	int rv = c != NULL ? conn_write(c, frame, len) : BATON_ENOTFOUND;
	if (rv == 0)
		t->stats.frames_out++;
	else
		t->stats.dropped++;
	return rv;
}

uint32_t baton_transport_peer_proto(struct baton_transport *t, baton_node_id id)
{
	struct peer *p = peer_find(t, id);
	if (p != NULL && p->out != NULL && p->out->ready)
		return p->out->proto;
	if (p != NULL && p->in != NULL && p->in->ready)
		return p->in->proto;
	return 0;
}

void baton_transport_stats(struct baton_transport *t,
			   struct baton_transport_stats *out)
{
	*out = t->stats;
}

void baton_transport_count_unknown(struct baton_transport *t)
{
	t->stats.unknown++;
}

void baton_transport_stop(struct baton_transport *t)
{
	t->stopping = true;
	for (uint32_t i = 0; i < MAX_PEERS; i++) {
		struct peer *p = &t->peers[i];
		if (p->redial_init) {
			uv_timer_stop(&p->redial);
			uv_close((uv_handle_t *)&p->redial, on_timer_closed);
		}
		if (p->out != NULL)
			conn_close(p->out, "shutting down");
		if (p->in != NULL)
			conn_close(p->in, "shutting down");
	}
	/* Connections still in their handshake are in no peer's slot. */
	for (struct conn *c = t->all; c != NULL; c = c->all_next)
		conn_close(c, "shutting down");
	uv_timer_stop(&t->sweep);
	uv_close((uv_handle_t *)&t->sweep, on_sweep_closed);
	uv_close((uv_handle_t *)&t->listener, on_listener_closed);
}
