/*
 * batond's configuration (docs/batond.md, "Configuration"): what flags,
 * the config file and the environment set (config.c, config_set.c), and
 * the exit statuses a start or a stop ends with.
 */
#ifndef BATON_SERVER_CONFIG_H
#define BATON_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "baton/version.h"
#include "transport.h"

#define SERVER_MAX_CLIENTS_DEFAULT 10000u
/* --max-clock-offset: as CockroachDB's default max offset. */
#define SERVER_MAX_CLOCK_OFFSET_MS_DEFAULT 500u
#define SERVER_PASSWORD_MAX 256u
/* --test-apply-delay-ms: a delay a test plants, small enough that the
 * node stays a member that answers. */
#define CONFIG_TEST_APPLY_DELAY_MS_MAX 100u
/* Replies one client, and all clients together, may have queued unread
 * before a client is cut off (a slow reader): --max-client-output-bytes,
 * --max-total-output-bytes. */
#define SERVER_CLIENT_OUTPUT_MAX_DEFAULT ((uint64_t)256 << 20)
#define SERVER_TOTAL_OUTPUT_MAX_DEFAULT ((uint64_t)256 << 20)
/* Log segments (--wal-segment-bytes): etcd's 64 MiB by default; at least
 * 1 MiB so that a segment holds many batches, at most 1 GiB. */
#define SERVER_WAL_SEGMENT_BYTES_DEFAULT ((uint64_t)64 << 20)
#define SERVER_WAL_SEGMENT_BYTES_MIN ((uint64_t)1 << 20)
#define SERVER_WAL_SEGMENT_BYTES_MAX ((uint64_t)1 << 30)
/* --max-value-bytes: the longest value a write may leave. The longest
 * bulk one SET can carry (RESP_BULK_BYTES_MAX_DEFAULT), so that what
 * APPEND and SETRANGE build is no bigger than what a client could send
 * whole; a GET of it fits --max-client-output-bytes many times over, and
 * one export record of it fits one log entry (docs/kv.md "The value
 * limit" says why not Redis's 512 MB). */
#define SERVER_VALUE_BYTES_MAX_DEFAULT ((uint64_t)(16u << 20) - (64u << 10))

