/* Logging to stderr: one line per event with time, level and node id. */
#ifndef BATON_IO_LOG_H
#define BATON_IO_LOG_H

#include <stdint.h>

enum baton_log_level {
	BATON_LOG_DEBUG = 0,
	BATON_LOG_INFO = 1,
	BATON_LOG_WARN = 2,
	BATON_LOG_ERROR = 3,
};

/* Set once at start. */
void baton_log_init(uint64_t node_id, enum baton_log_level min_level);
/* -1 for an unknown name. */
int baton_log_level_parse(const char *name);

void baton_log(enum baton_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define LOG_DEBUG(...) baton_log(BATON_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) baton_log(BATON_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) baton_log(BATON_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) baton_log(BATON_LOG_ERROR, __VA_ARGS__)

#endif /* BATON_IO_LOG_H */
