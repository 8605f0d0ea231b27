/*
 * The node-side relay client (relay_client.h): one TCP connection to baton-relay,
 * made again with back-off whenever it ends, and the streams above it.
 *
 * Sending: each stream (unicast to one node incarnation, or multicast to
 * one cluster) numbers its messages from 1 and keeps each until every
 * destination it is owed to acknowledged it: for unicast the destination,
 * for multicast the other nodes of that cluster in the current view. Kept
 * messages are sent again after a WELCOME (the connection, or the relay,
 * is new) and when a stream's acknowledgements stall, from the oldest
 * still kept; the receivers drop duplicates.
 *
 * Receiving: per source stream the last seq delivered in order; a message
 * right after it is delivered, anything else dropped, and the stream
 * acknowledged after every batch of reads, after every WELCOME and after
 * every VIEW, so a source learns where to resume.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/buf.h"
#include "baton/errors.h"
#include "relay_client.h"
#include "log.h"
#include "transport.h" /* baton_parse_addr */

#define HOUSEKEEPING_MS 250u
#define ID_MAX BATON_RELAY_ID_MAX

enum conn_state {
	DISCONNECTED, /* waiting for the back-off timer */
	CONNECTING,
	CONNECTED, /* HELLO sent, WELCOME not yet */
	REGISTERED,
	CLOSING, /* the TCP handle is closing */
};

struct out_msg {
	struct out_msg *next;
	uint64_t seq;
	uint32_t len;
	uint8_t payload[];
};

/* A destination's acknowledgement of a stream. */
struct dest_ack {
	baton_node_id id;
	uint64_t incarnation;
	uint64_t acked;
};

struct out_stream {
	struct out_stream *next;
	uint8_t kind;
	char cluster[ID_MAX + 1];
	baton_node_id node; /* unicast: the destination */
	uint64_t incarnation;
	uint64_t next_seq;
	struct out_msg *head, *tail;
	uint32_t n_acks;
	struct dest_ack acks[BATON_RELAY_NODES_MAX];
	uint64_t progress_ms; /* the last send or acknowledgement advance */
};

struct in_stream {
	struct in_stream *next;
	uint8_t kind;
	char cluster[ID_MAX + 1];
	baton_node_id node;
	uint64_t incarnation;
	uint64_t last;
};

struct relay_client {
	uv_loop_t *loop;
	struct relay_client_callbacks cb;
	char relay_addr[64];
	char cluster[ID_MAX + 1];
	char address[BATON_RELAY_ADDR_MAX + 1];
	baton_node_id node_id;
	uint64_t incarnation;
	struct baton_release release;
	uint32_t backoff_min, backoff_max, backoff;

	enum conn_state state;
	uv_tcp_t tcp;
	uv_connect_t connect_req;
	uv_timer_t timer; /* back-off, then housekeeping */
	struct baton_buf in;
	uint64_t last_recv_ms, last_send_ms;
	bool active;
	uint64_t relay_incarnation;
	uint64_t view_number;
	/* The current view, copied. */
	uint32_t n_view;
	struct view_node {
		char cluster[ID_MAX + 1];
		baton_node_id id;
		uint64_t incarnation;
		bool connected;
	} view[BATON_RELAY_NODES_MAX];

	struct out_stream *outs;
	struct in_stream *ins;
	size_t queued_bytes;
	uint32_t queued_msgs;

	bool closing;
	uint32_t handles_open;
	void (*done)(void *arg);
	void *done_arg;

	struct relay_client_status st;
};

static void reconnect_later(struct relay_client *c, const char *why);

/* ---- sending frames ---------------------------------------------------- */

struct write_req {
	uv_write_t req;
	uint8_t bytes[];
};

static void on_written(uv_write_t *req, int status)
{
	(void)status; /* a failed write shows as a read error too */
	free(req);
}

