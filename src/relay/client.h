/*
 * The node-side relay client: what a batond node embeds to talk to
 * baton-relay over the frozen relay protocol (docs/relay-protocol.md,
 * docs/relay-server.md "The node-side client"). It runs on the caller's
 * libuv loop, on that loop's thread only.
 *
 * It connects, registers (HELLO, WELCOME), installs the numbered global
 * views, follows ACTIVATE and DEACTIVATE, and carries opaque messages:
 * every message the application queues is kept until its destination(s)
 * acknowledged it end to end, and sent again after a reconnect or a relay
 * restart, so that each stream delivers every message exactly once and in
 * order. A lost connection, a refusal, an ERROR or a malformed frame from
 * the relay is logged (src/io/log.h) and followed by a reconnect with
 * exponential back-off, forever, until relay_client_close().
 *
 * Writing to a connection the relay closed raises SIGPIPE: the process
 * must ignore it (batond does, src/server/main.c).
 *
 * Callbacks run from the loop; they may call relay_client_send(),
 * relay_client_status() and relay_client_close() (after close, no more
 * callbacks come).
 */
#ifndef BATON_RELAY_CLIENT_H
#define BATON_RELAY_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "baton/types.h"
#include "baton/version.h"
#include "transport.h"

/* The bound of the outgoing queue (messages kept until acknowledged,
 * over every stream): payload bytes and messages. */
#define RELAY_CLIENT_QUEUE_BYTES_MAX (64u << 20)
#define RELAY_CLIENT_QUEUE_MSGS_MAX 65536u
/* Defaults of the config's 0 fields. */
#define RELAY_CLIENT_RECONNECT_MIN_MS 100u
#define RELAY_CLIENT_RECONNECT_MAX_MS 2000u
#define RELAY_CLIENT_PING_INTERVAL_MS 5000u
#define RELAY_CLIENT_IDLE_TIMEOUT_MS 30000u
/* A TCP connect that takes longer is abandoned (and retried). */
#define RELAY_CLIENT_CONNECT_TIMEOUT_MS 5000u
/* Streams received from (source incarnation, kind) remembered at once;
 * past it, those whose source left the view are forgotten first. */
#define RELAY_CLIENT_IN_STREAMS_MAX 4096u

struct relay_client;

struct relay_client_config {
	/* "HOST:PORT" of baton-relay: an IPv4 number, an IPv6 number in
	 * brackets or a host name (src/util/address.h), resolved at every
	 * connection. */
	const char *relay_addr;
	const char *cluster_id;	      /* 1..255 bytes, no control byte */
	baton_node_id node_id;	      /* not 0 */
	uint64_t incarnation;	      /* not 0; a new one per process start */
	struct baton_release release; /* not 0.0.0 */
	/* Where others reach this node's clients, "127.0.0.1:7001". */
	const char *address;
	/* Reconnect back-off, doubling from min to max; 0: the defaults. */
	uint32_t reconnect_min_ms, reconnect_max_ms;
	/* PING after this long without sending; ERROR TIMEOUT and reconnect
	 * after this long without receiving; 0: the defaults (5 s, 30 s). */
	uint32_t ping_interval_ms, idle_timeout_ms;
	/* The cluster's relay secret (relay_auth.h, relay_secret_load): every
	 * HELLO then carries a proof of it (docs/relay-protocol.md
	 * HELLO_PROOF). NULL: HELLO carries no proof. Only its key is kept
	 * (relay_client_start copies it). */
	const struct baton_peer_secret *secret;
};

/* A node of the global view. Strings are valid only during the callback. */
struct relay_view_node {
	const char *cluster_id;
	baton_node_id node_id;
	uint64_t incarnation;
	struct baton_release release;
	const char *address;
	bool connected;
};

