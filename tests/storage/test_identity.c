/*
 * The identity file (src/storage/identity.c): a directory records whose it
 * is at its first open, refuses another node id or cluster name without
 * touching anything, keeps the cluster UUID once told, refuses damage and
 * newer formats, adopts a directory written before the file existed, and
 * reads the golden file of format 1 back exactly.
 *
 * golden/identity-v1/identity was written once, by hand, with
 *   BATON_WRITE_GOLDEN=<dir> build/storage_tests --filter
 *   identity/golden_v1_reads_back_exactly
 * and is never regenerated.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "store_util.h"

static struct baton_identity identity(baton_node_id id, const char *cluster)
{
	struct baton_identity i;
	memset(&i, 0, sizeof i);
	i.node_id = id;
	snprintf(i.cluster_name, sizeof i.cluster_name, "%s", cluster);
	return i;
}

static int open_as(const char *dir, const struct baton_identity *want,
		   struct baton_storage **out, char *err, size_t errlen)
{
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = dir;
	o.identity = want;
	return baton_fs_storage_open(&o, out, err, errlen);
}

static struct baton_storage *open_ok(const char *dir,
				     const struct baton_identity *want)
{
	struct baton_storage *s = NULL;
	char err[1024] = "";
	int rv = open_as(dir, want, &s, err, sizeof err);
	cr_assert_eq(rv, 0, "open %s: %s", dir, err);
	return s;
}

static size_t read_file(const char *dir, const char *name, uint8_t *b,
			size_t cap)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return 0;
	size_t n = fread(b, 1, cap, f);
	fclose(f);
	return n;
}

static void write_file(const char *dir, const char *name, const uint8_t *b,
		       size_t n)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(b, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static const uint8_t uuid_a[BATON_CLUSTER_UUID_LEN] = {
	0x1b, 0x4e, 0x28, 0xba, 0x2f, 0xa1, 0x41, 0xd2,
	0x88, 0x3f, 0x00, 0x10, 0x5a, 0xcc, 0xde, 0x0f};

Test(identity, first_open_records_it_and_reopens)
{
	char dir[256];
	tmpdir_make(dir, sizeof dir);
	struct baton_identity want = identity(11, "baton");
	struct baton_storage *s = open_ok(dir, &want);
	struct baton_identity have;
	baton_fs_storage_identity(s, &have);
	cr_assert_eq(have.node_id, 11);
	cr_assert_str_eq(have.cluster_name, "baton");
	cr_assert_not(have.has_uuid);
	s->ops->close(s);
	uint8_t b[256];
	size_t n = read_file(dir, "identity", b, sizeof b);
	cr_assert_eq(n, IDENTITY_FIXED_LEN + 8 + 8, "a 5-byte name pads to 8");
	cr_assert_eq(memcmp(b, IDENTITY_MAGIC, 8), 0);
	s = open_ok(dir, &want);
	s->ops->close(s);
	tmpdir_remove(dir);
}

/* Refused, the message naming what was found and what was given, and the
 * directory byte for byte as before. */
static void check_refused(const struct baton_identity *given,
			  const char *expect)
{
	char dir[256];
	tmpdir_make(dir, sizeof dir);
	struct baton_identity owner = identity(11, "baton");
	struct baton_storage *s = open_ok(dir, &owner);
	cr_assert_eq(store_hard_state(s, 4, 11), 0);
	s->ops->close(s);
	uint8_t before[256], after[256], meta_before[64], meta_after[64];
	size_t n = read_file(dir, "identity", before, sizeof before);
	size_t m = read_file(dir, "meta", meta_before, sizeof meta_before);
	char err[1024] = "";
	s = NULL;
	int rv = open_as(dir, given, &s, err, sizeof err);
	cr_assert_eq(rv, BATON_ESTATE, "%s", err);
	cr_assert_null(s);
	cr_assert(strstr(err, expect) != NULL, "message: %s", err);
	cr_assert(strstr(err, "uuid not known yet") != NULL, "%s", err);
	cr_assert_eq(read_file(dir, "identity", after, sizeof after), n);
	cr_assert_arr_eq(before, after, n);
	cr_assert_eq(read_file(dir, "meta", meta_after, sizeof meta_after), m);
	cr_assert_arr_eq(meta_before, meta_after, m);
	tmpdir_remove(dir);
}

