/*
 * The old cluster's side of a migration (docs/relay.md, "Mirror" and
 * "Hand-off"): its leader streams its committed state to the new
 * cluster's leader through the relay, and commits the fence when asked.
 *
 * The stream of one session: BEGIN(S), the export records of the map as it
 * was at index S in CHUNKs, END(S), then every committed kv payload after S
 * as an ENTRY, in index order. Entries are kept (the tee) until the new
 * leader's import index acknowledges them, so a new session (the relay
 * restarted, the new leader changed) resumes after its import index
 * without a new snapshot when the tee still covers it. Only the leader
 * exports: every old node applies the same entries, but only the leader
 * can also fence.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "migration_internal.h"

/* Snapshot work per tick: the export runs between the loop's other work. */
#define EXPORT_TICK_BYTES ((size_t)1 << 20)

static uint64_t applied_index(const struct migration *g)
{
	return g->s->machine.applied_index;
}

static void tee_trim(struct mig_export *ex, uint64_t through)
{
	while (ex->head != NULL && ex->head->index <= through) {
		struct mig_tee *t = ex->head;
		ex->head = t->next;
		ex->tee_bytes -= t->len;
		free(t);
	}
	if (ex->head == NULL)
		ex->tail = NULL;
}

static void tee_clear(struct mig_export *ex)
{
	tee_trim(ex, UINT64_MAX);
	BATON_ASSERT(ex->tee_bytes == 0 && ex->tail == NULL);
}

void mig_export_close(struct migration *g)
{
	struct mig_export *ex = &g->ex;
	/* Found again from the map by the next session (start_snapshot). */
	ex->fence_index = 0;
	ex->fence_proposed = false;
	if (ex->snap_running)
		kv_export_end(g->s->machine.kv);
	ex->snap_running = ex->snap_begun = false;
	ex->open = false;
	tee_clear(ex);
	baton_buf_reset(&ex->chunk);
}

static int send_msg(struct migration *g, uint8_t type, uint64_t index,
		    uint64_t value, const uint8_t *data, size_t len)
{
	struct mig_export *ex = &g->ex;
	struct migration_msg m = {
		.type = type,
		.session = ex->session,
		.applied = applied_index(g),
		.index = index,
		.value = value,
		.data = data,
		.len = len,
	};
	int rv = mig_send(g, ex->to_cluster, ex->to_node, &m);
	if (rv == 0)
		ex->last_sent_ms = mig_now(g);
	return rv;
}

/* A new snapshot for the session: the map as it is now, at the last
 * applied index. */
static void start_snapshot(struct migration *g)
{
	struct mig_export *ex = &g->ex;
	if (ex->snap_running)
		kv_export_end(g->s->machine.kv);
	ex->snap_running = ex->snap_sent = ex->snap_begun = false;
	tee_clear(ex);
	baton_buf_reset(&ex->chunk);
	int rv = kv_export_begin(g->s->machine.kv);
	if (rv != 0) {
		/* A snapshot or a KEYS holds the map's one view: the next
		 * tick tries again. */
		if (rv != BATON_EBUSY)
			LOG_WARN("migration: cannot start the export: %s",
				 baton_strerror(rv));
		return;
	}
	ex->snap_running = true;
	/* The node's count, not the machine's: a snapshot restored from the
	 * leader moved the map without applying entries. */
	struct baton_node_status st;
	baton_node_status(g->s->node, &st);
	ex->snap_index = st.applied;
	ex->sent_index = ex->snap_index;
	ex->acked = 0;
	ex->chunks = ex->chunks_acked = 0;
	g->stats.snapshots++;
	struct kv_migration km;
	mig_kv_state(g, &km);
	if (km.fenced && ex->fence_index == 0)
		ex->fence_index = ex->snap_index;
	/* BEGIN names this cluster's UUID: the importer pins it. */
	const struct server_machine *sm = &g->s->machine;
	if (send_msg(g, MIG_BEGIN, ex->snap_index,
		     kv_machine_time_ms(g->s->machine.kv),
		     sm->has_uuid ? sm->uuid : NULL,
		     sm->has_uuid ? sizeof sm->uuid : 0) != 0) {
		/* BEGIN must go first: the next tick starts over. */
		kv_export_end(g->s->machine.kv);
		ex->snap_running = false;
		return;
	}
	ex->snap_begun = true;
	LOG_INFO("migration: exporting a snapshot at index %" PRIu64
		 " to node %" PRIu64 " of cluster %s (session %" PRIx64 ")",
		 ex->snap_index, ex->to_node, ex->to_cluster, ex->session);
}

