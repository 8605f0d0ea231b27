/* Helpers for the kv tests: run commands the way the server does. */
#ifndef BATON_TESTS_KV_UTIL_H
#define BATON_TESTS_KV_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* Arguments of one command, at most this many in the helpers. */
#define KVT_ARGS_MAX 1024

/* The machine version the helpers run under, and the stamp of the
 * payloads they write under version 2 (format 2). kvt_new() resets them
 * to version 1. */
void kvt_use(uint32_t version, uint64_t stamp_ms);

/* Run one command on kv as batond does: kv_lookup, kv_gate, kv_check,
 * then a write through kv_encode (version 1) or kv_encode_v2 (version 2)
 * and kv_apply, or a read through kv_read. Returns the RESP reply as a
 * NUL-terminated string owned by the helper (valid until the next call). */
const char *kvt_runv(struct baton_kv *kv, int argc, const char *const *argv,
		     const size_t *lens);
/* The same with the arguments split on single spaces ("SET a b"). */
const char *kvt_run(struct baton_kv *kv, const char *line);

/* The payload of a command line, in out (appended). */
void kvt_encode(const char *line, struct baton_buf *out);

/* The whole snapshot of kv into out (reset first), under kvt_use's
 * version. */
void kvt_snapshot(const struct baton_kv *kv, struct baton_buf *out);

/* A fresh map; fails the test if it cannot be made. */
struct baton_kv *kvt_new(void);

/* A small deterministic random generator (xorshift64*). */
uint64_t kvt_rand(uint64_t *state);

#endif /* BATON_TESTS_KV_UTIL_H */
