/*
 * The invariants, checked after every step (Raft dissertation, figure 3.2,
 * plus what the driver can see of the state machine):
 *
 * - election safety: at most one leader per term (one node, in one life:
 *   a restarted node never leads a term it led before);
 * - leader append-only: a leader never shrinks or rewrites its log in its term;
 * - log matching: two entries with the same index and term have the same
 *   content and the same predecessor term, in every log, ever (also across
 *   an installed snapshot);
 * - leader completeness: a new leader holds every entry applied anywhere;
 * - state machine safety: every node applies the same entry, and reaches the
 *   same machine state, at each index; snapshots match that state;
 * - commit indexes and terms never go backwards within one incarnation
 *   ("monotonicity");
 * - committed means stored and unlosable: a majority of the leader's voters
 *   hold a committed entry on disk, and no node lacking it could win an
 *   election, under the leader's configuration or its own;
 * - membership safety: successive configurations differ by at most one
 *   voter; a leader appends a configuration only when every earlier one is
 *   committed and it has committed an entry of its own term;
 * - a snapshot the storage made durable reads back byte for byte;
 * - the invariants of the effective machine version (versions.c), on
 *   every version entry appended.
 *
 * Everything is incremental (hash tables and arrays indexed by term or log
 * index), so checking after every step stays cheap.
 */
#include "halon.h"
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

/* The configuration in force on one node's disk, and how far it was read. */
struct disk_config {
	bool valid;
	baton_index snap_index;
	baton_index scanned;
	baton_term scanned_term;
	struct baton_config config;
	baton_index config_index;
};

/* Who led a term, in which life (incarnation). */
struct term_leader {
	baton_node_id id;
	uint64_t incarnation;
};

