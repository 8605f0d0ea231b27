/*
 * Client connections. Bytes go through the RESP parser; each command gets a
 * reply slot in a per-client queue, filled at once (PING, errors) or later
 * (writes once committed, reads after the read index). Slots leave in
 * request order, so pipelined commands get their replies in order however
 * they complete. The replies a connection finishes in one turn of the loop
 * leave together, in one writev from their slots, just before the loop
 * waits again (a pipeline costs one system call, not one per command).
 * A client that disconnects with commands in flight is freed when the last
 * of them completes.
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

#include "address.h"
#include "baton/assert.h"
#include "log.h"
#include "server.h"

#define CLIENT_LINGER_MS 1000u
/* A hung-up client whose last replies make no progress for this long (it
 * reads nothing) is closed without waiting for them. */
#define CLIENT_HANGUP_STALL_MS 10000u
/* Room for "255.255.255.255:65535". */
#define CLIENT_ADDR_MAX 32u
/* Finished slots are kept for the next commands, with their reply buffer
 * if it is this small: a pipeline allocates nothing per command. */
#define CLIENT_SPARE_SLOTS_MAX 1024u
#define CLIENT_SLOT_KEEP_BYTES 2048u
/* Replies finished since the last write that are sent at once rather than
 * at the turn's end: the output limits see big replies as they come. */
#define CLIENT_WRITE_EARLY_BYTES (128u * 1024u)
/* Replies handed to one writev (IOV_MAX is 1024). */
#define CLIENT_WRITE_IOVS 64u

struct slot {
	struct client *c;
	struct baton_buf buf;
	enum command_order order;
	enum command_resp3 resp3; /* how the reply is sent in RESP3 */
	bool done;
	/* --metrics: the command's counter (-1: none) and arrival time. */
	int metrics_slot;
	uint64_t started_ns;
	struct slot *next;
};

struct client {
	struct server *s;
	uv_tcp_t tcp;
	uv_shutdown_t shutdown;
	char addr[CLIENT_ADDR_MAX]; /* the peer, for logs */
	struct resp_parser parser;
	struct client_state st;
	struct slot *head, *tail;
	uint32_t in_flight; /* slots not yet done */
	uint32_t reads_in_flight, writes_in_flight;
	uint32_t alone_in_flight; /* ORDER_READ_ALONE, also in reads */
	/* A parsed command waiting for its turn (see the top); its argv
	 * points into the parser, which is left alone meanwhile. */
	bool has_waiting;
	struct resp_command waiting;
	bool processing; /* in process(): a nested call returns */
	bool reading;
	/* Reply, then close: QUIT, a protocol error, a refusal. */
	bool hangup;
	bool fin_queued;	  /* uv_shutdown called */
	bool shut;		  /* the FIN was sent; draining input */
	uint64_t linger_until_ms; /* once shut */
	uint64_t last_active_ms;  /* input read or output written */
	size_t output_queued;
	bool closing;
	bool handle_closed;
	struct client *prev, *next;
	/* In s->client_io.due: replies finished, written at the turn's end. */
	bool due;
	struct client *due_prev, *due_next;
	size_t finished_bytes; /* replies finished since the last flush() */
};

struct client_write {
	uv_write_t req;
	struct client *c;
	struct baton_buf buf;
};

/* Warnings a client can cause at will: one line a second each. */
static struct baton_log_limit limit_output, limit_refused, limit_protocol,
	limit_idle;

static void process(struct client *c);

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
	struct server *s = sl->c->s;
	if (s->client_io.closed ||
	    s->client_io.n_spare >= CLIENT_SPARE_SLOTS_MAX ||
	    sl->buf.cap > CLIENT_SLOT_KEEP_BYTES) {
		baton_buf_free(&sl->buf);
		free(sl);
		return;
	}
	baton_buf_reset(&sl->buf);
	sl->next = s->client_io.spare;
	s->client_io.spare = sl;
	s->client_io.n_spare++;
}

