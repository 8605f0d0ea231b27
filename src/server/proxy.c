/*
 * A client's commands answered by another cluster's node (docs/relay.md,
 * "Serve both sides"; docs/batond.md, "Answering from another cluster"):
 * during a migration, migration.c decides that a command goes to a node of
 * the other cluster; it is sent there over RESP, which every release
 * speaks, and the reply is passed back byte for byte.
 *
 * Each client connection has its own upstream connection (one at a time),
 * opened on its first proxied command. During a migration the node
 * reached must first prove that it holds the migration secret, at the
 * address dialled (BATON.MIGRATION.PROVE with a fresh nonce): a stranger
 * registered at the relay under the other cluster's name never gets the
 * password. Then AUTH with this node's --password if one is set, then
 * BATON.PROXIED, whose replies are awaited before any command is
 * written, so a refusal there has sent nothing (proxy_greeting.c). The
 * commands of one connection are written in order on that one connection
 * and their replies come back in order (the reply scanner of
 * src/wire/resp_reply.c says where each ends). A command for another address
 * waits in the same queue until the replies in flight on the current upstream
 * are back, then the upstream is replaced; so effects keep the connection's
 * order.
 *
 * Re-entrancy: answering a slot (slot_done) may run the client's next
 * commands, which may call proxy_command, or close the client, which
 * calls proxy_client_closed. So every entry point first brings the state
 * to rest, collecting the commands it answers in a list, and calls
 * slot_done on them last (complete()), touching nothing of the proxy's
 * afterwards.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "address_uv.h"
#include "baton/assert.h"
#include "log.h"
#include "proxy_internal.h"
#include "server.h"

/* How often an upstream checks its deadlines. */
#define PROXY_TICK_MS 250u
/* Room read from an upstream at once. */
#define PROXY_READ_CHUNK_BYTES ((size_t)64 << 10)
/* An input buffer grown past this is released once empty. */
#define PROXY_IDLE_BUF_BYTES ((size_t)1 << 20)

struct upstream_write {
	uv_write_t req;
	struct upstream *up;
	struct baton_buf buf;
};

static struct baton_log_limit limit_unreachable, limit_lost;

static void queue_push(struct cmd_queue *q, struct proxy_cmd *c)
{
	c->next = NULL;
	if (q->tail != NULL)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	q->n++;
}

static struct proxy_cmd *queue_pop(struct cmd_queue *q)
{
	struct proxy_cmd *c = q->head;
	if (c == NULL)
		return NULL;
	BATON_ASSERT(q->n > 0);
	q->head = c->next;
	if (q->head == NULL)
		q->tail = NULL;
	q->n--;
	c->next = NULL;
	return c;
}

/* Put the commands of `front` before those of q, in their order. */
static void queue_prepend(struct cmd_queue *q, struct cmd_queue *front)
{
	if (front->head == NULL)
		return;
	front->tail->next = q->head;
	if (q->tail == NULL)
		q->tail = front->tail;
	q->head = front->head;
	q->n += front->n;
	*front = (struct cmd_queue){0};
}

static void cmd_free(struct proxy_cmd *c)
{
	baton_buf_free(&c->request);
	free(c);
}

