/* batonctl: global options, subcommand dispatch and help (ctl.h). */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

struct command {
	const char *name;
	const char *args; /* usage after the name */
	const char *help;
	int min_args, max_args;
	int (*run)(const struct ctl_opts *o, int argc, char **argv);
};

static const struct command commands[] = {
	{"status", "[--json] [--watch [--interval-ms N] [--count N]]",
	 "One row per member: id, address, role (leader, follower, learner,\n"
	 "candidate, or down if it does not answer), term, commit and applied\n"
	 "indexes, match index (the leader's view), release, peer protocol\n"
	 "range, machine_max, and lag (the leader's last index minus the\n"
	 "member's match index). --json prints a JSON array of objects with\n"
	 "the same fields (null where unknown).\n"
	 "  --watch           look again every interval until Ctrl-C; on a\n"
	 "                    terminal each look replaces the last\n"
	 "  --interval-ms N   between two looks (default 2000, 100 or more)\n"
	 "  --count N         stop after N looks\n"
	 "Exit status: 0 (a member down is shown, not an error: see\n"
	 "'batonctl health'); 1 the asked node did not answer.\n",
	 0, 6, ctl_cmd_status},
	{"health", "[--max-lag ENTRIES] [--json]",
	 "Is the cluster fit to serve? Asks the node, the leader and every\n"
	 "member, then prints 'healthy: ...', or 'unhealthy: N problems' and\n"
	 "one line per problem:\n"
	 "  no leader                      no member reports leading\n"
	 "  member N down: WHY             it does not answer\n"
	 "  member N lags by K entries     behind the leader's last index by\n"
	 "                                 more than --max-lag (default 1000)\n"
	 "  storage failed: member N       its log refused a write or fsync\n"
	 "                                 (it then stops, and shows down)\n"
	 "  needs-upgrade: member N ...    it stopped: it needs a newer release\n"
	 "  member N stalled at index I    it stopped applying, and why\n"
	 "  member N was removed           it runs, but is out of the cluster\n"
	 "  no configuration               the node has not joined a cluster\n"
	 "--json prints {\"healthy\", \"leader\", \"members\", \"reasons\"}.\n"
	 "Exit status: 0 healthy; 1 not healthy, or the asked node did not\n"
	 "answer (its error on stderr); 2 bad usage.\n",
	 0, 3, ctl_cmd_health},
	{"members", "",
	 "The members as the given node knows them: id, voter or learner,\n"
	 "peer and client addresses, match index (known on the leader only).\n",
	 0, 0, ctl_cmd_members},
	{"add", "ID PEER_ADDR CLIENT_ADDR",
	 "Add node ID (started with --join) as a learner. Addresses are\n"
	 "host:port. Sent to the leader.\n",
	 3, 3, ctl_cmd_add},
	{"promote", "ID",
	 "Make learner ID a voter, once it has caught up. Sent to the "
	 "leader.\n",
	 1, 1, ctl_cmd_promote},
	{"remove", "ID",
	 "Remove node ID from the cluster (the leader itself too). Sent to\n"
	 "the leader.\n",
	 1, 1, ctl_cmd_remove},
	{"transfer", "[ID]",
	 "Hand leadership to voter ID, or to the most up-to-date voter.\n"
	 "Sent to the leader.\n",
	 0, 1, ctl_cmd_transfer},
	{"downgrade", "validate|enable|cancel|status [RELEASE] [--force]",
	 "An explicit downgrade to RELEASE, the release one step back from\n"
	 "the release floor (see docs/batond.md, \"Downgrade\"):\n"
	 "  validate RELEASE [--force]  check that it could be enabled now:\n"
	 "      every member reachable this term and at or above RELEASE,\n"
	 "      nothing else in flight, and the state machine able to convert\n"
	 "      its data back (keys with a TTL: refused unless --force, which\n"
	 "      makes them persistent). Sent to the leader.\n"
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
	 1, 3, ctl_cmd_downgrade},
	{"roll", "--to RELEASE --restart 'COMMAND {id}' [OPTIONS]",
	 "Roll every member to RELEASE, one node at a time (see\n"
	 "docs/upgrading.md, \"batonctl roll\"). Pre-checks first: every\n"
	 "member answers and is caught up, a leader, no downgrade in\n"
	 "progress, RELEASE known to this batonctl, not below the release\n"
	 "floor, and able to talk to every member. Then followers (least lag\n"
	 "first) and the leader last, after handing its leadership to an\n"
	 "up-to-date node of RELEASE. Per node: run the restart command with\n"
	 "/bin/sh -c ({id} becomes the node id, {release} RELEASE; it must\n"
	 "return once the node is started), then wait until the node reports\n"
	 "RELEASE, has caught up and the cluster has a leader and every "
	 "member\n"
	 "answers. At the end, wait for the effective machine version to rise\n"
	 "as far as RELEASE allows. Members already at RELEASE are skipped.\n"
	 "  --to RELEASE            the release to roll to "
	 "(major.minor.patch)\n"
	 "  --restart COMMAND       e.g. 'systemctl restart baton@{id}'\n"
	 "  --dry-run               print the plan; change nothing\n"
	 "  --pause SECONDS         wait between two nodes (default 0)\n"
	 "  --step-timeout-s N      bound on each restart, each wait, the\n"
	 "                          hand-over and the machine version (60)\n"
	 "  --max-lag ENTRIES       caught up: match within this of the\n"
	 "                          leader's commit (default 1000)\n"
	 "  --json                  one JSON object per line: {\"t\", "
	 "\"event\",\n"
	 "                          \"message\", ...}, events plan, precheck,\n"
	 "                          transfer, restart, wait, node_done,\n"
	 "                          machine_version, done, failed\n"
	 "Exit status: 0 rolled (or nothing to do, or a dry run); 1 failed\n"
	 "during the roll (stopped at once; says the cluster's state and how\n"
	 "to resume or roll back); 2 bad usage; 3 a pre-check refused\n"
	 "(nothing changed); 4 rolled, but the effective machine version did\n"
	 "not rise in time (says what holds it back).\n",
	 0, 16, ctl_cmd_roll},
	{"migrate", "[--dry-run] [--handoff] [--wait-s N]",
	 "Follow a migration between two clusters through baton-relay (see\n"
	 "docs/relay.md), asking a node of the new cluster (started with\n"
	 "--relay and --migrate-from): one line per change of its phase and\n"
	 "import index, until the new cluster holds write authority.\n"
	 "  --dry-run     check the node's relay, activation and view, print\n"
	 "                the plan; change nothing\n"
	 "  --handoff     ask for hand-off now instead of waiting for two\n"
	 "                voters of the new cluster to be caught up\n"
	 "  --wait-s N    give up after N seconds (default 300)\n"
	 "Exit status: 0 authority taken (dry run: nothing blocks it); 1 not\n"
	 "in time, or the node takes no part; 2 bad usage.\n",
	 0, 4, ctl_cmd_migrate},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char global_usage[] =
	"usage: batonctl [-h HOST] [-p PORT] [-a PASSWORD] [--timeout-ms N] "
	"COMMAND [ARGS]\n";

static void print_usage(FILE *f)
{
	fputs(global_usage, f);
	fputs("\ncommands:\n", f);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, commands[i].args[0] ? "  %-10s %s\n" : "  %s\n",
			commands[i].name, commands[i].args);
	fprintf(f,
		"\noptions:\n"
		"  -h HOST          node to ask (default %s)\n"
		"  -p PORT          its client port (default %d)\n"
		"  -a PASSWORD      AUTH with this password\n"
		"  --timeout-ms N   connect and reply timeout (default %d)\n"
		"  --help           this text; 'batonctl COMMAND --help' for "
		"one command\n"
		"\nexit status: 0 success, 1 error, 2 bad usage (roll: also 3 "
		"and 4)\n",
		CTL_DEFAULT_HOST, CTL_DEFAULT_PORT, CTL_DEFAULT_TIMEOUT_MS);
}

