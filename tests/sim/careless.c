/*
 * A careless operator (docs/simulator.md, "The careless operator"): every
 * so often, on a random node (the leader half of the time), a request of
 * any kind at any moment, as someone typing `batonctl downgrade ...` or
 * starting a node of any release would: validate, enable or cancel a
 * downgrade to any release of the table, to releases the binary does not
 * contain or to none, an unknown operation, the last accepted request
 * again, and the join check for a fresh node of any release.
 *
 * Each request is judged first by a model of the documented rules
 * (docs/upgrading.md, "Explicit downgrade"; DESIGN.md, "Join"), written
 * here apart from the core's code: it says whether the request must be
 * refused, and why. Then:
 *
 *   - validate (baton_raft_downgrade_check) must refuse what the model
 *     refuses;
 *   - the request itself (baton_pipeline_downgrade, what `enable` and
 *     `cancel` reach) is sent when the model refuses it: it must be
 *     refused, and change nothing (the node's role, term, log, version
 *     facts and configuration are as before). A request the model
 *     accepts is sent only when it is one the operator of downgrade.c
 *     could make then (in the seeds with downgrades: the target it would
 *     pick, or a cancel while no node runs the target), so that the run
 *     stays one an operator could finish; accepted, its version entry
 *     must be the last of the leader's log with the effect the docs
 *     give (enable: the floor at the target, the machine version at
 *     most the target's machine_max, the downgrade recorded; cancel: the
 *     floor and machine version recorded restored, none in progress);
 *   - the join check (baton_join_check, what the server runs on the
 *     leader's version facts) must refuse a joiner the model refuses,
 *     and admit one it admits.
 *
 * A failure starts with `operator safety:`. The model's facts about what
 * members run are the world's, for members whose release has not
 * changed since the leader won its term (the leader asks every member
 * once per election timeout and judges on the answers of its term, so a
 * restart since may not be known to it yet); the join check is judged on
 * the rows of the leader's version facts, what the server gives it.
 */
#include "world.h"

#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

/* Unknown operations and releases the table does not contain. */
#define CARELESS_BAD_OP 77u

static bool none(struct baton_release r)
{
	return r.major == 0 && r.minor == 0 && r.patch == 0;
}

static bool protocols_meet(const struct baton_profile *a,
			   const struct baton_profile *b)
{
	return a->proto_min.value <= b->proto_max.value &&
	       b->proto_min.value <= a->proto_max.value;
}

/* The model's verdict: why the request must be refused, or NULL. */
struct verdict {
	const char *why;
};

/* Index in the table of release r, or UINT32_MAX (walked here, not
 * through the core's lookups). */
static uint32_t table_index(const struct sim_world *w, struct baton_release r)
{
	for (uint32_t i = 0; i < w->n_releases; i++)
		if (baton_release_compare(w->releases[i].release, r) == 0)
			return i;
	return UINT32_MAX;
}

/* Member m's release as the leader l must know it: what it runs, when it
 * runs it since before l won its term; else NULL (unknown to the model). */
static const struct baton_profile *
settled(const struct sim_world *w, const struct sim_node *l, baton_node_id m)
{
	if (m == 0 || m > SIM_MAX_NODES)
		return NULL;
	const struct sim_node *n = &w->nodes[m];
	if (!n->exists || !n->alive ||
	    n->release_since_ms >= w->steady.won_ms[l->id])
		return NULL;
	return sim_profile(w, n);
}

static void judge_enable(const struct sim_world *w, const struct sim_node *l,
			 const struct baton_raft_status *s,
			 struct baton_release target, struct verdict *v)
{
	const struct baton_version_state *vs = &s->versions;
	if (!none(vs->downgrade.target)) {
		v->why = "a downgrade is in progress";
		return;
	}
	if (none(vs->floor)) {
		v->why = "the log records no floor";
		return;
	}
	uint32_t f = table_index(w, vs->floor), t = table_index(w, target);
	if (f == UINT32_MAX || f == 0 || t == UINT32_MAX || t + 1 != f) {
		v->why = "the target is not the release one step back from "
			 "the floor";
		return;
	}
	const struct baton_profile *tp = &w->releases[t];
	bool protocol = false;
	for (uint32_t i = 0; i < s->config.n; i++) {
		const struct baton_profile *p =
			settled(w, l, s->config.members[i].id);
		if (p == NULL)
			continue;
		int c = baton_release_compare(p->release, target);
		if (c < 0) {
			v->why = "a member runs a release below the target";
			return;
		}
		if (c == 0 && tp->machine_max.value < vs->machine.value) {
			v->why = "a member runs the target already and the log "
				 "holds entries of a machine version it lacks";
			return;
		}
		if (!protocols_meet(p, tp))
			protocol = true;
	}
	if (protocol) {
		v->why = "a member speaks no peer protocol in common with the "
			 "target";
	}
}

