/*
 * ADMIN_REQUEST, ADMIN_RESULT and NODE_STATE (docs/relay-protocol.md
 * "Allocated tags"): the request's entry encodes and decodes back,
 * relay_auth.c computes the MAC the document's independent computation
 * gives (Python's hmac, from the page), any changed field breaks it, the
 * key is not the HELLO proofs' key, and malformed entries are refused.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "baton/errors.h"
#include "relay_auth.h"

/* secret 0x00..0x1f, op 1, incarnation 0x0102030405060708, nonce
 * 0xa0..0xaf, timestamp 1767225600000: computed apart with Python. */
static const uint8_t vector_mac[BATON_RELAY_PROOF_MAC_LEN] = {
	0x92, 0x98, 0x44, 0xa8, 0xa9, 0x29, 0xeb, 0xd5, 0x10, 0xbf, 0x81,
	0xc3, 0x10, 0x2a, 0x20, 0xc0, 0x86, 0xc6, 0xbb, 0xb4, 0xf5, 0x6f,
	0x75, 0xe9, 0x6c, 0x1d, 0x4c, 0x04, 0x7f, 0x30, 0x76, 0x48,
};

static void vector(struct baton_relay_admin_request *r,
		   uint8_t key[RELAY_AUTH_KEY_LEN])
{
	struct baton_peer_secret s = {.len = 32};
	for (uint8_t i = 0; i < 32; i++)
		s.bytes[i] = i;
	relay_admin_key(&s, key);
	memset(r, 0, sizeof *r);
	r->present = true;
	r->op = BATON_RELAY_ADMIN_ACTIVATE;
	r->relay_incarnation = 0x0102030405060708ull;
	for (uint8_t i = 0; i < 16; i++)
		r->nonce[i] = (uint8_t)(0xa0 + i);
	r->timestamp_ms = 1767225600000ull;
	memcpy(r->mac, vector_mac, sizeof vector_mac);
}

Test(admin, the_documented_mac_verifies_and_any_change_breaks_it)
{
	struct baton_relay_admin_request r;
	uint8_t key[RELAY_AUTH_KEY_LEN];
	vector(&r, key);
	cr_assert(relay_admin_verify(key, &r));
	struct baton_relay_admin_request x = r;
	x.op = BATON_RELAY_ADMIN_DEACTIVATE;
	cr_assert_not(relay_admin_verify(key, &x));
	x = r;
	x.relay_incarnation++;
	cr_assert_not(relay_admin_verify(key, &x));
	x = r;
	x.nonce[15] ^= 1;
	cr_assert_not(relay_admin_verify(key, &x));
	x = r;
	x.timestamp_ms++;
	cr_assert_not(relay_admin_verify(key, &x));
	/* The HELLO proofs' key of the same bytes is another key. */
	struct baton_peer_secret s = {.len = 32};
	for (uint8_t i = 0; i < 32; i++)
		s.bytes[i] = i;
	uint8_t hello_key[RELAY_AUTH_KEY_LEN];
	relay_auth_key(&s, hello_key);
	cr_assert_neq(memcmp(hello_key, key, sizeof key), 0);
	cr_assert_not(relay_admin_verify(hello_key, &r));
	/* prove gives a fresh request that verifies. */
	struct baton_relay_admin_request p;
	cr_assert_eq(relay_admin_prove(key, 2, 7, 1000, &p), 0);
	cr_assert(relay_admin_verify(key, &p));
	cr_assert_eq(p.op, 2);
	cr_assert_eq(p.relay_incarnation, 7);
}

Test(admin, the_request_entry_encodes_and_decodes_back)
{
	struct baton_relay_admin_request r, back;
	uint8_t key[RELAY_AUTH_KEY_LEN];
	vector(&r, key);
	uint8_t entry[BATON_RELAY_ADMIN_ENTRY_LEN];
	cr_assert_eq(baton_relay_admin_put(&r, entry), 69u);
	cr_assert_eq(entry[0], 0x01);
	cr_assert_eq(entry[1], 0x01); /* tag 0x0101 */
	cr_assert_eq(entry[2], 65);
	cr_assert_eq(entry[4], 1); /* op */
	struct baton_relay_ext area = {entry, sizeof entry};
	struct baton_relay_err err = {0};
	cr_assert_eq(baton_relay_admin_get(&area, &back, &err), 0);
	cr_assert(back.present);
	cr_assert_eq(memcmp(&back, &r, sizeof r), 0);
	/* A value of another length is refused, not read. */
	entry[2] = 64;
	area.len = sizeof entry - 1;
	cr_assert_eq(baton_relay_admin_get(&area, &back, &err), BATON_ECORRUPT);
	cr_assert_eq(err.code, BATON_RELAY_EBAD_EXTENSION);
	/* No entry: not present. */
	area.len = 0;
	cr_assert_eq(baton_relay_admin_get(&area, &back, &err), 0);
	cr_assert_not(back.present);
}

Test(admin, results_and_node_state)
{
	uint8_t out[BATON_RELAY_ADMIN_RESULT_ENTRY_MAX];
	size_t n = baton_relay_admin_result_put(36, "refused: no", out);
	struct baton_relay_ext area = {out, (uint32_t)n};
	struct baton_relay_admin_result res;
	struct baton_relay_err err = {0};
	cr_assert_eq(baton_relay_admin_result_get(&area, &res, &err), 0);
	cr_assert(res.present);
	cr_assert_eq(res.code, 36);
	cr_assert_eq(res.text.len, 11);
	cr_assert_eq(memcmp(res.text.ptr, "refused: no", 11), 0);
	/* A NUL in the text, or a value shorter than its code: refused. */
	out[8] = 0;
	cr_assert_eq(baton_relay_admin_result_get(&area, &res, &err),
		     BATON_ECORRUPT);
	uint8_t one[5] = {0x02, 0x01, 1, 0, 0};
	area = (struct baton_relay_ext){one, sizeof one};
	cr_assert_eq(baton_relay_admin_result_get(&area, &res, &err),
		     BATON_ECORRUPT);
	uint8_t st[5];
	cr_assert_eq(baton_relay_node_state_put(1, st), 5u);
	area = (struct baton_relay_ext){st, sizeof st};
	cr_assert_eq(baton_relay_node_state_get(&area), 1);
	st[2] = 0; /* a value of another length is ignored */
	area.len = 4;
	cr_assert_eq(baton_relay_node_state_get(&area), 0);
}
