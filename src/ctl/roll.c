/*
 * batonctl roll --to RELEASE --restart 'COMMAND {id}' (docs/upgrading.md,
 * "batonctl roll"): the rolling upgrade an operator would do by hand, as
 * one command. Pre-checks first (nothing changes if one refuses), then one
 * node at a time, followers first (least lag first) and the leader last,
 * after handing its leadership to an up-to-date node of the target release;
 * after each restart it waits until the node reports the target release,
 * has caught up and the cluster is healthy; at the end, until the
 * effective machine version rose as far as the members allow. On a failure
 * it stops at once and says what state the cluster is in and how to resume
 * or roll back.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roll.h"

#define DEFAULT_STEP_TIMEOUT_S 60
#define STEP_TIMEOUT_S_MAX 86400
#define DEFAULT_MAX_LAG 1000u
#define PAUSE_S_MAX 3600.0
#define COMMAND_MAX 4096u
/* before_restart(): the node is already at the target (never an exit
 * code). */
#define SKIP (-1)

/* The health gate's default thresholds (docs/upgrading.md, "Health
 * gates"; the bounds are in roll.h). */
#define DEFAULT_GATE_P99_RATIO 3u
#define DEFAULT_GATE_P99_MIN_MS 50u
#define DEFAULT_GATE_ERRORS_PCT 1u
#define DEFAULT_GATE_APPLY_LAG 100u

/* ---- options ---------------------------------------------------------- */

static bool parse_seconds(const char *s, double max, int *ms_out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || !(v >= 0.0) || v > max)
		return false;
	*ms_out = (int)(v * 1000.0 + 0.5);
	return true;
}

const struct ctl_option ctl_roll_options[] = {
	{"to", "RELEASE"},
	{"restart", "COMMAND"},
	{"dry-run", NULL},
	{"pause", "SECONDS"},
	{"step-timeout-s", "N"},
	{"max-lag", "ENTRIES"},
	{"json", NULL},
	{"restart-all", NULL},
	{"skip", "IDS"},
	{"wait-s", "SECONDS"},
	{"soak", "SECONDS"},
	{"gate-p99-ratio", "N"},
	{"gate-p99-min-ms", "MS"},
	{"gate-errors-pct", "N"},
	{"gate-apply-lag", "ENTRIES"},
	{NULL, NULL},
};

/* --skip 1,3: node ids, at most CTL_MEMBERS_MAX. */
static bool parse_skip(struct roll *r, const char *text)
{
	const char *p = text;
	while (*p != '\0') {
		char word[24];
		size_t n = strcspn(p, ",");
		uint64_t id;
		if (n == 0 || n >= sizeof word || r->n_skip == CTL_MEMBERS_MAX)
			return false;
		memcpy(word, p, n);
		word[n] = '\0';
		if (!ctl_parse_u64(word, &id) || id == 0)
			return false;
		r->skip[r->n_skip++] = id;
		p += n;
		if (*p == ',' && *++p == '\0')
			return false;
	}
	return r->n_skip > 0;
}

static bool skipped(const struct roll *r, uint64_t id)
{
	for (size_t i = 0; i < r->n_skip; i++)
		if (r->skip[i] == id)
			return true;
	return false;
}

