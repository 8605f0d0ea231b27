/*
 * Cluster scenarios of the Raft core: elections, check-quorum, replication,
 * the commit rule, snapshots, membership, read index and leadership
 * transfer.
 *
 * The first part of this file is a small in-process driver ("cluster"),
 * private to this file (everything static, names prefixed c_): up to C_MAX
 * nodes with ids 1..C_MAX, one FIFO of messages that a test delivers one by
 * one, by filter, or all at once, and persistence that is instant (the
 * default) or held until c_persist() (manual). It does every duty the top
 * comment of include/baton/raft.h gives a driver, and deep-copies whatever
 * an update points to (messages with their entries and snapshot chunks,
 * applied entries, reads, installed snapshots) before the next step.
 *
 * It also checks, on every update, what must hold whatever the scenario:
 * entries are applied in order, without gaps, and never beyond the commit
 * index the same update reports.
 */
#include "core.h" /* struct baton__progress, to look at the leader */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C_MAX 8u
#define C_TICK_MS 10u
#define C_ELECTION_MS 1000u
#define C_HEARTBEAT_MS 100u
#define C_SUM_MSGS 64u

/* ======================================================================== */
/* The driver.                                                              */

struct c_applied {
	baton_index index;
	baton_term term;
	uint32_t type;
	uint32_t len;
	uint8_t *buf;
};

/* A message owned by the driver, with deep copies of what it points to. */
struct c_qmsg {
	struct baton_msg m;
	struct baton_entry *entries;
	uint8_t *chunk;
};

/* A persistence held by a manual disk: once done, report PERSISTED (if
 * needed) and release the update's msgs_after_persist. */
struct c_batch {
	bool needed;
	baton_index index;
	baton_term term;
	struct c_qmsg *msgs;
	uint32_t n_msgs;
};

/* The scalars of one update and shallow copies of its messages. */
struct c_sum {
	int rv;
	uint32_t role;
	baton_term term;
	baton_node_id leader_id;
	baton_index commit_index;
	bool hard_state_changed;
	baton_term hs_term;
	baton_node_id hs_vote;
	bool has_snapshot;
	baton_index snapshot_index;
	baton_index truncate_from;
	uint32_t n_entries;
	baton_index compact_upto;
	bool persist_needed;
	baton_index persist_index;
	baton_term persist_term;
	uint32_t n_msgs;
	struct baton_msg msgs[C_SUM_MSGS];
	uint32_t n_msgs_after;
	struct baton_msg msgs_after[C_SUM_MSGS];
	uint32_t n_apply;
	uint32_t n_reads;
	struct baton_read_result reads[C_SUM_MSGS];
	baton_node_id promotion_failed;
};

struct c_node {
	struct baton_raft *r;
	bool isolated; /* messages to and from it are lost */
	bool manual;   /* persistence waits for c_persist() */
	struct c_batch *pend;
	uint32_t n_pend, cap_pend;

	/* What the driver did for this node. */
	struct c_applied *applied;
	uint32_t n_applied, cap_applied;
	baton_index last_applied; /* by the state machine */
	struct baton_read_result *reads;
	uint32_t n_reads, cap_reads;
	baton_index min_truncate_from; /* 0: none seen */
	baton_index last_compact_upto;
	uint32_t n_snapshots;
	struct baton_snapshot_meta snap;
	uint8_t *snap_data;
	size_t snap_len;
	baton_term hs_term;
	baton_node_id hs_vote;
	baton_node_id promotion_failed;
	bool campaigned; /* was ever (pre-)candidate */
};

struct cluster {
	uint64_t now;
	struct c_node n[C_MAX + 1];
	struct c_qmsg *q;
	uint32_t q_n, q_cap;
	uint64_t sent[16];	/* by type, as the cores emitted them */
	uint64_t delivered[16]; /* by type */
	uint64_t sent_to[C_MAX + 1];
	/* Called before each delivery. */
	void (*hook)(void *ctx, const struct baton_msg *m);
	void *hook_ctx;
};

typedef void (*c_tweak_fn)(struct baton_raft_options *o);

static void c_process(struct cluster *c, baton_node_id id,
		      const struct baton_update *u, struct c_sum *sum);

static void *c_alloc(size_t n)
{
	void *p = calloc(1, n > 0 ? n : 1);
	cr_assert_not_null(p, "out of memory");
	return p;
}

static struct c_node *c_node(struct cluster *c, baton_node_id id)
{
	cr_assert(id >= 1 && id <= C_MAX && c->n[id].r != NULL, "no node %llu",
		  (unsigned long long)id);
	return &c->n[id];
}

static struct baton_raft *c_raft(struct cluster *c, baton_node_id id)
{
	return c_node(c, id)->r;
}

static struct baton_raft_status c_status(struct cluster *c, baton_node_id id)
{
	struct baton_raft_status s;
	baton_raft_status(c_raft(c, id), &s);
	return s;
}

static uint32_t c_role(struct cluster *c, baton_node_id id)
{
	return c_status(c, id).role;
}

static baton_term c_term(struct cluster *c, baton_node_id id)
{
	return c_status(c, id).term;
}

static baton_index c_commit(struct cluster *c, baton_node_id id)
{
	return c_status(c, id).commit_index;
}

static baton_index c_last(struct cluster *c, baton_node_id id)
{
	return c_status(c, id).last_index;
}

/* ---- messages ----------------------------------------------------------- */

static struct c_qmsg c_copy_msg(const struct baton_msg *m)
{
	struct c_qmsg x;
	memset(&x, 0, sizeof x);
	x.m = *m;
	if (m->type == BATON_MSG_APPEND) {
		uint32_t n = m->u.append.n_entries;
		x.m.u.append.entries = NULL;
		if (n > 0) {
			cr_assert_not_null(m->u.append.entries);
			x.entries = c_alloc(n * sizeof *x.entries);
			for (uint32_t i = 0; i < n; i++) {
				const struct baton_entry *e =
					&m->u.append.entries[i];
				x.entries[i] = *e;
				x.entries[i].buf = c_alloc(e->len);
				if (e->len > 0)
					memcpy(x.entries[i].buf, e->buf,
					       e->len);
			}
			x.m.u.append.entries = x.entries;
		}
	} else if (m->type == BATON_MSG_SNAPSHOT) {
		uint32_t n = m->u.snapshot.chunk_len;
		x.chunk = c_alloc(n);
		if (n > 0)
			memcpy(x.chunk, m->u.snapshot.chunk, n);
		x.m.u.snapshot.chunk = x.chunk;
	}
	return x;
}

static void c_free_msg(struct c_qmsg *x)
{
	if (x->entries != NULL) {
		for (uint32_t i = 0; i < x->m.u.append.n_entries; i++)
			free(x->entries[i].buf);
		free(x->entries);
	}
	free(x->chunk);
	memset(x, 0, sizeof *x);
}

static bool c_link_up(struct cluster *c, const struct baton_msg *m)
{
	return m->to >= 1 && m->to <= C_MAX && c->n[m->to].r != NULL &&
	       !c->n[m->to].isolated && m->from >= 1 && m->from <= C_MAX &&
	       !c->n[m->from].isolated;
}

/* Queue a driver-owned message (taking ownership), unless its link is cut. */
static void c_enqueue(struct cluster *c, struct c_qmsg *x)
{
	if (!c_link_up(c, &x->m)) {
		c_free_msg(x);
		return;
	}
	if (c->q_n == c->q_cap) {
		c->q_cap = c->q_cap == 0 ? 64 : c->q_cap * 2;
		c->q = realloc(c->q, c->q_cap * sizeof *c->q);
		cr_assert_not_null(c->q);
	}
	c->q[c->q_n++] = *x;
}

static void c_send(struct cluster *c, baton_node_id from,
		   const struct baton_msg *m)
{
	cr_assert_eq(m->from, from, "a core signs its messages");
	if (m->type < 16)
		c->sent[m->type]++;
	if (m->to <= C_MAX)
		c->sent_to[m->to]++;
	struct c_qmsg x = c_copy_msg(m);
	c_enqueue(c, &x);
}

static bool c_match(const struct baton_msg *m, uint32_t type,
		    baton_node_id from, baton_node_id to)
{
	return (type == 0 || m->type == type) &&
	       (from == 0 || m->from == from) && (to == 0 || m->to == to);
}

/* Queued messages matching (0: any). */
static uint32_t c_count(struct cluster *c, uint32_t type, baton_node_id from,
			baton_node_id to)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->q_n; i++)
		n += c_match(&c->q[i].m, type, from, to);
	return n;
}

/* The k-th queued message matching, or NULL. */
static const struct baton_msg *c_find(struct cluster *c, uint32_t type,
				      baton_node_id from, baton_node_id to,
				      uint32_t k)
{
	for (uint32_t i = 0; i < c->q_n; i++)
		if (c_match(&c->q[i].m, type, from, to) && k-- == 0)
			return &c->q[i].m;
	return NULL;
}

static uint32_t c_drop(struct cluster *c, uint32_t type, baton_node_id from,
		       baton_node_id to)
{
	uint32_t kept = 0, dropped = 0;
	for (uint32_t i = 0; i < c->q_n; i++) {
		if (c_match(&c->q[i].m, type, from, to)) {
			c_free_msg(&c->q[i]);
			dropped++;
		} else {
			c->q[kept++] = c->q[i];
		}
	}
	c->q_n = kept;
	return dropped;
}

/* Drop the first queued message matching; false if none. */
static bool c_drop_first(struct cluster *c, uint32_t type, baton_node_id from,
			 baton_node_id to)
{
	for (uint32_t i = 0; i < c->q_n; i++) {
		if (c_match(&c->q[i].m, type, from, to)) {
			c_free_msg(&c->q[i]);
			memmove(c->q + i, c->q + i + 1,
				(c->q_n - i - 1) * sizeof *c->q);
			c->q_n--;
			return true;
		}
	}
	return false;
}

static uint32_t c_drop_to(struct cluster *c, baton_node_id to)
{
	return c_drop(c, 0, 0, to);
}

static int c_step(struct cluster *c, baton_node_id id, struct baton_event *ev,
		  struct c_sum *sum)
{
	struct baton_update u;
	int rv = baton_raft_step(c_raft(c, id), c->now, ev, &u);
	if (sum != NULL)
		sum->rv = rv;
	c_process(c, id, &u, sum);
	return rv;
}

/* Remove the i-th queued message and deliver it. */
static void c_deliver_at(struct cluster *c, uint32_t i)
{
	struct c_qmsg x = c->q[i];
	memmove(c->q + i, c->q + i + 1, (c->q_n - i - 1) * sizeof *c->q);
	c->q_n--;
	if (c_link_up(c, &x.m)) {
		if (c->hook != NULL)
			c->hook(c->hook_ctx, &x.m);
		if (x.m.type < 16)
			c->delivered[x.m.type]++;
		struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
		ev.u.receive.msg = &x.m;
		int rv = c_step(c, x.m.to, &ev, NULL);
		cr_assert_eq(rv, 0, "receive on %llu: %s",
			     (unsigned long long)x.m.to, baton_err_name(rv));
	}
	c_free_msg(&x);
}

/* Deliver the first queued message matching (0: any); false if none. */
static bool c_deliver_match(struct cluster *c, uint32_t type,
			    baton_node_id from, baton_node_id to)
{
	for (uint32_t i = 0; i < c->q_n; i++) {
		if (c_match(&c->q[i].m, type, from, to)) {
			c_deliver_at(c, i);
			return true;
		}
	}
	return false;
}

static bool c_deliver_one(struct cluster *c)
{
	return c_deliver_match(c, 0, 0, 0);
}

/* Deliver until the queue is empty (what is delivered may send more). */
static uint32_t c_deliver_all(struct cluster *c)
{
	uint32_t n = 0;
	while (c_deliver_one(c)) {
		n++;
		cr_assert_lt(n, 200000u, "message storm");
	}
	return n;
}

/* ---- persistence ------------------------------------------------------- */

/* Complete only the oldest pending persistence of node id. */
static void c_persist_one(struct cluster *c, baton_node_id id)
{
	struct c_node *nd = c_node(c, id);
	cr_assert_gt(nd->n_pend, 0);
	struct c_batch b = nd->pend[0];
	memmove(nd->pend, nd->pend + 1, (nd->n_pend - 1) * sizeof *nd->pend);
	nd->n_pend--;
	for (uint32_t i = 0; i < b.n_msgs; i++)
		c_enqueue(c, &b.msgs[i]);
	free(b.msgs);
	if (b.needed) {
		struct baton_event ev = {.type = BATON_EVENT_PERSISTED};
		ev.u.persisted.index = b.index;
		ev.u.persisted.term = b.term;
		cr_assert_eq(c_step(c, id, &ev, NULL), 0);
	}
}

/* Complete every pending persistence of node id, in order. */
static void c_persist(struct cluster *c, baton_node_id id)
{
	while (c_node(c, id)->n_pend > 0)
		c_persist_one(c, id);
}

static void c_set_manual(struct cluster *c, baton_node_id id, bool manual)
{
	c_node(c, id)->manual = manual;
	if (!manual)
		c_persist(c, id);
}