static void on_export_req(struct migration *g, const char *from_cluster,
			  baton_node_id from_node,
			  const struct migration_msg *m)
{
	struct mig_export *ex = &g->ex;
	if (!mig_leads(g))
		return; /* the leader answers; the others only listen */
	if (strcmp(from_cluster, g->s->cfg.migrate_to) != 0) {
		/* Only the cluster the operator named may read this one's
		 * data and fence it: anyone else registered at the relay
		 * could otherwise. */
		LOG_WARN_LIMITED(
			"migration: an export request from node %" PRIu64
			" of cluster %s refused: this node exports "
			"only to %s (--migrate-to)",
			from_node, from_cluster,
			g->s->cfg.migrate_to[0] != '\0' ? g->s->cfg.migrate_to
							: "no cluster");
		return;
	}
	struct kv_migration km;
	mig_kv_state(g, &km);
	if (km.aborted) {
		LOG_WARN_LIMITED("migration: an export request from node "
				 "%" PRIu64 " of cluster %s refused: the "
				 "migration was aborted here (batonctl "
				 "migrate resume undoes it)",
				 from_node, from_cluster);
		return;
	}
	if (!g->s->machine.has_uuid) {
		/* BEGIN names this cluster's UUID, which the importer pins:
		 * until the first leader's entry applied there is none to
		 * send. The importer asks again after its stall time. */
		LOG_WARN_LIMITED("migration: an export request from node "
				 "%" PRIu64 " of cluster %s waits: this "
				 "cluster's UUID is not applied yet",
				 from_node, from_cluster);
		return;
	}
	bool resume = ex->open && ex->snap_sent && m->index >= ex->acked &&
		      m->index >= ex->snap_index &&
		      (ex->head == NULL || ex->head->index <= m->index + 1) &&
		      m->index <= applied_index(g);
	if (ex->open && m->session == ex->session)
		return; /* a repeated request of the running session */
	ex->open = true;
	ex->session = m->session;
	ex->part_index = 0; /* an entry in parts starts again */
	snprintf(ex->to_cluster, sizeof ex->to_cluster, "%s", from_cluster);
	ex->to_node = from_node;
	ex->last_fenced_ms = 0;
	g->stats.sessions++;
	if (resume) {
		tee_trim(ex, m->index);
		ex->acked = m->index;
		ex->sent_index = m->index;
		LOG_INFO("migration: export session %" PRIx64
			 " resumes after index %" PRIu64 " for node %" PRIu64
			 " of cluster %s",
			 ex->session, m->index, from_node, from_cluster);
		return;
	}
	start_snapshot(g);
}

static void on_propose_fence(void *data, int status, const uint8_t *reply,
			     size_t len)
{
	struct migration *g = data;
	(void)reply;
	(void)len;
	if (status != 0) {
		LOG_WARN("migration: the fence was not committed (%s): the "
			 "new cluster asks again",
			 baton_strerror(status));
		g->ex.fence_proposed = false;
	}
}

/* A member known to run a release that does not know the FENCE entry (it
 * would stop applying there): its id, or 0. A member whose release is not
 * known (down since before this term) does not hold the fence back: were
 * it older, it would stall at the fence, not diverge. */
baton_node_id mig_member_without_fence(struct server *s,
				       struct baton_release *its)
{
	static struct baton_node_status st;
	static struct baton_upgrade_status us;
	baton_node_status(s->node, &st);
	baton_node_upgrade_status(s->node, &us);
	struct baton_release since = baton_release_migration_since();
	for (uint32_t i = 0; i < st.raft.config.n; i++) {
		baton_node_id id = st.raft.config.members[i].id;
		struct baton_profile p;
		if (strcmp(server_member_versions(&st, &us, id, &p),
			   "unknown") == 0)
			continue;
		*its = p.release;
		if (baton_release_compare(p.release, since) < 0)
			return id;
	}
	return 0;
}