static void due_remove(struct client *c)
{
	if (!c->due)
		return;
	struct server *s = c->s;
	if (c->due_prev != NULL)
		c->due_prev->due_next = c->due_next;
	else
		s->client_io.due = c->due_next;
	if (c->due_next != NULL)
		c->due_next->due_prev = c->due_prev;
	c->due = false;
	c->due_prev = c->due_next = NULL;
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
	due_remove(c);
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
static void hang_up(struct client *c)
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

static void on_written(uv_write_t *req, int status)
{
	struct client_write *w = (struct client_write *)req;
	struct client *c = w->c;
	BATON_ASSERT(c->output_queued >= w->buf.len);
	c->output_queued -= w->buf.len;
	if (!c->closing) {
		BATON_ASSERT(c->s->output_bytes >= w->buf.len);
		c->s->output_bytes -= w->buf.len;
		c->last_active_ms = uv_now(c->s->loop);
	}
	baton_buf_free(&w->buf);
	free(w);
	if (status != 0)
		client_close(c);
}

/* The open client with the most output queued (NULL if none has any). */
static struct client *biggest_reader(struct server *s)
{
	struct client *big = NULL;
	for (struct client *c = s->clients; c != NULL; c = c->next)
		if (!c->closing && c->output_queued > 0 &&
		    (big == NULL || c->output_queued > big->output_queued))
			big = c;
	return big;
}

/* Cut off slow readers: this one above its own limit, or the biggest
 * while all together are above theirs. */
static void enforce_output_limits(struct client *c)
{
	struct server *s = c->s;
	if (c->output_queued > s->cfg.max_client_output_bytes) {
		s->stats.output_disconnects++;
		baton_log_limited(&limit_output, BATON_LOG_WARN,
				  "client %s: %zu bytes of replies unread "
				  "exceed --max-client-output-bytes %" PRIu64
				  "; disconnecting a slow reader",
				  c->addr, c->output_queued,
				  s->cfg.max_client_output_bytes);
		client_close(c);
	}
	while (s->output_bytes > s->cfg.max_total_output_bytes) {
		struct client *big = biggest_reader(s);
		BATON_ASSERT(big != NULL); /* output_bytes counts open ones */
		s->stats.output_disconnects++;
		baton_log_limited(&limit_output, BATON_LOG_WARN,
				  "clients hold %" PRIu64
				  " bytes of replies unread, above "
				  "--max-total-output-bytes %" PRIu64
				  "; disconnecting the slowest reader, client "
				  "%s (%zu bytes)",
				  s->output_bytes,
				  s->cfg.max_total_output_bytes, big->addr,
				  big->output_queued);
		client_close(big);
	}
}

/* Take the first n slots off the queue (their replies are sent). */
static void pop_slots(struct client *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct slot *sl = c->head;
		BATON_ASSERT(sl != NULL && sl->done);
		c->head = sl->next;
		if (c->head == NULL)
			c->tail = NULL;
		slot_free(sl);
	}
}

/* Nothing is queued in libuv: write the finished replies straight from
 * their slots, up to CLIENT_WRITE_IOVS in each writev, with no copy. What
 * the socket does not take is left at the head of the queue (a reply
 * partly sent keeps only its rest). Returns false if the client closed. */
static bool write_direct(struct client *c)
{
	while (c->output_queued == 0 && c->head != NULL && c->head->done) {
		uv_buf_t bufs[CLIENT_WRITE_IOVS];
		unsigned n = 0;
		size_t slots = 0, total = 0;
		for (struct slot *sl = c->head;
		     sl != NULL && sl->done && n < CLIENT_WRITE_IOVS;
		     sl = sl->next, slots++) {
			if (sl->buf.len == 0)
				continue;
			bufs[n++] = uv_buf_init((char *)sl->buf.data,
						(unsigned)sl->buf.len);
			total += sl->buf.len;
		}
		int rv = n > 0 ? uv_try_write((uv_stream_t *)&c->tcp, bufs, n)
			       : 0;
		if (rv == UV_EAGAIN)
			return true;
		if (rv < 0) {
			client_close(c);
			return false;
		}
		size_t written = (size_t)rv;
		if (written > 0)
			c->last_active_ms = uv_now(c->s->loop);
		if (written == total) {
			pop_slots(c, slots);
			continue;
		}
		/* The socket is full: drop what went out, keep the rest. */
		while (written > 0) {
			struct slot *sl = c->head;
			if (sl->buf.len <= written) {
				written -= sl->buf.len;
				pop_slots(c, 1);
				continue;
			}
			memmove(sl->buf.data, sl->buf.data + written,
				sl->buf.len - written);
			sl->buf.len -= written;
			written = 0;
		}
		return true;
	}
	return true;
}

