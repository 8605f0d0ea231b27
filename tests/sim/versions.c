/*
 * Releases in the simulated world: each node runs a release of the table
 * (baton_releases()), its options carry that release's profile, and the
 * world upgrades nodes while the faults go on, as an operator rolling a
 * cluster forward does: stop a node, start the newer binary on the same
 * disk. Founders start at the newest release, at releases drawn from the
 * table, or all at an old one and are then moved up one release at a
 * time; fresh nodes join at a release the join check admits. The liveness
 * phase finishes the upgrade, so every run ends on the run's newest
 * release. That is the table's newest when the founders start there; a
 * run that mixes releases stops at the newest one an older release can
 * roll to (1.3.0: 2.0.0 speaks peer protocol 4 only and no 1.x release
 * does, so a 1.x cluster moves to it through the relay, not by restarts),
 * and a cluster of 2.0.0 founders admits no 1.x joiner.
 *
 * The network between releases behaves as the real transport does: two
 * releases whose peer protocol ranges do not meet have no connection, so
 * nothing passes between them; a release before the version rules (below
 * 1.0.0) neither sends nor understands the info request (its decoder skips
 * the unknown message); and what a negotiated protocol no longer carries
 * (protocol 3 drops the leader's profile from appends) does not arrive.
 *
 * The invariants of the effective machine version (DESIGN.md, "Machine
 * upgrade"), of the release floor and of downgrades ("Release floor",
 * "Downgrade"), each a "version safety:" failure:
 *   - no version entry a leader appends names a machine version above the
 *     leader's own machine_max; under ALL, above the machine_max of any
 *     member of the configuration in force there (their true release at
 *     that moment, not what the leader believes); under QUORUM, a raise
 *     needs a majority of the voters to run a release implementing it;
 *   - no log lowers the effective machine version or the release floor,
 *     but with the entry that enables a downgrade, which lowers the floor
 *     to the target (the release one step back from the floor) and the
 *     machine version to the target's machine_max at once; while a
 *     downgrade is in progress no entry raises either or changes its
 *     target; the entry that clears it either restores what it recorded
 *     (cancel) or keeps both (the end: every member runs the target);
 *   - the floor rises only to a release a majority of the voters runs
 *     (Halon's rule: halon.c);
 *   - no node's machine is made to apply, convert to, restore or write a
 *     snapshot under a machine version its release does not implement
 *     (machine.c asks sim_check_machine_version first).
 * Nodes with equal applied index reaching equal states is checks.c's state
 * machine safety: machine version 2 changes the state the commands reach
 * (machine.c), so an entry applied under the wrong version shows there.
 */
#include "world.h"

#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

static uint32_t newest(const struct sim_world *w)
{
	return w->top_release;
}

/* The newest release of the table that an older one shares a peer
 * protocol with: what rolling upgrades reach. */
static uint32_t rolling_top(const struct sim_world *w)
{
	for (uint32_t r = w->n_releases; r-- > 1;) {
		const struct baton_profile *p = &w->releases[r];
		for (uint32_t o = 0; o < r; o++)
			if (w->releases[o].proto_min.value <=
				    p->proto_max.value &&
			    p->proto_min.value <=
				    w->releases[o].proto_max.value)
				return r;
	}
	return w->n_releases - 1;
}

const struct baton_profile *sim_profile(const struct sim_world *w,
					const struct sim_node *n)
{
	return &w->releases[n->release];
}

const char *sim_release_name(const struct sim_world *w, uint32_t release,
			     char buf[BATON_RELEASE_STR_MAX])
{
	return baton_release_format(w->releases[release].release, buf);
}

static uint32_t machine_max(const struct sim_world *w, const struct sim_node *n)
{
	return sim_profile(w, n)->machine_max.value;
}

/* ---- the founders' releases ---------------------------------------------- */

