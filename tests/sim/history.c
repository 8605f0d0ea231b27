/*
 * The clients' history: recorded as the operations happen, checked with
 * the linearizability checker's library at the end of every run. See
 * history.h.
 */
#include "history.h"

#include <stdlib.h>
#include <string.h>

struct sim_key {
	uint32_t key;
	uint32_t ops;	  /* invoked, not known to have failed */
	uint32_t info;	  /* indeterminate */
	uint32_t pending; /* in flight */
};

struct sim_history {
	struct lincheck_history h;
	struct sim_client clients[SIM_CLIENTS];
	uint64_t next_client;
	struct sim_key active[SIM_KEYS_ACTIVE];
	uint32_t retired[SIM_KEYS_RETIRED];
	uint32_t n_retired;
	uint32_t next_key;
	uint64_t next_value;
	int64_t last_ns;
	uint32_t events; /* invocations and completions: the "line" of each */
	bool finished;	 /* checked: later completions (the teardown's) go */
};

static struct sim_history *history(struct sim_world *w)
{
	if (w->history != NULL)
		return w->history;
	struct sim_history *y = sim_xmalloc(sizeof *y);
	memset(y, 0, sizeof *y);
	lincheck_history_init(&y->h);
	y->h.name = "simulated clients";
	for (uint32_t i = 0; i < SIM_CLIENTS; i++) {
		y->clients[i].w = w;
		y->clients[i].id = ++y->next_client;
	}
	for (uint32_t i = 0; i < SIM_KEYS_ACTIVE; i++)
		y->active[i].key = ++y->next_key;
	w->history = y;
	return y;
}

/* Simulated time in ns, strictly increasing, so the order of events at
 * the same millisecond is kept: a completion recorded before an
 * invocation happened before it. */
static int64_t now_ns(struct sim_world *w, struct sim_history *y)
{
	int64_t t = (int64_t)w->now_ms * 1000000;
	if (t <= y->last_ns)
		t = y->last_ns + 1;
	y->last_ns = t;
	return t;
}

struct sim_client *sim_history_idle(struct sim_world *w)
{
	struct sim_history *y = history(w);
	uint32_t start = (uint32_t)(sim_rand(&w->rng) % SIM_CLIENTS);
	for (uint32_t i = 0; i < SIM_CLIENTS; i++) {
		struct sim_client *c = &y->clients[(start + i) % SIM_CLIENTS];
		if (!c->busy)
			return c;
	}
	return NULL;
}

uint32_t sim_history_key(struct sim_world *w, bool read)
{
	struct sim_history *y = history(w);
	if (read && y->n_retired > 0 && sim_chance(&w->rng, 150))
		return y->retired[sim_rand(&w->rng) % y->n_retired];
	uint32_t start = (uint32_t)(sim_rand(&w->rng) % SIM_KEYS_ACTIVE);
	for (uint32_t i = 0; i < SIM_KEYS_ACTIVE; i++) {
		const struct sim_key *k =
			&y->active[(start + i) % SIM_KEYS_ACTIVE];
		if (k->pending < SIM_KEY_PENDING_MAX)
			return k->key;
	}
	return 0;
}

void sim_history_value(struct sim_world *w, bool append, char *buf, size_t cap)
{
	struct sim_history *y = history(w);
	if (append)
		snprintf(buf, cap, "%u", (unsigned)sim_range(&w->rng, 1, 99));
	else
		snprintf(buf, cap, "%llu",
			 (unsigned long long)(++y->next_value));
}

static struct sim_key *active_key(struct sim_history *y, uint32_t key)
{
	for (uint32_t i = 0; i < SIM_KEYS_ACTIVE; i++)
		if (y->active[i].key == key)
			return &y->active[i];
	return NULL;
}

/* Retire a key that has had enough, so that no key's history grows hard
 * to check; a fresh key takes its place. */
static void maybe_retire(struct sim_world *w, struct sim_history *y,
			 struct sim_key *k)
{
	if (k->ops < SIM_KEY_OPS_MAX && k->info < SIM_KEY_INFO_MAX)
		return;
	if (y->n_retired < SIM_KEYS_RETIRED)
		y->retired[y->n_retired++] = k->key;
	else
		y->retired[sim_rand(&w->rng) % SIM_KEYS_RETIRED] = k->key;
	*k = (struct sim_key){.key = ++y->next_key};
}

