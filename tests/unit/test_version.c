/*
 * Versions (include/baton/version.h, src/core/version.c): releases compared,
 * parsed and formatted; the table of releases; the encoding of the version
 * state a BATON_ENTRY_VERSION entry carries, checked against golden bytes.
 */
#include <baton/raft.h>

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static struct baton_release rel(uint16_t a, uint16_t b, uint16_t c)
{
	return (struct baton_release){a, b, c};
}

Test(release, compare_orders_major_then_minor_then_patch)
{
	cr_assert_eq(baton_release_compare(rel(1, 2, 3), rel(1, 2, 3)), 0);
	cr_assert_lt(baton_release_compare(rel(1, 2, 3), rel(1, 2, 4)), 0);
	cr_assert_gt(baton_release_compare(rel(1, 3, 0), rel(1, 2, 9)), 0);
	cr_assert_lt(baton_release_compare(rel(0, 9, 9), rel(1, 0, 0)), 0);
	cr_assert_gt(baton_release_compare(rel(2, 0, 0), rel(1, 65535, 0)), 0);
}

Test(release, parse_accepts_exactly_three_parts)
{
	struct baton_release r = rel(9, 9, 9);
	cr_assert_eq(baton_release_parse("1.2.3", &r), 0);
	cr_assert_eq(baton_release_compare(r, rel(1, 2, 3)), 0);
	cr_assert_eq(baton_release_parse("65535.0.65535", &r), 0);
	cr_assert_eq(baton_release_compare(r, rel(65535, 0, 65535)), 0);
	const char *bad[] = {"",	  "1",	    "1.2",    "1.2.3.4",
			     "1..3",	  ".1.2",   "1.2.",   " 1.2.3",
			     "1.2.3 ",	  "a.b.c",  "1.2.-3", "65536.0.0",
			     "0.0.99999", "1.2.3x", "+1.2.3"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		r = rel(7, 7, 7);
		cr_assert_eq(baton_release_parse(bad[i], &r), BATON_EINVAL,
			     "\"%s\"", bad[i]);
		cr_assert_eq(baton_release_compare(r, rel(7, 7, 7)), 0,
			     "\"%s\" left *out alone", bad[i]);
	}
	cr_assert_eq(baton_release_parse(NULL, &r), BATON_EINVAL);
}

Test(release, format_round_trips_through_parse)
{
	char buf[BATON_RELEASE_STR_MAX];
	cr_assert_str_eq(baton_release_format(rel(0, 1, 0), buf), "0.1.0");
	cr_assert_str_eq(baton_release_format(rel(65535, 65535, 65535), buf),
			 "65535.65535.65535");
	cr_assert_eq(strlen(buf) + 1, BATON_RELEASE_STR_MAX);
	struct baton_release r;
	cr_assert_eq(baton_release_parse(buf, &r), 0);
	cr_assert_eq(baton_release_compare(r, rel(65535, 65535, 65535)), 0);
}

Test(release, the_table_is_ordered_and_ends_with_this_binary)
{
	uint32_t n = 0;
	const struct baton_profile *t = baton_releases(&n);
	cr_assert_geq(n, 1);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_leq(t[i].proto_min.value, t[i].proto_max.value);
		cr_assert_geq(t[i].machine_max.value, 1);
		if (i > 0) {
			cr_assert_lt(baton_release_compare(t[i - 1].release,
							   t[i].release),
				     0, "oldest first");
			cr_assert_leq(t[i - 1].machine_max.value,
				      t[i].machine_max.value);
		}
		cr_assert_eq(baton_release_find(t[i].release), &t[i]);
	}
	cr_assert_eq(baton_release_current(), &t[n - 1]);
	cr_assert_null(baton_release_find(rel(0, 0, 0)));
	/* Today's one release: 0.1.0, peer protocol 1..1, machine 1. */
	const struct baton_profile *p = baton_release_find(rel(0, 1, 0));
	cr_assert_not_null(p);
	cr_assert_eq(p->proto_min.value, 1);
	cr_assert_eq(p->proto_max.value, 1);
	cr_assert_eq(p->machine_max.value, 1);
	/* The core's default profile comes from the table. */
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	cr_assert_eq(baton_release_compare(o.profile.release,
					   baton_release_current()->release),
		     0);
	cr_assert_eq(o.profile.proto_max.value,
		     baton_release_current()->proto_max.value);
	cr_assert_eq(o.profile.machine_max.value,
		     baton_release_current()->machine_max.value);
}

