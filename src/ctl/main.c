/* batonctl: global options, subcommand dispatch and help (ctl.h). */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/version.h"
#include "ctl.h"

struct command {
	const char *name;
	const char *args; /* usage after the name */
	const char *help;
	const struct ctl_option *options; /* NULL: none */
	size_t min_args, max_args;	  /* positional arguments */
	int (*run)(const struct ctl_opts *o, const struct ctl_args *a);
};

static const struct command commands[] = {
	{"status", "[--json] [--watch [--interval-ms N] [--count N]]",
	 "One row per member: id, address, role (leader, follower, learner,\n"
	 "candidate, down if it does not answer, lost-log if its log ends\n"
	 "below what it acknowledged: see 'batonctl health'), term, commit\n"
	 "and applied indexes, match index (the leader's view), release,\n"
	 "peer protocol range, machine_max, and lag (the leader's last index\n"
	 "minus the member's match index). --json prints a JSON array of\n"
	 "objects with the same fields (null where unknown).\n"
	 "  --watch           look again every interval until Ctrl-C; on a\n"
	 "                    terminal each look replaces the last\n"
	 "  --interval-ms N   between two looks (default 2000, 100 or more)\n"
	 "  --count N         stop after N looks\n"
	 "Exit status: 0 (a member down is shown, not an error: see\n"
	 "'batonctl health'); 1 the asked node did not answer.\n",
	 ctl_status_options, 0, 0, ctl_cmd_status},
	{"health", "[--max-lag ENTRIES] [--json]",
	 "Is the cluster fit to serve? Asks the node, the leader and every\n"
	 "member, then prints 'healthy: ...', or 'unhealthy: N problems' and\n"
	 "one line per problem:\n"
	 "  no leader                      no member reports leading (and,\n"
	 "                                 if so, which members refused\n"
	 "                                 peers for a wrong peer secret)\n"
	 "  member N down: WHY             it does not answer\n"
	 "  member N lags by K entries     behind the leader's last index by\n"
	 "                                 more than --max-lag (default 1000)\n"
	 "  storage failed: member N       its log refused a write or fsync\n"
	 "                                 (it then stops, and shows down)\n"
	 "  needs-upgrade: member N ...    it stopped: it needs a newer "
	 "release\n"
	 "  member N stalled at index I    it stopped applying, and why\n"
	 "  member N was removed           it runs, but is out of the cluster\n"
	 "  member N lost entries ...      its log ends below what it had\n"
	 "                                 acknowledged: it restarted on a\n"
	 "                                 wiped data directory (replace it)\n"
	 "  member N hears no leader       it follows none, or another: it\n"
	 "                                 cannot reach the leader, or they\n"
	 "                                 refuse each other (peer secret)\n"
	 "  no configuration               the node has not joined a cluster\n"
	 "--json prints {\"healthy\", \"leader\", \"members\", \"reasons\"}.\n"
	 "Exit status: 0 healthy; 1 not healthy, or the asked node did not\n"
	 "answer (its error on stderr); 2 bad usage.\n",
	 ctl_health_options, 0, 0, ctl_cmd_health},
	{"members", "",
	 "The members as the given node knows them: id, voter or learner,\n"
	 "peer and client addresses, match index (known on the leader only).\n",
	 NULL, 0, 0, ctl_cmd_members},
	{"add", "ID PEER_ADDR CLIENT_ADDR",
	 "Add node ID (started with --join) as a learner. Addresses are\n"
	 "host:port. Sent to the leader, after asking the node at CLIENT_ADDR\n"
	 "whether it is node ID of this cluster (its id, peer port, cluster\n"
	 "id and uuid, password): a mismatch is refused, naming it; a node\n"
	 "that does not answer yet is added with a warning.\n",
	 NULL, 3, 3, ctl_cmd_add},
	{"promote", "ID",
	 "Make learner ID a voter, once it has caught up. Sent to the "
	 "leader.\n",
	 NULL, 1, 1, ctl_cmd_promote},
	{"remove", "ID",
	 "Remove node ID from the cluster (the leader itself too). Sent to\n"
	 "the leader.\n",
	 NULL, 1, 1, ctl_cmd_remove},
	{"transfer", "[ID]",
	 "Hand leadership to voter ID, or to the most up-to-date voter.\n"
	 "Sent to the leader.\n",
	 NULL, 0, 1, ctl_cmd_transfer},
	{"downgrade", "validate|enable|cancel|status [RELEASE] [--force]",
	 "An explicit downgrade to RELEASE, the release one step back from\n"
	 "the release floor (see docs/batond.md, \"Downgrade\"):\n"
	 "  validate RELEASE [--force]  check that it could be enabled now:\n"
	 "      every member reachable this term and at or above RELEASE,\n"
	 "      a peer protocol RELEASE shares with every member, nothing\n"
	 "      else in flight, and the state machine able to convert its\n"
	 "      data back (keys with a TTL, hashes: refused unless --force,\n"
	 "      which does what validate said: TTLs dropped, hashes\n"
	 "      deleted). Sent to the leader.\n"
	 "  enable RELEASE [--force]    the same checks, then record it: the\n"
	 "      release floor and the machine version drop at one index. Then\n"
	 "      restart each node on RELEASE once status shows it ready.\n"
	 "  cancel RELEASE              restore the previous floor and "
	 "machine\n"
	 "      version, while no member runs RELEASE yet. Sent to the "
	 "leader.\n"
	 "  status [RELEASE]            the downgrade in progress as the "
	 "given\n"
	 "      node's log has it, and per member its release and whether it\n"
	 "      may be restarted on the target now (its snapshot covers the\n"
	 "      entry that enabled it).\n"
	 "Exit status: 0 done (validate: it is valid); 1 refused, or a node\n"
	 "did not answer (status RELEASE: no downgrade to RELEASE in progress\n"
	 "or done); 2 bad usage.\n",
	 ctl_downgrade_options, 1, 2, ctl_cmd_downgrade},
	{"roll", "--to RELEASE --restart 'COMMAND {id}' [OPTIONS]",
	 "Roll every member to RELEASE, one node at a time (see\n"
	 "docs/upgrading.md, \"batonctl roll\"). Pre-checks first: every\n"
	 "member answers and is caught up, a leader, at least 3 voters, no\n"
	 "downgrade in progress, RELEASE known to this batonctl, not below\n"
	 "the release floor, and able to talk to every member. Then\n"
	 "followers (least lag first) and the leader last. Before every\n"
	 "restart (and after each pause) it reads the cluster again and\n"
	 "waits, saying for what, until every member answers, follows the\n"
	 "leader, is caught up and applies, and the other voters make a\n"
	 "majority; a leader first hands its leadership to a voter read as\n"
	 "fine just before. Per node: run the restart command with\n"
	 "/bin/sh -c ({id} becomes the node id, {release} RELEASE; it must\n"
	 "return once the node is started), then wait until the node reports\n"
	 "RELEASE and has caught up. At the end, wait for the effective\n"
	 "machine version to rise as far as RELEASE allows (not while the\n"
	 "cluster is held, --machine-upgrade manual: the hold keeps it\n"
	 "until 'batonctl upgrade finalize'). Members already at RELEASE are\n"
	 "skipped, unless --restart-all.\n"
	 "  --to RELEASE            the release to roll to "
	 "(major.minor.patch)\n"
	 "  --restart COMMAND       e.g. 'systemctl restart batond@{id}'\n"
	 "  --dry-run               print the plan; change nothing\n"
	 "  --pause SECONDS         wait between two nodes (default 0)\n"
	 "  --step-timeout-s N      bound on each restart, each wait, the\n"
	 "                          hand-over and the machine version (60)\n"
	 "  --wait-s N              bound on each wait before a restart for\n"
	 "                          the cluster to spare the node (default:\n"
	 "                          the step timeout); then stop, printing\n"
	 "                          the command that resumes\n"
	 "  --max-lag ENTRIES       caught up: match within this of the\n"
	 "                          leader's commit (default 1000)\n"
	 "  --restart-all           restart members already at RELEASE too\n"
	 "                          (a rolling restart at the same release)\n"
	 "  --skip IDS              with --restart-all: leave these node ids\n"
	 "                          (e.g. 1,3) alone\n"
	 "  --soak SECONDS          health gate: measure every member that\n"
	 "                          long first, then each restarted node;\n"
	 "                          when it is clearly worse, stop and put it\n"
	 "                          back on its previous release ({release}\n"
	 "                          is needed in --restart) if the release\n"
	 "                          floor allows, else say the downgrade\n"
	 "  --gate-p99-ratio N      worse: p99 above N times the p99 before\n"
	 "                          (default 3) ...\n"
	 "  --gate-p99-min-ms MS    ... and above it plus MS (default 50)\n"
	 "  --gate-errors-pct N     worse: error replies N points above\n"
	 "                          the share before (default 1)\n"
	 "  --gate-apply-lag N      worse: median apply lag N entries above\n"
	 "                          the largest before (default 100)\n"
	 "  --json                  one JSON object per line: {\"t\", "
	 "\"mono\",\n"
	 "                          \"event\", \"message\", ...}, events "
	 "plan,\n"
	 "                          precheck, baseline, waiting, transfer,\n"
	 "                          restart, wait, node_done, soak, gate,\n"
	 "                          restore, restored, pause,\n"
	 "                          machine_version, done, failed\n"
	 "Exit status: 0 rolled (or nothing to do, or a dry run); 1 failed\n"
	 "during the roll (stopped at once; says the cluster's state and how\n"
	 "to resume or roll back); 2 bad usage; 3 a pre-check refused\n"
	 "(nothing changed); 4 rolled, but the effective machine version did\n"
	 "not rise in time (says what holds it back).\n",
	 ctl_roll_options, 0, 0, ctl_cmd_roll},
	{"upgrade",
	 "--to RELEASE [--restart 'COMMAND {id}'] [OPTIONS] | status | "
	 "finalize",
	 "Take the cluster from the releases its members run to RELEASE in\n"
	 "one command (see docs/upgrading.md, \"batonctl upgrade\"). It plans\n"
	 "the path from what the members report: rolls (batonctl roll, with\n"
	 "--restart; {release} becomes each roll's release) to the newest\n"
	 "release that speaks with every member, as often as needed, and a\n"
	 "relay migration to a new cluster of RELEASE where no release above\n"
	 "the members' speaks with them. Run it again after an interruption:\n"
	 "the plan is made again from the cluster's state.\n"
	 "  --to RELEASE            the release to end at\n"
	 "  --restart COMMAND       the rolls' restart command, as roll's\n"
	 "                          (needed when the plan rolls)\n"
	 "  --dry-run               print the plan; change nothing\n"
	 "  --step-timeout-s N      bound on each restart, start, stop and\n"
	 "                          wait (default 60)\n"
	 "  --new ID=HOST:PORT,...  the migration's new nodes and their\n"
	 "                          client addresses; the first founds the\n"
	 "                          new cluster, the others join it\n"
	 "  --start-new COMMAND     starts new node {id} (returns once\n"
	 "                          started)\n"
	 "  --stop-old COMMAND      stops old node {id}, once the new cluster\n"
	 "                          holds write authority\n"
	 "  --soak SECONDS, --gate-p99-ratio N, --gate-p99-min-ms MS,\n"
	 "  --gate-errors-pct N, --gate-apply-lag ENTRIES, --wait-s SECONDS,\n"
	 "  --max-lag ENTRIES       passed to every roll step, as roll's (the\n"
	 "                          health gate: with --soak, --restart needs\n"
	 "                          {release}); a gate that stops a roll\n"
	 "                          stops the upgrade at that step\n"
	 "The relay must be running and active: 'batonctl relay activate\n"
	 "--relay HOST:PORT --secret-file FILE' (or baton-relay --activate,\n"
	 "or SIGUSR1); the old nodes must run with --relay and --migrate-to\n"
	 "(restarted with them: roll --restart-all; or, running: batonctl\n"
	 "relay attach).\n"
	 "Exit status: 0 done (or a dry run); 1 a step failed (says which;\n"
	 "rerun to resume); 2 bad usage; 3 refused (nothing changed); 4 as\n"
	 "roll's.\n"
	 "\nupgrade status | finalize: the burn-in hold of\n"
	 "'batond --machine-upgrade manual' (see\n"
	 "docs/upgrading.md, \"Hold and finalize\"): the release floor and\n"
	 "the effective machine version stay where they are until finalized.\n"
	 "Sent to the leader.\n"
	 "  status    whether the hold is on, what a finalize would change\n"
	 "      (release floor and machine version, from -> to) and what\n"
	 "      blocks it (a member not heard from, or on an older release\n"
	 "      than the newest a member runs; a downgrade in progress).\n"
	 "  finalize  raise both now (retried for 5 s while a member has not\n"
	 "      answered the leader yet).\n"
	 "Exit status: 0 done; 1 refused or blocked, or no answer; 2 bad\n"
	 "usage.\n",
	 ctl_upgrade_options, 0, 1, ctl_cmd_upgrade},
	{"migrate",
	 "[--dry-run] [--handoff] [--wait-s N] | abort | resume | unfence",
	 "Follow a migration between two clusters through baton-relay (see\n"
	 "docs/relay.md), asking a node of the new cluster (started with\n"
	 "--relay and --migrate-from): one line per change of its phase and\n"
	 "import index, until the new cluster holds write authority.\n"
	 "  --dry-run     check the node's relay, activation and view, print\n"
	 "                the plan; change nothing\n"
	 "  --handoff     ask for hand-off now instead of waiting for two\n"
	 "                voters of the new cluster to be caught up\n"
	 "  --wait-s N    give up after N seconds (default 300)\n"
	 "  abort         stop the migration on the asked node's cluster\n"
	 "                before authority moved: the old side exports\n"
	 "                nothing and refuses hand-off, the new side imports\n"
	 "                nothing (refused once authority moved)\n"
	 "  resume        undo abort\n"
	 "  unfence       (old side) lift a fence that no authority "
	 "followed:\n"
	 "                the old cluster takes writes again (refused once\n"
	 "                the new cluster announced authority)\n"
	 "Exit status: 0 authority taken (dry run: nothing blocks it; abort,\n"
	 "resume, unfence: done); 1 not in time, refused, or the node takes\n"
	 "no part; 2 bad usage.\n",
	 ctl_migrate_options, 0, 1, ctl_cmd_migrate},
	{"snapshot", "save FILE [--force] | status FILE",
	 "Backups (docs/backup.md).\n"
	 "  save FILE     ask the leader for a consistent copy of the\n"
	 "                key-value map at one applied index (confirmed by a\n"
	 "                read index), streamed in chunks and written to\n"
	 "                FILE.tmp, fsynced, renamed to FILE. Prints the\n"
	 "                index, keys, bytes and checksum. Restore it with\n"
	 "                'batond --restore FILE' (a new cluster).\n"
	 "    --force     overwrite an existing FILE (refused without)\n"
	 "  status FILE   verify FILE's checksum and print its header:\n"
	 "                cluster id and uuid, index, term, machine version,\n"
	 "                release, creation time, payload bytes, keys.\n"
	 "Exit status: 0 saved / verified; 1 an error (FILE exists, a node\n"
	 "did not answer, FILE damaged: the message says which); 2 bad "
	 "usage.\n",
	 ctl_snapshot_options, 2, 2, ctl_cmd_snapshot},
	{"relay",
	 "status|activate|deactivate|attach --relay HOST:PORT [OPTIONS]",
	 "status, activate, deactivate ask baton-relay itself\n"
	 "(docs/relay-server.md) over its protocol (-h, -p are not used);\n"
	 "attach asks the node of -h/-p (docs/relay.md).\n"
	 "  status        active or not, the view number, counters and every\n"
	 "                node of the view (cluster, node, connected, queues,\n"
	 "                messages in and out); needs no secret\n"
	 "  activate      send ACTIVATE to every node (the relay starts\n"
	 "                relaying); kept in its state file\n"
	 "  deactivate    send DEACTIVATE (the relay stops relaying)\n"
	 "  --relay HOST:PORT   the relay's --listen address\n"
	 "  --secret-file FILE  the relay's --admin-secret-file (activate,\n"
	 "                      deactivate): the request is proven with it\n"
	 "  attach        make a running node (started without --relay) an\n"
	 "                old node of the migration, without a restart; lost\n"
	 "                when it restarts. Options, as batond's flags:\n"
	 "    --cluster NAME                 its --relay-cluster\n"
	 "    --migrate-to NAME              the new cluster (--migrate-to)\n"
	 "    --migration-secret-file PATH   absolute, on the node's host\n"
	 "    --relay-secret-file PATH       the same (optional)\n"
	 "Exit status: 0 done; 1 refused (no or a wrong secret, a relay\n"
	 "without --admin-secret-file or too old; attach: the node's reason)\n"
	 "or no answer; 2 bad usage (attach: a secret path not absolute).\n",
	 ctl_relay_options, 1, 1, ctl_cmd_relay},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char global_usage[] =
	"usage: batonctl [-h HOST] [-p PORT] [-a PASSWORD] [--timeout-ms N] "
	"COMMAND [ARGS]\n";

static void print_usage(FILE *f)
{
	fputs(global_usage, f);
	fputs("       batonctl --help | --version\n", f);
	fputs("\ncommands:\n", f);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, commands[i].args[0] ? "  %-10s %s\n" : "  %s\n",
			commands[i].name, commands[i].args);
	fprintf(f,
		"\noptions:\n"
		"  -h HOST          node to ask (default %s)\n"
		"  -p PORT          its client port (default %d)\n"
		"  -a PASSWORD      AUTH with this password (default: the\n"
		"                   environment's BATON_PASSWORD, which ps "
		"does\n"
		"                   not show, as batond reads it)\n"
		"  --timeout-ms N   connect and reply timeout (default %d;\n"
		"                   add, promote, remove and transfer wait up\n"
		"                   to 35 s for their reply unless it is "
		"given)\n"
		"  --help           this text; 'batonctl COMMAND --help' for "
		"one command\n"
		"  --version        batonctl's release and its versions\n"
		"Long options take their value as --port 9101 or --port=9101.\n"
		"\nexit status: 0 success, 1 error, 2 bad usage (roll, "
		"upgrade: also "
		"3 and 4)\n",
		CTL_DEFAULT_HOST, CTL_DEFAULT_PORT, CTL_DEFAULT_TIMEOUT_MS);
}

