/*
 * batonctl upgrade status|finalize (docs/upgrading.md, "Hold and
 * finalize"): the burn-in hold of `batond --machine-upgrade manual`, asked
 * of the leader (BATON.UPGRADE, following one -NOTLEADER). status says
 * what a finalize would change (release floor, machine version) and what
 * blocks it; finalize records it once nothing does.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

/* How long finalize retries a -TRYAGAIN (a member not heard from yet this
 * term, a leader just elected, a version entry in flight). */
#define HOLD_RETRY_MS 5000u
#define HOLD_RETRY_PAUSE_MS 200u

static void pause_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000u, (long)(ms % 1000u) * 1000000L};
	nanosleep(&ts, NULL);
}

static int status(const struct ctl_opts *o)
{
	const char *argv[] = {"BATON.UPGRADE", "STATUS"};
	char addr[CTL_ADDR_MAX];
	redisReply *r = ctl_call_leader(o, 2, argv, addr, sizeof addr);
	if (r == NULL)
		return CTL_EXIT_ERROR;
	if (r->type == REDIS_REPLY_ERROR || !ctl_map_valid(r)) {
		ctl_error("node %s: %s", addr,
			  r->type == REDIS_REPLY_ERROR
				  ? r->str
				  : "BATON.UPGRADE STATUS: unexpected reply");
		freeReplyObject(r);
		return CTL_EXIT_ERROR;
	}
	char held[CTL_VALUE_MAX], mode[CTL_VALUE_MAX], f0[CTL_VALUE_MAX],
		f1[CTL_VALUE_MAX], m0[CTL_VALUE_MAX], m1[CTL_VALUE_MAX],
		change[CTL_VALUE_MAX], blocked[CTL_ERR_MAX];
	ctl_map_str_or_dash(r, "held", held, sizeof held);
	ctl_map_str_or_dash(r, "machine_upgrade", mode, sizeof mode);
	ctl_map_str_or_dash(r, "floor_from", f0, sizeof f0);
	ctl_map_str_or_dash(r, "floor_to", f1, sizeof f1);
	ctl_map_str_or_dash(r, "machine_from", m0, sizeof m0);
	ctl_map_str_or_dash(r, "machine_to", m1, sizeof m1);
	ctl_map_str_or_dash(r, "would_change", change, sizeof change);
	ctl_map_str_or_dash(r, "blocked_by", blocked, sizeof blocked);
	freeReplyObject(r);
	printf("hold: %s (in the log: %s; the leader's machine_upgrade: "
	       "%s)\n",
	       strcmp(held, "yes") == 0 || strcmp(mode, "manual") == 0 ? "on"
								       : "off",
	       held, mode);
	printf("finalize would change: release floor %s -> %s, machine "
	       "version %s -> %s%s\n",
	       f0, f1, m0, m1,
	       strcmp(change, "yes") == 0 ? "" : " (nothing to raise)");
	printf("blocked by: %s\n",
	       strcmp(blocked, "-") == 0 ? "nothing" : blocked);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}

static int finalize(const struct ctl_opts *o)
{
	const char *argv[] = {"BATON.UPGRADE", "FINALIZE"};
	char addr[CTL_ADDR_MAX];
	for (unsigned waited = 0;; waited += HOLD_RETRY_PAUSE_MS) {
		redisReply *r = ctl_call_leader(o, 2, argv, addr, sizeof addr);
		if (r == NULL)
			return CTL_EXIT_ERROR;
		if (r->type == REDIS_REPLY_STATUS &&
		    strcmp(r->str, "OK") == 0) {
			freeReplyObject(r);
			printf("upgrade finalized: the release floor and the "
			       "machine version are raised ('batonctl upgrade "
			       "status' shows them)\n");
			return fflush(stdout) == 0 ? CTL_EXIT_OK
						   : CTL_EXIT_ERROR;
		}
		bool again = r->type == REDIS_REPLY_ERROR &&
			     strncmp(r->str, "TRYAGAIN", 8) == 0;
		if (!again || waited >= HOLD_RETRY_MS) {
			ctl_error("node %s: %s", addr,
				  r->type == REDIS_REPLY_ERROR
					  ? r->str
					  : "BATON.UPGRADE FINALIZE: "
					    "unexpected reply");
			freeReplyObject(r);
			return CTL_EXIT_ERROR;
		}
		freeReplyObject(r);
		pause_ms(HOLD_RETRY_PAUSE_MS);
	}
}

int ctl_upgrade_hold(const struct ctl_opts *o, const struct ctl_args *a)
{
	assert(a->n_positional >= 1);
	const char *step = a->positional[0];
	if (a->n_positional != 1)
		return ctl_usage_error("upgrade %s takes no other argument",
				       step);
	if (strcmp(step, "status") == 0)
		return status(o);
	if (strcmp(step, "finalize") == 0)
		return finalize(o);
	return ctl_usage_error("upgrade: unknown step '%s' (status or "
			       "finalize)",
			       step);
}
