/* batond --help and --version. */
#include <stdio.h>

#include "config_internal.h"

void config_usage(FILE *f)
{
	fprintf(f,
		"usage: batond --id N --listen HOST:PORT --peer-listen "
		"HOST:PORT --data DIR\n"
		"              (--bootstrap ID=PEER/CLIENT,... | --join | "
		"--join-seeds LIST)\n"
		"              [options]\n"
		"       batond --config FILE\n"
		"       batond --help | --version\n"
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
		"  (an empty --data needs --bootstrap, --join or --join-seeds; "
		"a node restarted\n"
		"   on its own data needs none of them)\n"
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
		"options (below)\n"
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
		"(default 0: never)\n",
		SERVER_MAX_CLIENTS_DEFAULT);
	/* Apart: one string literal stays within C's portable length. */
	fputs("  --snapshot-entries N    snapshot every N applied entries "
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
	      "  --wal-segment-bytes N   size of each log segment, "
	      "preallocated (default 67108864:\n"
	      "                          64 MiB; 1048576..1073741824)\n"
	      "  --election-timeout-ms N (default 1000)\n"
	      "  --heartbeat-ms N        (default 100)\n"
	      "  --log-level L           debug, info (default), warn, error\n"
	      "  --log-format F          text (default) or json: one JSON "
	      "object per line\n"
	      "                          (ts, level, node, msg)\n"
	      "  --machine-upgrade S     raise the machine version once all "
	      "members (all,\n"
	      "                          the default) or a quorum of voters "
	      "(quorum) can;\n"
	      "                          manual: hold it and the release "
	      "floor until\n"
	      "                          'batonctl upgrade finalize'\n"
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
	      "  --test-apply-delay-ms MS  for tests only: sleep MS (at most "
	      "100) before\n"
	      "                          applying each key-value entry (a "
	      "slow release)\n"
	      "  --help\n"
	      "  --version               the release, its versions and the "
	      "releases contained\n",
	      f);
	fputs("\nValues (docs/kv.md, \"The value limit\"):\n"
	      "  --max-value-bytes N     refuse, before it is logged, a "
	      "write that would leave\n"
	      "                          a longer string value, hash field "
	      "or hash value\n"
	      "                          (default 16711680: 16 MiB - 64 "
	      "KiB; 65536 to\n"
	      "                          536870912); a --restore holding a "
	      "longer value is\n"
	      "                          refused\n",
	      f);
	fputs("\nRestoring a backup (docs/backup.md):\n"
	      "  --restore FILE          found a new cluster from a backup "
	      "(batonctl snapshot\n"
	      "                          save): with --bootstrap of this "
	      "node alone, on an\n"
	      "                          empty --data; the others join "
	      "afterwards\n",
	      f);
	fputs("\nMonitoring (docs/metrics.md):\n"
	      "  --metrics HOST:PORT     serve Prometheus /metrics and HTTP "
	      "/health and /ready\n"
	      "                          here (default: off; /ready follows "
	      "migration_ready\n"
	      "                          during a relay migration)\n",
	      f);
	fputs("\nMemory (docs/operations.md, \"Memory\"):\n"
	      "  --maxmemory BYTES       above it, writes that grow memory "
	      "are refused with\n"
	      "                          -OOM (deletes, reads and admin "
	      "commands are served):\n"
	      "                          700mb, 1gb (kb/mb/gb by 1024, "
	      "k/m/g by 1000); 0: no\n"
	      "                          bound (default: half of the "
	      "cgroup's memory.max, or\n"
	      "                          of the machine's memory); the "
	      "leader refuses at the\n"
	      "                          smallest of all members' bounds\n",
	      f);
	fputs("\nMigration between two clusters (docs/relay.md):\n"
	      "  --relay HOST:PORT       register with this baton-relay for "
	      "a migration between\n"
	      "                          two clusters (docs/relay.md)\n"
	      "  --relay-cluster NAME    this cluster's id at the relay "
	      "(default: --cluster-id);\n"
	      "                          the two clusters must use "
	      "different ones\n"
	      "  --relay-secret-file PATH this cluster's relay secret "
	      "(the file the relay has\n"
	      "                          as --cluster-secret NAME=PATH): "
	      "HELLO proves it\n"
	      "  --migrate-from NAME     this node is on the new side: its "
	      "cluster imports from\n"
	      "                          cluster NAME and takes over its "
	      "writes (needs --relay)\n"
	      "  --migrate-from-unsealed X.Y.Z  cluster NAME runs release "
	      "X.Y.Z, older than\n"
	      "                          sealed migration messages (1.3.0): "
	      "speak its unsealed\n"
	      "                          format to it, UNAUTHENTICATED "
	      "(docs/relay.md,\n"
	      "                          \"Migrating from 1.3.0\"); this "
	      "node's own cluster's\n"
	      "                          messages stay sealed\n"
	      "  --migrate-to NAME       this node is on the old side: it "
	      "exports its data to,\n"
	      "                          and hands its writes over to, "
	      "cluster NAME only\n"
	      "                          (needs --relay; without it, no "
	      "cluster may import)\n"
	      "  --migration-secret-file PATH  the secret both clusters of "
	      "a migration hold\n"
	      "                          (a regular file, mode 0600): every "
	      "migration message is\n"
	      "                          sealed with it; needed by "
	      "--migrate-from and --migrate-to\n",
	      f);
	fputs("\nClocks (docs/operations.md, \"Clocks\"):\n"
	      "  --max-clock-offset MS   wall-clock offset tolerated between "
	      "nodes (default 500;\n"
	      "                          0: not checked): beyond it a node "
	      "warns, and a leader\n"
	      "                          a majority disagrees with hands "
	      "over\n",
	      f);
	fputs("\nEvery option can also be given in a config file (--config "
	      "FILE, or BATON_CONFIG)\nas a line 'name value' (a switch: "
	      "'name' alone, or 'name on|off'; '#' starts a\ncomment), or "
	      "in the environment as BATON_NAME (upper case, '_' for '-'):\n"
	      "BATON_HEARTBEAT_MS=50. Flags win over the environment, which "
	      "wins over the\nfile. Unknown keys are refused with the file "
	      "and line. --FLAG=VALUE works as\n--FLAG VALUE. Exit status: 0, "
	      "1 on a failure a restart may mend, 2 on bad usage,\n3 on a "
	      "refusal that needs an operator (storage failed, data directory "
	      "damaged,\nanother node's or wiped; --restore refused).\n",
	      f);
}

/* "0.1.0, 1.0.0, 1.1.0 and 1.2.0" (every release of the table but the
 * last `skip_last` ones) into buf. */
const char *config_release_list(char *buf, size_t cap, uint32_t skip_last)
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

/* --version: the release run (emulated or not), its profile, and what
 * else the binary contains. */
void config_print_version(const struct server_config *c)
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
	       config_release_list(list, sizeof list, 1));
}
