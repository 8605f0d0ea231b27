/* Whose a data directory is: one small file recording the node id it was
 * made for, its cluster's name and, once known, the cluster's UUID, so that
 * a node started with another --id or --cluster-id on it refuses instead of
 * serving another node's votes and log as its own (docs/storage.md, "The
 * identity file"). Replaced atomically, like the term/vote file. */
#include <baton/assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "file_header.h"
#include "format.h"
#include "internal.h"

#define IDENTITY_NAME "identity"
#define IDENTITY_TMP_NAME "identity.tmp"

static const struct baton__file_kind identity_kind = {
	IDENTITY_MAGIC, "identity file", IDENTITY_FORMAT, IDENTITY_LEN_MIN};

static bool uuid_zero(const uint8_t *u)
{
	return all_zero(u, BATON_CLUSTER_UUID_LEN);
}

char *baton_cluster_uuid_format(const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
				char buf[BATON_CLUSTER_UUID_STR_MAX])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (size_t i = 0; i < BATON_CLUSTER_UUID_LEN; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[o++] = '-';
		buf[o++] = hex[uuid[i] >> 4];
		buf[o++] = hex[uuid[i] & 15];
	}
	BATON_ASSERT(o + 1 == BATON_CLUSTER_UUID_STR_MAX);
	buf[o] = '\0';
	return buf;
}

int baton__identity_read(struct baton_vfs *v, const char *dir,
			 struct baton_identity *out, bool *found, char *err,
			 size_t errlen)
{
	memset(out, 0, sizeof *out);
	char path[STORAGE_PATH_MAX];
	uint8_t b[IDENTITY_LEN_MAX];
	bool present;
	struct baton__file_head head;
	*found = false;
	int rv = baton__small_file_read(v, dir, IDENTITY_NAME, &identity_kind,
					b, sizeof b, path, &present, &head, err,
					errlen);
	if (rv != 0 || !present)
		return rv;
	uint32_t name_len = baton_le_get_u32(b + 40);
	if (name_len == 0 || name_len > BATON_CLUSTER_NAME_MAX ||
	    IDENTITY_FIXED_LEN + pad8(name_len) + FILE_HEADER_CHECKSUM_LEN >
		    head.header_len ||
	    memchr(b + IDENTITY_FIXED_LEN, '\0', name_len) != NULL)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: cluster name length %" PRIu32
				   " out of range or the name damaged",
				   path, name_len);
	out->node_id = baton_le_get_u64(b + 16);
	if (out->node_id == 0)
		return baton__errf(err, errlen, BATON_ECORRUPT,
				   "%s: node id 0 (damaged)", path);
	memcpy(out->cluster_uuid, b + 24, BATON_CLUSTER_UUID_LEN);
	out->has_uuid = !uuid_zero(out->cluster_uuid);
	memcpy(out->cluster_name, b + IDENTITY_FIXED_LEN, name_len);
	out->cluster_name[name_len] = '\0';
	*found = true;
	return 0;
}

int baton__identity_write(struct baton_vfs *v, const char *dir,
			  const struct baton_identity *id, char *err,
			  size_t errlen)
{
	const char *end =
		memchr(id->cluster_name, '\0', sizeof id->cluster_name);
	BATON_ASSERT(end != NULL);
	size_t name_len = (size_t)(end - id->cluster_name);
	BATON_ASSERT(id->node_id != 0);
	BATON_ASSERT(name_len >= 1 && name_len <= BATON_CLUSTER_NAME_MAX);
	uint32_t len = (uint32_t)(IDENTITY_FIXED_LEN + pad8(name_len) +
				  FILE_HEADER_CHECKSUM_LEN);
	uint8_t b[IDENTITY_LEN_MAX] = {0};
	baton__file_header_start(b, &identity_kind, len);
	baton_le_put_u64(b + 16, id->node_id);
	if (id->has_uuid)
		memcpy(b + 24, id->cluster_uuid, BATON_CLUSTER_UUID_LEN);
	baton_le_put_u32(b + 40, (uint32_t)name_len);
	memcpy(b + IDENTITY_FIXED_LEN, id->cluster_name, name_len);
	baton__file_header_seal(b, len);
	return baton__file_replace(v, dir, IDENTITY_TMP_NAME, IDENTITY_NAME, b,
				   len, err, errlen);
}

