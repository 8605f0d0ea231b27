/*
 * The map's part of a migration (docs/kv.md "Migration"), continued from
 * test_migration.c: FENCE refusing writes, an importing map refusing
 * plain writes until AUTHORITY, the migration state through snapshots
 * (whole and incremental), and malformed payloads refused with nothing
 * changed. The suite (its fixture in migration_util.c) is declared in
 * test_migration.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "migration_util.h"

static const struct baton_machine_version V1 = {1}, V2 = {2}, V3 = {3};

/* The map's version-3 snapshot read in steps of `budget` bytes. */
static void snap_sliced(struct baton_kv *k, size_t budget,
			struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(kv_snapshot_begin(k, V3), 0);
	bool done = false;
	while (!done)
		cr_assert_eq(kv_snapshot_step(k, budget, migt_sink, out, &done),
			     0);
	kv_snapshot_end(k);
}

static const char *authority(struct baton_kv *k, uint64_t from)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_authority(from, &migt_payload), 0);
	return migt_apply(k, V3, &migt_payload, 0);
}

static const char *fence(struct baton_kv *k, struct baton_machine_version v,
			 uint64_t stamp, const char *target)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_fence(stamp, target, &migt_payload), 0);
	return migt_apply(k, v, &migt_payload, 0);
}

