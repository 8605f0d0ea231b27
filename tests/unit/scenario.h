/*
 * Cluster scenarios of the Raft core (tests/unit/test_scenarios_*.c): a
 * cluster ("cluster", names prefixed c_) of up to C_MAX nodes with ids
 * 1..C_MAX, each the node pipeline that ships (src/node/pipeline.h) over a
 * simulated disk and a recording machine (fixture.h); one FIFO of messages
 * that a test delivers one by one, by filter, or all at once; disks that
 * are durable at once (the default) or hold writes until c_persist()
 * (manual). The pipeline does the driver's work (the persist chain, held
 * messages, apply); this file moves messages, advances time, feeds events
 * and looks at what every core step produced (the pipeline's observer):
 * summaries of updates, and deep copies of applied entries, reads and
 * installed snapshots.
 *
 * It also checks, on every update, what must hold whatever the scenario:
 * entries are handed over in order, without gaps, and never beyond the
 * commit index the same update reports; a core signs its messages.
 *
 * scenario.c holds the cluster (messages, persistence, what the cores do,
 * life cycle); scenario_run.c time, requests and looking at results.
 */
#ifndef BATON_UNIT_SCENARIO_H
#define BATON_UNIT_SCENARIO_H

#include "core.h" /* struct baton__progress, to look at the leader */
#include "fixture.h"
#include "pipeline.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C_MAX 8u
#define C_TICK_MS 10u
#define C_ELECTION_MS 1000u
#define C_HEARTBEAT_MS 100u
#define C_SUM_MSGS 64u

struct c_applied {
	baton_index index;
	baton_term term;
	uint32_t type;
	uint32_t len;
	uint8_t *buf;
};

/* The scalars of one update and shallow copies of its messages. */
struct c_sum {
	int rv;
	uint32_t role;
	baton_term term;
	baton_node_id leader_id;
	baton_index commit_index;
	bool hard_state_changed;
	baton_term hs_term;
	baton_node_id hs_vote;
	bool has_snapshot;
	baton_index snapshot_index;
	baton_index truncate_from;
	uint32_t n_entries;
	baton_index compact_upto;
	bool persist_needed;
	baton_index persist_index;
	baton_term persist_term;
	uint32_t n_msgs;
	struct baton_msg msgs[C_SUM_MSGS];
	uint32_t n_msgs_after;
	struct baton_msg msgs_after[C_SUM_MSGS];
	uint32_t n_apply;
	uint32_t n_reads;
	struct baton_read_result reads[C_SUM_MSGS];
	baton_node_id promotion_failed;
};

#define C_READS_MAX 64u

struct cluster;

struct c_node {
	struct cluster *c;
	baton_node_id id;
	struct baton_pipeline *p;
	const struct baton_raft *r; /* p's core, to look at (NULL: none) */
	struct fx_disk disk;
	struct fx_machine machine;
	bool isolated; /* messages to and from it are lost */

	/* What this node's core did, as the pipeline stepped it. */
	struct c_applied *applied; /* handed over to apply */
	uint32_t n_applied, cap_applied;
	baton_index last_applied;
	struct baton_read_result *reads; /* by the test's request ids */
	uint32_t n_reads, cap_reads;
	baton_index min_truncate_from; /* 0: none seen */
	baton_index last_compact_upto;
	uint32_t n_snapshots;
	struct baton_snapshot_meta snap;
	uint8_t *snap_data;
	size_t snap_len;
	baton_term hs_term;
	baton_node_id hs_vote;
	baton_node_id promotion_failed;
	bool campaigned; /* was ever (pre-)candidate */
	/* The pipeline's request id of each read the test made. */
	uint64_t read_group[C_READS_MAX], read_id[C_READS_MAX];
	uint32_t n_read_map;
};

struct cluster {
	uint64_t now;
	struct c_node n[C_MAX + 1];
	uint64_t snapshot_entries; /* every pipeline's (0: never) */
	size_t snapshot_bytes;	   /* of every machine's snapshots */
	struct fx_msg *q;
	uint32_t q_n, q_cap;
	uint64_t sent[16];	/* by type, as the cores emitted them */
	uint64_t delivered[16]; /* by type */
	uint64_t sent_to[C_MAX + 1];
	/* Info requests and replies (the version rules) are dropped when
	 * sent unless this is set: the scenarios of the Raft mechanics count
	 * entries and messages exactly, and the table entry a leader writes
	 * once members answer would shift them. */
	bool info;
	/* Called before each delivery. */
	void (*hook)(void *ctx, const struct baton_msg *m);
	void *hook_ctx;
	/* While c_step waits for the core's answer to one event. */
	baton_node_id want_node;
	uint32_t want_type;
	bool got;
	int got_rv;
	baton_index got_first_index;
	struct c_sum *want_sum;
	int proposal_error;
};

typedef void (*c_tweak_fn)(struct baton_raft_options *o);

/* A hand-made AppendEntries whose entries (terms given, indexes from
 * prev + 1, payload "i<index>t<term>") live in the struct itself: build it
 * in place and do not copy it. */
