/*
 * The relay's only persisted state: the last view number it made durable
 * and whether it is active, in DIR/relay-state (docs/relay-server.md
 * "State file"). A view number is written here, atomically (a temp file,
 * fsync, rename, fsync of the directory), before any VIEW carries it, so a
 * restarted relay starts above every number it ever sent.
 *
 * The file is one storage file header (src/storage/file_header.h):
 *   0 magic "BTNRELAY"  8 format u32 (1)  12 header_len u32 (36)
 *  16 view number u64  24 active u32 (0 or 1)  28 checksum u64
 * A later format may append fields before the checksum.
 */
#ifndef BATON_RELAY_STATE_FILE_H
#define BATON_RELAY_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RELAY_STATE_FILE "relay-state"
#define RELAY_STATE_FORMAT 1u
#define RELAY_STATE_LEN 36u

struct relay_state {
	uint64_t view_number; /* 0: no view ever sent */
	bool active;
};

/* The file's bytes for *s: out holds RELAY_STATE_LEN bytes. */
void relay_state_encode(const struct relay_state *s, uint8_t *out);

/* Check and read the n bytes of the file at path (for the messages).
 * Returns 0, BATON_ECORRUPT (not a relay state file, damaged, active not
 * 0/1) or BATON_EVERSION (a newer format), with a message in err. */
int relay_state_decode(const uint8_t *b, size_t n, const char *path,
		       struct relay_state *out, char *err, size_t errlen);

/* Read DIR/relay-state into *out. A missing file is a first start:
 * *out is zeroed and *found false. Returns 0 or a BATON_E code (as
 * decode, or BATON_EIO naming the path and errno) with a message. */
int relay_state_load(const char *dir, struct relay_state *out, bool *found,
		     char *err, size_t errlen);

/* Write *s to DIR/relay-state atomically and durably. Returns 0 or
 * BATON_EIO with a message naming the step and the errno. */
int relay_state_store(const char *dir, const struct relay_state *s, char *err,
		      size_t errlen);

#endif /* BATON_RELAY_STATE_FILE_H */
