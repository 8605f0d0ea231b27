/*
 * What the relay protocol refuses, and with which code
 * (docs/relay-protocol.md, "Malformed frames"): truncated, oversized,
 * bad magic, unknown type, wrong direction, reserved flag bits, bad
 * checksums, overlong strings, too many nodes, bad values, misordered
 * records and malformed extension areas. The frames are built here byte
 * by byte, apart from the encoder, and sealed with a correct checksum so
 * that the decoder reaches the field under test; the encoder must refuse
 * the same values with the same code.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "baton/errors.h"
#include "checksum.h"
#include "golden_frames.h"
#include "le.h"

#define BODY_CAP ((size_t)BATON_RELAY_LIST_BODY_MAX)

static uint8_t body[BODY_CAP];
static size_t body_len;
static uint8_t frame[BODY_CAP + BATON_RELAY_HEADER_LEN];

static void u8_(uint8_t v)
{
	body[body_len++] = v;
}
static void u16_(uint16_t v)
{
	baton_le_put_u16(body + body_len, v);
	body_len += 2;
}
static void u32_(uint32_t v)
{
	baton_le_put_u32(body + body_len, v);
	body_len += 4;
}
static void u64_(uint64_t v)
{
	baton_le_put_u64(body + body_len, v);
	body_len += 8;
}
static void bytes_(const void *p, size_t n)
{
	if (n > 0)
		memcpy(body + body_len, p, n);
	body_len += n;
}
static void strn_(const char *s, size_t n)
{
	u16_((uint16_t)n);
	bytes_(s, n);
}
static void str_(const char *s)
{
	strn_(s, strlen(s));
}
static void release_(uint16_t a, uint16_t b, uint16_t c)
{
	u16_(a);
	u16_(b);
	u16_(c);
}
static void peer_(const char *cluster, uint64_t node, uint64_t inc)
{
	str_(cluster);
	u64_(node);
	u64_(inc);
}

/* The body built so far, behind a header of `type` with a checksum that
 * matches: the frame's length. */
static size_t seal(uint16_t type)
{
	memcpy(frame, "\xba\x52\x4c\x59", 4);
	baton_le_put_u16(frame + 4, type);
	baton_le_put_u16(frame + 6, 0);
	baton_le_put_u32(frame + 8, (uint32_t)body_len);
	memcpy(frame + BATON_RELAY_HEADER_LEN, body, body_len);
	baton_le_put_u64(frame + 12,
			 baton__checksum2(frame, 12,
					  frame + BATON_RELAY_HEADER_LEN,
					  body_len));
	return BATON_RELAY_HEADER_LEN + body_len;
}

/* Decoding `len` bytes of `frame` must fail: the code it gives. */
static uint16_t refused(enum baton_relay_dir dir, size_t len)
{
	struct baton_relay_frame f;
	struct baton_relay_err err = {0};
	int rv = baton_relay_decode(frame, len, dir, &f, &err);
	cr_assert_eq(rv, BATON_ECORRUPT, "accepted (%d)", rv);
	cr_assert_neq(err.code, 0);
	cr_assert_neq(err.text[0], '\0', "no text with code %u", err.code);
	return err.code;
}

static void expect_refused(enum baton_relay_dir dir, uint16_t type,
			   uint16_t code)
{
	size_t len = seal(type);
	uint16_t got = refused(dir, len);
	cr_assert_eq(got, code, "code %s, want %s", baton_relay_code_name(got),
		     baton_relay_code_name(code));
}

static void hello_(const char *cluster, uint64_t node, uint64_t inc,
		   uint16_t major, const char *addr)
{
	body_len = 0;
	str_(cluster);
	u64_(node);
	u64_(inc);
	release_(major, 3, 0);
	str_(addr);
}

static void accepted(enum baton_relay_dir dir, struct baton_relay_frame *f)
{
	size_t len = seal((uint16_t)f->type);
	struct baton_relay_err err;
	cr_assert_eq(baton_relay_decode(frame, len, dir, f, &err), 0, "%s",
		     err.text);
}

