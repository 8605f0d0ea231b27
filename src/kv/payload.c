/*
 * Entry payloads: what travels through the log.
 *
 * Format 1 (any machine version), one write command:
 *   u8  format 1
 *   a command: u32 argc (1..KV_ARGS_MAX), then argc times u32 length and
 *   that many bytes (argument 0 is the name)
 *
 * Format 2 (machine version 2):
 *   u8  format 2
 *   u64 stamp_ms, the leader's machine-time stamp (at most INT64_MAX;
 *       docs/kv.md, "Machine time")
 *   u8  kind, then its body:
 *     1 command      a command, as in format 1
 *     2 transaction  u32 n_watches (<= KV_TXN_WATCHES_MAX), each u32 key
 *                    length, key, u64 watch hash; u32 n_commands
 *                    (<= KV_TXN_COMMANDS_MAX), each a command
 *     3 sweep        u32 max_keys (<= KV_SWEEP_KEYS_MAX)
 *   migration (docs/kv.md "Migration"; kinds 5..9 have stamp 0):
 *     4 fence        u8 target length (<= 255), the target cluster id
 *     5 import begin u64 snapshot index, u64 machine time (<= INT64_MAX),
 *                    then optionally the source cluster's 16-byte UUID
 *     6 import chunk u64 snapshot index, u32 chunk seq, export records to
 *                    the end
 *     7 import end   u64 snapshot index, u32 chunks
 *     8 import entry u64 old index (>= 1), an old payload (format 1 or 2)
 *                    to the end
 *     9 authority    u64 from old index
 *    10 control      u8 operation (1 abort, 2 resume, 3 unfence, 4 seal)
 *
 * Integers are little-endian; nothing follows the body. The decoder checks
 * every length against what is left before it reads. Kind 0 is corrupt; a
 * kind above 10 is a later machine version's (BATON_EVERSION).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PAYLOAD_LEN_BYTES 4u
#define PAYLOAD_V2_HEADER_BYTES 10u /* format, stamp, kind */
#define KV_KIND_MAX KV_KIND_CONTROL

/* ---- encoding ---- */

/* Add the encoded size of a command to *total; BATON_EINVAL if it breaks
 * a limit. At most 65536 * (4 + 512 MiB) per command: no overflow. */
static int command_size(int argc, const size_t *lens, uint64_t *total)
{
	if (argc < 1 || (unsigned)argc > KV_ARGS_MAX)
		return BATON_EINVAL;
	*total += PAYLOAD_LEN_BYTES;
	for (int i = 0; i < argc; i++) {
		if (lens[i] > KV_VALUE_BYTES_MAX)
			return BATON_EINVAL;
		*total += PAYLOAD_LEN_BYTES + (uint64_t)lens[i];
	}
	return 0;
}

static uint8_t *put_command(uint8_t *p, int argc, const uint8_t *const *argv,
			    const size_t *lens)
{
	baton_le_put_u32(p, (uint32_t)argc);
	p += PAYLOAD_LEN_BYTES;
	for (int i = 0; i < argc; i++) {
		baton_le_put_u32(p, (uint32_t)lens[i]);
		p += PAYLOAD_LEN_BYTES;
		if (lens[i] > 0)
			memcpy(p, argv[i], lens[i]);
		p += lens[i];
	}
	return p;
}

/* Reserve total bytes of out: 0, or BATON_ENOMEM. */
static int reserve(struct baton_buf *out, uint64_t total)
{
	if (total > BATON_BUF_BYTES_MAX)
		return BATON_ENOMEM;
	return baton_buf_reserve(out, (size_t)total);
}

static uint8_t *put_v2_header(uint8_t *p, uint64_t stamp_ms, uint8_t kind)
{
	p[0] = KV_PAYLOAD_FORMAT_2;
	baton_le_put_u64(p + 1, stamp_ms);
	p[9] = kind;
	return p + PAYLOAD_V2_HEADER_BYTES;
}

int kv_encode(int argc, const uint8_t *const *argv, const size_t *lens,
	      struct baton_buf *out)
{
	uint64_t total = 1;
	int rv = command_size(argc, lens, &total);
	if (rv == 0)
		rv = reserve(out, total);
	if (rv != 0)
		return rv;
	uint8_t *p = out->data + out->len;
	p[0] = KV_PAYLOAD_FORMAT;
	p = put_command(p + 1, argc, argv, lens);
	assert((uint64_t)(p - (out->data + out->len)) == total);
	out->len += (size_t)total;
	return 0;
}

