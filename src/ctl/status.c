/*
 * batonctl status: the members as the asked node knows them, then every
 * member's own BATON.NODE, one row each. The match column (and so the lag)
 * is the leader's view: when the asked node does not lead, the leader's
 * BATON.MEMBERS is read too. Members that do not answer show as `down`.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"

/* A number a member may not have told us: printed as "-" or null. */
struct opt_u64 {
	bool known;
	uint64_t v;
};

struct row {
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
};

struct cluster {
	struct row rows[CTL_MEMBERS_MAX];
	size_t n;
};

static void opt_read(const redisReply *map, const char *field,
		     struct opt_u64 *out)
{
	out->known = ctl_map_u64(map, field, &out->v);
}

static struct row *row_find(struct cluster *cl, uint64_t id)
{
	for (size_t i = 0; i < cl->n; i++)
		if (cl->rows[i].id == id)
			return &cl->rows[i];
	return NULL;
}

/* Merge one BATON.MEMBERS reply into the rows: new members are added,
 * known ones get the reply's match index if it has one. Returns 0, or -1
 * with `err` set if the reply is malformed or too long. */
static int merge_members(struct cluster *cl, const redisReply *r, char *err,
			 size_t err_len)
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
		struct row *row = row_find(cl, id);
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
static void read_node(struct row *row, const redisReply *r)
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
}

/* The eligibility column: "yes", "rule 1", "rule 2", "no" (not a voter),
 * or "-" (not known). */
static const char *shown_eligible(const struct row *r)
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

static bool is_stalled(const struct row *r)
{
	return r->up && r->stalled_index.known && r->stalled_index.v != 0;
}

static bool needs_upgrade(const struct row *r)
{
	return r->up && strncmp(r->needs_upgrade, "yes", 3) == 0;
}

static void probe(const struct ctl_opts *o, struct row *row)
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

/* The member that reports leading in the highest term, or NULL. */
static struct row *find_leader(struct cluster *cl)
{
	struct row *best = NULL;
	for (size_t i = 0; i < cl->n; i++) {
		struct row *r = &cl->rows[i];
		if (!r->up || strcmp(r->role, "leader") != 0)
			continue;
		if (best == NULL || (r->term.known && best->term.known &&
				     r->term.v > best->term.v))
			best = r;
	}
	return best;
}

static const char *shown_role(const struct row *r)
{
	if (!r->up)
		return "down";
	if (needs_upgrade(r))
		return "needs-upgrade";
	if (is_stalled(r))
		return "stalled";
	if (strcmp(r->role, "pre-candidate") == 0)
		return "candidate";
	if (strcmp(r->role, "follower") == 0 && !r->voter)
		return "learner";
	return r->role[0] != '\0' ? r->role : "?";
}

/* Read the members from the asked node (and the leader's match indexes),
 * then every member's BATON.NODE. Returns 0, or -1 after reporting. */
static int gather(const struct ctl_opts *o, struct cluster *cl)
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
	struct row *leader = find_leader(cl);
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

static void compute_lag(struct cluster *cl)
{
	const struct row *leader = find_leader(cl);
	if (leader == NULL || !leader->last_index.known)
		return;
	uint64_t last = leader->last_index.v;
	for (size_t i = 0; i < cl->n; i++) {
		struct row *r = &cl->rows[i];
		if (!r->match.known)
			continue;
		r->lag.known = true;
		r->lag.v = r->match.v < last ? last - r->match.v : 0;
	}
}

static void cell_u64(struct ctl_table *t, size_t col, struct opt_u64 v)
{
	if (v.known)
		ctl_table_set(t, col, "%" PRIu64, v.v);
	else
		ctl_table_set(t, col, "-");
}

static void print_table(const struct cluster *cl)
{
	static const char *const header[] = {
		"ID",	   "ADDR",  "ROLE",    "TERM",	"COMMIT",
		"APPLIED", "MATCH", "RELEASE", "PROTO", "MACHINE_MAX",
		"MACHINE", "LEAD",  "LAG"};
	static struct ctl_table t;
	ctl_table_init(&t, sizeof header / sizeof header[0], header);
	for (size_t i = 0; i < cl->n; i++) {
		const struct row *r = &cl->rows[i];
		bool ok = ctl_table_row(&t);
		assert(ok);
		(void)ok;
		ctl_table_set(&t, 0, "%" PRIu64, r->id);
		ctl_table_set(&t, 1, "%s",
			      r->client_addr[0] ? r->client_addr : "-");
		ctl_table_set(&t, 2, "%s", shown_role(r));
		cell_u64(&t, 3, r->term);
		cell_u64(&t, 4, r->commit);
		cell_u64(&t, 5, r->applied);
		cell_u64(&t, 6, r->match);
		ctl_table_set(&t, 7, "%s", r->release[0] ? r->release : "-");
		if (r->proto_min.known && r->proto_max.known)
			ctl_table_set(&t, 8, "%" PRIu64 "-%" PRIu64,
				      r->proto_min.v, r->proto_max.v);
		else
			ctl_table_set(&t, 8, "-");
		cell_u64(&t, 9, r->machine_max);
		cell_u64(&t, 10, r->machine_version);
		ctl_table_set(&t, 11, "%s", shown_eligible(r));
		cell_u64(&t, 12, r->lag);
	}
	ctl_table_print(&t);
}

/* The machine version and what an upgrade waits for, as the leader (or
 * else the first member that answers) sees them. */
