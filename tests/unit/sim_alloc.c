/* The simulated disk (tests/sim/sim_disk.c) is compiled into the unit tests
 * and the core benchmark without the rest of the simulator; these are the
 * helpers of world.c it needs (declared in tests/sim/world.h). */
#include "world.h"

#include <stdlib.h>
#include <string.h>

void *sim_xmalloc(size_t n)
{
	void *p = malloc(n > 0 ? n : 1);
	if (p == NULL) {
		fprintf(stderr, "sim_disk: out of memory\n");
		abort();
	}
	return p;
}

void *sim_xdup(const void *src, size_t n)
{
	void *p = sim_xmalloc(n);
	if (n > 0)
		memcpy(p, src, n);
	return p;
}

void sim_copy_entries(struct baton_entry *dst, const struct baton_entry *src,
		      uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		dst[i] = src[i];
		dst[i].buf = sim_xdup(src[i].buf, src[i].len);
	}
}

void sim_free_entries(struct baton_entry *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(e[i].buf);
	free(e);
}
