/*
 * Client replies: each command's reply slot, filled at once or later and
 * sent in request order. The replies a connection finishes in one turn of
 * the loop leave together, in one writev straight from their slots, just
 * before the loop waits again (a pipeline costs one system call, not one
 * per command); what the socket does not take is queued in one write.
 * Finished slots are kept for the next commands. Replies queued unread
 * are capped per client and over all clients: the biggest slow reader is
 * cut off (docs/batond.md, "Limits").
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "client_internal.h"
#include "log.h"

/* A slow reader cut off: one line a second. */
static struct baton_log_limit limit_output;

void client_slot_free(struct slot *sl)
{
	struct server *s = sl->c->s;
	free(sl->resp3_maps);
	sl->resp3_maps = NULL;
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

void client_due_remove(struct client *c)
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
		client_slot_free(sl);
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
		client_hang_up(c);
}

/* The loop is about to wait: write what this turn finished, one write per
 * client however many commands it pipelined. */
static void on_turn_end(uv_prepare_t *h)
{
	struct server *s = h->data;
	while (s->client_io.due != NULL) {
		struct client *c = s->client_io.due;
		client_due_remove(c);
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
	int rv = sl->resp3_maps != NULL
			 ? resp3_from_resp2_elements(sl->buf.data, sl->buf.len,
						     sl->resp3_maps,
						     sl->n_resp3_maps, &out)
			 : resp3_from_resp2(sl->buf.data, sl->buf.len,
					    sl->resp3 == RESP3_TOP_MAP, &out);
	free(sl->resp3_maps);
	sl->resp3_maps = NULL;
	if (rv == 0) {
		baton_buf_free(&sl->buf);
		sl->buf = out;
	} else {
		baton_buf_free(&out);
	}
}

void slot_done(struct slot *sl)
{
	struct client *c = sl->c;
	BATON_ASSERT(!sl->done && c->in_flight > 0);
	sl->done = true;
	c->in_flight--;
	uint64_t took_ns = uv_hrtime() - sl->started_ns;
	if (sl->metrics_slot >= 0)
		metrics_command_done(c->s, sl->metrics_slot, took_ns);
	/* An error reply starts with '-' (RESP2, before any rewrite). */
	bool error = sl->buf.len > 0 && sl->buf.data[0] == '-';
	c->s->stats.error_replies += error;
	if (sl->kv_command) {
		c->s->stats.kv_error_replies += error;
		baton_histogram_observe_ns(&c->s->stats.kv_latency, took_ns);
	}
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
			client_slot_free(h);
		}
		client_maybe_free(c);
		return;
	}
	c->finished_bytes += sl->buf.len;
	if (c->finished_bytes >= CLIENT_WRITE_EARLY_BYTES) {
		client_due_remove(c);
		flush(c);
	} else {
		flush_at_turn_end(c);
	}
	if (c->has_waiting)
		client_process(c);
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

struct slot *client_slot_new(struct client *c, enum command_order order)
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
