/*
 * Leader eligibility (DESIGN.md, "Leader eligibility", "Release floor",
 * "Future data"): the release floor rises to what a majority runs (Halon's
 * rule: never because a minority leader runs it); rule 1 (a node
 * below the floor of its log never stands, is refused by voters and
 * stalls); rule 2 (a node not of a majority release waits before
 * standing, and a leader of such a release hands over); Halon's stages of
 * a rolling upgrade; and BATON_ELECTION_ANY, under which none of it holds.
 * Nodes run releases of the table (baton_releases()), as --as-release
 * would make them.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* ---- releases and options per node ------------------------------------- */

static const struct baton_profile *rel(uint16_t major, uint16_t minor)
{
	const struct baton_profile *p =
		baton_release_find((struct baton_release){major, minor, 0});
	cr_assert_not_null(p, "release %u.%u.0 is in the table", major, minor);
	return p;
}

static struct baton_release r3(uint16_t a, uint16_t b, uint16_t c)
{
	return (struct baton_release){a, b, c};
}

/* Each test sets these before h_init (a test is a process of its own). */
static const struct baton_profile *runs[H_MAX + 1]; /* NULL: the newest */
static uint32_t slow[H_MAX + 1];		    /* election timeouts */
static uint32_t policy = BATON_ELECTION_VERSION_AWARE;

static void tweak(struct baton_raft_options *o)
{
	if (runs[o->id] != NULL)
		o->profile = *runs[o->id];
	if (slow[o->id] != 0)
		o->election_timeout_ms = slow[o->id];
	o->election_policy = policy;
}

/* Restart node id on another release, on the same disk. */
static void restart_on(struct harness *h, baton_node_id id,
		       const struct baton_profile *p)
{
	h->o[id].profile = *p;
	h_restart(h, id, false);
}

static bool same(struct baton_release a, struct baton_release b)
{
	return baton_release_compare(a, b) == 0;
}

static struct baton_release floor_of(struct harness *h, baton_node_id id)
{
	return h_status(h, id).versions.floor;
}

static void assert_floor(struct harness *h, baton_node_id id,
			 struct baton_release want)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	struct baton_release f = floor_of(h, id);
	cr_assert(same(f, want), "node %llu: floor %s, want %s",
		  (unsigned long long)id, baton_release_format(f, a),
		  baton_release_format(want, b));
}

static uint32_t eligibility(struct harness *h, baton_node_id id, char *why,
			    size_t cap)
{
	uint32_t e = baton_raft_eligibility(h->r[id], why, cap);
	cr_assert_eq(h_status(h, id).eligibility, e,
		     "status and baton_raft_eligibility agree");
	return e;
}

static uint64_t refusals(struct harness *h, baton_node_id id)
{
	uint64_t seq = 0;
	cr_assert_not_null(baton_raft_last_refusal(h->r[id], &seq));
	return seq;
}

static baton_node_id other_than(baton_node_id a, baton_node_id b)
{
	for (baton_node_id i = 1; i <= 3; i++)
		if (i != a && i != b)
			return i;
	return 0;
}

/* The first version entry of node id's log whose floor is above `r`. */
static baton_index first_floor_above(struct harness *h, baton_node_id id,
				     struct baton_release r)
{
	struct baton_raft_status s = h_status(h, id);
	for (baton_index i = s.first_index; i <= s.last_index; i++) {
		const struct baton_entry *e = baton_raft_entry(h->r[id], i);
		struct baton_version_state v;
		if (e != NULL && e->type == BATON_ENTRY_VERSION &&
		    baton_version_state_decode(e->buf, e->len, &v) == 0 &&
		    baton_release_compare(v.floor, r) > 0)
			return i;
	}
	return 0;
}

/* ---- rule 2, pure ---------------------------------------------------------
 */

static struct baton_config voters(uint32_t n_voters, uint32_t n_learners)
{
	struct baton_config c;
	memset(&c, 0, sizeof c);
	for (uint32_t i = 1; i <= n_voters + n_learners; i++)
		c.members[c.n++] = (struct baton_member){
			i, i <= n_voters ? BATON_VOTER : BATON_LEARNER};
	return c;
}

/* A table with rows for ids 1.. (a 0.0.0 entry: no row). */
static struct baton_version_state table(const struct baton_release *r,
					uint32_t n)
{
	struct baton_version_state s;
	baton_version_state_initial(&s);
	for (uint32_t i = 0; i < n; i++) {
		if (r[i].major == 0 && r[i].minor == 0 && r[i].patch == 0)
			continue;
		struct baton_member_versions *m = &s.members[s.n++];
		m->id = i + 1;
		m->profile = *baton_release_current();
		m->profile.release = r[i];
	}
	cr_assert(baton_version_state_valid(&s));
	return s;
}

Test(majority, the_most_common_release_among_voters_wins)
{
	/* 1.1.0 twice, three others once each: a plurality is enough. */
	const struct baton_release r[] = {r3(1, 1, 0), r3(1, 1, 0), r3(1, 0, 0),
					  r3(1, 2, 0), r3(0, 1, 0)};
	struct baton_version_state s = table(r, 5);
	struct baton_config c = voters(5, 0);
	cr_assert(baton_majority_release(&s, &c, 0, r3(1, 1, 0)));
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 0, 0)));
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 2, 0)));
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(2, 0, 0)),
		      "a release nobody runs");
	/* Minor and patch count: 1.1.1 is not 1.1.0. */
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 1, 1)));
}

