/*
 * The peer protocol codec: the frames batond nodes exchange over TCP
 * (schema in proto/peer.proto, description in docs/peer-protocol.md).
 *
 * A frame is a 4-byte little-endian length followed by that many bytes of
 * one serialized protobuf Envelope; from protocol 4 on, the frames after
 * the handshake end with an 8-byte checksum of both (a frame whose
 * checksum differs is refused before anything decodes it). The envelope's
 * body is a handshake, a
 * handshake reply, one Raft message, a client write forwarded to the leader,
 * the leader's reply to it, a join request or its reply. A body this release
 * does not know (from a newer peer) decodes as BATON_PEER_UNKNOWN: the caller
 * counts and skips it.
 *
 * Versions. The handshake and its reply are frozen (fields only appended):
 * they are encoded and decoded without a version, since they are how two
 * nodes find the peer protocol version they will speak. Every other frame
 * is encoded and decoded in the version negotiated on its connection: each
 * of those encoders and decoders takes it, and returns BATON_EVERSION for a
 * version this codec does not implement (see baton_peer_proto_supported()).
 * What each version adds or drops (docs/peer-protocol.md, "Versions"):
 *   1  the first: Raft messages, single forwarded commands;
 *   2  adds forwarded transactions (several commands and watches);
 *   3  drops Raft.from, Append's leader profile and the single-command
 *      form of Forward (a forward is always a list of commands);
 *   4  the messages of 3, each frame ending with a checksum.
 * Info requests and join frames exist in every version.
 *
 * Encoders append one whole frame (length prefix included) to a growable
 * struct baton_buf (baton/buf.h); on error the buffer is left as it was.
 * Decoders take the envelope bytes of one frame (what follows the prefix)
 * and fill a struct baton_peer_frame whose pointers point into memory owned
 * by that frame until baton_peer_frame_free().
 *
 * Errors: BATON_EINVAL (an encoder was given something the protocol cannot
 * carry), BATON_ETOOBIG (a named limit below is exceeded), BATON_ECORRUPT
 * (malformed input), BATON_EVERSION (a protocol version this codec does not
 * implement, or no common version), BATON_ENOMEM.
 */
#ifndef BATON_WIRE_PEER_H
#define BATON_WIRE_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/raft.h"

struct baton_buf; /* baton/buf.h */

/* ---- limits ---------------------------------------------------------------
 * Every one is enforced on encode and on decode. */

/* Bytes of the length prefix of every frame. */
#define BATON_PEER_PREFIX_LEN 4u
/* Bytes of the checksum that ends every frame of protocol 4 and later:
 * XXH3-64 (src/util/checksum.h) of the prefix and the envelope. */
#define BATON_PEER_CHECKSUM_LEN 8u
/* Largest envelope (the bytes after the prefix): a whole snapshot chunk or
 * entry of the maximum size plus room for everything around it. A larger
 * announced length is a broken or hostile peer: close the connection. */
#define BATON_PEER_FRAME_MAX ((64u << 20) + (1u << 20))
/* Entries in one Append message, and bytes of one entry's data. */
#define BATON_PEER_ENTRIES_MAX 65536u
#define BATON_PEER_ENTRY_BYTES_MAX (64u << 20)
/* Bytes of one snapshot chunk. */
#define BATON_PEER_CHUNK_MAX (64u << 20)
/* Arguments of one forwarded command (the command name included); the
 * same as RESP's default limit (resp.h). */
#define BATON_PEER_FORWARD_ARGS_MAX 65536u
/* Commands and watched keys of one forwarded transaction. */
#define BATON_PEER_FORWARD_COMMANDS_MAX 65536u
#define BATON_PEER_FORWARD_WATCHES_MAX 65536u
/* The extra keys of an info result (room for later releases): how many,
 * and the bytes of each key and value. */
#define BATON_PEER_INFO_EXTRA_MAX 64u
#define BATON_PEER_INFO_KEY_MAX 255u
#define BATON_PEER_INFO_VALUE_MAX 65536u
/* The extra key carrying an info result's memory_max_bytes: its value is
 * 8 bytes, little-endian. A value of another length is ignored (a later
 * release may give it another meaning under a new key). */
