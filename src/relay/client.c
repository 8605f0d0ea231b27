/*
 * The node-side relay client (client.h): one connection to baton-relay at
 * a time, the session of docs/relay-protocol.md ("The session", "The
 * global view", "Streams, sequence numbers and acknowledgements") on the
 * node's side.
 *
 * Outgoing: one out_stream per destination (a unicast destination node
 * incarnation, or a multicast destination cluster) keeps every message
 * not yet acknowledged end to end, and `sent_upto`, the last seq written
 * on the current connection; rewinding `sent_upto` is how anything is
 * resent. Incoming: one in_stream per (source incarnation, kind) keeps
 * `last`, the last seq delivered in order.
 */
#include "client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
/* batond's log (src/relay/log.h is baton-relay's own). */
#include "../io/log.h"
#include "protocol.h"

#define FRAME_MAX (BATON_RELAY_HEADER_LEN + BATON_RELAY_DATA_BODY_MAX)
#define READ_BUF_INITIAL (64u << 10)
/* DATA is written while fewer bytes than this wait in the socket's write
 * queue; the rest goes out as writes complete. */
#define WRITE_WINDOW_BYTES (4u << 20)
/* An ERROR or LEAVE being flushed before close: closed after this even if
 * the relay reads nothing. */
#define CLOSE_LINGER_MS 2000u
/* The repeated-ACK resend (the receiver saw a gap): at most this often per
 * stream, standing for "once per round trip". */
#define RESEND_GUARD_MS 200u
/* Messages outstanding with no acknowledgement advancing for this long are
 * sent again (the protocol's optional retransmission rule 4). */
#define RESEND_STALL_MS 3000u
#define TICK_MAX_MS 250u

struct out_msg {
	uint64_t seq;
	uint32_t len;
	uint8_t *payload;
};

/* A node of a multicast stream's cluster, owed the messages from
 * owed_from on (those sent while it was in this node's view). */
struct mc_dest {
	baton_node_id node_id;
	uint64_t incarnation;
	uint64_t owed_from;
	uint64_t acked;
	uint64_t last_ack; /* the seq of its previous ACK */
	bool has_ack;
	/* The relay incarnation of the last view that showed it: a restarted
	 * relay's first views lack the nodes not yet back, which have not
	 * left (only a view of the same relay incarnation says that). */
	uint64_t seen_relay_incarnation;
};

struct out_stream {
	uint8_t kind;
	uint16_t cluster_len;
	char cluster[BATON_RELAY_ID_MAX + 1];
	baton_node_id node_id; /* unicast */
	uint64_t incarnation;  /* unicast */
	uint64_t last_seq;     /* the last seq given out */
	uint64_t sent_upto;    /* the last seq written on this connection */
	uint64_t max_sent;     /* the last seq ever written */
	uint64_t acked;	       /* unicast: the destination's last ACK */
	uint64_t last_ack;     /* unicast: the seq of the previous ACK */
	bool has_ack;
	bool gone; /* unicast: the destination left the view */
	uint64_t seen_relay_incarnation; /* unicast: as in struct mc_dest */
	uint64_t progress_ms, resend_ms;
	struct out_msg *msgs; /* msgs[head..head+count): seqs in order */
	size_t head, count, cap;
	struct mc_dest *dests; /* multicast */
	size_t ndests;
};

struct in_stream {
	uint8_t kind;
	uint16_t cluster_len;
	char cluster[BATON_RELAY_ID_MAX + 1];
	baton_node_id node_id;
	uint64_t incarnation;
	uint64_t last;
	bool ack_due;
};

struct view_node {
	uint16_t cluster_len;
	char cluster[BATON_RELAY_ID_MAX + 1];
	baton_node_id node_id;
	uint64_t incarnation;
	struct baton_release release;
	char address[BATON_RELAY_ADDR_MAX + 1];
	bool connected;
};

struct relay_conn {
	uv_tcp_t tcp;
	uv_connect_t connect_req;
	struct relay_client *client;
	uint8_t *rbuf;
	size_t rlen, rcap;
	size_t write_queue_bytes;
	bool connected, closing;
	uint64_t started_ms, last_recv_ms, last_send_ms, closing_since_ms;
	uint64_t ping_token;
};

struct write_req {
	uv_write_t req;
	struct relay_conn *conn;
	size_t len;
	uint8_t bytes[];
};

struct relay_client {
	uv_loop_t *loop;
	struct relay_client_config cfg; /* strings point at the copies below */
	char relay_addr[BATON_RELAY_ADDR_MAX + 1];
	char cluster_id[BATON_RELAY_ID_MAX + 1];
	char address[BATON_RELAY_ADDR_MAX + 1];
	struct sockaddr_storage relay_sa;
	struct relay_client_callbacks cb;

	uv_timer_t tick, reconnect;
	unsigned open_handles; /* timers and connections not yet closed */
	bool closing;
	void (*done)(void *arg);
	void *done_arg;

	struct relay_conn *conn;      /* the current connection, or NULL */
	struct relay_conn *lingering; /* flushing an ERROR or LEAVE */
	bool registered, active;
	uint64_t backoff_ms;
	uint64_t relay_incarnation;

	uint64_t view_number, view_relay_incarnation;
	struct view_node *view, *next_view;
	uint16_t view_count;
	struct relay_view_node *view_out;

	struct out_stream **out;
	size_t nout, out_cap, flush_start;
	struct in_stream *in;
	size_t nin, in_cap;

	uint64_t queued_msgs, queued_bytes;
	uint64_t sent, received, resent, acked, dropped, duplicates, gaps,
		reconnects;
	char last_error[256];
};

static uint64_t now_ms(const struct relay_client *c)
{
	return uv_now(c->loop);
}

static void start_connect(struct relay_client *c);
static void flush(struct relay_client *c);
static void lose_connection(struct relay_client *c);

/* ---- small helpers --------------------------------------------------------
 */

static bool str_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	return alen == blen && memcmp(a, b, alen) == 0;
}

/* An identifier of the protocol: 1..max bytes, no control byte. */
static bool valid_identifier(const char *s, size_t max)
{
	if (s == NULL)
		return false;
	size_t len = strlen(s);
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch == 0x7f)
			return false;
	}
	return true;
}

/* The len bytes at s, unprintable bytes as \xNN, into out (NUL-ended). */
static const char *escape(const char *s, size_t len, char *out, size_t cap)
{
	BATON_ASSERT(cap >= 8);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (o + 8 >= cap) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
	}
	out[o] = '\0';
	return out;
}

