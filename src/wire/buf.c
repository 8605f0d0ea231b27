/* The growable byte buffer (buf.h). */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/raft.h"
#include "baton/buf.h"

/* The first allocation, so that small replies do not grow byte by byte. */
#define BUF_FIRST_CAP_BYTES 64u

void baton_buf_init(struct baton_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void baton_buf_free(struct baton_buf *b)
{
	free(b->data);
	baton_buf_init(b);
}

void baton_buf_reset(struct baton_buf *b)
{
	b->len = 0;
}

int baton_buf_reserve(struct baton_buf *b, size_t extra)
{
	assert(b->len <= b->cap);
	assert(b->cap == 0 || b->data != NULL);
	if (b->cap - b->len >= extra)
		return 0;
	if (extra > BATON_BUF_BYTES_MAX - b->len)
		return BATON_ENOMEM;
	size_t need = b->len + extra;
	size_t cap = b->cap > 0 ? b->cap : BUF_FIRST_CAP_BYTES;
	while (cap < need)
		cap = cap <= BATON_BUF_BYTES_MAX / 2 ? cap * 2 : need;
	uint8_t *data = realloc(b->data, cap);
	if (data == NULL)
		return BATON_ENOMEM;
	b->data = data;
	b->cap = cap;
	return 0;
}

int baton_buf_append(struct baton_buf *b, const void *data, size_t len)
{
	if (len == 0)
		return 0;
	assert(data != NULL);
	int rv = baton_buf_reserve(b, len);
	if (rv != 0)
		return rv;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

int baton_buf_vprintf(struct baton_buf *b, const char *fmt, va_list ap)
{
	va_list again;
	va_copy(again, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	int rv = n < 0 ? BATON_EINVAL : baton_buf_reserve(b, (size_t)n + 1);
	if (rv == 0) {
		/* Room for vsnprintf's NUL, which the length leaves out. */
		vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, again);
		b->len += (size_t)n;
	}
	va_end(again);
	return rv;
}

int baton_buf_printf(struct baton_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rv = baton_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rv;
}
