/*
 * The command table: connection commands answered here, key-value commands
 * sent through Raft (writes) or the read index (reads), transactions
 * (txn.c) and the admin commands of batonctl (admin.c, docs/batond.md).
 * A command of a later machine version than the log's is refused here,
 * before anything is appended.
 */
#include <inttypes.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include "log.h"
#include "name_memo.h"
#include "server.h"

bool command_arg_is(const struct command_ctx *x, int i, const char *word)
{
	return i < x->argc && x->lens[i] == strlen(word) &&
	       strncasecmp((const char *)x->argv[i], word, x->lens[i]) == 0;
}

struct baton_buf *command_out(const struct command_ctx *x)
{
	return slot_buf(x->sl);
}

int command_done(const struct command_ctx *x)
{
	slot_done(x->sl);
	return 0;
}

int command_fail(const struct command_ctx *x, int code)
{
	slot_error(x->sl, code);
	return 0;
}

static bool local_lookup_is(const uint8_t *name, size_t len, const char *word)
{
	return len == strlen(word) &&
	       strncasecmp((const char *)name, word, len) == 0;
}

/* A command's name as Redis names it in errors and CLIENT LIST's cmd=:
 * lower case, with the subcommand of a container command
 * ("client|list"); cut to fit cap (NUL included). */
static void command_full_name(int argc, const uint8_t *const *argv,
			      const size_t *lens, char *out, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < lens[0] && n + 1 < cap; i++)
		out[n++] = (char)tolower(argv[0][i]);
	bool container = local_lookup_is(argv[0], lens[0], "CLIENT") ||
			 local_lookup_is(argv[0], lens[0], "COMMAND") ||
			 local_lookup_is(argv[0], lens[0], "CONFIG");
	if (container && argc > 1 && n + 1 < cap) {
		out[n++] = '|';
		for (size_t i = 0; i < lens[1] && n + 1 < cap; i++)
			out[n++] = (char)tolower(argv[1][i]);
	}
	out[n] = '\0';
}

int command_wrong_args(const struct command_ctx *x)
{
	char name[96];
	command_full_name(x->argc, x->argv, x->lens, name, sizeof name);
	resp_error(command_out(x),
		   "ERR wrong number of arguments for '%s' command", name);
	return command_done(x);
}

/* Redis 7.0's text: the name and the first arguments, quoted, up to 128
 * bytes each part (a NUL ends an argument, as Redis's C strings do). */
void command_reply_unknown(struct baton_buf *b, int argc,
			   const uint8_t *const *argv, const size_t *lens)
{
	enum { SHOWN_BYTES_MAX = 128 };
	char args[SHOWN_BYTES_MAX + 16];
	size_t used = 0;
	for (int i = 1; i < argc && used < SHOWN_BYTES_MAX; i++) {
		size_t n = strnlen((const char *)argv[i], lens[i]);
		if (n > SHOWN_BYTES_MAX - used)
			n = SHOWN_BYTES_MAX - used;
		used += (size_t)snprintf(args + used, sizeof args - used,
					 "'%.*s' ", (int)n,
					 (const char *)argv[i]);
	}
	args[used] = '\0';
	size_t name = strnlen((const char *)argv[0], lens[0]);
	resp_error(b,
		   "ERR unknown command '%.*s', with args beginning with: %s",
		   (int)(name < SHOWN_BYTES_MAX ? name : SHOWN_BYTES_MAX),
		   (const char *)argv[0], args);
}

void command_reply_text(const struct command_ctx *x, const void *text,
			size_t len)
{
	if (x->cs->resp == 3)
		resp3_verbatim(command_out(x), "txt", text, len);
	else
		resp_bulk(command_out(x), text, len);
}

void command_arg_str(const struct command_ctx *x, int i, char *buf, size_t cap)
{
	size_t n = x->lens[i] < cap - 1 ? x->lens[i] : cap - 1;
	memcpy(buf, x->argv[i], n);
	buf[n] = '\0';
}

/* ---- connection commands ------------------------------------------------- */

static int cmd_ping(struct command_ctx *x)
{
	if (x->argc > 2)
		return command_wrong_args(x);
	if (x->argc == 2)
		resp_bulk(command_out(x), x->argv[1], x->lens[1]);
	else
		resp_simple(command_out(x), "PONG");
	return command_done(x);
}

