/*
 * The state machine's snapshot decoder (kv_restore, src/kv/snapshot.c):
 * what a node installs from its disk or from the leader. The first input
 * byte selects the machine version (1 to 3); the rest is the snapshot. A
 * refused snapshot leaves the map as it was; one restored snapshots again
 * to bytes that restore to the same map.
 */
#include <string.h>

#include "fuzz.h"
#include "kv_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct baton_machine_version v = {1u + data[0] % 3u};
	struct baton_kv *kv = NULL, *again = NULL;
	FUZZ_CHECK(kv_create(&kv) == 0 && kv_create(&again) == 0,
		   "out of memory");
	struct baton_buf first, second;
	baton_buf_init(&first);
	baton_buf_init(&second);
	int rv = kv_restore(kv, v, data + 1, size - 1);
	if (rv != 0) {
		FUZZ_CHECK(rv == BATON_ECORRUPT || rv == BATON_EVERSION,
			   "restore returned %d (%s)", rv, kv_errmsg(kv));
		FUZZ_CHECK(kv_dbsize(kv) == 0 && kv_machine_time_ms(kv) == 0,
			   "a refused snapshot changed the map");
	} else {
		rv = kv_snapshot(kv, v, fuzz_kv_sink, &first);
		FUZZ_CHECK(rv == 0, "a restored map does not snapshot: %d (%s)",
			   rv, kv_errmsg(kv));
		rv = kv_restore(again, v, first.data, first.len);
		FUZZ_CHECK(rv == 0,
			   "a snapshot written again does not "
			   "restore: %d (%s)",
			   rv, kv_errmsg(again));
		fuzz_kv_image(kv, &first);
		fuzz_kv_image(again, &second);
		FUZZ_CHECK(fuzz_same_bytes(&first, &second),
			   "the round trip changed the map");
	}
	kv_destroy(kv);
	kv_destroy(again);
	baton_buf_free(&first);
	baton_buf_free(&second);
	return 0;
}