static void print_versions(const struct cluster *cl, const struct row *leader)
{
	const struct row *v = leader;
	for (size_t i = 0; v == NULL && i < cl->n; i++)
		if (cl->rows[i].up && cl->rows[i].machine_version.known)
			v = &cl->rows[i];
	if (v == NULL || !v->machine_version.known)
		return;
	printf("machine version: %" PRIu64 " (upgrade strategy %s",
	       v->machine_version.v,
	       v->machine_upgrade[0] ? v->machine_upgrade : "?");
	if (v != leader)
		printf(", as node %" PRIu64 " sees it", v->id);
	printf("); an upgrade waits for: %s\n",
	       v->upgrade_waits_for[0] ? v->upgrade_waits_for : "nothing");
	if (v->release_floor[0] == '\0')
		return; /* an older server */
	printf("release floor: %s (election policy %s); downgrade: %s\n",
	       v->release_floor,
	       v->election_policy[0] ? v->election_policy : "?",
	       v->downgrade[0] ? v->downgrade : "?");
}

static void print_summary(struct cluster *cl)
{
	size_t down = 0, stalled = 0;
	for (size_t i = 0; i < cl->n; i++) {
		down += !cl->rows[i].up;
		stalled += is_stalled(&cl->rows[i]);
	}
	const struct row *leader = find_leader(cl);
	if (leader != NULL)
		printf("\nleader: node %" PRIu64 " at %s, term %" PRIu64,
		       leader->id, leader->client_addr, leader->term.v);
	else
		printf("\nleader: none known");
	printf("; %zu members, %zu down", cl->n, down);
	if (stalled > 0)
		printf(", %zu stalled", stalled);
	printf("\n");
	print_versions(cl, leader);
	for (size_t i = 0; i < cl->n; i++) {
		const struct row *r = &cl->rows[i];
		if (!r->up)
			printf("node %" PRIu64 " (%s): %s\n", r->id,
			       r->client_addr, r->err);
		else if (is_stalled(r))
			printf("node %" PRIu64 " (%s) %s: %s\n", r->id,
			       r->client_addr,
			       needs_upgrade(r) ? "needs an upgrade"
						: "stalled",
			       r->stalled[0] ? r->stalled : "no reason given");
		if (strncmp(shown_eligible(r), "rule", 4) == 0) {
			/* "no (rule 1: ...)": the text in the brackets. */
			const char *e = r->leader_eligible + 4;
			size_t n = strlen(e);
			if (n > 0 && e[n - 1] == ')')
				n--;
			printf("node %" PRIu64 " may not lead now: %.*s\n",
			       r->id, (int)n, e);
		}
	}
}

static void json_u64(const char *key, struct opt_u64 v, bool last)
{
	if (v.known)
		printf("\"%s\": %" PRIu64 "%s", key, v.v, last ? "" : ", ");
	else
		printf("\"%s\": null%s", key, last ? "" : ", ");
}

static void json_str(const char *key, const char *s)
{
	printf("\"%s\": ", key);
	if (s[0] != '\0')
		ctl_json_string(s);
	else
		fputs("null", stdout);
	fputs(", ", stdout);
}

static void print_json(const struct cluster *cl)
{
	printf("[");
	for (size_t i = 0; i < cl->n; i++) {
		const struct row *r = &cl->rows[i];
		printf("%s\n  {\"id\": %" PRIu64 ", ", i ? "," : "", r->id);
		json_str("role", shown_role(r));
		json_str("membership", r->voter ? "voter" : "learner");
		json_str("client_addr", r->client_addr);
		json_str("peer_addr", r->peer_addr);
		json_str("release", r->up ? r->release : "");
		json_u64("term", r->term, false);
		json_u64("commit", r->commit, false);
		json_u64("applied", r->applied, false);
		json_u64("last_index", r->last_index, false);
		json_u64("match", r->match, false);
		json_u64("proto_min", r->proto_min, false);
		json_u64("proto_max", r->proto_max, false);
		json_u64("machine_max", r->machine_max, false);
		json_u64("lag", r->lag, false);
		json_u64("stalled_index", r->stalled_index, false);
		json_str("stalled", is_stalled(r) ? r->stalled : "");
		json_u64("machine_version", r->machine_version, false);
		json_str("machine_upgrade", r->up ? r->machine_upgrade : "");
		/* "" (nothing waits) differs from null (not known). */
		printf("\"upgrade_waits_for\": ");
		if (r->up && r->machine_version.known)
			ctl_json_string(r->upgrade_waits_for);
		else
			fputs("null", stdout);
		fputs(", ", stdout);
		json_str("needs_upgrade", r->up ? r->needs_upgrade : "");
		json_str("leader_eligible", r->up ? r->leader_eligible : "");
		json_str("release_floor", r->up ? r->release_floor : "");
		json_str("election_policy", r->up ? r->election_policy : "");
		json_str("downgrade", r->up ? r->downgrade : "");
		json_str("versions_source", r->versions);
		json_str("table_release", r->table_release);
		json_u64("table_machine_max", r->table_machine_max, false);
		printf("\"error\": ");
		if (r->up)
			fputs("null", stdout);
		else
			ctl_json_string(r->err);
		printf("}");
	}
	printf("%s]\n", cl->n ? "\n" : "");
}

int ctl_cmd_status(const struct ctl_opts *o, int argc, char **argv)
{
	bool json = false;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else
			return ctl_usage_error("status: unknown argument '%s'",
					       argv[i]);
	}
	static struct cluster cl;
	if (gather(o, &cl) != 0)
		return CTL_EXIT_ERROR;
	compute_lag(&cl);
	if (json) {
		print_json(&cl);
	} else {
		print_table(&cl);
		print_summary(&cl);
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
