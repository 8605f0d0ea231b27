/*
 * Format compatibility: each directory under tests/storage/golden holds a
 * small data directory written by one storage format (term/vote, a snapshot
 * with version fields, and a log segment with a truncation). Every later
 * release must read each back exactly. The files are never regenerated once
 * committed; a new format adds a new directory next to the others.
 *   v1  release 0.1.0: snapshot format 1 (no versions_index)
 *   v2  snapshot format 2 (versions_index after the version table)
 *   v3  snapshot format 3 (a downgrade record after versions_index),
 *       written only while a downgrade is in progress
 *
 * To write the directory of a format (once, by hand):
 *   BATON_WRITE_GOLDEN=<dir> build/storage_tests --filter
 * golden/v3_reads_back_exactly   (v2: golden/v2_reads_back_exactly)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "store_util.h"

#define GOLDEN_SEGMENT_BYTES 8192u

/* The downgrade in progress in v3: enabled by the entry at 6, which
 * lowered the floor from 1.0.0 to 0.1.0 and the machine version from 2. */
static const struct baton_downgrade golden_downgrade = {.target = {0, 1, 0},
							.prev_floor = {1, 0, 0},
							.prev_machine = {2},
							.since = 6};

/* The snapshot metadata of the golden directories; v2 also records the
 * index of the version entry (v1 could not: it reads as 0), v3 a
 * downgrade in progress (d; NULL: none). */
static void golden_header(struct baton_snapshot_header *h,
			  baton_index versions_index,
			  const struct baton_downgrade *d)
{
	memset(h, 0, sizeof *h);
	h->meta.index = 10;
	h->meta.term = 2;
	h->meta.config_index = 1;
	h->meta.config.n = 3;
	for (uint32_t i = 0; i < 3; i++)
		h->meta.config.members[i] =
			(struct baton_member){i + 1, BATON_VOTER};
	struct baton_version_state *v = &h->meta.versions;
	v->machine.value = 1;
	v->floor = (struct baton_release){0, 1, 0};
	v->n = 3;
	for (uint32_t i = 0; i < 3; i++) {
		v->members[i].id = i + 1;
		v->members[i].profile.release =
			(struct baton_release){0, 1, (uint16_t)i};
		v->members[i].profile.proto_min.value = 1;
		v->members[i].profile.proto_max.value = 1;
		v->members[i].profile.machine_max.value = 1;
	}
	h->meta.versions_index = versions_index;
	if (d != NULL)
		v->downgrade = *d;
}

#define GOLDEN_V2_VERSIONS_INDEX 7u
#define GOLDEN_V3_VERSIONS_INDEX 8u

/* The log: 1..20 of term 2, then 16..25 replaced by term 3. */
static void write_golden(const char *dir, baton_index versions_index,
			 const struct baton_downgrade *downgrade)
{
	struct baton_storage *s = store_open(dir, GOLDEN_SEGMENT_BYTES, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	cr_assert_eq(store_hard_state(s, 3, 2), 0);
	struct baton_entry *a = entries_make(1, 20, 2, 33);
	struct baton_entry *b = entries_make(16, 10, 3, 33);
	cr_assert_eq(store_append(s, 0, a, 20), 0);
	cr_assert_eq(store_append(s, 16, b, 10), 0);
	entries_free(a, 20);
	entries_free(b, 10);
	struct baton_snapshot_header h;
	golden_header(&h, versions_index, downgrade);
	uint8_t data[100];
	payload_fill(data, sizeof data, 10, 2);
	struct baton_snapshot_sink *k;
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), 0);
	cr_assert_eq(s->ops->snapshot_write(k, data, sizeof data), 0);
	cr_assert_eq(s->ops->snapshot_commit(k), 0);
	s->ops->close(s);
}

static size_t read_all(const char *path, uint8_t *b, size_t cap)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	size_t n = fread(b, 1, cap, f);
	cr_assert(n > 0 && n < cap, "%s: %zu bytes", path, n);
	fclose(f);
	return n;
}

