/*
 * The transport's write coalescing on a real loop and loopback TCP: the
 * frames queued to one peer in a turn of the loop are written together at
 * its end, and what goes on the wire is exactly the frames one by one, in
 * order (mixed releases read it as before), a frame larger than the
 * coalescing bound included; a frame a timer queues goes out before the
 * loop waits; a connection that closes with frames still queued drops them
 * and the node dials and talks again.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "baton/buf.h"
#include "le.h"
#include "log.h"
#include "raw_peer.h"
#include "transport.h"
#include "transport_internal.h"

/* Frames sent in one turn (a follower's pipelined forwards). */
#define FRAMES 3000u
/* A reply bigger than the bound, sent amid them. */
#define BIG_REPLY_BYTES (BATON_TRANSPORT_COALESCE_MAX + 40000u)
#define BIG_AT 1234u

struct node {
	struct baton_transport *t;
	char addr[32];
	/* Request ids of the forward replies it heard, in order. */
	uint64_t *ids;
	uint32_t n_ids;
	size_t big_len; /* length of the reply of BIG_AT */
	bool big_intact;
	uint32_t downs;
};

static uv_loop_t loop;
/* Node id listens on ports[id] (ids 1 and 2; the raw peer is 7). */
static uint16_t ports[3];

static const struct baton_profile *release_2(void)
{
	const struct baton_profile *p =
		baton_release_find((struct baton_release){2, 0, 0});
	cr_assert_not_null(p, "release 2.0.0 in the table");
	return p;
}

static uint8_t big_byte(size_t i)
{
	return (uint8_t)('a' + i % 23);
}

static void on_frame(void *data, baton_node_id from,
		     const struct baton_peer_frame *f)
{
	struct node *n = data;
	(void)from;
	if (f->kind != BATON_PEER_FORWARD_REPLY)
		return;
	const struct baton_peer_forward_reply *r = &f->forward_reply;
	cr_assert_lt(n->n_ids, FRAMES);
	n->ids[n->n_ids++] = r->request_id;
	if (r->request_id == BIG_AT) {
		n->big_len = r->resp_len;
		n->big_intact = true;
		for (size_t i = 0; i < r->resp_len; i++)
			if (r->resp_reply[i] != big_byte(i))
				n->big_intact = false;
	}
}

static void on_peer_down(void *data, baton_node_id id)
{
	struct node *n = data;
	(void)id;
	n->downs++;
}

static void start(struct node *n, baton_node_id id)
{
	cr_assert(id < 3);
	snprintf(n->addr, sizeof n->addr, "127.0.0.1:%u", (unsigned)ports[id]);
	n->ids = calloc(FRAMES, sizeof *n->ids);
	cr_assert_not_null(n->ids);
	struct baton_transport_config c = {.loop = &loop,
					   .cluster_id = "test",
					   .id = id,
					   .profile = *release_2(),
					   .listen_addr = n->addr,
					   .on_frame = on_frame,
					   .data = n,
					   .peer_down = on_peer_down};
	cr_assert_eq(baton_transport_start(&c, &n->t), 0);
}

