/* batond's flags and config file (docs/batond.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

#define CONFIG_LINE_MAX 4096

static void usage(FILE *f)
{
	fprintf(f,
		"usage: batond --id N --listen HOST:PORT --peer-listen "
		"HOST:PORT --data DIR\n"
		"              (--bootstrap ID=PEER/CLIENT,... | --join) "
		"[options]\n"
		"\n"
		"A baton node: a Raft-replicated key-value store speaking the "
		"Redis protocol.\n"
		"\n"
		"  --id N                  this node's id (positive, unique "
		"for the cluster's life)\n"
		"  --listen HOST:PORT      client (RESP) address\n"
		"  --peer-listen HOST:PORT peer address\n"
		"  --data DIR              data directory (created if "
		"missing)\n"
		"  --bootstrap LIST        found a new cluster: "
		"id=peer_addr/client_addr,...\n"
		"                          (the same list on every founding "
		"node; ignored once\n"
		"                          the data directory holds state)\n"
		"  --join                  start empty and wait to be added "
		"(batonctl add)\n"
		"  --cluster-id NAME       refuse peers of other clusters "
		"(default baton)\n"
		"  --password PW           require AUTH PW from clients\n"
		"  --config FILE           'name value' lines with these "
		"options, read first\n"
		"  --max-clients N         (default %u)\n"
		"  --snapshot-entries N    snapshot every N applied entries "
		"(default 100000)\n"
		"  --snapshot-trailing N   log entries kept behind a snapshot "
		"for slow followers\n"
		"                          (default 1024; a follower further "
		"behind gets the snapshot)\n"
		"  --election-timeout-ms N (default 1000)\n"
		"  --heartbeat-ms N        (default 100)\n"
		"  --log-level L           debug, info (default), warn, error\n"
		"  --help, --version\n",
		SERVER_MAX_CLIENTS_DEFAULT);
}

static int parse_u64(const char *name, const char *v, uint64_t min,
		     uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || v[0] == '-' || n < min || n > max) {
		fprintf(stderr,
			"batond: --%s wants a number in %" PRIu64 "..%" PRIu64
			", not '%s'\n",
			name, min, max, v);
		return -1;
	}
	*out = n;
	return 0;
}

static int copy(const char *name, const char *v, char *out, size_t cap)
{
	if (strlen(v) >= cap) {
		fprintf(stderr, "batond: --%s is too long\n", name);
		return -1;
	}
	snprintf(out, cap, "%s", v);
	return 0;
}

/* id=peer/client,id=peer/client,... */
static int parse_bootstrap(struct server_config *c, const char *v)
{
	char list[CONFIG_LINE_MAX];
	if (copy("bootstrap", v, list, sizeof list) != 0)
		return -1;
	c->n_founders = 0;
	char *save = NULL;
	for (char *item = strtok_r(list, ",", &save); item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '='), *slash = strchr(item, '/');
		if (eq == NULL || slash == NULL || slash < eq ||
		    c->n_founders == BATON_MAX_MEMBERS) {
			fprintf(stderr,
				"batond: --bootstrap wants "
				"id=peer_addr/client_addr,... (at most %u), "
				"not '%s'\n",
				BATON_MAX_MEMBERS, item);
			return -1;
		}
		*eq = *slash = '\0';
		uint32_t i = c->n_founders;
		uint64_t id;
		if (parse_u64("bootstrap", item, 1, INT64_MAX, &id) != 0 ||
		    copy("bootstrap", eq + 1, c->founder_peer[i],
			 BATON_ADDR_MAX) != 0 ||
		    copy("bootstrap", slash + 1, c->founder_client[i],
			 BATON_ADDR_MAX) != 0)
			return -1;
		c->founders[i] = id;
		c->n_founders++;
	}
	return 0;
}

