/*
 * Leader eligibility (DESIGN.md, after Halon's rolling-updates design):
 * who may stand for election and be voted for, as a function of releases.
 *
 *   Rule 1 (hard): a node whose release is below the release floor of its
 *   log never stands, and voters refuse it. (Such a node also holds its
 *   applying: versions.c, "the floor hold".)
 *   Rule 2 (preference): a node whose release is not a majority release
 *   among the voters of the version table lets a few election timeouts
 *   pass without a leader before it stands, so a preferred node wins when
 *   one is reachable and someone wins when none is. A leader that stops
 *   meeting rule 2 hands leadership to a preferred voter.
 *
 * Under BATON_ELECTION_ANY none of this applies (plain Raft). Every
 * refusal is recorded with the rule and the versions, for the driver's log
 * (baton_raft_last_refusal).
 */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- refusals ------------------------------------------------------------ */

void baton__refuse(struct baton_raft *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(r->refusal, sizeof r->refusal, fmt, ap);
	va_end(ap);
	BATON_ASSERT(n > 0 && r->refusal[0] != '\0');
	r->refusal_seq++;
	BATON_ASSERT(r->refusal_seq > 0);
}

const char *baton_raft_last_refusal(const struct baton_raft *r,
				    uint64_t *seq_out)
{
	BATON_ASSERT(r->refusal_seq == 0 || r->refusal[0] != '\0');
	BATON_ASSERT(r->refusal_seq != 0 || r->refusal[0] == '\0');
	if (seq_out != NULL)
		*seq_out = r->refusal_seq;
	return r->refusal;
}

/* ---- rule 2 -------------------------------------------------------------- */

/* How many voters of c run `release`, by the table (self: `mine`). */
static uint32_t count_release(const struct baton_version_state *s,
			      const struct baton_config *c, baton_node_id self,
			      struct baton_release mine,
			      struct baton_release release)
{
	uint32_t n = 0;
	BATON_ASSERT(c->n <= BATON_MAX_MEMBERS && s->n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < c->n; i++) {
		const struct baton_member *mb = &c->members[i];
		if (mb->role != BATON_VOTER)
			continue;
		if (mb->id == self) {
			n += baton_release_compare(mine, release) == 0;
			continue;
		}
		const struct baton_member_versions *row =
			baton_version_state_find(s, mb->id);
		n += row != NULL &&
		     baton_release_compare(row->profile.release, release) == 0;
	}
	BATON_ASSERT(n <= c->n);
	return n;
}

/* The largest count of voters sharing one release (0: none known). */
static uint32_t top_count(const struct baton_version_state *s,
			  const struct baton_config *c, baton_node_id self,
			  struct baton_release mine)
{
	uint32_t top = 0;
	BATON_ASSERT(c->n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < c->n; i++) {
		const struct baton_member *mb = &c->members[i];
		if (mb->role != BATON_VOTER)
			continue;
		struct baton_release rel = mine;
		if (mb->id != self) {
			const struct baton_member_versions *row =
				baton_version_state_find(s, mb->id);
			if (row == NULL)
				continue;
			rel = row->profile.release;
		}
		uint32_t n = count_release(s, c, self, mine, rel);
		BATON_ASSERT(n >= 1); /* rel's own voter counts */
		if (n > top)
			top = n;
	}
	BATON_ASSERT(top <= c->n);
	return top;
}

bool baton_majority_release(const struct baton_version_state *s,
			    const struct baton_config *c, baton_node_id self,
			    struct baton_release release)
{
	BATON_ASSERT(s != NULL && c != NULL);
	BATON_ASSERT(baton_version_state_valid(s));
	/* Ties count every tied release; with no voter known, nothing
	 * argues against it (0 == 0). */
	return count_release(s, c, self, release, release) ==
	       top_count(s, c, self, release);
}

