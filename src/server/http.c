/*
 * --metrics HOST:PORT: a small, strict HTTP/1.1 server for GET /metrics,
 * GET /health and GET /ready (docs/metrics.md).
 *
 * Why written here and not a library (libmicrohttpd, say): the figures
 * live on the node's libuv loop, and a library would bring its own
 * threads, so every scrape would need locks around state the loop owns;
 * here the handler runs on that one loop, reads the state directly, and
 * needs no lock. Three GET paths need a few hundred lines, not a general
 * HTTP stack, and what is not written cannot be attacked: the port is
 * reachable by whoever reaches the node, so the handler accepts only a
 * request line and headers of bounded size (HTTP_HEADERS_MAX), holds at
 * most HTTP_CONNS_MAX connections (HTTP_CONNS_PER_SOURCE_MAX from one
 * address), gives each HTTP_DEADLINE_MS to send its request, answers
 * every request with "Connection: close", and refuses everything else
 * with a short 4xx.
 *
 * Slow clients do not lock out the monitoring system: when a newcomer
 * finds no room, the oldest connection that has not sent its whole
 * request yet is closed for it (http_admit), so a health check, which
 * sends its request at once, gets through while hundreds of half-sent
 * requests are held open against the port, even from the same address.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "baton/assert.h"
#include "http_request.h"
#include "log.h"
#include "server.h"

#define HTTP_CONNS_MAX 64u
/* One address may hold half the places: others always find room. */
#define HTTP_CONNS_PER_SOURCE_MAX 32u
#define HTTP_DEADLINE_MS 5000u
/* After the answer: how long unread bytes are drained before the close
 * (closing with bytes unread would reset the connection and could lose
 * the answer on its way). */
#define HTTP_LINGER_MS 1000u

struct http_conn {
	struct http *h;
	uv_tcp_t tcp;
	uv_timer_t timer;
	uv_write_t write;
	uv_shutdown_t shutdown;
	struct baton_buf out;
	char in[HTTP_HEADERS_MAX];
	size_t len;
	bool answered; /* also: its whole request head came */
	bool closing;
	uint64_t source;  /* the peer's address as a key (http_source_key) */
	int handles_open; /* tcp and timer: freed when both closed */
	struct http_conn *prev, *next;
};

struct http {
	struct server *s;
	uv_tcp_t listener;
	struct http_conn *conns, *conns_tail; /* oldest first */
	uint32_t n_conns;
	uint64_t refused_conns;	 /* no room, and no one to make room */
	uint64_t evicted_conns;	 /* closed half-sent for a newcomer */
	uint64_t deadline_conns; /* no whole request within the deadline */
};

static void on_conn_closed(uv_handle_t *handle)
{
	struct http_conn *c = handle->data;
	if (--c->handles_open > 0)
		return;
	baton_buf_free(&c->out);
	free(c);
}

static void conn_close(struct http_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	struct http *h = c->h;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	else
		h->conns_tail = c->prev;
	BATON_ASSERT(h->n_conns > 0);
	h->n_conns--;
	uv_close((uv_handle_t *)&c->timer, on_conn_closed);
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_timer(uv_timer_t *t)
{
	struct http_conn *c = t->data;
	if (!c->answered)
		c->h->deadline_conns++;
	conn_close(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	struct http_conn *c = req->data;
	if (status != 0)
		conn_close(c);
	/* Else reading goes on (discarding) until EOF or the linger ends. */
}

static void on_written(uv_write_t *req, int status)
{
	struct http_conn *c = req->data;
	if (c->closing)
		return;
	if (status != 0) {
		conn_close(c);
		return;
	}
	c->shutdown.data = c;
	if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0)
		conn_close(c);
}

static const char *status_text(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Content Too Large";
	case 431:
		return "Request Header Fields Too Large";
	default:
		return "Service Unavailable";
	}
}

