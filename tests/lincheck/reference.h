/*
 * Helpers for the lincheck tests: a brute-force reference checker and a
 * seeded generator of small random histories.
 */
#ifndef BATON_LINCHECK_TEST_REFERENCE_H
#define BATON_LINCHECK_TEST_REFERENCE_H

#include "lincheck.h"

/* Operations the reference can take (it tries every order, skipping
 * configurations it saw), and clients the generator uses at most. */
#define REF_OPS_MAX 48u
#define REF_CLIENTS_MAX 8u

/* Whether h is linearizable, by trying every order of its operations. */
bool ref_linearizable(const struct lincheck_history *h);

/* A small random history from seed: up to ops_max (<= REF_OPS_MAX)
 * operations by up to clients_max (<= REF_CLIENTS_MAX) clients on 1 or 2
 * keys, recorded from a real execution and then perhaps corrupted. */
void ref_random_history(uint64_t seed, uint32_t ops_max, uint32_t clients_max,
			struct lincheck_history *h);

/* The verdict of lincheck_check (LINEARIZABLE or NOT). */
enum lincheck_verdict ref_check(const struct lincheck_history *h);

/* Parses text (format) into h; the error code, with the message in err
 * if not NULL. */
int ref_parse(const char *text, enum lincheck_format format,
	      struct lincheck_history *h, struct lincheck_error *err);

/* Parses baton-format text that must be valid and checks it. */
enum lincheck_verdict ref_verdict(const char *text,
				  struct lincheck_result *res);

/* The directory of the reference histories (BATON_HISTORIES_DIR). */
const char *ref_histories_dir(void);

/* h in the baton format, as a malloc'ed buffer of *len bytes. */
char *ref_baton_text(const struct lincheck_history *h, size_t *len);

/* Reads a whole file into a NUL-terminated malloc'ed buffer. */
char *ref_read_file(const char *path, size_t *len);

#endif
