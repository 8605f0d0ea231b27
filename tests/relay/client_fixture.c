/*
 * The fixture of the node-side relay client's tests (client_fixture.h):
 * the real baton-relay binary of the same build started on 127.0.0.1,
 * test nodes that check every payload delivered, and traffic driven
 * between them. Every wait is bounded; only the relay PID a test started
 * is signalled.
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
#include "client_fixture.h"

/* ---- the relay process ----------------------------------------------------
 */

struct relay_proc relay; /* the one this test started */
const char *relay_extra_flag;
const struct baton_peer_secret *node_relay_secret;

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

void relay_start(bool activate)
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
		const char *extra = relay_extra_flag;
		const char *act = activate ? "--activate" : NULL;
		execl(BATON_RELAY_BINARY, BATON_RELAY_BINARY, "--listen",
		      listen, "--data", relay.dir, "--log-level", "info",
		      extra != NULL ? extra : act, extra != NULL ? act : NULL,
		      (char *)NULL);
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
void relay_kill(int sig)
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
	relay_extra_flag = NULL;
}

void teardown(void)
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

uv_loop_t *loop;
struct test_node *all_nodes[MAX_SOURCES];
size_t n_nodes;

static int node_index(const char *cluster, baton_node_id id)
{
	for (size_t i = 0; i < n_nodes; i++)
		if (all_nodes[i]->id == id &&
		    strcmp(all_nodes[i]->cluster, cluster) == 0)
			return (int)i;
	return -1;
}

uint64_t incarnation_of(size_t index)
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

void node_start(struct test_node *t, const char *cluster, baton_node_id id)
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
		.secret = node_relay_secret,
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

void node_close(struct test_node *t)
{
	if (t->rc != NULL)
		relay_client_close(t->rc, on_closed, t);
}

static void on_wake(uv_timer_t *t)
{
	(void)t;
}

/* Run the loop until pred(arg) holds, at most ms. */
bool run_until(bool (*pred)(void *), void *arg, uint64_t ms)
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

bool all_closed(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < n_nodes; i++)
		if (!all_nodes[i]->closed)
			return false;
	return true;
}

void loop_setup(void)
{
	setup();
	loop = malloc(sizeof(*loop));
	cr_assert(loop != NULL && uv_loop_init(loop) == 0);
	n_nodes = 0;
}

/* Close every node, then the loop: every handle must be closed. */
void finish(void)
{
	for (size_t i = 0; i < n_nodes; i++)
		node_close(all_nodes[i]);
	cr_assert(run_until(all_closed, NULL, 10000),
		  "relay_client_close did not finish within 10 s");
	cr_assert_eq(uv_loop_close(loop), 0, "a handle was left open");
	free(loop);
}

bool view_complete(void *arg)
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

bool all_active(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < n_nodes; i++)
		if (!all_nodes[i]->closed && !all_nodes[i]->active)
			return false;
	return true;
}

void start_three(struct test_node *o1, struct test_node *o2,
		 struct test_node *n1)
{
	node_start(o1, "old", 1);
	node_start(o2, "old", 2);
	node_start(n1, "new", 1);
	cr_assert(run_until(all_active, NULL, 10000));
	cr_assert(run_until(view_complete, (void *)(uintptr_t)3, 10000));
}

bool none_active(void *arg)
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

/* ---- delivery -------------------------------------------------------------
 */

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

void traffic_start(struct traffic *tr, uint64_t per_tick)
{
	tr->per_tick = per_tick;
	tr->buf = malloc(2u << 20);
	cr_assert(tr->buf != NULL);
	uv_timer_init(loop, &tr->timer);
	tr->timer.data = tr;
	uv_timer_start(&tr->timer, traffic_tick, 1, 2);
}

void traffic_stop(struct traffic *tr)
{
	uv_close((uv_handle_t *)&tr->timer, NULL);
	free(tr->buf);
}

/* Delivered so far to node `to` from source `src` (kind multicast). */
uint64_t got(size_t to, size_t src, bool multicast)
{
	return all_nodes[to]->next[src][multicast];
}

bool delivered_and_drained(void *arg)
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

void check_exact(const struct expectations *x)
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

bool delivered_at_least(void *arg)
{
	const struct expect *e = arg;
	return got(e->to, e->src, e->multicast) >= e->count;
}
