/*
 * batond's state machine behind struct baton_machine (see machine.h): the
 * payload kinds, the address book and the snapshot wrapper around the kv
 * snapshot.
 */
#include "machine.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "le.h"
#include "resp.h"

/* The snapshot header: magic, format, entry count. */
#define SNAP_HEAD_BYTES 9u

/* Record why a call failed (errmsg) and return code. */
__attribute__((format(printf, 3, 4))) static int
refuse(struct server_machine *m, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->err, sizeof m->err, fmt, ap);
	va_end(ap);
	BATON_ASSERT(code < 0);
	return code;
}

static int version_check(struct server_machine *m,
			 struct baton_machine_version v)
{
	if (v.value >= KV_MACHINE_VERSION_MIN &&
	    v.value <= KV_MACHINE_VERSION_MAX)
		return 0;
	return refuse(m, BATON_EVERSION,
		      "machine version %u is not one this release implements "
		      "(%u..%u)",
		      v.value, KV_MACHINE_VERSION_MIN, KV_MACHINE_VERSION_MAX);
}

/* ---- the address entry --------------------------------------------------- */

static int put_u16(struct baton_buf *b, uint16_t v)
{
	uint8_t x[2];
	baton_le_put_u16(x, v);
	return baton_buf_append(b, x, sizeof x);
}

static int put_address(struct baton_buf *b, const char *a)
{
	size_t len = strlen(a);
	BATON_ASSERT(len < SERVER_ADDR_MAX);
	int rv = put_u16(b, (uint16_t)len);
	return rv != 0 ? rv : baton_buf_append(b, a, len);
}

/* The body of an address entry (no kind byte); out unchanged on error. */
static int encode_entry(const struct book_entry *e, struct baton_buf *out)
{
	size_t mark = out->len;
	uint8_t id[8];
	baton_le_put_u64(id, e->id);
	int rv = baton_buf_append(out, id, sizeof id);
	if (rv == 0)
		rv = put_address(out, e->peer);
	if (rv == 0)
		rv = put_address(out, e->client);
	if (rv != 0)
		out->len = mark;
	return rv;
}

static bool get_address(struct baton_le_reader *r, char *out)
{
	uint16_t len;
	const uint8_t *p;
	if (!baton_le_read_u16(r, &len) || len >= SERVER_ADDR_MAX ||
	    !baton_le_read_bytes(r, len, &p))
		return false;
	memcpy(out, p, len);
	out[len] = '\0';
	return true;
}

static bool decode_entry(struct baton_le_reader *r, struct book_entry *e)
{
	memset(e, 0, sizeof *e);
	return baton_le_read_u64(r, &e->id) && get_address(r, e->peer) &&
	       get_address(r, e->client);
}

int server_machine_encode_address(const struct book_entry *e,
				  struct baton_buf *out)
{
	if (strnlen(e->peer, SERVER_ADDR_MAX) >= SERVER_ADDR_MAX ||
	    strnlen(e->client, SERVER_ADDR_MAX) >= SERVER_ADDR_MAX)
		return BATON_EINVAL;
	size_t mark = out->len;
	uint8_t kind = PAYLOAD_ADDRESS;
	int rv = baton_buf_append(out, &kind, 1);
	if (rv == 0)
		rv = encode_entry(e, out);
	if (rv != 0)
		out->len = mark;
	return rv;
}

const struct book_entry *
server_machine_book_find(const struct server_machine *m, baton_node_id id)
{
	for (uint32_t i = 0; i < m->book_n; i++)
		if (m->book[i].id == id)
			return &m->book[i];
	return NULL;
}

/* Set e in the book; false (book unchanged) when it is full. */
static bool book_set(struct server_machine *m, const struct book_entry *e)
{
	struct book_entry *slot =
		(struct book_entry *)server_machine_book_find(m, e->id);
	if (slot == NULL) {
		if (m->book_n == SERVER_BOOK_MAX)
			return false;
		slot = &m->book[m->book_n++];
	}
	*slot = *e;
	if (m->address_changed != NULL)
		m->address_changed(m->data, slot);
	return true;
}

/* ---- apply --------------------------------------------------------------- */

