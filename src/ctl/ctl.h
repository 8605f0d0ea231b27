/*
 * batonctl: the command-line client for a baton cluster (docs/batonctl.md;
 * the admin commands it sends are in docs/batond.md).
 *
 * It speaks RESP to batond's client port through hiredis: the admin
 * commands (BATON.NODE, BATON.MEMBERS, BATON.ADD, ...) whose replies are
 * arrays of alternating field names and values. Fields are looked up by
 * name and unknown fields are ignored, so a newer server with more fields
 * still reads well.
 *
 * Exit codes: 0 success, 1 an error (one line on stderr naming the node
 * and the error), 2 bad usage.
 */
#ifndef BATON_CTL_H
#define BATON_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#define CTL_EXIT_OK 0
#define CTL_EXIT_ERROR 1
#define CTL_EXIT_USAGE 2

/* Limits: an address "host:port", an error message, members per cluster
 * (the server's peer table holds 64), a short field value. */
#define CTL_ADDR_MAX 256u
#define CTL_ERR_MAX 512u
#define CTL_MEMBERS_MAX 64u
#define CTL_VALUE_MAX 64u

#define CTL_DEFAULT_HOST "127.0.0.1"
#define CTL_DEFAULT_PORT 6001
#define CTL_DEFAULT_TIMEOUT_MS 5000
#define CTL_TIMEOUT_MS_MAX 3600000

/* Global options, from the command line; strings point into argv. */
struct ctl_opts {
	const char *host;
	int port;
	const char *password; /* NULL: no AUTH */
	int timeout_ms;	      /* connect and every reply */
	bool timeout_given;   /* --timeout-ms was given: it bounds all */
	/* A longer wait for replies only (0: timeout_ms), for commands the
	 * node answers when they are done (membership changes), unless
	 * --timeout-ms was given. */
	int reply_timeout_ms;
};

/* ---- conn.c: one connection to one node ---------------------------------- */

/* A connection, named by the address it was opened to for messages. The
 * caller owns the struct; ctl_conn_close() frees what open allocated. */
struct ctl_conn {
	char addr[CTL_ADDR_MAX];
	redisContext *ctx; /* NULL when not connected */
	char err[CTL_ERR_MAX];
};

/* Split "host:port" into `host` (of `host_len` bytes) and `port`. Returns 0,
 * or -1 if malformed (no colon, empty host, port not in 1..65535). */
int ctl_split_addr(const char *addr, char *host, size_t host_len, int *port);

/* Connect to `addr` ("host:port") with the options' timeout, and AUTH if a
 * password is set. Returns 0, or -1 with c->err set (c stays closable). */
int ctl_conn_open(struct ctl_conn *c, const struct ctl_opts *o,
		  const char *addr);

/* Send one command and wait for its reply. Returns the reply (free it with
 * freeReplyObject; an error reply is returned too, as REDIS_REPLY_ERROR),
 * or NULL with c->err set when the connection failed or timed out. */
redisReply *ctl_conn_call(struct ctl_conn *c, int argc, const char **argv);

void ctl_conn_close(struct ctl_conn *c);

/* One command on a fresh connection to `addr`: the reply, or NULL with
 * `err` set (an error reply becomes NULL too, its text in err). */
redisReply *ctl_ask(const struct ctl_opts *o, const char *addr, int argc,
		    const char **argv, char *err, size_t err_len);
/* The same for a command without arguments. */
redisReply *ctl_ask_cmd(const struct ctl_opts *o, const char *addr,
			const char *cmd, char *err, size_t err_len);

/* Send one command to the node of the global options and, if it answers
 * `-NOTLEADER leader is <id> at <client_addr>`, once more to that address.
 * Returns the last reply (an error reply too; free it), or NULL after
 * reporting "node <addr>: <why>" on stderr. `addr` (addr_len bytes)
 * receives the address of the node that answered last. */
redisReply *ctl_call_leader(const struct ctl_opts *o, int argc,
			    const char **argv, char *addr, size_t addr_len);

/* ---- map.c: replies read as maps ----------------------------------------- */

/* True if `r` is an array of an even number of string elements. */
bool ctl_map_valid(const redisReply *r);

/* The value of `field` written to `out` (`len` bytes, NUL-terminated,
 * truncated if longer). Returns true if present as a string or integer. */
bool ctl_map_str(const redisReply *map, const char *field, char *out,
		 size_t len);

/* The same, "-" in `out` when the field is absent or empty (what a status
 * line prints for a value the node did not give). */
void ctl_map_str_or_dash(const redisReply *map, const char *field, char *out,
			 size_t len);

/* The value of `field` as an unsigned decimal. Returns false if absent or
 * not a plain number (e.g. "-"). */
bool ctl_map_u64(const redisReply *map, const char *field, uint64_t *out);

/* Parse a whole string as an unsigned decimal; false on anything else. */
bool ctl_parse_u64(const char *s, uint64_t *out);

/* ---- json.c -------------------------------------------------------------- */

/* Print `s` as a JSON string literal (quotes included) to stdout. */
void ctl_json_string(const char *s);

