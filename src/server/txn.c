/*
 * Transactions (machine version 2): MULTI, EXEC, DISCARD, WATCH and
 * UNWATCH with Redis's replies. MULTI starts queueing: each key-value
 * command is checked for what Redis checks when queueing (a known command,
 * its arity, the machine version) and answered +QUEUED, or refused, which
 * makes EXEC answer EXECABORT. EXEC turns the queue and the watched keys
 * into one log entry (kv_encode_txn, through the leader like any write), so
 * the commands apply atomically on every node; its reply is the array of
 * their replies, or a null array when a watched key changed.
 *
 * WATCH records, per key, kv_watch_hash() of what the key holds: first at
 * once on local state, then again once a linearizable read index has come
 * back (the +OK waits for it), so the hash is of state at least as new as
 * anything the client read before. EXEC normally follows that +OK; one
 * sent before it uses the first hash, which at worst aborts needlessly.
 *
 * Not Redis: a transaction holds key-value commands only (PING, INFO,
 * UNWATCH, ... are refused inside MULTI), and a MULTI refused because the
 * effective machine version is 1 still opens the transaction, whose
 * commands are then refused until EXEC or DISCARD, so a client pipelining
 * MULTI ... EXEC never has its writes applied one by one.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "server.h"

/* Bytes one transaction may queue (as encoded): within the core's default
 * limit of a log entry (16 MiB), with room for the watches. */
#define TXN_BYTES_MAX ((size_t)(16u << 20) - (64u << 10))
#define TXN_COMMANDS_MAX KV_TXN_COMMANDS_MAX
#define TXN_WATCHES_MAX KV_TXN_WATCHES_MAX
_Static_assert(TXN_COMMANDS_MAX <= BATON_PEER_FORWARD_COMMANDS_MAX &&
		       TXN_WATCHES_MAX <= BATON_PEER_FORWARD_WATCHES_MAX,
	       "a transaction the server queues can be forwarded");

struct txn {
	bool multi;   /* between MULTI and EXEC or DISCARD */
	bool aborted; /* a command was refused while queueing */
	bool refused; /* MULTI itself was refused (machine version) */
	size_t bytes; /* queued so far, as encoded */
	uint32_t n_commands, cap_commands;
	/* Each command's argv, lens and bytes are one allocation, argv's. */
	struct kv_txn_command *commands;
	uint32_t n_watches, cap_watches;
	struct kv_watch *watches; /* keys owned */
};

static int wrong_args(const struct command_ctx *x, const char *name)
{
	resp_error(command_out(x),
		   "ERR wrong number of arguments for '%s' command", name);
	return command_done(x);
}

static struct txn *txn_get(struct client_state *cs)
{
	if (cs->txn == NULL)
		cs->txn = calloc(1, sizeof *cs->txn);
	return cs->txn;
}

static void drop_queue(struct txn *t)
{
	for (uint32_t i = 0; i < t->n_commands; i++)
		free((void *)t->commands[i].argv);
	free(t->commands);
	t->commands = NULL;
	t->n_commands = t->cap_commands = 0;
	t->bytes = 0;
	t->multi = t->aborted = t->refused = false;
}

static void drop_watches(struct client_state *cs)
{
	struct txn *t = cs->txn;
	cs->watch_epoch++;
	if (t == NULL)
		return;
	for (uint32_t i = 0; i < t->n_watches; i++)
		free((void *)t->watches[i].key);
	free(t->watches);
	t->watches = NULL;
	t->n_watches = t->cap_watches = 0;
}

/* EXEC and DISCARD end the transaction and unwatch every key. */
static void end(struct client_state *cs)
{
	if (cs->txn != NULL)
		drop_queue(cs->txn);
	drop_watches(cs);
	free(cs->txn);
	cs->txn = NULL;
}

void txn_free(struct client_state *cs)
{
	end(cs);
}

bool txn_in_multi(const struct client_state *cs)
{
	return cs->txn != NULL && cs->txn->multi;
}

uint32_t txn_queued(const struct client_state *cs)
{
	return txn_in_multi(cs) ? cs->txn->n_commands : 0;
}

bool txn_queued_name(const struct client_state *cs, uint32_t i,
		     const uint8_t **name, size_t *len)
{
	if (i >= txn_queued(cs))
		return false;
	*name = cs->txn->commands[i].argv[0];
	*len = cs->txn->commands[i].lens[0];
	return true;
}

/* Transactions need machine version 2: true if the log has it, else the
 * error is appended. */
static bool gate(const struct command_ctx *x, const char *name)
{
	uint32_t v = server_machine_version(x->s);
	if (v >= 2)
		return true;
	reply_needs_version(command_out(x), name, 2, v);
	return false;
}

static bool grow(void **arr, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return true;
	uint32_t n = *cap < 8 ? 8 : *cap * 2;
	while (n < need)
		n *= 2;
	void *p = realloc(*arr, (size_t)n * size);
	if (p == NULL)
		return false;
	*arr = p;
	*cap = n;
	return true;
}

