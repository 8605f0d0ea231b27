/*
 * The map's part of a migration (docs/kv.md "Migration"): the export of
 * the live map imported through IMPORT_BEGIN, CHUNKs and END into a fresh
 * map, old entries replayed in order with resends skipped, and a BEGIN
 * restarting an open snapshot. The fence, authority, the migration state
 * through snapshots and malformed payloads are in test_migration_state.c;
 * the suite's fixture and helpers in migration_util.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "migration_util.h"

static const struct baton_machine_version V3 = {3};

TestSuite(migration, .init = migt_setup, .fini = migt_teardown);

/* Both maps hold the same keys, values, expiries and machine time: their
 * snapshots agree but for the migration section (the new map's) and the
 * checksum. */
static void assert_same_contents(const struct baton_kv *a,
				 const struct baton_kv *b)
{
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	migt_snap(a, &sa);
	migt_snap(b, &sb);
	cr_assert_geq(sb.len, sa.len);
	cr_assert_eq(memcmp(sa.data, sb.data, sa.len - 8), 0,
		     "the maps' contents differ");
	baton_buf_free(&sa);
	baton_buf_free(&sb);
}

Test(migration, export_import_gives_the_same_live_map)
{
	migt_fill(migt_old_kv, 3000);
	migt_run(migt_new_kv, T0 + 5, "SET stale 1"); /* BEGIN deletes it */
	migt_import_all(77, 4096);
	struct kv_migration m = migt_state(migt_new_kv);
	cr_assert(m.importing && !m.snapshot_open && !m.authority);
	cr_assert_eq(m.import_index, 77);
	cr_assert_eq(m.snapshot_index, 77);
	cr_assert_gt(m.snapshot_chunks, 10);
	cr_assert_eq(kv_machine_time_ms(migt_new_kv), T0 + 100);
	cr_assert_str_eq(migt_read_cmd(migt_new_kv, "GET stale"), "$-1\r\n");
	cr_assert_str_eq(migt_read_cmd(migt_new_kv, "HGET h2 f2"),
			 "$2\r\nb2\r\n");
	cr_assert_str_eq(migt_read_cmd(migt_new_kv, "PTTL g4"), ":99899\r\n");
	/* The exporter skipped the expired keys the old map still holds. */
	cr_assert_eq(kv_dbsize(migt_new_kv), kv_dbsize(migt_old_kv) - 600);
	migt_sweep_due(migt_old_kv);
	assert_same_contents(migt_old_kv, migt_new_kv);
	/* The exporter's map is unchanged and has no migration state. */
	cr_assert_not(kv__migration_any(&migt_old_kv->mig));
}

Test(migration, one_record_per_step_and_an_empty_map)
{
	/* An empty map exports nothing: BEGIN and END alone. */
	migt_import_all(5, 1);
	cr_assert_eq(kv_dbsize(migt_new_kv), 0);
	cr_assert_eq(migt_state(migt_new_kv).import_index, 5);
	migt_fill(migt_old_kv, 50);
	migt_sweep_due(migt_old_kv);
	migt_import_all(6, 1); /* a record per chunk */
	cr_assert_eq(migt_state(migt_new_kv).snapshot_chunks,
		     kv_dbsize(migt_old_kv));
	assert_same_contents(migt_old_kv, migt_new_kv);
}

