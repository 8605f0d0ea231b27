/* The unit tests' cluster over the node pipeline (harness.h). */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define H_TICK_MS 10u

static struct h_node *node_of(struct harness *h, baton_node_id id)
{
	cr_assert(id >= 1 && id <= H_MAX && h->node[id].p != NULL,
		  "node %llu does not run", (unsigned long long)id);
	return &h->node[id];
}

/* ---- what the pipeline asks of the world --------------------------------- */

static uint64_t env_now(void *data)
{
	const struct h_node *n = data;
	return n->h->now_ms;
}

static uint64_t env_wall(void *data)
{
	const struct h_node *n = data;
	return (uint64_t)((int64_t)(H_EPOCH_MS + n->h->now_ms) +
			  n->h->clock_skew_ms[n->id]);
}

static void env_send(void *data, const struct baton_msg *m)
{
	struct harness *h = ((struct h_node *)data)->h;
	if (!h->info &&
	    (m->type == BATON_MSG_INFO || m->type == BATON_MSG_INFO_RESULT))
		return;
	if (h->q_n == h->q_cap) {
		h->q_cap = h->q_cap ? h->q_cap * 2 : 64;
		h->q = realloc(h->q, h->q_cap * sizeof *h->q);
		cr_assert_not_null(h->q);
	}
	fx_msg_copy(&h->q[h->q_n++], m);
}

/* A message without what it points to. */
static struct baton_msg header_of(const struct baton_msg *m)
{
	struct baton_msg x = *m;
	if (x.type == BATON_MSG_APPEND)
		x.u.append.entries = NULL;
	else if (x.type == BATON_MSG_SNAPSHOT)
		x.u.snapshot.chunk = NULL;
	return x;
}

/* Keep the scalars of the update and copies of its message headers. */
static void keep_last(struct harness *h, baton_node_id id,
		      const struct baton_update *u)
{
	struct baton_update *l = &h->last[id];
	*l = *u;
	if (u->snapshot != NULL) {
		h->last_snapshot[id] = *u->snapshot;
		l->snapshot = &h->last_snapshot[id];
	}
	l->snapshot_data = NULL;
	l->entries = NULL;
	l->apply = NULL;
	l->reads = NULL;
	for (uint32_t i = 0; i < u->n_msgs && i < H_LAST_MSGS; i++)
		h->last_msgs[id][i] = header_of(&u->msgs[i]);
	for (uint32_t i = 0; i < u->n_msgs_after_persist && i < H_LAST_MSGS;
	     i++)
		h->last_msgs_after[id][i] =
			header_of(&u->msgs_after_persist[i]);
	l->msgs = h->last_msgs[id];
	l->msgs_after_persist = h->last_msgs_after[id];
}

/* Every step of every core: what the tests look at afterwards. */
static void env_observe(void *data, const struct baton_event *ev, int rv,
			const struct baton_update *u)
{
	struct h_node *n = data;
	struct harness *h = n->h;
	if (ev->type != BATON_EVENT_PERSISTED &&
	    ev->type != BATON_EVENT_APPLY_STOPPED)
		keep_last(h, n->id, u);
	if (u->snapshot != NULL)
		h->snapshot_installed[n->id] = u->snapshot->index;
	if (h->want_node == n->id && h->want_type == ev->type && !h->got) {
		h->got = true;
		h->got_rv = rv;
		if (ev->type == BATON_EVENT_PROPOSE)
			h->got_first_index = ev->u.propose.first_index_out;
		if (ev->type == BATON_EVENT_READ && h->n_asked > 0 && rv == 0)
			h->reads[h->n_asked - 1].group = ev->u.read.request_id;
	}
	for (uint32_t i = 0; i < u->n_reads; i++)
		for (uint32_t k = 0; k < h->n_asked; k++)
			if (h->reads[k].node == n->id &&
			    h->reads[k].group == u->reads[i].request_id &&
			    u->reads[i].status == 0)
				h->reads[k].index = u->reads[i].read_index;
}

/* End of a turn for node id: flush, and hand the disk's completions back
 * until there are none (a held disk has none until h_persist). */