/* The new leader asks for hand-off: commit the fence (the old cluster
 * takes no write of its own after it). */
static void on_handoff(struct migration *g, const struct migration_msg *m)
{
	struct mig_export *ex = &g->ex;
	struct kv_migration km;
	mig_kv_state(g, &km);
	if (!mig_leads(g) || !ex->open || m->session != ex->session ||
	    km.fenced || ex->fence_proposed || km.aborted)
		return;
	/* Fence only when the import is close: the time from the fence to
	 * the new cluster's authority is a pause for every client. What
	 * counts is what the new cluster acknowledged in this session (its
	 * import index, as ACK said), not what the HANDOFF claims. */
	if (!ex->snap_sent || ex->acked < ex->snap_index ||
	    applied_index(g) > ex->acked + MIG_HANDOFF_LAG_MAX) {
		LOG_WARN_LIMITED("migration: hand-off asked at import index "
				 "%" PRIu64 " refused for now: the new "
				 "cluster acknowledged index %" PRIu64
				 " of %" PRIu64 " applied here",
				 m->index, ex->acked, applied_index(g));
		return;
	}
	struct baton_release its;
	baton_node_id old = mig_member_without_fence(g->s, &its);
	if (old != 0) {
		char r[BATON_RELEASE_STR_MAX], need[BATON_RELEASE_STR_MAX];
		uint64_t now = mig_now(g);
		if (now - ex->refused_log_ms >= 5000) {
			ex->refused_log_ms = now;
			LOG_WARN(
				"migration: hand-off refused: member %" PRIu64
				" runs release %s, which does not know the "
				"fence; upgrade every member to %s or later "
				"first (batonctl roll)",
				old, baton_release_format(its, r),
				baton_release_format(
					baton_release_migration_since(), need));
		}
		return;
	}
	struct baton_buf p;
	baton_buf_init(&p);
	uint8_t kind = PAYLOAD_KV;
	int rv = baton_buf_append(&p, &kind, 1);
	if (rv == 0)
		rv = kv_encode_fence(server_machine_stamp(g->s), ex->to_cluster,
				     &p);
	if (rv == 0)
		rv = baton_node_propose(g->s->node, p.data, p.len,
					on_propose_fence, g);
	baton_buf_free(&p);
	if (rv != 0) {
		LOG_WARN("migration: cannot propose the fence: %s",
			 baton_strerror(rv));
		return;
	}
	ex->fence_proposed = true;
	LOG_INFO("migration: hand-off asked by cluster %s: fencing",
		 ex->to_cluster);
}

void mig_export_on_msg(struct migration *g, const char *from_cluster,
		       baton_node_id from_node, const struct migration_msg *m)
{
	struct mig_export *ex = &g->ex;
	if (m->type != MIG_EXPORT_REQ &&
	    (!ex->open || from_node != ex->to_node ||
	     strcmp(from_cluster, ex->to_cluster) != 0 ||
	     m->session != ex->session)) {
		/* A session is bound to the EXPORT_REQ that opened it: only
		 * its sender speaks in it. */
		LOG_WARN_LIMITED("migration: %s from node %" PRIu64
				 " of cluster %s outside the export session: "
				 "dropped",
				 migration_msg_name(m->type), from_node,
				 from_cluster);
		return;
	}
	switch (m->type) {
	case MIG_EXPORT_REQ:
		on_export_req(g, from_cluster, from_node, m);
		return;
	case MIG_ACK:
		if (m->index >= ex->snap_index && ex->snap_sent)
			ex->chunks_acked = ex->chunks;
		else if (m->value > ex->chunks_acked && m->value <= ex->chunks)
			ex->chunks_acked = (uint32_t)m->value;
		if (m->index > ex->acked && m->index <= ex->sent_index) {
			ex->acked = m->index;
			tee_trim(ex, m->index);
		}
		return;
	case MIG_HANDOFF:
		on_handoff(g, m);
		return;
	default:
		g->stats.bad_msgs++;
		LOG_WARN("migration: unexpected %s from node %" PRIu64
			 " of cluster %s on the old side: dropped",
			 migration_msg_name(m->type), from_node, from_cluster);
	}
}

