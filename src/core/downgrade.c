/*
 * Explicit downgrade (DESIGN.md, "Downgrade", after etcd 3.6): the one way
 * to bring a cluster back to the previous release once the floor rose.
 *
 * Enable appends one version entry that lowers the floor to the target and
 * the effective machine version to the target's machine_max at the same
 * index (the state machine converts down there), and records the downgrade
 * so that no leader raises either again while it lasts. Nodes of the target
 * release may then join, apply and lead. Cancel restores both while no
 * member runs the target yet. The downgrade ends, and the record goes, once
 * every member runs the target.
 */
#include "core.h"

#include <string.h>

/* Every member known this term and heard from lately: 0, or the first
 * member that is not. A member that stopped answering may have been
 * restarted on another release meanwhile (one that cannot even reach this
 * leader, say): what the table says of it is no longer news. */
static baton_node_id first_unknown(const struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < r->config.n; i++) {
		baton_node_id id = r->config.members[i].id;
		if (baton__upgrade_known(r, id) == NULL ||
		    !baton__upgrade_heard_lately(r, id))
			return id;
	}
	return 0;
}

/* The first release with the version rules: an older one neither sends
 * nor answers the info request, so a leader could never see every member
 * run it, and a downgrade to it would never end. */
static const struct baton_release rules_since = {1, 0, 0};

/* The first member (the leader included) that speaks no peer protocol
 * version in common with release `t`, or 0: a node restarted on `t` could
 * not reach it, nor it the node. */
static baton_node_id first_apart(const struct baton_raft *r,
				 const struct baton_profile *t,
				 const struct baton_profile **p_out)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(t->proto_min.value <= t->proto_max.value);
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_profile *p =
			baton__upgrade_known(r, r->config.members[i].id);
		if (p == NULL)
			continue;
		struct baton_proto_version v;
		if (baton_proto_common(p, t, &v) != 0) {
			*p_out = p;
			return r->config.members[i].id;
		}
	}
	return 0;
}

/* The first member (the leader included) whose release is below `target`
 * (or at it, unless strictly_below), or 0. */
static baton_node_id first_at_or_below(const struct baton_raft *r,
				       struct baton_release target,
				       bool strictly_below,
				       struct baton_release *rel_out)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(!baton_release_none(target));
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_profile *p =
			baton__upgrade_known(r, r->config.members[i].id);
		if (p == NULL)
			continue;
		int c = baton_release_compare(p->release, target);
		if (c < 0 || (!strictly_below && c == 0)) {
			*rel_out = p->release;
			return r->config.members[i].id;
		}
	}
	return 0;
}