static int send_frame(struct relay_client *c, const struct baton_relay_frame *f)
{
	if (c->state != CONNECTED && c->state != REGISTERED)
		return BATON_ESTATE;
	size_t len = 0;
	struct baton_relay_err err;
	int rv = baton_relay_encode(f, BATON_RELAY_TO_RELAY, NULL, 0, &len,
				    &err);
	if (rv != BATON_ETOOBIG && rv != 0) {
		LOG_WARN("relay: cannot encode a %s frame: %s",
			 baton_relay_type_name((uint16_t)f->type), err.text);
		return rv;
	}
	struct write_req *w = malloc(sizeof *w + len);
	if (w == NULL)
		return BATON_ENOMEM;
	rv = baton_relay_encode(f, BATON_RELAY_TO_RELAY, w->bytes, len, &len,
				&err);
	BATON_ASSERT(rv == 0);
	uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)len);
	if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) !=
	    0) {
		free(w);
		return BATON_EIO;
	}
	c->last_send_ms = uv_now(c->loop);
	return 0;
}

static struct baton_relay_str str_of(const char *s)
{
	return (struct baton_relay_str){s, (uint16_t)strlen(s)};
}

static void send_data(struct relay_client *c, struct out_stream *o,
		      const struct out_msg *m)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_DATA};
	f.u.data.kind = o->kind;
	f.u.data.peer.cluster_id = str_of(o->cluster);
	f.u.data.peer.node_id = o->node;
	f.u.data.peer.incarnation = o->incarnation;
	f.u.data.seq = m->seq;
	f.u.data.first_seq = o->head != NULL ? o->head->seq : m->seq;
	f.u.data.payload = m->payload;
	f.u.data.payload_len = m->len;
	if (send_frame(c, &f) == 0)
		c->st.sent++;
}

static void send_ack(struct relay_client *c, const struct in_stream *in)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_ACK};
	f.u.ack.kind = in->kind;
	f.u.ack.peer.cluster_id = str_of(in->cluster);
	f.u.ack.peer.node_id = in->node;
	f.u.ack.peer.incarnation = in->incarnation;
	f.u.ack.seq = in->last;
	send_frame(c, &f);
}

static void send_all_acks(struct relay_client *c)
{
	for (struct in_stream *in = c->ins; in != NULL; in = in->next)
		send_ack(c, in);
}

static void send_error(struct relay_client *c, uint16_t code, uint16_t type,
		       const char *text)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_ERROR};
	f.u.error.code = code;
	f.u.error.frame_type = type;
	f.u.error.text = str_of(text);
	send_frame(c, &f);
}

/* ---- the streams we send ------------------------------------------------ */

/* The lowest acknowledgement over the destinations owed: for multicast
 * the other nodes of the cluster in the view. *owed is their number. */
static uint64_t min_acked(const struct relay_client *c,
			  const struct out_stream *o, uint32_t *owed)
{
	uint64_t low = UINT64_MAX;
	*owed = 0;
	for (uint32_t i = 0; i < c->n_view; i++) {
		const struct view_node *v = &c->view[i];
		if (strcmp(v->cluster, o->cluster) != 0 ||
		    (v->id == c->node_id &&
		     strcmp(v->cluster, c->cluster) == 0))
			continue;
		if (o->kind == BATON_RELAY_UNICAST &&
		    (v->id != o->node || v->incarnation != o->incarnation))
			continue;
		uint64_t a = 0;
		for (uint32_t k = 0; k < o->n_acks; k++)
			if (o->acks[k].id == v->id &&
			    o->acks[k].incarnation == v->incarnation)
				a = o->acks[k].acked;
		(*owed)++;
		if (a < low)
			low = a;
	}
	return low;
}

