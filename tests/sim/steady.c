/*
 * Leader stability: a leader that keeps a majority and is not overloaded
 * is never deposed by a spurious event (docs/simulator.md, "Leader
 * stability"). Failure prefix: `leader stability:`.
 *
 * A leader is deposed when it steps down while it runs (a crash is not a
 * step). The deposal of leader L at time t is checked when, over the
 * whole window [t - W, t] (W: four election timeouts):
 *
 *   - L led its term since before t - W, and no node held a term at or
 *     above the one that deposed it when L won (an election that predates
 *     L's leadership, as a node left behind a partition at a higher term,
 *     deposes it legitimately);
 *   - L ran, unpaused, with its disk within bounds (every write it
 *     submitted done within a fifth of an election timeout), its wall
 *     clock right, its release not below the floor of its log, and it
 *     sent no TIMEOUT_NOW and appended no configuration (an explicit
 *     transfer, a hand-over of the release rules, a membership change),
 *     and it is still a voter of its configuration (a leader that
 *     removed itself steps down once the removal commits);
 *   - a majority of the voters of its configuration, itself included,
 *     were kept both ways: each ran unpaused with its disk within bounds,
 *     no link between it and L was cut either way, they speak a common
 *     peer protocol, and neither way lost messages for longer than a
 *     fifth of an election timeout (losses with deliveries in between
 *     are spurious);
 *   - the network is within bounds: the seed's longest delay is at most
 *     a fifth of an election timeout (else the check does not apply to
 *     the seed: delays alone may keep a leader's answers apart for longer
 *     than the election timeout over which it counts them).
 *
 * Spurious, then, is everything else: a reset connection, duplicated,
 * reordered and delayed messages, sparse losses, a follower of the
 * minority crashing, pausing or being cut off, a slow disk within bounds,
 * clients, reads, upgrades of other nodes. A deposal in such a window
 * fails the seed.
 */
#include "world.h"

#include <stdio.h>

static uint64_t window_ms(const struct sim_world *w)
{
	return 4 * (uint64_t)w->p.election_timeout_ms;
}

/* The bounds within which a slow disk, a delay and losses are spurious:
 * a fifth of an election timeout each. A leader counts a voter as live
 * when an answer of it arrived within the last election timeout; its
 * answers come at most a loss gap, twice the spread of the delays and the
 * disk's time apart, four fifths of the timeout. */
static uint64_t disk_bound_ms(const struct sim_world *w)
{
	return w->p.election_timeout_ms / 5;
}

static uint64_t loss_gap_ms(const struct sim_world *w)
{
	return w->p.election_timeout_ms / 5;
}

static bool network_within_bounds(const struct sim_world *w)
{
	return 5 * (uint64_t)w->p.net_max_ms <= w->p.election_timeout_ms;
}

static void bad(uint64_t *at, uint64_t until)
{
	if (*at < until)
		*at = until;
}

void sim_steady_node(struct sim_world *w, const struct sim_node *n,
		     uint64_t until)
{
	bad(&w->steady.node_bad_ms[n->id], until);
}

void sim_steady_disk(struct sim_world *w, const struct sim_node *n,
		     uint64_t done_ms)
{
	if (done_ms - w->now_ms > disk_bound_ms(w))
		sim_steady_node(w, n, done_ms);
}

void sim_steady_heal(struct sim_world *w)
{
	for (uint32_t a = 1; a <= w->n_ids; a++)
		for (uint32_t b = 1; b <= w->n_ids; b++)
			if (w->blocked[a][b])
				bad(&w->steady.pair_bad_ms[a][b], w->now_ms);
}

void sim_steady_sent(struct sim_world *w, const struct baton_msg *m, bool lost)
{
	uint32_t a = (uint32_t)m->from, b = (uint32_t)m->to;
	if (a == 0 || a > SIM_MAX_NODES || b == 0 || b > SIM_MAX_NODES)
		return;
	struct sim_steady *s = &w->steady;
	if (m->type == BATON_MSG_TIMEOUT_NOW)
		s->transfer_ms[a] = w->now_ms;
	if (lost) {
		s->loss_open[a][b] = true;
		return;
	}
	if (s->loss_open[a][b] &&
	    w->now_ms - s->last_ok_ms[a][b] > loss_gap_ms(w))
		bad(&s->pair_bad_ms[a][b], w->now_ms);
	s->loss_open[a][b] = false;
	s->last_ok_ms[a][b] = w->now_ms;
}

/* Impaired within the window ending now (a time in the window, or
 * later: an impairment still going on). */
static bool recent(const struct sim_world *w, uint64_t at)
{
	return at != 0 && at + window_ms(w) >= w->now_ms;
}

static bool node_steady(const struct sim_world *w, const struct sim_node *n)
{
	return sim_usable(w, n) && !recent(w, w->steady.node_bad_ms[n->id]) &&
	       !recent(w, n->paused_until_ms) && n->clock_skew_ms == 0 &&
	       !recent(w, n->clock_right_since_ms);
}

