/*
 * The migration's messages, carried as relay DATA payloads between the two
 * clusters (docs/relay.md, "Messages"), sealed end to end: the relay, or
 * anyone who registers at it, can neither read the data stream nor forge,
 * alter or replay a message (the receiver checks the sequence number,
 * migration.c). Not frozen like the relay protocol, only for the two
 * releases of one migration: a receiver refuses a format, a type or a
 * shape it does not know.
 *
 * Format 2, little-endian:
 *   u8  magic 0xBA, u8 format 2, u8 type
 *   u8  sender cluster length (1..255), the sender cluster id
 *   u8  receiver cluster length (1..255), the receiver cluster id
 *   u64 sender node id, u64 receiver node id (0: every node of the
 *   receiver cluster), u64 session, u64 sequence, u64 applied,
 *   u64 index, u64 value
 *   12 bytes nonce, u32 data length (<= MIG_DATA_MAX)
 *   the data encrypted (as many bytes), 16 bytes tag
 * ChaCha20-Poly1305 under the key HKDF-SHA-256(secret, salt "baton
 * migration 2", info "msg" | sender | receiver), with every byte before
 * the ciphertext as associated data. Keys come from OpenSSL's libcrypto;
 * nothing here is home-made cryptography.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "le.h"
#include "migration.h"

/* magic, format, type, two cluster lengths (the ids apart), seven u64,
 * the nonce, the data length. */
#define HEAD_FIXED_BYTES (5u + 7u * 8u + MIG_NONCE_BYTES + 4u)
#define HEAD_MAX_BYTES (HEAD_FIXED_BYTES + 2u * MIG_CLUSTER_MAX)

enum key_purpose {
	PURPOSE_MSG = 1,   /* sealing messages */
	PURPOSE_PROXY = 2, /* a node's proof to a proxy (proxy.c) */
};

const char *migration_msg_name(uint8_t type)
{
	static const char *const names[] = {
		NULL,	   "EXPORT_REQ", "BEGIN",     "CHUNK",
		"END",	   "ENTRY",	 "HEAD",      "ACK",
		"HANDOFF", "FENCED",	 "AUTHORITY", "ENTRY_PART",
	};
	_Static_assert(sizeof names / sizeof names[0] == MIG_MSG_TYPE_MAX + 1,
		       "one name per type");
	return type >= 1 && type <= MIG_MSG_TYPE_MAX ? names[type] : "UNKNOWN";
}

/* ---- keys ------------------------------------------------------------ */

int migration_keys_init(struct migration_keys *k, const uint8_t *secret,
			size_t len)
{
	memset(k, 0, sizeof *k);
	if (len == 0 || len > MIG_SECRET_BYTES_MAX || secret == NULL)
		return BATON_EINVAL;
	memcpy(k->secret, secret, len);
	k->secret_len = len;
	return 0;
}

void migration_keys_wipe(struct migration_keys *k)
{
	OPENSSL_cleanse(k, sizeof *k);
}

static bool cluster_ok(const char *id)
{
	size_t n = strlen(id);
	return n >= 1 && n <= MIG_CLUSTER_MAX;
}

/* HKDF-SHA-256 of the secret for (purpose, from, to): 0 or BATON_EIO. */
static int derive(const struct migration_keys *k, uint8_t purpose,
		  const char *from, const char *to, uint8_t out[MIG_KEY_BYTES])
{
	static const char salt[] = "baton migration 2";
	uint8_t info[3 + 2 + 2 * MIG_CLUSTER_MAX];
	size_t nf = strlen(from), nt = strlen(to), n = 0;
	BATON_ASSERT(nf <= MIG_CLUSTER_MAX && nt <= MIG_CLUSTER_MAX);
	memcpy(info, purpose == PURPOSE_MSG ? "msg" : "prx", 3);
	n = 3;
	info[n++] = (uint8_t)nf;
	memcpy(info + n, from, nf);
	n += nf;
	info[n++] = (uint8_t)nt;
	memcpy(info + n, to, nt);
	n += nt;
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t out_len = MIG_KEY_BYTES;
	int ok = ctx != NULL && EVP_PKEY_derive_init(ctx) > 0 &&
		 EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_salt(ctx, (const uint8_t *)salt,
					     (int)(sizeof salt - 1)) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_key(ctx, k->secret,
					    (int)k->secret_len) > 0 &&
		 EVP_PKEY_CTX_add1_hkdf_info(ctx, info, (int)n) > 0 &&
		 EVP_PKEY_derive(ctx, out, &out_len) > 0 &&
		 out_len == MIG_KEY_BYTES;
	EVP_PKEY_CTX_free(ctx);
	return ok ? 0 : BATON_EIO;
}

