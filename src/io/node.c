/*
 * The node on libuv (see node.h): glue between the loop and the node
 * pipeline (src/node/pipeline.h), which does all the work. A timer ticks
 * it, the storage's async handle polls its completions, a uv_check handle
 * flushes it at the end of each loop iteration (batching the proposals and
 * reads of many clients), a 1 ms timer writes one slice of a snapshot at
 * a time while one is being written (clients and peers are served between
 * slices), and the transport carries its messages.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton/assert.h"
#include "log.h"
#include "node.h"
#include "peer.h"

/* A snapshot's slices run at most once per this many ms (a timer, not an
 * idle handle): a background task paced so that the loop's own work
 * always gets the larger share of the CPU. */
#define SNAPSHOT_SLICE_EVERY_MS 1u

struct baton_node {
	uv_loop_t *loop;
	struct baton_node_config c;
	struct baton_node_app app;
	struct baton_pipeline *pipeline;
	struct baton_storage *storage;
	uint64_t proposals; /* baton_node_propose calls (metrics) */
	struct baton_transport *transport;
	uv_timer_t tick;
	uv_async_t storage_async;
	uv_check_t flush;
	uv_timer_t work;
	/* The longest slice of snapshot work of the current or last snapshot
	 * (ns), and of any snapshot since start. */
	uint64_t work_slice_max_ns;
	uint64_t work_slice_max_ns_ever;
	baton_node_id leader;
	/* Peer messages from nodes that are not members, dropped: in all,
	 * and since the last warning (which is rate-limited). */
	uint64_t dropped_not_member;
	uint64_t dropped_unlogged;
	uint64_t dropped_logged_ms;
	/* The pipeline's stall, as last seen (baton_node_stalled). */
	baton_index stalled_index;
	char stalled_why[BATON_STALL_TEXT_MAX];

	/* Empty at start with founders (defer_bootstrap): waits for
	 * baton_node_found, hearing no Raft message meanwhile. */
	bool founding;
	/* Removed from the cluster (baton_node_retire): no longer ticked,
	 * deaf to Raft messages. */
	bool retired;
	struct baton_transport_stats scratch_stats;

	void (*shutdown_cb)(void *data);
	void *shutdown_data;
	uint64_t shutdown_deadline_ms;
};

/* ---- the peer codec: the two places that touch it ------------------------ */

/* A Raft message to m->to: encoded by the transport in the connection's
 * protocol version; dropped (and counted) when no connection to m->to is
 * up: Raft resends. */
static void env_send(void *data, const struct baton_msg *m)
{
	struct baton_node *n = data;
	baton_transport_send_raft(n->transport, m);
}

/* Members only: Raft traffic and forwarded writes come from the members of
 * this node's latest configuration (members being added included: the
 * leader appends them before it sends them anything). A node with no
 * configuration yet (--join) hears anyone: the leader that adds it is not
 * known before it does. Joins come from non-members by nature. */
static bool from_member(struct baton_node *n, baton_node_id from, uint32_t kind)
{
	if (kind == BATON_PEER_JOIN || kind == BATON_PEER_JOIN_REPLY)
		return true;
	struct baton_raft_status rs;
	baton_raft_status(baton_pipeline_raft(n->pipeline), &rs);
	return rs.config.n == 0 || baton_config_find(&rs.config, from) != NULL;
}

#define NOT_MEMBER_LOG_INTERVAL_MS 10000u

static void drop_not_member(struct baton_node *n, baton_node_id from,
			    uint32_t kind)
{
	n->dropped_not_member++;
	n->dropped_unlogged++;
	uint64_t now = uv_now(n->loop);
	if (n->dropped_logged_ms != 0 &&
	    now < n->dropped_logged_ms + NOT_MEMBER_LOG_INTERVAL_MS)
		return;
	LOG_WARN("dropped %" PRIu64 " peer message(s) from nodes that are not "
		 "members of this node's configuration (the latest: a frame "
		 "of kind %u from node %" PRIu64 "); %" PRIu64 " in all",
		 n->dropped_unlogged, kind, from, n->dropped_not_member);
	n->dropped_unlogged = 0;
	n->dropped_logged_ms = now;
}

