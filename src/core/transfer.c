/*
 * Leadership transfer (Raft dissertation, 3.10): the leader stops taking
 * proposals, brings the target's log up to date, then tells it to stand at
 * once with TimeoutNow. Voters let such a candidate through their leader
 * lease. The transfer is abandoned after one election timeout.
 */
#include "core.h"

static baton_node_id most_up_to_date(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	baton_node_id best = 0;
	baton_index best_match = 0;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		struct baton__progress *p = &r->progress[i];
		if (!baton__is_voter(r, p->id))
			continue;
		if (best == 0 || p->match > best_match) {
			best = p->id;
			best_match = p->match;
		}
	}
	BATON_ASSERT(best != r->o.id && best_match <= baton__last_index(r));
	return best;
}

static void send_timeout_now(struct baton_raft *r, baton_node_id to)
{
	BATON_ASSERT(r->role == BATON_LEADER && to == r->transfer_target);
	BATON_ASSERT(baton_raft_match_index(r, to) == baton__last_index(r));
	if (baton__send(r, BATON_MSG_TIMEOUT_NOW, to) != NULL)
		r->timeout_now_sent = true;
}

int baton__transfer(struct baton_raft *r, baton_node_id target)
{
	if (r->role != BATON_LEADER)
		return BATON_ENOTLEADER;
	if (r->transfer_target != 0)
		return BATON_EBUSY;
	if (target == 0)
		target = most_up_to_date(r);
	if (target == 0 || target == r->o.id)
		return BATON_EINVAL;
	struct baton__progress *p = baton__progress_find(r, target);
	if (p == NULL)
		return BATON_ENOTFOUND;
	if (!baton__is_voter(r, target))
		return BATON_EINVAL;
	BATON_ASSERT(p->id == target && target != r->o.id);
	r->transfer_target = target;
	r->transfer_deadline_ms = r->now_ms + r->o.election_timeout_ms;
	r->timeout_now_sent = false;
	baton__transfer_check(r, p);
	if (!r->timeout_now_sent)
		baton__send_append(r, p);
	BATON_ASSERT(r->transfer_target == target && r->role == BATON_LEADER);
	return 0;
}

void baton__transfer_check(struct baton_raft *r, struct baton__progress *p)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(p->match <= baton__last_index(r));
	if (r->transfer_target != p->id || r->timeout_now_sent)
		return;
	if (p->match == baton__last_index(r))
		send_timeout_now(r, p->id);
}

void baton__transfer_tick(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->transfer_target == 0 ||
		     r->transfer_deadline_ms <=
			     r->now_ms + r->o.election_timeout_ms);
	if (r->transfer_target != 0 && r->now_ms >= r->transfer_deadline_ms) {
		r->transfer_target = 0;
		r->timeout_now_sent = false;
	}
}

void baton__recv_timeout_now(struct baton_raft *r, const struct baton_msg *m)
{
	BATON_ASSERT(m->type == BATON_MSG_TIMEOUT_NOW && m->term == r->term);
	if (r->role == BATON_LEADER || !baton__is_voter(r, r->o.id) ||
	    r->stalled_index != 0 || r->clock_barred)
		return;
	baton__campaign(r, false, true);
}