/* The key for (purpose, from, to), from the cache or derived. */
static const uint8_t *key_for(struct migration_keys *k, uint8_t purpose,
			      const char *from, const char *to)
{
	BATON_ASSERT(k->secret_len > 0);
	for (uint32_t i = 0; i < MIG_KEYS_CACHED; i++)
		if (k->cache[i].used && k->cache[i].purpose == purpose &&
		    strcmp(k->cache[i].from, from) == 0 &&
		    strcmp(k->cache[i].to, to) == 0)
			return k->cache[i].key;
	uint32_t i = k->next++ % MIG_KEYS_CACHED;
	k->cache[i].used = false;
	if (derive(k, purpose, from, to, k->cache[i].key) != 0)
		return NULL;
	k->cache[i].used = true;
	k->cache[i].purpose = purpose;
	memcpy(k->cache[i].from, from, strlen(from) + 1);
	memcpy(k->cache[i].to, to, strlen(to) + 1);
	return k->cache[i].key;
}

/* ---- sealing ----------------------------------------------------------- */

/* The header of m with this nonce: its length. */
static size_t put_head(const struct migration_msg *m,
		       const uint8_t nonce[MIG_NONCE_BYTES],
		       uint8_t head[HEAD_MAX_BYTES])
{
	size_t nf = strlen(m->from_cluster), nt = strlen(m->to_cluster);
	size_t n = 0;
	head[n++] = MIG_MAGIC;
	head[n++] = MIG_FORMAT;
	head[n++] = m->type;
	head[n++] = (uint8_t)nf;
	memcpy(head + n, m->from_cluster, nf);
	n += nf;
	head[n++] = (uint8_t)nt;
	memcpy(head + n, m->to_cluster, nt);
	n += nt;
	const uint64_t fields[7] = {m->from_node, m->to_node, m->session,
				    m->seq,	  m->applied, m->index,
				    m->value};
	for (int i = 0; i < 7; i++, n += 8)
		baton_le_put_u64(head + n, fields[i]);
	memcpy(head + n, nonce, MIG_NONCE_BYTES);
	n += MIG_NONCE_BYTES;
	baton_le_put_u32(head + n, (uint32_t)m->len);
	n += 4;
	BATON_ASSERT(n == HEAD_FIXED_BYTES + nf + nt);
	return n;
}

/* ChaCha20-Poly1305 over [in, in + len) into out (as many bytes), with
 * aad; the tag is written to (encrypt) or checked against (decrypt) tag.
 * 0, or BATON_EINVAL when a decryption does not authenticate, BATON_EIO
 * when the cipher failed. */
static int aead(bool encrypt, const uint8_t key[MIG_KEY_BYTES],
		const uint8_t nonce[MIG_NONCE_BYTES], const uint8_t *aad,
		size_t aad_len, const uint8_t *in, size_t len, uint8_t *out,
		uint8_t tag[MIG_TAG_BYTES])
{
	BATON_ASSERT(len <= MIG_DATA_MAX && aad_len <= HEAD_MAX_BYTES);
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL)
		return BATON_EIO;
	int n = 0, ok = EVP_CipherInit_ex(ctx, EVP_chacha20_poly1305(), NULL,
					  NULL, NULL, encrypt ? 1 : 0) == 1 &&
			EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN,
					    MIG_NONCE_BYTES, NULL) == 1 &&
			EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce,
					  encrypt ? 1 : 0) == 1;
	if (ok && !encrypt)
		ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG,
					 MIG_TAG_BYTES, tag) == 1;
	ok = ok && EVP_CipherUpdate(ctx, NULL, &n, aad, (int)aad_len) == 1;
	if (ok && len > 0)
		ok = EVP_CipherUpdate(ctx, out, &n, in, (int)len) == 1 &&
		     (size_t)n == len;
	int rv = ok ? 0 : BATON_EIO;
	if (ok && EVP_CipherFinal_ex(ctx, out + len, &n) != 1)
		rv = encrypt ? BATON_EIO : BATON_EINVAL;
	if (rv == 0 && encrypt &&
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, MIG_TAG_BYTES,
				tag) != 1)
		rv = BATON_EIO;
	EVP_CIPHER_CTX_free(ctx);
	return rv;
}