static void set_error(struct relay_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_error(struct relay_client *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

/* ---- handles and closing --------------------------------------------------
 */

static void maybe_finish(struct relay_client *c);

static void on_handle_closed(struct relay_client *c)
{
	BATON_ASSERT(c->open_handles > 0);
	c->open_handles--;
	maybe_finish(c);
}

static void on_conn_closed(uv_handle_t *h)
{
	struct relay_conn *conn = h->data;
	struct relay_client *c = conn->client;
	if (c->lingering == conn)
		c->lingering = NULL;
	BATON_ASSERT(c->conn != conn);
	free(conn->rbuf);
	free(conn);
	on_handle_closed(c);
}

static void on_timer_closed(uv_handle_t *h)
{
	on_handle_closed(h->data);
}

static void close_now(struct relay_conn *conn)
{
	conn->closing = true;
	if (!uv_is_closing((uv_handle_t *)&conn->tcp))
		uv_close((uv_handle_t *)&conn->tcp, on_conn_closed);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	struct relay_conn *conn = req->data;
	free(req);
	close_now(conn);
}

/* Detach conn from c and close it: after what is queued (an ERROR, a
 * LEAVE) is written when graceful, within CLOSE_LINGER_MS. */
static void conn_release(struct relay_client *c, struct relay_conn *conn,
			 bool graceful)
{
	BATON_ASSERT(conn != NULL && conn->client == c);
	if (c->conn == conn)
		c->conn = NULL;
	conn->closing = true;
	if (!conn->connected || !graceful) {
		close_now(conn);
		return;
	}
	uv_read_stop((uv_stream_t *)&conn->tcp);
	if (c->lingering != NULL && c->lingering != conn)
		close_now(c->lingering);
	c->lingering = conn;
	conn->closing_since_ms = now_ms(c);
	uv_shutdown_t *req = malloc(sizeof(*req));
	if (req == NULL) {
		close_now(conn);
		return;
	}
	req->data = conn;
	if (uv_shutdown(req, (uv_stream_t *)&conn->tcp, on_shutdown) != 0) {
		free(req);
		close_now(conn);
	}
}

static void free_client(struct relay_client *c)
{
	for (size_t i = 0; i < c->nout; i++) {
		struct out_stream *s = c->out[i];
		for (size_t k = 0; k < s->count; k++)
			free(s->msgs[s->head + k].payload);
		free(s->msgs);
		free(s->dests);
		free(s);
	}
	free(c->out);
	free(c->in);
	free(c->view);
	free(c->next_view);
	free(c->view_out);
	free(c);
}

static void maybe_finish(struct relay_client *c)
{
	if (!c->closing)
		return;
	/* The tick timer bounds a lingering connection: it closes last. */
	if (c->conn == NULL && c->lingering == NULL &&
	    !uv_is_closing((uv_handle_t *)&c->tick))
		uv_close((uv_handle_t *)&c->tick, on_timer_closed);
	if (c->open_handles > 0)
		return;
	void (*done)(void *) = c->done;
	void *arg = c->done_arg;
	free_client(c);
	if (done != NULL)
		done(arg);
}

/* ---- writing --------------------------------------------------------------
 */

static void on_write(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct relay_conn *conn = w->conn;
	struct relay_client *c = conn->client;
	BATON_ASSERT(conn->write_queue_bytes >= w->len);
	conn->write_queue_bytes -= w->len;
	free(w);
	if (c->conn != conn)
		return;
	if (status < 0) {
		LOG_WARN("relay %s: write failed (%s): reconnecting",
			 c->relay_addr, uv_strerror(status));
		set_error(c, "write failed: %s", uv_strerror(status));
		lose_connection(c);
		return;
	}
	flush(c);
}

/* Encode f and queue it on conn. false: the connection is lost (write
 * refused) or memory ran out; the caller stops using conn. */
static bool conn_send_frame(struct relay_conn *conn,
			    const struct baton_relay_frame *f)
{
	BATON_ASSERT(conn->connected && !conn->closing);
	struct baton_relay_err err = {0};
	size_t len = 0;
	int rc = baton_relay_encode(f, BATON_RELAY_TO_RELAY, NULL, 0, &len,
				    &err);
	if (rc != BATON_ETOOBIG)
		LOG_ERROR("relay client: encoding %s: %s",
			  baton_relay_type_name((uint16_t)f->type), err.text);
	BATON_ASSERT(rc == BATON_ETOOBIG);
	BATON_ASSERT(len >= BATON_RELAY_HEADER_LEN && len <= FRAME_MAX);
	struct write_req *w = malloc(sizeof(*w) + len);
	if (w == NULL) {
		LOG_ERROR("relay client: out of memory for a %zu-byte frame",
			  len);
		return false;
	}
	rc = baton_relay_encode(f, BATON_RELAY_TO_RELAY, w->bytes, len, &len,
				&err);
	BATON_ASSERT(rc == 0);
	w->conn = conn;
	w->len = len;
	uv_buf_t ub = uv_buf_init((char *)w->bytes, (unsigned)len);
	conn->write_queue_bytes += len;
	rc = uv_write(&w->req, (uv_stream_t *)&conn->tcp, &ub, 1, on_write);
	if (rc != 0) {
		conn->write_queue_bytes -= len;
		free(w);
		return false;
	}
	conn->last_send_ms = now_ms(conn->client);
	return true;
}

/* ---- losing the connection, reconnecting --------------------------------- */

static void on_reconnect_timer(uv_timer_t *t)
{
	struct relay_client *c = t->data;
	BATON_ASSERT(c->conn == NULL && !c->closing);
	c->reconnects++;
	start_connect(c);
}

static void schedule_reconnect(struct relay_client *c)
{
	BATON_ASSERT(c->conn == NULL);
	if (c->closing)
		return;
	uint64_t delay = c->backoff_ms;
	c->backoff_ms = c->backoff_ms * 2 > c->cfg.reconnect_max_ms
				? c->cfg.reconnect_max_ms
				: c->backoff_ms * 2;
	/* Spread the nodes of a restarted relay apart a little. */
	delay += (c->cfg.incarnation ^ c->reconnects) % (delay / 4 + 1);
	uv_timer_start(&c->reconnect, on_reconnect_timer, delay, 0);
}

/* The session is over (lost, refused, failed): forget what it was, tell
 * the application it is inactive, and reconnect later. */
static void end_session(struct relay_client *c, struct relay_conn *conn,
			bool graceful)
{
	bool was_active = c->active;
	c->registered = false;
	c->active = false;
	conn_release(c, conn, graceful);
	schedule_reconnect(c);
	if (was_active && c->cb.on_active != NULL)
		c->cb.on_active(c->cb.arg, false);
}

static void lose_connection(struct relay_client *c)
{
	if (c->conn != NULL)
		end_session(c, c->conn, false);
}

/* A protocol error of the relay: send ERROR {code, frame type, text}, log
 * it, close and reconnect. */
static void conn_fail(struct relay_client *c, uint16_t code,
		      uint16_t frame_type, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void conn_fail(struct relay_client *c, uint16_t code,
		      uint16_t frame_type, const char *fmt, ...)
{
	BATON_ASSERT(code != 0);
	struct relay_conn *conn = c->conn;
	BATON_ASSERT(conn != NULL && conn->connected);
	char text[BATON_RELAY_TEXT_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	LOG_WARN_LIMITED(
		"relay %s: sending ERROR %s (%u) about frame %s, "
		"reconnecting: %s",
		c->relay_addr, baton_relay_code_name(code), code,
		frame_type ? baton_relay_type_name(frame_type) : "none", text);
	set_error(c, "sent ERROR %s: %s", baton_relay_code_name(code), text);
	struct baton_relay_frame f = {.type = BATON_RELAY_ERROR};
	f.u.error.code = code;
	f.u.error.frame_type = frame_type;
	f.u.error.text.ptr = text;
	f.u.error.text.len = (uint16_t)strlen(text);
	bool queued = conn_send_frame(conn, &f);
	end_session(c, conn, queued);
}

/* ---- outgoing streams -----------------------------------------------------
 */

static uint64_t head_seq(const struct out_stream *s)
{
	return s->count > 0 ? s->msgs[s->head].seq : s->last_seq + 1;
}

/* The seq through which every destination owed a message acknowledged it
 * (or was never owed it). */
static uint64_t stream_floor(const struct out_stream *s)
{
	if (s->kind == BATON_RELAY_UNICAST)
		return s->gone ? s->last_seq : s->acked;
	uint64_t floor = s->last_seq;
	for (size_t i = 0; i < s->ndests; i++) {
		const struct mc_dest *d = &s->dests[i];
		uint64_t through = d->acked > d->owed_from - 1
					   ? d->acked
					   : d->owed_from - 1;
		if (through < floor)
			floor = through;
	}
	return floor;
}

/* Free the messages through the stream's floor; counted as acknowledged,
 * or as dropped when their destination left. */
static void release_acked(struct relay_client *c, struct out_stream *s,
			  bool dropped)
{
	uint64_t floor = stream_floor(s);
	size_t freed = 0;
	while (s->count > 0 && s->msgs[s->head].seq <= floor) {
		struct out_msg *m = &s->msgs[s->head];
		BATON_ASSERT(c->queued_msgs > 0 && c->queued_bytes >= m->len);
		c->queued_msgs--;
		c->queued_bytes -= m->len;
		free(m->payload);
		s->head++;
		s->count--;
		freed++;
	}
	if (s->count == 0)
		s->head = 0;
	if (freed > 0)
		s->progress_ms = now_ms(c);
	if (dropped)
		c->dropped += freed;
	else
		c->acked += freed;
	if (s->sent_upto < head_seq(s) - 1)
		s->sent_upto = head_seq(s) - 1;
}

/* Send again from `from` + 1 (the stream's oldest message at the least). */
static void rewind_stream(struct relay_client *c, struct out_stream *s,
			  uint64_t from)
{
	uint64_t oldest = head_seq(s) - 1;
	if (from < oldest)
		from = oldest;
	if (from < s->sent_upto)
		s->sent_upto = from;
	s->resend_ms = now_ms(c);
	s->progress_ms = now_ms(c);
}

static struct out_stream *find_out(struct relay_client *c, uint8_t kind,
				   const char *cluster, size_t cluster_len,
				   baton_node_id node, uint64_t incarnation)
{
	for (size_t i = 0; i < c->nout; i++) {
		struct out_stream *s = c->out[i];
		if (s->kind == kind &&
		    str_eq(s->cluster, s->cluster_len, cluster, cluster_len) &&
		    (kind == BATON_RELAY_MULTICAST ||
		     (s->node_id == node && s->incarnation == incarnation)))
			return s;
	}
	return NULL;
}

static bool is_self(const struct relay_client *c, const char *cluster,
		    size_t cluster_len, baton_node_id node)
{
	return node == c->cfg.node_id &&
	       str_eq(cluster, cluster_len, c->cluster_id,
		      strlen(c->cluster_id));
}

/* The view node of (cluster, node id), or NULL. */
static const struct view_node *view_find(const struct relay_client *c,
					 const char *cluster,
					 size_t cluster_len, baton_node_id node,
					 uint16_t *index)
{
	for (uint16_t i = 0; i < c->view_count; i++)
		if (c->view[i].node_id == node &&
		    str_eq(c->view[i].cluster, c->view[i].cluster_len, cluster,
			   cluster_len)) {
			if (index != NULL)
				*index = i;
			return &c->view[i];
		}
	return NULL;
}

/* Whether the destination (node, incarnation) is still owed messages after
 * the view: it is in it, or it is missing only from a restarted relay's
 * view (it has not registered again yet). *v: its view node, if there. */
static bool still_owed(const struct relay_client *c, const char *cluster,
		       size_t cluster_len, baton_node_id node,
		       uint64_t incarnation, uint64_t seen_relay_incarnation,
		       const struct view_node **v, uint16_t *index)
{
	*v = view_find(c, cluster, cluster_len, node, index);
	if (*v != NULL)
		return (*v)->incarnation == incarnation;
	return seen_relay_incarnation != c->relay_incarnation;
}

/* A multicast stream's destinations follow the view: nodes of its cluster
 * that joined (or restarted) are owed what is sent from now on; those that
 * left are owed nothing more. Newly connected ones get a resend. */
static void update_multicast_dests(struct relay_client *c, struct out_stream *s,
				   const bool *was_connected)
{
	BATON_ASSERT(s->kind == BATON_RELAY_MULTICAST);
	BATON_ASSERT(s->ndests <= BATON_RELAY_NODES_MAX);
	size_t kept = 0;
	bool removed = false;
	for (size_t k = 0; k < s->ndests; k++) {
		struct mc_dest d = s->dests[k];
		const struct view_node *v;
		uint16_t i = 0;
		if (!still_owed(c, s->cluster, s->cluster_len, d.node_id,
				d.incarnation, d.seen_relay_incarnation, &v,
				&i)) {
			removed = true;
			continue;
		}
		if (v != NULL) {
			d.seen_relay_incarnation = c->relay_incarnation;
			if (v->connected && !was_connected[i])
				rewind_stream(c, s, d.acked);
		}
		s->dests[kept++] = d;
	}
	s->ndests = kept;
	for (uint16_t i = 0; i < c->view_count; i++) {
		const struct view_node *v = &c->view[i];
		if (!str_eq(v->cluster, v->cluster_len, s->cluster,
			    s->cluster_len) ||
		    is_self(c, v->cluster, v->cluster_len, v->node_id))
			continue;
		bool known = false;
		for (size_t k = 0; k < s->ndests && !known; k++)
			known = s->dests[k].node_id == v->node_id &&
				s->dests[k].incarnation == v->incarnation;
		if (known)
			continue;
		BATON_ASSERT(s->ndests < BATON_RELAY_NODES_MAX);
		s->dests[s->ndests++] = (struct mc_dest){
			.node_id = v->node_id,
			.incarnation = v->incarnation,
			.owed_from = s->last_seq + 1,
			.seen_relay_incarnation = c->relay_incarnation,
		};
	}
	release_acked(c, s, removed);
}

static struct out_stream *new_out(struct relay_client *c, uint8_t kind,
				  const char *cluster, baton_node_id node,
				  uint64_t incarnation)
{
	if (c->nout == c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap * 2 : 8;
		struct out_stream **o = realloc(c->out, cap * sizeof(*o));
		if (o == NULL)
			return NULL;
		c->out = o;
		c->out_cap = cap;
	}
	struct out_stream *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	if (kind == BATON_RELAY_MULTICAST) {
		s->dests = calloc(BATON_RELAY_NODES_MAX, sizeof(*s->dests));
		if (s->dests == NULL) {
			free(s);
			return NULL;
		}
	}
	s->kind = kind;
	s->cluster_len = (uint16_t)strlen(cluster);
	memcpy(s->cluster, cluster, s->cluster_len);
	s->node_id = node;
	s->incarnation = incarnation;
	s->seen_relay_incarnation = c->relay_incarnation;
	s->progress_ms = now_ms(c);
	c->out[c->nout++] = s;
	if (kind == BATON_RELAY_MULTICAST) {
		bool was_connected[BATON_RELAY_NODES_MAX];
		/* Everyone connected already: no resend is due. */
		for (uint16_t i = 0; i < c->view_count; i++)
			was_connected[i] = true;
		update_multicast_dests(c, s, was_connected);
	}
	return s;
}

static bool has_unsent(const struct out_stream *s)
{
	return s->count > 0 && s->sent_upto < s->last_seq;
}

static bool send_next(struct relay_client *c, struct out_stream *s)
{
	uint64_t first = head_seq(s);
	uint64_t seq = s->sent_upto + 1 > first ? s->sent_upto + 1 : first;
	BATON_ASSERT(seq >= first && seq <= s->last_seq);
	const struct out_msg *m = &s->msgs[s->head + (seq - first)];
	BATON_ASSERT(m->seq == seq);
	struct baton_relay_frame f = {.type = BATON_RELAY_DATA};
	struct baton_relay_data *d = &f.u.data;
	d->kind = s->kind;
	d->peer.cluster_id.ptr = s->cluster;
	d->peer.cluster_id.len = s->cluster_len;
	d->peer.node_id = s->node_id;
	d->peer.incarnation = s->incarnation;
	d->seq = seq;
	d->first_seq = first;
	d->payload = m->payload;
	d->payload_len = m->len;
	if (!conn_send_frame(c->conn, &f)) {
		set_error(c, "cannot queue DATA on the connection");
		lose_connection(c);
		return false;
	}
	if (s->sent_upto == s->max_sent)
		s->progress_ms = now_ms(c); /* nothing was outstanding */
	s->sent_upto = seq;
	if (seq > s->max_sent) {
		s->max_sent = seq;
		c->sent++;
	} else {
		c->resent++;
	}
	return true;
}

static bool can_send(const struct relay_client *c)
{
	return c->conn != NULL && c->registered && c->active && !c->closing;
}

/* Write what is unsent, one message per stream in turn, while the socket's
 * write queue is below the window. */
static void flush(struct relay_client *c)
{
	bool progress = true;
	while (progress && can_send(c) &&
	       c->conn->write_queue_bytes < WRITE_WINDOW_BYTES) {
		progress = false;
		size_t n = c->nout;
		for (size_t i = 0; i < n && can_send(c); i++) {
			struct out_stream *s = c->out[(c->flush_start + i) % n];
			if (!has_unsent(s))
				continue;
			if (!send_next(c, s))
				return;
			progress = true;
			if (c->conn->write_queue_bytes >= WRITE_WINDOW_BYTES) {
				c->flush_start = (c->flush_start + i + 1) % n;
				return;
			}
		}
	}
}

int relay_client_send(struct relay_client *c, const char *to_cluster,
		      baton_node_id to_node, const uint8_t *payload, size_t len)
{
	BATON_ASSERT(c != NULL && !c->closing);
	if (!valid_identifier(to_cluster, BATON_RELAY_ID_MAX) ||
	    len > BATON_RELAY_PAYLOAD_MAX || (payload == NULL && len > 0))
		return BATON_EINVAL;
	if (!can_send(c))
		return BATON_ESTATE;
	size_t cluster_len = strlen(to_cluster);
	uint64_t incarnation = 0;
	if (to_node != 0) {
		if (is_self(c, to_cluster, cluster_len, to_node))
			return BATON_EINVAL;
		const struct view_node *v =
			view_find(c, to_cluster, cluster_len, to_node, NULL);
		if (v != NULL) {
			incarnation = v->incarnation;
		} else {
			/* Not back yet in a restarted relay's view, but
			 * still owed: its stream goes on. */
			for (size_t i = 0; i < c->nout && !incarnation; i++) {
				const struct out_stream *o = c->out[i];
				if (o->kind == BATON_RELAY_UNICAST &&
				    !o->gone && o->node_id == to_node &&
				    str_eq(o->cluster, o->cluster_len,
					   to_cluster, cluster_len))
					incarnation = o->incarnation;
			}
			if (incarnation == 0)
				return BATON_EINVAL;
		}
	}
	if (c->queued_msgs + 1 > RELAY_CLIENT_QUEUE_MSGS_MAX ||
	    c->queued_bytes + len > RELAY_CLIENT_QUEUE_BYTES_MAX)
		return BATON_EBUSY;
	uint8_t kind = to_node ? BATON_RELAY_UNICAST : BATON_RELAY_MULTICAST;
	struct out_stream *s = find_out(c, kind, to_cluster, cluster_len,
					to_node, incarnation);
	if (s == NULL)
		s = new_out(c, kind, to_cluster, to_node, incarnation);
	if (s == NULL)
		return BATON_ENOMEM;
	if (s->head + s->count == s->cap) {
		if (s->head > 0) {
			memmove(s->msgs, s->msgs + s->head,
				s->count * sizeof(*s->msgs));
			s->head = 0;
		}
		if (s->count == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 64;
			struct out_msg *m = realloc(s->msgs, cap * sizeof(*m));
			if (m == NULL)
				return BATON_ENOMEM;
			s->msgs = m;
			s->cap = cap;
		}
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (copy == NULL)
		return BATON_ENOMEM;
	if (len > 0)
		memcpy(copy, payload, len);
	s->gone = false;
	s->msgs[s->head + s->count++] = (struct out_msg){
		.seq = ++s->last_seq, .len = (uint32_t)len, .payload = copy};
	c->queued_msgs++;
	c->queued_bytes += len;
	/* A multicast nobody is owed is not kept (the protocol's rule). */
	if (kind == BATON_RELAY_MULTICAST && s->ndests == 0) {
		flush(c);
		release_acked(c, s, false);
		return 0;
	}
	flush(c);
	return 0;
}

/* ---- incoming frames ------------------------------------------------------
 */

static void send_ack(struct relay_client *c, const struct in_stream *in)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_ACK};
	f.u.ack.kind = in->kind;
	f.u.ack.peer.cluster_id.ptr = in->cluster;
	f.u.ack.peer.cluster_id.len = in->cluster_len;
	f.u.ack.peer.node_id = in->node_id;
	f.u.ack.peer.incarnation = in->incarnation;
	f.u.ack.seq = in->last;
	if (!conn_send_frame(c->conn, &f)) {
		set_error(c, "cannot queue an ACK on the connection");
		lose_connection(c);
	}
}

static void send_due_acks(struct relay_client *c)
{
	for (size_t i = 0; i < c->nin && c->conn != NULL; i++) {
		if (!c->in[i].ack_due)
			continue;
		c->in[i].ack_due = false;
		send_ack(c, &c->in[i]);
	}
}

static bool in_view(const struct relay_client *c, const struct in_stream *in)
{
	for (uint16_t i = 0; i < c->view_count; i++)
		if (c->view[i].node_id == in->node_id &&
		    c->view[i].incarnation == in->incarnation &&
		    str_eq(c->view[i].cluster, c->view[i].cluster_len,
			   in->cluster, in->cluster_len))
			return true;
	return false;
}

static struct in_stream *find_in(struct relay_client *c,
				 const struct baton_relay_data *d)
{
	const struct baton_relay_peer *p = &d->peer;
	for (size_t i = 0; i < c->nin; i++) {
		struct in_stream *in = &c->in[i];
		if (in->kind == d->kind && in->node_id == p->node_id &&
		    in->incarnation == p->incarnation &&
		    str_eq(in->cluster, in->cluster_len, p->cluster_id.ptr,
			   p->cluster_id.len))
			return in;
	}
	if (c->nin == RELAY_CLIENT_IN_STREAMS_MAX) {
		/* Forget one whose source left the view. */
		size_t i = 0;
		while (i < c->nin && in_view(c, &c->in[i]))
			i++;
		if (i == c->nin)
			return NULL;
		c->in[i] = c->in[--c->nin];
	}
	if (c->nin == c->in_cap) {
		size_t cap = c->in_cap ? c->in_cap * 2 : 16;
		struct in_stream *n = realloc(c->in, cap * sizeof(*n));
		if (n == NULL)
			return NULL;
		c->in = n;
		c->in_cap = cap;
	}
	struct in_stream *in = &c->in[c->nin++];
	memset(in, 0, sizeof(*in));
	in->kind = d->kind;
	in->cluster_len = p->cluster_id.len;
	memcpy(in->cluster, p->cluster_id.ptr, p->cluster_id.len);
	in->node_id = p->node_id;
	in->incarnation = p->incarnation;
	in->last = d->first_seq - 1;
	return in;
}

static void on_data_frame(struct relay_client *c,
			  const struct baton_relay_data *d)
{
	BATON_ASSERT(d->seq >= d->first_seq && d->first_seq >= 1);
	if (!c->active) {
		/* Not delivered, not acknowledged: the source sends it again
		 * once both are active. */
		LOG_DEBUG("relay: DATA seq %llu while inactive: ignored",
			  (unsigned long long)d->seq);
		return;
	}
	struct in_stream *in = find_in(c, d);
	if (in == NULL) {
		LOG_WARN_LIMITED("relay: DATA from a new stream dropped: %u "
				 "streams are remembered, the most this "
				 "client keeps (RELAY_CLIENT_IN_STREAMS_MAX)",
				 RELAY_CLIENT_IN_STREAMS_MAX);
		return;
	}
	in->ack_due = true;
	if (d->seq <= in->last) {
		c->duplicates++;
		return;
	}
	if (d->seq > in->last + 1 && d->first_seq > in->last + 1) {
		/* The source no longer keeps what this node misses: it
		 * dropped them when this node left its view. Waiting would
		 * stall the stream forever. */
		LOG_WARN("relay: %.*s/%llu dropped seqs %llu..%llu of its %s "
			 "stream to this node (this node left its view): "
			 "resuming at %llu",
			 (int)in->cluster_len, in->cluster,
			 (unsigned long long)in->node_id,
			 (unsigned long long)in->last + 1,
			 (unsigned long long)d->first_seq - 1,
			 in->kind ? "multicast" : "unicast",
			 (unsigned long long)d->first_seq);
		in->last = d->first_seq - 1;
	}
	if (d->seq != in->last + 1) {
		c->gaps++;
		return;
	}
	in->last = d->seq;
	c->received++;
	if (c->cb.on_data != NULL)
		c->cb.on_data(c->cb.arg, in->cluster, in->node_id,
			      in->incarnation, d->kind == BATON_RELAY_MULTICAST,
			      d->payload, d->payload_len);
}

static void on_ack_frame(struct relay_client *c,
			 const struct baton_relay_ack *a)
{
	const struct baton_relay_peer *p = &a->peer;
	struct out_stream *s =
		find_out(c, a->kind, p->cluster_id.ptr, p->cluster_id.len,
			 p->node_id, p->incarnation);
	if (s == NULL)
		return;
	uint64_t seq = a->seq < s->last_seq ? a->seq : s->last_seq;
	uint64_t *acked = &s->acked, *last_ack = &s->last_ack;
	bool *has_ack = &s->has_ack;
	if (a->kind == BATON_RELAY_MULTICAST) {
		struct mc_dest *d = NULL;
		for (size_t k = 0; k < s->ndests && d == NULL; k++)
			if (s->dests[k].node_id == p->node_id &&
			    s->dests[k].incarnation == p->incarnation)
				d = &s->dests[k];
		if (d == NULL)
			return;
		acked = &d->acked;
		last_ack = &d->last_ack;
		has_ack = &d->has_ack;
	}
	bool repeated = *has_ack && *last_ack == seq;
	*has_ack = true;
	*last_ack = seq;
	if (seq > *acked) {
		*acked = seq;
		release_acked(c, s, false);
	} else if (repeated && s->sent_upto > seq &&
		   now_ms(c) - s->resend_ms >= RESEND_GUARD_MS) {
		/* The receiver saw a gap: send again from what it has. */
		rewind_stream(c, s, seq);
	}
	flush(c);
}

/* The resume rule: "the last I received" for every stream held (from
 * every source, or from one source incarnation). */
static void mark_resume_acks(struct relay_client *c, const struct view_node *v)
{
	for (size_t i = 0; i < c->nin; i++) {
		struct in_stream *in = &c->in[i];
		if (v == NULL || (in->node_id == v->node_id &&
				  in->incarnation == v->incarnation &&
				  str_eq(in->cluster, in->cluster_len,
					 v->cluster, v->cluster_len)))
			in->ack_due = true;
	}
}

static void on_welcome(struct relay_client *c,
		       const struct baton_relay_welcome *w)
{
	char reason[512];
	if (w->code != 0) {
		escape(w->reason.ptr, w->reason.len, reason, sizeof(reason));
		LOG_WARN("relay %s refused registration: %s (%u): %s: retrying "
			 "with back-off",
			 c->relay_addr, baton_relay_code_name(w->code), w->code,
			 reason);
		set_error(c, "registration refused: %s: %s",
			  baton_relay_code_name(w->code), reason);
		end_session(c, c->conn, true);
		return;
	}
	if (c->relay_incarnation != 0 &&
	    c->relay_incarnation != w->relay_incarnation)
		LOG_INFO("relay %s restarted (incarnation %llu, was %llu): "
			 "resending what is not acknowledged",
			 c->relay_addr,
			 (unsigned long long)w->relay_incarnation,
			 (unsigned long long)c->relay_incarnation);
	else
		LOG_INFO("relay %s: registered as %s/%llu (incarnation %llu)",
			 c->relay_addr, c->cluster_id,
			 (unsigned long long)c->cfg.node_id,
			 (unsigned long long)c->cfg.incarnation);
	c->registered = true;
	c->relay_incarnation = w->relay_incarnation;
	c->backoff_ms = c->cfg.reconnect_min_ms;
	for (size_t i = 0; i < c->nout; i++)
		rewind_stream(c, c->out[i], 0);
	mark_resume_acks(c, NULL);
}

static const struct view_node *find_view_node(const struct view_node *nodes,
					      uint16_t count,
					      const struct view_node *v)
{
	for (uint16_t i = 0; i < count; i++)
		if (nodes[i].node_id == v->node_id &&
		    str_eq(nodes[i].cluster, nodes[i].cluster_len, v->cluster,
			   v->cluster_len))
			return &nodes[i];
	return NULL;
}

/* What a new view changes for the streams: unicast destinations that left
 * (or restarted) are owed nothing more; destinations newly connected get
 * what they miss again; sources newly connected get our ACKs. */
static void apply_view(struct relay_client *c, const struct view_node *old,
		       uint16_t old_count)
{
	bool was_connected[BATON_RELAY_NODES_MAX];
	for (uint16_t i = 0; i < c->view_count; i++) {
		const struct view_node *v = &c->view[i];
		const struct view_node *o = find_view_node(old, old_count, v);
		was_connected[i] = o != NULL && o->connected &&
				   o->incarnation == v->incarnation;
		if (v->connected && !was_connected[i])
			mark_resume_acks(c, v);
	}
	for (size_t k = 0; k < c->nout; k++) {
		struct out_stream *s = c->out[k];
		if (s->kind == BATON_RELAY_MULTICAST) {
			update_multicast_dests(c, s, was_connected);
			continue;
		}
		const struct view_node *v;
		uint16_t i = 0;
		bool present = still_owed(c, s->cluster, s->cluster_len,
					  s->node_id, s->incarnation,
					  s->seen_relay_incarnation, &v, &i);
		if (present && v != NULL) {
			s->seen_relay_incarnation = c->relay_incarnation;
			if (v->connected && !was_connected[i])
				rewind_stream(c, s, s->acked);
		}
		if (!present && !s->gone && s->count > 0)
			LOG_WARN("relay: %.*s/%llu (incarnation %llu) left the "
				 "view: %zu message(s) to it, seqs %llu..%llu, "
				 "were never acknowledged and are dropped",
				 (int)s->cluster_len, s->cluster,
				 (unsigned long long)s->node_id,
				 (unsigned long long)s->incarnation, s->count,
				 (unsigned long long)head_seq(s),
				 (unsigned long long)s->last_seq);
		if (!present) {
			s->gone = true;
			release_acked(c, s, true);
		}
	}
}

static void on_view_frame(struct relay_client *c,
			  const struct baton_relay_view *view)
{
	if (view->number <= c->view_number) {
		if (c->view_relay_incarnation == c->relay_incarnation) {
			conn_fail(c, BATON_RELAY_EUNEXPECTED, BATON_RELAY_VIEW,
				  "VIEW %llu is not above view %llu, the last "
				  "installed from this relay incarnation "
				  "(%llu)",
				  (unsigned long long)view->number,
				  (unsigned long long)c->view_number,
				  (unsigned long long)c->relay_incarnation);
			return;
		}
		LOG_WARN("relay %s (incarnation %llu) sent view %llu, not "
			 "above view %llu of its previous incarnation: it lost "
			 "its data directory; installing it",
			 c->relay_addr,
			 (unsigned long long)c->relay_incarnation,
			 (unsigned long long)view->number,
			 (unsigned long long)c->view_number);
	}
	struct baton_relay_list rest = view->records;
	struct baton_relay_node n;
	uint16_t count = 0;
	while (baton_relay_view_next(&rest, &n)) {
		BATON_ASSERT(count < BATON_RELAY_NODES_MAX);
		struct view_node *v = &c->next_view[count++];
		memset(v, 0, sizeof(*v));
		v->cluster_len = n.cluster_id.len;
		memcpy(v->cluster, n.cluster_id.ptr, n.cluster_id.len);
		v->node_id = n.node_id;
		v->incarnation = n.incarnation;
		v->release = n.release;
		memcpy(v->address, n.address.ptr, n.address.len);
		v->connected = n.connected;
	}
	BATON_ASSERT(count == view->node_count);
	struct view_node *old = c->view;
	uint16_t old_count = c->view_count;
	c->view = c->next_view;
	c->next_view = old;
	c->view_count = count;
	c->view_number = view->number;
	c->view_relay_incarnation = c->relay_incarnation;
	LOG_INFO("relay: view %llu installed: %u node(s)",
		 (unsigned long long)view->number, count);
	apply_view(c, old, old_count);
	if (c->cb.on_view == NULL)
		return;
	for (uint16_t i = 0; i < count; i++)
		c->view_out[i] = (struct relay_view_node){
			.cluster_id = c->view[i].cluster,
			.node_id = c->view[i].node_id,
			.incarnation = c->view[i].incarnation,
			.release = c->view[i].release,
			.address = c->view[i].address,
			.connected = c->view[i].connected,
		};
	c->cb.on_view(c->cb.arg, c->view_number, c->view_out, count);
}

static void on_error_frame(struct relay_client *c,
			   const struct baton_relay_error *e)
{
	char text[512];
	escape(e->text.ptr, e->text.len, text, sizeof(text));
	LOG_WARN("relay %s sent ERROR %s (%u) about frame %s: %s: reconnecting",
		 c->relay_addr, baton_relay_code_name(e->code), e->code,
		 e->frame_type ? baton_relay_type_name(e->frame_type) : "none",
		 text);
	set_error(c, "relay sent ERROR %s: %s", baton_relay_code_name(e->code),
		  text);
	end_session(c, c->conn, false);
}

static void set_active(struct relay_client *c, bool active)
{
	if (c->active == active)
		return;
	c->active = active;
	LOG_INFO("relay %s: %s", c->relay_addr,
		 active ? "activated" : "deactivated");
	if (c->cb.on_active != NULL)
		c->cb.on_active(c->cb.arg, active);
	if (active && c->conn != NULL)
		flush(c);
}

static void handle_frame(struct relay_client *c,
			 const struct baton_relay_frame *f)
{
	uint16_t type = (uint16_t)f->type;
	if (type == BATON_RELAY_ERROR) {
		on_error_frame(c, &f->u.error);
	} else if (type == BATON_RELAY_PING) {
		struct baton_relay_frame pong = {.type = BATON_RELAY_PONG};
		pong.u.ping_token = f->u.ping_token;
		if (!conn_send_frame(c->conn, &pong))
			lose_connection(c);
	} else if (type == BATON_RELAY_PONG ||
		   type == BATON_RELAY_STATUS_REPLY) {
		/* PONG: receiving it is the point; STATUS is never sent. */
	} else if (!c->registered) {
		if (type == BATON_RELAY_WELCOME)
			on_welcome(c, &f->u.welcome);
		else
			conn_fail(c, BATON_RELAY_EUNEXPECTED, type,
				  "%s before WELCOME",
				  baton_relay_type_name(type));
	} else if (type == BATON_RELAY_VIEW) {
		on_view_frame(c, &f->u.view);
	} else if (type == BATON_RELAY_DATA) {
		on_data_frame(c, &f->u.data);
	} else if (type == BATON_RELAY_ACK) {
		on_ack_frame(c, &f->u.ack);
	} else if (type == BATON_RELAY_ACTIVATE ||
		   type == BATON_RELAY_DEACTIVATE) {
		set_active(c, type == BATON_RELAY_ACTIVATE);
	} else {
		conn_fail(c, BATON_RELAY_EUNEXPECTED, type,
			  "%s after WELCOME: a second registration answer",
			  baton_relay_type_name(type));
	}
}

/* ---- reading --------------------------------------------------------------
 */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
	(void)suggested;
	struct relay_conn *conn = h->data;
	if (conn->rcap - conn->rlen < 4096 && conn->rcap < FRAME_MAX) {
		size_t cap =
			conn->rcap * 2 < FRAME_MAX ? conn->rcap * 2 : FRAME_MAX;
		uint8_t *nb = realloc(conn->rbuf, cap);
		if (nb != NULL) {
			conn->rbuf = nb;
			conn->rcap = cap;
		}
	}
	*out = uv_buf_init((char *)conn->rbuf + conn->rlen,
			   (unsigned)(conn->rcap - conn->rlen));
}

/* The frame type to name in an ERROR about a malformed header. */
static uint16_t header_type(const uint8_t *buf, size_t len, uint16_t code)
{
	if (code == BATON_RELAY_EBAD_MAGIC || len < 6)
		return 0;
	uint16_t type = (uint16_t)(buf[4] | (buf[5] << 8));
	return baton_relay_type_name(type) != NULL ? type : 0;
}

/* Split, decode and handle every whole frame in conn's buffer. */
static void process(struct relay_client *c, struct relay_conn *conn)
{
	size_t off = 0;
	while (c->conn == conn) {
		const uint8_t *buf = conn->rbuf + off;
		size_t len = conn->rlen - off;
		size_t frame_len = 0, need = 0;
		struct baton_relay_err err = {0};
		int rc = baton_relay_split(buf, len, BATON_RELAY_TO_NODE,
					   &frame_len, &need, &err);
		if (rc == BATON_EAGAIN)
			break;
		if (rc != 0) {
			conn_fail(c, err.code, header_type(buf, len, err.code),
				  "%s", err.text);
			return;
		}
		struct baton_relay_frame f;
		rc = baton_relay_decode(buf, frame_len, BATON_RELAY_TO_NODE, &f,
					&err);
		uint16_t type = (uint16_t)(buf[4] | (buf[5] << 8));
		if (rc != 0 && type == BATON_RELAY_ERROR) {
			LOG_WARN_LIMITED("relay %s: malformed ERROR (%s): "
					 "reconnecting",
					 c->relay_addr, err.text);
			set_error(c, "malformed ERROR from the relay: %s",
				  err.text);
			end_session(c, conn, false);
			return;
		}
		if (rc != 0) {
			conn_fail(c, err.code, type, "%s", err.text);
			return;
		}
		handle_frame(c, &f);
		off += frame_len;
	}
	if (c->conn != conn)
		return;
	memmove(conn->rbuf, conn->rbuf + off, conn->rlen - off);
	conn->rlen -= off;
	send_due_acks(c);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
	(void)buf;
	struct relay_conn *conn = stream->data;
	struct relay_client *c = conn->client;
	if (conn->closing || c->conn != conn)
		return;
	if (n == 0)
		return;
	if (n < 0) {
		const char *why =
			n == UV_EOF ? "end of stream" : uv_strerror((int)n);
		if (conn->rlen > 0)
			LOG_WARN("relay %s: truncated frame (%zu bytes) then "
				 "%s: reconnecting",
				 c->relay_addr, conn->rlen, why);
		else
			LOG_INFO("relay %s: connection closed (%s): "
				 "reconnecting",
				 c->relay_addr, why);
		set_error(c, "connection lost: %s", why);
		lose_connection(c);
		return;
	}
	conn->rlen += (size_t)n;
	conn->last_recv_ms = now_ms(c);
	process(c, conn);
}

/* ---- connecting -----------------------------------------------------------
 */

static void send_hello(struct relay_client *c)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_HELLO};
	struct baton_relay_hello *h = &f.u.hello;
	h->cluster_id.ptr = c->cluster_id;
	h->cluster_id.len = (uint16_t)strlen(c->cluster_id);
	h->node_id = c->cfg.node_id;
	h->incarnation = c->cfg.incarnation;
	h->release = c->cfg.release;
	h->address.ptr = c->address;
	h->address.len = (uint16_t)strlen(c->address);
	if (!conn_send_frame(c->conn, &f)) {
		set_error(c, "cannot send HELLO");
		lose_connection(c);
	}
}

