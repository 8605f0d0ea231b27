/*
 * The peer transport's sending side: frames are encoded straight into a
 * connection's pending buffer and leave in one write per connection at
 * the end of the loop's turn (or at once past
 * BATON_TRANSPORT_COALESCE_MAX): the same bytes on the wire as one write
 * per frame, at a fraction of the system calls (docs/peer-protocol.md).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "baton/assert.h"
#include "log.h"
#include "transport_internal.h"

/* One write of a connection's pending frames; it owns their buffer. */
struct write_req {
	uv_write_t req;
	struct conn *c;
	struct baton_buf buf;
};

/* A buffer a write leaves behind is kept for the next batch up to this
 * size (a snapshot chunk's is not). */
#define SPARE_MAX (1u << 20)

static void on_written(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct conn *c = w->c;
	BATON_ASSERT(c->queued >= w->buf.len);
	c->queued -= w->buf.len;
	if (c->spare.data == NULL && w->buf.cap <= SPARE_MAX) {
		baton_buf_reset(&w->buf);
		c->spare = w->buf;
	} else {
		baton_buf_free(&w->buf);
	}
	free(w);
	if (status != 0 && status != UV_ECANCELED)
		baton__transport_close(c, uv_strerror(status));
}

/* Hand the connection's pending frames to libuv in one write. Without
 * memory for the request they stay pending for the next flush. */
static void conn_flush(struct conn *c)
{
	if (c->pending.len == 0 || c->closing)
		return;
	struct write_req *w = malloc(sizeof *w);
	if (w == NULL) {
		c->t->flush_due = true;
		return;
	}
	w->c = c;
	w->buf = c->pending;
	c->pending = c->spare;
	baton_buf_init(&c->spare);
	BATON_ASSERT(w->buf.len <= UINT32_MAX);
	uv_buf_t b = uv_buf_init((char *)w->buf.data, (unsigned)w->buf.len);
	int rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written);
	if (rv != 0) {
		c->queued -= w->buf.len;
		baton_buf_free(&w->buf);
		free(w);
		baton__transport_close(c, uv_strerror(rv));
	}
}

void baton__transport_flush_all(struct baton_transport *t)
{
	if (!t->flush_due)
		return;
	t->flush_due = false;
	for (struct conn *c = t->all; c != NULL; c = c->all_next)
		conn_flush(c);
}

static void on_flush_before_poll(uv_prepare_t *h)
{
	baton__transport_flush_all(h->data);
}

static void on_flush_after_poll(uv_check_t *h)
{
	baton__transport_flush_all(h->data);
}

/* The frame the encoder appended to c->pending from `start` (rv: how the
 * encoding went) is queued: counted, and written at the end of this turn
 * of the loop, or now if the batch is big enough. Otherwise it is taken
 * back and the reason returned. */
static int queue_encoded(struct conn *c, size_t start, int rv)
{
	size_t len = c->pending.len - start;
	BATON_ASSERT(start <= c->pending.len && (rv == 0 || len == 0));
	if (rv == 0 && c->queued + len > BATON_TRANSPORT_QUEUE_MAX) {
		c->pending.len = start;
		rv = BATON_EOVERLOADED;
	}
	if (rv != 0)
		return rv;
	c->queued += len;
	c->t->flush_due = true;
	if (c->pending.len >= BATON_TRANSPORT_COALESCE_MAX)
		conn_flush(c);
	return 0;
}

int baton__transport_write(struct conn *c, const uint8_t *data, size_t len)
{
	if (c->closing)
		return BATON_ENOTFOUND;
	size_t start = c->pending.len;
	int rv = baton_buf_append(&c->pending, data, len);
	rv = queue_encoded(c, start, rv);
	if (rv == 0)
		conn_flush(c);
	return rv == 0 && c->closing ? BATON_ENOTFOUND : rv;
}

void baton__transport_flush_start(struct baton_transport *t, uv_loop_t *loop)
{
	uv_prepare_init(loop, &t->flush_before_poll);
	uv_check_init(loop, &t->flush_after_poll);
	t->flush_before_poll.data = t;
	t->flush_after_poll.data = t;
	t->open_handles += 2;
	uv_prepare_start(&t->flush_before_poll, on_flush_before_poll);
	uv_check_start(&t->flush_after_poll, on_flush_after_poll);
	/* They keep no loop running on their own. */
	uv_unref((uv_handle_t *)&t->flush_before_poll);
	uv_unref((uv_handle_t *)&t->flush_after_poll);
}

/* The connection messages to `to` go out on: the one we dialled if its
 * handshake is done, else the one it dialled; NULL if neither. */
struct conn *baton__transport_ready_conn(struct baton_transport *t,
					 baton_node_id to)
{
	struct peer *p = baton__transport_peer_find(t, to);
	if (p != NULL && p->out != NULL && p->out->ready && !p->out->closing)
		return p->out;
	if (p != NULL && p->in != NULL && p->in->ready && !p->in->closing)
		return p->in;
	return NULL;
}

/* After encoding (rv) a frame of `kind` for node `to` at the end of
 * c->pending (c NULL: no connection is up): queue it, count it, and say
 * why if it cannot go. */
static int send_encoded(struct baton_transport *t, struct conn *c,
			baton_node_id to, uint32_t kind, size_t start, int rv)
{
	if (c == NULL)
		rv = BATON_ENOTFOUND;
	else if (rv != 0)
		LOG_ERROR("cannot encode a frame of kind %u for node %" PRIu64
			  " in protocol %u: %s",
			  kind, to, c->proto.value, baton_strerror(rv));
	size_t len = c != NULL ? c->pending.len - start : 0;
	if (c != NULL)
		rv = queue_encoded(c, start, rv);
	if (rv == 0) {
		t->stats.frames_out++;
		t->stats.bytes_out += len;
	} else
		t->stats.dropped++;
	return rv;
}

int baton_transport_send_raft(struct baton_transport *t,
			      const struct baton_msg *m)
{
	BATON_ASSERT(t != NULL && m != NULL);
	struct conn *c = baton__transport_ready_conn(t, m->to);
	int rv = 0;
	size_t start = 0;
	if (c != NULL) {
		/* In the version of the connection it goes out on. */
		BATON_ASSERT(c->proto.value != 0);
		start = c->pending.len;
		rv = baton_peer_encode_raft(c->proto, m, &c->pending);
	}
	return send_encoded(t, c, m->to, BATON_PEER_RAFT, start, rv);
}

int baton_transport_send_frame(struct baton_transport *t, baton_node_id to,
			       const struct baton_peer_frame *f)
{
	BATON_ASSERT(t != NULL && f != NULL);
	struct conn *c = baton__transport_ready_conn(t, to);
	int rv = 0;
	size_t start = 0;
	if (c != NULL) {
		BATON_ASSERT(c->proto.value != 0);
		start = c->pending.len;
		rv = baton_peer_encode_frame(c->proto, f, &c->pending);
	}
	return send_encoded(t, c, to, f->kind, start, rv);
}
