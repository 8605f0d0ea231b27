/* --maxmemory's arithmetic (src/server/memory_limit.c): Redis's units,
 * the cgroup and meminfo files, the default share and the 80 % warning's
 * hysteresis. */
#include <criterion/criterion.h>
#include <string.h>

#include "memory_limit.h"

static uint64_t bytes(const char *text)
{
	uint64_t v = 12345;
	cr_assert(memory_parse_bytes(text, &v), "%s", text);
	return v;
}

Test(memory_limit, redis_units)
{
	cr_assert_eq(bytes("0"), 0);
	cr_assert_eq(bytes("1048576"), 1048576);
	cr_assert_eq(bytes("700mb"), 700ull << 20);
	cr_assert_eq(bytes("700MB"), 700ull << 20);
	cr_assert_eq(bytes("1gb"), 1ull << 30);
	cr_assert_eq(bytes("2Gb"), 2ull << 30);
	cr_assert_eq(bytes("64kb"), 64ull << 10);
	cr_assert_eq(bytes("1k"), 1000);
	cr_assert_eq(bytes("2m"), 2000000);
	cr_assert_eq(bytes("3g"), 3000000000ull);
}

Test(memory_limit, refuses_what_is_not_a_size)
{
	const char *bad[] = {"",
			     "mb",
			     "-1",
			     "1.5gb",
			     " 1gb",
			     "1gb ",
			     "1 gb",
			     "1tb",
			     "1gib",
			     "0x10",
			     "1e9",
			     "lots",
			     "1gbgb",
			     "99999999999999999999",
			     "5000000000gb"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t v = 7;
		cr_assert_not(memory_parse_bytes(bad[i], &v), "%s", bad[i]);
		cr_assert_eq(v, 7, "%s: unchanged", bad[i]);
	}
	cr_assert_not(memory_parse_bytes(NULL, &(uint64_t){0}));
}

Test(memory_limit, cgroup_memory_max)
{
	uint64_t v = 0;
	cr_assert(memory_parse_cgroup_max("734003200\n", &v));
	cr_assert_eq(v, 734003200);
	cr_assert_not(memory_parse_cgroup_max("max\n", &v));
	cr_assert_not(memory_parse_cgroup_max("", &v));
	cr_assert_not(memory_parse_cgroup_max("12ab\n", &v));
}

Test(memory_limit, meminfo_total)
{
	uint64_t v = 0;
	cr_assert(memory_parse_meminfo_total(
		"MemTotal:       24683792 kB\nMemFree:  1 kB\n", &v));
	cr_assert_eq(v, 24683792ull * 1024);
	cr_assert(memory_parse_meminfo_total(
		"MemFree:  1 kB\nMemTotal: 2048 kB\n", &v));
	cr_assert_eq(v, 2048ull * 1024);
	cr_assert_not(memory_parse_meminfo_total("MemFree: 1 kB\n", &v));
	cr_assert_not(memory_parse_meminfo_total("MemTotal: lots\n", &v));
	cr_assert_not(memory_parse_meminfo_total("", &v));
}

Test(memory_limit, default_is_half_and_at_least_the_minimum)
{
	cr_assert_eq(memory_default_limit(0), 0, "unknown: no bound");
	cr_assert_eq(memory_default_limit(700ull << 20), 350ull << 20);
	cr_assert_eq(memory_default_limit(101), MEMORY_LIMIT_MIN);
	cr_assert_eq(memory_default_limit(UINT64_MAX), MEMORY_LIMIT_MAX);
}

Test(memory_limit, warning_once_per_crossing)
{
	uint64_t max = 1000000;
	bool w = false;
	w = memory_warn_state(700000, max, w);
	cr_assert_not(w);
	w = memory_warn_state(800000, max, w);
	cr_assert(w, "crossing 80 %% warns");
	/* Hovering between 75 % and 80 %, or above: still the one warning. */
	w = memory_warn_state(790000, max, w);
	cr_assert(w);
	w = memory_warn_state(1200000, max, w);
	cr_assert(w);
	w = memory_warn_state(749999, max, w);
	cr_assert_not(w, "under 75 %% clears it");
	w = memory_warn_state(790000, max, w);
	cr_assert_not(w, "between 75 %% and 80 %% does not warn again");
	cr_assert_not(memory_warn_state(UINT64_MAX, 0, false), "no bound");
}

Test(memory_limit, human)
{
	char b[32];
	memory_human(2097152, b, sizeof b);
	cr_assert_str_eq(b, "2.00M");
	memory_human(512, b, sizeof b);
	cr_assert_str_eq(b, "512B");
}
