/*
 * The node-side relay client's incoming frames (client_internal.h): the
 * session (WELCOME, ERROR, ACTIVATE, DEACTIVATE), the global view and what
 * it changes for the streams, and the incoming streams (DATA delivered in
 * order, exactly once, and acknowledged).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
/* batond's log (src/relay/log.h is baton-relay's own). */
#include "../io/log.h"
#include "client_internal.h"

/* ---- incoming frames ------------------------------------------------------
 */

static void send_ack(struct relay_client *c, const struct in_stream *in)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_ACK};
	f.u.ack.kind = in->kind;
	f.u.ack.peer.cluster_id.ptr = in->cluster;
	f.u.ack.peer.cluster_id.len = in->cluster_len;
	f.u.ack.peer.node_id = in->node_id;
	f.u.ack.peer.incarnation = in->incarnation;
	f.u.ack.seq = in->last;
	if (!relay_client__conn_send_frame(c->conn, &f)) {
		relay_client__set_error(
			c, "cannot queue an ACK on the connection");
		relay_client__lose_connection(c);
	}
}

void relay_client__send_due_acks(struct relay_client *c)
{
	for (size_t i = 0; i < c->nin && c->conn != NULL; i++) {
		if (!c->in[i].ack_due)
			continue;
		c->in[i].ack_due = false;
		send_ack(c, &c->in[i]);
	}
}

static bool in_view(const struct relay_client *c, const struct in_stream *in)
{
	for (uint16_t i = 0; i < c->view_count; i++)
		if (c->view[i].node_id == in->node_id &&
		    c->view[i].incarnation == in->incarnation &&
		    str_eq(c->view[i].cluster, c->view[i].cluster_len,
			   in->cluster, in->cluster_len))
			return true;
	return false;
}

static struct in_stream *find_in(struct relay_client *c,
				 const struct baton_relay_data *d)
{
	const struct baton_relay_peer *p = &d->peer;
	for (size_t i = 0; i < c->nin; i++) {
		struct in_stream *in = &c->in[i];
		if (in->kind == d->kind && in->node_id == p->node_id &&
		    in->incarnation == p->incarnation &&
		    str_eq(in->cluster, in->cluster_len, p->cluster_id.ptr,
			   p->cluster_id.len))
			return in;
	}
	if (c->nin == RELAY_CLIENT_IN_STREAMS_MAX) {
		/* Forget one whose source left the view. */
		size_t i = 0;
		while (i < c->nin && in_view(c, &c->in[i]))
			i++;
		if (i == c->nin)
			return NULL;
		c->in[i] = c->in[--c->nin];
	}
	if (c->nin == c->in_cap) {
		size_t cap = c->in_cap ? c->in_cap * 2 : 16;
		struct in_stream *n = realloc(c->in, cap * sizeof(*n));
		if (n == NULL)
			return NULL;
		c->in = n;
		c->in_cap = cap;
	}
	struct in_stream *in = &c->in[c->nin++];
	memset(in, 0, sizeof(*in));
	in->kind = d->kind;
	in->cluster_len = p->cluster_id.len;
	memcpy(in->cluster, p->cluster_id.ptr, p->cluster_id.len);
	in->node_id = p->node_id;
	in->incarnation = p->incarnation;
	in->last = d->first_seq - 1;
	return in;
}

static void on_data_frame(struct relay_client *c,
			  const struct baton_relay_data *d)
{
	BATON_ASSERT(d->seq >= d->first_seq && d->first_seq >= 1);
	if (!c->active) {
		/* Not delivered, not acknowledged: the source sends it again
		 * once both are active. */
		LOG_DEBUG("relay: DATA seq %llu while inactive: ignored",
			  (unsigned long long)d->seq);
		return;
	}
	struct in_stream *in = find_in(c, d);
	if (in == NULL) {
		LOG_WARN_LIMITED("relay: DATA from a new stream dropped: %u "
				 "streams are remembered, the most this "
				 "client keeps (RELAY_CLIENT_IN_STREAMS_MAX)",
				 RELAY_CLIENT_IN_STREAMS_MAX);
		return;
	}
	in->ack_due = true;
	if (d->seq <= in->last) {
		c->duplicates++;
		return;
	}
	if (d->seq > in->last + 1 && d->first_seq > in->last + 1) {
		/* The source no longer keeps what this node misses: it
		 * dropped them when this node left its view. Waiting would
		 * stall the stream forever. */
		LOG_WARN("relay: %.*s/%llu dropped seqs %llu..%llu of its %s "
			 "stream to this node (this node left its view): "
			 "resuming at %llu",
			 (int)in->cluster_len, in->cluster,
			 (unsigned long long)in->node_id,
			 (unsigned long long)in->last + 1,
			 (unsigned long long)d->first_seq - 1,
			 in->kind ? "multicast" : "unicast",
			 (unsigned long long)d->first_seq);
		in->last = d->first_seq - 1;
	}
	if (d->seq != in->last + 1) {
		c->gaps++;
		return;
	}
	in->last = d->seq;
	c->received++;
	if (c->cb.on_data != NULL)
		c->cb.on_data(c->cb.arg, in->cluster, in->node_id,
			      in->incarnation, d->kind == BATON_RELAY_MULTICAST,
			      d->payload, d->payload_len);
}

