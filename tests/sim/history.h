/*
 * The clients' recorded history (history.c), shared by the workload
 * (workload.c) that issues the operations: every invocation and completion
 * with the simulated time, in the linearizability checker's terms
 * (tools/lincheck/lincheck.h), checked at the end of every run.
 *
 * Keys are numbers, a few written at a time, each with at most
 * SIM_KEY_PENDING_MAX operations in flight; a key retires after
 * SIM_KEY_OPS_MAX operations that may have taken effect (or
 * SIM_KEY_INFO_MAX indeterminate ones) and a fresh one takes its place, so
 * each key's history stays small enough to check at once, as tests/jepsen
 * does.
 */
#ifndef BATON_SIM_HISTORY_H
#define BATON_SIM_HISTORY_H

#include "world.h"

#include "lincheck.h"

#define SIM_CLIENTS 32u	       /* clients, each with one operation at most */
#define SIM_KEYS_ACTIVE 8u     /* keys written at a time */
#define SIM_KEY_PENDING_MAX 4u /* operations in flight on one key */
#define SIM_KEY_OPS_MAX 40u    /* a key retires after this many operations */
#define SIM_KEY_INFO_MAX 6u    /* ... or this many indeterminate ones */
#define SIM_KEYS_RETIRED 6u    /* retired keys that reads still visit */

/* One client: a process of the history, with at most one operation
 * pending. After an indeterminate operation it becomes a new process. */
struct sim_client {
	struct sim_world *w;
	uint64_t id;
	bool busy;
	uint32_t node; /* where its operation went */
	uint64_t incarnation;
	uint8_t kind; /* enum lincheck_kind */
	uint32_t key;
	baton_index must_see; /* reads: applied anywhere at invocation */
};

/* An idle client chosen at random, or NULL when all are busy. */
struct sim_client *sim_history_idle(struct sim_world *w);
/* A key to write (an active one with room for one more operation in
 * flight), or to read (now and then a retired one); 0 when every active
 * key is busy. */
uint32_t sim_history_key(struct sim_world *w, bool read);
/* A fresh value for a set ("17", ...) or an append ("4", ...): decimal,
 * never with a leading zero, so values stay integers an incr accepts. */
void sim_history_value(struct sim_world *w, bool append, char *buf, size_t cap);

/* Record client c invoking `kind` on `key` on node n (value: the set or
 * append argument, else NULL). */
void sim_history_invoke(struct sim_world *w, struct sim_client *c,
			struct sim_node *n, uint8_t kind, uint32_t key,
			const char *value);
/* Completions: ok with a result (get: the value, present or not; append,
 * incr and del: out_int, known when `present`), fail (certainly no
 * effect), or indeterminate (info: applied once or never). */
void sim_history_ok(struct sim_world *w, struct sim_client *c, int64_t out_int,
		    bool present, const char *val, uint32_t len);
void sim_history_fail(struct sim_world *w, struct sim_client *c);
void sim_history_info(struct sim_world *w, struct sim_client *c);

#endif
