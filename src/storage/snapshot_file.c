/* Snapshot files: streamed to a temporary file, which gets its header last
 * (the data's length and checksum are known only then), is synced, and is
 * renamed over the current snapshot; then the directory is synced. A crash
 * at any point leaves the old snapshot or the new one. */
#include <baton/assert.h>
#include <errno.h>
#include <stdlib.h>

#include "checksum.h"
#include "file_header.h"
#include "format.h"
#include "internal.h"

#define SNAP_HEADER_MAX 4096u

/* Format 1's header is the shortest: the fixed part and the checksum. */
static const struct baton__file_kind snap_kind = {
	SNAP_MAGIC, "snapshot", SNAP_FORMAT, SNAP_FIXED_LEN + 8u};

struct baton__snap_writer {
	struct baton_vfs *vfs;
	const char *dir;
	char tmp[STORAGE_PATH_MAX];
	int fd;
	struct baton_snapshot_header h;
	uint32_t header_len;
	uint64_t data_len;
	struct baton__hasher *hasher;
};

/* The header's length in `format`: the fixed part, the configuration, the
 * version table, versions_index (2 and later), the downgrade (3), the
 * checksum. */
static size_t header_len_of(uint32_t format, size_t config_len,
			    uint32_t n_versions)
{
	return SNAP_FIXED_LEN + pad8(config_len) +
	       (size_t)n_versions * SNAP_VERSION_ENTRY_LEN +
	       (format >= 2 ? 8u : 0u) +
	       (format >= 3 ? SNAP_DOWNGRADE_LEN : 0u) + 8u;
}

static bool release_none(struct baton_release r)
{
	return r.major == 0 && r.minor == 0 && r.patch == 0;
}

/* Format 3 only while a downgrade is in progress (see format.h). */
static uint32_t format_of(const struct baton_snapshot_header *h)
{
	return release_none(h->meta.versions.downgrade.target)
		       ? SNAP_FORMAT_NO_DOWNGRADE
		       : SNAP_FORMAT;
}

static size_t header_len(const struct baton_snapshot_header *h)
{
	return header_len_of(format_of(h),
			     baton_config_encoded_len(&h->meta.config),
			     h->meta.versions.n);
}

static uint8_t *put_release(uint8_t *p, struct baton_release r)
{
	baton_le_put_u16(p, r.major);
	baton_le_put_u16(p + 2, r.minor);
	baton_le_put_u16(p + 4, r.patch);
	return p + 8; /* and the pad */
}

static const uint8_t *get_release(const uint8_t *p, struct baton_release *r)
{
	r->major = baton_le_get_u16(p);
	r->minor = baton_le_get_u16(p + 2);
	r->patch = baton_le_get_u16(p + 4);
	return p + 8;
}

/* Encode the header into b (header_len_of(h) bytes, zeroed by caller). */
static void encode_header(const struct baton_snapshot_header *h,
			  uint64_t data_len, uint64_t data_checksum, uint8_t *b)
{
	const struct baton_version_state *v = &h->meta.versions;
	size_t len = header_len(h);
	struct baton__file_kind kind = snap_kind;
	kind.format = format_of(h);
	baton__file_header_start(b, &kind, (uint32_t)len);
	baton_le_put_u64(b + 16, h->meta.index);
	baton_le_put_u64(b + 24, h->meta.term);
	baton_le_put_u64(b + 32, h->meta.config_index);
	baton_le_put_u32(b + 40, v->machine.value);
	baton_le_put_u16(b + 44, v->floor.major);
	baton_le_put_u16(b + 46, v->floor.minor);
	baton_le_put_u16(b + 48, v->floor.patch);
	baton_le_put_u16(b + 50, v->held ? SNAP_FLAG_HELD : 0);
	baton_le_put_u32(b + 52, v->n);
	baton_le_put_u64(b + 56, data_len);
	baton_le_put_u64(b + 64, data_checksum);
	size_t config_len = 0;
	int rv = baton_config_encode(&h->meta.config, b + SNAP_FIXED_LEN,
				     SNAP_HEADER_MAX - SNAP_FIXED_LEN,
				     &config_len);
	BATON_ASSERT(rv == 0);
	baton_le_put_u32(b + 72, (uint32_t)config_len);
	uint8_t *p = b + SNAP_FIXED_LEN + pad8(config_len);
	for (uint32_t i = 0; i < v->n; i++) {
		const struct baton_member_versions *e = &v->members[i];
		baton_le_put_u64(p, e->id);
		baton_le_put_u16(p + 8, e->profile.release.major);
		baton_le_put_u16(p + 10, e->profile.release.minor);
		baton_le_put_u16(p + 12, e->profile.release.patch);
		baton_le_put_u32(p + 16, e->profile.proto_min.value);
		baton_le_put_u32(p + 20, e->profile.proto_max.value);
		baton_le_put_u32(p + 24, e->profile.machine_max.value);
		p += SNAP_VERSION_ENTRY_LEN;
	}
	baton_le_put_u64(p, h->meta.versions_index);
	p += 8;
	if (kind.format >= 3) {
		const struct baton_downgrade *d = &v->downgrade;
		p = put_release(p, d->target);
		p = put_release(p, d->prev_floor);
		baton_le_put_u32(p, d->prev_machine.value);
		baton_le_put_u64(p + 8, d->since);
		p += 16;
	}
	BATON_ASSERT((size_t)(p - b) == len - FILE_HEADER_CHECKSUM_LEN);
	baton__file_header_seal(b, (uint32_t)len);
}

