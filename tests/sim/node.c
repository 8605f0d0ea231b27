/*
 * Driving one node: the shipping node pipeline (src/node/pipeline.h) over
 * the node's simulated disk (sim_disk.c) and its key-value machine
 * (machine.c), with the world's clock and network as its environment. The
 * pipeline alone implements the driver contract of include/baton/raft.h
 * (persist chain, held messages, apply, reads, snapshots); the world only
 * feeds it events, decides from the seed when each write completes, and
 * watches every step through the pipeline's observer.
 */
#include "world.h"

#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

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

/* ---- what the machine applied, checked after the step's own checks ------ */

static struct sim_settle *settle_push(struct sim_node *n)
{
	if (n->n_settle == n->settle_cap) {
		n->settle_cap = n->settle_cap ? n->settle_cap * 2 : 64;
		n->settle =
			realloc(n->settle, n->settle_cap * sizeof *n->settle);
		if (n->settle == NULL)
			abort();
	}
	struct sim_settle *s = &n->settle[n->n_settle++];
	memset(s, 0, sizeof *s);
	return s;
}

void sim_node_applied(struct sim_node *n, const struct baton_entry *e,
		      uint64_t hash)
{
	struct sim_settle *s = settle_push(n);
	s->e = *e;
	s->e.buf = sim_xdup(e->buf, e->len);
	s->sm = (struct sim_machine){e->index, hash, n->kv.commands};
}

void sim_node_restored(struct sim_node *n, baton_index applied, uint64_t hash,
		       uint64_t commands)
{
	struct sim_settle *s = settle_push(n);
	s->restore = true;
	s->sm = (struct sim_machine){applied, hash, commands};
}

/* The invariants of each applied command and restored snapshot, in order,
 * with the machine state as it was right after each. */
static void settle(struct sim_world *w, struct sim_node *n)
{
	baton_index first = 0, upto = 0;
	for (uint32_t i = 0; i < n->n_settle; i++) {
		struct sim_settle *s = &n->settle[i];
		n->sm = s->sm;
		if (s->restore) {
			if (s->sm.applied == 0 &&
			    (s->sm.hash != 0 || s->sm.commands != 0))
				sim_fail(w,
					 "state machine safety: node %llu "
					 "restored a machine with commands "
					 "but no command index",
					 (unsigned long long)n->id);
			else if (s->sm.applied != 0)
				sim_check_snapshot(w, n, s->sm.applied,
						   s->sm.hash);
			if (!n->booting) {
				w->stats.snapshots_installed++;
				sim_trace(w,
					  "node %llu installs a snapshot "
					  "(last command %llu)",
					  (unsigned long long)n->id,
					  (unsigned long long)s->sm.applied);
			}
			continue;
		}
		sim_check_apply(w, n, &s->e);
		if (first == 0)
			first = s->e.index;
		upto = s->e.index;
		if (s->e.len > 0 && s->e.buf[0] == SIM_KV_MARKER)
			sim_workload_marker(w, s->e.index);
		free(s->e.buf);
	}
	n->n_settle = 0;
	if (upto != 0 && n->raft != NULL)
		sim_check_floor_hold(w, n, first, upto);
}

static void settle_drop(struct sim_node *n)
{
	for (uint32_t i = 0; i < n->n_settle; i++)
		free(n->settle[i].e.buf);
	n->n_settle = 0;
}

/* ---- the pipeline's environment ----------------------------------------- */

static uint64_t env_now_ms(void *data)
{
	return ((struct sim_node *)data)->w->now_ms;
}

static uint64_t env_wall_ms(void *data)
{
	return sim_clock_wall_ms(data);
}

static void env_send(void *data, const struct baton_msg *m)
{
	struct sim_node *n = data;
	if (!n->alive)
		return; /* a crash in progress: the process is gone */
	struct sim_packet *p = sim_packet_copy(m);
	p->m.from = n->id;
	sim_net_send(n->w, p); /* the timed faults on sends are drawn there */
}

