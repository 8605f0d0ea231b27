/*
 * The new cluster's side of a migration (docs/relay.md): its leader asks
 * the old cluster for the export stream, proposes each record as an entry
 * of its own log (applying them raises the replicated import index, so a
 * leader change on either side resumes after it), asks for hand-off once
 * ready, and takes write authority once the stream reached the fence.
 */
#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "migration_internal.h"

/* Sending AUTHORITY again (old nodes that reconnect learn it), ACK. */
#define AUTHORITY_EVERY_MS 200u
#define ACK_EVERY_MS 100u
#define HANDOFF_EVERY_MS 500u

static uint64_t random_session(const struct migration *g)
{
	/* Unpredictable: a session is bound to the EXPORT_REQ that opened
	 * it; the clock only stands in when there is no randomness. */
	uint64_t x = 0;
	if (RAND_bytes((unsigned char *)&x, sizeof x) != 1 || x == 0)
		x = (uv_hrtime() << 8) ^
		    (g->s->cfg.id * 0x9E3779B97F4A7C15ull) ^
		    (uint64_t)g->stats.sessions;
	return x != 0 ? x : 1;
}

static void on_proposed(void *data, int status, const uint8_t *reply,
			size_t len)
{
	struct migration *g = data;
	(void)reply;
	(void)len;
	BATON_ASSERT(g->im.proposing > 0);
	g->im.proposing--;
	if (status != 0 && g->im.session != 0) {
		/* Lost with this leadership (or refused): ask again from
		 * the import index the log holds. */
		LOG_INFO("migration: an import entry was not committed (%s): "
			 "asking for the stream again",
			 baton_strerror(status));
		g->im.session = 0;
	}
}

/* Propose 'K' + the kv payload `encode` appended. */
static void propose(struct migration *g, const struct baton_buf *kv_payload)
{
	struct baton_buf p;
	baton_buf_init(&p);
	uint8_t kind = PAYLOAD_KV;
	int rv = baton_buf_append(&p, &kind, 1);
	if (rv == 0)
		rv = baton_buf_append(&p, kv_payload->data, kv_payload->len);
	if (rv == 0)
		rv = baton_node_propose(g->s->node, p.data, p.len, on_proposed,
					g);
	baton_buf_free(&p);
	if (rv != 0) {
		LOG_INFO("migration: cannot propose an import entry (%s): "
			 "asking for the stream again",
			 baton_strerror(rv));
		g->im.session = 0;
		return;
	}
	g->im.proposing++;
}

/* The other nodes of this cluster hold their clients' commands from now
 * until authority (migration_serve.c) instead of sending them to the
 * fenced old cluster. */
static void tell_own_cluster(struct migration *g, uint64_t fence_index)
{
	struct migration_msg m = {
		.type = MIG_FENCED,
		.session = g->im.session,
		.applied = g->s->machine.applied_index,
		.index = fence_index,
	};
	mig_send(g, g->s->cfg.relay_cluster, 0, &m);
}

/* One more part of an entry too long for one message (ENTRY_PART, or the
 * last, ENTRY with a nonzero offset in value): it must start where the
 * bytes so far end, of the same old index; else the stream is asked for
 * again (ECORRUPT). Bounded by what one log entry may hold. */
static int entry_part(struct mig_import *im, const struct migration_msg *m)
{
	if (m->value == 0) {
		im->part_index = m->index;
		baton_buf_reset(&im->part);
	}
	if (im->part_index != m->index || m->value != im->part.len ||
	    im->part.len + m->len > MIG_ENTRY_BYTES_MAX) {
		im->part_index = 0;
		baton_buf_reset(&im->part);
		return BATON_ECORRUPT;
	}
	return baton_buf_append(&im->part, m->data, m->len);
}