static int apply_kv(struct server_machine *m, struct baton_machine_version v,
		    const struct baton_entry *e, struct baton_buf *reply)
{
	size_t mark = reply != NULL ? reply->len : 0;
	int rv = kv_apply(m->kv, v, e->buf + 1, e->len - 1, reply);
	if (rv == 0)
		return 0;
	if (reply != NULL)
		reply->len = mark;
	switch (rv) {
	case BATON_ENOMEM:
		return refuse(m, rv, "out of memory applying entry %" PRIu64,
			      e->index);
	case BATON_EVERSION:
		return refuse(m, rv,
			      "entry %" PRIu64 " holds a kv payload of format "
			      "%u that machine version %u cannot apply (this "
			      "release reads kv payload formats up to %u): %s",
			      e->index, e->len > 1 ? e->buf[1] : 0u, v.value,
			      KV_PAYLOAD_FORMAT_MAX, kv_errmsg(m->kv));
	default:
		return refuse(m, BATON_ECORRUPT,
			      "entry %" PRIu64 " holds a malformed kv payload "
			      "(%s)",
			      e->index, baton_strerror(rv));
	}
}

static int apply_address(struct server_machine *m, const struct baton_entry *e,
			 struct baton_buf *reply)
{
	struct baton_le_reader r = baton_le_reader(e->buf + 1, e->len - 1);
	struct book_entry b;
	if (!decode_entry(&r, &b))
		return refuse(m, BATON_ECORRUPT,
			      "entry %" PRIu64 " holds a malformed address "
			      "entry",
			      e->index);
	/* The reply first, so a failure leaves the book unchanged. */
	size_t mark = reply != NULL ? reply->len : 0;
	bool room = server_machine_book_find(m, b.id) != NULL ||
		    m->book_n < SERVER_BOOK_MAX;
	int rv = 0;
	if (reply != NULL)
		rv = room ? resp_simple(reply, "OK")
			  : resp_error(reply,
				       "ERR the address book is full (%u "
				       "members)",
				       SERVER_BOOK_MAX);
	if (rv != 0) {
		reply->len = mark;
		return refuse(m, BATON_ENOMEM,
			      "out of memory applying entry %" PRIu64,
			      e->index);
	}
	/* A full book refuses the same entry on every node alike. */
	bool set = room && book_set(m, &b);
	BATON_ASSERT(set == room);
	return 0;
}

static int machine_apply(struct baton_machine *bm,
			 struct baton_machine_version v,
			 const struct baton_entry *e, struct baton_buf *reply)
{
	struct server_machine *m = (struct server_machine *)bm;
	BATON_ASSERT(e->type == BATON_ENTRY_COMMAND);
	int rv = version_check(m, v);
	if (rv != 0)
		return rv;
	if (e->len == 0)
		return refuse(m, BATON_ECORRUPT,
			      "entry %" PRIu64 " has an empty payload",
			      e->index);
	switch (e->buf[0]) {
	case PAYLOAD_KV:
		return apply_kv(m, v, e, reply);
	case PAYLOAD_ADDRESS:
		return apply_address(m, e, reply);
	default:
		return refuse(m, BATON_EVERSION,
			      "entry %" PRIu64
			      " holds a payload of kind 0x%02x, "
			      "which this release does not know (it knows "
			      "'%c' and '%c')",
			      e->index, e->buf[0], PAYLOAD_KV, PAYLOAD_ADDRESS);
	}
}

/* ---- snapshots ----------------------------------------------------------- */

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

static int machine_snapshot(struct baton_machine *bm,
			    struct baton_machine_version v,
			    struct baton_buf *out)
{
	struct server_machine *m = (struct server_machine *)bm;
	int rv = version_check(m, v);
	if (rv != 0)
		return rv;
	size_t mark = out->len;
	uint8_t head[SNAP_HEAD_BYTES];
	memcpy(head, SERVER_SNAPSHOT_MAGIC, 4);
	head[4] = SERVER_SNAPSHOT_FORMAT;
	baton_le_put_u32(head + 5, m->book_n);
	rv = baton_buf_append(out, head, sizeof head);
	for (uint32_t i = 0; rv == 0 && i < m->book_n; i++)
		rv = encode_entry(&m->book[i], out);
	if (rv == 0)
		rv = kv_snapshot(m->kv, v, sink, out);
	if (rv != 0) {
		out->len = mark;
		return refuse(m, rv, "snapshot: %s", baton_strerror(rv));
	}
	return 0;
}