Test(refuse, a_hand_built_hello_is_accepted)
{
	hello_("old", 1, 9, 1, "h:1");
	struct baton_relay_frame f = {.type = BATON_RELAY_HELLO};
	accepted(BATON_RELAY_TO_RELAY, &f);
	cr_assert_eq(f.u.hello.incarnation, 9);
}

/* ---- the header ---------------------------------------------------------- */

Test(refuse, bad_magic_at_the_first_differing_byte)
{
	hello_("old", 1, 9, 1, "h:1");
	size_t len = seal(BATON_RELAY_HELLO);
	for (size_t at = 0; at < 4; at++) {
		uint8_t saved = frame[at];
		frame[at] ^= 0x20;
		size_t frame_len, need;
		struct baton_relay_err err;
		/* Refused as soon as that byte is in, before the rest. */
		cr_assert_eq(baton_relay_split(frame, at + 1,
					       BATON_RELAY_TO_RELAY, &frame_len,
					       &need, &err),
			     BATON_ECORRUPT);
		cr_assert_eq(err.code, BATON_RELAY_EBAD_MAGIC);
		cr_assert_eq(refused(BATON_RELAY_TO_RELAY, len),
			     BATON_RELAY_EBAD_MAGIC);
		frame[at] = saved;
	}
}

/* What other peers send first: refused at their first byte. */
Test(refuse, other_protocols_are_not_relay_peers)
{
	const char *firsts[] = {"GET / HTTP/1.1\r\n", "*1\r\n$4\r\nPING\r\n",
				"\x29\x00\x00\x00\x0a", "\x16\x03\x01"};
	for (size_t i = 0; i < sizeof firsts / sizeof firsts[0]; i++) {
		size_t frame_len, need;
		struct baton_relay_err err;
		cr_assert_eq(baton_relay_split((const uint8_t *)firsts[i], 1,
					       BATON_RELAY_TO_RELAY, &frame_len,
					       &need, &err),
			     BATON_ECORRUPT);
		cr_assert_eq(err.code, BATON_RELAY_EBAD_MAGIC);
	}
}

Test(refuse, unknown_types)
{
	uint16_t types[] = {0, 14, 255, 0xFFFF};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		body_len = 0;
		expect_refused(BATON_RELAY_TO_RELAY, types[i],
			       BATON_RELAY_EBAD_TYPE);
	}
}

Test(refuse, types_sent_the_wrong_way)
{
	hello_("old", 1, 9, 1, "h:1");
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_HELLO,
		       BATON_RELAY_EWRONG_DIRECTION);
	body_len = 0;
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_ACTIVATE,
		       BATON_RELAY_EWRONG_DIRECTION);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_STATUS,
		       BATON_RELAY_EWRONG_DIRECTION);
}

Test(refuse, every_reserved_flag_bit)
{
	for (unsigned bit = 0; bit < 16; bit++) {
		body_len = 0;
		size_t len = seal(BATON_RELAY_STATUS);
		baton_le_put_u16(frame + 6, (uint16_t)(1u << bit));
		size_t frame_len, need;
		struct baton_relay_err err;
		cr_assert_eq(baton_relay_split(frame, 8, BATON_RELAY_TO_RELAY,
					       &frame_len, &need, &err),
			     BATON_ECORRUPT);
		cr_assert_eq(err.code, BATON_RELAY_EBAD_FLAGS, "bit %u", bit);
		cr_assert_eq(refused(BATON_RELAY_TO_RELAY, len),
			     BATON_RELAY_EBAD_FLAGS);
	}
}

/* A body length above its type's limit is refused from the 12 header
 * bytes, before any of the body is buffered. */