/* ---- table.c: aligned text tables ---------------------------------------- */

#define CTL_TABLE_COLS_MAX 16u
#define CTL_TABLE_ROWS_MAX (CTL_MEMBERS_MAX + 1u)
#define CTL_CELL_MAX 96u

/* A table of text cells; row 0 is the header. Cells are copied. */
struct ctl_table {
	size_t cols, rows;
	char cells[CTL_TABLE_ROWS_MAX][CTL_TABLE_COLS_MAX][CTL_CELL_MAX];
};

void ctl_table_init(struct ctl_table *t, size_t cols,
		    const char *const *header);
/* Start a new row; false if the table is full. */
bool ctl_table_row(struct ctl_table *t);
/* Set column `col` of the last row, printf-style. */
void ctl_table_set(struct ctl_table *t, size_t col, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Print with every column padded to its widest cell, two spaces apart. */
void ctl_table_print(const struct ctl_table *t);

/* ---- args.c: a command's own options (getopt_long) --------------------- */

/* One option of a command: "--name", or with a value "--name V" and
 * "--name=V" alike. A command lists its options in a table ending with
 * {NULL, NULL}. */
struct ctl_option {
	const char *name;	/* without the dashes */
	const char *value_name; /* "N", "RELEASE" for usage; NULL: a flag */
};

/* Limits of a command's table and of its positional arguments. */
#define CTL_OPTIONS_MAX 24u
#define CTL_POSITIONALS_MAX 4u

/* A command's arguments once read. Strings point into argv. */
struct ctl_args {
	const char *cmd; /* the command's name, first word of every refusal */
	const struct ctl_option *options;
	const char *values[CTL_OPTIONS_MAX]; /* per option: NULL absent, the
						value given last, "" a flag */
	const char *positional[CTL_POSITIONALS_MAX]; /* the first ones */
	size_t n_positional; /* all of them: more may be given than kept */
	bool help;	     /* --help was given (nothing else is checked) */
};

/* Read argv[1..argc-1] (argv[0] is the command's name, `cmd`) against
 * `options` (NULL: none): options and positional arguments in any order,
 * "--" ends the options, --help is known to every command and stops the
 * reading. Refuses with a message that names the option: "CMD: unknown
 * option '--x'", "CMD: --x needs a value", "CMD: --x takes no value".
 * Positional arguments are counted, not checked. Returns 0, or
 * CTL_EXIT_USAGE after reporting. */
int ctl_args_parse(struct ctl_args *a, const char *cmd,
		   const struct ctl_option *options, int argc, char **argv);

/* The value of option `name` (in the command's table): NULL if it was not
 * given, "" for a flag that was. */
const char *ctl_args_value(const struct ctl_args *a, const char *name);
bool ctl_args_flag(const struct ctl_args *a, const char *name);

/* Option `name` as a whole number in min..max (UINT64_MAX: no bound) into
 * *out; left alone if not given. `unit` ("seconds", or NULL) follows the
 * range in the refusal. Returns 0, or CTL_EXIT_USAGE after "CMD: --name
 * must be MIN to MAX UNIT, got 'V'". */
int ctl_args_u64(const struct ctl_args *a, const char *name, uint64_t min,
		 uint64_t max, const char *unit, uint64_t *out);

/* Refuse option `name`'s value: "CMD: --name must be RANGE, got 'V'".
 * Returns CTL_EXIT_USAGE. */
int ctl_args_bad_value(const struct ctl_args *a, const char *name,
		       const char *range);

/* ---- the subcommands ----------------------------------------------------- */

/* Each command's options, read by main.c before it runs the command. */
extern const struct ctl_option ctl_status_options[];
extern const struct ctl_option ctl_health_options[];
extern const struct ctl_option ctl_downgrade_options[];
extern const struct ctl_option ctl_roll_options[];
extern const struct ctl_option ctl_migrate_options[];
extern const struct ctl_option ctl_snapshot_options[];
extern const struct ctl_option ctl_relay_options[];
extern const struct ctl_option ctl_upgrade_options[];

/* Each takes its arguments as read by ctl_args_parse (never with --help)
 * and returns an exit code. */
int ctl_cmd_status(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_health(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_members(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_add(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_promote(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_remove(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_transfer(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_downgrade(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_roll(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_migrate(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_snapshot(const struct ctl_opts *o, const struct ctl_args *a);
int ctl_cmd_relay(const struct ctl_opts *o, const struct ctl_args *a);
/* upgrade_path.c: batonctl upgrade --to RELEASE. */
int ctl_cmd_upgrade(const struct ctl_opts *o, const struct ctl_args *a);
/* upgrade_hold.c: `upgrade status|finalize`, the burn-in hold. */
int ctl_upgrade_hold(const struct ctl_opts *o, const struct ctl_args *a);

/* Report an error on stderr: "batonctl: <msg>". */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Report bad usage on stderr and return CTL_EXIT_USAGE. */
int ctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "host:port" of the node named by the global options. */
void ctl_opts_addr(const struct ctl_opts *o, char *out, size_t len);

#endif /* BATON_CTL_H */
