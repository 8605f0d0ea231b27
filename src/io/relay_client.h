/*
 * The node-side relay client: a batond node's connection to baton-relay
 * (docs/relay-protocol.md, "The session" and "Streams"; docs/relay.md).
 *
 * It registers the node, installs the relay's numbered views, follows
 * ACTIVATE and DEACTIVATE, and carries the application's messages:
 * unicast to one node incarnation or multicast to every other node of one
 * cluster, each stream numbered from 1, every message kept until its
 * destinations acknowledged it and sent again after a reconnect (of
 * either end) or when acknowledgements stall, every message handed to the
 * receiving application once and in order. It reconnects with back-off
 * for ever, until closed. Bad frames from the relay are answered with
 * ERROR and a reconnect; nothing here aborts the node.
 *
 * Runs on the node's libuv loop; not thread-safe.
 */
#ifndef BATON_RELAY_CLIENT_H
#define BATON_RELAY_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "baton/types.h"
#include "baton/version.h"
#include "protocol.h"

/* What one client keeps unacknowledged, over all its streams: beyond
 * either, relay_client_send() says BATON_EBUSY. */
#define RELAY_CLIENT_QUEUE_BYTES_MAX ((size_t)64 << 20)
#define RELAY_CLIENT_QUEUE_MSGS_MAX 65536u
/* Back-off between connection attempts (defaults), and the session's
 * idle rules (the protocol's recommendation). */
#define RELAY_CLIENT_RECONNECT_MIN_MS 100u
#define RELAY_CLIENT_RECONNECT_MAX_MS 2000u
#define RELAY_CLIENT_PING_AFTER_MS 5000u
#define RELAY_CLIENT_IDLE_CLOSE_MS 30000u
/* A multicast stream to a cluster none of whose nodes is in the view
 * keeps at most this many messages. */
#define RELAY_CLIENT_ORPHANS_MAX 1024u
/* A stream whose acknowledgements did not advance for this long is sent
 * again from the oldest unacknowledged message. */
#define RELAY_CLIENT_RESEND_MS 1000u

struct relay_client;

struct relay_client_config {
	const char *relay_addr; /* "ip:port" of baton-relay */
	const char *cluster_id; /* 1..255 bytes */
	baton_node_id node_id;
	uint64_t incarnation; /* not 0; a new one per process start */
	struct baton_release release;
	const char *address; /* where others reach this node's clients */
	uint32_t reconnect_min_ms, reconnect_max_ms; /* 0: the defaults */
};

/* A node of the view; strings valid only during the callback. */
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
	/* A view was installed (its number above the last one's). */
	void (*on_view)(void *arg, uint64_t number,
			const struct relay_view_node *nodes, size_t n);
	/* ACTIVATE (true), DEACTIVATE or the connection lost (false). */
	void (*on_active)(void *arg, bool active);
	/* A message, in order, once per stream (payload valid only during
	 * the call). */
	void (*on_data)(void *arg, const char *from_cluster,
			baton_node_id from_node, uint64_t from_incarnation,
			bool multicast, const uint8_t *payload, size_t len);
};

/* Start connecting. The config's strings are copied. 0, BATON_EINVAL (a
 * bad address or field) or BATON_ENOMEM. */
int relay_client_start(uv_loop_t *loop, const struct relay_client_config *cfg,
		       const struct relay_client_callbacks *cb,
		       struct relay_client **out);

/* Queue a message to node to_node of cluster to_cluster (its incarnation
 * in the current view), or with to_node 0 to every other node of
 * to_cluster. 0; BATON_ESTATE (not active); BATON_EINVAL (too big, or no
 * such node in the view); BATON_EBUSY (the queue is full); BATON_ENOMEM. */
int relay_client_send(struct relay_client *c, const char *to_cluster,
		      baton_node_id to_node, const uint8_t *payload,
		      size_t len);

struct relay_client_status {
	bool connected, registered, active;
	uint64_t view;
	uint64_t sent, received, resent, acked, queued_msgs, queued_bytes;
	uint64_t reconnects;
	char last_error[256];
};
void relay_client_status(const struct relay_client *c,
			 struct relay_client_status *out);

/* LEAVE if registered, close, then done(arg) once every handle closed. */
void relay_client_close(struct relay_client *c, void (*done)(void *arg),
			void *arg);

#endif /* BATON_RELAY_CLIENT_H */
