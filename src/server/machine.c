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
#include <time.h>

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

/* ---- the cluster's identity: its UUID and the removed ids ---------------- */

bool server_machine_removed(const struct server_machine *m, baton_node_id id)
{
	BATON_ASSERT(m->removed_n <= SERVER_REMOVED_MAX);
	for (uint32_t i = 0; i < m->removed_n; i++)
		if (m->removed[i] == id)
			return true;
	return false;
}

int server_machine_encode_uuid(const uint8_t uuid[SERVER_UUID_LEN],
			       struct baton_buf *out)
{
	size_t mark = out->len;
	uint8_t kind = PAYLOAD_CLUSTER_UUID;
	int rv = baton_buf_append(out, &kind, 1);
	if (rv == 0)
		rv = baton_buf_append(out, uuid, SERVER_UUID_LEN);
	if (rv != 0)
		out->len = mark;
	return rv;
}

int server_machine_encode_removed(baton_node_id id, struct baton_buf *out)
{
	BATON_ASSERT(id != 0);
	uint8_t b[9] = {PAYLOAD_REMOVED};
	baton_le_put_u64(b + 1, id);
	return baton_buf_append(out, b, sizeof b);
}

/* Insert id in the ascending list; false when it is full. */
static bool removed_add(struct server_machine *m, baton_node_id id)
{
	if (server_machine_removed(m, id))
		return true;
	if (m->removed_n == SERVER_REMOVED_MAX)
		return false;
	uint32_t i = m->removed_n;
	while (i > 0 && m->removed[i - 1] > id) {
		m->removed[i] = m->removed[i - 1];
		i--;
	}
	m->removed[i] = id;
	m->removed_n++;
	BATON_ASSERT(i + 1 == m->removed_n || m->removed[i + 1] > id);
	return true;
}

static void identity_changed(struct server_machine *m)
{
	if (m->identity_changed != NULL)
		m->identity_changed(m->data);
}

/* The reply of an identity entry: +OK, or the error text (fmt). */
static int identity_reply(struct server_machine *m, const struct baton_entry *e,
			  struct baton_buf *reply, const char *error)
{
	if (reply == NULL)
		return 0;
	size_t mark = reply->len;
	int rv = error == NULL ? resp_simple(reply, "OK")
			       : resp_error(reply, "%s", error);
	if (rv != 0) {
		reply->len = mark;
		return refuse(m, BATON_ENOMEM,
			      "out of memory applying entry %" PRIu64,
			      e->index);
	}
	return 0;
}

static int apply_uuid(struct server_machine *m, const struct baton_entry *e,
		      struct baton_buf *reply)
{
	if (e->len < 1 + SERVER_UUID_LEN)
		return refuse(m, BATON_ECORRUPT,
			      "entry %" PRIu64 " holds a malformed cluster "
			      "uuid entry (%u bytes)",
			      e->index, e->len);
	int rv = identity_reply(m, e, reply, NULL);
	if (rv != 0 || m->has_uuid)
		return rv; /* the first one applied is the cluster's */
	memcpy(m->uuid, e->buf + 1, SERVER_UUID_LEN);
	m->has_uuid = true;
	identity_changed(m);
	return 0;
}

static int apply_removed(struct server_machine *m, const struct baton_entry *e,
			 struct baton_buf *reply)
{
	baton_node_id id = e->len >= 9 ? baton_le_get_u64(e->buf + 1) : 0;
	if (id == 0)
		return refuse(m, BATON_ECORRUPT,
			      "entry %" PRIu64 " holds a malformed removed-id "
			      "entry",
			      e->index);
	bool known = server_machine_removed(m, id);
	bool room = known || m->removed_n < SERVER_REMOVED_MAX;
	char error[128];
	snprintf(error, sizeof error,
		 "ERR this cluster remembers %u removed ids already, its "
		 "limit",
		 SERVER_REMOVED_MAX);
	int rv = identity_reply(m, e, reply, room ? NULL : error);
	if (rv != 0 || known || !room)
		return rv;
	bool added = removed_add(m, id);
	BATON_ASSERT(added);
	identity_changed(m);
	return 0;
}

/* ---- apply --------------------------------------------------------------- */

