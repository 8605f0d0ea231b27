/*
 * The checker against a brute-force reference on many small random
 * histories (seeded; a failure prints the seed and the history).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

#define RANDOM_HISTORIES 20000u
#define RANDOM_OPS_MAX 8u
#define RANDOM_CLIENTS_MAX 3u
/* Larger ones: more clients, longer histories. */
#define MEDIUM_HISTORIES 1500u
#define MEDIUM_OPS_MAX 40u
#define MEDIUM_CLIENTS_MAX 6u
#define RANDOM_FIRST_SEED 1u
#define SHUFFLED_HISTORIES 3000u
#define SHUFFLED_OPS_MAX 10u

/* Compares the checker with the reference on `histories` random
 * histories from seed_base on; returns how many of each verdict. */
static void compare(uint64_t seed_base, uint32_t histories, uint32_t ops_max,
		    uint32_t clients_max, uint32_t verdicts[2])
{
	for (uint32_t i = 0; i < histories; i++) {
		uint64_t seed = seed_base + i;
		struct lincheck_history h;
		ref_random_history(seed, ops_max, clients_max, &h);
		bool want = ref_linearizable(&h);
		enum lincheck_verdict got = ref_check(&h);
		if (want != (got == LINCHECK_LINEARIZABLE)) {
			fprintf(stderr, "seed %llu: reference says %s\n",
				(unsigned long long)seed,
				want ? "linearizable" : "not linearizable");
			fprintf(stderr, "missing reads empty: %d\n",
				h.missing_reads_empty);
			lincheck_write_baton(stderr, &h);
			cr_assert_fail("seed %llu (ops %u, clients %u): the "
				       "checker disagrees",
				       (unsigned long long)seed, ops_max,
				       clients_max);
		}
		verdicts[want]++;
		lincheck_history_free(&h);
	}
	/* Both verdicts must be well represented. */
	cr_assert_gt(verdicts[0], histories / 10, "%u not linearizable",
		     verdicts[0]);
	cr_assert_gt(verdicts[1], histories / 10, "%u linearizable",
		     verdicts[1]);
}

Test(random, agrees_with_brute_force)
{
	uint64_t seed_base = RANDOM_FIRST_SEED;
	uint32_t histories = RANDOM_HISTORIES;
	uint32_t ops_max = RANDOM_OPS_MAX;
	uint32_t clients_max = RANDOM_CLIENTS_MAX;
	/* Longer runs: LINCHECK_FIRST_SEED, LINCHECK_HISTORIES,
	 * LINCHECK_OPS_MAX and LINCHECK_CLIENTS_MAX (up to REF_OPS_MAX and
	 * REF_CLIENTS_MAX). */
	const char *env = getenv("LINCHECK_FIRST_SEED");
	if (env != NULL)
		seed_base = strtoull(env, NULL, 10);
	if ((env = getenv("LINCHECK_HISTORIES")) != NULL)
		histories = (uint32_t)strtoul(env, NULL, 10);
	if ((env = getenv("LINCHECK_OPS_MAX")) != NULL)
		ops_max = (uint32_t)strtoul(env, NULL, 10);
	if ((env = getenv("LINCHECK_CLIENTS_MAX")) != NULL)
		clients_max = (uint32_t)strtoul(env, NULL, 10);
	cr_assert(ops_max >= 1 && ops_max <= REF_OPS_MAX);
	cr_assert(clients_max >= 1 && clients_max <= REF_CLIENTS_MAX);
	uint32_t verdicts[2] = {0, 0};
	compare(seed_base, histories, ops_max, clients_max, verdicts);
}

Test(random, agrees_on_longer_histories)
{
	uint32_t verdicts[2] = {0, 0};
	compare(900000, MEDIUM_HISTORIES, MEDIUM_OPS_MAX, MEDIUM_CLIENTS_MAX,
		verdicts);
}

/* Lines out of time order (each client's own kept) mean the same. */
Test(random, line_order_does_not_matter)
{
	for (uint32_t i = 0; i < SHUFFLED_HISTORIES; i++) {
		struct lincheck_history h, back;
		struct lincheck_error err;
		ref_random_history(77000 + i, SHUFFLED_OPS_MAX, 3, &h);
		size_t len = 0;
		char *text = ref_baton_text(&h, &len);
		char *lines[2 * SHUFFLED_OPS_MAX + 1] = {NULL};
		uint32_t n = 0;
		char *save = NULL;
		for (char *l = strtok_r(text, "\n", &save); l != NULL;
		     l = strtok_r(NULL, "\n", &save)) {
			cr_assert_lt(n, 2 * SHUFFLED_OPS_MAX + 1);
			lines[n++] = l;
		}
		cr_assert_geq(n, 1u);
		/* Emit a random client's next line until none is left. */
		char shuffled[4096];
		size_t at = (size_t)snprintf(shuffled, sizeof(shuffled), "%s\n",
					     lines[0]);
		bool used[2 * SHUFFLED_OPS_MAX + 1] = {false};
		uint64_t rng = i + 1;
		for (uint32_t left = n - 1; left > 0; left--) {
			rng = rng * 6364136223846793005u + 1442695040888963407u;
			uint32_t pick = (uint32_t)(rng >> 33) % left;
			uint32_t k = 1;
			for (;; k++) {
				if (used[k])
					continue;
				if (pick-- == 0)
					break;
			}
			/* The first unused line of that line's client. */
			const char *client = strchr(lines[k], '\t') + 1;
			size_t cl = (size_t)(strchr(client, '\t') - client);
			for (uint32_t j = 1; j < k; j++) {
				const char *c = strchr(lines[j], '\t') + 1;
				if (!used[j] && strncmp(c, client, cl) == 0 &&
				    c[cl] == '\t') {
					k = j;
					break;
				}
			}
			used[k] = true;
			at += (size_t)snprintf(shuffled + at,
					       sizeof(shuffled) - at, "%s\n",
					       lines[k]);
			cr_assert_lt(at, sizeof(shuffled));
		}
		lincheck_history_init(&back);
		cr_assert_eq(lincheck_parse("shuffled", shuffled, at,
					    LINCHECK_FORMAT_BATON, &back, &err),
			     0, "%s\n%s", err.text, shuffled);
		back.missing_reads_empty = h.missing_reads_empty;
		cr_assert_eq(ref_check(&h), ref_check(&back), "seed %u\n%s",
			     77000 + i, shuffled);
		free(text);
		lincheck_history_free(&h);
		lincheck_history_free(&back);
	}
}
