/*
 * Leader eligibility in the simulated world (DESIGN.md, "Leader
 * eligibility", "Release floor", "Future data"): the election policy each
 * node runs, the invariants of the rules, and their liveness.
 *
 * Policy. Each seed runs every node under version-aware or (some seeds)
 * any, the plain Raft of before the rules. A release before the version
 * rules (0.1.0) knows nothing of them whatever the seed: it runs as plain
 * Raft, and its vote requests name no release (versions.c strips it), so a
 * version-aware voter refuses it once its log records a floor.
 *
 * Invariants, after every step, for nodes under version-aware, each a
 * "version safety:" failure:
 *   - no leader runs a release below the release floor of its own log
 *     (rule 1; an enabled downgrade lowers that floor, so this is what
 *     "unless a downgrade allows it" means);
 *   - no voter grants a vote or a pre-vote to a request naming a release
 *     below the release floor of its log (rule 1, the voters' half);
 *   - no node applies a command at or after the index where the floor of
 *     its log last rose above its release, while the floor of its log stays
 *     above it (the floor hold: future data; a downgrade that lowers the
 *     floor again lifts it).
 * The floor raise and the invariants of downgrades are those of version
 * entries (versions.c); a machine made to work under a machine version it
 * lacks is machine.c's.
 *
 * Liveness. The liveness phase begins with the cluster as the safety phase
 * left it (releases mixed, a downgrade perhaps in progress), healed. In
 * seeds with downgrades it first runs a staged downgrade: one enabled to
 * the release before the floor (or the one in progress), then one node at
 * a time restarted at its target, until the core ends it. Then a staged
 * upgrade: one node at a time, lowest release first, to the newest. A step
 * waits for what is owed (below) and at least two election timeouts.
 * Throughout, every probe tick (50 ms):
 *   - whenever a node that meets rule 1 (not held, its release not below
 *     the floor of its own log) could win an election (a majority of the
 *     voters of its configuration would grant it their vote: connected to
 *     it by a common peer protocol, no more up-to-date log, and its
 *     release not below the floor of theirs), a leader exists within the
 *     leader bound, (BATON_MINORITY_WAIT_TIMEOUTS + 3) * 2 election
 *     timeouts plus ten round trips and writes on the slowest disk;
 *   - whenever a majority of the leader's voters runs one release and
 *     meets rule 1, the leader runs that release within the majority
 *     bound, four election timeouts more (version-aware only: rule 2's
 *     wait and hand-over).
 * A failure of either is "leadership liveness:", which scripts/mutants
 * counts; the longest waits, in thousandths of the bounds, are in the
 * stats. Not owed: a leader when the only nodes that could win are held
 * (a held node with the longest log blocks every node that may lead, as
 * Raft's vote rule meets rule 1; the next step upgrades it).
 */
#include "world.h"

#include <string.h>

/* ---- policy ------------------------------------------------------------- */

uint32_t sim_policy(const struct sim_world *w, const struct sim_node *n)
{
	if (sim_before_rules(sim_profile(w, n)))
		return BATON_ELECTION_ANY;
	return w->p.election_policy;
}

static const char *rel_str(struct baton_release r,
			   char buf[BATON_RELEASE_STR_MAX])
{
	return baton_release_format(r, buf);
}

/* ---- invariants ---------------------------------------------------------- */

static bool granted_to(const struct baton_update *u, baton_node_id to,
		       bool pre_vote)
{
	const struct baton_msg *lists[2] = {u->msgs, u->msgs_after_persist};
	uint32_t counts[2] = {u->n_msgs, u->n_msgs_after_persist};
	for (uint32_t k = 0; k < 2; k++)
		for (uint32_t i = 0; i < counts[k]; i++) {
			const struct baton_msg *m = &lists[k][i];
			if (m->type == BATON_MSG_VOTE_RESULT && m->to == to &&
			    m->u.vote_result.granted &&
			    m->u.vote_result.pre_vote == pre_vote)
				return true;
		}
	return false;
}