static int apply_kv(struct server_machine *m, struct baton_machine_version v,
		    const struct baton_entry *e, struct baton_buf *reply)
{
	size_t mark = reply != NULL ? reply->len : 0;
	if (m->test_apply_delay_ms > 0) {
		struct timespec ts = {
			.tv_sec = m->test_apply_delay_ms / 1000,
			.tv_nsec = (long)(m->test_apply_delay_ms % 1000) *
				   1000000L};
		while (nanosleep(&ts, &ts) != 0) {
		}
	}
	int rv = kv_apply(m->kv, v, e->buf + 1, e->len - 1, reply);
	if (rv == 0) {
		if (m->kv_applied != NULL)
			m->kv_applied(m->data, e->index, e->buf + 1,
				      e->len - 1);
		return 0;
	}
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
	m->applied_index = e->index;
	switch (e->buf[0]) {
	case PAYLOAD_KV:
		return apply_kv(m, v, e, reply);
	case PAYLOAD_ADDRESS:
		return apply_address(m, e, reply);
	case PAYLOAD_CLUSTER_UUID:
		return apply_uuid(m, e, reply);
	case PAYLOAD_REMOVED:
		return apply_removed(m, e, reply);
	default:
		return refuse(m, BATON_EVERSION,
			      "entry %" PRIu64
			      " holds a payload of kind 0x%02x, "
			      "which this release does not know (it knows "
			      "'%c', '%c', '%c' and '%c')",
			      e->index, e->buf[0], PAYLOAD_KV, PAYLOAD_ADDRESS,
			      PAYLOAD_CLUSTER_UUID, PAYLOAD_REMOVED);
	}
}

/* ---- snapshots ----------------------------------------------------------- */

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

/* Format 2's identity part: has_uuid, the UUID, the removed ids. */
static int encode_identity(const struct server_machine *m,
			   struct baton_buf *out)
{
	uint8_t head[1 + SERVER_UUID_LEN + 4] = {m->has_uuid ? 1 : 0};
	if (m->has_uuid)
		memcpy(head + 1, m->uuid, SERVER_UUID_LEN);
	baton_le_put_u32(head + 1 + SERVER_UUID_LEN, m->removed_n);
	int rv = baton_buf_append(out, head, sizeof head);
	for (uint32_t i = 0; rv == 0 && i < m->removed_n; i++) {
		uint8_t id[8];
		baton_le_put_u64(id, m->removed[i]);
		rv = baton_buf_append(out, id, sizeof id);
	}
	return rv;
}

/* Format 2's identity part, decoded before anything changes. */
struct identity_part {
	bool has_uuid;
	uint8_t uuid[SERVER_UUID_LEN];
	uint32_t removed_n;
	baton_node_id removed[SERVER_REMOVED_MAX];
};

/* False when malformed: a flag other than 0/1, a UUID with the flag off,
 * too many ids, or ids not ascending. */
static bool decode_identity(struct baton_le_reader *r,
			    struct identity_part *into)
{
	const uint8_t *head;
	if (!baton_le_read_bytes(r, 1 + SERVER_UUID_LEN + 4, &head) ||
	    head[0] > 1)
		return false;
	into->has_uuid = head[0] == 1;
	memcpy(into->uuid, head + 1, SERVER_UUID_LEN);
	uint8_t zero[SERVER_UUID_LEN] = {0};
	if (!into->has_uuid && memcmp(into->uuid, zero, sizeof zero) != 0)
		return false;
	uint32_t n = baton_le_get_u32(head + 1 + SERVER_UUID_LEN);
	if (n > SERVER_REMOVED_MAX)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		if (!baton_le_read_u64(r, &into->removed[i]) ||
		    into->removed[i] == 0 ||
		    (i > 0 && into->removed[i] <= into->removed[i - 1]))
			return false;
	}
	into->removed_n = n;
	return true;
}

/* What comes before the kv map: magic, format, the address book and,
 * in format 2, the identity part. */
static int encode_wrapper(const struct server_machine *m, struct baton_buf *out)
{
	bool identity = m->has_uuid || m->removed_n > 0;
	uint8_t head[SNAP_HEAD_BYTES];
	memcpy(head, SERVER_SNAPSHOT_MAGIC, 4);
	head[4] = identity ? SERVER_SNAPSHOT_FORMAT
			   : SERVER_SNAPSHOT_FORMAT_PLAIN;
	baton_le_put_u32(head + 5, m->book_n);
	int rv = baton_buf_append(out, head, sizeof head);
	for (uint32_t i = 0; rv == 0 && i < m->book_n; i++)
		rv = encode_entry(&m->book[i], out);
	if (rv == 0 && identity)
		rv = encode_identity(m, out);
	return rv;
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
	rv = encode_wrapper(m, out);
	if (rv == 0)
		rv = kv_snapshot(m->kv, v, sink, out);
	if (rv != 0) {
		out->len = mark;
		return refuse(m, rv, "snapshot: %s", baton_strerror(rv));
	}
	return 0;
}

/* The incremental form: the wrapper is small and goes whole into the
 * first step; the map follows in slices (kv_snapshot_begin). */