Test(refuse, oversized_bodies_from_the_header_alone)
{
	struct {
		uint16_t type;
		uint32_t max;
	} cases[] = {
		{BATON_RELAY_HELLO, BATON_RELAY_CONTROL_BODY_MAX},
		{BATON_RELAY_ERROR, BATON_RELAY_CONTROL_BODY_MAX},
		{BATON_RELAY_VIEW, BATON_RELAY_LIST_BODY_MAX},
		{BATON_RELAY_DATA, BATON_RELAY_DATA_BODY_MAX},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum baton_relay_dir dir = cases[i].type == BATON_RELAY_HELLO
						   ? BATON_RELAY_TO_RELAY
						   : BATON_RELAY_TO_NODE;
		body_len = 0;
		seal(cases[i].type);
		size_t frame_len, need;
		struct baton_relay_err err;
		baton_le_put_u32(frame + 8, cases[i].max);
		cr_assert_eq(baton_relay_split(frame, 12, dir, &frame_len,
					       &need, &err),
			     BATON_EAGAIN, "the limit itself is allowed");
		baton_le_put_u32(frame + 8, cases[i].max + 1);
		cr_assert_eq(baton_relay_split(frame, 12, dir, &frame_len,
					       &need, &err),
			     BATON_ECORRUPT);
		cr_assert_eq(err.code, BATON_RELAY_ETOO_BIG);
		baton_le_put_u32(frame + 8, UINT32_MAX);
		cr_assert_eq(baton_relay_split(frame, 12, dir, &frame_len,
					       &need, &err),
			     BATON_ECORRUPT);
	}
}

Test(refuse, truncated_frames)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		size_t len = golden_read(BATON_RELAY_GOLDEN_DIR, g[i].name,
					 frame, sizeof frame);
		cr_assert_neq(len, SIZE_MAX);
		for (size_t cut = 0; cut < len; cut++)
			cr_assert_eq(refused(g[i].dir, cut),
				     BATON_RELAY_ETRUNCATED, "%s cut at %zu",
				     g[i].name, cut);
	}
}

/* A body whose header agrees with it but which ends inside a field: every
 * golden body without an extension area, cut anywhere and sealed. */
Test(refuse, bodies_that_end_inside_a_field)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		if (g[i].frame.ext.len > 0)
			continue;
		uint8_t whole[4096];
		size_t len = golden_read(BATON_RELAY_GOLDEN_DIR, g[i].name,
					 whole, sizeof whole);
		cr_assert_neq(len, SIZE_MAX);
		for (size_t cut = 0; cut + BATON_RELAY_HEADER_LEN < len;
		     cut++) {
			body_len = 0;
			bytes_(whole + BATON_RELAY_HEADER_LEN, cut);
			uint16_t code = refused(
				g[i].dir, seal((uint16_t)g[i].frame.type));
			cr_assert_eq(code, BATON_RELAY_ETRUNCATED,
				     "%s body cut at %zu: %s", g[i].name, cut,
				     baton_relay_code_name(code));
		}
	}
}

Test(refuse, bytes_after_the_frame)
{
	body_len = 0;
	size_t len = seal(BATON_RELAY_STATUS);
	frame[len] = 0;
	cr_assert_eq(refused(BATON_RELAY_TO_RELAY, len + 1),
		     BATON_RELAY_EBAD_LENGTH);
}

Test(refuse, any_flipped_bit_of_the_checksum_or_body)
{
	hello_("old", 1, 9, 1, "10.0.0.1:7001");
	size_t len = seal(BATON_RELAY_HELLO);
	for (size_t at = 12; at < len; at++) {
		frame[at] ^= 0x01;
		cr_assert_eq(refused(BATON_RELAY_TO_RELAY, len),
			     BATON_RELAY_ECHECKSUM, "byte %zu", at);
		frame[at] ^= 0x01;
	}
}

/* ---- fields ----------------------------------------------------------------
 */

