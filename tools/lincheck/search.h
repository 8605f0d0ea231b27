/*
 * The checker's search for one key, private to check.c (the search loop),
 * search_init.c (preparing a key's search) and explain.c (the look-ahead
 * and explaining a failure).
 */
#ifndef BATON_LINCHECK_SEARCH_H
#define BATON_LINCHECK_SEARCH_H

#include "internal.h"

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

struct event {
	int64_t time;
	uint32_t node; /* 2 * op (call) or 2 * op + 1 (return) */
};

/* What a read needs: a get some value, a recorded incr some integer
 * before it; and what may come before it. */
struct goal {
	bool count;
	int64_t need; /* count */
	uint32_t want;
	bool grows;	/* appends may come first */
	int64_t lo, hi; /* sums unlinearized incrs may add first */
};

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

static inline bool lincheck__search_linearized(const struct search *s,
					       uint32_t i)
{
	return (s->bits[i / 64] >> (i % 64)) & 1;
}

/* search_init.c */
int lincheck__search_sort(const struct lincheck_history *h, uint32_t *ops,
			  uint32_t n);
int lincheck__search_init(struct search *s, uint32_t *ops, uint32_t n);
/* Adds sign * (the increment of incr op i) to the sums. */
void lincheck__search_incr_update(struct search *s, uint32_t i, int sign);
/* The range of sums of the unlinearized increments among the first
 * `count` incrs. */
void lincheck__search_incr_range(const struct search *s, uint32_t count,
				 int64_t *lo, int64_t *hi);
/* Whether state `left` can turn into what goal g needs. */
bool lincheck__search_leads_to(const struct search *s, uint32_t left,
			       const struct goal *g);

/* check.c */
void lincheck__search_set_bit(struct search *s, uint32_t i);
void lincheck__search_clear_bit(struct search *s, uint32_t i);
int lincheck__search_step(struct search *s, uint32_t state, uint32_t i,
			  struct lincheck__step *out);

/* explain.c */
/* Whether value a can still grow into b by appends. */
bool lincheck__search_grows_into(const struct lincheck__model *m, uint32_t a,
				 uint32_t b);
/* The read (local index) that `to` makes unreachable, or
 * LINCHECK__NONE. */
uint32_t lincheck__search_unreachable_read(struct search *s, uint32_t to);
/* A backtrack starts at return event `ret`: remember the deepest. */
int lincheck__search_explain(struct search *s, uint32_t ret, uint32_t state);
/* How many indeterminate ops are invoked by the time of return event
 * `ret` (they are in invocation order). */
uint32_t lincheck__search_info_invoked_by(const struct search *s, uint32_t ret);

#endif
