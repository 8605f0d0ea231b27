/*
 * Whether a HELLO may register (docs/relay-server.md "Authentication"):
 * the proof of its cluster's relay secret (HELLO_PROOF, relay_auth.h), its
 * freshness, and the nonces seen, so that a captured HELLO cannot be
 * replayed.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "relay_auth.h"
#include "baton/assert.h"
#include "server_internal.h"

static const struct relay_cluster_secret *
secret_of(const struct relay_config *cfg, const struct baton_relay_str *id)
{
	for (uint32_t i = 0; i < cfg->n_secrets; i++) {
		const struct relay_cluster_secret *s = &cfg->secrets[i];
		if (strlen(s->cluster_id) == id->len &&
		    memcmp(s->cluster_id, id->ptr, id->len) == 0)
			return s;
	}
	return NULL;
}

/* Did the operator name this cluster with --open-cluster? */
static bool named_open(const struct relay_config *cfg,
		       const struct baton_relay_str *id)
{
	for (uint32_t i = 0; i < cfg->n_open; i++)
		if (strlen(cfg->open_clusters[i]) == id->len &&
		    memcmp(cfg->open_clusters[i], id->ptr, id->len) == 0)
			return true;
	return false;
}

/* The wall clock, as the nodes' proofs carry it. */
uint64_t session_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool nonce_seen(const struct relay_nonces *n, const uint8_t *nonce)
{
	for (uint32_t i = 0; i < n->count; i++) {
		uint32_t at = (n->head + i) % RELAY_NONCES_MAX;
		if (memcmp(n->nonce[at], nonce, BATON_RELAY_PROOF_NONCE_LEN) ==
		    0)
			return true;
	}
	return false;
}

static void nonce_remember(struct relay_nonces *n, const uint8_t *nonce,
			   uint64_t timestamp_ms)
{
	if (n->count == RELAY_NONCES_MAX) {
		/* Forget the oldest, and refuse from now on any proof not
		 * newer than it: its replay would no longer be caught. */
		if (n->timestamp_ms[n->head] > n->floor_ms)
			n->floor_ms = n->timestamp_ms[n->head];
		n->head = (n->head + 1) % RELAY_NONCES_MAX;
		n->count--;
	}
	uint32_t at = (n->head + n->count) % RELAY_NONCES_MAX;
	memcpy(n->nonce[at], nonce, BATON_RELAY_PROOF_NONCE_LEN);
	n->timestamp_ms[at] = timestamp_ms;
	n->count++;
	BATON_ASSERT(n->count <= RELAY_NONCES_MAX);
}

uint16_t session_auth_check(struct relay_server *srv,
			    const struct baton_relay_hello *h,
			    const struct baton_relay_ext *ext, char *why,
			    size_t cap)
{
	const struct relay_config *cfg = srv->cfg;
	if (cfg->n_secrets == 0)
		return 0; /* open relay: warned at start */
	const struct relay_cluster_secret *s = secret_of(cfg, &h->cluster_id);
	if (s == NULL) {
		if (cfg->allow_open_clusters || named_open(cfg, &h->cluster_id))
			return 0; /* warned at start */
		snprintf(why, cap,
			 "authentication failed: the relay has no secret for "
			 "cluster %.*s (give it --cluster-secret %.*s=FILE, or "
			 "--open-cluster %.*s for the old cluster of a release "
			 "whose nodes prove nothing: docs/relay.md)",
			 (int)h->cluster_id.len, h->cluster_id.ptr,
			 (int)h->cluster_id.len, h->cluster_id.ptr,
			 (int)h->cluster_id.len, h->cluster_id.ptr);
		return BATON_RELAY_EREFUSED;
	}
	struct baton_relay_hello_proof p;
	struct baton_relay_err err = {0};
	if (baton_relay_proof_get(ext, &p, &err) != 0) {
		snprintf(why, cap, "authentication failed: %s", err.text);
		return BATON_RELAY_EREFUSED;
	}
	if (!p.present) {
		snprintf(why, cap,
			 "authentication failed: HELLO carries no proof of "
			 "the cluster's relay secret (start the node with "
			 "--relay-secret-file FILE)");
		return BATON_RELAY_EREFUSED;
	}
	if (!relay_auth_verify(s->key, h, &p)) {
		snprintf(why, cap,
			 "authentication failed: wrong proof (the node's "
			 "--relay-secret-file differs from the relay's "
			 "--cluster-secret for this cluster)");
		return BATON_RELAY_EREFUSED;
	}
	uint64_t skew = 0;
	bool ahead = false;
	enum session_fresh fresh = session_check_fresh(
		srv, p.nonce, p.timestamp_ms, &skew, &ahead);
	if (fresh == SESSION_SKEWED) {
		snprintf(why, cap,
			 "authentication failed: the proof's time is %llu ms "
			 "%s the relay's clock, more than %llu ms "
			 "(--proof-max-skew-ms): a replay, or clocks apart",
			 (unsigned long long)skew,
			 ahead ? "ahead of" : "behind",
			 (unsigned long long)cfg->proof_skew_ms);
		return BATON_RELAY_EREFUSED;
	}
	if (fresh == SESSION_REPLAYED) {
		snprintf(why, cap,
			 "authentication failed: this proof was already used "
			 "(a replayed HELLO)");
		return BATON_RELAY_EREFUSED;
	}
	return 0;
}

enum session_fresh
session_check_fresh(struct relay_server *srv,
		    const uint8_t nonce[BATON_RELAY_PROOF_NONCE_LEN],
		    uint64_t timestamp_ms, uint64_t *skew_ms, bool *ahead)
{
	uint64_t now = session_wall_ms();
	*skew_ms = timestamp_ms > now ? timestamp_ms - now : now - timestamp_ms;
	if (ahead != NULL)
		*ahead = timestamp_ms > now;
	if (*skew_ms > srv->cfg->proof_skew_ms)
		return SESSION_SKEWED;
	/* Not older than the floor, not seen before: remembered. */
	if (timestamp_ms <= srv->nonces.floor_ms ||
	    nonce_seen(&srv->nonces, nonce))
		return SESSION_REPLAYED;
	nonce_remember(&srv->nonces, nonce, timestamp_ms);
	return SESSION_FRESH;
}
