/*
 * Halon's rule (DESIGN.md, "Release floor"; issue 28, problem 6): a leader
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
 * older release during a downgrade, which raises no floor). Caught planted
 * bug: tests/mutants/floor-raised-by-a-lone-leader.patch (the old rule:
 * every new leader raises the floor to its own release).
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
	    baton_release_compare(v.floor, before.floor) <= 0 ||
	    !config_at(n, e->index, &c))
		return; /* not a raise, or nothing to judge it against */
	uint32_t voters = 0, running = 0;
	for (uint32_t i = 0; i < c.n; i++) {
		baton_node_id id = c.members[i].id;
		if (c.members[i].role != BATON_VOTER)
			continue;
		voters++;
		if (id > SIM_MAX_NODES || !w->nodes[id].exists)
			continue;
		struct baton_release r = sim_profile(w, &w->nodes[id])->release;
		running += baton_release_compare(r, v.floor) >= 0;
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
		 baton_release_format(before.floor, a),
		 baton_release_format(v.floor, b), (unsigned long long)e->index,
		 (unsigned long long)e->term, running, voters, b);
}