Test(majority, a_tie_counts_every_tied_release)
{
	const struct baton_release r[] = {r3(1, 0, 0), r3(1, 1, 0), r3(1, 0, 0),
					  r3(1, 1, 0)};
	struct baton_version_state s = table(r, 4);
	struct baton_config c = voters(4, 0);
	cr_assert(baton_majority_release(&s, &c, 0, r3(1, 0, 0)));
	cr_assert(baton_majority_release(&s, &c, 0, r3(1, 1, 0)));
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 2, 0)));
	/* Three ways, one each. */
	const struct baton_release t[] = {r3(1, 0, 0), r3(1, 1, 0),
					  r3(1, 2, 0)};
	s = table(t, 3);
	c = voters(3, 0);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(baton_majority_release(&s, &c, 0, t[i]));
}

Test(majority, the_node_counts_what_it_runs_not_its_row)
{
	const struct baton_release r[] = {r3(1, 1, 0), r3(1, 1, 0), r3(1, 0, 0),
					  r3(1, 2, 0), r3(0, 1, 0)};
	struct baton_version_state s = table(r, 5);
	struct baton_config c = voters(5, 0);
	/* Node 1's row says 1.1.0; it now runs 1.0.0: 1.0.0 twice, 1.1.0
	 * once. */
	cr_assert(baton_majority_release(&s, &c, 1, r3(1, 0, 0)));
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 0, 0)),
		      "the control, without replacing the row");
	/* Node 3 (row 1.0.0) runs 1.1.0: three of five. */
	cr_assert(baton_majority_release(&s, &c, 3, r3(1, 1, 0)));
	/* Node 4 (row 1.2.0) runs 1.1.0, so 1.2.0 has nobody. */
	cr_assert_not(baton_majority_release(&s, &c, 4, r3(1, 2, 0)));
}

Test(majority, voters_without_rows_and_rows_of_others_do_not_count)
{
	/* Five voters, rows for 1..3 only; rows 6 and 7 belong to nodes
	 * that are not members. */
	struct baton_release r[7] = {r3(1, 0, 0), r3(1, 1, 0), r3(1, 1, 0)};
	r[5] = r3(1, 0, 0);
	r[6] = r3(1, 0, 0);
	struct baton_version_state s = table(r, 7);
	cr_assert_eq(s.n, 5);
	struct baton_config c = voters(5, 0);
	cr_assert(baton_majority_release(&s, &c, 0, r3(1, 1, 0)));
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 0, 0)));
	/* An empty table: the node's own release is all there is. */
	struct baton_version_state empty;
	baton_version_state_initial(&empty);
	cr_assert(baton_majority_release(&empty, &c, 2, r3(1, 0, 0)));
}

Test(majority, learners_are_ignored)
{
	/* Voters 1..3, learners 4 and 5 on the release the voters lack. */
	const struct baton_release r[] = {r3(1, 0, 0), r3(1, 0, 0), r3(1, 1, 0),
					  r3(1, 1, 0), r3(1, 1, 0)};
	struct baton_version_state s = table(r, 5);
	struct baton_config c = voters(3, 2);
	cr_assert(baton_majority_release(&s, &c, 0, r3(1, 0, 0)));
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 1, 0)));
	/* Promote the learners and the verdict turns. */
	c = voters(5, 0);
	cr_assert_not(baton_majority_release(&s, &c, 0, r3(1, 0, 0)));
	cr_assert(baton_majority_release(&s, &c, 0, r3(1, 1, 0)));
}

/* ---- the release floor ---------------------------------------------------*/

/* Halon's rule: the floor rises to a release once a
 * majority of the voters told the leader they run it or newer, and never
 * because the leader alone runs it. */
Test(floor, it_rises_once_a_majority_of_the_voters_runs_the_release)
{
	for (baton_node_id i = 1; i <= 3; i++)
		runs[i] = rel(1, 1);
	struct harness h;
	h_init(&h, 3, tweak);
	struct baton_raft_status s = h_status(&h, 1);
	cr_assert(same(s.versions.floor, r3(0, 0, 0)), "no floor yet");
	baton_node_id l = h_elect(&h);
	/* Its first entry (after the configuration at 1) is a version
	 * entry; no member has answered yet, so no floor. */
	cr_assert_eq(h_status(&h, l).versions_index, 2);
	assert_floor(&h, l, r3(0, 0, 0));
	h_run(&h, 300);
	assert_floor(&h, l, r3(0, 0, 0)); /* info replies dropped */
	h.info = true;
	h_run(&h, 300);
	for (baton_node_id i = 1; i <= 3; i++)
		assert_floor(&h, i, r3(1, 1, 0));
	/* A leader of a newer release, alone on it: serves, and the floor
	 * stays (a majority runs 1.1.0, and rolling it back is a restart). */
	baton_node_id b = other_than(l, 0);
	restart_on(&h, b, rel(1, 2));
	struct baton_event ev = {.type = BATON_EVENT_TRANSFER};
	ev.u.transfer.target = b;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	h_run(&h, 300);
	baton_node_id l2 = h_leader(&h);
	cr_assert_neq(l2, 0);
	h_run(&h, 300);
	for (baton_node_id i = 1; i <= 3; i++) {
		assert_floor(&h, i, r3(1, 1, 0));
		cr_assert_eq(h_status(&h, i).stalled_index, 0);
	}
	/* A second one on 1.2.0: a majority, and the floor follows as soon
	 * as a 1.2.0 leader heard from both. */
	baton_node_id c = other_than(l, b);
	restart_on(&h, c, rel(1, 2));
	h_run(&h, 300);
	l2 = h_leader(&h);
	if (same(h_status(&h, l2).versions.floor, r3(1, 1, 0)) && l2 == l) {
		/* The 1.1.0 node still leads: rule 2 hands over. */
		h_run(&h, 600);
		l2 = h_leader(&h);
	}
	cr_assert_neq(l2, l, "a 1.2.0 node leads");
	h_run(&h, 300);
	assert_floor(&h, l2, r3(1, 2, 0));
	h_free(&h);
}

