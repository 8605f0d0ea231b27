/*
 * The peer transport on a real loop and loopback TCP: the cluster view in
 * the handshake reply read by a probe, a join from a node no configuration
 * knows answered on the connection it opened, strict release refusing a
 * mixed peer on either side, with the reason on both, and peer
 * authentication (same secret, another one, one on one side only; the
 * proofs' known answers; the limit before a handshake), and peer protocol
 * 4: release 2.0.0 and 1.x refusing each other, and a frame whose checksum
 * differs closing the link before anything decodes it.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "raw_peer.h"
#include "transport.h"
#include "transport_internal.h"

struct node {
	struct baton_transport *t;
	char addr[32];
	/* What it saw. */
	int joins, join_replies;
	struct baton_peer_join join;
	baton_node_id join_from;
	bool join_reply_accepted;
	char join_reply_reason[64];
	bool view;				/* give a cluster view */
	const struct baton_peer_secret *secret; /* NULL: none */
	/* The release it runs, when not 1.<minor>.0 (start()'s). */
	const struct baton_profile *profile;
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
	struct baton_transport_config c = {
		.loop = &loop,
		.cluster_id = "test",
		.id = id,
		.profile = n->profile != NULL ? *n->profile
					      : release_profile(minor),
		.listen_addr = n->addr,
		.on_frame = on_frame,
		.cluster_view = give_view,
		.data = n,
		.strict_release = strict,
		.secret = n->secret};
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
	/* Below Linux's ephemeral range (32768 and up), where connections
	 * of other tests running beside this one take ports at random. */
	port_base = (uint16_t)(20000 + (getpid() % 1200) * 10);
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

/* ---- peer authentication ------------------------------------------------ */

static struct baton_peer_secret secret_of(const char *text)
{
	struct baton_peer_secret s = {0};
	s.len = strlen(text);
	cr_assert_geq(s.len, BATON_PEER_SECRET_MIN);
	memcpy(s.bytes, text, s.len);
	return s;
}

/* Run the loop until b's connection to a is up, or 5 s. */
static bool connects(struct node *a, struct node *b)
{
	cr_assert_eq(baton_transport_set_peer(b->t, 1, a->addr), 0);
	for (int i = 0; i < 500; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		if (baton_transport_peer_proto(b->t, 1).value != 0 &&
		    baton_transport_peer_proto(a->t, 7).value != 0)
			return true;
		usleep(10000);
	}
	return false;
}

Test(transport, auth_with_the_same_secret_connects, .init = setup)
{
	struct baton_peer_secret s =
		secret_of("a cluster secret of 32 bytes..");
	struct node a = {.view = true, .secret = &s}, b = {.secret = &s};
	start(&a, 1, 2, false);
	start(&b, 7, 2, false);
	/* A probe reads the view, which rides on a's proof. */
	struct probe_result p = {0};
	cr_assert_eq(baton_transport_probe(b.t, a.addr, on_probe, &p), 0);
	run_until(&p.done);
	cr_assert_eq(p.rv, 0, "%s", p.reason);
	cr_assert(p.accepted && p.has_cluster);
	cr_assert(connects(&a, &b));
	/* Frames flow both ways once both proofs were checked. */
	struct baton_peer_frame j = {.kind = BATON_PEER_JOIN};
	j.join = (struct baton_peer_join){.node_id = 7,
					  .peer_addr = b.addr,
					  .profile = release_profile(2)};
	cr_assert_eq(baton_transport_send_frame(b.t, 1, &j), 0);
	bool replied = false;
	for (int i = 0; i < 500 && !replied; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		replied = b.join_replies > 0;
	}
	cr_assert(replied);
	struct baton_transport_stats sa, sb;
	baton_transport_stats(a.t, &sa);
	baton_transport_stats(b.t, &sb);
	cr_assert_eq(sa.auth_failed + sb.auth_failed, 0);
	stop(&a, &b);
}

/* b dials a, whose secrets differ (or one has none): no connection, both
 * count the failure, and a probe from b says why. */