static int machine_snapshot_begin(struct baton_machine *bm,
				  struct baton_machine_version v)
{
	struct server_machine *m = (struct server_machine *)bm;
	int rv = version_check(m, v);
	if (rv != 0)
		return rv;
	/* The map first: BATON_EBUSY while a KEYS reads it in slices
	 * (keys.c), a backup holds it or waits for it, which the node takes
	 * as "try again later". */
	if (m->snapshot_yields != NULL && m->snapshot_yields(m->data))
		return refuse(m, BATON_EBUSY,
			      "snapshot: a backup waits for the map's view");
	rv = kv_snapshot_begin(m->kv, v);
	if (rv != 0)
		return refuse(m, rv, "snapshot: %s", kv_errmsg(m->kv));
	baton_buf_init(&m->snap_wrapper);
	rv = encode_wrapper(m, &m->snap_wrapper);
	if (rv != 0) {
		kv_snapshot_end(m->kv);
		baton_buf_free(&m->snap_wrapper);
		return refuse(m, rv, "snapshot: %s", baton_strerror(rv));
	}
	return 0;
}

static int machine_snapshot_step(struct baton_machine *bm, size_t budget,
				 struct baton_buf *out, bool *done)
{
	struct server_machine *m = (struct server_machine *)bm;
	size_t mark = out->len;
	int rv = 0;
	if (m->snap_wrapper.len > 0) {
		rv = baton_buf_append(out, m->snap_wrapper.data,
				      m->snap_wrapper.len);
		if (rv == 0)
			baton_buf_free(&m->snap_wrapper);
	}
	if (rv == 0)
		rv = kv_snapshot_step(m->kv, budget, sink, out, done);
	if (rv != 0) {
		out->len = mark;
		return refuse(m, rv, "snapshot: %s", baton_strerror(rv));
	}
	return 0;
}

static void machine_snapshot_end(struct baton_machine *bm)
{
	struct server_machine *m = (struct server_machine *)bm;
	baton_buf_free(&m->snap_wrapper);
	kv_snapshot_end(m->kv);
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
	if (head[4] == 0 || head[4] > SERVER_SNAPSHOT_FORMAT)
		return refuse(m,
			      head[4] > SERVER_SNAPSHOT_FORMAT ? BATON_EVERSION
							       : BATON_ECORRUPT,
			      "a batond snapshot of format %u (this release "
			      "reads formats 1 to %u)",
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
	struct identity_part ident = {.has_uuid = false};
	if (head[4] >= 2 && !decode_identity(&r, &ident))
		return refuse(m, BATON_ECORRUPT,
			      "the snapshot's cluster uuid or removed ids are "
			      "malformed");
	m->map_replaced++; /* kv_restore ends an open view */
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
	m->has_uuid = ident.has_uuid;
	memcpy(m->uuid, ident.uuid, SERVER_UUID_LEN);
	m->removed_n = ident.removed_n;
	memcpy(m->removed, ident.removed,
	       ident.removed_n * sizeof m->removed[0]);
	identity_changed(m);
	return 0;
}

/* Up needs no conversion: kv applies each entry under the version in
 * force (format-1 payloads included) and writes snapshots of the version
 * asked for. Down (an explicit downgrade's entry) kv converts, the same on
 * every node, exactly as machine_convert_loss said (kv_convert). A
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
	struct baton_machine_loss lost;
	if (kv_convert_loss_describe(m->kv, from, to, &lost) != 0)
		memset(&lost, 0, sizeof lost);
	m->map_replaced++; /* kv_convert ends an open view */
	int rv = kv_convert(m->kv, from, to);
	if (rv != 0)
		return refuse(m, rv,
			      "entry %" PRIu64 " changes the machine version "
			      "from %u to %u: %s",
			      index, from.value, to.value, kv_errmsg(m->kv));
	if (to.value < from.value && m->converted != NULL)
		m->converted(m->data, index, from, to, &lost);
	return 0;
}

/* The downgrade's question (machine.h): kv counts and words it. */
static int machine_convert_loss(struct baton_machine *bm,
				struct baton_machine_version from,
				struct baton_machine_version to,
				struct baton_machine_loss *loss)
{
	struct server_machine *m = (struct server_machine *)bm;
	if (kv_convert_loss_describe(m->kv, from, to, loss) != 0)
		return refuse(m, BATON_EVERSION,
			      "cannot convert the map from machine version %u "
			      "to %u: this release implements %u..%u",
			      from.value, to.value, KV_MACHINE_VERSION_MIN,
			      KV_MACHINE_VERSION_MAX);
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
	.convert_loss = machine_convert_loss,
	.snapshot = machine_snapshot,
	.snapshot_begin = machine_snapshot_begin,
	.snapshot_step = machine_snapshot_step,
	.snapshot_end = machine_snapshot_end,
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
	baton_buf_free(&m->snap_wrapper);
	kv_destroy(m->kv);
	m->kv = NULL;
	m->book_n = 0;
}
