/* The look-ahead, and explaining why a key's history is not
 * linearizable. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

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
bool lincheck__search_grows_into(const struct lincheck__model *m, uint32_t a,
				 uint32_t b)
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
	while (*lo < n && lincheck__search_linearized(s, ops[*lo]))
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
		g.grows = !lincheck__search_linearized(s, j);
	}
	if (s->incr_counting) {
		lincheck__search_incr_range(
			s, invoked_by(s, s->incrs, s->n_incrs, until), &g.lo,
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
	if (lincheck__search_leads_to(s, to, &g))
		return true;
	uint32_t k = first_pending(s, s->resets, s->n_resets, &s->reset_lo);
	for (; k < s->n_resets; k++) {
		uint32_t j = s->resets[k];
		const struct lincheck_op *r = &s->h->ops[s->ops[j]];
		if (r->invoke_time > until)
			break; /* it must come after the read */
		if (lincheck__search_linearized(s, j) ||
		    r->kind == LINCHECK_INCR)
			continue;
		uint32_t left = r->kind == LINCHECK_DEL ? s->model->absent
							: s->facts[j].target;
		if (lincheck__search_leads_to(s, left, &g))
			return true;
	}
	uint32_t r = s->rank[read];
	if (s->n_helpers[r] == UINT8_MAX)
		return true;
	for (uint32_t h = 0; h < s->n_helpers[r]; h++) {
		if (!lincheck__search_linearized(s, s->helpers[r][h]))
			return true;
	}
	return false;
}

/* The read (local index) that `to` makes unreachable, or
 * LINCHECK__NONE. */
uint32_t lincheck__search_unreachable_read(struct search *s, uint32_t to)
{
	uint32_t compared = 0;
	uint32_t k = first_pending(s, s->reads, s->n_reads, &s->read_lo);
	for (; k < s->n_reads && compared < CHECK_LOOKAHEAD_READS; k++) {
		uint32_t j = s->reads[k];
		if (lincheck__search_linearized(s, j))
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
	int rv = lincheck__search_step(s, state, i, &st);
	if (rv != 0)
		return rv;
	b->pending[k] = s->ops[i];
	b->blocker[k] = LINCHECK__NONE;
	b->why[k] = st.ok ? LINCHECK_WHY_EXPLORED : LINCHECK_WHY_MODEL;
	if (!st.ok || st.to == state)
		return 0;
	lincheck__search_set_bit(s, i);
	uint32_t read = lincheck__search_unreachable_read(s, st.to);
	lincheck__search_clear_bit(s, i);
	if (read != LINCHECK__NONE) {
		b->why[k] = LINCHECK_WHY_UNREADABLE;
		b->blocker[k] = s->ops[read];
	}
	return 0;
}

/* How many indeterminate ops are invoked by the time of return event
 * `ret` (they are in invocation order). */
uint32_t lincheck__search_info_invoked_by(const struct search *s, uint32_t ret)
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
int lincheck__search_explain(struct search *s, uint32_t ret, uint32_t state)
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
	uint32_t end = lincheck__search_info_invoked_by(s, ret);
	for (uint32_t d = 0; d < end; d++) {
		uint32_t i = s->info_ops[d];
		if (lincheck__search_linearized(s, i))
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