static void trim(struct relay_client *c, struct out_stream *o)
{
	uint32_t owed;
	uint64_t through = min_acked(c, o, &owed);
	if (owed == 0) {
		/* Nobody of the cluster is in this view. After a relay
		 * restart the first views are partial (nodes register again
		 * one by one), so this says nothing of whether they left:
		 * keep what they may still need, a unicast stream's all, a
		 * multicast stream's newest RELAY_CLIENT_ORPHANS_MAX. */
		if (o->kind == BATON_RELAY_UNICAST || o->tail == NULL ||
		    o->tail->seq <= RELAY_CLIENT_ORPHANS_MAX)
			return;
		through = o->tail->seq - RELAY_CLIENT_ORPHANS_MAX;
	}
	while (o->head != NULL && o->head->seq <= through) {
		struct out_msg *m = o->head;
		o->head = m->next;
		c->queued_bytes -= m->len;
		c->queued_msgs--;
		c->st.acked++;
		free(m);
	}
	if (o->head == NULL)
		o->tail = NULL;
}

static void resend(struct relay_client *c, struct out_stream *o)
{
	uint32_t owed;
	uint64_t from = min_acked(c, o, &owed);
	for (struct out_msg *m = o->head; m != NULL; m = m->next) {
		if (m->seq <= from)
			continue;
		send_data(c, o, m);
		c->st.resent++;
	}
	o->progress_ms = uv_now(c->loop);
}

static void free_stream(struct relay_client *c, struct out_stream *o)
{
	while (o->head != NULL) {
		struct out_msg *m = o->head;
		o->head = m->next;
		c->queued_bytes -= m->len;
		c->queued_msgs--;
		free(m);
	}
	free(o);
}

/* Does the view show node `id` of `cluster` under another incarnation
 * than `incarnation` (it restarted)? */
static bool restarted(const struct relay_client *c, const char *cluster,
		      baton_node_id id, uint64_t incarnation)
{
	for (uint32_t i = 0; i < c->n_view; i++)
		if (c->view[i].id == id &&
		    c->view[i].incarnation != incarnation &&
		    strcmp(c->view[i].cluster, cluster) == 0)
			return true;
	return false;
}

/* After a view: a unicast stream to an incarnation that restarted is owed
 * nothing more (the destination is a new process, which meets a new
 * stream); the others may be trimmed (destinations left). A destination
 * merely absent from the view is not given up: it may not have
 * registered again yet with a restarted relay. */
static void streams_after_view(struct relay_client *c)
{
	struct out_stream **p = &c->outs;
	while (*p != NULL) {
		struct out_stream *o = *p;
		if (o->kind == BATON_RELAY_UNICAST &&
		    restarted(c, o->cluster, o->node, o->incarnation)) {
			if (o->head != NULL)
				LOG_INFO("relay: node %" PRIu64 " of cluster %s "
					 "restarted with messages not "
					 "acknowledged: dropped",
					 o->node, o->cluster);
			*p = o->next;
			free_stream(c, o);
			continue;
		}
		trim(c, o);
		p = &o->next;
	}
}

static struct out_stream *find_out(struct relay_client *c, uint8_t kind,
				   const char *cluster, baton_node_id node,
				   uint64_t incarnation)
{
	for (struct out_stream *o = c->outs; o != NULL; o = o->next)
		if (o->kind == kind && strcmp(o->cluster, cluster) == 0 &&
		    o->node == node && o->incarnation == incarnation)
			return o;
	return NULL;
}