/* ---- the version state ---------------------------------------------------*/

static struct baton_version_state sample(void)
{
	struct baton_version_state s;
	baton_version_state_initial(&s);
	s.machine.value = 2;
	s.floor = rel(1, 2, 3);
	s.n = 1;
	s.members[0].id = 0x0102030405060708ull;
	s.members[0].profile.release = rel(4, 5, 6);
	s.members[0].profile.proto_min.value = 1;
	s.members[0].profile.proto_max.value = 3;
	s.members[0].profile.machine_max.value = 2;
	return s;
}

/* The tail a downgrade in progress adds after the rows. */
#define DOWNGRADE_TAIL_LEN 25u
/* The tail the burn-in hold adds after that. */
#define HOLD_TAIL_LEN 2u

/* Golden bytes of sample(): format 1, little endian throughout. */
static const uint8_t SAMPLE_BYTES[] = {
	0x01,						/* format */
	0x02, 0x00, 0x00, 0x00,				/* machine version 2 */
	0x01, 0x00, 0x02, 0x00, 0x03, 0x00,		/* floor 1.2.3 */
	0x01,						/* one row */
	0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* id */
	0x04, 0x00, 0x05, 0x00, 0x06, 0x00,		/* release 4.5.6 */
	0x01, 0x00, 0x00, 0x00,				/* proto_min 1 */
	0x03, 0x00, 0x00, 0x00,				/* proto_max 3 */
	0x02, 0x00, 0x00, 0x00,				/* machine_max 2 */
};

static void assert_state_eq(const struct baton_version_state *a,
			    const struct baton_version_state *b)
{
	cr_assert_eq(a->machine.value, b->machine.value);
	cr_assert_eq(baton_release_compare(a->floor, b->floor), 0);
	cr_assert_eq(
		baton_release_compare(a->downgrade.target, b->downgrade.target),
		0);
	cr_assert_eq(baton_release_compare(a->downgrade.prev_floor,
					   b->downgrade.prev_floor),
		     0);
	cr_assert_eq(a->downgrade.prev_machine.value,
		     b->downgrade.prev_machine.value);
	cr_assert_eq(a->downgrade.since, b->downgrade.since);
	cr_assert_eq(a->held, b->held);
	cr_assert_eq(a->n, b->n);
	for (uint32_t i = 0; i < a->n; i++) {
		const struct baton_profile *p = &a->members[i].profile;
		const struct baton_profile *q = &b->members[i].profile;
		cr_assert_eq(a->members[i].id, b->members[i].id);
		cr_assert_eq(baton_release_compare(p->release, q->release), 0);
		cr_assert_eq(p->proto_min.value, q->proto_min.value);
		cr_assert_eq(p->proto_max.value, q->proto_max.value);
		cr_assert_eq(p->machine_max.value, q->machine_max.value);
	}
}

/* The one protocol-overlap rule: the highest version both speak, none
 * between 2.0.0 (4 only) and the 1.x releases. */