/* A leader whose release is above the majority's never raises the floor
 * above what the majority runs; a leader below the majority's never above
 * its own. */
Test(floor, it_is_the_newest_release_a_majority_runs_up_to_the_leaders)
{
	runs[1] = rel(1, 2);
	runs[2] = rel(1, 2);
	runs[3] = rel(1, 1);
	runs[4] = rel(1, 1);
	runs[5] = rel(1, 0);
	slow[2] = slow[3] = slow[4] = slow[5] = 100000;
	struct harness h;
	h_init(&h, 5, tweak);
	h.info = true;
	cr_assert_eq(h_elect(&h), 1);
	h_run(&h, 300);
	/* 1.2.0 x2, 1.1.0 x2, 1.0.0: three run 1.1.0 or newer. */
	for (baton_node_id i = 1; i <= 4; i++)
		assert_floor(&h, i, r3(1, 1, 0));
	cr_assert_eq(h_status(&h, 5).stalled_index != 0, true,
		     "1.0.0 is below the floor");
	h_free(&h);

	/* Led by a 1.1.0 node while three run 1.2.0: 1.1.0, not above
	 * (rule 2 soon hands over to a 1.2.0 node, which raises it). */
	runs[1] = rel(1, 1);
	runs[2] = rel(1, 2);
	runs[3] = rel(1, 2);
	runs[4] = rel(1, 2);
	runs[5] = rel(1, 1);
	h_init(&h, 5, tweak);
	h.info = true;
	cr_assert_eq(h_elect(&h), 1);
	baton_term t1 = h_status(&h, 1).term;
	h_run(&h, 300);
	struct baton_raft_status st = h_status(&h, 1);
	uint32_t raised = 0;
	for (baton_index i = st.first_index; i <= st.last_index; i++) {
		const struct baton_entry *e = baton_raft_entry(h.r[1], i);
		struct baton_version_state v;
		if (e == NULL || e->type != BATON_ENTRY_VERSION ||
		    baton_version_state_decode(e->buf, e->len, &v) != 0)
			continue;
		if (e->term == t1) {
			cr_assert_leq(
				baton_release_compare(v.floor, r3(1, 1, 0)), 0,
				"node 1 raised the floor above it");
			raised += same(v.floor, r3(1, 1, 0));
		}
	}
	cr_assert_gt(raised, 0, "node 1 raised the floor to its own");
	h_free(&h);
}

Test(floor, a_single_node_records_its_release)
{
	runs[1] = rel(1, 0);
	struct harness h;
	h_init(&h, 1, tweak);
	cr_assert_eq(h_elect(&h), 1);
	assert_floor(&h, 1, r3(1, 0, 0));
	cr_assert_eq(h_status(&h, 1).versions_index, 2);
	/* On 1.1.0 its next term raises the floor; the node is eligible. */
	restart_on(&h, 1, rel(1, 1));
	h_elect(&h);
	assert_floor(&h, 1, r3(1, 1, 0));
	cr_assert_eq(eligibility(&h, 1, NULL, 0), BATON_ELIGIBLE);
	h_free(&h);
}

Test(floor, it_is_never_lowered_even_under_any)
{
	/* Under ANY the rules are off, yet the floor is still recorded: a
	 * leader below it leaves it where it is. */
	policy = BATON_ELECTION_ANY;
	runs[1] = rel(1, 2);
	struct harness h;
	h_init(&h, 1, tweak);
	h_elect(&h);
	assert_floor(&h, 1, r3(1, 2, 0));
	restart_on(&h, 1, rel(1, 1));
	struct baton_raft_status s = h_status(&h, 1);
	cr_assert_eq(s.stalled_index, 0, "no future-data stall under ANY");
	cr_assert(same(s.needs_release, r3(0, 0, 0)));
	cr_assert_eq(eligibility(&h, 1, NULL, 0), BATON_ELIGIBLE);
	h_elect(&h);
	h_run(&h, 100);
	assert_floor(&h, 1, r3(1, 2, 0));
	cr_assert_eq(h.applied[1], h_status(&h, 1).commit_index);
	h_free(&h);
}

/* ---- rule 1: voters ------------------------------------------------------ */

/* Node `from` asks node `to` for a (pre-)vote in to's next term, with an
 * up-to-date log and the transfer flag (so no leader lease gets in the
 * way), advertising `cand`. Returns whether it was granted. */
static bool ask_vote(struct harness *h, baton_node_id to, baton_node_id from,
		     const struct baton_profile *cand, bool pre_vote)
{
	struct baton_raft_status s = h_status(h, to);
	struct baton_msg m;
	memset(&m, 0, sizeof m);
	m.type = BATON_MSG_VOTE;
	m.term = s.term + 1;
	m.from = from;
	m.to = to;
	m.u.vote.last_log_index = s.last_index;
	m.u.vote.last_log_term = s.last_term;
	m.u.vote.pre_vote = pre_vote;
	m.u.vote.leadership_transfer = true;
	m.u.vote.candidate = *cand;
	struct baton_event ev = {.type = BATON_EVENT_RECEIVE};
	ev.u.receive.msg = &m;
	cr_assert_eq(h_step(h, to, &ev), 0);
	const struct baton_update *u = &h->last[to];
	const struct baton_msg *replies =
		pre_vote ? u->msgs : u->msgs_after_persist;
	uint32_t n = pre_vote ? u->n_msgs : u->n_msgs_after_persist;
	for (uint32_t i = 0; i < n; i++)
		if (replies[i].type == BATON_MSG_VOTE_RESULT &&
		    replies[i].to == from) {
			cr_assert_eq(replies[i].u.vote_result.pre_vote,
				     pre_vote);
			return replies[i].u.vote_result.granted;
		}
	cr_assert_fail("node %llu did not answer", (unsigned long long)to);
	return false;
}