static int cmd_echo(struct command_ctx *x)
{
	if (x->argc != 2)
		return command_wrong_args(x);
	resp_bulk(command_out(x), x->argv[1], x->lens[1]);
	return command_done(x);
}

static int cmd_select(struct command_ctx *x)
{
	if (x->argc != 2)
		return command_wrong_args(x);
	int64_t db;
	if (!resp_parse_int(x->argv[1], x->lens[1], &db))
		resp_error(command_out(x),
			   "ERR value is not an integer or out of range");
	else if (db == 0)
		resp_simple(command_out(x), "OK");
	else
		resp_error(command_out(x),
			   "ERR DB index is out of range (baton has "
			   "database 0 only)");
	return command_done(x);
}

static int cmd_quit(struct command_ctx *x)
{
	resp_simple(command_out(x), "OK");
	x->cs->quit = true;
	return command_done(x);
}

bool command_credentials_ok(const struct command_ctx *x, int user_at, int pw_at)
{
	/* One user, as Redis without ACLs: "default" (names are compared
	 * exactly, as Redis does); any other name does not exist, whatever
	 * the password. Without --password the default user takes any. */
	static const char user[] = "default";
	if (user_at >= 0 &&
	    (x->lens[user_at] != sizeof user - 1 ||
	     memcmp(x->argv[user_at], user, sizeof user - 1) != 0))
		return false;
	const char *pw = x->s->cfg.password;
	size_t n = strlen(pw);
	if (n == 0)
		return true;
	if (x->lens[pw_at] != n)
		return false;
	/* In time independent of where the first difference is. */
	unsigned char diff = 0;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(x->argv[pw_at][i] ^ (uint8_t)pw[i]);
	return diff == 0;
}

static int cmd_auth(struct command_ctx *x)
{
	if (x->argc < 2)
		return command_wrong_args(x);
	if (x->argc > 3) {
		resp_error(command_out(x), "ERR syntax error");
		return command_done(x);
	}
	if (x->s->cfg.password[0] == '\0' && x->argc == 2) {
		resp_error(command_out(x),
			   "ERR AUTH <password> called without any password "
			   "configured for the default user. Are you sure "
			   "your configuration is correct?");
	} else if (command_credentials_ok(x, x->argc == 3 ? 1 : -1,
					  x->argc - 1)) {
		x->cs->authenticated = true;
		resp_simple(command_out(x), "OK");
	} else {
		resp_error(command_out(x), "WRONGPASS invalid "
					   "username-password pair or user is "
					   "disabled.");
	}
	return command_done(x);
}

/* This node's clock (not the machine time of the log): Redis's reply, the
 * seconds and microseconds as two bulk strings. */
static int cmd_time(struct command_ctx *x)
{
	if (x->argc != 1)
		return command_wrong_args(x);
	struct timeval tv;
	gettimeofday(&tv, NULL);
	char sec[24], usec[24];
	int ns = snprintf(sec, sizeof sec, "%lld", (long long)tv.tv_sec);
	int nu = snprintf(usec, sizeof usec, "%ld", (long)tv.tv_usec);
	resp_array(command_out(x), 2);
	resp_bulk(command_out(x), sec, (size_t)ns);
	resp_bulk(command_out(x), usec, (size_t)nu);
	return command_done(x);
}

/* Redis's pub/sub has no place in a replicated map: say so plainly
 * rather than "unknown command", so that a client library's pub/sub
 * helper fails with a reason. */
static int cmd_pubsub(struct command_ctx *x)
{
	char name[32];
	command_full_name(1, x->argv, x->lens, name, sizeof name);
	resp_error(command_out(x),
		   "ERR baton does not implement pub/sub ('%s'): it is a "
		   "replicated key-value store; use a message broker for "
		   "pub/sub",
		   name);
	return command_done(x);
}

/* The first CONFIG GET argument (a glob, without case) that names this
 * one, or 0 if none does. */
static int config_named(const struct command_ctx *x, const char *name)
{
	enum { PATTERN_BYTES_MAX = 128 };
	for (int i = 2; i < x->argc; i++) {
		uint8_t lower[PATTERN_BYTES_MAX];
		size_t n = x->lens[i];
		if (n > sizeof lower)
			continue; /* longer than any name it could match */
		for (size_t k = 0; k < n; k++)
			lower[k] = (uint8_t)tolower(x->argv[i][k]);
		if (kv_glob_match(lower, n, (const uint8_t *)name,
				  strlen(name)))
			return i;
	}
	return 0;
}

