/*
 * What baton-relay does with each frame (docs/relay-protocol.md "The
 * session", "The global view", "Streams"): registration, views, DATA and
 * ACK forwarding with `peer` rewritten, STATUS, PING, activation.
 */
#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "server_internal.h"

/* The node c registered, or NULL (not a node, or replaced or left). */
static struct relay_node *node_of(struct relay_conn *c)
{
	if (c->role != CONN_NODE)
		return NULL;
	struct relay_table *t = &c->srv->table;
	for (uint16_t i = 0; i < t->count; i++)
		if (t->nodes[i].conn == c)
			return &t->nodes[i];
	return NULL;
}

/* Make the next view number durable, then send the VIEW to every
 * connected node. */
static void install_one_view(struct relay_server *srv, const char *why)
{
	BATON_ASSERT(srv->table.count <= BATON_RELAY_NODES_MAX);
	struct relay_state next = srv->state;
	next.view_number++;
	char err[512];
	if (relay_state_store(srv->cfg->data_dir, &next, err, sizeof(err)) !=
	    0) {
		relay_fatal(srv, "cannot make view %llu durable: %s",
			    (unsigned long long)next.view_number, err);
		return;
	}
	srv->state = next;
	relay_table_view(&srv->table, srv->view_nodes);
	struct baton_relay_frame f = {.type = BATON_RELAY_VIEW};
	f.u.view.number = next.view_number;
	f.u.view.node_count = srv->table.count;
	f.u.view.nodes = srv->view_nodes;
	struct relay_buf *b = relay_encode(&f);
	char list[1024];
	size_t used = 0;
	list[0] = '\0';
	for (uint16_t i = 0; i < srv->table.count; i++) {
		const struct relay_node *n = &srv->table.nodes[i];
		if (n->conn != NULL && !((struct relay_conn *)n->conn)->closing)
			conn_send(n->conn, b, false);
		if (used < sizeof(list) - 64)
			used += (size_t)snprintf(
				list + used, sizeof(list) - used,
				"%s%.*s/%llu%s", i ? " " : "",
				(int)n->cluster_id_len, n->cluster_id,
				(unsigned long long)n->node_id,
				n->conn ? "" : "(disconnected)");
	}
	relay_buf_release(b);
	relay_log(RELAY_LOG_INFO, "view %llu (%s): %u nodes: %s",
		  (unsigned long long)next.view_number, why, srv->table.count,
		  list);
}

/* Sending a VIEW can overload a node, whose disconnect needs a view of
 * its own: that one is installed after every node got this one, so that
 * every node sees the numbers in increasing order. */
static void install_view(struct relay_server *srv, const char *why)
{
	if (srv->installing_view) {
		srv->view_pending = true;
		return;
	}
	srv->installing_view = true;
	install_one_view(srv, why);
	while (srv->view_pending && srv->exit_code == 0) {
		srv->view_pending = false;
		install_one_view(srv, "a node was disconnected");
	}
	srv->installing_view = false;
	BATON_ASSERT(!srv->view_pending || srv->exit_code != 0);
}

void session_forget(struct relay_server *srv)
{
	uint16_t removed = relay_table_forget(&srv->table, relay_now_ms(srv),
					      srv->cfg->forget_after_ms);
	if (removed == 0)
		return;
	relay_log(RELAY_LOG_INFO,
		  "forgot %u node(s) disconnected for %llu ms or more", removed,
		  (unsigned long long)srv->cfg->forget_after_ms);
	install_view(srv, "disconnected nodes forgotten");
}

void session_detach(struct relay_conn *c)
{
	struct relay_node *n = node_of(c);
	c->role = CONN_DONE;
	if (n == NULL)
		return;
	n->conn = NULL;
	n->disconnected_ms = relay_now_ms(c->srv);
	relay_log(RELAY_LOG_INFO, "disconnected %.*s/%llu (%s)",
		  (int)n->cluster_id_len, n->cluster_id,
		  (unsigned long long)n->node_id, c->name);
	if (!c->srv->stopping)
		install_view(c->srv, "a node disconnected");
}