/* ---- the update --------------------------------------------------------- */

static void c_summarize(const struct baton_update *u, struct c_sum *s)
{
	int rv = s->rv;
	memset(s, 0, sizeof *s);
	s->rv = rv;
	s->role = u->role;
	s->term = u->term;
	s->leader_id = u->leader_id;
	s->commit_index = u->commit_index;
	s->hard_state_changed = u->hard_state_changed;
	s->hs_term = u->hs_term;
	s->hs_vote = u->hs_vote;
	s->has_snapshot = u->snapshot != NULL;
	s->snapshot_index = u->snapshot != NULL ? u->snapshot->index : 0;
	s->truncate_from = u->truncate_from;
	s->n_entries = u->n_entries;
	s->compact_upto = u->compact_upto;
	s->persist_needed = u->persist_needed;
	s->persist_index = u->persist_index;
	s->persist_term = u->persist_term;
	s->n_msgs = u->n_msgs;
	s->n_msgs_after = u->n_msgs_after_persist;
	for (uint32_t i = 0; i < u->n_msgs && i < C_SUM_MSGS; i++) {
		s->msgs[i] = u->msgs[i];
		if (s->msgs[i].type == BATON_MSG_APPEND)
			s->msgs[i].u.append.entries = NULL;
		if (s->msgs[i].type == BATON_MSG_SNAPSHOT)
			s->msgs[i].u.snapshot.chunk = NULL;
	}
	for (uint32_t i = 0; i < u->n_msgs_after_persist && i < C_SUM_MSGS;
	     i++) {
		s->msgs_after[i] = u->msgs_after_persist[i];
		if (s->msgs_after[i].type == BATON_MSG_APPEND)
			s->msgs_after[i].u.append.entries = NULL;
		if (s->msgs_after[i].type == BATON_MSG_SNAPSHOT)
			s->msgs_after[i].u.snapshot.chunk = NULL;
	}
	s->n_apply = u->n_apply;
	s->n_reads = u->n_reads;
	for (uint32_t i = 0; i < u->n_reads && i < C_SUM_MSGS; i++)
		s->reads[i] = u->reads[i];
	s->promotion_failed = u->promotion_failed;
}

static void c_process(struct cluster *c, baton_node_id id,
		      const struct baton_update *u, struct c_sum *sum)
{
	struct c_node *nd = c_node(c, id);
	if (sum != NULL)
		c_summarize(u, sum);
	if (u->role == BATON_PRE_CANDIDATE || u->role == BATON_CANDIDATE)
		nd->campaigned = true;

	/* 1. persist: hard state, snapshot, truncation, entries, compaction */
	if (u->hard_state_changed) {
		nd->hs_term = u->hs_term;
		nd->hs_vote = u->hs_vote;
	}
	if (u->snapshot != NULL) {
		nd->n_snapshots++;
		nd->snap = *u->snapshot;
		free(nd->snap_data);
		nd->snap_data = c_alloc(u->snapshot_len);
		if (u->snapshot_len > 0)
			memcpy(nd->snap_data, u->snapshot_data,
			       u->snapshot_len);
		nd->snap_len = u->snapshot_len;
	}
	if (u->truncate_from != 0 && (nd->min_truncate_from == 0 ||
				      u->truncate_from < nd->min_truncate_from))
		nd->min_truncate_from = u->truncate_from;
	for (uint32_t i = 1; i < u->n_entries; i++)
		cr_assert_eq(u->entries[i].index, u->entries[i - 1].index + 1,
			     "entries to persist are consecutive");
	if (u->compact_upto != 0)
		nd->last_compact_upto = u->compact_upto;

	/* 2. send msgs at once */
	for (uint32_t i = 0; i < u->n_msgs; i++)
		c_send(c, id, &u->msgs[i]);

	/* 3. msgs_after_persist once this and every earlier persistence is
	 * durable */
	if (nd->manual && (u->persist_needed || nd->n_pend > 0)) {
		if (nd->n_pend == nd->cap_pend) {
			nd->cap_pend = nd->cap_pend ? nd->cap_pend * 2 : 16;
			nd->pend = realloc(nd->pend,
					   nd->cap_pend * sizeof *nd->pend);
			cr_assert_not_null(nd->pend);
		}
		struct c_batch *b = &nd->pend[nd->n_pend++];
		memset(b, 0, sizeof *b);
		b->needed = u->persist_needed;
		b->index = u->persist_index;
		b->term = u->persist_term;
		b->n_msgs = u->n_msgs_after_persist;
		b->msgs = c_alloc(b->n_msgs * sizeof *b->msgs);
		for (uint32_t i = 0; i < b->n_msgs; i++) {
			cr_assert_eq(u->msgs_after_persist[i].from, id);
			if (u->msgs_after_persist[i].type < 16)
				c->sent[u->msgs_after_persist[i].type]++;
			b->msgs[i] = c_copy_msg(&u->msgs_after_persist[i]);
		}
	} else {
		for (uint32_t i = 0; i < u->n_msgs_after_persist; i++)
			c_send(c, id, &u->msgs_after_persist[i]);
	}

	/* 4. restore from an installed snapshot, then apply in order */
	if (u->snapshot != NULL)
		nd->last_applied = u->snapshot->index;
	for (uint32_t i = 0; i < u->n_apply; i++) {
		const struct baton_entry *e = &u->apply[i];
		cr_assert_eq(e->index, nd->last_applied + 1,
			     "node %llu applies %llu after %llu",
			     (unsigned long long)id,
			     (unsigned long long)e->index,
			     (unsigned long long)nd->last_applied);
		cr_assert_leq(e->index, u->commit_index,
			      "node %llu applies %llu beyond commit %llu",
			      (unsigned long long)id,
			      (unsigned long long)e->index,
			      (unsigned long long)u->commit_index);
		nd->last_applied = e->index;
		if (nd->n_applied == nd->cap_applied) {
			nd->cap_applied =
				nd->cap_applied ? nd->cap_applied * 2 : 64;
			nd->applied =
				realloc(nd->applied,
					nd->cap_applied * sizeof *nd->applied);
			cr_assert_not_null(nd->applied);
		}
		struct c_applied *a = &nd->applied[nd->n_applied++];
		a->index = e->index;
		a->term = e->term;
		a->type = e->type;
		a->len = e->len;
		a->buf = c_alloc(e->len);
		if (e->len > 0)
			memcpy(a->buf, e->buf, e->len);
	}

	/* 5. reads */
	for (uint32_t i = 0; i < u->n_reads; i++) {
		if (nd->n_reads == nd->cap_reads) {
			nd->cap_reads = nd->cap_reads ? nd->cap_reads * 2 : 16;
			nd->reads = realloc(nd->reads,
					    nd->cap_reads * sizeof *nd->reads);
			cr_assert_not_null(nd->reads);
		}
		nd->reads[nd->n_reads++] = u->reads[i];
	}
	if (u->promotion_failed != 0)
		nd->promotion_failed = u->promotion_failed;

	/* 6. report the persistence (the disk is instant unless manual) */
	if (u->persist_needed && !nd->manual) {
		struct baton_event ev = {.type = BATON_EVENT_PERSISTED};
		ev.u.persisted.index = u->persist_index;
		ev.u.persisted.term = u->persist_term;
		cr_assert_eq(c_step(c, id, &ev, NULL), 0);
	}
}

/* ---- life cycle ---------------------------------------------------------- */

static void c_options(struct baton_raft_options *o, baton_node_id id)
{
	baton_raft_options_default(o);
	o->id = id;
	o->random_seed = 0x5eedull + id * 7919u;
	o->election_timeout_ms = C_ELECTION_MS;
	o->heartbeat_interval_ms = C_HEARTBEAT_MS;
}

/* Create node id, empty (not bootstrapped). */
static void c_add_node(struct cluster *c, baton_node_id id, c_tweak_fn tweak)
{
	cr_assert(id >= 1 && id <= C_MAX && c->n[id].r == NULL);
	struct baton_raft_options o;
	c_options(&o, id);
	if (tweak != NULL)
		tweak(&o);
	cr_assert_eq(baton_raft_create(&o, &c->n[id].r), 0);
}

static void c_voters(struct baton_config *cfg, uint32_t n)
{
	memset(cfg, 0, sizeof *cfg);
	for (uint32_t i = 1; i <= n; i++)
		cfg->members[cfg->n++] = (struct baton_member){i, BATON_VOTER};
}

static int c_tick_node(struct cluster *c, baton_node_id id, struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_TICK};
	return c_step(c, id, &ev, sum);
}

/* Nodes 1..n, voters, bootstrapped with the same configuration; the first
 * update of each (persisting the configuration entry) is processed. */
static struct cluster *c_new(uint32_t n, c_tweak_fn tweak)
{
	struct cluster *c = c_alloc(sizeof *c);
	struct baton_config cfg;
	c_voters(&cfg, n);
	for (baton_node_id id = 1; id <= n; id++) {
		c_add_node(c, id, tweak);
		cr_assert_eq(baton_raft_bootstrap(c->n[id].r, &cfg), 0);
		cr_assert_eq(c_tick_node(c, id, NULL), 0);
	}
	return c;
}

static void c_free(struct cluster *c)
{
	for (uint32_t i = 0; i < c->q_n; i++)
		c_free_msg(&c->q[i]);
	free(c->q);
	for (baton_node_id id = 1; id <= C_MAX; id++) {
		struct c_node *nd = &c->n[id];
		if (nd->r == NULL)
			continue;
		for (uint32_t i = 0; i < nd->n_pend; i++) {
			for (uint32_t k = 0; k < nd->pend[i].n_msgs; k++)
				c_free_msg(&nd->pend[i].msgs[k]);
			free(nd->pend[i].msgs);
		}
		free(nd->pend);
		for (uint32_t i = 0; i < nd->n_applied; i++)
			free(nd->applied[i].buf);
		free(nd->applied);
		free(nd->reads);
		free(nd->snap_data);
		baton_raft_destroy(nd->r);
	}
	free(c);
}

static void c_isolate(struct cluster *c, baton_node_id id, bool isolated)
{
	c_node(c, id)->isolated = isolated;
	if (isolated) {
		c_drop(c, 0, id, 0);
		c_drop(c, 0, 0, id);
	}
}

/* ---- time ------------------------------------------------------------- */

static void c_advance(struct cluster *c, uint64_t ms)
{
	c->now += ms;
}

static void c_tick_all(struct cluster *c)
{
	for (baton_node_id id = 1; id <= C_MAX; id++)
		if (c->n[id].r != NULL)
			cr_assert_eq(c_tick_node(c, id, NULL), 0);
}

/* Every C_TICK_MS: tick every node, then deliver everything. */
static void c_run(struct cluster *c, uint64_t ms)
{
	for (uint64_t t = 0; t < ms; t += C_TICK_MS) {
		c_advance(c, C_TICK_MS);
		c_tick_all(c);
		c_deliver_all(c);
	}
}

/* The connected leader of the highest term, or 0. */
static baton_node_id c_leader(struct cluster *c)
{
	baton_node_id best = 0;
	baton_term best_term = 0;
	for (baton_node_id id = 1; id <= C_MAX; id++) {
		if (c->n[id].r == NULL || c->n[id].isolated)
			continue;
		struct baton_raft_status s = c_status(c, id);
		if (s.role == BATON_LEADER &&
		    (best == 0 || s.term > best_term)) {
			best = id;
			best_term = s.term;
		}
	}
	return best;
}

static uint32_t c_count_leaders(struct cluster *c)
{
	uint32_t n = 0;
	for (baton_node_id id = 1; id <= C_MAX; id++)
		if (c->n[id].r != NULL && c_role(c, id) == BATON_LEADER)
			n++;
	return n;
}

/* Run until a connected node leads with the highest term among the
 * connected nodes and has committed an entry of its term (so a quorum
 * follows it). Fails the test after max_ms. */
static baton_node_id c_tick_until_leader(struct cluster *c, uint64_t max_ms)
{
	for (uint64_t t = 0; t <= max_ms; t += C_TICK_MS) {
		baton_node_id l = c_leader(c);
		if (l != 0) {
			struct baton_raft_status s = c_status(c, l);
			bool highest = true;
			for (baton_node_id id = 1; id <= C_MAX; id++)
				if (c->n[id].r != NULL && !c->n[id].isolated &&
				    c_term(c, id) > s.term)
					highest = false;
			baton_term ct = 0;
			if (highest &&
			    baton_raft_term_at(c_raft(c, l), s.commit_index,
					       &ct) &&
			    ct == s.term)
				return l;
		}
		c_run(c, C_TICK_MS);
	}
	cr_assert_fail("no leader after %llu ms", (unsigned long long)max_ms);
	return 0;
}

/* A connected follower of the leader other than `not`, or 0. */
static baton_node_id c_follower(struct cluster *c, baton_node_id leader,
				baton_node_id not )
{
	for (baton_node_id id = 1; id <= C_MAX; id++)
		if (c->n[id].r != NULL && id != leader &&
		    id != not &&!c->n[id].isolated &&
		    c_role(c, id) != BATON_LEADER)
			return id;
	return 0;
}