static int check_enable(const struct baton_raft *r, struct baton_release target,
			struct baton_downgrade_plan *out, char *why, size_t cap)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX],
		c[BATON_RELEASE_STR_MAX];
	const struct baton_version_state *v = &r->versions;
	BATON_ASSERT(r->role == BATON_LEADER);
	if (!baton_release_none(v->downgrade.target)) {
		baton__say_why(why, cap,
			       "a downgrade to %s is already in progress",
			       baton_release_format(v->downgrade.target, a));
		return BATON_ESTATE;
	}
	if (baton_release_none(v->floor)) {
		baton__say_why(why, cap,
			       "the log records no release floor yet: there "
			       "is nothing to downgrade from");
		return BATON_ESTATE;
	}
	if (baton_release_find(target) == NULL) {
		baton__say_why(
			why, cap,
			"release %s is not a release this binary knows (see "
			"'batond --version'): the release floor %s goes back "
			"only "
			"to the release before it",
			baton_release_format(target, a),
			baton_release_format(v->floor, b));
		return BATON_EINVAL;
	}
	const struct baton_profile *prev = baton_release_previous(v->floor);
	if (prev == NULL) {
		baton__say_why(
			why, cap,
			"the release floor is %s and this binary contains no "
			"release before it",
			baton_release_format(v->floor, a));
		return BATON_EINVAL;
	}
	if (baton_release_compare(prev->release, target) != 0) {
		baton__say_why(why, cap,
			       "a downgrade goes one step back: from the "
			       "release floor "
			       "%s only to %s, not to %s",
			       baton_release_format(v->floor, a),
			       baton_release_format(prev->release, b),
			       baton_release_format(target, c));
		return BATON_EINVAL;
	}
	if (baton_release_compare(target, rules_since) < 0) {
		baton__say_why(
			why, cap,
			"release %s predates the version rules (%s): it "
			"answers "
			"no info request, so the downgrade could never end",
			baton_release_format(target, a),
			baton_release_format(rules_since, b));
		return BATON_EINVAL;
	}
	baton_node_id id = first_unknown(r);
	if (id != 0) {
		baton__say_why(
			why, cap,
			"member %llu has not answered an info request lately: "
			"every member must be reachable",
			(unsigned long long)id);
		return BATON_EBUSY;
	}
	struct baton_release rel;
	id = first_at_or_below(r, target, true, &rel);
	if (id != 0) {
		baton__say_why(
			why, cap,
			"member %llu runs release %s, below the target %s",
			(unsigned long long)id, baton_release_format(rel, a),
			baton_release_format(target, b));
		return BATON_EINVAL;
	}
	const struct baton_profile *apart = NULL;
	id = first_apart(r, prev, &apart);
	if (id != 0) {
		baton__say_why(
			why, cap,
			"release %s speaks peer protocol versions %u..%u and "
			"member %llu (release %s) speaks %u..%u: no version in "
			"common, so a node restarted on %s could not reach it; "
			"between such releases a cluster moves only through a "
			"relay migration (docs/relay.md)",
			baton_release_format(target, a), prev->proto_min.value,
			prev->proto_max.value, (unsigned long long)id,
			baton_release_format(apart->release, b),
			apart->proto_min.value, apart->proto_max.value,
			baton_release_format(target, c));
		return BATON_EINVAL;
	}
	out->target = target;
	out->floor_from = v->floor;
	out->floor_to = target;
	out->machine_from = v->machine;
	out->machine_to = v->machine;
	if (prev->machine_max.value < out->machine_to.value)
		out->machine_to = prev->machine_max;
	BATON_ASSERT(out->machine_to.value >= 1 &&
		     out->machine_to.value <= out->machine_from.value);
	BATON_ASSERT(baton_release_compare(out->floor_to, out->floor_from) < 0);
	/* A member rolled back to the target before the downgrade: its log
	 * holds entries under a machine version it lacks, before `since`,
	 * which it could never apply (nothing sends it a snapshot: its log
	 * matches). With no machine conversion, its log holds nothing it
	 * lacks, and lowering the floor lets it go on. */
	id = first_at_or_below(r, target, false, &rel);
	if (id != 0 && out->machine_to.value < out->machine_from.value) {
		baton__say_why(why, cap,
			       "member %llu runs release %s already, and the "
			       "log holds "
			       "entries under machine version %u that it "
			       "cannot apply: "
			       "restart it on release %s, enable the "
			       "downgrade, let it "
			       "take its snapshot, then roll it back",
			       (unsigned long long)id,
			       baton_release_format(rel, a),
			       out->machine_from.value,
			       baton_release_format(v->floor, b));
		memset(out, 0, sizeof *out);
		return BATON_ESTATE;
	}
	return 0;
}