Test(migration, a_fence_refuses_every_write_and_reads_go_on)
{
	migt_fill(migt_old_kv, 100);
	cr_assert_str_eq(fence(migt_old_kv, V3, T0 + 1000, "cluster-b"),
			 "+OK\r\n");
	struct kv_migration m = migt_state(migt_old_kv);
	cr_assert(m.fenced);
	cr_assert_str_eq(m.fence_target, "cluster-b");
	cr_assert_eq(kv_machine_time_ms(migt_old_kv), T0 + 100); /* not moved */
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	migt_snap(migt_old_kv, &before);
	cr_assert_str_eq(migt_run(migt_old_kv, T0 + 2000, "SET s0 new"),
			 KV_FENCED_REPLY);
	cr_assert_str_eq(migt_run(migt_old_kv, T0 + 2000, "FLUSHALL"),
			 KV_FENCED_REPLY);
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_sweep(T0 + 9000000, 1000, &migt_text), 0);
	cr_assert_str_eq(migt_apply(migt_old_kv, V3, &migt_text, 0),
			 KV_FENCED_REPLY);
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_txn(T0 + 3000, 0, NULL, 0, NULL, &migt_text), 0);
	cr_assert_str_eq(migt_apply(migt_old_kv, V3, &migt_text, 0),
			 KV_FENCED_REPLY);
	baton_buf_reset(&migt_text);
	kvt_encode("SET s0 v1", &migt_text); /* format 1 */
	cr_assert_str_eq(migt_apply(migt_old_kv, V3, &migt_text, 0),
			 KV_FENCED_REPLY);
	/* Even a command this release does not know: never applied. */
	cr_assert_str_eq(migt_run(migt_old_kv, T0, "ZADD z 1 m"),
			 KV_FENCED_REPLY);
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_import_begin(1, T0, &migt_text), 0);
	cr_assert_str_eq(migt_apply(migt_old_kv, V3, &migt_text, 0),
			 KV_FENCED_REPLY);
	/* A second fence changes nothing, its target included. */
	cr_assert_str_eq(fence(migt_old_kv, V3, T0 + 5000, "other"), "+OK\r\n");
	cr_assert_str_eq(migt_state(migt_old_kv).fence_target, "cluster-b");
	migt_snap(migt_old_kv, &after);
	migt_assert_same_bytes(&before, &after);
	cr_assert_eq(kv_machine_time_ms(migt_old_kv), T0 + 100);
	cr_assert_str_eq(migt_read_cmd(migt_old_kv, "GET s0"),
			 "$7\r\nvalue-0\r\n");
	/* Machine version 2 fences too; version 1 cannot (format 2). */
	cr_assert_str_eq(fence(migt_new_kv, V2, T0, ""), "+OK\r\n");
	cr_assert(migt_state(migt_new_kv).fenced);
	struct baton_kv *v1 = kvt_new();
	cr_assert(strstr(fence(v1, V1, T0, "b"), "machine version 1") != NULL);
	cr_assert_not(migt_state(v1).fenced);
	kv_destroy(v1);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, importing_refuses_plain_writes_until_authority)
{
	migt_fill(migt_old_kv, 50);
	migt_sweep_due(migt_old_kv);
	migt_import_all(30, 4096);
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	migt_snap(migt_new_kv, &before);
	cr_assert_str_eq(migt_run(migt_new_kv, T0 + 9000, "SET s0 x"),
			 KV_IMPORTING_REPLY);
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_sweep(T0 + 9000000, 1000, &migt_text), 0);
	cr_assert_str_eq(migt_apply(migt_new_kv, V3, &migt_text, 0),
			 KV_IMPORTING_REPLY);
	migt_snap(migt_new_kv, &after);
	migt_assert_same_bytes(&before, &after);
	/* Authority needs the import through its index. */
	cr_assert_str_eq(authority(migt_new_kv, 31),
			 "-ERR authority from old index 31 refused: the "
			 "import has applied the old log through index 30 "
			 "only\r\n");
	migt_encode(T0 + 300, "SET s0 from-old", &migt_text);
	cr_assert_str_eq(migt_entry(migt_new_kv, 31, &migt_text), "+OK\r\n");
	cr_assert_str_eq(authority(migt_new_kv, 31), "+OK\r\n");
	struct kv_migration m = migt_state(migt_new_kv);
	cr_assert(m.authority && !m.importing);
	cr_assert_eq(m.authority_from, 31);
	cr_assert_str_eq(migt_run(migt_new_kv, T0 + 9000, "SET s0 x"),
			 "+OK\r\n");
	cr_assert_eq(kv_machine_time_ms(migt_new_kv), T0 + 9000);
	/* The import is over: its payloads are refused, AUTHORITY again
	 * changes nothing. */
	cr_assert(strstr(migt_entry(migt_new_kv, 32, &migt_text),
			 "holds write authority") != NULL);
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_import_begin(99, T0, &migt_text), 0);
	cr_assert(strncmp(migt_apply(migt_new_kv, V3, &migt_text, 0), "-ERR",
			  4) == 0);
	cr_assert_str_eq(authority(migt_new_kv, 5), "+OK\r\n");
	cr_assert_eq(migt_state(migt_new_kv).authority_from, 31);
	cr_assert_str_eq(migt_read_cmd(migt_new_kv, "GET s0"), "$1\r\nx\r\n");
	/* Authority without an import, or with a snapshot open. */
	struct baton_kv *k = kvt_new();
	cr_assert(strstr(authority(k, 0), "no import") != NULL);
	migt_begin(k, 3, T0);
	cr_assert(strstr(authority(k, 3), "still open") != NULL);
	migt_encode(T0, "SET q 1", &migt_text);
	cr_assert(strstr(migt_entry(k, 4, &migt_text), "still open") != NULL);
	kv_destroy(k);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, a_fence_in_an_entry_is_an_index_step)
{
	migt_import_all(1, 4096);
	migt_encode(T0 + 10, "SET a 1", &migt_text);
	cr_assert_str_eq(migt_entry(migt_new_kv, 2, &migt_text), "+OK\r\n");
	struct baton_buf f;
	baton_buf_init(&f);
	cr_assert_eq(kv_encode_fence(T0 + 20, "new", &f), 0);
	cr_assert_str_eq(migt_entry(migt_new_kv, 3, &f), "+OK\r\n");
	struct kv_migration m = migt_state(migt_new_kv);
	cr_assert_not(m.fenced);
	cr_assert_eq(m.import_fence_index, 3);
	cr_assert_eq(m.import_index, 3);
	cr_assert_eq(kv_machine_time_ms(migt_new_kv), T0 + 10);
	/* The old map refused what came after its fence: so does this. */
	migt_encode(T0 + 30, "SET a 2", &migt_text);
	cr_assert_str_eq(migt_entry(migt_new_kv, 4, &migt_text),
			 KV_FENCED_REPLY);
	cr_assert_eq(migt_state(migt_new_kv).import_index, 4);
	cr_assert_str_eq(migt_read_cmd(migt_new_kv, "GET a"), "$1\r\n1\r\n");
	cr_assert_str_eq(authority(migt_new_kv, 3), "+OK\r\n");
	cr_assert_str_eq(migt_run(migt_new_kv, T0 + 40, "SET a 3"), "+OK\r\n");
	baton_buf_free(&f);
}