/* The resume rule: "the last I received" for every stream held (from
 * every source, or from one source incarnation). */
static void mark_resume_acks(struct relay_client *c, const struct view_node *v)
{
	for (size_t i = 0; i < c->nin; i++) {
		struct in_stream *in = &c->in[i];
		if (v == NULL || (in->node_id == v->node_id &&
				  in->incarnation == v->incarnation &&
				  str_eq(in->cluster, in->cluster_len,
					 v->cluster, v->cluster_len)))
			in->ack_due = true;
	}
}

static void on_welcome(struct relay_client *c,
		       const struct baton_relay_welcome *w)
{
	char reason[512];
	if (w->code != 0) {
		baton_relay_escape(w->reason.ptr, w->reason.len, reason,
				   sizeof(reason));
		LOG_WARN("relay %s refused registration: %s (%u): %s: retrying "
			 "with back-off",
			 c->relay_addr, baton_relay_code_name(w->code), w->code,
			 reason);
		relay_client__set_error(c, "registration refused: %s: %s",
					baton_relay_code_name(w->code), reason);
		relay_client__end_session(c, c->conn, true);
		return;
	}
	if (c->relay_incarnation != 0 &&
	    c->relay_incarnation != w->relay_incarnation)
		LOG_INFO("relay %s restarted (incarnation %llu, was %llu): "
			 "resending what is not acknowledged",
			 c->relay_addr,
			 (unsigned long long)w->relay_incarnation,
			 (unsigned long long)c->relay_incarnation);
	else
		LOG_INFO("relay %s: registered as %s/%llu (incarnation %llu)",
			 c->relay_addr, c->cluster_id,
			 (unsigned long long)c->cfg.node_id,
			 (unsigned long long)c->cfg.incarnation);
	c->registered = true;
	c->relay_incarnation = w->relay_incarnation;
	c->backoff_ms = c->cfg.reconnect_min_ms;
	for (size_t i = 0; i < c->nout; i++)
		relay_client__rewind_stream(c, c->out[i], 0);
	mark_resume_acks(c, NULL);
	relay_client__send_state(c);
}

static const struct view_node *find_view_node(const struct view_node *nodes,
					      uint16_t count,
					      const struct view_node *v)
{
	for (uint16_t i = 0; i < count; i++)
		if (nodes[i].node_id == v->node_id &&
		    str_eq(nodes[i].cluster, nodes[i].cluster_len, v->cluster,
			   v->cluster_len))
			return &nodes[i];
	return NULL;
}

/* What a new view changes for the streams: unicast destinations that left
 * (or restarted) are owed nothing more; destinations newly connected get
 * what they miss again; sources newly connected get our ACKs. */
static void apply_view(struct relay_client *c, const struct view_node *old,
		       uint16_t old_count)
{
	bool was_connected[BATON_RELAY_NODES_MAX];
	for (uint16_t i = 0; i < c->view_count; i++) {
		const struct view_node *v = &c->view[i];
		const struct view_node *o = find_view_node(old, old_count, v);
		was_connected[i] = o != NULL && o->connected &&
				   o->incarnation == v->incarnation;
		if (v->connected && !was_connected[i])
			mark_resume_acks(c, v);
	}
	for (size_t k = 0; k < c->nout; k++) {
		struct out_stream *s = c->out[k];
		if (s->kind == BATON_RELAY_MULTICAST) {
			relay_client__update_multicast_dests(c, s,
							     was_connected);
			continue;
		}
		const struct view_node *v;
		uint16_t i = 0;
		bool present = relay_client__still_owed(
			c, s->cluster, s->cluster_len, s->node_id,
			s->incarnation, s->seen_relay_incarnation, &v, &i);
		if (present && v != NULL) {
			s->seen_relay_incarnation = c->relay_incarnation;
			if (v->connected && !was_connected[i])
				relay_client__rewind_stream(c, s, s->acked);
		}
		if (!present && !s->gone && s->count > 0)
			LOG_WARN("relay: %.*s/%llu (incarnation %llu) left the "
				 "view: %zu message(s) to it, seqs %llu..%llu, "
				 "were never acknowledged and are dropped",
				 (int)s->cluster_len, s->cluster,
				 (unsigned long long)s->node_id,
				 (unsigned long long)s->incarnation, s->count,
				 (unsigned long long)relay_client__head_seq(s),
				 (unsigned long long)s->last_seq);
		if (!present) {
			s->gone = true;
			relay_client__release_acked(c, s, true);
		}
	}
}

