/*
 * The relay protocol's frozen contract: every golden file
 * (tests/relay/golden/<name>.bin) decodes to the values of
 * golden_frames.c, field by field, and encoding those values gives the
 * file byte for byte. A change of the encoder or decoder that moves one
 * byte fails here. Never regenerate a file to make this pass.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "baton/errors.h"
#include "golden_frames.h"

#define FRAME_CAP (1u << 16)

static uint8_t file[FRAME_CAP];
static uint8_t encoded[FRAME_CAP];

static size_t load(const char *name)
{
	size_t len =
		golden_read(BATON_RELAY_GOLDEN_DIR, name, file, sizeof file);
	cr_assert_neq(len, SIZE_MAX, "golden/%s.bin is missing or too large",
		      name);
	return len;
}

static void expect_str(struct baton_relay_str got, struct baton_relay_str want,
		       const char *what)
{
	cr_assert_eq(got.len, want.len, "%s: %u bytes, want %u", what, got.len,
		     want.len);
	cr_assert(want.len == 0 || memcmp(got.ptr, want.ptr, want.len) == 0,
		  "%s: \"%.*s\", want \"%.*s\"", what, got.len, got.ptr,
		  want.len, want.ptr);
}

static void expect_ext(struct baton_relay_ext got, struct baton_relay_ext want,
		       const char *what)
{
	cr_assert_eq(got.len, want.len, "%s: %u extension bytes, want %u", what,
		     got.len, want.len);
	cr_assert(want.len == 0 || memcmp(got.ptr, want.ptr, want.len) == 0,
		  "%s: extension bytes differ", what);
}

static void expect_release(struct baton_release got, struct baton_release want)
{
	cr_assert(got.major == want.major && got.minor == want.minor &&
			  got.patch == want.patch,
		  "release %u.%u.%u, want %u.%u.%u", got.major, got.minor,
		  got.patch, want.major, want.minor, want.patch);
}

static void expect_peer(const struct baton_relay_peer *got,
			const struct baton_relay_peer *want)
{
	expect_str(got->cluster_id, want->cluster_id, "peer cluster id");
	cr_assert_eq(got->node_id, want->node_id);
	cr_assert_eq(got->incarnation, want->incarnation);
}

static void expect_view(const struct baton_relay_view *got,
			const struct baton_relay_view *want)
{
	cr_assert_eq(got->number, want->number);
	cr_assert_eq(got->node_count, want->node_count);
	cr_assert_null(got->nodes);
	struct baton_relay_list rest = got->records;
	struct baton_relay_node n;
	for (uint16_t i = 0; i < want->node_count; i++) {
		cr_assert(baton_relay_view_next(&rest, &n), "node %u", i);
		const struct baton_relay_node *w = &want->nodes[i];
		expect_str(n.cluster_id, w->cluster_id, "node cluster id");
		cr_assert_eq(n.node_id, w->node_id);
		cr_assert_eq(n.incarnation, w->incarnation);
		expect_release(n.release, w->release);
		expect_str(n.address, w->address, "node address");
		cr_assert_eq(n.connected, w->connected);
		expect_ext(n.ext, w->ext, "node");
	}
	cr_assert_not(baton_relay_view_next(&rest, &n), "a node too many");
}

static void expect_status_reply(const struct baton_relay_status_reply *got,
				const struct baton_relay_status_reply *want)
{
	cr_assert_eq(got->relay_incarnation, want->relay_incarnation);
	cr_assert_eq(got->view_number, want->view_number);
	cr_assert_eq(got->active, want->active);
	cr_assert_eq(got->messages_relayed, want->messages_relayed);
	cr_assert_eq(got->bytes_relayed, want->bytes_relayed);
	cr_assert_eq(got->messages_dropped, want->messages_dropped);
	cr_assert_eq(got->node_count, want->node_count);
	struct baton_relay_list rest = got->records;
	struct baton_relay_node_status s;
	for (uint16_t i = 0; i < want->node_count; i++) {
		cr_assert(baton_relay_status_next(&rest, &s), "node %u", i);
		const struct baton_relay_node_status *w = &want->nodes[i];
		expect_str(s.cluster_id, w->cluster_id, "node cluster id");
		cr_assert_eq(s.node_id, w->node_id);
		cr_assert_eq(s.incarnation, w->incarnation);
		cr_assert_eq(s.connected, w->connected);
		cr_assert_eq(s.queue_messages, w->queue_messages);
		cr_assert_eq(s.queue_bytes, w->queue_bytes);
		cr_assert_eq(s.messages_in, w->messages_in);
		cr_assert_eq(s.messages_out, w->messages_out);
		expect_ext(s.ext, w->ext, "node");
	}
	cr_assert_not(baton_relay_status_next(&rest, &s), "a node too many");
}

/* Every field of a decoded frame against the golden value. */
static void expect_frame(const struct baton_relay_frame *got,
			 const struct baton_relay_frame *want)
{
	cr_assert_eq(got->type, want->type);
	expect_ext(got->ext, want->ext, "frame");
	const struct baton_relay_hello *h = &got->u.hello, *wh = &want->u.hello;
	const struct baton_relay_data *d = &got->u.data, *wd = &want->u.data;
	switch (want->type) {
	case BATON_RELAY_HELLO:
		expect_str(h->cluster_id, wh->cluster_id, "cluster id");
		cr_assert_eq(h->node_id, wh->node_id);
		cr_assert_eq(h->incarnation, wh->incarnation);
		expect_release(h->release, wh->release);
		expect_str(h->address, wh->address, "address");
		break;
	case BATON_RELAY_WELCOME:
		cr_assert_eq(got->u.welcome.code, want->u.welcome.code);
		cr_assert_eq(got->u.welcome.relay_incarnation,
			     want->u.welcome.relay_incarnation);
		expect_str(got->u.welcome.reason, want->u.welcome.reason,
			   "reason");
		break;
	case BATON_RELAY_VIEW:
		expect_view(&got->u.view, &want->u.view);
		break;
	case BATON_RELAY_LEAVE:
		expect_str(got->u.leave.reason, want->u.leave.reason, "reason");
		break;
	case BATON_RELAY_DATA:
		cr_assert_eq(d->kind, wd->kind);
		expect_peer(&d->peer, &wd->peer);
		cr_assert_eq(d->seq, wd->seq);
		cr_assert_eq(d->first_seq, wd->first_seq);
		cr_assert_eq(d->payload_len, wd->payload_len);
		cr_assert(memcmp(d->payload, wd->payload, wd->payload_len) ==
			  0);
		cr_assert_neq(d->payload_checksum, 0);
		break;
	case BATON_RELAY_ACK:
		cr_assert_eq(got->u.ack.kind, want->u.ack.kind);
		expect_peer(&got->u.ack.peer, &want->u.ack.peer);
		cr_assert_eq(got->u.ack.seq, want->u.ack.seq);
		break;
	case BATON_RELAY_ACTIVATE:
	case BATON_RELAY_DEACTIVATE:
	case BATON_RELAY_STATUS:
		break;
	case BATON_RELAY_STATUS_REPLY:
		expect_status_reply(&got->u.status_reply,
				    &want->u.status_reply);
		break;
	case BATON_RELAY_PING:
	case BATON_RELAY_PONG:
		cr_assert_eq(got->u.ping_token, want->u.ping_token);
		break;
	case BATON_RELAY_ERROR:
		cr_assert_eq(got->u.error.code, want->u.error.code);
		cr_assert_eq(got->u.error.frame_type, want->u.error.frame_type);
		expect_str(got->u.error.text, want->u.error.text, "text");
		break;
	}
}