Test(migration, import_payloads_need_machine_version_3)
{
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_import_begin(1, T0, &migt_text), 0);
	cr_assert_str_eq(migt_apply(migt_new_kv, V2, &migt_text, 0),
			 "-ERR an import payload (kind 5) needs machine "
			 "version 3; the effective machine version is 2\r\n");
	cr_assert(strstr(migt_apply(migt_new_kv, V1, &migt_text, 0),
			 "machine version 1") != NULL);
	cr_assert_not(kv__migration_any(&migt_new_kv->mig));
}

/* The migration state and snapshots at each phase: restored whole, and
 * the incremental snapshot equal to the whole one. */
static void assert_round_trip(struct baton_kv *k)
{
	struct baton_buf whole, sliced, again;
	baton_buf_init(&whole);
	baton_buf_init(&sliced);
	baton_buf_init(&again);
	migt_snap(k, &whole);
	snap_sliced(k, 1, &sliced);
	migt_assert_same_bytes(&whole, &sliced);
	snap_sliced(k, 300, &sliced);
	migt_assert_same_bytes(&whole, &sliced);
	struct baton_kv *r = kvt_new();
	cr_assert_eq(kv_restore(r, V3, whole.data, whole.len), 0, "%s",
		     kv_errmsg(r));
	struct kv_migration a = migt_state(k), b = migt_state(r);
	cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
	migt_snap(r, &again);
	migt_assert_same_bytes(&whole, &again);
	/* Under version 2 too, and a map without state restores to none. */
	baton_buf_reset(&again);
	if (k->table.hashes == 0) {
		cr_assert_eq(kv_snapshot(k, V2, migt_sink, &again), 0);
		cr_assert_eq(kv_restore(r, V2, again.data, again.len), 0);
		b = migt_state(r);
		cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
	}
	struct baton_kv *empty = kvt_new();
	migt_snap(empty, &again);
	cr_assert_eq(kv_restore(r, V3, again.data, again.len), 0);
	cr_assert_not(kv__migration_any(&r->mig));
	kv_destroy(empty);
	kv_destroy(r);
	baton_buf_free(&whole);
	baton_buf_free(&sliced);
	baton_buf_free(&again);
}

Test(migration, the_state_survives_snapshots)
{
	migt_fill(migt_old_kv, 200);
	migt_sweep_due(migt_old_kv);
	assert_round_trip(migt_old_kv);
	static struct baton_buf chunks[256];
	size_t n = migt_export_chunks(migt_old_kv, 2048, chunks, 256);
	migt_begin(migt_new_kv, 12, kv_machine_time_ms(migt_old_kv));
	assert_round_trip(migt_new_kv);
	cr_assert_str_eq(migt_chunk(migt_new_kv, 12, 0, &chunks[0]), "+OK\r\n");
	assert_round_trip(migt_new_kv);
	for (size_t i = 1; i < n; i++)
		migt_chunk(migt_new_kv, 12, (uint32_t)i, &chunks[i]);
	migt_end(migt_new_kv, 12, (uint32_t)n);
	assert_round_trip(migt_new_kv);
	struct baton_buf f;
	baton_buf_init(&f);
	cr_assert_eq(kv_encode_fence(T0 + 150, "x", &f), 0);
	migt_entry(migt_new_kv, 13, &f);
	assert_round_trip(migt_new_kv);
	authority(migt_new_kv, 13);
	assert_round_trip(migt_new_kv);
	cr_assert_str_eq(fence(migt_old_kv, V3, T0, "cluster-with-a-long-name"),
			 "+OK\r\n");
	assert_round_trip(migt_old_kv);
	migt_free_chunks(chunks, n);
	baton_buf_free(&f);
}

