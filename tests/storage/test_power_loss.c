/*
 * Power-loss tests: a random workload runs through the real storage on the
 * fault-injecting file layer (fault_vfs.h), a fault hits at a random point,
 * the machine "reboots", and the storage is opened again. Faults:
 *   lose     power loss: everything not synced is gone;
 *   tear     power loss tearing the last unsynced write at a random byte;
 *   flip     a flipped byte anywhere in the files after a clean stop;
 *   sync     an fsync/fdatasync fails (then power loss).
 * After each: every entry reported durable is present and intact; nothing
 * corrupt is accepted; damage to durable data is refused as corruption.
 *
 * The workload is drawn from the seed; how the writer thread groups
 * submissions depends on timing, so a seed fixes the workload and the fault
 * point, not the exact batches. POWER_LOSS_SEEDS sets the count (default
 * 5000) and POWER_LOSS_FIRST_SEED the first; a failure prints its seed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_vfs.h"
#include "format.h"
#include "store_util.h"

#define DIR "/data"
#define MAX_SUBMISSIONS 160u
#define SEGMENT_BYTES 16384u

/* ---- a seeded generator ---- */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + rng_next(s) % (hi - lo + 1);
}

/* Entry payload lengths vary but follow from index and term. */
static uint32_t len_of(baton_index i, baton_term t)
{
	return (uint32_t)((i * 37 + t * 11) % 300);
}

/* ---- the model: what the log and hard state are after submission j ---- */
struct model {
	baton_term term;
	baton_node_id vote;
	baton_index last;
	baton_term *terms; /* terms[i] for index i, 1..last */
};

struct run {
	uint64_t seed;
	struct model m[MAX_SUBMISSIONS + 1]; /* m[0]: before any */
	uint32_t submitted;		     /* submissions accepted */
	uint32_t completed_ok;		     /* highest seq done with 0 */
	bool completion_failed;
	bool refused; /* a submit or snapshot failed with BATON_EIO */
	baton_index snap_done, snap_tried; /* own snapshots */
	baton_term snap_done_term, snap_tried_term;
	baton_index snap_floor; /* truncations stay above this */
};

static void model_copy(struct model *to, const struct model *from)
{
	*to = *from;
	to->terms = malloc((from->last + 1) * sizeof *to->terms);
	memcpy(to->terms, from->terms, (from->last + 1) * sizeof *to->terms);
}

static void on_done(void *data, uint64_t seq, int status)
{
	struct run *r = data;
	if (status == 0 && !r->completion_failed)
		r->completed_ok = (uint32_t)seq;
	else
		r->completion_failed = true;
}

