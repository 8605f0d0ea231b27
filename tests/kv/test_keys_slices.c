/*
 * KEYS in slices (kv_keys_begin/step/end): the array header of the keys
 * matched followed by the bulks of all steps is exactly KEYS's reply at
 * begin, whatever the writes between the steps (overwrites, deletes,
 * expiries, sweeps, FLUSHALL, a restore, a conversion down, the table
 * growing and shrinking) and whatever the budgets. Then the map's one
 * view at a time: a snapshot and a KEYS wait for each other.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "resp.h"

#define RUNS 150
#define LINE_BYTES 256

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

struct run {
	uint64_t rng;
	uint32_t version;
	uint64_t stamp;
	uint32_t keys, universe;
	struct baton_kv *kv;
	struct baton_buf other; /* a snapshot to restore mid-way */
	bool shrink;		/* deletes mostly */
	int flushes, restores, converts;
};

static struct {
	int grew, shrank, flushed, restored, converted, expired_skipped;
} seen;

static uint64_t pick(struct run *r, uint64_t n)
{
	return n > 0 ? kvt_rand(&r->rng) % n : 0;
}

/* Run a command line, machine time moving on under version 2 so that
 * keys expire while the listing goes on. */
static void line(struct run *r, const char *fmt, unsigned a, unsigned b)
{
	char text[LINE_BYTES];
	snprintf(text, sizeof text, fmt, a, b);
	if (r->version >= 2) {
		r->stamp += pick(r, 4);
		kvt_use(2, r->stamp);
	}
	kvt_run(r->kv, text);
}

static void sweep(struct run *r)
{
	struct baton_buf p, reply;
	baton_buf_init(&p);
	baton_buf_init(&reply);
	r->stamp += pick(r, 4);
	cr_assert_eq(kv_encode_sweep(r->stamp, (uint32_t)pick(r, 40), &p), 0);
	cr_assert_eq(kv_apply(r->kv, (struct baton_machine_version){2}, p.data,
			      p.len, &reply),
		     0);
	baton_buf_free(&p);
	baton_buf_free(&reply);
}

static void write_one(struct run *r)
{
	unsigned k = (unsigned)pick(r, r->universe);
	unsigned v = (unsigned)pick(r, 100000);
	uint64_t x = pick(r, 1000);
	bool v2 = r->version >= 2;
	if (r->shrink && pick(r, 3) > 0) {
		for (int i = 0; i < 8; i++)
			line(r, "DEL k%u k%u", (unsigned)pick(r, r->universe),
			     (unsigned)pick(r, r->universe));
	} else if (x < 2) {
		line(r, "FLUSHALL", 0, 0);
		r->flushes++;
	} else if (x < 8 && r->other.len > 0 && r->converts == 0) {
		cr_assert_eq(
			kv_restore(r->kv,
				   (struct baton_machine_version){r->version},
				   r->other.data, r->other.len),
			0, "%s", kv_errmsg(r->kv));
		r->restores++;
	} else if (x < 12 && v2 && r->converts == 0) {
		cr_assert_eq(kv_convert(r->kv,
					(struct baton_machine_version){2},
					(struct baton_machine_version){1}),
			     0);
		r->version = 1;
		kvt_use(1, 0);
		r->converts++;
	} else if (x < 300) {
		line(r, "SET k%u v%u", k, v);
	} else if (x < 450) {
		line(r, "SET n%u v%u", (unsigned)pick(r, 8u * r->keys + 64), v);
	} else if (x < 700) {
		line(r, "DEL k%u k%u", k, (unsigned)pick(r, r->universe));
	} else if (x < 780) {
		line(r, "APPEND k%u x%u", k, v);
	} else if (x < 880 && v2) {
		line(r, "PEXPIRE k%u %u", k, 1 + (unsigned)pick(r, 40));
	} else if (x < 930 && v2) {
		line(r, "PERSIST k%u", k, 0);
	} else if (x < 960 && v2) {
		sweep(r);
	} else {
		line(r, "SET k%u w%u", k, v);
	}
}

static const char *const patterns[] = {
	"*", "k1*", "k?", "*7", "k[0-4]*5", "n*", "nothing*", "*[^0-8]",
};

/* The map other, restored mid-way by some runs. */
static void make_other(struct run *r)
{
	struct baton_kv *o = kvt_new();
	kvt_use(r->version, r->version >= 2 ? r->stamp : 0);
	char text[LINE_BYTES];
	for (unsigned i = 0, n = (unsigned)pick(r, 600); i < n; i++) {
		snprintf(text, sizeof text, "SET %c%u o", i % 2 ? 'k' : 'o', i);
		kvt_run(o, text);
	}
	kvt_snapshot(o, &r->other);
	kv_destroy(o);
}