static bool way_kept(const struct sim_world *w, uint32_t a, uint32_t b)
{
	const struct sim_steady *s = &w->steady;
	if (w->blocked[a][b] || recent(w, s->pair_bad_ms[a][b]))
		return false;
	return !(s->loss_open[a][b] &&
		 w->now_ms - s->last_ok_ms[a][b] > loss_gap_ms(w));
}

static bool pair_kept(const struct sim_world *w, const struct sim_node *l,
		      const struct sim_node *f)
{
	const struct baton_profile *p = sim_profile(w, l),
				   *q = sim_profile(w, f);
	if (p->proto_max.value < q->proto_min.value ||
	    q->proto_max.value < p->proto_min.value)
		return false;
	uint32_t a = (uint32_t)l->id, b = (uint32_t)f->id;
	return node_steady(w, f) && way_kept(w, a, b) && way_kept(w, b, a);
}

/* The voters of l's configuration kept both ways (l counts itself), and
 * how many voters there are. */
static uint32_t kept_voters(const struct sim_world *w, const struct sim_node *l,
			    const struct baton_config *c, uint32_t *voters,
			    char *ids, size_t cap)
{
	uint32_t kept = 0;
	size_t len = 0;
	*voters = 0;
	ids[0] = '\0';
	for (uint32_t i = 0; i < c->n; i++) {
		if (c->members[i].role != BATON_VOTER)
			continue;
		(*voters)++;
		baton_node_id id = c->members[i].id;
		bool k = id == l->id ||
			 (id <= SIM_MAX_NODES && w->nodes[id].exists &&
			  pair_kept(w, l, &w->nodes[id]));
		kept += k;
		if (len < cap) {
			int n = snprintf(ids + len, cap - len, "%s%llu%s",
					 len > 0 ? " " : "",
					 (unsigned long long)id, k ? "" : "-");
			len += n > 0 ? (size_t)n : 0;
		}
	}
	return kept;
}

static baton_term highest_term(const struct sim_world *w)
{
	baton_term t = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		const struct sim_node *n = &w->nodes[i];
		if (!n->exists)
			continue;
		if (n->term > t)
			t = n->term;
		if (n->disk.term > t)
			t = n->disk.term;
	}
	return t;
}

void sim_steady_step(struct sim_world *w, struct sim_node *n,
		     const struct baton_update *u)
{
	struct sim_steady *s = &w->steady;
	uint32_t id = (uint32_t)n->id;
	for (uint32_t i = 0; i < u->n_entries; i++)
		if (u->entries[i].type == BATON_ENTRY_CONFIG)
			s->config_ms[id] = w->now_ms;
	if (u->role == BATON_LEADER && n->role != BATON_LEADER) {
		s->won_ms[id] = w->now_ms;
		/* Before this step's term is counted as anyone's. */
		baton_term high = highest_term(w);
		s->high_at_win[id] = high > u->term ? high : u->term;
		return;
	}
	if (n->role != BATON_LEADER || u->role == BATON_LEADER)
		return;
	w->stats.deposals++;
	/* A deposal: is it owed to anything but spurious events? */
	uint64_t t = w->now_ms, win = window_ms(w);
	if (!network_within_bounds(w))
		return; /* delays alone may outlast a lease */
	if (t < s->won_ms[id] + win ||
	    (u->term > n->term && u->term <= s->high_at_win[id]))
		return;
	if (!node_steady(w, n) || recent(w, s->transfer_ms[id]) ||
	    recent(w, s->config_ms[id]))
		return;
	struct baton_raft_status st;
	baton_raft_status(n->raft, &st);
	if (baton_release_compare(sim_profile(w, n)->release,
				  st.versions.floor) < 0)
		return;
	bool voter = false;
	for (uint32_t i = 0; i < st.config.n; i++)
		if (st.config.members[i].id == n->id &&
		    st.config.members[i].role == BATON_VOTER)
			voter = true;
	if (!voter)
		return; /* it removed itself: the removal committed */
	char ids[128];
	uint32_t voters,
		kept = kept_voters(w, n, &st.config, &voters, ids, sizeof ids);
	if (2 * kept <= voters)
		return;
	sim_fail(w,
		 "leader stability: leader %llu of term %llu (leading for "
		 "%llu ms) stepped down (now %s of term %llu) although it "
		 "kept %u of %u voters both ways and nothing but spurious "
		 "events touched it or them in the last %llu ms (voters: "
		 "%s; '-': not kept)",
		 (unsigned long long)n->id, (unsigned long long)n->term,
		 (unsigned long long)(t - s->won_ms[id]),
		 u->role == BATON_CANDIDATE	  ? "candidate"
		 : u->role == BATON_PRE_CANDIDATE ? "pre-candidate"
						  : "follower",
		 (unsigned long long)u->term, kept, voters,
		 (unsigned long long)win, ids);
}