static void on_connect(uv_connect_t *req, int status)
{
	struct relay_conn *conn = req->data;
	struct relay_client *c = conn->client;
	if (conn->closing || c->conn != conn)
		return;
	if (status < 0) {
		LOG_WARN_LIMITED("relay %s: cannot connect (%s): retrying "
				 "with back-off",
				 c->relay_addr, uv_strerror(status));
		set_error(c, "cannot connect: %s", uv_strerror(status));
		lose_connection(c);
		return;
	}
	conn->connected = true;
	conn->last_recv_ms = conn->last_send_ms = now_ms(c);
	uv_tcp_nodelay(&conn->tcp, 1);
	int rc = uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
	if (rc != 0) {
		set_error(c, "cannot read: %s", uv_strerror(rc));
		lose_connection(c);
		return;
	}
	send_hello(c);
}

static void start_connect(struct relay_client *c)
{
	BATON_ASSERT(c->conn == NULL && !c->closing);
	struct relay_conn *conn = calloc(1, sizeof(*conn));
	uint8_t *rbuf = malloc(READ_BUF_INITIAL);
	if (conn == NULL || rbuf == NULL) {
		free(conn);
		free(rbuf);
		set_error(c, "out of memory for a connection");
		schedule_reconnect(c);
		return;
	}
	conn->client = c;
	conn->rbuf = rbuf;
	conn->rcap = READ_BUF_INITIAL;
	conn->started_ms = now_ms(c);
	uv_tcp_init(c->loop, &conn->tcp);
	c->open_handles++;
	conn->tcp.data = conn;
	conn->connect_req.data = conn;
	c->conn = conn;
	int rc = uv_tcp_connect(&conn->connect_req, &conn->tcp,
				(const struct sockaddr *)&c->relay_sa,
				on_connect);
	if (rc != 0) {
		set_error(c, "cannot connect: %s", uv_strerror(rc));
		lose_connection(c);
	}
}

