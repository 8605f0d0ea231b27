/*
 * The workload: clients that write and read keys through the node pipeline
 * (recorded in history.c for the linearizability check), reads right after
 * elections and leadership transfers, membership changes, transfers, and
 * the liveness probe of the last phase.
 *
 * Client operations go to the leader mostly, and now and then to any node
 * or to a node that only believes it leads: a stale leader must refuse or
 * fail, never answer from an old state.
 */
#include "history.h"
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

/* Any node that believes it leads: after a partition there may be two,
 * and a client that reads from the stale one must still see the truth. */
static struct sim_node *random_self_declared_leader(struct sim_world *w)
{
	uint32_t ids[SIM_MAX_NODES], k = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		if (sim_usable(w, &w->nodes[i]) &&
		    w->nodes[i].role == BATON_LEADER)
			ids[k++] = i;
	return k == 0 ? NULL : &w->nodes[ids[sim_rand(&w->rng) % k]];
}

/* ---- writes ---------------------------------------------------------------
 */

/* A refusal that means the command never entered any log. */
static bool definitely_not_applied(int status)
{
	/* The pipeline reports these only when the core refused the
	 * proposal; once in the log a proposal fails with LEADERCHANGED,
	 * STALLED or STATE, whose fate is unknown. */
	return status == BATON_ENOTLEADER || status == BATON_EOVERLOADED ||
	       status == BATON_ETOOBIG || status == BATON_EBUSY ||
	       status == BATON_EIO;
}

static void propose_done(void *data, int status, const uint8_t *reply,
			 size_t len)
{
	struct sim_client *c = data;
	struct sim_world *w = c->w;
	if (status != 0) {
		if (definitely_not_applied(status))
			sim_history_fail(w, c);
		else
			sim_history_info(w, c);
		return;
	}
	char text[40];
	size_t n = len < sizeof text - 1 ? len : sizeof text - 1;
	if (n > 0)
		memcpy(text, reply, n);
	text[n] = '\0';
	/* "RETIRED" and "ERR ...": the machine applied it as a no-op. */
	if (n > 0 && (text[0] == 'R' || text[0] == 'E')) {
		sim_history_fail(w, c);
		return;
	}
	/* Without a reply (the pipeline owes one) the result is unknown, but
	 * the write took effect: the history still checks that. */
	sim_history_ok(w, c, n > 0 ? strtoll(text, NULL, 10) : 0, n > 0, NULL,
		       0);
}

static const uint8_t write_kinds[] = {
	LINCHECK_SET,	 LINCHECK_SET,	LINCHECK_APPEND, LINCHECK_APPEND,
	LINCHECK_APPEND, LINCHECK_INCR, LINCHECK_INCR,	 LINCHECK_DEL,
};

/* One write by client c on node n, not yet flushed: 0, or the node's
 * refusal. */
static int write_on(struct sim_world *w, struct sim_client *c,
		    struct sim_node *n, uint32_t key)
{
	uint8_t kind = write_kinds[sim_rand(&w->rng) % sizeof write_kinds];
	char value[24];
	uint8_t op = SIM_KV_DEL;
	const char *arg = NULL;
	if (kind == LINCHECK_SET || kind == LINCHECK_APPEND) {
		sim_history_value(w, kind == LINCHECK_APPEND, value,
				  sizeof value);
		op = kind == LINCHECK_SET ? SIM_KV_SET : SIM_KV_APPEND;
		arg = value;
	} else if (kind == LINCHECK_INCR) {
		op = SIM_KV_INCR;
	}
	uint8_t cmd[SIM_KV_COMMAND_MAX];
	size_t len =
		sim_kv_encode(cmd, sizeof cmd, op, key, arg,
			      (size_t)sim_range(&w->rng, 0, SIM_KV_PAD_MAX));
	sim_history_invoke(w, c, n, kind, key, arg);
	int rv = baton_pipeline_propose(n->pipe, cmd, len, propose_done, c);
	if (rv != 0)
		sim_history_fail(w, c);
	return rv;
}

