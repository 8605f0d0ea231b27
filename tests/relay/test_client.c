/*
 * The node-side relay client (src/relay/client.c) against the real
 * baton-relay binary of the same build, on 127.0.0.1: registration and the
 * global view of two clusters, activation by the relay's flag and signal,
 * unicast and multicast delivered in order, nothing lost or duplicated
 * across a SIGKILL and restart of the relay mid-stream, and a fake relay
 * that sends junk or breaks the protocol refused with the right ERROR.
 * Every wait is bounded; only the relay PID a test started is signalled.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/io/log.h"
#include "baton/errors.h"
#include "client.h"
#include "protocol.h"

/* ---- the relay process ----------------------------------------------------
 */

struct relay_proc {
	pid_t pid;
	int port;
	char dir[64];
	char path[128];
};

static struct relay_proc relay; /* the one this test started */

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	socklen_t len = sizeof(sa);
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static bool port_open(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void relay_start(bool activate)
{
	char listen[64], log[160];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", relay.port);
	snprintf(log, sizeof(log), "%s/relay.log", relay.dir);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(BATON_RELAY_BINARY, BATON_RELAY_BINARY, "--listen",
		      listen, "--data", relay.dir, "--log-level", "info",
		      activate ? "--activate" : NULL, (char *)NULL);
		_exit(127);
	}
	relay.pid = pid;
	for (int i = 0; i < 200; i++) {
		int status;
		cr_assert(waitpid(pid, &status, WNOHANG) == 0,
			  "baton-relay exited at start; see %s", log);
		if (port_open(relay.port))
			return;
		sleep_ms(50);
	}
	cr_assert_fail("baton-relay did not listen within 10 s; see %s", log);
}

/* Signal the relay this test started and reap it, within 10 s. */
static void relay_kill(int sig)
{
	if (relay.pid <= 0)
		return;
	kill(relay.pid, sig);
	for (int i = 0; i < 200; i++) {
		if (waitpid(relay.pid, NULL, WNOHANG) == relay.pid) {
			relay.pid = 0;
			return;
		}
		sleep_ms(50);
	}
	kill(relay.pid, SIGKILL);
	waitpid(relay.pid, NULL, 0);
	relay.pid = 0;
}

static void setup(void)
{
	baton_log_init(0, BATON_LOG_WARN);
	signal(SIGPIPE, SIG_IGN); /* as batond does (client.h) */
	snprintf(relay.dir, sizeof(relay.dir),
		 "/tmp/baton-relay-client-XXXXXX");
	cr_assert(mkdtemp(relay.dir) != NULL);
	relay.port = free_port();
	relay.pid = 0;
}

static void teardown(void)
{
	relay_kill(SIGKILL);
	const char *files[] = {"relay-state", "relay-state.tmp", "relay.lock",
			       "relay.log"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(relay.path, sizeof(relay.path), "%s/%s", relay.dir,
			 files[i]);
		unlink(relay.path);
	}
	rmdir(relay.dir);
}

/* ---- nodes ----------------------------------------------------------------
 */

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

static uv_loop_t *loop;
static struct test_node *all_nodes[MAX_SOURCES];
static size_t n_nodes;

static int node_index(const char *cluster, baton_node_id id)
{
	for (size_t i = 0; i < n_nodes; i++)
		if (all_nodes[i]->id == id &&
		    strcmp(all_nodes[i]->cluster, cluster) == 0)
			return (int)i;
	return -1;
}

static uint64_t incarnation_of(size_t index)
{
	return 0x1000 + index;
}

static void on_view(void *arg, uint64_t number,
		    const struct relay_view_node *nodes, size_t n)
{
	struct test_node *t = arg;
	cr_assert(number > t->view, "view %llu after %llu",
		  (unsigned long long)number, (unsigned long long)t->view);
	cr_assert(n <= 8);
	t->view = number;
	t->view_n = n;
	for (size_t i = 0; i < n; i++) {
		snprintf(t->nodes[i].cluster, sizeof(t->nodes[i].cluster), "%s",
			 nodes[i].cluster_id);
		t->nodes[i].id = nodes[i].node_id;
		t->nodes[i].incarnation = nodes[i].incarnation;
		snprintf(t->nodes[i].address, sizeof(t->nodes[i].address), "%s",
			 nodes[i].address);
		t->nodes[i].release = nodes[i].release;
		t->nodes[i].connected = nodes[i].connected;
	}
}

