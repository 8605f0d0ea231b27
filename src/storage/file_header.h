/*
 * The one file-header helper: every file of the storage (log segments, the
 * term/vote file, snapshots) starts and ends its header alike, and this is
 * the only code that writes or checks that shape:
 *
 *    0 magic (8 bytes)   8 format u32   12 header_len u32
 *   16 ... the format's own fields ...
 *   header_len - 8: checksum u64 of the header's bytes before it
 *
 * The format version tells old from new: a reader refuses a format above
 * its own with BATON_EVERSION naming both, and a header carries its own
 * length, so later formats may append fields. format.h has each layout.
 */
#ifndef BATON_STORAGE_FILE_HEADER_H
#define BATON_STORAGE_FILE_HEADER_H

#include <baton/errors.h>
#include <stddef.h>
#include <stdint.h>

#define FILE_MAGIC_LEN 8u
/* Magic, format and header_len. */
#define FILE_HEADER_HEAD_LEN 16u
#define FILE_HEADER_CHECKSUM_LEN 8u

/* One kind of file. */
struct baton__file_kind {
	const char *magic; /* FILE_MAGIC_LEN bytes */
	const char *name;  /* for messages: "snapshot", "log segment" */
	uint32_t format;   /* written by this release; the newest it reads */
	/* The shortest header_len of any format of this kind, checksum
	 * included (>= FILE_HEADER_HEAD_LEN + FILE_HEADER_CHECKSUM_LEN). */
	uint32_t header_len_min;
};

/* Write the magic, k->format and header_len at b. */
void baton__file_header_start(uint8_t *b, const struct baton__file_kind *k,
			      uint32_t header_len);

/* Write the checksum into the last 8 bytes of the header_len bytes at b,
 * once every other field of the header is in place. */
void baton__file_header_seal(uint8_t *b, uint32_t header_len);

/* What the head of a valid file says. */
struct baton__file_head {
	uint32_t format; /* 1..k->format */
	uint32_t header_len;
};

/* Check the n bytes read from the start of the file at `path` (for the
 * messages): magic, format, header length (at least k->header_len_min and
 * within the n bytes) and checksum. Returns 0 and fills *out, or
 * BATON_EVERSION (a format newer than k->format) or BATON_ECORRUPT (not a
 * file of this kind, format 0, a header length out of range, a checksum
 * mismatch), with a message in err naming the path. The format is checked
 * before the checksum, so a newer release's file is never called damaged. */
int baton__file_header_check(const struct baton__file_kind *k, const uint8_t *b,
			     size_t n, const char *path,
			     struct baton__file_head *out, char *err,
			     size_t errlen);

#endif /* BATON_STORAGE_FILE_HEADER_H */