int migration_msg_seal_nonce(struct migration_keys *k,
			     const struct migration_msg *m,
			     const uint8_t nonce[MIG_NONCE_BYTES],
			     struct baton_buf *out)
{
	BATON_ASSERT(m->type >= 1 && m->type <= MIG_MSG_TYPE_MAX);
	if (m->len > MIG_DATA_MAX || (m->len > 0 && m->data == NULL) ||
	    !cluster_ok(m->from_cluster) || !cluster_ok(m->to_cluster))
		return BATON_EINVAL;
	const uint8_t *key =
		key_for(k, PURPOSE_MSG, m->from_cluster, m->to_cluster);
	if (key == NULL)
		return BATON_EIO;
	uint8_t head[HEAD_MAX_BYTES];
	size_t head_len = put_head(m, nonce, head);
	size_t start = out->len;
	if (baton_buf_reserve(out, head_len + m->len + MIG_TAG_BYTES) != 0)
		return BATON_ENOMEM;
	int rv = baton_buf_append(out, head, head_len);
	BATON_ASSERT(rv == 0); /* reserved */
	uint8_t *ct = out->data + out->len;
	rv = aead(true, key, nonce, head, head_len, m->data, m->len, ct,
		  ct + m->len);
	if (rv != 0) {
		out->len = start;
		return rv;
	}
	out->len += m->len + MIG_TAG_BYTES;
	return 0;
}

int migration_msg_seal(struct migration_keys *k, const struct migration_msg *m,
		       struct baton_buf *out)
{
	uint8_t nonce[MIG_NONCE_BYTES];
	if (RAND_bytes(nonce, sizeof nonce) != 1)
		return BATON_EIO;
	return migration_msg_seal_nonce(k, m, nonce, out);
}

/* ---- opening ----------------------------------------------------------- */

static bool read_cluster(struct baton_le_reader *r,
			 char out[MIG_CLUSTER_MAX + 1])
{
	const uint8_t *n, *id;
	if (!baton_le_read_bytes(r, 1, &n) || n[0] == 0 ||
	    !baton_le_read_bytes(r, n[0], &id) || memchr(id, 0, n[0]) != NULL)
		return false;
	memcpy(out, id, n[0]);
	out[n[0]] = '\0';
	return true;
}

/* The header's length is *head_len; the data is the ciphertext. */
static int parse(const uint8_t *buf, size_t len, struct migration_msg *m,
		 const uint8_t **nonce, size_t *head_len)
{
	struct baton_le_reader r = baton_le_reader(buf, len);
	const uint8_t *fixed;
	uint32_t data_len;
	memset(m, 0, sizeof *m);
	if (!baton_le_read_bytes(&r, 3, &fixed) || fixed[0] != MIG_MAGIC)
		return BATON_ECORRUPT;
	if (fixed[1] != MIG_FORMAT)
		return BATON_EVERSION;
	m->type = fixed[2];
	if (m->type < 1 || m->type > MIG_MSG_TYPE_MAX ||
	    !read_cluster(&r, m->from_cluster) ||
	    !read_cluster(&r, m->to_cluster) ||
	    !baton_le_read_u64(&r, &m->from_node) ||
	    !baton_le_read_u64(&r, &m->to_node) ||
	    !baton_le_read_u64(&r, &m->session) ||
	    !baton_le_read_u64(&r, &m->seq) ||
	    !baton_le_read_u64(&r, &m->applied) ||
	    !baton_le_read_u64(&r, &m->index) ||
	    !baton_le_read_u64(&r, &m->value) ||
	    !baton_le_read_bytes(&r, MIG_NONCE_BYTES, nonce) ||
	    !baton_le_read_u32(&r, &data_len) || data_len > MIG_DATA_MAX ||
	    baton_le_left(&r) != (size_t)data_len + MIG_TAG_BYTES)
		return BATON_ECORRUPT;
	*head_len = len - baton_le_left(&r);
	m->len = data_len;
	m->data = data_len > 0 ? buf + *head_len : NULL;
	return 0;
}

/* Shapes that authenticate but make no sense. */
static bool shape_ok(const struct migration_msg *m)
{
	/* Cluster ids are what the relay allows: 1 to 255 bytes. */
	if (m->type == MIG_EXPORT_REQ || m->type == MIG_AUTHORITY)
		return m->len >= 1 && m->len <= MIG_CLUSTER_MAX &&
		       memchr(m->data, 0, m->len) == NULL;
	return true;
}

