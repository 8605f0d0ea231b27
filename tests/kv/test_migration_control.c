/*
 * The operator's and the migration's decisions in the map (docs/kv.md
 * "Migration", kind 10 CONTROL): abort and resume, unfence, and the seal
 * that forbids an unfence once the other cluster took authority; and the
 * source cluster's UUID pinned by the first IMPORT_BEGIN. Every refusal
 * is a no-op with an -ERR; the state survives a snapshot. The suite is
 * declared in test_migration.c.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"
#include "migration_util.h"

static const struct baton_machine_version V2 = {2}, V3 = {3};

static const char *control(struct baton_kv *k, struct baton_machine_version v,
			   enum kv_control_op op)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_control(T0, op, &migt_payload), 0);
	return migt_apply(k, v, &migt_payload, 0);
}

static const char *fence_for(struct baton_kv *k, const char *target)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_fence(T0, target, &migt_payload), 0);
	return migt_apply(k, V2, &migt_payload, 0);
}

/* The state of k after a snapshot and a restore into a new map. */
static struct kv_migration through_snapshot(struct baton_kv *k)
{
	struct baton_buf snap;
	baton_buf_init(&snap);
	migt_snap(k, &snap);
	struct baton_kv *r = kvt_new();
	cr_assert_eq(kv_restore(r, V3, snap.data, snap.len), 0, "%s",
		     kv_errmsg(r));
	struct kv_migration m = migt_state(r);
	baton_buf_free(&snap);
	return m;
}

Test(migration, unfence_lifts_a_fence_that_no_authority_followed)
{
	migt_run(migt_old_kv, T0, "SET a 1");
	cr_assert_str_eq(fence_for(migt_old_kv, "new"), "+OK\r\n");
	cr_assert_str_eq(migt_run(migt_old_kv, T0, "SET a 2"), KV_FENCED_REPLY);
	/* Under machine version 2: an old cluster of 1.3.0 can do it. */
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_UNFENCE),
			 "+OK\r\n");
	struct kv_migration m = migt_state(migt_old_kv);
	cr_assert(!m.fenced && m.aborted && m.unfences == 1);
	cr_assert_str_eq(m.fence_target, "");
	cr_assert_str_eq(migt_run(migt_old_kv, T0, "SET a 3"), "+OK\r\n");
	cr_assert_str_eq(migt_read_cmd(migt_old_kv, "GET a"), "$1\r\n3\r\n");
	/* Aborted: no fence until a resume. */
	cr_assert_str_eq(fence_for(migt_old_kv, "new"),
			 "-ERR fence refused: the migration was aborted "
			 "(batonctl migrate abort)\r\n");
	cr_assert(!migt_state(migt_old_kv).fenced);
	struct kv_migration r = through_snapshot(migt_old_kv);
	cr_assert(!r.fenced && r.aborted && r.unfences == 1);
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_RESUME),
			 "+OK\r\n");
	cr_assert_str_eq(fence_for(migt_old_kv, "new"), "+OK\r\n");
	/* Not fenced: nothing to lift. */
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_UNFENCE),
			 "+OK\r\n");
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_UNFENCE),
			 "-ERR unfence refused: this cluster is not "
			 "fenced\r\n");
}

