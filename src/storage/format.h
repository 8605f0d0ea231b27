/*
 * On-disk formats of the storage, shared by its files (docs/storage.md has
 * the same layout in prose). Everything is little-endian. Each file starts
 * with an 8-byte magic and a format version; a reader refuses a version
 * above its own with BATON_EVERSION, naming both. Formats only grow by
 * appending fields (a header carries its own length).
 *
 * Checksums are XXH3-64 (libxxhash): a well-kept library, in Debian, fast on
 * every CPU without special instructions (tens of GB/s, so checksumming never
 * limits a sync-bound log), and 64 bits wide, so a torn or rotten record
 * passes by chance with probability 2^-64 rather than CRC32C's 2^-32.
 */
#ifndef BATON_STORAGE_FORMAT_H
#define BATON_STORAGE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* ---- snapshot: snapshot ----------------------------------------------------
 *   0 magic "BATONSNP"  8 format u32  12 header_len u32
 *  16 index u64  24 term u64  32 config_index u64
 *  40 machine_version u32  44 floor major u16, minor u16, patch u16, pad u16
 *  52 n_versions u32  56 data_len u64  64 data_checksum u64
 *  72 config_len u32  76 reserved u32  80 config (baton_config_encode),
 *     zero-padded to 8
 *  then n_versions entries of 32 bytes: id u64, release major/minor/patch
 *     u16 + pad u16, proto_min u32, proto_max u32, machine_max u32, pad u32
 *  then checksum u64 of the header before it (header_len includes it)
 * then data_len bytes of the state machine's snapshot. */
#define SNAP_MAGIC "BATONSNP"
#define SNAP_FORMAT 1u
#define SNAP_FIXED_LEN 80u
#define SNAP_VERSION_ENTRY_LEN 32u

static inline void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

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

/* XXH3-64 of a buffer; of two pieces (the first one's hash seeds the
 * second's). */
uint64_t baton__checksum(const void *buf, size_t len);
uint64_t baton__checksum2(const void *a, size_t alen, const void *b,
			  size_t blen);

#endif /* BATON_STORAGE_FORMAT_H */