Test(migration, the_export_is_the_map_at_begin)
{
	migt_fill(migt_old_kv, 600);
	migt_sweep_due(migt_old_kv);
	struct baton_kv *copy = kvt_new();
	struct baton_buf s;
	baton_buf_init(&s);
	migt_snap(migt_old_kv, &s);
	cr_assert_eq(kv_restore(copy, V3, s.data, s.len), 0);
	/* Only one view: a snapshot or a KEYS waits for the export. */
	cr_assert_eq(kv_export_begin(migt_old_kv), 0);
	cr_assert(kv_export_open(migt_old_kv));
	cr_assert_eq(kv_export_begin(migt_old_kv), BATON_ESTATE);
	cr_assert_eq(kv_snapshot_begin(migt_old_kv, V3), BATON_EBUSY);
	cr_assert_eq(kv_keys_begin(migt_old_kv, (const uint8_t *)"*", 1),
		     BATON_EBUSY);
	bool done = false;
	uint32_t seq = 0;
	migt_begin(migt_new_kv, 9, kv_machine_time_ms(migt_old_kv));
	char line[128];
	for (int i = 0; !done; i++) {
		struct baton_buf c;
		baton_buf_init(&c);
		cr_assert_eq(kv_export_step(migt_old_kv, 512, &c, &done), 0);
		cr_assert_str_eq(migt_chunk(migt_new_kv, 9, seq++, &c),
				 "+OK\r\n");
		baton_buf_free(&c);
		/* Writes between the steps: changes, deletes, new keys,
		 * hashes written in place. */
		snprintf(line, sizeof line, "SET s%d changed", (i * 7) % 600);
		migt_run(migt_old_kv, T0 + 100, line);
		snprintf(line, sizeof line, "DEL h%d", (i * 11 + 2) % 600);
		migt_run(migt_old_kv, T0 + 100, line);
		snprintf(line, sizeof line, "HSET g%d new %d",
			 (i * 5 + 4) % 600, i);
		migt_run(migt_old_kv, T0 + 100, line);
		snprintf(line, sizeof line, "SET born%d 1", i);
		migt_run(migt_old_kv, T0 + 100, line);
	}
	kv_export_end(migt_old_kv);
	cr_assert_not(kv_export_open(migt_old_kv));
	cr_assert_str_eq(migt_end(migt_new_kv, 9, seq), "+OK\r\n");
	assert_same_contents(copy, migt_new_kv);
	kv_destroy(copy);
	baton_buf_free(&s);
	/* The view is free again. */
	cr_assert_eq(kv_snapshot_begin(migt_old_kv, V3), 0);
	cr_assert_eq(kv_export_begin(migt_old_kv), BATON_EBUSY);
	kv_snapshot_end(migt_old_kv);
	cr_assert_eq(kv_export_step(migt_old_kv, 1, &migt_text, &done),
		     BATON_ESTATE);
}

