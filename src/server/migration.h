/*
 * Migration between two clusters through baton-relay (docs/relay.md): the
 * node's relay client, the old side's export stream and fence, the new
 * side's import and authority, and which cluster answers a client.
 *
 *   migration.c         the relay client, the view, ticks, proxy proofs
 *   migration_admin.c   INFO's migration section, readiness, and
 *                       BATON.MIGRATION STATUS/HANDOFF/ABORT/RESUME/UNFENCE
 *   migration_wire.c    the messages inside relay DATA payloads (pure)
 *   migration_export.c  the old leader: snapshot, entries, fence
 *   migration_import.c  the new leader: proposing what it receives,
 *                       hand-off, authority
 *
 * A node takes part only when started with --relay. Which side it is on:
 * --migrate-from CLUSTER makes it the new side (it imports from CLUSTER);
 * otherwise it is an old side that exports when asked. Nothing here
 * changes a node that has no --relay.
 */
#ifndef BATON_SERVER_MIGRATION_H
#define BATON_SERVER_MIGRATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/buf.h"
#include "baton/types.h"

struct server;
struct client_state;
struct slot;
struct command_ctx;

/* ---- messages (migration_wire.c): docs/relay.md "Messages" ------------ */

enum migration_msg_type {
	MIG_EXPORT_REQ = 1,  /* new leader -> old cluster (multicast) */
	MIG_BEGIN = 2,	     /* old leader -> new leader: a snapshot starts */
	MIG_CHUNK = 3,	     /* ... its export records */
	MIG_END = 4,	     /* ... it ended */
	MIG_ENTRY = 5,	     /* ... a committed kv payload after it */
	MIG_HEAD = 6,	     /* ... nothing new: where the old log is */
	MIG_ACK = 7,	     /* new leader -> old leader: import index */
	MIG_HANDOFF = 8,     /* new leader -> old leader: fence now */
	MIG_FENCED = 9,	     /* old leader -> new leader: fenced at F */
	MIG_AUTHORITY = 10,  /* new leader -> old cluster (multicast) */
	MIG_ENTRY_PART = 11, /* old -> new: a part of an ENTRY too long for
				one message; the ENTRY with the rest follows */
};
#define MIG_MSG_TYPE_MAX 11u
#define MIG_CLUSTER_MAX 255u

/* The message format this tree writes and reads (docs/relay.md,
 * "Messages"): 2, sealed. Format 1 (unsealed, never released) is refused. */
#define MIG_FORMAT 2u
/* The first byte of every message: tells a sealed message from anything
 * else before the format byte is read. */
#define MIG_MAGIC 0xBAu
/* Bytes of the AEAD's nonce and tag (ChaCha20-Poly1305), and of a key. */
#define MIG_NONCE_BYTES 12u
#define MIG_TAG_BYTES 16u
#define MIG_KEY_BYTES 32u
/* The most data one message carries: what the relay carries, less room
 * for the header and the tag. */
#define MIG_DATA_MAX ((size_t)(8u << 20) - 1024u)

/* One message. Every message carries its sender (cluster and node), the
 * cluster it is for, the session the new leader chose, the sender's
 * sequence number (it only grows, across the sender's restarts), and the
 * sender's last applied index of its own log. All of it but the data is
 * sent in clear and authenticated; the data is encrypted. */
struct migration_msg {
	uint8_t type;
	char from_cluster[MIG_CLUSTER_MAX + 1];
	char to_cluster[MIG_CLUSTER_MAX + 1];
	baton_node_id from_node;
	baton_node_id to_node; /* 0: every node of to_cluster */
	uint64_t session;
	uint64_t seq;
	uint64_t applied;
	uint64_t index;	     /* BEGIN/END: snapshot index; ENTRY: old index;
				ACK/HANDOFF: import index; FENCED/AUTHORITY:
				F; EXPORT_REQ: import index to resume after */
	uint64_t value;	     /* BEGIN: machine time; END: chunks; CHUNK: seq;
				AUTHORITY: the new leader's node id */
	const uint8_t *data; /* CHUNK: records; ENTRY: kv payload;
				EXPORT_REQ/AUTHORITY: a cluster id; BEGIN:
				the old cluster's UUID (16 bytes) */
	size_t len;
};

