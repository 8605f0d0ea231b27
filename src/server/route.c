/*
 * A client's write on its way to the log. The node keeps a copy of the
 * write until the client is answered, so that a write no leader appended
 * goes on to the next leader instead of failing:
 *
 * - with no leader known (an election, or a leadership transfer between
 *   the old leader stepping down and the new one's first heartbeat), the
 *   write is parked, and routed again as soon as a leader is known;
 * - a leader that did not append it says so (it was handing leadership
 *   over, or had just lost it: its reply is one of the "not appended"
 *   errors below, whatever its release), and the write is routed again,
 *   to the next leader;
 * - a forwarded write whose leader changed is not failed at once: the old
 *   leader still answers it (an entry it appended commits under the new
 *   leader, or is overwritten and answered "leadership changed"), unless
 *   its connection closes or it does not answer within an election
 *   timeout (forward.c). Only then is the outcome unknown to the client.
 *
 * One connection's writes take effect in the order it sent them
 * (docs/batond.md, "Consistency"). Sending a write again could break that,
 * so each connection's unanswered writes form a chain, in order, and:
 * - the writes of a chain in flight are all at one node (its `dest`): a
 *   write for another leader waits until those are answered;
 * - a parked write is sent only when no earlier write of its chain is
 *   parked and no later one is in flight: sent back, it waits until the
 *   later ones come back too (a leader that did not append one write did
 *   not append the ones after it), then all go in order;
 * - a write answered while an earlier one of its chain is parked took
 *   effect before it could: the earlier one can no longer keep its place,
 *   and fails with `-TRYAGAIN no leader elected yet` (never appended).
 *
 * Parking is bounded in count, bytes and time (SERVER_PARKED_*, and an
 * election timeout twice over); beyond it the client gets the retryable
 * `-TRYAGAIN no leader elected yet`. A write is routed at most
 * SERVER_ROUTES_MAX times, so two nodes that each take the other for the
 * leader cannot bounce it for ever.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "server.h"

/* The replies that say a leader did not append a forwarded write: the
 * current releases' for BATON_ENOTLEADER (the transfer succeeded, or the
 * leader stepped down), and 1.2.0's for a write that reached its leader
 * during a transfer (BATON_EBUSY). */
static const char not_appended_now[] =
	"-TRYAGAIN no leader elected yet; retry\r\n";
static const char not_appended_in_transfer_1_2[] =
	"-ERR a configuration change or leadership transfer is in progress\r\n";

bool route_reply_not_appended(const uint8_t *reply, size_t len)
{
	return (len == sizeof not_appended_now - 1 &&
		memcmp(reply, not_appended_now, len) == 0) ||
	       (len == sizeof not_appended_in_transfer_1_2 - 1 &&
		memcmp(reply, not_appended_in_transfer_1_2, len) == 0);
}

/* ---- the copy ------------------------------------------------------------ */

/* The argument arrays of all the commands (pointer-aligned), and the
 * bytes of the arguments and watched keys. */
static void copy_sizes(const struct write_req *w, size_t *arrays, size_t *bytes)
{
	*arrays = *bytes = 0;
	for (uint32_t i = 0; i < w->n_commands; i++) {
		const struct kv_txn_command *c = &w->commands[i];
		*arrays +=
			(size_t)c->argc * (sizeof(uint8_t *) + sizeof(size_t));
		for (int a = 0; a < c->argc; a++)
			*bytes += c->lens[a];
	}
	for (uint32_t i = 0; i < w->n_watches; i++)
		*bytes += w->watches[i].key_len;
}

/* One allocation: the struct, the commands, the watches and the argument
 * arrays (all pointer-aligned), then the bytes. */