int kv_encode_v2(uint64_t stamp_ms, int argc, const uint8_t *const *argv,
		 const size_t *lens, struct baton_buf *out)
{
	if (stamp_ms > INT64_MAX)
		return BATON_EINVAL;
	uint64_t total = PAYLOAD_V2_HEADER_BYTES;
	int rv = command_size(argc, lens, &total);
	if (rv == 0)
		rv = reserve(out, total);
	if (rv != 0)
		return rv;
	uint8_t *p = out->data + out->len;
	p = put_v2_header(p, stamp_ms, KV_KIND_COMMAND);
	p = put_command(p, argc, argv, lens);
	assert((uint64_t)(p - (out->data + out->len)) == total);
	out->len += (size_t)total;
	return 0;
}

int kv_encode_txn(uint64_t stamp_ms, size_t n_watches,
		  const struct kv_watch *watches, size_t n_commands,
		  const struct kv_txn_command *commands, struct baton_buf *out)
{
	if (stamp_ms > INT64_MAX || n_watches > KV_TXN_WATCHES_MAX ||
	    n_commands > KV_TXN_COMMANDS_MAX)
		return BATON_EINVAL;
	uint64_t total = PAYLOAD_V2_HEADER_BYTES + 2 * PAYLOAD_LEN_BYTES;
	for (size_t i = 0; i < n_watches; i++) {
		if (watches[i].key_len > KV_KEY_BYTES_MAX)
			return BATON_EINVAL;
		total += PAYLOAD_LEN_BYTES + watches[i].key_len + 8;
	}
	for (size_t i = 0; i < n_commands; i++) {
		int rv = command_size(commands[i].argc, commands[i].lens,
				      &total);
		if (rv != 0)
			return rv;
	}
	int rv = reserve(out, total);
	if (rv != 0)
		return rv;
	uint8_t *p = out->data + out->len;
	p = put_v2_header(p, stamp_ms, KV_KIND_TXN);
	baton_le_put_u32(p, (uint32_t)n_watches);
	p += PAYLOAD_LEN_BYTES;
	for (size_t i = 0; i < n_watches; i++) {
		const struct kv_watch *w = &watches[i];
		baton_le_put_u32(p, (uint32_t)w->key_len);
		p += PAYLOAD_LEN_BYTES;
		if (w->key_len > 0)
			memcpy(p, w->key, w->key_len);
		p += w->key_len;
		baton_le_put_u64(p, w->hash);
		p += 8;
	}
	baton_le_put_u32(p, (uint32_t)n_commands);
	p += PAYLOAD_LEN_BYTES;
	for (size_t i = 0; i < n_commands; i++)
		p = put_command(p, commands[i].argc, commands[i].argv,
				commands[i].lens);
	assert((uint64_t)(p - (out->data + out->len)) == total);
	out->len += (size_t)total;
	return 0;
}

int kv_encode_sweep(uint64_t stamp_ms, uint32_t max_keys, struct baton_buf *out)
{
	if (stamp_ms > INT64_MAX || max_keys > KV_SWEEP_KEYS_MAX)
		return BATON_EINVAL;
	uint64_t total = PAYLOAD_V2_HEADER_BYTES + PAYLOAD_LEN_BYTES;
	int rv = reserve(out, total);
	if (rv != 0)
		return rv;
	uint8_t *p =
		put_v2_header(out->data + out->len, stamp_ms, KV_KIND_SWEEP);
	baton_le_put_u32(p, max_keys);
	out->len += (size_t)total;
	return 0;
}

/* ---- migration kinds ---- */

/* Append a format-2 payload of a migration kind: its header, the fixed
 * part head[0..head_len) and tail[0..tail_len). */
static int put_migration(struct baton_buf *out, uint64_t stamp_ms, uint8_t kind,
			 const uint8_t *head, size_t head_len,
			 const uint8_t *tail, size_t tail_len)
{
	assert(kind >= KV_KIND_FENCE && kind <= KV_KIND_MAX);
	assert(stamp_ms <= INT64_MAX);
	uint64_t total =
		PAYLOAD_V2_HEADER_BYTES + (uint64_t)head_len + tail_len;
	int rv = reserve(out, total);
	if (rv != 0)
		return rv;
	uint8_t *p = put_v2_header(out->data + out->len, stamp_ms, kind);
	memcpy(p, head, head_len);
	if (tail_len > 0)
		memcpy(p + head_len, tail, tail_len);
	out->len += (size_t)total;
	return 0;
}

