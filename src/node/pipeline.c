/*
 * The node pipeline (see pipeline.h): the step, the persist chain with its
 * held messages, snapshots, the driver's inputs, life cycle and status.
 * Every event goes through pl_step(), which is never re-entered: work that
 * callbacks start while an update is being handled is queued and run at
 * the next flush.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define READ_TIMEOUT_MS_DEFAULT 5000u
#define PROPOSAL_TIMEOUT_MS_DEFAULT 10000u
#define ADMIN_TIMEOUT_MS_DEFAULT 30000u

uint64_t pl_now(const struct baton_pipeline *p)
{
	return p->env.now_ms(p->env.data);
}

void pl_log(const struct baton_pipeline *p, int level, const char *fmt, ...)
{
	if (p->env.log == NULL)
		return;
	char text[BATON_STALL_TEXT_MAX + 128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	p->env.log(p->env.data, level, text);
}

int pl_grow(void **v, uint32_t *cap, size_t elem)
{
	BATON_ASSERT(elem > 0);
	if (*cap >= UINT32_MAX / 2)
		return BATON_ENOMEM;
	uint32_t c = *cap ? *cap * 2 : 64;
	void *g = realloc(*v, (size_t)c * elem);
	if (g == NULL)
		return BATON_ENOMEM;
	*v = g;
	*cap = c;
	return 0;
}

static void handle_update(struct baton_pipeline *p,
			  const struct baton_update *u);

static int step_once(struct baton_pipeline *p, struct baton_event *ev)
{
	BATON_ASSERT(!p->stepping);
	p->stepping = true;
	struct baton_update u;
	int rv = baton_raft_step(p->raft, pl_now(p), ev, &u);
	handle_update(p, &u);
	if (p->env.observe != NULL)
		p->env.observe(p->env.data, ev, rv, &u);
	p->stepping = false;
	return rv;
}

/* The core's refusals under the version rules (a vote, a candidacy, a
 * handover), each logged once with the rule and the versions. */
static void log_refusal(struct baton_pipeline *p)
{
	uint64_t seq;
	const char *why = baton_raft_last_refusal(p->raft, &seq);
	if (seq == p->refusal_logged)
		return;
	p->refusal_logged = seq;
	pl_log(p, BATON_PIPELINE_LOG_WARN, "%s", why);
}

int pl_step(struct baton_pipeline *p, struct baton_event *ev)
{
	int rv = step_once(p, ev);
	log_refusal(p);
	/* What the machine could not interpret goes to the core at once,
	 * before anything else happens: it must not lead or apply on. */
	while (p->stop_due != 0) {
		struct baton_event stop = {.type = BATON_EVENT_APPLY_STOPPED};
		stop.u.apply_stopped.index = p->stop_due;
		p->stop_due = 0;
		int srv = step_once(p, &stop);
		BATON_ASSERT(srv == 0);
	}
	pl_stall_sync(p);
	return rv;
}

/* ---- the persist chain --------------------------------------------------- */

void pl_storage_failed(struct baton_pipeline *p, int rv)
{
	if (p->storage_failed)
		return;
	pl_log(p, BATON_PIPELINE_LOG_ERROR,
	       "storage failed (%s): %s; this node stops accepting writes",
	       baton_strerror(rv), p->storage->ops->errmsg(p->storage));
	p->storage_failed = true;
	/* A node that cannot persist must not lead or vote: the driver stops
	 * it (after handing leadership over), told at the next flush. */
	p->storage_failed_due = true;
}

int baton_msg_copy(struct baton_msg_copy *out, const struct baton_msg *m)
{
	BATON_ASSERT(out != NULL && m != NULL);
	out->msg = *m;
	out->mem = NULL;
	size_t need = 0;
	if (m->type == BATON_MSG_APPEND) {
		need = (size_t)m->u.append.n_entries *
		       sizeof(struct baton_entry);
		for (uint32_t i = 0; i < m->u.append.n_entries; i++)
			need += m->u.append.entries[i].len;
	} else if (m->type == BATON_MSG_SNAPSHOT) {
		need = m->u.snapshot.chunk_len;
	}
	if (need == 0)
		return 0;
	uint8_t *mem = malloc(need);
	if (mem == NULL)
		return BATON_ENOMEM;
	out->mem = mem;
	if (m->type == BATON_MSG_SNAPSHOT) {
		memcpy(mem, m->u.snapshot.chunk, m->u.snapshot.chunk_len);
		out->msg.u.snapshot.chunk = mem;
		return 0;
	}
	struct baton_entry *es = (struct baton_entry *)(void *)mem;
	uint8_t *data = mem + (size_t)m->u.append.n_entries * sizeof *es;
	for (uint32_t i = 0; i < m->u.append.n_entries; i++) {
		es[i] = m->u.append.entries[i];
		if (es[i].len > 0)
			memcpy(data, es[i].buf, es[i].len);
		es[i].buf = data;
		data += es[i].len;
	}
	BATON_ASSERT(data == mem + need);
	out->msg.u.append.entries = es;
	return 0;
}

