/*
 * The node's side of a migration between two clusters (docs/relay.md): the
 * relay client, the view it installs, which messages it accepts, the timer
 * that drives the export (old side) and the import (new side), and the
 * proofs its proxy asks for. INFO's migration section, the readiness and
 * BATON.MIGRATION's commands are in migration_admin.c.
 */
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baton/assert.h"
#include "log.h"
#include "migration_internal.h"

/* ---- small facts --------------------------------------------------------- */

bool mig_is_new_side(const struct migration *g)
{
	return g->s->cfg.migrate_from[0] != '\0';
}

bool mig_leads(const struct migration *g)
{
	struct server *s = g->s;
	return s->node != NULL && s->leader == s->cfg.id;
}

uint64_t mig_now(const struct migration *g)
{
	return uv_now(g->s->loop);
}

bool mig_cluster_in_view(const struct migration *g, const char *cluster)
{
	for (uint32_t i = 0; i < g->n_view; i++) {
		const struct mig_view_node *v = &g->view[i];
		bool self = v->id == g->s->cfg.id &&
			    strcmp(v->cluster, g->s->cfg.relay_cluster) == 0;
		if (!self && v->connected && strcmp(v->cluster, cluster) == 0)
			return true;
	}
	return false;
}

bool mig_unsealed_with(const struct migration *g, const char *cluster)
{
	const struct server_config *c = &g->s->cfg;
	return c->has_unsealed_release && mig_is_new_side(g) &&
	       strcmp(cluster, c->migrate_from) == 0;
}

void mig_kv_state(const struct migration *g, struct kv_migration *out)
{
	kv_migration_state(g->s->machine.kv, out);
}

int mig_send(struct migration *g, const char *to_cluster, baton_node_id to_node,
	     const struct migration_msg *msg)
{
	struct migration_msg m = *msg;
	snprintf(m.from_cluster, sizeof m.from_cluster, "%s",
		 g->s->cfg.relay_cluster);
	snprintf(m.to_cluster, sizeof m.to_cluster, "%s", to_cluster);
	m.from_node = g->s->cfg.id;
	m.to_node = to_node;
	struct baton_buf b;
	baton_buf_init(&b);
	/* Every message a number above the last: the receiver refuses one
	 * at or below the last it accepted from this node (a replay). */
	m.seq = ++g->seq_next;
	bool unsealed = mig_unsealed_with(g, to_cluster);
	/* Only to the cluster the operator named as predating sealing:
	 * format 1 in clear, as its release reads it. */
	int rv = unsealed ? migration_msg_encode_v1(&m, &b)
			  : migration_msg_seal(&g->keys, &m, &b);
	if (rv == 0)
		rv = relay_client_send(g->relay, to_cluster, to_node, b.data,
				       b.len);
	baton_buf_free(&b);
	if (rv == 0)
		g->stats.msgs_out++;
	if (rv == 0 && unsealed)
		g->stats.unsealed_out++;
	return rv;
}

/* ---- the relay client's callbacks -----------------------------------------
 */

/* A new node that seals (no --migrate-from-unsealed) and an old cluster
 * of a release before sealing never understand each other: each drops
 * the other's messages as malformed. Note the flags that make the
 * migration possible (docs/relay.md, "Migrating from 1.3.0"): said as
 * migration_not_ready and logged while nothing was imported (a newer
 * binary emulating that release seals, and answers). */
static void notice_unsealed_old(struct migration *g)
{
	const struct server_config *c = &g->s->cfg;
	if (!mig_is_new_side(g) || c->has_unsealed_release)
		return;
	struct baton_release sealed = baton_release_sealed_migration_since();
	for (uint32_t i = 0; i < g->n_view; i++) {
		const struct mig_view_node *v = &g->view[i];
		if (strcmp(v->cluster, c->migrate_from) != 0 ||
		    baton_release_none(v->release) ||
		    baton_release_compare(v->release, sealed) >= 0)
			continue;
		g->old_unsealed = v->release;
		char r[BATON_RELEASE_STR_MAX];
		baton_release_format(v->release, r);
		snprintf(g->old_unsealed_why, sizeof g->old_unsealed_why,
			 "nothing came from cluster %s (release %s, before "
			 "sealed messages): start the new nodes with "
			 "--migrate-from-unsealed %s and the relay with "
			 "--open-cluster %s (docs/relay.md)",
			 c->migrate_from, r, r, c->migrate_from);
		return;
	}
}

