/*
 * Cluster scenarios of the Raft core (tests/unit/test_scenarios_*.c): a
 * small in-process driver ("cluster", names prefixed c_): up to C_MAX
 * nodes with ids 1..C_MAX, one FIFO of messages that a test delivers one by
 * one, by filter, or all at once, and persistence that is instant (the
 * default) or held until c_persist() (manual). It does every duty the top
 * comment of include/baton/raft.h gives a driver, and deep-copies whatever
 * an update points to (messages with their entries and snapshot chunks,
 * applied entries, reads, installed snapshots) before the next step.
 *
 * It also checks, on every update, what must hold whatever the scenario:
 * entries are applied in order, without gaps, and never beyond the commit
 * index the same update reports.
 *
 * scenario.c holds the driver (messages, persistence, the update, life
 * cycle); scenario_run.c time, requests and looking at results.
 */
#ifndef BATON_UNIT_SCENARIO_H
#define BATON_UNIT_SCENARIO_H

#include "core.h" /* struct baton__progress, to look at the leader */

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

/* A message owned by the driver, with deep copies of what it points to. */
struct c_qmsg {
	struct baton_msg m;
	struct baton_entry *entries;
	uint8_t *chunk;
};

/* A persistence held by a manual disk: once done, report PERSISTED (if
 * needed) and release the update's msgs_after_persist. */
struct c_batch {
	bool needed;
	baton_index index;
	baton_term term;
	struct c_qmsg *msgs;
	uint32_t n_msgs;
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

struct c_node {
	struct baton_raft *r;
	bool isolated; /* messages to and from it are lost */
	bool manual;   /* persistence waits for c_persist() */
	struct c_batch *pend;
	uint32_t n_pend, cap_pend;

	/* What the driver did for this node. */
	struct c_applied *applied;
	uint32_t n_applied, cap_applied;
	baton_index last_applied; /* by the state machine */
	struct baton_read_result *reads;
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
};

struct cluster {
	uint64_t now;
	struct c_node n[C_MAX + 1];
	struct c_qmsg *q;
	uint32_t q_n, q_cap;
	uint64_t sent[16];	/* by type, as the cores emitted them */
	uint64_t delivered[16]; /* by type */
	uint64_t sent_to[C_MAX + 1];
	/* Called before each delivery. */
	void (*hook)(void *ctx, const struct baton_msg *m);
	void *hook_ctx;
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
struct baton_raft *c_raft(struct cluster *c, baton_node_id id);
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
int c_snapshot_taken(struct cluster *c, baton_node_id id, baton_index index,
		     const void *data, size_t len, struct c_sum *sum);
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

#endif /* BATON_UNIT_SCENARIO_H */