/* One random update of the workload; false when the storage refused it. */
static bool step(struct run *r, struct baton_storage *s, uint64_t *rng)
{
	struct model *cur = &r->m[r->submitted];
	struct model next;
	model_copy(&next, cur);
	struct baton_update u = {.persist_needed = true};
	uint64_t dice = rng_range(rng, 0, 99);
	baton_index from = next.last + 1;
	if (dice < 10) {
		next.term++;
		next.vote = rng_range(rng, 0, 5);
		u.hard_state_changed = true;
		u.hs_term = next.term;
		u.hs_vote = next.vote;
	} else if (dice < 20 && next.last > r->snap_floor + 1) {
		/* A conflicting suffix, replaced by a newer term's. */
		from = rng_range(rng, r->snap_floor + 1, next.last);
		u.truncate_from = from;
		next.term++; /* a new leader's term, learnt with its entries */
		next.vote = 0;
		u.hard_state_changed = true;
		u.hs_term = next.term;
		u.hs_vote = next.vote;
	}
	uint32_t n = dice < 10 ? 0 : (uint32_t)rng_range(rng, 1, 24);
	struct baton_entry *e = calloc(n + 1, sizeof *e);
	next.terms = realloc(next.terms, (from + n) * sizeof *next.terms);
	for (uint32_t i = 0; i < n; i++) {
		e[i].index = from + i;
		e[i].term = next.term > 0 ? next.term : 1;
		e[i].type = BATON_ENTRY_COMMAND;
		e[i].len = len_of(e[i].index, e[i].term);
		e[i].buf = malloc(e[i].len + 1);
		payload_fill(e[i].buf, e[i].len, e[i].index, e[i].term);
		next.terms[from + i] = e[i].term;
	}
	if (n > 0 || u.truncate_from)
		next.last = from + n - 1;
	u.entries = e;
	u.n_entries = n;
	if (dice >= 95 && cur->last > r->snap_done) {
		/* The application snapshots something it applied, then lets
		 * the log be compacted behind it. */
		baton_index at = rng_range(rng, r->snap_done + 1, cur->last);
		baton_term t = cur->terms[at];
		r->snap_tried = at;
		r->snap_tried_term = t;
		int rv = store_snapshot(s, at, t, len_of(at, t) * 7);
		cr_assert(rv == 0 || rv == BATON_EIO, "seed %llu: snapshot: %s",
			  (unsigned long long)r->seed, baton_err_name(rv));
		r->refused = r->refused || rv == BATON_EIO;
		if (rv == 0) {
			r->snap_done = at;
			r->snap_done_term = t;
			r->snap_floor = at;
			u.compact_upto = at;
		}
	}
	uint64_t seq;
	int rv = s->ops->submit(s, &u, &seq);
	entries_free(e, n);
	if (rv != 0) {
		cr_assert_eq(rv, BATON_EIO, "seed %llu: submit: %s",
			     (unsigned long long)r->seed, baton_err_name(rv));
		free(next.terms);
		r->refused = true;
		return false;
	}
	cr_assert_eq(seq, r->submitted + 1);
	r->m[++r->submitted] = next;
	return true;
}

/* Run the workload until done or the storage stops taking writes. */
static void workload(struct run *r, struct baton_storage *s, uint64_t *rng,
		     uint32_t n)
{
	while (r->submitted < n) {
		/* Bursts, so the writer forms groups of several. */
		uint32_t burst = (uint32_t)rng_range(rng, 1, 8);
		bool ok = true;
		for (uint32_t i = 0; i < burst && ok && r->submitted < n; i++)
			ok = step(r, s, rng);
		if (rng_range(rng, 0, 3) == 0 || !ok)
			baton_fs_storage_flush(s);
		s->ops->poll(s, on_done, r);
		if (!ok)
			break;
	}
	baton_fs_storage_flush(s);
	s->ops->poll(s, on_done, r);
}

struct durable_view {
	baton_index snap;
	const struct baton_durable_state *d;
};

/* The recovered log equals model m above the snapshot. */
static bool log_matches(const struct durable_view *v, const struct model *m)
{
	const struct baton_durable_state *d = v->d;
	baton_index expect = m->last > v->snap ? m->last - v->snap : 0;
	if (d->n_entries != expect)
		return false;
	for (uint32_t i = 0; i < d->n_entries; i++) {
		const struct baton_entry *e = &d->entries[i];
		if (e->index != v->snap + 1 + i ||
		    e->term != m->terms[e->index])
			return false;
	}
	return true;
}

/* Every recovered entry is intact, whatever else is checked. */
static void check_intact(const struct run *r,
			 const struct baton_durable_state *d)
{
	for (uint32_t i = 0; i < d->n_entries; i++) {
		const struct baton_entry *e = &d->entries[i];
		uint32_t len = len_of(e->index, e->term);
		uint8_t want[300];
		payload_fill(want, len, e->index, e->term);
		cr_assert(e->len == len && memcmp(want, e->buf, len) == 0,
			  "seed %llu: entry %llu recovered damaged",
			  (unsigned long long)r->seed,
			  (unsigned long long)e->index);
	}
	if (d->has_snapshot) {
		baton_index i = d->snapshot.meta.index;
		baton_term t = d->snapshot.meta.term;
		size_t len = len_of(i, t) * 7u;
		uint8_t *want = malloc(len + 1);
		payload_fill(want, (uint32_t)len, i, t);
		cr_assert(d->snapshot_len == len &&
				  memcmp(want, d->snapshot_data, len) == 0,
			  "seed %llu: snapshot %llu recovered damaged",
			  (unsigned long long)r->seed, (unsigned long long)i);
		free(want);
	}
}

