/*
 * The migration's messages (src/server/migration_wire.c); its flags are
 * in test_config.c.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "server.h"

static struct migration_msg round_trip(const struct migration_msg *m,
				       struct baton_buf *b)
{
	baton_buf_init(b);
	cr_assert_eq(migration_msg_encode(m, b), 0);
	struct migration_msg out;
	cr_assert_eq(migration_msg_decode(b->data, b->len, &out), 0);
	return out;
}

Test(migration_wire, every_type_round_trips)
{
	static const uint8_t data[] = "old";
	for (uint8_t t = 1; t <= MIG_MSG_TYPE_MAX; t++) {
		struct migration_msg m = {
			.type = t,
			.session = 0x1122334455667788ull,
			.applied = 42,
			.index = 41,
			.value = 7,
			.data = data,
			.len = 3,
		};
		struct baton_buf b;
		struct migration_msg out = round_trip(&m, &b);
		cr_assert_eq(out.type, t);
		cr_assert_eq(out.session, m.session);
		cr_assert_eq(out.applied, 42);
		cr_assert_eq(out.index, 41);
		cr_assert_eq(out.value, 7);
		cr_assert_eq(out.len, 3);
		cr_assert(memcmp(out.data, "old", 3) == 0);
		cr_assert_str_neq(migration_msg_name(t), "UNKNOWN");
		baton_buf_free(&b);
	}
	cr_assert_str_eq(migration_msg_name(0), "UNKNOWN");
	cr_assert_str_eq(migration_msg_name(MIG_MSG_TYPE_MAX + 1), "UNKNOWN");
}

Test(migration_wire, every_truncation_and_bad_field_is_refused)
{
	static const uint8_t data[] = "payload";
	struct migration_msg m = {
		.type = MIG_ENTRY, .index = 9, .data = data, .len = 7};
	struct baton_buf b;
	round_trip(&m, &b);
	struct migration_msg out;
	for (size_t cut = 0; cut < b.len; cut++)
		cr_assert_eq(migration_msg_decode(b.data, cut, &out),
			     BATON_ECORRUPT, "cut at %zu", cut);
	/* A byte more than the length says. */
	uint8_t longer[128];
	memcpy(longer, b.data, b.len);
	longer[b.len] = 0;
	cr_assert_eq(migration_msg_decode(longer, b.len + 1, &out),
		     BATON_ECORRUPT);
	/* Unknown types. */
	longer[0] = 0;
	cr_assert_eq(migration_msg_decode(longer, b.len, &out), BATON_ECORRUPT);
	longer[0] = MIG_MSG_TYPE_MAX + 1;
	cr_assert_eq(migration_msg_decode(longer, b.len, &out), BATON_ECORRUPT);
	baton_buf_free(&b);
	/* A cluster id must be 1 to 255 bytes. */
	struct migration_msg req = {.type = MIG_EXPORT_REQ};
	baton_buf_init(&b);
	cr_assert_eq(migration_msg_encode(&req, &b), 0);
	cr_assert_eq(migration_msg_decode(b.data, b.len, &out), BATON_ECORRUPT);
	baton_buf_free(&b);
}
