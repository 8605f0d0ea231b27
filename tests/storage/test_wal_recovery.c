/*
 * Recovery's reading of big segments (wal.c's read_segment): the file is
 * read in windows of WAL_READ_WINDOW_BYTES and what lies past its last
 * nonzero byte is never searched. These tests put data where that could go
 * wrong — far in a 64 MiB zeroed tail, in its last bytes, across and at
 * window boundaries, in a file whose size is no multiple of the window —
 * and check that every decision is the one a whole-file scan makes: a
 * valid batch behind a zeroed region is corruption, a torn tail is cut
 * off, an interrupted segment creation is dropped.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "internal.h"
#include "store_util.h"

#define WINDOW ((uint64_t)WAL_READ_WINDOW_BYTES)
#define SEGMENT_DEFAULT_BYTES (64ull << 20)

static char dir[256];
static char seg1[512], seg2[512]; /* the paths of segments 1 and 2 */

static void setup(void)
{
	tmpdir_make(dir, sizeof dir);
	snprintf(seg1, sizeof seg1, "%s/wal-0000000000000001.log", dir);
	snprintf(seg2, sizeof seg2, "%s/wal-0000000000000002.log", dir);
}

static void teardown(void)
{
	tmpdir_remove(dir);
}

TestSuite(wal_recovery, .init = setup, .fini = teardown);

/* Entries 1..updates*per_update of `len` bytes, one batch per update. */
static void fill(uint64_t segment_bytes, uint32_t updates, uint32_t per_update,
		 uint32_t len)
{
	struct baton_storage *s = store_open(dir, segment_bytes, NULL);
	for (uint32_t u = 0; u < updates; u++) {
		struct baton_entry *e = entries_make(
			(baton_index)u * per_update + 1, per_update, 1, len);
		cr_assert_eq(store_append(s, 0, e, per_update), 0);
		entries_free(e, per_update);
	}
	s->ops->close(s);
}

static uint32_t len_4096(baton_index i)
{
	(void)i;
	return 4096;
}

/* Reopen: the log is exactly 1..last, entry i of len_of(i) bytes. */
static void expect_log(uint64_t segment_bytes, baton_index last,
		       uint32_t (*len_of)(baton_index))
{
	struct baton_storage *s = store_open(dir, segment_bytes, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.n_entries, last, "have %u entries", d.n_entries);
	for (uint32_t i = 0; i < d.n_entries; i++) {
		cr_assert_eq(d.entries[i].index, i + 1);
		cr_assert(entry_intact(&d.entries[i], len_of(i + 1)),
			  "entry %u", i + 1);
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
}

/* Where the batches of a segment end: the first offset with no batch
 * magic, or too close to the end of the file for a header. */
static uint64_t log_end(const char *path)
{
	uint64_t off = WAL_SEGMENT_HEADER_LEN, size = file_size(path);
	for (;;) {
		uint8_t h[WAL_BATCH_HEADER_LEN];
		if (off + sizeof h > size)
			return off;
		file_peek(path, off, h, sizeof h);
		if (baton_le_get_u32(h) != WAL_BATCH_MAGIC)
			return off;
		off += WAL_BATCH_HEADER_LEN + baton_le_get_u64(h + 8) +
		       WAL_TRAILER_LEN;
	}
}

/* A copy of the first batch of segment 1, valid wherever it is put. */
static uint8_t *first_batch(size_t *len)
{
	uint8_t h[WAL_BATCH_HEADER_LEN];
	file_peek(seg1, WAL_SEGMENT_HEADER_LEN, h, sizeof h);
	cr_assert_eq(baton_le_get_u32(h), WAL_BATCH_MAGIC);
	*len = WAL_BATCH_HEADER_LEN + baton_le_get_u64(h + 8) + WAL_TRAILER_LEN;
	uint8_t *b = malloc(*len);
	file_peek(seg1, WAL_SEGMENT_HEADER_LEN, b, *len);
	return b;
}

static void zero_out(const char *path, uint64_t off, size_t len)
{
	uint8_t *z = calloc(len, 1);
	file_poke(path, off, z, len);
	free(z);
}

static bool zeros_at(const char *path, uint64_t off, size_t len)
{
	uint8_t *b = malloc(len);
	file_peek(path, off, b, len);
	bool zero = all_zero(b, len);
	free(b);
	return zero;
}

static uint8_t *whole(const char *path, uint64_t *len)
{
	*len = file_size(path);
	uint8_t *b = malloc(*len);
	file_peek(path, 0, b, *len);
	return b;
}

/* Opening is refused as corruption (`why` at offset `at` in `path`) and
 * leaves `path` byte for byte as it was. */
static void expect_corrupt(const char *path, const char *why, uint64_t at)
{
	uint64_t n1, n2;
	uint8_t *before = whole(path, &n1);
	char err[512];
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_ECORRUPT, "%s", err);
	char where[64];
	snprintf(where, sizeof where, "at offset %llu", (unsigned long long)at);
	cr_assert(strstr(err, why) != NULL && strstr(err, where) != NULL,
		  "want \"%s\" %s: %s", why, where, err);
	uint8_t *after = whole(path, &n2);
	cr_assert_eq(n1, n2);
	cr_assert(memcmp(before, after, n1) == 0, "refusal changed %s", path);
	free(before);
	free(after);
}