/* After a crash: the recovered state is the state after some submission
 * j with completed_ok <= j <= submitted (for the log and, separately, for
 * term and vote, which a group writes before its records). */
static void check_recovered(const struct run *r,
			    const struct baton_durable_state *d)
{
	check_intact(r, d);
	baton_index snap = d->has_snapshot ? d->snapshot.meta.index : 0;
	cr_assert(snap == r->snap_done || snap == r->snap_tried,
		  "seed %llu: snapshot %llu, expected %llu (or %llu)",
		  (unsigned long long)r->seed, (unsigned long long)snap,
		  (unsigned long long)r->snap_done,
		  (unsigned long long)r->snap_tried);
	struct durable_view v = {snap, d};
	bool log_ok = false, hs_ok = false;
	for (uint32_t j = r->completed_ok; j <= r->submitted; j++) {
		log_ok = log_ok || log_matches(&v, &r->m[j]);
		hs_ok = hs_ok ||
			(d->term == r->m[j].term && d->vote == r->m[j].vote);
	}
	cr_assert(log_ok,
		  "seed %llu: recovered log (%u entries after %llu) is not the "
		  "log after any submission from %u (the last reported "
		  "durable) to %u",
		  (unsigned long long)r->seed, d->n_entries,
		  (unsigned long long)snap, r->completed_ok, r->submitted);
	cr_assert(hs_ok, "seed %llu: term %llu vote %llu never written",
		  (unsigned long long)r->seed, (unsigned long long)d->term,
		  (unsigned long long)d->vote);
}

static void run_free(struct run *r)
{
	for (uint32_t j = 0; j <= r->submitted; j++)
		free(r->m[j].terms);
}

enum fault { FAULT_LOSE, FAULT_TEAR, FAULT_FLIP, FAULT_SYNC, N_FAULTS };

struct tally {
	uint32_t runs[N_FAULTS];
	uint32_t refused;  /* flips that hit durable data */
	uint32_t repaired; /* flips in slack space, accepted intact */
};

/* Where the durable, live bytes of a segment end (its last batch). */
static uint64_t segment_live_end(struct fault_vfs *fv, const char *path)
{
	uint64_t size;
	cr_assert_eq(fault_vfs_durable_size(fv, path, &size), 0);
	uint8_t *b = malloc(size + 1);
	size_t n;
	cr_assert_eq(fault_vfs_read_durable(fv, path, 0, b, size, &n), 0);
	uint64_t off = WAL_SEGMENT_HEADER_LEN;
	while (off + WAL_BATCH_HEADER_LEN <= n &&
	       baton_le_get_u32(b + off) == WAL_BATCH_MAGIC)
		off += WAL_BATCH_HEADER_LEN + baton_le_get_u64(b + off + 8) +
		       WAL_TRAILER_LEN;
	free(b);
	return off;
}

/* Half the flips in a segment aim at the bytes that frame the data (batch
 * headers and trailers), which a uniform pick would seldom hit. Returns a
 * byte of a random batch's header or trailer, or `fallback`. */
static uint64_t structure_byte(struct fault_vfs *fv, const char *path,
			       uint64_t *rng, uint64_t fallback)
{
	uint64_t size;
	cr_assert_eq(fault_vfs_durable_size(fv, path, &size), 0);
	uint8_t *b = malloc(size + 1);
	size_t n;
	cr_assert_eq(fault_vfs_read_durable(fv, path, 0, b, size, &n), 0);
	uint64_t frames[2 * 256];
	uint32_t k = 0;
	uint64_t off = WAL_SEGMENT_HEADER_LEN;
	while (off + WAL_BATCH_HEADER_LEN <= n &&
	       baton_le_get_u32(b + off) == WAL_BATCH_MAGIC &&
	       k + 2 <= 2 * 256) {
		uint64_t t = off + WAL_BATCH_HEADER_LEN +
			     baton_le_get_u64(b + off + 8);
		frames[k++] = off + rng_range(rng, 0, WAL_BATCH_HEADER_LEN - 1);
		frames[k++] = t + rng_range(rng, 0, WAL_TRAILER_LEN - 1);
		off = t + WAL_TRAILER_LEN;
	}
	free(b);
	return k == 0 ? fallback : frames[rng_range(rng, 0, k - 1)];
}

