/*
 * The replicated state machine of batond: the key-value map (src/kv) and
 * the address book (where each member listens for peers and clients). Both
 * change only by applying committed entries, so every node agrees, and both
 * go into snapshots, so a node restored from one knows every address.
 *
 * Payloads: 'K' + a kv payload (kv_encode), or 'P' + an address entry:
 * u64 id, u16 length + peer address, u16 length + client address.
 * Snapshots: "BSRV", u8 format 1, u32 entries, the entries as above, then
 * the kv snapshot.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

#define SNAP_MAGIC "BSRV"
#define SNAP_FORMAT 1u

static void put_u16(struct baton_buf *b, uint16_t v)
{
	uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	baton_buf_append(b, x, 2);
}

static void put_u64(struct baton_buf *b, uint64_t v)
{
	uint8_t x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	baton_buf_append(b, x, 8);
}

static bool get_bytes(const uint8_t **p, const uint8_t *end, void *out,
		      size_t n)
{
	if ((size_t)(end - *p) < n)
		return false;
	memcpy(out, *p, n);
	*p += n;
	return true;
}

static bool get_u16(const uint8_t **p, const uint8_t *end, uint16_t *v)
{
	uint8_t x[2];
	if (!get_bytes(p, end, x, 2))
		return false;
	*v = (uint16_t)(x[0] | x[1] << 8);
	return true;
}

static bool get_u64(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint8_t x[8];
	if (!get_bytes(p, end, x, 8))
		return false;
	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = *v << 8 | x[i];
	return true;
}

static bool get_addr(const uint8_t **p, const uint8_t *end, char *out)
{
	uint16_t len;
	if (!get_u16(p, end, &len) || len >= BATON_ADDR_MAX)
		return false;
	if (!get_bytes(p, end, out, len))
		return false;
	out[len] = '\0';
	return true;
}

static void encode_entry(const struct book_entry *e, struct baton_buf *out)
{
	put_u64(out, e->id);
	put_u16(out, (uint16_t)strlen(e->peer));
	baton_buf_append(out, e->peer, strlen(e->peer));
	put_u16(out, (uint16_t)strlen(e->client));
	baton_buf_append(out, e->client, strlen(e->client));
}

static bool decode_entry(const uint8_t **p, const uint8_t *end,
			 struct book_entry *e)
{
	return get_u64(p, end, &e->id) && get_addr(p, end, e->peer) &&
	       get_addr(p, end, e->client);
}

int machine_encode_address(const struct book_entry *e, struct baton_buf *out)
{
	if (strlen(e->peer) >= BATON_ADDR_MAX ||
	    strlen(e->client) >= BATON_ADDR_MAX)
		return BATON_EINVAL;
	uint8_t kind = PAYLOAD_ADDRESS;
	baton_buf_append(out, &kind, 1);
	encode_entry(e, out);
	return 0;
}

const struct book_entry *machine_book_find(const struct server *s,
					   baton_node_id id)
{
	for (uint32_t i = 0; i < s->book_n; i++)
		if (s->book[i].id == id)
			return &s->book[i];
	return NULL;
}

const struct book_entry *machine_address(struct server *s, baton_node_id id)
{
	const struct book_entry *e = machine_book_find(s, id);
	if (e != NULL)
		return e;
	/* Not replicated yet: a founder's addresses are known from the
	 * --bootstrap list. */
	for (uint32_t i = 0; i < s->cfg.n_founders; i++) {
		if (s->cfg.founders[i] != id)
			continue;
		static struct book_entry founder;
		founder.id = id;
		snprintf(founder.peer, sizeof founder.peer, "%s",
			 s->cfg.founder_peer[i]);
		snprintf(founder.client, sizeof founder.client, "%s",
			 s->cfg.founder_client[i]);
		return &founder;
	}
	return NULL;
}

static void book_set(struct server *s, const struct book_entry *e)
{
	struct book_entry *slot =
		(struct book_entry *)machine_book_find(s, e->id);
	if (slot == NULL) {
		if (s->book_n == sizeof s->book / sizeof s->book[0]) {
			LOG_WARN("address book full; dropping node %" PRIu64,
				 e->id);
			return;
		}
		slot = &s->book[s->book_n++];
	}
	*slot = *e;
	/* This node's own --bootstrap list says how it reaches a founder,
	 * and wins over the book (the e2e fault harness routes each peer
	 * link through its own proxy this way). */
	for (uint32_t i = 0; i < s->cfg.n_founders; i++)
		if (s->cfg.founders[i] == e->id)
			return;
	if (s->node != NULL)
		baton_node_set_peer_addr(s->node, e->id, e->peer);
}

