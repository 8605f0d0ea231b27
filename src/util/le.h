/*
 * The one little-endian codec of baton: every persisted or framed integer
 * (log records, snapshot and meta headers, entry payloads, the version
 * state, frame lengths) is written and read with these, so there is one
 * place that fixes the byte order.
 *
 * baton_le_put_* / baton_le_get_* work on a buffer the caller has already
 * sized. Decoders of untrusted bytes use struct baton_le_reader instead:
 * every read checks what is left first and fails (false) rather than run
 * past the end, so a decoder cannot forget a bounds check.
 *
 * Header-only and libc-only, so the pure core may use it too.
 */
#ifndef BATON_UTIL_LE_H
#define BATON_UTIL_LE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void baton_le_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void baton_le_put_u32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void baton_le_put_u64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t baton_le_get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t baton_le_get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t baton_le_get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* ---- bounds-checked reading of untrusted bytes --------------------------- */

/* A cursor over [p, end). Not owned. */
struct baton_le_reader {
	const uint8_t *p;
	const uint8_t *end;
};

static inline struct baton_le_reader baton_le_reader(const uint8_t *buf,
						     size_t len)
{
	return (struct baton_le_reader){buf, buf + len};
}

/* Bytes not yet read. */
static inline size_t baton_le_left(const struct baton_le_reader *r)
{
	return (size_t)(r->end - r->p);
}

/* Point *out at the next n bytes and step over them; false (nothing read)
 * when fewer are left. */
static inline bool baton_le_read_bytes(struct baton_le_reader *r, size_t n,
				       const uint8_t **out)
{
	if (baton_le_left(r) < n)
		return false;
	*out = r->p;
	r->p += n;
	return true;
}

static inline bool baton_le_read_u16(struct baton_le_reader *r, uint16_t *v)
{
	const uint8_t *p;
	if (!baton_le_read_bytes(r, 2, &p))
		return false;
	*v = baton_le_get_u16(p);
	return true;
}

static inline bool baton_le_read_u32(struct baton_le_reader *r, uint32_t *v)
{
	const uint8_t *p;
	if (!baton_le_read_bytes(r, 4, &p))
		return false;
	*v = baton_le_get_u32(p);
	return true;
}

static inline bool baton_le_read_u64(struct baton_le_reader *r, uint64_t *v)
{
	const uint8_t *p;
	if (!baton_le_read_bytes(r, 8, &p))
		return false;
	*v = baton_le_get_u64(p);
	return true;
}

#endif /* BATON_UTIL_LE_H */
