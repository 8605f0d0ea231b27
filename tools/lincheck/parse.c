/* Formats: names, detection, reading a file, dispatching to a parser. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Lines detection looks at for a Jepsen log's first event. */
#define DETECT_LINES_MAX 1000u
#define LOAD_CHUNK_BYTES ((size_t)1 << 20)

static const char *const format_names[] = {"auto", "baton", "jepsen", "edn"};

int lincheck_format_parse(const char *name, enum lincheck_format *out)
{
	for (size_t i = 0; i < sizeof(format_names) / sizeof(*format_names);
	     i++) {
		if (strcmp(name, format_names[i]) == 0) {
			*out = (enum lincheck_format)i;
			return 0;
		}
	}
	return LINCHECK_EUSAGE;
}

const char *lincheck_format_name(enum lincheck_format format)
{
	if ((size_t)format >= sizeof(format_names) / sizeof(*format_names))
		return "?";
	return format_names[format];
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
	size_t p = strlen(prefix);
	return n >= p && memcmp(s, prefix, p) == 0;
}

static bool contains(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= n; i++) {
		if (memcmp(s + i, needle, k) == 0)
			return true;
	}
	return false;
}

enum lincheck_format lincheck_format_detect(const char *data, size_t len)
{
	struct lincheck__lines l;
	lincheck__lines_init(&l, data, len);
	const char *s;
	size_t n;
	bool first = true;
	while (l.line < DETECT_LINES_MAX &&
	       lincheck__lines_next(&l, &s, &n) > 0) {
		while (n > 0 && (*s == ' ' || *s == '\t')) {
			s++;
			n--;
		}
		if (n == 0)
			continue;
		if (first && starts_with(s, n, "baton-history"))
			return LINCHECK_FORMAT_BATON;
		if (first && *s == '{')
			return LINCHECK_FORMAT_EDN;
		if (contains(s, n, "jepsen.util"))
			return LINCHECK_FORMAT_JEPSEN;
		first = false;
	}
	return LINCHECK_FORMAT_AUTO;
}

static bool blank(const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (data[i] != ' ' && data[i] != '\t' && data[i] != '\n' &&
		    data[i] != '\r')
			return false;
	}
	return true;
}

int lincheck_parse(const char *name, const char *data, size_t len,
		   enum lincheck_format format, struct lincheck_history *h,
		   struct lincheck_error *err)
{
	h->name = name;
	if (len > LINCHECK_FILE_BYTES_MAX)
		return lincheck__fail(err, LINCHECK_ELIMIT, name, 0,
				      "larger than %zu bytes",
				      LINCHECK_FILE_BYTES_MAX);
	if (format == LINCHECK_FORMAT_AUTO) {
		format = lincheck_format_detect(data, len);
		if (format == LINCHECK_FORMAT_AUTO && blank(data, len))
			return 0; /* no events: an empty history */
	}
	h->format = format;
	int rv;
	switch (format) {
	case LINCHECK_FORMAT_BATON:
		rv = lincheck__parse_baton(h, data, len, err);
		break;
	case LINCHECK_FORMAT_JEPSEN:
		rv = lincheck__parse_jepsen(h, data, len, err);
		break;
	case LINCHECK_FORMAT_EDN:
		rv = lincheck__parse_edn(h, data, len, err);
		break;
	default:
		return lincheck__fail(err, LINCHECK_EMALFORMED, name, 0,
				      "not a history in a format I know "
				      "(give --format baton, jepsen or edn)");
	}
	if (rv == 0)
		lincheck_history_finish(h);
	return rv;
}

int lincheck_load(const char *path, enum lincheck_format format,
		  struct lincheck_history *h, struct lincheck_error *err)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return lincheck__fail(err, LINCHECK_EIO, path, 0, "%s",
				      strerror(errno));
	char *data = NULL;
	size_t len = 0;
	size_t cap = 0;
	int rv = 0;
	for (;;) {
		if (cap - len < LOAD_CHUNK_BYTES) {
			if (cap > LINCHECK_FILE_BYTES_MAX) {
				rv = lincheck__fail(err, LINCHECK_ELIMIT, path,
						    0, "larger than %zu bytes",
						    LINCHECK_FILE_BYTES_MAX);
				break;
			}
			size_t ncap = cap == 0 ? LOAD_CHUNK_BYTES : cap * 2;
			char *q = realloc(data, ncap);
			if (q == NULL) {
				rv = lincheck__fail(err, LINCHECK_ENOMEM, path,
						    0, "out of memory");
				break;
			}
			data = q;
			cap = ncap;
		}
		size_t got = fread(data + len, 1, cap - len, f);
		len += got;
		if (got == 0) {
			if (ferror(f))
				rv = lincheck__fail(err, LINCHECK_EIO, path, 0,
						    "read error");
			break;
		}
	}
	fclose(f);
	if (rv == 0)
		rv = lincheck_parse(path, data, len, format, h, err);
	free(data);
	return rv;
}
