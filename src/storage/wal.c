/*
 * The write-ahead log: segment files of batches of records (format.h).
 *
 * Recovery has to tell an interrupted write from damage. A batch is written
 * with one write and synced before the next batch is written, so only the
 * last batch of the last segment can be incomplete, and an incomplete write
 * leaves a prefix of the batch followed by zeros (the segment is
 * preallocated) or the end of the file. Such a batch has no trailer: it was
 * never reported durable and is cut off. Everything else — a damaged record
 * in a batch whose trailer was written, a damaged batch followed by a valid
 * one, any damage in an older segment — is corruption: recovery refuses to
 * start and changes nothing, because the damaged entries may have been
 * acknowledged to the leader.
 */
#define _GNU_SOURCE /* memmem */
#include <baton/assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file_header.h"
#include "format.h"
#include "histogram.h"
#include "internal.h"

struct baton_histogram baton_storage_fsync_seconds =
	BATON_HISTOGRAM_LATENCY_INIT;

static uint64_t wal_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define SEG_NAME_LEN 64u

/* Every format's segment header is WAL_SEGMENT_HEADER_LEN bytes or more. */
static const struct baton__file_kind wal_kind = {
	WAL_MAGIC, "log segment", WAL_FORMAT, WAL_SEGMENT_HEADER_LEN};

static void seg_name(char *out, uint64_t seq)
{
	snprintf(out, SEG_NAME_LEN, "wal-%016" PRIx64 ".log", seq);
}

static bool parse_seg_name(const char *name, uint64_t *seq)
{
	unsigned long long v;
	char tail[8];
	if (strlen(name) != 24 ||
	    sscanf(name, "wal-%16llx%7s", &v, tail) != 2 ||
	    strcmp(tail, ".log") != 0)
		return false;
	*seq = (uint64_t)v;
	return true;
}

size_t baton__wal_record_len(uint32_t payload_len)
{
	return WAL_RECORD_HEADER_LEN + pad8(payload_len);
}

static void encode_record(uint8_t *p, uint32_t kind, uint32_t type,
			  baton_term term, baton_index index,
			  const uint8_t *payload, uint32_t len)
{
	memset(p, 0, baton__wal_record_len(len));
	baton_le_put_u32(p, len);
	p[4] = (uint8_t)kind;
	baton_le_put_u32(p + 8, type);
	baton_le_put_u64(p + 16, term);
	baton_le_put_u64(p + 24, index);
	if (len > 0)
		memcpy(p + WAL_RECORD_HEADER_LEN, payload, len);
	baton_le_put_u64(
		p + 32,
		baton__checksum2(p, 32, p + WAL_RECORD_HEADER_LEN, len));
}

void baton__wal_encode_entry(uint8_t *p, const struct baton_entry *e)
{
	encode_record(p, WAL_RECORD_ENTRY, e->type, e->term, e->index, e->buf,
		      e->len);
}

void baton__wal_encode_truncate(uint8_t *p, baton_index from)
{
	encode_record(p, WAL_RECORD_TRUNCATE, 0, 0, from, NULL, 0);
}

/* ---- segments on disk ---------------------------------------------------- */

static int seg_path(const struct baton__wal *w, uint64_t seq, char *path)
{
	char name[SEG_NAME_LEN];
	seg_name(name, seq);
	return baton__path(path, w->dir, name);
}

static int push_segment(struct baton__wal *w, const struct baton__segment *s)
{
	if (w->n_segs == w->cap_segs) {
		uint32_t cap = w->cap_segs ? w->cap_segs * 2 : 8;
		struct baton__segment *g = realloc(w->segs, cap * sizeof *g);
		if (g == NULL)
			return BATON_ENOMEM;
		w->segs = g;
		w->cap_segs = cap;
	}
	w->segs[w->n_segs++] = *s;
	return 0;
}

/* Make segment `seq` whose first entry will be `first_index`: header,
 * preallocation, sync of the file and of the directory, so that a batch
 * written into it can never outlive the segment's name. */