static void send_activation(struct relay_conn *c, bool active)
{
	struct baton_relay_frame f = {.type = active ? BATON_RELAY_ACTIVATE
						     : BATON_RELAY_DEACTIVATE};
	conn_send_frame(c, &f);
}

void session_set_active(struct relay_server *srv, bool active)
{
	if (srv->state.active == active || srv->stopping)
		return;
	struct relay_state next = srv->state;
	next.active = active;
	char err[512];
	if (relay_state_store(srv->cfg->data_dir, &next, err, sizeof(err)) !=
	    0) {
		relay_fatal(srv, "cannot store the active flag: %s", err);
		return;
	}
	srv->state = next;
	relay_log(RELAY_LOG_INFO, "%s: sending %s to every node",
		  active ? "activated" : "deactivated",
		  active ? "ACTIVATE" : "DEACTIVATE");
	for (uint16_t i = 0; i < srv->table.count; i++)
		if (srv->table.nodes[i].conn != NULL)
			send_activation(srv->table.nodes[i].conn, active);
}

static void welcome(struct relay_conn *c, uint16_t code, const char *reason)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_WELCOME};
	f.u.welcome.code = code;
	f.u.welcome.relay_incarnation = c->srv->incarnation;
	f.u.welcome.reason.ptr = reason;
	f.u.welcome.reason.len = (uint16_t)strlen(reason);
	conn_send_frame(c, &f);
}

/* Refuse a HELLO: WELCOME with the code and reason, logged, then close. */
static void refuse(struct relay_conn *c, const struct baton_relay_hello *h,
		   uint16_t code, const char *reason)
{
	relay_log(RELAY_LOG_WARN, "%s: refused %.*s/%llu: %s (%s)", c->name,
		  (int)h->cluster_id.len, h->cluster_id.ptr,
		  (unsigned long long)h->node_id, reason,
		  baton_relay_code_name(code));
	conn_reason(c, "registration of %.*s/%llu refused: %s",
		    (int)h->cluster_id.len, h->cluster_id.ptr,
		    (unsigned long long)h->node_id, reason);
	welcome(c, code, reason);
	conn_finish(c);
}

static void on_hello(struct relay_conn *c, const struct baton_relay_hello *h,
		     const struct baton_relay_ext *ext)
{
	struct relay_server *srv = c->srv;
	char why[BATON_RELAY_TEXT_MAX];
	uint16_t code = session_auth_check(srv, h, ext, why, sizeof why);
	if (code != 0) {
		refuse(c, h, code, why);
		return;
	}
	void *replaced = NULL;
	struct relay_node *n =
		relay_table_register(&srv->table, h, c, &replaced);
	if (n == NULL) {
		char reason[128];
		snprintf(reason, sizeof(reason),
			 "the view holds %u nodes, the most it may",
			 BATON_RELAY_NODES_MAX);
		refuse(c, h, BATON_RELAY_EVIEW_FULL, reason);
		return;
	}
	c->role = CONN_NODE;
	n->state_flags = 0; /* until its STATUS says otherwise */
	snprintf(c->ident, sizeof c->ident, "%.*s/%llu", (int)h->cluster_id.len,
		 h->cluster_id.ptr, (unsigned long long)h->node_id);
	relay_log(RELAY_LOG_INFO,
		  "join %.*s/%llu incarnation %llu release %u.%u.%u address "
		  "%.*s from %s%s",
		  (int)h->cluster_id.len, h->cluster_id.ptr,
		  (unsigned long long)h->node_id,
		  (unsigned long long)h->incarnation, h->release.major,
		  h->release.minor, h->release.patch, (int)h->address.len,
		  h->address.ptr, c->name,
		  replaced ? " (replacing its older connection)" : "");
	if (replaced != NULL)
		conn_fail(replaced, BATON_RELAY_EREPLACED, 0,
			  "a newer connection (%s) registered the same node",
			  c->name);
	welcome(c, 0, "");
	install_view(srv, "a node joined");
	if (srv->state.active && !c->closing)
		send_activation(c, true);
}

