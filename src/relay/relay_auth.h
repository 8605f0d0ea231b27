/*
 * Proof of a cluster's relay secret in HELLO (docs/relay-protocol.md
 * "Allocated tags", HELLO_PROOF; docs/relay-server.md "Authentication"):
 * the key derived from the secret, the proof a node puts in its HELLO and
 * the relay's check of its MAC. HMAC-SHA-256 and the random nonce come
 * from OpenSSL's libcrypto, as for the peer handshake
 * (src/io/transport_auth.c, whose secret-file reader this reuses).
 */
#ifndef BATON_RELAY_AUTH_H
#define BATON_RELAY_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"
#include "transport.h"

#define RELAY_AUTH_KEY_LEN 32u

/* Read a relay secret file: a regular file (a FIFO, a directory or a
 * device is refused before it is opened, so that nothing blocks), then
 * the rules of baton_peer_secret_load() (the owner's only, 16 to 4096
 * bytes). Returns 0, or BATON_EINVAL / BATON_ETOOBIG / BATON_EIO with a
 * message in err naming the file; *out is wiped on error. */
int relay_secret_load(const char *path, struct baton_peer_secret *out,
		      char *err, size_t cap);

/* The key of HELLO proofs for a secret: HMAC-SHA-256(secret, a fixed
 * label), so that the same bytes used elsewhere give unrelated MACs. */
void relay_auth_key(const struct baton_peer_secret *secret,
		    uint8_t key[RELAY_AUTH_KEY_LEN]);

/* The MAC of proof p (its nonce and timestamp) for HELLO h into p->mac. */
void relay_auth_mac(const uint8_t key[RELAY_AUTH_KEY_LEN],
		    const struct baton_relay_hello *h,
		    struct baton_relay_hello_proof *p);

/* A fresh proof for h at now_ms (ms since the epoch): a random nonce and
 * the MAC. Returns 0, or BATON_EIO when no random bytes could be had. */
int relay_auth_prove(const uint8_t key[RELAY_AUTH_KEY_LEN],
		     const struct baton_relay_hello *h, uint64_t now_ms,
		     struct baton_relay_hello_proof *p);

/* Whether p's MAC is the one key gives for h (compared in constant
 * time). Freshness and replays are the caller's to check. */
bool relay_auth_verify(const uint8_t key[RELAY_AUTH_KEY_LEN],
		       const struct baton_relay_hello *h,
		       const struct baton_relay_hello_proof *p);

/* Operators' requests (docs/relay-protocol.md ADMIN_REQUEST): the key of
 * the relay's admin secret (--admin-secret-file; another label than the
 * HELLO proofs', so the two never verify each other), a fresh request for
 * op at now_ms (0, or BATON_EIO without random bytes), and its check. */
void relay_admin_key(const struct baton_peer_secret *secret,
		     uint8_t key[RELAY_AUTH_KEY_LEN]);
int relay_admin_prove(const uint8_t key[RELAY_AUTH_KEY_LEN], uint8_t op,
		      uint64_t relay_incarnation, uint64_t now_ms,
		      struct baton_relay_admin_request *r);
bool relay_admin_verify(const uint8_t key[RELAY_AUTH_KEY_LEN],
			const struct baton_relay_admin_request *r);

#endif /* BATON_RELAY_AUTH_H */