static void check_vote(struct sim_world *w, struct sim_node *n,
		       const struct baton_msg *m, const struct baton_update *u)
{
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	struct baton_release cand = m->u.vote.candidate.release;
	if (baton_release_compare(cand, s.versions.floor) >= 0)
		return;
	if (!granted_to(u, m->from, m->u.vote.pre_vote)) {
		w->stats.votes_refused++;
		return;
	}
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	sim_fail(w,
		 "version safety: node %llu granted a %s for term %llu to "
		 "node %llu, whose request names release %s, below the "
		 "release floor %s of its log",
		 (unsigned long long)n->id,
		 m->u.vote.pre_vote ? "pre-vote" : "vote",
		 (unsigned long long)m->term, (unsigned long long)m->from,
		 rel_str(cand, a), rel_str(s.versions.floor, b));
}

void sim_check_rules(struct sim_world *w, struct sim_node *n,
		     const struct baton_event *ev, const struct baton_update *u)
{
	if (w->failed || sim_policy(w, n) != BATON_ELECTION_VERSION_AWARE)
		return;
	if (ev->type == BATON_EVENT_RECEIVE &&
	    ev->u.receive.msg->type == BATON_MSG_VOTE)
		check_vote(w, n, ev->u.receive.msg, u);
	if (w->failed || u->role != BATON_LEADER)
		return;
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	struct baton_release mine = sim_profile(w, n)->release;
	if (baton_release_compare(mine, s.versions.floor) >= 0)
		return;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	sim_fail(w,
		 "version safety: leader %llu of term %llu runs release %s, "
		 "below the release floor %s of its own log (version entry "
		 "at %llu)",
		 (unsigned long long)n->id, (unsigned long long)u->term,
		 rel_str(mine, a), rel_str(s.versions.floor, b),
		 (unsigned long long)s.versions_index);
}

/* The first index of the last stretch of n's log under a floor above
 * `mine` (the first entry held when the stretch begins before it). */
static baton_index floor_since(const struct baton_raft_status *s,
			       const struct sim_node *n,
			       struct baton_release mine)
{
	baton_index since = s->first_index;
	for (baton_index i = s->last_index; i >= s->first_index && i > 0; i--) {
		const struct baton_entry *e = baton_raft_entry(n->raft, i);
		struct baton_version_state v;
		if (e == NULL || e->type != BATON_ENTRY_VERSION ||
		    baton_version_state_decode(e->buf, e->len, &v) != 0)
			continue;
		if (baton_release_compare(v.floor, mine) <= 0)
			break;
		since = i;
	}
	return since;
}

void sim_check_floor_hold(struct sim_world *w, struct sim_node *n,
			  baton_index first, baton_index upto)
{
	if (w->failed || sim_policy(w, n) != BATON_ELECTION_VERSION_AWARE)
		return;
	struct baton_raft_status s;
	baton_raft_status(n->raft, &s);
	struct baton_release mine = sim_profile(w, n)->release;
	if (baton_release_compare(s.versions.floor, mine) <= 0)
		return;
	baton_index since = floor_since(&s, n, mine);
	if (upto < since)
		return;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	sim_fail(w,
		 "version safety: node %llu (release %s) applied commands "
		 "%llu..%llu, but the release floor of its log is %s, above "
		 "its release, from %llu on",
		 (unsigned long long)n->id, rel_str(mine, a),
		 (unsigned long long)first, (unsigned long long)upto,
		 rel_str(s.versions.floor, b), (unsigned long long)since);
}

/* ---- liveness ------------------------------------------------------------ */

static uint32_t newest(const struct sim_world *w)
{
	return w->top_release;
}

/* Several times what a correct cluster needs: rule 2's wait, then an
 * election (pre-vote and vote, each a round trip and a write on the
 * slowest disk), with margin for split votes. */