/* Decoded by the transport in the connection's protocol version, with a
 * Raft message's `from` set to the identity of its handshake; only Raft
 * messages, forwarded writes and their replies, and join frames come
 * here. */
static void on_peer_frame(void *data, baton_node_id from,
			  const struct baton_peer_frame *f)
{
	struct baton_node *n = data;
	if (f->kind == BATON_PEER_RAFT && (n->founding || n->retired))
		return;
	if (!from_member(n, from, f->kind)) {
		drop_not_member(n, from, f->kind);
		return;
	}
	if (f->kind == BATON_PEER_RAFT) {
		BATON_ASSERT(f->raft.from == from);
		baton_pipeline_receive(n->pipeline, &f->raft);
	} else {
		n->app.peer_frame(n->app.data, from, f);
	}
}

/* The view a handshake reply carries (DESIGN.md, "Join"): the leader this
 * node knows and the version facts of its log, so that a node wanting to
 * join can decide before it asks. None before the pipeline exists. */
static bool cluster_view(void *data, struct baton_peer_cluster_view *out)
{
	struct baton_node *n = data;
	if (n->pipeline == NULL)
		return false;
	struct baton_raft_status rs;
	baton_raft_status(baton_pipeline_raft(n->pipeline), &rs);
	if (!baton_version_state_valid(&rs.versions))
		return false;
	out->versions = rs.versions;
	out->leader_id = rs.leader_id;
	out->last_index = rs.last_index;
	const char *addr = NULL;
	if (rs.leader_id == n->c.id)
		addr = n->c.peer_addr;
	else if (rs.leader_id != 0 && n->app.peer_addr != NULL)
		addr = n->app.peer_addr(n->app.data, rs.leader_id);
	out->leader_peer_addr = addr != NULL ? addr : "";
	return true;
}

_Static_assert(BATON_CLUSTER_UUID_LEN == BATON_PEER_CLUSTER_UUID_LEN,
	       "the storage's UUID is the wire's");

static bool is_removed(void *data, baton_node_id id)
{
	struct baton_node *n = data;
	return n->app.is_removed != NULL && n->app.is_removed(n->app.data, id);
}

static void told_removed(void *data, baton_node_id by, const char *reason)
{
	struct baton_node *n = data;
	if (n->app.removed != NULL)
		n->app.removed(n->app.data, by, reason);
}

static void peer_down(void *data, baton_node_id id)
{
	struct baton_node *n = data;
	if (n->pipeline != NULL)
		baton_pipeline_peer_closed(n->pipeline, id);
	if (n->app.peer_down != NULL)
		n->app.peer_down(n->app.data, id);
}

/* ---- what the pipeline asks of the world --------------------------------- */

static uint64_t env_now_ms(void *data)
{
	struct baton_node *n = data;
	return uv_now(n->loop);
}

static uint64_t env_wall_ms(void *data)
{
	(void)data;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec < 0)
		return 0; /* a clock before 1970: taken as none */
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void env_leader_changed(void *data, baton_node_id leader)
{
	struct baton_node *n = data;
	n->leader = leader;
	LOG_INFO("leader is %" PRIu64 "%s", leader,
		 leader == n->c.id ? " (this node)" : "");
	if (n->app.leader_changed != NULL)
		n->app.leader_changed(n->app.data, leader);
}

static void env_storage_failed(void *data)
{
	struct baton_node *n = data;
	if (n->app.storage_failed != NULL)
		n->app.storage_failed(n->app.data);
}

_Static_assert(BATON_PIPELINE_LOG_DEBUG == (int)BATON_LOG_DEBUG &&
		       BATON_PIPELINE_LOG_INFO == (int)BATON_LOG_INFO &&
		       BATON_PIPELINE_LOG_WARN == (int)BATON_LOG_WARN &&
		       BATON_PIPELINE_LOG_ERROR == (int)BATON_LOG_ERROR,
	       "the pipeline's log levels are the log's");

static void env_log(void *data, int level, const char *text)
{
	(void)data;
	baton_log((enum baton_log_level)level, "%s", text);
}

static void env_stalled(void *data, baton_index index, const char *why)
{
	struct baton_node *n = data;
	LOG_ERROR("%s", why);
	n->stalled_index = index;
	snprintf(n->stalled_why, sizeof n->stalled_why, "%s", why);
	if (n->app.stalled != NULL)
		n->app.stalled(n->app.data, index, why);
}

