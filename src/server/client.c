/*
 * Client connections. Bytes go through the RESP parser; each command gets a
 * reply slot in a per-client queue, filled at once (PING, errors) or later
 * (writes once committed, reads after the read index). Slots leave in
 * request order, so pipelined commands get their replies in order however
 * they complete (the slots and their writes: client_reply.c). A client
 * that disconnects with commands in flight is freed when the last of them
 * completes.
 *
 * Order (Redis's): the commands of one connection take effect in the order
 * sent. Writes go to the log in order and reads share read indexes, so
 * writes may pipeline with writes and reads with reads; but a read waits
 * until the connection's writes in flight are done (applied on the leader,
 * so a read index taken after them covers them), and a write until its
 * reads in flight are served. KEYS on a big map may see the data later
 * than reads after it (its view begins when the map's one view is free,
 * keys.c), so every command that touches data waits until it is
 * answered. The command that must wait stays parsed in
 * the parser, which is not fed meanwhile: reading from the socket stops
 * until it runs, so a waiting connection holds at most one request.
 *
 * Limits (docs/batond.md, "Limits"): the parser refuses a bulk or a
 * request above its limit at the header; replies queued unread are capped
 * per client and over all clients (the biggest slow reader is cut off);
 * idle clients may be closed. A connection ending on an error gets its
 * replies, then a FIN; what it still sends is read and dropped for at
 * most CLIENT_LINGER_MS, so that the client reads the error rather than
 * a reset.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "address.h"
#include "baton/assert.h"
#include "client_internal.h"
#include "log.h"

/* Warnings a client can cause at will: one line a second each. */
static struct baton_log_limit limit_refused, limit_protocol, limit_idle;

void client_maybe_free(struct client *c)
{
	if (!c->handle_closed || c->in_flight > 0 || c->head != NULL)
		return;
	txn_free(&c->st);
	resp_parser_free(&c->parser);
	free(c);
}

static void on_client_closed(uv_handle_t *h)
{
	struct client *c = h->data;
	struct server *s = c->s;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		s->clients = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	s->n_clients--;
	c->handle_closed = true;
	/* Drop finished replies; unfinished ones free themselves. */
	while (c->head != NULL && c->head->done) {
		struct slot *sl = c->head;
		c->head = sl->next;
		client_slot_free(sl);
	}
	client_maybe_free(c);
}

void client_close(struct client *c)
{
	if (c->closing)
		return;
	c->closing = true;
	client_due_remove(c);
	client_registry_remove(c->s, &c->st);
	c->has_waiting = false; /* never to run */
	/* Its proxied commands are dropped now, or the client could not be
	 * freed before their replies come. */
	proxy_client_closed(&c->st);
	/* Its queued output no longer counts: libuv cancels it. */
	BATON_ASSERT(c->s->output_bytes >= c->output_queued);
	c->s->output_bytes -= c->output_queued;
	uv_close((uv_handle_t *)&c->tcp, on_client_closed);
}

/* Read from the socket only while there is nothing waiting to run and the
 * connection is not ending. */
static void update_reading(struct client *c);

/* Every client reads into the server's one buffer: a read's bytes go to
 * the parser (or are dropped) before the next read. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct client *c = h->data;
	struct server *s = c->s;
	if (!s->client_io.read_buf_lent) {
		s->client_io.read_buf_lent = true;
		*buf = uv_buf_init((char *)s->client_io.read_buf,
				   sizeof s->client_io.read_buf);
		return;
	}
	buf->base = malloc(suggested); /* never seen: reads do not nest */
	buf->len = buf->base != NULL ? suggested : 0;
}

static void read_buf_release(struct client *c, const uv_buf_t *buf)
{
	struct server *s = c->s;
	if (buf->base == (char *)s->client_io.read_buf) {
		BATON_ASSERT(s->client_io.read_buf_lent);
		s->client_io.read_buf_lent = false;
	} else {
		free(buf->base);
	}
}

/* After the FIN: drop what the client still sends until it closes. */
static void on_drain(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct client *c = stream->data;
	read_buf_release(c, buf);
	if (nread < 0)
		client_close(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	struct client *c = req->data;
	if (c->closing)
		return;
	if (status != 0 ||
	    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_drain) != 0) {
		client_close(c);
		return;
	}
	c->reading = true;
	c->shut = true;
	c->linger_until_ms = uv_now(c->s->loop) + CLIENT_LINGER_MS;
}

/* Every reply is written: send the FIN after them (uv_shutdown waits for
 * the writes queued), then drain. */
