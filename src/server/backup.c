/*
 * Backup and restore (docs/backup.md).
 *
 * Save, on the leader: BATON.BACKUP BEGIN confirms leadership with a read
 * barrier (baton_node_read), then opens the map's incremental snapshot view
 * (kv_snapshot_begin) at the applied index, which is at or after the
 * barrier's: the copy is linearizable. The view keeps the map as of that
 * index while applies go on (pre-images), so each BATON.BACKUP NEXT hands
 * out the next slice of about BACKUP_CHUNK_BYTES in the kv snapshot format
 * and the loop serves everything else between two NEXTs; no side holds
 * the whole copy. The map has one view: while a backup holds it the
 * node's own snapshot waits (it asks again later), and a BEGIN while a
 * snapshot or KEYS holds it answers -TRYAGAIN and claims the view for a
 * moment: the node's next snapshot waits for the retry, so snapshots
 * close together cannot keep a backup out. One backup at a time; one
 * left without a NEXT for BACKUP_IDLE_MS is ended. A restore or a
 * conversion of the map ends the view (machine.map_replaced counts them):
 * the next NEXT says so.
 *
 * Restore: batond --restore FILE --bootstrap (this node alone) on an empty
 * data directory. The file is read and checked whole, and its map loaded
 * into a map of its own (kv_restore checks the payload), before the node
 * starts: a bad file writes nothing. Once the node founded its new
 * cluster, leads, and its cluster UUID is applied, it proposes the map
 * through the log with the migration's import payloads (docs/kv.md,
 * "Migration"): IMPORT_BEGIN (the map emptied, the file's machine time),
 * IMPORT_CHUNKs of export records, IMPORT_END and AUTHORITY, one entry at
 * a time. Every member, and every node added later, gets the map by the
 * log or a snapshot like any other state; until AUTHORITY writes answer
 * -TRYAGAIN (the map is importing), so no client sees half of it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backup_file.h"
#include "baton/assert.h"
#include "log.h"
#include "resp.h"
#include "server.h"

/* A NEXT's slice of the map: about this much (one key at least). */
#define BACKUP_CHUNK_BYTES ((size_t)1 << 20)
/* A backup without a NEXT for this long is ended. */
#define BACKUP_IDLE_MS 30000u
/* How long a BEGIN that found the map's view busy keeps the node's own
 * snapshots from opening it: batonctl asks again every 200 ms, so this
 * spans a few of its retries, and a client that gave up holds the node's
 * snapshots back no longer. */
#define BACKUP_VIEW_CLAIM_MS 1000u
/* The restore's import chunks, and how often it looks whether it may go
 * on. */
#define RESTORE_CHUNK_BYTES ((size_t)256 << 10)
#define RESTORE_TICK_MS 100u

enum restore_step {
	RESTORE_WAIT,	/* for leadership and the cluster UUID */
	RESTORE_BEGIN,	/* IMPORT_BEGIN next */
	RESTORE_CHUNKS, /* IMPORT_CHUNKs of export records */
	RESTORE_END,
	RESTORE_AUTHORITY,
	RESTORE_DONE,
};

struct backup {
	struct server *s;
	uv_timer_t timer, restore_timer;
	int closing;
	/* The save open now (id 0: none). */
	uint64_t id, next_id;
	uint64_t last_ms;
	uint64_t generation;	  /* machine.map_replaced at BEGIN */
	uint64_t sent;		  /* payload bytes handed out */
	struct slot *waiting;	  /* a BEGIN waiting for its barrier */
	bool view_claimed;	  /* a BEGIN found the view busy ... */
	uint64_t view_claimed_ms; /* ... then */
	/* --restore */
	struct baton_kv *map;
	struct backup_header header;
	enum restore_step step;
	bool proposing;
	uint32_t chunks;
	uint64_t keys;
	struct baton_buf pending; /* the payload proposed last, to resend */
	bool pending_ready;
};

static uint64_t now_ms(const struct backup *b)
{
	return uv_now(b->s->loop);
}

/* server_machine's snapshot_yields: a BEGIN found the view busy a
 * moment ago and will ask again. */
static bool snapshot_yields(void *data)
{
	struct server *s = data;
	struct backup *b = s->backup;
	return b != NULL && b->view_claimed &&
	       now_ms(b) - b->view_claimed_ms < BACKUP_VIEW_CLAIM_MS;
}

