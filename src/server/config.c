/*
 * batond's options (docs/batond.md): gathered from a config file, the
 * environment and the flags, in that order, so that flags win over the
 * environment and the environment over the file; then checked together.
 * Every refusal is one line on stderr naming the option as it was given,
 * and batond exits 2.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "baton/assert.h"
#include "config_internal.h"
#include "log.h"
#include "relay_auth.h"

/* getopt_long's value of option i of config_options[]. */
#define FLAG_BASE 0x100
#define FLAG_VERSION 0x1ff
#define FLAG_OPTIONS_MAX 64

/* Where the Raft timing came from, to name it if the two do not fit. */
struct timing_origins {
	char heartbeat[CONFIG_ORIGIN_MAX];
	char election[CONFIG_ORIGIN_MAX];
};

/* Sets one option and remembers where the timing came from. */
static int apply(struct server_config *c, struct timing_origins *t,
		 const struct config_origin *o)
{
	if (config_set(c, o) != 0)
		return -1;
	if (strcmp(o->name, "heartbeat-ms") == 0)
		config_origin_text(o, t->heartbeat, sizeof t->heartbeat);
	else if (strcmp(o->name, "election-timeout-ms") == 0)
		config_origin_text(o, t->election, sizeof t->election);
	return 0;
}

/* An unknown name: the error, with the nearest option as a hint. */
static int unknown(const char *what, const char *name, const char *prefix)
{
	if (strcmp(name, "peer-secret") == 0) {
		fprintf(stderr,
			"batond: %s: there is no %speer-secret: a secret "
			"given as a value shows in ps and in the environment "
			"of the process; put it in a file (mode 0600) and "
			"give %speer-secret-file PATH\n",
			what, prefix, prefix);
		return -1;
	}
	const struct config_option *near = config_option_nearest(name);
	if (near != NULL)
		fprintf(stderr,
			"batond: %s: unknown %s (did you mean %s%s? "
			"batond --help lists them)\n",
			what, prefix[0] ? "option" : "key", prefix, near->name);
	else
		fprintf(stderr,
			"batond: %s: unknown %s (batond --help lists "
			"them)\n",
			what, prefix[0] ? "option" : "key");
	return -1;
}

/* The key and value of one config file line, split in place; the key is
 * NULL for a blank line or a comment. */
static void split_line(char *line, char **key, char **value)
{
	line[strcspn(line, "\r\n")] = '\0';
	char *k = line + strspn(line, " \t");
	if (*k == '\0' || *k == '#') {
		*key = NULL;
		return;
	}
	char *v = k + strcspn(k, " \t");
	if (*v != '\0')
		*v++ = '\0';
	v += strspn(v, " \t");
	size_t n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		v[--n] = '\0';
	*key = k;
	*value = v;
}

static int file_line(struct server_config *c, struct timing_origins *t,
		     const char *path, int lineno, char *line)
{
	char *k, *v;
	split_line(line, &k, &v);
	if (k == NULL)
		return 0;
	struct config_origin o = {CONFIG_FROM_FILE, k, v, path, lineno};
	const struct config_option *opt = config_option_find(k);
	char where[CONFIG_ORIGIN_MAX];
	if (opt == NULL) {
		snprintf(where, sizeof where, "%s:%d: %s", path, lineno, k);
		return unknown(where, k, "");
	}
	if (strcmp(k, "config") == 0)
		return config_refuse(&o, "a config file cannot name another "
					 "(give --config once)");
	if (opt->arg != NULL && v[0] == '\0')
		return config_refuse(&o, "needs a value: %s %s", k, opt->arg);
	return apply(c, t, &o);
}

static int read_config_file(struct server_config *c, struct timing_origins *t,
			    const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "batond: --config %s: cannot read it: %s\n",
			path, strerror(errno));
		return -1;
	}
	char line[CONFIG_LINE_MAX];
	int lineno = 0, rv = 0;
	while (rv == 0 && fgets(line, sizeof line, f) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			fprintf(stderr,
				"batond: %s:%d: line longer than %d bytes\n",
				path, lineno, CONFIG_LINE_MAX - 2);
			rv = -1;
			break;
		}
		rv = file_line(c, t, path, lineno, line);
	}
	fclose(f);
	return rv;
}