int baton__snap_writer_open(struct baton_vfs *v, const char *dir,
			    const char *tmp_name,
			    const struct baton_snapshot_header *h,
			    struct baton__snap_writer **out, char *err,
			    size_t errlen)
{
	const struct baton_snapshot_meta *m = &h->meta;
	if (m->config.n > BATON_MAX_MEMBERS ||
	    !baton_version_state_valid(&m->versions) ||
	    m->config_index > m->index || m->versions_index > m->index ||
	    header_len(h) > SNAP_HEADER_MAX)
		return baton__errf(err, errlen, BATON_EINVAL,
				   "snapshot metadata out of range (index "
				   "%llu: %u members, config at %llu, %u "
				   "version rows, machine version %u, versions "
				   "at %llu)",
				   (unsigned long long)m->index, m->config.n,
				   (unsigned long long)m->config_index,
				   m->versions.n, m->versions.machine.value,
				   (unsigned long long)m->versions_index);
	struct baton__snap_writer *w = calloc(1, sizeof *w);
	if (w == NULL)
		return baton__errf(err, errlen, BATON_ENOMEM, "out of memory");
	w->vfs = v;
	w->dir = dir;
	w->fd = -1;
	w->h = *h;
	w->header_len = (uint32_t)header_len(h);
	w->hasher = baton__hasher_new();
	int rv = baton__path(w->tmp, dir, tmp_name);
	if (w->hasher == NULL || rv != 0) {
		baton__snap_writer_free(w);
		return baton__errf(err, errlen, BATON_ENOMEM,
				   "out of memory or path too long");
	}
	rv = v->ops->open(v, w->tmp, BATON_VFS_CREATE | BATON_VFS_TRUNC,
			  &w->fd);
	if (rv != 0) {
		baton__io_err(err, errlen, rv, "create", w->tmp);
		w->fd = -1;
		w->tmp[0] = '\0'; /* not ours to delete */
		baton__snap_writer_free(w);
		return BATON_EIO;
	}
	*out = w;
	return 0;
}

int baton__snap_writer_write(struct baton__snap_writer *w, const void *buf,
			     size_t len, char *err, size_t errlen)
{
	int rv = w->vfs->ops->pwrite(w->vfs, w->fd, buf, len,
				     w->header_len + w->data_len);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "write", w->tmp);
	baton__hasher_update(w->hasher, buf, len);
	w->data_len += len;
	return 0;
}

int baton__snap_writer_sync_data(struct baton__snap_writer *w, char *err,
				 size_t errlen)
{
	int rv = w->vfs->ops->fdatasync(w->vfs, w->fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "fdatasync", w->tmp);
	return 0;
}

int baton__snap_writer_sync(struct baton__snap_writer *w, char *err,
			    size_t errlen)
{
	struct baton_vfs *v = w->vfs;
	uint8_t b[SNAP_HEADER_MAX] = {0};
	encode_header(&w->h, w->data_len, baton__hasher_digest(w->hasher), b);
	int rv = v->ops->pwrite(v, w->fd, b, w->header_len, 0);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "write", w->tmp);
	rv = v->ops->fsync(v, w->fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "fsync", w->tmp);
	return 0;
}

