/*
 * batonctl migrate: follow (and, with --handoff, hurry) a migration between
 * two clusters through baton-relay, asking a node of the new cluster
 * (docs/relay.md). The nodes drive the migration themselves; this shows
 * where it is: the relay, the view, the import index against the old
 * cluster's log, hand-off and authority.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

#define MIGRATE_POLL_MS 200
#define MIGRATE_WAIT_S_DEFAULT 300u
#define MIGRATE_WAIT_S_MAX 86400u

/* BATON.MIGRATION STATUS: "field:value" lines. */
struct status {
	char text[4096];
};

static const char *field(const struct status *st, const char *name, char *out,
			 size_t cap)
{
	size_t n = strlen(name);
	const char *p = st->text;
	while ((p = strstr(p, name)) != NULL) {
		bool line_start = p == st->text || p[-1] == '\n';
		if (line_start && p[n] == ':') {
			const char *v = p + n + 1;
			size_t len = strcspn(v, "\r\n");
			if (len >= cap)
				len = cap - 1;
			memcpy(out, v, len);
			out[len] = '\0';
			return out;
		}
		p += n;
	}
	snprintf(out, cap, "?");
	return out;
}

static int ask_status(const struct ctl_opts *o, const char *addr,
		      struct status *st)
{
	const char *argv[] = {"BATON.MIGRATION", "STATUS"};
	char err[CTL_ERR_MAX];
	redisReply *r = ctl_ask(o, addr, 2, argv, err, sizeof err);
	if (r == NULL) {
		ctl_error("node %s: %s", addr, err);
		return -1;
	}
	int rv = 0;
	if (r->type == REDIS_REPLY_STRING)
		snprintf(st->text, sizeof st->text, "%.*s", (int)r->len,
			 r->str);
	else
		rv = -1;
	freeReplyObject(r);
	if (rv != 0)
		ctl_error("node %s: BATON.MIGRATION STATUS gave no text", addr);
	return rv;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The dry run's checks: what would keep the migration from going on. */
static int dry_run(const struct status *st)
{
	char side[32], conn[8], active[8], nodes[16], relay[256];
	field(st, "migration_side", side, sizeof side);
	if (strcmp(side, "none") == 0 || strcmp(side, "?") == 0) {
		ctl_error("this node takes no part in a migration: start the "
			  "new cluster's nodes with --relay HOST:PORT "
			  "--migrate-from OLD_CLUSTER (docs/relay.md)");
		return CTL_EXIT_ERROR;
	}
	field(st, "relay", relay, sizeof relay);
	field(st, "relay_connected", conn, sizeof conn);
	field(st, "relay_active", active, sizeof active);
	field(st, "relay_view_nodes", nodes, sizeof nodes);
	printf("node side: %s; relay %s: connected %s, active %s, %s nodes "
	       "in its view\n",
	       side, relay, conn, active, nodes);
	if (strcmp(side, "new") != 0) {
		ctl_error("ask a node of the new cluster (started with "
			  "--migrate-from): this one is on the old side");
		return CTL_EXIT_ERROR;
	}
	if (strcmp(conn, "1") != 0) {
		ctl_error("the node is not connected to the relay %s: is "
			  "baton-relay running there?",
			  relay);
		return CTL_EXIT_ERROR;
	}
	if (strcmp(active, "1") != 0) {
		printf("the relay has not activated the nodes yet: start "
		       "baton-relay with --activate, or send it SIGUSR1\n");
		return CTL_EXIT_ERROR;
	}
	printf("plan: the new cluster imports the old one's state, then "
	       "takes write authority once it has 2 voters caught up (or at "
	       "`batonctl migrate --handoff`); then stop the old nodes one "
	       "by one\n");
	return CTL_EXIT_OK;
}

const struct ctl_option ctl_migrate_options[] = {
	{"dry-run", NULL},
	{"handoff", NULL},
	{"wait-s", "N"},
	{NULL, NULL},
};

/* batonctl migrate abort | resume | unfence: one CONTROL entry, proposed
 * by the leader of the asked node's cluster; the answer is its map's. */
static int control(const struct ctl_opts *o, const char *what)
{
	char upper[16];
	size_t n = strlen(what);
	for (size_t i = 0; i <= n && i < sizeof upper; i++)
		upper[i] = (char)(what[i] >= 'a' && what[i] <= 'z'
					  ? what[i] - 'a' + 'A'
					  : what[i]);
	upper[sizeof upper - 1] = '\0';
	const char *argv[] = {"BATON.MIGRATION", upper};
	char addr[CTL_ADDR_MAX];
	redisReply *r = ctl_call_leader(o, 2, argv, addr, sizeof addr);
	if (r == NULL)
		return CTL_EXIT_ERROR;
	int rc = CTL_EXIT_OK;
	if (r->type == REDIS_REPLY_ERROR) {
		ctl_error("node %s: %.*s", addr, (int)r->len, r->str);
		rc = CTL_EXIT_ERROR;
	} else if (strcmp(what, "abort") == 0) {
		printf("aborted: this cluster exports (old side) or imports "
		       "(new side) nothing more; 'batonctl migrate resume' "
		       "undoes it\n");
	} else if (strcmp(what, "resume") == 0) {
		printf("resumed: the migration goes on from where it was\n");
	} else {
		printf("unfenced: this cluster takes writes again and its "
		       "migration is aborted; the new cluster's import is "
		       "void past the fence: 'batonctl migrate resume' "
		       "exports from a new snapshot\n");
	}
	freeReplyObject(r);
	return rc;
}

int ctl_cmd_migrate(const struct ctl_opts *o, const struct ctl_args *a)
{
	if (a->n_positional == 1) {
		const char *what = a->positional[0];
		if (strcmp(what, "abort") != 0 && strcmp(what, "resume") != 0 &&
		    strcmp(what, "unfence") != 0) {
			ctl_error("migrate: unknown action '%s' (abort, "
				  "resume or unfence)",
				  what);
			return CTL_EXIT_USAGE;
		}
		return control(o, what);
	}
	bool dry = ctl_args_flag(a, "dry-run");
	bool handoff = ctl_args_flag(a, "handoff");
	uint64_t wait_s = MIGRATE_WAIT_S_DEFAULT;
	int rc = ctl_args_u64(a, "wait-s", 1, MIGRATE_WAIT_S_MAX, "seconds",
			      &wait_s);
	if (rc != 0)
		return rc;
	char addr[CTL_ADDR_MAX];
	ctl_opts_addr(o, addr, sizeof addr);
	struct status st;
	if (ask_status(o, addr, &st) != 0)
		return CTL_EXIT_ERROR;
	if (dry)
		return dry_run(&st);
	char side[32];
	if (strcmp(field(&st, "migration_side", side, sizeof side), "new") !=
	    0) {
		ctl_error("node %s is not on the new side of a migration "
			  "(migration_side %s): ask a node started with "
			  "--migrate-from",
			  addr, side);
		return CTL_EXIT_ERROR;
	}
	if (handoff) {
		const char *av[] = {"BATON.MIGRATION", "HANDOFF"};
		char err[CTL_ERR_MAX];
		redisReply *r = ctl_ask(o, addr, 2, av, err, sizeof err);
		if (r == NULL) {
			ctl_error("node %s: %s", addr, err);
			return CTL_EXIT_ERROR;
		}
		freeReplyObject(r);
	}
	double t0 = now_s();
	char last[256] = "";
	while (now_s() - t0 < (double)wait_s) {
		if (ask_status(o, addr, &st) != 0)
			return CTL_EXIT_ERROR;
		char phase[64], index[32], old[32], ready[8], line[256];
		field(&st, "migration_phase", phase, sizeof phase);
		field(&st, "import_index", index, sizeof index);
		field(&st, "import_old_applied", old, sizeof old);
		field(&st, "migration_ready", ready, sizeof ready);
		snprintf(line, sizeof line,
			 "phase %s, import index %s of the old cluster's %s, "
			 "ready %s",
			 phase, index, old, ready);
		if (strcmp(line, last) != 0) {
			printf("[+%.1fs] %s\n", now_s() - t0, line);
			fflush(stdout);
			snprintf(last, sizeof last, "%s", line);
		}
		if (strcmp(phase, "authority") == 0) {
			printf("done: the new cluster holds write authority; "
			       "stop the old nodes one by one\n");
			return CTL_EXIT_OK;
		}
		sleep_ms(MIGRATE_POLL_MS);
	}
	ctl_error("the new cluster did not take authority within %" PRIu64
		  " s (last: %s)",
		  wait_s, last);
	return CTL_EXIT_ERROR;
}
