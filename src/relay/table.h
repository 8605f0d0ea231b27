/*
 * The relay's table of registered nodes (docs/relay.md, docs/relay-server.md):
 * one entry per (cluster id, node id), kept sorted the way a VIEW lists
 * them (cluster id bytewise, a prefix first, then node id), so that a view
 * is the table read in order. Pure: no I/O, no allocation; the server owns
 * the connections and only stores an opaque pointer to each here.
 */
#ifndef BATON_RELAY_TABLE_H
#define BATON_RELAY_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol.h"

/* One registered node: what its HELLO said, and whether it is connected. */
struct relay_node {
	char cluster_id[BATON_RELAY_ID_MAX];
	uint16_t cluster_id_len;
	baton_node_id node_id;
	uint64_t incarnation;
	struct baton_release release;
	char address[BATON_RELAY_ADDR_MAX];
	uint16_t address_len;
	/* The connection that registered it (owned by the server); NULL once
	 * it closed without LEAVE: the node stays, `connected` 0. */
	void *conn;
	uint64_t disconnected_ms; /* when conn became NULL (caller's clock) */
	uint64_t messages_in;	  /* DATA received from it */
	uint64_t messages_out;	  /* DATA queued to it */
	/* NODE_STATE flags its last STATUS said since it registered
	 * (BATON_RELAY_NODE_STATE_AUTHORITY). */
	uint8_t state_flags;
};

/* At most BATON_RELAY_NODES_MAX nodes: the most a VIEW may carry. */
struct relay_table {
	struct relay_node nodes[BATON_RELAY_NODES_MAX];
	uint16_t count;
};

void relay_table_init(struct relay_table *t);

/* The node (cluster id, node id), or NULL. */
struct relay_node *relay_table_find(struct relay_table *t,
				    struct baton_relay_str cluster_id,
				    baton_node_id node_id);

/* Register the node of a decoded HELLO on connection conn (not NULL).
 * An entry for the same (cluster id, node id) is updated in place, and
 * *replaced receives the connection that held it (NULL if none; the
 * caller closes it with REPLACED). Returns the entry, or NULL when the
 * table is full and the node is new (the caller refuses with VIEW_FULL).
 * The entry pointer stays valid until the next register or remove. */
struct relay_node *relay_table_register(struct relay_table *t,
					const struct baton_relay_hello *hello,
					void *conn, void **replaced);

/* Remove the node (LEAVE); pointers to entries after it are invalidated. */
void relay_table_remove(struct relay_table *t, struct relay_node *n);

/* Remove every node disconnected since at least grace_ms before now_ms;
 * returns how many were removed (pointers to entries are invalidated). */
uint16_t relay_table_forget(struct relay_table *t, uint64_t now_ms,
			    uint64_t grace_ms);

/* The node as the `peer` of a DATA or ACK the relay sends (cluster id,
 * node id, incarnation); points into n. */
struct baton_relay_peer relay_node_peer(const struct relay_node *n);

/* Fill out[0..count) with the table as VIEW records (pointing into t). */
void relay_table_view(const struct relay_table *t,
		      struct baton_relay_node *out);

#endif /* BATON_RELAY_TABLE_H */
