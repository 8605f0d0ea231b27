/* Snapshots as bytes for the state machine's fuzz targets (kv_target.h). */
#include "kv_target.h"

#include <string.h>

#include "fuzz.h"

int fuzz_kv_sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

void fuzz_kv_image(const struct baton_kv *kv, struct baton_buf *out)
{
	baton_buf_reset(out);
	int rv = kv_snapshot(kv, (struct baton_machine_version){3},
			     fuzz_kv_sink, out);
	FUZZ_CHECK(rv == 0, "snapshot: %d (%s)", rv, kv_errmsg(kv));
}

int fuzz_same_bytes(const struct baton_buf *a, const struct baton_buf *b)
{
	return a->len == b->len &&
	       (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}
