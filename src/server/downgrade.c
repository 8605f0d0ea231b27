/*
 * BATON.DOWNGRADE (docs/batond.md, "Downgrade"): an explicit downgrade,
 * etcd 3.6's way, to the release one step back from the release floor.
 *
 *   VALIDATE <release> [FORCE]  on the leader: the core's checks
 *       (baton_node_downgrade_check: one step back, every member reachable
 *       this term and at or above the target, nothing in flight), then the
 *       state machine's (its convert_loss hook, machine.h): converting
 *       the machine version in use down must lose nothing, or FORCE,
 *       which does exactly what the machine's text says (kv: hashes
 *       deleted below version 3, TTLs dropped below 2); a conversion the
 *       machine cannot make is refused, FORCE or not; and a leader run
 *       with --strict-release, whose transport would refuse a node
 *       restarted on the target, refuses;
 *   ENABLE <release> [FORCE]    the same checks, then the version entry
 *       that lowers the floor and the machine version at one index (kv
 *       converts there); +OK once it is applied here;
 *   CANCEL <release>            on the leader: restore the previous floor
 *       and machine version while no member runs the target yet;
 *   STATUS                      any node, from its own log.
 *
 * The checks run on the leader's state as it is when the command arrives;
 * writes already in flight are converted with the rest at the entry (the
 * conversion never refuses: it must be the same on every node).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "server.h"

/* Room for the core's reasons (they name the rule and the versions). */
#define WHY_MAX 512u

static const char *sub_name(enum downgrade_sub sub)
{
	switch (sub) {
	case DOWNGRADE_VALIDATE:
		return "validate";
	case DOWNGRADE_ENABLE:
		return "enable";
	case DOWNGRADE_CANCEL:
		return "cancel";
	default:
		return "status";
	}
}

/* A refusal by the core's check: a retryable one (a member not heard
 * from this term, a version entry or a transfer in flight) is -TRYAGAIN,
 * the others -ERR, both with the core's reason. */
static int refuse_check(struct command_ctx *x, const struct downgrade_args *a,
			int rv, const char *why)
{
	char t[BATON_RELEASE_STR_MAX];
	baton_release_format(a->target, t);
	if (rv == BATON_ENOTLEADER) {
		/* The server still thought it led: leadership is moving. */
		if (!admin_require_leader(x))
			return 0;
		resp_error(command_out(x), "TRYAGAIN leadership is changing; "
					   "retry");
		return command_done(x);
	}
	LOG_INFO("downgrade %s %s refused: %s", sub_name(a->sub), t,
		 why[0] != '\0' ? why : baton_strerror(rv));
	resp_error(command_out(x), "%s downgrade %s to %s refused: %s",
		   rv == BATON_EBUSY ? "TRYAGAIN" : "ERR", sub_name(a->sub), t,
		   why[0] != '\0' ? why : baton_strerror(rv));
	return command_done(x);
}

/* The state machine's half: what converting down would lose, counted
 * and worded by the machine (machine.h, convert_loss); nothing for a
 * machine without the hook. 0, or BATON_EVERSION with why. */
static int machine_loss(struct server *s, const struct baton_downgrade_plan *p,
			struct baton_machine_loss *loss, char *why, size_t cap)
{
	struct baton_machine *m = &s->machine.base;
	memset(loss, 0, sizeof *loss);
	if (p->machine_to.value == p->machine_from.value ||
	    m->ops->convert_loss == NULL)
		return 0;
	int rv = m->ops->convert_loss(m, p->machine_from, p->machine_to, loss);
	if (rv != 0) {
		const char *e =
			m->ops->errmsg != NULL ? m->ops->errmsg(m) : NULL;
		snprintf(why, cap, "%s",
			 e != NULL && e[0] != '\0' ? e : baton_strerror(rv));
		return rv;
	}
	BATON_ASSERT(loss->n <= BATON_MACHINE_LOSS_KINDS_MAX);
	BATON_ASSERT(loss->items == 0 || loss->text[0] != '\0');
	return 0;
}

/* VALIDATE and ENABLE: both halves of the check. 0 with *plan and what
 * the conversion loses in *loss, or -1 after replying. */
