/*
 * The burn-in hold and its finalize (docs/upgrading.md, "Hold and
 * finalize", after CockroachDB's preserve_downgrade_option and MongoDB's
 * feature compatibility version): under BATON_UPGRADE_MANUAL the leader
 * records a hold in the version state, and while the log holds it no leader
 * raises the release floor or the effective machine version, whatever its
 * own strategy. The binaries can then be rolled back by plain restarts: the
 * floor still admits the old release and nothing was written under a
 * machine version it lacks. A finalize, asked for by the operator, raises
 * both at once to what the rules allow (upgrade.c: Halon's rule for the
 * floor, ALL for the machine version), once the roll is over.
 */
#include "core.h"

#include <string.h>

/* The newest release among the members known this term (the leader's own
 * among them). */
static struct baton_release newest_known(const struct baton_raft *r)
{
	struct baton_release top = r->o.profile.release;
	BATON_ASSERT(r->role == BATON_LEADER);
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_profile *p =
			baton__upgrade_known(r, r->config.members[i].id);
		if (p != NULL && baton_release_compare(p->release, top) > 0)
			top = p->release;
	}
	BATON_ASSERT(baton_release_compare(top, r->o.profile.release) >= 0);
	return top;
}

/* What keeps a finalize waiting: a member not heard from this term
 * (BATON_EBUSY: the next info round may tell), or one on a release below
 * the newest one a member runs (BATON_ESTATE: the roll is not over, and
 * the floor would rise above it). 0, or the error with why naming the
 * first such member. */
static int blockers(const struct baton_raft *r, char *why, size_t cap)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	struct baton_release top = newest_known(r);
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < r->config.n; i++) {
		baton_node_id id = r->config.members[i].id;
		const struct baton_profile *p = baton__upgrade_known(r, id);
		if (p == NULL) {
			baton__say_why(
				why, cap,
				"node %llu has not answered this term (its "
				"release is unknown); try again",
				(unsigned long long)id);
			return BATON_EBUSY;
		}
		if (baton_release_compare(p->release, top) < 0) {
			baton__say_why(
				why, cap,
				"node %llu runs release %s, not yet %s like "
				"the "
				"newest member: finish the roll (or roll back) "
				"first",
				(unsigned long long)id,
				baton_release_format(p->release, a),
				baton_release_format(top, b));
			return BATON_ESTATE;
		}
	}
	return 0;
}

int baton__finalize_check(const struct baton_raft *r,
			  struct baton_downgrade_plan *out, char *why,
			  size_t cap)
{
	char a[BATON_RELEASE_STR_MAX];
	const struct baton_version_state *v = &r->versions;
	BATON_ASSERT(r->role == BATON_LEADER);
	memset(out, 0, sizeof *out);
	out->floor_from = out->floor_to = v->floor;
	out->machine_from = out->machine_to = v->machine;
	if (!baton_release_none(v->downgrade.target)) {
		baton__say_why(
			why, cap,
			"a downgrade to %s is in progress: finish or cancel it "
			"first",
			baton_release_format(v->downgrade.target, a));
		return BATON_ESTATE;
	}
	if (!v->held && r->o.machine_upgrade != BATON_UPGRADE_MANUAL) {
		baton__say_why(
			why, cap,
			"nothing is held: the log records no hold and this "
			"leader "
			"raises versions by itself (machine_upgrade is not "
			"manual)");
		return BATON_ESTATE;
	}
	/* What it would raise to, even when blocked: status shows it. */
	struct baton_version_state s;
	baton__upgrade_final(r, &s);
	out->floor_to = s.floor;
	out->machine_to = s.machine;
	BATON_ASSERT(baton_release_compare(out->floor_to, out->floor_from) >=
		     0);
	BATON_ASSERT(out->machine_to.value >= out->machine_from.value);
	return blockers(r, why, cap);
}

int baton__finalize(struct baton_raft *r)
{
	struct baton_downgrade_plan plan;
	char why[256];
	BATON_ASSERT(r->role == BATON_LEADER);
	int rv = baton__finalize_check(r, &plan, why, sizeof why);
	if (rv != 0)
		return rv;
	struct baton_version_state s;
	baton__upgrade_final(r, &s);
	BATON_ASSERT(baton_version_state_valid(&s));
	/* Nothing to raise and the hold as it is: no entry (the caller's
	 * wait ends at the version entry already there). */
	if (baton_release_compare(s.floor, r->versions.floor) == 0 &&
	    s.machine.value == r->versions.machine.value &&
	    s.held == r->versions.held)
		return 0;
	rv = baton__versions_entry(r, &s);
	if (rv != 0)
		return rv;
	BATON_ASSERT(r->versions.machine.value == s.machine.value);
	baton__broadcast_append(r);
	return 0;
}