/* ---- MULTI, queueing, EXEC, DISCARD -------------------------------------- */

int txn_multi(struct command_ctx *x)
{
	if (x->argc != 1)
		return wrong_args(x, "multi");
	if (txn_in_multi(x->cs)) {
		resp_error(command_out(x), "ERR MULTI calls can not be nested");
		return command_done(x);
	}
	struct txn *t = txn_get(x->cs);
	if (t == NULL) {
		slot_error(x->sl, BATON_ENOMEM);
		return 0;
	}
	t->multi = true;
	if (!gate(x, "multi")) {
		t->refused = true;
		return command_done(x);
	}
	resp_simple(command_out(x), "OK");
	return command_done(x);
}

/* A refused command makes EXEC answer EXECABORT. */
static int refuse(const struct command_ctx *x)
{
	x->cs->txn->aborted = true;
	return command_done(x);
}

/* Copy a command: argv's array, then lens, then the bytes, in one block. */
static int queue(struct txn *t, const struct command_ctx *x, size_t bytes)
{
	if (!grow((void **)&t->commands, &t->cap_commands, t->n_commands + 1,
		  sizeof *t->commands))
		return BATON_ENOMEM;
	size_t n = (size_t)x->argc;
	size_t head = n * (sizeof(uint8_t *) + sizeof(size_t));
	size_t data = 0;
	for (size_t i = 0; i < n; i++)
		data += x->lens[i];
	uint8_t *block = malloc(head + data + 1);
	if (block == NULL)
		return BATON_ENOMEM;
	const uint8_t **argv = (const uint8_t **)(void *)block;
	size_t *lens = (size_t *)(void *)(block + n * sizeof(uint8_t *));
	uint8_t *p = block + head;
	for (size_t i = 0; i < n; i++) {
		if (x->lens[i] > 0)
			memcpy(p, x->argv[i], x->lens[i]);
		argv[i] = p;
		lens[i] = x->lens[i];
		p += x->lens[i];
	}
	t->commands[t->n_commands++] =
		(struct kv_txn_command){x->argc, argv, lens};
	t->bytes += bytes;
	return 0;
}

void txn_queue(struct command_ctx *x, bool allowed, bool local)
{
	struct txn *t = x->cs->txn;
	int name_len = (int)(x->lens[0] < 64 ? x->lens[0] : 64);
	const char *name = (const char *)x->argv[0];
	if (t->refused) {
		resp_error(command_out(x),
			   "ERR not queued: this connection's MULTI "
			   "was refused; DISCARD or EXEC ends it");
		command_done(x);
		return;
	}
	if (!allowed) {
		resp_error(command_out(x), "NOAUTH Authentication required.");
		refuse(x);
		return;
	}
	const struct kv_command *c = kv_lookup(x->argv[0], x->lens[0]);
	if (c == NULL) {
		if (local)
			resp_error(command_out(x),
				   "ERR command '%.*s' cannot be queued: a "
				   "transaction holds key-value commands only",
				   name_len, name);
		else
			command_reply_unknown(command_out(x), x->argc, x->argv,
					      x->lens);
		refuse(x);
		return;
	}
	bool arity_ok =
		c->arity >= 0 ? x->argc == c->arity : x->argc >= -c->arity;
	if (!arity_ok) {
		resp_error(command_out(x),
			   "ERR wrong number of arguments for '%s' command",
			   c->name);
		refuse(x);
		return;
	}
	/* Commands and options of a later machine version: refused now, as
	 * outside a transaction (under version 2 all of today's pass). */
	struct baton_machine_version v = {server_machine_version(x->s)};
	if (kv_gate(c, x->argc, x->argv, x->lens, v, command_out(x)) != 0) {
		refuse(x);
		return;
	}
	size_t bytes = 4;
	for (int i = 0; i < x->argc; i++)
		bytes += 4 + x->lens[i];
	if (t->n_commands == TXN_COMMANDS_MAX ||
	    bytes > TXN_BYTES_MAX - t->bytes) {
		resp_error(command_out(x),
			   "ERR transaction too large: at most %u commands "
			   "and %zu bytes",
			   TXN_COMMANDS_MAX, TXN_BYTES_MAX);
		refuse(x);
		return;
	}
	if (queue(t, x, bytes) != 0) {
		resp_error(command_out(x),
			   "ERR out of memory queueing the command");
		refuse(x);
		return;
	}
	resp_simple(command_out(x), "QUEUED");
	command_done(x);
}

