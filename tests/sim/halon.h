/*
 * Halon's rule in the simulator (halon.c): the release floor never rises
 * to a release that a majority of the voters did not run.
 */
#ifndef BATON_SIM_HALON_H
#define BATON_SIM_HALON_H

#include "world.h"

/* Called for every version entry node n appended (checks.c); checks those
 * its leader made. A failure is "version safety:". */
void sim_check_halon(struct sim_world *w, struct sim_node *n,
		     const struct baton_update *u, const struct baton_entry *e);

#endif