Test(release, proto_common_is_the_highest_both_speak)
{
	const struct {
		struct baton_release a, b;
		uint32_t want; /* 0: none */
	} cases[] = {
		{{1, 0, 0}, {1, 1, 0}, 1}, {{1, 1, 0}, {1, 2, 0}, 2},
		{{1, 2, 0}, {1, 3, 0}, 3}, {{1, 0, 0}, {1, 2, 0}, 0},
		{{1, 3, 0}, {2, 0, 0}, 0}, {{2, 0, 0}, {2, 0, 0}, 4},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct baton_profile *a = baton_release_find(cases[i].a);
		const struct baton_profile *b = baton_release_find(cases[i].b);
		cr_assert(a != NULL && b != NULL, "case %zu", i);
		struct baton_proto_version ab, ba;
		int r1 = baton_proto_common(a, b, &ab);
		int r2 = baton_proto_common(b, a, &ba);
		cr_assert_eq(r1, r2, "case %zu: symmetric", i);
		cr_assert_eq(ab.value, ba.value, "case %zu", i);
		cr_assert_eq(ab.value, cases[i].want, "case %zu", i);
		cr_assert_eq(r1, cases[i].want ? 0 : BATON_EVERSION, "case %zu",
			     i);
	}
	struct baton_profile empty = *baton_release_current();
	empty.proto_min.value = 0;
	empty.proto_max.value = 0;
	struct baton_proto_version v;
	cr_assert_eq(baton_proto_common(&empty, baton_release_current(), &v),
		     BATON_EVERSION);
	cr_assert_eq(v.value, 0);
}

Test(version_state, initial_is_machine_one_without_floor_or_table)
{
	struct baton_version_state s;
	memset(&s, 0xee, sizeof s);
	baton_version_state_initial(&s);
	cr_assert_eq(s.machine.value, 1);
	cr_assert_eq(baton_release_compare(s.floor, rel(0, 0, 0)), 0);
	cr_assert_eq(s.n, 0);
	cr_assert(baton_version_state_valid(&s));
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len = 0;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	const uint8_t want[] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	cr_assert_eq(len, sizeof want);
	cr_assert_arr_eq(buf, want, sizeof want);
}

Test(version_state, encodes_to_the_golden_bytes_and_back)
{
	struct baton_version_state s = sample(), d;
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len = 0;
	cr_assert_eq(baton_version_state_encoded_len(&s), sizeof SAMPLE_BYTES);
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	cr_assert_eq(len, sizeof SAMPLE_BYTES);
	cr_assert_arr_eq(buf, SAMPLE_BYTES, len);
	memset(&d, 0xab, sizeof d);
	cr_assert_eq(baton_version_state_decode(SAMPLE_BYTES,
						sizeof SAMPLE_BYTES, &d),
		     0);
	assert_state_eq(&d, &s);
	const struct baton_member_versions *m =
		baton_version_state_find(&d, 0x0102030405060708ull);
	cr_assert_not_null(m);
	cr_assert_eq(m->profile.machine_max.value, 2);
	cr_assert_null(baton_version_state_find(&d, 5));
}

Test(version_state, a_full_table_round_trips)
{
	struct baton_version_state s, d;
	baton_version_state_initial(&s);
	s.machine.value = 7;
	s.floor = rel(3, 0, 1);
	for (uint32_t i = 0; i < BATON_MAX_MEMBERS; i++) {
		struct baton_member_versions *m = &s.members[s.n++];
		m->id = 10 + 3 * (uint64_t)i;
		m->profile.release = rel(3, (uint16_t)i, 1);
		m->profile.proto_min.value = i;
		m->profile.proto_max.value = i + 1;
		m->profile.machine_max.value = 0xfffffff0u + i;
	}
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len = 0;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	/* Without a downgrade or a hold, the largest encoding lacks only
	 * their tails. */
	cr_assert_eq(len, BATON_VERSION_STATE_BYTES_MAX - DOWNGRADE_TAIL_LEN -
				  HOLD_TAIL_LEN);
	cr_assert_eq(baton_version_state_encode(&s, buf, len - 1, &len),
		     BATON_ETOOBIG);
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d), 0);
	assert_state_eq(&d, &s);
	/* With one, it is the largest there is. */
	s.downgrade.target = rel(3, 0, 0);
	s.downgrade.prev_floor = s.floor;
	s.downgrade.prev_machine = s.machine;
	s.downgrade.since = UINT64_MAX;
	s.held = true;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	cr_assert_eq(len, BATON_VERSION_STATE_BYTES_MAX);
	cr_assert_eq(baton_version_state_encode(&s, buf, len - 1, &len),
		     BATON_ETOOBIG);
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d), 0);
	assert_state_eq(&d, &s);
}

