/* A running checksum over data that arrives in pieces (snapshot streams). */
#ifndef BATON_STORAGE_CHECKSUM_H
#define BATON_STORAGE_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

struct baton__hasher;

/* NULL when out of memory. */
struct baton__hasher *baton__hasher_new(void);
void baton__hasher_update(struct baton__hasher *h, const void *buf, size_t len);
uint64_t baton__hasher_digest(const struct baton__hasher *h);
void baton__hasher_free(struct baton__hasher *h);

#endif /* BATON_STORAGE_CHECKSUM_H */
