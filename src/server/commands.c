/*
 * The command table: connection commands answered here, key-value commands
 * sent through Raft (writes) or the read index (reads), and the admin
 * commands of batonctl (docs/batond.md).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

struct ctx {
	struct server *s;
	struct client_state *cs;
	struct slot *sl;
	int argc;
	const uint8_t *const *argv;
	const size_t *lens;
};

static bool arg_is(const struct ctx *x, int i, const char *word)
{
	return i < x->argc && x->lens[i] == strlen(word) &&
	       strncasecmp((const char *)x->argv[i], word, x->lens[i]) == 0;
}

static struct baton_buf *out(const struct ctx *x)
{
	return slot_buf(x->sl);
}

static int done(const struct ctx *x)
{
	slot_done(x->sl);
	return 0;
}

static int fail(const struct ctx *x, int code)
{
	slot_error(x->sl, code);
	return 0;
}

static int wrong_args(const struct ctx *x)
{
	resp_error(out(x), "ERR wrong number of arguments for '%.*s' command",
		   (int)(x->lens[0] < 64 ? x->lens[0] : 64),
		   (const char *)x->argv[0]);
	return done(x);
}

/* A decimal argument; false if it is not one. */
static bool arg_u64(const struct ctx *x, int i, uint64_t *v)
{
	if (i >= x->argc || x->lens[i] == 0 || x->lens[i] > 20)
		return false;
	char buf[24];
	memcpy(buf, x->argv[i], x->lens[i]);
	buf[x->lens[i]] = '\0';
	char *end;
	unsigned long long n = strtoull(buf, &end, 10);
	if (*end != '\0' || buf[0] == '-')
		return false;
	*v = n;
	return true;
}

static void arg_str(const struct ctx *x, int i, char *buf, size_t cap)
{
	size_t n = x->lens[i] < cap - 1 ? x->lens[i] : cap - 1;
	memcpy(buf, x->argv[i], n);
	buf[n] = '\0';
}

/* ---- connection commands ------------------------------------------------- */

static int cmd_ping(struct ctx *x)
{
	if (x->argc > 2)
		return wrong_args(x);
	if (x->argc == 2)
		resp_bulk(out(x), x->argv[1], x->lens[1]);
	else
		resp_simple(out(x), "PONG");
	return done(x);
}

static int cmd_echo(struct ctx *x)
{
	if (x->argc != 2)
		return wrong_args(x);
	resp_bulk(out(x), x->argv[1], x->lens[1]);
	return done(x);
}

static int cmd_select(struct ctx *x)
{
	if (x->argc != 2)
		return wrong_args(x);
	if (arg_is(x, 1, "0"))
		resp_simple(out(x), "OK");
	else
		resp_error(out(x), "ERR DB index is out of range (baton has "
				   "database 0 only)");
	return done(x);
}

static int cmd_quit(struct ctx *x)
{
	resp_simple(out(x), "OK");
	x->cs->quit = true;
	return done(x);
}

static int cmd_auth(struct ctx *x)
{
	if (x->argc != 2 && x->argc != 3)
		return wrong_args(x);
	const char *pw = x->s->cfg.password;
	size_t i = (size_t)x->argc - 1;
	if (pw[0] == '\0') {
		resp_error(out(x), "ERR AUTH called without any password "
				   "configured");
	} else if (x->lens[i] == strlen(pw) &&
		   memcmp(x->argv[i], pw, x->lens[i]) == 0) {
		x->cs->authenticated = true;
		resp_simple(out(x), "OK");
	} else {
		resp_error(out(x), "WRONGPASS invalid password");
	}
	return done(x);
}

static int cmd_client(struct ctx *x)
{
	if (arg_is(x, 1, "SETNAME") && x->argc == 3) {
		arg_str(x, 2, x->cs->name, sizeof x->cs->name);
		resp_simple(out(x), "OK");
	} else if (arg_is(x, 1, "GETNAME") && x->argc == 2) {
		if (x->cs->name[0] == '\0')
			resp_null(out(x));
		else
			resp_bulk(out(x), x->cs->name, strlen(x->cs->name));
	} else if (arg_is(x, 1, "SETINFO") || arg_is(x, 1, "ID")) {
		resp_simple(out(x), "OK");
	} else {
		resp_error(out(x), "ERR unknown CLIENT subcommand (baton has "
				   "SETNAME and GETNAME)");
	}
	return done(x);
}

