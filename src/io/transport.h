/*
 * The peer transport: TCP connections between nodes, on libuv.
 *
 * Every node dials each peer whose address it knows and accepts the peers'
 * connections too; a connection opens with a handshake (cluster id, node
 * id, release, protocol range, machine_max) that picks the highest common
 * protocol version or refuses with a reason, logged on both sides. The
 * dialling node checks the version chosen for it is within its own range,
 * and refuses the connection (again logged on both sides) if not. After
 * it, frames flow both ways on either connection; a message to a peer goes
 * out on whichever of the two is up. Lost connections are redialled with
 * jittered exponential back-off. Send queues are bounded: beyond the limit
 * a frame is dropped and counted (Raft retransmits what matters). The
 * frames sent to one peer during one turn of the loop (Appends, their
 * acknowledgements, forwarded writes and their replies) are written in one
 * system call at its end; the bytes on the wire are the same frames.
 *
 * The transport does the peer codec itself (src/wire/peer.h): it encodes
 * what it is given in the protocol version negotiated on the connection the
 * frame goes out on, and decodes what arrives in the version of the
 * connection it came in on, so a caller cannot speak the wrong version. It
 * keeps what each peer said of itself in its last handshake (release,
 * protocol range, machine_max) for status.
 *
 * The handshake reply also carries the acceptor's cluster view (leader,
 * effective machine version, floor, version table: see cluster_view
 * below), which a node that wants to join reads with a probe. With
 * strict_release, a peer of another release is refused like one with no
 * common protocol.
 *
 * Peer authentication. With a peer secret (struct baton_peer_secret, read
 * from a file), the handshake is a mutual challenge-response: each side
 * sends a random nonce and proves it holds the secret with an
 * HMAC-SHA-256 over both nonces, both node ids, the cluster id and its
 * role; a peer without the secret, or with another, is refused and both
 * logs say "peer authentication failed: ...". An accepted connection is
 * ready only once the dialler's proof (a third frame, HandshakeAuth) has
 * been checked: nothing from it reaches the node before. Before a
 * connection's handshake completes it may send only frames of at most
 * BATON_PEER_HANDSHAKE_FRAME_MAX bytes, and at most
 * BATON_TRANSPORT_HANDSHAKING_MAX accepted connections may be in their
 * handshake at once (the oldest is closed for a new one). No TLS: the
 * frames after the handshake are neither encrypted nor authenticated
 * (docs/peer-protocol.md says what that leaves open).
 */
#ifndef BATON_IO_TRANSPORT_H
#define BATON_IO_TRANSPORT_H

#include <uv.h>

#include "baton/raft.h"
#include "peer.h"

/* Bytes queued on one connection before new frames are dropped. */
#define BATON_TRANSPORT_QUEUE_MAX (64u << 20)
/* Frames queued on one connection in one turn of the loop go out in one
 * write at its end; past this many bytes they go at once. */
#define BATON_TRANSPORT_COALESCE_MAX (256u << 10)
/* Redial back-off bounds. */
#define BATON_TRANSPORT_BACKOFF_MIN_MS 50u
#define BATON_TRANSPORT_BACKOFF_MAX_MS 2000u
#define BATON_ADDR_MAX 256u
/* Accepted connections in their handshake at once; a new one closes the
 * oldest (each holds at most a BATON_PEER_HANDSHAKE_FRAME_MAX frame). */
#define BATON_TRANSPORT_HANDSHAKING_MAX 64u

/* ---- the peer secret --------------------------------------------------- */

/* Bytes of a peer secret: all the bytes of its file, a trailing newline
 * included (so every node must hold a copy of the same file). */
#define BATON_PEER_SECRET_MIN 16u
#define BATON_PEER_SECRET_MAX 4096u

struct baton_peer_secret {
	size_t len; /* BATON_PEER_SECRET_MIN .. BATON_PEER_SECRET_MAX */
	uint8_t bytes[BATON_PEER_SECRET_MAX];
};

/* Read the peer secret from the file at path. Refuses, with a message in
 * err naming the file, what was found and what to do: a file that is not
 * a regular file, one group or others may read or write (mode & 077:
 * BATON_EINVAL), an empty one or one under BATON_PEER_SECRET_MIN bytes
 * (BATON_EINVAL), one over BATON_PEER_SECRET_MAX (BATON_ETOOBIG); a file
 * that cannot be opened or read is BATON_EIO. *out is wiped on error. */
int baton_peer_secret_load(const char *path, struct baton_peer_secret *out,
			   char *err, size_t cap);
/* Overwrite a secret's bytes (not optimised away). */
/* The same for another secret (what: "migration secret"), named so in
 * the messages. */
