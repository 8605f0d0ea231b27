/*
 * The peer transport: TCP connections between nodes, on libuv.
 *
 * Every node dials each peer whose address it knows and accepts the peers'
 * connections too; a connection opens with a handshake (cluster id, node
 * id, release, protocol range, machine_max) that picks the highest common
 * protocol version or refuses with a reason, logged on both sides. After it,
 * frames flow both ways on either connection; a message to a peer goes out
 * on whichever of the two is up. Lost connections are redialled with
 * jittered exponential back-off. Send queues are bounded: beyond the limit
 * a frame is dropped and counted (Raft retransmits what matters).
 */
#ifndef BATON_IO_TRANSPORT_H
#define BATON_IO_TRANSPORT_H

#include <uv.h>

#include "baton/raft.h"

/* Bytes queued on one connection before new frames are dropped. */
#define BATON_TRANSPORT_QUEUE_MAX (64u << 20)
/* Redial back-off bounds. */
#define BATON_TRANSPORT_BACKOFF_MIN_MS 50u
#define BATON_TRANSPORT_BACKOFF_MAX_MS 2000u
#define BATON_ADDR_MAX 256u

struct baton_transport;

/* A frame after the handshake: `body` is one serialized envelope (without
 * the length prefix), valid during the call. */
typedef void (*baton_transport_frame_cb)(void *data, baton_node_id from,
					 const uint8_t *body, size_t len);

struct baton_transport_config {
	uv_loop_t *loop;
	const char *cluster_id;
	baton_node_id id;
	struct baton_profile profile;
	const char *listen_addr; /* host:port */
	baton_transport_frame_cb on_frame;
	void *data;
};

struct baton_transport_stats {
	uint64_t frames_in, frames_out;
	uint64_t dropped;   /* queue full or no connection */
	uint64_t refused;   /* handshakes refused, either side */
	uint64_t unknown;   /* frames of a kind this release ignores */
	uint64_t malformed; /* connections closed on a bad frame */
	uint32_t connected_peers;
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

/* Queue a frame (length prefix included) for peer `id`; copied. Returns
 * 0, or BATON_ENOTFOUND when no connection to it is up and BATON_EOVERLOADED
 * when its queue is full (the frame is dropped in both cases). */
int baton_transport_send(struct baton_transport *t, baton_node_id id,
			 const uint8_t *frame, size_t len);

/* The negotiated protocol version with a connected peer (0 if none). */
uint32_t baton_transport_peer_proto(struct baton_transport *t,
				    baton_node_id id);

void baton_transport_stats(struct baton_transport *t,
			   struct baton_transport_stats *out);

/* Count a frame the node could not use (unknown kind). */
void baton_transport_count_unknown(struct baton_transport *t);

/* Split "host:port"; BATON_EINVAL if malformed. */
int baton_parse_addr(const char *addr, struct sockaddr_in *out);

#endif /* BATON_IO_TRANSPORT_H */