/* Flip one byte of one durable file; true if it hit data that must be
 * refused (anything but a segment's zeroed slack). */
static bool flip_random(struct fault_vfs *fv, uint64_t *rng, char *what,
			size_t cap)
{
	char **names;
	size_t n;
	cr_assert_eq(fv->base.ops->list(&fv->base, DIR, &names, &n), 0);
	char path[256] = "";
	uint64_t size = 0;
	for (int tries = 0; tries < 100 && size == 0; tries++) {
		const char *name = names[rng_range(rng, 0, n - 1)];
		snprintf(path, sizeof path, DIR "/%s", name);
		if (strcmp(name, "LOCK") == 0 ||
		    fault_vfs_durable_size(fv, path, &size) != 0)
			size = 0;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	cr_assert_gt(size, 0);
	uint64_t off = rng_range(rng, 0, size - 1);
	if (strstr(path, "/wal-") != NULL && rng_range(rng, 0, 1) == 0)
		off = structure_byte(fv, path, rng, off);
	uint8_t mask = (uint8_t)rng_range(rng, 1, 255);
	cr_assert_eq(fault_vfs_flip(fv, path, off, mask), 0);
	snprintf(what, cap, "%s at %llu", path, (unsigned long long)off);
	if (strstr(path, "/wal-") == NULL)
		return true;
	return off < segment_live_end(fv, path);
}

/* After recovery the node carries on: whatever recovery repaired must
 * not come back to haunt the next writes and the next restart. Consumes
 * d and s. */
static void life_goes_on(const struct run *r, struct fault_vfs *fv,
			 struct baton_storage *s, struct baton_durable_state *d)
{
	baton_index snap = d->has_snapshot ? d->snapshot.meta.index : 0;
	baton_index last =
		d->n_entries > 0 ? d->entries[d->n_entries - 1].index : snap;
	baton_term term =
		d->n_entries > 0
			? d->entries[d->n_entries - 1].term
			: (d->has_snapshot ? d->snapshot.meta.term : 1);
	uint32_t before = d->n_entries;
	baton_durable_state_free(d);
	uint32_t n = 5;
	struct baton_entry *e = calloc(n, sizeof *e);
	for (uint32_t i = 0; i < n; i++) {
		e[i].index = last + 1 + i;
		e[i].term = term;
		e[i].type = BATON_ENTRY_COMMAND;
		e[i].len = len_of(e[i].index, term);
		e[i].buf = malloc(e[i].len + 1);
		payload_fill(e[i].buf, e[i].len, e[i].index, term);
	}
	cr_assert_eq(store_append(s, 0, e, n), 0,
		     "seed %llu: append after "
		     "recovery: %s",
		     (unsigned long long)r->seed, s->ops->errmsg(s));
	entries_free(e, n);
	s->ops->close(s);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 0);
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = DIR;
	o.segment_bytes = SEGMENT_BYTES;
	o.vfs = &fv->base;
	char err[512] = "";
	int rv = baton_fs_storage_open(&o, &s, err, sizeof err);
	cr_assert_eq(rv, 0, "seed %llu: restart after recovery: %s (%s)",
		     (unsigned long long)r->seed, baton_err_name(rv), err);
	cr_assert_eq(s->ops->load(s, d), 0);
	cr_assert_eq(d->n_entries, before + n,
		     "seed %llu: %u entries after the next restart, not %u",
		     (unsigned long long)r->seed, d->n_entries, before + n);
	check_intact(r, d);
	baton_durable_state_free(d);
	s->ops->close(s);
}