/* Fill the slot with an error; it is answered by complete(). */
static void cmd_fail(struct server *s, struct cmd_queue *done,
		     struct proxy_cmd *c, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void cmd_fail(struct server *s, struct cmd_queue *done,
		     struct proxy_cmd *c, const char *fmt, ...)
{
	char text[RESP_ERROR_BYTES_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	struct baton_buf *b = slot_buf(c->sl);
	baton_buf_reset(b);
	resp_error(b, "%s", text);
	s->proxy.errors++;
	queue_push(done, c);
}

/* Answer every command of the list: the last thing an entry point does
 * (see the top). */
static void complete(struct cmd_queue *done)
{
	struct proxy_cmd *c;
	while ((c = queue_pop(done)) != NULL) {
		struct slot *sl = c->sl;
		cmd_free(c);
		slot_done(sl);
	}
}

/* ---- upstream connections ------------------------------------------------ */

static void pump(struct proxy_client *pc, struct cmd_queue *done);

static void on_handle_closed(uv_handle_t *h)
{
	struct upstream *up = h->data;
	BATON_ASSERT(up->handles_open > 0);
	if (--up->handles_open > 0)
		return;
	BATON_ASSERT(up->sent.head == NULL);
	baton_buf_free(&up->in);
	free(up);
}

/* Close the connection; its commands must have been taken off it. */
static void upstream_close(struct upstream *up)
{
	if (up->state == UP_CLOSED)
		return;
	BATON_ASSERT(up->sent.head == NULL);
	up->state = UP_CLOSED;
	BATON_ASSERT(up->s->proxy.upstreams_open > 0);
	up->s->proxy.upstreams_open--;
	if (up->pc != NULL && up->pc->up == up)
		up->pc->up = NULL;
	up->pc = NULL;
	if (up->connecting != NULL) {
		baton_addr_connect_cancel(up->connecting);
		up->connecting = NULL;
	}
	uv_timer_stop(&up->timer);
	uv_close((uv_handle_t *)&up->timer, on_handle_closed);
	uv_close((uv_handle_t *)&up->tcp, on_handle_closed);
}

/* The connection could not be made or handshaken: nothing was written.
 * The commands waiting for it fail, to be retried. The caller pumps. */
static void upstream_unreachable(struct upstream *up, struct cmd_queue *done,
				 const char *why)
{
	struct proxy_client *pc = up->pc;
	BATON_ASSERT(up->state != UP_OPEN && up->sent.head == NULL);
	struct server *s = up->s;
	uint32_t k = s->proxy.unreachable_next++ % PROXY_UNREACHABLE_KEPT;
	snprintf(s->proxy.unreachable[k], sizeof s->proxy.unreachable[k], "%s",
		 up->addr);
	s->proxy.unreachable_ms[k] = uv_now(s->loop);
	baton_log_limited(&limit_unreachable, BATON_LOG_WARN,
			  "proxy: could not reach the other cluster's node at "
			  "%s: %s",
			  up->addr, why);
	while (pc != NULL && pc->waiting.head != NULL &&
	       strcmp(pc->waiting.head->addr, up->addr) == 0)
		cmd_fail(up->s, done, queue_pop(&pc->waiting),
			 "TRYAGAIN could not reach the other cluster's node "
			 "at %s: %s; retry",
			 up->addr, why);
	upstream_close(up);
}

/* The connection ended with commands in flight (lost, a bad reply, a
 * timeout): each fails with `error`, except that reads alone in flight
 * are sent once more (on a new connection) when it was lost. The caller
 * pumps. */
static void upstream_failed(struct upstream *up, struct cmd_queue *done,
			    bool resend_reads, const char *why,
			    const char *error)
{
	struct proxy_client *pc = up->pc;
	if (up->state != UP_OPEN) {
		upstream_unreachable(up, done, why);
		return;
	}
	baton_log_limited(&limit_lost, BATON_LOG_WARN,
			  "proxy: the connection to the other cluster's node "
			  "at %s ended with %" PRIu32 " commands in flight: %s",
			  up->addr, up->sent.n, why);
	bool resend = resend_reads && pc != NULL;
	for (struct proxy_cmd *c = up->sent.head; resend && c != NULL;
	     c = c->next)
		resend = c->read && !c->resent;
	if (resend) {
		for (struct proxy_cmd *c = up->sent.head; c != NULL;
		     c = c->next)
			c->resent = true;
		queue_prepend(&pc->waiting, &up->sent);
	}
	struct proxy_cmd *c;
	while ((c = queue_pop(&up->sent)) != NULL)
		cmd_fail(up->s, done, c, "%s", error);
	upstream_close(up);
}

static void upstream_lost(struct upstream *up, struct cmd_queue *done,
			  const char *why)
{
	char error[BATON_ADDR_MAX + 128];
	snprintf(error, sizeof error,
		 "ERR the other cluster's node at %s closed the connection; "
		 "the outcome is unknown",
		 up->addr);
	upstream_failed(up, done, true, why, error);
}

/* The end of every entry point (see the top): pc (NULL: none) gets its
 * next commands moving, then the answered ones are answered. */
static void finish(struct proxy_client *pc, struct cmd_queue *done)
{
	if (pc != NULL)
		pump(pc, done);
	complete(done);
}

static void on_written(uv_write_t *req, int status)
{
	struct upstream_write *w = (struct upstream_write *)req;
	struct upstream *up = w->up;
	baton_buf_free(&w->buf);
	free(w);
	if (status == 0 || up->state == UP_CLOSED)
		return;
	struct proxy_client *pc = up->pc;
	struct cmd_queue done = {0};
	char why[128];
	snprintf(why, sizeof why, "writing failed: %s", uv_strerror(status));
	upstream_lost(up, &done, why);
	finish(pc, &done);
}

int proxy__upstream_write(struct upstream *up, struct baton_buf *buf)
{
	struct upstream_write *w = calloc(1, sizeof *w);
	if (w == NULL)
		return UV_ENOMEM;
	w->up = up;
	w->buf = *buf;
	baton_buf_init(buf);
	uv_buf_t b = uv_buf_init((char *)w->buf.data, (unsigned)w->buf.len);
	int rv = uv_write(&w->req, (uv_stream_t *)&up->tcp, &b, 1, on_written);
	if (rv != 0) {
		baton_buf_free(&w->buf);
		free(w);
	}
	return rv;
}

/* One whole reply of n bytes at r. false: the upstream was closed. */
static bool on_reply(struct upstream *up, struct cmd_queue *done,
		     const uint8_t *r, size_t n)
{
	if (up->state == UP_PROVE || up->state == UP_HANDSHAKE) {
		char why[512];
		if (!proxy__greeting_reply(up, r, n, why, sizeof why)) {
			upstream_unreachable(up, done, why);
			return false;
		}
		return true;
	}
	struct proxy_cmd *c = queue_pop(&up->sent);
	if (c == NULL) {
		char error[BATON_ADDR_MAX + 128];
		snprintf(error, sizeof error,
			 "ERR the other cluster's node at %s sent a reply to "
			 "no command; the outcome is unknown",
			 up->addr);
		upstream_failed(up, done, false, "a reply to no command",
				error);
		return false;
	}
	struct baton_buf *b = slot_buf(c->sl);
	baton_buf_reset(b);
	if (baton_buf_append(b, r, n) != 0) {
		resp_error(b,
			   "ERR out of memory for a reply of %zu bytes from "
			   "the other cluster's node; the outcome is unknown",
			   n);
		up->s->proxy.errors++;
	}
	queue_push(done, c);
	return true;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct upstream *up = h->data;
	(void)suggested;
	if (baton_buf_reserve(&up->in, PROXY_READ_CHUNK_BYTES) != 0) {
		*buf = uv_buf_init(NULL, 0); /* the read gets UV_ENOBUFS */
		return;
	}
	*buf = uv_buf_init((char *)up->in.data + up->in.len,
			   (unsigned)(up->in.cap - up->in.len));
}

/* Drop the bytes passed on, cheaply: move the rest down only once it is
 * at most half of what the buffer holds. */
static void compact_input(struct upstream *up)
{
	struct baton_buf *in = &up->in;
	BATON_ASSERT(up->in_start <= in->len);
	if (up->in_start == in->len) {
		in->len = 0;
		up->in_start = 0;
		if (in->cap > PROXY_IDLE_BUF_BYTES)
			baton_buf_free(in);
	} else if (up->in_start >= in->len - up->in_start) {
		memmove(in->data, in->data + up->in_start,
			in->len - up->in_start);
		in->len -= up->in_start;
		up->in_start = 0;
	}
}

/* Pass on every whole reply read so far. */
static void take_replies(struct upstream *up, struct cmd_queue *done)
{
	for (;;) {
		size_t n = 0;
		int rv = resp_reply_scan(&up->scanner,
					 up->in.data + up->in_start,
					 up->in.len - up->in_start, &n);
		if (rv == RESP_NEED_MORE)
			break;
		if (rv != RESP_OK) {
			char why[256], error[BATON_ADDR_MAX + 160];
			snprintf(why, sizeof why, "a bad reply: %s",
				 resp_reply_scanner_error(&up->scanner));
			snprintf(error, sizeof error,
				 "ERR the other cluster's node at %s sent a "
				 "reply this node cannot pass on (malformed, "
				 "or above %zu bytes); the outcome is unknown",
				 up->addr, PROXY_REPLY_MAX);
			upstream_failed(up, done, false, why, error);
			return;
		}
		const uint8_t *r = up->in.data + up->in_start;
		up->in_start += n;
		if (!on_reply(up, done, r, n))
			return;
	}
	compact_input(up);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct upstream *up = stream->data;
	(void)buf;
	if (up->state == UP_CLOSED || nread == 0)
		return;
	struct proxy_client *pc = up->pc;
	struct cmd_queue done = {0};
	if (nread < 0) {
		upstream_lost(up, &done,
			      nread == UV_EOF ? "it closed the connection"
					      : uv_strerror((int)nread));
	} else {
		up->in.len += (size_t)nread;
		BATON_ASSERT(up->in.len <= up->in.cap);
		take_replies(up, &done);
	}
	finish(pc, &done);
}

static void on_connect(void *data, int status)
{
	struct upstream *up = data;
	up->connecting = NULL;
	BATON_ASSERT(up->state == UP_CONNECTING);
	struct proxy_client *pc = up->pc;
	struct cmd_queue done = {0};
	int rv = status;
	char why[256] = "";
	if (rv == 0) {
		uv_tcp_nodelay(&up->tcp, 1);
		rv = uv_read_start((uv_stream_t *)&up->tcp, on_alloc, on_read);
	}
	if (rv == 0)
		rv = proxy__greeting_start(up, why, sizeof why);
	if (rv != 0) {
		if (why[0] == '\0')
			snprintf(why, sizeof why, "%s", uv_strerror(rv));
		upstream_unreachable(up, &done, why);
	}
	finish(pc, &done);
}

static void on_tick(uv_timer_t *t)
{
	struct upstream *up = t->data;
	if (up->state == UP_CLOSED)
		return;
	struct proxy_client *pc = up->pc;
	uint64_t now = uv_now(up->s->loop);
	struct cmd_queue done = {0};
	if (up->state != UP_OPEN && now >= up->open_deadline_ms) {
		char why[128];
		snprintf(why, sizeof why,
			 "no connection and handshake within %u ms",
			 PROXY_TIMEOUT_MS);
		upstream_unreachable(up, &done, why);
	} else if (up->state == UP_OPEN && up->sent.head != NULL &&
		   now >= up->sent.head->deadline_ms) {
		char error[BATON_ADDR_MAX + 128];
		snprintf(error, sizeof error,
			 "ERR the other cluster's node at %s did not answer "
			 "within %u ms; the outcome is unknown",
			 up->addr, PROXY_TIMEOUT_MS);
		upstream_failed(up, &done, false, "a reply timed out", error);
	}
	finish(pc, &done);
}

/* A new upstream to the head command's address, connecting. If it cannot
 * even start, the commands for that address fail into done. */
static void upstream_open(struct proxy_client *pc, struct cmd_queue *done)
{
	struct server *s = pc->s;
	const char *addr = pc->waiting.head->addr;
	BATON_ASSERT(pc->up == NULL);
	struct upstream *up = calloc(1, sizeof *up);
	if (up == NULL) {
		cmd_fail(s, done, queue_pop(&pc->waiting),
			 "TRYAGAIN could not reach the other cluster's node "
			 "at %s: out of memory; retry",
			 addr);
		return;
	}
	up->s = s;
	up->pc = pc;
	snprintf(up->addr, sizeof up->addr, "%s", addr);
	struct resp_reply_limits limits = {
		.reply_bytes_max = PROXY_REPLY_MAX,
		.line_bytes_max = RESP_REPLY_LINE_BYTES_MAX_DEFAULT,
		.depth_max = RESP_REPLY_DEPTH_MAX,
	};
	resp_reply_scanner_init(&up->scanner, &limits);
	baton_buf_init(&up->in);
	uv_tcp_init(s->loop, &up->tcp);
	uv_timer_init(s->loop, &up->timer);
	up->tcp.data = up;
	up->timer.data = up;
	up->handles_open = 2;
	up->state = UP_CONNECTING;
	up->open_deadline_ms = uv_now(s->loop) + PROXY_TIMEOUT_MS;
	s->proxy.upstreams_open++;
	pc->up = up;
	uv_timer_start(&up->timer, on_tick, PROXY_TICK_MS, PROXY_TICK_MS);
	/* A name is resolved on every connection: the other cluster's
	 * node may have moved. */
	int rv = baton_addr_connect(s->loop, &up->tcp, addr, on_connect, up,
				    &up->connecting);
	if (rv != 0)
		upstream_unreachable(up, done, uv_strerror(rv));
}

/* One round of pump(): true if another is needed (a write failed). */
static bool pump_once(struct proxy_client *pc, struct cmd_queue *done)
{
	struct server *s = pc->s;
	struct baton_buf batch;
	baton_buf_init(&batch);
	while (pc->waiting.head != NULL) {
		struct proxy_cmd *c = pc->waiting.head;
		struct upstream *up = pc->up;
		if (up != NULL && strcmp(up->addr, c->addr) != 0) {
			if (up->sent.head != NULL)
				break; /* its replies come first */
			upstream_close(up);
			continue;
		}
		if (up == NULL) {
			upstream_open(pc, done);
			continue;
		}
		if (up->state != UP_OPEN)
			break; /* written once it is */
		if (baton_buf_append(&batch, c->request.data, c->request.len) !=
		    0)
			break; /* the rest goes at the next pump */
		queue_pop(&pc->waiting);
		if (!c->read)
			baton_buf_free(&c->request); /* never resent */
		c->deadline_ms = uv_now(s->loop) + PROXY_TIMEOUT_MS;
		queue_push(&up->sent, c);
	}
	if (batch.len == 0)
		return false;
	struct upstream *up = pc->up;
	BATON_ASSERT(up != NULL && up->state == UP_OPEN);
	int rv = proxy__upstream_write(up, &batch);
	baton_buf_free(&batch);
	if (rv == 0)
		return false;
	char why[128];
	snprintf(why, sizeof why, "writing failed: %s", uv_strerror(rv));
	upstream_lost(up, done, why);
	return true;
}

/* Move what can go from pc's waiting queue onto its upstream, opening
 * and replacing upstreams as the addresses ask. */
static void pump(struct proxy_client *pc, struct cmd_queue *done)
{
	while (pump_once(pc, done))
		;
}

/* ---- the API ------------------------------------------------------------- */

/* Fill the slot with an error and answer it now (nothing is queued). */
static void refuse(struct server *s, struct slot *sl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct server *s, struct slot *sl, const char *fmt, ...)
{
	char text[RESP_ERROR_BYTES_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	resp_error(slot_buf(sl), "%s", text);
	s->proxy.errors++;
	slot_done(sl);
}

/* Is the command a read (kv's), which may be sent twice? */
static bool is_read(const uint8_t *name, size_t len)
{
	const struct kv_command *kc = kv_lookup(name, len);
	return kc != NULL && (kc->flags & KV_READ) && !(kc->flags & KV_WRITE);
}

void proxy_command(struct server *s, struct client_state *cs, struct slot *sl,
		   const char *addr, int argc, const uint8_t *const *argv,
		   const size_t *lens)
{
	BATON_ASSERT(argc >= 1);
	s->proxy.commands++;
	char why[BATON_ADDR_WHY_MAX];
	if (cs->proxied) {
		refuse(s, sl,
		       "ERR this connection is another node's proxy "
		       "(BATON.PROXIED): its commands are never proxied "
		       "again");
		return;
	}
	if (baton_parse_addr(addr, why, sizeof why) != 0) {
		refuse(s, sl,
		       "ERR the other cluster's node's address '%.64s' is not "
		       "HOST:PORT: %s",
		       addr, why);
		return;
	}
	struct proxy_client *pc = cs->proxy;
	if (pc == NULL) {
		pc = calloc(1, sizeof *pc);
		if (pc == NULL) {
			slot_error(sl, BATON_ENOMEM);
			return;
		}
		pc->s = s;
		cs->proxy = pc;
	}
	uint32_t queued = pc->waiting.n + (pc->up ? pc->up->sent.n : 0);
	if (queued >= PROXY_INFLIGHT_MAX) {
		refuse(s, sl,
		       "TRYAGAIN %" PRIu32 " commands of this connection wait "
		       "for the other cluster's node at %s, the most a "
		       "connection may have in flight there; retry",
		       queued, addr);
		return;
	}
	struct proxy_cmd *c = calloc(1, sizeof *c);
	int rv = c != NULL ? resp_array(&c->request, (size_t)argc)
			   : BATON_ENOMEM;
	for (int i = 0; rv == 0 && i < argc; i++)
		rv = resp_bulk(&c->request, argv[i], lens[i]);
	if (rv != 0) {
		if (c != NULL)
			cmd_free(c);
		slot_error(sl, BATON_ENOMEM);
		return;
	}
	c->sl = sl;
	snprintf(c->addr, sizeof c->addr, "%s", addr);
	c->read = is_read(argv[0], lens[0]);
	queue_push(&pc->waiting, c);
	if (cs->proxy_batching)
		return; /* written by proxy_client_flush() */
	struct cmd_queue done = {0};
	finish(pc, &done);
}

void proxy_client_flush(struct client_state *cs)
{
	struct proxy_client *pc = cs->proxy;
	BATON_ASSERT(!cs->proxy_batching);
	if (pc == NULL || pc->waiting.head == NULL)
		return;
	struct cmd_queue done = {0};
	finish(pc, &done);
}

void proxy_client_closed(struct client_state *cs)
{
	struct proxy_client *pc = cs->proxy;
	if (pc == NULL)
		return;
	cs->proxy = NULL;
	struct cmd_queue done = {0};
	struct proxy_cmd *c;
	while ((c = queue_pop(&pc->waiting)) != NULL)
		queue_push(&done, c);
	if (pc->up != NULL) {
		struct upstream *up = pc->up;
		while ((c = queue_pop(&up->sent)) != NULL)
			queue_push(&done, c);
		upstream_close(up);
	}
	BATON_ASSERT(pc->up == NULL);
	free(pc);
	/* Nobody reads these replies: the slots are only done. */
	complete(&done);
}

void proxy_stats(const struct server *s, struct proxy_stats *out)
{
	out->commands = s->proxy.commands;
	out->errors = s->proxy.errors;
	out->upstreams_open = s->proxy.upstreams_open;
}

bool proxy_unreachable(const struct server *s, const char *addr,
		       uint64_t within_ms)
{
	uint64_t now = uv_now(s->loop);
	for (uint32_t k = 0; k < PROXY_UNREACHABLE_KEPT; k++)
		if (s->proxy.unreachable_ms[k] != 0 &&
		    now - s->proxy.unreachable_ms[k] <= within_ms &&
		    strcmp(s->proxy.unreachable[k], addr) == 0)
			return true;
	return false;
}

bool proxy_is_proxied(const struct client_state *cs)
{
	return cs->proxied;
}

int proxy_cmd_proxied(struct command_ctx *x)
{
	if (x->argc != 1)
		return command_wrong_args(x);
	x->cs->proxied = true;
	resp_simple(command_out(x), "OK");
	return command_done(x);
}

#if BATON_TEST_HOOKS
int proxy_cmd_test_proxy(struct command_ctx *x)
{
	if (x->argc < 3)
		return command_wrong_args(x);
	char addr[BATON_ADDR_MAX];
	if (x->lens[1] >= sizeof addr) {
		resp_error(command_out(x), "ERR address too long");
		return command_done(x);
	}
	command_arg_str(x, 1, addr, sizeof addr);
	proxy_command(x->s, x->cs, x->sl, addr, x->argc - 2, x->argv + 2,
		      x->lens + 2);
	return 0;
}
#endif
