/*
 * Format 1 (src/server/migration_wire_v1.c): release 1.3.0's unsealed
 * messages, byte for byte as 1.3.0 (commit 0ce4bfc) lays them out; what
 * 1.3.0 could not have sent is refused, and a sealed message never passes
 * for one.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "server.h"

/* ACK, session 0x0102030405060708, applied 9, index 10, value 11, no
 * data: 1.3.0's u8 type, four u64 and a u32 length, little-endian. */
static const uint8_t ack_v1[] = {
	7, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 9, 0, 0, 0,
	0, 0,	 0,    0,    10,   0,	 0,    0,    0,	   0, 0, 0, 11,
	0, 0,	 0,    0,    0,	   0,	 0,    0,    0,	   0, 0,
};

Test(migration_wire_v1, encodes_what_1_3_0_reads)
{
	struct migration_msg m = {.type = MIG_ACK,
				  .session = 0x0102030405060708ull,
				  .applied = 9,
				  .index = 10,
				  .value = 11};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(migration_msg_encode_v1(&m, &b), 0);
	cr_assert_eq(b.len, sizeof ack_v1);
	cr_assert_eq(memcmp(b.data, ack_v1, sizeof ack_v1), 0);
	baton_buf_free(&b);
}

Test(migration_wire_v1, decodes_what_1_3_0_sends)
{
	uint8_t entry[sizeof ack_v1 + 3];
	memcpy(entry, ack_v1, sizeof ack_v1);
	entry[0] = MIG_ENTRY;
	entry[33] = 3; /* data length */
	memcpy(entry + sizeof ack_v1, "abc", 3);
	struct migration_msg m;
	cr_assert_eq(migration_msg_decode_v1(entry, sizeof entry, &m), 0);
	cr_assert_eq(m.type, MIG_ENTRY);
	cr_assert_eq(m.session, 0x0102030405060708ull);
	cr_assert_eq(m.applied, 9);
	cr_assert_eq(m.index, 10);
	cr_assert_eq(m.value, 11);
	cr_assert_eq(m.len, 3);
	cr_assert_eq(memcmp(m.data, "abc", 3), 0);
	/* Nothing but the wire's fields: no sender, no sequence. */
	cr_assert_eq(m.from_cluster[0], '\0');
	cr_assert_eq(m.seq, 0);
}

Test(migration_wire_v1, refuses_what_1_3_0_could_not_have_sent)
{
	struct migration_msg m;
	uint8_t buf[sizeof ack_v1 + 1];
	memcpy(buf, ack_v1, sizeof ack_v1);
	/* A type format 1 does not have (ENTRY_PART), and 0. */
	buf[0] = MIG_ENTRY_PART;
	cr_assert_eq(migration_msg_decode_v1(buf, sizeof ack_v1, &m),
		     BATON_ECORRUPT);
	buf[0] = 0;
	cr_assert_eq(migration_msg_decode_v1(buf, sizeof ack_v1, &m),
		     BATON_ECORRUPT);
	/* A length that is not what follows; truncated. */
	buf[0] = MIG_ACK;
	cr_assert_eq(migration_msg_decode_v1(buf, sizeof buf, &m),
		     BATON_ECORRUPT);
	cr_assert_eq(migration_msg_decode_v1(buf, sizeof ack_v1 - 1, &m),
		     BATON_ECORRUPT);
	/* EXPORT_REQ and AUTHORITY carry a cluster id. */
	buf[0] = MIG_EXPORT_REQ;
	cr_assert_eq(migration_msg_decode_v1(buf, sizeof ack_v1, &m),
		     BATON_ECORRUPT);
	struct migration_msg part = {.type = MIG_ENTRY_PART};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(migration_msg_encode_v1(&part, &b), BATON_EINVAL);
	baton_buf_free(&b);
}

Test(migration_wire_v1, a_sealed_message_is_not_format_1)
{
	struct migration_keys k;
	static const char secret[] = "0123456789abcdef0123456789abcdef";
	cr_assert_eq(migration_keys_init(&k, (const uint8_t *)secret,
					 strlen(secret)),
		     0);
	struct migration_msg m = {.type = MIG_HEAD, .from_node = 1, .seq = 1};
	strcpy(m.from_cluster, "old");
	strcpy(m.to_cluster, "new");
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(migration_msg_seal(&k, &m, &b), 0);
	struct migration_msg out;
	cr_assert_eq(migration_msg_decode_v1(b.data, b.len, &out),
		     BATON_ECORRUPT);
	baton_buf_reset(&b);
	cr_assert_eq(migration_msg_encode_v1(&m, &b), 0);
	struct baton_buf plain;
	baton_buf_init(&plain);
	cr_assert_neq(migration_msg_open(&k, b.data, b.len, &out, &plain), 0);
	baton_buf_free(&plain);
	baton_buf_free(&b);
	migration_keys_wipe(&k);
}