static int cmd_command(struct ctx *x)
{
	if (arg_is(x, 1, "COUNT"))
		resp_int(out(x), 0);
	else
		resp_array(out(x), 0); /* COMMAND, COMMAND DOCS, ... */
	return done(x);
}

/* Enough for redis-benchmark and redis-cli. */
static int cmd_config(struct ctx *x)
{
	if (!arg_is(x, 1, "GET") || x->argc != 3) {
		resp_error(out(x), "ERR baton supports CONFIG GET only");
		return done(x);
	}
	static const char *const known[][2] = {
		{"save", ""}, {"appendonly", "yes"}, {"databases", "1"}};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		if (arg_is(x, 2, known[i][0])) {
			resp_array(out(x), 2);
			resp_bulk(out(x), known[i][0], strlen(known[i][0]));
			resp_bulk(out(x), known[i][1], strlen(known[i][1]));
			return done(x);
		}
	}
	resp_array(out(x), 0);
	return done(x);
}

static const char *role_name(uint32_t role)
{
	switch (role) {
	case BATON_LEADER:
		return "leader";
	case BATON_CANDIDATE:
		return "candidate";
	case BATON_PRE_CANDIDATE:
		return "pre-candidate";
	default:
		return "follower";
	}
}

static int cmd_info(struct ctx *x)
{
	struct server *s = x->s;
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	const struct baton_profile *cur = baton_release_current();
	char release[BATON_RELEASE_STR_MAX];
	baton_release_format(cur->release, release);
	char text[4096 + BATON_STALL_TEXT_MAX];
	int n = snprintf(
		text, sizeof text,
		"# Server\r\nbaton_version:%s\r\nredis_version:7.0.0\r\n"
		"process_id:%d\r\ntcp_port:%s\r\nuptime_in_seconds:%" PRIu64
		"\r\n\r\n# Clients\r\nconnected_clients:%u\r\n\r\n"
		"# Replication\r\nrole:%s\r\nnode_id:%" PRIu64
		"\r\nleader_id:%" PRIu64 "\r\nterm:%" PRIu64
		"\r\ncommit_index:%" PRIu64 "\r\napplied_index:%" PRIu64
		"\r\nlast_index:%" PRIu64 "\r\nsnapshot_index:%" PRIu64
		"\r\nmembers:%u\r\nstalled_index:%" PRIu64
		"\r\nstalled_reason:%s\r\n\r\n# Versions\r\nrelease:%s\r\n"
		"peer_protocol:%u-%u\r\nmachine_max:%u\r\nmachine_version:%u"
		"\r\n\r\n# Stats\r\ntotal_connections_received:%" PRIu64
		"\r\ntotal_commands_processed:%" PRIu64
		"\r\nrejected_connections:%" PRIu64
		"\r\nprotocol_errors:%" PRIu64
		"\r\npeer_frames_dropped:%" PRIu64
		"\r\npeer_frames_unknown:%" PRIu64
		"\r\npeer_handshakes_refused:%" PRIu64 "\r\nstorage_ok:%s\r\n",
		release, (int)getpid(), strrchr(s->cfg.listen, ':') + 1,
		(uv_now(s->loop) - s->started_ms) / 1000, s->n_clients,
		role_name(st.raft.role), st.raft.id, st.raft.leader_id,
		st.raft.term, st.raft.commit_index, st.applied,
		st.raft.last_index, st.raft.snapshot_index, st.raft.config.n,
		st.stalled_index, st.stalled_why, release, cur->proto_min.value,
		cur->proto_max.value, cur->machine_max.value,
		st.raft.versions.machine.value, s->stats.connections,
		s->stats.commands, s->stats.rejected_clients,
		s->stats.protocol_errors, st.transport.dropped,
		st.transport.unknown, st.transport.refused,
		st.storage_failed ? "no" : "yes");
	resp_bulk(out(x), text, n > 0 ? (size_t)n : 0);
	return done(x);
}

/* ---- key-value commands ---------------------------------------------------
 */

struct read_ctx {
	struct server *s;
	struct slot *sl;
	int argc;
	uint8_t **argv;
	size_t *lens;
};