Test(migration, an_incremental_snapshot_keeps_the_state_at_begin)
{
	migt_fill(migt_old_kv, 300);
	struct baton_buf whole, sliced;
	baton_buf_init(&whole);
	baton_buf_init(&sliced);
	migt_snap(migt_old_kv, &whole);
	cr_assert_eq(kv_snapshot_begin(migt_old_kv, V3), 0);
	bool done = false;
	cr_assert_eq(
		kv_snapshot_step(migt_old_kv, 100, migt_sink, &sliced, &done),
		0);
	fence(migt_old_kv, V3, T0 + 1, "b");
	while (!done)
		cr_assert_eq(kv_snapshot_step(migt_old_kv, 100, migt_sink,
					      &sliced, &done),
			     0);
	kv_snapshot_end(migt_old_kv);
	migt_assert_same_bytes(&whole, &sliced);
	/* And the other way: the fence is in the next one. */
	migt_snap(migt_old_kv, &whole);
	cr_assert_eq(kv_snapshot_begin(migt_old_kv, V3), 0);
	baton_buf_reset(&sliced);
	done = false;
	while (!done) {
		cr_assert_eq(kv_snapshot_step(migt_old_kv, 100, migt_sink,
					      &sliced, &done),
			     0);
		migt_run(migt_old_kv, T0 + 5, "SET s0 refused");
	}
	kv_snapshot_end(migt_old_kv);
	migt_assert_same_bytes(&whole, &sliced);
	baton_buf_free(&whole);
	baton_buf_free(&sliced);
}

Test(migration, a_map_without_migration_has_no_section)
{
	migt_fill(migt_old_kv, 100);
	struct baton_buf s;
	baton_buf_init(&s);
	migt_snap(migt_old_kv, &s);
	for (size_t i = 0; i + 4 <= s.len; i++)
		cr_assert_neq(memcmp(s.data + i, "MIGR", 4), 0);
	/* Reads, exports and sweeps leave no migration state. */
	struct baton_buf c[64];
	migt_free_chunks(c, migt_export_chunks(migt_old_kv, 4096, c, 64));
	cr_assert_not(kv__migration_any(&migt_old_kv->mig));
	fence(migt_old_kv, V3, T0, "b");
	migt_snap(migt_old_kv, &migt_text);
	cr_assert_eq(migt_text.len, s.len + 46 + 1);
	cr_assert_eq(memcmp(migt_text.data + s.len - 8, "MIGR", 4), 0);
	/* Converting leaves the state alone. */
	cr_assert_eq(kv_convert(migt_old_kv, V3, V2), 0);
	cr_assert(migt_state(migt_old_kv).fenced);
	baton_buf_free(&s);
}

/* Re-seal a snapshot's checksum after a change. */
static void reseal(struct baton_buf *s)
{
	baton_le_put_u64(s->data + s->len - 8,
			 baton__checksum(s->data, s->len - 8));
}

