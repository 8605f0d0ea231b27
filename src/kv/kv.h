/*
 * The key-value state machine, machine versions 1 to 3 (docs/kv.md).
 *
 * How the server uses it:
 *   1. kv_lookup() the command a client sent, kv_check() it (a bad command
 *      gets its -ERR reply here and never reaches the log);
 *   2. a write is kv_encode()d into a log entry payload; once Raft commits
 *      it, every node kv_apply()s it, and the node the client waits on
 *      sends the reply kv_apply() wrote;
 *   3. a read runs with kv_read() on the local map after the read index.
 * Under machine version 2 the server also kv_gate()s every command (a
 * command of a later version gets its -ERR and is not logged), stamps its
 * payloads with the leader's machine-time stamp (kv_encode_v2, kv_encode_txn),
 * and the leader proposes kv_encode_sweep() entries while
 * kv_expiry_due() says keys are due. Machine version 3 adds hashes (HSET,
 * HGET, ...) and TYPE: new commands in the same payloads as version 2's.
 *
 * Applying is deterministic: the same payloads in the same order give the
 * same map, the same replies and byte-identical snapshots on every node
 * (no clocks, no randomness, a fixed hash function; iteration order is the
 * order of the reversed key hash, whatever the table's size or history).
 * The only time is machine time: the largest stamp of the format-2
 * payloads applied so far (0 before any), and expiry is decided from it
 * alone.
 *
 * Keys and values are binary-safe byte strings. Errors are negative
 * BATON_E* codes from baton/raft.h.
 */
#ifndef BATON_KV_H
#define BATON_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/raft.h"
#include "baton/buf.h"
#include "baton/machine.h"

/* The machine versions kv_apply() knows. Version 2 adds expiry,
 * transactions and stamped payloads; version 3 hashes and TYPE
 * (docs/kv.md). A release runs the versions up to its own machine_max,
 * which may be below this. */
#define KV_MACHINE_VERSION_MIN 1u
#define KV_MACHINE_VERSION_MAX 3u

/* Limits. They are part of machine version 1's semantics (an APPEND past
 * the value limit fails on every node alike), so they are constants. */
#define KV_KEY_BYTES_MAX ((size_t)512 << 20)
#define KV_VALUE_BYTES_MAX ((size_t)512 << 20) /* Redis proto-max-bulk-len */
#define KV_ARGS_MAX 65536u /* arguments of one command, the name included */

/* Format versions of what kv writes (docs/kv.md). kv_encode() writes
 * format 1 (any machine version), the kv_encode_v2 family format 2
 * (machine versions 2 and 3); snapshots are format N under machine
 * version N. */
#define KV_PAYLOAD_FORMAT 1u
#define KV_PAYLOAD_FORMAT_2 2u
#define KV_PAYLOAD_FORMAT_MAX 2u
#define KV_SNAPSHOT_FORMAT 1u
#define KV_SNAPSHOT_FORMAT_2 2u
#define KV_SNAPSHOT_FORMAT_3 3u
#define KV_SNAPSHOT_FORMAT_MAX 3u
#define KV_SNAPSHOT_MAGIC "BKVS"

/* Transactions: at most this many commands and watched keys per entry. */
#define KV_TXN_COMMANDS_MAX 65536u
#define KV_TXN_WATCHES_MAX 65536u
/* A sweep entry deletes at most this many keys... */
#define KV_SWEEP_KEYS_MAX 100000u
/* ...and the leader's sweeper should ask for this many: one batch of
 * 2000 deletions applies in about a millisecond (bench-kv-expiry), so a
 * million keys expiring at once never hold the apply loop long. */
#define KV_SWEEP_BATCH_KEYS 2000u

/* ------------------------------------------------------------------------ */
/* Commands.                                                                */

enum kv_command_flags {
	KV_WRITE = 1u << 0, /* goes through the log: kv_encode, kv_apply */
	KV_READ = 1u << 1,  /* runs locally: kv_read */
	/* A write that may make the map bigger (Redis's "denyoom": SET,
	 * APPEND, HSET, INCR, COPY, ...): the server refuses it above
	 * --maxmemory. A write without it (DEL, EXPIRE, PERSIST, RENAME,
	 * GETDEL, FLUSHALL, ...) never grows the map and is always served,
	 * so an operator can make room. */
	KV_GROWS = 1u << 2,
};