static void read_ctx_free(struct read_ctx *r)
{
	for (int i = 0; i < r->argc; i++)
		free(r->argv[i]);
	free(r->argv);
	free(r->lens);
	free(r);
}

static void on_read_ready(void *data, int status)
{
	struct read_ctx *r = data;
	if (status != 0) {
		server_reply_error(r->s, slot_buf(r->sl), status);
		slot_done(r->sl);
	} else {
		kv_read(r->s->machine.kv, r->argc,
			(const uint8_t *const *)r->argv, r->lens,
			slot_buf(r->sl));
		slot_done(r->sl);
	}
	read_ctx_free(r);
}

static int kv_command(struct ctx *x, const struct kv_command *c)
{
	struct baton_buf *b = out(x);
	if (kv_check(c, x->argc, x->argv, x->lens, b) != 0)
		return done(x);
	bool stale = x->cs->stale_reads || BATON_PLANTED_BUG_STALE_READS;
	/* A node that stopped applying says so at once rather than let the
	 * client time out; stale reads serve what it applied. */
	if ((!stale || (c->flags & KV_WRITE)) &&
	    server_reply_if_stalled(x->s, b))
		return done(x);
	if (c->flags & KV_WRITE) {
		if (x->s->leader == x->s->cfg.id)
			propose_write(x->s, x->sl, x->argc, x->argv, x->lens);
		else
			forward_write(x->s, x->sl, x->argc, x->argv, x->lens);
		return 0;
	}
	if (stale) {
		kv_read(x->s->machine.kv, x->argc, x->argv, x->lens, b);
		return done(x);
	}
	/* The arguments must outlive this call: copy them. */
	struct read_ctx *r = calloc(1, sizeof *r);
	if (r == NULL)
		return fail(x, BATON_ENOMEM);
	r->s = x->s;
	r->sl = x->sl;
	r->argc = x->argc;
	r->argv = calloc((size_t)x->argc, sizeof *r->argv);
	r->lens = calloc((size_t)x->argc, sizeof *r->lens);
	bool ok = r->argv != NULL && r->lens != NULL;
	for (int i = 0; ok && i < x->argc; i++) {
		r->argv[i] = malloc(x->lens[i] + 1);
		ok = r->argv[i] != NULL;
		if (ok) {
			memcpy(r->argv[i], x->argv[i], x->lens[i]);
			r->lens[i] = x->lens[i];
		}
	}
	int rv = ok ? baton_node_read(x->s->node, on_read_ready, r)
		    : BATON_ENOMEM;
	if (rv != 0) {
		read_ctx_free(r);
		server_reply_error(x->s, b, rv);
		return done(x);
	}
	return 0;
}

/* ---- admin commands -------------------------------------------------------
 */