Test(migration, damaged_sections_are_refused)
{
	migt_run(migt_old_kv, T0, "SET a 1");
	fence(migt_old_kv, V3, T0, "bb");
	struct baton_buf good, bad;
	baton_buf_init(&good);
	baton_buf_init(&bad);
	migt_snap(migt_old_kv, &good);
	size_t sec = good.len - 8 - 46 - 2;
	cr_assert_eq(memcmp(good.data + sec, "MIGR", 4), 0);
	struct baton_kv *r = kvt_new();
	migt_run(r, T0, "SET keep 1");
	struct {
		size_t at;
		uint8_t v;
		int want;
	} cases[] = {
		{sec, 'X', BATON_ECORRUPT},	 /* the tag */
		{sec + 4, 0, BATON_ECORRUPT},	 /* section format 0 */
		{sec + 4, 3, BATON_EVERSION},	 /* a later one */
		{sec + 4, 2, BATON_ECORRUPT},	 /* 2 without its part */
		{sec + 8, 0x10, BATON_ECORRUPT}, /* an unknown flag */
		{sec + 9, 3, BATON_ECORRUPT},	 /* the target's length */
		{sec + 10, 0, BATON_ECORRUPT},	 /* a NUL in the target */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		baton_buf_reset(&bad);
		baton_buf_append(&bad, good.data, good.len);
		bad.data[cases[i].at] = cases[i].v;
		reseal(&bad);
		cr_assert_eq(kv_restore(r, V3, bad.data, bad.len),
			     cases[i].want, "case %zu", i);
		cr_assert_str_eq(migt_read_cmd(r, "GET keep"), "$1\r\n1\r\n");
		cr_assert_not(kv__migration_any(&r->mig));
	}
	/* A section of no state: one form per state, so refused. */
	baton_buf_reset(&bad);
	baton_buf_append(&bad, good.data, good.len);
	bad.data[sec + 8] = 0;
	memmove(bad.data + sec + 10, bad.data + sec + 12, bad.len - sec - 12);
	bad.len -= 2;
	bad.data[sec + 9] = 0;
	reseal(&bad);
	cr_assert_eq(kv_restore(r, V3, bad.data, bad.len), BATON_ECORRUPT);
	/* Every truncation, resealed. */
	for (size_t n = sec + 1; n < good.len - 8; n++) {
		baton_buf_reset(&bad);
		baton_buf_append(&bad, good.data, n);
		baton_buf_append(&bad, "01234567", 8);
		reseal(&bad);
		cr_assert_eq(kv_restore(r, V3, bad.data, bad.len),
			     BATON_ECORRUPT, "cut at %zu", n);
	}
	cr_assert_eq(kv_restore(r, V3, good.data, good.len), 0);
	cr_assert_str_eq(migt_state(r).fence_target, "bb");
	kv_destroy(r);
	baton_buf_free(&good);
	baton_buf_free(&bad);
}

