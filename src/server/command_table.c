/*
 * COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND DOCS and COMMAND LIST with
 * Redis 7's reply shapes (docs/clients.md, "COMMAND"), built from the kv
 * layer's command table and the local commands (commands.c), so that a
 * command kv gains shows up here with its arity, flags and keys.
 *
 * kv's table is walked with kv_command_at(i), so every command kv has,
 * and only those, is listed.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "baton/assert.h"
#include "server.h"

/* One command as COMMAND describes it. */
struct command_desc {
	char name[40]; /* lower case */
	int arity;
	const char *flags; /* space-separated */
	int key_first, key_last, key_step;
	bool kv;
	bool write;
};

static void lower_copy(char *out, size_t cap, const char *name)
{
	size_t n = 0;
	for (; name[n] != '\0' && n + 1 < cap; n++)
		out[n] = (char)tolower((unsigned char)name[n]);
	out[n] = '\0';
}

static void desc_of_kv_command(const struct kv_command *c,
			       struct command_desc *d)
{
	memset(d, 0, sizeof *d);
	lower_copy(d->name, sizeof d->name, c->name);
	d->arity = c->arity;
	d->write = (c->flags & KV_WRITE) != 0;
	d->flags = !d->write			? "readonly"
		   : (c->flags & KV_GROWS) != 0 ? "write denyoom"
						: "write";
	d->key_first = c->key_first;
	d->key_last = c->key_last;
	d->key_step = c->key_step;
	d->kv = true;
}

static bool desc_of_kv(const char *name, struct command_desc *d)
{
	const struct kv_command *c =
		kv_lookup((const uint8_t *)name, strlen(name));
	if (c == NULL)
		return false;
	desc_of_kv_command(c, d);
	return true;
}

/* The i-th command of all: the local ones first, then kv's. */
static bool desc_at(size_t i, struct command_desc *d)
{
	const char *name, *flags;
	int arity;
	if (command_local_at(i, &name, &arity, &flags)) {
		memset(d, 0, sizeof *d);
		lower_copy(d->name, sizeof d->name, name);
		d->arity = arity;
		d->flags = flags;
		/* Redis counts shard channels as keys. */
		if (strcmp(d->name, "watch") == 0 ||
		    strcmp(d->name, "ssubscribe") == 0) {
			d->key_first = d->key_step = 1;
			d->key_last = -1;
		}
		return true;
	}
	return false;
}

/* Calls fn on every command once: local ones, then kv's in its table's
 * order (a name both know is local). */
static size_t each_command(void (*fn)(const struct command_desc *, void *),
			   void *arg)
{
	struct command_desc d;
	size_t n = 0;
	for (size_t i = 0; desc_at(i, &d); i++, n++)
		if (fn != NULL)
			fn(&d, arg);
	const struct kv_command *c;
	for (size_t i = 0; (c = kv_command_at(i)) != NULL; i++) {
		const char *name;
		int arity;
		const char *flags;
		bool local = false;
		for (size_t k = 0; command_local_at(k, &name, &arity, &flags);
		     k++)
			local = local || strcasecmp(name, c->name) == 0;
		if (local)
			continue;
		desc_of_kv_command(c, &d);
		n++;
		if (fn != NULL)
			fn(&d, arg);
	}
	return n;
}

static bool find_command(const uint8_t *name, size_t len,
			 struct command_desc *d)
{
	char want[40];
	if (len >= sizeof want)
		return false;
	memcpy(want, name, len);
	want[len] = '\0';
	for (size_t i = 0; desc_at(i, d); i++)
		if (strcasecmp(d->name, want) == 0)
			return true;
	return desc_of_kv(want, d);
}

/* A map header: RESP3's %n, or RESP2's flat array of 2n. */
static void map_header(struct baton_buf *b, uint32_t resp, size_t pairs)
{
	if (resp == 3)
		resp3_map(b, pairs);
	else
		resp_array(b, 2 * pairs);
}

