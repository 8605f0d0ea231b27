/* The write-ahead log's recovery (baton__wal_open, src/storage/wal.c:
 * segment header, batches, records, torn tails): the input is the log of a
 * data directory whose snapshot ends just before the first segment's first
 * index (so the bytes choose it too): one segment, or two when a second
 * segment header's magic starts at a multiple of 8 after the first
 * header. The entries it
 * recovers, written as one batch into a new log and recovered again, must
 * be the same entries. */
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "format.h"
#include "storage_target.h"

#define SEGMENT "wal-0000000000000001.log"
#define SEGMENT_2 "wal-0000000000000002.log"
#define SEGMENT_BYTES ((uint64_t)64 << 10)

struct log {
	struct baton_entry *e;
	uint32_t n;
};

static void log_free(struct log *l)
{
	for (uint32_t i = 0; i < l->n; i++)
		free(l->e[i].buf);
	free(l->e);
	l->e = NULL;
	l->n = 0;
}

static int recover(struct fault_vfs *v, baton_index snap_index, struct log *out,
		   char *err, size_t errlen)
{
	struct baton__wal w;
	int rv = baton__wal_open(&w, &v->base, FUZZ_DIR, SEGMENT_BYTES,
				 snap_index, &out->e, &out->n, err, errlen);
	if (rv != 0)
		return rv;
	baton__wal_close(&w);
	for (uint32_t i = 0; i < out->n; i++)
		FUZZ_CHECK(out->e[i].index == snap_index + 1 + i &&
				   out->e[i].buf != NULL,
			   "entry %u has index %llu after snapshot %llu", i,
			   (unsigned long long)out->e[i].index,
			   (unsigned long long)snap_index);
	return 0;
}

/* A new log holding l's entries in one batch. */
static struct fault_vfs *write_again(const struct log *l,
				     baton_index snap_index)
{
	struct fault_vfs *v = fuzz_vfs(NULL, NULL, 0);
	char err[STORAGE_ERR_MAX] = "";
	struct baton__wal w;
	struct log empty = {NULL, 0};
	int rv = baton__wal_open(&w, &v->base, FUZZ_DIR, SEGMENT_BYTES,
				 snap_index, &empty.e, &empty.n, err,
				 sizeof err);
	FUZZ_CHECK(rv == 0 && empty.n == 0, "a new log: %d (%s)", rv, err);
	log_free(&empty);
	size_t body = 0;
	for (uint32_t i = 0; i < l->n; i++)
		body += baton__wal_record_len(l->e[i].len);
	uint8_t *buf = malloc(WAL_BATCH_HEADER_LEN + body + WAL_TRAILER_LEN);
	FUZZ_CHECK(buf != NULL, "out of memory");
	uint8_t *p = buf + WAL_BATCH_HEADER_LEN;
	for (uint32_t i = 0; i < l->n; i++) {
		baton__wal_encode_entry(p, &l->e[i]);
		p += baton__wal_record_len(l->e[i].len);
	}
	rv = baton__wal_append(&w, buf, body, l->n, l->e[0].index,
			       l->e[l->n - 1].index, err, sizeof err);
	FUZZ_CHECK(rv == 0, "append: %d (%s)", rv, err);
	free(buf);
	baton__wal_close(&w);
	return v;
}

static void check_same(const struct log *a, const struct log *b)
{
	FUZZ_CHECK(a->n == b->n,
		   "%u entries recovered, %u after the round "
		   "trip",
		   a->n, b->n);
	for (uint32_t i = 0; i < a->n; i++) {
		const struct baton_entry *x = &a->e[i], *y = &b->e[i];
		FUZZ_CHECK(x->index == y->index && x->term == y->term &&
				   x->type == y->type && x->len == y->len &&
				   (x->len == 0 ||
				    memcmp(x->buf, y->buf, x->len) == 0),
			   "entry %llu changed in the round trip",
			   (unsigned long long)x->index);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	baton_index first = size >= 32 ? baton_le_get_u64(data + 24) : 1;
	baton_index snap_index = first > 0 ? first - 1 : 0;
	size_t second = size;
	for (size_t off = WAL_SEGMENT_HEADER_LEN; off + 8 <= size; off += 8)
		if (memcmp(data + off, WAL_MAGIC, 8) == 0) {
			second = off;
			break;
		}
	struct fault_vfs *v = fuzz_vfs(SEGMENT, data, second);
	if (second < size)
		fuzz_vfs_add(v, SEGMENT_2, data + second, size - second);
	char err[STORAGE_ERR_MAX] = "";
	struct log a = {NULL, 0}, b = {NULL, 0};
	int rv = recover(v, snap_index, &a, err, sizeof err);
	if (rv != 0) {
		fuzz_check_storage_error(rv, err);
		fault_vfs_free(v);
		return 0;
	}
	/* Recovery repaired what it found: it recovers the same again. */
	rv = recover(v, snap_index, &b, err, sizeof err);
	FUZZ_CHECK(rv == 0, "a recovered log does not recover again: %d (%s)",
		   rv, err);
	check_same(&a, &b);
	log_free(&b);
	fault_vfs_free(v);
	if (a.n > 0) {
		struct fault_vfs *w = write_again(&a, snap_index);
		rv = recover(w, snap_index, &b, err, sizeof err);
		FUZZ_CHECK(rv == 0, "the log written again: %d (%s)", rv, err);
		check_same(&a, &b);
		log_free(&b);
		fault_vfs_free(w);
	}
	log_free(&a);
	return 0;
}
