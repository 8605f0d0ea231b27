/*
 * The fields of relay frames (protocol_internal.h): integers, strings,
 * releases, extension areas, and the node records of VIEW and
 * STATUS_REPLY, each walked in the cursor's mode so that encoding and
 * decoding share one description and one set of checks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "le.h"
#include "protocol_internal.h"

/* Always false, so that a check can `return relay_set_err(...)`. */
bool relay_set_err(struct baton_relay_err *err, uint16_t code, const char *fmt,
		   ...)
{
	BATON_ASSERT(code != BATON_RELAY_OK);
	err->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->text, sizeof err->text, fmt, ap);
	va_end(ap);
	return false;
}

/* ---- the cursor -------------------------------------------------------- */

bool field_fail(struct field_cursor *c, uint16_t code, const char *fmt, ...)
{
	char what[BATON_RELAY_ERR_TEXT_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return relay_set_err(c->err, code, "%s: %s", c->where, what);
}

/* FIELD_READ: n more bytes are there, or TRUNCATED naming the field. */
static bool have(struct field_cursor *c, size_t n, const char *field)
{
	if (c->end - c->pos >= n)
		return true;
	return field_fail(c, BATON_RELAY_ETRUNCATED,
			  "%s needs %zu bytes, only %zu are left", field, n,
			  c->end - c->pos);
}

static bool io_raw(struct field_cursor *c, void *v, size_t n, const char *field)
{
	if (c->mode == FIELD_READ) {
		if (!have(c, n, field))
			return false;
		memcpy(v, c->in + c->pos, n);
	} else if (c->mode == FIELD_WRITE) {
		memcpy(c->out + c->pos, v, n);
	}
	c->pos += n;
	return true;
}

bool field_u8(struct field_cursor *c, uint8_t *v, const char *field)
{
	return io_raw(c, v, 1, field);
}

bool field_u16(struct field_cursor *c, uint16_t *v, const char *field)
{
	uint8_t b[2];
	if (c->mode != FIELD_READ)
		baton_le_put_u16(b, *v);
	if (!io_raw(c, b, sizeof b, field))
		return false;
	if (c->mode == FIELD_READ)
		*v = baton_le_get_u16(b);
	return true;
}

bool field_u32(struct field_cursor *c, uint32_t *v, const char *field)
{
	uint8_t b[4];
	if (c->mode != FIELD_READ)
		baton_le_put_u32(b, *v);
	if (!io_raw(c, b, sizeof b, field))
		return false;
	if (c->mode == FIELD_READ)
		*v = baton_le_get_u32(b);
	return true;
}

bool field_u64(struct field_cursor *c, uint64_t *v, const char *field)
{
	uint8_t b[8];
	if (c->mode != FIELD_READ)
		baton_le_put_u64(b, *v);
	if (!io_raw(c, b, sizeof b, field))
		return false;
	if (c->mode == FIELD_READ)
		*v = baton_le_get_u64(b);
	return true;
}

/* A flag byte: 0 or 1, nothing else. */
bool field_bool(struct field_cursor *c, bool *v, const char *field)
{
	uint8_t b = c->mode != FIELD_READ && *v ? 1 : 0;
	if (!field_u8(c, &b, field))
		return false;
	if (b > 1)
		return field_fail(c, BATON_RELAY_EBAD_VALUE,
				  "%s is %u, must be 0 or 1", field, b);
	*v = b == 1;
	return true;
}

/* n bytes that are written from / read into *ptr (FIELD_READ: points into the
 * input). */
bool field_span(struct field_cursor *c, const uint8_t **ptr, size_t n,
		const char *field)
{
	if (c->mode == FIELD_READ) {
		if (!have(c, n, field))
			return false;
		*ptr = c->in + c->pos;
	} else if (c->mode == FIELD_WRITE && n > 0) {
		memcpy(c->out + c->pos, *ptr, n);
	}
	c->pos += n;
	return true;
}

static bool check_str(struct field_cursor *c, const struct baton_relay_str *s,
		      uint16_t max, enum field_rule rule, const char *field)
{
	if (s->len > max)
		return field_fail(c, BATON_RELAY_ETOO_LONG,
				  "%s is %u bytes, above the limit of %u",
				  field, s->len, max);
	if (rule == FIELD_IDENT && s->len == 0)
		return field_fail(c, BATON_RELAY_EBAD_STRING, "%s is empty",
				  field);
	if (s->len > 0 && s->ptr == NULL)
		return field_fail(c, BATON_RELAY_EBAD_STRING, "%s is NULL",
				  field);
	for (uint16_t i = 0; i < s->len; i++) {
		uint8_t b = (uint8_t)s->ptr[i];
		bool bad = rule == FIELD_IDENT ? b < 0x20 || b == 0x7F : b == 0;
		if (bad)
			return field_fail(
				c, BATON_RELAY_EBAD_STRING,
				"%s holds byte 0x%02x at offset %u, which "
				"it may not",
				field, b, i);
	}
	return true;
}

/* A u16 length then the bytes. The length is checked against max before
 * the bytes are looked for, so an overlong string is TOO_LONG even when
 * the frame also ends early. */
bool field_str(struct field_cursor *c, struct baton_relay_str *s, uint16_t max,
	       enum field_rule rule, const char *field)
{
	if (c->mode != FIELD_READ && !check_str(c, s, max, rule, field))
		return false;
	if (!field_u16(c, &s->len, field))
		return false;
	if (c->mode == FIELD_READ && s->len > max)
		return field_fail(c, BATON_RELAY_ETOO_LONG,
				  "%s is %u bytes, above the limit of %u",
				  field, s->len, max);
	const uint8_t *p =
		c->mode == FIELD_READ ? NULL : (const uint8_t *)s->ptr;
	if (!field_span(c, &p, s->len, field))
		return false;
	s->ptr = (const char *)p;
	return c->mode != FIELD_READ || check_str(c, s, max, rule, field);
}

bool field_release(struct field_cursor *c, struct baton_release *r)
{
	if (!field_u16(c, &r->major, "release major") ||
	    !field_u16(c, &r->minor, "release minor") ||
	    !field_u16(c, &r->patch, "release patch"))
		return false;
	if (r->major == 0 && r->minor == 0 && r->patch == 0)
		return field_fail(c, BATON_RELAY_EBAD_VALUE,
				  "release is 0.0.0, which means none");
	return true;
}

bool field_nonzero(struct field_cursor *c, uint64_t v, const char *field)
{
	if (v == 0)
		return field_fail(c, BATON_RELAY_EBAD_VALUE, "%s is 0", field);
	return true;
}

/* ---- extension areas --------------------------------------------------- */

/* Check an area of len bytes: entries in bounds, tags ascending and not
 * 0, no critical tag (this edition defines none, so every tag is
 * unknown), at most max bytes and BATON_RELAY_EXT_ENTRIES_MAX entries. */
static bool check_ext(struct field_cursor *c, const struct baton_relay_ext *e,
		      uint32_t max)
{
	if (e->len > max)
		return field_fail(
			c, BATON_RELAY_EBAD_EXTENSION,
			"extension area is %u bytes, above the limit of %u",
			e->len, max);
	if (e->len > 0 && e->ptr == NULL)
		return field_fail(c, BATON_RELAY_EBAD_EXTENSION,
				  "extension area is NULL");
	struct baton_le_reader r = baton_le_reader(e->ptr, e->len);
	uint32_t entries = 0;
	uint16_t prev = 0;
	while (baton_le_left(&r) > 0) {
		uint16_t tag, len;
		const uint8_t *value;
		size_t at = e->len - baton_le_left(&r);
		if (!baton_le_read_u16(&r, &tag) ||
		    !baton_le_read_u16(&r, &len) ||
		    !baton_le_read_bytes(&r, len, &value))
			return field_fail(
				c, BATON_RELAY_EBAD_EXTENSION,
				"extension entry at offset %zu of the area "
				"runs past its end (%u bytes)",
				at, e->len);
		if (++entries > BATON_RELAY_EXT_ENTRIES_MAX)
			return field_fail(c, BATON_RELAY_EBAD_EXTENSION,
					  "more than %u extension entries",
					  BATON_RELAY_EXT_ENTRIES_MAX);
		if (tag <= prev)
			return field_fail(
				c, BATON_RELAY_EBAD_EXTENSION,
				"extension tag 0x%04x follows 0x%04x: tags "
				"must be ascending and not 0",
				tag, prev);
		if (tag & BATON_RELAY_EXT_CRITICAL)
			return field_fail(
				c, BATON_RELAY_EUNKNOWN_CRITICAL,
				"critical extension tag 0x%04x is unknown "
				"to this release",
				tag);
		prev = tag;
	}
	return true;
}

/* The rest of the area being walked is the extension area. */
bool field_ext(struct field_cursor *c, struct baton_relay_ext *e, uint32_t max)
{
	if (c->mode == FIELD_READ) {
		e->ptr = c->in + c->pos;
		e->len = (uint32_t)(c->end - c->pos);
	}
	if (!check_ext(c, e, max))
		return false;
	const uint8_t *p = e->ptr;
	return field_span(c, &p, e->len, "extension area");
}

bool baton_relay_ext_next(struct baton_relay_ext *rest,
			  struct baton_relay_ext_entry *out)
{
	if (rest->len == 0)
		return false;
	struct baton_le_reader r = baton_le_reader(rest->ptr, rest->len);
	bool ok = baton_le_read_u16(&r, &out->tag) &&
		  baton_le_read_u16(&r, &out->len) &&
		  baton_le_read_bytes(&r, out->len, &out->value);
	BATON_ASSERT(ok); /* the area was validated */
	rest->len = (uint32_t)baton_le_left(&r);
	rest->ptr = r.p;
	return true;
}

bool relay_ext_find(const struct baton_relay_ext *area, uint16_t tag,
		    struct baton_relay_ext_entry *e)
{
	BATON_ASSERT(area != NULL && e != NULL);
	struct baton_relay_ext rest = *area;
	while (baton_relay_ext_next(&rest, e))
		if (e->tag == tag)
			return true;
	return false;
}

bool relay_ext_find_fixed(const struct baton_relay_ext *area, uint16_t tag,
			  const char *name, uint16_t len,
			  struct baton_relay_ext_entry *e,
			  struct baton_relay_err *err)
{
	BATON_ASSERT(name != NULL && err != NULL);
	if (!relay_ext_find(area, tag, e)) {
		e->value = NULL;
		return true;
	}
	if (e->len != len)
		return relay_set_err(
			err, BATON_RELAY_EBAD_EXTENSION,
			"%s (tag 0x%04x) is %u bytes, it must be %u", name,
			(unsigned)tag, (unsigned)e->len, (unsigned)len);
	return true;
}

/* ---- records ----------------------------------------------------------- */

/* A record: a u16 length, then fields, then the record's extension area,
 * which takes the rest of the length. `walk` walks the fields (not the
 * extension area, which is in *ext). */
static bool io_record(struct field_cursor *c, struct baton_relay_ext *ext,
		      bool (*walk)(struct field_cursor *, void *), void *value)
{
	size_t start = c->pos;
	uint16_t len = 0;
	if (!field_u16(c, &len, "record length"))
		return false;
	size_t outer_end = c->end;
	if (c->mode == FIELD_READ) {
		if (!have(c, len, "record"))
			return false;
		c->end = c->pos + len;
	}
	if (!walk(c, value) || !field_ext(c, ext, BATON_RELAY_RECORD_EXT_MAX))
		return false;
	c->end = outer_end;
	size_t walked = c->pos - start - 2;
	BATON_ASSERT(walked <= RELAY_NODE_RECORD_MAX);
	if (c->mode == FIELD_WRITE)
		baton_le_put_u16(c->out + start, (uint16_t)walked);
	BATON_ASSERT(c->mode != FIELD_READ || walked == len);
	return true;
}

/* (cluster id bytes, node id) strictly after (prev_id, prev_node). */
static int order(struct baton_relay_str a, baton_node_id an,
		 struct baton_relay_str b, baton_node_id bn)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int cmp = n > 0 ? memcmp(a.ptr, b.ptr, n) : 0;
	if (cmp == 0)
		cmp = (a.len > b.len) - (a.len < b.len);
	if (cmp == 0)
		cmp = (an > bn) - (an < bn);
	return cmp;
}

