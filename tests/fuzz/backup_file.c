/* The backup file's reader (backup_file_check, src/util/backup_file.c) and
 * the restore's next step, kv_restore of its payload (batond --restore).
 * The input as it is must be refused with a reason or pass; then the same
 * input with its payload length and checksum made right (so the fuzzer
 * reaches past the checksum) must pass, its header written again must give
 * the input's header, and its payload must restore or be refused without
 * harm. */
#include <stdlib.h>
#include <string.h>

#include "backup_file.h"
#include "checksum.h"
#include "fuzz.h"
#include "kv.h"
#include "le.h"

static void check_raw(const uint8_t *data, size_t size)
{
	struct backup_header h;
	const uint8_t *payload = NULL;
	char why[512] = "";
	if (backup_file_check(data, size, &h, &payload, why, sizeof why) != 0) {
		FUZZ_CHECK(why[0] != '\0', "a refusal without a reason");
		return;
	}
	FUZZ_CHECK(payload == data + BACKUP_HEADER_BYTES &&
			   BACKUP_HEADER_BYTES + h.payload_len +
					   BACKUP_TRAILER_BYTES ==
				   size,
		   "a passing file of %zu bytes with a payload of %llu", size,
		   (unsigned long long)h.payload_len);
}

static void check_sealed(const uint8_t *data, size_t size)
{
	if (size < BACKUP_HEADER_BYTES + BACKUP_TRAILER_BYTES)
		return;
	uint8_t *b = malloc(size);
	FUZZ_CHECK(b != NULL, "out of memory");
	memcpy(b, data, size);
	memcpy(b, BACKUP_MAGIC, 8);
	baton_le_put_u32(b + 8, BACKUP_FORMAT);
	size_t len = size - BACKUP_HEADER_BYTES - BACKUP_TRAILER_BYTES;
	baton_le_put_u64(b + BACKUP_HEADER_BYTES - 8, len);
	uint64_t sum = backup_file_checksum(
		b, baton__checksum(b + BACKUP_HEADER_BYTES, len));
	baton_le_put_u64(b + BACKUP_HEADER_BYTES + len, sum);
	struct backup_header h;
	const uint8_t *payload = NULL;
	char why[512] = "";
	int rv = backup_file_check(b, size, &h, &payload, why, sizeof why);
	FUZZ_CHECK(rv == 0, "a sealed file refused: %s", why);
	uint8_t again[BACKUP_HEADER_BYTES];
	backup_header_encode(&h, again);
	/* Text fields end at their first NUL: bytes after it are not kept. */
	struct backup_header h2;
	const uint8_t *p2;
	memcpy(b, again, BACKUP_HEADER_BYTES);
	baton_le_put_u64(
		b + BACKUP_HEADER_BYTES + len,
		backup_file_checksum(
			b, baton__checksum(b + BACKUP_HEADER_BYTES, len)));
	FUZZ_CHECK(backup_file_check(b, size, &h2, &p2, why, sizeof why) == 0 &&
			   memcmp(&h, &h2, sizeof h) == 0,
		   "the header written again reads differently");
	struct baton_kv *kv = NULL;
	FUZZ_CHECK(kv_create(&kv) == 0, "out of memory");
	rv = kv_restore(kv, (struct baton_machine_version){3}, payload, len);
	FUZZ_CHECK(rv == 0 || rv == BATON_ECORRUPT || rv == BATON_EVERSION,
		   "kv_restore of a payload: %d", rv);
	kv_destroy(kv);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_raw(data, size);
	check_sealed(data, size);
	return 0;
}
