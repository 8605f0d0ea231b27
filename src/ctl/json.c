/* Just enough JSON to print strings safely (ctl.h). */
#include <stdio.h>

#include "ctl.h"

void ctl_json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", stdout);
			break;
		case '\\':
			fputs("\\\\", stdout);
			break;
		case '\n':
			fputs("\\n", stdout);
			break;
		case '\r':
			fputs("\\r", stdout);
			break;
		case '\t':
			fputs("\\t", stdout);
			break;
		default:
			/* Other control bytes and DEL as \u escapes; bytes
			 * from 0x80 up pass through (UTF-8 stays UTF-8). */
			if (*p < 0x20 || *p == 0x7f)
				printf("\\u%04x", (unsigned)*p);
			else
				putchar(*p);
		}
	}
	putchar('"');
}
