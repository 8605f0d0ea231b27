/*
 * batonctl downgrade validate|enable|cancel|status (docs/batond.md,
 * "Downgrade"): BATON.DOWNGRADE on the leader (validate, enable, cancel,
 * following one -NOTLEADER), or on the asked node and then every member
 * (status: which members still run another release, and which may be
 * restarted on the target now).
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"

/* "major.minor.patch", each part a decimal. */
static bool valid_release(const char *s)
{
	int dots = 0;
	size_t digits = 0;
	for (const char *p = s;; p++) {
		if (*p >= '0' && *p <= '9') {
			if (++digits > 5)
				return false;
		} else if (*p == '.' || *p == '\0') {
			if (digits == 0)
				return false;
			if (*p == '\0')
				return dots == 2;
			dots++;
			digits = 0;
		} else {
			return false;
		}
	}
}

/* validate, enable, cancel: the leader's answer. */
static int leader_op(const struct ctl_opts *o, const char *op,
		     const char *release, bool force)
{
	const char *argv[] = {"BATON.DOWNGRADE", op, release, "FORCE"};
	char addr[CTL_ADDR_MAX];
	redisReply *r =
		ctl_call_leader(o, force ? 4 : 3, argv, addr, sizeof addr);
	if (r == NULL)
		return CTL_EXIT_ERROR;
	int rv = CTL_EXIT_OK;
	if (r->type == REDIS_REPLY_ERROR) {
		ctl_error("node %s: %s", addr, r->str);
		rv = CTL_EXIT_ERROR;
	} else if (strcmp(op, "VALIDATE") == 0 && ctl_map_valid(r)) {
		char f0[CTL_VALUE_MAX], f1[CTL_VALUE_MAX], m0[CTL_VALUE_MAX],
			m1[CTL_VALUE_MAX], lost[CTL_VALUE_MAX],
			loss[CTL_ERR_MAX];
		ctl_map_str_or_dash(r, "floor_from", f0, sizeof f0);
		ctl_map_str_or_dash(r, "floor_to", f1, sizeof f1);
		ctl_map_str_or_dash(r, "machine_from", m0, sizeof m0);
		ctl_map_str_or_dash(r, "machine_to", m1, sizeof m1);
		ctl_map_str_or_dash(r, "keys_lost", lost, sizeof lost);
		ctl_map_str_or_dash(r, "loss", loss, sizeof loss);
		printf("downgrade to %s is valid: release floor %s -> %s, "
		       "machine version %s -> %s",
		       release, f0, f1, m0, m1);
		/* The machine's own words: what is lost and what --force
		 * does. */
		if (strcmp(lost, "0") != 0 && strcmp(lost, "-") != 0)
			printf("; with --force: %s", loss);
		printf("\n");
	} else if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0 &&
		   strcmp(op, "VALIDATE") != 0) {
		if (strcmp(op, "ENABLE") == 0)
			printf("downgrade to %s enabled: restart each node on "
			       "release %s once 'batonctl downgrade status' "
			       "shows it ready to restart\n",
			       release, release);
		else
			printf("downgrade to %s cancelled\n", release);
	} else {
		ctl_error("node %s: BATON.DOWNGRADE %s: unexpected reply", addr,
			  op);
		rv = CTL_EXIT_ERROR;
	}
	freeReplyObject(r);
	return rv;
}

/* One row per member: its release (BATON.NODE) and whether it may be
 * restarted on the target (its own BATON.DOWNGRADE STATUS). */
static void print_members(const struct ctl_opts *o, const redisReply *ms)
{
	static const char *const header[] = {"ID", "ADDR", "RELEASE",
					     "READY_TO_RESTART"};
	static struct ctl_table t;
	ctl_table_init(&t, 4, header);
	for (size_t i = 0; i < ms->elements && i < CTL_MEMBERS_MAX; i++) {
		const redisReply *m = ms->element[i];
		char id[CTL_VALUE_MAX], addr[CTL_ADDR_MAX], err[CTL_ERR_MAX];
		if (!ctl_map_valid(m))
			continue;
		ctl_map_str_or_dash(m, "id", id, sizeof id);
		ctl_map_str_or_dash(m, "client_addr", addr, sizeof addr);
		bool ok = ctl_table_row(&t);
		assert(ok);
		(void)ok;
		ctl_table_set(&t, 0, "%s", id);
		ctl_table_set(&t, 1, "%s", addr);
		const char *node[] = {"BATON.NODE"};
		const char *st[] = {"BATON.DOWNGRADE", "STATUS"};
		redisReply *n = ctl_ask(o, addr, 1, node, err, sizeof err);
		redisReply *d =
			n != NULL ? ctl_ask(o, addr, 2, st, err, sizeof err)
				  : NULL;
		char rel[CTL_VALUE_MAX] = "down", ready[CTL_CELL_MAX] = "-";
		if (n != NULL && ctl_map_valid(n))
			ctl_map_str_or_dash(n, "release", rel, sizeof rel);
		if (d != NULL && ctl_map_valid(d))
			ctl_map_str_or_dash(d, "ready_to_restart", ready,
					    sizeof ready);
		else if (n != NULL)
			snprintf(ready, sizeof ready, "? (%.80s)", err);
		ctl_table_set(&t, 2, "%s", rel);
		ctl_table_set(&t, 3, "%s", ready);
		freeReplyObject(n);
		freeReplyObject(d);
	}
	ctl_table_print(&t);
}

