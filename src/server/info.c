/*
 * INFO [section ...] (docs/clients.md, "INFO"): Redis 7's sections (Server,
 * Clients, Memory, Persistence, Stats, Replication, Keyspace) with the
 * fields redis-cli and client libraries read, and baton's own (Identity,
 * Versions, Migration). Sections are named case-insensitively; none,
 * "default", "all" or "everything" means every section (baton's default
 * holds them all: its tools read fields from each); an unknown name adds
 * nothing, as in Redis.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "baton/assert.h"
#include "migration.h"
#include "memory_limit.h"
#include "server.h"

/* What the sections read, taken once per INFO. */
struct info_ctx {
	struct server *s;
	struct baton_node_status st;
	struct baton_buf *b;
};

static void add(struct info_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add(struct info_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	baton_buf_vprintf(c->b, fmt, ap);
	va_end(ap);
}

static void section_server(struct info_ctx *c)
{
	struct server *s = c->s;
	char release[BATON_RELEASE_STR_MAX];
	baton_release_format(s->cfg.profile.release, release);
	uint64_t up_s = (uv_now(s->loop) - s->started_ms) / 1000;
	struct timeval tv;
	gettimeofday(&tv, NULL);
	const char *port = strrchr(s->cfg.listen, ':');
	add(c,
	    "# Server\r\nbaton_version:%s\r\nredis_version:7.0.0\r\n"
	    "redis_mode:standalone\r\narch_bits:%zu\r\n"
	    "multiplexing_api:libuv\r\nprocess_id:%d\r\ntcp_port:%s\r\n"
	    "server_time_usec:%" PRIu64 "\r\nuptime_in_seconds:%" PRIu64
	    "\r\nuptime_in_days:%" PRIu64 "\r\n",
	    release, sizeof(void *) * 8, (int)getpid(),
	    port != NULL ? port + 1 : s->cfg.listen,
	    (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec, up_s,
	    up_s / 86400);
}

static void section_clients(struct info_ctx *c)
{
	add(c,
	    "# Clients\r\nconnected_clients:%u\r\nblocked_clients:0\r\n"
	    "tracking_clients:0\r\nmaxclients:%u\r\n",
	    c->s->n_clients, c->s->cfg.max_clients);
}

static uint64_t memory_rss(void);

/* The process's heap in use (malloc's count: allocator_allocated) and
 * resident set (/proc/self/statm). An allocator that does not fill
 * mallinfo2 (a sanitizer's) leaves the resident set as the best figure.
 * Only INFO asks: mallinfo2 walks the free chunks of every arena, too
 * slow to ask before every write. */
static uint64_t memory_heap(void)
{
	struct mallinfo2 mi = mallinfo2();
	uint64_t used = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
	return used > 0 ? used : memory_rss();
}

static uint64_t memory_rss(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long size = 0, resident = 0;
	if (f == NULL)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void section_memory(struct info_ctx *c)
{
	struct server *s = c->s;
	/* used_memory is what --maxmemory bounds (memory.c): the map's
	 * bytes and the log's in memory; the allocator's whole heap is
	 * allocator_allocated. */
	uint64_t used = memory_used(s), rss = memory_rss();
	uint64_t dataset = kv_memory_bytes(), heap = memory_heap();
	uint64_t max = s->cfg.maxmemory;
	baton_node_id bound_from;
	uint64_t bound = memory_bound(s, &bound_from);
	char used_h[32], rss_h[32], peak_h[32], max_h[32];
	memory_human(used, used_h, sizeof used_h);
	memory_human(rss, rss_h, sizeof rss_h);
	memory_human(s->memory.peak, peak_h, sizeof peak_h);
	memory_human(max, max_h, sizeof max_h);
	add(c,
	    "# Memory\r\nused_memory:%" PRIu64 "\r\nused_memory_human:%s\r\n"
	    "used_memory_rss:%" PRIu64 "\r\nused_memory_rss_human:%s\r\n"
	    "used_memory_peak:%" PRIu64 "\r\nused_memory_peak_human:%s\r\n"
	    "used_memory_dataset:%" PRIu64 "\r\nused_memory_log:%" PRIu64
	    "\r\nallocator_allocated:%" PRIu64 "\r\n"
	    "maxmemory:%" PRIu64 "\r\nmaxmemory_human:%s\r\n"
	    "maxmemory_policy:noeviction\r\nmem_allocator:libc\r\n"
	    "maxmemory_in_force:%" PRIu64 "\r\nmaxmemory_in_force_of:%" PRIu64
	    "\r\noom_refused_writes:%" PRIu64 "\r\n",
	    used, used_h, rss, rss_h, s->memory.peak, peak_h, dataset,
	    baton_node_log_bytes(s->node), heap, max, max_h, bound, bound_from,
	    s->memory.refused);
}

/* Commands a second between this INFO and the last one at least a second
 * before it (Redis samples every 100 ms; baton has no timer for it). */
static uint64_t ops_per_sec(struct server *s)
{
	static uint64_t at_ms, at_commands, rate;
	uint64_t now = uv_now(s->loop);
	if (at_ms == 0 || now < at_ms) {
		at_ms = now;
		at_commands = s->stats.commands;
	} else if (now - at_ms >= 1000) {
		rate = (s->stats.commands - at_commands) * 1000 / (now - at_ms);
		at_ms = now;
		at_commands = s->stats.commands;
	}
	return rate;
}

static void kv_latency(struct info_ctx *c);

static void section_stats(struct info_ctx *c)
{
	struct server *s = c->s;
	const struct baton_node_status *st = &c->st;
	add(c,
	    "# Stats\r\ntotal_connections_received:%" PRIu64
	    "\r\ntotal_commands_processed:%" PRIu64
	    "\r\ninstantaneous_ops_per_sec:%" PRIu64
	    "\r\nrejected_connections:%" PRIu64 "\r\nexpired_keys:%" PRIu64
	    "\r\nevicted_keys:0\r\nkeyspace_hits:0\r\nkeyspace_misses:0"
	    "\r\npubsub_channels:0\r\npubsub_patterns:0",
	    s->stats.connections, s->stats.commands, ops_per_sec(s),
	    s->stats.rejected_clients, s->sweeper.deleted);
	add(c,
	    "\r\nprotocol_errors:%" PRIu64
	    "\r\nclient_output_disconnects:%" PRIu64
	    "\r\nclient_idle_disconnects:%" PRIu64 "\r\nwrites_parked:%" PRIu64
	    "\r\nwrites_rerouted:%" PRIu64 "\r\npeer_frames_dropped:%" PRIu64
	    "\r\npeer_frames_unknown:%" PRIu64
	    "\r\npeer_handshakes_refused:%" PRIu64
	    "\r\npeer_auth_failed:%" PRIu64
	    "\r\npeer_frames_bad_checksum:%" PRIu64
	    "\r\npeer_msgs_dropped_not_member:%" PRIu64 "\r\nstorage_ok:%s\r\n",
	    s->stats.protocol_errors, s->stats.output_disconnects,
	    s->stats.idle_disconnects, s->stats.writes_parked,
	    s->stats.writes_rerouted, st->transport.dropped,
	    st->transport.unknown, st->transport.refused,
	    st->transport.auth_failed, st->transport.bad_checksums,
	    st->peer_msgs_dropped_not_member,
	    st->storage_failed ? "no" : "yes");
	add(c, "total_error_replies:%" PRIu64 "\r\n", s->stats.error_replies);
	kv_latency(c);
}

/* The key-value commands' latency since the start: the count, cumulative
 * counts per upper bound in microseconds (what a tool needs to compute a
 * percentile over any window between two INFOs), and the 99th percentile
 * as the upper bound of its bucket (0 before any command; above the last
 * bound, that bound). */
static void kv_latency(struct info_ctx *c)
{
	struct baton_histogram_snapshot snap;
	const struct baton_histogram *h = &c->s->stats.kv_latency;
	baton_histogram_read(h, &snap);
	uint64_t p99 = 0;
	uint64_t rank = snap.count - snap.count / 100; /* ceil(0.99 n) */
	for (size_t i = 0; i < snap.n_bounds && snap.count > 0; i++) {
		p99 = (uint64_t)(h->bounds[i] * 1e6 + 0.5);
		if (snap.cumulative[i] >= rank)
			break;
	}
	add(c,
	    "kv_commands_processed:%" PRIu64 "\r\nkv_error_replies:%" PRIu64
	    "\r\nkv_latency_p99_usec:%" PRIu64 "\r\nkv_latency_usec:",
	    snap.count, c->s->stats.kv_error_replies, p99);
	for (size_t i = 0; i < snap.n_bounds; i++)
		add(c, "le%" PRIu64 "=%" PRIu64 ",",
		    (uint64_t)(h->bounds[i] * 1e6 + 0.5), snap.cumulative[i]);
	add(c, "inf=%" PRIu64 "\r\n", snap.count);
}

static void section_replication(struct info_ctx *c)
{
	const struct baton_node_status *st = &c->st;
	add(c,
	    "# Replication\r\nrole:%s\r\nconnected_slaves:0\r\nnode_id:%" PRIu64
	    "\r\nleader_id:%" PRIu64 "\r\nterm:%" PRIu64
	    "\r\ncommit_index:%" PRIu64 "\r\napplied_index:%" PRIu64
	    "\r\nlast_index:%" PRIu64 "\r\nsnapshot_index:%" PRIu64
	    "\r\nmembers:%u\r\nstalled_index:%" PRIu64
	    "\r\nstalled_reason:%s\r\n",
	    c->s->identity.removed ? "removed" : admin_role_name(st->raft.role),
	    st->raft.id, st->raft.leader_id, st->raft.term,
	    st->raft.commit_index, st->applied, st->raft.last_index,
	    st->raft.snapshot_index, st->raft.config.n, st->stalled_index,
	    st->stalled_why);
	/* The clock check (docs/operations.md, "Clocks"). */
	struct baton_pipeline_clock k;
	baton_node_clock(c->s->node, &k);
	add(c,
	    "max_clock_offset_ms:%" PRIu32 "\r\nclock_offset_known:%d\r\n"
	    "clock_offset_ms:%" PRId64 "\r\nclock_barred:%d\r\n"
	    "clock_skew_warnings:%" PRIu64 "\r\n",
	    k.checked ? k.max_offset_ms : 0, k.offset_known ? 1 : 0,
	    k.offset_known ? k.offset_ms : 0, k.barred ? 1 : 0, k.warnings);
}

static void section_identity(struct info_ctx *c)
{
	struct server *s = c->s;
	char uuid[BATON_CLUSTER_UUID_STR_MAX];
	add(c,
	    "# "
	    "Identity\r\ncluster_id:%s\r\ncluster_uuid:%s\r\nremoved:%s%s%"
	    "s\r\n",
	    s->cfg.cluster_id, identity_uuid_text(s, uuid, sizeof uuid),
	    s->identity.removed ? "yes (" : "no",
	    s->identity.removed ? s->identity.removed_why : "",
	    s->identity.removed ? ")" : "");
}

/* This node's copy of the map; Redis omits an empty database. */
static void section_keyspace(struct info_ctx *c)
{
	add(c, "# Keyspace\r\n");
	uint64_t keys = kv_dbsize(c->s->machine.kv);
	if (keys > 0)
		add(c, "db0:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0\r\n",
		    keys, kv_expiry_count(c->s->machine.kv));
}

static void section_versions(struct info_ctx *c)
{
	admin_info_versions(c->s, &c->st, c->b);
}

static void section_persistence(struct info_ctx *c)
{
	admin_info_persistence(c->s, &c->st, c->b);
}

/* migration_info() writes its section with a blank line before it. */
static void section_migration(struct info_ctx *c)
{
	struct baton_buf m;
	baton_buf_init(&m);
	migration_info(c->s, &m);
	size_t skip = m.len >= 2 && m.data[0] == '\r' ? 2 : 0;
	if (m.len > skip)
		baton_buf_append(c->b, m.data + skip, m.len - skip);
	baton_buf_free(&m);
}

static const struct {
	const char *name;
	void (*fn)(struct info_ctx *c);
} sections[] = {
	{"server", section_server},	{"clients", section_clients},
	{"memory", section_memory},	{"replication", section_replication},
	{"identity", section_identity}, {"versions", section_versions},
	{"stats", section_stats},	{"persistence", section_persistence},
	{"keyspace", section_keyspace}, {"migration", section_migration},
};

#define N_SECTIONS (sizeof sections / sizeof sections[0])

/* Is section i asked for? Every one with no argument or a catch-all. */
static bool wanted(const struct command_ctx *x, size_t i)
{
	if (x->argc == 1)
		return true;
	for (int a = 1; a < x->argc; a++)
		if (command_arg_is(x, a, "all") ||
		    command_arg_is(x, a, "everything") ||
		    command_arg_is(x, a, "default") ||
		    command_arg_is(x, a, sections[i].name))
			return true;
	return false;
}

int info_command(struct command_ctx *x)
{
	struct baton_buf all;
	baton_buf_init(&all);
	struct info_ctx c = {.s = x->s, .b = &all};
	baton_node_status(x->s->node, &c.st);
	for (size_t i = 0; i < N_SECTIONS; i++) {
		if (!wanted(x, i))
			continue;
		size_t before = all.len;
		if (before > 0)
			baton_buf_append(&all, "\r\n", 2);
		sections[i].fn(&c);
		if (all.len == before + (before > 0 ? 2 : 0))
			all.len = before; /* an empty section (Migration) */
	}
	BATON_ASSERT(all.len == 0 || all.data[all.len - 1] == '\n');
	command_reply_text(x, all.data, all.len);
	baton_buf_free(&all);
	return command_done(x);
}
