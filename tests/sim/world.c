/*
 * The simulated world: one event queue ordered by (time, sequence), the
 * nodes, the network, the nemesis that injects faults, and the clients.
 * Each node is driven exactly as the header of include/baton/raft.h asks of
 * a driver, and its simulated disk (sim_disk.c) through the storage
 * interface of include/baton/storage.h, as the server drives its files; the
 * world only decides, from the seed, when each write completes.
 */
#include "world.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- randomness ---------------------------------------------------------- */

uint64_t sim_rand(struct sim_rng *g)
{
	uint64_t z = (g->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t sim_range(struct sim_rng *g, uint64_t lo, uint64_t hi)
{
	return hi <= lo ? lo : lo + sim_rand(g) % (hi - lo + 1);
}

bool sim_chance(struct sim_rng *g, uint32_t per_mille)
{
	return sim_rand(g) % 1000 < per_mille;
}

uint64_t sim_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	h ^= 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

void *sim_xmalloc(size_t n)
{
	void *p = malloc(n > 0 ? n : 1);
	if (p == NULL) {
		fprintf(stderr, "baton-sim: out of memory\n");
		abort();
	}
	return p;
}

void *sim_xdup(const void *src, size_t n)
{
	void *p = sim_xmalloc(n);
	if (n > 0)
		memcpy(p, src, n);
	return p;
}

/* ---- parameters ---------------------------------------------------------- */

void sim_params_default(struct sim_params *p)
{
	*p = (struct sim_params){
		.n_nodes = 3,
		.election_timeout_ms = 200,
		.heartbeat_ms = 40,
		.tick_ms = 10,
		.net_min_ms = 1,
		.net_max_ms = 15,
		.loss_per_mille = 20,
		.dup_per_mille = 10,
		.reorder_per_mille = 20,
		.disk_min_ms = 1,
		.disk_max_ms = 5,
		.nemesis_every_ms = 1500,
		.downtime_max_ms = 2000,
		.partition_max_ms = 3000,
		.client_every_ms = 15,
		.read_every_ms = 60,
		.member_every_ms = 4000,
		.transfer_every_ms = 6000,
		.snapshot_every = 200,
		.trailing = 50,
		.chunk_bytes = 64,
		.inflight = 8,
		.batch = 64,
		.max_uncommitted = 256,
		.blip_after_vote_per_mille = 50,
		.crash_on_commit_per_mille = 1,
		.crash_after_propose_per_mille = 1,
		.crash_on_election_per_mille = 20,
		.crash_on_first_commit_per_mille = 50,
		.disk_slowest_factor = 4,
		.safety_ms = 60000,
		.liveness_ms = 60000,
	};
}

/* Swarm testing: every rate from the seed, so some runs are calm and some
 * are storms, and different bugs surface under different mixes. */
void sim_params_swarm(struct sim_params *p, struct sim_rng *g)
{
	/* Small clusters see the subtle interleavings most often. */
	static const uint32_t sizes[] = {3, 3, 3, 3, 3, 5, 5, 5, 7, 7};
	static const uint32_t inflights[] = {1, 2, 4, 16};
	static const uint32_t batches[] = {1, 4, 64};
	sim_params_default(p);
	p->n_nodes = sizes[sim_rand(g) % 10];
	p->election_timeout_ms = (uint32_t)sim_range(g, 100, 300);
	p->heartbeat_ms = p->election_timeout_ms / (uint32_t)sim_range(g, 3, 8);
	p->net_min_ms = (uint32_t)sim_range(g, 0, 5);
	p->net_max_ms = p->net_min_ms + (uint32_t)sim_range(g, 1, 60);
	p->loss_per_mille = (uint32_t)sim_range(g, 0, 200);
	p->dup_per_mille = (uint32_t)sim_range(g, 0, 100);
	p->reorder_per_mille = (uint32_t)sim_range(g, 0, 200);
	p->disk_min_ms = (uint32_t)sim_range(g, 0, 3);
	p->disk_max_ms = p->disk_min_ms + (uint32_t)sim_range(g, 0, 30);
	p->nemesis_every_ms = (uint32_t)sim_range(g, 250, 3000);
	p->downtime_max_ms = (uint32_t)sim_range(g, 10, 4000);
	p->partition_max_ms = (uint32_t)sim_range(g, 100, 6000);
	p->client_every_ms = (uint32_t)sim_range(g, 4, 25);
	p->read_every_ms = (uint32_t)sim_range(g, 10, 200);
	p->member_every_ms =
		sim_chance(g, 700) ? (uint32_t)sim_range(g, 500, 6000) : 0;
	p->transfer_every_ms = (uint32_t)sim_range(g, 1000, 10000);
	p->snapshot_every = (uint32_t)sim_range(g, 10, 500);
	p->trailing = (uint32_t)sim_range(g, 0, 100);
	p->chunk_bytes = (uint32_t)sim_range(g, 8, 200);
	p->inflight = inflights[sim_rand(g) % 4];
	p->batch = batches[sim_rand(g) % 3];
	if (p->batch == 1)
		p->inflight = 16; /* one entry per round trip cannot keep up */
	p->max_uncommitted = (uint32_t)sim_range(g, 128, 1024);
	p->blip_after_vote_per_mille = (uint32_t)sim_range(g, 0, 500);
	p->crash_on_commit_per_mille = (uint32_t)sim_range(g, 0, 20);
	p->crash_after_propose_per_mille = (uint32_t)sim_range(g, 0, 10);
	p->crash_on_election_per_mille = (uint32_t)sim_range(g, 0, 200);
	p->crash_on_first_commit_per_mille = (uint32_t)sim_range(g, 0, 500);
	p->disk_slowest_factor = (uint32_t)sim_range(g, 1, 8);
}

/* ---- output -------------------------------------------------------------- */

void sim_trace(struct sim_world *w, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	w->trace_hash = sim_hash_bytes(w->trace_hash, line, strlen(line));
	if (w->verbose)
		printf("%8llu.%03llu  %s\n",
		       (unsigned long long)(w->now_ms / 1000),
		       (unsigned long long)(w->now_ms % 1000), line);
}

void sim_fail(struct sim_world *w, const char *fmt, ...)
{
	if (w->failed)
		return; /* the first violation is the one that matters */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->failure, sizeof w->failure, fmt, ap);
	va_end(ap);
	w->failed = true;
	w->done = true;
}

/* ---- the event queue: a binary heap on (time, sequence) ----------------- */

enum sim_event_kind {
	EV_TICK = 1,
	EV_DELIVER,
	EV_DISK,
	EV_RESTART,
	EV_NEMESIS,
	EV_HEAL,
	EV_CLIENT,
	EV_READ,
	EV_MEMBER,
	EV_TRANSFER,
	EV_SNAPSHOT,
	EV_PHASE,
	EV_LIVENESS,
	EV_CRASH,
};

static const char *const kind_names[] = {
	"?",	    "tick",	"deliver", "disk",     "restart",
	"nemesis",  "heal",	"client",  "read",     "member",
	"transfer", "snapshot", "phase",   "liveness", "crash",
};

struct sim_event {
	uint64_t at;
	uint64_t seq;
	uint32_t kind;
	uint32_t node;
	uint64_t incarnation;
	struct sim_packet *packet;
};

static bool before(const struct sim_event *a, const struct sim_event *b)
{
	return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

static void push_event(struct sim_world *w, const struct sim_event *ev);

static void schedule(struct sim_world *w, uint64_t delay, uint32_t kind,
		     uint32_t node, struct sim_packet *packet)
{
	struct sim_event e = {
		.at = w->now_ms + delay,
		.seq = w->seq++,
		.kind = kind,
		.node = node,
		.incarnation = node ? w->nodes[node].incarnation : 0,
		.packet = packet,
	};
	push_event(w, &e);
}

static void push_event(struct sim_world *w, const struct sim_event *ev)
{
	if (w->heap_n == w->heap_cap) {
		w->heap_cap = w->heap_cap ? w->heap_cap * 2 : 1024;
		w->heap = realloc(w->heap, w->heap_cap * sizeof *w->heap);
		if (w->heap == NULL)
			abort();
	}
	struct sim_event e = *ev;
	uint32_t i = w->heap_n++;
	while (i > 0 && before(&e, &w->heap[(i - 1) / 2])) {
		w->heap[i] = w->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->heap[i] = e;
}

static struct sim_event pop(struct sim_world *w)
{
	struct sim_event top = w->heap[0];
	struct sim_event last = w->heap[--w->heap_n];
	uint32_t i = 0;
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= w->heap_n)
			break;
		if (c + 1 < w->heap_n && before(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!before(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (w->heap_n > 0)
		w->heap[i] = last;
	return top;
}

/* ---- deep copies -------------------------------------------------------- */

void sim_copy_entries(struct baton_entry *dst, const struct baton_entry *src,
		      uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		dst[i] = src[i];
		dst[i].buf = sim_xdup(src[i].buf, src[i].len);
	}
}

void sim_free_entries(struct baton_entry *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(e[i].buf);
	free(e);
}

static struct sim_packet *packet_copy(const struct baton_msg *m)
{
	struct sim_packet *p = sim_xmalloc(sizeof *p);
	memset(p, 0, sizeof *p);
	p->m = *m;
	if (m->type == BATON_MSG_APPEND && m->u.append.n_entries > 0) {
		uint32_t n = m->u.append.n_entries;
		p->entries = sim_xmalloc(n * sizeof *p->entries);
		sim_copy_entries(p->entries, m->u.append.entries, n);
		p->m.u.append.entries = p->entries;
	}
	if (m->type == BATON_MSG_SNAPSHOT) {
		p->chunk =
			sim_xdup(m->u.snapshot.chunk, m->u.snapshot.chunk_len);
		p->m.u.snapshot.chunk = p->chunk;
	}
	return p;
}

static void packet_free(struct sim_packet *p)
{
	if (p == NULL)
		return;
	if (p->entries != NULL)
		sim_free_entries(p->entries, p->m.u.append.n_entries);
	free(p->chunk);
	free(p);
}

/* ---- the network ----------------------------------------------------------
 */

static void trace_msg(struct sim_world *w, const struct baton_msg *m)
{
	static const char *const names[] = {
		"?",
		"vote",
		"vote-result",
		"append",
		"append-result",
		"snapshot",
		"snapshot-result",
		"timeout-now",
		"read-index",
		"read-index-result",
	};
	const char *name = m->type < 10 ? names[m->type] : "?";
	unsigned long long a = 0, b = 0, c = 0;
	switch (m->type) {
	case BATON_MSG_VOTE:
		a = m->u.vote.last_log_index;
		b = m->u.vote.last_log_term;
		c = m->u.vote.pre_vote;
		break;
	case BATON_MSG_VOTE_RESULT:
		a = m->u.vote_result.granted;
		c = m->u.vote_result.pre_vote;
		break;
	case BATON_MSG_APPEND:
		a = m->u.append.prev_index;
		b = m->u.append.n_entries;
		c = m->u.append.leader_commit;
		break;
	case BATON_MSG_APPEND_RESULT:
		a = m->u.append_result.success;
		b = m->u.append_result.index;
		c = m->u.append_result.hint_index;
		break;
	case BATON_MSG_SNAPSHOT:
		a = m->u.snapshot.meta.index;
		b = m->u.snapshot.offset;
		c = m->u.snapshot.chunk_len;
		break;
	case BATON_MSG_SNAPSHOT_RESULT:
		a = m->u.snapshot_result.index;
		b = m->u.snapshot_result.next_offset;
		c = m->u.snapshot_result.done;
		break;
	default:
		break;
	}
	sim_trace(w, "  %llu -> %llu %s term %llu (%llu %llu %llu)",
		  (unsigned long long)m->from, (unsigned long long)m->to, name,
		  (unsigned long long)m->term, a, b, c);
}

static void net_send(struct sim_world *w, struct sim_packet *p)
{
	if (w->verbose)
		trace_msg(w, &p->m);
	if (p->m.type == BATON_MSG_VOTE_RESULT && p->m.u.vote_result.granted &&
	    !p->m.u.vote_result.pre_vote && !w->liveness &&
	    sim_chance(&w->rng, w->p.blip_after_vote_per_mille))
		schedule(w, 0, EV_CRASH, (uint32_t)p->m.from, NULL);
	uint32_t from = (uint32_t)p->m.from, to = (uint32_t)p->m.to;
	w->stats.msgs_sent++;
	if (to == 0 || to > w->n_ids || w->blocked[from][to] ||
	    w->in_flight >= SIM_MAX_IN_FLIGHT ||
	    sim_chance(&w->rng, w->p.loss_per_mille)) {
		w->stats.msgs_lost++;
		packet_free(p);
		return;
	}
	if (sim_chance(&w->rng, w->p.dup_per_mille)) {
		w->in_flight++;
		schedule(w,
			 sim_range(&w->rng, w->p.net_min_ms, w->p.net_max_ms),
			 EV_DELIVER, 0, packet_copy(&p->m));
	}
	/* A link keeps order (as a TCP stream does) unless this message is
	 * one the seed chose to reorder. */
	uint64_t at = w->now_ms +
		      sim_range(&w->rng, w->p.net_min_ms, w->p.net_max_ms);
	if (!sim_chance(&w->rng, w->p.reorder_per_mille)) {
		if (at < w->link_last_ms[from][to])
			at = w->link_last_ms[from][to];
		w->link_last_ms[from][to] = at;
	}
	w->in_flight++;
	schedule(w, at - w->now_ms, EV_DELIVER, 0, p);
}

/* ---- the state machine --------------------------------------------------- */

/* Snapshot bytes: index, hash, command count, then padding derived from
 * the hash, so snapshots span several chunks and corruption shows. */
#define SM_SNAP_HEAD 24u

static size_t sm_snapshot(const struct sim_machine *sm, uint8_t *buf,
			  size_t pad)
{
	memcpy(buf, &sm->applied, 8);
	memcpy(buf + 8, &sm->hash, 8);
	memcpy(buf + 16, &sm->commands, 8);
	for (size_t i = 0; i < pad; i++)
		buf[SM_SNAP_HEAD + i] = (uint8_t)(sm->hash >> (8 * (i % 8)));
	return SM_SNAP_HEAD + pad;
}

static bool sm_restore(struct sim_machine *sm, const uint8_t *buf, size_t len)
{
	if (len < SM_SNAP_HEAD)
		return false;
	memcpy(&sm->applied, buf, 8);
	memcpy(&sm->hash, buf + 8, 8);
	memcpy(&sm->commands, buf + 16, 8);
	for (size_t i = SM_SNAP_HEAD; i < len; i++)
		if (buf[i] !=
		    (uint8_t)(sm->hash >> (8 * ((i - SM_SNAP_HEAD) % 8))))
			return false;
	return true;
}

static void sm_apply(struct sim_machine *sm, const struct baton_entry *e)
{
	sm->applied = e->index;
	if (e->type != BATON_ENTRY_COMMAND)
		return;
	sm->hash = sim_hash_bytes(sm->hash ^ e->index, e->buf, e->len);
	sm->commands++;
}

/* ---- driving one node ------------------------------------------------------
 */

static const char *role_name(uint32_t role)
{
	switch (role) {
	case BATON_FOLLOWER:
		return "follower";
	case BATON_PRE_CANDIDATE:
		return "pre-candidate";
	case BATON_CANDIDATE:
		return "candidate";
	case BATON_LEADER:
		return "leader";
	default:
		return "?";
	}
}

static int step(struct sim_world *w, struct sim_node *n,
		struct baton_event *ev);

static void serve_reads(struct sim_world *w, struct sim_node *n,
			const struct baton_update *u)
{
	for (uint32_t i = 0; i < u->n_reads; i++) {
		const struct baton_read_result *res = &u->reads[i];
		for (uint32_t k = 0; k < w->n_reads; k++) {
			struct sim_read *rd = &w->reads[k];
			if (rd->id != res->request_id)
				continue;
			if (res->status != 0) {
				w->stats.reads_failed++;
			} else if (res->read_index < rd->must_see) {
				sim_fail(w,
					 "linearizable read: node %llu read at "
					 "index %llu, but index %llu was "
					 "applied "
					 "before the read began",
					 (unsigned long long)n->id,
					 (unsigned long long)res->read_index,
					 (unsigned long long)rd->must_see);
			} else {
				w->stats.reads_ok++;
			}
			w->reads[k] = w->reads[--w->n_reads];
			break;
		}
	}
}

static void apply_update(struct sim_world *w, struct sim_node *n,
			 const struct baton_update *u)
{
	if (u->snapshot != NULL) {
		struct sim_machine sm;
		if (!sm_restore(&sm, u->snapshot_data, u->snapshot_len) ||
		    sm.applied != u->snapshot->index) {
			sim_fail(w, "node %llu: received a corrupt snapshot",
				 (unsigned long long)n->id);
			return;
		}
		sim_check_snapshot(w, n, sm.applied, sm.hash);
		n->sm = sm;
		w->stats.snapshots_installed++;
		sim_trace(w, "node %llu installs snapshot at %llu",
			  (unsigned long long)n->id,
			  (unsigned long long)sm.applied);
	}
	for (uint32_t i = 0; i < u->n_apply; i++) {
		const struct baton_entry *e = &u->apply[i];
		if (e->index != n->sm.applied + 1) {
			sim_fail(w, "node %llu applied %llu after %llu",
				 (unsigned long long)n->id,
				 (unsigned long long)e->index,
				 (unsigned long long)n->sm.applied);
			return;
		}
		sm_apply(&n->sm, e);
		sim_check_apply(w, n, e);
	}
	if (u->n_apply > 0 && w->p.snapshot_every > 0 &&
	    n->sm.applied % w->p.snapshot_every < u->n_apply)
		schedule(w, 0, EV_SNAPSHOT, (uint32_t)n->id, NULL);
}

/* ---- a node's storage: submissions and what waits for them -------------- */

/* An update whose persistence was submitted to the node's storage. */
struct sim_pending {
	uint64_t seq;
	bool report; /* step BATON_EVENT_PERSISTED once durable */
	baton_index persist_index;
	baton_term persist_term;
	struct sim_packet **held; /* msgs_after_persist */
	uint32_t n_held;
	struct sim_pending *next;
};

static void hold(struct sim_pending *pd, struct sim_packet *p)
{
	pd->held = realloc(pd->held, (pd->n_held + 1) * sizeof *pd->held);
	if (pd->held == NULL)
		abort();
	pd->held[pd->n_held++] = p;
}

static void pending_free(struct sim_pending *pd)
{
	for (uint32_t i = 0; i < pd->n_held; i++)
		packet_free(pd->held[i]);
	free(pd->held);
	free(pd);
}

/* Submit the update's persistence, if it has any, and schedule its
 * completion: FIFO, a write completes no earlier than the one before it. */
static struct sim_pending *submit(struct sim_world *w, struct sim_node *n,
				  const struct baton_update *u)
{
	struct sim_pending *pd = sim_xmalloc(sizeof *pd);
	memset(pd, 0, sizeof *pd);
	int rv = n->storage->ops->submit(n->storage, u, &pd->seq);
	if (rv != 0) {
		sim_fail(w, "node %llu: submit failed: %s (%s)",
			 (unsigned long long)n->id, baton_strerror(rv),
			 n->storage->ops->errmsg(n->storage));
		free(pd);
		return NULL;
	}
	pd->report = u->persist_needed;
	pd->persist_index = u->persist_index;
	pd->persist_term = u->persist_term;
	if (n->pending_tail != NULL)
		n->pending_tail->next = pd;
	else
		n->pending = pd;
	n->pending_tail = pd;
	uint64_t done = w->now_ms +
			n->disk_factor * sim_range(&w->rng, w->p.disk_min_ms,
						   w->p.disk_max_ms);
	if (done < n->last_write_done_ms)
		done = n->last_write_done_ms;
	n->last_write_done_ms = done;
	schedule(w, done - w->now_ms, EV_DISK, (uint32_t)n->id, NULL);
	return pd;
}

static void persist(struct sim_world *w, struct sim_node *n,
		    const struct baton_update *u)
{
	if ((u->persist_needed || u->compact_upto != 0) &&
	    submit(w, n, u) == NULL)
		return;
	/* Held messages wait for this update's submission and every earlier
	 * one: for the last pending submission, or go now if none is. */
	for (uint32_t i = 0; i < u->n_msgs_after_persist; i++) {
		struct sim_packet *p = packet_copy(&u->msgs_after_persist[i]);
		if (n->pending_tail == NULL)
			net_send(w, p);
		else
			hold(n->pending_tail, p);
	}
}

static void handle_update(struct sim_world *w, struct sim_node *n,
			  const struct baton_update *u)
{
	w->stats.steps++;
	if (u->role != n->role || u->term != n->term)
		sim_trace(w, "node %llu: %s term %llu leader %llu",
			  (unsigned long long)n->id, role_name(u->role),
			  (unsigned long long)u->term,
			  (unsigned long long)u->leader_id);
	if (u->role == BATON_LEADER && u->commit_index > n->commit)
		sim_check_commit_safe(w, n, u->commit_index);
	if (u->role == BATON_LEADER && u->commit_index > n->commit &&
	    !w->liveness) {
		/* A new leader's first commit is where Raft is subtlest
		 * (entries of earlier terms ride along with it). */
		uint32_t p = n->committed_this_term
				     ? w->p.crash_on_commit_per_mille
				     : w->p.crash_on_first_commit_per_mille;
		n->committed_this_term = true;
		if (sim_chance(&w->rng, p))
			schedule(w, 0, EV_CRASH, (uint32_t)n->id, NULL);
	}
	if (u->role != BATON_LEADER || u->term != n->term)
		n->committed_this_term = false;
	if (u->role == BATON_LEADER && n->role != BATON_LEADER &&
	    !w->liveness &&
	    sim_chance(&w->rng, w->p.crash_on_election_per_mille))
		schedule(w, sim_range(&w->rng, 0, w->p.net_max_ms), EV_CRASH,
			 (uint32_t)n->id, NULL);
	sim_check_update(w, n, u);
	for (uint32_t i = 0; i < u->n_msgs; i++)
		net_send(w, packet_copy(&u->msgs[i]));
	persist(w, n, u);
	apply_update(w, n, u);
	serve_reads(w, n, u);
}

static int step(struct sim_world *w, struct sim_node *n, struct baton_event *ev)
{
	struct baton_update u;
	int rv = baton_raft_step(n->raft, w->now_ms, ev, &u);
	if (w->verbose && ev->type != BATON_EVENT_TICK)
		sim_trace(w,
			  "node %llu step %u -> %s: commit %llu, %u msgs, "
			  "%u held, %u to persist, %u to apply",
			  (unsigned long long)n->id, ev->type,
			  baton_err_name(rv),
			  (unsigned long long)u.commit_index, u.n_msgs,
			  u.n_msgs_after_persist, u.n_entries, u.n_apply);
	w->trace_hash = sim_hash_bytes(w->trace_hash, &u.commit_index, 8);
	w->trace_hash = sim_hash_bytes(w->trace_hash, &u.term, 8);
	handle_update(w, n, &u);
	return rv;
}

struct sim_driver {
	struct sim_world *w;
	struct sim_node *n;
};

/* The storage reports submission `seq` durable: release what waited. */
static void persisted(void *data, uint64_t seq, int status)
{
	struct sim_world *w = ((struct sim_driver *)data)->w;
	struct sim_node *n = ((struct sim_driver *)data)->n;
	struct sim_pending *pd = n->pending;
	if (pd == NULL || pd->seq != seq || status != 0) {
		sim_fail(w, "node %llu: write %llu: %s (%s)",
			 (unsigned long long)n->id, (unsigned long long)seq,
			 status ? baton_strerror(status) : "out of order",
			 n->storage->ops->errmsg(n->storage));
		return;
	}
	n->pending = pd->next;
	if (n->pending == NULL)
		n->pending_tail = NULL;
	for (uint32_t i = 0; i < pd->n_held; i++)
		net_send(w, pd->held[i]);
	pd->n_held = 0;
	bool report = pd->report;
	struct baton_event ev = {.type = BATON_EVENT_PERSISTED};
	ev.u.persisted.index = pd->persist_index;
	ev.u.persisted.term = pd->persist_term;
	pending_free(pd);
	if (report)
		step(w, n, &ev);
}

/* The world's clock says the node's oldest submission reached the disk. */
static void disk_done(struct sim_world *w, struct sim_node *n)
{
	sim_disk_complete_next(n->storage);
	struct sim_driver d = {w, n};
	n->storage->ops->poll(n->storage, persisted, &d);
}

/* ---- lifecycle of nodes ----------------------------------------------------
 */

static void node_options(struct sim_world *w, struct sim_node *n)
{
	struct baton_raft_options *o = &n->opts;
	baton_raft_options_default(o);
	o->id = n->id;
	o->random_seed = w->seed * 1000003u + n->id * 7919u + n->incarnation;
	o->election_timeout_ms = w->p.election_timeout_ms;
	o->heartbeat_interval_ms = w->p.heartbeat_ms;
	o->max_inflight_appends = w->p.inflight;
	o->max_entries_per_append = w->p.batch;
	o->snapshot_chunk_bytes = w->p.chunk_bytes;
	o->snapshot_trailing_entries = w->p.trailing;
	o->promotion_rounds = 10;
	o->max_uncommitted_entries = w->p.max_uncommitted;
}

static void start_ticking(struct sim_world *w, struct sim_node *n)
{
	schedule(w, sim_range(&w->rng, 0, w->p.tick_ms), EV_TICK,
		 (uint32_t)n->id, NULL);
}

/* Say what is wrong with the loaded state, to tell a driver bug from a
 * core bug. */
static void restore_failed(struct sim_world *w, struct sim_node *n,
			   const struct baton_durable_state *ds, int rv)
{
	const struct baton_entry *log = ds->entries;
	uint32_t log_n = ds->n_entries, k = 1;
	while (k < log_n && log[k].index == log[k - 1].index + 1 &&
	       log[k].term >= log[k - 1].term)
		k++;
	const struct baton_snapshot_meta *snap = &ds->snapshot.meta;
	sim_fail(w,
		 "node %llu: restore failed: %s (snapshot %llu/term "
		 "%llu, log %llu..%llu, first break after %llu)",
		 (unsigned long long)n->id, baton_strerror(rv),
		 (unsigned long long)(ds->has_snapshot ? snap->index : 0),
		 (unsigned long long)(ds->has_snapshot ? snap->term : 0),
		 (unsigned long long)(log_n ? log[0].index : 0),
		 (unsigned long long)(log_n ? log[log_n - 1].index : 0),
		 (unsigned long long)(k < log_n ? log[k - 1].index : 0));
}

/* Bring a node up from its disk, as after a power cycle: a new storage
 * over the durable state, and a core restored from what it loads. */
static void node_boot(struct sim_world *w, struct sim_node *n)
{
	if (n->disk_factor == 0)
		n->disk_factor = (uint32_t)sim_range(&w->rng, 1,
						     w->p.disk_slowest_factor);
	n->incarnation++;
	n->alive = true;
	n->exists = true;
	n->role = BATON_FOLLOWER;
	n->commit = 0;
	n->storage = sim_disk_open(&n->disk, n->id);
	struct baton_durable_state ds;
	int rv = n->storage->ops->load(n->storage, &ds);
	if (rv != 0)
		abort(); /* the simulated disk cannot fail */
	n->term = ds.term;
	node_options(w, n);
	if (baton_raft_create(&n->opts, &n->raft) != 0)
		abort();
	memset(&n->sm, 0, sizeof n->sm);
	if (ds.has_snapshot &&
	    !sm_restore(&n->sm, ds.snapshot_data, ds.snapshot_len)) {
		sim_fail(w, "node %llu: its own snapshot is corrupt",
			 (unsigned long long)n->id);
		baton_durable_state_free(&ds);
		return;
	}
	rv = baton_raft_restore(n->raft, ds.term, ds.vote,
				ds.has_snapshot ? &ds.snapshot.meta : NULL,
				ds.snapshot_data, ds.snapshot_len, ds.entries,
				ds.n_entries);
	if (rv != 0)
		restore_failed(w, n, &ds, rv);
	sim_trace(w,
		  "node %llu boots (incarnation %llu, term %llu, %u entries)",
		  (unsigned long long)n->id, (unsigned long long)n->incarnation,
		  (unsigned long long)ds.term, ds.n_entries);
	baton_durable_state_free(&ds);
	start_ticking(w, n);
}

/* Power loss: whatever was not yet on disk is gone, and the process with
 * its storage object; the durable state stays for the next boot. */
static void node_crash(struct sim_world *w, struct sim_node *n)
{
	if (!n->alive)
		return;
	sim_disk_crash(n->storage);
	n->storage->ops->close(n->storage);
	n->storage = NULL;
	while (n->pending != NULL) {
		struct sim_pending *pd = n->pending;
		n->pending = pd->next;
		pending_free(pd);
	}
	n->pending_tail = NULL;
	n->last_write_done_ms = 0;
	baton_raft_destroy(n->raft);
	n->raft = NULL;
	n->alive = false;
	n->incarnation++; /* pending events of the old life are void */
	w->stats.crashes++;
	sim_trace(w, "node %llu crashes", (unsigned long long)n->id);
}

/* Running and not frozen: a client can reach it. */
static bool usable(const struct sim_world *w, const struct sim_node *n)
{
	return n->alive && n->paused_until_ms <= w->now_ms;
}

static struct sim_node *find_leader(struct sim_world *w)
{
	struct sim_node *best = NULL;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		struct sim_node *n = &w->nodes[i];
		if (usable(w, n) && n->role == BATON_LEADER &&
		    (best == NULL || n->term > best->term))
			best = n;
	}
	return best;
}

static struct sim_node *random_alive(struct sim_world *w)
{
	uint32_t alive[SIM_MAX_NODES], k = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		if (usable(w, &w->nodes[i]))
			alive[k++] = i;
	return k == 0 ? NULL : &w->nodes[alive[sim_rand(&w->rng) % k]];
}

/* ---- the nemesis ------------------------------------------------------------
 */

static void heal(struct sim_world *w)
{
	memset(w->blocked, 0, sizeof w->blocked);
}

static void partition(struct sim_world *w)
{
	/* Half the time the leader is cut off: that is when a stale leader
	 * and a new one overlap. */
	uint32_t kind = sim_chance(&w->rng, 500)
				? 1
				: (uint32_t)sim_range(&w->rng, 0, 2);
	struct sim_node *leader = find_leader(w);
	heal(w);
	if (kind == 0 || (kind == 1 && leader == NULL)) {
		/* A random split in two. */
		bool side[SIM_MAX_NODES + 1];
		for (uint32_t i = 1; i <= w->n_ids; i++)
			side[i] = sim_chance(&w->rng, 500);
		for (uint32_t a = 1; a <= w->n_ids; a++)
			for (uint32_t b = 1; b <= w->n_ids; b++)
				w->blocked[a][b] = side[a] != side[b];
		sim_trace(w, "nemesis: random partition");
	} else if (kind == 1) {
		uint32_t l = (uint32_t)leader->id;
		for (uint32_t i = 1; i <= w->n_ids; i++)
			w->blocked[l][i] = w->blocked[i][l] = true;
		sim_trace(w, "nemesis: isolate leader %u", l);
	} else {
		/* Asymmetric: some links fail one way only. */
		uint32_t links = (uint32_t)sim_range(&w->rng, 1, 2 * w->n_ids);
		for (uint32_t k = 0; k < links; k++) {
			uint32_t a = (uint32_t)sim_range(&w->rng, 1, w->n_ids);
			uint32_t b = (uint32_t)sim_range(&w->rng, 1, w->n_ids);
			w->blocked[a][b] = true;
		}
		sim_trace(w, "nemesis: %u one-way link failures", links);
	}
	w->stats.partitions++;
	schedule(w, sim_range(&w->rng, 50, w->p.partition_max_ms), EV_HEAL, 0,
		 NULL);
}

static void nemesis(struct sim_world *w)
{
	if (w->liveness)
		return;
	uint32_t action = (uint32_t)sim_range(&w->rng, 0, 11);
	if (action == 8 || action == 9) {
		/* SIGSTOP: a frozen leader wakes up still believing it
		 * leads, the classic source of stale reads. */
		struct sim_node *p = action == 8 ? find_leader(w) : NULL;
		if (p == NULL)
			p = random_alive(w);
		if (p != NULL) {
			uint64_t t = w->p.election_timeout_ms;
			p->paused_until_ms =
				w->now_ms + sim_range(&w->rng, t, 4 * t);
			sim_trace(w, "nemesis: pause node %llu until %llu",
				  (unsigned long long)p->id,
				  (unsigned long long)p->paused_until_ms);
		}
		schedule(w, sim_range(&w->rng, 1, 2 * w->p.nemesis_every_ms),
			 EV_NEMESIS, 0, NULL);
		return;
	}
	struct sim_node *victim = NULL;
	if (action <= 2)
		victim = random_alive(w);
	else if (action <= 4)
		victim = find_leader(w);
	/* Mostly keep a majority up, so the cluster makes progress between
	 * faults; now and then take it below, to test recovery from that. */
	uint32_t alive = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		alive += w->nodes[i].alive;
	if (victim != NULL && alive <= w->p.n_nodes / 2 + 1 &&
	    !sim_chance(&w->rng, 100))
		victim = NULL;
	if (victim != NULL) {
		node_crash(w, victim);
		schedule(w, sim_range(&w->rng, 1, w->p.downtime_max_ms),
			 EV_RESTART, (uint32_t)victim->id, NULL);
	} else if (action <= 7 || action == 10) {
		partition(w);
	} else {
		heal(w);
		sim_trace(w, "nemesis: heal");
	}
	schedule(w, sim_range(&w->rng, 1, 2 * w->p.nemesis_every_ms),
		 EV_NEMESIS, 0, NULL);
}

/* ---- clients ------------------------------------------------------------- */

static void client(struct sim_world *w)
{
	if (w->liveness)
		return; /* only the liveness marker from now on */
	struct sim_node *n = find_leader(w);
	if (n == NULL || sim_chance(&w->rng, 100))
		n = random_alive(w);
	if (n != NULL) {
		uint32_t count = (uint32_t)sim_range(&w->rng, 1, 8);
		char payloads[8][96];
		struct baton_buffer bufs[8];
		for (uint32_t i = 0; i < count; i++) {
			int len = snprintf(
				payloads[i], sizeof payloads[i],
				"s%llu:c%llu:", (unsigned long long)w->seed,
				(unsigned long long)w->next_payload++);
			size_t pad = (size_t)sim_range(&w->rng, 0, 40);
			memset(payloads[i] + len, 'x', pad);
			bufs[i] = (struct baton_buffer){payloads[i],
							(size_t)len + pad};
		}
		struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
		ev.u.propose.n = count;
		ev.u.propose.bufs = bufs;
		if (step(w, n, &ev) == 0) {
			w->stats.proposals += count;
			/* The leader dies while its entries are on their way:
			 * some followers have them, some do not. */
			if (sim_chance(&w->rng,
				       w->p.crash_after_propose_per_mille))
				schedule(w,
					 sim_range(&w->rng, 0, w->p.net_max_ms),
					 EV_CRASH, (uint32_t)n->id, NULL);
		}
	}
	schedule(w, sim_range(&w->rng, 1, 2 * w->p.client_every_ms), EV_CLIENT,
		 0, NULL);
}

/* Any node that believes it leads: after a partition there may be two,
 * and a client that reads from the stale one must still see the truth. */
static struct sim_node *random_self_declared_leader(struct sim_world *w)
{
	uint32_t ids[SIM_MAX_NODES], k = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		if (usable(w, &w->nodes[i]) && w->nodes[i].role == BATON_LEADER)
			ids[k++] = i;
	return k == 0 ? NULL : &w->nodes[ids[sim_rand(&w->rng) % k]];
}

static void reader(struct sim_world *w)
{
	struct sim_node *n = NULL;
	if (sim_chance(&w->rng, 500))
		n = random_self_declared_leader(w);
	if (n == NULL)
		n = random_alive(w);
	if (n != NULL) {
		if (w->n_reads == w->reads_cap) {
			w->reads_cap = w->reads_cap ? w->reads_cap * 2 : 64;
			w->reads = realloc(w->reads,
					   w->reads_cap * sizeof *w->reads);
			if (w->reads == NULL)
				abort();
		}
		struct sim_read rd = {
			.id = ++w->next_read_id,
			.node = (uint32_t)n->id,
			.incarnation = n->incarnation,
			.must_see = sim_max_applied(w),
		};
		w->reads[w->n_reads++] = rd;
		struct baton_event ev = {.type = BATON_EVENT_READ};
		ev.u.read.request_id = rd.id;
		if (step(w, n, &ev) != 0) {
			w->stats.reads_failed++;
			for (uint32_t k = 0; k < w->n_reads; k++)
				if (w->reads[k].id == rd.id)
					w->reads[k] = w->reads[--w->n_reads];
		}
	}
	/* Reads whose node crashed are abandoned, as a client would. */
	for (uint32_t k = 0; k < w->n_reads;) {
		struct sim_node *rn = &w->nodes[w->reads[k].node];
		if (rn->incarnation != w->reads[k].incarnation)
			w->reads[k] = w->reads[--w->n_reads];
		else
			k++;
	}
	schedule(w, sim_range(&w->rng, 1, 2 * w->p.read_every_ms), EV_READ, 0,
		 NULL);
}

/* Membership: add a fresh node as a learner, promote a learner, or remove a
 * voter (sometimes the leader). Ids are never reused, so no stale message
 * can be mistaken for a new member's. */
static void membership(struct sim_world *w)
{
	struct sim_node *l = find_leader(w);
	if (l != NULL && !w->liveness) {
		struct baton_raft_status s;
		baton_raft_status(l->raft, &s);
		uint32_t voters = 0;
		baton_node_id learner = 0;
		for (uint32_t i = 0; i < s.config.n; i++) {
			if (s.config.members[i].role == BATON_VOTER)
				voters++;
			else
				learner = s.config.members[i].id;
		}
		struct baton_event ev = {.type = BATON_EVENT_PROMOTE};
		bool grow = voters < 3 || sim_chance(&w->rng, 500);
		if (learner != 0) {
			ev.u.member.id = learner;
		} else if (grow && voters < w->p.n_nodes + 2 &&
			   w->next_fresh_id <= SIM_MAX_NODES) {
			struct sim_node *fresh = &w->nodes[w->next_fresh_id];
			fresh->id = w->next_fresh_id++;
			w->n_ids = (uint32_t)fresh->id;
			node_boot(w, fresh);
			ev.type = BATON_EVENT_ADD_LEARNER;
			ev.u.member.id = fresh->id;
		} else if (voters > 3) {
			ev.type = BATON_EVENT_REMOVE;
			ev.u.member.id =
				s.config.members[sim_rand(&w->rng) % s.config.n]
					.id;
		} else {
			ev.type = 0;
		}
		if (ev.type != 0) {
			int rv = step(w, l, &ev);
			sim_trace(w, "membership: event %u of node %llu: %s",
				  ev.type, (unsigned long long)ev.u.member.id,
				  baton_err_name(rv));
			if (rv == 0)
				w->stats.member_changes++;
		}
	}
	if (w->p.member_every_ms > 0)
		schedule(w, sim_range(&w->rng, 1, 2 * w->p.member_every_ms),
			 EV_MEMBER, 0, NULL);
}

static void transfer(struct sim_world *w)
{
	struct sim_node *l = find_leader(w);
	if (l != NULL && !w->liveness) {
		struct baton_raft_status s;
		baton_raft_status(l->raft, &s);
		struct baton_event ev = {.type = BATON_EVENT_TRANSFER};
		ev.u.transfer.target =
			sim_chance(&w->rng, 500)
				? 0
				: s.config.members[sim_rand(&w->rng) %
						   s.config.n]
					  .id;
		if (step(w, l, &ev) == 0)
			w->stats.transfers++;
	}
	schedule(w, sim_range(&w->rng, 1, 2 * w->p.transfer_every_ms),
		 EV_TRANSFER, 0, NULL);
}

/* Stream a snapshot to the storage in three pieces; durable on return. */
static bool save_snapshot(struct sim_world *w, struct sim_node *n,
			  const struct baton_snapshot_header *h,
			  const uint8_t *buf, size_t len)
{
	struct baton_storage *s = n->storage;
	size_t cut[] = {0, len / 3, 2 * len / 3, len};
	struct baton_snapshot_sink *k = NULL;
	int rv = s->ops->snapshot_begin(s, h, &k);
	for (uint32_t i = 0; rv == 0 && i < 3; i++)
		rv = s->ops->snapshot_write(k, buf + cut[i],
					    cut[i + 1] - cut[i]);
	if (rv == 0)
		rv = s->ops->snapshot_commit(k);
	else if (k != NULL)
		s->ops->snapshot_abort(k);
	if (rv != 0)
		sim_fail(w, "node %llu: saving snapshot %llu: %s (%s)",
			 (unsigned long long)n->id,
			 (unsigned long long)h->meta.index, baton_strerror(rv),
			 s->ops->errmsg(s));
	else
		sim_check_snapshot_saved(w, n, h->meta.index, buf, len);
	return rv == 0;
}

static void take_snapshot(struct sim_world *w, struct sim_node *n)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	if (n->sm.applied <= s.snapshot_index)
		return;
	struct baton_snapshot_meta meta;
	int rv = baton_raft_snapshot_meta(n->raft, n->sm.applied, &meta);
	if (rv != 0) {
		sim_fail(w,
			 "node %llu: no snapshot metadata at applied %llu: %s",
			 (unsigned long long)n->id,
			 (unsigned long long)n->sm.applied, baton_strerror(rv));
		return;
	}
	uint8_t buf[SM_SNAP_HEAD + 512];
	size_t len = sm_snapshot(&n->sm, buf, (size_t)(n->sm.applied % 512));
	/* Durable first, then the core may compact. */
	struct baton_snapshot_header h = {.meta = meta};
	if (!save_snapshot(w, n, &h, buf, len))
		return;
	struct baton_event ev = {.type = BATON_EVENT_SNAPSHOT_TAKEN};
	ev.u.snapshot_taken.index = meta.index;
	ev.u.snapshot_taken.data = buf;
	ev.u.snapshot_taken.len = len;
	rv = step(w, n, &ev);
	if (rv != 0)
		sim_fail(w, "node %llu: snapshot at %llu refused: %s",
			 (unsigned long long)n->id,
			 (unsigned long long)meta.index, baton_strerror(rv));
	w->stats.snapshots_taken++;
}

/* ---- phases ------------------------------------------------------------- */

/* The safety phase ends: heal everything, stop injecting faults, and give
 * the cluster a bounded time to show it is alive again. */
static void start_liveness(struct sim_world *w)
{
	w->liveness = true;
	heal(w);
	w->p.loss_per_mille = 0;
	w->p.dup_per_mille = 0;
	w->p.reorder_per_mille = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		w->nodes[i].paused_until_ms = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		struct sim_node *n = &w->nodes[i];
		if (n->exists && !n->alive)
			node_boot(w, n);
	}
	sim_trace(w, "liveness phase: faults healed");
	schedule(w, 100, EV_LIVENESS, 0, NULL);
}

static bool member_caught_up(struct sim_world *w, const struct baton_config *c)
{
	for (uint32_t i = 0; i < c->n; i++) {
		struct sim_node *m = &w->nodes[c->members[i].id];
		if (!m->alive || m->sm.applied < w->marker_index)
			return false;
	}
	return true;
}

/* Live again when one leader is known to every member of its configuration
 * and a command proposed after the heal is applied by all of them. */
static void liveness_check(struct sim_world *w)
{
	if (w->now_ms >= w->p.safety_ms + w->p.liveness_ms) {
		sim_fail(w,
			 "liveness: cluster not live %llu ms after healing "
			 "(marker index %llu)",
			 (unsigned long long)w->p.liveness_ms,
			 (unsigned long long)w->marker_index);
		return;
	}
	schedule(w, 50, EV_LIVENESS, 0, NULL);
	struct sim_node *l = find_leader(w);
	if (l == NULL)
		return;
	baton_term t;
	if (w->marker_index != 0 &&
	    sim_committed_term(w, w->marker_index, &t)) {
		if (t != w->marker_term) {
			w->marker_index = 0; /* lost to a leader change */
			return;
		}
		struct baton_raft_status s;
		baton_raft_status(l->raft, &s);
		if (member_caught_up(w, &s.config)) {
			sim_trace(w, "liveness: marker %llu applied everywhere",
				  (unsigned long long)w->marker_index);
			w->done = true;
		}
		return;
	}
	struct baton_raft_status s;
	baton_raft_status(l->raft, &s);
	if (w->marker_index != 0 && s.term == w->marker_term)
		return; /* still on its way */
	static const char marker[] = "liveness-marker";
	struct baton_buffer b = {marker, sizeof marker};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 1;
	ev.u.propose.bufs = &b;
	if (step(w, l, &ev) == 0) {
		w->marker_index = ev.u.propose.first_index_out;
		w->marker_term = s.term;
	}
}

/* ---- the run ----------------------------------------------------------- */

static void dispatch(struct sim_world *w, struct sim_event *e)
{
	struct sim_node *n = e->node ? &w->nodes[e->node] : NULL;
	bool current =
		n != NULL && n->alive && e->incarnation == n->incarnation;
	/* A frozen node's timers, disk completions and incoming messages
	 * wait, in order, until it resumes. */
	struct sim_node *target =
		e->kind == EV_DELIVER ? &w->nodes[e->packet->m.to] : n;
	if (target != NULL && target->alive &&
	    target->paused_until_ms > w->now_ms &&
	    (e->kind == EV_TICK || e->kind == EV_DISK ||
	     e->kind == EV_DELIVER || e->kind == EV_SNAPSHOT)) {
		struct sim_event later = *e;
		later.at = target->paused_until_ms;
		later.seq = w->seq++;
		push_event(w, &later);
		return;
	}
	switch (e->kind) {
	case EV_TICK:
		if (!current)
			return;
		step(w, n, &(struct baton_event){.type = BATON_EVENT_TICK});
		schedule(w, w->p.tick_ms, EV_TICK, e->node, NULL);
		return;
	case EV_DELIVER: {
		w->in_flight--;
		struct sim_packet *p = e->packet;
		struct sim_node *to = &w->nodes[p->m.to];
		if (to->alive && !w->blocked[p->m.from][p->m.to]) {
			struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
			ev.u.receive.msg = &p->m;
			step(w, to, &ev);
		}
		packet_free(p);
		return;
	}
	case EV_DISK:
		if (current)
			disk_done(w, n);
		return;
	case EV_RESTART:
		if (n != NULL && !n->alive && !w->liveness)
			node_boot(w, n);
		return;
	case EV_CRASH:
		/* A power blip: down, and back before long. */
		if (!current || w->liveness)
			return;
		sim_trace(w, "buggify: power blip of node %u", e->node);
		node_crash(w, n);
		schedule(w, sim_range(&w->rng, 0, 2 * w->p.net_max_ms),
			 EV_RESTART, e->node, NULL);
		return;
	case EV_NEMESIS:
		nemesis(w);
		return;
	case EV_HEAL:
		heal(w);
		return;
	case EV_CLIENT:
		client(w);
		return;
	case EV_READ:
		reader(w);
		return;
	case EV_MEMBER:
		membership(w);
		return;
	case EV_TRANSFER:
		transfer(w);
		return;
	case EV_SNAPSHOT:
		if (current)
			take_snapshot(w, n);
		return;
	case EV_PHASE:
		start_liveness(w);
		return;
	case EV_LIVENESS:
		liveness_check(w);
		return;
	default:
		abort();
	}
}

static void bootstrap(struct sim_world *w)
{
	struct baton_config c = {0};
	for (uint32_t i = 1; i <= w->p.n_nodes; i++) {
		c.members[c.n].id = i;
		c.members[c.n].role = BATON_VOTER;
		c.n++;
	}
	w->n_ids = w->p.n_nodes;
	w->next_fresh_id = w->p.n_nodes + 1;
	for (uint32_t i = 1; i <= w->p.n_nodes; i++) {
		struct sim_node *n = &w->nodes[i];
		n->id = i;
		node_boot(w, n);
		if (baton_raft_bootstrap(n->raft, &c) != 0)
			abort();
		/* The bootstrap entry goes to disk like any other. */
		step(w, n, &(struct baton_event){.type = BATON_EVENT_TICK});
	}
}

int sim_run(struct sim_world *w)
{
	w->rng.state = w->seed;
	w->checks = sim_checks_new();
	bootstrap(w);
	schedule(w, 1, EV_CLIENT, 0, NULL);
	schedule(w, 1, EV_READ, 0, NULL);
	if (w->p.nemesis_every_ms > 0)
		schedule(w, w->p.nemesis_every_ms, EV_NEMESIS, 0, NULL);
	if (w->p.member_every_ms > 0)
		schedule(w, w->p.member_every_ms, EV_MEMBER, 0, NULL);
	if (w->p.transfer_every_ms > 0)
		schedule(w, w->p.transfer_every_ms, EV_TRANSFER, 0, NULL);
	schedule(w, w->p.safety_ms, EV_PHASE, 0, NULL);
	while (!w->done && w->heap_n > 0) {
		if (++w->events > SIM_MAX_EVENTS) {
			sim_fail(w, "event budget of %u exhausted",
				 SIM_MAX_EVENTS);
			break;
		}
		struct sim_event e = pop(w);
		w->now_ms = e.at;
		if (w->verbose && e.kind != EV_TICK && e.kind != EV_DELIVER &&
		    e.kind != EV_DISK)
			sim_trace(w, "event %s", kind_names[e.kind]);
		dispatch(w, &e);
	}
	return w->failed ? 1 : 0;
}

void sim_world_free(struct sim_world *w)
{
	while (w->heap_n > 0) {
		struct sim_event e = pop(w);
		packet_free(e.packet);
	}
	free(w->heap);
	for (uint32_t i = 1; i <= SIM_MAX_NODES; i++) {
		struct sim_node *n = &w->nodes[i];
		if (n->alive)
			node_crash(w, n);
		sim_disk_free(&n->disk);
	}
	free(w->reads);
	sim_checks_free(w->checks);
}
