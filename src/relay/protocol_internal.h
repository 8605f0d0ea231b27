/*
 * Shared by protocol.c (frames) and protocol_fields.c (fields): the cursor
 * that walks a body's fields and the walkers of each kind of field.
 *
 * Every field_* function walks one field in the cursor's mode:
 *   FIELD_MEASURE  check the value and count its bytes;
 *   FIELD_WRITE    check it and store its bytes at out + pos;
 *   FIELD_READ     load it from in + pos (up to end) and check it;
 * then advances pos. It returns false once a check fails (or, reading,
 * the area ends first), with the cursor's err filled: the wire code and a
 * text that starts with the cursor's `where` and names the field. A value
 * refused is refused in every mode, by the same test.
 */
#ifndef BATON_RELAY_PROTOCOL_INTERNAL_H
#define BATON_RELAY_PROTOCOL_INTERNAL_H

#include "protocol.h"

/* The largest record of a list, so that its u16 length always fits: a
 * VIEW node with both strings and its extension area at their limits
 * (a STATUS_REPLY node is smaller). */
#define RELAY_NODE_RECORD_MAX                                                  \
	(2u + 2u + BATON_RELAY_ID_MAX + 8u + 8u + 6u + 2u +                    \
	 BATON_RELAY_ADDR_MAX + 1u + BATON_RELAY_RECORD_EXT_MAX)

enum field_mode { FIELD_MEASURE, FIELD_WRITE, FIELD_READ };

struct field_cursor {
	enum field_mode mode;
	uint8_t *out;	   /* FIELD_WRITE */
	const uint8_t *in; /* FIELD_READ */
	size_t pos;	   /* bytes walked from out or in */
	size_t end;	   /* FIELD_READ: the end of the area being read */
	char where[64];	   /* "VIEW node 3": the context of messages */
	struct baton_relay_err *err;
};

/* Fill *err (code, printf-style text); returns false, so that a check can
 * `return relay_set_err(...)`. */
bool relay_set_err(struct baton_relay_err *err, uint16_t code, const char *fmt,
		   ...) __attribute__((format(printf, 3, 4)));
/* The same, the text prefixed with the cursor's `where`. */
bool field_fail(struct field_cursor *c, uint16_t code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The first entry of `area` (a decoded or validated area) with this tag:
 * true with *e filled, false if there is none. */
bool relay_ext_find(const struct baton_relay_ext *area, uint16_t tag,
		    struct baton_relay_ext_entry *e);
/* The first entry of `area` with this tag, of exactly `len` bytes: true
 * with *e filled; false with e->value NULL if there is none (not an
 * error: the entry is optional); false with *err filled (BAD_EXTENSION,
 * the text naming `name`, the tag and both lengths) if its length is not
 * `len`. */
bool relay_ext_find_fixed(const struct baton_relay_ext *area, uint16_t tag,
			  const char *name, uint16_t len,
			  struct baton_relay_ext_entry *e,
			  struct baton_relay_err *err);

bool field_u8(struct field_cursor *c, uint8_t *v, const char *field);
bool field_u16(struct field_cursor *c, uint16_t *v, const char *field);
bool field_u32(struct field_cursor *c, uint32_t *v, const char *field);
bool field_u64(struct field_cursor *c, uint64_t *v, const char *field);
/* A byte that is 0 or 1. */
bool field_bool(struct field_cursor *c, bool *v, const char *field);
/* n bytes, stored from *ptr (FIELD_WRITE) or pointed at in the input
 * (FIELD_READ). */
bool field_span(struct field_cursor *c, const uint8_t **ptr, size_t n,
		const char *field);

enum field_rule {
	FIELD_IDENT, /* cluster id, address: 1..max bytes, no control byte */
	FIELD_TEXT,  /* reason, error: 0..max bytes, no NUL */
};

/* A u16 length then the bytes; at most max, following the rule. */
bool field_str(struct field_cursor *c, struct baton_relay_str *s, uint16_t max,
	       enum field_rule rule, const char *field);
/* Three u16, not 0.0.0. */
bool field_release(struct field_cursor *c, struct baton_release *r);
/* Not a walker: refuses v == 0 (BAD_VALUE). */
bool field_nonzero(struct field_cursor *c, uint64_t v, const char *field);
/* The rest of the area being walked, as an extension area of at most max
 * bytes. */
bool field_ext(struct field_cursor *c, struct baton_relay_ext *e, uint32_t max);
/* A node count then that many records in strictly ascending order: VIEW
 * nodes (status false: `array` is struct baton_relay_node[]) or
 * STATUS_REPLY nodes (struct baton_relay_node_status[]). Read: *list is
 * set to the records' bytes and `array` is not used. */
bool field_records(struct field_cursor *c, uint16_t *count, const void *array,
		   struct baton_relay_list *list, bool status);

#endif /* BATON_RELAY_PROTOCOL_INTERNAL_H */
