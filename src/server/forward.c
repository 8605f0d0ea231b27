/*
 * Writes reach the log only through the leader. A follower sends a client's
 * write to the leader as a Forward frame and relays the leader's reply; the
 * leader proposes it like its own client's. A forwarded write whose leader
 * changes, or that does not come back in time, gets a retryable error that
 * says its outcome is unknown.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

struct pending_forward {
	uint64_t id;
	uint64_t deadline_ms;
	struct slot *sl;
	struct pending_forward *next;
};

/* A write proposed on the leader for a local client or a follower. */
struct proposal_ctx {
	struct server *s;
	struct slot *sl;    /* a local client, or */
	baton_node_id from; /* the follower that forwarded it */
	uint64_t forward_id;
	bool acked; /* BATON_PLANTED_BUG_EARLY_ACK answered already */
};

/* The transport encodes it in the protocol version of its connection. */
static void send_forward_reply(struct server *s, baton_node_id to, uint64_t id,
			       const uint8_t *reply, size_t len)
{
	struct baton_peer_frame f = {.kind = BATON_PEER_FORWARD_REPLY};
	f.forward_reply =
		(struct baton_peer_forward_reply){id, reply, len, NULL};
	baton_node_send_frame(s->node, to, &f);
}

/* The reply goes to the local client or back to the follower. */
static void deliver(struct proposal_ctx *p, const uint8_t *reply, size_t len)
{
	if (p->sl != NULL) {
		if (baton_buf_append(slot_buf(p->sl), reply, len) != 0)
			slot_error(p->sl, BATON_ENOMEM);
		else
			slot_done(p->sl);
	} else {
		send_forward_reply(p->s, p->from, p->forward_id, reply, len);
	}
}

static void on_proposed(void *data, int status, const uint8_t *reply,
			size_t len)
{
	struct proposal_ctx *p = data;
	if (p->acked) {
		free(p);
		return;
	}
	struct baton_buf err;
	baton_buf_init(&err);
	if (status != 0) {
		server_reply_error(p->s, &err, status);
		reply = err.data;
		len = err.len;
	}
	deliver(p, reply, len);
	baton_buf_free(&err);
	free(p);
}

/* Check and encode a write, then propose it. On failure the error reply
 * goes to `err` and nothing is proposed. */
static int propose(struct server *s, struct proposal_ctx *p, int argc,
		   const uint8_t *const *argv, const size_t *lens,
		   struct baton_buf *err)
{
	const struct kv_command *c = kv_lookup(argv[0], lens[0]);
	if (c == NULL || kv_check(c, argc, argv, lens, err) != 0) {
		if (err->len == 0)
			resp_error(err, "ERR unknown command");
		return -1;
	}
	struct baton_buf payload;
	baton_buf_init(&payload);
	uint8_t kind = PAYLOAD_KV;
	int rv = baton_buf_append(&payload, &kind, 1);
	if (rv == 0)
		rv = kv_encode(argc, argv, lens, &payload);
	if (rv == 0)
		rv = baton_node_propose(s->node, payload.data, payload.len,
					on_proposed, p);
	baton_buf_free(&payload);
	if (rv != 0) {
		server_reply_error(s, err, rv);
		return -1;
	}
	if (BATON_PLANTED_BUG_EARLY_ACK && strcmp(c->name, "set") == 0) {
		static const uint8_t ok[] = "+OK\r\n";
		deliver(p, ok, sizeof ok - 1);
		p->acked = true;
	}
	return 0;
}

void propose_write(struct server *s, struct slot *sl, int argc,
		   const uint8_t *const *argv, const size_t *lens)
{
	struct proposal_ctx *p = calloc(1, sizeof *p);
	if (p == NULL) {
		slot_error(sl, BATON_ENOMEM);
		return;
	}
	p->s = s;
	p->sl = sl;
	if (propose(s, p, argc, argv, lens, slot_buf(sl)) != 0) {
		free(p);
		slot_done(sl);
	}
}