int relay_client_send(struct relay_client *c, const char *to_cluster,
		      baton_node_id to_node, const uint8_t *payload,
		      size_t len)
{
	if (!c->active || c->closing)
		return BATON_ESTATE;
	size_t cl = strlen(to_cluster);
	if (len > BATON_RELAY_PAYLOAD_MAX || cl == 0 || cl > ID_MAX)
		return BATON_EINVAL;
	uint8_t kind = to_node != 0 ? BATON_RELAY_UNICAST
				    : BATON_RELAY_MULTICAST;
	uint64_t incarnation = 0;
	if (to_node != 0) {
		bool found = false;
		for (uint32_t i = 0; i < c->n_view && !found; i++) {
			const struct view_node *v = &c->view[i];
			if (v->id == to_node &&
			    strcmp(v->cluster, to_cluster) == 0) {
				incarnation = v->incarnation;
				found = true;
			}
		}
		/* Absent from a restarted relay's first, partial views: the
		 * stream it had goes on. */
		for (struct out_stream *o = c->outs; o != NULL && !found;
		     o = o->next) {
			if (o->kind == BATON_RELAY_UNICAST &&
			    o->node == to_node &&
			    strcmp(o->cluster, to_cluster) == 0) {
				incarnation = o->incarnation;
				found = true;
			}
		}
		if (!found)
			return BATON_EINVAL;
	}
	if (c->queued_bytes + len > RELAY_CLIENT_QUEUE_BYTES_MAX ||
	    c->queued_msgs >= RELAY_CLIENT_QUEUE_MSGS_MAX)
		return BATON_EBUSY;
	struct out_stream *o = find_out(c, kind, to_cluster, to_node,
					incarnation);
	if (o == NULL) {
		o = calloc(1, sizeof *o);
		if (o == NULL)
			return BATON_ENOMEM;
		o->kind = kind;
		memcpy(o->cluster, to_cluster, cl + 1);
		o->node = to_node;
		o->incarnation = incarnation;
		o->next_seq = 1;
		o->progress_ms = uv_now(c->loop);
		o->next = c->outs;
		c->outs = o;
	}
	struct out_msg *m = malloc(sizeof *m + len);
	if (m == NULL)
		return BATON_ENOMEM;
	m->next = NULL;
	m->seq = o->next_seq++;
	m->len = (uint32_t)len;
	if (len > 0)
		memcpy(m->payload, payload, len);
	if (o->tail != NULL)
		o->tail->next = m;
	else
		o->head = m;
	o->tail = m;
	c->queued_bytes += len;
	c->queued_msgs++;
	if (o->head == m)
		o->progress_ms = uv_now(c->loop);
	if (c->state == REGISTERED)
		send_data(c, o, m);
	return 0;
}

/* ---- frames from the relay ---------------------------------------------- */

static void copy_str(char *out, size_t cap, struct baton_relay_str s)
{
	size_t n = s.len < cap - 1 ? s.len : cap - 1;
	memcpy(out, s.ptr, n);
	out[n] = '\0';
}

/* INFO's last error: what, then the detail cut to fit. */
static void set_error(struct relay_client *c, const char *what, const char *a)
{
	size_t cap = sizeof c->st.last_error;
	int n = snprintf(c->st.last_error, cap, "%s", what);
	if (n >= 0 && (size_t)n < cap)
		snprintf(c->st.last_error + n, cap - (size_t)n, "%.*s",
			 (int)(cap - (size_t)n - 1), a);
}

static void on_welcome(struct relay_client *c,
		       const struct baton_relay_welcome *w)
{
	if (w->code != 0) {
		char reason[BATON_RELAY_TEXT_MAX + 1];
		copy_str(reason, sizeof reason, w->reason);
		LOG_WARN("relay %s refused the registration: %s (%s)",
			 c->relay_addr, baton_relay_code_name(w->code), reason);
		set_error(c, "registration refused: ", reason);
		reconnect_later(c, NULL);
		return;
	}
	if (c->relay_incarnation != 0 &&
	    c->relay_incarnation != w->relay_incarnation)
		LOG_INFO("relay %s restarted: resuming every stream",
			 c->relay_addr);
	c->relay_incarnation = w->relay_incarnation;
	c->state = REGISTERED;
	c->backoff = c->backoff_min;
	LOG_INFO("relay %s: registered as node %" PRIu64 " of cluster %s",
		 c->relay_addr, c->node_id, c->cluster);
	send_all_acks(c);
	for (struct out_stream *o = c->outs; o != NULL; o = o->next)
		resend(c, o);
}