/* Apply a malformed payload to migt_new_kv: the error, nothing changed. */
static void assert_refused(const uint8_t *p, size_t len, int want)
{
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	migt_snap(migt_new_kv, &before);
	struct kv_migration m = migt_state(migt_new_kv);
	baton_buf_reset(&migt_reply);
	cr_assert_eq(kv_apply(migt_new_kv, V3, p, len, &migt_reply), want,
		     "length %zu kind %u", len, len > 9 ? p[9] : 0);
	cr_assert_eq(migt_reply.len, 0);
	cr_assert_neq(kv_errmsg(migt_new_kv)[0], '\0');
	migt_snap(migt_new_kv, &after);
	migt_assert_same_bytes(&before, &after);
	struct kv_migration m2 = migt_state(migt_new_kv);
	cr_assert_eq(memcmp(&m, &m2, sizeof m), 0);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, malformed_payloads_change_nothing)
{
	migt_fill(migt_old_kv, 20);
	migt_sweep_due(migt_old_kv);
	struct baton_buf c[8];
	size_t n = migt_export_chunks(migt_old_kv, 1 << 20, c, 8);
	cr_assert_eq(n, 1);
	migt_begin(migt_new_kv, 3, T0);
	/* Every truncation of each kind (an entry and a chunk cut inside
	 * their body are malformed too). */
	struct baton_buf all[6];
	for (int i = 0; i < 6; i++)
		baton_buf_init(&all[i]);
	migt_encode(T0, "SET a 1", &migt_text);
	cr_assert_eq(kv_encode_fence(T0, "target", &all[0]), 0);
	cr_assert_eq(kv_encode_import_begin(3, T0, &all[1]), 0);
	cr_assert_eq(kv_encode_import_chunk(3, 0, c[0].data, c[0].len, &all[2]),
		     0);
	cr_assert_eq(kv_encode_import_end(3, 1, &all[3]), 0);
	cr_assert_eq(kv_encode_import_entry(4, migt_text.data, migt_text.len,
					    &all[4]),
		     0);
	cr_assert_eq(kv_encode_authority(4, &all[5]), 0);
	for (int i = 0; i < 6; i++) {
		for (size_t len = 0; len < all[i].len; len++) {
			if (i == 2 && len >= 22) {
				/* A chunk cut between records is whole. */
				if (kv__records_check(all[i].data + 22,
						      len - 22) == 0)
					continue;
			}
			assert_refused(all[i].data, len, BATON_ECORRUPT);
		}
		/* A byte more. */
		baton_buf_append(&all[i], "x", 1);
		if (i != 2 && i != 4)
			assert_refused(all[i].data, all[i].len, BATON_ECORRUPT);
	}
	/* The import kinds carry stamp 0. */
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_authority(4, &migt_text), 0);
	migt_text.data[1] = 1;
	assert_refused(migt_text.data, migt_text.len, BATON_ECORRUPT);
	/* A kind after the migration's is a later release's. */
	migt_text.data[1] = 0;
	migt_text.data[9] = 11;
	assert_refused(migt_text.data, migt_text.len, BATON_EVERSION);
	/* A NUL in a fence's target. */
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_fence(T0, "ab", &migt_text), 0);
	migt_text.data[11] = 0;
	assert_refused(migt_text.data, migt_text.len, BATON_ECORRUPT);
	/* Huge lengths in a chunk's record: a key, a value, a field count. */
	static const uint8_t huge_key[] = {1, 0xff, 0xff, 0xff, 0xff, 'k'};
	static const uint8_t huge_val[] = {1,	 1,    0,    0,	   0,  'k',
					   0xff, 0xff, 0xff, 0x7f, 'v'};
	static const uint8_t huge_fields[] = {
		2,    1,    0,	  0, 0, 'k', 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0, 0, 0,   0,	   0,	 0,    0,    0};
	static const uint8_t no_field[] = {2, 1, 0, 0, 0, 'k', 0, 0, 0, 0, 0,
					   0, 0, 0, 0, 0, 0,   0, 0, 0, 0, 0};
	static const uint8_t bad_type[] = {3, 1, 0, 0, 0, 'k', 0, 0, 0,
					   0, 0, 0, 0, 0, 0,   0, 0, 0};
	static const uint8_t bad_expiry[] = {1, 1, 0, 0, 0, 'k', 0, 0, 0,
					     0, 0, 0, 0, 0, 0,	 0, 0, 0x80};
	static const uint8_t dup_field[] = {2, 1, 0, 0, 0, 'k', 2, 0,	0,   0,
					    0, 0, 0, 0, 1, 0,	0, 0,	'f', 0,
					    0, 0, 0, 1, 0, 0,	0, 'f', 0,   0,
					    0, 0, 0, 0, 0, 0,	0, 0,	0,   0};
	const struct {
		const uint8_t *p;
		size_t len;
	} records[] = {
		{huge_key, sizeof huge_key},
		{huge_val, sizeof huge_val},
		{huge_fields, sizeof huge_fields},
		{no_field, sizeof no_field},
		{bad_type, sizeof bad_type},
		{bad_expiry, sizeof bad_expiry},
		{dup_field, sizeof dup_field},
	};
	for (size_t i = 0; i < sizeof records / sizeof records[0]; i++) {
		baton_buf_reset(&migt_text);
		int rv = kv_encode_import_chunk(3, 0, records[i].p,
						records[i].len, &migt_text);
		if (records[i].p == dup_field) {
			/* Found only when applied. */
			cr_assert_eq(rv, 0);
		} else {
			cr_assert_eq(rv, BATON_EINVAL, "record %zu", i);
			uint8_t head[12];
			baton_le_put_u64(head, 3);
			baton_le_put_u32(head + 8, 0);
			uint8_t h[10] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 6};
			baton_buf_append(&migt_text, h, sizeof h);
			baton_buf_append(&migt_text, head, sizeof head);
			baton_buf_append(&migt_text, records[i].p,
					 records[i].len);
		}
		assert_refused(migt_text.data, migt_text.len, BATON_ECORRUPT);
	}
	/* An import entry holding an import kind, or nothing. */
	cr_assert_eq(kv_encode_import_entry(5, all[5].data, all[5].len - 1,
					    &migt_text),
		     BATON_EINVAL);
	baton_buf_reset(&migt_text);
	uint8_t h[10] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 8};
	uint8_t idx[8] = {5};
	baton_buf_append(&migt_text, h, sizeof h);
	baton_buf_append(&migt_text, idx, sizeof idx);
	assert_refused(migt_text.data, migt_text.len, BATON_ECORRUPT);
	baton_buf_append(&migt_text, all[1].data, all[1].len);
	assert_refused(migt_text.data, migt_text.len, BATON_ECORRUPT);
	/* Bad arguments to the encoders. */
	char long_target[300];
	memset(long_target, 'a', sizeof long_target - 1);
	long_target[sizeof long_target - 1] = '\0';
	baton_buf_reset(&migt_text);
	cr_assert_eq(kv_encode_fence(T0, long_target, &migt_text),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_fence(T0, NULL, &migt_text), BATON_EINVAL);
	cr_assert_eq(kv_encode_fence(1ull << 63, "a", &migt_text),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_import_begin(1, 1ull << 63, &migt_text),
		     BATON_EINVAL);
	cr_assert_eq(
		kv_encode_import_entry(0, all[0].data, all[0].len, &migt_text),
		BATON_EINVAL);
	cr_assert_eq(kv_encode_import_entry(1, NULL, 0, &migt_text),
		     BATON_EINVAL);
	cr_assert_eq(migt_text.len, 0);
	for (int i = 0; i < 6; i++)
		baton_buf_free(&all[i]);
	migt_free_chunks(c, n);
}