static void bulk_str(struct baton_buf *b, const char *s)
{
	resp_bulk(b, s, strlen(s));
}

/* An array header, or in RESP3 a set's: Redis 7 answers its flags, ACL
 * categories, tips, key specifications and subcommands with sets. */
static void set_header(struct baton_buf *b, uint32_t resp, size_t n)
{
	if (resp == 3)
		resp3_set(b, n);
	else
		resp_array(b, n);
}

/* A space-separated word list as a set (an array in RESP2) of simple
 * strings. */
static void word_set(struct baton_buf *b, uint32_t resp, const char *words)
{
	size_t n = 0;
	for (const char *p = words; *p != '\0';) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		n++;
		while (*p != '\0' && *p != ' ')
			p++;
	}
	set_header(b, resp, n);
	for (const char *p = words; *p != '\0';) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		char w[32];
		size_t k = 0;
		while (*p != '\0' && *p != ' ' && k + 1 < sizeof w)
			w[k++] = *p++;
		w[k] = '\0';
		resp_simple(b, w);
	}
}

/* Redis 7's key specification of a command whose keys are a range. */
static void key_specs(struct baton_buf *b, uint32_t resp,
		      const struct command_desc *d)
{
	if (d->key_first <= 0) {
		set_header(b, resp, 0);
		return;
	}
	set_header(b, resp, 1);
	map_header(b, resp, 3);
	bulk_str(b, "flags");
	word_set(b, resp, d->write ? "RW update" : "RO access");
	bulk_str(b, "begin_search");
	map_header(b, resp, 2);
	bulk_str(b, "type");
	bulk_str(b, "index");
	bulk_str(b, "spec");
	map_header(b, resp, 1);
	bulk_str(b, "index");
	resp_int(b, d->key_first);
	bulk_str(b, "find_keys");
	map_header(b, resp, 2);
	bulk_str(b, "type");
	bulk_str(b, "range");
	bulk_str(b, "spec");
	map_header(b, resp, 3);
	bulk_str(b, "lastkey");
	resp_int(b, d->key_last < 0 ? d->key_last : d->key_last - d->key_first);
	bulk_str(b, "keystep");
	resp_int(b, d->key_step);
	bulk_str(b, "limit");
	resp_int(b, 0);
}

struct reply_ctx {
	struct baton_buf *b;
	uint32_t resp;
};

/* COMMAND INFO's ten fields. */
static void command_info(const struct command_desc *d, void *arg)
{
	struct reply_ctx *r = arg;
	struct baton_buf *b = r->b;
	resp_array(b, 10);
	bulk_str(b, d->name);
	resp_int(b, d->arity);
	word_set(b, r->resp, d->flags);
	resp_int(b, d->key_first);
	resp_int(b, d->key_last);
	resp_int(b, d->key_step);
	word_set(b, r->resp,
		 d->kv ? (d->write ? "@write @keyspace" : "@read @keyspace")
		       : "@connection");
	set_header(b, r->resp, 0); /* tips */
	key_specs(b, r->resp, d);
	set_header(b, r->resp, 0); /* subcommands */
}

/* One argument of COMMAND DOCS: name, type, and optional/multiple. */
static void doc_argument(struct baton_buf *b, uint32_t resp, const char *name,
			 const char *type, const char *flags)
{
	map_header(b, resp, flags != NULL ? 4 : 3);
	bulk_str(b, "name");
	bulk_str(b, name);
	bulk_str(b, "type");
	bulk_str(b, type);
	bulk_str(b, "display_text");
	bulk_str(b, name);
	if (flags != NULL) {
		bulk_str(b, "flags");
		word_set(b, resp, flags);
	}
}

/* The arguments COMMAND DOCS can tell from the table: the keys, then the
 * other arguments by position (redis-cli shows them as hints). */