void mig_import_on_msg(struct migration *g, const char *from_cluster,
		       baton_node_id from_node, const struct migration_msg *m)
{
	struct mig_import *im = &g->im;
	if (strcmp(from_cluster, g->s->cfg.migrate_from) != 0 ||
	    !mig_leads(g) || im->session == 0 || m->session != im->session)
		return; /* another cluster's, or a session given up */
	/* The first node of the old cluster to answer in this session (its
	 * leader: only the leader exports) is the one the stream comes from;
	 * another is not heard in this session. */
	if (im->from_node == 0)
		im->from_node = from_node;
	if (from_node != im->from_node) {
		LOG_WARN_LIMITED("migration: %s from node %" PRIu64
				 " of cluster %s ignored: session %" PRIx64
				 " imports from node %" PRIu64,
				 migration_msg_name(m->type), from_node,
				 from_cluster, im->session, im->from_node);
		return;
	}
	im->progress_ms = mig_now(g);
	if (m->applied > im->old_applied)
		im->old_applied = m->applied;
	struct baton_buf kv;
	baton_buf_init(&kv);
	int rv = 0;
	switch (m->type) {
	case MIG_BEGIN: {
		/* The old cluster's UUID: the first import pins it (in the
		 * replicated state), so that no other cluster registered
		 * under the same name can feed this one later. */
		struct kv_migration km;
		mig_kv_state(g, &km);
		if (mig_unsealed_with(g, from_cluster)) {
			/* Format 1 (1.3.0) names no UUID: nothing to pin
			 * (docs/relay.md, "Migrating from 1.3.0"). */
			if (m->len != 0) {
				rv = BATON_ECORRUPT;
				break;
			}
			LOG_INFO("migration: importing a snapshot of cluster "
				 "%s at index %" PRIu64 " (unsealed, format 1)",
				 from_cluster, m->index);
			rv = kv_encode_import_begin(m->index, m->value, &kv);
			break;
		}
		if (m->len != KV_CLUSTER_UUID_BYTES) {
			rv = BATON_ECORRUPT;
			break;
		}
		if (km.has_source_uuid && memcmp(km.source_uuid, m->data,
						 KV_CLUSTER_UUID_BYTES) != 0) {
			LOG_WARN_LIMITED("migration: a snapshot from node "
					 "%" PRIu64 " of cluster %s refused: "
					 "that cluster's UUID is not the one "
					 "this cluster imported from first",
					 from_node, from_cluster);
			g->stats.refused++;
			rv = BATON_ESTATE;
			break;
		}
		LOG_INFO("migration: importing a snapshot of cluster %s at "
			 "index %" PRIu64,
			 from_cluster, m->index);
		rv = kv_encode_import_begin_from(m->index, m->value, m->data,
						 &kv);
		break;
	}
	case MIG_CHUNK:
		if (m->value > UINT32_MAX) {
			rv = BATON_ECORRUPT;
			break;
		}
		rv = kv_encode_import_chunk(m->index, (uint32_t)m->value,
					    m->data, m->len, &kv);
		break;
	case MIG_END:
		if (m->value > UINT32_MAX) {
			rv = BATON_ECORRUPT;
			break;
		}
		rv = kv_encode_import_end(m->index, (uint32_t)m->value, &kv);
		break;
	case MIG_ENTRY_PART:
		rv = entry_part(im, m);
		break;
	case MIG_ENTRY:
		if (m->value == 0) {
			rv = kv_encode_import_entry(m->index, m->data, m->len,
						    &kv);
			break;
		}
		rv = entry_part(im, m);
		if (rv == 0)
			rv = kv_encode_import_entry(m->index, im->part.data,
						    im->part.len, &kv);
		im->part_index = 0;
		baton_buf_reset(&im->part);
		break;
	case MIG_HEAD:
		break;
	case MIG_FENCED:
		if (im->fenced_at == 0) {
			LOG_INFO(
				"migration: cluster %s fenced at index %" PRIu64
				"; taking authority once imported",
				from_cluster, m->index);
			tell_own_cluster(g, m->index);
		}
		im->fenced_at = m->index;
		g->handoff_seen_ms = mig_now(g);
		break;
	default:
		g->stats.bad_msgs++;
		LOG_WARN("migration: unexpected %s from node %" PRIu64
			 " of cluster %s on the new side: dropped",
			 migration_msg_name(m->type), from_node, from_cluster);
	}
	if (rv != 0)
		LOG_WARN("migration: a %s message cannot be imported (%s): "
			 "asking for the stream again",
			 migration_msg_name(m->type), baton_strerror(rv));
	if (rv != 0)
		im->session = 0;
	else if (kv.len > 0)
		propose(g, &kv);
	baton_buf_free(&kv);
}

