/*
 * Entry payloads: a write command as it travels through the log.
 *
 *   u8  format (KV_PAYLOAD_FORMAT = 1)
 *   u32 argc (1..KV_ARGS_MAX)
 *   argc times: u32 length, then that many bytes (argument 0 is the name)
 *
 * Integers are little-endian; nothing follows the last argument. The
 * decoder checks every length against what is left before it reads.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "le.h"

#define PAYLOAD_HEADER_BYTES 5u /* format and argc */
#define PAYLOAD_LEN_BYTES 4u

int kv_encode(int argc, const uint8_t *const *argv, const size_t *lens,
	      struct baton_buf *out)
{
	if (argc < 1 || (unsigned)argc > KV_ARGS_MAX)
		return BATON_EINVAL;
	/* At most 65536 * (4 + 512 MiB): no overflow in 64 bits. */
	uint64_t total = PAYLOAD_HEADER_BYTES;
	for (int i = 0; i < argc; i++) {
		if (lens[i] > KV_VALUE_BYTES_MAX)
			return BATON_EINVAL;
		total += PAYLOAD_LEN_BYTES + (uint64_t)lens[i];
	}
	if (total > BATON_BUF_BYTES_MAX)
		return BATON_ENOMEM;
	int rv = baton_buf_reserve(out, (size_t)total);
	if (rv != 0)
		return rv;
	uint8_t *p = out->data + out->len;
	p[0] = KV_PAYLOAD_FORMAT;
	baton_le_put_u32(p + 1, (uint32_t)argc);
	p += PAYLOAD_HEADER_BYTES;
	for (int i = 0; i < argc; i++) {
		baton_le_put_u32(p, (uint32_t)lens[i]);
		p += PAYLOAD_LEN_BYTES;
		if (lens[i] > 0)
			memcpy(p, argv[i], lens[i]);
		p += lens[i];
	}
	assert((uint64_t)(p - (out->data + out->len)) == total);
	out->len += (size_t)total;
	return 0;
}

/* Walk the arguments; fill argv/lens when they are not NULL. */
static int walk(const uint8_t *buf, size_t len, uint32_t argc,
		const uint8_t **argv, size_t *lens)
{
	struct baton_le_reader r = baton_le_reader(buf + PAYLOAD_HEADER_BYTES,
						   len - PAYLOAD_HEADER_BYTES);
	for (uint32_t i = 0; i < argc; i++) {
		uint32_t n;
		const uint8_t *arg;
		if (!baton_le_read_u32(&r, &n) ||
		    !baton_le_read_bytes(&r, n, &arg))
			return BATON_ECORRUPT;
		if (argv != NULL) {
			argv[i] = arg;
			lens[i] = n;
		}
	}
	return baton_le_left(&r) == 0 ? 0 : BATON_ECORRUPT;
}

int kv__payload_decode(const uint8_t *buf, size_t len, struct kv__payload *p)
{
	memset(p, 0, sizeof *p);
	if (len < 1 || buf[0] == 0)
		return BATON_ECORRUPT;
	if (buf[0] > KV_PAYLOAD_FORMAT)
		return BATON_EVERSION;
	if (len < PAYLOAD_HEADER_BYTES)
		return BATON_ECORRUPT;
	uint32_t argc = baton_le_get_u32(buf + 1);
	if (argc == 0 || argc > KV_ARGS_MAX ||
	    argc > (len - PAYLOAD_HEADER_BYTES) / PAYLOAD_LEN_BYTES)
		return BATON_ECORRUPT;
	int rv = walk(buf, len, argc, NULL, NULL);
	if (rv != 0)
		return rv;
	const uint8_t **argv = p->argv_inline;
	size_t *lens = p->lens_inline;
	if (argc > KV_PAYLOAD_ARGS_INLINE) {
		p->argv_heap = calloc(argc, sizeof *p->argv_heap);
		p->lens_heap = calloc(argc, sizeof *p->lens_heap);
		if (p->argv_heap == NULL || p->lens_heap == NULL) {
			kv__payload_free(p);
			return BATON_ENOMEM;
		}
		argv = p->argv_heap;
		lens = p->lens_heap;
	}
	rv = walk(buf, len, argc, argv, lens);
	assert(rv == 0);
	p->args.argc = (int)argc;
	p->args.argv = argv;
	p->args.lens = lens;
	return 0;
}

void kv__payload_free(struct kv__payload *p)
{
	free(p->argv_heap);
	free(p->lens_heap);
	p->argv_heap = NULL;
	p->lens_heap = NULL;
}
