/*
 * The node's client connections as Redis clients see them: CLIENT ID,
 * INFO, LIST, KILL, SETNAME, GETNAME, SETINFO, and HELLO (docs/clients.md).
 * client.c owns the connections; each one's client_state is linked here
 * from accept until it starts closing, so CLIENT LIST shows exactly the
 * connections still served. Ids are unique on this node and increase, as
 * Redis's do (they restart at 1 with the process).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "address.h"
#include "baton/assert.h"
#include "server.h"

/* Redis's answer to HELLO and INFO's redis_version: the Redis release
 * whose commands and replies baton follows. */
#define CLIENT_REDIS_VERSION "7.0.0"
/* Room for one CLIENT LIST line. */
#define CLIENT_LINE_MAX 1024u

/* "ip:port" ("[ip]:port" for IPv6) of one end of the connection, as
 * CLIENT LIST shows addr= and laddr=; "?:0" if the kernel cannot say. */
static void end_text(uv_tcp_t *tcp, bool local, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	int len = (int)sizeof ss;
	int rv = local ? uv_tcp_getsockname(tcp, (struct sockaddr *)&ss, &len)
		       : uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len);
	if (rv == 0 && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
		baton_sockaddr_text((struct sockaddr *)&ss, out, cap);
	else
		snprintf(out, cap, "?:0");
}

void client_registry_add(struct server *s, struct client_state *cs,
			 uv_tcp_t *tcp)
{
	BATON_ASSERT(cs->id == 0);
	cs->id = ++s->next_client_id;
	cs->resp = 2;
	cs->created_ms = cs->last_command_ms = uv_now(s->loop);
	uv_os_fd_t fd;
	cs->fd = uv_fileno((uv_handle_t *)tcp, &fd) == 0 ? (int)fd : -1;
	end_text(tcp, false, cs->addr, sizeof cs->addr);
	end_text(tcp, true, cs->laddr, sizeof cs->laddr);
	cs->reg_prev = NULL;
	cs->reg_next = s->registry;
	if (s->registry != NULL)
		s->registry->reg_prev = cs;
	s->registry = cs;
}

void client_registry_remove(struct server *s, struct client_state *cs)
{
	bool linked = cs->reg_prev != NULL || s->registry == cs;
	if (!linked)
		return; /* removed when it was killed, or never added */
	if (cs->reg_prev != NULL)
		cs->reg_prev->reg_next = cs->reg_next;
	else
		s->registry = cs->reg_next;
	if (cs->reg_next != NULL)
		cs->reg_next->reg_prev = cs->reg_prev;
	cs->reg_prev = cs->reg_next = NULL;
	BATON_ASSERT(s->registry != cs);
}

/* One CLIENT LIST line, with Redis 7.2's fields in its order; those baton
 * has no counterpart for (pub/sub, query buffer, memory per client) are 0. */
static int client_line(struct server *s, const struct client_state *cs,
		       char *out, size_t cap)
{
	uint64_t now = uv_now(s->loop);
	const char *flags = txn_in_multi(cs) ? "x" : "N";
	return snprintf(
		out, cap,
		"id=%" PRIu64 " addr=%s laddr=%s fd=%d name=%s age=%" PRIu64
		" idle=%" PRIu64 " flags=%s db=0 sub=0 psub=0 ssub=0 multi=%ld "
		"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 "
		"oll=0 omem=%zu tot-mem=0 events=r cmd=%s user=default "
		"redir=-1 resp=%u lib-name=%s lib-ver=%s\n",
		cs->id, cs->addr, cs->laddr, cs->fd, cs->name,
		(now - cs->created_ms) / 1000,
		(now - cs->last_command_ms) / 1000, flags,
		txn_in_multi(cs) ? (long)txn_queued(cs) : -1L,
		client_output_queued(cs),
		cs->last_command[0] != '\0' ? cs->last_command : "NULL",
		cs->resp, cs->lib_name, cs->lib_ver);
}

/* Redis's rule for names and library strings: printable ASCII without
 * spaces (they would break CLIENT LIST's format). */
static bool client_text_valid(const uint8_t *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] < '!' || s[i] > '~')
			return false;
	return true;
}

/* Arg i as the connection's name, or a -ERR if it may not be one. */
static bool set_name(struct command_ctx *x, int i)
{
	if (x->lens[i] >= sizeof x->cs->name) {
		resp_error(command_out(x),
			   "ERR client name of %zu bytes is too long (at most "
			   "%zu)",
			   x->lens[i], sizeof x->cs->name - 1);
		return false;
	}
	if (!client_text_valid(x->argv[i], x->lens[i])) {
		resp_error(command_out(x),
			   "ERR Client names cannot contain spaces, newlines "
			   "or special characters.");
		return false;
	}
	command_arg_str(x, i, x->cs->name, sizeof x->cs->name);
	return true;
}