static void settle(struct harness *h, baton_node_id id)
{
	struct h_node *n = node_of(h, id);
	fx_settle(n->p, &n->disk);
	struct baton_pipeline_status s;
	baton_pipeline_status(n->p, &s);
	h->applied[id] = s.applied;
	h->applied_commands[id] = n->machine.commands;
}

/* ---- life cycle ---------------------------------------------------------- */

static void start(struct harness *h, baton_node_id id, uint32_t n_founders)
{
	struct h_node *n = &h->node[id];
	struct baton_pipeline_config c;
	memset(&c, 0, sizeof c);
	c.raft = h->o[id];
	c.storage = fx_disk_open(&n->disk, id);
	c.machine = &n->machine.base;
	c.snapshot_entries = h->snapshot_entries;
	c.max_clock_offset_ms = h->max_clock_offset_ms;
	c.n_founders = n_founders;
	for (uint32_t i = 0; i < n_founders; i++)
		c.founders[i] = i + 1;
	struct baton_pipeline_env env = {.data = n,
					 .now_ms = env_now,
					 .send = env_send,
					 .observe = env_observe};
	if (h->max_clock_offset_ms > 0)
		env.wall_ms = env_wall;
	char err[256] = "";
	cr_assert_eq(baton_pipeline_create(&c, &env, &n->p, err, sizeof err), 0,
		     "node %llu: %s", (unsigned long long)id, err);
	h->r[id] = baton_pipeline_raft(n->p);
	/* A first tick, as a driver's loop starts: it persists what the
	 * start made (a bootstrap's configuration entry and term). */
	baton_pipeline_tick(n->p);
	settle(h, id);
}

static void make(struct harness *h, baton_node_id id,
		 void (*tweak)(struct baton_raft_options *o))
{
	struct h_node *n = &h->node[id];
	n->h = h;
	n->id = id;
	fx_machine_init(&n->machine);
	/* 8 bytes of count and 12 of padding: snapshots of 20 bytes. */
	n->machine.snapshot_pad = 12;
	baton_raft_options_default(&h->o[id]);
	h->o[id].id = id;
	h->o[id].random_seed = 1000 + id;
	h->o[id].election_timeout_ms = 100;
	h->o[id].heartbeat_interval_ms = 20;
	if (tweak != NULL)
		tweak(&h->o[id]);
}

void h_init_snapshots(struct harness *h, uint32_t n,
		      void (*tweak)(struct baton_raft_options *o),
		      uint64_t every)
{
	cr_assert(n >= 1 && n <= H_MAX);
	memset(h, 0, sizeof *h);
	h->n = n;
	h->snapshot_entries = every;
	for (uint32_t i = 1; i <= n; i++) {
		make(h, i, tweak);
		start(h, i, n);
	}
}

void h_init(struct harness *h, uint32_t n,
	    void (*tweak)(struct baton_raft_options *o))
{
	h_init_snapshots(h, n, tweak, 0);
}

void h_init_clocks(struct harness *h, uint32_t n, uint32_t max_offset_ms)
{
	cr_assert(n >= 1 && n <= H_MAX && max_offset_ms > 0);
	memset(h, 0, sizeof *h);
	h->n = n;
	h->max_clock_offset_ms = max_offset_ms;
	for (uint32_t i = 1; i <= n; i++) {
		make(h, i, NULL);
		start(h, i, n);
	}
}

void h_add_empty(struct harness *h, baton_node_id id)
{
	cr_assert(id <= H_MAX && h->node[id].p == NULL);
	make(h, id, NULL);
	start(h, id, 0);
	if (id > h->n)
		h->n = (uint32_t)id;
}

static void stop(struct harness *h, baton_node_id id)
{
	struct h_node *n = node_of(h, id);
	baton_pipeline_destroy(n->p);
	n->p = NULL;
	h->r[id] = NULL;
}

void h_restart(struct harness *h, baton_node_id id, bool power_loss)
{
	stop(h, id);
	struct h_node *n = &h->node[id];
	if (power_loss)
		fx_disk_crash(&n->disk);
	else
		fx_disk_close(&n->disk);
	/* The machine starts empty, as in a new process: what it holds
	 * comes back from the snapshot and the log. The test's knobs stay. */
	struct fx_machine knobs = n->machine;
	fx_machine_init(&n->machine);
	n->machine.snapshot_pad = knobs.snapshot_pad;
	n->machine.refuse_from = knobs.refuse_from;
	n->machine.refuse_restore = knobs.refuse_restore;
	start(h, id, 0);
}

