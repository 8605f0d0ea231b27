/*
 * Log replication: the leader's side (per-follower progress, pipelined and
 * batched AppendEntries, heartbeats, commit by counting current-term
 * entries) and the follower's side (consistency check, conflict truncation,
 * fast backtracking hints).
 */
#include "core.h"

#include <string.h>

/* ---- progress ----------------------------------------------------------- */

struct baton__progress *baton__progress_find(struct baton_raft *r,
					     baton_node_id id)
{
	BATON_ASSERT(r->n_progress <= BATON_MAX_MEMBERS);
	BATON_ASSERT(r->role == BATON_LEADER || r->n_progress == 0);
	for (uint32_t i = 0; i < r->n_progress; i++)
		if (r->progress[i].id == id)
			return &r->progress[i];
	return NULL;
}

static void progress_init(struct baton_raft *r, struct baton__progress *p,
			  baton_node_id id)
{
	BATON_ASSERT(id != 0 && id != r->o.id);
	memset(p, 0, sizeof *p);
	p->id = id;
	p->state = BATON__PROBE;
	p->next = baton__last_index(r) + 1;
	p->recent_active = true; /* a grace period before the quorum check */
	BATON_ASSERT(p->match == 0 && p->inflight_n == 0);
}

/* Make the progress table follow the configuration: keep what we know of
 * members still present, start fresh for new ones. */
void baton__progress_reset(struct baton_raft *r)
{
	struct baton__progress old[BATON_MAX_MEMBERS];
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	uint32_t n_old = r->role == BATON_LEADER ? r->n_progress : 0;
	memcpy(old, r->progress, n_old * sizeof old[0]);
	r->n_progress = 0;
	for (uint32_t i = 0; i < r->config.n; i++) {
		baton_node_id id = r->config.members[i].id;
		if (id == r->o.id)
			continue;
		struct baton__progress *p = &r->progress[r->n_progress++];
		bool found = false;
		for (uint32_t k = 0; k < n_old; k++) {
			if (old[k].id == id) {
				*p = old[k];
				found = true;
			}
		}
		if (!found)
			progress_init(r, p, id);
	}
	BATON_ASSERT(r->n_progress <= r->config.n);
}

static void inflight_push(struct baton__progress *p, baton_index last,
			  uint64_t seq)
{
	BATON_ASSERT(p->inflight_n < BATON__INFLIGHT_MAX);
	uint32_t slot =
		(p->inflight_head + p->inflight_n) % BATON__INFLIGHT_MAX;
	p->inflight[slot] = last;
	p->inflight_seq[slot] = seq;
	p->inflight_n++;
	BATON_ASSERT(p->inflight_n == 1 ||
		     p->inflight[(slot + BATON__INFLIGHT_MAX - 1) %
				 BATON__INFLIGHT_MAX] <= last);
}

/* Links mostly deliver in order and followers answer in order, so an
 * answer to a message sent two heartbeat rounds after the oldest append in
 * flight means that append (or its answer) was lost. One round of slack
 * keeps a little reordering from looking like loss. */
static bool inflight_lost(const struct baton__progress *p, uint64_t seq)
{
	BATON_ASSERT(p->inflight_n <= BATON__INFLIGHT_MAX);
	BATON_ASSERT(p->inflight_head < BATON__INFLIGHT_MAX);
	return p->inflight_n > 0 &&
	       p->inflight_seq[p->inflight_head] + 2 <= seq;
}

static void inflight_free_upto(struct baton__progress *p, baton_index index)
{
	BATON_ASSERT(p->inflight_n <= BATON__INFLIGHT_MAX);
	while (p->inflight_n > 0 && p->inflight[p->inflight_head] <= index) {
		p->inflight_head = (p->inflight_head + 1) % BATON__INFLIGHT_MAX;
		p->inflight_n--;
	}
	BATON_ASSERT(p->inflight_n == 0 ||
		     p->inflight[p->inflight_head] > index);
}

static void become_probe(struct baton__progress *p, baton_index next)
{
	BATON_ASSERT(p->inflight_n <= BATON__INFLIGHT_MAX);
	p->state = BATON__PROBE;
	p->next = next > p->match + 1 ? next : p->match + 1;
	p->probe_sent = false;
	p->inflight_n = 0;
	p->inflight_head = 0;
	BATON_ASSERT(p->next > p->match);
}