#define BATON_PEER_INFO_KEY_MEMORY_MAX "memory_max_bytes"
#define BATON_PEER_INFO_MEMORY_MAX_BYTES 8u
/* Lengths of strings, in bytes, not counting the terminating NUL. */
#define BATON_PEER_CLUSTER_ID_MAX 255u
#define BATON_PEER_ADDR_MAX 255u
#define BATON_PEER_REASON_MAX 1023u
#define BATON_PEER_ERROR_MAX 4096u
/* Memory a decode may allocate beyond the size of the frame itself, in
 * all (protobuf-c's scratch space included): bounds what a frame of many
 * tiny elements can make a node allocate. A frame within the limits above
 * needs well under half of it. */
#define BATON_PEER_DECODE_SLACK (32u << 20)
/* Largest envelope a connection may send before its handshake completes:
 * the handshake frames are small (a cluster view of BATON_MAX_MEMBERS rows
 * is under 2 KiB), so a larger announced length is refused at once, before
 * anything is buffered for a peer that has not proven who it is. */
#define BATON_PEER_HANDSHAKE_FRAME_MAX (64u << 10)
/* Peer authentication (docs/peer-protocol.md): the random nonce of each
 * side and the HMAC-SHA-256 that proves the peer secret, in bytes. */
#define BATON_PEER_AUTH_NONCE_LEN 32u
#define BATON_PEER_AUTH_MAC_LEN 32u
/* A forwarded write's proof that its client authenticated: SHA-256. */
#define BATON_PEER_CLIENT_AUTH_LEN 32u
/* A cluster's UUID (docs/batond.md, "Identity"), in bytes. */
#define BATON_PEER_CLUSTER_UUID_LEN 16u
/* Room for any refusal text below (a reason must also fit
 * BATON_PEER_REASON_MAX to travel; the texts here always do). */
#define BATON_PEER_REFUSAL_MAX 512u

/* ---- protocol versions --------------------------------------------------- */

/* Whether this codec implements peer protocol version v: every version a
 * release of the table (baton_releases(), include/baton/version.h) speaks,
 * so the table stays the only place a version is written down. A release
 * that adds a version adds its row there and its frames here. */
bool baton_peer_proto_supported(struct baton_proto_version v);

/* Whether the frames of version v end with a checksum (4 and later). The
 * frozen handshake frames (version 0 here) never do. */
bool baton_peer_proto_checksummed(struct baton_proto_version v);

/* The highest peer protocol version both profiles speak, in *out. Returns
 * 0, or BATON_EVERSION when the ranges [proto_min, proto_max] do not
 * overlap (or one is empty); *out is then zero. Pure and symmetric. */
int baton_peer_choose_proto(struct baton_profile mine,
			    struct baton_profile theirs,
			    struct baton_proto_version *out);

/* The check of the node that dialled, on the version the other end chose:
 * 0 if `chosen` is within mine's range and this codec implements it, else
 * BATON_EVERSION (refuse the connection). Pure. */
int baton_peer_check_choice(struct baton_profile mine,
			    struct baton_proto_version chosen);

/* The refusal texts, written into buf (cap bytes, NUL-terminated, truncated
 * if need be) and returned. Each names both nodes with their releases and
 * protocol ranges, so that the two logs that carry it (the refusing node's
 * and, through the refusal frame, the other's) tell the whole story:
 *   mismatch:    "no common peer protocol version: node 1 (release 0.1.0)
 *                speaks 1..1, node 9 (release 9.0.0) speaks 1000..1001"
 *   bad choice:  "node 2 chose peer protocol version 7, outside the range of
 *                node 1: node 1 (release 0.1.0) speaks 1..1, node 2 (release
 *                9.0.0) speaks 7..7"
 * `mine` is the node writing the text. When both releases are in the table
 * and no release of it speaks a version of each range (so no rolling
 * upgrade leads from one to the other: 1.x and 2.0.0), the mismatch says
 * so instead, from mine's side:
 *   "no common peer protocol (ours 4-4, theirs 2-3): upgrade through the
 *   relay, docs/relay.md" */