/* The map: opaque, made by kv_create(). Not thread-safe: one thread at a
 * time applies, reads and snapshots. */
struct baton_kv;
/* A command's arguments (internal, src/kv/internal.h). */
struct kv__args;

/* One entry of the static command table. */
struct kv_command {
	const char *name; /* lower case, as Redis names it in errors */
	int arity;	  /* argc with the name; -n means at least n */
	uint32_t flags;	  /* KV_WRITE or KV_READ */
	/* The first machine version with this command (1 to 3). Some
	 * options need a later one: kv_gate() says. */
	uint32_t machine_min;
	/* Arguments that are keys: first..last (negative: from the end)
	 * every step; first 0 means none. */
	int key_first, key_last, key_step;
	/* Internal (src/kv/commands.c): checks beyond arity, then the
	 * command itself; each appends its reply. */
	int (*check)(const struct kv__args *a, struct baton_buf *err);
	int (*run)(struct baton_kv *kv, const struct kv__args *a,
		   struct baton_buf *reply);
};

/* The command named name[0..len), case-insensitively, or NULL if kv does
 * not know it. The result points into a static table. */
const struct kv_command *kv_lookup(const uint8_t *name, size_t len);

/* The i-th command of kv's table (0, 1, ... in table order), or NULL past
 * the last: what COMMAND lists, so a command kv gains shows up there. */
const struct kv_command *kv_command_at(size_t i);

/* Redis's glob (KEYS, SCAN MATCH; the server's CONFIG GET): does s match
 * pat? Both are bytes, not strings. */
bool kv_glob_match(const uint8_t *pat, size_t plen, const uint8_t *s,
		   size_t slen);

/* Validate a command before it is logged or run: arity, options, integer
 * arguments, key and value limits. argv[0] is the name (c is what
 * kv_lookup() returned for it); argc >= 1. Only lengths are read for the
 * limits. Returns 0 if the command may go ahead (nothing appended);
 * BATON_EINVAL after appending to err the -ERR reply Redis would give
 * ("-ERR syntax error", ...); BATON_ENOMEM if the command is refused but
 * its reply could not be appended. */
int kv_check(const struct kv_command *c, int argc, const uint8_t *const *argv,
	     const size_t *lens, struct baton_buf *err);

/* May this command, with these arguments, run under machine version v?
 * 0 if so (nothing appended); BATON_EVERSION after appending the -ERR
 * reply naming the version it needs and v, e.g. "-ERR command 'expire'
 * needs machine version 2; the effective machine version is 1", or for
 * SET's options "-ERR option 'ex' of command 'set' needs machine version
 * 2; ..."; BATON_ENOMEM if refused but the reply could not be appended.
 * The server calls it before kv_check() and logs nothing when refused;
 * kv_apply() gives the same reply for such a command found in a format-1
 * payload under version 1. */
int kv_gate(const struct kv_command *c, int argc, const uint8_t *const *argv,
	    const size_t *lens, struct baton_machine_version v,
	    struct baton_buf *err);

/* Append the payload of a write command to out (format: docs/kv.md):
 * u8 KV_PAYLOAD_FORMAT, u32 argc, then argc times u32 length + bytes, all
 * little-endian. The bytes are copied. Returns 0, BATON_EINVAL if argc is
 * not in 1..KV_ARGS_MAX or an argument is longer than KV_VALUE_BYTES_MAX,
 * or BATON_ENOMEM; out is unchanged on failure. */
int kv_encode(int argc, const uint8_t *const *argv, const size_t *lens,
	      struct baton_buf *out);

/* Payload format 2 (machine versions 2 and 3): u8 2, u64 stamp_ms, u8 kind,
 * then the kind's body. stamp_ms is the leader's stamp in unix ms
 * (at most INT64_MAX); applying the payload raises machine time to it.
 * Each returns 0, BATON_EINVAL (a bad stamp, count or length; limits as
 * kv_encode) or BATON_ENOMEM, with out unchanged on failure. */

