/*
 * HELLO_PROOF (docs/relay-protocol.md "Allocated tags"): the golden
 * hello_proof.bin decodes to its nonce, timestamp and MAC, the entry
 * encodes back to the same bytes, relay_auth.c computes the same MAC as
 * the document's independent computation, and any change of a field, the
 * nonce or the timestamp breaks it. Also: the relay secret file reader
 * refuses a FIFO and a directory without blocking.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baton/errors.h"
#include "golden_frames.h"
#include "relay_auth.h"

#define FRAME_CAP (1u << 16)
#define GOLDEN_TIMESTAMP_MS 1767225600000ull

static uint8_t file[FRAME_CAP];

static const uint8_t golden_mac[BATON_RELAY_PROOF_MAC_LEN] = {
	0x03, 0x34, 0x78, 0xb5, 0x11, 0xef, 0xe5, 0xe4, 0xcc, 0x67, 0xd8,
	0x03, 0x12, 0xd2, 0xe4, 0x2e, 0x76, 0x9d, 0xf1, 0xd9, 0xf1, 0xfb,
	0x53, 0xb0, 0xbf, 0x19, 0xb3, 0x32, 0xbb, 0x3a, 0xb3, 0xcb,
};

/* The golden HELLO decoded, and its proof. */
static void golden(struct baton_relay_frame *f,
		   struct baton_relay_hello_proof *p, size_t *len)
{
	*len = golden_read(BATON_RELAY_GOLDEN_DIR, "hello_proof", file,
			   sizeof file);
	cr_assert_neq(*len, SIZE_MAX, "golden/hello_proof.bin is missing");
	struct baton_relay_err err;
	cr_assert_eq(
		baton_relay_decode(file, *len, BATON_RELAY_TO_RELAY, f, &err),
		0, "%s", err.text);
	cr_assert_eq(baton_relay_proof_get(&f->ext, p, &err), 0, "%s",
		     err.text);
	cr_assert(p->present);
}

static void golden_key(uint8_t key[RELAY_AUTH_KEY_LEN])
{
	struct baton_peer_secret s = {.len = 32};
	for (uint8_t i = 0; i < 32; i++)
		s.bytes[i] = i;
	relay_auth_key(&s, key);
}

Test(proof, the_golden_entry_decodes_and_encodes_back)
{
	struct baton_relay_frame f;
	struct baton_relay_hello_proof p;
	size_t len;
	golden(&f, &p, &len);
	for (uint8_t i = 0; i < BATON_RELAY_PROOF_NONCE_LEN; i++)
		cr_assert_eq(p.nonce[i], 0xa0 + i);
	cr_assert_eq(p.timestamp_ms, GOLDEN_TIMESTAMP_MS);
	cr_assert_eq(memcmp(p.mac, golden_mac, sizeof golden_mac), 0);
	uint8_t entry[BATON_RELAY_PROOF_ENTRY_LEN];
	cr_assert_eq(baton_relay_proof_put(&p, entry), f.ext.len);
	cr_assert_eq(memcmp(entry, f.ext.ptr, f.ext.len), 0);
	/* The entry is the last thing of the frame. */
	cr_assert_eq(f.ext.ptr + f.ext.len, file + len);
}

/* hello_proof.bin is the golden "hello" frame (golden_frames.c, never
 * changed) with a HELLO_PROOF entry as its extension area: its values,
 * with the entry made from the document's nonce, time and MAC, encode to
 * exactly the file's bytes, and the file decodes to those fields. */
Test(proof, the_golden_frame_is_the_golden_hello_with_the_entry)
{
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	const struct golden_frame *hello = NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(g[i].name, "hello") == 0)
			hello = &g[i];
	cr_assert_not_null(hello);
	struct baton_relay_hello_proof p = {
		.present = true, .timestamp_ms = GOLDEN_TIMESTAMP_MS};
	for (uint8_t i = 0; i < BATON_RELAY_PROOF_NONCE_LEN; i++)
		p.nonce[i] = (uint8_t)(0xa0 + i);
	memcpy(p.mac, golden_mac, sizeof golden_mac);
	uint8_t entry[BATON_RELAY_PROOF_ENTRY_LEN];
	size_t entry_len = baton_relay_proof_put(&p, entry);
	struct baton_relay_frame want = hello->frame;
	want.ext.ptr = entry;
	want.ext.len = (uint32_t)entry_len;
	static uint8_t out[FRAME_CAP];
	size_t len;
	struct baton_relay_err err;
	cr_assert_eq(baton_relay_encode(&want, hello->dir, out, sizeof out,
					&len, &err),
		     0, "%s", err.text);
	size_t flen = golden_read(BATON_RELAY_GOLDEN_DIR, "hello_proof", file,
				  sizeof file);
	cr_assert_eq(len, flen);
	cr_assert_eq(memcmp(out, file, len), 0,
		     "hello_proof.bin is not the golden hello with the entry");
	struct baton_relay_frame f;
	cr_assert_eq(
		baton_relay_decode(file, flen, BATON_RELAY_TO_RELAY, &f, &err),
		0, "%s", err.text);
	const struct baton_relay_hello *a = &f.u.hello, *b = &want.u.hello;
	cr_assert_eq(a->node_id, b->node_id);
	cr_assert_eq(a->incarnation, b->incarnation);
	cr_assert_eq(a->cluster_id.len, b->cluster_id.len);
	cr_assert_eq(
		memcmp(a->cluster_id.ptr, b->cluster_id.ptr, a->cluster_id.len),
		0);
	cr_assert_eq(a->address.len, b->address.len);
	cr_assert_eq(memcmp(a->address.ptr, b->address.ptr, a->address.len), 0);
}