static void on_active(void *arg, bool active)
{
	struct test_node *t = arg;
	t->active = active;
}

/* A payload: {source index u8, multicast u8, number u64, filler...}. */
static void on_data(void *arg, const char *from_cluster, baton_node_id from,
		    uint64_t from_incarnation, bool multicast,
		    const uint8_t *payload, size_t len)
{
	struct test_node *t = arg;
	int src = node_index(from_cluster, from);
	if (src < 0 || len < 10 || payload[0] != src ||
	    payload[1] != multicast ||
	    from_incarnation != incarnation_of((size_t)src)) {
		t->errors++;
		return;
	}
	uint64_t number;
	memcpy(&number, payload + 2, 8);
	for (size_t i = 10; i < len; i++)
		if (payload[i] != (uint8_t)(number + i)) {
			t->errors++;
			return;
		}
	if (number != t->next[src][multicast]) {
		fprintf(stderr,
			"node %s/%llu: from %d %s got %llu, expected "
			"%llu\n",
			t->cluster, (unsigned long long)t->id, src,
			multicast ? "multicast" : "unicast",
			(unsigned long long)number,
			(unsigned long long)t->next[src][multicast]);
		t->errors++;
		return;
	}
	t->next[src][multicast]++;
}

static void node_start(struct test_node *t, const char *cluster,
		       baton_node_id id)
{
	memset(t, 0, sizeof(*t));
	t->cluster = cluster;
	t->id = id;
	all_nodes[n_nodes] = t;
	char relay_addr[64], address[64];
	snprintf(relay_addr, sizeof(relay_addr), "127.0.0.1:%d", relay.port);
	snprintf(address, sizeof(address), "127.0.0.1:%llu",
		 (unsigned long long)(7000 + n_nodes));
	struct relay_client_config cfg = {
		.relay_addr = relay_addr,
		.cluster_id = cluster,
		.node_id = id,
		.incarnation = incarnation_of(n_nodes),
		.release = {strcmp(cluster, "new") == 0 ? 2 : 1,
			    strcmp(cluster, "new") == 0 ? 0 : 3, 0},
		.address = address,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = 200,
	};
	n_nodes++;
	struct relay_client_callbacks cb = {.arg = t,
					    .on_view = on_view,
					    .on_active = on_active,
					    .on_data = on_data};
	cr_assert_eq(relay_client_start(loop, &cfg, &cb, &t->rc), 0);
}

static void on_closed(void *arg)
{
	struct test_node *t = arg;
	t->closed = true;
	t->rc = NULL;
}

static void node_close(struct test_node *t)
{
	if (t->rc != NULL)
		relay_client_close(t->rc, on_closed, t);
}

static void on_wake(uv_timer_t *t)
{
	(void)t;
}

/* Run the loop until pred(arg) holds, at most ms. */
static bool run_until(bool (*pred)(void *), void *arg, uint64_t ms)
{
	uv_timer_t wake;
	uv_timer_init(loop, &wake);
	uv_timer_start(&wake, on_wake, 10, 10);
	uv_update_time(loop);
	uint64_t deadline = uv_now(loop) + ms;
	while (!pred(arg) && uv_now(loop) < deadline)
		uv_run(loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&wake, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	return pred(arg);
}

static bool all_closed(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < n_nodes; i++)
		if (!all_nodes[i]->closed)
			return false;
	return true;
}

static void loop_setup(void)
{
	setup();
	loop = malloc(sizeof(*loop));
	cr_assert(loop != NULL && uv_loop_init(loop) == 0);
	n_nodes = 0;
}

/* Close every node, then the loop: every handle must be closed. */
static void finish(void)
{
	for (size_t i = 0; i < n_nodes; i++)
		node_close(all_nodes[i]);
	cr_assert(run_until(all_closed, NULL, 10000),
		  "relay_client_close did not finish within 10 s");
	cr_assert_eq(uv_loop_close(loop), 0, "a handle was left open");
	free(loop);
}