/* Kind 1: one write command, as kv_encode. */
int kv_encode_v2(uint64_t stamp_ms, int argc, const uint8_t *const *argv,
		 const size_t *lens, struct baton_buf *out);

/* A key WATCHed by a transaction, with kv_watch_hash() at WATCH time. */
struct kv_watch {
	const uint8_t *key;
	size_t key_len;
	uint64_t hash;
};

/* A command queued by MULTI: read or write (reads run at apply, in
 * order, against the state at that point). */
struct kv_txn_command {
	int argc;
	const uint8_t *const *argv;
	const size_t *lens;
};

/* Kind 2: a transaction (EXEC): u32 n_watches, each u32 key length, key,
 * u64 hash; u32 n_commands, each u32 argc and its arguments. Up to
 * KV_TXN_WATCHES_MAX watches and KV_TXN_COMMANDS_MAX commands (0 is fine:
 * an empty EXEC). */
int kv_encode_txn(uint64_t stamp_ms, size_t n_watches,
		  const struct kv_watch *watches, size_t n_commands,
		  const struct kv_txn_command *commands, struct baton_buf *out);

/* Kind 3: a sweep: u32 max_keys (0..KV_SWEEP_KEYS_MAX). Applying it
 * deletes up to max_keys keys whose expiry is <= machine time, in
 * (expire time, key) order; 0 only advances machine time. */
int kv_encode_sweep(uint64_t stamp_ms, uint32_t max_keys,
		    struct baton_buf *out);

/* The hash WATCH records for a key: 64 bits over its existence, type,
 * value and expiry as seen now on this map (machine time); 0 when the key
 * is absent or expired. A transaction whose watched keys no longer hash
 * the same at apply is aborted. Comparing contents means a write that
 * restores the same value and expiry (A -> B -> A) does not abort it: a
 * deliberate, deterministic choice (docs/kv.md). */
uint64_t kv_watch_hash(const struct baton_kv *kv, const uint8_t *key,
		       size_t len);

/* ------------------------------------------------------------------------ */
/* The map.                                                                 */

/* An empty map. Returns 0 or BATON_ENOMEM. Free with kv_destroy(). */
int kv_create(struct baton_kv **out);

/* Free the map and everything in it. NULL is fine. */
void kv_destroy(struct baton_kv *kv);

/* Apply a committed payload under machine version v and append the client
 * reply to `reply` (NULL when nobody waits). A command that Redis would
 * refuse (wrong arguments, a value that is not an integer, ...) is applied
 * as a no-op with its -ERR reply: that is still 0; so is a command of a
 * later version than v (kv_gate's reply: version 2's in a format-1
 * payload under version 1, version 3's under version 2), and
 * a format-2 payload under version 1 (written before a downgrade's entry,
 * logged after it: "-ERR this write was encoded for machine version 2 but
 * its entry applies under machine version 1 ...", machine time unchanged).
 * Migration payloads (kinds 4..9) and the refusals of a fenced or
 * importing map: below, "Migration". Replies: a command's own; a
 * transaction's array of its commands' replies, or the null array *-1 when a
 * watched key changed (nothing ran); a sweep's integer count of keys deleted.
 * Errors, after which the map is unchanged and nothing was appended
 * (kv_errmsg() says why): BATON_EVERSION  v is not a known machine version, the
 * payload's format or kind is unknown to this release, or a command is (every
 * node of this release refuses it alike); BATON_ECORRUPT  the payload is
 * malformed, or a single command is a read command; BATON_ENOMEM    this node
 * could not apply it and must stop, never skip the entry (the others applied
 * it) nor retry it (a transaction may have run in part). */
int kv_apply(struct baton_kv *kv, struct baton_machine_version v,
	     const uint8_t *payload, size_t len, struct baton_buf *reply);

/* Run a read command (GET, MGET, EXISTS, STRLEN, DBSIZE, SCAN, KEYS, TTL,
 * PTTL, EXPIRETIME, PEXPIRETIME, TYPE, HGET, HMGET, HGETALL, HLEN,
 * HEXISTS, HKEYS, HVALS, HSCAN) on the local map and append its reply (an
 * -ERR reply for a bad command, as kv_check() gives). Keys expired at the
 * machine time are absent. Never changes the map. The server gates it
 * (kv_gate) first. Returns 0; BATON_EINVAL if
 * argv[0] is no read command (an -ERR reply appended); BATON_ENOMEM with
 * nothing appended. */
