/*
 * The linearizability checker (tools/lincheck) on long histories: how
 * the time to a verdict grows with the operations, the keys, the clients
 * and the share of indeterminate operations.
 *
 * Each history is recorded from a simulated linearizable execution drawn
 * from the seed: C clients, each with one operation in flight, on K keys.
 * An operation has an invocation, a linearization point strictly inside
 * its interval (where it takes effect on an in-memory model of the keys)
 * and a completion. Some time out (indeterminate: recorded as an
 * invocation with no completion, the client going on as a new process;
 * the operation took effect at its point or never, at random) and some
 * fail (refused: no effect). The mix is the fault harness's (get 35%, set
 * 20%, append 20%, incr 15%, del 10%), with unique SET/APPEND values.
 * Corrupted cases change one read near the end to a value no write
 * produced, or to an old overwritten one: they must be refused.
 *
 *   build/bench-lincheck [--seed N] [--quick] [--timeout-s N]
 *                        [--memory-mb N] [--info-permille N]
 *                        [--case NAME] [--write FILE]
 *
 * Exit status 0 if every case got the expected verdict, 1 if not (or a
 * limit was reached: "unknown"), 2 for a bad command line.
 */
#include "internal.h" /* lincheck__mix */
#include "lincheck.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* An operation's latency and a client's think time between two. */
#define BENCH_LATENCY_NS_MIN 50000
#define BENCH_LATENCY_NS_MAX 1000000
#define BENCH_THINK_NS_MAX 100000
/* After this a client gives up on an operation (indeterminate) and goes
 * on as a new process. */
#define BENCH_CLIENT_TIMEOUT_NS 5000000
/* Operations that fail (refused before taking effect), per mille. */
#define BENCH_FAIL_PERMILLE 20u
/* Corrupted reads are among the last operations, per mille of them. */
#define BENCH_TAIL_PERMILLE 20u
/* A stale value is a SET's from the first half, at least this number, so
 * that nothing near the end could rebuild it (see stale_ok). */
#define BENCH_STALE_VALUE_MIN 100
/* A value no write produces (writes are decimal numbers). */
#define BENCH_PHANTOM "phantom"
/* Limits of a case and of the command line. */
#define BENCH_KEYS_MAX 1024u
#define BENCH_CLIENTS_MAX 1024u
#define BENCH_VALUE_BYTES_MAX ((size_t)1 << 20)
#define BENCH_TIMEOUT_S_DEFAULT 30.0
#define BENCH_MEMORY_MB_DEFAULT LINCHECK_MEMORY_MB_DEFAULT
#define BENCH_NAME_BYTES 32u
/* Indeterminate plus failed operations stay within the 1000 per mille. */
#define BENCH_INFO_PERMILLE_MAX (1000u - BENCH_FAIL_PERMILLE)

enum corruption {
	CORRUPT_NONE = 0,
	CORRUPT_PHANTOM, /* a value no write produced */
	CORRUPT_STALE,	 /* an old, overwritten value */
};

struct bench_case {
	const char *name;
	uint32_t ops;
	uint32_t keys;
	uint32_t clients;
	uint32_t info_permille;
	enum corruption corrupt;
};

/*
 * The corrupted cases change one read of key 0 near its end. Those with
 * indeterminate ops have the fault harness's shape (tests/jepsen: many
 * keys of about 300 ops each, a few indeterminate ops per key); the
 * "noinfo" ones refute one long key with no indeterminate op, the cost of
 * a refutation itself. A long key with open indeterminate ops is the
 * checker's known weak spot (docs/benchmarks.md): --case
 * 1key-10k-phantom-noinfo --info-permille 1 shows it.
 */
