/*
 * The node-side relay client's outgoing streams (client_internal.h):
 * queueing a message, writing what is unsent, freeing what is
 * acknowledged, following the view's destinations, and resending.
 */
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
/* batond's log (src/relay/log.h is baton-relay's own). */
#include "../io/log.h"
#include "client_internal.h"

/* DATA is written while fewer bytes than this wait in the socket's write
 * queue; the rest goes out as writes complete. */
#define WRITE_WINDOW_BYTES (4u << 20)
/* The repeated-ACK resend (the receiver saw a gap): at most this often per
 * stream, standing for "once per round trip". */
#define RESEND_GUARD_MS 200u
/* Messages outstanding with no acknowledgement advancing for this long are
 * sent again (the protocol's optional retransmission rule 4). */
#define RESEND_STALL_MS 3000u

/* ---- outgoing streams -----------------------------------------------------
 */

uint64_t relay_client__head_seq(const struct out_stream *s)
{
	return s->count > 0 ? s->msgs[s->head].seq : s->last_seq + 1;
}

/* The seq through which every destination owed a message acknowledged it
 * (or was never owed it). */
static uint64_t stream_floor(const struct out_stream *s)
{
	if (s->kind == BATON_RELAY_UNICAST)
		return s->gone ? s->last_seq : s->acked;
	uint64_t floor = s->last_seq;
	for (size_t i = 0; i < s->ndests; i++) {
		const struct mc_dest *d = &s->dests[i];
		uint64_t through = d->acked > d->owed_from - 1
					   ? d->acked
					   : d->owed_from - 1;
		if (through < floor)
			floor = through;
	}
	return floor;
}

/* Free the messages through the stream's floor; counted as acknowledged,
 * or as dropped when their destination left. */
void relay_client__release_acked(struct relay_client *c, struct out_stream *s,
				 bool dropped)
{
	uint64_t floor = stream_floor(s);
	size_t freed = 0;
	while (s->count > 0 && s->msgs[s->head].seq <= floor) {
		struct out_msg *m = &s->msgs[s->head];
		BATON_ASSERT(c->queued_msgs > 0 && c->queued_bytes >= m->len);
		c->queued_msgs--;
		c->queued_bytes -= m->len;
		free(m->payload);
		s->head++;
		s->count--;
		freed++;
	}
	if (s->count == 0)
		s->head = 0;
	if (freed > 0)
		s->progress_ms = now_ms(c);
	if (dropped)
		c->dropped += freed;
	else
		c->acked += freed;
	if (s->sent_upto < relay_client__head_seq(s) - 1)
		s->sent_upto = relay_client__head_seq(s) - 1;
}

/* Send again from `from` + 1 (the stream's oldest message at the least). */
void relay_client__rewind_stream(struct relay_client *c, struct out_stream *s,
				 uint64_t from)
{
	uint64_t oldest = relay_client__head_seq(s) - 1;
	if (from < oldest)
		from = oldest;
	if (from < s->sent_upto)
		s->sent_upto = from;
	s->resend_ms = now_ms(c);
	s->progress_ms = now_ms(c);
}

static struct out_stream *find_out(struct relay_client *c, uint8_t kind,
				   const char *cluster, size_t cluster_len,
				   baton_node_id node, uint64_t incarnation)
{
	for (size_t i = 0; i < c->nout; i++) {
		struct out_stream *s = c->out[i];
		if (s->kind == kind &&
		    str_eq(s->cluster, s->cluster_len, cluster, cluster_len) &&
		    (kind == BATON_RELAY_MULTICAST ||
		     (s->node_id == node && s->incarnation == incarnation)))
			return s;
	}
	return NULL;
}

static bool is_self(const struct relay_client *c, const char *cluster,
		    size_t cluster_len, baton_node_id node)
{
	return node == c->cfg.node_id &&
	       str_eq(cluster, cluster_len, c->cluster_id,
		      strlen(c->cluster_id));
}

/* The view node of (cluster, node id), or NULL. */
static const struct view_node *view_find(const struct relay_client *c,
					 const char *cluster,
					 size_t cluster_len, baton_node_id node,
					 uint16_t *index)
{
	for (uint16_t i = 0; i < c->view_count; i++)
		if (c->view[i].node_id == node &&
		    str_eq(c->view[i].cluster, c->view[i].cluster_len, cluster,
			   cluster_len)) {
			if (index != NULL)
				*index = i;
			return &c->view[i];
		}
	return NULL;
}

