/* The application snapshot's commit in the background
 * (snapshot_commit_start / snapshot_commit_wait): it ends, notifies, reads
 * back and survives a reopen; it refuses an older snapshot; a failed sync
 * stops the storage's writes; reads of the previous snapshot go on while
 * it runs; close waits for it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault_vfs.h"
#include "store_util.h"

static char dir[256];

static void setup(void)
{
	tmpdir_make(dir, sizeof dir);
}

static void teardown(void)
{
	tmpdir_remove(dir);
}

TestSuite(snapshot_commit, .init = setup, .fini = teardown);

/* wait(k, false) until it stops answering BATON_EAGAIN (5 s at most). */
static int wait_polling(struct baton_storage *s, struct baton_snapshot_sink *k)
{
	for (int i = 0; i < 5000; i++) {
		int rv = s->ops->snapshot_commit_wait(k, false);
		if (rv != BATON_EAGAIN)
			return rv;
		store_sleep_ms(1);
	}
	cr_assert_fail("the snapshot commit did not end within 5 s");
	return BATON_EAGAIN;
}

/* The durable snapshot at `index` reads back as store_snapshot wrote it. */
static void expect_readable(struct baton_storage *s, baton_index index,
			    baton_term term, size_t len)
{
	uint8_t *want = malloc(len), *got = malloc(len + 1);
	payload_fill(want, (uint32_t)len, index, term);
	size_t off = 0, n;
	do {
		int rv = s->ops->snapshot_read(
			s, index, off, got + off,
			len + 1 - off < 4096 ? len + 1 - off : 4096, &n);
		cr_assert_eq(rv, 0, "read at %zu: %s", off, s->ops->errmsg(s));
		off += n;
	} while (n > 0 && off <= len);
	cr_assert_eq(off, len);
	cr_assert_arr_eq(got, want, len);
	free(want);
	free(got);
}

/* After a reopen, the snapshot at `index` loads whole. */
static void expect_loaded(baton_index index, baton_term term, size_t len)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, index);
	cr_assert_eq(d.snapshot.meta.term, term);
	cr_assert_eq(d.snapshot_len, len);
	uint8_t *want = malloc(len);
	payload_fill(want, (uint32_t)len, index, term);
	cr_assert_arr_eq(d.snapshot_data, want, len);
	free(want);
	baton_durable_state_free(&d);
	s->ops->close(s);
}

