/* The snapshot file's reader (baton__snap_load, src/storage/
 * snapshot_file.c: header, metadata, data and its checksum): the input is
 * the file. What it loads, written again by the snapshot writer and loaded
 * back, must be the same metadata and data. */
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "peer_fixtures.h"
#include "storage_target.h"

/* Larger than any input the fuzzer makes, so that the limit's refusal is
 * reached only through the length in the header. */
#define DATA_MAX ((uint64_t)1 << 20)

struct loaded {
	struct baton_snapshot_header h;
	uint8_t *data;
	size_t len;
};

static int load(struct fault_vfs *v, struct loaded *out, char *err,
		size_t errlen)
{
	bool found = false;
	int rv = baton__snap_load(&v->base, FUZZ_DIR, "snapshot", DATA_MAX,
				  &found, &out->h, &out->data, &out->len, err,
				  errlen);
	FUZZ_CHECK(rv != 0 || found, "the file was not found");
	return rv;
}

static void write_again(const struct loaded *a, struct fault_vfs *w)
{
	char err[STORAGE_ERR_MAX] = "";
	struct baton__snap_writer *sw = NULL;
	int rv = baton__snap_writer_open(&w->base, FUZZ_DIR, "snapshot.tmp",
					 &a->h, &sw, err, sizeof err);
	FUZZ_CHECK(rv == 0,
		   "metadata the reader accepted is refused by the "
		   "writer: %d (%s)",
		   rv, err);
	if (a->len > 0)
		rv = baton__snap_writer_write(sw, a->data, a->len, err,
					      sizeof err);
	if (rv == 0)
		rv = baton__snap_writer_commit(sw, "snapshot", err, sizeof err);
	FUZZ_CHECK(rv == 0, "write: %d (%s)", rv, err);
	baton__snap_writer_free(sw);
}

static void check_same(const struct loaded *a, const struct loaded *b)
{
	const struct baton_snapshot_meta *x = &a->h.meta, *y = &b->h.meta;
	FUZZ_CHECK(x->index == y->index && x->term == y->term &&
			   x->config_index == y->config_index &&
			   x->versions_index == y->versions_index,
		   "round trip changed the index, term, config_index or "
		   "versions_index");
	FUZZ_CHECK(x->config.n == y->config.n &&
			   memcmp(x->config.members, y->config.members,
				  x->config.n * sizeof x->config.members[0]) ==
				   0,
		   "round trip changed the configuration");
	const char *diff = "";
	FUZZ_CHECK(fix_versions_eq(&x->versions, &y->versions, &diff),
		   "round trip changed the version state: %s", diff);
	FUZZ_CHECK(a->len == b->len && (a->len == 0 ||
					memcmp(a->data, b->data, a->len) == 0),
		   "round trip changed the data");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fault_vfs *v = fuzz_vfs("snapshot", data, size);
	char err[STORAGE_ERR_MAX] = "";
	struct loaded a = {.data = NULL}, b = {.data = NULL};
	int rv = load(v, &a, err, sizeof err);
	fault_vfs_free(v);
	if (rv != 0) {
		fuzz_check_storage_error(rv, err);
		return 0;
	}
	struct fault_vfs *w = fuzz_vfs(NULL, NULL, 0);
	write_again(&a, w);
	rv = load(w, &b, err, sizeof err);
	FUZZ_CHECK(rv == 0, "the snapshot written again does not load: %d (%s)",
		   rv, err);
	check_same(&a, &b);
	free(a.data);
	free(b.data);
	fault_vfs_free(w);
	return 0;
}
