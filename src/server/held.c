/*
 * Writes a new leader holds until it has applied the log it inherited.
 *
 * The value limit (docs/kv.md, "The value limit") checks a write against
 * the leader's map plus the writes this leader appended and has not
 * applied yet. A leader just elected may also hold its predecessor's
 * entries, not applied yet, whose APPENDs no bound counts: checked then, an
 * APPEND could pass the limit. So from its election until it has applied
 * everything its log held then (the last index at election: entries after
 * it are its own), the leader encodes each write and queues its payload
 * here instead of proposing it; then it claims and proposes them in
 * arrival order, before any later write (which queues behind them while
 * any waits), so one connection's writes keep their order. That takes
 * the commit of the leader's first entry, a round trip and a sync.
 *
 * A held write is answered like a proposed one: its entry's reply once
 * applied, the limit's refusal, or, when this node stops leading before
 * it is proposed, "not appended" (a local client's write goes on to the
 * next leader; a follower's gets the reply it re-routes on). Held writes
 * are bounded in count, bytes and time; beyond, the retryable
 * `-TRYAGAIN overloaded; retry later`.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "server.h"

/* How often a leader with writes held looks whether it may propose. */
#define HELD_POLL_MS 2u
/* At most this many writes, and bytes of payload, held at once. */
#define HELD_WRITES_MAX 100000u
#define HELD_BYTES_MAX ((uint64_t)256 << 20)

struct held_write {
	struct held_write *next;
	struct proposal_ctx *p;
	size_t len;
	uint8_t payload[];
};

/* The node's status, in a buffer of this file's own (the others' scratch
 * may be in use by a caller up the stack). */
static struct baton_node_status *status(struct server *s)
{
	static struct baton_node_status st;
	baton_node_status(s->node, &st);
	return &st;
}

void held_init(struct server *s)
{
	uv_timer_init(s->loop, &s->held.timer);
	s->held.timer.data = s;
	s->held.ready = true;
}

void held_leader_changed(struct server *s, baton_node_id leader)
{
	/* Where its log ends is read at the first write after (the node may
	 * be starting still): a later index only waits a little more. */
	if (leader == s->cfg.id)
		s->held.ready = s->held.start_known = false;
	/* Otherwise the timer fails what is held (not appended). */
}

/* Has this leader applied its inherited log? (Once true, true until the
 * next election.) */
static bool ready(struct server *s)
{
	if (s->held.ready)
		return true;
	struct baton_node_status *st = status(s);
	if (!s->held.start_known) {
		s->held.start_index = st->raft.last_index;
		s->held.start_known = true;
	}
	s->held.ready = st->applied >= s->held.start_index;
	return s->held.ready;
}

bool held_must_wait(struct server *s)
{
	return s->leader == s->cfg.id && s->node != NULL &&
	       (s->held.head != NULL || !ready(s));
}

/* The first held write, off the list. */
static struct held_write *pop(struct server *s)
{
	struct held_write *h = s->held.head;
	BATON_ASSERT(h != NULL && s->held.n > 0 && s->held.bytes >= h->len);
	s->held.head = h->next;
	if (s->held.head == NULL)
		s->held.tail = NULL;
	s->held.n--;
	s->held.bytes -= h->len;
	return h;
}

static void on_poll(uv_timer_t *t)
{
	struct server *s = t->data;
	if (s->leader == s->cfg.id && !ready(s))
		return;
	/* One at a time from the head: an answer may start a client's next
	 * write at once, which queues behind those still held (the list is
	 * not empty), so no write overtakes one sent before it. Those queued
	 * meanwhile wait for the next turn. */
	for (uint32_t n = s->held.n; n > 0 && s->held.head != NULL; n--) {
		struct held_write *h = pop(s);
		if (s->leader == s->cfg.id)
			forward_propose_held(s, h->p, h->payload, h->len);
		else
			forward_not_appended(s, h->p);
		free(h);
	}
	if (s->held.head == NULL)
		uv_timer_stop(t);
}

int held_push(struct server *s, struct proposal_ctx *p, const uint8_t *payload,
	      size_t len)
{
	if (s->held.n >= HELD_WRITES_MAX ||
	    s->held.bytes + len > HELD_BYTES_MAX)
		return BATON_EOVERLOADED;
	struct held_write *h = malloc(sizeof *h + len);
	if (h == NULL)
		return BATON_ENOMEM;
	h->next = NULL;
	h->p = p;
	h->len = len;
	memcpy(h->payload, payload, len);
	if (s->held.tail != NULL)
		s->held.tail->next = h;
	else
		s->held.head = h;
	s->held.tail = h;
	s->held.n++;
	s->held.bytes += len;
	if (!uv_is_active((uv_handle_t *)&s->held.timer))
		uv_timer_start(&s->held.timer, on_poll, HELD_POLL_MS,
			       HELD_POLL_MS);
	return 0;
}

void held_fail_all(struct server *s)
{
	while (s->held.head != NULL) {
		struct held_write *h = pop(s);
		forward_not_appended(s, h->p);
		free(h);
	}
	uv_timer_stop(&s->held.timer);
}
