/*
 * The checker: P-compositionality, then the Wing-Gong/Lowe search per key.
 *
 * A key-value history is linearizable iff each key's sub-history is, so
 * the history is split by key. For one key the search (Lowe's "just in
 * time linearization" of Wing and Gong's algorithm) keeps the key's call
 * and return events in a doubly linked list ordered by time. Walking from
 * the front, it tries to linearize each call it meets: if the model
 * allows the operation, both of its events leave the list, the attempt
 * goes on a stack, and the walk restarts from the front. Meeting a return
 * event means that operation can no longer be linearized later: the walk
 * backtracks, restoring the last attempt and trying the call after it.
 *
 * Pruning here (each keeps the search exact: it only skips what cannot
 * succeed):
 *  - a cache of visited configurations: (set of linearized ops, model
 *    state). A configuration is skipped if one visited has the same state,
 *    the same determinate ops and a subset of its indeterminate ones,
 *    since indeterminate ops may be left out;
 *  - an operation that never changes the state (a get, a cas or del whose
 *    result says it changed nothing), when allowed, is linearized greedily,
 *    before any other: it is pending at the front, so any linearization of
 *    the rest can be reordered to start with it; if that fails, so does
 *    every other choice at the same point;
 *  - indeterminate operations have no return event and the model always
 *    allows them, so once every determinate operation is linearized the
 *    search stops: the rest can come last. Where they are tried at each
 *    point is told at enum pass (search.h).
 * search_init.c prepares a key's search (and finds its lost appends, see
 * struct lincheck__model); explain.c holds the look-ahead, which refuses a
 * step after which one of the next unlinearized gets (or incrs with a
 * recorded result) could never return what it did, and explains a failure.
 *
 * Keys are searched in rounds with a growing budget of steps, so that an
 * easy violation is found before a long search on another key ends.
 *
 * The linearized set is kept as bit sets; in the cache the determinate
 * part is stored run-length encoded by 64-bit words (all-ones and all-zero
 * runs), which is short because it is mostly a prefix of the key's
 * operations, and the indeterminate part as words.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

/* Steps of a key's search in the first round, and their growth. */
#define CHECK_FIRST_ROUND_STEPS ((uint64_t)1 << 16)
#define CHECK_ROUND_GROWTH 4u
/* search_run's verdict when the round's steps ran out. */
#define CHECK_OUT_OF_STEPS 2
/* Search steps between looks at the clock. */
#define CHECK_CLOCK_STEPS 4096u
#define CHECK_SLOTS_MIN 1024u
/* Cache entries per key (their index is a uint32 slot). */
#define CHECK_ENTRIES_MAX (UINT32_MAX - 1)
#define WORD_ONES UINT64_MAX

static void search_free(struct search *s)
{
	free(s->ops);
	free(s->facts);
	free(s->reads);
	free(s->resets);
	free(s->appends);
	free(s->rank);
	free(s->helpers);
	free(s->n_helpers);
	free(s->incrs);
	free(s->incr_rank);
	free(s->incr_neg);
	free(s->incr_pos);
	free(s->flags);
	free(s->zobrist);
	free(s->next);
	free(s->prev);
	free(s->bits);
	free(s->required_set.w);
	free(s->info_set.w);
	free(s->dense);
	free(s->info_ops);
	free(s->enc);
	free(s->stack);
	free(s->entries);
	free(s->cwords);
	free(s->slots);
}

static uint64_t search_bytes(const struct search *s)
{
	return s->cap_entries * sizeof(*s->entries) +
	       s->cap_cwords * sizeof(*s->cwords) +
	       s->cap_slots * sizeof(*s->slots) +
	       lincheck__model_bytes(s->model);
}

/* Operations the search orders: not failed, and not indeterminate gets
 * (they constrain nothing). */
static bool searched(const struct lincheck_op *op)
{
	if (op->status == LINCHECK_FAIL)
		return false;
	return op->status == LINCHECK_OK || op->kind != LINCHECK_GET;
}

