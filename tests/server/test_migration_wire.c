/*
 * The migration's sealed messages (src/server/migration_wire.c): every
 * type round-trips; a message altered anywhere, sealed with another
 * secret, or for another pair of clusters does not open; a replay is
 * refused; the proxy's proof depends on every input. The flags are in
 * test_config.c.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "server.h"

static const char secret_a[] = "0123456789abcdef0123456789abcdef";
static const char secret_b[] = "fedcba9876543210fedcba9876543210";

static void keys(struct migration_keys *k, const char *secret)
{
	cr_assert_eq(
		migration_keys_init(k, (const uint8_t *)secret, strlen(secret)),
		0);
}

static struct migration_msg msg(uint8_t type, const uint8_t *data, size_t len)
{
	struct migration_msg m = {
		.type = type,
		.from_node = 3,
		.to_node = 11,
		.session = 0x1122334455667788ull,
		.seq = 1000,
		.applied = 42,
		.index = 41,
		.value = 7,
		.data = data,
		.len = len,
	};
	strcpy(m.from_cluster, "old");
	strcpy(m.to_cluster, "new");
	return m;
}

Test(migration_wire, every_type_round_trips_and_the_data_is_not_in_clear)
{
	static struct migration_keys k;
	keys(&k, secret_a);
	static const uint8_t data[] = "the-secret-value";
	for (uint8_t t = 1; t <= MIG_MSG_TYPE_MAX; t++) {
		struct migration_msg m = msg(t, data, sizeof data - 1);
		struct baton_buf b, plain;
		baton_buf_init(&b);
		baton_buf_init(&plain);
		cr_assert_eq(migration_msg_seal(&k, &m, &b), 0);
		cr_assert(memmem(b.data, b.len, "the-secret-value", 16) ==
			  NULL);
		struct migration_msg out;
		cr_assert_eq(
			migration_msg_open(&k, b.data, b.len, &out, &plain), 0,
			"type %u", t);
		cr_assert_eq(out.type, t);
		cr_assert_str_eq(out.from_cluster, "old");
		cr_assert_str_eq(out.to_cluster, "new");
		cr_assert_eq(out.from_node, 3);
		cr_assert_eq(out.to_node, 11);
		cr_assert_eq(out.session, m.session);
		cr_assert_eq(out.seq, 1000);
		cr_assert_eq(out.applied, 42);
		cr_assert_eq(out.index, 41);
		cr_assert_eq(out.value, 7);
		cr_assert_eq(out.len, sizeof data - 1);
		cr_assert(memcmp(out.data, data, out.len) == 0);
		cr_assert_str_neq(migration_msg_name(t), "UNKNOWN");
		baton_buf_free(&b);
		baton_buf_free(&plain);
	}
	cr_assert_str_eq(migration_msg_name(0), "UNKNOWN");
	cr_assert_str_eq(migration_msg_name(MIG_MSG_TYPE_MAX + 1), "UNKNOWN");
	migration_keys_wipe(&k);
}

Test(migration_wire, a_change_to_any_byte_is_refused)
{
	static struct migration_keys k;
	keys(&k, secret_a);
	static const uint8_t data[] = "payload";
	struct migration_msg m = msg(MIG_ENTRY, data, 7);
	struct baton_buf b, plain;
	baton_buf_init(&b);
	baton_buf_init(&plain);
	cr_assert_eq(migration_msg_seal(&k, &m, &b), 0);
	struct migration_msg out;
	for (size_t i = 0; i < b.len; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			b.data[i] ^= (uint8_t)(1u << bit);
			int rv = migration_msg_open(&k, b.data, b.len, &out,
						    &plain);
			cr_assert(rv == BATON_EINVAL || rv == BATON_ECORRUPT ||
					  rv == BATON_EVERSION,
				  "byte %zu bit %d: %d", i, bit, rv);
			b.data[i] ^= (uint8_t)(1u << bit);
		}
	}
	/* Every truncation, and a byte more. */
	for (size_t cut = 0; cut < b.len; cut++)
		cr_assert_neq(migration_msg_open(&k, b.data, cut, &out, &plain),
			      0, "cut at %zu", cut);
	cr_assert_eq(baton_buf_append(&b, "x", 1), 0);
	cr_assert_eq(migration_msg_open(&k, b.data, b.len, &out, &plain),
		     BATON_ECORRUPT);
	baton_buf_free(&b);
	baton_buf_free(&plain);
	migration_keys_wipe(&k);
}

