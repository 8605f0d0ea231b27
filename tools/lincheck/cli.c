/* The command-line tool: options, one verdict per file, the exit status. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CLI_EXIT_LINEARIZABLE 0
#define CLI_EXIT_NOT_LINEARIZABLE 1
#define CLI_EXIT_BAD_INPUT 2
#define CLI_EXIT_UNKNOWN 3
/* The largest --timeout-s (about 31 years) and --memory-mb (1 PiB). */
#define CLI_TIMEOUT_S_MAX 1e9
#define CLI_MEMORY_MB_MAX ((uint64_t)1 << 30)

static const char usage[] =
	"usage: baton-lincheck [options] FILE...\n"
	"\n"
	"Decides whether each history FILE is linearizable for a key-value\n"
	"store (get, set, append, del, incr, cas on string keys).\n"
	"\n"
	"  --format F      baton, jepsen or edn (default: told by the "
	"content)\n"
	"  --timeout-s N   give up on a file after N seconds (default 300):\n"
	"                  its verdict is then unknown\n"
	"  --memory-mb N   give up on a file when the search holds N MiB\n"
	"                  (default 2048): its verdict is then unknown\n"
	"  --quiet         print only the files that are not linearizable,\n"
	"                  one line each\n"
	"  --help          print this\n"
	"\n"
	"Formats are described in docs/history-format.md.\n"
	"\n"
	"Exit status: 0 every file is linearizable; 1 some file is not;\n"
	"2 a file cannot be read or is malformed, or bad usage (this wins);\n"
	"3 no violation, but some file's verdict is unknown (a limit).\n";

struct cli {
	enum lincheck_format format;
	double timeout_s;
	uint64_t memory_mb;
	bool quiet;
	FILE *out;
	FILE *err;
};

/* The value of an option given as "--name value" or "--name=value". */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != '\0' || *i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

static bool is_option(const char *a, const char *name)
{
	size_t n = strlen(name);
	return strncmp(a, name, n) == 0 && (a[n] == '\0' || a[n] == '=');
}

static int bad_usage(struct cli *c, const char *what, const char *arg)
{
	fprintf(c->err, "baton-lincheck: %s%s%s\n%s", what,
		arg != NULL ? ": " : "", arg != NULL ? arg : "", usage);
	return CLI_EXIT_BAD_INPUT;
}

static bool parse_timeout(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || !isfinite(v) || v <= 0 ||
	    v > CLI_TIMEOUT_S_MAX)
		return false;
	*out = v;
	return true;
}

static bool parse_memory(const char *s, uint64_t *out)
{
	uint64_t v;
	if (!lincheck__parse_u64(s, strlen(s), &v) || v == 0 ||
	    v > CLI_MEMORY_MB_MAX)
		return false;
	*out = v;
	return true;
}

/* Options into c; the index of the first file, or -exit status. */
static int parse_options(struct cli *c, int argc, char **argv)
{
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		const char *v;
		if (strcmp(a, "--") == 0)
			return i + 1;
		if (a[0] != '-' || a[1] == '\0')
			break;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, c->out);
			return -CLI_EXIT_LINEARIZABLE;
		} else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
			c->quiet = true;
		} else if (is_option(a, "--format")) {
			v = option_value(argc, argv, &i, "--format");
			if (v == NULL || lincheck_format_parse(v, &c->format))
				return -bad_usage(c, "bad --format", v);
		} else if (is_option(a, "--timeout-s")) {
			v = option_value(argc, argv, &i, "--timeout-s");
			if (v == NULL || !parse_timeout(v, &c->timeout_s))
				return -bad_usage(c, "bad --timeout-s", v);
		} else if (is_option(a, "--memory-mb")) {
			v = option_value(argc, argv, &i, "--memory-mb");
			if (v == NULL || !parse_memory(v, &c->memory_mb))
				return -bad_usage(c, "bad --memory-mb", v);
		} else {
			return -bad_usage(c, "unknown option", a);
		}
	}
	if (i >= argc)
		return -bad_usage(c, "no history files", NULL);
	return i;
}

/* One file's exit status. */
static int check_file(struct cli *c, const char *path)
{
	int64_t start = lincheck_now_ns();
	struct lincheck_history h;
	struct lincheck_error err;
	lincheck_history_init(&h);
	int rv = lincheck_load(path, c->format, &h, &err);
	if (rv != 0) {
		fprintf(c->err, "baton-lincheck: %s\n", err.text);
		lincheck_history_free(&h);
		return rv == LINCHECK_ENOMEM ? CLI_EXIT_UNKNOWN
					     : CLI_EXIT_BAD_INPUT;
	}
	struct lincheck_limits limits = {
		start + (int64_t)(c->timeout_s * 1e9),
		c->memory_mb * 1024 * 1024,
	};
	struct lincheck_result res;
	rv = lincheck_check(&h, &limits, &res);
	res.elapsed_ns = lincheck_now_ns() - start;
	if (rv != 0)
		res.unknown_reason = rv;
	if (!c->quiet || res.verdict != LINCHECK_LINEARIZABLE)
		lincheck_result_print(c->out, path, &h, &res, !c->quiet);
	lincheck_history_free(&h);
	switch (res.verdict) {
	case LINCHECK_LINEARIZABLE:
		return CLI_EXIT_LINEARIZABLE;
	case LINCHECK_NOT_LINEARIZABLE:
		return CLI_EXIT_NOT_LINEARIZABLE;
	default:
		return CLI_EXIT_UNKNOWN;
	}
}

/* The worse of two exit statuses: 2, then 1, then 3, then 0. */
static int worse(int a, int b)
{
	static const int rank[] = {0, 2, 3, 1};
	return rank[a] >= rank[b] ? a : b;
}

int lincheck_cli(int argc, char **argv, FILE *out, FILE *err)
{
	struct cli c = {LINCHECK_FORMAT_AUTO,
			LINCHECK_TIMEOUT_S_DEFAULT,
			LINCHECK_MEMORY_MB_DEFAULT,
			false,
			out,
			err};
	int first = parse_options(&c, argc, argv);
	if (first <= 0)
		return -first;
	int status = CLI_EXIT_LINEARIZABLE;
	for (int i = first; i < argc; i++) {
		status = worse(status, check_file(&c, argv[i]));
		fflush(out);
	}
	return status;
}
