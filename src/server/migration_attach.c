/*
 * BATON.MIGRATION ATTACH (docs/relay.md "Attaching a running old node"):
 * a node running without --relay joins a migration as an old node without
 * a restart. It takes what --relay, --relay-cluster, --migrate-to,
 * --migration-secret-file and --relay-secret-file would have given, the
 * secrets as file paths that batond reads with the readers of those flags
 * (a secret never travels in the command), and starts the relay client.
 * Not kept across a restart: the flags do that.
 */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "migration_internal.h"
#include "relay_auth.h"

/* An identifier the relay protocol carries: 1..255 bytes, no control
 * byte (docs/relay-protocol.md "Conventions"). */
static bool relay_identifier(const struct command_ctx *x, int i)
{
	if (x->lens[i] == 0 || x->lens[i] > MIG_CLUSTER_MAX)
		return false;
	for (size_t k = 0; k < x->lens[i]; k++)
		if (x->argv[i][k] < 0x20 || x->argv[i][k] == 0x7f)
			return false;
	return true;
}

static int refuse(struct command_ctx *x, const char *text)
{
	resp_error(command_out(x), "ERR %s", text);
	return command_done(x);
}

/* What ATTACH sets, to undo it when the start fails. */
struct attach_saved {
	char relay[sizeof((struct server_config *)0)->relay];
	char relay_cluster[sizeof((struct server_config *)0)->relay_cluster];
};

static void restore(struct server_config *c, const struct attach_saved *was)
{
	baton_peer_secret_wipe(&c->migration_secret);
	baton_peer_secret_wipe(&c->relay_secret);
	memcpy(c->relay, was->relay, sizeof c->relay);
	memcpy(c->relay_cluster, was->relay_cluster, sizeof c->relay_cluster);
	c->migrate_to[0] = '\0';
	c->migration_secret_file[0] = '\0';
	c->relay_secret_file[0] = '\0';
	c->has_migration_secret = false;
	c->has_relay_secret = false;
}

/* Read the secret files named at arguments 5 and 6 (if given) into c,
 * with the readers of --migration-secret-file and --relay-secret-file. */
static int load_secrets(struct command_ctx *x, struct server_config *c,
			char *err, size_t cap)
{
	command_arg_str(x, 5, c->migration_secret_file,
			sizeof c->migration_secret_file);
	if (baton_secret_file_load(c->migration_secret_file, "migration secret",
				   &c->migration_secret, err, cap) != 0)
		return -1;
	c->has_migration_secret = true;
	if (x->argc < 7)
		return 0;
	command_arg_str(x, 6, c->relay_secret_file,
			sizeof c->relay_secret_file);
	if (relay_secret_load(c->relay_secret_file, &c->relay_secret, err,
			      cap) != 0)
		return -1;
	c->has_relay_secret = true;
	return 0;
}

int migration_attach(struct command_ctx *x)
{
	struct server *s = x->s;
	struct server_config *c = &s->cfg;
	char why[1536];
	if (x->argc != 6 && x->argc != 7)
		return refuse(x, "usage: BATON.MIGRATION ATTACH <relay "
				 "host:port> <relay cluster> <migrate-to "
				 "cluster> <migration secret file> [<relay "
				 "secret file>]");
	if (s->migration != NULL) {
		snprintf(why, sizeof why,
			 "this node already takes part in a migration (relay "
			 "%s): attach is for a node started without --relay",
			 c->relay);
		return refuse(x, why);
	}
	if (s->shutting_down || s->node == NULL)
		return refuse(x, "this node is not running");
	struct baton_release since = baton_release_migration_since();
	if (baton_release_compare(c->profile.release, since) < 0) {
		char r[BATON_RELEASE_STR_MAX], need[BATON_RELEASE_STR_MAX];
		snprintf(why, sizeof why,
			 "this node runs release %s, which has no relay "
			 "client: a relay migration needs %s or later "
			 "(batonctl roll first)",
			 baton_release_format(c->profile.release, r),
			 baton_release_format(since, need));
		return refuse(x, why);
	}
	char addr[sizeof c->relay];
	command_arg_str(x, 2, addr, sizeof addr);
	char addr_why[320];
	if (x->lens[2] >= sizeof addr)
		return refuse(x, "the relay address is too long");
	if (baton_parse_addr(addr, addr_why, sizeof addr_why) != 0) {
		snprintf(why, sizeof why, "relay address: %s", addr_why);
		return refuse(x, why);
	}
	if (!relay_identifier(x, 3) || !relay_identifier(x, 4))
		return refuse(x, "a cluster id is 1 to 255 bytes without "
				 "control bytes");
	if (x->lens[3] == x->lens[4] &&
	    memcmp(x->argv[3], x->argv[4], x->lens[3]) == 0)
		return refuse(x, "the migrate-to cluster is this node's own "
				 "relay cluster");
	if (x->lens[5] >= sizeof c->migration_secret_file ||
	    (x->argc == 7 && x->lens[6] >= sizeof c->relay_secret_file))
		return refuse(x, "a secret file's path is too long");
	struct attach_saved was;
	memcpy(was.relay, c->relay, sizeof was.relay);
	memcpy(was.relay_cluster, c->relay_cluster, sizeof was.relay_cluster);
	snprintf(c->relay, sizeof c->relay, "%s", addr);
	command_arg_str(x, 3, c->relay_cluster, sizeof c->relay_cluster);
	command_arg_str(x, 4, c->migrate_to, sizeof c->migrate_to);
	if (load_secrets(x, c, why, sizeof why) != 0) {
		restore(c, &was);
		return refuse(x, why);
	}
	int rv = migration_start(s);
	if (rv != 0) {
		restore(c, &was);
		snprintf(why, sizeof why,
			 "the relay client could not start: %s",
			 baton_strerror(rv));
		return refuse(x, why);
	}
	LOG_WARN("migration: attached by a client to relay %s as node %llu of "
		 "cluster %s, exporting to cluster %s only (not kept across a "
		 "restart: give the flags for that)",
		 c->relay, (unsigned long long)c->id, c->relay_cluster,
		 c->migrate_to);
	resp_simple(command_out(x), "OK");
	return command_done(x);
}