int kv_encode_fence(uint64_t stamp_ms, const char *target_cluster,
		    struct baton_buf *out)
{
	if (stamp_ms > INT64_MAX || target_cluster == NULL)
		return BATON_EINVAL;
	size_t n = strlen(target_cluster);
	if (n > KV_FENCE_TARGET_BYTES_MAX)
		return BATON_EINVAL;
	uint8_t head = (uint8_t)n;
	return put_migration(out, stamp_ms, KV_KIND_FENCE, &head, 1,
			     (const uint8_t *)target_cluster, n);
}

int kv_encode_import_begin(uint64_t snapshot_index, uint64_t machine_time_ms,
			   struct baton_buf *out)
{
	if (machine_time_ms > INT64_MAX)
		return BATON_EINVAL;
	uint8_t head[16];
	baton_le_put_u64(head, snapshot_index);
	baton_le_put_u64(head + 8, machine_time_ms);
	return put_migration(out, 0, KV_KIND_IMPORT_BEGIN, head, sizeof head,
			     NULL, 0);
}

int kv_encode_import_begin_from(uint64_t snapshot_index,
				uint64_t machine_time_ms,
				const uint8_t uuid[KV_CLUSTER_UUID_BYTES],
				struct baton_buf *out)
{
	if (machine_time_ms > INT64_MAX || uuid == NULL)
		return BATON_EINVAL;
	uint8_t head[16];
	baton_le_put_u64(head, snapshot_index);
	baton_le_put_u64(head + 8, machine_time_ms);
	return put_migration(out, 0, KV_KIND_IMPORT_BEGIN, head, sizeof head,
			     uuid, KV_CLUSTER_UUID_BYTES);
}

int kv_encode_control(uint64_t stamp_ms, enum kv_control_op op,
		      struct baton_buf *out)
{
	if (stamp_ms > INT64_MAX || op < KV_CONTROL_ABORT ||
	    op > KV_CONTROL_SEAL)
		return BATON_EINVAL;
	uint8_t head = (uint8_t)op;
	return put_migration(out, stamp_ms, KV_KIND_CONTROL, &head, 1, NULL, 0);
}

int kv_encode_import_chunk(uint64_t snapshot_index, uint32_t chunk_seq,
			   const uint8_t *records, size_t len,
			   struct baton_buf *out)
{
	if ((records == NULL && len > 0) ||
	    kv__records_check(records, len) != 0)
		return BATON_EINVAL;
	uint8_t head[12];
	baton_le_put_u64(head, snapshot_index);
	baton_le_put_u32(head + 8, chunk_seq);
	return put_migration(out, 0, KV_KIND_IMPORT_CHUNK, head, sizeof head,
			     records, len);
}

int kv_encode_import_end(uint64_t snapshot_index, uint32_t chunks,
			 struct baton_buf *out)
{
	uint8_t head[12];
	baton_le_put_u64(head, snapshot_index);
	baton_le_put_u32(head + 8, chunks);
	return put_migration(out, 0, KV_KIND_IMPORT_END, head, sizeof head,
			     NULL, 0);
}

int kv_encode_import_entry(uint64_t old_index, const uint8_t *old_payload,
			   size_t len, struct baton_buf *out)
{
	if (old_index == 0 || old_payload == NULL || len == 0)
		return BATON_EINVAL;
	uint8_t head[8];
	baton_le_put_u64(head, old_index);
	size_t start = out->len;
	int rv = put_migration(out, 0, KV_KIND_IMPORT_ENTRY, head, sizeof head,
			       old_payload, len);
	if (rv != 0)
		return rv;
	/* Only what this release decodes: a payload it cannot read would
	 * stop every node of the new cluster at its entry. */
	struct kv__decoded d;
	rv = kv__decode(out->data + start, out->len - start, &d);
	kv__decoded_free(&d);
	if (rv != 0)
		out->len = start;
	return rv == 0 || rv == BATON_ENOMEM ? rv : BATON_EINVAL;
}

