/*
 * Format compatibility: each directory under tests/storage/golden holds a
 * small data directory written by one storage format (term/vote, a snapshot
 * with version fields, and a log segment with a truncation). Every later
 * release must read each back exactly. The files are never regenerated once
 * committed; a new format adds a new directory next to the others.
 *   v1  release 0.1.0: snapshot format 1 (no versions_index)
 *   v2  snapshot format 2 (versions_index after the version table)
 *
 * To write the directory of the current format (once, by hand):
 *   BATON_WRITE_GOLDEN=<dir> build/storage_tests --filter
 * golden/v2_reads_back_exactly
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "store_util.h"

#define GOLDEN_SEGMENT_BYTES 8192u

/* The snapshot metadata of the golden directories; v2 also records the
 * index of the version entry (v1 could not: it reads as 0). */
static void golden_header(struct baton_snapshot_header *h,
			  baton_index versions_index)
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
}

#define GOLDEN_V2_VERSIONS_INDEX 7u

/* The log: 1..20 of term 2, then 16..25 replaced by term 3. */
static void write_golden(const char *dir)
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
	golden_header(&h, GOLDEN_V2_VERSIONS_INDEX);
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

/* Open a copy of golden/<name> (opening takes a lock file and may repair)
 * and check that it holds exactly what write_golden wrote. */
static void check_golden(const char *name, baton_index versions_index)
{
	char dir[256];
	copy_golden(name, dir, sizeof dir);
	struct baton_storage *s = store_open(dir, GOLDEN_SEGMENT_BYTES, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.term, 3);
	cr_assert_eq(d.vote, 2);
	cr_assert(d.has_snapshot);
	struct baton_snapshot_header h;
	golden_header(&h, versions_index);
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
	check_golden("v1", 0);
}

Test(golden, v2_reads_back_exactly)
{
	const char *out = getenv("BATON_WRITE_GOLDEN");
	if (out != NULL) {
		write_golden(out);
		cr_log_info("golden files written to %s", out);
		return;
	}
	check_golden("v2", GOLDEN_V2_VERSIONS_INDEX);
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
