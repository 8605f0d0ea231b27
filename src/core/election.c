/*
 * Roles, election timers and votes: pre-vote (a candidate first asks
 * whether it could win, without disturbing anyone's term) and leader
 * stickiness (a node that heard from a leader within the election timeout
 * ignores candidates, unless a leadership transfer asks otherwise), and
 * fast failure detection (a follower whose leader's connection closed
 * stands within a heartbeat interval rather than an election timeout).
 */
#include "core.h"

#include <string.h>

void baton__reset_election_timer(struct baton_raft *r)
{
	uint64_t t = r->o.election_timeout_ms;
	BATON_ASSERT(t > 0);
	r->election_deadline_ms = r->now_ms + t + baton__random(r) % t;
	BATON_ASSERT(r->election_deadline_ms >= r->now_ms + t &&
		     r->election_deadline_ms < r->now_ms + 2 * t);
}

bool baton__in_lease(const struct baton_raft *r)
{
	BATON_ASSERT(r->leader_contact_ms <= r->now_ms);
	if (r->role == BATON_LEADER)
		return true;
	return r->o.check_quorum && r->leader_id != 0 &&
	       r->now_ms < r->leader_contact_ms + r->o.election_timeout_ms;
}

/* ---- fast failure detection ----------------------------------------------
 * A killed process's sockets are closed by its kernel, so its peers learn
 * of the death at once; waiting out an election timeout then only costs
 * time. A follower told its leader's connection closed forgets the leader
 * (no lease left) and stands soon. Safety rests on pre-vote: the leader,
 * if it lives, and every follower still in lease refuse, so a spurious
 * close deposes nobody. The delay is random within a heartbeat interval,
 * so that the followers, which learn of one death together, seldom split
 * the vote. */

/* Campaigns after a close that retry on a short timer, [1, 2) heartbeat
 * intervals rather than election timeouts: enough for the answers to come
 * back, and random, so a vote split between followers that stood together
 * is settled within a few heartbeats. Then the election timeout again. */
#define FAST_CAMPAIGNS_MAX 3u

/* Whether this node may stand now, as election_tick() will judge at its
 * deadline: a voter, not stalled, not deferring under rule 2. */
static bool may_stand_soon(const struct baton_raft *r)
{
	BATON_ASSERT(r->role != BATON_LEADER);
	BATON_ASSERT(r->leader_id == 0);
	return r->stalled_index == 0 && !r->clock_barred &&
	       baton__eligibility(r, NULL, 0) == BATON_ELIGIBLE;
}

/* Bring the election deadline in to a random point within a heartbeat
 * interval from now (never later than it was). */
static void stand_soon(struct baton_raft *r)
{
	BATON_ASSERT(r->o.heartbeat_interval_ms > 0);
	BATON_ASSERT(r->leader_closed != 0 && r->leader_id == 0);
	uint64_t at = r->now_ms + baton__random(r) % r->o.heartbeat_interval_ms;
	if (at < r->election_deadline_ms)
		r->election_deadline_ms = at;
	BATON_ASSERT(r->election_deadline_ms <
		     r->now_ms + r->o.heartbeat_interval_ms);
}

/* After a campaign began: a node that lost its leader to a close retries
 * on the short timer, a few times. */
static void fast_campaign_timer(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_PRE_CANDIDATE ||
		     r->role == BATON_CANDIDATE);
	BATON_ASSERT(r->fast_campaigns <= FAST_CAMPAIGNS_MAX);
	if (r->leader_closed == 0 || r->fast_campaigns == FAST_CAMPAIGNS_MAX)
		return;
	r->fast_campaigns++;
	uint64_t hb = r->o.heartbeat_interval_ms;
	r->election_deadline_ms = r->now_ms + hb + baton__random(r) % hb;
}

void baton__peer_closed(struct baton_raft *r, baton_node_id id)
{
	BATON_ASSERT(id != 0);
	BATON_ASSERT(r->leader_closed == 0 || r->leader_id == 0);
	/* Without pre-vote or leases a spurious close would depose a live
	 * leader: then only the election timeout counts. */
	if (!r->o.pre_vote || !r->o.check_quorum)
		return;
	if (r->role != BATON_FOLLOWER || r->leader_id != id || id == r->o.id)
		return;
	r->leader_id = 0;
	r->leader_closed = id;
	r->fast_campaigns = 0;
	if (may_stand_soon(r))
		stand_soon(r);
	BATON_ASSERT(!baton__in_lease(r));
}

/* A voter that lost its leader to a close refused a pre-vote because its
 * own log is ahead: the candidate has no lease either, so this node's own
 * pre-vote, refused earlier by a voter then still in lease, may win now. */
static void stand_after_refusal(struct baton_raft *r)
{
	BATON_ASSERT(r->role != BATON_LEADER);
	BATON_ASSERT(r->leader_closed == 0 || r->leader_id == 0);
	if (r->leader_closed == 0 || r->role == BATON_CANDIDATE ||
	    !may_stand_soon(r))
		return;
	stand_soon(r);
}

