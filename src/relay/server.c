/*
 * baton-relay's connections: accepting, reading and splitting frames,
 * bounded write queues, timeouts, signals. What each frame does is in
 * session.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "address.h"
#include "baton/assert.h"
#include "baton/errors.h"
#include "log.h"
#include "server_internal.h"

/* Where a closing connection is closed even if its peer reads nothing. */
#define CLOSE_LINGER_MS 2000u
/* Small, so that the connections of strangers cost little; a node's
 * buffer grows up to one frame of FRAME_MAX bytes. */
#define READ_BUF_INITIAL (4u << 10)
#define FRAME_MAX (BATON_RELAY_HEADER_LEN + BATON_RELAY_DATA_BODY_MAX)

struct relay_write {
	uv_write_t req;
	struct relay_conn *conn;
	struct relay_buf *buf;
	bool is_data;
};

uint64_t relay_now_ms(const struct relay_server *srv)
{
	return uv_now(srv->loop);
}

struct relay_buf *relay_encode(const struct baton_relay_frame *f)
{
	struct baton_relay_err err = {0};
	size_t len = 0;
	int rc =
		baton_relay_encode(f, BATON_RELAY_TO_NODE, NULL, 0, &len, &err);
	BATON_ASSERT(rc == BATON_ETOOBIG || (rc == 0 && len == 0));
	BATON_ASSERT(len >= BATON_RELAY_HEADER_LEN && len <= FRAME_MAX);
	struct relay_buf *b = malloc(sizeof(*b) + len);
	BATON_ASSERT(b != NULL);
	rc = baton_relay_encode(f, BATON_RELAY_TO_NODE, b->bytes, len, &len,
				&err);
	if (rc != 0)
		fprintf(stderr, "baton-relay: encoding %s: %s\n",
			baton_relay_type_name((uint16_t)f->type), err.text);
	BATON_ASSERT(rc == 0);
	b->refs = 0;
	b->len = (uint32_t)len;
	return b;
}

void relay_buf_release(struct relay_buf *b)
{
	if (b != NULL && b->refs == 0)
		free(b);
}

void conn_reason(struct relay_conn *c, const char *fmt, ...)
{
	if (c->close_reason[0] != '\0')
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->close_reason, sizeof c->close_reason, fmt, ap);
	va_end(ap);
}

static void on_close(uv_handle_t *h)
{
	struct relay_conn *c = h->data;
	struct relay_server *srv = c->srv;
	/* One line per connection closed, whoever decided it. */
	relay_log(RELAY_LOG_INFO, "closed %s%s%s: %s", c->name,
		  c->ident[0] ? " " : "", c->ident,
		  c->close_reason[0] ? c->close_reason : "the relay stopped");
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	BATON_ASSERT(srv->conn_count > 0);
	srv->conn_count--;
	free(c->rbuf);
	free(c);
}

static void close_now(struct relay_conn *c)
{
	if (!uv_is_closing((uv_handle_t *)&c->tcp))
		uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void on_write(uv_write_t *req, int status)
{
	struct relay_write *w = (struct relay_write *)req;
	struct relay_conn *c = w->conn;
	BATON_ASSERT(c->queue_bytes >= w->buf->len);
	c->queue_bytes -= w->buf->len;
	if (w->is_data) {
		BATON_ASSERT(c->queue_messages > 0);
		c->queue_messages--;
	}
	BATON_ASSERT(w->buf->refs > 0);
	w->buf->refs--;
	relay_buf_release(w->buf);
	free(w);
	if (status < 0 && status != UV_ECANCELED && !c->closing) {
		/* EPIPE, ECONNRESET: the peer went away while the relay was
		 * writing to it; only this connection ends (SIGPIPE is
		 * ignored, relay_main.c). */
		conn_reason(c, "write failed (%s)", uv_strerror(status));
		session_detach(c);
		c->closing = true;
		close_now(c);
	}
}

static bool write_buf(struct relay_conn *c, struct relay_buf *b, bool is_data)
{
	struct relay_write *w = malloc(sizeof(*w));
	BATON_ASSERT(w != NULL);
	w->conn = c;
	w->buf = b;
	w->is_data = is_data;
	b->refs++;
	c->queue_bytes += b->len;
	if (is_data)
		c->queue_messages++;
	uv_buf_t ub = uv_buf_init((char *)b->bytes, b->len);
	int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, on_write);
	if (rc != 0) {
		w->req.data = NULL;
		on_write(&w->req, rc);
		return false;
	}
	c->last_send_ms = relay_now_ms(c->srv);
	return true;
}

