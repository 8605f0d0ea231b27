/*
 * The storage's fuzz targets share this (storage_target.c): the readers
 * work on files, so each target puts its input in a file of an in-memory
 * file system (tests/storage/fault_vfs.h) and calls the reader there.
 */
#ifndef BATON_TESTS_FUZZ_STORAGE_TARGET_H
#define BATON_TESTS_FUZZ_STORAGE_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "fault_vfs.h"

/* The directory the targets use. */
#define FUZZ_DIR "/data"

/* A new in-memory file system holding FUZZ_DIR, and in it the file `name`
 * with the given bytes when name is not NULL. Aborts if out of memory. */
struct fault_vfs *fuzz_vfs(const char *name, const uint8_t *data, size_t size);

/* Add the file `name` with the given bytes to FUZZ_DIR in v. */
void fuzz_vfs_add(struct fault_vfs *v, const char *name, const uint8_t *data,
		  size_t size);

/* A reader's error: one of the codes a reader returns for bad bytes, and a
 * message saying what was wrong. */
void fuzz_check_storage_error(int rv, const char *err);

#endif /* BATON_TESTS_FUZZ_STORAGE_TARGET_H */
