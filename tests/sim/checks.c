/*
 * The invariants, checked after every step (Raft dissertation, figure 3.2,
 * plus what the driver can see of the state machine):
 *
 * - election safety: at most one leader per term;
 * - leader append-only: a leader never shrinks or rewrites its log in its term;
 * - log matching: two entries with the same index and term have the same
 *   content and the same predecessor term, in every log, ever;
 * - leader completeness: a new leader holds every entry applied anywhere;
 * - state machine safety: every node applies the same entry, and reaches the
 *   same machine state, at each index; snapshots match that state;
 * - commit indexes never go backwards within one incarnation;
 * - a snapshot the storage made durable reads back byte for byte.
 *
 * Everything is incremental (hash tables and arrays indexed by term or log
 * index), so checking after every step stays cheap.
 */
#include "world.h"

#include <stdlib.h>
#include <string.h>

struct log_key {
	baton_index index; /* 0: empty slot */
	baton_term term;
	uint64_t content;
	baton_term prev_term;
};

struct committed {
	bool set;
	baton_term term;
	uint64_t content;
	/* The earliest term in which some node saw it committed: a leader
	 * elected in a later term must hold it (leader completeness). */
	baton_term commit_term;
	bool applied;
	uint64_t machine_hash; /* state after applying this index */
};

struct sim_checks {
	baton_node_id *leader_of_term;
	size_t terms_cap;
	struct log_key *table;
	size_t table_cap, table_n;
	struct committed *committed;
	size_t committed_cap;
	baton_index max_applied;
	baton_index max_committed;
};

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need < *cap)
		return p;
	size_t cap2 = *cap ? *cap : 1024;
	while (cap2 <= need)
		cap2 *= 2;
	uint8_t *q = realloc(p, cap2 * elem);
	if (q == NULL) {
		fprintf(stderr, "baton-sim: out of memory\n");
		abort();
	}
	memset(q + *cap * elem, 0, (cap2 - *cap) * elem);
	*cap = cap2;
	return q;
}

struct sim_checks *sim_checks_new(void)
{
	struct sim_checks *c = calloc(1, sizeof *c);
	if (c == NULL)
		abort();
	return c;
}

void sim_checks_free(struct sim_checks *c)
{
	if (c == NULL)
		return;
	free(c->leader_of_term);
	free(c->table);
	free(c->committed);
	free(c);
}

static uint64_t entry_content(const struct baton_entry *e)
{
	uint64_t h = sim_hash_bytes(0, &e->type, sizeof e->type);
	return sim_hash_bytes(h, e->buf, e->len);
}

/* ---- log matching -------------------------------------------------------- */