/* Voters of this cluster that hold what its leader committed. */
static uint32_t voters_caught_up(struct migration *g)
{
	struct baton_node_status st;
	baton_node_status(g->s->node, &st);
	uint32_t n = 0;
	for (uint32_t i = 0; i < st.raft.config.n; i++) {
		const struct baton_member *mb = &st.raft.config.members[i];
		if (mb->role != BATON_VOTER)
			continue;
		if (mb->id == st.raft.id ||
		    st.match[i] + MIG_HANDOFF_LAG_MAX >= st.raft.commit_index)
			n++;
	}
	return n;
}

static bool import_close(struct migration *g, const struct kv_migration *km,
			 uint64_t lag_max)
{
	return !km->snapshot_open && km->import_index > 0 &&
	       g->im.old_applied != 0 &&
	       g->im.old_applied <= km->import_index + lag_max;
}

bool mig_import_ready(struct migration *g, const char **why)
{
	struct kv_migration km;
	mig_kv_state(g, &km);
	*why = "";
	if (km.authority)
		return true;
	if (!mig_leads(g)) {
		*why = "hand-off not done, and this node does not lead the "
		       "import";
		return false;
	}
	if (!g->active) {
		*why = "the relay has not activated this node";
		return false;
	}
	if (!baton_release_none(g->old_unsealed) && km.import_index == 0 &&
	    g->im.old_applied == 0) {
		*why = g->old_unsealed_why;
		return false;
	}
	if (!import_close(g, &km, MIG_READY_LAG_MAX)) {
		*why = "the import is behind the old cluster";
		return false;
	}
	return true;
}

static void send_to_exporter(struct migration *g, uint8_t type, uint64_t index,
			     uint64_t value)
{
	struct migration_msg m = {
		.type = type,
		.session = g->im.session,
		.applied = g->s->machine.applied_index,
		.index = index,
		.value = value,
	};
	mig_send(g, g->s->cfg.migrate_from, g->im.from_node, &m);
}

static void request_stream(struct migration *g, const struct kv_migration *km)
{
	struct mig_import *im = &g->im;
	im->session = random_session(g);
	im->from_node = 0;
	im->part_index = 0;
	baton_buf_reset(&im->part);
	g->stats.sessions++;
	im->progress_ms = mig_now(g);
	im->acked_sent = 0;
	/* Where the old log is must be heard again in this session: a stale
	 * figure (from before a relay outage) would make the import look
	 * caught up and ask for hand-off while far behind. */
	im->old_applied = 0;
	const char *me = g->s->cfg.relay_cluster;
	struct migration_msg m = {
		.type = MIG_EXPORT_REQ,
		.session = im->session,
		.applied = g->s->machine.applied_index,
		.index = km->import_index,
		.data = (const uint8_t *)me,
		.len = strlen(me),
	};
	if (!baton_release_none(g->old_unsealed) && km->import_index == 0 &&
	    g->stats.sessions > 1)
		LOG_WARN_LIMITED("migration: nothing imported yet: %s",
				 g->old_unsealed_why);
	if (mig_send(g, g->s->cfg.migrate_from, 0, &m) != 0)
		im->session = 0;
	else
		LOG_INFO("migration: asking cluster %s for its stream after "
			 "index %" PRIu64 " (session %" PRIx64 ")",
			 g->s->cfg.migrate_from, km->import_index, im->session);
}

