/* The command line: options, output, and the exit status of each case. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference.h"

#define CLI_ARGS_MAX 16
#define CLI_PATH_BYTES 64u
/* Concurrent indeterminate increments in the hard history: 2^n sums. */
#define HARD_INCRS 40u

struct run {
	int status;
	char *out;
	char *err;
	size_t out_len;
	size_t err_len;
};

static struct run cli(const char *first, ...)
{
	char *argv[CLI_ARGS_MAX];
	int argc = 0;
	argv[argc++] = (char *)"baton-lincheck";
	va_list ap;
	va_start(ap, first);
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) {
		cr_assert_lt(argc, CLI_ARGS_MAX - 1);
		argv[argc++] = (char *)a;
	}
	va_end(ap);
	argv[argc] = NULL;
	struct run r;
	memset(&r, 0, sizeof(r));
	FILE *out = open_memstream(&r.out, &r.out_len);
	FILE *err = open_memstream(&r.err, &r.err_len);
	cr_assert(out != NULL && err != NULL);
	r.status = lincheck_cli(argc, argv, out, err);
	fclose(out);
	fclose(err);
	return r;
}

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* A temporary file holding text; its path in path. */
static void temp_file(char *path, const char *text)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, CLI_PATH_BYTES, "%s/lincheck-XXXXXX",
		 dir != NULL && strlen(dir) < CLI_PATH_BYTES - 20 ? dir
								  : "/tmp");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0, "mkstemp %s", path);
	size_t n = strlen(text);
	cr_assert_eq(write(fd, text, n), (ssize_t)n);
	close(fd);
}

static const char lin_text[] = "baton-history\t1\n"
			       "0\t1\tinvoke\tset\tk\t=a\n1\t1\tok\tset\tk\n"
			       "2\t2\tinvoke\tget\tk\n3\t2\tok\tget\tk\t=a\n";
static const char not_text[] = "baton-history\t1\n"
			       "0\t1\tinvoke\tset\tk\t=a\n1\t1\tok\tset\tk\n"
			       "2\t2\tinvoke\tget\tk\n3\t2\tok\tget\tk\t-\n";
static const char bad_text[] = "baton-history\t1\n"
			       "0\t1\tinvoke\tset\tk\t=a\n"
			       "1\t1\tok\tset\tk\textra\n";

/* Many concurrent indeterminate increments by distinct even powers of two
 * and an odd read no subset of them explains (though it is in the range
 * of their sums): 2^HARD_INCRS states to rule out. */
static char *hard_text(void)
{
	size_t cap = 64 + HARD_INCRS * 64;
	char *t = malloc(cap);
	cr_assert_not_null(t);
	size_t n = (size_t)snprintf(t, cap, "baton-history\t1\n");
	for (uint32_t i = 0; i < HARD_INCRS; i++)
		n += (size_t)snprintf(t + n, cap - n,
				      "1\t%u\tinvoke\tincr\tk\t%llu\n", i + 1,
				      2ull << i);
	n += (size_t)snprintf(t + n, cap - n,
			      "2\t999\tinvoke\tget\tk\n3\t999\tok\tget\tk\t"
			      "=1099511627777\n");
	cr_assert_lt(n, cap);
	return t;
}

struct files {
	char lin[CLI_PATH_BYTES];
	char not [CLI_PATH_BYTES];
	char bad[CLI_PATH_BYTES];
	char hard[CLI_PATH_BYTES];
};

static struct files files;

static void make_files(void)
{
	temp_file(files.lin, lin_text);
	temp_file(files.not, not_text);
	temp_file(files.bad, bad_text);
	char *hard = hard_text();
	temp_file(files.hard, hard);
	free(hard);
}

static void remove_files(void)
{
	unlink(files.lin);
	unlink(files.not );
	unlink(files.bad);
	unlink(files.hard);
}

TestSuite(cli, .init = make_files, .fini = remove_files);