/* "1.1.0 x2, 1.0.0 x1": the voters' releases, for texts. */
static void describe_voters(const struct baton_raft *r, char *buf, size_t cap)
{
	size_t used = 0;
	BATON_ASSERT(cap > 0);
	buf[0] = '\0';
	struct baton_release seen[BATON_MAX_MEMBERS];
	uint32_t n_seen = 0;
	for (uint32_t i = 0; i < r->config.n && used < cap; i++) {
		const struct baton_member *mb = &r->config.members[i];
		if (mb->role != BATON_VOTER)
			continue;
		struct baton_release rel = r->o.profile.release;
		if (mb->id != r->o.id) {
			const struct baton_member_versions *row =
				baton_version_state_find(&r->versions, mb->id);
			if (row == NULL)
				continue;
			rel = row->profile.release;
		}
		bool dup = false;
		for (uint32_t j = 0; j < n_seen && !dup; j++)
			dup = baton_release_compare(seen[j], rel) == 0;
		if (dup)
			continue;
		BATON_ASSERT(n_seen < BATON_MAX_MEMBERS);
		seen[n_seen++] = rel;
		char a[BATON_RELEASE_STR_MAX];
		int k = snprintf(
			buf + used, cap - used, "%s%s x%u",
			used > 0 ? ", " : "", baton_release_format(rel, a),
			count_release(&r->versions, &r->config, r->o.id,
				      r->o.profile.release, rel));
		BATON_ASSERT(k >= 0);
		used += (size_t)k;
	}
}

/* ---- eligibility --------------------------------------------------------- */

uint32_t baton__eligibility(const struct baton_raft *r, char *why, size_t cap)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	char voters[160];
	BATON_ASSERT(why == NULL || cap > 0);
	BATON_ASSERT(r->o.election_policy == BATON_ELECTION_VERSION_AWARE ||
		     r->o.election_policy == BATON_ELECTION_ANY);
	if (why != NULL)
		why[0] = '\0';
	if (!baton__is_voter(r, r->o.id)) {
		if (why != NULL)
			snprintf(why, cap, "not a voter of the configuration");
		return BATON_INELIGIBLE_NOT_VOTER;
	}
	if (r->o.election_policy == BATON_ELECTION_ANY)
		return BATON_ELIGIBLE;
	if (!baton__floor_ok(r, r->versions.floor)) {
		if (why != NULL)
			snprintf(why, cap,
				 "rule 1: release %s is below the release "
				 "floor %s of the log",
				 baton_release_format(r->o.profile.release, a),
				 baton_release_format(r->versions.floor, b));
		return BATON_INELIGIBLE_FLOOR;
	}
	if (!baton_majority_release(&r->versions, &r->config, r->o.id,
				    r->o.profile.release)) {
		if (why != NULL) {
			describe_voters(r, voters, sizeof voters);
			snprintf(why, cap,
				 "rule 2: release %s is not a majority release "
				 "among the voters (%s)",
				 baton_release_format(r->o.profile.release, a),
				 voters);
		}
		return BATON_INELIGIBLE_MINORITY;
	}
	return BATON_ELIGIBLE;
}

uint32_t baton_raft_eligibility(const struct baton_raft *r, char *why,
				size_t cap)
{
	uint32_t e = baton__eligibility(r, why, cap);
	BATON_ASSERT(e <= BATON_INELIGIBLE_NOT_VOTER);
	size_t used = why != NULL ? strlen(why) : 0;
	BATON_ASSERT(used == 0 || used < cap);
	if (e == BATON_INELIGIBLE_MINORITY && used + 1 < cap)
		snprintf(why + used, cap - used,
			 "; it stands only after %u election timeouts without "
			 "a leader",
			 BATON_MINORITY_WAIT_TIMEOUTS);
	return e;
}

/* ---- voters: rule 1 ------------------------------------------------------ */

