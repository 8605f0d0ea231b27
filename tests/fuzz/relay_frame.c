/* The relay protocol's decoder (src/relay/protocol.c): the input is a byte
 * stream as a relay or a node receives it, split with baton_relay_split
 * and decoded frame by frame, in each direction in turn (a frame type
 * sent the wrong way must be refused). Checked besides crashes:
 *   - every refusal carries a code of the table and a text;
 *   - a whole frame's every shorter prefix asks for more bytes (EAGAIN),
 *     never a refusal, and the number asked for is right;
 *   - the round trip is exact: a decoded frame encodes to its input,
 *     byte for byte (the encoding is canonical: the same values have one
 *     encoding), and its lists and extension areas walk to their ends;
 *   - a HELLO's HELLO_PROOF entry (tag 0x0100) is read or refused with
 *     BAD_EXTENSION, a read one writes back to the same entry bytes, and
 *     the message its MAC covers is built within its bound.
 * Seeds: the golden frames (tests/relay/golden, hello_proof.bin among
 * them). */
#include <string.h>

#include "baton/errors.h"
#include "fuzz.h"
#include "protocol.h"

static void check_refusal(int rv, const struct baton_relay_err *err)
{
	FUZZ_CHECK(rv == BATON_ECORRUPT, "refused with %d", rv);
	FUZZ_CHECK(strcmp(baton_relay_code_name(err->code), "UNKNOWN") != 0 &&
			   err->code != BATON_RELAY_OK,
		   "code %u", err->code);
	FUZZ_CHECK(err->text[0] != '\0', "no text with code %u", err->code);
}

static struct baton_relay_node nodes[BATON_RELAY_NODES_MAX];
static struct baton_relay_node_status statuses[BATON_RELAY_NODES_MAX];
static uint8_t out[BATON_RELAY_HEADER_LEN + BATON_RELAY_DATA_BODY_MAX];

static void walk_ext(struct baton_relay_ext ext)
{
	struct baton_relay_ext_entry e;
	uint32_t before = ext.len;
	while (baton_relay_ext_next(&ext, &e))
		FUZZ_CHECK(ext.len < before, "no progress");
}

/* The decoded records back into arrays, as an encoder takes them. */
static void collect_lists(struct baton_relay_frame *f)
{
	uint16_t n = 0;
	if (f->type == BATON_RELAY_VIEW) {
		struct baton_relay_list rest = f->u.view.records;
		while (baton_relay_view_next(&rest, &nodes[n])) {
			walk_ext(nodes[n].ext);
			n++;
			FUZZ_CHECK(n <= f->u.view.node_count, "too many nodes");
		}
		FUZZ_CHECK(n == f->u.view.node_count, "%u of %u nodes", n,
			   f->u.view.node_count);
		f->u.view.nodes = nodes;
	} else if (f->type == BATON_RELAY_STATUS_REPLY) {
		struct baton_relay_list rest = f->u.status_reply.records;
		while (baton_relay_status_next(&rest, &statuses[n])) {
			walk_ext(statuses[n].ext);
			n++;
			FUZZ_CHECK(n <= f->u.status_reply.node_count,
				   "too many nodes");
		}
		FUZZ_CHECK(n == f->u.status_reply.node_count, "%u of %u nodes",
			   n, f->u.status_reply.node_count);
		f->u.status_reply.nodes = statuses;
	}
}

static uint8_t proof_message[BATON_RELAY_PROOF_MESSAGE_MAX];

/* The HELLO_PROOF entry of a decoded HELLO (docs/relay-protocol.md
 * "Allocated tags"). */
