/*
 * batonctl upgrade --to RELEASE (docs/upgrading.md, "batonctl upgrade"):
 * read the members' releases, plan the path to RELEASE (upgrade_plan),
 * print it, and run it: each roll with batonctl roll's own entry point
 * (its pre-checks, hand-over and waits are roll's), the relay migration
 * with upgrade_migrate.c. Nothing is remembered between runs: the plan is
 * made from what the members report, so the same command run again after
 * an interruption goes on from where the cluster is.
 */
#define _POSIX_C_SOURCE 200809L

#include "upgrade_path.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roll.h"

#define DEFAULT_STEP_TIMEOUT_S 60
#define STEP_TIMEOUT_S_MAX 86400

/* ---- the plan ------------------------------------------------------------ */

static bool speaks(const struct baton_profile *a, const struct baton_profile *b)
{
	return a->proto_min.value <= b->proto_max.value &&
	       a->proto_max.value >= b->proto_min.value;
}

/* The newest release in [lo, target] that speaks with every member: the
 * furthest one roll accepts. NULL if there is none. */
static const struct baton_profile *
furthest_roll(const struct baton_profile *const *from, size_t n,
	      struct baton_release lo, const struct baton_profile *target)
{
	uint32_t n_rel;
	const struct baton_profile *t = baton_releases(&n_rel);
	for (uint32_t i = n_rel; i-- > 0;) {
		const struct baton_profile *p = &t[i];
		if (baton_release_compare(p->release, target->release) > 0 ||
		    baton_release_compare(p->release, lo) < 0)
			continue;
		bool all = true;
		for (size_t k = 0; k < n && all; k++)
			all = speaks(p, from[k]);
		if (all)
			return p;
	}
	return NULL;
}

int upgrade_plan(const struct baton_profile *const *from, size_t n_from,
		 const struct baton_profile *target, struct upgrade_step *steps,
		 size_t *n_steps, char *why, size_t why_len)
{
	*n_steps = 0;
	if (n_from == 0) {
		snprintf(why, why_len, "no member's release is known");
		return -1;
	}
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	/* The members, as the plan moves them. */
	const struct baton_profile *now[CTL_MEMBERS_MAX];
	size_t n = n_from < CTL_MEMBERS_MAX ? n_from : CTL_MEMBERS_MAX;
	struct baton_release newest = from[0]->release;
	for (size_t k = 0; k < n; k++) {
		now[k] = from[k];
		if (baton_release_compare(from[k]->release, newest) > 0)
			newest = from[k]->release;
	}
	if (baton_release_compare(newest, target->release) > 0) {
		snprintf(why, why_len,
			 "a member runs %s, above %s: that is a downgrade "
			 "(docs/upgrading.md, 'Downgrade')",
			 baton_release_format(newest, a),
			 baton_release_format(target->release, b));
		return -1;
	}
	for (;;) {
		bool mixed = false, at_target = true;
		for (size_t k = 0; k < n; k++) {
			mixed |= now[k] != now[0];
			at_target &= now[k] == target;
		}
		if (at_target)
			return 0;
		if (*n_steps == UPGRADE_STEPS_MAX) {
			snprintf(why, why_len,
				 "the path is longer than %u steps",
				 UPGRADE_STEPS_MAX);
			return -1;
		}
		const struct baton_profile *p =
			furthest_roll(now, n, newest, target);
		/* A roll moves the cluster on if it goes above the newest
		 * member, or finishes an interrupted roll. */
		if (p != NULL &&
		    (baton_release_compare(p->release, newest) > 0 || mixed)) {
			steps[(*n_steps)++] =
				(struct upgrade_step){UPGRADE_ROLL, p};
			for (size_t k = 0; k < n; k++)
				now[k] = p;
			newest = p->release;
			continue;
		}
		if (mixed) {
			snprintf(why, why_len,
				 "the members run releases no single release "
				 "speaks with: finish or undo the roll by "
				 "hand (batonctl status)");
			return -1;
		}
		if (baton_release_compare(now[0]->release,
					  baton_release_migration_since()) <
		    0) {
			snprintf(why, why_len,
				 "no release above %s speaks with it and it "
				 "has no relay client (the first release with "
				 "one is %s)",
				 baton_release_format(now[0]->release, a),
				 baton_release_format(
					 baton_release_migration_since(), b));
			return -1;
		}
		steps[(*n_steps)++] =
			(struct upgrade_step){UPGRADE_MIGRATE, target};
		return 0;
	}
}