/* Send one answer and end the connection after it. */
static void answer(struct http_conn *c, int code, const char *type,
		   const char *body, size_t body_len)
{
	BATON_ASSERT(!c->answered);
	c->answered = true;
	char head[256];
	int n = snprintf(head, sizeof head,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n%s\r\n",
			 code, status_text(code), type, body_len,
			 code == 405 ? "Allow: GET\r\n" : "");
	BATON_ASSERT(n > 0 && (size_t)n < sizeof head);
	baton_buf_append(&c->out, head, (size_t)n);
	baton_buf_append(&c->out, body, body_len);
	uv_timer_start(&c->timer, on_timer, HTTP_LINGER_MS, 0);
	uv_buf_t b = uv_buf_init((char *)c->out.data, (unsigned)c->out.len);
	c->write.data = c;
	if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
		conn_close(c);
}

static void answer_text(struct http_conn *c, int code, const char *text)
{
	answer(c, code, "text/plain; charset=utf-8", text, strlen(text));
}

static void serve(struct http_conn *c, const char *path, size_t path_len,
		  const char *query, size_t query_len)
{
	struct server *s = c->h->s;
	if (path_len == 8 && memcmp(path, "/metrics", 8) == 0) {
		struct baton_buf body;
		baton_buf_init(&body);
		metrics_render(s, &body);
		answer(c, 200, "text/plain; version=0.0.4; charset=utf-8",
		       (const char *)body.data, body.len);
		baton_buf_free(&body);
		return;
	}
	bool ready = path_len == 6 && memcmp(path, "/ready", 6) == 0;
	if (ready || (path_len == 7 && memcmp(path, "/health", 7) == 0)) {
		uint64_t max_lag;
		if (!http_query_max_lag(query, query_len, &max_lag)) {
			answer_text(c, 400,
				    "bad request: max_lag must be a number of "
				    "entries, as in /health?max_lag=1000\n");
			return;
		}
		struct baton_buf body;
		baton_buf_init(&body);
		bool ok = metrics_health(s, max_lag, !ready, &body);
		if (ok)
			answer_text(c, 200, "ok\n");
		else
			answer(c, 503, "text/plain; charset=utf-8",
			       (const char *)body.data, body.len);
		baton_buf_free(&body);
		return;
	}
	answer_text(c, 404,
		    "not found: this port serves /metrics, /health and "
		    "/ready\n");
}

/* The request line and headers are in c->in[0, head_len). */
static void handle(struct http_conn *c, size_t head_len)
{
	struct http_request req;
	int code = http_request_parse(c->in, head_len, &req);
	if (code != 200) {
		answer_text(c, code, req.why);
		return;
	}
	serve(c, req.path, req.path_len, req.query, req.query_len);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
	struct http_conn *c = handle->data;
	(void)suggested;
	if (c->answered) {
		/* Draining before the close: reuse the whole buffer. */
		*buf = uv_buf_init(c->in, sizeof c->in);
		return;
	}
	*buf = uv_buf_init(c->in + c->len, (unsigned)(sizeof c->in - c->len));
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
	struct http_conn *c = stream->data;
	(void)buf;
	if (n < 0) {
		conn_close(c);
		return;
	}
	if (c->answered || n == 0)
		return;
	size_t scan_from = c->len > 2 ? c->len - 2 : 0;
	c->len += (size_t)n;
	size_t head_len = http_head_end(c->in + scan_from, c->len - scan_from);
	if (head_len != 0) {
		handle(c, scan_from + head_len);
		return;
	}
	if (c->len == sizeof c->in)
		answer_text(c, 431,
			    "request header fields too large: at most 8192 "
			    "bytes\n");
}

/* The peer's address as a key: its address bytes, without the port. */
static uint64_t source_of(uv_tcp_t *tcp)
{
	struct sockaddr_storage ss;
	int len = sizeof ss;
	if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) != 0)
		return 0; /* unknown peers share one key */
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		return http_source_key((const uint8_t *)&a->sin_addr,
				       sizeof a->sin_addr);
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		return http_source_key((const uint8_t *)&a->sin6_addr,
				       sizeof a->sin6_addr);
	}
	return 0;
}