static void judge_cancel(const struct sim_world *w, const struct sim_node *l,
			 const struct baton_raft_status *s,
			 struct baton_release target, struct verdict *v)
{
	const struct baton_downgrade *d = &s->versions.downgrade;
	if (none(d->target)) {
		v->why = "no downgrade is in progress";
		return;
	}
	if (baton_release_compare(d->target, target) != 0) {
		v->why = "the downgrade in progress has another target";
		return;
	}
	for (uint32_t i = 0; i < s->config.n; i++) {
		const struct baton_profile *p =
			settled(w, l, s->config.members[i].id);
		if (p != NULL &&
		    baton_release_compare(p->release, target) <= 0) {
			v->why = "a member runs the target already";
			return;
		}
	}
}

static struct verdict judge(const struct sim_world *w, const struct sim_node *n,
			    const struct baton_raft_status *s, uint32_t op,
			    struct baton_release target)
{
	struct verdict v = {NULL};
	if (s->role != BATON_LEADER)
		v.why = "not the leader";
	else if (op == BATON_DOWNGRADE_ENABLE)
		judge_enable(w, n, s, target, &v);
	else if (op == BATON_DOWNGRADE_CANCEL)
		judge_cancel(w, n, s, target, &v);
	else
		v.why = "an unknown operation";
	return v;
}

/* What a refused request must leave as it was. */
struct seen {
	uint32_t role;
	baton_term term;
	baton_index last_index, commit, config_index, versions_index;
	struct baton_version_state versions;
};

static void look(const struct sim_node *n, struct seen *out)
{
	struct baton_raft_status s;
	memset(out, 0, sizeof *out);
	baton_raft_status(n->raft, &s);
	out->role = s.role;
	out->term = s.term;
	out->last_index = s.last_index;
	out->commit = s.commit_index;
	out->config_index = s.config_index;
	out->versions_index = s.versions_index;
	out->versions = s.versions;
}

static bool same(const struct seen *a, const struct seen *b)
{
	return a->role == b->role && a->term == b->term &&
	       a->last_index == b->last_index &&
	       a->config_index == b->config_index &&
	       a->versions_index == b->versions_index &&
	       memcmp(&a->versions, &b->versions, sizeof a->versions) == 0;
}

static const char *op_name(uint32_t op)
{
	return op == BATON_DOWNGRADE_ENABLE   ? "enable"
	       : op == BATON_DOWNGRADE_CANCEL ? "cancel"
					      : "unknown-op";
}

struct request {
	struct sim_world *w;
	bool cancel;
};

static void request_done(void *data, int status)
{
	struct request *q = data;
	sim_trace(q->w, "careless: request done: %s", baton_err_name(status));
	if (q->cancel)
		q->w->cancel_waiting = false;
	free(q);
}

/* Would the operator of downgrade.c make this request now? */
static bool operator_would(struct sim_world *w,
			   const struct baton_raft_status *s, uint32_t op,
			   struct baton_release target)
{
	if (w->p.downgrade_every_ms == 0 || w->liveness || w->cancel_waiting)
		return false;
	if (op == BATON_DOWNGRADE_ENABLE) {
		const struct baton_profile *p = sim_downgrade_target(w, s);
		return p != NULL &&
		       baton_release_compare(p->release, target) == 0;
	}
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		const struct sim_node *n = &w->nodes[i];
		if (n->exists &&
		    baton_release_compare(sim_profile(w, n)->release, target) <=
			    0)
			return false;
	}
	return true;
}

