/* The scenario driver: time, requests and looking at results
 * (scenario.h). */
#include "scenario.h"

/* ---- time ------------------------------------------------------------- */

void c_advance(struct cluster *c, uint64_t ms)
{
	c->now += ms;
}

void c_tick_all(struct cluster *c)
{
	for (baton_node_id id = 1; id <= C_MAX; id++)
		if (c->n[id].r != NULL)
			cr_assert_eq(c_tick_node(c, id, NULL), 0);
}

/* Every C_TICK_MS: tick every node, then deliver everything. */
void c_run(struct cluster *c, uint64_t ms)
{
	for (uint64_t t = 0; t < ms; t += C_TICK_MS) {
		c_advance(c, C_TICK_MS);
		c_tick_all(c);
		c_deliver_all(c);
	}
}

/* The connected leader of the highest term, or 0. */
baton_node_id c_leader(struct cluster *c)
{
	baton_node_id best = 0;
	baton_term best_term = 0;
	for (baton_node_id id = 1; id <= C_MAX; id++) {
		if (c->n[id].r == NULL || c->n[id].isolated)
			continue;
		struct baton_raft_status s = c_status(c, id);
		if (s.role == BATON_LEADER &&
		    (best == 0 || s.term > best_term)) {
			best = id;
			best_term = s.term;
		}
	}
	return best;
}

uint32_t c_count_leaders(struct cluster *c)
{
	uint32_t n = 0;
	for (baton_node_id id = 1; id <= C_MAX; id++)
		if (c->n[id].r != NULL && c_role(c, id) == BATON_LEADER)
			n++;
	return n;
}

/* Run until a connected node leads with the highest term among the
 * connected nodes and has committed an entry of its term (so a quorum
 * follows it). Fails the test after max_ms. */
baton_node_id c_tick_until_leader(struct cluster *c, uint64_t max_ms)
{
	for (uint64_t t = 0; t <= max_ms; t += C_TICK_MS) {
		baton_node_id l = c_leader(c);
		if (l != 0) {
			struct baton_raft_status s = c_status(c, l);
			bool highest = true;
			for (baton_node_id id = 1; id <= C_MAX; id++)
				if (c->n[id].r != NULL && !c->n[id].isolated &&
				    c_term(c, id) > s.term)
					highest = false;
			baton_term ct = 0;
			if (highest &&
			    baton_raft_term_at(c_raft(c, l), s.commit_index,
					       &ct) &&
			    ct == s.term)
				return l;
		}
		c_run(c, C_TICK_MS);
	}
	cr_assert_fail("no leader after %llu ms", (unsigned long long)max_ms);
	return 0;
}

/* A connected follower of the leader other than `not`, or 0. */
baton_node_id c_follower(struct cluster *c, baton_node_id leader,
			 baton_node_id not )
{
	for (baton_node_id id = 1; id <= C_MAX; id++)
		if (c->n[id].r != NULL && id != leader &&
		    id != not &&!c->n[id].isolated &&
		    c_role(c, id) != BATON_LEADER)
			return id;
	return 0;
}

/* ---- requests ------------------------------------------------------------ */

int c_propose(struct cluster *c, baton_node_id id, const char *cmd,
	      baton_index *index_out)
{
	struct baton_buffer b = {cmd, strlen(cmd)};
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = 1;
	ev.u.propose.bufs = &b;
	int rv = c_step(c, id, &ev, NULL);
	if (index_out != NULL)
		*index_out = rv == 0 ? ev.u.propose.first_index_out : 0;
	return rv;
}

/* Propose "<prefix>-<k>" for k in [0, n) as one batch. */
int c_propose_n(struct cluster *c, baton_node_id id, const char *prefix,
		uint32_t n, baton_index *first_out)
{
	char(*text)[64] = c_alloc(n * sizeof *text);
	struct baton_buffer *b = c_alloc(n * sizeof *b);
	for (uint32_t k = 0; k < n; k++) {
		int len = snprintf(text[k], sizeof text[k], "%s-%u", prefix, k);
		b[k].base = text[k];
		b[k].len = (size_t)len;
	}
	struct baton_event ev = {.type = BATON_EVENT_PROPOSE};
	ev.u.propose.n = n;
	ev.u.propose.bufs = b;
	int rv = c_step(c, id, &ev, NULL);
	if (first_out != NULL)
		*first_out = rv == 0 ? ev.u.propose.first_index_out : 0;
	free(b);
	free(text);
	return rv;
}

int c_read(struct cluster *c, baton_node_id id, uint64_t request_id,
	   struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_READ};
	ev.u.read.request_id = request_id;
	return c_step(c, id, &ev, sum);
}

int c_member(struct cluster *c, baton_node_id id, uint32_t type,
	     baton_node_id target)
{
	struct baton_event ev = {.type = type};
	ev.u.member.id = target;
	return c_step(c, id, &ev, NULL);
}

int c_transfer(struct cluster *c, baton_node_id id, baton_node_id target,
	       struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_TRANSFER};
	ev.u.transfer.target = target;
	return c_step(c, id, &ev, sum);
}

int c_receive(struct cluster *c, baton_node_id id, const struct baton_msg *m,
	      struct c_sum *sum)
{
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = m;
	return c_step(c, id, &ev, sum);
}

