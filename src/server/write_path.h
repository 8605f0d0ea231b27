/*
 * A client's write on its way to the log (docs/batond.md, "Writes"):
 * route.c keeps one connection's writes in order and parks them while no
 * leader is known, forward.c proposes them on the leader (stamped) or
 * forwards them there, held.c holds a new leader's writes until it
 * applied the log it inherited. Part of batond (server.h includes it).
 */
#ifndef BATON_SERVER_WRITE_PATH_H
#define BATON_SERVER_WRITE_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/buf.h"
#include "baton/types.h"

struct server;
struct slot;
struct client_state;
struct route_chain;
struct route_list;
struct routed_write;
struct kv_watch;
struct kv_txn_command;
struct baton_peer_frame;

/* ---- forward.c ---- */
/* A write for the log: one command, or a transaction (EXEC: its watches
 * and queued commands, replied to with an array or a null array). */
struct write_req {
	bool transaction;
	uint32_t n_watches;
	const struct kv_watch *watches;
	uint32_t n_commands;
	const struct kv_txn_command *commands;
};
/* The effective machine version of this node's log (its latest version
 * entry, committed or not); 1 before the node starts. */
uint32_t server_machine_version(const struct server *s);
/* Append to b the error of a command that needs machine version `need`
 * while the log's is `have` (the text kv_gate gives). */
void reply_needs_version(struct baton_buf *b, const char *command,
			 uint32_t need, uint32_t have);
/* Send a routed write to the leader s->leader as a Forward frame (a
 * follower's write, or a read of a node that stalled for want of a newer
 * release: server_stall_routes). 0: sent (its reply comes back to
 * route.c) or answered already (refused here); BATON_ENOTFOUND: no
 * connection to the leader, nothing sent. */
int forward_routed(struct server *s, struct routed_write *rw);
/* Propose a routed write here, the leader (stamped, in the payload format
 * of the machine version in force). 0: proposed or answered already;
 * BATON_ENOTLEADER: this node no longer leads, nothing appended. */
int propose_routed(struct server *s, struct routed_write *rw);
/* Frames from peers: forwarded writes (leader side) and replies. */
void forward_on_frame(struct server *s, baton_node_id from,
		      const struct baton_peer_frame *f);
/* The leader changed: writes forwarded to another node wait for its
 * answer at most an election timeout more, and fail at once (outcome
 * unknown) if its connection is down. */
void forward_leader_changed(struct server *s, baton_node_id leader);
/* The last connection to peer `id` closed: its answers cannot come. */
void forward_peer_down(struct server *s, baton_node_id id);
/* Fail every forwarded write (outcome unknown): shutting down, removed. */
void forward_fail_all(struct server *s, const char *why);
/* Fail forwarded writes not answered in time. */
void forward_expire(struct server *s);
/* A write held.c held, proposed now (claimed first against the value
 * limit), or answered (refused, or not appended). p is forward.c's. */
struct proposal_ctx;
void forward_propose_held(struct server *s, struct proposal_ctx *p,
			  const uint8_t *payload, size_t len);
/* A write held.c held that this node, no longer leading, never appended:
 * a local client's goes on to the next leader, a follower's is told so. */
void forward_not_appended(struct server *s, struct proposal_ctx *p);

/* ---- held.c ---- */
struct held_write;
void held_init(struct server *s);
/* This node became leader (or another did): note where its log ends. */
void held_leader_changed(struct server *s, baton_node_id leader);
/* Must a write this leader encoded wait (held_push) before its claim and
 * proposal? While its inherited log is not applied, or writes wait. */
bool held_must_wait(struct server *s);
/* Hold a write's payload (copied): 0, BATON_EOVERLOADED (too much held) or
 * BATON_ENOMEM; p then belongs to held.c until it hands it back. */
int held_push(struct server *s, struct proposal_ctx *p, const uint8_t *payload,
	      size_t len);
/* Shutting down: every held write is not appended. */
void held_fail_all(struct server *s);

/* ---- route.c ---- */
/* A client's write (or a stalled node's read) on its way to the log, with
 * its own copy of the command: parked, forwarded, or proposed here. */
struct routed_write {
	struct server *s;
	struct route_chain *chain; /* its connection's */
	struct slot *sl;
	struct write_req w; /* points into this allocation */
	size_t bytes;	    /* of the allocation */
	uint64_t seq;	    /* its place in the chain */
	uint32_t routes;    /* times routed (SERVER_ROUTES_MAX) */
	/* The leader that said it did not append this write: not sent
	 * there again until the leadership changes. */
	baton_node_id refused_by;
	bool expired;		/* parked too long: being failed */
	bool elsewhere;		/* the other cluster answers it (a migration) */
	uint64_t park_until_ms; /* parked: fails then (0: never parked) */
	/* In flight at this node (this one: proposed here); 0: parked. */
	baton_node_id sent_to;
	uint64_t forward_id; /* forwarded: the request id, answer due by */
	uint64_t deadline_ms;
	struct routed_write *next; /* in s->forwards or chain->answered */
	struct routed_write *prev; /* in s->forwards */
	struct routed_write *chain_prev, *chain_next;
	struct route_list *list; /* parked: the list it is on */
	struct routed_write *list_prev, *list_next;
};
/* Send the write where it can be appended (the leader, here or by
 * forwarding), or park it until a leader is known; sl gets the reply. The
 * writes of one connection (cs) take effect in the order sent. */
void route_write(struct server *s, struct client_state *cs, struct slot *sl,
		 const struct write_req *w);
/* The leader `refused_by` did not append rw: route it again. */
void route_again(struct routed_write *rw, baton_node_id refused_by);
/* Answer the client and free rw: with `reply`, with the error of a
 * BATON_E* code, or with what slot_buf(rw->sl) holds already. */
void route_answer(struct routed_write *rw, const uint8_t *reply, size_t len);
void route_fail(struct routed_write *rw, int code);
void route_done(struct routed_write *rw);
/* Is this reply of a leader to a forwarded write one that says it did not
 * append it (route.c lists them)? */
bool route_reply_not_appended(const uint8_t *reply, size_t len);
/* The node's leader is now `leader` (0: none known): route the parked
 * writes, and tell the forwards. */
void route_leader_changed(struct server *s, baton_node_id leader);
/* Every housekeeping tick: fail what waited too long. */
void route_expire(struct server *s);
/* Shutting down or removed: fail every parked and forwarded write. */
void route_fail_all(struct server *s, const char *why);

#endif /* BATON_SERVER_WRITE_PATH_H */