bool conn_send(struct relay_conn *c, struct relay_buf *b, bool is_data)
{
	BATON_ASSERT(b != NULL && c != NULL);
	if (c->closing)
		return false;
	const struct relay_config *cfg = c->srv->cfg;
	/* Every frame counts against the bytes, so that a node that stopped
	 * reading cannot pile up VIEWs either. */
	if ((is_data && c->queue_messages + 1u > cfg->queue_messages_max) ||
	    c->queue_bytes + b->len > cfg->queue_bytes_max) {
		conn_fail(c, BATON_RELAY_EOVERLOADED, 0,
			  "the relay's queue to this node holds %u messages, "
			  "%llu bytes, and the limit is %u messages, %llu "
			  "bytes: reconnect and resume from the last ACK",
			  c->queue_messages, (unsigned long long)c->queue_bytes,
			  cfg->queue_messages_max,
			  (unsigned long long)cfg->queue_bytes_max);
		return false;
	}
	return write_buf(c, b, is_data);
}

void conn_send_frame(struct relay_conn *c, const struct baton_relay_frame *f)
{
	struct relay_buf *b = relay_encode(f);
	conn_send(c, b, false);
	relay_buf_release(b);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	struct relay_conn *c = req->data;
	free(req);
	close_now(c);
}

void conn_finish(struct relay_conn *c)
{
	if (c->closing)
		return;
	session_detach(c);
	c->role = CONN_DONE;
	c->closing = true;
	c->closing_since_ms = relay_now_ms(c->srv);
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_shutdown_t *req = malloc(sizeof(*req));
	BATON_ASSERT(req != NULL);
	req->data = c;
	if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
		free(req);
		close_now(c);
	}
}

