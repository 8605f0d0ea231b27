/*
 * The backup file (src/util/backup_file.c, docs/backup.md): a file written
 * as batonctl writes it reads back with its header; every damage a disk
 * or a copy can do (a flipped bit anywhere, a cut at any length, a foreign
 * file, a newer format, bytes appended) is refused with its name.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backup_file.h"
#include "checksum.h"
#include "le.h"

static const uint8_t payload[] = "BKVS\x03\0\0\0 not a real map, opaque here";

/* A file as batonctl writes it: header, payload, checksum. */
static size_t make(uint8_t *out, const struct backup_header *h)
{
	backup_header_encode(h, out);
	memcpy(out + BACKUP_HEADER_BYTES, payload, h->payload_len);
	uint64_t sum = backup_file_checksum(
		out, baton__checksum(payload, h->payload_len));
	baton_le_put_u64(out + BACKUP_HEADER_BYTES + h->payload_len, sum);
	return BACKUP_HEADER_BYTES + h->payload_len + BACKUP_TRAILER_BYTES;
}

static struct backup_header sample(void)
{
	struct backup_header h = {
		.format = BACKUP_FORMAT,
		.index = 123456,
		.term = 7,
		.machine_version = 3,
		.release = "2.0.0",
		.created_ms = 1790000000123ull,
		.has_uuid = true,
		.cluster_id = "baton-prod",
		.payload_len = sizeof payload - 1,
	};
	for (unsigned i = 0; i < BACKUP_UUID_BYTES; i++)
		h.uuid[i] = (uint8_t)(i * 17 + 1);
	return h;
}

static uint8_t file[BACKUP_HEADER_BYTES + 256];

static int check(size_t len, char *why, size_t cap)
{
	struct backup_header h;
	const uint8_t *p;
	return backup_file_check(file, len, &h, &p, why, cap);
}

Test(backup_file, round_trip_keeps_every_header_field)
{
	struct backup_header in = sample(), out;
	size_t len = make(file, &in);
	const uint8_t *p = NULL;
	char why[256] = "";
	cr_assert_eq(backup_file_check(file, len, &out, &p, why, sizeof why), 0,
		     "%s", why);
	cr_assert_eq(out.format, in.format);
	cr_assert_eq(out.index, in.index);
	cr_assert_eq(out.term, in.term);
	cr_assert_eq(out.machine_version, in.machine_version);
	cr_assert_str_eq(out.release, in.release);
	cr_assert_eq(out.created_ms, in.created_ms);
	cr_assert(out.has_uuid);
	cr_assert_arr_eq(out.uuid, in.uuid, BACKUP_UUID_BYTES);
	cr_assert_str_eq(out.cluster_id, in.cluster_id);
	cr_assert_eq(out.payload_len, in.payload_len);
	cr_assert_arr_eq(p, payload, in.payload_len);
	char uuid[37];
	backup_uuid_format(in.uuid, uuid);
	cr_assert_str_eq(uuid, "01122334-4556-6778-899a-abbccddeef00");
}

Test(backup_file, every_flipped_bit_is_refused)
{
	struct backup_header h = sample();
	size_t len = make(file, &h);
	for (size_t i = 0; i < len; i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			file[i] ^= (uint8_t)(1u << bit);
			char why[256] = "";
			cr_assert_neq(check(len, why, sizeof why), 0,
				      "byte %zu bit %u passed", i, bit);
			cr_assert(why[0] != '\0');
			file[i] ^= (uint8_t)(1u << bit);
		}
	}
	char why[256];
	cr_assert_eq(check(len, why, sizeof why), 0);
}

Test(backup_file, every_cut_is_refused_as_truncated)
{
	struct backup_header h = sample();
	size_t len = make(file, &h);
	for (size_t cut = 8; cut < len; cut++) {
		char why[256] = "";
		cr_assert_neq(check(cut, why, sizeof why), 0, "cut %zu", cut);
		cr_assert(strstr(why, "truncated") != NULL, "cut %zu: %s", cut,
			  why);
	}
}

Test(backup_file, foreign_newer_and_extended_files_are_named)
{
	struct backup_header h = sample();
	size_t len = make(file, &h);
	char why[256];
	file[len] = 0;
	cr_assert_neq(check(len + 1, why, sizeof why), 0);
	cr_assert(strstr(why, "wrong length") != NULL, "%s", why);

	memcpy(file, "REDIS001", 8);
	cr_assert_neq(check(len, why, sizeof why), 0);
	cr_assert(strstr(why, "not a baton backup file") != NULL, "%s", why);
	cr_assert_neq(check(3, why, sizeof why), 0);

	h.format = BACKUP_FORMAT + 1;
	len = make(file, &h);
	cr_assert_neq(check(len, why, sizeof why), 0);
	cr_assert(strstr(why, "unknown to this release") != NULL, "%s", why);
}

Test(backup_file, load_reads_a_file_and_names_a_missing_one)
{
	struct backup_header h = sample(), out;
	size_t len = make(file, &h);
	char path[] = "/tmp/baton-backup-test-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, file, len), (ssize_t)len);
	close(fd);
	uint8_t *buf = NULL;
	size_t got = 0;
	const uint8_t *p;
	char why[512] = "";
	cr_assert_eq(
		backup_file_load(path, &buf, &got, &out, &p, why, sizeof why),
		0, "%s", why);
	cr_assert_eq(got, len);
	cr_assert_eq(out.index, h.index);
	free(buf);
	unlink(path);
	cr_assert_neq(
		backup_file_load(path, &buf, &got, &out, &p, why, sizeof why),
		0);
	cr_assert(strstr(why, path) != NULL, "%s", why);
	cr_assert(buf == NULL);
}