static void one_run(uint64_t seed)
{
	struct run r = {.rng = seed * 0x9E3779B97F4A7C15u + 7};
	baton_buf_init(&r.other);
	r.kv = kvt_new();
	r.version = pick(&r, 4) == 0 ? 1 : 2;
	r.keys = (uint32_t)(pick(&r, 8) == 0 ? pick(&r, 20)
					     : 20 + pick(&r, 3000));
	r.universe = 2 * r.keys + 16;
	r.stamp = 1000;
	r.shrink = pick(&r, 4) == 0;
	if (pick(&r, 3) == 0)
		make_other(&r);
	kvt_use(r.version, r.version >= 2 ? r.stamp : 0);
	for (unsigned i = 0; i < r.keys; i++) {
		if (r.version >= 2 && pick(&r, 4) == 0)
			line(&r, "SET k%u v PX %u", i,
			     1 + (unsigned)pick(&r, 600));
		else
			line(&r, "SET k%u v%u", i, (unsigned)pick(&r, 1000));
	}
	if (r.version >= 2) { /* some keys expired, not yet deleted */
		r.stamp += 200;
		kvt_use(2, r.stamp);
	}
	const char *pattern =
		patterns[pick(&r, sizeof patterns / sizeof patterns[0])];
	char text[LINE_BYTES];
	snprintf(text, sizeof text, "KEYS %s", pattern);
	/* The reply of the one-call KEYS at begin. */
	size_t expected_len = strlen(kvt_run(r.kv, text));
	char *expected = malloc(expected_len + 1);
	cr_assert_not_null(expected);
	memcpy(expected, kvt_run(r.kv, text), expected_len + 1);
	/* Keys expired at begin but not deleted: in DBSIZE, not in KEYS. */
	seen.expired_skipped += r.kv->table.count > 0 &&
				strcmp(pattern, "*") == 0 &&
				kv_dbsize(r.kv) > (uint64_t)atoi(expected + 1);

	cr_assert_eq(
		kv_keys_begin(r.kv, (const uint8_t *)pattern, strlen(pattern)),
		0, "%s", kv_errmsg(r.kv));
	struct baton_buf bulks, got;
	baton_buf_init(&bulks);
	baton_buf_init(&got);
	uint64_t matched = 0, steps = 0;
	bool done = false, grew = false, shrank = false;
	while (!done) {
		bool small = r.shrink || pick(&r, 2) == 0;
		size_t budget = 1 + (size_t)pick(&r, small ? 8 : 5000);
		cr_assert_eq(
			kv_keys_step(r.kv, budget, &bulks, &matched, &done), 0,
			"seed %llu: %s", (unsigned long long)seed,
			kv_errmsg(r.kv));
		cr_assert_lt(++steps, 1000000u);
		uint64_t size = r.kv->table.size;
		for (uint64_t i = 0, n = pick(&r, 24); !done && i < n; i++)
			write_one(&r);
		grew |= r.kv->table.size > size;
		shrank |= r.kv->table.size < size && kv_dbsize(r.kv) > 0;
	}
	cr_assert(!kv_snapshot_open(r.kv));
	cr_assert(kv_keys_open(r.kv)); /* finished, open until ended */
	kv_keys_end(r.kv);
	cr_assert(!kv_keys_open(r.kv));
	cr_assert_eq(resp_array(&got, matched), 0);
	cr_assert_eq(baton_buf_append(&got, bulks.data, bulks.len), 0);
	cr_assert_eq(got.len, expected_len,
		     "seed %llu, KEYS %s: %zu bytes, not %zu",
		     (unsigned long long)seed, pattern, got.len, expected_len);
	cr_assert_eq(memcmp(got.data, expected, got.len), 0,
		     "seed %llu, KEYS %s: the replies differ",
		     (unsigned long long)seed, pattern);
	seen.grew += grew;
	seen.shrank += shrank;
	seen.flushed += r.flushes > 0;
	seen.restored += r.restores > 0;
	seen.converted += r.converts > 0;
	free(expected);
	baton_buf_free(&bulks);
	baton_buf_free(&got);
	baton_buf_free(&r.other);
	kv_destroy(r.kv);
}

Test(keys_slices, equal_to_one_call_keys_under_random_writes, .timeout = 120)
{
	for (uint64_t seed = 1; seed <= RUNS; seed++)
		one_run(seed);
	/* The runs did reach what they are for. */
	cr_assert_gt(seen.grew, 5, "%d runs grew the table", seen.grew);
	cr_assert_gt(seen.shrank, 5, "%d runs shrank it", seen.shrank);
	cr_assert_gt(seen.flushed, 5, "%d runs flushed", seen.flushed);
	cr_assert_gt(seen.restored, 3, "%d runs restored", seen.restored);
	cr_assert_gt(seen.converted, 3, "%d runs converted", seen.converted);
	cr_assert_gt(seen.expired_skipped, 3, "%d runs skipped expired keys",
		     seen.expired_skipped);
}

/* SET x0..x(n-1). */
static void fill(struct baton_kv *kv, const char *prefix, unsigned n)
{
	char text[LINE_BYTES];
	for (unsigned i = 0; i < n; i++) {
		snprintf(text, sizeof text, "SET %s%u v%u", prefix, i, i);
		kvt_run(kv, text);
	}
}

