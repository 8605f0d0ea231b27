/* batond's flags and config file (docs/batond.md). */
#include <arpa/inet.h>
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
		"              (--bootstrap ID=PEER/CLIENT,... | --join | "
		"--join-seeds LIST)\n"
		"              [options]\n"
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
		"                          the data directory holds state; on "
		"an empty one the\n"
		"                          node first asks the founders, and "
		"refuses to found\n"
		"                          over a cluster they run: a node "
		"that lost its data\n"
		"                          rejoins with --join under a new "
		"id)\n"
		"  --join                  start empty and wait to be added "
		"(batonctl add)\n"
		"  --join-seeds LIST       start empty and join by itself "
		"through these members'\n"
		"                          peer addresses: HOST:PORT,... "
		"(implies --join)\n"
		"  --cluster-id NAME       refuse peers of other clusters "
		"(default baton);\n"
		"                          the data directory records it "
		"with --id and refuses\n"
		"                          another\n"
		"  --password PW           require AUTH PW from clients\n"
		"  --peer-secret-file PATH the cluster's peer secret: peers "
		"must prove they hold\n"
		"                          the same file's bytes (at least "
		"16, mode 0600; make\n"
		"                          one: head -c 32 /dev/urandom > "
		"PATH; chmod 600 PATH)\n"
		"  --insecure-peers        allow --peer-listen on a "
		"non-loopback address\n"
		"                          without a peer secret (anyone "
		"reaching it could join)\n"
		"  --config FILE           'name value' lines with these "
		"options, read first\n"
		"  --max-clients N         (default %u)\n"
		"  --max-bulk-bytes N      refuse a longer bulk string at "
		"its header\n"
		"                          (default 16711680: 16 MiB - 64 "
		"KiB)\n"
		"  --max-request-bytes N   refuse a longer request at the "
		"header that\n"
		"                          crosses it (default 16773120: 16 "
		"MiB - 4 KiB)\n"
		"  --max-client-output-bytes N  cut off a client with more "
		"replies unread\n"
		"                          (default 268435456: 256 MiB)\n"
		"  --max-total-output-bytes N   all clients' unread replies "
		"together: above\n"
		"                          it the slowest reader is cut off "
		"(default 256 MiB)\n"
		"  --client-idle-timeout-s N  close clients idle this long "
		"(default 0: never)\n"
		"  --snapshot-entries N    snapshot every N applied entries "
		"(default 100000)\n"
		"  --snapshot-slice-bytes N  write a snapshot in slices of "
		"about N "
		"bytes between\n"
		"                          other work (default 65536; "
		"4096..67108864)\n"
		"  --snapshot-trailing N   log entries kept behind a snapshot "
		"for slow followers\n"
		"                          (default 1024; a follower further "
		"behind gets the snapshot)\n"
		"  --election-timeout-ms N (default 1000)\n"
		"  --heartbeat-ms N        (default 100)\n"
		"  --log-level L           debug, info (default), warn, error\n"
		"  --machine-upgrade S     raise the machine version once all "
		"members (all,\n"
		"                          the default) or a quorum of voters "
		"(quorum) can\n"
		"  --election-policy P     who may lead: version-aware (the "
		"default: not below\n"
		"                          the release floor, the majority "
		"release first) or\n"
		"                          any (plain Raft)\n"
		"  --strict-release        refuse peers and joiners of another "
		"release\n"
		"  --accept-joins          as leader, add nodes that ask to "
		"join "
		"(--join-seeds)\n"
		"  --as-release X.Y.Z      run as an older release this binary "
		"contains (tests)\n"
		"  --help\n"
		"  --version               the release, its versions and the "
		"releases contained\n",
		SERVER_MAX_CLIENTS_DEFAULT);
	/* Apart: one string literal stays within C's portable length. */
	fputs("\nMigration between two clusters (docs/relay.md):\n"
	      "  --relay HOST:PORT       register with this baton-relay for "
	      "a migration between\n"
	      "                          two clusters (docs/relay.md)\n"
	      "  --relay-cluster NAME    this cluster's id at the relay "
	      "(default: --cluster-id);\n"
	      "                          the two clusters must use "
	      "different ones\n"
	      "  --migrate-from NAME     this node is on the new side: its "
	      "cluster imports from\n"
	      "                          cluster NAME and takes over its "
	      "writes (needs --relay)\n"
	      "  --migrate-to NAME       this node is on the old side: it "
	      "exports its data to,\n"
	      "                          and hands its writes over to, "
	      "cluster NAME only\n"
	      "                          (needs --relay; without it, no "
	      "cluster may import)\n",
	      f);
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

