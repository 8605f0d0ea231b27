/*
 * Shared by the node-side relay client's files: client.c (the connection,
 * the timer, start, status and close), client_send.c (the outgoing
 * streams) and client_receive.c (what each incoming frame does: the
 * session, the view, the incoming streams). Not part of client.h's API.
 *
 * The node-side relay client (client.h): one connection to baton-relay at
 * a time, the session of docs/relay-protocol.md ("The session", "The
 * global view", "Streams, sequence numbers and acknowledgements") on the
 * node's side.
 *
 * Outgoing: one out_stream per destination (a unicast destination node
 * incarnation, or a multicast destination cluster) keeps every message
 * not yet acknowledged end to end, and `sent_upto`, the last seq written
 * on the current connection; rewinding `sent_upto` is how anything is
 * resent. Incoming: one in_stream per (source incarnation, kind) keeps
 * `last`, the last seq delivered in order.
 */
#ifndef BATON_RELAY_CLIENT_INTERNAL_H
#define BATON_RELAY_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "client.h"
#include "protocol.h"

struct out_msg {
	uint64_t seq;
	uint32_t len;
	uint8_t *payload;
};

/* A node of a multicast stream's cluster, owed the messages from
 * owed_from on (those sent while it was in this node's view). */
struct mc_dest {
	baton_node_id node_id;
	uint64_t incarnation;
	uint64_t owed_from;
	uint64_t acked;
	uint64_t last_ack; /* the seq of its previous ACK */
	bool has_ack;
	/* The relay incarnation of the last view that showed it: a restarted
	 * relay's first views lack the nodes not yet back, which have not
	 * left (only a view of the same relay incarnation says that). */
	uint64_t seen_relay_incarnation;
};

struct out_stream {
	uint8_t kind;
	uint16_t cluster_len;
	char cluster[BATON_RELAY_ID_MAX + 1];
	baton_node_id node_id; /* unicast */
	uint64_t incarnation;  /* unicast */
	uint64_t last_seq;     /* the last seq given out */
	uint64_t sent_upto;    /* the last seq written on this connection */
	uint64_t max_sent;     /* the last seq ever written */
	uint64_t acked;	       /* unicast: the destination's last ACK */
	uint64_t last_ack;     /* unicast: the seq of the previous ACK */
	bool has_ack;
	bool gone; /* unicast: the destination left the view */
	uint64_t seen_relay_incarnation; /* unicast: as in struct mc_dest */
	uint64_t progress_ms, resend_ms;
	struct out_msg *msgs; /* msgs[head..head+count): seqs in order */
	size_t head, count, cap;
	struct mc_dest *dests; /* multicast */
	size_t ndests;
};

struct in_stream {
	uint8_t kind;
	uint16_t cluster_len;
	char cluster[BATON_RELAY_ID_MAX + 1];
	baton_node_id node_id;
	uint64_t incarnation;
	uint64_t last;
	bool ack_due;
};

struct view_node {
	uint16_t cluster_len;
	char cluster[BATON_RELAY_ID_MAX + 1];
	baton_node_id node_id;
	uint64_t incarnation;
	struct baton_release release;
	char address[BATON_RELAY_ADDR_MAX + 1];
	bool connected;
};

struct relay_conn {
	uv_tcp_t tcp;
	struct baton_addr_connect *connecting; /* resolving or connecting */
	struct relay_client *client;
	uint8_t *rbuf;
	size_t rlen, rcap;
	size_t write_queue_bytes;
	bool connected, closing;
	uint64_t started_ms, last_recv_ms, last_send_ms, closing_since_ms;
	uint64_t ping_token;
};

struct write_req {
	uv_write_t req;
	struct relay_conn *conn;
	size_t len;
	uint8_t bytes[];
};

struct relay_client {
	uv_loop_t *loop;
	struct relay_client_config cfg; /* strings point at the copies below */
	char relay_addr[BATON_RELAY_ADDR_MAX + 1];
	char cluster_id[BATON_RELAY_ID_MAX + 1];
	char address[BATON_RELAY_ADDR_MAX + 1];
	struct relay_client_callbacks cb;
	/* HELLO proofs: the key of the cluster's relay secret (relay_auth.h).
	 */
	bool has_key;
	uint8_t key[32];

	uv_timer_t tick, reconnect;
	unsigned open_handles; /* timers and connections not yet closed */
	bool closing;
	void (*done)(void *arg);
	void *done_arg;