static int client_setinfo(struct command_ctx *x)
{
	if (x->argc != 4)
		return command_wrong_args(x);
	char *dst;
	if (command_arg_is(x, 2, "LIB-NAME"))
		dst = x->cs->lib_name;
	else if (command_arg_is(x, 2, "LIB-VER"))
		dst = x->cs->lib_ver;
	else {
		resp_error(command_out(x),
			   "ERR Unrecognized option '%.*s' (CLIENT SETINFO "
			   "takes LIB-NAME or LIB-VER)",
			   (int)(x->lens[2] < 64 ? x->lens[2] : 64),
			   (const char *)x->argv[2]);
		return command_done(x);
	}
	if (x->lens[3] >= sizeof x->cs->lib_name ||
	    !client_text_valid(x->argv[3], x->lens[3])) {
		resp_error(command_out(x),
			   "ERR %s cannot contain spaces, newlines or special "
			   "characters, nor be longer than %zu bytes",
			   dst == x->cs->lib_name ? "lib-name" : "lib-ver",
			   sizeof x->cs->lib_name - 1);
		return command_done(x);
	}
	command_arg_str(x, 3, dst, sizeof x->cs->lib_name);
	resp_simple(command_out(x), "OK");
	return command_done(x);
}

static int client_info(struct command_ctx *x)
{
	char line[CLIENT_LINE_MAX];
	int n = client_line(x->s, x->cs, line, sizeof line);
	command_reply_text(x, line, n > 0 ? (size_t)n : 0);
	return command_done(x);
}

/* Is argument i a client type Redis knows (CLIENT LIST/KILL TYPE)? If not,
 * Redis's -ERR is the reply. Every baton connection is a normal one; the
 * other types name no connection. */
static bool client_type_known(struct command_ctx *x, int i)
{
	static const char *const types[] = {"normal", "master", "replica",
					    "slave", "pubsub"};
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
		if (command_arg_is(x, i, types[t]))
			return true;
	resp_error(command_out(x), "ERR Unknown client type '%.*s'",
		   (int)(x->lens[i] < 64 ? x->lens[i] : 64),
		   (const char *)x->argv[i]);
	return false;
}

/* Is id one of the ids CLIENT LIST ID ... names (from argument i on)? */
static bool id_listed(const struct command_ctx *x, int from, uint64_t id)
{
	for (int i = from; i < x->argc; i++) {
		int64_t v;
		if (resp_parse_int(x->argv[i], x->lens[i], &v) &&
		    (uint64_t)v == id)
			return true;
	}
	return false;
}

static int client_list(struct command_ctx *x)
{
	bool by_id = false, none = false;
	int ids_from = 0;
	if (x->argc == 4 && command_arg_is(x, 2, "TYPE")) {
		if (!client_type_known(x, 3))
			return command_done(x);
		/* Every connection is a normal one: no replicas, no pub/sub. */
		none = !command_arg_is(x, 3, "NORMAL");
	} else if (x->argc >= 4 && command_arg_is(x, 2, "ID")) {
		by_id = true;
		ids_from = 3;
		for (int i = 3; i < x->argc; i++) {
			int64_t v;
			if (!resp_parse_int(x->argv[i], x->lens[i], &v)) {
				resp_error(command_out(x),
					   "ERR Invalid client ID");
				return command_done(x);
			}
		}
	} else if (x->argc != 2) {
		resp_error(command_out(x), "ERR syntax error (CLIENT LIST "
					   "[TYPE normal] [ID id ...])");
		return command_done(x);
	}
	/* In id order, as Redis lists them: the registry is newest first. */
	const struct client_state *oldest = x->s->registry;
	while (oldest != NULL && oldest->reg_next != NULL)
		oldest = oldest->reg_next;
	struct baton_buf all;
	baton_buf_init(&all);
	for (const struct client_state *cs = oldest; cs != NULL && !none;
	     cs = cs->reg_prev) {
		if (by_id && !id_listed(x, ids_from, cs->id))
			continue;
		char line[CLIENT_LINE_MAX];
		int n = client_line(x->s, cs, line, sizeof line);
		if (n > 0 && baton_buf_append(&all, line, (size_t)n) != 0) {
			baton_buf_free(&all);
			return command_fail(x, BATON_ENOMEM);
		}
	}
	command_reply_text(x, all.data, all.len);
	baton_buf_free(&all);
	return command_done(x);
}

/* The filters of CLIENT KILL's new form; unset ones match everything. */
struct kill_filter {
	bool has_id;
	uint64_t id;
	char addr[64], laddr[64];
	bool skip_me;
	bool none; /* TYPE other than normal, or a USER other than default */
	int64_t max_age_s;
};