Test(cli, help_and_usage_errors)
{
	struct run r = cli("--help", NULL);
	cr_assert_eq(r.status, 0);
	cr_assert_not_null(strstr(r.out, "usage: baton-lincheck"));
	cr_assert_not_null(strstr(r.out, "Exit status"));
	run_free(&r);
	const char *bad[][3] = {
		{NULL, NULL, NULL},
		{"--bogus", files.lin, NULL},
		{"--format", "xml", files.lin},
		{"--format", NULL, NULL},
		{"--timeout-s", "abc", files.lin},
		{"--timeout-s", "0", files.lin},
		{"--timeout-s=-1", files.lin, NULL},
		{"--memory-mb", "0", files.lin},
		{"--quiet", NULL, NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		r = cli(bad[i][0], bad[i][1], bad[i][2], NULL);
		cr_expect_eq(r.status, 2, "case %zu", i);
		cr_expect_not_null(strstr(r.err, "usage:"), "case %zu: %s", i,
				   r.err);
		run_free(&r);
	}
}

Test(cli, linearizable)
{
	struct run r = cli(files.lin, NULL);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert_not_null(strstr(r.out, ": linearizable (2 operations"), "%s",
			   r.out);
	run_free(&r);
	r = cli("--quiet", "--format=baton", "--timeout-s", "5", files.lin,
		files.lin, NULL);
	cr_assert_eq(r.status, 0);
	cr_assert_eq(r.out_len, 0u, "%s", r.out);
	cr_assert_eq(r.err_len, 0u, "%s", r.err);
	run_free(&r);
}

Test(cli, not_linearizable)
{
	struct run r = cli(files.lin, files.not, NULL);
	cr_assert_eq(r.status, 1);
	cr_assert_not_null(strstr(r.out, files.not ), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "NOT linearizable (key \"k\""), "%s",
			   r.out);
	cr_assert_not_null(strstr(r.out, "longest linearizable prefix"), "%s",
			   r.out);
	run_free(&r);
	r = cli("-q", files.not, files.lin, NULL);
	cr_assert_eq(r.status, 1);
	cr_assert_null(strstr(r.out, "prefix"), "%s", r.out);
	cr_assert_null(strchr(strchr(r.out, '\n') + 1, '\n'), "%s", r.out);
	run_free(&r);
}

Test(cli, unreadable_or_malformed)
{
	struct run r = cli(files.bad, NULL);
	cr_assert_eq(r.status, 2);
	char want[CLI_PATH_BYTES + 8];
	snprintf(want, sizeof(want), "%s:3: ", files.bad);
	cr_assert_not_null(strstr(r.err, want), "%s", r.err);
	run_free(&r);
	r = cli("/nonexistent/history.txt", NULL);
	cr_assert_eq(r.status, 2);
	cr_assert_not_null(strstr(r.err, "/nonexistent/history.txt"), "%s",
			   r.err);
	run_free(&r);
	r = cli("--format", "edn", files.lin, NULL);
	cr_assert_eq(r.status, 2);
	run_free(&r);
	/* Bad input wins over a violation. */
	r = cli(files.not, files.bad, NULL);
	cr_assert_eq(r.status, 2);
	run_free(&r);
}

Test(cli, unknown_when_a_limit_is_reached)
{
	struct run r = cli("--timeout-s", "0.3", files.hard, NULL);
	cr_assert_eq(r.status, 3, "%s%s", r.out, r.err);
	cr_assert_not_null(strstr(r.out, "unknown: time limit reached"), "%s",
			   r.out);
	run_free(&r);
	r = cli("--memory-mb", "1", files.hard, NULL);
	cr_assert_eq(r.status, 3, "%s%s", r.out, r.err);
	cr_assert_not_null(strstr(r.out, "unknown: memory limit reached"), "%s",
			   r.out);
	run_free(&r);
	/* A violation wins over unknown; unknown over linearizable. */
	r = cli("--timeout-s", "0.2", files.hard, files.not, NULL);
	cr_assert_eq(r.status, 1);
	run_free(&r);
	r = cli("--timeout-s", "0.2", files.lin, files.hard, "-q", NULL);
	cr_assert_eq(r.status, 2); /* "-q" after the files is a file */
	run_free(&r);
	r = cli("-q", "--timeout-s", "0.2", files.lin, files.hard, NULL);
	cr_assert_eq(r.status, 3);
	run_free(&r);
}
