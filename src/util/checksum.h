/*
 * The one wrapper of XXH3-64, baton's only hash: checksums of log records,
 * batches, file headers and snapshots (src/storage, src/kv) and the hash of
 * a key (src/kv). Nothing else calls xxhash, so the algorithm, its seed
 * and the library it comes from are decided here.
 *
 * XXH3-64 is in Debian (libxxhash), runs at tens of GB/s on any CPU without
 * special instructions, and is 64 bits wide: damage passes by chance with
 * probability 2^-64. Its output is frozen by its authors, so the hash of a
 * key and every checksum on disk are the same on every node and release.
 */
#ifndef BATON_UTIL_CHECKSUM_H
#define BATON_UTIL_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* XXH3-64 of a buffer (no seed). */
uint64_t baton__checksum(const void *buf, size_t len);

/* XXH3-64 of two pieces without a streaming state: the first piece's hash
 * seeds the second's. */
uint64_t baton__checksum2(const void *a, size_t alen, const void *b,
			  size_t blen);

/* A running checksum over data that arrives in pieces; its digest equals
 * baton__checksum of the concatenation. */
struct baton__hasher;

/* NULL when out of memory. */
struct baton__hasher *baton__hasher_new(void);
void baton__hasher_update(struct baton__hasher *h, const void *buf, size_t len);
uint64_t baton__hasher_digest(const struct baton__hasher *h);
/* Accepts NULL. */
void baton__hasher_free(struct baton__hasher *h);

#endif /* BATON_UTIL_CHECKSUM_H */
