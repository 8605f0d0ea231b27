/*
 * The peer transport on a real loop and loopback TCP: the cluster view in
 * the handshake reply read by a probe, a join from a node no configuration
 * knows answered on the connection it opened, and strict release refusing
 * a mixed peer on either side, with the reason on both.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "transport.h"

struct node {
	struct baton_transport *t;
	char addr[32];
	/* What it saw. */
	int joins, join_replies;
	struct baton_peer_join join;
	baton_node_id join_from;
	bool join_reply_accepted;
	char join_reply_reason[64];
	bool view; /* give a cluster view */
};

struct probe_result {
	bool done;
	int rv;
	bool accepted, has_cluster;
	char reason[BATON_PEER_REFUSAL_MAX];
	struct baton_peer_cluster_view view;
	char leader_addr[32];
	baton_node_id self_id;
};

static uv_loop_t loop;
static uint16_t port_base;

static struct baton_profile release_profile(uint16_t minor)
{
	struct baton_release r = {1, minor, 0};
	const struct baton_profile *p = baton_release_find(r);
	cr_assert_not_null(p, "release 1.%u.0 in the table", minor);
	return *p;
}

static void on_frame(void *data, baton_node_id from,
		     const struct baton_peer_frame *f)
{
	struct node *n = data;
	if (f->kind == BATON_PEER_JOIN) {
		n->joins++;
		n->join_from = from;
		n->join = f->join;
		/* Answer on the joiner's own connection. */
		struct baton_peer_frame r = {.kind = BATON_PEER_JOIN_REPLY};
		r.join_reply = (struct baton_peer_join_reply){
			.accepted = false,
			.reason = "not today",
			.leader_id = 1,
			.leader_peer_addr = n->addr,
			.leader = release_profile(2)};
		cr_assert_eq(baton_transport_send_frame(n->t, from, &r), 0);
	} else if (f->kind == BATON_PEER_JOIN_REPLY) {
		n->join_replies++;
		n->join_reply_accepted = f->join_reply.accepted;
		snprintf(n->join_reply_reason, sizeof n->join_reply_reason,
			 "%s", f->join_reply.reason);
	}
}

static bool give_view(void *data, struct baton_peer_cluster_view *out)
{
	struct node *n = data;
	if (!n->view)
		return false;
	out->leader_id = 1;
	out->leader_peer_addr = n->addr;
	baton_version_state_initial(&out->versions);
	out->versions.machine.value = 2;
	out->versions.n = 1;
	out->versions.members[0].id = 1;
	out->versions.members[0].profile = release_profile(2);
	return true;
}

/* Node id listens on port_base + slot (a test's ports are port_base + 0..9). */
static void start_at(struct node *n, baton_node_id id, uint16_t slot,
		     uint16_t minor, bool strict)
{
	cr_assert_lt(slot, 10);
	snprintf(n->addr, sizeof n->addr, "127.0.0.1:%u",
		 (unsigned)(port_base + slot));
	struct baton_transport_config c = {.loop = &loop,
					   .cluster_id = "test",
					   .id = id,
					   .profile = release_profile(minor),
					   .listen_addr = n->addr,
					   .on_frame = on_frame,
					   .cluster_view = give_view,
					   .data = n,
					   .strict_release = strict};
	cr_assert_eq(baton_transport_start(&c, &n->t), 0);
}

static void start(struct node *n, baton_node_id id, uint16_t minor, bool strict)
{
	start_at(n, id, (uint16_t)id, minor, strict);
}

/* Run the loop until *flag or 5 s. */
static void run_until(const bool *flag)
{
	for (int i = 0; i < 500 && !*flag; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
	}
	cr_assert(*flag, "timed out");
}

