/*
 * KEYS over a big map, in slices (docs/kv.md, "KEYS"). In one call, KEYS
 * over 2M keys held the loop 0.75 s: no heartbeat, no reply, an election
 * now and then. On a map of KEYS_SLICED_MIN_KEYS keys or more, a KEYS
 * whose read barrier returned becomes a job instead:
 *
 *   begin  the map's KEYS view (kv_keys_begin): the keys as they are
 *          now, at the machine time now. The map has one view, which
 *          the node's snapshot may hold: the job then waits for it, and
 *          a snapshot due waits for a KEYS the same way (the node asks
 *          again at its next flush). A view never begins in the turn of
 *          the loop in which another ended, so that the node's flush,
 *          which begins snapshots, comes in between: neither starves;
 *   list   KEYS_STEP_KEYS keys per turn of the loop (about a
 *          millisecond), from a uv_idle handle, so the loop polls for
 *          I/O without waiting between slices; applies go on between;
 *   copy   the array header, then the bulks into the reply, at most
 *          KEYS_COPY_BYTES per turn; then the slot is done.
 *
 * One job runs at a time, the others wait in arrival order. The reply is
 * what KEYS in one call gives at the job's begin (kv.h), which lies after
 * the read barrier and before the reply: linearizable. Since a job may
 * begin after later reads of the same connection were served, KEYS is
 * ORDER_READ_ALONE: the connection's next command waits for it. A job
 * whose client left ends at its next turn. A leader's snapshot restored
 * meanwhile does not end it: the view keeps the map it began on.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "baton/assert.h"
#include "log.h"
#include "server.h"

/* Keys looked at per turn of the loop: about a millisecond. */
#define KEYS_STEP_KEYS 4096u
/* Reply bytes copied per turn of the loop. */
#define KEYS_COPY_BYTES ((size_t)4 << 20)

struct keys_job {
	struct slot *sl;
	uint8_t *pattern;
	size_t len;
	bool begun;  /* the view is open */
	bool listed; /* the view ended; copying */
	struct baton_buf bulks;
	uint64_t matched;
	size_t copied;
	struct keys_job *next;
};

bool keys_is(const uint8_t *name, size_t len)
{
	return len == 4 && strncasecmp((const char *)name, "keys", 4) == 0;
}

static void job_free(struct keys_job *j)
{
	baton_buf_free(&j->bulks);
	free(j->pattern);
	free(j);
}

/* Take the first job off the queue; the caller answers and frees it. */
static struct keys_job *pop(struct server *s)
{
	struct keys_job *j = s->keys.head;
	BATON_ASSERT(j != NULL);
	s->keys.head = j->next;
	if (s->keys.head == NULL)
		s->keys.tail = NULL;
	if (j->begun && !j->listed)
		kv_keys_end(s->machine.kv);
	return j;
}

/* End the first job with an error reply for code (or none if its client
 * left). */
static void fail_first(struct server *s, int code)
{
	struct keys_job *j = pop(s);
	if (slot_abandoned(j->sl)) {
		slot_done(j->sl);
	} else {
		LOG_WARN("KEYS failed: %s", kv_errmsg(s->machine.kv));
		slot_error(j->sl, code);
	}
	job_free(j);
}

/* One turn's work on job j, the first: 0 or a BATON_E* code. */
static int work(struct server *s, struct keys_job *j)
{
	struct baton_kv *kv = s->machine.kv;
	if (!j->begun) {
		int rv = kv_keys_begin(kv, j->pattern, j->len);
		if (rv == BATON_EBUSY)
			return 0; /* a snapshot holds the view: next turn */
		if (rv != 0)
			return rv;
		j->begun = true;
	}
	if (!j->listed) {
		bool done = false;
		int rv = kv_keys_step(kv, KEYS_STEP_KEYS, &j->bulks,
				      &j->matched, &done);
		if (rv != 0 || !done)
			return rv;
		kv_keys_end(kv);
		j->listed = true;
		return resp_array(slot_buf(j->sl), j->matched);
	}
	size_t n = j->bulks.len - j->copied;
	if (n > KEYS_COPY_BYTES)
		n = KEYS_COPY_BYTES;
	int rv =
		baton_buf_append(slot_buf(j->sl), j->bulks.data + j->copied, n);
	if (rv != 0)
		return rv;
	j->copied += n;
	if (j->copied < j->bulks.len)
		return 0;
	struct keys_job *done = pop(s);
	BATON_ASSERT(done == j);
	slot_done(j->sl);
	job_free(j);
	return 0;
}

/* One action per turn: begin, list a slice, or copy a slice (or end a
 * job whose client left). So a view that ends in one turn is never
 * followed by another's begin in the same turn: the node's flush runs in
 * between (the loop's check phase) and begins a snapshot that is due. */
static void on_idle(uv_idle_t *h)
{
	struct server *s = h->data;
	struct keys_job *j = s->keys.head;
	if (j != NULL && slot_abandoned(j->sl)) {
		fail_first(s, 0);
	} else if (j != NULL) {
		int rv = work(s, j);
		if (rv != 0)
			fail_first(s, rv);
	}
	if (s->keys.head == NULL)
		uv_idle_stop(&s->keys.idle);
}

void keys_answer(struct server *s, struct slot *sl, const uint8_t *pattern,
		 size_t len)
{
	struct baton_kv *kv = s->machine.kv;
	if (kv_dbsize(kv) < KEYS_SLICED_MIN_KEYS || !s->keys.started) {
		const uint8_t *argv[2] = {(const uint8_t *)"KEYS", pattern};
		size_t lens[2] = {4, len};
		kv_read(kv, 2, argv, lens, slot_buf(sl));
		slot_done(sl);
		return;
	}
	struct keys_job *j = calloc(1, sizeof *j);
	if (j != NULL)
		j->pattern = malloc(len > 0 ? len : 1);
	if (j == NULL || j->pattern == NULL) {
		free(j);
		slot_error(sl, BATON_ENOMEM);
		return;
	}
	if (len > 0)
		memcpy(j->pattern, pattern, len);
	j->len = len;
	j->sl = sl;
	baton_buf_init(&j->bulks);
	if (s->keys.tail != NULL)
		s->keys.tail->next = j;
	else
		s->keys.head = j;
	s->keys.tail = j;
	if (!uv_is_active((uv_handle_t *)&s->keys.idle))
		uv_idle_start(&s->keys.idle, on_idle);
}

void keys_start(struct server *s)
{
	BATON_ASSERT(!s->keys.started);
	uv_idle_init(s->loop, &s->keys.idle);
	s->keys.idle.data = s;
	s->keys.started = true;
}

void keys_stop(struct server *s)
{
	if (!s->keys.started)
		return;
	while (s->keys.head != NULL) {
		struct keys_job *j = pop(s);
		resp_error(slot_buf(j->sl), "TRYAGAIN server is shutting down; "
					    "retry on another node");
		slot_done(j->sl);
		job_free(j);
	}
	uv_idle_stop(&s->keys.idle);
	uv_close((uv_handle_t *)&s->keys.idle, NULL);
	s->keys.started = false;
}
