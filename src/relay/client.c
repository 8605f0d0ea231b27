/*
 * The node-side relay client (client.h, client_internal.h): the
 * connection to baton-relay and its life (connecting, reading and writing
 * frames, losing it and reconnecting with back-off, the timer), and start,
 * status and close. What each frame does is in client_receive.c; the
 * outgoing streams are in client_send.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "address.h"
#include "address_uv.h"
#include "relay_auth.h"
#include "baton/assert.h"
#include "baton/errors.h"
/* batond's log (src/relay/log.h is baton-relay's own). */
#include "../io/log.h"
#include "client_internal.h"

#define FRAME_MAX (BATON_RELAY_HEADER_LEN + BATON_RELAY_DATA_BODY_MAX)
#define READ_BUF_INITIAL (64u << 10)
/* An ERROR or LEAVE being flushed before close: closed after this even if
 * the relay reads nothing. */
#define CLOSE_LINGER_MS 2000u
#define TICK_MAX_MS 250u

static void start_connect(struct relay_client *c);

/* ---- small helpers --------------------------------------------------------
 */

/* An identifier of the protocol: 1..max bytes, no control byte. */
bool relay_client__valid_identifier(const char *s, size_t max)
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

void relay_client__set_error(struct relay_client *c, const char *fmt, ...)
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
	if (conn->connecting != NULL) {
		baton_addr_connect_cancel(conn->connecting);
		conn->connecting = NULL;
	}
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
		relay_client__set_error(c, "write failed: %s",
					uv_strerror(status));
		relay_client__lose_connection(c);
		return;
	}
	relay_client__flush(c);
}

/* Encode f and queue it on conn. false: the connection is lost (write
 * refused) or memory ran out; the caller stops using conn. */