/* ---- options ---------------------------------------------------------- */

const struct ctl_option ctl_upgrade_options[] = {
	{"to", "RELEASE"},
	{"restart", "COMMAND"},
	{"dry-run", NULL},
	{"step-timeout-s", "N"},
	{"new", "ID=HOST:PORT,..."},
	{"start-new", "COMMAND"},
	{"stop-old", "COMMAND"},
	/* Passed on to every roll step as given (ROLL_PASSED below). */
	{"soak", "SECONDS"},
	{"gate-p99-ratio", "N"},
	{"gate-p99-min-ms", "MS"},
	{"gate-errors-pct", "N"},
	{"gate-apply-lag", "ENTRIES"},
	{"wait-s", "SECONDS"},
	{"max-lag", "ENTRIES"},
	{NULL, NULL},
};

_Static_assert(sizeof ctl_upgrade_options / sizeof ctl_upgrade_options[0] <=
		       CTL_OPTIONS_MAX + 1u,
	       "batonctl upgrade's options fit a ctl_args");

/* The options a roll step takes from the upgrade's command line, checked
 * here with roll's own bounds so that a bad value is refused before the
 * first step rather than at a later one. */
static const struct passed {
	const char *name;
	uint64_t min, max;
	const char *unit;
} ROLL_PASSED[] = {
	{"soak", 0, ROLL_SOAK_S_MAX, "seconds"},
	{"gate-p99-ratio", 1, ROLL_GATE_RATIO_MAX, NULL},
	{"gate-p99-min-ms", 0, ROLL_GATE_MS_MAX, "ms"},
	{"gate-errors-pct", 0, 100, "points"},
	{"gate-apply-lag", 0, UINT64_MAX / 2, "entries"},
	{"wait-s", 1, STEP_TIMEOUT_S_MAX, "seconds"},
	{"max-lag", 0, UINT64_MAX, "entries"},
};
#define N_PASSED (sizeof ROLL_PASSED / sizeof ROLL_PASSED[0])

static int need_id(const struct ctl_args *a, const char *name)
{
	const char *v = ctl_args_value(a, name);
	if (v != NULL && strstr(v, "{id}") == NULL)
		return ctl_args_bad_value(a, name,
					  "a command that names the node "
					  "with {id}");
	return CTL_EXIT_OK;
}

