/* Term and vote: one small file, replaced atomically (temp file, sync,
 * rename, sync of the directory), so a crash leaves the old or the new pair,
 * never a mix; and that replacement, which the identity file shares. */
#include <baton/assert.h>
#include <errno.h>
#include <string.h>

#include "file_header.h"
#include "format.h"
#include "internal.h"

#define META_NAME "meta"
#define META_TMP_NAME "meta.tmp"

/* Every format of the file is META_LEN bytes, all of it header. */
static const struct baton__file_kind meta_kind = {META_MAGIC, "term/vote file",
						  META_FORMAT, META_LEN};

int baton__small_file_read(struct baton_vfs *v, const char *dir,
			   const char *name, const struct baton__file_kind *k,
			   uint8_t *buf, size_t cap, char *path, bool *found,
			   struct baton__file_head *head, char *err,
			   size_t errlen)
{
	*found = false;
	if (baton__path(path, dir, name) != 0)
		return baton__errf(err, errlen, BATON_EINVAL,
				   "data directory path too long");
	int fd;
	int rv = v->ops->open(v, path, 0, &fd);
	if (rv == -ENOENT)
		return 0;
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "open", path);
	size_t n = 0;
	rv = v->ops->pread(v, fd, buf, cap, 0, &n);
	v->ops->close(v, fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "read", path);
	rv = baton__file_header_check(k, buf, n, path, head, err, errlen);
	if (rv != 0)
		return rv;
	*found = true;
	return 0;
}

int baton__meta_read(struct baton_vfs *v, const char *dir, baton_term *term,
		     baton_node_id *vote, char *err, size_t errlen)
{
	*term = 0;
	*vote = 0;
	uint8_t b[META_LEN];
	char path[STORAGE_PATH_MAX];
	bool found;
	struct baton__file_head head;
	int rv = baton__small_file_read(v, dir, META_NAME, &meta_kind, b,
					sizeof b, path, &found, &head, err,
					errlen);
	if (rv != 0 || !found)
		return rv;
	BATON_ASSERT(head.header_len == META_LEN);
	*term = baton_le_get_u64(b + 16);
	*vote = baton_le_get_u64(b + 24);
	return 0;
}

int baton__meta_write(struct baton_vfs *v, const char *dir, baton_term term,
		      baton_node_id vote, char *err, size_t errlen)
{
	uint8_t b[META_LEN] = {0};
	baton__file_header_start(b, &meta_kind, META_LEN);
	baton_le_put_u64(b + 16, term);
	baton_le_put_u64(b + 24, vote);
	baton__file_header_seal(b, META_LEN);
	return baton__file_replace(v, dir, META_TMP_NAME, META_NAME, b,
				   sizeof b, err, errlen);
}

int baton__file_replace(struct baton_vfs *v, const char *dir,
			const char *tmp_name, const char *name,
			const uint8_t *b, size_t len, char *err, size_t errlen)
{
	BATON_ASSERT(strcmp(tmp_name, name) != 0);
	BATON_ASSERT(len > 0 && b != NULL);
	char tmp[STORAGE_PATH_MAX], path[STORAGE_PATH_MAX];
	if (baton__path(tmp, dir, tmp_name) != 0 ||
	    baton__path(path, dir, name) != 0)
		return baton__errf(err, errlen, BATON_EINVAL,
				   "data directory path too long");
	int fd;
	int rv = v->ops->open(v, tmp, BATON_VFS_CREATE | BATON_VFS_TRUNC, &fd);
	if (rv != 0)
		return baton__io_err(err, errlen, rv, "create", tmp);
	rv = v->ops->pwrite(v, fd, b, len, 0);
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
