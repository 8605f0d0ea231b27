/* The migration's messages (src/server/migration_wire.c), which a node
 * decodes from relay DATA payloads sent by the other cluster. Checked
 * besides crashes: a refusal is BATON_ECORRUPT; a decoded message has a
 * known type and a data length within the input; and the encoding is
 * canonical: a decoded message encodes to its input, byte for byte.
 * Seeds: one message of every type (make_seeds.c). */
#include <string.h>

#include "baton/buf.h"
#include "baton/errors.h"
#include "fuzz.h"
#include "migration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct migration_msg m;
	int rv = migration_msg_decode(data, size, &m);
	if (rv != 0) {
		FUZZ_CHECK(rv == BATON_ECORRUPT, "refused with %d", rv);
		return 0;
	}
	FUZZ_CHECK(m.type >= 1 && m.type <= MIG_MSG_TYPE_MAX, "type %u",
		   m.type);
	FUZZ_CHECK(m.len <= size, "data of %zu bytes in %zu", m.len, size);
	struct baton_buf b;
	baton_buf_init(&b);
	FUZZ_CHECK(migration_msg_encode(&m, &b) == 0, "no encoding");
	FUZZ_CHECK(b.len == size && memcmp(b.data, data, size) == 0,
		   "not canonical: %zu bytes in, %zu out", size, b.len);
	baton_buf_free(&b);
	return 0;
}
