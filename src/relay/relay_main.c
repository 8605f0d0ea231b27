/*
 * baton-relay: the process both clusters of a migration register with
 * (docs/relay.md, docs/relay-server.md). This file reads the flags; the
 * server is server.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "address.h"
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
		"  --listen HOST:PORT        numeric address to listen on "
		"(IPv6: [::1]:PORT)\n"
		"  --data DIR                existing directory for the state "
		"file (relay-state)\n"
		"  --activate                start active (kept in the state "
		"file); SIGUSR1\n"
		"                            activates and SIGUSR2 deactivates "
		"a running relay\n"
		"  --log-level L             error, warn, info (default) or "
		"debug\n"
		"  --handshake-timeout-ms N  close a connection without HELLO "
		"or STATUS (10000)\n"
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
	};
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
	rc = lock_data_dir(cfg.data_dir);
	if (rc != 0)
		return rc;
	char err[1024] = "";
	rc = relay_run(&cfg, err, sizeof(err));
	if (rc != 0) {
		relay_log(RELAY_LOG_ERROR, "%s (%s)", err, baton_err_name(rc));
		return rc == BATON_EINVAL ? EXIT_USAGE : 1;
	}
	return 0;
}