static int machine_restore(struct baton_machine *bm,
			   struct baton_machine_version v, const uint8_t *buf,
			   size_t len)
{
	struct server_machine *m = (struct server_machine *)bm;
	int rv = version_check(m, v);
	if (rv != 0)
		return rv;
	struct baton_le_reader r = baton_le_reader(buf, len);
	const uint8_t *head;
	if (!baton_le_read_bytes(&r, SNAP_HEAD_BYTES, &head) ||
	    memcmp(head, SERVER_SNAPSHOT_MAGIC, 4) != 0)
		return refuse(m, BATON_ECORRUPT,
			      "not a batond snapshot (no " SERVER_SNAPSHOT_MAGIC
			      " header)");
	if (head[4] != SERVER_SNAPSHOT_FORMAT)
		return refuse(m,
			      head[4] > SERVER_SNAPSHOT_FORMAT ? BATON_EVERSION
							       : BATON_ECORRUPT,
			      "a batond snapshot of format %u (this release "
			      "reads format %u)",
			      head[4], SERVER_SNAPSHOT_FORMAT);
	uint32_t n = baton_le_get_u32(head + 5);
	if (n > SERVER_BOOK_MAX)
		return refuse(m, BATON_ECORRUPT,
			      "a snapshot with %u addresses (at most %u)", n,
			      SERVER_BOOK_MAX);
	struct book_entry book[SERVER_BOOK_MAX];
	for (uint32_t i = 0; i < n; i++)
		if (!decode_entry(&r, &book[i]))
			return refuse(m, BATON_ECORRUPT,
				      "the snapshot's address %u is malformed",
				      i);
	rv = kv_restore(m->kv, v, r.p, baton_le_left(&r));
	if (rv != 0)
		return refuse(m, rv, "the snapshot's key-value map: %s",
			      rv == BATON_EVERSION
				      ? "a format this release does not read"
				      : baton_strerror(rv));
	m->book_n = 0;
	for (uint32_t i = 0; i < n; i++) {
		bool set = book_set(m, &book[i]);
		BATON_ASSERT(set); /* n <= SERVER_BOOK_MAX */
	}
	return 0;
}

/* Up (1 to 2) needs no conversion: kv applies each entry under the
 * version in force (format-1 payloads included) and writes snapshots of
 * the version asked for. Down (2 to 1, an explicit downgrade's entry) kv
 * converts: every expiry dropped, the same on every node (kv_convert). A
 * version beyond kv's stops the node here (the core stalls on such a
 * version entry before; this is the backstop). */
static int machine_version_changed(struct baton_machine *bm, baton_index index,
				   struct baton_machine_version from,
				   struct baton_machine_version to)
{
	struct server_machine *m = (struct server_machine *)bm;
	if (to.value < KV_MACHINE_VERSION_MIN ||
	    to.value > KV_MACHINE_VERSION_MAX)
		return refuse(m, BATON_EVERSION,
			      "entry %" PRIu64 " makes the machine version %u; "
			      "this release implements %u..%u",
			      index, to.value, KV_MACHINE_VERSION_MIN,
			      KV_MACHINE_VERSION_MAX);
	uint64_t dropped = kv_convert_loss(m->kv, from, to);
	int rv = kv_convert(m->kv, from, to);
	if (rv != 0)
		return refuse(m, rv,
			      "entry %" PRIu64 " changes the machine version "
			      "from %u to %u: %s",
			      index, from.value, to.value, kv_errmsg(m->kv));
	if (to.value < from.value && m->converted != NULL)
		m->converted(m->data, index, from, to, dropped);
	return 0;
}

static const char *machine_errmsg(const struct baton_machine *bm)
{
	const struct server_machine *m = (const struct server_machine *)bm;
	return m->err;
}

static const struct baton_machine_ops ops = {
	.apply = machine_apply,
	.version_changed = machine_version_changed,
	.snapshot = machine_snapshot,
	.restore = machine_restore,
	.errmsg = machine_errmsg,
};

int server_machine_init(struct server_machine *m)
{
	memset(m, 0, sizeof *m);
	m->base.ops = &ops;
	return kv_create(&m->kv);
}

void server_machine_free(struct server_machine *m)
{
	kv_destroy(m->kv);
	m->kv = NULL;
	m->book_n = 0;
}
