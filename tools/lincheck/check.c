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
 * Pruning (each keeps the search exact: it only skips what cannot
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
 *    point is told at enum pass;
 *  - lost appends (see struct lincheck__model) make one state;
 *  - a look-ahead: a step after which one of the next unlinearized gets
 *    (or incrs with a recorded result) could never return what it did,
 *    whatever may still come before it, is not taken.
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
/* Indeterminate resets remembered per read for the look-ahead (past
 * this, the read is taken as always reachable). */
#define CHECK_READ_HELPERS_MAX 4u
/* Unlinearized reads the look-ahead compares a new value with. */
#define CHECK_LOOKAHEAD_READS 32u

#define FLAG_REQUIRED 1u /* determinate: must be linearized */
#define FLAG_PURE 2u	 /* never changes the state */
#define FLAG_READ 4u	 /* a determinate get */
#define FLAG_RESET 8u	 /* may change the state other than by appending */
#define FLAG_APPEND 16u
#define FLAG_COUNT 32u /* a determinate incr whose result was recorded */
#define FLAG_INCR 64u
#define FLAG_BLIND 128u /* allowed in any state, which it overwrites */

/* An increment above this (in size) makes the look-ahead skip counting. */
#define CHECK_INCR_DELTA_MAX ((int64_t)1 << 40)

#define WORD_ONES UINT64_MAX

struct frame {
	uint32_t node;
	uint32_t state; /* before the operation */
	uint32_t bound; /* the first pending return then */
	uint8_t pass;	/* enum pass it was taken in */
	uint8_t greedy;
};

/* A bit set that tracks its leading all-ones and last non-zero words. */
struct bitset {
	uint64_t *w;
	uint32_t words;
	uint32_t full; /* leading all-ones words */
	uint32_t top;  /* words up to the last non-zero one */
};

/* A visited configuration: its state, the set of determinate ops
 * linearized (run-length encoded) and the set of indeterminate ones (its
 * words), one after the other in the words arena. */
struct centry {
	uint64_t hash; /* of the determinate set and the state */
	uint64_t off;
	uint32_t state;
	uint32_t len_required; /* words */
	uint32_t len_info;     /* words */
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
	/* The determinate ops' events, in a list. */
	uint32_t *next;
	uint32_t *prev;
	uint32_t head;
	uint32_t tail;
	/* The indeterminate ops, in invocation order. */
	uint32_t *info_ops;
	uint32_t n_info;
	/* The linearized set: every op (by local index), and apart the
	 * determinate and the indeterminate ones (by their index among
	 * those, dense[]). */
	uint64_t *bits;
	struct bitset required_set;
	struct bitset info_set;
	uint32_t *dense;
	uint64_t set_hash; /* of the determinate ones */
	uint64_t *enc;
	uint32_t enc_cap;
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
	uint32_t *appends;
	uint32_t n_appends;
	uint32_t append_lo;
	uint32_t *rank; /* an op's position in reads, resets or appends */
	/* Per read (by rank): indeterminate resets invoked before it returns
	 * that could leave what it read, or helpers_many. */
	uint32_t (*helpers)[CHECK_READ_HELPERS_MAX];
	uint8_t *n_helpers;
	/* The incrs in invocation order; sums of the negative and of the
	 * positive increments of those not linearized (Fenwick trees by
	 * position); counting is off if an increment is too large. */
	uint32_t *incrs;
	uint32_t *incr_rank;
	uint32_t n_incrs;
	int64_t *incr_neg;
	int64_t *incr_pos;
	bool incr_counting;
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
	bool info_first; /* the order of the passes (see enum pass) */
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

static void incr_update(struct search *s, uint32_t i, int sign);

static void set_bit(struct search *s, uint32_t i)
{
	assert(!((s->bits[i / 64] >> (i % 64)) & 1));
	if (s->flags[i] & FLAG_INCR)
		incr_update(s, i, -1);
	s->bits[i / 64] |= (uint64_t)1 << (i % 64);
	if (s->flags[i] & FLAG_REQUIRED) {
		bitset_set(&s->required_set, s->dense[i]);
		s->set_hash ^= s->zobrist[i];
	} else {
		bitset_set(&s->info_set, s->dense[i]);
	}
}

static bool linearized(const struct search *s, uint32_t i)
{
	return (s->bits[i / 64] >> (i % 64)) & 1;
}

static void clear_bit(struct search *s, uint32_t i)
{
	assert(linearized(s, i));
	if (s->flags[i] & FLAG_INCR)
		incr_update(s, i, 1);
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

/* The list of the determinate ops' events (sorted here). */
static void link_list(struct search *s, struct event *events)
{
	qsort(events, (size_t)2 * s->n, sizeof(*events), event_cmp);
	uint32_t last = s->head;
	for (uint32_t k = 0; k < 2 * s->n; k++) {
		uint32_t node = events[k].node;
		if (s->flags[node / 2] & FLAG_REQUIRED)
			link_after(s, &last, node);
	}
	link_after(s, &last, s->tail);
	s->prev[s->head] = s->head;
	s->next[s->tail] = s->tail;
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
		n_wants += op->kind == LINCHECK_GET || op->kind == LINCHECK_CAS;
	}
	if (n_appends == 0)
		return 0;
	uint32_t *wants = malloc(((size_t)n_wants + 1) * sizeof(*wants));
	if (wants == NULL)
		return LINCHECK_ENOMEM;
	uint32_t k = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		uint8_t kind = h->ops[s->ops[i]].kind;
		if (kind == LINCHECK_GET || kind == LINCHECK_CAS)
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

static bool grows_into(const struct lincheck__model *m, uint32_t a, uint32_t b);

/* The determinate and indeterminate sets, and the encoding buffer. */
static int sets_init(struct search *s)
{
	uint32_t counts[2] = {0, 0};
	s->info_ops = calloc((size_t)s->n + 1, sizeof(*s->info_ops));
	if (s->info_ops == NULL)
		return LINCHECK_ENOMEM;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t part = (s->flags[i] & FLAG_REQUIRED) ? 1 : 0;
		if (part == 0)
			s->info_ops[counts[0]] = i;
		s->dense[i] = counts[part]++;
	}
	s->n_info = counts[0];
	s->required_set.words = counts[1] / 64 + 1;
	s->info_set.words = counts[0] / 64 + 1;
	s->required_set.w = calloc(s->required_set.words, sizeof(uint64_t));
	s->info_set.w = calloc(s->info_set.words, sizeof(uint64_t));
	s->enc_cap = 2 * s->required_set.words + 2 + s->info_set.words;
	s->enc = calloc(s->enc_cap, sizeof(uint64_t));
	if (s->required_set.w == NULL || s->info_set.w == NULL ||
	    s->enc == NULL)
		return LINCHECK_ENOMEM;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Counting the increments still to come.                                  */

/* Adds sign * (the increment of incr op i) to the sums. */
static void incr_update(struct search *s, uint32_t i, int sign)
{
	if (!s->incr_counting)
		return;
	int64_t d = s->h->ops[s->ops[i]].delta;
	int64_t neg = d < 0 ? d * sign : 0;
	int64_t pos = d > 0 ? d * sign : 0;
	for (uint32_t k = s->incr_rank[i] + 1; k <= s->n_incrs; k += k & -k) {
		s->incr_neg[k] += neg;
		s->incr_pos[k] += pos;
	}
}

/* The range of sums of the unlinearized increments among the first
 * `count` incrs. */
static void incr_range(const struct search *s, uint32_t count, int64_t *lo,
		       int64_t *hi)
{
	*lo = 0;
	*hi = 0;
	for (uint32_t k = count; k > 0; k -= k & -k) {
		*lo += s->incr_neg[k];
		*hi += s->incr_pos[k];
	}
}

static int incrs_init(struct search *s)
{
	s->incrs = calloc((size_t)s->n + 1, sizeof(*s->incrs));
	s->incr_rank = calloc((size_t)s->n + 1, sizeof(*s->incr_rank));
	s->incr_neg = calloc((size_t)s->n + 1, sizeof(*s->incr_neg));
	s->incr_pos = calloc((size_t)s->n + 1, sizeof(*s->incr_pos));
	if (s->incrs == NULL || s->incr_rank == NULL || s->incr_neg == NULL ||
	    s->incr_pos == NULL)
		return LINCHECK_ENOMEM;
	s->incr_counting = true;
	for (uint32_t i = 0; i < s->n; i++) {
		if (!(s->flags[i] & FLAG_INCR))
			continue;
		int64_t d = s->h->ops[s->ops[i]].delta;
		if (d > CHECK_INCR_DELTA_MAX || d < -CHECK_INCR_DELTA_MAX)
			s->incr_counting = false;
		s->incr_rank[i] = s->n_incrs;
		s->incrs[s->n_incrs++] = i;
	}
	if (s->incr_counting) {
		for (uint32_t k = 0; k < s->n_incrs; k++)
			incr_update(s, s->incrs[k], 1);
	}
	return 0;
}

/* The integer INCR sees in a state (a missing key is 0); false if none. */
static bool int_of(const struct search *s, uint32_t state, int64_t *v)
{
	const struct lincheck__state *st = &s->model->states[state];
	if (state == s->model->absent) {
		*v = 0;
		return true;
	}
	if (st->lost || !st->int_ok)
		return false;
	*v = st->int_value;
	return true;
}

/* What a read needs: a get some value, a recorded incr some integer
 * before it; and what may come before it. */
struct goal {
	bool count;
	int64_t need; /* count */
	uint32_t want;
	bool grows;	/* appends may come first */
	int64_t lo, hi; /* sums unlinearized incrs may add first */
};

static bool int_in(int64_t from, int64_t to, int64_t lo, int64_t hi)
{
	int64_t diff;
	if (__builtin_sub_overflow(to, from, &diff))
		return false;
	return diff >= lo && diff <= hi;
}

/* Whether state `left` can turn into what goal g needs. */
static bool leads_to(const struct search *s, uint32_t left,
		     const struct goal *g)
{
	int64_t v, w;
	bool has_int = int_of(s, left, &v);
	if (g->count)
		return has_int && int_in(v, g->need, g->lo, g->hi);
	if (g->grows ? grows_into(s->model, left, g->want) : left == g->want)
		return true;
	const struct lincheck__state *want = &s->model->states[g->want];
	if ((g->lo == 0 && g->hi == 0) || !has_int || !want->present ||
	    !int_of(s, g->want, &w))
		return false;
	return int_in(v, w, g->lo, g->hi);
}

/* Each read's indeterminate helpers: the sets, dels and cas that could
 * leave what leads to what it read, whatever else comes first. */
static int find_helpers(struct search *s)
{
	s->helpers = calloc((size_t)s->n_reads + 1, sizeof(*s->helpers));
	s->n_helpers = calloc((size_t)s->n_reads + 1, sizeof(*s->n_helpers));
	if (s->helpers == NULL || s->n_helpers == NULL)
		return LINCHECK_ENOMEM;
	struct goal g;
	memset(&g, 0, sizeof(g));
	g.grows = s->n_appends > 0;
	g.lo = s->n_incrs > 0 ? -CHECK_INCR_DELTA_MAX * 2 : 0;
	g.hi = s->n_incrs > 0 ? CHECK_INCR_DELTA_MAX * 2 : 0;
	for (uint32_t r = 0; r < s->n_reads; r++) {
		uint32_t read = s->reads[r];
		const struct lincheck_op *rop = &s->h->ops[s->ops[read]];
		g.count = s->flags[read] & FLAG_COUNT;
		g.want = s->facts[read].want;
		for (uint32_t d = 0; d < s->n_info; d++) {
			uint32_t j = s->info_ops[d];
			const struct lincheck_op *op = &s->h->ops[s->ops[j]];
			if (op->invoke_time > rop->return_time)
				break; /* in invocation order */
			if (op->kind == LINCHECK_APPEND ||
			    op->kind == LINCHECK_INCR)
				continue; /* counted apart */
			uint32_t left = op->kind == LINCHECK_DEL
						? s->model->absent
						: s->facts[j].target;
			bool helps =
				(g.count && g.grows) || leads_to(s, left, &g);
			if (!helps)
				continue;
			if (s->n_helpers[r] == CHECK_READ_HELPERS_MAX) {
				s->n_helpers[r] = UINT8_MAX;
				break;
			}
			s->helpers[r][s->n_helpers[r]++] = j;
		}
	}
	return 0;
}

static int search_init(struct search *s, uint32_t *ops, uint32_t n)
{
	const struct lincheck_history *h = s->h;
	s->ops = ops;
	s->n = n;
	s->head = 2 * n;
	s->tail = 2 * n + 1;
	size_t nodes = (size_t)2 * n + 2;
	s->facts = calloc(n, sizeof(*s->facts));
	s->flags = calloc(n, sizeof(*s->flags));
	s->zobrist = calloc(n, sizeof(*s->zobrist));
	s->next = calloc(nodes, sizeof(*s->next));
	s->prev = calloc(nodes, sizeof(*s->prev));
	s->bits = calloc((size_t)n / 64 + 1, sizeof(*s->bits));
	s->dense = calloc(n, sizeof(*s->dense));
	s->stack = calloc(n + 1, sizeof(*s->stack));
	s->reads = calloc(n, sizeof(*s->reads));
	s->resets = calloc(n, sizeof(*s->resets));
	s->appends = calloc(n, sizeof(*s->appends));
	s->rank = calloc(n, sizeof(*s->rank));
	struct event *events = calloc((size_t)2 * n, sizeof(*events));
	if (s->facts == NULL || s->flags == NULL || s->zobrist == NULL ||
	    s->next == NULL || s->prev == NULL || s->bits == NULL ||
	    s->dense == NULL || s->stack == NULL || s->reads == NULL ||
	    s->resets == NULL || s->appends == NULL || s->rank == NULL ||
	    events == NULL) {
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
		if (op->kind == LINCHECK_INCR)
			s->flags[i] |= FLAG_INCR;
		if (op->kind == LINCHECK_SET ||
		    (op->kind == LINCHECK_DEL && !op->out_known))
			s->flags[i] |= FLAG_BLIND;
		if (op->kind == LINCHECK_INCR && op->status == LINCHECK_OK &&
		    op->out_known)
			s->flags[i] |= FLAG_COUNT;
		if ((op->kind == LINCHECK_GET && op->status == LINCHECK_OK) ||
		    (s->flags[i] & FLAG_COUNT)) {
			s->flags[i] |= FLAG_READ;
			s->rank[i] = s->n_reads;
			s->reads[s->n_reads++] = i;
		} else if (op->kind == LINCHECK_APPEND) {
			s->flags[i] |= FLAG_APPEND;
			s->rank[i] = s->n_appends;
			s->appends[s->n_appends++] = i;
		} else if (!(s->flags[i] & FLAG_PURE) &&
			   (s->flags[i] & FLAG_REQUIRED)) {
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
		rv = sets_init(s);
	if (rv == 0)
		link_list(s, events);
	if (rv == 0)
		rv = find_lost(s);
	if (rv == 0)
		rv = incrs_init(s);
	if (rv == 0)
		rv = find_helpers(s);
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

/* The first of ops[lo..n) (local indices) not linearized; lo advances. */
static uint32_t first_pending(const struct search *s, const uint32_t *ops,
			      uint32_t n, uint32_t *lo)
{
	while (*lo < n && linearized(s, ops[*lo]))
		(*lo)++;
	return *lo;
}

/* How many of ops[0..n) (local, in invocation order) are invoked by
 * `until`. */
static uint32_t invoked_by(const struct search *s, const uint32_t *ops,
			   uint32_t n, int64_t until)
{
	uint32_t lo = 0;
	uint32_t hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->h->ops[s->ops[ops[mid]]].invoke_time <= until)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Look-ahead after the state became `to`. What an unlinearized read R (a
 * get, or an incr whose result was recorded) needs must still be
 * reachable: only ops invoked before R returns (or as it returns) can come
 * before it. From `to`, or from what a set, del or cas among them leaves,
 * appends can only grow the value, and incrs add a sum between those of
 * their negative and of their positive increments.
 */
static bool read_reachable(struct search *s, uint32_t to, uint32_t read)
{
	const struct lincheck_op *rop = &s->h->ops[s->ops[read]];
	int64_t until = rop->return_time;
	struct goal g;
	memset(&g, 0, sizeof(g));
	g.count = s->flags[read] & FLAG_COUNT;
	g.want = s->facts[read].want;
	if (g.count &&
	    __builtin_sub_overflow(rop->out_int, rop->delta, &g.need))
		return true; /* the model refuses it anyway */
	uint32_t a = first_pending(s, s->appends, s->n_appends, &s->append_lo);
	for (; a < s->n_appends && !g.grows; a++) {
		uint32_t j = s->appends[a];
		if (s->h->ops[s->ops[j]].invoke_time > until)
			break;
		g.grows = !linearized(s, j);
	}
	if (s->incr_counting) {
		incr_range(s, invoked_by(s, s->incrs, s->n_incrs, until), &g.lo,
			   &g.hi);
		if (g.count) { /* not the read itself */
			g.lo -= rop->delta < 0 ? rop->delta : 0;
			g.hi -= rop->delta > 0 ? rop->delta : 0;
		}
	} else if (s->n_incrs > 0) {
		return true;
	}
	if (g.grows && (g.count || g.lo < 0 || g.hi > 0))
		return true;
	if (leads_to(s, to, &g))
		return true;
	uint32_t k = first_pending(s, s->resets, s->n_resets, &s->reset_lo);
	for (; k < s->n_resets; k++) {
		uint32_t j = s->resets[k];
		const struct lincheck_op *r = &s->h->ops[s->ops[j]];
		if (r->invoke_time > until)
			break; /* it must come after the read */
		if (linearized(s, j) || r->kind == LINCHECK_INCR)
			continue;
		uint32_t left = r->kind == LINCHECK_DEL ? s->model->absent
							: s->facts[j].target;
		if (leads_to(s, left, &g))
			return true;
	}
	uint32_t r = s->rank[read];
	if (s->n_helpers[r] == UINT8_MAX)
		return true;
	for (uint32_t h = 0; h < s->n_helpers[r]; h++) {
		if (!linearized(s, s->helpers[r][h]))
			return true;
	}
	return false;
}

/* The read (local index) that `to` makes unreachable, or
 * LINCHECK__NONE. */
static uint32_t unreachable_read(struct search *s, uint32_t to)
{
	uint32_t compared = 0;
	uint32_t k = first_pending(s, s->reads, s->n_reads, &s->read_lo);
	for (; k < s->n_reads && compared < CHECK_LOOKAHEAD_READS; k++) {
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

/* How many indeterminate ops are invoked by the time of return event
 * `ret` (they are in invocation order). */
static uint32_t info_invoked_by(const struct search *s, uint32_t ret)
{
	int64_t until = s->h->ops[s->ops[ret / 2]].return_time;
	uint32_t lo = 0;
	uint32_t hi = s->n_info;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->h->ops[s->ops[s->info_ops[mid]]].invoke_time <= until)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
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
	uint32_t end = info_invoked_by(s, ret);
	for (uint32_t d = 0; d < end; d++) {
		uint32_t i = s->info_ops[d];
		if (linearized(s, i))
			continue;
		uint32_t k = b->n_pending++;
		if (k >= LINCHECK_EXPLAIN_OPS_MAX)
			continue;
		int rv = explain_why(s, state, i, k);
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

/*
 * Where the walk is. At each point it makes three passes, all bounded by
 * the first pending return (`bound`):
 *  1. the pending determinate calls, for a pure op the model allows
 *     (taken greedily);
 *  2. the indeterminate ops invoked by `bound`, oldest first;
 *  3. the pending determinate calls again, for any op;
 * or, in a search that is not info_first, 3 before 2. Trying
 * indeterminate ops first finds a linearization far sooner (a wrong
 * placement is soon refuted by the look-ahead). But refuting a history
 * means visiting every configuration, and there info-first is
 * exponential in the unobserved indeterminate ops: the variant with such
 * an op comes first, so the cache cannot drop it as a superset of the
 * variant without it, which it does when that one comes first. So each
 * round tries both orders (see lincheck_check).
 */
enum pass {
	PASS_PURE = 0,
	PASS_INFO,
	PASS_DETERMINATE,
};

struct cursor {
	uint32_t node;
	uint32_t bound;
	uint32_t info; /* PASS_INFO: info_ops[info..info_end) are left */
	uint32_t info_end;
	enum pass pass;
};

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
		clear_bit(s, i);
		if (s->flags[i] & FLAG_REQUIRED)
			s->required_done--;
		*state = f.state;
		if (f.greedy)
			continue;
		c->bound = f.bound;
		c->pass = (enum pass)f.pass;
		if (c->pass == PASS_INFO) {
			c->info = s->dense[i] + 1;
			c->info_end = info_invoked_by(s, f.bound);
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
				if (!linearized(s, i)) {
					c->node = 2 * i;
					return true;
				}
			}
			if (!s->info_first) {
				*rv = explain(s, c->bound, state);
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
				*rv = explain(s, c->node, state);
				return false;
			}
			c->bound = c->node;
			if (c->pass == PASS_PURE && !s->info_first) {
				c->pass = PASS_DETERMINATE;
				c->node = s->next[s->head];
				continue;
			}
			c->info = 0;
			c->info_end = info_invoked_by(s, c->node);
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
		if ((rv = step(s, state, i, &st)) != 0)
			return rv;
		if (!st.ok) {
			advance(s, &c);
			continue;
		}
		set_bit(s, i);
		if (st.to != state &&
		    unreachable_read(s, st.to) != LINCHECK__NONE) {
			clear_bit(s, i);
			advance(s, &c);
			continue;
		}
		if ((rv = cache_add(s, st.to)) < 0)
			return rv;
		if (rv == 0) {
			clear_bit(s, i);
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
