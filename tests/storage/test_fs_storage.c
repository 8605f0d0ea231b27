/* The storage on real files: round trips, truncation, rollover,
 * compaction, snapshots, torn tails, corruption and version refusals. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
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

TestSuite(fs_storage, .init = setup, .fini = teardown);

static void load(struct baton_storage *s, struct baton_durable_state *d)
{
	cr_assert_eq(s->ops->load(s, d), 0);
}

/* Reopen and check that the log is exactly first..last, intact. */
static void expect_log(baton_index first, baton_index last, uint32_t len)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	load(s, &d);
	cr_assert_eq(d.n_entries, last >= first ? last - first + 1 : 0,
		     "have %u entries", d.n_entries);
	for (uint32_t i = 0; i < d.n_entries; i++) {
		cr_assert_eq(d.entries[i].index, first + i);
		cr_assert(entry_intact(&d.entries[i], len), "entry %llu",
			  (unsigned long long)d.entries[i].index);
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
}

static char *path_of(const char *name)
{
	static char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return p;
}

static uint8_t *slurp(const char *path, uint64_t *len)
{
	*len = file_size(path);
	uint8_t *b = malloc(*len + 1);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	cr_assert_eq(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

Test(fs_storage, empty_directory_loads_nothing)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	load(s, &d);
	cr_assert_eq(d.term, 0);
	cr_assert_eq(d.vote, 0);
	cr_assert(!d.has_snapshot);
	cr_assert_eq(d.n_entries, 0);
	cr_assert_eq(s->ops->load(s, &d), BATON_ESTATE, "load is once only");
	s->ops->close(s);
}

Test(fs_storage, entries_and_hard_state_survive_reopen)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	cr_assert_eq(store_hard_state(s, 7, 3), 0);
	struct baton_entry *e = entries_make(1, 100, 7, 200);
	cr_assert_eq(store_append(s, 0, e, 50), 0);
	cr_assert_eq(store_append(s, 0, e + 50, 50), 0);
	entries_free(e, 100);
	s->ops->close(s);

	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	load(s, &d);
	cr_assert_eq(d.term, 7);
	cr_assert_eq(d.vote, 3);
	cr_assert_eq(d.n_entries, 100);
	for (uint32_t i = 0; i < 100; i++) {
		cr_assert_eq(d.entries[i].index, i + 1);
		cr_assert_eq(d.entries[i].term, 7);
		cr_assert(entry_intact(&d.entries[i], 200));
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
}

Test(fs_storage, group_commit_syncs_once_per_group)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_entry *e = entries_make(1, 64, 1, 32);
	uint64_t seq;
	for (uint32_t i = 0; i < 64; i++) {
		struct baton_update u = {.entries = &e[i], .n_entries = 1};
		cr_assert_eq(s->ops->submit(s, &u, &seq), 0);
		cr_assert_eq(seq, i + 1);
	}
	cr_assert_eq(baton_fs_storage_flush(s), 0);
	struct baton_fs_stats st;
	baton_fs_storage_stats(s, &st);
	cr_assert_eq(st.submissions, 64);
	cr_assert_leq(st.syncs, 64);
	cr_assert_geq(st.syncs, 1);
	entries_free(e, 64);
	s->ops->close(s);
	expect_log(1, 64, 32);
}

Test(fs_storage, conflicting_suffix_is_replaced)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_entry *a = entries_make(1, 10, 1, 40);
	struct baton_entry *b = entries_make(6, 3, 2, 40);
	cr_assert_eq(store_append(s, 0, a, 10), 0);
	cr_assert_eq(store_append(s, 6, b, 3), 0);
	s->ops->close(s);
	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	load(s, &d);
	cr_assert_eq(d.n_entries, 8);
	for (uint32_t i = 0; i < 8; i++) {
		cr_assert_eq(d.entries[i].index, i + 1);
		cr_assert_eq(d.entries[i].term, i < 5 ? 1u : 2u);
		cr_assert(entry_intact(&d.entries[i], 40));
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
	entries_free(a, 10);
	entries_free(b, 3);
}

Test(fs_storage, truncation_alone_is_durable)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_entry *a = entries_make(1, 10, 1, 16);
	cr_assert_eq(store_append(s, 0, a, 10), 0);
	cr_assert_eq(store_append(s, 4, NULL, 0), 0);
	s->ops->close(s);
	entries_free(a, 10);
	expect_log(1, 3, 16);
}