/* BATON_<NAME> of every option set and not empty. */
static int read_environment(struct server_config *c, struct timing_origins *t)
{
	for (size_t i = 0; i < config_n_options; i++) {
		const struct config_option *opt = &config_options[i];
		char env[128];
		const char *v =
			getenv(config_env_name(opt->name, env, sizeof env));
		if (v == NULL || v[0] == '\0' ||
		    strcmp(opt->name, "config") == 0)
			continue;
		struct config_origin o = {CONFIG_FROM_ENV, opt->name, v, NULL,
					  0};
		if (apply(c, t, &o) != 0)
			return -1;
	}
	return 0;
}

/* One flag as getopt_long found it. */
struct flag {
	const struct config_option *opt;
	const char *value; /* NULL for a switch */
};

static void long_options(struct option *out)
{
	size_t i;
	for (i = 0; i < config_n_options; i++)
		out[i] = (struct option){
			config_options[i].name,
			config_options[i].arg ? required_argument : no_argument,
			NULL, FLAG_BASE + (int)i};
	out[i++] = (struct option){"help", no_argument, NULL, 'h'};
	out[i++] = (struct option){"version", no_argument, NULL, FLAG_VERSION};
	out[i] = (struct option){NULL, 0, NULL, 0};
}

/* The argument getopt_long just read an option from. */
static const char *option_token(char **argv)
{
	const char *last = argv[optind - 1];
	bool joined = optarg != NULL && optarg > last &&
		      optarg <= last + strlen(last);
	return optarg != NULL && !joined ? argv[optind - 2] : last;
}

/* Refuses what getopt_long could not read; returns -1. */
static int bad_flag(int got, char **argv)
{
	const char *last = argv[optind - 1];
	if (optopt >= FLAG_BASE && optopt < FLAG_BASE + (int)config_n_options) {
		const struct config_option *opt =
			&config_options[optopt - FLAG_BASE];
		if (got == ':')
			fprintf(stderr, "batond: --%s needs a value: --%s %s\n",
				opt->name, opt->name, opt->arg);
		else
			fprintf(stderr,
				"batond: %s: --%s is a switch and takes no "
				"value (in a config file: '%s on' or '%s "
				"off')\n",
				last, opt->name, opt->name, opt->name);
		return -1;
	}
	if (optopt != 0 || strncmp(last, "--", 2) != 0) {
		fprintf(stderr,
			"batond: %s: unknown option (batond --help lists "
			"them)\n",
			last);
		return -1;
	}
	char name[128];
	snprintf(name, sizeof name, "%.*s", (int)strcspn(last + 2, "="),
		 last + 2);
	return unknown(last, name, "--");
}

/* Reads argv into flags (at most argc). Returns the number of flags, or
 * -1 after an error, or -2 after --help. */
static int read_flags(int argc, char **argv, struct flag *flags, bool *version)
{
	struct option opts[FLAG_OPTIONS_MAX + 3];
	BATON_ASSERT(config_n_options <= FLAG_OPTIONS_MAX);
	long_options(opts);
	int n = 0, got;
	optind = 0; /* glibc: start over (unit tests parse many times) */
	opterr = 0;
	while ((got = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		if (got == 'h') {
			config_usage(stdout);
			return -2;
		}
		if (got == FLAG_VERSION) {
			*version = true;
			continue;
		}
		if (got == '?' || got == ':')
			return bad_flag(got, argv);
		const struct config_option *opt =
			&config_options[got - FLAG_BASE];
		/* getopt_long takes any unambiguous beginning of a name;
		 * baton wants the whole name, as in the file and the
		 * environment, so that a new option never changes what an
		 * old command line means. */
		const char *token = option_token(argv);
		size_t len = strlen(opt->name);
		if (strncmp(token + 2, opt->name, len) != 0 ||
		    (token[2 + len] != '\0' && token[2 + len] != '=')) {
			char name[128];
			snprintf(name, sizeof name, "%.*s",
				 (int)strcspn(token + 2, "="), token + 2);
			return unknown(token, name, "--");
		}
		if (optarg != NULL && strncmp(optarg, "--", 2) == 0 &&
		    token != argv[optind - 1] &&
		    config_option_find(optarg + 2) != NULL) {
			fprintf(stderr,
				"batond: --%s needs a value: --%s %s (found "
				"the option %s)\n",
				opt->name, opt->name, opt->arg, optarg);
			return -1;
		}
		flags[n++] = (struct flag){opt, optarg};
	}
	if (optind < argc) {
		fprintf(stderr,
			"batond: unexpected argument '%s' (options start with "
			"--; batond --help lists them)\n",
			argv[optind]);
		return -1;
	}
	return n;
}

static void set_defaults(struct server_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->cluster_id, sizeof c->cluster_id, "baton");
	c->max_clients = SERVER_MAX_CLIENTS_DEFAULT;
	c->max_bulk_bytes = RESP_BULK_BYTES_MAX_DEFAULT;
	c->max_value_bytes = SERVER_VALUE_BYTES_MAX_DEFAULT;
	c->max_request_bytes = RESP_REQUEST_BYTES_MAX_DEFAULT;
	c->max_client_output_bytes = SERVER_CLIENT_OUTPUT_MAX_DEFAULT;
	c->max_total_output_bytes = SERVER_TOTAL_OUTPUT_MAX_DEFAULT;
	c->snapshot_entries = 100000;
	c->wal_segment_bytes = SERVER_WAL_SEGMENT_BYTES_DEFAULT;
	c->log_level = BATON_LOG_INFO;
	baton_log_set_format(BATON_LOG_TEXT);
	c->profile = *baton_release_current();
	c->machine_upgrade = BATON_UPGRADE_ALL;
	c->election_policy = BATON_ELECTION_VERSION_AWARE;
	c->max_clock_offset_ms = SERVER_MAX_CLOCK_OFFSET_MS_DEFAULT;
}

