/*
 * HELLO proofs (auth.h): the key, the MAC, the nonce. Nothing here is
 * home-made cryptography: HMAC-SHA-256 and RAND_bytes from libcrypto.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "relay_auth.h"
#include "baton/assert.h"
#include "baton/errors.h"

_Static_assert(RELAY_AUTH_KEY_LEN == BATON_RELAY_PROOF_MAC_LEN,
	       "HMAC-SHA-256 gives the key and the MAC, 32 bytes each");

int relay_secret_load(const char *path, struct baton_peer_secret *out,
		      char *err, size_t cap)
{
	BATON_ASSERT(path != NULL && out != NULL && err != NULL);
	memset(out, 0, sizeof *out);
	/* Checked before open(): opening a FIFO for reading blocks until a
	 * writer comes, which would hang the start. */
	struct stat st;
	if (stat(path, &st) != 0) {
		snprintf(err, cap, "cannot read the relay secret file %s: %s",
			 path, strerror(errno));
		return BATON_EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, cap,
			 "the relay secret file %s is not a regular file (a "
			 "%s): make one with: head -c 32 /dev/urandom > FILE; "
			 "chmod 600 FILE",
			 path,
			 S_ISDIR(st.st_mode)	? "directory"
			 : S_ISFIFO(st.st_mode) ? "FIFO"
			 : S_ISSOCK(st.st_mode) ? "socket"
						: "device");
		return BATON_EINVAL;
	}
	return baton_peer_secret_load(path, out, err, cap);
}

static void hmac(const uint8_t *key, size_t key_len, const uint8_t *msg,
		 size_t len, uint8_t out[BATON_RELAY_PROOF_MAC_LEN])
{
	unsigned int n = 0;
	uint8_t *mac = HMAC(EVP_sha256(), key, (int)key_len, msg, len, out, &n);
	BATON_ASSERT(mac != NULL && n == BATON_RELAY_PROOF_MAC_LEN);
}

void relay_auth_key(const struct baton_peer_secret *secret,
		    uint8_t key[RELAY_AUTH_KEY_LEN])
{
	BATON_ASSERT(secret != NULL && secret->len >= BATON_PEER_SECRET_MIN &&
		     secret->len <= BATON_PEER_SECRET_MAX);
	static const char label[] = "baton relay key v1";
	hmac(secret->bytes, secret->len, (const uint8_t *)label, sizeof label,
	     key);
}

void relay_auth_mac(const uint8_t key[RELAY_AUTH_KEY_LEN],
		    const struct baton_relay_hello *h,
		    struct baton_relay_hello_proof *p)
{
	uint8_t msg[BATON_RELAY_PROOF_MESSAGE_MAX];
	size_t n = baton_relay_proof_message(h, p, msg, sizeof msg);
	hmac(key, RELAY_AUTH_KEY_LEN, msg, n, p->mac);
}

int relay_auth_prove(const uint8_t key[RELAY_AUTH_KEY_LEN],
		     const struct baton_relay_hello *h, uint64_t now_ms,
		     struct baton_relay_hello_proof *p)
{
	memset(p, 0, sizeof *p);
	if (RAND_bytes(p->nonce, BATON_RELAY_PROOF_NONCE_LEN) != 1)
		return BATON_EIO;
	p->present = true;
	p->timestamp_ms = now_ms;
	relay_auth_mac(key, h, p);
	return 0;
}

bool relay_auth_verify(const uint8_t key[RELAY_AUTH_KEY_LEN],
		       const struct baton_relay_hello *h,
		       const struct baton_relay_hello_proof *p)
{
	struct baton_relay_hello_proof want = *p;
	relay_auth_mac(key, h, &want);
	return CRYPTO_memcmp(want.mac, p->mac, BATON_RELAY_PROOF_MAC_LEN) == 0;
}

void relay_admin_key(const struct baton_peer_secret *secret,
		     uint8_t key[RELAY_AUTH_KEY_LEN])
{
	BATON_ASSERT(secret != NULL && secret->len >= BATON_PEER_SECRET_MIN &&
		     secret->len <= BATON_PEER_SECRET_MAX);
	static const char label[] = "baton relay admin key v1";
	hmac(secret->bytes, secret->len, (const uint8_t *)label, sizeof label,
	     key);
}

static void admin_mac(const uint8_t key[RELAY_AUTH_KEY_LEN],
		      const struct baton_relay_admin_request *r,
		      uint8_t out[BATON_RELAY_PROOF_MAC_LEN])
{
	uint8_t msg[BATON_RELAY_ADMIN_MESSAGE_MAX];
	size_t n = baton_relay_admin_message(r, msg, sizeof msg);
	hmac(key, RELAY_AUTH_KEY_LEN, msg, n, out);
}

int relay_admin_prove(const uint8_t key[RELAY_AUTH_KEY_LEN], uint8_t op,
		      uint64_t relay_incarnation, uint64_t now_ms,
		      struct baton_relay_admin_request *r)
{
	memset(r, 0, sizeof *r);
	if (RAND_bytes(r->nonce, BATON_RELAY_PROOF_NONCE_LEN) != 1)
		return BATON_EIO;
	r->present = true;
	r->op = op;
	r->relay_incarnation = relay_incarnation;
	r->timestamp_ms = now_ms;
	admin_mac(key, r, r->mac);
	return 0;
}

bool relay_admin_verify(const uint8_t key[RELAY_AUTH_KEY_LEN],
			const struct baton_relay_admin_request *r)
{
	uint8_t want[BATON_RELAY_PROOF_MAC_LEN];
	admin_mac(key, r, want);
	return CRYPTO_memcmp(want, r->mac, BATON_RELAY_PROOF_MAC_LEN) == 0;
}