static void on_leave(struct relay_conn *c, const struct baton_relay_leave *l)
{
	struct relay_node *n = node_of(c);
	BATON_ASSERT(n != NULL);
	char reason[256];
	relay_log(RELAY_LOG_INFO, "leave %.*s/%llu (%s): %s",
		  (int)n->cluster_id_len, n->cluster_id,
		  (unsigned long long)n->node_id, c->name,
		  baton_relay_escape(l->reason.ptr, l->reason.len, reason,
				     sizeof(reason)));
	conn_reason(c, "left (LEAVE: %s)", reason);
	relay_table_remove(&c->srv->table, n);
	c->role = CONN_DONE;
	install_view(c->srv, "a node left");
	conn_finish(c);
}

/* The destination of a unicast, if it is registered, connected and the
 * incarnation the source names. */
static struct relay_node *live_node(struct relay_server *srv,
				    const struct baton_relay_peer *p)
{
	struct relay_node *n =
		relay_table_find(&srv->table, p->cluster_id, p->node_id);
	if (n == NULL || n->conn == NULL || n->incarnation != p->incarnation ||
	    ((struct relay_conn *)n->conn)->closing)
		return NULL;
	return n;
}

static void forward(struct relay_server *srv, struct relay_node *to,
		    struct relay_buf *b, uint32_t payload_len)
{
	if (conn_send(to->conn, b, true)) {
		to->messages_out++;
		srv->messages_relayed++;
		srv->bytes_relayed += payload_len;
	} else {
		srv->messages_dropped++;
	}
}

static void on_data(struct relay_conn *c, const struct baton_relay_data *d)
{
	struct relay_server *srv = c->srv;
	struct relay_node *src = node_of(c);
	BATON_ASSERT(src != NULL);
	if (!srv->state.active) {
		conn_fail(c, BATON_RELAY_EUNEXPECTED, BATON_RELAY_DATA,
			  "DATA while the relay is inactive: wait for "
			  "ACTIVATE");
		return;
	}
	src->messages_in++;
	struct baton_relay_frame f = {.type = BATON_RELAY_DATA};
	f.u.data = *d;
	f.u.data.peer = relay_node_peer(src);
	struct relay_buf *b = relay_encode(&f);
	bool sent = false;
	if (d->kind == BATON_RELAY_UNICAST) {
		struct relay_node *to = live_node(srv, &d->peer);
		if (to != NULL) {
			forward(srv, to, b, d->payload_len);
			sent = true;
		}
	} else {
		/* Every connected node of the cluster but the source. */
		for (uint16_t i = 0; i < srv->table.count; i++) {
			struct relay_node *to = &srv->table.nodes[i];
			struct baton_relay_str cid = {to->cluster_id,
						      to->cluster_id_len};
			if (to == src || to->conn == NULL ||
			    cid.len != d->peer.cluster_id.len ||
			    memcmp(cid.ptr, d->peer.cluster_id.ptr, cid.len))
				continue;
			forward(srv, to, b, d->payload_len);
			sent = true;
		}
	}
	if (!sent) {
		srv->messages_dropped++;
		relay_log(RELAY_LOG_DEBUG,
			  "dropped DATA seq %llu from %s: no live destination",
			  (unsigned long long)d->seq, c->name);
	}
	relay_buf_release(b);
}

static void on_ack(struct relay_conn *c, const struct baton_relay_ack *a)
{
	struct relay_node *receiver = node_of(c);
	BATON_ASSERT(receiver != NULL);
	struct relay_node *source = live_node(c->srv, &a->peer);
	if (source == NULL) {
		relay_log(RELAY_LOG_DEBUG,
			  "dropped ACK seq %llu from %s: source not live",
			  (unsigned long long)a->seq, c->name);
		return;
	}
	struct baton_relay_frame f = {.type = BATON_RELAY_ACK};
	f.u.ack = *a;
	f.u.ack.peer = relay_node_peer(receiver);
	conn_send_frame(source->conn, &f);
}

