/* Term and vote: one small file, replaced atomically (temp file, sync,
 * rename, sync of the directory), so a crash leaves the old or the new pair,
 * never a mix. */
#include <errno.h>

#include "format.h"
#include "internal.h"

#define META_NAME "meta"
#define META_TMP_NAME "meta.tmp"

int baton__meta_read(struct baton_vfs *v, const char *dir, baton_term *term,
		     baton_node_id *vote, char *err, size_t errlen)
{
	char path[STORAGE_PATH_MAX];
	if (baton__path(path, dir, META_NAME) != 0)
		return baton__errf(err, errlen, BATON_EINVAL,
				   "data directory path too long");
	*term = 0;
	*vote = 0;
	int fd;
	int rv = v->ops->open(v, path, 0, &fd);
	if (rv == -ENOENT)
		return 0;
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "open", path);
	uint8_t b[META_LEN];
	size_t n = 0;
	rv = v->ops->pread(v, fd, b, sizeof b, 0, &n);
	v->ops->close(v, fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "read", path);
	if (n < 16 || memcmp(b, META_MAGIC, 8) != 0)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: not a baton term/vote file", path);
	uint32_t format = get_u32(b + 8);
	if (format > META_FORMAT)
		return baton__errf(err, errlen, BATON_EVERSION,
				   "%s: format version %u is newer than this "
				   "release reads (%u)",
				   path, format, META_FORMAT);
	if (n < META_LEN || get_u32(b + 12) != META_LEN ||
	    get_u64(b + 40) != baton__checksum(b, 40))
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: checksum mismatch (term/vote file "
				   "damaged)",
				   path);
	*term = get_u64(b + 16);
	*vote = get_u64(b + 24);
	return 0;
}

int baton__meta_write(struct baton_vfs *v, const char *dir, baton_term term,
		      baton_node_id vote, char *err, size_t errlen)
{
	char tmp[STORAGE_PATH_MAX], path[STORAGE_PATH_MAX];
	if (baton__path(tmp, dir, META_TMP_NAME) != 0 ||
	    baton__path(path, dir, META_NAME) != 0)
		return baton__errf(err, errlen, BATON_EINVAL,
				   "data directory path too long");
	uint8_t b[META_LEN] = {0};
	memcpy(b, META_MAGIC, 8);
	put_u32(b + 8, META_FORMAT);
	put_u32(b + 12, META_LEN);
	put_u64(b + 16, term);
	put_u64(b + 24, vote);
	put_u64(b + 40, baton__checksum(b, 40));
	int fd;
	int rv = v->ops->open(v, tmp, BATON_VFS_CREATE | BATON_VFS_TRUNC, &fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "create", tmp);
	rv = v->ops->pwrite(v, fd, b, sizeof b, 0);
	const char *what = "write";
	if (rv == 0) {
		rv = v->ops->fsync(v, fd);
		what = "fsync";
	}
	v->ops->close(v, fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, what, tmp);
	rv = v->ops->rename(v, tmp, path);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "rename", tmp);
	rv = v->ops->sync_dir(v, dir);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "fsync directory", dir);
	return 0;
}
