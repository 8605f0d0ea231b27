/*
 * Incremental snapshots (kv_snapshot_begin/step/end): the bytes of all
 * steps are exactly kv_snapshot()'s at begin, whatever the writes between
 * the steps (overwrites, deletes, expiries, sweeps, FLUSHALL, hash writes
 * under version 3, the table growing and shrinking) and whatever the
 * budgets. A differential, randomized test over many seeds, then the edge
 * cases one by one.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"

#define RUNS 200
#define CMD_ARGS_MAX 48
#define CMD_POOL_BYTES 2048
/* Values past half a snapshot chunk reach the sink unchunked. */
#define BIG_VALUE_BYTES (48u << 10)
#define BUDGET_BYTES_MAX (64u << 10)

static uint8_t big_value[BIG_VALUE_BYTES];

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

/* ---- building commands ---- */

struct cmd {
	int argc;
	const char *argv[CMD_ARGS_MAX];
	size_t lens[CMD_ARGS_MAX];
	char pool[CMD_POOL_BYTES];
	size_t used;
};

__attribute__((format(printf, 2, 3))) static void arg(struct cmd *c,
						      const char *fmt, ...)
{
	cr_assert_lt(c->argc, CMD_ARGS_MAX);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(c->pool + c->used, CMD_POOL_BYTES - c->used, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0 && (size_t)n < CMD_POOL_BYTES - c->used);
	c->argv[c->argc] = c->pool + c->used;
	c->lens[c->argc++] = (size_t)n;
	c->used += (size_t)n + 1;
}

static void arg_bytes(struct cmd *c, const void *p, size_t n)
{
	cr_assert_lt(c->argc, CMD_ARGS_MAX);
	c->argv[c->argc] = p;
	c->lens[c->argc++] = n;
}

/* ---- one randomized run ---- */

enum mode { MIXED, GROW, SHRINK, FLUSHES, MODES };

struct run {
	uint64_t rng;
	uint32_t version;
	uint64_t stamp;
	enum mode mode;
	uint32_t keys;	   /* at begin */
	uint32_t universe; /* keys are k0..k(universe-1) */
	struct baton_kv *kv;
	int flushes;
};

/* What the runs saw, over all of them. */
static struct {
	int grew, shrank, froze, preimages, hashes;
} seen;

static uint64_t pick(struct run *r, uint64_t n)
{
	return n > 0 ? kvt_rand(&r->rng) % n : 0;
}

static void key(struct run *r, struct cmd *c)
{
	arg(c, "k%u", (unsigned)pick(r, r->universe));
}

static void value(struct run *r, struct cmd *c)
{
	uint64_t x = pick(r, 100);
	if (x < 25)
		arg(c, "%d", (int)pick(r, 2000) - 1000);
	else if (x == 99 && pick(r, 4) == 0)
		arg_bytes(c, big_value,
			  BIG_VALUE_BYTES / 2 + pick(r, BIG_VALUE_BYTES / 2));
	else
		arg(c, "v%0*u", (int)pick(r, 40), (unsigned)pick(r, 1000000));
}

/* Machine time moves on with each write under version 2, so that keys
 * expire (and lazy expiry deletes them) while the snapshot runs. */
static void tick(struct run *r)
{
	if (r->version < 2)
		return;
	r->stamp += pick(r, 4);
	kvt_use(r->version, r->stamp);
}

static void run_cmd(struct run *r, struct cmd *c)
{
	tick(r);
	kvt_runv(r->kv, c->argc, c->argv, c->lens);
}

static void sweep(struct run *r)
{
	tick(r);
	struct baton_buf p, reply;
	baton_buf_init(&p);
	baton_buf_init(&reply);
	cr_assert_eq(kv_encode_sweep(r->stamp, (uint32_t)pick(r, 40), &p), 0);
	cr_assert_eq(kv_apply(r->kv, (struct baton_machine_version){r->version},
			      p.data, p.len, &reply),
		     0);
	baton_buf_free(&p);
	baton_buf_free(&reply);
}