struct server_config {
	baton_node_id id;
	char listen[BATON_ADDR_MAX];
	char peer_listen[BATON_ADDR_MAX];
	char data_dir[1024];
	char cluster_id[128];
	char password[SERVER_PASSWORD_MAX];
	/* --peer-secret-file: the cluster's peer secret, read from that file
	 * while parsing (has_peer_secret); --insecure-peers: allow peers on a
	 * non-loopback address without one. */
	char peer_secret_file[1024];
	bool has_peer_secret;
	struct baton_peer_secret peer_secret;
	bool insecure_peers;
	bool join;
	/* --join-seeds: peer addresses of members; the node joins by itself
	 * (join.c) instead of waiting for batonctl add. */
	uint32_t n_seeds;
	char seeds[BATON_MAX_MEMBERS][BATON_ADDR_MAX];
	/* The release this node runs: the binary's own, or an older one it
	 * contains (--as-release); used for everything versioned. */
	struct baton_profile profile;
	bool strict_release;
	/* Add nodes that ask to join (--join-seeds) without an operator's
	 * BATON.ADD. Off by default: until peers prove they hold the
	 * cluster's secret, anyone who reaches the peer port could ask. */
	bool accept_joins;
	/* --test-apply-delay-ms: for tests only (a planted slow release),
	 * at most CONFIG_TEST_APPLY_DELAY_MS_MAX; 0 off. */
	uint32_t test_apply_delay_ms;
	uint32_t machine_upgrade; /* enum baton_machine_upgrade */
	uint32_t election_policy; /* enum baton_election_policy */
	uint32_t n_founders;
	baton_node_id founders[BATON_MAX_MEMBERS];
	char founder_peer[BATON_MAX_MEMBERS][BATON_ADDR_MAX];
	char founder_client[BATON_MAX_MEMBERS][BATON_ADDR_MAX];
	uint32_t max_clients;
	uint64_t snapshot_entries;
	uint64_t snapshot_slice_bytes; /* 0: the pipeline's default */
	/* Each log segment is preallocated to this size: the disk a node
	 * takes before its first write, and the space a restart needs. */
	uint64_t wal_segment_bytes;
	bool snapshot_trailing_set;
	uint32_t snapshot_trailing;
	uint32_t election_timeout_ms; /* the core's default when not given */
	uint32_t heartbeat_ms;	      /* the same */
	/* --max-clock-offset: the wall-clock offset tolerated between
	 * nodes, ms (0: not checked; docs/operations.md, "Clocks"). */
	uint32_t max_clock_offset_ms;
	int log_level;
	/* Client limits (docs/batond.md, "Limits"): the parser's, at the
	 * headers; the output queued unread; idle seconds (0: none). */
	uint64_t max_bulk_bytes;
	uint64_t max_request_bytes;
	uint64_t max_client_output_bytes;
	uint64_t max_total_output_bytes;
	uint32_t client_idle_timeout_s;
	/* The longest string value, hash field or hash value a write may
	 * leave (--max-value-bytes; docs/kv.md "The value limit"). */
	uint64_t max_value_bytes;
	/* Migration between two clusters (docs/relay.md): baton-relay's
	 * "host:port" ("" none), this node's cluster id there, and the
	 * cluster to import from ("": this node is not on the new side). */
	char relay[BATON_ADDR_MAX];
	char relay_cluster[256];
	/* --relay-secret-file: this cluster's relay secret, read while
	 * parsing (has_relay_secret); every HELLO carries a proof of it
	 * (src/relay/relay_auth.h). */
	char relay_secret_file[1024];
	bool has_relay_secret;
	struct baton_peer_secret relay_secret;
	char migrate_from[256];
	/* --migrate-from-unsealed RELEASE: the --migrate-from cluster runs
	 * RELEASE, which predates sealing; messages to and from it are the
	 * unsealed format 1 (docs/relay.md, "Migrating from 1.3.0"). Every
	 * other cluster's (this node's own) stay sealed. */
	bool has_unsealed_release;
	struct baton_release unsealed_release;
	/* The one cluster this (old) node exports to and fences for. */
	char migrate_to[256];
	/* --migration-secret-file: the secret both clusters of a migration
	 * hold; every migration message is sealed with keys derived from it
	 * (docs/relay.md, "Threat model"). Needed by --migrate-to and
	 * --migrate-from. */
	char migration_secret_file[1024];
	bool has_migration_secret;
	struct baton_peer_secret migration_secret;
	/* --restore FILE: found a new cluster from a backup (backup.c);
	 * "" for none. */
	char restore[1024];
	/* --metrics HOST:PORT: serve /metrics and /health over HTTP there
	 * (http.c, docs/metrics.md); "" for off. */
	char metrics[BATON_ADDR_MAX];
	/* --maxmemory BYTES (memory.c, docs/operations.md "Memory"): above
	 * it the leader refuses writes that grow memory; 0 for no bound.
	 * Not given (maxmemory_set false): a share of the memory the process
	 * may use, found at start. */
	uint64_t maxmemory;
	bool maxmemory_set;
};

/* Parse argv (and a --config file). Returns 0, 1 when --help/--version was
 * printed (exit 0), or -1 after printing an error (exit 2). */
int server_config_parse(struct server_config *c, int argc, char **argv);

/* batond's exit statuses (docs/batond.md): 1 a failure that a restart may
 * mend (a port in use, out of memory); 2 bad usage; 3 a refusal that no
 * restart mends, which needs an operator: the storage failed, the data
 * directory is another node's, damaged, or wiped under a member's id, or
 * a --restore is refused. A service manager restarts on 1, not on 2 or 3
 * (packaging/batond@.service). */
#define SERVER_EXIT_FAILED 1
#define SERVER_EXIT_USAGE 2
#define SERVER_EXIT_REFUSED 3

#endif /* BATON_SERVER_CONFIG_H */