static void check_proof(const struct baton_relay_frame *f)
{
	if (f->type != BATON_RELAY_HELLO)
		return;
	struct baton_relay_hello_proof p;
	struct baton_relay_err err = {0};
	int rv = baton_relay_proof_get(&f->ext, &p, &err);
	if (rv != 0) {
		check_refusal(rv, &err);
		FUZZ_CHECK(err.code == BATON_RELAY_EBAD_EXTENSION, "code %u",
			   err.code);
		return;
	}
	if (!p.present)
		return;
	struct baton_relay_ext rest = f->ext;
	struct baton_relay_ext_entry e;
	const uint8_t *at = NULL;
	while (at == NULL && baton_relay_ext_next(&rest, &e))
		if (e.tag == BATON_RELAY_TAG_HELLO_PROOF)
			at = e.value - 4;
	FUZZ_CHECK(at != NULL, "a proof read from no entry");
	uint8_t entry[BATON_RELAY_PROOF_ENTRY_LEN];
	size_t n = baton_relay_proof_put(&p, entry);
	FUZZ_CHECK(n == sizeof entry && memcmp(entry, at, n) == 0,
		   "the proof does not write back to its entry");
	size_t m = baton_relay_proof_message(&f->u.hello, &p, proof_message,
					     sizeof proof_message);
	FUZZ_CHECK(m > BATON_RELAY_PROOF_NONCE_LEN + 8 &&
			   m <= sizeof proof_message,
		   "proof message of %zu bytes", m);
}

static void round_trip(const uint8_t *frame, size_t len,
		       enum baton_relay_dir dir, struct baton_relay_frame *f)
{
	collect_lists(f);
	walk_ext(f->ext);
	check_proof(f);
	size_t out_len;
	struct baton_relay_err err;
	int rv = baton_relay_encode(f, dir, out, sizeof out, &out_len, &err);
	FUZZ_CHECK(rv == 0, "a decoded %s does not encode: %d (%s)",
		   baton_relay_type_name((uint16_t)f->type), rv, err.text);
	FUZZ_CHECK(out_len == len && memcmp(out, frame, len) == 0,
		   "%s: %zu bytes decoded, %zu encoded, not the same",
		   baton_relay_type_name((uint16_t)f->type), len, out_len);
}

/* Every prefix of a whole frame is incomplete, not malformed. */
static void check_prefixes(const uint8_t *frame, size_t len,
			   enum baton_relay_dir dir)
{
	size_t cuts[] = {0, 1, 3, 4, 11, 12, 19, len / 2, len - 1};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		if (cuts[i] >= len)
			continue;
		size_t frame_len, need;
		struct baton_relay_err err;
		int rv = baton_relay_split(frame, cuts[i], dir, &frame_len,
					   &need, &err);
		size_t want = cuts[i] < BATON_RELAY_HEADER_LEN
				      ? BATON_RELAY_HEADER_LEN - cuts[i]
				      : len - cuts[i];
		FUZZ_CHECK(rv == BATON_EAGAIN && need == want,
			   "prefix %zu of %zu: %d, need %zu (want %zu)",
			   cuts[i], len, rv, need, want);
	}
}

/* The stream in one direction, up to its end or its first refusal. */
static void stream(const uint8_t *data, size_t size, enum baton_relay_dir dir)
{
	while (size > 0) {
		size_t frame_len, need;
		struct baton_relay_err err;
		int rv = baton_relay_split(data, size, dir, &frame_len, &need,
					   &err);
		if (rv == BATON_EAGAIN) {
			FUZZ_CHECK(need > 0, "EAGAIN for no bytes");
			return;
		}
		if (rv != 0) {
			check_refusal(rv, &err);
			return;
		}
		FUZZ_CHECK(frame_len >= BATON_RELAY_HEADER_LEN &&
				   frame_len <= size,
			   "frame of %zu bytes in %zu", frame_len, size);
		check_prefixes(data, frame_len, dir);
		struct baton_relay_frame f;
		rv = baton_relay_decode(data, frame_len, dir, &f, &err);
		if (rv != 0) {
			check_refusal(rv, &err);
			return;
		}
		round_trip(data, frame_len, dir, &f);
		data += frame_len;
		size -= frame_len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stream(data, size, BATON_RELAY_TO_RELAY);
	stream(data, size, BATON_RELAY_TO_NODE);
	return 0;
}