static bool check_order(struct field_cursor *c, uint16_t i,
			struct baton_relay_str *prev_id, baton_node_id *prev,
			struct baton_relay_str id, baton_node_id node)
{
	if (i > 0 && order(*prev_id, *prev, id, node) >= 0)
		return field_fail(
			c, BATON_RELAY_EBAD_ORDER,
			"node %llu of cluster \"%.*s\" is not after node "
			"%llu of cluster \"%.*s\"",
			(unsigned long long)node, (int)id.len, id.ptr,
			(unsigned long long)*prev, (int)prev_id->len,
			prev_id->ptr);
	*prev_id = id;
	*prev = node;
	return true;
}

static bool io_count(struct field_cursor *c, uint16_t *count)
{
	if (!field_u16(c, count, "node count"))
		return false;
	if (*count > BATON_RELAY_NODES_MAX)
		return field_fail(c, BATON_RELAY_ETOO_MANY,
				  "%u nodes, above the limit of %u", *count,
				  BATON_RELAY_NODES_MAX);
	return true;
}

static bool walk_node(struct field_cursor *c, void *value)
{
	struct baton_relay_node *n = value;
	return field_str(c, &n->cluster_id, BATON_RELAY_ID_MAX, FIELD_IDENT,
			 "cluster id") &&
	       field_u64(c, &n->node_id, "node id") &&
	       field_nonzero(c, n->node_id, "node id") &&
	       field_u64(c, &n->incarnation, "incarnation") &&
	       field_nonzero(c, n->incarnation, "incarnation") &&
	       field_release(c, &n->release) &&
	       field_str(c, &n->address, BATON_RELAY_ADDR_MAX, FIELD_IDENT,
			 "address") &&
	       field_bool(c, &n->connected, "connected");
}

