/*
 * What the cluster looks like now, as its members say: the members as the
 * asked node lists them (BATON.MEMBERS, and the leader's for the match
 * indexes), then every member's own BATON.NODE. Shared by batonctl status
 * and batonctl health; members that do not answer are marked down.
 */
#ifndef BATON_CTL_VIEW_H
#define BATON_CTL_VIEW_H

#include "ctl.h"

/* A number a member may not have told us: printed as "-" or null. */
struct opt_u64 {
	bool known;
	uint64_t v;
};

/* One member: how the asked node lists it, and its own BATON.NODE. */
struct view_member {
	uint64_t id;
	bool voter;
	char peer_addr[CTL_ADDR_MAX];
	char client_addr[CTL_ADDR_MAX];
	bool up; /* answered BATON.NODE */
	char err[CTL_ERR_MAX];
	char role[CTL_VALUE_MAX]; /* as the member reports it */
	char release[CTL_VALUE_MAX];
	struct opt_u64 term, commit, applied, last_index, match;
	struct opt_u64 proto_min, proto_max, machine_max, lag;
	/* Versions as the member reports them: the machine version in force
	 * at its applied index, its upgrade strategy, what an upgrade waits
	 * for as it sees it, and whether it needs a newer release. */
	struct opt_u64 machine_version;
	char machine_upgrade[CTL_VALUE_MAX];
	char upgrade_waits_for[CTL_ERR_MAX];
	char needs_upgrade[CTL_VALUE_MAX];
	/* The member's versions as the asked node's BATON.MEMBERS tells
	 * them: "live" (the leader's info replies), "log" (the version
	 * table), "unknown" or "" (an older server). */
	char versions[CTL_VALUE_MAX];
	char table_release[CTL_VALUE_MAX];
	struct opt_u64 table_machine_max;
	/* The member stopped applying at this index (0: it did not), and
	 * why, as it says. */
	struct opt_u64 stalled_index;
	char stalled[CTL_ERR_MAX];
	/* Leader eligibility as the member sees it ("yes", or "no (rule 1:
	 * ...)"), the release floor of its log, its election policy and
	 * the downgrade in progress ("none", or "1.0.0 (from floor ...)");
	 * "" from an older server. */
	char leader_eligible[CTL_ERR_MAX];
	char release_floor[CTL_VALUE_MAX];
	char election_policy[CTL_VALUE_MAX];
	char downgrade[CTL_ERR_MAX];
	/* "ok" or "failed" (its storage refused a write or fsync), and
	 * "no" or "yes (why)" for a node removed from the cluster; "" from
	 * an older server. */
	char storage[CTL_VALUE_MAX];
	char removed[CTL_ERR_MAX];
	/* The member's log ends below the match index the leader recorded
	 * for it, asked again after the leader told the match: it lost
	 * entries it had acknowledged (it restarted on a wiped or older
	 * data directory under its old id), which Raft's safety rests on. */
	bool lost_log;
	/* The leader the member follows (0: none known), and whether it
	 * followed another than the cluster's leader when asked twice. */
	struct opt_u64 leader_id;
	bool astray;
};

/* Every member the asked node (and the leader) knows, at most
 * CTL_MEMBERS_MAX. */
struct cluster_view {
	struct view_member rows[CTL_MEMBERS_MAX];
	size_t n;
};

/* Fill `cl` from the node of the options. Returns 0, or -1 after
 * reporting on stderr that the node could not be asked. Computes the lag
 * of each member whose match index the leader told. */
int view_gather(const struct ctl_opts *o, struct cluster_view *cl);

/* The member that reports leading in the highest term, or NULL. */
struct view_member *view_leader(struct cluster_view *cl);

/* The member stopped applying (it says why in `stalled`). */
bool view_is_stalled(const struct view_member *r);
/* The member stopped because it needs a newer release. */
bool view_needs_upgrade(const struct view_member *r);
/* The member's storage failed (it serves nothing that needs a write). */
bool view_storage_failed(const struct view_member *r);

/* The role column: "down", "lost-log", "needs-upgrade", "stalled",
 * "candidate",
 * "learner", or the role the member reports. */
const char *view_shown_role(const struct view_member *r);
/* The eligibility column: "yes", "rule 1", "rule 2", "no" (not a voter),
 * or "-" (not known). */
const char *view_shown_eligible(const struct view_member *r);

#endif /* BATON_CTL_VIEW_H */