/* The migration secret (--migration-secret-file) and the keys derived
 * from it with HKDF-SHA-256, one per purpose and ordered pair of clusters
 * (so a message sealed from A to B opens neither from B to A nor from A to
 * C). Derived keys are cached. Owned by the caller; wipe it when done. */
#define MIG_SECRET_BYTES_MAX 4096u
#define MIG_KEYS_CACHED 8u
struct migration_keys {
	size_t secret_len;
	uint8_t secret[MIG_SECRET_BYTES_MAX];
	uint32_t next; /* the cache slot replaced next */
	struct {
		bool used;
		uint8_t purpose;
		char from[MIG_CLUSTER_MAX + 1];
		char to[MIG_CLUSTER_MAX + 1];
		uint8_t key[MIG_KEY_BYTES];
	} cache[MIG_KEYS_CACHED];
};
/* 0, or BATON_EINVAL for an empty or too long secret. */
int migration_keys_init(struct migration_keys *k, const uint8_t *secret,
			size_t len);
void migration_keys_wipe(struct migration_keys *k);

/* Seal m (every field but data/len in clear, authenticated; the data
 * encrypted) with the key of m->from_cluster -> m->to_cluster, and append
 * it to out: 0, BATON_EINVAL (a field out of range), BATON_ENOMEM or
 * BATON_EIO (no randomness, or the cipher failed). The nonce is random;
 * migration_msg_seal_nonce takes it from the caller (tests and fuzzing
 * only: a nonce must never be used twice with one key). */
int migration_msg_seal(struct migration_keys *k, const struct migration_msg *m,
		       struct baton_buf *out);
int migration_msg_seal_nonce(struct migration_keys *k,
			     const struct migration_msg *m,
			     const uint8_t nonce[MIG_NONCE_BYTES],
			     struct baton_buf *out);
/* Read a sealed message's header only (no key needed): m's fields, its
 * data pointing at the ciphertext. 0, or BATON_ECORRUPT (malformed) or
 * BATON_EVERSION (another format). */
int migration_msg_parse(const uint8_t *buf, size_t len,
			struct migration_msg *out);
/* Parse and open a sealed message: 0 with *out decoded, its data in
 * plain (reset first; out->data points into it); BATON_ECORRUPT or
 * BATON_EVERSION as migration_msg_parse (then *out is unset);
 * BATON_EINVAL when it does not authenticate: forged, altered, sealed
 * with another secret or for another pair of clusters (then *out holds
 * the header as sent, for the log, and no data). */
int migration_msg_open(struct migration_keys *k, const uint8_t *buf, size_t len,
		       struct migration_msg *out, struct baton_buf *plain);
/* The last sequence number accepted from each authenticated sender, for
 * its unicast and its multicast messages apart (the relay keeps the order
 * within each, not between them). A sender's numbers start at its clock
 * (microseconds) when it started and only grow, so a restarted sender is
 * not taken for a replay. Only senders whose message authenticated take a
 * slot; when all are taken, the oldest goes. */
#define MIG_SENDERS_MAX 64u
struct migration_replay {
	uint32_t n;
	struct {
		char cluster[MIG_CLUSTER_MAX + 1];
		baton_node_id node;
		bool multicast;
		uint64_t last_seq;
	} senders[MIG_SENDERS_MAX];
};
/* Is m's sequence number above the last accepted from its sender? If so
 * it becomes the last (call only for a message that authenticated). */
bool migration_replay_check(struct migration_replay *t,
			    const struct migration_msg *m);

/* The proof a node gives that it holds the migration secret, to a proxy
 * of the other cluster that is about to send it a password: HMAC of the
 * proxy's nonce and the address the proxy reached, under the key of
 * prover_cluster -> asker_cluster (docs/relay.md, "Proxying"). */
#define MIG_PROOF_BYTES 32u
int migration_proxy_proof(struct migration_keys *k, const char *prover_cluster,
			  const char *asker_cluster, const uint8_t *nonce,
			  size_t nonce_len, const char *address,
			  uint8_t out[MIG_PROOF_BYTES]);
const char *migration_msg_name(uint8_t type);

/* Format 1 (migration_wire_v1.c): release 1.3.0's unsealed messages,
 * spoken only with a cluster named by --migrate-from-unsealed. Only
 * type, session, applied, index, value and data are carried; encoding
 * takes the types 1..10 (0, or BATON_EINVAL / BATON_ENOMEM); decoding
 * fills those fields, data pointing into buf (0, or BATON_ECORRUPT). */