Test(identity, another_node_id_is_refused)
{
	struct baton_identity given = identity(12, "baton");
	check_refused(&given,
		      "belongs to node 11 of cluster 'baton' (uuid not known "
		      "yet), not node 12: ");
}

Test(identity, another_cluster_name_is_refused)
{
	struct baton_identity given = identity(11, "other");
	check_refused(&given, "belongs to node 11 of cluster 'baton' (uuid "
			      "not known yet), not to cluster 'other': ");
}

Test(identity, both_differing_are_named)
{
	struct baton_identity given = identity(12, "other");
	check_refused(&given, "not node 12 of cluster 'other'");
}

Test(identity, cluster_uuid_is_kept_once_known)
{
	char dir[256];
	tmpdir_make(dir, sizeof dir);
	struct baton_identity want = identity(3, "baton");
	struct baton_storage *s = open_ok(dir, &want);
	char err[512] = "";
	cr_assert_eq(
		baton_fs_storage_set_cluster_uuid(s, uuid_a, err, sizeof err),
		0, "%s", err);
	cr_assert_eq(
		baton_fs_storage_set_cluster_uuid(s, uuid_a, err, sizeof err),
		0, "the same one again is no change");
	uint8_t other[BATON_CLUSTER_UUID_LEN];
	memcpy(other, uuid_a, sizeof other);
	other[15] ^= 1;
	cr_assert_eq(
		baton_fs_storage_set_cluster_uuid(s, other, err, sizeof err),
		BATON_ESTATE);
	cr_assert(strstr(err, "records cluster uuid "
			      "1b4e28ba-2fa1-41d2-883f-00105accde0f, not "
			      "1b4e28ba-2fa1-41d2-883f-00105accde0e") != NULL,
		  "%s", err);
	s->ops->close(s);
	s = open_ok(dir, &want);
	struct baton_identity have;
	baton_fs_storage_identity(s, &have);
	cr_assert(have.has_uuid);
	cr_assert_arr_eq(have.cluster_uuid, uuid_a, sizeof uuid_a);
	s->ops->close(s);
	struct baton_identity given = identity(4, "baton");
	cr_assert_eq(open_as(dir, &given, &s, err, sizeof err), BATON_ESTATE);
	cr_assert(strstr(err, "(uuid 1b4e28ba-2fa1-41d2-883f-00105accde0f)") !=
			  NULL,
		  "%s", err);
	tmpdir_remove(dir);
}

Test(identity, damage_and_newer_formats_are_refused)
{
	char dir[256];
	tmpdir_make(dir, sizeof dir);
	struct baton_identity want = identity(5, "baton");
	struct baton_storage *s = open_ok(dir, &want);
	s->ops->close(s);
	uint8_t good[256], b[256];
	size_t n = read_file(dir, "identity", good, sizeof good);
	char err[512];
	/* A flipped byte of the node id. */
	memcpy(b, good, n);
	b[17] ^= 0x40;
	write_file(dir, "identity", b, n);
	cr_assert_eq(open_as(dir, &want, &s, err, sizeof err), BATON_ECORRUPT);
	cr_assert(strstr(err, "identity file header checksum mismatch") != NULL,
		  "%s", err);
	/* Format 2, checksum fixed: a newer release's file. */
	memcpy(b, good, n);
	baton_le_put_u32(b + 8, 2);
	baton_le_put_u64(b + n - 8, baton__checksum(b, n - 8));
	write_file(dir, "identity", b, n);
	cr_assert_eq(open_as(dir, &want, &s, err, sizeof err), BATON_EVERSION);
	cr_assert(strstr(err, "format version 2 is newer than this release "
			      "reads (1)") != NULL,
		  "%s", err);
	/* Cut short. */
	write_file(dir, "identity", good, 30);
	cr_assert_eq(open_as(dir, &want, &s, err, sizeof err), BATON_ECORRUPT);
	/* A name length beyond the header, checksum fixed. */
	memcpy(b, good, n);
	baton_le_put_u32(b + 40, 100);
	baton_le_put_u64(b + n - 8, baton__checksum(b, n - 8));
	write_file(dir, "identity", b, n);
	cr_assert_eq(open_as(dir, &want, &s, err, sizeof err), BATON_ECORRUPT);
	cr_assert(strstr(err, "cluster name length 100") != NULL, "%s", err);
	tmpdir_remove(dir);
}