static void on_view(void *arg, uint64_t number,
		    const struct relay_view_node *nodes, size_t n)
{
	struct migration *g = arg;
	BATON_ASSERT(n <= BATON_RELAY_NODES_MAX);
	g->view_number = number;
	g->n_view = 0;
	for (size_t i = 0; i < n; i++) {
		struct mig_view_node *v = &g->view[g->n_view++];
		snprintf(v->cluster, sizeof v->cluster, "%s",
			 nodes[i].cluster_id);
		v->id = nodes[i].node_id;
		v->incarnation = nodes[i].incarnation;
		v->release = nodes[i].release;
		snprintf(v->address, sizeof v->address, "%s", nodes[i].address);
		v->connected = nodes[i].connected;
	}
	/* Remember every node of the other cluster seen: a restarted
	 * relay's first views are partial, and its clients still need a
	 * node to answer them. */
	for (uint32_t i = 0; i < g->n_view; i++) {
		const struct mig_view_node *v = &g->view[i];
		if (strcmp(v->cluster, g->s->cfg.relay_cluster) == 0)
			continue;
		uint32_t k = 0;
		while (k < g->n_known &&
		       !(g->known[k].id == v->id &&
			 strcmp(g->known[k].cluster, v->cluster) == 0))
			k++;
		if (k == g->n_known) {
			if (g->n_known == MIG_KNOWN_MAX)
				continue;
			g->n_known++;
		}
		g->known[k] = *v;
	}
	LOG_INFO("relay: view %" PRIu64 " with %u nodes", number, g->n_view);
	notice_unsealed_old(g);
}

static void on_active(void *arg, bool active)
{
	struct migration *g = arg;
	if (active != g->active)
		LOG_INFO("relay: %s", active ? "activated" : "inactive");
	/* A release before sealing (1.3.0) forgets the messages it has not
	 * delivered to a node that is out of its view, as this node is
	 * while the relay restarts, and format 1 has no sequence number to
	 * show the hole: the rest of its session would be imported past
	 * entries that never came. So the session ends here; the next one
	 * resumes after the import index, from the old leader's kept
	 * entries (docs/relay.md, "Migrating from 1.3.0"). */
	if (!active && g->active && g->s->cfg.has_unsealed_release &&
	    mig_is_new_side(g) && g->im.session != 0) {
		LOG_INFO("migration: the relay link went down: the unsealed "
			 "import session %" PRIx64 " ends (it resumes after "
			 "the import index)",
			 g->im.session);
		g->im.session = 0;
	}
	g->active = active;
}

/* May a message from this cluster reach this node at all? The old side
 * hears only the cluster named by --migrate-to; the new side the cluster
 * named by --migrate-from, and its own (FENCED and AUTHORITY that its
 * leader passes on). */
static bool sender_allowed(const struct migration *g, const char *cluster)
{
	const struct server_config *c = &g->s->cfg;
	if (mig_is_new_side(g))
		return strcmp(cluster, c->migrate_from) == 0 ||
		       strcmp(cluster, c->relay_cluster) == 0;
	return c->migrate_to[0] != '\0' && strcmp(cluster, c->migrate_to) == 0;
}

/* The release node `id` of `cluster` registered with, or none. */
static struct baton_release view_release(const struct migration *g,
					 const char *cluster, baton_node_id id)
{
	for (uint32_t i = 0; i < g->n_view; i++)
		if (g->view[i].id == id &&
		    strcmp(g->view[i].cluster, cluster) == 0)
			return g->view[i].release;
	return (struct baton_release){0, 0, 0};
}

/* A format-1 message from the cluster named by --migrate-from-unsealed
 * (docs/relay.md, "Migrating from 1.3.0"): nothing authenticates it, so
 * it is taken only from a node registered with a release before sealing
 * (a node of a sealing release never speaks format 1: its operator gave
 * it a migration secret), and only of the types an old leader sends to
 * an importer: never AUTHORITY, EXPORT_REQ, ACK or HANDOFF. The sender
 * is the one the relay names. false (counted and logged) if dropped. */