static uint64_t leader_bound_ms(const struct sim_world *w)
{
	uint64_t trip = 2 * (uint64_t)w->p.net_max_ms +
			(uint64_t)w->p.disk_max_ms * w->p.disk_slowest_factor;
	return (BATON_MINORITY_WAIT_TIMEOUTS + 3) * 2 *
		       (uint64_t)w->p.election_timeout_ms +
	       10 * trip;
}

/* The leader learns the new releases (an info round each election
 * timeout), records them, and hands over at its next heartbeat. The
 * clock of this bound runs only while a hand-over can succeed
 * (handover_feasible): a transfer lasts one election timeout at most, and
 * a target with hundreds of entries to catch up (an overloaded sim, slow
 * disks) cannot make it in time, however correct the leader. */
static uint64_t majority_bound_ms(const struct sim_world *w)
{
	return leader_bound_ms(w) + 4 * (uint64_t)w->p.election_timeout_ms;
}

/* Entries a leader may hold beyond its commit index and still hand over
 * within one transfer: what one round trip of appends carries, and at
 * least a few batches. */
static uint64_t handover_backlog(const struct sim_world *w)
{
	uint64_t per_trip = (uint64_t)w->p.batch * w->p.inflight;
	return per_trip > 16 ? per_trip : 16;
}

/* Could leader l hand leadership over now: it has committed an entry of
 * its own term (the earlier terms' backlog is in) and holds no more
 * uncommitted entries than one transfer can bring a target up to. */
static bool handover_feasible(const struct sim_world *w,
			      const struct sim_node *l)
{
	struct baton_raft_status s;
	baton_raft_status(l->raft, &s);
	baton_term t = 0;
	if (!baton_raft_term_at(l->raft, s.commit_index, &t) || t != s.term)
		return false;
	return s.last_index - s.commit_index <= handover_backlog(w);
}

/* Could node n stand by its release (rule 1)? */
static bool meets_rule1(const struct sim_world *w, const struct sim_node *n,
			const struct baton_raft_status *s)
{
	if (s->stalled_index != 0)
		return false;
	if (sim_policy(w, n) == BATON_ELECTION_ANY)
		return true;
	return baton_release_compare(sim_profile(w, n)->release,
				     s->versions.floor) >= 0;
}

static bool is_voter(const struct baton_config *c, baton_node_id id)
{
	const struct baton_member *m = baton_config_find(c, id);
	return m != NULL && m->role == BATON_VOTER;
}

static bool connected(const struct baton_profile *a,
		      const struct baton_profile *b)
{
	return a->proto_min.value <= b->proto_max.value &&
	       b->proto_min.value <= a->proto_max.value;
}

/* How many voters of its own configuration would grant node c a vote now
 * (itself included): connected to it, holding no more up-to-date log, and,
 * under version-aware, whose log's floor its request's release meets
 * (none sent before the rules). */
static uint32_t grants(struct sim_world *w, const struct sim_node *c,
		       const struct baton_raft_status *cs, uint32_t *voters)
{
	const struct baton_profile *cp = sim_profile(w, c);
	struct baton_release sent = sim_before_rules(cp)
					    ? (struct baton_release){0, 0, 0}
					    : cp->release;
	uint32_t n = 0;
	*voters = 0;
	for (uint32_t i = 0; i < cs->config.n; i++) {
		baton_node_id id = cs->config.members[i].id;
		if (cs->config.members[i].role != BATON_VOTER)
			continue;
		++*voters;
		if (id == c->id) {
			n++;
			continue;
		}
		if (id > SIM_MAX_NODES || !sim_usable(w, &w->nodes[id]))
			continue;
		const struct sim_node *v = &w->nodes[id];
		struct baton_raft_status vs;
		baton_raft_status(v->raft, &vs);
		bool behind = vs.last_term != cs->last_term
				      ? vs.last_term < cs->last_term
				      : vs.last_index <= cs->last_index;
		bool floor =
			sim_policy(w, v) == BATON_ELECTION_ANY ||
			baton_release_compare(sent, vs.versions.floor) >= 0;
		n += connected(cp, sim_profile(w, v)) && behind && floor;
	}
	return n;
}