/* Enough for redis-benchmark and redis-cli: CONFIG GET of baton's values
 * for Redis's names, several names or globs at once as Redis 7. */
static int cmd_config(struct command_ctx *x)
{
	if (x->argc < 2 || (command_arg_is(x, 1, "GET") && x->argc < 3))
		return command_wrong_args(x);
	if (!command_arg_is(x, 1, "GET")) {
		resp_error(command_out(x),
			   "ERR baton supports CONFIG GET only");
		return command_done(x);
	}
	/* maxmemory: this node's bound in bytes (memory.c), as Redis. */
	char maxmemory[24], policy[] = "noeviction";
	snprintf(maxmemory, sizeof maxmemory, "%" PRIu64, x->s->cfg.maxmemory);
	const char *const known[][2] = {{"save", ""},
					{"appendonly", "yes"},
					{"databases", "1"},
					{"maxmemory", maxmemory},
					{"maxmemory-policy", policy}};
	enum { KNOWN = sizeof known / sizeof known[0] };
	int named[KNOWN];
	size_t pairs = 0;
	for (size_t i = 0; i < KNOWN; i++) {
		named[i] = config_named(x, known[i][0]);
		pairs += named[i] != 0;
	}
	if (x->cs->resp == 3)
		resp3_map(command_out(x), pairs);
	else
		resp_array(command_out(x), 2 * pairs);
	for (size_t i = 0; i < KNOWN; i++) {
		int a = named[i];
		if (a == 0)
			continue;
		/* Redis answers a plain name as it was written ("SAVE"). */
		bool glob = memchr(x->argv[a], '*', x->lens[a]) != NULL ||
			    memchr(x->argv[a], '?', x->lens[a]) != NULL ||
			    memchr(x->argv[a], '[', x->lens[a]) != NULL ||
			    memchr(x->argv[a], '\\', x->lens[a]) != NULL;
		if (glob)
			resp_bulk(command_out(x), known[i][0],
				  strlen(known[i][0]));
		else
			resp_bulk(command_out(x), x->argv[a], x->lens[a]);
		resp_bulk(command_out(x), known[i][1], strlen(known[i][1]));
	}
	return command_done(x);
}

/* ---- key-value commands ---------------------------------------------------
 */

/* A read waiting for its read index, with a copy of its arguments: one
 * allocation holds the struct, argv, lens and the arguments' bytes. */
struct read_ctx {
	struct server *s;
	struct client_state *cs; /* valid while sl is not done */
	struct slot *sl;
	int argc;
	uint8_t **argv;
	size_t *lens;
};

static void read_ctx_free(struct read_ctx *r)
{
	free(r);
}

/* The copy, or NULL when out of memory. */
static struct read_ctx *read_ctx_new(const struct command_ctx *x)
{
	size_t n = (size_t)x->argc;
	size_t bytes = sizeof(struct read_ctx) + n * sizeof(uint8_t *) +
		       n * sizeof(size_t);
	for (size_t i = 0; i < n; i++)
		bytes += x->lens[i] + 1;
	struct read_ctx *r = malloc(bytes);
	if (r == NULL)
		return NULL;
	*r = (struct read_ctx){x->s, x->cs, x->sl, x->argc, NULL, NULL};
	r->argv = (uint8_t **)(r + 1);
	r->lens = (size_t *)(r->argv + n);
	uint8_t *at = (uint8_t *)(r->lens + n);
	for (size_t i = 0; i < n; i++) {
		r->argv[i] = at;
		r->lens[i] = x->lens[i];
		memcpy(at, x->argv[i], x->lens[i]);
		at[x->lens[i]] = '\0';
		at += x->lens[i] + 1;
	}
	return r;
}

/* During a migration (docs/relay.md) the other cluster may be the one to
 * answer data commands: proxy the command there (true), or refuse it with
 * -TRYAGAIN when it can be answered neither here nor there (true); false
 * when this node answers it. */
static bool answered_elsewhere(struct server *s, struct client_state *cs,
			       struct slot *sl, int argc,
			       const uint8_t *const *argv, const size_t *lens)
{
	if (s->migration == NULL)
		return false;
	const char *detail;
	switch (migration_route(s, cs, &detail)) {
	case MIGRATION_HERE:
		return false;
	case MIGRATION_PROXY:
		proxy_command(s, cs, sl, detail, argc, argv, lens);
		return true;
	case MIGRATION_WAIT:
		migration_park(s, cs, sl, argc, argv, lens);
		return true;
	case MIGRATION_REFUSE:
		break;
	}
	resp_error(slot_buf(sl), "TRYAGAIN %s", detail);
	slot_done(sl);
	return true;
}