static void set_cmd(struct run *r, struct cmd *c)
{
	arg(c, "SET");
	key(r, c);
	value(r, c);
	uint64_t opt = pick(r, r->version >= 2 ? 8 : 4);
	if (opt == 1)
		arg(c, "NX");
	else if (opt == 2)
		arg(c, "XX");
	else if (opt == 4)
		arg(c, "PX"), arg(c, "%u", 1 + (unsigned)pick(r, 300));
	else if (opt == 5)
		arg(c, "PX"), arg(c, "%u", 100000 + (unsigned)pick(r, 1000));
	else if (opt == 6)
		arg(c, "KEEPTTL");
	else if (opt == 7)
		arg(c, "GET");
}

static void del_cmd(struct run *r, struct cmd *c)
{
	arg(c, "DEL");
	uint64_t n = 1 + pick(r, r->mode == SHRINK ? 30 : 3);
	for (uint64_t i = 0; i < n; i++)
		key(r, c);
}

static void expiry_cmd(struct run *r, struct cmd *c)
{
	uint64_t x = pick(r, 6);
	if (x == 0)
		arg(c, "EXPIRE");
	else if (x <= 2)
		arg(c, "PEXPIRE");
	else if (x == 3)
		arg(c, "PERSIST");
	else
		arg(c, "GETEX");
	key(r, c);
	if (x == 0)
		arg(c, "%u", 1 + (unsigned)pick(r, 100));
	else if (x <= 2)
		arg(c, "%d", (int)pick(r, 400) - 20);
	else if (x == 4)
		arg(c, "PX"), arg(c, "%u", 1 + (unsigned)pick(r, 300));
	else if (x == 5)
		arg(c, "PERSIST");
}

/* A hash write (version 3): on keys that may hold strings too, so some
 * answer WRONGTYPE; HDEL often empties a hash, removing its key. */
static void hash_cmd(struct run *r, struct cmd *c)
{
	uint64_t x = pick(r, 4);
	arg(c, x == 0 ? "HDEL" : x == 1 ? "HINCRBY" : "HSET");
	key(r, c);
	uint64_t fields = 1 + pick(r, x == 0 ? 6 : 3);
	for (uint64_t i = 0; i < fields; i++) {
		arg(c, "f%u", (unsigned)pick(r, 8));
		if (x == 1) {
			arg(c, "%d", (int)pick(r, 100) - 50);
			return;
		}
		if (x != 0)
			value(r, c);
	}
}

/* One random write, mostly of the run's mode. */
static void write_one(struct run *r)
{
	struct cmd c = {0};
	uint64_t flush_odds = r->mode == FLUSHES ? 150 : 4000;
	if (pick(r, flush_odds) == 0) {
		arg(&c, "FLUSHALL");
		run_cmd(r, &c);
		r->flushes++;
		return;
	}
	uint64_t x = pick(r, 100);
	if (r->version >= 3 && pick(r, 4) == 0) {
		hash_cmd(r, &c);
	} else if (r->mode == SHRINK && x < 60) {
		del_cmd(r, &c);
	} else if (r->mode == GROW && x < 60) {
		arg(&c, "SET");
		arg(&c, "n%u", (unsigned)pick(r, 8u * r->keys + 64));
		value(r, &c);
	} else if (x < 25) {
		set_cmd(r, &c);
	} else if (x < 40) {
		del_cmd(r, &c);
	} else if (x < 50) {
		arg(&c, pick(r, 2) ? "INCR" : "DECRBY");
		key(r, &c);
		if (c.lens[0] == 6)
			arg(&c, "%u", (unsigned)pick(r, 50));
	} else if (x < 60) {
		arg(&c, "APPEND");
		key(r, &c);
		value(r, &c);
	} else if (x < 70) {
		arg(&c, "MSET");
		for (uint64_t i = 0, n = 1 + pick(r, 4); i < n; i++)
			key(r, &c), value(r, &c);
	} else if (x < 85 && r->version >= 2) {
		expiry_cmd(r, &c);
	} else if (x < 90 && r->version >= 2) {
		sweep(r);
		return;
	} else if (r->version >= 3) {
		hash_cmd(r, &c);
	} else {
		set_cmd(r, &c);
	}
	run_cmd(r, &c);
}