void baton_msg_copy_free(struct baton_msg_copy *c)
{
	free(c->mem);
	c->mem = NULL;
	memset(&c->msg, 0, sizeof c->msg);
}

static void write_free(struct pl_write *w)
{
	for (uint32_t i = 0; i < w->n_held; i++)
		baton_msg_copy_free(&w->held[i]);
	free(w->held);
	free(w);
}

static bool has_persistence(const struct baton_update *u)
{
	return u->hard_state_changed || u->snapshot != NULL ||
	       u->truncate_from != 0 || u->n_entries > 0 ||
	       u->compact_upto != 0 || u->persist_needed ||
	       u->n_msgs_after_persist > 0;
}

static struct pl_write *write_make(const struct baton_update *u)
{
	struct pl_write *w = calloc(1, sizeof *w);
	if (w == NULL)
		return NULL;
	w->report = u->persist_needed;
	w->index = u->persist_index;
	w->term = u->persist_term;
	if (u->n_msgs_after_persist == 0)
		return w;
	w->held = calloc(u->n_msgs_after_persist, sizeof *w->held);
	if (w->held == NULL) {
		free(w);
		return NULL;
	}
	for (uint32_t i = 0; i < u->n_msgs_after_persist; i++) {
		if (baton_msg_copy(&w->held[i], &u->msgs_after_persist[i]) !=
		    0) {
			write_free(w);
			return NULL;
		}
		w->n_held = i + 1;
	}
	return w;
}

static void persist(struct baton_pipeline *p, const struct baton_update *u)
{
	if (!has_persistence(u) || p->storage_failed)
		return;
	/* Made before submitting, so a write the storage took is always
	 * tracked: its completion must find it. */
	struct pl_write *w = write_make(u);
	if (w == NULL) {
		pl_storage_failed(p, BATON_ENOMEM);
		return;
	}
	int rv = p->storage->ops->submit(p->storage, u, &w->seq);
	if (rv != 0) {
		write_free(w);
		pl_storage_failed(p, rv);
		return;
	}
	BATON_ASSERT(p->writes_tail == NULL || p->writes_tail->seq < w->seq);
	if (p->writes_tail != NULL)
		p->writes_tail->next = w;
	else
		p->writes = w;
	p->writes_tail = w;
}

static void on_persisted(void *data, uint64_t seq, int status)
{
	struct baton_pipeline *p = data;
	struct pl_write *w = p->writes;
	BATON_ASSERT(w != NULL && w->seq == seq);
	p->writes = w->next;
	if (p->writes == NULL)
		p->writes_tail = NULL;
	if (status != 0) {
		pl_storage_failed(p, status);
		write_free(w);
		return;
	}
	for (uint32_t i = 0; i < w->n_held; i++)
		pl_send(p, &w->held[i].msg);
	if (w->report) {
		struct baton_event ev = {.type = BATON_EVENT_PERSISTED};
		ev.u.persisted.index = w->index;
		ev.u.persisted.term = w->term;
		pl_step(p, &ev);
	}
	write_free(w);
}

void baton_pipeline_storage_ready(struct baton_pipeline *p)
{
	BATON_ASSERT(!p->stepping);
	p->storage->ops->poll(p->storage, on_persisted, p);
	pl_snapshot_poll(p);
}

/* ---- the update ---------------------------------------------------------- */

static void handle_update(struct baton_pipeline *p,
			  const struct baton_update *u)
{
	if (u->role != p->role || u->leader_id != p->leader) {
		bool leader_changed = u->leader_id != p->leader;
		p->role = u->role;
		p->leader = u->leader_id;
		if (leader_changed)
			pl_reads_leader_changed(p);
		if (leader_changed && p->env.leader_changed != NULL)
			p->env.leader_changed(p->env.data, u->leader_id);
	}
	for (uint32_t i = 0; i < u->n_msgs; i++) {
		const struct baton_msg *m = &u->msgs[i];
		if (m->type == BATON_MSG_SNAPSHOT &&
		    m->u.snapshot.chunk == NULL) {
			struct baton_msg filled = *m;
			if (pl_snapshot_fill_chunk(p, &filled))
				pl_send(p, &filled);
			continue;
		}
		pl_send(p, m);
	}
	persist(p, u);
	pl_apply_update(p, u);
	pl_resolve_reads(p, u);
	pl_serve_reads(p);
	pl_check_waiters(p, u->promotion_failed);
	/* Not while one is in progress: its index is not snapshot_index
	 * yet, and the next is due from it. */
	bool by_entries =
		p->c.snapshot_entries > 0 &&
		p->applied >= p->snapshot_index + p->c.snapshot_entries;
	bool by_bytes = p->c.snapshot_log_bytes > 0 &&
			p->applied_bytes >= p->c.snapshot_log_bytes;
	if (p->stalled_index == 0 && p->snap.phase == PL_SNAP_NONE &&
	    (by_entries || by_bytes))
		p->snapshot_due = true;
}

