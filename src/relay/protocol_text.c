/*
 * Text received from a peer (a reason, an error text, a cluster id) made
 * safe to log: both ends of the relay protocol log what the other sent.
 */
#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "protocol.h"

const char *baton_relay_escape(const char *s, size_t len, char *out, size_t cap)
{
	BATON_ASSERT(out != NULL && cap >= 8);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (o + 8 >= cap) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
	}
	out[o] = '\0';
	BATON_ASSERT(o < cap);
	return out;
}