/* ---- leader: sending ---------------------------------------------------- */

int baton__leader_append(struct baton_raft *r, uint32_t type, const void *buf,
			 uint32_t len)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(baton__last_term(r) <= r->term); /* terms only grow */
	baton_index before = baton__last_index(r);
	int rv = baton__log_append(&r->log, r->term, type, buf, len);
	if (rv != 0)
		return rv;
	BATON_ASSERT(baton__last_index(r) == before + 1);
	const struct baton_entry *e =
		baton__log_get(&r->log, baton__last_index(r));
	if (type == BATON_ENTRY_CONFIG)
		baton__config_appended(r, e);
	else if (type == BATON_ENTRY_VERSION)
		baton__versions_appended(r, e);
	/* A single-voter cluster commits as soon as the disk says so. */
	return 0;
}

/* How many entries from `from` fit in one AppendEntries. */
static uint32_t batch_len(const struct baton_raft *r, baton_index from)
{
	baton_index last = baton__last_index(r);
	BATON_ASSERT(from > r->log.base);
	uint32_t n = 0;
	uint64_t bytes = 0;
	for (baton_index i = from; i <= last; i++) {
		const struct baton_entry *e = baton__log_get(&r->log, i);
		if (n >= r->o.max_entries_per_append ||
		    (n > 0 && bytes + e->len > r->o.max_bytes_per_append))
			break;
		bytes += e->len;
		n++;
	}
	BATON_ASSERT(n <= r->o.max_entries_per_append && from + n <= last + 1);
	return n;
}

static bool send_one_append(struct baton_raft *r, struct baton__progress *p,
			    bool heartbeat)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(p->next >= 1 && p->next <= baton__last_index(r) + 1);
	baton_index prev = heartbeat ? p->match : p->next - 1;
	baton_term prev_term = 0;
	if (heartbeat) {
		/* Anchor at the match so the follower may learn the commit
		 * index; if that entry was compacted, anchor at 0, which
		 * always matches and only confirms leadership. */
		if (!baton__term_at(r, prev, &prev_term))
			prev = 0;
	} else if (prev < r->log.base || !baton__term_at(r, prev, &prev_term)) {
		/* The entries it needs were compacted away. */
		p->state = BATON__SNAPSHOT;
		p->snap_index = 0;
		baton__send_snapshot_chunk(r, p);
		return false;
	}
	uint32_t n = heartbeat ? 0 : batch_len(r, prev + 1);
	if (p->state == BATON__REPLICATE && n == 0 && !heartbeat)
		return false;
	struct baton_msg *m = baton__send(r, BATON_MSG_APPEND, p->id);
	if (m == NULL)
		return false;
	m->u.append.prev_index = prev;
	m->u.append.prev_term = prev_term;
	m->u.append.leader_commit = r->commit_index;
	m->u.append.heartbeat_seq = r->heartbeat_seq;
	m->u.append.n_entries = n; /* entries resolved when the step ends */
	m->u.append.leader = r->o.profile;
	if (heartbeat)
		return false;
	if (p->state == BATON__REPLICATE) {
		p->next = prev + n + 1;
		inflight_push(p, prev + n, r->heartbeat_seq);
		return n > 0;
	}
	p->probe_sent = true;
	return false;
}

void baton__send_append(struct baton_raft *r, struct baton__progress *p)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(p >= r->progress && p < r->progress + r->n_progress);
	switch (p->state) {
	case BATON__PROBE:
		if (!p->probe_sent)
			send_one_append(r, p, false);
		break;
	case BATON__REPLICATE:
		while (p->inflight_n < r->o.max_inflight_appends &&
		       p->next <= baton__last_index(r) &&
		       p->state == BATON__REPLICATE)
			if (!send_one_append(r, p, false))
				break;
		break;
	default:
		break; /* snapshots advance on acknowledgements and ticks */
	}
}

void baton__broadcast_append(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->n_progress <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < r->n_progress; i++)
		baton__send_append(r, &r->progress[i]);
	baton__maybe_commit(r); /* a single voter commits alone */
}

/* A heartbeat round: confirms leadership (read index, followers' timers)
 * and repairs what the network lost. */