static int parse_args(const struct ctl_args *a, struct upgrade_migration *m,
		      const char **restart)
{
	m->to_text = ctl_args_value(a, "to");
	*restart = ctl_args_value(a, "restart");
	m->start_new = ctl_args_value(a, "start-new");
	m->stop_old = ctl_args_value(a, "stop-old");
	uint64_t timeout_s = DEFAULT_STEP_TIMEOUT_S;
	int rc = ctl_args_u64(a, "step-timeout-s", 1, STEP_TIMEOUT_S_MAX,
			      "seconds", &timeout_s);
	if (rc != CTL_EXIT_OK)
		return rc;
	m->step_timeout_s = (int)timeout_s;
	if (m->to_text == NULL)
		return ctl_usage_error(
			"upgrade: give --to RELEASE, or status or finalize");
	struct baton_release to;
	if (!roll_release(m->to_text, &to))
		return ctl_args_bad_value(a, "to",
					  "a release (major.minor.patch)");
	if ((rc = need_id(a, "restart")) != CTL_EXIT_OK ||
	    (rc = need_id(a, "start-new")) != CTL_EXIT_OK ||
	    (rc = need_id(a, "stop-old")) != CTL_EXIT_OK)
		return rc;
	uint64_t soak_s = 0;
	for (size_t i = 0; i < N_PASSED; i++) {
		const struct passed *p = &ROLL_PASSED[i];
		uint64_t v = 0;
		if ((rc = ctl_args_u64(a, p->name, p->min, p->max, p->unit,
				       &v)) != CTL_EXIT_OK)
			return rc;
		if (strcmp(p->name, "soak") == 0)
			soak_s = v;
	}
	/* As roll's: the gate puts a node back on its previous release with
	 * the restart command. */
	if (soak_s > 0 && *restart != NULL &&
	    strstr(*restart, "{release}") == NULL)
		return ctl_usage_error("upgrade: with --soak, --restart must "
				       "name the release with {release} too "
				       "(the health gate restarts a node on "
				       "its previous release with it)");
	const char *new_text = ctl_args_value(a, "new");
	char why[UPGRADE_REASON_MAX];
	if (new_text != NULL &&
	    upgrade_parse_new(new_text, m, why, sizeof why) != 0)
		return ctl_args_bad_value(a, "new", why);
	m->to = baton_release_find(to);
	return CTL_EXIT_OK;
}

/* ---- running the plan -------------------------------------------------- */

static const char *step_text(const struct upgrade_step *s, char *buf,
			     size_t len)
{
	char r[BATON_RELEASE_STR_MAX];
	baton_release_format(s->to->release, r);
	if (s->kind == UPGRADE_ROLL)
		snprintf(buf, len, "roll every member to %s (batonctl roll)",
			 r);
	else
		snprintf(buf, len,
			 "migrate through the relay to a new cluster of %s "
			 "(start the new nodes, wait for its write authority, "
			 "stop the old nodes)",
			 r);
	return buf;
}

/* batonctl roll --to REL --restart CMD --step-timeout-s N and the options
 * of ROLL_PASSED given to the upgrade, through roll's own entry point:
 * its options are filled in by name, so its table may grow. */
static int run_roll(const struct ctl_opts *o, const struct ctl_args *a,
		    const struct upgrade_step *s, const char *restart,
		    int step_timeout_s)
{
	char to[BATON_RELEASE_STR_MAX], timeout[24];
	baton_release_format(s->to->release, to);
	snprintf(timeout, sizeof timeout, "%d", step_timeout_s);
	struct ctl_args ra;
	memset(&ra, 0, sizeof ra);
	ra.cmd = "roll";
	ra.options = ctl_roll_options;
	const char *want[3 + N_PASSED][2] = {
		{"to", to}, {"restart", restart}, {"step-timeout-s", timeout}};
	size_t n_want = 3;
	for (size_t i = 0; i < N_PASSED; i++) {
		const char *v = ctl_args_value(a, ROLL_PASSED[i].name);
		if (v != NULL) {
			want[n_want][0] = ROLL_PASSED[i].name;
			want[n_want++][1] = v;
		}
	}
	for (size_t w = 0; w < n_want; w++) {
		size_t i = 0;
		while (ctl_roll_options[i].name != NULL &&
		       strcmp(ctl_roll_options[i].name, want[w][0]) != 0)
			i++;
		if (ctl_roll_options[i].name == NULL || i >= CTL_OPTIONS_MAX) {
			ctl_error("upgrade: batonctl roll has no --%s",
				  want[w][0]);
			return CTL_EXIT_ERROR;
		}
		ra.values[i] = want[w][1];
	}
	return ctl_cmd_roll(o, &ra);
}

/* The members' profiles, from what they report. Returns how many, or 0
 * after saying why not. */