static void populate(struct run *r)
{
	for (uint32_t i = 0; i < r->keys; i++) {
		struct cmd c = {0};
		arg(&c, "SET");
		arg(&c, "k%u", (unsigned)i);
		value(r, &c);
		if (r->version >= 2 && pick(r, 4) == 0)
			arg(&c, "PX"),
				arg(&c, "%u", 1 + (unsigned)pick(r, 600));
		run_cmd(r, &c);
		/* Under version 3 a third of the keys become hashes. */
		if (r->version >= 3 && pick(r, 3) == 0) {
			struct cmd h = {0};
			arg(&h, "DEL"), arg(&h, "k%u", (unsigned)i);
			run_cmd(r, &h);
			h = (struct cmd){0};
			arg(&h, "HSET"), arg(&h, "k%u", (unsigned)i);
			for (uint64_t f = 0, n = 1 + pick(r, 6); f < n; f++)
				arg(&h, "f%u", (unsigned)f), value(r, &h);
			run_cmd(r, &h);
		}
	}
	/* Some keys expired but not yet deleted at begin: still written. */
	if (r->version >= 2) {
		r->stamp += 200;
		kvt_use(r->version, r->stamp);
	}
}

/* A budget from 1 byte to 64 KiB, spread over the orders of magnitude. */
static size_t budget(struct run *r)
{
	unsigned shift = (unsigned)pick(r, 17);
	return 1 + (size_t)pick(r, (uint64_t)1 << shift) % BUDGET_BYTES_MAX;
}

/* Check that got restores to the map expected's bytes describe. */
static void check_restores(uint32_t version, const struct baton_buf *got,
			   const struct baton_buf *expected)
{
	struct baton_kv *fresh = NULL;
	cr_assert_eq(kv_create(&fresh), 0);
	struct baton_machine_version v = {version};
	cr_assert_eq(kv_restore(fresh, v, got->data, got->len), 0, "%s",
		     kv_errmsg(fresh));
	struct baton_buf again;
	baton_buf_init(&again);
	cr_assert_eq(kv_snapshot(fresh, v, sink, &again), 0);
	cr_assert_eq(again.len, expected->len);
	cr_assert_eq(memcmp(again.data, expected->data, again.len), 0);
	baton_buf_free(&again);
	kv_destroy(fresh);
}

static void one_run(uint64_t seed)
{
	struct run r = {.rng = seed * 0x9E3779B97F4A7C15u + 1};
	r.kv = kvt_new();
	r.version = pick(&r, 4) == 0 ? 1 : 2 + (uint32_t)pick(&r, 2);
	r.mode = (enum mode)pick(&r, MODES);
	r.keys = (uint32_t)(pick(&r, 8) == 0 ? pick(&r, 20)
					     : 20 + pick(&r, 3000));
	r.universe = 2 * r.keys + 16;
	r.stamp = 1000;
	kvt_use(r.version, r.version >= 2 ? r.stamp : 0);
	populate(&r);

	struct baton_machine_version v = {r.version};
	struct baton_buf expected, got;
	baton_buf_init(&expected);
	baton_buf_init(&got);
	cr_assert_eq(kv_snapshot(r.kv, v, sink, &expected), 0);
	uint64_t count = kv_dbsize(r.kv);
	seen.hashes += r.kv->table.hashes > 0;
	cr_assert_eq(kv_snapshot_begin(r.kv, v), 0, "%s", kv_errmsg(r.kv));
	bool done = false, grew = false, shrank = false, froze = false;
	uint64_t steps = 0, batch_max = r.mode == MIXED ? 8 : 24;
	while (!done) {
		size_t before = got.len;
		cr_assert_eq(
			kv_snapshot_step(r.kv, budget(&r), sink, &got, &done),
			0, "seed %llu: %s", (unsigned long long)seed,
			kv_errmsg(r.kv));
		cr_assert_gt(got.len, before, "a step wrote nothing");
		cr_assert_lt(++steps, 1000000u);
		uint64_t size = r.kv->table.size;
		for (uint64_t i = 0, n = pick(&r, batch_max); !done && i < n;
		     i++)
			write_one(&r);
		grew |= r.kv->table.size > size;
		shrank |= r.kv->table.size < size && kv_dbsize(r.kv) > 0;
		froze |= r.flushes > 0;
	}
	cr_assert_eq(got.len, expected.len, "seed %llu: %zu bytes, not %zu",
		     (unsigned long long)seed, got.len, expected.len);
	cr_assert_eq(memcmp(got.data, expected.data, got.len), 0,
		     "seed %llu: the bytes differ", (unsigned long long)seed);
	struct kv_snapshot_stats st;
	kv_snapshot_stats(r.kv, &st);
	cr_assert_eq(st.entries, count);
	cr_assert_eq(st.bytes_kept, 0);
	seen.preimages += st.preimages > 0;
	seen.grew += grew;
	seen.shrank += shrank;
	seen.froze += froze;
	kv_snapshot_end(r.kv);
	cr_assert(!kv_snapshot_open(r.kv));
	check_restores(r.version, &got, &expected);
	baton_buf_free(&expected);
	baton_buf_free(&got);
	kv_destroy(r.kv);
}