int kv_encode_authority(uint64_t from_old_index, struct baton_buf *out)
{
	uint8_t head[8];
	baton_le_put_u64(head, from_old_index);
	return put_migration(out, 0, KV_KIND_AUTHORITY, head, sizeof head, NULL,
			     0);
}

/* ---- decoding ---- */

int kv__args_read(struct baton_le_reader *r, struct kv__payload *p)
{
	memset(p, 0, sizeof *p);
	uint32_t argc;
	if (!baton_le_read_u32(r, &argc) || argc == 0 || argc > KV_ARGS_MAX ||
	    argc > baton_le_left(r) / PAYLOAD_LEN_BYTES)
		return BATON_ECORRUPT;
	const uint8_t **argv = p->argv_inline;
	size_t *lens = p->lens_inline;
	if (argc > KV_PAYLOAD_ARGS_INLINE) {
		p->argv_heap = kv__calloc(argc, sizeof *p->argv_heap);
		p->lens_heap = kv__calloc(argc, sizeof *p->lens_heap);
		if (p->argv_heap == NULL || p->lens_heap == NULL) {
			kv__payload_free(p);
			return BATON_ENOMEM;
		}
		argv = p->argv_heap;
		lens = p->lens_heap;
	}
	for (uint32_t i = 0; i < argc; i++) {
		uint32_t n;
		if (!baton_le_read_u32(r, &n) ||
		    !baton_le_read_bytes(r, n, &argv[i])) {
			kv__payload_free(p);
			return BATON_ECORRUPT;
		}
		lens[i] = n;
	}
	p->args.argc = (int)argc;
	p->args.argv = argv;
	p->args.lens = lens;
	return 0;
}

void kv__payload_free(struct kv__payload *p)
{
	kv__free(p->argv_heap);
	kv__free(p->lens_heap);
	p->argv_heap = NULL;
	p->lens_heap = NULL;
}

void kv__watch_read(struct baton_le_reader *r, const uint8_t **key, size_t *len,
		    uint64_t *hash)
{
	uint32_t n;
	bool ok = baton_le_read_u32(r, &n) && baton_le_read_bytes(r, n, key) &&
		  baton_le_read_u64(r, hash);
	assert(ok); /* kv__decode walked them */
	(void)ok;
	*len = n;
}

/* A reader over the bytes r passed since `start`. */
static struct baton_le_reader since(const uint8_t *start,
				    const struct baton_le_reader *r)
{
	return baton_le_reader(start, (size_t)(r->p - start));
}

static int decode_txn(struct baton_le_reader *r, struct kv__decoded *d)
{
	if (!baton_le_read_u32(r, &d->n_watches) ||
	    d->n_watches > KV_TXN_WATCHES_MAX)
		return BATON_ECORRUPT;
	const uint8_t *start = r->p;
	for (uint32_t i = 0; i < d->n_watches; i++) {
		uint32_t n;
		const uint8_t *key;
		uint64_t hash;
		if (!baton_le_read_u32(r, &n) || n > KV_KEY_BYTES_MAX ||
		    !baton_le_read_bytes(r, n, &key) ||
		    !baton_le_read_u64(r, &hash))
			return BATON_ECORRUPT;
	}
	d->watches = since(start, r);
	if (!baton_le_read_u32(r, &d->n_commands) ||
	    d->n_commands > KV_TXN_COMMANDS_MAX)
		return BATON_ECORRUPT;
	start = r->p;
	for (uint32_t i = 0; i < d->n_commands; i++) {
		struct kv__payload p;
		int rv = kv__args_read(r, &p);
		kv__payload_free(&p);
		if (rv != 0)
			return rv;
	}
	d->commands = since(start, r);
	return 0;
}