static int create_segment(struct baton__wal *w, uint64_t seq,
			  baton_index first_index, char *err, size_t errlen)
{
	char path[STORAGE_PATH_MAX];
	if (seg_path(w, seq, path) != 0)
		return baton__errf(err, errlen, BATON_EINVAL, "path too long");
	struct baton_vfs *v = w->vfs;
	int fd;
	int rv = v->ops->open(v, path, BATON_VFS_CREATE | BATON_VFS_EXCL, &fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "create", path);
	uint8_t h[WAL_SEGMENT_HEADER_LEN] = {0};
	baton__file_header_start(h, &wal_kind, WAL_SEGMENT_HEADER_LEN);
	baton_le_put_u64(h + 16, seq);
	baton_le_put_u64(h + 24, first_index);
	baton__file_header_seal(h, WAL_SEGMENT_HEADER_LEN);
	const char *what = "write";
	rv = v->ops->pwrite(v, fd, h, sizeof h, 0);
	if (rv == 0) {
		what = "preallocate";
		rv = v->ops->allocate(v, fd, w->segment_bytes);
		if (rv == -EOPNOTSUPP)
			rv = 0;
	}
	if (rv == 0) {
		what = "fsync";
		rv = v->ops->fsync(v, fd);
	}
	if (rv == 0) {
		what = "fsync directory of";
		rv = v->ops->sync_dir(v, w->dir);
	}
	if (rv != 0) {
		v->ops->close(v, fd);
		if (rv == -ENOSPC || rv == -EDQUOT) {
			/* Nothing was written into it: leave no half-made
			 * segment, and say what the disk must hold. */
			v->ops->unlink(v, path);
			return baton__errf(
				err, errlen, BATON_EIO,
				"%s %s: %s: a new log segment takes %" PRIu64
				" bytes (the segment size, batond's "
				"--wal-segment-bytes); free that much in %s "
				"or choose a smaller segment size",
				what, path, strerror(-rv), w->segment_bytes,
				w->dir);
		}
		return baton__io_err(err, errlen, rv, what, path);
	}
	struct baton__segment s = {.seq = seq,
				   .first_index = first_index,
				   .max_index = 0,
				   .end = WAL_SEGMENT_HEADER_LEN,
				   .fd = fd};
	if (push_segment(w, &s) != 0) {
		v->ops->close(v, fd);
		return baton__errf(err, errlen, BATON_ENOMEM, "out of memory");
	}
	return 0;
}

/* ---- recovery ------------------------------------------------------------ */

struct replay {
	struct baton_entry *e;
	uint32_t n, cap;
	baton_index snap_index;
};

static void replay_drop_from(struct replay *r, baton_index from)
{
	while (r->n > 0 && r->e[r->n - 1].index >= from)
		free(r->e[--r->n].buf);
}

static int replay_entry(struct replay *r, const uint8_t *rec, const char *path,
			char *err, size_t errlen)
{
	baton_index index = baton_le_get_u64(rec + 24);
	uint32_t len = baton_le_get_u32(rec);
	if (index == 0)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: entry with index 0", path);
	if (r->n > 0) {
		baton_index last = r->e[r->n - 1].index;
		if (index <= last)
			replay_drop_from(r, index); /* a newer suffix */
		else if (index > last + 1 && index > r->snap_index + 1)
			return baton__errf(err, errlen, BATON_ECORRUPT,
					   "%s: entry %" PRIu64
					   " follows entry %" PRIu64
					   " (entries missing)",
					   path, index, last);
		else if (index > last + 1)
			replay_drop_from(r, 0); /* a snapshot covers the gap */
	}
	if (r->n == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 1024;
		struct baton_entry *g = realloc(r->e, cap * sizeof *g);
		if (g == NULL)
			return baton__errf(err, errlen, BATON_ENOMEM,
					   "out of memory replaying the log");
		r->e = g;
		r->cap = cap;
	}
	struct baton_entry *e = &r->e[r->n];
	e->index = index;
	e->term = baton_le_get_u64(rec + 16);
	e->type = baton_le_get_u32(rec + 8);
	e->len = len;
	e->buf = malloc(len > 0 ? len : 1);
	if (e->buf == NULL)
		return baton__errf(err, errlen, BATON_ENOMEM,
				   "out of memory replaying the log");
	memcpy(e->buf, rec + WAL_RECORD_HEADER_LEN, len);
	r->n++;
	return 0;
}