/* Three nodes on the newest release, led once: the floor is the newest.
 * Node 3 is slow so that 1 or 2 leads; the voter tests ask node 3. */
static baton_node_id floored(struct harness *h)
{
	/* The newest release, but with the machine versions of the one
	 * before: the floor rises, the machine version cannot, so a node
	 * restarted on the release before holds for the floor alone. */
	static struct baton_profile newest;
	newest = *baton_release_current();
	newest.machine_max =
		baton_release_previous(newest.release)->machine_max;
	for (baton_node_id i = 1; i <= 3; i++)
		runs[i] = &newest;
	slow[3] = 1000;
	h_init(h, 3, tweak);
	h->info = true; /* the floor needs a majority's answers */
	baton_node_id l = h_elect(h);
	cr_assert_neq(l, 3);
	h_run(h, 100);
	for (baton_node_id i = 1; i <= 3; i++)
		assert_floor(h, i, baton_release_current()->release);
	return l;
}

Test(rule1, a_voter_refuses_a_candidate_below_its_floor)
{
	struct harness h;
	baton_node_id l = floored(&h);
	baton_node_id c = other_than(l, 3); /* the hand-played candidate */
	const struct baton_profile *old =
		baton_release_previous(baton_release_current()->release);
	cr_assert_not_null(old);
	uint64_t seq = 0;
	cr_assert_str_eq(baton_raft_last_refusal(h.r[3], &seq), "");
	cr_assert_eq(seq, 0);

	/* The control: the same pre-vote from the newest release. */
	cr_assert(ask_vote(&h, 3, c, baton_release_current(), true));
	cr_assert_eq(refusals(&h, 3), 0);
	/* Below the floor: refused, and said why. */
	cr_assert_not(ask_vote(&h, 3, c, old, true));
	const char *why = baton_raft_last_refusal(h.r[3], &seq);
	cr_assert_eq(seq, 1);
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	baton_release_format(old->release, a);
	baton_release_format(baton_release_current()->release, b);
	cr_assert(strstr(why, a) != NULL, "'%s' names the candidate's %s", why,
		  a);
	cr_assert(strstr(why, b) != NULL, "'%s' names the floor %s", why, b);
	cr_assert(strstr(why, "rule 1") != NULL, "'%s' names the rule", why);
	/* An old binary that sends no release at all: 0.0.0. */
	struct baton_profile none;
	memset(&none, 0, sizeof none);
	cr_assert_not(ask_vote(&h, 3, c, &none, true));
	cr_assert_eq(refusals(&h, 3), 2);

	/* The real vote: refused too, and no vote recorded for it. */
	cr_assert_not(ask_vote(&h, 3, c, old, false));
	cr_assert_neq(h_status(&h, 3).vote, c);
	cr_assert_eq(refusals(&h, 3), 3);
	/* The control again, in the next term: granted. */
	cr_assert(ask_vote(&h, 3, c, baton_release_current(), false));
	cr_assert_eq(h_status(&h, 3).vote, c);
	cr_assert_eq(refusals(&h, 3), 3, "a grant is no refusal");
	h_free(&h);
}

Test(rule1, without_a_floor_any_release_gets_the_vote)
{
	/* A fresh log has no floor: nothing to refuse, 0.0.0 included. */
	slow[1] = slow[2] = slow[3] = 100000;
	struct harness h;
	h_init(&h, 3, tweak);
	cr_assert(same(floor_of(&h, 3), r3(0, 0, 0)));
	struct baton_profile none;
	memset(&none, 0, sizeof none);
	cr_assert(ask_vote(&h, 3, 1, rel(0, 1), true));
	cr_assert(ask_vote(&h, 3, 1, &none, true));
	cr_assert_eq(refusals(&h, 3), 0);
	h_free(&h);
}

Test(rule1, under_any_the_voter_grants)
{
	policy = BATON_ELECTION_ANY;
	struct harness h;
	baton_node_id l = floored(&h);
	baton_node_id c = other_than(l, 3);
	const struct baton_profile *old =
		baton_release_previous(baton_release_current()->release);
	cr_assert(ask_vote(&h, 3, c, old, true));
	cr_assert(ask_vote(&h, 3, c, old, false));
	cr_assert_eq(h_status(&h, 3).vote, c);
	cr_assert_eq(refusals(&h, 3), 0);
	h_free(&h);
}

/* ---- rule 1: future data ------------------------------------------------- */