static size_t slot_of(baton_index index, baton_term term, size_t cap)
{
	uint64_t h =
		index * 0x9e3779b97f4a7c15ull ^ term * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static void table_grow(struct sim_checks *c)
{
	size_t cap = c->table_cap ? c->table_cap * 2 : 4096;
	struct log_key *t = calloc(cap, sizeof *t);
	if (t == NULL)
		abort();
	for (size_t i = 0; i < c->table_cap; i++) {
		struct log_key *k = &c->table[i];
		if (k->index == 0)
			continue;
		size_t s = slot_of(k->index, k->term, cap);
		while (t[s].index != 0)
			s = (s + 1) & (cap - 1);
		t[s] = *k;
	}
	free(c->table);
	c->table = t;
	c->table_cap = cap;
}

static void check_log_entry(struct sim_world *w, struct sim_node *n,
			    const struct baton_entry *e, baton_term prev_term)
{
	struct sim_checks *c = w->checks;
	if ((c->table_n + 1) * 2 > c->table_cap)
		table_grow(c);
	uint64_t content = entry_content(e);
	size_t s = slot_of(e->index, e->term, c->table_cap);
	while (c->table[s].index != 0) {
		struct log_key *k = &c->table[s];
		if (k->index == e->index && k->term == e->term) {
			if (k->content != content || k->prev_term != prev_term)
				sim_fail(w,
					 "log matching: node %llu holds entry "
					 "%llu/term %llu with other content or "
					 "predecessor (prev term %llu, seen "
					 "%llu)",
					 (unsigned long long)n->id,
					 (unsigned long long)e->index,
					 (unsigned long long)e->term,
					 (unsigned long long)prev_term,
					 (unsigned long long)k->prev_term);
			return;
		}
		s = (s + 1) & (c->table_cap - 1);
	}
	c->table[s] = (struct log_key){e->index, e->term, content, prev_term};
	c->table_n++;
}

/* ---- leaders ------------------------------------------------------------- */

/* Raft's leader completeness: an entry committed in some term is in the
 * log of every leader of a later term. (A leader of an earlier term can
 * still be elected late, after a pause, and owes nothing newer.) */
static void check_leader_complete(struct sim_world *w, struct sim_node *n)
{
	struct sim_checks *c = w->checks;
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	baton_index upto = c->max_committed > c->max_applied ? c->max_committed
							     : c->max_applied;
	for (baton_index i = s.first_index; i <= upto; i++) {
		const struct committed *k = &c->committed[i];
		if (!k->set || k->commit_term >= s.term)
			continue;
		baton_term t = 0;
		bool held = baton_raft_term_at(n->raft, i, &t);
		if (!held || t != k->term) {
			sim_fail(w,
				 "leader completeness: node %llu leads term "
				 "%llu %s at index %llu, but term %llu was "
				 "committed there in term %llu",
				 (unsigned long long)n->id,
				 (unsigned long long)s.term,
				 held ? "with another entry"
				      : "without an entry",
				 (unsigned long long)i,
				 (unsigned long long)k->term,
				 (unsigned long long)k->commit_term);
			return;
		}
	}
}

static void check_append_only(struct sim_world *w, struct sim_node *n)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	baton_term t;
	if (s.last_index < n->leader_last_index ||
	    (baton_raft_term_at(n->raft, n->leader_last_index, &t) &&
	     t != n->leader_last_term))
		sim_fail(w,
			 "leader append-only: leader %llu of term %llu went "
			 "from last %llu/term %llu to last %llu",
			 (unsigned long long)n->id, (unsigned long long)s.term,
			 (unsigned long long)n->leader_last_index,
			 (unsigned long long)n->leader_last_term,
			 (unsigned long long)s.last_index);
	n->leader_last_index = s.last_index;
	n->leader_last_term = s.last_term;
}

static void check_leader(struct sim_world *w, struct sim_node *n,
			 const struct baton_update *u)
{
	struct sim_checks *c = w->checks;
	c->leader_of_term = grow(c->leader_of_term, &c->terms_cap, u->term,
				 sizeof *c->leader_of_term);
	baton_node_id *slot = &c->leader_of_term[u->term];
	if (*slot != 0 && *slot != n->id) {
		sim_fail(w,
			 "election safety: nodes %llu and %llu both lead term "
			 "%llu",
			 (unsigned long long)*slot, (unsigned long long)n->id,
			 (unsigned long long)u->term);
		return;
	}
	bool new_leadership = n->role != BATON_LEADER || n->term != u->term;
	*slot = n->id;
	if (new_leadership) {
		w->stats.elections++;
		sim_trace(w, "node %llu is leader of term %llu",
			  (unsigned long long)n->id,
			  (unsigned long long)u->term);
		check_leader_complete(w, n);
		struct baton_raft_status s;
		baton_raft_status(n->raft, &s);
		n->leader_last_index = s.last_index;
		n->leader_last_term = s.last_term;
	} else {
		check_append_only(w, n);
	}
}

/* Every entry a node counts as committed is the one all others do. */
static void note_commit_term(struct committed *k, baton_term term)
{
	if (k->commit_term == 0 || term < k->commit_term)
		k->commit_term = term;
}

static void check_committed_prefix(struct sim_world *w, struct sim_node *n,
				   baton_index from, baton_index to,
				   baton_term now_term)
{
	struct sim_checks *c = w->checks;
	c->committed =
		grow(c->committed, &c->committed_cap, to, sizeof *c->committed);
	for (baton_index i = from; i <= to; i++) {
		const struct baton_entry *e = baton_raft_entry(n->raft, i);
		if (e == NULL)
			continue; /* covered by an installed snapshot */
		struct committed *k = &c->committed[i];
		uint64_t content = entry_content(e);
		if (!k->set) {
			k->set = true;
			k->term = e->term;
			k->content = content;
			if (i > c->max_committed)
				c->max_committed = i;
		} else if (k->term != e->term || k->content != content) {
			sim_fail(w,
				 "commit safety: node %llu commits term %llu "
				 "at index %llu where term %llu was committed",
				 (unsigned long long)n->id,
				 (unsigned long long)e->term,
				 (unsigned long long)i,
				 (unsigned long long)k->term);
			return;
		}
		note_commit_term(k, now_term);
	}
}

