/*
 * The operator's explicit downgrades (DESIGN.md, "Downgrade", after etcd
 * 3.6), in the seeds that draw them: every few seconds one move, made on
 * the leader as `batonctl downgrade` makes it:
 *
 *   - no downgrade in progress: enable one to the release just before the
 *     floor of the leader's log, after validating it
 *     (baton_raft_downgrade_check; the simulated machine converts any
 *     machine version down, so the state machine's half always passes).
 *     Never to a release before the version rules, which would not answer
 *     the leader's info requests, so the downgrade could never end; nor
 *     while some node runs a release that speaks no peer protocol in
 *     common with the target (1.2.0 and 1.0.0), which the nodes restarted
 *     at the target could not reach;
 *   - one in progress: cancel it (a seeded share of the moves, and only
 *     while no node runs the target or below: the operator knows what it
 *     restarted), or restart one node still above the target at the
 *     target, on the same disk. Mostly a node whose durable snapshot
 *     covers the entry that enabled the downgrade (the pipeline takes one
 *     there, so nothing written under the newer versions is left to
 *     replay), now and then any node (an operator in a hurry: the node
 *     must then hold where it cannot apply, never apply it).
 *
 * The operator goes by what `enable` and `status` report: a downgrade is
 * in progress once the leader applied the entry enabling it, and until its
 * log holds one clearing it (a cancel on its way); an enable the leader
 * appended but never committed is not one (restarting a node at its target
 * then would be the operator's error). Upgrades wait while a downgrade is
 * in progress (versions.c). The core
 * ends it once every member runs the target, and upgrades resume. The
 * liveness phase upgrades every node again and then cancels a downgrade
 * left in progress (sim_downgrade_cancel_left). The invariants of the
 * entries that enable, cancel and end a downgrade are versions.c's.
 */
#include "world.h"

#include "pipeline.h"

#include <stdlib.h>

struct request {
	struct sim_world *w;
	uint32_t op;
	struct baton_release target;
};

static bool none(struct baton_release r)
{
	return r.major == 0 && r.minor == 0 && r.patch == 0;
}

const struct baton_downgrade *sim_downgrade_of(const struct sim_node *l,
					       struct baton_raft_status *s)
{
	baton_raft_status(l->raft, s);
	struct baton_release t = s->versions.downgrade.target;
	if (none(t))
		return NULL;
	struct baton_pipeline_status p;
	baton_pipeline_status(l->pipe, &p);
	if (baton_release_compare(p.applied_versions.downgrade.target, t) != 0)
		return NULL;
	return &s->versions.downgrade;
}

static void request_done(void *data, int status)
{
	struct request *q = data;
	char a[BATON_RELEASE_STR_MAX];
	sim_trace(q->w, "downgrade: %s to %s: %s",
		  q->op == BATON_DOWNGRADE_ENABLE ? "enable" : "cancel",
		  baton_release_format(q->target, a), baton_err_name(status));
	if (q->op == BATON_DOWNGRADE_CANCEL)
		q->w->cancel_waiting = false;
	free(q);
}

bool sim_downgrade_request(struct sim_world *w, struct sim_node *l, uint32_t op,
			   struct baton_release target)
{
	char why[256], a[BATON_RELEASE_STR_MAX];
	const char *what = op == BATON_DOWNGRADE_ENABLE ? "enable" : "cancel";
	struct baton_downgrade_plan plan;
	int rv = baton_raft_downgrade_check(l->raft, op, target, &plan, why,
					    sizeof why);
	if (rv != 0) {
		sim_trace(w, "downgrade: %s to %s refused: %s (%s)", what,
			  baton_release_format(target, a), baton_err_name(rv),
			  why);
		return false;
	}
	struct request *q = sim_xmalloc(sizeof *q);
	*q = (struct request){w, op, target};
	rv = baton_pipeline_downgrade(l->pipe, op, target, request_done, q);
	if (rv != 0) {
		sim_trace(w, "downgrade: %s to %s refused by the pipeline: %s",
			  what, baton_release_format(target, a),
			  baton_err_name(rv));
		free(q);
		sim_node_turn(w, l);
		return false;
	}
	sim_trace(w, "downgrade: %s to %s on leader %llu", what,
		  baton_release_format(target, a), (unsigned long long)l->id);
	if (op == BATON_DOWNGRADE_CANCEL)
		w->cancel_waiting = true;
	sim_node_turn(w, l);
	return true;
}