static bool view_complete(void *arg)
{
	size_t want = (size_t)(uintptr_t)arg;
	for (size_t i = 0; i < n_nodes; i++) {
		struct test_node *t = all_nodes[i];
		if (t->closed)
			continue;
		if (t->view_n != want)
			return false;
		for (size_t k = 0; k < t->view_n; k++)
			if (!t->nodes[k].connected)
				return false;
	}
	return true;
}

static bool all_active(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < n_nodes; i++)
		if (!all_nodes[i]->closed && !all_nodes[i]->active)
			return false;
	return true;
}

static bool none_active(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < n_nodes; i++)
		if (all_nodes[i]->active)
			return false;
	return true;
}

static void make_payload(uint8_t *buf, size_t len, size_t src, bool multicast,
			 uint64_t number)
{
	buf[0] = (uint8_t)src;
	buf[1] = multicast;
	memcpy(buf + 2, &number, 8);
	for (size_t i = 10; i < len; i++)
		buf[i] = (uint8_t)(number + i);
}

static size_t payload_len(uint64_t number)
{
	/* Mostly small, some large; one of 2 MiB. */
	if (number == 150)
		return 2u << 20;
	return 10 + (size_t)((number * 7919) % 3000);
}

/* ---- registration, views, activation ------------------------------------- */

TestSuite(relay_client, .init = loop_setup, .fini = teardown, .timeout = 120);

Test(relay_client, registers_views_and_activation)
{
	relay_start(false);
	struct test_node a, b, c;
	node_start(&a, "old", 1);
	node_start(&b, "old", 2);
	node_start(&c, "new", 1);
	cr_assert(run_until(view_complete, (void *)(uintptr_t)3, 10000),
		  "the three nodes did not all see a view of three");
	/* Sorted by cluster id then node id, this node included. */
	cr_assert_str_eq(a.nodes[0].cluster, "new");
	cr_assert_eq(a.nodes[0].id, 1);
	cr_assert_eq(a.nodes[0].incarnation, incarnation_of(2));
	cr_assert_str_eq(a.nodes[0].address, "127.0.0.1:7002");
	cr_assert_eq(a.nodes[0].release.major, 2);
	cr_assert_str_eq(a.nodes[1].cluster, "old");
	cr_assert_eq(a.nodes[1].id, 1);
	cr_assert_eq(a.nodes[1].release.minor, 3);
	cr_assert_str_eq(a.nodes[2].cluster, "old");
	cr_assert_eq(a.nodes[2].id, 2);
	cr_assert_eq(a.view, c.view);

	/* Registered, not active: nothing may be sent. */
	struct relay_client_status st;
	relay_client_status(a.rc, &st);
	cr_assert(st.connected && st.registered && !st.active);
	cr_assert_eq(st.view, a.view);
	uint8_t p[16] = {0};
	cr_assert_eq(relay_client_send(a.rc, "new", 1, p, sizeof(p)),
		     BATON_ESTATE);

	/* The relay's activation (SIGUSR1, docs/relay-server.md). */
	kill(relay.pid, SIGUSR1);
	cr_assert(run_until(all_active, NULL, 10000), "not activated");
	relay_client_status(a.rc, &st);
	cr_assert(st.active);
	cr_assert_eq(relay_client_send(a.rc, "new", 9, p, sizeof(p)),
		     BATON_EINVAL, "a node not in the view");
	cr_assert_eq(relay_client_send(a.rc, "old", 1, p, sizeof(p)),
		     BATON_EINVAL, "this node itself");
	cr_assert_eq(relay_client_send(a.rc, "new", 1, p,
				       BATON_RELAY_PAYLOAD_MAX + 1),
		     BATON_EINVAL, "above 8 MiB");

	/* DEACTIVATE reaches every node. */
	kill(relay.pid, SIGUSR2);
	cr_assert(run_until(none_active, NULL, 10000), "not deactivated");
	cr_assert_eq(relay_client_send(a.rc, "new", 1, p, sizeof(p)),
		     BATON_ESTATE);

	/* LEAVE: the others install a view without b. */
	node_close(&b);
	cr_assert(run_until(view_complete, (void *)(uintptr_t)2, 10000),
		  "no view without the node that left");
	cr_assert(b.closed);
	finish();
}