Test(golden, every_file_decodes_to_its_values)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		size_t len = load(g[i].name);
		struct baton_relay_frame f;
		struct baton_relay_err err;
		int rv = baton_relay_decode(file, len, g[i].dir, &f, &err);
		cr_assert_eq(rv, 0, "%s: %d %s", g[i].name, rv, err.text);
		expect_frame(&f, &g[i].frame);
	}
}

Test(golden, encoding_the_values_gives_each_file_byte_for_byte)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		size_t len = load(g[i].name), out_len;
		struct baton_relay_err err;
		int rv = baton_relay_encode(&g[i].frame, g[i].dir, encoded,
					    sizeof encoded, &out_len, &err);
		cr_assert_eq(rv, 0, "%s: %d %s", g[i].name, rv, err.text);
		cr_assert_eq(out_len, len, "%s: %zu bytes, the file %zu",
			     g[i].name, out_len, len);
		for (size_t b = 0; b < len; b++)
			cr_assert_eq(encoded[b], file[b],
				     "%s: byte %zu is 0x%02x, the file has "
				     "0x%02x",
				     g[i].name, b, encoded[b], file[b]);
	}
}

/* Every type has a golden file, so no frame escapes the contract. */
Test(golden, every_frame_type_has_a_file)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	for (uint16_t type = 1; baton_relay_type_name(type) != NULL; type++) {
		bool found = false;
		for (size_t i = 0; i < n; i++)
			found |= g[i].frame.type == type;
		cr_assert(found, "no golden frame of type %s",
			  baton_relay_type_name(type));
	}
}