/* ---- the loop's hooks ---------------------------------------------------- */

static void on_storage_async(uv_async_t *a)
{
	struct baton_node *n = a->data;
	baton_pipeline_storage_ready(n->pipeline);
}

/* Runs on the storage's writer thread. */
static void storage_notify(void *data)
{
	uv_async_send(data);
}

static void on_work(uv_timer_t *h)
{
	struct baton_node *n = h->data;
	uint64_t t0 = uv_hrtime();
	baton_pipeline_work(n->pipeline);
	uint64_t took = uv_hrtime() - t0;
	if (took > n->work_slice_max_ns)
		n->work_slice_max_ns = took;
	if (took > n->work_slice_max_ns_ever)
		n->work_slice_max_ns_ever = took;
	if (!baton_pipeline_has_work(n->pipeline))
		uv_timer_stop(&n->work);
}

static void on_check(uv_check_t *c)
{
	struct baton_node *n = c->data;
	baton_pipeline_flush(n->pipeline);
	if (baton_pipeline_has_work(n->pipeline) &&
	    !uv_is_active((uv_handle_t *)&n->work)) {
		n->work_slice_max_ns = 0;
		uv_timer_start(&n->work, on_work, 0, SNAPSHOT_SLICE_EVERY_MS);
	}
}

/* A stall lifts without a word (the entry that caused it was replaced):
 * look while one stands. */
static void follow_stall(struct baton_node *n)
{
	struct baton_pipeline_status s;
	baton_pipeline_status(n->pipeline, &s);
	if (s.stalled_index == n->stalled_index)
		return;
	if (s.stalled_index == 0)
		LOG_INFO("applying again: the entry at %" PRIu64
			 " that stopped it is gone",
			 n->stalled_index);
	n->stalled_index = s.stalled_index;
	memcpy(n->stalled_why, s.stalled_why, sizeof n->stalled_why);
}

static void on_tick(uv_timer_t *t)
{
	struct baton_node *n = t->data;
	baton_pipeline_tick(n->pipeline);
	if (n->stalled_index != 0)
		follow_stall(n);
	if (n->shutdown_cb != NULL &&
	    (n->leader != n->c.id ||
	     uv_now(n->loop) > n->shutdown_deadline_ms)) {
		void (*cb)(void *) = n->shutdown_cb;
		n->shutdown_cb = NULL;
		cb(n->shutdown_data);
	}
}

/* ---- the API: the pipeline's -----------------------------------------------
 */

int baton_node_propose(struct baton_node *n, const uint8_t *payload, size_t len,
		       baton_node_propose_cb cb, void *data)
{
	n->proposals++;
	return baton_pipeline_propose(n->pipeline, payload, len, cb, data);
}

int baton_node_read(struct baton_node *n, baton_node_done_cb cb, void *data)
{
	return baton_pipeline_read(n->pipeline, cb, data);
}

int baton_node_add_learner(struct baton_node *n, baton_node_id id,
			   baton_node_done_cb cb, void *data)
{
	return baton_pipeline_add_learner(n->pipeline, id, cb, data);
}

int baton_node_promote(struct baton_node *n, baton_node_id id,
		       baton_node_done_cb cb, void *data)
{
	return baton_pipeline_promote(n->pipeline, id, cb, data);
}

int baton_node_remove(struct baton_node *n, baton_node_id id,
		      baton_node_done_cb cb, void *data)
{
	return baton_pipeline_remove(n->pipeline, id, cb, data);
}

int baton_node_transfer(struct baton_node *n, baton_node_id id,
			baton_node_done_cb cb, void *data)
{
	return baton_pipeline_transfer(n->pipeline, id, cb, data);
}

int baton_node_send_frame(struct baton_node *n, baton_node_id to,
			  const struct baton_peer_frame *f)
{
	return baton_transport_send_frame(n->transport, to, f);
}

bool baton_node_peer_connected(struct baton_node *n, baton_node_id to)
{
	return baton_transport_peer_proto(n->transport, to).value != 0;
}

void baton_node_set_peer_addr(struct baton_node *n, baton_node_id id,
			      const char *addr)
{
	if (id != n->c.id)
		baton_transport_set_peer(n->transport, id, addr);
}