static void on_read_ready(void *data, int status)
{
	struct read_ctx *r = data;
	/* The state may have been fenced while the read waited: then it is
	 * no longer the newest (docs/relay.md, "Hand-off"). */
	if (status == 0 && !slot_abandoned(r->sl) &&
	    answered_elsewhere(r->s, r->cs, r->sl, r->argc,
			       (const uint8_t *const *)r->argv, r->lens)) {
		read_ctx_free(r);
		return;
	}
	/* This node stopped applying, for want of a newer release, while the
	 * read waited: the leader serves it. Only while none of the
	 * connection's writes is unanswered (the read joins their chain,
	 * and must not go after one sent later); otherwise the retryable
	 * refusal of server_reply_error. */
	if (status == BATON_ESTALLED && !slot_abandoned(r->sl) &&
	    r->cs->writes.head == NULL && server_stall_routes(r->s)) {
		struct kv_txn_command one = {
			r->argc, (const uint8_t *const *)r->argv, r->lens};
		struct write_req w = {false, 0, NULL, 1, &one};
		route_write(r->s, r->cs, r->sl, &w);
		read_ctx_free(r);
		return;
	}
	if (status != 0) {
		server_reply_error(r->s, slot_buf(r->sl), status);
		slot_done(r->sl);
	} else if (keys_is(r->argv[0], r->lens[0])) {
		keys_answer(r->s, r->sl, r->argv[1], r->lens[1]);
	} else {
		kv_read(r->s->machine.kv, r->argc,
			(const uint8_t *const *)r->argv, r->lens,
			slot_buf(r->sl));
		slot_done(r->sl);
	}
	read_ctx_free(r);
}

/* May c run under the machine version of the log? If not, its error is
 * appended (nothing goes to the log). */
static bool gate(struct command_ctx *x, const struct kv_command *c)
{
	struct baton_machine_version v = {server_machine_version(x->s)};
	return kv_gate(c, x->argc, x->argv, x->lens, v, command_out(x)) == 0;
}

static int kv_command(struct command_ctx *x, const struct kv_command *c)
{
	struct baton_buf *b = command_out(x);
	if (!gate(x, c) || kv_check(c, x->argc, x->argv, x->lens, b) != 0)
		return command_done(x);
	bool stale = x->cs->stale_reads || BATON_PLANTED_BUG_STALE_READS;
	struct kv_txn_command one = {x->argc, x->argv, x->lens};
	struct write_req w = {false, 0, NULL, 1, &one};
	/* A node that stopped applying for want of a newer release sends
	 * reads and writes to the leader, which runs one; stopped for any
	 * other reason it says so at once rather than let the client time
	 * out. Stale reads serve what it applied. */
	if (!stale || (c->flags & KV_WRITE)) {
		if (server_stall_routes(x->s)) {
			route_write(x->s, x->cs, x->sl, &w);
			return 0;
		}
		if (server_reply_if_stalled(x->s, b))
			return command_done(x);
	}
	if (c->flags & KV_WRITE) {
		route_write(x->s, x->cs, x->sl, &w);
		return 0;
	}
	if (stale && keys_is(x->argv[0], x->lens[0])) {
		keys_answer(x->s, x->sl, x->argv[1], x->lens[1]);
		return 0;
	}
	if (stale) {
		kv_read(x->s->machine.kv, x->argc, x->argv, x->lens, b);
		return command_done(x);
	}
	/* The arguments must outlive this call: copy them. */
	struct read_ctx *r = read_ctx_new(x);
	if (r == NULL)
		return command_fail(x, BATON_ENOMEM);
	int rv = baton_node_read(x->s->node, on_read_ready, r);
	if (rv != 0) {
		read_ctx_free(r);
		server_reply_error(x->s, b, rv);
		return command_done(x);
	}
	return 0;
}

static int cmd_stale(struct command_ctx *x)
{
	if (x->argc != 2 ||
	    !(command_arg_is(x, 1, "ON") || command_arg_is(x, 1, "OFF")))
		return command_wrong_args(x);
	x->cs->stale_reads = command_arg_is(x, 1, "ON");
	resp_simple(command_out(x), "OK");
	return command_done(x);
}