Test(migration_wire, another_secret_or_another_direction_does_not_open)
{
	static struct migration_keys ka, kb;
	keys(&ka, secret_a);
	keys(&kb, secret_b);
	static const uint8_t data[] = "v";
	struct migration_msg m = msg(MIG_HANDOFF, data, 1);
	struct baton_buf b, plain;
	baton_buf_init(&b);
	baton_buf_init(&plain);
	cr_assert_eq(migration_msg_seal(&ka, &m, &b), 0);
	struct migration_msg out;
	cr_assert_eq(migration_msg_open(&kb, b.data, b.len, &out, &plain),
		     BATON_EINVAL);
	/* The header says who sends and who receives; what it says selects
	 * the key, so the same bytes sealed old -> new do not open as new ->
	 * old, nor as sent to a third cluster. */
	struct migration_msg parsed;
	cr_assert_eq(migration_msg_parse(b.data, b.len, &parsed), 0);
	cr_assert_str_eq(parsed.from_cluster, "old");
	/* "old" and "new" are both 3 bytes: swap them in place. */
	uint8_t *from = memmem(b.data, b.len, "old", 3);
	uint8_t *to = memmem(b.data, b.len, "new", 3);
	cr_assert(from != NULL && to != NULL);
	memcpy(from, "new", 3);
	memcpy(to, "old", 3);
	cr_assert_eq(migration_msg_open(&ka, b.data, b.len, &out, &plain),
		     BATON_EINVAL);
	memcpy(from, "old", 3);
	memcpy(to, "xyz", 3);
	cr_assert_eq(migration_msg_open(&ka, b.data, b.len, &out, &plain),
		     BATON_EINVAL);
	memcpy(to, "new", 3);
	cr_assert_eq(migration_msg_open(&ka, b.data, b.len, &out, &plain), 0);
	/* Sealed new -> old with the right secret: opens, and says so. */
	strcpy(m.from_cluster, "new");
	strcpy(m.to_cluster, "old");
	baton_buf_reset(&b);
	cr_assert_eq(migration_msg_seal(&ka, &m, &b), 0);
	cr_assert_eq(migration_msg_open(&ka, b.data, b.len, &out, &plain), 0);
	cr_assert_str_eq(out.from_cluster, "new");
	baton_buf_free(&b);
	baton_buf_free(&plain);
	migration_keys_wipe(&ka);
	migration_keys_wipe(&kb);
}

Test(migration_wire, a_replay_and_an_older_sequence_are_refused)
{
	static struct migration_replay t;
	memset(&t, 0, sizeof t);
	struct migration_msg m = msg(MIG_ACK, NULL, 0);
	cr_assert(migration_replay_check(&t, &m));
	cr_assert(!migration_replay_check(&t, &m)); /* the same again */
	m.seq = 999;
	cr_assert(!migration_replay_check(&t, &m));
	m.seq = 1001;
	cr_assert(migration_replay_check(&t, &m));
	/* Another sender has its own numbers. */
	m.from_node = 4;
	m.seq = 5;
	cr_assert(migration_replay_check(&t, &m));
	strcpy(m.from_cluster, "new");
	m.from_node = 3;
	m.seq = 5;
	cr_assert(migration_replay_check(&t, &m));
	m.from_node = 3;
	strcpy(m.from_cluster, "old");
	m.seq = 1001;
	cr_assert(!migration_replay_check(&t, &m));
	/* Multicast (to node 0) has its own order: the relay keeps order
	 * within a stream, not between a sender's streams. */
	m.to_node = 0;
	m.seq = 1001;
	cr_assert(migration_replay_check(&t, &m));
	cr_assert(!migration_replay_check(&t, &m));
}

Test(migration_wire, bad_fields_are_refused_when_sealing_and_opening)
{
	static struct migration_keys k;
	keys(&k, secret_a);
	struct baton_buf b, plain;
	baton_buf_init(&b);
	baton_buf_init(&plain);
	/* No sender cluster. */
	struct migration_msg m = msg(MIG_HEAD, NULL, 0);
	m.from_cluster[0] = '\0';
	cr_assert_eq(migration_msg_seal(&k, &m, &b), BATON_EINVAL);
	cr_assert_eq(b.len, 0);
	/* A cluster id must be 1 to 255 bytes, even sealed. */
	struct migration_msg req = msg(MIG_EXPORT_REQ, NULL, 0);
	cr_assert_eq(migration_msg_seal(&k, &req, &b), 0);
	struct migration_msg out;
	cr_assert_eq(migration_msg_open(&k, b.data, b.len, &out, &plain),
		     BATON_ECORRUPT);
	/* Another format, another magic. */
	b.data[1] = 1;
	cr_assert_eq(migration_msg_parse(b.data, b.len, &out), BATON_EVERSION);
	b.data[0] = 1;
	cr_assert_eq(migration_msg_parse(b.data, b.len, &out), BATON_ECORRUPT);
	cr_assert_eq(migration_keys_init(&k, NULL, 0), BATON_EINVAL);
	baton_buf_free(&b);
	baton_buf_free(&plain);
}

Test(migration_wire, the_proxy_proof_depends_on_every_input)
{
	static struct migration_keys ka, kb;
	keys(&ka, secret_a);
	keys(&kb, secret_b);
	static const uint8_t nonce[16] = {1, 2, 3};
	uint8_t p[MIG_PROOF_BYTES], q[MIG_PROOF_BYTES];
	cr_assert_eq(migration_proxy_proof(&ka, "new", "old", nonce, 16,
					   "127.0.0.1:7001", p),
		     0);
	cr_assert_eq(migration_proxy_proof(&ka, "new", "old", nonce, 16,
					   "127.0.0.1:7001", q),
		     0);
	cr_assert(memcmp(p, q, sizeof p) == 0);
	cr_assert_eq(migration_proxy_proof(&kb, "new", "old", nonce, 16,
					   "127.0.0.1:7001", q),
		     0);
	cr_assert(memcmp(p, q, sizeof p) != 0);
	cr_assert_eq(migration_proxy_proof(&ka, "old", "new", nonce, 16,
					   "127.0.0.1:7001", q),
		     0);
	cr_assert(memcmp(p, q, sizeof p) != 0);
	cr_assert_eq(migration_proxy_proof(&ka, "new", "old", nonce, 15,
					   "127.0.0.1:7001", q),
		     0);
	cr_assert(memcmp(p, q, sizeof p) != 0);
	cr_assert_eq(migration_proxy_proof(&ka, "new", "old", nonce, 16,
					   "127.0.0.1:7002", q),
		     0);
	cr_assert(memcmp(p, q, sizeof p) != 0);
	migration_keys_wipe(&ka);
	migration_keys_wipe(&kb);
}
