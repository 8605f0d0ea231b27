/*
 * Migration between two clusters through baton-relay (docs/relay.md): the
 * node's relay client, the old side's export stream and fence, the new
 * side's import and authority, and which cluster answers a client.
 *
 *   migration.c         the relay client, the view, serving, INFO, ticks
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
	MIG_EXPORT_REQ = 1, /* new leader -> old cluster (multicast) */
	MIG_BEGIN = 2,	    /* old leader -> new leader: a snapshot starts */
	MIG_CHUNK = 3,	    /* ... its export records */
	MIG_END = 4,	    /* ... it ended */
	MIG_ENTRY = 5,	    /* ... a committed kv payload after it */
	MIG_HEAD = 6,	    /* ... nothing new: where the old log is */
	MIG_ACK = 7,	    /* new leader -> old leader: import index */
	MIG_HANDOFF = 8,    /* new leader -> old leader: fence now */
	MIG_FENCED = 9,	    /* old leader -> new leader: fenced at F */
	MIG_AUTHORITY = 10, /* new leader -> old cluster (multicast) */
};
#define MIG_MSG_TYPE_MAX 10u
#define MIG_CLUSTER_MAX 255u

/* One decoded message. Every message carries the session the new leader
 * chose and the sender's last applied index of its own log. */
struct migration_msg {
	uint8_t type;
	uint64_t session;
	uint64_t applied;
	uint64_t index;	     /* BEGIN/END: snapshot index; ENTRY: old index;
				ACK: import index; FENCED/AUTHORITY: F;
				EXPORT_REQ: import index to resume after */
	uint64_t value;	     /* BEGIN: machine time; END: chunks; CHUNK: seq;
				AUTHORITY: the new leader's node id */
	const uint8_t *data; /* CHUNK: records; ENTRY: kv payload;
				EXPORT_REQ/AUTHORITY: a cluster id */
	size_t len;
};
/* Append the encoding of m to out: 0 or BATON_ENOMEM/BATON_EINVAL. */
int migration_msg_encode(const struct migration_msg *m, struct baton_buf *out);
/* 0, or BATON_ECORRUPT for a malformed message. */
int migration_msg_decode(const uint8_t *buf, size_t len,
			 struct migration_msg *out);
const char *migration_msg_name(uint8_t type);

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
/* INFO's "# Migration" section (nothing without --relay). */
void migration_info(struct server *s, struct baton_buf *b);
/* BATON.MIGRATION STATUS | HANDOFF. */
int admin_migration(struct command_ctx *x);

#endif /* BATON_SERVER_MIGRATION_H */