Test(rule1, a_node_below_the_floor_of_its_log_stalls_and_never_stands)
{
	struct harness h;
	baton_node_id l = floored(&h);
	const struct baton_profile *old =
		baton_release_previous(baton_release_current()->release);
	struct baton_release newest = baton_release_current()->release;
	/* Node 3 comes back on the release before (and at the usual pace):
	 * an old binary started by mistake on data whose floor has risen. */
	h.o[3].election_timeout_ms = 100;
	restart_on(&h, 3, old);
	baton_index at = first_floor_above(&h, 3, old->release);
	cr_assert_neq(at, 0);
	struct baton_raft_status s = h_status(&h, 3);
	cr_assert_eq(s.stalled_index, at, "found on restore");
	cr_assert(same(s.needs_release, newest));
	cr_assert_eq(s.needs_machine.value, 0);
	cr_assert_lt(h.applied[3], at);
	char why[256];
	cr_assert_eq(eligibility(&h, 3, why, sizeof why),
		     BATON_INELIGIBLE_FLOOR);
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	baton_release_format(old->release, a);
	baton_release_format(newest, b);
	cr_assert(strstr(why, a) != NULL && strstr(why, b) != NULL, "%s", why);
	/* The stall says what it found and what to do. */
	h_run(&h, 50);
	struct baton_pipeline_status ps;
	baton_pipeline_status(h.node[3].p, &ps);
	cr_assert_eq(ps.stalled_index, at);
	cr_assert(strstr(ps.stalled_why, a) != NULL, "%s", ps.stalled_why);
	cr_assert(strstr(ps.stalled_why, b) != NULL, "%s", ps.stalled_why);
	cr_assert(strstr(ps.stalled_why, "downgrade") != NULL, "%s",
		  ps.stalled_why);

	/* It keeps replicating, and applies nothing at or after the entry. */
	cr_assert_eq(h_propose(&h, l, "x"), 0);
	h_run(&h, 100);
	s = h_status(&h, 3);
	cr_assert_eq(s.last_index, h_status(&h, l).last_index);
	cr_assert_eq(s.stalled_index, at);
	cr_assert_lt(h.applied[3], at);
	cr_assert_eq(h.node[3].machine.commands, 0);

	/* Without the leader, node 3 never stands (though its timeout is
	 * the shorter); the other node leads. */
	baton_node_id other = other_than(l, 3);
	h.o[other].election_timeout_ms = 300;
	h_restart(&h, other, false);
	h_run(&h, 50);
	h.down[l] = true;
	uint32_t asked = h.delivered_to[other][BATON_MSG_VOTE];
	h_run(&h, 1500);
	cr_assert_eq(h_leader(&h), other);
	cr_assert_neq(h_status(&h, 3).role, BATON_LEADER);
	cr_assert_eq(h.delivered_to[other][BATON_MSG_VOTE], asked,
		     "node 3 asked for votes");
	h.down[l] = false;

	/* On the newest release again, it applies everything. */
	restart_on(&h, 3, baton_release_current());
	h_run(&h, 300);
	s = h_status(&h, 3);
	cr_assert_eq(s.stalled_index, 0);
	cr_assert(same(s.needs_release, r3(0, 0, 0)));
	cr_assert_eq(h.applied[3], h_status(&h, h_leader(&h)).commit_index);
	cr_assert_eq(eligibility(&h, 3, NULL, 0), BATON_ELIGIBLE);
	h_free(&h);
}

/* A leader never records a floor above its own release: it could not
 * lead under it. Under ANY it may (nothing is enforced there). */
Test(rule1, a_leader_records_no_floor_above_its_release)
{
	struct harness h;
	baton_node_id l = floored(&h);
	struct baton_version_state v = h_status(&h, l).versions;
	v.floor = r3(9, 0, 0);
	baton_index last = h_status(&h, l).last_index;
	struct baton_event ev = {.type = BATON_EVENT_VERSIONS};
	ev.u.versions.state = &v;
	cr_assert_eq(h_step(&h, l, &ev), BATON_EINVAL);
	cr_assert_eq(h_status(&h, l).last_index, last, "nothing appended");
	cr_assert_eq(h_leader(&h), l);
	h_free(&h);
}

Test(rule1, under_any_a_leader_may_record_a_higher_floor_and_leads_on)
{
	policy = BATON_ELECTION_ANY;
	struct harness h;
	baton_node_id l = floored(&h);
	struct baton_version_state v = h_status(&h, l).versions;
	v.floor = r3(9, 0, 0);
	struct baton_event ev = {.type = BATON_EVENT_VERSIONS};
	ev.u.versions.state = &v;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	h_run(&h, 500);
	cr_assert_eq(h_leader(&h), l);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		assert_floor(&h, i, r3(9, 0, 0));
		cr_assert_eq(s.stalled_index, 0);
		cr_assert_eq(h.applied[i], s.commit_index);
	}
	cr_assert_eq(h_propose(&h, l, "x"), 0);
	h_free(&h);
}

Test(rule1, under_any_a_node_below_the_floor_applies_and_may_lead)
{
	policy = BATON_ELECTION_ANY;
	struct harness h;
	baton_node_id l = floored(&h);
	const struct baton_profile *old =
		baton_release_previous(baton_release_current()->release);
	h.o[3].election_timeout_ms = 100;
	restart_on(&h, 3, old);
	struct baton_raft_status s = h_status(&h, 3);
	cr_assert_eq(s.stalled_index, 0);
	cr_assert(same(s.needs_release, r3(0, 0, 0)));
	cr_assert_eq(eligibility(&h, 3, NULL, 0), BATON_ELIGIBLE);
	cr_assert_eq(h_propose(&h, l, "x"), 0);
	h_run(&h, 100);
	cr_assert_eq(h.applied[3], h_status(&h, l).commit_index);
	/* The other node never stands: node 3 leads once the leader goes. */
	baton_node_id other = other_than(l, 3);
	h.o[other].election_timeout_ms = 100000;
	h_restart(&h, other, false);
	h.down[l] = true;
	h_run(&h, 1500);
	cr_assert_eq(h_leader(&h), 3);
	assert_floor(&h, 3, baton_release_current()->release);
	h_free(&h);
}