static const struct bench_case cases[] = {
	{"1key-10k", 10000, 1, 10, 10, CORRUPT_NONE},
	{"1key-50k", 50000, 1, 10, 10, CORRUPT_NONE},
	{"1key-100k", 100000, 1, 10, 10, CORRUPT_NONE},
	{"10keys-100k", 100000, 10, 50, 10, CORRUPT_NONE},
	{"1key-20k-info5", 20000, 1, 10, 50, CORRUPT_NONE},
	{"333keys-100k-phantom", 100000, 333, 10, 10, CORRUPT_PHANTOM},
	{"333keys-100k-stale", 100000, 333, 10, 10, CORRUPT_STALE},
	{"1key-10k-phantom-noinfo", 10000, 1, 10, 0, CORRUPT_PHANTOM},
	{"1key-50k-stale-noinfo", 50000, 1, 10, 0, CORRUPT_STALE},
	{"1key-100k-phantom-noinfo", 100000, 1, 10, 0, CORRUPT_PHANTOM},
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))
/* --quick divides the operations by this. */
#define BENCH_QUICK_DIVISOR 10u

struct options {
	uint64_t seed;
	bool quick;
	double timeout_s;
	uint32_t memory_mb;
	const char *only;      /* a case's name, or NULL: all */
	int32_t info_permille; /* overrides the cases' share; -1: not */
	const char *write_path;
};

struct rng {
	uint64_t s;
};

/* splitmix64: the finaliser of a Weyl sequence. */
static uint64_t rng_next(struct rng *r)
{
	return lincheck__mix(r->s += 0x9e3779b97f4a7c15u);
}

static uint64_t rng_below(struct rng *r, uint64_t n)
{
	assert(n > 0);
	return rng_next(r) % n;
}

static int64_t rng_range(struct rng *r, int64_t lo, int64_t hi)
{
	assert(lo <= hi);
	return lo + (int64_t)rng_below(r, (uint64_t)(hi - lo) + 1);
}

static void die(const char *what, int code, const struct lincheck_error *err)
{
	fprintf(stderr, "bench-lincheck: %s: %s%s%s\n", what,
		lincheck_strerror(code), err != NULL ? ": " : "",
		err != NULL ? err->text : "");
	exit(2);
}

/* ------------------------------------------------------------------------ */
/* The execution: one Redis string per key.                                 */

struct kv {
	char *bytes;
	size_t len;
	size_t cap;
	bool present;
};

static void kv_put(struct kv *v, size_t at, const void *data, size_t len)
{
	if (at + len > BENCH_VALUE_BYTES_MAX)
		die("a value grew too long", LINCHECK_ELIMIT, NULL);
	if (at + len > v->cap) {
		size_t cap = v->cap < 64 ? 64 : v->cap;
		while (cap < at + len)
			cap *= 2;
		v->bytes = realloc(v->bytes, cap);
		if (v->bytes == NULL)
			die("value", LINCHECK_ENOMEM, NULL);
		v->cap = cap;
	}
	memcpy(v->bytes + at, data, len);
	v->len = at + len;
	v->present = true;
}

/* Redis's strict integer syntax: "0", or an optional '-', a non-zero
 * digit and digits, within int64. */
static bool strict_i64(const char *s, size_t n, int64_t *out)
{
	if (n == 0 || n > 20)
		return false;
	if (n == 1 && s[0] == '0') {
		*out = 0;
		return true;
	}
	bool neg = s[0] == '-';
	size_t i = neg ? 1 : 0;
	if (i >= n || s[i] < '1' || s[i] > '9')
		return false;
	uint64_t x = 0;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	if (neg ? x > (uint64_t)INT64_MAX + 1 : x > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - x) : (int64_t)x;
	return true;
}