void sim_check_update(struct sim_world *w, struct sim_node *n,
		      const struct baton_update *u)
{
	if (u->commit_index > n->commit)
		check_committed_prefix(w, n, n->commit + 1, u->commit_index,
				       u->term);
	if (u->role == BATON_LEADER)
		check_leader(w, n, u);
	if (u->commit_index < n->commit)
		sim_fail(w,
			 "node %llu: commit index went back from %llu to %llu",
			 (unsigned long long)n->id,
			 (unsigned long long)n->commit,
			 (unsigned long long)u->commit_index);
	if (u->term < n->term)
		sim_fail(w, "node %llu: term went back from %llu to %llu",
			 (unsigned long long)n->id, (unsigned long long)n->term,
			 (unsigned long long)u->term);
	n->commit = u->commit_index;
	n->role = u->role;
	n->term = u->term;
	for (uint32_t i = 0; i < u->n_entries; i++) {
		const struct baton_entry *e = &u->entries[i];
		baton_term prev = 0;
		if (i > 0)
			prev = u->entries[i - 1].term;
		else if (!baton_raft_term_at(n->raft, e->index - 1, &prev))
			sim_fail(w,
				 "node %llu: term of %llu unknown after append",
				 (unsigned long long)n->id,
				 (unsigned long long)(e->index - 1));
		check_log_entry(w, n, e, prev);
	}
}

/* ---- state machine ------------------------------------------------------- */

void sim_check_apply(struct sim_world *w, struct sim_node *n,
		     const struct baton_entry *e)
{
	struct sim_checks *c = w->checks;
	c->committed = grow(c->committed, &c->committed_cap, e->index,
			    sizeof *c->committed);
	struct committed *k = &c->committed[e->index];
	uint64_t content = entry_content(e);
	if (!k->set || !k->applied) {
		if (k->set && (k->term != e->term || k->content != content)) {
			sim_fail(w,
				 "state machine safety: node %llu applied term "
				 "%llu at index %llu where term %llu was "
				 "committed",
				 (unsigned long long)n->id,
				 (unsigned long long)e->term,
				 (unsigned long long)e->index,
				 (unsigned long long)k->term);
			return;
		}
		k->set = true;
		k->term = e->term;
		k->content = content;
		k->applied = true;
		k->machine_hash = n->sm.hash;
		w->stats.committed++;
	} else if (k->term != e->term || k->content != content) {
		sim_fail(w,
			 "state machine safety: node %llu applied term %llu at "
			 "index %llu where term %llu was applied before",
			 (unsigned long long)n->id, (unsigned long long)e->term,
			 (unsigned long long)e->index,
			 (unsigned long long)k->term);
	} else if (k->machine_hash != n->sm.hash) {
		sim_fail(w,
			 "state machine safety: node %llu reached another "
			 "state at index %llu",
			 (unsigned long long)n->id,
			 (unsigned long long)e->index);
	}
	note_commit_term(k, n->term);
	if (e->index > c->max_applied)
		c->max_applied = e->index;
	if (e->index > c->max_committed)
		c->max_committed = e->index;
}

void sim_check_snapshot(struct sim_world *w, struct sim_node *n,
			baton_index index, uint64_t hash)
{
	struct sim_checks *c = w->checks;
	if (index >= c->committed_cap || !c->committed[index].applied ||
	    c->committed[index].machine_hash != hash)
		sim_fail(
			w,
			"snapshot: node %llu installed a snapshot at %llu that "
			"matches no applied state",
			(unsigned long long)n->id, (unsigned long long)index);
}

baton_index sim_max_applied(const struct sim_world *w)
{
	return w->checks->max_applied;
}

bool sim_committed_term(const struct sim_world *w, baton_index i,
			baton_term *term)
{
	const struct sim_checks *c = w->checks;
	if (i >= c->committed_cap || !c->committed[i].set)
		return false;
	*term = c->committed[i].term;
	return true;
}

/* ---- the storage gives back what it made durable ------------------------ */