static void leave_leadership(struct baton_raft *r)
{
	if (r->role != BATON_LEADER)
		return;
	BATON_ASSERT(r->leader_id == r->o.id);
	baton__reads_fail_all(r, BATON_ELEADERCHANGED);
	r->transfer_target = 0;
	r->timeout_now_sent = false;
	if (r->promotee != 0)
		r->promotion_failed = r->promotee;
	r->promotee = 0;
	r->n_progress = 0;
	r->n_live = 0;
	BATON_ASSERT(r->n_reads == 0);
}

void baton__become_follower(struct baton_raft *r, baton_term term,
			    baton_node_id leader)
{
	BATON_ASSERT(term >= r->term);
	leave_leadership(r);
	if (term > r->term) {
		r->term = term;
		r->vote = 0;
		r->hs_dirty = true;
	}
	r->role = BATON_FOLLOWER;
	r->leader_id = leader;
	if (leader != 0)
		r->leader_contact_ms = r->now_ms;
	baton__reset_election_timer(r);
	BATON_ASSERT(r->term == term && r->n_progress == 0);
	BATON_ASSERT(leader != r->o.id);
}

static void become_leader(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_CANDIDATE && r->vote == r->o.id);
	BATON_ASSERT(r->stalled_index == 0);
	r->role = BATON_LEADER;
	r->leader_id = r->o.id;
	r->transfer_target = 0;
	r->promotee = 0;
	r->handover_tried = false;
	baton__progress_reset(r);
	r->heartbeat_deadline_ms = r->now_ms + r->o.heartbeat_interval_ms;
	r->quorum_check_deadline_ms = r->now_ms + r->o.election_timeout_ms;
	baton__upgrade_start(r);
	/* An entry of our term lets us commit everything before it (the
	 * Raft dissertation, 3.6.2's no-op) and anchors read-index
	 * requests. It is a version entry carrying the version state as we
	 * see it now (DESIGN.md, "Machine upgrade"), so every term states
	 * the effective machine version it works under. */
	struct baton_version_state v;
	baton__upgrade_desired(r, &v);
	if (baton__versions_entry(r, &v) == 0)
		r->leader_first_index = baton__last_index(r);
	else
		r->leader_first_index = baton__last_index(r) + 1;
	BATON_ASSERT(r->leader_first_index > r->commit_index);
	baton__broadcast_append(r);
}

static uint32_t quorum(const struct baton_raft *r)
{
	uint32_t n = baton__voter_count(r);
	BATON_ASSERT(n <= BATON_MAX_MEMBERS);
	return n / 2 + 1;
}

/* Tally the answers of this campaign and move on if it is decided. */
static void tally(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_PRE_CANDIDATE ||
		     r->role == BATON_CANDIDATE);
	BATON_ASSERT(r->n_answered >= 1); /* our own answer comes first */
	uint32_t granted = 0, refused = 0;
	for (uint32_t i = 0; i < r->n_answered; i++) {
		if (!baton__is_voter(r, r->voters_answered[i]))
			continue;
		if (r->vote_granted[i])
			granted++;
		else
			refused++;
	}
	BATON_ASSERT(granted + refused <= r->n_answered);
	if (granted >= quorum(r)) {
		if (r->role == BATON_PRE_CANDIDATE)
			baton__campaign(r, false, false);
		else
			become_leader(r);
	} else if (refused >= quorum(r)) {
		baton__become_follower(r, r->term, 0);
	}
}

static void record_answer(struct baton_raft *r, baton_node_id id, bool granted)
{
	BATON_ASSERT(id != 0);
	BATON_ASSERT(r->n_answered <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < r->n_answered; i++)
		if (r->voters_answered[i] == id)
			return; /* duplicates count once */
	if (r->n_answered == BATON_MAX_MEMBERS)
		return;
	r->voters_answered[r->n_answered] = id;
	r->vote_granted[r->n_answered] = granted;
	r->n_answered++;
}