static void on_view_frame(struct relay_client *c,
			  const struct baton_relay_view *view)
{
	if (view->number <= c->view_number) {
		if (c->view_relay_incarnation == c->relay_incarnation) {
			relay_client__conn_fail(
				c, BATON_RELAY_EUNEXPECTED, BATON_RELAY_VIEW,
				"VIEW %llu is not above view %llu, the last "
				"installed from this relay incarnation "
				"(%llu)",
				(unsigned long long)view->number,
				(unsigned long long)c->view_number,
				(unsigned long long)c->relay_incarnation);
			return;
		}
		LOG_WARN("relay %s (incarnation %llu) sent view %llu, not "
			 "above view %llu of its previous incarnation: it lost "
			 "its data directory; installing it",
			 c->relay_addr,
			 (unsigned long long)c->relay_incarnation,
			 (unsigned long long)view->number,
			 (unsigned long long)c->view_number);
	}
	struct baton_relay_list rest = view->records;
	struct baton_relay_node n;
	uint16_t count = 0;
	while (baton_relay_view_next(&rest, &n)) {
		BATON_ASSERT(count < BATON_RELAY_NODES_MAX);
		struct view_node *v = &c->next_view[count++];
		memset(v, 0, sizeof(*v));
		v->cluster_len = n.cluster_id.len;
		memcpy(v->cluster, n.cluster_id.ptr, n.cluster_id.len);
		v->node_id = n.node_id;
		v->incarnation = n.incarnation;
		v->release = n.release;
		memcpy(v->address, n.address.ptr, n.address.len);
		v->connected = n.connected;
	}
	BATON_ASSERT(count == view->node_count);
	struct view_node *old = c->view;
	uint16_t old_count = c->view_count;
	c->view = c->next_view;
	c->next_view = old;
	c->view_count = count;
	c->view_number = view->number;
	c->view_relay_incarnation = c->relay_incarnation;
	LOG_INFO("relay: view %llu installed: %u node(s)",
		 (unsigned long long)view->number, count);
	apply_view(c, old, old_count);
	if (c->cb.on_view == NULL)
		return;
	for (uint16_t i = 0; i < count; i++)
		c->view_out[i] = (struct relay_view_node){
			.cluster_id = c->view[i].cluster,
			.node_id = c->view[i].node_id,
			.incarnation = c->view[i].incarnation,
			.release = c->view[i].release,
			.address = c->view[i].address,
			.connected = c->view[i].connected,
		};
	c->cb.on_view(c->cb.arg, c->view_number, c->view_out, count);
}

static void on_error_frame(struct relay_client *c,
			   const struct baton_relay_error *e)
{
	char text[512];
	baton_relay_escape(e->text.ptr, e->text.len, text, sizeof(text));
	LOG_WARN("relay %s sent ERROR %s (%u) about frame %s: %s: reconnecting",
		 c->relay_addr, baton_relay_code_name(e->code), e->code,
		 e->frame_type ? baton_relay_type_name(e->frame_type) : "none",
		 text);
	relay_client__set_error(c, "relay sent ERROR %s: %s",
				baton_relay_code_name(e->code), text);
	relay_client__end_session(c, c->conn, false);
}

static void set_active(struct relay_client *c, bool active)
{
	if (c->active == active)
		return;
	c->active = active;
	LOG_INFO("relay %s: %s", c->relay_addr,
		 active ? "activated" : "deactivated");
	if (c->cb.on_active != NULL)
		c->cb.on_active(c->cb.arg, active);
	if (active && c->conn != NULL)
		relay_client__flush(c);
}

void relay_client__handle_frame(struct relay_client *c,
				const struct baton_relay_frame *f)
{
	uint16_t type = (uint16_t)f->type;
	if (type == BATON_RELAY_ERROR) {
		on_error_frame(c, &f->u.error);
	} else if (type == BATON_RELAY_PING) {
		struct baton_relay_frame pong = {.type = BATON_RELAY_PONG};
		pong.u.ping_token = f->u.ping_token;
		if (!relay_client__conn_send_frame(c->conn, &pong))
			relay_client__lose_connection(c);
	} else if (type == BATON_RELAY_PONG ||
		   type == BATON_RELAY_STATUS_REPLY) {
		/* PONG: receiving it is the point; a STATUS_REPLY answers
		 * the STATUS that carried NODE_STATE, and says nothing the
		 * node needs. */
	} else if (!c->registered) {
		if (type == BATON_RELAY_WELCOME)
			on_welcome(c, &f->u.welcome);
		else
			relay_client__conn_fail(c, BATON_RELAY_EUNEXPECTED,
						type, "%s before WELCOME",
						baton_relay_type_name(type));
	} else if (type == BATON_RELAY_VIEW) {
		on_view_frame(c, &f->u.view);
	} else if (type == BATON_RELAY_DATA) {
		on_data_frame(c, &f->u.data);
	} else if (type == BATON_RELAY_ACK) {
		relay_client__on_ack_frame(c, &f->u.ack);
	} else if (type == BATON_RELAY_ACTIVATE ||
		   type == BATON_RELAY_DEACTIVATE) {
		set_active(c, type == BATON_RELAY_ACTIVATE);
	} else {
		relay_client__conn_fail(
			c, BATON_RELAY_EUNEXPECTED, type,
			"%s after WELCOME: a second registration answer",
			baton_relay_type_name(type));
	}
}