static int check_cancel(const struct baton_raft *r, struct baton_release target,
			struct baton_downgrade_plan *out, char *why, size_t cap)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	const struct baton_downgrade *d = &r->versions.downgrade;
	BATON_ASSERT(r->role == BATON_LEADER);
	if (baton_release_none(d->target) ||
	    baton_release_compare(d->target, target) != 0) {
		if (baton_release_none(d->target))
			baton__say_why(why, cap, "no downgrade is in progress");
		else
			baton__say_why(why, cap,
				       "the downgrade in progress is to %s, "
				       "not to %s",
				       baton_release_format(d->target, a),
				       baton_release_format(target, b));
		return BATON_ESTATE;
	}
	baton_node_id id = first_unknown(r);
	if (id != 0) {
		baton__say_why(
			why, cap,
			"member %llu has not answered an info request lately: "
			"cannot tell whether it runs %s already (a node "
			"restarted "
			"on it may be unable to reach this leader)",
			(unsigned long long)id,
			baton_release_format(target, a));
		return BATON_EBUSY;
	}
	struct baton_release rel;
	id = first_at_or_below(r, target, false, &rel);
	if (id != 0) {
		baton__say_why(
			why, cap,
			"member %llu runs release %s already: finish the "
			"downgrade (or upgrade that node again first)",
			(unsigned long long)id, baton_release_format(rel, a));
		return BATON_ESTATE;
	}
	out->target = target;
	out->floor_from = r->versions.floor;
	out->floor_to = d->prev_floor;
	out->machine_from = r->versions.machine;
	out->machine_to = d->prev_machine;
	BATON_ASSERT(out->machine_to.value >= out->machine_from.value);
	if (!baton__machine_ok(r, out->machine_to) ||
	    !baton__floor_ok(r, out->floor_to)) {
		baton__say_why(why, cap,
			       "this leader (release %s) could not restore it",
			       baton_release_format(r->o.profile.release, a));
		return BATON_ESTATE;
	}
	return 0;
}

int baton_raft_downgrade_check(const struct baton_raft *r, uint32_t op,
			       struct baton_release target,
			       struct baton_downgrade_plan *out, char *why,
			       size_t cap)
{
	memset(out, 0, sizeof *out);
	BATON_ASSERT(why != NULL || cap == 0);
	baton__say_why(why, cap, "%s", "");
	if (r->role != BATON_LEADER) {
		baton__say_why(why, cap, "not the leader");
		return BATON_ENOTLEADER;
	}
	if (r->transfer_target != 0 || r->versions_index > r->commit_index) {
		baton__say_why(why, cap,
			       "a leadership transfer or a version entry is "
			       "in flight; try again");
		return BATON_EBUSY;
	}
	if (op == BATON_DOWNGRADE_ENABLE)
		return check_enable(r, target, out, why, cap);
	if (op == BATON_DOWNGRADE_CANCEL)
		return check_cancel(r, target, out, why, cap);
	if (op == BATON_UPGRADE_FINALIZE)
		return baton__finalize_check(r, out, why, cap);
	baton__say_why(why, cap, "unknown downgrade operation %u", op);
	return BATON_EINVAL;
}

int baton__downgrade(struct baton_raft *r, uint32_t op,
		     struct baton_release target)
{
	struct baton_downgrade_plan plan;
	char why[256];
	int rv = baton_raft_downgrade_check(r, op, target, &plan, why,
					    sizeof why);
	if (rv != 0)
		return rv;
	if (op == BATON_UPGRADE_FINALIZE)
		return baton__finalize(r); /* hold.c */
	struct baton_version_state s;
	baton__upgrade_desired(r, &s);
	s.floor = plan.floor_to;
	s.machine = plan.machine_to;
	memset(&s.downgrade, 0, sizeof s.downgrade);
	if (op == BATON_DOWNGRADE_ENABLE) {
		s.downgrade.target = target;
		s.downgrade.prev_floor = plan.floor_from;
		s.downgrade.prev_machine = plan.machine_from;
		s.downgrade.since = baton__last_index(r) + 1;
	}
	BATON_ASSERT(baton_version_state_valid(&s));
	rv = baton__versions_entry(r, &s);
	if (rv != 0)
		return rv;
	BATON_ASSERT(op != BATON_DOWNGRADE_ENABLE ||
		     r->versions.downgrade.since == r->versions_index);
	baton__broadcast_append(r);
	return 0;
}

bool baton__downgrade_done(const struct baton_raft *r)
{
	const struct baton_downgrade *d = &r->versions.downgrade;
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->config.n >= 1);
	if (baton_release_none(d->target))
		return false;
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_profile *p =
			baton__upgrade_known(r, r->config.members[i].id);
		if (p == NULL || baton_release_compare(p->release, d->target))
			return false;
	}
	return true;
}