static int parse_args(struct roll *r, const struct ctl_args *a, bool *json)
{
	r->dry_run = ctl_args_flag(a, "dry-run");
	r->restart_all = ctl_args_flag(a, "restart-all");
	*json = ctl_args_flag(a, "json");
	r->to_text = ctl_args_value(a, "to");
	r->restart = ctl_args_value(a, "restart");
	const char *pause = ctl_args_value(a, "pause");
	if (pause != NULL && !parse_seconds(pause, PAUSE_S_MAX, &r->pause_ms)) {
		char range[64];
		snprintf(range, sizeof range, "0 to %.0f seconds", PAUSE_S_MAX);
		return ctl_args_bad_value(a, "pause", range);
	}
	uint64_t step_timeout_s = (uint64_t)r->step_timeout_s;
	int rc = ctl_args_u64(a, "step-timeout-s", 1, STEP_TIMEOUT_S_MAX,
			      "seconds", &step_timeout_s);
	if (rc == 0)
		rc = ctl_args_u64(a, "max-lag", 0, UINT64_MAX, "entries",
				  &r->max_lag);
	uint64_t wait_s = step_timeout_s;
	if (rc == 0)
		rc = ctl_args_u64(a, "wait-s", 1, STEP_TIMEOUT_S_MAX, "seconds",
				  &wait_s);
	if (rc != 0)
		return rc;
	uint64_t soak_s = 0;
	if (rc == 0)
		rc = ctl_args_u64(a, "soak", 0, ROLL_SOAK_S_MAX, "seconds",
				  &soak_s);
	if (rc == 0)
		rc = ctl_args_u64(a, "gate-p99-ratio", 1, ROLL_GATE_RATIO_MAX,
				  NULL, &r->gate_p99_ratio);
	if (rc == 0)
		rc = ctl_args_u64(a, "gate-p99-min-ms", 0, ROLL_GATE_MS_MAX,
				  "ms", &r->gate_p99_min_ms);
	if (rc == 0)
		rc = ctl_args_u64(a, "gate-errors-pct", 0, 100, "points",
				  &r->gate_errors_pct);
	if (rc == 0)
		rc = ctl_args_u64(a, "gate-apply-lag", 0, UINT64_MAX / 2,
				  "entries", &r->gate_apply_lag);
	if (rc != 0)
		return rc;
	r->soak_ms = (int)soak_s * 1000;
	r->step_timeout_s = (int)step_timeout_s;
	r->wait_s = (int)wait_s;
	const char *skip = ctl_args_value(a, "skip");
	if (skip != NULL && !r->restart_all)
		return ctl_usage_error("roll: --skip goes with --restart-all "
				       "(a roll to a new release skips the "
				       "members already at it by itself)");
	if (skip != NULL && !parse_skip(r, skip))
		return ctl_args_bad_value(a, "skip",
					  "node ids separated by commas (e.g. "
					  "1,3)");
	if (r->to_text == NULL)
		return ctl_usage_error("roll: --to RELEASE is required");
	if (r->restart == NULL)
		return ctl_usage_error("roll: --restart 'COMMAND {id}' is "
				       "required");
	if (strstr(r->restart, "{id}") == NULL)
		return ctl_args_bad_value(a, "restart",
					  "a command that names the node with "
					  "{id} (e.g. 'systemctl restart "
					  "batond@{id}')");
	/* The gate puts a node back on its old release with the same
	 * command: it must say which release to start. */
	if (r->soak_ms > 0 && strstr(r->restart, "{release}") == NULL)
		return ctl_usage_error("roll: with --soak, --restart must name "
				       "the release with {release} too (the "
				       "health gate restarts a node on its "
				       "previous release with it)");
	struct baton_release to;
	if (!roll_release(r->to_text, &to))
		return ctl_args_bad_value(a, "to",
					  "a release (major.minor.patch)");
	return CTL_EXIT_OK;
}

bool roll_expand(const struct roll *r, uint64_t id, const char *release,
		 char *out, size_t len)
{
	return roll_command_expand(r->restart, id, release, out, len);
}

/* ---- the plan ------------------------------------------------------------ */