/* ---- the timer ------------------------------------------------------------
 */

static void check_connection(struct relay_client *c, uint64_t now)
{
	struct relay_conn *conn = c->conn;
	if (!conn->connected) {
		if (now - conn->started_ms >= RELAY_CLIENT_CONNECT_TIMEOUT_MS) {
			set_error(c, "connect timed out after %u ms",
				  RELAY_CLIENT_CONNECT_TIMEOUT_MS);
			LOG_WARN("relay %s: %s: retrying", c->relay_addr,
				 c->last_error);
			lose_connection(c);
		}
		return;
	}
	if (now - conn->last_recv_ms >= c->cfg.idle_timeout_ms) {
		conn_fail(c, BATON_RELAY_ETIMEOUT, 0,
			  "nothing received for %llu ms (the idle limit)",
			  (unsigned long long)(now - conn->last_recv_ms));
		return;
	}
	if (now - conn->last_send_ms >= c->cfg.ping_interval_ms) {
		struct baton_relay_frame f = {.type = BATON_RELAY_PING};
		f.u.ping_token = ++conn->ping_token;
		if (!conn_send_frame(conn, &f))
			lose_connection(c);
	}
}

static bool view_connected(const struct relay_client *c,
			   const struct out_stream *s, baton_node_id node,
			   uint64_t incarnation)
{
	const struct view_node *v =
		view_find(c, s->cluster, s->cluster_len, node, NULL);
	return v != NULL && v->connected && v->incarnation == incarnation;
}