/* ---- rule 2 ---------------------------------------------------------------
 * Nodes 1 and 2 on 1.1.0, node 3 on 1.2.0: node 1 leads first (the others
 * slow), the floor is 1.1.0 and the table lists all three, so node 3 meets
 * rule 1 and not rule 2. */
static void minority_third(struct harness *h)
{
	runs[1] = rel(1, 1);
	runs[2] = rel(1, 1);
	runs[3] = rel(1, 2);
	slow[2] = slow[3] = 100000;
	h_init(h, 3, tweak);
	h->info = true;
	cr_assert_eq(h_elect(h), 1);
	h_run(h, 300);
	struct baton_raft_status s = h_status(h, 1);
	cr_assert_eq(s.versions.n, 3, "the table lists every member");
	for (baton_node_id i = 1; i <= 3; i++)
		assert_floor(h, i, r3(1, 1, 0));
	char why[256];
	cr_assert_eq(eligibility(h, 3, why, sizeof why),
		     BATON_INELIGIBLE_MINORITY);
	cr_assert(strstr(why, "1.2.0") != NULL, "%s", why);
	cr_assert_eq(eligibility(h, 1, NULL, 0), BATON_ELIGIBLE);
	cr_assert_eq(eligibility(h, 2, NULL, 0), BATON_ELIGIBLE);
}

Test(rule2, a_preferred_node_stands_first)
{
	struct harness h;
	minority_third(&h);
	/* Node 3 has the shorter timeout, yet node 2 (of the majority
	 * release) stands first and wins; node 3 never asks. */
	h.o[3].election_timeout_ms = 100;
	h_restart(&h, 3, false);
	h.o[2].election_timeout_ms = 120;
	h_restart(&h, 2, false);
	h_run(&h, 50);
	uint32_t asked = h.delivered_to[2][BATON_MSG_VOTE];
	h.down[1] = true;
	h_run(&h, 600);
	cr_assert_eq(h_leader(&h), 2);
	cr_assert_eq(h.delivered_to[2][BATON_MSG_VOTE], asked,
		     "node 3 asked for a vote");
	cr_assert_geq(refusals(&h, 3), 1, "node 3 deferred");
	h_free(&h);
}

/* Five nodes: 1 and 2 on 1.1.0 (node 1 leading), 3 on 1.2.0, 4 and 5
 * back on 1.0.0, below the floor 1.1.0 (they hold: never stand, still
 * vote). The table holds 1.1.0 and 1.0.0 twice, 1.2.0 once: node 3 meets
 * rule 1, not rule 2. Nodes 3..5 at the usual pace afterwards. */
static void five(struct harness *h)
{
	for (baton_node_id i = 1; i <= 5; i++) {
		runs[i] = rel(1, 1);
		slow[i] = i == 1 ? 0 : 1000;
	}
	runs[3] = rel(1, 2);
	h_init(h, 5, tweak);
	h->info = true;
	cr_assert_eq(h_elect(h), 1);
	h_run(h, 300);
	for (baton_node_id i = 3; i <= 5; i++) {
		h->o[i].election_timeout_ms = 100;
		restart_on(h, i, i == 3 ? rel(1, 2) : rel(1, 0));
	}
	h_run(h, 300);
	cr_assert_eq(h_leader(h), 1);
	for (baton_node_id i = 4; i <= 5; i++) {
		struct baton_raft_status s = h_status(h, i);
		cr_assert(same(s.needs_release, r3(1, 1, 0)));
		cr_assert_eq(eligibility(h, i, NULL, 0),
			     BATON_INELIGIBLE_FLOOR);
	}
	char why[256];
	cr_assert_eq(eligibility(h, 3, why, sizeof why),
		     BATON_INELIGIBLE_MINORITY);
	cr_assert(strstr(why, "rule 2") != NULL, "%s", why);
	cr_assert(strstr(why, "1.2.0") != NULL, "%s", why);
}

Test(rule2, a_minority_release_waits_then_stands_and_wins)
{
	struct harness h;
	five(&h);
	uint64_t seq0 = refusals(&h, 3);
	uint32_t asked = h.delivered_to[4][BATON_MSG_VOTE];
	h.down[1] = h.down[2] = true;
	uint64_t t0 = h.now_ms;
	uint64_t first_vote = 0;
	for (int t = 0; t < 300 && first_vote == 0; t++) {
		h_run(&h, 10);
		if (h.delivered_to[4][BATON_MSG_VOTE] > asked)
			first_vote = h.now_ms;
	}
	cr_assert_neq(first_vote, 0, "node 3 never stood");
	uint64_t waited = first_vote - t0;
	/* At least BATON_MINORITY_WAIT_TIMEOUTS election timeouts of >= 100
	 * ms, at most one more of < 200 ms and a tick. */
	cr_assert_geq(waited, BATON_MINORITY_WAIT_TIMEOUTS * 100,
		      "stood after %llu ms", (unsigned long long)waited);
	cr_assert_leq(waited, (BATON_MINORITY_WAIT_TIMEOUTS + 1) * 200 + 20,
		      "stood after %llu ms", (unsigned long long)waited);
	cr_assert_geq(refusals(&h, 3), seq0 + BATON_MINORITY_WAIT_TIMEOUTS,
		      "each deferral is a refusal");
	const char *why = baton_raft_last_refusal(h.r[3], NULL);
	cr_assert(strstr(why, "rule 2") != NULL, "%s", why);
	/* Nodes 4 and 5 meet nothing against it: it wins, but leaves the
	 * floor where it is: its release is no majority's (Halon's rule). */
	h_run(&h, 300);
	cr_assert_eq(h_leader(&h), 3);
	h_run(&h, 100);
	for (baton_node_id i = 3; i <= 5; i++)
		assert_floor(&h, i, r3(1, 1, 0));
	h_free(&h);
}

