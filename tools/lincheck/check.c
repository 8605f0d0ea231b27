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
 * Pruning:
 *  - a cache of visited configurations (set of linearized ops, model
 *    state): reaching one again cannot succeed where it failed before;
 *  - an operation that never changes the state (a get, a cas or del whose
 *    result says it changed nothing), when allowed, is linearized greedily:
 *    it is pending at the front, so any linearization of the rest can be
 *    reordered to start with it; if that fails, so does every other choice
 *    at the same point;
 *  - indeterminate operations have no return event and the model always
 *    allows them, so once every determinate operation is linearized the
 *    search stops: the rest can come last;
 *  - lost appends (see struct lincheck__model) make one state;
 *  - a look-ahead: a step whose new value one of the next unlinearized
 *    gets could never read, whatever comes between, is not taken.
 *
 * Keys are searched in rounds with a growing budget of steps, so that an
 * easy violation is found before a long search on another key ends.
 *
 * The linearized set is kept as a bit set; in the cache it is stored
 * run-length encoded by 64-bit words (all-ones and all-zero runs), which
 * is short because it is mostly a prefix of the key's operations.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

/* Byte comparisons spent finding lost appends (else none is lost). */
#define CHECK_LOST_SCAN_BYTES_MAX ((uint64_t)1 << 31)
/* Unlinearized reads the look-ahead compares a new value with. */
#define CHECK_LOOKAHEAD_READS 8u

#define FLAG_REQUIRED 1u /* determinate: must be linearized */
#define FLAG_PURE 2u	 /* never changes the state */
#define FLAG_READ 4u	 /* a determinate get */
#define FLAG_RESET 8u	 /* may change the state other than by appending */

#define WORD_ONES UINT64_MAX

struct frame {
	uint32_t node;
	uint32_t state; /* before the operation */
	uint32_t bound; /* an indeterminate op's: the return that bounded it */
	uint8_t greedy;
};

struct centry {
	uint64_t hash;
	uint64_t off; /* of its encoded set in the words arena */
	uint32_t state;
	uint32_t len; /* words */
};

struct search {
	const struct lincheck_history *h;
	const struct lincheck_limits *limits;
	struct lincheck__model *model;
	uint32_t n; /* operations of the key */
	uint32_t *ops;
	struct lincheck__op_facts *facts;
	uint8_t *flags;
	uint64_t *zobrist;
	/* The determinate ops' events, in one list, and the indeterminate
	 * ops' calls in another (same arrays, their own ends). */
	uint32_t *next;
	uint32_t *prev;
	uint32_t head;
	uint32_t tail;
	uint32_t info_head;
	uint32_t info_tail;
	/* The linearized set. */
	uint64_t *bits;
	uint32_t words;
	uint32_t full_words; /* leading all-ones words */
	uint32_t top_words;  /* words up to the last non-zero one */
	uint64_t set_hash;
	uint64_t *enc;
	uint32_t required_total;
	uint32_t required_done;
	/* Reads and resets in invocation order, and the first of each
	 * that may be unlinearized. */
	uint32_t *reads;
	uint32_t n_reads;
	uint32_t read_lo;
	uint32_t *resets;
	uint32_t n_resets;
	uint32_t reset_lo;
	uint32_t *rank; /* an op's position in reads or resets */
	struct frame *stack;
	uint32_t depth;
	/* The cache. */
	struct centry *entries;
	uint64_t n_entries;
	uint64_t cap_entries;
	uint64_t *cwords;
	uint64_t n_cwords;
	uint64_t cap_cwords;
	uint32_t *slots;
	uint64_t cap_slots;
	uint64_t steps;
	uint64_t budget; /* steps this round */
	/* The deepest point a backtrack started from. */
	bool have_best;
	struct lincheck_explanation best;
};