int baton__snap_writer_publish(struct baton__snap_writer *w,
			       const char *final_name, char *err, size_t errlen)
{
	struct baton_vfs *v = w->vfs;
	char path[STORAGE_PATH_MAX];
	if (baton__path(path, w->dir, final_name) != 0)
		return baton__errf(err, errlen, BATON_EINVAL, "path too long");
	int rv = v->ops->rename(v, w->tmp, path);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "rename", w->tmp);
	w->tmp[0] = '\0'; /* nothing to delete any more */
	rv = v->ops->sync_dir(v, w->dir);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "fsync directory",
				     w->dir);
	return 0;
}

int baton__snap_writer_commit(struct baton__snap_writer *w,
			      const char *final_name, char *err, size_t errlen)
{
	int rv = baton__snap_writer_sync(w, err, errlen);
	return rv != 0 ? rv
		       : baton__snap_writer_publish(w, final_name, err, errlen);
}

void baton__snap_writer_free(struct baton__snap_writer *w)
{
	if (w == NULL)
		return;
	if (w->fd >= 0)
		w->vfs->ops->close(w->vfs, w->fd);
	if (w->tmp[0] != '\0')
		w->vfs->ops->unlink(w->vfs, w->tmp);
	if (w->hasher != NULL)
		baton__hasher_free(w->hasher);
	free(w);
}

static void decode_versions(const uint8_t *p, uint32_t n,
			    struct baton_version_state *v)
{
	v->n = n;
	for (uint32_t i = 0; i < n; i++, p += SNAP_VERSION_ENTRY_LEN) {
		struct baton_member_versions *e = &v->members[i];
		e->id = baton_le_get_u64(p);
		e->profile.release.major = baton_le_get_u16(p + 8);
		e->profile.release.minor = baton_le_get_u16(p + 10);
		e->profile.release.patch = baton_le_get_u16(p + 12);
		e->profile.proto_min.value = baton_le_get_u32(p + 16);
		e->profile.proto_max.value = baton_le_get_u32(p + 20);
		e->profile.machine_max.value = baton_le_get_u32(p + 24);
	}
}

/* Whether v is not valid only because of its downgrade: the refusal then
 * names the downgrade record. */
static bool downgrade_to_blame(const struct baton_version_state *v)
{
	struct baton_version_state without = *v;
	memset(&without.downgrade, 0, sizeof without.downgrade);
	return !baton_version_state_valid(v) &&
	       baton_version_state_valid(&without);
}

static int downgrade_corrupt(const char *path,
			     const struct baton_version_state *v, char *err,
			     size_t errlen)
{
	const struct baton_downgrade *d = &v->downgrade;
	char target[BATON_RELEASE_STR_MAX], prev[BATON_RELEASE_STR_MAX];
	return baton__errf(err, errlen, BATON_ECORRUPT,
			   "%s: snapshot downgrade record out of range "
			   "(target %s, previous floor %s, previous machine "
			   "version %u, since %llu, machine version %u)",
			   path, baton_release_format(d->target, target),
			   baton_release_format(d->prev_floor, prev),
			   d->prev_machine.value, (unsigned long long)d->since,
			   v->machine.value);
}

