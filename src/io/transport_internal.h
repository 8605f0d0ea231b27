/*
 * Shared by the files of the peer transport: transport.c (connections,
 * framing, sending and receiving) and transport_handshake.c (the first
 * frames of a connection: identities, the protocol version, refusals).
 * Not part of its interface, which is transport.h.
 */
#ifndef BATON_IO_TRANSPORT_INTERNAL_H
#define BATON_IO_TRANSPORT_INTERNAL_H

#include "baton/buf.h"
#include "peer.h"
#include "transport.h"

#define MAX_PEERS BATON_TRANSPORT_PEERS_MAX

struct conn;

struct peer {
	baton_node_id id; /* 0: free slot */
	char addr[BATON_ADDR_MAX];
	struct conn *out; /* dialled by us */
	struct conn *in;  /* accepted, after its handshake */
	uv_timer_t redial;
	bool redial_init;
	uint32_t backoff_ms;
	bool dialling;
	uint64_t unresolved_logged_ms; /* rate of the warning */
	/* Its accepted connections replaced by newer ones since
	 * replaced_since_ms (transport_handshake.c's admit). */
	uint32_t replaced_n;
	uint64_t replaced_since_ms;
	/* What it said of itself in its latest completed handshake. */
	bool known;
	struct baton_profile profile;
	struct baton_transport *t;
};

struct conn {
	uv_tcp_t tcp;
	struct baton_addr_connect *connecting; /* resolving or connecting */
	struct baton_transport *t;
	struct peer *peer; /* NULL for an inbound one before its handshake */
	bool outbound;
	bool ready; /* handshake done */
	bool closing;
	/* Negotiated in the handshake: every frame after it is encoded and
	 * decoded in this version. Zero until ready. */
	struct baton_proto_version proto;
	/* What the other end said of itself in the handshake. */
	struct baton_profile profile;
	/* Peer authentication: our nonce on this connection, the other
	 * end's, and (accepted, authenticating) the id it claimed and the
	 * version chosen, until its proof arrives. */
	uint8_t nonce[BATON_PEER_AUTH_NONCE_LEN];
	uint8_t their_nonce[BATON_PEER_AUTH_NONCE_LEN];
	bool authenticating;
	baton_node_id claimed_id;
	struct baton_proto_version pending_proto;
	/* The refusal being sent tells the other end it was removed from
	 * the cluster (HandshakeReply.removed). */
	bool refusing_removed;
	struct baton_buf in;
	/* Frames queued during this turn of the loop, written in one go at
	 * its end (or once past BATON_TRANSPORT_COALESCE_MAX), and a buffer
	 * a finished write left to take their place. */
	struct baton_buf pending;
	struct baton_buf spare;
	size_t queued; /* pending and being written */
	uint64_t opened_ms;
	struct conn *all_prev, *all_next; /* every open connection */
	/* A probe (baton_transport_probe): no peer, answered once. */
	baton_transport_probe_cb probe_cb;
	void *probe_data;
	char probe_addr[BATON_ADDR_MAX];
};

struct baton_transport {
	struct baton_transport_config c;
	char cluster_id[128];
	uv_tcp_t listener;
	struct peer peers[MAX_PEERS];
	struct baton_transport_stats stats;
	bool has_secret;
	struct baton_peer_secret secret; /* a copy of c.secret's */
	/* The UUID this node's cluster was born with, once known. */
	bool has_uuid;
	uint8_t uuid[BATON_PEER_CLUSTER_UUID_LEN];
	uint64_t evicted_logged_ms; /* rate of the cap's warning */
	uint64_t rng;
	bool stopping;
	uint32_t open_handles;
	struct conn *all;
	uv_timer_t sweep;
	/* Some connection holds pending frames: written before the loop
	 * polls (what timers queued) and after it (what reads queued). */
	bool flush_due;
	uv_prepare_t flush_before_poll;
	uv_check_t flush_after_poll;
};

/* The peer slot of node id (id 0: a free slot), or NULL. */
struct peer *baton__transport_peer_find(struct baton_transport *t,
					baton_node_id id);
/* Close a connection (once; logged if its handshake was done). */
void baton__transport_close(struct conn *c, const char *why);
/* Write bytes on a connection now, behind its pending frames (the
 * handshake's frames: a refusal is followed by a shutdown): 0,
 * BATON_ENOTFOUND (closing or closed), BATON_EOVERLOADED (queue full),
 * BATON_ENOMEM. */
int baton__transport_write(struct conn *c, const uint8_t *data, size_t len);
/* transport_send.c: start the loop handles that write every connection's
 * pending frames at the end of each turn. */
void baton__transport_flush_start(struct baton_transport *t, uv_loop_t *loop);
/* Write every connection's pending frames now. */
void baton__transport_flush_all(struct baton_transport *t);
/* The connection messages to `to` go out on, or NULL. */
struct conn *baton__transport_ready_conn(struct baton_transport *t,
					 baton_node_id to);

/* A probe's connection ends: answer its callback (once) with rv, why and
 * the reply (NULL unless rv is 0). */
void baton__transport_probe_done(struct conn *c, int rv, const char *why,
				 const struct baton_peer_handshake_reply *r);

/* transport_auth.c: the handshake's cryptography. */
enum baton__auth_role {
	BATON__AUTH_DIALLER = 1,
	BATON__AUTH_ACCEPTOR = 2,
};
/* A random nonce (OpenSSL's RAND_bytes): 0, or BATON_EIO. */
int baton__transport_nonce(uint8_t out[BATON_PEER_AUTH_NONCE_LEN]);
/* The proof of `role` on a connection from node `dialler` to node
 * `acceptor` of cluster_id with those nonces: HMAC-SHA-256 under the
 * secret (docs/peer-protocol.md says what it covers). */
void baton__transport_auth_mac(const struct baton_peer_secret *secret,
			       enum baton__auth_role role,
			       const char *cluster_id, baton_node_id dialler,
			       baton_node_id acceptor,
			       const uint8_t nonce_dialler[],
			       const uint8_t nonce_acceptor[],
			       uint8_t out[BATON_PEER_AUTH_MAC_LEN]);

/* transport_handshake.c: a dialled connection is up, introduce ourselves. */
void baton__transport_hello(struct conn *c);
/* A frame on a connection whose handshake is not done: the Handshake (we
 * accepted the connection) or the HandshakeReply (we dialled). Makes the
 * connection ready, or refuses it (logged on both sides), or closes it. */
void baton__transport_first_frame(struct conn *c, const uint8_t *body,
				  size_t len);
/* On a ready connection, the other end refused it after all (a
 * HandshakeReply with accepted false: the dialler refusing the version we
 * chose, or the acceptor refusing our proof or finding no slot): log its
 * reason and close. */
void baton__transport_refused_late(struct conn *c,
				   const struct baton_peer_handshake_reply *r);

#endif /* BATON_IO_TRANSPORT_INTERNAL_H */