int migration_msg_encode_v1(const struct migration_msg *m,
			    struct baton_buf *out);
int migration_msg_decode_v1(const uint8_t *buf, size_t len,
			    struct migration_msg *out);

/* ---- the node ---------------------------------------------------------- */

/* Start the relay client (after the node started): 0 or an error logged. */
int migration_start(struct server *s);
/* Send LEAVE and close (shutting down). */
void migration_stop(struct server *s);
/* Every committed kv payload this node applies, with its index: the
 * export's tee (machine.c's kv_applied callback). */
void migration_kv_applied(struct server *s, uint64_t index,
			  const uint8_t *payload, size_t len);

/* Where a client's data command goes now (migration_serve.c). */
enum migration_route {
	MIGRATION_HERE = 0, /* this node answers it */
	MIGRATION_PROXY,    /* *detail: the address of the other cluster's
			       node to proxy it to (proxy_command) */
	MIGRATION_REFUSE,   /* *detail: why, for a -TRYAGAIN error */
	MIGRATION_WAIT,	    /* hand-off under way: migration_park() it */
};
enum migration_route migration_route(struct server *s,
				     const struct client_state *cs,
				     const char **detail);
/* Hold a command until this (new) cluster holds authority, then run it
 * (command_dispatch), in arrival order; -TRYAGAIN after MIG_PARK_MS. */
void migration_park(struct server *s, struct client_state *cs, struct slot *sl,
		    int argc, const uint8_t *const *argv, const size_t *lens);
/* Is this a write's reply from a state machine that refused it for the
 * migration (kv's KV_FENCED_REPLY or KV_IMPORTING_REPLY)? It did nothing. */
bool migration_refused_write(const uint8_t *reply, size_t len);
/* Does this node's state machine refuse writes of its own (fenced old
 * side, or new side still importing)? The leader's sweeper then rests. */
bool migration_writes_frozen(const struct server *s);
/* INFO's migration_ready: true for a node in no migration and for the
 * old side (it serves as always); for the new side, whether a scheduler
 * may now stop an old node (docs/relay.md "When the new cluster is
 * ready"); false with *why saying what it waits for. /ready follows it. */
bool migration_ready(struct server *s, const char **why);
/* INFO's "# Migration" section (nothing without --relay). */
void migration_info(struct server *s, struct baton_buf *b);
/* BATON.MIGRATION STATUS | HANDOFF | ABORT | RESUME | UNFENCE. */
int admin_migration(struct command_ctx *x);
/* BATON.MIGRATION ATTACH <relay host:port> <relay cluster> <migrate-to>
 * <migration secret file> [<relay secret file>] (migration_attach.c): a
 * node started without --relay joins a migration as an old node, as if
 * started with those flags; refused on a node that has a relay. */
int migration_attach(struct command_ctx *x);
/* BATON.MIGRATION.PROVE <nonce> <asker cluster>, allowed before AUTH:
 * this node's proof (migration_proxy_proof) that it holds the migration
 * secret, bound to its own client address, as a bulk string. */
int migration_cmd_prove(struct command_ctx *x);
/* A proxy's request for the proof that the node it reached at `addr`
 * holds the migration secret, before it sends that node a password
 * (proxy.c): BATON.MIGRATION.PROVE with a fresh nonce, appended to out,
 * and the proof a holder of the secret at that address answers. 0, or -1
 * with why (no migration secret, no randomness, no memory). */
#define MIG_PROOF_NONCE_BYTES 32u
int migration_proof_request(struct server *s, const char *addr,
			    struct baton_buf *out,
			    uint8_t expect[MIG_PROOF_BYTES], char *why,
			    size_t cap);
/* Is the reply r (n bytes, one whole RESP reply) that proof? false, with
 * why, if not. */
bool migration_proof_check(const uint8_t expect[MIG_PROOF_BYTES],
			   const uint8_t *r, size_t n, char *why, size_t cap);
/* Does this node proxy only to nodes that proved themselves (it takes
 * part in a migration)? */
bool migration_proxy_needs_proof(const struct server *s);

#endif /* BATON_SERVER_MIGRATION_H */