/* The header of each file, read by hand: what docs/relay-protocol.md
 * says every frame starts with. */
Test(golden, headers_are_as_specified)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		size_t len = load(g[i].name);
		cr_assert_geq(len, BATON_RELAY_HEADER_LEN);
		cr_assert_eq(memcmp(file, "\xba\x52\x4c\x59", 4), 0);
		cr_assert_eq(file[4] | file[5] << 8, (int)g[i].frame.type);
		cr_assert_eq(file[6] | file[7] << 8, 0, "flags");
		uint32_t body = (uint32_t)file[8] | (uint32_t)file[9] << 8 |
				(uint32_t)file[10] << 16 |
				(uint32_t)file[11] << 24;
		cr_assert_eq(body + BATON_RELAY_HEADER_LEN, len, "%s",
			     g[i].name);
	}
}

Test(golden, unknown_extension_entries_are_skipped_and_readable)
{
	size_t len = load("hello_ext");
	struct baton_relay_frame f;
	struct baton_relay_err err;
	cr_assert_eq(
		baton_relay_decode(file, len, BATON_RELAY_TO_RELAY, &f, &err),
		0, "%s", err.text);
	struct baton_relay_ext rest = f.ext;
	struct baton_relay_ext_entry e;
	cr_assert(baton_relay_ext_next(&rest, &e));
	cr_assert_eq(e.tag, 1);
	cr_assert_eq(e.len, 3);
	cr_assert_eq(memcmp(e.value, "abc", 3), 0);
	cr_assert(baton_relay_ext_next(&rest, &e));
	cr_assert_eq(e.tag, 2);
	cr_assert_eq(e.len, 0);
	cr_assert_not(baton_relay_ext_next(&rest, &e));
	/* Everything else is the plain HELLO's. */
	cr_assert_eq(f.u.hello.node_id, 1);
}

/* ---- the streaming helper ---------------------------------------------- */

Test(split, every_prefix_of_every_frame_asks_for_the_rest)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		size_t len = load(g[i].name);
		for (size_t have = 0; have < len; have++) {
			size_t frame_len, need;
			struct baton_relay_err err;
			int rv = baton_relay_split(file, have, g[i].dir,
						   &frame_len, &need, &err);
			cr_assert_eq(rv, BATON_EAGAIN, "%s at %zu: %d %s",
				     g[i].name, have, rv, err.text);
			size_t want = have < BATON_RELAY_HEADER_LEN
					      ? BATON_RELAY_HEADER_LEN - have
					      : len - have;
			cr_assert_eq(need, want, "%s at %zu", g[i].name, have);
		}
		size_t frame_len, need;
		struct baton_relay_err err;
		cr_assert_eq(baton_relay_split(file, len, g[i].dir, &frame_len,
					       &need, &err),
			     0);
		cr_assert_eq(frame_len, len);
	}
}