static void auth_refused(const struct baton_peer_secret *sa_secret,
			 const struct baton_peer_secret *sb_secret)
{
	struct node a = {.view = true, .secret = sa_secret};
	struct node b = {.secret = sb_secret};
	start(&a, 1, 2, false);
	start(&b, 7, 2, false);
	struct probe_result p = {0};
	cr_assert_eq(baton_transport_probe(b.t, a.addr, on_probe, &p), 0);
	run_until(&p.done);
	cr_assert(strstr(p.reason, "peer authentication failed") != NULL,
		  "probe: %d %s", p.rv, p.reason);
	cr_assert_not(p.rv == 0 && p.accepted);
	cr_assert_not(p.has_cluster, "no view without a valid proof");
	cr_assert_eq(baton_transport_set_peer(b.t, 1, a.addr), 0);
	struct baton_transport_stats sa, sb;
	bool both = false;
	for (int i = 0; i < 500 && !both; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		baton_transport_stats(a.t, &sa);
		baton_transport_stats(b.t, &sb);
		both = sa.refused >= 2 && sb.refused >= 2 &&
		       sa.auth_failed + sb.auth_failed >= 2;
	}
	cr_assert(both, "refused: a %llu, b %llu",
		  (unsigned long long)sa.refused,
		  (unsigned long long)sb.refused);
	cr_assert_eq(baton_transport_peer_proto(b.t, 1).value, 0);
	cr_assert_eq(baton_transport_peer_proto(a.t, 7).value, 0);
	cr_assert_eq(sa.n_peers, 0, "no slot for an unproven node");
	stop(&a, &b);
}

Test(transport, auth_refuses_another_secret, .init = setup)
{
	struct baton_peer_secret s1 = secret_of("the first cluster's secret");
	struct baton_peer_secret s2 = secret_of("the second cluster's secret");
	auth_refused(&s1, &s2);
}

Test(transport, auth_refuses_a_dialler_without_the_secret, .init = setup)
{
	struct baton_peer_secret s = secret_of("only the acceptor has it");
	auth_refused(&s, NULL);
}

Test(transport, auth_refuses_an_acceptor_without_the_secret, .init = setup)
{
	struct baton_peer_secret s = secret_of("only the dialler has it");
	auth_refused(NULL, &s);
}

/* The proofs are what docs/peer-protocol.md says, byte for byte (the
 * expected values come from Python's hmac over the documented input), and
 * so is a forward's client proof. */
Test(transport, auth_known_answers)
{
	struct baton_peer_secret s = secret_of("0123456789abcdef");
	uint8_t nd[BATON_PEER_AUTH_NONCE_LEN], na[BATON_PEER_AUTH_NONCE_LEN];
	for (uint8_t i = 0; i < BATON_PEER_AUTH_NONCE_LEN; i++) {
		nd[i] = i;
		na[i] = (uint8_t)(0x40 + i);
	}
	static const uint8_t acceptor[32] = {
		0xbb, 0xd9, 0xcc, 0x3c, 0x85, 0x47, 0x86, 0xaf,
		0x5a, 0xec, 0x67, 0x93, 0x27, 0x0b, 0xe0, 0x2c,
		0x09, 0x8f, 0x74, 0xe0, 0x3e, 0x2f, 0xc9, 0xd5,
		0xf0, 0xc0, 0x01, 0x3b, 0x6e, 0xf6, 0xfe, 0x2a};
	static const uint8_t dialler[32] = {
		0x23, 0x08, 0x2a, 0x03, 0x89, 0x95, 0xe8, 0x0d,
		0xa4, 0xc4, 0x45, 0x72, 0x76, 0x62, 0xc1, 0xe9,
		0xe6, 0xd5, 0x98, 0x5d, 0x6e, 0xff, 0x48, 0xbf,
		0x8a, 0x3a, 0xf8, 0x2e, 0x5e, 0xf5, 0x31, 0x3c};
	uint8_t mac[BATON_PEER_AUTH_MAC_LEN];
	baton__transport_auth_mac(&s, BATON__AUTH_ACCEPTOR, "test", 7, 1, nd,
				  na, mac);
	cr_assert_eq(memcmp(mac, acceptor, sizeof mac), 0);
	baton__transport_auth_mac(&s, BATON__AUTH_DIALLER, "test", 7, 1, nd, na,
				  mac);
	cr_assert_eq(memcmp(mac, dialler, sizeof mac), 0);
	cr_assert(baton_equal_secret(mac, dialler, sizeof mac));
	cr_assert_not(baton_equal_secret(mac, acceptor, sizeof mac));
	static const uint8_t proof_pw[32] = {
		0x75, 0x64, 0xfb, 0x79, 0x23, 0x82, 0x73, 0x1e,
		0x47, 0xe2, 0x7c, 0xfa, 0xfa, 0x57, 0xb7, 0x26,
		0xe5, 0x7e, 0xe8, 0x1c, 0x53, 0x7d, 0x83, 0x82,
		0x70, 0xa2, 0x9b, 0xfc, 0xfa, 0x5a, 0x8c, 0xb1};
	baton_client_auth_proof("pw", mac);
	cr_assert_eq(memcmp(mac, proof_pw, sizeof mac), 0);
}