static bool kill_filter_parse(struct command_ctx *x, struct kill_filter *f)
{
	memset(f, 0, sizeof *f);
	f->skip_me = true;
	f->max_age_s = -1;
	if (x->argc % 2 != 0) {
		resp_error(command_out(x), "ERR syntax error");
		return false;
	}
	for (int i = 2; i + 1 < x->argc; i += 2) {
		int64_t v;
		bool num = resp_parse_int(x->argv[i + 1], x->lens[i + 1], &v);
		if (command_arg_is(x, i, "ID")) {
			if (!num || v <= 0) {
				resp_error(command_out(x),
					   "ERR client-id should be greater "
					   "than 0");
				return false;
			}
			f->has_id = true;
			f->id = (uint64_t)v;
		} else if (command_arg_is(x, i, "ADDR")) {
			command_arg_str(x, i + 1, f->addr, sizeof f->addr);
		} else if (command_arg_is(x, i, "LADDR")) {
			command_arg_str(x, i + 1, f->laddr, sizeof f->laddr);
		} else if (command_arg_is(x, i, "SKIPME")) {
			if (command_arg_is(x, i + 1, "YES"))
				f->skip_me = true;
			else if (command_arg_is(x, i + 1, "NO"))
				f->skip_me = false;
			else {
				resp_error(command_out(x), "ERR syntax error");
				return false;
			}
		} else if (command_arg_is(x, i, "TYPE")) {
			if (!client_type_known(x, i + 1))
				return false;
			f->none =
				f->none || !command_arg_is(x, i + 1, "NORMAL");
		} else if (command_arg_is(x, i, "USER")) {
			/* One user, as Redis without ACLs: "default". */
			if (!command_arg_is(x, i + 1, "DEFAULT")) {
				resp_error(command_out(x),
					   "ERR No such user '%.*s'",
					   (int)(x->lens[i + 1] < 64
							 ? x->lens[i + 1]
							 : 64),
					   (const char *)x->argv[i + 1]);
				return false;
			}
		} else if (command_arg_is(x, i, "MAXAGE") && num && v >= 0) {
			f->max_age_s = v;
		} else {
			resp_error(command_out(x),
				   "ERR syntax error (CLIENT KILL takes ID, "
				   "ADDR, LADDR, SKIPME, TYPE, USER, MAXAGE)");
			return false;
		}
	}
	return true;
}

static bool kill_matches(struct server *s, const struct kill_filter *f,
			 const struct client_state *cs,
			 const struct client_state *me)
{
	if (f->none || (f->skip_me && cs == me))
		return false;
	if (f->has_id && cs->id != f->id)
		return false;
	if (f->addr[0] != '\0' && strcmp(f->addr, cs->addr) != 0)
		return false;
	if (f->laddr[0] != '\0' && strcmp(f->laddr, cs->laddr) != 0)
		return false;
	uint64_t age_s = (uv_now(s->loop) - cs->created_ms) / 1000;
	return f->max_age_s < 0 || age_s > (uint64_t)f->max_age_s;
}

static int client_kill_cmd(struct command_ctx *x)
{
	if (x->argc == 3) { /* the old form: CLIENT KILL addr */
		char addr[64];
		command_arg_str(x, 2, addr, sizeof addr);
		for (struct client_state *cs = x->s->registry; cs != NULL;
		     cs = cs->reg_next) {
			if (strcmp(cs->addr, addr) == 0) {
				resp_simple(command_out(x), "OK");
				client_kill(cs);
				return command_done(x);
			}
		}
		resp_error(command_out(x), "ERR No such client");
		return command_done(x);
	}
	if (x->argc < 3)
		return command_wrong_args(x);
	struct kill_filter f;
	if (!kill_filter_parse(x, &f))
		return command_done(x);
	int64_t killed = 0;
	struct client_state *next;
	for (struct client_state *cs = x->s->registry; cs != NULL; cs = next) {
		next = cs->reg_next; /* client_kill unlinks cs */
		if (kill_matches(x->s, &f, cs, x->cs)) {
			client_kill(cs);
			killed++;
		}
	}
	resp_int(command_out(x), killed);
	return command_done(x);
}