Test(refuse, overlong_strings)
{
	static char big[BATON_RELAY_TEXT_MAX + 2];
	memset(big, 'a', sizeof big - 1);
	char id[BATON_RELAY_ID_MAX + 2];
	memset(id, 'c', sizeof id - 1);
	id[sizeof id - 1] = '\0';
	hello_(id, 1, 9, 1, "h:1");
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_ETOO_LONG);
	hello_("old", 1, 9, 1, id);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_ETOO_LONG);
	/* The length alone is enough: the bytes need not follow. */
	body_len = 0;
	u16_(BATON_RELAY_ID_MAX + 1);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_ETOO_LONG);
	body_len = 0;
	u16_(BATON_RELAY_EINTERNAL);
	u16_(0);
	strn_(big, BATON_RELAY_TEXT_MAX + 1);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_ERROR,
		       BATON_RELAY_ETOO_LONG);
	/* At the limit it is fine. */
	body_len = 0;
	u16_(BATON_RELAY_EINTERNAL);
	u16_(0);
	strn_(big, BATON_RELAY_TEXT_MAX);
	struct baton_relay_frame f = {.type = BATON_RELAY_ERROR};
	accepted(BATON_RELAY_TO_NODE, &f);
	cr_assert_eq(f.u.error.text.len, BATON_RELAY_TEXT_MAX);
}

Test(refuse, overlong_payload_from_its_length_alone)
{
	body_len = 0;
	u8_(BATON_RELAY_UNICAST);
	peer_("new", 1, 9);
	u64_(1);
	u64_(1);
	u64_(0);
	u32_(BATON_RELAY_PAYLOAD_MAX + 1);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_DATA,
		       BATON_RELAY_ETOO_LONG);
}

Test(refuse, bad_strings)
{
	hello_("", 1, 9, 1, "h:1");
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_STRING);
	hello_("o\nld", 1, 9, 1, "h:1");
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_STRING);
	hello_("old", 1, 9, 1, "h\x7f:1");
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_STRING);
	body_len = 0;
	strn_("dr\0ained", 8);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_LEAVE,
		       BATON_RELAY_EBAD_STRING);
	/* An error without text, a refusal without a reason. */
	body_len = 0;
	u16_(BATON_RELAY_EINTERNAL);
	u16_(0);
	str_("");
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_ERROR,
		       BATON_RELAY_EBAD_STRING);
	body_len = 0;
	u16_(BATON_RELAY_EVIEW_FULL);
	u64_(5);
	str_("");
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_WELCOME,
		       BATON_RELAY_EBAD_STRING);
	/* UTF-8 and spaces are fine in a cluster id. */
	hello_("prod \xc3\xa9t\xc3\xa9", 1, 9, 1, "h:1");
	struct baton_relay_frame f = {.type = BATON_RELAY_HELLO};
	accepted(BATON_RELAY_TO_RELAY, &f);
}

Test(refuse, values_out_of_range)
{
	hello_("old", 0, 9, 1, "h:1");
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_VALUE);
	hello_("old", 1, 0, 1, "h:1");
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_VALUE);
	body_len = 0;
	str_("old");
	u64_(1);
	u64_(9);
	release_(0, 0, 0);
	str_("h:1");
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_VALUE);
	/* VIEW number 0; ERROR code 0; WELCOME relay incarnation 0. */
	body_len = 0;
	u64_(0);
	u16_(0);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_EBAD_VALUE);
	body_len = 0;
	u16_(0);
	u16_(0);
	str_("x");
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_ERROR,
		       BATON_RELAY_EBAD_VALUE);
	body_len = 0;
	u16_(0);
	u64_(0);
	str_("");
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_WELCOME,
		       BATON_RELAY_EBAD_VALUE);
	/* STATUS_REPLY's active flag is 0 or 1. */
	body_len = 0;
	u64_(5);
	u64_(1);
	u8_(2);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_STATUS_REPLY,
		       BATON_RELAY_EBAD_VALUE);
}

/* A DATA body: kind, peer, seq, first seq, a correct payload checksum
 * (unless `checksum` is not 0) and the payload. */
static void data_(uint8_t kind, const char *cluster, uint64_t node,
		  uint64_t inc, uint64_t seq, uint64_t first, uint64_t checksum)
{
	body_len = 0;
	u8_(kind);
	peer_(cluster, node, inc);
	u64_(seq);
	u64_(first);
	u64_(checksum != 0 ? checksum : baton__checksum("hi", 2));
	u32_(2);
	bytes_("hi", 2);
}