/* ---- requests ------------------------------------------------------------ */

static int c_propose(struct cluster *c, baton_node_id id, const char *cmd,
		     baton_index *index_out)
{
	struct baton_buffer b = {cmd, strlen(cmd)};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 1;
	ev.u.propose.bufs = &b;
	int rv = c_step(c, id, &ev, NULL);
	if (index_out != NULL)
		*index_out = rv == 0 ? ev.u.propose.first_index_out : 0;
	return rv;
}

/* Propose "<prefix>-<k>" for k in [0, n) as one batch. */
static int c_propose_n(struct cluster *c, baton_node_id id, const char *prefix,
		       uint32_t n, baton_index *first_out)
{
	char(*text)[64] = c_alloc(n * sizeof *text);
	struct baton_buffer *b = c_alloc(n * sizeof *b);
	for (uint32_t k = 0; k < n; k++) {
		int len = snprintf(text[k], sizeof text[k], "%s-%u", prefix, k);
		b[k].base = text[k];
		b[k].len = (size_t)len;
	}
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = n;
	ev.u.propose.bufs = b;
	int rv = c_step(c, id, &ev, NULL);
	if (first_out != NULL)
		*first_out = rv == 0 ? ev.u.propose.first_index_out : 0;
	free(b);
	free(text);
	return rv;
}

static int c_read(struct cluster *c, baton_node_id id, uint64_t request_id,
		  struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_READ};
	ev.u.read.request_id = request_id;
	return c_step(c, id, &ev, sum);
}

static int c_member(struct cluster *c, baton_node_id id, uint32_t type,
		    baton_node_id target)
{
	struct baton_event ev = {.type = type};
	ev.u.member.id = target;
	return c_step(c, id, &ev, NULL);
}

static int c_transfer(struct cluster *c, baton_node_id id, baton_node_id target,
		      struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_TRANSFER};
	ev.u.transfer.target = target;
	return c_step(c, id, &ev, sum);
}

static int c_snapshot_taken(struct cluster *c, baton_node_id id,
			    baton_index index, const void *data, size_t len,
			    struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_SNAPSHOT_TAKEN};
	ev.u.snapshot_taken.index = index;
	ev.u.snapshot_taken.data = data;
	ev.u.snapshot_taken.len = len;
	return c_step(c, id, &ev, sum);
}

static int c_receive(struct cluster *c, baton_node_id id,
		     const struct baton_msg *m, struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = m;
	return c_step(c, id, &ev, sum);
}

static struct baton_msg c_msg(uint32_t type, baton_term term,
			      baton_node_id from, baton_node_id to)
{
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.term = term;
	m.from = from;
	m.to = to;
	return m;
}

/* A hand-made AppendEntries whose entries (terms given, indexes from
 * prev + 1, payload "i<index>t<term>") live in the struct itself: build it
 * in place and do not copy it. */
struct c_append {
	struct baton_msg m;
	struct baton_entry e[16];
	char text[16][32];
};

static void c_make_append(struct c_append *a, baton_term term,
			  baton_node_id from, baton_node_id to,
			  baton_index prev, baton_term prev_term,
			  baton_index commit, const baton_term *terms,
			  uint32_t n)
{
	cr_assert_leq(n, 16);
	memset(a, 0, sizeof *a);
	a->m = c_msg(BATON_MSG_APPEND, term, from, to);
	a->m.u.append.prev_index = prev;
	a->m.u.append.prev_term = prev_term;
	a->m.u.append.leader_commit = commit;
	a->m.u.append.n_entries = n;
	for (uint32_t i = 0; i < n; i++) {
		baton_index index = prev + 1 + i;
		int len = snprintf(a->text[i], sizeof a->text[i], "i%llut%llu",
				   (unsigned long long)index,
				   (unsigned long long)terms[i]);
		a->e[i] = (struct baton_entry){
			terms[i], index, BATON_ENTRY_COMMAND, (uint32_t)len,
			(uint8_t *)a->text[i]};
	}
	a->m.u.append.entries = n > 0 ? a->e : NULL;
}

/* ---- looking at results -------------------------------------------------- */

static const struct c_applied *c_applied_at(struct cluster *c, baton_node_id id,
					    baton_index i)
{
	struct c_node *nd = c_node(c, id);
	for (uint32_t k = 0; k < nd->n_applied; k++)
		if (nd->applied[k].index == i)
			return &nd->applied[k];
	return NULL;
}

static bool c_applied_cmd(struct cluster *c, baton_node_id id, const char *cmd)
{
	struct c_node *nd = c_node(c, id);
	size_t len = strlen(cmd);
	for (uint32_t k = 0; k < nd->n_applied; k++)
		if (nd->applied[k].type == BATON_ENTRY_COMMAND &&
		    nd->applied[k].len == len &&
		    memcmp(nd->applied[k].buf, cmd, len) == 0)
			return true;
	return false;
}

static const struct baton_read_result *
c_read_result(struct cluster *c, baton_node_id id, uint64_t request_id)
{
	struct c_node *nd = c_node(c, id);
	for (uint32_t k = 0; k < nd->n_reads; k++)
		if (nd->reads[k].request_id == request_id)
			return &nd->reads[k];
	return NULL;
}

/* The logs of a and b hold the same entries over [from, to]. */
static void c_assert_logs_equal(struct cluster *c, baton_node_id a,
				baton_node_id b, baton_index from,
				baton_index to)
{
	for (baton_index i = from; i <= to; i++) {
		const struct baton_entry *x = baton_raft_entry(c_raft(c, a), i);
		const struct baton_entry *y = baton_raft_entry(c_raft(c, b), i);
		cr_assert(x != NULL && y != NULL, "entry %llu held by both",
			  (unsigned long long)i);
		cr_assert_eq(x->term, y->term, "term of %llu",
			     (unsigned long long)i);
		cr_assert_eq(x->type, y->type);
		cr_assert_eq(x->len, y->len);
		if (x->len > 0)
			cr_assert_arr_eq(x->buf, y->buf, x->len);
	}
}

static uint32_t c_sum_count(const struct c_sum *s, bool after, uint32_t type,
			    baton_node_id to)
{
	uint32_t n = 0;
	uint32_t total = after ? s->n_msgs_after : s->n_msgs;
	const struct baton_msg *v = after ? s->msgs_after : s->msgs;
	for (uint32_t i = 0; i < total && i < C_SUM_MSGS; i++)
		n += c_match(&v[i], type, 0, to);
	return n;
}

static const struct baton_msg *c_sum_find(const struct c_sum *s, bool after,
					  uint32_t type, baton_node_id to)
{
	uint32_t total = after ? s->n_msgs_after : s->n_msgs;
	const struct baton_msg *v = after ? s->msgs_after : s->msgs;
	for (uint32_t i = 0; i < total && i < C_SUM_MSGS; i++)
		if (c_match(&v[i], type, 0, to))
			return &v[i];
	return NULL;
}

/* A three-node cluster with an elected leader whose no-op every node has
 * committed. */
static struct cluster *c_three(c_tweak_fn tweak, baton_node_id *leader)
{
	struct cluster *c = c_new(3, tweak);
	*leader = c_tick_until_leader(c, 20000);
	c_run(c, 3 * C_HEARTBEAT_MS);
	return c;
}

/* ======================================================================== */
/* Elections.                                                               */

Test(elect, three_nodes_elect_exactly_one_leader)
{
	struct cluster *c = c_new(3, NULL);
	baton_node_id l = c_tick_until_leader(c, 20000);
	cr_assert_neq(l, 0);
	c_run(c, 2000);
	cr_assert_eq(c_count_leaders(c), 1);
	cr_assert_eq(c_leader(c), l, "a healthy cluster keeps its leader");
	baton_term t = c_term(c, l);
	cr_assert_geq(t, 2);
	for (baton_node_id id = 1; id <= 3; id++) {
		struct baton_raft_status s = c_status(c, id);
		cr_assert_eq(s.term, t);
		cr_assert_eq(s.leader_id, l, "node %llu follows %llu",
			     (unsigned long long)id, (unsigned long long)l);
		if (id != l)
			cr_assert_eq(s.role, BATON_FOLLOWER);
	}
	cr_assert_eq(c_status(c, l).vote, l, "a leader voted for itself");
	c_free(c);
}

Test(elect, new_leader_appends_a_noop_of_its_term)
{
	struct cluster *c = c_new(3, NULL);
	baton_node_id l = c_tick_until_leader(c, 20000);
	c_run(c, 300);
	struct baton_raft_status s = c_status(c, l);
	cr_assert_eq(s.last_index, 2, "config entry, then the no-op");
	const struct baton_entry *e = baton_raft_entry(c_raft(c, l), 2);
	cr_assert_not_null(e);
	cr_assert_eq(e->type, BATON_ENTRY_NOOP);
	cr_assert_eq(e->term, s.term);
	cr_assert_eq(e->len, 0);
	cr_assert_eq(baton_raft_entry(c_raft(c, l), 1)->type,
		     BATON_ENTRY_CONFIG);
	for (baton_node_id id = 1; id <= 3; id++) {
		cr_assert_eq(c_commit(c, id), 2);
		const struct c_applied *a = c_applied_at(c, id, 2);
		cr_assert_not_null(a, "node %llu applied the no-op",
				   (unsigned long long)id);
		cr_assert_eq(a->type, BATON_ENTRY_NOOP);
		cr_assert_eq(a->term, s.term);
		cr_assert_eq(c_applied_at(c, id, 1)->type, BATON_ENTRY_CONFIG);
	}
	c_free(c);
}

/* The pre-candidate asks at term+1 but changes nobody's term, its own
 * included, and a voter's grant records no vote. */
Test(elect, pre_vote_changes_no_term)
{
	struct cluster *c = c_new(3, NULL);
	struct c_sum s;

	/* The candidate side. */
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, &s), 0);
	cr_assert_eq(s.role, BATON_PRE_CANDIDATE);
	cr_assert_eq(s.term, 1);
	cr_assert_not(s.hard_state_changed, "a pre-vote persists nothing");
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE, 0), 2);
	cr_assert_eq(s.n_msgs_after, 0);
	const struct baton_msg *pv = c_sum_find(&s, false, BATON_MSG_VOTE, 2);
	cr_assert_not_null(pv);
	cr_assert(pv->u.vote.pre_vote);
	cr_assert_eq(pv->term, 2, "asks for the next term");
	cr_assert_eq(pv->u.vote.last_log_index, 1);
	cr_assert_eq(pv->u.vote.last_log_term, 1);

	/* The voter side. */
	struct baton_msg m = *pv;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert_not(s.hard_state_changed);
	cr_assert_eq(s.term, 1);
	const struct baton_msg *res =
		c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, 1);
	cr_assert_not_null(res, "a pre-vote answer goes at once");
	cr_assert(res->u.vote_result.pre_vote);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(res->term, 2);
	cr_assert_eq(c_sum_count(&s, true, 0, 0), 0);
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.term, 1);
	cr_assert_eq(st.vote, 0);

	/* Having granted a pre-vote binds nothing: a real vote from another
	 * candidate in term 2 is still granted. */
	m = c_msg(BATON_MSG_VOTE, 2, 3, 2);
	m.u.vote.last_log_index = 1;
	m.u.vote.last_log_term = 1;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 3);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(c_status(c, 2).vote, 3);
	c_free(c);
}

Test(elect, node_with_a_live_leader_refuses_pre_votes)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	struct baton_raft_status before = c_status(c, f);

	struct baton_msg m = c_msg(BATON_MSG_VOTE, before.term + 1, g, f);
	m.u.vote.pre_vote = true;
	m.u.vote.last_log_index = before.last_index + 5; /* better log */
	m.u.vote.last_log_term = before.last_term;
	struct c_sum s;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.pre_vote);
	cr_assert_not(res->u.vote_result.granted,
		      "heard from the leader within the election timeout");
	cr_assert_eq(res->term, before.term, "a refusal carries our term");
	struct baton_raft_status after = c_status(c, f);
	cr_assert_eq(after.term, before.term);
	cr_assert_eq(after.leader_id, l);
	cr_assert_not(s.hard_state_changed);

	/* A real vote request at a higher term is ignored altogether. */
	m.u.vote.pre_vote = false;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(s.n_msgs + s.n_msgs_after, 0);
	cr_assert_eq(c_term(c, f), before.term);
	cr_assert_eq(c_status(c, f).leader_id, l);

	/* Once the leader has been silent for an election timeout, the same
	 * pre-vote is granted. */
	c_drop(c, 0, 0, 0);
	c_advance(c, C_ELECTION_MS + 1);
	m.u.vote.pre_vote = true;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	res = c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(c_term(c, f), before.term);
	c_free(c);
}

/* The voter compares (last term, last index): a candidate whose log is
 * behind is refused, for real votes and pre-votes alike. */
