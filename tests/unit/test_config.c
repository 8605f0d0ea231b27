/*
 * Membership configuration encoding (include/baton/raft.h, src/core/config.c),
 * the error table, and the argument checks of create/bootstrap.
 *
 * Encoding: u8 format version (1), u8 member count, then per member a u64
 * little-endian id and a u8 role.
 */
#include <baton/raft.h>

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#define MEMBER_LEN 9u
#define HEADER_LEN 2u

static struct baton_config sample(void)
{
	struct baton_config c;
	memset(&c, 0, sizeof c);
	c.members[0] = (struct baton_member){1, BATON_VOTER};
	c.members[1] =
		(struct baton_member){0x0102030405060708ull, BATON_VOTER};
	c.members[2] = (struct baton_member){UINT64_MAX, BATON_LEARNER};
	c.n = 3;
	return c;
}

static size_t encode(const struct baton_config *c, uint8_t *buf, size_t cap)
{
	size_t len = 0;
	cr_assert_eq(baton_config_encode(c, buf, cap, &len), 0);
	return len;
}

Test(codec, round_trip_keeps_ids_roles_and_order)
{
	struct baton_config c = sample(), d;
	uint8_t buf[256];
	size_t len = encode(&c, buf, sizeof buf);
	cr_assert_eq(len, HEADER_LEN + 3 * MEMBER_LEN);
	cr_assert_eq(len, baton_config_encoded_len(&c));
	cr_assert_eq(buf[0], 1, "format version 1");
	cr_assert_eq(buf[1], 3, "member count");
	/* Ids are little endian. */
	cr_assert_eq(buf[HEADER_LEN + MEMBER_LEN], 0x08);
	cr_assert_eq(buf[HEADER_LEN + MEMBER_LEN + 7], 0x01);

	memset(&d, 0xab, sizeof d);
	cr_assert_eq(baton_config_decode(buf, len, &d), 0);
	cr_assert_eq(d.n, c.n);
	for (uint32_t i = 0; i < c.n; i++) {
		cr_assert_eq(d.members[i].id, c.members[i].id, "member %u id",
			     i);
		cr_assert_eq(d.members[i].role, c.members[i].role,
			     "member %u role", i);
	}
	/* And once more: decode(encode(decode(x))) is stable. */
	uint8_t again[256];
	size_t len2 = encode(&d, again, sizeof again);
	cr_assert_eq(len2, len);
	cr_assert_arr_eq(again, buf, len);
}

Test(codec, round_trip_of_empty_and_full_configs)
{
	struct baton_config c, d;
	uint8_t buf[512];
	memset(&c, 0, sizeof c);
	size_t len = encode(&c, buf, sizeof buf);
	cr_assert_eq(len, HEADER_LEN);
	cr_assert_eq(baton_config_decode(buf, len, &d), 0);
	cr_assert_eq(d.n, 0);

	for (uint32_t i = 0; i < BATON_MAX_MEMBERS; i++) {
		c.members[i].id = 100 + i;
		c.members[i].role = i % 2 ? BATON_LEARNER : BATON_VOTER;
	}
	c.n = BATON_MAX_MEMBERS;
	len = encode(&c, buf, sizeof buf);
	cr_assert_eq(len, HEADER_LEN + BATON_MAX_MEMBERS * MEMBER_LEN);
	cr_assert_eq(baton_config_decode(buf, len, &d), 0);
	cr_assert_eq(d.n, BATON_MAX_MEMBERS);
	cr_assert_eq(d.members[BATON_MAX_MEMBERS - 1].id,
		     100 + BATON_MAX_MEMBERS - 1);
	cr_assert_eq(d.members[BATON_MAX_MEMBERS - 1].role, BATON_LEARNER);
}

Test(codec, encode_checks_capacity_and_member_count)
{
	struct baton_config c = sample();
	uint8_t buf[256];
	size_t len = 12345;
	cr_assert_eq(baton_config_encode(
			     &c, buf, baton_config_encoded_len(&c) - 1, &len),
		     BATON_ETOOBIG);
	cr_assert_eq(baton_config_encode(&c, buf, 0, &len), BATON_ETOOBIG);
	cr_assert_eq(baton_config_encode(&c, buf, baton_config_encoded_len(&c),
					 &len),
		     0, "an exact fit is enough");
	c.n = BATON_MAX_MEMBERS + 1;
	cr_assert_eq(baton_config_encode(&c, buf, sizeof buf, &len),
		     BATON_EINVAL);
}

Test(codec, decode_rejects_every_truncation_and_extension)
{
	struct baton_config c = sample(), d;
	uint8_t buf[256];
	size_t len = encode(&c, buf, sizeof buf);
	for (size_t n = 0; n < len; n++)
		cr_assert_eq(baton_config_decode(buf, n, &d), BATON_ECORRUPT,
			     "truncated to %zu bytes", n);
	/* Trailing garbage is as wrong as missing bytes. */
	buf[len] = 0;
	cr_assert_eq(baton_config_decode(buf, len + 1, &d), BATON_ECORRUPT);
	/* A count that claims more members than the bytes hold. */
	buf[1] = 4;
	cr_assert_eq(baton_config_decode(buf, len, &d), BATON_ECORRUPT);
}