static int check(struct command_ctx *x, const struct downgrade_args *a,
		 struct baton_downgrade_plan *plan,
		 struct baton_machine_loss *loss)
{
	struct server *s = x->s;
	char why[WHY_MAX] = "";
	int rv = baton_node_downgrade_check(s->node, BATON_DOWNGRADE_ENABLE,
					    a->target, plan, why, sizeof why);
	if (rv != 0) {
		refuse_check(x, a, rv, why);
		return -1;
	}
	if (s->cfg.strict_release) {
		/* The transport refuses every peer of another release: a node
		 * restarted on the target would reach no one. */
		char t[BATON_RELEASE_STR_MAX];
		snprintf(
			why, sizeof why,
			"this leader runs with --strict-release, which refuses "
			"peers of another release: a node restarted on %s "
			"could not reach it; restart the members without "
			"--strict-release first",
			baton_release_format(a->target, t));
		refuse_check(x, a, BATON_EINVAL, why);
		return -1;
	}
	rv = machine_loss(s, plan, loss, why, sizeof why);
	if (rv != 0 || (loss->items > 0 && !a->force)) {
		char t[BATON_RELEASE_STR_MAX];
		const char *text = rv != 0 ? why : loss->text;
		LOG_INFO("downgrade %s %s refused: %s", sub_name(a->sub),
			 baton_release_format(a->target, t), text);
		resp_error(command_out(x), "ERR downgrade %s to %s refused: %s",
			   sub_name(a->sub), t, text);
		command_done(x);
		return -1;
	}
	return 0;
}

void admin_map_plan(struct baton_buf *b,
		    const struct baton_downgrade_plan *plan)
{
	char f0[BATON_RELEASE_STR_MAX], f1[BATON_RELEASE_STR_MAX];
	admin_map_field(b, "floor_from", "%s",
			versions_floor_text(plan->floor_from, f0));
	admin_map_field(b, "floor_to", "%s",
			versions_floor_text(plan->floor_to, f1));
	admin_map_field(b, "machine_from", "%u", plan->machine_from.value);
	admin_map_field(b, "machine_to", "%u", plan->machine_to.value);
}

static int validate(struct command_ctx *x, const struct downgrade_args *a)
{
	struct baton_downgrade_plan plan;
	struct baton_machine_loss loss;
	if (check(x, a, &plan, &loss) != 0)
		return 0;
	char t[BATON_RELEASE_STR_MAX], kinds[WHY_MAX];
	versions_loss_kinds(&loss, kinds, sizeof kinds);
	struct baton_buf *b = command_out(x);
	resp_array(b, 2 * 9);
	admin_map_field(b, "target", "%s", baton_release_format(a->target, t));
	admin_map_plan(b, &plan);
	admin_map_field(b, "keys_lost", "%" PRIu64, loss.items);
	admin_map_field(b, "loss", "%s", loss.items > 0 ? loss.text : "none");
	admin_map_field(b, "loss_kinds", "%s", kinds);
	admin_map_field(b, "valid", "%s",
			loss.items > 0 ? "yes, with FORCE" : "yes");
	return command_done(x);
}

struct done_ctx {
	struct slot *sl;
	enum downgrade_sub sub;
	struct baton_release target;
};

static void on_done(void *data, int status)
{
	struct done_ctx *d = data;
	char t[BATON_RELEASE_STR_MAX];
	baton_release_format(d->target, t);
	if (status != 0) {
		LOG_WARN("downgrade %s %s: %s", sub_name(d->sub), t,
			 baton_strerror(status));
		slot_error(d->sl, status);
	} else {
		resp_simple(slot_buf(d->sl), "OK");
		slot_done(d->sl);
	}
	free(d);
}

/* ENABLE (after check) and CANCEL: the version entry; +OK once applied. */
static int record(struct command_ctx *x, const struct downgrade_args *a,
		  uint32_t op)
{
	struct done_ctx *d = calloc(1, sizeof *d);
	if (d == NULL)
		return command_fail(x, BATON_ENOMEM);
	*d = (struct done_ctx){x->sl, a->sub, a->target};
	int rv = baton_node_downgrade(x->s->node, op, a->target, on_done, d);
	if (rv != 0) {
		free(d);
		return refuse_check(x, a, rv, "");
	}
	return 0;
}