const char *
baton_peer_proto_mismatch(const struct baton_member_versions *mine,
			  const struct baton_member_versions *theirs, char *buf,
			  size_t cap);
const char *
baton_peer_proto_bad_choice(const struct baton_member_versions *mine,
			    const struct baton_member_versions *theirs,
			    struct baton_proto_version chosen, char *buf,
			    size_t cap);

/* The strict-release refusal, in the same way: "strict release: node 1
 * runs release 1.2.0, node 4 runs release 1.1.0, and mixed releases are
 * refused". */
const char *
baton_peer_release_mismatch(const struct baton_member_versions *mine,
			    const struct baton_member_versions *theirs,
			    char *buf, size_t cap);

/* ---- message bodies ------------------------------------------------------ */

/* The first frame on a connection, sent by the node that dialled. Strings
 * are NUL-terminated; NULL encodes as "". */
struct baton_peer_handshake {
	const char *cluster_id; /* at most BATON_PEER_CLUSTER_ID_MAX bytes */
	baton_node_id node_id;
	struct baton_profile profile;
	const char *peer_addr; /* where it listens: at most ..._ADDR_MAX */
	/* Peer authentication: the sender holds the peer secret and this is
	 * its nonce for the connection (absent from releases before it, and
	 * from a node without a secret: has_auth false). */
	bool has_auth;
	uint8_t auth_nonce[BATON_PEER_AUTH_NONCE_LEN];
	/* The UUID the sender's cluster was born with, once it knows it
	 * (absent from releases before cluster identity). */
	bool has_cluster_uuid;
	uint8_t cluster_uuid[BATON_PEER_CLUSTER_UUID_LEN];
};

/* What a node knows of its cluster's versions, appended to the frozen
 * handshake reply so that any release, even one that cannot talk to the
 * cluster, can read it before asking to join (DESIGN.md, "Join"). */
struct baton_peer_cluster_view {
	baton_node_id leader_id;      /* 0: no leader known */
	const char *leader_peer_addr; /* at most ..._ADDR_MAX; NULL as "" */
	/* The effective machine version, the release floor, the version
	 * table rows (id + profile) and the downgrade in progress, if any,
	 * as the sender's log holds them: must be valid
	 * (baton_version_state_valid()). */
	struct baton_version_state versions;
	/* The cluster's release when it refuses mixed releases (strict
	 * mode), else 0.0.0. */
	struct baton_release strict_release;
	/* The last index of the sender's log (0: empty, or a release before
	 * cluster identity): a founder reads it before founding. */
	baton_index last_index;
};

/* The answer of the node that accepted the connection; also what a
 * dialling node sends back when it refuses the version chosen for it. */
struct baton_peer_handshake_reply {
	bool accepted;
	struct baton_proto_version proto; /* chosen; zero when refused */
	const char *reason;		  /* why refused ("" when accepted) */
	struct baton_peer_handshake self; /* the sender's own identity */
	/* The sender's view of its cluster, when has_cluster (releases before
	 * 1.2.0 never send one: has_cluster is then false once decoded). */
	bool has_cluster;
	struct baton_peer_cluster_view cluster;
	/* The acceptor's proof that it holds the peer secret, over both
	 * nonces (self.auth_nonce is its own), when has_auth_mac. */
	bool has_auth_mac;
	uint8_t auth_mac[BATON_PEER_AUTH_MAC_LEN];
	/* With accepted false: the other end's id was removed from the
	 * cluster, and it must stop serving. */
	bool removed;
};

/* The dialler's proof that it holds the peer secret: its third frame. */
struct baton_peer_handshake_auth {
	uint8_t mac[BATON_PEER_AUTH_MAC_LEN];
};