/* Two founders with one id would never elect a leader (each vote is
 * counted once), and two ids at one address would talk to one node as
 * two: both are refused before anything starts. */
static int founders_distinct(const struct server_config *c)
{
	for (uint32_t i = 0; i < c->n_founders; i++) {
		for (uint32_t j = 0; j < i; j++) {
			if (c->founders[i] == c->founders[j]) {
				fprintf(stderr,
					"batond: --bootstrap lists node "
					"%" PRIu64 " twice; each founder "
					"needs its own id\n",
					c->founders[i]);
				return -1;
			}
			const char *what = strcmp(c->founder_peer[i],
						  c->founder_peer[j]) == 0
						   ? "peer"
					   : strcmp(c->founder_client[i],
						    c->founder_client[j]) == 0
						   ? "client"
						   : NULL;
			if (what != NULL) {
				fprintf(stderr,
					"batond: --bootstrap gives nodes "
					"%" PRIu64 " and %" PRIu64
					" one %s address; each founder "
					"needs its own addresses\n",
					c->founders[j], c->founders[i], what);
				return -1;
			}
		}
	}
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
	return founders_distinct(c);
}

/* "0.1.0, 1.0.0, 1.1.0 and 1.2.0" (every release of the table but the
 * last `skip_last` ones) into buf. */
static const char *release_list(char *buf, size_t cap, uint32_t skip_last)
{
	uint32_t n;
	const struct baton_profile *all = baton_releases(&n);
	n = n > skip_last ? n - skip_last : 0;
	size_t used = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < n && used < cap; i++) {
		char r[BATON_RELEASE_STR_MAX];
		int k = snprintf(buf + used, cap - used, "%s%s",
				 i == 0	      ? ""
				 : i + 1 == n ? " and "
					      : ", ",
				 baton_release_format(all[i].release, r));
		used += k > 0 ? (size_t)k : 0;
	}
	return buf;
}

static int parse_as_release(struct server_config *c, const char *v)
{
	struct baton_release r;
	const struct baton_profile *p =
		baton_release_parse(v, &r) == 0 ? baton_release_find(r) : NULL;
	if (p == NULL) {
		char list[256];
		fprintf(stderr,
			"batond: --as-release: this binary does not contain "
			"release '%s'; it contains %s\n",
			v, release_list(list, sizeof list, 0));
		return -1;
	}
	c->profile = *p;
	return 0;
}

/* HOST:PORT,HOST:PORT,... */
static int parse_seeds(struct server_config *c, const char *v)
{
	char list[CONFIG_LINE_MAX];
	if (copy("join-seeds", v, list, sizeof list) != 0)
		return -1;
	c->n_seeds = 0;
	char *save = NULL;
	for (char *item = strtok_r(list, ",", &save); item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		struct sockaddr_in sa;
		if (c->n_seeds == BATON_MAX_MEMBERS ||
		    baton_parse_addr(item, &sa) != 0) {
			fprintf(stderr,
				"batond: --join-seeds wants HOST:PORT,... "
				"(IPv4, at most %u), not '%s'\n",
				BATON_MAX_MEMBERS, item);
			return -1;
		}
		if (copy("join-seeds", item, c->seeds[c->n_seeds],
			 sizeof c->seeds[0]) != 0)
			return -1;
		c->n_seeds++;
	}
	if (c->n_seeds == 0) {
		fprintf(stderr, "batond: --join-seeds wants at least one "
				"HOST:PORT\n");
		return -1;
	}
	c->join = true;
	return 0;
}