void sim_versions_init(struct sim_world *w)
{
	w->releases = baton_releases(&w->n_releases);
	w->top_release = w->p.start_releases == SIM_START_NEWEST
				 ? w->n_releases - 1
				 : rolling_top(w);
	for (uint32_t i = 0; i <= SIM_MAX_NODES; i++)
		w->nodes[i].release = newest(w);
	/* The oldest start is either release before the ones with machine
	 * version 2 (the table lists them oldest first). */
	uint32_t old = 0;
	while (old + 1 < w->n_releases &&
	       w->releases[old + 1].machine_max.value == 1 &&
	       sim_chance(&w->rng, 500))
		old++;
	for (uint32_t i = 1; i <= w->p.n_nodes; i++) {
		struct sim_node *n = &w->nodes[i];
		switch (w->p.start_releases) {
		case SIM_START_MIXED:
			n->release = (uint32_t)sim_range(&w->rng, 0, newest(w));
			break;
		case SIM_START_OLDEST:
			n->release = old;
			break;
		default:
			break;
		}
		char rel[BATON_RELEASE_STR_MAX];
		sim_trace(w, "node %u starts at release %s", i,
			  sim_release_name(w, n->release, rel));
	}
	sim_trace(w, "machine upgrade strategy %s, upgrades every %u ms",
		  w->p.machine_upgrade == BATON_UPGRADE_QUORUM ? "quorum"
							       : "all",
		  w->p.upgrade_every_ms);
}

/* ---- the network between releases ---------------------------------------- */

bool sim_before_rules(const struct baton_profile *p)
{
	return baton_release_compare(p->release,
				     (struct baton_release){1, 0, 0}) < 0;
}

bool sim_versions_deliverable(struct sim_world *w, struct sim_packet *p,
			      const struct sim_node *to)
{
	const struct baton_profile *a = &w->releases[p->sender_release];
	const struct baton_profile *b = sim_profile(w, to);
	if (a->proto_max.value < b->proto_min.value ||
	    b->proto_max.value < a->proto_min.value) {
		w->stats.msgs_refused++;
		return false;
	}
	if ((p->m.type == BATON_MSG_INFO ||
	     p->m.type == BATON_MSG_INFO_RESULT) &&
	    (sim_before_rules(a) || sim_before_rules(b)))
		return false;
	/* Nor does it name its release in a vote request. */
	if (p->m.type == BATON_MSG_VOTE && sim_before_rules(a))
		memset(&p->m.u.vote.candidate, 0, sizeof p->m.u.vote.candidate);
	uint32_t proto = a->proto_max.value < b->proto_max.value
				 ? a->proto_max.value
				 : b->proto_max.value;
	if (proto >= 3 && p->m.type == BATON_MSG_APPEND)
		memset(&p->m.u.append.leader, 0, sizeof p->m.u.append.leader);
	/* Clock samples travel from protocol 4 on (clock.c). */
	if (!sim_clock_carried(proto) && p->m.type == BATON_MSG_APPEND)
		memset(&p->m.u.append.clock, 0, sizeof p->m.u.append.clock);
	if (!sim_clock_carried(proto) && p->m.type == BATON_MSG_APPEND_RESULT)
		memset(&p->m.u.append_result.clock, 0,
		       sizeof p->m.u.append_result.clock);
	return true;
}

/* ---- upgrades ---------------------------------------------------------------
 */

uint32_t sim_release_index(const struct sim_world *w, struct baton_release r)
{
	for (uint32_t i = 0; i < w->n_releases; i++)
		if (baton_release_compare(w->releases[i].release, r) == 0)
			return i;
	return UINT32_MAX;
}

void sim_restart_at(struct sim_world *w, struct sim_node *n, uint32_t r,
		    bool later)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	sim_trace(w, "%s: node %llu from release %s to %s%s",
		  r > n->release ? "upgrade" : "downgrade",
		  (unsigned long long)n->id, sim_release_name(w, n->release, a),
		  sim_release_name(w, r, b), n->alive ? "" : " (down)");
	if (r > n->release)
		w->stats.upgrades++;
	else
		w->stats.downgrade_restarts++;
	bool was_alive = n->alive;
	if (was_alive)
		sim_node_crash(w, n);
	n->release = r;
	if (was_alive && later)
		sim_schedule(w,
			     sim_range(&w->rng, 1,
				       2 * (uint64_t)w->p.election_timeout_ms),
			     EV_RESTART, (uint32_t)n->id, NULL);
}