void client_hang_up(struct client *c)
{
	if (c->closing || c->fin_queued)
		return;
	c->fin_queued = true;
	if (c->reading) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
	c->shutdown.data = c;
	if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0)
		client_close(c);
}

static struct client *client_of(const struct client_state *cs)
{
	return (struct client *)((char *)cs - offsetof(struct client, st));
}

void client_kill(struct client_state *cs)
{
	struct client *c = client_of(cs);
	BATON_ASSERT(&c->st == cs);
	client_registry_remove(c->s, cs);
	if (c->closing)
		return;
	/* As after QUIT: the replies owed go out (CLIENT KILL's own, when a
	 * connection kills itself), then the FIN. */
	c->hangup = true;
	update_reading(c);
	if (c->head == NULL)
		client_hang_up(c);
}

size_t client_output_queued(const struct client_state *cs)
{
	return client_of(cs)->output_queued;
}

/* The parser's error as the client reads it: a broken size limit names
 * the flag that sets it. */
static void protocol_error_text(struct client *c, struct baton_buf *b)
{
	const struct server_config *cfg = &c->s->cfg;
	uint64_t size = resp_parser_error_size(&c->parser);
	switch (resp_parser_error_kind(&c->parser)) {
	case RESP_PERR_BULK_TOO_BIG:
		resp_error(b,
			   "ERR bulk of %" PRIu64
			   " bytes exceeds --max-bulk-bytes %" PRIu64
			   "; closing the connection",
			   size, cfg->max_bulk_bytes);
		break;
	case RESP_PERR_REQUEST_TOO_BIG:
		resp_error(b,
			   "ERR request of at least %" PRIu64
			   " bytes exceeds --max-request-bytes %" PRIu64
			   "; closing the connection",
			   size, cfg->max_request_bytes);
		break;
	default:
		resp_error(b, "ERR %s", resp_parser_error(&c->parser));
	}
}

/* Like Redis: say why, then hang up. */
static void protocol_error(struct client *c)
{
	struct server *s = c->s;
	s->stats.protocol_errors++;
	struct slot *sl = client_slot_new(c, ORDER_ANY);
	if (sl == NULL) {
		client_close(c);
		return;
	}
	protocol_error_text(c, &sl->buf);
	/* The text without its leading '-' and trailing CRLF. */
	baton_log_limited(&limit_protocol, BATON_LOG_WARN, "client %s: %.*s",
			  c->addr, (int)(sl->buf.len > 3 ? sl->buf.len - 3 : 0),
			  (const char *)sl->buf.data + 1);
	c->hangup = true;
	slot_done(sl);
}

/* EXEC in RESP3: which queued commands Redis 7 answers with a map (their
 * replies in EXEC's array become maps too). Out of memory: none do. */
static void exec_maps(struct slot *sl, const struct client_state *cs,
		      const struct resp_command *cmd)
{
	BATON_ASSERT(sl->resp3_maps == NULL);
	static const char exec[] = "EXEC";
	if (cmd->lens[0] != sizeof exec - 1 ||
	    strncasecmp((const char *)cmd->argv[0], exec, sizeof exec - 1) != 0)
		return;
	uint32_t n = txn_queued(cs);
	bool *maps = n > 0 ? calloc(n, sizeof *maps) : NULL;
	bool any = false;
	for (uint32_t i = 0; maps != NULL && i < n; i++) {
		const uint8_t *name;
		size_t len;
		bool queued = txn_queued_name(cs, i, &name, &len);
		BATON_ASSERT(queued);
		maps[i] = command_resp3(cs, name, len) == RESP3_TOP_MAP;
		any = any || maps[i];
	}
	if (!any) {
		free(maps);
		return;
	}
	sl->resp3_maps = maps;
	sl->n_resp3_maps = n;
}

static void run(struct client *c, const struct resp_command *cmd,
		enum command_order order)
{
	struct slot *sl = client_slot_new(c, order);
	if (sl == NULL) {
		client_close(c);
		return;
	}
	if (cmd->argc == 0) { /* an empty inline line */
		slot_done(sl);
		return;
	}
	sl->resp3 = command_resp3(&c->st, cmd->argv[0], cmd->lens[0]);
	if (sl->resp3 != RESP3_AS_RESP2 && txn_in_multi(&c->st))
		exec_maps(sl, &c->st, cmd);
	c->s->stats.commands++;
	sl->metrics_slot =
		metrics_command_slot(c->s, cmd->argv[0], cmd->lens[0]);
	sl->kv_command = kv_lookup(cmd->argv[0], cmd->lens[0]) != NULL;
	sl->started_ns = uv_hrtime();
	command_dispatch(c->s, &c->st, sl, cmd->argc, cmd->argv, cmd->lens);
}