/* The config file (the last --config, else BATON_CONFIG), then the
 * environment, then the flags in order. */
static int gather(struct server_config *c, struct timing_origins *t,
		  const struct flag *flags, int n)
{
	const char *file = getenv("BATON_CONFIG");
	if (file != NULL && file[0] == '\0')
		file = NULL;
	for (int i = 0; i < n; i++)
		if (strcmp(flags[i].opt->name, "config") == 0)
			file = flags[i].value;
	if (file != NULL && read_config_file(c, t, file) != 0)
		return -1;
	if (read_environment(c, t) != 0)
		return -1;
	for (int i = 0; i < n; i++) {
		struct config_origin o = {CONFIG_FROM_FLAG, flags[i].opt->name,
					  flags[i].value, NULL, 0};
		if (strcmp(o.name, "config") != 0 && apply(c, t, &o) != 0)
			return -1;
	}
	return 0;
}

/* The core's defaults for the timings not given, written into c: every
 * timer of the server reads these, and none may take an unset 0 for "no
 * time" (the leader's /health once called every member down, and writes
 * parked for an election gave up at once, with the default timings). */
static void timing_defaults(struct server_config *c)
{
	struct baton_raft_options d;
	baton_raft_options_default(&d);
	if (c->election_timeout_ms == 0)
		c->election_timeout_ms = d.election_timeout_ms;
	if (c->heartbeat_ms == 0)
		c->heartbeat_ms = d.heartbeat_interval_ms;
}

/* A heartbeat must come well within an election timeout, or followers
 * stand for election between two heartbeats of a healthy leader. */
static int timing_fits(const struct server_config *c,
		       const struct timing_origins *t)
{
	uint32_t election = c->election_timeout_ms;
	uint32_t heartbeat = c->heartbeat_ms;
	if ((uint64_t)heartbeat * 2 < election)
		return 0;
	if (t->heartbeat[0] != '\0')
		fprintf(stderr,
			"batond: %s: must be below --election-timeout-ms / 2 "
			"(%u%s, so at most %u)\n",
			t->heartbeat, election,
			t->election[0] != '\0' ? "" : " by default",
			(election - 1) / 2);
	else
		fprintf(stderr,
			"batond: %s: must be above twice --heartbeat-ms "
			"(%u by default, so at least %u)\n",
			t->election, heartbeat, 2 * heartbeat + 1);
	return -1;
}

/* Whether DIR holds a node's state: its identity, term and vote, a
 * snapshot or a log segment (docs/storage.md, "The data directory"). */
static bool data_dir_has_state(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL) /* missing: created empty at start; unreadable: */
		return errno != ENOENT; /* the storage says why at start */
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d)) != NULL)
		found = strcmp(e->d_name, "identity") == 0 ||
			strcmp(e->d_name, "meta") == 0 ||
			strcmp(e->d_name, "snapshot") == 0 ||
			strncmp(e->d_name, "wal-", 4) == 0;
	closedir(d);
	return found;
}

/* A node with no state and no way to get one would wait forever. */
static int has_a_start(const struct server_config *c)
{
	if (c->restore[0] != '\0' && c->n_founders != 1) {
		fprintf(stderr,
			"batond: --restore FILE founds a new one-member "
			"cluster from a backup: give it --bootstrap with this "
			"node alone (ID=PEER/CLIENT), then add the other "
			"members with --join and `batonctl add` "
			"(docs/backup.md)\n");
		return -1;
	}
	if (c->n_founders > 0 || c->join || data_dir_has_state(c->data_dir))
		return 0;
	fprintf(stderr,
		"batond: --data %s holds no state, and neither --bootstrap "
		"nor --join was given, so this node could never become a "
		"member: pass --bootstrap ID=PEER/CLIENT,... (the same list "
		"on every founding node) to found a new cluster, or --join "
		"(or --join-seeds HOST:PORT,...) to join a running one\n",
		c->data_dir);
	return -1;
}

