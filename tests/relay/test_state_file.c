/*
 * The relay's state file (src/relay/state_file.c): the bytes of format 1
 * (a golden copy inline), round trips through a real directory, and every
 * refusal: a foreign file, a damaged one, a newer format, a bad flag. A
 * refused file is never rewritten.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/errors.h"
#include "checksum.h"
#include "le.h"
#include "state_file.h"

static char dir[64];

static void make_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/relay-state-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, RELAY_STATE_FILE);
	unlink(path);
	rmdir(dir);
}

static void write_file(const uint8_t *b, size_t n)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, RELAY_STATE_FILE);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(b, 1, n, f), n);
	fclose(f);
}

Test(relay_state, format_1_bytes)
{
	struct relay_state s = {.view_number = 0x0102030405060708u,
				.active = true};
	uint8_t b[RELAY_STATE_LEN];
	relay_state_encode(&s, b);
	const uint8_t head[28] = {'B', 'T', 'N', 'R', 'E', 'L', 'A', 'Y', 1, 0,
				  0,   0,   36,	 0,   0,   0,	8,   7,	  6, 5,
				  4,   3,   2,	 1,   1,   0,	0,   0};
	cr_assert_eq(memcmp(b, head, sizeof(head)), 0);
	struct relay_state out;
	char err[256];
	cr_assert_eq(
		relay_state_decode(b, sizeof(b), "f", &out, err, sizeof(err)),
		0, "%s", err);
	cr_assert_eq(out.view_number, s.view_number);
	cr_assert(out.active);
}

Test(relay_state, store_then_load, .init = make_dir, .fini = remove_dir)
{
	struct relay_state s = {0};
	bool found = true;
	char err[256];
	cr_assert_eq(relay_state_load(dir, &s, &found, err, sizeof(err)), 0);
	cr_assert(!found);
	cr_assert_eq(s.view_number, 0);
	for (uint64_t v = 1; v <= 3; v++) {
		struct relay_state w = {.view_number = v, .active = v == 2};
		cr_assert_eq(relay_state_store(dir, &w, err, sizeof(err)), 0,
			     "%s", err);
		cr_assert_eq(
			relay_state_load(dir, &s, &found, err, sizeof(err)), 0,
			"%s", err);
		cr_assert(found);
		cr_assert_eq(s.view_number, v);
		cr_assert_eq(s.active, v == 2);
	}
}

static void refused(const uint8_t *b, size_t n, int code, const char *needle)
{
	write_file(b, n);
	struct relay_state s;
	bool found = false;
	char err[256] = "";
	cr_assert_eq(relay_state_load(dir, &s, &found, err, sizeof(err)), code,
		     "%s", err);
	cr_assert_not_null(strstr(err, needle), "%s", err);
}

Test(relay_state, refusals, .init = make_dir, .fini = remove_dir)
{
	uint8_t good[RELAY_STATE_LEN];
	struct relay_state s = {.view_number = 9};
	relay_state_encode(&s, good);
	uint8_t b[RELAY_STATE_LEN];

	refused((const uint8_t *)"", 0, BATON_ECORRUPT, "not a baton relay");
	refused((const uint8_t *)"BATONMET\1\0\0\0", 12, BATON_ECORRUPT,
		"not a baton relay state file");
	memcpy(b, good, sizeof(b));
	b[17] ^= 1; /* a view number bit: the checksum no longer matches */
	refused(b, sizeof(b), BATON_ECORRUPT, "checksum");
	refused(good, sizeof(good) - 1, BATON_ECORRUPT, "truncated");
	memcpy(b, good, sizeof(b));
	b[8] = 2; /* format 2: newer than this release reads */
	refused(b, sizeof(b), BATON_EVERSION, "newer");

	/* active is 0 or 1: a 2 under a valid checksum is refused too. */
	memcpy(b, good, sizeof(b));
	b[24] = 2;
	baton_le_put_u64(b + 28, baton__checksum(b, 28));
	refused(b, sizeof(b), BATON_ECORRUPT, "active is 2");
}
