/* The term/vote file's reader (baton__meta_read, src/storage/meta.c): the
 * input is the file. What it reads, written again by the writer and read
 * back, must be the same term and vote. */
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "storage_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fault_vfs *v = fuzz_vfs("meta", data, size);
	char err[STORAGE_ERR_MAX] = "";
	baton_term term = 0;
	baton_node_id vote = 0;
	int rv = baton__meta_read(&v->base, FUZZ_DIR, &term, &vote, err,
				  sizeof err);
	fault_vfs_free(v);
	if (rv != 0) {
		fuzz_check_storage_error(rv, err);
		return 0;
	}
	struct fault_vfs *w = fuzz_vfs(NULL, NULL, 0);
	rv = baton__meta_write(&w->base, FUZZ_DIR, term, vote, err, sizeof err);
	FUZZ_CHECK(rv == 0, "write: %d (%s)", rv, err);
	baton_term term2 = 0;
	baton_node_id vote2 = 0;
	rv = baton__meta_read(&w->base, FUZZ_DIR, &term2, &vote2, err,
			      sizeof err);
	FUZZ_CHECK(rv == 0 && term2 == term && vote2 == vote,
		   "round trip: %d, term %llu -> %llu, vote %llu -> %llu", rv,
		   (unsigned long long)term, (unsigned long long)term2,
		   (unsigned long long)vote, (unsigned long long)vote2);
	fault_vfs_free(w);
	return 0;
}