void baton_node_forget_peer(struct baton_node *n, baton_node_id id)
{
	if (id != n->c.id)
		baton_transport_forget_peer(n->transport, id);
}

int baton_node_probe(struct baton_node *n, const char *addr,
		     baton_transport_probe_cb cb, void *data)
{
	return baton_transport_probe(n->transport, addr, cb, data);
}

void baton_node_upgrade_status(struct baton_node *n,
			       struct baton_upgrade_status *out)
{
	baton_raft_upgrade_status(baton_pipeline_raft(n->pipeline), out);
}

struct baton_machine_version baton_node_machine_version(struct baton_node *n)
{
	return baton_raft_machine_version(baton_pipeline_raft(n->pipeline));
}

uint32_t baton_node_eligibility(struct baton_node *n, char *why, size_t cap)
{
	return baton_raft_eligibility(baton_pipeline_raft(n->pipeline), why,
				      cap);
}

int baton_node_downgrade_check(struct baton_node *n, uint32_t op,
			       struct baton_release target,
			       struct baton_downgrade_plan *plan, char *why,
			       size_t cap)
{
	return baton_raft_downgrade_check(baton_pipeline_raft(n->pipeline), op,
					  target, plan, why, cap);
}

int baton_node_downgrade(struct baton_node *n, uint32_t op,
			 struct baton_release target, baton_node_done_cb cb,
			 void *data)
{
	return baton_pipeline_downgrade(n->pipeline, op, target, cb, data);
}

void baton_node_status(struct baton_node *n, struct baton_node_status *out)
{
	memset(out, 0, sizeof *out);
	struct baton_pipeline_status ps;
	baton_pipeline_status(n->pipeline, &ps);
	out->raft = ps.raft;
	memcpy(out->match, ps.match, sizeof out->match);
	out->applied = ps.applied;
	out->applied_versions = ps.applied_versions;
	out->storage_failed = ps.storage_failed;
	out->stalled_index = ps.stalled_index;
	memcpy(out->stalled_why, ps.stalled_why, sizeof out->stalled_why);
	baton_transport_stats(n->transport, &out->transport);
	out->peer_msgs_dropped_not_member = n->dropped_not_member;
	out->snapshots = ps.snapshots;
	out->snapshot_slice_max_us = n->work_slice_max_ns / 1000;
	out->snapshot_slice_max_us_ever = n->work_slice_max_ns_ever / 1000;
	out->proposals = n->proposals;
	if (n->storage != NULL)
		baton_fs_storage_stats(n->storage, &out->storage);
}

bool baton_node_compact_soon(struct baton_node *n, uint64_t min_bytes)
{
	return baton_pipeline_compact_soon(n->pipeline, min_bytes);
}

uint64_t baton_node_log_bytes(struct baton_node *n)
{
	return baton_raft_log_bytes(baton_pipeline_raft(n->pipeline));
}

baton_index baton_node_stalled(struct baton_node *n, const char **why)
{
	*why = n->stalled_why;
	return n->stalled_index;
}

void baton_node_clock(struct baton_node *n, struct baton_pipeline_clock *out)
{
	if (n->pipeline == NULL) {
		memset(out, 0, sizeof *out);
		return;
	}
	baton_pipeline_clock(n->pipeline, out);
}

uint64_t baton_node_machine_stamp(struct baton_node *n, uint64_t machine_ms)
{
	BATON_ASSERT(n->pipeline != NULL);
	return baton_pipeline_machine_stamp(n->pipeline, machine_ms);
}

/* ---- identity and founding --------------------------------------------- */

bool baton_node_founding(struct baton_node *n)
{
	return n->founding;
}

int baton_node_found(struct baton_node *n)
{
	BATON_ASSERT(n->founding);
	n->founding = false;
	return baton_pipeline_bootstrap(n->pipeline);
}

void baton_node_identity(struct baton_node *n, struct baton_identity *out)
{
	baton_fs_storage_identity(n->storage, out);
}

int baton_node_set_cluster_uuid(struct baton_node *n,
				const uint8_t uuid[BATON_CLUSTER_UUID_LEN],
				char *err, size_t errlen)
{
	int rv = baton_fs_storage_set_cluster_uuid(n->storage, uuid, err,
						   errlen);
	if (rv == 0)
		baton_transport_set_cluster_uuid(n->transport, uuid);
	return rv;
}

