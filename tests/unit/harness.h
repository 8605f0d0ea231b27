/*
 * The unit tests' cluster: N nodes, each the node pipeline that ships
 * (src/node/pipeline.h) over a simulated disk and a recording state
 * machine (fixture.h), and a FIFO of deep-copied messages that the test
 * delivers (or drops) by hand. The pipeline does the driver's work (the
 * persist chain, held messages, proposals, reads, apply, snapshots); the
 * harness only moves messages, advances time and looks.
 *
 * The disk is durable at once unless the test holds it (h_hold_disk); a
 * node takes a snapshot every h->snapshot_entries applied entries when the
 * test asks for that (h_init_snapshots).
 */
#ifndef BATON_UNIT_HARNESS_H
#define BATON_UNIT_HARNESS_H

#include <baton/raft.h>

#include "fixture.h"
#include "pipeline.h"

#define H_MAX 8
#define H_LAST_MSGS 64u
#define H_READS_MAX 64u

struct harness;

/* One node: its pipeline (NULL while it does not run), disk and machine. */
struct h_node {
	struct harness *h;
	baton_node_id id;
	struct baton_pipeline *p;
	struct fx_disk disk;
	struct fx_machine machine;
};

/* A read the test asked for, answered or not. */
struct h_read {
	baton_node_id node;
	uint64_t id;	   /* the test's */
	uint64_t group;	   /* the pipeline's request id (0: not sent) */
	baton_index index; /* the read index the core gave (0: none yet) */
	int status;	   /* how the pipeline completed it */
	bool done;
};

/* Time 0 of the harness's wall clocks (2026-01-01, unix ms). */
#define H_EPOCH_MS 1767225600000ull

struct harness {
	uint32_t n;
	struct h_node node[H_MAX + 1];
	/* Each running node's core, to look at (NULL: not running). */
	const struct baton_raft *r[H_MAX + 1];
	struct baton_raft_options o[H_MAX + 1];
	uint64_t snapshot_entries; /* every pipeline's (0: never) */
	bool down[H_MAX + 1];	   /* messages to and from it are dropped */
	/* Info requests and replies (the version rules) are dropped when
	 * sent unless a test sets this (after h_init, before the first
	 * election): most tests count entries
	 * exactly, and the table entry a leader writes once members answer
	 * would shift them. */
	bool info;
	/* Clocks (src/node/clock.c), off but with h_init_clocks: each
	 * node's wall clock is then H_EPOCH_MS + now_ms + its skew. */
	uint32_t max_clock_offset_ms;
	int64_t clock_skew_ms[H_MAX + 1];
	struct fx_msg *q;
	uint32_t q_n, q_cap;
	uint64_t now_ms;
	/* What the last step of each node's core produced (the pipeline's
	 * own PERSISTED and APPLY_STOPPED steps aside): the scalars, and in
	 * msgs / msgs_after_persist copies of the first H_LAST_MSGS message
	 * headers (entries and chunks not kept), in snapshot a copy of the
	 * installed snapshot's metadata (its data not kept). */
	struct baton_update last[H_MAX + 1];
	struct baton_msg last_msgs[H_MAX + 1][H_LAST_MSGS];
	struct baton_msg last_msgs_after[H_MAX + 1][H_LAST_MSGS];
	struct baton_snapshot_meta last_snapshot[H_MAX + 1];
	baton_index applied[H_MAX + 1];		   /* by the machine */
	uint64_t applied_commands[H_MAX + 1];	   /* by the machine */
	baton_index snapshot_installed[H_MAX + 1]; /* from a leader */
	/* Reads the cores took, in the order asked; n_reads counts those
	 * answered. reads_id / reads_index / reads_status: the answered
	 * ones, in the order they were answered. */
	struct h_read reads[H_READS_MAX];
	uint32_t n_asked;
	uint64_t reads_id[H_READS_MAX];
	baton_index reads_index[H_READS_MAX];
	int reads_status[H_READS_MAX];
	uint32_t n_reads;
	uint32_t delivered[16];		      /* messages delivered, by type */
	uint32_t delivered_to[H_MAX + 1][16]; /* ... by receiver and type */
	/* While h_step waits for the core's answer to one event. */
	baton_node_id want_node;
	uint32_t want_type;
	bool got;
	int got_rv;
	baton_index got_first_index;
	int proposal_error;
};

/* n voters 1..n, bootstrapped; `tweak` may adjust each node's options. */
void h_init(struct harness *h, uint32_t n,
	    void (*tweak)(struct baton_raft_options *o));
/* The same, each node taking a snapshot every `every` applied entries. */
void h_init_snapshots(struct harness *h, uint32_t n,
		      void (*tweak)(struct baton_raft_options *o),
		      uint64_t every);
/* A node that starts empty (to be added as a learner). */
/* As h_init, with wall clocks and the pipelines' clock check on. */
void h_init_clocks(struct harness *h, uint32_t n, uint32_t max_offset_ms);
void h_add_empty(struct harness *h, baton_node_id id);
void h_free(struct harness *h);

/* Feed the event to node id through its pipeline (TICK, RECEIVE with a
 * hand-made message, PROPOSE, READ, TRANSFER, ADD_LEARNER, PROMOTE, REMOVE,
 * VERSIONS, DOWNGRADE), let it settle, and return what the core answered (or
 * what the pipeline refused with). PERSISTED, SNAPSHOT_TAKEN and APPLY_STOPPED
 * are the pipeline's own events: a test cannot feed them. */
int h_step(struct harness *h, baton_node_id id, struct baton_event *ev);
/* Advance time by ms, ticking every running node every 10 ms, delivering
 * messages after each tick. */
void h_run(struct harness *h, uint64_t ms);
/* Deliver queued messages (and those they cause) until none are left. */
void h_deliver_all(struct harness *h);
/* Run until some node leads (fails the test after 10 s). */
baton_node_id h_elect(struct harness *h);
baton_node_id h_leader(struct harness *h);
int h_propose(struct harness *h, baton_node_id id, const char *cmd);
struct baton_raft_status h_status(struct harness *h, baton_node_id id);
/* Messages queued of this type from -> to (0 = any). */
uint32_t h_count(struct harness *h, uint32_t type, baton_node_id from,
		 baton_node_id to);

/* Hold node id's disk (writes wait for h_persist) or stop holding it. */
void h_hold_disk(struct harness *h, baton_node_id id, bool held);
/* Make node id's oldest held write durable; false if none is held. */
bool h_persist(struct harness *h, baton_node_id id);
/* Stop node id and start it again from its disk: cleanly (queued writes
 * become durable) or by power loss (they are lost). */
void h_restart(struct harness *h, baton_node_id id, bool power_loss);

/* A single voter's core alone, with no pipeline, stepped by hand until it
 * leads and has committed its no-op (each persistence reported at once):
 * for tests of one core function. `tweak` may be NULL; *now_ms is the
 * time reached. Destroy with baton_raft_destroy. */
struct baton_raft *h_lone_leader(void (*tweak)(struct baton_raft_options *o),
				 uint64_t *now_ms);

#endif