static void doc_arguments(struct baton_buf *b, uint32_t resp,
			  const struct command_desc *d)
{
	int at_least = d->arity < 0 ? -d->arity : d->arity;
	bool keys = d->key_first > 0;
	bool many_keys = keys && d->key_last < 0;
	int required = at_least - 1 - (keys ? 1 : 0);
	if (required < 0)
		required = 0;
	bool more = d->arity < 0 && !many_keys;
	size_t n = (keys ? 1u : 0u) + (size_t)required + (more ? 1u : 0u);
	resp_array(b, n);
	if (keys)
		doc_argument(b, resp, "key", "key",
			     many_keys ? "multiple" : NULL);
	for (int i = 0; i < required; i++)
		doc_argument(b, resp, "arg", "string", NULL);
	if (more)
		doc_argument(b, resp, "arg", "string", "optional multiple");
}

static void command_doc(const struct command_desc *d, void *arg)
{
	struct reply_ctx *r = arg;
	struct baton_buf *b = r->b;
	bulk_str(b, d->name);
	map_header(b, r->resp, 5);
	bulk_str(b, "summary");
	bulk_str(b, d->kv ? (d->write ? "A write, through the Raft log."
				      : "A linearizable read.")
			  : "A command answered by this node.");
	bulk_str(b, "since");
	bulk_str(b, "1.0.0");
	bulk_str(b, "group");
	bulk_str(b, d->kv ? "generic" : "connection");
	bulk_str(b, "complexity");
	bulk_str(b, "O(1) per key");
	bulk_str(b, "arguments");
	doc_arguments(b, r->resp, d);
}

static void command_name(const struct command_desc *d, void *arg)
{
	bulk_str(arg, d->name);
}

int command_table_command(struct command_ctx *x)
{
	struct baton_buf *b = command_out(x);
	struct reply_ctx r = {b, x->cs->resp};
	struct command_desc d;
	if (x->argc == 1) {
		resp_array(b, each_command(NULL, NULL));
		each_command(command_info, &r);
	} else if (command_arg_is(x, 1, "COUNT") && x->argc == 2) {
		resp_int(b, (int64_t)each_command(NULL, NULL));
	} else if (command_arg_is(x, 1, "LIST") && x->argc == 2) {
		resp_array(b, each_command(NULL, NULL));
		each_command(command_name, b);
	} else if (command_arg_is(x, 1, "INFO")) {
		if (x->argc == 2) {
			resp_array(b, each_command(NULL, NULL));
			each_command(command_info, &r);
		} else {
			resp_array(b, (size_t)x->argc - 2);
			for (int i = 2; i < x->argc; i++) {
				if (find_command(x->argv[i], x->lens[i], &d))
					command_info(&d, &r);
				else if (x->cs->resp == 3)
					resp3_null(b);
				else
					resp_null(b); /* Redis 7: $-1 */
			}
		}
	} else if (command_arg_is(x, 1, "DOCS")) {
		if (x->argc == 2) {
			map_header(b, x->cs->resp, each_command(NULL, NULL));
			each_command(command_doc, &r);
		} else {
			size_t found = 0;
			for (int i = 2; i < x->argc; i++)
				found += find_command(x->argv[i], x->lens[i],
						      &d);
			map_header(b, x->cs->resp, found);
			for (int i = 2; i < x->argc; i++)
				if (find_command(x->argv[i], x->lens[i], &d))
					command_doc(&d, &r);
		}
	} else if (command_arg_is(x, 1, "COUNT")) {
		return command_wrong_args(x); /* 'command|count' */
	} else if (command_arg_is(x, 1, "LIST")) {
		resp_error(b, "ERR syntax error (baton's COMMAND LIST takes "
			      "no FILTERBY)");
	} else {
		resp_error(b,
			   "ERR unknown COMMAND subcommand '%.*s' (baton "
			   "has COUNT, INFO, DOCS, LIST)",
			   (int)(x->lens[1] < 32 ? x->lens[1] : 32),
			   (const char *)x->argv[1]);
	}
	BATON_ASSERT(b->len > 0);
	return command_done(x);
}
