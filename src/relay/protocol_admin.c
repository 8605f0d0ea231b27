/*
 * The extension entries of the operator's requests and of the nodes'
 * migration state (docs/relay-protocol.md "Allocated tags":
 * ADMIN_REQUEST, ADMIN_RESULT, NODE_STATE). Pure, like the rest of the
 * codec; the HMAC itself is computed by relay_auth.c.
 */
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "le.h"
#include "protocol_internal.h"

/* Names the purpose, so that no MAC made for a HELLO proof (same relay,
 * another key anyway) or anything else verifies as an admin request. */
static const char admin_label[] = "baton relay admin v1";

_Static_assert(sizeof admin_label <= 32, "the label fits its room");
_Static_assert(BATON_RELAY_ADMIN_LEN == 65, "the documented layout");

int baton_relay_admin_get(const struct baton_relay_ext *area,
			  struct baton_relay_admin_request *out,
			  struct baton_relay_err *err)
{
	BATON_ASSERT(area != NULL && out != NULL && err != NULL);
	memset(out, 0, sizeof *out);
	struct baton_relay_ext_entry e;
	if (!relay_ext_find_fixed(area, BATON_RELAY_TAG_ADMIN_REQUEST,
				  "ADMIN_REQUEST", BATON_RELAY_ADMIN_LEN, &e,
				  err))
		return BATON_ECORRUPT;
	if (e.value == NULL)
		return 0;
	const uint8_t *v = e.value;
	out->op = v[0];
	out->relay_incarnation = baton_le_get_u64(v + 1);
	memcpy(out->nonce, v + 9, BATON_RELAY_PROOF_NONCE_LEN);
	v += 9 + BATON_RELAY_PROOF_NONCE_LEN;
	out->timestamp_ms = baton_le_get_u64(v);
	memcpy(out->mac, v + 8, BATON_RELAY_PROOF_MAC_LEN);
	out->present = true;
	return 0;
}

/* The value without the MAC. */
static size_t put_fields(const struct baton_relay_admin_request *r, uint8_t *v)
{
	v[0] = r->op;
	baton_le_put_u64(v + 1, r->relay_incarnation);
	memcpy(v + 9, r->nonce, BATON_RELAY_PROOF_NONCE_LEN);
	baton_le_put_u64(v + 9 + BATON_RELAY_PROOF_NONCE_LEN, r->timestamp_ms);
	return 17u + BATON_RELAY_PROOF_NONCE_LEN;
}

size_t baton_relay_admin_put(const struct baton_relay_admin_request *r,
			     uint8_t out[BATON_RELAY_ADMIN_ENTRY_LEN])
{
	BATON_ASSERT(r != NULL && out != NULL);
	baton_le_put_u16(out, BATON_RELAY_TAG_ADMIN_REQUEST);
	baton_le_put_u16(out + 2, BATON_RELAY_ADMIN_LEN);
	size_t n = put_fields(r, out + 4);
	memcpy(out + 4 + n, r->mac, BATON_RELAY_PROOF_MAC_LEN);
	BATON_ASSERT(n + BATON_RELAY_PROOF_MAC_LEN == BATON_RELAY_ADMIN_LEN);
	return BATON_RELAY_ADMIN_ENTRY_LEN;
}

size_t baton_relay_admin_message(const struct baton_relay_admin_request *r,
				 uint8_t *out, size_t cap)
{
	BATON_ASSERT(r != NULL && out != NULL);
	BATON_ASSERT(cap >= BATON_RELAY_ADMIN_MESSAGE_MAX);
	size_t n = sizeof admin_label; /* with its NUL */
	memcpy(out, admin_label, n);
	n += put_fields(r, out + n);
	BATON_ASSERT(n <= BATON_RELAY_ADMIN_MESSAGE_MAX);
	return n;
}

int baton_relay_admin_result_get(const struct baton_relay_ext *area,
				 struct baton_relay_admin_result *out,
				 struct baton_relay_err *err)
{
	BATON_ASSERT(area != NULL && out != NULL && err != NULL);
	memset(out, 0, sizeof *out);
	struct baton_relay_ext_entry e;
	if (!relay_ext_find(area, BATON_RELAY_TAG_ADMIN_RESULT, &e))
		return 0;
	size_t text_len = e.len >= 2 ? e.len - 2u : 0;
	if (e.len < 2 || text_len > BATON_RELAY_TEXT_MAX ||
	    memchr(e.value + 2, 0, text_len) != NULL) {
		relay_set_err(err, BATON_RELAY_EBAD_EXTENSION,
			      "ADMIN_RESULT (tag 0x%04x) of %u bytes: "
			      "a code and a text of at most %u bytes "
			      "without NUL expected",
			      BATON_RELAY_TAG_ADMIN_RESULT, e.len,
			      BATON_RELAY_TEXT_MAX);
		return BATON_ECORRUPT;
	}
	out->code = baton_le_get_u16(e.value);
	out->text.ptr = (const char *)e.value + 2;
	out->text.len = (uint16_t)text_len;
	out->present = true;
	return 0;
}

size_t
baton_relay_admin_result_put(uint16_t code, const char *text,
			     uint8_t out[BATON_RELAY_ADMIN_RESULT_ENTRY_MAX])
{
	BATON_ASSERT(text != NULL && out != NULL);
	size_t len = 0;
	while (len < BATON_RELAY_TEXT_MAX && text[len] != '\0')
		len++;
	baton_le_put_u16(out, BATON_RELAY_TAG_ADMIN_RESULT);
	baton_le_put_u16(out + 2, (uint16_t)(2u + len));
	baton_le_put_u16(out + 4, code);
	memcpy(out + 6, text, len);
	return 6u + len;
}

uint8_t baton_relay_node_state_get(const struct baton_relay_ext *area)
{
	BATON_ASSERT(area != NULL);
	struct baton_relay_ext rest = *area;
	struct baton_relay_ext_entry e;
	while (baton_relay_ext_next(&rest, &e))
		if (e.tag == BATON_RELAY_TAG_NODE_STATE && e.len == 1)
			return e.value[0];
	return 0;
}

size_t baton_relay_node_state_put(uint8_t flags, uint8_t out[5])
{
	BATON_ASSERT(out != NULL);
	baton_le_put_u16(out, BATON_RELAY_TAG_NODE_STATE);
	baton_le_put_u16(out + 2, 1);
	out[4] = flags;
	return 5;
}