/* The body of a migration kind (the stamp read already). */
static int decode_migration(struct baton_le_reader *r, struct kv__decoded *d)
{
	const uint8_t *p;
	uint32_t n32;
	if (d->kind == KV_KIND_FENCE) {
		if (!baton_le_read_bytes(r, 1, &p))
			return BATON_ECORRUPT;
		d->target_len = p[0];
		if (!baton_le_read_bytes(r, d->target_len, &d->target) ||
		    memchr(d->target, 0, d->target_len) != NULL)
			return BATON_ECORRUPT;
		return 0;
	}
	if (d->kind == KV_KIND_CONTROL) {
		if (!baton_le_read_bytes(r, 1, &p) || p[0] < KV_CONTROL_ABORT ||
		    p[0] > KV_CONTROL_SEAL)
			return BATON_ECORRUPT;
		d->control_op = p[0];
		return 0;
	}
	/* The new side's kinds carry no stamp: machine time moves with the
	 * old payloads they hold. */
	if (d->stamp_ms != 0 || !baton_le_read_u64(r, &d->old_index))
		return BATON_ECORRUPT;
	switch (d->kind) {
	case KV_KIND_IMPORT_BEGIN: {
		uint64_t t;
		if (!baton_le_read_u64(r, &t) || t > INT64_MAX)
			return BATON_ECORRUPT;
		d->time_ms = (int64_t)t;
		if (baton_le_left(r) > 0 &&
		    !baton_le_read_bytes(r, KV_CLUSTER_UUID_BYTES,
					 &d->source_uuid))
			return BATON_ECORRUPT;
		return 0;
	}
	case KV_KIND_IMPORT_CHUNK:
		if (!baton_le_read_u32(r, &d->seq))
			return BATON_ECORRUPT;
		d->body_len = baton_le_left(r);
		if (!baton_le_read_bytes(r, d->body_len, &d->body))
			return BATON_ECORRUPT;
		return kv__records_check(d->body, d->body_len);
	case KV_KIND_IMPORT_END:
		if (!baton_le_read_u32(r, &n32))
			return BATON_ECORRUPT;
		d->seq = n32;
		return 0;
	case KV_KIND_IMPORT_ENTRY: {
		d->body_len = baton_le_left(r);
		if (d->old_index == 0 || d->body_len == 0 ||
		    !baton_le_read_bytes(r, d->body_len, &d->body))
			return BATON_ECORRUPT;
		/* A new side's kind is never an old cluster's write, and
		 * refusing it keeps the decoder from recursing. */
		if (d->body[0] == KV_PAYLOAD_FORMAT_2 &&
		    d->body_len > PAYLOAD_V2_HEADER_BYTES - 1 &&
		    kv__kind_imports(d->body[PAYLOAD_V2_HEADER_BYTES - 1]))
			return BATON_ECORRUPT;
		struct kv__decoded inner;
		int rv = kv__decode(d->body, d->body_len, &inner);
		kv__decoded_free(&inner);
		return rv;
	}
	default:
		assert(d->kind == KV_KIND_AUTHORITY);
		return 0;
	}
}

static int decode_v2(struct baton_le_reader *r, struct kv__decoded *d)
{
	uint64_t stamp;
	const uint8_t *kind;
	if (!baton_le_read_u64(r, &stamp) || stamp > INT64_MAX ||
	    !baton_le_read_bytes(r, 1, &kind) || kind[0] == 0)
		return BATON_ECORRUPT;
	if (kind[0] > KV_KIND_MAX)
		return BATON_EVERSION;
	d->stamp_ms = (int64_t)stamp;
	d->kind = kind[0];
	switch (d->kind) {
	case KV_KIND_COMMAND:
		return kv__args_read(r, &d->cmd);
	case KV_KIND_TXN:
		return decode_txn(r, d);
	case KV_KIND_SWEEP:
		if (!baton_le_read_u32(r, &d->sweep_keys) ||
		    d->sweep_keys > KV_SWEEP_KEYS_MAX)
			return BATON_ECORRUPT;
		return 0;
	default:
		return decode_migration(r, d);
	}
}

int kv__decode(const uint8_t *buf, size_t len, struct kv__decoded *d)
{
	memset(d, 0, sizeof *d);
	d->stamp_ms = -1;
	if (len < 1 || buf[0] == 0)
		return BATON_ECORRUPT;
	if (buf[0] > KV_PAYLOAD_FORMAT_MAX)
		return BATON_EVERSION;
	d->format = buf[0];
	struct baton_le_reader r = baton_le_reader(buf + 1, len - 1);
	int rv;
	if (d->format == KV_PAYLOAD_FORMAT) {
		d->kind = KV_KIND_COMMAND;
		rv = kv__args_read(&r, &d->cmd);
	} else {
		rv = decode_v2(&r, d);
	}
	if (rv == 0 && baton_le_left(&r) != 0)
		rv = BATON_ECORRUPT;
	if (rv != 0)
		kv__decoded_free(d);
	return rv;
}

void kv__decoded_free(struct kv__decoded *d)
{
	kv__payload_free(&d->cmd);
}
