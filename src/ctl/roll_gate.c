/*
 * batonctl roll --soak SECONDS (roll.h; docs/upgrading.md, "batonctl roll",
 * "Health gates"): before the first restart, every member is watched for
 * the soak period; after each restart, the restarted node is watched as
 * long, and compared with what the members did before the roll:
 *
 *   - the 99th percentile of its key-value commands' latency (INFO
 *     kv_latency_usec, cumulative counts per bound, read at both ends of
 *     the window);
 *   - the share of those commands answered with an error (INFO
 *     kv_error_replies, kv_commands_processed);
 *   - its apply lag: the leader's commit minus the node's applied index,
 *     sampled (BATON.NODE; the node's own commit index is no help: a
 *     node busy applying answers only between two applies);
 *   - how often it answered at all.
 *
 * When the new release is clearly worse the roll stops and puts the node
 * back on the release it ran before, with the restart command and
 * {release}, as long as the release floor still allows that release;
 * otherwise it says the downgrade that would.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roll.h"

/* The histogram's bounds INFO gives (src/util/histogram.h has 16). */
#define GATE_BOUNDS_MAX 24u
/* Fewer commands than this in a window: no percentile is computed, and
 * the latency gate is not applied (said so). */
#define GATE_COMMANDS_MIN 20u
/* Fewer error replies than this never fail the gate. */
#define GATE_ERRORS_MIN 5u
/* The apply lag is sampled this often during a window. */
#define GATE_SAMPLE_MS 250
/* Apply-lag samples kept per window (later ones are dropped). */
#define GATE_LAG_SAMPLES_MAX 4096u

/* One member's INFO figures at one moment. */
struct figures {
	bool ok;
	uint64_t commands, errors;
	size_t n;
	uint64_t bound_usec[GATE_BOUNDS_MAX];
	uint64_t cumulative[GATE_BOUNDS_MAX];
};

/* What a window of one or more members showed. */
struct window {
	bool p99_known;
	uint64_t p99_usec;
	uint64_t commands, errors;
	uint64_t lag_max;
	uint64_t lags[GATE_LAG_SAMPLES_MAX];
	size_t n_lags, n_polls, n_answered;
};

static const char *field(const char *text, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = text; p != NULL && *p;) {
		if (strncmp(p, name, n) == 0 && p[n] == ':')
			return p + n + 1;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* "le100=3,le250=7,...,inf=9" into f's bounds and cumulative counts. */
static bool parse_histogram(const char *p, struct figures *f)
{
	f->n = 0;
	while (strncmp(p, "le", 2) == 0 && f->n < GATE_BOUNDS_MAX) {
		char *end;
		f->bound_usec[f->n] = strtoull(p + 2, &end, 10);
		if (*end != '=')
			return false;
		f->cumulative[f->n] = strtoull(end + 1, &end, 10);
		if (*end != ',')
			return false;
		f->n++;
		p = end + 1;
	}
	return strncmp(p, "inf=", 4) == 0 && f->n > 0;
}

static void read_figures(struct roll *r, const char *addr, struct figures *f,
			 struct window *w)
{
	memset(f, 0, sizeof *f);
	char err[CTL_ERR_MAX];
	const char *argv[] = {"INFO", "stats"};
	redisReply *rep = ctl_ask(r->o, addr, 2, argv, err, sizeof err);
	if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
		const char *c = field(rep->str, "kv_commands_processed");
		const char *e = field(rep->str, "kv_error_replies");
		const char *h = field(rep->str, "kv_latency_usec");
		if (c != NULL && e != NULL && h != NULL) {
			f->commands = strtoull(c, NULL, 10);
			f->errors = strtoull(e, NULL, 10);
			f->ok = parse_histogram(h, f);
		}
	}
	freeReplyObject(rep);
	w->n_polls++;
	w->n_answered += f->ok;
}

/* Add the window between a and b (one member) to w: its commands, errors
 * and the p99 of its latency, the worst member's kept. A restart between
 * the two (counts went down) counts from zero. */