static int set_option(struct server_config *c, const char *name, const char *v)
{
	uint64_t n;
	if (strcmp(name, "id") == 0) {
		if (parse_u64(name, v, 1, INT64_MAX, &n) != 0)
			return -1;
		c->id = n;
	} else if (strcmp(name, "listen") == 0) {
		return copy(name, v, c->listen, sizeof c->listen);
	} else if (strcmp(name, "peer-listen") == 0) {
		return copy(name, v, c->peer_listen, sizeof c->peer_listen);
	} else if (strcmp(name, "data") == 0) {
		return copy(name, v, c->data_dir, sizeof c->data_dir);
	} else if (strcmp(name, "cluster-id") == 0) {
		return copy(name, v, c->cluster_id, sizeof c->cluster_id);
	} else if (strcmp(name, "password") == 0) {
		return copy(name, v, c->password, sizeof c->password);
	} else if (strcmp(name, "bootstrap") == 0) {
		return parse_bootstrap(c, v);
	} else if (strcmp(name, "max-clients") == 0) {
		if (parse_u64(name, v, 1, 1000000, &n) != 0)
			return -1;
		c->max_clients = (uint32_t)n;
	} else if (strcmp(name, "snapshot-entries") == 0) {
		if (parse_u64(name, v, 1, UINT32_MAX, &n) != 0)
			return -1;
		c->snapshot_entries = n;
	} else if (strcmp(name, "snapshot-trailing") == 0) {
		if (parse_u64(name, v, 0, UINT32_MAX, &n) != 0)
			return -1;
		c->snapshot_trailing = (uint32_t)n;
		c->snapshot_trailing_set = true;
	} else if (strcmp(name, "election-timeout-ms") == 0) {
		if (parse_u64(name, v, 50, 60000, &n) != 0)
			return -1;
		c->election_timeout_ms = (uint32_t)n;
	} else if (strcmp(name, "heartbeat-ms") == 0) {
		if (parse_u64(name, v, 5, 10000, &n) != 0)
			return -1;
		c->heartbeat_ms = (uint32_t)n;
	} else if (strcmp(name, "log-level") == 0) {
		c->log_level = baton_log_level_parse(v);
		if (c->log_level < 0) {
			fprintf(stderr, "batond: --log-level is debug, info, "
					"warn or error\n");
			return -1;
		}
	} else {
		fprintf(stderr, "batond: unknown option --%s (see --help)\n",
			name);
		return -1;
	}
	return 0;
}

static int read_config_file(struct server_config *c, const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "batond: cannot read %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	char line[CONFIG_LINE_MAX];
	int lineno = 0, rv = 0;
	while (rv == 0 && fgets(line, sizeof line, f) != NULL) {
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		char *k = line + strspn(line, " \t");
		if (*k == '\0' || *k == '#')
			continue;
		char *v = k + strcspn(k, " \t");
		if (*v != '\0')
			*v++ = '\0';
		v += strspn(v, " \t");
		if (strcmp(k, "join") == 0) {
			c->join = true;
			continue;
		}
		rv = set_option(c, k, v);
		if (rv != 0)
			fprintf(stderr, "batond: in %s, line %d\n", path,
				lineno);
	}
	fclose(f);
	return rv;
}

int server_config_parse(struct server_config *c, int argc, char **argv)
{
	memset(c, 0, sizeof *c);
	snprintf(c->cluster_id, sizeof c->cluster_id, "baton");
	c->max_clients = SERVER_MAX_CLIENTS_DEFAULT;
	c->snapshot_entries = 100000;
	c->log_level = BATON_LOG_INFO;
	/* The config file first, so flags override it. */
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "--config") == 0 &&
		    read_config_file(c, argv[i + 1]) != 0)
			return -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 1;
		}
		if (strcmp(a, "--version") == 0) {
			const struct baton_profile *cur =
				baton_release_current();
			char release[BATON_RELEASE_STR_MAX];
			printf("batond %s (peer protocol %u-%u, machine "
			       "version %u)\n",
			       baton_release_format(cur->release, release),
			       cur->proto_min.value, cur->proto_max.value,
			       cur->machine_max.value);
			return 1;
		}
		if (strcmp(a, "--join") == 0) {
			c->join = true;
			continue;
		}
		if (strncmp(a, "--", 2) != 0 || i + 1 == argc) {
			fprintf(stderr,
				"batond: unexpected '%s' (see --help)\n", a);
			return -1;
		}
		if (strcmp(a, "--config") == 0) {
			i++;
			continue;
		}
		if (set_option(c, a + 2, argv[++i]) != 0)
			return -1;
	}
	const char *missing = c->id == 0		  ? "--id"
			      : c->listen[0] == '\0'	  ? "--listen"
			      : c->peer_listen[0] == '\0' ? "--peer-listen"
			      : c->data_dir[0] == '\0'	  ? "--data"
							  : NULL;
	if (missing != NULL) {
		fprintf(stderr, "batond: %s is required (see --help)\n",
			missing);
		return -1;
	}
	if (c->join && c->n_founders > 0) {
		fprintf(stderr, "batond: --join and --bootstrap exclude each "
				"other\n");
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
	return 0;
}