static bool batch_header_valid(const uint8_t *h)
{
	return baton_le_get_u32(h) == WAL_BATCH_MAGIC &&
	       baton_le_get_u64(h + 24) == baton__checksum(h, 24) &&
	       baton_le_get_u64(h + 8) <= WAL_BATCH_BODY_MAX;
}

/* A segment as recovery holds it: the file's `size` bytes, of which every
 * one from `data_end` on is zero (data_end is just past the last nonzero
 * byte). Knowing where the zeros start spares the checks below a pass over
 * the zeroed tail of a preallocated segment, most of its 64 MiB. */
struct seg_image {
	uint8_t *buf;
	uint64_t size;
	uint64_t data_end;
};

/* No byte of the magic is zero, so no header starts at or after data_end
 * and a search for the magic never needs to look there. */
_Static_assert((WAL_BATCH_MAGIC & 0xffu) != 0 &&
		       (WAL_BATCH_MAGIC >> 8 & 0xffu) != 0 &&
		       (WAL_BATCH_MAGIC >> 16 & 0xffu) != 0 &&
		       (WAL_BATCH_MAGIC >> 24 & 0xffu) != 0,
	       "a batch magic with a zero byte could hide in the zeroed tail");

/* A valid batch header anywhere at or after `from`: data that was written
 * after the batch at `from`, which therefore had been synced. */
static bool later_batch_exists(const struct seg_image *img, uint64_t from)
{
	/* Looks for the magic with memmem rather than at every 8 bytes, which
	 * crosses a long stretch of data (or of zeros before data_end) many
	 * times faster. */
	uint8_t magic[4];
	baton_le_put_u32(magic, WAL_BATCH_MAGIC);
	const uint8_t *buf = img->buf;
	uint64_t off = pad8((size_t)from);
	while (off < img->data_end && off + WAL_BATCH_HEADER_LEN <= img->size) {
		const uint8_t *hit = memmem(
			buf + off, (size_t)(img->data_end - off), magic, 4);
		if (hit == NULL)
			return false;
		uint64_t at = (uint64_t)(hit - buf);
		if (at % 8 == 0 && at + WAL_BATCH_HEADER_LEN <= img->size &&
		    batch_header_valid(buf + at))
			return true;
		off = at + 1;
	}
	return false;
}

/* Was the write of the batch at b cut off inside its trailer (at offset t
 * from b), or before it? Then the trailer on disk is a prefix of the right
 * one followed by zeros (all zeros if the cut came earlier); a trailer
 * damaged in place, or a right one over a damaged body, is not. */
static bool trailer_cut_short(const uint8_t *b, uint64_t t)
{
	const uint8_t *disk = b + t;
	if (all_zero(disk, WAL_TRAILER_LEN))
		return true;
	uint8_t want[WAL_TRAILER_LEN] = {0};
	baton_le_put_u32(want, WAL_TRAILER_MAGIC);
	baton_le_put_u64(want + 8, baton__checksum(b, (size_t)t));
	size_t cut = 0;
	while (cut < WAL_TRAILER_LEN && disk[cut] == want[cut])
		cut++;
	return cut < WAL_TRAILER_LEN &&
	       all_zero(disk + cut, WAL_TRAILER_LEN - cut);
}

/* Apply the records of a batch whose trailer checked out. */
static int replay_batch(struct replay *r, struct baton__segment *s,
			const uint8_t *body, uint64_t body_len, uint32_t n,
			const char *path, uint64_t off, char *err,
			size_t errlen)
{
	uint64_t p = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (p + WAL_RECORD_HEADER_LEN > body_len)
			goto bad;
		const uint8_t *rec = body + p;
		uint32_t len = baton_le_get_u32(rec);
		uint64_t total = baton__wal_record_len(len);
		if (total > body_len - p ||
		    baton_le_get_u64(rec + 32) !=
			    baton__checksum2(rec, 32, rec + 40, len))
			goto bad;
		int rv = 0;
		if (rec[4] == WAL_RECORD_ENTRY) {
			rv = replay_entry(r, rec, path, err, errlen);
			baton_index index = baton_le_get_u64(rec + 24);
			if (index > s->max_index)
				s->max_index = index;
		} else if (rec[4] == WAL_RECORD_TRUNCATE) {
			replay_drop_from(r, baton_le_get_u64(rec + 24));
		} else {
			rv = baton__errf(err, errlen, BATON_EVERSION,
					 "%s: record kind %u at offset %" PRIu64
					 " is not one this release knows "
					 "(written by a newer one?)",
					 path, rec[4], off);
		}
		if (rv != 0)
			return rv;
		p += total;
	}
	if (p == body_len)
		return 0;
