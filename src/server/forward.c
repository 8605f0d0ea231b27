/*
 * Writes reach the log only through the leader. The leader checks a write
 * against the machine version of its log (a command of a later version is
 * refused and nothing is appended), encodes it in the payload format of
 * that version (version 2: stamped with the leader's wall clock) and
 * proposes it. A follower sends a client's write (one command, or a
 * transaction from EXEC) to the leader as a Forward frame and relays the
 * leader's reply; the leader checks, encodes and proposes it like its own
 * client's. Where a write goes, and what happens when a leader did not
 * append it, is route.c's; a forwarded write whose leader is gone, or that
 * does not come back in time, gets a retryable error that says its outcome
 * is unknown.
 *
 * A node that stopped applying for want of a newer release forwards its
 * clients' reads the same way (server_stall_routes): the leader runs
 * them after a read index and sends the reply back.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "server.h"

/* A write proposed on the leader for a local client or a follower. */
struct proposal_ctx {
	struct server *s;
	struct routed_write *rw; /* a local client's, or */
	baton_node_id from;	 /* the follower that forwarded it */
	uint64_t forward_id;
	bool acked; /* BATON_PLANTED_BUG_EARLY_ACK answered already */
	/* The keys whose value-limit bounds count this write until it is
	 * applied or dropped (kv_limit_claim). */
	struct kv_limit_claim claim;
};

/* A payload buffer that grew above this (a big write) is not kept. */
#define PAYLOAD_KEEP_BYTES (64u << 10)

/* ---- the machine version of the log ------------------------------------- */

uint32_t server_machine_version(const struct server *s)
{
	/* Before the node starts (a snapshot restored at start) there is no
	 * log yet: version 1, the initial state. */
	return s->node != NULL ? baton_node_machine_version(s->node).value : 1;
}

void reply_needs_version(struct baton_buf *b, const char *command,
			 uint32_t need, uint32_t have)
{
	resp_error(b,
		   "ERR command '%s' needs machine version %u; the effective "
		   "machine version is %u",
		   command, need, have);
}

/* ---- on the leader ------------------------------------------------------- */

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
	if (p->rw != NULL) {
		route_answer(p->rw, reply, len);
		p->rw = NULL;
	} else {
		send_forward_reply(p->s, p->from, p->forward_id, reply, len);
	}
}