Test(codec, decode_rejects_bad_roles)
{
	struct baton_config c = sample(), d;
	uint8_t buf[256];
	size_t len = encode(&c, buf, sizeof buf);
	const uint8_t bad_roles[] = {0, 3, 0xff};
	for (size_t k = 0; k < sizeof bad_roles; k++) {
		uint8_t copy[256];
		memcpy(copy, buf, len);
		copy[HEADER_LEN + MEMBER_LEN + 8] = bad_roles[k];
		cr_assert_eq(baton_config_decode(copy, len, &d), BATON_ECORRUPT,
			     "role %u", bad_roles[k]);
	}
}

Test(codec, decode_rejects_duplicate_and_zero_ids)
{
	struct baton_config c = sample(), d;
	uint8_t buf[256], copy[256];
	size_t len = encode(&c, buf, sizeof buf);

	/* Member 2 gets member 0's id. */
	memcpy(copy, buf, len);
	memcpy(copy + HEADER_LEN + 2 * MEMBER_LEN, buf + HEADER_LEN, 8);
	cr_assert_eq(baton_config_decode(copy, len, &d), BATON_ECORRUPT);

	/* Id 0 means "nobody" and cannot be a member. */
	memcpy(copy, buf, len);
	memset(copy + HEADER_LEN + MEMBER_LEN, 0, 8);
	cr_assert_eq(baton_config_decode(copy, len, &d), BATON_ECORRUPT);
}

Test(codec, decode_rejects_future_and_unknown_versions)
{
	struct baton_config c = sample(), d;
	uint8_t buf[256];
	size_t len = encode(&c, buf, sizeof buf);
	d.n = 77;
	buf[0] = 2;
	cr_assert_eq(baton_config_decode(buf, len, &d), BATON_EVERSION);
	buf[0] = 0xff;
	cr_assert_eq(baton_config_decode(buf, len, &d), BATON_EVERSION);
	/* Even a future version with a length we would not expect. */
	buf[0] = 2;
	cr_assert_eq(baton_config_decode(buf, 2, &d), BATON_EVERSION);
	buf[0] = 0;
	cr_assert_eq(baton_config_decode(buf, len, &d), BATON_ECORRUPT);
	cr_assert_eq(d.n, 77, "a failed decode leaves the output alone");
}

Test(codec, decode_rejects_more_than_max_members)
{
	uint8_t buf[HEADER_LEN + (BATON_MAX_MEMBERS + 1) * MEMBER_LEN];
	struct baton_config d;
	memset(buf, 0, sizeof buf);
	buf[0] = 1;
	buf[1] = (uint8_t)(BATON_MAX_MEMBERS + 1);
	for (uint32_t i = 0; i <= BATON_MAX_MEMBERS; i++) {
		buf[HEADER_LEN + i * MEMBER_LEN] = (uint8_t)(i + 1);
		buf[HEADER_LEN + i * MEMBER_LEN + 8] = BATON_VOTER;
	}
	cr_assert_eq(baton_config_decode(buf, sizeof buf, &d), BATON_ECORRUPT);
}

Test(codec, find_member)
{
	struct baton_config c = sample();
	const struct baton_member *m = baton_config_find(&c, UINT64_MAX);
	cr_assert_not_null(m);
	cr_assert_eq(m->role, BATON_LEARNER);
	cr_assert_eq(baton_config_find(&c, 1), &c.members[0]);
	cr_assert_null(baton_config_find(&c, 2));
	cr_assert_null(baton_config_find(&c, 0));
}

/* ---- errors ------------------------------------------------------------ */

Test(errtable, names_and_texts_of_some_codes)
{
	cr_assert_str_eq(baton_err_name(BATON_ENOTLEADER), "BATON_ENOTLEADER");
	cr_assert_str_eq(baton_strerror(BATON_ENOTLEADER),
			 "this node is not the leader");
	cr_assert_str_eq(baton_err_name(BATON_EVERSION), "BATON_EVERSION");
	cr_assert_str_eq(baton_strerror(BATON_EVERSION),
			 "unsupported format version");
	cr_assert_str_eq(baton_err_name(BATON_ECORRUPT), "BATON_ECORRUPT");
	cr_assert_str_eq(baton_err_name(BATON_EBUSY), "BATON_EBUSY");
	cr_assert_str_eq(baton_strerror(BATON_ENOMEM), "out of memory");
	cr_assert_eq(BATON_ENOMEM, -30001);
	cr_assert_eq(BATON_EOVERLOADED, -30014);
	cr_assert_str_eq(baton_err_name(0), "OK");
	cr_assert_str_eq(baton_strerror(0), "success");
	cr_assert_str_eq(baton_err_name(-2), "BATON_EUNKNOWN");
	cr_assert_str_eq(baton_strerror(12345), "unknown error");
}

