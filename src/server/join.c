/*
 * Active join (DESIGN.md, "Join"; docs/batond.md, "Joining"): both sides
 * decide.
 *
 * The joiner (--join-seeds) reads the cluster's versions from the frozen
 * handshake reply of a seed (baton_node_probe: any release answers it
 * alike), runs baton_join_check() on them itself and, when it may join,
 * sends a JoinRequest to the leader the seed named. When it may not, or the
 * leader refuses, it logs why (the versions on both sides) and tries again
 * after a jittered back-off growing from 1-2 s to 15-30 s, until it is a
 * voter or an operator stops it.
 *
 * The leader runs baton_join_check() again against its log's version facts
 * (and its own release when strict), then proposes the joiner's addresses,
 * adds it as a learner and promotes it once it caught up, and answers
 * JoinReply{accepted}; or answers with the reason and its versions. A join
 * already under way for the same node is not started twice: the reply
 * comes when it is done.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "log.h"
#include "server.h"

#define JOIN_BACKOFF_MIN_MS 1000u
#define JOIN_BACKOFF_MAX_MS 15000u /* the delay is this to twice this */
#define JOIN_SEND_TIMEOUT_MS 5000u /* connecting to the leader */
#define JOIN_REPLY_TIMEOUT_MS 120000u
#define JOIN_POLL_MS 200u
#define JOIN_REDIRECTS_MAX 3u
/* Leader side: joins under way at once, and how long one may take. */
#define JOIN_PENDING_MAX 8u
#define JOIN_PENDING_TIMEOUT_MS 110000u
#define JOIN_PROMOTE_RETRY_MS 500u
#define JOIN_WHY_MAX 1024u

enum joiner_phase {
	JOINER_OFF,	/* not joining (a member, or no seeds) */
	JOINER_BACKOFF, /* waiting to try again */
	JOINER_PROBING, /* reading a seed's handshake reply */
	JOINER_SENDING, /* connecting to the leader to send the request */
	JOINER_WAITING, /* the request went out; waiting for the reply */
};

enum pending_step {
	PENDING_FREE,
	PENDING_ADDRESS, /* the address entry is proposed */
	PENDING_LEARNER, /* adding as a learner */
	PENDING_RETRY,	 /* promotion to retry on the next timer */
	PENDING_PROMOTE, /* promoting */
};

struct pending_join {
	struct join *j;
	enum pending_step step;
	baton_node_id id;
	char peer[BATON_ADDR_MAX];
	char client[BATON_ADDR_MAX];
	uint64_t deadline_ms;
	uint64_t retry_at_ms;
};

struct join {
	struct server *s;
	uv_timer_t timer;
	/* The server is stopping: callbacks that the node fails as it
	 * closes only free their slot. */
	bool closing;
	/* The joiner. */
	enum joiner_phase phase;
	uint32_t next_seed;
	uint32_t backoff_ms;
	uint32_t redirects;
	uint64_t phase_deadline_ms;
	baton_node_id target; /* the node we ask */
	char target_addr[BATON_ADDR_MAX];
	uint64_t rng;
	/* The leader. */
	struct pending_join pending[JOIN_PENDING_MAX];
};

static uint64_t now_ms(const struct join *j)
{
	return uv_now(j->s->loop);
}

static bool is_member(struct server *s, baton_node_id id, bool voter_only)
{
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	const struct baton_member *m = baton_config_find(&st.raft.config, id);
	return m != NULL && (!voter_only || m->role == BATON_VOTER);
}

/* "release 1.1.0, protocol 1-2, machine_max 2" */
static const char *profile_text(const struct baton_profile *p, char *buf,
				size_t cap)
{
	char r[BATON_RELEASE_STR_MAX];
	snprintf(buf, cap, "release %s, protocol %u-%u, machine_max %u",
		 baton_release_format(p->release, r), p->proto_min.value,
		 p->proto_max.value, p->machine_max.value);
	return buf;
}

/* ---- the joiner ---------------------------------------------------------- */

static void joiner_step(struct join *j);