void conn_fail(struct relay_conn *c, uint16_t code, uint16_t frame_type,
	       const char *fmt, ...)
{
	BATON_ASSERT(code != 0);
	if (c->closing)
		return;
	char text[BATON_RELAY_TEXT_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	relay_log(RELAY_LOG_WARN,
		  "%s: sending ERROR %s (%u) about frame %s, closing: %s",
		  c->name, baton_relay_code_name(code), code,
		  frame_type ? baton_relay_type_name(frame_type) : "none",
		  text);
	conn_reason(c, "sent ERROR %s: %s", baton_relay_code_name(code), text);
	struct baton_relay_frame f = {.type = BATON_RELAY_ERROR};
	f.u.error.code = code;
	f.u.error.frame_type = frame_type;
	f.u.error.text.ptr = text;
	f.u.error.text.len = (uint16_t)strlen(text);
	struct relay_buf *b = relay_encode(&f);
	write_buf(c, b, false);
	relay_buf_release(b);
	conn_finish(c);
}

void relay_fatal(struct relay_server *srv, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	relay_log(RELAY_LOG_ERROR, "stopping: %s", text);
	srv->exit_code = BATON_EIO;
	uv_stop(srv->loop);
}

/* ---- reading ------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
	(void)suggested;
	struct relay_conn *c = h->data;
	if (c->rcap - c->rlen < 4096 && c->rcap < FRAME_MAX) {
		size_t cap = c->rcap * 2 < FRAME_MAX ? c->rcap * 2 : FRAME_MAX;
		uint8_t *nb = realloc(c->rbuf, cap);
		BATON_ASSERT(nb != NULL);
		c->rbuf = nb;
		c->rcap = cap;
	}
	*out = uv_buf_init((char *)c->rbuf + c->rlen,
			   (unsigned)(c->rcap - c->rlen));
}

/* The frame type to name in an ERROR about a malformed header. */
static uint16_t header_type(const struct relay_conn *c, uint16_t code)
{
	if (code == BATON_RELAY_EBAD_MAGIC || c->rlen < 6)
		return 0;
	uint16_t type = (uint16_t)(c->rbuf[4] | (c->rbuf[5] << 8));
	return baton_relay_type_name(type) != NULL ? type : 0;
}

/* Split and handle every whole frame in c's buffer. */
static void process(struct relay_conn *c)
{
	size_t off = 0;
	while (!c->closing) {
		size_t frame_len = 0, need = 0;
		struct baton_relay_err err = {0};
		int rc = baton_relay_split(c->rbuf + off, c->rlen - off,
					   BATON_RELAY_TO_RELAY, &frame_len,
					   &need, &err);
		if (rc == BATON_EAGAIN)
			break;
		if (rc != 0) {
			c->rlen -= off;
			memmove(c->rbuf, c->rbuf + off, c->rlen);
			off = 0;
			conn_fail(c, err.code, header_type(c, err.code), "%s",
				  err.text);
			return;
		}
		struct baton_relay_frame f;
		rc = baton_relay_decode(c->rbuf + off, frame_len,
					BATON_RELAY_TO_RELAY, &f, &err);
		uint16_t type =
			(uint16_t)(c->rbuf[off + 4] | (c->rbuf[off + 5] << 8));
		if (rc != 0) {
			if (type == BATON_RELAY_ERROR) {
				relay_log(RELAY_LOG_WARN,
					  "%s: malformed ERROR (%s): closing",
					  c->name, err.text);
				conn_reason(c, "malformed ERROR received");
				session_detach(c);
				c->closing = true;
				close_now(c);
				return;
			}
			conn_fail(c, err.code, type, "%s", err.text);
			return;
		}
		session_frame(c, &f);
		off += frame_len;
	}
	if (off > 0 && !c->closing) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	(void)buf;
	struct relay_conn *c = s->data;
	if (c->closing)
		return;
	if (n < 0) {
		if (c->rlen > 0)
			relay_log(RELAY_LOG_WARN,
				  "%s: truncated frame (%zu bytes) then %s: "
				  "closing",
				  c->name, c->rlen,
				  n == UV_EOF ? "end of stream"
					      : uv_strerror((int)n));
		conn_reason(c, "%s by the peer%s",
			    n == UV_EOF ? "end of stream" : uv_strerror((int)n),
			    c->rlen > 0 ? " inside a frame" : "");
		session_detach(c);
		c->closing = true;
		close_now(c);
		return;
	}
	c->rlen += (size_t)n;
	c->last_recv_ms = relay_now_ms(c->srv);
	process(c);
}

/* The IP address of sa alone ("127.0.0.1", "::1"). */
static void host_text(const struct sockaddr *sa, char *out, size_t cap)
{
	int rc =
		sa->sa_family == AF_INET6
			? uv_ip6_name((const struct sockaddr_in6 *)sa, out, cap)
			: uv_ip4_name((const struct sockaddr_in *)sa, out, cap);
	if (rc != 0)
		snprintf(out, cap, "?");
}

/* Close x at once to make room for a newcomer (an ERROR is attempted;
 * the descriptor is freed now, not after the linger). */
static void evict(struct relay_conn *x, const char *why)
{
	conn_reason(x, "evicted before registering: %s", why);
	conn_fail(x, BATON_RELAY_EREFUSED, 0, "evicted before registering: %s",
		  why);
	close_now(x);
}

/* The limits on connections (docs/relay-server.md "Limits"), for c just
 * accepted. A stranger's idle connections must not lock out nodes, yet in
 * tests (and behind a NAT) every node shares one address: so a newcomer
 * is never refused for room an unregistered connection holds; it evicts
 * the oldest such connection instead, of its own address when that
 * address is at its limit, of any address at the global one. Registered
 * nodes are never evicted. Returns false when c was refused. */
static bool make_room(struct relay_server *srv, struct relay_conn *c)
{
	const struct relay_config *cfg = srv->cfg;
	uint32_t open = 0, same = 0;
	struct relay_conn *oldest_same = NULL, *oldest_any = NULL;
	/* The list is newest first: the last match is the oldest. */
	for (struct relay_conn *x = srv->conns; x != NULL; x = x->next) {
		if (x == c || x->closing)
			continue;
		open++;
		if (x->role == CONN_NODE)
			continue;
		oldest_any = x;
		if (strcmp(x->host, c->host) == 0) {
			same++;
			oldest_same = x;
		}
	}
	if (same >= cfg->unregistered_per_address_max) {
		char why[160];
		snprintf(why, sizeof why,
			 "%s holds %u unregistered connections, the most one "
			 "address may (--max-unregistered-per-address)",
			 c->host, same);
		evict(oldest_same, why);
		return true;
	}
	if (open < cfg->connections_max)
		return true;
	if (oldest_any != NULL) {
		char why[160];
		snprintf(why, sizeof why,
			 "the relay holds %u connections, the most it may "
			 "(--max-connections)",
			 open);
		evict(oldest_any, why);
		return true;
	}
	conn_fail(c, BATON_RELAY_EREFUSED, 0,
		  "the relay holds %u connections, all of registered nodes, "
		  "the most it may (--max-connections)",
		  open);
	return false;
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct relay_server *srv = listener->data;
	if (status < 0) {
		relay_log(RELAY_LOG_WARN, "accept failed: %s",
			  uv_strerror(status));
		return;
	}
	struct relay_conn *c = calloc(1, sizeof(*c));
	BATON_ASSERT(c != NULL);
	c->srv = srv;
	c->rbuf = malloc(READ_BUF_INITIAL);
	BATON_ASSERT(c->rbuf != NULL);
	c->rcap = READ_BUF_INITIAL;
	uv_tcp_init(srv->loop, &c->tcp);
	c->tcp.data = c;
	c->next = srv->conns;
	if (srv->conns != NULL)
		srv->conns->prev = c;
	srv->conns = c;
	srv->conn_count++;
	if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
		conn_reason(c, "accept failed");
		c->closing = true;
		close_now(c);
		return;
	}
	struct sockaddr_storage sa;
	int len = sizeof(sa);
	snprintf(c->name, sizeof(c->name), "connection");
	snprintf(c->host, sizeof(c->host), "?");
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &len) == 0) {
		baton_sockaddr_text((struct sockaddr *)&sa, c->name,
				    sizeof(c->name));
		host_text((struct sockaddr *)&sa, c->host, sizeof(c->host));
	}
	uv_tcp_nodelay(&c->tcp, 1);
	c->accepted_ms = c->last_recv_ms = c->last_send_ms = relay_now_ms(srv);
	if (!make_room(srv, c))
		return;
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- timers and signals -------------------------------------------------- */