static int on_view(struct relay_client *c, const struct baton_relay_view *v)
{
	if (v->number <= c->view_number) {
		LOG_WARN("relay %s sent view %" PRIu64 " after view %" PRIu64
			 ": a broken relay",
			 c->relay_addr, v->number, c->view_number);
		return -1;
	}
	static struct relay_view_node nodes[BATON_RELAY_NODES_MAX];
	static char addrs[BATON_RELAY_NODES_MAX][BATON_RELAY_ADDR_MAX + 1];
	struct baton_relay_list rest = v->records;
	struct baton_relay_node n;
	uint32_t k = 0;
	while (k < BATON_RELAY_NODES_MAX && baton_relay_view_next(&rest, &n)) {
		struct view_node *vn = &c->view[k];
		copy_str(vn->cluster, sizeof vn->cluster, n.cluster_id);
		vn->id = n.node_id;
		vn->incarnation = n.incarnation;
		vn->connected = n.connected;
		copy_str(addrs[k], sizeof addrs[k], n.address);
		nodes[k] = (struct relay_view_node){vn->cluster, n.node_id,
						    n.incarnation, n.release,
						    addrs[k], n.connected};
		k++;
	}
	c->n_view = k;
	c->view_number = v->number;
	c->st.view = v->number;
	streams_after_view(c);
	send_all_acks(c);
	if (c->cb.on_view != NULL)
		c->cb.on_view(c->cb.arg, v->number, nodes, k);
	return 0;
}

static void on_data(struct relay_client *c, const struct baton_relay_data *d)
{
	if (!c->active)
		return; /* not acknowledged: sent again once active */
	char cluster[ID_MAX + 1];
	copy_str(cluster, sizeof cluster, d->peer.cluster_id);
	struct in_stream *in = c->ins;
	while (in != NULL &&
	       !(in->kind == d->kind && in->node == d->peer.node_id &&
		 in->incarnation == d->peer.incarnation &&
		 strcmp(in->cluster, cluster) == 0))
		in = in->next;
	if (in == NULL) {
		in = calloc(1, sizeof *in);
		if (in == NULL)
			return;
		in->kind = d->kind;
		memcpy(in->cluster, cluster, sizeof cluster);
		in->node = d->peer.node_id;
		in->incarnation = d->peer.incarnation;
		in->last = d->first_seq - 1;
		in->next = c->ins;
		c->ins = in;
	}
	if (d->seq != in->last + 1)
		return; /* a duplicate, or after a gap: the ACK says where */
	in->last = d->seq;
	c->st.received++;
	if (c->cb.on_data != NULL)
		c->cb.on_data(c->cb.arg, cluster, d->peer.node_id,
			      d->peer.incarnation,
			      d->kind == BATON_RELAY_MULTICAST, d->payload,
			      d->payload_len);
}

static void on_ack(struct relay_client *c, const struct baton_relay_ack *a)
{
	char cluster[ID_MAX + 1];
	copy_str(cluster, sizeof cluster, a->peer.cluster_id);
	struct out_stream *o =
		a->kind == BATON_RELAY_UNICAST
			? find_out(c, a->kind, cluster, a->peer.node_id,
				   a->peer.incarnation)
			: find_out(c, a->kind, cluster, 0, 0);
	if (o == NULL)
		return;
	struct dest_ack *d = NULL;
	for (uint32_t k = 0; k < o->n_acks && d == NULL; k++)
		if (o->acks[k].id == a->peer.node_id &&
		    o->acks[k].incarnation == a->peer.incarnation)
			d = &o->acks[k];
	if (d == NULL && o->n_acks < BATON_RELAY_NODES_MAX) {
		d = &o->acks[o->n_acks++];
		*d = (struct dest_ack){a->peer.node_id, a->peer.incarnation, 0};
	}
	if (d == NULL || a->seq <= d->acked || a->seq >= o->next_seq)
		return;
	d->acked = a->seq;
	o->progress_ms = uv_now(c->loop);
	trim(c, o);
}

