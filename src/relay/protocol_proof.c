/*
 * The HELLO_PROOF extension entry (docs/relay-protocol.md "Allocated
 * tags"): its value's layout and the message its MAC covers. Pure, like
 * the rest of the codec; the HMAC itself is computed by relay_auth.c.
 */
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "le.h"
#include "protocol_internal.h"

/* Names the purpose and the edition, so that a MAC made for anything else
 * with the same key never verifies as a HELLO proof. */
static const char proof_label[] = "baton relay hello proof v1";

_Static_assert(sizeof proof_label <= 32, "the label fits its room");
_Static_assert(BATON_RELAY_PROOF_LEN == 56, "the documented layout");

int baton_relay_proof_get(const struct baton_relay_ext *area,
			  struct baton_relay_hello_proof *out,
			  struct baton_relay_err *err)
{
	BATON_ASSERT(area != NULL && out != NULL && err != NULL);
	memset(out, 0, sizeof *out);
	struct baton_relay_ext_entry e;
	if (!relay_ext_find_fixed(area, BATON_RELAY_TAG_HELLO_PROOF,
				  "HELLO_PROOF", BATON_RELAY_PROOF_LEN, &e,
				  err))
		return BATON_ECORRUPT;
	if (e.value == NULL)
		return 0;
	const uint8_t *v = e.value;
	memcpy(out->nonce, v, BATON_RELAY_PROOF_NONCE_LEN);
	v += BATON_RELAY_PROOF_NONCE_LEN;
	out->timestamp_ms = baton_le_get_u64(v);
	memcpy(out->mac, v + 8, BATON_RELAY_PROOF_MAC_LEN);
	out->present = true;
	return 0;
}

size_t baton_relay_proof_put(const struct baton_relay_hello_proof *p,
			     uint8_t out[BATON_RELAY_PROOF_ENTRY_LEN])
{
	BATON_ASSERT(p != NULL && out != NULL);
	baton_le_put_u16(out, BATON_RELAY_TAG_HELLO_PROOF);
	baton_le_put_u16(out + 2, BATON_RELAY_PROOF_LEN);
	uint8_t *v = out + 4;
	memcpy(v, p->nonce, BATON_RELAY_PROOF_NONCE_LEN);
	v += BATON_RELAY_PROOF_NONCE_LEN;
	baton_le_put_u64(v, p->timestamp_ms);
	memcpy(v + 8, p->mac, BATON_RELAY_PROOF_MAC_LEN);
	return BATON_RELAY_PROOF_ENTRY_LEN;
}

static size_t put_str(uint8_t *out, struct baton_relay_str s)
{
	baton_le_put_u16(out, s.len);
	memcpy(out + 2, s.ptr, s.len);
	return 2u + s.len;
}

size_t baton_relay_proof_message(const struct baton_relay_hello *h,
				 const struct baton_relay_hello_proof *p,
				 uint8_t *out, size_t cap)
{
	BATON_ASSERT(h != NULL && p != NULL && out != NULL);
	BATON_ASSERT(cap >= BATON_RELAY_PROOF_MESSAGE_MAX);
	BATON_ASSERT(h->cluster_id.len >= 1 &&
		     h->cluster_id.len <= BATON_RELAY_ID_MAX);
	BATON_ASSERT(h->address.len >= 1 &&
		     h->address.len <= BATON_RELAY_ADDR_MAX);
	/* label NUL | the HELLO's fields exactly as its body carries them |
	 * nonce | timestamp (u64 LE) */
	size_t n = sizeof proof_label;
	memcpy(out, proof_label, n);
	n += put_str(out + n, h->cluster_id);
	baton_le_put_u64(out + n, h->node_id);
	baton_le_put_u64(out + n + 8, h->incarnation);
	n += 16;
	baton_le_put_u16(out + n, h->release.major);
	baton_le_put_u16(out + n + 2, h->release.minor);
	baton_le_put_u16(out + n + 4, h->release.patch);
	n += 6;
	n += put_str(out + n, h->address);
	memcpy(out + n, p->nonce, BATON_RELAY_PROOF_NONCE_LEN);
	n += BATON_RELAY_PROOF_NONCE_LEN;
	baton_le_put_u64(out + n, p->timestamp_ms);
	n += 8;
	BATON_ASSERT(n <= BATON_RELAY_PROOF_MESSAGE_MAX);
	return n;
}