static size_t read_members(const struct roll_view *v,
			   const struct baton_profile **out)
{
	size_t n = 0;
	for (size_t i = 0; i < v->n; i++) {
		const struct roll_member *m = &v->m[i];
		struct baton_release r;
		const struct baton_profile *p = NULL;
		if (!m->up) {
			ctl_error("upgrade: node %" PRIu64 " (%s) does not "
				  "answer: %s; start it (or remove it) and "
				  "rerun",
				  m->id, m->client_addr, m->err);
			return 0;
		}
		if (roll_release(m->release, &r))
			p = baton_release_find(r);
		if (p == NULL) {
			ctl_error("upgrade: node %" PRIu64
				  " runs release '%s', "
				  "which this batonctl does not know: use a "
				  "newer batonctl",
				  m->id, m->release);
			return 0;
		}
		out[n++] = p;
	}
	return n;
}

static void print_plan(const struct upgrade_step *steps, size_t n,
		       const char *from_text, const char *to_text)
{
	char line[UPGRADE_REASON_MAX];
	printf("upgrade plan from %s to %s: %zu step(s)\n", from_text, to_text,
	       n);
	for (size_t i = 0; i < n; i++)
		printf("  step %zu: %s\n", i + 1,
		       step_text(&steps[i], line, sizeof line));
	fflush(stdout);
}

/* The releases the members run now, "1.0.0 (nodes 1 2 3)". */
static void describe(const struct roll_view *v, char *out, size_t len)
{
	size_t at = 0;
	out[0] = '\0';
	for (size_t i = 0; i < v->n && at + 1 < len; i++) {
		int w = snprintf(out + at, len - at, "%s%" PRIu64 ":%s",
				 i ? " " : "nodes ", v->m[i].id,
				 v->m[i].release);
		if (w < 0)
			break;
		at += (size_t)w;
	}
}

static int resume_hint(int rc)
{
	if (rc != CTL_EXIT_OK)
		ctl_error("upgrade stopped: run the same command again to go "
			  "on from where the cluster is (the plan is made "
			  "again from what the members report)");
	return rc;
}

/* Step i of n failed with exit code rc: the step's own lines said why;
 * say where the upgrade stopped and how to go on. */
static int stopped_at(int rc, size_t i, size_t n, const struct upgrade_step *s,
		      const char *to_text)
{
	char line[UPGRADE_REASON_MAX], r[BATON_RELEASE_STR_MAX];
	step_text(s, line, sizeof line);
	baton_release_format(s->to->release, r);
	if (s->kind == UPGRADE_ROLL && roll_stopped_by_gate())
		ctl_error("upgrade to %s stopped at step %zu of %zu (%s): the "
			  "health gate found a node clearly worse at release "
			  "%s and stopped the roll (above); no later step was "
			  "started. Once %s is fixed or judged healthy, run "
			  "the same command again: the plan is made again "
			  "from what the members report and goes on from this "
			  "step (gated again under --soak)",
			  to_text, i + 1, n, line, r, r);
	else
		ctl_error("upgrade to %s stopped at step %zu of %zu (%s): run "
			  "the same command again to go on from where the "
			  "cluster is (the plan is made again from what the "
			  "members report)",
			  to_text, i + 1, n, line);
	return rc;
}

/* The migration handed off already: the old cluster is what is left to
 * stop, or nothing. */
static int finish_after_authority(struct upgrade_migration *m, bool dry_run)
{
	printf("the new cluster (%s) holds write authority: the migration "
	       "handed off\n",
	       m->to_text);
	if (dry_run) {
		printf("dry run: would stop the old nodes that still answer "
		       "and start the new ones that do not; nothing was "
		       "changed\n");
		return CTL_EXIT_OK;
	}
	return resume_hint(upgrade_migrate(m));
}