static int enable(struct command_ctx *x, const struct downgrade_args *a)
{
	struct baton_downgrade_plan plan;
	struct baton_machine_loss loss;
	if (check(x, a, &plan, &loss) != 0)
		return 0;
	char t[BATON_RELEASE_STR_MAX], f0[BATON_RELEASE_STR_MAX],
		f1[BATON_RELEASE_STR_MAX], kinds[WHY_MAX];
	versions_loss_kinds(&loss, kinds, sizeof kinds);
	LOG_WARN("downgrade to %s: enabling (floor %s -> %s, machine version "
		 "%u -> %u; lost: %s%s)",
		 baton_release_format(a->target, t),
		 versions_floor_text(plan.floor_from, f0),
		 versions_floor_text(plan.floor_to, f1),
		 plan.machine_from.value, plan.machine_to.value, kinds,
		 a->force ? ", forced" : "");
	return record(x, a, BATON_DOWNGRADE_ENABLE);
}

static int cancel(struct command_ctx *x, const struct downgrade_args *a)
{
	struct baton_downgrade_plan plan;
	char why[WHY_MAX] = "";
	int rv = baton_node_downgrade_check(x->s->node, BATON_DOWNGRADE_CANCEL,
					    a->target, &plan, why, sizeof why);
	if (rv != 0)
		return refuse_check(x, a, rv, why);
	char t[BATON_RELEASE_STR_MAX], f1[BATON_RELEASE_STR_MAX];
	LOG_WARN("downgrade to %s: cancelling (floor back to %s, machine "
		 "version %u)",
		 baton_release_format(a->target, t),
		 versions_floor_text(plan.floor_to, f1), plan.machine_to.value);
	return record(x, a, BATON_DOWNGRADE_CANCEL);
}

/* Any node, from its log: the downgrade in progress, who still runs
 * another release (the version table), and whether this node's snapshot
 * covers the entry that enabled it (then it may restart on the target:
 * its log holds nothing written under the newer versions). */
static int status(struct command_ctx *x)
{
	struct baton_node_status st;
	baton_node_status(x->s->node, &st);
	const struct baton_version_state *vs = &st.raft.versions;
	const struct baton_downgrade *d = &vs->downgrade;
	bool on = d->target.major != 0 || d->target.minor != 0 ||
		  d->target.patch != 0;
	char text[96], t[BATON_RELEASE_STR_MAX], f[BATON_RELEASE_STR_MAX],
		pending[BATON_MAX_MEMBERS * 32];
	versions_downgrade_text(d, text, sizeof text);
	struct baton_buf *b = command_out(x);
	resp_array(b, 2 * 9);
	admin_map_field(b, "downgrade", "%s", text);
	admin_map_field(b, "target", "%s", versions_floor_text(d->target, t));
	admin_map_field(b, "release_floor", "%s",
			versions_floor_text(vs->floor, f));
	admin_map_field(b, "machine_version", "%u", vs->machine.value);
	if (!on) {
		admin_map_field(b, "prev_floor", "-");
		admin_map_field(b, "prev_machine", "-");
		admin_map_field(b, "since", "-");
		admin_map_field(b, "waiting_for", "%s", "");
		admin_map_field(b, "ready_to_restart", "-");
		return command_done(x);
	}
	versions_pending_text(vs, &st.raft.config, d->target, pending,
			      sizeof pending);
	admin_map_field(b, "prev_floor", "%s",
			versions_floor_text(d->prev_floor, f));
	admin_map_field(b, "prev_machine", "%u", d->prev_machine.value);
	admin_map_field(b, "since", "%" PRIu64, d->since);
	admin_map_field(b, "waiting_for", "%s", pending);
	if (st.raft.snapshot_index >= d->since)
		admin_map_field(b, "ready_to_restart", "yes");
	else
		admin_map_field(b, "ready_to_restart",
				"no (snapshot index %" PRIu64 " < %" PRIu64 ")",
				st.raft.snapshot_index, d->since);
	return command_done(x);
}

int admin_downgrade(struct command_ctx *x)
{
	struct downgrade_args a;
	char err[256];
	if (versions_downgrade_parse(x->argc, x->argv, x->lens, &a, err,
				     sizeof err) != 0) {
		resp_error(command_out(x), "%s", err);
		return command_done(x);
	}
	if (a.sub == DOWNGRADE_STATUS)
		return status(x);
	if (!admin_require_leader(x))
		return 0;
	switch (a.sub) {
	case DOWNGRADE_VALIDATE:
		return validate(x, &a);
	case DOWNGRADE_ENABLE:
		return enable(x, &a);
	default:
		return cancel(x, &a);
	}
}
