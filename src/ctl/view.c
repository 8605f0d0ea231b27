/*
 * The cluster as its members say (view.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "view.h"

static void opt_read(const redisReply *map, const char *field,
		     struct opt_u64 *out)
{
	out->known = ctl_map_u64(map, field, &out->v);
}

static struct view_member *row_find(struct cluster_view *cl, uint64_t id)
{
	for (size_t i = 0; i < cl->n; i++)
		if (cl->rows[i].id == id)
			return &cl->rows[i];
	return NULL;
}

/* Merge one BATON.MEMBERS reply into the rows: new members are added,
 * known ones get the reply's match index if it has one. Returns 0, or -1
 * with `err` set if the reply is malformed or too long. */
static int merge_members(struct cluster_view *cl, const redisReply *r,
			 char *err, size_t err_len)
{
	if (r->type != REDIS_REPLY_ARRAY) {
		snprintf(err, err_len, "BATON.MEMBERS: unexpected reply");
		return -1;
	}
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *m = r->element[i];
		uint64_t id;
		if (!ctl_map_valid(m) || !ctl_map_u64(m, "id", &id)) {
			snprintf(err, err_len,
				 "BATON.MEMBERS: member %zu is malformed", i);
			return -1;
		}
		struct view_member *row = row_find(cl, id);
		if (row == NULL) {
			if (cl->n == CTL_MEMBERS_MAX) {
				snprintf(err, err_len,
					 "BATON.MEMBERS: more than %u members",
					 CTL_MEMBERS_MAX);
				return -1;
			}
			row = &cl->rows[cl->n++];
			memset(row, 0, sizeof *row);
			row->id = id;
		}
		char role[CTL_VALUE_MAX];
		ctl_map_str(m, "role", role, sizeof role);
		row->voter = strcmp(role, "learner") != 0;
		ctl_map_str(m, "peer_addr", row->peer_addr,
			    sizeof row->peer_addr);
		ctl_map_str(m, "client_addr", row->client_addr,
			    sizeof row->client_addr);
		struct opt_u64 match;
		opt_read(m, "match", &match);
		if (match.known)
			row->match = match;
		char versions[CTL_VALUE_MAX] = "";
		ctl_map_str(m, "versions", versions, sizeof versions);
		/* The leader's live view wins over an earlier log view. */
		if (versions[0] != '\0' &&
		    (strcmp(row->versions, "live") != 0 ||
		     strcmp(versions, "live") == 0)) {
			memcpy(row->versions, versions, sizeof versions);
			ctl_map_str(m, "release", row->table_release,
				    sizeof row->table_release);
			opt_read(m, "machine_max", &row->table_machine_max);
		}
	}
	return 0;
}

/* Fill a row from a BATON.NODE reply. */
static void read_node(struct view_member *row, const redisReply *r)
{
	uint64_t id = 0;
	if (!ctl_map_valid(r) || !ctl_map_u64(r, "id", &id)) {
		snprintf(row->err, sizeof row->err,
			 "BATON.NODE: unexpected reply");
		return;
	}
	if (id != row->id) {
		snprintf(row->err, sizeof row->err,
			 "%s answers as node %" PRIu64, row->client_addr, id);
		return;
	}
	row->up = true;
	ctl_map_str(r, "role", row->role, sizeof row->role);
	ctl_map_str(r, "release", row->release, sizeof row->release);
	opt_read(r, "term", &row->term);
	opt_read(r, "commit", &row->commit);
	opt_read(r, "applied", &row->applied);
	opt_read(r, "last_index", &row->last_index);
	opt_read(r, "leader", &row->leader_id);
	opt_read(r, "proto_min", &row->proto_min);
	opt_read(r, "proto_max", &row->proto_max);
	opt_read(r, "machine_max", &row->machine_max);
	opt_read(r, "stalled_index", &row->stalled_index);
	opt_read(r, "machine_version", &row->machine_version);
	ctl_map_str(r, "machine_upgrade", row->machine_upgrade,
		    sizeof row->machine_upgrade);
	ctl_map_str(r, "upgrade_waits_for", row->upgrade_waits_for,
		    sizeof row->upgrade_waits_for);
	ctl_map_str(r, "needs_upgrade", row->needs_upgrade,
		    sizeof row->needs_upgrade);
	ctl_map_str(r, "stalled", row->stalled, sizeof row->stalled);
	ctl_map_str(r, "leader_eligible", row->leader_eligible,
		    sizeof row->leader_eligible);
	ctl_map_str(r, "release_floor", row->release_floor,
		    sizeof row->release_floor);
	ctl_map_str(r, "election_policy", row->election_policy,
		    sizeof row->election_policy);
	ctl_map_str(r, "downgrade", row->downgrade, sizeof row->downgrade);
	ctl_map_str(r, "storage", row->storage, sizeof row->storage);
	ctl_map_str(r, "removed", row->removed, sizeof row->removed);
}

const char *view_shown_eligible(const struct view_member *r)
{
	const char *e = r->leader_eligible;
	if (!r->up || e[0] == '\0')
		return "-";
	if (strcmp(e, "yes") == 0)
		return "yes";
	if (strncmp(e, "no (rule 1", 10) == 0)
		return "rule 1";
	if (strncmp(e, "no (rule 2", 10) == 0)
		return "rule 2";
	return "no";
}

bool view_is_stalled(const struct view_member *r)
{
	return r->up && r->stalled_index.known && r->stalled_index.v != 0;
}

bool view_needs_upgrade(const struct view_member *r)
{
	return r->up && strncmp(r->needs_upgrade, "yes", 3) == 0;
}

