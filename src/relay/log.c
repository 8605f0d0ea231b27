/*
 * baton-relay's log lines.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "baton/assert.h"

static enum relay_log_level log_level = RELAY_LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

int relay_log_parse_level(const char *name)
{
	BATON_ASSERT(name != NULL);
	for (int i = 0; i < 4; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

void relay_log_set_level(enum relay_log_level level)
{
	BATON_ASSERT(level <= RELAY_LOG_DEBUG);
	log_level = level;
}

void relay_log(enum relay_log_level level, const char *fmt, ...)
{
	if (level > log_level)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[32];
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s.%03ldZ %s baton-relay: %s\n", when,
		ts.tv_nsec / 1000000, level_names[level], line);
	fflush(stderr);
}