/* b holds the whole header (len bytes, checksum verified). */
static int decode_header(const uint8_t *b, size_t len, uint32_t format,
			 const char *path, struct baton_snapshot_header *h,
			 char *err, size_t errlen)
{
	memset(h, 0, sizeof *h);
	struct baton_snapshot_meta *m = &h->meta;
	struct baton_version_state *v = &m->versions;
	m->index = baton_le_get_u64(b + 16);
	m->term = baton_le_get_u64(b + 24);
	m->config_index = baton_le_get_u64(b + 32);
	v->machine.value = baton_le_get_u32(b + 40);
	if (format == 1 && v->machine.value == 0)
		v->machine.value = 1; /* see format.h */
	v->floor.major = baton_le_get_u16(b + 44);
	v->floor.minor = baton_le_get_u16(b + 46);
	v->floor.patch = baton_le_get_u16(b + 48);
	/* Other flag bits are a later release's: ignored. */
	v->held = (baton_le_get_u16(b + 50) & SNAP_FLAG_HELD) != 0;
	uint32_t n_versions = baton_le_get_u32(b + 52);
	uint32_t config_len = baton_le_get_u32(b + 72);
	if (n_versions > BATON_MAX_MEMBERS || config_len > len ||
	    header_len_of(format, config_len, n_versions) > len)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: snapshot header lengths out of range",
				   path);
	int rv =
		baton_config_decode(b + SNAP_FIXED_LEN, config_len, &m->config);
	if (rv != 0)
		return baton__errf(err, errlen, rv,
				   "%s: snapshot configuration: %s", path,
				   baton_strerror(rv));
	const uint8_t *p = b + SNAP_FIXED_LEN + pad8(config_len);
	decode_versions(p, n_versions, v);
	p += (size_t)n_versions * SNAP_VERSION_ENTRY_LEN;
	if (format >= 2)
		m->versions_index = baton_le_get_u64(p);
	if (format >= 3) {
		struct baton_downgrade *d = &v->downgrade;
		p = get_release(p + 8, &d->target);
		p = get_release(p, &d->prev_floor);
		d->prev_machine.value = baton_le_get_u32(p);
		d->since = baton_le_get_u64(p + 8);
		if (downgrade_to_blame(v))
			return downgrade_corrupt(path, v, err, errlen);
	}
	if (!baton_version_state_valid(v) || m->versions_index > m->index ||
	    m->config_index > m->index)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: snapshot metadata out of range "
				   "(machine version %u, %u version rows, "
				   "versions at %llu, config at %llu, index "
				   "%llu)",
				   path, v->machine.value, v->n,
				   (unsigned long long)m->versions_index,
				   (unsigned long long)m->config_index,
				   (unsigned long long)m->index);
	return 0;
}

int baton__snap_read_header(struct baton_vfs *v, int fd, const char *path,
			    struct baton_snapshot_header *h,
			    uint64_t *data_offset, uint64_t *data_len,
			    uint64_t *data_checksum, char *err, size_t errlen)
{
	uint8_t b[SNAP_HEADER_MAX];
	size_t n = 0;
	int rv = v->ops->pread(v, fd, b, sizeof b, 0, &n);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "read", path);
	struct baton__file_head head;
	rv = baton__file_header_check(&snap_kind, b, n, path, &head, err,
				      errlen);
	if (rv != 0)
		return rv;
	uint32_t format = head.format, hlen = head.header_len;
	rv = decode_header(b, hlen, format, path, h, err, errlen);
	if (rv != 0)
		return rv;
	*data_offset = hlen;
	*data_len = baton_le_get_u64(b + 56);
	*data_checksum = baton_le_get_u64(b + 64);
	return 0;
}

int baton__snap_load(struct baton_vfs *v, const char *dir, const char *name,
		     uint64_t max_bytes, bool *found,
		     struct baton_snapshot_header *h, uint8_t **data,
		     size_t *len, char *err, size_t errlen)
{
	char path[STORAGE_PATH_MAX];
	if (baton__path(path, dir, name) != 0)
		return baton__errf(err, errlen, BATON_EINVAL, "path too long");
	*found = false;
	int fd;
	int rv = v->ops->open(v, path, 0, &fd);
	if (rv == -ENOENT)
		return 0;
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "open", path);
	uint64_t off, dlen, sum;
	rv = baton__snap_read_header(v, fd, path, h, &off, &dlen, &sum, err,
				     errlen);
	uint8_t *buf = NULL;
	if (rv == 0 && dlen > max_bytes)
		rv = baton__errf(err, errlen, BATON_ETOOBIG,
				 "%s: snapshot of %llu bytes exceeds the limit "
				 "of %llu",
				 path, (unsigned long long)dlen,
				 (unsigned long long)max_bytes);
	if (rv == 0) {
		buf = malloc(dlen > 0 ? (size_t)dlen : 1);
		if (buf == NULL)
			rv = baton__errf(err, errlen, BATON_ENOMEM,
					 "out of memory for the snapshot");
	}
	size_t n = 0;
	if (rv == 0) {
		rv = v->ops->pread(v, fd, buf, (size_t)dlen, off, &n);
		if (rv != 0)
			rv = baton__io_err(err, errlen, rv, "read", path);
	}
	if (rv == 0 && (n != dlen || baton__checksum(buf, n) != sum))
		rv = baton__errf(err, errlen, BATON_ECORRUPT,
				 "%s: snapshot data %s (index %llu)", path,
				 n != dlen ? "truncated" : "checksum mismatch",
				 (unsigned long long)h->meta.index);
	v->ops->close(v, fd);
	if (rv != 0) {
		free(buf);
		return rv;
	}
	*found = true;
	*data = buf;
	*len = (size_t)dlen;
	return 0;
}