static void probe(const struct ctl_opts *o, struct view_member *row)
{
	if (row->up || row->err[0] != '\0')
		return; /* already asked */
	if (row->client_addr[0] == '\0') {
		snprintf(row->err, sizeof row->err, "no client address known");
		return;
	}
	redisReply *r = ctl_ask_cmd(o, row->client_addr, "BATON.NODE", row->err,
				    sizeof row->err);
	if (r != NULL)
		read_node(row, r);
	freeReplyObject(r);
}

struct view_member *view_leader(struct cluster_view *cl)
{
	struct view_member *best = NULL;
	for (size_t i = 0; i < cl->n; i++) {
		struct view_member *r = &cl->rows[i];
		if (!r->up || strcmp(r->role, "leader") != 0)
			continue;
		if (best == NULL || (r->term.known && best->term.known &&
				     r->term.v > best->term.v))
			best = r;
	}
	return best;
}

const char *view_shown_role(const struct view_member *r)
{
	if (!r->up)
		return "down";
	if (r->lost_log)
		return "lost-log";
	if (view_needs_upgrade(r))
		return "needs-upgrade";
	if (view_is_stalled(r))
		return "stalled";
	if (strcmp(r->role, "pre-candidate") == 0)
		return "candidate";
	if (strcmp(r->role, "follower") == 0 && !r->voter)
		return "learner";
	return r->role[0] != '\0' ? r->role : "?";
}

/* Read the members from the asked node (and the leader's match indexes),
 * then every member's BATON.NODE. Returns 0, or -1 after reporting. */
static int gather_members(const struct ctl_opts *o, struct cluster_view *cl)
{
	char addr[CTL_ADDR_MAX], err[CTL_ERR_MAX];
	ctl_opts_addr(o, addr, sizeof addr);
	memset(cl, 0, sizeof *cl);
	redisReply *r = ctl_ask_cmd(o, addr, "BATON.MEMBERS", err, sizeof err);
	int rv = r == NULL ? -1 : merge_members(cl, r, err, sizeof err);
	freeReplyObject(r);
	if (rv != 0) {
		ctl_error("node %s: %s", addr, err);
		return -1;
	}
	for (size_t i = 0; i < cl->n; i++)
		probe(o, &cl->rows[i]);
	struct view_member *leader = view_leader(cl);
	if (leader == NULL || leader->match.known)
		return 0;
	/* The asked node does not lead: the leader knows the match indexes
	 * (and maybe members the asked node has not heard of yet). */
	r = ctl_ask_cmd(o, leader->client_addr, "BATON.MEMBERS", err,
			sizeof err);
	if (r != NULL && merge_members(cl, r, err, sizeof err) == 0) {
		for (size_t i = 0; i < cl->n; i++)
			probe(o, &cl->rows[i]);
	}
	freeReplyObject(r);
	return 0;
}

static void compute_lag(struct cluster_view *cl)
{
	const struct view_member *leader = view_leader(cl);
	if (leader == NULL || !leader->last_index.known)
		return;
	uint64_t last = leader->last_index.v;
	for (size_t i = 0; i < cl->n; i++) {
		struct view_member *r = &cl->rows[i];
		if (!r->match.known)
			continue;
		r->lag.known = true;
		r->lag.v = r->match.v < last ? last - r->match.v : 0;
	}
}

bool view_storage_failed(const struct view_member *r)
{
	return r->up && strcmp(r->storage, "failed") == 0;
}

/* A member's log never ends below the match index a leader recorded for
 * it: the member acknowledged those entries after writing them. One read
 * before the leader's match was told may be older than the match, so a
 * member found below it is asked again before it is marked. */
static void find_lost_logs(const struct ctl_opts *o, struct cluster_view *cl)
{
	for (size_t i = 0; i < cl->n; i++) {
		struct view_member *r = &cl->rows[i];
		if (!r->up || !r->match.known || !r->last_index.known ||
		    r->last_index.v >= r->match.v)
			continue;
		r->up = false;
		r->err[0] = '\0';
		probe(o, r);
		r->lost_log = r->up && r->last_index.known &&
			      r->last_index.v < r->match.v;
	}
}

#define ASTRAY_RECHECK_MS 500

static bool follows_another(const struct view_member *r,
			    const struct view_member *leader)
{
	return r != leader && r->up && strncmp(r->removed, "yes", 3) != 0 &&
	       (!r->leader_id.known || r->leader_id.v != leader->id);
}

/* A member that follows no leader, or another, while the cluster has
 * one: it cannot reach the leader or they refuse each other. Right after
 * an election a follower may not have heard the new leader yet, so such
 * a member is asked again after a pause before it is marked. */
static void find_astray(const struct ctl_opts *o, struct cluster_view *cl)
{
	const struct view_member *leader = view_leader(cl);
	if (leader == NULL)
		return;
	bool any = false;
	for (size_t i = 0; i < cl->n; i++)
		any = any || follows_another(&cl->rows[i], leader);
	if (!any)
		return;
	struct timespec pause = {0, ASTRAY_RECHECK_MS * 1000000L};
	nanosleep(&pause, NULL);
	for (size_t i = 0; i < cl->n; i++) {
		struct view_member *r = &cl->rows[i];
		if (!follows_another(r, leader))
			continue;
		r->up = false;
		r->err[0] = '\0';
		memset(&r->leader_id, 0, sizeof r->leader_id);
		probe(o, r);
		r->astray = follows_another(r, leader);
	}
}

int view_gather(const struct ctl_opts *o, struct cluster_view *cl)
{
	if (gather_members(o, cl) != 0)
		return -1;
	compute_lag(cl);
	find_lost_logs(o, cl);
	find_astray(o, cl);
	return 0;
}
