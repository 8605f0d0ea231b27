/*
 * The figures of /metrics (Prometheus text format 0.0.4) and the verdict of
 * /health, for http.c (docs/metrics.md). Everything here runs on the node's
 * loop thread and reads what INFO and BATON.NODE/BATON.MEMBERS read
 * (baton_node_status, the upgrade status); the only figure from another
 * thread is the fsync histogram, whose counters are atomics.
 *
 * Client commands are counted per name, lower case; a name that is no
 * command of this node counts as "other", so the label's values are
 * bounded by the command table, whatever clients send.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "baton/assert.h"
#include "histogram.h"
#include "name_memo.h"
#include "server.h"

#define METRICS_COMMANDS_MAX 256u
#define METRICS_NAME_MAX 32u
/* A member the leader has had no connection to for this many election
 * timeouts is "down" (/health). */
#define METRICS_DOWN_TIMEOUTS 3u

struct member_contact {
	baton_node_id id;
	uint64_t last_ms;
};

struct metrics {
	/* Commands: names[i] is histograms[i]'s; the last slot "other". */
	char names[METRICS_COMMANDS_MAX][METRICS_NAME_MAX];
	uint32_t n_names;
	struct baton_histogram histograms[METRICS_COMMANDS_MAX + 1];
	/* The last name asked for, as sent, and its slot: a pipeline repeats
	 * its command, so most commands find their slot here. */
	struct baton_name_memo last_name;
	int last_slot;
	/* Sampled at each housekeeping tick. */
	baton_term term_seen;
	uint64_t elections_started;
	bool was_leader;
	struct member_contact contact[BATON_MAX_MEMBERS];
	uint32_t n_contact;
};

int metrics_init(struct server *s)
{
	struct metrics *m = calloc(1, sizeof *m);
	if (m == NULL)
		return -1;
	for (uint32_t i = 0; i <= METRICS_COMMANDS_MAX; i++)
		baton_histogram_init(&m->histograms[i],
				     baton_histogram_latency_bounds,
				     BATON_HISTOGRAM_LATENCY_N_BOUNDS);
	s->metrics = m;
	return 0;
}

void metrics_free(struct server *s)
{
	free(s->metrics);
	s->metrics = NULL;
}

static bool is_command(const char *lower)
{
	const char *name, *flags;
	int arity;
	for (size_t k = 0; command_local_at(k, &name, &arity, &flags); k++)
		if (strcasecmp(name, lower) == 0)
			return true;
	return kv_lookup((const uint8_t *)lower, strlen(lower)) != NULL;
}

/* The slot of a name (lower case), added if it is a command and there is
 * room; else the "other" slot. */
static int slot_of(struct metrics *m, const char *lower, size_t len)
{
	for (uint32_t i = 0; i < m->n_names; i++)
		if (strcmp(m->names[i], lower) == 0)
			return (int)i;
	if (m->n_names == METRICS_COMMANDS_MAX || !is_command(lower))
		return METRICS_COMMANDS_MAX;
	memcpy(m->names[m->n_names], lower, len + 1);
	return (int)m->n_names++;
}

int metrics_command_slot(struct server *s, const uint8_t *name, size_t len)
{
	struct metrics *m = s->metrics;
	if (m == NULL)
		return -1;
	char lower[METRICS_NAME_MAX];
	if (len == 0 || len >= sizeof lower)
		return METRICS_COMMANDS_MAX;
	/* A name's slot never changes once given. */
	if (baton_name_memo_is(&m->last_name, name, len))
		return m->last_slot;
	for (size_t i = 0; i < len; i++)
		lower[i] = (char)tolower(name[i]);
	lower[len] = '\0';
	int slot = slot_of(m, lower, len);
	if (baton_name_memo_set(&m->last_name, name, len))
		m->last_slot = slot;
	return slot;
}

void metrics_command_done(struct server *s, int slot, uint64_t ns)
{
	if (s->metrics == NULL || slot < 0 || slot > (int)METRICS_COMMANDS_MAX)
		return;
	baton_histogram_observe_ns(&s->metrics->histograms[slot], ns);
}

static struct member_contact *contact_of(struct metrics *m, baton_node_id id,
					 uint64_t now)
{
	for (uint32_t i = 0; i < m->n_contact; i++)
		if (m->contact[i].id == id)
			return &m->contact[i];
	if (m->n_contact == BATON_MAX_MEMBERS) {
		/* A member left: reuse the oldest slot. */
		uint32_t oldest = 0;
		for (uint32_t i = 1; i < m->n_contact; i++)
			if (m->contact[i].last_ms < m->contact[oldest].last_ms)
				oldest = i;
		m->contact[oldest] = (struct member_contact){id, now};
		return &m->contact[oldest];
	}
	m->contact[m->n_contact] = (struct member_contact){id, now};
	return &m->contact[m->n_contact++];
}