static void key_name(uint32_t key, char *buf, size_t cap)
{
	snprintf(buf, cap, "k%u", key);
}

static bool recorded(struct sim_world *w, int rv,
		     const struct lincheck_error *err)
{
	if (rv != 0)
		sim_fail(w, "history: cannot record an operation: %s",
			 err->text);
	return rv == 0;
}

void sim_history_invoke(struct sim_world *w, struct sim_client *c,
			struct sim_node *n, uint8_t kind, uint32_t key,
			const char *value)
{
	struct sim_history *y = history(w);
	struct lincheck_error err;
	struct lincheck_op op = {.client = c->id, .kind = kind};
	char name[16];
	key_name(key, name, sizeof name);
	if (!recorded(w,
		      lincheck_history_key(&y->h, name, strlen(name), &op.key,
					   &err),
		      &err))
		return;
	if (value != NULL &&
	    !recorded(w,
		      lincheck_history_store(&y->h, value, strlen(value),
					     &op.arg, &err),
		      &err))
		return;
	op.delta = kind == LINCHECK_INCR ? 1 : 0;
	op.invoke_time = now_ns(w, y);
	if (!recorded(w, lincheck_history_invoke(&y->h, &op, ++y->events, &err),
		      &err))
		return;
	if (w->verbose)
		sim_trace(w, "client %llu: %s k%u%s%s on node %llu",
			  (unsigned long long)c->id, lincheck_kind_name(kind),
			  key, value != NULL ? " " : "",
			  value != NULL ? value : "",
			  (unsigned long long)n->id);
	c->busy = true;
	c->node = (uint32_t)n->id;
	c->incarnation = n->incarnation;
	c->kind = kind;
	c->key = key;
	struct sim_key *k = active_key(y, key);
	if (k != NULL) {
		k->ops++;
		k->pending++;
		maybe_retire(w, y, k);
	}
}

static void complete(struct sim_world *w, struct sim_client *c,
		     enum lincheck_status status,
		     const struct lincheck_op *done)
{
	struct sim_history *y = history(w);
	struct lincheck_error err;
	c->busy = false;
	if (y->finished)
		return;
	if (w->verbose)
		sim_trace(w, "client %llu: %s k%u %s",
			  (unsigned long long)c->id,
			  lincheck_kind_name(c->kind), c->key,
			  status == LINCHECK_OK	    ? "ok"
			  : status == LINCHECK_FAIL ? "fail"
						    : "indeterminate");
	recorded(w,
		 lincheck_history_complete(&y->h, c->id, now_ns(w, y),
					   ++y->events, status, done, false,
					   &err),
		 &err);
	struct sim_key *k = active_key(y, c->key);
	if (k == NULL)
		return;
	k->pending--;
	k->ops -= status == LINCHECK_FAIL;
	k->info += status == LINCHECK_INFO;
	maybe_retire(w, y, k);
}

void sim_history_ok(struct sim_world *w, struct sim_client *c, int64_t out_int,
		    bool present, const char *val, uint32_t len)
{
	struct sim_history *y = history(w);
	struct lincheck_op done = {.kind = c->kind};
	if (c->kind == LINCHECK_GET) {
		done.out.tag = LINCHECK_ABSENT;
		struct lincheck_error err;
		if (present &&
		    !recorded(w,
			      lincheck_history_store(&y->h, val, len, &done.out,
						     &err),
			      &err))
			return;
	} else if (c->kind != LINCHECK_SET) {
		done.out_int = out_int;
		done.out_known = present;
	}
	w->stats.ops_ok++;
	complete(w, c, LINCHECK_OK, &done);
}

void sim_history_fail(struct sim_world *w, struct sim_client *c)
{
	struct lincheck_op done = {.kind = c->kind};
	w->stats.ops_failed++;
	complete(w, c, LINCHECK_FAIL, &done);
}

void sim_history_info(struct sim_world *w, struct sim_client *c)
{
	struct sim_history *y = history(w);
	struct lincheck_op done = {.kind = c->kind};
	w->stats.ops_unknown++;
	complete(w, c, LINCHECK_INFO, &done);
	/* Its operation may still take effect at any time: the client goes
	 * on as a new process, as in Jepsen. */
	c->id = ++y->next_client;
}