static void search_free(struct search *s)
{
	free(s->ops);
	free(s->facts);
	free(s->reads);
	free(s->resets);
	free(s->rank);
	free(s->flags);
	free(s->zobrist);
	free(s->next);
	free(s->prev);
	free(s->bits);
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

static void set_bit(struct search *s, uint32_t i)
{
	uint32_t w = i / 64;
	assert((s->bits[w] & ((uint64_t)1 << (i % 64))) == 0);
	s->bits[w] |= (uint64_t)1 << (i % 64);
	s->set_hash ^= s->zobrist[i];
	if (w == s->full_words) {
		while (s->full_words < s->words &&
		       s->bits[s->full_words] == WORD_ONES)
			s->full_words++;
	}
	if (w + 1 > s->top_words)
		s->top_words = w + 1;
}

static bool linearized(const struct search *s, uint32_t i)
{
	return (s->bits[i / 64] >> (i % 64)) & 1;
}

static void clear_bit(struct search *s, uint32_t i)
{
	uint32_t w = i / 64;
	assert((s->bits[w] & ((uint64_t)1 << (i % 64))) != 0);
	s->bits[w] &= ~((uint64_t)1 << (i % 64));
	s->set_hash ^= s->zobrist[i];
	if (w < s->full_words)
		s->full_words = w;
	if (w + 1 == s->top_words) {
		while (s->top_words > 0 && s->bits[s->top_words - 1] == 0)
			s->top_words--;
	}
	if ((s->flags[i] & FLAG_READ) && s->rank[i] < s->read_lo)
		s->read_lo = s->rank[i];
	if ((s->flags[i] & FLAG_RESET) && s->rank[i] < s->reset_lo)
		s->reset_lo = s->rank[i];
}

/* The canonical encoding of the set into s->enc; returns its length. */
static uint32_t encode(struct search *s)
{
	uint32_t e = 0;
	if (s->full_words > 0) {
		s->enc[e++] = WORD_ONES;
		s->enc[e++] = s->full_words;
	}
	uint32_t i = s->full_words;
	while (i < s->top_words) {
		uint64_t w = s->bits[i];
		if (w != WORD_ONES && w != 0) {
			s->enc[e++] = w;
			i++;
			continue;
		}
		uint32_t j = i;
		while (j < s->top_words && s->bits[j] == w)
			j++;
		s->enc[e++] = w;
		s->enc[e++] = j - i;
		i = j;
	}
	assert(e <= 2 * (uint64_t)s->words + 2);
	return e;
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

/* Adds the current set with `state`: 1 if new, 0 if seen, or an error. */
static int cache_add(struct search *s, uint32_t state)
{
	if (s->n_entries >= s->cap_slots / 2) {
		if (s->n_entries >= CHECK_ENTRIES_MAX)
			return LINCHECK_EMEMLIMIT;
		int rv = cache_grow(s);
		if (rv != 0)
			return rv;
	}
	uint32_t len = encode(s);
	uint64_t hash = s->set_hash ^ lincheck__mix(((uint64_t)state << 1) | 1);
	uint64_t mask = s->cap_slots - 1;
	uint64_t i = hash;
	for (;; i++) {
		uint32_t slot = s->slots[i & mask];
		if (slot == 0)
			break;
		const struct centry *c = &s->entries[slot - 1];
		if (c->hash == hash && c->state == state && c->len == len &&
		    memcmp(s->cwords + c->off, s->enc,
			   len * sizeof(uint64_t)) == 0)
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
	c->len = len;
	if (len > 0)
		memcpy(s->cwords + s->n_cwords, s->enc, len * sizeof(uint64_t));
	s->n_cwords += len;
	s->n_entries++;
	s->slots[i & mask] = (uint32_t)s->n_entries;
	return 1;
}

/* ------------------------------------------------------------------------ */
/* The event list.                                                          */

struct event {
	int64_t time;
	uint32_t node; /* 2 * op (call) or 2 * op + 1 (return) */
};

static int event_cmp(const void *a, const void *b)
{
	const struct event *x = a;
	const struct event *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	/* At equal times calls come first: such operations overlap. */
	if ((x->node & 1) != (y->node & 1))
		return (x->node & 1) ? 1 : -1;
	return x->node < y->node ? -1 : x->node > y->node;
}

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

/* Takes an op's events out of its list (an indeterminate op has only its
 * call there), or puts them back. */
static void lift(struct search *s, uint32_t call)
{
	unlink_node(s, call);
	if (s->flags[call / 2] & FLAG_REQUIRED)
		unlink_node(s, call + 1);
}

static void unlift(struct search *s, uint32_t call)
{
	if (s->flags[call / 2] & FLAG_REQUIRED)
		relink_node(s, call + 1);
	relink_node(s, call);
}

static int op_cmp_ctx_invoke(const struct lincheck_history *h, uint32_t a,
			     uint32_t b)
{
	int64_t x = h->ops[a].invoke_time;
	int64_t y = h->ops[b].invoke_time;
	if (x != y)
		return x < y ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Sorts ops[0..n) by invocation, then index (nothing to do if sorted, as
 * the parsers usually give them; else a merge sort). */
static int sort_by_invoke(const struct lincheck_history *h, uint32_t *ops,
			  uint32_t n)
{
	bool sorted = true;
	for (uint32_t i = 1; i < n && sorted; i++)
		sorted = op_cmp_ctx_invoke(h, ops[i - 1], ops[i]) < 0;
	if (sorted)
		return 0;
	uint32_t *tmp = malloc((size_t)n * sizeof(*tmp));
	if (tmp == NULL)
		return LINCHECK_ENOMEM;
	for (uint32_t width = 1; width < n; width *= 2) {
		for (uint32_t lo = 0; lo < n; lo += 2 * width) {
			uint32_t mid = lo + width < n ? lo + width : n;
			uint32_t hi = mid + width < n ? mid + width : n;
			uint32_t a = lo, b = mid, o = lo;
			while (a < mid || b < hi) {
				if (b >= hi ||
				    (a < mid &&
				     op_cmp_ctx_invoke(h, ops[a], ops[b]) < 0))
					tmp[o++] = ops[a++];
				else
					tmp[o++] = ops[b++];
			}
		}
		memcpy(ops, tmp, (size_t)n * sizeof(*ops));
	}
	free(tmp);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Setting up one key.                                                      */

static void link_after(struct search *s, uint32_t *last, uint32_t node)
{
	s->next[*last] = node;
	s->prev[node] = *last;
	*last = node;
}

/* The two lists, from the events of every op (sorted here). */
static void link_lists(struct search *s, struct event *events)
{
	qsort(events, (size_t)2 * s->n, sizeof(*events), event_cmp);
	uint32_t last = s->head;
	uint32_t info_last = s->info_head;
	for (uint32_t k = 0; k < 2 * s->n; k++) {
		uint32_t node = events[k].node;
		if (s->flags[node / 2] & FLAG_REQUIRED)
			link_after(s, &last, node);
		else if ((node & 1) == 0)
			link_after(s, &info_last, node);
	}
	link_after(s, &last, s->tail);
	link_after(s, &info_last, s->info_tail);
	s->prev[s->head] = s->head;
	s->next[s->tail] = s->tail;
	s->prev[s->info_head] = s->info_head;
	s->next[s->info_tail] = s->info_tail;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a;
	uint32_t y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static bool contains_bytes(const uint8_t *hay, size_t n, const uint8_t *needle,
			   size_t m)
{
	if (m == 0)
		return true;
	const uint8_t *p = hay;
	const uint8_t *end = hay + n;
	while ((size_t)(end - p) >= m) {
		p = memchr(p, needle[0], (size_t)(end - p) - m + 1);
		if (p == NULL)
			return false;
		if (memcmp(p, needle, m) == 0)
			return true;
		p++;
	}
	return false;
}

/* Marks the key's lost appends (see struct lincheck__model). */
static int find_lost(struct search *s)
{
	const struct lincheck_history *h = s->h;
	uint32_t n_appends = 0;
	uint32_t n_wants = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		const struct lincheck_op *op = &h->ops[s->ops[i]];
		if (op->kind == LINCHECK_INCR ||
		    (op->kind == LINCHECK_APPEND && op->out_known))
			return 0;
		n_appends += op->kind == LINCHECK_APPEND;
		n_wants +=
			(s->flags[i] & FLAG_READ) || op->kind == LINCHECK_CAS;
	}
	if (n_appends == 0)
		return 0;
	uint32_t *wants = malloc(((size_t)n_wants + 1) * sizeof(*wants));
	if (wants == NULL)
		return LINCHECK_ENOMEM;
	uint32_t k = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		if ((s->flags[i] & FLAG_READ) ||
		    h->ops[s->ops[i]].kind == LINCHECK_CAS)
			wants[k++] = s->facts[i].want;
	}
	qsort(wants, k, sizeof(*wants), u32_cmp);
	/* The distinct values compared with, one after another. */
	uint64_t blob_len = 0;
	uint32_t distinct = 0;
	for (uint32_t j = 0; j < k; j++) {
		if (j > 0 && wants[j] == wants[j - 1])
			continue;
		wants[distinct++] = wants[j];
		blob_len += s->model->states[wants[j]].len + 1;
	}
	uint8_t *blob = NULL;
	if (blob_len * n_appends <= CHECK_LOST_SCAN_BYTES_MAX)
		blob = malloc((size_t)blob_len + 1);
	if (blob == NULL) {
		free(wants);
		return 0; /* too costly to look (or no memory): none lost */
	}
	size_t at = 0;
	for (uint32_t j = 0; j < distinct; j++) {
		const struct lincheck__state *st = &s->model->states[wants[j]];
		if (st->len > 0)
			memcpy(blob + at, s->model->bytes + st->off, st->len);
		at += st->len;
		blob[at++] = 0; /* a match across two values only loses */
	}
	for (uint32_t i = 0; i < s->n; i++) {
		const struct lincheck_op *op = &h->ops[s->ops[i]];
		if (op->kind != LINCHECK_APPEND)
			continue;
		s->facts[i].lost = !contains_bytes(
			blob, at, lincheck_value_bytes(h, op->arg),
			op->arg.len);
	}
	free(blob);
	free(wants);
	return 0;
}

static int search_init(struct search *s, uint32_t *ops, uint32_t n)
{
	const struct lincheck_history *h = s->h;
	s->ops = ops;
	s->n = n;
	s->words = (n + 63) / 64;
	s->head = 2 * n;
	s->tail = 2 * n + 1;
	s->info_head = 2 * n + 2;
	s->info_tail = 2 * n + 3;
	size_t nodes = (size_t)2 * n + 4;
	s->facts = calloc(n, sizeof(*s->facts));
	s->flags = calloc(n, sizeof(*s->flags));
	s->zobrist = calloc(n, sizeof(*s->zobrist));
	s->next = calloc(nodes, sizeof(*s->next));
	s->prev = calloc(nodes, sizeof(*s->prev));
	s->bits = calloc(s->words + 1, sizeof(*s->bits));
	s->enc = calloc((size_t)2 * s->words + 2, sizeof(*s->enc));
	s->stack = calloc(n + 1, sizeof(*s->stack));
	s->reads = calloc(n, sizeof(*s->reads));
	s->resets = calloc(n, sizeof(*s->resets));
	s->rank = calloc(n, sizeof(*s->rank));
	struct event *events = calloc((size_t)2 * n, sizeof(*events));
	if (s->facts == NULL || s->flags == NULL || s->zobrist == NULL ||
	    s->next == NULL || s->prev == NULL || s->bits == NULL ||
	    s->enc == NULL || s->stack == NULL || s->reads == NULL ||
	    s->resets == NULL || s->rank == NULL || events == NULL) {
		free(events);
		return LINCHECK_ENOMEM;
	}
	int rv = 0;
	for (uint32_t i = 0; i < n && rv == 0; i++) {
		const struct lincheck_op *op = &h->ops[ops[i]];
		if (op->status == LINCHECK_OK)
			s->flags[i] |= FLAG_REQUIRED;
		if (lincheck__model_pure(op))
			s->flags[i] |= FLAG_PURE;
		if (op->kind == LINCHECK_GET && op->status == LINCHECK_OK) {
			s->flags[i] |= FLAG_READ;
			s->rank[i] = s->n_reads;
			s->reads[s->n_reads++] = i;
		} else if (op->kind != LINCHECK_APPEND &&
			   !(s->flags[i] & FLAG_PURE)) {
			s->flags[i] |= FLAG_RESET;
			s->rank[i] = s->n_resets;
			s->resets[s->n_resets++] = i;
		}
		s->required_total += op->status == LINCHECK_OK;
		s->zobrist[i] =
			lincheck__mix(((uint64_t)i + 1) * 0x9e3779b97f4a7c15u);
		struct lincheck__op_facts *f = &s->facts[i];
		f->tag = ops[i];
		if (op->kind == LINCHECK_GET && op->status == LINCHECK_OK)
			rv = lincheck__model_intern(s->model, op->out,
						    &f->want);
		if (op->kind == LINCHECK_CAS)
			rv = lincheck__model_intern(s->model, op->arg,
						    &f->want);
		if (rv == 0 && op->kind == LINCHECK_SET)
			rv = lincheck__model_intern(s->model, op->arg,
						    &f->target);
		if (rv == 0 && op->kind == LINCHECK_CAS)
			rv = lincheck__model_intern(s->model, op->arg2,
						    &f->target);
		events[2 * i] = (struct event){op->invoke_time, 2 * i};
		events[2 * i + 1] = (struct event){op->return_time, 2 * i + 1};
	}
	if (rv == 0)
		link_lists(s, events);
	if (rv == 0)
		rv = find_lost(s);
	free(events);
	return rv;
}

/* ------------------------------------------------------------------------ */
/* The search.                                                              */

static int step(struct search *s, uint32_t state, uint32_t i,
		struct lincheck__step *out)
{
	return lincheck__model_step(s->model, &s->h->ops[s->ops[i]],
				    &s->facts[i], state, out);
}

static void explain_value(struct search *s, uint32_t state)
{
	const struct lincheck__state *st = &s->model->states[state];
	s->best.value_tag = st->present ? LINCHECK_PRESENT : LINCHECK_ABSENT;
	if (st->lost)
		s->best.value_tag = LINCHECK_UNKNOWN;
	s->best.value_len = st->len;
	size_t n = st->len < LINCHECK_EXPLAIN_VALUE_BYTES
			   ? st->len
			   : LINCHECK_EXPLAIN_VALUE_BYTES;
	if (n > 0)
		memcpy(s->best.value, s->model->bytes + st->off, n);
}

/* Whether value a can still grow into b by appends. */
static bool grows_into(const struct lincheck__model *m, uint32_t a, uint32_t b)
{
	const struct lincheck__state *x = &m->states[a];
	const struct lincheck__state *y = &m->states[b];
	if (x->lost || y->lost)
		return false;
	if (a == b || !x->present)
		return true;
	if (!y->present || x->len > y->len)
		return false;
	return x->len == 0 ||
	       memcmp(m->bytes + x->off, m->bytes + y->off, x->len) == 0;
}

/*
 * Look-ahead after the state became `to`. An unlinearized read R will see
 * `to` grown by appends, unless a reset comes first, and only resets
 * invoked before R returns (or as it returns) can: so what R read must start
 * with `to` or with the value one of those sets. (A del or incr among them
 * could leave anything: then R tells nothing.) Only the first few reads are
 * compared.
 */
static bool read_reachable(struct search *s, uint32_t to, uint32_t read)
{
	uint32_t want = s->facts[read].want;
	if (grows_into(s->model, to, want))
		return true;
	int64_t until = s->h->ops[s->ops[read]].return_time;
	for (uint32_t k = s->reset_lo; k < s->n_resets; k++) {
		uint32_t j = s->resets[k];
		const struct lincheck_op *r = &s->h->ops[s->ops[j]];
		if (r->invoke_time > until)
			break; /* it must come after the read */
		if (linearized(s, j))
			continue;
		if (r->kind != LINCHECK_SET && r->kind != LINCHECK_CAS)
			return true;
		if (grows_into(s->model, s->facts[j].target, want))
			return true;
	}
	return false;
}

/* The read (local index) that `to` makes unreachable, or
 * LINCHECK__NONE. */
static uint32_t unreachable_read(struct search *s, uint32_t to)
{
	while (s->reset_lo < s->n_resets &&
	       linearized(s, s->resets[s->reset_lo]))
		s->reset_lo++;
	while (s->read_lo < s->n_reads && linearized(s, s->reads[s->read_lo]))
		s->read_lo++;
	uint32_t compared = 0;
	for (uint32_t k = s->read_lo;
	     k < s->n_reads && compared < CHECK_LOOKAHEAD_READS; k++) {
		uint32_t j = s->reads[k];
		if (linearized(s, j))
			continue;
		compared++;
		if (!read_reachable(s, to, j))
			return j;
	}
	return LINCHECK__NONE;
}

/* Why local op i cannot come next in `state`: into the k-th slot. */
static int explain_why(struct search *s, uint32_t state, uint32_t i, uint32_t k)
{
	struct lincheck_explanation *b = &s->best;
	struct lincheck__step st;
	int rv = step(s, state, i, &st);
	if (rv != 0)
		return rv;
	b->pending[k] = s->ops[i];
	b->blocker[k] = LINCHECK__NONE;
	b->why[k] = st.ok ? LINCHECK_WHY_EXPLORED : LINCHECK_WHY_MODEL;
	if (!st.ok || st.to == state)
		return 0;
	set_bit(s, i);
	uint32_t read = unreachable_read(s, st.to);
	clear_bit(s, i);
	if (read != LINCHECK__NONE) {
		b->why[k] = LINCHECK_WHY_UNREADABLE;
		b->blocker[k] = s->ops[read];
	}
	return 0;
}

/* A backtrack starts at return event `ret`: remember the deepest. */
static int explain(struct search *s, uint32_t ret, uint32_t state)
{
	if (s->have_best && s->depth <= s->best.prefix_len)
		return 0;
	s->have_best = true;
	struct lincheck_explanation *b = &s->best;
	b->key_ops = s->n;
	b->prefix_len = s->depth;
	b->stuck = s->ops[ret / 2];
	b->n_pending = 0;
	/* The stuck op first, then the other calls before its return. */
	uint32_t stuck_call = ret - 1;
	for (uint32_t pass = 0; pass < 2; pass++) {
		for (uint32_t node = s->next[s->head]; node != ret;
		     node = s->next[node]) {
			assert((node & 1) == 0);
			if ((node == stuck_call) != (pass == 0))
				continue;
			uint32_t k = b->n_pending++;
			if (k >= LINCHECK_EXPLAIN_OPS_MAX)
				continue;
			int rv = explain_why(s, state, node / 2, k);
			if (rv != 0)
				return rv;
		}
	}
	/* And the indeterminate ops that could come before it returns. */
	int64_t until = s->h->ops[s->ops[ret / 2]].return_time;
	for (uint32_t node = s->next[s->info_head]; node != s->info_tail;
	     node = s->next[node]) {
		if (s->h->ops[s->ops[node / 2]].invoke_time > until)
			break;
		uint32_t k = b->n_pending++;
		if (k >= LINCHECK_EXPLAIN_OPS_MAX)
			continue;
		int rv = explain_why(s, state, node / 2, k);
		if (rv != 0)
			return rv;
	}
	assert(b->n_pending > 0 && b->pending[0] == b->stuck);
	b->n_tail = s->depth < LINCHECK_EXPLAIN_TAIL_MAX
			    ? s->depth
			    : LINCHECK_EXPLAIN_TAIL_MAX;
	for (uint32_t k = 0; k < b->n_tail; k++)
		b->tail[k] =
			s->ops[s->stack[s->depth - b->n_tail + k].node / 2];
	explain_value(s, state);
	return 0;
}

/* Where the walk is: a node of the determinate list, or a call of the
 * indeterminate list, which the walk takes only after every determinate
 * candidate, and only those invoked by the return event `bound`. */
struct cursor {
	uint32_t node;
	uint32_t bound; /* LINCHECK__NONE in the determinate list */
};

/* Undoes attempts until one whose alternatives remain; false if none. */
static bool backtrack(struct search *s, struct cursor *c, uint32_t *state)
{
	while (s->depth > 0) {
		struct frame f = s->stack[--s->depth];
		uint32_t i = f.node / 2;
		unlift(s, f.node);
		clear_bit(s, i);
		if (s->flags[i] & FLAG_REQUIRED)
			s->required_done--;
		*state = f.state;
		if (!f.greedy) {
			c->node = s->next[f.node];
			c->bound = f.bound;
			return true;
		}
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

/* Whether the indeterminate walk bounded by c->bound is over. */
static bool info_walk_over(const struct search *s, const struct cursor *c)
{
	if (c->node == s->info_tail)
		return true;
	const struct lincheck_op *call = &s->h->ops[s->ops[c->node / 2]];
	const struct lincheck_op *ret = &s->h->ops[s->ops[c->bound / 2]];
	return call->invoke_time > ret->return_time;
}

/* LINCHECK_LINEARIZABLE, LINCHECK_NOT_LINEARIZABLE, CHECK_OUT_OF_STEPS,
 * or an error. */
static int search_run(struct search *s)
{
	uint32_t state = s->model->absent;
	struct cursor c = {s->next[s->head], LINCHECK__NONE};
	while (s->required_done < s->required_total) {
		int rv = out_of_steps(s);
		if (rv != 0)
			return rv;
		assert(c.node != s->tail);
		if (c.bound == LINCHECK__NONE && (c.node & 1)) {
			/* No determinate op can come next: an indeterminate
			 * one, or backtrack. */
			if ((rv = explain(s, c.node, state)) != 0)
				return rv;
			c.bound = c.node;
			c.node = s->next[s->info_head];
		}
		if (c.bound != LINCHECK__NONE && info_walk_over(s, &c)) {
			if (!backtrack(s, &c, &state))
				return LINCHECK_NOT_LINEARIZABLE;
			continue;
		}
		uint32_t i = c.node / 2;
		struct lincheck__step st;
		if ((rv = step(s, state, i, &st)) != 0)
			return rv;
		if (!st.ok) {
			c.node = s->next[c.node];
			continue;
		}
		set_bit(s, i);
		if (st.to != state &&
		    unreachable_read(s, st.to) != LINCHECK__NONE) {
			clear_bit(s, i);
			c.node = s->next[c.node];
			continue;
		}
		if ((rv = cache_add(s, st.to)) < 0)
			return rv;
		if (rv == 0) {
			clear_bit(s, i);
			if (!(s->flags[i] & FLAG_PURE)) {
				c.node = s->next[c.node];
				continue;
			}
			/* The greedy choice was explored: so was this point. */
			if (!backtrack(s, &c, &state))
				return LINCHECK_NOT_LINEARIZABLE;
			continue;
		}
		s->stack[s->depth++] =
			(struct frame){c.node, state, c.bound,
				       (uint8_t)(s->flags[i] & FLAG_PURE)};
		if (s->flags[i] & FLAG_REQUIRED)
			s->required_done++;
		state = st.to;
		lift(s, c.node);
		c.node = s->next[s->head];
		c.bound = LINCHECK__NONE;
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
		     uint32_t n, uint64_t budget, struct lincheck_result *res)
{
	struct search s;
	memset(&s, 0, sizeof(s));
	s.h = h;
	s.limits = limits;
	s.budget = budget;
	s.model = model;
	int rv = sort_by_invoke(h, ops, n);
	if (rv == 0)
		rv = search_init(&s, ops, n);
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
 * key is found even when another key's search is long.
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
				       n, budget, res);
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
