#include "harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void push(struct harness *h, const struct baton_msg *m)
{
	if (h->q_n == h->q_cap) {
		h->q_cap = h->q_cap ? h->q_cap * 2 : 64;
		h->q = realloc(h->q, h->q_cap * sizeof *h->q);
		cr_assert_not_null(h->q);
	}
	struct h_msg *x = &h->q[h->q_n++];
	memset(x, 0, sizeof *x);
	x->m = *m;
	if (m->type == BATON_MSG_APPEND && m->u.append.n_entries > 0) {
		uint32_t n = m->u.append.n_entries;
		x->entries = calloc(n, sizeof *x->entries);
		for (uint32_t i = 0; i < n; i++) {
			x->entries[i] = m->u.append.entries[i];
			x->entries[i].buf = malloc(x->entries[i].len + 1u);
			memcpy(x->entries[i].buf, m->u.append.entries[i].buf,
			       x->entries[i].len);
		}
		x->m.u.append.entries = x->entries;
	}
	if (m->type == BATON_MSG_SNAPSHOT) {
		x->chunk = malloc(m->u.snapshot.chunk_len + 1u);
		memcpy(x->chunk, m->u.snapshot.chunk, m->u.snapshot.chunk_len);
		x->m.u.snapshot.chunk = x->chunk;
	}
}

static void release(struct h_msg *x)
{
	if (x->entries != NULL) {
		for (uint32_t i = 0; i < x->m.u.append.n_entries; i++)
			free(x->entries[i].buf);
		free(x->entries);
	}
	free(x->chunk);
}

int h_step(struct harness *h, baton_node_id id, struct baton_event *ev)
{
	struct baton_update u;
	int rv = baton_raft_step(h->r[id], h->now_ms, ev, &u);
	h->last[id] = u;
	h->last_msgs[id] = u.n_msgs;
	h->last_msgs_after[id] = u.n_msgs_after_persist;
	h->last_hs_changed[id] = u.hard_state_changed;
	for (uint32_t i = 0; i < u.n_msgs; i++)
		push(h, &u.msgs[i]);
	/* The disk is instant: held messages leave right after. */
	for (uint32_t i = 0; i < u.n_msgs_after_persist; i++)
		push(h, &u.msgs_after_persist[i]);
	if (u.snapshot != NULL) {
		h->snapshot_installed[id] = u.snapshot->index;
		h->applied[id] = u.snapshot->index;
	}
	for (uint32_t i = 0; i < u.n_apply; i++) {
		cr_assert_eq(u.apply[i].index, h->applied[id] + 1,
			     "node %llu applies out of order",
			     (unsigned long long)id);
		h->applied[id] = u.apply[i].index;
		if (u.apply[i].type == BATON_ENTRY_COMMAND)
			h->applied_commands[id]++;
	}
	for (uint32_t i = 0; i < u.n_reads && h->n_reads < 64; i++) {
		h->reads_id[h->n_reads] = u.reads[i].request_id;
		h->reads_index[h->n_reads] = u.reads[i].read_index;
		h->reads_status[h->n_reads] = u.reads[i].status;
		h->n_reads++;
	}
	if (u.persist_needed) {
		struct baton_event p = {.type = BATON_EVENT_PERSISTED};
		p.u.persisted.index = u.persist_index;
		p.u.persisted.term = u.persist_term;
		int prv = h_step(h, id, &p);
		cr_assert_eq(prv, 0);
		/* Keep what the caller's step produced visible (scalars
		 * only: its pointers died with the next step). */
		h->last[id] = u;
		h->last_msgs[id] = u.n_msgs;
		h->last_msgs_after[id] = u.n_msgs_after_persist;
		h->last_hs_changed[id] = u.hard_state_changed;
	}
	return rv;
}

static void make(struct harness *h, baton_node_id id,
		 void (*tweak)(struct baton_raft_options *o))
{
	baton_raft_options_default(&h->o[id]);
	h->o[id].id = id;
	h->o[id].random_seed = 1000 + id;
	h->o[id].election_timeout_ms = 100;
	h->o[id].heartbeat_interval_ms = 20;
	if (tweak != NULL)
		tweak(&h->o[id]);
	cr_assert_eq(baton_raft_create(&h->o[id], &h->r[id]), 0);
}

void h_init(struct harness *h, uint32_t n,
	    void (*tweak)(struct baton_raft_options *o))
{
	memset(h, 0, sizeof *h);
	h->n = n;
	struct baton_config c = {0};
	for (uint32_t i = 1; i <= n; i++) {
		c.members[c.n].id = i;
		c.members[c.n].role = BATON_VOTER;
		c.n++;
	}
	for (uint32_t i = 1; i <= n; i++) {
		make(h, i, tweak);
		cr_assert_eq(baton_raft_bootstrap(h->r[i], &c), 0);
		h_step(h, i, &(struct baton_event){.type = BATON_EVENT_TICK});
	}
}

void h_add_empty(struct harness *h, baton_node_id id)
{
	cr_assert(id <= H_MAX && h->r[id] == NULL);
	make(h, id, NULL);
	if (id > h->n)
		h->n = (uint32_t)id;
}

void h_free(struct harness *h)
{
	for (uint32_t i = 0; i < h->q_n; i++)
		release(&h->q[i]);
	free(h->q);
	for (uint32_t i = 1; i <= H_MAX; i++)
		baton_raft_destroy(h->r[i]);
}

void h_deliver_all(struct harness *h)
{
	for (int rounds = 0; h->q_n > 0; rounds++) {
		cr_assert_lt(rounds, 100000, "message storm");
		struct h_msg x = h->q[0];
		memmove(h->q, h->q + 1, (h->q_n - 1) * sizeof *h->q);
		h->q_n--;
		baton_node_id to = x.m.to, from = x.m.from;
		if (to <= H_MAX && h->r[to] != NULL && !h->down[to] &&
		    !h->down[from]) {
			struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
			ev.u.receive.msg = &x.m;
			if (x.m.type < 16)
				h->delivered[x.m.type]++;
			h_step(h, to, &ev);
		}
		release(&x);
	}
}

void h_run(struct harness *h, uint64_t ms)
{
	for (uint64_t t = 0; t < ms; t += 10) {
		h->now_ms += 10;
		for (uint32_t i = 1; i <= h->n; i++)
			if (h->r[i] != NULL && !h->down[i])
				h_step(h, i,
				       &(struct baton_event){
					       .type = BATON_EVENT_TICK});
		h_deliver_all(h);
	}
}

baton_node_id h_leader(struct harness *h)
{
	baton_node_id leader = 0;
	baton_term best = 0;
	for (uint32_t i = 1; i <= h->n; i++) {
		if (h->r[i] == NULL || h->down[i])
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
		h_run(h, 10);
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
	baton_raft_status(h->r[id], &s);
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