static uint32_t jitter(struct join *j, uint32_t below)
{
	/* xorshift64: the back-off needs spread, not strength. */
	j->rng ^= j->rng << 13;
	j->rng ^= j->rng >> 7;
	j->rng ^= j->rng << 17;
	return below > 0 ? (uint32_t)(j->rng % below) : 0;
}

/* Stop talking to a node we only dialled to join (not a member). */
static void drop_target(struct join *j)
{
	if (j->target != 0 && !is_member(j->s, j->target, false))
		baton_node_forget_peer(j->s->node, j->target);
	j->target = 0;
}

/* Log why this attempt ends, and try again after a jittered back-off. */
static void retry_later(struct join *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void retry_later(struct join *j, const char *fmt, ...)
{
	char why[JOIN_WHY_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	drop_target(j);
	uint32_t delay = j->backoff_ms + jitter(j, j->backoff_ms);
	LOG_WARN("join: %s; trying again in %.1f s", why, delay / 1000.0);
	j->backoff_ms = j->backoff_ms * 2 > JOIN_BACKOFF_MAX_MS
				? JOIN_BACKOFF_MAX_MS
				: j->backoff_ms * 2;
	j->phase = JOINER_BACKOFF;
	j->phase_deadline_ms = now_ms(j) + delay;
}

static void joined(struct join *j, const char *how)
{
	LOG_INFO("join: %s", how);
	j->phase = JOINER_OFF;
	j->target = 0;
	j->backoff_ms = JOIN_BACKOFF_MIN_MS;
}

static int send_request(struct join *j)
{
	const struct server_config *c = &j->s->cfg;
	struct baton_peer_frame f = {.kind = BATON_PEER_JOIN};
	f.join = (struct baton_peer_join){
		.node_id = c->id,
		.peer_addr = c->peer_listen,
		.client_addr = c->listen,
		.profile = c->profile,
	};
	return baton_node_send_frame(j->s->node, j->target, &f);
}

/* Ask node `id` at `addr` (the leader, as far as we know). */
static void ask(struct join *j, baton_node_id id, const char *addr)
{
	if (j->target != id)
		drop_target(j);
	j->target = id;
	snprintf(j->target_addr, sizeof j->target_addr, "%s", addr);
	baton_node_set_peer_addr(j->s->node, id, addr);
	j->phase = JOINER_SENDING;
	j->phase_deadline_ms = now_ms(j) + JOIN_SEND_TIMEOUT_MS;
	joiner_step(j);
}

static void on_probe(void *data, const char *addr, int rv, const char *why,
		     const struct baton_peer_handshake_reply *r)
{
	struct join *j = data;
	if (j->phase != JOINER_PROBING)
		return;
	if (rv != 0) {
		retry_later(j, "cannot read the versions of seed %s: %s", addr,
			    why != NULL ? why : baton_strerror(rv));
		return;
	}
	const struct server_config *c = &j->s->cfg;
	char seed[256], mine[256], reason[JOIN_WHY_MAX];
	profile_text(&r->self.profile, seed, sizeof seed);
	profile_text(&c->profile, mine, sizeof mine);
	if (!r->has_cluster) {
		/* A release that does not show its cluster: the handshake
		 * alone says whether we can talk; the leader decides the
		 * rest. */
		if (!r->accepted) {
			retry_later(j,
				    "seed %s (node %" PRIu64
				    ", %s) refused us (%s): %s",
				    addr, r->self.node_id, seed, mine,
				    r->reason);
			return;
		}
		ask(j, r->self.node_id, addr);
		return;
	}
	const struct baton_peer_cluster_view *v = &r->cluster;
	bool strict = v->strict_release.major || v->strict_release.minor ||
		      v->strict_release.patch;
	if (baton_join_check(&v->versions, c->id, &c->profile,
			     strict ? &v->strict_release : NULL, reason,
			     sizeof reason) != 0) {
		retry_later(j,
			    "not asking to join: %s (as seed %s, node %" PRIu64
			    ", tells; this node runs %s)",
			    reason, addr, r->self.node_id, mine);
		return;
	}
	if (!r->accepted) {
		retry_later(j, "seed %s (node %" PRIu64 ", %s) refused us: %s",
			    addr, r->self.node_id, seed, r->reason);
		return;
	}
	if (v->leader_id == 0 || v->leader_id == c->id) {
		retry_later(j, "seed %s (node %" PRIu64 ") knows no leader",
			    addr, r->self.node_id);
		return;
	}
	const char *leader_addr = v->leader_peer_addr;
	if (leader_addr == NULL || leader_addr[0] == '\0')
		leader_addr = v->leader_id == r->self.node_id ? addr : NULL;
	if (leader_addr == NULL) {
		retry_later(j,
			    "seed %s knows leader node %" PRIu64
			    " but not its address",
			    addr, v->leader_id);
		return;
	}
	j->redirects = 0;
	ask(j, v->leader_id, leader_addr);
}

static void probe_next_seed(struct join *j)
{
	const struct server_config *c = &j->s->cfg;
	const char *seed = c->seeds[j->next_seed++ % c->n_seeds];
	j->phase = JOINER_PROBING;
	j->phase_deadline_ms = now_ms(j) + JOIN_REPLY_TIMEOUT_MS;
	int rv = baton_node_probe(j->s->node, seed, on_probe, j);
	if (rv != 0 && j->phase == JOINER_PROBING)
		retry_later(j, "cannot dial seed %s: %s", seed,
			    baton_strerror(rv));
}

/* Runs on the timer (and after each change): moves the joiner on. */
static void joiner_step(struct join *j)
{
	if (j->phase == JOINER_OFF)
		return;
	if (is_member(j->s, j->s->cfg.id, true)) {
		joined(j, "this node is a voter of the cluster now");
		return;
	}
	uint64_t now = now_ms(j);
	switch (j->phase) {
	case JOINER_BACKOFF:
		if (now >= j->phase_deadline_ms)
			probe_next_seed(j);
		break;
	case JOINER_PROBING:
		/* The probe answers within the transport's handshake
		 * timeout; this only guards against losing it. */
		if (now >= j->phase_deadline_ms)
			retry_later(j, "no answer from the seed");
		break;
	case JOINER_SENDING: {
		int rv = send_request(j);
		if (rv == 0) {
			char r[BATON_RELEASE_STR_MAX];
			LOG_INFO("join: asking leader node %" PRIu64
				 " at %s to add this node (release %s)",
				 j->target, j->target_addr,
				 baton_release_format(j->s->cfg.profile.release,
						      r));
			j->phase = JOINER_WAITING;
			j->phase_deadline_ms = now + JOIN_REPLY_TIMEOUT_MS;
		} else if (rv != BATON_ENOTFOUND ||
			   now >= j->phase_deadline_ms) {
			retry_later(j,
				    "cannot send the request to node %" PRIu64
				    " at %s: %s",
				    j->target, j->target_addr,
				    rv == BATON_ENOTFOUND ? "not connected"
							  : baton_strerror(rv));
		}
		break;
	}
	case JOINER_WAITING:
		if (now >= j->phase_deadline_ms)
			retry_later(j,
				    "node %" PRIu64
				    " did not answer within %u s",
				    j->target, JOIN_REPLY_TIMEOUT_MS / 1000);
		break;
	case JOINER_OFF:
		break;
	}
}

static void on_reply(struct join *j, baton_node_id from,
		     const struct baton_peer_join_reply *r)
{
	if (j->phase != JOINER_WAITING || from != j->target) {
		LOG_DEBUG("join: ignoring a join reply from node %" PRIu64,
			  from);
		return;
	}
	if (r->accepted) {
		struct baton_node_status st;
		baton_node_status(j->s->node, &st);
		if (st.raft.last_index == 0 && st.raft.snapshot_index == 0) {
			/* A joiner is promoted only once it caught up, so a
			 * voter with an empty log lost its data directory:
			 * its lost votes and entries could let a quorum
			 * forget acknowledged writes. */
			LOG_ERROR("join: node %" PRIu64 " says this node (id "
				  "%" PRIu64 ") is a voter of the cluster "
				  "already, but its data directory %s is "
				  "empty: it lost the data it had "
				  "acknowledged, and may not come back under "
				  "its id (or another node runs with --id "
				  "%" PRIu64 "). Stopping. Replace it: start a "
				  "node on an empty directory with a new --id, "
				  "then `batonctl remove %" PRIu64 "` "
				  "(docs/operations.md, \"Replacing a failed "
				  "node\")",
				  from, j->s->cfg.id, j->s->cfg.data_dir,
				  j->s->cfg.id, j->s->cfg.id);
			j->phase = JOINER_OFF;
			server_stop(j->s, SERVER_EXIT_REFUSED);
			return;
		}
		char how[128];
		snprintf(how, sizeof how,
			 "node %" PRIu64 " added this node as a voter", from);
		joined(j, how);
		return;
	}
	char leader[256];
	profile_text(&r->leader, leader, sizeof leader);
	/* A node that no longer leads names the one that does. */
	if (r->leader_id != 0 && r->leader_id != from &&
	    r->leader_id != j->s->cfg.id && r->leader_peer_addr != NULL &&
	    r->leader_peer_addr[0] != '\0' &&
	    j->redirects < JOIN_REDIRECTS_MAX) {
		LOG_INFO("join: node %" PRIu64 " says node %" PRIu64
			 " at %s leads (%s)",
			 from, r->leader_id, r->leader_peer_addr, r->reason);
		j->redirects++;
		ask(j, r->leader_id, r->leader_peer_addr);
		return;
	}
	char mine[256];
	retry_later(j, "node %" PRIu64 " (%s) refused this node (%s): %s", from,
		    leader, profile_text(&j->s->cfg.profile, mine, sizeof mine),
		    r->reason);
}

/* ---- the leader ---------------------------------------------------------- */

static void send_reply(struct server *s, baton_node_id to, bool accepted,
		       const char *reason)
{
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	baton_node_id leader = st.raft.leader_id;
	const struct book_entry *e =
		leader != 0 ? server_address(s, leader) : NULL;
	struct baton_peer_frame f = {.kind = BATON_PEER_JOIN_REPLY};
	f.join_reply = (struct baton_peer_join_reply){
		.accepted = accepted,
		.reason = reason,
		.leader_id = leader,
		.leader_peer_addr = e != NULL ? e->peer : "",
		.leader_client_addr = e != NULL ? e->client : "",
	};
	const struct baton_member_versions *row =
		baton_version_state_find(&st.raft.versions, leader);
	if (leader == s->cfg.id)
		f.join_reply.leader = s->cfg.profile;
	else if (row != NULL)
		f.join_reply.leader = row->profile;
	int rv = baton_node_send_frame(s->node, to, &f);
	if (rv != 0)
		LOG_WARN("join: cannot answer node %" PRIu64 ": %s", to,
			 baton_strerror(rv));
}

static void pending_end(struct pending_join *p, int status)
{
	struct server *s = p->j->s;
	if (p->j->closing) {
		p->step = PENDING_FREE;
		return;
	}
	if (status == 0) {
		LOG_INFO("join: node %" PRIu64 " (%s) is a voter now", p->id,
			 p->peer);
		send_reply(s, p->id, true, "");
	} else {
		char why[256];
		snprintf(why, sizeof why, "adding node %" PRIu64 " failed: %s",
			 p->id, baton_strerror(status));
		LOG_WARN("join: %s", why);
		send_reply(s, p->id, false, why);
	}
	p->step = PENDING_FREE;
}

static void on_promoted(void *data, int status)
{
	struct pending_join *p = data;
	if (p->j->closing) {
		pending_end(p, status);
		return;
	}
	if (status == BATON_EEXISTS)
		status = 0; /* a voter already */
	if ((status == BATON_ECATCHUP || status == BATON_EBUSY) &&
	    now_ms(p->j) < p->deadline_ms) {
		p->step = PENDING_RETRY;
		p->retry_at_ms = now_ms(p->j) + JOIN_PROMOTE_RETRY_MS;
		return;
	}
	pending_end(p, status);
}

static void promote(struct pending_join *p)
{
	p->step = PENDING_PROMOTE;
	int rv = baton_node_promote(p->j->s->node, p->id, on_promoted, p);
	if (rv != 0)
		on_promoted(p, rv);
}

static void on_learner(void *data, int status)
{
	struct pending_join *p = data;
	if (p->j->closing) {
		pending_end(p, status);
		return;
	}
	if (status == BATON_EBUSY && now_ms(p->j) < p->deadline_ms) {
		/* Another change goes on: promote() retries later and adds
		 * first if it must (see pending_tick). */
		p->step = PENDING_RETRY;
		p->retry_at_ms = now_ms(p->j) + JOIN_PROMOTE_RETRY_MS;
		return;
	}
	if (status != 0 && status != BATON_EEXISTS) {
		pending_end(p, status);
		return;
	}
	promote(p);
}

static void add_learner(struct pending_join *p)
{
	if (is_member(p->j->s, p->id, false)) {
		promote(p);
		return;
	}
	p->step = PENDING_LEARNER;
	int rv = baton_node_add_learner(p->j->s->node, p->id, on_learner, p);
	if (rv != 0)
		on_learner(p, rv);
}

static void on_address(void *data, int status, const uint8_t *reply, size_t len)
{
	struct pending_join *p = data;
	(void)reply;
	(void)len;
	if (status != 0 || p->j->closing)
		pending_end(p, status);
	else
		add_learner(p);
}

static void pending_start(struct pending_join *p)
{
	struct server *s = p->j->s;
	const struct book_entry *e =
		server_machine_book_find(&s->machine, p->id);
	if (e != NULL && strcmp(e->peer, p->peer) == 0 &&
	    strcmp(e->client, p->client) == 0) {
		add_learner(p);
		return;
	}
	/* First every node learns where it listens, then it joins. */
	struct book_entry ne = {.id = p->id};
	snprintf(ne.peer, sizeof ne.peer, "%s", p->peer);
	snprintf(ne.client, sizeof ne.client, "%s", p->client);
	struct baton_buf b;
	baton_buf_init(&b);
	int rv = server_machine_encode_address(&ne, &b);
	p->step = PENDING_ADDRESS;
	if (rv == 0)
		rv = baton_node_propose(s->node, b.data, b.len, on_address, p);
	baton_buf_free(&b);
	if (rv != 0)
		pending_end(p, rv);
}

static void pending_tick(struct join *j)
{
	for (uint32_t i = 0; i < JOIN_PENDING_MAX; i++) {
		struct pending_join *p = &j->pending[i];
		if (p->step != PENDING_RETRY || now_ms(j) < p->retry_at_ms)
			continue;
		if (j->s->leader != j->s->cfg.id)
			pending_end(p, BATON_ENOTLEADER);
		else
			add_learner(p);
	}
}

static void on_request(struct join *j, baton_node_id from,
		       const struct baton_peer_join *r)
{
	struct server *s = j->s;
	char why[JOIN_WHY_MAX], theirs[256];
	profile_text(&r->profile, theirs, sizeof theirs);
	if (r->node_id != from) {
		snprintf(why, sizeof why,
			 "the request names node %" PRIu64
			 " but comes from node %" PRIu64,
			 r->node_id, from);
		send_reply(s, from, false, why);
		return;
	}
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	if (st.raft.role != BATON_LEADER) {
		snprintf(why, sizeof why, "node %" PRIu64 " does not lead",
			 s->cfg.id);
		send_reply(s, from, false, why);
		return;
	}
	const struct baton_member *m = baton_config_find(&st.raft.config, from);
	if (m != NULL && m->role == BATON_VOTER) {
		send_reply(s, from, true, "");
		return;
	}
	if (identity_is_removed(s, from)) {
		snprintf(why, sizeof why,
			 "node %" PRIu64 " was removed from this cluster, and "
			 "a removed id is never a member again: start it "
			 "with another --id on an empty data directory",
			 from);
		LOG_WARN("join: refused node %" PRIu64 " (%s): %s", from,
			 theirs, why);
		send_reply(s, from, false, why);
		return;
	}
	if (!s->cfg.accept_joins) {
		snprintf(why, sizeof why,
			 "node %" PRIu64 " does not accept joins: start the "
			 "members with --accept-joins, or have an operator "
			 "run batonctl add",
			 s->cfg.id);
		LOG_WARN("join: refused node %" PRIu64 " (%s): %s", from,
			 theirs, why);
		send_reply(s, from, false, why);
		return;
	}
	const struct baton_release *strict =
		s->cfg.strict_release ? &s->cfg.profile.release : NULL;
	if (baton_join_check(&st.raft.versions, from, &r->profile, strict, why,
			     sizeof why) != 0) {
		LOG_WARN("join: refused node %" PRIu64 " (%s): %s", from,
			 theirs, why);
		send_reply(s, from, false, why);
		return;
	}
	struct book_entry e = {.id = from};
	snprintf(e.peer, sizeof e.peer, "%s", r->peer_addr);
	snprintf(e.client, sizeof e.client, "%s", r->client_addr);
	char bad[BATON_ADDR_WHY_MAX];
	if (baton_parse_addr(e.peer, bad, sizeof bad) != 0 ||
	    baton_parse_addr(e.client, bad, sizeof bad) != 0) {
		snprintf(why, sizeof why, "%s", bad);
		send_reply(s, from, false, why);
		return;
	}
	struct pending_join *free_slot = NULL;
	for (uint32_t i = 0; i < JOIN_PENDING_MAX; i++) {
		struct pending_join *p = &j->pending[i];
		if (p->step != PENDING_FREE && p->id == from)
			return; /* under way: its end answers */
		if (p->step == PENDING_FREE && free_slot == NULL)
			free_slot = p;
	}
	if (free_slot == NULL) {
		send_reply(s, from, false, "too many joins at once");
		return;
	}
	LOG_INFO("join: adding node %" PRIu64 " at %s (%s)", from, e.peer,
		 theirs);
	*free_slot = (struct pending_join){
		.j = j,
		.step = PENDING_ADDRESS,
		.id = from,
		.deadline_ms = now_ms(j) + JOIN_PENDING_TIMEOUT_MS,
	};
	memcpy(free_slot->peer, e.peer, sizeof e.peer);
	memcpy(free_slot->client, e.client, sizeof e.client);
	pending_start(free_slot);
}

/* ---- both ---------------------------------------------------------------- */

static void on_timer(uv_timer_t *t)
{
	struct join *j = t->data;
	joiner_step(j);
	pending_tick(j);
}

int join_start(struct server *s)
{
	struct join *j = calloc(1, sizeof *j);
	if (j == NULL)
		return BATON_ENOMEM;
	j->s = s;
	j->backoff_ms = JOIN_BACKOFF_MIN_MS;
	j->rng = uv_hrtime() ^ (s->cfg.id * 0x9e3779b97f4a7c15ull) ^ 1u;
	uv_timer_init(s->loop, &j->timer);
	j->timer.data = j;
	uv_timer_start(&j->timer, on_timer, JOIN_POLL_MS, JOIN_POLL_MS);
	s->join = j;
	if (s->cfg.n_seeds == 0)
		return 0;
	/* A learner still asks: the leader promotes it (a join cut short
	 * by a restart ends this way). */
	if (is_member(s, s->cfg.id, true)) {
		LOG_INFO("join: this node is a voter already; --join-seeds "
			 "is not needed");
		return 0;
	}
	char mine[256];
	LOG_INFO("join: joining through %u seed(s) (this node runs %s)",
		 s->cfg.n_seeds,
		 profile_text(&s->cfg.profile, mine, sizeof mine));
	j->phase = JOINER_BACKOFF;
	j->phase_deadline_ms = now_ms(j);
	joiner_step(j);
	return 0;
}

static void free_join(uv_handle_t *h)
{
	free(h->data);
}

void join_stop(struct server *s)
{
	struct join *j = s->join;
	if (j == NULL)
		return;
	s->join = NULL;
	j->phase = JOINER_OFF;
	j->closing = true;
	uv_timer_stop(&j->timer);
	uv_close((uv_handle_t *)&j->timer, free_join);
}

void join_on_frame(struct server *s, baton_node_id from,
		   const struct baton_peer_frame *f)
{
	struct join *j = s->join;
	if (j == NULL)
		return;
	if (f->kind == BATON_PEER_JOIN)
		on_request(j, from, &f->join);
	else if (f->kind == BATON_PEER_JOIN_REPLY)
		on_reply(j, from, &f->join_reply);
}