/* All the frames that go to a node, back to back in one stream, split
 * and decoded in turn. */
Test(split, a_stream_of_frames_splits_into_each)
{
	static uint8_t stream[FRAME_CAP * 2];
	size_t n, total = 0, count = 0;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		if (g[i].dir != BATON_RELAY_TO_NODE)
			continue;
		size_t len = load(g[i].name);
		cr_assert_leq(total + len, sizeof stream);
		memcpy(stream + total, file, len);
		total += len;
		count++;
	}
	size_t at = 0, seen = 0;
	while (at < total) {
		size_t frame_len, need;
		struct baton_relay_err err;
		cr_assert_eq(baton_relay_split(stream + at, total - at,
					       BATON_RELAY_TO_NODE, &frame_len,
					       &need, &err),
			     0, "at %zu: %s", at, err.text);
		struct baton_relay_frame f;
		cr_assert_eq(baton_relay_decode(stream + at, frame_len,
						BATON_RELAY_TO_NODE, &f, &err),
			     0, "at %zu: %s", at, err.text);
		at += frame_len;
		seen++;
	}
	cr_assert_eq(seen, count);
}

/* ---- encoder details ----------------------------------------------------- */

Test(encode, a_small_buffer_is_refused_with_the_length_needed)
{
	size_t n, len;
	const struct golden_frame *g = golden_frames(&n);
	struct baton_relay_err err;
	cr_assert_eq(
		baton_relay_encode(&g[0].frame, g[0].dir, NULL, 0, &len, &err),
		BATON_ETOOBIG);
	size_t file_len = load(g[0].name);
	cr_assert_eq(len, file_len);
	cr_assert_eq(baton_relay_encode(&g[0].frame, g[0].dir, encoded, len - 1,
					&len, &err),
		     BATON_ETOOBIG);
	cr_assert_eq(len, file_len);
	cr_assert_eq(baton_relay_encode(&g[0].frame, g[0].dir, encoded, len,
					&len, &err),
		     0);
}

Test(encode, the_payload_checksum_is_computed_not_taken)
{
	size_t n, len;
	const struct golden_frame *g = golden_frames(&n);
	for (size_t i = 0; i < n; i++) {
		if (g[i].frame.type != BATON_RELAY_DATA)
			continue;
		struct baton_relay_frame f = g[i].frame;
		f.u.data.payload_checksum = 12345; /* ignored */
		struct baton_relay_err err;
		cr_assert_eq(baton_relay_encode(&f, g[i].dir, encoded,
						sizeof encoded, &len, &err),
			     0);
		size_t file_len = load(g[i].name);
		cr_assert_eq(len, file_len);
		cr_assert_eq(memcmp(encoded, file, len), 0);
	}
}

Test(tables, every_code_and_type_has_a_name)
{
#define CHECK_CODE(name, number, text)                                         \
	cr_assert_str_eq(baton_relay_code_name(number), #name);                \
	cr_assert_str_eq(baton_relay_code_text(number), text);
	BATON_RELAY_CODES(CHECK_CODE)
#undef CHECK_CODE
	cr_assert_str_eq(baton_relay_code_name(999), "UNKNOWN");
	cr_assert_str_eq(baton_relay_code_text(999), "unknown code");
	cr_assert_null(baton_relay_type_name(0));
	cr_assert_null(baton_relay_type_name(14));
	cr_assert_str_eq(baton_relay_type_name(BATON_RELAY_STATUS_REPLY),
			 "STATUS_REPLY");
}