void mig_export_applied(struct migration *g, uint64_t index,
			const uint8_t *payload, size_t len)
{
	struct mig_export *ex = &g->ex;
	struct kv_migration km;
	mig_kv_state(g, &km);
	bool fence_now = km.fenced && ex->fence_index == 0;
	if (!ex->open || (ex->fence_index != 0 && index > ex->fence_index))
		return; /* after the fence every write is a no-op */
	if (!ex->snap_begun || index <= ex->snap_index)
		return;
	if (ex->tee_bytes + len > MIG_TEE_BYTES_MAX) {
		LOG_WARN("migration: the new cluster is more than %zu bytes "
			 "behind: the export session ends (the next one "
			 "starts from a new snapshot)",
			 MIG_TEE_BYTES_MAX);
		mig_export_close(g);
		return;
	}
	struct mig_tee *t = malloc(sizeof *t + len);
	if (t == NULL) {
		mig_export_close(g);
		return;
	}
	t->next = NULL;
	t->index = index;
	t->len = len;
	memcpy(t->payload, payload, len);
	if (ex->tail != NULL)
		ex->tail->next = t;
	else
		ex->head = t;
	ex->tail = t;
	ex->tee_bytes += len;
	if (fence_now) {
		ex->fence_index = index;
		LOG_INFO("migration: fenced at index %" PRIu64, index);
	}
}

/* Send the snapshot's next records, a slice at a time. */
static void pump_snapshot(struct migration *g)
{
	struct mig_export *ex = &g->ex;
	size_t work = 0;
	bool done = false;
	while (ex->snap_running && work < EXPORT_TICK_BYTES) {
		if (ex->chunk.len < MIG_CHUNK_BYTES && !done) {
			size_t before = ex->chunk.len;
			int rv = kv_export_step(g->s->machine.kv, 64u << 10,
						&ex->chunk, &done);
			if (rv != 0) {
				LOG_WARN("migration: export failed: %s",
					 baton_strerror(rv));
				mig_export_close(g);
				return;
			}
			work += ex->chunk.len - before;
			if (!done)
				continue;
		}
		if (ex->chunk.len > 0) {
			if (ex->chunks - ex->chunks_acked >= MIG_WINDOW_CHUNKS)
				return;
			if (send_msg(g, MIG_CHUNK, ex->snap_index, ex->chunks,
				     ex->chunk.data, ex->chunk.len) != 0)
				return; /* the relay's queue is full */
			ex->chunks++;
			baton_buf_reset(&ex->chunk);
		}
		if (done) {
			kv_export_end(g->s->machine.kv);
			ex->snap_running = false;
		}
	}
	if (ex->snap_begun && !ex->snap_running && !ex->snap_sent) {
		if (send_msg(g, MIG_END, ex->snap_index, ex->chunks, NULL, 0) !=
		    0)
			return;
		ex->snap_sent = true;
		LOG_INFO("migration: snapshot at %" PRIu64 " sent in %u "
			 "chunks",
			 ex->snap_index, ex->chunks);
	}
}

static void pump_entries(struct migration *g)
{
	struct mig_export *ex = &g->ex;
	for (struct mig_tee *t = ex->head; t != NULL; t = t->next) {
		if (t->index <= ex->sent_index)
			continue;
		if (t->index > ex->acked + MIG_WINDOW_ENTRIES)
			return;
		/* An entry longer than one message (a value of many MiB)
		 * goes in parts: ENTRY_PARTs, then an ENTRY with the rest,
		 * each saying where its bytes start in the entry. A full
		 * relay queue stops it midway; the next tick goes on. */
		if (ex->part_index != t->index) {
			ex->part_index = t->index;
			ex->part_sent = 0;
		}
		while (t->len - ex->part_sent > MIG_DATA_MAX) {
			if (send_msg(g, MIG_ENTRY_PART, t->index, ex->part_sent,
				     t->payload + ex->part_sent,
				     MIG_DATA_MAX) != 0)
				return;
			ex->part_sent += MIG_DATA_MAX;
		}
		if (send_msg(g, MIG_ENTRY, t->index, ex->part_sent,
			     t->payload + ex->part_sent,
			     t->len - ex->part_sent) != 0)
			return;
		ex->sent_index = t->index;
		ex->part_index = 0;
	}
}

