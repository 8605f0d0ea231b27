/*
 * The Raft driver on libuv (see node.h). Every event goes through step(),
 * which is never re-entered: work that callbacks start while an update is
 * being handled (new proposals, reads, snapshots) is queued and flushed
 * from a uv_check handle at the end of each loop iteration, which also
 * batches the proposals of many clients into one PROPOSE event.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "node.h"
#include "peer.h"

/* Proposals folded into one PROPOSE event. */
#define PROPOSE_BATCH_MAX 1024u
/* How long membership changes and transfers may take. */
#define ADMIN_TIMEOUT_MS 30000u
/* A client never waits forever: a read that no leader confirms, or a
 * write that is not applied, fails with a retryable error after this. */
#define READ_TIMEOUT_MS 5000u
#define PROPOSAL_TIMEOUT_MS 10000u

/* Messages held until the persistence of their update completes. The
 * transport encodes them when they go, in the version of the connection
 * then up. Those the core holds (votes and acknowledgements) point to no
 * data of the core's, so a copy of the struct is the whole message. */
struct held {
	struct baton_msg msg;
};

struct write {
	uint64_t seq;
	bool report;
	baton_index index;
	baton_term term;
	struct held *held;
	uint32_t n_held;
	struct write *next;
};

struct proposal {
	baton_index index;
	baton_term term;
	uint64_t deadline_ms;
	baton_node_propose_cb cb;
	void *data;
};

struct queued_proposal {
	uint8_t *payload;
	size_t len;
	baton_node_propose_cb cb;
	void *data;
};

struct read_req {
	uint64_t id;
	uint64_t deadline_ms;
	baton_index read_index;
	bool resolved;
	baton_node_done_cb cb;
	void *data;
};

enum waiter_kind { WAIT_ADD, WAIT_PROMOTE, WAIT_REMOVE, WAIT_TRANSFER };

struct waiter {
	enum waiter_kind kind;
	baton_node_id id;
	uint64_t deadline_ms;
	baton_node_done_cb cb;
	void *data;
};

/* A membership or leadership request made while stepping. */
struct deferred {
	uint32_t type;
	baton_node_id id;
	enum waiter_kind kind;
	baton_node_done_cb cb;
	void *data;
};

struct baton_node {
	uv_loop_t *loop;
	struct baton_node_config c;
	struct baton_node_app app;
	struct baton_raft *raft;
	struct baton_storage *storage;
	struct baton_transport *transport;
	uv_timer_t tick;
	uv_async_t storage_async;
	uv_check_t flush;
	bool stepping;
	bool storage_failed;
	bool storage_failed_due; /* tell the application at the next check */

	struct write *writes, *writes_tail;

	/* Proposals in the log, by increasing index. */
	struct proposal *props;
	uint32_t props_head, props_n, props_cap;
	struct queued_proposal *queue;
	uint32_t queue_n, queue_cap;

	struct read_req *reads;
	uint32_t reads_n, reads_cap;
	uint64_t next_read_id;
	bool reads_to_step; /* queued reads not yet given to the core */

	struct waiter *waiters;
	uint32_t waiters_n, waiters_cap;
	struct deferred *deferred;
	uint32_t deferred_n, deferred_cap;

	baton_index applied;
	baton_index snapshot_index;
	bool snapshot_due;
	uint32_t role;
	baton_node_id leader;
	struct baton_buf scratch, frame;

	void (*shutdown_cb)(void *data);
	void *shutdown_data;
	uint64_t shutdown_deadline_ms;
};

static uint64_t now_ms(struct baton_node *n)
{
	return uv_now(n->loop);
}

static void *grow(void *p, uint32_t *cap, size_t elem)
{
	uint32_t c = *cap ? *cap * 2 : 64;
	void *g = realloc(p, c * elem);
	if (g == NULL) {
		LOG_ERROR("out of memory");
		abort();
	}
	*cap = c;
	return g;
}

static void handle_update(struct baton_node *n, const struct baton_update *u);

static int step(struct baton_node *n, struct baton_event *ev)
{
	assert(!n->stepping);
	n->stepping = true;
	struct baton_update u;
	int rv = baton_raft_step(n->raft, now_ms(n), ev, &u);
	handle_update(n, &u);
	n->stepping = false;
	return rv;
}