static int by_lag(const void *a, const void *b)
{
	const struct roll_step *x = a, *y = b;
	if (x->led != y->led)
		return x->led ? 1 : -1;
	if (x->lag != y->lag)
		return x->lag < y->lag ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void make_plan(struct roll *r)
{
	struct roll_view *v = &r->view;
	r->n_plan = 0;
	for (size_t i = 0; i < v->n; i++) {
		const struct roll_member *m = &v->m[i];
		if (skipped(r, m->id) ||
		    (!r->restart_all && roll_at_target(r, m)))
			continue;
		struct roll_step *s = &r->plan[r->n_plan++];
		s->id = m->id;
		s->led = m == v->leader;
		s->lag = roll_lag(v, m);
		snprintf(s->from, sizeof s->from, "%s", m->release);
	}
	qsort(r->plan, r->n_plan, sizeof r->plan[0], by_lag);
}

static void print_plan(struct roll *r)
{
	char order[CTL_MEMBERS_MAX * 24] = "[", text[CTL_MEMBERS_MAX * 48] = "";
	char skip_ids[CTL_MEMBERS_MAX * 24] = "[";
	for (size_t i = 0; i < r->n_plan; i++) {
		const struct roll_step *s = &r->plan[i];
		snprintf(order + strlen(order), sizeof order - strlen(order),
			 "%s%" PRIu64, i ? ", " : "", s->id);
		snprintf(text + strlen(text), sizeof text - strlen(text),
			 "%snode %" PRIu64 " (%s%s)", i ? ", " : "", s->id,
			 s->from,
			 s->led ? ", the leader: hand over first" : "");
	}
	strcat(order, "]");
	for (size_t i = 0; i < r->view.n; i++) {
		const struct roll_member *m = &r->view.m[i];
		bool skip = skipped(r, m->id);
		if (!skip && (r->restart_all || !roll_at_target(r, m)))
			continue;
		snprintf(skip_ids + strlen(skip_ids),
			 sizeof skip_ids - strlen(skip_ids), "%s%" PRIu64,
			 skip_ids[1] ? ", " : "", m->id);
		if (skip)
			roll_say(&r->out, "node %" PRIu64 " skipped (--skip)",
				 m->id);
		else
			roll_say(&r->out,
				 "node %" PRIu64 " already runs %s: skipped",
				 m->id, r->to_text);
	}
	strcat(skip_ids, "]");
	struct roll_field f[] = {ROLL_F_RAW("order", order),
				 ROLL_F_RAW("skipped", skip_ids),
				 ROLL_F_STR("to", r->to_text)};
	roll_emit(&r->out, "plan", f, 3, "plan: restart %s at release %s%s",
		  text[0] != '\0'  ? text
		  : r->restart_all ? "no node (every member skipped)"
				   : "no node (every member runs it)",
		  r->to_text,
		  r->restart_all ? " (--restart-all: members already at it "
				   "too)"
				 : "");
}

/* ---- one node ------------------------------------------------------------ */

/* Whether the cluster is ready after node `id`'s restart; else `why`. */
static bool node_ready(struct roll *r, uint64_t id, char *why, size_t len)
{
	roll_refresh(r);
	struct roll_view *v = &r->view;
	struct roll_member *m = roll_find(v, id);
	const struct roll_member *l = v->leader;
	if (v->n == 0) {
		snprintf(why, len, "no member answers: %s", v->err);
		return false;
	}
	if (m == NULL) {
		snprintf(why, len, "node %" PRIu64 " is no longer a member",
			 id);
		return false;
	}
	if (!m->up) {
		snprintf(why, len, "node %" PRIu64 " does not answer: %s", id,
			 m->err);
		return false;
	}
	if (!roll_at_target(r, m)) {
		snprintf(why, len,
			 "node %" PRIu64 " answers but reports release %s", id,
			 m->release);
		return false;
	}
	for (size_t i = 0; i < v->n; i++) {
		if (!v->m[i].up) {
			snprintf(why, len,
				 "node %" PRIu64 " does not answer: %s",
				 v->m[i].id, v->m[i].err);
			return false;
		}
	}
	if (l == NULL) {
		snprintf(why, len, "no member reports leading");
		return false;
	}
	if (m->term != l->term || m->leader != l->id) {
		snprintf(why, len,
			 "node %" PRIu64 " has not heard from the leader "
			 "(node %" PRIu64 ", term %" PRIu64 ") yet",
			 id, l->id, l->term);
		return false;
	}
	uint64_t lag = roll_lag(v, m);
	if (m != l &&
	    (lag > r->max_lag || m->commit + r->max_lag < l->commit)) {
		snprintf(why, len,
			 "node %" PRIu64 " is not caught up: commit %" PRIu64
			 ", the leader's match for it %" PRIu64
			 ", the leader's commit %" PRIu64,
			 id, m->commit, m->match, l->commit);
		return false;
	}
	if (m->stalled_index == 0 && m->applied + r->max_lag < m->commit) {
		snprintf(why, len,
			 "node %" PRIu64 " still applies: applied %" PRIu64
			 " of commit %" PRIu64,
			 id, m->applied, m->commit);
		return false;
	}
	return true;
}

/* Wait until node `id` is ready; false with `why` at the step timeout. */
static bool wait_ready(struct roll *r, uint64_t id, char *why, size_t len)
{
	uint64_t end =
		roll_now_ns() + (uint64_t)r->step_timeout_s * 1000000000u;
	while (!node_ready(r, id, why, len)) {
		if (roll_now_ns() >= end)
			return false;
		roll_sleep_ms(ROLL_POLL_MS);
	}
	return true;
}

/* Before node k's restart: wait until the cluster can spare it, and move
 * leadership away from it. Returns SKIP when it is to be skipped, 0 when it
 * may be restarted now, or an exit code after reporting. */
static int before_restart(struct roll *r, size_t k)
{
	struct roll_step *s = &r->plan[k];
	bool said_no_handover = false;
	for (;;) {
		/* Read again now (after the last node, after the pause): a
		 * member may have died meanwhile. */
		int rv = roll_wait_safe(r, s->id);
		if (rv != 0)
			return rv;
		const struct roll_member *m = roll_find(&r->view, s->id);
		assert(m != NULL && r->view.leader != NULL);
		if (!r->restart_all && roll_at_target(r, m)) {
			roll_say(&r->out,
				 "node %" PRIu64 " already runs %s: skipped",
				 s->id, r->to_text);
			return SKIP;
		}
		if (r->view.leader == m) {
			rv = roll_hand_over(r, s->id);
			if (rv != 0)
				return rv;
			continue; /* and check again: no member is lost */
		}
		if (s->led && !said_no_handover) {
			const struct roll_member *l = r->view.leader;
			struct roll_field f[] = {ROLL_F_NUM("from", s->id),
						 ROLL_F_NUM("to", l->id)};
			roll_emit(&r->out, "transfer", f, 2,
				  "node %" PRIu64 " no longer leads (node "
				  "%" PRIu64 " does): no hand-over needed",
				  s->id, l->id);
			said_no_handover = true;
		}
		return 0;
	}
}

static int roll_node(struct roll *r, size_t k)
{
	struct roll_step *s = &r->plan[k];
	int rv = before_restart(r, k);
	if (rv != 0)
		return rv == SKIP ? 0 : rv;
	char cmd[COMMAND_MAX], prefix[48], why[ROLL_REASON_MAX];
	if (!roll_expand(r, s->id, r->to_text, cmd, sizeof cmd))
		return roll_fail(r, s->id,
				 "the restart command is longer than %u "
				 "bytes",
				 COMMAND_MAX);
	snprintf(prefix, sizeof prefix, "  node %" PRIu64 " | ", s->id);
	struct roll_field f[] = {ROLL_F_NUM("node", s->id),
				 ROLL_F_STR("from", s->from),
				 ROLL_F_STR("command", cmd)};
	roll_emit(&r->out, "restart", f, 3,
		  "restarting node %" PRIu64 " (%s -> %s): %s", s->id, s->from,
		  r->to_text, cmd);
	r->n_started = k + 1;
	s->done = false;
	int code = roll_run_command(&r->out, cmd, prefix,
				    r->step_timeout_s * 1000, why, sizeof why);
	if (code != 0)
		return roll_fail(r, s->id,
				 "the restart command '%s' failed: %s", cmd,
				 why);
	roll_emit(&r->out, "wait", f, 1,
		  "waiting for node %" PRIu64 " to report %s and catch up",
		  s->id, r->to_text);
	if (!wait_ready(r, s->id, why, sizeof why))
		return roll_fail(r, s->id, "not ready within %d s: %s",
				 r->step_timeout_s, why);
	const struct roll_member *m = roll_find(&r->view, s->id);
	assert(m != NULL && r->view.leader != NULL);
	struct roll_field d[] = {ROLL_F_NUM("node", s->id),
				 ROLL_F_STR("release", r->to_text),
				 ROLL_F_NUM("leader", r->view.leader->id)};
	roll_emit(&r->out, "node_done", d, 3,
		  "node %" PRIu64 " runs %s, caught up (commit %" PRIu64
		  "); node %" PRIu64 " leads",
		  s->id, r->to_text, m->commit, r->view.leader->id);
	s->done = true;
	return r->soak_ms > 0 ? roll_gate(r, k) : 0;
}

/* ---- the command --------------------------------------------------------- */

/* The last roll run in this process, for roll_stopped_by_gate(). */
static const struct roll *last_roll;

bool roll_stopped_by_gate(void)
{
	return last_roll != NULL && last_roll->gate_failed;
}

int ctl_cmd_roll(const struct ctl_opts *o, const struct ctl_args *a)
{
	static struct roll r;
	memset(&r, 0, sizeof r);
	last_roll = &r;
	r.o = o;
	r.args = a;
	r.step_timeout_s = DEFAULT_STEP_TIMEOUT_S;
	r.max_lag = DEFAULT_MAX_LAG;
	r.gate_p99_ratio = DEFAULT_GATE_P99_RATIO;
	r.gate_p99_min_ms = DEFAULT_GATE_P99_MIN_MS;
	r.gate_errors_pct = DEFAULT_GATE_ERRORS_PCT;
	r.gate_apply_lag = DEFAULT_GATE_APPLY_LAG;
	bool json = false;
	int rv = parse_args(&r, a, &json);
	if (rv != CTL_EXIT_OK)
		return rv;
	roll_out_init(&r.out, json);
	roll_seeds_init(&r.seeds, o);
	struct baton_release to;
	roll_release(r.to_text, &to);
	r.target = baton_release_find(to);
	if (r.target == NULL) {
		char mine[BATON_RELEASE_STR_MAX];
		baton_release_format(baton_release_current()->release, mine);
		struct roll_field f[] = {ROLL_F_RAW("ok", "false")};
		roll_emit(
			&r.out, "precheck", f, 1,
			"pre-check refused: batonctl %s does not know release "
			"%s: use the batonctl of release %s or newer",
			mine, r.to_text, r.to_text);
		return ROLL_EXIT_REFUSED;
	}
	size_t refused = roll_precheck(&r);
	if (refused > 0) {
		ctl_error("roll to %s refused by %zu pre-check(s): nothing was "
			  "changed",
			  r.to_text, refused);
		return ROLL_EXIT_REFUSED;
	}
	struct roll_field f[] = {ROLL_F_RAW("ok", "true"),
				 ROLL_F_NUM("members", r.view.n),
				 ROLL_F_NUM("leader", r.view.leader->id)};
	roll_emit(&r.out, "precheck", f, 3,
		  "pre-checks passed: %zu members answer, node %" PRIu64
		  " leads, all caught up (--max-lag %" PRIu64
		  "), no downgrade in progress, release %s can talk to every "
		  "member",
		  r.view.n, r.view.leader->id, r.max_lag, r.to_text);
	make_plan(&r);
	print_plan(&r);
	if (r.dry_run) {
		for (size_t i = 0; i < r.n_plan; i++) {
			char cmd[COMMAND_MAX];
			if (roll_expand(&r, r.plan[i].id, r.to_text, cmd,
					sizeof cmd))
				roll_say(&r.out, "  would run: %s", cmd);
		}
		roll_emit(&r.out, "done", NULL, 0,
			  "dry run: nothing was changed");
		return CTL_EXIT_OK;
	}
	if (r.n_plan == 0)
		roll_say(&r.out, "every member already runs %s", r.to_text);
	if (r.soak_ms > 0 && r.n_plan > 0)
		roll_gate_baseline(&r);
	for (size_t k = 0; k < r.n_plan; k++) {
		rv = roll_node(&r, k);
		if (rv != 0)
			return rv;
		if (r.pause_ms > 0 && k + 1 < r.n_plan) {
			struct roll_field pf[] = {
				ROLL_F_NUM("ms", (uint64_t)r.pause_ms)};
			roll_emit(&r.out, "pause", pf, 1, "pausing %.1f s",
				  r.pause_ms / 1000.0);
			roll_sleep_ms(r.pause_ms);
		}
	}
	rv = roll_wait_machine(&r);
	if (rv != CTL_EXIT_OK)
		return rv;
	struct roll_field d[] = {ROLL_F_NUM("restarted", r.n_plan),
				 ROLL_F_NUM("leader", r.view.leader->id)};
	roll_emit(
		&r.out, "done", d, 2,
		"rolled %zu node(s) to %s: every member runs it, node %" PRIu64
		" leads",
		r.n_plan, r.to_text, r.view.leader->id);
	return CTL_EXIT_OK;
}