Test(version_state, later_formats_append_and_higher_formats_are_refused)
{
	struct baton_version_state d;
	uint8_t buf[sizeof SAMPLE_BYTES + 5];
	memcpy(buf, SAMPLE_BYTES, sizeof SAMPLE_BYTES);
	memset(buf + sizeof SAMPLE_BYTES, 0x5a, 5);
	/* Bytes a later format appended within format 1 are ignored. */
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d), 0);
	struct baton_version_state s = sample();
	assert_state_eq(&d, &s);
	buf[0] = 2;
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d),
		     BATON_EVERSION);
	buf[0] = 0xff;
	cr_assert_eq(baton_version_state_decode(buf, 1, &d), BATON_EVERSION);
	buf[0] = 0;
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d),
		     BATON_ECORRUPT);
}

Test(version_state, short_input_is_corrupt_and_never_overread)
{
	struct baton_version_state d;
	cr_assert_eq(baton_version_state_decode(NULL, 0, &d), BATON_ECORRUPT);
	/* Each prefix in a buffer of exactly its length. */
	for (size_t n = 1; n < sizeof SAMPLE_BYTES; n++) {
		uint8_t *p = malloc(n);
		memcpy(p, SAMPLE_BYTES, n);
		d.machine.value = 99;
		cr_assert_eq(baton_version_state_decode(p, n, &d),
			     BATON_ECORRUPT, "%zu bytes", n);
		cr_assert_eq(d.machine.value, 99, "*out untouched on error");
		free(p);
	}
}

/* Patch one field of the golden bytes and expect the decoder to refuse. */
static void expect_corrupt(size_t off, const uint8_t *v, size_t n,
			   const char *what)
{
	uint8_t buf[sizeof SAMPLE_BYTES];
	memcpy(buf, SAMPLE_BYTES, sizeof buf);
	memcpy(buf + off, v, n);
	struct baton_version_state d;
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d),
		     BATON_ECORRUPT, "%s", what);
}

Test(version_state, states_the_log_cannot_hold_are_refused_both_ways)
{
	const uint8_t zero4[4] = {0}, zero8[8] = {0}, n17[1] = {17},
		      n2[1] = {2}, proto[4] = {4, 0, 0, 0};
	expect_corrupt(1, zero4, 4, "machine version 0");
	expect_corrupt(12, zero8, 8, "member id 0");
	expect_corrupt(11, n17, 1, "more rows than members");
	expect_corrupt(11, n2, 1, "a row missing");
	expect_corrupt(26, proto, 4, "proto_min above proto_max");

	struct baton_version_state s = sample();
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len;
	s.machine.value = 0;
	cr_assert_not(baton_version_state_valid(&s));
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	s = sample();
	s.n = BATON_MAX_MEMBERS + 1;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	/* Rows by strictly increasing id: no duplicates, no disorder. */
	s = sample();
	s.members[1] = s.members[0];
	s.n = 2;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	s.members[1].id = s.members[0].id - 1;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	s.members[1].id = s.members[0].id + 1;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	/* The same disorder on the wire is corrupt. */
	buf[12 + 26] = 0x07; /* row 2's id now below row 1's */
	struct baton_version_state d;
	cr_assert_eq(baton_version_state_decode(buf, len, &d), BATON_ECORRUPT);
}

/* ---- one step back, and the downgrade tail -------------------------------*/

