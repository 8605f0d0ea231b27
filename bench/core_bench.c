/*
 * Core-only throughput: N core instances in one process, a network with no
 * latency and no faults, a disk that persists instantly. Measures entries
 * committed (applied by the leader) per CPU second, for 3 and 5 nodes at
 * batch sizes 1, 16 and 256 (commands per proposal).
 *
 *   build/bench-core [--entries N] [--payload BYTES]
 */
#include <baton/raft.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_NODES 5

struct queued {
	struct baton_msg msg;
	struct baton_entry *entries; /* deep copies, owned here */
	uint8_t *chunk;
};

struct bench {
	uint32_t n_nodes;
	struct baton_raft *nodes[MAX_NODES + 1];
	struct queued *q;
	size_t q_head, q_len, q_cap;
	uint64_t now_ms;
	baton_index leader_applied;
};

static void die(const char *what, int rv)
{
	fprintf(stderr, "bench-core: %s: %s\n", what, baton_strerror(rv));
	exit(2);
}

static void enqueue(struct bench *b, const struct baton_msg *m)
{
	if (b->q_len == b->q_cap) {
		size_t cap = b->q_cap ? b->q_cap * 2 : 1024;
		struct queued *q = malloc(cap * sizeof *q);
		if (q == NULL)
			die("queue", BATON_ENOMEM);
		for (size_t i = 0; i < b->q_len; i++)
			q[i] = b->q[(b->q_head + i) % b->q_cap];
		free(b->q);
		b->q = q;
		b->q_head = 0;
		b->q_cap = cap;
	}
	struct queued *x = &b->q[(b->q_head + b->q_len++) % b->q_cap];
	memset(x, 0, sizeof *x);
	x->msg = *m;
	if (m->type == BATON_MSG_APPEND && m->u.append.n_entries > 0) {
		uint32_t n = m->u.append.n_entries;
		x->entries = malloc(n * sizeof *x->entries);
		for (uint32_t i = 0; i < n; i++) {
			x->entries[i] = m->u.append.entries[i];
			x->entries[i].buf = malloc(x->entries[i].len + 1u);
			memcpy(x->entries[i].buf, m->u.append.entries[i].buf,
			       x->entries[i].len);
		}
		x->msg.u.append.entries = x->entries;
	}
	if (m->type == BATON_MSG_SNAPSHOT && m->u.snapshot.chunk_len > 0) {
		x->chunk = malloc(m->u.snapshot.chunk_len);
		memcpy(x->chunk, m->u.snapshot.chunk, m->u.snapshot.chunk_len);
		x->msg.u.snapshot.chunk = x->chunk;
	}
}

static void release(struct queued *x)
{
	if (x->entries != NULL) {
		for (uint32_t i = 0; i < x->msg.u.append.n_entries; i++)
			free(x->entries[i].buf);
		free(x->entries);
	}
	free(x->chunk);
}

static int step(struct bench *b, baton_node_id id, struct baton_event *ev);

/* The ideal driver: the disk is instant, so persistence completes before
 * anything else happens and the held-back messages go out right away. */
static void handle(struct bench *b, baton_node_id id,
		   const struct baton_update *u)
{
	for (uint32_t i = 0; i < u->n_msgs; i++)
		enqueue(b, &u->msgs[i]);
	for (uint32_t i = 0; i < u->n_msgs_after_persist; i++)
		enqueue(b, &u->msgs_after_persist[i]);
	if (u->role == BATON_LEADER && u->n_apply > 0)
		b->leader_applied = u->apply[u->n_apply - 1].index;
	if (u->persist_needed) {
		struct baton_event ev = {.type = BATON_EVENT_PERSISTED};
		ev.u.persisted.index = u->persist_index;
		ev.u.persisted.term = u->persist_term;
		step(b, id, &ev);
	}
}

static int step(struct bench *b, baton_node_id id, struct baton_event *ev)
{
	struct baton_update u;
	int rv = baton_raft_step(b->nodes[id], b->now_ms, ev, &u);
	handle(b, id, &u);
	return rv;
}

static void deliver_all(struct bench *b)
{
	while (b->q_len > 0) {
		struct queued x = b->q[b->q_head];
		b->q_head = (b->q_head + 1) % b->q_cap;
		b->q_len--;
		struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
		ev.u.receive.msg = &x.msg;
		step(b, (baton_node_id)x.msg.to, &ev);
		release(&x);
	}
}

static baton_node_id leader_of(struct bench *b)
{
	for (baton_node_id id = 1; id <= b->n_nodes; id++) {
		struct baton_raft_status s;
		baton_raft_status(b->nodes[id], &s);
		if (s.role == BATON_LEADER)
			return id;
	}
	return 0;
}

static void setup(struct bench *b, uint32_t n_nodes)
{
	memset(b, 0, sizeof *b);
	b->n_nodes = n_nodes;
	struct baton_config c = {0};
	for (uint32_t i = 1; i <= n_nodes; i++) {
		c.members[c.n].id = i;
		c.members[c.n].role = BATON_VOTER;
		c.n++;
	}
	for (uint32_t i = 1; i <= n_nodes; i++) {
		struct baton_raft_options o;
		baton_raft_options_default(&o);
		o.id = i;
		o.random_seed = 7;
		o.max_inflight_appends = 8;
		int rv = baton_raft_create(&o, &b->nodes[i]);
		if (rv == 0)
			rv = baton_raft_bootstrap(b->nodes[i], &c);
		if (rv != 0)
			die("create", rv);
	}
	while (leader_of(b) == 0) {
		b->now_ms += 10;
		for (baton_node_id id = 1; id <= n_nodes; id++) {
			struct baton_event ev = {.type = BATON_EVENT_TICK};
			step(b, id, &ev);
		}
		deliver_all(b);
	}
}

static void teardown(struct bench *b)
{
	while (b->q_len > 0) {
		release(&b->q[b->q_head]);
		b->q_head = (b->q_head + 1) % b->q_cap;
		b->q_len--;
	}
	free(b->q);
	for (uint32_t i = 1; i <= b->n_nodes; i++)
		baton_raft_destroy(b->nodes[i]);
}

/* Propose `total` commands in batches of `batch`, keeping a window of
 * proposals in flight, and return entries committed per CPU second. */
static double run(uint32_t n_nodes, uint32_t batch, uint64_t total,
		  size_t payload)
{
	struct bench b;
	setup(&b, n_nodes);
	baton_node_id leader = leader_of(&b);
	uint8_t *data = calloc(1, payload);
	struct baton_buffer *bufs = malloc(batch * sizeof *bufs);
	for (uint32_t i = 0; i < batch; i++)
		bufs[i] = (struct baton_buffer){data, payload};
	baton_index start = b.leader_applied;
	baton_index proposed_upto = 0;
	uint64_t window = (uint64_t)batch * 4;
	clock_t t0 = clock();
	while (b.leader_applied < start + total) {
		while (proposed_upto < b.leader_applied + window &&
		       proposed_upto < start + total + batch) {
			struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
			ev.u.propose.n = batch;
			ev.u.propose.bufs = bufs;
			int rv = step(&b, leader, &ev);
			if (rv != 0)
				die("propose", rv);
			proposed_upto =
				ev.u.propose.first_index_out + batch - 1;
		}
		deliver_all(&b);
	}
	double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
	baton_index committed = b.leader_applied - start;
	free(bufs);
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
	printf("core-only throughput: no latency, no faults, instant disk\n");
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
