/*
 * An optional differential check of the hash commands, TYPE and the
 * string commands they meet against a real Redis 7: the same random
 * commands sent to both, every reply compared byte for byte (the arrays
 * whose order Redis does not fix, HGETALL, HKEYS, HVALS and a whole HSCAN,
 * compared as sorted lists).
 *
 * Skipped unless BATON_REDIS_DIFF_SOCKET names the unix socket of a
 * throwaway redis-server (it runs FLUSHALL), e.g.
 *   redis-server --port 0 --unixsocket /tmp/r.sock --save '' &
 *   BATON_REDIS_DIFF_SOCKET=/tmp/r.sock build/kv_tests --filter
 * 'redis/replies*'
 */
#define _DEFAULT_SOURCE /* fdopen */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kv_util.h"

#define COMMANDS 20000
#define REPLY_BYTES_MAX (1u << 20)

static FILE *redis_open(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	cr_assert_lt(strlen(path), sizeof a.sun_path);
	memcpy(a.sun_path, path, strlen(path));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0,
		     "cannot connect to %s", path);
	FILE *f = fdopen(fd, "r+");
	cr_assert_not_null(f);
	return f;
}

/* One whole RESP2 reply from f, appended to out. */
static void read_reply(FILE *f, struct baton_buf *out)
{
	char line[256];
	cr_assert_not_null(fgets(line, sizeof line, f));
	cr_assert_eq(baton_buf_append(out, line, strlen(line)), 0);
	long n = strtol(line + 1, NULL, 10);
	if (line[0] == '$' && n >= 0) {
		cr_assert_lt((unsigned long)n, REPLY_BYTES_MAX);
		char *bytes = malloc((size_t)n + 2);
		cr_assert_eq(fread(bytes, 1, (size_t)n + 2, f), (size_t)n + 2);
		cr_assert_eq(baton_buf_append(out, bytes, (size_t)n + 2), 0);
		free(bytes);
	} else if (line[0] == '*') {
		for (long i = 0; i < n; i++)
			read_reply(f, out);
	}
}

static const char *redis_run(FILE *f, int argc, const char *const *argv,
			     const size_t *lens, struct baton_buf *out)
{
	fprintf(f, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++) {
		fprintf(f, "$%zu\r\n", lens[i]);
		fwrite(argv[i], 1, lens[i], f);
		fputs("\r\n", f);
	}
	fflush(f);
	baton_buf_reset(out);
	read_reply(f, out);
	cr_assert_eq(baton_buf_append(out, "", 1), 0);
	return (const char *)out->data;
}

/* An array of bulks (or, from `from`, the array inside a scan reply) as
 * its elements sorted (pairs kept together when `pairs`), re-encoded. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sorted(const char *reply, bool scan, bool pairs, char *out,
		   size_t cap)
{
	const char *q = reply;
	if (scan) { /* "*2\r\n$1\r\n0\r\n" then the array */
		cr_assert_eq(strncmp(q, "*2\r\n$1\r\n0\r\n", 11), 0,
			     "a scan not done in one call: %s", reply);
		q += 11;
	}
	if (*q != '*') { /* an error */
		snprintf(out, cap, "%s", reply);
		return;
	}
	long n = strtol(q + 1, NULL, 10);
	q = strchr(q, '\n') + 1;
	char **items = calloc((size_t)n + 1, sizeof *items);
	long per = pairs ? 2 : 1;
	for (long i = 0; i < n; i += per) {
		const char *start = q;
		for (long j = 0; j < per; j++) {
			long len = strtol(q + 1, NULL, 10);
			q = strchr(q, '\n') + 1 + len + 2;
		}
		items[i / per] = strndup(start, (size_t)(q - start));
	}
	qsort(items, (size_t)(n / per), sizeof *items, cmp_str);
	size_t used = (size_t)snprintf(out, cap, "*%ld\r\n", n);
	for (long i = 0; i < n / per; i++) {
		used += (size_t)snprintf(out + used, cap - used, "%s",
					 items[i]);
		free(items[i]);
	}
	free(items);
	cr_assert_lt(used, cap);
}