/* stream_floor() over the destinations connected now: a stall towards a
 * disconnected one is recovered by its reconnect, not by resending. */
static uint64_t connected_floor(const struct relay_client *c,
				const struct out_stream *s)
{
	if (s->kind == BATON_RELAY_UNICAST)
		return view_connected(c, s, s->node_id, s->incarnation)
			       ? stream_floor(s)
			       : s->last_seq;
	uint64_t floor = s->last_seq;
	for (size_t i = 0; i < s->ndests; i++) {
		const struct mc_dest *d = &s->dests[i];
		uint64_t through = d->acked > d->owed_from - 1
					   ? d->acked
					   : d->owed_from - 1;
		if (through < floor &&
		    view_connected(c, s, d->node_id, d->incarnation))
			floor = through;
	}
	return floor;
}

static void on_tick(uv_timer_t *t)
{
	struct relay_client *c = t->data;
	uint64_t now = now_ms(c);
	if (c->lingering != NULL &&
	    now - c->lingering->closing_since_ms >= CLOSE_LINGER_MS)
		close_now(c->lingering);
	if (c->conn != NULL)
		check_connection(c, now);
	if (!can_send(c))
		return;
	for (size_t i = 0; i < c->nout; i++) {
		struct out_stream *s = c->out[i];
		uint64_t floor = connected_floor(c, s);
		if (s->sent_upto > floor &&
		    now - s->progress_ms >= RESEND_STALL_MS)
			rewind_stream(c, s, floor);
	}
	flush(c);
}

