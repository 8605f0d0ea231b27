/*
 * The application's requests and their completions: proposals (queued,
 * batched into one PROPOSE event per flush, completed when applied),
 * linearizable reads (grouped per flush under one read index), membership,
 * leadership and version requests with their waiters, and the requests
 * made while stepping, deferred to the next flush. Every callback is
 * called exactly once.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- proposals ----------------------------------------------------------- */

static struct pl_proposal *props_front(const struct baton_pipeline *p)
{
	return p->props_n > 0 ? &p->props[p->props_head] : NULL;
}

static struct pl_proposal props_pop(struct baton_pipeline *p)
{
	BATON_ASSERT(p->props_n > 0 && p->props_head < p->props_cap);
	struct pl_proposal q = p->props[p->props_head];
	p->props_head = (p->props_head + 1) % p->props_cap;
	p->props_n--;
	return q;
}

/* Room for `more` proposals in the ring: 0 or BATON_ENOMEM. */
static int props_reserve(struct baton_pipeline *p, uint32_t more)
{
	if (p->props_n + more <= p->props_cap)
		return 0;
	uint32_t cap = p->props_cap ? p->props_cap : 64;
	while (cap < p->props_n + more)
		cap *= 2;
	/* Unroll the ring into the bigger array. */
	struct pl_proposal *g = malloc((size_t)cap * sizeof *g);
	if (g == NULL)
		return BATON_ENOMEM;
	for (uint32_t i = 0; i < p->props_n; i++)
		g[i] = p->props[(p->props_head + i) % p->props_cap];
	free(p->props);
	p->props = g;
	p->props_cap = cap;
	p->props_head = 0;
	return 0;
}

static void props_push(struct baton_pipeline *p, struct pl_proposal q)
{
	BATON_ASSERT(p->props_n < p->props_cap);
	BATON_ASSERT(p->props_n == 0 ||
		     p->props[(p->props_head + p->props_n - 1) % p->props_cap]
				     .index < q.index);
	p->props[(p->props_head + p->props_n) % p->props_cap] = q;
	p->props_n++;
}

/* This node, leading again, appended at `index`: whatever it had proposed
 * there before (in an earlier term) was overwritten, so never committed. */
static void props_drop_from(struct baton_pipeline *p, baton_index index)
{
	while (p->props_n > 0) {
		uint32_t back = (p->props_head + p->props_n - 1) % p->props_cap;
		struct pl_proposal q = p->props[back];
		if (q.index < index)
			return;
		p->props_n--;
		q.cb(q.data, BATON_ELEADERCHANGED, NULL, 0);
	}
}

void pl_props_fail_upto(struct baton_pipeline *p, baton_index index, int status)
{
	struct pl_proposal *f;
	while ((f = props_front(p)) != NULL && f->index <= index) {
		struct pl_proposal q = props_pop(p);
		q.cb(q.data, status, NULL, 0);
	}
}

bool pl_proposal_waits(const struct baton_pipeline *p,
		       const struct baton_entry *e)
{
	const struct pl_proposal *f = props_front(p);
	return f != NULL && f->index == e->index && f->term == e->term;
}

void pl_proposal_applied(struct baton_pipeline *p, const struct baton_entry *e,
			 bool waited, const struct baton_buf *reply)
{
	const struct pl_proposal *f = props_front(p);
	BATON_ASSERT(f == NULL || f->index >= e->index);
	if (f == NULL || f->index != e->index)
		return;
	struct pl_proposal q = props_pop(p);
	if (!waited)
		q.cb(q.data, BATON_ELEADERCHANGED, NULL, 0);
	else if (reply != NULL)
		q.cb(q.data, 0, reply->data, reply->len);
	else
		q.cb(q.data, 0, NULL, 0);
}