Test(relay_client, activated_by_flag_at_start)
{
	relay_start(true);
	struct test_node a, c;
	node_start(&a, "old", 1);
	node_start(&c, "new", 1);
	cr_assert(run_until(all_active, NULL, 10000),
		  "--activate: the nodes were not activated");
	cr_assert(view_complete((void *)(uintptr_t)2));
	finish();
}

/* ---- delivery -------------------------------------------------------------
 */

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

static void traffic_tick(uv_timer_t *timer)
{
	struct traffic *tr = timer->data;
	for (size_t i = 0; i < tr->n; i++) {
		struct flow *f = &tr->flows[i];
		struct test_node *t = all_nodes[f->src];
		for (uint64_t k = 0; k < tr->per_tick && f->queued < f->total;
		     k++) {
			size_t len = payload_len(f->queued);
			make_payload(tr->buf, len, f->src, f->node == 0,
				     f->queued);
			int rc = relay_client_send(t->rc, f->cluster, f->node,
						   tr->buf, len);
			/* Not active (the relay is down), a destination not
			 * back yet, a full queue: try again next tick. */
			if (rc == BATON_ESTATE || rc == BATON_EBUSY ||
			    rc == BATON_EINVAL)
				break;
			cr_assert_eq(rc, 0, "relay_client_send: %d", rc);
			f->queued++;
		}
	}
}

static void traffic_start(struct traffic *tr, uint64_t per_tick)
{
	tr->per_tick = per_tick;
	tr->buf = malloc(2u << 20);
	cr_assert(tr->buf != NULL);
	uv_timer_init(loop, &tr->timer);
	tr->timer.data = tr;
	uv_timer_start(&tr->timer, traffic_tick, 1, 2);
}

static void traffic_stop(struct traffic *tr)
{
	uv_close((uv_handle_t *)&tr->timer, NULL);
	free(tr->buf);
}

/* Delivered so far to node `to` from source `src` (kind multicast). */
static uint64_t got(size_t to, size_t src, bool multicast)
{
	return all_nodes[to]->next[src][multicast];
}

struct expect {
	size_t to, src;
	bool multicast;
	uint64_t count;
};

struct expectations {
	struct expect e[8];
	size_t n;
};

static bool delivered_and_drained(void *arg)
{
	const struct expectations *x = arg;
	for (size_t i = 0; i < x->n; i++)
		if (got(x->e[i].to, x->e[i].src, x->e[i].multicast) <
		    x->e[i].count)
			return false;
	for (size_t i = 0; i < n_nodes; i++) {
		struct relay_client_status st;
		relay_client_status(all_nodes[i]->rc, &st);
		if (st.queued_msgs != 0)
			return false;
	}
	return true;
}

static void check_exact(const struct expectations *x)
{
	for (size_t i = 0; i < x->n; i++)
		cr_assert_eq(got(x->e[i].to, x->e[i].src, x->e[i].multicast),
			     x->e[i].count,
			     "node %zu from %zu (%s): %llu delivered, %llu "
			     "sent",
			     x->e[i].to, x->e[i].src,
			     x->e[i].multicast ? "multicast" : "unicast",
			     (unsigned long long)got(x->e[i].to, x->e[i].src,
						     x->e[i].multicast),
			     (unsigned long long)x->e[i].count);
	for (size_t i = 0; i < n_nodes; i++) {
		cr_assert_eq(all_nodes[i]->errors, 0,
			     "node %zu saw a loss, duplicate or reorder", i);
		struct relay_client_status st;
		relay_client_status(all_nodes[i]->rc, &st);
		cr_assert_eq(st.queued_bytes, 0);
		cr_assert_eq(st.dropped, 0);
	}
}

