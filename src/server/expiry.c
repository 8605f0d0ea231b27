/*
 * The leader's expiry sweeper (machine version 2). Whether a key has
 * expired is decided from machine time alone, the largest stamp the log
 * has applied, so every node agrees at every index and a due key is
 * already absent to every command. Two things still need the leader:
 *
 *   - deleting due keys, through the log: a sweep entry deletes up to
 *     KV_SWEEP_BATCH_KEYS of them in (expiry, key) order. One batch applies
 *     in about a millisecond, and one sweep at a time is in flight, the
 *     next proposed as the previous applies while keys are due, so a
 *     million keys expiring at once go in 500 small entries (about 4 s on
 *     a 3-node cluster) that interleave with client writes instead of one
 *     long pause. Nothing waits for them: a due key is absent already;
 *   - moving machine time while no client writes: a key comes due by the
 *     leader's stamp (server_machine_stamp), and only a stamped entry
 *     makes it due in the machine. The same sweep entries do that; while keys
 * have an expiry but none is due, one at least every SWEEP_CLOCK_MS keeps TTL
 * and PTTL counting down on an idle cluster.
 *
 * A timer checks every SWEEP_PERIOD_MS, on every node; only the leader
 * proposes.
 */
#include <inttypes.h>

#include "log.h"
#include "server.h"

#define SWEEP_PERIOD_MS 50u
#define SWEEP_CLOCK_MS 500u

uint64_t server_machine_stamp(struct server *s)
{
	return baton_node_machine_stamp(s->node,
					kv_machine_time_ms(s->machine.kv));
}

static void sweep(struct server *s);

/* The count a sweep's reply (":N\r\n") gives, 0 if it is not one. */
static uint64_t reply_count(const uint8_t *reply, size_t len)
{
	uint64_t n = 0;
	if (len < 1 || reply[0] != ':')
		return 0;
	for (size_t i = 1; i < len && reply[i] >= '0' && reply[i] <= '9'; i++)
		n = n * 10 + (uint64_t)(reply[i] - '0');
	return n;
}

static void on_swept(void *data, int status, const uint8_t *reply, size_t len)
{
	struct server *s = data;
	s->sweeper.in_flight--;
	if (status != 0) {
		s->sweeper.backlog = false;
		return; /* the timer tries again */
	}
	uint64_t n = reply_count(reply, len);
	s->sweeper.entries++;
	s->sweeper.deleted += n;
	s->sweeper.backlog = n >= KV_SWEEP_BATCH_KEYS;
	LOG_DEBUG("expiry sweep: %" PRIu64 " keys deleted%s", n,
		  s->sweeper.backlog ? ", more due" : "");
	sweep(s);
}

static void sweep(struct server *s)
{
	if (!s->sweeper.started || s->shutting_down || s->node == NULL ||
	    s->leader != s->cfg.id)
		return;
	if (s->sweeper.in_flight > 0 || server_machine_version(s) < 2)
		return;
	/* A fenced map, or one still importing, refuses every sweep: its
	 * keys' expiry comes from the other cluster (docs/relay.md). */
	if (migration_writes_frozen(s))
		return;
	const struct baton_kv *kv = s->machine.kv;
	uint64_t now_ms = server_machine_stamp(s);
	uint64_t machine_ms = kv_machine_time_ms(kv);
	bool due = kv_expiry_due(kv, now_ms > machine_ms ? now_ms : machine_ms);
	bool clock = !due && kv_expiry_count(kv) > 0 &&
		     now_ms >= machine_ms + SWEEP_CLOCK_MS;
	if (!due && !clock)
		return;
	struct baton_buf payload;
	baton_buf_init(&payload);
	uint8_t kind = PAYLOAD_KV;
	int rv = baton_buf_append(&payload, &kind, 1);
	if (rv == 0)
		rv = kv_encode_sweep(now_ms, due ? KV_SWEEP_BATCH_KEYS : 0,
				     &payload);
	if (rv == 0)
		rv = baton_node_propose(s->node, payload.data, payload.len,
					on_swept, s);
	baton_buf_free(&payload);
	if (rv == 0)
		s->sweeper.in_flight++;
	else if (rv != BATON_ENOTLEADER && rv != BATON_ESTALLED &&
		 rv != BATON_EOVERLOADED)
		LOG_WARN("cannot propose an expiry sweep: %s",
			 baton_strerror(rv));
}

static void on_timer(uv_timer_t *t)
{
	struct server *s = t->data;
	if (s->node == NULL || s->shutting_down)
		return;
	sweep(s);
}

void expiry_start(struct server *s)
{
	uv_timer_init(s->loop, &s->sweeper.timer);
	s->sweeper.timer.data = s;
	uv_timer_start(&s->sweeper.timer, on_timer, SWEEP_PERIOD_MS,
		       SWEEP_PERIOD_MS);
	s->sweeper.started = true;
}

void expiry_stop(struct server *s)
{
	if (!s->sweeper.started)
		return;
	s->sweeper.started = false;
	uv_timer_stop(&s->sweeper.timer);
}