/* Before its handshake a connection may announce only a small frame: a
 * larger length prefix closes it at once, before anything is buffered. */
Test(transport, oversized_frame_before_the_handshake_closes, .init = setup)
{
	struct node a = {0};
	start(&a, 1, 2, false);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)(port_base + 1))};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	uint8_t prefix[4] = {0x01, 0x00, 0x01, 0x00}; /* 64 KiB + 1 */
	cr_assert_eq(write(fd, prefix, sizeof prefix), 4);
	struct baton_transport_stats st = {0};
	for (int i = 0; i < 500 && st.malformed == 0; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		baton_transport_stats(a.t, &st);
	}
	cr_assert_eq(st.malformed, 1);
	close(fd);
	baton_transport_stop(a.t);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* ---- peer protocol 4 (release 2.0.0) ---------------------------------------
 */

static const struct baton_profile *release_2(void)
{
	const struct baton_profile *p =
		baton_release_find((struct baton_release){2, 0, 0});
	cr_assert_not_null(p, "release 2.0.0 in the table");
	return p;
}

/* A probe from `from` to `to`: the refusal's reason. */
static void probe_refused(struct node *from, struct node *to, const char *want)
{
	struct probe_result p = {0};
	cr_assert_eq(baton_transport_probe(from->t, to->addr, on_probe, &p), 0);
	run_until(&p.done);
	cr_assert_eq(p.rv, 0, "%s", p.reason);
	cr_assert_not(p.accepted);
	cr_assert_str_eq(p.reason, want);
}

Test(transport, release_2_and_1_x_refuse_each_other_at_the_handshake,
     .init = setup)
{
	struct node a = {.view = true, .profile = release_2()}, b = {0};
	start(&a, 1, 0, false);
	start(&b, 7, 3, false);
	/* The acceptor names the ranges from its side and the way across. */
	probe_refused(&b, &a,
		      "no common peer protocol (ours 4-4, theirs 2-3): upgrade "
		      "through the relay, docs/relay.md");
	probe_refused(&a, &b,
		      "no common peer protocol (ours 2-3, theirs 4-4): upgrade "
		      "through the relay, docs/relay.md");
	/* Both dial: every attempt is refused on both sides, no link. */
	cr_assert_eq(baton_transport_set_peer(b.t, 1, a.addr), 0);
	cr_assert_eq(baton_transport_set_peer(a.t, 7, b.addr), 0);
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
	cr_assert_eq(sa.connected_peers + sb.connected_peers, 0);
	stop(&a, &b);
}

/* Two 2.0.0 nodes speak 4, with a secret (the proof goes before the
 * checksummed frames) and without; frames flow both ways. */
