/*
 * --maxmemory (docs/operations.md, "Memory"): the bound on what this
 * node's data costs in memory, and the leader's refusal, before anything
 * is appended, of the writes that would grow it past the bound.
 *
 * What counts ("used memory", INFO's used_memory): the bytes the
 * key-value machine holds (kv_memory_bytes: keys, values, hashes' fields,
 * bucket arrays, the expiry index, a snapshot's copies), plus the payloads
 * of the log entries held in memory (every entry since the last
 * compaction: a write costs twice, in the log and in the map, until the
 * next snapshot compacts the log). Both are counted as they change, so
 * asking before every write costs two loads. The allocator's own overhead
 * beyond its rounding, client buffers and the process's code are not
 * counted: the default bound leaves them the other half of the memory.
 *
 * Why the leader alone decides: every replica holds the same data, so they
 * fill together; a follower that refused to apply an entry the leader
 * committed would diverge. The leader refuses before proposing, so what
 * it refused never reaches any log, and a write forwarded by a follower
 * is judged here, at the leader, like a local one. Its bound is the
 * smallest of the members' (each tells its own in its info replies,
 * baton_upgrade_status), so a member given less memory than the leader is
 * not pushed past its own: the leader's usage stands for every member's,
 * as they hold the same data.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "memory_limit.h"
#include "server.h"

/* Redis's reply, byte for byte: clients test for it. */
#define MEMORY_OOM_ERROR                                                       \
	"OOM command not allowed when used memory > 'maxmemory'."
/* The longest /proc or /sys file read here. */
#define MEMORY_FILE_BYTES_MAX 8192u
#define MEMORY_CGROUP_ROOT "/sys/fs/cgroup"
/* A snapshot compacts the log once a quarter of the bound was applied
 * since the last: the log (less the entries kept behind a snapshot for
 * slow followers, --snapshot-trailing) stays within a quarter of the
 * bound, and a snapshot of a map at the bound is written at most once per
 * quarter of the bound written: at most 4 bytes to disk per byte written. */
#define MEMORY_LOG_SHARE_DIVISOR 4u
/* And the entries kept behind a snapshot for followers a little behind
 * take at most an eighth (1024 entries of 100 kB are 100 MB): the log's
 * share of the bound is at most 3/8, the map has the rest. */
#define MEMORY_TRAILING_SHARE_DIVISOR 8u
/* Above the bound, a snapshot is taken at once if the entries applied
 * since the last hold at least this share of the bound: compacting them
 * may be all it takes to serve writes again, and waiting for the usual
 * quarter would wait for writes that are being refused. */
#define MEMORY_COMPACT_SHARE_DIVISOR 64u

/* The file's text into buf (cut to cap - 1): false if unreadable. */
static bool read_text(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n > 0;
}

/* The cgroup v2 path of this process ("0::/a/b" in /proc/self/cgroup),
 * into out; "" when it has none. */
static void cgroup_path(char *out, size_t cap)
{
	char text[MEMORY_FILE_BYTES_MAX];
	out[0] = '\0';
	if (!read_text("/proc/self/cgroup", text, sizeof text))
		return;
	for (char *line = text; line != NULL && *line != '\0';) {
		char *next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if (strncmp(line, "0::", 3) == 0) {
			snprintf(out, cap, "%s", line + 3);
			return;
		}
		line = next;
	}
}

/* The smallest memory.max on the way from this process's cgroup up to
 * the root (a parent's limit binds its children too), and cgroup v1's
 * limit: 0 when none is set. */
static uint64_t cgroup_limit(void)
{
	char path[1024], file[1200], text[64];
	uint64_t best = 0, v;
	cgroup_path(path, sizeof path);
	for (;;) {
		snprintf(file, sizeof file, "%s%s/memory.max",
			 MEMORY_CGROUP_ROOT,
			 strcmp(path, "/") == 0 ? "" : path);
		if (read_text(file, text, sizeof text) &&
		    memory_parse_cgroup_max(text, &v) &&
		    (best == 0 || v < best))
			best = v;
		char *slash = strrchr(path, '/');
		if (slash == NULL || path[0] == '\0' || strcmp(path, "/") == 0)
			break;
		if (slash == path)
			snprintf(path, sizeof path, "/");
		else
			*slash = '\0';
	}
	if (read_text(MEMORY_CGROUP_ROOT "/memory/memory.limit_in_bytes", text,
		      sizeof text) &&
	    memory_parse_cgroup_max(text, &v) && (best == 0 || v < best))
		best = v;
	return best;
}

/* The default bound, and where it came from into `from`. */
static uint64_t default_limit(char *from, size_t cap)
{
	char text[MEMORY_FILE_BYTES_MAX];
	uint64_t machine = 0, cgroup = cgroup_limit();
	if (read_text("/proc/meminfo", text, sizeof text))
		(void)memory_parse_meminfo_total(text, &machine);
	bool by_cgroup = cgroup != 0 && (machine == 0 || cgroup < machine);
	uint64_t avail = by_cgroup ? cgroup : machine;
	char h[32];
	memory_human(avail, h, sizeof h);
	snprintf(from, cap, "%u%% of the %s's %s", MEMORY_DEFAULT_SHARE_PERCENT,
		 by_cgroup ? "cgroup" : "machine", h);
	return memory_default_limit(avail);
}