bad:
	return baton__errf(
		err, errlen, BATON_ECORRUPT,
		"%s: malformed record in the batch at offset %" PRIu64, path,
		off);
}

/* What recovery decided about one segment. */
struct seg_scan {
	uint64_t end; /* end of the last good batch */
	bool torn;    /* a torn tail starts at `end` */
	bool drop;    /* a segment whose creation was interrupted */
};

static int corrupt(char *err, size_t errlen, const char *path, uint64_t off,
		   const char *why, const struct replay *r)
{
	return baton__errf(
		err, errlen, BATON_ECORRUPT,
		"%s: %s at offset %" PRIu64 "; the log is intact up to index "
		"%" PRIu64 "; refusing to start (nothing was changed: restore "
		"this node from a snapshot or remove and re-add it)",
		path, why, off,
		r->n > 0 ? r->e[r->n - 1].index : r->snap_index);
}

static int scan_segment(struct replay *r, struct baton__segment *s,
			const struct seg_image *img, bool last,
			const char *path, struct seg_scan *out, char *err,
			size_t errlen)
{
	memset(out, 0, sizeof *out);
	const uint8_t *buf = img->buf;
	uint64_t size = img->size;
	struct baton__file_head head;
	int hrv = baton__file_header_check(&wal_kind, buf, (size_t)size, path,
					   &head, err, errlen);
	if (hrv == BATON_EVERSION)
		return hrv;
	/* Format 1 is the only one read here; its header has one length. */
	if (hrv != 0 || head.header_len != WAL_SEGMENT_HEADER_LEN) {
		/* Interrupted creation: nothing but a partial header. */
		if (last && img->data_end <= WAL_SEGMENT_HEADER_LEN &&
		    !later_batch_exists(img, 0)) {
			out->drop = true;
			return 0;
		}
		return corrupt(err, errlen, path, 0, "segment header damaged",
			       r);
	}
	s->first_index = baton_le_get_u64(buf + 24);
	uint64_t off = WAL_SEGMENT_HEADER_LEN;
	for (;;) {
		const char *why = NULL;
		bool cut_short =
			true; /* the damage looks like an interrupted write */
		if (off + WAL_BATCH_HEADER_LEN > size) {
			if (off >= img->data_end)
				break;
			why = "truncated batch header";
		} else if (all_zero(buf + off, WAL_BATCH_HEADER_LEN)) {
			/* The end of what was written, unless a zeroed
			 * region hides later batches. */
			if (!later_batch_exists(img, off))
				break;
			why = "zeroed batch followed by valid ones";
		} else if (!batch_header_valid(buf + off)) {
			why = "batch header checksum mismatch";
			cut_short = off + WAL_BATCH_HEADER_LEN >= img->data_end;
		} else {
			uint64_t body_len = baton_le_get_u64(buf + off + 8);
			uint64_t t = off + WAL_BATCH_HEADER_LEN + body_len;
			if (t + WAL_TRAILER_LEN > size) {
				why = "batch runs past the end of the file";
			} else if (baton_le_get_u32(buf + t) ==
					   WAL_TRAILER_MAGIC &&
				   baton_le_get_u32(buf + t + 4) == 0 &&
				   baton_le_get_u64(buf + t + 8) ==
					   baton__checksum(buf + off,
							   (size_t)(t - off))) {
				int rv = replay_batch(
					r, s, buf + off + WAL_BATCH_HEADER_LEN,
					body_len,
					baton_le_get_u32(buf + off + 4), path,
					off, err, errlen);
				if (rv != 0)
					return rv;
				off = t + WAL_TRAILER_LEN;
				continue;
			} else {
				why = "batch checksum mismatch (a record or "
				      "the trailer is damaged)";
				cut_short =
					trailer_cut_short(buf + off, t - off);
			}
		}
		/* Damage at `off`: a torn tail or corruption? */
		bool torn =
			last && cut_short && !later_batch_exists(img, off + 8);
		if (!torn)
			return corrupt(err, errlen, path, off, why, r);
		out->torn = true;
		break;
	}
	out->end = off;
	return 0;
}