Test(release, previous_is_one_step_back_in_the_table)
{
	uint32_t n = 0;
	const struct baton_profile *t = baton_releases(&n);
	cr_assert_null(baton_release_previous(t[0].release), "the oldest");
	for (uint32_t i = 1; i < n; i++)
		cr_assert_eq(baton_release_previous(t[i].release), &t[i - 1]);
	cr_assert_eq(baton_release_previous(baton_release_current()->release),
		     &t[n - 1] - 1);
	/* Not in the table: a patch release this binary does not contain,
	 * nothing at all, a release from the future. */
	cr_assert_null(baton_release_previous(rel(1, 1, 1)));
	cr_assert_null(baton_release_previous(rel(0, 0, 0)));
	cr_assert_null(baton_release_previous(rel(9, 9, 9)));
	/* The steps the downgrade tests take. */
	const struct baton_profile *p = baton_release_previous(rel(1, 1, 0));
	cr_assert_not_null(p);
	cr_assert_eq(baton_release_compare(p->release, rel(1, 0, 0)), 0);
}

/* sample() during a downgrade from floor 1.2.3, machine 2 to 1.1.0. */
static struct baton_version_state sample_downgrade(void)
{
	struct baton_version_state s = sample();
	s.downgrade.target = rel(1, 1, 0);
	s.downgrade.prev_floor = rel(1, 2, 3);
	s.downgrade.prev_machine.value = 2;
	s.downgrade.since = 0x1122334455667788ull;
	s.floor = rel(1, 1, 0);
	s.machine.value = 1;
	return s;
}

/* Golden bytes of sample_downgrade(): sample's fields with the new floor
 * and machine version, then the 25-byte tail. */
static const uint8_t DOWNGRADE_BYTES[] = {
	0x01,						/* format */
	0x01, 0x00, 0x00, 0x00,				/* machine version 1 */
	0x01, 0x00, 0x01, 0x00, 0x00, 0x00,		/* floor 1.1.0 */
	0x01,						/* one row */
	0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* id */
	0x04, 0x00, 0x05, 0x00, 0x06, 0x00,		/* release 4.5.6 */
	0x01, 0x00, 0x00, 0x00,				/* proto_min 1 */
	0x03, 0x00, 0x00, 0x00,				/* proto_max 3 */
	0x02, 0x00, 0x00, 0x00,				/* machine_max 2 */
	0x01,						/* downgrade tag */
	0x01, 0x00, 0x01, 0x00, 0x00, 0x00,		/* target 1.1.0 */
	0x01, 0x00, 0x02, 0x00, 0x03, 0x00,		/* prev floor 1.2.3 */
	0x02, 0x00, 0x00, 0x00,				/* prev machine 2 */
	0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* since */
};

Test(version_state, a_downgrade_is_a_tail_after_the_rows)
{
	struct baton_version_state s = sample_downgrade(), d;
	cr_assert(baton_version_state_valid(&s));
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len = 0;
	cr_assert_eq(baton_version_state_encoded_len(&s),
		     sizeof DOWNGRADE_BYTES);
	cr_assert_eq(sizeof DOWNGRADE_BYTES,
		     sizeof SAMPLE_BYTES + DOWNGRADE_TAIL_LEN);
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	cr_assert_eq(len, sizeof DOWNGRADE_BYTES);
	cr_assert_arr_eq(buf, DOWNGRADE_BYTES, len);
	cr_assert_eq(baton_version_state_encode(&s, buf, len - 1, &len),
		     BATON_ETOOBIG);
	memset(&d, 0xab, sizeof d);
	cr_assert_eq(baton_version_state_decode(DOWNGRADE_BYTES,
						sizeof DOWNGRADE_BYTES, &d),
		     0);
	assert_state_eq(&d, &s);
	/* What a later release appends after the tail is ignored. */
	uint8_t more[sizeof DOWNGRADE_BYTES + 3];
	memcpy(more, DOWNGRADE_BYTES, sizeof DOWNGRADE_BYTES);
	memset(more + sizeof DOWNGRADE_BYTES, 0x77, 3);
	cr_assert_eq(baton_version_state_decode(more, sizeof more, &d), 0);
	assert_state_eq(&d, &s);
}