static void noise_done(void *data, int status, const uint8_t *reply, size_t len)
{
	(void)data;
	(void)status;
	(void)reply;
	(void)len;
}

/* A command no client waits for: the load the recorded clients alone
 * would not make (batches, back-pressure, snapshots), checked by the
 * invariants but not by the history. */
static int noise_on(struct sim_world *w, struct sim_node *n)
{
	uint8_t cmd[SIM_KV_COMMAND_MAX];
	size_t len =
		sim_kv_encode(cmd, sizeof cmd, SIM_KV_NOISE, 0, NULL,
			      (size_t)sim_range(&w->rng, 0, SIM_KV_PAD_MAX));
	return baton_pipeline_propose(n->pipe, cmd, len, noise_done, NULL);
}

/* A batch of 1 to 8 commands to the leader (sometimes to another node):
 * recorded writes while clients and keys have room, load beyond. The
 * batch stops at the node's first refusal. */
void sim_client(struct sim_world *w)
{
	if (!w->liveness) {
		struct sim_node *n = sim_find_leader(w);
		if (n == NULL || sim_chance(&w->rng, 100))
			n = sim_random_alive(w);
		if (n != NULL && sim_chance(&w->rng, 50)) {
			struct sim_node *s = random_self_declared_leader(w);
			n = s != NULL ? s : n;
		}
		uint32_t count = (uint32_t)sim_range(&w->rng, 1, 8);
		for (uint32_t i = 0; n != NULL && i < count; i++) {
			struct sim_client *c = sim_history_idle(w);
			uint32_t key =
				c != NULL ? sim_history_key(w, false) : 0;
			int rv = key != 0 ? write_on(w, c, n, key)
					  : noise_on(w, n);
			if (rv != 0)
				break;
		}
		if (n != NULL)
			sim_node_turn(w, n);
	}
	sim_schedule(w, sim_range(&w->rng, 1, 2 * w->p.client_every_ms),
		     EV_CLIENT, 0, NULL);
}

/* ---- reads ----------------------------------------------------------------
 */

static void read_done(void *data, int status)
{
	struct sim_client *c = data;
	struct sim_world *w = c->w;
	struct sim_node *n = &w->nodes[c->node];
	if (status != 0 || !n->alive || n->incarnation != c->incarnation) {
		w->stats.reads_failed++;
		sim_history_fail(w, c); /* a read changes nothing */
		return;
	}
	/* The barrier is passed: the machine holds everything committed
	 * before the read began, in particular all that any node applied. */
	if (n->kv.applied < c->must_see)
		sim_fail(w,
			 "linearizable read: node %llu served a read with its "
			 "machine at %llu, but index %llu was applied before "
			 "the read began",
			 (unsigned long long)n->id,
			 (unsigned long long)n->kv.applied,
			 (unsigned long long)c->must_see);
	bool present;
	const char *val;
	uint32_t len;
	if (!sim_kv_get(&n->kv, c->key, &present, &val, &len)) {
		sim_history_fail(w, c); /* the key retired meanwhile */
		return;
	}
	w->stats.reads_ok++;
	sim_history_ok(w, c, 0, present, val, len);
}

static void read_on(struct sim_world *w, struct sim_node *n)
{
	struct sim_client *c = sim_history_idle(w);
	uint32_t key = c != NULL ? sim_history_key(w, true) : 0;
	if (key == 0)
		return;
	sim_history_invoke(w, c, n, LINCHECK_GET, key, NULL);
	c->must_see = sim_max_applied(w);
	if (baton_pipeline_read(n->pipe, read_done, c) != 0) {
		w->stats.reads_failed++;
		sim_history_fail(w, c);
	}
	sim_node_turn(w, n);
}

void sim_reader(struct sim_world *w)
{
	struct sim_node *n = NULL;
	if (sim_chance(&w->rng, 500))
		n = random_self_declared_leader(w);
	if (n == NULL)
		n = sim_random_alive(w);
	if (n != NULL)
		read_on(w, n);
	sim_schedule(w, sim_range(&w->rng, 1, 2 * w->p.read_every_ms), EV_READ,
		     0, NULL);
}