/* Must a command of this order wait for those in flight? */
static bool must_wait(const struct client *c, enum command_order order)
{
	bool read = order == ORDER_READ || order == ORDER_READ_ALONE;
	return (read && c->writes_in_flight > 0) ||
	       (order == ORDER_WRITE && c->reads_in_flight > 0) ||
	       (order != ORDER_ANY && c->alone_in_flight > 0);
}

/* Run the commands parsed from what the client sent, in order, until one
 * must wait or more bytes are needed. */
void client_process(struct client *c)
{
	if (c->processing)
		return; /* the loop below goes on */
	c->processing = true;
	/* Commands proxied to another cluster's node are written together
	 * once the loop is done, not one write each. */
	c->st.proxy_batching = true;
	while (!c->closing && !c->hangup && !c->st.quit) {
		struct resp_command cmd;
		if (c->has_waiting) {
			cmd = c->waiting;
		} else {
			int rv = resp_parser_next(&c->parser, &cmd);
			if (rv == RESP_NEED_MORE)
				break;
			if (rv != RESP_OK) {
				protocol_error(c);
				break;
			}
		}
		enum command_order order =
			command_order(&c->st, cmd.argc, cmd.argv, cmd.lens);
		if (must_wait(c, order)) {
			c->waiting = cmd;
			c->has_waiting = true;
			break;
		}
		c->has_waiting = false;
		run(c, &cmd, order);
	}
	c->st.proxy_batching = false;
	if (!c->closing && !c->has_waiting)
		resp_parser_consumed(&c->parser);
	update_reading(c);
	c->processing = false;
	/* Last: a reply it completes at once may run client_process() again,
	 * for the command left waiting. */
	proxy_client_flush(&c->st);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct client *c = stream->data;
	if (nread < 0) {
		read_buf_release(c, buf);
		client_close(c);
		return;
	}
	BATON_ASSERT(!c->has_waiting); /* reading stops while one waits */
	c->last_active_ms = uv_now(c->s->loop);
	int rv = resp_parser_feed(&c->parser, (const uint8_t *)buf->base,
				  (size_t)nread);
	read_buf_release(c, buf);
	/* A feed error (the query buffer limit) is the parser's sticky
	 * error: client_process() answers it. */
	(void)rv;
	client_process(c);
}

static void update_reading(struct client *c)
{
	if (c->closing)
		return;
	bool want = !c->closing && !c->has_waiting && !c->hangup &&
		    !c->st.quit && !c->shut;
	if (want && !c->reading) {
		if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) !=
		    0) {
			client_close(c);
			return;
		}
		c->reading = true;
	} else if (!want && c->reading && !c->shut) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
}

static void peer_text(uv_tcp_t *tcp, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	int len = (int)sizeof ss;
	if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) == 0)
		baton_sockaddr_text((struct sockaddr *)&ss, out, cap);
	else
		snprintf(out, cap, "?:0");
}

/* Over --max-clients (or shutting down): say so, then hang up. */
static void refuse(struct client *c)
{
	struct server *s = c->s;
	s->stats.rejected_clients++;
	if (!s->shutting_down)
		baton_log_limited(&limit_refused, BATON_LOG_WARN,
				  "refused client %s: --max-clients %u "
				  "reached",
				  c->addr, s->cfg.max_clients);
	struct slot *sl = client_slot_new(c, ORDER_ANY);
	if (sl == NULL) {
		client_close(c);
		return;
	}
	if (s->shutting_down)
		resp_error(&sl->buf, "TRYAGAIN server is shutting down; "
				     "retry on another node");
	else
		resp_error(&sl->buf,
			   "ERR max number of clients reached "
			   "(--max-clients %u)",
			   s->cfg.max_clients);
	c->hangup = true;
	slot_done(sl);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct server *s = server->data;
	if (status != 0)
		return;
	struct client *c = calloc(1, sizeof *c);
	if (c == NULL)
		return;
	c->s = s;
	uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	peer_text(&c->tcp, c->addr, sizeof c->addr);
	client_registry_add(s, &c->st, &c->tcp);
	struct resp_limits limits;
	resp_limits_default(&limits);
	limits.bulk_bytes_max = (size_t)s->cfg.max_bulk_bytes;
	limits.request_bytes_max = (size_t)s->cfg.max_request_bytes;
	/* The parser holds one request and the rest of one read (reading
	 * stops while a command waits): a safety net, never reached. */
	limits.query_bytes_max = (size_t)s->cfg.max_request_bytes + (1u << 20);
	resp_parser_init(&c->parser, &limits);
	c->st.authenticated = s->cfg.password[0] == '\0';
	c->last_active_ms = uv_now(s->loop);
	c->next = s->clients;
	if (s->clients != NULL)
		s->clients->prev = c;
	s->clients = c;
	s->n_clients++;
	s->stats.connections++;
	if (s->n_clients > s->cfg.max_clients || s->shutting_down) {
		refuse(c);
		return;
	}
	update_reading(c);
}