static void map_field(struct baton_buf *b, const char *k, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void map_field(struct baton_buf *b, const char *k, const char *fmt, ...)
{
	char v[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	resp_bulk(b, k, strlen(k));
	resp_bulk(b, v, n > 0 ? (size_t)n : 0);
}

static int cmd_node(struct ctx *x)
{
	struct server *s = x->s;
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	const struct book_entry *me = server_address(s, s->cfg.id);
	struct baton_buf *b = out(x);
	resp_array(b, 2 * 17);
	map_field(b, "id", "%" PRIu64, st.raft.id);
	const struct baton_member *self =
		baton_config_find(&st.raft.config, st.raft.id);
	map_field(b, "role", "%s",
		  self != NULL && self->role == BATON_LEARNER
			  ? "learner"
			  : role_name(st.raft.role));
	map_field(b, "term", "%" PRIu64, st.raft.term);
	map_field(b, "leader", "%" PRIu64, st.raft.leader_id);
	map_field(b, "commit", "%" PRIu64, st.raft.commit_index);
	map_field(b, "applied", "%" PRIu64, st.applied);
	map_field(b, "last_index", "%" PRIu64, st.raft.last_index);
	map_field(b, "snapshot_index", "%" PRIu64, st.raft.snapshot_index);
	const struct baton_profile *cur = baton_release_current();
	char release[BATON_RELEASE_STR_MAX];
	map_field(b, "release", "%s",
		  baton_release_format(cur->release, release));
	map_field(b, "proto_min", "%u", cur->proto_min.value);
	map_field(b, "proto_max", "%u", cur->proto_max.value);
	map_field(b, "machine_max", "%u", cur->machine_max.value);
	map_field(b, "peer_addr", "%s", s->cfg.peer_listen);
	map_field(b, "client_addr", "%s", me ? me->client : s->cfg.listen);
	map_field(b, "storage", "%s", st.storage_failed ? "failed" : "ok");
	map_field(b, "stalled_index", "%" PRIu64, st.stalled_index);
	map_field(b, "stalled", "%s", st.stalled_why);
	return done(x);
}

static int cmd_members(struct ctx *x)
{
	struct server *s = x->s;
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	struct baton_buf *b = out(x);
	resp_array(b, st.raft.config.n);
	for (uint32_t i = 0; i < st.raft.config.n; i++) {
		const struct baton_member *m = &st.raft.config.members[i];
		const struct book_entry *e = server_address(s, m->id);
		resp_array(b, 2 * 5);
		map_field(b, "id", "%" PRIu64, m->id);
		map_field(b, "role", "%s",
			  m->role == BATON_VOTER ? "voter" : "learner");
		map_field(b, "peer_addr", "%s", e ? e->peer : "");
		map_field(b, "client_addr", "%s", e ? e->client : "");
		if (st.raft.role == BATON_LEADER)
			map_field(b, "match", "%" PRIu64, st.match[i]);
		else
			map_field(b, "match", "-");
	}
	return done(x);
}

/* Admin writes go to the leader: elsewhere say where it is. */
static bool require_leader(struct ctx *x)
{
	struct server *s = x->s;
	if (s->leader == s->cfg.id)
		return true;
	const struct book_entry *e = server_address(s, s->leader);
	if (s->leader == 0)
		resp_error(out(x), "TRYAGAIN no leader elected yet; retry");
	else
		resp_error(out(x), "NOTLEADER leader is %" PRIu64 " at %s",
			   s->leader, e ? e->client : "?");
	done(x);
	return false;
}

static void on_admin_done(void *data, int status)
{
	struct slot *sl = data;
	if (status != 0) {
		slot_error(sl, status);
		return;
	}
	resp_simple(slot_buf(sl), "OK");
	slot_done(sl);
}

struct add_ctx {
	struct server *s;
	struct slot *sl;
	baton_node_id id;
};

static void on_address_applied(void *data, int status, const uint8_t *reply,
			       size_t len)
{
	struct add_ctx *a = data;
	(void)reply;
	(void)len;
	if (status == 0)
		status = baton_node_add_learner(a->s->node, a->id,
						on_admin_done, a->sl);
	if (status != 0)
		slot_error(a->sl, status);
	free(a);
}

static int cmd_add(struct ctx *x)
{
	uint64_t id;
	if (x->argc != 4)
		return wrong_args(x);
	if (!arg_u64(x, 1, &id) || id == 0) {
		resp_error(out(x), "ERR node id must be a positive integer");
		return done(x);
	}
	if (!require_leader(x))
		return 0;
	struct book_entry e = {.id = id};
	arg_str(x, 2, e.peer, sizeof e.peer);
	arg_str(x, 3, e.client, sizeof e.client);
	struct sockaddr_in sa;
	if (baton_parse_addr(e.peer, &sa) != 0 ||
	    baton_parse_addr(e.client, &sa) != 0) {
		resp_error(out(x), "ERR addresses must be IPv4 host:port");
		return done(x);
	}
	/* First every node learns where it listens, then it joins. */
	struct add_ctx *a = calloc(1, sizeof *a);
	struct baton_buf b;
	baton_buf_init(&b);
	int rv = a == NULL ? BATON_ENOMEM
			   : server_machine_encode_address(&e, &b);
	if (rv == 0) {
		*a = (struct add_ctx){x->s, x->sl, id};
		rv = baton_node_propose(x->s->node, b.data, b.len,
					on_address_applied, a);
	}
	baton_buf_free(&b);
	if (rv != 0) {
		free(a);
		slot_error(x->sl, rv);
	}
	return 0;
}

static int cmd_member_change(struct ctx *x,
			     int (*op)(struct baton_node *, baton_node_id,
				       baton_node_done_cb, void *))
{
	uint64_t id = 0;
	bool optional = op == baton_node_transfer;
	if (x->argc != 2 && !(optional && x->argc == 1))
		return wrong_args(x);
	if (x->argc == 2 && !arg_u64(x, 1, &id)) {
		resp_error(out(x), "ERR node id must be a positive integer");
		return done(x);
	}
	if (!require_leader(x))
		return 0;
	int rv = op(x->s->node, id, on_admin_done, x->sl);
	if (rv != 0)
		slot_error(x->sl, rv);
	return 0;
}

static int cmd_stale(struct ctx *x)
{
	if (x->argc != 2 || !(arg_is(x, 1, "ON") || arg_is(x, 1, "OFF")))
		return wrong_args(x);
	x->cs->stale_reads = arg_is(x, 1, "ON");
	resp_simple(out(x), "OK");
	return done(x);
}

#if BATON_TEST_HOOKS
/* Test builds only (server.h): BATON.TEST.PROPOSE <payload> proposes the
 * raw bytes as a command entry, whatever they hold, so a test can give the
 * nodes an entry of a "future release". */
static void on_raw_applied(void *data, int status, const uint8_t *reply,
			   size_t len)
{
	struct slot *sl = data;
	if (status != 0) {
		slot_error(sl, status);
		return;
	}
	int rv = len > 0 ? baton_buf_append(slot_buf(sl), reply, len)
			 : resp_simple(slot_buf(sl), "OK");
	if (rv != 0) {
		slot_error(sl, rv);
		return;
	}
	slot_done(sl);
}

static int cmd_test_propose(struct ctx *x)
{
	if (x->argc != 2)
		return wrong_args(x);
	if (!require_leader(x))
		return 0;
	int rv = baton_node_propose(x->s->node, x->argv[1], x->lens[1],
				    on_raw_applied, x->sl);
	if (rv != 0)
		return fail(x, rv);
	return 0;
}
#endif

/* ---- dispatch ------------------------------------------------------------ */

struct local_command {
	const char *name;
	int (*fn)(struct ctx *x);
	bool before_auth;
};

static int cmd_promote(struct ctx *x)
{
	return cmd_member_change(x, baton_node_promote);
}

static int cmd_remove(struct ctx *x)
{
	return cmd_member_change(x, baton_node_remove);
}

static int cmd_transfer(struct ctx *x)
{
	return cmd_member_change(x, baton_node_transfer);
}

static const struct local_command local_commands[] = {
	{"PING", cmd_ping, false},
	{"ECHO", cmd_echo, false},
	{"SELECT", cmd_select, false},
	{"QUIT", cmd_quit, true},
	{"AUTH", cmd_auth, true},
	{"CLIENT", cmd_client, false},
	{"COMMAND", cmd_command, false},
	{"CONFIG", cmd_config, false},
	{"INFO", cmd_info, false},
	{"BATON.NODE", cmd_node, false},
	{"BATON.MEMBERS", cmd_members, false},
	{"BATON.ADD", cmd_add, false},
	{"BATON.PROMOTE", cmd_promote, false},
	{"BATON.REMOVE", cmd_remove, false},
	{"BATON.TRANSFER", cmd_transfer, false},
	{"BATON.STALE", cmd_stale, false},
#if BATON_TEST_HOOKS
	{"BATON.TEST.PROPOSE", cmd_test_propose, false},
#endif
};

void command_dispatch(struct server *s, struct client_state *cs,
		      struct slot *sl, int argc, const uint8_t *const *argv,
		      const size_t *lens)
{
	struct ctx x = {s, cs, sl, argc, argv, lens};
	for (size_t i = 0; i < sizeof local_commands / sizeof local_commands[0];
	     i++) {
		const struct local_command *c = &local_commands[i];
		if (!arg_is(&x, 0, c->name))
			continue;
		if (!cs->authenticated && !c->before_auth) {
			resp_error(out(&x), "NOAUTH Authentication required.");
			done(&x);
			return;
		}
		c->fn(&x);
		return;
	}
	if (!cs->authenticated) {
		resp_error(out(&x), "NOAUTH Authentication required.");
		done(&x);
		return;
	}
	const struct kv_command *kc = kv_lookup(argv[0], lens[0]);
	if (kc != NULL) {
		kv_command(&x, kc);
		return;
	}
	resp_error(out(&x), "ERR unknown command '%.*s'",
		   (int)(lens[0] < 64 ? lens[0] : 64), (const char *)argv[0]);
	done(&x);
}