/* ---- dispatch ------------------------------------------------------------ */

struct local_command {
	const char *name;
	int (*fn)(struct command_ctx *x);
	bool before_auth;
	bool in_multi; /* runs at once inside MULTI (else: queued/refused) */
	/* What COMMAND says of it (Redis's arity and flags). */
	int arity;
	const char *flags;
};

#define ADMIN "admin noscript loading stale"
#define SUBSCRIBER "pubsub noscript loading stale"

static const struct local_command local_commands[] = {
	{"PING", cmd_ping, false, false, -1, "fast"},
	{"ECHO", cmd_echo, false, false, 2, "fast"},
	{"SELECT", cmd_select, false, false, 2, "loading stale fast"},
	{"QUIT", cmd_quit, true, true, -1, "allow_busy fast noscript"},
	{"AUTH", cmd_auth, true, false, -2,
	 "noscript loading stale fast no_auth"},
	{"HELLO", client_hello, true, false, -1,
	 "noscript loading stale fast no_auth"},
	{"CLIENT", client_command, false, false, -2, ADMIN},
	{"COMMAND", command_table_command, false, false, -1, "loading stale"},
	{"CONFIG", cmd_config, false, false, -2, ADMIN},
	{"INFO", info_command, false, false, -1, "loading stale"},
	{"TIME", cmd_time, false, false, 1, "loading stale fast"},
	{"MULTI", txn_multi, false, true, 1, "noscript loading stale fast"},
	{"EXEC", txn_exec, false, true, 1, "noscript loading stale"},
	{"DISCARD", txn_discard, false, true, 1, "noscript loading stale fast"},
	{"WATCH", txn_watch, false, true, -2, "noscript loading stale fast"},
	{"UNWATCH", txn_unwatch, false, false, 1,
	 "noscript loading stale fast"},
	{"SUBSCRIBE", cmd_pubsub, false, false, -2, SUBSCRIBER},
	{"PSUBSCRIBE", cmd_pubsub, false, false, -2, SUBSCRIBER},
	{"SSUBSCRIBE", cmd_pubsub, false, false, -2, SUBSCRIBER},
	{"UNSUBSCRIBE", cmd_pubsub, false, false, -1, SUBSCRIBER},
	{"PUNSUBSCRIBE", cmd_pubsub, false, false, -1, SUBSCRIBER},
	{"PUBLISH", cmd_pubsub, false, false, 3, SUBSCRIBER},
	{"PUBSUB", cmd_pubsub, false, false, -2, SUBSCRIBER},
	{"BATON.NODE", admin_node, false, false, -1, ADMIN},
	{"BATON.MEMBERS", admin_members, false, false, -1, ADMIN},
	{"BATON.ADD", admin_add, false, false, -1, ADMIN},
	{"BATON.PROMOTE", admin_promote, false, false, -1, ADMIN},
	{"BATON.REMOVE", admin_remove, false, false, -1, ADMIN},
	{"BATON.TRANSFER", admin_transfer, false, false, -1, ADMIN},
	{"BATON.DOWNGRADE", admin_downgrade, false, false, -1, ADMIN},
	{"BATON.UPGRADE", admin_upgrade, false, false, -1, ADMIN},
	{"BATON.STALE", cmd_stale, false, false, -1, ADMIN},
	{"BATON.MIGRATION", admin_migration, false, false, -1, ADMIN},
	/* Before AUTH: a proxy asks it before it sends its password. */
	{"BATON.MIGRATION.PROVE", migration_cmd_prove, true, false, 3, ADMIN},
	{"BATON.BACKUP", backup_command, false, false, -1, ADMIN},
	{"BATON.PROXIED", proxy_cmd_proxied, false, false, -1, ADMIN},
#if BATON_TEST_HOOKS
	{"BATON.TEST.PROPOSE", admin_test_propose, false, false, -1, ADMIN},
	{"BATON.TEST.PROXY", proxy_cmd_test_proxy, false, false, -1, ADMIN},
#endif
};

bool command_local_at(size_t i, const char **name, int *arity,
		      const char **flags)
{
	if (i >= sizeof local_commands / sizeof local_commands[0])
		return false;
	*name = local_commands[i].name;
	*arity = local_commands[i].arity;
	*flags = local_commands[i].flags;
	return true;
}

