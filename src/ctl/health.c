/*
 * batonctl health: is the cluster fit to serve? Exit 0 when it is, 1 with
 * one line per reason when it is not, so a script or a monitor can act on
 * the exit status alone. The reasons use the same words as a node's HTTP
 * /health (docs/metrics.md): "no leader", "member N down", "member N lags
 * by K entries", "storage failed: ...", "needs-upgrade: ...".
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

#define HEALTH_MAX_LAG_DEFAULT 1000u
#define HEALTH_REASONS_MAX (CTL_MEMBERS_MAX * 6u + 2u)

struct health {
	char reasons[HEALTH_REASONS_MAX][CTL_ERR_MAX + 64];
	size_t n;
};

static void reason(struct health *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void reason(struct health *h, const char *fmt, ...)
{
	if (h->n == HEALTH_REASONS_MAX)
		return; /* six per member and two more: never reached */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->reasons[h->n++], sizeof h->reasons[0], fmt, ap);
	va_end(ap);
}

/* One member's problems: it does not answer, cannot write, stopped
 * applying, was removed, or is too far behind the leader. */
static void check_member(struct health *h, const struct view_member *r,
			 uint64_t max_lag)
{
	/* The lag is the leader's view: known for a member that is down
	 * too. The other facts come from the member itself. */
	if (!r->up)
		reason(h, "member %" PRIu64 " down: %s", r->id, r->err);
	if (view_storage_failed(r))
		reason(h,
		       "storage failed: member %" PRIu64
		       " (its log refused a write or an fsync; see its log)",
		       r->id);
	if (view_needs_upgrade(r))
		reason(h,
		       "needs-upgrade: member %" PRIu64
		       " stopped at index %" PRIu64 ": %s",
		       r->id, r->stalled_index.v, r->stalled);
	else if (view_is_stalled(r))
		reason(h, "member %" PRIu64 " stalled at index %" PRIu64 ": %s",
		       r->id, r->stalled_index.v, r->stalled);
	if (strncmp(r->removed, "yes", 3) == 0)
		reason(h, "member %" PRIu64 " was removed: %s", r->id,
		       r->removed);
	if (r->lost_log)
		reason(h,
		       "member %" PRIu64 " lost entries it had acknowledged: "
		       "its log ends at %" PRIu64 ", below the %" PRIu64
		       " the leader recorded; it was restarted on an empty or "
		       "older data directory under its old id. Stop it, "
		       "`batonctl remove %" PRIu64 "`, and add a replacement "
		       "under a new id (docs/operations.md, \"Replacing a "
		       "failed node\")",
		       r->id, r->last_index.v, r->match.v, r->id);
	if (r->astray)
		reason(h,
		       "member %" PRIu64 " hears no leader (it follows "
		       "%s): it cannot reach the leader's peer port, or they "
		       "refuse each other (another peer secret or cluster "
		       "id: see both logs)",
		       r->id,
		       r->leader_id.known && r->leader_id.v != 0
			       ? "another node"
			       : "none");
	if (r->lag.known && r->lag.v > max_lag)
		reason(h,
		       "member %" PRIu64 " lags by %" PRIu64
		       " entries (bound %" PRIu64 ")",
		       r->id, r->lag.v, max_lag);
}

/* The member's count of peers it refused for a wrong peer secret (INFO's
 * peer_auth_failed), or 0 when it does not say. */
static uint64_t auth_failures(const struct ctl_opts *o,
			      const struct view_member *r)
{
	char err[CTL_ERR_MAX];
	const char *argv[] = {"INFO", "stats"};
	redisReply *info = ctl_ask(o, r->client_addr, 2, argv, err, sizeof err);
	uint64_t n = 0;
	const char *at = info != NULL && info->type == REDIS_REPLY_STRING
				 ? strstr(info->str, "\npeer_auth_failed:")
				 : NULL;
	if (at != NULL)
		n = strtoull(at + strlen("\npeer_auth_failed:"), NULL, 10);
	freeReplyObject(info);
	return n;
}

static void check(const struct ctl_opts *o, struct health *h,
		  struct cluster_view *cl, uint64_t max_lag)
{
	if (cl->n == 0) {
		reason(h, "no configuration: the node is not a member of a "
			  "cluster yet (started with --join and not added)");
		return;
	}
	if (view_leader(cl) == NULL) {
		reason(h, "no leader");
		/* Founders with different peer secrets refuse each other
		 * and never elect: say so, it is the likely cause. */
		for (size_t i = 0; i < cl->n; i++) {
			const struct view_member *r = &cl->rows[i];
			uint64_t n = r->up ? auth_failures(o, r) : 0;
			if (n > 0)
				reason(h,
				       "member %" PRIu64 " refused %" PRIu64
				       " peer connection(s) for a wrong peer "
				       "secret (INFO peer_auth_failed): every "
				       "member needs the same "
				       "--peer-secret-file contents",
				       r->id, n);
		}
	}
	for (size_t i = 0; i < cl->n; i++)
		check_member(h, &cl->rows[i], max_lag);
}

static void print_text(const struct health *h, struct cluster_view *cl)
{
	const struct view_member *leader = view_leader(cl);
	if (h->n == 0) {
		uint64_t lag = 0;
		for (size_t i = 0; i < cl->n; i++)
			if (cl->rows[i].lag.known && cl->rows[i].lag.v > lag)
				lag = cl->rows[i].lag.v;
		printf("healthy: leader node %" PRIu64 " at %s, %zu %s, "
		       "largest lag %" PRIu64 " entries\n",
		       leader->id, leader->client_addr, cl->n,
		       cl->n == 1 ? "member answers" : "members answer", lag);
		return;
	}
	printf("unhealthy: %zu problem%s\n", h->n, h->n == 1 ? "" : "s");
	for (size_t i = 0; i < h->n; i++)
		printf("%s\n", h->reasons[i]);
}

static void print_json(const struct health *h, struct cluster_view *cl)
{
	const struct view_member *leader = view_leader(cl);
	printf("{\"healthy\": %s, \"leader\": ", h->n == 0 ? "true" : "false");
	if (leader != NULL)
		printf("%" PRIu64, leader->id);
	else
		fputs("null", stdout);
	printf(", \"members\": %zu, \"reasons\": [", cl->n);
	for (size_t i = 0; i < h->n; i++) {
		fputs(i ? ", " : "", stdout);
		ctl_json_string(h->reasons[i]);
	}
	printf("]}\n");
}

const struct ctl_option ctl_health_options[] = {
	{"max-lag", "ENTRIES"},
	{"json", NULL},
	{NULL, NULL},
};

int ctl_cmd_health(const struct ctl_opts *o, const struct ctl_args *a)
{
	bool json = ctl_args_flag(a, "json");
	uint64_t max_lag = HEALTH_MAX_LAG_DEFAULT;
	int rc = ctl_args_u64(a, "max-lag", 0, UINT64_MAX, "entries", &max_lag);
	if (rc != 0)
		return rc;
	static struct cluster_view cl;
	if (view_gather(o, &cl) != 0)
		return CTL_EXIT_ERROR; /* the asked node did not answer */
	static struct health h;
	memset(&h, 0, sizeof h);
	check(o, &h, &cl, max_lag);
	if (json)
		print_json(&h, &cl);
	else
		print_text(&h, &cl);
	if (fflush(stdout) != 0)
		return CTL_EXIT_ERROR;
	return h.n == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