/* Whether the destination (node, incarnation) is still owed messages after
 * the view: it is in it, or it is missing only from a restarted relay's
 * view (it has not registered again yet). *v: its view node, if there. */
bool relay_client__still_owed(const struct relay_client *c, const char *cluster,
			      size_t cluster_len, baton_node_id node,
			      uint64_t incarnation,
			      uint64_t seen_relay_incarnation,
			      const struct view_node **v, uint16_t *index)
{
	*v = view_find(c, cluster, cluster_len, node, index);
	if (*v != NULL)
		return (*v)->incarnation == incarnation;
	return seen_relay_incarnation != c->relay_incarnation;
}

/* A multicast stream's destinations follow the view: nodes of its cluster
 * that joined (or restarted) are owed what is sent from now on; those that
 * left are owed nothing more. Newly connected ones get a resend. */
void relay_client__update_multicast_dests(struct relay_client *c,
					  struct out_stream *s,
					  const bool *was_connected)
{
	BATON_ASSERT(s->kind == BATON_RELAY_MULTICAST);
	BATON_ASSERT(s->ndests <= BATON_RELAY_NODES_MAX);
	size_t kept = 0;
	bool removed = false;
	for (size_t k = 0; k < s->ndests; k++) {
		struct mc_dest d = s->dests[k];
		const struct view_node *v;
		uint16_t i = 0;
		if (!relay_client__still_owed(
			    c, s->cluster, s->cluster_len, d.node_id,
			    d.incarnation, d.seen_relay_incarnation, &v, &i)) {
			removed = true;
			continue;
		}
		if (v != NULL) {
			d.seen_relay_incarnation = c->relay_incarnation;
			if (v->connected && !was_connected[i])
				relay_client__rewind_stream(c, s, d.acked);
		}
		s->dests[kept++] = d;
	}
	s->ndests = kept;
	for (uint16_t i = 0; i < c->view_count; i++) {
		const struct view_node *v = &c->view[i];
		if (!str_eq(v->cluster, v->cluster_len, s->cluster,
			    s->cluster_len) ||
		    is_self(c, v->cluster, v->cluster_len, v->node_id))
			continue;
		bool known = false;
		for (size_t k = 0; k < s->ndests && !known; k++)
			known = s->dests[k].node_id == v->node_id &&
				s->dests[k].incarnation == v->incarnation;
		if (known)
			continue;
		BATON_ASSERT(s->ndests < BATON_RELAY_NODES_MAX);
		s->dests[s->ndests++] = (struct mc_dest){
			.node_id = v->node_id,
			.incarnation = v->incarnation,
			.owed_from = s->last_seq + 1,
			.seen_relay_incarnation = c->relay_incarnation,
		};
	}
	relay_client__release_acked(c, s, removed);
}

static struct out_stream *new_out(struct relay_client *c, uint8_t kind,
				  const char *cluster, baton_node_id node,
				  uint64_t incarnation)
{
	if (c->nout == c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap * 2 : 8;
		struct out_stream **o = realloc(c->out, cap * sizeof(*o));
		if (o == NULL)
			return NULL;
		c->out = o;
		c->out_cap = cap;
	}
	struct out_stream *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	if (kind == BATON_RELAY_MULTICAST) {
		s->dests = calloc(BATON_RELAY_NODES_MAX, sizeof(*s->dests));
		if (s->dests == NULL) {
			free(s);
			return NULL;
		}
	}
	s->kind = kind;
	s->cluster_len = (uint16_t)strlen(cluster);
	memcpy(s->cluster, cluster, s->cluster_len);
	s->node_id = node;
	s->incarnation = incarnation;
	s->seen_relay_incarnation = c->relay_incarnation;
	s->progress_ms = now_ms(c);
	c->out[c->nout++] = s;
	if (kind == BATON_RELAY_MULTICAST) {
		bool was_connected[BATON_RELAY_NODES_MAX];
		/* Everyone connected already: no resend is due. */
		for (uint16_t i = 0; i < c->view_count; i++)
			was_connected[i] = true;
		relay_client__update_multicast_dests(c, s, was_connected);
	}
	return s;
}

static bool has_unsent(const struct out_stream *s)
{
	return s->count > 0 && s->sent_upto < s->last_seq;
}