/* ---- sending ------------------------------------------------------------- */

/* Encoded by the transport in the connection's protocol version; dropped
 * (and counted) when no connection to m->to is up: Raft resends. */
static void send_msg(struct baton_node *n, const struct baton_msg *m)
{
	baton_transport_send_raft(n->transport, m);
}

static struct held hold_msg(struct baton_node *n, const struct baton_msg *m)
{
	(void)n;
	assert(m->type == BATON_MSG_VOTE || m->type == BATON_MSG_VOTE_RESULT ||
	       m->type == BATON_MSG_APPEND_RESULT ||
	       m->type == BATON_MSG_SNAPSHOT_RESULT);
	return (struct held){.msg = *m};
}

/* ---- persistence -----------------------------------------------------------
 */

static bool has_persistence(const struct baton_update *u)
{
	return u->hard_state_changed || u->snapshot != NULL ||
	       u->truncate_from != 0 || u->n_entries > 0 ||
	       u->compact_upto != 0 || u->persist_needed ||
	       u->n_msgs_after_persist > 0;
}

static void storage_failed(struct baton_node *n, int rv)
{
	if (n->storage_failed)
		return;
	LOG_ERROR("storage failed (%s): %s; this node stops accepting writes",
		  baton_strerror(rv), n->storage->ops->errmsg(n->storage));
	n->storage_failed = true;
	/* A node that cannot persist must not lead or vote: the application
	 * stops it (after handing leadership over). */
	n->storage_failed_due = true;
}

static void persist(struct baton_node *n, const struct baton_update *u)
{
	if (!has_persistence(u) || n->storage_failed)
		return;
	uint64_t seq;
	int rv = n->storage->ops->submit(n->storage, u, &seq);
	if (rv != 0) {
		storage_failed(n, rv);
		return;
	}
	struct write *w = calloc(1, sizeof *w);
	if (w == NULL)
		abort();
	w->seq = seq;
	w->report = u->persist_needed;
	w->index = u->persist_index;
	w->term = u->persist_term;
	if (u->n_msgs_after_persist > 0) {
		w->held = calloc(u->n_msgs_after_persist, sizeof *w->held);
		if (w->held == NULL)
			abort();
		for (uint32_t i = 0; i < u->n_msgs_after_persist; i++)
			w->held[i] = hold_msg(n, &u->msgs_after_persist[i]);
		w->n_held = u->n_msgs_after_persist;
	}
	if (n->writes_tail != NULL)
		n->writes_tail->next = w;
	else
		n->writes = w;
	n->writes_tail = w;
}

static void write_free(struct write *w)
{
	free(w->held);
	free(w);
}

static void on_persisted(void *data, uint64_t seq, int status)
{
	struct baton_node *n = data;
	struct write *w = n->writes;
	assert(w != NULL && w->seq == seq);
	n->writes = w->next;
	if (n->writes == NULL)
		n->writes_tail = NULL;
	if (status != 0) {
		storage_failed(n, status);
		write_free(w);
		return;
	}
	for (uint32_t i = 0; i < w->n_held; i++)
		send_msg(n, &w->held[i].msg);
	if (w->report) {
		struct baton_event ev = {.type = BATON_EVENT_PERSISTED};
		ev.u.persisted.index = w->index;
		ev.u.persisted.term = w->term;
		step(n, &ev);
	}
	write_free(w);
}

static void on_storage_async(uv_async_t *a)
{
	struct baton_node *n = a->data;
	n->storage->ops->poll(n->storage, on_persisted, n);
}

/* Runs on the storage's writer thread. */
static void storage_notify(void *data)
{
	uv_async_send(data);
}

/* ---- applying ------------------------------------------------------------ */

static struct proposal *props_front(struct baton_node *n)
{
	return n->props_n > 0 ? &n->props[n->props_head] : NULL;
}

static void props_pop(struct baton_node *n)
{
	n->props_head = (n->props_head + 1) % n->props_cap;
	n->props_n--;
}