/* A node that is not yet a member asks the leader to add it. Strings are
 * at most BATON_PEER_ADDR_MAX bytes; NULL encodes as "". */
struct baton_peer_join {
	baton_node_id node_id; /* never 0 */
	const char *peer_addr;
	const char *client_addr;
	struct baton_profile profile;
};

/* The leader's answer to a join (or a member's that is not the leader,
 * refusing and naming the leader it knows). */
struct baton_peer_join_reply {
	bool accepted;
	const char *reason; /* at most ..._REASON_MAX; "" when accepted */
	baton_node_id leader_id;
	const char *leader_peer_addr;
	const char *leader_client_addr;
	struct baton_profile leader;
};

/* One command of a forwarded write: the command name and its arguments. */
struct baton_peer_command {
	int argc; /* 1 ..BATON_PEER_FORWARD_ARGS_MAX */
	/* argv[i] has lens[i] bytes (argv[i] may be NULL when lens[i] is 0
	 * on encode; never NULL once decoded). */
	const uint8_t *const *argv;
	const size_t *lens;
};

/* A key a forwarded transaction watches (WATCH), with the hash of what the
 * key held when the client watched it (the state machine defines the hash;
 * the codec only carries it). */
struct baton_peer_watch {
	const uint8_t *key; /* key_len bytes; never NULL once decoded */
	size_t key_len;
	uint64_t hash;
};

/* A client write a follower sends to the leader: one command, or (protocol
 * 2 and later) a transaction, MULTI ... EXEC with its watches, that the
 * leader runs as one unit. */
struct baton_peer_forward {
	uint64_t request_id; /* chosen by the follower, echoed in the reply */
	/* A transaction replies with an array (or a null array when a watch
	 * fails), a single command with its own reply. A single command has
	 * n_commands == 1 and no watches; a transaction has 0 ..
	 * BATON_PEER_FORWARD_COMMANDS_MAX commands and 0 ..
	 * BATON_PEER_FORWARD_WATCHES_MAX watches. */
	bool transaction;
	uint32_t n_commands;
	const struct baton_peer_command *commands;
	uint32_t n_watches;
	const struct baton_peer_watch *watches;
	/* With --password: SHA-256 of the password the client authenticated
	 * with on the forwarding node (has_client_auth false: none sent, as
	 * from a node without a password or a release before it). */
	bool has_client_auth;
	uint8_t client_auth[BATON_PEER_CLIENT_AUTH_LEN];
};

/* The leader's answer to a forwarded write: either the raw RESP reply the
 * command produced (error == NULL) or why it could not run it. */
struct baton_peer_forward_reply {
	uint64_t request_id;
	const uint8_t *resp_reply;
	size_t resp_len;
	const char *error; /* at most BATON_PEER_ERROR_MAX bytes, or NULL */
};

enum baton_peer_kind {
	BATON_PEER_UNKNOWN = 0, /* from a newer peer: count it and skip it */
	BATON_PEER_HANDSHAKE = 1,
	BATON_PEER_HANDSHAKE_REPLY = 2,
	BATON_PEER_RAFT = 3,
	BATON_PEER_FORWARD = 4,
	BATON_PEER_FORWARD_REPLY = 5,
	BATON_PEER_JOIN = 6,
	BATON_PEER_JOIN_REPLY = 7,
	BATON_PEER_HANDSHAKE_AUTH = 8,
};

/* A decoded frame, or one to encode. All pointers in a decoded one
 * (strings, entries and their data, the snapshot chunk, argv) point into
 * memory the frame owns. */
struct baton_peer_frame {
	uint32_t kind; /* enum baton_peer_kind: says which member is set */
	union {
		struct baton_peer_handshake handshake;
		struct baton_peer_handshake_reply handshake_reply;
		struct baton_msg raft; /* writable: a driver sets `from` */
		struct baton_peer_forward forward;
		struct baton_peer_forward_reply forward_reply;
		struct baton_peer_join join;
		struct baton_peer_join_reply join_reply;
		struct baton_peer_handshake_auth handshake_auth;
		struct {
			/* The envelope's body field number, and for a Raft
			 * message of a type this release does not know, that
			 * type (else 0): for logs. */
			uint32_t body;
			uint32_t raft_type;
		} unknown;
	};
	/* On a decode error: a static text saying what was wrong. */
	const char *why;
	/* Private: what the frame owns. */
	void *owned_arena; /* the unpacked envelope's chunks */
	void *owned_arrays;
};

