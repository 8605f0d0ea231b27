/*
 * The relay protocol codec (protocol.h, docs/relay-protocol.md).
 *
 * Each frame body is described once, by a function that walks its fields
 * with a cursor (protocol_internal.h). The cursor runs in one of three
 * modes: measure (count the bytes and check every value), write (the same,
 * storing the bytes) and read (load and check them). Encoding measures
 * then writes; decoding reads. The rules a value must meet are checked by
 * the same code in all three, so an encoder cannot produce what a decoder
 * refuses, and the order of fields cannot differ between the two.
 */
#include "protocol_internal.h"

#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "checksum.h"
#include "le.h"

const uint8_t baton_relay_magic[BATON_RELAY_MAGIC_LEN] = {0xBA, 'R', 'L', 'Y'};

/* Offsets in the header. */
#define OFF_TYPE 4u
#define OFF_FLAGS 6u
#define OFF_BODY_LEN 8u
#define OFF_CHECKSUM 12u

_Static_assert(RELAY_NODE_RECORD_MAX <= 0xFFFFu, "a record's length is a u16");
/* Each type's fields at their limits fit its body limit, so an encoder
 * never meets the body limit (the decoder still checks it). */
_Static_assert(2u + BATON_RELAY_ID_MAX + 22u + 2u + BATON_RELAY_ADDR_MAX +
			       BATON_RELAY_EXT_MAX <=
		       BATON_RELAY_CONTROL_BODY_MAX,
	       "HELLO fits");
_Static_assert(10u + BATON_RELAY_NODES_MAX * RELAY_NODE_RECORD_MAX +
			       BATON_RELAY_EXT_MAX <=
		       BATON_RELAY_LIST_BODY_MAX,
	       "VIEW and STATUS_REPLY fit");
_Static_assert(1u + 2u + BATON_RELAY_ID_MAX + 40u + 4u +
			       BATON_RELAY_PAYLOAD_MAX + BATON_RELAY_EXT_MAX <=
		       BATON_RELAY_DATA_BODY_MAX,
	       "DATA fits");

/* ---- tables ------------------------------------------------------------ */

struct type_info {
	const char *name;
	unsigned dirs;
	uint32_t body_max;
};