static void props_push(struct baton_node *n, struct proposal p)
{
	if (n->props_n == n->props_cap) {
		/* Unroll the ring into a bigger array. */
		uint32_t old = n->props_cap;
		struct proposal *g = malloc((old ? old * 2 : 64) * sizeof *g);
		if (g == NULL)
			abort();
		for (uint32_t i = 0; i < n->props_n; i++)
			g[i] = n->props[(n->props_head + i) % old];
		free(n->props);
		n->props = g;
		n->props_cap = old ? old * 2 : 64;
		n->props_head = 0;
	}
	n->props[(n->props_head + n->props_n) % n->props_cap] = p;
	n->props_n++;
}

/* Fail every proposal at or below `index` whose entry was not applied as
 * proposed: its fate is unknown to the client. */
static void props_fail_upto(struct baton_node *n, baton_index index)
{
	struct proposal *p;
	while ((p = props_front(n)) != NULL && p->index <= index) {
		struct proposal q = *p;
		props_pop(n);
		q.cb(q.data, BATON_ELEADERCHANGED, NULL, 0);
	}
}

static void apply_entry(struct baton_node *n, const struct baton_entry *e)
{
	props_fail_upto(n, e->index - 1);
	struct proposal *p = props_front(n);
	bool waited = p != NULL && p->index == e->index && p->term == e->term;
	baton_buf_reset(&n->scratch);
	if (e->type == BATON_ENTRY_COMMAND)
		n->app.apply(n->app.data, e, waited ? &n->scratch : NULL);
	n->applied = e->index;
	if (p != NULL && p->index == e->index) {
		struct proposal q = *p;
		props_pop(n);
		if (waited)
			q.cb(q.data, 0, n->scratch.data, n->scratch.len);
		else
			q.cb(q.data, BATON_ELEADERCHANGED, NULL, 0);
	}
}

static void serve_reads(struct baton_node *n)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < n->reads_n; i++) {
		struct read_req r = n->reads[i];
		if (r.resolved && r.read_index <= n->applied)
			r.cb(r.data, 0);
		else
			n->reads[k++] = r;
	}
	n->reads_n = k;
}

/* A result answers every read of its group (see flush_reads). */
static void resolve_reads(struct baton_node *n, const struct baton_update *u)
{
	for (uint32_t i = 0; i < u->n_reads; i++) {
		const struct baton_read_result *res = &u->reads[i];
		uint32_t k = 0;
		for (uint32_t j = 0; j < n->reads_n; j++) {
			struct read_req r = n->reads[j];
			if (r.id != res->request_id || r.resolved) {
				n->reads[k++] = r;
			} else if (res->status != 0) {
				r.cb(r.data, res->status);
			} else {
				r.resolved = true;
				r.read_index = res->read_index;
				n->reads[k++] = r;
			}
		}
		n->reads_n = k;
	}
}

/* ---- membership waiters ------------------------------------------------- */

static int waiter_state(struct baton_node *n, const struct waiter *w)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	if (now_ms(n) > w->deadline_ms)
		return w->kind == WAIT_PROMOTE ? BATON_ECATCHUP
					       : BATON_ELEADERCHANGED;
	const struct baton_member *m = baton_config_find(&s.config, w->id);
	bool committed = s.config_index <= s.commit_index;
	switch (w->kind) {
	case WAIT_ADD:
		return committed && m != NULL ? 0 : 1;
	case WAIT_PROMOTE:
		return committed && m != NULL && m->role == BATON_VOTER ? 0 : 1;
	case WAIT_REMOVE:
		return committed && m == NULL ? 0 : 1;
	case WAIT_TRANSFER:
		if (w->id != 0)
			return s.leader_id == w->id ? 0 : 1;
		return s.leader_id != 0 && s.leader_id != n->c.id ? 0 : 1;
	}
	return 1;
}

static void check_waiters(struct baton_node *n, baton_node_id failed_promotion)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < n->waiters_n; i++) {
		struct waiter w = n->waiters[i];
		int st = w.kind == WAIT_PROMOTE && w.id == failed_promotion
				 ? BATON_ECATCHUP
				 : waiter_state(n, &w);
		if (st == 1)
			n->waiters[k++] = w;
		else
			w.cb(w.data, st);
	}
	n->waiters_n = k;
}

static int add_waiter(struct baton_node *n, enum waiter_kind kind,
		      baton_node_id id, baton_node_done_cb cb, void *data)
{
	if (n->waiters_n == n->waiters_cap)
		n->waiters =
			grow(n->waiters, &n->waiters_cap, sizeof *n->waiters);
	n->waiters[n->waiters_n++] = (struct waiter){
		kind, id, now_ms(n) + ADMIN_TIMEOUT_MS, cb, data};
	return 0;
}