static void write_all(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(b, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static void copy_golden(const char *name, char *dir, size_t cap)
{
	char cmd[1024];
	tmpdir_make(dir, cap);
	snprintf(cmd, sizeof cmd, "cp %s/%s/* '%s'/", BATON_GOLDEN_DIR, name,
		 dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static bool downgrade_eq(const struct baton_downgrade *a,
			 const struct baton_downgrade *b)
{
	return baton_release_compare(a->target, b->target) == 0 &&
	       baton_release_compare(a->prev_floor, b->prev_floor) == 0 &&
	       a->prev_machine.value == b->prev_machine.value &&
	       a->since == b->since;
}

/* The format number in the head of the snapshot file in dir. */
static uint32_t snapshot_format(const char *dir)
{
	char path[512];
	snprintf(path, sizeof path, "%s/snapshot", dir);
	uint8_t b[4096];
	read_all(path, b, sizeof b);
	return baton_le_get_u32(b + 8);
}

/* Open a copy of golden/<name> (opening takes a lock file and may repair)
 * and check that it holds exactly what write_golden wrote, its snapshot in
 * `format`. */
static void check_golden(const char *name, uint32_t format,
			 baton_index versions_index,
			 const struct baton_downgrade *downgrade)
{
	char dir[256];
	copy_golden(name, dir, sizeof dir);
	cr_assert_eq(snapshot_format(dir), format, "%s", name);
	struct baton_storage *s = store_open(dir, GOLDEN_SEGMENT_BYTES, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.term, 3);
	cr_assert_eq(d.vote, 2);
	cr_assert(d.has_snapshot);
	struct baton_snapshot_header h;
	golden_header(&h, versions_index, downgrade);
	const struct baton_snapshot_meta *m = &d.snapshot.meta;
	cr_assert_eq(m->index, h.meta.index);
	cr_assert_eq(m->term, h.meta.term);
	cr_assert_eq(m->config_index, h.meta.config_index);
	cr_assert_eq(m->config.n, 3);
	cr_assert_eq(m->config.members[2].id, 3);
	cr_assert_eq(m->versions.machine.value, 1);
	cr_assert_eq(
		baton_release_compare(m->versions.floor, h.meta.versions.floor),
		0);
	cr_assert_eq(m->versions.n, 3);
	for (uint32_t i = 0; i < 3; i++) {
		const struct baton_member_versions *got =
			&m->versions.members[i];
		const struct baton_member_versions *want =
			&h.meta.versions.members[i];
		cr_assert_eq(got->id, want->id);
		cr_assert_eq(baton_release_compare(got->profile.release,
						   want->profile.release),
			     0);
		cr_assert_eq(got->profile.proto_min.value, 1);
		cr_assert_eq(got->profile.proto_max.value, 1);
		cr_assert_eq(got->profile.machine_max.value, 1);
	}
	cr_assert_eq(m->versions_index, versions_index);
	cr_assert(downgrade_eq(&m->versions.downgrade,
			       &h.meta.versions.downgrade),
		  "%s: the downgrade record", name);
	uint8_t data[100];
	payload_fill(data, sizeof data, 10, 2);
	cr_assert_eq(d.snapshot_len, sizeof data);
	cr_assert_arr_eq(d.snapshot_data, data, sizeof data);
	cr_assert_eq(d.n_entries, 15, "entries 11..25");
	for (uint32_t i = 0; i < d.n_entries; i++) {
		const struct baton_entry *e = &d.entries[i];
		cr_assert_eq(e->index, 11 + i);
		cr_assert_eq(e->term, e->index < 16 ? 2u : 3u);
		cr_assert(entry_intact(e, 33));
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
	tmpdir_remove(dir);
}

Test(golden, v1_reads_back_exactly)
{
	check_golden("v1", 1, 0, NULL);
}

Test(golden, v2_reads_back_exactly)
{
	const char *out = getenv("BATON_WRITE_GOLDEN");
	if (out != NULL) {
		write_golden(out, GOLDEN_V2_VERSIONS_INDEX, NULL);
		cr_log_info("golden files written to %s", out);
		return;
	}
	check_golden("v2", 2, GOLDEN_V2_VERSIONS_INDEX, NULL);
}

Test(golden, v3_reads_back_exactly)
{
	const char *out = getenv("BATON_WRITE_GOLDEN");
	if (out != NULL) {
		write_golden(out, GOLDEN_V3_VERSIONS_INDEX, &golden_downgrade);
		cr_log_info("golden files written to %s", out);
		return;
	}
	check_golden("v3", 3, GOLDEN_V3_VERSIONS_INDEX, &golden_downgrade);
}

/* What this release writes, with and without a downgrade in progress, is
 * byte for byte the snapshot of v3 and of v2: without one, format 2 as a
 * release that reads only formats 1 and 2 wrote it, so it reads it. */
static void check_written_as(const char *name, baton_index versions_index,
			     const struct baton_downgrade *d, uint32_t format)
{
	char dir[256];
	tmpdir_make(dir, sizeof dir);
	write_golden(dir, versions_index, d);
	cr_assert_eq(snapshot_format(dir), format);
	char path[512], golden[512];
	snprintf(path, sizeof path, "%s/snapshot", dir);
	snprintf(golden, sizeof golden, "%s/%s/snapshot", BATON_GOLDEN_DIR,
		 name);
	static uint8_t a[4096], b[4096];
	size_t na = read_all(path, a, sizeof a);
	size_t nb = read_all(golden, b, sizeof b);
	cr_assert_eq(na, nb, "%s: %zu bytes, golden %zu", name, na, nb);
	cr_assert_arr_eq(a, b, na, "%s: the bytes differ", name);
	tmpdir_remove(dir);
}

Test(golden, written_without_a_downgrade_is_format_2)
{
	check_written_as("v2", GOLDEN_V2_VERSIONS_INDEX, NULL, 2);
}

Test(golden, written_during_a_downgrade_is_format_3)
{
	check_written_as("v3", GOLDEN_V3_VERSIONS_INDEX, &golden_downgrade, 3);
	/* The record is the 32 bytes after versions_index: the same state
	 * without it is format 2, 32 bytes shorter. */
	char dir[256], path[512];
	tmpdir_make(dir, sizeof dir);
	write_golden(dir, GOLDEN_V3_VERSIONS_INDEX, NULL);
	snprintf(path, sizeof path, "%s/snapshot", dir);
	static uint8_t a[4096], b[4096];
	size_t na = read_all(path, a, sizeof a);
	snprintf(path, sizeof path, "%s/v3/snapshot", BATON_GOLDEN_DIR);
	size_t nb = read_all(path, b, sizeof b);
	cr_assert_eq(baton_le_get_u32(a + 8), 2);
	cr_assert_eq(nb, na + SNAP_DOWNGRADE_LEN);
	uint32_t hlen = baton_le_get_u32(a + 12);
	cr_assert_eq(baton_le_get_u32(b + 12), hlen + SNAP_DOWNGRADE_LEN);
	const uint8_t *rec = b + hlen - 8; /* where a's checksum is */
	cr_assert_eq(baton_le_get_u16(rec), 0, "target 0.1.0");
	cr_assert_eq(baton_le_get_u16(rec + 2), 1);
	cr_assert_eq(baton_le_get_u16(rec + 8), 1, "previous floor 1.0.0");
	cr_assert_eq(baton_le_get_u32(rec + 16), 2, "previous machine");
	cr_assert_eq(baton_le_get_u64(rec + 24), 6, "since");
	tmpdir_remove(dir);
}

/* Rewrite the snapshot of dir with `edit` applied to its header, sealed
 * again with a valid checksum. */
static void rewrite_header(const char *dir, void (*edit)(uint8_t *b))
{
	char path[512];
	snprintf(path, sizeof path, "%s/snapshot", dir);
	uint8_t b[4096];
	size_t n = read_all(path, b, sizeof b);
	edit(b);
	uint32_t hlen = baton_le_get_u32(b + 12);
	cr_assert(hlen <= n);
	baton_le_put_u64(b + hlen - 8, baton__checksum(b, hlen - 8));
	write_all(path, b, n);
}

static void make_format_4(uint8_t *b)
{
	baton_le_put_u32(b + 8, 4);
}

Test(golden, a_newer_snapshot_format_is_refused_by_name)
{
	char dir[256];
	copy_golden("v3", dir, sizeof dir);
	rewrite_header(dir, make_format_4);
	char err[512];
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_EVERSION, "%s", err);
	cr_assert(strstr(err, "format version 4 is newer than this release "
			      "reads (3)") != NULL,
		  "%s", err);
	tmpdir_remove(dir);
}

/* The downgrade record in the header of v3's snapshot. */
static uint8_t *record(uint8_t *b)
{
	return b + baton_le_get_u32(b + 12) - 8 - SNAP_DOWNGRADE_LEN;
}

static void target_at_prev_floor(uint8_t *b)
{
	memcpy(record(b), record(b) + 8, 6);
}

static void no_target(uint8_t *b)
{
	memset(record(b), 0, 6);
}

static void no_since(uint8_t *b)
{
	baton_le_put_u64(record(b) + 24, 0);
}

static void machine_above_prev(uint8_t *b)
{
	baton_le_put_u32(b + 40, 3); /* above the record's 2 */
}

Test(golden, a_bad_downgrade_record_is_damage_named_so)
{
	void (*edits[])(uint8_t *) = {target_at_prev_floor, no_target, no_since,
				      machine_above_prev};
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		char dir[256];
		copy_golden("v3", dir, sizeof dir);
		rewrite_header(dir, edits[i]);
		char err[512];
		cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
			     BATON_ECORRUPT, "edit %zu: %s", i, err);
		cr_assert(strstr(err, "snapshot downgrade record out of "
				      "range") != NULL,
			  "edit %zu: %s", i, err);
		tmpdir_remove(dir);
	}
}

static void make_format_3(uint8_t *b)
{
	baton_le_put_u32(b + 8, 3);
}

/* A format 3 header must have room for the record. */
Test(golden, format_3_without_its_record_is_damage)
{
	char dir[256];
	copy_golden("v2", dir, sizeof dir);
	rewrite_header(dir, make_format_3);
	char err[512];
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_ECORRUPT, "%s", err);
	cr_assert(strstr(err, "snapshot header lengths out of range") != NULL,
		  "%s", err);
	tmpdir_remove(dir);
}

/* Release 0.1.0 wrote zeros for the version fields of a snapshot installed
 * from a leader: in format 1, machine version 0 reads as 1 (the only one
 * that release knew). The v1 snapshot is rewritten so, checksum and all. */
Test(golden, v1_zero_machine_version_reads_as_one)
{
	char dir[256];
	copy_golden("v1", dir, sizeof dir);
	char path[512];
	snprintf(path, sizeof path, "%s/snapshot", dir);
	uint8_t b[4096];
	size_t n = read_all(path, b, sizeof b);
	cr_assert_eq(baton_le_get_u32(b + 8), 1, "format 1");
	uint32_t hlen = baton_le_get_u32(b + 12);
	cr_assert(hlen <= n && hlen >= SNAP_FIXED_LEN + 8);
	/* No version rows, machine version 0, the data right behind. */
	uint32_t config_len = baton_le_get_u32(b + 72);
	size_t new_hlen = SNAP_FIXED_LEN + pad8(config_len) + 8;
	baton_le_put_u32(b + 40, 0);
	baton_le_put_u32(b + 52, 0);
	baton_le_put_u32(b + 12, (uint32_t)new_hlen);
	memmove(b + new_hlen, b + hlen, n - hlen);
	baton_le_put_u64(b + new_hlen - 8, baton__checksum(b, new_hlen - 8));
	write_all(path, b, n - hlen + new_hlen);

	struct baton_storage *s = store_open(dir, GOLDEN_SEGMENT_BYTES, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.versions.machine.value, 1);
	cr_assert_eq(d.snapshot.meta.versions.n, 0);
	cr_assert_eq(d.snapshot.meta.versions_index, 0);
	cr_assert_eq(d.snapshot_len, 100);
	baton_durable_state_free(&d);
	s->ops->close(s);
	tmpdir_remove(dir);
}

/* A version table a snapshot cannot hold (ids out of order) is damage. */
Test(golden, invalid_version_table_is_corrupt)
{
	char dir[256];
	copy_golden("v2", dir, sizeof dir);
	char path[512];
	snprintf(path, sizeof path, "%s/snapshot", dir);
	uint8_t b[4096];
	size_t n = read_all(path, b, sizeof b);
	uint32_t hlen = baton_le_get_u32(b + 12);
	cr_assert(hlen <= n);
	uint8_t *rows = b + SNAP_FIXED_LEN + pad8(baton_le_get_u32(b + 72));
	baton_le_put_u64(rows, 3); /* row 1 now has id 3, like row 3 */
	baton_le_put_u64(b + hlen - 8, baton__checksum(b, hlen - 8));
	write_all(path, b, n);
	char err[512];
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_ECORRUPT, "%s", err);
	cr_assert(strstr(err, "snapshot metadata") != NULL, "%s", err);
	tmpdir_remove(dir);
}