static bool peer_connected(const struct baton_node_status *st, baton_node_id id)
{
	for (uint32_t i = 0; i < st->transport.n_peers; i++)
		if (st->transport.peers[i].id == id)
			return st->transport.peers[i].connected;
	return false;
}

/* Every housekeeping tick: elections this node started (a term it voted
 * for itself in), and when the leader last had a connection to each
 * member. */
void metrics_tick(struct server *s)
{
	struct metrics *m = s->metrics;
	if (m == NULL)
		return;
	static struct baton_node_status st;
	baton_node_status(s->node, &st);
	if (st.raft.term > m->term_seen) {
		if (st.raft.vote == s->cfg.id && m->term_seen != 0)
			m->elections_started++;
		m->term_seen = st.raft.term;
	}
	uint64_t now = uv_now(s->loop);
	bool leader = st.raft.role == BATON_LEADER;
	for (uint32_t i = 0; i < st.raft.config.n; i++) {
		baton_node_id id = st.raft.config.members[i].id;
		struct member_contact *c = contact_of(m, id, now);
		/* Newly leader: every member gets a fresh grace period. */
		if (!m->was_leader || id == s->cfg.id ||
		    peer_connected(&st, id))
			c->last_ms = now;
	}
	m->was_leader = leader;
}

/* ---- /metrics ------------------------------------------------------------ */