void mig_export_tick(struct migration *g)
{
	struct mig_export *ex = &g->ex;
	if (!ex->open)
		return;
	if (!mig_leads(g)) {
		LOG_INFO("migration: export session %" PRIx64 " ends: this "
			 "node no longer leads",
			 ex->session);
		mig_export_close(g);
		return;
	}
	struct kv_migration km;
	mig_kv_state(g, &km);
	if (km.aborted) {
		LOG_INFO("migration: export session %" PRIx64 " ends: the "
			 "migration was aborted",
			 ex->session);
		mig_export_close(g);
		return;
	}
	/* Without the relay the session waits, keeping its entries (up to
	 * MIG_TEE_BYTES_MAX): the next request resumes after its import
	 * index instead of starting from a new snapshot. */
	if (!g->active)
		return;
	if (!ex->snap_begun) {
		start_snapshot(g); /* the map's view was busy: again */
		if (!ex->snap_begun)
			return;
	}
	if (ex->snap_running || !ex->snap_sent) {
		pump_snapshot(g);
		if (!ex->snap_sent)
			return;
	}
	pump_entries(g);
	uint64_t now = mig_now(g);
	bool all_sent = ex->tail == NULL || ex->sent_index >= ex->tail->index;
	if (ex->fence_index != 0 &&
	    now - ex->last_fenced_ms >= MIG_HEAD_EVERY_MS) {
		/* At once, before the stream reached F (the importer takes
		 * authority only once its own import index did), and to
		 * every new node, not only the importer: each then holds its
		 * clients' commands until authority instead of sending them
		 * here, where they would be refused. */
		baton_node_id to = ex->to_node;
		ex->to_node = 0;
		int rv = send_msg(g, MIG_FENCED, ex->fence_index, 0, NULL, 0);
		ex->to_node = to;
		if (rv == 0)
			ex->last_fenced_ms = now;
	}
	if (all_sent && now - ex->last_sent_ms >= MIG_HEAD_EVERY_MS)
		send_msg(g, MIG_HEAD, ex->sent_index, 0, NULL, 0);
}

static void on_seal_applied(void *data, int status, const uint8_t *reply,
			    size_t len)
{
	struct migration *g = data;
	(void)reply;
	(void)len;
	g->ex.seal_proposed = false;
	if (status != 0)
		LOG_WARN("migration: the seal was not committed (%s): proposed "
			 "again at the next AUTHORITY",
			 baton_strerror(status));
}

void mig_export_authority_seen(struct migration *g)
{
	struct mig_export *ex = &g->ex;
	ex->authority_seen = true;
	struct kv_migration km;
	mig_kv_state(g, &km);
	if (km.sealed || ex->seal_proposed || !mig_leads(g))
		return;
	/* Replicated, so the fence stays for good on every node and across
	 * restarts: no unfence may give two clusters authority. */
	if (mig_propose_control(g->s, KV_CONTROL_SEAL, on_seal_applied, g) ==
	    0) {
		ex->seal_proposed = true;
		LOG_INFO("migration: cluster %s took write authority after "
			 "this cluster's fence: sealing it",
			 g->authority_cluster);
	}
}

int mig_propose_control(struct server *s, enum kv_control_op op,
			baton_node_propose_cb cb, void *data)
{
	struct baton_buf p;
	baton_buf_init(&p);
	uint8_t kind = PAYLOAD_KV;
	int rv = baton_buf_append(&p, &kind, 1);
	if (rv == 0)
		rv = kv_encode_control(server_machine_stamp(s), op, &p);
	if (rv == 0)
		rv = baton_node_propose(s->node, p.data, p.len, cb, data);
	baton_buf_free(&p);
	return rv;
}