static struct backup *get(struct server *s)
{
	if (s->backup != NULL)
		return s->backup;
	struct backup *b = calloc(1, sizeof *b);
	if (b == NULL)
		return NULL;
	b->s = s;
	b->next_id = 1;
	baton_buf_init(&b->pending);
	uv_timer_init(s->loop, &b->timer);
	uv_timer_init(s->loop, &b->restore_timer);
	b->timer.data = b->restore_timer.data = b;
	s->backup = b;
	s->machine.snapshot_yields = snapshot_yields;
	return b;
}

/* ---- save ---------------------------------------------------------------- */

static void save_end(struct backup *b, const char *why)
{
	if (b->id == 0)
		return;
	if (b->generation == b->s->machine.map_replaced)
		kv_snapshot_end(b->s->machine.kv);
	LOG_INFO("backup %" PRIu64 " ended after %" PRIu64 " bytes: %s", b->id,
		 b->sent, why);
	b->id = 0;
}

static void on_save_timer(uv_timer_t *t)
{
	struct backup *b = t->data;
	if (b->id != 0 && now_ms(b) - b->last_ms >= BACKUP_IDLE_MS)
		save_end(b, "abandoned (no NEXT for 30 s)");
	if (b->id == 0)
		uv_timer_stop(&b->timer);
}