/* ---- the update ------------------------------------------------------------
 */

static void handle_update(struct baton_node *n, const struct baton_update *u)
{
	if (u->role != n->role || u->leader_id != n->leader) {
		if (u->leader_id != n->leader)
			LOG_INFO("term %" PRIu64 ": leader is %" PRIu64 "%s",
				 u->term, u->leader_id,
				 u->leader_id == n->c.id ? " (this node)" : "");
		n->role = u->role;
		n->leader = u->leader_id;
		if (n->app.leader_changed != NULL)
			n->app.leader_changed(n->app.data, u->leader_id);
	}
	for (uint32_t i = 0; i < u->n_msgs; i++)
		send_msg(n, &u->msgs[i]);
	persist(n, u);
	if (u->snapshot != NULL) {
		int rv = n->app.restore(n->app.data, u->snapshot_data,
					u->snapshot_len);
		if (rv != 0) {
			LOG_ERROR("cannot restore the snapshot at %" PRIu64
				  ": %s",
				  u->snapshot->index, baton_strerror(rv));
			abort(); /* the state machine would diverge */
		}
		LOG_INFO("installed a snapshot at index %" PRIu64,
			 u->snapshot->index);
		props_fail_upto(n, u->snapshot->index);
		n->applied = u->snapshot->index;
		n->snapshot_index = u->snapshot->index;
	}
	for (uint32_t i = 0; i < u->n_apply; i++)
		apply_entry(n, &u->apply[i]);
	resolve_reads(n, u);
	serve_reads(n);
	check_waiters(n, u->promotion_failed);
	if (n->c.snapshot_entries > 0 &&
	    n->applied >= n->snapshot_index + n->c.snapshot_entries)
		n->snapshot_due = true;
}

/* ---- snapshots --------------------------------------------------------------
 */

static void take_snapshot(struct baton_node *n)
{
	n->snapshot_due = false;
	struct baton_snapshot_header h = {0};
	int rv = baton_raft_snapshot_meta(n->raft, n->applied, &h.meta);
	if (rv != 0)
		return;
	h.machine_version.value = 1;
	h.n_versions = 1;
	h.versions[0].id = n->c.id;
	h.versions[0].profile = n->c.profile;
	struct baton_buf data;
	baton_buf_init(&data);
	rv = n->app.snapshot(n->app.data, &data);
	struct baton_snapshot_sink *k = NULL;
	if (rv == 0)
		rv = n->storage->ops->snapshot_begin(n->storage, &h, &k);
	if (rv == 0) {
		rv = n->storage->ops->snapshot_write(k, data.data, data.len);
		if (rv == 0)
			rv = n->storage->ops->snapshot_commit(k);
		else
			n->storage->ops->snapshot_abort(k);
	}
	if (rv == 0) {
		struct baton_event ev = {.type = BATON_EVENT_SNAPSHOT_TAKEN};
		ev.u.snapshot_taken.index = h.meta.index;
		ev.u.snapshot_taken.data = data.data;
		ev.u.snapshot_taken.len = data.len;
		baton_index before = n->snapshot_index;
		n->snapshot_index = h.meta.index;
		rv = step(n, &ev);
		n->snapshot_due = false;
		if (rv == 0)
			LOG_INFO("snapshot at index %" PRIu64 " (%zu bytes)",
				 h.meta.index, data.len);
		else
			n->snapshot_index = before;
	}
	if (rv == BATON_EIO)
		storage_failed(n, rv);
	else if (rv != 0)
		LOG_WARN("snapshot at %" PRIu64 " failed: %s", n->applied,
			 baton_strerror(rv));
	baton_buf_free(&data);
}

/* ---- the loop's hooks ------------------------------------------------------
 */