static void sweep_conn(struct relay_conn *c, uint64_t now)
{
	const struct relay_config *cfg = c->srv->cfg;
	if (c->closing) {
		if (now - c->closing_since_ms >= CLOSE_LINGER_MS)
			close_now(c);
		return;
	}
	/* From the accept, not from the last byte: a peer that trickles a
	 * byte at a time must still register in time. */
	if (c->role == CONN_NEW &&
	    now - c->accepted_ms >= cfg->handshake_timeout_ms) {
		conn_fail(c, BATON_RELAY_ETIMEOUT, 0,
			  "no HELLO or STATUS within %llu ms of connecting",
			  (unsigned long long)cfg->handshake_timeout_ms);
		return;
	}
	if (now - c->last_recv_ms >= cfg->idle_timeout_ms) {
		conn_fail(c, BATON_RELAY_ETIMEOUT, 0,
			  "nothing received for %llu ms (the idle limit)",
			  (unsigned long long)cfg->idle_timeout_ms);
		return;
	}
	if (c->role != CONN_NEW &&
	    now - c->last_send_ms >= cfg->ping_interval_ms) {
		struct baton_relay_frame f = {.type = BATON_RELAY_PING};
		f.u.ping_token = ++c->ping_token;
		conn_send_frame(c, &f);
	}
}

static void on_sweep(uv_timer_t *t)
{
	struct relay_server *srv = t->data;
	uint64_t now = relay_now_ms(srv);
	for (struct relay_conn *c = srv->conns, *next; c != NULL; c = next) {
		next = c->next;
		sweep_conn(c, now);
	}
	if (!srv->stopping) {
		session_forget(srv);
		session_auto_deactivate(srv);
	}
	if (srv->stopping && srv->conns == NULL)
		uv_stop(srv->loop);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct relay_server *srv = h->data;
	if (signum == SIGUSR1 || signum == SIGUSR2) {
		session_set_active(srv, signum == SIGUSR1);
		return;
	}
	if (srv->stopping)
		return;
	relay_log(RELAY_LOG_INFO, "signal %d: stopping", signum);
	srv->stopping = true;
	uv_close((uv_handle_t *)&srv->listener, NULL);
	for (struct relay_conn *c = srv->conns, *next; c != NULL; c = next) {
		next = c->next;
		conn_fail(c, BATON_RELAY_ESHUTTING_DOWN, 0,
			  "the relay is stopping: reconnect with back-off");
	}
}

/* ---- start and stop --------------------------------------------------------
 */

/* HOST:PORT as users write it: an IPv6 number in brackets. */
static void listen_text(const struct relay_config *cfg, char *out, size_t cap)
{
	bool v6 = strchr(cfg->host, ':') != NULL;
	snprintf(out, cap, "%s%s%s:%d", v6 ? "[" : "", cfg->host, v6 ? "]" : "",
		 cfg->port);
}