static void print_command_help(const struct command *c)
{
	printf("usage: batonctl [OPTIONS] %s %s\n\n%s", c->name, c->args,
	       c->help);
}

void ctl_error(const char *fmt, ...)
{
	char msg[2 * CTL_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* Whatever the command, a node that wants a password says NOAUTH. */
	const char *hint = strstr(msg, "NOAUTH") != NULL
				   ? " (give the cluster's password: -a "
				     "PASSWORD, or BATON_PASSWORD in the "
				     "environment)"
				   : "";
	fprintf(stderr, "batonctl: %s%s\n", msg, hint);
}

int ctl_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("batonctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fputs(global_usage, stderr);
	return CTL_EXIT_USAGE;
}

void ctl_opts_addr(const struct ctl_opts *o, char *out, size_t len)
{
	/* An IPv6 number is written in brackets, as everywhere. */
	bool v6 = strchr(o->host, ':') != NULL && o->host[0] != '[';
	snprintf(out, len, "%s%s%s:%d", v6 ? "[" : "", o->host, v6 ? "]" : "",
		 o->port);
}

/* Values of getopt_long for the long-only options. */
enum {
	OPT_TIMEOUT = 0x100,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option global_options[] = {
	{"host", required_argument, NULL, 'h'},
	{"port", required_argument, NULL, 'p'},
	{"password", required_argument, NULL, 'a'},
	{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
	{"help", no_argument, NULL, OPT_HELP},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

/* The option getopt_long just read, as it was written ("-p", "--port"). */
static const char *written_name(char **argv, char *buf, size_t cap)
{
	const char *last = argv[optind - 1];
	bool joined = optarg != NULL && optarg > last &&
		      optarg <= last + strlen(last);
	const char *token = optarg != NULL && !joined ? argv[optind - 2] : last;
	size_t len = token[1] == '-' ? strcspn(token, "=") : 2;
	snprintf(buf, cap, "%.*s", (int)len, token);
	return buf;
}

/* "-p" or "--timeout-ms" for a getopt_long value. */
static const char *option_name(int got, char *buf, size_t cap)
{
	for (const struct option *o = global_options; o->name != NULL; o++)
		if (o->val == got) {
			if (got < 0x100)
				snprintf(buf, cap, "-%c", got);
			else
				snprintf(buf, cap, "--%s", o->name);
			return buf;
		}
	snprintf(buf, cap, "-%c", got);
	return buf;
}

/* Sets one global option from v: 0, or a usage error naming it. */
static int set_global(struct ctl_opts *o, int got, const char *v,
		      const char *name)
{
	uint64_t n;
	/* "-p=9101" as batonctl always took it. */
	if (got < 0x100 && v[0] == '=')
		v++;
	switch (got) {
	case 'h':
		if (v[0] == '\0' || strlen(v) >= CTL_ADDR_MAX - 8)
			return ctl_usage_error("%s '%s': want a host name or "
					       "address of 1..%u characters",
					       name, v, CTL_ADDR_MAX - 9);
		o->host = v;
		return 0;
	case 'p':
		if (!ctl_parse_u64(v, &n) || n < 1 || n > 65535)
			return ctl_usage_error("%s %s: must be a port number "
					       "in 1..65535",
					       name, v);
		o->port = (int)n;
		return 0;
	case 'a':
		if (v[0] == '\0')
			return ctl_usage_error("%s: the password must not be "
					       "empty",
					       name);
		o->password = v;
		return 0;
	default:
		if (!ctl_parse_u64(v, &n) || n < 1 || n > CTL_TIMEOUT_MS_MAX)
			return ctl_usage_error("%s %s: must be a whole number "
					       "of milliseconds in 1..%d",
					       name, v, CTL_TIMEOUT_MS_MAX);
		o->timeout_ms = (int)n;
		o->timeout_given = true;
		return 0;
	}
}

/* What getopt_long could not read, as a usage error. */
static int bad_global(int got, int argc, char **argv)
{
	const char *last = argv[optind - 1];
	char name[32];
	if (got == ':')
		return ctl_usage_error(
			"%s needs a value",
			last[1] == '-'
				? last
				: option_name(optopt, name, sizeof name));
	if (optopt >= OPT_HELP)
		return ctl_usage_error("%s takes no value", last);
	/* A command's option before the command's name. */
	for (int i = optind; i < argc; i++)
		for (size_t k = 0; k < N_COMMANDS; k++)
			if (strcmp(argv[i], commands[k].name) == 0)
				return ctl_usage_error(
					"unknown option '%s' (the options "
					"before the command are -h, -p, -a, "
					"--timeout-ms; a command's own go "
					"after its name: batonctl %s --help)",
					last, commands[k].name);
	return ctl_usage_error("unknown option '%s' (the options are -h "
			       "HOST, -p PORT, -a PASSWORD, --timeout-ms N, "
			       "--help, --version)",
			       last);
}

static void print_version(void)
{
	char r[BATON_RELEASE_STR_MAX];
	const struct baton_profile *own = baton_release_current();
	printf("batonctl %s\npeer protocol %u-%u, machine_max %u\n",
	       baton_release_format(own->release, r), own->proto_min.value,
	       own->proto_max.value, own->machine_max.value);
}

/* Global options up to the command name (getopt_long: "--port=N" and
 * "--port N" alike, and the short ones). Returns the index of the command
 * name, or -1 after help or version (*exit_code 0) or a usage error (2). */
static int parse_globals(int argc, char **argv, struct ctl_opts *o,
			 int *exit_code)
{
	int got;
	optind = 1;
	opterr = 0;
	while ((got = getopt_long(argc, argv, "+:h:p:a:", global_options,
				  NULL)) != -1) {
		if (got == OPT_HELP || got == OPT_VERSION) {
			if (got == OPT_HELP)
				print_usage(stdout);
			else
				print_version();
			*exit_code = CTL_EXIT_OK;
			return -1;
		}
		char name[64];
		int rc = got == '?' || got == ':'
				 ? bad_global(got, argc, argv)
				 : set_global(o, got, optarg,
					      written_name(argv, name,
							   sizeof name));
		if (rc != 0) {
			*exit_code = rc;
			return -1;
		}
	}
	if (optind == argc) {
		*exit_code = ctl_usage_error("no command given");
		return -1;
	}
	return optind;
}

int main(int argc, char **argv)
{
	struct ctl_opts o = {
		.host = CTL_DEFAULT_HOST,
		.port = CTL_DEFAULT_PORT,
		.password = NULL,
		.timeout_ms = CTL_DEFAULT_TIMEOUT_MS,
	};
	int code = CTL_EXIT_OK;
	int at = parse_globals(argc, argv, &o, &code);
	if (at < 0)
		return code;
	const char *env_password = getenv("BATON_PASSWORD");
	if (o.password == NULL && env_password != NULL &&
	    env_password[0] != '\0')
		o.password = env_password;
	const struct command *c = NULL;
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[at], commands[i].name) == 0)
			c = &commands[i];
	if (c == NULL)
		return ctl_usage_error("unknown command '%s'", argv[at]);
	struct ctl_args a;
	int rc = ctl_args_parse(&a, c->name, c->options, argc - at, argv + at);
	if (rc != 0)
		return rc;
	if (a.help) {
		print_command_help(c);
		return CTL_EXIT_OK;
	}
	BATON_ASSERT(c->max_args < CTL_POSITIONALS_MAX);
	if (a.n_positional > c->max_args)
		return ctl_usage_error("%s: unexpected argument '%s' (%s %s)",
				       c->name, a.positional[c->max_args],
				       c->name, c->args);
	if (a.n_positional < c->min_args)
		return ctl_usage_error("%s: missing arguments (%s %s)", c->name,
				       c->name, c->args);
	return c->run(&o, &a);
}