static int queue_bytes_reserve(struct baton_pipeline *p, size_t len)
{
	if (p->queue_bytes_cap - p->queue_bytes_len >= len &&
	    p->queue_bytes != NULL)
		return 0;
	size_t cap = p->queue_bytes_cap ? p->queue_bytes_cap : 16384;
	while (cap - p->queue_bytes_len < len)
		cap *= 2;
	uint8_t *g = realloc(p->queue_bytes, cap);
	if (g == NULL)
		return BATON_ENOMEM;
	p->queue_bytes = g;
	p->queue_bytes_cap = cap;
	return 0;
}

int baton_pipeline_propose(struct baton_pipeline *p, const uint8_t *payload,
			   size_t len, baton_propose_cb cb, void *data)
{
	if (p->storage_failed)
		return BATON_EIO;
	if (p->stalled_index != 0)
		return BATON_ESTALLED;
	if (p->role != BATON_LEADER)
		return BATON_ENOTLEADER;
	/* Refused here, alone: in a batch the core would refuse every
	 * proposal of it. */
	if (len > p->c.raft.max_entry_bytes)
		return BATON_ETOOBIG;
	if (p->queue_n + p->props_n >= BATON_PIPELINE_PENDING_MAX)
		return BATON_EOVERLOADED;
	if (p->queue_n == p->queue_cap &&
	    pl_grow((void **)&p->queue, &p->queue_cap, sizeof *p->queue) != 0)
		return BATON_ENOMEM;
	if (queue_bytes_reserve(p, len) != 0)
		return BATON_ENOMEM;
	size_t offset = p->queue_bytes_len;
	if (len > 0)
		memcpy(p->queue_bytes + offset, payload, len);
	p->queue_bytes_len += len;
	p->queue[p->queue_n++] = (struct pl_queued){offset, len, cb, data};
	return 0;
}

/* The queue's payload bytes are dropped once nothing is queued; a buffer
 * grown past this by big entries is given back then, not kept. */
#define PL_QUEUE_BYTES_KEEP (1u << 20)

static void queue_bytes_drop_if_empty(struct baton_pipeline *p)
{
	if (p->queue_n > 0)
		return;
	p->queue_bytes_len = 0;
	if (p->queue_bytes_cap > PL_QUEUE_BYTES_KEEP) {
		free(p->queue_bytes);
		p->queue_bytes = NULL;
		p->queue_bytes_cap = 0;
	}
}

/* One PROPOSE event per batch of queued proposals. While the leader hands
 * leadership over (a transfer, at most an election timeout) the core
 * refuses proposals: they wait in the queue instead, and go in when the
 * transfer fails, or fail with BATON_ENOTLEADER (never appended: the
 * client may safely retry at the new leader) when it succeeds. */
static void flush_proposals(struct baton_pipeline *p)
{
	if (p->queue_n > 0 && p->role == BATON_LEADER) {
		struct baton_raft_status s;
		baton_raft_status(p->raft, &s);
		if (s.transfer_target != 0)
			return;
	}
	while (p->queue_n > 0) {
		uint32_t k = p->queue_n < BATON_PIPELINE_BATCH_MAX
				     ? p->queue_n
				     : BATON_PIPELINE_BATCH_MAX;
		struct baton_buffer bufs[BATON_PIPELINE_BATCH_MAX];
		for (uint32_t i = 0; i < k; i++)
			bufs[i] = (struct baton_buffer){
				p->queue_bytes + p->queue[i].offset,
				p->queue[i].len};
		struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
		ev.u.propose.n = k;
		ev.u.propose.bufs = bufs;
		int rv = p->storage_failed	 ? BATON_EIO
			 : p->stalled_index != 0 ? BATON_ESTALLED
						 : props_reserve(p, k);
		if (rv == 0)
			rv = pl_step(p, &ev);
		if (rv == 0)
			props_drop_from(p, ev.u.propose.first_index_out);
		struct baton_raft_status s;
		baton_raft_status(p->raft, &s);
		uint64_t deadline = pl_now(p) + p->c.proposal_timeout_ms;
		for (uint32_t i = 0; i < k; i++) {
			struct pl_queued q = p->queue[i];
			if (rv == 0)
				props_push(
					p,
					(struct pl_proposal){
						.index =
							ev.u.propose
								.first_index_out +
							i,
						.term = s.term,
						.deadline_ms = deadline,
						.cb = q.cb,
						.data = q.data});
			else
				q.cb(q.data, rv, NULL, 0);
		}
		memmove(p->queue, p->queue + k,
			(p->queue_n - k) * sizeof *p->queue);
		p->queue_n -= k;
	}
	queue_bytes_drop_if_empty(p);
}