/* The one-call snapshot of kv under machine version v into *expected,
 * then a sliced one begun, its bytes to come in *got. */
static void begin_sliced(struct baton_kv *kv, uint32_t v,
			 struct baton_buf *expected, struct baton_buf *got)
{
	baton_buf_init(expected);
	baton_buf_init(got);
	kvt_snapshot(kv, expected);
	cr_assert_eq(kv_snapshot_begin(kv, (struct baton_machine_version){v}),
		     0, "%s", kv_errmsg(kv));
}

Test(snapshot_slices, equal_to_one_call_snapshot_under_random_writes,
     .timeout = 120)
{
	memset(big_value, 'b', sizeof big_value);
	for (uint64_t seed = 1; seed <= RUNS; seed++)
		one_run(seed);
	/* The runs did reach what they are for. */
	cr_assert_gt(seen.grew, 10, "%d runs grew the table", seen.grew);
	cr_assert_gt(seen.shrank, 10, "%d runs shrank it", seen.shrank);
	cr_assert_gt(seen.froze, 10, "%d runs flushed", seen.froze);
	cr_assert_gt(seen.preimages, RUNS / 2);
	cr_assert_gt(seen.hashes, RUNS / 5, "%d runs had hashes", seen.hashes);
}

/* ---- edge cases ---- */

/* Take the snapshot open on kv to the end in steps of `step_budget`
 * bytes, appending to out. */
static void finish(struct baton_kv *kv, size_t step_budget,
		   struct baton_buf *out)
{
	bool done = false;
	for (int i = 0; !done; i++) {
		cr_assert_lt(i, 100000);
		cr_assert_eq(
			kv_snapshot_step(kv, step_budget, sink, out, &done), 0,
			"%s", kv_errmsg(kv));
	}
}

static void expect_same(const struct baton_buf *got,
			const struct baton_buf *expected)
{
	cr_assert_eq(got->len, expected->len, "%zu bytes, not %zu", got->len,
		     expected->len);
	cr_assert_eq(memcmp(got->data, expected->data, got->len), 0);
}

static void fill(struct baton_kv *kv, const char *prefix, int n)
{
	char line[64];
	for (int i = 0; i < n; i++) {
		snprintf(line, sizeof line, "SET %s%d value%d", prefix, i, i);
		kvt_run(kv, line);
	}
}

Test(snapshot_slices, empty_map)
{
	for (uint32_t version = 1; version <= 2; version++) {
		struct baton_kv *kv = kvt_new();
		kvt_use(version, 5000);
		struct baton_buf expected, got;
		begin_sliced(kv, version, &expected, &got);
		cr_assert(kv_snapshot_open(kv));
		bool done = false;
		cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
		cr_assert(done, "one step writes an empty map");
		expect_same(&got, &expected);
		/* A step after the last writes nothing and says done. */
		done = false;
		cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
		cr_assert(done);
		cr_assert_eq(got.len, expected.len);
		kv_snapshot_end(kv);
		cr_assert(!kv_snapshot_open(kv));
		baton_buf_free(&expected);
		baton_buf_free(&got);
		kv_destroy(kv);
	}
}