/* Make room for c, the newest connection (the list's tail), closing a
 * half-sent one if need be (http_admit): false when c must go. */
static bool admit(struct http *h, struct http_conn *c)
{
	BATON_ASSERT(h->conns_tail == c && h->n_conns >= 1);
	struct http_admit_conn view[HTTP_CONNS_MAX + 1];
	struct http_conn *who[HTTP_CONNS_MAX + 1];
	size_t n = 0;
	for (struct http_conn *o = h->conns; o != c; o = o->next) {
		BATON_ASSERT(n < HTTP_CONNS_MAX);
		view[n] = (struct http_admit_conn){o->source, o->answered};
		who[n++] = o;
	}
	c->source = source_of(&c->tcp);
	size_t v = http_admit(view, n, c->source, HTTP_CONNS_MAX,
			      HTTP_CONNS_PER_SOURCE_MAX);
	if (v == HTTP_ADMIT_REFUSE) {
		h->refused_conns++;
		return false;
	}
	if (v != HTTP_ADMIT_ACCEPT) {
		BATON_ASSERT(v < n && !who[v]->answered);
		h->evicted_conns++;
		conn_close(who[v]);
	}
	BATON_ASSERT(h->n_conns <= HTTP_CONNS_MAX);
	return true;
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct http *h = listener->data;
	if (status != 0)
		return;
	struct http_conn *c = calloc(1, sizeof *c);
	if (c == NULL)
		return;
	c->h = h;
	baton_buf_init(&c->out);
	uv_tcp_init(listener->loop, &c->tcp);
	uv_timer_init(listener->loop, &c->timer);
	c->tcp.data = c->timer.data = c;
	c->handles_open = 2;
	c->prev = h->conns_tail;
	if (h->conns_tail != NULL)
		h->conns_tail->next = c;
	else
		h->conns = c;
	h->conns_tail = c;
	h->n_conns++;
	if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 || !admit(h, c)) {
		conn_close(c);
		return;
	}
	uv_timer_start(&c->timer, on_timer, HTTP_DEADLINE_MS, 0);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
		conn_close(c);
}

int http_start(struct server *s)
{
	if (s->cfg.metrics[0] == '\0')
		return 0;
	struct sockaddr_storage sa;
	char why[BATON_ADDR_WHY_MAX];
	if (baton_addr_resolve(s->cfg.metrics, &sa, why, sizeof why) != 0) {
		LOG_ERROR("cannot listen for metrics: %s", why);
		return BATON_EINVAL;
	}
	struct http *h = calloc(1, sizeof *h);
	if (h == NULL || metrics_init(s) != 0) {
		free(h);
		return BATON_ENOMEM;
	}
	h->s = s;
	uv_tcp_init(s->loop, &h->listener);
	h->listener.data = h;
	s->http = h;
	int rv = uv_tcp_bind(&h->listener, (struct sockaddr *)&sa, 0);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)&h->listener, 128, on_connection);
	if (rv != 0) {
		LOG_ERROR("cannot listen for metrics on %s: %s", s->cfg.metrics,
			  uv_strerror(rv));
		http_stop(s);
		return BATON_EIO;
	}
	LOG_INFO("serving /metrics, /health and /ready on %s", s->cfg.metrics);
	return 0;
}

static void on_listener_closed(uv_handle_t *handle)
{
	free(handle->data);
}

void http_stop(struct server *s)
{
	struct http *h = s->http;
	if (h == NULL)
		return;
	s->http = NULL;
	while (h->conns != NULL)
		conn_close(h->conns);
	uv_close((uv_handle_t *)&h->listener, on_listener_closed);
}

void http_stats(struct server *s, struct http_stats *out)
{
	memset(out, 0, sizeof *out);
	struct http *h = s->http;
	if (h == NULL)
		return;
	out->open = h->n_conns;
	out->evicted = h->evicted_conns;
	out->deadline_closed = h->deadline_conns;
	out->refused = h->refused_conns;
}
