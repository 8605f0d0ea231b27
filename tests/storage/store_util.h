/* Helpers shared by the storage tests: temporary directories, updates made
 * by hand, and a synchronous way to run them through a storage. */
#ifndef BATON_TESTS_STORE_UTIL_H
#define BATON_TESTS_STORE_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "baton/storage.h"

/* A fresh directory under /tmp (removed by tmpdir_remove). */
void tmpdir_make(char *out, size_t cap);
void tmpdir_remove(const char *dir);

/* Entries first..first+n-1 of `term`; payload i is "e<index>" repeated to
 * `len` bytes. Free with entries_free. */
struct baton_entry *entries_make(baton_index first, uint32_t n, baton_term term,
				 uint32_t len);
void entries_free(struct baton_entry *e, uint32_t n);
/* The payload entries_make gives index i (len bytes) into buf. */
void payload_fill(uint8_t *buf, uint32_t len, baton_index index,
		  baton_term term);

/* Open with defaults (segment_bytes if nonzero, a vfs if not NULL);
 * fails the test on error. */
struct baton_storage *store_open(const char *dir, uint64_t segment_bytes,
				 struct baton_vfs *vfs);
/* Open and expect failure: returns the code and copies the message. */
int store_open_fail(const char *dir, struct baton_vfs *vfs, char *err,
		    size_t errlen);

/* Submit one update, wait until durable; returns the completion status. */
int store_write(struct baton_storage *s, const struct baton_update *u);
/* Append entries (and an optional truncation) in one update. */
int store_append(struct baton_storage *s, baton_index truncate_from,
		 const struct baton_entry *e, uint32_t n);
int store_hard_state(struct baton_storage *s, baton_term term,
		     baton_node_id vote);
/* Write an own snapshot at meta index `index`/`term`, `len` bytes. */
int store_snapshot(struct baton_storage *s, baton_index index, baton_term term,
		   size_t len);
/* The same, begun and written but not committed: the sink is *out. */
int store_snapshot_written(struct baton_storage *s, baton_index index,
			   baton_term term, size_t len,
			   struct baton_snapshot_sink **out);
/* snapshot_write, tried again while the queue is full (BATON_EAGAIN). */
int store_snapshot_write(struct baton_storage *s, struct baton_snapshot_sink *k,
			 const void *buf, size_t len);

/* Checks that e[i] is entries_make's entry for its index/term. */
bool entry_intact(const struct baton_entry *e, uint32_t len);

/* A file's size; its bytes at off, read or overwritten in place (the
 * damage and leftovers tests plant). Each fails the test on error. */
uint64_t file_size(const char *path);
void file_peek(const char *path, uint64_t off, void *buf, size_t n);
void file_poke(const char *path, uint64_t off, const void *buf, size_t n);

/* Sleep ms milliseconds (tests that wait for a storage's thread). */
void store_sleep_ms(long ms);

#endif /* BATON_TESTS_STORE_UTIL_H */