/* INCR by delta: false (and v unchanged) if Redis would refuse it. */
static bool kv_incr(struct kv *v, int64_t delta, int64_t *out)
{
	int64_t x = 0;
	if (v->present && !strict_i64(v->bytes, v->len, &x))
		return false;
	if ((delta > 0 && x > INT64_MAX - delta) ||
	    (delta < 0 && x < INT64_MIN - delta))
		return false;
	x += delta;
	char text[24];
	int n = snprintf(text, sizeof(text), "%" PRId64, x);
	assert(n > 0 && (size_t)n < sizeof(text));
	kv_put(v, 0, text, (size_t)n);
	*out = x;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Generating a history.                                                    */

/* One operation: its invocation in op, its results filled by run(). */
struct planned {
	struct lincheck_op op;
	int64_t lin_ns;
	int64_t complete_ns;
	uint8_t status; /* OK, FAIL or INFO */
	bool applies;	/* an INFO op took effect at lin_ns */
};

struct gen {
	struct lincheck_history *h;
	struct planned *plan;
	uint32_t n;
	struct kv *values; /* per key */
	uint64_t next_value;
	uint32_t n_info;
	uint32_t n_fail;
};

static struct lincheck_value store(struct lincheck_history *h, const void *s,
				   size_t len)
{
	struct lincheck_value v;
	struct lincheck_error err;
	int rv = lincheck_history_store(h, s, len, &v, &err);
	if (rv != 0)
		die("store", rv, &err);
	return v;
}

static struct lincheck_value unique_value(struct gen *g)
{
	char text[24];
	int n = snprintf(text, sizeof(text), "%" PRIu64, g->next_value++);
	assert(n > 0 && (size_t)n < sizeof(text));
	return store(g->h, text, (size_t)n);
}

static uint8_t draw_kind(struct rng *r)
{
	uint64_t roll = rng_below(r, 100);
	return roll < 35   ? LINCHECK_GET
	       : roll < 55 ? LINCHECK_SET
	       : roll < 75 ? LINCHECK_APPEND
	       : roll < 90 ? LINCHECK_INCR
			   : LINCHECK_DEL;
}

/* Plans every operation: clients take turns by their next free time, so
 * the plan is in invocation order. */
static void plan_ops(struct gen *g, struct rng *r, const struct bench_case *c)
{
	int64_t free_ns[BENCH_CLIENTS_MAX];
	uint64_t process[BENCH_CLIENTS_MAX];
	for (uint32_t i = 0; i < c->clients; i++) {
		free_ns[i] = rng_range(r, 0, BENCH_THINK_NS_MAX);
		process[i] = i;
	}
	for (uint32_t i = 0; i < g->n; i++) {
		uint32_t k = 0;
		for (uint32_t j = 1; j < c->clients; j++) {
			if (free_ns[j] < free_ns[k])
				k = j;
		}
		struct planned *p = &g->plan[i];
		memset(p, 0, sizeof(*p));
		struct lincheck_op *op = &p->op;
		op->client = process[k];
		op->key = (uint32_t)rng_below(r, c->keys);
		op->kind = draw_kind(r);
		if (op->kind == LINCHECK_SET || op->kind == LINCHECK_APPEND)
			op->arg = unique_value(g);
		if (op->kind == LINCHECK_INCR)
			op->delta = 1;
		op->invoke_time = free_ns[k];
		int64_t latency = rng_range(r, BENCH_LATENCY_NS_MIN,
					    BENCH_LATENCY_NS_MAX);
		p->complete_ns = op->invoke_time + latency;
		p->lin_ns =
			rng_range(r, op->invoke_time + 1, p->complete_ns - 1);
		uint64_t roll = rng_below(r, 1000);
		p->status = roll < c->info_permille ? LINCHECK_INFO
			    : roll < c->info_permille + BENCH_FAIL_PERMILLE
				    ? LINCHECK_FAIL
				    : LINCHECK_OK;
		p->applies = rng_below(r, 2) == 0;
		int64_t think = rng_range(r, 0, BENCH_THINK_NS_MAX);
		if (p->status == LINCHECK_INFO) {
			free_ns[k] = op->invoke_time + BENCH_CLIENT_TIMEOUT_NS +
				     think;
			process[k] += c->clients; /* a new process */
			g->n_info++;
		} else {
			free_ns[k] = p->complete_ns + think;
		}
	}
}

/* Runs p at its linearization point on the model, filling its results. */
static void run(struct gen *g, struct planned *p)
{
	struct lincheck_op *op = &p->op;
	struct kv *v = &g->values[op->key];
	bool ok = p->status == LINCHECK_OK;
	if (!ok && !(p->status == LINCHECK_INFO && p->applies))
		return; /* failed, or timed out and never took effect */
	const uint8_t *arg;
	int64_t n;
	switch (op->kind) {
	case LINCHECK_GET:
		if (!ok)
			break;
		op->out.tag = LINCHECK_ABSENT;
		if (v->present)
			op->out = store(g->h, v->bytes, v->len);
		break;
	case LINCHECK_SET:
		arg = lincheck_value_bytes(g->h, op->arg);
		kv_put(v, 0, arg, op->arg.len);
		break;
	case LINCHECK_APPEND:
		arg = lincheck_value_bytes(g->h, op->arg);
		kv_put(v, v->present ? v->len : 0, arg, op->arg.len);
		op->out_int = (int64_t)v->len;
		op->out_known = true;
		break;
	case LINCHECK_DEL:
		op->out_int = v->present ? 1 : 0;
		op->out_known = true;
		v->present = false;
		v->len = 0;
		break;
	case LINCHECK_INCR:
		if (!kv_incr(v, op->delta, &n)) {
			if (ok)
				p->status = LINCHECK_FAIL; /* refused */
			break;
		}
		op->out_int = n;
		op->out_known = true;
		break;
	default:
		assert(0 && "no such kind in the mix");
	}
}

struct lin_order {
	int64_t lin_ns;
	uint32_t i;
};

static int by_lin(const void *a, const void *b)
{
	const struct lin_order *x = a;
	const struct lin_order *y = b;
	if (x->lin_ns != y->lin_ns)
		return x->lin_ns < y->lin_ns ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Runs the operations in the order of their linearization points. */
static void execute(struct gen *g)
{
	struct lin_order *order = malloc((size_t)g->n * sizeof(*order));
	if (order == NULL)
		die("order", LINCHECK_ENOMEM, NULL);
	for (uint32_t i = 0; i < g->n; i++) {
		order[i].lin_ns = g->plan[i].lin_ns;
		order[i].i = i;
	}
	qsort(order, g->n, sizeof(*order), by_lin);
	for (uint32_t i = 0; i < g->n; i++)
		run(g, &g->plan[order[i].i]);
	free(order);
}

/* ------------------------------------------------------------------------ */
/* Corrupting one read near the end.                                        */

/* Whether needle is a substring of [s, s + n). */
static bool contains(const uint8_t *s, size_t n, const uint8_t *needle,
		     size_t m)
{
	for (size_t i = 0; m <= n && i + m <= n; i++) {
		if (memcmp(s + i, needle, m) == 0)
			return true;
	}
	return false;
}

static int64_t value_number(const struct lincheck_history *h,
			    struct lincheck_value v)
{
	int64_t x;
	if (v.tag != LINCHECK_PRESENT ||
	    !strict_i64((const char *)lincheck_value_bytes(h, v), v.len, &x))
		return -1;
	return x;
}

/*
 * Whether the value of SET p could be the key's value near the end. Every
 * write is a unique, increasing decimal number, so a value near the end is
 * a recent write's number with digits appended or incremented (so at
 * least that number), or a few increments from missing, or built on an
 * indeterminate operation from any time (those never expire): a value
 * containing the argument of one, or just above one, is refused.
 */
static bool stale_ok(const struct gen *g, const struct planned *p)
{
	const struct lincheck_history *h = g->h;
	int64_t x = value_number(h, p->op.arg);
	if (x < BENCH_STALE_VALUE_MIN)
		return false;
	const uint8_t *s = lincheck_value_bytes(h, p->op.arg);
	for (uint32_t i = 0; i < g->n; i++) {
		const struct planned *q = &g->plan[i];
		if (q->status != LINCHECK_INFO || q->op.key != p->op.key ||
		    q->op.arg.tag != LINCHECK_PRESENT)
			continue;
		int64_t y = value_number(h, q->op.arg);
		if (contains(s, p->op.arg.len,
			     lincheck_value_bytes(h, q->op.arg),
			     q->op.arg.len) ||
		    (y >= 0 && y < x && x - y <= 64))
			return false;
	}
	return true;
}

/* A completed SET of key 0 from the first half whose value nothing near
 * the end can produce, from a random place on; NULL if there is none. */
static const struct planned *pick_stale(const struct gen *g, struct rng *r)
{
	uint32_t half = g->n / 2 + 1;
	uint32_t from = (uint32_t)rng_below(r, half);
	for (uint32_t t = 0; t < half; t++) {
		const struct planned *p = &g->plan[(from + t) % half];
		if (p->status == LINCHECK_OK && p->op.kind == LINCHECK_SET &&
		    p->op.key == 0 && stale_ok(g, p))
			return p;
	}
	return NULL;
}

/* Changes the result of one completed get of key 0 among the last
 * operations; returns its index. */
static uint32_t corrupt(struct gen *g, struct rng *r, enum corruption how)
{
	uint32_t tail = g->n * BENCH_TAIL_PERMILLE / 1000 + 1;
	uint32_t first = g->n - (tail < g->n ? tail : g->n);
	uint32_t reads[1024];
	uint32_t n_reads = 0;
	for (uint32_t i = first; i < g->n && n_reads < 1024; i++) {
		const struct planned *p = &g->plan[i];
		if (p->status == LINCHECK_OK && p->op.kind == LINCHECK_GET &&
		    p->op.key == 0)
			reads[n_reads++] = i;
	}
	if (n_reads == 0)
		die("no read near the end to corrupt", LINCHECK_EMALFORMED,
		    NULL);
	uint32_t victim = reads[rng_below(r, n_reads)];
	struct lincheck_op *op = &g->plan[victim].op;
	if (how == CORRUPT_PHANTOM) {
		op->out = store(g->h, BENCH_PHANTOM, strlen(BENCH_PHANTOM));
		return victim;
	}
	const struct planned *old = pick_stale(g, r);
	if (old == NULL)
		die("no stale value to read", LINCHECK_EMALFORMED, NULL);
	op->out = old->op.arg;
	return victim;
}

/* ------------------------------------------------------------------------ */
/* Recording and checking.                                                  */

static void record(struct gen *g)
{
	struct lincheck_error err;
	for (uint32_t i = 0; i < g->n; i++) {
		struct planned *p = &g->plan[i];
		int rv = lincheck_history_invoke(g->h, &p->op, 2 * i + 1, &err);
		if (rv != 0)
			die("invoke", rv, &err);
		if (p->status == LINCHECK_FAIL)
			g->n_fail++;
		if (p->status == LINCHECK_INFO)
			continue; /* no completion: the client timed out */
		rv = lincheck_history_complete(
			g->h, p->op.client, p->complete_ns, 2 * i + 2,
			(enum lincheck_status)p->status, &p->op, true, &err);
		if (rv != 0)
			die("complete", rv, &err);
	}
	lincheck_history_finish(g->h);
}

/* The seed of a case's execution: the same for a case and its corrupted
 * variants, so those differ from it by one read. */
static uint64_t case_seed(uint64_t seed, const struct bench_case *c,
			  uint32_t ops)
{
	struct rng r = {seed};
	uint64_t x = rng_next(&r);
	x ^= (uint64_t)ops * 0x100000001b3u;
	x ^= (uint64_t)c->keys << 40 ^ (uint64_t)c->clients << 20 ^
	     c->info_permille;
	r.s = x;
	return rng_next(&r);
}

static void generate(const struct bench_case *c, uint32_t ops, uint64_t seed,
		     struct lincheck_history *h, struct gen *g)
{
	struct rng r = {case_seed(seed, c, ops)};
	memset(g, 0, sizeof(*g));
	lincheck_history_init(h);
	h->format = LINCHECK_FORMAT_BATON;
	h->name = c->name;
	g->h = h;
	g->n = ops;
	g->next_value = 1;
	g->plan = malloc((size_t)ops * sizeof(*g->plan));
	g->values = calloc(c->keys, sizeof(*g->values));
	if (g->plan == NULL || g->values == NULL)
		die("plan", LINCHECK_ENOMEM, NULL);
	struct lincheck_error err;
	for (uint32_t k = 0; k < c->keys; k++) {
		char name[BENCH_NAME_BYTES];
		int n = snprintf(name, sizeof(name), "k%u", k);
		uint32_t id;
		int rv = lincheck_history_key(h, name, (size_t)n, &id, &err);
		if (rv != 0)
			die("key", rv, &err);
		assert(id == k);
	}
	plan_ops(g, &r, c);
	execute(g);
	if (c->corrupt != CORRUPT_NONE) {
		struct rng cr = {r.s ^ 0xc0bb1e5u};
		corrupt(g, &cr, c->corrupt);
	}
	record(g);
	for (uint32_t k = 0; k < c->keys; k++)
		free(g->values[k].bytes);
	free(g->values);
	free(g->plan);
	g->plan = NULL;
	g->values = NULL;
}

static const char *verdict_name(enum lincheck_verdict v)
{
	switch (v) {
	case LINCHECK_LINEARIZABLE:
		return "linearizable";
	case LINCHECK_NOT_LINEARIZABLE:
		return "NOT linearizable";
	default:
		return "unknown";
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs one case and prints its row; returns whether the verdict was the
 * expected one. */
static bool run_case(const struct bench_case *c, const struct options *o)
{
	uint32_t ops = o->quick ? c->ops / BENCH_QUICK_DIVISOR : c->ops;
	struct bench_case with = *c;
	if (o->info_permille >= 0) {
		with.info_permille = (uint32_t)o->info_permille;
		c = &with;
	}
	struct lincheck_history h;
	struct gen g;
	generate(c, ops, o->seed, &h, &g);
	if (o->write_path != NULL) {
		FILE *f = fopen(o->write_path, "w");
		if (f == NULL || lincheck_write_baton(f, &h) != 0 ||
		    fclose(f) != 0)
			die(o->write_path, LINCHECK_EIO, NULL);
	}
	struct lincheck_limits limits;
	double t0 = now_s();
	limits.deadline_ns = lincheck_now_ns() + (int64_t)(o->timeout_s * 1e9);
	limits.memory_bytes_max = (uint64_t)o->memory_mb << 20;
	struct lincheck_result res;
	int rv = lincheck_check(&h, &limits, &res);
	double seconds = now_s() - t0;
	if (rv != 0 && res.verdict != LINCHECK_VERDICT_UNKNOWN)
		die("check", rv, NULL);
	enum lincheck_verdict want = c->corrupt == CORRUPT_NONE
					     ? LINCHECK_LINEARIZABLE
					     : LINCHECK_NOT_LINEARIZABLE;
	bool good = rv == 0 && res.verdict == want;
	char verdict[64];
	if (res.verdict == LINCHECK_VERDICT_UNKNOWN)
		snprintf(verdict, sizeof(verdict), "unknown (%s)",
			 res.unknown_reason == LINCHECK_ETIMEOUT
				 ? "time limit"
				 : "memory limit");
	else
		snprintf(verdict, sizeof(verdict), "%s%s",
			 verdict_name(res.verdict),
			 good ? "" : " (unexpected)");
	printf("%-24s %7u %4u %7u %6.1f %8u %5u  %-22s %14" PRIu64 " %8.3f\n",
	       c->name, h.n_ops, h.n_keys, c->clients,
	       (double)g.n_info * 100.0 / (double)h.n_ops, g.n_info, g.n_fail,
	       verdict, res.configurations, seconds);
	fflush(stdout);
	lincheck_history_free(&h);
	return good;
}

/* ------------------------------------------------------------------------ */
/* The command line.                                                        */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: bench-lincheck [--seed N] [--quick] [--timeout-s N] "
		"[--memory-mb N]\n"
		"                      [--info-permille N] [--case NAME] "
		"[--write FILE]\n"
		"  --seed N           the executions' seed (default 1)\n"
		"  --quick            a tenth of the operations (a smoke run)\n"
		"  --timeout-s N      the checker's time limit per case "
		"(default %.0f)\n"
		"  --memory-mb N      the checker's memory limit per case "
		"(default %u)\n"
		"  --info-permille N  indeterminate ops per 1000 in every "
		"case\n"
		"  --case NAME        only that case\n"
		"  --write FILE       also write the case's history (baton "
		"format) to FILE\n"
		"Exit status: 0 every verdict as expected, 1 not (or a limit "
		"reached), 2 usage.\n",
		BENCH_TIMEOUT_S_DEFAULT, BENCH_MEMORY_MB_DEFAULT);
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (s == NULL || *s < '0' || *s > '9')
		return false;
	unsigned long long x = strtoull(s, &end, 10);
	*out = x;
	return *end == 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	o->seed = 1;
	o->quick = false;
	o->timeout_s = BENCH_TIMEOUT_S_DEFAULT;
	o->memory_mb = BENCH_MEMORY_MB_DEFAULT;
	o->only = NULL;
	o->write_path = NULL;
	o->info_permille = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;
		if (strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "--quick") == 0) {
			o->quick = true;
			continue;
		} else if (strcmp(a, "--seed") == 0 && parse_u64(v, &x)) {
			o->seed = x;
		} else if (strcmp(a, "--timeout-s") == 0 && parse_u64(v, &x) &&
			   x > 0 && x <= 86400) {
			o->timeout_s = (double)x;
		} else if (strcmp(a, "--memory-mb") == 0 && parse_u64(v, &x) &&
			   x > 0 && x <= ((uint64_t)1 << 24)) {
			o->memory_mb = (uint32_t)x;
		} else if (strcmp(a, "--info-permille") == 0 &&
			   parse_u64(v, &x) && x <= BENCH_INFO_PERMILLE_MAX) {
			o->info_permille = (int32_t)x;
		} else if (strcmp(a, "--case") == 0 && v != NULL) {
			o->only = v;
		} else if (strcmp(a, "--write") == 0 && v != NULL) {
			o->write_path = v;
		} else {
			return -1;
		}
		i++;
	}
	if (o->write_path != NULL && o->only == NULL)
		return -1; /* one history per file */
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	if (parse_options(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	printf("seed %" PRIu64 "; latency %d-%d us, think 0-%d us, "
	       "fail %.1f%%; limits %.0f s, %u MiB per case\n\n",
	       o.seed, BENCH_LATENCY_NS_MIN / 1000, BENCH_LATENCY_NS_MAX / 1000,
	       BENCH_THINK_NS_MAX / 1000, BENCH_FAIL_PERMILLE / 10.0,
	       o.timeout_s, o.memory_mb);
	printf("%-24s %7s %4s %7s %6s %8s %5s  %-22s %14s %8s\n", "case", "ops",
	       "keys", "clients", "info %", "info ops", "fails", "verdict",
	       "configurations", "seconds");
	bool all_good = true;
	uint32_t ran = 0;
	for (size_t i = 0; i < N_CASES; i++) {
		const struct bench_case *c = &cases[i];
		if (o.only != NULL && strcmp(o.only, c->name) != 0)
			continue;
		if (c->keys > BENCH_KEYS_MAX || c->clients > BENCH_CLIENTS_MAX)
			die(c->name, LINCHECK_ELIMIT, NULL);
		if (!run_case(c, &o))
			all_good = false;
		ran++;
	}
	if (ran == 0) {
		fprintf(stderr, "bench-lincheck: no case named %s\n", o.only);
		return 2;
	}
	if (!all_good)
		printf("\nbench-lincheck: a verdict was not the expected one "
		       "(seed %" PRIu64 ")\n",
		       o.seed);
	return all_good ? 0 : 1;
}