struct judged {
	/* The most votes a node meeting rule 1 could win now, and of how
	 * many voters (its configuration's). */
	uint32_t able, voters;
	/* The release a majority of the leader's voters runs, each meeting
	 * rule 1 (UINT32_MAX: none), and how many. */
	uint32_t major, major_n, major_of;
};

/* A leader is owed when some node meeting rule 1 could win an election
 * now: a majority of the voters of its configuration would grant it their
 * vote. (A held node with a longer log than every node that may lead
 * blocks them all: Raft's vote rule meets rule 1, and no bound holds;
 * upgrading the held node ends it.) */
static void judge_candidates(struct sim_world *w, struct judged *j)
{
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		const struct sim_node *c = &w->nodes[i];
		if (!sim_usable(w, c))
			continue;
		struct baton_raft_status s;
		baton_raft_status(c->raft, &s);
		if (!is_voter(&s.config, c->id) || !meets_rule1(w, c, &s))
			continue;
		uint32_t voters, n = grants(w, c, &s, &voters);
		if (n >= voters / 2 + 1 &&
		    (j->voters == 0 || n * j->voters > j->able * voters)) {
			j->able = n;
			j->voters = voters;
		}
	}
}

static void judge_majority(struct sim_world *w, const struct sim_node *l,
			   struct judged *j)
{
	struct baton_raft_status ls;
	baton_raft_status(l->raft, &ls);
	uint32_t by_release[SIM_MAX_NODES + 1] = {0};
	for (uint32_t i = 0; i < ls.config.n; i++) {
		baton_node_id id = ls.config.members[i].id;
		if (ls.config.members[i].role != BATON_VOTER)
			continue;
		j->major_of++;
		if (id > SIM_MAX_NODES || !sim_usable(w, &w->nodes[id]))
			continue;
		const struct sim_node *n = &w->nodes[id];
		struct baton_raft_status s;
		baton_raft_status(n->raft, &s);
		if (meets_rule1(w, n, &s) && n->release <= SIM_MAX_NODES)
			by_release[n->release]++;
	}
	for (uint32_t r = 0; r <= SIM_MAX_NODES; r++)
		if (by_release[r] >= j->major_of / 2 + 1) {
			j->major = r;
			j->major_n = by_release[r];
		}
}

/* For the trace of a failing seed: what each node believes. */
static void trace_nodes(struct sim_world *w)
{
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		const struct sim_node *n = &w->nodes[i];
		if (!n->alive)
			continue;
		struct baton_raft_status s;
		baton_raft_status(n->raft, &s);
		char voters[64] = "", a[BATON_RELEASE_STR_MAX],
		     b[BATON_RELEASE_STR_MAX];
		size_t used = 0;
		for (uint32_t k = 0; k < s.config.n && used < sizeof voters;
		     k++) {
			int m = snprintf(
				voters + used, sizeof voters - used, "%s%llu%s",
				k ? "," : "",
				(unsigned long long)s.config.members[k].id,
				s.config.members[k].role == BATON_VOTER ? ""
									: "L");
			used += m > 0 ? (size_t)m : 0;
		}
		sim_trace(w,
			  "state: node %u release %s role %u term %llu last "
			  "%llu/%llu commit %llu config {%s} floor %s stalled "
			  "%llu eligibility %u",
			  i, sim_release_name(w, n->release, a), s.role,
			  (unsigned long long)s.term,
			  (unsigned long long)s.last_index,
			  (unsigned long long)s.last_term,
			  (unsigned long long)s.commit_index, voters,
			  baton_release_format(s.versions.floor, b),
			  (unsigned long long)s.stalled_index, s.eligibility);
	}
}

