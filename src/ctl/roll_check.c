/*
 * batonctl roll (roll.h): the pre-checks before anything changes, what is
 * said when the roll stops (the cluster's state, how to resume or roll
 * back), and the wait for the machine version at the end.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "roll.h"

/* ---- looking at the cluster ------------------------------------------- */

bool roll_at_target(const struct roll *r, const struct roll_member *m)
{
	struct baton_release rel;
	return m->up && roll_release(m->release, &rel) &&
	       baton_release_compare(rel, r->target->release) == 0;
}

void roll_refresh(struct roll *r)
{
	if (roll_observe(r->o, &r->seeds, &r->view) != 0)
		r->view.n = 0;
}

/* A JSON array of the members: id, release, role. Strings from servers
 * are reduced to safe characters. */
static void members_json(const struct roll_view *v, char *out, size_t len)
{
	size_t at = (size_t)snprintf(out, len, "[");
	for (size_t i = 0; i < v->n && at < len; i++) {
		const struct roll_member *m = &v->m[i];
		char rel[CTL_VALUE_MAX], role[CTL_VALUE_MAX];
		snprintf(rel, sizeof rel, "%s", m->up ? m->release : "");
		snprintf(role, sizeof role, "%s", m->up ? m->role : "down");
		for (char *p = rel; *p; p++)
			if (!strchr("0123456789.", *p))
				*p = '?';
		for (char *p = role; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || *p == '-'))
				*p = '?';
		at += (size_t)snprintf(out + at, len - at,
				       "%s{\"id\": %" PRIu64
				       ", \"release\": %s%s%s, \"role\": "
				       "\"%s\"}",
				       i ? ", " : "", m->id, rel[0] ? "\"" : "",
				       rel[0] ? rel : "null",
				       rel[0] ? "\"" : "", role);
	}
	if (at < len)
		snprintf(out + at, len - at, "]");
}

/* ---- pre-checks ------------------------------------------------------- */