void sim_upgrade(struct sim_world *w)
{
	if (w->liveness)
		return;
	sim_schedule(w,
		     sim_range(&w->rng, 1, 2 * (uint64_t)w->p.upgrade_every_ms),
		     EV_UPGRADE, 0, NULL);
	/* An operator does not roll forward while rolling back. */
	struct sim_node *l = sim_find_leader(w);
	struct baton_raft_status s;
	if (l != NULL && sim_downgrade_of(l, &s) != NULL)
		return;
	uint32_t ids[SIM_MAX_NODES], k = 0, stalled[SIM_MAX_NODES], ks = 0;
	uint32_t lowest = newest(w);
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		const struct sim_node *n = &w->nodes[i];
		if (!n->exists || n->release == newest(w))
			continue;
		if (n->release < lowest)
			lowest = n->release;
		ids[k++] = i;
		if (n->needs_upgrade != 0)
			stalled[ks++] = i;
	}
	if (k == 0)
		return;
	/* An operator upgrades first a node that says it needs it; rolling
	 * from an old start, the oldest next, one release at a time. */
	struct sim_node *n;
	if (ks > 0 && sim_chance(&w->rng, 500)) {
		n = &w->nodes[stalled[sim_rand(&w->rng) % ks]];
	} else if (w->p.start_releases == SIM_START_OLDEST) {
		uint32_t j = 0;
		for (uint32_t i = 0; i < k; i++)
			if (w->nodes[ids[i]].release == lowest)
				ids[j++] = ids[i];
		n = &w->nodes[ids[sim_rand(&w->rng) % j]];
	} else {
		n = &w->nodes[ids[sim_rand(&w->rng) % k]];
	}
	uint32_t r = n->release + 1;
	if (w->p.start_releases != SIM_START_OLDEST && sim_chance(&w->rng, 500))
		r = (uint32_t)sim_range(&w->rng, n->release + 1, newest(w));
	sim_restart_at(w, n, r, true);
}

/* The join check (DESIGN.md, "Join"), as the leader and the joiner apply
 * it, on what the members truly run: a protocol common to every member
 * and the joiner, a machine_max not below the effective version, and a
 * release not below the release floor. */
static bool may_join(const struct sim_world *w,
		     const struct baton_raft_status *s, uint32_t r)
{
	const struct baton_profile *j = &w->releases[r];
	uint32_t lo = j->proto_min.value, hi = j->proto_max.value;
	for (uint32_t i = 0; i < s->config.n; i++) {
		baton_node_id id = s->config.members[i].id;
		if (id > SIM_MAX_NODES || !w->nodes[id].exists)
			continue;
		const struct baton_profile *p = sim_profile(w, &w->nodes[id]);
		if (p->proto_min.value > lo)
			lo = p->proto_min.value;
		if (p->proto_max.value < hi)
			hi = p->proto_max.value;
	}
	return lo <= hi && j->machine_max.value >= s->versions.machine.value &&
	       baton_release_compare(j->release, s->versions.floor) >= 0;
}

bool sim_fresh_release(struct sim_world *w, struct sim_node *l,
		       uint32_t *release)
{
	struct baton_raft_status s;
	baton_raft_status(l->raft, &s);
	if (sim_chance(&w->rng, w->p.fresh_old_per_mille)) {
		uint32_t r = (uint32_t)sim_range(&w->rng, 0, newest(w));
		if (may_join(w, &s, r)) {
			*release = r;
			return true;
		}
	}
	for (uint32_t r = newest(w) + 1; r-- > 0;) {
		if (may_join(w, &s, r)) {
			*release = r;
			return true;
		}
	}
	return false;
}

/* ---- the invariants of version entries ------------------------------------
 */

/* The version state in force just before index i in n's log: false if the
 * log no longer tells (compacted, and the core does not know the
 * snapshot's facts, nor is it the disk's). */
bool sim_versions_before(const struct sim_node *n, baton_index i,
			 struct baton_version_state *out)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	for (baton_index j = i - 1; j >= s.first_index && j > 0; j--) {
		const struct baton_entry *e = baton_raft_entry(n->raft, j);
		if (e != NULL && e->type == BATON_ENTRY_VERSION)
			return baton_version_state_decode(e->buf, e->len,
							  out) == 0;
	}
	if (s.snapshot_index + 1 < s.first_index)
		return false;
	if (s.snapshot_index == 0) {
		baton_version_state_initial(out);
		return true;
	}
	struct baton_snapshot_meta meta;
	if (baton_raft_snapshot_meta(n->raft, s.snapshot_index, &meta) == 0) {
		*out = meta.versions;
		return true;
	}
	const struct sim_disk *d = &n->disk;
	if (!d->has_snap || d->snap.meta.index != s.snapshot_index)
		return false;
	*out = d->snap.meta.versions;
	return true;
}

