/*
 * The reference histories (BATON_HISTORIES_DIR, see its README.md): every
 * Jepsen etcd log with a verdict in verdicts.tsv must get it, every other
 * one a definite verdict, and kv/ *-ok* must be linearizable, *-bad* not.
 * A missing directory fails the tests.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reference.h"

#define HISTORIES_PATH_BYTES 4096u
/* Per file: far above what any of them takes (milliseconds). */
#define HISTORIES_TIMEOUT_NS ((int64_t)20 * 1000 * 1000 * 1000)
#define ETCD_LOGS 102u
#define ETCD_VERDICTS 50u
#define KV_FILES 6u

static void path_of(char *out, const char *sub, const char *name)
{
	int n = snprintf(out, HISTORIES_PATH_BYTES, "%s/%s%s%s",
			 ref_histories_dir(), sub, name[0] ? "/" : "", name);
	cr_assert(n > 0 && (size_t)n < HISTORIES_PATH_BYTES);
}

static void require_dir(const char *sub)
{
	char path[HISTORIES_PATH_BYTES];
	path_of(path, sub, "");
	struct stat st;
	cr_assert(ref_histories_dir()[0] != '\0',
		  "BATON_HISTORIES_DIR is not defined for this build");
	cr_assert(stat(path, &st) == 0 && S_ISDIR(st.st_mode),
		  "the reference histories are missing: no directory %s "
		  "(BATON_HISTORIES_DIR)",
		  path);
}

static enum lincheck_verdict verdict_of_file(const char *path,
					     struct lincheck_result *res)
{
	struct lincheck_history h;
	struct lincheck_error err;
	lincheck_history_init(&h);
	int rv = lincheck_load(path, LINCHECK_FORMAT_AUTO, &h, &err);
	cr_assert_eq(rv, 0, "%s", err.text);
	struct lincheck_limits limits = {
		lincheck_now_ns() + HISTORIES_TIMEOUT_NS, 0};
	cr_assert_eq(lincheck_check(&h, &limits, res), 0);
	cr_assert_neq(res->verdict, LINCHECK_VERDICT_UNKNOWN,
		      "%s: no verdict (%s)", path,
		      lincheck_strerror(res->unknown_reason));
	lincheck_history_free(&h);
	return res->verdict;
}

Test(histories, etcd_verdicts)
{
	require_dir("jepsen-etcd");
	char path[HISTORIES_PATH_BYTES];
	path_of(path, "jepsen-etcd", "verdicts.tsv");
	size_t len;
	char *tsv = ref_read_file(path, &len);
	uint32_t checked = 0;
	char *save = NULL;
	for (char *line = strtok_r(tsv, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *tab = strchr(line, '\t');
		cr_assert_not_null(tab, "verdicts.tsv: bad line %s", line);
		*tab = '\0';
		const char *want = tab + 1;
		cr_assert(strcmp(want, "linearizable") == 0 ||
				  strcmp(want, "not-linearizable") == 0,
			  "verdicts.tsv: bad verdict %s", want);
		path_of(path, "jepsen-etcd", line);
		struct lincheck_result res;
		enum lincheck_verdict got = verdict_of_file(path, &res);
		enum lincheck_verdict expected =
			want[0] == 'l' ? LINCHECK_LINEARIZABLE
				       : LINCHECK_NOT_LINEARIZABLE;
		cr_expect_eq(got, expected, "%s: expected %s", line, want);
		checked++;
	}
	free(tsv);
	cr_assert_eq(checked, ETCD_VERDICTS);
}

Test(histories, every_etcd_log_gets_a_verdict)
{
	require_dir("jepsen-etcd");
	uint32_t counts[2] = {0, 0};
	for (uint32_t i = 0; i < ETCD_LOGS; i++) {
		char name[32];
		char path[HISTORIES_PATH_BYTES];
		snprintf(name, sizeof(name), "etcd_%03u.log", i);
		path_of(path, "jepsen-etcd", name);
		struct lincheck_result res;
		counts[verdict_of_file(path, &res)]++;
	}
	/* Published with the Horn-Kroening checker: most are violations. */
	cr_assert_gt(counts[LINCHECK_NOT_LINEARIZABLE], ETCD_LOGS / 2);
	cr_assert_gt(counts[LINCHECK_LINEARIZABLE], 10u);
}

Test(histories, kv_ok_and_bad)
{
	require_dir("kv");
	char path[HISTORIES_PATH_BYTES];
	path_of(path, "kv", "");
	DIR *dir = opendir(path);
	cr_assert_not_null(dir, "cannot open %s", path);
	uint32_t files = 0;
	struct dirent *d;
	while ((d = readdir(dir)) != NULL) {
		bool ok = strstr(d->d_name, "-ok") != NULL;
		bool bad = strstr(d->d_name, "-bad") != NULL;
		if (!ok && !bad)
			continue;
		path_of(path, "kv", d->d_name);
		struct lincheck_result res;
		enum lincheck_verdict got = verdict_of_file(path, &res);
		cr_expect_eq(got,
			     ok ? LINCHECK_LINEARIZABLE
				: LINCHECK_NOT_LINEARIZABLE,
			     "%s", d->d_name);
		if (ok)
			cr_expect_gt(res.ops_checked, 0u, "%s", d->d_name);
		files++;
	}
	closedir(dir);
	cr_assert_geq(files, KV_FILES, "only %u kv histories in %s", files,
		      path);
}

Test(histories, jepsen_round_trip_keeps_the_verdict)
{
	require_dir("jepsen-etcd");
	for (uint32_t i = 0; i < 10; i++) {
		char name[32];
		char path[HISTORIES_PATH_BYTES];
		snprintf(name, sizeof(name), "etcd_%03u.log", i);
		path_of(path, "jepsen-etcd", name);
		struct lincheck_history h, back;
		struct lincheck_error err;
		lincheck_history_init(&h);
		cr_assert_eq(
			lincheck_load(path, LINCHECK_FORMAT_JEPSEN, &h, &err),
			0, "%s", err.text);
		size_t len = 0;
		char *buf = ref_baton_text(&h, &len);
		lincheck_history_init(&back);
		cr_assert_eq(lincheck_parse("back", buf, len,
					    LINCHECK_FORMAT_AUTO, &back, &err),
			     0, "%s", err.text);
		cr_assert_eq(back.format, LINCHECK_FORMAT_BATON);
		struct lincheck_limits limits = {0, 0};
		struct lincheck_result r1, r2;
		cr_assert_eq(lincheck_check(&h, &limits, &r1), 0);
		cr_assert_eq(lincheck_check(&back, &limits, &r2), 0);
		cr_assert_eq(r1.verdict, r2.verdict, "%s", name);
		cr_assert_eq(h.n_ops, back.n_ops);
		free(buf);
		lincheck_history_free(&h);
		lincheck_history_free(&back);
	}
}