static void apply(void *data, const struct baton_entry *e,
		  struct baton_buf *reply)
{
	struct server *s = data;
	if (e->len == 0)
		return;
	const uint8_t *p = e->buf + 1, *end = e->buf + e->len;
	if (e->buf[0] == PAYLOAD_KV) {
		struct baton_machine_version v = {1};
		int rv = kv_apply(s->kv, v, p, (size_t)(end - p), reply);
		if (rv == BATON_ENOMEM) {
			/* Skipping the entry would make this node diverge. */
			LOG_ERROR("out of memory applying entry %" PRIu64,
				  e->index);
			abort();
		}
		if (rv != 0 && reply != NULL && reply->len == 0)
			reply_error_for(reply, rv);
		return;
	}
	struct book_entry b;
	if (e->buf[0] == PAYLOAD_ADDRESS && decode_entry(&p, end, &b)) {
		book_set(s, &b);
		if (reply != NULL)
			resp_simple(reply, "OK");
		return;
	}
	/* Written by a newer release or damaged: every node skips it alike. */
	LOG_WARN("entry %" PRIu64 ": payload kind 0x%02x not understood",
		 e->index, e->buf[0]);
	if (reply != NULL)
		resp_error(reply, "ERR entry not understood by this release");
}

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

static int snapshot(void *data, struct baton_buf *out)
{
	struct server *s = data;
	baton_buf_append(out, SNAP_MAGIC, 4);
	uint8_t format = SNAP_FORMAT;
	baton_buf_append(out, &format, 1);
	uint8_t n[4] = {(uint8_t)s->book_n, (uint8_t)(s->book_n >> 8), 0, 0};
	baton_buf_append(out, n, 4);
	for (uint32_t i = 0; i < s->book_n; i++)
		encode_entry(&s->book[i], out);
	return kv_snapshot(s->kv, sink, out);
}

static int restore(void *data, const uint8_t *buf, size_t len)
{
	struct server *s = data;
	const uint8_t *p = buf, *end = buf + len;
	uint8_t head[9];
	if (!get_bytes(&p, end, head, 9) || memcmp(head, SNAP_MAGIC, 4) != 0)
		return BATON_ECORRUPT;
	if (head[4] > SNAP_FORMAT)
		return BATON_EVERSION;
	uint32_t n = (uint32_t)head[5] | (uint32_t)head[6] << 8 |
		     (uint32_t)head[7] << 16 | (uint32_t)head[8] << 24;
	if (n > sizeof s->book / sizeof s->book[0])
		return BATON_ECORRUPT;
	struct book_entry book[sizeof s->book / sizeof s->book[0]];
	for (uint32_t i = 0; i < n; i++)
		if (!decode_entry(&p, end, &book[i]))
			return BATON_ECORRUPT;
	int rv = kv_restore(s->kv, p, (size_t)(end - p));
	if (rv != 0)
		return rv;
	s->book_n = 0;
	for (uint32_t i = 0; i < n; i++)
		book_set(s, &book[i]);
	return 0;
}

static void peer_frame(void *data, baton_node_id from,
		       const struct baton_peer_frame *f)
{
	forward_on_frame(data, from, f);
}

static void leader_changed(void *data, baton_node_id leader)
{
	struct server *s = data;
	if (leader != s->leader)
		forward_fail_all(s, "leadership changed");
	s->leader = leader;
	if (leader == s->cfg.id)
		machine_publish_founders(s);
}

void machine_app(struct server *s, struct baton_node_app *app)
{
	memset(app, 0, sizeof *app);
	app->data = s;
	app->apply = apply;
	app->snapshot = snapshot;
	app->restore = restore;
	app->peer_frame = peer_frame;
	app->leader_changed = leader_changed;
}

static void published(void *data, int status, const uint8_t *reply, size_t len)
{
	(void)data;
	(void)reply;
	(void)len;
	if (status != 0)
		LOG_DEBUG("publishing an address: %s", baton_strerror(status));
}

void machine_publish_founders(struct server *s)
{
	for (uint32_t i = 0; i < s->cfg.n_founders; i++) {
		if (machine_book_find(s, s->cfg.founders[i]) != NULL)
			continue;
		struct book_entry e = {.id = s->cfg.founders[i]};
		snprintf(e.peer, sizeof e.peer, "%s", s->cfg.founder_peer[i]);
		snprintf(e.client, sizeof e.client, "%s",
			 s->cfg.founder_client[i]);
		struct baton_buf b;
		baton_buf_init(&b);
		if (machine_encode_address(&e, &b) == 0)
			baton_node_propose(s->node, b.data, b.len, published,
					   NULL);
		baton_buf_free(&b);
	}
}
