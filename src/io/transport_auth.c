/*
 * Peer authentication's cryptography (transport.h, docs/peer-protocol.md,
 * "Peer authentication"): the peer secret read from its file, the nonces,
 * the HMAC-SHA-256 proofs of the handshake and the SHA-256 proof a
 * forwarded write carries of its client's password. Everything comes from
 * OpenSSL's libcrypto; nothing here is home-made cryptography.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baton/assert.h"
#include "le.h"
#include "transport_internal.h"

_Static_assert(BATON_PEER_AUTH_MAC_LEN == 32 &&
		       BATON_PEER_CLIENT_AUTH_LEN == 32,
	       "HMAC-SHA-256 and SHA-256 give 32 bytes");

#define MAKE_ONE                                                               \
	"make one with: head -c 32 /dev/urandom > %s; chmod 600 %s (the same " \
	"file on every node)"

/* The file's status: a regular file that only its owner may touch. */
static int check_file(int fd, const char *path, const char *what, char *err,
		      size_t cap)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(err, cap, "cannot read the %s file %s: %s", what, path,
			 strerror(errno));
		return BATON_EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, cap, "the %s file %s is not a regular file", what,
			 path);
		return BATON_EINVAL;
	}
	if ((st.st_mode & 077) != 0) {
		snprintf(err, cap,
			 "the %s file %s can be read or written by "
			 "group or others (mode %04o); make it the owner's "
			 "only: chmod 600 %s",
			 what, path, (unsigned)(st.st_mode & 07777), path);
		return BATON_EINVAL;
	}
	if (st.st_size == 0) {
		snprintf(err, cap, "the %s file %s is empty; " MAKE_ONE, what,
			 path, path, path);
		return BATON_EINVAL;
	}
	if (st.st_size > (off_t)BATON_PEER_SECRET_MAX) {
		snprintf(err, cap,
			 "the %s file %s holds %lld bytes, more than "
			 "the %u a secret may have",
			 what, path, (long long)st.st_size,
			 BATON_PEER_SECRET_MAX);
		return BATON_ETOOBIG;
	}
	return 0;
}

int baton_peer_secret_load(const char *path, struct baton_peer_secret *out,
			   char *err, size_t cap)
{
	return baton_secret_file_load(path, "peer secret", out, err, cap);
}

int baton_secret_file_load(const char *path, const char *what,
			   struct baton_peer_secret *out, char *err, size_t cap)
{
	BATON_ASSERT(path != NULL && out != NULL && err != NULL);
	memset(out, 0, sizeof *out);
	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	 * writer, and batond would hang at start instead of refusing it
	 * (check_file). It changes nothing for the regular file read. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, cap, "cannot open the %s file %s: %s", what, path,
			 strerror(errno));
		return BATON_EIO;
	}
	int rv = check_file(fd, path, what, err, cap);
	while (rv == 0) {
		ssize_t n = read(fd, out->bytes + out->len,
				 sizeof out->bytes - out->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, cap, "cannot read the %s file %s: %s",
				 what, path, strerror(errno));
			rv = BATON_EIO;
		}
		if (n <= 0)
			break;
		out->len += (size_t)n;
	}
	close(fd);
	if (rv == 0 && out->len < BATON_PEER_SECRET_MIN) {
		snprintf(err, cap,
			 "the %s file %s holds %zu bytes; a "
			 "secret needs at least %u: " MAKE_ONE,
			 what, path, out->len, BATON_PEER_SECRET_MIN, path,
			 path);
		rv = BATON_EINVAL;
	}
	if (rv != 0)
		baton_peer_secret_wipe(out);
	return rv;
}

void baton_peer_secret_wipe(struct baton_peer_secret *s)
{
	OPENSSL_cleanse(s, sizeof *s);
}

void baton_client_auth_proof(const char *password,
			     uint8_t out[BATON_PEER_CLIENT_AUTH_LEN])
{
	BATON_ASSERT(password != NULL && out != NULL);
	/* Labelled, so that the proof is not the bare SHA-256 of the
	 * password (one of the tables built for those). */
	static const char label[] = "baton client auth v1";
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int len = 0;
	int ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
		 EVP_DigestUpdate(ctx, label, sizeof label) &&
		 EVP_DigestUpdate(ctx, password, strlen(password)) &&
		 EVP_DigestFinal_ex(ctx, out, &len);
	EVP_MD_CTX_free(ctx);
	BATON_ASSERT(ok && len == BATON_PEER_CLIENT_AUTH_LEN);
}

bool baton_equal_secret(const uint8_t *a, const uint8_t *b, size_t len)
{
	BATON_ASSERT(a != NULL && b != NULL);
	return CRYPTO_memcmp(a, b, len) == 0;
}

int baton__transport_nonce(uint8_t out[BATON_PEER_AUTH_NONCE_LEN])
{
	BATON_ASSERT(out != NULL);
	return RAND_bytes(out, BATON_PEER_AUTH_NONCE_LEN) == 1 ? 0 : BATON_EIO;
}

void baton__transport_auth_mac(const struct baton_peer_secret *secret,
			       enum baton__auth_role role,
			       const char *cluster_id, baton_node_id dialler,
			       baton_node_id acceptor,
			       const uint8_t nonce_dialler[],
			       const uint8_t nonce_acceptor[],
			       uint8_t out[BATON_PEER_AUTH_MAC_LEN])
{
	BATON_ASSERT(secret != NULL && secret->len >= BATON_PEER_SECRET_MIN);
	BATON_ASSERT(role == BATON__AUTH_DIALLER ||
		     role == BATON__AUTH_ACCEPTOR);
	/* label NUL | cluster id length (1 byte) | cluster id | dialler id
	 * (le64) | acceptor id (le64) | dialler nonce | acceptor nonce */
	static const char dialler_label[] = "baton peer auth v1 dialler";
	static const char acceptor_label[] = "baton peer auth v1 acceptor";
	const char *label =
		role == BATON__AUTH_DIALLER ? dialler_label : acceptor_label;
	uint8_t msg[sizeof acceptor_label + 1 + BATON_PEER_CLUSTER_ID_MAX + 16 +
		    2 * BATON_PEER_AUTH_NONCE_LEN];
	size_t cid_len = strlen(cluster_id);
	BATON_ASSERT(cid_len <= BATON_PEER_CLUSTER_ID_MAX);
	size_t n = strlen(label) + 1;
	memcpy(msg, label, n);
	msg[n++] = (uint8_t)cid_len;
	memcpy(msg + n, cluster_id, cid_len);
	n += cid_len;
	baton_le_put_u64(msg + n, dialler);
	baton_le_put_u64(msg + n + 8, acceptor);
	n += 16;
	memcpy(msg + n, nonce_dialler, BATON_PEER_AUTH_NONCE_LEN);
	memcpy(msg + n + BATON_PEER_AUTH_NONCE_LEN, nonce_acceptor,
	       BATON_PEER_AUTH_NONCE_LEN);
	n += 2 * BATON_PEER_AUTH_NONCE_LEN;
	BATON_ASSERT(n <= sizeof msg);
	unsigned int len = 0;
	uint8_t *mac = HMAC(EVP_sha256(), secret->bytes, (int)secret->len, msg,
			    n, out, &len);
	BATON_ASSERT(mac != NULL && len == BATON_PEER_AUTH_MAC_LEN);
}