/* ---- driver inputs ------------------------------------------------------- */

void baton_pipeline_tick(struct baton_pipeline *p)
{
	if (!p->retired) {
		struct baton_event ev = {.type = BATON_EVENT_TICK};
		pl_step(p, &ev);
		pl_clock_tick(p);
	}
	pl_check_waiters(p, 0);
	pl_expire(p);
}

void baton_pipeline_retire(struct baton_pipeline *p)
{
	BATON_ASSERT(!p->stepping);
	p->retired = true;
	pl_snapshot_abandon(p, "this node was removed from the cluster");
	pl_requests_retired(p);
}

void baton_pipeline_receive(struct baton_pipeline *p, const struct baton_msg *m)
{
	BATON_ASSERT(m->from != 0);
	if (p->retired)
		return;
	pl_clock_receive(p, m);
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = m;
	pl_step(p, &ev);
}

void baton_pipeline_peer_closed(struct baton_pipeline *p, baton_node_id id)
{
	BATON_ASSERT(id != 0);
	if (p->retired)
		return;
	if (p->stepping) {
		/* A send inside this step found the connection closed. A
		 * full queue drops the news: the election timeout still
		 * catches a dead leader. */
		for (uint32_t i = 0; i < p->n_closed_due; i++)
			if (p->closed_due[i] == id)
				return;
		if (p->n_closed_due < BATON_MAX_MEMBERS)
			p->closed_due[p->n_closed_due++] = id;
		return;
	}
	struct baton_event ev = {.type = BATON_EVENT_PEER_CLOSED};
	ev.u.peer_closed.id = id;
	pl_step(p, &ev);
}

static void flush_closed(struct baton_pipeline *p)
{
	baton_node_id due[BATON_MAX_MEMBERS];
	uint32_t n = p->n_closed_due;
	memcpy(due, p->closed_due, n * sizeof due[0]);
	p->n_closed_due = 0;
	for (uint32_t i = 0; i < n; i++)
		baton_pipeline_peer_closed(p, due[i]);
}

void baton_pipeline_flush(struct baton_pipeline *p)
{
	BATON_ASSERT(!p->stepping);
	if (p->storage_failed_due) {
		p->storage_failed_due = false;
		if (p->env.storage_failed != NULL)
			p->env.storage_failed(p->env.data);
	}
	flush_closed(p);
	pl_flush_requests(p);
	if (p->storage_failed)
		pl_snapshot_abandon(p, "the storage failed");
	if (p->snapshot_due)
		pl_snapshot_begin(p);
}

/* ---- life cycle ---------------------------------------------------------- */

static int recover(struct baton_pipeline *p, char *err, size_t errlen)
{
	struct baton_durable_state d;
	memset(&d, 0, sizeof d);
	int rv = p->storage->ops->load(p->storage, &d);
	if (rv != 0) {
		snprintf(err, errlen, "load: %s",
			 p->storage->ops->errmsg(p->storage));
		return rv;
	}
	const struct baton_snapshot_meta *meta =
		d.has_snapshot ? &d.snapshot.meta : NULL;
	rv = baton_raft_restore(p->raft, d.term, d.vote, meta, d.snapshot_data,
				d.snapshot_len, d.entries, d.n_entries);
	if (rv != 0) {
		snprintf(err, errlen, "restore: %s", baton_strerror(rv));
		baton_durable_state_free(&d);
		return rv;
	}
	/* After the core, so a stall can be reported to it; a snapshot the
	 * machine cannot interpret leaves the node stalled, data kept. */
	if (meta != NULL)
		pl_restore_at_start(p, meta, d.snapshot_data, d.snapshot_len);
	bool empty = d.term == 0 && !d.has_snapshot && d.n_entries == 0;
	baton_durable_state_free(&d);
	if (empty && p->c.n_founders > 0 && !p->c.bootstrap_deferred) {
		rv = baton_pipeline_bootstrap(p);
		if (rv != 0) {
			snprintf(err, errlen, "bootstrap: %s",
				 baton_strerror(rv));
			return rv;
		}
	}
	return 0;
}

