/*
 * The backup file (backup_file.h, docs/backup.md): encode the header,
 * check a whole file.
 */
#define _GNU_SOURCE
#include "backup_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checksum.h"
#include "le.h"

static void put_text(uint8_t *p, const char *s, size_t room)
{
	size_t n = strnlen(s, room);
	memset(p, 0, room);
	memcpy(p, s, n);
}

static void get_text(char *out, const uint8_t *p, size_t room)
{
	size_t n = strnlen((const char *)p, room);
	memcpy(out, p, n);
	out[n] = '\0';
}

void backup_header_encode(const struct backup_header *h,
			  uint8_t out[BACKUP_HEADER_BYTES])
{
	uint8_t *p = out;
	memcpy(p, BACKUP_MAGIC, 8);
	p += 8;
	baton_le_put_u32(p, h->format);
	p += 4;
	baton_le_put_u64(p, h->index);
	p += 8;
	baton_le_put_u64(p, h->term);
	p += 8;
	baton_le_put_u32(p, h->machine_version);
	p += 4;
	put_text(p, h->release, BACKUP_RELEASE_BYTES);
	p += BACKUP_RELEASE_BYTES;
	baton_le_put_u64(p, h->created_ms);
	p += 8;
	*p++ = h->has_uuid ? 1 : 0;
	memcpy(p, h->uuid, BACKUP_UUID_BYTES);
	p += BACKUP_UUID_BYTES;
	put_text(p, h->cluster_id, BACKUP_CLUSTER_ID_BYTES);
	p += BACKUP_CLUSTER_ID_BYTES;
	baton_le_put_u64(p, h->payload_len);
	p += 8;
}

uint64_t backup_file_checksum(const uint8_t header[BACKUP_HEADER_BYTES],
			      uint64_t payload_hash)
{
	uint8_t tail[8];
	baton_le_put_u64(tail, payload_hash);
	return baton__checksum2(tail, sizeof tail, header, BACKUP_HEADER_BYTES);
}

static void decode(const uint8_t *p, struct backup_header *h)
{
	p += 8;
	h->format = baton_le_get_u32(p);
	p += 4;
	h->index = baton_le_get_u64(p);
	p += 8;
	h->term = baton_le_get_u64(p);
	p += 8;
	h->machine_version = baton_le_get_u32(p);
	p += 4;
	get_text(h->release, p, BACKUP_RELEASE_BYTES);
	p += BACKUP_RELEASE_BYTES;
	h->created_ms = baton_le_get_u64(p);
	p += 8;
	h->has_uuid = *p++ != 0;
	memcpy(h->uuid, p, BACKUP_UUID_BYTES);
	p += BACKUP_UUID_BYTES;
	get_text(h->cluster_id, p, BACKUP_CLUSTER_ID_BYTES);
	p += BACKUP_CLUSTER_ID_BYTES;
	h->payload_len = baton_le_get_u64(p);
}

int backup_file_check(const uint8_t *buf, size_t len, struct backup_header *h,
		      const uint8_t **payload, char *why, size_t cap)
{
	memset(h, 0, sizeof *h);
	if (len < 8 || memcmp(buf, BACKUP_MAGIC, 8) != 0) {
		snprintf(why, cap,
			 "not a baton backup file (no \"%s\" magic at its "
			 "start)",
			 BACKUP_MAGIC);
		return -1;
	}
	if (len < BACKUP_HEADER_BYTES + BACKUP_TRAILER_BYTES) {
		snprintf(why, cap,
			 "truncated: %zu bytes, shorter than the %u-byte "
			 "header and checksum",
			 len, BACKUP_HEADER_BYTES + BACKUP_TRAILER_BYTES);
		return -1;
	}
	decode(buf, h);
	if (h->format == 0 || h->format > BACKUP_FORMAT) {
		snprintf(why, cap,
			 "backup file format %" PRIu32 " is unknown to this "
			 "release (it reads format %u): use a newer release",
			 h->format, BACKUP_FORMAT);
		return -1;
	}
	uint64_t want = (uint64_t)BACKUP_HEADER_BYTES + h->payload_len +
			BACKUP_TRAILER_BYTES;
	if (h->payload_len > len || want != len) {
		snprintf(why, cap,
			 "%s: the file is %zu bytes, its header says %" PRIu64
			 " (a payload of %" PRIu64 " bytes)",
			 (uint64_t)len < want ? "truncated" : "wrong length",
			 len, want, h->payload_len);
		return -1;
	}
	const uint8_t *pl = buf + BACKUP_HEADER_BYTES;
	uint64_t sum = backup_file_checksum(
		buf, baton__checksum(pl, (size_t)h->payload_len));
	uint64_t stored = baton_le_get_u64(pl + h->payload_len);
	if (sum != stored) {
		snprintf(why, cap,
			 "checksum mismatch: the file says %016" PRIx64
			 ", its bytes hash to %016" PRIx64
			 " (the file is damaged)",
			 stored, sum);
		return -1;
	}
	*payload = pl;
	return 0;
}

int backup_file_load(const char *path, uint8_t **buf, size_t *len,
		     struct backup_header *h, const uint8_t **payload,
		     char *why, size_t cap)
{
	*buf = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(why, cap, "cannot read %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	size_t size = (size_t)st.st_size;
	uint8_t *b = malloc(size > 0 ? size : 1);
	if (b == NULL) {
		snprintf(why, cap, "cannot read %s: out of memory (%zu bytes)",
			 path, size);
		close(fd);
		return -1;
	}
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, b + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, cap, "cannot read %s: %s", path,
				 n < 0 ? strerror(errno) : "short read");
			free(b);
			close(fd);
			return -1;
		}
		got += (size_t)n;
	}
	close(fd);
	if (backup_file_check(b, size, h, payload, why, cap) != 0) {
		free(b);
		return -1;
	}
	*buf = b;
	*len = size;
	return 0;
}

void backup_uuid_format(const uint8_t uuid[BACKUP_UUID_BYTES], char out[37])
{
	size_t o = 0;
	for (unsigned i = 0; i < BACKUP_UUID_BYTES; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		snprintf(out + o, 3, "%02x", uuid[i]);
		o += 2;
	}
	out[o] = '\0';
}
