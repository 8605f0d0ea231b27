/*
 * Lifecycle of a core instance, the dispatch of events, and the assembly of
 * the update handed back to the driver.
 */
#include "core.h"

#include <string.h>

void baton_raft_options_default(struct baton_raft_options *o)
{
	memset(o, 0, sizeof *o);
	o->profile = *baton_release_current();
	o->machine_upgrade = BATON_UPGRADE_ALL;
	o->election_policy = BATON_ELECTION_VERSION_AWARE;
	o->election_timeout_ms = 1000;
	o->heartbeat_interval_ms = 100;
	o->max_inflight_appends = 16;
	o->max_entries_per_append = 1024;
	o->max_bytes_per_append = 1u << 20;
	o->snapshot_chunk_bytes = 256u << 10;
	o->snapshot_trailing_entries = 1024;
	o->max_snapshot_bytes = (uint64_t)4 << 30;
	o->max_entry_bytes = 16u << 20;
	o->max_uncommitted_entries = 65536;
	o->promotion_rounds = 10;
	o->pre_vote = true;
	o->check_quorum = true;
	BATON_ASSERT(o->heartbeat_interval_ms < o->election_timeout_ms);
	BATON_ASSERT(o->profile.proto_min.value <= o->profile.proto_max.value);
}

static bool options_valid(const struct baton_raft_options *o)
{
	return o->id != 0 && o->election_timeout_ms > 0 &&
	       o->heartbeat_interval_ms > 0 &&
	       o->heartbeat_interval_ms < o->election_timeout_ms &&
	       o->max_inflight_appends >= 1 &&
	       o->max_inflight_appends <= BATON__INFLIGHT_MAX &&
	       o->max_entries_per_append >= 1 &&
	       o->max_entries_per_append <= BATON__BATCH_MAX &&
	       o->max_bytes_per_append > 0 && o->snapshot_chunk_bytes > 0 &&
	       o->max_entry_bytes > 0 && o->promotion_rounds > 0 &&
	       o->max_uncommitted_entries > 0 &&
	       o->profile.proto_min.value <= o->profile.proto_max.value &&
	       o->profile.machine_max.value >= 1 &&
	       (o->machine_upgrade == BATON_UPGRADE_ALL ||
		o->machine_upgrade == BATON_UPGRADE_QUORUM ||
		o->machine_upgrade == BATON_UPGRADE_MANUAL) &&
	       (o->election_policy == BATON_ELECTION_VERSION_AWARE ||
		o->election_policy == BATON_ELECTION_ANY);
}

static bool state_empty(const struct baton_raft *r)
{
	return r->term == 0 && r->log.n == 0 && r->log.base == 0 &&
	       r->snap.index == 0;
}

int baton_raft_create(const struct baton_raft_options *o,
		      struct baton_raft **out)
{
	if (!options_valid(o))
		return BATON_EINVAL;
	struct baton_raft *r = calloc(1, sizeof *r);
	if (r == NULL)
		return BATON_ENOMEM;
	r->o = *o;
	/* Mix seed and id so that nodes given related seeds (seed + id, say)
	 * still draw different election timeouts. */
	r->rng = o->random_seed * 0x9e3779b97f4a7c15ull +
		 o->id * 0xbf58476d1ce4e5b9ull;
	r->role = BATON_FOLLOWER;
	baton__log_init(&r->log);
	baton_version_state_initial(&r->snap.versions);
	baton_version_state_initial(&r->versions);
	r->unstable_from = 1;
	baton__reset_election_timer(r);
	BATON_ASSERT(state_empty(r) && r->role == BATON_FOLLOWER);
	BATON_ASSERT(baton_version_state_valid(&r->versions));
	*out = r;
	return 0;
}

void baton_raft_destroy(struct baton_raft *r)
{
	if (r == NULL)
		return;
	baton__log_free(&r->log);
	free(r->snap_data);
	free(r->incoming_data);
	free(r->msgs.v);
	free(r->msgs_after.v);
	free(r->reads);
	free(r->read_results);
	free(r);
}