static void set_active(struct relay_client *c, bool active)
{
	if (c->active == active)
		return;
	c->active = active;
	if (c->cb.on_active != NULL)
		c->cb.on_active(c->cb.arg, active);
}

/* One frame; -1 closes the connection (after an ERROR if it was bad). */
static int on_frame(struct relay_client *c, const struct baton_relay_frame *f)
{
	if (c->state != REGISTERED && f->type != BATON_RELAY_WELCOME &&
	    f->type != BATON_RELAY_ERROR && f->type != BATON_RELAY_PING &&
	    f->type != BATON_RELAY_PONG) {
		send_error(c, BATON_RELAY_EUNEXPECTED, (uint16_t)f->type,
			   "a frame before WELCOME");
		return -1;
	}
	switch (f->type) {
	case BATON_RELAY_WELCOME:
		if (c->state == REGISTERED) {
			send_error(c, BATON_RELAY_EUNEXPECTED, f->type,
				   "a second WELCOME");
			return -1;
		}
		on_welcome(c, &f->u.welcome);
		return c->state == REGISTERED ? 0 : -1;
	case BATON_RELAY_VIEW:
		if (on_view(c, &f->u.view) != 0) {
			send_error(c, BATON_RELAY_EUNEXPECTED, f->type,
				   "a view number not above the last one");
			return -1;
		}
		return 0;
	case BATON_RELAY_DATA:
		on_data(c, &f->u.data);
		return 0;
	case BATON_RELAY_ACK:
		on_ack(c, &f->u.ack);
		return 0;
	case BATON_RELAY_ACTIVATE:
	case BATON_RELAY_DEACTIVATE:
		set_active(c, f->type == BATON_RELAY_ACTIVATE);
		return 0;
	case BATON_RELAY_PING: {
		struct baton_relay_frame pong = {.type = BATON_RELAY_PONG};
		pong.u.ping_token = f->u.ping_token;
		send_frame(c, &pong);
		return 0;
	}
	case BATON_RELAY_PONG:
	case BATON_RELAY_STATUS_REPLY:
		return 0;
	case BATON_RELAY_ERROR: {
		char text[BATON_RELAY_TEXT_MAX + 1];
		copy_str(text, sizeof text, f->u.error.text);
		LOG_WARN("relay %s: ERROR %s: %s", c->relay_addr,
			 baton_relay_code_name(f->u.error.code), text);
		set_error(c, "the relay sent ERROR: ", text);
		return -1;
	}
	default:
		send_error(c, BATON_RELAY_EWRONG_DIRECTION, (uint16_t)f->type,
			   "not a frame for a node");
		return -1;
	}
}

