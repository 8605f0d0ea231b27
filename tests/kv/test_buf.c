/* The growable byte buffer. */
#include <criterion/criterion.h>
#include <string.h>

#include "baton/raft.h"
#include "baton/buf.h"

Test(buf, starts_empty_and_frees_twice)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_null(b.data);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(b.cap, 0);
	baton_buf_free(&b);
	baton_buf_free(&b);
	cr_assert_null(b.data);
}

Test(buf, append_reserve_reset)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_buf_append(&b, NULL, 0), 0);
	cr_assert_eq(b.len, 0);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(baton_buf_append(&b, "abc", 3), 0);
	cr_assert_eq(b.len, 3000);
	cr_assert_geq(b.cap, 3000);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(memcmp(b.data + 3 * i, "abc", 3), 0);
	size_t cap = b.cap;
	baton_buf_reset(&b);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(b.cap, cap);
	cr_assert_eq(baton_buf_reserve(&b, 100000), 0);
	cr_assert_geq(b.cap - b.len, 100000);
	memset(b.data, 7, 100000);
	b.len = 100000;
	cr_assert_eq(baton_buf_reserve(&b, 0), 0);
	cr_assert_eq(b.data[99999], 7);
	baton_buf_free(&b);
}

Test(buf, impossible_sizes_fail_cleanly)
{
	struct baton_buf b;
	baton_buf_init(&b);
	baton_buf_append(&b, "x", 1);
	cr_assert_eq(baton_buf_reserve(&b, SIZE_MAX), BATON_ENOMEM);
	cr_assert_eq(baton_buf_reserve(&b, BATON_BUF_BYTES_MAX), BATON_ENOMEM);
	cr_assert_eq(b.len, 1);
	cr_assert_eq(b.data[0], 'x');
	baton_buf_free(&b);
}

Test(buf, printf_appends_the_whole_text_without_its_nul)
{
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(baton_buf_printf(&b, "a:%d\r\n", 42), 0);
	cr_assert_eq(baton_buf_printf(&b, "%s", ""), 0);
	cr_assert_eq(b.len, 6);
	cr_assert(memcmp(b.data, "a:42\r\n", 6) == 0);
	/* Longer than any fixed line buffer: nothing is cut. */
	char long_text[5000];
	memset(long_text, 'x', sizeof long_text - 1);
	long_text[sizeof long_text - 1] = '\0';
	cr_assert_eq(baton_buf_printf(&b, "<%s>", long_text), 0);
	cr_assert_eq(b.len, 6 + 2 + sizeof long_text - 1);
	cr_assert_eq(b.data[6], '<');
	cr_assert_eq(b.data[b.len - 1], '>');
	cr_assert_eq(b.data[b.len - 2], 'x');
	baton_buf_free(&b);
}
