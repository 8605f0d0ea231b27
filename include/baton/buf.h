/*
 * A growable byte buffer: what the codecs write into (RESP replies, peer
 * frames, entry payloads, snapshots) and what the RESP parser reads from.
 *
 * The buffer owns `data`. Bytes data[0..len) are the contents; data[len..cap)
 * is spare room that a caller may fill directly after baton_buf_reserve()
 * and then account for by raising `len` (a socket read does this). A caller
 * may also lower `len` to drop a tail it wrote. `data` is NULL while `cap`
 * is 0. A struct baton_buf is not shared between threads.
 */
#ifndef BATON_BUF_H
#define BATON_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The largest buffer baton_buf_reserve() grows to (overflow protection; the
 * real limits are the callers' named ones). */
#define BATON_BUF_BYTES_MAX ((size_t)SIZE_MAX / 2)

/* See the top of this file. Zero-initialized is the same as initialized. */
struct baton_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* An empty buffer that holds no memory yet. Cannot fail. */
void baton_buf_init(struct baton_buf *b);

/* Release the memory; the buffer is then empty, as after baton_buf_init(),
 * and may be used again. Safe on an initialized, never-used buffer. */
void baton_buf_free(struct baton_buf *b);

/* Empty the buffer (len = 0) but keep its memory for reuse. */
void baton_buf_reset(struct baton_buf *b);

/* Make sure at least `extra` bytes of spare room follow the contents
 * (cap - len >= extra), growing geometrically. Returns 0, or BATON_ENOMEM
 * (also when len + extra would exceed BATON_BUF_BYTES_MAX), in which case
 * the buffer is unchanged. Pointers into `data` are invalidated by growth. */
int baton_buf_reserve(struct baton_buf *b, size_t extra);

/* Append len bytes copied from `data` (which may be NULL when len is 0 and
 * must not point into this buffer). Returns 0, or BATON_ENOMEM with the
 * buffer unchanged. */
int baton_buf_append(struct baton_buf *b, const void *data, size_t len);

/* Append the printf-style text (no terminating NUL). Returns 0, or
 * BATON_ENOMEM (or BATON_EINVAL for a format error) with the buffer
 * unchanged. */
int baton_buf_printf(struct baton_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int baton_buf_vprintf(struct baton_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

#endif /* BATON_BUF_H */