/* ---- reads --------------------------------------------------------------- */

int baton_pipeline_read(struct baton_pipeline *p, baton_done_cb cb, void *data)
{
	if (p->stalled_index != 0)
		return BATON_ESTALLED;
	if (p->reads_n >= BATON_PIPELINE_PENDING_MAX)
		return BATON_EOVERLOADED;
	if (p->reads_n == p->reads_cap &&
	    pl_grow((void **)&p->reads, &p->reads_cap, sizeof *p->reads) != 0)
		return BATON_ENOMEM;
	p->reads[p->reads_n++] = (struct pl_read){
		.group = 0, /* its group's, at the next flush */
		.deadline_ms = pl_now(p) + p->c.read_timeout_ms,
		.read_index = PL_READ_UNSENT,
		.cb = cb,
		.data = data};
	p->reads_unsent = true;
	return 0;
}

/* Completions are collected in rounds of this many before their callbacks
 * run, so a callback may make or finish requests freely: each round scans
 * the array afresh. */
#define DONE_ROUND 256u

struct done {
	baton_done_cb cb;
	void *data;
	int status;
};

/* Finish (and drop) the reads `pick` chooses, with `status`. */
static void reads_finish(struct baton_pipeline *p,
			 bool (*pick)(const struct pl_read *r, const void *arg),
			 const void *arg, int status)
{
	for (;;) {
		struct done out[DONE_ROUND];
		uint32_t m = 0, k = 0, i = 0, n = p->reads_n;
		for (; i < n && m < DONE_ROUND; i++) {
			struct pl_read r = p->reads[i];
			if (pick(&r, arg))
				out[m++] = (struct done){r.cb, r.data, status};
			else
				p->reads[k++] = r;
		}
		if (n > i) /* reads may be NULL while none ever waited */
			memmove(p->reads + k, p->reads + i,
				(size_t)(n - i) * sizeof *p->reads);
		p->reads_n = k + (n - i);
		BATON_ASSERT(p->reads_n + m == n);
		for (uint32_t j = 0; j < m; j++)
			out[j].cb(out[j].data, out[j].status);
		if (m < DONE_ROUND)
			return;
	}
}

static bool pick_group(const struct pl_read *r, const void *arg)
{
	return r->group == *(const uint64_t *)arg && !r->resolved;
}

/* A read index refused because leadership is moving: no leader known, the
 * node asked no longer leads, or the leader stepped down before it could
 * confirm. A read changes nothing, so it is asked again at a later flush
 * (until its deadline, pl_expire), instead of failing: a client's read
 * then waits through a hand-over or an election rather than fail. */
static bool read_retryable(int status)
{
	return status == BATON_ENOLEADER || status == BATON_ENOTLEADER ||
	       status == BATON_ELEADERCHANGED;
}

static void reads_unsend(struct baton_pipeline *p, uint64_t group)
{
	BATON_ASSERT(group != 0);
	for (uint32_t i = 0; i < p->reads_n; i++) {
		struct pl_read *r = &p->reads[i];
		if (r->group != group || r->resolved)
			continue;
		BATON_ASSERT(r->read_index != PL_READ_UNSENT);
		r->group = 0;
		r->read_index = PL_READ_UNSENT;
		p->reads_unsent = true;
	}
}

/* Every read that arrived since the last flush shares one read index: one
 * confirmation round answers them all, and each is still linearizable (the
 * index is taken after all of them arrived). */
