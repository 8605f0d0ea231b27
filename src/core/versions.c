/*
 * The version state as a fact of the log, kept exactly as the configuration
 * is (membership.c): the latest BATON_ENTRY_VERSION entry in the log,
 * committed or not, else the one the snapshot recorded, else the initial
 * state. And the stall: a configuration or version entry this node cannot
 * decode, or an entry or snapshot its driver cannot interpret
 * (BATON_EVENT_APPLY_STOPPED), stops the node applying at that index and
 * keeps it from leading, instead of skipping what it does not understand
 * and disagreeing with the others (docs/core.md, "Stalling").
 */
#include "core.h"

#include <string.h>

bool baton__machine_ok(const struct baton_raft *r,
		       struct baton_machine_version machine)
{
	BATON_ASSERT(machine.value >= 1);
	BATON_ASSERT(r->o.profile.machine_max.value >= 1);
	return machine.value <= r->o.profile.machine_max.value;
}

bool baton__floor_ok(const struct baton_raft *r, struct baton_release floor)
{
	BATON_ASSERT(r->o.election_policy == BATON_ELECTION_VERSION_AWARE ||
		     r->o.election_policy == BATON_ELECTION_ANY);
	return r->o.election_policy == BATON_ELECTION_ANY ||
	       baton_release_compare(r->o.profile.release, floor) >= 0;
}

/* ---- the floor hold ------------------------------------------------------
 * Unlike a machine version, a floor above our release is not a property
 * of the entries: a later entry (an explicit downgrade) may lower it again,
 * and then everything is applied as usual. So the node holds while the
 * latest floor of its log is above its release, from the entry where the
 * floor went above it for the last time. */

/* The first index of the last stretch of the log under a floor above our
 * release (the snapshot's own floor counts as one at base + 1); 0 if the
 * latest floor is not above it. */
static baton_index floor_since(const struct baton_raft *r)
{
	if (baton__floor_ok(r, r->versions.floor))
		return 0;
	baton_index since = r->log.base + 1;
	for (baton_index i = baton__last_index(r); i > r->log.base; i--) {
		const struct baton_entry *e = baton__log_get(&r->log, i);
		struct baton_version_state v;
		if (e->type != BATON_ENTRY_VERSION ||
		    baton_version_state_decode(e->buf, e->len, &v) != 0)
			continue;
		if (baton__floor_ok(r, v.floor))
			break;
		since = i;
	}
	BATON_ASSERT(since > r->log.base);
	return since;
}

/* Hold from where the log's floor rose above us, if it is above us now:
 * at that entry, or just after what is applied. An earlier stall, or a
 * hold already there, stands (a hold that began later, at a leader's
 * snapshot we refused, moves back to the entry in our own log). */
static void floor_hold(struct baton_raft *r)
{
	baton_index since = floor_since(r);
	if (since == 0)
		return;
	baton_index at =
		since > r->applied_index ? since : r->applied_index + 1;
	if (r->stalled_index == 0 || at < r->stalled_index) {
		baton__stall(r, at);
		BATON_ASSERT(r->stalled_index == at);
		r->needs_release = r->versions.floor;
	} else if (r->stalled_index == at ||
		   !baton_release_none(r->needs_release)) {
		r->needs_release = r->versions.floor; /* the latest, for logs */
	}
}

void baton__floor_check(struct baton_raft *r)
{
	if (!baton_release_none(r->needs_release) &&
	    baton__floor_ok(r, r->versions.floor)) {
		/* The floor came down (a downgrade), or the hold came from a
		 * leader's snapshot our log does not reach yet: apply again,
		 * unless something else stops us. */
		baton__stall_recheck(r);
		return;
	}
	floor_hold(r);
	BATON_ASSERT(baton_release_none(r->needs_release) ||
		     (r->stalled_index != 0 &&
		      !baton__floor_ok(r, r->needs_release)));
}

/* Whether this node can interpret e; *needs is set (else 0) when e is a
 * version entry raising the machine version above our machine_max. */
static bool entry_known(const struct baton_raft *r, const struct baton_entry *e,
			struct baton_machine_version *needs)
{
	struct baton_config c;
	struct baton_version_state v;
	needs->value = 0;
	if (e->type == BATON_ENTRY_CONFIG)
		return baton_config_decode(e->buf, e->len, &c) == 0;
	if (e->type == BATON_ENTRY_VERSION) {
		if (baton_version_state_decode(e->buf, e->len, &v) != 0)
			return false;
		if (!baton__machine_ok(r, v.machine))
			*needs = v.machine;
		return needs->value == 0;
	}
	/* Commands and entries of types the core does not know are the
	 * driver's to interpret; it says so with APPLY_STOPPED. */
	return true;
}

void baton__versions_appended(struct baton_raft *r, const struct baton_entry *e)
{
	struct baton_version_state v;
	BATON_ASSERT(e->type == BATON_ENTRY_VERSION);
	BATON_ASSERT(e->index == baton__last_index(r));
	if (baton_version_state_decode(e->buf, e->len, &v) != 0) {
		/* A newer format or damage: keep the state we know, stop
		 * applying here, and let the operator upgrade this node. */
		baton__stall(r, e->index);
		return;
	}
	BATON_ASSERT(e->index > r->versions_index);
	r->versions = v;
	r->versions_index = e->index;
	BATON_ASSERT(baton_version_state_valid(&r->versions));
	/* Facts we can read but not honour: the state machine of this
	 * release cannot apply what follows (needs-upgrade), or the floor
	 * says a newer release has led (future data). */
	if (!baton__machine_ok(r, v.machine))
		baton__stall_needs(r, e->index, v.machine);
	baton__floor_check(r);
}