/* Random damage to valid migration payloads, applied to two maps: each
 * is applied or refused alike, a refusal changing nothing. */
Test(migration, random_damage)
{
	migt_fill(migt_old_kv, 30);
	migt_sweep_due(migt_old_kv);
	struct baton_buf c[4];
	size_t n = migt_export_chunks(migt_old_kv, 1 << 20, c, 4);
	struct baton_kv *twin = kvt_new();
	struct baton_buf p, r2;
	baton_buf_init(&p);
	baton_buf_init(&r2);
	uint64_t seed = 42;
	for (int round = 0; round < 3000; round++) {
		baton_buf_reset(&p);
		uint64_t x = kvt_rand(&seed);
		switch (x % 6) {
		case 0:
			kv_encode_import_begin(x % 3, T0, &p);
			break;
		case 1:
			kv_encode_import_chunk(x % 3, (uint32_t)(x >> 8) % 2,
					       c[0].data, c[0].len, &p);
			break;
		case 2:
			kv_encode_import_end(x % 3, (uint32_t)(x >> 8) % 2, &p);
			break;
		case 3:
			migt_encode(T0 + x % 1000, "SET a 1", &migt_text);
			kv_encode_import_entry(1 + x % 50, migt_text.data,
					       migt_text.len, &p);
			break;
		case 4:
			kv_encode_authority(x % 50, &p);
			break;
		default:
			kv_encode_fence(T0, "t", &p);
		}
		int flips = (int)(kvt_rand(&seed) % 3);
		for (int f = 0; f < flips && p.len > 0; f++)
			p.data[kvt_rand(&seed) % p.len] ^=
				(uint8_t)(1u << kvt_rand(&seed) % 8);
		if (kvt_rand(&seed) % 4 == 0 && p.len > 0)
			p.len = kvt_rand(&seed) % p.len;
		baton_buf_reset(&migt_reply);
		baton_buf_reset(&r2);
		int a = kv_apply(migt_new_kv, V3, p.data, p.len, &migt_reply);
		int b = kv_apply(twin, V3, p.data, p.len, &r2);
		cr_assert_eq(a, b);
		cr_assert(a == 0 || a == BATON_ECORRUPT || a == BATON_EVERSION,
			  "%d", a);
		cr_assert_eq(migt_reply.len, r2.len);
		/* Both may be empty, their data NULL: memcmp wants neither. */
		cr_assert(migt_reply.len == 0 ||
			  memcmp(migt_reply.data, r2.data, migt_reply.len) ==
				  0);
	}
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	migt_snap(migt_new_kv, &sa);
	migt_snap(twin, &sb);
	migt_assert_same_bytes(&sa, &sb);
	struct baton_kv *r = kvt_new();
	cr_assert_eq(kv_restore(r, V3, sa.data, sa.len), 0);
	kv_destroy(r);
	kv_destroy(twin);
	migt_free_chunks(c, n);
	baton_buf_free(&p);
	baton_buf_free(&r2);
	baton_buf_free(&sa);
	baton_buf_free(&sb);
}