void baton__campaign(struct baton_raft *r, bool pre_vote, bool transfer)
{
	BATON_ASSERT(r->role != BATON_LEADER);
	BATON_ASSERT(baton__is_voter(r, r->o.id));
	BATON_ASSERT(r->stalled_index == 0); /* it could not apply as leader */
	r->n_answered = 0;
	r->leader_id = 0;
	baton_term vote_term;
	if (pre_vote) {
		r->role = BATON_PRE_CANDIDATE;
		vote_term = r->term + 1;
	} else {
		r->role = BATON_CANDIDATE;
		r->term++;
		r->vote = r->o.id;
		r->hs_dirty = true;
		vote_term = r->term;
	}
	baton__reset_election_timer(r);
	fast_campaign_timer(r);
	BATON_ASSERT(vote_term > baton__last_term(r));
	BATON_ASSERT(r->term >= baton__last_term(r));
	record_answer(r, r->o.id, true);
	BATON_ASSERT(r->n_answered == 1 && r->vote_granted[0]);
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_member *mb = &r->config.members[i];
		if (mb->id == r->o.id || mb->role != BATON_VOTER)
			continue;
		/* A real vote request waits for our own vote to be durable;
		 * a pre-vote changes nothing and goes at once. */
		struct baton_msg *m =
			pre_vote ? baton__send(r, BATON_MSG_VOTE, mb->id)
				 : baton__send_after_persist(r, BATON_MSG_VOTE,
							     mb->id);
		if (m == NULL)
			continue;
		m->term = vote_term;
		m->u.vote.last_log_index = baton__last_index(r);
		m->u.vote.last_log_term = baton__last_term(r);
		m->u.vote.pre_vote = pre_vote;
		m->u.vote.leadership_transfer = transfer;
		m->u.vote.candidate = r->o.profile;
	}
	tally(r);
}

void baton__election_tick(struct baton_raft *r)
{
	BATON_ASSERT(r->role != BATON_LEADER);
	BATON_ASSERT(r->stalled_index == 0 || r->role == BATON_FOLLOWER);
	if (r->now_ms < r->election_deadline_ms)
		return;
	if (!baton__is_voter(r, r->o.id) || r->stalled_index != 0 ||
	    r->clock_barred || baton__candidacy_deferred(r)) {
		/* Learners and removed nodes never stand, nor does a node
		 * that stopped applying (it could not serve as leader; the
		 * floor hold is one such stop: rule 1), nor one whose clock
		 * the others disagree with (it would step down again), and
		 * a node of a minority release lets a few timeouts pass
		 * first (rule 2). */
		baton__reset_election_timer(r);
		return;
	}
	baton__campaign(r, r->o.pre_vote, false);
}

static bool log_up_to_date(const struct baton_raft *r, baton_term last_term,
			   baton_index last_index)
{
	baton_term my_term = baton__last_term(r);
	BATON_ASSERT(my_term <= r->term);
	if (last_term != my_term)
		return last_term > my_term;
	return last_index >= baton__last_index(r);
}

void baton__recv_vote(struct baton_raft *r, const struct baton_msg *m)
{
	const struct baton_msg_vote *v = &m->u.vote;
	BATON_ASSERT(m->type == BATON_MSG_VOTE);
	/* recv_msg() lets through an older term only for a pre-vote. */
	BATON_ASSERT(m->term >= r->term || v->pre_vote);
	bool up_to_date =
		log_up_to_date(r, v->last_log_term, v->last_log_index) &&
		baton__vote_allowed(r, m);
	bool granted;
	if (v->pre_vote) {
		/* Would we vote in the candidate's next term? */
		granted = m->term > r->term && up_to_date &&
			  (!baton__in_lease(r) || v->leadership_transfer);
		if (!granted && r->role != BATON_LEADER &&
		    !log_up_to_date(r, v->last_log_term, v->last_log_index))
			stand_after_refusal(r);
		struct baton_msg *reply =
			baton__send(r, BATON_MSG_VOTE_RESULT, m->from);
		if (reply == NULL)
			return;
		reply->term = granted ? m->term : r->term;
		reply->u.vote_result.pre_vote = true;
		reply->u.vote_result.granted = granted;
		return;
	}
	/* recv_msg() has already moved us to the candidate's term if it
	 * was newer; an older term never gets here. */
	granted = m->term == r->term && r->role != BATON_LEADER &&
		  (r->vote == 0 || r->vote == m->from) && up_to_date;
	if (granted && r->vote != m->from) {
		r->vote = m->from;
		r->hs_dirty = true;
	}
	if (granted)
		baton__reset_election_timer(r);
	BATON_ASSERT(!granted || r->vote == m->from);
	/* The grant must be durable before the candidate can count it. */
	struct baton_msg *reply =
		baton__send_after_persist(r, BATON_MSG_VOTE_RESULT, m->from);
	if (reply == NULL)
		return;
	reply->u.vote_result.pre_vote = false;
	reply->u.vote_result.granted = granted;
}

void baton__recv_vote_result(struct baton_raft *r, const struct baton_msg *m)
{
	const struct baton_msg_vote_result *v = &m->u.vote_result;
	BATON_ASSERT(m->type == BATON_MSG_VOTE_RESULT);
	/* A newer term than ours reaches here only as a pre-vote grant. */
	BATON_ASSERT(m->term <= r->term || (v->pre_vote && v->granted));
	if (v->pre_vote) {
		if (r->role != BATON_PRE_CANDIDATE)
			return;
		/* A grant carries our next term; a refusal the voter's. */
		if (v->granted && m->term != r->term + 1)
			return;
	} else if (r->role != BATON_CANDIDATE || m->term != r->term) {
		return;
	}
	record_answer(r, m->from, v->granted);
	tally(r);
}
