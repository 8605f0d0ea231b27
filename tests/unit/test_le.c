/* The one little-endian codec (src/util/le.h): byte order, widths, and the
 * bounds-checked reader refusing to run past the end. */
#include <criterion/criterion.h>

#include "le.h"

Test(le, byte_order_of_each_width)
{
	uint8_t b[8];
	baton_le_put_u16(b, 0x0102);
	cr_assert(b[0] == 0x02 && b[1] == 0x01);
	baton_le_put_u32(b, 0x01020304u);
	static const uint8_t w32[4] = {4, 3, 2, 1};
	cr_assert_arr_eq(b, w32, 4);
	baton_le_put_u64(b, 0x0102030405060708u);
	static const uint8_t w64[8] = {8, 7, 6, 5, 4, 3, 2, 1};
	cr_assert_arr_eq(b, w64, 8);
	cr_assert_eq(baton_le_get_u64(b), 0x0102030405060708u);
	cr_assert_eq(baton_le_get_u32(b), 0x05060708u);
	cr_assert_eq(baton_le_get_u16(b), 0x0708u);
}

Test(le, extremes_round_trip)
{
	uint8_t b[8];
	const uint64_t v64[] = {0, 1, 0x80, 0xff00ff00ff00ff00u, UINT64_MAX};
	for (size_t i = 0; i < sizeof v64 / sizeof v64[0]; i++) {
		baton_le_put_u64(b, v64[i]);
		cr_assert_eq(baton_le_get_u64(b), v64[i]);
		baton_le_put_u32(b, (uint32_t)v64[i]);
		cr_assert_eq(baton_le_get_u32(b), (uint32_t)v64[i]);
		baton_le_put_u16(b, (uint16_t)v64[i]);
		cr_assert_eq(baton_le_get_u16(b), (uint16_t)v64[i]);
	}
}

Test(le, reader_stops_at_the_end)
{
	const uint8_t buf[] = {1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9};
	struct baton_le_reader r = baton_le_reader(buf, sizeof buf);
	uint16_t a;
	uint32_t b;
	uint64_t c;
	const uint8_t *p;
	cr_assert(baton_le_read_u16(&r, &a) && a == 1);
	cr_assert(baton_le_read_u32(&r, &b) && b == 2);
	cr_assert(baton_le_read_u64(&r, &c) && c == 3);
	cr_assert_eq(baton_le_left(&r), 1);
	/* Too little left: false, and nothing consumed. */
	cr_assert_not(baton_le_read_u16(&r, &a));
	cr_assert_not(baton_le_read_u32(&r, &b));
	cr_assert_not(baton_le_read_u64(&r, &c));
	cr_assert_not(baton_le_read_bytes(&r, 2, &p));
	cr_assert_eq(baton_le_left(&r), 1);
	cr_assert(baton_le_read_bytes(&r, 1, &p) && *p == 9);
	cr_assert_eq(baton_le_left(&r), 0);
	cr_assert(baton_le_read_bytes(&r, 0, &p), "an empty read fits");
}