static int listen_on(struct relay_server *srv, char *err, size_t errlen)
{
	const struct relay_config *cfg = srv->cfg;
	/* Resolved once, at start: a listening address does not move. */
	char text[BATON_ADDR_HOST_MAX + 16];
	listen_text(cfg, text, sizeof text);
	struct sockaddr_storage sa;
	char why[BATON_ADDR_WHY_MAX];
	if (baton_addr_resolve(text, &sa, why, sizeof why) != 0) {
		snprintf(err, errlen, "--listen: %s", why);
		return BATON_EINVAL;
	}
	uv_tcp_init(srv->loop, &srv->listener);
	srv->listener.data = srv;
	int rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&sa, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&srv->listener, 128,
			       on_connection);
	if (rc != 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", text,
			 uv_strerror(rc));
		return BATON_EIO;
	}
	return 0;
}

static int load_state(struct relay_server *srv, char *err, size_t errlen)
{
	bool found = false;
	int rc = relay_state_load(srv->cfg->data_dir, &srv->state, &found, err,
				  errlen);
	if (rc != 0)
		return rc;
	if (srv->cfg->activate && !srv->state.active) {
		srv->state.active = true;
		rc = relay_state_store(srv->cfg->data_dir, &srv->state, err,
				       errlen);
		if (rc != 0)
			return rc;
	}
	relay_log(RELAY_LOG_INFO, "%s: last view %llu, %s (incarnation %llu)",
		  found ? "state file read" : "no state file: first start",
		  (unsigned long long)srv->state.view_number,
		  srv->state.active ? "active" : "inactive",
		  (unsigned long long)srv->incarnation);
	return 0;
}

/* After the loop stopped: close every handle; connections free themselves. */
static void close_walk(uv_handle_t *h, void *srv)
{
	if (uv_is_closing(h))
		return;
	bool is_conn = h->type == UV_TCP && h->data != srv;
	uv_close(h, is_conn ? on_close : NULL);
}

int relay_run(const struct relay_config *cfg, char *err, size_t errlen)
{
	BATON_ASSERT(cfg != NULL && cfg->data_dir != NULL);
	BATON_ASSERT(cfg->queue_messages_max > 0 && cfg->idle_timeout_ms > 0);
	struct relay_server *srv = calloc(1, sizeof(*srv));
	BATON_ASSERT(srv != NULL);
	srv->cfg = cfg;
	srv->loop = uv_default_loop();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	srv->incarnation =
		(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	/* The nonces seen die with the process: a proof made before this
	 * start could be a replay the previous process accepted. One made in
	 * the start's own millisecond is not before it (a client that read
	 * the incarnation and answered at once was refused as a replay). */
	srv->nonces.floor_ms = srv->incarnation / 1000000u - 1u;
	relay_table_init(&srv->table);
	int rc = load_state(srv, err, errlen);
	if (rc == 0)
		rc = listen_on(srv, err, errlen);
	if (rc != 0) {
		free(srv);
		return rc;
	}
	uint64_t tick = cfg->handshake_timeout_ms < cfg->ping_interval_ms
				? cfg->handshake_timeout_ms
				: cfg->ping_interval_ms;
	tick = tick / 4 < 50 ? 50 : tick / 4 > 1000 ? 1000 : tick / 4;
	uv_timer_init(srv->loop, &srv->sweep);
	srv->sweep.data = srv;
	uv_timer_start(&srv->sweep, on_sweep, tick, tick);
	const int signums[4] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
	for (int i = 0; i < 4; i++) {
		uv_signal_init(srv->loop, &srv->signals[i]);
		srv->signals[i].data = srv;
		uv_signal_start(&srv->signals[i], on_signal, signums[i]);
	}
	char text[BATON_ADDR_HOST_MAX + 16];
	listen_text(cfg, text, sizeof text);
	relay_log(RELAY_LOG_INFO, "listening on %s, data in %s", text,
		  cfg->data_dir);
	uv_run(srv->loop, UV_RUN_DEFAULT);
	rc = srv->exit_code;
	if (rc != 0)
		snprintf(err, errlen, "stopped on an error (see the log)");
	uv_walk(srv->loop, close_walk, srv);
	uv_run(srv->loop, UV_RUN_DEFAULT);
	free(srv);
	return rc;
}