Test(snapshot_slices, no_writes_any_budget)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 7000);
	fill(kv, "a", 1500);
	kvt_run(kv, "PEXPIRE a7 100000");
	struct baton_buf expected, got;
	baton_buf_init(&expected);
	baton_buf_init(&got);
	kvt_snapshot(kv, &expected);
	const size_t budgets[] = {1, 7, 100, 4096, 65536, (size_t)1 << 30};
	for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
		baton_buf_reset(&got);
		cr_assert_eq(kv_snapshot_begin(
				     kv, (struct baton_machine_version){2}),
			     0);
		finish(kv, budgets[i], &got);
		expect_same(&got, &expected);
		struct kv_snapshot_stats st;
		kv_snapshot_stats(kv, &st);
		cr_assert_eq(st.entries, 1500);
		cr_assert_eq(st.preimages, 0);
		kv_snapshot_end(kv);
	}
	baton_buf_free(&expected);
	baton_buf_free(&got);
	kv_destroy(kv);
}

Test(snapshot_slices, every_key_deleted_before_it_is_written)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "d", 500);
	struct baton_buf expected, got;
	begin_sliced(kv, 2, &expected, &got);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
	cr_assert(!done);
	char line[64];
	for (int i = 0; i < 500; i++) {
		snprintf(line, sizeof line, "DEL d%d", i);
		kvt_run(kv, line);
	}
	cr_assert_eq(kv_dbsize(kv), 0);
	struct kv_snapshot_stats st;
	kv_snapshot_stats(kv, &st);
	cr_assert_eq(st.entries, 1);
	cr_assert_eq(st.preimages, 499, "all but the key written");
	cr_assert_gt(st.bytes_kept, 499u * 16);
	uint64_t kept = st.bytes_kept;
	cr_assert_eq(kv_snapshot_step(kv, 1000, sink, &got, &done), 0);
	kv_snapshot_stats(kv, &st);
	cr_assert_lt(st.bytes_kept, kept, "copies written are freed at once");
	finish(kv, 100, &got);
	expect_same(&got, &expected);
	kv_snapshot_stats(kv, &st);
	cr_assert_eq(st.entries, 500);
	cr_assert_eq(st.bytes_kept, 0, "the copies are freed once done");
	kv_snapshot_end(kv);
	baton_buf_free(&expected);
	baton_buf_free(&got);
	kv_destroy(kv);
}

Test(snapshot_slices, keys_created_then_deleted_are_not_written)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "c", 50);
	struct baton_buf expected, got;
	begin_sliced(kv, 2, &expected, &got);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
	/* Created and left, created and deleted, created, deleted and
	 * created again, created with an expiry that a sweep removes. */
	fill(kv, "new", 200);
	kvt_run(kv, "SET gone 1");
	kvt_run(kv, "DEL gone");
	kvt_run(kv, "SET back 1");
	kvt_run(kv, "DEL back");
	kvt_run(kv, "INCR back");
	kvt_run(kv, "SET brief x PX 5");
	kvt_use(2, 200);
	kvt_run(kv, "GET brief");
	finish(kv, 1, &got);
	expect_same(&got, &expected);
	kv_snapshot_end(kv);
	baton_buf_free(&expected);
	baton_buf_free(&got);
	kv_destroy(kv);
}