static void flush_reads(struct baton_pipeline *p)
{
	if (!p->reads_unsent)
		return;
	p->reads_unsent = false;
	uint64_t group = ++p->next_read_group;
	for (uint32_t i = 0; i < p->reads_n; i++) {
		if (p->reads[i].read_index != PL_READ_UNSENT)
			continue;
		p->reads[i].group = group;
		p->reads[i].read_index = 0;
	}
	struct baton_event ev = {.type = BATON_EVENT_READ};
	ev.u.read.request_id = group;
	int rv = p->stalled_index != 0 ? BATON_ESTALLED : pl_step(p, &ev);
	if (read_retryable(rv))
		reads_unsend(p, group);
	else if (rv != 0)
		reads_finish(p, pick_group, &group, rv);
}

void pl_reads_leader_changed(struct baton_pipeline *p)
{
	for (uint32_t i = 0; i < p->reads_n; i++) {
		struct pl_read *r = &p->reads[i];
		if (r->resolved || r->read_index == PL_READ_UNSENT)
			continue;
		BATON_ASSERT(r->group != 0);
		/* A late result for the group finds no read: ignored. */
		r->group = 0;
		r->read_index = PL_READ_UNSENT;
		p->reads_unsent = true;
	}
}

/* A result answers every read of its group. */
void pl_resolve_reads(struct baton_pipeline *p, const struct baton_update *u)
{
	for (uint32_t i = 0; i < u->n_reads; i++) {
		const struct baton_read_result *res = &u->reads[i];
		if (read_retryable(res->status)) {
			reads_unsend(p, res->request_id);
			continue;
		}
		if (res->status != 0) {
			reads_finish(p, pick_group, &res->request_id,
				     res->status);
			continue;
		}
		for (uint32_t j = 0; j < p->reads_n; j++) {
			struct pl_read *r = &p->reads[j];
			if (r->group != res->request_id || r->resolved)
				continue;
			r->resolved = true;
			r->read_index = res->read_index;
		}
	}
}

static bool pick_served(const struct pl_read *r, const void *arg)
{
	return r->resolved && r->read_index <= *(const baton_index *)arg;
}

void pl_serve_reads(struct baton_pipeline *p)
{
	reads_finish(p, pick_served, &p->applied, 0);
}

static bool pick_expired(const struct pl_read *r, const void *arg)
{
	return r->deadline_ms <= *(const uint64_t *)arg;
}

static bool pick_any(const struct pl_read *r, const void *arg)
{
	(void)r;
	(void)arg;
	return true;
}

/* ---- waiters ------------------------------------------------------------- */

/* 0 done, 1 still waiting, or the error it failed with. */
static int waiter_state(struct baton_pipeline *p, const struct pl_waiter *w,
			const struct baton_raft_status *s, uint64_t now)
{
	if (now > w->deadline_ms)
		return w->kind == PL_WAIT_PROMOTE ? BATON_ECATCHUP
						  : BATON_ELEADERCHANGED;
	const struct baton_member *m = baton_config_find(&s->config, w->id);
	bool committed = s->config_index <= s->commit_index;
	switch (w->kind) {
	case PL_WAIT_ADD:
		return committed && m != NULL ? 0 : 1;
	case PL_WAIT_PROMOTE:
		return committed && m != NULL && m->role == BATON_VOTER ? 0 : 1;
	case PL_WAIT_REMOVE:
		return committed && m == NULL ? 0 : 1;
	case PL_WAIT_TRANSFER:
		if (w->id != 0)
			return s->leader_id == w->id ? 0 : 1;
		return s->leader_id != 0 && s->leader_id != p->c.raft.id ? 0
									 : 1;
	case PL_WAIT_VERSIONS:
		/* Done from pl_versions_applied; passed over (a snapshot
		 * covered it, or it was overwritten): fate unknown. */
		return p->applied >= w->index ? BATON_ELEADERCHANGED : 1;
	}
	return 1;
}

/* Finish the waiters whose state (0 or an error) is known: all, with
 * `status`, when all is set. */
