/*
 * Linearizable reads through the read index (Raft dissertation, 6.4).
 *
 * The leader notes the index a read must see (its commit index, and at
 * least the no-op of its term, which covers every earlier leader's
 * commits), then proves it is still the leader with a heartbeat round
 * acknowledged by a quorum. Only then is the read released; the driver
 * serves it once its state machine has applied that index. A follower
 * asks the leader for the index and serves the read locally.
 */
#include "core.h"

#include <string.h>

static int add_pending(struct baton_raft *r, baton_node_id from, uint64_t id)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->n_reads <= r->reads_cap);
	if (r->n_reads == BATON__READS_MAX)
		return BATON_EBUSY;
	if (r->n_reads == r->reads_cap) {
		uint32_t cap = r->reads_cap == 0 ? 16 : r->reads_cap * 2;
		struct baton__pending_read *v =
			realloc(r->reads, cap * sizeof *v);
		if (v == NULL)
			return BATON_ENOMEM;
		r->reads = v;
		r->reads_cap = cap;
	}
	baton_index index = r->commit_index > r->leader_first_index
				    ? r->commit_index
				    : r->leader_first_index;
	r->reads[r->n_reads++] = (struct baton__pending_read){
		.from = from,
		.request_id = id,
		.read_index = index,
		.seq = r->heartbeat_seq + 1,
	};
	r->read_round_wanted = true;
	/* A read sees at least everything committed when it arrived. */
	BATON_ASSERT(index >= r->commit_index &&
		     index <= baton__last_index(r) + 1);
	return 0;
}

static void answer(struct baton_raft *r, const struct baton__pending_read *p,
		   int status)
{
	BATON_ASSERT(status <= 0);
	BATON_ASSERT(p->from != r->o.id);
	if (p->from == 0) {
		baton__read_done(r, p->request_id, p->read_index, status);
		return;
	}
	struct baton_msg *m =
		baton__send(r, BATON_MSG_READ_INDEX_RESULT, p->from);
	if (m == NULL)
		return;
	m->u.read_index_result.request_id = p->request_id;
	m->u.read_index_result.read_index = p->read_index;
	m->u.read_index_result.status = status;
}

int baton__read(struct baton_raft *r, uint64_t request_id)
{
	/* This node's state machine stopped before the entries a read
	 * would have to wait for: another node must serve it. */
	if (r->stalled_index != 0)
		return BATON_ESTALLED;
	if (r->role == BATON_LEADER) {
		int rv = add_pending(r, 0, request_id);
		if (rv == 0)
			baton__reads_check(r); /* a single voter answers now */
		return rv;
	}
	if (r->leader_id == 0 || r->role != BATON_FOLLOWER)
		return BATON_ENOLEADER;
	struct baton_msg *m =
		baton__send(r, BATON_MSG_READ_INDEX, r->leader_id);
	if (m == NULL)
		return BATON_ENOMEM;
	m->u.read_index.request_id = request_id;
	return 0;
}

void baton__recv_read_index(struct baton_raft *r, const struct baton_msg *m)
{
	BATON_ASSERT(m->type == BATON_MSG_READ_INDEX && m->term == r->term);
	struct baton__pending_read p = {
		.from = m->from,
		.request_id = m->u.read_index.request_id,
	};
	if (r->role != BATON_LEADER) {
		answer(r, &p, BATON_ENOTLEADER);
		return;
	}
	int rv = add_pending(r, m->from, p.request_id);
	if (rv != 0) {
		answer(r, &p, rv);
		return;
	}
	baton__reads_check(r);
}

void baton__recv_read_index_result(struct baton_raft *r,
				   const struct baton_msg *m)
{
	const struct baton_msg_read_index_result *res = &m->u.read_index_result;
	BATON_ASSERT(m->type == BATON_MSG_READ_INDEX_RESULT);
	BATON_ASSERT(m->term == r->term);
	baton__read_done(r, res->request_id, res->read_index, res->status);
}

/* Has a quorum of voters acknowledged heartbeat round `seq`? */
static bool round_confirmed(const struct baton_raft *r, uint64_t seq)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	uint32_t acks = baton__is_voter(r, r->o.id) ? 1 : 0;
	for (uint32_t i = 0; i < r->n_progress; i++)
		if (r->progress[i].acked_seq >= seq &&
		    baton__is_voter(r, r->progress[i].id))
			acks++;
	BATON_ASSERT(acks <= baton__voter_count(r));
	return acks >= baton__voter_count(r) / 2 + 1;
}

void baton__reads_check(struct baton_raft *r)
{
	if (r->role != BATON_LEADER || r->n_reads == 0)
		return;
	/* Reads were queued in seq order: release the confirmed prefix. */
	uint32_t done = 0;
	BATON_ASSERT(r->n_reads <= r->reads_cap);
	while (done < r->n_reads && round_confirmed(r, r->reads[done].seq)) {
		answer(r, &r->reads[done], 0);
		done++;
	}
	memmove(r->reads, r->reads + done,
		(r->n_reads - done) * sizeof *r->reads);
	r->n_reads -= done;
	/* Rounds are confirmed in order: what is left waits on a later one. */
	BATON_ASSERT(r->n_reads == 0 || !round_confirmed(r, r->reads[0].seq));
}

void baton__reads_fail_all(struct baton_raft *r, int status)
{
	BATON_ASSERT(status < 0);
	BATON_ASSERT(r->n_reads <= r->reads_cap);
	for (uint32_t i = 0; i < r->n_reads; i++)
		answer(r, &r->reads[i], status);
	r->n_reads = 0;
	r->read_round_wanted = false;
}

void baton__reads_fail_local(struct baton_raft *r, int status)
{
	BATON_ASSERT(status < 0);
	uint32_t kept = 0;
	for (uint32_t i = 0; i < r->n_reads; i++) {
		if (r->reads[i].from == 0)
			answer(r, &r->reads[i], status);
		else
			r->reads[kept++] = r->reads[i];
	}
	BATON_ASSERT(kept <= r->n_reads);
	r->n_reads = kept;
}

/* Reads queued during this step share one heartbeat round. */
void baton__reads_flush_round(struct baton_raft *r)
{
	if (!r->read_round_wanted)
		return;
	r->read_round_wanted = false;
	if (r->role != BATON_LEADER)
		return;
	uint64_t seq = r->heartbeat_seq;
	r->heartbeat_seq++;
	baton__broadcast_heartbeat(r);
	baton__reads_check(r);
	BATON_ASSERT(r->heartbeat_seq == seq + 1 && r->role == BATON_LEADER);
}
