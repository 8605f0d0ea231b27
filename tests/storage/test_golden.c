/*
 * Format compatibility: tests/storage/golden/v1 holds a small data directory
 * written by the first storage format (term/vote, a snapshot with version
 * fields, and a log segment with a truncation). Every later release must
 * read it back exactly. The files are never regenerated once committed;
 * a new format adds a new directory (v2, ...) next to this one.
 *
 * To write a directory for a new format version (once, by hand):
 *   BATON_WRITE_GOLDEN=<dir> build/storage_tests --filter
 * golden/v1_reads_back_exactly
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_util.h"

#define GOLDEN_SEGMENT_BYTES 8192u

static void golden_header(struct baton_snapshot_header *h)
{
	memset(h, 0, sizeof *h);
	h->meta.index = 10;
	h->meta.term = 2;
	h->meta.config_index = 1;
	h->meta.config.n = 3;
	for (uint32_t i = 0; i < 3; i++)
		h->meta.config.members[i] =
			(struct baton_member){i + 1, BATON_VOTER};
	h->machine_version.value = 1;
	h->release_floor = (struct baton_release){0, 1, 0};
	h->n_versions = 3;
	for (uint32_t i = 0; i < 3; i++) {
		h->versions[i].id = i + 1;
		h->versions[i].profile.release =
			(struct baton_release){0, 1, (uint16_t)i};
		h->versions[i].profile.proto_min.value = 1;
		h->versions[i].profile.proto_max.value = 1;
		h->versions[i].profile.machine_max.value = 1;
	}
}

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
	golden_header(&h);
	uint8_t data[100];
	payload_fill(data, sizeof data, 10, 2);
	struct baton_snapshot_sink *k;
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), 0);
	cr_assert_eq(s->ops->snapshot_write(k, data, sizeof data), 0);
	cr_assert_eq(s->ops->snapshot_commit(k), 0);
	s->ops->close(s);
}

Test(golden, v1_reads_back_exactly)
{
	const char *out = getenv("BATON_WRITE_GOLDEN");
	if (out != NULL) {
		write_golden(out);
		cr_log_info("golden files written to %s", out);
		return;
	}
	/* Work on a copy: opening takes a lock file and may repair. */
	char dir[256], cmd[1024];
	tmpdir_make(dir, sizeof dir);
	snprintf(cmd, sizeof cmd, "cp %s/v1/* '%s'/", BATON_GOLDEN_DIR, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	struct baton_storage *s = store_open(dir, GOLDEN_SEGMENT_BYTES, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.term, 3);
	cr_assert_eq(d.vote, 2);
	cr_assert(d.has_snapshot);
	struct baton_snapshot_header h;
	golden_header(&h);
	cr_assert_eq(d.snapshot.meta.index, h.meta.index);
	cr_assert_eq(d.snapshot.meta.term, h.meta.term);
	cr_assert_eq(d.snapshot.meta.config_index, h.meta.config_index);
	cr_assert_eq(d.snapshot.meta.config.n, 3);
	cr_assert_eq(d.snapshot.meta.config.members[2].id, 3);
	cr_assert_eq(d.snapshot.machine_version.value, 1);
	cr_assert_eq(d.snapshot.release_floor.minor, 1);
	cr_assert_eq(d.snapshot.n_versions, 3);
	cr_assert_eq(d.snapshot.versions[2].profile.release.patch, 2);
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
