/* Log lines on stderr, as text or JSON (log.h). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

static uint64_t log_node_id;
static enum baton_log_level log_min = BATON_LOG_INFO;
static enum baton_log_format log_format = BATON_LOG_TEXT;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void baton_log_init(uint64_t node_id, enum baton_log_level min_level)
{
	log_node_id = node_id;
	log_min = min_level;
}

int baton_log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

void baton_log_set_format(enum baton_log_format format)
{
	log_format = format;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_length(const unsigned char *p)
{
	size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	if (n == 0 || p[0] > 0xf4)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	bool overlong =
		(p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xf0 && p[1] < 0x90);
	bool out_of_range = (p[0] == 0xed && p[1] >= 0xa0) ||
			    (p[0] == 0xf4 && p[1] >= 0x90);
	return overlong || out_of_range ? 0 : n;
}

/* s as the inside of a JSON string (RFC 8259): quote, backslash and
 * control characters escaped, UTF-8 kept, and a byte that is not part of
 * well-formed UTF-8 (a client's key, say) as U+FFFD, so that every line
 * parses. */
static size_t json_escape(char *out, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		char esc = *p == '"'	? '"'
			   : *p == '\\' ? '\\'
			   : *p == '\n' ? 'n'
			   : *p == '\r' ? 'r'
			   : *p == '\t' ? 't'
					: 0;
		size_t len = *p >= 0x80 ? utf8_length(p) : 1;
		if (n + 7 > cap)
			break;
		if (esc != 0) {
			out[n++] = '\\';
			out[n++] = esc;
		} else if (*p < 0x20 || *p == 0x7f) {
			n += (size_t)snprintf(out + n, cap - n, "\\u00%c%c",
					      hex[*p >> 4], hex[*p & 15]);
		} else if (len == 0) {
			n += (size_t)snprintf(out + n, cap - n, "\\ufffd");
			len = 1;
		} else {
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
	}
	out[n] = '\0';
	return n;
}

/* One line: the time, level and node, the message, then how many lines
 * were left out before it (limited lines only). */
static void log_line(enum baton_log_level level, uint64_t more_since,
		     const char *fmt, va_list ap)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[64], msg[2048];
	snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	vsnprintf(msg, sizeof msg, fmt, ap);
	/* One write per line, so lines of concurrent writers never mix. */
	if (log_format == BATON_LOG_JSON) {
		char escaped[sizeof msg * 6], more[48] = "";
		json_escape(escaped, sizeof escaped, msg);
		if (more_since > 0)
			snprintf(more, sizeof more, ",\"more_since\":%llu",
				 (unsigned long long)more_since);
		fprintf(stderr,
			"{\"ts\":\"%s\",\"level\":\"%s\",\"node\":%llu,"
			"\"msg\":\"%s\"%s}\n",
			when, level_names[level],
			(unsigned long long)log_node_id, escaped, more);
		return;
	}
	char more[48] = "";
	if (more_since > 0)
		snprintf(more, sizeof more, " (%llu more since)",
			 (unsigned long long)more_since);
	fprintf(stderr, "%s %-5s node=%llu %s%s\n", when, level_names[level],
		(unsigned long long)log_node_id, msg, more);
}

void baton_log(enum baton_log_level level, const char *fmt, ...)
{
	if (level < log_min)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_line(level, 0, fmt, ap);
	va_end(ap);
}

static uint64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void baton_log_limited(struct baton_log_limit *l, enum baton_log_level level,
		       const char *fmt, ...)
{
	if (level < log_min)
		return;
	uint64_t now = monotonic_ms();
	if (l->written && now - l->last_ms < BATON_LOG_LIMIT_INTERVAL_MS) {
		l->suppressed++;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	log_line(level, l->suppressed, fmt, ap);
	va_end(ap);
	l->written = true;
	l->last_ms = now;
	l->suppressed = 0;
}