Test(snapshot_slices, flushall_twice)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "f", 300);
	kvt_run(kv, "PEXPIRE f3 1000");
	struct baton_buf expected, got, now;
	baton_buf_init(&now);
	begin_sliced(kv, 2, &expected, &got);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 200, sink, &got, &done), 0);
	kvt_run(kv, "SET f100 changed");
	kvt_run(kv, "DEL f200");
	kvt_run(kv, "SET fresh 1");
	kvt_run(kv, "FLUSHALL");
	cr_assert_eq(kv_dbsize(kv), 0);
	fill(kv, "g", 100);
	cr_assert_eq(kv_snapshot_step(kv, 200, sink, &got, &done), 0);
	kvt_run(kv, "FLUSHALL");
	fill(kv, "h", 20);
	kvt_run(kv, "SET f100 again");
	finish(kv, 300, &got);
	expect_same(&got, &expected);
	kv_snapshot_end(kv);
	/* The map itself went on: what the writes after begin made. */
	cr_assert_eq(kv_dbsize(kv), 21);
	cr_assert_str_eq(kvt_run(kv, "GET f100"), "$5\r\nagain\r\n");
	cr_assert_str_eq(kvt_run(kv, "GET g1"), "$-1\r\n");
	baton_buf_free(&expected);
	baton_buf_free(&got);
	baton_buf_free(&now);
	kv_destroy(kv);
}

Test(snapshot_slices, abandoned_then_begun_again)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "x", 400);
	struct baton_buf expected, got;
	baton_buf_init(&expected);
	baton_buf_init(&got);
	struct baton_machine_version v = {2};
	cr_assert_eq(kv_snapshot_begin(kv, v), 0);
	cr_assert_eq(kv_snapshot_begin(kv, v), BATON_EBUSY);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 500, sink, &got, &done), 0);
	fill(kv, "x", 400); /* every key copied or passed */
	kvt_run(kv, "FLUSHALL");
	fill(kv, "y", 10);
	kv_snapshot_end(kv); /* abandoned: copies and the frozen table freed */
	cr_assert(!kv_snapshot_open(kv));
	kv_snapshot_end(kv); /* nothing open: fine */
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), BATON_ESTATE);

	kvt_snapshot(kv, &expected);
	baton_buf_reset(&got);
	cr_assert_eq(kv_snapshot_begin(kv, v), 0);
	kvt_run(kv, "SET y1 later");
	finish(kv, 1, &got);
	expect_same(&got, &expected);
	kv_snapshot_end(kv);
	baton_buf_free(&expected);
	baton_buf_free(&got);
	kv_destroy(kv);
}

Test(snapshot_slices, destroyed_while_open)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "z", 100);
	struct baton_buf got;
	baton_buf_init(&got);
	cr_assert_eq(kv_snapshot_begin(kv, (struct baton_machine_version){2}),
		     0);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
	kvt_run(kv, "DEL z5 z6 z7");
	kv_destroy(kv); /* frees the snapshot too (ASan would say) */
	baton_buf_free(&got);
}

Test(snapshot_slices, restore_and_convert_end_it)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "r", 100);
	kvt_run(kv, "PEXPIRE r1 100000");
	struct baton_buf snap, got;
	baton_buf_init(&snap);
	baton_buf_init(&got);
	kvt_snapshot(kv, &snap);
	struct baton_machine_version v1 = {1}, v2 = {2};
	bool done = false;

	cr_assert_eq(kv_snapshot_begin(kv, v2), 0);
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
	kvt_run(kv, "DEL r2");
	cr_assert_eq(kv_restore(kv, v2, snap.data, snap.len), 0);
	cr_assert(!kv_snapshot_open(kv));
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), BATON_ESTATE);
	kvt_run(kv, "DEL r3"); /* the restored table tells nobody */

	cr_assert_eq(kv_snapshot_begin(kv, v2), 0);
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &got, &done), 0);
	cr_assert_eq(kv_convert(kv, v2, v1), 0);
	cr_assert(!kv_snapshot_open(kv));
	kvt_use(1, 0);
	kvt_run(kv, "DEL r4");
	baton_buf_free(&snap);
	baton_buf_free(&got);
	kv_destroy(kv);
}