static void env_storage_failed(void *data)
{
	struct sim_node *n = data;
	sim_fail(n->w, "node %llu: its storage failed: %s",
		 (unsigned long long)n->id,
		 n->storage->ops->errmsg(n->storage));
}

/* A node stalls only when its release lacks the log's machine version
 * (needs-upgrade); anything else fails the run. Judged after the step,
 * when what caused it can be seen (versions.c). */
static void env_stalled(void *data, baton_index index, const char *why)
{
	sim_stall_reported(data, index, why);
}

/* Every step of the core: the invariants, the faults timed to protocol
 * moments, and what the workload learns from it. */
static void env_observe(void *data, const struct baton_event *ev, int rv,
			const struct baton_update *u)
{
	struct sim_node *n = data;
	struct sim_world *w = n->w;
	w->stats.steps++;
	w->trace_hash = sim_hash_bytes(w->trace_hash, &u->commit_index, 8);
	w->trace_hash = sim_hash_bytes(w->trace_hash, &u->term, 8);
	if (!n->alive || n->raft == NULL)
		return; /* going away, or not started yet */
	if (w->verbose && ev->type != BATON_EVENT_TICK)
		sim_trace(w,
			  "node %llu step %u -> %s: commit %llu, %u msgs, "
			  "%u held, %u to persist, %u to apply",
			  (unsigned long long)n->id, ev->type,
			  baton_err_name(rv),
			  (unsigned long long)u->commit_index, u->n_msgs,
			  u->n_msgs_after_persist, u->n_entries, u->n_apply);
	if (u->role != n->role || u->term != n->term)
		sim_trace(w, "node %llu: %s term %llu leader %llu",
			  (unsigned long long)n->id, role_name(u->role),
			  (unsigned long long)u->term,
			  (unsigned long long)u->leader_id);
	if (w->verbose) {
		uint64_t seq;
		const char *why = baton_raft_last_refusal(n->raft, &seq);
		if (seq != n->refusal_seq)
			sim_trace(w, "node %llu: %s", (unsigned long long)n->id,
				  why);
		n->refusal_seq = seq;
	}
	sim_buggify_update(w, n, u);
	sim_steady_step(w, n, u);
	sim_workload_observe(w, n, ev, rv, u);
	sim_check_update(w, n, u);
	sim_check_rules(w, n, ev, u);
	settle(w, n);
	if (n->stall_pending != 0)
		sim_stall_judge(w, n, u->snapshot);
	if (ev->type == BATON_EVENT_SNAPSHOT_TAKEN && rv == 0) {
		w->stats.snapshots_taken++;
		sim_check_snapshot_saved(w, n, ev->u.snapshot_taken.index,
					 ev->u.snapshot_taken.len);
	}
}

/* The storage took a submission: it completes after the node's disk
 * latency, and never before the one submitted before it (FIFO). */
static void on_submit(void *data)
{
	struct sim_node *n = data;
	struct sim_world *w = n->w;
	uint64_t done = w->now_ms +
			n->disk_factor * sim_range(&w->rng, w->p.disk_min_ms,
						   w->p.disk_max_ms);
	if (done < n->last_write_done_ms)
		done = n->last_write_done_ms;
	n->last_write_done_ms = done;
	sim_steady_disk(w, n, done);
	sim_schedule(w, done - w->now_ms, EV_DISK, (uint32_t)n->id, NULL);
}

/* ---- the loop's turns ---------------------------------------------------- */

void sim_node_turn(struct sim_world *w, struct sim_node *n)
{
	if (!n->alive)
		return;
	baton_pipeline_flush(n->pipe);
	settle(w, n);
	if (n->stall_pending != 0 || n->needs_upgrade != 0)
		sim_stall_judge(w, n, NULL);
	/* The next turn of the loop writes the next slice, as batond's idle
	 * handle does: other events of the same moment come in between. */
	if (n->alive && !n->work_scheduled &&
	    baton_pipeline_has_work(n->pipe)) {
		n->work_scheduled = true;
		sim_schedule(w, sim_range(&w->rng, 0, 1), EV_WORK,
			     (uint32_t)n->id, NULL);
	}
}

