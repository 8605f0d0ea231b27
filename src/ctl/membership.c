/*
 * batonctl members, add, promote, remove, transfer. The changes go to the
 * leader: a node that does not lead answers
 * `-NOTLEADER leader is <id> at <client_addr>`, and batonctl follows that
 * once.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"

/* Above the leader's own 30 s deadline for a membership change. */
#define MEMBERSHIP_REPLY_TIMEOUT_MS 35000

/* The core answers a change it cannot make with a bare "invalid
 * argument": what it means for each command. */
static const char *invalid_hint(const char *cmd, const char *error)
{
	if (strcmp(error, "ERR invalid argument") != 0)
		return "";
	if (strcmp(cmd, "BATON.PROMOTE") == 0)
		return " (the node is not a learner: a voter already, or the "
		       "leader; 'batonctl members' shows the roles)";
	if (strcmp(cmd, "BATON.TRANSFER") == 0)
		return " (no other voter to take over, or the node named is "
		       "not a voter; 'batonctl members' shows the roles)";
	if (strcmp(cmd, "BATON.REMOVE") == 0)
		return " (a cluster cannot remove its only voter: add and "
		       "promote another member first)";
	return "";
}

/* Send argv to the leader (ctl_call_leader). On +OK prints `done` and
 * returns 0; else reports which node said what. */
static int leader_call(const struct ctl_opts *o, int argc, const char **argv,
		       const char *done)
{
	char addr[CTL_ADDR_MAX];
	/* The leader answers a change once it is done or refused, at the
	 * latest at its own deadline (a promotion waits up to 10 election
	 * timeouts for the learner to catch up, any change 30 s): a shorter
	 * wait would report "timed out" for a change that may still
	 * happen. Connecting keeps --timeout-ms. */
	struct ctl_opts wait = *o;
	wait.reply_timeout_ms = MEMBERSHIP_REPLY_TIMEOUT_MS;
	redisReply *r = ctl_call_leader(&wait, argc, argv, addr, sizeof addr);
	if (r == NULL)
		return CTL_EXIT_ERROR;
	int rv = CTL_EXIT_OK;
	if (r->type == REDIS_REPLY_ERROR) {
		ctl_error("node %s: %s: %s%s", addr, argv[0], r->str,
			  invalid_hint(argv[0], r->str));
		rv = CTL_EXIT_ERROR;
	} else if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0) {
		ctl_error("node %s: %s: unexpected reply", addr, argv[0]);
		rv = CTL_EXIT_ERROR;
	} else {
		printf("%s\n", done);
	}
	freeReplyObject(r);
	return rv;
}

/* A node id argument: a positive decimal. */
static bool parse_id(const char *s, uint64_t *id)
{
	return ctl_parse_u64(s, id) && *id > 0;
}

static bool valid_addr(const char *s)
{
	char host[CTL_ADDR_MAX];
	int port;
	return ctl_split_addr(s, host, sizeof host, &port) == 0;
}

/* `field` of the BATON.NODE reply `r` into `out`, "" when absent. */
static void node_field(const redisReply *r, const char *field, char *out,
		       size_t len)
{
	if (r == NULL || !ctl_map_str(r, field, out, len))
		out[0] = '\0';
}

static bool same_port(const char *a, const char *b)
{
	char host[CTL_ADDR_MAX];
	int pa, pb;
	return ctl_split_addr(a, host, sizeof host, &pa) != 0 ||
	       ctl_split_addr(b, host, sizeof host, &pb) != 0 || pa == pb;
}

/* Before the leader is asked: the node at CLIENT_ADDR must be node ID of
 * this cluster, listening for peers on PEER_ADDR's port (the host may be
 * a name or a wildcard it listens on). Swapped addresses, a wrong id,
 * another cluster id, password or cluster would add a member that never
 * catches up, with nothing saying why. A node that does not answer yet
 * is added anyway (it may be started afterwards), with a warning. */
