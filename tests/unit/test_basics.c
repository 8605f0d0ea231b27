/* Errors, configuration encoding and the in-memory log. */
#include <criterion/criterion.h>
#include <string.h>

#include "core.h"

Test(errors, names_and_texts)
{
	cr_assert_str_eq(baton_err_name(BATON_ENOTLEADER), "BATON_ENOTLEADER");
	cr_assert_str_eq(baton_strerror(BATON_ENOTLEADER),
			 "this node is not the leader");
	cr_assert_str_eq(baton_strerror(0), "success");
	cr_assert_str_eq(baton_strerror(-1), "unknown error");
	cr_assert_lt(BATON_ENOMEM, -30000, "errors stay clear of errno");
}

Test(release, compare)
{
	struct baton_release a = {1, 2, 3}, b = {1, 10, 0};
	cr_assert_lt(baton_release_compare(a, b), 0);
	cr_assert_gt(baton_release_compare(b, a), 0);
	cr_assert_eq(baton_release_compare(a, a), 0);
}

static struct baton_config three(void)
{
	struct baton_config c = {0};
	for (uint32_t i = 0; i < 3; i++) {
		c.members[i].id = 10 + i;
		c.members[i].role = i == 2 ? BATON_LEARNER : BATON_VOTER;
	}
	c.n = 3;
	return c;
}

Test(config, round_trip)
{
	struct baton_config c = three(), d;
	uint8_t buf[256];
	size_t len;
	cr_assert_eq(baton_config_encode(&c, buf, sizeof buf, &len), 0);
	cr_assert_eq(len, baton_config_encoded_len(&c));
	cr_assert_eq(baton_config_decode(buf, len, &d), 0);
	cr_assert_eq(d.n, 3);
	cr_assert_eq(d.members[2].id, 12);
	cr_assert_eq(d.members[2].role, BATON_LEARNER);
	cr_assert_not_null(baton_config_find(&d, 11));
	cr_assert_null(baton_config_find(&d, 99));
	cr_assert_eq(baton_config_encode(&c, buf, 5, &len), BATON_ETOOBIG);
}

Test(config, rejects_bad_input)
{
	struct baton_config c = three(), d;
	uint8_t buf[256], bad[256];
	size_t len;
	cr_assert_eq(baton_config_encode(&c, buf, sizeof buf, &len), 0);
	/* Every truncation is refused, never read past. */
	for (size_t n = 0; n < len; n++)
		cr_assert_eq(baton_config_decode(buf, n, &d), BATON_ECORRUPT);
	memcpy(bad, buf, len);
	bad[0] = 2; /* a future format */
	cr_assert_eq(baton_config_decode(bad, len, &d), BATON_EVERSION);
	memcpy(bad, buf, len);
	bad[2 + 8] = 7; /* bad role */
	cr_assert_eq(baton_config_decode(bad, len, &d), BATON_ECORRUPT);
	memcpy(bad, buf, len);
	memset(bad + 2, 0, 8); /* id 0 */
	cr_assert_eq(baton_config_decode(bad, len, &d), BATON_ECORRUPT);
	memcpy(bad, buf, len);
	memcpy(bad + 2 + 9, bad + 2, 8); /* duplicate id */
	cr_assert_eq(baton_config_decode(bad, len, &d), BATON_ECORRUPT);
}

Test(log, append_truncate_compact)
{
	struct baton__log l;
	baton__log_init(&l);
	for (uint32_t i = 0; i < 1000; i++) {
		char b[16];
		int n = snprintf(b, sizeof b, "e%u", i + 1);
		cr_assert_eq(baton__log_append(&l, 1 + i / 100,
					       BATON_ENTRY_COMMAND, b,
					       (uint32_t)n),
			     0);
		if (i % 300 == 299) /* compaction interleaved with growth */
			baton__log_compact(&l, i - 50);
	}
	cr_assert_eq(baton__log_last_index(&l), 1000);
	cr_assert_eq(baton__log_last_term(&l), 10);
	cr_assert_eq(l.base, 849);
	cr_assert_null(baton__log_get(&l, 849));
	struct baton_entry *e = baton__log_get(&l, 900);
	cr_assert_not_null(e);
	cr_assert_eq(e->index, 900);
	cr_assert(memcmp(e->buf, "e900", 4) == 0);
	baton_term t;
	cr_assert(baton__log_term(&l, 849, &t), "the base term is kept");
	cr_assert_eq(t, 9);
	baton__log_truncate(&l, 951);
	cr_assert_eq(baton__log_last_index(&l), 950);
	cr_assert(!baton__log_term(&l, 951, &t));
	baton__log_reset(&l, 2000, 20);
	cr_assert_eq(baton__log_last_index(&l), 2000);
	cr_assert_eq(baton__log_last_term(&l), 20);
	cr_assert_eq(baton__log_append(&l, 21, BATON_ENTRY_NOOP, NULL, 0), 0);
	cr_assert_eq(baton__log_get(&l, 2001)->term, 21);
	baton__log_free(&l);
}
