/*
 * batonctl status: the members as the asked node knows them, then every
 * member's own BATON.NODE, one row each. The match column (and so the lag)
 * is the leader's view: when the asked node does not lead, the leader's
 * BATON.MEMBERS is read too. Members that do not answer show as `down`.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "view.h"

/* status --watch: how often it looks again. */
#define STATUS_WATCH_INTERVAL_MS_DEFAULT 2000u
#define STATUS_WATCH_INTERVAL_MS_MIN 100u
#define STATUS_WATCH_INTERVAL_MS_MAX 3600000u

static void cell_u64(struct ctl_table *t, size_t col, struct opt_u64 v)
{
	if (v.known)
		ctl_table_set(t, col, "%" PRIu64, v.v);
	else
		ctl_table_set(t, col, "-");
}

static void print_table(const struct cluster_view *cl)
{
	static const char *const header[] = {
		"ID",	   "ADDR",  "ROLE",    "TERM",	"COMMIT",
		"APPLIED", "MATCH", "RELEASE", "PROTO", "MACHINE_MAX",
		"MACHINE", "LEAD",  "LAG"};
	static struct ctl_table t;
	ctl_table_init(&t, sizeof header / sizeof header[0], header);
	for (size_t i = 0; i < cl->n; i++) {
		const struct view_member *r = &cl->rows[i];
		bool ok = ctl_table_row(&t);
		assert(ok);
		(void)ok;
		ctl_table_set(&t, 0, "%" PRIu64, r->id);
		ctl_table_set(&t, 1, "%s",
			      r->client_addr[0] ? r->client_addr : "-");
		ctl_table_set(&t, 2, "%s", view_shown_role(r));
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
		ctl_table_set(&t, 11, "%s", view_shown_eligible(r));
		cell_u64(&t, 12, r->lag);
	}
	ctl_table_print(&t);
}

/* The machine version and what an upgrade waits for, as the leader (or
 * else the first member that answers) sees them. */
static void print_versions(const struct cluster_view *cl,
			   const struct view_member *leader)
{
	const struct view_member *v = leader;
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

static void print_summary(struct cluster_view *cl)
{
	size_t down = 0, stalled = 0;
	for (size_t i = 0; i < cl->n; i++) {
		down += !cl->rows[i].up;
		stalled += view_is_stalled(&cl->rows[i]);
	}
	const struct view_member *leader = view_leader(cl);
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
		const struct view_member *r = &cl->rows[i];
		if (!r->up)
			printf("node %" PRIu64 " (%s): %s\n", r->id,
			       r->client_addr, r->err);
		else if (view_is_stalled(r))
			printf("node %" PRIu64 " (%s) %s: %s\n", r->id,
			       r->client_addr,
			       view_needs_upgrade(r) ? "needs an upgrade"
						     : "stalled",
			       r->stalled[0] ? r->stalled : "no reason given");
		if (strncmp(view_shown_eligible(r), "rule", 4) == 0) {
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

static void print_json(const struct cluster_view *cl)
{
	printf("[");
	for (size_t i = 0; i < cl->n; i++) {
		const struct view_member *r = &cl->rows[i];
		printf("%s\n  {\"id\": %" PRIu64 ", ", i ? "," : "", r->id);
		json_str("role", view_shown_role(r));
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
		json_str("stalled", view_is_stalled(r) ? r->stalled : "");
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

/* One look at the cluster, printed. Returns 0, or -1 if the asked node
 * could not be read (reported on stderr). */
static int show_once(const struct ctl_opts *o, bool json)
{
	static struct cluster_view cl;
	if (view_gather(o, &cl) != 0)
		return -1;
	if (json) {
		print_json(&cl);
	} else if (cl.n == 0) {
		char addr[CTL_ADDR_MAX];
		ctl_opts_addr(o, addr, sizeof addr);
		printf("node %s has no configuration: it is not a member of a "
		       "cluster yet (started with --join; add it with "
		       "'batonctl add' on a member)\n",
		       addr);
	} else {
		print_table(&cl);
		print_summary(&cl);
	}
	return 0;
}

/* --watch: look again every interval until interrupted (or `count` looks,
 * for scripts). On a terminal each look replaces the last one; otherwise
 * the looks follow each other, each under a line with its time. A node
 * that does not answer for a while does not end the watch. */
static int watch(const struct ctl_opts *o, bool json, uint64_t interval_ms,
		 uint64_t count)
{
	bool tty = isatty(STDOUT_FILENO) == 1;
	for (uint64_t n = 0; count == 0 || n < count; n++) {
		if (n > 0) {
			struct timespec ts = {
				.tv_sec = (time_t)(interval_ms / 1000),
				.tv_nsec =
					(long)(interval_ms % 1000) * 1000000L,
			};
			while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
				;
		}
		time_t now = time(NULL);
		struct tm tm;
		char when[32] = "?";
		if (gmtime_r(&now, &tm) != NULL)
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		if (tty)
			fputs("\033[H\033[2J", stdout); /* home, clear */
		if (!json)
			printf("%s-- %s (every %" PRIu64
			       " ms; Ctrl-C to stop)\n",
			       n > 0 && !tty ? "\n" : "", when, interval_ms);
		show_once(o, json);
		if (fflush(stdout) != 0)
			return CTL_EXIT_ERROR;
	}
	return CTL_EXIT_OK;
}

const struct ctl_option ctl_status_options[] = {
	{"json", NULL}, {"watch", NULL}, {"interval-ms", "N"},
	{"count", "N"}, {NULL, NULL},
};

int ctl_cmd_status(const struct ctl_opts *o, const struct ctl_args *a)
{
	bool json = ctl_args_flag(a, "json");
	bool watching = ctl_args_flag(a, "watch");
	uint64_t interval_ms = STATUS_WATCH_INTERVAL_MS_DEFAULT, count = 0;
	int rc = ctl_args_u64(a, "interval-ms", STATUS_WATCH_INTERVAL_MS_MIN,
			      STATUS_WATCH_INTERVAL_MS_MAX, NULL, &interval_ms);
	if (rc == 0)
		rc = ctl_args_u64(a, "count", 1, UINT64_MAX, NULL, &count);
	if (rc != 0)
		return rc;
	if (!watching && count > 0)
		return ctl_usage_error("status: --count goes with --watch");
	if (watching)
		return watch(o, json, interval_ms, count);
	if (show_once(o, json) != 0)
		return CTL_EXIT_ERROR;
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