static void flush_proposals(struct baton_node *n)
{
	while (n->queue_n > 0) {
		uint32_t k = n->queue_n < PROPOSE_BATCH_MAX ? n->queue_n
							    : PROPOSE_BATCH_MAX;
		struct baton_buffer bufs[PROPOSE_BATCH_MAX];
		for (uint32_t i = 0; i < k; i++)
			bufs[i] = (struct baton_buffer){n->queue[i].payload,
							n->queue[i].len};
		struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
		ev.u.propose.n = k;
		ev.u.propose.bufs = bufs;
		int rv = n->storage_failed ? BATON_EIO : step(n, &ev);
		struct baton_raft_status s;
		baton_raft_status(n->raft, &s);
		for (uint32_t i = 0; i < k; i++) {
			struct queued_proposal *q = &n->queue[i];
			if (rv == 0)
				props_push(
					n,
					(struct proposal){
						.index =
							ev.u.propose
								.first_index_out +
							i,
						.term = s.term,
						.deadline_ms =
							now_ms(n) +
							PROPOSAL_TIMEOUT_MS,
						.cb = q->cb,
						.data = q->data});
			else
				q->cb(q->data, rv, NULL, 0);
			free(q->payload);
		}
		memmove(n->queue, n->queue + k,
			(n->queue_n - k) * sizeof *n->queue);
		n->queue_n -= k;
	}
}

/* Every read that arrived since the last flush shares one read index:
 * one confirmation round answers them all, and each is still linearizable
 * (the index is taken after all of them arrived). */
static void flush_reads(struct baton_node *n)
{
	if (!n->reads_to_step)
		return;
	n->reads_to_step = false;
	uint64_t group = ++n->next_read_id;
	for (uint32_t i = 0; i < n->reads_n; i++) {
		if (n->reads[i].read_index != UINT64_MAX)
			continue;
		n->reads[i].id = group;
		n->reads[i].read_index = 0;
	}
	struct baton_event ev = {.type = BATON_EVENT_READ};
	ev.u.read.request_id = group;
	int rv = step(n, &ev);
	if (rv == 0)
		return;
	uint32_t k = 0;
	for (uint32_t j = 0; j < n->reads_n; j++) {
		struct read_req r = n->reads[j];
		if (r.id == group && !r.resolved)
			r.cb(r.data, rv);
		else
			n->reads[k++] = r;
	}
	n->reads_n = k;
}

static int member_event(struct baton_node *n, uint32_t type, baton_node_id id,
			enum waiter_kind kind, baton_node_done_cb cb,
			void *data);

static void flush_deferred(struct baton_node *n)
{
	while (n->deferred_n > 0) {
		struct deferred d = n->deferred[0];
		memmove(n->deferred, n->deferred + 1,
			--n->deferred_n * sizeof *n->deferred);
		int rv = member_event(n, d.type, d.id, d.kind, d.cb, d.data);
		if (rv != 0)
			d.cb(d.data, rv);
	}
}

static void on_check(uv_check_t *c)
{
	struct baton_node *n = c->data;
	if (n->storage_failed_due) {
		n->storage_failed_due = false;
		if (n->app.storage_failed != NULL)
			n->app.storage_failed(n->app.data);
	}
	flush_deferred(n);
	flush_proposals(n);
	flush_reads(n);
	if (n->snapshot_due)
		take_snapshot(n);
}

/* Fail reads and proposals that waited too long (a partitioned leader, no
 * quorum): the client gets a retryable error instead of a hang. */
static void expire(struct baton_node *n)
{
	uint64_t now = now_ms(n);
	uint32_t k = 0;
	for (uint32_t i = 0; i < n->reads_n; i++) {
		struct read_req r = n->reads[i];
		if (r.deadline_ms > now || r.read_index == UINT64_MAX)
			n->reads[k++] = r;
		else
			r.cb(r.data, BATON_ENOLEADER);
	}
	n->reads_n = k;
	struct proposal *p;
	while ((p = props_front(n)) != NULL && p->deadline_ms <= now) {
		struct proposal q = *p;
		props_pop(n);
		q.cb(q.data, BATON_ELEADERCHANGED, NULL, 0);
	}
}

static void on_tick(uv_timer_t *t)
{
	struct baton_node *n = t->data;
	struct baton_event ev = {.type = BATON_EVENT_TICK};
	step(n, &ev);
	check_waiters(n, 0);
	expire(n);
	if (n->shutdown_cb != NULL &&
	    (n->leader != n->c.id || now_ms(n) > n->shutdown_deadline_ms)) {
		void (*cb)(void *) = n->shutdown_cb;
		n->shutdown_cb = NULL;
		cb(n->shutdown_data);
	}
}