void sim_read_at(struct sim_world *w, struct sim_node *n)
{
	if (sim_usable(w, n))
		read_on(w, n);
}

/* Reads soon after node n, on both sides of a change of leader. */
static void reads_around(struct sim_world *w, baton_node_id a, baton_node_id b)
{
	uint64_t soon = 2 * (uint64_t)w->p.net_max_ms + 1;
	if (a != 0)
		sim_schedule(w, sim_range(&w->rng, 0, soon), EV_READ_AT,
			     (uint32_t)a, NULL);
	if (b != 0 && b != a && b <= w->n_ids && w->nodes[b].alive)
		sim_schedule(w, sim_range(&w->rng, 0, soon), EV_READ_AT,
			     (uint32_t)b, NULL);
}

/* ---- what each step tells the workload ------------------------------------
 */

void sim_workload_observe(struct sim_world *w, struct sim_node *n,
			  const struct baton_event *ev, int rv,
			  const struct baton_update *u)
{
	if (rv == 0 && ev->type == BATON_EVENT_PROPOSE) {
		w->stats.proposals += ev->u.propose.n;
		sim_buggify_propose(w, n);
	} else if (ev->type == BATON_EVENT_ADD_LEARNER ||
		   ev->type == BATON_EVENT_PROMOTE ||
		   ev->type == BATON_EVENT_REMOVE) {
		sim_trace(w, "membership: event %u of node %llu: %s", ev->type,
			  (unsigned long long)ev->u.member.id,
			  baton_err_name(rv));
		w->stats.member_changes += rv == 0;
	} else if (rv == 0 && ev->type == BATON_EVENT_TRANSFER) {
		w->stats.transfers++;
	}
	/* A new leader, and the one before it, right after an election:
	 * where a stale read or a lost write would show. */
	if (u->role == BATON_LEADER &&
	    (n->role != BATON_LEADER || n->term != u->term)) {
		if (!w->liveness)
			reads_around(w, n->id, w->last_leader);
		w->last_leader = n->id;
	}
}

/* ---- operators: membership and leadership -------------------------------- */

struct admin {
	struct sim_world *w;
	const char *what;
	baton_node_id id;
};

static void admin_done(void *data, int status)
{
	struct admin *a = data;
	sim_trace(a->w, "%s of node %llu: %s", a->what,
		  (unsigned long long)a->id, baton_err_name(status));
	free(a);
}

static void admin_request(struct sim_world *w, struct sim_node *l,
			  const char *what, baton_node_id id,
			  int (*request)(struct baton_pipeline *, baton_node_id,
					 baton_done_cb, void *))
{
	struct admin *a = sim_xmalloc(sizeof *a);
	*a = (struct admin){w, what, id};
	int rv = request(l->pipe, id, admin_done, a);
	if (rv != 0) {
		sim_trace(w, "%s of node %llu refused: %s", what,
			  (unsigned long long)id, baton_err_name(rv));
		free(a);
	}
	sim_node_turn(w, l);
}

/* Membership: add a fresh node as a learner, promote a learner, or remove a
 * voter (sometimes the leader). Ids are never reused, so no stale message
 * can be mistaken for a new member's. */
void sim_membership_change(struct sim_world *w)
{
	struct sim_node *l = sim_find_leader(w);
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
		bool grow = voters < 3 || sim_chance(&w->rng, 500);
		if (learner != 0) {
			admin_request(w, l, "promotion", learner,
				      baton_pipeline_promote);
		} else if (grow && voters < w->p.n_nodes + 2 &&
			   w->next_fresh_id <= SIM_MAX_NODES) {
			struct sim_node *fresh = &w->nodes[w->next_fresh_id];
			uint32_t release;
			if (!sim_fresh_release(w, l, &release)) {
				sim_trace(w, "addition: no release may join");
				return;
			}
			fresh->id = w->next_fresh_id++;
			fresh->release = release;
			w->n_ids = (uint32_t)fresh->id;
			sim_node_boot(w, fresh);
			admin_request(w, l, "addition", fresh->id,
				      baton_pipeline_add_learner);
		} else if (voters > 3) {
			baton_node_id id =
				s.config.members[sim_rand(&w->rng) % s.config.n]
					.id;
			admin_request(w, l, "removal", id,
				      baton_pipeline_remove);
		}
	}
}