static bool walk_node_status(struct field_cursor *c, void *value)
{
	struct baton_relay_node_status *s = value;
	return field_str(c, &s->cluster_id, BATON_RELAY_ID_MAX, FIELD_IDENT,
			 "cluster id") &&
	       field_u64(c, &s->node_id, "node id") &&
	       field_nonzero(c, s->node_id, "node id") &&
	       field_u64(c, &s->incarnation, "incarnation") &&
	       field_nonzero(c, s->incarnation, "incarnation") &&
	       field_bool(c, &s->connected, "connected") &&
	       field_u32(c, &s->queue_messages, "queue messages") &&
	       field_u64(c, &s->queue_bytes, "queue bytes") &&
	       field_u64(c, &s->messages_in, "messages in") &&
	       field_u64(c, &s->messages_out, "messages out");
}

/* Walk record i: from array[i] (encoding) or the input. *id and *node
 * receive its key, for the order check. */
static bool walk_record(struct field_cursor *c, const void *array, uint16_t i,
			bool status, struct baton_relay_str *id,
			baton_node_id *node)
{
	if (status) {
		struct baton_relay_node_status s = {0};
		if (c->mode != FIELD_READ)
			s = ((const struct baton_relay_node_status *)array)[i];
		if (!io_record(c, &s.ext, walk_node_status, &s))
			return false;
		*id = s.cluster_id;
		*node = s.node_id;
		return true;
	}
	struct baton_relay_node n = {0};
	if (c->mode != FIELD_READ)
		n = ((const struct baton_relay_node *)array)[i];
	if (!io_record(c, &n.ext, walk_node, &n))
		return false;
	*id = n.cluster_id;
	*node = n.node_id;
	return true;
}