int clients_listen(struct server *s)
{
	/* Resolved once: a listening address does not move. */
	struct sockaddr_storage sa;
	char why[BATON_ADDR_WHY_MAX];
	if (baton_parse_addr(s->cfg.listen, why, sizeof why) != 0 ||
	    baton_addr_resolve(s->cfg.listen, &sa, why, sizeof why) != 0) {
		LOG_ERROR("cannot listen for clients: %s", why);
		return BATON_EINVAL;
	}
	uv_prepare_init(s->loop, &s->client_io.turn_end);
	s->client_io.turn_end.data = s;
	uv_tcp_init(s->loop, &s->listener);
	s->listener.data = s;
	int rv = uv_tcp_bind(&s->listener, (struct sockaddr *)&sa, 0);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
	if (rv != 0) {
		LOG_ERROR("cannot listen for clients on %s: %s", s->cfg.listen,
			  uv_strerror(rv));
		return BATON_EIO;
	}
	LOG_INFO("listening for clients on %s", s->cfg.listen);
	return 0;
}

void clients_close_all(struct server *s)
{
	if (!uv_is_closing((uv_handle_t *)&s->listener))
		uv_close((uv_handle_t *)&s->listener, NULL);
	for (struct client *c = s->clients; c != NULL; c = c->next)
		client_close(c);
	/* Nothing is written any more: slots finishing from now on are
	 * freed, not kept. */
	BATON_ASSERT(s->client_io.due == NULL);
	s->client_io.closed = true;
	if (!uv_is_closing((uv_handle_t *)&s->client_io.turn_end))
		uv_close((uv_handle_t *)&s->client_io.turn_end, NULL);
	while (s->client_io.spare != NULL) {
		struct slot *sl = s->client_io.spare;
		s->client_io.spare = sl->next;
		baton_buf_free(&sl->buf);
		free(sl);
	}
	s->client_io.n_spare = 0;
}

void clients_drain(struct server *s)
{
	if (!uv_is_closing((uv_handle_t *)&s->listener))
		uv_close((uv_handle_t *)&s->listener, NULL);
	for (struct client *c = s->clients; c != NULL; c = c->next) {
		if (c->closing)
			continue;
		/* As after QUIT: nothing more is read or run; the replies
		 * owed go out, then the FIN (flush() sends it once the last
		 * one is written). */
		c->hangup = true;
		update_reading(c);
		if (c->head == NULL)
			client_hang_up(c);
	}
}

bool clients_drained(const struct server *s)
{
	for (const struct client *c = s->clients; c != NULL; c = c->next)
		if (!c->closing && c->in_flight > 0)
			return false;
	return true;
}

/* Nothing in flight, nothing read or written for the timeout. */
static bool is_idle(const struct client *c, uint64_t now, uint64_t idle_ms)
{
	return idle_ms > 0 && c->in_flight == 0 && c->output_queued == 0 &&
	       !c->hangup && now - c->last_active_ms >= idle_ms;
}

void clients_housekeeping(struct server *s)
{
	uint64_t now = uv_now(s->loop);
	uint64_t idle_ms = (uint64_t)s->cfg.client_idle_timeout_s * 1000u;
	struct client *next;
	for (struct client *c = s->clients; c != NULL; c = next) {
		next = c->next; /* c is unlinked only once its handle closed */
		if (c->closing)
			continue;
		if (c->shut && now >= c->linger_until_ms) {
			client_close(c);
		} else if (c->fin_queued && !c->shut &&
			   now - c->last_active_ms >= CLIENT_HANGUP_STALL_MS) {
			client_close(c);
		} else if (!c->shut && is_idle(c, now, idle_ms)) {
			s->stats.idle_disconnects++;
			baton_log_limited(&limit_idle, BATON_LOG_INFO,
					  "closing client %s: idle for more "
					  "than --client-idle-timeout-s %u",
					  c->addr,
					  s->cfg.client_idle_timeout_s);
			client_close(c);
		}
	}
}
