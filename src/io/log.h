/* Logging to stderr: one line per event with time, level and node id,
 * as text or as JSON (--log-format). */
#ifndef BATON_IO_LOG_H
#define BATON_IO_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum baton_log_level {
	BATON_LOG_DEBUG = 0,
	BATON_LOG_INFO = 1,
	BATON_LOG_WARN = 2,
	BATON_LOG_ERROR = 3,
};

/* How each line is written (--log-format): text, or one JSON object per
 * line with ts, level, node, msg (and more_since on a limited line). */
enum baton_log_format {
	BATON_LOG_TEXT = 0,
	BATON_LOG_JSON = 1,
};

/* Set once at start. */
void baton_log_init(uint64_t node_id, enum baton_log_level min_level);
/* Text unless set; set once at start, after baton_log_init. */
void baton_log_set_format(enum baton_log_format format);
/* -1 for an unknown name. */
int baton_log_level_parse(const char *name);

void baton_log(enum baton_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define LOG_DEBUG(...) baton_log(BATON_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) baton_log(BATON_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) baton_log(BATON_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) baton_log(BATON_LOG_ERROR, __VA_ARGS__)

/* One kind of line that may repeat at the will of a peer or a client (a
 * limit hit, a refused connection, a bad frame): at most one such line per
 * BATON_LOG_LIMIT_INTERVAL_MS; the next line written ends with "(N more
 * since)", the lines left out meanwhile. Owned by the caller, one per kind,
 * zero-initialized; used on one thread. */
#define BATON_LOG_LIMIT_INTERVAL_MS 1000u
struct baton_log_limit {
	bool written;	     /* a line was written at last_ms */
	uint64_t last_ms;    /* monotonic */
	uint64_t suppressed; /* left out since */
};

/* baton_log through a limit: writes the line, or counts it as left out. */
void baton_log_limited(struct baton_log_limit *l, enum baton_log_level level,
		       const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A line of a kind a remote end can repeat at will, limited at its call
 * site (the site is the kind): for warnings on the peer port. */
#define LOG_WARN_LIMITED(...)                                                  \
	do {                                                                   \
		static struct baton_log_limit site_limit_;                     \
		baton_log_limited(&site_limit_, BATON_LOG_WARN, __VA_ARGS__);  \
	} while (0)

#endif /* BATON_IO_LOG_H */