void baton_node_retire(struct baton_node *n)
{
	n->retired = true;
	baton_pipeline_retire(n->pipeline);
	/* Nobody to talk to any more: stop dialling the members. */
	struct baton_transport_stats *ts = &n->scratch_stats;
	baton_transport_stats(n->transport, ts);
	for (uint32_t i = 0; i < ts->n_peers; i++)
		if (ts->peers[i].id != 0)
			baton_transport_forget_peer(n->transport,
						    ts->peers[i].id);
}

/* ---- life cycle ---------------------------------------------------------- */

static void pipeline_config(struct baton_node *n,
			    struct baton_pipeline_config *pc)
{
	const struct baton_node_config *c = &n->c;
	memset(pc, 0, sizeof *pc);
	baton_raft_options_default(&pc->raft);
	pc->raft.id = c->id;
	pc->raft.profile = c->profile;
	pc->raft.memory_max_bytes = c->memory_max_bytes;
	pc->raft.snapshot_trailing_bytes = c->snapshot_trailing_bytes;
	if (c->machine_upgrade != 0)
		pc->raft.machine_upgrade = c->machine_upgrade;
	if (c->election_policy != 0)
		pc->raft.election_policy = c->election_policy;
	pc->raft.random_seed =
		(uint64_t)uv_hrtime() ^ (c->id * 0x9e3779b97f4a7c15ull);
	if (c->election_timeout_ms)
		pc->raft.election_timeout_ms = c->election_timeout_ms;
	if (c->heartbeat_ms)
		pc->raft.heartbeat_interval_ms = c->heartbeat_ms;
	if (c->snapshot_trailing_set)
		pc->raft.snapshot_trailing_entries = c->snapshot_trailing;
	pc->storage = n->storage;
	pc->machine = n->app.machine;
	pc->snapshot_entries = c->snapshot_entries;
	pc->snapshot_log_bytes = c->snapshot_log_bytes;
	pc->snapshot_slice_bytes = c->snapshot_slice_bytes;
	pc->n_founders = c->n_founders;
	memcpy(pc->founders, c->founders, sizeof pc->founders);
	pc->bootstrap_deferred = c->defer_bootstrap;
	pc->max_clock_offset_ms = c->max_clock_offset_ms;
}

static int open_pipeline(struct baton_node *n, char *err, size_t errlen)
{
	struct baton_fs_options fo;
	baton_fs_options_default(&fo);
	fo.dir = n->c.data_dir;
	if (n->c.wal_segment_bytes != 0)
		fo.segment_bytes = n->c.wal_segment_bytes;
	fo.notify = storage_notify;
	fo.notify_data = &n->storage_async;
	fo.vfs = n->c.vfs;
	struct baton_identity identity = {.node_id = n->c.id};
	snprintf(identity.cluster_name, sizeof identity.cluster_name, "%s",
		 n->c.cluster_id);
	fo.identity = &identity;
	int rv = baton_fs_storage_open(&fo, &n->storage, err, errlen);
	if (rv != 0)
		return rv;
	struct baton_pipeline_config pc;
	pipeline_config(n, &pc);
	struct baton_pipeline_env env = {
		.data = n,
		.now_ms = env_now_ms,
		.wall_ms = env_wall_ms,
		.send = env_send,
		.leader_changed = env_leader_changed,
		.storage_failed = env_storage_failed,
		.stalled = env_stalled,
		.log = env_log,
	};
	return baton_pipeline_create(&pc, &env, &n->pipeline, err, errlen);
}