/* Decoded by the transport in the connection's protocol version, with a
 * Raft message's `from` set to the identity of its handshake; only Raft
 * messages and forwarded writes and their replies come here. */
static void on_peer_frame(void *data, baton_node_id from,
			  const struct baton_peer_frame *f)
{
	struct baton_node *n = data;
	if (f->kind == BATON_PEER_RAFT) {
		assert(f->raft.from == from);
		struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
		ev.u.receive.msg = &f->raft;
		step(n, &ev);
	} else {
		n->app.peer_frame(n->app.data, from, f);
	}
}

/* ---- the API ---------------------------------------------------------------
 */

int baton_node_propose(struct baton_node *n, const uint8_t *payload, size_t len,
		       baton_node_propose_cb cb, void *data)
{
	if (n->storage_failed)
		return BATON_EIO;
	if (n->role != BATON_LEADER)
		return BATON_ENOTLEADER;
	if (n->queue_n + n->props_n >= BATON_NODE_PENDING_MAX)
		return BATON_EOVERLOADED;
	if (n->queue_n == n->queue_cap)
		n->queue = grow(n->queue, &n->queue_cap, sizeof *n->queue);
	uint8_t *copy = malloc(len > 0 ? len : 1);
	if (copy == NULL)
		return BATON_ENOMEM;
	memcpy(copy, payload, len);
	n->queue[n->queue_n++] = (struct queued_proposal){copy, len, cb, data};
	return 0;
}

int baton_node_read(struct baton_node *n, baton_node_done_cb cb, void *data)
{
	if (n->reads_n >= BATON_NODE_PENDING_MAX)
		return BATON_EOVERLOADED;
	if (n->reads_n == n->reads_cap)
		n->reads = grow(n->reads, &n->reads_cap, sizeof *n->reads);
	n->reads[n->reads_n++] = (struct read_req){
		.id = 0, /* its group's, at the next flush */
		.deadline_ms = now_ms(n) + READ_TIMEOUT_MS,
		.read_index = UINT64_MAX, /* not yet given to the core */
		.cb = cb,
		.data = data};
	n->reads_to_step = true;
	return 0;
}

static int member_event(struct baton_node *n, uint32_t type, baton_node_id id,
			enum waiter_kind kind, baton_node_done_cb cb,
			void *data)
{
	if (n->stepping) {
		/* Called back from inside a step: run it from the check
		 * handle instead; errors then reach cb. */
		if (n->deferred_n == n->deferred_cap)
			n->deferred = grow(n->deferred, &n->deferred_cap,
					   sizeof *n->deferred);
		n->deferred[n->deferred_n++] =
			(struct deferred){type, id, kind, cb, data};
		return 0;
	}
	struct baton_event ev = {.type = type};
	if (type == BATON_EVENT_TRANSFER)
		ev.u.transfer.target = id;
	else
		ev.u.member.id = id;
	int rv = step(n, &ev);
	if (rv != 0)
		return rv;
	return add_waiter(n, kind, id, cb, data);
}

int baton_node_add_learner(struct baton_node *n, baton_node_id id,
			   baton_node_done_cb cb, void *data)
{
	return member_event(n, BATON_EVENT_ADD_LEARNER, id, WAIT_ADD, cb, data);
}

int baton_node_promote(struct baton_node *n, baton_node_id id,
		       baton_node_done_cb cb, void *data)
{
	return member_event(n, BATON_EVENT_PROMOTE, id, WAIT_PROMOTE, cb, data);
}

int baton_node_remove(struct baton_node *n, baton_node_id id,
		      baton_node_done_cb cb, void *data)
{
	return member_event(n, BATON_EVENT_REMOVE, id, WAIT_REMOVE, cb, data);
}

int baton_node_transfer(struct baton_node *n, baton_node_id id,
			baton_node_done_cb cb, void *data)
{
	return member_event(n, BATON_EVENT_TRANSFER, id, WAIT_TRANSFER, cb,
			    data);
}

int baton_node_send_frame(struct baton_node *n, baton_node_id to,
			  const struct baton_peer_frame *f)
{
	return baton_transport_send_frame(n->transport, to, f);
}