Test(relay_client, unicast_and_multicast_in_order)
{
	relay_start(true);
	struct test_node o1, o2, n1;
	node_start(&o1, "old", 1); /* 0 */
	node_start(&o2, "old", 2); /* 1 */
	node_start(&n1, "new", 1); /* 2 */
	cr_assert(run_until(all_active, NULL, 10000));
	cr_assert(run_until(view_complete, (void *)(uintptr_t)3, 10000));
	struct traffic tr = {.n = 3};
	tr.flows[0] = (struct flow){
		.src = 0, .cluster = "new", .node = 1, .total = 300};
	tr.flows[1] = (struct flow){.src = 2, .cluster = "old", .total = 200};
	tr.flows[2] = (struct flow){.src = 1, .cluster = "old", .total = 100};
	traffic_start(&tr, 50);
	struct expectations x = {.n = 4};
	x.e[0] = (struct expect){.to = 2, .src = 0, .count = 300};
	x.e[1] = (struct expect){
		.to = 0, .src = 2, .multicast = true, .count = 200};
	x.e[2] = (struct expect){
		.to = 1, .src = 2, .multicast = true, .count = 200};
	x.e[3] = (struct expect){
		.to = 0, .src = 1, .multicast = true, .count = 100};
	cr_assert(run_until(delivered_and_drained, &x, 60000),
		  "not everything was delivered and acknowledged in 60 s");
	traffic_stop(&tr);
	check_exact(&x);
	/* A multicast does not come back to its source. */
	cr_assert_eq(got(1, 1, true), 0);
	struct relay_client_status st;
	relay_client_status(o1.rc, &st);
	cr_assert_eq(st.acked, 300);
	cr_assert_eq(st.received, 300);
	finish();
}

static bool delivered_at_least(void *arg)
{
	const struct expect *e = arg;
	return got(e->to, e->src, e->multicast) >= e->count;
}

Test(relay_client, relay_killed_and_restarted_mid_stream)
{
	relay_start(true);
	struct test_node o1, o2, n1;
	node_start(&o1, "old", 1); /* 0 */
	node_start(&o2, "old", 2); /* 1 */
	node_start(&n1, "new", 1); /* 2 */
	cr_assert(run_until(all_active, NULL, 10000));
	cr_assert(run_until(view_complete, (void *)(uintptr_t)3, 10000));
	uint64_t view_before = o1.view;
	struct traffic tr = {.n = 2};
	tr.flows[0] = (struct flow){
		.src = 0, .cluster = "new", .node = 1, .total = 1000};
	tr.flows[1] = (struct flow){.src = 2, .cluster = "old", .total = 500};
	traffic_start(&tr, 3);
	struct expect some = {.to = 2, .src = 0, .count = 300};
	cr_assert(run_until(delivered_at_least, &some, 30000));
	cr_assert_lt(got(2, 0, false), 1000, "all sent before the kill");

	relay_kill(SIGKILL);
	/* Let the clients notice and retry against nothing for a while. */
	run_until(all_closed, NULL, 300);
	relay_start(false); /* the state file keeps it active */

	struct expectations x = {.n = 3};
	x.e[0] = (struct expect){.to = 2, .src = 0, .count = 1000};
	x.e[1] = (struct expect){
		.to = 0, .src = 2, .multicast = true, .count = 500};
	x.e[2] = (struct expect){
		.to = 1, .src = 2, .multicast = true, .count = 500};
	cr_assert(run_until(delivered_and_drained, &x, 60000),
		  "not everything was delivered and acknowledged after the "
		  "restart: %llu, %llu, %llu",
		  (unsigned long long)got(2, 0, false),
		  (unsigned long long)got(0, 2, true),
		  (unsigned long long)got(1, 2, true));
	traffic_stop(&tr);
	check_exact(&x);
	for (size_t i = 0; i < n_nodes; i++) {
		struct relay_client_status st;
		relay_client_status(all_nodes[i]->rc, &st);
		cr_assert_geq(st.reconnects, 1, "node %zu did not reconnect",
			      i);
		cr_assert(st.active);
	}
	cr_assert_gt(o1.view, view_before, "view numbers went back");
	finish();
}