Test(version_state, without_a_downgrade_the_bytes_are_the_old_ones)
{
	/* Written only while a downgrade is in progress: a state without
	 * one encodes as before the tail existed (the goldens above), and
	 * a format-1 entry without it decodes as "no downgrade". */
	struct baton_version_state s = sample(), d;
	cr_assert_eq(baton_version_state_encoded_len(&s), sizeof SAMPLE_BYTES);
	memset(&d, 0xab, sizeof d);
	cr_assert_eq(baton_version_state_decode(SAMPLE_BYTES,
						sizeof SAMPLE_BYTES, &d),
		     0);
	cr_assert_eq(d.downgrade.target.major + d.downgrade.target.minor +
			     d.downgrade.target.patch,
		     0);
	cr_assert_eq(d.downgrade.prev_floor.major +
			     d.downgrade.prev_floor.minor +
			     d.downgrade.prev_floor.patch,
		     0);
	cr_assert_eq(d.downgrade.prev_machine.value, 0);
	/* Round trip of a state that had one and lost it: the same bytes as
	 * one that never had it. */
	s = sample_downgrade();
	memset(&s.downgrade, 0, sizeof s.downgrade);
	s.floor = rel(1, 2, 3);
	s.machine.value = 2;
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len = 0;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	cr_assert_eq(len, sizeof SAMPLE_BYTES);
	cr_assert_arr_eq(buf, SAMPLE_BYTES, len);
}

Test(version_state, a_cut_or_empty_downgrade_tail_is_corrupt)
{
	struct baton_version_state d;
	/* Every cut of the tail after its tag, in a buffer of exactly that
	 * length (never read past). */
	for (size_t n = sizeof SAMPLE_BYTES + 1; n < sizeof DOWNGRADE_BYTES;
	     n++) {
		uint8_t *p = malloc(n);
		memcpy(p, DOWNGRADE_BYTES, n);
		d.machine.value = 99;
		cr_assert_eq(baton_version_state_decode(p, n, &d),
			     BATON_ECORRUPT, "%zu bytes", n);
		cr_assert_eq(d.machine.value, 99, "*out untouched on error");
		free(p);
	}
	/* The tag alone, right after the rows. */
	uint8_t tag[sizeof SAMPLE_BYTES + 1];
	memcpy(tag, SAMPLE_BYTES, sizeof SAMPLE_BYTES);
	tag[sizeof SAMPLE_BYTES] = 1;
	cr_assert_eq(baton_version_state_decode(tag, sizeof tag, &d),
		     BATON_ECORRUPT);
}

/* Patch the downgrade golden bytes and expect the decoder to refuse. */
static void expect_corrupt_downgrade(size_t off, const uint8_t *v, size_t n,
				     const char *what)
{
	uint8_t buf[sizeof DOWNGRADE_BYTES];
	memcpy(buf, DOWNGRADE_BYTES, sizeof buf);
	memcpy(buf + off, v, n);
	struct baton_version_state d;
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d),
		     BATON_ECORRUPT, "%s", what);
}