static void check_effect(struct sim_world *w, struct sim_node *n, uint32_t op,
			 struct baton_release target, const struct seen *before)
{
	struct seen after;
	look(n, &after);
	const struct baton_version_state *a = &after.versions,
					 *b = &before->versions;
	char t[BATON_RELEASE_STR_MAX];
	const char *wrong = NULL;
	if (after.versions_index != after.last_index ||
	    after.last_index != before->last_index + 1)
		wrong = "its version entry is not the one entry it appended";
	else if (op == BATON_DOWNGRADE_ENABLE &&
		 (baton_release_compare(a->floor, target) != 0 ||
		  baton_release_compare(a->downgrade.target, target) != 0 ||
		  baton_release_compare(a->downgrade.prev_floor, b->floor) !=
			  0 ||
		  a->downgrade.prev_machine.value != b->machine.value ||
		  a->machine.value > b->machine.value ||
		  a->machine.value > w->releases[table_index(w, target)]
					     .machine_max.value))
		wrong = "the floor, machine version or record is not what "
			"the docs say enable leaves";
	else if (op == BATON_DOWNGRADE_CANCEL &&
		 (!none(a->downgrade.target) ||
		  baton_release_compare(a->floor, b->downgrade.prev_floor) !=
			  0 ||
		  a->machine.value != b->downgrade.prev_machine.value))
		wrong = "the floor and machine version are not restored";
	if (wrong != NULL)
		sim_fail(w,
			 "operator safety: %s to %s accepted by node %llu: %s",
			 op_name(op), baton_release_format(target, t),
			 (unsigned long long)n->id, wrong);
}

/* One downgrade request on node n: validate, then maybe send it. */
static void downgrade_request(struct sim_world *w, struct sim_node *n,
			      uint32_t op, struct baton_release target)
{
	char t[BATON_RELEASE_STR_MAX], why[256];
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	struct verdict v = judge(w, n, &s, op, target);
	bool refuse = v.why != NULL;
	w->stats.careless++;
	struct baton_downgrade_plan plan;
	int rv = baton_raft_downgrade_check(n->raft, op, target, &plan, why,
					    sizeof why);
	sim_trace(w,
		  "careless: validate %s to %s on node %llu: %s (%s); the "
		  "model: %s",
		  op_name(op), baton_release_format(target, t),
		  (unsigned long long)n->id, baton_err_name(rv), why,
		  v.why != NULL ? v.why : "may be accepted");
	if (refuse && rv == 0) {
		sim_fail(w,
			 "operator safety: validate %s to %s accepted by node "
			 "%llu although %s",
			 op_name(op), baton_release_format(target, t),
			 (unsigned long long)n->id, v.why);
		return;
	}
	if (v.why != NULL && !refuse)
		return; /* a rule the core does not have yet: not sent */
	if (!refuse && (rv != 0 || !operator_would(w, &s, op, target)))
		return;
	struct seen before;
	look(n, &before);
	struct request *q = sim_xmalloc(sizeof *q);
	*q = (struct request){w, op == BATON_DOWNGRADE_CANCEL};
	rv = baton_pipeline_downgrade(n->pipe, op, target, request_done, q);
	sim_trace(w, "careless: %s to %s sent to node %llu: %s", op_name(op),
		  baton_release_format(target, t), (unsigned long long)n->id,
		  baton_err_name(rv));
	if (rv != 0) {
		free(q);
		struct seen after;
		look(n, &after);
		w->stats.careless_refused++;
		if (!same(&before, &after))
			sim_fail(w,
				 "operator safety: %s to %s refused by node "
				 "%llu (%s) but its log, version facts or "
				 "configuration changed",
				 op_name(op), baton_release_format(target, t),
				 (unsigned long long)n->id, baton_err_name(rv));
		sim_node_turn(w, n);
		return;
	}
	if (refuse) {
		sim_fail(w,
			 "operator safety: %s to %s accepted by node %llu "
			 "although %s",
			 op_name(op), baton_release_format(target, t),
			 (unsigned long long)n->id, v.why);
		return;
	}
	w->stats.careless_accepted++;
	if (op == BATON_DOWNGRADE_CANCEL)
		w->cancel_waiting = true;
	w->careless_last_op = op;
	w->careless_last_target = target;
	check_effect(w, n, op, target, &before);
	sim_node_turn(w, n);
	/* Typed twice: the second must be refused (in progress, or none). */
	if (!w->failed && n->alive && sim_chance(&w->careless_rng, 500))
		downgrade_request(w, n, op, target);
}

/* Any release: of the table, or one it does not contain. */
static struct baton_release any_release(struct sim_world *w)
{
	uint64_t k = sim_range(&w->careless_rng, 0, w->n_releases + 2);
	if (k < w->n_releases)
		return w->releases[k].release;
	if (k == w->n_releases)
		return (struct baton_release){9, 9, 9};
	if (k == w->n_releases + 1)
		return (struct baton_release){1, 1, 7};
	return (struct baton_release){0, 0, 0};
}

