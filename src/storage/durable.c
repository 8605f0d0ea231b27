/* What load() hands over, and how to give it back. */
#include <stdlib.h>
#include <string.h>

#include "baton/storage.h"

void baton_durable_state_free(struct baton_durable_state *s)
{
	if (s == NULL)
		return;
	for (uint32_t i = 0; i < s->n_entries; i++)
		free(s->entries[i].buf);
	free(s->entries);
	free(s->snapshot_data);
	memset(s, 0, sizeof *s);
}
