/*
 * On-disk formats of the storage, shared by its files (docs/storage.md has
 * the same layout in prose). Everything is little-endian (le.h). Each file
 * starts with the head that file_header.h writes and checks: an 8-byte
 * magic, a format version and the header's length, the header ending with
 * its checksum; a reader refuses a version above its own with
 * BATON_EVERSION, naming both. Formats only grow by appending fields.
 *
 * Checksums are XXH3-64 (src/util/checksum.h says why).
 */
#ifndef BATON_STORAGE_FORMAT_H
#define BATON_STORAGE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "checksum.h"
#include "le.h"

/* ---- write-ahead log segment: wal-<seq, 16 hex digits>.log ----------------
 * segment header (64 bytes)
 *   0 magic "BATONWAL"   8 format u32   12 header_len u32   16 seq u64
 *  24 first_index u64 (the next index when the segment was made)
 *  32 reserved (zero)    56 checksum u64 of bytes 0..55
 * then batches, one per group commit, each written with one write:
 *   batch header (32 bytes)
 *     0 magic u32 "BTCH"  4 n_records u32  8 body_len u64
 *    16 first_index u64   24 checksum u64 of bytes 0..23
 *   body: n_records records
 *     record header (40 bytes)
 *       0 payload_len u32  4 kind u8 (1 entry, 2 truncate)  5 zero[3]
 *       8 entry_type u32  12 reserved u32  16 term u64  24 index u64
 *      32 checksum u64: XXH3 of the payload seeded with XXH3 of bytes 0..31
 *     payload, zero-padded to a multiple of 8
 *   batch trailer (16 bytes)
 *     0 magic u32 "BEND"  4 reserved u32  8 checksum u64 of header+body
 * then zeros (the segment is preallocated).
 *
 * An entry record at an index at or below the last one replaces it and
 * everything after it (the conflicting suffix of Raft): the log is never
 * rewritten in place. A truncate record drops entries from its index on.
 */
#define WAL_MAGIC "BATONWAL"
#define WAL_FORMAT 1u
#define WAL_SEGMENT_HEADER_LEN 64u
#define WAL_BATCH_MAGIC 0x48435442u /* "BTCH" */
#define WAL_BATCH_HEADER_LEN 32u
#define WAL_TRAILER_MAGIC 0x444e4542u /* "BEND" */
#define WAL_TRAILER_LEN 16u
#define WAL_RECORD_HEADER_LEN 40u
#define WAL_RECORD_ENTRY 1u
#define WAL_RECORD_TRUNCATE 2u
/* No batch is larger than this: a bigger length is damage. */
#define WAL_BATCH_BODY_MAX (1ull << 31)

/* ---- term and vote: meta -------------------------------------------------
 *   0 magic "BATONMET"  8 format u32  12 len u32 (48)  16 term u64
 *  24 vote u64  32 reserved u64  40 checksum u64 of bytes 0..39
 * Replaced atomically: written to meta.tmp, synced, renamed, dir synced. */
#define META_MAGIC "BATONMET"
#define META_FORMAT 1u
#define META_LEN 48u

/* ---- whose the directory is: identity -------------------------------------
 *   0 magic "BATONIDN"  8 format u32  12 header_len u32  16 node_id u64
 *  24 cluster uuid (16 bytes; all zero: not known yet)
 *  40 cluster name length u32 (1..127)  44 reserved u32
 *  48 cluster name, zero-padded to 8
 *  then checksum u64 of the header before it (header_len includes it)
 * Replaced atomically like meta (identity.tmp). Written at the first start
 * on a directory, and once more when the cluster's UUID becomes known. */
#define IDENTITY_MAGIC "BATONIDN"
#define IDENTITY_FORMAT 1u
#define IDENTITY_FIXED_LEN 48u
/* A name of one byte: the fixed part, 8 bytes of name, the checksum. */
#define IDENTITY_LEN_MIN (IDENTITY_FIXED_LEN + 8u + 8u)
#define IDENTITY_LEN_MAX (IDENTITY_FIXED_LEN + 128u + 8u)

/* ---- snapshot: snapshot ----------------------------------------------------
 *   0 magic "BATONSNP"  8 format u32  12 header_len u32
 *  16 index u64  24 term u64  32 config_index u64
 *  40 machine version u32  44 floor major u16, minor u16, patch u16,
 *     50 flags u16 (bit 0: the burn-in hold, baton_version_state.held;
 *     a pad before it, always 0, so releases before it ignore it and
 *     read the same state without the hold: every format)
 *  52 n_versions u32  56 data_len u64  64 data_checksum u64
 *  72 config_len u32  76 reserved u32  80 config (baton_config_encode),
 *     zero-padded to 8
 *  then n_versions rows of the version table, 32 bytes each: id u64,
 *     release major/minor/patch u16 + pad u16, proto_min u32, proto_max
 *     u32, machine_max u32, pad u32
 *  format 2 and 3: versions_index u64 (the index of the version entry
 *     that made the version state; 0: the initial state)
 *  format 3 only: the downgrade in progress (struct baton_downgrade),
 *     32 bytes: target major/minor/patch u16 + pad u16, prev_floor
 *     major/minor/patch u16 + pad u16, prev_machine u32, pad u32, since u64
 *  then checksum u64 of the header before it (header_len includes it)
 * then data_len bytes of the state machine's snapshot.
 * Format 1 (release 0.1.0) has no versions_index: it reads as 0. Release
 * 0.1.0 only knew machine version 1 and wrote 0 for an unknown one, so a
 * machine version 0 in format 1 reads as 1. Formats 1 and 2 read with no
 * downgrade in progress. Format 3 is written only while a downgrade is in
 * progress, format 2 otherwise: a snapshot without one stays byte for byte
 * what a release reading only formats 1 and 2 wrote and reads. */
#define SNAP_MAGIC "BATONSNP"
#define SNAP_FORMAT 3u /* the newest: read, and written in downgrades */
#define SNAP_FORMAT_NO_DOWNGRADE 2u /* written when none is in progress */
#define SNAP_FIXED_LEN 80u
#define SNAP_VERSION_ENTRY_LEN 32u
#define SNAP_DOWNGRADE_LEN 32u
#define SNAP_FLAG_HELD 1u /* the flags at 50: the burn-in hold */

static inline size_t pad8(size_t n)
{
	return (n + 7u) & ~(size_t)7u;
}

static inline int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

#endif /* BATON_STORAGE_FORMAT_H */