Test(elect, candidate_with_a_stale_log_is_refused)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	cr_assert_eq(c_propose_n(c, l, "x", 3, NULL), 0);
	c_run(c, 300);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	struct baton_raft_status fs = c_status(c, f);
	cr_assert_eq(fs.last_index, 5);
	c_drop(c, 0, 0, 0);
	c_advance(c, C_ELECTION_MS + 1); /* the leader lease is over */

	struct c_sum s;
	/* Same last term, shorter log. */
	struct baton_msg m = c_msg(BATON_MSG_VOTE, fs.term + 1, g, f);
	m.u.vote.pre_vote = true;
	m.u.vote.last_log_index = fs.last_index - 1;
	m.u.vote.last_log_term = fs.last_term;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_not(c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g)
			      ->u.vote_result.granted);

	/* Longer log but an older last term. */
	m.u.vote.last_log_index = fs.last_index + 10;
	m.u.vote.last_log_term = fs.last_term - 1;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_not(c_sum_find(&s, false, BATON_MSG_VOTE_RESULT, g)
			      ->u.vote_result.granted);

	/* A real vote: the term moves on, the vote is refused. */
	m.u.vote.pre_vote = false;
	m.u.vote.last_log_index = fs.last_index - 1;
	m.u.vote.last_log_term = fs.last_term;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, g);
	cr_assert_not_null(res);
	cr_assert_not(res->u.vote_result.granted);
	struct baton_raft_status after = c_status(c, f);
	cr_assert_eq(after.term, fs.term + 1);
	cr_assert_eq(after.vote, 0);
	cr_assert(s.hard_state_changed);
	cr_assert_eq(s.hs_vote, 0);

	/* An up-to-date candidate in that term gets the vote. */
	m = c_msg(BATON_MSG_VOTE, fs.term + 1, l, f);
	m.u.vote.last_log_index = fs.last_index;
	m.u.vote.last_log_term = fs.last_term;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, l);
	cr_assert_not_null(res);
	cr_assert(res->u.vote_result.granted);
	cr_assert_eq(c_status(c, f).vote, l);
	c_free(c);
}

/* A granted vote is persisted with the update (hard state: term and vote)
 * and its answer rides in msgs_after_persist, never in msgs. */
Test(elect, vote_result_waits_for_the_disk)
{
	struct cluster *c = c_new(3, NULL);
	c_set_manual(c, 2, true);
	struct baton_msg m = c_msg(BATON_MSG_VOTE, 2, 1, 2);
	m.u.vote.last_log_index = 1;
	m.u.vote.last_log_term = 1;
	struct c_sum s;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert(s.hard_state_changed);
	cr_assert_eq(s.hs_term, 2);
	cr_assert_eq(s.hs_vote, 1);
	cr_assert(s.persist_needed);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE_RESULT, 0), 0,
		     "a vote never goes before it is durable");
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE_RESULT, 1), 1);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 1);
	cr_assert(res->u.vote_result.granted);
	cr_assert_not(res->u.vote_result.pre_vote);
	cr_assert_eq(res->term, 2);

	/* The manual disk holds it back until the write completes. */
	cr_assert_eq(c_count(c, BATON_MSG_VOTE_RESULT, 2, 1), 0);
	c_persist(c, 2);
	cr_assert_eq(c_count(c, BATON_MSG_VOTE_RESULT, 2, 1), 1);
	cr_assert_eq(c_node(c, 2)->hs_vote, 1);
	cr_assert_eq(c_node(c, 2)->hs_term, 2);

	/* A second request for the same vote is answered the same way. */
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE_RESULT, 0), 0);
	cr_assert(c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 1)
			  ->u.vote_result.granted);
	/* And another candidate of the same term is refused. */
	m.from = 3;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert_not(c_sum_find(&s, true, BATON_MSG_VOTE_RESULT, 3)
			      ->u.vote_result.granted);
	c_free(c);
}

static void no_pre_vote(struct baton_raft_options *o)
{
	o->pre_vote = false;
}

/* The candidate's own vote requests also wait for its self-vote. */
Test(elect, vote_requests_wait_for_the_candidates_disk)
{
	struct cluster *c = c_new(3, no_pre_vote);
	c_set_manual(c, 1, true);
	c_advance(c, 2 * C_ELECTION_MS);
	struct c_sum s;
	cr_assert_eq(c_tick_node(c, 1, &s), 0);
	cr_assert_eq(s.role, BATON_CANDIDATE);
	cr_assert_eq(s.term, 2);
	cr_assert(s.hard_state_changed);
	cr_assert_eq(s.hs_vote, 1);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_VOTE, 0), 0);
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE, 0), 2);
	cr_assert_eq(c_count(c, BATON_MSG_VOTE, 1, 0), 0);
	c_persist(c, 1);
	cr_assert_eq(c_count(c, BATON_MSG_VOTE, 1, 0), 2);
	c_deliver_all(c);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	c_free(c);
}

Test(elect, duplicate_grants_count_once)
{
	struct cluster *c = c_new(5, no_pre_vote);
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_CANDIDATE);
	c_drop(c, 0, 0, 0);
	struct baton_msg m = c_msg(BATON_MSG_VOTE_RESULT, 2, 2, 1);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_CANDIDATE,
		     "self + node 2 (thrice) is 2 of 5");
	/* A grant from an earlier term does not count either. */
	m = c_msg(BATON_MSG_VOTE_RESULT, 1, 4, 1);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_CANDIDATE);
	m = c_msg(BATON_MSG_VOTE_RESULT, 2, 3, 1);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	c_free(c);
}

Test(elect, a_majority_of_refusals_ends_the_campaign)
{
	struct cluster *c = c_new(5, no_pre_vote);
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, NULL), 0);
	c_drop(c, 0, 0, 0);
	for (baton_node_id id = 2; id <= 4; id++) {
		cr_assert_eq(c_role(c, 1), BATON_CANDIDATE);
		struct baton_msg m = c_msg(BATON_MSG_VOTE_RESULT, 2, id, 1);
		cr_assert_eq(c_receive(c, 1, &m, NULL), 0);
	}
	struct baton_raft_status s = c_status(c, 1);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_eq(s.term, 2);
	cr_assert_eq(s.vote, 1, "the vote of the term stays cast");
	c_free(c);
}

Test(elect, single_node_leads_and_commits_after_persisting)
{
	struct cluster *c = c_new(1, NULL);
	c_set_manual(c, 1, true);
	c_advance(c, 2 * C_ELECTION_MS);
	struct c_sum s;
	cr_assert_eq(c_tick_node(c, 1, &s), 0);
	cr_assert_eq(s.role, BATON_LEADER, "a single voter elects itself");
	cr_assert_eq(s.term, 2);
	cr_assert_eq(s.leader_id, 1);
	cr_assert_eq(s.n_entries, 1, "its no-op");
	cr_assert(s.persist_needed);
	cr_assert_eq(s.persist_index, 2);
	cr_assert_eq(s.persist_term, 2);
	cr_assert_lt(s.commit_index, 2, "not before the disk says so");
	cr_assert_eq(s.n_apply, 0);
	cr_assert_eq(c_node(c, 1)->n_applied, 0);

	c_persist(c, 1);
	cr_assert_eq(c_commit(c, 1), 2);
	cr_assert_eq(c_node(c, 1)->n_applied, 2);
	cr_assert_eq(c_applied_at(c, 1, 2)->type, BATON_ENTRY_NOOP);

	baton_index idx;
	cr_assert_eq(c_propose(c, 1, "solo", &idx), 0);
	cr_assert_eq(idx, 3);
	cr_assert_eq(c_commit(c, 1), 2);
	cr_assert_not(c_applied_cmd(c, 1, "solo"));
	c_persist(c, 1);
	cr_assert_eq(c_commit(c, 1), 3);
	cr_assert(c_applied_cmd(c, 1, "solo"));
	/* A stale persistence report changes nothing. */
	struct baton_event ev = {.type = BATON_EVENT_PERSISTED};
	ev.u.persisted.index = 2;
	ev.u.persisted.term = 2;
	cr_assert_eq(c_step(c, 1, &ev, &s), 0);
	cr_assert_eq(s.commit_index, 3);
	cr_assert_eq(s.n_apply, 0);
	c_free(c);
}

Test(elect, a_learner_or_unknown_node_never_campaigns)
{
	struct cluster *c = c_new(3, NULL);
	c_add_node(c, 4, NULL); /* empty: not in any configuration */
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_not(c_node(c, 4)->campaigned);
	cr_assert_eq(c_term(c, 4), 0);
	cr_assert_neq(c_leader(c), 0);
	c_free(c);
}

/* ======================================================================== */
/* Check-quorum.                                                            */

Test(checkquorum, leader_hearing_from_nobody_steps_down)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_term t = c_term(c, l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	c_run(c, C_ELECTION_MS - 100);
	cr_assert_eq(c_role(c, l), BATON_LEADER,
		     "not before an election timeout");
	c_run(c, C_ELECTION_MS + 200);
	struct baton_raft_status s = c_status(c, l);
	cr_assert_neq(s.role, BATON_LEADER, "steps down within two timeouts");
	cr_assert_eq(s.term, t, "stepping down bumps no term (pre-vote)");
	cr_assert_eq(s.leader_id, 0);
	c_free(c);
}

Test(checkquorum, leader_with_one_live_follower_stays)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	c_isolate(c, c_follower(c, l, 0), true);
	c_run(c, 5 * C_ELECTION_MS);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	c_free(c);
}

static void no_check_quorum(struct baton_raft_options *o)
{
	o->check_quorum = false;
}

Test(checkquorum, disabled_keeps_an_isolated_leader)
{
	baton_node_id l;
	struct cluster *c = c_three(no_check_quorum, &l);
	baton_node_id f = c_follower(c, l, 0);
	c_isolate(c, f, true);
	c_isolate(c, c_follower(c, l, f), true);
	c_run(c, 5 * C_ELECTION_MS);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	c_free(c);
}

/* ======================================================================== */
/* Replication.                                                             */

Test(repl, proposals_commit_and_apply_in_order_everywhere)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	char cmd[32];
	baton_index idx;
	for (int k = 0; k < 5; k++) {
		snprintf(cmd, sizeof cmd, "cmd-%d", k);
		cr_assert_eq(c_propose(c, l, cmd, &idx), 0);
		cr_assert_eq(idx, (baton_index)(3 + k));
	}
	baton_index first;
	cr_assert_eq(c_propose_n(c, l, "batch", 5, &first), 0);
	cr_assert_eq(first, 8);
	c_run(c, 300);
	for (baton_node_id id = 1; id <= 3; id++) {
		struct c_node *nd = c_node(c, id);
		cr_assert_eq(c_commit(c, id), 12);
		cr_assert_eq(nd->last_applied, 12);
		cr_assert_eq(nd->n_applied, 12, "node %llu",
			     (unsigned long long)id);
		for (uint32_t k = 0; k < 12; k++)
			cr_assert_eq(nd->applied[k].index, k + 1);
		for (int k = 0; k < 10; k++) {
			const struct c_applied *a =
				&nd->applied[2 + k]; /* index 3 + k */
			if (k < 5)
				snprintf(cmd, sizeof cmd, "cmd-%d", k);
			else
				snprintf(cmd, sizeof cmd, "batch-%d", k - 5);
			cr_assert_eq(a->type, BATON_ENTRY_COMMAND);
			cr_assert_eq(a->len, strlen(cmd));
			cr_assert_arr_eq(a->buf, cmd, a->len);
		}
	}
	c_assert_logs_equal(c, 1, 2, 1, 12);
	c_assert_logs_equal(c, 1, 3, 1, 12);
	c_free(c);
}

/* A follower holds and persists an entry before it is committed, but
 * applies it only once the leader says it is committed. */
Test(repl, follower_applies_only_what_is_committed)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "a", &idx), 0);
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert_eq(c_last(c, f), idx);
	cr_assert_eq(c_status(c, f).persisted_index, idx);
	cr_assert_lt(c_commit(c, f), idx);
	cr_assert_not(c_applied_cmd(c, f, "a"));

	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	cr_assert_eq(c_commit(c, l), idx, "leader and f are a quorum");
	cr_assert(c_applied_cmd(c, l, "a"));
	cr_assert_not(c_applied_cmd(c, f, "a"));

	c_run(c, 2 * C_HEARTBEAT_MS); /* the commit index travels */
	cr_assert_eq(c_commit(c, f), idx);
	cr_assert(c_applied_cmd(c, f, "a"));
	c_free(c);
}

/* An old leader's uncommitted suffix is replaced by the new leader's log. */
Test(repl, conflicting_suffix_is_truncated)
{
	baton_node_id a;
	struct cluster *c = c_three(NULL, &a);
	baton_term t1 = c_term(c, a);
	c_isolate(c, a, true);
	cr_assert_eq(c_propose_n(c, a, "old", 3, NULL), 0); /* 3, 4, 5 */
	cr_assert_eq(c_last(c, a), 5);

	baton_node_id b = c_tick_until_leader(c, 20000);
	cr_assert_neq(b, a);
	cr_assert_gt(c_term(c, b), t1);
	cr_assert_eq(c_propose(c, b, "new", NULL), 0); /* noop 3, "new" 4 */
	c_run(c, 300);
	baton_index last = c_last(c, b);
	cr_assert_eq(last, 4);
	cr_assert_eq(c_commit(c, b), 4);

	c_isolate(c, a, false);
	c_run(c, 1000);
	struct baton_raft_status s = c_status(c, a);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_eq(s.leader_id, b);
	cr_assert_eq(c_node(c, a)->min_truncate_from, 3,
		     "the update told the driver to delete from 3");
	cr_assert_eq(s.last_index, last);
	c_assert_logs_equal(c, a, b, 1, last);
	cr_assert(c_applied_cmd(c, a, "new"));
	cr_assert_not(c_applied_cmd(c, a, "old-0"));
	cr_assert_not(c_applied_cmd(c, a, "old-2"));
	c_free(c);
}