int migration_msg_parse(const uint8_t *buf, size_t len,
			struct migration_msg *out)
{
	const uint8_t *nonce;
	size_t head_len;
	return parse(buf, len, out, &nonce, &head_len);
}

int migration_msg_open(struct migration_keys *k, const uint8_t *buf, size_t len,
		       struct migration_msg *out, struct baton_buf *plain)
{
	const uint8_t *nonce;
	size_t head_len;
	int rv = parse(buf, len, out, &nonce, &head_len);
	if (rv != 0)
		return rv;
	baton_buf_reset(plain);
	const uint8_t *key =
		key_for(k, PURPOSE_MSG, out->from_cluster, out->to_cluster);
	if (key == NULL)
		return BATON_EIO;
	/* One byte more than the data, so an empty message has room too. */
	if (baton_buf_reserve(plain, out->len + 1) != 0)
		return BATON_ENOMEM;
	uint8_t tag[MIG_TAG_BYTES];
	memcpy(tag, buf + head_len + out->len, MIG_TAG_BYTES);
	rv = aead(false, key, nonce, buf, head_len, buf + head_len, out->len,
		  plain->data, tag);
	if (rv != 0) {
		OPENSSL_cleanse(plain->data, out->len);
		out->data = NULL;
		out->len = 0;
		return rv;
	}
	plain->len = out->len;
	out->data = out->len > 0 ? plain->data : NULL;
	if (!shape_ok(out))
		return BATON_ECORRUPT;
	return 0;
}

/* ---- replays ------------------------------------------------------------ */

bool migration_replay_check(struct migration_replay *t,
			    const struct migration_msg *m)
{
	uint32_t i = 0;
	bool multicast = m->to_node == 0;
	while (i < t->n &&
	       !(t->senders[i].node == m->from_node &&
		 t->senders[i].multicast == multicast &&
		 strcmp(t->senders[i].cluster, m->from_cluster) == 0))
		i++;
	if (i == t->n) {
		if (t->n == MIG_SENDERS_MAX) {
			memmove(t->senders, t->senders + 1,
				(MIG_SENDERS_MAX - 1) * sizeof t->senders[0]);
			t->n--;
		}
		i = t->n++;
		memcpy(t->senders[i].cluster, m->from_cluster,
		       sizeof t->senders[i].cluster);
		t->senders[i].node = m->from_node;
		t->senders[i].multicast = multicast;
		t->senders[i].last_seq = 0;
	}
	if (m->seq <= t->senders[i].last_seq)
		return false;
	t->senders[i].last_seq = m->seq;
	return true;
}

/* ---- the proxy's proof --------------------------------------------------- */

int migration_proxy_proof(struct migration_keys *k, const char *prover_cluster,
			  const char *asker_cluster, const uint8_t *nonce,
			  size_t nonce_len, const char *address,
			  uint8_t out[MIG_PROOF_BYTES])
{
	if (!cluster_ok(prover_cluster) || !cluster_ok(asker_cluster))
		return BATON_EINVAL;
	const uint8_t *key =
		key_for(k, PURPOSE_PROXY, prover_cluster, asker_cluster);
	if (key == NULL)
		return BATON_EIO;
	/* HMAC(key, u32 nonce length | nonce | address): the address the
	 * asker dialled, so a proof a node gave at its own address is no use
	 * to a stranger at another one. */
	uint8_t n[4];
	baton_le_put_u32(n, (uint32_t)nonce_len);
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string("digest", digest, 0),
		OSSL_PARAM_construct_end(),
	};
	size_t out_len = 0;
	int ok = ctx != NULL &&
		 EVP_MAC_init(ctx, key, MIG_KEY_BYTES, params) == 1 &&
		 EVP_MAC_update(ctx, n, sizeof n) == 1 &&
		 EVP_MAC_update(ctx, nonce, nonce_len) == 1 &&
		 EVP_MAC_update(ctx, (const uint8_t *)address,
				strlen(address)) == 1 &&
		 EVP_MAC_final(ctx, out, &out_len, MIG_PROOF_BYTES) == 1 &&
		 out_len == MIG_PROOF_BYTES;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return ok ? 0 : BATON_EIO;
}
