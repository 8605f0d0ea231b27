/*
 * Halon's rule (DESIGN.md, "Release floor"): a leader
 * whose release is not the majority's may serve, but the release floor
 * rises to a release only once a majority of the voters run it or newer.
 * Otherwise the old nodes, a majority, would be left below the floor
 * (stalled, unable to lead) by one new node, and a plain rollback would be
 * gone.
 *
 * The invariant, a "version safety:" failure (scripts/mutants counts it):
 * no version entry a leader appends raises the floor of its log to a
 * release R unless a majority of the voters of the configuration in force
 * at that index run R or newer at that moment: their true release in the
 * world, not what the leader was told (the world only moves a node to an
 * older release during a downgrade, which raises no floor). Its other half
 * (check_lag): a leader that heard from every member, all on its release
 * or newer, does not leave the floor below its release. Planted bugs:
 * tests/mutants/floor-raised-by-a-lone-leader.patch (the old rule: every
 * new leader raises the floor to its own release) and
 * floor-never-raised.patch.
 */
#include "halon.h"

#include "baton/assert.h"

#include <string.h>

/* The configuration in force at index i of n's log (false: unknown). */
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

/* Safety: a raise to v->floor needs a majority running it or newer. */
static void check_raise(struct sim_world *w, const struct sim_node *n,
			const struct baton_entry *e,
			const struct baton_version_state *before,
			const struct baton_version_state *v,
			const struct baton_config *c)
{
	if (baton_release_compare(v->floor, before->floor) <= 0)
		return; /* not a raise */
	uint32_t voters = 0, running = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		baton_node_id id = c->members[i].id;
		if (c->members[i].role != BATON_VOTER)
			continue;
		voters++;
		if (id > SIM_MAX_NODES || !w->nodes[id].exists)
			continue;
		struct baton_release r = sim_profile(w, &w->nodes[id])->release;
		running += baton_release_compare(r, v->floor) >= 0;
	}
	BATON_ASSERT(running <= voters);
	if (running >= voters / 2 + 1)
		return;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX],
		m[BATON_RELEASE_STR_MAX];
	sim_fail(w,
		 "version safety: leader %llu (release %s) raised the release "
		 "floor from %s to %s at %llu (term %llu), but only %u of its "
		 "%u voters run %s or newer (Halon's rule)",
		 (unsigned long long)n->id,
		 baton_release_format(sim_profile(w, n)->release, m),
		 baton_release_format(before->floor, a),
		 baton_release_format(v->floor, b),
		 (unsigned long long)e->index, (unsigned long long)e->term,
		 running, voters, b);
}

/* The other half, so that a floor that never rises is caught too: an
 * entry made after the first of its term (at a tick or an operator's
 * request, steps that take in no message, so the leader's live table now
 * is the one the entry was made from), by a leader that has heard this
 * term from every member, each on its own release or newer, with no
 * downgrade and no hold, records at least the leader's release. */
static void check_lag(struct sim_world *w, const struct sim_node *n,
		      const struct baton_entry *e,
		      const struct baton_version_state *before,
		      const struct baton_version_state *v,
		      const struct baton_config *c)
{
	struct baton_release mine = sim_profile(w, n)->release;
	baton_term prev = 0;
	/* A downgrade's entries (enable, cancel, end) set the floor as the
	 * downgrade says (versions.c checks them). */
	if (v->held || !baton_release_none(v->downgrade.target) ||
	    !baton_release_none(before->downgrade.target) ||
	    baton_release_compare(v->floor, mine) >= 0 ||
	    !baton_raft_term_at(n->raft, e->index - 1, &prev) ||
	    prev != e->term)
		return;
	static struct baton_upgrade_status us; /* big: not on the stack */
	baton_raft_upgrade_status(n->raft, &us);
	if (!us.leader || us.n != c->n)
		return;
	for (uint32_t i = 0; i < us.n; i++)
		if (!us.members[i].known ||
		    baton_release_compare(us.members[i].profile.release, mine) <
			    0)
			return;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	sim_fail(w,
		 "version safety: leader %llu heard from all %u members, each "
		 "on release %s or newer, yet its entry at %llu (term %llu) "
		 "leaves the release floor at %s",
		 (unsigned long long)n->id, us.n, baton_release_format(mine, a),
		 (unsigned long long)e->index, (unsigned long long)e->term,
		 baton_release_format(v->floor, b));
}

void sim_check_halon(struct sim_world *w, struct sim_node *n,
		     const struct baton_update *u, const struct baton_entry *e)
{
	struct baton_version_state v, before;
	struct baton_config c;
	BATON_ASSERT(e->type == BATON_ENTRY_VERSION);
	if (w->failed || u->role != BATON_LEADER || e->term != u->term)
		return; /* judged where it was made: at its leader */
	if (baton_version_state_decode(e->buf, e->len, &v) != 0 ||
	    !sim_versions_before(n, e->index, &before) ||
	    !config_at(n, e->index, &c))
		return; /* nothing to judge it against */
	check_raise(w, n, e, &before, &v, &c);
	if (!w->failed)
		check_lag(w, n, e, &before, &v, &c);
}