static struct routed_write *routed_new(struct server *s, struct slot *sl,
				       const struct write_req *w)
{
	size_t arrays, bytes;
	copy_sizes(w, &arrays, &bytes);
	size_t head = sizeof(struct routed_write) +
		      w->n_commands * sizeof(struct kv_txn_command) +
		      w->n_watches * sizeof(struct kv_watch);
	head = (head + 7) & ~(size_t)7;
	size_t total = head + arrays + bytes;
	struct routed_write *rw = malloc(total);
	if (rw == NULL)
		return NULL;
	memset(rw, 0, sizeof *rw);
	rw->s = s;
	rw->sl = sl;
	rw->bytes = total;
	struct kv_txn_command *cmds = (struct kv_txn_command *)(rw + 1);
	struct kv_watch *watches = (struct kv_watch *)(cmds + w->n_commands);
	uint8_t *array_at = (uint8_t *)rw + head;
	uint8_t *at = array_at + arrays;
	for (uint32_t i = 0; i < w->n_commands; i++) {
		const struct kv_txn_command *c = &w->commands[i];
		const uint8_t **argv = (const uint8_t **)array_at;
		array_at += (size_t)c->argc * sizeof *argv;
		size_t *lens = (size_t *)array_at;
		array_at += (size_t)c->argc * sizeof *lens;
		for (int a = 0; a < c->argc; a++) {
			if (c->lens[a] > 0)
				memcpy(at, c->argv[a], c->lens[a]);
			argv[a] = at;
			lens[a] = c->lens[a];
			at += c->lens[a];
		}
		cmds[i] = (struct kv_txn_command){c->argc, argv, lens};
	}
	for (uint32_t i = 0; i < w->n_watches; i++) {
		const struct kv_watch *k = &w->watches[i];
		if (k->key_len > 0)
			memcpy(at, k->key, k->key_len);
		watches[i] = (struct kv_watch){at, k->key_len, k->hash};
		at += k->key_len;
	}
	BATON_ASSERT(array_at == (uint8_t *)rw + head + arrays);
	BATON_ASSERT((size_t)(at - (uint8_t *)rw) == total);
	rw->w = (struct write_req){w->transaction, w->n_watches, watches,
				   w->n_commands, cmds};
	return rw;
}

/* ---- lists --------------------------------------------------------------- */

static void list_push(struct route_list *l, struct routed_write *rw)
{
	BATON_ASSERT(rw->list == NULL);
	rw->list = l;
	rw->list_next = NULL;
	rw->list_prev = l->tail;
	if (l->tail != NULL)
		l->tail->list_next = rw;
	else
		l->head = rw;
	l->tail = rw;
	l->n++;
	l->bytes += rw->bytes;
}

static void list_remove(struct routed_write *rw)
{
	struct route_list *l = rw->list;
	BATON_ASSERT(l != NULL && l->n > 0);
	if (rw->list_prev != NULL)
		rw->list_prev->list_next = rw->list_next;
	else
		l->head = rw->list_next;
	if (rw->list_next != NULL)
		rw->list_next->list_prev = rw->list_prev;
	else
		l->tail = rw->list_prev;
	l->n--;
	l->bytes -= rw->bytes;
	rw->list = NULL;
	rw->list_prev = rw->list_next = NULL;
}

static void chain_push(struct route_chain *ch, struct routed_write *rw)
{
	rw->chain = ch;
	rw->seq = ++ch->next_seq;
	rw->chain_prev = ch->tail;
	if (ch->tail != NULL)
		ch->tail->chain_next = rw;
	else
		ch->head = rw;
	ch->tail = rw;
}

static void chain_remove(struct routed_write *rw)
{
	struct route_chain *ch = rw->chain;
	if (rw->chain_prev != NULL)
		rw->chain_prev->chain_next = rw->chain_next;
	else
		ch->head = rw->chain_next;
	if (rw->chain_next != NULL)
		rw->chain_next->chain_prev = rw->chain_prev;
	else
		ch->tail = rw->chain_prev;
}

/* ---- work on a chain ----------------------------------------------------- */

static void release(struct route_chain *ch, struct server *s);

static void chain_enter(struct route_chain *ch)
{
	ch->depth++;
}

/* The outermost exit sends what may go now, then hands the answers to
 * their clients: the last may free the connection, and `ch` with it. */
static void chain_leave(struct route_chain *ch, struct server *s)
{
	BATON_ASSERT(ch->depth > 0);
	if (ch->depth > 1) {
		ch->depth--;
		return;
	}
	release(ch, s);
	struct routed_write *done = ch->answered;
	ch->answered = NULL;
	ch->depth = 0;
	while (done != NULL) {
		struct routed_write *next = done->next;
		if (!done->elsewhere)
			slot_done(done->sl);
		free(done);
		done = next;
	}
}

/* The reply is in slot_buf(rw->sl): take rw out of everything; the
 * client gets it when the chain's work ends. */
static void finish(struct routed_write *rw)
{
	struct route_chain *ch = rw->chain;
	struct server *s = rw->s;
	chain_enter(ch);
	bool was_sent = rw->sent_to != 0;
	if (was_sent) {
		BATON_ASSERT(ch->in_flight > 0);
		ch->in_flight--;
	} else if (rw->list != NULL) {
		BATON_ASSERT(ch->parked > 0);
		ch->parked--;
		list_remove(rw);
	}
	/* It may have taken effect: an earlier write sent back can no
	 * longer go before it. */
	while (was_sent && ch->head != rw) {
		struct routed_write *x = ch->head;
		while (x != rw && x->sent_to != 0)
			x = x->chain_next;
		if (x == rw)
			break;
		reply_error_for(slot_buf(x->sl), BATON_ENOLEADER);
		finish(x);
	}
	chain_remove(rw);
	rw->next = ch->answered;
	ch->answered = rw;
	chain_leave(ch, s);
}