Test(wal_recovery, valid_batch_far_in_the_zeroed_tail_is_corruption)
{
	fill(0, 4, 10, 4096);
	const char *p = seg1;
	cr_assert_eq(file_size(p), SEGMENT_DEFAULT_BYTES);
	uint64_t end = log_end(p);
	size_t len;
	uint8_t *b = first_batch(&len);
	file_poke(p, 40ull << 20, b, len);
	expect_corrupt(p, "zeroed batch followed by valid ones", end);
	zero_out(p, 40ull << 20, len);
	expect_log(0, 40, len_4096);
	free(b);
}

Test(wal_recovery, valid_batch_header_in_the_last_bytes_is_corruption)
{
	fill(0, 2, 10, 4096);
	const char *p = seg1;
	uint64_t end = log_end(p);
	size_t len;
	uint8_t *b = first_batch(&len);
	/* Its last 8 bytes (the header's checksum) are the file's last. */
	uint64_t at = SEGMENT_DEFAULT_BYTES - WAL_BATCH_HEADER_LEN;
	file_poke(p, at, b, WAL_BATCH_HEADER_LEN);
	expect_corrupt(p, "zeroed batch followed by valid ones", end);
	zero_out(p, at, WAL_BATCH_HEADER_LEN);
	expect_log(0, 20, len_4096);
	free(b);
}

Test(wal_recovery, valid_batch_at_and_across_window_boundaries_is_corruption)
{
	fill(0, 2, 10, 4096);
	const char *p = seg1;
	uint64_t end = log_end(p);
	cr_assert_lt(end, WINDOW);
	size_t len;
	uint8_t *b = first_batch(&len);
	/* The header split between two windows, a window's first bytes,
	 * the batch's last 8 bytes in the next window, a header split into
	 * the last window. */
	uint64_t at[] = {3 * WINDOW - 16, 5 * WINDOW, 7 * WINDOW - len + 8,
			 SEGMENT_DEFAULT_BYTES - WINDOW - 24};
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		file_poke(p, at[i], b, len);
		expect_corrupt(p, "zeroed batch followed by valid ones", end);
		zero_out(p, at[i], len);
	}
	expect_log(0, 20, len_4096);
	free(b);
}

Test(wal_recovery, nonzero_bytes_that_are_no_batch_hide_nothing)
{
	/* Nonzero bytes that are no batch header hide nothing: the log
	 * before them is read as always, whether they sit in the last
	 * bytes of the file or of a window. */
	fill(0, 2, 10, 4096);
	const char *p = seg1;
	uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	file_poke(p, SEGMENT_DEFAULT_BYTES - sizeof junk, junk, sizeof junk);
	file_poke(p, 9 * WINDOW - 1, junk, 1);
	expect_log(0, 20, len_4096);
}

Test(wal_recovery, torn_tail_across_a_window_boundary_is_cut_off)
{
	fill(0, 1, 150, 4096);
	const char *p = seg1;
	uint64_t end = log_end(p);
	size_t len;
	uint8_t *b = first_batch(&len);
	/* A prefix of a batch that reaches 4 KiB into the next window. */
	size_t torn = (size_t)(WINDOW - end + 4096);
	cr_assert_lt(torn, len);
	file_poke(p, end, b, torn);
	expect_log(0, 150, len_4096);
	cr_assert(zeros_at(p, end, torn), "the torn tail was not zeroed");
	cr_assert_eq(file_size(p), SEGMENT_DEFAULT_BYTES);
	/* Repaired: appends go on after the cut. */
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	struct baton_entry *e = entries_make(151, 10, 1, 4096);
	cr_assert_eq(store_append(s, 0, e, 10), 0);
	entries_free(e, 10);
	s->ops->close(s);
	expect_log(0, 160, len_4096);
	free(b);
}

/* A log that ends at a chosen offset: entries 1..200 of 4096 bytes in one
 * batch, then entry 201 in a batch of its own, as long as it takes. */
#define BOUNDARY_FIRST 200u
static uint32_t boundary_last;

static uint32_t boundary_len(baton_index i)
{
	return i <= BOUNDARY_FIRST ? 4096 : boundary_last;
}