int baton_secret_file_load(const char *path, const char *what,
			   struct baton_peer_secret *out, char *err,
			   size_t cap);
void baton_peer_secret_wipe(struct baton_peer_secret *s);

/* The proof a forwarded write carries that its client authenticated with
 * `password` (docs/peer-protocol.md, "Forwarded writes"): SHA-256 of a
 * fixed label and the password. */
void baton_client_auth_proof(const char *password,
			     uint8_t out[BATON_PEER_CLIENT_AUTH_LEN]);
/* a and b equal, in a time that does not depend on where they differ. */
bool baton_equal_secret(const uint8_t *a, const uint8_t *b, size_t len);

struct baton_transport;

/* A frame that arrived after the handshake, decoded in the connection's
 * protocol version: kind BATON_PEER_RAFT (with raft.from set to `from`,
 * the identity the handshake established), BATON_PEER_FORWARD,
 * BATON_PEER_FORWARD_REPLY, BATON_PEER_JOIN or BATON_PEER_JOIN_REPLY.
 * Frames of other kinds never reach the callback (they are counted in
 * stats.unknown). `f` and what it points to are valid during the call
 * only. A join comes from a node no configuration knows yet: the reply
 * goes back with baton_transport_send_frame() to `from`, on the
 * connection the joiner opened. */
typedef void (*baton_transport_frame_cb)(void *data, baton_node_id from,
					 const struct baton_peer_frame *f);

/* Fill *out (zeroed by the caller) with this node's view of its cluster,
 * sent in every handshake reply to a node of this cluster, refusals
 * included, so that a node that cannot talk to the cluster can still read
 * its versions (DESIGN.md, "Join"). Return false when there is no view to
 * give (e.g. before the log is loaded). out->versions must be valid
 * (baton_version_state_valid()); out->leader_peer_addr must stay valid
 * until the callback's caller returns (the transport encodes the reply
 * right away). The transport sets out->strict_release itself. */
typedef bool (*baton_transport_view_cb)(void *data,
					struct baton_peer_cluster_view *out);

struct baton_transport_config {
	uv_loop_t *loop;
	const char *cluster_id;
	baton_node_id id;
	struct baton_profile profile;
	const char *listen_addr; /* host:port */
	baton_transport_frame_cb on_frame;
	/* NULL: handshake replies carry no cluster view. */
	baton_transport_view_cb cluster_view;
	void *data; /* given to on_frame and cluster_view */
	/* Refuse a peer whose release differs from profile.release (both
	 * sides log a reason naming both releases), and advertise it in the
	 * cluster view. */
	bool strict_release;
	/* The cluster's peer secret: every peer must prove it holds the same
	 * (the transport keeps its own copy). NULL: no authentication, and a
	 * peer that offers it is refused. */
	const struct baton_peer_secret *secret;
	/* Cluster identity (docs/batond.md, "Identity"): whether node id was
	 * removed from the cluster (it is refused, and the refusal tells it
	 * so); NULL: nobody is. */
	bool (*is_removed)(void *data, baton_node_id id);
	/* A member told us, refusing a connection, that this node was
	 * removed from the cluster (`reason` is its text). NULL: ignored. */
	void (*removed)(void *data, baton_node_id by, const char *reason);
	/* The last ready connection to peer `id` closed: nothing sent to it
	 * gets through, nor its answers, until one is up again. NULL:
	 * ignored. */
	void (*peer_down)(void *data, baton_node_id id);
};

/* The UUID this node's cluster was born with, once known: sent in every
 * handshake; a peer that knows another one is refused (both logs say
 * which two). */
void baton_transport_set_cluster_uuid(
	struct baton_transport *t,
	const uint8_t uuid[BATON_PEER_CLUSTER_UUID_LEN]);

/* Peers the transport keeps track of (known addresses and accepted ones). */
#define BATON_TRANSPORT_PEERS_MAX 64u

/* What the transport knows of one peer. */
struct baton_transport_peer {
	baton_node_id id;
	/* A handshake with it completed at least once: `profile` holds what
	 * it said of itself in the latest one (zeros before). */
	bool known;
	struct baton_profile profile;
	/* A connection is up; `proto` is the version negotiated on the one
	 * messages go out on (0 when none is up). */
	bool connected;
	struct baton_proto_version proto;
};