void forward_write(struct server *s, struct slot *sl, int argc,
		   const uint8_t *const *argv, const size_t *lens)
{
	if (s->leader == 0) {
		slot_error(sl, BATON_ENOLEADER);
		return;
	}
	/* Refuse what the leader would refuse, without a round trip. */
	const struct kv_command *c = kv_lookup(argv[0], lens[0]);
	if (c != NULL && kv_check(c, argc, argv, lens, slot_buf(sl)) != 0) {
		slot_done(sl);
		return;
	}
	struct pending_forward *f = calloc(1, sizeof *f);
	if (f == NULL) {
		slot_error(sl, BATON_ENOMEM);
		return;
	}
	f->id = ++s->next_forward_id;
	f->deadline_ms = uv_now(s->loop) + SERVER_FORWARD_TIMEOUT_MS;
	f->sl = sl;
	struct baton_peer_frame fr = {.kind = BATON_PEER_FORWARD};
	struct baton_peer_command cmd = {argc, argv, lens};
	fr.forward = (struct baton_peer_forward){
		.request_id = f->id, .n_commands = 1, .commands = &cmd};
	int rv = baton_node_send_frame(s->node, s->leader, &fr);
	if (rv != 0) {
		free(f);
		slot_error(sl, rv == BATON_ENOTFOUND ? BATON_ENOLEADER : rv);
		return;
	}
	f->next = s->forwards;
	s->forwards = f;
}

static struct pending_forward *take(struct server *s, uint64_t id)
{
	for (struct pending_forward **pp = &s->forwards; *pp != NULL;
	     pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			struct pending_forward *f = *pp;
			*pp = f->next;
			return f;
		}
	}
	return NULL;
}

void forward_on_frame(struct server *s, baton_node_id from,
		      const struct baton_peer_frame *f)
{
	if (f->kind == BATON_PEER_FORWARD_REPLY) {
		struct pending_forward *pf =
			take(s, f->forward_reply.request_id);
		if (pf == NULL)
			return; /* expired already */
		int rv = f->forward_reply.error != NULL
				 ? resp_error(slot_buf(pf->sl), "ERR %s",
					      f->forward_reply.error)
				 : baton_buf_append(slot_buf(pf->sl),
						    f->forward_reply.resp_reply,
						    f->forward_reply.resp_len);
		if (rv != 0)
			slot_error(pf->sl, rv);
		else
			slot_done(pf->sl);
		free(pf);
		return;
	}
	if (f->kind != BATON_PEER_FORWARD)
		return; /* not for this module (a join frame, ...) */
	/* A follower's client write. */
	struct baton_buf err;
	baton_buf_init(&err);
	struct proposal_ctx *p = calloc(1, sizeof *p);
	const struct baton_peer_command *cmd = f->forward.commands;
	if (p == NULL || f->forward.transaction || f->forward.n_commands != 1) {
		reply_error_for(&err, p == NULL ? BATON_ENOMEM : BATON_EINVAL);
	} else {
		p->s = s;
		p->from = from;
		p->forward_id = f->forward.request_id;
		if (propose(s, p, cmd->argc, cmd->argv, cmd->lens, &err) == 0)
			p = NULL; /* on_proposed replies */
	}
	if (err.len > 0)
		send_forward_reply(s, from, f->forward.request_id, err.data,
				   err.len);
	free(p);
	baton_buf_free(&err);
}

void forward_fail_all(struct server *s, const char *why)
{
	struct pending_forward *f = s->forwards;
	s->forwards = NULL;
	if (f != NULL)
		LOG_DEBUG("failing forwarded writes: %s", why);
	while (f != NULL) {
		struct pending_forward *next = f->next;
		slot_error(f->sl, BATON_ELEADERCHANGED);
		free(f);
		f = next;
	}
}

void forward_expire(struct server *s)
{
	uint64_t now = uv_now(s->loop);
	for (struct pending_forward **pp = &s->forwards; *pp != NULL;) {
		struct pending_forward *f = *pp;
		if (f->deadline_ms > now) {
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		resp_error(slot_buf(f->sl),
			   "TRYAGAIN the leader did not answer in time; the "
			   "write may or may not have been applied");
		slot_done(f->sl);
		free(f);
	}
}