/* ---- encoding ---------------------------------------------------------------
 * Each appends one whole frame to `out` and returns 0, or an error with
 * `out` unchanged. The input is only read; nothing of it is kept. */

/* The frozen handshake frames: no version. BATON_ETOOBIG for a string
 * above its limit; BATON_EINVAL for an accepted reply without a version,
 * or a cluster view (has_cluster) whose version state is not valid. */
int baton_peer_encode_handshake(const struct baton_peer_handshake *h,
				struct baton_buf *out);
int baton_peer_encode_handshake_reply(
	const struct baton_peer_handshake_reply *r, struct baton_buf *out);
/* The dialler's proof of the peer secret, frozen like the two above. */
int baton_peer_encode_handshake_auth(const struct baton_peer_handshake_auth *a,
				     struct baton_buf *out);

/* One Raft message of any type, in protocol version v. `from` is carried
 * in protocols 1 and 2 (a receiver should trust the connection's identity
 * over it) and not in 3; Append's leader profile likewise. BATON_EVERSION
 * for a version this codec does not implement, BATON_EINVAL for an unknown
 * type or a message that breaks the rules the decoder checks (see
 * baton_peer_decode()), BATON_ETOOBIG above a limit. */
int baton_peer_encode_raft(struct baton_proto_version v,
			   const struct baton_msg *m, struct baton_buf *out);

/* A forwarded write and its reply, in protocol version v. BATON_EVERSION
 * as above, and for a transaction in protocol 1 (which carries a single
 * command only); BATON_EINVAL for a command with argc < 1 or a missing
 * argument or key, or a single command (transaction false) that is not
 * exactly one command without watches; BATON_ETOOBIG above a limit. */
int baton_peer_encode_forward(struct baton_proto_version v,
			      const struct baton_peer_forward *f,
			      struct baton_buf *out);
int baton_peer_encode_forward_reply(struct baton_proto_version v,
				    const struct baton_peer_forward_reply *r,
				    struct baton_buf *out);

/* A join request and its reply, the same in every protocol version v
 * (BATON_EVERSION for one this codec does not implement). BATON_EINVAL for
 * a join from node id 0, BATON_ETOOBIG for a string above its limit. */
int baton_peer_encode_join(struct baton_proto_version v,
			   const struct baton_peer_join *j,
			   struct baton_buf *out);
int baton_peer_encode_join_reply(struct baton_proto_version v,
				 const struct baton_peer_join_reply *r,
				 struct baton_buf *out);

/* Any frame that travels after the handshake (kind RAFT, FORWARD,
 * FORWARD_REPLY, JOIN or JOIN_REPLY), in version v: one of the above.
 * BATON_EINVAL for any other kind. */
int baton_peer_encode_frame(struct baton_proto_version v,
			    const struct baton_peer_frame *f,
			    struct baton_buf *out);

/* Give the frame that starts at out->data + start (one whole frame, as the
 * encoders append it) the envelope of version v: for a checksummed version
 * (baton_peer_proto_checksummed()), append its checksum; otherwise leave
 * it as it is. For the frozen handshake frames the transport sends after
 * it took a connection as ready (a late refusal). 0, or BATON_ENOMEM with
 * `out` unchanged. */
int baton_peer_seal(struct baton_proto_version v, struct baton_buf *out,
		    size_t start);

/* ---- decoding ------------------------------------------------------------ */

