/*
 * Message format 1: the unsealed migration messages of release 1.3.0
 * (commit 0ce4bfc, its src/server/migration_wire.c), which predates
 * sealing. A new node speaks it only to the one old cluster its operator
 * named with --migrate-from-unsealed (docs/relay.md, "Migrating from
 * 1.3.0"); nothing else ever reads or writes it.
 *
 * Little-endian, no magic, no sender, receiver or sequence number:
 *   u8  type (1..10: format 1 has no ENTRY_PART)
 *   u64 session, u64 applied, u64 index, u64 value
 *   u32 data length (at most 8 MiB), the data in clear
 * EXPORT_REQ and AUTHORITY carry a cluster id (1..255 bytes). A sealed
 * message starts with the magic 0xBA, which is no format-1 type, so the
 * two never pass for each other.
 */
#include <string.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "le.h"
#include "migration.h"

#define V1_HEAD_BYTES (1u + 8u * 4u + 4u)
/* 1.3.0's MSG_DATA_MAX, which bounds what it sends and reads. */
#define V1_DATA_MAX ((size_t)8 << 20)
#define V1_TYPE_MAX ((uint8_t)MIG_AUTHORITY)
_Static_assert(MIG_ENTRY_PART == V1_TYPE_MAX + 1,
	       "format 1's types are the first ten");

int migration_msg_encode_v1(const struct migration_msg *m,
			    struct baton_buf *out)
{
	if (m->type < 1 || m->type > V1_TYPE_MAX || m->len > V1_DATA_MAX ||
	    (m->len > 0 && m->data == NULL))
		return BATON_EINVAL;
	uint8_t head[V1_HEAD_BYTES];
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

int migration_msg_decode_v1(const uint8_t *buf, size_t len,
			    struct migration_msg *out)
{
	struct baton_le_reader r = baton_le_reader(buf, len);
	const uint8_t *type;
	uint32_t data_len;
	struct migration_msg m;
	memset(&m, 0, sizeof m);
	if (!baton_le_read_bytes(&r, 1, &type) ||
	    !baton_le_read_u64(&r, &m.session) ||
	    !baton_le_read_u64(&r, &m.applied) ||
	    !baton_le_read_u64(&r, &m.index) ||
	    !baton_le_read_u64(&r, &m.value) ||
	    !baton_le_read_u32(&r, &data_len))
		return BATON_ECORRUPT;
	m.type = type[0];
	if (m.type < 1 || m.type > V1_TYPE_MAX || data_len > V1_DATA_MAX ||
	    baton_le_left(&r) != data_len)
		return BATON_ECORRUPT;
	if (data_len > 0 && !baton_le_read_bytes(&r, data_len, &m.data))
		return BATON_ECORRUPT;
	m.len = data_len;
	if ((m.type == MIG_EXPORT_REQ || m.type == MIG_AUTHORITY) &&
	    (m.len == 0 || m.len > MIG_CLUSTER_MAX ||
	     memchr(m.data, 0, m.len) != NULL))
		return BATON_ECORRUPT;
	*out = m;
	return 0;
}