int kv_read(struct baton_kv *kv, int argc, const uint8_t *const *argv,
	    const size_t *lens, struct baton_buf *reply);

/* Number of keys, expired ones not yet deleted included (as DBSIZE). */
uint64_t kv_dbsize(const struct baton_kv *kv);

/* Machine time, unix ms: the largest stamp applied (0 before any). */
uint64_t kv_machine_time_ms(const struct baton_kv *kv);

/* Number of keys with an expiry. */
uint64_t kv_expiry_count(const struct baton_kv *kv);

/* Does some key expire at or before now_ms (the leader's stamp)? The
 * leader's sweeper then proposes kv_encode_sweep(now_ms,
 * KV_SWEEP_BATCH_KEYS), one at a time, until this is false. */
bool kv_expiry_due(const struct baton_kv *kv, uint64_t now_ms);

/* The earliest expiry, unix ms, in *at_ms: true, or false when no key has
 * one (for the sweeper's timer). */
bool kv_expiry_next(const struct baton_kv *kv, uint64_t *at_ms);

/* Converting between machine versions (docs/kv.md, "Converting down"):
 * the state machine's version_changed hook, at the index of a version
 * entry. Up (1 -> 2 -> 3) changes nothing. Down (an explicit downgrade),
 * below version 3: every hash key is deleted, expired or not (version 2
 * has no hashes); below version 2: keys expired at machine time are
 * deleted, every other key loses its expiry and persists, machine time
 * becomes 0. The result is the map a snapshot of the lower version's
 * format restores to. Deterministic (the map alone decides) and it cannot
 * fail: 0, or BATON_EVERSION (nothing changed, kv_errmsg() says why) when
 * from or to is not a version kv implements. */
int kv_convert(struct baton_kv *kv, struct baton_machine_version from,
	       struct baton_machine_version to);

/* What kv_convert(from, to) would lose now, kind by kind (docs/kv.md,
 * "Converting down"): "hashes_deleted", the live hash keys, when
 * converting below version 3; "ttls_dropped", the other live keys with
 * an expiry, when converting below version 2; each key counted once, and
 * a kind listed only when it loses something. The text says it all and
 * what FORCE does. 0, or BATON_EVERSION (*out empty) when from or to is
 * not a version kv implements. */
int kv_convert_loss_describe(const struct baton_kv *kv,
			     struct baton_machine_version from,
			     struct baton_machine_version to,
			     struct baton_machine_loss *out);

/* What kv_convert(from, to) would lose now: the number of keys live at
 * machine time that are hashes, when converting below version 3 (they are
 * deleted), plus that of the other live keys with an expiry, when
 * converting below version 2 (they persist); 0 otherwise. The
 * downgrade's validate step refuses unless forced when it is not 0. */
uint64_t kv_convert_loss(const struct baton_kv *kv,
			 struct baton_machine_version from,
			 struct baton_machine_version to);

/* The refusal of a downgrade that kv_convert_loss() says loses keys, in
 * buf (NUL-terminated, cut to cap): what is lost and what FORCE does,
 * e.g. "3 keys are hashes, which machine version 2 cannot hold; with
 * FORCE they are deleted". Empty when nothing is lost. */
void kv_convert_loss_text(const struct baton_kv *kv,
			  struct baton_machine_version from,
			  struct baton_machine_version to, char *buf,
			  size_t cap);

/* The bytes every map of this process holds in memory: keys, values,
 * hashes' fields, the tables' bucket arrays, the expiry index, a
 * snapshot's or a KEYS's copies of keys changed under it, and what a call
 * allocates while it runs; counted as the allocator gave them (its
 * rounding included) at each allocation and free, so reading it is one
 * load. What the server compares to --maxmemory (docs/operations.md). */
uint64_t kv_memory_bytes(void);

