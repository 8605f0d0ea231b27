/* The scenario cluster: messages, persistence, what the cores do, life
 * cycle (scenario.h says what it does). */
#include "scenario.h"

void *c_alloc(size_t n)
{
	void *p = calloc(1, n > 0 ? n : 1);
	cr_assert_not_null(p, "out of memory");
	return p;
}

struct c_node *c_node(struct cluster *c, baton_node_id id)
{
	cr_assert(id >= 1 && id <= C_MAX && c->n[id].p != NULL, "no node %llu",
		  (unsigned long long)id);
	return &c->n[id];
}

const struct baton_raft *c_raft(struct cluster *c, baton_node_id id)
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

static bool c_link_up(struct cluster *c, const struct baton_msg *m)
{
	return m->to >= 1 && m->to <= C_MAX && c->n[m->to].p != NULL &&
	       !c->n[m->to].isolated && m->from >= 1 && m->from <= C_MAX &&
	       !c->n[m->from].isolated;
}

/* The pipeline sends: queue a copy, unless the link is cut. */
static void env_send(void *data, const struct baton_msg *m)
{
	struct cluster *c = ((struct c_node *)data)->c;
	if (!c_link_up(c, m))
		return;
	if (!c->info &&
	    (m->type == BATON_MSG_INFO || m->type == BATON_MSG_INFO_RESULT))
		return;
	if (c->q_n == c->q_cap) {
		c->q_cap = c->q_cap == 0 ? 64 : c->q_cap * 2;
		c->q = realloc(c->q, c->q_cap * sizeof *c->q);
		cr_assert_not_null(c->q);
	}
	fx_msg_copy(&c->q[c->q_n++], m);
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
			fx_msg_release(&c->q[i]);
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
			fx_msg_release(&c->q[i]);
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

/* ---- what the cores do (the pipeline's observer) ------------------------- */

/* The test's id of the read the pipeline sent as `group` (0: not ours). */
static uint64_t read_id_of(const struct c_node *nd, uint64_t group)
{
	for (uint32_t i = 0; i < nd->n_read_map; i++)
		if (nd->read_group[i] == group)
			return nd->read_id[i];
	return 0;
}

static struct baton_msg header_of(const struct baton_msg *m)
{
	struct baton_msg x = *m;
	if (x.type == BATON_MSG_APPEND)
		x.u.append.entries = NULL;
	else if (x.type == BATON_MSG_SNAPSHOT)
		x.u.snapshot.chunk = NULL;
	return x;
}

static void c_summarize(const struct c_node *nd, int rv,
			const struct baton_update *u, struct c_sum *s)
{
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
		s->msgs[i] = header_of(&u->msgs[i]);
		/* A read sent to the leader carries the pipeline's id of it:
		 * show the test's. */
		if (s->msgs[i].type == BATON_MSG_READ_INDEX)
			s->msgs[i].u.read_index.request_id = read_id_of(
				nd, s->msgs[i].u.read_index.request_id);
	}
	for (uint32_t i = 0; i < u->n_msgs_after_persist && i < C_SUM_MSGS; i++)
		s->msgs_after[i] = header_of(&u->msgs_after_persist[i]);
	s->n_apply = u->n_apply;
	s->n_reads = u->n_reads;
	for (uint32_t i = 0; i < u->n_reads && i < C_SUM_MSGS; i++) {
		s->reads[i] = u->reads[i];
		s->reads[i].request_id = read_id_of(nd, u->reads[i].request_id);
	}
	s->promotion_failed = u->promotion_failed;
}

static void count_sent(struct cluster *c, baton_node_id id,
		       const struct baton_msg *m)
{
	cr_assert_eq(m->from, id, "a core signs its messages");
	if (m->type < 16)
		c->sent[m->type]++;
	if (m->to <= C_MAX)
		c->sent_to[m->to]++;
}