/* ------------------------------------------------------------------------ */
/* The linearized set.                                                      */

static void bitset_set(struct bitset *b, uint32_t i)
{
	uint32_t w = i / 64;
	assert(w < b->words && (b->w[w] & ((uint64_t)1 << (i % 64))) == 0);
	b->w[w] |= (uint64_t)1 << (i % 64);
	if (w == b->full) {
		while (b->full < b->words && b->w[b->full] == WORD_ONES)
			b->full++;
	}
	if (w + 1 > b->top)
		b->top = w + 1;
}

static void bitset_clear(struct bitset *b, uint32_t i)
{
	uint32_t w = i / 64;
	assert(w < b->words && (b->w[w] & ((uint64_t)1 << (i % 64))) != 0);
	b->w[w] &= ~((uint64_t)1 << (i % 64));
	if (w < b->full)
		b->full = w;
	if (w + 1 == b->top) {
		while (b->top > 0 && b->w[b->top - 1] == 0)
			b->top--;
	}
}

void lincheck__search_set_bit(struct search *s, uint32_t i)
{
	assert(!((s->bits[i / 64] >> (i % 64)) & 1));
	if (s->flags[i] & FLAG_INCR)
		lincheck__search_incr_update(s, i, -1);
	s->bits[i / 64] |= (uint64_t)1 << (i % 64);
	if (s->flags[i] & FLAG_REQUIRED) {
		bitset_set(&s->required_set, s->dense[i]);
		s->set_hash ^= s->zobrist[i];
	} else {
		bitset_set(&s->info_set, s->dense[i]);
	}
}

void lincheck__search_clear_bit(struct search *s, uint32_t i)
{
	assert(lincheck__search_linearized(s, i));
	if (s->flags[i] & FLAG_INCR)
		lincheck__search_incr_update(s, i, 1);
	s->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
	if (s->flags[i] & FLAG_REQUIRED) {
		bitset_clear(&s->required_set, s->dense[i]);
		s->set_hash ^= s->zobrist[i];
	} else {
		bitset_clear(&s->info_set, s->dense[i]);
	}
	if ((s->flags[i] & FLAG_READ) && s->rank[i] < s->read_lo)
		s->read_lo = s->rank[i];
	if ((s->flags[i] & FLAG_RESET) && s->rank[i] < s->reset_lo)
		s->reset_lo = s->rank[i];
	if ((s->flags[i] & FLAG_APPEND) && s->rank[i] < s->append_lo)
		s->append_lo = s->rank[i];
}

/* The canonical run-length encoding of the determinate set into s->enc,
 * then the indeterminate set's words up to its last non-zero one. */
static void encode(struct search *s, uint32_t *len_required, uint32_t *len_info)
{
	const struct bitset *b = &s->required_set;
	uint32_t e = 0;
	if (b->full > 0) {
		s->enc[e++] = WORD_ONES;
		s->enc[e++] = b->full;
	}
	uint32_t i = b->full;
	while (i < b->top) {
		uint64_t w = b->w[i];
		if (w != WORD_ONES && w != 0) {
			s->enc[e++] = w;
			i++;
			continue;
		}
		uint32_t j = i;
		while (j < b->top && b->w[j] == w)
			j++;
		s->enc[e++] = w;
		s->enc[e++] = j - i;
		i = j;
	}
	*len_required = e;
	*len_info = s->info_set.top;
	if (*len_info > 0)
		memcpy(s->enc + e, s->info_set.w, *len_info * sizeof(uint64_t));
	assert(e + *len_info <= s->enc_cap);
}