/* Every code of the table has its own name, and a real text. */
Test(errtable, every_code_has_a_distinct_name_and_text)
{
	static const int codes[] = {
#define CODE(name, value, text) value,
		BATON_ERRORS(CODE)
#undef CODE
	};
	static const char *const names[] = {
#define NAME(name, value, text) "BATON_E" #name,
		BATON_ERRORS(NAME)
#undef NAME
	};
	size_t n = sizeof codes / sizeof codes[0];
	cr_assert_geq(n, 14);
	for (size_t i = 0; i < n; i++) {
		cr_assert_lt(codes[i], -30000, "far from errno values");
		cr_assert_str_eq(baton_err_name(codes[i]), names[i]);
		cr_assert_str_neq(baton_strerror(codes[i]), "unknown error");
		cr_assert_gt(strlen(baton_strerror(codes[i])), 5);
		for (size_t k = 0; k < i; k++) {
			cr_assert_neq(codes[i], codes[k]);
			cr_assert_str_neq(baton_strerror(codes[i]),
					  baton_strerror(codes[k]));
		}
	}
}

Test(errtable, release_compare_orders_fields)
{
	struct baton_release a = {0, 9, 9}, b = {1, 0, 0}, c = {1, 0, 1};
	cr_assert_lt(baton_release_compare(a, b), 0);
	cr_assert_gt(baton_release_compare(b, a), 0);
	cr_assert_lt(baton_release_compare(b, c), 0);
	cr_assert_eq(baton_release_compare(c, c), 0);
}

/* ---- create / bootstrap arguments -------------------------------------- */

Test(instance, create_rejects_bad_options)
{
	struct baton_raft_options o;
	struct baton_raft *r = NULL;
	baton_raft_options_default(&o);
	cr_assert_eq(baton_raft_create(&o, &r), BATON_EINVAL, "id 0");
	o.id = 1;
	o.heartbeat_interval_ms = o.election_timeout_ms;
	cr_assert_eq(baton_raft_create(&o, &r), BATON_EINVAL,
		     "heartbeat must be shorter than the election timeout");
	baton_raft_options_default(&o);
	o.id = 1;
	o.max_inflight_appends = 0;
	cr_assert_eq(baton_raft_create(&o, &r), BATON_EINVAL);
	o.max_inflight_appends = 65;
	cr_assert_eq(baton_raft_create(&o, &r), BATON_EINVAL);
	baton_raft_options_default(&o);
	o.id = 1;
	o.max_entries_per_append = 0;
	cr_assert_eq(baton_raft_create(&o, &r), BATON_EINVAL);
	cr_assert_null(r);
	baton_raft_options_default(&o);
	o.id = 1;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	cr_assert_not_null(r);
	baton_raft_destroy(r);
}

Test(instance, bootstrap_writes_the_config_entry_once)
{
	struct baton_raft_options o;
	struct baton_raft *r;
	baton_raft_options_default(&o);
	o.id = 1;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	struct baton_config empty;
	memset(&empty, 0, sizeof empty);
	cr_assert_eq(baton_raft_bootstrap(r, &empty), BATON_EINVAL);

	struct baton_config c = sample();
	cr_assert_eq(baton_raft_bootstrap(r, &c), 0);
	const struct baton_entry *e = baton_raft_entry(r, 1);
	cr_assert_not_null(e);
	cr_assert_eq(e->type, BATON_ENTRY_CONFIG);
	cr_assert_eq(e->term, 1);
	cr_assert_eq(e->index, 1);
	struct baton_config d;
	cr_assert_eq(baton_config_decode(e->buf, e->len, &d), 0);
	cr_assert_eq(d.n, 3);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.term, 1);
	cr_assert_eq(s.last_index, 1);
	cr_assert_eq(s.config_index, 1);
	cr_assert_eq(s.config.n, 3);
	cr_assert_eq(baton_raft_bootstrap(r, &c), BATON_ESTATE,
		     "only an empty instance is bootstrapped");

	/* The next update persists the hard state and the entry. */
	struct baton_event ev = {.type = BATON_EVENT_TICK};
	struct baton_update u;
	cr_assert_eq(baton_raft_step(r, 0, &ev, &u), 0);
	cr_assert(u.persist_needed);
	cr_assert(u.hard_state_changed);
	cr_assert_eq(u.hs_term, 1);
	cr_assert_eq(u.n_entries, 1);
	cr_assert_eq(u.entries[0].index, 1);
	cr_assert_eq(u.persist_index, 1);
	cr_assert_eq(u.persist_term, 1);
	cr_assert_eq(u.n_apply, 0, "nothing is committed yet");
	baton_raft_destroy(r);
}