/* ---- the connection ----------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h)
{
	struct relay_client *c = h->data;
	BATON_ASSERT(c->handles_open > 0);
	c->handles_open--;
	if (c->closing) {
		if (c->handles_open == 0) {
			void (*done)(void *) = c->done;
			void *arg = c->done_arg;
			baton_buf_free(&c->in);
			while (c->outs != NULL) {
				struct out_stream *o = c->outs;
				c->outs = o->next;
				free_stream(c, o);
			}
			while (c->ins != NULL) {
				struct in_stream *in = c->ins;
				c->ins = in->next;
				free(in);
			}
			free(c);
			if (done != NULL)
				done(arg);
		}
		return;
	}
	if (h == (uv_handle_t *)&c->tcp)
		c->state = DISCONNECTED;
}

static void close_tcp(struct relay_client *c)
{
	if (c->state == DISCONNECTED || c->state == CLOSING)
		return;
	c->state = CLOSING;
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

static void reconnect_later(struct relay_client *c, const char *why)
{
	if (why != NULL) {
		LOG_INFO("relay %s: %s; connecting again in %u ms",
			 c->relay_addr, why, c->backoff);
		set_error(c, "", why);
	}
	set_active(c, false);
	close_tcp(c);
	c->st.reconnects++;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct relay_client *c = h->data;
	(void)suggested;
	size_t want = 64u << 10;
	if (baton_buf_reserve(&c->in, want) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init((char *)c->in.data + c->in.len, (unsigned)want);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct relay_client *c = stream->data;
	(void)buf;
	if (nread < 0) {
		reconnect_later(c, nread == UV_EOF ? "the relay closed the "
						     "connection"
						   : uv_strerror((int)nread));
		return;
	}
	if (nread == 0)
		return;
	c->in.len += (size_t)nread;
	c->last_recv_ms = uv_now(c->loop);
	size_t at = 0;
	while (c->state == CONNECTED || c->state == REGISTERED) {
		size_t frame_len, need;
		struct baton_relay_err err;
		int rv = baton_relay_split(c->in.data + at, c->in.len - at,
					   BATON_RELAY_TO_NODE, &frame_len,
					   &need, &err);
		if (rv == BATON_EAGAIN)
			break;
		struct baton_relay_frame f;
		if (rv == 0)
			rv = baton_relay_decode(c->in.data + at, frame_len,
						BATON_RELAY_TO_NODE, &f, &err);
		if (rv != 0) {
			LOG_WARN_LIMITED("relay %s sent a malformed frame: %s",
					 c->relay_addr, err.text);
			send_error(c, err.code, 0, err.text);
			reconnect_later(c, "a malformed frame from the relay");
			return;
		}
		at += frame_len;
		if (on_frame(c, &f) != 0) {
			reconnect_later(c, NULL);
			return;
		}
	}
	if (at > 0) {
		memmove(c->in.data, c->in.data + at, c->in.len - at);
		c->in.len -= at;
	}
	/* Acknowledge what this batch delivered. */
	if (c->state == REGISTERED)
		send_all_acks(c);
}

static void on_connected(uv_connect_t *req, int status)
{
	struct relay_client *c = req->data;
	if (c->closing || c->state != CONNECTING)
		return;
	if (status != 0) {
		char why[128];
		snprintf(why, sizeof why, "cannot connect: %s",
			 uv_strerror(status));
		LOG_DEBUG("relay %s: %s", c->relay_addr, why);
		set_error(c, "", why);
		close_tcp(c);
		return;
	}
	c->state = CONNECTED;
	/* Small frames (ACKs, a FENCED) must not wait for Nagle. */
	uv_tcp_nodelay(&c->tcp, 1);
	c->last_recv_ms = uv_now(c->loop);
	baton_buf_reset(&c->in);
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	struct baton_relay_frame f = {.type = BATON_RELAY_HELLO};
	f.u.hello.cluster_id = str_of(c->cluster);
	f.u.hello.node_id = c->node_id;
	f.u.hello.incarnation = c->incarnation;
	f.u.hello.release = c->release;
	f.u.hello.address = str_of(c->address);
	if (send_frame(c, &f) != 0)
		reconnect_later(c, "cannot send HELLO");
}

static void try_connect(struct relay_client *c)
{
	struct sockaddr_in sa;
	if (baton_parse_addr(c->relay_addr, &sa) != 0)
		return; /* checked at start */
	uv_tcp_init(c->loop, &c->tcp);
	c->tcp.data = c;
	c->handles_open++;
	c->state = CONNECTING;
	c->connect_req.data = c;
	if (uv_tcp_connect(&c->connect_req, &c->tcp,
			   (const struct sockaddr *)&sa, on_connected) != 0)
		close_tcp(c);
}