int baton_raft_restore(struct baton_raft *r, baton_term term,
		       baton_node_id vote,
		       const struct baton_snapshot_meta *snap,
		       const uint8_t *snap_data, size_t snap_len,
		       const struct baton_entry *entries, uint32_t n)
{
	if (!state_empty(r))
		return BATON_ESTATE;
	/* Version facts a snapshot cannot hold are a driver bug. */
	if (snap != NULL && (snap->config.n > BATON_MAX_MEMBERS ||
			     snap->versions_index > snap->index ||
			     !baton_version_state_valid(&snap->versions)))
		return BATON_EINVAL;
	if (snap != NULL) {
		r->snap_data = malloc(snap_len > 0 ? snap_len : 1);
		if (r->snap_data == NULL)
			return BATON_ENOMEM;
		if (snap_len > 0)
			memcpy(r->snap_data, snap_data, snap_len);
		r->snap_len = snap_len;
		r->snap = *snap;
		baton__log_reset(&r->log, snap->index, snap->term);
		r->config = snap->config;
		r->config_index = snap->config_index;
		r->versions = snap->versions;
		r->versions_index = snap->versions_index;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct baton_entry *e = &entries[i];
		if (e->index <= r->log.base)
			continue; /* covered by the snapshot */
		if (e->index != baton__log_last_index(&r->log) + 1 ||
		    e->term < baton__log_last_term(&r->log))
			goto corrupt;
		if (baton__log_append(&r->log, e->term, e->type, e->buf,
				      e->len) != 0) {
			baton__log_free(&r->log);
			return BATON_ENOMEM;
		}
		if (e->type == BATON_ENTRY_CONFIG)
			baton__config_appended(r, e);
		else if (e->type == BATON_ENTRY_VERSION)
			baton__versions_appended(r, e);
	}
	r->term = term > baton__log_last_term(&r->log)
			  ? term
			  : baton__log_last_term(&r->log);
	r->vote = r->term == term ? vote : 0;
	BATON_ASSERT(r->term >= baton__log_last_term(&r->log));
	r->commit_index = r->log.base;
	r->applied_index = r->log.base;
	r->persisted_index = baton__log_last_index(&r->log);
	r->unstable_from = r->persisted_index + 1;
	/* A snapshot of a machine version this release lacks (written by a
	 * newer one before a downgrade) is kept, never applied. */
	if (snap != NULL && snap->index > 0 &&
	    !baton__machine_ok(r, snap->versions.machine))
		baton__stall_needs(r, snap->index, snap->versions.machine);
	/* A floor above our release, from the snapshot or the entries:
	 * hold (future data). */
	baton__floor_check(r);
	baton__assert_invariants(r);
	return 0;
corrupt:
	baton__log_reset(&r->log, 0, 0);
	return BATON_ECORRUPT;
}

int baton_raft_bootstrap(struct baton_raft *r, const struct baton_config *c)
{
	if (!state_empty(r))
		return BATON_ESTATE;
	if (c->n == 0 || c->n > BATON_MAX_MEMBERS)
		return BATON_EINVAL;
	uint8_t buf[2 + 9 * BATON_MAX_MEMBERS];
	size_t len;
	int rv = baton_config_encode(c, buf, sizeof buf, &len);
	if (rv != 0)
		return rv;
	rv = baton__log_append(&r->log, 1, BATON_ENTRY_CONFIG, buf,
			       (uint32_t)len);
	if (rv != 0)
		return rv;
	baton__config_appended(r, baton__log_get(&r->log, 1));
	r->term = 1;
	r->hs_dirty = true;
	BATON_ASSERT(r->config_index == 1 && r->config.n == c->n);
	baton__assert_invariants(r);
	return 0;
}