void baton_node_set_peer_addr(struct baton_node *n, baton_node_id id,
			      const char *addr)
{
	if (id != n->c.id)
		baton_transport_set_peer(n->transport, id, addr);
}

void baton_node_status(struct baton_node *n, struct baton_node_status *out)
{
	memset(out, 0, sizeof *out);
	baton_raft_status(n->raft, &out->raft);
	for (uint32_t i = 0; i < out->raft.config.n; i++)
		out->match[i] = baton_raft_match_index(
			n->raft, out->raft.config.members[i].id);
	out->storage_failed = n->storage_failed;
	baton_transport_stats(n->transport, &out->transport);
}

/* ---- life cycle --------------------------------------------------------- */

static int recover(struct baton_node *n, char *err, size_t errlen)
{
	struct baton_durable_state d;
	int rv = n->storage->ops->load(n->storage, &d);
	if (rv != 0) {
		snprintf(err, errlen, "load: %s",
			 n->storage->ops->errmsg(n->storage));
		return rv;
	}
	if (d.has_snapshot) {
		rv = n->app.restore(n->app.data, d.snapshot_data,
				    d.snapshot_len);
		if (rv != 0) {
			snprintf(err, errlen,
				 "the snapshot at %" PRIu64
				 " is unreadable: %s",
				 d.snapshot.meta.index, baton_strerror(rv));
			baton_durable_state_free(&d);
			return rv;
		}
		n->applied = n->snapshot_index = d.snapshot.meta.index;
	}
	rv = baton_raft_restore(n->raft, d.term, d.vote,
				d.has_snapshot ? &d.snapshot.meta : NULL,
				d.snapshot_data, d.snapshot_len, d.entries,
				d.n_entries);
	bool empty = d.term == 0 && !d.has_snapshot && d.n_entries == 0;
	LOG_INFO("recovered term %" PRIu64 ", snapshot %" PRIu64
		 ", %u log entries",
		 d.term, d.has_snapshot ? d.snapshot.meta.index : 0,
		 d.n_entries);
	baton_durable_state_free(&d);
	if (rv != 0) {
		snprintf(err, errlen, "restore: %s", baton_strerror(rv));
		return rv;
	}
	if (empty && n->c.n_founders > 0) {
		struct baton_config conf = {.n = n->c.n_founders};
		for (uint32_t i = 0; i < n->c.n_founders; i++)
			conf.members[i] = (struct baton_member){
				n->c.founders[i], BATON_VOTER};
		rv = baton_raft_bootstrap(n->raft, &conf);
		if (rv != 0) {
			snprintf(err, errlen, "bootstrap: %s",
				 baton_strerror(rv));
			return rv;
		}
		LOG_INFO("bootstrapped a new cluster of %u", conf.n);
	}
	return 0;
}

int baton_node_start(uv_loop_t *loop, const struct baton_node_config *c,
		     const struct baton_node_app *app, struct baton_node **out,
		     char *err, size_t errlen)
{
	struct baton_node *n = calloc(1, sizeof *n);
	if (n == NULL)
		return BATON_ENOMEM;
	n->loop = loop;
	n->c = *c;
	n->app = *app;
	n->role = BATON_FOLLOWER;
	baton_buf_init(&n->scratch);
	baton_buf_init(&n->frame);
	uv_async_init(loop, &n->storage_async, on_storage_async);
	n->storage_async.data = n;

	struct baton_raft_options o;
	baton_raft_options_default(&o);
	o.id = c->id;
	o.profile = c->profile;
	o.random_seed = (uint64_t)uv_hrtime() ^ (c->id * 0x9e3779b97f4a7c15ull);
	if (c->election_timeout_ms)
		o.election_timeout_ms = c->election_timeout_ms;
	if (c->heartbeat_ms)
		o.heartbeat_interval_ms = c->heartbeat_ms;
	if (c->snapshot_trailing_set)
		o.snapshot_trailing_entries = c->snapshot_trailing;
	int rv = baton_raft_create(&o, &n->raft);
	if (rv != 0) {
		snprintf(err, errlen, "raft options: %s", baton_strerror(rv));
		free(n);
		return rv;
	}
	struct baton_fs_options fo;
	baton_fs_options_default(&fo);
	fo.dir = c->data_dir;
	fo.notify = storage_notify;
	fo.notify_data = &n->storage_async;
	fo.vfs = c->vfs;
	rv = baton_fs_storage_open(&fo, &n->storage, err, errlen);
	if (rv == 0)
		rv = recover(n, err, errlen);
	struct baton_transport_config tc = {
		.loop = loop,
		.cluster_id = c->cluster_id,
		.id = c->id,
		.profile = c->profile,
		.listen_addr = c->peer_addr,
		.on_frame = on_peer_frame,
		.data = n,
	};
	if (rv == 0) {
		rv = baton_transport_start(&tc, &n->transport);
		if (rv != 0)
			snprintf(err, errlen, "cannot listen for peers on %s",
				 c->peer_addr);
	}
	if (rv != 0) {
		n->transport = NULL;
		baton_node_close(n);
		return rv;
	}
	for (uint32_t i = 0; i < c->n_founders; i++)
		baton_node_set_peer_addr(n, c->founders[i],
					 c->founder_addrs[i]);
	uv_timer_init(loop, &n->tick);
	n->tick.data = n;
	uv_timer_start(&n->tick, on_tick, BATON_NODE_TICK_MS,
		       BATON_NODE_TICK_MS);
	uv_check_init(loop, &n->flush);
	n->flush.data = n;
	uv_check_start(&n->flush, on_check);
	*out = n;
	return 0;
}