Test(version_state, downgrade_fields_the_log_cannot_hold_are_refused)
{
	/* Offsets in DOWNGRADE_BYTES: the tag at 38, target at 39, previous
	 * floor at 45, previous machine at 51, since at 55; machine version
	 * at 1. */
	const uint8_t zero6[6] = {0}, zero4[4] = {0}, zero8[8] = {0},
		      rel123[6] = {1, 0, 2, 0, 3, 0},
		      rel130[6] = {1, 0, 3, 0, 0, 0},
		      machine3[4] = {3, 0, 0, 0};
	expect_corrupt_downgrade(39, zero6, 6, "target 0.0.0 with a tag");
	expect_corrupt_downgrade(39, rel123, 6, "target equal to prev floor");
	expect_corrupt_downgrade(39, rel130, 6, "target above prev floor");
	expect_corrupt_downgrade(51, zero4, 4, "previous machine version 0");
	expect_corrupt_downgrade(55, zero8, 8, "enabled at index 0");
	expect_corrupt_downgrade(1, machine3, 4,
				 "machine version above the previous one");

	/* The same states are refused by valid() and by encode. */
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len;
	struct baton_version_state s = sample_downgrade();
	s.downgrade.target = s.downgrade.prev_floor;
	cr_assert_not(baton_version_state_valid(&s));
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	s = sample_downgrade();
	s.downgrade.prev_machine.value = 0;
	cr_assert_not(baton_version_state_valid(&s));
	s = sample_downgrade();
	s.machine.value = 3;
	cr_assert_not(baton_version_state_valid(&s));
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	/* No target: the other fields must be zero too. */
	s = sample();
	s.downgrade.prev_floor = rel(1, 2, 3);
	cr_assert_not(baton_version_state_valid(&s));
	s = sample();
	s.downgrade.prev_machine.value = 2;
	cr_assert_not(baton_version_state_valid(&s));
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	s = sample();
	s.downgrade.since = 5;
	cr_assert_not(baton_version_state_valid(&s));
	s = sample_downgrade();
	s.downgrade.since = 0;
	cr_assert_not(baton_version_state_valid(&s));
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len),
		     BATON_EINVAL);
	/* The edges that are fine: the machine version kept as it was (a
	 * downgrade between releases of the same machine version), a
	 * target one patch below. */
	s = sample_downgrade();
	s.machine.value = 2;
	cr_assert(baton_version_state_valid(&s));
	s.downgrade.target = rel(1, 2, 2);
	cr_assert(baton_version_state_valid(&s));
}

/* Release 2.0.0 speaks peer protocol 4 only, which no 1.x release speaks:
 * a 2.0.0 node never joins a 1.x cluster and no 1.x node joins a 2.0.0
 * one, whatever the floor and machine version allow (the transport refuses
 * their connections too: tests/wire). */
Test(release, release_2_0_0_and_1_x_never_form_a_cluster)
{
	const struct baton_profile *two = baton_release_find(rel(2, 0, 0));
	cr_assert_not_null(two);
	cr_assert_eq(two->proto_min.value, 4);
	cr_assert_eq(two->proto_max.value, 4);
	cr_assert_eq(two->machine_max.value, 3);
	uint32_t n = 0;
	const struct baton_profile *t = baton_releases(&n);
	char why[512];
	for (uint32_t i = 0; i < n; i++) {
		if (t[i].release.major != 1)
			continue;
		cr_assert_lt(t[i].proto_max.value, two->proto_min.value);
		/* A cluster of each kind, with neither floor nor machine
		 * version in the way: only the protocols decide. */
		struct baton_version_state s;
		baton_version_state_initial(&s);
		s.n = 2;
		s.members[0] = (struct baton_member_versions){1, t[i]};
		s.members[1] = (struct baton_member_versions){2, t[i]};
		cr_assert_eq(
			baton_join_check(&s, 3, two, NULL, why, sizeof why),
			BATON_EVERSION);
		cr_assert_not_null(strstr(why, "no version in common"), "%s",
				   why);
		s.members[0].profile = *two;
		s.members[1].profile = *two;
		cr_assert_eq(
			baton_join_check(&s, 3, &t[i], NULL, why, sizeof why),
			BATON_EVERSION);
		cr_assert_not_null(strstr(why, "no version in common"), "%s",
				   why);
		/* Nor does a cluster hold both. */
		s.members[1].profile = t[i];
		cr_assert_eq(
			baton_join_check(&s, 3, two, NULL, why, sizeof why),
			BATON_EVERSION);
		cr_assert_not_null(strstr(why, "no peer protocol version in "
					       "common"),
				   "%s", why);
	}
}