int ctl_cmd_upgrade(const struct ctl_opts *o, const struct ctl_args *a)
{
	/* `upgrade status|finalize`: the burn-in hold (upgrade_hold.c), which
	 * takes none of the path's options. */
	if (a->n_positional > 0) {
		for (size_t i = 0; a->options[i].name != NULL; i++)
			if (a->values[i] != NULL)
				return ctl_usage_error(
					"upgrade %s takes no --%s",
					a->positional[0], a->options[i].name);
		return ctl_upgrade_hold(o, a);
	}
	static struct upgrade_migration m;
	memset(&m, 0, sizeof m);
	m.o = o;
	const char *restart = NULL;
	int rc = parse_args(a, &m, &restart);
	if (rc != CTL_EXIT_OK)
		return rc;
	bool dry_run = ctl_args_flag(a, "dry-run");
	if (m.to == NULL) {
		char mine[BATON_RELEASE_STR_MAX];
		baton_release_format(baton_release_current()->release, mine);
		ctl_error("upgrade: batonctl %s does not know release %s: use "
			  "the batonctl of release %s or newer",
			  mine, m.to_text, m.to_text);
		return ROLL_EXIT_REFUSED;
	}
	/* A migration that handed off: the old cluster may be gone. */
	if (m.n_new > 0 && upgrade_new_has_authority(&m))
		return finish_after_authority(&m, dry_run);
	static struct roll_seeds seeds;
	static struct roll_view view;
	roll_seeds_init(&seeds, o);
	if (roll_observe(o, &seeds, &view) != 0) {
		ctl_error("upgrade: cannot read the members: %s; give -h/-p of "
			  "a member that answers",
			  view.err);
		return CTL_EXIT_ERROR;
	}
	const struct baton_profile *from[CTL_MEMBERS_MAX];
	size_t n_from = read_members(&view, from);
	if (n_from == 0)
		return ROLL_EXIT_REFUSED;
	struct upgrade_step steps[UPGRADE_STEPS_MAX];
	size_t n_steps = 0;
	char why[UPGRADE_REASON_MAX], now[UPGRADE_REASON_MAX];
	describe(&view, now, sizeof now);
	if (upgrade_plan(from, n_from, m.to, steps, &n_steps, why,
			 sizeof why) != 0) {
		ctl_error("upgrade to %s refused (%s): %s", m.to_text, now,
			  why);
		return ROLL_EXIT_REFUSED;
	}
	print_plan(steps, n_steps, now, m.to_text);
	bool rolls = n_steps > 0 && steps[0].kind == UPGRADE_ROLL;
	if (rolls && restart == NULL) {
		ctl_error("upgrade: the plan rolls the cluster: give --restart "
			  "'COMMAND {id} {release}' (as batonctl roll's); "
			  "nothing was changed");
		return CTL_EXIT_USAGE;
	}
	bool migrates =
		n_steps > 0 && steps[n_steps - 1].kind == UPGRADE_MIGRATE;
	if (migrates &&
	    (m.n_new == 0 || m.start_new == NULL || m.stop_old == NULL)) {
		ctl_error("upgrade: the plan ends with a relay migration: give "
			  "--new ID=HOST:PORT,... (the new cluster's nodes, "
			  "the first founds it), --start-new 'COMMAND {id}' "
			  "and --stop-old 'COMMAND {id}' (docs/upgrading.md, "
			  "'batonctl upgrade'); nothing was changed");
		return CTL_EXIT_USAGE;
	}
	if (dry_run) {
		printf("dry run: nothing was changed\n");
		return CTL_EXIT_OK;
	}
	if (n_steps == 0) {
		printf("every member already runs %s\n", m.to_text);
		return CTL_EXIT_OK;
	}
	char line[UPGRADE_REASON_MAX];
	for (size_t i = 0; i < n_steps; i++) {
		printf("upgrade step %zu of %zu: %s\n", i + 1, n_steps,
		       step_text(&steps[i], line, sizeof line));
		fflush(stdout);
		if (steps[i].kind == UPGRADE_ROLL)
			rc = run_roll(o, a, &steps[i], restart,
				      m.step_timeout_s);
		else
			rc = upgrade_migrate(&m);
		fflush(stdout);
		if (rc != CTL_EXIT_OK)
			return stopped_at(rc, i, n_steps, &steps[i], m.to_text);
	}
	printf("upgrade done: the cluster runs %s\n", m.to_text);
	return CTL_EXIT_OK;
}