/* Listening addresses are resolved once, here, so a name that does not
 * resolve refuses the start before anything is written; the founders'
 * and the relay's addresses are checked (they are resolved at every
 * connection). */
static int addresses(const struct server_config *c)
{
	char why[BATON_ADDR_WHY_MAX];
	struct sockaddr_storage ss;
	if (baton_parse_addr(c->listen, why, sizeof why) != 0 ||
	    baton_addr_resolve(c->listen, &ss, why, sizeof why) != 0) {
		fprintf(stderr, "batond: --listen: %s\n", why);
		return -1;
	}
	if (baton_parse_addr(c->peer_listen, why, sizeof why) != 0 ||
	    baton_addr_resolve(c->peer_listen, &ss, why, sizeof why) != 0) {
		fprintf(stderr, "batond: --peer-listen: %s\n", why);
		return -1;
	}
	for (uint32_t i = 0; i < c->n_founders; i++)
		if (baton_parse_addr(c->founder_peer[i], why, sizeof why) !=
			    0 ||
		    baton_parse_addr(c->founder_client[i], why, sizeof why) !=
			    0) {
			fprintf(stderr,
				"batond: --bootstrap: node %" PRIu64 ": %s\n",
				c->founders[i], why);
			return -1;
		}
	if (c->metrics[0] != '\0' &&
	    (baton_parse_addr(c->metrics, why, sizeof why) != 0 ||
	     baton_addr_resolve(c->metrics, &ss, why, sizeof why) != 0)) {
		fprintf(stderr, "batond: --metrics: %s\n", why);
		return -1;
	}
	if (c->relay[0] != '\0' &&
	    baton_parse_addr(c->relay, why, sizeof why) != 0) {
		fprintf(stderr, "batond: --relay: %s\n", why);
		return -1;
	}
	return 0;
}

/* Read the peer secret, and refuse to listen for peers beyond this host
 * without one unless told --insecure-peers. */
static int peer_security(struct server_config *c)
{
	if (c->peer_secret_file[0] != '\0') {
		char err[1536];
		if (baton_peer_secret_load(c->peer_secret_file, &c->peer_secret,
					   err, sizeof err) != 0) {
			fprintf(stderr, "batond: %s\n", err);
			return -1;
		}
		c->has_peer_secret = true;
		return 0;
	}
	if (c->insecure_peers ||
	    baton_parse_addr(c->peer_listen, NULL, 0) != 0 ||
	    baton_addr_is_loopback(c->peer_listen))
		return 0; /* a bad address is the transport's to report */
	fprintf(stderr,
		"batond: --peer-listen %s is not a loopback address and this "
		"node has no peer secret: anyone who reaches that port could "
		"speak for a member. Give every node the same "
		"--peer-secret-file PATH (head -c 32 /dev/urandom > PATH; "
		"chmod 600 PATH), or --insecure-peers to run without one\n",
		c->peer_listen);
	return -1;
}

/* --relay-secret-file (docs/relay-server.md "Authentication"): read with
 * the relay's reader (a regular file, refused before it is opened
 * otherwise: a FIFO would block), which then applies the peer secret's
 * rules. */
static int relay_secret(struct server_config *c)
{
	if (c->relay_secret_file[0] == '\0')
		return 0;
	if (c->relay[0] == '\0') {
		fprintf(stderr, "batond: --relay-secret-file needs --relay "
				"HOST:PORT\n");
		return -1;
	}
	char err[1536];
	if (relay_secret_load(c->relay_secret_file, &c->relay_secret, err,
			      sizeof err) != 0) {
		fprintf(stderr, "batond: --relay-secret-file: %s\n", err);
		return -1;
	}
	c->has_relay_secret = true;
	return 0;
}

/* The migration's flags (docs/relay.md): a cluster cannot import from
 * itself, and an import needs the relay. */
