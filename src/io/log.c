#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

static uint64_t log_node_id;
static enum baton_log_level log_min = BATON_LOG_INFO;
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

/* One line: the prefix, the message, then `suffix` (may be ""). */
static void log_line(enum baton_log_level level, const char *suffix,
		     const char *fmt, va_list ap)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char line[2048];
	int n = snprintf(line, sizeof line,
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s node=%llu ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			 level_names[level], (unsigned long long)log_node_id);
	if (n > 0 && (size_t)n < sizeof line)
		vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	/* One write per line, so lines of concurrent writers never mix. */
	fprintf(stderr, "%s%s\n", line, suffix);
}

void baton_log(enum baton_log_level level, const char *fmt, ...)
{
	if (level < log_min)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_line(level, "", fmt, ap);
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
	char suffix[48] = "";
	if (l->suppressed > 0)
		snprintf(suffix, sizeof suffix, " (%llu more since)",
			 (unsigned long long)l->suppressed);
	va_list ap;
	va_start(ap, fmt);
	log_line(level, suffix, fmt, ap);
	va_end(ap);
	l->written = true;
	l->last_ms = now;
	l->suppressed = 0;
}