/* The configuration in force at index i of n's log. */
static bool config_at(const struct sim_node *n, baton_index i,
		      struct baton_config *out)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	if (s.config_index <= i) {
		*out = s.config;
		return true;
	}
	for (baton_index j = i; j >= s.first_index && j > 0; j--) {
		const struct baton_entry *e = baton_raft_entry(n->raft, j);
		if (e != NULL && e->type == BATON_ENTRY_CONFIG)
			return baton_config_decode(e->buf, e->len, out) == 0;
	}
	return false;
}

static void check_all(struct sim_world *w, const struct sim_node *l,
		      const struct baton_entry *e, uint32_t m,
		      const struct baton_config *c)
{
	for (uint32_t i = 0; i < c->n; i++) {
		baton_node_id id = c->members[i].id;
		if (id > SIM_MAX_NODES || !w->nodes[id].exists)
			continue;
		const struct sim_node *x = &w->nodes[id];
		if (machine_max(w, x) >= m)
			continue;
		char rel[BATON_RELEASE_STR_MAX];
		sim_fail(w,
			 "version safety: under ALL, leader %llu appended a "
			 "version entry with machine version %u at %llu (term "
			 "%llu), but member %llu runs release %s (machine "
			 "versions up to %u)",
			 (unsigned long long)l->id, m,
			 (unsigned long long)e->index,
			 (unsigned long long)e->term, (unsigned long long)id,
			 sim_release_name(w, x->release, rel),
			 machine_max(w, x));
		return;
	}
}

static void check_quorum(struct sim_world *w, const struct sim_node *l,
			 const struct baton_entry *e, uint32_t m,
			 const struct baton_config *c)
{
	uint32_t voters = 0, ready = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		baton_node_id id = c->members[i].id;
		if (c->members[i].role != BATON_VOTER)
			continue;
		voters++;
		ready += id <= SIM_MAX_NODES && w->nodes[id].exists &&
			 machine_max(w, &w->nodes[id]) >= m;
	}
	if (ready >= voters / 2 + 1)
		return;
	sim_fail(w,
		 "version safety: under QUORUM, leader %llu raised the machine "
		 "version to %u at %llu (term %llu), but only %u of its %u "
		 "voters run a release implementing it",
		 (unsigned long long)l->id, m, (unsigned long long)e->index,
		 (unsigned long long)e->term, ready, voters);
}

static bool downgrading(const struct baton_version_state *s)
{
	struct baton_release none = {0, 0, 0};
	return baton_release_compare(s->downgrade.target, none) != 0;
}

static const char *rel_str(struct baton_release r,
			   char buf[BATON_RELEASE_STR_MAX])
{
	return baton_release_format(r, buf);
}

/* What a version entry may change of the one before it in the same log:
 * the floor and the machine version only grow, but for a downgrade, which
 * lowers both at the entry enabling it, raises neither while it lasts, and
 * at its end keeps the floor (cancel: restores both). */