/* The length of p[0..n) without its trailing zero bytes. */
static size_t trim_zeros(const uint8_t *p, size_t n)
{
	/* Whole blocks compared with zeros first: memcmp uses the widest
	 * loads the CPU has, so a window of zeros goes by at the speed of its
	 * cache (about 1 ms for 64 MiB), several times faster than a loop. */
	static const uint8_t zeros[4096];
	while (n >= sizeof zeros &&
	       memcmp(p + n - sizeof zeros, zeros, sizeof zeros) == 0)
		n -= sizeof zeros;
	while (n > 0 && p[n - 1] == 0)
		n--;
	return n;
}

/* Read a segment whole into img, through the vfs. The zeroed tail of a
 * preallocated segment is read but never stored: the image comes from
 * calloc, whose large blocks are fresh pages faulted in only when written,
 * and the file is read in windows, straight into place while they hold data
 * to their end, else into the small reused `window`, copied into place only
 * up to its last nonzero byte. Reading 64 MiB into fresh pages cost a start
 * about 90 ms of page faults and copying; a zero window costs a read into
 * the same cached buffer and a pass over it. */
static int read_segment(struct baton_vfs *v, const char *path, uint8_t *window,
			struct seg_image *img, char *err, size_t errlen)
{
	int fd;
	int rv = v->ops->open(v, path, 0, &fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "open", path);
	uint64_t size = 0;
	rv = v->ops->size(v, fd, &size);
	if (rv == 0 && size > WAL_BATCH_BODY_MAX * 2)
		rv = -EFBIG;
	uint8_t *buf = NULL;
	if (rv == 0) {
		buf = calloc(size > 0 ? (size_t)size : 1, 1);
		if (buf == NULL)
			rv = -ENOMEM;
	}
	uint64_t off = 0, data_end = 0;
	bool in_place = true;
	while (rv == 0 && off < size) {
		size_t want = size - off < WAL_READ_WINDOW_BYTES
				      ? (size_t)(size - off)
				      : WAL_READ_WINDOW_BYTES;
		uint8_t *to = in_place ? buf + off : window;
		size_t n = 0;
		rv = v->ops->pread(v, fd, to, want, off, &n);
		if (rv != 0)
			break;
		size_t kept = trim_zeros(to, n);
		if (kept > 0)
			data_end = off + kept;
		if (kept > 0 && !in_place)
			memcpy(buf + off, window, kept);
		in_place = kept == n;
		off += n;
		if (n < want)
			break; /* the file ended sooner than its size said */
	}
	v->ops->close(v, fd);
	if (rv != 0) {
		free(buf);
		return baton__io_err(err, errlen, rv, "read", path);
	}
	BATON_ASSERT(data_end <= off);
	*img = (struct seg_image){
		.buf = buf, .size = off, .data_end = data_end};
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The sequence numbers of the segments in dir, sorted. */
static int list_segments(struct baton_vfs *v, const char *dir, uint64_t **out,
			 uint32_t *n_out, char *err, size_t errlen)
{
	char **names = NULL;
	size_t n = 0;
	int rv = v->ops->list(v, dir, &names, &n);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "list", dir);
	uint64_t *seqs = malloc((n > 0 ? n : 1) * sizeof *seqs);
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t seq;
		if (seqs != NULL && parse_seg_name(names[i], &seq))
			seqs[k++] = seq;
		free(names[i]);
	}
	free(names);
	if (seqs == NULL)
		return baton__errf(err, errlen, BATON_ENOMEM, "out of memory");
	qsort(seqs, k, sizeof *seqs, cmp_u64);
	*out = seqs;
	*n_out = k;
	return 0;
}

/* Cut a torn tail off the last segment (zeroing what follows, so no stale
 * batch can reappear behind a later, shorter one) or drop a segment whose
 * creation was interrupted. */
