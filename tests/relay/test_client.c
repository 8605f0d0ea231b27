/*
 * The node-side relay client (src/relay/client*.c) against the real
 * baton-relay binary of the same build, on 127.0.0.1 (client_fixture.h):
 * registration and the global view of two clusters, activation by the
 * relay's flag and signal, unicast and multicast delivered in order, and a
 * fake relay that sends junk or breaks the protocol refused with the right
 * ERROR. The relay killed and restarted mid-stream is in
 * test_client_restart.c. Every wait is bounded; only the relay PID a test
 * started is signalled.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "baton/errors.h"
#include "client_fixture.h"
#include "protocol.h"

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

Test(relay_client, unicast_and_multicast_in_order)
{
	relay_start(true);
	struct test_node o1, o2, n1;
	start_three(&o1, &o2, &n1);
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