void memory_start(struct server *s)
{
	char from[128] = "--maxmemory";
	if (!s->cfg.maxmemory_set)
		s->cfg.maxmemory = default_limit(from, sizeof from);
	s->memory.bound = s->cfg.maxmemory;
	s->memory.bound_from = s->cfg.id;
	char h[32];
	memory_human(s->cfg.maxmemory, h, sizeof h);
	if (s->cfg.maxmemory == 0)
		LOG_INFO("memory: no bound (%s 0): writes are never refused "
			 "for memory",
			 from);
	else
		LOG_INFO("memory: bound %" PRIu64 " bytes (%s, %s): above it "
			 "this node, as leader, refuses writes that grow "
			 "memory with -OOM",
			 s->cfg.maxmemory, h, from);
}

uint64_t memory_snapshot_log_bytes(const struct server *s)
{
	return s->cfg.maxmemory / MEMORY_LOG_SHARE_DIVISOR;
}

uint64_t memory_snapshot_trailing_bytes(const struct server *s)
{
	return s->cfg.maxmemory / MEMORY_TRAILING_SHARE_DIVISOR;
}

uint64_t memory_used(struct server *s)
{
	uint64_t log_bytes =
		s->node != NULL ? baton_node_log_bytes(s->node) : 0;
	uint64_t used = kv_memory_bytes() + log_bytes;
	if (used > s->memory.peak)
		s->memory.peak = used;
	return used;
}

/* Warn once when usage crosses MEMORY_WARN_PERCENT of the bound, and say
 * when it fell back under MEMORY_WARN_CLEAR_PERCENT. */
static void watch(struct server *s, uint64_t used)
{
	bool warned =
		memory_warn_state(used, s->memory.bound, s->memory.warned);
	if (warned == s->memory.warned)
		return;
	s->memory.warned = warned;
	char u[32], m[32];
	memory_human(used, u, sizeof u);
	memory_human(s->memory.bound, m, sizeof m);
	if (warned)
		LOG_WARN(
			"memory: used memory %s is above %u%% of maxmemory %s; "
			"at maxmemory writes that grow memory are refused "
			"(-OOM): delete keys, or give every node more memory "
			"and a higher --maxmemory (docs/operations.md, "
			"\"Memory\")",
			u, MEMORY_WARN_PERCENT, m);
	else
		LOG_INFO("memory: used memory %s is back under %u%% of "
			 "maxmemory %s",
			 u, MEMORY_WARN_CLEAR_PERCENT, m);
}

uint64_t memory_bound(const struct server *s, baton_node_id *from)
{
	if (from != NULL)
		*from = s->memory.bound_from;
	return s->memory.bound;
}

/* The bound in force: the smallest non-zero --maxmemory of the members
 * the leader knows this term (its own included); elsewhere its own. */
static void find_bound(struct server *s)
{
	static struct baton_upgrade_status us; /* big: not on the stack */
	uint64_t bound = s->cfg.maxmemory;
	baton_node_id from = s->cfg.id;
	if (s->node != NULL) {
		baton_node_upgrade_status(s->node, &us);
		for (uint32_t i = 0; us.leader && i < us.n; i++) {
			uint64_t m = us.members[i].memory_max_bytes;
			if (m != 0 && (bound == 0 || m < bound)) {
				bound = m;
				from = us.members[i].id;
			}
		}
	}
	char h[32];
	memory_human(bound, h, sizeof h);
	if (bound != s->memory.bound && from != s->cfg.id)
		LOG_INFO("memory: bound %" PRIu64 " bytes (%s): node %" PRIu64
			 "'s --maxmemory, the smallest of the members; this "
			 "node, as leader, refuses writes that grow memory "
			 "above it",
			 bound, h, from);
	else if (bound != s->memory.bound)
		LOG_INFO("memory: bound %" PRIu64 " bytes (%s): this node's "
			 "own --maxmemory again",
			 bound, h);
	s->memory.bound = bound;
	s->memory.bound_from = from;
}

/* Above the bound: compact the log now if that frees enough. */
static void relieve(struct server *s, uint64_t used)
{
	if (s->node == NULL || s->memory.bound == 0 || used <= s->memory.bound)
		return;
	if (baton_node_compact_soon(
		    s->node, s->memory.bound / MEMORY_COMPACT_SHARE_DIVISOR))
		LOG_INFO("memory: used memory above the bound; taking a "
			 "snapshot now to compact the log (%" PRIu64
			 " bytes in memory)",
			 baton_node_log_bytes(s->node));
}

void memory_tick(struct server *s)
{
	find_bound(s);
	uint64_t used = memory_used(s);
	watch(s, used);
	relieve(s, used);
}

/* Does w hold a command that may grow the map? */
static bool grows(const struct write_req *w)
{
	for (uint32_t i = 0; i < w->n_commands; i++) {
		const struct kv_txn_command *t = &w->commands[i];
		const struct kv_command *c =
			t->argc >= 1 ? kv_lookup(t->argv[0], t->lens[0]) : NULL;
		if (c != NULL && (c->flags & KV_GROWS) != 0)
			return true;
	}
	return false;
}

bool memory_refuses(struct server *s, const struct write_req *w,
		    struct baton_buf *err)
{
	if (s->memory.bound == 0)
		return false;
	uint64_t used = memory_used(s);
	watch(s, used);
	if (used <= s->memory.bound || !grows(w))
		return false;
	s->memory.refused++;
	relieve(s, used);
	resp_error(err, MEMORY_OOM_ERROR);
	return true;
}