static void on_status(struct relay_conn *c, const struct baton_relay_ext *ext)
{
	struct relay_server *srv = c->srv;
	struct relay_node *me = node_of(c);
	if (me != NULL)
		me->state_flags = baton_relay_node_state_get(ext);
	uint8_t result[BATON_RELAY_ADMIN_RESULT_ENTRY_MAX];
	size_t result_len = session_admin_request(c, ext, result);
	for (uint16_t i = 0; i < srv->table.count; i++) {
		const struct relay_node *n = &srv->table.nodes[i];
		const struct relay_conn *nc = n->conn;
		srv->status_nodes[i] = (struct baton_relay_node_status){
			.cluster_id = {n->cluster_id, n->cluster_id_len},
			.node_id = n->node_id,
			.incarnation = n->incarnation,
			.connected = nc != NULL,
			.queue_messages = nc ? nc->queue_messages : 0,
			.queue_bytes = nc ? nc->queue_bytes : 0,
			.messages_in = n->messages_in,
			.messages_out = n->messages_out,
		};
	}
	struct baton_relay_frame f = {.type = BATON_RELAY_STATUS_REPLY};
	struct baton_relay_status_reply *r = &f.u.status_reply;
	r->relay_incarnation = srv->incarnation;
	r->view_number = srv->state.view_number;
	r->active = srv->state.active;
	r->messages_relayed = srv->messages_relayed;
	r->bytes_relayed = srv->bytes_relayed;
	r->messages_dropped = srv->messages_dropped;
	r->node_count = srv->table.count;
	r->nodes = srv->status_nodes;
	f.ext.ptr = result;
	f.ext.len = (uint32_t)result_len;
	conn_send_frame(c, &f);
}

static void on_error(struct relay_conn *c, const struct baton_relay_error *e)
{
	char text[512];
	relay_log(RELAY_LOG_WARN, "%s sent ERROR %s (%u): %s: closing", c->name,
		  baton_relay_code_name(e->code), e->code,
		  baton_relay_escape(e->text.ptr, e->text.len, text,
				     sizeof(text)));
	conn_reason(c, "the peer sent ERROR %s",
		    baton_relay_code_name(e->code));
	conn_finish(c);
}

/* Frames every role may send once past the first frame. */
static bool common_frame(struct relay_conn *c,
			 const struct baton_relay_frame *f)
{
	switch (f->type) {
	case BATON_RELAY_PING: {
		struct baton_relay_frame pong = {.type = BATON_RELAY_PONG};
		pong.u.ping_token = f->u.ping_token;
		conn_send_frame(c, &pong);
		return true;
	}
	case BATON_RELAY_PONG:
		return true;
	case BATON_RELAY_STATUS:
		on_status(c, &f->ext);
		return true;
	case BATON_RELAY_ERROR:
		on_error(c, &f->u.error);
		return true;
	default:
		return false;
	}
}

void session_frame(struct relay_conn *c, const struct baton_relay_frame *f)
{
	BATON_ASSERT(!c->closing);
	BATON_ASSERT(c->role != CONN_DONE);
	uint16_t type = (uint16_t)f->type;
	if (c->role == CONN_NEW) {
		if (type == BATON_RELAY_HELLO) {
			on_hello(c, &f->u.hello, &f->ext);
		} else if (type == BATON_RELAY_STATUS) {
			c->role = CONN_MONITOR;
			on_status(c, &f->ext);
		} else if (type == BATON_RELAY_ERROR) {
			on_error(c, &f->u.error);
		} else {
			conn_fail(c, BATON_RELAY_ENOT_REGISTERED, type,
				  "%s before HELLO (or STATUS, for a monitor)",
				  baton_relay_type_name(type));
		}
		return;
	}
	if (common_frame(c, f))
		return;
	if (c->role == CONN_NODE && type == BATON_RELAY_DATA)
		on_data(c, &f->u.data);
	else if (c->role == CONN_NODE && type == BATON_RELAY_ACK)
		on_ack(c, &f->u.ack);
	else if (c->role == CONN_NODE && type == BATON_RELAY_LEAVE)
		on_leave(c, &f->u.leave);
	else
		conn_fail(c, BATON_RELAY_EUNEXPECTED, type,
			  "%s not allowed on a %s connection",
			  baton_relay_type_name(type),
			  c->role == CONN_NODE ? "registered node's"
					       : "monitor's");
}
