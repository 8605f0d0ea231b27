/*
 * The state machine's fuzz targets share this (kv_target.c): snapshots of
 * a map as bytes, to compare maps.
 */
#ifndef BATON_TESTS_FUZZ_KV_TARGET_H
#define BATON_TESTS_FUZZ_KV_TARGET_H

#include "baton/buf.h"
#include "kv.h"

/* A kv_snapshot() sink appending to the struct baton_buf arg. */
int fuzz_kv_sink(void *arg, const void *buf, size_t len);

/* The map's snapshot under machine version 3 (which holds every map) into
 * out, which is reset first. Aborts if it fails. */
void fuzz_kv_image(const struct baton_kv *kv, struct baton_buf *out);

/* Whether two buffers hold the same bytes. */
int fuzz_same_bytes(const struct baton_buf *a, const struct baton_buf *b);

#endif /* BATON_TESTS_FUZZ_KV_TARGET_H */