static bool accept_unsealed(struct migration *g, const char *from_cluster,
			    baton_node_id from_node, const uint8_t *payload,
			    size_t len, struct migration_msg *m)
{
	const struct server_config *c = &g->s->cfg;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	struct baton_release r = view_release(g, from_cluster, from_node);
	struct baton_release sealed = baton_release_sealed_migration_since();
	if (baton_release_none(r) || baton_release_compare(r, sealed) >= 0) {
		g->stats.refused++;
		LOG_WARN_LIMITED(
			"migration: a message from node %" PRIu64
			" of cluster %s refused: it registered at the relay "
			"as release %s, which seals its messages (%s and "
			"later); --migrate-from-unsealed %s speaks the "
			"unsealed format only to a release before %s",
			from_node, from_cluster,
			baton_release_none(r) ? "(none)"
					      : baton_release_format(r, a),
			baton_release_format(sealed, b),
			baton_release_format(c->unsealed_release, a),
			baton_release_format(sealed, b));
		return false;
	}
	int rv = migration_msg_decode_v1(payload, len, m);
	if (rv != 0) {
		g->stats.bad_msgs++;
		LOG_WARN_LIMITED("migration: a malformed migration message "
				 "(%zu bytes, not format 1, which "
				 "--migrate-from-unsealed expects of cluster "
				 "%s) from node %" PRIu64 ": dropped",
				 len, from_cluster, from_node);
		return false;
	}
	bool exporter_type = m->type != MIG_EXPORT_REQ && m->type != MIG_ACK &&
			     m->type != MIG_HANDOFF && m->type != MIG_AUTHORITY;
	if (!exporter_type) {
		g->stats.refused++;
		LOG_WARN_LIMITED("migration: an unsealed %s from node %" PRIu64
				 " of cluster %s refused: only an old "
				 "leader's stream is taken unsealed",
				 migration_msg_name(m->type), from_node,
				 from_cluster);
		return false;
	}
	snprintf(m->from_cluster, sizeof m->from_cluster, "%s", from_cluster);
	snprintf(m->to_cluster, sizeof m->to_cluster, "%s", c->relay_cluster);
	m->from_node = from_node;
	g->stats.unsealed_in++;
	return true;
}