/* ---- start, status, close -------------------------------------------------
 */

static int parse_relay_addr(const char *addr, struct sockaddr_storage *sa)
{
	const char *colon = strrchr(addr, ':');
	if (colon == NULL || colon[1] == '\0')
		return BATON_EINVAL;
	char *end = NULL;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || port == 0 || port > 65535)
		return BATON_EINVAL;
	char host[BATON_RELAY_ADDR_MAX + 1];
	size_t host_len = (size_t)(colon - addr);
	if (host_len >= 2 && addr[0] == '[' && colon[-1] == ']') {
		memcpy(host, addr + 1, host_len - 2);
		host[host_len - 2] = '\0';
		return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)sa)
			       ? BATON_EINVAL
			       : 0;
	}
	memcpy(host, addr, host_len);
	host[host_len] = '\0';
	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");
	return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)sa)
		       ? BATON_EINVAL
		       : 0;
}

static int check_config(const struct relay_client_config *cfg,
			struct sockaddr_storage *sa)
{
	const char *bad = NULL;
	if (!valid_identifier(cfg->relay_addr, BATON_RELAY_ADDR_MAX) ||
	    parse_relay_addr(cfg->relay_addr, sa) != 0)
		bad = "relay_addr: expected a numeric IPv4 HOST:PORT, "
		      "[IPv6]:PORT or localhost:PORT";
	else if (!valid_identifier(cfg->cluster_id, BATON_RELAY_ID_MAX))
		bad = "cluster_id: expected 1 to 255 bytes, no control byte";
	else if (!valid_identifier(cfg->address, BATON_RELAY_ADDR_MAX))
		bad = "address: expected 1 to 255 bytes, no control byte";
	else if (cfg->node_id == 0)
		bad = "node_id: must not be 0";
	else if (cfg->incarnation == 0)
		bad = "incarnation: must not be 0";
	else if (baton_release_none(cfg->release))
		bad = "release: must not be 0.0.0";
	if (bad == NULL)
		return 0;
	LOG_ERROR("relay client: %s (given '%s')", bad,
		  cfg->relay_addr ? cfg->relay_addr : "(null)");
	return BATON_EINVAL;
}

