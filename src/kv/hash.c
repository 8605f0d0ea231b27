/* Hashes of keys and checksums of snapshots: XXH3-64, compiled in. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "internal.h"

uint64_t kv__hash(const uint8_t *key, size_t len)
{
	return XXH3_64bits(key, len);
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

uint64_t kv__checksum(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

struct kv__sum *kv__sum_new(void)
{
	XXH3_state_t *st = XXH3_createState();
	if (st != NULL)
		XXH3_64bits_reset(st);
	return (struct kv__sum *)st;
}

void kv__sum_update(struct kv__sum *s, const void *buf, size_t len)
{
	XXH3_64bits_update((XXH3_state_t *)s, buf, len);
}

uint64_t kv__sum_digest(const struct kv__sum *s)
{
	return XXH3_64bits_digest((const XXH3_state_t *)s);
}

void kv__sum_free(struct kv__sum *s)
{
	XXH3_freeState((XXH3_state_t *)s);
}