static void check_transition(struct sim_world *w, const struct sim_node *n,
			     const struct baton_entry *e,
			     const struct baton_version_state *b,
			     const struct baton_version_state *v)
{
	char x[BATON_RELEASE_STR_MAX], y[BATON_RELEASE_STR_MAX],
		z[BATON_RELEASE_STR_MAX];
	unsigned long long id = n->id, i = e->index, t = e->term;
	int floor_cmp = baton_release_compare(v->floor, b->floor);
	uint32_t bm = b->machine.value, vm = v->machine.value;
	const struct baton_downgrade *bd = &b->downgrade, *vd = &v->downgrade;
	if (!downgrading(b) && downgrading(v)) {
		const struct baton_profile *prev =
			baton_release_previous(b->floor);
		if (prev == NULL ||
		    baton_release_compare(prev->release, vd->target) != 0)
			sim_fail(w,
				 "version safety: node %llu's log enables a "
				 "downgrade to %s at %llu (term %llu), not one "
				 "step back from the release floor %s",
				 id, rel_str(vd->target, x), i, t,
				 rel_str(b->floor, y));
		else if (baton_release_compare(v->floor, vd->target) > 0)
			sim_fail(w,
				 "version safety: node %llu's log enables a "
				 "downgrade to %s at %llu (term %llu) but "
				 "leaves the release floor at %s",
				 id, rel_str(vd->target, x), i, t,
				 rel_str(v->floor, y));
		else if (vm > prev->machine_max.value)
			sim_fail(w,
				 "version safety: node %llu's log enables a "
				 "downgrade to %s at %llu (term %llu) but "
				 "leaves the machine version at %u, above the "
				 "%u of %s",
				 id, rel_str(vd->target, x), i, t, vm,
				 prev->machine_max.value, x);
		else if (baton_release_compare(vd->prev_floor, b->floor) != 0 ||
			 vd->prev_machine.value != bm)
			sim_fail(
				w,
				"version safety: node %llu's log enables a "
				"downgrade at %llu (term %llu) recording floor "
				"%s and machine version %u before it, where "
				"the log had %s and %u",
				id, i, t, rel_str(vd->prev_floor, x),
				vd->prev_machine.value, rel_str(b->floor, y),
				bm);
		return;
	}
	if (downgrading(b) && downgrading(v)) {
		if (baton_release_compare(bd->target, vd->target) != 0)
			sim_fail(w,
				 "version safety: node %llu's log changes the "
				 "target of the downgrade in progress from %s "
				 "to %s at %llu (term %llu)",
				 id, rel_str(bd->target, x),
				 rel_str(vd->target, y), i, t);
		else if (floor_cmp > 0 || vm > bm)
			sim_fail(w,
				 "version safety: node %llu's log raises the "
				 "release floor from %s to %s (machine version "
				 "%u to %u) at %llu (term %llu), during the "
				 "downgrade to %s",
				 id, rel_str(b->floor, x), rel_str(v->floor, y),
				 bm, vm, i, t, rel_str(bd->target, z));
		else if (floor_cmp < 0 || vm < bm)
			sim_fail(w,
				 "version safety: node %llu's log lowers the "
				 "release floor from %s to %s (machine version "
				 "%u to %u) at %llu (term %llu), after the "
				 "downgrade to %s was enabled",
				 id, rel_str(b->floor, x), rel_str(v->floor, y),
				 bm, vm, i, t, rel_str(bd->target, z));
		return;
	}
	if (downgrading(b)) {
		/* Cancelled: both restored. Ended: the floor kept (the machine
		 * version may then rise, as after any other entry). */
		bool cancel =
			baton_release_compare(v->floor, bd->prev_floor) == 0 &&
			vm == bd->prev_machine.value;
		if (!cancel && (floor_cmp != 0 || vm < bm))
			sim_fail(w,
				 "version safety: node %llu's log clears the "
				 "downgrade to %s at %llu (term %llu) with "
				 "floor %s and machine version %u: neither "
				 "what it recorded (%s, %u) nor kept",
				 id, rel_str(bd->target, x), i, t,
				 rel_str(v->floor, y), vm,
				 rel_str(bd->prev_floor, z),
				 bd->prev_machine.value);
		return;
	}
	if (floor_cmp < 0)
		sim_fail(w,
			 "version safety: node %llu's log lowers the release "
			 "floor from %s to %s at %llu (term %llu) without a "
			 "downgrade",
			 id, rel_str(b->floor, x), rel_str(v->floor, y), i, t);
	else if (vm < bm)
		sim_fail(w,
			 "version safety: node %llu's log lowers the machine "
			 "version from %u to %u at %llu (term %llu)",
			 id, bm, vm, i, t);
}

