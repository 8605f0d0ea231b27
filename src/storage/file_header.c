/* The head and the checksum of every storage file (file_header.h). */
#include <baton/assert.h>
#include <string.h>

#include "checksum.h"
#include "file_header.h"
#include "internal.h"
#include "le.h"

void baton__file_header_start(uint8_t *b, const struct baton__file_kind *k,
			      uint32_t header_len)
{
	BATON_ASSERT(k->format > 0 && strlen(k->magic) == FILE_MAGIC_LEN);
	BATON_ASSERT(header_len >= k->header_len_min &&
		     k->header_len_min >=
			     FILE_HEADER_HEAD_LEN + FILE_HEADER_CHECKSUM_LEN);
	memcpy(b, k->magic, FILE_MAGIC_LEN);
	baton_le_put_u32(b + 8, k->format);
	baton_le_put_u32(b + 12, header_len);
}

void baton__file_header_seal(uint8_t *b, uint32_t header_len)
{
	BATON_ASSERT(header_len >=
		     FILE_HEADER_HEAD_LEN + FILE_HEADER_CHECKSUM_LEN);
	BATON_ASSERT(baton_le_get_u32(b + 12) == header_len);
	size_t body = header_len - FILE_HEADER_CHECKSUM_LEN;
	baton_le_put_u64(b + body, baton__checksum(b, body));
}

int baton__file_header_check(const struct baton__file_kind *k, const uint8_t *b,
			     size_t n, const char *path,
			     struct baton__file_head *out, char *err,
			     size_t errlen)
{
	BATON_ASSERT(k->format > 0 &&
		     k->header_len_min >=
			     FILE_HEADER_HEAD_LEN + FILE_HEADER_CHECKSUM_LEN);
	if (n < 12 || memcmp(b, k->magic, FILE_MAGIC_LEN) != 0)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: not a baton %s", path, k->name);
	uint32_t format = baton_le_get_u32(b + 8);
	if (format == 0)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: %s format version 0 (damaged)", path,
				   k->name);
	if (format > k->format)
		return baton__errf(err, errlen, BATON_EVERSION,
				   "%s: format version %u is newer than this "
				   "release reads (%u)",
				   path, format, k->format);
	uint32_t len = n >= FILE_HEADER_HEAD_LEN ? baton_le_get_u32(b + 12) : 0;
	if (len < k->header_len_min || len > n)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: %s header truncated or its length "
				   "damaged",
				   path, k->name);
	size_t body = len - FILE_HEADER_CHECKSUM_LEN;
	if (baton_le_get_u64(b + body) != baton__checksum(b, body))
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: %s header checksum mismatch (damaged)",
				   path, k->name);
	out->format = format;
	out->header_len = len;
	return 0;
}