static void add_window(struct window *w, const struct figures *a,
		       const struct figures *b)
{
	if (!a->ok || !b->ok || a->n != b->n)
		return;
	bool restarted = b->commands < a->commands;
	uint64_t total = b->commands - (restarted ? 0 : a->commands);
	w->commands += total;
	w->errors += b->errors -
		     (restarted || b->errors < a->errors ? 0 : a->errors);
	if (total < GATE_COMMANDS_MIN)
		return;
	uint64_t rank = total - total / 100; /* ceil(0.99 total) */
	uint64_t p99 = b->bound_usec[b->n - 1];
	for (size_t i = 0; i < b->n; i++) {
		uint64_t in =
			b->cumulative[i] - (restarted ? 0 : a->cumulative[i]);
		if (in >= rank) {
			p99 = b->bound_usec[i];
			break;
		}
	}
	if (!w->p99_known || p99 > w->p99_usec)
		w->p99_usec = p99;
	w->p99_known = true;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Watch the members `ids` (n of them) for the soak period into w. */
static void watch(struct roll *r, const uint64_t *ids, size_t n,
		  struct window *w)
{
	static struct figures start[CTL_MEMBERS_MAX], end[CTL_MEMBERS_MAX];
	char addr[CTL_MEMBERS_MAX][CTL_ADDR_MAX];
	memset(w, 0, sizeof *w);
	roll_refresh(r);
	for (size_t i = 0; i < n; i++) {
		const struct roll_member *m = roll_find(&r->view, ids[i]);
		snprintf(addr[i], sizeof addr[i], "%s",
			 m != NULL ? m->client_addr : "");
		read_figures(r, addr[i], &start[i], w);
	}
	uint64_t until = roll_now_ns() + (uint64_t)r->soak_ms * 1000000u;
	while (roll_now_ns() < until) {
		roll_sleep_ms(GATE_SAMPLE_MS);
		roll_refresh(r);
		const struct roll_member *l = r->view.leader;
		for (size_t i = 0; i < n; i++) {
			const struct roll_member *m =
				roll_find(&r->view, ids[i]);
			w->n_polls++;
			if (m == NULL || !m->up)
				continue;
			w->n_answered++;
			if (w->n_lags == GATE_LAG_SAMPLES_MAX)
				continue;
			uint64_t commit = l != NULL ? l->commit : m->commit;
			uint64_t lag =
				commit > m->applied ? commit - m->applied : 0;
			w->lags[w->n_lags++] = lag;
			if (lag > w->lag_max)
				w->lag_max = lag;
		}
	}
	for (size_t i = 0; i < n; i++) {
		read_figures(r, addr[i], &end[i], w);
		add_window(w, &start[i], &end[i]);
	}
}

static double share_pct(uint64_t part, uint64_t whole)
{
	return whole == 0 ? 0.0 : 100.0 * (double)part / (double)whole;
}

void roll_gate_baseline(struct roll *r)
{
	uint64_t ids[CTL_MEMBERS_MAX];
	size_t n = 0;
	roll_refresh(r);
	for (size_t i = 0; i < r->view.n; i++)
		ids[n++] = r->view.m[i].id;
	static struct window w;
	roll_emit(&r->out, "baseline", NULL, 0,
		  "measuring every member for %.1f s before the roll (--soak)",
		  r->soak_ms / 1000.0);
	watch(r, ids, n, &w);
	r->base = (struct roll_gate_base){
		.p99_known = w.p99_known,
		.p99_usec = w.p99_usec,
		.commands = w.commands,
		.errors = w.errors,
		.apply_lag_max = w.lag_max,
		.members = n,
	};
	char p99[64];
	if (w.p99_known)
		snprintf(p99, sizeof p99, "%.1f ms", (double)w.p99_usec / 1e3);
	else
		snprintf(p99, sizeof p99,
			 "unknown (fewer than %u commands: the latency gate is "
			 "off)",
			 GATE_COMMANDS_MIN);
	struct roll_field f[] = {w.p99_known
					 ? ROLL_F_NUM("p99_usec", w.p99_usec)
					 : ROLL_F_RAW("p99_usec", "null"),
				 ROLL_F_NUM("commands", w.commands),
				 ROLL_F_NUM("errors", w.errors),
				 ROLL_F_NUM("apply_lag_max", w.lag_max)};
	roll_emit(&r->out, "baseline", f, 4,
		  "before the roll: p99 %s (the worst member), %" PRIu64
		  " error replies in %" PRIu64
		  " key-value commands (%.2f%%), apply lag at most %" PRIu64,
		  p99, w.errors, w.commands, share_pct(w.errors, w.commands),
		  w.lag_max);
}

/* Whether w is clearly worse than the baseline; `why` says how. */
static bool worse(const struct roll *r, const struct window *w, char *why,
		  size_t len)
{
	const struct roll_gate_base *b = &r->base;
	why[0] = '\0';
	if (w->n_answered * 2 < w->n_polls) {
		snprintf(why, len,
			 "it answered %zu of %zu polls during the soak",
			 w->n_answered, w->n_polls);
		return true;
	}
	/* Under load before the roll, a node that then serves too few
	 * commands to measure is not proven healthy: a node blocked on its
	 * work (it answers polls late, its clients wait) looks just so. */
	uint64_t per_member = b->members ? b->commands / b->members : 0;
	if (!w->p99_known && per_member >= 2u * GATE_COMMANDS_MIN) {
		snprintf(why, len,
			 "it served %" PRIu64 " key-value commands during the "
			 "soak, too few to measure (%u), where the members "
			 "served %" PRIu64 " each in as long before the roll",
			 w->commands, GATE_COMMANDS_MIN, per_member);
		return true;
	}
	static uint64_t sorted[GATE_LAG_SAMPLES_MAX];
	memcpy(sorted, w->lags, w->n_lags * sizeof sorted[0]);
	qsort(sorted, w->n_lags, sizeof sorted[0], by_value);
	uint64_t median = w->n_lags ? sorted[w->n_lags / 2] : 0;
	if (median > b->apply_lag_max + r->gate_apply_lag) {
		snprintf(why, len,
			 "its apply lag (the leader's commit minus its "
			 "applied index) was %" PRIu64
			 " entries at the median of the soak's samples, above "
			 "%" PRIu64 " before the roll + %" PRIu64
			 " (--gate-apply-lag)",
			 median, b->apply_lag_max, r->gate_apply_lag);
		return true;
	}
	if (w->p99_known && b->p99_known) {
		uint64_t by_ratio = b->p99_usec * r->gate_p99_ratio;
		uint64_t by_min = b->p99_usec + r->gate_p99_min_ms * 1000u;
		uint64_t bound = by_ratio > by_min ? by_ratio : by_min;
		if (w->p99_usec > bound) {
			snprintf(why, len,
				 "its p99 latency was %.1f ms, above %.1f ms "
				 "(%.1f ms before the roll, times %" PRIu64
				 " (--gate-p99-ratio) and at least +%" PRIu64
				 " ms (--gate-p99-min-ms))",
				 (double)w->p99_usec / 1e3, (double)bound / 1e3,
				 (double)b->p99_usec / 1e3, r->gate_p99_ratio,
				 r->gate_p99_min_ms);
			return true;
		}
	}
	double before = share_pct(b->errors, b->commands);
	double now = share_pct(w->errors, w->commands);
	if (w->errors >= GATE_ERRORS_MIN &&
	    now > before + (double)r->gate_errors_pct) {
		snprintf(why, len,
			 "%.2f%% of its key-value commands were answered with "
			 "an error (%" PRIu64 " of %" PRIu64
			 "), against %.2f%% before the roll + %" PRIu64
			 " points (--gate-errors-pct)",
			 now, w->errors, w->commands, before,
			 r->gate_errors_pct);
		return true;
	}
	return false;
}

/* Wait until node `id` answers at `release`, follows the leader and is
 * caught up; false with `why` at the step timeout. */
static bool wait_back(struct roll *r, uint64_t id, const char *release,
		      char *why, size_t len)
{
	uint64_t end =
		roll_now_ns() + (uint64_t)r->step_timeout_s * 1000000000u;
	for (;;) {
		roll_refresh(r);
		const struct roll_member *m = roll_find(&r->view, id);
		if (m == NULL)
			snprintf(why, len, "node %" PRIu64 " is not a member",
				 id);
		else if (r->view.leader == NULL)
			snprintf(why, len, "no member reports leading");
		else if (m->up && strcmp(m->release, release) != 0)
			snprintf(why, len, "node %" PRIu64 " reports %s", id,
				 m->release);
		else if (roll_member_ok(r, &r->view, m, why, len))
			return true;
		if (roll_now_ns() >= end)
			return false;
		roll_sleep_ms(ROLL_POLL_MS);
	}
}

/* Put plan step k's node back on the release it ran before. */
static int restore(struct roll *r, size_t k, const char *verdict)
{
	struct roll_step *s = &r->plan[k];
	struct baton_release from, floor;
	roll_refresh(r);
	const struct roll_member *l = r->view.leader;
	if (strcmp(s->from, r->to_text) == 0 || !roll_release(s->from, &from))
		return roll_fail(r, s->id,
				 "the health gate failed for node %" PRIu64
				 ": %s; it ran %s before this roll, so there "
				 "is no older release to put it back on",
				 s->id, verdict, s->from);
	if (l == NULL || !roll_release(l->release_floor, &floor)) {
		return roll_fail(r, s->id,
				 "the health gate failed for node %" PRIu64
				 ": %s; no member leads now, so the release "
				 "floor is not known: not restarting it on %s; "
				 "check 'batonctl status' (the release floor) "
				 "before putting it back",
				 s->id, verdict, s->from);
	}
	if (baton_release_compare(floor, from) > 0) {
		char cmd[4096];
		if (!roll_expand(r, s->id, s->from, cmd, sizeof cmd))
			cmd[0] = '\0';
		return roll_fail(
			r, s->id,
			"the health gate failed for node %" PRIu64
			": %s; the release floor is %s now (a majority of the "
			"voters ran %s), so release %s would stop at it: not "
			"restarting "
			"it; to put it back, 'batonctl downgrade validate %s' "
			"and 'batonctl downgrade enable %s', then %s",
			s->id, verdict, l->release_floor, r->to_text, s->from,
			s->from, s->from, cmd);
	}
	char cmd[4096], prefix[48], why[ROLL_REASON_MAX];
	if (!roll_expand(r, s->id, s->from, cmd, sizeof cmd))
		return roll_fail(r, s->id, "the restart command is too long");
	snprintf(prefix, sizeof prefix, "  node %" PRIu64 " | ", s->id);
	struct roll_field f[] = {ROLL_F_NUM("node", s->id),
				 ROLL_F_STR("release", s->from),
				 ROLL_F_STR("command", cmd)};
	roll_emit(&r->out, "restore", f, 3,
		  "putting node %" PRIu64 " back on release %s (the release "
		  "floor %s allows it): %s",
		  s->id, s->from, l->release_floor, cmd);
	int code = roll_run_command(&r->out, cmd, prefix,
				    r->step_timeout_s * 1000, why, sizeof why);
	if (code != 0)
		return roll_fail(r, s->id,
				 "the health gate failed for node %" PRIu64
				 ": %s; putting it back on %s failed too: the "
				 "restart command '%s': %s",
				 s->id, verdict, s->from, cmd, why);
	if (!wait_back(r, s->id, s->from, why, sizeof why))
		return roll_fail(r, s->id,
				 "the health gate failed for node %" PRIu64
				 ": %s; it was restarted on %s but is not back "
				 "within %d s: %s",
				 s->id, verdict, s->from, r->step_timeout_s,
				 why);
	roll_emit(&r->out, "restored", f, 2,
		  "node %" PRIu64 " runs %s again, caught up", s->id, s->from);
	/* Not this run's to roll back any more. */
	r->n_started = k;
	s->done = false;
	return roll_fail(r, s->id,
			 "the health gate failed for node %" PRIu64
			 " at release %s: %s; it runs %s again",
			 s->id, r->to_text, verdict, s->from);
}

int roll_gate(struct roll *r, size_t k)
{
	struct roll_step *s = &r->plan[k];
	static struct window w;
	struct roll_field f0[] = {ROLL_F_NUM("node", s->id)};
	roll_emit(&r->out, "soak", f0, 1,
		  "watching node %" PRIu64 " for %.1f s (--soak)", s->id,
		  r->soak_ms / 1000.0);
	watch(r, &s->id, 1, &w);
	char why[ROLL_REASON_MAX], p99[48];
	bool bad = worse(r, &w, why, sizeof why);
	if (w.p99_known)
		snprintf(p99, sizeof p99, "%.1f ms", (double)w.p99_usec / 1e3);
	else
		snprintf(p99, sizeof p99, "unknown");
	struct roll_field f[] = {ROLL_F_NUM("node", s->id),
				 ROLL_F_RAW("ok", bad ? "false" : "true"),
				 w.p99_known
					 ? ROLL_F_NUM("p99_usec", w.p99_usec)
					 : ROLL_F_RAW("p99_usec", "null"),
				 ROLL_F_NUM("commands", w.commands),
				 ROLL_F_NUM("errors", w.errors),
				 ROLL_F_NUM("apply_lag_max", w.lag_max),
				 ROLL_F_STR("reason", why)};
	roll_emit(&r->out, "gate", f, 7,
		  "node %" PRIu64 " at %s: p99 %s, %" PRIu64
		  " error replies in %" PRIu64
		  " key-value commands, apply lag at most %" PRIu64 ": %s%s",
		  s->id, r->to_text, p99, w.errors, w.commands, w.lag_max,
		  bad ? "clearly worse than before the roll: " : "passes", why);
	if (!bad)
		return 0;
	r->gate_failed = true;
	return restore(r, k, why);
}