/* Wait for a leader, or fail at once if too much waits already. */
static void park(struct routed_write *rw)
{
	struct server *s = rw->s;
	BATON_ASSERT(rw->sent_to == 0 && rw->list == NULL);
	if (s->parked.n >= SERVER_PARKED_MAX ||
	    s->parked.bytes + rw->bytes > SERVER_PARKED_BYTES_MAX ||
	    rw->routes >= SERVER_ROUTES_MAX) {
		reply_error_for(slot_buf(rw->sl), BATON_ENOLEADER);
		finish(rw);
		return;
	}
	if (rw->park_until_ms == 0)
		rw->park_until_ms = uv_now(s->loop) +
				    2u * (uint64_t)s->cfg.election_timeout_ms;
	rw->chain->parked++;
	list_push(&s->parked, rw);
	s->stats.writes_parked++;
}

/* Send rw to `to` (the leader: this node or another). False if it could
 * not go (that node no longer leads, or no connection to it): rw is
 * parked again (or failed, if it cannot wait). True: in flight, or
 * answered already. */
static bool send_to(struct routed_write *rw, baton_node_id to)
{
	struct server *s = rw->s;
	struct route_chain *ch = rw->chain;
	BATON_ASSERT(ch->in_flight == 0 || ch->dest == to);
	rw->routes++;
	rw->sent_to = to;
	ch->dest = to;
	ch->in_flight++;
	int rv =
		to == s->cfg.id ? propose_routed(s, rw) : forward_routed(s, rw);
	if (rv != BATON_ENOTLEADER && rv != BATON_ENOTFOUND)
		return true;
	ch->in_flight--;
	rw->sent_to = 0;
	/* Not appended: not there again while it leads. No connection to
	 * it yet: tried again at the next housekeeping tick. */
	if (rv == BATON_ENOTLEADER)
		rw->refused_by = to;
	park(rw);
	return false;
}

/* Where parked writes can go now: the leader, if known, able to take
 * them, and the chain not in flight elsewhere. 0: nowhere. A leader that
 * stopped applying (it hands leadership over, baton__stall_handover)
 * could append but never answer: its own writes wait for the next one. */
static baton_node_id usable_leader(const struct route_chain *ch,
				   struct server *s)
{
	baton_node_id to = s->leader;
	if (to == 0 || s->routing_closed ||
	    (ch->in_flight > 0 && ch->dest != to) ||
	    (to == s->cfg.id && server_stalled_here(s)))
		return 0;
	return to;
}

/* Send the chain's parked writes that may go, in order. */
static void release(struct route_chain *ch, struct server *s)
{
	uint32_t in_flight_seen = 0;
	struct routed_write *rw = ch->head;
	while (ch->parked > 0 && rw != NULL) {
		struct routed_write *next = rw->chain_next;
		if (rw->sent_to != 0) {
			in_flight_seen++;
			rw = next;
			continue;
		}
		baton_node_id to = usable_leader(ch, s);
		/* Not before later writes in flight, nor to the leader that
		 * refused it, nor once it is being failed. */
		if (to == 0 || in_flight_seen < ch->in_flight ||
		    to == rw->refused_by || rw->expired)
			return;
		if (rw->routes >= SERVER_ROUTES_MAX) {
			reply_error_for(slot_buf(rw->sl), BATON_ENOLEADER);
			finish(rw);
			rw = next;
			continue;
		}
		ch->parked--;
		list_remove(rw);
		if (!send_to(rw, to))
			return;
		in_flight_seen = ch->in_flight;
		rw = next;
	}
}

/* ---- answers ------------------------------------------------------------- */

void route_done(struct routed_write *rw)
{
	finish(rw);
}

/* A write that the state machine refused because write authority moved to
 * the other cluster of a migration, or has not reached this one yet: it did
 * nothing here, so the other cluster takes it (docs/relay.md, "Who answers
 * a client"). One command only: a transaction's EXEC cannot go alone. */