static void field(struct baton_buf *out, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void field(struct baton_buf *out, const char *name, const char *fmt, ...)
{
	char v[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	resp_bulk(out, name, strlen(name));
	resp_bulk(out, v, strlen(v));
}

/* The barrier returned: open the view at the applied index. */
static void begin_now(struct backup *b, struct slot *sl)
{
	struct server *s = b->s;
	struct baton_buf *out = slot_buf(sl);
	struct baton_node_status *st = &s->identity.status;
	baton_node_status(s->node, st);
	struct baton_machine_version v = st->applied_versions.machine;
	int rv = kv_snapshot_begin(s->machine.kv, v);
	b->view_claimed = rv == BATON_EBUSY;
	b->view_claimed_ms = now_ms(b);
	if (rv == BATON_EBUSY) {
		resp_error(out, "TRYAGAIN the map is being read by a snapshot "
				"or a KEYS; retry");
		return;
	}
	if (rv != 0) {
		resp_error(out, "ERR backup: %s", kv_errmsg(s->machine.kv));
		return;
	}
	b->id = b->next_id++;
	b->last_ms = now_ms(b);
	b->generation = s->machine.map_replaced;
	b->sent = 0;
	if (!uv_is_active((uv_handle_t *)&b->timer))
		uv_timer_start(&b->timer, on_save_timer, 1000, 1000);
	char release[BATON_RELEASE_STR_MAX], uuid[37] = "";
	baton_release_format(s->cfg.profile.release, release);
	if (s->machine.has_uuid)
		backup_uuid_format(s->machine.uuid, uuid);
	resp_array(out, 18);
	field(out, "id", "%" PRIu64, b->id);
	field(out, "index", "%" PRIu64, s->machine.applied_index);
	field(out, "term", "%" PRIu64, st->raft.term);
	field(out, "machine_version", "%" PRIu32, v.value);
	field(out, "release", "%s", release);
	field(out, "cluster_uuid", "%s", uuid);
	field(out, "cluster_id", "%s", s->cfg.cluster_id);
	field(out, "keys", "%" PRIu64, kv_dbsize(s->machine.kv));
	field(out, "chunk_bytes", "%zu", BACKUP_CHUNK_BYTES);
	LOG_INFO("backup %" PRIu64 " begins at index %" PRIu64 " (%" PRIu64
		 " keys)",
		 b->id, s->machine.applied_index, kv_dbsize(s->machine.kv));
}

static void on_barrier(void *data, int status)
{
	struct backup *b = data;
	struct slot *sl = b->waiting;
	b->waiting = NULL;
	BATON_ASSERT(sl != NULL);
	if (slot_abandoned(sl)) {
		slot_done(sl);
		return;
	}
	if (status != 0) {
		slot_error(sl, status);
		return;
	}
	BATON_ASSERT(b->id == 0);
	begin_now(b, sl);
	slot_done(sl);
}

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

static bool arg_is(const struct command_ctx *x, int i, const char *word)
{
	return x->lens[i] == strlen(word) &&
	       strncasecmp((const char *)x->argv[i], word, x->lens[i]) == 0;
}

static bool arg_id(const struct command_ctx *x, uint64_t *id)
{
	char text[24];
	if (x->argc != 3 || x->lens[2] == 0 || x->lens[2] >= sizeof text)
		return false;
	memcpy(text, x->argv[2], x->lens[2]);
	text[x->lens[2]] = '\0';
	char *end;
	*id = strtoull(text, &end, 10);
	return *end == '\0' && *id > 0;
}

static int cmd_next(struct command_ctx *x, struct backup *b, uint64_t id)
{
	struct baton_buf *out = command_out(x);
	if (b->id == 0 || b->id != id) {
		resp_error(out,
			   "ERR no backup %" PRIu64 " in progress (ended, "
			   "abandoned for 30 s, or never begun): save again",
			   id);
		return command_done(x);
	}
	if (b->generation != x->s->machine.map_replaced) {
		save_end(b, "the map was replaced by a snapshot or converted");
		resp_error(out,
			   "ERR backup %" PRIu64 " aborted: this node's map "
			   "was replaced by a snapshot or its machine version "
			   "changed; save again",
			   id);
		return command_done(x);
	}
	struct baton_buf chunk;
	baton_buf_init(&chunk);
	bool done = false;
	int rv = kv_snapshot_step(x->s->machine.kv, BACKUP_CHUNK_BYTES, sink,
				  &chunk, &done);
	if (rv != 0) {
		baton_buf_free(&chunk);
		save_end(b, baton_strerror(rv));
		return command_fail(x, rv);
	}
	b->last_ms = now_ms(b);
	b->sent += chunk.len;
	resp_array(out, 2);
	resp_int(out, done ? 1 : 0);
	resp_bulk(out, chunk.data, chunk.len);
	baton_buf_free(&chunk);
	if (done)
		save_end(b, "complete");
	return command_done(x);
}

int backup_command(struct command_ctx *x)
{
	struct backup *b = get(x->s);
	if (b == NULL)
		return command_fail(x, BATON_ENOMEM);
	if (x->argc == 2 && arg_is(x, 1, "begin")) {
		if (!admin_require_leader(x))
			return 0;
		if (b->waiting != NULL || b->id != 0) {
			resp_error(command_out(x),
				   "TRYAGAIN a backup is in progress (one at a "
				   "time); retry once it ended");
			return command_done(x);
		}
		b->waiting = x->sl;
		int rv = baton_node_read(x->s->node, on_barrier, b);
		if (rv != 0) {
			b->waiting = NULL;
			slot_error(x->sl, rv);
		}
		return 0;
	}
	uint64_t id = 0;
	if (x->argc == 3 && arg_is(x, 1, "next") && arg_id(x, &id))
		return cmd_next(x, b, id);
	if (x->argc == 3 && arg_is(x, 1, "end") && arg_id(x, &id)) {
		if (b->id == id)
			save_end(b, "ended by the client");
		resp_simple(command_out(x), "OK");
		return command_done(x);
	}
	resp_error(command_out(x), "ERR usage: BATON.BACKUP BEGIN | NEXT id | "
				   "END id (id a positive integer)");
	return command_done(x);
}

/* ---- restore ------------------------------------------------------------- */

int backup_restore_load(struct server *s)
{
	if (s->cfg.restore[0] == '\0')
		return 0;
	struct backup *b = get(s);
	if (b == NULL) {
		LOG_ERROR("out of memory");
		return -1;
	}
	char why[512];
	uint8_t *file = NULL;
	size_t len = 0;
	const uint8_t *payload = NULL;
	uint32_t max = s->cfg.profile.machine_max.value;
	if (backup_file_load(s->cfg.restore, &file, &len, &b->header, &payload,
			     why, sizeof why) != 0) {
		LOG_ERROR("--restore %s refused: %s; nothing was written",
			  s->cfg.restore, why);
		return -1;
	}
	uint32_t mv = b->header.machine_version;
	int rv = -1;
	if (mv < KV_MACHINE_VERSION_MIN || mv > max) {
		LOG_ERROR("--restore %s refused: the backup holds machine "
			  "version %" PRIu32 " (written by release %s), and "
			  "this node runs machine versions %u..%" PRIu32
			  ": restore it with a newer release; nothing was "
			  "written",
			  s->cfg.restore, mv, b->header.release,
			  KV_MACHINE_VERSION_MIN, max);
	} else if (max < 3) {
		LOG_ERROR("--restore refused: loading a backup needs machine "
			  "version 3, and this node runs up to %" PRIu32
			  " (--as-release?); nothing was written",
			  max);
	} else if (kv_create(&b->map) != 0) {
		LOG_ERROR("out of memory");
	} else if (kv_restore(b->map, (struct baton_machine_version){mv},
			      payload, (size_t)b->header.payload_len) != 0) {
		LOG_ERROR("--restore %s refused: the backup's map is "
			  "unreadable: %s; nothing was written",
			  s->cfg.restore, kv_errmsg(b->map));
	} else if (kv_value_len_max(b->map) > s->cfg.max_value_bytes) {
		/* This node would refuse every write making such a value;
		 * loading it would make a cluster whose own backups and
		 * writes disagree with its limit. */
		LOG_ERROR("--restore %s refused: the backup holds a value of "
			  "%" PRIu64 " bytes, above this node's "
			  "--max-value-bytes %" PRIu64
			  ": start it with --max-value-bytes %" PRIu64
			  " or more; nothing was written",
			  s->cfg.restore, kv_value_len_max(b->map),
			  s->cfg.max_value_bytes, kv_value_len_max(b->map));
	} else {
		b->keys = kv_dbsize(b->map);
		rv = 0;
	}
	free(file);
	return rv;
}

static void restore_done(struct backup *b)
{
	LOG_INFO("restore: done: %" PRIu64 " keys of %s (index %" PRIu64
		 " of cluster %s) are this cluster's map; it takes writes",
		 b->keys, b->s->cfg.restore, b->header.index,
		 b->header.cluster_id);
	kv_destroy(b->map);
	b->map = NULL;
	b->step = RESTORE_DONE;
	uv_timer_stop(&b->restore_timer);
}

static void on_restore_timer(uv_timer_t *t);

static void on_restore_proposed(void *data, int status, const uint8_t *reply,
				size_t len)
{
	struct backup *b = data;
	BATON_ASSERT(b->proposing);
	b->proposing = false;
	if (b->map == NULL)
		return; /* stopping */
	if (status != 0 || (len > 0 && reply[0] == '-')) {
		char text[256];
		if (status != 0) {
			snprintf(text, sizeof text, "%s",
				 baton_strerror(status));
		} else {
			size_t n =
				len < sizeof text - 1 ? len : sizeof text - 1;
			memcpy(text, reply, n);
			text[n] = '\0';
			text[strcspn(text, "\r\n")] = '\0';
		}
		LOG_WARN("restore: an entry was not applied (%s): retrying",
			 text);
		return; /* pending stays: the next tick sends it again */
	}
	b->pending_ready = false;
	switch (b->step) {
	case RESTORE_BEGIN:
		b->step = RESTORE_CHUNKS;
		break;
	case RESTORE_CHUNKS:
		if (!kv_export_open(b->map))
			b->step = RESTORE_END;
		break;
	case RESTORE_END:
		b->step = RESTORE_AUTHORITY;
		break;
	default:
		BATON_ASSERT(b->step == RESTORE_AUTHORITY);
		restore_done(b);
		return;
	}
	/* The next entry as soon as this one applied, not at the next tick:
	 * a restore goes at the pace of the log (the tick is for waiting). */
	uv_timer_start(&b->restore_timer, on_restore_timer, 0, RESTORE_TICK_MS);
}

/* The payload of the current step into b->pending: 0 or BATON_ENOMEM. */
static int restore_next_payload(struct backup *b)
{
	struct baton_buf kv;
	baton_buf_init(&kv);
	uint64_t at = b->header.index > 0 ? b->header.index : 1;
	int rv = 0;
	switch (b->step) {
	case RESTORE_BEGIN:
		rv = kv_encode_import_begin(at, kv_machine_time_ms(b->map),
					    &kv);
		break;
	case RESTORE_CHUNKS: {
		if (!kv_export_open(b->map))
			rv = kv_export_begin(b->map);
		struct baton_buf records;
		baton_buf_init(&records);
		bool done = false;
		if (rv == 0)
			rv = kv_export_step(b->map, RESTORE_CHUNK_BYTES,
					    &records, &done);
		if (rv == 0 && done)
			kv_export_end(b->map);
		if (rv == 0 && records.len > 0) {
			rv = kv_encode_import_chunk(at, b->chunks++,
						    records.data, records.len,
						    &kv);
		} else if (rv == 0) { /* an empty map */
			b->step = RESTORE_END;
			rv = kv_encode_import_end(at, b->chunks, &kv);
		}
		baton_buf_free(&records);
		break;
	}
	case RESTORE_END:
		rv = kv_encode_import_end(at, b->chunks, &kv);
		break;
	default:
		BATON_ASSERT(b->step == RESTORE_AUTHORITY);
		rv = kv_encode_authority(at, &kv);
	}
	b->pending.len = 0;
	uint8_t kind = PAYLOAD_KV;
	if (rv == 0)
		rv = baton_buf_append(&b->pending, &kind, 1);
	if (rv == 0)
		rv = baton_buf_append(&b->pending, kv.data, kv.len);
	baton_buf_free(&kv);
	return rv;
}

static void on_restore_timer(uv_timer_t *t)
{
	struct backup *b = t->data;
	struct server *s = b->s;
	if (b->map == NULL || b->proposing || s->leader != s->cfg.id ||
	    !s->machine.has_uuid)
		return;
	if (b->step == RESTORE_WAIT) {
		LOG_INFO("restore: loading %" PRIu64 " keys of %s through the "
			 "log",
			 b->keys, s->cfg.restore);
		b->step = RESTORE_BEGIN;
	}
	if (!b->pending_ready) {
		if (restore_next_payload(b) != 0) {
			LOG_ERROR("restore: out of memory");
			server_stop(s, 1);
			return;
		}
		b->pending_ready = true;
	}
	b->proposing = true;
	int rv = baton_node_propose(s->node, b->pending.data, b->pending.len,
				    on_restore_proposed, b);
	if (rv == 0)
		return;
	b->proposing = false;
	if (rv == BATON_ETOOBIG || rv == BATON_EINVAL) {
		/* The same entry would be refused at every tick: say so and
		 * stop, never retry in silence. */
		LOG_ERROR("restore: %s: an entry of %zu bytes (import chunk "
			  "%" PRIu32
			  ") cannot be logged (%s): a key, or a hash "
			  "field and its value, too large for one log entry; "
			  "the new cluster is "
			  "left importing, remove its data directory",
			  s->cfg.restore, b->pending.len, b->chunks,
			  baton_strerror(rv));
		server_stop(s, SERVER_EXIT_REFUSED);
	}
}

int backup_restore_start(struct server *s)
{
	struct backup *b = s->backup;
	if (s->cfg.restore[0] == '\0' || b == NULL || b->map == NULL)
		return 0;
	if (!baton_node_founding(s->node)) {
		LOG_ERROR("--restore %s refused: the data directory %s holds "
			  "state already; a restore founds a new cluster and "
			  "needs an empty data directory (move it away, or "
			  "drop --restore to start the node on its data)",
			  s->cfg.restore, s->cfg.data_dir);
		return -1;
	}
	char uuid[37] = "-";
	if (b->header.has_uuid)
		backup_uuid_format(b->header.uuid, uuid);
	LOG_INFO("restore: %s holds %" PRIu64 " keys at index %" PRIu64
		 " of cluster %s (uuid %s), machine version %" PRIu32
		 ", written by release %s; founding a new cluster with them",
		 s->cfg.restore, b->keys, b->header.index, b->header.cluster_id,
		 uuid, b->header.machine_version, b->header.release);
	uv_timer_start(&b->restore_timer, on_restore_timer, RESTORE_TICK_MS,
		       RESTORE_TICK_MS);
	return 0;
}

static void on_closed(uv_handle_t *h)
{
	struct backup *b = h->data;
	if (--b->closing == 0)
		free(b);
}

void backup_stop(struct server *s)
{
	struct backup *b = s->backup;
	if (b == NULL)
		return;
	save_end(b, "the node is stopping");
	s->backup = NULL;
	if (b->map != NULL) {
		if (kv_export_open(b->map))
			kv_export_end(b->map);
		kv_destroy(b->map);
		b->map = NULL;
	}
	baton_buf_free(&b->pending);
	b->closing = 2;
	uv_close((uv_handle_t *)&b->timer, on_closed);
	uv_close((uv_handle_t *)&b->restore_timer, on_closed);
}