void baton__broadcast_heartbeat(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->leader_id == r->o.id);
	for (uint32_t i = 0; i < r->n_progress; i++) {
		struct baton__progress *p = &r->progress[i];
		switch (p->state) {
		case BATON__SNAPSHOT:
			/* Only a chunk's own answer shows the transfer is
			 * moving; heartbeat answers say nothing about it. */
			if (!p->chunk_acked)
				baton__send_snapshot_chunk(r, p);
			else
				send_one_append(r, p, true);
			break;
		case BATON__PROBE:
			p->probe_sent = false; /* the last probe may be lost */
			send_one_append(r, p, false);
			break;
		default:
			if (!send_one_append(r, p, true))
				baton__send_append(r, p);
			break;
		}
		p->chunk_acked = false;
	}
	r->heartbeat_deadline_ms = r->now_ms + r->o.heartbeat_interval_ms;
	BATON_ASSERT(r->heartbeat_deadline_ms > r->now_ms);
}

static void check_quorum(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER && r->o.check_quorum);
	uint32_t active = baton__is_voter(r, r->o.id) ? 1 : 0;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		struct baton__progress *p = &r->progress[i];
		if (p->recent_active && baton__is_voter(r, p->id))
			active++;
		p->recent_active = false;
	}
	BATON_ASSERT(active <= baton__voter_count(r));
	r->quorum_check_deadline_ms = r->now_ms + r->o.election_timeout_ms;
	if (active < baton__voter_count(r) / 2 + 1)
		baton__become_follower(r, r->term, 0);
}

void baton__leader_tick(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->leader_id == r->o.id);
	if (r->o.check_quorum && r->now_ms >= r->quorum_check_deadline_ms) {
		check_quorum(r);
		if (r->role != BATON_LEADER)
			return;
	}
	baton__transfer_tick(r);
	if (r->stalled_index != 0) {
		baton__stall_handover(r);
		if (r->role != BATON_LEADER)
			return;
	}
	if (r->clock_barred) {
		baton__clock_leader_tick(r);
		if (r->role != BATON_LEADER)
			return;
	}
	baton__promotion_check(r);
	if (r->role != BATON_LEADER)
		return;
	if (r->now_ms >= r->heartbeat_deadline_ms) {
		r->heartbeat_seq++;
		baton__broadcast_heartbeat(r);
	}
	baton__upgrade_info_tick(r);
	/* Every tick, so a membership change re-checks upgrade readiness
	 * at once (removing the member that held it back lets it go). */
	baton__upgrade_tick(r);
}

/* ---- leader: commit ---------------------------------------------------- */

void baton__maybe_commit(struct baton_raft *r)
{
	if (r->role != BATON_LEADER)
		return;
	baton_index matches[BATON_MAX_MEMBERS];
	uint32_t n = 0;
	if (baton__is_voter(r, r->o.id))
		matches[n++] = r->persisted_index;
	for (uint32_t i = 0; i < r->n_progress; i++)
		if (baton__is_voter(r, r->progress[i].id))
			matches[n++] = r->progress[i].match;
	BATON_ASSERT(n <= BATON_MAX_MEMBERS && n <= baton__voter_count(r));
	if (n == 0)
		return;
	/* Sort descending (n <= 16) and take the quorum-th highest. */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t k = i; k > 0 && matches[k] > matches[k - 1];
		     k--) {
			baton_index t = matches[k];
			matches[k] = matches[k - 1];
			matches[k - 1] = t;
		}
	baton_index candidate = matches[n / 2];
	BATON_ASSERT(candidate <= baton__last_index(r)); /* match <= last */
	BATON_ASSERT(matches[0] >= matches[n - 1]);
	baton_term t;
	/* Only an entry of our own term is committed by counting replicas;
	 * earlier ones follow it (Raft, figure 8). */
	if (candidate <= r->commit_index || !baton__term_at(r, candidate, &t) ||
	    t != r->term)
		return;
	BATON_ASSERT(t == r->term && candidate > r->commit_index);
	r->commit_index = candidate;
	baton__reads_check(r);
	/* A leader that removed itself leaves once the removal commits. */
	if (!baton__is_voter(r, r->o.id) && r->config_index <= r->commit_index)
		baton__become_follower(r, r->term, 0);
}

