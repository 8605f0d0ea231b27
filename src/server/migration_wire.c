/*
 * The migration's messages, carried as relay DATA payloads between the two
 * clusters' leaders (docs/relay.md, "Messages"). Unlike the relay protocol
 * they are not frozen for ever, only for the two releases of one
 * migration: a receiver refuses a type or a shape it does not know, and the
 * stream then stalls with that reason in INFO rather than guess.
 *
 * Encoding, little-endian: u8 type, u64 session, u64 applied, u64 index,
 * u64 value, u32 data length, data. Every type has all fields (unused ones
 * zero), which keeps the decoder one path.
 */
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "le.h"
#include "migration.h"

#define MSG_FIXED_BYTES (1u + 8u * 4u + 4u)
/* A CHUNK holds about MIG_CHUNK_BYTES of records, an ENTRY one kv
 * payload: both far below the relay's 8 MiB payload limit, which bounds
 * every message. */
#define MSG_DATA_MAX ((size_t)8 << 20)

const char *migration_msg_name(uint8_t type)
{
	static const char *const names[] = {
		NULL,	"EXPORT_REQ", "BEGIN",	 "CHUNK",  "END",	"ENTRY",
		"HEAD", "ACK",	      "HANDOFF", "FENCED", "AUTHORITY",
	};
	_Static_assert(sizeof names / sizeof names[0] == MIG_MSG_TYPE_MAX + 1,
		       "one name per type");
	return type >= 1 && type <= MIG_MSG_TYPE_MAX ? names[type] : "UNKNOWN";
}

int migration_msg_encode(const struct migration_msg *m, struct baton_buf *out)
{
	BATON_ASSERT(m->type >= 1 && m->type <= MIG_MSG_TYPE_MAX);
	if (m->len > MSG_DATA_MAX || (m->len > 0 && m->data == NULL))
		return BATON_EINVAL;
	uint8_t head[MSG_FIXED_BYTES];
	head[0] = m->type;
	baton_le_put_u64(head + 1, m->session);
	baton_le_put_u64(head + 9, m->applied);
	baton_le_put_u64(head + 17, m->index);
	baton_le_put_u64(head + 25, m->value);
	baton_le_put_u32(head + 33, (uint32_t)m->len);
	if (baton_buf_reserve(out, sizeof head + m->len) != 0)
		return BATON_ENOMEM;
	int rv = baton_buf_append(out, head, sizeof head);
	if (rv == 0 && m->len > 0)
		rv = baton_buf_append(out, m->data, m->len);
	BATON_ASSERT(rv == 0); /* reserved */
	return 0;
}

int migration_msg_decode(const uint8_t *buf, size_t len,
			 struct migration_msg *out)
{
	struct baton_le_reader r = baton_le_reader(buf, len);
	const uint8_t *type;
	uint32_t data_len;
	struct migration_msg m = {0};
	if (!baton_le_read_bytes(&r, 1, &type) ||
	    !baton_le_read_u64(&r, &m.session) ||
	    !baton_le_read_u64(&r, &m.applied) ||
	    !baton_le_read_u64(&r, &m.index) ||
	    !baton_le_read_u64(&r, &m.value) ||
	    !baton_le_read_u32(&r, &data_len))
		return BATON_ECORRUPT;
	m.type = type[0];
	if (m.type < 1 || m.type > MIG_MSG_TYPE_MAX ||
	    data_len > MSG_DATA_MAX || baton_le_left(&r) != data_len)
		return BATON_ECORRUPT;
	if (data_len > 0 && !baton_le_read_bytes(&r, data_len, &m.data))
		return BATON_ECORRUPT;
	m.len = data_len;
	/* Cluster ids are what the relay allows: 1 to 255 bytes. */
	if ((m.type == MIG_EXPORT_REQ || m.type == MIG_AUTHORITY) &&
	    (m.len == 0 || m.len > MIG_CLUSTER_MAX))
		return BATON_ECORRUPT;
	*out = m;
	return 0;
}
