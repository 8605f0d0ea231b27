/*
 * The burn-in hold in a snapshot's header (docs/storage.md): a flag at
 * offset 50, in what was a pad (always 0) after the release floor. A
 * snapshot of a held state is the same snapshot but for that flag and the
 * header's checksum, in the same format, so a release before the hold
 * reads it (as the same state, not held). The golden directories of
 * test_golden.c, written before the hold, read back as not held there.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "le.h"
#include "store_util.h"

#define HOLD_SEGMENT_BYTES 8192u
#define HOLD_FLAG_OFFSET 50u

/* One voter, its row in the version table, a floor and machine version 1. */
static void header(struct baton_snapshot_header *h, bool held)
{
	memset(h, 0, sizeof *h);
	h->meta.index = 10;
	h->meta.term = 2;
	h->meta.config_index = 1;
	h->meta.config.n = 1;
	h->meta.config.members[0] = (struct baton_member){1, BATON_VOTER};
	struct baton_version_state *v = &h->meta.versions;
	v->machine.value = 1;
	v->floor = (struct baton_release){1, 0, 0};
	v->n = 1;
	v->members[0].id = 1;
	v->members[0].profile.release = (struct baton_release){1, 0, 0};
	v->members[0].profile.proto_min.value = 1;
	v->members[0].profile.proto_max.value = 1;
	v->members[0].profile.machine_max.value = 1;
	h->meta.versions_index = 7;
	v->held = held;
}

static void write_snapshot(const char *dir, bool held)
{
	struct baton_storage *s = store_open(dir, HOLD_SEGMENT_BYTES, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	baton_durable_state_free(&d);
	struct baton_snapshot_header h;
	header(&h, held);
	uint8_t data[100];
	payload_fill(data, sizeof data, 10, 2);
	struct baton_snapshot_sink *k;
	cr_assert_eq(s->ops->snapshot_begin(s, &h, &k), 0);
	cr_assert_eq(s->ops->snapshot_write(k, data, sizeof data), 0);
	cr_assert_eq(s->ops->snapshot_commit(k), 0);
	s->ops->close(s);
}

static bool read_held(const char *dir)
{
	struct baton_storage *s = store_open(dir, HOLD_SEGMENT_BYTES, NULL);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert(d.has_snapshot);
	bool held = d.snapshot.meta.versions.held;
	cr_assert_eq(d.snapshot.meta.versions.machine.value, 1);
	baton_durable_state_free(&d);
	s->ops->close(s);
	return held;
}

static size_t read_file(const char *dir, uint8_t *b, size_t cap)
{
	char path[512];
	snprintf(path, sizeof path, "%s/snapshot", dir);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	size_t n = fread(b, 1, cap, f);
	cr_assert(n > 0 && n < cap, "%s: %zu bytes", path, n);
	fclose(f);
	return n;
}

Test(snapshot_hold, the_flag_after_the_floor_reads_back_in_the_same_format)
{
	char plain[256], held[256];
	tmpdir_make(plain, sizeof plain);
	tmpdir_make(held, sizeof held);
	write_snapshot(plain, false);
	write_snapshot(held, true);
	cr_assert_not(read_held(plain));
	cr_assert(read_held(held));
	static uint8_t a[4096], b[4096];
	size_t na = read_file(plain, a, sizeof a);
	size_t nb = read_file(held, b, sizeof b);
	cr_assert_eq(na, nb);
	cr_assert_eq(baton_le_get_u32(b + 8), SNAP_FORMAT_NO_DOWNGRADE,
		     "no new format: old releases read it");
	uint32_t hlen = baton_le_get_u32(a + 12);
	for (size_t i = 0; i < na; i++) {
		bool checksum = i >= hlen - 8 && i < hlen;
		if (i == HOLD_FLAG_OFFSET)
			cr_assert(a[i] == 0 && b[i] == SNAP_FLAG_HELD);
		else if (!checksum)
			cr_assert_eq(a[i], b[i], "byte %zu differs", i);
	}
	tmpdir_remove(plain);
	tmpdir_remove(held);
}