/* ---- follower: receiving ------------------------------------------------ */

void baton__truncate(struct baton_raft *r, baton_index i)
{
	BATON_ASSERT(i > r->commit_index); /* committed entries are forever */
	BATON_ASSERT(i <= baton__last_index(r) && r->role != BATON_LEADER);
	if (i < r->unstable_from &&
	    (r->truncate_from == 0 || i < r->truncate_from))
		r->truncate_from = i;
	baton__log_truncate(&r->log, i);
	if (r->unstable_from > i)
		r->unstable_from = i;
	if (r->persisted_index >= i)
		r->persisted_index = i - 1;
	if (r->config_index >= i)
		baton__config_refresh(r);
	if (r->versions_index >= i)
		baton__versions_refresh(r);
	if (r->stalled_index >= i)
		baton__stall_recheck(r);
	BATON_ASSERT(baton__last_index(r) == i - 1);
	BATON_ASSERT(r->config_index < i && r->versions_index < i);
}

static void reply_append(struct baton_raft *r, const struct baton_msg *m,
			 bool success, baton_index index)
{
	BATON_ASSERT(m->type == BATON_MSG_APPEND && r->role == BATON_FOLLOWER);
	BATON_ASSERT(!success || index <= baton__last_index(r));
	struct baton_msg *reply =
		baton__send_after_persist(r, BATON_MSG_APPEND_RESULT, m->from);
	if (reply == NULL)
		return;
	reply->u.append_result.success = success;
	reply->u.append_result.index = index;
	reply->u.append_result.heartbeat_seq = m->u.append.heartbeat_seq;
	if (success)
		return;
	/* Hint: our last index whose term is <= the term the leader sent,
	 * so the leader can skip every entry of a conflicting term. */
	baton_index h = m->u.append.prev_index;
	if (h > baton__last_index(r))
		h = baton__last_index(r);
	baton_term t = 0;
	while (h > r->log.base && baton__term_at(r, h, &t) &&
	       t > m->u.append.prev_term)
		h--;
	if (!baton__term_at(r, h, &t))
		t = 0;
	BATON_ASSERT(h <= m->u.append.prev_index && t <= r->term);
	reply->u.append_result.hint_index = h;
	reply->u.append_result.hint_term = t;
}

static bool append_valid(const struct baton_raft *r, const struct baton_msg *m)
{
	const struct baton_msg_append *a = &m->u.append;
	BATON_ASSERT(m->type == BATON_MSG_APPEND);
	BATON_ASSERT(m->term == r->term);
	if (a->n_entries > BATON__BATCH_MAX ||
	    (a->n_entries > 0 && a->entries == NULL))
		return false;
	for (uint32_t i = 0; i < a->n_entries; i++) {
		const struct baton_entry *e = &a->entries[i];
		baton_term prev =
			i == 0 ? a->prev_term : a->entries[i - 1].term;
		bool own = e->type == BATON_ENTRY_CONFIG ||
			   e->type == BATON_ENTRY_VERSION;
		uint32_t max = r->o.max_entry_bytes;
		if (own && max < BATON__CORE_ENTRY_BYTES_MAX)
			max = BATON__CORE_ENTRY_BYTES_MAX;
		if (e->term < prev || e->term > m->term || e->len > max ||
		    (e->len > 0 && e->buf == NULL))
			return false;
	}
	return true;
}