static void one_seed(uint64_t seed, struct tally *t)
{
	struct run *r = calloc(1, sizeof *r);
	r->seed = seed;
	r->m[0].terms = calloc(1, sizeof *r->m[0].terms);
	uint64_t rng = seed;
	struct fault_vfs *fv = fault_vfs_new();
	cr_assert_not_null(fv);
	enum fault f = (enum fault)(seed % N_FAULTS);
	t->runs[f]++;
	uint32_t n = (uint32_t)rng_range(&rng, 20, MAX_SUBMISSIONS);

	struct baton_storage *s = store_open(DIR, SEGMENT_BYTES, &fv->base);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	if (f == FAULT_LOSE || f == FAULT_TEAR)
		fault_vfs_halt_after(fv, rng_range(&rng, 1, n * 3));
	if (f == FAULT_SYNC)
		fault_vfs_fail_sync_after(fv, rng_range(&rng, 1, n / 2), EIO);
	workload(r, s, &rng, n);
	if (f == FAULT_SYNC) {
		struct fault_vfs_stats st;
		fault_vfs_stats(fv, &st);
		if (st.sync_failures > 0) {
			/* The failure stopped all writes, for good. */
			cr_assert(r->completion_failed || r->refused,
				  "seed %llu: a failed sync went unreported",
				  (unsigned long long)seed);
			struct baton_update u = {.persist_needed = true};
			uint64_t seq;
			cr_assert_eq(s->ops->submit(s, &u, &seq), BATON_EIO);
			cr_assert(strstr(s->ops->errmsg(s), "sync") != NULL,
				  "seed %llu: %s", (unsigned long long)seed,
				  s->ops->errmsg(s));
		}
	}
	fault_vfs_halt(fv);
	s->ops->close(s);
	fault_vfs_crash(fv,
			f == FAULT_TEAR ? FAULT_CRASH_TEAR : FAULT_CRASH_CLEAN,
			rng_next(&rng));

	bool must_refuse = false;
	char what[300] = "";
	if (f == FAULT_FLIP)
		must_refuse = flip_random(fv, &rng, what, sizeof what);

	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = DIR;
	o.segment_bytes = SEGMENT_BYTES;
	o.vfs = &fv->base;
	char err[512] = "";
	int rv = baton_fs_storage_open(&o, &s, err, sizeof err);
	if (f == FAULT_FLIP && rv != 0) {
		cr_assert(rv == BATON_ECORRUPT || rv == BATON_EVERSION,
			  "seed %llu: flip %s: %s (%s)",
			  (unsigned long long)seed, what, baton_err_name(rv),
			  err);
		cr_assert(strstr(err, DIR "/") != NULL,
			  "seed %llu: the refusal names no file: %s",
			  (unsigned long long)seed, err);
		t->refused++;
	} else {
		cr_assert_eq(rv, 0, "seed %llu: reopen: %s (%s)%s%s",
			     (unsigned long long)seed, baton_err_name(rv), err,
			     what[0] ? "; flipped " : "", what);
		cr_assert_eq(s->ops->load(s, &d), 0);
		cr_assert(!must_refuse,
			  "seed %llu: accepted a flip in durable data (%s); "
			  "loaded %u entries after snapshot %llu",
			  (unsigned long long)seed, what, d.n_entries,
			  (unsigned long long)(d.has_snapshot
						       ? d.snapshot.meta.index
						       : 0));
		check_recovered(r, &d);
		life_goes_on(r, fv, s, &d);
		if (f == FAULT_FLIP)
			t->repaired++;
	}
	run_free(r);
	free(r);
	fault_vfs_free(fv);
}

Test(power_loss, seeded_faults)
{
	uint64_t seeds = 5000;
	const char *env = getenv("POWER_LOSS_SEEDS");
	if (env != NULL)
		seeds = strtoull(env, NULL, 10);
	uint64_t first = 1;
	env = getenv("POWER_LOSS_FIRST_SEED");
	if (env != NULL)
		first = strtoull(env, NULL, 10);
	struct tally t = {0};
	for (uint64_t seed = first; seed < first + seeds; seed++)
		one_seed(seed, &t);
	cr_log_info("power loss: %llu seeds (lose %u, tear %u, flip %u: %u "
		    "refused, %u harmless; sync failure %u)",
		    (unsigned long long)seeds, t.runs[FAULT_LOSE],
		    t.runs[FAULT_TEAR], t.runs[FAULT_FLIP], t.refused,
		    t.repaired, t.runs[FAULT_SYNC]);
	/* The flips must have hit durable data in most runs, or the test
	 * proves little. */
	cr_assert_gt(t.refused, t.runs[FAULT_FLIP] / 4);
}