void sim_node_work(struct sim_world *w, struct sim_node *n)
{
	n->work_scheduled = false;
	w->stats.snapshot_slices++;
	baton_pipeline_work(n->pipe);
	sim_node_turn(w, n);
}

void sim_node_tick(struct sim_world *w, struct sim_node *n)
{
	baton_pipeline_tick(n->pipe);
	sim_node_turn(w, n);
	sim_clock_check(w, n);
}

void sim_node_receive(struct sim_world *w, struct sim_node *n,
		      const struct baton_msg *m)
{
	baton_pipeline_receive(n->pipe, m);
	sim_node_turn(w, n);
}

void sim_node_peer_closed(struct sim_world *w, struct sim_node *n,
			  baton_node_id id)
{
	sim_trace(w, "node %llu: connection to node %llu closed",
		  (unsigned long long)n->id, (unsigned long long)id);
	baton_pipeline_peer_closed(n->pipe, id);
	sim_node_turn(w, n);
}

void sim_disk_done(struct sim_world *w, struct sim_node *n)
{
	sim_disk_complete_next(n->storage);
	baton_pipeline_storage_ready(n->pipe);
	sim_node_turn(w, n);
}

/* ---- lifecycle of nodes ----------------------------------------------------
 */

static void node_config(struct sim_world *w, struct sim_node *n,
			struct baton_pipeline_config *c)
{
	memset(c, 0, sizeof *c);
	struct baton_raft_options *o = &c->raft;
	baton_raft_options_default(o);
	o->id = n->id;
	o->profile = *sim_profile(w, n);
	o->machine_upgrade = w->p.machine_upgrade;
	o->election_policy = sim_policy(w, n);
	o->random_seed = w->seed * 1000003u + n->id * 7919u + n->incarnation;
	o->election_timeout_ms = w->p.election_timeout_ms;
	o->heartbeat_interval_ms = w->p.heartbeat_ms;
	o->max_inflight_appends = w->p.inflight;
	o->max_entries_per_append = w->p.batch;
	o->snapshot_chunk_bytes = w->p.chunk_bytes;
	o->snapshot_trailing_entries = w->p.trailing;
	o->promotion_rounds = 10;
	o->max_uncommitted_entries = w->p.max_uncommitted;
	c->storage = n->storage;
	c->machine = &n->kv.base;
	c->snapshot_entries = w->p.snapshot_every;
	c->snapshot_slice_bytes = w->p.slice_bytes;
	c->max_clock_offset_ms = w->p.max_clock_offset_ms;
	/* Clients give up after a few elections' worth of time. */
	c->read_timeout_ms = 10 * w->p.election_timeout_ms;
	c->proposal_timeout_ms = 20 * w->p.election_timeout_ms;
	c->admin_timeout_ms = 40 * w->p.election_timeout_ms;
	/* The founders bootstrap an empty disk, as batond does. */
	if (n->id <= w->p.n_nodes) {
		c->n_founders = w->p.n_nodes;
		for (uint32_t i = 0; i < w->p.n_nodes; i++)
			c->founders[i] = i + 1;
	}
}

static void start_ticking(struct sim_world *w, struct sim_node *n)
{
	sim_schedule(w, sim_range(&w->rng, 0, w->p.tick_ms), EV_TICK,
		     (uint32_t)n->id, NULL);
}

/* Bring a node up from its disk, as after a power cycle: a new storage
 * over the durable state, an empty machine, and a pipeline that restores
 * both from what the storage loads. */