/* Send every finished reply at the head of the queue: at once if the
 * socket takes them, else in one queued write. */
static void flush(struct client *c)
{
	c->finished_bytes = 0;
	if (c->closing || c->head == NULL || !c->head->done)
		return;
	if (!write_direct(c))
		return;
	size_t total = 0;
	for (struct slot *sl = c->head; sl != NULL && sl->done; sl = sl->next)
		total += sl->buf.len;
	if (total > 0) {
		struct client_write *w = calloc(1, sizeof *w);
		if (w == NULL) {
			client_close(c);
			return;
		}
		w->c = c;
		baton_buf_init(&w->buf);
		struct slot *first = c->head;
		if (first->buf.len == total) {
			/* One reply moves rather than copies: a big one
			 * (KEYS) costs no pass over its bytes here. */
			w->buf = first->buf;
			baton_buf_init(&first->buf);
		} else if (baton_buf_reserve(&w->buf, total) != 0) {
			free(w);
			client_close(c);
			return;
		}
		while (c->head != NULL && c->head->done) {
			struct slot *sl = c->head;
			int rv = baton_buf_append(&w->buf, sl->buf.data,
						  sl->buf.len);
			BATON_ASSERT(rv == 0); /* reserved */
			pop_slots(c, 1);
		}
		uv_buf_t b =
			uv_buf_init((char *)w->buf.data, (unsigned)w->buf.len);
		size_t len = w->buf.len;
		if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1,
			     on_written) != 0) {
			baton_buf_free(&w->buf);
			free(w);
			client_close(c);
			return;
		}
		c->output_queued += len;
		c->s->output_bytes += len;
		enforce_output_limits(c);
	} else {
		while (c->head != NULL && c->head->done)
			pop_slots(c, 1);
	}
	if ((c->hangup || c->st.quit) && c->head == NULL)
		hang_up(c);
}

/* The loop is about to wait: write what this turn finished, one write per
 * client however many commands it pipelined. */
static void on_turn_end(uv_prepare_t *h)
{
	struct server *s = h->data;
	while (s->client_io.due != NULL) {
		struct client *c = s->client_io.due;
		due_remove(c);
		flush(c);
	}
	uv_prepare_stop(h);
}

/* A reply is finished: send it (and those finished after it) when this
 * loop turn ends. */
static void flush_at_turn_end(struct client *c)
{
	struct server *s = c->s;
	if (c->due || c->closing || c->head == NULL || !c->head->done)
		return;
	BATON_ASSERT(!s->client_io.closed);
	c->due = true;
	c->due_prev = NULL;
	c->due_next = s->client_io.due;
	if (s->client_io.due != NULL)
		s->client_io.due->due_prev = c;
	s->client_io.due = c;
	uv_prepare_start(&s->client_io.turn_end, on_turn_end);
}

struct baton_buf *slot_buf(struct slot *sl)
{
	return &sl->buf;
}

/* The connection speaks RESP3 (HELLO 3): rewrite the finished reply
 * (resp3.c); one that is not RESP2 (a local command wrote RESP3) is sent
 * as it is. */
static void slot_to_resp3(struct slot *sl)
{
	struct baton_buf out;
	baton_buf_init(&out);
	if (resp3_from_resp2(sl->buf.data, sl->buf.len,
			     sl->resp3 == RESP3_TOP_MAP, &out) == 0) {
		baton_buf_free(&sl->buf);
		sl->buf = out;
	} else {
		baton_buf_free(&out);
	}
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
		hang_up(c);
}

size_t client_output_queued(const struct client_state *cs)
{
	return client_of(cs)->output_queued;
}