/* ---- the burn-in hold's tail ----------------------------------------------
 * A 2-byte tail (tag 2, flags) after the rows and the downgrade's tail,
 * written only while the hold is on: the bytes of a state with it are
 * those of the same state without it, and then the tail, so a release
 * before the hold (which ignores what follows the fields it knows, as
 * later_formats_append_and_higher_formats_are_refused shows) decodes it as
 * the same state without the hold. */

Test(version_state, a_hold_is_a_tail_after_everything_an_old_release_knows)
{
	static const uint8_t tail[HOLD_TAIL_LEN] = {0x02, 0x01};
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len = 0;
	struct baton_version_state s = sample(), d;
	s.held = true;
	cr_assert_eq(baton_version_state_encoded_len(&s),
		     sizeof SAMPLE_BYTES + HOLD_TAIL_LEN);
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	cr_assert_eq(len, sizeof SAMPLE_BYTES + HOLD_TAIL_LEN);
	cr_assert_arr_eq(buf, SAMPLE_BYTES, sizeof SAMPLE_BYTES);
	cr_assert_arr_eq(buf + sizeof SAMPLE_BYTES, tail, HOLD_TAIL_LEN);
	cr_assert_eq(baton_version_state_encode(&s, buf, len - 1, &len),
		     BATON_ETOOBIG);
	memset(&d, 0xab, sizeof d);
	cr_assert_eq(baton_version_state_decode(
			     buf, sizeof SAMPLE_BYTES + HOLD_TAIL_LEN, &d),
		     0);
	assert_state_eq(&d, &s);
	/* The tag where an old release looks for a downgrade: not 1, so
	 * it reads no downgrade and stops (the tail is "appended"). */
	cr_assert_neq(buf[sizeof SAMPLE_BYTES], 0x01);

	/* After a downgrade's tail. */
	s = sample_downgrade();
	s.held = true;
	cr_assert_eq(baton_version_state_encode(&s, buf, sizeof buf, &len), 0);
	cr_assert_eq(len, sizeof DOWNGRADE_BYTES + HOLD_TAIL_LEN);
	cr_assert_arr_eq(buf, DOWNGRADE_BYTES, sizeof DOWNGRADE_BYTES);
	cr_assert_arr_eq(buf + sizeof DOWNGRADE_BYTES, tail, HOLD_TAIL_LEN);
	cr_assert_eq(baton_version_state_decode(buf, len, &d), 0);
	assert_state_eq(&d, &s);

	/* What a later release appends after it is ignored. */
	uint8_t more[sizeof DOWNGRADE_BYTES + HOLD_TAIL_LEN + 4];
	memcpy(more, buf, len);
	memset(more + len, 0x66, 4);
	cr_assert_eq(baton_version_state_decode(more, sizeof more, &d), 0);
	assert_state_eq(&d, &s);
	/* Flags other than "held" are never written: damage (what decodes
	 * must encode again to a prefix of the input). */
	for (unsigned f = 0; f < 256; f++) {
		if (f == 0x01)
			continue;
		buf[len - 1] = (uint8_t)f;
		cr_assert_eq(baton_version_state_decode(buf, len, &d),
			     BATON_ECORRUPT, "flags 0x%02x", f);
	}
}

Test(version_state, a_cut_hold_tail_is_corrupt)
{
	uint8_t buf[sizeof SAMPLE_BYTES + 1];
	struct baton_version_state d;
	memcpy(buf, SAMPLE_BYTES, sizeof SAMPLE_BYTES);
	buf[sizeof SAMPLE_BYTES] = 0x02; /* the tag, without its flags */
	cr_assert_eq(baton_version_state_decode(buf, sizeof buf, &d),
		     BATON_ECORRUPT);
}