struct relay_client_callbacks {
	void *arg;
	/* A new view was installed (number strictly above the last, except
	 * after a relay that lost its data directory: logged). nodes sorted
	 * by (cluster id, node id), this node included. */
	void (*on_view)(void *arg, uint64_t number,
			const struct relay_view_node *nodes, size_t n);
	/* ACTIVATE (true) / DEACTIVATE (false), and false when the connection
	 * is lost while active. */
	void (*on_active)(void *arg, bool active);
	/* A DATA payload delivered in order, exactly once per stream (one
	 * stream: one source incarnation, unicast or multicast). payload is
	 * valid only during the call. */
	void (*on_data)(void *arg, const char *from_cluster,
			baton_node_id from_node, uint64_t from_incarnation,
			bool multicast, const uint8_t *payload, size_t len);
};

/* Start a client on loop: it connects at once. cfg's strings and cb are
 * copied. Returns 0 with *out set, BATON_EINVAL for a config the protocol
 * cannot carry (logged, naming the field), BATON_ENOMEM. */
int relay_client_start(uv_loop_t *loop, const struct relay_client_config *cfg,
		       const struct relay_client_callbacks *cb,
		       struct relay_client **out);

/* Queue a message (payload copied): to one node (to_node != 0, of
 * to_cluster, the incarnation the current view shows) or multicast to
 * every other node of to_cluster (to_node == 0). Kept until acknowledged
 * end to end, resent after a reconnect (docs/relay-protocol.md
 * "Streams"); dropped, and counted in status.dropped, if its destination
 * leaves the view first. Returns 0; BATON_EINVAL: payload above 8 MiB, a
 * cluster id the protocol cannot carry, a node not in the view, this node
 * itself; BATON_ESTATE: not active (not connected, not registered, or
 * not activated by the relay); BATON_ENOMEM; BATON_EBUSY: the outgoing
 * queue holds RELAY_CLIENT_QUEUE_MSGS_MAX messages or would exceed
 * RELAY_CLIENT_QUEUE_BYTES_MAX bytes (retry once acknowledgements drain
 * it). */
int relay_client_send(struct relay_client *c, const char *to_cluster,
		      baton_node_id to_node, const uint8_t *payload,
		      size_t len);

/* Tell the relay this node's migration state (docs/relay-protocol.md
 * NODE_STATE: BATON_RELAY_NODE_STATE_AUTHORITY once its cluster holds
 * write authority), now if registered and again after every registration:
 * the relay deactivates by itself once the old cluster is gone. A relay
 * that predates it ignores it. */
void relay_client_set_state(struct relay_client *c, uint8_t flags);

struct relay_client_status {
	bool connected;	 /* TCP connected to the relay */
	bool registered; /* WELCOME code 0 on this connection */
	bool active;	 /* ACTIVATE received, no DEACTIVATE since */
	uint64_t view;	 /* the last view number installed; 0: none */
	uint64_t relay_incarnation; /* of the last WELCOME; 0: none */
	uint64_t sent;		    /* DATA frames sent the first time */
	uint64_t received;	    /* payloads delivered to on_data */
	uint64_t resent;	    /* DATA frames sent again */
	uint64_t acked;		    /* messages acknowledged and freed */
	uint64_t dropped; /* messages freed unacknowledged: destination left */
	uint64_t duplicates, gaps; /* DATA received and not delivered */
	uint64_t queued_msgs, queued_bytes; /* kept, not yet acknowledged */
	uint64_t reconnects;  /* connection attempts after the first */
	char last_error[256]; /* the last refusal, ERROR or loss; "" none */
};

void relay_client_status(const struct relay_client *c,
			 struct relay_client_status *out);

/* Send LEAVE if registered, close the connection and the timers, then
 * call done(arg) (may be NULL) once every handle is closed; c is freed
 * before done is called. No callback of cb runs after this call. */
void relay_client_close(struct relay_client *c, void (*done)(void *arg),
			void *arg);

#endif /* BATON_RELAY_CLIENT_H */