static void out(struct baton_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void out(struct baton_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	baton_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

static void family(struct baton_buf *b, const char *name, const char *type,
		   const char *help)
{
	out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct baton_buf *b, const char *name, const char *help,
		  uint64_t v)
{
	family(b, name, "gauge", help);
	out(b, "%s %" PRIu64 "\n", name, v);
}

static void counter(struct baton_buf *b, const char *name, const char *help,
		    uint64_t v)
{
	family(b, name, "counter", help);
	out(b, "%s %" PRIu64 "\n", name, v);
}

/* One histogram's series; labels is "" or `cmd="get"`. */
static void histogram_series(struct baton_buf *b, const char *name,
			     const char *labels,
			     const struct baton_histogram *h)
{
	struct baton_histogram_snapshot snap;
	baton_histogram_read(h, &snap);
	const char *sep = labels[0] != '\0' ? "," : "";
	for (size_t i = 0; i < snap.n_bounds; i++)
		out(b, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, labels,
		    sep, h->bounds[i], snap.cumulative[i]);
	out(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep,
	    snap.count);
	const char *open = labels[0] != '\0' ? "{" : "";
	const char *close = labels[0] != '\0' ? "}" : "";
	out(b, "%s_sum%s%s%s %.9f\n", name, open, labels, close,
	    snap.sum_seconds);
	out(b, "%s_count%s%s%s %" PRIu64 "\n", name, open, labels, close,
	    snap.count);
}

/* 0 follower, 1 leader, 2 candidate, 3 pre-candidate, 4 learner,
 * 5 removed (docs/metrics.md). */
static uint64_t role_number(struct server *s,
			    const struct baton_node_status *st)
{
	if (s->identity.removed)
		return 5;
	const struct baton_member *self =
		baton_config_find(&st->raft.config, st->raft.id);
	if (self != NULL && self->role == BATON_LEARNER)
		return 4;
	switch (st->raft.role) {
	case BATON_LEADER:
		return 1;
	case BATON_CANDIDATE:
		return 2;
	case BATON_PRE_CANDIDATE:
		return 3;
	default:
		return 0;
	}
}

static void render_raft(struct server *s, const struct baton_node_status *st,
			struct baton_buf *b)
{
	gauge(b, "baton_role",
	      "This node's role: 0 follower, 1 leader, 2 candidate, 3 "
	      "pre-candidate, 4 learner, 5 removed.",
	      role_number(s, st));
	gauge(b, "baton_leader_id", "The leader this node knows (0: none).",
	      st->raft.leader_id);
	gauge(b, "baton_term", "The current Raft term.", st->raft.term);
	gauge(b, "baton_commit_index", "The highest log index known committed.",
	      st->raft.commit_index);
	gauge(b, "baton_applied_index",
	      "The highest log index applied to the state machine.",
	      st->applied);
	gauge(b, "baton_last_index", "The last index in this node's log.",
	      st->raft.last_index);
	gauge(b, "baton_snapshot_index",
	      "The last index covered by this node's snapshot.",
	      st->raft.snapshot_index);
	gauge(b, "baton_members", "Members in the configuration.",
	      st->raft.config.n);
	counter(b, "baton_elections_started_total",
		"Elections this node started (terms it voted for itself in, "
		"sampled every 500 ms).",
		s->metrics->elections_started);
	counter(b, "baton_leader_changes_total",
		"Times the leader this node knows changed to another node.",
		s->stats.leader_changes);
	counter(b, "baton_proposals_total",
		"Entries this node proposed to the log (as leader).",
		st->proposals);
	gauge(b, "baton_stalled_index",
	      "The first index this node cannot apply (0: not stalled).",
	      st->stalled_index);
	gauge(b, "baton_storage_failed",
	      "1 when the log refused a write or an fsync (the node serves "
	      "no writes).",
	      st->storage_failed ? 1 : 0);
	if (st->raft.role != BATON_LEADER)
		return;
	family(b, "baton_member_match_index", "gauge",
	       "The leader's view of how far each member's log matches.");
	for (uint32_t i = 0; i < st->raft.config.n; i++)
		out(b,
		    "baton_member_match_index{member=\"%" PRIu64 "\"} %" PRIu64
		    "\n",
		    st->raft.config.members[i].id, st->match[i]);
	family(b, "baton_member_lag_entries", "gauge",
	       "Entries each member is behind the leader's last index.");
	for (uint32_t i = 0; i < st->raft.config.n; i++)
		out(b,
		    "baton_member_lag_entries{member=\"%" PRIu64 "\"} %" PRIu64
		    "\n",
		    st->raft.config.members[i].id,
		    st->raft.last_index > st->match[i]
			    ? st->raft.last_index - st->match[i]
			    : 0);
}

static void render_clock(struct server *s, struct baton_buf *b)
{
	struct baton_pipeline_clock k;
	baton_node_clock(s->node, &k);
	/* The whole family is absent until measured: a family without a
	 * sample says nothing a scraper can use. */
	if (k.offset_known) {
		family(b, "baton_clock_offset_ms", "gauge",
		       "This node's wall clock minus the cluster's, in ms (a "
		       "follower: minus its leader's; the leader: minus the "
		       "clock that completes a majority with it).");
		out(b, "baton_clock_offset_ms %" PRId64 "\n", k.offset_ms);
	}
	gauge(b, "baton_clock_offset_max_ms",
	      "--max-clock-offset: the offset tolerated (0: not checked).",
	      k.checked ? k.max_offset_ms : 0);
	gauge(b, "baton_clock_barred",
	      "1 while this node does not stand for election because a "
	      "majority disagreed with its clock.",
	      k.barred ? 1 : 0);
	counter(b, "baton_clock_barred_total",
		"Times this node was barred for its clock.", k.barred_total);
	counter(b, "baton_clock_skew_warnings_total",
		"Warnings logged about a clock beyond --max-clock-offset.",
		k.warnings);
}

static void render_commands(struct server *s, struct baton_buf *b)
{
	struct metrics *m = s->metrics;
	char labels[METRICS_NAME_MAX + 16];
	family(b, "baton_client_commands_total", "counter",
	       "Client commands by name (lower case; unknown names as "
	       "\"other\").");
	for (uint32_t i = 0; i <= m->n_names; i++) {
		uint32_t k = i < m->n_names ? i : METRICS_COMMANDS_MAX;
		struct baton_histogram_snapshot snap;
		baton_histogram_read(&m->histograms[k], &snap);
		out(b, "baton_client_commands_total{cmd=\"%s\"} %" PRIu64 "\n",
		    i < m->n_names ? m->names[i] : "other", snap.count);
	}
	family(b, "baton_client_command_duration_seconds", "histogram",
	       "Time from a command's arrival to its reply being ready.");
	for (uint32_t i = 0; i <= m->n_names; i++) {
		uint32_t k = i < m->n_names ? i : METRICS_COMMANDS_MAX;
		snprintf(labels, sizeof labels, "cmd=\"%s\"",
			 i < m->n_names ? m->names[i] : "other");
		histogram_series(b, "baton_client_command_duration_seconds",
				 labels, &m->histograms[k]);
	}
	gauge(b, "baton_connected_clients", "Open client connections.",
	      s->n_clients);
	counter(b, "baton_client_connections_total",
		"Client connections accepted.", s->stats.connections);
	counter(b, "baton_client_rejected_total",
		"Client connections refused (--max-clients).",
		s->stats.rejected_clients);
}

static void render_storage(const struct baton_node_status *st,
			   struct baton_buf *b)
{
	family(b, "baton_fsync_seconds", "histogram",
	       "Latency of the log's group-commit fdatasync.");
	histogram_series(b, "baton_fsync_seconds", "",
			 &baton_storage_fsync_seconds);
	counter(b, "baton_wal_written_bytes_total",
		"Bytes written to the log's segments.",
		st->storage.bytes_written);
	gauge(b, "baton_wal_segments", "Log segment files on disk.",
	      st->storage.segments);
	gauge(b, "baton_wal_size_bytes",
	      "Bytes of log the segments hold now (not counting "
	      "their preallocated space).",
	      st->storage.wal_bytes);
	counter(b, "baton_wal_fsyncs_total", "fdatasync calls on the log.",
		st->storage.syncs);
	const struct baton_pipeline_snapshot_stats *k = &st->snapshots;
	counter(b, "baton_snapshots_total", "Snapshots this node took.",
		k->snapshots_taken);
	gauge(b, "baton_snapshot_size_bytes",
	      "The size of the last snapshot taken.", k->last_bytes);
	family(b, "baton_snapshot_duration_seconds", "gauge",
	       "The last snapshot's time from start to durable.");
	out(b, "baton_snapshot_duration_seconds %.3f\n",
	    (double)k->last_ms / 1000.0);
}

static void render_peers(const struct baton_node_status *st,
			 struct baton_buf *b)
{
	counter(b, "baton_peer_received_bytes_total",
		"Bytes of peer frames received.", st->transport.bytes_in);
	counter(b, "baton_peer_sent_bytes_total",
		"Bytes of peer frames queued to send.",
		st->transport.bytes_out);
	counter(b, "baton_peer_handshakes_refused_total",
		"Peer handshakes refused, either side.", st->transport.refused);
	counter(b, "baton_peer_auth_failed_total",
		"Peer handshakes refused for authentication.",
		st->transport.auth_failed);
	gauge(b, "baton_peers_connected", "Peers with a connection up.",
	      st->transport.connected_peers);
}

static void render_versions(struct server *s,
			    const struct baton_node_status *st,
			    struct baton_buf *b)
{
	const struct baton_profile *p = &s->cfg.profile;
	char r[BATON_RELEASE_STR_MAX], floor[BATON_RELEASE_STR_MAX];
	family(b, "baton_node_version_info", "gauge",
	       "This node's release, peer protocols and machine_max (always "
	       "1).");
	out(b,
	    "baton_node_version_info{release=\"%s\",proto_min=\"%u\","
	    "proto_max=\"%u\",machine_max=\"%u\"} 1\n",
	    baton_release_format(p->release, r), p->proto_min.value,
	    p->proto_max.value, p->machine_max.value);
	gauge(b, "baton_machine_version",
	      "The effective machine version at the applied index.",
	      st->applied_versions.machine.value);
	family(b, "baton_release_floor_info", "gauge",
	       "The release floor of the log's latest version entry (always "
	       "1).");
	out(b, "baton_release_floor_info{floor=\"%s\"} 1\n",
	    versions_floor_text(st->raft.versions.floor, floor));
	static struct baton_upgrade_status us;
	baton_node_upgrade_status(s->node, &us);
	family(b, "baton_member_version_info", "gauge",
	       "Each member's release, peer protocols and machine_max as this "
	       "node knows them (source live or log; always 1).");
	for (uint32_t i = 0; i < st->raft.config.n; i++) {
		baton_node_id id = st->raft.config.members[i].id;
		struct baton_profile mp;
		const char *source = server_member_versions(st, &us, id, &mp);
		if (strcmp(source, "unknown") == 0)
			continue;
		out(b,
		    "baton_member_version_info{member=\"%" PRIu64
		    "\",release=\"%s\",proto_min=\"%u\",proto_max=\"%u\","
		    "machine_max=\"%u\",source=\"%s\"} 1\n",
		    id, baton_release_format(mp.release, r), mp.proto_min.value,
		    mp.proto_max.value, mp.machine_max.value, source);
	}
}

/* --maxmemory (memory.c) and the HTTP endpoint's own limits (http.c). */
static void render_limits(struct server *s, struct baton_buf *b)
{
	gauge(b, "baton_memory_used_bytes",
	      "Used memory as --maxmemory counts it: the key-value map's "
	      "bytes and the log's in memory.",
	      memory_used(s));
	gauge(b, "baton_memory_max_bytes", "This node's --maxmemory (0: none).",
	      s->cfg.maxmemory);
	gauge(b, "baton_memory_bound_bytes",
	      "The bound in force: on the leader the smallest --maxmemory of "
	      "the members; elsewhere this node's own.",
	      memory_bound(s, NULL));
	counter(b, "baton_memory_refused_writes_total",
		"Writes this node, as leader, refused with -OOM.",
		s->memory.refused);
	struct http_stats h;
	http_stats(s, &h);
	gauge(b, "baton_http_connections", "Open connections to this port.",
	      h.open);
	counter(b, "baton_http_evicted_total",
		"Connections closed, before they sent a whole request, to "
		"make room for a newer one.",
		h.evicted);
	counter(b, "baton_http_deadline_closed_total",
		"Connections closed for not sending a whole request in time.",
		h.deadline_closed);
	counter(b, "baton_http_refused_total",
		"Connections refused: every open one had sent its request.",
		h.refused);
}

void metrics_render(struct server *s, struct baton_buf *b)
{
	BATON_ASSERT(s->metrics != NULL);
	static struct baton_node_status st;
	baton_node_status(s->node, &st);
	render_raft(s, &st, b);
	render_commands(s, b);
	render_storage(&st, b);
	render_peers(&st, b);
	render_versions(s, &st, b);
	render_clock(s, b);
	render_limits(s, b);
	gauge(b, "baton_uptime_seconds", "Seconds since this node started.",
	      (uv_now(s->loop) - s->started_ms) / 1000);
}

/* ---- /health ------------------------------------------------------------- */

/* The same words as batonctl health (src/ctl/health.c). */
bool metrics_health(struct server *s, uint64_t max_lag, bool members,
		    struct baton_buf *b)
{
	BATON_ASSERT(s->metrics != NULL);
	static struct baton_node_status st;
	baton_node_status(s->node, &st);
	size_t start = b->len;
	baton_node_id me = s->cfg.id;
	if (st.raft.config.n == 0 && !s->identity.removed) {
		out(b, "no configuration: the node is not a member of a "
		       "cluster yet (started with --join and not added)\n");
		return false;
	}
	if (s->identity.removed)
		out(b, "member %" PRIu64 " was removed: yes (%s)\n", me,
		    s->identity.removed_why);
	if (st.raft.leader_id == 0)
		out(b, "no leader\n");
	if (st.storage_failed)
		out(b,
		    "storage failed: member %" PRIu64
		    " (its log refused a write or an fsync; see its log)\n",
		    me);
	bool needs = st.raft.needs_machine.value != 0 ||
		     st.raft.needs_release.major != 0 ||
		     st.raft.needs_release.minor != 0 ||
		     st.raft.needs_release.patch != 0;
	if (st.stalled_index != 0)
		out(b, "%smember %" PRIu64 " %s at index %" PRIu64 ": %s\n",
		    needs ? "needs-upgrade: " : "", me,
		    needs ? "stopped" : "stalled", st.stalled_index,
		    st.stalled_why);
	/* /ready only: a new node of a migration is not one a scheduler may
	 * count on until the migration says so (INFO migration_ready), or
	 * it would stop an old node too early. /health, for monitoring,
	 * stays about the node's own fitness. */
	const char *why = "";
	if (!members && !migration_ready(s, &why))
		out(b, "migration not ready: %s (INFO migration_ready:0)\n",
		    why);
	if (members && st.raft.role == BATON_LEADER) {
		uint64_t now = uv_now(s->loop);
		uint64_t bound = (uint64_t)METRICS_DOWN_TIMEOUTS *
				 s->cfg.election_timeout_ms;
		for (uint32_t i = 0; i < st.raft.config.n; i++) {
			baton_node_id id = st.raft.config.members[i].id;
			if (id == me)
				continue;
			struct member_contact *c =
				contact_of(s->metrics, id, now);
			if (now - c->last_ms > bound)
				out(b,
				    "member %" PRIu64 " down: no connection "
				    "from the leader for %" PRIu64 " ms\n",
				    id, now - c->last_ms);
			uint64_t lag =
				st.raft.last_index > st.match[i]
					? st.raft.last_index - st.match[i]
					: 0;
			if (lag > max_lag)
				out(b,
				    "member %" PRIu64 " lags by %" PRIu64
				    " entries (bound %" PRIu64 ")\n",
				    id, lag, max_lag);
		}
	}
	return b->len == start;
}