static void pipeline4(struct baton_raft_options *o)
{
	o->max_inflight_appends = 4;
	o->max_entries_per_append = 1;
}

Test(repl, pipelining_sends_several_appends_before_any_reply)
{
	baton_node_id l;
	struct cluster *c = c_three(pipeline4, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_count(c, 0, 0, 0), 0);
	cr_assert_eq(c_propose_n(c, l, "p", 10, NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 4,
		     "max_inflight_appends appends in flight");
	cr_assert_eq(c_count(c, BATON_MSG_APPEND_RESULT, 0, 0), 0);
	for (uint32_t k = 0; k < 4; k++) {
		const struct baton_msg *m =
			c_find(c, BATON_MSG_APPEND, l, f, k);
		cr_assert_eq(m->u.append.n_entries, 1);
		cr_assert_eq(m->u.append.prev_index, 2 + k);
		cr_assert_eq(m->u.append.entries[0].index, 3 + k);
	}
	/* Each answer frees a slot. */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 4);
	c_deliver_all(c);
	c_run(c, 300);
	for (baton_node_id id = 1; id <= 3; id++)
		cr_assert_eq(c_commit(c, id), 12);
	c_free(c);
}

Test(repl, pipeline_recovers_from_a_lost_append)
{
	baton_node_id l;
	struct cluster *c = c_three(pipeline4, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	cr_assert_eq(c_propose_n(c, l, "p", 10, NULL), 0);
	cr_assert(c_drop_first(c, BATON_MSG_APPEND, l, f), "entry 3 is lost");
	/* The appends still in flight (4, 5, 6) reach f: it must refuse
	 * them, it lacks 3. */
	for (int k = 0; k < 3; k++)
		cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert_eq(c_last(c, f), 2, "f took entries after a gap");
	cr_assert_eq(c_count(c, BATON_MSG_APPEND_RESULT, f, l), 3);
	const struct baton_msg *rej =
		c_find(c, BATON_MSG_APPEND_RESULT, f, l, 0);
	cr_assert_not(rej->u.append_result.success);
	cr_assert_eq(rej->u.append_result.hint_index, 2);
	/* The refusals make the leader back off and resend from 3, at
	 * once (no timer needed). */
	c_deliver_all(c);
	cr_assert_eq(c_commit(c, l), 12);
	cr_assert_eq(c_last(c, f), 12);
	cr_assert_eq(c_commit(c, f), 12);
	c_assert_logs_equal(c, f, l, 1, 12);
	c_assert_logs_equal(c, g, l, 1, 12);
	cr_assert(c_applied_cmd(c, f, "p-9"));
	c_free(c);
}

Test(repl, five_nodes_commit_with_three_not_two)
{
	struct cluster *c = c_new(5, NULL);
	baton_node_id l = c_tick_until_leader(c, 20000);
	c_run(c, 300);
	c_isolate(c, c_follower(c, l, 0), true);
	c_isolate(c, c_follower(c, l, 0), true); /* another one */
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "three", &idx), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), idx, "3 of 5 commit");
	c_isolate(c, c_follower(c, l, 0), true);
	cr_assert_eq(c_follower(c, l, c_follower(c, l, 0)), 0,
		     "one follower is left");
	cr_assert_eq(c_propose(c, l, "two", &idx), 0);
	c_run(c, 300);
	cr_assert_lt(c_commit(c, l), idx, "2 of 5 do not");
	c_free(c);
}

static void pipeline1(struct baton_raft_options *o)
{
	o->max_inflight_appends = 1;
}

Test(repl, without_pipelining_one_append_at_a_time)
{
	baton_node_id l;
	struct cluster *c = c_three(pipeline1, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_propose(c, l, "a", NULL), 0);
	cr_assert_eq(c_propose(c, l, "b", NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 1);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, f), 4);
	c_free(c);
}

static void batch3(struct baton_raft_options *o)
{
	o->max_entries_per_append = 3;
}

Test(repl, batching_limits_entries_per_append)
{
	baton_node_id l;
	struct cluster *c = c_three(batch3, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_propose_n(c, l, "b", 10, NULL), 0);
	uint32_t n = c_count(c, BATON_MSG_APPEND, l, f);
	cr_assert_eq(n, 4, "3 + 3 + 3 + 1");
	uint32_t total = 0;
	baton_index prev = 2;
	for (uint32_t k = 0; k < n; k++) {
		const struct baton_msg *m =
			c_find(c, BATON_MSG_APPEND, l, f, k);
		cr_assert_leq(m->u.append.n_entries, 3);
		cr_assert_eq(m->u.append.prev_index, prev);
		prev += m->u.append.n_entries;
		total += m->u.append.n_entries;
	}
	cr_assert_eq(total, 10);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, f), 12);
	c_free(c);
}

static void bytes100(struct baton_raft_options *o)
{
	o->max_bytes_per_append = 100;
}

Test(repl, batching_limits_bytes_per_append)
{
	baton_node_id l;
	struct cluster *c = c_three(bytes100, &l);
	baton_node_id f = c_follower(c, l, 0);
	char big[41];
	memset(big, 'z', 40);
	big[40] = '\0';
	struct baton_buffer b[5];
	for (int k = 0; k < 5; k++)
		b[k] = (struct baton_buffer){big, 40};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 5;
	ev.u.propose.bufs = b;
	cr_assert_eq(c_step(c, l, &ev, NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 3, "2 + 2 + 1");
	cr_assert_eq(c_find(c, BATON_MSG_APPEND, l, f, 0)->u.append.n_entries,
		     2);
	cr_assert_eq(c_find(c, BATON_MSG_APPEND, l, f, 2)->u.append.n_entries,
		     1);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, f), 7);
	c_free(c);
}

static void small_entries(struct baton_raft_options *o)
{
	o->max_entry_bytes = 8;
	o->max_uncommitted_entries = 3;
}

Test(repl, proposal_errors)
{
	baton_node_id l;
	struct cluster *c = c_three(small_entries, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_index last = c_last(c, l);

	cr_assert_eq(c_propose(c, f, "x", NULL), BATON_ENOTLEADER);
	cr_assert_eq(c_last(c, f), last);

	cr_assert_eq(c_propose(c, l, "123456789", NULL), BATON_ETOOBIG);
	cr_assert_eq(c_last(c, l), last, "nothing appended");
	/* All or nothing: a batch with one command too big appends none. */
	struct baton_buffer b[2] = {{"ok", 2}, {"123456789", 9}};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 2;
	ev.u.propose.bufs = b;
	cr_assert_eq(c_step(c, l, &ev, NULL), BATON_ETOOBIG);
	cr_assert_eq(c_last(c, l), last);
	ev.u.propose.n = 0;
	cr_assert_eq(c_step(c, l, &ev, NULL), BATON_EINVAL);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, 0, 0), 0,
		     "a refused proposal sends nothing");

	cr_assert_eq(c_propose(c, l, "12345678", NULL), 0, "at the limit");

	/* Back-pressure: at most 3 entries beyond the commit index. */
	c_isolate(c, f, true);
	c_isolate(c, c_follower(c, l, f), true);
	cr_assert_eq(c_propose(c, l, "b", NULL), 0);
	cr_assert_eq(c_propose(c, l, "c", NULL), 0);
	cr_assert_eq(c_propose(c, l, "d", NULL), BATON_EOVERLOADED);
	c_free(c);
}

/* A late, shorter AppendEntries of the current leader must not cut a
 * matching suffix; a follower learns a commit index only up to what it
 * knows matches the leader. */
Test(repl, stale_append_keeps_a_matching_suffix_and_bounds_commit)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[5] = {2, 2, 2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 5);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_last(c, 2), 6);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 1);
	cr_assert_not_null(res, "an acknowledgement waits for the disk");
	cr_assert(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 6);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_APPEND_RESULT, 0), 0);

	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 2); /* entries 2, 3 again */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(s.truncate_from, 0);
	cr_assert_eq(s.n_entries, 0);
	cr_assert_eq(c_last(c, 2), 6, "the matching suffix 4..6 stays");
	res = c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 1);
	cr_assert(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 3);

	/* Anchored at 3 with leader_commit 6: only 3 is known to match. */
	c_make_append(&a, 2, 1, 2, 3, 2, 6, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_commit(c, 2), 3);
	cr_assert_eq(c_node(c, 2)->last_applied, 3);
	c_make_append(&a, 2, 1, 2, 6, 2, 6, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_commit(c, 2), 6);
	cr_assert_eq(c_node(c, 2)->last_applied, 6);
	c_free(c);
}

/* A rejection carries the follower's last index whose term is <= the term
 * the leader sent, so the leader can skip a whole conflicting term. */
Test(repl, rejection_hints_skip_a_conflicting_term)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[3] = {2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 3); /* [1:t1 2:t2 3:t2 4:t2] */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_last(c, 2), 4);

	/* A leader of term 4 whose entry 4 is of term 3. */
	c_make_append(&a, 4, 3, 2, 4, 3, 1, NULL, 0);
	a.m.u.append.heartbeat_seq = 77;
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 3);
	cr_assert_not_null(res);
	cr_assert_not(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 4);
	cr_assert_eq(res->u.append_result.hint_index, 4);
	cr_assert_eq(res->u.append_result.hint_term, 2);
	cr_assert_eq(res->u.append_result.heartbeat_seq, 77);
	cr_assert_eq(c_last(c, 2), 4, "a rejection deletes nothing");

	/* Its entry 4 is of term 1: the whole of term 2 is skipped. */
	c_make_append(&a, 4, 3, 2, 4, 1, 1, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 3);
	cr_assert_not(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.hint_index, 1);
	cr_assert_eq(res->u.append_result.hint_term, 1);

	/* A prev_index beyond our log: the hint is our last entry. */
	c_make_append(&a, 4, 3, 2, 10, 4, 1, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_APPEND_RESULT, 3);
	cr_assert_not(res->u.append_result.success);
	cr_assert_eq(res->u.append_result.index, 10);
	cr_assert_eq(res->u.append_result.hint_index, 4);
	cr_assert_eq(res->u.append_result.hint_term, 2);
	c_free(c);
}

/* After a truncation, a late PERSISTED report for the replaced entries
 * must not make the new, not yet durable, entries count as durable. */
Test(repl, stale_persistence_report_after_a_truncation)
{
	struct cluster *c = c_new(3, NULL);
	c_set_manual(c, 2, true);
	const baton_term t2[3] = {2, 2, 2}, t3[1] = {3};
	struct c_append a;
	struct c_sum s1, s2;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 3); /* 2, 3, 4 of term 2 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s1), 0);
	cr_assert_eq(s1.n_entries, 3);
	cr_assert_eq(s1.persist_index, 4);
	cr_assert_eq(s1.persist_term, 2);
	c_make_append(&a, 3, 3, 2, 2, 2, 1, t3, 1); /* 3 of term 3 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s2), 0);
	cr_assert_eq(s2.truncate_from, 3,
		     "entries already handed to the disk are deleted");
	cr_assert_eq(s2.n_entries, 1);
	cr_assert_eq(s2.persist_index, 3);
	cr_assert_eq(s2.persist_term, 3);
	cr_assert_eq(c_status(c, 2).persisted_index, 1);

	c_persist_one(c, 2); /* reports (4, term 2) */
	cr_assert_leq(c_status(c, 2).persisted_index, 2,
		      "the new entry 3 is not durable yet");
	c_persist_one(c, 2); /* reports (3, term 3) */
	cr_assert_eq(c_status(c, 2).persisted_index, 3);
	c_free(c);
}

/* ======================================================================== */
/* The commit rule (Raft, figure 8): a leader never commits an entry of an
 * earlier term by counting replicas; it commits it only along with an entry
 * of its own term.                                                         */

static void one_entry_per_append(struct baton_raft_options *o)
{
	o->max_entries_per_append = 1;
}