/* Why the last kv_apply(), kv_convert(), kv_snapshot() or kv_restore()
 * failed: a static or owned string, valid until the next call on kv. */
const char *kv_errmsg(const struct baton_kv *kv);

/* Stream the whole map to sink, in pieces, as machine version v writes it
 * (format: docs/kv.md): magic KV_SNAPSHOT_MAGIC, u32 format (N under
 * version N), [formats 2, 3: u64 machine time], u64 count, the entries as
 * u32 key length + key [format 3: + u8 type] + u32 value length + value
 * [a hash in format 3: u64 field count, each field and its value as u32
 * length + bytes] [formats 2, 3: + u64 expiry, 0 for none], then the
 * XXH3-64 of everything before it. Identical maps give identical bytes.
 * sink returns 0 or a negative error, which stops the snapshot and is
 * returned. Returns 0, the sink's error, BATON_EVERSION (v unknown,
 * version 1 while keys have an expiry, or a version below 3 while keys
 * are hashes: the format cannot hold them; nothing is written) or
 * BATON_ENOMEM. */
int kv_snapshot(const struct baton_kv *kv, struct baton_machine_version v,
		int (*sink)(void *arg, const void *buf, size_t len), void *arg);

/* Incremental snapshots: the map as it is at kv_snapshot_begin(), written
 * in slices while kv_apply() goes on changing it (batond's answer to a
 * snapshot pausing the node: docs/node.md, "Snapshots off the event
 * loop"). The bytes of all steps, in order, are exactly kv_snapshot()'s at
 * begin. Before a write changes or removes a key the snapshot has not
 * written yet, the map keeps a copy of the key as it was at begin (a
 * pre-image); a key created after begin is marked so the snapshot skips
 * it. One snapshot at a time.
 *
 * begin: 0, BATON_EVERSION (as kv_snapshot; nothing started), BATON_EBUSY
 * (a snapshot is open already, a KEYS below or a migration's export: the
 * map has one view at a time, and batond has two readers of snapshots, its
 * own and a backup; try again once it ended) or BATON_ENOMEM. step: hands
 * sink the next part, about `budget` bytes (at least one entry), and sets *done
 * after the trailer; 0, the sink's error or BATON_ENOMEM (the snapshot stays
 * open: end it). end: closes it, finished or not, and frees its copies.
 * kv_restore() and kv_convert() end an open snapshot first. */
int kv_snapshot_begin(struct baton_kv *kv, struct baton_machine_version v);
int kv_snapshot_step(struct baton_kv *kv, size_t budget,
		     int (*sink)(void *arg, const void *buf, size_t len),
		     void *arg, bool *done);
void kv_snapshot_end(struct baton_kv *kv);
bool kv_snapshot_open(const struct baton_kv *kv);

/* KEYS in slices, for big maps (batond's, docs/kv.md "KEYS"): the keys
 * matching the glob pattern that are live at machine time at
 * kv_keys_begin(), in KEYS's order, listed a few at a time while
 * kv_apply() goes on changing the map. It shares the incremental
 * snapshot's view (pre-images of keys changed before the walk reached
 * them), and the map holds one view at a time.
 *
 * begin: copies the pattern; 0, BATON_EBUSY (a snapshot or a KEYS is
 * open: try again once it ended; nothing started) or BATON_ENOMEM.
 * step: looks at the next `budget` keys (at least one) and appends to
 * `bulks` the RESP bulk string of each that matched, adding their number
 * to *matched; sets *done after the last key. The reply KEYS gives at
 * begin is then the RESP array header of *matched followed by the bulks
 * of all steps. 0, BATON_ESTATE (no KEYS is open) or BATON_ENOMEM (the
 * listing stays open and failed: end it). end: closes it, finished or
 * not. kv_restore() keeps an open KEYS going: it lists the map replaced,
 * as it was at begin; kv_convert() changes keys through the usual paths,
 * so the listing stays the map at begin too. */
int kv_keys_begin(struct baton_kv *kv, const uint8_t *pattern, size_t len);
int kv_keys_step(struct baton_kv *kv, size_t budget, struct baton_buf *bulks,
		 uint64_t *matched, bool *done);
