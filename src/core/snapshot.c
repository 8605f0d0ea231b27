/*
 * Snapshots: the application hands one over (the log prefix is then
 * compacted, keeping some trailing entries for slow followers); the leader
 * streams it in chunks, one at a time, to a follower whose next entry was
 * compacted; the follower reassembles it and installs it.
 */
#include "core.h"

#include <string.h>

/* The configuration in force at index (the last config entry <= index). */
static void config_at(const struct baton_raft *r, baton_index index,
		      struct baton_config *c, baton_index *c_index)
{
	BATON_ASSERT(index <= baton__last_index(r));
	BATON_ASSERT(index >= r->snap.index); /* below it, unknowable */
	for (baton_index i = index; i > r->log.base; i--) {
		const struct baton_entry *e = baton__log_get(&r->log, i);
		BATON_ASSERT(e != NULL);
		if (e->type == BATON_ENTRY_CONFIG &&
		    baton_config_decode(e->buf, e->len, c) == 0) {
			*c_index = i;
			return;
		}
	}
	*c = r->snap.config;
	*c_index = r->snap.config_index;
}

int baton_raft_snapshot_meta(const struct baton_raft *r, baton_index index,
			     struct baton_snapshot_meta *out)
{
	baton_term term;
	/* Below our own snapshot the log no longer tells what was in force
	 * (the entries kept behind it start after an older point). */
	if (index == 0 || index > r->applied_index || index < r->snap.index ||
	    !baton__term_at(r, index, &term))
		return BATON_EINVAL;
	memset(out, 0, sizeof *out);
	out->index = index;
	out->term = term;
	config_at(r, index, &out->config, &out->config_index);
	baton__versions_at(r, index, &out->versions, &out->versions_index);
	BATON_ASSERT(out->config_index <= index &&
		     out->versions_index <= index);
	BATON_ASSERT(baton_version_state_valid(&out->versions));
	return 0;
}

/* How many entries, up to and including index, a snapshot at index keeps:
 * snapshot_trailing_entries, fewer when their payloads would exceed
 * snapshot_trailing_bytes (a walk of at most that many entries). */
static uint64_t trailing_entries(const struct baton_raft *r, baton_index index)
{
	uint64_t most = r->o.snapshot_trailing_entries;
	uint64_t bytes_max = r->o.snapshot_trailing_bytes;
	if (bytes_max == 0)
		return most;
	uint64_t kept = 0, bytes = 0;
	for (baton_index i = index; i > r->log.base && kept < most; i--) {
		const struct baton_entry *e = baton__log_get(&r->log, i);
		if (e == NULL || bytes + e->len > bytes_max)
			break;
		bytes += e->len;
		kept++;
	}
	BATON_ASSERT(kept <= most && bytes <= bytes_max);
	return kept;
}

int baton__snapshot_taken(struct baton_raft *r, baton_index index,
			  const uint8_t *data, size_t len)
{
	struct baton_snapshot_meta meta;
	if (index <= r->snap.index ||
	    baton_raft_snapshot_meta(r, index, &meta) != 0)
		return BATON_EINVAL;
	BATON_ASSERT(index <= r->applied_index && index <= r->commit_index);
	/* Without the bytes (data NULL), the driver serves them from its
	 * durable snapshot: the core keeps no copy of a big state. */
	uint8_t *copy = NULL;
	if (data != NULL) {
		copy = malloc(len > 0 ? len : 1);
		if (copy == NULL)
			return BATON_ENOMEM;
		if (len > 0)
			memcpy(copy, data, len);
	}
	free(r->snap_data);
	r->snap_data = copy;
	r->snap_len = len;
	BATON_ASSERT(r->snap_data != NULL || data == NULL);
	r->snap = meta;
	uint64_t trailing = trailing_entries(r, index);
	baton_index upto = index > trailing ? index - trailing : 0;
	if (upto > r->log.base) {
		baton__log_compact(&r->log, upto);
		r->compact_upto = upto;
	}
	/* The snapshot and what it records stay within the log. */
	BATON_ASSERT(r->log.base <= r->snap.index);
	BATON_ASSERT(r->config_index >= r->snap.config_index &&
		     r->versions_index >= r->snap.versions_index);
	return 0;
}