void sim_node_boot(struct sim_world *w, struct sim_node *n)
{
	if (n->disk_factor == 0)
		n->disk_factor = (uint32_t)sim_range(&w->rng, 1,
						     w->p.disk_slowest_factor);
	n->w = w;
	n->incarnation++;
	if (!n->exists || n->boot_release != n->release) {
		n->boot_release = n->release;
		n->release_since_ms = w->now_ms;
	}
	n->alive = true;
	n->exists = true;
	sim_steady_node(w, n, w->now_ms);
	n->role = BATON_FOLLOWER;
	n->commit = 0;
	n->work_scheduled = false;
	n->term = n->disk.term;
	n->stall_pending = 0;
	n->needs_upgrade = 0;
	n->storage = sim_disk_open(&n->disk, n->id);
	sim_disk_on_submit(n->storage, on_submit, n);
	sim_kv_init(&n->kv, n);
	memset(&n->sm, 0, sizeof n->sm);
	struct baton_pipeline_config c;
	node_config(w, n, &c);
	struct baton_pipeline_env env = {
		.data = n,
		.now_ms = env_now_ms,
		.wall_ms = env_wall_ms,
		.send = env_send,
		.storage_failed = env_storage_failed,
		.stalled = env_stalled,
		.observe = env_observe,
	};
	char err[256] = "";
	n->booting = true;
	int rv = baton_pipeline_create(&c, &env, &n->pipe, err, sizeof err);
	if (rv != 0) {
		const struct sim_disk *d = &n->disk;
		sim_fail(w,
			 "node %llu: start failed: %s (%s; snapshot %llu, "
			 "log %llu..%llu)",
			 (unsigned long long)n->id, baton_strerror(rv), err,
			 (unsigned long long)(d->has_snap ? d->snap.meta.index
							  : 0),
			 (unsigned long long)(d->log_n ? d->log[0].index : 0),
			 (unsigned long long)(d->log_n ? d->log[d->log_n - 1]
								 .index
						       : 0));
		n->booting = false;
		settle_drop(n);
		n->storage->ops->close(n->storage);
		n->storage = NULL;
		n->pipe = NULL;
		n->alive = false;
		return;
	}
	n->raft = baton_pipeline_raft(n->pipe);
	settle(w, n);
	n->booting = false;
	char rel[BATON_RELEASE_STR_MAX];
	sim_trace(w,
		  "node %llu boots at release %s (incarnation %llu, term %llu, "
		  "%u entries)",
		  (unsigned long long)n->id,
		  sim_release_name(w, n->release, rel),
		  (unsigned long long)n->incarnation,
		  (unsigned long long)n->disk.term, n->disk.log_n);
	if (n->stall_pending != 0)
		sim_stall_judge(w, n, NULL);
	start_ticking(w, n);
	sim_node_turn(w, n);
}

/* Power loss: the process goes (its pipeline, failing every request that
 * waits on it), and with it whatever was not yet on disk; the durable
 * state stays for the next boot. */
void sim_node_crash(struct sim_world *w, struct sim_node *n)
{
	if (!n->alive)
		return;
	sim_crash_closes(w, n);
	sim_steady_node(w, n, w->now_ms);
	n->alive = false;
	/* The disk first: what it had not made durable is lost, a snapshot
	 * commit in flight included (the pipeline's destroy then finds it
	 * failed rather than completing it). */
	sim_disk_crash(n->storage);
	baton_pipeline_destroy(n->pipe);
	n->pipe = NULL;
	n->raft = NULL;
	settle_drop(n);
	n->storage->ops->close(n->storage);
	n->storage = NULL;
	n->last_write_done_ms = 0;
	n->incarnation++; /* pending events of the old life are void */
	w->stats.crashes++;
	sim_trace(w, "node %llu crashes", (unsigned long long)n->id);
}

/* ---- finding nodes ------------------------------------------------------- */

bool sim_usable(const struct sim_world *w, const struct sim_node *n)
{
	return n->alive && n->paused_until_ms <= w->now_ms;
}

struct sim_node *sim_find_leader(struct sim_world *w)
{
	struct sim_node *best = NULL;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		struct sim_node *n = &w->nodes[i];
		if (sim_usable(w, n) && n->role == BATON_LEADER &&
		    (best == NULL || n->term > best->term))
			best = n;
	}
	return best;
}

struct sim_node *sim_random_alive(struct sim_world *w)
{
	uint32_t alive[SIM_MAX_NODES], k = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		if (sim_usable(w, &w->nodes[i]))
			alive[k++] = i;
	return k == 0 ? NULL : &w->nodes[alive[sim_rand(&w->rng) % k]];
}