/* Whether bit set a (na words) is a subset of b (nb words). */
static bool subset(const uint64_t *a, uint32_t na, const uint64_t *b,
		   uint32_t nb)
{
	if (na > nb)
		return false; /* a's last word is not zero */
	for (uint32_t i = 0; i < na; i++) {
		if (a[i] & ~b[i])
			return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* The cache of visited (set, state) configurations.                       */

static int cache_grow(struct search *s)
{
	uint64_t cap = s->cap_slots == 0 ? CHECK_SLOTS_MIN : s->cap_slots * 2;
	uint32_t *slots = calloc((size_t)cap, sizeof(*slots));
	if (slots == NULL)
		return LINCHECK_ENOMEM;
	for (uint64_t k = 0; k < s->n_entries; k++) {
		uint64_t i = s->entries[k].hash;
		while (slots[i & (cap - 1)] != 0)
			i++;
		slots[i & (cap - 1)] = (uint32_t)(k + 1);
	}
	free(s->slots);
	s->slots = slots;
	s->cap_slots = cap;
	return 0;
}

static int reserve(void **p, uint64_t *cap, uint64_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	uint64_t n = *cap < 256 ? 256 : *cap;
	while (n < need)
		n *= 2;
	if (n > SIZE_MAX / size)
		return LINCHECK_ENOMEM;
	void *q = realloc(*p, (size_t)n * size);
	if (q == NULL)
		return LINCHECK_ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/*
 * Adds the current configuration with `state`: 1 if new, 0 if a visited
 * one covers it, or an error. A visited configuration covers it if it has
 * the same state and determinate set, and a subset of its indeterminate
 * ops: whatever can follow this one could follow that one too, since
 * indeterminate ops may be left out.
 */
static int cache_add(struct search *s, uint32_t state)
{
	if (s->n_entries >= s->cap_slots / 2) {
		if (s->n_entries >= CHECK_ENTRIES_MAX)
			return LINCHECK_EMEMLIMIT;
		int rv = cache_grow(s);
		if (rv != 0)
			return rv;
	}
	uint32_t len_required, len_info;
	encode(s, &len_required, &len_info);
	uint32_t len = len_required + len_info;
	uint64_t hash = s->set_hash ^ lincheck__mix(((uint64_t)state << 1) | 1);
	uint64_t mask = s->cap_slots - 1;
	uint64_t i = hash;
	for (;; i++) {
		uint32_t slot = s->slots[i & mask];
		if (slot == 0)
			break;
		const struct centry *c = &s->entries[slot - 1];
		const uint64_t *w = s->cwords + c->off;
		if (c->hash == hash && c->state == state &&
		    c->len_required == len_required &&
		    memcmp(w, s->enc, len_required * sizeof(uint64_t)) == 0 &&
		    subset(w + len_required, c->len_info, s->enc + len_required,
			   len_info))
			return 0;
	}
	int rv = reserve((void **)&s->entries, &s->cap_entries,
			 s->n_entries + 1, sizeof(*s->entries));
	if (rv == 0)
		rv = reserve((void **)&s->cwords, &s->cap_cwords,
			     s->n_cwords + len, sizeof(*s->cwords));
	if (rv != 0)
		return rv;
	if (s->limits->memory_bytes_max > 0 &&
	    search_bytes(s) > s->limits->memory_bytes_max)
		return LINCHECK_EMEMLIMIT;
	struct centry *c = &s->entries[s->n_entries];
	c->hash = hash;
	c->off = s->n_cwords;
	c->state = state;
	c->len_required = len_required;
	c->len_info = len_info;
	if (len > 0)
		memcpy(s->cwords + s->n_cwords, s->enc, len * sizeof(uint64_t));
	s->n_cwords += len;
	s->n_entries++;
	s->slots[i & mask] = (uint32_t)s->n_entries;
	return 1;
}
/* ------------------------------------------------------------------------ */
/* The event list, as the search walks it.                                  */

static void unlink_node(struct search *s, uint32_t node)
{
	s->next[s->prev[node]] = s->next[node];
	s->prev[s->next[node]] = s->prev[node];
}

static void relink_node(struct search *s, uint32_t node)
{
	s->next[s->prev[node]] = node;
	s->prev[s->next[node]] = node;
}

/* Takes a determinate op's events out of the list, or puts them back. */
static void lift(struct search *s, uint32_t call)
{
	if (!(s->flags[call / 2] & FLAG_REQUIRED))
		return;
	unlink_node(s, call);
	unlink_node(s, call + 1);
}

static void unlift(struct search *s, uint32_t call)
{
	if (!(s->flags[call / 2] & FLAG_REQUIRED))
		return;
	relink_node(s, call + 1);
	relink_node(s, call);
}
/* ------------------------------------------------------------------------ */
/* The search.                                                              */

int lincheck__search_step(struct search *s, uint32_t state, uint32_t i,
			  struct lincheck__step *out)
{
	return lincheck__model_step(s->model, &s->h->ops[s->ops[i]],
				    &s->facts[i], state, out);
}
static struct cursor level_start(const struct search *s)
{
	return (struct cursor){s->next[s->head], LINCHECK__NONE, 0, 0,
			       PASS_PURE};
}

static void advance(const struct search *s, struct cursor *c)
{
	if (c->pass == PASS_INFO)
		c->info++;
	else
		c->node = s->next[c->node];
}

/* Undoes attempts until one whose alternatives remain; false if none. */
static bool backtrack(struct search *s, struct cursor *c, uint32_t *state)
{
	while (s->depth > 0) {
		struct frame f = s->stack[--s->depth];
		uint32_t i = f.node / 2;
		unlift(s, f.node);
		lincheck__search_clear_bit(s, i);
		if (s->flags[i] & FLAG_REQUIRED)
			s->required_done--;
		*state = f.state;
		if (f.greedy)
			continue;
		c->bound = f.bound;
		c->pass = (enum pass)f.pass;
		if (c->pass == PASS_INFO) {
			c->info = s->dense[i] + 1;
			c->info_end =
				lincheck__search_info_invoked_by(s, f.bound);
		} else {
			c->node = s->next[f.node];
		}
		return true;
	}
	return false;
}

/* 0, LINCHECK_ETIMEOUT, or CHECK_OUT_OF_STEPS. */
static int out_of_steps(struct search *s)
{
	if (++s->steps >= s->budget)
		return CHECK_OUT_OF_STEPS;
	if (s->steps % CHECK_CLOCK_STEPS != 0)
		return 0;
	if (s->limits->deadline_ns > 0 &&
	    lincheck_now_ns() > s->limits->deadline_ns)
		return LINCHECK_ETIMEOUT;
	return 0;
}

/* Moves the cursor to the next candidate of its pass, or to the next
 * pass; false when every pass is over (time to backtrack). */
static bool next_candidate(struct search *s, struct cursor *c, uint32_t state,
			   int *rv)
{
	for (;;) {
		if (c->pass == PASS_INFO) {
			for (; c->info < c->info_end; c->info++) {
				uint32_t i = s->info_ops[c->info];
				if (!lincheck__search_linearized(s, i)) {
					c->node = 2 * i;
					return true;
				}
			}
			if (!s->info_first) {
				*rv = lincheck__search_explain(s, c->bound,
							       state);
				return false;
			}
			c->pass = PASS_DETERMINATE;
			c->node = s->next[s->head];
			continue;
		}
		assert(c->node != s->tail);
		if (c->node & 1) {
			/* The first pending return: the pass is over. */
			if (c->pass == PASS_DETERMINATE && s->info_first) {
				*rv = lincheck__search_explain(s, c->node,
							       state);
				return false;
			}
			c->bound = c->node;
			if (c->pass == PASS_PURE && !s->info_first) {
				c->pass = PASS_DETERMINATE;
				c->node = s->next[s->head];
				continue;
			}
			c->info = 0;
			c->info_end =
				lincheck__search_info_invoked_by(s, c->node);
			c->pass = PASS_INFO;
			continue;
		}
		bool pure = s->flags[c->node / 2] & FLAG_PURE;
		if (pure == (c->pass == PASS_PURE))
			return true;
		c->node = s->next[c->node];
	}
}

/*
 * Whether linearizing op i now would blindly overwrite the effect of the
 * indeterminate op linearized just before it: then the configuration is
 * dominated by the one that linearizes i without that op, reachable from
 * the same point (i was a candidate there too, and being blind it was
 * allowed), where the indeterminate op may still come later or never.
 * Without this, the search visits every subset of the pending
 * indeterminate ops in turn when it has to refute a history.
 */
static bool overwrites_an_indeterminate_op(const struct search *s, uint32_t i)
{
	if (!(s->flags[i] & FLAG_BLIND) || s->depth == 0)
		return false;
	uint32_t last = s->stack[s->depth - 1].node / 2;
	return !(s->flags[last] & (FLAG_REQUIRED | FLAG_PURE));
}

/* LINCHECK_LINEARIZABLE, LINCHECK_NOT_LINEARIZABLE, CHECK_OUT_OF_STEPS,
 * or an error. */
static int search_run(struct search *s)
{
	uint32_t state = s->model->absent;
	struct cursor c = level_start(s);
	while (s->required_done < s->required_total) {
		int rv = out_of_steps(s);
		if (rv != 0)
			return rv;
		if (!next_candidate(s, &c, state, &rv)) {
			if (rv != 0)
				return rv;
			if (!backtrack(s, &c, &state))
				return LINCHECK_NOT_LINEARIZABLE;
			continue;
		}
		uint32_t i = c.node / 2;
		if (overwrites_an_indeterminate_op(s, i)) {
			advance(s, &c);
			continue;
		}
		struct lincheck__step st;
		if ((rv = lincheck__search_step(s, state, i, &st)) != 0)
			return rv;
		if (!st.ok) {
			advance(s, &c);
			continue;
		}
		lincheck__search_set_bit(s, i);
		if (st.to != state && lincheck__search_unreachable_read(
					      s, st.to) != LINCHECK__NONE) {
			lincheck__search_clear_bit(s, i);
			advance(s, &c);
			continue;
		}
		if ((rv = cache_add(s, st.to)) < 0)
			return rv;
		if (rv == 0) {
			lincheck__search_clear_bit(s, i);
			if (!(s->flags[i] & FLAG_PURE)) {
				advance(s, &c);
				continue;
			}
			/* The greedy choice was explored: so was this point. */
			if (!backtrack(s, &c, &state))
				return LINCHECK_NOT_LINEARIZABLE;
			continue;
		}
		s->stack[s->depth++] =
			(struct frame){c.node, state, c.bound, (uint8_t)c.pass,
				       (uint8_t)(s->flags[i] & FLAG_PURE)};
		if (s->flags[i] & FLAG_REQUIRED)
			s->required_done++;
		state = st.to;
		lift(s, c.node);
		c = level_start(s);
	}
	return LINCHECK_LINEARIZABLE;
}

/* ------------------------------------------------------------------------ */
/* The whole history.                                                       */

/* Each key's searched ops, grouped: key k's are order[start[k]..start[k+1]). */
static int partition(const struct lincheck_history *h, uint32_t **order,
		     uint32_t **start)
{
	*start = calloc((size_t)h->n_keys + 1, sizeof(**start));
	*order = malloc(((size_t)h->n_ops + 1) * sizeof(**order));
	if (*start == NULL || *order == NULL)
		return LINCHECK_ENOMEM;
	for (uint32_t i = 0; i < h->n_ops; i++) {
		if (searched(&h->ops[i]))
			(*start)[h->ops[i].key + 1]++;
	}
	for (uint32_t k = 0; k < h->n_keys; k++)
		(*start)[k + 1] += (*start)[k];
	uint32_t *fill = calloc((size_t)h->n_keys + 1, sizeof(*fill));
	if (fill == NULL)
		return LINCHECK_ENOMEM;
	for (uint32_t i = 0; i < h->n_ops; i++) {
		if (!searched(&h->ops[i]))
			continue;
		uint32_t k = h->ops[i].key;
		(*order)[(*start)[k] + fill[k]++] = i;
	}
	free(fill);
	return 0;
}

static int check_key(const struct lincheck_history *h,
		     const struct lincheck_limits *limits,
		     struct lincheck__model *model, uint32_t key, uint32_t *ops,
		     uint32_t n, uint64_t budget, bool info_first,
		     struct lincheck_result *res)
{
	struct search s;
	memset(&s, 0, sizeof(s));
	s.h = h;
	s.limits = limits;
	s.budget = budget;
	s.info_first = info_first;
	s.model = model;
	int rv = lincheck__search_sort(h, ops, n);
	if (rv == 0)
		rv = lincheck__search_init(&s, ops, n);
	if (rv == 0)
		rv = search_run(&s);
	res->configurations += s.n_entries;
	if (rv == LINCHECK_NOT_LINEARIZABLE) {
		assert(s.have_best);
		res->why = s.best;
		res->why.key = key;
	}
	s.ops = NULL; /* not ours */
	search_free(&s);
	return rv;
}

/*
 * Keys are searched in rounds with a budget of steps that grows each
 * round, restarting a key's search when it ran out: a violation in an easy
 * key is found even when another key's search is long. In each round a
 * key is searched info-first, then, if that ran out, determinate-first
 * (enum pass says why): either search's verdict is exact.
 */
int lincheck_check(const struct lincheck_history *h,
		   const struct lincheck_limits *limits,
		   struct lincheck_result *res)
{
	memset(res, 0, sizeof(*res));
	res->verdict = LINCHECK_VERDICT_UNKNOWN;
	uint32_t *order = NULL;
	uint32_t *start = NULL;
	uint32_t *todo = NULL;
	uint32_t n_todo = 0;
	struct lincheck__model model;
	int rv = lincheck__model_init(&model, h);
	if (rv == 0)
		rv = partition(h, &order, &start);
	if (rv == 0 &&
	    (todo = calloc((size_t)h->n_keys + 1, sizeof(*todo))) == NULL)
		rv = LINCHECK_ENOMEM;
	for (uint32_t k = 0; rv == 0 && k < h->n_keys; k++) {
		if (start[k + 1] > start[k])
			todo[n_todo++] = k;
	}
	uint64_t budget = CHECK_FIRST_ROUND_STEPS;
	while (rv == 0 && n_todo > 0) {
		uint32_t left = 0;
		for (uint32_t t = 0; rv == 0 && t < n_todo; t++) {
			uint32_t k = todo[t];
			uint32_t n = start[k + 1] - start[k];
			assert(n <= LINCHECK_KEY_OPS_MAX);
			rv = check_key(h, limits, &model, k, order + start[k],
				       n, budget, true, res);
			if (rv == CHECK_OUT_OF_STEPS)
				rv = check_key(h, limits, &model, k,
					       order + start[k], n, budget,
					       false, res);
			if (rv == LINCHECK_LINEARIZABLE) {
				res->keys_checked++;
				res->ops_checked += n;
			} else if (rv == CHECK_OUT_OF_STEPS) {
				todo[left++] = k;
				rv = 0;
			} else if (rv < 0) {
				res->unknown_key = k;
			}
		}
		n_todo = left;
		budget = budget < UINT64_MAX / CHECK_ROUND_GROWTH
				 ? budget * CHECK_ROUND_GROWTH
				 : UINT64_MAX;
	}
	if (rv == LINCHECK_LINEARIZABLE) {
		res->verdict = LINCHECK_LINEARIZABLE;
	} else if (rv == LINCHECK_NOT_LINEARIZABLE) {
		res->verdict = LINCHECK_NOT_LINEARIZABLE;
		rv = 0;
	} else {
		res->unknown_reason = rv;
	}
	lincheck__model_free(&model);
	free(order);
	free(start);
	free(todo);
	if (rv == LINCHECK_ETIMEOUT || rv == LINCHECK_EMEMLIMIT)
		return 0;
	return rv;
}