static void waiters_finish(struct baton_pipeline *p,
			   baton_node_id failed_promotion, bool all, int status)
{
	for (;;) {
		struct done out[DONE_ROUND];
		struct baton_raft_status s;
		baton_raft_status(p->raft, &s);
		uint64_t now = pl_now(p);
		uint32_t m = 0, k = 0, i = 0, n = p->waiters_n;
		for (; i < n && m < DONE_ROUND; i++) {
			struct pl_waiter w = p->waiters[i];
			int st = all ? status
				 : w.kind == PL_WAIT_PROMOTE &&
						 w.id == failed_promotion
					 ? BATON_ECATCHUP
					 : waiter_state(p, &w, &s, now);
			if (st == 1)
				p->waiters[k++] = w;
			else
				out[m++] = (struct done){w.cb, w.data, st};
		}
		if (n > i)
			memmove(p->waiters + k, p->waiters + i,
				(size_t)(n - i) * sizeof *p->waiters);
		p->waiters_n = k + (n - i);
		BATON_ASSERT(p->waiters_n + m == n);
		for (uint32_t j = 0; j < m; j++)
			out[j].cb(out[j].data, out[j].status);
		if (m < DONE_ROUND)
			return;
	}
}

void pl_check_waiters(struct baton_pipeline *p, baton_node_id failed_promotion)
{
	if (p->waiters_n > 0)
		waiters_finish(p, failed_promotion, false, 0);
}

void pl_requests_retired(struct baton_pipeline *p)
{
	BATON_ASSERT(p->retired && !p->stepping);
	/* A leader removing itself may hear of its removal from a member
	 * before it applies the configuration without it, and a retired
	 * node steps no more: its removal is done, say so now rather than
	 * at the waiter's deadline (a client would have given up). One at a
	 * time: a callback may change the array. */
	for (uint32_t i = 0; i < p->waiters_n;) {
		struct pl_waiter w = p->waiters[i];
		if (w.kind != PL_WAIT_REMOVE || w.id != p->c.raft.id) {
			i++;
			continue;
		}
		memmove(p->waiters + i, p->waiters + i + 1,
			(size_t)(p->waiters_n - i - 1) * sizeof *p->waiters);
		p->waiters_n--;
		w.cb(w.data, 0);
	}
	BATON_ASSERT(p->waiters_n <= p->waiters_cap);
}

void pl_versions_applied(struct baton_pipeline *p, const struct baton_entry *e)
{
	BATON_ASSERT(e->type == BATON_ENTRY_VERSION);
	/* One at a time: a callback may change the array. */
	for (uint32_t i = 0; i < p->waiters_n;) {
		struct pl_waiter w = p->waiters[i];
		if (w.kind != PL_WAIT_VERSIONS || w.index != e->index) {
			i++;
			continue;
		}
		memmove(p->waiters + i, p->waiters + i + 1,
			(size_t)(p->waiters_n - i - 1) * sizeof *p->waiters);
		p->waiters_n--;
		w.cb(w.data, w.term == e->term ? 0 : BATON_ELEADERCHANGED);
	}
}

/* Room for one more waiter, taken before the core is stepped: once it
 * took the request, the completion must be tracked. */
static int reserve_waiter(struct baton_pipeline *p)
{
	if (p->waiters_n == p->waiters_cap &&
	    pl_grow((void **)&p->waiters, &p->waiters_cap,
		    sizeof *p->waiters) != 0)
		return BATON_ENOMEM;
	return 0;
}

static int add_waiter(struct baton_pipeline *p, struct pl_waiter w)
{
	if (reserve_waiter(p) != 0)
		return BATON_ENOMEM;
	w.deadline_ms = pl_now(p) + p->c.admin_timeout_ms;
	p->waiters[p->waiters_n++] = w;
	return 0;
}

/* ---- membership, leadership, versions ------------------------------------ */