Test(proof, the_mac_is_the_documents)
{
	struct baton_relay_frame f;
	struct baton_relay_hello_proof p;
	size_t len;
	golden(&f, &p, &len);
	uint8_t key[RELAY_AUTH_KEY_LEN];
	golden_key(key);
	struct baton_relay_hello_proof mine = p;
	memset(mine.mac, 0, sizeof mine.mac);
	relay_auth_mac(key, &f.u.hello, &mine);
	cr_assert_eq(memcmp(mine.mac, golden_mac, sizeof golden_mac), 0);
	cr_assert(relay_auth_verify(key, &f.u.hello, &p));
}

Test(proof, every_field_the_nonce_and_the_time_are_covered)
{
	struct baton_relay_frame f;
	struct baton_relay_hello_proof p;
	size_t len;
	golden(&f, &p, &len);
	uint8_t key[RELAY_AUTH_KEY_LEN];
	golden_key(key);
	const struct baton_relay_hello h0 = f.u.hello;
	for (int change = 0; change < 9; change++) {
		struct baton_relay_hello h = h0;
		struct baton_relay_hello_proof q = p;
		switch (change) {
		case 0:
			h.cluster_id = RELAY_STR("olx");
			break;
		case 1:
			h.node_id = 2;
			break;
		case 2:
			h.incarnation ^= 1;
			break;
		case 3:
			h.release.major = 2;
			break;
		case 4:
			h.release.patch = 1;
			break;
		case 5:
			h.address = RELAY_STR("10.0.0.1:7002");
			break;
		case 6:
			q.nonce[15] ^= 1;
			break;
		case 7:
			q.timestamp_ms += 1;
			break;
		default:
			q.mac[0] ^= 1;
			break;
		}
		cr_assert_not(relay_auth_verify(key, &h, &q), "change %d",
			      change);
	}
	uint8_t other[RELAY_AUTH_KEY_LEN];
	memcpy(other, key, sizeof other);
	other[31] ^= 1;
	cr_assert_not(relay_auth_verify(other, &h0, &p));
}

Test(proof, an_entry_of_the_wrong_length_is_refused_and_none_is_absent)
{
	const uint8_t short_entry[] = {0x00, 0x01, 0x03, 0x00, 'a', 'b', 'c'};
	struct baton_relay_ext area = {short_entry, sizeof short_entry};
	struct baton_relay_hello_proof p;
	struct baton_relay_err err = {0};
	cr_assert_eq(baton_relay_proof_get(&area, &p, &err), BATON_ECORRUPT);
	cr_assert_eq(err.code, BATON_RELAY_EBAD_EXTENSION);
	cr_assert(strstr(err.text, "HELLO_PROOF") != NULL, "%s", err.text);
	const uint8_t other[] = {0x01, 0x00, 0x00, 0x00}; /* tag 1, empty */
	area = (struct baton_relay_ext){other, sizeof other};
	cr_assert_eq(baton_relay_proof_get(&area, &p, &err), 0);
	cr_assert_not(p.present);
}

Test(proof, fresh_proofs_verify_and_differ)
{
	struct baton_relay_frame f;
	struct baton_relay_hello_proof p, a, b;
	size_t len;
	golden(&f, &p, &len);
	uint8_t key[RELAY_AUTH_KEY_LEN];
	golden_key(key);
	cr_assert_eq(relay_auth_prove(key, &f.u.hello, 1000, &a), 0);
	cr_assert_eq(relay_auth_prove(key, &f.u.hello, 1000, &b), 0);
	cr_assert(relay_auth_verify(key, &f.u.hello, &a));
	cr_assert(relay_auth_verify(key, &f.u.hello, &b));
	cr_assert_neq(memcmp(a.nonce, b.nonce, sizeof a.nonce), 0);
}

Test(proof, a_secret_file_must_be_a_regular_file, .timeout = 10)
{
	char dir[] = "/tmp/relay-proof-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char fifo[64], err[1536];
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0, "%s", strerror(errno));
	struct baton_peer_secret s;
	/* Would block in open() if it were opened. */
	cr_assert_eq(relay_secret_load(fifo, &s, err, sizeof err),
		     BATON_EINVAL);
	cr_assert(strstr(err, "not a regular file") != NULL, "%s", err);
	cr_assert_eq(relay_secret_load(dir, &s, err, sizeof err), BATON_EINVAL);
	cr_assert(strstr(err, "directory") != NULL, "%s", err);
	char good[64];
	snprintf(good, sizeof good, "%s/secret", dir);
	int fd = open(good, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
	close(fd);
	cr_assert_eq(relay_secret_load(good, &s, err, sizeof err), 0, "%s",
		     err);
	cr_assert_eq(s.len, 32u);
	unlink(good);
	unlink(fifo);
	rmdir(dir);
}