/* Find a frame in the bytes received so far on a connection (data, len).
 * Returns 1 when a whole frame is there: its envelope is the *body_len
 * bytes at data + BATON_PEER_PREFIX_LEN, and the next frame starts at
 * data + BATON_PEER_PREFIX_LEN + *body_len. Returns 0 when more bytes are
 * needed, and BATON_ETOOBIG when the prefix announces more than
 * BATON_PEER_FRAME_MAX: the stream cannot be trusted, close it. */
int baton_peer_split(const uint8_t *data, size_t len, size_t *body_len);

/* The same on a connection whose frames are in version v's envelope (v 0:
 * the handshake's, as baton_peer_split()). For a checksummed version the
 * frame is the prefix, the envelope and BATON_PEER_CHECKSUM_LEN bytes of
 * checksum, and it is checked before it is returned: BATON_ECORRUPT when
 * the checksum differs from that of the prefix and envelope received (the
 * stream was damaged, or the peer speaks another envelope: close it).
 * Returns 1 with *body_len (the envelope's bytes, at data +
 * BATON_PEER_PREFIX_LEN) and *frame_len (the bytes up to the next frame),
 * 0 when more bytes are needed, BATON_ETOOBIG as baton_peer_split(). */
int baton_peer_split_framed(struct baton_proto_version v, const uint8_t *data,
			    size_t len, size_t *body_len, size_t *frame_len);

/* Decode one envelope (body, len), the bytes after a frame's prefix, that
 * travelled on a connection which negotiated protocol version v. Fills
 * *out and returns 0; the frame must then be released with
 * baton_peer_frame_free(), whatever its kind. On error nothing is held (no
 * free needed, though it is harmless) and out->why says what was wrong:
 *   BATON_EVERSION  v is a version this codec does not implement;
 *   BATON_ETOOBIG   len > BATON_PEER_FRAME_MAX, an element above a limit,
 *                   or more memory needed than BATON_PEER_DECODE_SLACK;
 *   BATON_ECORRUPT  not a valid envelope, or a field breaks a rule the core
 *                   relies on: Raft type 0 or type and body disagree,
 *                   entries not consecutive after prev_index, more than
 *                   BATON_MAX_MEMBERS members, a member id of 0 or
 *                   repeated, an unknown role, a chunk outside total_len,
 *                   a snapshot's version state that is not valid
 *                   (baton_version_state_valid(); a downgrade breaking
 *                   one of its rules is named in why), a release part above
 *                   65535, a positive read status, a forwarded command
 *                   without arguments, a single forward that is not
 *                   exactly one command without watches (or, in 2, uses
 *                   both forms), a reply without a result, an accepted
 *                   handshake reply without a version, a cluster view
 *                   without a valid version state, a join from node 0;
 *   BATON_ENOMEM.
 * Unknown fields are skipped, and so are the fields version v does not
 * have (3 ignores Raft.from, Append.leader and Forward.argv; 1 ignores
 * what 2 added to Forward); an unknown body or Raft type gives kind
 * BATON_PEER_UNKNOWN and 0. A snapshot whose metadata has no version state
 * (from a release before it) reads as baton_version_state_initial() with
 * versions_index 0; a version state without a downgrade (none in
 * progress, or from a release before downgrades) reads with an all-zero
 * one. The frozen handshake frames decode the same at every version. */
int baton_peer_decode(struct baton_proto_version v, const uint8_t *body,
		      size_t len, struct baton_peer_frame *out);

/* Decode a frame of a connection whose handshake is not complete, before
 * any version exists: a Handshake, a HandshakeReply or a HandshakeAuth
 * (frozen, so any release reads them). As baton_peer_decode(), except that
 * any other body is BATON_ECORRUPT. An authentication nonce or MAC (or a
 * Forward's client proof, in baton_peer_decode()) that is present but not
 * exactly its length is BATON_ECORRUPT. */
int baton_peer_decode_handshake(const uint8_t *body, size_t len,
				struct baton_peer_frame *out);

/* Release what a decoded frame holds and zero it. NULL or a zeroed frame is
 * a no-op. */
void baton_peer_frame_free(struct baton_peer_frame *f);

#endif /* BATON_WIRE_PEER_H */