static int repair(struct baton__wal *w, uint64_t seq, const struct seg_scan *sc,
		  char *err, size_t errlen)
{
	struct baton_vfs *v = w->vfs;
	char path[STORAGE_PATH_MAX];
	if (seg_path(w, seq, path) != 0)
		return baton__errf(err, errlen, BATON_EINVAL, "path too long");
	if (sc->drop) {
		int rv = v->ops->unlink(v, path);
		if (rv == 0)
			rv = v->ops->sync_dir(v, w->dir);
		return rv == 0 ? 0
			       : baton__io_err(err, errlen, rv,
					       "remove unfinished segment",
					       path);
	}
	int fd;
	int rv = v->ops->open(v, path, 0, &fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "open", path);
	rv = v->ops->truncate(v, fd, sc->end);
	if (rv == 0) {
		rv = v->ops->allocate(v, fd, w->segment_bytes);
		if (rv == -EOPNOTSUPP)
			rv = 0;
	}
	if (rv == 0)
		rv = v->ops->fsync(v, fd);
	v->ops->close(v, fd);
	return rv == 0 ? 0
		       : baton__io_err(err, errlen, rv, "cut torn tail of",
				       path);
}

static int finish_replay(struct replay *r, char *err, size_t errlen)
{
	uint32_t drop = 0;
	while (drop < r->n && r->e[drop].index <= r->snap_index)
		free(r->e[drop++].buf);
	if (drop > 0)
		memmove(r->e, r->e + drop, (r->n - drop) * sizeof *r->e);
	r->n -= drop;
	if (r->n > 0 && r->e[0].index != r->snap_index + 1)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "the log starts at index %" PRIu64
				   " but the snapshot ends at %" PRIu64
				   " (entries missing)",
				   r->e[0].index, r->snap_index);
	return 0;
}

static void replay_free(struct replay *r)
{
	replay_drop_from(r, 0);
	free(r->e);
}

int baton__wal_open(struct baton__wal *w, struct baton_vfs *v, const char *dir,
		    uint64_t segment_bytes, baton_index snap_index,
		    struct baton_entry **entries, uint32_t *n_entries,
		    char *err, size_t errlen)
{
	memset(w, 0, sizeof *w);
	w->vfs = v;
	w->dir = dir;
	w->segment_bytes = segment_bytes;
	uint64_t *seqs = NULL;
	uint32_t n = 0;
	int rv = list_segments(v, dir, &seqs, &n, err, errlen);
	if (rv != 0)
		return rv;
	struct replay r = {.snap_index = snap_index};
	struct seg_scan last_scan = {0};
	uint8_t *window = n > 0 ? malloc(WAL_READ_WINDOW_BYTES) : NULL;
	if (n > 0 && window == NULL)
		rv = baton__errf(err, errlen, BATON_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < n && rv == 0; i++) {
		char path[STORAGE_PATH_MAX];
		struct seg_image img = {0};
		rv = seg_path(w, seqs[i], path);
		if (rv == 0)
			rv = read_segment(v, path, window, &img, err, errlen);
		struct baton__segment s = {.seq = seqs[i], .fd = -1};
		struct seg_scan sc;
		if (rv == 0)
			rv = scan_segment(&r, &s, &img, i + 1 == n, path, &sc,
					  err, errlen);
		free(img.buf);
		if (rv == 0 && !sc.drop) {
			s.end = sc.end;
			if (push_segment(w, &s) != 0)
				rv = baton__errf(err, errlen, BATON_ENOMEM,
						 "out of memory");
		}
		if (i + 1 == n)
			last_scan = sc;
	}
	free(window);
	if (rv == 0)
		rv = finish_replay(&r, err, errlen);
	/* Verified everything: only now change anything on disk. */
	if (rv == 0 && n > 0 && (last_scan.torn || last_scan.drop))
		rv = repair(w, seqs[n - 1], &last_scan, err, errlen);
	uint64_t next_seq = n > 0 ? seqs[n - 1] + 1 : 1;
	free(seqs);
	if (rv == 0 && w->n_segs == 0) {
		baton_index next =
			r.n > 0 ? r.e[r.n - 1].index + 1 : snap_index + 1;
		rv = create_segment(w, next_seq, next, err, errlen);
	} else if (rv == 0) {
		struct baton__segment *s = &w->segs[w->n_segs - 1];
		char path[STORAGE_PATH_MAX];
		rv = seg_path(w, s->seq, path);
		if (rv == 0)
			rv = v->ops->open(v, path, 0, &s->fd);
		if (rv != 0)
			rv = baton__io_err(err, errlen, rv, "open", path);
	}
	if (rv != 0) {
		replay_free(&r);
		baton__wal_close(w);
		return rv;
	}
	*entries = r.e;
	*n_entries = r.n;
	return 0;
}

