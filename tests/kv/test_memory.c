/* kv_memory_bytes (src/kv/mem.c): what the map holds, counted as it
 * changes, grows with what is written, and comes back to where it was
 * once it is deleted or the map is freed (nothing drifts). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kv.h"
#include "kv_util.h"

#define BIG_BYTES (1u << 20)

/* SET key <BIG_BYTES bytes>, through the payload path. */
static void set_big(struct baton_kv *kv, const char *key)
{
	static char value[BIG_BYTES];
	memset(value, 'v', sizeof value);
	const char *argv[] = {"SET", key, value};
	size_t lens[] = {3, strlen(key), sizeof value};
	cr_assert_str_eq(kvt_runv(kv, 3, argv, lens), "+OK\r\n");
}

Test(kv_memory, grows_with_data_and_comes_back_after_delete)
{
	uint64_t none = kv_memory_bytes();
	struct baton_kv *kv = kvt_new();
	uint64_t empty = kv_memory_bytes();
	cr_assert_gt(empty, none, "the empty map's table is counted");
	set_big(kv, "a");
	uint64_t one = kv_memory_bytes();
	cr_assert_geq(one - empty, BIG_BYTES, "%llu",
		      (unsigned long long)(one - empty));
	cr_assert_lt(one - empty, BIG_BYTES + 64 * 1024);
	cr_assert_str_eq(kvt_run(kv, "APPEND a xyz"), ":1048579\r\n");
	cr_assert_geq(kv_memory_bytes(), one + 3);
	cr_assert_str_eq(kvt_run(kv, "DEL a"), ":1\r\n");
	cr_assert_eq(kv_memory_bytes(), empty);
	kv_destroy(kv);
	cr_assert_eq(kv_memory_bytes(), none);
}

Test(kv_memory, hashes_and_many_keys_are_counted_and_released)
{
	struct baton_kv *kv = kvt_new();
	uint64_t empty = kv_memory_bytes();
	kvt_use(3, 1000);
	char line[96];
	for (int i = 0; i < 5000; i++) {
		snprintf(line, sizeof line, "HSET h%d f%d value-%d", i % 7, i,
			 i);
		kvt_run(kv, line);
		snprintf(line, sizeof line, "SET k%d %d", i, i);
		kvt_run(kv, line);
		snprintf(line, sizeof line, "EXPIRE k%d 1000", i);
		kvt_run(kv, line);
	}
	uint64_t full = kv_memory_bytes();
	/* At least the keys and values' bytes; tables and entries more. */
	cr_assert_gt(full - empty, 5000u * (2 + 8 + 8 + 4));
	cr_assert_str_eq(kvt_run(kv, "FLUSHALL"), "+OK\r\n");
	/* What stays is the expiry index's array, kept for the next keys:
	 * far less than the data. */
	cr_assert_lt(kv_memory_bytes() - empty, (full - empty) / 8,
		     "a flushed map is back near empty: %llu of %llu over",
		     (unsigned long long)(kv_memory_bytes() - empty),
		     (unsigned long long)(full - empty));
	kv_destroy(kv);
}
