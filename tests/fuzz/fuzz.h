/*
 * Shared by the fuzz targets of tests/fuzz (docs/fuzzing.md). Each target
 * is one LLVMFuzzerTestOneInput over one decoder: libFuzzer feeds it bytes,
 * ASan and UBSan catch memory errors, leaks and undefined behaviour, and
 * FUZZ_CHECK catches logic bugs: a decoder that breaks its own contract, or
 * a round trip decode(encode(decode(x))) that differs from decode(x).
 */
#ifndef BATON_TESTS_FUZZ_H
#define BATON_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The migration secret the migration_msg target opens with and its
 * seeds are sealed with (make_seeds.c). */
#define FUZZ_MIGRATION_SECRET "fuzzing-migration-secret-32bytes"

/* A property the code under test broke: say which and abort, so that
 * libFuzzer keeps the input as a crash file. */
#define FUZZ_CHECK(cond, ...)                                                  \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr,                                        \
				"fuzz: check failed: %s (%s:%d): ", #cond,     \
				__FILE__, __LINE__);                           \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* BATON_TESTS_FUZZ_H */