Test(migration, entries_apply_in_order_and_resends_are_skipped)
{
	migt_fill(migt_old_kv, 200);
	migt_sweep_due(migt_old_kv);
	migt_import_all(10, 2048);
	/* The old log goes on: each payload applied there and imported
	 * with its old index (gaps are entries that are not writes). */
	static struct baton_buf old[40];
	uint64_t index[40];
	char line[128];
	for (int i = 0; i < 40; i++) {
		switch (i % 4) {
		case 0:
			snprintf(line, sizeof line, "SET s%d after-%d", i * 5,
				 i);
			break;
		case 1:
			snprintf(line, sizeof line, "HINCRBY h%d n %d",
				 (i * 5 + 2) % 200, i);
			break;
		case 2:
			snprintf(line, sizeof line, "INCR counter");
			break;
		default:
			snprintf(line, sizeof line, "SET t%d x PX 5", i);
		}
		baton_buf_init(&old[i]);
		migt_encode(T0 + 200 + (uint64_t)i * 3, line, &old[i]);
		baton_buf_reset(&migt_reply);
		cr_assert_eq(kv_apply(migt_old_kv, V3, old[i].data, old[i].len,
				      &migt_reply),
			     0);
		index[i] = 11 + (uint64_t)i * 2;
	}
	for (int i = 0; i < 40; i++) {
		const char *r = migt_entry(migt_new_kv, index[i], &old[i]);
		cr_assert_neq(r[0], '-', "%s", r);
		cr_assert_eq(migt_state(migt_new_kv).import_index, index[i]);
		if (i == 20) {
			/* A resend from an earlier index: skipped. */
			for (int j = 10; j <= 20; j++)
				cr_assert_str_eq(migt_entry(migt_new_kv,
							    index[j], &old[j]),
						 "+SKIPPED\r\n");
			cr_assert_eq(migt_state(migt_new_kv).import_index,
				     index[20]);
		}
	}
	/* A sweep and a transaction too. */
	struct baton_buf sw, tx;
	baton_buf_init(&sw);
	baton_buf_init(&tx);
	cr_assert_eq(kv_encode_sweep(T0 + 400, 100, &sw), 0);
	struct migt_line a, b;
	migt_split("SET tx 1", &a);
	migt_split("INCR tx", &b);
	struct kv_txn_command cmds[2] = {{a.argc, a.argv, a.lens},
					 {b.argc, b.argv, b.lens}};
	cr_assert_eq(kv_encode_txn(T0 + 401, 0, NULL, 2, cmds, &tx), 0);
	baton_buf_reset(&migt_reply);
	cr_assert_eq(kv_apply(migt_old_kv, V3, sw.data, sw.len, &migt_reply),
		     0);
	baton_buf_reset(&migt_reply);
	cr_assert_eq(kv_apply(migt_old_kv, V3, tx.data, tx.len, &migt_reply),
		     0);
	cr_assert_str_eq(migt_entry(migt_new_kv, 200, &sw), ":10\r\n");
	cr_assert_str_eq(migt_entry(migt_new_kv, 201, &tx),
			 "*2\r\n+OK\r\n:2\r\n");
	assert_same_contents(migt_old_kv, migt_new_kv);
	/* Resending everything again changes nothing. */
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	migt_snap(migt_new_kv, &before);
	for (int i = 0; i < 40; i++)
		cr_assert_str_eq(migt_entry(migt_new_kv, index[i], &old[i]),
				 "+SKIPPED\r\n");
	cr_assert_str_eq(migt_entry(migt_new_kv, 201, &tx), "+SKIPPED\r\n");
	migt_snap(migt_new_kv, &after);
	migt_assert_same_bytes(&before, &after);
	for (int i = 0; i < 40; i++)
		baton_buf_free(&old[i]);
	baton_buf_free(&sw);
	baton_buf_free(&tx);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, a_begin_restarts_an_open_snapshot)
{
	migt_fill(migt_old_kv, 300);
	migt_sweep_due(migt_old_kv);
	static struct baton_buf chunks[512];
	size_t n = migt_export_chunks(migt_old_kv, 1024, chunks, 512);
	cr_assert_gt(n, 4);
	migt_begin(migt_new_kv, 40, kv_machine_time_ms(migt_old_kv));
	for (size_t i = 0; i < n / 2; i++)
		cr_assert_str_eq(
			migt_chunk(migt_new_kv, 40, (uint32_t)i, &chunks[i]),
			"+OK\r\n");
	/* An entry while the snapshot is open is refused. */
	migt_encode(T0 + 500, "SET z 1", &migt_text);
	cr_assert(strstr(migt_entry(migt_new_kv, 41, &migt_text),
			 "still open") != NULL);
	/* The stream broke: a new snapshot at index 50. */
	migt_begin(migt_new_kv, 50, kv_machine_time_ms(migt_old_kv));
	cr_assert_eq(kv_dbsize(migt_new_kv), 0);
	cr_assert_eq(migt_state(migt_new_kv).snapshot_chunks, 0);
	/* The old snapshot's chunks, and out-of-order ones, are refused. */
	cr_assert_str_eq(migt_chunk(migt_new_kv, 40, 0, &chunks[0]),
			 "-ERR import chunk refused: expected snapshot 50 "
			 "chunk 0, found snapshot 40 chunk 0\r\n");
	cr_assert_str_eq(migt_chunk(migt_new_kv, 50, 1, &chunks[1]),
			 "-ERR import chunk refused: expected snapshot 50 "
			 "chunk 0, found snapshot 50 chunk 1\r\n");
	cr_assert_eq(kv_dbsize(migt_new_kv), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(
			migt_chunk(migt_new_kv, 50, (uint32_t)i, &chunks[i]),
			"+OK\r\n");
	/* A chunk resent after the last: refused, nothing changed. */
	cr_assert(strncmp(migt_chunk(migt_new_kv, 50, 0, &chunks[0]), "-ERR",
			  4) == 0);
	cr_assert(strncmp(migt_end(migt_new_kv, 50, (uint32_t)n - 1), "-ERR",
			  4) == 0);
	cr_assert(strncmp(migt_end(migt_new_kv, 40, (uint32_t)n), "-ERR", 4) ==
		  0);
	cr_assert_str_eq(migt_end(migt_new_kv, 50, (uint32_t)n), "+OK\r\n");
	cr_assert_eq(migt_state(migt_new_kv).import_index, 50);
	cr_assert_str_eq(migt_end(migt_new_kv, 50, (uint32_t)n),
			 "-ERR import end of snapshot 50 refused: no snapshot "
			 "is open (the import index is 50)\r\n");
	assert_same_contents(migt_old_kv, migt_new_kv);
	migt_free_chunks(chunks, n);
}
