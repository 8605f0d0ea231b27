/*
 * The values of the relay protocol's golden frames: tests/relay/golden/
 * <name>.bin holds the bytes of each, written once by relay-make-golden
 * (make_golden.c) and never again. The tests decode every file and
 * compare each field with these values, and encode these values and
 * compare the bytes with the file: the files are the frozen contract.
 * Never change a value or a file; add a new frame (and file) instead.
 */
#ifndef BATON_TESTS_RELAY_GOLDEN_FRAMES_H
#define BATON_TESTS_RELAY_GOLDEN_FRAMES_H

#include "protocol.h"

struct golden_frame {
	const char *name; /* the file is golden/<name>.bin */
	enum baton_relay_dir dir;
	struct baton_relay_frame frame;
};

/* Every golden frame (at least one of each type); *n_out its count. */
const struct golden_frame *golden_frames(size_t *n_out);

/* Read golden/<name>.bin from dir into buf (cap bytes): its length, or
 * SIZE_MAX when it cannot be read (or is larger than cap). */
size_t golden_read(const char *dir, const char *name, uint8_t *buf, size_t cap);

/* A string literal as a struct baton_relay_str: an initializer, and an
 * expression. */
#define RELAY_STR_INIT(s)                                                      \
	{                                                                      \
		(s), (uint16_t)(sizeof(s) - 1)                                 \
	}
#define RELAY_STR(s) ((struct baton_relay_str)RELAY_STR_INIT(s))

#endif /* BATON_TESTS_RELAY_GOLDEN_FRAMES_H */
