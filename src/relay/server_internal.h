/*
 * Shared by server.c (connections, I/O, timers) and session.c (what each
 * frame does).
 */
#ifndef BATON_RELAY_SERVER_INTERNAL_H
#define BATON_RELAY_SERVER_INTERNAL_H

#include <uv.h>

#include "protocol.h"
#include "server.h"
#include "state_file.h"
#include "table.h"

/* An encoded frame, shared by the connections it is queued on. */
struct relay_buf {
	uint32_t refs;
	uint32_t len;
	uint8_t bytes[];
};

enum conn_role {
	CONN_NEW,     /* before HELLO or STATUS */
	CONN_NODE,    /* registered */
	CONN_MONITOR, /* sent STATUS first: counters only */
	CONN_DONE,    /* refused, left or failed: closing */
};

struct relay_conn {
	uv_tcp_t tcp;
	struct relay_server *srv;
	struct relay_conn *prev, *next;
	enum conn_role role;
	bool closing;
	uint8_t *rbuf;
	size_t rlen, rcap;
	uint32_t queue_messages; /* DATA written but not yet sent */
	uint64_t queue_bytes;	 /* every frame's bytes not yet sent */
	uint64_t accepted_ms, last_recv_ms, last_send_ms, closing_since_ms;
	uint64_t ping_token;
	char name[64]; /* the peer's address, for the log */
	char host[64]; /* its IP address alone: the per-address limit */
	/* "cluster/node" once registered, for the log of its close. */
	char ident[BATON_RELAY_ID_MAX + 24];
	/* Why it closes: the first reason given (conn_reason), logged once
	 * when the handle is closed. */
	char close_reason[320];
};

/* HELLO nonces accepted within the proof window (a replayed HELLO reuses
 * one). Oldest first out; a nonce pushed out raises `floor_ms`, and a
 * proof not newer than the floor is refused, so that a replay of an
 * evicted nonce is refused too. */
#define RELAY_NONCES_MAX 4096u
struct relay_nonces {
	uint8_t nonce[RELAY_NONCES_MAX][BATON_RELAY_PROOF_NONCE_LEN];
	uint64_t timestamp_ms[RELAY_NONCES_MAX];
	uint32_t head, count;
	uint64_t floor_ms;
};

struct relay_server {
	const struct relay_config *cfg;
	uv_loop_t *loop;
	uv_tcp_t listener;
	uv_timer_t sweep;
	uv_signal_t signals[4];
	struct relay_conn *conns;
	uint32_t conn_count;
	struct relay_table table;
	struct relay_state state;
	uint64_t incarnation;
	uint64_t messages_relayed, bytes_relayed, messages_dropped;
	bool stopping;
	bool installing_view, view_pending; /* see install_view() */
	int exit_code;
	struct relay_nonces nonces;
	/* Since when the old cluster looks gone (session_admin.c); 0: it
	 * does not. */
	uint64_t gone_since_ms;
	struct baton_relay_node view_nodes[BATON_RELAY_NODES_MAX];
	struct baton_relay_node_status status_nodes[BATON_RELAY_NODES_MAX];
};

/* session.c: one decoded frame received on c. */
void session_frame(struct relay_conn *c, const struct baton_relay_frame *f);
/* session.c: c (a node's connection) is closing; mark it disconnected. */
void session_detach(struct relay_conn *c);
/* session.c: drop the nodes disconnected longer than the grace period. */
void session_forget(struct relay_server *srv);
/* session.c: activate or deactivate (persisted, then sent to every node). */
void session_set_active(struct relay_server *srv, bool active);

/* session_admin.c: a STATUS's ADMIN_REQUEST (frame extension area ext),
 * checked and carried out: the ADMIN_RESULT entry to put in the reply into
 * out, its length returned (0: the STATUS carried none). */
size_t session_admin_request(struct relay_conn *c,
			     const struct baton_relay_ext *ext,
			     uint8_t out[BATON_RELAY_ADMIN_RESULT_ENTRY_MAX]);
/* session_admin.c: deactivate once the old cluster is gone (on every
 * sweep). */
void session_auto_deactivate(struct relay_server *srv);
/* session_auth.c: whether a signed message (a HELLO proof, an admin
 * request) is fresh. SESSION_SKEWED: its time is more than
 * --proof-max-skew-ms from the relay's clock. SESSION_REPLAYED: its time is
 * not above the floor of the nonces forgotten, or its nonce was seen.
 * SESSION_FRESH: neither; the nonce is remembered. *skew_ms is the
 * distance to the clock, *ahead (unless NULL) whether the time is ahead. */
enum session_fresh { SESSION_FRESH, SESSION_SKEWED, SESSION_REPLAYED };
enum session_fresh
session_check_fresh(struct relay_server *srv,
		    const uint8_t nonce[BATON_RELAY_PROOF_NONCE_LEN],
		    uint64_t timestamp_ms, uint64_t *skew_ms, bool *ahead);
/* session_auth.c: the wall clock in ms since the epoch. */
uint64_t session_wall_ms(void);

/* session_auth.c: whether HELLO h (frame extension area ext) may
 * register: 0, or a WELCOME code with the reason in why. */
uint16_t session_auth_check(struct relay_server *srv,
			    const struct baton_relay_hello *h,
			    const struct baton_relay_ext *ext, char *why,
			    size_t cap);

/* server.c */
uint64_t relay_now_ms(const struct relay_server *srv);
/* Encode f (to a node); asserts it is valid. refs is 0. */
struct relay_buf *relay_encode(const struct baton_relay_frame *f);
/* Free b if no connection holds it. */
void relay_buf_release(struct relay_buf *b);
/* Queue b on c. Over c's queue limits (bytes: every frame; messages:
 * DATA), c gets ERROR OVERLOADED and is closed, and false is returned. */
bool conn_send(struct relay_conn *c, struct relay_buf *b, bool is_data);
/* Encode f and queue it on c. */
void conn_send_frame(struct relay_conn *c, const struct baton_relay_frame *f);
/* Log, send ERROR {code, frame type, text} and close c. */
void conn_fail(struct relay_conn *c, uint16_t code, uint16_t frame_type,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Close c once what is queued is sent (after a refusal or LEAVE). */
void conn_finish(struct relay_conn *c);
/* Why c closes, for the one line its close logs (the first reason given
 * is kept). */
void conn_reason(struct relay_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A fatal error of the relay itself (the state file cannot be written):
 * log it and stop with exit status 1. */
void relay_fatal(struct relay_server *srv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* BATON_RELAY_SERVER_INTERNAL_H */