bool baton_pipeline_empty(const struct baton_pipeline *p)
{
	struct baton_raft_status rs;
	baton_raft_status(p->raft, &rs);
	return rs.term == 0 && rs.last_index == 0 && rs.snapshot_index == 0;
}

int baton_pipeline_bootstrap(struct baton_pipeline *p)
{
	BATON_ASSERT(!p->stepping);
	BATON_ASSERT(p->c.n_founders > 0);
	if (!baton_pipeline_empty(p))
		return BATON_ESTATE;
	struct baton_config conf = {.n = p->c.n_founders};
	for (uint32_t i = 0; i < p->c.n_founders; i++)
		conf.members[i] =
			(struct baton_member){p->c.founders[i], BATON_VOTER};
	int rv = baton_raft_bootstrap(p->raft, &conf);
	if (rv != 0)
		return rv;
	pl_log(p, BATON_PIPELINE_LOG_INFO, "bootstrapped a new cluster of %u",
	       conf.n);
	return 0;
}

int baton_pipeline_create(const struct baton_pipeline_config *c,
			  const struct baton_pipeline_env *env,
			  struct baton_pipeline **out, char *err, size_t errlen)
{
	BATON_ASSERT(env->now_ms != NULL && env->send != NULL);
	BATON_ASSERT(c->storage != NULL && c->machine != NULL &&
		     c->n_founders <= BATON_MAX_MEMBERS);
	struct baton_pipeline *p = calloc(1, sizeof *p);
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return BATON_ENOMEM;
	}
	p->c = *c;
	/* Read results travel as far as the leader and back, and the core
	 * answers any result of its term: a result meant for a read group of
	 * this node's previous life (same term, restarted) must not match a
	 * group of this one. Groups of each life start from their own random
	 * 32-bit prefix, drawn from the core's seed (the simulator's seeds
	 * differ per incarnation). */
	uint64_t x = c->raft.random_seed + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	p->next_read_group = (x ^ (x >> 31)) << 32;
	if (p->c.read_timeout_ms == 0)
		p->c.read_timeout_ms = READ_TIMEOUT_MS_DEFAULT;
	if (p->c.proposal_timeout_ms == 0)
		p->c.proposal_timeout_ms = PROPOSAL_TIMEOUT_MS_DEFAULT;
	if (p->c.admin_timeout_ms == 0)
		p->c.admin_timeout_ms = ADMIN_TIMEOUT_MS_DEFAULT;
	p->env = *env;
	p->storage = c->storage;
	p->machine = c->machine;
	p->role = BATON_FOLLOWER;
	baton_version_state_initial(&p->versions);
	baton_buf_init(&p->reply);
	int rv = baton_raft_create(&c->raft, &p->raft);
	if (rv != 0) {
		snprintf(err, errlen, "raft options: %s", baton_strerror(rv));
		free(p);
		return rv;
	}
	rv = recover(p, err, errlen);
	if (rv != 0) {
		baton_pipeline_destroy(p);
		return rv;
	}
	*out = p;
	return 0;
}

void baton_pipeline_destroy(struct baton_pipeline *p)
{
	if (p == NULL)
		return;
	BATON_ASSERT(!p->stepping);
	pl_requests_free(p, BATON_ESTATE);
	pl_snapshot_destroy(p);
	free(p->chunk);
	while (p->writes != NULL) {
		struct pl_write *w = p->writes;
		p->writes = w->next;
		write_free(w);
	}
	baton_raft_destroy(p->raft);
	baton_buf_free(&p->reply);
	free(p);
}

/* ---- introspection ------------------------------------------------------- */

void baton_pipeline_status(const struct baton_pipeline *p,
			   struct baton_pipeline_status *out)
{
	memset(out, 0, sizeof *out);
	baton_raft_status(p->raft, &out->raft);
	for (uint32_t i = 0; i < out->raft.config.n; i++)
		out->match[i] = baton_raft_match_index(
			p->raft, out->raft.config.members[i].id);
	out->applied = p->applied;
	out->applied_versions = p->versions;
	out->storage_failed = p->storage_failed;
	out->stalled_index = p->stalled_index;
	memcpy(out->stalled_why, p->stalled_why, sizeof out->stalled_why);
	out->proposals_waiting = p->props_n + p->queue_n;
	out->reads_waiting = p->reads_n;
	out->snapshots = p->stats;
	out->snapshots.in_progress = p->snap.phase != PL_SNAP_NONE;
}

const struct baton_raft *baton_pipeline_raft(const struct baton_pipeline *p)
{
	return p->raft;
}
