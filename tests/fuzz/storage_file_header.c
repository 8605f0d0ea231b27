/* The one file-header check of the storage (baton__file_header_check,
 * src/storage/file_header.c), for each kind of file: the input is the
 * start of a file. A head that passes has a format and a length within
 * the kind's bounds, and writing the same head again with the header
 * helpers gives back exactly the input's header. */
#include <string.h>

#include "file_header.h"
#include "format.h"
#include "fuzz.h"
#include "internal.h"

/* The kinds of src/storage, as wal.c, meta.c, identity.c and
 * snapshot_file.c define them (format.h). */
static const struct baton__file_kind kinds[] = {
	{WAL_MAGIC, "log segment", WAL_FORMAT, WAL_SEGMENT_HEADER_LEN},
	{META_MAGIC, "term/vote file", META_FORMAT, META_LEN},
	{IDENTITY_MAGIC, "identity file", IDENTITY_FORMAT, IDENTITY_LEN_MIN},
	{SNAP_MAGIC, "snapshot", SNAP_FORMAT, SNAP_FIXED_LEN + 8u},
};

static void check(const struct baton__file_kind *k, const uint8_t *data,
		  size_t size)
{
	char err[STORAGE_ERR_MAX] = "";
	struct baton__file_head head = {0, 0};
	int rv = baton__file_header_check(k, data, size, "fuzz", &head, err,
					  sizeof err);
	if (rv != 0) {
		FUZZ_CHECK((rv == BATON_ECORRUPT || rv == BATON_EVERSION) &&
				   err[0] != '\0',
			   "%s: %d (%s)", k->name, rv, err);
		return;
	}
	FUZZ_CHECK(head.format >= 1 && head.format <= k->format &&
			   head.header_len >= k->header_len_min &&
			   head.header_len <= size,
		   "%s: format %u, header of %u bytes in %zu", k->name,
		   head.format, head.header_len, size);
	uint8_t *b = malloc(head.header_len);
	FUZZ_CHECK(b != NULL, "out of memory");
	memcpy(b, data, head.header_len);
	struct baton__file_kind same = *k;
	same.format = head.format;
	baton__file_header_start(b, &same, head.header_len);
	baton__file_header_seal(b, head.header_len);
	FUZZ_CHECK(memcmp(b, data, head.header_len) == 0,
		   "%s: the header written again differs", k->name);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		check(&kinds[i], data, size);
	return 0;
}