/* ---- a relay that is not one ----------------------------------------------
 */

struct fake_conn {
	uv_tcp_t tcp;
	int mode;
	uint8_t in[8192];
	size_t len;
	bool eof;
};

struct fake_relay {
	uv_tcp_t listener;
	struct fake_conn conns[16];
	int accepted;
};

static uint8_t *encode_to_node(const struct baton_relay_frame *f, size_t *len)
{
	struct baton_relay_err err;
	static uint8_t buf[4096];
	cr_assert_eq(baton_relay_encode(f, BATON_RELAY_TO_NODE, buf,
					sizeof(buf), len, &err),
		     0, "%s", err.text);
	uint8_t *copy = malloc(*len);
	memcpy(copy, buf, *len);
	return copy;
}

static void fake_written(uv_write_t *req, int status)
{
	(void)status;
	free(req->data);
	free(req);
}

static void fake_write(struct fake_conn *fc, uint8_t *bytes, size_t len)
{
	cr_assert(len > 0);
	uv_write_t *req = malloc(sizeof(*req));
	req->data = bytes;
	uv_buf_t b = uv_buf_init((char *)bytes, (unsigned)len);
	cr_assert_eq(
		uv_write(req, (uv_stream_t *)&fc->tcp, &b, 1, fake_written), 0);
}

static void fake_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
	(void)suggested;
	struct fake_conn *fc = h->data;
	*out = uv_buf_init((char *)fc->in + fc->len,
			   (unsigned)(sizeof(fc->in) - fc->len));
}

static void fake_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	(void)buf;
	struct fake_conn *fc = s->data;
	if (n < 0) {
		fc->eof = true;
		uv_close((uv_handle_t *)&fc->tcp, NULL);
		return;
	}
	fc->len += (size_t)n;
}

/* Mode 0: text; 1: a frame with a wrong checksum; 2: WELCOME, VIEW 5,
 * then VIEW 3 from the same relay incarnation; 3: a refused WELCOME;
 * 4: ERROR SHUTTING_DOWN. */
#define FAKE_MODES 5
static void fake_greet(struct fake_conn *fc)
{
	if (fc->mode == 0) {
		const char *junk = "HTTP/1.1 400 Bad Request\r\n\r\n";
		fake_write(fc, (uint8_t *)strdup(junk), strlen(junk));
		return;
	}
	size_t len;
	if (fc->mode == 1) {
		struct baton_relay_frame f = {.type = BATON_RELAY_ACTIVATE};
		uint8_t *bytes = encode_to_node(&f, &len);
		bytes[12] ^= 0x01;
		fake_write(fc, bytes, len);
		return;
	}
	if (fc->mode == 3 || fc->mode == 4) {
		struct baton_relay_frame f = {.type = BATON_RELAY_WELCOME};
		f.u.welcome.code = BATON_RELAY_EREFUSED;
		f.u.welcome.relay_incarnation = 77;
		f.u.welcome.reason = (struct baton_relay_str){"not today", 9};
		if (fc->mode == 4) {
			f.type = BATON_RELAY_ERROR;
			f.u.error.code = BATON_RELAY_ESHUTTING_DOWN;
			f.u.error.text =
				(struct baton_relay_str){"stopping", 8};
		}
		uint8_t *bytes = encode_to_node(&f, &len);
		fake_write(fc, bytes, len);
		return;
	}
	struct baton_relay_frame w = {.type = BATON_RELAY_WELCOME};
	w.u.welcome.relay_incarnation = 77;
	uint8_t *bytes = encode_to_node(&w, &len);
	fake_write(fc, bytes, len);
	struct baton_relay_node node = {
		.cluster_id = {"old", 3},
		.node_id = 1,
		.incarnation = incarnation_of(0),
		.release = {1, 3, 0},
		.address = {"127.0.0.1:7000", 14},
		.connected = true,
	};
	struct baton_relay_frame v = {.type = BATON_RELAY_VIEW};
	v.u.view.number = 5;
	v.u.view.node_count = 1;
	v.u.view.nodes = &node;
	bytes = encode_to_node(&v, &len);
	fake_write(fc, bytes, len);
	v.u.view.number = 3;
	bytes = encode_to_node(&v, &len);
	fake_write(fc, bytes, len);
}

