/*
 * Client connections. Bytes go through the RESP parser; each command gets a
 * reply slot in a per-client queue, filled at once (PING, errors) or later
 * (writes once committed, reads after the read index). Slots leave in
 * request order, so pipelined commands get their replies in order however
 * they complete. A client that disconnects with commands in flight is freed
 * when the last of them completes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

struct slot {
	struct client *c;
	struct baton_buf buf;
	bool done;
	struct slot *next;
};

struct client {
	struct server *s;
	uv_tcp_t tcp;
	struct resp_parser parser;
	struct client_state st;
	struct slot *head, *tail;
	uint32_t in_flight; /* slots not yet done */
	size_t output_queued;
	bool closing;
	bool handle_closed;
	struct client *prev, *next;
};

struct client_write {
	uv_write_t req;
	struct client *c;
	struct baton_buf buf;
};

static void client_maybe_free(struct client *c)
{
	if (!c->handle_closed || c->in_flight > 0 || c->head != NULL)
		return;
	txn_free(&c->st);
	resp_parser_free(&c->parser);
	free(c);
}

static void slot_free(struct slot *sl)
{
	baton_buf_free(&sl->buf);
	free(sl);
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
		slot_free(sl);
	}
	client_maybe_free(c);
}

static void client_close(struct client *c)
{
	if (c->closing)
		return;
	c->closing = true;
	uv_close((uv_handle_t *)&c->tcp, on_client_closed);
}

static void on_written(uv_write_t *req, int status)
{
	struct client_write *w = (struct client_write *)req;
	struct client *c = w->c;
	c->output_queued -= w->buf.len;
	baton_buf_free(&w->buf);
	free(w);
	if (status != 0)
		client_close(c);
}

/* Send every finished reply at the head of the queue, in one write. */
static void flush(struct client *c)
{
	if (c->head == NULL || !c->head->done)
		return;
	struct client_write *w = calloc(1, sizeof *w);
	if (w == NULL) {
		client_close(c);
		return;
	}
	w->c = c;
	baton_buf_init(&w->buf);
	while (c->head != NULL && c->head->done) {
		struct slot *sl = c->head;
		c->head = sl->next;
		if (c->head == NULL)
			c->tail = NULL;
		if (!c->closing &&
		    baton_buf_append(&w->buf, sl->buf.data, sl->buf.len) != 0)
			client_close(c);
		slot_free(sl);
	}
	if (c->closing || w->buf.len == 0) {
		baton_buf_free(&w->buf);
		free(w);
		return;
	}
	uv_buf_t b = uv_buf_init((char *)w->buf.data, (unsigned)w->buf.len);
	c->output_queued += w->buf.len;
	if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
		c->output_queued -= w->buf.len;
		baton_buf_free(&w->buf);
		free(w);
		client_close(c);
		return;
	}
	if (c->output_queued > SERVER_CLIENT_OUTPUT_MAX) {
		LOG_WARN("client output above %u bytes: disconnecting a slow "
			 "reader",
			 SERVER_CLIENT_OUTPUT_MAX);
		client_close(c);
	}
	if (c->st.quit)
		client_close(c);
}

struct baton_buf *slot_buf(struct slot *sl)
{
	return &sl->buf;
}

void slot_done(struct slot *sl)
{
	struct client *c = sl->c;
	sl->done = true;
	c->in_flight--;
	if (c->handle_closed) {
		/* Nobody to send to: drop what is finished. */
		while (c->head != NULL && c->head->done) {
			struct slot *h = c->head;
			c->head = h->next;
			slot_free(h);
		}
		client_maybe_free(c);
		return;
	}
	flush(c);
}

void reply_error_for(struct baton_buf *b, int code)
{
	switch (code) {
	case BATON_ENOTLEADER:
	case BATON_ENOLEADER:
		resp_error(b, "TRYAGAIN no leader elected yet; retry");
		break;
	case BATON_ELEADERCHANGED:
		resp_error(b, "TRYAGAIN leadership changed; the write may or "
			      "may not have been applied");
		break;
	case BATON_EOVERLOADED:
		resp_error(b, "TRYAGAIN overloaded; retry later");
		break;
	case BATON_EIO:
		resp_error(b, "ERR storage failed on this node; it no longer "
			      "accepts writes");
		break;
	case BATON_ESTALLED:
		resp_error(b, "STALLED this node met data it cannot interpret "
			      "and stopped applying; see INFO or BATON.NODE");
		break;
	default:
		resp_error(b, "ERR %s", baton_strerror(code));
	}
}

void slot_error(struct slot *sl, int code)
{
	reply_error_for(&sl->buf, code);
	slot_done(sl);
}

static struct slot *slot_new(struct client *c)
{
	struct slot *sl = calloc(1, sizeof *sl);
	if (sl == NULL)
		return NULL;
	sl->c = c;
	baton_buf_init(&sl->buf);
	if (c->tail != NULL)
		c->tail->next = sl;
	else
		c->head = sl;
	c->tail = sl;
	c->in_flight++;
	return sl;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	buf->base = malloc(suggested);
	buf->len = buf->base != NULL ? suggested : 0;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct client *c = stream->data;
	struct server *s = c->s;
	if (nread < 0) {
		free(buf->base);
		client_close(c);
		return;
	}
	int rv = resp_parser_feed(&c->parser, (const uint8_t *)buf->base,
				  (size_t)nread);
	free(buf->base);
	if (rv != 0) {
		client_close(c);
		return;
	}
	struct resp_command cmd;
	while (!c->closing && !c->st.quit) {
		rv = resp_parser_next(&c->parser, &cmd);
		if (rv == RESP_NEED_MORE)
			break;
		struct slot *sl = slot_new(c);
		if (sl == NULL) {
			client_close(c);
			return;
		}
		if (rv != RESP_OK) {
			/* Like Redis: say why, then hang up. */
			s->stats.protocol_errors++;
			resp_error(&sl->buf, "ERR %s",
				   resp_parser_error(&c->parser));
			c->st.quit = true;
			slot_done(sl);
			break;
		}
		if (cmd.argc == 0) { /* an empty inline line */
			slot_done(sl);
			continue;
		}
		s->stats.commands++;
		command_dispatch(s, &c->st, sl, cmd.argc, cmd.argv, cmd.lens);
	}
	resp_parser_consumed(&c->parser);
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
	resp_parser_init(&c->parser, NULL);
	c->st.authenticated = s->cfg.password[0] == '\0';
	c->next = s->clients;
	if (s->clients != NULL)
		s->clients->prev = c;
	s->clients = c;
	s->n_clients++;
	s->stats.connections++;
	if (s->n_clients > s->cfg.max_clients || s->shutting_down) {
		s->stats.rejected_clients++;
		struct slot *sl = slot_new(c);
		if (sl != NULL) {
			resp_error(&sl->buf,
				   s->shutting_down
					   ? "ERR server is shutting down"
					   : "ERR max number of clients "
					     "reached");
			c->st.quit = true;
			slot_done(sl);
		} else {
			client_close(c);
		}
		return;
	}
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int clients_listen(struct server *s)
{
	struct sockaddr_in sa;
	if (baton_parse_addr(s->cfg.listen, &sa) != 0) {
		LOG_ERROR("bad client address '%s' (want host:port)",
			  s->cfg.listen);
		return BATON_EINVAL;
	}
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
	uv_close((uv_handle_t *)&s->listener, NULL);
	for (struct client *c = s->clients; c != NULL; c = c->next)
		client_close(c);
}
