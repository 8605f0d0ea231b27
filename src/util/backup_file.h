/*
 * The backup file of `batonctl snapshot save` and `batond --restore`
 * (docs/backup.md): a header, the key-value map as the kv snapshot format
 * writes it (docs/kv.md; it carries its own XXH3-64 trailer), and a
 * checksum over everything before it. Little endian:
 *
 *   "BATONBAK"            8 bytes of magic
 *   u32 format            BACKUP_FORMAT
 *   u64 index             the applied index the map is as of
 *   u64 term              the leader's term when it was taken
 *   u32 machine version   the effective one at index (the payload's format)
 *   18 bytes release      of the batond that served it, NUL-padded
 *   u64 created_ms        unix ms, batonctl's clock
 *   u8 has_uuid, 16 bytes the cluster's UUID (zeros when none)
 *   128 bytes cluster id  NUL-padded
 *   u64 payload length
 *   payload
 *   u64 checksum          XXH3-64 of the header followed by the payload's
 *                         XXH3-64 (u64), so a writer that learns the
 *                         payload's length last still hashes in one pass
 *
 * Shared by batonctl (writer, status) and batond (restore); no I/O but
 * whole-file reading, no allocation beyond it.
 */
#ifndef BATON_UTIL_BACKUP_FILE_H
#define BATON_UTIL_BACKUP_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BACKUP_MAGIC "BATONBAK"
#define BACKUP_FORMAT 1u
#define BACKUP_RELEASE_BYTES 18u
#define BACKUP_CLUSTER_ID_BYTES 128u
#define BACKUP_UUID_BYTES 16u
#define BACKUP_HEADER_BYTES                                                    \
	(8u + 4u + 8u + 8u + 4u + BACKUP_RELEASE_BYTES + 8u + 1u +             \
	 BACKUP_UUID_BYTES + BACKUP_CLUSTER_ID_BYTES + 8u)
#define BACKUP_TRAILER_BYTES 8u

struct backup_header {
	uint32_t format;
	uint64_t index;
	uint64_t term;
	uint32_t machine_version;
	char release[BACKUP_RELEASE_BYTES + 1];
	uint64_t created_ms;
	bool has_uuid;
	uint8_t uuid[BACKUP_UUID_BYTES];
	char cluster_id[BACKUP_CLUSTER_ID_BYTES + 1];
	uint64_t payload_len;
};

/* The header's bytes (strings cut to their room). */
void backup_header_encode(const struct backup_header *h,
			  uint8_t out[BACKUP_HEADER_BYTES]);

/* The trailer's checksum from the header's bytes and the payload's
 * XXH3-64. */
uint64_t backup_file_checksum(const uint8_t header[BACKUP_HEADER_BYTES],
			      uint64_t payload_hash);

/* Check a whole file in memory: 0 with *h and the payload (*payload,
 * h->payload_len bytes, pointing into buf) filled, or -1 with why (cut to
 * cap) naming the problem: too short, wrong magic, a newer format, a
 * length that disagrees with the file's size (truncated or extended), or
 * a checksum mismatch. The payload's own contents are the kv's to check. */
int backup_file_check(const uint8_t *buf, size_t len, struct backup_header *h,
		      const uint8_t **payload, char *why, size_t cap);

/* Read path whole into *buf (malloc'd; free it) and check it as above:
 * 0, or -1 with why (an I/O error names the path). */
int backup_file_load(const char *path, uint8_t **buf, size_t *len,
		     struct backup_header *h, const uint8_t **payload,
		     char *why, size_t cap);

/* The UUID as 8-4-4-4-12 hex (37 bytes with the NUL). */
void backup_uuid_format(const uint8_t uuid[BACKUP_UUID_BYTES], char out[37]);

#endif /* BATON_UTIL_BACKUP_FILE_H */