Test(keys_slices, one_view_at_a_time)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "b", 300);
	struct baton_machine_version v = {2};
	struct baton_buf bulks, snap;
	baton_buf_init(&bulks);
	baton_buf_init(&snap);
	uint64_t matched = 0;
	bool done = false;

	/* A KEYS open: a snapshot waits, and is not confused with it. */
	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"b1*", 3), 0);
	cr_assert_eq(kv_snapshot_begin(kv, v), BATON_EBUSY);
	cr_assert(strstr(kv_errmsg(kv), "KEYS") != NULL, "%s", kv_errmsg(kv));
	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"*", 1), BATON_EBUSY);
	cr_assert(!kv_snapshot_open(kv));
	cr_assert_eq(kv_snapshot_step(kv, 1, sink, &snap, &done), BATON_ESTATE);
	kv_snapshot_end(kv); /* the pipeline's abandon: KEYS goes on */
	cr_assert(kv_keys_open(kv));
	cr_assert_eq(kv_keys_step(kv, 10, &bulks, &matched, &done), 0);
	kv_keys_end(kv);
	cr_assert(!kv_keys_open(kv));
	cr_assert_eq(kv_keys_step(kv, 10, &bulks, &matched, &done),
		     BATON_ESTATE);

	/* A snapshot open: KEYS waits; the snapshot is untouched. */
	struct baton_buf expected;
	baton_buf_init(&expected);
	kvt_snapshot(kv, &expected);
	cr_assert_eq(kv_snapshot_begin(kv, v), 0);
	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"*", 1), BATON_EBUSY);
	cr_assert(strstr(kv_errmsg(kv), "snapshot") != NULL, "%s",
		  kv_errmsg(kv));
	cr_assert_eq(kv_keys_step(kv, 10, &bulks, &matched, &done),
		     BATON_ESTATE);
	kv_keys_end(kv); /* nothing of its kind open: nothing happens */
	cr_assert(kv_snapshot_open(kv));
	done = false;
	while (!done)
		cr_assert_eq(kv_snapshot_step(kv, 100, sink, &snap, &done), 0);
	kv_snapshot_end(kv);
	cr_assert_eq(snap.len, expected.len);
	cr_assert_eq(memcmp(snap.data, expected.data, snap.len), 0);

	/* Free again: KEYS begins and lists what is there. */
	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"b29?", 4), 0);
	baton_buf_reset(&bulks);
	matched = 0;
	done = false;
	while (!done)
		cr_assert_eq(kv_keys_step(kv, 7, &bulks, &matched, &done), 0);
	cr_assert_eq(matched, 10);
	kv_keys_end(kv);
	baton_buf_free(&bulks);
	baton_buf_free(&snap);
	baton_buf_free(&expected);
	kv_destroy(kv);
}

Test(keys_slices, its_copies_are_not_the_snapshot_figures)
{
	struct baton_kv *kv = kvt_new();
	fill(kv, "c", 200);
	struct kv_snapshot_stats before;
	kv_snapshot_stats(kv, &before);
	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"*", 1), 0);
	fill(kv, "c", 200); /* every key copied */
	/* The snapshot figures INFO shows are not a KEYS's. */
	struct kv_snapshot_stats after;
	kv_snapshot_stats(kv, &after);
	cr_assert_eq(after.preimages, before.preimages);
	struct baton_buf bulks;
	baton_buf_init(&bulks);
	uint64_t matched = 0;
	bool done = false;
	while (!done)
		cr_assert_eq(kv_keys_step(kv, 50, &bulks, &matched, &done), 0);
	cr_assert_eq(matched, 200);
	kv_keys_end(kv);
	baton_buf_free(&bulks);
	kv_destroy(kv);
}

Test(keys_slices, destroyed_or_restored_while_open)
{
	struct baton_kv *kv = kvt_new();
	kvt_use(2, 100);
	fill(kv, "d", 100);
	struct baton_buf other, bulks;
	baton_buf_init(&other);
	baton_buf_init(&bulks);
	struct baton_kv *o = kvt_new();
	fill(o, "e", 5);
	kvt_use(2, 100);
	kvt_snapshot(o, &other);
	kv_destroy(o);
	uint64_t matched = 0;
	bool done = false;

	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"d*", 2), 0);
	cr_assert_eq(kv_keys_step(kv, 3, &bulks, &matched, &done), 0);
	cr_assert_eq(kv_restore(kv, (struct baton_machine_version){2},
				other.data, other.len),
		     0);
	cr_assert(kv_keys_open(kv)); /* it lists the map replaced */
	cr_assert_eq(kv_dbsize(kv), 5);
	kvt_run(kv, "SET d7 new"); /* the restored table tells nobody */
	while (!done)
		cr_assert_eq(kv_keys_step(kv, 9, &bulks, &matched, &done), 0);
	cr_assert_eq(matched, 100);
	kv_keys_end(kv);

	cr_assert_eq(kv_keys_begin(kv, (const uint8_t *)"*", 1), 0);
	cr_assert_eq(kv_keys_step(kv, 1, &bulks, &matched, &done), 0);
	kvt_run(kv, "DEL e1 e2");
	kv_destroy(kv); /* frees the listing too (ASan would say) */
	baton_buf_free(&other);
	baton_buf_free(&bulks);
}