/* Open and check a message: false (counted and logged) if it is dropped. */
static bool accept_msg(struct migration *g, const char *from_cluster,
		       baton_node_id from_node, const uint8_t *payload,
		       size_t len, struct migration_msg *m)
{
	const struct server_config *c = &g->s->cfg;
	if (!mig_is_new_side(g) && c->migrate_to[0] == '\0') {
		g->stats.refused++;
		LOG_WARN_LIMITED("migration: a message (%zu bytes) from node "
				 "%" PRIu64 " of cluster %s ignored: this node "
				 "takes part in no migration (no --migrate-to)",
				 len, from_node, from_cluster);
		return false;
	}
	if (mig_unsealed_with(g, from_cluster))
		return accept_unsealed(g, from_cluster, from_node, payload, len,
				       m);
	int rv = migration_msg_open(&g->keys, payload, len, m, &g->plain);
	if (rv == BATON_EINVAL) {
		g->stats.forged++;
		LOG_WARN_LIMITED(
			"migration: a %s message said to be from node %" PRIu64
			" of cluster %s (relayed from node %" PRIu64
			" of cluster %s) does not authenticate: forged, "
			"altered, or sealed with another migration secret; "
			"dropped (check --migration-secret-file on both "
			"clusters)",
			migration_msg_name(m->type), m->from_node,
			m->from_cluster, from_node, from_cluster);
		return false;
	}
	if (rv != 0) {
		g->stats.bad_msgs++;
		struct migration_msg v1;
		if (migration_msg_decode_v1(payload, len, &v1) == 0 &&
		    !mig_is_new_side(g))
			LOG_WARN_LIMITED(
				"migration: an unsealed (format 1) %s message "
				"from node %" PRIu64 " of cluster %s: dropped; "
				"this node seals and reads only sealed "
				"messages (format 2): the unsealed format is "
				"never spoken by a node that has a migration "
				"secret",
				migration_msg_name(v1.type), from_node,
				from_cluster);
		else if (migration_msg_decode_v1(payload, len, &v1) == 0)
			LOG_WARN_LIMITED(
				"migration: an unsealed (format 1) %s message "
				"from node %" PRIu64 " of cluster %s: dropped; "
				"this node speaks only sealed messages (format "
				"2) with that cluster. A cluster of a release "
				"before sealing (1.3.0) migrates only to nodes "
				"started with --migrate-from-unsealed RELEASE "
				"(docs/relay.md, \"Migrating from 1.3.0\")",
				migration_msg_name(v1.type), from_node,
				from_cluster);
		else
			LOG_WARN_LIMITED("migration: a malformed migration "
					 "message (%zu bytes, %s) from node "
					 "%" PRIu64 " of cluster %s: dropped",
					 len, baton_strerror(rv), from_node,
					 from_cluster);
		return false;
	}
	/* Authentic: the sealed sender is the one that counts. One the
	 * relay names otherwise, or a message for another cluster, was
	 * passed on by a relay that lies. */
	if (strcmp(m->to_cluster, c->relay_cluster) != 0 ||
	    (m->to_node != 0 && m->to_node != c->id) ||
	    strcmp(m->from_cluster, from_cluster) != 0 ||
	    m->from_node != from_node) {
		g->stats.refused++;
		LOG_WARN_LIMITED("migration: a %s message from node %" PRIu64
				 " of cluster %s for node %" PRIu64
				 " of cluster %s came as from node %" PRIu64
				 " of cluster %s: dropped",
				 migration_msg_name(m->type), m->from_node,
				 m->from_cluster, m->to_node, m->to_cluster,
				 from_node, from_cluster);
		return false;
	}
	if (!sender_allowed(g, m->from_cluster)) {
		g->stats.refused++;
		LOG_WARN_LIMITED(
			"migration: a %s message from node %" PRIu64
			" of cluster %s refused: this node migrates "
			"%s cluster %s only",
			migration_msg_name(m->type), m->from_node,
			m->from_cluster, mig_is_new_side(g) ? "from" : "to",
			mig_is_new_side(g) ? c->migrate_from : c->migrate_to);
		return false;
	}
	if (!migration_replay_check(&g->replay, m)) {
		g->stats.replayed++;
		LOG_WARN_LIMITED("migration: a %s message from node %" PRIu64
				 " of cluster %s with sequence %" PRIu64
				 " came again (a replay, or the relay resent "
				 "it): dropped",
				 migration_msg_name(m->type), m->from_node,
				 m->from_cluster, m->seq);
		return false;
	}
	return true;
}

/* AUTHORITY on the old side: the cluster named by --migrate-to took over
 * this cluster's writes. Believed only after this cluster's own fence
 * for that cluster applied: before it, the old cluster still holds
 * authority, whatever a message says. */
static void on_authority_old(struct migration *g, const struct migration_msg *m)
{
	struct kv_migration km;
	mig_kv_state(g, &km);
	if (!km.fenced || strcmp(km.fence_target, g->s->cfg.migrate_to) != 0) {
		g->stats.refused++;
		LOG_WARN_LIMITED("migration: AUTHORITY from node %" PRIu64
				 " of cluster %s ignored: this cluster has "
				 "not fenced for it",
				 m->from_node, m->from_cluster);
		return;
	}
	if (m->value == 0)
		return;
	if (g->authority_leader != m->value)
		LOG_INFO("relay: cluster %s holds write authority since old "
			 "index %" PRIu64 "; its leader is node %" PRIu64,
			 m->from_cluster, m->index, m->value);
	snprintf(g->authority_cluster, sizeof g->authority_cluster, "%s",
		 m->from_cluster);
	g->authority_leader = m->value;
	mig_export_authority_seen(g);
}