static void print_command_help(const struct command *c)
{
	printf("usage: batonctl [OPTIONS] %s %s\n\n%s", c->name, c->args,
	       c->help);
}

void ctl_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("batonctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
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
	fputs("try 'batonctl --help'\n", stderr);
	return CTL_EXIT_USAGE;
}

void ctl_opts_addr(const struct ctl_opts *o, char *out, size_t len)
{
	snprintf(out, len, "%s:%d", o->host, o->port);
}

static bool parse_int(const char *s, int min, int max, int *out)
{
	uint64_t v;
	if (!ctl_parse_u64(s, &v) || v < (uint64_t)min || v > (uint64_t)max)
		return false;
	*out = (int)v;
	return true;
}

/* The value of option argv[*i]: "--opt=value" or the next argument. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
	const char *a = argv[*i];
	size_t n = strlen(name);
	if (strncmp(a, name, n) == 0 && a[n] == '=')
		return a + n + 1;
	if (*i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

enum option_kind { OPT_HOST, OPT_PORT, OPT_PASSWORD, OPT_TIMEOUT };

static const struct {
	const char *name;
	enum option_kind kind;
} options[] = {
	{"-h", OPT_HOST},
	{"--host", OPT_HOST},
	{"-p", OPT_PORT},
	{"--port", OPT_PORT},
	{"-a", OPT_PASSWORD},
	{"--password", OPT_PASSWORD},
	{"--timeout-ms", OPT_TIMEOUT},
};

/* The option `a` names ("-p" or "-p=..."), or -1. */
static int find_option(const char *a)
{
	for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
		size_t n = strlen(options[i].name);
		if (strncmp(a, options[i].name, n) == 0 &&
		    (a[n] == '\0' || a[n] == '='))
			return (int)i;
	}
	return -1;
}