struct baton_msg c_msg(uint32_t type, baton_term term, baton_node_id from,
		       baton_node_id to)
{
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.term = term;
	m.from = from;
	m.to = to;
	/* A made-up vote comes from a node of this binary's release, as a
	 * real one would (voters refuse a release below their floor). */
	if (type == BATON_MSG_VOTE)
		m.u.vote.candidate = *baton_release_current();
	return m;
}

void c_make_append(struct c_append *a, baton_term term, baton_node_id from,
		   baton_node_id to, baton_index prev, baton_term prev_term,
		   baton_index commit, const baton_term *terms, uint32_t n)
{
	cr_assert_leq(n, 16);
	memset(a, 0, sizeof *a);
	a->m = c_msg(BATON_MSG_APPEND, term, from, to);
	a->m.u.append.prev_index = prev;
	a->m.u.append.prev_term = prev_term;
	a->m.u.append.leader_commit = commit;
	a->m.u.append.n_entries = n;
	for (uint32_t i = 0; i < n; i++) {
		baton_index index = prev + 1 + i;
		int len = snprintf(a->text[i], sizeof a->text[i], "i%llut%llu",
				   (unsigned long long)index,
				   (unsigned long long)terms[i]);
		a->e[i] = (struct baton_entry){
			terms[i], index, BATON_ENTRY_COMMAND, (uint32_t)len,
			(uint8_t *)a->text[i]};
	}
	a->m.u.append.entries = n > 0 ? a->e : NULL;
}

/* ---- looking at results -------------------------------------------------- */

const struct c_applied *c_applied_at(struct cluster *c, baton_node_id id,
				     baton_index i)
{
	struct c_node *nd = c_node(c, id);
	for (uint32_t k = 0; k < nd->n_applied; k++)
		if (nd->applied[k].index == i)
			return &nd->applied[k];
	return NULL;
}

bool c_applied_cmd(struct cluster *c, baton_node_id id, const char *cmd)
{
	struct c_node *nd = c_node(c, id);
	size_t len = strlen(cmd);
	for (uint32_t k = 0; k < nd->n_applied; k++)
		if (nd->applied[k].type == BATON_ENTRY_COMMAND &&
		    nd->applied[k].len == len &&
		    memcmp(nd->applied[k].buf, cmd, len) == 0)
			return true;
	return false;
}

const struct baton_read_result *
c_read_result(struct cluster *c, baton_node_id id, uint64_t request_id)
{
	struct c_node *nd = c_node(c, id);
	for (uint32_t k = 0; k < nd->n_reads; k++)
		if (nd->reads[k].request_id == request_id)
			return &nd->reads[k];
	return NULL;
}

/* The logs of a and b hold the same entries over [from, to]. */
void c_assert_logs_equal(struct cluster *c, baton_node_id a, baton_node_id b,
			 baton_index from, baton_index to)
{
	for (baton_index i = from; i <= to; i++) {
		const struct baton_entry *x = baton_raft_entry(c_raft(c, a), i);
		const struct baton_entry *y = baton_raft_entry(c_raft(c, b), i);
		cr_assert(x != NULL && y != NULL, "entry %llu held by both",
			  (unsigned long long)i);
		cr_assert_eq(x->term, y->term, "term of %llu",
			     (unsigned long long)i);
		cr_assert_eq(x->type, y->type);
		cr_assert_eq(x->len, y->len);
		if (x->len > 0)
			cr_assert_arr_eq(x->buf, y->buf, x->len);
	}
}

uint32_t c_sum_count(const struct c_sum *s, bool after, uint32_t type,
		     baton_node_id to)
{
	uint32_t n = 0;
	uint32_t total = after ? s->n_msgs_after : s->n_msgs;
	const struct baton_msg *v = after ? s->msgs_after : s->msgs;
	for (uint32_t i = 0; i < total && i < C_SUM_MSGS; i++)
		n += c_match(&v[i], type, 0, to);
	return n;
}

const struct baton_msg *c_sum_find(const struct c_sum *s, bool after,
				   uint32_t type, baton_node_id to)
{
	uint32_t total = after ? s->n_msgs_after : s->n_msgs;
	const struct baton_msg *v = after ? s->msgs_after : s->msgs;
	for (uint32_t i = 0; i < total && i < C_SUM_MSGS; i++)
		if (c_match(&v[i], type, 0, to))
			return &v[i];
	return NULL;
}

/* A three-node cluster with an elected leader whose no-op every node has
 * committed. */
struct cluster *c_three(c_tweak_fn tweak, baton_node_id *leader)
{
	struct cluster *c = c_new(3, tweak);
	*leader = c_tick_until_leader(c, 20000);
	c_run(c, 3 * C_HEARTBEAT_MS);
	return c;
}

/* Three voters, an elected leader, and node 4 added as a learner that has
 * caught up. */
struct cluster *c_with_learner(c_tweak_fn tweak, baton_node_id *leader)
{
	struct cluster *c = c_three(tweak, leader);
	c_add_node(c, 4, tweak);
	cr_assert_eq(c_member(c, *leader, BATON_EVENT_ADD_LEARNER, 4), 0);
	c_run(c, 500);
	return c;
}

/* The leader's progress of follower id, to look at: the core's lookup
 * changes nothing, so the pipeline's read-only core is cast for it. */
const struct baton__progress *c_progress(struct cluster *c,
					 baton_node_id leader, baton_node_id id)
{
	return baton__progress_find((struct baton_raft *)c_raft(c, leader), id);
}
