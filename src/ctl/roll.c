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
#define TRANSFER_RETRY_NS 500000000u

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
	{"to", "RELEASE"},	 {"restart", "COMMAND"},
	{"dry-run", NULL},	 {"pause", "SECONDS"},
	{"step-timeout-s", "N"}, {"max-lag", "ENTRIES"},
	{"json", NULL},		 {NULL, NULL},
};

static int parse_args(struct roll *r, const struct ctl_args *a, bool *json)
{
	r->dry_run = ctl_args_flag(a, "dry-run");
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
	if (rc != 0)
		return rc;
	r->step_timeout_s = (int)step_timeout_s;
	if (r->to_text == NULL)
		return ctl_usage_error("roll: --to RELEASE is required");
	if (r->restart == NULL)
		return ctl_usage_error("roll: --restart 'COMMAND {id}' is "
				       "required");
	if (strstr(r->restart, "{id}") == NULL)
		return ctl_args_bad_value(a, "restart",
					  "a command that names the node with "
					  "{id} (e.g. 'systemctl restart "
					  "baton@{id}')");
	struct baton_release to;
	if (!roll_release(r->to_text, &to))
		return ctl_args_bad_value(a, "to",
					  "a release (major.minor.patch)");
	return CTL_EXIT_OK;
}

/* The restart template with {id} and {release} replaced. */
static bool expand(const struct roll *r, uint64_t id, char *out, size_t len)
{
	char id_text[24];
	snprintf(id_text, sizeof id_text, "%" PRIu64, id);
	size_t at = 0;
	for (const char *p = r->restart; *p;) {
		const char *with = NULL;
		size_t skip = 1;
		if (strncmp(p, "{id}", 4) == 0) {
			with = id_text;
			skip = 4;
		} else if (strncmp(p, "{release}", 9) == 0) {
			with = r->to_text;
			skip = 9;
		}
		size_t n = with ? strlen(with) : 1;
		if (at + n + 1 > len)
			return false;
		memcpy(out + at, with ? with : p, n);
		at += n;
		p += skip;
	}
	out[at] = '\0';
	return true;
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
		if (roll_at_target(r, m))
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
	char skipped[CTL_MEMBERS_MAX * 24] = "[";
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
		if (!roll_at_target(r, m))
			continue;
		snprintf(skipped + strlen(skipped),
			 sizeof skipped - strlen(skipped), "%s%" PRIu64,
			 skipped[1] ? ", " : "", m->id);
		roll_say(&r->out, "node %" PRIu64 " already runs %s: skipped",
			 m->id, r->to_text);
	}
	strcat(skipped, "]");
	struct roll_field f[] = {ROLL_F_RAW("order", order),
				 ROLL_F_RAW("skipped", skipped),
				 ROLL_F_STR("to", r->to_text)};
	roll_emit(&r->out, "plan", f, 3, "plan: restart %s at release %s",
		  text[0] != '\0' ? text : "no node (every member runs it)",
		  r->to_text);
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

/* Wait until some member reports leading; false at the step timeout. */
static bool wait_leader(struct roll *r)
{
	uint64_t end =
		roll_now_ns() + (uint64_t)r->step_timeout_s * 1000000000u;
	while (r->view.leader == NULL) {
		if (roll_now_ns() >= end)
			return false;
		roll_sleep_ms(ROLL_POLL_MS);
		roll_refresh(r);
	}
	return true;
}

/* The voter to hand leadership to: up to date, applying, of the target
 * release if any is (the preferred release), the highest match. */
static const struct roll_member *successor(struct roll *r, uint64_t leader)
{
	const struct roll_member *best = NULL;
	for (size_t i = 0; i < r->view.n; i++) {
		const struct roll_member *m = &r->view.m[i];
		if (m->id == leader || !m->voter || !m->up ||
		    m->stalled_index != 0 || roll_lag(&r->view, m) > r->max_lag)
			continue;
		bool better =
			best == NULL ||
			(roll_at_target(r, m) && !roll_at_target(r, best)) ||
			(roll_at_target(r, m) == roll_at_target(r, best) &&
			 m->match > best->match);
		if (better)
			best = m;
	}
	return best;
}

/* Node `id` leads: hand leadership over and wait until another node leads.
 * Returns 0, or an exit code after reporting. */