/* A switch in the config file: the bare name, or with on/off. */
static int parse_switch(const char *name, const char *v, bool *out)
{
	if (v[0] == '\0' || strcmp(v, "on") == 0 || strcmp(v, "yes") == 0 ||
	    strcmp(v, "true") == 0) {
		*out = true;
	} else if (strcmp(v, "off") == 0 || strcmp(v, "no") == 0 ||
		   strcmp(v, "false") == 0) {
		*out = false;
	} else {
		fprintf(stderr, "batond: %s is on or off, not '%s'\n", name, v);
		return -1;
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
		if (v[0] == '\0') {
			fprintf(stderr, "batond: --cluster-id must not be "
					"empty\n");
			return -1;
		}
		return copy(name, v, c->cluster_id, sizeof c->cluster_id);
	} else if (strcmp(name, "relay") == 0) {
		return copy(name, v, c->relay, sizeof c->relay);
	} else if (strcmp(name, "relay-cluster") == 0) {
		return copy(name, v, c->relay_cluster, sizeof c->relay_cluster);
	} else if (strcmp(name, "migrate-from") == 0) {
		return copy(name, v, c->migrate_from, sizeof c->migrate_from);
	} else if (strcmp(name, "migrate-to") == 0) {
		return copy(name, v, c->migrate_to, sizeof c->migrate_to);
	} else if (strcmp(name, "password") == 0) {
		return copy(name, v, c->password, sizeof c->password);
	} else if (strcmp(name, "peer-secret-file") == 0) {
		return copy(name, v, c->peer_secret_file,
			    sizeof c->peer_secret_file);
	} else if (strcmp(name, "peer-secret") == 0) {
		fprintf(stderr, "batond: there is no --peer-secret: a secret "
				"on the command line shows in ps; put it in a "
				"file (mode 0600) and give --peer-secret-file "
				"PATH\n");
		return -1;
	} else if (strcmp(name, "bootstrap") == 0) {
		return parse_bootstrap(c, v);
	} else if (strcmp(name, "max-clients") == 0) {
		if (parse_u64(name, v, 1, 1000000, &n) != 0)
			return -1;
		c->max_clients = (uint32_t)n;
	} else if (strcmp(name, "max-bulk-bytes") == 0 ||
		   strcmp(name, "max-request-bytes") == 0) {
		if (parse_u64(name, v, 16, UINT64_MAX, &n) != 0)
			return -1;
		if (n > RESP_REQUEST_BYTES_MAX_DEFAULT) {
			fprintf(stderr,
				"batond: --%s is at most %zu: any request "
				"within it must fit one log entry of 16 MiB\n",
				name, RESP_REQUEST_BYTES_MAX_DEFAULT);
			return -1;
		}
		uint64_t *limit = strcmp(name, "max-bulk-bytes") == 0
					  ? &c->max_bulk_bytes
					  : &c->max_request_bytes;
		*limit = n;
	} else if (strcmp(name, "max-client-output-bytes") == 0) {
		return parse_u64(name, v, 1024, UINT64_MAX / 2,
				 &c->max_client_output_bytes);
	} else if (strcmp(name, "max-total-output-bytes") == 0) {
		return parse_u64(name, v, 1024, UINT64_MAX / 2,
				 &c->max_total_output_bytes);
	} else if (strcmp(name, "client-idle-timeout-s") == 0) {
		if (parse_u64(name, v, 0, 365u * 24 * 3600, &n) != 0)
			return -1;
		c->client_idle_timeout_s = (uint32_t)n;
	} else if (strcmp(name, "snapshot-entries") == 0) {
		if (parse_u64(name, v, 1, UINT32_MAX, &n) != 0)
			return -1;
		c->snapshot_entries = n;
	} else if (strcmp(name, "snapshot-slice-bytes") == 0) {
		if (parse_u64(name, v, 4096, 64u << 20, &n) != 0)
			return -1;
		c->snapshot_slice_bytes = n;
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
	} else if (strcmp(name, "join-seeds") == 0) {
		return parse_seeds(c, v);
	} else if (strcmp(name, "as-release") == 0) {
		return parse_as_release(c, v);
	} else if (strcmp(name, "machine-upgrade") == 0) {
		if (strcmp(v, "all") == 0) {
			c->machine_upgrade = BATON_UPGRADE_ALL;
		} else if (strcmp(v, "quorum") == 0) {
			c->machine_upgrade = BATON_UPGRADE_QUORUM;
		} else {
			fprintf(stderr,
				"batond: --machine-upgrade is all or "
				"quorum, not '%s'\n",
				v);
			return -1;
		}
	} else if (strcmp(name, "election-policy") == 0) {
		if (strcmp(v, "version-aware") == 0) {
			c->election_policy = BATON_ELECTION_VERSION_AWARE;
		} else if (strcmp(v, "any") == 0) {
			c->election_policy = BATON_ELECTION_ANY;
		} else {
			fprintf(stderr,
				"batond: --election-policy is version-aware "
				"or any, not '%s'\n",
				v);
			return -1;
		}
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
		if (strcmp(k, "join") == 0)
			rv = parse_switch(k, v, &c->join);
		else if (strcmp(k, "strict-release") == 0)
			rv = parse_switch(k, v, &c->strict_release);
		else if (strcmp(k, "accept-joins") == 0)
			rv = parse_switch(k, v, &c->accept_joins);
		else if (strcmp(k, "insecure-peers") == 0)
			rv = parse_switch(k, v, &c->insecure_peers);
		else
			rv = set_option(c, k, v);
		if (rv != 0)
			fprintf(stderr, "batond: in %s, line %d\n", path,
				lineno);
	}
	fclose(f);
	return rv;
}