int relay_client_start(uv_loop_t *loop, const struct relay_client_config *cfg,
		       const struct relay_client_callbacks *cb,
		       struct relay_client **out)
{
	BATON_ASSERT(loop != NULL && cfg != NULL && out != NULL);
	struct sockaddr_storage sa;
	memset(&sa, 0, sizeof(sa));
	int rc = check_config(cfg, &sa);
	if (rc != 0)
		return rc;
	struct relay_client *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return BATON_ENOMEM;
	c->view = calloc(BATON_RELAY_NODES_MAX, sizeof(*c->view));
	c->next_view = calloc(BATON_RELAY_NODES_MAX, sizeof(*c->next_view));
	c->view_out = calloc(BATON_RELAY_NODES_MAX, sizeof(*c->view_out));
	if (c->view == NULL || c->next_view == NULL || c->view_out == NULL) {
		free_client(c);
		return BATON_ENOMEM;
	}
	c->loop = loop;
	c->relay_sa = sa;
	c->cfg = *cfg;
	strcpy(c->relay_addr, cfg->relay_addr);
	strcpy(c->cluster_id, cfg->cluster_id);
	strcpy(c->address, cfg->address);
	c->cfg.relay_addr = c->relay_addr;
	c->cfg.cluster_id = c->cluster_id;
	c->cfg.address = c->address;
	if (c->cfg.reconnect_min_ms == 0)
		c->cfg.reconnect_min_ms = RELAY_CLIENT_RECONNECT_MIN_MS;
	if (c->cfg.reconnect_max_ms == 0)
		c->cfg.reconnect_max_ms = RELAY_CLIENT_RECONNECT_MAX_MS;
	if (c->cfg.reconnect_max_ms < c->cfg.reconnect_min_ms)
		c->cfg.reconnect_max_ms = c->cfg.reconnect_min_ms;
	if (c->cfg.ping_interval_ms == 0)
		c->cfg.ping_interval_ms = RELAY_CLIENT_PING_INTERVAL_MS;
	if (c->cfg.idle_timeout_ms == 0)
		c->cfg.idle_timeout_ms = RELAY_CLIENT_IDLE_TIMEOUT_MS;
	if (cb != NULL)
		c->cb = *cb;
	c->backoff_ms = c->cfg.reconnect_min_ms;
	uv_timer_init(loop, &c->tick);
	uv_timer_init(loop, &c->reconnect);
	c->tick.data = c->reconnect.data = c;
	c->open_handles = 2;
	uint64_t tick = c->cfg.ping_interval_ms / 4;
	tick = tick < 10 ? 10 : tick > TICK_MAX_MS ? TICK_MAX_MS : tick;
	uv_timer_start(&c->tick, on_tick, tick, tick);
	start_connect(c);
	*out = c;
	return 0;
}