static int hand_over(struct roll *r, uint64_t id)
{
	const struct roll_member *to = successor(r, id);
	if (to == NULL) {
		roll_emit(&r->out, "transfer",
			  (struct roll_field[]){ROLL_F_NUM("from", id)}, 1,
			  "node %" PRIu64 " leads and no other voter is up to "
			  "date: restarting it without a hand-over (no leader "
			  "until it is back)",
			  id);
		return 0;
	}
	uint64_t to_id = to->id;
	char to_release[CTL_VALUE_MAX], arg[24], why[ROLL_REASON_MAX] = "";
	snprintf(to_release, sizeof to_release, "%s", to->release);
	snprintf(arg, sizeof arg, "%" PRIu64, to_id);
	struct roll_field f[] = {ROLL_F_NUM("from", id),
				 ROLL_F_NUM("to", to_id),
				 ROLL_F_STR("to_release", to_release)};
	roll_emit(&r->out, "transfer", f, 3,
		  "node %" PRIu64 " leads: handing leadership to node %" PRIu64
		  " (release %s)",
		  id, to_id, to_release);
	uint64_t end =
		roll_now_ns() + (uint64_t)r->step_timeout_s * 1000000000u;
	/* The cluster may be moving leadership itself (a node of the
	 * majority release takes over: "a leadership transfer is in
	 * progress"): a refusal is asked again, until the step timeout. */
	bool sent = false;
	uint64_t next_ask = 0;
	for (;;) {
		const struct roll_member *l = r->view.leader;
		if (l != NULL && l->id != id) {
			roll_emit(&r->out, "transfer", f, 3,
				  "node %" PRIu64 " leads now (term %" PRIu64
				  ")",
				  l->id, l->term);
			return 0;
		}
		if (l != NULL && !sent && roll_now_ns() >= next_ask) {
			struct ctl_conn c;
			const char *argv[] = {"BATON.TRANSFER", arg};
			redisReply *rep = NULL;
			if (ctl_conn_open(&c, r->o, l->client_addr) == 0)
				rep = ctl_conn_call(&c, 2, argv);
			if (rep == NULL)
				snprintf(why, sizeof why, "%s", c.err);
			else if (rep->type == REDIS_REPLY_ERROR)
				snprintf(why, sizeof why,
					 "BATON.TRANSFER %" PRIu64 ": %s",
					 to_id, rep->str);
			else
				sent = true;
			freeReplyObject(rep);
			ctl_conn_close(&c);
			next_ask = roll_now_ns() + TRANSFER_RETRY_NS;
		}
		if (roll_now_ns() >= end)
			return roll_fail(
				r, id,
				"leadership did not move to node %" PRIu64
				" within %d s%s%s",
				to_id, r->step_timeout_s, why[0] ? ": " : "",
				why);
		roll_sleep_ms(ROLL_POLL_MS);
		roll_refresh(r);
	}
}

static int roll_node(struct roll *r, size_t k)
{
	struct roll_step *s = &r->plan[k];
	roll_refresh(r);
	struct roll_member *m = roll_find(&r->view, s->id);
	if (m == NULL)
		return roll_fail(r, s->id,
				 "node %" PRIu64 " is no longer a member",
				 s->id);
	if (roll_at_target(r, m)) {
		roll_say(&r->out, "node %" PRIu64 " already runs %s: skipped",
			 s->id, r->to_text);
		return 0;
	}
	/* Mid-election (the majority release taking over, a leader that
	 * just stepped down) no member reports leading, and the node may
	 * win: wait for a leader before deciding whether to hand over. */
	if (!wait_leader(r))
		return roll_fail(r, s->id,
				 "no member reports leading within %d s: "
				 "not restarting node %" PRIu64
				 " into a cluster without a leader",
				 r->step_timeout_s, s->id);
	m = roll_find(&r->view, s->id);
	if (m == NULL)
		return roll_fail(r, s->id,
				 "node %" PRIu64 " is no longer a member",
				 s->id);
	if (r->view.leader == m) {
		int rv = hand_over(r, s->id);
		if (rv != 0)
			return rv;
	} else if (s->led) {
		const struct roll_member *l = r->view.leader;
		struct roll_field f[] = {ROLL_F_NUM("from", s->id),
					 ROLL_F_NUM("to", l->id)};
		roll_emit(&r->out, "transfer", f, 2,
			  "node %" PRIu64 " no longer leads (node %" PRIu64
			  " does): no hand-over needed",
			  s->id, l->id);
	}
	char cmd[COMMAND_MAX], prefix[48], why[ROLL_REASON_MAX];
	if (!expand(r, s->id, cmd, sizeof cmd))
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
	m = roll_find(&r->view, s->id);
	assert(m != NULL && r->view.leader != NULL);
	struct roll_field d[] = {ROLL_F_NUM("node", s->id),
				 ROLL_F_STR("release", r->to_text),
				 ROLL_F_NUM("leader", r->view.leader->id)};
	roll_emit(&r->out, "node_done", d, 3,
		  "node %" PRIu64 " runs %s, caught up (commit %" PRIu64
		  "); node %" PRIu64 " leads",
		  s->id, r->to_text, m->commit, r->view.leader->id);
	return 0;
}

/* ---- the command --------------------------------------------------------- */

int ctl_cmd_roll(const struct ctl_opts *o, const struct ctl_args *a)
{
	static struct roll r;
	memset(&r, 0, sizeof r);
	r.o = o;
	r.step_timeout_s = DEFAULT_STEP_TIMEOUT_S;
	r.max_lag = DEFAULT_MAX_LAG;
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
			if (expand(&r, r.plan[i].id, cmd, sizeof cmd))
				roll_say(&r.out, "  would run: %s", cmd);
		}
		roll_emit(&r.out, "done", NULL, 0,
			  "dry run: nothing was changed");
		return CTL_EXIT_OK;
	}
	if (r.n_plan == 0)
		roll_say(&r.out, "every member already runs %s", r.to_text);
	for (size_t k = 0; k < r.n_plan; k++) {
		rv = roll_node(&r, k);
		if (rv != 0)
			return rv;
		if (r.pause_ms > 0 && k + 1 < r.n_plan) {
			roll_say(&r.out, "pausing %.1f s", r.pause_ms / 1000.0);
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