static const struct type_info *type_info(uint16_t type)
{
	static const struct type_info table[] = {
#define TYPE_ROW(name, number, dirs, body_max)                                 \
	[number] = {#name, dirs, body_max},
		BATON_RELAY_TYPES(TYPE_ROW)
#undef TYPE_ROW
	};
	if (type >= sizeof table / sizeof table[0] || table[type].name == NULL)
		return NULL;
	return &table[type];
}

const char *baton_relay_type_name(uint16_t type)
{
	const struct type_info *t = type_info(type);
	return t != NULL ? t->name : NULL;
}

const char *baton_relay_code_name(uint16_t code)
{
	switch (code) {
	case BATON_RELAY_OK:
		return "OK";
#define CODE_NAME(name, number, text)                                          \
	case number:                                                           \
		return #name;
		BATON_RELAY_CODES(CODE_NAME)
#undef CODE_NAME
	}
	return "UNKNOWN";
}

const char *baton_relay_code_text(uint16_t code)
{
	switch (code) {
	case BATON_RELAY_OK:
		return "no error";
#define CODE_TEXT(name, number, text)                                          \
	case number:                                                           \
		return text;
		BATON_RELAY_CODES(CODE_TEXT)
#undef CODE_TEXT
	}
	return "unknown code";
}

/* ---- frame bodies ------------------------------------------------------ */

static bool walk_hello(struct field_cursor *c, struct baton_relay_hello *h)
{
	return field_str(c, &h->cluster_id, BATON_RELAY_ID_MAX, FIELD_IDENT,
			 "cluster id") &&
	       field_u64(c, &h->node_id, "node id") &&
	       field_nonzero(c, h->node_id, "node id") &&
	       field_u64(c, &h->incarnation, "incarnation") &&
	       field_nonzero(c, h->incarnation, "incarnation") &&
	       field_release(c, &h->release) &&
	       field_str(c, &h->address, BATON_RELAY_ADDR_MAX, FIELD_IDENT,
			 "address");
}

static bool walk_welcome(struct field_cursor *c, struct baton_relay_welcome *w)
{
	if (!field_u16(c, &w->code, "code") ||
	    !field_u64(c, &w->relay_incarnation, "relay incarnation") ||
	    !field_nonzero(c, w->relay_incarnation, "relay incarnation") ||
	    !field_str(c, &w->reason, BATON_RELAY_TEXT_MAX, FIELD_TEXT,
		       "reason"))
		return false;
	if (w->code != BATON_RELAY_OK && w->reason.len == 0)
		return field_fail(c, BATON_RELAY_EBAD_STRING,
				  "a refusal (code %u) with an empty reason",
				  w->code);
	return true;
}

static bool walk_view(struct field_cursor *c, struct baton_relay_view *v)
{
	return field_u64(c, &v->number, "view number") &&
	       field_nonzero(c, v->number, "view number") &&
	       field_records(c, &v->node_count, v->nodes, &v->records, false);
}

/* The other end of a DATA or ACK. A multicast to the relay names only the
 * destination cluster; every other peer is a whole node incarnation. */
static bool io_peer(struct field_cursor *c, struct baton_relay_peer *p,
		    bool cluster_only)
{
	if (!field_str(c, &p->cluster_id, BATON_RELAY_ID_MAX, FIELD_IDENT,
		       "cluster id") ||
	    !field_u64(c, &p->node_id, "node id") ||
	    !field_u64(c, &p->incarnation, "incarnation"))
		return false;
	if (!cluster_only)
		return field_nonzero(c, p->node_id, "node id") &&
		       field_nonzero(c, p->incarnation, "incarnation");
	if (p->node_id != 0 || p->incarnation != 0)
		return field_fail(c, BATON_RELAY_EBAD_VALUE,
				  "a multicast to the relay names node %llu "
				  "incarnation %llu: both must be 0",
				  (unsigned long long)p->node_id,
				  (unsigned long long)p->incarnation);
	return true;
}

static bool io_kind(struct field_cursor *c, uint8_t *kind)
{
	if (!field_u8(c, kind, "kind"))
		return false;
	if (*kind > BATON_RELAY_MULTICAST)
		return field_fail(
			c, BATON_RELAY_EBAD_VALUE,
			"kind is %u, must be 0 (unicast) or 1 (multicast)",
			*kind);
	return true;
}

static bool check_payload(struct field_cursor *c,
			  const struct baton_relay_data *d)
{
	if (d->payload_len > BATON_RELAY_PAYLOAD_MAX)
		return field_fail(c, BATON_RELAY_ETOO_LONG,
				  "payload is %u bytes, above the limit of %u",
				  d->payload_len, BATON_RELAY_PAYLOAD_MAX);
	if (c->mode != FIELD_READ && d->payload_len > 0 && d->payload == NULL)
		return field_fail(c, BATON_RELAY_EBAD_VALUE, "payload is NULL");
	return true;
}

static bool walk_data(struct field_cursor *c, struct baton_relay_data *d,
		      enum baton_relay_dir dir)
{
	if (!io_kind(c, &d->kind) ||
	    !io_peer(c, &d->peer,
		     dir == BATON_RELAY_TO_RELAY &&
			     d->kind == BATON_RELAY_MULTICAST) ||
	    !field_u64(c, &d->seq, "seq") || !field_nonzero(c, d->seq, "seq") ||
	    !field_u64(c, &d->first_seq, "first seq") ||
	    !field_nonzero(c, d->first_seq, "first seq"))
		return false;
	if (d->first_seq > d->seq)
		return field_fail(c, BATON_RELAY_EBAD_VALUE,
				  "first seq %llu is after seq %llu",
				  (unsigned long long)d->first_seq,
				  (unsigned long long)d->seq);
	/* Encoding: the payload is checked before it is hashed. */
	if (c->mode != FIELD_READ) {
		if (!check_payload(c, d))
			return false;
		d->payload_checksum =
			baton__checksum(d->payload, d->payload_len);
	}
	if (!field_u64(c, &d->payload_checksum, "payload checksum") ||
	    !field_u32(c, &d->payload_len, "payload length") ||
	    !check_payload(c, d) ||
	    !field_span(c, &d->payload, d->payload_len, "payload"))
		return false;
	if (c->mode == FIELD_READ &&
	    baton__checksum(d->payload, d->payload_len) != d->payload_checksum)
		return field_fail(
			c, BATON_RELAY_EPAYLOAD_CHECKSUM,
			"payload of %u bytes does not match its checksum "
			"0x%016llx",
			d->payload_len,
			(unsigned long long)d->payload_checksum);
	return true;
}

static bool walk_ack(struct field_cursor *c, struct baton_relay_ack *a)
{
	return io_kind(c, &a->kind) && io_peer(c, &a->peer, false) &&
	       field_u64(c, &a->seq, "seq");
}

static bool walk_status_reply(struct field_cursor *c,
			      struct baton_relay_status_reply *s)
{
	return field_u64(c, &s->relay_incarnation, "relay incarnation") &&
	       field_nonzero(c, s->relay_incarnation, "relay incarnation") &&
	       field_u64(c, &s->view_number, "view number") &&
	       field_bool(c, &s->active, "active") &&
	       field_u64(c, &s->messages_relayed, "messages relayed") &&
	       field_u64(c, &s->bytes_relayed, "bytes relayed") &&
	       field_u64(c, &s->messages_dropped, "messages dropped") &&
	       field_records(c, &s->node_count, s->nodes, &s->records, true);
}

static bool walk_error(struct field_cursor *c, struct baton_relay_error *e)
{
	return field_u16(c, &e->code, "code") &&
	       field_nonzero(c, e->code, "code") &&
	       field_u16(c, &e->frame_type, "frame type") &&
	       field_str(c, &e->text, BATON_RELAY_TEXT_MAX, FIELD_TEXT,
			 "text") &&
	       (e->text.len > 0 ||
		field_fail(c, BATON_RELAY_EBAD_STRING, "text is empty"));
}

/* The body of *f: its fields, then the frame's extension area. */
static bool walk_body(struct field_cursor *c, struct baton_relay_frame *f,
		      enum baton_relay_dir dir)
{
	bool ok = true;
	switch (f->type) {
	case BATON_RELAY_HELLO:
		ok = walk_hello(c, &f->u.hello);
		break;
	case BATON_RELAY_WELCOME:
		ok = walk_welcome(c, &f->u.welcome);
		break;
	case BATON_RELAY_VIEW:
		ok = walk_view(c, &f->u.view);
		break;
	case BATON_RELAY_LEAVE:
		ok = field_str(c, &f->u.leave.reason, BATON_RELAY_TEXT_MAX,
			       FIELD_TEXT, "reason");
		break;
	case BATON_RELAY_DATA:
		ok = walk_data(c, &f->u.data, dir);
		break;
	case BATON_RELAY_ACK:
		ok = walk_ack(c, &f->u.ack);
		break;
	case BATON_RELAY_ACTIVATE:
	case BATON_RELAY_DEACTIVATE:
	case BATON_RELAY_STATUS:
		break;
	case BATON_RELAY_STATUS_REPLY:
		ok = walk_status_reply(c, &f->u.status_reply);
		break;
	case BATON_RELAY_PING:
	case BATON_RELAY_PONG:
		ok = field_u64(c, &f->u.ping_token, "token");
		break;
	case BATON_RELAY_ERROR:
		ok = walk_error(c, &f->u.error);
		break;
	}
	return ok && field_ext(c, &f->ext, BATON_RELAY_EXT_MAX);
}

/* ---- header, split, decode, encode ------------------------------------- */

/* Check the len (< header or more) bytes of a header that are there: the
 * magic byte by byte, then type, direction, flags, body length. */
static bool check_header(const uint8_t *buf, size_t len,
			 enum baton_relay_dir dir, struct baton_relay_err *err)
{
	for (size_t i = 0; i < BATON_RELAY_MAGIC_LEN && i < len; i++)
		if (buf[i] != baton_relay_magic[i])
			return relay_set_err(
				err, BATON_RELAY_EBAD_MAGIC,
				"byte %zu is 0x%02x, the magic has 0x%02x "
				"there: not a baton-relay peer",
				i, buf[i], baton_relay_magic[i]);
	if (len < OFF_TYPE + 2)
		return true;
	uint16_t type = baton_le_get_u16(buf + OFF_TYPE);
	const struct type_info *t = type_info(type);
	if (t == NULL)
		return relay_set_err(err, BATON_RELAY_EBAD_TYPE,
				     "frame type %u is not one of 1..13", type);
	if ((t->dirs & (unsigned)dir) == 0)
		return relay_set_err(err, BATON_RELAY_EWRONG_DIRECTION,
				     "%s is never sent %s", t->name,
				     dir == BATON_RELAY_TO_RELAY
					     ? "to the relay"
					     : "to a node");
	if (len < OFF_FLAGS + 2)
		return true;
	uint16_t flags = baton_le_get_u16(buf + OFF_FLAGS);
	if (flags != 0)
		return relay_set_err(err, BATON_RELAY_EBAD_FLAGS,
				     "%s has flags 0x%04x; every flag bit is "
				     "reserved and must be 0",
				     t->name, flags);
	if (len < OFF_BODY_LEN + 4)
		return true;
	uint32_t body_len = baton_le_get_u32(buf + OFF_BODY_LEN);
	if (body_len > t->body_max)
		return relay_set_err(
			err, BATON_RELAY_ETOO_BIG,
			"%s announces a body of %u bytes, above its "
			"limit of %u",
			t->name, body_len, t->body_max);
	return true;
}

int baton_relay_split(const uint8_t *buf, size_t len, enum baton_relay_dir dir,
		      size_t *frame_len, size_t *need,
		      struct baton_relay_err *err)
{
	BATON_ASSERT(dir == BATON_RELAY_TO_RELAY || dir == BATON_RELAY_TO_NODE);
	BATON_ASSERT(buf != NULL || len == 0);
	*frame_len = 0;
	*need = 0;
	err->code = BATON_RELAY_OK;
	err->text[0] = '\0';
	if (!check_header(buf, len, dir, err))
		return BATON_ECORRUPT;
	if (len < BATON_RELAY_HEADER_LEN) {
		*need = BATON_RELAY_HEADER_LEN - len;
		return BATON_EAGAIN;
	}
	size_t total = BATON_RELAY_HEADER_LEN +
		       (size_t)baton_le_get_u32(buf + OFF_BODY_LEN);
	if (len < total) {
		*need = total - len;
		return BATON_EAGAIN;
	}
	*frame_len = total;
	return 0;
}

static uint64_t frame_checksum(const uint8_t *frame, size_t body_len)
{
	return baton__checksum2(frame, OFF_CHECKSUM,
				frame + BATON_RELAY_HEADER_LEN, body_len);
}

int baton_relay_decode(const uint8_t *buf, size_t len, enum baton_relay_dir dir,
		       struct baton_relay_frame *out,
		       struct baton_relay_err *err)
{
	size_t frame_len, need;
	int rv = baton_relay_split(buf, len, dir, &frame_len, &need, err);
	if (rv == BATON_EAGAIN) {
		relay_set_err(err, BATON_RELAY_ETRUNCATED,
			      "%zu bytes: the frame needs %zu more", len, need);
		return BATON_ECORRUPT;
	}
	if (rv != 0)
		return rv;
	if (frame_len != len) {
		relay_set_err(err, BATON_RELAY_EBAD_LENGTH,
			      "%zu bytes follow the frame's %zu",
			      len - frame_len, frame_len);
		return BATON_ECORRUPT;
	}
	size_t body_len = len - BATON_RELAY_HEADER_LEN;
	uint64_t sum = baton_le_get_u64(buf + OFF_CHECKSUM);
	if (frame_checksum(buf, body_len) != sum) {
		relay_set_err(
			err, BATON_RELAY_ECHECKSUM,
			"%s of %zu bytes does not match its checksum "
			"0x%016llx",
			baton_relay_type_name(baton_le_get_u16(buf + OFF_TYPE)),
			len, (unsigned long long)sum);
		return BATON_ECORRUPT;
	}
	memset(out, 0, sizeof *out);
	out->type = (enum baton_relay_type)baton_le_get_u16(buf + OFF_TYPE);
	struct field_cursor c = {.mode = FIELD_READ,
				 .in = buf + BATON_RELAY_HEADER_LEN,
				 .end = body_len,
				 .err = err};
	snprintf(c.where, sizeof c.where, "%s",
		 baton_relay_type_name((uint16_t)out->type));
	if (!walk_body(&c, out, dir))
		return BATON_ECORRUPT;
	BATON_ASSERT(c.pos == body_len); /* the extension area took the rest */
	return 0;
}

int baton_relay_encode(const struct baton_relay_frame *f,
		       enum baton_relay_dir dir, uint8_t *buf, size_t cap,
		       size_t *len_out, struct baton_relay_err *err)
{
	BATON_ASSERT(dir == BATON_RELAY_TO_RELAY || dir == BATON_RELAY_TO_NODE);
	BATON_ASSERT(buf != NULL || cap == 0);
	*len_out = 0;
	err->code = BATON_RELAY_OK;
	err->text[0] = '\0';
	const struct type_info *t = type_info((uint16_t)f->type);
	if (t == NULL) {
		relay_set_err(err, BATON_RELAY_EBAD_TYPE,
			      "frame type %d is unknown", (int)f->type);
		return BATON_EINVAL;
	}
	if ((t->dirs & (unsigned)dir) == 0) {
		relay_set_err(err, BATON_RELAY_EWRONG_DIRECTION,
			      "%s is never sent %s", t->name,
			      dir == BATON_RELAY_TO_RELAY ? "to the relay"
							  : "to a node");
		return BATON_EINVAL;
	}
	/* The walk stores into its frame (e.g. DATA's payload checksum), so
	 * it walks a copy. */
	struct baton_relay_frame copy = *f;
	struct field_cursor c = {.mode = FIELD_MEASURE, .err = err};
	snprintf(c.where, sizeof c.where, "%s", t->name);
	if (!walk_body(&c, &copy, dir))
		return BATON_EINVAL;
	size_t body_len = c.pos;
	BATON_ASSERT(body_len <= t->body_max); /* the static asserts above */
	*len_out = BATON_RELAY_HEADER_LEN + body_len;
	if (cap < *len_out) {
		relay_set_err(err, BATON_RELAY_ETOO_BIG,
			      "the %s frame is %zu bytes, the buffer %zu",
			      t->name, *len_out, cap);
		return BATON_ETOOBIG;
	}
	memcpy(buf, baton_relay_magic, BATON_RELAY_MAGIC_LEN);
	baton_le_put_u16(buf + OFF_TYPE, (uint16_t)f->type);
	baton_le_put_u16(buf + OFF_FLAGS, 0);
	baton_le_put_u32(buf + OFF_BODY_LEN, (uint32_t)body_len);
	c = (struct field_cursor){.mode = FIELD_WRITE,
				  .out = buf + BATON_RELAY_HEADER_LEN,
				  .err = err};
	snprintf(c.where, sizeof c.where, "%s", t->name);
	bool ok = walk_body(&c, &copy, dir);
	BATON_ASSERT(ok && c.pos == body_len); /* as measured */
	baton_le_put_u64(buf + OFF_CHECKSUM, frame_checksum(buf, body_len));
	return 0;
}