int client_command(struct command_ctx *x)
{
	struct baton_buf *b = command_out(x);
	if (x->argc < 2)
		return command_wrong_args(x);
	bool plain = command_arg_is(x, 1, "ID") ||
		     command_arg_is(x, 1, "INFO") ||
		     command_arg_is(x, 1, "GETNAME");
	if ((plain && x->argc != 2) ||
	    (command_arg_is(x, 1, "SETNAME") && x->argc != 3))
		return command_wrong_args(x); /* 'client|id' */
	if (command_arg_is(x, 1, "ID")) {
		resp_int(b, (int64_t)x->cs->id);
	} else if (command_arg_is(x, 1, "INFO") && x->argc == 2) {
		return client_info(x);
	} else if (command_arg_is(x, 1, "LIST")) {
		return client_list(x);
	} else if (command_arg_is(x, 1, "KILL")) {
		return client_kill_cmd(x);
	} else if (command_arg_is(x, 1, "SETINFO")) {
		return client_setinfo(x);
	} else if (command_arg_is(x, 1, "SETNAME") && x->argc == 3) {
		if (set_name(x, 2))
			resp_simple(b, "OK");
	} else if (command_arg_is(x, 1, "GETNAME") && x->argc == 2) {
		if (x->cs->name[0] == '\0')
			resp_null(b);
		else
			resp_bulk(b, x->cs->name, strlen(x->cs->name));
	} else {
		resp_error(b,
			   "ERR unknown CLIENT subcommand or wrong number of "
			   "arguments for '%.*s' (baton has ID, INFO, LIST, "
			   "KILL, SETNAME, GETNAME, SETINFO)",
			   (int)(x->lens[1] < 32 ? x->lens[1] : 32),
			   (const char *)x->argv[1]);
	}
	return command_done(x);
}

/* ---- HELLO ---------------------------------------------------------------
 */

/* A map header: RESP3's %n, or RESP2's flat array of 2n. */
static void map_header(struct baton_buf *b, uint32_t resp, size_t pairs)
{
	if (resp == 3)
		resp3_map(b, pairs);
	else
		resp_array(b, 2 * pairs);
}

static void hello_reply(struct command_ctx *x)
{
	struct baton_buf *b = command_out(x);
	char release[BATON_RELEASE_STR_MAX];
	baton_release_format(x->s->cfg.profile.release, release);
	map_header(b, x->cs->resp, 8);
	resp_bulk(b, "server", 6);
	resp_bulk(b, "redis", 5);
	resp_bulk(b, "version", 7);
	resp_bulk(b, CLIENT_REDIS_VERSION, strlen(CLIENT_REDIS_VERSION));
	resp_bulk(b, "proto", 5);
	resp_int(b, x->cs->resp);
	resp_bulk(b, "id", 2);
	resp_int(b, (int64_t)x->cs->id);
	resp_bulk(b, "mode", 4);
	resp_bulk(b, "standalone", 10);
	/* Every node takes writes (a follower forwards them). */
	resp_bulk(b, "role", 4);
	resp_bulk(b, "master", 6);
	resp_bulk(b, "modules", 7);
	resp_array(b, 0);
	resp_bulk(b, "baton_version", 13);
	resp_bulk(b, release, strlen(release));
}

/* HELLO [protover [AUTH username password] [SETNAME name]] */
int client_hello(struct command_ctx *x)
{
	struct baton_buf *b = command_out(x);
	int64_t proto = x->cs->resp;
	if (x->argc >= 2) {
		if (!resp_parse_int(x->argv[1], x->lens[1], &proto)) {
			resp_error(b, "ERR Protocol version is not an integer "
				      "or out of range");
			return command_done(x);
		}
		if (proto != 2 && proto != 3) {
			resp_error(b, "NOPROTO unsupported protocol version "
				      "(baton speaks RESP2 and RESP3: HELLO 2 "
				      "or HELLO 3)");
			return command_done(x);
		}
	}
	int auth_at = 0, name_at = 0;
	for (int i = 2; i < x->argc; i++) {
		if (command_arg_is(x, i, "AUTH") && i + 2 < x->argc) {
			auth_at = i;
			i += 2;
		} else if (command_arg_is(x, i, "SETNAME") && i + 1 < x->argc) {
			name_at = i;
			i += 1;
		} else {
			resp_error(b, "ERR Syntax error in HELLO option '%.*s'",
				   (int)(x->lens[i] < 32 ? x->lens[i] : 32),
				   (const char *)x->argv[i]);
			return command_done(x);
		}
	}
	if (auth_at != 0) {
		if (!command_credentials_ok(x, auth_at + 1, auth_at + 2)) {
			resp_error(b, "WRONGPASS invalid username-password "
				      "pair or user is disabled.");
			return command_done(x);
		}
		x->cs->authenticated = true;
	}
	if (!x->cs->authenticated) {
		resp_error(b, "NOAUTH HELLO must be called with the client "
			      "already authenticated, otherwise the HELLO "
			      "AUTH <user> <pass> option can be used "
			      "to authenticate the client and select the RESP "
			      "protocol version at the same time");
		return command_done(x);
	}
	if (name_at != 0 && !set_name(x, name_at + 1))
		return command_done(x);
	x->cs->resp = (uint32_t)proto;
	hello_reply(x);
	return command_done(x);
}
