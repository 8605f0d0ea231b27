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
 *   timeout. Only then is the outcome unknown to the client.
 *
 * Parking is bounded in count, bytes and time (SERVER_PARKED_*, and an
 * election timeout twice over); beyond it the client gets the retryable
 * `-TRYAGAIN no leader elected yet`. A write is routed at most
 * SERVER_ROUTES_MAX times, so two nodes that each take the other for the
 * leader cannot bounce it for ever.
 */
#include <inttypes.h>
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

static size_t commands_bytes(const struct write_req *w)
{
	size_t n = 0;
	for (uint32_t i = 0; i < w->n_commands; i++) {
		const struct kv_txn_command *c = &w->commands[i];
		n += (size_t)c->argc * (sizeof(uint8_t *) + sizeof(size_t));
		for (int a = 0; a < c->argc; a++)
			n += c->lens[a];
	}
	for (uint32_t i = 0; i < w->n_watches; i++)
		n += w->watches[i].key_len;
	return n;
}

/* One allocation: the struct, then the commands, the watches, the
 * argument arrays and the bytes. */
static struct routed_write *routed_new(struct server *s, struct slot *sl,
				       const struct write_req *w)
{
	size_t head = sizeof(struct routed_write) +
		      w->n_commands * sizeof(struct kv_txn_command) +
		      w->n_watches * sizeof(struct kv_watch);
	head = (head + 7) & ~(size_t)7;
	size_t total = head + commands_bytes(w);
	struct routed_write *rw = malloc(total);
	if (rw == NULL)
		return NULL;
	memset(rw, 0, sizeof *rw);
	rw->s = s;
	rw->sl = sl;
	rw->bytes = total;
	struct kv_txn_command *cmds = (struct kv_txn_command *)(rw + 1);
	struct kv_watch *watches = (struct kv_watch *)(cmds + w->n_commands);
	uint8_t *at = (uint8_t *)rw + head;
	for (uint32_t i = 0; i < w->n_commands; i++) {
		const struct kv_txn_command *c = &w->commands[i];
		const uint8_t **argv = (const uint8_t **)at;
		at += (size_t)c->argc * sizeof *argv;
		size_t *lens = (size_t *)at;
		at += (size_t)c->argc * sizeof *lens;
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
	BATON_ASSERT((size_t)(at - (uint8_t *)rw) == total);
	rw->w = (struct write_req){w->transaction, w->n_watches, watches,
				   w->n_commands, cmds};
	return rw;
}

/* ---- answers ------------------------------------------------------------- */

void route_answer(struct routed_write *rw, const uint8_t *reply, size_t len)
{
	if (baton_buf_append(slot_buf(rw->sl), reply, len) != 0)
		slot_error(rw->sl, BATON_ENOMEM);
	else
		slot_done(rw->sl);
	free(rw);
}

void route_fail(struct routed_write *rw, int code)
{
	server_reply_error(rw->s, slot_buf(rw->sl), code);
	route_done(rw);
}

void route_done(struct routed_write *rw)
{
	slot_done(rw->sl);
	free(rw);
}

/* ---- parking ------------------------------------------------------------- */

static uint64_t park_ms(const struct server *s)
{
	return 2u * (uint64_t)s->cfg.election_timeout_ms;
}

static void parked_push(struct server *s, struct routed_write *rw)
{
	rw->next = NULL;
	if (s->parked.tail != NULL)
		s->parked.tail->next = rw;
	else
		s->parked.head = rw;
	s->parked.tail = rw;
	s->parked.n++;
	s->parked.bytes += rw->bytes;
}

static void park(struct routed_write *rw)
{
	struct server *s = rw->s;
	if (s->parked.n >= SERVER_PARKED_MAX ||
	    s->parked.bytes + rw->bytes > SERVER_PARKED_BYTES_MAX) {
		route_fail(rw, BATON_ENOLEADER);
		return;
	}
	/* A write parked again keeps its first deadline. */
	if (rw->park_until_ms == 0)
		rw->park_until_ms = uv_now(s->loop) + park_ms(s);
	parked_push(s, rw);
	s->stats.writes_parked++;
}

/* Take the whole parked list (routing may park some again). */
static struct routed_write *unpark_all(struct server *s)
{
	struct routed_write *list = s->parked.head;
	s->parked.head = s->parked.tail = NULL;
	s->parked.n = 0;
	s->parked.bytes = 0;
	return list;
}

/* ---- routing ------------------------------------------------------------- */

static void route(struct routed_write *rw)
{
	struct server *s = rw->s;
	if (++rw->routes > SERVER_ROUTES_MAX) {
		route_fail(rw, BATON_ENOLEADER);
		return;
	}
	baton_node_id leader = s->leader;
	/* Not back to the leader that just refused it: wait for the next. */
	if (leader == 0 || leader == rw->refused_by) {
		park(rw);
		return;
	}
	int rv = leader == s->cfg.id ? propose_routed(s, rw)
				     : forward_routed(s, rw);
	if (rv == BATON_ENOTLEADER || rv == BATON_ENOTFOUND) {
		/* Not appended (the pipeline is no longer the leader's), or
		 * no connection to the leader yet: wait for the next. */
		rw->refused_by = leader;
		park(rw);
	}
	/* Otherwise rw is in flight or was answered. */
}

void route_write(struct server *s, struct slot *sl, const struct write_req *w)
{
	struct routed_write *rw = routed_new(s, sl, w);
	if (rw == NULL) {
		slot_error(sl, BATON_ENOMEM);
		return;
	}
	route(rw);
}

void route_again(struct routed_write *rw, baton_node_id refused_by)
{
	rw->refused_by = refused_by;
	rw->s->stats.writes_rerouted++;
	route(rw);
}

void route_leader_changed(struct server *s, baton_node_id leader)
{
	forward_leader_changed(s, leader);
	if (leader == 0)
		return;
	struct routed_write *rw = unpark_all(s);
	while (rw != NULL) {
		struct routed_write *next = rw->next;
		/* A refusal held for the leadership it came from. */
		rw->refused_by = 0;
		route(rw);
		rw = next;
	}
}

void route_expire(struct server *s)
{
	uint64_t now = uv_now(s->loop);
	struct routed_write *rw = unpark_all(s);
	while (rw != NULL) {
		struct routed_write *next = rw->next;
		if (rw->park_until_ms <= now)
			route_fail(rw, BATON_ENOLEADER);
		else
			parked_push(s, rw);
		rw = next;
	}
	forward_expire(s);
}

void route_fail_all(struct server *s, const char *why)
{
	struct routed_write *rw = unpark_all(s);
	if (rw != NULL)
		LOG_DEBUG("failing parked writes: %s", why);
	while (rw != NULL) {
		struct routed_write *next = rw->next;
		route_fail(rw, BATON_ENOLEADER);
		rw = next;
	}
	forward_fail_all(s, why);
}