void slot_done(struct slot *sl)
{
	struct client *c = sl->c;
	BATON_ASSERT(!sl->done && c->in_flight > 0);
	sl->done = true;
	c->in_flight--;
	if (sl->metrics_slot >= 0)
		metrics_command_done(c->s, sl->metrics_slot,
				     uv_hrtime() - sl->started_ns);
	if (sl->order == ORDER_READ || sl->order == ORDER_READ_ALONE) {
		BATON_ASSERT(c->reads_in_flight > 0);
		c->reads_in_flight--;
	} else if (sl->order == ORDER_WRITE) {
		BATON_ASSERT(c->writes_in_flight > 0);
		c->writes_in_flight--;
	}
	if (sl->order == ORDER_READ_ALONE) {
		BATON_ASSERT(c->alone_in_flight > 0);
		c->alone_in_flight--;
	}
	if (!c->closing && sl->resp3 != RESP3_AS_RESP2)
		slot_to_resp3(sl);
	if (c->closing) {
		/* Nobody to send to: drop what is finished (a slow reader
		 * cut off would otherwise hold its replies until closed). */
		while (c->head != NULL && c->head->done) {
			struct slot *h = c->head;
			c->head = h->next;
			if (c->head == NULL)
				c->tail = NULL;
			slot_free(h);
		}
		client_maybe_free(c);
		return;
	}
	c->finished_bytes += sl->buf.len;
	if (c->finished_bytes >= CLIENT_WRITE_EARLY_BYTES) {
		due_remove(c);
		flush(c);
	} else {
		flush_at_turn_end(c);
	}
	if (c->has_waiting)
		process(c);
}

void reply_error_for(struct baton_buf *b, int code)
{
	switch (code) {
	case BATON_ENOTLEADER:
	case BATON_ENOLEADER:
		/* Nothing was appended. A follower that gets these bytes from
		 * a leader sends the write on (route.c): they are part of the
		 * peer protocol, never to be changed. */
		resp_error(b, "TRYAGAIN no leader elected yet; retry");
		break;
	case BATON_ELEADERCHANGED:
		resp_error(b, "TRYAGAIN leadership changed; the write may or "
			      "may not have been applied");
		break;
	case BATON_EOVERLOADED:
		resp_error(b, "TRYAGAIN overloaded; retry later");
		break;
	case BATON_EBUSY:
		/* Nothing was appended: retrying is safe, and soon works. */
		resp_error(b, "TRYAGAIN a leadership transfer or configuration "
			      "change is in progress; retry");
		break;
	case BATON_ECATCHUP:
		/* BATON.PROMOTE: the learner is still behind; nothing changed.
		 */
		resp_error(b, "TRYAGAIN the learner did not catch up with the "
			      "leader in time; retry once it has");
		break;
	case BATON_EAGAIN:
		resp_error(b, "TRYAGAIN not finished yet; retry later");
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

bool slot_abandoned(const struct slot *sl)
{
	return sl->c->closing;
}

void slot_error(struct slot *sl, int code)
{
	reply_error_for(&sl->buf, code);
	slot_done(sl);
}

static struct slot *slot_new(struct client *c, enum command_order order)
{
	struct server *s = c->s;
	struct slot *sl = s->client_io.spare;
	if (sl != NULL) {
		s->client_io.spare = sl->next;
		s->client_io.n_spare--;
		struct baton_buf kept = sl->buf;
		BATON_ASSERT(kept.len == 0);
		*sl = (struct slot){0};
		sl->buf = kept;
	} else {
		sl = calloc(1, sizeof *sl);
		if (sl == NULL)
			return NULL;
		baton_buf_init(&sl->buf);
	}
	sl->c = c;
	sl->order = order;
	sl->metrics_slot = -1;
	if (c->tail != NULL)
		c->tail->next = sl;
	else
		c->head = sl;
	c->tail = sl;
	c->in_flight++;
	if (order == ORDER_READ || order == ORDER_READ_ALONE)
		c->reads_in_flight++;
	else if (order == ORDER_WRITE)
		c->writes_in_flight++;
	if (order == ORDER_READ_ALONE)
		c->alone_in_flight++;
	return sl;
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
	struct slot *sl = slot_new(c, ORDER_ANY);
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

static void run(struct client *c, const struct resp_command *cmd,
		enum command_order order)
{
	struct slot *sl = slot_new(c, order);
	if (sl == NULL) {
		client_close(c);
		return;
	}
	if (cmd->argc == 0) { /* an empty inline line */
		slot_done(sl);
		return;
	}
	sl->resp3 = command_resp3(&c->st, cmd->argv[0], cmd->lens[0]);
	c->s->stats.commands++;
	sl->metrics_slot =
		metrics_command_slot(c->s, cmd->argv[0], cmd->lens[0]);
	if (sl->metrics_slot >= 0)
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
static void process(struct client *c)
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
	/* Last: a reply it completes at once may run process() again, for
	 * the command left waiting. */
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
	 * error: process() answers it. */
	(void)rv;
	process(c);
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
	struct slot *sl = slot_new(c, ORDER_ANY);
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
			hang_up(c);
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