void h_free(struct harness *h)
{
	for (uint32_t i = 0; i < h->q_n; i++)
		fx_msg_release(&h->q[i]);
	free(h->q);
	for (baton_node_id id = 1; id <= H_MAX; id++) {
		if (h->node[id].p != NULL)
			stop(h, id);
		if (h->node[id].h != NULL)
			fx_disk_free(&h->node[id].disk);
	}
}

/* ---- the disk ------------------------------------------------------------ */

void h_hold_disk(struct harness *h, baton_node_id id, bool held)
{
	fx_disk_hold(&node_of(h, id)->disk, held);
	settle(h, id);
}

bool h_persist(struct harness *h, baton_node_id id)
{
	bool done = fx_disk_complete_next(&node_of(h, id)->disk);
	settle(h, id);
	return done;
}

/* ---- inputs -------------------------------------------------------------- */

/* A proposal's completion; the first failure while h_step settles is
 * what a proposal the core never took answers. */
static void on_proposed(void *data, int status, const uint8_t *reply,
			size_t len)
{
	struct harness *h = data;
	(void)reply;
	(void)len;
	if (status != 0 && h->want_type == BATON_EVENT_PROPOSE &&
	    h->proposal_error == 0)
		h->proposal_error = status;
}

static void on_read(void *data, int status)
{
	struct h_read *r = data;
	r->status = status;
	r->done = true;
}

/* What the core answered to the event h_step fed (or the refusal of the
 * pipeline that kept it from the core). */
static int answer(struct harness *h, int refused)
{
	int rv = h->got ? h->got_rv : refused;
	h->want_node = 0;
	h->want_type = 0;
	return rv;
}

/* Reads completed since the last look join the answered list. */
static void collect_reads(struct harness *h)
{
	for (uint32_t k = 0; k < h->n_asked; k++) {
		struct h_read *r = &h->reads[k];
		if (!r->done || r->group == UINT64_MAX)
			continue;
		cr_assert_lt(h->n_reads, H_READS_MAX);
		h->reads_id[h->n_reads] = r->id;
		h->reads_index[h->n_reads] = r->index;
		h->reads_status[h->n_reads] = r->status;
		h->n_reads++;
		r->group = UINT64_MAX; /* counted */
	}
}

static int step_read(struct harness *h, struct h_node *n, uint64_t id)
{
	cr_assert_lt(h->n_asked, H_READS_MAX);
	struct h_read *r = &h->reads[h->n_asked++];
	memset(r, 0, sizeof *r);
	r->node = n->id;
	r->id = id;
	int rv = baton_pipeline_read(n->p, on_read, r);
	if (rv != 0) {
		h->n_asked--;
		return answer(h, rv);
	}
	settle(h, n->id);
	rv = answer(h, r->done ? r->status : 0);
	/* Refused by the core: the pipeline failed it (done), or keeps it
	 * to ask again (leadership moving) and answers later. */
	if (rv != 0 && r->done)
		h->reads[--h->n_asked].done = false;
	collect_reads(h);
	return rv;
}

int h_step(struct harness *h, baton_node_id id, struct baton_event *ev)
{
	struct h_node *n = node_of(h, id);
	h->want_node = id;
	h->want_type = ev->type;
	h->got = false;
	int refused = 0, rv = 0;
	bool handled;
	switch (ev->type) {
	case BATON_EVENT_PROPOSE:
		h->proposal_error = 0;
		for (uint32_t i = 0; i < ev->u.propose.n && refused == 0; i++)
			refused = baton_pipeline_propose(
				n->p, ev->u.propose.bufs[i].base,
				ev->u.propose.bufs[i].len, on_proposed, h);
		break;
	case BATON_EVENT_READ:
		rv = step_read(h, n, ev->u.read.request_id);
		collect_reads(h);
		return rv;
	default:
		refused = fx_feed_request(n->p, ev, &handled);
		cr_assert(handled,
			  "event %u is the pipeline's own, not a test's",
			  ev->type);
	}
	settle(h, id);
	if (refused == 0 && ev->type == BATON_EVENT_PROPOSE)
		refused = h->proposal_error;
	rv = answer(h, refused);
	if (ev->type == BATON_EVENT_PROPOSE && rv == 0)
		ev->u.propose.first_index_out = h->got_first_index;
	collect_reads(h);
	return rv;
}

