/*
 * batonctl upgrade's relay migration step (docs/upgrading.md, "batonctl
 * upgrade"; the migration itself: docs/relay.md). The nodes migrate by
 * themselves once both clusters run with the relay flags; this step does
 * what the operator (or a scheduler) would: start each node of the new
 * cluster with --start-new and wait until it is ready, wait until the new
 * cluster holds write authority, then stop the old nodes with --stop-old,
 * followers first. Every wait is bounded by --step-timeout-s and says what
 * it waits for. A rerun skips the new nodes that answer and the old ones
 * that do not.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roll.h"
#include "upgrade_path.h"

#define STATUS_TEXT_MAX 4096u
/* One INFO field's value; migration_not_ready may name flags. */
#define FIELD_MAX 320u
#define POLL_MS 200

/* ---- --new --------------------------------------------------------------- */

int upgrade_parse_new(const char *text, struct upgrade_migration *m, char *why,
		      size_t why_len)
{
	m->n_new = 0;
	const char *p = text;
	while (*p != '\0') {
		size_t len = strcspn(p, ",");
		char item[CTL_ADDR_MAX + 32];
		if (len == 0 || len >= sizeof item) {
			snprintf(why, why_len,
				 "ID=HOST:PORT[,ID=HOST:PORT...]");
			return -1;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		char *eq = strchr(item, '=');
		uint64_t id;
		char host[CTL_ADDR_MAX];
		int port;
		if (eq == NULL) {
			snprintf(why, why_len,
				 "ID=HOST:PORT[,ID=HOST:PORT...]");
			return -1;
		}
		*eq = '\0';
		if (!ctl_parse_u64(item, &id) || id == 0 ||
		    ctl_split_addr(eq + 1, host, sizeof host, &port) != 0) {
			snprintf(why, why_len,
				 "ID=HOST:PORT[,ID=HOST:PORT...] with node ids "
				 "above 0");
			return -1;
		}
		for (size_t i = 0; i < m->n_new; i++)
			if (m->new_nodes[i].id == id) {
				snprintf(why, why_len,
					 "ID=HOST:PORT[,ID=HOST:PORT...], each "
					 "node once (%" PRIu64 " is twice)",
					 id);
				return -1;
			}
		if (m->n_new == CTL_MEMBERS_MAX) {
			snprintf(why, why_len,
				 "ID=HOST:PORT[,ID=HOST:PORT...], at most %u "
				 "nodes",
				 CTL_MEMBERS_MAX);
			return -1;
		}
		struct upgrade_new_node *n = &m->new_nodes[m->n_new++];
		n->id = id;
		snprintf(n->client_addr, sizeof n->client_addr, "%s", eq + 1);
		p += len;
		if (*p == ',')
			p++;
	}
	if (m->n_new == 0) {
		snprintf(why, why_len, "ID=HOST:PORT[,ID=HOST:PORT...]");
		return -1;
	}
	return 0;
}

/* ---- BATON.MIGRATION STATUS ------------------------------------------- */

/* The node's "field:value" lines; false if it does not answer. */
static bool ask_status(const struct ctl_opts *o, const char *addr, char *text,
		       size_t len, char *err, size_t err_len)
{
	const char *argv[] = {"BATON.MIGRATION", "STATUS"};
	redisReply *r = ctl_ask(o, addr, 2, argv, err, err_len);
	if (r == NULL)
		return false;
	bool ok = r->type == REDIS_REPLY_STRING;
	if (ok)
		snprintf(text, len, "%.*s", (int)r->len, r->str);
	else
		snprintf(err, err_len, "BATON.MIGRATION STATUS gave no text");
	freeReplyObject(r);
	return ok;
}

static const char *field(const char *text, const char *name, char *out,
			 size_t cap)
{
	size_t n = strlen(name);
	for (const char *p = text; (p = strstr(p, name)) != NULL; p += n) {
		if ((p == text || p[-1] == '\n') && p[n] == ':') {
			size_t len = strcspn(p + n + 1, "\r\n");
			if (len >= cap)
				len = cap - 1;
			memcpy(out, p + n + 1, len);
			out[len] = '\0';
			return out;
		}
	}
	snprintf(out, cap, "?");
	return out;
}

static bool field_is(const char *text, const char *name, const char *want)
{
	char v[FIELD_MAX];
	return strcmp(field(text, name, v, sizeof v), want) == 0;
}

bool upgrade_new_answers(const struct upgrade_migration *m)
{
	char text[STATUS_TEXT_MAX], err[CTL_ERR_MAX];
	for (size_t i = 0; i < m->n_new; i++)
		if (ask_status(m->o, m->new_nodes[i].client_addr, text,
			       sizeof text, err, sizeof err))
			return true;
	return false;
}

bool upgrade_new_has_authority(const struct upgrade_migration *m)
{
	char text[STATUS_TEXT_MAX], err[CTL_ERR_MAX];
	for (size_t i = 0; i < m->n_new; i++)
		if (ask_status(m->o, m->new_nodes[i].client_addr, text,
			       sizeof text, err, sizeof err) &&
		    field_is(text, "migration_side", "new") &&
		    field_is(text, "migration_phase", "authority"))
			return true;
	return false;
}

/* ---- the step ------------------------------------------------------------ */

/* Progress lines "[+12.3s] ...", timed from the step's start. */
static struct roll_out progress;

static bool run(const struct upgrade_migration *m, const char *templ,
		uint64_t id, const char *what)
{
	char cmd[UPGRADE_COMMAND_MAX], prefix[48], why[ROLL_REASON_MAX];
	if (!roll_command_expand(templ, id, m->to_text, cmd, sizeof cmd)) {
		ctl_error("upgrade: the %s command is longer than %u bytes",
			  what, UPGRADE_COMMAND_MAX);
		return false;
	}
	snprintf(prefix, sizeof prefix, "  node %" PRIu64 " | ", id);
	roll_emit(&progress, "migrate", NULL, 0, "%s node %" PRIu64 ": %s",
		  what, id, cmd);
	int code = roll_run_command(&progress, cmd, prefix,
				    m->step_timeout_s * 1000, why, sizeof why);
	if (code != 0) {
		ctl_error("upgrade: the %s command '%s' failed: %s", what, cmd,
			  why);
		return false;
	}
	return true;
}

/* The members of the cluster at -h/-p that answer as the old side of a
 * migration, followers first: only those are ever stopped (-h/-p may name
 * a node of the new cluster once the old one is gone). */
static size_t old_members(const struct upgrade_migration *m,
			  struct roll_view *v, uint64_t *ids)
{
	static struct roll_seeds seeds;
	roll_seeds_init(&seeds, m->o);
	if (roll_observe(m->o, &seeds, v) != 0)
		return 0;
	char text[STATUS_TEXT_MAX], err[CTL_ERR_MAX];
	size_t n = 0;
	const struct roll_member *last = NULL;
	for (size_t i = 0; i < v->n; i++) {
		const struct roll_member *om = &v->m[i];
		if (!om->up ||
		    !ask_status(m->o, om->client_addr, text, sizeof text, err,
				sizeof err) ||
		    !field_is(text, "migration_side", "old"))
			continue;
		if (om == v->leader)
			last = om;
		else
			ids[n++] = om->id;
	}
	if (last != NULL)
		ids[n++] = last->id;
	return n;
}

/* Every old member must run with --relay and --migrate-to, or nothing
 * would ever reach the new cluster. A member without them gets them in
 * one of two ways: a restart with the flags (batonctl roll skips the
 * members already at its target unless --restart-all), or, running,
 * batonctl relay attach (docs/relay.md, "Attaching a running old node");
 * the refusal names both and every member that lacks them. */
static bool old_side_ready(const struct upgrade_migration *m,
			   const struct roll_view *v)
{
	char text[STATUS_TEXT_MAX], err[CTL_ERR_MAX], side[FIELD_MAX];
	char lacking[UPGRADE_REASON_MAX] = "", release[CTL_VALUE_MAX] = "";
	bool unsealed = false;
	size_t n_lacking = 0;
	for (size_t i = 0; i < v->n; i++) {
		const struct roll_member *om = &v->m[i];
		if (!ask_status(m->o, om->client_addr, text, sizeof text, err,
				sizeof err)) {
			ctl_error("upgrade: node %" PRIu64 " (%s): %s", om->id,
				  om->client_addr, err);
			return false;
		}
		field(text, "migration_side", side, sizeof side);
		if (strcmp(side, "old") == 0)
			continue;
		struct baton_release its;
		/* Before sealing (1.3.0): no --migrate-to and no migration
		 * secret; the new nodes speak its format (docs/relay.md,
		 * "Migrating from 1.3.0"). */
		if (baton_release_parse(om->release, &its) == 0 &&
		    baton_release_compare(
			    its, baton_release_sealed_migration_since()) < 0)
			unsealed = true;
		snprintf(release, sizeof release, "%s", om->release);
		size_t at = strlen(lacking);
		snprintf(lacking + at, sizeof lacking - at,
			 "%snode %" PRIu64 " at %s (migration_side %s)",
			 n_lacking ? ", " : "", om->id, om->client_addr, side);
		n_lacking++;
	}
	if (n_lacking == 0)
		return true;
	ctl_error("upgrade: the old cluster is not set up to migrate: %s; "
		  "nothing was changed",
		  lacking);
	if (unsealed)
		ctl_error(
			"upgrade: give every old node the old side's flags "
			"--relay HOST:PORT --relay-cluster OLD, either by "
			"restarting them with the flags, 'batonctl roll --to "
			"%s --restart-all --restart COMMAND' (roll skips "
			"the members already at its target without "
			"--restart-all), or, without a restart, 'batonctl -h "
			"HOST -p PORT relay attach --relay HOST:PORT "
			"--cluster OLD --migrate-to NEW "
			"--migration-secret-file FILE' on each (docs/relay.md, "
			"\"Attaching a running old node\"; not in a real %s "
			"binary). A real %s has no --migrate-to and no "
			"migration secret: start the new nodes with "
			"--migrate-from-unsealed %s (docs/relay.md, "
			"\"Migrating from 1.3.0\"); a newer batond emulating "
			"it also needs --migrate-to NEW "
			"--migration-secret-file FILE",
			release, release, release, release);
	else
		ctl_error(
			"upgrade: give every old node the old side's flags "
			"--relay HOST:PORT --relay-cluster OLD --migrate-to "
			"NEW --migration-secret-file FILE (docs/relay.md), "
			"either by restarting them with the flags, 'batonctl "
			"roll --to %s --restart-all --restart COMMAND' (roll "
			"skips the members already at its target without "
			"--restart-all), or, without a restart, 'batonctl -h "
			"HOST -p PORT relay attach --relay HOST:PORT "
			"--cluster OLD --migrate-to NEW "
			"--migration-secret-file FILE' on each (docs/relay.md, "
			"\"Attaching a running old node\"), then run this "
			"command again",
			release);
	return false;
}

/* A new node must run the release the upgrade goes to: --start-new
 * starting another binary would end the upgrade somewhere else. */
static bool new_release_is_target(const struct upgrade_migration *m,
				  const struct upgrade_new_node *n)
{
	char err[CTL_ERR_MAX], release[CTL_VALUE_MAX] = "?";
	redisReply *r = ctl_ask_cmd(m->o, n->client_addr, "BATON.NODE", err,
				    sizeof err);
	bool known = r != NULL && ctl_map_valid(r) &&
		     ctl_map_str(r, "release", release, sizeof release);
	freeReplyObject(r);
	if (known && strcmp(release, m->to_text) == 0)
		return true;
	ctl_error("upgrade: new node %" PRIu64 " (%s) runs release %s, not "
		  "%s: --start-new must start the release upgraded to",
		  n->id, n->client_addr, known ? release : err, m->to_text);
	return false;
}

/* Wait until new node n answers as the new side and is ready, saying
 * what it waits for whenever that changes. */
static bool wait_new_ready(const struct upgrade_migration *m,
			   const struct upgrade_new_node *n)
{
	char text[STATUS_TEXT_MAX], err[CTL_ERR_MAX];
	char last[2 * FIELD_MAX + 64] = "", now[sizeof last];
	uint64_t end =
		roll_now_ns() + (uint64_t)m->step_timeout_s * 1000000000u;
	while (roll_now_ns() < end) {
		if (ask_status(m->o, n->client_addr, text, sizeof text, err,
			       sizeof err)) {
			if (field_is(text, "migration_side", "new") &&
			    field_is(text, "migration_ready", "1"))
				return new_release_is_target(m, n);
			char phase[FIELD_MAX], why[FIELD_MAX], active[8];
			field(text, "migration_phase", phase, sizeof phase);
			field(text, "migration_not_ready", why, sizeof why);
			field(text, "relay_active", active, sizeof active);
			snprintf(now, sizeof now,
				 "phase %s, relay active %s: %s", phase, active,
				 why);
		} else {
			snprintf(now, sizeof now, "not answering: %.*s", 100,
				 err);
		}
		if (strcmp(now, last) != 0) {
			roll_emit(&progress, "migrate", NULL, 0,
				  "  node %" PRIu64 " not ready yet (%s)",
				  n->id, now);
			snprintf(last, sizeof last, "%s", now);
		}
		roll_sleep_ms(POLL_MS);
	}
	ctl_error("upgrade: new node %" PRIu64 " (%s) not ready within %d s "
		  "(%s); if the relay is not active, activate it with "
		  "'batonctl relay activate --relay HOST:PORT --secret-file "
		  "FILE' (docs/batonctl.md)",
		  n->id, n->client_addr, m->step_timeout_s, last);
	return false;
}

static bool wait_authority(const struct upgrade_migration *m)
{
	uint64_t end =
		roll_now_ns() + (uint64_t)m->step_timeout_s * 1000000000u;
	while (roll_now_ns() < end) {
		if (upgrade_new_has_authority(m))
			return true;
		roll_sleep_ms(POLL_MS);
	}
	ctl_error("upgrade: the new cluster did not take write authority "
		  "within %d s: 'batonctl -p <new node> migrate' shows where "
		  "it is",
		  m->step_timeout_s);
	return false;
}

int upgrade_migrate(struct upgrade_migration *m)
{
	static struct roll_view v;
	uint64_t old_ids[CTL_MEMBERS_MAX];
	roll_out_init(&progress, false);
	bool handed_off = upgrade_new_has_authority(m);
	memset(&v, 0, sizeof v);
	size_t n_old = old_members(m, &v, old_ids);
	if (!handed_off && v.n == 0) {
		ctl_error("upgrade: cannot read the old cluster's members: %s",
			  v.err[0] ? v.err : "none answers");
		return CTL_EXIT_ERROR;
	}
	if (!handed_off && !old_side_ready(m, &v))
		return CTL_EXIT_ERROR;
	char text[STATUS_TEXT_MAX], err[CTL_ERR_MAX];
	for (size_t i = 0; i < m->n_new; i++) {
		const struct upgrade_new_node *n = &m->new_nodes[i];
		if (ask_status(m->o, n->client_addr, text, sizeof text, err,
			       sizeof err)) {
			roll_emit(&progress, "migrate", NULL, 0,
				  "new node %" PRIu64 " answers: not started "
				  "again",
				  n->id);
		} else if (!run(m, m->start_new, n->id, "starting new")) {
			return CTL_EXIT_ERROR;
		}
		if (!wait_new_ready(m, n))
			return CTL_EXIT_ERROR;
		roll_emit(&progress, "migrate", NULL, 0,
			  "new node %" PRIu64 " (%s) is ready (%d of %zu)",
			  n->id, m->to_text, (int)(i + 1), m->n_new);
	}
	if (!wait_authority(m))
		return CTL_EXIT_ERROR;
	roll_emit(
		&progress, "migrate", NULL, 0,
		"the new cluster holds write authority; the old nodes forward "
		"to it");
	for (size_t i = 0; i < n_old; i++) {
		if (!run(m, m->stop_old, old_ids[i], "stopping old"))
			return CTL_EXIT_ERROR;
		roll_emit(&progress, "migrate", NULL, 0,
			  "old node %" PRIu64 " stopped (%zu of %zu)",
			  old_ids[i], i + 1, n_old);
	}
	if (n_old == 0)
		roll_emit(&progress, "migrate", NULL, 0,
			  "no old node answers at the given address: if old "
			  "nodes still run, stop them");
	roll_emit(&progress, "migrate", NULL, 0,
		  "migration done: the new cluster of %s serves; stop "
		  "baton-relay once you no longer need it (docs/relay.md)",
		  m->to_text);
	return CTL_EXIT_OK;
}