static bool set_option(struct ctl_opts *o, enum option_kind kind, const char *v)
{
	if (v[0] == '\0')
		return false;
	switch (kind) {
	case OPT_HOST:
		o->host = v;
		return strlen(v) < CTL_ADDR_MAX - 8;
	case OPT_PORT:
		return parse_int(v, 1, 65535, &o->port);
	case OPT_PASSWORD:
		o->password = v;
		return true;
	case OPT_TIMEOUT:
		return parse_int(v, 1, CTL_TIMEOUT_MS_MAX, &o->timeout_ms);
	}
	return false;
}

/* Global options up to the command name. Returns the index of the command
 * name, or -1 after printing help (*exit_code 0) or a usage error (2). */
static int parse_globals(int argc, char **argv, struct ctl_opts *o,
			 int *exit_code)
{
	int i;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			print_usage(stdout);
			*exit_code = CTL_EXIT_OK;
			return -1;
		}
		int k = find_option(argv[i]);
		if (k < 0) {
			*exit_code =
				ctl_usage_error("unknown option '%s'", argv[i]);
			return -1;
		}
		const char *name = options[k].name;
		const char *v = option_value(argc, argv, &i, name);
		if (v == NULL) {
			*exit_code = ctl_usage_error("%s needs a value", name);
			return -1;
		}
		if (!set_option(o, options[k].kind, v)) {
			*exit_code = ctl_usage_error("bad value '%s' for %s", v,
						     name);
			return -1;
		}
	}
	if (i == argc) {
		*exit_code = ctl_usage_error("no command given");
		return -1;
	}
	return i;
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
	const struct command *c = NULL;
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[at], commands[i].name) == 0)
			c = &commands[i];
	if (c == NULL)
		return ctl_usage_error("unknown command '%s'", argv[at]);
	int n = argc - at - 1;
	char **args = argv + at + 1;
	for (int i = 0; i < n; i++) {
		if (strcmp(args[i], "--help") == 0) {
			print_command_help(c);
			return CTL_EXIT_OK;
		}
	}
	if (n < c->min_args || n > c->max_args)
		return ctl_usage_error("%s: wrong number of arguments (%s %s)",
				       c->name, c->name, c->args);
	return c->run(&o, n, args);
}