/* A port the kernel says is free now (others' tests share the host). */
static uint16_t free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof sa;
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void setup(void)
{
	baton_log_init(0, BATON_LOG_ERROR);
	/* As batond: a write to a closed socket is an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(uv_loop_init(&loop), 0);
	ports[1] = free_port();
	do
		ports[2] = free_port();
	while (ports[2] == ports[1]);
}

static void finish(struct node *a, struct node *b)
{
	baton_transport_stop(a->t);
	if (b != NULL)
		baton_transport_stop(b->t);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	free(a->ids);
	if (b != NULL)
		free(b->ids);
}

/* The i-th reply: small ones, and one of BIG_REPLY_BYTES at BIG_AT. */
static struct baton_peer_frame reply_frame(uint32_t i, const uint8_t *big)
{
	static const uint8_t ok[] = "+OK\r\n";
	struct baton_peer_frame f = {.kind = BATON_PEER_FORWARD_REPLY};
	f.forward_reply = (struct baton_peer_forward_reply){
		i, i == BIG_AT ? big : ok,
		i == BIG_AT ? BIG_REPLY_BYTES : sizeof ok - 1, NULL};
	return f;
}

static uint8_t *big_reply(void)
{
	uint8_t *big = malloc(BIG_REPLY_BYTES);
	cr_assert_not_null(big);
	for (size_t i = 0; i < BIG_REPLY_BYTES; i++)
		big[i] = big_byte(i);
	return big;
}

/* Queue every reply from a to node `to` in this one turn of the loop. */
static void send_all(struct node *a, baton_node_id to, const uint8_t *big)
{
	for (uint32_t i = 1; i < FRAMES; i++) {
		struct baton_peer_frame f = reply_frame(i, big);
		cr_assert_eq(baton_transport_send_frame(a->t, to, &f), 0,
			     "frame %u", i);
	}
}

/* Node b dials a; both sides ready, or 5 s. */
static bool connects(struct node *a, struct node *b, baton_node_id a_id,
		     baton_node_id b_id)
{
	cr_assert_eq(baton_transport_set_peer(b->t, a_id, a->addr), 0);
	for (int i = 0; i < 500; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		if (baton_transport_peer_proto(b->t, a_id).value != 0 &&
		    baton_transport_peer_proto(a->t, b_id).value != 0)
			return true;
		usleep(10000);
	}
	return false;
}

Test(transport_batch, frames_of_one_turn_arrive_whole_and_in_order,
     .init = setup)
{
	struct node a = {0}, b = {0};
	start(&a, 1);
	start(&b, 2);
	cr_assert(connects(&a, &b, 1, 2));
	uint8_t *big = big_reply();
	send_all(&a, 2, big);
	for (int i = 0; i < 1000 && b.n_ids < FRAMES - 1; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(5000);
	}
	cr_assert_eq(b.n_ids, FRAMES - 1);
	for (uint32_t i = 0; i < b.n_ids; i++)
		cr_assert_eq(b.ids[i], i + 1, "frame %u came as %llu", i + 1,
			     (unsigned long long)b.ids[i]);
	cr_assert_eq(b.big_len, BIG_REPLY_BYTES);
	cr_assert(b.big_intact);
	struct baton_transport_stats sa, sb;
	baton_transport_stats(a.t, &sa);
	baton_transport_stats(b.t, &sb);
	cr_assert_eq(sa.dropped, 0);
	cr_assert_eq(sa.frames_out, FRAMES - 1);
	cr_assert_eq(sb.frames_in, FRAMES - 1);
	cr_assert_eq(sb.bad_frames + sb.malformed + sb.bad_checksums, 0);
	free(big);
	finish(&a, &b);
}

/* Read exactly len bytes from fd (blocking, with a timeout). */
static bool read_exactly(int fd, uint8_t *out, size_t len)
{
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	size_t got = 0;
	while (got < len) {
		ssize_t n = recv(fd, out + got, len - got, 0);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/* A hand-made peer (node 7) on a raw socket, connected and ready. */
static int raw_peer(struct node *a)
{
	int fd = raw_peer_connect(ports[1], release_2());
	for (int i = 0;
	     i < 500 && baton_transport_peer_proto(a->t, 7).value == 0; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
	}
	cr_assert_eq(baton_transport_peer_proto(a->t, 7).value, 4);
	/* The handshake reply, unsealed: its length, then its body. */
	uint8_t prefix[BATON_PEER_PREFIX_LEN];
	cr_assert(read_exactly(fd, prefix, sizeof prefix));
	size_t len = baton_le_get_u32(prefix);
	uint8_t *body = malloc(len);
	cr_assert_not_null(body);
	cr_assert(read_exactly(fd, body, len));
	free(body);
	return fd;
}

/* The bytes on the wire are the frames encoded one by one, in order. */
Test(transport_batch, the_wire_carries_the_same_frames, .init = setup)
{
	struct node a = {0};
	start(&a, 1);
	int fd = raw_peer(&a);
	uint8_t *big = big_reply();
	struct baton_buf want;
	baton_buf_init(&want);
	for (uint32_t i = 1; i < FRAMES; i++) {
		struct baton_peer_frame f = reply_frame(i, big);
		cr_assert_eq(
			baton_peer_encode_frame((struct baton_proto_version){4},
						&f, &want),
			0);
	}
	send_all(&a, 7, big);
	/* The loop writes; the socket's buffer holds less than all of it, so
	 * read as it comes. */
	uint8_t *got = malloc(want.len);
	cr_assert_not_null(got);
	size_t have = 0;
	for (int i = 0; i < 2000 && have < want.len; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		ssize_t n = recv(fd, got + have, want.len - have, MSG_DONTWAIT);
		if (n > 0)
			have += (size_t)n;
		else
			usleep(2000);
	}
	cr_assert_eq(have, want.len);
	cr_assert(memcmp(got, want.data, want.len) == 0);
	free(got);
	free(big);
	baton_buf_free(&want);
	close(fd);
	finish(&a, NULL);
}

struct timed_send {
	struct node *from;
	bool sent;		 /* the timer queued its frame */
	bool checked;		 /* the check phase of that turn came */
	size_t pending_at_check; /* bytes still pending then */
};

static void on_send_timer(uv_timer_t *t)
{
	struct timed_send *ts = t->data;
	struct baton_peer_frame f = reply_frame(1, NULL);
	cr_assert_eq(baton_transport_send_frame(ts->from->t, 2, &f), 0);
	ts->sent = true;
}

/* Started after the transport's own check handle, so libuv runs it
 * first: it sees what the loop did before it polled. */
static void on_test_check(uv_check_t *h)
{
	struct timed_send *ts = h->data;
	if (!ts->sent || ts->checked)
		return;
	ts->checked = true;
	for (struct conn *c = ts->from->t->all; c != NULL; c = c->all_next)
		ts->pending_at_check += c->pending.len;
}

/* A frame a timer queues is written before the loop waits in poll (and
 * so before any later timer could wake it), not after. */
Test(transport_batch, a_frame_a_timer_queues_goes_before_the_loop_waits,
     .init = setup)
{
	struct node a = {0}, b = {0};
	start(&a, 1);
	start(&b, 2);
	cr_assert(connects(&a, &b, 1, 2));
	struct timed_send ts = {.from = &a};
	uv_timer_t send;
	uv_check_t check;
	uv_timer_init(&loop, &send);
	uv_check_init(&loop, &check);
	send.data = check.data = &ts;
	uv_check_start(&check, on_test_check);
	uv_timer_start(&send, on_send_timer, 0, 0);
	for (int i = 0; i < 500 && b.n_ids == 0; i++)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert(ts.checked);
	cr_assert_eq(ts.pending_at_check, 0,
		     "the frame still waited when the loop had polled");
	cr_assert_eq(b.n_ids, 1);
	uv_close((uv_handle_t *)&send, NULL);
	uv_close((uv_handle_t *)&check, NULL);
	finish(&a, &b);
}

/* Frames queued to a peer whose connection then closes are dropped with
 * it; the node stays up, sees the peer down, and talks to it again on a
 * new connection. */
Test(transport_batch, a_connection_closing_with_frames_queued, .init = setup)
{
	struct node a = {0};
	start(&a, 1);
	int fd = raw_peer(&a);
	/* Gone before the loop writes them. The big frame is written at
	 * once (past the bound): the connection may close under the sends
	 * that follow, which then find no connection. */
	close(fd);
	uint8_t *big = big_reply();
	uint32_t queued = 0;
	for (uint32_t i = 1; i < FRAMES; i++) {
		struct baton_peer_frame f = reply_frame(i, big);
		int rv = baton_transport_send_frame(a.t, 7, &f);
		cr_assert(rv == 0 || rv == BATON_ENOTFOUND, "frame %u: %d", i,
			  rv);
		queued += rv == 0;
	}
	cr_assert_gt(queued, 0);
	free(big);
	struct baton_transport_stats st = {0};
	for (int i = 0; i < 500; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		baton_transport_stats(a.t, &st);
		if (st.connected_peers == 0 && a.downs > 0)
			break;
		usleep(10000);
	}
	cr_assert_eq(st.connected_peers, 0);
	cr_assert_eq(a.downs, 1);
	fd = raw_peer(&a);
	struct baton_peer_frame f = reply_frame(1, NULL);
	cr_assert_eq(baton_transport_send_frame(a.t, 7, &f), 0);
	struct baton_buf want;
	baton_buf_init(&want);
	cr_assert_eq(baton_peer_encode_frame((struct baton_proto_version){4},
					     &f, &want),
		     0);
	uint8_t got[64];
	cr_assert_lt(want.len, sizeof got);
	size_t have = 0;
	for (int i = 0; i < 500 && have < want.len; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		ssize_t n = recv(fd, got + have, want.len - have, MSG_DONTWAIT);
		if (n > 0)
			have += (size_t)n;
		else
			usleep(10000);
	}
	cr_assert_eq(have, want.len);
	cr_assert(memcmp(got, want.data, want.len) == 0);
	baton_buf_free(&want);
	close(fd);
	finish(&a, NULL);
}
