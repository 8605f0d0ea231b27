/* Lines, integers and the baton format's byte escaping. */
#include <assert.h>
#include <string.h>

#include "internal.h"

void lincheck__lines_init(struct lincheck__lines *l, const char *data,
			  size_t len)
{
	l->p = data;
	l->end = data + len;
	l->line = 0;
}

int lincheck__lines_next(struct lincheck__lines *l, const char **s, size_t *n)
{
	if (l->p >= l->end)
		return 0;
	size_t left = (size_t)(l->end - l->p);
	const char *nl = memchr(l->p, '\n', left);
	size_t len = nl != NULL ? (size_t)(nl - l->p) : left;
	l->line++;
	*s = l->p;
	l->p += nl != NULL ? len + 1 : len;
	if (len > 0 && (*s)[len - 1] == '\r')
		len--;
	*n = len;
	if (len > LINCHECK_LINE_BYTES_MAX)
		return LINCHECK_ELIMIT;
	if (memchr(*s, '\0', len) != NULL)
		return LINCHECK_EMALFORMED;
	return 1;
}

int lincheck__line_error(struct lincheck_error *err, int code, const char *name,
			 uint32_t line)
{
	if (code == LINCHECK_ELIMIT)
		return lincheck__fail(err, code, name, line,
				      "line longer than %zu bytes",
				      LINCHECK_LINE_BYTES_MAX);
	return lincheck__fail(err, code, name, line, "NUL byte in the line");
}

bool lincheck__parse_u64(const char *s, size_t n, uint64_t *out)
{
	if (n == 0 || n > 20)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

bool lincheck__parse_i64(const char *s, size_t n, int64_t *out)
{
	bool neg = n > 0 && s[0] == '-';
	uint64_t mag;
	if (!lincheck__parse_u64(s + neg, n - neg, &mag))
		return false;
	if (neg) {
		if (mag > (uint64_t)INT64_MAX + 1)
			return false;
		*out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN
						      : -(int64_t)mag;
	} else {
		if (mag > (uint64_t)INT64_MAX)
			return false;
		*out = (int64_t)mag;
	}
	return true;
}

bool lincheck__strict_i64(const uint8_t *s, size_t n, int64_t *out)
{
	if (n == 0)
		return false;
	if (n == 1 && s[0] == '0') {
		*out = 0;
		return true;
	}
	size_t first = s[0] == '-' ? 1 : 0;
	if (first >= n || s[first] < '1' || s[first] > '9')
		return false;
	return lincheck__parse_i64((const char *)s, n, out);
}

bool lincheck__escape_needed(uint8_t c)
{
	return c < 0x20 || c > 0x7e || c == '%';
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool lincheck__unescape(const char *s, size_t n, uint8_t *out, size_t *out_len)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)s[i];
		if (c == '%') {
			if (n - i < 3)
				return false;
			int hi = hex_digit(s[i + 1]);
			int lo = hex_digit(s[i + 2]);
			if (hi < 0 || lo < 0)
				return false;
			out[o++] = (uint8_t)(hi * 16 + lo);
			i += 2;
			continue;
		}
		if (lincheck__escape_needed(c))
			return false;
		out[o++] = c;
	}
	assert(o <= n);
	*out_len = o;
	return true;
}

bool lincheck__escape_write(FILE *f, const uint8_t *data, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < len; i++) {
		uint8_t c = data[i];
		int rv;
		if (lincheck__escape_needed(c))
			rv = fprintf(f, "%%%c%c", hex[c >> 4], hex[c & 15]);
		else
			rv = fputc(c, f) == EOF ? -1 : 1;
		if (rv < 0)
			return false;
	}
	return true;
}