static int check_joiner(const struct ctl_opts *o, uint64_t id,
			const char *peer_addr, const char *client_addr)
{
	char err[CTL_ERR_MAX], here[CTL_ADDR_MAX], v[CTL_ERR_MAX];
	char want[CTL_VALUE_MAX], got[CTL_VALUE_MAX];
	redisReply *j =
		ctl_ask_cmd(o, client_addr, "BATON.NODE", err, sizeof err);
	if (j == NULL && strncmp(err, "cannot connect", 14) == 0) {
		fprintf(stderr,
			"batonctl: warning: nothing answers at %s (%s); "
			"adding node %" PRIu64 " anyway: start it there with "
			"--join and --id %" PRIu64 "\n",
			client_addr, err, id, id);
		return CTL_EXIT_OK;
	}
	if (j == NULL && strncmp(err, "AUTH failed", 11) == 0) {
		ctl_error("add: node %" PRIu64 " at %s refuses the password "
			  "(%s): every node needs the cluster's password, the "
			  "one given with -a",
			  id, client_addr, err);
		return CTL_EXIT_ERROR;
	}
	if (j == NULL || !ctl_map_valid(j)) {
		ctl_error("add: %s does not answer as the client port of a "
			  "baton node (%s): is it the peer port? The order is "
			  "ID PEER_ADDR CLIENT_ADDR",
			  client_addr,
			  j == NULL ? err : "not a BATON.NODE map");
		freeReplyObject(j);
		return CTL_EXIT_ERROR;
	}
	int rv = CTL_EXIT_ERROR;
	uint64_t its_id = 0;
	ctl_opts_addr(o, here, sizeof here);
	redisReply *self = ctl_ask_cmd(o, here, "BATON.NODE", err, sizeof err);
	if (!ctl_map_u64(j, "id", &its_id) || its_id != id) {
		ctl_error("add: the node at %s is node %" PRIu64
			  ", not %" PRIu64
			  ": add it under its own id (its --id)",
			  client_addr, its_id, id);
		goto out;
	}
	node_field(j, "peer_addr", v, sizeof v);
	if (v[0] != '\0' && !same_port(v, peer_addr)) {
		ctl_error("add: node %" PRIu64 " listens for peers on %s, not "
			  "on %s: give its --peer-listen port",
			  id, v, peer_addr);
		goto out;
	}
	node_field(self, "cluster_id", want, sizeof want);
	node_field(j, "cluster_id", got, sizeof got);
	if (want[0] != '\0' && got[0] != '\0' && strcmp(want, got) != 0) {
		ctl_error("add: node %" PRIu64 " runs with --cluster-id '%s', "
			  "this cluster is '%s': restart it with --cluster-id "
			  "%s",
			  id, got, want, want);
		goto out;
	}
	node_field(self, "cluster_uuid", want, sizeof want);
	node_field(j, "cluster_uuid", got, sizeof got);
	if (got[0] != '\0' && strcmp(got, "-") != 0 && strcmp(want, got) != 0) {
		ctl_error("add: node %" PRIu64 " holds data of another cluster "
			  "(uuid %s; this one is %s): a new member starts on "
			  "an empty data directory with --join",
			  id, got, want[0] != '\0' ? want : "not known");
		goto out;
	}
	rv = CTL_EXIT_OK;
out:
	freeReplyObject(self);
	freeReplyObject(j);
	return rv;
}

int ctl_cmd_add(const struct ctl_opts *o, const struct ctl_args *a)
{
	uint64_t id;
	assert(a->n_positional == 3);
	const char *const *arg = a->positional;
	if (!parse_id(arg[0], &id))
		return ctl_usage_error("add: bad node id '%s'", arg[0]);
	for (int i = 1; i < 3; i++)
		if (!valid_addr(arg[i]))
			return ctl_usage_error("add: '%s' is not host:port",
					       arg[i]);
	int rv = check_joiner(o, id, arg[1], arg[2]);
	if (rv != CTL_EXIT_OK)
		return rv;
	const char *cmd[] = {"BATON.ADD", arg[0], arg[1], arg[2]};
	char done[128];
	snprintf(done, sizeof done, "node %" PRIu64 " added as a learner", id);
	return leader_call(o, 4, cmd, done);
}

/* promote, remove and transfer: one optional or required id (`id_arg`, or
 * NULL); `what` ends the message printed on success, after "node <id> "
 * if there is an id. */