static bool answered_elsewhere(struct routed_write *rw, const uint8_t *reply,
			       size_t len)
{
	struct server *s = rw->s;
	if (s->migration == NULL || rw->w.transaction ||
	    rw->w.n_commands != 1 || slot_abandoned(rw->sl) ||
	    !migration_refused_write(reply, len))
		return false;
	struct client_state *cs =
		(struct client_state *)((char *)rw->chain -
					offsetof(struct client_state, writes));
	const char *addr;
	if (migration_route(s, cs, &addr) != MIGRATION_PROXY)
		return false;
	const struct kv_txn_command *c = &rw->w.commands[0];
	/* The proxy copies the command now; its reply fills the slot. */
	proxy_command(s, cs, rw->sl, addr, c->argc, c->argv, c->lens);
	rw->elsewhere = true;
	finish(rw);
	return true;
}

void route_answer(struct routed_write *rw, const uint8_t *reply, size_t len)
{
	if (answered_elsewhere(rw, reply, len))
		return;
	if (baton_buf_append(slot_buf(rw->sl), reply, len) != 0)
		reply_error_for(slot_buf(rw->sl), BATON_ENOMEM);
	finish(rw);
}

void route_fail(struct routed_write *rw, int code)
{
	server_reply_error(rw->s, slot_buf(rw->sl), code);
	finish(rw);
}

/* ---- routing ------------------------------------------------------------- */

void route_write(struct server *s, struct client_state *cs, struct slot *sl,
		 const struct write_req *w)
{
	struct routed_write *rw = routed_new(s, sl, w);
	if (rw == NULL) {
		slot_error(sl, BATON_ENOMEM);
		return;
	}
	struct route_chain *ch = &cs->writes;
	chain_push(ch, rw);
	chain_enter(ch);
	baton_node_id to = usable_leader(ch, s);
	/* The usual way, at once, when nothing of the chain waits (send_to
	 * parks it if it cannot go); otherwise behind the waiting ones. */
	if (to != 0 && ch->parked == 0)
		send_to(rw, to);
	else
		park(rw);
	chain_leave(ch, s);
}

void route_again(struct routed_write *rw, baton_node_id refused_by)
{
	struct route_chain *ch = rw->chain;
	struct server *s = rw->s;
	chain_enter(ch);
	BATON_ASSERT(rw->sent_to != 0 && ch->in_flight > 0);
	ch->in_flight--;
	rw->sent_to = 0;
	rw->refused_by = refused_by;
	s->stats.writes_rerouted++;
	park(rw);
	chain_leave(ch, s);
}

/* Release the chain of every parked write (several times the same chain
 * if it holds several: each time is cheap). Releasing a chain may send
 * or answer writes of it, so the parked list is first moved aside. */
static void release_parked(struct server *s)
{
	while (s->parked.head != NULL) {
		struct routed_write *rw = s->parked.head;
		list_remove(rw);
		list_push(&s->parked_todo, rw);
	}
	while (s->parked_todo.head != NULL) {
		struct routed_write *rw = s->parked_todo.head;
		list_remove(rw);
		list_push(&s->parked, rw);
		chain_enter(rw->chain);
		chain_leave(rw->chain, s);
	}
}

void route_leader_changed(struct server *s, baton_node_id leader)
{
	forward_leader_changed(s, leader);
	if (leader == 0)
		return;
	/* A refusal held for the leadership it came from. */
	for (struct routed_write *rw = s->parked.head; rw != NULL;
	     rw = rw->list_next)
		rw->refused_by = 0;
	release_parked(s);
}

void route_expire(struct server *s)
{
	uint64_t now = uv_now(s->loop);
	for (struct routed_write *rw = s->parked.head, *next; rw != NULL;
	     rw = next) {
		next = rw->list_next;
		if (rw->park_until_ms > now)
			continue;
		rw->expired = true;
		list_remove(rw);
		list_push(&s->parked_expired, rw);
	}
	/* Failing one may answer or send others of its chain, never one
	 * marked expired. */
	while (s->parked_expired.head != NULL) {
		struct routed_write *rw = s->parked_expired.head;
		reply_error_for(slot_buf(rw->sl), BATON_ENOLEADER);
		finish(rw);
	}
	forward_expire(s);
	/* Those that found no connection to the leader try again. */
	release_parked(s);
}

void route_fail_all(struct server *s, const char *why)
{
	if (s->parked.head != NULL)
		LOG_DEBUG("failing parked writes: %s", why);
	s->routing_closed = true;
	while (s->parked.head != NULL) {
		struct routed_write *rw = s->parked.head;
		reply_error_for(slot_buf(rw->sl), BATON_ENOLEADER);
		finish(rw);
	}
	forward_fail_all(s, why);
	s->routing_closed = false;
}