void h_deliver_all(struct harness *h)
{
	for (int rounds = 0; h->q_n > 0; rounds++) {
		cr_assert_lt(rounds, 100000, "message storm");
		struct fx_msg x = h->q[0];
		memmove(h->q, h->q + 1, (h->q_n - 1) * sizeof *h->q);
		h->q_n--;
		baton_node_id to = x.m.to, from = x.m.from;
		if (to >= 1 && to <= H_MAX && h->node[to].p != NULL &&
		    !h->down[to] && !h->down[from]) {
			if (x.m.type < 16) {
				h->delivered[x.m.type]++;
				h->delivered_to[to][x.m.type]++;
			}
			baton_pipeline_receive(h->node[to].p, &x.m);
			settle(h, to);
		}
		fx_msg_release(&x);
	}
	collect_reads(h);
}

void h_run(struct harness *h, uint64_t ms)
{
	for (uint64_t t = 0; t < ms; t += H_TICK_MS) {
		h->now_ms += H_TICK_MS;
		for (baton_node_id i = 1; i <= h->n; i++) {
			if (h->node[i].p == NULL || h->down[i])
				continue;
			baton_pipeline_tick(h->node[i].p);
			settle(h, i);
		}
		h_deliver_all(h);
	}
}

/* ---- looking ------------------------------------------------------------- */

baton_node_id h_leader(struct harness *h)
{
	baton_node_id leader = 0;
	baton_term best = 0;
	for (baton_node_id i = 1; i <= h->n; i++) {
		if (h->node[i].p == NULL || h->down[i])
			continue;
		struct baton_raft_status s = h_status(h, i);
		if (s.role == BATON_LEADER && s.term >= best) {
			leader = i;
			best = s.term;
		}
	}
	return leader;
}

baton_node_id h_elect(struct harness *h)
{
	for (int i = 0; i < 1000; i++) {
		baton_node_id l = h_leader(h);
		if (l != 0)
			return l;
		h_run(h, H_TICK_MS);
	}
	cr_assert_fail("no leader after 10 s");
	return 0;
}

int h_propose(struct harness *h, baton_node_id id, const char *cmd)
{
	struct baton_buffer b = {cmd, strlen(cmd)};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 1;
	ev.u.propose.bufs = &b;
	return h_step(h, id, &ev);
}

struct baton_raft_status h_status(struct harness *h, baton_node_id id)
{
	struct baton_raft_status s;
	baton_raft_status(baton_pipeline_raft(node_of(h, id)->p), &s);
	return s;
}

uint32_t h_count(struct harness *h, uint32_t type, baton_node_id from,
		 baton_node_id to)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < h->q_n; i++)
		n += h->q[i].m.type == type &&
		     (from == 0 || h->q[i].m.from == from) &&
		     (to == 0 || h->q[i].m.to == to);
	return n;
}

struct baton_raft *h_lone_leader(void (*tweak)(struct baton_raft_options *o),
				 uint64_t *now_ms)
{
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	o.id = 1;
	if (tweak != NULL)
		tweak(&o);
	struct baton_raft *r;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	struct baton_config c = {.n = 1};
	c.members[0] = (struct baton_member){1, BATON_VOTER};
	cr_assert_eq(baton_raft_bootstrap(r, &c), 0);
	for (uint64_t t = 0; t < 100000; t += H_TICK_MS) {
		struct baton_event ev = {.type = BATON_EVENT_TICK};
		struct baton_update u;
		cr_assert_eq(baton_raft_step(r, t, &ev, &u), 0);
		if (u.persist_needed) {
			ev.type = BATON_EVENT_PERSISTED;
			ev.u.persisted.index = u.persist_index;
			ev.u.persisted.term = u.persist_term;
			cr_assert_eq(baton_raft_step(r, t, &ev, &u), 0);
		}
		struct baton_raft_status s;
		baton_raft_status(r, &s);
		if (s.role == BATON_LEADER && s.commit_index == s.last_index) {
			*now_ms = t;
			return r;
		}
	}
	cr_assert_fail("a single voter never led");
	return NULL;
}