/* ---- small shared helpers --------------------------------------------- */

uint64_t baton__random(struct baton_raft *r)
{
	/* splitmix64: the seed comes from the driver, so runs replay. */
	uint64_t z = (r->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

bool baton__is_voter(const struct baton_raft *r, baton_node_id id)
{
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	const struct baton_member *m = baton_config_find(&r->config, id);
	BATON_ASSERT(m == NULL || m->role == BATON_VOTER ||
		     m->role == BATON_LEARNER);
	return m != NULL && m->role == BATON_VOTER;
}

bool baton__is_member(const struct baton_raft *r, baton_node_id id)
{
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	return baton_config_find(&r->config, id) != NULL;
}

uint32_t baton__voter_count(const struct baton_raft *r)
{
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->config.n; i++)
		n += r->config.members[i].role == BATON_VOTER;
	BATON_ASSERT(n <= r->config.n);
	return n;
}

bool baton__term_at(const struct baton_raft *r, baton_index i, baton_term *term)
{
	if (i == 0) {
		*term = 0;
		return true;
	}
	if (i == r->snap.index && i != 0) {
		*term = r->snap.term;
		BATON_ASSERT(r->snap.term <= r->term);
		return true;
	}
	bool known = baton__log_term(&r->log, i, term);
	BATON_ASSERT(!known || *term <= r->term); /* terms only grow */
	return known;
}

baton_index baton__last_index(const struct baton_raft *r)
{
	baton_index last = baton__log_last_index(&r->log);
	BATON_ASSERT(last >= r->log.base);
	return last;
}

baton_term baton__last_term(const struct baton_raft *r)
{
	baton_term t = baton__log_last_term(&r->log);
	BATON_ASSERT(t >= r->log.base_term);
	return t;
}

static struct baton_msg *msgs_push(struct baton_raft *r, struct baton__msgs *q,
				   uint32_t type, baton_node_id to)
{
	BATON_ASSERT(q->n <= q->cap);
	BATON_ASSERT(to != r->o.id); /* a node never messages itself */
	BATON_ASSERT(type >= BATON_MSG_VOTE && type <= BATON_MSG_INFO_RESULT);
	if (q->n == q->cap) {
		uint32_t cap = q->cap == 0 ? 16 : q->cap * 2;
		struct baton_msg *v = realloc(q->v, cap * sizeof *v);
		if (v == NULL) {
			r->alloc_failed = true;
			return NULL;
		}
		q->v = v;
		q->cap = cap;
	}
	struct baton_msg *m = &q->v[q->n++];
	memset(m, 0, sizeof *m);
	m->type = type;
	m->term = r->term;
	m->from = r->o.id;
	m->to = to;
	return m;
}

struct baton_msg *baton__send(struct baton_raft *r, uint32_t type,
			      baton_node_id to)
{
	return msgs_push(r, &r->msgs, type, to);
}

struct baton_msg *baton__send_after_persist(struct baton_raft *r, uint32_t type,
					    baton_node_id to)
{
	return msgs_push(r, &r->msgs_after, type, to);
}

void baton__read_done(struct baton_raft *r, uint64_t request_id,
		      baton_index read_index, int status)
{
	BATON_ASSERT(r->n_read_results <= r->read_results_cap);
	if (r->n_read_results == r->read_results_cap) {
		uint32_t cap =
			r->read_results_cap == 0 ? 16 : r->read_results_cap * 2;
		struct baton_read_result *v =
			realloc(r->read_results, cap * sizeof *v);
		if (v == NULL) {
			r->alloc_failed = true;
			return;
		}
		r->read_results = v;
		r->read_results_cap = cap;
	}
	r->read_results[r->n_read_results++] = (struct baton_read_result){
		.request_id = request_id,
		.read_index = read_index,
		.status = status,
	};
}

/* ---- events ------------------------------------------------------------ */

static void recv_msg(struct baton_raft *r, const struct baton_msg *m)
{
	baton_term term_before = r->term;
	if (m->from == 0 || m->from == r->o.id)
		return;
	if (m->term > r->term) {
		bool vote_req = m->type == BATON_MSG_VOTE;
		bool pre_vote_grant = m->type == BATON_MSG_VOTE_RESULT &&
				      m->u.vote_result.pre_vote &&
				      m->u.vote_result.granted;
		if (vote_req && m->u.vote.pre_vote) {
			/* A pre-vote never changes our term. */
		} else if (vote_req && baton__in_lease(r) &&
			   !m->u.vote.leadership_transfer) {
			/* We heard from a live leader within the election
			 * timeout: a disruptive candidate is ignored. */
			return;
		} else if (!pre_vote_grant) {
			bool from_leader = m->type == BATON_MSG_APPEND ||
					   m->type == BATON_MSG_SNAPSHOT ||
					   m->type == BATON_MSG_TIMEOUT_NOW;
			baton__become_follower(r, m->term,
					       from_leader ? m->from : 0);
		}
	} else if (m->term < r->term) {
		/* Tell a stale leader about the newer term so it steps down;
		 * answer a stale pre-vote with a refusal. Drop the rest. */
		if (m->type == BATON_MSG_APPEND ||
		    m->type == BATON_MSG_SNAPSHOT) {
			struct baton_msg *reply = baton__send(
				r, BATON_MSG_APPEND_RESULT, m->from);
			if (reply != NULL)
				reply->u.append_result.success = false;
			return;
		}
		if (m->type != BATON_MSG_VOTE || !m->u.vote.pre_vote)
			return;
	}
	/* From here on a message is of our term, but for votes. */
	BATON_ASSERT(m->type == BATON_MSG_VOTE ||
		     m->type == BATON_MSG_VOTE_RESULT || m->term == r->term);
	switch (m->type) {
	case BATON_MSG_VOTE:
		baton__recv_vote(r, m);
		break;
	case BATON_MSG_VOTE_RESULT:
		baton__recv_vote_result(r, m);
		break;
	case BATON_MSG_APPEND:
		baton__recv_append(r, m);
		break;
	case BATON_MSG_APPEND_RESULT:
		baton__recv_append_result(r, m);
		break;
	case BATON_MSG_SNAPSHOT:
		baton__recv_snapshot(r, m);
		break;
	case BATON_MSG_SNAPSHOT_RESULT:
		baton__recv_snapshot_result(r, m);
		break;
	case BATON_MSG_TIMEOUT_NOW:
		baton__recv_timeout_now(r, m);
		break;
	case BATON_MSG_READ_INDEX:
		baton__recv_read_index(r, m);
		break;
	case BATON_MSG_READ_INDEX_RESULT:
		baton__recv_read_index_result(r, m);
		break;
	case BATON_MSG_INFO:
		baton__recv_info(r, m);
		break;
	case BATON_MSG_INFO_RESULT:
		baton__recv_info_result(r, m);
		break;
	default:
		break; /* unknown types are dropped */
	}
	BATON_ASSERT(r->term >= term_before); /* terms only grow */
}

static void persisted(struct baton_raft *r, baton_index index, baton_term term)
{
	baton_term t;
	/* A report for entries since replaced by a truncation no longer
	 * matches the log and says nothing: ignore it. */
	if (index <= r->persisted_index || !baton__term_at(r, index, &t) ||
	    t != term)
		return;
	if (index > baton__last_index(r))
		return;
	r->persisted_index = index;
	if (r->role == BATON_LEADER)
		baton__maybe_commit(r);
	BATON_ASSERT(r->persisted_index <= baton__last_index(r));
}

static int propose(struct baton_raft *r, struct baton_event *ev)
{
	if (r->role != BATON_LEADER)
		return BATON_ENOTLEADER;
	if (r->transfer_target != 0)
		return BATON_EBUSY;
	uint32_t n = ev->u.propose.n;
	if (n == 0 || n > BATON__BATCH_MAX)
		return n == 0 ? BATON_EINVAL : BATON_ETOOBIG;
	for (uint32_t i = 0; i < n; i++)
		if (ev->u.propose.bufs[i].len > r->o.max_entry_bytes)
			return BATON_ETOOBIG;
	baton_index first = baton__last_index(r) + 1;
	if (first + n - 1 - r->commit_index > r->o.max_uncommitted_entries)
		return BATON_EOVERLOADED;
	BATON_ASSERT(r->leader_id == r->o.id);
	for (uint32_t i = 0; i < n; i++) {
		const struct baton_buffer *b = &ev->u.propose.bufs[i];
		int rv = baton__leader_append(r, BATON_ENTRY_COMMAND, b->base,
					      (uint32_t)b->len);
		if (rv != 0) {
			/* All or nothing: none of the batch was sent yet. */
			baton__log_truncate(&r->log, first);
			return rv;
		}
	}
	ev->u.propose.first_index_out = first;
	BATON_ASSERT(baton__last_index(r) == first + n - 1);
	baton__broadcast_append(r);
	return 0;
}

static int dispatch(struct baton_raft *r, struct baton_event *ev)
{
	BATON_ASSERT(r->msgs.n == 0 && r->msgs_after.n == 0);
	switch (ev->type) {
	case BATON_EVENT_TICK:
		if (r->role == BATON_LEADER)
			baton__leader_tick(r);
		else
			baton__election_tick(r);
		return 0;
	case BATON_EVENT_RECEIVE:
		if (ev->u.receive.msg == NULL)
			return BATON_EINVAL;
		recv_msg(r, ev->u.receive.msg);
		return 0;
	case BATON_EVENT_PERSISTED:
		persisted(r, ev->u.persisted.index, ev->u.persisted.term);
		return 0;
	case BATON_EVENT_PROPOSE:
		return propose(r, ev);
	case BATON_EVENT_SNAPSHOT_TAKEN:
		return baton__snapshot_taken(r, ev->u.snapshot_taken.index,
					     ev->u.snapshot_taken.data,
					     ev->u.snapshot_taken.len);
	case BATON_EVENT_READ:
		return baton__read(r, ev->u.read.request_id);
	case BATON_EVENT_TRANSFER:
		return baton__transfer(r, ev->u.transfer.target);
	case BATON_EVENT_ADD_LEARNER:
		return baton__add_learner(r, ev->u.member.id);
	case BATON_EVENT_PROMOTE:
		return baton__promote(r, ev->u.member.id);
	case BATON_EVENT_REMOVE:
		return baton__remove(r, ev->u.member.id);
	case BATON_EVENT_VERSIONS:
		return baton__append_versions(r, ev->u.versions.state);
	case BATON_EVENT_APPLY_STOPPED:
		if (ev->u.apply_stopped.index == 0)
			return BATON_EINVAL;
		baton__stall(r, ev->u.apply_stopped.index);
		return 0;
	case BATON_EVENT_DOWNGRADE:
		return baton__downgrade(r, ev->u.downgrade.op,
					ev->u.downgrade.target);
	case BATON_EVENT_PEER_CLOSED:
		if (ev->u.peer_closed.id == 0)
			return BATON_EINVAL;
		baton__peer_closed(r, ev->u.peer_closed.id);
		return 0;
	case BATON_EVENT_CLOCK:
		baton__clock_barred(r, ev->u.clock.barred);
		return 0;
	default:
		return BATON_EINVAL;
	}
}

/* Point each outgoing AppendEntries at its entries. Done last, because the
 * log array may move while a step appends to it. */
static void resolve_entries(struct baton_raft *r, struct baton__msgs *q)
{
	uint32_t kept = 0;
	BATON_ASSERT(q->n <= q->cap);
	for (uint32_t i = 0; i < q->n; i++) {
		struct baton_msg *m = &q->v[i];
		if (m->type == BATON_MSG_APPEND && m->u.append.n_entries > 0) {
			baton_index first = m->u.append.prev_index + 1;
			baton_index last = first + m->u.append.n_entries - 1;
			if (baton__log_get(&r->log, first) == NULL ||
			    last > baton__last_index(r))
				continue; /* compacted meanwhile: drop it */
			m->u.append.entries = baton__log_get(&r->log, first);
		}
		q->v[kept++] = *m;
	}
	BATON_ASSERT(kept <= q->n);
	q->n = kept;
}

static void fill_persistence(struct baton_raft *r, struct baton_update *out)
{
	BATON_ASSERT(r->truncate_from == 0 || r->truncate_from > r->log.base);
	out->hard_state_changed = r->hs_dirty;
	out->hs_term = r->term;
	out->hs_vote = r->vote;
	if (r->snapshot_installed) {
		out->snapshot = &r->snap;
		out->snapshot_data = r->snap_data;
		out->snapshot_len = r->snap_len;
	}
	out->truncate_from = r->truncate_from;
	baton_index last = baton__last_index(r);
	if (r->unstable_from <= r->log.base)
		r->unstable_from = r->log.base + 1;
	if (r->unstable_from <= last) {
		out->entries = baton__log_get(&r->log, r->unstable_from);
		out->n_entries = (uint32_t)(last - r->unstable_from + 1);
		r->unstable_from = last + 1;
	}
	out->compact_upto = r->compact_upto;
	out->persist_needed = out->hard_state_changed ||
			      r->snapshot_installed ||
			      out->truncate_from != 0 || out->n_entries > 0;
	out->persist_index = last;
	out->persist_term = baton__last_term(r);
	BATON_ASSERT(r->unstable_from == last + 1);
	r->hs_dirty = false;
	r->snapshot_installed = false;
	r->truncate_from = 0;
	r->compact_upto = 0;
}

static void fill_apply(struct baton_raft *r, struct baton_update *out)
{
	baton_index hi = r->commit_index < r->persisted_index
				 ? r->commit_index
				 : r->persisted_index;
	/* Nothing at or after what this node cannot interpret. */
	if (r->stalled_index != 0 && hi >= r->stalled_index)
		hi = r->stalled_index - 1;
	if (hi <= r->applied_index)
		return;
	baton_index lo = r->applied_index + 1;
	out->apply = baton__log_get(&r->log, lo);
	BATON_ASSERT(out->apply != NULL && hi <= baton__last_index(r));
	BATON_ASSERT(out->apply->index == lo && hi <= r->commit_index);
	out->n_apply = (uint32_t)(hi - lo + 1);
	r->applied_index = hi;
	BATON_ASSERT(r->stalled_index == 0 ||
		     r->applied_index < r->stalled_index);
}

static void finalize(struct baton_raft *r, struct baton_update *out)
{
	memset(out, 0, sizeof *out);
	baton__reads_flush_round(r);
	fill_persistence(r, out);
	fill_apply(r, out);
	resolve_entries(r, &r->msgs);
	resolve_entries(r, &r->msgs_after);
	out->role = r->role;
	out->term = r->term;
	out->leader_id = r->leader_id;
	out->commit_index = r->commit_index;
	out->n_msgs = r->msgs.n;
	out->msgs = r->msgs.v;
	out->n_msgs_after_persist = r->msgs_after.n;
	out->msgs_after_persist = r->msgs_after.v;
	out->n_reads = r->n_read_results;
	out->reads = r->read_results;
	out->promotion_failed = r->promotion_failed;
	r->promotion_failed = 0;
	/* What the driver is handed is consistent with the state. */
	BATON_ASSERT(out->n_apply == 0 ||
		     out->apply[out->n_apply - 1].index == r->applied_index);
	BATON_ASSERT(!out->persist_needed ||
		     out->persist_index == baton__last_index(r));
	baton__assert_invariants(r);
}

int baton_raft_step(struct baton_raft *r, uint64_t now_ms,
		    struct baton_event *ev, struct baton_update *out)
{
	BATON_ASSERT(r != NULL && ev != NULL && out != NULL);
	baton_term term_before = r->term;
	if (now_ms > r->now_ms)
		r->now_ms = now_ms;
	r->msgs.n = 0;
	r->msgs_after.n = 0;
	r->n_read_results = 0;
	r->alloc_failed = false;
	/* A bounded share of the last compaction's freeing per step. */
	baton__log_collect(&r->log, BATON__LOG_COLLECT_PER_STEP);
	int rv = dispatch(r, ev);
	/* Any leader known again (heard from, or ourselves) ends the loss
	 * a closed connection told us of. */
	if (r->leader_id != 0) {
		r->leader_closed = 0;
		r->fast_campaigns = 0;
	}
	finalize(r, out);
	if (rv == 0 && r->alloc_failed)
		rv = BATON_ENOMEM;
	BATON_ASSERT(r->term >= term_before); /* terms only grow */
	BATON_ASSERT(rv <= 0);
	return rv;
}

/* ---- introspection ----------------------------------------------------- */

void baton_raft_status(const struct baton_raft *r,
		       struct baton_raft_status *out)
{
	memset(out, 0, sizeof *out);
	out->id = r->o.id;
	out->role = r->role;
	out->term = r->term;
	out->vote = r->vote;
	out->leader_id = r->leader_id;
	out->commit_index = r->commit_index;
	out->applied_index = r->applied_index;
	out->persisted_index = r->persisted_index;
	out->first_index = r->log.base + 1;
	out->last_index = baton__last_index(r);
	out->last_term = baton__last_term(r);
	out->snapshot_index = r->snap.index;
	out->snapshot_term = r->snap.term;
	out->config = r->config;
	out->config_index = r->config_index;
	out->transfer_target = r->transfer_target;
	out->versions = r->versions;
	out->versions_index = r->versions_index;
	out->stalled_index = r->stalled_index;
	out->clock_barred = r->clock_barred;
	out->needs_machine = r->needs_machine;
	out->needs_release = r->needs_release;
	out->eligibility = baton__eligibility(r, NULL, 0);
	BATON_ASSERT(out->commit_index <= out->last_index);
	BATON_ASSERT(out->applied_index <= out->commit_index);
}

struct baton_machine_version
baton_raft_machine_version(const struct baton_raft *r)
{
	BATON_ASSERT(r != NULL);
	BATON_ASSERT(r->versions.machine.value >= 1);
	return r->versions.machine;
}

uint64_t baton_raft_log_bytes(const struct baton_raft *r)
{
	BATON_ASSERT(r != NULL);
	return r->log.bytes;
}

baton_index baton_raft_stalled_index(const struct baton_raft *r)
{
	BATON_ASSERT(r != NULL);
	BATON_ASSERT(r->stalled_index == 0 ||
		     r->applied_index < r->stalled_index);
	return r->stalled_index;
}

baton_index baton_raft_match_index(const struct baton_raft *r, baton_node_id id)
{
	if (r->role != BATON_LEADER)
		return 0;
	if (id == r->o.id)
		return r->persisted_index;
	BATON_ASSERT(r->n_progress <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < r->n_progress; i++)
		if (r->progress[i].id == id)
			return r->progress[i].match;
	return 0;
}

const struct baton_entry *baton_raft_entry(const struct baton_raft *r,
					   baton_index index)
{
	const struct baton_entry *e = baton__log_get(&r->log, index);
	BATON_ASSERT(e == NULL || e->index == index);
	return e;
}

bool baton_raft_term_at(const struct baton_raft *r, baton_index index,
			baton_term *term_out)
{
	return baton__term_at(r, index, term_out);
}
