/*
 * batond's options (docs/batond.md, "Running a node" and "Configuration"):
 * config.c gathers them from the flags, the environment and a config file
 * and checks them together; config_set.c sets one; config_help.c prints
 * --help and --version.
 */
#ifndef BATON_SERVER_CONFIG_INTERNAL_H
#define BATON_SERVER_CONFIG_INTERNAL_H

#include <stdio.h>

#include "server.h"

#define CONFIG_LINE_MAX 4096
#define CONFIG_ORIGIN_MAX (CONFIG_LINE_MAX + 1200)

/* Where one value came from, so that a refusal names it as the operator
 * wrote it: "--heartbeat-ms 5000", "BATON_HEARTBEAT_MS=5000" or
 * "/etc/baton/1.conf:3: heartbeat-ms 5000". */
enum config_source {
	CONFIG_FROM_FLAG,
	CONFIG_FROM_ENV,
	CONFIG_FROM_FILE,
};

struct config_origin {
	enum config_source source;
	const char *name;  /* the option, without "--" */
	const char *value; /* NULL: a switch given as a bare flag */
	const char *file;  /* CONFIG_FROM_FILE: the file and its line */
	int line;
};

/* One option. Its name is the flag without "--", the config file's key,
 * and, upper-cased with '_' for '-' after "BATON_", the environment
 * variable. `arg` shows what its value looks like (NULL: a switch). */
struct config_option {
	const char *name;
	const char *arg;
};

extern const struct config_option config_options[];
extern const size_t config_n_options;

/* The option called `name` (whole name only), or NULL. */
const struct config_option *config_option_find(const char *name);
/* The option whose name is closest to the unknown `name`, or NULL when
 * none is close: for "did you mean". */
const struct config_option *config_option_nearest(const char *name);
/* "BATON_HEARTBEAT_MS" for "heartbeat-ms" into buf. */
const char *config_env_name(const char *name, char *buf, size_t cap);

/* The origin as text (a password's value is not shown). */
const char *config_origin_text(const struct config_origin *o, char *buf,
			       size_t cap);
/* Prints "batond: ORIGIN: message" on one line; returns -1. */
int config_refuse(const struct config_origin *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Sets option o->name from o->value: 0, or -1 after printing why not. */
int config_set(struct server_config *c, const struct config_origin *o);

void config_usage(FILE *f);
void config_print_version(const struct server_config *c);
/* "0.1.0, 1.0.0 and 1.1.0": the releases of the table but the last
 * `skip_last` ones. */
const char *config_release_list(char *buf, size_t cap, uint32_t skip_last);

#endif /* BATON_SERVER_CONFIG_INTERNAL_H */
