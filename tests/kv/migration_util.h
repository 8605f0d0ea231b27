/*
 * The fixture and helpers shared by the kv migration tests
 * (test_migration.c, test_migration_state.c; migration_util.c). Every
 * helper fails the test when a step it expects to succeed does not.
 */
#ifndef BATON_TESTS_KV_MIGRATION_UTIL_H
#define BATON_TESTS_KV_MIGRATION_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* The machine time the maps start at (ms). */
#define T0 1700000000000ull

/* The two maps, fresh for each test: the old one exports, the new one
 * imports. The buffers: the last payload a helper encoded, the last reply
 * (migt_apply, migt_read_cmd), and one the tests use as they like. */
extern struct baton_kv *migt_old_kv, *migt_new_kv;
extern struct baton_buf migt_payload, migt_reply, migt_text;

/* The suite's .init and .fini. */
void migt_setup(void);
void migt_teardown(void);

/* The arguments of a line split on single spaces. */
struct migt_line {
	int argc;
	const uint8_t *argv[64];
	size_t lens[64];
	char buf[1024];
};

void migt_split(const char *s, struct migt_line *l);

/* The format-2 payload of a command line, stamped, in out (reset). */
void migt_encode(uint64_t stamp, const char *s, struct baton_buf *out);

/* Apply p under v, expecting kv_apply to return want; the reply as a
 * NUL-terminated string (in migt_reply). */
const char *migt_apply(struct baton_kv *k, struct baton_machine_version v,
		       const struct baton_buf *p, int want);

/* Run a command line as a stamped write under version 3. */
const char *migt_run(struct baton_kv *k, uint64_t stamp, const char *s);

/* Run a read command line; the reply as migt_apply's. */
const char *migt_read_cmd(struct baton_kv *k, const char *s);

/* A kv_snapshot writer appending to the struct baton_buf arg. */
int migt_sink(void *arg, const void *buf, size_t len);

/* The map's whole version-3 snapshot, in out (reset). */
void migt_snap(const struct baton_kv *k, struct baton_buf *out);

void migt_assert_same_bytes(const struct baton_buf *a,
			    const struct baton_buf *b);

/* The map's migration state. */
struct kv_migration migt_state(const struct baton_kv *k);

/* A map of strings, hashes and expiries (some expired, not swept). */
void migt_fill(struct baton_kv *k, int n);

/* Export k whole, a chunk per step of `budget` bytes, into chunks (at
 * most max, each initialized here); the number of chunks. */
size_t migt_export_chunks(struct baton_kv *k, size_t budget,
			  struct baton_buf *chunks, size_t max);
void migt_free_chunks(struct baton_buf *chunks, size_t n);

/* The import payloads applied to k under version 3. migt_begin expects
 * +OK; the others return the reply. */
void migt_begin(struct baton_kv *k, uint64_t s, uint64_t t);
const char *migt_chunk(struct baton_kv *k, uint64_t s, uint32_t seq,
		       const struct baton_buf *records);
const char *migt_end(struct baton_kv *k, uint64_t s, uint32_t n);
const char *migt_entry(struct baton_kv *k, uint64_t i,
		       const struct baton_buf *old);

/* Import migt_old_kv's export into migt_new_kv at old index s. */
void migt_import_all(uint64_t s, size_t budget);

/* Sweep every key due at machine time (it stays where it is). */
void migt_sweep_due(struct baton_kv *k);

#endif /* BATON_TESTS_KV_MIGRATION_UTIL_H */