Test(refuse, data_and_ack_rules)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_DATA};
	data_(BATON_RELAY_UNICAST, "new", 1, 9, 3, 1, 0);
	accepted(BATON_RELAY_TO_RELAY, &f);
	data_(2, "new", 1, 9, 3, 1, 0);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_DATA,
		       BATON_RELAY_EBAD_VALUE);
	data_(BATON_RELAY_UNICAST, "new", 1, 9, 0, 0, 0);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_DATA,
		       BATON_RELAY_EBAD_VALUE);
	data_(BATON_RELAY_UNICAST, "new", 1, 9, 3, 4, 0);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_DATA,
		       BATON_RELAY_EBAD_VALUE);
	data_(BATON_RELAY_UNICAST, "new", 0, 9, 3, 1, 0);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_DATA,
		       BATON_RELAY_EBAD_VALUE);
	/* A multicast to the relay names a cluster only; from the relay,
	 * it names its source. */
	data_(BATON_RELAY_MULTICAST, "old", 0, 0, 3, 1, 0);
	accepted(BATON_RELAY_TO_RELAY, &f);
	data_(BATON_RELAY_MULTICAST, "old", 2, 0, 3, 1, 0);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_DATA,
		       BATON_RELAY_EBAD_VALUE);
	data_(BATON_RELAY_MULTICAST, "old", 0, 0, 3, 1, 0);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_DATA,
		       BATON_RELAY_EBAD_VALUE);
	data_(BATON_RELAY_MULTICAST, "old", 2, 7, 3, 1, 0);
	accepted(BATON_RELAY_TO_NODE, &f);
	/* A payload the relay damaged: the frame checksum is right (the
	 * relay re-sealed it), the source's payload checksum is not. */
	data_(BATON_RELAY_UNICAST, "new", 1, 9, 3, 1, 0x1234);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_DATA,
		       BATON_RELAY_EPAYLOAD_CHECKSUM);
	/* An ACK always names a whole node incarnation; seq 0 is "none". */
	body_len = 0;
	u8_(BATON_RELAY_MULTICAST);
	peer_("old", 0, 0);
	u64_(0);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_ACK,
		       BATON_RELAY_EBAD_VALUE);
	body_len = 0;
	u8_(BATON_RELAY_MULTICAST);
	peer_("old", 2, 7);
	u64_(0);
	f.type = BATON_RELAY_ACK;
	accepted(BATON_RELAY_TO_RELAY, &f);
	cr_assert_eq(f.u.ack.seq, 0);
}

/* ---- lists -----------------------------------------------------------------
 */

/* A VIEW node record, its length first; ext_len bytes of `ext`. */
static void node_(const char *cluster, uint64_t node, uint8_t connected,
		  const uint8_t *ext, size_t ext_len)
{
	size_t at = body_len;
	u16_(0);
	str_(cluster);
	u64_(node);
	u64_(node + 100);
	release_(1, 3, 0);
	str_("h:1");
	u8_(connected);
	bytes_(ext, ext_len);
	baton_le_put_u16(body + at, (uint16_t)(body_len - at - 2));
}

static void view_(uint16_t count)
{
	body_len = 0;
	u64_(7);
	u16_(count);
}

Test(refuse, too_many_nodes)
{
	view_(BATON_RELAY_NODES_MAX + 1);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_ETOO_MANY);
	body_len = 0;
	u64_(5);
	u64_(1);
	u8_(1);
	u64_(0);
	u64_(0);
	u64_(0);
	u16_(BATON_RELAY_NODES_MAX + 1);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_STATUS_REPLY,
		       BATON_RELAY_ETOO_MANY);
	/* The limit itself is fine. */
	view_(BATON_RELAY_NODES_MAX);
	for (uint16_t i = 0; i < BATON_RELAY_NODES_MAX; i++)
		node_("c", i + 1u, 1, NULL, 0);
	struct baton_relay_frame f = {.type = BATON_RELAY_VIEW};
	accepted(BATON_RELAY_TO_NODE, &f);
	cr_assert_eq(f.u.view.node_count, BATON_RELAY_NODES_MAX);
}