struct baton_transport_stats {
	uint64_t frames_in, frames_out;
	uint64_t bytes_in, bytes_out; /* of those frames (metrics) */
	uint64_t dropped;     /* queue full, no connection, or not encodable */
	uint64_t refused;     /* handshakes refused, either side */
	uint64_t unknown;     /* frames of a kind this release ignores */
	uint64_t malformed;   /* connections closed on a bad frame */
	uint64_t bad_frames;  /* frames after the handshake that did not
				 decode: logged and skipped */
	uint64_t auth_failed; /* handshakes refused for authentication */
	uint64_t bad_checksums;	      /* connections closed on a frame whose
					 checksum differs (protocol 4 and later;
					 also counted in malformed) */
	uint64_t handshaking_evicted; /* closed for a newer one in its
					 handshake (the cap) */
	uint32_t connected_peers;
	/* Every peer with a slot, by slot order. */
	uint32_t n_peers;
	struct baton_transport_peer peers[BATON_TRANSPORT_PEERS_MAX];
};

/* Listen and get ready. BATON_EINVAL for a bad address; errors of bind go
 * to the log and come back as BATON_EIO. */
int baton_transport_start(const struct baton_transport_config *c,
			  struct baton_transport **out);
/* Close every connection; `t` is freed once libuv has closed them. */
void baton_transport_stop(struct baton_transport *t);

/* Learn or change a peer's address; the transport dials it. */
int baton_transport_set_peer(struct baton_transport *t, baton_node_id id,
			     const char *addr);
/* Forget a removed member: close its connections, stop dialling. */
void baton_transport_forget_peer(struct baton_transport *t, baton_node_id id);

/* Send one Raft message to m->to, encoded in the protocol version of the
 * connection it goes out on. Returns 0 once queued (copied), or:
 *   BATON_ENOTFOUND    no connection to m->to has completed its handshake;
 *   BATON_EOVERLOADED  its send queue is full;
 *   BATON_EINVAL, BATON_ETOOBIG  the codec refused the message (logged);
 *   BATON_ENOMEM.
 * In every error case the message is dropped and counted (stats.dropped):
 * nothing is deferred until a handshake completes, because Raft tolerates
 * loss and the core sends again what still matters (heartbeats, appends
 * and votes on its timers), while a deferred message would arrive stale. */
int baton_transport_send_raft(struct baton_transport *t,
			      const struct baton_msg *m);

/* Send a frame of kind BATON_PEER_RAFT, BATON_PEER_FORWARD,
 * BATON_PEER_FORWARD_REPLY, BATON_PEER_JOIN or BATON_PEER_JOIN_REPLY to
 * peer `to`, the same way (other kinds: BATON_EINVAL). `to` may be a node
 * that only dialled us (a joiner): the frame goes out on its connection. */
int baton_transport_send_frame(struct baton_transport *t, baton_node_id to,
			       const struct baton_peer_frame *f);

/* The answer to a probe: rv 0 and the handshake reply of the node at
 * `addr` (its identity in reply->self, its cluster view when
 * reply->has_cluster, whether it accepted us and why not), or rv
 * BATON_EIO (could not connect, closed, or no answer within the handshake
 * timeout) or BATON_ECORRUPT (not a handshake reply) with `why`, reply
 * NULL. Called exactly once per probe, except when the transport stops
 * first. Pointers are valid during the call only. */
typedef void (*baton_transport_probe_cb)(
	void *data, const char *addr, int rv, const char *why,
	const struct baton_peer_handshake_reply *reply);

/* Dial `addr` (host:port) once, introduce ourselves with the usual
 * Handshake, and hand its reply to cb, then close: how a node that is not
 * a member reads a cluster's versions from the frozen handshake (of any
 * release) before it asks to join; meant for a node that is not a member
 * (the other end takes the probe for a connection from our id, replacing
 * one it had). Returns 0, and cb will be called (perhaps before this
 * returns, when the dial fails at once), or BATON_EINVAL (bad address,
 * or stopping), BATON_ENOMEM. */
int baton_transport_probe(struct baton_transport *t, const char *addr,
			  baton_transport_probe_cb cb, void *data);

/* The protocol version negotiated with a connected peer (0 if none). */
struct baton_proto_version baton_transport_peer_proto(struct baton_transport *t,
						      baton_node_id id);

/* What the transport knows of peer id into *out: 0, or BATON_ENOTFOUND if
 * it has no slot for it. */
int baton_transport_peer(struct baton_transport *t, baton_node_id id,
			 struct baton_transport_peer *out);

/* Counters and every peer's profile (see struct baton_transport_stats). */
void baton_transport_stats(struct baton_transport *t,
			   struct baton_transport_stats *out);

/* Check an address "HOST:PORT" (an IPv4 number, an IPv6 number in
 * brackets or a host name: src/util/address.h) and its length: 0, or
 * BATON_EINVAL with a sentence in why (may be NULL). Names are resolved
 * where the address is used, not here. */
int baton_parse_addr(const char *addr, char *why, size_t why_cap);

#endif /* BATON_IO_TRANSPORT_H */