/* The leader's own view of the entry it appended: what the run counts. */
static void leader_entry(struct sim_world *w, struct sim_node *n,
			 const struct baton_entry *e, bool known,
			 const struct baton_version_state *b,
			 const struct baton_version_state *v)
{
	char x[BATON_RELEASE_STR_MAX], y[BATON_RELEASE_STR_MAX];
	/* Halon's rule: a new leader raises the floor only to what a
	 * majority runs (halon.c), so its term may open below its release. */
	n->opened_term = e->term;
	if (!known)
		return;
	bool was = downgrading(b), is = downgrading(v);
	w->stats.downgrades += !was && is;
	if (was && !is) {
		bool ended = baton_release_compare(v->floor, b->floor) == 0;
		w->stats.downgrade_ends += ended;
		w->stats.cancels += !ended;
		sim_trace(
			w,
			"versions: leader %llu %s the downgrade to %s at %llu",
			(unsigned long long)n->id, ended ? "ends" : "cancels",
			rel_str(b->downgrade.target, x),
			(unsigned long long)e->index);
	} else if (!was && !is &&
		   baton_release_compare(v->floor, b->floor) > 0) {
		w->stats.floor_raises++;
		sim_trace(w,
			  "versions: leader %llu raises the release floor "
			  "from %s to %s at %llu",
			  (unsigned long long)n->id, rel_str(b->floor, x),
			  rel_str(v->floor, y), (unsigned long long)e->index);
	} else if (!was && is) {
		sim_trace(w,
			  "versions: leader %llu enables a downgrade to %s at "
			  "%llu (floor %s, machine version %u)",
			  (unsigned long long)n->id,
			  rel_str(v->downgrade.target, x),
			  (unsigned long long)e->index, rel_str(v->floor, y),
			  v->machine.value);
	}
}

void sim_check_version_entry(struct sim_world *w, struct sim_node *n,
			     const struct baton_update *u,
			     const struct baton_entry *e)
{
	struct baton_version_state v, before;
	if (baton_version_state_decode(e->buf, e->len, &v) != 0)
		return; /* a format the core cannot read: it stalls there */
	uint32_t m = v.machine.value;
	bool known = sim_versions_before(n, e->index, &before);
	if (known)
		check_transition(w, n, e, &before, &v);
	if (w->failed || u->role != BATON_LEADER || e->term != u->term)
		return; /* checked where it was made: at its leader */
	leader_entry(w, n, e, known, &before, &v);
	if (w->failed)
		return;
	bool raise = known && m > before.machine.value;
	if (raise) {
		w->stats.version_raises++;
		sim_trace(w,
			  "versions: leader %llu raises the machine version "
			  "from %u to %u at %llu",
			  (unsigned long long)n->id, before.machine.value, m,
			  (unsigned long long)e->index);
	}
	if (m > w->max_machine)
		w->max_machine = m;
	if (m > machine_max(w, n)) {
		char rel[BATON_RELEASE_STR_MAX];
		sim_fail(w,
			 "version safety: leader %llu (release %s, machine "
			 "versions up to %u) appended a version entry with "
			 "machine version %u at %llu (term %llu)",
			 (unsigned long long)n->id,
			 sim_release_name(w, n->release, rel),
			 machine_max(w, n), m, (unsigned long long)e->index,
			 (unsigned long long)e->term);
		return;
	}
	struct baton_config c;
	if (!config_at(n, e->index, &c))
		return;
	if (w->p.machine_upgrade == BATON_UPGRADE_ALL)
		check_all(w, n, e, m, &c);
	else if (raise)
		check_quorum(w, n, e, m, &c);
}

bool sim_check_machine_version(struct sim_node *n, uint32_t v, const char *what,
			       baton_index index)
{
	struct sim_world *w = n->w;
	if (v <= machine_max(w, n))
		return true;
	char rel[BATON_RELEASE_STR_MAX];
	sim_fail(w,
		 "version safety: node %llu (release %s, machine versions up "
		 "to %u) was made to %s %llu, which needs machine version %u",
		 (unsigned long long)n->id,
		 sim_release_name(w, n->release, rel), machine_max(w, n), what,
		 (unsigned long long)index, v);
	return false;
}

/* ---- stalls: needs-upgrade and the floor hold are the ones the world can
 * cause ---------------------------------------------------------------- */

void sim_stall_reported(struct sim_node *n, baton_index index, const char *why)
{
	if (n->stall_pending == 0 || index < n->stall_pending)
		n->stall_pending = index;
	snprintf(n->stall_why, sizeof n->stall_why, "%s", why);
}