/* A random command of the set compared. */
static int random_command(uint64_t *rng, char *pool, const char **argv,
			  size_t *lens)
{
	static const char *const keys[] = {"a", "b", "c", "d", "s"};
	static const char *const nums[] = {"1",
					   "-7",
					   "9223372036854775807",
					   "-9223372036854775808",
					   "010",
					   "x",
					   "",
					   "+3",
					   "-0",
					   "42"};
	int argc = 0;
	char *p = pool;
#define ARG(...)                                                               \
	do {                                                                   \
		int n_ = sprintf(p, __VA_ARGS__);                              \
		argv[argc] = p;                                                \
		lens[argc++] = (size_t)n_;                                     \
		p += n_ + 1;                                                   \
	} while (0)
	const char *k = keys[kvt_rand(rng) % 5];
	unsigned f = (unsigned)(kvt_rand(rng) % 6);
	const char *num = nums[kvt_rand(rng) % 10];
	static const char *const names[] = {
		"HSET",	   "HSET",    "HGET",	 "HMGET",  "HDEL",   "HLEN",
		"HEXISTS", "HINCRBY", "HGETALL", "HKEYS",  "HVALS",  "HSCAN",
		"TYPE",	   "GET",     "SET",	 "APPEND", "INCR",   "STRLEN",
		"MGET",	   "DEL",     "EXISTS",	 "GETEX",  "INCRBY", "HSET"};
	const char *name = names[kvt_rand(rng) % 24];
	ARG("%s", name);
	if (strcmp(name, "MGET") == 0 || strcmp(name, "EXISTS") == 0) {
		ARG("%s", k);
		ARG("%s", keys[kvt_rand(rng) % 5]);
	} else {
		ARG("%s", k);
	}
	if (strcmp(name, "HSET") == 0) {
		for (unsigned i = 0, n = 1 + f % 3; i < n; i++) {
			ARG("f%u", (unsigned)(kvt_rand(rng) % 6));
			ARG("%s", nums[kvt_rand(rng) % 10]);
		}
		if (kvt_rand(rng) % 20 == 0)
			ARG("odd"); /* an arity error */
	} else if (strcmp(name, "HGET") == 0 || strcmp(name, "HEXISTS") == 0) {
		ARG("f%u", f);
	} else if (strcmp(name, "HMGET") == 0 || strcmp(name, "HDEL") == 0) {
		ARG("f%u", f);
		ARG("f%u", (unsigned)(kvt_rand(rng) % 6));
	} else if (strcmp(name, "HINCRBY") == 0) {
		ARG("f%u", f);
		ARG("%s", num);
	} else if (strcmp(name, "HSCAN") == 0) {
		ARG("0");
		ARG("COUNT");
		ARG("1000");
	} else if (strcmp(name, "SET") == 0 || strcmp(name, "APPEND") == 0) {
		ARG("%s", num);
		if (name[0] == 'S' && kvt_rand(rng) % 3 == 0)
			ARG("GET");
	} else if (strcmp(name, "INCRBY") == 0) {
		ARG("%s", num);
	}
#undef ARG
	return argc;
}

Test(redis, replies_equal_redis_7)
{
	const char *path = getenv("BATON_REDIS_DIFF_SOCKET");
	if (path == NULL || path[0] == '\0')
		cr_skip_test("BATON_REDIS_DIFF_SOCKET is not set");
	FILE *f = redis_open(path);
	struct baton_buf theirs;
	baton_buf_init(&theirs);
	const char *flush[] = {"FLUSHALL"};
	size_t flush_len[] = {8};
	redis_run(f, 1, flush, flush_len, &theirs);
	struct baton_kv *kv = kvt_new();
	kvt_use(3, 1700000000000ull);
	uint64_t rng = 1;
	static char ours_sorted[1 << 16], theirs_sorted[1 << 16];
	for (int i = 0; i < COMMANDS; i++) {
		char pool[512];
		const char *argv[16];
		size_t lens[16];
		int argc = random_command(&rng, pool, argv, lens);
		const char *ours = kvt_runv(kv, argc, argv, lens);
		size_t n = strlen(ours) + 1;
		char *mine = malloc(n);
		memcpy(mine, ours, n);
		redis_run(f, argc, argv, lens, &theirs);
		const char *t = (const char *)theirs.data;
		bool scan = strcmp(argv[0], "HSCAN") == 0;
		bool pairs = scan || strcmp(argv[0], "HGETALL") == 0;
		if (scan || pairs || strcmp(argv[0], "HKEYS") == 0 ||
		    strcmp(argv[0], "HVALS") == 0) {
			sorted(mine, scan && mine[0] == '*', pairs, ours_sorted,
			       sizeof ours_sorted);
			sorted(t, scan && t[0] == '*', pairs, theirs_sorted,
			       sizeof theirs_sorted);
			cr_assert_str_eq(ours_sorted, theirs_sorted,
					 "command %d (%s %s)", i, argv[0],
					 argv[1]);
		} else {
			cr_assert_str_eq(mine, t, "command %d (%s %s)", i,
					 argv[0], argv[1]);
		}
		free(mine);
	}
	kv_destroy(kv);
	baton_buf_free(&theirs);
	fclose(f);
}
