/*
 * baton-relay: the process both clusters of a migration register with
 * (docs/relay.md, docs/relay-server.md). This file reads the flags; the
 * server is server.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* A flag that takes a value. */
static bool known_flag(const char *a)
{
	static const char *const flags[] = {
		"--listen",	     "--data",
		"--log-level",	     "--handshake-timeout-ms",
		"--idle-timeout-ms", "--ping-interval-ms",
		"--forget-after-ms", "--queue-messages-max",
		"--queue-bytes-max",
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (strcmp(a, flags[i]) == 0)
			return true;
	return false;
}

/* "HOST:PORT" or "[V6]:PORT" into host (cap bytes) and port. */
static bool parse_listen(const char *s, char *host, size_t cap, int *port)
{
	const char *colon = strrchr(s, ':');
	if (colon == NULL || colon == s)
		return false;
	const char *h = s;
	size_t hlen = (size_t)(colon - s);
	if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	uint64_t p = 0;
	if (hlen == 0 || hlen >= cap || !parse_u64(colon + 1, 1, 65535, &p))
		return false;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	*port = (int)p;
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
	const char *listen_arg = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t n = 0;
		if (strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--version") == 0) {
			char r[BATON_RELEASE_STR_MAX];
			printf("baton-relay %s (relay protocol: frozen, magic "
			       "ba524c59)\n",
			       baton_release_format(
				       baton_release_current()->release, r));
			return 0;
		}
		if (strcmp(a, "--activate") == 0) {
			cfg.activate = true;
			continue;
		}
		if (strncmp(a, "--", 2) != 0)
			return bad_usage("unexpected argument '%s'", a);
		if (!known_flag(a))
			return bad_usage("unknown flag '%s'", a);
		if (v == NULL)
			return bad_usage("%s needs a value", a);
		i++;
		if (strcmp(a, "--listen") == 0) {
			listen_arg = v;
			if (!parse_listen(v, host, sizeof(host), &cfg.port))
				return bad_usage("--listen '%s': expected "
						 "HOST:PORT, port 1-65535",
						 v);
		} else if (strcmp(a, "--data") == 0) {
			cfg.data_dir = v;
		} else if (strcmp(a, "--log-level") == 0) {
			int level = relay_log_parse_level(v);
			if (level < 0)
				return bad_usage("--log-level '%s': expected "
						 "error, warn, info or debug",
						 v);
			relay_log_set_level((enum relay_log_level)level);
		} else if (strcmp(a, "--handshake-timeout-ms") == 0 &&
			   parse_u64(v, 10, 3600000, &n)) {
			cfg.handshake_timeout_ms = n;
		} else if (strcmp(a, "--idle-timeout-ms") == 0 &&
			   parse_u64(v, 10, 3600000, &n)) {
			cfg.idle_timeout_ms = n;
		} else if (strcmp(a, "--ping-interval-ms") == 0 &&
			   parse_u64(v, 10, 3600000, &n)) {
			cfg.ping_interval_ms = n;
		} else if (strcmp(a, "--forget-after-ms") == 0 &&
			   parse_u64(v, 100, 86400000, &n)) {
			cfg.forget_after_ms = n;
		} else if (strcmp(a, "--queue-messages-max") == 0 &&
			   parse_u64(v, 1, UINT32_MAX, &n)) {
			cfg.queue_messages_max = (uint32_t)n;
		} else if (strcmp(a, "--queue-bytes-max") == 0 &&
			   parse_u64(v, 1, UINT64_MAX, &n)) {
			cfg.queue_bytes_max = n;
		} else {
			fprintf(stderr,
				"baton-relay: %s '%s': not a number in its "
				"range (baton-relay --help)\n",
				a, v);
			return EXIT_USAGE;
		}
	}
	if (listen_arg == NULL || cfg.data_dir == NULL)
		return bad_usage("%s", "--listen HOST:PORT and --data DIR are "
				       "required");
	cfg.host = host;
	BATON_ASSERT(cfg.port > 0 && cfg.port <= 65535);
	int rc = lock_data_dir(cfg.data_dir);
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