void sim_membership(struct sim_world *w)
{
	sim_membership_change(w);
	if (w->p.member_every_ms > 0)
		sim_schedule(w, sim_range(&w->rng, 1, 2 * w->p.member_every_ms),
			     EV_MEMBER, 0, NULL);
}

/* A leadership transfer, with reads on the old leader and the target
 * while it runs: the old leader must not serve from a lapsed lease. */
void sim_transfer(struct sim_world *w)
{
	struct sim_node *l = sim_find_leader(w);
	if (l != NULL && !w->liveness) {
		struct baton_raft_status s;
		baton_raft_status(l->raft, &s);
		baton_node_id target =
			sim_chance(&w->rng, 500)
				? 0
				: s.config.members[sim_rand(&w->rng) %
						   s.config.n]
					  .id;
		admin_request(w, l, "transfer", target,
			      baton_pipeline_transfer);
		reads_around(w, l->id, target);
	}
	sim_schedule(w, sim_range(&w->rng, 1, 2 * w->p.transfer_every_ms),
		     EV_TRANSFER, 0, NULL);
}

/* ---- the liveness probe -------------------------------------------------- */

static bool member_caught_up(struct sim_world *w, const struct baton_config *c)
{
	for (uint32_t i = 0; i < c->n; i++) {
		struct sim_node *m = &w->nodes[c->members[i].id];
		if (!m->alive || m->kv.applied < w->marker_index)
			return false;
	}
	return true;
}

static void marker_done(void *data, int status, const uint8_t *reply,
			size_t len)
{
	(void)reply;
	(void)len;
	struct sim_world *w = data;
	w->marker_waiting = false;
	if (status != 0)
		sim_trace(w, "liveness: marker failed: %s",
			  baton_err_name(status));
}

void sim_workload_marker(struct sim_world *w, baton_index index)
{
	if (w->marker_index == 0)
		w->marker_index = index;
}

/* Live again when one leader is known to every member of its configuration
 * and a command proposed after the heal is applied by all of them. */
void sim_liveness_check(struct sim_world *w)
{
	if (w->now_ms >= w->liveness_from_ms + w->p.liveness_ms) {
		sim_fail(w,
			 "liveness: cluster not live %llu ms after healing and "
			 "upgrading every node (marker index %llu; highest "
			 "machine version appended %u, the newest release "
			 "implements %u)",
			 (unsigned long long)w->p.liveness_ms,
			 (unsigned long long)w->marker_index, w->max_machine,
			 w->releases[w->top_release].machine_max.value);
		return;
	}
	sim_schedule(w, 50, EV_LIVENESS, 0, NULL);
	if (!w->rules_done && !sim_rules_liveness(w))
		return;
	struct sim_node *l = sim_find_leader(w);
	if (l == NULL)
		return;
	/* Every node runs the newest release again: a downgrade left in
	 * progress would keep the floor and the machine version down. */
	sim_downgrade_cancel_left(w, l);
	if (w->marker_index != 0) {
		struct baton_raft_status s;
		baton_raft_status(l->raft, &s);
		/* Every member runs the newest release now: the effective
		 * machine version must reach its machine_max too. */
		if (member_caught_up(w, &s.config) &&
		    sim_versions_live(w, &s.config)) {
			sim_trace(w, "liveness: marker %llu applied everywhere",
				  (unsigned long long)w->marker_index);
			w->done = true;
		}
		return;
	}
	if (w->marker_waiting)
		return; /* still on its way */
	uint8_t cmd[SIM_KV_COMMAND_MAX];
	size_t len = sim_kv_encode(cmd, sizeof cmd, SIM_KV_MARKER,
				   ++w->marker_key, NULL, 0);
	if (baton_pipeline_propose(l->pipe, cmd, len, marker_done, w) == 0)
		w->marker_waiting = true;
	sim_node_turn(w, l);
}