/* --version: the release run (emulated or not), its profile, and what
 * else the binary contains. */
static void print_version(const struct server_config *c)
{
	const struct baton_profile *own = baton_release_current();
	char r[BATON_RELEASE_STR_MAX], list[256];
	printf("batond %s", baton_release_format(c->profile.release, r));
	if (baton_release_compare(c->profile.release, own->release) != 0)
		printf(" (emulated by batond %s)",
		       baton_release_format(own->release, r));
	printf("\npeer protocol %u-%u, machine_max %u\n",
	       c->profile.proto_min.value, c->profile.proto_max.value,
	       c->profile.machine_max.value);
	printf("releases this binary can emulate (--as-release): %s\n",
	       release_list(list, sizeof list, 1));
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
	struct sockaddr_in sa;
	if (c->insecure_peers || baton_parse_addr(c->peer_listen, &sa) != 0 ||
	    (ntohl(sa.sin_addr.s_addr) >> 24) == 127)
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

/* The migration's flags (docs/relay.md): a cluster cannot import from
 * itself, and an import needs the relay. */
static int relay_options(struct server_config *c)
{
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
	memset(c, 0, sizeof *c);
	snprintf(c->cluster_id, sizeof c->cluster_id, "baton");
	c->max_clients = SERVER_MAX_CLIENTS_DEFAULT;
	c->max_bulk_bytes = RESP_BULK_BYTES_MAX_DEFAULT;
	c->max_request_bytes = RESP_REQUEST_BYTES_MAX_DEFAULT;
	c->max_client_output_bytes = SERVER_CLIENT_OUTPUT_MAX_DEFAULT;
	c->max_total_output_bytes = SERVER_TOTAL_OUTPUT_MAX_DEFAULT;
	c->snapshot_entries = 100000;
	c->log_level = BATON_LOG_INFO;
	c->profile = *baton_release_current();
	c->machine_upgrade = BATON_UPGRADE_ALL;
	c->election_policy = BATON_ELECTION_VERSION_AWARE;
	bool version = false;
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
			version = true;
			continue;
		}
		if (strcmp(a, "--join") == 0) {
			c->join = true;
			continue;
		}
		if (strcmp(a, "--strict-release") == 0) {
			c->strict_release = true;
			continue;
		}
		if (strcmp(a, "--accept-joins") == 0) {
			c->accept_joins = true;
			continue;
		}
		if (strcmp(a, "--insecure-peers") == 0) {
			c->insecure_peers = true;
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
	if (version) {
		print_version(c);
		return 1;
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
	if (peer_security(c) != 0 || relay_options(c) != 0)
		return -1;
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