static bool send_next(struct relay_client *c, struct out_stream *s)
{
	uint64_t first = relay_client__head_seq(s);
	uint64_t seq = s->sent_upto + 1 > first ? s->sent_upto + 1 : first;
	BATON_ASSERT(seq >= first && seq <= s->last_seq);
	const struct out_msg *m = &s->msgs[s->head + (seq - first)];
	BATON_ASSERT(m->seq == seq);
	struct baton_relay_frame f = {.type = BATON_RELAY_DATA};
	struct baton_relay_data *d = &f.u.data;
	d->kind = s->kind;
	d->peer.cluster_id.ptr = s->cluster;
	d->peer.cluster_id.len = s->cluster_len;
	d->peer.node_id = s->node_id;
	d->peer.incarnation = s->incarnation;
	d->seq = seq;
	d->first_seq = first;
	d->payload = m->payload;
	d->payload_len = m->len;
	if (!relay_client__conn_send_frame(c->conn, &f)) {
		relay_client__set_error(c,
					"cannot queue DATA on the connection");
		relay_client__lose_connection(c);
		return false;
	}
	if (s->sent_upto == s->max_sent)
		s->progress_ms = now_ms(c); /* nothing was outstanding */
	s->sent_upto = seq;
	if (seq > s->max_sent) {
		s->max_sent = seq;
		c->sent++;
	} else {
		c->resent++;
	}
	return true;
}

bool relay_client__can_send(const struct relay_client *c)
{
	return c->conn != NULL && c->registered && c->active && !c->closing;
}

/* Write what is unsent, one message per stream in turn, while the socket's
 * write queue is below the window. */
void relay_client__flush(struct relay_client *c)
{
	bool progress = true;
	while (progress && relay_client__can_send(c) &&
	       c->conn->write_queue_bytes < WRITE_WINDOW_BYTES) {
		progress = false;
		size_t n = c->nout;
		for (size_t i = 0; i < n && relay_client__can_send(c); i++) {
			struct out_stream *s = c->out[(c->flush_start + i) % n];
			if (!has_unsent(s))
				continue;
			if (!send_next(c, s))
				return;
			progress = true;
			if (c->conn->write_queue_bytes >= WRITE_WINDOW_BYTES) {
				c->flush_start = (c->flush_start + i + 1) % n;
				return;
			}
		}
	}
}