Test(snapshot_commit, start_then_polling_wait_makes_it_durable)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_snapshot_sink *k;
	cr_assert_eq(store_snapshot_written(s, 30, 2, 100000, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	cr_assert_eq(wait_polling(s, k), 0, "%s", s->ops->errmsg(s));
	expect_readable(s, 30, 2, 100000);
	s->ops->close(s);
	expect_loaded(30, 2, 100000);
}

Test(snapshot_commit, blocking_wait_returns_the_result)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_snapshot_sink *k;
	cr_assert_eq(store_snapshot_written(s, 7, 1, 5000, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	cr_assert_eq(s->ops->snapshot_commit_wait(k, true), 0);
	expect_readable(s, 7, 1, 5000);
	/* The sink is free again: the next snapshot may begin. */
	cr_assert_eq(store_snapshot(s, 9, 1, 10), 0);
	s->ops->close(s);
	expect_loaded(9, 1, 10);
}

Test(snapshot_commit, one_snapshot_at_a_time_until_waited_for)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_snapshot_sink *k, *k2;
	cr_assert_eq(store_snapshot_written(s, 7, 1, 5000, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	/* Ended or not, the commit holds the sink until its wait. */
	cr_assert_eq(store_snapshot_written(s, 8, 1, 10, &k2), BATON_EBUSY);
	cr_assert_eq(s->ops->snapshot_commit_wait(k, true), 0);
	cr_assert_eq(store_snapshot(s, 8, 1, 10), 0);
	s->ops->close(s);
}

Test(snapshot_commit, older_snapshot_is_refused)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	cr_assert_eq(store_snapshot(s, 50, 3, 1000), 0);
	struct baton_snapshot_sink *k;
	cr_assert_eq(store_snapshot_written(s, 40, 3, 2000, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	cr_assert_eq(wait_polling(s, k), BATON_ESTATE);
	cr_assert(strstr(s->ops->errmsg(s), "not newer") != NULL, "%s",
		  s->ops->errmsg(s));
	/* Equal is not newer either. */
	cr_assert_eq(store_snapshot_written(s, 50, 3, 2000, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	cr_assert_eq(s->ops->snapshot_commit_wait(k, true), BATON_ESTATE);
	expect_readable(s, 50, 3, 1000);
	/* A refusal is no failure: writes go on. */
	struct baton_entry *e = entries_make(51, 3, 3, 16);
	cr_assert_eq(store_append(s, 0, e, 3), 0);
	entries_free(e, 3);
	s->ops->close(s);
	expect_loaded(50, 3, 1000);
}

/* While the new snapshot syncs and replaces the old one, reads of the old
 * one return its bytes, whole, until they say it is gone. */
Test(snapshot_commit, reads_of_the_previous_snapshot_race_with_the_commit)
{
	enum { OLD_LEN = 64 * 1024, NEW_LEN = 8 * 1024 * 1024 };
	struct baton_storage *s = store_open(dir, 0, NULL);
	cr_assert_eq(store_snapshot(s, 100, 4, OLD_LEN), 0);
	uint8_t *want = malloc(OLD_LEN), *got = malloc(OLD_LEN);
	payload_fill(want, OLD_LEN, 100, 4);
	struct baton_snapshot_sink *k;
	cr_assert_eq(store_snapshot_written(s, 200, 5, NEW_LEN, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	int rv = BATON_EAGAIN;
	unsigned reads = 0;
	for (int i = 0; i < 5000 && rv == BATON_EAGAIN; i++) {
		size_t n = 0, off = 0;
		int r = 0;
		while (r == 0 && off < OLD_LEN) {
			r = s->ops->snapshot_read(s, 100, off, got + off,
						  OLD_LEN - off, &n);
			off += n;
		}
		if (r == 0) {
			cr_assert_eq(off, OLD_LEN);
			cr_assert_arr_eq(got, want, OLD_LEN);
			reads++;
		} else {
			cr_assert_eq(r, BATON_ENOTFOUND, "%s",
				     baton_err_name(r));
		}
		rv = s->ops->snapshot_commit_wait(k, false);
		if (rv == BATON_EAGAIN)
			store_sleep_ms(1);
	}
	cr_assert_eq(rv, 0, "%s", s->ops->errmsg(s));
	cr_log_info("%u whole reads of the old snapshot during the commit",
		    reads);
	size_t n;
	cr_assert_eq(s->ops->snapshot_read(s, 100, 0, got, 16, &n),
		     BATON_ENOTFOUND);
	expect_readable(s, 200, 5, NEW_LEN);
	free(want);
	free(got);
	s->ops->close(s);
	expect_loaded(200, 5, NEW_LEN);
}

static atomic_uint notified;

static void count_notify(void *data)
{
	(void)data;
	atomic_fetch_add(&notified, 1);
}

/* The notify callback fires once the commit has ended: a wait then never
 * answers BATON_EAGAIN. */
Test(snapshot_commit, notify_fires_when_it_ends)
{
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = dir;
	o.notify = count_notify;
	struct baton_storage *s;
	char err[256];
	cr_assert_eq(baton_fs_storage_open(&o, &s, err, sizeof err), 0, "%s",
		     err);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	atomic_store(&notified, 0);
	struct baton_snapshot_sink *k;
	cr_assert_eq(store_snapshot_written(s, 12, 2, 300000, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	for (int i = 0; i < 5000 && atomic_load(&notified) == 0; i++)
		store_sleep_ms(1);
	cr_assert_eq(atomic_load(&notified), 1);
	cr_assert_eq(s->ops->snapshot_commit_wait(k, false), 0);
	expect_readable(s, 12, 2, 300000);
	s->ops->close(s);
}

/* close() with a commit in flight waits for it and frees its sink. */
Test(snapshot_commit, close_waits_for_a_commit_in_flight)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_snapshot_sink *k;
	cr_assert_eq(store_snapshot_written(s, 77, 6, 4 * 1024 * 1024, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	s->ops->close(s);
	expect_loaded(77, 6, 4 * 1024 * 1024);
}

#define FAULT_DIR "/data"

/* A failed sync of the snapshot file stops every later write, as one of
 * the log does, and leaves the previous snapshot durable. */
Test(snapshot_commit, failed_sync_latches_the_storage)
{
	struct fault_vfs *fv = fault_vfs_new();
	cr_assert_not_null(fv);
	struct baton_storage *s = store_open(FAULT_DIR, 0, &fv->base);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	cr_assert_eq(store_snapshot(s, 5, 1, 1000), 0);
	struct baton_snapshot_sink *k;
	cr_assert_eq(store_snapshot_written(s, 9, 1, 3000, &k), 0);
	/* The writer is idle: the next sync is the snapshot's. */
	fault_vfs_fail_sync_after(fv, 1, EIO);
	cr_assert_eq(s->ops->snapshot_commit_start(k), 0);
	cr_assert_eq(wait_polling(s, k), BATON_EIO);
	cr_assert(strstr(s->ops->errmsg(s), "fsync") != NULL, "%s",
		  s->ops->errmsg(s));
	struct baton_fs_stats st;
	baton_fs_storage_stats(s, &st);
	cr_assert_eq(st.failed, BATON_EIO);
	struct baton_update u = {.persist_needed = true};
	uint64_t seq;
	cr_assert_eq(s->ops->submit(s, &u, &seq), BATON_EIO);
	cr_assert_eq(store_snapshot(s, 10, 1, 10), BATON_EIO);
	expect_readable(s, 5, 1, 1000);
	fault_vfs_halt(fv);
	s->ops->close(s);
	fault_vfs_crash(fv, FAULT_CRASH_CLEAN, 1);
	s = store_open(FAULT_DIR, 0, &fv->base);
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, 5);
	baton_durable_state_free(&d);
	s->ops->close(s);
	fault_vfs_free(fv);
}