static void fail_leader(struct sim_world *w, const struct judged *j,
			uint64_t waited)
{
	trace_nodes(w);
	sim_fail(w,
		 "leadership liveness: no leader %llu ms after a node that "
		 "may lead (rule 1) could win %u of %u votes (bound %llu ms)",
		 (unsigned long long)waited, j->able, j->voters,
		 (unsigned long long)leader_bound_ms(w));
}

static void fail_majority(struct sim_world *w, const struct judged *j,
			  const struct sim_node *l, uint64_t waited)
{
	trace_nodes(w);
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	sim_fail(w,
		 "leadership liveness: %u of %u voters run release %s and "
		 "may lead, but %llu ms later node %llu (release %s) still "
		 "leads (bound %llu ms)",
		 j->major_n, j->major_of, sim_release_name(w, j->major, a),
		 (unsigned long long)waited,
		 (unsigned long long)(l != NULL ? l->id : 0),
		 l != NULL ? sim_release_name(w, l->release, b) : "none",
		 (unsigned long long)majority_bound_ms(w));
}

/* The checks of one probe tick: false once one failed. *settled: nothing
 * is owed now (a leader where owed, of the majority release where
 * owed). */
static bool check_leadership(struct sim_world *w, struct sim_node *l,
			     struct judged *j, bool *settled)
{
	uint64_t now = w->now_ms;
	*j = (struct judged){.major = UINT32_MAX};
	judge_candidates(w, j);
	if (l != NULL)
		judge_majority(w, l, j);
	bool owed_leader = j->voters > 0;
	bool owed_major =
		w->p.election_policy == BATON_ELECTION_VERSION_AWARE &&
		j->major != UINT32_MAX;
	/* Without a leader, what is owed is a leader (above). */
	bool leader_ok = !owed_leader || l != NULL;
	bool major_ok = !owed_major || l == NULL || l->release == j->major;
	w->rules_tick_ms = now - w->rules_probe_ms;
	w->rules_probe_ms = now;
	if (leader_ok)
		w->leader_ok_ms = now;
	if (major_ok)
		w->majority_ok_ms = now;
	else if (!handover_feasible(w, l))
		/* The clock stops while no transfer could succeed. */
		w->majority_ok_ms += w->rules_tick_ms;
	uint64_t lw = now - w->leader_ok_ms, mw = now - w->majority_ok_ms;
	uint64_t lp = lw * 1000 / leader_bound_ms(w),
		 mp = mw * 1000 / majority_bound_ms(w);
	if (lp > w->stats.leader_wait_per_mille)
		w->stats.leader_wait_per_mille = lp;
	if (mp > w->stats.majority_wait_per_mille)
		w->stats.majority_wait_per_mille = mp;
	if (lw > leader_bound_ms(w)) {
		fail_leader(w, j, lw);
		return false;
	}
	if (mw > majority_bound_ms(w)) {
		fail_majority(w, j, l, mw);
		return false;
	}
	*settled = leader_ok && major_ok;
	return true;
}

/* Restart n at release r now: the next step. */
static void step(struct sim_world *w, struct sim_node *l,
		 const struct judged *j, struct sim_node *n, uint32_t r)
{
	char a[BATON_RELEASE_STR_MAX];
	w->stats.rules_steps++;
	sim_trace(w,
		  "liveness: step %llu: leader %llu (release %s), %u of %u "
		  "voters run the majority release",
		  (unsigned long long)w->stats.rules_steps,
		  (unsigned long long)(l != NULL ? l->id : 0),
		  l != NULL ? sim_release_name(w, l->release, a) : "-",
		  j->major_n, j->major_of);
	sim_restart_at(w, n, r, false);
	sim_node_boot(w, n);
	w->step_from_ms = w->leader_ok_ms = w->majority_ok_ms = w->now_ms;
}