Test(commitrule, old_term_entry_waits_for_the_new_leaders_noop)
{
	baton_node_id a;
	struct cluster *c = c_three(one_entry_per_append, &a);
	baton_term t1 = c_term(c, a);
	baton_node_id b = c_follower(c, a, 0);
	baton_node_id x = c_follower(c, a, b);

	/* Entry 3 (term t1) reaches b only, and a never hears it did. */
	cr_assert_eq(c_propose(c, a, "x", NULL), 0);
	cr_assert_eq(c_drop(c, BATON_MSG_APPEND, a, x), 1);
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, a, b));
	cr_assert_eq(c_drop_to(c, a), 1);
	cr_assert_eq(c_last(c, b), 3);
	cr_assert_eq(c_last(c, x), 2);
	cr_assert_eq(c_commit(c, a), 2);
	c_isolate(c, a, true);

	/* b stands (only b's timer runs) and x elects it. */
	c_advance(c, 3 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, b, NULL), 0);
	bool saw_old_entry_on_quorum = false;
	for (int guard = 0; c_deliver_one(c); guard++) {
		cr_assert_lt(guard, 1000);
		if (c_role(c, b) != BATON_LEADER)
			continue;
		struct baton__progress *p =
			baton__progress_find(c_raft(c, b), x);
		cr_assert_not_null(p);
		if (p->match == 3 && c_last(c, x) == 3) {
			/* Entry 3 is now on b and x, a quorum, but it is of
			 * term t1: counting replicas must not commit it. */
			saw_old_entry_on_quorum = true;
			cr_assert_eq(c_commit(c, b), 2,
				     "committed an entry of an earlier term "
				     "by counting replicas");
		}
	}
	cr_assert_eq(c_role(c, b), BATON_LEADER);
	cr_assert_gt(c_term(c, b), t1);
	cr_assert(saw_old_entry_on_quorum,
		  "the scenario never had entry 3 on a quorum alone");
	/* Once the no-op (term of b) is on x too, both commit. */
	cr_assert_eq(c_last(c, x), 4);
	cr_assert_eq(c_commit(c, b), 4);
	cr_assert(c_applied_cmd(c, b, "x"));
	c_free(c);
}

/* ======================================================================== */
/* Snapshots.                                                               */

static void trailing3(struct baton_raft_options *o)
{
	o->snapshot_trailing_entries = 3;
}

Test(snap, snapshot_taken_compacts_keeping_trailing_entries)
{
	baton_node_id l;
	struct cluster *c = c_three(trailing3, &l);
	cr_assert_eq(c_propose_n(c, l, "s", 10, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_status(c, l).applied_index, 12);

	struct baton_snapshot_meta meta;
	cr_assert_eq(baton_raft_snapshot_meta(c_raft(c, l), 10, &meta), 0);
	cr_assert_eq(meta.index, 10);
	cr_assert_eq(meta.term, c_term(c, l));
	cr_assert_eq(meta.config.n, 3);
	cr_assert_eq(meta.config_index, 1);
	cr_assert_eq(baton_raft_snapshot_meta(c_raft(c, l), 13, &meta),
		     BATON_EINVAL, "13 is not applied");

	struct c_sum s;
	const char data[] = "state@10";
	cr_assert_eq(c_snapshot_taken(c, l, 10, data, sizeof data, &s), 0);
	cr_assert_eq(s.compact_upto, 7, "10 minus 3 trailing entries");
	cr_assert_eq(c_node(c, l)->last_compact_upto, 7);
	struct baton_raft_status st = c_status(c, l);
	cr_assert_eq(st.first_index, 8);
	cr_assert_eq(st.snapshot_index, 10);
	cr_assert_eq(st.snapshot_term, meta.term);
	cr_assert_eq(st.last_index, 12);
	cr_assert_null(baton_raft_entry(c_raft(c, l), 7));
	cr_assert_not_null(baton_raft_entry(c_raft(c, l), 8));
	baton_term t;
	cr_assert(baton_raft_term_at(c_raft(c, l), 10, &t));
	cr_assert_not(baton_raft_term_at(c_raft(c, l), 6, &t));

	cr_assert_eq(c_snapshot_taken(c, l, 10, data, sizeof data, NULL),
		     BATON_EINVAL, "not newer than the current snapshot");
	cr_assert_eq(c_snapshot_taken(c, l, 13, data, sizeof data, NULL),
		     BATON_EINVAL, "beyond what is applied");
	cr_assert_eq(c_snapshot_taken(c, l, 12, data, sizeof data, &s), 0);
	cr_assert_eq(s.compact_upto, 9);
	cr_assert_eq(c_status(c, l).first_index, 10);

	/* Replication goes on. */
	cr_assert_eq(c_propose(c, l, "after", NULL), 0);
	c_run(c, 300);
	for (baton_node_id id = 1; id <= 3; id++)
		cr_assert(c_applied_cmd(c, id, "after"));
	c_free(c);
}

static void small_chunks(struct baton_raft_options *o)
{
	o->snapshot_trailing_entries = 0;
	o->snapshot_chunk_bytes = 16;
}

struct chunk_stats {
	baton_node_id to;
	uint32_t chunks;
	uint32_t max_len;
	bool aligned; /* every chunk starts on a chunk boundary, in bounds */
	bool saw_last;
};

static void count_chunks(void *ctx, const struct baton_msg *m)
{
	struct chunk_stats *cs = ctx;
	const struct baton_msg_snapshot *sn = &m->u.snapshot;
	if (m->type != BATON_MSG_SNAPSHOT || m->to != cs->to)
		return;
	cs->chunks++;
	if (sn->chunk_len > cs->max_len)
		cs->max_len = sn->chunk_len;
	if (sn->offset % 16 != 0 || sn->offset + sn->chunk_len > sn->total_len)
		cs->aligned = false;
	if (sn->last_chunk) {
		cs->saw_last = true;
		if (sn->offset + sn->chunk_len != sn->total_len)
			cs->aligned = false;
	}
}

Test(snap, lagging_follower_receives_the_snapshot_in_chunks)
{
	baton_node_id l;
	struct cluster *c = c_three(small_chunks, &l);
	baton_node_id f = c_follower(c, l, 0);
	c_isolate(c, f, true);
	cr_assert_eq(c_propose_n(c, l, "pre", 20, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), 22);
	cr_assert_eq(c_last(c, f), 2);

	uint8_t data[100];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(i * 7 + 1);
	struct c_sum s;
	cr_assert_eq(c_snapshot_taken(c, l, 22, data, sizeof data, &s), 0);
	cr_assert_eq(s.compact_upto, 22);
	cr_assert_eq(c_status(c, l).first_index, 23);
	cr_assert_eq(c_propose_n(c, l, "post", 2, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), 24);

	struct chunk_stats cs = {.to = f, .aligned = true};
	c->hook = count_chunks;
	c->hook_ctx = &cs;
	c_isolate(c, f, false);
	c_run(c, 3000);

	struct c_node *nd = c_node(c, f);
	cr_assert_eq(nd->n_snapshots, 1, "installed once");
	cr_assert_eq(nd->snap.index, 22);
	cr_assert_eq(nd->snap.term, c_term(c, l));
	cr_assert_eq(nd->snap.config.n, 3);
	cr_assert_eq(nd->snap_len, sizeof data);
	cr_assert_arr_eq(nd->snap_data, data, sizeof data);
	cr_assert_geq(cs.chunks, 7, "100 bytes in chunks of 16");
	cr_assert_leq(cs.max_len, 16);
	cr_assert(cs.aligned);
	cr_assert(cs.saw_last);

	struct baton_raft_status fs = c_status(c, f);
	cr_assert_eq(fs.commit_index, c_commit(c, l));
	cr_assert_eq(fs.snapshot_index, 22);
	cr_assert_eq(fs.last_index, 24);
	c_assert_logs_equal(c, f, l, 23, 24);
	cr_assert(c_applied_cmd(c, f, "post-0"));
	cr_assert(c_applied_cmd(c, f, "post-1"));
	cr_assert_not(c_applied_cmd(c, f, "pre-0"),
		      "covered by the snapshot, never applied one by one");
	c_free(c);
}

/* A snapshot transfer to a follower that was cut off, in which the
 * second message of type `lost` (a chunk, or a chunk's acknowledgement) is
 * lost on the way. The leader must send the missing chunk again (on a
 * later heartbeat) and the follower must end up with the snapshot. */
static void snapshot_transfer_with_a_loss(uint32_t lost)
{
	baton_node_id l;
	struct cluster *c = c_three(small_chunks, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id lost_to = lost == BATON_MSG_SNAPSHOT ? f : l;
	c_isolate(c, f, true);
	cr_assert_eq(c_propose_n(c, l, "pre", 10, NULL), 0);
	c_run(c, 300);
	uint8_t data[64];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(255 - i);
	cr_assert_eq(c_snapshot_taken(c, l, 12, data, sizeof data, NULL), 0);
	c_isolate(c, f, false);

	uint32_t seen = 0;
	bool dropped = false;
	/* 30 s: 300 heartbeat rounds, 30 election timeouts. */
	for (int t = 0; t < 3000; t++) {
		c_advance(c, C_TICK_MS);
		c_tick_all(c);
		for (int guard = 0; c->q_n > 0; guard++) {
			cr_assert_lt(guard, 100000);
			if (!dropped && c->q[0].m.type == lost &&
			    c->q[0].m.to == lost_to && ++seen == 2) {
				cr_assert(c_drop_first(c, lost, 0, lost_to));
				dropped = true;
				continue;
			}
			c_deliver_one(c);
		}
	}
	cr_assert(dropped);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	struct c_node *nd = c_node(c, f);
	struct baton__progress *p = baton__progress_find(c_raft(c, l), f);
	cr_assert_eq(nd->n_snapshots, 1,
		     "snapshot never installed after one lost %s: leader "
		     "progress for %llu still state %u (3 = snapshot) at "
		     "offset %llu of %zu; %llu chunks delivered in 30 s",
		     lost == BATON_MSG_SNAPSHOT ? "chunk" : "chunk ack",
		     (unsigned long long)f, p->state,
		     (unsigned long long)p->snap_offset, sizeof data,
		     (unsigned long long)c->delivered[BATON_MSG_SNAPSHOT]);
	cr_assert_eq(nd->snap_len, sizeof data);
	cr_assert_arr_eq(nd->snap_data, data, sizeof data);
	cr_assert_eq(c_commit(c, f), c_commit(c, l));
	c_free(c);
}

Test(snap, snapshot_transfer_survives_a_lost_chunk)
{
	snapshot_transfer_with_a_loss(BATON_MSG_SNAPSHOT);
}

Test(snap, snapshot_transfer_survives_a_lost_chunk_ack)
{
	snapshot_transfer_with_a_loss(BATON_MSG_SNAPSHOT_RESULT);
}

/* A follower reassembling a snapshot answers each chunk with the offset it
 * expects next; a chunk out of order changes nothing. */
Test(snap, out_of_order_chunk_gets_the_expected_offset)
{
	struct cluster *c = c_new(3, NULL);
	uint8_t data[30];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(0xa0 + i);
	struct baton_msg m = c_msg(BATON_MSG_SNAPSHOT, 2, 1, 2);
	m.u.snapshot.meta.index = 10;
	m.u.snapshot.meta.term = 2;
	c_voters(&m.u.snapshot.meta.config, 3);
	m.u.snapshot.meta.config_index = 1;
	m.u.snapshot.total_len = sizeof data;
	m.u.snapshot.chunk_len = 10;
	struct c_sum s;
	const struct baton_msg *res;

	m.u.snapshot.offset = 0;
	m.u.snapshot.chunk = data;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_not_null(res, "acknowledged after persistence");
	cr_assert_eq(res->u.snapshot_result.index, 10);
	cr_assert_eq(res->u.snapshot_result.next_offset, 10);
	cr_assert_not(res->u.snapshot_result.done);

	/* Skip [10, 20). */
	m.u.snapshot.offset = 20;
	m.u.snapshot.chunk = data + 20;
	m.u.snapshot.last_chunk = true;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_not_null(res);
	cr_assert_eq(res->u.snapshot_result.next_offset, 10,
		     "asks again for the missing bytes");
	cr_assert_not(res->u.snapshot_result.done);
	cr_assert_not(s.has_snapshot);

	m.u.snapshot.offset = 10;
	m.u.snapshot.chunk = data + 10;
	m.u.snapshot.last_chunk = false;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_eq(res->u.snapshot_result.next_offset, 20);
	/* A duplicate of that chunk is answered the same way. */
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_eq(res->u.snapshot_result.next_offset, 20);
	cr_assert_not(s.has_snapshot);

	m.u.snapshot.offset = 20;
	m.u.snapshot.chunk = data + 20;
	m.u.snapshot.last_chunk = true;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert(res->u.snapshot_result.done);
	cr_assert_eq(res->u.snapshot_result.next_offset, 30);
	cr_assert(s.has_snapshot);
	cr_assert_eq(s.snapshot_index, 10);
	cr_assert(s.persist_needed);
	struct c_node *nd = c_node(c, 2);
	cr_assert_eq(nd->snap_len, sizeof data);
	cr_assert_arr_eq(nd->snap_data, data, sizeof data);
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.commit_index, 10);
	cr_assert_eq(st.applied_index, 10);
	cr_assert_eq(st.snapshot_index, 10);
	cr_assert_eq(st.first_index, 11);
	cr_assert_eq(st.last_index, 10);
	cr_assert_eq(st.last_term, 2);
	cr_assert_eq(st.leader_id, 1);

	/* A snapshot the node already covers is acknowledged as done. */
	m.u.snapshot.offset = 0;
	m.u.snapshot.chunk = data;
	m.u.snapshot.last_chunk = false;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	res = c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert(res->u.snapshot_result.done);
	cr_assert_not(s.has_snapshot);
	c_free(c);
}

Test(snap, chunk_of_another_snapshot_restarts_from_zero)
{
	struct cluster *c = c_new(3, NULL);
	uint8_t data[30] = {0};
	struct baton_msg m = c_msg(BATON_MSG_SNAPSHOT, 2, 1, 2);
	m.u.snapshot.meta.index = 10;
	m.u.snapshot.meta.term = 2;
	c_voters(&m.u.snapshot.meta.config, 3);
	m.u.snapshot.total_len = sizeof data;
	m.u.snapshot.chunk_len = 10;
	m.u.snapshot.chunk = data;
	struct c_sum s;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	/* A middle chunk of a different snapshot (index 12). */
	m.u.snapshot.meta.index = 12;
	m.u.snapshot.offset = 10;
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert_not_null(res);
	cr_assert_eq(res->u.snapshot_result.index, 12);
	cr_assert_eq(res->u.snapshot_result.next_offset, 0);
	cr_assert_not(res->u.snapshot_result.done);
	c_free(c);
}

/* Single-chunk snapshot message for node 2 from node 1. */
static struct baton_msg c_one_chunk(baton_term term, baton_index index,
				    baton_term snap_term, const char *data)
{
	struct baton_msg m = c_msg(BATON_MSG_SNAPSHOT, term, 1, 2);
	m.u.snapshot.meta.index = index;
	m.u.snapshot.meta.term = snap_term;
	c_voters(&m.u.snapshot.meta.config, 3);
	m.u.snapshot.meta.config_index = 1;
	m.u.snapshot.total_len = strlen(data);
	m.u.snapshot.chunk_len = (uint32_t)strlen(data);
	m.u.snapshot.chunk = (const uint8_t *)data;
	m.u.snapshot.last_chunk = true;
	return m;
}

/* A follower that holds the snapshot's last entry keeps what follows it
 * (Raft, figure 13, rule 6). */
Test(snap, install_keeps_a_matching_suffix)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 9); /* 2..10 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(c_last(c, 2), 10);

	struct baton_msg m = c_one_chunk(2, 8, 2, "hello");
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert(s.has_snapshot);
	cr_assert_eq(s.snapshot_index, 8);
	cr_assert_eq(s.truncate_from, 0, "nothing after 8 is deleted");
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.snapshot_index, 8);
	cr_assert_eq(st.first_index, 9);
	cr_assert_eq(st.last_index, 10);
	cr_assert_eq(st.commit_index, 8);
	cr_assert_eq(st.applied_index, 8);
	cr_assert_not_null(baton_raft_entry(c_raft(c, 2), 9));
	cr_assert_not_null(baton_raft_entry(c_raft(c, 2), 10));
	const struct baton_msg *res =
		c_sum_find(&s, true, BATON_MSG_SNAPSHOT_RESULT, 1);
	cr_assert(res->u.snapshot_result.done);

	/* The kept entries commit and apply after the snapshot. */
	c_make_append(&a, 2, 1, 2, 10, 2, 10, NULL, 0);
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);
	cr_assert_eq(s.n_apply, 2);
	cr_assert_eq(c_node(c, 2)->last_applied, 10);
	c_free(c);
}

