/* The hash of a key (XXH3-64 through the one wrapper, src/util/checksum.h)
 * and the bit reversal that orders the table's chains. */
#include "checksum.h"
#include "internal.h"

uint64_t kv__hash(const uint8_t *key, size_t len)
{
	return baton__checksum(key, len);
}

uint64_t kv__rev64(uint64_t v)
{
	v = (v >> 1 & 0x5555555555555555u) | (v & 0x5555555555555555u) << 1;
	v = (v >> 2 & 0x3333333333333333u) | (v & 0x3333333333333333u) << 2;
	v = (v >> 4 & 0x0f0f0f0f0f0f0f0fu) | (v & 0x0f0f0f0f0f0f0f0fu) << 4;
	v = (v >> 8 & 0x00ff00ff00ff00ffu) | (v & 0x00ff00ff00ff00ffu) << 8;
	v = (v >> 16 & 0x0000ffff0000ffffu) | (v & 0x0000ffff0000ffffu) << 16;
	return v >> 32 | v << 32;
}