static void fill_to(uint64_t segment_bytes, uint64_t end)
{
	fill(segment_bytes, 1, BOUNDARY_FIRST, 4096);
	uint64_t first = WAL_SEGMENT_HEADER_LEN + WAL_BATCH_HEADER_LEN +
			 BOUNDARY_FIRST * baton__wal_record_len(4096) +
			 WAL_TRAILER_LEN;
	boundary_last = (uint32_t)(end - first - WAL_BATCH_HEADER_LEN -
				   WAL_RECORD_HEADER_LEN - WAL_TRAILER_LEN);
	struct baton_storage *s = store_open(dir, segment_bytes, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	struct baton_entry *e =
		entries_make(BOUNDARY_FIRST + 1, 1, 1, boundary_last);
	cr_assert_eq(store_append(s, 0, e, 1), 0);
	entries_free(e, 1);
	s->ops->close(s);
	cr_assert_eq(log_end(seg1), end);
}

Test(wal_recovery, log_ending_exactly_at_a_window_boundary)
{
	fill_to(0, WINDOW);
	const char *p = seg1;
	uint8_t last;
	file_peek(p, WINDOW - 1, &last, 1);
	cr_assert_neq(last, 0, "the log's last byte is not the window's");
	expect_log(0, BOUNDARY_FIRST + 1, boundary_len);

	/* A valid batch in the next window, after zeros: corruption. */
	size_t len;
	uint8_t *b = first_batch(&len);
	file_poke(p, WINDOW + 4096, b, len);
	expect_corrupt(p, "zeroed batch followed by valid ones", WINDOW);
	zero_out(p, WINDOW + 4096, len);

	/* A torn batch that starts the next window: cut off. */
	file_poke(p, WINDOW, b, 5000);
	expect_log(0, BOUNDARY_FIRST + 1, boundary_len);
	cr_assert(zeros_at(p, WINDOW, 5000), "the torn tail was not zeroed");
	free(b);
}

Test(wal_recovery, damaged_header_that_ends_a_window)
{
	/* A whole batch header that fails its checksum, with nothing
	 * behind it, looks like an interrupted write; with one byte
	 * behind it, in the next window, it is damage. */
	fill_to(0, WINDOW - WAL_BATCH_HEADER_LEN);
	const char *p = seg1;
	uint8_t h[WAL_BATCH_HEADER_LEN];
	file_peek(p, WAL_SEGMENT_HEADER_LEN, h, sizeof h);
	h[16] ^= 0x40; /* first_index: the checksum no longer matches */
	cr_assert_neq(h[WAL_BATCH_HEADER_LEN - 1], 0,
		      "the header's last byte is not the window's last");
	uint64_t at = WINDOW - WAL_BATCH_HEADER_LEN;
	file_poke(p, at, h, sizeof h);
	expect_log(0, BOUNDARY_FIRST + 1, boundary_len);
	cr_assert(zeros_at(p, at, sizeof h), "the torn tail was not zeroed");

	file_poke(p, at, h, sizeof h);
	uint8_t one = 1;
	file_poke(p, WINDOW, &one, 1);
	expect_corrupt(p, "batch header checksum mismatch", at);
}

Test(wal_recovery, a_last_window_too_short_for_a_header)
{
	/* The log ends 16 bytes before the end of the file, in a last
	 * window of those 16 bytes: a nonzero byte there is the start of
	 * a batch header cut short, a torn tail. */
	uint64_t segment_bytes = WINDOW + 16;
	fill_to(segment_bytes, WINDOW);
	const char *p = seg1;
	cr_assert_eq(file_size(p), segment_bytes);
	expect_log(segment_bytes, BOUNDARY_FIRST + 1, boundary_len);
	uint8_t b = 0x5a;
	file_poke(p, WINDOW, &b, 1);
	expect_log(segment_bytes, BOUNDARY_FIRST + 1, boundary_len);
	cr_assert(zeros_at(p, WINDOW, 16), "the torn tail was not zeroed");
	cr_assert_eq(file_size(p), segment_bytes);
}

/* 2 windows and a bit: the last window is short, the size odd. */
#define ODD_SEGMENT_BYTES (2 * WINDOW + 12345)

Test(wal_recovery, segments_of_a_size_no_multiple_of_the_window)
{
	/* Batches of 207 KB: 10 fill each segment, to 40 KB from its end. */
	fill(ODD_SEGMENT_BYTES, 20, 50, 4096);
	expect_log(ODD_SEGMENT_BYTES, 1000, len_4096);
	const char *p = seg2;
	cr_assert_eq(file_size(p), ODD_SEGMENT_BYTES);
	uint64_t end = log_end(p);
	size_t len;
	uint8_t *b = first_batch(&len);

	/* The last place a header fits, at a multiple of 8. */
	uint64_t at = (ODD_SEGMENT_BYTES - WAL_BATCH_HEADER_LEN) & ~7ull;
	file_poke(p, at, b, WAL_BATCH_HEADER_LEN);
	expect_corrupt(p, "zeroed batch followed by valid ones", end);
	zero_out(p, at, WAL_BATCH_HEADER_LEN);

	/* The file's very last byte, no header: hides nothing. */
	uint8_t junk = 0x77;
	file_poke(p, ODD_SEGMENT_BYTES - 1, &junk, 1);
	expect_log(ODD_SEGMENT_BYTES, 1000, len_4096);
	zero_out(p, ODD_SEGMENT_BYTES - 1, 1);

	/* A torn batch into the short last window, meant to run past the
	 * end of the file: cut off. */
	size_t torn = (size_t)(2 * WINDOW - end + 100);
	cr_assert_lt(torn, len);
	file_poke(p, end, b, torn);
	expect_log(ODD_SEGMENT_BYTES, 1000, len_4096);
	cr_assert(zeros_at(p, end, torn), "the torn tail was not zeroed");
	cr_assert_eq(file_size(p), ODD_SEGMENT_BYTES);
	free(b);
}

/* Odd entries carry 64 KiB of zeros, even ones 100 bytes of data. */
static uint32_t zeros_len(baton_index i)
{
	return i % 2 ? 65536 : 100;
}

Test(wal_recovery, windows_that_end_in_zeros_inside_the_log)
{
	/* Windows of the log that end inside a payload of zeros are read
	 * through the reused window and copied into place; each entry must
	 * come back whole all the same. */
	struct baton_storage *s = store_open(dir, 0, NULL);
	for (baton_index first = 1; first <= 192; first += 16) {
		struct baton_entry e[16];
		for (uint32_t k = 0; k < 16; k++) {
			baton_index i = first + k;
			e[k] = (struct baton_entry){.index = i,
						    .term = 1,
						    .type = BATON_ENTRY_COMMAND,
						    .len = zeros_len(i)};
			e[k].buf = calloc(e[k].len, 1);
			if (i % 2 == 0)
				payload_fill(e[k].buf, e[k].len, i, 1);
		}
		cr_assert_eq(store_append(s, 0, e, 16), 0);
		for (uint32_t k = 0; k < 16; k++)
			free(e[k].buf);
	}
	s->ops->close(s);
	const char *p = seg1;
	cr_assert_gt(log_end(p), 5 * WINDOW);
	cr_assert(zeros_at(p, WINDOW - 8, 8) && zeros_at(p, 2 * WINDOW - 8, 8),
		  "the windows do not end in zeros: the test misses its aim");

	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.n_entries, 192);
	uint8_t want[100];
	for (uint32_t k = 0; k < d.n_entries; k++) {
		const struct baton_entry *x = &d.entries[k];
		cr_assert_eq(x->index, k + 1);
		cr_assert_eq(x->len, zeros_len(x->index));
		if (x->index % 2) {
			cr_assert(all_zero(x->buf, x->len), "entry %u", k + 1);
		} else {
			payload_fill(want, 100, x->index, 1);
			cr_assert_arr_eq(x->buf, want, 100, "entry %u", k + 1);
		}
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
}

/* Segment 2 as an interrupted creation leaves it: a prefix of its header,
 * then preallocated zeros to the full size. */
static void interrupted_segment(void)
{
	uint8_t h[20];
	file_peek(seg1, 0, h, sizeof h);
	FILE *f = fopen(seg2, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(h, 1, sizeof h, f), sizeof h);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(truncate(seg2, (off_t)SEGMENT_DEFAULT_BYTES), 0);
}

Test(wal_recovery, interrupted_segment_creation_is_dropped)
{
	fill(0, 2, 10, 4096);
	interrupted_segment();
	expect_log(0, 20, len_4096);
	cr_assert_neq(access(seg2, F_OK), 0, "segment 2 not dropped");
	expect_log(0, 20, len_4096);
}

Test(wal_recovery, damaged_segment_header_with_data_behind_is_corruption)
{
	/* Anything nonzero behind a damaged header, however far, means the
	 * segment was more than begun: refused, never dropped. */
	fill(0, 2, 10, 4096);
	size_t len;
	uint8_t *b = first_batch(&len);
	interrupted_segment();
	file_poke(seg2, 40ull << 20, b, len);
	expect_corrupt(seg2, "segment header damaged", 0);

	interrupted_segment();
	uint8_t junk = 1;
	file_poke(seg2, SEGMENT_DEFAULT_BYTES - 1, &junk, 1);
	expect_corrupt(seg2, "segment header damaged", 0);
	free(b);
}