void baton__wal_close(struct baton__wal *w)
{
	for (uint32_t i = 0; i < w->n_segs; i++)
		if (w->segs[i].fd >= 0)
			w->vfs->ops->close(w->vfs, w->segs[i].fd);
	free(w->segs);
	w->segs = NULL;
	w->n_segs = w->cap_segs = 0;
}

/* ---- writing ----------------------------------------------------------- */

int baton__wal_append(struct baton__wal *w, uint8_t *buf, size_t body_len,
		      uint32_t n_records, baton_index first_index,
		      baton_index max_index, char *err, size_t errlen)
{
	BATON_ASSERT(w->n_segs > 0);
	size_t total = WAL_BATCH_HEADER_LEN + body_len + WAL_TRAILER_LEN;
	struct baton__segment *s = &w->segs[w->n_segs - 1];
	if (s->end + total > w->segment_bytes &&
	    s->end > WAL_SEGMENT_HEADER_LEN) {
		int rv =
			create_segment(w, s->seq + 1, first_index, err, errlen);
		if (rv != 0)
			return rv;
		s = &w->segs[w->n_segs - 2];
		w->vfs->ops->close(w->vfs, s->fd);
		s->fd = -1;
		s = &w->segs[w->n_segs - 1];
	}
	uint8_t *h = buf;
	memset(h, 0, WAL_BATCH_HEADER_LEN);
	baton_le_put_u32(h, WAL_BATCH_MAGIC);
	baton_le_put_u32(h + 4, n_records);
	baton_le_put_u64(h + 8, body_len);
	baton_le_put_u64(h + 16, first_index);
	baton_le_put_u64(h + 24, baton__checksum(h, 24));
	uint8_t *t = buf + WAL_BATCH_HEADER_LEN + body_len;
	memset(t, 0, WAL_TRAILER_LEN);
	baton_le_put_u32(t, WAL_TRAILER_MAGIC);
	baton_le_put_u64(t + 8,
			 baton__checksum(buf, WAL_BATCH_HEADER_LEN + body_len));
	char path[STORAGE_PATH_MAX];
	seg_path(w, s->seq, path);
	int rv = w->vfs->ops->pwrite(w->vfs, s->fd, buf, total, s->end);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "write", path);
	uint64_t sync_start_ns = wal_now_ns();
	rv = w->vfs->ops->fdatasync(w->vfs, s->fd);
	baton_histogram_observe_ns(&baton_storage_fsync_seconds,
				   wal_now_ns() - sync_start_ns);
	w->syncs++;
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "fdatasync", path);
	s->end += total;
	if (max_index > s->max_index)
		s->max_index = max_index;
	w->batches++;
	w->bytes_written += total;
	return 0;
}

uint64_t baton__wal_bytes(const struct baton__wal *w)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < w->n_segs; i++)
		total += w->segs[i].end;
	return total;
}

void baton__wal_compact(struct baton__wal *w, baton_index upto)
{
	uint32_t drop = 0;
	while (drop + 1 < w->n_segs && w->segs[drop].max_index <= upto) {
		char path[STORAGE_PATH_MAX];
		if (seg_path(w, w->segs[drop].seq, path) != 0 ||
		    w->vfs->ops->unlink(w->vfs, path) != 0)
			break; /* kept: replay skips what a snapshot covers */
		drop++;
	}
	if (drop == 0)
		return;
	memmove(w->segs, w->segs + drop, (w->n_segs - drop) * sizeof *w->segs);
	w->n_segs -= drop;
}