/* ---- the check at the end of a run --------------------------------------- */

static void value_text(const struct lincheck_history *h,
		       struct lincheck_value v, char *buf, size_t cap)
{
	if (v.tag == LINCHECK_ABSENT) {
		snprintf(buf, cap, "nil");
		return;
	}
	if (v.tag != LINCHECK_PRESENT) {
		snprintf(buf, cap, "?");
		return;
	}
	uint32_t n = v.len < cap - 3 ? v.len : (uint32_t)cap - 3;
	snprintf(buf, cap, "\"%.*s\"", (int)n,
		 (const char *)lincheck_value_bytes(h, v));
}

static const char *status_name(uint8_t s)
{
	return s == LINCHECK_OK ? "ok" : s == LINCHECK_FAIL ? "fail" : "info";
}

/* Name the key and the operation that cannot be ordered, and print the
 * checker's whole explanation for the replay. */
static void report_violation(struct sim_world *w, struct sim_history *y,
			     const struct lincheck_result *res)
{
	const struct lincheck_history *h = &y->h;
	const struct lincheck_op *op = &h->ops[res->why.stuck];
	struct lincheck_value key = h->keys[res->why.key];
	char arg[48] = "", out[48] = "";
	if (op->kind == LINCHECK_SET || op->kind == LINCHECK_APPEND)
		value_text(h, op->arg, arg + 1, sizeof arg - 1);
	if (arg[1] != '\0')
		arg[0] = ' ';
	if (op->status == LINCHECK_OK && op->kind == LINCHECK_GET)
		value_text(h, op->out, out, sizeof out);
	else if (op->status == LINCHECK_OK && op->out_known)
		snprintf(out, sizeof out, "%lld", (long long)op->out_int);
	sim_fail(w,
		 "linearizability violation: key %.*s: %s%s -> %s (%s) by "
		 "client %llu, invoked at %.3f ms, fits no order of the %u "
		 "operations linearized before it",
		 (int)key.len, (const char *)lincheck_value_bytes(h, key),
		 lincheck_kind_name(op->kind), arg, out[0] ? out : "?",
		 status_name(op->status), (unsigned long long)op->client,
		 (double)op->invoke_time / 1e6, res->why.prefix_len);
	lincheck_result_print(stdout, h->name, h, res, true);
}

/* Searches that take longer than this are a workload too hard to check,
 * not a verdict. */
#define CHECK_SECONDS_MAX 20

void sim_history_check(struct sim_world *w)
{
	struct sim_history *y = history(w);
	lincheck_history_finish(&y->h);
	y->finished = true;
	if (w->history_path != NULL) {
		FILE *f = fopen(w->history_path, "w");
		if (f == NULL || lincheck_write_baton(f, &y->h) != 0 ||
		    fclose(f) != 0)
			fprintf(stderr, "baton-sim: cannot write %s\n",
				w->history_path);
	}
	struct lincheck_limits limits = {
		.deadline_ns = lincheck_now_ns() +
			       (int64_t)CHECK_SECONDS_MAX * 1000000000,
		.memory_bytes_max = (uint64_t)512 << 20,
	};
	struct lincheck_result res;
	int rv = lincheck_check(&y->h, &limits, &res);
	if (rv != 0 && res.verdict != LINCHECK_VERDICT_UNKNOWN) {
		sim_fail(w, "history: the check failed: %s",
			 lincheck_strerror(rv));
		return;
	}
	sim_trace(w, "history: %u operations on %u keys checked", y->h.n_ops,
		  y->h.n_keys);
	if (res.verdict == LINCHECK_NOT_LINEARIZABLE) {
		report_violation(w, y, &res);
	} else if (res.verdict == LINCHECK_VERDICT_UNKNOWN) {
		struct lincheck_value key = y->h.keys[res.unknown_key];
		sim_fail(w,
			 "workload: the history of key %.*s is too hard to "
			 "check (%s)",
			 (int)key.len,
			 (const char *)lincheck_value_bytes(&y->h, key),
			 lincheck_strerror(res.unknown_reason));
	}
}

void sim_history_free(struct sim_world *w)
{
	if (w->history == NULL)
		return;
	lincheck_history_free(&w->history->h);
	free(w->history);
	w->history = NULL;
}