static void on_data(void *arg, const char *from_cluster,
		    baton_node_id from_node, uint64_t from_incarnation,
		    bool multicast, const uint8_t *payload, size_t len)
{
	(void)from_incarnation;
	(void)multicast;
	struct migration *g = arg;
	struct migration_msg m;
	if (!accept_msg(g, from_cluster, from_node, payload, len, &m))
		return;
	g->stats.msgs_in++;
	bool own = strcmp(m.from_cluster, g->s->cfg.relay_cluster) == 0;
	if (m.type == MIG_AUTHORITY && mig_is_new_side(g)) {
		/* Our leader holds authority; our own state will say so once
		 * it caught up (migration_serve.c holds commands until then).
		 */
		if (own)
			g->authority_seen_ms = mig_now(g);
		return;
	}
	if (m.type == MIG_AUTHORITY) {
		on_authority_old(g, &m);
		return;
	}
	/* An unsealed FENCED proves nothing: believed only from the node
	 * this leader's import session takes its stream from (1.3.0 sends
	 * it there alone), else anyone registered as the old cluster could
	 * make this node hold its clients' commands at will. */
	bool fenced_believed =
		!mig_unsealed_with(g, m.from_cluster) ||
		(mig_leads(g) && g->im.session != 0 &&
		 m.session == g->im.session && m.from_node == g->im.from_node);
	if (mig_is_new_side(g) && m.type == MIG_FENCED && fenced_believed) {
		/* The old cluster fenced (its leader told every new node, or
		 * our leader relayed it): hold clients' commands until our
		 * authority, rather than send them where they are refused. */
		g->handoff_seen_ms = mig_now(g);
		if (own)
			return;
	}
	if (mig_is_new_side(g) && own)
		return; /* nothing else comes from our own cluster */
	if (mig_is_new_side(g))
		mig_import_on_msg(g, m.from_cluster, m.from_node, &m);
	else
		mig_export_on_msg(g, m.from_cluster, m.from_node, &m);
}

static void on_tick(uv_timer_t *t)
{
	struct migration *g = t->data;
	if (g->s->shutting_down || g->s->node == NULL)
		return;
	if (mig_is_new_side(g)) {
		/* The relay deactivates by itself once this cluster holds
		 * authority and the old one is gone (docs/relay-server.md). */
		struct kv_migration km;
		mig_kv_state(g, &km);
		relay_client_set_state(
			g->relay,
			km.authority ? BATON_RELAY_NODE_STATE_AUTHORITY : 0);
		mig_import_tick(g);
		mig_serve_tick(g);
	} else {
		mig_export_tick(g);
	}
}

/* ---- start and stop --------------------------------------------------------
 */

static uint64_t new_incarnation(void)
{
	/* Only needs to differ from this node's earlier processes. */
	uint64_t x = 0;
	FILE *f = fopen("/dev/urandom", "rb");
	if (f != NULL) {
		if (fread(&x, sizeof x, 1, f) != 1)
			x = 0;
		fclose(f);
	}
	if (x == 0)
		x = ((uint64_t)getpid() << 32) ^ (uint64_t)uv_hrtime();
	return x != 0 ? x : 1;
}

/* This process's first sequence number: the wall clock in microseconds,
 * so that a restarted sender continues above what its earlier process
 * sent (unless it sent more than a million messages a second). */