/* The records of a VIEW (status false) or STATUS_REPLY: count, then each
 * record in order. To encode they come from `array`; decoded, *list is
 * set to their bytes. */
bool field_records(struct field_cursor *c, uint16_t *count, const void *array,
		   struct baton_relay_list *list, bool status)
{
	if (!io_count(c, count))
		return false;
	if (c->mode != FIELD_READ && *count > 0 && array == NULL)
		return field_fail(c, BATON_RELAY_EBAD_VALUE,
				  "%u nodes but no array", *count);
	char frame[sizeof c->where];
	memcpy(frame, c->where, sizeof frame);
	size_t start = c->pos;
	struct baton_relay_str prev_id = {NULL, 0};
	baton_node_id prev = 0;
	for (uint16_t i = 0; i < *count; i++) {
		snprintf(c->where, sizeof c->where, "%.40s node %u", frame, i);
		struct baton_relay_str id;
		baton_node_id node;
		if (!walk_record(c, array, i, status, &id, &node) ||
		    !check_order(c, i, &prev_id, &prev, id, node))
			return false;
	}
	memcpy(c->where, frame, sizeof frame);
	if (c->mode == FIELD_READ)
		*list = (struct baton_relay_list){c->in + start,
						  (uint32_t)(c->pos - start)};
	return true;
}

/* Walk one record of a decoded list (already validated). */
static bool list_next(struct baton_relay_list *rest,
		      struct baton_relay_ext *ext,
		      bool (*walk)(struct field_cursor *, void *), void *value)
{
	if (rest->len == 0)
		return false;
	struct baton_relay_err err = {0};
	struct field_cursor c = {.mode = FIELD_READ,
				 .in = rest->ptr,
				 .end = rest->len,
				 .err = &err};
	bool ok = io_record(&c, ext, walk, value);
	BATON_ASSERT(ok); /* the list came from a decoded frame */
	rest->ptr += c.pos;
	rest->len -= (uint32_t)c.pos;
	return true;
}

bool baton_relay_view_next(struct baton_relay_list *rest,
			   struct baton_relay_node *out)
{
	return list_next(rest, &out->ext, walk_node, out);
}

bool baton_relay_status_next(struct baton_relay_list *rest,
			     struct baton_relay_node_status *out)
{
	return list_next(rest, &out->ext, walk_node_status, out);
}
