/* The migration's sealed messages (src/server/migration_wire.c), which a
 * node opens from relay DATA payloads that anyone registered at the relay
 * may send. Opened with a fixed secret. Checked besides crashes: a
 * refusal is BATON_ECORRUPT, BATON_EVERSION or BATON_EINVAL (does not
 * authenticate); an opened message has a known type, both cluster ids
 * and its data within the input; and sealing it again with the nonce it
 * came with gives exactly its input bytes (the format is canonical).
 * The same input read as format 1 (1.3.0's unsealed messages,
 * migration_wire_v1.c, which a node reads under --migrate-from-unsealed):
 * refused as BATON_ECORRUPT, or canonical too; never both formats.
 * Seeds: one message of every type sealed with that secret (make_seeds.c),
 * so mutations reach past the header into the authentication. */
#include <string.h>

#include "baton/buf.h"
#include "baton/errors.h"
#include "fuzz.h"
#include "migration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct migration_keys keys;
	static bool ready;
	if (!ready) {
		FUZZ_CHECK(migration_keys_init(
				   &keys,
				   (const uint8_t *)FUZZ_MIGRATION_SECRET,
				   sizeof FUZZ_MIGRATION_SECRET - 1) == 0,
			   "keys");
		ready = true;
	}
	struct migration_msg v1;
	int rv1 = migration_msg_decode_v1(data, size, &v1);
	FUZZ_CHECK(rv1 == 0 || rv1 == BATON_ECORRUPT, "format 1: %d", rv1);
	if (rv1 == 0) {
		struct baton_buf b1;
		baton_buf_init(&b1);
		FUZZ_CHECK(migration_msg_encode_v1(&v1, &b1) == 0,
			   "format 1 not encoded again");
		FUZZ_CHECK(b1.len == size && memcmp(b1.data, data, size) == 0,
			   "format 1 not canonical");
		baton_buf_free(&b1);
	}
	struct migration_msg m;
	struct baton_buf plain;
	baton_buf_init(&plain);
	int rv = migration_msg_open(&keys, data, size, &m, &plain);
	FUZZ_CHECK(rv != 0 || rv1 != 0, "both a sealed and a format-1 message");
	if (rv != 0) {
		FUZZ_CHECK(rv == BATON_ECORRUPT || rv == BATON_EVERSION ||
				   rv == BATON_EINVAL,
			   "refused with %d", rv);
		baton_buf_free(&plain);
		return 0;
	}
	FUZZ_CHECK(m.type >= 1 && m.type <= MIG_MSG_TYPE_MAX, "type %u",
		   m.type);
	FUZZ_CHECK(m.from_cluster[0] != '\0' && m.to_cluster[0] != '\0',
		   "a cluster id is empty");
	FUZZ_CHECK(m.len <= size, "data of %zu bytes in %zu", m.len, size);
	/* The nonce sits just before the data length and the data. */
	FUZZ_CHECK(size >= m.len + MIG_TAG_BYTES + 4 + MIG_NONCE_BYTES,
		   "too short for what it holds");
	const uint8_t *nonce =
		data + size - m.len - MIG_TAG_BYTES - 4 - MIG_NONCE_BYTES;
	struct baton_buf b;
	baton_buf_init(&b);
	FUZZ_CHECK(migration_msg_seal_nonce(&keys, &m, nonce, &b) == 0,
		   "no sealing");
	FUZZ_CHECK(b.len == size && memcmp(b.data, data, size) == 0,
		   "not canonical: %zu bytes in, %zu out", size, b.len);
	baton_buf_free(&b);
	baton_buf_free(&plain);
	return 0;
}
