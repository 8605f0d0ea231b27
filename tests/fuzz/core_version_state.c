/* The core's version entry decoder (baton_version_state_decode, src/core/
 * version.c): what it accepts is a valid state, which encodes again to a
 * prefix of the input (a later format only appends, so the bytes after
 * the known fields are all that may be dropped) and decodes to itself. */
#include <string.h>

#include "baton/version.h"
#include "fuzz.h"
#include "peer_fixtures.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct baton_version_state s;
	memset(&s, 0xa5, sizeof s);
	int rv = baton_version_state_decode(data, size, &s);
	FUZZ_CHECK(rv == 0 || rv == BATON_ECORRUPT || rv == BATON_EVERSION,
		   "decode returned %d", rv);
	if (rv != 0)
		return 0;
	FUZZ_CHECK(baton_version_state_valid(&s), "decoded an invalid state");
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len = 0;
	rv = baton_version_state_encode(&s, buf, sizeof buf, &len);
	FUZZ_CHECK(rv == 0, "a decoded state does not encode: %d", rv);
	FUZZ_CHECK(len == baton_version_state_encoded_len(&s) && len <= size &&
			   memcmp(buf, data, len) == 0,
		   "encoding of %zu bytes is not a prefix of the %zu decoded",
		   len, size);
	struct baton_version_state again;
	rv = baton_version_state_decode(buf, len, &again);
	const char *diff = "";
	FUZZ_CHECK(rv == 0 && fix_versions_eq(&s, &again, &diff),
		   "round trip: %d, differs in %s", rv, diff);
	return 0;
}