static void stop(struct node *a, struct node *b)
{
	baton_transport_stop(a->t);
	baton_transport_stop(b->t);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

static void setup(void)
{
	baton_log_init(0, BATON_LOG_ERROR);
	cr_assert_eq(uv_loop_init(&loop), 0);
	port_base = (uint16_t)(20000 + (getpid() % 2000) * 10);
}

static void on_probe(void *data, const char *addr, int rv, const char *why,
		     const struct baton_peer_handshake_reply *r)
{
	struct probe_result *p = data;
	(void)addr;
	p->rv = rv;
	if (rv == 0) {
		p->accepted = r->accepted;
		p->self_id = r->self.node_id;
		snprintf(p->reason, sizeof p->reason, "%s", r->reason);
		p->has_cluster = r->has_cluster;
		if (r->has_cluster) {
			p->view = r->cluster;
			snprintf(p->leader_addr, sizeof p->leader_addr, "%s",
				 r->cluster.leader_peer_addr);
		}
	} else {
		snprintf(p->reason, sizeof p->reason, "%s", why);
	}
	p->done = true;
}

Test(transport, probe_reads_the_view_and_a_joiner_gets_its_reply, .init = setup)
{
	struct node a = {.view = true}, b = {0};
	start(&a, 1, 2, false);
	start(&b, 7, 1, false); /* 1.1.0 joining a 1.2.0 node: protocol 2 */

	struct probe_result p = {0};
	cr_assert_eq(baton_transport_probe(b.t, a.addr, on_probe, &p), 0);
	run_until(&p.done);
	cr_assert_eq(p.rv, 0, "%s", p.reason);
	cr_assert(p.accepted);
	cr_assert_eq(p.self_id, 1);
	cr_assert(p.has_cluster);
	cr_assert_eq(p.view.leader_id, 1);
	cr_assert_str_eq(p.leader_addr, a.addr);
	cr_assert_eq(p.view.versions.machine.value, 2);
	cr_assert_eq(p.view.versions.n, 1);
	cr_assert_eq(p.view.strict_release.minor, 0, "not strict");

	/* The joiner dials the leader, which knows no node 7. */
	cr_assert_eq(baton_transport_set_peer(b.t, 1, a.addr), 0);
	bool up = false;
	for (int i = 0; i < 500 && !up; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		up = baton_transport_peer_proto(b.t, 1).value != 0;
	}
	cr_assert(up);
	cr_assert_eq(baton_transport_peer_proto(b.t, 1).value, 2);
	struct baton_peer_frame j = {.kind = BATON_PEER_JOIN};
	j.join = (struct baton_peer_join){.node_id = 7,
					  .peer_addr = b.addr,
					  .client_addr = "127.0.0.1:6379",
					  .profile = release_profile(1)};
	cr_assert_eq(baton_transport_send_frame(b.t, 1, &j), 0);
	bool replied = false;
	for (int i = 0; i < 500 && !replied; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		replied = b.join_replies > 0;
	}
	cr_assert(replied);
	cr_assert_eq(a.joins, 1);
	cr_assert_eq(a.join_from, 7);
	cr_assert_eq(a.join.node_id, 7);
	cr_assert_not(b.join_reply_accepted);
	cr_assert_str_eq(b.join_reply_reason, "not today");
	stop(&a, &b);
}

Test(transport, no_view_from_a_node_without_one_and_failed_probes,
     .init = setup)
{
	struct node a = {.view = false}, b = {0};
	start(&a, 1, 2, false);
	start(&b, 7, 2, false);
	struct probe_result p = {0};
	cr_assert_eq(baton_transport_probe(b.t, a.addr, on_probe, &p), 0);
	run_until(&p.done);
	cr_assert_eq(p.rv, 0);
	cr_assert(p.accepted);
	cr_assert_not(p.has_cluster);
	/* Nobody listening: the probe says so. */
	struct probe_result q = {0};
	char nobody[32];
	snprintf(nobody, sizeof nobody, "127.0.0.1:%u",
		 (unsigned)(port_base + 9));
	cr_assert_eq(baton_transport_probe(b.t, nobody, on_probe, &q), 0);
	run_until(&q.done);
	cr_assert_eq(q.rv, BATON_EIO);
	cr_assert_eq(baton_transport_probe(b.t, "nonsense", on_probe, &q),
		     BATON_EINVAL);
	stop(&a, &b);
}

/* b (release 1.minor_b, strict_b) dials a (1.2.0, strict_a): both refuse
 * counts go up and no connection comes up. */
static void mixed(bool strict_a, bool strict_b)
{
	struct node a = {.view = true}, b = {0};
	start(&a, 1, 2, strict_a);
	start(&b, 7, 1, strict_b);
	if (strict_a) {
		/* A probe shows the refusal, and the view says strict. */
		struct probe_result p = {0};
		cr_assert_eq(baton_transport_probe(b.t, a.addr, on_probe, &p),
			     0);
		run_until(&p.done);
		cr_assert_eq(p.rv, 0);
		cr_assert_not(p.accepted);
		cr_assert_str_eq(p.reason,
				 "strict release: node 1 runs release 1.2.0, "
				 "node 7 runs release 1.1.0, and mixed "
				 "releases are refused");
		cr_assert(p.has_cluster);
		cr_assert_eq(p.view.strict_release.minor, 2);
	}
	cr_assert_eq(baton_transport_set_peer(b.t, 1, a.addr), 0);
	struct baton_transport_stats sa, sb;
	bool both = false;
	for (int i = 0; i < 500 && !both; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		baton_transport_stats(a.t, &sa);
		baton_transport_stats(b.t, &sb);
		both = sa.refused >= 2 && sb.refused >= 2;
	}
	cr_assert(both, "refused: a %llu, b %llu",
		  (unsigned long long)sa.refused,
		  (unsigned long long)sb.refused);
	cr_assert_eq(baton_transport_peer_proto(b.t, 1).value, 0);
	cr_assert_eq(baton_transport_peer_proto(a.t, 7).value, 0);
	stop(&a, &b);
}

Test(transport, strict_acceptor_refuses_a_mixed_peer, .init = setup)
{
	mixed(true, false);
}

Test(transport, strict_dialler_refuses_a_mixed_peer, .init = setup)
{
	mixed(false, true);
}

Test(transport, strict_release_with_the_same_release_connects, .init = setup)
{
	struct node a = {0}, b = {0};
	start(&a, 1, 2, true);
	start(&b, 7, 2, true);
	cr_assert_eq(baton_transport_set_peer(b.t, 1, a.addr), 0);
	bool up = false;
	for (int i = 0; i < 500 && !up; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		up = baton_transport_peer_proto(b.t, 1).value == 3;
	}
	cr_assert(up);
	stop(&a, &b);
}

/* Nodes a transport never dials (joiners, or anyone who reached the port)
 * hold a peer slot only while connected: more of them than there are
 * slots, one after the other, still leave room for the next. */
Test(transport, slots_of_unknown_nodes_are_freed_when_they_leave, .init = setup)
{
	struct node a = {.view = true};
	start(&a, 1, 2, false);
	for (baton_node_id id = 100; id < 100 + BATON_TRANSPORT_PEERS_MAX + 8;
	     id++) {
		struct node b = {0};
		/* Ports in turn: a closed listener may linger a moment. */
		start_at(&b, id, (uint16_t)(2 + id % 8), 2, false);
		cr_assert_eq(baton_transport_set_peer(b.t, 1, a.addr), 0);
		bool up = false;
		for (int i = 0; i < 500 && !up; i++) {
			uv_run(&loop, UV_RUN_NOWAIT);
			usleep(1000);
			up = baton_transport_peer_proto(b.t, 1).value != 0;
		}
		cr_assert(up, "node %llu connected", (unsigned long long)id);
		baton_transport_stop(b.t);
		/* Let a see the connection close. */
		struct baton_transport_stats st;
		for (int i = 0; i < 500; i++) {
			uv_run(&loop, UV_RUN_NOWAIT);
			baton_transport_stats(a.t, &st);
			if (st.n_peers == 0)
				break;
			usleep(1000);
		}
		cr_assert_eq(st.n_peers, 0, "node %llu's slot was freed",
			     (unsigned long long)id);
	}
	cr_assert_eq(a.joins, 0);
	baton_transport_stop(a.t);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}
