/*
 * The key-value state machine, machine version 1 (docs/kv.md).
 *
 * How the server uses it:
 *   1. kv_lookup() the command a client sent, kv_check() it (a bad command
 *      gets its -ERR reply here and never reaches the log);
 *   2. a write is kv_encode()d into a log entry payload; once Raft commits
 *      it, every node kv_apply()s it, and the node the client waits on
 *      sends the reply kv_apply() wrote;
 *   3. a read runs with kv_read() on the local map after the read index.
 *
 * Applying is deterministic: the same payloads in the same order give the
 * same map, the same replies and byte-identical snapshots on every node
 * (no clocks, no randomness, a fixed hash function; iteration order is the
 * order of the reversed key hash, whatever the table's size or history).
 *
 * Keys and values are binary-safe byte strings. Errors are negative
 * BATON_E* codes from baton/raft.h.
 */
#ifndef BATON_KV_H
#define BATON_KV_H

#include <stddef.h>
#include <stdint.h>

#include "baton/raft.h"
#include "baton/buf.h"

/* The machine versions kv_apply() knows: 1 only. */
#define KV_MACHINE_VERSION_MIN 1u
#define KV_MACHINE_VERSION_MAX 1u

/* Limits. They are part of machine version 1's semantics (an APPEND past
 * the value limit fails on every node alike), so they are constants. */
#define KV_KEY_BYTES_MAX ((size_t)512 << 20)
#define KV_VALUE_BYTES_MAX ((size_t)512 << 20) /* Redis proto-max-bulk-len */
#define KV_ARGS_MAX 65536u /* arguments of one command, the name included */

/* Format versions of what kv writes (docs/kv.md). */
#define KV_PAYLOAD_FORMAT 1u
#define KV_SNAPSHOT_FORMAT 1u
#define KV_SNAPSHOT_MAGIC "BKVS"

/* ------------------------------------------------------------------------ */
/* Commands.                                                                */

enum kv_command_flags {
	KV_WRITE = 1u << 0, /* goes through the log: kv_encode, kv_apply */
	KV_READ = 1u << 1,  /* runs locally: kv_read */
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

/* Validate a command before it is logged or run: arity, options, integer
 * arguments, key and value limits. argv[0] is the name (c is what
 * kv_lookup() returned for it); argc >= 1. Only lengths are read for the
 * limits. Returns 0 if the command may go ahead (nothing appended);
 * BATON_EINVAL after appending to err the -ERR reply Redis would give
 * ("-ERR syntax error", ...); BATON_ENOMEM if the command is refused but
 * its reply could not be appended. */
int kv_check(const struct kv_command *c, int argc, const uint8_t *const *argv,
	     const size_t *lens, struct baton_buf *err);

/* Append the payload of a write command to out (format: docs/kv.md):
 * u8 KV_PAYLOAD_FORMAT, u32 argc, then argc times u32 length + bytes, all
 * little-endian. The bytes are copied. Returns 0, BATON_EINVAL if argc is
 * not in 1..KV_ARGS_MAX or an argument is longer than KV_VALUE_BYTES_MAX,
 * or BATON_ENOMEM; out is unchanged on failure. */
int kv_encode(int argc, const uint8_t *const *argv, const size_t *lens,
	      struct baton_buf *out);

/* ------------------------------------------------------------------------ */
/* The map.                                                                 */

/* An empty map. Returns 0 or BATON_ENOMEM. Free with kv_destroy(). */
int kv_create(struct baton_kv **out);

/* Free the map and everything in it. NULL is fine. */
void kv_destroy(struct baton_kv *kv);

/* Apply a committed payload under machine version v and append the client
 * reply to `reply` (NULL when nobody waits). A command that Redis would
 * refuse (wrong arguments, a value that is not an integer, ...) is applied
 * as a no-op with its -ERR reply: that is still 0. Errors, after which the
 * map is unchanged and nothing was appended:
 *   BATON_EVERSION  v is not a known machine version, the payload format is
 *                   newer than KV_PAYLOAD_FORMAT, or the command is not one
 *                   of version v (every node refuses it alike);
 *   BATON_ECORRUPT  the payload is malformed, or names a read command;
 *   BATON_ENOMEM    this node could not apply it: it must retry or stop,
 *                   never skip the entry (the others applied it). */
int kv_apply(struct baton_kv *kv, struct baton_machine_version v,
	     const uint8_t *payload, size_t len, struct baton_buf *reply);

/* Run a read command (GET, MGET, EXISTS, STRLEN, DBSIZE, SCAN, KEYS)
 * on the local map and append its reply (an -ERR reply for a bad command,
 * as kv_check() gives). Never changes the map. Returns 0; BATON_EINVAL if
 * argv[0] is no read command (an -ERR reply appended); BATON_ENOMEM with
 * nothing appended. */
int kv_read(struct baton_kv *kv, int argc, const uint8_t *const *argv,
	    const size_t *lens, struct baton_buf *reply);

/* Number of keys. */
uint64_t kv_dbsize(const struct baton_kv *kv);

/* Stream the whole map to sink, in pieces (format: docs/kv.md): magic
 * KV_SNAPSHOT_MAGIC, u32 KV_SNAPSHOT_FORMAT, u64 count, the entries as
 * u32 key length + key + u32 value length + value, then the XXH3-64 of
 * everything before it. Identical maps give identical bytes. sink returns
 * 0 or a negative error, which stops the snapshot and is returned. Returns
 * 0, the sink's error, or BATON_ENOMEM. */
int kv_snapshot(const struct baton_kv *kv,
		int (*sink)(void *arg, const void *buf, size_t len), void *arg);

/* Replace the map with a snapshot's contents. On failure the old contents
 * stay: BATON_ECORRUPT (bad magic, length, checksum, limits, duplicate
 * keys), BATON_EVERSION (a format newer than KV_SNAPSHOT_FORMAT),
 * BATON_ENOMEM. The bytes are copied. */
int kv_restore(struct baton_kv *kv, const uint8_t *buf, size_t len);

#endif /* BATON_KV_H */