static void refuse(struct roll *r, size_t *refused, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct roll *r, size_t *refused, const char *fmt, ...)
{
	char msg[ROLL_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct roll_field f[] = {ROLL_F_RAW("ok", "false")};
	roll_emit(&r->out, "precheck", f, 1, "pre-check refused: %s", msg);
	++*refused;
}

/* A release between the member's and the target that speaks with both:
 * the step to roll to first. NULL if there is none. */
static const struct baton_profile *
stepping_stone(const struct baton_profile *target, uint64_t lo, uint64_t hi,
	       struct baton_release from)
{
	uint32_t n;
	const struct baton_profile *t = baton_releases(&n);
	for (uint32_t i = 0; i < n; i++) {
		const struct baton_profile *p = &t[i];
		if (baton_release_compare(p->release, from) <= 0 ||
		    baton_release_compare(p->release, target->release) >= 0)
			continue;
		if (p->proto_min.value <= hi && p->proto_max.value >= lo &&
		    p->proto_min.value <= target->proto_max.value &&
		    p->proto_max.value >= target->proto_min.value)
			return p;
	}
	return NULL;
}

static void check_member(struct roll *r, const struct roll_member *m,
			 size_t *refused)
{
	const struct baton_profile *t = r->target;
	if (!m->up) {
		refuse(r, refused,
		       "node %" PRIu64 " (%s) does not answer: %s; start it "
		       "(or, if it is gone for good, remove it with 'batonctl "
		       "remove %" PRIu64 "') and rerun",
		       m->id, m->client_addr, m->err, m->id);
		return;
	}
	uint64_t lag = roll_lag(&r->view, m);
	if (m != r->view.leader && r->view.leader != NULL && lag > r->max_lag)
		refuse(r, refused,
		       "node %" PRIu64 " is not caught up: the leader's match "
		       "for it is %s%" PRIu64 " behind its commit %" PRIu64
		       " (--max-lag %" PRIu64 "); wait until it caught up "
		       "(batonctl status) and rerun",
		       m->id, lag == UINT64_MAX ? "unknown, " : "",
		       lag == UINT64_MAX ? 0 : lag, r->view.leader->commit,
		       r->max_lag);
	struct baton_release rel;
	bool known = roll_release(m->release, &rel);
	if (m->stalled_index != 0 &&
	    (!known || baton_release_compare(rel, t->release) >= 0))
		refuse(r, refused,
		       "node %" PRIu64 " (release %s) stopped applying at "
		       "index %" PRIu64 ": %s; restarting it at %s would not "
		       "help: see docs/upgrading.md, 'If something goes wrong'",
		       m->id, m->release, m->stalled_index,
		       m->stalled[0] ? m->stalled : "no reason given",
		       r->to_text);
	if (m->proto_max == 0) {
		refuse(r, refused,
		       "node %" PRIu64 " does not report its peer protocol "
		       "range (release '%s'): roll it by hand",
		       m->id, m->release);
		return;
	}
	if (m->proto_min > t->proto_max.value ||
	    m->proto_max < t->proto_min.value) {
		const struct baton_profile *via =
			known ? stepping_stone(t, m->proto_min, m->proto_max,
					       rel)
			      : NULL;
		char first[96] = "";
		char via_text[BATON_RELEASE_STR_MAX];
		if (via != NULL)
			snprintf(first, sizeof first,
				 "roll to %s first (it speaks both), or ",
				 baton_release_format(via->release, via_text));
		refuse(r, refused,
		       "release %s speaks peer protocol %u..%u, node %" PRIu64
		       " runs release %s and speaks %" PRIu64 "..%" PRIu64
		       ": they cannot talk; %supgrade through the relay "
		       "(docs/relay.md)",
		       r->to_text, t->proto_min.value, t->proto_max.value,
		       m->id, m->release, m->proto_min, m->proto_max, first);
	}
}

/* Every refusal is said; returns how many there were. */
size_t roll_precheck(struct roll *r)
{
	size_t refused = 0;
	struct roll_view *v = &r->view;
	if (roll_observe(r->o, &r->seeds, v) != 0) {
		refuse(r, &refused,
		       "cannot read the members: %s; give batonctl -h/-p of a "
		       "member that answers",
		       v->err);
		return refused;
	}
	const struct roll_member *l = v->leader;
	if (l == NULL)
		refuse(r, &refused,
		       "no member reports leading: wait for an election "
		       "(batonctl status) and rerun");
	size_t voters = 0;
	for (size_t i = 0; i < v->n; i++) {
		check_member(r, &v->m[i], &refused);
		voters += v->m[i].voter;
	}
	/* Restarting one of 1 or 2 voters leaves no majority: the roll
	 * would cost the cluster its leader, which it never does. */
	if (voters < 3)
		refuse(r, &refused,
		       "the cluster has %zu voter(s): restarting any of them "
		       "leaves no majority (no leader until it is back); add "
		       "voters first (docs/operations.md, 'Growing and "
		       "shrinking') or restart the node(s) by hand",
		       voters);
	if (l == NULL)
		return refused;
	if (l->downgrade[0] != '\0' && strcmp(l->downgrade, "none") != 0)
		refuse(r, &refused,
		       "a downgrade is in progress (%s): finish or cancel it "
		       "first (batonctl downgrade status)",
		       l->downgrade);
	struct baton_release floor;
	if (roll_release(l->release_floor, &floor) &&
	    baton_release_compare(r->target->release, floor) < 0)
		refuse(r, &refused,
		       "release %s is below the release floor %s (a majority "
		       "of the voters ran %s): that is a downgrade; use "
		       "'batonctl downgrade validate %s' and then 'enable' "
		       "(docs/upgrading.md, 'Explicit downgrade')",
		       r->to_text, l->release_floor, l->release_floor,
		       r->to_text);
	else if (l->machine_version > r->target->machine_max.value)
		refuse(r, &refused,
		       "release %s implements machine versions up to %u, but "
		       "the effective machine version is %" PRIu64
		       ": that is a downgrade; use 'batonctl downgrade' "
		       "(docs/upgrading.md, 'Explicit downgrade')",
		       r->to_text, r->target->machine_max.value,
		       l->machine_version);
	return refused;
}

/* ---- failure ---------------------------------------------------------- */

/* The releases the nodes of this run had before it ("1.1.0"), for the
 * rollback advice; "" when none of them was restarted yet. */
static void rolled_nodes(const struct roll *r, char *ids, size_t ids_len,
			 char *from, size_t from_len)
{
	ids[0] = from[0] = '\0';
	size_t at = 0;
	for (size_t i = 0; i < r->n_started && i < r->n_plan; i++) {
		at += (size_t)snprintf(ids + at, ids_len - at, "%s%" PRIu64,
				       at ? ", " : "", r->plan[i].id);
		if (at >= ids_len)
			break;
		if (strstr(from, r->plan[i].from) == NULL)
			snprintf(from + strlen(from), from_len - strlen(from),
				 "%s%s", from[0] ? " or " : "",
				 r->plan[i].from);
	}
}

static void print_state(struct roll *r)
{
	const struct roll_view *v = &r->view;
	roll_say(&r->out, "cluster state now:");
	for (size_t i = 0; i < v->n; i++) {
		const struct roll_member *m = &v->m[i];
		if (!m->up)
			roll_say(&r->out, "  node %" PRIu64 "  down (%s)",
				 m->id, m->err);
		else
			roll_say(&r->out,
				 "  node %" PRIu64 "  release %s  %s%s%s",
				 m->id, m->release, m->role,
				 m->stalled_index ? "  stalled: " : "",
				 m->stalled_index ? m->stalled : "");
	}
	if (v->n == 0)
		roll_say(&r->out, "  no member answers (%s)", v->err);
	const struct roll_member *l = v->leader;
	if (l != NULL)
		roll_say(&r->out,
			 "  leader: node %" PRIu64
			 "; release floor %s; machine "
			 "version %" PRIu64 "; an upgrade waits for: %s",
			 l->id, l->release_floor, l->machine_version,
			 l->upgrade_waits_for[0] ? l->upgrade_waits_for
						 : "nothing");
	else
		roll_say(&r->out, "  leader: none known");
}

int roll_fail(struct roll *r, uint64_t id, const char *fmt, ...)
{
	char why[ROLL_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	roll_refresh(r);
	char resume[ROLL_REASON_MAX * 5], rollback[ROLL_REASON_MAX], ids[256],
		from[128], command[ROLL_REASON_MAX * 4];
	roll_resume_command(r, command, sizeof command);
	if (r->restart_all)
		snprintf(
			resume, sizeof resume,
			"run %s (the nodes this run restarted and saw back are "
			"skipped)",
			command);
	else
		snprintf(resume, sizeof resume,
			 "rerun the same batonctl roll command (nodes already "
			 "at %s are skipped): %s",
			 r->to_text, command);
	rolled_nodes(r, ids, sizeof ids, from, sizeof from);
	struct baton_release floor;
	const struct roll_member *l = r->view.leader;
	bool past_floor = l != NULL && roll_release(l->release_floor, &floor) &&
			  from[0] != '\0' &&
			  strstr(from, l->release_floor) == NULL;
	if (ids[0] == '\0')
		snprintf(rollback, sizeof rollback,
			 "nothing to roll back: no node was restarted");
	else if (!past_floor)
		snprintf(rollback, sizeof rollback,
			 "restart node(s) %s at the release they ran before "
			 "(%s), one at a time, on the same data: the release "
			 "floor still allows it",
			 ids, from);
	else
		snprintf(rollback, sizeof rollback,
			 "the release floor is already %s (a majority of the "
			 "voters ran it): an older binary would stop at it; go "
			 "back "
			 "with 'batonctl downgrade validate %s' and 'enable', "
			 "then restart node(s) %s at %s",
			 l->release_floor, from, ids, from);
	char nodes[CTL_MEMBERS_MAX * 80];
	members_json(&r->view, nodes, sizeof nodes);
	char floor_text[CTL_VALUE_MAX] = "";
	if (l != NULL)
		snprintf(floor_text, sizeof floor_text, "%s", l->release_floor);
	struct roll_field f[] = {
		ROLL_F_NUM("node", id),
		ROLL_F_STR("reason", why),
		ROLL_F_RAW("nodes", nodes),
		l ? ROLL_F_NUM("leader", l->id) : ROLL_F_RAW("leader", "null"),
		ROLL_F_STR("release_floor", l ? floor_text : NULL),
		l ? ROLL_F_NUM("machine_version", l->machine_version)
		  : ROLL_F_RAW("machine_version", "null"),
		ROLL_F_STR("resume", resume),
		ROLL_F_STR("resume_command", command),
		ROLL_F_STR("rollback", rollback),
	};
	roll_emit(&r->out, "failed", f, sizeof f / sizeof f[0],
		  "roll stopped at node %" PRIu64 ": %s", id, why);
	print_state(r);
	roll_say(&r->out, "to resume: %s", resume);
	roll_say(&r->out, "to roll back: %s", rollback);
	ctl_error("roll to %s failed at node %" PRIu64 ": %s", r->to_text, id,
		  why);
	return CTL_EXIT_ERROR;
}

/* ---- the end: the machine version ------------------------------------- */

int roll_wait_machine(struct roll *r)
{
	uint64_t end =
		roll_now_ns() + (uint64_t)r->step_timeout_s * 1000000000u;
	char why[ROLL_REASON_MAX] = "";
	uint64_t allowed = 0, effective = 0;
	for (;;) {
		roll_refresh(r);
		const struct roll_view *v = &r->view;
		const struct roll_member *l = v->leader;
		allowed = UINT64_MAX;
		bool ok = l != NULL;
		snprintf(why, sizeof why, "%s",
			 l ? "" : "no member reports leading");
		for (size_t i = 0; i < v->n; i++) {
			const struct roll_member *m = &v->m[i];
			if (m->up && m->machine_max < allowed)
				allowed = m->machine_max;
			if (!m->up && ok) {
				snprintf(why, sizeof why,
					 "node %" PRIu64 " does not answer: %s",
					 m->id, m->err);
				ok = false;
			}
		}
		effective = l ? l->machine_version : 0;
		if (ok && (l->upgrade_hold ||
			   strcmp(l->machine_upgrade, "manual") == 0)) {
			/* The burn-in hold: nothing rises until 'batonctl
			 * upgrade finalize' (docs/upgrading.md), whether the
			 * log holds it already or the manual leader will. */
			struct roll_field f[] = {
				ROLL_F_NUM("machine_version", effective),
				ROLL_F_STR("release_floor", l->release_floor)};
			roll_emit(&r->out, "machine_version", f, 2,
				  "held (the burn-in hold): machine "
				  "version %" PRIu64 ", release floor %s until "
				  "'batonctl upgrade finalize'",
				  effective, l->release_floor);
			return CTL_EXIT_OK;
		}
		for (size_t i = 0; ok && i < v->n; i++) {
			const struct roll_member *m = &v->m[i];
			if (m->machine_version < allowed) {
				snprintf(why, sizeof why,
					 "node %" PRIu64 " reports machine "
					 "version %" PRIu64
					 "; the leader (node %" PRIu64
					 ") says an upgrade waits for: %s",
					 m->id, m->machine_version, l->id,
					 l->upgrade_waits_for[0]
						 ? l->upgrade_waits_for
						 : "nothing");
				ok = false;
			}
		}
		if (ok) {
			struct roll_field f[] = {
				ROLL_F_NUM("machine_version", effective),
				ROLL_F_STR("release_floor", l->release_floor)};
			roll_emit(&r->out, "machine_version", f, 2,
				  "effective machine version %" PRIu64
				  " on every member (as high as release %s "
				  "allows); release floor %s",
				  effective, r->to_text, l->release_floor);
			return CTL_EXIT_OK;
		}
		if (roll_now_ns() >= end)
			break;
		roll_sleep_ms(ROLL_POLL_MS);
	}
	struct roll_field f[] = {ROLL_F_NUM("machine_version", effective),
				 ROLL_F_NUM("allowed", allowed),
				 ROLL_F_STR("blocked_by", why)};
	roll_emit(&r->out, "machine_version", f, 3,
		  "every member runs %s, but the effective machine version did "
		  "not rise to %" PRIu64 " within %d s: %s",
		  r->to_text, allowed, r->step_timeout_s, why);
	print_state(r);
	ctl_error("roll to %s: rolled, but the machine version is held back: "
		  "%s",
		  r->to_text, why);
	return ROLL_EXIT_MACHINE;
}