static int status(const struct ctl_opts *o, const char *release)
{
	char addr[CTL_ADDR_MAX], err[CTL_ERR_MAX];
	ctl_opts_addr(o, addr, sizeof addr);
	const char *st[] = {"BATON.DOWNGRADE", "STATUS"};
	redisReply *r = ctl_ask(o, addr, 2, st, err, sizeof err);
	if (r == NULL || !ctl_map_valid(r)) {
		ctl_error("node %s: %s", addr,
			  r == NULL ? err
				    : "BATON.DOWNGRADE: unexpected reply");
		freeReplyObject(r);
		return CTL_EXIT_ERROR;
	}
	char text[CTL_ERR_MAX], target[CTL_VALUE_MAX], floor[CTL_VALUE_MAX],
		machine[CTL_VALUE_MAX], since[CTL_VALUE_MAX],
		waiting[CTL_ERR_MAX];
	ctl_map_str_or_dash(r, "downgrade", text, sizeof text);
	ctl_map_str_or_dash(r, "target", target, sizeof target);
	ctl_map_str_or_dash(r, "release_floor", floor, sizeof floor);
	ctl_map_str_or_dash(r, "machine_version", machine, sizeof machine);
	ctl_map_str_or_dash(r, "since", since, sizeof since);
	ctl_map_str_or_dash(r, "waiting_for", waiting, sizeof waiting);
	freeReplyObject(r);
	bool on = strcmp(target, "none") != 0 && strcmp(target, "-") != 0;
	if (!on) {
		printf("downgrade: none (release floor %s, machine version "
		       "%s)\n",
		       floor, machine);
	} else {
		printf("downgrade: %s, enabled at index %s\n", text, since);
		printf("release floor: %s; machine version: %s\n", floor,
		       machine);
		printf("still on another release: %s\n",
		       strcmp(waiting, "-") == 0 ? "none" : waiting);
		const char *mem[] = {"BATON.MEMBERS"};
		redisReply *ms = ctl_ask(o, addr, 1, mem, err, sizeof err);
		if (ms != NULL && ms->type == REDIS_REPLY_ARRAY) {
			printf("\n");
			print_members(o, ms);
		} else {
			ctl_error("node %s: %s", addr,
				  ms == NULL ? err : "unexpected reply");
		}
		freeReplyObject(ms);
	}
	if (release == NULL)
		return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
	/* Asked about one release: is that the downgrade this node sees? */
	if (on ? strcmp(target, release) != 0 : strcmp(floor, release) != 0) {
		ctl_error("node %s: no downgrade to %s in progress or done "
			  "(downgrade: %s, release floor %s)",
			  addr, release, on ? text : "none", floor);
		return CTL_EXIT_ERROR;
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}

const struct ctl_option ctl_downgrade_options[] = {
	{"force", NULL},
	{NULL, NULL},
};

int ctl_cmd_downgrade(const struct ctl_opts *o, const struct ctl_args *a)
{
	assert(a->n_positional >= 1 && a->n_positional <= 2);
	static const struct {
		const char *name, *op;
	} ops[] = {{"validate", "VALIDATE"},
		   {"enable", "ENABLE"},
		   {"cancel", "CANCEL"},
		   {"status", "STATUS"}};
	const char *step = a->positional[0];
	const char *op = NULL;
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (strcmp(step, ops[i].name) == 0)
			op = ops[i].op;
	if (op == NULL)
		return ctl_usage_error(
			"downgrade: unknown step '%s' (validate, "
			"enable, cancel or status)",
			step);
	const char *release = a->n_positional == 2 ? a->positional[1] : NULL;
	if (release != NULL && !valid_release(release))
		return ctl_usage_error("downgrade %s: '%s' is not a release "
				       "(major.minor.patch)",
				       step, release);
	bool force = ctl_args_flag(a, "force");
	bool status_op = strcmp(op, "STATUS") == 0;
	if (force && (status_op || strcmp(op, "CANCEL") == 0))
		return ctl_usage_error("downgrade %s takes no --force", step);
	if (status_op)
		return status(o, release);
	if (release == NULL)
		return ctl_usage_error("downgrade %s needs a RELEASE "
				       "(major.minor.patch)",
				       step);
	return leader_op(o, op, release, force);
}