static int request(struct baton_pipeline *p, enum pl_wait_kind kind,
		   baton_node_id id, const struct baton_version_state *vs,
		   baton_done_cb cb, void *data)
{
	if (p->stepping) {
		/* Called back from inside a step: run it at the next flush;
		 * errors then reach cb. */
		struct pl_deferred d = {kind, id, NULL, cb, data};
		if (vs != NULL) {
			d.versions = malloc(sizeof *d.versions);
			if (d.versions == NULL)
				return BATON_ENOMEM;
			*d.versions = *vs;
		}
		if (p->deferred_n == p->deferred_cap &&
		    pl_grow((void **)&p->deferred, &p->deferred_cap,
			    sizeof *p->deferred) != 0) {
			free(d.versions);
			return BATON_ENOMEM;
		}
		p->deferred[p->deferred_n++] = d;
		return 0;
	}
	if (reserve_waiter(p) != 0)
		return BATON_ENOMEM;
	struct baton_event ev;
	memset(&ev, 0, sizeof ev);
	switch (kind) {
	case PL_WAIT_ADD:
		ev.type = BATON_EVENT_ADD_LEARNER;
		break;
	case PL_WAIT_PROMOTE:
		ev.type = BATON_EVENT_PROMOTE;
		break;
	case PL_WAIT_REMOVE:
		ev.type = BATON_EVENT_REMOVE;
		break;
	case PL_WAIT_TRANSFER:
		ev.type = BATON_EVENT_TRANSFER;
		break;
	case PL_WAIT_VERSIONS:
		ev.type = BATON_EVENT_VERSIONS;
		break;
	}
	if (kind == PL_WAIT_TRANSFER)
		ev.u.transfer.target = id;
	else if (kind == PL_WAIT_VERSIONS)
		ev.u.versions.state = vs;
	else
		ev.u.member.id = id;
	int rv = pl_step(p, &ev);
	if (rv != 0)
		return rv;
	struct pl_waiter w = {.kind = kind, .id = id, .cb = cb, .data = data};
	if (kind == PL_WAIT_VERSIONS) {
		struct baton_raft_status s;
		baton_raft_status(p->raft, &s);
		w.index = s.versions_index;
		w.term = s.term;
	}
	rv = add_waiter(p, w);
	BATON_ASSERT(rv == 0); /* the room was made above */
	return 0;
}

int baton_pipeline_add_learner(struct baton_pipeline *p, baton_node_id id,
			       baton_done_cb cb, void *data)
{
	return request(p, PL_WAIT_ADD, id, NULL, cb, data);
}

int baton_pipeline_promote(struct baton_pipeline *p, baton_node_id id,
			   baton_done_cb cb, void *data)
{
	return request(p, PL_WAIT_PROMOTE, id, NULL, cb, data);
}

int baton_pipeline_remove(struct baton_pipeline *p, baton_node_id id,
			  baton_done_cb cb, void *data)
{
	return request(p, PL_WAIT_REMOVE, id, NULL, cb, data);
}

int baton_pipeline_transfer(struct baton_pipeline *p, baton_node_id id,
			    baton_done_cb cb, void *data)
{
	return request(p, PL_WAIT_TRANSFER, id, NULL, cb, data);
}

int baton_pipeline_set_versions(struct baton_pipeline *p,
				const struct baton_version_state *s,
				baton_done_cb cb, void *data)
{
	BATON_ASSERT(s != NULL);
	return request(p, PL_WAIT_VERSIONS, 0, s, cb, data);
}

int baton_pipeline_downgrade(struct baton_pipeline *p, uint32_t op,
			     struct baton_release target, baton_done_cb cb,
			     void *data)
{
	if (p->stepping)
		return BATON_EBUSY;
	/* Proposals queued this loop iteration were encoded under the
	 * machine version in force before the downgrade: into the log
	 * first, so that every entry after it is of the lower version. */
	flush_proposals(p);
	if (reserve_waiter(p) != 0)
		return BATON_ENOMEM;
	struct baton_event ev;
	memset(&ev, 0, sizeof ev);
	ev.type = BATON_EVENT_DOWNGRADE;
	ev.u.downgrade.op = op;
	ev.u.downgrade.target = target;
	int rv = pl_step(p, &ev);
	if (rv != 0)
		return rv;
	/* Its version entry, like any other: done once applied. */
	struct baton_raft_status s;
	baton_raft_status(p->raft, &s);
	struct pl_waiter w = {.kind = PL_WAIT_VERSIONS,
			      .index = s.versions_index,
			      .term = s.term,
			      .cb = cb,
			      .data = data};
	rv = add_waiter(p, w);
	BATON_ASSERT(rv == 0); /* the room was made above */
	return 0;
}