/* The release a downgrade from leader l's floor would go to, if the
 * operator would run one: not before the rules, and speaking a peer
 * protocol with every node's release (else the nodes restarted at it could
 * not reach those not yet restarted; the core's check does not look at
 * protocols, the operator does). */
const struct baton_profile *
sim_downgrade_target(struct sim_world *w, const struct baton_raft_status *s)
{
	const struct baton_profile *prev =
		baton_release_previous(s->versions.floor);
	if (prev == NULL || sim_before_rules(prev))
		return NULL;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		const struct sim_node *n = &w->nodes[i];
		const struct baton_profile *p = sim_profile(w, n);
		if (n->exists && (p->proto_max.value < prev->proto_min.value ||
				  prev->proto_max.value < p->proto_min.value))
			return NULL;
	}
	return prev;
}

static void enable(struct sim_world *w, struct sim_node *l,
		   const struct baton_raft_status *s)
{
	const struct baton_profile *prev = sim_downgrade_target(w, s);
	if (prev != NULL)
		sim_downgrade_request(w, l, BATON_DOWNGRADE_ENABLE,
				      prev->release);
}

bool sim_downgrade_ready(const struct sim_node *n,
			 const struct baton_downgrade *d)
{
	return n->disk.has_snap && n->disk.snap.meta.index >= d->since;
}

/* One move while the downgrade d (to release index t) is in progress. */
static void move(struct sim_world *w, struct sim_node *l,
		 const struct baton_downgrade *d, uint32_t t)
{
	uint32_t above[SIM_MAX_NODES], k = 0, ready[SIM_MAX_NODES], kr = 0;
	bool someone_at_target = false;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		const struct sim_node *n = &w->nodes[i];
		if (!n->exists)
			continue;
		if (n->release <= t) {
			someone_at_target = true;
			continue;
		}
		above[k++] = i;
		if (sim_downgrade_ready(n, d))
			ready[kr++] = i;
	}
	if (w->cancel_waiting)
		return; /* its outcome decides what comes next */
	if (!someone_at_target && sim_chance(&w->rng, w->p.cancel_per_mille)) {
		sim_downgrade_request(w, l, BATON_DOWNGRADE_CANCEL, d->target);
		return;
	}
	if (k == 0)
		return; /* every node runs the target: the leader ends it */
	uint32_t id = kr > 0 && sim_chance(&w->rng, 800)
			      ? ready[sim_rand(&w->rng) % kr]
			      : above[sim_rand(&w->rng) % k];
	sim_restart_at(w, &w->nodes[id], t, true);
}

void sim_downgrade(struct sim_world *w)
{
	if (w->liveness)
		return;
	sim_schedule(
		w, sim_range(&w->rng, 1, 2 * (uint64_t)w->p.downgrade_every_ms),
		EV_DOWNGRADE, 0, NULL);
	struct sim_node *l = sim_find_leader(w);
	if (l == NULL)
		return;
	struct baton_raft_status s;
	const struct baton_downgrade *d = sim_downgrade_of(l, &s);
	if (d == NULL) {
		enable(w, l, &s);
		return;
	}
	uint32_t t = sim_release_index(w, d->target);
	if (t != UINT32_MAX)
		move(w, l, d, t);
}

void sim_downgrade_cancel_left(struct sim_world *w, struct sim_node *l)
{
	struct baton_raft_status s;
	const struct baton_downgrade *d = sim_downgrade_of(l, &s);
	if (d == NULL || w->cancel_waiting ||
	    w->now_ms <
		    w->cancel_sent_ms + 4 * (uint64_t)w->p.election_timeout_ms)
		return;
	w->cancel_sent_ms = w->now_ms;
	sim_downgrade_request(w, l, BATON_DOWNGRADE_CANCEL, d->target);
}