/* The machine version the stall at `index` is about (0: none known): a
 * version entry there, or the snapshot there (installed from the leader in
 * this step, or loaded from the disk at boot), or what the core says. */
static uint32_t stall_machine(const struct sim_node *n, baton_index index,
			      const struct baton_snapshot_meta *hint)
{
	const struct baton_entry *e = baton_raft_entry(n->raft, index);
	struct baton_version_state v;
	if (e != NULL && e->type == BATON_ENTRY_VERSION &&
	    baton_version_state_decode(e->buf, e->len, &v) == 0)
		return v.machine.value;
	if (hint != NULL && hint->index == index)
		return hint->versions.machine.value;
	if (n->disk.has_snap && n->disk.snap.meta.index == index)
		return n->disk.snap.meta.versions.machine.value;
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	return s.stalled_index == index ? s.needs_machine.value : 0;
}

/* The floor hold (future data), under the version-aware policy: the
 * release floor in force at `index` (the stall may have been lifted since,
 * within the same turn, by a downgrade arriving behind it), the latest one
 * of n's log, or that of a leader's snapshot the core would not install
 * there (status.needs_release) is above what n runs. */
static bool floor_above(const struct sim_world *w, const struct sim_node *n,
			baton_index index, struct baton_release *floor)
{
	struct baton_release mine = sim_profile(w, n)->release;
	if (sim_policy(w, n) != BATON_ELECTION_VERSION_AWARE)
		return false;
	struct baton_version_state v;
	if (sim_versions_before(n, index + 1, &v) &&
	    baton_release_compare(v.floor, mine) > 0) {
		*floor = v.floor;
		return true;
	}
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	*floor = s.stalled_index == index ? s.needs_release : s.versions.floor;
	return baton_release_compare(s.versions.floor, mine) > 0 ||
	       (s.stalled_index == index &&
		baton_release_compare(s.needs_release, mine) > 0);
}

void sim_stall_judge(struct sim_world *w, struct sim_node *n,
		     const struct baton_snapshot_meta *hint)
{
	if (!n->alive || n->raft == NULL)
		return;
	if (n->stall_pending == 0) {
		if (baton_raft_stalled_index(n->raft) == 0)
			n->needs_upgrade = 0; /* lifted */
		return;
	}
	baton_index index = n->stall_pending;
	n->stall_pending = 0;
	uint32_t m = stall_machine(n, index, hint);
	struct baton_release floor;
	bool machine = m > machine_max(w, n);
	if (!machine && !floor_above(w, n, index, &floor)) {
		sim_fail(w, "node %llu: stopped applying at %llu: %s",
			 (unsigned long long)n->id, (unsigned long long)index,
			 n->stall_why);
		return;
	}
	if (n->needs_upgrade != index) {
		char rel[BATON_RELEASE_STR_MAX], fl[BATON_RELEASE_STR_MAX];
		sim_release_name(w, n->release, rel);
		if (machine) {
			w->stats.needs_upgrade++;
			sim_trace(w,
				  "node %llu needs-upgrade at %llu: machine "
				  "version %u, release %s implements up to %u",
				  (unsigned long long)n->id,
				  (unsigned long long)index, m, rel,
				  machine_max(w, n));
		} else {
			w->stats.floor_holds++;
			sim_trace(w,
				  "node %llu holds at %llu: release floor %s "
				  "above its release %s",
				  (unsigned long long)n->id,
				  (unsigned long long)index,
				  baton_release_format(floor, fl), rel);
		}
	}
	n->needs_upgrade = index;
}

/* ---- liveness ---------------------------------------------------------------
 */

bool sim_versions_live(struct sim_world *w, const struct baton_config *c)
{
	uint32_t target = w->releases[newest(w)].machine_max.value;
	for (uint32_t i = 0; i < c->n; i++) {
		baton_node_id id = c->members[i].id;
		if (id > SIM_MAX_NODES)
			return false;
		struct sim_node *m = &w->nodes[id];
		if (!m->alive)
			return false;
		struct baton_pipeline_status s;
		baton_pipeline_status(m->pipe, &s);
		if (s.applied_versions.machine.value < target)
			return false;
	}
	return true;
}
