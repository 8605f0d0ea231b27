/*
 * The fixture shared by the node-side relay client's tests
 * (test_client.c, test_client_restart.c): the baton-relay process, the
 * test nodes and the traffic between them (client_fixture.c).
 */
#ifndef BATON_TESTS_RELAY_CLIENT_FIXTURE_H
#define BATON_TESTS_RELAY_CLIENT_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "client.h"

struct relay_proc {
	pid_t pid;
	int port;
	char dir[64];
	char path[128];
};

extern struct relay_proc relay; /* the one this test started */
/* One more flag for the next relay_start() ("--name=value"), or NULL. */
extern const char *relay_extra_flag;
/* The relay secret the next node_start()s prove (their config's secret),
 * or NULL for none. */
extern const struct baton_peer_secret *node_relay_secret;

#define MAX_SOURCES 4

struct test_node {
	const char *cluster;
	baton_node_id id;
	struct relay_client *rc;
	bool closed;
	uint64_t view;
	size_t view_n;
	struct {
		char cluster[16];
		baton_node_id id;
		uint64_t incarnation;
		char address[32];
		struct baton_release release;
		bool connected;
	} nodes[8];
	bool active;
	/* Per (source index, multicast): the next message number expected;
	 * any other is an error (a loss, a duplicate or a reorder). */
	uint64_t next[MAX_SOURCES][2];
	uint64_t errors;
};

extern uv_loop_t *loop;
extern struct test_node *all_nodes[MAX_SOURCES];
extern size_t n_nodes;

/* The incarnation of the node started index-th. */
uint64_t incarnation_of(size_t index);
/* Start baton-relay on relay.port (with --activate if activate), and wait
 * until it listens, within 10 s. */
void relay_start(bool activate);
/* Signal the relay this test started and reap it, within 10 s. */
void relay_kill(int sig);
/* The suite's .init (a data directory, a port, a loop) and .fini. */
void loop_setup(void);
void teardown(void);
/* Start a client as node id of cluster, the n_nodes-th. */
void node_start(struct test_node *t, const char *cluster, baton_node_id id);
void node_close(struct test_node *t);
/* Run the loop until pred(arg) holds, at most ms. */
bool run_until(bool (*pred)(void *), void *arg, uint64_t ms);
/* Close every node, then the loop: every handle must be closed. */
void finish(void);
/* Predicates for run_until(): every open node has a view of arg nodes, all
 * connected; every open node is active; no node is active; every node is
 * closed. */
bool view_complete(void *arg);
bool all_active(void *arg);
/* The three nodes most tests use, started and active in one view of
 * three: old/1 (index 0), old/2 (1), new/1 (2). */
void start_three(struct test_node *o1, struct test_node *o2,
		 struct test_node *n1);
bool none_active(void *arg);
bool all_closed(void *arg);

/* One stream the test drives: source node index, destination (a node of
 * a cluster, or node 0: multicast), how many to send. */
struct flow {
	size_t src;
	const char *cluster;
	baton_node_id node;
	uint64_t total, queued;
};

struct traffic {
	struct flow flows[4];
	size_t n;
	uv_timer_t timer;
	uint64_t per_tick;
	uint8_t *buf;
};

/* Queue per_tick messages of every flow every 2 ms until its total. */
void traffic_start(struct traffic *tr, uint64_t per_tick);
void traffic_stop(struct traffic *tr);
/* Delivered so far to node `to` from source `src` (kind multicast). */
uint64_t got(size_t to, size_t src, bool multicast);

struct expect {
	size_t to, src;
	bool multicast;
	uint64_t count;
};

struct expectations {
	struct expect e[8];
	size_t n;
};

/* run_until() predicates: every expectation met and nothing queued; one
 * expectation (struct expect) met. */
bool delivered_and_drained(void *arg);
bool delivered_at_least(void *arg);
/* Exactly the expected counts, no loss, duplicate or reorder, nothing left
 * queued or dropped. */
void check_exact(const struct expectations *x);

#endif /* BATON_TESTS_RELAY_CLIENT_FIXTURE_H */