struct c_append {
	struct baton_msg m;
	struct baton_entry e[16];
	char text[16][32];
};

/* ---- scenario.c ---- */

void *c_alloc(size_t n);
struct c_node *c_node(struct cluster *c, baton_node_id id);
const struct baton_raft *c_raft(struct cluster *c, baton_node_id id);
struct baton_raft_status c_status(struct cluster *c, baton_node_id id);
uint32_t c_role(struct cluster *c, baton_node_id id);
baton_term c_term(struct cluster *c, baton_node_id id);
baton_index c_commit(struct cluster *c, baton_node_id id);
baton_index c_last(struct cluster *c, baton_node_id id);
bool c_match(const struct baton_msg *m, uint32_t type, baton_node_id from,
	     baton_node_id to);
uint32_t c_count(struct cluster *c, uint32_t type, baton_node_id from,
		 baton_node_id to);
const struct baton_msg *c_find(struct cluster *c, uint32_t type,
			       baton_node_id from, baton_node_id to,
			       uint32_t k);
uint32_t c_drop(struct cluster *c, uint32_t type, baton_node_id from,
		baton_node_id to);
bool c_drop_first(struct cluster *c, uint32_t type, baton_node_id from,
		  baton_node_id to);
uint32_t c_drop_to(struct cluster *c, baton_node_id to);
int c_step(struct cluster *c, baton_node_id id, struct baton_event *ev,
	   struct c_sum *sum);
bool c_deliver_match(struct cluster *c, uint32_t type, baton_node_id from,
		     baton_node_id to);
bool c_deliver_one(struct cluster *c);
uint32_t c_deliver_all(struct cluster *c);
void c_persist_one(struct cluster *c, baton_node_id id);
void c_persist(struct cluster *c, baton_node_id id);
void c_set_manual(struct cluster *c, baton_node_id id, bool manual);
void c_add_node(struct cluster *c, baton_node_id id, c_tweak_fn tweak);
/* Nodes 1..n, voters; each takes a snapshot of `bytes` bytes every
 * `every` applied entries. */
struct cluster *c_new_snapshots(uint32_t n, c_tweak_fn tweak, uint64_t every,
				size_t bytes);
void c_voters(struct baton_config *cfg, uint32_t n);
int c_tick_node(struct cluster *c, baton_node_id id, struct c_sum *sum);
struct cluster *c_new(uint32_t n, c_tweak_fn tweak);
void c_free(struct cluster *c);
void c_isolate(struct cluster *c, baton_node_id id, bool isolated);

/* ---- scenario_run.c ---- */

void c_advance(struct cluster *c, uint64_t ms);
void c_tick_all(struct cluster *c);
void c_run(struct cluster *c, uint64_t ms);
baton_node_id c_leader(struct cluster *c);
uint32_t c_count_leaders(struct cluster *c);
baton_node_id c_tick_until_leader(struct cluster *c, uint64_t max_ms);
baton_node_id c_follower(struct cluster *c, baton_node_id leader,
			 baton_node_id not );
int c_propose(struct cluster *c, baton_node_id id, const char *cmd,
	      baton_index *index_out);
int c_propose_n(struct cluster *c, baton_node_id id, const char *prefix,
		uint32_t n, baton_index *first_out);
int c_read(struct cluster *c, baton_node_id id, uint64_t request_id,
	   struct c_sum *sum);
int c_member(struct cluster *c, baton_node_id id, uint32_t type,
	     baton_node_id target);
int c_transfer(struct cluster *c, baton_node_id id, baton_node_id target,
	       struct c_sum *sum);
int c_receive(struct cluster *c, baton_node_id id, const struct baton_msg *m,
	      struct c_sum *sum);
struct baton_msg c_msg(uint32_t type, baton_term term, baton_node_id from,
		       baton_node_id to);
void c_make_append(struct c_append *a, baton_term term, baton_node_id from,
		   baton_node_id to, baton_index prev, baton_term prev_term,
		   baton_index commit, const baton_term *terms, uint32_t n);
const struct c_applied *c_applied_at(struct cluster *c, baton_node_id id,
				     baton_index i);
bool c_applied_cmd(struct cluster *c, baton_node_id id, const char *cmd);
const struct baton_read_result *
c_read_result(struct cluster *c, baton_node_id id, uint64_t request_id);
void c_assert_logs_equal(struct cluster *c, baton_node_id a, baton_node_id b,
			 baton_index from, baton_index to);
uint32_t c_sum_count(const struct c_sum *s, bool after, uint32_t type,
		     baton_node_id to);
const struct baton_msg *c_sum_find(const struct c_sum *s, bool after,
				   uint32_t type, baton_node_id to);
struct cluster *c_three(c_tweak_fn tweak, baton_node_id *leader);
struct cluster *c_with_learner(c_tweak_fn tweak, baton_node_id *leader);

const struct baton__progress *
c_progress(struct cluster *c, baton_node_id leader, baton_node_id id);

#endif /* BATON_UNIT_SCENARIO_H */
