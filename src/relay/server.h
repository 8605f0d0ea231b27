/*
 * baton-relay's server (docs/relay-server.md): listens on TCP, registers
 * nodes, installs numbered views, forwards DATA and ACK between nodes,
 * answers STATUS and PING. One libuv loop, one thread.
 */
#ifndef BATON_RELAY_SERVER_H
#define BATON_RELAY_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

/* A cluster's HELLO proof key (relay_auth.h), from --cluster-secret NAME=FILE.
 */
struct relay_cluster_secret {
	char cluster_id[BATON_RELAY_ID_MAX + 1];
	uint8_t key[32];
};

/* --cluster-secret given at most this many times. */
#define RELAY_CLUSTER_SECRETS_MAX 64u

/* The most --open-cluster flags. */
#define RELAY_OPEN_CLUSTERS_MAX 8u

struct relay_config {
	const char *host; /* IPv4 or IPv6 number (no brackets) or a name */
	int port;
	const char *data_dir; /* holds relay-state; must exist */
	/* Activate at start (the state file keeps it across restarts). */
	bool activate;
	uint64_t handshake_timeout_ms; /* connect to HELLO or STATUS */
	uint64_t idle_timeout_ms;      /* nothing received: ERROR TIMEOUT */
	uint64_t ping_interval_ms;     /* nothing sent: PING */
	uint64_t forget_after_ms;      /* a disconnected node leaves the view */
	uint32_t queue_messages_max;   /* DATA waiting for one node */
	uint64_t queue_bytes_max;      /* bytes of every frame waiting */
	/* Connections at once (registered, monitors and new); past it a
	 * newcomer evicts the oldest unregistered connection, or is refused
	 * when every connection is a registered node's. */
	uint32_t connections_max;
	/* Unregistered connections (before HELLO, and monitors) from one IP
	 * address; a newcomer past it evicts that address's oldest. */
	uint32_t unregistered_per_address_max;
	/* HELLO proofs: the secrets (n_secrets 0: registration is open to
	 * anyone, the first version's behaviour); a cluster with no secret
	 * is refused unless allow_open_clusters; a proof whose timestamp is
	 * further than proof_skew_ms from the relay's clock is refused. */
	const struct relay_cluster_secret *secrets;
	uint32_t n_secrets;
	bool allow_open_clusters;
	/* --open-cluster NAME: with secrets, these cluster ids (and only
	 * these) register without a proof: the old cluster of a release
	 * whose relay client sends none (docs/relay.md, "Migrating from
	 * 1.3.0"). Each is not one of the secrets' clusters. */
	uint32_t n_open;
	const char *open_clusters[RELAY_OPEN_CLUSTERS_MAX];
	uint64_t proof_skew_ms;
	/* Operators' ACTIVATE/DEACTIVATE over the network (a STATUS with an
	 * ADMIN_REQUEST, batonctl relay): the key of --admin-secret-file;
	 * without it every such request is refused. */
	bool has_admin_key;
	uint8_t admin_key[32];
	/* Deactivate by itself once the old cluster is gone: a node's
	 * cluster holds write authority and no node of another cluster has
	 * been registered (in the view) for this long (docs/relay-server.md);
	 * 0: never. */
	uint64_t auto_deactivate_ms;
};

/* Defaults of the flags (docs/relay-server.md). */
#define RELAY_HANDSHAKE_TIMEOUT_MS 5000u
#define RELAY_IDLE_TIMEOUT_MS 30000u
#define RELAY_PING_INTERVAL_MS 5000u
#define RELAY_FORGET_AFTER_MS 600000u
#define RELAY_QUEUE_MESSAGES_MAX 65536u
#define RELAY_QUEUE_BYTES_MAX (256ull << 20)
#define RELAY_CONNECTIONS_MAX 1024u
#define RELAY_UNREGISTERED_PER_ADDRESS_MAX 32u
#define RELAY_PROOF_SKEW_MS 60000u
#define RELAY_AUTO_DEACTIVATE_MS 30000u

/* Run until SIGINT or SIGTERM. SIGUSR1 activates the relay, SIGUSR2
 * deactivates it. Returns 0 after a signal stopped it, or a BATON_E code
 * with a message in err: the state file refused (ECORRUPT, EVERSION),
 * the address unusable or the state not writable (EIO). */
int relay_run(const struct relay_config *cfg, char *err, size_t errlen);

#endif /* BATON_RELAY_SERVER_H */