void baton__versions_at(const struct baton_raft *r, baton_index index,
			struct baton_version_state *out, baton_index *index_out)
{
	BATON_ASSERT(index <= baton__last_index(r));
	for (baton_index i = index; i > r->log.base; i--) {
		const struct baton_entry *e = baton__log_get(&r->log, i);
		BATON_ASSERT(e != NULL && e->index == i);
		if (e->type == BATON_ENTRY_VERSION &&
		    baton_version_state_decode(e->buf, e->len, out) == 0) {
			*index_out = i;
			return;
		}
	}
	BATON_ASSERT(r->snap.versions.machine.value >= 1);
	*out = r->snap.versions;
	*index_out = r->snap.versions_index;
}

void baton__versions_refresh(struct baton_raft *r)
{
	baton__versions_at(r, baton__last_index(r), &r->versions,
			   &r->versions_index);
	BATON_ASSERT(r->versions_index <= baton__last_index(r));
	BATON_ASSERT(r->versions.machine.value >= 1);
	baton__floor_check(r);
}

void baton__stall_recheck(struct baton_raft *r)
{
	r->stalled_index = 0;
	r->needs_machine.value = 0;
	memset(&r->needs_release, 0, sizeof r->needs_release);
	for (baton_index i = r->log.base + 1; i <= baton__last_index(r); i++) {
		struct baton_machine_version needs;
		if (!entry_known(r, baton__log_get(&r->log, i), &needs)) {
			r->stalled_index = i;
			r->needs_machine = needs;
			break;
		}
	}
	/* Entries are checked as they are appended and nothing is applied
	 * past a stall, so what is left to find lies beyond the applied. */
	BATON_ASSERT(r->stalled_index == 0 ||
		     r->stalled_index > r->applied_index);
	floor_hold(r);
}

void baton__stall(struct baton_raft *r, baton_index index)
{
	BATON_ASSERT(index > 0);
	if (r->stalled_index == 0 || index < r->stalled_index) {
		r->stalled_index = index;
		/* until the caller says why */
		r->needs_machine.value = 0;
		memset(&r->needs_release, 0, sizeof r->needs_release);
	}
	/* Entries handed to the driver but not interpreted were not
	 * applied: the applied index tells the truth again. */
	if (r->applied_index >= r->stalled_index)
		r->applied_index = r->stalled_index - 1;
	BATON_ASSERT(r->applied_index < r->stalled_index);
	switch (r->role) {
	case BATON_LEADER:
		/* Its own state machine will not reach their index; the
		 * followers' reads can still be served by them. */
		baton__reads_fail_local(r, BATON_ESTALLED);
		baton__stall_handover(r);
		break;
	case BATON_PRE_CANDIDATE:
	case BATON_CANDIDATE:
		baton__become_follower(r, r->term, 0);
		break;
	default:
		break;
	}
	BATON_ASSERT(r->role == BATON_FOLLOWER || r->role == BATON_LEADER);
}

void baton__stall_needs(struct baton_raft *r, baton_index index,
			struct baton_machine_version machine)
{
	BATON_ASSERT(!baton__machine_ok(r, machine));
	baton__stall(r, index);
	if (r->stalled_index == index)
		r->needs_machine = machine;
	BATON_ASSERT(r->stalled_index != 0 && r->stalled_index <= index);
}

void baton__stall_handover(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->stalled_index != 0);
	if (r->transfer_target != 0)
		return; /* a transfer is under way: let it finish or expire */
	if (!r->handover_tried) {
		r->handover_tried = true;
		if (baton__transfer(r, 0) == 0)
			return;
	}
	/* No voter to hand over to, or the transfer failed: step down, and
	 * let the others elect a leader that can apply. */
	baton__become_follower(r, r->term, 0);
}

int baton__versions_entry(struct baton_raft *r,
			  const struct baton_version_state *s)
{
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len;
	BATON_ASSERT(r->role == BATON_LEADER);
	int rv = baton_version_state_encode(s, buf, sizeof buf, &len);
	BATON_ASSERT(rv == 0 && len == baton_version_state_encoded_len(s));
	rv = baton__leader_append(r, BATON_ENTRY_VERSION, buf, (uint32_t)len);
	BATON_ASSERT(rv != 0 || r->versions_index == baton__last_index(r));
	return rv;
}

int baton__append_versions(struct baton_raft *r,
			   const struct baton_version_state *s)
{
	if (r->role != BATON_LEADER)
		return BATON_ENOTLEADER;
	/* Never a machine version the leader itself cannot apply, nor a
	 * floor it could not lead under. */
	if (s == NULL || !baton_version_state_valid(s) ||
	    !baton__machine_ok(r, s->machine) || !baton__floor_ok(r, s->floor))
		return BATON_EINVAL;
	/* Like a proposal: a transfer needs the target to catch up with a
	 * log that stops growing. */
	if (r->transfer_target != 0)
		return BATON_EBUSY;
	int rv = baton__versions_entry(r, s);
	if (rv != 0)
		return rv;
	baton__broadcast_append(r);
	return 0;
}
