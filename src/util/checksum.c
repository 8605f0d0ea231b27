/* XXH3-64, compiled in (see checksum.h for why this hash). */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "checksum.h"

uint64_t baton__checksum(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

uint64_t baton__checksum2(const void *a, size_t alen, const void *b,
			  size_t blen)
{
	return XXH3_64bits_withSeed(b, blen, XXH3_64bits(a, alen));
}

struct baton__hasher *baton__hasher_new(void)
{
	XXH3_state_t *st = XXH3_createState();
	if (st != NULL)
		XXH3_64bits_reset(st);
	return (struct baton__hasher *)st;
}

void baton__hasher_update(struct baton__hasher *h, const void *buf, size_t len)
{
	XXH3_64bits_update((XXH3_state_t *)h, buf, len);
}

uint64_t baton__hasher_digest(const struct baton__hasher *h)
{
	return XXH3_64bits_digest((const XXH3_state_t *)h);
}

void baton__hasher_free(struct baton__hasher *h)
{
	if (h != NULL)
		XXH3_freeState((XXH3_state_t *)h);
}