/* The only upgraded node reachable leads (availability), but the floor
 * stays with the majority's release (Halon's rule):
 * nodes 1 and 2 hold nothing when they return, and leadership goes back to
 * a node of the majority's release. No write refused meanwhile. */
Test(rule2, a_minority_leader_serves_but_never_raises_the_floor)
{
	struct harness h;
	five(&h);
	h.down[1] = h.down[2] = true;
	h_run(&h, 1500);
	cr_assert_eq(h_leader(&h), 3);
	baton_term term = h_status(&h, 3).term;
	for (int k = 0; k < 10; k++) {
		cr_assert_eq(h_propose(&h, 3, "w"), 0, "write %d refused", k);
		h_run(&h, 50);
	}
	assert_floor(&h, 3, r3(1, 1, 0));
	h.down[1] = h.down[2] = false;
	h_run(&h, 1500);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		assert_floor(&h, i, r3(1, 1, 0));
		cr_assert_eq(s.stalled_index, 0, "node %llu holds",
			     (unsigned long long)i);
		cr_assert_eq(eligibility(&h, i, NULL, 0) ==
				     BATON_INELIGIBLE_FLOOR,
			     false);
	}
	baton_node_id l = h_leader(&h);
	cr_assert(l == 1 || l == 2, "a 1.1.0 node leads again (node %llu)",
		  (unsigned long long)l);
	cr_assert_gt(h_status(&h, l).term, term);
	cr_assert_eq(h_propose(&h, l, "x"), 0);
	h_run(&h, 100);
	for (baton_node_id i = 1; i <= 3; i++)
		cr_assert_eq(h.applied[i], h_status(&h, l).commit_index);
	h_free(&h);
}

/* The run: five nodes on 1.1.0, one restarted on 1.2.0, and the
 * others slow to stand: after BATON_MINORITY_WAIT_TIMEOUTS election
 * timeouts the lone 1.2.0 node leads. The four old nodes must not stall
 * (plain rollback stays possible): the floor stays 1.1.0. */
Test(halon, a_lone_new_release_leader_leaves_the_old_majority_running)
{
	for (baton_node_id i = 1; i <= 5; i++) {
		runs[i] = rel(1, 1);
		slow[i] = i == 1 ? 0 : 100000;
	}
	struct harness h;
	h_init(&h, 5, tweak);
	h.info = true;
	cr_assert_eq(h_elect(&h), 1);
	h_run(&h, 300);
	for (baton_node_id i = 1; i <= 5; i++)
		assert_floor(&h, i, r3(1, 1, 0));
	h.o[5].election_timeout_ms = 100;
	restart_on(&h, 5, rel(1, 2));
	h_run(&h, 300);
	h.down[1] = true;
	/* The others restart (no lease left) but are slow to stand. */
	for (baton_node_id i = 2; i <= 4; i++)
		h_restart(&h, i, false);
	bool led = false;
	for (int t = 0; t < 200 && !led; t++) {
		h_run(&h, 10);
		led = h_leader(&h) == 5;
	}
	cr_assert(led, "the lone 1.2.0 node leads");
	/* It serves; it may hand over to a 1.1.0 voter (rule 2), which it
	 * could not if it had raised the floor above them. */
	h_run(&h, 500);
	baton_node_id l = h_leader(&h);
	cr_assert_neq(l, 0);
	cr_assert_eq(h_propose(&h, l, "w"), 0);
	h_run(&h, 200);
	for (baton_node_id i = 2; i <= 5; i++) {
		struct baton_raft_status s = h_status(&h, i);
		assert_floor(&h, i, r3(1, 1, 0));
		cr_assert_eq(s.stalled_index, 0, "node %llu stalled",
			     (unsigned long long)i);
		cr_assert_eq(h.applied[i], h_status(&h, l).commit_index);
	}
	/* Plain rollback: node 5 back on 1.1.0 applies everything. */
	restart_on(&h, 5, rel(1, 1));
	h_run(&h, 2000);
	cr_assert_eq(h_status(&h, 5).stalled_index, 0);
	h_free(&h);
}

Test(rule2, under_any_nobody_waits)
{
	policy = BATON_ELECTION_ANY;
	struct harness h;
	runs[1] = rel(1, 1);
	runs[2] = rel(1, 1);
	runs[3] = rel(1, 2);
	slow[2] = 100000;
	slow[3] = 1000;
	h_init(&h, 3, tweak);
	h.info = true;
	cr_assert_eq(h_elect(&h), 1);
	h_run(&h, 300);
	cr_assert_eq(eligibility(&h, 3, NULL, 0), BATON_ELIGIBLE);
	h.o[3].election_timeout_ms = 100;
	h_restart(&h, 3, false);
	h_run(&h, 50);
	uint32_t asked = h.delivered_to[2][BATON_MSG_VOTE];
	h.down[1] = true;
	uint64_t t0 = h.now_ms;
	while (h.delivered_to[2][BATON_MSG_VOTE] == asked &&
	       h.now_ms < t0 + 1000)
		h_run(&h, 10);
	cr_assert_lt(h.now_ms - t0, 230, "stood after one timeout");
	cr_assert_eq(refusals(&h, 3), 0);
	h_free(&h);
}