enum command_resp3 command_resp3(const struct client_state *cs,
				 const uint8_t *name, size_t len)
{
	if (cs->resp != 3)
		return RESP3_AS_RESP2;
	/* Redis 7 answers these with a map in RESP3. */
	static const char *const maps[] = {"HGETALL"};
	for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++)
		if (len == strlen(maps[i]) &&
		    strncasecmp((const char *)name, maps[i], len) == 0)
			return RESP3_TOP_MAP;
	return RESP3_NULLS;
}

/* CLIENT LIST's cmd= field: the name in lower case, with the subcommand
 * of a container command ("client|list"), as Redis shows it. */
static void note_command(struct server *s, struct client_state *cs, int argc,
			 const uint8_t *const *argv, const size_t *lens)
{
	command_full_name(argc, argv, lens, cs->last_command,
			  sizeof cs->last_command);
	cs->last_command_ms = uv_now(s->loop);
}

/* MULTI and its kin go where the data commands go: a transaction runs
 * where its commands do. */
static bool is_txn_command(const struct local_command *c)
{
	return c->fn == txn_multi || c->fn == txn_exec ||
	       c->fn == txn_discard || c->fn == txn_watch ||
	       c->fn == txn_unwatch;
}

static const struct local_command *local_lookup(const uint8_t *name, size_t len)
{
	/* The last name asked for and its answer: a pipeline repeats its
	 * command, looked up for its order, then to run. */
	static struct baton_name_memo memo;
	static const struct local_command *last;
	if (baton_name_memo_is(&memo, name, len))
		return last;
	const struct local_command *found = NULL;
	for (size_t i = 0; i < sizeof local_commands / sizeof local_commands[0];
	     i++) {
		const char *n = local_commands[i].name;
		if (len == strlen(n) &&
		    strncasecmp((const char *)name, n, len) == 0) {
			found = &local_commands[i];
			break;
		}
	}
	if (baton_name_memo_set(&memo, name, len))
		last = found;
	return found;
}

enum command_order command_order(const struct client_state *cs, int argc,
				 const uint8_t *const *argv, const size_t *lens)
{
	if (argc < 1 || !cs->authenticated)
		return ORDER_ANY; /* NOAUTH at once */
	const struct local_command *c = local_lookup(argv[0], lens[0]);
	/* Inside MULTI commands are queued at once; EXEC is the write. */
	if (c != NULL && c->fn == txn_exec)
		return ORDER_WRITE;
	if (txn_in_multi(cs))
		return ORDER_ANY;
	if (c != NULL)
		return c->fn == txn_watch ? ORDER_READ : ORDER_ANY;
	const struct kv_command *kc = kv_lookup(argv[0], lens[0]);
	if (kc == NULL)
		return ORDER_ANY;
	if (kc->flags & KV_WRITE)
		return ORDER_WRITE;
	if (keys_is(argv[0], lens[0]))
		return ORDER_READ_ALONE; /* keys.c: may be answered in slices */
	return (kc->flags & KV_READ) ? ORDER_READ : ORDER_ANY;
}

void command_dispatch(struct server *s, struct client_state *cs,
		      struct slot *sl, int argc, const uint8_t *const *argv,
		      const size_t *lens)
{
	struct command_ctx x = {s, cs, sl, argc, argv, lens};
	const struct local_command *c = local_lookup(argv[0], lens[0]);
	note_command(s, cs, argc, argv, lens);
	bool allowed = cs->authenticated || (c != NULL && c->before_auth);
	if (txn_in_multi(cs) && (c == NULL || !c->in_multi)) {
		txn_queue(&x, allowed, c != NULL);
		return;
	}
	if (c != NULL) {
		if (!allowed) {
			resp_error(command_out(&x),
				   "NOAUTH Authentication required.");
			command_done(&x);
			return;
		}
		if (is_txn_command(c) &&
		    answered_elsewhere(s, cs, sl, argc, argv, lens))
			return;
		c->fn(&x);
		return;
	}
	const struct kv_command *kc = kv_lookup(argv[0], lens[0]);
	if (kc == NULL) { /* before NOAUTH, as Redis */
		command_reply_unknown(command_out(&x), argc, argv, lens);
		command_done(&x);
		return;
	}
	if (!cs->authenticated) {
		resp_error(command_out(&x), "NOAUTH Authentication required.");
		command_done(&x);
		return;
	}
	if (answered_elsewhere(s, cs, sl, argc, argv, lens))
		return;
	kv_command(&x, kc);
}