void baton__send_snapshot_chunk(struct baton_raft *r, struct baton__progress *p)
{
	BATON_ASSERT(r->role == BATON_LEADER && p->state == BATON__SNAPSHOT);
	if (p->snap_index != r->snap.index) {
		/* First chunk, or our snapshot was replaced: (re)start. */
		p->snap_index = r->snap.index;
		p->snap_offset = 0;
	}
	if (p->snap_offset > r->snap_len)
		p->snap_offset = 0;
	BATON_ASSERT(p->snap_offset <= r->snap_len);
	uint64_t left = r->snap_len - p->snap_offset;
	uint32_t len = left < r->o.snapshot_chunk_bytes
			       ? (uint32_t)left
			       : r->o.snapshot_chunk_bytes;
	struct baton_msg *m = baton__send(r, BATON_MSG_SNAPSHOT, p->id);
	if (m == NULL)
		return;
	m->u.snapshot.meta = r->snap;
	m->u.snapshot.total_len = r->snap_len;
	m->u.snapshot.offset = p->snap_offset;
	m->u.snapshot.chunk_len = len;
	/* NULL: the driver reads the chunk from its durable snapshot. */
	m->u.snapshot.chunk =
		r->snap_data != NULL ? r->snap_data + p->snap_offset : NULL;
	m->u.snapshot.last_chunk = p->snap_offset + len == r->snap_len;
	BATON_ASSERT(len <= r->o.snapshot_chunk_bytes);
}

static void reply_snapshot(struct baton_raft *r, baton_node_id to,
			   baton_index index, uint64_t next_offset, bool done)
{
	BATON_ASSERT(r->role == BATON_FOLLOWER);
	BATON_ASSERT(!done || index <= r->commit_index);
	struct baton_msg *reply =
		baton__send_after_persist(r, BATON_MSG_SNAPSHOT_RESULT, to);
	if (reply == NULL)
		return;
	reply->u.snapshot_result.index = index;
	reply->u.snapshot_result.next_offset = next_offset;
	reply->u.snapshot_result.done = done;
}

static void install(struct baton_raft *r)
{
	struct baton_snapshot_meta *meta = &r->incoming;
	BATON_ASSERT(r->role == BATON_FOLLOWER);
	/* Only news is installed: what is committed is never replaced. */
	BATON_ASSERT(meta->index > r->commit_index && meta->term <= r->term);
	BATON_ASSERT(r->incoming_len == r->incoming_total);
	free(r->snap_data);
	r->snap_data = r->incoming_data;
	r->snap_len = (size_t)r->incoming_len;
	r->incoming_data = NULL;
	r->incoming_len = 0;
	r->incoming_total = 0;
	baton_term t;
	bool holds_last = meta->index > r->log.base &&
			  baton__log_term(&r->log, meta->index, &t) &&
			  t == meta->term;
	r->snap = *meta;
	if (holds_last) {
		/* Our log holds the snapshot's last entry: what follows it
		 * agrees with the leader and may already be acknowledged, so
		 * it must stay (Raft, figure 13, rule 6). */
		baton__log_compact(&r->log, meta->index);
	} else {
		/* Nothing we hold after the snapshot can be trusted. */
		if (r->truncate_from == 0 || r->truncate_from > meta->index + 1)
			r->truncate_from = meta->index + 1;
		baton__log_reset(&r->log, meta->index, meta->term);
		if (r->persisted_index > meta->index)
			r->persisted_index = meta->index;
		r->unstable_from = meta->index + 1;
	}
	baton__config_refresh(r);
	baton__versions_refresh(r);
	r->commit_index = meta->index;
	r->applied_index = meta->index;
	/* The snapshot replaces everything up to its index, and a reset log
	 * lost what followed: look again for what we cannot interpret. What
	 * the snapshot holds itself the driver judges when it restores
	 * (BATON_EVENT_APPLY_STOPPED). */
	if (r->stalled_index != 0)
		baton__stall_recheck(r);
	r->snapshot_installed = true;
	BATON_ASSERT(r->snap.index == r->log.base);
	BATON_ASSERT(r->applied_index == meta->index &&
		     r->config_index >= meta->config_index);
	BATON_ASSERT(r->stalled_index == 0 || r->stalled_index > meta->index);
	BATON_ASSERT(r->commit_index <= baton__last_index(r));
}