static void two_release_2_nodes(const struct baton_peer_secret *secret)
{
	struct node a = {.profile = release_2(), .secret = secret};
	struct node b = {.profile = release_2(), .secret = secret};
	start(&a, 1, 0, false);
	start(&b, 7, 0, false);
	cr_assert(connects(&a, &b));
	cr_assert_eq(baton_transport_peer_proto(b.t, 1).value, 4);
	cr_assert_eq(baton_transport_peer_proto(a.t, 7).value, 4);
	struct baton_peer_frame j = {.kind = BATON_PEER_JOIN};
	j.join = (struct baton_peer_join){
		.node_id = 7, .peer_addr = b.addr, .profile = *release_2()};
	cr_assert_eq(baton_transport_send_frame(b.t, 1, &j), 0);
	bool replied = false;
	for (int i = 0; i < 500 && !replied; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		replied = b.join_replies > 0;
	}
	cr_assert(replied);
	cr_assert_eq(a.joins, 1);
	cr_assert_str_eq(b.join_reply_reason, "not today");
	struct baton_transport_stats sa, sb;
	baton_transport_stats(a.t, &sa);
	baton_transport_stats(b.t, &sb);
	cr_assert_eq(sa.malformed + sb.malformed + sa.bad_frames +
			     sb.bad_frames + sa.bad_checksums +
			     sb.bad_checksums,
		     0);
	stop(&a, &b);
}

Test(transport, two_release_2_nodes_speak_4, .init = setup)
{
	two_release_2_nodes(NULL);
}

Test(transport, two_release_2_nodes_speak_4_with_a_secret, .init = setup)
{
	struct baton_peer_secret s =
		secret_of("a cluster secret of 32 bytes..");
	two_release_2_nodes(&s);
}

/* Whether the socket's peer closed it (EOF), reading away what came. */
static bool closed_by_peer(int fd)
{
	uint8_t buf[4096];
	ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
	return n == 0;
}

/* A hand-made 2.0.0 peer on a raw socket: its first frame of protocol 4
 * arrives and is heard; the next, one bit of it flipped on the way, is
 * refused by its checksum: the connection closes, nothing of it decoded,
 * and the transport counts it. */
Test(transport, a_frame_whose_checksum_differs_closes_the_link, .init = setup)
{
	struct node a = {.profile = release_2()};
	start(&a, 1, 0, false);
	int fd = raw_peer_connect((uint16_t)(port_base + 1), release_2());
	struct baton_transport_stats st = {0};
	for (int i = 0; i < 500 && st.connected_peers == 0; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		baton_transport_stats(a.t, &st);
	}
	cr_assert_eq(st.connected_peers, 1);
	cr_assert_eq(baton_transport_peer_proto(a.t, 7).value, 4);
	/* A join in protocol 4's envelope: heard. */
	struct baton_peer_join j = {.node_id = 7,
				    .peer_addr = "127.0.0.1:1",
				    .profile = *release_2()};
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(
		baton_peer_encode_join((struct baton_proto_version){4}, &j, &b),
		0);
	cr_assert_eq(write(fd, b.data, b.len), (ssize_t)b.len);
	for (int i = 0; i < 500 && a.joins == 0; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
	}
	cr_assert_eq(a.joins, 1);
	/* The same frame with one bit of its envelope flipped. */
	b.data[BATON_PEER_PREFIX_LEN + 3] ^= 0x10;
	cr_assert_eq(write(fd, b.data, b.len), (ssize_t)b.len);
	bool closed = false;
	for (int i = 0; i < 500 && !closed; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
		baton_transport_stats(a.t, &st);
		closed = st.bad_checksums == 1 && closed_by_peer(fd);
	}
	cr_assert(closed, "bad checksums %llu",
		  (unsigned long long)st.bad_checksums);
	cr_assert_eq(a.joins, 1, "the damaged frame was decoded");
	cr_assert_eq(st.malformed, 1);
	cr_assert_eq(st.bad_frames, 0);
	cr_assert_eq(baton_transport_peer_proto(a.t, 7).value, 0);
	baton_buf_free(&b);
	close(fd);
	baton_transport_stop(a.t);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}