Test(eligibility, a_learner_is_not_a_voter)
{
	struct harness h;
	h_init(&h, 3, tweak);
	baton_node_id l = h_elect(&h);
	h_add_empty(&h, 4);
	struct baton_event ev = {.type = BATON_EVENT_ADD_LEARNER};
	ev.u.member.id = 4;
	cr_assert_eq(h_step(&h, l, &ev), 0);
	h_run(&h, 300);
	cr_assert_eq(h_status(&h, 4).config.n, 4);
	char why[256];
	cr_assert_eq(eligibility(&h, 4, why, sizeof why),
		     BATON_INELIGIBLE_NOT_VOTER);
	cr_assert_neq(why[0], '\0');
	cr_assert_eq(eligibility(&h, l, why, sizeof why), BATON_ELIGIBLE);
	h_free(&h);
}

/* ---- Halon's stages ---------------------------------------------------------
 * 3 nodes from 1.0.0 to 1.1.0 (machine versions 1 and 2), node 1 leading
 * first. One upgraded: the leader stays on 1.0.0. Two: leadership moves to
 * a 1.1.0 node within a few heartbeats, the floor becomes 1.1.0, node 1
 * can no longer lead. All three: everyone may lead, machine version 2. */

static void halon_start(struct harness *h)
{
	for (baton_node_id i = 1; i <= 3; i++)
		runs[i] = rel(1, 0);
	slow[2] = slow[3] = 1000;
	h_init(h, 3, tweak);
	h->info = true;
	cr_assert_eq(h_elect(h), 1);
	h_run(h, 300);
	for (baton_node_id i = 1; i <= 3; i++) {
		assert_floor(h, i, r3(1, 0, 0));
		cr_assert_eq(eligibility(h, i, NULL, 0), BATON_ELIGIBLE);
	}
}

Test(halon, the_stages_of_a_rolling_upgrade)
{
	struct harness h;
	halon_start(&h);
	/* Stage 1: node 2 upgraded. */
	restart_on(&h, 2, rel(1, 1));
	h_run(&h, 500);
	cr_assert_eq(h_leader(&h), 1, "the leader stays on 1.0.0");
	for (baton_node_id i = 1; i <= 3; i++)
		assert_floor(&h, i, r3(1, 0, 0));
	cr_assert_eq(eligibility(&h, 2, NULL, 0), BATON_INELIGIBLE_MINORITY);
	cr_assert_eq(eligibility(&h, 3, NULL, 0), BATON_ELIGIBLE);
	cr_assert_eq(h_status(&h, 1).versions.machine.value, 1);

	/* Stage 2: node 3 upgraded too; node 1 hands over. */
	restart_on(&h, 3, rel(1, 1));
	uint64_t t0 = h.now_ms;
	uint64_t seq0 = refusals(&h, 1);
	while (h_leader(&h) == 1 && h.now_ms < t0 + 2000)
		h_run(&h, 10);
	baton_node_id l = h_leader(&h);
	cr_assert(l == 2 || l == 3, "leader %llu", (unsigned long long)l);
	/* Node 1 learns of node 3's release in the next round that asks
	 * everyone (one election timeout), writes the table, then hands
	 * over at its next heartbeat round. */
	cr_assert_leq(h.now_ms - t0, 300, "handed over after %llu ms",
		      (unsigned long long)(h.now_ms - t0));
	cr_assert_gt(refusals(&h, 1), seq0);
	h_run(&h, 100);
	for (baton_node_id i = 1; i <= 3; i++)
		assert_floor(&h, i, r3(1, 1, 0));
	struct baton_raft_status s1 = h_status(&h, 1);
	cr_assert(same(s1.needs_release, r3(1, 1, 0)));
	cr_assert_neq(s1.stalled_index, 0);
	cr_assert_eq(eligibility(&h, 1, NULL, 0), BATON_INELIGIBLE_FLOOR);
	/* Under ALL, node 1 (machine_max 1) keeps the machine version. */
	cr_assert_eq(h_status(&h, l).versions.machine.value, 1);
	/* Writes go on; node 1 replicates without applying. */
	cr_assert_eq(h_propose(&h, l, "after"), 0);
	h_run(&h, 100);
	cr_assert_eq(h_status(&h, 1).last_index, h_status(&h, l).last_index);
	cr_assert_lt(h.applied[1], s1.stalled_index);
	/* Node 1 never leads again on 1.0.0, not even alone with one other:
	 * the leader goes away, the third node takes over. */
	h.down[l] = true;
	h_run(&h, 2500); /* the other node's timeout is 1 s */
	cr_assert_eq(h_leader(&h), other_than(l, 1));
	h.down[l] = false;

	/* Stage 3: node 1 upgraded: all may lead, machine version 2. */
	restart_on(&h, 1, rel(1, 1));
	h_run(&h, 500);
	l = h_leader(&h);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		cr_assert_eq(s.stalled_index, 0);
		cr_assert_eq(eligibility(&h, i, NULL, 0), BATON_ELIGIBLE);
		assert_floor(&h, i, r3(1, 1, 0));
		cr_assert_eq(s.versions.machine.value, 2);
		cr_assert_eq(h.applied[i], h_status(&h, l).commit_index);
	}
	h_free(&h);
}

Test(halon, under_any_the_old_leader_stays)
{
	policy = BATON_ELECTION_ANY;
	struct harness h;
	halon_start(&h);
	restart_on(&h, 2, rel(1, 1));
	restart_on(&h, 3, rel(1, 1));
	h_run(&h, 1000);
	cr_assert_eq(h_leader(&h), 1);
	for (baton_node_id i = 1; i <= 3; i++) {
		assert_floor(&h, i, r3(1, 0, 0));
		cr_assert_eq(h_status(&h, i).stalled_index, 0);
		cr_assert_eq(eligibility(&h, i, NULL, 0), BATON_ELIGIBLE);
	}
	cr_assert_eq(refusals(&h, 1), 0);
	h_free(&h);
}