Test(refuse, nodes_out_of_order_or_twice)
{
	view_(2);
	node_("old", 1, 1, NULL, 0);
	node_("old", 1, 1, NULL, 0);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_EBAD_ORDER);
	view_(2);
	node_("old", 2, 1, NULL, 0);
	node_("old", 1, 1, NULL, 0);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_EBAD_ORDER);
	view_(2);
	node_("old", 1, 1, NULL, 0);
	node_("new", 2, 1, NULL, 0);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_EBAD_ORDER);
	/* A shorter cluster id sorts first. */
	view_(2);
	node_("ol", 9, 1, NULL, 0);
	node_("old", 1, 1, NULL, 0);
	struct baton_relay_frame f = {.type = BATON_RELAY_VIEW};
	accepted(BATON_RELAY_TO_NODE, &f);
}

Test(refuse, bad_records)
{
	view_(1);
	node_("old", 1, 2, NULL, 0);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_EBAD_VALUE);
	/* A record longer than the rest of the body. */
	view_(1);
	node_("old", 1, 1, NULL, 0);
	baton_le_put_u16(body + 10, (uint16_t)(body_len - 10));
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_ETRUNCATED);
	/* A record shorter than its fields. */
	view_(1);
	node_("old", 1, 1, NULL, 0);
	baton_le_put_u16(body + 10, 10);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_ETRUNCATED);
}

/* ---- extension areas -------------------------------------------------------
 */

/* A HELLO with `ext` as its extension area. */
static void hello_ext_(const uint8_t *ext, size_t len)
{
	hello_("old", 1, 9, 1, "h:1");
	bytes_(ext, len);
}

Test(refuse, malformed_extension_areas)
{
	const uint8_t critical[] = {0x01, 0x80, 0x00, 0x00};
	hello_ext_(critical, sizeof critical);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EUNKNOWN_CRITICAL);
	const uint8_t descending[] = {0x02, 0x00, 0x00, 0x00,
				      0x01, 0x00, 0x00, 0x00};
	hello_ext_(descending, sizeof descending);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_EXTENSION);
	const uint8_t twice[] = {0x02, 0x00, 0x00, 0x00,
				 0x02, 0x00, 0x00, 0x00};
	hello_ext_(twice, sizeof twice);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_EXTENSION);
	const uint8_t tag0[] = {0x00, 0x00, 0x00, 0x00};
	hello_ext_(tag0, sizeof tag0);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_EXTENSION);
	const uint8_t past_end[] = {0x01, 0x00, 0x05, 0x00, 'a'};
	hello_ext_(past_end, sizeof past_end);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_EXTENSION);
	const uint8_t stub[] = {0x01, 0x00, 0x00};
	hello_ext_(stub, sizeof stub);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_EXTENSION);
}

Test(refuse, extension_limits)
{
	/* BATON_RELAY_EXT_ENTRIES_MAX entries pass, one more does not. */
	uint8_t entries[4 * (BATON_RELAY_EXT_ENTRIES_MAX + 1)];
	for (uint16_t i = 0; i <= BATON_RELAY_EXT_ENTRIES_MAX; i++) {
		baton_le_put_u16(entries + 4 * i, (uint16_t)(i + 1));
		baton_le_put_u16(entries + 4 * i + 2, 0);
	}
	struct baton_relay_frame f = {.type = BATON_RELAY_HELLO};
	hello_ext_(entries, 4 * BATON_RELAY_EXT_ENTRIES_MAX);
	accepted(BATON_RELAY_TO_RELAY, &f);
	hello_ext_(entries, sizeof entries);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_EXTENSION);
	/* An area of BATON_RELAY_EXT_MAX bytes passes, one more does not. */
	static uint8_t big[BATON_RELAY_EXT_MAX + 1];
	baton_le_put_u16(big, 1);
	baton_le_put_u16(big + 2, BATON_RELAY_EXT_MAX - 4);
	hello_ext_(big, BATON_RELAY_EXT_MAX);
	accepted(BATON_RELAY_TO_RELAY, &f);
	baton_le_put_u16(big + 2, BATON_RELAY_EXT_MAX - 3);
	hello_ext_(big, BATON_RELAY_EXT_MAX + 1);
	expect_refused(BATON_RELAY_TO_RELAY, BATON_RELAY_HELLO,
		       BATON_RELAY_EBAD_EXTENSION);
	/* A record's area has its own, smaller limit. */
	static uint8_t rec[BATON_RELAY_RECORD_EXT_MAX + 1];
	baton_le_put_u16(rec, 1);
	baton_le_put_u16(rec + 2, BATON_RELAY_RECORD_EXT_MAX - 3);
	view_(1);
	node_("old", 1, 1, rec, sizeof rec);
	expect_refused(BATON_RELAY_TO_NODE, BATON_RELAY_VIEW,
		       BATON_RELAY_EBAD_EXTENSION);
}