/* A follower whose entry at the snapshot's index has another term drops
 * its whole log. */
Test(snap, install_replaces_a_conflicting_log)
{
	struct cluster *c = c_new(3, NULL);
	const baton_term t2[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
	struct c_append a;
	struct c_sum s;
	c_make_append(&a, 2, 1, 2, 1, 1, 1, t2, 9); /* 2..10 of term 2 */
	cr_assert_eq(c_receive(c, 2, &a.m, &s), 0);

	struct baton_msg m = c_one_chunk(3, 8, 3, "world");
	cr_assert_eq(c_receive(c, 2, &m, &s), 0);
	cr_assert(s.has_snapshot);
	cr_assert_eq(s.truncate_from, 9);
	struct baton_raft_status st = c_status(c, 2);
	cr_assert_eq(st.last_index, 8);
	cr_assert_eq(st.last_term, 3);
	cr_assert_eq(st.first_index, 9);
	cr_assert_eq(st.commit_index, 8);
	cr_assert_null(baton_raft_entry(c_raft(c, 2), 9));
	cr_assert_arr_eq(c_node(c, 2)->snap_data, "world", 5);
	c_free(c);
}

/* ======================================================================== */
/* Membership.                                                              */

/* Node id's view of member `who` (NULL: not a member). The result points
 * into a static copy of the status: use it before the next call. */
static const struct baton_member *
c_member_of(struct cluster *c, baton_node_id id, baton_node_id who)
{
	static struct baton_raft_status s;
	s = c_status(c, id);
	return baton_config_find(&s.config, who);
}

static uint32_t c_voter_count(struct cluster *c, baton_node_id id)
{
	struct baton_raft_status s = c_status(c, id);
	uint32_t n = 0;
	for (uint32_t i = 0; i < s.config.n; i++)
		n += s.config.members[i].role == BATON_VOTER;
	return n;
}

/* Three voters, an elected leader, and node 4 added as a learner that has
 * caught up. */
static struct cluster *c_with_learner(c_tweak_fn tweak, baton_node_id *leader)
{
	struct cluster *c = c_three(tweak, leader);
	c_add_node(c, 4, tweak);
	cr_assert_eq(c_member(c, *leader, BATON_EVENT_ADD_LEARNER, 4), 0);
	c_run(c, 500);
	return c;
}

Test(member, learner_receives_entries_but_never_votes_or_counts)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	c_add_node(c, 4, NULL);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), 0);
	/* The configuration takes effect as soon as it is in the log. */
	const struct baton_member *m = c_member_of(c, l, 4);
	cr_assert_not_null(m);
	cr_assert_eq(m->role, BATON_LEARNER);
	cr_assert_eq(c_voter_count(c, l), 3);
	c_run(c, 500);

	for (baton_node_id id = 1; id <= 4; id++) {
		m = c_member_of(c, id, 4);
		cr_assert_not_null(m, "node %llu knows the learner",
				   (unsigned long long)id);
		cr_assert_eq(m->role, BATON_LEARNER);
		cr_assert_eq(c_status(c, id).config_index, 3);
	}
	struct baton_raft_status ls = c_status(c, 4);
	cr_assert_eq(ls.role, BATON_FOLLOWER);
	cr_assert_eq(ls.leader_id, l);
	cr_assert_eq(ls.last_index, c_last(c, l));
	cr_assert_eq(ls.commit_index, c_commit(c, l));
	c_assert_logs_equal(c, 4, l, 1, ls.last_index);

	/* It never counts for commit: with both voting followers cut off,
	 * the leader and the learner are not a quorum. */
	baton_node_id f = c_follower(c, l, 4);
	baton_node_id g = c_follower(c, l, f);
	cr_assert_neq(g, 4);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	baton_index before = c_commit(c, l);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "only-learner", &idx), 0);
	c_run(c, 500);
	cr_assert_eq(c_last(c, 4), idx, "the learner has the entry");
	cr_assert_eq(c_commit(c, l), before, "but it does not count");
	cr_assert_not(c_applied_cmd(c, l, "only-learner"));
	c_isolate(c, f, false);
	c_run(c, 500);
	cr_assert_geq(c_commit(c, l), idx);
	cr_assert(c_applied_cmd(c, 4, "only-learner"));

	/* It never stands for election, even cut off for long. */
	c_isolate(c, 4, true);
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_not(c_node(c, 4)->campaigned);
	cr_assert_eq(c_term(c, 4), c_term(c, l));
	c_free(c);
}

/* A candidate asks no learner for its vote, and a learner's grant does not
 * count towards the quorum. */
Test(member, learner_grant_does_not_count_in_an_election)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	baton_node_id f = c_follower(c, l, 4);
	baton_node_id g = c_follower(c, l, f);
	cr_assert(g != 4 && g != l);
	baton_term t = c_term(c, l);
	c_isolate(c, l, true);

	/* Make f stand at once (as a transfer would). */
	struct baton_msg m = c_msg(BATON_MSG_TIMEOUT_NOW, t, l, f);
	struct c_sum s;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(s.role, BATON_CANDIDATE);
	cr_assert_eq(s.term, t + 1);
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE, g), 1);
	cr_assert_eq(c_sum_count(&s, true, BATON_MSG_VOTE, 4), 0,
		     "no vote request to a learner");
	c_drop(c, 0, 0, 0);

	m = c_msg(BATON_MSG_VOTE_RESULT, t + 1, 4, f);
	m.u.vote_result.granted = true;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(c_role(c, f), BATON_CANDIDATE,
		     "self + a learner is not a quorum of 3 voters");

	m.from = g;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	cr_assert_eq(c_role(c, f), BATON_LEADER, "self + g is");
	c_free(c);
}

Test(member, learner_acks_confirm_no_read_and_no_leadership)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	baton_node_id f = c_follower(c, l, 4);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	cr_assert_eq(c_read(c, l, 21, NULL), 0);
	c_deliver_all(c); /* the learner answers the round */
	cr_assert_null(c_read_result(c, l, 21),
		       "a learner's answer confirmed a read");
	/* Check-quorum counts voters only: the leader steps down. */
	c_run(c, 3 * C_ELECTION_MS);
	cr_assert_neq(c_role(c, l), BATON_LEADER);
	const struct baton_read_result *r = c_read_result(c, l, 21);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, BATON_ELEADERCHANGED);
	c_free(c);
}

Test(member, promoted_learner_becomes_a_voter_that_counts)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	cr_assert_eq(c_last(c, 4), c_last(c, l), "caught up");
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, 4), 0);
	c_run(c, 500);
	for (baton_node_id id = 1; id <= 4; id++) {
		const struct baton_member *m = c_member_of(c, id, 4);
		cr_assert_not_null(m);
		cr_assert_eq(m->role, BATON_VOTER, "on node %llu",
			     (unsigned long long)id);
		cr_assert_eq(c_voter_count(c, id), 4);
	}
	/* Four voters: a quorum is three. With one old follower cut off,
	 * the leader, the other follower and 4 commit: 4 counts. */
	baton_node_id f = c_follower(c, l, 4);
	c_isolate(c, f, true);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "with-4", &idx), 0);
	c_run(c, 500);
	cr_assert_eq(c_commit(c, l), idx);
	/* With 4 cut off too, two of four voters are not a quorum. */
	c_isolate(c, 4, true);
	cr_assert_eq(c_propose(c, l, "without-4", &idx), 0);
	c_run(c, 500);
	cr_assert_lt(c_commit(c, l), idx);
	c_free(c);
}

static void two_rounds(struct baton_raft_options *o)
{
	o->promotion_rounds = 2;
}

Test(member, promotion_of_a_learner_that_lags_fails)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(two_rounds, &l);
	c_isolate(c, 4, true);
	cr_assert_eq(c_propose_n(c, l, "lag", 5, NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, 4), 0);
	c_run(c, 2 * C_ELECTION_MS + 200);
	cr_assert_eq(c_node(c, l)->promotion_failed, 4);
	cr_assert_eq(c_member_of(c, l, 4)->role, BATON_LEARNER);
	cr_assert_eq(c_voter_count(c, l), 3);
	c_free(c);
}

Test(member, remove_a_follower)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	baton_term t = c_term(c, l);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, f), 0);
	cr_assert_null(c_member_of(c, l, f));
	c_run(c, 300);
	cr_assert_eq(c_status(c, l).config.n, 2);
	cr_assert_null(c_member_of(c, g, f));
	cr_assert_eq(c_commit(c, l), 3, "the removal committed");

	/* The leader no longer replicates to f; l and g commit alone. */
	c->sent_to[f] = 0;
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "two", &idx), 0);
	c_run(c, 300);
	cr_assert_eq(c_commit(c, l), idx);
	cr_assert(c_applied_cmd(c, g, "two"));
	cr_assert_eq(c->sent_to[f], 0, "nothing is sent to a removed node");

	/* The removed node does not disturb the cluster. */
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_eq(c_leader(c), l);
	cr_assert_eq(c_term(c, l), t);
	c_free(c);
}

Test(member, removed_leader_steps_down_and_the_rest_elect)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_term t = c_term(c, l);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, l), 0);
	cr_assert_null(c_member_of(c, l, l));
	cr_assert_eq(c_role(c, l), BATON_LEADER, "until the change commits");
	baton_index cfg = c_status(c, l).config_index;
	cr_assert_eq(cfg, 3);
	c_deliver_all(c);
	struct baton_raft_status s = c_status(c, l);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_geq(s.commit_index, cfg);

	baton_node_id n = c_tick_until_leader(c, 20000);
	cr_assert_neq(n, l);
	cr_assert_gt(c_term(c, n), t);
	struct baton_raft_status ns = c_status(c, n);
	cr_assert_eq(ns.config.n, 2);
	cr_assert_null(baton_config_find(&ns.config, l));
	cr_assert_eq(c_propose(c, n, "after", NULL), 0);
	c_run(c, 300);
	cr_assert(c_applied_cmd(c, c_follower(c, n, l), "after"));

	/* The old leader, no longer a voter, never stands again. */
	c_node(c, l)->campaigned = false;
	c_run(c, 10 * C_ELECTION_MS);
	cr_assert_not(c_node(c, l)->campaigned);
	cr_assert_eq(c_leader(c), n);
	c_free(c);
}

