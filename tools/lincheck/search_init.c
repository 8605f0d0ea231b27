/* Preparing one key's search: its events, sets, lost appends, incrs and
 * the look-ahead's helpers. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

/* ------------------------------------------------------------------------ */
/* Ordering the events.                                                     */

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
int lincheck__search_sort(const struct lincheck_history *h, uint32_t *ops,
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
void lincheck__search_incr_update(struct search *s, uint32_t i, int sign)
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
void lincheck__search_incr_range(const struct search *s, uint32_t count,
				 int64_t *lo, int64_t *hi)
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
			lincheck__search_incr_update(s, s->incrs[k], 1);
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

static bool int_in(int64_t from, int64_t to, int64_t lo, int64_t hi)
{
	int64_t diff;
	if (__builtin_sub_overflow(to, from, &diff))
		return false;
	return diff >= lo && diff <= hi;
}

/* Whether state `left` can turn into what goal g needs. */
bool lincheck__search_leads_to(const struct search *s, uint32_t left,
			       const struct goal *g)
{
	int64_t v, w;
	bool has_int = int_of(s, left, &v);
	if (g->count)
		return has_int && int_in(v, g->need, g->lo, g->hi);
	if (g->grows ? lincheck__search_grows_into(s->model, left, g->want)
		     : left == g->want)
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
			bool helps = (g.count && g.grows) ||
				     lincheck__search_leads_to(s, left, &g);
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

int lincheck__search_init(struct search *s, uint32_t *ops, uint32_t n)
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
