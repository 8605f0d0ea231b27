/*
 * baton — the basic types every public header shares.
 */
#ifndef BATON_TYPES_H
#define BATON_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t baton_term;
typedef uint64_t baton_index;
typedef uint64_t baton_node_id; /* 0 means "nobody" */

/* Members of one configuration, voters and learners together. */
#define BATON_MAX_MEMBERS 16u

#endif /* BATON_TYPES_H */