static int relay_options(struct server_config *c)
{
	if (relay_secret(c) != 0)
		return -1;
	if (c->relay_cluster[0] == '\0')
		snprintf(c->relay_cluster, sizeof c->relay_cluster, "%s",
			 c->cluster_id);
	if (c->relay[0] == '\0' &&
	    (c->migrate_from[0] != '\0' || c->migrate_to[0] != '\0' ||
	     strcmp(c->relay_cluster, c->cluster_id) != 0)) {
		fprintf(stderr, "batond: --migrate-from, --migrate-to and "
				"--relay-cluster need --relay HOST:PORT\n");
		return -1;
	}
	bool migrates = c->migrate_from[0] != '\0' || c->migrate_to[0] != '\0';
	if (migrates && c->migration_secret_file[0] == '\0') {
		fprintf(stderr,
			"batond: --migrate-from and --migrate-to need "
			"--migration-secret-file PATH, the same file on every "
			"node of both clusters (head -c 32 /dev/urandom > "
			"PATH; chmod 600 PATH): every migration message is "
			"sealed with it, so that nobody else at the relay "
			"can read, forge or replay one (docs/relay.md)\n");
		return -1;
	}
	if (c->migration_secret_file[0] != '\0') {
		char err[1536];
		if (baton_secret_file_load(
			    c->migration_secret_file, "migration secret",
			    &c->migration_secret, err, sizeof err) != 0) {
			fprintf(stderr, "batond: %s\n", err);
			return -1;
		}
		c->has_migration_secret = true;
	}
	if (c->has_unsealed_release && c->migrate_from[0] == '\0') {
		fprintf(stderr, "batond: --migrate-from-unsealed RELEASE names "
				"the release of the cluster this node imports "
				"from: it needs --migrate-from NAME (a new "
				"node)\n");
		return -1;
	}
	if (c->migrate_from[0] != '\0' && c->migrate_to[0] != '\0') {
		fprintf(stderr, "batond: --migrate-from (the new side) and "
				"--migrate-to (the old side) exclude each "
				"other\n");
		return -1;
	}
	if (c->migrate_to[0] != '\0' &&
	    strcmp(c->migrate_to, c->relay_cluster) == 0) {
		fprintf(stderr,
			"batond: --migrate-to %s names this node's own "
			"cluster\n",
			c->migrate_to);
		return -1;
	}
	if (c->migrate_from[0] != '\0' &&
	    strcmp(c->migrate_from, c->relay_cluster) == 0) {
		fprintf(stderr,
			"batond: --migrate-from %s names this node's own "
			"cluster: the new cluster needs another id at the "
			"relay (--relay-cluster or --cluster-id)\n",
			c->migrate_from);
		return -1;
	}
	return 0;
}

int server_config_parse(struct server_config *c, int argc, char **argv)
{
	set_defaults(c);
	struct flag *flags = calloc((size_t)argc + 1, sizeof *flags);
	if (flags == NULL) {
		fprintf(stderr, "batond: out of memory\n");
		return -1;
	}
	bool version = false;
	struct timing_origins *t = calloc(1, sizeof *t);
	int n = t != NULL ? read_flags(argc, argv, flags, &version) : -1;
	int rv = n == -2 ? 1 : n < 0 ? -1 : gather(c, t, flags, n);
	free(flags);
	if (rv != 0 || version) {
		if (rv == 0)
			config_print_version(c);
		free(t);
		return rv != 0 ? rv : 1;
	}
	timing_defaults(c);
	rv = timing_fits(c, t);
	free(t);
	if (rv != 0)
		return -1;
	const char *missing = c->id == 0	     ? "--id N"
			      : c->listen[0] == '\0' ? "--listen HOST:PORT"
			      : c->peer_listen[0] == '\0'
				      ? "--peer-listen HOST:PORT"
			      : c->data_dir[0] == '\0' ? "--data DIR"
						       : NULL;
	if (missing != NULL) {
		fprintf(stderr,
			"batond: %s is required (a flag, the config file or "
			"the environment; batond --help)\n",
			missing);
		return -1;
	}
	if (addresses(c) != 0 || peer_security(c) != 0 || relay_options(c) != 0)
		return -1;
	if (c->join && c->n_founders > 0) {
		fprintf(stderr, "batond: --join and --bootstrap exclude each "
				"other: --bootstrap founds a new cluster, "
				"--join joins a running one\n");
		return -1;
	}
	bool founder = false;
	for (uint32_t i = 0; i < c->n_founders; i++)
		founder = founder || c->founders[i] == c->id;
	if (c->n_founders > 0 && !founder) {
		fprintf(stderr,
			"batond: --bootstrap must list this node (--id %" PRIu64
			")\n",
			c->id);
		return -1;
	}
	return has_a_start(c);
}