/* A configuration takes effect when appended, so a truncated
 * configuration entry must give the previous configuration back. */
Test(member, truncated_config_entry_is_undone)
{
	baton_node_id a;
	struct cluster *c = c_three(NULL, &a);
	c_add_node(c, 4, NULL);
	cr_assert_eq(c_member(c, a, BATON_EVENT_ADD_LEARNER, 4), 0);
	c_isolate(c, a, true); /* the entry never leaves a */
	struct baton_raft_status s = c_status(c, a);
	cr_assert_eq(s.config_index, 3);
	cr_assert_eq(s.config.n, 4);

	baton_node_id b = c_tick_until_leader(c, 20000);
	cr_assert_neq(b, a);
	c_run(c, 300);
	c_isolate(c, a, false);
	c_run(c, 1000);
	s = c_status(c, a);
	cr_assert_eq(s.leader_id, b);
	cr_assert_eq(c_node(c, a)->min_truncate_from, 3);
	cr_assert_eq(baton_raft_entry(c_raft(c, a), 3)->type, BATON_ENTRY_NOOP);
	cr_assert_eq(s.config_index, 1, "back to the bootstrap config");
	cr_assert_eq(s.config.n, 3);
	cr_assert_null(baton_config_find(&s.config, 4));
	c_free(c);
}

Test(member, one_change_at_a_time)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	c_add_node(c, 4, NULL);
	c_add_node(c, 5, NULL);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_member(c, f, BATON_EVENT_ADD_LEARNER, 4),
		     BATON_ENOTLEADER);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), 0);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 5), BATON_EBUSY);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, f), BATON_EBUSY);
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, 4), BATON_EBUSY);
	cr_assert_null(c_member_of(c, l, 5), "a refused change is not made");
	c_run(c, 300);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), BATON_EEXISTS);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 0), BATON_EINVAL);
	cr_assert_eq(c_member(c, l, BATON_EVENT_REMOVE, 7), BATON_ENOTFOUND);
	cr_assert_eq(c_member(c, l, BATON_EVENT_PROMOTE, f), BATON_EINVAL,
		     "already a voter");
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 5), 0,
		     "the first change committed");
	c_free(c);
}

Test(member, no_change_before_the_leaders_noop_commits)
{
	struct cluster *c = c_new(1, NULL);
	c_add_node(c, 2, NULL);
	c_set_manual(c, 1, true);
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 1, NULL), 0);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	cr_assert_eq(c_member(c, 1, BATON_EVENT_ADD_LEARNER, 2), BATON_EBUSY);
	c_persist(c, 1);
	cr_assert_eq(c_member(c, 1, BATON_EVENT_ADD_LEARNER, 2), 0);
	c_free(c);
}

/* ======================================================================== */
/* Read index.                                                              */

Test(readidx, leader_releases_a_read_only_after_a_quorum_round)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);

	/* A heartbeat round sent before the read: its answers prove
	 * nothing about the read. */
	c_advance(c, C_HEARTBEAT_MS);
	cr_assert_eq(c_tick_node(c, l, NULL), 0);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, f), 1);

	struct c_sum s;
	cr_assert_eq(c_read(c, l, 7, &s), 0);
	cr_assert_eq(s.n_reads, 0, "not before a quorum confirms");
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_APPEND, f), 1,
		     "the read starts a heartbeat round");
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_APPEND, g), 1);

	/* The old round's answer from f: still nothing. */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	cr_assert_null(c_read_result(c, l, 7),
		       "an answer to an earlier round released the read");
	/* The new round reaches f; its answer is not back yet. */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND, l, f));
	cr_assert_null(c_read_result(c, l, 7));
	/* f's answer makes a quorum with the leader (g never answered). */
	cr_assert(c_deliver_match(c, BATON_MSG_APPEND_RESULT, f, l));
	const struct baton_read_result *r = c_read_result(c, l, 7);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, 0);
	cr_assert_eq(r->read_index, c_commit(c, l));
	cr_assert_eq(r->read_index, 2);
	cr_assert_eq(c_node(c, l)->n_reads, 1);
	c_free(c);
}

Test(readidx, read_index_covers_the_latest_commit)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_index idx;
	cr_assert_eq(c_propose(c, l, "w", &idx), 0);
	c_deliver_all(c);
	cr_assert_eq(c_commit(c, l), idx);
	cr_assert_eq(c_read(c, l, 1, NULL), 0);
	c_deliver_all(c);
	const struct baton_read_result *r = c_read_result(c, l, 1);
	cr_assert_not_null(r);
	cr_assert_eq(r->read_index, idx);
	c_free(c);
}

Test(readidx, follower_read_goes_through_the_leader)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	struct c_sum s;
	cr_assert_eq(c_read(c, f, 9, &s), 0);
	cr_assert_eq(s.n_reads, 0);
	const struct baton_msg *m =
		c_sum_find(&s, false, BATON_MSG_READ_INDEX, l);
	cr_assert_not_null(m);
	cr_assert_eq(m->u.read_index.request_id, 9);
	c_deliver_all(c);
	cr_assert_eq(c->delivered[BATON_MSG_READ_INDEX_RESULT], 1);
	const struct baton_read_result *r = c_read_result(c, f, 9);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, 0);
	cr_assert_eq(r->read_index, c_commit(c, l));
	cr_assert_null(c_read_result(c, l, 9),
		       "the leader answered by message, not locally");
	c_free(c);
}

Test(readidx, read_index_request_to_a_follower_is_refused)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	struct baton_msg m = c_msg(BATON_MSG_READ_INDEX, c_term(c, l), g, f);
	m.u.read_index.request_id = 5;
	struct c_sum s;
	cr_assert_eq(c_receive(c, f, &m, &s), 0);
	const struct baton_msg *res =
		c_sum_find(&s, false, BATON_MSG_READ_INDEX_RESULT, g);
	cr_assert_not_null(res);
	cr_assert_eq(res->u.read_index_result.request_id, 5);
	cr_assert_eq(res->u.read_index_result.status, BATON_ENOTLEADER);
	c_free(c);
}

Test(readidx, read_without_a_leader_fails)
{
	struct cluster *c = c_new(3, NULL);
	cr_assert_eq(c_read(c, 1, 1, NULL), BATON_ENOLEADER);
	/* A pre-candidate knows no leader either. */
	c_advance(c, 2 * C_ELECTION_MS);
	cr_assert_eq(c_tick_node(c, 2, NULL), 0);
	cr_assert_eq(c_role(c, 2), BATON_PRE_CANDIDATE);
	cr_assert_eq(c_read(c, 2, 2, NULL), BATON_ENOLEADER);
	cr_assert_eq(c_node(c, 2)->n_reads, 0);
	c_free(c);
}

Test(readidx, pending_reads_fail_when_the_leader_steps_down)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, f, true);
	c_isolate(c, g, true);
	cr_assert_eq(c_read(c, l, 11, NULL), 0);
	c_run(c, 3 * C_ELECTION_MS); /* check-quorum: steps down */
	cr_assert_neq(c_role(c, l), BATON_LEADER);
	const struct baton_read_result *r = c_read_result(c, l, 11);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, BATON_ELEADERCHANGED);
	c_free(c);
}

Test(readidx, forwarded_read_fails_when_the_leader_steps_down)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	baton_term t = c_term(c, l);
	cr_assert_eq(c_read(c, f, 12, NULL), 0);
	cr_assert(c_deliver_match(c, BATON_MSG_READ_INDEX, f, l));
	c_drop(c, BATON_MSG_APPEND, l, 0); /* its round is lost */
	/* News of a higher term makes the leader step down. */
	struct baton_msg m = c_msg(BATON_MSG_APPEND_RESULT, t + 1, g, l);
	cr_assert_eq(c_receive(c, l, &m, NULL), 0);
	cr_assert_eq(c_role(c, l), BATON_FOLLOWER);
	cr_assert_eq(c_count(c, BATON_MSG_READ_INDEX_RESULT, l, f), 1);
	c_deliver_all(c);
	const struct baton_read_result *r = c_read_result(c, f, 12);
	cr_assert_not_null(r);
	cr_assert_eq(r->status, BATON_ELEADERCHANGED);
	c_free(c);
}

Test(readidx, single_voter_answers_at_once)
{
	struct cluster *c = c_new(1, NULL);
	c_run(c, 3 * C_ELECTION_MS);
	cr_assert_eq(c_role(c, 1), BATON_LEADER);
	struct c_sum s;
	cr_assert_eq(c_read(c, 1, 5, &s), 0);
	cr_assert_eq(s.n_reads, 1);
	cr_assert_eq(s.reads[0].request_id, 5);
	cr_assert_eq(s.reads[0].status, 0);
	cr_assert_eq(s.reads[0].read_index, 2);
	c_free(c);
}

/* ======================================================================== */
/* Leadership transfer.                                                     */

Test(xfer, target_becomes_leader)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id x = c_follower(c, l, 0);
	baton_term t = c_term(c, l);
	struct c_sum s;
	cr_assert_eq(c_transfer(c, l, x, &s), 0);
	cr_assert_eq(c_status(c, l).transfer_target, x);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_TIMEOUT_NOW, x), 1,
		     "the target is up to date: TimeoutNow at once");
	c_deliver_all(c);
	cr_assert_eq(c->delivered[BATON_MSG_TIMEOUT_NOW], 1);
	cr_assert_eq(c_role(c, x), BATON_LEADER);
	cr_assert_eq(c_term(c, x), t + 1, "a real election, no pre-vote");
	cr_assert_neq(c_role(c, l), BATON_LEADER);
	c_run(c, 300);
	cr_assert_eq(c_leader(c), x);
	cr_assert_eq(c_status(c, l).leader_id, x);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	cr_assert_eq(c_count_leaders(c), 1);
	c_free(c);
}

Test(xfer, lagging_target_is_caught_up_first)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id x = c_follower(c, l, 0);
	c_isolate(c, x, true);
	cr_assert_eq(c_propose_n(c, l, "lag", 4, NULL), 0);
	c_run(c, 300);
	cr_assert_lt(c_last(c, x), c_last(c, l));
	struct c_sum s;
	cr_assert_eq(c_transfer(c, l, x, &s), 0);
	cr_assert_eq(c_sum_count(&s, false, BATON_MSG_TIMEOUT_NOW, x), 0,
		     "not before the target has the whole log");
	c_isolate(c, x, false);
	c_run(c, 500);
	cr_assert_eq(c_leader(c), x);
	cr_assert(c_applied_cmd(c, x, "lag-3"));
	c_free(c);
}

Test(xfer, proposals_and_changes_wait_during_a_transfer)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id x = c_follower(c, l, 0);
	c_add_node(c, 4, NULL);
	cr_assert_eq(c_transfer(c, l, x, NULL), 0);
	cr_assert_eq(c_propose(c, l, "during", NULL), BATON_EBUSY);
	cr_assert_eq(c_transfer(c, l, x, NULL), BATON_EBUSY);
	cr_assert_eq(c_member(c, l, BATON_EVENT_ADD_LEARNER, 4), BATON_EBUSY);
	cr_assert_eq(c_count(c, BATON_MSG_APPEND, l, 0), 0,
		     "nothing was appended");

	/* The TimeoutNow is lost: the transfer is abandoned after an
	 * election timeout and the leader takes proposals again. */
	cr_assert_eq(c_drop(c, BATON_MSG_TIMEOUT_NOW, l, x), 1);
	c_run(c, C_ELECTION_MS + 100);
	cr_assert_eq(c_role(c, l), BATON_LEADER);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	cr_assert_eq(c_propose(c, l, "after", NULL), 0);
	c_free(c);
}

Test(xfer, bad_targets)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	cr_assert_eq(c_transfer(c, f, l, NULL), BATON_ENOTLEADER);
	cr_assert_eq(c_transfer(c, l, l, NULL), BATON_EINVAL);
	cr_assert_eq(c_transfer(c, l, 7, NULL), BATON_ENOTFOUND);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	c_free(c);
}

Test(xfer, learner_is_not_a_transfer_target)
{
	baton_node_id l;
	struct cluster *c = c_with_learner(NULL, &l);
	cr_assert_eq(c_transfer(c, l, 4, NULL), BATON_EINVAL);
	cr_assert_eq(c_status(c, l).transfer_target, 0);
	cr_assert_eq(c_propose(c, l, "still-leader", NULL), 0);
	c_free(c);
}

Test(xfer, target_zero_picks_the_most_up_to_date_voter)
{
	baton_node_id l;
	struct cluster *c = c_three(NULL, &l);
	baton_node_id f = c_follower(c, l, 0);
	baton_node_id g = c_follower(c, l, f);
	c_isolate(c, g, true);
	cr_assert_eq(c_propose(c, l, "only-f", NULL), 0);
	c_run(c, 300);
	cr_assert_eq(c_transfer(c, l, 0, NULL), 0);
	cr_assert_eq(c_status(c, l).transfer_target, f);
	c_deliver_all(c);
	cr_assert_eq(c_role(c, f), BATON_LEADER);
	c_free(c);
}