/* The sizes of the log's segment files in dir, as `ls` shows them. */
static uint64_t segment_file_bytes(void)
{
	uint64_t total = 0;
	DIR *d = opendir(dir);
	cr_assert_not_null(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "wal-", 4) != 0)
			continue;
		char path[512];
		struct stat sb;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		cr_assert_eq(stat(path, &sb), 0);
		total += (uint64_t)sb.st_size;
	}
	closedir(d);
	return total;
}

Test(fs_storage, segments_roll_over_and_compact)
{
	struct baton_storage *s = store_open(dir, 8192, NULL);
	struct baton_entry *e = entries_make(1, 400, 3, 100);
	for (uint32_t i = 0; i < 400; i += 10)
		cr_assert_eq(store_append(s, 0, e + i, 10), 0);
	struct baton_fs_stats st;
	baton_fs_storage_stats(s, &st);
	cr_assert_gt(st.segments, 5, "only %u segments", st.segments);
	/* A fresh log holds its segments' headers and what was written;
	 * the files are preallocated, so they take at least that. */
	cr_assert_eq(st.wal_bytes,
		     (uint64_t)st.segments * WAL_SEGMENT_HEADER_LEN +
			     st.bytes_written);
	cr_assert_leq(st.wal_bytes, segment_file_bytes());
	uint32_t before = st.segments;
	uint64_t bytes_before = st.wal_bytes;

	/* Compaction deletes nothing a durable snapshot does not cover. */
	struct baton_update u = {.compact_upto = 300};
	cr_assert_eq(store_write(s, &u), 0);
	baton_fs_storage_stats(s, &st);
	cr_assert_eq(st.segments, before);

	cr_assert_eq(store_snapshot(s, 300, 3, 1000), 0);
	cr_assert_eq(store_write(s, &u), 0);
	baton_fs_storage_stats(s, &st);
	cr_assert_lt(st.segments, before);
	cr_assert_lt(st.wal_bytes, bytes_before);
	cr_assert_leq(st.wal_bytes, segment_file_bytes());
	s->ops->close(s);
	entries_free(e, 400);

	s = store_open(dir, 8192, NULL);
	struct baton_durable_state d;
	load(s, &d);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, 300);
	cr_assert_eq(d.snapshot_len, 1000);
	cr_assert_eq(d.n_entries, 100);
	cr_assert_eq(d.entries[0].index, 301);
	cr_assert(entry_intact(&d.entries[99], 100));
	baton_durable_state_free(&d);
	s->ops->close(s);
}

Test(fs_storage, snapshot_header_round_trip_and_chunked_read)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_snapshot_header h = {0};
	h.meta.index = 42;
	h.meta.term = 5;
	h.meta.config_index = 17;
	h.meta.config.n = 2;
	h.meta.config.members[0] = (struct baton_member){1, BATON_VOTER};
	h.meta.config.members[1] = (struct baton_member){9, BATON_LEARNER};
	struct baton_version_state *v = &h.meta.versions;
	v->machine.value = 3;
	v->floor = (struct baton_release){1, 2, 3};
	v->n = 2;
	v->members[0].id = 1;
	v->members[0].profile.release = (struct baton_release){1, 4, 0};
	v->members[0].profile.proto_min.value = 1;
	v->members[0].profile.proto_max.value = 4;
	v->members[0].profile.machine_max.value = 3;
	v->members[1].id = 9;
	v->members[1].profile.release = (struct baton_release){1, 5, 2};
	h.meta.versions_index = 33;
	uint8_t data[10000];
	payload_fill(data, sizeof data, 42, 5);
	struct baton_snapshot_sink *k;
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), 0);
	for (size_t off = 0; off < sizeof data; off += 3000)
		cr_assert_eq(s->ops->snapshot_write(k, data + off,
						    sizeof data - off < 3000
							    ? sizeof data - off
							    : 3000),
			     0);
	cr_assert_eq(s->ops->snapshot_commit(k), 0);

	uint8_t back[sizeof data];
	size_t got = 0, n;
	do {
		cr_assert_eq(
			s->ops->snapshot_read(s, 42, got, back + got, 777, &n),
			0);
		got += n;
	} while (n > 0);
	cr_assert_eq(got, sizeof data);
	cr_assert_arr_eq(back, data, sizeof data);
	cr_assert_eq(s->ops->snapshot_read(s, 41, 0, back, 10, &n),
		     BATON_ENOTFOUND);
	/* Never back to an older snapshot. */
	cr_assert_eq(store_snapshot(s, 40, 5, 10), BATON_ESTATE);
	s->ops->close(s);

	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	load(s, &d);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, 42);
	cr_assert_eq(d.snapshot.meta.term, 5);
	cr_assert_eq(d.snapshot.meta.config_index, 17);
	cr_assert_eq(d.snapshot.meta.config.n, 2);
	cr_assert_eq(d.snapshot.meta.config.members[1].id, 9);
	cr_assert_eq(d.snapshot.meta.config.members[1].role, BATON_LEARNER);
	cr_assert_eq(d.snapshot.meta.versions.machine.value, 3);
	cr_assert_eq(d.snapshot.meta.versions.floor.patch, 3);
	cr_assert_eq(d.snapshot.meta.versions.n, 2);
	cr_assert_eq(
		d.snapshot.meta.versions.members[0].profile.proto_max.value, 4);
	cr_assert_eq(d.snapshot.meta.versions.members[1].profile.release.minor,
		     5);
	cr_assert_eq(d.snapshot.meta.versions_index, 33);
	cr_assert_eq(d.snapshot.meta.versions.members[1].id, 9);
	cr_assert_eq(d.snapshot_len, sizeof data);
	cr_assert_arr_eq(d.snapshot_data, data, sizeof data);
	baton_durable_state_free(&d);
	s->ops->close(s);
}