static int id_command(const struct ctl_opts *o, const char *id_arg,
		      const char *name, const char *cmd, const char *what)
{
	uint64_t id = 0;
	if (id_arg != NULL && !parse_id(id_arg, &id))
		return ctl_usage_error("%s: bad node id '%s'", name, id_arg);
	char done[128];
	if (id_arg != NULL)
		snprintf(done, sizeof done, "node %" PRIu64 " %s", id, what);
	else
		snprintf(done, sizeof done, "%s", what);
	const char *args[] = {cmd, id_arg};
	return leader_call(o, id_arg != NULL ? 2 : 1, args, done);
}

int ctl_cmd_promote(const struct ctl_opts *o, const struct ctl_args *a)
{
	assert(a->n_positional == 1);
	return id_command(o, a->positional[0], "promote", "BATON.PROMOTE",
			  "is now a voter");
}

int ctl_cmd_remove(const struct ctl_opts *o, const struct ctl_args *a)
{
	assert(a->n_positional == 1);
	return id_command(o, a->positional[0], "remove", "BATON.REMOVE",
			  "removed");
}

int ctl_cmd_transfer(const struct ctl_opts *o, const struct ctl_args *a)
{
	assert(a->n_positional <= 1);
	const char *id = a->n_positional == 1 ? a->positional[0] : NULL;
	return id_command(o, id, "transfer", "BATON.TRANSFER",
			  id != NULL ? "leads now" : "leadership transferred");
}

/* ---- members: the given node's view, as a table -------------------------- */

int ctl_cmd_members(const struct ctl_opts *o, const struct ctl_args *a)
{
	assert(a->n_positional == 0);
	char addr[CTL_ADDR_MAX];
	ctl_opts_addr(o, addr, sizeof addr);
	struct ctl_conn c;
	const char *cmd[] = {"BATON.MEMBERS"};
	redisReply *r = NULL;
	if (ctl_conn_open(&c, o, addr) == 0)
		r = ctl_conn_call(&c, 1, cmd);
	if (r == NULL)
		ctl_error("node %s: %s", addr, c.err);
	ctl_conn_close(&c);
	if (r == NULL)
		return CTL_EXIT_ERROR;
	int rv = CTL_EXIT_OK;
	if (r->type == REDIS_REPLY_ERROR) {
		ctl_error("node %s: BATON.MEMBERS: %s", addr, r->str);
		rv = CTL_EXIT_ERROR;
	} else if (r->type != REDIS_REPLY_ARRAY ||
		   r->elements > CTL_MEMBERS_MAX) {
		ctl_error("node %s: BATON.MEMBERS: unexpected reply", addr);
		rv = CTL_EXIT_ERROR;
	}
	/* The versions as the asked node knows them (the leader: live). */
	static const char *const header[] = {
		"ID",	 "ROLE",    "PEER_ADDR",   "CLIENT_ADDR",
		"MATCH", "RELEASE", "MACHINE_MAX", "VERSIONS"};
	static const char *const fields[] = {
		"id",	 "role",    "peer_addr",   "client_addr",
		"match", "release", "machine_max", "versions"};
	enum { N_FIELDS = sizeof fields / sizeof fields[0] };
	static struct ctl_table t;
	ctl_table_init(&t, N_FIELDS, header);
	for (size_t i = 0; rv == CTL_EXIT_OK && i < r->elements; i++) {
		const redisReply *m = r->element[i];
		if (!ctl_map_valid(m)) {
			ctl_error("node %s: BATON.MEMBERS: member %zu is "
				  "malformed",
				  addr, i);
			rv = CTL_EXIT_ERROR;
			break;
		}
		bool ok = ctl_table_row(&t);
		assert(ok);
		(void)ok;
		for (size_t f = 0; f < N_FIELDS; f++) {
			char v[CTL_CELL_MAX];
			if (!ctl_map_str(m, fields[f], v, sizeof v) ||
			    v[0] == '\0')
				snprintf(v, sizeof v, "-");
			ctl_table_set(&t, f, "%s", v);
		}
	}
	freeReplyObject(r);
	if (rv == CTL_EXIT_OK)
		ctl_table_print(&t);
	return rv;
}