/* A directory a release before the identity file wrote: its state stays,
 * and the node that opens it records itself. */
Test(identity, directory_without_the_file_is_adopted)
{
	char dir[256], cmd[1024];
	tmpdir_make(dir, sizeof dir);
	snprintf(cmd, sizeof cmd, "cp %s/v2/* '%s'/", BATON_GOLDEN_DIR, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	struct baton_identity want = identity(2, "baton");
	struct baton_storage *s = open_ok(dir, &want);
	struct baton_durable_state d;
	cr_assert_eq(s->ops->load(s, &d), 0);
	cr_assert_eq(d.term, 3);
	cr_assert(d.has_snapshot);
	baton_durable_state_free(&d);
	s->ops->close(s);
	struct baton_identity given = identity(3, "baton");
	char err[512];
	cr_assert_eq(open_as(dir, &given, &s, err, sizeof err), BATON_ESTATE);
	tmpdir_remove(dir);
}

Test(identity, without_identity_option_nothing_is_recorded)
{
	char dir[256];
	tmpdir_make(dir, sizeof dir);
	struct baton_storage *s = store_open(dir, 0, NULL);
	uint8_t b[16];
	cr_assert_eq(read_file(dir, "identity", b, sizeof b), 0);
	char err[256];
	cr_assert_eq(
		baton_fs_storage_set_cluster_uuid(s, uuid_a, err, sizeof err),
		BATON_EINVAL);
	s->ops->close(s);
	tmpdir_remove(dir);
}

/* Node 7 of cluster 'golden-cluster', UUID uuid_a. */
Test(identity, golden_v1_reads_back_exactly)
{
	const char *write_to = getenv("BATON_WRITE_GOLDEN");
	struct baton_identity want = identity(7, "golden-cluster");
	char dir[512];
	if (write_to != NULL) {
		snprintf(dir, sizeof dir, "%s", write_to);
		struct baton_storage *s = open_ok(dir, &want);
		char err[256];
		cr_assert_eq(baton_fs_storage_set_cluster_uuid(s, uuid_a, err,
							       sizeof err),
			     0, "%s", err);
		s->ops->close(s);
		return;
	}
	char cmd[1024];
	tmpdir_make(dir, sizeof dir);
	snprintf(cmd, sizeof cmd, "cp %s/identity-v1/identity '%s'/",
		 BATON_GOLDEN_DIR, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	struct baton_storage *s = open_ok(dir, &want);
	struct baton_identity have;
	baton_fs_storage_identity(s, &have);
	cr_assert_eq(have.node_id, 7);
	cr_assert_str_eq(have.cluster_name, "golden-cluster");
	cr_assert(have.has_uuid);
	cr_assert_arr_eq(have.cluster_uuid, uuid_a, sizeof uuid_a);
	char text[BATON_CLUSTER_UUID_STR_MAX];
	cr_assert_str_eq(baton_cluster_uuid_format(have.cluster_uuid, text),
			 "1b4e28ba-2fa1-41d2-883f-00105accde0f");
	s->ops->close(s);
	tmpdir_remove(dir);
}