static void transfer_done(void *data, int status)
{
	(void)data;
	(void)status;
}

void baton_node_shutdown(struct baton_node *n, void (*cb)(void *data),
			 void *data)
{
	n->shutdown_cb = cb;
	n->shutdown_data = data;
	n->shutdown_deadline_ms =
		now_ms(n) + 2u * (n->c.election_timeout_ms
					  ? n->c.election_timeout_ms
					  : 1000u);
	if (n->role == BATON_LEADER) {
		LOG_INFO("handing leadership over before exit");
		baton_node_transfer(n, 0, transfer_done, NULL);
	}
}

static void fail_everything(struct baton_node *n)
{
	for (uint32_t i = 0; i < n->queue_n; i++) {
		n->queue[i].cb(n->queue[i].data, BATON_ESTATE, NULL, 0);
		free(n->queue[i].payload);
	}
	n->queue_n = 0;
	struct proposal *p;
	while ((p = props_front(n)) != NULL) {
		struct proposal q = *p;
		props_pop(n);
		q.cb(q.data, BATON_ELEADERCHANGED, NULL, 0);
	}
	for (uint32_t i = 0; i < n->reads_n; i++)
		n->reads[i].cb(n->reads[i].data, BATON_ESTATE);
	n->reads_n = 0;
	for (uint32_t i = 0; i < n->waiters_n; i++)
		n->waiters[i].cb(n->waiters[i].data, BATON_ESTATE);
	n->waiters_n = 0;
	for (uint32_t i = 0; i < n->deferred_n; i++)
		n->deferred[i].cb(n->deferred[i].data, BATON_ESTATE);
	n->deferred_n = 0;
}

static void free_on_close(uv_handle_t *h)
{
	free(h->data);
}

void baton_node_close(struct baton_node *n)
{
	fail_everything(n);
	if (uv_is_active((uv_handle_t *)&n->tick) || n->tick.type == UV_TIMER) {
		uv_timer_stop(&n->tick);
		uv_close((uv_handle_t *)&n->tick, NULL);
	}
	if (n->flush.type == UV_CHECK) {
		uv_check_stop(&n->flush);
		uv_close((uv_handle_t *)&n->flush, NULL);
	}
	if (n->transport != NULL)
		baton_transport_stop(n->transport);
	if (n->storage != NULL) {
		n->storage->ops->close(n->storage); /* waits for writes */
		n->storage = NULL;
	}
	while (n->writes != NULL) {
		struct write *w = n->writes;
		n->writes = w->next;
		write_free(w);
	}
	baton_raft_destroy(n->raft);
	baton_buf_free(&n->scratch);
	baton_buf_free(&n->frame);
	free(n->props);
	free(n->queue);
	free(n->reads);
	free(n->waiters);
	free(n->deferred);
	/* The async handle is the last one: the node goes with it. */
	n->storage_async.data = n;
	uv_close((uv_handle_t *)&n->storage_async, free_on_close);
}
