/* The scenario driver: messages, persistence, the update, life cycle
 * (scenario.h says what it does). */
#include "scenario.h"

static void c_process(struct cluster *c, baton_node_id id,
		      const struct baton_update *u, struct c_sum *sum);

void *c_alloc(size_t n)
{
	void *p = calloc(1, n > 0 ? n : 1);
	cr_assert_not_null(p, "out of memory");
	return p;
}

struct c_node *c_node(struct cluster *c, baton_node_id id)
{
	cr_assert(id >= 1 && id <= C_MAX && c->n[id].r != NULL, "no node %llu",
		  (unsigned long long)id);
	return &c->n[id];
}

struct baton_raft *c_raft(struct cluster *c, baton_node_id id)
{
	return c_node(c, id)->r;
}

struct baton_raft_status c_status(struct cluster *c, baton_node_id id)
{
	struct baton_raft_status s;
	baton_raft_status(c_raft(c, id), &s);
	return s;
}

uint32_t c_role(struct cluster *c, baton_node_id id)
{
	return c_status(c, id).role;
}

baton_term c_term(struct cluster *c, baton_node_id id)
{
	return c_status(c, id).term;
}

baton_index c_commit(struct cluster *c, baton_node_id id)
{
	return c_status(c, id).commit_index;
}

baton_index c_last(struct cluster *c, baton_node_id id)
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

bool c_match(const struct baton_msg *m, uint32_t type, baton_node_id from,
	     baton_node_id to)
{
	return (type == 0 || m->type == type) &&
	       (from == 0 || m->from == from) && (to == 0 || m->to == to);
}

/* Queued messages matching (0: any). */
uint32_t c_count(struct cluster *c, uint32_t type, baton_node_id from,
		 baton_node_id to)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->q_n; i++)
		n += c_match(&c->q[i].m, type, from, to);
	return n;
}

/* The k-th queued message matching, or NULL. */
const struct baton_msg *c_find(struct cluster *c, uint32_t type,
			       baton_node_id from, baton_node_id to, uint32_t k)
{
	for (uint32_t i = 0; i < c->q_n; i++)
		if (c_match(&c->q[i].m, type, from, to) && k-- == 0)
			return &c->q[i].m;
	return NULL;
}

uint32_t c_drop(struct cluster *c, uint32_t type, baton_node_id from,
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
bool c_drop_first(struct cluster *c, uint32_t type, baton_node_id from,
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

uint32_t c_drop_to(struct cluster *c, baton_node_id to)
{
	return c_drop(c, 0, 0, to);
}

int c_step(struct cluster *c, baton_node_id id, struct baton_event *ev,
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
bool c_deliver_match(struct cluster *c, uint32_t type, baton_node_id from,
		     baton_node_id to)
{
	for (uint32_t i = 0; i < c->q_n; i++) {
		if (c_match(&c->q[i].m, type, from, to)) {
			c_deliver_at(c, i);
			return true;
		}
	}
	return false;
}

bool c_deliver_one(struct cluster *c)
{
	return c_deliver_match(c, 0, 0, 0);
}

/* Deliver until the queue is empty (what is delivered may send more). */
uint32_t c_deliver_all(struct cluster *c)
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
void c_persist_one(struct cluster *c, baton_node_id id)
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
void c_persist(struct cluster *c, baton_node_id id)
{
	while (c_node(c, id)->n_pend > 0)
		c_persist_one(c, id);
}

void c_set_manual(struct cluster *c, baton_node_id id, bool manual)
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
void c_add_node(struct cluster *c, baton_node_id id, c_tweak_fn tweak)
{
	cr_assert(id >= 1 && id <= C_MAX && c->n[id].r == NULL);
	struct baton_raft_options o;
	c_options(&o, id);
	if (tweak != NULL)
		tweak(&o);
	cr_assert_eq(baton_raft_create(&o, &c->n[id].r), 0);
}

void c_voters(struct baton_config *cfg, uint32_t n)
{
	memset(cfg, 0, sizeof *cfg);
	for (uint32_t i = 1; i <= n; i++)
		cfg->members[cfg->n++] = (struct baton_member){i, BATON_VOTER};
}

int c_tick_node(struct cluster *c, baton_node_id id, struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_TICK};
	return c_step(c, id, &ev, sum);
}

/* Nodes 1..n, voters, bootstrapped with the same configuration; the first
 * update of each (persisting the configuration entry) is processed. */
struct cluster *c_new(uint32_t n, c_tweak_fn tweak)
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

void c_free(struct cluster *c)
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

void c_isolate(struct cluster *c, baton_node_id id, bool isolated)
{
	c_node(c, id)->isolated = isolated;
	if (isolated) {
		c_drop(c, 0, id, 0);
		c_drop(c, 0, 0, id);
	}
}