static void on_timer(uv_timer_t *t)
{
	struct relay_client *c = t->data;
	if (c->closing)
		return;
	uint64_t now = uv_now(c->loop);
	if (c->state == DISCONNECTED) {
		if (now - c->last_send_ms < c->backoff)
			return;
		c->backoff = c->backoff * 2 > c->backoff_max
				     ? c->backoff_max
				     : c->backoff * 2;
		c->last_send_ms = now;
		try_connect(c);
		return;
	}
	if (c->state != REGISTERED && c->state != CONNECTED)
		return;
	if (now - c->last_recv_ms > RELAY_CLIENT_IDLE_CLOSE_MS) {
		send_error(c, BATON_RELAY_ETIMEOUT, 0,
			   "nothing received within 30 s");
		reconnect_later(c, "nothing received from the relay for 30 s");
		return;
	}
	if (now - c->last_send_ms > RELAY_CLIENT_PING_AFTER_MS) {
		struct baton_relay_frame ping = {.type = BATON_RELAY_PING};
		ping.u.ping_token = now;
		send_frame(c, &ping);
	}
	if (c->state != REGISTERED)
		return;
	for (struct out_stream *o = c->outs; o != NULL; o = o->next)
		if (o->head != NULL &&
		    now - o->progress_ms >= RELAY_CLIENT_RESEND_MS)
			resend(c, o);
}

int relay_client_start(uv_loop_t *loop, const struct relay_client_config *cfg,
		       const struct relay_client_callbacks *cb,
		       struct relay_client **out)
{
	struct sockaddr_in sa;
	size_t cl = strlen(cfg->cluster_id), al = strlen(cfg->address);
	if (baton_parse_addr(cfg->relay_addr, &sa) != 0 ||
	    strlen(cfg->relay_addr) >= 64 || cl == 0 || cl > ID_MAX ||
	    al == 0 || al > BATON_RELAY_ADDR_MAX || cfg->node_id == 0 ||
	    cfg->incarnation == 0)
		return BATON_EINVAL;
	struct relay_client *c = calloc(1, sizeof *c);
	if (c == NULL)
		return BATON_ENOMEM;
	c->loop = loop;
	c->cb = *cb;
	snprintf(c->relay_addr, sizeof c->relay_addr, "%s", cfg->relay_addr);
	memcpy(c->cluster, cfg->cluster_id, cl + 1);
	memcpy(c->address, cfg->address, al + 1);
	c->node_id = cfg->node_id;
	c->incarnation = cfg->incarnation;
	c->release = cfg->release;
	c->backoff_min = cfg->reconnect_min_ms ? cfg->reconnect_min_ms
					       : RELAY_CLIENT_RECONNECT_MIN_MS;
	c->backoff_max = cfg->reconnect_max_ms ? cfg->reconnect_max_ms
					       : RELAY_CLIENT_RECONNECT_MAX_MS;
	c->backoff = c->backoff_min;
	baton_buf_init(&c->in);
	c->state = DISCONNECTED;
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	c->handles_open = 1;
	uv_timer_start(&c->timer, on_timer, 0, HOUSEKEEPING_MS);
	c->last_send_ms = 0;
	try_connect(c);
	*out = c;
	return 0;
}

void relay_client_status(const struct relay_client *c,
			 struct relay_client_status *out)
{
	*out = c->st;
	out->connected = c->state == CONNECTED || c->state == REGISTERED;
	out->registered = c->state == REGISTERED;
	out->active = c->active;
	out->queued_msgs = c->queued_msgs;
	out->queued_bytes = c->queued_bytes;
}

void relay_client_close(struct relay_client *c, void (*done)(void *arg),
			void *arg)
{
	if (c->state == REGISTERED) {
		struct baton_relay_frame f = {.type = BATON_RELAY_LEAVE};
		f.u.leave.reason = str_of("shutting down");
		send_frame(c, &f);
	}
	c->closing = true;
	c->done = done;
	c->done_arg = arg;
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, on_handle_closed);
	if (c->state != DISCONNECTED && c->state != CLOSING) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
	}
	c->state = CLOSING;
}
