/* The core's configuration entry decoder (baton_config_decode, src/core/
 * config.c): the format has one encoding per configuration, so whatever
 * decodes encodes again to exactly the input. */
#include <string.h>

#include "baton/raft.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct baton_config c;
	memset(&c, 0xa5, sizeof c);
	int rv = baton_config_decode(data, size, &c);
	FUZZ_CHECK(rv == 0 || rv == BATON_ECORRUPT || rv == BATON_EVERSION,
		   "decode returned %d", rv);
	if (rv != 0)
		return 0;
	FUZZ_CHECK(c.n <= BATON_MAX_MEMBERS, "%u members", c.n);
	for (uint32_t i = 0; i < c.n; i++) {
		FUZZ_CHECK(c.members[i].id != 0 &&
				   (c.members[i].role == BATON_VOTER ||
				    c.members[i].role == BATON_LEARNER),
			   "member %u: id %llu, role %u", i,
			   (unsigned long long)c.members[i].id,
			   c.members[i].role);
		for (uint32_t j = 0; j < i; j++)
			FUZZ_CHECK(c.members[j].id != c.members[i].id,
				   "member %u listed twice", i);
	}
	uint8_t buf[256];
	size_t len = 0;
	rv = baton_config_encode(&c, buf, sizeof buf, &len);
	FUZZ_CHECK(rv == 0 && len == size && memcmp(buf, data, size) == 0,
		   "round trip: %d, %zu bytes for %zu", rv, len, size);
	return 0;
}
