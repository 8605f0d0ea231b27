/*
 * The invariants every instance keeps between steps, checked after each
 * step, restore and bootstrap. Each is a fact the rest of the core relies
 * on; a broken one stops the node with the condition named rather than let
 * it go on and disagree with the cluster (assertions stay on in every
 * build). The simulator runs its seeds through these too.
 */
#include "core.h"

/* What a leader knows of one follower. */
static void check_progress(const struct baton_raft *r,
			   const struct baton__progress *p, baton_index last)
{
	BATON_ASSERT(p->id != 0 && p->id != r->o.id);
	BATON_ASSERT(baton_config_find(&r->config, p->id) != NULL);
	BATON_ASSERT(p->match <= last); /* match <= last index */
	BATON_ASSERT(p->next >= 1 && p->next <= last + 1);
	BATON_ASSERT(p->state == BATON__PROBE || p->state == BATON__REPLICATE ||
		     p->state == BATON__SNAPSHOT);
	BATON_ASSERT(p->state == BATON__SNAPSHOT || p->next > p->match);
	BATON_ASSERT(p->inflight_n <= r->o.max_inflight_appends &&
		     p->inflight_head < BATON__INFLIGHT_MAX);
	BATON_ASSERT(p->state == BATON__REPLICATE || p->inflight_n == 0 ||
		     p->state == BATON__SNAPSHOT);
	BATON_ASSERT(p->acked_seq <= r->heartbeat_seq);
}

static void check_leader(const struct baton_raft *r, baton_index last)
{
	BATON_ASSERT(r->leader_id == r->o.id);
	BATON_ASSERT(r->vote == r->o.id); /* it voted for itself this term */
	BATON_ASSERT(r->leader_first_index <= last + 1);
	/* One progress per other member of the configuration. */
	BATON_ASSERT(r->n_progress + (baton__is_member(r, r->o.id) ? 1u : 0u) ==
		     r->config.n);
	BATON_ASSERT(r->n_progress <= BATON_MAX_MEMBERS);
	/* A stalled leader is on its way out. */
	BATON_ASSERT(r->stalled_index == 0 || r->transfer_target != 0);
	BATON_ASSERT(r->transfer_target != r->o.id);
	BATON_ASSERT(r->n_reads <= r->reads_cap &&
		     r->n_reads <= BATON__READS_MAX);
	for (uint32_t i = 0; i < r->n_progress; i++)
		check_progress(r, &r->progress[i], last);
	/* The live version table: this term's answers, from members. */
	BATON_ASSERT(r->n_live <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < r->n_live; i++) {
		BATON_ASSERT(r->live[i].id != r->o.id &&
			     baton__is_member(r, r->live[i].id));
		BATON_ASSERT(r->live[i].seq <= r->info_seq);
	}
	/* A leader never holds a machine version it cannot apply, nor a
	 * floor above its release (rule 1), unless on its way out. */
	BATON_ASSERT(r->stalled_index != 0 ||
		     baton__machine_ok(r, r->versions.machine));
	BATON_ASSERT(r->stalled_index != 0 ||
		     baton__floor_ok(r, r->versions.floor));
}

void baton__assert_invariants(const struct baton_raft *r)
{
	baton_index last = baton__last_index(r);
	/* The log and the commit: commit <= last index, applied <= commit,
	 * and nothing committed was compacted unapplied. */
	BATON_ASSERT(r->commit_index <= last);
	BATON_ASSERT(r->applied_index <= r->commit_index);
	BATON_ASSERT(r->commit_index >= r->log.base);
	BATON_ASSERT(r->applied_index >= r->log.base ||
		     (r->stalled_index != 0 &&
		      r->applied_index + 1 == r->stalled_index));
	BATON_ASSERT(r->persisted_index <= last);
	BATON_ASSERT(r->unstable_from <= last + 1);
	/* Terms: no entry from a term above ours. */
	BATON_ASSERT(baton__last_term(r) <= r->term);
	BATON_ASSERT(r->log.base_term <= baton__last_term(r));
	/* The snapshot sits inside what the log covers. */
	BATON_ASSERT(r->log.base <= r->snap.index && r->snap.index <= last);
	BATON_ASSERT(r->snap.term <= r->term);
	BATON_ASSERT(r->snap.index != 0 || r->snap_len == 0);
	/* Configuration and versions come from entries we hold or from the
	 * snapshot. */
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	BATON_ASSERT(r->config_index <= last);
	BATON_ASSERT(r->config_index >= r->snap.config_index);
	BATON_ASSERT(r->versions_index <= last);
	BATON_ASSERT(r->versions_index >= r->snap.versions_index);
	BATON_ASSERT(baton_version_state_valid(&r->versions));
	/* Stalled: nothing at or after the index is applied. */
	BATON_ASSERT(r->stalled_index == 0 ||
		     r->applied_index < r->stalled_index);
	BATON_ASSERT(r->needs_machine.value == 0 ||
		     (r->stalled_index != 0 &&
		      !baton__machine_ok(r, r->needs_machine)));
	BATON_ASSERT(r->stalled_index == 0 || r->role == BATON_FOLLOWER ||
		     r->role == BATON_LEADER);
	/* The floor hold is a stall, and only while a floor is above us. */
	BATON_ASSERT(baton_release_none(r->needs_release) ||
		     (r->stalled_index != 0 &&
		      !baton__floor_ok(r, r->needs_release)));
	/* Roles. */
	BATON_ASSERT(r->role >= BATON_FOLLOWER && r->role <= BATON_LEADER);
	BATON_ASSERT(r->role != BATON_CANDIDATE || r->vote == r->o.id);
	BATON_ASSERT(r->n_answered <= BATON_MAX_MEMBERS);
	if (r->role == BATON_LEADER)
		check_leader(r, last);
	else
		BATON_ASSERT(r->n_progress == 0 && r->transfer_target == 0 &&
			     r->n_reads == 0 && r->n_live == 0);
}