void baton__recv_snapshot(struct baton_raft *r, const struct baton_msg *m)
{
	const struct baton_msg_snapshot *s = &m->u.snapshot;
	BATON_ASSERT(m->type == BATON_MSG_SNAPSHOT && m->term == r->term);
	if (r->role != BATON_FOLLOWER)
		baton__become_follower(r, m->term, m->from);
	r->leader_id = m->from;
	r->leader_contact_ms = r->now_ms;
	baton__reset_election_timer(r);
	if (s->meta.index <= r->commit_index) {
		/* We already hold all it covers. */
		reply_snapshot(r, m->from, s->meta.index, s->total_len, true);
		return;
	}
	if (s->total_len > r->o.max_snapshot_bytes ||
	    s->offset + s->chunk_len > s->total_len ||
	    (s->chunk_len > 0 && s->chunk == NULL) || s->meta.term > m->term ||
	    s->meta.config.n > BATON_MAX_MEMBERS ||
	    s->meta.config_index > s->meta.index ||
	    s->meta.versions_index > s->meta.index ||
	    !baton_version_state_valid(&s->meta.versions))
		return; /* refuse: the leader retries, an operator sees why */
	if (!baton__machine_ok(r, s->meta.versions.machine)) {
		/* Never installed: our machine could not hold it. Stall at
		 * its index (needs-upgrade), and tell the leader there is
		 * nothing more to send, so it stops streaming chunks. */
		baton__stall_needs(r, s->meta.index, s->meta.versions.machine);
		reply_snapshot(r, m->from, s->meta.index, s->total_len, false);
		return;
	}
	if (!baton__floor_ok(r, s->meta.versions.floor)) {
		/* Future data: a newer release has led; hold, never install
		 * (the floor of our own log may still be below it). */
		baton__stall(r, s->meta.index);
		if (r->stalled_index == s->meta.index)
			r->needs_release = s->meta.versions.floor;
		reply_snapshot(r, m->from, s->meta.index, s->total_len, false);
		return;
	}
	if (s->offset == 0) {
		uint8_t *buf =
			realloc(r->incoming_data,
				s->total_len > 0 ? (size_t)s->total_len : 1);
		if (buf == NULL) {
			r->alloc_failed = true;
			return;
		}
		r->incoming_data = buf;
		r->incoming = s->meta;
		r->incoming_total = s->total_len;
		r->incoming_len = 0;
	} else if (r->incoming_data == NULL ||
		   r->incoming.index != s->meta.index ||
		   r->incoming.term != s->meta.term ||
		   r->incoming_total != s->total_len ||
		   s->offset != r->incoming_len) {
		bool same = r->incoming_data != NULL &&
			    r->incoming.index == s->meta.index &&
			    r->incoming.term == s->meta.term;
		reply_snapshot(r, m->from, s->meta.index,
			       same ? r->incoming_len : 0, false);
		return;
	}
	if (s->chunk_len > 0)
		memcpy(r->incoming_data + r->incoming_len, s->chunk,
		       s->chunk_len);
	r->incoming_len += s->chunk_len;
	BATON_ASSERT(r->incoming_len <= r->incoming_total);
	bool complete = s->last_chunk && r->incoming_len == r->incoming_total;
	if (complete)
		install(r);
	reply_snapshot(r, m->from, s->meta.index,
		       complete ? s->total_len : r->incoming_len, complete);
}

void baton__recv_snapshot_result(struct baton_raft *r,
				 const struct baton_msg *m)
{
	if (r->role != BATON_LEADER)
		return;
	struct baton__progress *p = baton__progress_find(r, m->from);
	if (p == NULL)
		return;
	const struct baton_msg_snapshot_result *s = &m->u.snapshot_result;
	BATON_ASSERT(m->type == BATON_MSG_SNAPSHOT_RESULT &&
		     m->term == r->term);
	p->recent_active = true;
	p->chunk_acked = true;
	if (s->done) {
		if (s->index > baton__last_index(r))
			return;
		if (s->index > p->match)
			p->match = s->index;
		if (p->next <= p->match)
			p->next = p->match + 1; /* a late answer in probe */
		BATON_ASSERT(p->match <= baton__last_index(r));
		if (p->state == BATON__SNAPSHOT) {
			p->state = BATON__PROBE;
			p->next = p->match + 1;
			p->probe_sent = false;
			p->inflight_n = 0;
		}
		baton__maybe_commit(r);
		if (r->role == BATON_LEADER)
			baton__send_append(r, p);
		return;
	}
	if (p->state != BATON__SNAPSHOT || s->index != p->snap_index)
		return; /* stale */
	if (s->next_offset >= r->snap_len)
		return; /* all sent: wait for it to be installed */
	p->snap_offset = s->next_offset;
	baton__send_snapshot_chunk(r, p);
}
