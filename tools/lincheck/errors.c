/* Error names and texts, generated from the one table in lincheck.h. */
#include <stdio.h>

#include "internal.h"

const char *lincheck_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
#define LINCHECK__ERROR_TEXT(name, value, text)                                \
	case value:                                                            \
		return text;
		LINCHECK_ERRORS(LINCHECK__ERROR_TEXT)
#undef LINCHECK__ERROR_TEXT
	default:
		return "unknown error";
	}
}

const char *lincheck_err_name(int code)
{
	switch (code) {
	case 0:
		return "OK";
#define LINCHECK__ERROR_NAME(name, value, text)                                \
	case value:                                                            \
		return "LINCHECK_E" #name;
		LINCHECK_ERRORS(LINCHECK__ERROR_NAME)
#undef LINCHECK__ERROR_NAME
	default:
		return "LINCHECK_EUNKNOWN";
	}
}

int lincheck__fail(struct lincheck_error *err, int code, const char *name,
		   uint32_t line, const char *fmt, ...)
{
	if (err == NULL)
		return code;
	const char *file = name != NULL ? name : "<history>";
	int n;
	if (line > 0)
		n = snprintf(err->text, sizeof(err->text), "%s:%u: ", file,
			     line);
	else
		n = snprintf(err->text, sizeof(err->text), "%s: ", file);
	if (n < 0 || (size_t)n >= sizeof(err->text))
		return code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->text + n, sizeof(err->text) - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}
