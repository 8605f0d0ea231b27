/*
 * baton-relay: the process both clusters of a migration register with
 * (docs/relay.md, docs/relay-server.md). This file reads the flags; the
 * server is server.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "address.h"
#include "relay_auth.h"
#include "baton/assert.h"
#include "baton/errors.h"
#include "baton/version.h"
#include "log.h"
#include "server.h"

#define EXIT_USAGE 2

static void usage(FILE *out)
{
	fprintf(out,
		"usage: baton-relay --listen HOST:PORT --data DIR [options]\n"
		"\n"
		"Relays registration, views and opaque messages between the "
		"nodes of two\nclusters during a migration (docs/relay.md, "
		"docs/relay-server.md).\n"
		"\n"
		"  --listen HOST:PORT        address to listen on (IPv6: "
		"[::1]:PORT; a name is\n"
		"                            resolved once, at start)\n"
		"  --data DIR                existing directory for the state "
		"file (relay-state)\n"
		"  --activate                start active (kept in the state "
		"file); SIGUSR1\n"
		"                            activates and SIGUSR2 deactivates "
		"a running relay,\n"
		"                            as batonctl relay activate|"
		"deactivate do\n"
		"  --log-level L             error, warn, info (default) or "
		"debug\n"
		"  --handshake-timeout-ms N  close a connection without HELLO "
		"or STATUS this long\n"
		"                            after it connected (5000)\n"
		"  --idle-timeout-ms N       close a connection silent this "
		"long (30000)\n"
		"  --ping-interval-ms N      PING a connection after this long "
		"unsent (5000)\n"
		"  --forget-after-ms N       drop a node disconnected this "
		"long "
		"from the view\n"
		"                            (600000)\n"
		"  --queue-messages-max N    DATA queued to one node before it "
		"is disconnected\n"
		"                            as OVERLOADED (65536)\n"
		"  --queue-bytes-max N       bytes of all frames queued to one "
		"node (268435456)\n"
		"  --max-connections N       connections at once (1024); past "
		"it a newcomer\n"
		"                            evicts the oldest not registered "
		"one\n"
		"  --max-unregistered-per-address N\n"
		"                            connections not registered "
		"(before "
		"HELLO, monitors)\n"
		"                            from one IP address (32); past it "
		"a "
		"newcomer evicts\n"
		"                            that address's oldest\n"
		"\n"
		"Authentication (docs/relay-server.md):\n"
		"  --cluster-secret NAME=FILE\n"
		"                            cluster NAME's relay secret (the "
		"file its nodes give\n"
		"                            as --relay-secret-file); "
		"repeatable. With any, a\n"
		"                            HELLO must carry a valid proof, "
		"and a cluster without\n"
		"                            a secret is refused. Without any, "
		"anyone who reaches\n"
		"                            the port can register as any node "
		"(warned at start)\n"
		"  --allow-open-clusters     with secrets, still admit "
		"clusters "
		"that have none\n"
		"                            without a proof\n"
		"  --open-cluster NAME       with secrets, admit cluster NAME "
		"(which has no\n"
		"                            secret) without a proof: the old "
		"cluster of a\n"
		"                            release whose nodes send none "
		"(1.3.0); repeatable\n"
		"                            (at most 8); warned at start\n"
		"  --proof-max-skew-ms N     refuse a proof whose time is this "
		"far from the relay's\n"
		"                            clock (60000)\n"
		"  --admin-secret-file FILE  take ACTIVATE/DEACTIVATE over the "
		"network from whoever\n"
		"                            proves this secret (batonctl "
		"relay); without it\n"
		"                            such requests are refused\n"
		"\n"
		"  --auto-deactivate-ms N    deactivate once a cluster holds "
		"write authority and\n"
		"                            no node of another cluster was "
		"registered for N ms\n"
		"                            (30000; 0: never)\n"
		"  --help, --version\n");
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "baton-relay: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(baton-relay --help lists the flags)\n");
	return EXIT_USAGE;
}

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min ||
	    v > max)
		return false;
	*out = v;
	return true;
}

/* The flags (getopt_long: "--name value" and "--name=value" alike). */
static const struct option relay_flags[] = {
	{"listen", required_argument, NULL, 'l'},
	{"data", required_argument, NULL, 'd'},
	{"log-level", required_argument, NULL, 'L'},
	{"handshake-timeout-ms", required_argument, NULL, 'H'},
	{"idle-timeout-ms", required_argument, NULL, 'I'},
	{"ping-interval-ms", required_argument, NULL, 'P'},
	{"forget-after-ms", required_argument, NULL, 'F'},
	{"queue-messages-max", required_argument, NULL, 'Q'},
	{"queue-bytes-max", required_argument, NULL, 'B'},
	{"activate", no_argument, NULL, 'a'},
	{"max-connections", required_argument, NULL, 'C'},
	{"max-unregistered-per-address", required_argument, NULL, 'U'},
	{"cluster-secret", required_argument, NULL, 'S'},
	{"allow-open-clusters", no_argument, NULL, 'O'},
	{"open-cluster", required_argument, NULL, 'o'},
	{"proof-max-skew-ms", required_argument, NULL, 'K'},
	{"admin-secret-file", required_argument, NULL, 'A'},
	{"auto-deactivate-ms", required_argument, NULL, 'D'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* The name of the flag whose getopt_long value is `val`. */
static const char *flag_name(int val)
{
	for (const struct option *o = relay_flags; o->name != NULL; o++)
		if (o->val == val)
			return o->name;
	return "?";
}

/* What getopt_long could not read: exit status 2 and one line. */
static int bad_flag(int got, char **argv)
{
	const char *last = argv[optind - 1];
	char flag[128];
	snprintf(flag, sizeof(flag), "%.*s", (int)strcspn(last, "="), last);
	if (got == ':') {
		fprintf(stderr, "baton-relay: --%s needs a value\n",
			flag_name(optopt));
		return EXIT_USAGE;
	}
	if (optopt != 0) {
		fprintf(stderr, "baton-relay: --%s takes no value\n",
			flag_name(optopt));
		return EXIT_USAGE;
	}
	return bad_usage("unknown flag '%s'", flag);
}

/* Whether the flag getopt_long just read was written whole: getopt_long
 * also takes a beginning of a name, which a new flag could make mean
 * another one. */
static bool written_whole(int val, char **argv)
{
	const char *last = argv[optind - 1];
	bool joined = optarg != NULL && optarg > last &&
		      optarg <= last + strlen(last);
	const char *token = optarg != NULL && !joined ? argv[optind - 2] : last;
	const char *name = flag_name(val);
	size_t n = strlen(name);
	return strncmp(token + 2, name, n) == 0 &&
	       (token[2 + n] == '\0' || token[2 + n] == '=');
}

/* A number flag's value into *out, or exit status 2 with its range. */
static int number_flag(int val, const char *v, uint64_t min, uint64_t max,
		       uint64_t *out)
{
	if (parse_u64(v, min, max, out))
		return 0;
	fprintf(stderr,
		"baton-relay: --%s %s: must be a whole number in %llu..%llu\n",
		flag_name(val), v, (unsigned long long)min,
		(unsigned long long)max);
	return EXIT_USAGE;
}

/* "HOST:PORT" (src/util/address.h: IPv4, [IPv6] or a name) into host
 * (cap bytes, IPv6 without brackets) and port; why says what is wrong. */
static bool parse_listen(const char *s, char *host, size_t cap, int *port,
			 char *why, size_t why_cap)
{
	struct baton_addr a;
	if (baton_addr_parse(s, &a, why, why_cap) != 0)
		return false;
	BATON_ASSERT(strlen(a.host) < cap);
	snprintf(host, cap, "%s", a.host);
	*port = a.port;
	return true;
}

/* --open-cluster NAME: a cluster id as HELLO carries it (1 to 255 bytes). */
static int open_cluster_flag(const char *v, struct relay_config *cfg)
{
	size_t n = strlen(v);
	if (n == 0 || n > 255)
		return bad_usage("--open-cluster '%s': a cluster id of 1 to "
				 "255 bytes",
				 v);
	for (uint32_t i = 0; i < cfg->n_open; i++)
		if (strcmp(cfg->open_clusters[i], v) == 0)
			return bad_usage("--open-cluster %s given twice", v);
	if (cfg->n_open == RELAY_OPEN_CLUSTERS_MAX)
		return bad_usage("--open-cluster %s: at most 8", v);
	cfg->open_clusters[cfg->n_open++] = v;
	return 0;
}

/* --cluster-secret NAME=FILE: the key of NAME's proofs into secrets[*n]. */
static int cluster_secret_flag(const char *v,
			       struct relay_cluster_secret *secrets,
			       uint32_t *n)
{
	const char *eq = strchr(v, '=');
	size_t name_len = eq != NULL ? (size_t)(eq - v) : 0;
	if (eq == NULL || name_len == 0 || name_len > BATON_RELAY_ID_MAX ||
	    eq[1] == '\0')
		return bad_usage("--cluster-secret '%s': expected NAME=FILE "
				 "(a cluster id of 1 to 255 bytes, then the "
				 "secret file)",
				 v);
	for (size_t i = 0; i < name_len; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return bad_usage("--cluster-secret '%s': a control "
					 "byte in the cluster id",
					 v);
	for (uint32_t i = 0; i < *n; i++)
		if (strlen(secrets[i].cluster_id) == name_len &&
		    memcmp(secrets[i].cluster_id, v, name_len) == 0)
			return bad_usage("--cluster-secret '%s': that "
					 "cluster already has a secret",
					 v);
	if (*n == RELAY_CLUSTER_SECRETS_MAX) {
		fprintf(stderr,
			"baton-relay: --cluster-secret: at most %u clusters\n",
			RELAY_CLUSTER_SECRETS_MAX);
		return EXIT_USAGE;
	}
	struct baton_peer_secret secret;
	char err[1536];
	if (relay_secret_load(eq + 1, &secret, err, sizeof err) != 0) {
		fprintf(stderr, "baton-relay: --cluster-secret %.*s: %s\n",
			(int)name_len, v, err);
		return EXIT_USAGE;
	}
	struct relay_cluster_secret *s = &secrets[(*n)++];
	memcpy(s->cluster_id, v, name_len);
	s->cluster_id[name_len] = '\0';
	relay_auth_key(&secret, s->key);
	baton_peer_secret_wipe(&secret);
	return 0;
}

/* --admin-secret-file FILE: the key of operators' requests. */
static int admin_secret_flag(const char *v, struct relay_config *cfg)
{
	if (cfg->has_admin_key)
		return bad_usage("--admin-secret-file '%s': given twice", v);
	struct baton_peer_secret secret;
	char err[1536];
	if (relay_secret_load(v, &secret, err, sizeof err) != 0) {
		fprintf(stderr, "baton-relay: --admin-secret-file: %s\n", err);
		return EXIT_USAGE;
	}
	relay_admin_key(&secret, cfg->admin_key);
	cfg->has_admin_key = true;
	baton_peer_secret_wipe(&secret);
	return 0;
}

/* Descriptors besides the connections: the listener, the loop's, the
 * state file, the log. */
#define RELAY_FDS_SPARE 64u

/* --max-connections needs as many descriptors: raise the soft limit up to
 * the hard one if needed, and say so when even that is short (accepts
 * would then fail before the limits of docs/relay-server.md apply). */
static void fit_fd_limit(uint32_t connections_max)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)connections_max + RELAY_FDS_SPARE;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rlim_t hard = rl.rlim_max;
	rl.rlim_cur = hard == RLIM_INFINITY || hard >= want ? want : hard;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
		relay_log(RELAY_LOG_WARN,
			  "only %llu file descriptors (ulimit -n) for "
			  "--max-connections %u: raise the limit or lower the "
			  "flag",
			  (unsigned long long)rl.rlim_cur, connections_max);
}

/* Hold DIR/relay.lock for the life of the process: two relays on one
 * data directory would number views independently. */
static int lock_data_dir(const char *dir)
{
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr,
			"baton-relay: --data %s: not an existing directory "
			"(create it first)\n",
			dir);
		return EXIT_USAGE;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/relay.lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(stderr,
			"baton-relay: %s: %s (is another baton-relay using "
			"this data directory?)\n",
			path, strerror(errno));
		return 1;
	}
	return 0; /* the descriptor stays open: the lock lasts */
}