int relay_client_send(struct relay_client *c, const char *to_cluster,
		      baton_node_id to_node, const uint8_t *payload, size_t len)
{
	BATON_ASSERT(c != NULL && !c->closing);
	if (!relay_client__valid_identifier(to_cluster, BATON_RELAY_ID_MAX) ||
	    len > BATON_RELAY_PAYLOAD_MAX || (payload == NULL && len > 0))
		return BATON_EINVAL;
	if (!relay_client__can_send(c))
		return BATON_ESTATE;
	size_t cluster_len = strlen(to_cluster);
	uint64_t incarnation = 0;
	if (to_node != 0) {
		if (is_self(c, to_cluster, cluster_len, to_node))
			return BATON_EINVAL;
		const struct view_node *v =
			view_find(c, to_cluster, cluster_len, to_node, NULL);
		if (v != NULL) {
			incarnation = v->incarnation;
		} else {
			/* Not back yet in a restarted relay's view, but
			 * still owed: its stream goes on. */
			for (size_t i = 0; i < c->nout && !incarnation; i++) {
				const struct out_stream *o = c->out[i];
				if (o->kind == BATON_RELAY_UNICAST &&
				    !o->gone && o->node_id == to_node &&
				    str_eq(o->cluster, o->cluster_len,
					   to_cluster, cluster_len))
					incarnation = o->incarnation;
			}
			if (incarnation == 0)
				return BATON_EINVAL;
		}
	}
	if (c->queued_msgs + 1 > RELAY_CLIENT_QUEUE_MSGS_MAX ||
	    c->queued_bytes + len > RELAY_CLIENT_QUEUE_BYTES_MAX)
		return BATON_EBUSY;
	uint8_t kind = to_node ? BATON_RELAY_UNICAST : BATON_RELAY_MULTICAST;
	struct out_stream *s = find_out(c, kind, to_cluster, cluster_len,
					to_node, incarnation);
	if (s == NULL)
		s = new_out(c, kind, to_cluster, to_node, incarnation);
	if (s == NULL)
		return BATON_ENOMEM;
	if (s->head + s->count == s->cap) {
		if (s->head > 0) {
			memmove(s->msgs, s->msgs + s->head,
				s->count * sizeof(*s->msgs));
			s->head = 0;
		}
		if (s->count == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 64;
			struct out_msg *m = realloc(s->msgs, cap * sizeof(*m));
			if (m == NULL)
				return BATON_ENOMEM;
			s->msgs = m;
			s->cap = cap;
		}
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (copy == NULL)
		return BATON_ENOMEM;
	if (len > 0)
		memcpy(copy, payload, len);
	s->gone = false;
	s->msgs[s->head + s->count++] = (struct out_msg){
		.seq = ++s->last_seq, .len = (uint32_t)len, .payload = copy};
	c->queued_msgs++;
	c->queued_bytes += len;
	/* A multicast nobody is owed is not kept (the protocol's rule). */
	if (kind == BATON_RELAY_MULTICAST && s->ndests == 0) {
		relay_client__flush(c);
		relay_client__release_acked(c, s, false);
		return 0;
	}
	relay_client__flush(c);
	return 0;
}

void relay_client__on_ack_frame(struct relay_client *c,
				const struct baton_relay_ack *a)
{
	const struct baton_relay_peer *p = &a->peer;
	struct out_stream *s =
		find_out(c, a->kind, p->cluster_id.ptr, p->cluster_id.len,
			 p->node_id, p->incarnation);
	if (s == NULL)
		return;
	uint64_t seq = a->seq < s->last_seq ? a->seq : s->last_seq;
	uint64_t *acked = &s->acked, *last_ack = &s->last_ack;
	bool *has_ack = &s->has_ack;
	if (a->kind == BATON_RELAY_MULTICAST) {
		struct mc_dest *d = NULL;
		for (size_t k = 0; k < s->ndests && d == NULL; k++)
			if (s->dests[k].node_id == p->node_id &&
			    s->dests[k].incarnation == p->incarnation)
				d = &s->dests[k];
		if (d == NULL)
			return;
		acked = &d->acked;
		last_ack = &d->last_ack;
		has_ack = &d->has_ack;
	}
	bool repeated = *has_ack && *last_ack == seq;
	*has_ack = true;
	*last_ack = seq;
	if (seq > *acked) {
		*acked = seq;
		relay_client__release_acked(c, s, false);
	} else if (repeated && s->sent_upto > seq &&
		   now_ms(c) - s->resend_ms >= RESEND_GUARD_MS) {
		/* The receiver saw a gap: send again from what it has. */
		relay_client__rewind_stream(c, s, seq);
	}
	relay_client__flush(c);
}

/* ---- resending stalled streams (from the timer) -------------------------- */

static bool view_connected(const struct relay_client *c,
			   const struct out_stream *s, baton_node_id node,
			   uint64_t incarnation)
{
	const struct view_node *v =
		view_find(c, s->cluster, s->cluster_len, node, NULL);
	return v != NULL && v->connected && v->incarnation == incarnation;
}

/* stream_floor() over the destinations connected now: a stall towards a
 * disconnected one is recovered by its reconnect, not by resending. */
static uint64_t connected_floor(const struct relay_client *c,
				const struct out_stream *s)
{
	if (s->kind == BATON_RELAY_UNICAST)
		return view_connected(c, s, s->node_id, s->incarnation)
			       ? stream_floor(s)
			       : s->last_seq;
	uint64_t floor = s->last_seq;
	for (size_t i = 0; i < s->ndests; i++) {
		const struct mc_dest *d = &s->dests[i];
		uint64_t through = d->acked > d->owed_from - 1
					   ? d->acked
					   : d->owed_from - 1;
		if (through < floor &&
		    view_connected(c, s, d->node_id, d->incarnation))
			floor = through;
	}
	return floor;
}

void relay_client__resend_stalled(struct relay_client *c, uint64_t now)
{
	for (size_t i = 0; i < c->nout; i++) {
		struct out_stream *s = c->out[i];
		uint64_t floor = connected_floor(c, s);
		if (s->sent_upto > floor &&
		    now - s->progress_ms >= RESEND_STALL_MS)
			relay_client__rewind_stream(c, s, floor);
	}
}

void relay_client__send_state(struct relay_client *c)
{
	if (c->state_flags == 0 || c->conn == NULL || !c->registered ||
	    c->conn->closing || !c->conn->connected)
		return;
	uint8_t entry[5];
	struct baton_relay_frame f = {.type = BATON_RELAY_STATUS};
	f.ext.ptr = entry;
	f.ext.len = (uint32_t)baton_relay_node_state_put(c->state_flags, entry);
	/* Lost with the connection: the next WELCOME sends it again. */
	(void)relay_client__conn_send_frame(c->conn, &f);
}

void relay_client_set_state(struct relay_client *c, uint8_t flags)
{
	if (c->state_flags == flags)
		return;
	c->state_flags = flags;
	relay_client__send_state(c);
}