	struct relay_conn *conn;      /* the current connection, or NULL */
	struct relay_conn *lingering; /* flushing an ERROR or LEAVE */
	bool registered, active;
	uint64_t backoff_ms;
	uint64_t relay_incarnation;

	uint64_t view_number, view_relay_incarnation;
	struct view_node *view, *next_view;
	uint16_t view_count;
	struct relay_view_node *view_out;

	struct out_stream **out;
	size_t nout, out_cap, flush_start;
	struct in_stream *in;
	size_t nin, in_cap;

	/* NODE_STATE flags the migration set (relay_client_set_state); sent
	 * in a STATUS when they change and after every WELCOME. */
	uint8_t state_flags;

	uint64_t queued_msgs, queued_bytes;
	uint64_t sent, received, resent, acked, dropped, duplicates, gaps,
		reconnects;
	char last_error[256];
};

static inline uint64_t now_ms(const struct relay_client *c)
{
	return uv_now(c->loop);
}

static inline bool str_eq(const char *a, size_t alen, const char *b,
			  size_t blen)
{
	return alen == blen && memcmp(a, b, alen) == 0;
}

/* client_send.c: a STATUS carrying the node's NODE_STATE flags, if it is
 * registered and has any to say. */
void relay_client__send_state(struct relay_client *c);

/* ---- client.c: the connection ------------------------------------------- */

/* An identifier of the protocol: 1..max bytes, no control byte. */
bool relay_client__valid_identifier(const char *s, size_t max);
/* Record the last error, for relay_client_status(). */
void relay_client__set_error(struct relay_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Encode f and queue it on conn. false: the connection is lost (write
 * refused) or memory ran out; the caller stops using conn. */
bool relay_client__conn_send_frame(struct relay_conn *conn,
				   const struct baton_relay_frame *f);
/* The session is over: forget it, tell the application it is inactive,
 * close conn (after what is queued when graceful), reconnect later. */
void relay_client__end_session(struct relay_client *c, struct relay_conn *conn,
			       bool graceful);
/* end_session() of the current connection, if any, at once. */
void relay_client__lose_connection(struct relay_client *c);
/* A protocol error of the relay: send ERROR, log it, close, reconnect. */
void relay_client__conn_fail(struct relay_client *c, uint16_t code,
			     uint16_t frame_type, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- client_send.c: the outgoing streams -------------------------------- */

/* The seq of the stream's oldest message kept, or the next seq if none. */
uint64_t relay_client__head_seq(const struct out_stream *s);
/* Free the messages every destination acknowledged; dropped: count them
 * as dropped (their destination left), not acknowledged. */
void relay_client__release_acked(struct relay_client *c, struct out_stream *s,
				 bool dropped);
/* Send again from `from` + 1. */
void relay_client__rewind_stream(struct relay_client *c, struct out_stream *s,
				 uint64_t from);
/* Whether the destination (node, incarnation) is still owed messages after
 * the view; *v, *index: its view node, if there. */
bool relay_client__still_owed(const struct relay_client *c, const char *cluster,
			      size_t cluster_len, baton_node_id node,
			      uint64_t incarnation,
			      uint64_t seen_relay_incarnation,
			      const struct view_node **v, uint16_t *index);
/* A multicast stream's destinations follow a new view; was_connected[i]:
 * whether view node i was connected in the previous view. */
void relay_client__update_multicast_dests(struct relay_client *c,
					  struct out_stream *s,
					  const bool *was_connected);
/* Connected, registered, active and not closing: DATA may be written. */
bool relay_client__can_send(const struct relay_client *c);
/* Write what is unsent while the socket's write queue has room. */
void relay_client__flush(struct relay_client *c);
/* An ACK of one of the outgoing streams. */
void relay_client__on_ack_frame(struct relay_client *c,
				const struct baton_relay_ack *a);
/* Rewind the streams whose connected destinations stopped acknowledging. */
void relay_client__resend_stalled(struct relay_client *c, uint64_t now);

/* ---- client_receive.c: the incoming frames ------------------------------ */

/* Send the ACKs the frames just handled made due. */
void relay_client__send_due_acks(struct relay_client *c);
/* Act on a frame decoded from the current connection. */
void relay_client__handle_frame(struct relay_client *c,
				const struct baton_relay_frame *f);

#endif /* BATON_RELAY_CLIENT_INTERNAL_H */