int main(int argc, char **argv)
{
	struct relay_config cfg = {
		.handshake_timeout_ms = RELAY_HANDSHAKE_TIMEOUT_MS,
		.idle_timeout_ms = RELAY_IDLE_TIMEOUT_MS,
		.ping_interval_ms = RELAY_PING_INTERVAL_MS,
		.forget_after_ms = RELAY_FORGET_AFTER_MS,
		.queue_messages_max = RELAY_QUEUE_MESSAGES_MAX,
		.queue_bytes_max = RELAY_QUEUE_BYTES_MAX,
		.connections_max = RELAY_CONNECTIONS_MAX,
		.unregistered_per_address_max =
			RELAY_UNREGISTERED_PER_ADDRESS_MAX,
		.proof_skew_ms = RELAY_PROOF_SKEW_MS,
		.auto_deactivate_ms = RELAY_AUTO_DEACTIVATE_MS,
	};
	static struct relay_cluster_secret secrets[RELAY_CLUSTER_SECRETS_MAX];
	cfg.secrets = secrets;
	/* A peer that closes while the relay writes to it must end only
	 * that connection (the write fails with EPIPE), not the process. */
	signal(SIGPIPE, SIG_IGN);
	char host[256] = "";
	char why[BATON_ADDR_WHY_MAX] = "";
	const char *listen_arg = NULL;
	int got, rc = 0;
	opterr = 0;
	while (rc == 0 &&
	       (got = getopt_long(argc, argv, "+:", relay_flags, NULL)) != -1) {
		const char *v = optarg;
		uint64_t n = 0;
		if (got != '?' && got != ':' && !written_whole(got, argv)) {
			const char *last = argv[optind - 1];
			const char *token =
				v != NULL && (v <= last ||
					      v > last + strlen(last))
					? argv[optind - 2]
					: last;
			char flag[128];
			snprintf(flag, sizeof(flag), "%.*s",
				 (int)strcspn(token, "="), token);
			return bad_usage("unknown flag '%s' (flags are taken "
					 "by their whole name)",
					 flag);
		}
		switch (got) {
		case 'h':
			usage(stdout);
			return 0;
		case 'V': {
			char r[BATON_RELEASE_STR_MAX];
			printf("baton-relay %s (relay protocol: frozen, magic "
			       "ba524c59)\n",
			       baton_release_format(
				       baton_release_current()->release, r));
			return 0;
		}
		case 'a':
			cfg.activate = true;
			break;
		case 'l':
			listen_arg = v;
			if (!parse_listen(v, host, sizeof(host), &cfg.port, why,
					  sizeof why))
				return bad_usage("--listen: %s", why);
			break;
		case 'd':
			cfg.data_dir = v;
			break;
		case 'L': {
			int level = relay_log_parse_level(v);
			if (level < 0)
				return bad_usage("--log-level '%s': expected "
						 "error, warn, info or debug",
						 v);
			relay_log_set_level((enum relay_log_level)level);
			break;
		}
		case 'H':
			rc = number_flag(got, v, 10, 3600000, &n);
			cfg.handshake_timeout_ms = rc == 0 ? n : 0;
			break;
		case 'I':
			rc = number_flag(got, v, 10, 3600000, &n);
			cfg.idle_timeout_ms = rc == 0 ? n : 0;
			break;
		case 'P':
			rc = number_flag(got, v, 10, 3600000, &n);
			cfg.ping_interval_ms = rc == 0 ? n : 0;
			break;
		case 'F':
			rc = number_flag(got, v, 100, 86400000, &n);
			cfg.forget_after_ms = rc == 0 ? n : 0;
			break;
		case 'Q':
			rc = number_flag(got, v, 1, UINT32_MAX, &n);
			cfg.queue_messages_max = (uint32_t)n;
			break;
		case 'B':
			rc = number_flag(got, v, 1, UINT64_MAX, &n);
			cfg.queue_bytes_max = n;
			break;
		case 'C':
			rc = number_flag(got, v, 16, 65536, &n);
			cfg.connections_max = (uint32_t)n;
			break;
		case 'U':
			rc = number_flag(got, v, 1, 65536, &n);
			cfg.unregistered_per_address_max = (uint32_t)n;
			break;
		case 'K':
			rc = number_flag(got, v, 1000, 3600000, &n);
			cfg.proof_skew_ms = n;
			break;
		case 'S':
			rc = cluster_secret_flag(v, secrets, &cfg.n_secrets);
			break;
		case 'O':
			cfg.allow_open_clusters = true;
			break;
		case 'o':
			rc = open_cluster_flag(v, &cfg);
			break;
		case 'A':
			rc = admin_secret_flag(v, &cfg);
			break;
		case 'D':
			rc = number_flag(got, v, 0, 86400000, &n);
			cfg.auto_deactivate_ms = n;
			break;
		default:
			rc = bad_flag(got, argv);
			break;
		}
	}
	if (rc != 0)
		return rc;
	if (optind < argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (listen_arg == NULL || cfg.data_dir == NULL)
		return bad_usage("%s", "--listen HOST:PORT and --data DIR are "
				       "required");
	cfg.host = host;
	BATON_ASSERT(cfg.port > 0 && cfg.port <= 65535);
	for (uint32_t i = 0; i < cfg.n_open; i++)
		for (uint32_t k = 0; k < cfg.n_secrets; k++)
			if (strcmp(cfg.open_clusters[i],
				   secrets[k].cluster_id) == 0)
				return bad_usage(
					"--open-cluster %s: that cluster "
					"has a --cluster-secret",
					cfg.open_clusters[i]);
	if (cfg.n_open > 0 && cfg.n_secrets == 0)
		return bad_usage("%s", "--open-cluster needs at least one "
				       "--cluster-secret (the new cluster's): "
				       "without any, registration is open to "
				       "every cluster");
	if (cfg.allow_open_clusters && cfg.n_secrets == 0)
		return bad_usage("%s", "--allow-open-clusters needs at least "
				       "one --cluster-secret");
	rc = lock_data_dir(cfg.data_dir);
	if (rc != 0)
		return rc;
	fit_fd_limit(cfg.connections_max);
	if (cfg.n_secrets == 0)
		relay_log(RELAY_LOG_WARN,
			  "WARNING: no --cluster-secret: registration is open; "
			  "anyone who reaches %s can register as any node of "
			  "any cluster and receive its messages. Give each "
			  "cluster a secret (docs/relay-server.md "
			  "\"Authentication\")",
			  listen_arg);
	for (uint32_t i = 0; i < cfg.n_secrets; i++)
		relay_log(RELAY_LOG_INFO,
			  "cluster %s: registration needs a proof of its "
			  "secret",
			  secrets[i].cluster_id);
	for (uint32_t i = 0; i < cfg.n_open; i++)
		relay_log(RELAY_LOG_WARN,
			  "WARNING: --open-cluster %s: nodes of cluster %s "
			  "register WITHOUT a proof; anyone who reaches %s can "
			  "register as one of them (for the old cluster of a "
			  "release that has no relay secret, docs/relay.md "
			  "\"Migrating from 1.3.0\")",
			  cfg.open_clusters[i], cfg.open_clusters[i],
			  listen_arg);
	if (cfg.allow_open_clusters)
		relay_log(RELAY_LOG_WARN,
			  "--allow-open-clusters: any other cluster id "
			  "registers without a proof");
	char err[1024] = "";
	rc = relay_run(&cfg, err, sizeof(err));
	if (rc != 0) {
		relay_log(RELAY_LOG_ERROR, "%s (%s)", err, baton_err_name(rc));
		return rc == BATON_EINVAL ? EXIT_USAGE : 1;
	}
	return 0;
}