/* The join check for a fresh node of release r, on leader l. */
static void join_request(struct sim_world *w, struct sim_node *l, uint32_t r)
{
	struct baton_raft_status s;
	baton_raft_status(l->raft, &s);
	if (s.role != BATON_LEADER)
		return;
	const struct baton_version_state *vs = &s.versions;
	const struct baton_profile *j = &w->releases[r];
	const char *must = NULL;
	if (!none(vs->floor) &&
	    baton_release_compare(j->release, vs->floor) < 0)
		must = "its release is below the floor";
	else if (j->machine_max.value < vs->machine.value)
		must = "its machine_max is below the effective machine version";
	else {
		/* One protocol version that the joiner and every member
		 * speak. */
		uint32_t lo = j->proto_min.value, hi = j->proto_max.value;
		for (uint32_t i = 0; i < vs->n; i++) {
			const struct baton_profile *p = &vs->members[i].profile;
			if (p->proto_min.value > lo)
				lo = p->proto_min.value;
			if (p->proto_max.value < hi)
				hi = p->proto_max.value;
		}
		if (lo > hi)
			must = "no peer protocol version is common to it and "
			       "every member";
	}
	char why[256], a[BATON_RELEASE_STR_MAX];
	baton_node_id id = SIM_MAX_NODES + 1; /* never a member */
	int rv = baton_join_check(vs, id, j, NULL, why, sizeof why);
	w->stats.careless++;
	sim_trace(w,
		  "careless: join check of a %s node on leader %llu: %s "
		  "(%s); the model: %s",
		  baton_release_format(j->release, a),
		  (unsigned long long)l->id, baton_err_name(rv), why,
		  must != NULL ? must : "admitted");
	if (rv != 0)
		w->stats.careless_refused++;
	if (must != NULL && rv == 0)
		sim_fail(w,
			 "operator safety: the join check admits a %s node "
			 "although %s",
			 baton_release_format(j->release, a), must);
	else if (must == NULL && rv != 0)
		sim_fail(w,
			 "operator safety: the join check refuses a %s node "
			 "that the rules admit: %s",
			 baton_release_format(j->release, a), why);
}

void sim_careless(struct sim_world *w)
{
	if (w->liveness)
		return;
	sim_schedule(w,
		     sim_range(&w->careless_rng, 1,
			       2 * (uint64_t)w->p.careless_every_ms),
		     EV_CARELESS, 0, NULL);
	struct sim_node *n =
		sim_chance(&w->careless_rng, 800) ? sim_find_leader(w) : NULL;
	if (n == NULL) {
		uint32_t up[SIM_MAX_NODES], k = 0;
		for (uint32_t i = 1; i <= w->n_ids; i++)
			if (sim_usable(w, &w->nodes[i]))
				up[k++] = i;
		if (k == 0)
			return;
		n = &w->nodes[up[sim_range(&w->careless_rng, 0, k - 1)]];
	}
	uint64_t kind = sim_range(&w->careless_rng, 0, 9);
	if (kind == 0) {
		join_request(w, n,
			     (uint32_t)sim_range(&w->careless_rng, 0,
						 w->n_releases - 1));
	} else if (kind == 1 && w->careless_last_op != 0) {
		downgrade_request(w, n, w->careless_last_op,
				  w->careless_last_target);
	} else if (kind == 2) {
		downgrade_request(w, n, CARELESS_BAD_OP, any_release(w));
	} else {
		uint32_t op = kind < 6 ? BATON_DOWNGRADE_ENABLE
				       : BATON_DOWNGRADE_CANCEL;
		/* The target a careful operator would name, now and then. */
		struct baton_raft_status s;
		baton_raft_status(n->raft, &s);
		struct baton_release t = any_release(w);
		if (sim_chance(&w->careless_rng, 300)) {
			if (op == BATON_DOWNGRADE_CANCEL &&
			    !none(s.versions.downgrade.target))
				t = s.versions.downgrade.target;
			uint32_t f = table_index(w, s.versions.floor);
			if (op == BATON_DOWNGRADE_ENABLE && f != UINT32_MAX &&
			    f > 0)
				t = w->releases[f - 1].release;
		}
		downgrade_request(w, n, op, t);
	}
}

void sim_careless_start(struct sim_world *w)
{
	w->careless_rng.state = w->seed ^ 0x636172656c657373ull;
	if (w->p.failover_every_ms > 0 || !sim_chance(&w->careless_rng, 700))
		return;
	w->p.careless_every_ms =
		(uint32_t)sim_range(&w->careless_rng, 200, 3000);
	sim_schedule(w, w->p.careless_every_ms, EV_CARELESS, 0, NULL);
}
