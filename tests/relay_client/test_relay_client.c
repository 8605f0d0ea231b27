/*
 * The node-side relay client (src/io/relay_client.c) against the real
 * baton-relay of this build, on 127.0.0.1 and a port the test picks: views
 * and activation, unicast and multicast in order, nothing lost and
 * nothing repeated across a relay killed (-9) and restarted on the same
 * port and data directory, and a peer that is no relay refused without
 * harm. Every loop is bounded in time; the relay process is always killed
 * and reaped.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baton/errors.h"
#include "log.h"
#include "relay_client.h"

#define MSGS 1000u
#define KILL_AFTER 300u

static uv_loop_t loop;
static pid_t relay_pid;
static int relay_port;
static char relay_data[] = "/tmp/baton-relay-client-XXXXXX";
static char relay_addr[64];

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	socklen_t len = sizeof sa;
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void relay_start(void)
{
	relay_pid = fork();
	cr_assert(relay_pid >= 0);
	if (relay_pid == 0) {
		execl(BATON_RELAY_BIN, "baton-relay", "--listen", relay_addr,
		      "--data", relay_data, "--activate", "--log-level",
		      "warn", (char *)NULL);
		_exit(127);
	}
}

static void relay_kill(void)
{
	if (relay_pid > 0) {
		kill(relay_pid, SIGKILL);
		waitpid(relay_pid, NULL, 0);
		relay_pid = 0;
	}
}

static void setup(void)
{
	baton_log_init(0, BATON_LOG_WARN);
	cr_assert(mkdtemp(relay_data) != NULL);
	relay_port = free_port();
	snprintf(relay_addr, sizeof relay_addr, "127.0.0.1:%d", relay_port);
	relay_start();
	uv_loop_init(&loop);
}

static void on_closed(uv_handle_t *h)
{
	(void)h;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, on_closed);
}

static void teardown(void)
{
	relay_kill();
	uv_walk(&loop, close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", relay_data);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", relay_data);
	strcpy(relay_data, "/tmp/baton-relay-client-XXXXXX");
}

/* One test node: a client and what it saw. */
struct node {
	struct relay_client *c;
	const char *cluster;
	baton_node_id id;
	bool active;
	size_t view_nodes;
	uint32_t got;	      /* messages received, in order */
	uint32_t bad;	      /* out of order or repeated */
	uint32_t from_killed; /* got when the relay was killed */
};

static void on_view(void *arg, uint64_t number,
		    const struct relay_view_node *nodes, size_t n)
{
	struct node *t = arg;
	(void)number;
	(void)nodes;
	t->view_nodes = n;
}

static void on_active(void *arg, bool active)
{
	struct node *t = arg;
	t->active = active;
}

static void on_data(void *arg, const char *from_cluster, baton_node_id from,
		    uint64_t inc, bool multicast, const uint8_t *payload,
		    size_t len)
{
	struct node *t = arg;
	(void)from_cluster;
	(void)from;
	(void)inc;
	(void)multicast;
	uint32_t k;
	if (len != sizeof k) {
		t->bad++;
		return;
	}
	memcpy(&k, payload, sizeof k);
	if (k != t->got)
		t->bad++;
	else
		t->got++;
}

static void start(struct node *t, const char *cluster, baton_node_id id)
{
	t->cluster = cluster;
	t->id = id;
	struct relay_client_config cfg = {
		.relay_addr = relay_addr,
		.cluster_id = cluster,
		.node_id = id,
		.incarnation = 1000 + id,
		.release = {2, 0, 0},
		.address = "127.0.0.1:1",
		.reconnect_min_ms = 20,
		.reconnect_max_ms = 200,
	};
	struct relay_client_callbacks cb = {t, on_view, on_active, on_data};
	cr_assert_eq(relay_client_start(&loop, &cfg, &cb, &t->c), 0);
}

/* Run the loop until done(arg) or `ms` pass; true if done. */
static bool run_until(bool (*done)(void *), void *arg, uint64_t ms)
{
	uint64_t end = uv_now(&loop) + ms;
	while (!done(arg) && uv_now(&loop) < end) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
		uv_update_time(&loop);
	}
	return done(arg);
}

struct pair {
	struct node *a, *b;
	size_t view;
};

static bool both_active(void *arg)
{
	struct pair *p = arg;
	return p->a->active && p->b->active && p->a->view_nodes >= p->view &&
	       p->b->view_nodes >= p->view;
}

static void close_node(struct node *t)
{
	relay_client_close(t->c, NULL, NULL);
}

