/*
 * Core throughput through the node pipeline that ships (src/node): N nodes
 * in one process, a network with no latency and no faults, a disk that is
 * durable at once (the simulator's, tests/sim/sim_disk.c) and a state
 * machine that counts (tests/unit/fixture.c). Measures proposals committed
 * and applied on the leader per CPU second, for 3 and 5 nodes at batch
 * sizes 1, 16 and 256 (proposals queued between two flushes, which the
 * pipeline hands the core as one PROPOSE event).
 *
 *   build/bench-core [--entries N] [--payload BYTES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "pipeline.h"

#define MAX_NODES 5
#define TICK_MS 10u

struct bnode {
	struct baton_pipeline *p;
	struct fx_disk disk;
	struct fx_machine machine;
};

struct bench {
	uint32_t n_nodes;
	struct bnode nodes[MAX_NODES + 1];
	struct fx_msg *q; /* a ring of messages in flight */
	size_t q_head, q_len, q_cap;
	uint64_t now_ms;
	uint64_t done, failed; /* proposals completed */
};

static void die(const char *what, int rv)
{
	fprintf(stderr, "bench-core: %s: %s\n", what, baton_strerror(rv));
	exit(2);
}

static uint64_t env_now(void *data)
{
	return ((struct bench *)data)->now_ms;
}

static void env_send(void *data, const struct baton_msg *m)
{
	struct bench *b = data;
	if (b->q_len == b->q_cap) {
		size_t cap = b->q_cap ? b->q_cap * 2 : 1024;
		struct fx_msg *q = malloc(cap * sizeof *q);
		if (q == NULL)
			die("queue", BATON_ENOMEM);
		for (size_t i = 0; i < b->q_len; i++)
			q[i] = b->q[(b->q_head + i) % b->q_cap];
		free(b->q);
		b->q = q;
		b->q_head = 0;
		b->q_cap = cap;
	}
	fx_msg_copy(&b->q[(b->q_head + b->q_len++) % b->q_cap], m);
}

/* End of a turn for one node: the pipeline's flush, and the instant disk's
 * completions handed back until none are left. */
static void settle(struct bench *b, baton_node_id id)
{
	struct bnode *n = &b->nodes[id];
	fx_settle(n->p, &n->disk);
}

static void deliver_all(struct bench *b)
{
	while (b->q_len > 0) {
		struct fx_msg x = b->q[b->q_head];
		b->q_head = (b->q_head + 1) % b->q_cap;
		b->q_len--;
		baton_node_id to = x.m.to;
		if (to >= 1 && to <= b->n_nodes) {
			baton_pipeline_receive(b->nodes[to].p, &x.m);
			settle(b, to);
		}
		fx_msg_release(&x);
	}
}

static baton_node_id leader_of(struct bench *b)
{
	for (baton_node_id id = 1; id <= b->n_nodes; id++) {
		struct baton_pipeline_status s;
		baton_pipeline_status(b->nodes[id].p, &s);
		if (s.raft.role == BATON_LEADER)
			return id;
	}
	return 0;
}

static void setup(struct bench *b, uint32_t n_nodes)
{
	memset(b, 0, sizeof *b);
	b->n_nodes = n_nodes;
	struct baton_pipeline_env env = {
		.data = b, .now_ms = env_now, .send = env_send};
	for (uint32_t i = 1; i <= n_nodes; i++) {
		struct bnode *n = &b->nodes[i];
		struct baton_pipeline_config c;
		memset(&c, 0, sizeof c);
		baton_raft_options_default(&c.raft);
		c.raft.id = i;
		c.raft.random_seed = 7;
		c.raft.max_inflight_appends = 8;
		c.storage = fx_disk_open(&n->disk, i);
		fx_machine_init(&n->machine);
		c.machine = &n->machine.base;
		c.n_founders = n_nodes;
		for (uint32_t k = 0; k < n_nodes; k++)
			c.founders[k] = k + 1;
		char err[256];
		int rv =
			baton_pipeline_create(&c, &env, &n->p, err, sizeof err);
		if (rv != 0) {
			fprintf(stderr, "bench-core: create: %s\n", err);
			exit(2);
		}
		settle(b, i);
	}
	while (leader_of(b) == 0) {
		b->now_ms += TICK_MS;
		for (baton_node_id id = 1; id <= n_nodes; id++) {
			baton_pipeline_tick(b->nodes[id].p);
			settle(b, id);
		}
		deliver_all(b);
	}
}

static void teardown(struct bench *b)
{
	while (b->q_len > 0) {
		fx_msg_release(&b->q[b->q_head]);
		b->q_head = (b->q_head + 1) % b->q_cap;
		b->q_len--;
	}
	free(b->q);
	for (uint32_t i = 1; i <= b->n_nodes; i++) {
		baton_pipeline_destroy(b->nodes[i].p);
		fx_disk_free(&b->nodes[i].disk);
	}
}

static void on_proposed(void *data, int status, const uint8_t *reply,
			size_t len)
{
	struct bench *b = data;
	(void)reply;
	(void)len;
	if (status == 0)
		b->done++;
	else
		b->failed++;
}

/* Propose `total` commands, `batch` per flush, keeping a window of
 * proposals in flight, and return proposals committed per CPU second. */
static double run(uint32_t n_nodes, uint32_t batch, uint64_t total,
		  size_t payload)
{
	static struct bench b;
	setup(&b, n_nodes);
	baton_node_id leader = leader_of(&b);
	struct baton_pipeline *p = b.nodes[leader].p;
	uint8_t *data = calloc(1, payload);
	uint64_t window = (uint64_t)batch * 4, proposed = 0;
	clock_t t0 = clock();
	while (b.done < total) {
		while (proposed - b.done - b.failed < window &&
		       proposed < total) {
			for (uint32_t k = 0; k < batch && proposed < total;
			     k++, proposed++) {
				int rv = baton_pipeline_propose(
					p, data, payload, on_proposed, &b);
				if (rv != 0)
					die("propose", rv);
			}
			settle(&b, leader);
		}
		deliver_all(&b);
		if (b.failed > 0)
			die("a proposal failed", BATON_ESTATE);
	}
	double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
	uint64_t committed = b.done;
	free(data);
	teardown(&b);
	return cpu > 0 ? (double)committed / cpu : 0;
}

int main(int argc, char **argv)
{
	uint64_t total = 200000;
	size_t payload = 64;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--entries") == 0 && i + 1 < argc)
			total = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--payload") == 0 && i + 1 < argc)
			payload = strtoul(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: bench-core [--entries N] "
					"[--payload BYTES]\n");
			return 2;
		}
	}
	printf("core throughput through the node pipeline: no latency, no "
	       "faults, instant disk\n");
	printf("%llu entries of %zu bytes per run\n\n",
	       (unsigned long long)total, payload);
	printf("%-6s %-6s %18s\n", "nodes", "batch", "entries/cpu-sec");
	const uint32_t sizes[] = {3, 5};
	const uint32_t batches[] = {1, 16, 256};
	for (size_t s = 0; s < 2; s++)
		for (size_t k = 0; k < 3; k++)
			printf("%-6u %-6u %18.0f\n", sizes[s], batches[k],
			       run(sizes[s], batches[k], total, payload));
	return 0;
}