void relay_client_status(const struct relay_client *c,
			 struct relay_client_status *out)
{
	BATON_ASSERT(c != NULL && out != NULL);
	memset(out, 0, sizeof(*out));
	out->connected = c->conn != NULL && c->conn->connected;
	out->registered = c->registered;
	out->active = c->active;
	out->view = c->view_number;
	out->relay_incarnation = c->relay_incarnation;
	out->sent = c->sent;
	out->received = c->received;
	out->resent = c->resent;
	out->acked = c->acked;
	out->dropped = c->dropped;
	out->duplicates = c->duplicates;
	out->gaps = c->gaps;
	out->queued_msgs = c->queued_msgs;
	out->queued_bytes = c->queued_bytes;
	out->reconnects = c->reconnects;
	snprintf(out->last_error, sizeof(out->last_error), "%s", c->last_error);
}

void relay_client_close(struct relay_client *c, void (*done)(void *arg),
			void *arg)
{
	BATON_ASSERT(c != NULL && !c->closing);
	c->closing = true;
	c->done = done;
	c->done_arg = arg;
	c->cb = (struct relay_client_callbacks){0};
	struct relay_conn *conn = c->conn;
	bool graceful = false;
	if (conn != NULL && c->registered) {
		struct baton_relay_frame f = {.type = BATON_RELAY_LEAVE};
		f.u.leave.reason.ptr = "closing";
		f.u.leave.reason.len = 7;
		graceful = conn_send_frame(conn, &f);
		LOG_INFO("relay %s: leaving", c->relay_addr);
	}
	c->registered = false;
	c->active = false;
	if (conn != NULL)
		conn_release(c, conn, graceful);
	uv_timer_stop(&c->reconnect);
	uv_close((uv_handle_t *)&c->reconnect, on_timer_closed);
	maybe_finish(c);
}