Test(fs_storage, installed_snapshot_replaces_a_log_that_does_not_join)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_entry *a = entries_make(1, 20, 1, 16);
	cr_assert_eq(store_append(s, 0, a, 20), 0);
	struct baton_snapshot_meta meta = {.index = 5000, .term = 4};
	meta.config.n = 1;
	meta.config.members[0] = (struct baton_member){1, BATON_VOTER};
	baton_version_state_initial(&meta.versions);
	uint8_t data[300];
	payload_fill(data, sizeof data, 5000, 4);
	struct baton_update u = {0};
	u.snapshot = &meta;
	u.snapshot_data = data;
	u.snapshot_len = sizeof data;
	u.truncate_from = 5001;
	cr_assert_eq(store_write(s, &u), 0);
	struct baton_entry *b = entries_make(5001, 10, 4, 16);
	cr_assert_eq(store_append(s, 0, b, 10), 0);
	s->ops->close(s);
	entries_free(a, 20);
	entries_free(b, 10);

	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	load(s, &d);
	cr_assert(d.has_snapshot);
	cr_assert_eq(d.snapshot.meta.index, 5000);
	cr_assert_arr_eq(d.snapshot_data, data, sizeof data);
	cr_assert_eq(d.n_entries, 10);
	cr_assert_eq(d.entries[0].index, 5001);
	baton_durable_state_free(&d);
	s->ops->close(s);
}

Test(fs_storage, torn_tail_is_cut_off)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_entry *a = entries_make(1, 30, 1, 64);
	cr_assert_eq(store_append(s, 0, a, 20), 0);
	s->ops->close(s);
	/* Write a batch the way the storage would, then keep only a prefix
	 * of it: an interrupted write. Find where it would go first. */
	uint64_t len;
	uint8_t *seg = slurp(path_of("wal-0000000000000001.log"), &len);
	uint64_t end = WAL_SEGMENT_HEADER_LEN;
	while (baton_le_get_u32(seg + end) == WAL_BATCH_MAGIC)
		end += WAL_BATCH_HEADER_LEN + baton_le_get_u64(seg + end + 8) +
		       WAL_TRAILER_LEN;
	uint8_t torn[WAL_BATCH_HEADER_LEN + 100];
	memcpy(torn, seg + WAL_SEGMENT_HEADER_LEN, sizeof torn);
	free(seg);
	file_poke(path_of("wal-0000000000000001.log"), end, torn, sizeof torn);
	expect_log(1, 20, 64);
	/* Repaired: appends go on after the cut. */
	s = store_open(dir, 0, NULL);
	struct baton_durable_state d;
	load(s, &d);
	baton_durable_state_free(&d);
	cr_assert_eq(store_append(s, 0, a + 20, 10), 0);
	s->ops->close(s);
	entries_free(a, 30);
	expect_log(1, 30, 64);
}