void baton__recv_append(struct baton_raft *r, const struct baton_msg *m)
{
	const struct baton_msg_append *a = &m->u.append;
	if (r->role != BATON_FOLLOWER)
		baton__become_follower(r, m->term, m->from);
	BATON_ASSERT(r->role == BATON_FOLLOWER && m->term == r->term);
	r->leader_id = m->from;
	r->leader_contact_ms = r->now_ms;
	baton__reset_election_timer(r);
	if (!append_valid(r, m))
		return;

	baton_index prev = a->prev_index;
	uint32_t skip = 0;
	if (prev < r->commit_index) {
		/* Entries up to our commit index match: committed entries
		 * are in every later leader's log (and may be compacted). */
		baton_index covered = r->commit_index - prev;
		skip = covered > a->n_entries ? a->n_entries
					      : (uint32_t)covered;
	} else {
		baton_term t;
		if (prev > baton__last_index(r) ||
		    !baton__term_at(r, prev, &t) || t != a->prev_term) {
			reply_append(r, m, false, prev);
			return;
		}
	}
	for (uint32_t i = skip; i < a->n_entries; i++) {
		const struct baton_entry *e = &a->entries[i];
		baton_index index = prev + 1 + i;
		baton_term t;
		if (index <= baton__last_index(r)) {
			if (baton__term_at(r, index, &t) && t == e->term)
				continue;
			baton__truncate(r, index);
		}
		if (baton__log_append(&r->log, e->term, e->type, e->buf,
				      e->len) != 0) {
			r->alloc_failed = true;
			return; /* the leader will retry what we lack */
		}
		if (e->type == BATON_ENTRY_CONFIG)
			baton__config_appended(r,
					       baton__log_get(&r->log, index));
		else if (e->type == BATON_ENTRY_VERSION)
			baton__versions_appended(
				r, baton__log_get(&r->log, index));
	}
	baton_index last_new = prev + a->n_entries;
	BATON_ASSERT(last_new <= baton__last_index(r));
	baton_index commit =
		a->leader_commit < last_new ? a->leader_commit : last_new;
	if (commit > r->commit_index)
		r->commit_index = commit;
	BATON_ASSERT(r->commit_index <= baton__last_index(r));
	BATON_ASSERT(r->leader_id == m->from && r->role == BATON_FOLLOWER);
	reply_append(r, m, true, last_new);
}

/* ---- leader: acknowledgements ------------------------------------------- */

/* The leader's next index after a rejection, from the follower's hint. */
static baton_index next_after_reject(struct baton_raft *r,
				     const struct baton_msg_append_result *a)
{
	BATON_ASSERT(r->role == BATON_LEADER && !a->success);
	baton_index i = a->hint_index;
	baton_term t;
	if (i > baton__last_index(r))
		i = baton__last_index(r);
	while (i > r->log.base && baton__term_at(r, i, &t) && t > a->hint_term)
		i--;
	baton_index next = i + 1;
	next = next < a->index + 1 ? next : a->index;
	BATON_ASSERT(next <= baton__last_index(r) + 1);
	return next;
}

void baton__recv_append_result(struct baton_raft *r, const struct baton_msg *m)
{
	if (r->role != BATON_LEADER)
		return;
	struct baton__progress *p = baton__progress_find(r, m->from);
	if (p == NULL)
		return;
	const struct baton_msg_append_result *a = &m->u.append_result;
	BATON_ASSERT(m->type == BATON_MSG_APPEND_RESULT && m->term == r->term);
	p->recent_active = true;
	if (a->heartbeat_seq > p->acked_seq)
		p->acked_seq = a->heartbeat_seq;
	if (a->success) {
		if (a->index > baton__last_index(r))
			return; /* impossible from an honest follower */
		if (a->index > p->match)
			p->match = a->index;
		if (p->next <= p->match)
			p->next = p->match + 1;
		BATON_ASSERT(p->match <= baton__last_index(r));
		inflight_free_upto(p, a->index);
		if (p->state == BATON__PROBE) {
			p->state = BATON__REPLICATE;
			p->next = p->match + 1;
			p->inflight_n = 0;
			p->probe_sent = false;
		} else if (p->state == BATON__REPLICATE &&
			   inflight_lost(p, a->heartbeat_seq)) {
			become_probe(p, p->match + 1);
		}
		baton__maybe_commit(r);
		if (r->role != BATON_LEADER)
			return;
		baton__transfer_check(r, p);
		baton__promotion_check(r);
	} else if (a->index >= p->match && p->state != BATON__SNAPSHOT) {
		/* A fresh rejection (stale ones name an index below the
		 * match): back off to where the logs agree. */
		become_probe(p, next_after_reject(r, a));
		/* A hint below the match: the follower no longer holds
		 * entries it acknowledged (restarted on a wiped data
		 * directory under its old id). Raft cannot repair that;
		 * probing again at once would loop at network speed, so
		 * the next heartbeat probes. */
		if (a->hint_index < p->match)
			p->probe_sent = true;
	}
	baton__reads_check(r);
	baton__send_append(r, p);
}