/* The staged downgrade, in seeds with downgrades: enable one to the
 * release before the floor (or go on with one in progress), then restart
 * one node at a time at its target, each once its snapshot covers the
 * entry that enabled it (or after a while). True once over: the core
 * ended the downgrade, or none could be enabled. */
static bool stage_down(struct sim_world *w, struct sim_node *l,
		       const struct judged *j)
{
	uint64_t et = w->p.election_timeout_ms, now = w->now_ms;
	/* A third of the liveness phase at most: the rest is the upgrade's
	 * and the probe's. */
	if (w->p.downgrade_every_ms == 0 ||
	    now - w->stage_from_ms > w->p.liveness_ms / 3)
		return true;
	/* No leader, and none owed (the releases left no quorum that could
	 * lead): the staged upgrade brings them back. */
	if (l == NULL)
		return now - w->step_from_ms > 20 * et;
	struct baton_raft_status s;
	const struct baton_downgrade *d = sim_downgrade_of(l, &s);
	if (d == NULL) {
		const struct baton_profile *prev = sim_downgrade_target(w, &s);
		if (w->down_seen || now - w->stage_from_ms > 20 * et ||
		    prev == NULL)
			return true;
		sim_downgrade_request(w, l, BATON_DOWNGRADE_ENABLE,
				      prev->release);
		return false;
	}
	w->down_seen = true;
	uint32_t t = sim_release_index(w, d->target);
	struct sim_node *pick = NULL, *any = NULL;
	for (uint32_t i = 1; i <= w->n_ids && t != UINT32_MAX; i++) {
		struct sim_node *n = &w->nodes[i];
		if (!n->exists || n->release <= t)
			continue;
		any = n;
		if (sim_downgrade_ready(n, d))
			pick = n;
	}
	if (pick == NULL && now - w->step_from_ms > 20 * et)
		pick = any;
	if (pick != NULL) {
		step(w, l, j, pick, t);
		return false;
	}
	/* Every node runs the target: the leader ends the downgrade once its
	 * info round saw them all and the entry commits, which a backlog of
	 * uncommitted entries delays (the clock stops then, as for a
	 * hand-over). */
	if (any != NULL) {
		w->down_owed_ms = 0;
		return false;
	}
	if (w->down_owed_ms == 0)
		w->down_owed_ms = now;
	else if (!handover_feasible(w, l))
		w->down_owed_ms += w->rules_tick_ms;
	if (now - w->down_owed_ms > majority_bound_ms(w)) {
		char a[BATON_RELEASE_STR_MAX];
		sim_fail(w,
			 "liveness: every node runs the downgrade's target "
			 "%s, but %llu ms later it has not ended",
			 baton_release_format(d->target, a),
			 (unsigned long long)(now - w->down_owed_ms));
	}
	return false;
}

/* The next node to upgrade: the lowest release, then the lowest id. */
static struct sim_node *next_to_upgrade(struct sim_world *w)
{
	struct sim_node *best = NULL;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		struct sim_node *n = &w->nodes[i];
		if (n->exists && n->release != newest(w) &&
		    (best == NULL || n->release < best->release))
			best = n;
	}
	return best;
}

bool sim_rules_liveness(struct sim_world *w)
{
	struct sim_node *l = sim_find_leader(w);
	struct judged j;
	bool settled;
	if (!check_leadership(w, l, &j, &settled) || !settled ||
	    w->now_ms - w->step_from_ms <
		    2 * (uint64_t)w->p.election_timeout_ms)
		return false;
	if (!w->rules_up) {
		if (!stage_down(w, l, &j))
			return false;
		w->rules_up = true;
		sim_trace(w, "liveness: the staged upgrade begins");
	}
	struct sim_node *n = next_to_upgrade(w);
	if (n != NULL) {
		step(w, l, &j, n, newest(w));
		return false;
	}
	sim_trace(w, "liveness: every node runs the newest release");
	w->rules_done = true;
	return true;
}
