/*
 * A small in-process driver for unit tests: N core instances, a FIFO of
 * deep-copied messages that the test delivers (or drops) by hand, and a
 * disk that persists at once unless the test holds it.
 */
#ifndef BATON_UNIT_HARNESS_H
#define BATON_UNIT_HARNESS_H

#include <baton/raft.h>

#define H_MAX 8

struct h_msg {
	struct baton_msg m;
	struct baton_entry *entries;
	uint8_t *chunk;
};

struct harness {
	uint32_t n;
	struct baton_raft *r[H_MAX + 1];
	struct baton_raft_options o[H_MAX + 1];
	bool down[H_MAX + 1]; /* messages to and from it are dropped */
	struct h_msg *q;
	uint32_t q_n, q_cap;
	uint64_t now_ms;
	/* What the last step of each node produced. */
	struct baton_update last[H_MAX + 1];
	uint32_t last_msgs[H_MAX + 1], last_msgs_after[H_MAX + 1];
	bool last_hs_changed[H_MAX + 1];
	baton_index applied[H_MAX + 1];
	uint64_t applied_commands[H_MAX + 1];
	baton_index snapshot_installed[H_MAX + 1];
	/* Reads answered: request id -> read index (status in reads_status). */
	uint64_t reads_id[64];
	baton_index reads_index[64];
	int reads_status[64];
	uint32_t n_reads;
	uint32_t delivered[16]; /* messages delivered, by type */
};

/* n voters 1..n, bootstrapped; `tweak` may adjust each node's options. */
void h_init(struct harness *h, uint32_t n,
	    void (*tweak)(struct baton_raft_options *o));
/* A node that starts empty (to be added as a learner). */
void h_add_empty(struct harness *h, baton_node_id id);
void h_free(struct harness *h);

int h_step(struct harness *h, baton_node_id id, struct baton_event *ev);
/* Advance time by ms, ticking every node every 10 ms, delivering messages
 * after each tick. */
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

#endif