/* ---- the encoder refuses what the decoder would ---------------------------
 */

static uint16_t encode_refused(const struct baton_relay_frame *f,
			       enum baton_relay_dir dir)
{
	static uint8_t out[BODY_CAP];
	size_t len;
	struct baton_relay_err err = {0};
	cr_assert_eq(baton_relay_encode(f, dir, out, sizeof out, &len, &err),
		     BATON_EINVAL);
	cr_assert_neq(err.text[0], '\0');
	return err.code;
}

Test(refuse, the_encoder_refuses_the_same)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	struct baton_relay_frame hello = g[0].frame;
	cr_assert_eq(hello.type, BATON_RELAY_HELLO);
	char id[BATON_RELAY_ID_MAX + 1];
	memset(id, 'c', sizeof id);
	struct baton_relay_frame f = hello;
	f.u.hello.cluster_id = (struct baton_relay_str){id, sizeof id};
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_RELAY),
		     BATON_RELAY_ETOO_LONG);
	f = hello;
	f.u.hello.node_id = 0;
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_RELAY),
		     BATON_RELAY_EBAD_VALUE);
	f = hello;
	f.u.hello.address = RELAY_STR("a\tb");
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_RELAY),
		     BATON_RELAY_EBAD_STRING);
	cr_assert_eq(encode_refused(&hello, BATON_RELAY_TO_NODE),
		     BATON_RELAY_EWRONG_DIRECTION);
	const uint8_t critical[] = {0x01, 0x80, 0x00, 0x00};
	f = hello;
	f.ext = (struct baton_relay_ext){critical, sizeof critical};
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_RELAY),
		     BATON_RELAY_EUNKNOWN_CRITICAL);
	f.type = (enum baton_relay_type)99;
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_RELAY),
		     BATON_RELAY_EBAD_TYPE);

	static struct baton_relay_node nodes[BATON_RELAY_NODES_MAX + 1];
	for (uint32_t i = 0; i < BATON_RELAY_NODES_MAX + 1; i++)
		nodes[i] = (struct baton_relay_node){
			RELAY_STR("c"),	  i + 1, 1,	   {1, 0, 0},
			RELAY_STR("h:1"), true,	 {NULL, 0}};
	f = (struct baton_relay_frame){.type = BATON_RELAY_VIEW};
	f.u.view = (struct baton_relay_view){
		7, BATON_RELAY_NODES_MAX + 1, nodes, {NULL, 0}};
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_NODE),
		     BATON_RELAY_ETOO_MANY);
	nodes[1].node_id = 1;
	f.u.view.node_count = 2;
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_NODE),
		     BATON_RELAY_EBAD_ORDER);
	f.u.view.nodes = NULL;
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_NODE),
		     BATON_RELAY_EBAD_VALUE);

	f = (struct baton_relay_frame){.type = BATON_RELAY_DATA};
	f.u.data = (struct baton_relay_data){BATON_RELAY_MULTICAST,
					     {RELAY_STR("old"), 3, 0},
					     2,
					     1,
					     0,
					     NULL,
					     0};
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_RELAY),
		     BATON_RELAY_EBAD_VALUE);
	f.u.data.peer.node_id = 0;
	f.u.data.payload_len = BATON_RELAY_PAYLOAD_MAX + 1;
	cr_assert_eq(encode_refused(&f, BATON_RELAY_TO_RELAY),
		     BATON_RELAY_ETOO_LONG);
}