struct sim_checks {
	struct disk_config disk_configs[SIM_MAX_NODES + 1];
	struct term_leader *leader_of_term;
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

static bool is_voter(const struct baton_config *c, baton_node_id id)
{
	const struct baton_member *m = baton_config_find(c, id);
	return m != NULL && m->role == BATON_VOTER;
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

/* The recorded predecessor term of entry index/term, if it was seen. */
static bool table_prev_term(const struct sim_checks *c, baton_index index,
			    baton_term term, baton_term *prev_term)
{
	if (c->table_cap == 0)
		return false;
	size_t s = slot_of(index, term, c->table_cap);
	while (c->table[s].index != 0) {
		const struct log_key *k = &c->table[s];
		if (k->index == index && k->term == term) {
			*prev_term = k->prev_term;
			return true;
		}
		s = (s + 1) & (c->table_cap - 1);
	}
	return false;
}

/* A node that installs a snapshot keeps the entries after it only if its
 * log held the snapshot's last entry (Raft, figure 13, rule 6): the entry
 * now following the snapshot must have had that entry as predecessor. */
static void check_after_snapshot(struct sim_world *w, struct sim_node *n,
				 const struct baton_snapshot_meta *meta)
{
	const struct baton_entry *e =
		baton_raft_entry(n->raft, meta->index + 1);
	baton_term prev;
	if (e == NULL ||
	    !table_prev_term(w->checks, e->index, e->term, &prev) ||
	    prev == meta->term)
		return;
	sim_fail(w,
		 "log matching: node %llu installed a snapshot at %llu/term "
		 "%llu but kept entry %llu/term %llu, whose predecessor had "
		 "term %llu",
		 (unsigned long long)n->id, (unsigned long long)meta->index,
		 (unsigned long long)meta->term, (unsigned long long)e->index,
		 (unsigned long long)e->term, (unsigned long long)prev);
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
	struct term_leader *slot = &c->leader_of_term[u->term];
	if (slot->id != 0 && slot->id != n->id) {
		sim_fail(w,
			 "election safety: nodes %llu and %llu both lead term "
			 "%llu",
			 (unsigned long long)slot->id,
			 (unsigned long long)n->id,
			 (unsigned long long)u->term);
		return;
	}
	/* A leader made its term and vote durable before it won, so after a
	 * restart it can only stand in a later term. Leading the same term
	 * again is two leaders of one term, with two different logs. */
	if (slot->id == n->id && slot->incarnation != n->incarnation) {
		sim_fail(w,
			 "election safety: node %llu leads term %llu again "
			 "after a restart",
			 (unsigned long long)n->id,
			 (unsigned long long)u->term);
		return;
	}
	bool new_leadership = n->role != BATON_LEADER || n->term != u->term;
	*slot = (struct term_leader){n->id, n->incarnation};
	if (new_leadership) {
		w->stats.elections++;
		sim_trace(w, "node %llu is leader of term %llu",
			  (unsigned long long)n->id,
			  (unsigned long long)u->term);
		sim_failover_leader(w, n, u->term);
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

/* ---- membership ---------------------------------------------------------- */

/* The configuration in force just before index j in n's log (after the
 * step that appended j): the latest configuration entry below j, or the
 * snapshot's. False if there is none (j is the bootstrap configuration). */
static bool config_before(const struct sim_node *n, baton_index j,
			  struct baton_config *out, baton_index *index_out)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	for (baton_index i = j - 1; i >= s.first_index && i > 0; i--) {
		const struct baton_entry *e = baton_raft_entry(n->raft, i);
		if (e != NULL && e->type == BATON_ENTRY_CONFIG &&
		    baton_config_decode(e->buf, e->len, out) == 0) {
			*index_out = i;
			return true;
		}
	}
	struct baton_snapshot_meta meta;
	if (s.snapshot_index == 0 ||
	    baton_raft_snapshot_meta(n->raft, s.snapshot_index, &meta) != 0 ||
	    meta.config.n == 0)
		return false;
	*out = meta.config;
	*index_out = meta.config_index;
	return true;
}

static uint32_t voters_changed(const struct baton_config *a,
			       const struct baton_config *b)
{
	uint32_t changed = 0;
	for (uint32_t i = 0; i < a->n; i++)
		changed += (a->members[i].role == BATON_VOTER) !=
			   is_voter(b, a->members[i].id);
	for (uint32_t i = 0; i < b->n; i++)
		changed += b->members[i].role == BATON_VOTER &&
			   baton_config_find(a, b->members[i].id) == NULL;
	return changed;
}

/*
 * Single-server membership changes (Raft dissertation, chapter 4) are safe
 * only if (1) successive configurations in a log differ by at most one
 * voter, so any majority of one overlaps any majority of the next; (2) a
 * leader appends a configuration only once every earlier one in its log is
 * committed, so at most one is uncommitted; (3) and only once it committed
 * an entry of its own term (otherwise an uncommitted change of an earlier
 * leader may still be overwritten: the bug found in the single-server
 * algorithm in 2015). Checked on each configuration entry as it is
 * appended, by leaders and followers alike for (1).
 */
static void check_config_entry(struct sim_world *w, struct sim_node *n,
			       const struct baton_update *u,
			       const struct baton_entry *e)
{
	struct baton_config now, before;
	baton_index before_index;
	if (baton_config_decode(e->buf, e->len, &now) != 0 ||
	    !config_before(n, e->index, &before, &before_index))
		return;
	uint32_t changed = voters_changed(&before, &now);
	if (changed > 1) {
		sim_fail(w,
			 "membership safety: node %llu's log holds the "
			 "configuration at %llu (term %llu), which changes %u "
			 "voters of the one at %llu at once",
			 (unsigned long long)n->id,
			 (unsigned long long)e->index,
			 (unsigned long long)e->term, changed,
			 (unsigned long long)before_index);
		return;
	}
	if (u->role != BATON_LEADER || e->term != u->term)
		return;
	baton_term t = 0;
	if (before_index > u->commit_index) {
		sim_fail(w,
			 "membership safety: leader %llu appended a "
			 "configuration at %llu in term %llu while the one at "
			 "%llu was uncommitted (commit index %llu)",
			 (unsigned long long)n->id,
			 (unsigned long long)e->index,
			 (unsigned long long)u->term,
			 (unsigned long long)before_index,
			 (unsigned long long)u->commit_index);
	} else if (!baton_raft_term_at(n->raft, u->commit_index, &t) ||
		   t != u->term) {
		sim_fail(w,
			 "membership safety: leader %llu appended a "
			 "configuration at %llu in term %llu before committing "
			 "an entry of its term (commit index %llu, of term "
			 "%llu)",
			 (unsigned long long)n->id,
			 (unsigned long long)e->index,
			 (unsigned long long)u->term,
			 (unsigned long long)u->commit_index,
			 (unsigned long long)t);
	}
}

static void check_commit_safe(struct sim_world *w, struct sim_node *leader,
			      const struct baton_update *u);

void sim_check_update(struct sim_world *w, struct sim_node *n,
		      const struct baton_update *u)
{
	if (u->role == BATON_LEADER && u->commit_index > n->commit)
		check_commit_safe(w, n, u);
	if (u->commit_index > n->commit)
		check_committed_prefix(w, n, n->commit + 1, u->commit_index,
				       u->term);
	if (u->role == BATON_LEADER)
		check_leader(w, n, u);
	if (u->commit_index < n->commit)
		sim_fail(w,
			 "monotonicity: node %llu's commit index went back "
			 "from %llu to %llu",
			 (unsigned long long)n->id,
			 (unsigned long long)n->commit,
			 (unsigned long long)u->commit_index);
	if (u->term < n->term)
		sim_fail(w,
			 "monotonicity: node %llu's term went back from %llu "
			 "to %llu",
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
		if (e->type == BATON_ENTRY_CONFIG)
			check_config_entry(w, n, u, e);
		else if (e->type == BATON_ENTRY_VERSION) {
			sim_check_version_entry(w, n, u, e);
			sim_check_halon(w, n, u, e);
		}
	}
	if (u->snapshot != NULL)
		check_after_snapshot(w, n, u->snapshot);
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
		sim_fail(w,
			 "state machine safety: node %llu installed a snapshot "
			 "at %llu that matches no applied state",
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
			      baton_index index, size_t len)
{
	struct baton_storage *s = n->storage;
	uint8_t *all = sim_xmalloc(len > 0 ? len : 1);
	uint64_t off = 0;
	for (;;) {
		/* Several reads, to exercise offsets. */
		size_t cap = len - off < 100 ? len - off + 1 : 100;
		size_t k;
		int rv = s->ops->snapshot_read(s, index, off, all + off, cap,
					       &k);
		if (rv != 0 || k > len - off || (k == 0 && off != len)) {
			sim_fail(w,
				 "node %llu: snapshot %llu of %zu bytes reads "
				 "back wrong at offset %llu: %s",
				 (unsigned long long)n->id,
				 (unsigned long long)index, len,
				 (unsigned long long)off,
				 rv ? s->ops->errmsg(s) : "another length");
			free(all);
			return;
		}
		if (k == 0)
			break;
		off += k;
	}
	/* The machine's bytes start with its last command and the hash of
	 * its state there (machine.c): written in slices while later
	 * commands applied, they must still be the state at `index`. */
	uint64_t applied = 0, hash = 0;
	for (int i = 0; len >= 16 && i < 8; i++) {
		applied |= (uint64_t)all[i] << (8 * i);
		hash |= (uint64_t)all[8 + i] << (8 * i);
	}
	free(all);
	/* ... and no command up to index is missing from it. */
	const struct sim_checks *c = w->checks;
	baton_index missing = 0;
	for (baton_index i = applied + 1; i <= index && i < c->committed_cap;
	     i++)
		if (c->committed[i].applied)
			missing = i;
	if (len < 16 || applied > index || missing != 0)
		sim_fail(w,
			 "state machine safety: node %llu took a snapshot "
			 "at index %llu holding the state after command %llu "
			 "(command %llu missing)",
			 (unsigned long long)n->id, (unsigned long long)index,
			 (unsigned long long)applied,
			 (unsigned long long)missing);
	else if (applied != 0)
		sim_check_snapshot(w, n, applied, hash);
}

/* ---- committed entries survive any election ------------------------------ */

struct log_tip {
	baton_index index;
	baton_term term;
};

/*
 * One state a node could campaign from: what it holds while it runs, or
 * what its disk holds (it crashes and restarts). Each comes with the
 * configuration in force in it, since a candidate counts its votes by its
 * own configuration.
 */
struct view {
	const struct sim_node *n;
	bool live;
	struct log_tip tip;
	const struct baton_config *config;
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

static bool holds_durable(const struct sim_node *n, baton_index index,
			  baton_term term)
{
	const struct sim_disk *d = &n->disk;
	if (d->has_snap && index <= d->snap.meta.index)
		return true;
	if (d->log_n == 0 || index < d->log[0].index ||
	    index > d->log[d->log_n - 1].index)
		return false;
	return d->log[index - d->log[0].index].term == term;
}

static bool holds_live(const struct sim_node *n, baton_index index,
		       baton_term term)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	if (index <= s.snapshot_index)
		return true;
	baton_term t;
	return baton_raft_term_at(n->raft, index, &t) && t == term;
}

static bool holds(const struct view *v, baton_index index, baton_term term)
{
	return v->live ? holds_live(v->n, index, term)
		       : holds_durable(v->n, index, term);
}

/*
 * The configuration in force on a node's disk: the latest configuration
 * entry of its durable log, or its snapshot's. Cached per node and brought
 * up to date by scanning only what was appended since, so that checking
 * every commit stays cheap; a truncation or a new snapshot rescans.
 */
static const struct baton_config *durable_config(struct sim_checks *c,
						 const struct sim_node *n)
{
	const struct sim_disk *d = &n->disk;
	struct disk_config *k = &c->disk_configs[n->id];
	baton_index first = d->log_n ? d->log[0].index : 0;
	baton_index last = d->log_n ? d->log[d->log_n - 1].index : 0;
	baton_index snap = d->has_snap ? d->snap.meta.index : 0;
	baton_index from = first;
	if (k->valid && k->snap_index == snap && k->scanned >= first &&
	    k->scanned <= last && d->log_n > 0 &&
	    d->log[k->scanned - first].term == k->scanned_term) {
		from = k->scanned + 1;
	} else {
		k->valid = true;
		k->snap_index = snap;
		k->config_index = 0;
		memset(&k->config, 0, sizeof k->config);
		if (d->has_snap) {
			k->config = d->snap.meta.config;
			k->config_index = d->snap.meta.config_index;
		}
	}
	for (baton_index i = from; d->log_n > 0 && i <= last; i++) {
		const struct baton_entry *e = &d->log[i - first];
		struct baton_config cf;
		if (e->type == BATON_ENTRY_CONFIG && i > k->config_index &&
		    baton_config_decode(e->buf, e->len, &cf) == 0) {
			k->config = cf;
			k->config_index = i;
		}
	}
	k->scanned = last;
	k->scanned_term = d->log_n ? d->log[d->log_n - 1].term : 0;
	return &k->config;
}

static bool tip_at_least(struct log_tip a, struct log_tip b)
{
	return a.term != b.term ? a.term > b.term : a.index >= b.index;
}

static bool same_config(const struct baton_config *a,
			const struct baton_config *b)
{
	if (a->n != b->n)
		return false;
	for (uint32_t i = 0; i < a->n; i++) {
		const struct baton_member *m =
			baton_config_find(b, a->members[i].id);
		if (m == NULL || m->role != a->members[i].role)
			return false;
	}
	return true;
}

/* Could the node of view v, lacking the entry, win an election under
 * configuration cf with the tip of v? Counts the voters of cf that would
 * grant it their vote even after a crash (judged by their durable log). */
static bool could_win(struct sim_world *w, const struct view *v,
		      const struct baton_config *cf, uint32_t *votes_out,
		      uint32_t *voters_out)
{
	uint32_t voters = 0, votes = 0;
	for (uint32_t k = 0; k < cf->n; k++) {
		const struct baton_member *m = &cf->members[k];
		if (m->role != BATON_VOTER)
			continue;
		voters++;
		if (m->id == v->n->id)
			votes++;
		else if (m->id <= SIM_MAX_NODES &&
			 tip_at_least(v->tip, durable_tip(&w->nodes[m->id])))
			votes++;
	}
	*votes_out = votes;
	*voters_out = voters;
	return voters > 0 && votes >= voters / 2 + 1;
}

/*
 * Raft commits an entry only once a majority of the voters store it, and
 * then no election can lose it. Check both when a leader's commit index
 * advances (update u). Stored: on the disks of a majority of the voters of
 * the configuration the commit was counted under, which is the leader's
 * configuration before the step or, if the step appended one, after it.
 * Unlosable: for every node lacking the entry, from every state it could
 * campaign from (running, or restarted from its disk), under every
 * configuration it could count votes by: the leader's, and the one in
 * force in that state (its latest in memory, or its latest on disk). A
 * candidate counts its votes by its own configuration, so those are the
 * configurations "in force somewhere" that matter; a configuration found in
 * some other node's log binds that node, not this candidate. A majority of
 * votes means the "committed" entry could be overwritten.
 */
static bool stored_by_majority(struct sim_world *w,
			       const struct baton_config *cf, baton_index index,
			       baton_term term, uint32_t *stored_out,
			       uint32_t *voters_out)
{
	uint32_t voters = 0, stored = 0;
	for (uint32_t k = 0; k < cf->n; k++) {
		const struct baton_member *m = &cf->members[k];
		if (m->role != BATON_VOTER)
			continue;
		voters++;
		stored += m->id <= SIM_MAX_NODES &&
			  holds_durable(&w->nodes[m->id], index, term);
	}
	*stored_out = stored;
	*voters_out = voters;
	return stored >= voters / 2 + 1;
}

static void check_commit_safe(struct sim_world *w, struct sim_node *leader,
			      const struct baton_update *u)
{
	baton_index index = u->commit_index;
	baton_term term;
	if (w->failed || !baton_raft_term_at(leader->raft, index, &term))
		return;
	struct baton_raft_status ls;
	baton_raft_status(leader->raft, &ls);
	struct baton_config before;
	baton_index before_index;
	bool changed = false;
	for (uint32_t i = 0; i < u->n_entries && !changed; i++)
		changed = u->entries[i].type == BATON_ENTRY_CONFIG &&
			  config_before(leader, u->entries[i].index, &before,
					&before_index);
	uint32_t stored, voters, stored0 = 0, voters0 = 0;
	if (!stored_by_majority(w, &ls.config, index, term, &stored, &voters) &&
	    (!changed || !stored_by_majority(w, &before, index, term, &stored0,
					     &voters0))) {
		sim_fail(w,
			 "commit safety: leader %llu committed %llu (term "
			 "%llu), which only %u of its %u voters hold on disk",
			 (unsigned long long)leader->id,
			 (unsigned long long)index, (unsigned long long)term,
			 stored, voters);
		return;
	}
	for (uint32_t id = 1; id <= w->n_ids; id++) {
		const struct sim_node *n = &w->nodes[id];
		if (!n->exists)
			continue;
		struct baton_raft_status s;
		struct view views[2];
		uint32_t nv = 0;
		if (n->alive) {
			baton_raft_status(n->raft, &s);
			views[nv++] = (struct view){n,
						    true,
						    {s.last_index, s.last_term},
						    &s.config};
		}
		views[nv++] = (struct view){n, false, durable_tip(n),
					    durable_config(w->checks, n)};
		for (uint32_t k = 0; k < nv; k++) {
			const struct view *v = &views[k];
			if (holds(v, index, term))
				continue;
			const struct baton_config *cfs[2] = {&ls.config,
							     v->config};
			const char *whose[2] = {"the leader's",
						v->live ? "its own"
							: "its disk's"};
			uint32_t ncf =
				same_config(&ls.config, v->config) ? 1 : 2;
			for (uint32_t f = 0; f < ncf; f++) {
				uint32_t votes, of;
				if (!is_voter(cfs[f], id) ||
				    !could_win(w, v, cfs[f], &votes, &of))
					continue;
				sim_fail(w,
					 "commit safety: leader %llu committed "
					 "%llu (term %llu), but node %llu "
					 "lacks it %s and could still win an "
					 "election under %s configuration "
					 "with %u of %u votes",
					 (unsigned long long)leader->id,
					 (unsigned long long)index,
					 (unsigned long long)term,
					 (unsigned long long)id,
					 v->live ? "in memory" : "on disk",
					 whose[f], votes, of);
				return;
			}
		}
	}
}