static void announce_authority(struct migration *g,
			       const struct kv_migration *km)
{
	uint64_t now = mig_now(g);
	if (now - g->im.authority_sent_ms < AUTHORITY_EVERY_MS)
		return;
	const char *me = g->s->cfg.relay_cluster;
	struct migration_msg m = {
		.type = MIG_AUTHORITY,
		.session = g->im.session,
		.applied = g->s->machine.applied_index,
		.index = km->authority_from,
		.value = g->s->cfg.id,
		.data = (const uint8_t *)me,
		.len = strlen(me),
	};
	/* To the old nodes (they send their clients' commands here now)
	 * and to this cluster's others: one still catching up holds its
	 * clients' commands until it applied the entry, rather than send
	 * them to the fenced old cluster. Only to a cluster with a node in
	 * the view: a message for nobody would wait in the relay client's
	 * queue, every 200 ms, once the old nodes are gone. */
	if (mig_cluster_in_view(g, g->s->cfg.migrate_from))
		mig_send(g, g->s->cfg.migrate_from, 0, &m);
	if (mig_cluster_in_view(g, g->s->cfg.relay_cluster))
		mig_send(g, g->s->cfg.relay_cluster, 0, &m);
	g->im.authority_sent_ms = now;
}

void mig_import_tick(struct migration *g)
{
	struct mig_import *im = &g->im;
	struct kv_migration km;
	mig_kv_state(g, &km);
	if (!mig_leads(g)) {
		im->session = 0;
		im->authority_proposed = false;
		return;
	}
	if (!g->active)
		return;
	if (km.aborted && !km.authority) {
		/* batonctl migrate abort: nothing more is asked of the old
		 * cluster (its clients are still served there). */
		if (im->session != 0)
			LOG_INFO("migration: the import stops: the migration "
				 "was aborted");
		im->session = 0;
		return;
	}
	uint64_t now = mig_now(g);
	if (km.authority) {
		if (im->authority_ms == 0) {
			im->authority_ms = now;
			LOG_INFO(
				"migration: this cluster holds write authority "
				"(old index %" PRIu64 ")",
				km.authority_from);
		}
		announce_authority(g, &km);
		return;
	}
	if (im->session == 0 || now - im->progress_ms > MIG_STALL_MS) {
		if (im->proposing == 0)
			request_stream(g, &km);
		return;
	}
	if (km.import_index != im->acked_sent ||
	    now - im->ack_ms >= ACK_EVERY_MS) {
		send_to_exporter(g, MIG_ACK, km.import_index,
				 km.snapshot_chunks);
		im->acked_sent = km.import_index;
		im->ack_ms = now;
	}
	if (im->fenced_at == 0 &&
	    (im->handoff_asked ||
	     (import_close(g, &km, MIG_HANDOFF_LAG_MAX) &&
	      voters_caught_up(g) >= MIG_HANDOFF_VOTERS)) &&
	    now - im->handoff_sent_ms >= HANDOFF_EVERY_MS) {
		if (im->handoff_ms == 0) {
			im->handoff_ms = now;
			LOG_INFO("migration: asking cluster %s for hand-off "
				 "(import index %" PRIu64
				 ", old applied %" PRIu64 ")",
				 g->s->cfg.migrate_from, km.import_index,
				 im->old_applied);
		}
		send_to_exporter(g, MIG_HANDOFF, km.import_index, 0);
		im->handoff_sent_ms = now;
	}
	if (im->fenced_at != 0 && km.import_index >= im->fenced_at &&
	    !im->authority_proposed && im->proposing == 0) {
		struct baton_buf kv;
		baton_buf_init(&kv);
		if (kv_encode_authority(im->fenced_at, &kv) == 0) {
			propose(g, &kv);
			im->authority_proposed = im->proposing > 0;
		}
		baton_buf_free(&kv);
	}
}