bool baton__vote_allowed(struct baton_raft *r, const struct baton_msg *m)
{
	BATON_ASSERT(m->type == BATON_MSG_VOTE);
	BATON_ASSERT(r->o.id != 0);
	const struct baton_release cand = m->u.vote.candidate.release;
	if (r->o.election_policy == BATON_ELECTION_ANY ||
	    baton_release_none(r->versions.floor) ||
	    baton_release_compare(cand, r->versions.floor) >= 0)
		return true;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	baton__refuse(r,
		      "refused a %s to node %llu for term %llu (rule 1): its "
		      "release %s is below the release floor %s of this log",
		      m->u.vote.pre_vote ? "pre-vote" : "vote",
		      (unsigned long long)m->from, (unsigned long long)m->term,
		      !baton_release_none(cand) ? baton_release_format(cand, a)
						: "(none sent)",
		      baton_release_format(r->versions.floor, b));
	return false;
}

/* ---- candidates: rule 2's wait ------------------------------------------- */

bool baton__candidacy_deferred(struct baton_raft *r)
{
	BATON_ASSERT(r->role != BATON_LEADER);
	char why[320];
	uint32_t e = baton__eligibility(r, why, sizeof why);
	BATON_ASSERT(e != BATON_INELIGIBLE_NOT_VOTER);
	/* Rule 1 never gets here: such a node holds (a stall). */
	if (e != BATON_INELIGIBLE_MINORITY) {
		r->minority_waits = 0;
		return false;
	}
	/* A leader heard since the wait began: begin again. */
	if (r->minority_waits > 0 &&
	    r->leader_contact_ms > r->minority_since_ms)
		r->minority_waits = 0;
	if (r->minority_waits == 0)
		r->minority_since_ms = r->now_ms;
	if (r->minority_waits >= BATON_MINORITY_WAIT_TIMEOUTS)
		return false; /* waited long enough: no preferred node won */
	r->minority_waits++;
	BATON_ASSERT(r->minority_waits <= BATON_MINORITY_WAIT_TIMEOUTS);
	baton__refuse(r,
		      "not standing for election yet (%s): election timeout "
		      "%u of %u without a leader",
		      why, r->minority_waits, BATON_MINORITY_WAIT_TIMEOUTS);
	return true;
}

/* ---- the leader: re-checked every heartbeat interval --------------------- */

/* A voter that would meet both rules as leader, by the log's table. */
static bool preferred(const struct baton_raft *r, baton_node_id id)
{
	BATON_ASSERT(id != 0 && id != r->o.id);
	const struct baton_member_versions *row =
		baton_version_state_find(&r->versions, id);
	BATON_ASSERT(row == NULL || row->id == id);
	if (row == NULL || !baton__is_voter(r, id))
		return false;
	struct baton_release rel = row->profile.release;
	return baton_release_compare(rel, r->versions.floor) >= 0 &&
	       baton_majority_release(&r->versions, &r->config, id, rel);
}

void baton__eligibility_leader_check(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	if (r->o.election_policy == BATON_ELECTION_ANY ||
	    r->transfer_target != 0 || r->stalled_index != 0)
		return; /* a stall hands over on its own (versions.c) */
	char why[320];
	if (baton__eligibility(r, why, sizeof why) != BATON_INELIGIBLE_MINORITY)
		return;
	/* The preferred voter that heard from us lately, most up to date. */
	baton_node_id best = 0;
	baton_index best_match = 0;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		const struct baton__progress *p = &r->progress[i];
		if (p->id == r->o.id || !p->recent_active ||
		    !preferred(r, p->id))
			continue;
		if (best == 0 || p->match > best_match) {
			best = p->id;
			best_match = p->match;
		}
	}
	if (best == 0)
		return; /* nobody better reachable: keep leading */
	BATON_ASSERT(best != r->o.id && baton__is_voter(r, best));
	baton__refuse(r, "handing leadership to node %llu (%s)",
		      (unsigned long long)best, why);
	int rv = baton__transfer(r, best);
	BATON_ASSERT(rv == 0 || rv == BATON_ENOTFOUND);
}