Test(migration, a_sealed_fence_cannot_be_lifted_or_aborted)
{
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_SEAL),
			 "-ERR seal refused: this cluster is not fenced\r\n");
	cr_assert_str_eq(fence_for(migt_old_kv, "new"), "+OK\r\n");
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_SEAL), "+OK\r\n");
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	migt_snap(migt_old_kv, &before);
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_UNFENCE),
			 "-ERR unfence refused: cluster new took write "
			 "authority after this fence; lifting it would give "
			 "two clusters write authority\r\n");
	cr_assert_str_eq(control(migt_old_kv, V2, KV_CONTROL_ABORT),
			 "-ERR abort refused: cluster new took write "
			 "authority after this cluster's fence\r\n");
	migt_snap(migt_old_kv, &after);
	migt_assert_same_bytes(&before, &after);
	struct kv_migration r = through_snapshot(migt_old_kv);
	cr_assert(r.fenced && r.sealed && !r.aborted);
	cr_assert_str_eq(migt_run(migt_old_kv, T0, "SET a 2"), KV_FENCED_REPLY);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, abort_stops_an_import_until_authority)
{
	migt_begin(migt_new_kv, 3, T0);
	cr_assert_str_eq(migt_end(migt_new_kv, 3, 0), "+OK\r\n");
	cr_assert_str_eq(control(migt_new_kv, V3, KV_CONTROL_ABORT), "+OK\r\n");
	cr_assert(migt_state(migt_new_kv).aborted);
	/* The import stops at the abort: an entry proposed before it
	 * applied changes nothing. */
	struct baton_buf old;
	baton_buf_init(&old);
	migt_encode(T0, "SET a 1", &old);
	cr_assert_str_eq(migt_entry(migt_new_kv, 4, &old),
			 "-ERR import refused: the migration was aborted "
			 "(batonctl migrate resume)\r\n");
	baton_buf_free(&old);
	cr_assert_eq(migt_state(migt_new_kv).import_index, 3);
	/* Aborted: no authority (the old cluster may have been unfenced). */
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_authority(3, &migt_payload), 0);
	cr_assert_str_eq(migt_apply(migt_new_kv, V3, &migt_payload, 0),
			 "-ERR authority refused: the migration was aborted "
			 "(batonctl migrate abort)\r\n");
	cr_assert(!migt_state(migt_new_kv).authority);
	cr_assert_str_eq(control(migt_new_kv, V3, KV_CONTROL_RESUME),
			 "+OK\r\n");
	cr_assert(!migt_state(migt_new_kv).aborted);
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_authority(3, &migt_payload), 0);
	cr_assert_str_eq(migt_apply(migt_new_kv, V3, &migt_payload, 0),
			 "+OK\r\n");
	cr_assert_str_eq(control(migt_new_kv, V3, KV_CONTROL_ABORT),
			 "-ERR abort refused: this cluster holds write "
			 "authority since old index 3\r\n");
	cr_assert(!migt_state(migt_new_kv).aborted);
}

Test(migration, the_first_begin_pins_the_source_uuid)
{
	static const uint8_t a[KV_CLUSTER_UUID_BYTES] = {1, 2, 3};
	static const uint8_t b[KV_CLUSTER_UUID_BYTES] = {9, 9, 9};
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_import_begin_from(3, T0, a, &migt_payload), 0);
	cr_assert_str_eq(migt_apply(migt_new_kv, V3, &migt_payload, 0),
			 "+OK\r\n");
	struct kv_migration m = migt_state(migt_new_kv);
	cr_assert(m.has_source_uuid);
	cr_assert(memcmp(m.source_uuid, a, sizeof a) == 0);
	/* The same source again (a new session): fine. */
	cr_assert_str_eq(migt_apply(migt_new_kv, V3, &migt_payload, 0),
			 "+OK\r\n");
	/* Another: refused, nothing changed. */
	migt_end(migt_new_kv, 3, 0);
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_import_begin_from(5, T0, b, &migt_payload), 0);
	cr_assert_str_eq(migt_apply(migt_new_kv, V3, &migt_payload, 0),
			 "-ERR import refused: it comes from another cluster "
			 "(UUID) than the one this cluster imported from "
			 "first\r\n");
	m = migt_state(migt_new_kv);
	cr_assert(!m.snapshot_open && m.import_index == 3);
	struct kv_migration r = through_snapshot(migt_new_kv);
	cr_assert(r.has_source_uuid);
	cr_assert(memcmp(r.source_uuid, a, sizeof a) == 0);
	/* A BEGIN that names none (a restore from a backup) pins nothing. */
	struct baton_kv *k = kvt_new();
	migt_begin(k, 1, T0);
	cr_assert(!migt_state(k).has_source_uuid);
}

Test(migration, malformed_controls_are_refused)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_control(T0, KV_CONTROL_ABORT, &migt_payload), 0);
	cr_assert_eq(
		kv_encode_control(T0, (enum kv_control_op)0, &migt_payload),
		BATON_EINVAL);
	cr_assert_eq(
		kv_encode_control(T0, (enum kv_control_op)5, &migt_payload),
		BATON_EINVAL);
	struct baton_buf bad;
	baton_buf_init(&bad);
	baton_buf_append(&bad, migt_payload.data, migt_payload.len);
	bad.data[bad.len - 1] = 5; /* an unknown operation */
	struct baton_buf reply;
	baton_buf_init(&reply);
	cr_assert_eq(kv_apply(migt_old_kv, V2, bad.data, bad.len, &reply),
		     BATON_ECORRUPT);
	bad.data[bad.len - 1] = 1;
	baton_buf_append(&bad, "x", 1); /* a byte more */
	cr_assert_eq(kv_apply(migt_old_kv, V2, bad.data, bad.len, &reply),
		     BATON_ECORRUPT);
	cr_assert_eq(kv_apply(migt_old_kv, V2, bad.data, bad.len - 2, &reply),
		     BATON_ECORRUPT); /* a byte less */
	cr_assert(!migt_state(migt_old_kv).aborted);
	baton_buf_free(&bad);
	baton_buf_free(&reply);
}
