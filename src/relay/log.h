/*
 * baton-relay's log: one line per event on stderr, "LEVEL message",
 * filtered by --log-level. Texts received from peers are escaped
 * (baton_relay_escape, protocol.h) before they are logged.
 */
#ifndef BATON_RELAY_LOG_H
#define BATON_RELAY_LOG_H

#include <stddef.h>

enum relay_log_level {
	RELAY_LOG_ERROR = 0,
	RELAY_LOG_WARN = 1,
	RELAY_LOG_INFO = 2,
	RELAY_LOG_DEBUG = 3,
};

/* Parse "error", "warn", "info" or "debug"; -1 for anything else. */
int relay_log_parse_level(const char *name);
void relay_log_set_level(enum relay_log_level level);
void relay_log(enum relay_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* BATON_RELAY_LOG_H */
