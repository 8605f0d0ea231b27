/*
 * Releases in the simulated world: each node runs a release of the table
 * (baton_releases()), its options carry that release's profile, and the
 * world upgrades nodes while the faults go on, as an operator rolling a
 * cluster forward does: stop a node, start the newer binary on the same
 * disk. Founders start at the newest release, at releases drawn from the
 * table, or all at an old one and are then moved up one release at a
 * time; fresh nodes join at a release the join check admits. The liveness
 * phase finishes the upgrade, so every run ends on the newest release.
 *
 * The network between releases behaves as the real transport does: two
 * releases whose peer protocol ranges do not meet have no connection, so
 * nothing passes between them; a release before the version rules (below
 * 1.0.0) neither sends nor understands the info request (its decoder skips
 * the unknown message); and what a negotiated protocol no longer carries
 * (protocol 3 drops the leader's profile from appends) does not arrive.
 *
 * The invariants of the effective machine version (DESIGN.md, "Machine
 * upgrade"), each a "version safety:" failure:
 *   - no version entry a leader appends names a machine version above the
 *     leader's own machine_max; under ALL, above the machine_max of any
 *     member of the configuration in force there (their true release at
 *     that moment, not what the leader believes); under QUORUM, a raise
 *     needs a majority of the voters to run a release implementing it;
 *   - no log lowers the effective machine version;
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

static bool before_rules(const struct baton_profile *p)
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
	    (before_rules(a) || before_rules(b)))
		return false;
	uint32_t proto = a->proto_max.value < b->proto_max.value
				 ? a->proto_max.value
				 : b->proto_max.value;
	if (proto >= 3 && p->m.type == BATON_MSG_APPEND)
		memset(&p->m.u.append.leader, 0, sizeof p->m.u.append.leader);
	return true;
}

/* ---- upgrades ---------------------------------------------------------------
 */

/* Stop node n and bring it back at release r on the same disk. A node that
 * is down comes up at r when it restarts. */
static void restart_at(struct sim_world *w, struct sim_node *n, uint32_t r,
		       bool later)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	sim_trace(w, "upgrade: node %llu from release %s to %s%s",
		  (unsigned long long)n->id, sim_release_name(w, n->release, a),
		  sim_release_name(w, r, b), n->alive ? "" : " (down)");
	w->stats.upgrades++;
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
	restart_at(w, n, r, true);
}

void sim_upgrade_all(struct sim_world *w)
{
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		struct sim_node *n = &w->nodes[i];
		if (n->exists && n->release != newest(w))
			restart_at(w, n, newest(w), false);
	}
	sim_trace(w, "upgrade: every node runs the newest release");
}

/* The join check (DESIGN.md, "Join"), as the leader and the joiner apply
 * it, on what the members truly run: a protocol common to every member
 * and the joiner, and a machine_max not below the effective version. */
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
	return lo <= hi && j->machine_max.value >= s->versions.machine.value;
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
 * log no longer tells (compacted, and the snapshot is not the disk's). */
static bool versions_before(const struct sim_node *n, baton_index i,
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

void sim_check_version_entry(struct sim_world *w, struct sim_node *n,
			     const struct baton_update *u,
			     const struct baton_entry *e)
{
	struct baton_version_state v, before;
	if (baton_version_state_decode(e->buf, e->len, &v) != 0)
		return; /* a format the core cannot read: it stalls there */
	uint32_t m = v.machine.value;
	bool known = versions_before(n, e->index, &before);
	if (known && m < before.machine.value) {
		sim_fail(w,
			 "version safety: node %llu's log lowers the machine "
			 "version from %u to %u at %llu (term %llu)",
			 (unsigned long long)n->id, before.machine.value, m,
			 (unsigned long long)e->index,
			 (unsigned long long)e->term);
		return;
	}
	if (u->role != BATON_LEADER || e->term != u->term)
		return; /* checked where it was made: at its leader */
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

/* ---- stalls: needs-upgrade is the one the world can cause ---------------- */

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
	if (m <= machine_max(w, n)) {
		sim_fail(w, "node %llu: stopped applying at %llu: %s",
			 (unsigned long long)n->id, (unsigned long long)index,
			 n->stall_why);
		return;
	}
	if (n->needs_upgrade != index) {
		char rel[BATON_RELEASE_STR_MAX];
		w->stats.needs_upgrade++;
		sim_trace(w,
			  "node %llu needs-upgrade at %llu: machine version "
			  "%u, release %s implements up to %u",
			  (unsigned long long)n->id, (unsigned long long)index,
			  m, sim_release_name(w, n->release, rel),
			  machine_max(w, n));
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