Test(fs_storage, corruption_mid_log_refuses_and_changes_nothing)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_entry *a = entries_make(1, 30, 1, 64);
	for (uint32_t i = 0; i < 30; i += 10)
		cr_assert_eq(store_append(s, 0, a + i, 10), 0);
	s->ops->close(s);
	entries_free(a, 30);
	const char *p = path_of("wal-0000000000000001.log");
	/* A byte inside a record of the first batch. */
	uint8_t x = 0x5a;
	file_poke(p, WAL_SEGMENT_HEADER_LEN + WAL_BATCH_HEADER_LEN + 50, &x, 1);
	uint64_t n1, n2;
	uint8_t *before = slurp(p, &n1);
	char err[512];
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_ECORRUPT);
	cr_assert(strstr(err, "wal-0000000000000001.log") != NULL, "%s", err);
	cr_assert(strstr(err, "offset 64") != NULL, "%s", err);
	uint8_t *after = slurp(p, &n2);
	cr_assert_eq(n1, n2);
	cr_assert_arr_eq(before, after, n1, "refusal changed the file");
	free(before);
	free(after);
}

Test(fs_storage, damage_in_the_last_complete_batch_is_corruption)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_entry *a = entries_make(1, 10, 1, 64);
	cr_assert_eq(store_append(s, 0, a, 10), 0);
	s->ops->close(s);
	entries_free(a, 10);
	/* The batch's trailer is there, so this was no torn write: the
	 * entries were reported durable and must not be dropped. */
	uint8_t x = 0xff;
	file_poke(path_of("wal-0000000000000001.log"),
		  WAL_SEGMENT_HEADER_LEN + WAL_BATCH_HEADER_LEN + 200, &x, 1);
	char err[512];
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_ECORRUPT, "%s", err);
}

Test(fs_storage, newer_formats_are_refused_by_name)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	cr_assert_eq(store_hard_state(s, 2, 1), 0);
	s->ops->close(s);
	uint8_t v[4];
	baton_le_put_u32(v, 9);
	file_poke(path_of("meta"), 8, v, 4);
	char err[512];
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_EVERSION);
	cr_assert(strstr(err, "version 9") && strstr(err, "(1)"), "%s", err);

	baton_le_put_u32(v, 1);
	file_poke(path_of("meta"), 8, v, 4);
	baton_le_put_u32(v, 2);
	file_poke(path_of("wal-0000000000000001.log"), 8, v, 4);
	cr_assert_eq(store_open_fail(dir, NULL, err, sizeof err),
		     BATON_EVERSION);
	cr_assert(strstr(err, "version 2") && strstr(err, "(1)"), "%s", err);
}

Test(fs_storage, limits_and_exclusive_directory)
{
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = dir;
	o.max_entry_bytes = 100;
	struct baton_storage *s;
	char err[512];
	cr_assert_eq(baton_fs_storage_open(&o, &s, err, sizeof err), 0);
	struct baton_entry *a = entries_make(1, 1, 1, 101);
	struct baton_update u = {.entries = a, .n_entries = 1};
	uint64_t seq;
	cr_assert_eq(s->ops->submit(s, &u, &seq), BATON_ETOOBIG);
	entries_free(a, 1);
	struct baton_storage *t;
	cr_assert_eq(baton_fs_storage_open(&o, &t, err, sizeof err),
		     BATON_ESTATE);
	cr_assert(strstr(err, "in use") != NULL, "%s", err);
	s->ops->close(s);
}

Test(fs_storage, snapshot_metadata_the_core_cannot_make_is_refused)
{
	struct baton_storage *s = store_open(dir, 0, NULL);
	struct baton_snapshot_header h;
	memset(&h, 0, sizeof h);
	h.meta.index = 10;
	h.meta.term = 2;
	h.meta.config.n = 1;
	h.meta.config.members[0] = (struct baton_member){1, BATON_VOTER};
	h.meta.config_index = 1;
	struct baton_snapshot_sink *k;
	/* Machine version 0: no valid version state. */
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), BATON_EINVAL);
	baton_version_state_initial(&h.meta.versions);
	h.meta.versions_index = 11; /* above the snapshot's index */
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), BATON_EINVAL);
	cr_assert(strstr(s->ops->errmsg(s), "versions at 11") != NULL, "%s",
		  s->ops->errmsg(s));
	h.meta.versions_index = 10;
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), 0);
	cr_assert_eq(s->ops->snapshot_commit(k), 0);
	s->ops->close(s);
}