static void fake_accept(uv_stream_t *listener, int status)
{
	struct fake_relay *fr = listener->data;
	if (status != 0 || fr->accepted == 16)
		return; /* enough seen: leave the rest pending */
	struct fake_conn *fc = &fr->conns[fr->accepted];
	fc->mode = fr->accepted % FAKE_MODES;
	fr->accepted++;
	uv_tcp_init(loop, &fc->tcp);
	fc->tcp.data = fc;
	cr_assert_eq(uv_accept(listener, (uv_stream_t *)&fc->tcp), 0);
	uv_read_start((uv_stream_t *)&fc->tcp, fake_alloc, fake_read);
	fake_greet(fc);
}

static bool all_modes_done(void *arg)
{
	struct fake_relay *fr = arg;
	for (int i = 0; i < FAKE_MODES; i++)
		if (i >= fr->accepted || !fr->conns[i].eof)
			return false;
	return true;
}

/* The ERROR code the client sent on fc, after its HELLO; 0 if none. */
static uint16_t error_sent(const struct fake_conn *fc)
{
	size_t off = 0;
	while (off < fc->len) {
		size_t frame_len, need;
		struct baton_relay_err err;
		struct baton_relay_frame f;
		if (baton_relay_split(fc->in + off, fc->len - off,
				      BATON_RELAY_TO_RELAY, &frame_len, &need,
				      &err) != 0 ||
		    baton_relay_decode(fc->in + off, frame_len,
				       BATON_RELAY_TO_RELAY, &f, &err) != 0)
			return 0;
		if (f.type == BATON_RELAY_ERROR)
			return f.u.error.code;
		cr_assert(off > 0 || f.type == BATON_RELAY_HELLO);
		off += frame_len;
	}
	return 0;
}

static void fake_closed(uv_handle_t *h)
{
	(void)h;
}

static void close_fake_conn(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, fake_closed);
}

Test(relay_client, refuses_a_relay_that_is_not_one)
{
	struct fake_relay fr = {0};
	uv_tcp_init(loop, &fr.listener);
	fr.listener.data = &fr;
	struct sockaddr_in sa;
	uv_ip4_addr("127.0.0.1", relay.port, &sa);
	cr_assert_eq(uv_tcp_bind(&fr.listener, (struct sockaddr *)&sa, 0), 0);
	cr_assert_eq(uv_listen((uv_stream_t *)&fr.listener, 16, fake_accept),
		     0);
	struct test_node a;
	node_start(&a, "old", 1);
	cr_assert(run_until(all_modes_done, &fr, 20000),
		  "the client did not close %d bad connections", FAKE_MODES);
	cr_assert_eq(error_sent(&fr.conns[0]), BATON_RELAY_EBAD_MAGIC);
	cr_assert_eq(error_sent(&fr.conns[1]), BATON_RELAY_ECHECKSUM);
	cr_assert_eq(error_sent(&fr.conns[2]), BATON_RELAY_EUNEXPECTED,
		     "VIEW 3 after VIEW 5 of the same relay incarnation");
	cr_assert_eq(a.view, 5, "VIEW 5 was installed, VIEW 3 was not");
	/* A refusal and an ERROR are not answered: HELLO only. */
	cr_assert_gt(fr.conns[3].len, 0);
	cr_assert_eq(error_sent(&fr.conns[3]), 0);
	cr_assert_gt(fr.conns[4].len, 0);
	cr_assert_eq(error_sent(&fr.conns[4]), 0);
	struct relay_client_status st;
	relay_client_status(a.rc, &st);
	cr_assert_geq(st.reconnects, FAKE_MODES - 1);
	cr_assert(!st.active && !st.registered);
	cr_assert(st.last_error[0] != '\0');
	node_close(&a);
	cr_assert(run_until(all_closed, NULL, 10000));
	uv_walk(loop, close_fake_conn, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(loop), 0);
	free(loop);
}