static void on_proposed(void *data, int status, const uint8_t *reply,
			size_t len)
{
	struct proposal_ctx *p = data;
	/* Applied, or never will be: its bounds are in the map or void. */
	kv_limit_release(&p->s->value_limit, &p->claim);
	if (p->acked) {
		free(p);
		return;
	}
	if (status == BATON_ENOTLEADER && p->rw != NULL) {
		/* Never appended: leadership moved while it waited in the
		 * pipeline (a transfer). The next leader takes it. */
		route_again(p->rw, p->s->cfg.id);
		free(p);
		return;
	}
	if (status == BATON_ESTALLED &&
	    (p->rw != NULL || server_stall_routes(p->s)))
		/* This leader stopped applying with the write proposed: it
		 * hands leadership over, and the next leader may commit the
		 * entry or overwrite it. A client's write (here, or one a
		 * follower forwarded, when the stall is for want of a newer
		 * release) is never answered -STALLED for that: its outcome
		 * is unknown, and retryable (docs/clients.md). */
		status = BATON_ELEADERCHANGED;
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

/* Check a transaction's commands as queueing did (a follower's may come
 * from another release): known, with a valid arity, allowed under v. */
static int check_txn(const struct write_req *w, uint32_t v,
		     struct baton_buf *err)
{
	if (v < 2) {
		reply_needs_version(err, "exec", 2, v);
		return -1;
	}
	for (uint32_t i = 0; i < w->n_commands; i++) {
		const struct kv_txn_command *t = &w->commands[i];
		const struct kv_command *c =
			t->argc >= 1 ? kv_lookup(t->argv[0], t->lens[0]) : NULL;
		if (c == NULL) {
			resp_error(err,
				   "EXECABORT Transaction discarded: "
				   "command %u is unknown to the leader",
				   i + 1);
			return -1;
		}
		bool arity_ok = c->arity >= 0 ? t->argc == c->arity
					      : t->argc >= -c->arity;
		if (!arity_ok) {
			resp_error(err,
				   "EXECABORT Transaction discarded: wrong "
				   "number of arguments for '%s' command",
				   c->name);
			return -1;
		}
		if (kv_gate(c, t->argc, t->argv, t->lens,
			    (struct baton_machine_version){v}, err) != 0)
			return -1;
	}
	return 0;
}

/* Check and encode a write in the payload format of machine version v
 * (kind byte first). On failure the error reply goes to `err`. */
static int encode(struct server *s, const struct write_req *w, uint32_t v,
		  struct baton_buf *payload, struct baton_buf *err)
{
	const struct kv_txn_command *t = &w->commands[0];
	const struct kv_command *c = NULL;
	if (w->transaction) {
		if (check_txn(w, v, err) != 0)
			return -1;
	} else {
		BATON_ASSERT(w->n_commands == 1 && w->n_watches == 0);
		c = kv_lookup(t->argv[0], t->lens[0]);
		if (c == NULL ||
		    kv_gate(c, t->argc, t->argv, t->lens,
			    (struct baton_machine_version){v}, err) != 0 ||
		    kv_check(c, t->argc, t->argv, t->lens, err) != 0) {
			if (err->len == 0)
				resp_error(err, "ERR unknown command");
			return -1;
		}
		if (!(c->flags & KV_WRITE)) {
			resp_error(err, "ERR '%s' is not a write", c->name);
			return -1;
		}
	}
	/* Checked last, so a bad command gets its own error first (as in
	 * Redis); refused here, nothing reaches the log. */
	if (memory_refuses(s, w, err))
		return -1;
	uint8_t kind = PAYLOAD_KV;
	int rv = baton_buf_append(payload, &kind, 1);
	uint64_t stamp_ms = server_machine_stamp(s);
	if (rv == 0 && w->transaction)
		rv = kv_encode_txn(stamp_ms, w->n_watches, w->watches,
				   w->n_commands, w->commands, payload);
	else if (rv == 0 && v >= 2)
		rv = kv_encode_v2(stamp_ms, t->argc, t->argv, t->lens, payload);
	else if (rv == 0)
		rv = kv_encode(t->argc, t->argv, t->lens, payload);
	if (rv == BATON_EINVAL) {
		resp_error(err, "ERR the write exceeds the limits of a log "
				"entry");
		return -1;
	}
	if (rv != 0) {
		server_reply_error(s, err, rv);
		return -1;
	}
	return 0;
}

/* The value limit (--max-value-bytes), checked after encode() accepted
 * the write and before it is appended: 0, or -1 with the refusal in err
 * (nothing held). */
static int claim_value_limit(struct server *s, struct proposal_ctx *p,
			     const struct write_req *w, struct baton_buf *err)
{
	int rv = kv_limit_claim(&s->value_limit, s->machine.kv, w->transaction,
				w->n_commands, w->commands, &p->claim, err);
	if (rv == 0)
		return 0;
	if (rv != BATON_EINVAL)
		server_reply_error(s, err, rv);
	return -1;
}

void forward_not_appended(struct server *s, struct proposal_ctx *p)
{
	static const char not_appended[] =
		"-TRYAGAIN no leader elected yet; retry\r\n";
	if (p->rw != NULL)
		route_again(p->rw, s->cfg.id);
	else
		send_forward_reply(s, p->from, p->forward_id,
				   (const uint8_t *)not_appended,
				   sizeof not_appended - 1);
	free(p);
}

void forward_propose_held(struct server *s, struct proposal_ctx *p,
			  const uint8_t *payload, size_t len)
{
	BATON_ASSERT(len >= 1 && payload[0] == PAYLOAD_KV);
	struct baton_buf err;
	baton_buf_init(&err);
	int rv = kv_limit_claim_payload(&s->value_limit, s->machine.kv,
					payload + 1, len - 1, &p->claim, &err);
	if (rv == 0) {
		rv = baton_node_propose(s->node, payload, len, on_proposed, p);
		if (rv == 0) {
			baton_buf_free(&err);
			return; /* on_proposed answers */
		}
		kv_limit_release(&s->value_limit, &p->claim);
	}
	if (rv == BATON_ENOTLEADER) {
		forward_not_appended(s, p);
	} else {
		if (err.len == 0)
			server_reply_error(s, &err, rv);
		deliver(p, err.data, err.len);
		free(p);
	}
	baton_buf_free(&err);
}

/* Check, encode and propose a write. On failure the error reply goes to
 * `err` and nothing is proposed; BATON_ENOTLEADER (this node no longer
 * leads) is returned with `err` empty for the caller to deal with. */
static int propose(struct server *s, struct proposal_ctx *p,
		   const struct write_req *w, struct baton_buf *err)
{
	/* The pipeline copies the entry: the buffer serves the next write. */
	struct baton_buf *payload = &s->forwards.payload;
	baton_buf_reset(payload);
	int rv = encode(s, w, server_machine_version(s), payload, err);
	if (rv != 0)
		return -1;
	if (held_must_wait(s)) {
		/* A new leader: claimed and proposed once it applied the log
		 * it inherited (held.c). */
		rv = held_push(s, p, payload->data, payload->len);
		if (payload->cap > PAYLOAD_KEEP_BYTES)
			baton_buf_free(payload);
		if (rv != 0)
			server_reply_error(s, err, rv);
		return rv != 0 ? -1 : 0;
	}
	if (claim_value_limit(s, p, w, err) != 0)
		return -1;
	rv = baton_node_propose(s->node, payload->data, payload->len,
				on_proposed, p);
	if (rv != 0)
		kv_limit_release(&s->value_limit, &p->claim);
	size_t entry_bytes = payload->len;
	if (payload->cap > PAYLOAD_KEEP_BYTES)
		baton_buf_free(payload);
	if (rv == BATON_ETOOBIG) {
		resp_error(err,
			   "ERR the write needs a log entry of %zu bytes, "
			   "above the limit of a log entry (16 MiB)",
			   entry_bytes);
		return -1;
	}
	if (rv == BATON_ENOTLEADER && p->rw != NULL)
		return rv;
	if (rv == BATON_ESTALLED && server_stall_routes(s)) {
		/* Never appended: this leader stopped applying for want of a
		 * newer release and hands leadership over. A local write
		 * waits for the next leader; a follower's gets the "not
		 * appended" reply it routes again on (route.c). */
		if (p->rw != NULL)
			return BATON_ENOTLEADER;
		server_reply_error(s, err, BATON_ENOLEADER);
		return -1;
	}
	if (rv != 0) {
		server_reply_error(s, err, rv);
		return -1;
	}
	if (BATON_PLANTED_BUG_EARLY_ACK && !w->transaction) {
		const struct kv_command *c = kv_lookup(w->commands[0].argv[0],
						       w->commands[0].lens[0]);
		if (c != NULL && strcmp(c->name, "set") == 0) {
			static const uint8_t ok[] = "+OK\r\n";
			deliver(p, ok, sizeof ok - 1);
			p->acked = true;
		}
	}
	return 0;
}

int propose_routed(struct server *s, struct routed_write *rw)
{
	struct proposal_ctx *p = calloc(1, sizeof *p);
	if (p == NULL) {
		route_fail(rw, BATON_ENOMEM);
		return 0;
	}
	p->s = s;
	p->rw = rw;
	int rv = propose(s, p, &rw->w, slot_buf(rw->sl));
	if (rv == 0)
		return 0;
	free(p);
	if (rv == BATON_ENOTLEADER)
		return rv;
	route_done(rw);
	return 0;
}

/* ---- forwards in flight ------------------------------------------------- */

/* A reply finds its write through the index by request id (a scan of
 * every write in flight took 18% of a follower's CPU under -c 50 -P 16);
 * the list keeps them in the order they were sent, for the failures. */
static void forwards_push(struct server *s, struct routed_write *rw)
{
	baton_id_index_put(&s->forwards.index, rw->forward_id, rw);
	rw->next = NULL;
	rw->prev = s->forwards.tail;
	if (s->forwards.tail != NULL)
		s->forwards.tail->next = rw;
	else
		s->forwards.head = rw;
	s->forwards.tail = rw;
}

static void forwards_unlink(struct server *s, struct routed_write *rw)
{
	void *was = baton_id_index_take(&s->forwards.index, rw->forward_id);
	BATON_ASSERT(was == rw);
	if (rw->prev != NULL)
		rw->prev->next = rw->next;
	else
		s->forwards.head = rw->next;
	if (rw->next != NULL)
		rw->next->prev = rw->prev;
	else
		s->forwards.tail = rw->prev;
	rw->prev = rw->next = NULL;
}

/* The proof of this node's --password that forwards carry: the
 * password is set at start, so it is made once. */
static const uint8_t *auth_proof(struct server *s)
{
	BATON_ASSERT(s->cfg.password[0] != '\0');
	if (!s->forwards.has_auth_proof) {
		baton_client_auth_proof(s->cfg.password,
					s->forwards.auth_proof);
		s->forwards.has_auth_proof = true;
	}
	return s->forwards.auth_proof;
}

/* ---- on a follower ------------------------------------------------------- */

/* The Forward frame of a write, sent to the leader. */
static int send_forward(struct server *s, const struct write_req *w,
			uint64_t id)
{
	struct baton_peer_command one;
	struct baton_peer_command *cmds = &one;
	struct baton_peer_watch *watches = NULL;
	if (w->n_commands > 1)
		cmds = calloc(w->n_commands, sizeof *cmds);
	if (w->n_watches > 0)
		watches = calloc(w->n_watches, sizeof *watches);
	int rv = 0;
	if (cmds == NULL || (w->n_watches > 0 && watches == NULL))
		rv = BATON_ENOMEM;
	for (uint32_t i = 0; rv == 0 && i < w->n_commands; i++)
		cmds[i] = (struct baton_peer_command){w->commands[i].argc,
						      w->commands[i].argv,
						      w->commands[i].lens};
	for (uint32_t i = 0; rv == 0 && i < w->n_watches; i++)
		watches[i] = (struct baton_peer_watch){w->watches[i].key,
						       w->watches[i].key_len,
						       w->watches[i].hash};
	if (rv == 0) {
		struct baton_peer_frame fr = {.kind = BATON_PEER_FORWARD};
		fr.forward = (struct baton_peer_forward){
			.request_id = id,
			.transaction = w->transaction,
			.n_commands = w->n_commands,
			.commands = cmds,
			.n_watches = w->n_watches,
			.watches = watches};
		/* Only an authenticated client's command gets here. */
		fr.forward.has_client_auth = s->cfg.password[0] != '\0';
		if (fr.forward.has_client_auth)
			memcpy(fr.forward.client_auth, auth_proof(s),
			       BATON_PEER_CLIENT_AUTH_LEN);
		rv = baton_node_send_frame(s->node, s->leader, &fr);
	}
	if (cmds != &one)
		free(cmds);
	free(watches);
	return rv;
}

int forward_routed(struct server *s, struct routed_write *rw)
{
	const struct write_req *w = &rw->w;
	BATON_ASSERT(rw->sent_to == s->leader && s->leader != s->cfg.id);
	if (!w->transaction) {
		/* Refuse what the leader would refuse, without a round trip. */
		const struct kv_txn_command *t = &w->commands[0];
		const struct kv_command *c = kv_lookup(t->argv[0], t->lens[0]);
		if (c != NULL && kv_check(c, t->argc, t->argv, t->lens,
					  slot_buf(rw->sl)) != 0) {
			route_done(rw);
			return 0;
		}
	}
	/* Room to find its reply, before it goes. */
	if (baton_id_index_reserve(&s->forwards.index) != 0) {
		route_fail(rw, BATON_ENOMEM);
		return 0;
	}
	uint64_t id = ++s->next_forward_id;
	int rv = send_forward(s, w, id);
	if (rv == BATON_ENOTFOUND)
		return rv;
	if (rv == BATON_EVERSION) {
		/* Protocol 1 carries single commands only; machine version
		 * 2 (transactions) needs every member at 1.1.0 or later, so
		 * this is a link to a leader of an older release. */
		resp_error(slot_buf(rw->sl),
			   "ERR cannot forward a transaction to leader %" PRIu64
			   ": its connection speaks peer protocol 1; run it on "
			   "the leader",
			   s->leader);
		route_done(rw);
		return 0;
	}
	if (rv != 0) {
		route_fail(rw, rv);
		return 0;
	}
	rw->forward_id = id;
	forwards_push(s, rw);
	rw->deadline_ms = uv_now(s->loop) + SERVER_FORWARD_TIMEOUT_MS;
	return 0;
}

/* The forwarded write with this request id, sent to `from`. */
static struct routed_write *take(struct server *s, baton_node_id from,
				 uint64_t id)
{
	struct routed_write *rw = baton_id_index_find(&s->forwards.index, id);
	if (rw == NULL || rw->sent_to != from)
		return NULL;
	forwards_unlink(s, rw);
	return rw;
}

static void on_forward_reply(struct server *s, baton_node_id from,
			     const struct baton_peer_forward_reply *r)
{
	struct routed_write *rw = take(s, from, r->request_id);
	if (rw == NULL)
		return; /* expired already */
	if (r->error != NULL) {
		int rv = resp_error(slot_buf(rw->sl), "ERR %s", r->error);
		if (rv != 0)
			route_fail(rw, rv);
		else
			route_done(rw);
	} else if (route_reply_not_appended(r->resp_reply, r->resp_len)) {
		route_again(rw, from);
	} else {
		route_answer(rw, r->resp_reply, r->resp_len);
	}
}

/* A read from a node that stalled for want of a newer release
 * (server_stall_routes): run here after a read index, as a local client's
 * read, and send the reply back. The arguments are copied: the frame is
 * gone once this returns. */
struct forwarded_read {
	struct server *s;
	baton_node_id from;
	uint64_t id;
	int argc;
	uint8_t **argv;
	size_t *lens;
};

static void forwarded_read_free(struct forwarded_read *r)
{
	for (int i = 0; r->argv != NULL && i < r->argc; i++)
		free(r->argv[i]);
	free(r->argv);
	free(r->lens);
	free(r);
}

static void on_forwarded_read_ready(void *data, int status)
{
	struct forwarded_read *r = data;
	struct baton_buf out;
	baton_buf_init(&out);
	if (status != 0)
		server_reply_error(r->s, &out, status);
	else if (kv_read(r->s->machine.kv, r->argc,
			 (const uint8_t *const *)r->argv, r->lens,
			 &out) == BATON_ENOMEM)
		reply_error_for(&out, BATON_ENOMEM);
	send_forward_reply(r->s, r->from, r->id, out.data, out.len);
	baton_buf_free(&out);
	forwarded_read_free(r);
}

/* Gate, check and start the read; an error reply goes to `err`. */
static void forwarded_read(struct server *s, baton_node_id from, uint64_t id,
			   const struct baton_peer_command *cmd,
			   const struct kv_command *c, struct baton_buf *err)
{
	struct baton_machine_version v = {server_machine_version(s)};
	if (kv_gate(c, cmd->argc, cmd->argv, cmd->lens, v, err) != 0 ||
	    kv_check(c, cmd->argc, cmd->argv, cmd->lens, err) != 0)
		return;
	struct forwarded_read *r = calloc(1, sizeof *r);
	bool ok = r != NULL;
	if (ok) {
		*r = (struct forwarded_read){s,		from, id,
					     cmd->argc, NULL, NULL};
		r->argv = calloc((size_t)cmd->argc, sizeof *r->argv);
		r->lens = calloc((size_t)cmd->argc, sizeof *r->lens);
		ok = r->argv != NULL && r->lens != NULL;
	}
	for (int i = 0; ok && i < cmd->argc; i++) {
		r->argv[i] = malloc(cmd->lens[i] + 1);
		ok = r->argv[i] != NULL;
		if (ok && cmd->lens[i] > 0)
			memcpy(r->argv[i], cmd->argv[i], cmd->lens[i]);
		r->lens[i] = cmd->lens[i];
	}
	int rv = ok ? baton_node_read(s->node, on_forwarded_read_ready, r)
		    : BATON_ENOMEM;
	if (rv != 0) {
		server_reply_error(s, err, rv);
		if (r != NULL)
			forwarded_read_free(r);
	}
}

/* The forwarded command, if it is a single read command. */
static const struct kv_command *read_command(const struct baton_peer_forward *f)
{
	if (f->transaction || f->n_commands != 1 || f->commands[0].argc < 1)
		return NULL;
	const struct kv_command *c =
		kv_lookup(f->commands[0].argv[0], f->commands[0].lens[0]);
	return c != NULL && (c->flags & KV_READ) ? c : NULL;
}

/* A follower's client write (or a stalled node's read), on the leader. */
/* With --password, a forward must prove its client authenticated with the
 * same password on the node that sent it (docs/batond.md). */
static bool forward_authenticated(struct server *s, baton_node_id from,
				  const struct baton_peer_forward *f)
{
	if (s->cfg.password[0] == '\0')
		return true;
	if (f->has_client_auth &&
	    baton_equal_secret(auth_proof(s), f->client_auth,
			       BATON_PEER_CLIENT_AUTH_LEN))
		return true;
	static const char noauth[] =
		"-NOAUTH the node that forwarded this command did not prove "
		"its client authenticated with this cluster's password\r\n";
	LOG_WARN("refused a write forwarded by node %" PRIu64 ": %s", from,
		 f->has_client_auth ? "its client's password differs from ours"
				    : "it carries no client authentication");
	send_forward_reply(s, from, f->request_id, (const uint8_t *)noauth,
			   sizeof noauth - 1);
	return false;
}

static void on_forward(struct server *s, baton_node_id from,
		       const struct baton_peer_forward *f)
{
	if (!forward_authenticated(s, from, f))
		return;
	const struct kv_command *rc = read_command(f);
	if (rc != NULL) {
		struct baton_buf err;
		baton_buf_init(&err);
		forwarded_read(s, from, f->request_id, &f->commands[0], rc,
			       &err);
		if (err.len > 0)
			send_forward_reply(s, from, f->request_id, err.data,
					   err.len);
		baton_buf_free(&err);
		return;
	}
	struct baton_buf err;
	baton_buf_init(&err);
	struct proposal_ctx *p = calloc(1, sizeof *p);
	struct kv_txn_command one;
	struct kv_txn_command *cmds = &one;
	struct kv_watch *watches = NULL;
	if (f->n_commands > 1)
		cmds = calloc(f->n_commands, sizeof *cmds);
	if (f->n_watches > 0)
		watches = calloc(f->n_watches, sizeof *watches);
	if (p == NULL || cmds == NULL ||
	    (f->n_watches > 0 && watches == NULL)) {
		reply_error_for(&err, BATON_ENOMEM);
	} else if (!f->transaction &&
		   (f->n_commands != 1 || f->n_watches != 0)) {
		reply_error_for(&err, BATON_EINVAL); /* the codec forbids it */
	} else {
		for (uint32_t i = 0; i < f->n_commands; i++)
			cmds[i] = (struct kv_txn_command){f->commands[i].argc,
							  f->commands[i].argv,
							  f->commands[i].lens};
		for (uint32_t i = 0; i < f->n_watches; i++)
			watches[i] = (struct kv_watch){f->watches[i].key,
						       f->watches[i].key_len,
						       f->watches[i].hash};
		struct write_req w = {f->transaction, f->n_watches, watches,
				      f->n_commands, cmds};
		p->s = s;
		p->from = from;
		p->forward_id = f->request_id;
		if (propose(s, p, &w, &err) == 0)
			p = NULL; /* on_proposed replies */
	}
	if (err.len > 0)
		send_forward_reply(s, from, f->request_id, err.data, err.len);
	free(p);
	if (cmds != &one)
		free(cmds);
	free(watches);
	baton_buf_free(&err);
}

void forward_on_frame(struct server *s, baton_node_id from,
		      const struct baton_peer_frame *f)
{
	if (f->kind == BATON_PEER_FORWARD_REPLY)
		on_forward_reply(s, from, &f->forward_reply);
	else if (f->kind == BATON_PEER_FORWARD)
		on_forward(s, from, &f->forward);
	/* else not for this module (a join frame, ...) */
}

/* Unlink and fail (outcome unknown) the forwards `pick` chooses: timed
 * out, or their leader changed. */
static void fail_forwards(struct server *s,
			  bool (*pick)(const struct routed_write *,
				       const void *),
			  const void *arg, bool timed_out)
{
	struct routed_write *failed = NULL, *failed_tail = NULL;
	for (struct routed_write *rw = s->forwards.head, *next; rw != NULL;
	     rw = next) {
		next = rw->next;
		if (!pick(rw, arg))
			continue;
		forwards_unlink(s, rw);
		if (failed_tail != NULL)
			failed_tail->next = rw;
		else
			failed = rw;
		failed_tail = rw;
	}
	/* Answered only now: an answer may start the client's next write,
	 * which may be forwarded, while the list was being walked. */
	while (failed != NULL) {
		struct routed_write *next = failed->next;
		if (timed_out) {
			resp_error(slot_buf(failed->sl),
				   "TRYAGAIN the leader did not answer in "
				   "time; the write may or may not have been "
				   "applied");
			route_done(failed);
		} else {
			route_fail(failed, BATON_ELEADERCHANGED);
		}
		failed = next;
	}
}

static bool pick_all(const struct routed_write *rw, const void *arg)
{
	(void)rw;
	(void)arg;
	return true;
}

static bool pick_sent_to(const struct routed_write *rw, const void *arg)
{
	return rw->sent_to == *(const baton_node_id *)arg;
}

static bool pick_overdue(const struct routed_write *rw, const void *arg)
{
	return rw->deadline_ms <= *(const uint64_t *)arg;
}

void forward_fail_all(struct server *s, const char *why)
{
	if (s->forwards.head != NULL)
		LOG_DEBUG("failing forwarded writes: %s", why);
	fail_forwards(s, pick_all, NULL, false);
	/* Nothing is in flight now (an answer may have forwarded another
	 * write: that one stays, and so does the index). */
	if (s->forwards.head == NULL)
		baton_id_index_free(&s->forwards.index);
	baton_buf_free(&s->forwards.payload);
}

void forward_peer_down(struct server *s, baton_node_id id)
{
	fail_forwards(s, pick_sent_to, &id, false);
}

void forward_leader_changed(struct server *s, baton_node_id leader)
{
	/* The old leader still answers what it took: what it appended
	 * commits under the next leader or is overwritten, and it says
	 * which. Unless it is gone, or takes longer than an election. */
	uint64_t grace = uv_now(s->loop) + s->cfg.election_timeout_ms;
	for (struct routed_write *rw = s->forwards.head; rw != NULL;
	     rw = rw->next)
		if (rw->sent_to != leader && rw->deadline_ms > grace)
			rw->deadline_ms = grace;
	for (struct routed_write *rw = s->forwards.head; rw != NULL;) {
		baton_node_id to = rw->sent_to;
		if (to != leader && !baton_node_peer_connected(s->node, to)) {
			forward_peer_down(s, to);
			rw = s->forwards.head; /* the list changed */
		} else {
			rw = rw->next;
		}
	}
}

void forward_expire(struct server *s)
{
	uint64_t now = uv_now(s->loop);
	fail_forwards(s, pick_overdue, &now, true);
}
