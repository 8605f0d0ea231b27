/* The hash and the clock. */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define HASH_MULTIPLIER 0x9e3779b97f4a7c15u

uint64_t lincheck__hash(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t h = lincheck__mix((uint64_t)len ^ HASH_MULTIPLIER);
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ lincheck__mix(w)) * HASH_MULTIPLIER;
		p += 8;
		len -= 8;
	}
	uint64_t last = 0;
	for (size_t i = 0; i < len; i++)
		last |= (uint64_t)p[i] << (8 * i);
	h = (h ^ lincheck__mix(last)) * HASH_MULTIPLIER;
	return lincheck__mix(h);
}

int64_t lincheck_now_ns(void)
{
	struct timespec ts;
	int rv = clock_gettime(CLOCK_MONOTONIC, &ts);
	assert(rv == 0);
	(void)rv;
	return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}