static void record_applied(struct c_node *nd, const struct baton_update *u)
{
	if (u->snapshot != NULL)
		nd->last_applied = u->snapshot->index;
	for (uint32_t i = 0; i < u->n_apply; i++) {
		const struct baton_entry *e = &u->apply[i];
		cr_assert_eq(e->index, nd->last_applied + 1,
			     "node %llu applies %llu after %llu",
			     (unsigned long long)nd->id,
			     (unsigned long long)e->index,
			     (unsigned long long)nd->last_applied);
		cr_assert_leq(e->index, u->commit_index,
			      "node %llu applies %llu beyond commit %llu",
			      (unsigned long long)nd->id,
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
}

static void record_reads(struct c_node *nd, const struct baton_update *u)
{
	for (uint32_t i = 0; i < u->n_reads; i++) {
		uint64_t id = read_id_of(nd, u->reads[i].request_id);
		if (id == 0)
			continue;
		if (nd->n_reads == nd->cap_reads) {
			nd->cap_reads = nd->cap_reads ? nd->cap_reads * 2 : 16;
			nd->reads = realloc(nd->reads,
					    nd->cap_reads * sizeof *nd->reads);
			cr_assert_not_null(nd->reads);
		}
		nd->reads[nd->n_reads] = u->reads[i];
		nd->reads[nd->n_reads++].request_id = id;
	}
}

/* Every step of every core. */
static void env_observe(void *data, const struct baton_event *ev, int rv,
			const struct baton_update *u)
{
	struct c_node *nd = data;
	struct cluster *c = nd->c;
	bool wanted =
		c->want_node == nd->id && c->want_type == ev->type && !c->got;
	if (wanted) {
		c->got = true;
		c->got_rv = rv;
		if (ev->type == BATON_EVENT_PROPOSE)
			c->got_first_index = ev->u.propose.first_index_out;
		if (ev->type == BATON_EVENT_READ && rv == 0) {
			cr_assert_gt(nd->n_read_map, 0);
			nd->read_group[nd->n_read_map - 1] =
				ev->u.read.request_id;
		}
		if (c->want_sum != NULL)
			c_summarize(nd, rv, u, c->want_sum);
	}
	if (u->role == BATON_PRE_CANDIDATE || u->role == BATON_CANDIDATE)
		nd->campaigned = true;
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
	for (uint32_t i = 0; i < u->n_msgs; i++)
		count_sent(c, nd->id, &u->msgs[i]);
	for (uint32_t i = 0; i < u->n_msgs_after_persist; i++)
		count_sent(c, nd->id, &u->msgs_after_persist[i]);
	record_applied(nd, u);
	record_reads(nd, u);
	if (u->promotion_failed != 0)
		nd->promotion_failed = u->promotion_failed;
}

static uint64_t env_now(void *data)
{
	return ((struct c_node *)data)->c->now;
}

/* End of a turn for node id: flush, and hand the disk's completions back
 * until there are none (a manual disk has none until c_persist). */
static void settle(struct cluster *c, baton_node_id id)
{
	struct c_node *nd = c_node(c, id);
	fx_settle(nd->p, &nd->disk);
}

/* ---- feeding events ------------------------------------------------------ */

static void on_proposed(void *data, int status, const uint8_t *reply,
			size_t len)
{
	struct cluster *c = data;
	(void)reply;
	(void)len;
	if (status != 0 && c->want_type == BATON_EVENT_PROPOSE &&
	    c->proposal_error == 0)
		c->proposal_error = status;
}

static void on_done(void *data, int status)
{
	(void)data;
	(void)status;
}

/* Give the pipeline what makes it step the core with ev. Returns a
 * refusal of the pipeline's own (the core never saw the event), or 0. */
static int feed(struct cluster *c, struct c_node *nd, struct baton_event *ev)
{
	bool handled;
	switch (ev->type) {
	case BATON_EVENT_PROPOSE: {
		cr_assert_gt(ev->u.propose.n, 0,
			     "the pipeline never sends "
			     "an empty batch");
		int rv = 0;
		c->proposal_error = 0;
		for (uint32_t i = 0; i < ev->u.propose.n && rv == 0; i++)
			rv = baton_pipeline_propose(
				nd->p, ev->u.propose.bufs[i].base,
				ev->u.propose.bufs[i].len, on_proposed, c);
		return rv;
	}
	case BATON_EVENT_READ:
		cr_assert_lt(nd->n_read_map, C_READS_MAX);
		nd->read_id[nd->n_read_map] = ev->u.read.request_id;
		nd->read_group[nd->n_read_map++] = 0;
		return baton_pipeline_read(nd->p, on_done, NULL);
	default: {
		int rv = fx_feed_request(nd->p, ev, &handled);
		cr_assert(handled,
			  "event %u is the pipeline's own, not a test's",
			  ev->type);
		return rv;
	}
	}
}

/* Feed ev to node id through its pipeline, let it settle, and return what
 * the core answered (sum: the update of that step), or the pipeline's
 * refusal when the core never saw it (sum: zeros but rv). */
int c_step(struct cluster *c, baton_node_id id, struct baton_event *ev,
	   struct c_sum *sum)
{
	struct c_node *nd = c_node(c, id);
	cr_assert_eq(c->want_node, 0, "c_step is not re-entered");
	c->want_node = id;
	c->want_type = ev->type;
	c->want_sum = sum;
	c->got = false;
	int refused = feed(c, nd, ev);
	if (refused == 0)
		settle(c, id);
	if (refused == 0 && ev->type == BATON_EVENT_PROPOSE)
		refused = c->proposal_error;
	int rv = c->got ? c->got_rv : refused;
	if (!c->got && sum != NULL) {
		memset(sum, 0, sizeof *sum);
		sum->rv = rv;
	}
	if (ev->type == BATON_EVENT_PROPOSE && rv == 0)
		ev->u.propose.first_index_out = c->got_first_index;
	if (ev->type == BATON_EVENT_READ && rv != 0)
		nd->n_read_map--; /* never taken by the core */
	c->want_node = 0;
	c->want_type = 0;
	c->want_sum = NULL;
	return rv;
}

/* Remove the i-th queued message and deliver it. */
static void c_deliver_at(struct cluster *c, uint32_t i)
{
	struct fx_msg x = c->q[i];
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
	fx_msg_release(&x);
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

/* Complete only the oldest pending write of node id. */
void c_persist_one(struct cluster *c, baton_node_id id)
{
	cr_assert(fx_disk_complete_next(&c_node(c, id)->disk),
		  "no write of node %llu is pending", (unsigned long long)id);
	settle(c, id);
}

/* Complete every pending write of node id, in order. */
void c_persist(struct cluster *c, baton_node_id id)
{
	while (fx_disk_complete_next(&c_node(c, id)->disk))
		settle(c, id);
	settle(c, id);
}

void c_set_manual(struct cluster *c, baton_node_id id, bool manual)
{
	fx_disk_hold(&c_node(c, id)->disk, manual);
	settle(c, id);
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

/* Start node id's pipeline; with founders 1..n_founders it bootstraps. */
static void c_start(struct cluster *c, baton_node_id id, c_tweak_fn tweak,
		    uint32_t n_founders)
{
	cr_assert(id >= 1 && id <= C_MAX && c->n[id].p == NULL);
	struct c_node *nd = &c->n[id];
	nd->c = c;
	nd->id = id;
	fx_machine_init(&nd->machine);
	if (c->snapshot_bytes > 8)
		nd->machine.snapshot_pad = c->snapshot_bytes - 8;
	struct baton_pipeline_config pc;
	memset(&pc, 0, sizeof pc);
	c_options(&pc.raft, id);
	if (tweak != NULL)
		tweak(&pc.raft);
	pc.storage = fx_disk_open(&nd->disk, id);
	pc.machine = &nd->machine.base;
	pc.snapshot_entries = c->snapshot_entries;
	pc.n_founders = n_founders;
	for (uint32_t i = 0; i < n_founders; i++)
		pc.founders[i] = i + 1;
	struct baton_pipeline_env env = {.data = nd,
					 .now_ms = env_now,
					 .send = env_send,
					 .observe = env_observe};
	char err[256] = "";
	cr_assert_eq(baton_pipeline_create(&pc, &env, &nd->p, err, sizeof err),
		     0, "node %llu: %s", (unsigned long long)id, err);
	nd->r = baton_pipeline_raft(nd->p);
}

/* Create node id, empty (not bootstrapped). */
void c_add_node(struct cluster *c, baton_node_id id, c_tweak_fn tweak)
{
	c_start(c, id, tweak, 0);
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

struct cluster *c_new_snapshots(uint32_t n, c_tweak_fn tweak, uint64_t every,
				size_t bytes)
{
	struct cluster *c = c_alloc(sizeof *c);
	c->snapshot_entries = every;
	c->snapshot_bytes = bytes;
	for (baton_node_id id = 1; id <= n; id++) {
		c_start(c, id, tweak, n);
		cr_assert_eq(c_tick_node(c, id, NULL), 0);
	}
	return c;
}

/* Nodes 1..n, voters, bootstrapped with the same configuration; the first
 * update of each (persisting the configuration entry) is processed. */
struct cluster *c_new(uint32_t n, c_tweak_fn tweak)
{
	return c_new_snapshots(n, tweak, 0, 0);
}

void c_free(struct cluster *c)
{
	for (uint32_t i = 0; i < c->q_n; i++)
		fx_msg_release(&c->q[i]);
	free(c->q);
	for (baton_node_id id = 1; id <= C_MAX; id++) {
		struct c_node *nd = &c->n[id];
		if (nd->p == NULL)
			continue;
		baton_pipeline_destroy(nd->p);
		fx_disk_free(&nd->disk);
		for (uint32_t i = 0; i < nd->n_applied; i++)
			free(nd->applied[i].buf);
		free(nd->applied);
		free(nd->reads);
		free(nd->snap_data);
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