void kv_keys_end(struct baton_kv *kv);
bool kv_keys_open(const struct baton_kv *kv);

/* Figures of the snapshot open now, or else of the last one. */
struct kv_snapshot_stats {
	uint64_t entries;    /* keys written so far */
	uint64_t preimages;  /* keys copied before a write changed them */
	uint64_t bytes_kept; /* the copies' bytes held now */
};
void kv_snapshot_stats(const struct baton_kv *kv,
		       struct kv_snapshot_stats *out);

/* Replace the map (and machine time) with a snapshot's contents written
 * under machine version v. Format N restores under versions N and later
 * (format 1: machine time 0, no expiries; formats 1 and 2: no hashes). On
 * failure the old contents stay: BATON_ECORRUPT (bad magic, length,
 * checksum, limits, duplicate keys or fields, an empty hash, an unknown
 * type), BATON_EVERSION (v unknown, or a format newer than v allows),
 * BATON_ENOMEM. The bytes are copied. */
int kv_restore(struct baton_kv *kv, struct baton_machine_version v,
	       const uint8_t *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Migration to another cluster (docs/relay.md; docs/kv.md "Migration").   */

/* A cluster UUID, as the data directory's identity holds it. */
#define KV_CLUSTER_UUID_BYTES 16u

/* What the map knows of a migration: replicated, so every node of a
 * cluster agrees, and kept in snapshots. All zero on a map that never
 * applied a FENCE, IMPORT or AUTHORITY payload. */
struct kv_migration {
	/* old side */
	bool fenced;		/* a FENCE applied: every later write is
				 * refused, a no-op */
	char fence_target[256]; /* the cluster id named by the FENCE ("" if
				 * none), NUL-terminated */
	/* new side */
	bool importing;		 /* an IMPORT_BEGIN applied, no AUTHORITY yet */
	uint64_t import_index;	 /* last old index fully applied (0: none) */
	bool snapshot_open;	 /* an IMPORT_BEGIN applied, its END not yet */
	uint64_t snapshot_index; /* that snapshot's old index */
	uint32_t snapshot_chunks; /* chunks of it applied so far */
	bool authority;		  /* an AUTHORITY applied: this cluster now
				   * takes writes */
	uint64_t authority_from;  /* the old index named by the AUTHORITY */
	/* The old index of a FENCE met in an IMPORT_ENTRY (0: none): the old
	 * map refused every write after it, so the entries after it are
	 * no-ops here too (reply KV_FENCED_REPLY). */
	uint64_t import_fence_index;
	/* Both sides (CONTROL payloads): the operator aborted the migration
	 * (the old side exports nothing and refuses a fence, the new side
	 * imports nothing) until RESUME; the old side's fence was followed
	 * by the other cluster's authority, so it can no longer be lifted
	 * (sealed); UNFENCE payloads applied. */
	bool aborted;
	bool sealed;
	uint32_t unfences;
	/* New side: the UUID of the cluster imported from, pinned by the
	 * first IMPORT_BEGIN that named one; a BEGIN naming another is
	 * refused. */
	bool has_source_uuid;
	uint8_t source_uuid[KV_CLUSTER_UUID_BYTES];
};
void kv_migration_state(const struct baton_kv *kv, struct kv_migration *out);

/* The fixed reply a write gets when it is refused by a fenced (old) map,
 * or by an importing (new) map before AUTHORITY: the server recognises
 * these bytes and re-routes the write. */
#define KV_FENCED_REPLY                                                        \
	"-TRYAGAIN write authority moved to another cluster; retry\r\n"
#define KV_IMPORTING_REPLY                                                     \
	"-TRYAGAIN this cluster is importing and takes no writes yet; "        \
	"retry\r\n"

/* The longest cluster id a FENCE names. */
#define KV_FENCE_TARGET_BYTES_MAX 255u

/* Old side: a portable export of the live map ("export records",
 * docs/kv.md), in slices like kv_snapshot_begin/step: the keys live at
 * begin's machine time, as they were at begin, while kv_apply() goes on.
 * It is the map's one view: begin returns BATON_EBUSY while a snapshot or
 * a KEYS is open (and they while an export is), BATON_ESTATE when an
 * export is open already, or BATON_ENOMEM. step appends whole records to
 * out until it grew by about `budget` bytes (one record at least), sets
 * *done after the last; 0, BATON_ESTATE (none open) or BATON_ENOMEM (the
 * export stays open and failed: end it). end closes it, finished or not.
 * Each record:
 *   u8 type (1 string, 2 hash, 3 string head, 4 string piece, 5 more hash
 *   fields), u32 key length, key,
 *   type 1: u32 value length, value
 *   type 2, 5: u64 field count (>= 1), each u32 length + field, u32
 *           length + value, in the canonical order
 *   type 3: u64 value length, u32 length + the value's first bytes
 *   type 4: u64 offset, u32 length + the bytes at that offset
 *   types 1, 2, 3: u64 expiry (unix ms, 1..INT64_MAX; 0 for none)
 * A string or hash that does not fit what is left of a step goes in parts
 * (3 then 4s; 2 then 5s: docs/kv.md). Every release reads this format
 * forever; formats grow by new types. */
int kv_export_begin(struct baton_kv *kv);
int kv_export_step(struct baton_kv *kv, size_t budget, struct baton_buf *out,
		   bool *done);
void kv_export_end(struct baton_kv *kv);
bool kv_export_open(const struct baton_kv *kv);

/* Migration payloads: format 2, kinds 4 to 10 (docs/kv.md "Migration").
 * Each appends to out: 0, BATON_EINVAL (a bad argument) or BATON_ENOMEM,
 * out unchanged on failure. */
/* FENCE (machine versions 2 and 3): target_cluster is a cluster id of at
 * most KV_FENCE_TARGET_BYTES_MAX bytes; stamp_ms (<= INT64_MAX) records
 * when, and does not move machine time. */
int kv_encode_fence(uint64_t stamp_ms, const char *target_cluster,
		    struct baton_buf *out);
/* IMPORT_BEGIN, IMPORT_CHUNK, IMPORT_END, IMPORT_ENTRY and AUTHORITY
 * (machine version 3 only; under version 2 each applies as a no-op with an
 * -ERR). records: whole export records (BATON_EINVAL if not); old_payload:
 * a payload the old cluster passed to kv_apply() at old_index (>= 1). */
int kv_encode_import_begin(uint64_t snapshot_index, uint64_t machine_time_ms,
			   struct baton_buf *out);
/* The same, naming the UUID of the cluster imported from (pinned by the
 * first BEGIN that names one; a later one naming another is refused). */
int kv_encode_import_begin_from(uint64_t snapshot_index,
				uint64_t machine_time_ms,
				const uint8_t uuid[KV_CLUSTER_UUID_BYTES],
				struct baton_buf *out);
int kv_encode_import_chunk(uint64_t snapshot_index, uint32_t chunk_seq,
			   const uint8_t *records, size_t len,
			   struct baton_buf *out);
int kv_encode_import_end(uint64_t snapshot_index, uint32_t chunks,
			 struct baton_buf *out);
int kv_encode_import_entry(uint64_t old_index, const uint8_t *old_payload,
			   size_t len, struct baton_buf *out);
int kv_encode_authority(uint64_t from_old_index, struct baton_buf *out);
/* CONTROL (kind 10; machine versions 2 and 3, like FENCE): the operator's
 * and the migration's decisions, replayed alike everywhere (docs/kv.md
 * "Migration"). ABORT stops the migration on this side (refused once this
 * cluster holds authority, or its fence is sealed); RESUME undoes ABORT;
 * UNFENCE lifts this cluster's fence (refused once sealed; it aborts the
 * export too: the other cluster's import of the old log past the fence
 * is void, and a resumed export starts from a new snapshot); SEAL records
 * that the other cluster took authority after this cluster's fence. */
enum kv_control_op {
	KV_CONTROL_ABORT = 1,
	KV_CONTROL_RESUME = 2,
	KV_CONTROL_UNFENCE = 3,
	KV_CONTROL_SEAL = 4,
};
int kv_encode_control(uint64_t stamp_ms, enum kv_control_op op,
		      struct baton_buf *out);

#endif /* BATON_KV_H */
