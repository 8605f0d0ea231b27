/* The identity file's reader (baton__identity_read, src/storage/
 * identity.c): the input is the file. What it reads is an identity the
 * writer takes (a node id, a cluster name of 1 to 127 bytes without a NUL)
 * and, written again and read back, the same identity. */
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "storage_target.h"

static void check_valid(const struct baton_identity *id)
{
	const char *end =
		memchr(id->cluster_name, '\0', sizeof id->cluster_name);
	FUZZ_CHECK(end != NULL, "a cluster name without its NUL");
	size_t name_len = (size_t)(end - id->cluster_name);
	FUZZ_CHECK(id->node_id != 0 && name_len >= 1 &&
			   name_len <= BATON_CLUSTER_NAME_MAX,
		   "read node id %llu, a name of %zu bytes",
		   (unsigned long long)id->node_id, name_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fault_vfs *v = fuzz_vfs("identity", data, size);
	char err[STORAGE_ERR_MAX] = "";
	struct baton_identity id, again;
	bool found = false;
	int rv = baton__identity_read(&v->base, FUZZ_DIR, &id, &found, err,
				      sizeof err);
	fault_vfs_free(v);
	if (rv != 0) {
		fuzz_check_storage_error(rv, err);
		return 0;
	}
	FUZZ_CHECK(found, "the file was not found");
	check_valid(&id);
	struct fault_vfs *w = fuzz_vfs(NULL, NULL, 0);
	rv = baton__identity_write(&w->base, FUZZ_DIR, &id, err, sizeof err);
	FUZZ_CHECK(rv == 0, "write: %d (%s)", rv, err);
	rv = baton__identity_read(&w->base, FUZZ_DIR, &again, &found, err,
				  sizeof err);
	FUZZ_CHECK(rv == 0 && found, "read back: %d (%s)", rv, err);
	FUZZ_CHECK(again.node_id == id.node_id &&
			   strcmp(again.cluster_name, id.cluster_name) == 0 &&
			   again.has_uuid == id.has_uuid &&
			   memcmp(again.cluster_uuid, id.cluster_uuid,
				  sizeof id.cluster_uuid) == 0,
		   "the identity changed in the round trip");
	fault_vfs_free(w);
	return 0;
}