bool relay_client__conn_send_frame(struct relay_conn *conn,
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
void relay_client__end_session(struct relay_client *c, struct relay_conn *conn,
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

void relay_client__lose_connection(struct relay_client *c)
{
	if (c->conn != NULL)
		relay_client__end_session(c, c->conn, false);
}

/* A protocol error of the relay: send ERROR {code, frame type, text}, log
 * it, close and reconnect. */
void relay_client__conn_fail(struct relay_client *c, uint16_t code,
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
	relay_client__set_error(c, "sent ERROR %s: %s",
				baton_relay_code_name(code), text);
	struct baton_relay_frame f = {.type = BATON_RELAY_ERROR};
	f.u.error.code = code;
	f.u.error.frame_type = frame_type;
	f.u.error.text.ptr = text;
	f.u.error.text.len = (uint16_t)strlen(text);
	bool queued = relay_client__conn_send_frame(conn, &f);
	relay_client__end_session(c, conn, queued);
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
			relay_client__conn_fail(c, err.code,
						header_type(buf, len, err.code),
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
			relay_client__set_error(
				c, "malformed ERROR from the relay: %s",
				err.text);
			relay_client__end_session(c, conn, false);
			return;
		}
		if (rc != 0) {
			relay_client__conn_fail(c, err.code, type, "%s",
						err.text);
			return;
		}
		relay_client__handle_frame(c, &f);
		off += frame_len;
	}
	if (c->conn != conn)
		return;
	memmove(conn->rbuf, conn->rbuf + off, conn->rlen - off);
	conn->rlen -= off;
	relay_client__send_due_acks(c);
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
		relay_client__set_error(c, "connection lost: %s", why);
		relay_client__lose_connection(c);
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
	uint8_t entry[BATON_RELAY_PROOF_ENTRY_LEN];
	if (c->has_key) {
		struct baton_relay_hello_proof p;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t wall_ms = (uint64_t)ts.tv_sec * 1000u +
				   (uint64_t)ts.tv_nsec / 1000000u;
		if (relay_auth_prove(c->key, h, wall_ms, &p) != 0) {
			LOG_ERROR("relay %s: no random bytes for the HELLO "
				  "proof: retrying with back-off",
				  c->relay_addr);
			relay_client__set_error(c, "no random bytes");
			relay_client__lose_connection(c);
			return;
		}
		f.ext.ptr = entry;
		f.ext.len = (uint32_t)baton_relay_proof_put(&p, entry);
	}
	if (!relay_client__conn_send_frame(c->conn, &f)) {
		relay_client__set_error(c, "cannot send HELLO");
		relay_client__lose_connection(c);
	}
}

static void on_connect(void *data, int status)
{
	struct relay_conn *conn = data;
	struct relay_client *c = conn->client;
	conn->connecting = NULL;
	if (conn->closing || c->conn != conn)
		return;
	if (status < 0) {
		LOG_WARN_LIMITED("relay %s: cannot connect (%s): retrying "
				 "with back-off",
				 c->relay_addr, uv_strerror(status));
		relay_client__set_error(c, "cannot connect: %s",
					uv_strerror(status));
		relay_client__lose_connection(c);
		return;
	}
	conn->connected = true;
	conn->last_recv_ms = conn->last_send_ms = now_ms(c);
	uv_tcp_nodelay(&conn->tcp, 1);
	int rc = uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
	if (rc != 0) {
		relay_client__set_error(c, "cannot read: %s", uv_strerror(rc));
		relay_client__lose_connection(c);
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
		relay_client__set_error(c, "out of memory for a connection");
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
	c->conn = conn;
	/* A name is resolved again at every connection: the relay may have
	 * moved. */
	int rc = baton_addr_connect(c->loop, &conn->tcp, c->relay_addr,
				    on_connect, conn, &conn->connecting);
	if (rc != 0) {
		relay_client__set_error(c, "cannot connect: %s",
					uv_strerror(rc));
		relay_client__lose_connection(c);
	}
}

/* ---- the timer ------------------------------------------------------------
 */

static void check_connection(struct relay_client *c, uint64_t now)
{
	struct relay_conn *conn = c->conn;
	if (!conn->connected) {
		if (now - conn->started_ms >= RELAY_CLIENT_CONNECT_TIMEOUT_MS) {
			relay_client__set_error(
				c, "connect timed out after %u ms",
				RELAY_CLIENT_CONNECT_TIMEOUT_MS);
			LOG_WARN("relay %s: %s: retrying", c->relay_addr,
				 c->last_error);
			relay_client__lose_connection(c);
		}
		return;
	}
	if (now - conn->last_recv_ms >= c->cfg.idle_timeout_ms) {
		relay_client__conn_fail(
			c, BATON_RELAY_ETIMEOUT, 0,
			"nothing received for %llu ms (the idle limit)",
			(unsigned long long)(now - conn->last_recv_ms));
		return;
	}
	if (now - conn->last_send_ms >= c->cfg.ping_interval_ms) {
		struct baton_relay_frame f = {.type = BATON_RELAY_PING};
		f.u.ping_token = ++conn->ping_token;
		if (!relay_client__conn_send_frame(conn, &f))
			relay_client__lose_connection(c);
	}
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
	if (!relay_client__can_send(c))
		return;
	relay_client__resend_stalled(c, now);
	relay_client__flush(c);
}

/* ---- start, status, close -------------------------------------------------
 */

/* A name in relay_addr is resolved at every connection (start_connect). */
static int check_config(const struct relay_client_config *cfg)
{
	const char *bad = NULL;
	struct baton_addr relay;
	char why[BATON_ADDR_WHY_MAX];
	if (!relay_client__valid_identifier(cfg->relay_addr,
					    BATON_RELAY_ADDR_MAX))
		bad = "relay_addr: expected 1 to 255 bytes, no control byte";
	else if (baton_addr_parse(cfg->relay_addr, &relay, why, sizeof why) !=
		 0)
		bad = why;
	else if (!relay_client__valid_identifier(cfg->cluster_id,
						 BATON_RELAY_ID_MAX))
		bad = "cluster_id: expected 1 to 255 bytes, no control byte";
	else if (!relay_client__valid_identifier(cfg->address,
						 BATON_RELAY_ADDR_MAX))
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
	int rc = check_config(cfg);
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
	c->cfg = *cfg;
	strcpy(c->relay_addr, cfg->relay_addr);
	strcpy(c->cluster_id, cfg->cluster_id);
	strcpy(c->address, cfg->address);
	c->cfg.relay_addr = c->relay_addr;
	c->cfg.cluster_id = c->cluster_id;
	c->cfg.address = c->address;
	c->cfg.secret = NULL; /* only its key is kept */
	if (cfg->secret != NULL) {
		relay_auth_key(cfg->secret, c->key);
		c->has_key = true;
	}
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
		graceful = relay_client__conn_send_frame(conn, &f);
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
