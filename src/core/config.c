/*
 * Encoding of membership configurations, as stored in CONFIG log entries
 * and snapshots.
 *
 * Format (little endian): u8 format version (1), u8 member count, then per
 * member u64 id and u8 role. A later format may append fields per member; a
 * decoder refuses a version it does not know rather than guess.
 */
#include "core.h"

#include <string.h>

#define CONFIG_FORMAT 1
#define CONFIG_HEADER_LEN 2u
#define CONFIG_MEMBER_LEN 9u

size_t baton_config_encoded_len(const struct baton_config *c)
{
	return CONFIG_HEADER_LEN + (size_t)c->n * CONFIG_MEMBER_LEN;
}

int baton_config_encode(const struct baton_config *c, uint8_t *buf, size_t cap,
			size_t *len_out)
{
	if (c->n > BATON_MAX_MEMBERS)
		return BATON_EINVAL;
	size_t len = baton_config_encoded_len(c);
	if (len > cap)
		return BATON_ETOOBIG;
	BATON_ASSERT(len <=
		     CONFIG_HEADER_LEN + BATON_MAX_MEMBERS * CONFIG_MEMBER_LEN);
	buf[0] = CONFIG_FORMAT;
	buf[1] = (uint8_t)c->n;
	uint8_t *p = buf + CONFIG_HEADER_LEN;
	for (uint32_t i = 0; i < c->n; i++, p += CONFIG_MEMBER_LEN) {
		baton_le_put_u64(p, c->members[i].id);
		p[8] = (uint8_t)c->members[i].role;
	}
	BATON_ASSERT((size_t)(p - buf) == len);
	*len_out = len;
	return 0;
}

int baton_config_decode(const uint8_t *buf, size_t len,
			struct baton_config *out)
{
	BATON_ASSERT(len == 0 || buf != NULL);
	if (len < CONFIG_HEADER_LEN)
		return BATON_ECORRUPT;
	if (buf[0] != CONFIG_FORMAT)
		return buf[0] > CONFIG_FORMAT ? BATON_EVERSION : BATON_ECORRUPT;
	uint32_t n = buf[1];
	if (n > BATON_MAX_MEMBERS ||
	    len != CONFIG_HEADER_LEN + (size_t)n * CONFIG_MEMBER_LEN)
		return BATON_ECORRUPT;
	struct baton_config c;
	memset(&c, 0, sizeof c);
	const uint8_t *p = buf + CONFIG_HEADER_LEN;
	for (uint32_t i = 0; i < n; i++, p += CONFIG_MEMBER_LEN) {
		baton_node_id id = baton_le_get_u64(p);
		uint8_t role = p[8];
		if (id == 0 || (role != BATON_VOTER && role != BATON_LEARNER))
			return BATON_ECORRUPT;
		if (baton_config_find(&c, id) != NULL)
			return BATON_ECORRUPT;
		c.members[c.n].id = id;
		c.members[c.n].role = role;
		c.n++;
	}
	BATON_ASSERT(c.n == n && p == buf + len);
	*out = c;
	return 0;
}

const struct baton_member *baton_config_find(const struct baton_config *c,
					     baton_node_id id)
{
	BATON_ASSERT(c->n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < c->n; i++)
		if (c->members[i].id == id)
			return &c->members[i];
	return NULL;
}
