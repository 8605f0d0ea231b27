/* batonctl: a command's own options, read with getopt_long (ctl.h). */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "ctl.h"

/* getopt_long's values: a positional argument (optstring "-"), --help, and
 * the option at index i of the command's table (above any character). */
#define VAL_POSITIONAL 1
#define VAL_HELP 0xff
#define VAL_OPTION_BASE 0x100

/* Room for the list of a command's options in a refusal. */
#define OPTION_LIST_MAX 256u

static size_t count_options(const struct ctl_option *options)
{
	size_t n = 0;
	while (options != NULL && options[n].name != NULL)
		n++;
	BATON_ASSERT(n <= CTL_OPTIONS_MAX);
	return n;
}

/* "CMD: <message>" and the usage line; CTL_EXIT_USAGE. */
static int refuse(const struct ctl_args *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int refuse(const struct ctl_args *a, const char *fmt, ...)
{
	char msg[CTL_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return ctl_usage_error("%s: %s", a->cmd, msg);
}

/* "--json, --count N" for the options of `a` whose name starts with
 * `prefix` (all of them for ""). */
static void list_options(const struct ctl_args *a, const char *prefix,
			 char *out, size_t cap)
{
	size_t used = 0, plen = strlen(prefix);
	out[0] = '\0';
	for (size_t i = 0; i < count_options(a->options); i++) {
		const struct ctl_option *opt = &a->options[i];
		if (strncmp(opt->name, prefix, plen) != 0 || used >= cap)
			continue;
		int w = snprintf(out + used, cap - used, "%s--%s%s%s",
				 used ? ", " : "", opt->name,
				 opt->value_name ? " " : "",
				 opt->value_name ? opt->value_name : "");
		if (w > 0)
			used += (size_t)w;
	}
}

/* The refusal of what getopt_long could not take: `got` is '?' or ':',
 * `token` the argument it was reading as written. */
static int refuse_option(const struct ctl_args *a, int got, const char *token)
{
	if (got == ':') {
		/* Only the table's options take a value. */
		BATON_ASSERT(optopt >= VAL_OPTION_BASE);
		const struct ctl_option *opt =
			&a->options[optopt - VAL_OPTION_BASE];
		return refuse(a, "--%s needs a value (--%s %s)", opt->name,
			      opt->name, opt->value_name);
	}
	if (optopt >= VAL_OPTION_BASE)
		return refuse(a, "--%s takes no value",
			      a->options[optopt - VAL_OPTION_BASE].name);
	if (optopt == VAL_HELP)
		return refuse(a, "--help takes no value");
	int len = (int)strcspn(token, "=");
	char list[OPTION_LIST_MAX];
	if (optopt == 0 && token[1] == '-') {
		/* An abbreviation of more than one of the options. */
		char prefix[CTL_VALUE_MAX];
		snprintf(prefix, sizeof prefix, "%.*s", len - 2, token + 2);
		list_options(a, prefix, list, sizeof list);
		bool help_too = strncmp("help", prefix, strlen(prefix)) == 0;
		if (strchr(list, ',') != NULL || (help_too && list[0] != '\0'))
			return refuse(a, "ambiguous option '%.*s' (%s%s)", len,
				      token, list, help_too ? ", --help" : "");
	}
	list_options(a, "", list, sizeof list);
	if (list[0] == '\0')
		return refuse(a, "unknown option '%.*s' (%s takes no options)",
			      len, token, a->cmd);
	return refuse(a, "unknown option '%.*s' (%s takes %s)", len, token,
		      a->cmd, list);
}

static void add_positional(struct ctl_args *a, const char *arg)
{
	if (a->n_positional < CTL_POSITIONALS_MAX)
		a->positional[a->n_positional] = arg;
	a->n_positional++;
}

int ctl_args_parse(struct ctl_args *a, const char *cmd,
		   const struct ctl_option *options, int argc, char **argv)
{
	BATON_ASSERT(argc >= 1 && cmd != NULL);
	memset(a, 0, sizeof *a);
	a->cmd = cmd;
	a->options = options;
	size_t n = count_options(options);
	struct option longs[CTL_OPTIONS_MAX + 2];
	for (size_t i = 0; i < n; i++)
		longs[i] = (struct option){
			.name = options[i].name,
			.has_arg = options[i].value_name ? required_argument
							 : no_argument,
			.val = VAL_OPTION_BASE + (int)i,
		};
	longs[n] = (struct option){.name = "help", .val = VAL_HELP};
	longs[n + 1] = (struct option){0};
	/* optind 0: glibc starts afresh (parse_globals read this argv
	 * before). "-": positional arguments come back in their place as
	 * VAL_POSITIONAL, so "save FILE --force" and "--force save FILE" read
	 * alike and POSIXLY_CORRECT changes nothing. ":": a missing value
	 * comes back as ':'. A long option's value is the next argument
	 * whatever it begins with (roll --restart '-x {id}'). */
	optind = 0;
	opterr = 0;
	for (;;) {
		const char *token = argv[optind > 0 ? optind : 1];
		int got = getopt_long(argc, argv, "-:", longs, NULL);
		if (got == -1)
			break;
		if (got == VAL_POSITIONAL) {
			add_positional(a, optarg);
		} else if (got == VAL_HELP) {
			a->help = true;
			return 0;
		} else if (got >= VAL_OPTION_BASE) {
			a->values[got - VAL_OPTION_BASE] =
				optarg != NULL ? optarg : "";
		} else {
			return refuse_option(a, got, token);
		}
	}
	/* After "--" everything is positional. */
	for (int i = optind; i < argc; i++)
		add_positional(a, argv[i]);
	return 0;
}

/* Where `name` is in the command's table: the code asks only for its own
 * options. */
static size_t option_index(const struct ctl_args *a, const char *name)
{
	size_t n = count_options(a->options), i = 0;
	while (i < n && strcmp(a->options[i].name, name) != 0)
		i++;
	BATON_ASSERT(i < n);
	return i;
}

const char *ctl_args_value(const struct ctl_args *a, const char *name)
{
	return a->values[option_index(a, name)];
}

bool ctl_args_flag(const struct ctl_args *a, const char *name)
{
	return ctl_args_value(a, name) != NULL;
}

int ctl_args_bad_value(const struct ctl_args *a, const char *name,
		       const char *range)
{
	return refuse(a, "--%s must be %s, got '%s'", name, range,
		      ctl_args_value(a, name));
}

int ctl_args_u64(const struct ctl_args *a, const char *name, uint64_t min,
		 uint64_t max, const char *unit, uint64_t *out)
{
	const char *v = ctl_args_value(a, name);
	uint64_t n;
	if (v == NULL)
		return 0;
	if (ctl_parse_u64(v, &n) && n >= min && n <= max) {
		*out = n;
		return 0;
	}
	char range[96];
	if (max == UINT64_MAX)
		snprintf(range, sizeof range, "%" PRIu64 " or more%s%s", min,
			 unit ? " " : "", unit ? unit : "");
	else
		snprintf(range, sizeof range, "%" PRIu64 " to %" PRIu64 "%s%s",
			 min, max, unit ? " " : "", unit ? unit : "");
	return ctl_args_bad_value(a, name, range);
}