static uint64_t start_seq(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int migration_start(struct server *s)
{
	if (s->cfg.relay[0] == '\0')
		return 0;
	struct migration *g = calloc(1, sizeof *g);
	int rv0 = 0;
	if (g == NULL)
		return BATON_ENOMEM;
	g->s = s;
	baton_buf_init(&g->ex.chunk);
	baton_buf_init(&g->plain);
	baton_buf_init(&g->im.part);
	if (s->cfg.has_migration_secret)
		rv0 = migration_keys_init(&g->keys,
					  s->cfg.migration_secret.bytes,
					  s->cfg.migration_secret.len);
	if (rv0 != 0) {
		free(g);
		return rv0;
	}
	g->seq_next = start_seq();
	struct relay_client_config rc = {
		.relay_addr = s->cfg.relay,
		.cluster_id = s->cfg.relay_cluster,
		.node_id = s->cfg.id,
		.incarnation = new_incarnation(),
		.release = s->cfg.profile.release,
		.address = s->cfg.listen,
		.secret = s->cfg.has_relay_secret ? &s->cfg.relay_secret : NULL,
	};
	struct relay_client_callbacks cb = {
		.arg = g,
		.on_view = on_view,
		.on_active = on_active,
		.on_data = on_data,
	};
	int rv = relay_client_start(s->loop, &rc, &cb, &g->relay);
	if (rv != 0) {
		LOG_ERROR("cannot start the relay client for %s: %s",
			  s->cfg.relay, baton_strerror(rv));
		migration_keys_wipe(&g->keys);
		baton_buf_free(&g->plain);
		free(g);
		return rv;
	}
	uv_timer_init(s->loop, &g->tick);
	g->tick.data = g;
	uv_timer_start(&g->tick, on_tick, MIG_TICK_MS, MIG_TICK_MS);
	s->migration = g;
	LOG_INFO("relay %s: registering as node %" PRIu64 " of cluster %s%s%s",
		 s->cfg.relay, s->cfg.id, s->cfg.relay_cluster,
		 mig_is_new_side(g) ? ", importing from cluster " : "",
		 s->cfg.migrate_from);
	if (s->cfg.has_unsealed_release) {
		char r[BATON_RELEASE_STR_MAX];
		LOG_WARN("WARNING: --migrate-from-unsealed %s: messages with "
			 "cluster %s are the unsealed format 1 of release %s: "
			 "NOT authenticated, NOT encrypted; anyone who can "
			 "register as cluster %s at the relay can read the "
			 "import and feed it, and this node proxies its "
			 "clients (and --password) to such nodes without a "
			 "proof. This cluster's own messages stay sealed "
			 "(docs/relay.md, \"Migrating from 1.3.0\")",
			 baton_release_format(s->cfg.unsealed_release, r),
			 s->cfg.migrate_from, r, s->cfg.migrate_from);
	}
	return 0;
}

/* Freed once both the timer and the relay client have closed: libuv
 * holds the timer's memory until its close completes. */
static void release(struct migration *g)
{
	BATON_ASSERT(g->closing > 0);
	if (--g->closing > 0)
		return;
	baton_buf_free(&g->ex.chunk);
	baton_buf_free(&g->plain);
	baton_buf_free(&g->im.part);
	migration_keys_wipe(&g->keys);
	free(g);
}

static void on_tick_closed(uv_handle_t *h)
{
	release(h->data);
}

static void on_relay_closed(void *arg)
{
	release(arg);
}

void migration_stop(struct server *s)
{
	struct migration *g = s->migration;
	if (g == NULL)
		return;
	s->migration = NULL;
	mig_serve_close(g);
	mig_export_close(g); /* while the map is sure to be there */
	g->closing = 2;
	uv_timer_stop(&g->tick);
	uv_close((uv_handle_t *)&g->tick, on_tick_closed);
	relay_client_close(g->relay, on_relay_closed, g);
}

void migration_kv_applied(struct server *s, uint64_t index,
			  const uint8_t *payload, size_t len)
{
	struct migration *g = s->migration;
	if (g != NULL && !mig_is_new_side(g))
		mig_export_applied(g, index, payload, len);
}

bool migration_refused_write(const uint8_t *reply, size_t len)
{
	static const char fenced[] = KV_FENCED_REPLY;
	static const char importing[] = KV_IMPORTING_REPLY;
	return (len == sizeof fenced - 1 && memcmp(reply, fenced, len) == 0) ||
	       (len == sizeof importing - 1 &&
		memcmp(reply, importing, len) == 0);
}

bool migration_writes_frozen(const struct server *s)
{
	struct kv_migration km;
	kv_migration_state(s->machine.kv, &km);
	return km.fenced || km.importing;
}

/* ---- proofs for the proxy (docs/relay.md, "Proxying") ---------------- */

static bool has_keys(const struct migration *g)
{
	return g != NULL && g->keys.secret_len > 0;
}

/* The cluster this node's proxy sends to: the one the operator named. */
static const char *other_cluster(const struct server *s)
{
	return s->cfg.migrate_from[0] != '\0' ? s->cfg.migrate_from
					      : s->cfg.migrate_to;
}

bool migration_proxy_needs_proof(const struct server *s)
{
	/* A new node proxies only to the --migrate-from cluster (before
	 * authority; after it, it answers itself). A release before sealing
	 * has no BATON.MIGRATION.PROVE and no migration secret: under
	 * --migrate-from-unsealed nothing can be proven (docs/relay.md,
	 * "Migrating from 1.3.0", says what that exposes). */
	return s->migration != NULL && !s->cfg.has_unsealed_release;
}

int migration_proof_request(struct server *s, const char *addr,
			    struct baton_buf *out,
			    uint8_t expect[MIG_PROOF_BYTES], char *why,
			    size_t cap)
{
	struct migration *g = s->migration;
	uint8_t nonce[MIG_PROOF_NONCE_BYTES];
	const char *me = s->cfg.relay_cluster;
	if (!has_keys(g) || other_cluster(s)[0] == '\0') {
		snprintf(why, cap,
			 "this node has no migration secret or no "
			 "--migrate-to/--migrate-from to check the node "
			 "against; its password was not sent");
		return -1;
	}
	if (RAND_bytes(nonce, sizeof nonce) != 1 ||
	    migration_proxy_proof(&g->keys, other_cluster(s), me, nonce,
				  sizeof nonce, addr, expect) != 0) {
		snprintf(why, cap, "no nonce or no proof could be made");
		return -1;
	}
	if (resp_array(out, 3) != 0 ||
	    resp_bulk(out, "BATON.MIGRATION.PROVE", 21) != 0 ||
	    resp_bulk(out, nonce, sizeof nonce) != 0 ||
	    resp_bulk(out, me, strlen(me)) != 0) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	return 0;
}

bool migration_proof_check(const uint8_t expect[MIG_PROOF_BYTES],
			   const uint8_t *r, size_t n, char *why, size_t cap)
{
	char head[8];
	int k = snprintf(head, sizeof head, "$%u\r\n", MIG_PROOF_BYTES);
	BATON_ASSERT(k > 0 && (size_t)k < sizeof head);
	size_t h = (size_t)k;
	if (n == h + MIG_PROOF_BYTES + 2 && memcmp(r, head, h) == 0 &&
	    CRYPTO_memcmp(r + h, expect, MIG_PROOF_BYTES) == 0)
		return true;
	size_t shown = n > 2 ? n - 2 : 0;
	if (n > 0 && r[0] == '-')
		snprintf(why, cap,
			 "it did not prove it holds the migration secret (it "
			 "answered '%.*s'); its password was not sent",
			 (int)(shown < 200 ? shown : 200), (const char *)r);
	else
		snprintf(why, cap,
			 "it did not prove it holds the migration secret (a "
			 "wrong proof: another secret, or a node that is not "
			 "at this address); its password was not sent");
	return false;
}

int migration_cmd_prove(struct command_ctx *x)
{
	struct server *s = x->s;
	struct migration *g = s->migration;
	if (x->argc != 3)
		return command_wrong_args(x);
	if (!has_keys(g)) {
		resp_error(command_out(x), "ERR this node holds no migration "
					   "secret");
		return command_done(x);
	}
	char asker[MIG_CLUSTER_MAX + 1];
	if (x->lens[1] != MIG_PROOF_NONCE_BYTES || x->lens[2] == 0 ||
	    x->lens[2] > MIG_CLUSTER_MAX) {
		resp_error(command_out(x),
			   "ERR usage: BATON.MIGRATION.PROVE <nonce of %u "
			   "bytes> <cluster>",
			   MIG_PROOF_NONCE_BYTES);
		return command_done(x);
	}
	command_arg_str(x, 2, asker, sizeof asker);
	uint8_t proof[MIG_PROOF_BYTES];
	/* Bound to this node's own address, not one the asker names: a
	 * stranger who passes the asker's nonce on gets a proof for this
	 * address, which is not the stranger's. */
	if (migration_proxy_proof(&g->keys, s->cfg.relay_cluster, asker,
				  x->argv[1], MIG_PROOF_NONCE_BYTES,
				  s->cfg.listen, proof) != 0) {
		resp_error(command_out(x), "ERR the proof could not be "
					   "computed");
		return command_done(x);
	}
	resp_bulk(command_out(x), proof, sizeof proof);
	return command_done(x);
}