int baton_node_start(uv_loop_t *loop, const struct baton_node_config *c,
		     const struct baton_node_app *app, struct baton_node **out,
		     char *err, size_t errlen)
{
	BATON_ASSERT(app->machine != NULL && app->peer_frame != NULL);
	struct baton_node *n = calloc(1, sizeof *n);
	if (n == NULL)
		return BATON_ENOMEM;
	n->loop = loop;
	n->c = *c;
	n->app = *app;
	uv_async_init(loop, &n->storage_async, on_storage_async);
	n->storage_async.data = n;
	/* The transport first: the pipeline may send as it starts. */
	struct baton_transport_config tc = {
		.loop = loop,
		.cluster_id = c->cluster_id,
		.id = c->id,
		.profile = c->profile,
		.listen_addr = c->peer_addr,
		.on_frame = on_peer_frame,
		.cluster_view = cluster_view,
		.data = n,
		.strict_release = c->strict_release,
		.secret = c->peer_secret,
		.is_removed = is_removed,
		.removed = told_removed,
		.peer_down = peer_down,
	};
	int rv = baton_transport_start(&tc, &n->transport);
	if (rv != 0) {
		n->transport = NULL;
		snprintf(err, errlen, "cannot listen for peers on %s",
			 c->peer_addr);
	}
	if (rv == 0)
		rv = open_pipeline(n, err, errlen);
	if (rv != 0) {
		baton_node_close(n);
		return rv;
	}
	n->founding = c->defer_bootstrap && c->n_founders > 0 &&
		      baton_pipeline_empty(n->pipeline);
	struct baton_identity identity;
	baton_fs_storage_identity(n->storage, &identity);
	if (identity.has_uuid)
		baton_transport_set_cluster_uuid(n->transport,
						 identity.cluster_uuid);
	struct baton_raft_status rs;
	baton_raft_status(baton_pipeline_raft(n->pipeline), &rs);
	LOG_INFO("recovered term %" PRIu64 ", snapshot %" PRIu64
		 ", log up to %" PRIu64 ", %u members",
		 rs.term, rs.snapshot_index, rs.last_index, rs.config.n);
	for (uint32_t i = 0; i < c->n_founders; i++)
		baton_node_set_peer_addr(n, c->founders[i],
					 c->founder_addrs[i]);
	uv_timer_init(loop, &n->tick);
	n->tick.data = n;
	uv_timer_start(&n->tick, on_tick, BATON_NODE_TICK_MS,
		       BATON_NODE_TICK_MS);
	uv_check_init(loop, &n->flush);
	n->flush.data = n;
	uv_check_start(&n->flush, on_check);
	uv_timer_init(loop, &n->work);
	n->work.data = n;
	*out = n;
	return 0;
}

/* The hand-over before exit ended. Failed (no other voter, as in a
 * cluster of one, or none caught up in time): nothing is left to wait
 * for, so the exit goes on at the next tick. */
static void transfer_done(void *data, int status)
{
	struct baton_node *n = data;
	if (status != 0 && n->shutdown_cb != NULL) {
		LOG_INFO("no hand-over (%s): exiting as the leader",
			 baton_strerror(status));
		n->shutdown_deadline_ms = 0;
	}
}

void baton_node_shutdown(struct baton_node *n, void (*cb)(void *data),
			 void *data)
{
	n->shutdown_cb = cb;
	n->shutdown_data = data;
	n->shutdown_deadline_ms =
		uv_now(n->loop) + 2u * (n->c.election_timeout_ms
						? n->c.election_timeout_ms
						: 1000u);
	if (n->leader == n->c.id) {
		LOG_INFO("handing leadership over before exit");
		int rv = baton_node_transfer(n, 0, transfer_done, n);
		if (rv != 0)
			transfer_done(n, rv);
	}
}

static void free_on_close(uv_handle_t *h)
{
	free(h->data);
}

void baton_node_close(struct baton_node *n)
{
	if (n->tick.type == UV_TIMER) {
		uv_timer_stop(&n->tick);
		uv_close((uv_handle_t *)&n->tick, NULL);
	}
	if (n->flush.type == UV_CHECK) {
		uv_check_stop(&n->flush);
		uv_close((uv_handle_t *)&n->flush, NULL);
	}
	if (n->work.type == UV_TIMER) {
		uv_timer_stop(&n->work);
		uv_close((uv_handle_t *)&n->work, NULL);
	}
	/* Fails what still waits, before the transport goes. */
	baton_pipeline_destroy(n->pipeline);
	n->pipeline = NULL;
	if (n->transport != NULL)
		baton_transport_stop(n->transport);
	if (n->storage != NULL) {
		n->storage->ops->close(n->storage); /* waits for writes */
		n->storage = NULL;
	}
	/* The async handle is the last one: the node goes with it. */
	n->storage_async.data = n;
	uv_close((uv_handle_t *)&n->storage_async, free_on_close);
}