/* "(uuid 1b4e28ba-...)" or "(uuid not known yet)". */
static const char *uuid_text(const struct baton_identity *id, char *buf,
			     size_t cap)
{
	char u[BATON_CLUSTER_UUID_STR_MAX];
	if (id->has_uuid)
		snprintf(buf, cap, "uuid %s",
			 baton_cluster_uuid_format(id->cluster_uuid, u));
	else
		snprintf(buf, cap, "uuid not known yet");
	return buf;
}

int baton__identity_check(struct baton_vfs *v, const char *dir,
			  const struct baton_identity *want,
			  struct baton_identity *have, char *err, size_t errlen)
{
	BATON_ASSERT(want->node_id != 0);
	BATON_ASSERT(want->cluster_name[0] != '\0');
	bool found;
	int rv = baton__identity_read(v, dir, have, &found, err, errlen);
	if (rv != 0)
		return rv;
	if (!found) {
		*have = *want;
		have->has_uuid = false;
		memset(have->cluster_uuid, 0, sizeof have->cluster_uuid);
		return baton__identity_write(v, dir, have, err, errlen);
	}
	if (have->node_id == want->node_id &&
	    strcmp(have->cluster_name, want->cluster_name) == 0)
		return 0;
	char u[64], given[BATON_CLUSTER_NAME_MAX + 64];
	bool other_node = have->node_id != want->node_id;
	bool other_cluster =
		strcmp(have->cluster_name, want->cluster_name) != 0;
	if (other_node && other_cluster)
		snprintf(given, sizeof given,
			 "node %" PRIu64 " of cluster '%s'", want->node_id,
			 want->cluster_name);
	else if (other_node)
		snprintf(given, sizeof given, "node %" PRIu64, want->node_id);
	else
		snprintf(given, sizeof given, "to cluster '%s'",
			 want->cluster_name);
	return baton__errf(
		err, errlen, BATON_ESTATE,
		"data directory %s belongs to node %" PRIu64
		" of cluster '%s' (%s), not %s: start node %" PRIu64
		" (--id %" PRIu64 " --cluster-id %s) on it, or give this node "
		"an empty directory of its own (a member that lost its data "
		"rejoins under a new id: docs/batond.md, \"Replacing a "
		"member\")",
		dir, have->node_id, have->cluster_name,
		uuid_text(have, u, sizeof u), given, have->node_id,
		have->node_id, have->cluster_name);
}

int baton__identity_set_uuid(struct baton_vfs *v, const char *dir,
			     struct baton_identity *id,
			     const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
			     char *err, size_t errlen)
{
	char mine[BATON_CLUSTER_UUID_STR_MAX],
		theirs[BATON_CLUSTER_UUID_STR_MAX];
	if (id->node_id == 0)
		return baton__errf(err, errlen, BATON_EINVAL,
				   "%s: opened without an identity", dir);
	if (id->has_uuid) {
		if (memcmp(id->cluster_uuid, uuid, BATON_CLUSTER_UUID_LEN) == 0)
			return 0;
		return baton__errf(
			err, errlen, BATON_ESTATE,
			"data directory %s records cluster uuid %s, not %s",
			dir, baton_cluster_uuid_format(id->cluster_uuid, mine),
			baton_cluster_uuid_format(uuid, theirs));
	}
	struct baton_identity next = *id;
	next.has_uuid = true;
	memcpy(next.cluster_uuid, uuid, BATON_CLUSTER_UUID_LEN);
	int rv = baton__identity_write(v, dir, &next, err, errlen);
	if (rv == 0)
		*id = next;
	return rv;
}