void sim_check_snapshot_saved(struct sim_world *w, struct sim_node *n,
			      baton_index index, const uint8_t *buf, size_t len)
{
	struct baton_storage *s = n->storage;
	uint8_t got[100]; /* several reads, to exercise offsets */
	uint64_t off = 0;
	for (;;) {
		size_t k;
		int rv = s->ops->snapshot_read(s, index, off, got, sizeof got,
					       &k);
		if (rv != 0 || k > len - off || (k == 0 && off != len) ||
		    memcmp(got, buf + off, k) != 0) {
			sim_fail(w,
				 "node %llu: snapshot %llu reads back wrong at "
				 "offset %llu: %s",
				 (unsigned long long)n->id,
				 (unsigned long long)index,
				 (unsigned long long)off,
				 rv ? s->ops->errmsg(s) : "other bytes");
			return;
		}
		if (k == 0)
			return;
		off += k;
	}
}

/* ---- committed entries survive any election ------------------------------ */

struct log_tip {
	baton_index index;
	baton_term term;
};

static struct log_tip durable_tip(const struct sim_node *n)
{
	const struct sim_disk *d = &n->disk;
	if (d->log_n > 0)
		return (struct log_tip){d->log[d->log_n - 1].index,
					d->log[d->log_n - 1].term};
	if (d->has_snap)
		return (struct log_tip){d->snap.meta.index, d->snap.meta.term};
	return (struct log_tip){0, 0};
}

/* The log a node would campaign with: what it holds now if it runs. */
static struct log_tip candidate_tip(const struct sim_node *n)
{
	if (!n->alive)
		return durable_tip(n);
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	return (struct log_tip){s.last_index, s.last_term};
}

static bool holds(const struct sim_node *n, baton_index index, baton_term term)
{
	baton_term t;
	if (n->alive) {
		struct baton_raft_status s;
		baton_raft_status(n->raft, &s);
		if (index <= s.snapshot_index)
			return true;
		return baton_raft_term_at(n->raft, index, &t) && t == term;
	}
	const struct sim_disk *d = &n->disk;
	if (d->has_snap && index <= d->snap.meta.index)
		return true;
	if (d->log_n == 0 || index < d->log[0].index ||
	    index > d->log[d->log_n - 1].index)
		return false;
	return d->log[index - d->log[0].index].term == term;
}

static bool tip_at_least(struct log_tip a, struct log_tip b)
{
	return a.term != b.term ? a.term > b.term : a.index >= b.index;
}

/*
 * Raft commits an entry only once no election can lose it. Check exactly
 * that: for every voter lacking the entry, count the voters that would
 * grant it their vote, even after a crash (their durable log). A majority
 * means the "committed" entry could be overwritten.
 */
void sim_check_commit_safe(struct sim_world *w, struct sim_node *leader,
			   baton_index index)
{
	baton_term term;
	if (!baton_raft_term_at(leader->raft, index, &term))
		return;
	struct baton_raft_status s;
	baton_raft_status(leader->raft, &s);
	uint32_t voters = 0;
	for (uint32_t i = 0; i < s.config.n; i++)
		voters += s.config.members[i].role == BATON_VOTER;
	for (uint32_t i = 0; i < s.config.n; i++) {
		const struct baton_member *cand = &s.config.members[i];
		if (cand->role != BATON_VOTER || cand->id > SIM_MAX_NODES)
			continue;
		const struct sim_node *n = &w->nodes[cand->id];
		if (!n->exists || holds(n, index, term))
			continue;
		struct log_tip tip = candidate_tip(n);
		uint32_t votes = 0;
		for (uint32_t k = 0; k < s.config.n; k++) {
			const struct baton_member *v = &s.config.members[k];
			if (v->role != BATON_VOTER || v->id > SIM_MAX_NODES)
				continue;
			const struct sim_node *vn = &w->nodes[v->id];
			if (v->id == cand->id ||
			    tip_at_least(tip, durable_tip(vn)))
				votes++;
		}
		if (votes >= voters / 2 + 1) {
			sim_fail(
				w,
				"commit safety: leader %llu committed %llu "
				"(term %llu), but node %llu lacks it and could "
				"still win an election with %u of %u votes",
				(unsigned long long)leader->id,
				(unsigned long long)index,
				(unsigned long long)term,
				(unsigned long long)n->id, votes, voters);
			return;
		}
	}
}
