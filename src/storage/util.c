/* Paths and error messages shared by the storage's modules. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

int baton__path(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, STORAGE_PATH_MAX, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= STORAGE_PATH_MAX)
		return BATON_ETOOBIG;
	return 0;
}

int baton__errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err != NULL && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

int baton__io_err(char *err, size_t errlen, int neg_errno, const char *what,
		  const char *path)
{
	return baton__errf(err, errlen, BATON_EIO, "%s %s: %s", what, path,
			   strerror(-neg_errno));
}
