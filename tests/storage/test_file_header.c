/*
 * The one file-header helper (src/storage/file_header.c): what it writes,
 * byte for byte, and every way a head can be refused. The term/vote file,
 * log segments and snapshots all go through it; their own tests and the
 * golden directories check that it reads what earlier releases wrote.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "file_header.h"
#include "format.h"

#define T_LEN 32u

static const struct baton__file_kind kind = {"BATONTST", "test file", 3u,
					     T_LEN};

/* A valid head of format `format` with one u64 field, sealed. */
static void make(uint8_t *b, uint32_t format)
{
	memset(b, 0, T_LEN);
	baton__file_header_start(b, &kind, T_LEN);
	baton_le_put_u32(b + 8, format);
	baton_le_put_u64(b + 16, 0x0102030405060708u);
	baton__file_header_seal(b, T_LEN);
}

static int check(const uint8_t *b, size_t n, struct baton__file_head *h,
		 char *err)
{
	return baton__file_header_check(&kind, b, n, "dir/f", h, err, 256);
}

Test(file_header, writes_magic_format_length_and_checksum)
{
	uint8_t b[T_LEN];
	make(b, 3);
	static const uint8_t want[16] = {'B',	'A', 'T', 'O', 'N', 'T',
					 'S',	'T', 3,	  0,   0,   0,
					 T_LEN, 0,   0,	  0};
	cr_assert_arr_eq(b, want, sizeof want);
	cr_assert_eq(baton_le_get_u64(b + T_LEN - 8), baton__checksum(b, 24));
	struct baton__file_head h;
	char err[256] = "";
	cr_assert_eq(check(b, sizeof b, &h, err), 0, "%s", err);
	cr_assert_eq(h.format, 3);
	cr_assert_eq(h.header_len, T_LEN);
}

Test(file_header, older_formats_read_newer_ones_are_refused_by_name)
{
	uint8_t b[T_LEN];
	struct baton__file_head h;
	char err[256];
	make(b, 1);
	cr_assert_eq(check(b, sizeof b, &h, err), 0, "%s", err);
	cr_assert_eq(h.format, 1);
	/* Newer: refused before the checksum is looked at, so a file of a
	 * later release is never called damaged. */
	make(b, 4);
	b[20] ^= 0xff;
	cr_assert_eq(check(b, sizeof b, &h, err), BATON_EVERSION);
	cr_assert(strstr(err, "dir/f") && strstr(err, "version 4") &&
			  strstr(err, "(3)"),
		  "%s", err);
}

Test(file_header, damage_is_corruption)
{
	uint8_t b[T_LEN];
	struct baton__file_head h;
	char err[256];
	make(b, 3);
	b[0] = 'X';
	cr_assert_eq(check(b, sizeof b, &h, err), BATON_ECORRUPT);
	cr_assert(strstr(err, "not a baton test file"), "%s", err);

	make(b, 0);
	cr_assert_eq(check(b, sizeof b, &h, err), BATON_ECORRUPT);
	cr_assert(strstr(err, "format version 0"), "%s", err);

	make(b, 3);
	b[17] ^= 1; /* a field under the checksum */
	cr_assert_eq(check(b, sizeof b, &h, err), BATON_ECORRUPT);
	cr_assert(strstr(err, "checksum mismatch"), "%s", err);

	make(b, 3);
	cr_assert_eq(check(b, T_LEN - 1, &h, err), BATON_ECORRUPT,
		     "header longer than what was read");
	cr_assert_eq(check(b, 11, &h, err), BATON_ECORRUPT, "no format");
	cr_assert_eq(check(b, 15, &h, err), BATON_ECORRUPT, "no length");

	make(b, 3);
	baton_le_put_u32(b + 12, T_LEN - 8); /* below the kind's minimum */
	cr_assert_eq(check(b, sizeof b, &h, err), BATON_ECORRUPT);
	cr_assert(strstr(err, "length"), "%s", err);
}

Test(file_header, a_longer_header_of_a_later_field_reads)
{
	/* Formats grow by appending: a header longer than the minimum, with
	 * its checksum at its own end, is valid. */
	uint8_t b[T_LEN + 16] = {0};
	baton__file_header_start(b, &kind, T_LEN + 16);
	baton__file_header_seal(b, T_LEN + 16);
	struct baton__file_head h;
	char err[256] = "";
	cr_assert_eq(check(b, sizeof b, &h, err), 0, "%s", err);
	cr_assert_eq(h.header_len, T_LEN + 16);
}