Test(snapshot_slices, versions_refused_as_kv_snapshot)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "e", 10);
	kvt_run(kv, "PEXPIRE e1 100000");
	cr_assert_eq(kv_snapshot_begin(kv, (struct baton_machine_version){1}),
		     BATON_EVERSION);
	cr_assert(strstr(kv_errmsg(kv), "format 1") != NULL, "%s",
		  kv_errmsg(kv));
	cr_assert(!kv_snapshot_open(kv));
	cr_assert_eq(kv_snapshot_begin(kv, (struct baton_machine_version){4}),
		     BATON_EVERSION);
	cr_assert(!kv_snapshot_open(kv));
	/* Without expiries, version 1 writes format 1. */
	kvt_run(kv, "PERSIST e1");
	struct baton_buf expected, got;
	kvt_use(1, 0);
	begin_sliced(kv, 1, &expected, &got);
	kvt_run(kv, "SET e2 other");
	finish(kv, 3, &got);
	expect_same(&got, &expected);
	kv_snapshot_end(kv);
	baton_buf_free(&expected);
	baton_buf_free(&got);
	kv_destroy(kv);
}

/* A sink that fails on its n-th call. */
struct failing {
	int calls, fail_at;
};

static int failing_sink(void *arg, const void *buf, size_t len)
{
	(void)buf;
	(void)len;
	struct failing *f = arg;
	return ++f->calls == f->fail_at ? BATON_EIO : 0;
}

Test(snapshot_slices, a_sink_error_fails_the_snapshot)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "s", 300);
	struct failing f = {0, 2};
	cr_assert_eq(kv_snapshot_begin(kv, (struct baton_machine_version){2}),
		     0);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(kv, 100, failing_sink, &f, &done), 0);
	kvt_run(kv, "SET s250 changed");
	cr_assert_eq(kv_snapshot_step(kv, 100, failing_sink, &f, &done),
		     BATON_EIO);
	cr_assert(!done);
	/* It stays open, failed, until ended; writes go on. */
	cr_assert(kv_snapshot_open(kv));
	kvt_run(kv, "SET s251 changed");
	cr_assert_eq(kv_snapshot_step(kv, 100, failing_sink, &f, &done),
		     BATON_EIO);
	struct kv_snapshot_stats st;
	kv_snapshot_stats(kv, &st);
	cr_assert_eq(st.bytes_kept, 0, "a failed snapshot keeps no copies");
	kv_snapshot_end(kv);
	kv_destroy(kv);
}

Test(snapshot_slices, copies_keep_value_and_expiry_at_begin)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 1000);
	fill(kv, "p", 200);
	kvt_run(kv, "PEXPIRE p10 5000");
	kvt_run(kv, "PEXPIRE p11 5000");
	struct baton_buf expected, got;
	begin_sliced(kv, 2, &expected, &got);
	kvt_use(2, 3000); /* machine time moves: the header keeps 1000 */
	kvt_run(kv, "PERSIST p10");
	kvt_run(kv, "PEXPIRE p11 1");
	kvt_run(kv, "PEXPIRE p12 50");
	kvt_run(kv, "APPEND p13 more");
	kvt_run(kv, "SET p14 x KEEPTTL");
	kvt_run(kv, "MSET p15 a p15 b p16 c");
	kvt_run(kv, "SET p17 x GET");
	kvt_run(kv, "GETEX p18 PX 9");
	kvt_use(2, 4000);
	struct baton_buf sw, reply;
	baton_buf_init(&sw);
	baton_buf_init(&reply);
	cr_assert_eq(kv_encode_sweep(4000, 100, &sw), 0);
	cr_assert_eq(kv_apply(kv, (struct baton_machine_version){2}, sw.data,
			      sw.len, &reply),
		     0);
	cr_assert_eq(kv_dbsize(kv), 197, "the sweep deleted p11, p12, p18");
	struct kv_snapshot_stats st;
	kv_snapshot_stats(kv, &st);
	cr_assert_eq(st.preimages, 9, "p10..p18");
	cr_assert_gt(st.bytes_kept, 0);
	finish(kv, 64, &got);
	expect_same(&got, &expected);
	kv_snapshot_end(kv);
	baton_buf_free(&sw);
	baton_buf_free(&reply);
	baton_buf_free(&expected);
	baton_buf_free(&got);
	kv_destroy(kv);
}