int txn_exec(struct command_ctx *x)
{
	if (x->argc != 1)
		return wrong_args(x, "exec");
	struct client_state *cs = x->cs;
	if (!txn_in_multi(cs)) {
		if (gate(x, "exec"))
			resp_error(command_out(x), "ERR EXEC without MULTI");
		return command_done(x);
	}
	struct txn *t = cs->txn;
	if (t->aborted || t->refused) {
		end(cs);
		resp_error(command_out(x),
			   "EXECABORT Transaction discarded because "
			   "of previous errors.");
		return command_done(x);
	}
	/* The log's version fell back (a follower whose uncommitted version
	 * entry was overwritten): refuse rather than forward. */
	if ((!server_stall_routes(x->s) &&
	     server_reply_if_stalled(x->s, command_out(x))) ||
	    !gate(x, "exec")) {
		end(cs);
		return command_done(x);
	}
	struct write_req w = {true, t->n_watches, t->watches, t->n_commands,
			      t->commands};
	/* It takes a copy of the write: the queue can go. */
	route_write(x->s, x->cs, x->sl, &w);
	end(cs);
	return 0;
}

int txn_discard(struct command_ctx *x)
{
	if (x->argc != 1)
		return wrong_args(x, "discard");
	if (!txn_in_multi(x->cs)) {
		resp_error(command_out(x), "ERR DISCARD without MULTI");
		return command_done(x);
	}
	end(x->cs);
	resp_simple(command_out(x), "OK");
	return command_done(x);
}

/* ---- WATCH, UNWATCH ------------------------------------------------------ */

/* A WATCH waiting for its read index. The client (and so its state)
 * lives at least until this command's slot is done. */
struct watch_read {
	struct server *s;
	struct client_state *cs;
	struct slot *sl;
	uint64_t epoch;
	uint32_t first, n;
};

static void on_watch_ready(void *data, int status)
{
	struct watch_read *w = data;
	struct client_state *cs = w->cs;
	/* Unless EXEC, DISCARD or UNWATCH dropped them meanwhile, hash the
	 * keys again on state at least as new as the read index. */
	if (status == 0 && cs->watch_epoch == w->epoch && cs->txn != NULL) {
		struct txn *t = cs->txn;
		BATON_ASSERT(w->first + w->n <= t->n_watches);
		for (uint32_t i = w->first; i < w->first + w->n; i++)
			t->watches[i].hash = kv_watch_hash(
				w->s->machine.kv, t->watches[i].key,
				t->watches[i].key_len);
	}
	if (status != 0)
		server_reply_error(w->s, slot_buf(w->sl), status);
	else
		resp_simple(slot_buf(w->sl), "OK");
	slot_done(w->sl);
	free(w);
}

int txn_watch(struct command_ctx *x)
{
	if (x->argc < 2)
		return wrong_args(x, "watch");
	struct client_state *cs = x->cs;
	if (txn_in_multi(cs)) {
		resp_error(command_out(x),
			   "ERR WATCH inside MULTI is not allowed");
		return command_done(x);
	}
	if (!gate(x, "watch"))
		return command_done(x);
	bool stale = cs->stale_reads || BATON_PLANTED_BUG_STALE_READS;
	if (!stale && server_reply_if_stalled(x->s, command_out(x)))
		return command_done(x);
	struct txn *t = txn_get(cs);
	uint32_t n = (uint32_t)x->argc - 1;
	if (t != NULL && n > TXN_WATCHES_MAX - t->n_watches) {
		resp_error(command_out(x),
			   "ERR too many watched keys (at most %u)",
			   TXN_WATCHES_MAX);
		return command_done(x);
	}
	if (t == NULL || !grow((void **)&t->watches, &t->cap_watches,
			       t->n_watches + n, sizeof *t->watches)) {
		slot_error(x->sl, BATON_ENOMEM);
		return 0;
	}
	uint32_t first = t->n_watches;
	for (uint32_t i = 0; i < n; i++) {
		size_t len = x->lens[i + 1];
		uint8_t *key = malloc(len + 1);
		if (key == NULL) {
			slot_error(x->sl, BATON_ENOMEM);
			return 0;
		}
		if (len > 0)
			memcpy(key, x->argv[i + 1], len);
		t->watches[t->n_watches++] = (struct kv_watch){
			key, len, kv_watch_hash(x->s->machine.kv, key, len)};
	}
	if (stale) {
		resp_simple(command_out(x), "OK");
		return command_done(x);
	}
	struct watch_read *w = calloc(1, sizeof *w);
	int rv = BATON_ENOMEM;
	if (w != NULL) {
		*w = (struct watch_read){x->s,	cs, x->sl, cs->watch_epoch,
					 first, n};
		rv = baton_node_read(x->s->node, on_watch_ready, w);
	}
	if (rv != 0) {
		/* The keys stay watched with their first hashes. */
		free(w);
		server_reply_error(x->s, command_out(x), rv);
		return command_done(x);
	}
	return 0;
}

int txn_unwatch(struct command_ctx *x)
{
	if (x->argc != 1)
		return wrong_args(x, "unwatch");
	drop_watches(x->cs);
	if (!txn_in_multi(x->cs)) {
		free(x->cs->txn);
		x->cs->txn = NULL;
	}
	resp_simple(command_out(x), "OK");
	return command_done(x);
}