static void flush_deferred(struct baton_pipeline *p)
{
	while (p->deferred_n > 0) {
		struct pl_deferred d = p->deferred[0];
		memmove(p->deferred, p->deferred + 1,
			--p->deferred_n * sizeof *p->deferred);
		int rv = request(p, d.kind, d.id, d.versions, d.cb, d.data);
		free(d.versions);
		if (rv != 0)
			d.cb(d.data, rv);
	}
}

/* ---- time, stalls, flush, teardown --------------------------------------- */

/* Fail reads and proposals that waited too long (a partitioned leader, no
 * quorum): the client gets a retryable error instead of a hang. */
void pl_expire(struct baton_pipeline *p)
{
	uint64_t now = pl_now(p);
	reads_finish(p, pick_expired, &now, BATON_ENOLEADER);
	struct pl_proposal *f;
	while ((f = props_front(p)) != NULL && f->deadline_ms <= now) {
		struct pl_proposal q = props_pop(p);
		q.cb(q.data, BATON_ELEADERCHANGED, NULL, 0);
	}
}

void pl_requests_stalled(struct baton_pipeline *p)
{
	/* Nothing waiting here can complete: whatever it waits for lies at
	 * or beyond the stall (earlier entries were applied already). */
	pl_props_fail_upto(p, UINT64_MAX, BATON_ESTALLED);
	reads_finish(p, pick_any, NULL, BATON_ESTALLED);
}

void pl_flush_requests(struct baton_pipeline *p)
{
	flush_deferred(p);
	flush_proposals(p);
	flush_reads(p);
}

void pl_requests_free(struct baton_pipeline *p, int status)
{
	/* What this node had not appended goes on to the next leader
	 * (BATON_ENOTLEADER, as a follower's router reads it); what it had
	 * appended may still commit under another leader: its outcome is
	 * unknown (BATON_ELEADERCHANGED), never a plain refusal. A node
	 * stopping because its disk failed or filled ends here too. */
	const int not_appended = BATON_ENOTLEADER;
	const int unknown = BATON_ELEADERCHANGED;
	/* Until nothing is left: a callback may make a new request. */
	while (p->queue_n + p->props_n + p->reads_n + p->waiters_n +
		       p->deferred_n >
	       0) {
		while (p->queue_n > 0) {
			struct pl_queued q = p->queue[0];
			memmove(p->queue, p->queue + 1,
				--p->queue_n * sizeof *p->queue);
			q.cb(q.data, not_appended, NULL, 0);
		}
		queue_bytes_drop_if_empty(p);
		pl_props_fail_upto(p, UINT64_MAX, unknown);
		reads_finish(p, pick_any, NULL, not_appended);
		waiters_finish(p, 0, true, status);
		while (p->deferred_n > 0) {
			struct pl_deferred d = p->deferred[0];
			memmove(p->deferred, p->deferred + 1,
				--p->deferred_n * sizeof *p->deferred);
			free(d.versions);
			d.cb(d.data, status);
		}
	}
	free(p->props);
	free(p->queue);
	free(p->queue_bytes);
	free(p->reads);
	free(p->waiters);
	free(p->deferred);
	p->props = NULL;
	p->queue = NULL;
	p->queue_bytes = NULL;
	p->queue_bytes_len = p->queue_bytes_cap = 0;
	p->reads = NULL;
	p->waiters = NULL;
	p->deferred = NULL;
	p->props_cap = p->queue_cap = p->reads_cap = 0;
	p->waiters_cap = p->deferred_cap = 0;
}
