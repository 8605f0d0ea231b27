/*
 * The server's side of the node: the callbacks it gives the node (the
 * machine, peer frames, leadership, the stall) and the address book in
 * use — the replicated one (machine.c), with the founders' addresses from
 * --bootstrap until the book has them, handed to the transport.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "server.h"

static bool is_founder(const struct server *s, baton_node_id id)
{
	for (uint32_t i = 0; i < s->cfg.n_founders; i++)
		if (s->cfg.founders[i] == id)
			return true;
	return false;
}

/* The machine took an address: the transport dials it. This node's own
 * --bootstrap list says how it reaches a founder, and wins over the book
 * (the e2e fault harness routes each peer link through its own proxy
 * this way). */
static void address_changed(void *data, const struct book_entry *e)
{
	struct server *s = data;
	if (s->node != NULL && !is_founder(s, e->id))
		baton_node_set_peer_addr(s->node, e->id, e->peer);
}

void server_addresses_to_transport(struct server *s)
{
	for (uint32_t i = 0; i < s->machine.book_n; i++)
		address_changed(s, &s->machine.book[i]);
}

const struct book_entry *server_address(struct server *s, baton_node_id id)
{
	const struct book_entry *e = server_machine_book_find(&s->machine, id);
	if (e != NULL)
		return e;
	/* Not replicated yet: a founder's addresses are known from the
	 * --bootstrap list. */
	for (uint32_t i = 0; i < s->cfg.n_founders; i++) {
		if (s->cfg.founders[i] != id)
			continue;
		static struct book_entry founder;
		founder.id = id;
		snprintf(founder.peer, sizeof founder.peer, "%s",
			 s->cfg.founder_peer[i]);
		snprintf(founder.client, sizeof founder.client, "%s",
			 s->cfg.founder_client[i]);
		return &founder;
	}
	return NULL;
}

static void published(void *data, int status, const uint8_t *reply, size_t len)
{
	(void)data;
	(void)reply;
	(void)len;
	if (status != 0)
		LOG_DEBUG("publishing an address: %s", baton_strerror(status));
}

void server_publish_founders(struct server *s)
{
	for (uint32_t i = 0; i < s->cfg.n_founders; i++) {
		if (server_machine_book_find(&s->machine, s->cfg.founders[i]))
			continue;
		struct book_entry e = {.id = s->cfg.founders[i]};
		snprintf(e.peer, sizeof e.peer, "%s", s->cfg.founder_peer[i]);
		snprintf(e.client, sizeof e.client, "%s",
			 s->cfg.founder_client[i]);
		struct baton_buf b;
		baton_buf_init(&b);
		int rv = server_machine_encode_address(&e, &b);
		if (rv == 0)
			rv = baton_node_propose(s->node, b.data, b.len,
						published, NULL);
		if (rv != 0)
			LOG_DEBUG("publishing the address of %" PRIu64 ": %s",
				  e.id, baton_strerror(rv));
		baton_buf_free(&b);
	}
}

/* ---- the stall ----------------------------------------------------------- */

/* Stalled for want of a newer release (the log's machine version or
 * release floor is above this node's): a node of a newer release serves
 * what this one cannot, and a rolling upgrade (or an explicit downgrade)
 * ends it. Rare, so the full status is fine here. */
static bool stalled_for_a_release(struct server *s)
{
	static struct baton_node_status st;
	baton_node_status(s->node, &st);
	const struct baton_release *r = &st.raft.needs_release;
	return st.stalled_index != 0 &&
	       (st.raft.needs_machine.value != 0 || r->major != 0 ||
		r->minor != 0 || r->patch != 0);
}

bool server_reply_if_stalled(struct server *s, struct baton_buf *b)
{
	if (server_reply_if_removed(s, b))
		return true;
	const char *why;
	baton_index at = baton_node_stalled(s->node, &why);
	if (at == 0)
		return false;
	if (stalled_for_a_release(s)) {
		/* Only where the command cannot be passed on (docs/clients.md,
		 * "Retryable errors"): the node will apply again once it, or
		 * the cluster, changes release; another node serves now. */
		resp_error(b,
			   "TRYAGAIN this node waits for a newer release "
			   "(stopped applying at index %" PRIu64
			   ") and cannot pass this command on now; retry, "
			   "here or on another node",
			   at);
		return true;
	}
	/* The text usually starts "stopped applying at index N: ...". */
	if (strncmp(why, "stopped applying", 16) == 0)
		resp_error(b, "STALLED this node %s", why);
	else
		resp_error(b,
			   "STALLED this node stopped applying at index "
			   "%" PRIu64 ": %s",
			   at, why);
	return true;
}

bool server_stall_routes(struct server *s)
{
	const char *why;
	if (baton_node_stalled(s->node, &why) == 0 || s->identity.removed)
		return false;
	/* Only a stall for want of a newer release: the leader runs one and
	 * serves what this node cannot (an entry no release knows stalls
	 * the leader too). With no leader known (a hand-over, an election)
	 * the command waits for one like any follower's write. */
	return stalled_for_a_release(s);
}

bool server_stalled_here(struct server *s)
{
	const char *why;
	return baton_node_stalled(s->node, &why) != 0;
}

void server_reply_error(struct server *s, struct baton_buf *b, int code)
{
	if (code == BATON_ESTALLED && server_reply_if_stalled(s, b))
		return;
	reply_error_for(b, code);
}

/* ---- the node's callbacks ------------------------------------------------ */

static void peer_frame(void *data, baton_node_id from,
		       const struct baton_peer_frame *f)
{
	if (f->kind == BATON_PEER_JOIN || f->kind == BATON_PEER_JOIN_REPLY)
		join_on_frame(data, from, f);
	else
		forward_on_frame(data, from, f);
}

static const char *peer_addr(void *data, baton_node_id id)
{
	const struct book_entry *e = server_address(data, id);
	return e != NULL ? e->peer : NULL;
}

static void leader_changed(void *data, baton_node_id leader)
{
	struct server *s = data;
	bool changed = leader != s->leader;
	if (changed && leader != 0)
		s->stats.leader_changes++;
	s->leader = leader;
	if (changed)
		held_leader_changed(s, leader);
	if (leader == s->cfg.id)
		server_publish_founders(s);
	if (changed)
		route_leader_changed(s, leader);
}

static void peer_down(void *data, baton_node_id id)
{
	forward_peer_down(data, id);
}

static void converted(void *data, baton_index index,
		      struct baton_machine_version from,
		      struct baton_machine_version to,
		      const struct baton_machine_loss *lost)
{
	(void)data;
	LOG_INFO("machine version %u -> %u at index %" PRIu64
		 ": converted down; %s",
		 from.value, to.value, index,
		 lost->n > 0 ? lost->text : "no live key lost anything");
}

static void kv_applied(void *data, baton_index index, const uint8_t *payload,
		       size_t len)
{
	migration_kv_applied(data, index, payload, len);
}

void server_node_app(struct server *s, struct baton_node_app *app)
{
	memset(app, 0, sizeof *app);
	app->data = s;
	app->machine = &s->machine.base;
	app->peer_frame = peer_frame;
	app->leader_changed = leader_changed;
	app->peer_addr = peer_addr;
	app->peer_down = peer_down;
	s->machine.address_changed = address_changed;
	s->machine.converted = converted;
	s->machine.kv_applied = kv_applied;
	s->machine.data = s;
}
