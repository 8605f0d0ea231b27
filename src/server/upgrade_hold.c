/*
 * BATON.UPGRADE (docs/batond.md, "Hold and finalize"): the burn-in hold of
 * `--machine-upgrade manual`, asked of the leader, whose live knowledge of
 * the members decides (the core's baton_raft_downgrade_check, op
 * BATON_UPGRADE_FINALIZE):
 *
 *   STATUS    what a finalize would change (release floor and machine
 *             version, from and to) and what blocks it now;
 *   FINALIZE  a version entry raising both to that; +OK once it is
 *             applied here. Refused (-TRYAGAIN) while a member has not
 *             answered this term, (-ERR) while a member runs a release
 *             below the newest one a member runs, a downgrade is in
 *             progress, or nothing is held.
 *
 * The hold itself is a fact of the log (the version state's `held`), so
 * it outlives the leader that recorded it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "log.h"
#include "server.h"

/* Room for the core's reasons (they name the member and the versions). */
#define HOLD_WHY_MAX 512u

static const struct baton_release no_release = {0, 0, 0};

/* What a finalize would do now: 0 with *plan, or the core's refusal with
 * its reason in why. */
static int finalize_plan(struct server *s, struct baton_downgrade_plan *plan,
			 char why[HOLD_WHY_MAX])
{
	return baton_node_downgrade_check(s->node, BATON_UPGRADE_FINALIZE,
					  no_release, plan, why, HOLD_WHY_MAX);
}

static int status(struct command_ctx *x)
{
	struct server *s = x->s;
	struct baton_downgrade_plan plan;
	char why[HOLD_WHY_MAX] = "";
	int rv = finalize_plan(s, &plan, why);
	if (rv == BATON_ENOTLEADER) {
		resp_error(command_out(x),
			   "TRYAGAIN leadership is changing; retry");
		return command_done(x);
	}
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	bool change =
		baton_release_compare(plan.floor_from, plan.floor_to) != 0 ||
		plan.machine_from.value != plan.machine_to.value;
	struct baton_buf *b = command_out(x);
	resp_array(b, 2 * 8);
	admin_map_field(b, "held", "%s", st.raft.versions.held ? "yes" : "no");
	admin_map_field(
		b, "machine_upgrade", "%s",
		s->cfg.machine_upgrade == BATON_UPGRADE_MANUAL	 ? "manual"
		: s->cfg.machine_upgrade == BATON_UPGRADE_QUORUM ? "quorum"
								 : "all");
	admin_map_plan(b, &plan);
	admin_map_field(b, "would_change", "%s", change ? "yes" : "no");
	admin_map_field(b, "blocked_by", "%s", rv == 0 ? "" : why);
	return command_done(x);
}

struct finalize_ctx {
	struct slot *sl;
	struct baton_downgrade_plan plan;
};

static void on_done(void *data, int status_code)
{
	struct finalize_ctx *d = data;
	if (status_code != 0) {
		LOG_WARN("upgrade finalize: %s", baton_strerror(status_code));
		slot_error(d->sl, status_code);
	} else {
		resp_simple(slot_buf(d->sl), "OK");
		slot_done(d->sl);
	}
	free(d);
}

static int finalize(struct command_ctx *x)
{
	struct server *s = x->s;
	struct baton_downgrade_plan plan;
	char why[HOLD_WHY_MAX] = "";
	int rv = finalize_plan(s, &plan, why);
	if (rv == 0) {
		struct finalize_ctx *d = calloc(1, sizeof *d);
		if (d == NULL)
			return command_fail(x, BATON_ENOMEM);
		*d = (struct finalize_ctx){x->sl, plan};
		char f0[BATON_RELEASE_STR_MAX], f1[BATON_RELEASE_STR_MAX];
		LOG_WARN("upgrade finalize: release floor %s -> %s, machine "
			 "version %u -> %u",
			 versions_floor_text(plan.floor_from, f0),
			 versions_floor_text(plan.floor_to, f1),
			 plan.machine_from.value, plan.machine_to.value);
		rv = baton_node_downgrade(s->node, BATON_UPGRADE_FINALIZE,
					  no_release, on_done, d);
		if (rv == 0)
			return 0;
		free(d);
	}
	if (rv == BATON_ENOTLEADER) {
		resp_error(command_out(x),
			   "TRYAGAIN leadership is changing; retry");
		return command_done(x);
	}
	LOG_INFO("upgrade finalize refused: %s",
		 why[0] != '\0' ? why : baton_strerror(rv));
	resp_error(command_out(x), "%s upgrade finalize refused: %s",
		   rv == BATON_EBUSY ? "TRYAGAIN" : "ERR",
		   why[0] != '\0' ? why : baton_strerror(rv));
	return command_done(x);
}

int admin_upgrade(struct command_ctx *x)
{
	if (x->argc != 2) {
		resp_error(command_out(x),
			   "ERR usage: BATON.UPGRADE STATUS|FINALIZE");
		return command_done(x);
	}
	const char *sub = (const char *)x->argv[1];
	bool is_status = x->lens[1] == 6 && strncasecmp(sub, "STATUS", 6) == 0;
	bool is_final = x->lens[1] == 8 && strncasecmp(sub, "FINALIZE", 8) == 0;
	if (!is_status && !is_final) {
		resp_error(command_out(x),
			   "ERR usage: BATON.UPGRADE STATUS|FINALIZE");
		return command_done(x);
	}
	if (!admin_require_leader(x))
		return 0;
	return is_status ? status(x) : finalize(x);
}