Test(relay_client, unicast_survives_a_relay_restart_in_order_without_repeats,
     .init = setup, .fini = teardown, .timeout = 60)
{
	struct node a = {0}, b = {0};
	start(&a, "old", 1);
	start(&b, "new", 1);
	struct pair p = {&a, &b, 2};
	cr_assert(run_until(both_active, &p, 10000), "not both active");
	/* Not active: nothing is queued. */
	cr_assert_eq(relay_client_send(a.c, "new", 99, (uint8_t *)"x", 1),
		     BATON_EINVAL); /* no such node in the view */
	uint32_t sent = 0;
	bool killed = false;
	uint64_t end = uv_now(&loop) + 40000;
	while (b.got < MSGS && uv_now(&loop) < end) {
		while (sent < MSGS && a.active) {
			int rv = relay_client_send(a.c, "new", 1,
						   (uint8_t *)&sent,
						   sizeof sent);
			if (rv != 0) {
				cr_assert(rv == BATON_EBUSY ||
					  rv == BATON_ESTATE,
					  "send: %d", rv);
				break;
			}
			sent++;
			if (sent % 50 == 0)
				break; /* let the loop deliver some */
		}
		if (!killed && b.got >= KILL_AFTER) {
			relay_kill();
			usleep(200 * 1000);
			relay_start();
			killed = true;
			b.from_killed = b.got;
		}
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(500);
		uv_update_time(&loop);
	}
	cr_assert(killed, "the relay was never killed");
	cr_assert_eq(b.bad, 0, "%u messages out of order or repeated", b.bad);
	cr_assert_eq(b.got, MSGS, "%u of %u delivered (%u before the kill)",
		     b.got, MSGS, b.from_killed);
	struct relay_client_status st;
	relay_client_status(a.c, &st);
	cr_assert(st.reconnects >= 1);
	close_node(&a);
	close_node(&b);
}

struct three {
	struct node *a, *b, *c;
};

static bool all_got(void *arg)
{
	struct three *t = arg;
	return t->b->got == 100 && t->c->got == 100;
}

static bool three_active(void *arg)
{
	struct three *t = arg;
	return t->a->active && t->b->active && t->c->active &&
	       t->a->view_nodes >= 3;
}

Test(relay_client, multicast_reaches_every_other_node_of_the_cluster,
     .init = setup, .fini = teardown, .timeout = 60)
{
	struct node a = {0}, b = {0}, c = {0};
	start(&a, "old", 1);
	start(&b, "new", 1);
	start(&c, "new", 2);
	struct three t = {&a, &b, &c};
	cr_assert(run_until(three_active, &t, 10000), "not all active");
	for (uint32_t k = 0; k < 100; k++)
		cr_assert_eq(relay_client_send(a.c, "new", 0, (uint8_t *)&k,
					       sizeof k),
			     0);
	cr_assert(run_until(all_got, &t, 20000), "b got %u, c got %u", b.got,
		  c.got);
	cr_assert_eq(b.bad + c.bad, 0);
	close_node(&a);
	close_node(&b);
	close_node(&c);
}

/* A peer that is no relay: it answers every connection with junk. */
static uv_tcp_t junk_server;
static void on_junk_written(uv_write_t *w, int status)
{
	(void)status;
	free(w);
}
static void on_junk_conn(uv_stream_t *server, int status)
{
	cr_assert_eq(status, 0);
	uv_tcp_t *conn = malloc(sizeof *conn);
	uv_tcp_init(&loop, conn);
	if (uv_accept(server, (uv_stream_t *)conn) != 0)
		return;
	static char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\nnot a relay";
	uv_write_t *w = malloc(sizeof *w);
	uv_buf_t b = uv_buf_init(junk, sizeof junk - 1);
	uv_write(w, (uv_stream_t *)conn, &b, 1, on_junk_written);
}

struct junk_wait {
	struct node *t;
};
static bool refused(void *arg)
{
	struct junk_wait *j = arg;
	struct relay_client_status st;
	relay_client_status(j->t->c, &st);
	return st.reconnects >= 2 && st.last_error[0] != '\0';
}

Test(relay_client, a_peer_that_is_no_relay_is_refused_and_retried,
     .init = setup, .fini = teardown, .timeout = 60)
{
	relay_kill();
	uv_tcp_init(&loop, &junk_server);
	struct sockaddr_in sa;
	uv_ip4_addr("127.0.0.1", relay_port, &sa);
	cr_assert_eq(uv_tcp_bind(&junk_server, (struct sockaddr *)&sa, 0), 0);
	cr_assert_eq(uv_listen((uv_stream_t *)&junk_server, 16, on_junk_conn),
		     0);
	struct node a = {0};
	start(&a, "old", 1);
	struct junk_wait j = {&a};
	bool ok = run_until(refused, &j, 10000);
	struct relay_client_status st;
	relay_client_status(a.c, &st);
	cr_assert(ok, "never refused the junk: %" PRIu64 " reconnects, '%s'",
		  st.reconnects, st.last_error);
	cr_assert(!a.active);
	cr_assert_eq(relay_client_send(a.c, "new", 0, (uint8_t *)"x", 1),
		     BATON_ESTATE);
	close_node(&a);
}
