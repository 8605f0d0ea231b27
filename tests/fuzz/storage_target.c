/* Files in memory for the storage's fuzz targets (storage_target.h). */
#include "storage_target.h"

#include "baton/errors.h"
#include "fuzz.h"

struct fault_vfs *fuzz_vfs(const char *name, const uint8_t *data, size_t size)
{
	struct fault_vfs *v = fault_vfs_new();
	FUZZ_CHECK(v != NULL, "out of memory");
	struct baton_vfs *b = &v->base;
	int rv = b->ops->mkdir(b, FUZZ_DIR);
	FUZZ_CHECK(rv == 0, "mkdir: %d", rv);
	if (name != NULL)
		fuzz_vfs_add(v, name, data, size);
	return v;
}

void fuzz_vfs_add(struct fault_vfs *v, const char *name, const uint8_t *data,
		  size_t size)
{
	struct baton_vfs *b = &v->base;
	char path[256];
	snprintf(path, sizeof path, "%s/%s", FUZZ_DIR, name);
	int fd = -1;
	int rv = b->ops->open(b, path, BATON_VFS_CREATE, &fd);
	FUZZ_CHECK(rv == 0, "create %s: %d", path, rv);
	if (size > 0) {
		rv = b->ops->pwrite(b, fd, data, size, 0);
		FUZZ_CHECK(rv == 0, "write %s: %d", path, rv);
	}
	b->ops->close(b, fd);
}

void fuzz_check_storage_error(int rv, const char *err)
{
	FUZZ_CHECK(rv == BATON_ECORRUPT || rv == BATON_EVERSION ||
			   rv == BATON_ETOOBIG,
		   "a reader returned %d (%s)", rv, err);
	FUZZ_CHECK(err[0] != '\0', "error %d without a message", rv);
}
