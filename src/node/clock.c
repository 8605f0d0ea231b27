/*
 * Clocks: how far this node's wall clock is from its peers', and the
 * machine-time stamps a leader puts on what it proposes.
 *
 * Measuring. Every Append and AppendResult this node sends carries its
 * wall clock (struct baton_clock_sample), the last wall time it received
 * from that peer, and how long it held it. When the echo comes back the
 * round trip is (now - echo) - hold, both ends of it read on our own
 * clock, and the peer's clock read `wall` about half a round trip ago:
 *
 *   offset = wall - (now - rtt / 2)       (theirs minus ours)
 *
 * A sample whose round trip exceeds CLOCK_RTT_MAX_MS is not used (its
 * error, up to rtt / 2, would be too large), nor one older than
 * CLOCK_SAMPLE_FRESH_MS. A peer disagrees with us when even the most
 * favourable reading, |offset| - rtt / 2, exceeds the bound, and agrees
 * when the least favourable one, |offset| + rtt / 2, is within it.
 *
 * Judging (every tick, with a bound and a wall clock): a leader that a
 * majority of the voters disagree with is barred (BATON_EVENT_CLOCK): the
 * core hands leadership over and the node does not stand again until a
 * sample from the new leader agrees with its clock (or, with no such
 * evidence either way, CLOCK_BAR_MS after the last sample that disagreed).
 * A single follower out of step warns but deposes nobody. Each node warns
 * in its log, at most once every CLOCK_WARN_EVERY_MS, about a peer whose
 * clock disagrees with its own: a follower about its leader, a leader
 * about each follower.
 *
 * Stamping: baton_pipeline_machine_stamp() in pipeline.h.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Samples with a longer round trip are not used. */
#define CLOCK_RTT_MAX_MS 1000u
/* A sample counts for this long. */
#define CLOCK_SAMPLE_FRESH_MS 10000u
/* At most one warning about clocks in the log this often. */
#define CLOCK_WARN_EVERY_MS 10000u
/* A bar lasts this long after the last sample that disagreed. */
#define CLOCK_BAR_MS 30000u

enum peer_view { PEER_UNKNOWN, PEER_AGREES, PEER_DISAGREES };

static bool checked(const struct baton_pipeline *p)
{
	return p->env.wall_ms != NULL && p->c.max_clock_offset_ms > 0;
}

static uint64_t wall_now(const struct baton_pipeline *p)
{
	return p->env.wall_ms(p->env.data);
}

static uint64_t abs64(int64_t v)
{
	return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* The index of the peer's row, or n_peers when it has none. */
static uint32_t peer_at(const struct pl_clock *c, baton_node_id id)
{
	uint32_t i = 0;
	while (i < c->n_peers && c->peers[i].id != id)
		i++;
	return i;
}

static const struct pl_clock_peer *find_peer(const struct pl_clock *c,
					     baton_node_id id)
{
	uint32_t i = peer_at(c, id);
	return i < c->n_peers ? &c->peers[i] : NULL;
}

/* The peer's row, made if needed; a full table reuses the row heard from
 * least lately (a removed member's). */
static struct pl_clock_peer *peer_row(struct pl_clock *c, baton_node_id id)
{
	uint32_t i = peer_at(c, id);
	if (i < c->n_peers)
		return &c->peers[i];
	struct pl_clock_peer *row;
	if (c->n_peers < BATON_CLOCK_PEERS_MAX) {
		row = &c->peers[c->n_peers++];
	} else {
		row = &c->peers[0];
		for (uint32_t k = 1; k < c->n_peers; k++)
			if (c->peers[k].last_recv_ms < row->last_recv_ms)
				row = &c->peers[k];
	}
	memset(row, 0, sizeof *row);
	row->id = id;
	return row;
}

static const struct baton_clock_sample *sample_of(const struct baton_msg *m)
{
	if (m->type == BATON_MSG_APPEND)
		return &m->u.append.clock;
	if (m->type == BATON_MSG_APPEND_RESULT)
		return &m->u.append_result.clock;
	return NULL;
}

void pl_send(struct baton_pipeline *p, const struct baton_msg *m)
{
	if (p->env.wall_ms == NULL || sample_of(m) == NULL) {
		p->env.send(p->env.data, m);
		return;
	}
	struct baton_msg out = *m;
	struct baton_clock_sample *s = m->type == BATON_MSG_APPEND
					       ? &out.u.append.clock
					       : &out.u.append_result.clock;
	memset(s, 0, sizeof *s);
	s->wall_ms = wall_now(p);
	const struct pl_clock_peer *row = find_peer(&p->clock, m->to);
	uint64_t now = pl_now(p);
	if (row != NULL && row->last_wall_ms != 0 && now >= row->last_recv_ms) {
		s->echo_wall_ms = row->last_wall_ms;
		s->echo_hold_ms = now - row->last_recv_ms;
	}
	p->env.send(p->env.data, &out);
}

void pl_clock_receive(struct baton_pipeline *p, const struct baton_msg *m)
{
	const struct baton_clock_sample *s = sample_of(m);
	if (p->env.wall_ms == NULL || s == NULL)
		return;
	uint64_t now = pl_now(p);
	struct pl_clock_peer *row = peer_row(&p->clock, m->from);
	/* A peer of an older protocol sends none: remembered, since only
	 * that lets a leader trust its clock without samples. */
	row->bare = s->wall_ms == 0;
	if (row->bare)
		return;
	row->last_wall_ms = s->wall_ms;
	row->last_recv_ms = now;
	if (s->echo_wall_ms == 0)
		return;
	uint64_t wall = wall_now(p);
	/* Our clock stepped back, or a hold longer than the trip: no use. */
	if (wall < s->echo_wall_ms || wall - s->echo_wall_ms < s->echo_hold_ms)
		return;
	uint64_t rtt = wall - s->echo_wall_ms - s->echo_hold_ms;
	if (rtt > CLOCK_RTT_MAX_MS || s->wall_ms > INT64_MAX ||
	    wall > INT64_MAX)
		return;
	row->known = true;
	row->offset_ms = (int64_t)s->wall_ms - (int64_t)(wall - rtt / 2);
	row->rtt_ms = rtt;
	row->sample_ms = now;
	row->wall_mono_ms = (int64_t)wall - (int64_t)now;
}

static enum peer_view view_of(const struct baton_pipeline *p,
			      const struct pl_clock_peer *row)
{
	uint64_t now = pl_now(p);
	if (row == NULL || !row->known ||
	    now - row->sample_ms > CLOCK_SAMPLE_FRESH_MS)
		return PEER_UNKNOWN;
	uint64_t bound = p->c.max_clock_offset_ms;
	/* Our own wall clock stepped since the sample (set by hand, or a
	 * jump): what the sample said of it no longer holds. */
	int64_t wall_mono = (int64_t)wall_now(p) - (int64_t)now;
	if (abs64(wall_mono - row->wall_mono_ms) > bound / 2)
		return PEER_UNKNOWN;
	uint64_t off = abs64(row->offset_ms), half = row->rtt_ms / 2;
	if (off > half && off - half > bound)
		return PEER_DISAGREES;
	return off + half <= bound ? PEER_AGREES : PEER_UNKNOWN;
}

/* The voters' verdict on our clock, kept for the stamps between ticks. */
static void judge(struct baton_pipeline *p)
{
	struct pl_clock *c = &p->clock;
	struct baton_raft_status st;
	baton_raft_status(p->raft, &st);
	c->voters = c->agree = c->disagree = c->bare = 0;
	/* A leader counts only what it measured since it became leader. */
	c->verdict_as_leader = p->role == BATON_LEADER;
	for (uint32_t i = 0; i < st.config.n; i++) {
		const struct baton_member *mb = &st.config.members[i];
		if (mb->role != BATON_VOTER)
			continue;
		c->voters++;
		if (mb->id == p->c.raft.id) {
			c->agree++;
			continue;
		}
		const struct pl_clock_peer *row = find_peer(c, mb->id);
		c->bare += row != NULL && row->bare;
		enum peer_view pv = view_of(p, row);
		if (c->verdict_as_leader && pv != PEER_UNKNOWN &&
		    row->sample_ms < c->leader_since_ms)
			pv = PEER_UNKNOWN;
		c->agree += pv == PEER_AGREES;
		c->disagree += pv == PEER_DISAGREES;
	}
}

static uint32_t majority(const struct pl_clock *c)
{
	return c->voters / 2 + 1;
}

static void warn(struct baton_pipeline *p, const struct pl_clock_peer *row,
		 const char *who)
{
	uint64_t now = pl_now(p);
	if (p->clock.warned_once &&
	    now - p->clock.warned_ms < CLOCK_WARN_EVERY_MS)
		return;
	p->clock.warned_once = true;
	p->clock.warned_ms = now;
	p->clock.warnings++;
	pl_log(p, BATON_PIPELINE_LOG_WARN,
	       "clock offset: the wall clock of node %" PRIu64 " (%s) is "
	       "%+" PRId64 " ms from ours (round trip %" PRIu64 " ms), beyond "
	       "--max-clock-offset %" PRIu32 " ms; keep every node's clock "
	       "synchronised (NTP), see docs/operations.md \"Clocks\"",
	       row->id, who, row->offset_ms, row->rtt_ms,
	       p->c.max_clock_offset_ms);
}

static void set_barred(struct baton_pipeline *p, bool barred)
{
	if (p->clock.barred == barred)
		return;
	p->clock.barred = barred;
	if (barred) {
		p->clock.barred_total++;
		pl_log(p, BATON_PIPELINE_LOG_WARN,
		       "clock offset: a majority of the voters' wall clocks "
		       "differ from ours by more than --max-clock-offset "
		       "%" PRIu32 " ms: this node hands leadership over and "
		       "does not stand for election until its clock agrees "
		       "with the leader's",
		       p->c.max_clock_offset_ms);
	} else {
		pl_log(p, BATON_PIPELINE_LOG_INFO,
		       "clock offset: this node may stand for election again");
	}
	struct baton_event ev = {.type = BATON_EVENT_CLOCK};
	ev.u.clock.barred = barred;
	pl_step(p, &ev);
}

void pl_clock_tick(struct baton_pipeline *p)
{
	struct pl_clock *c = &p->clock;
	uint64_t now = pl_now(p);
	bool leader = p->role == BATON_LEADER;
	if (leader && !c->was_leader)
		c->leader_since_ms = now;
	c->was_leader = leader;
	if (p->leader != 0 && p->leader != p->c.raft.id)
		c->last_leader = p->leader;
	if (!checked(p)) {
		if (c->barred)
			set_barred(p, false); /* the bound was lifted */
		return;
	}
	judge(p);
	if (leader) {
		for (uint32_t i = 0; i < c->n_peers; i++)
			if (view_of(p, &c->peers[i]) == PEER_DISAGREES)
				warn(p, &c->peers[i], "a follower");
		if (c->voters > 1 && c->disagree >= majority(c)) {
			c->barred_until_ms = now + CLOCK_BAR_MS;
			set_barred(p, true);
		}
		return;
	}
	const struct pl_clock_peer *row =
		p->leader != 0 ? find_peer(c, p->leader) : NULL;
	enum peer_view pv = view_of(p, row);
	if (pv == PEER_DISAGREES) {
		warn(p, row, "the leader");
		if (c->barred)
			c->barred_until_ms = now + CLOCK_BAR_MS;
	}
	if (c->barred && (pv == PEER_AGREES || now >= c->barred_until_ms))
		set_barred(p, false);
}

/* ---- machine time --------------------------------------------------------
 * trusted: the wall clock may move machine time. It is when the check is
 * off (the bound is 0: batond before this rule, plus never going back),
 * when we are the only voter, and when a majority of the voters agree
 * with our clock (measured since we lead). When neither a majority agrees
 * nor one disagrees yet (a leader just elected), what we saw as a
 * follower decides: whether our old leader's clock agreed with ours. With
 * no evidence either way the wall clock is not trusted, unless the voters
 * that told us they measure nothing (an Append or a result without a
 * sample: an older protocol) leave too few to make a majority that could
 * agree with us: then, after an election timeout as leader, as before the
 * check. Silence is no such evidence: a node just restarted has heard
 * from nobody, and a bar it had died with it.
 */
static bool trusted(const struct baton_pipeline *p)
{
	const struct pl_clock *c = &p->clock;
	if (!checked(p))
		return true;
	if (c->voters == 1)
		return true; /* alone: nobody to disagree */
	if (c->barred)
		return false;
	/* The verdict of the last tick, if it was taken as leader. */
	bool verdict = c->verdict_as_leader && p->role == BATON_LEADER;
	if (verdict && c->agree >= majority(c))
		return true;
	if (verdict && c->disagree >= majority(c))
		return false;
	enum peer_view before =
		view_of(p, find_peer(&p->clock, p->clock.last_leader));
	if (before != PEER_UNKNOWN)
		return before == PEER_AGREES;
	/* Not ticked since it became leader: it has led for no time yet. */
	if (p->role != BATON_LEADER || !c->was_leader || !verdict)
		return false;
	/* We and the voters that may still measure us make a majority:
	 * wait for them (the stamps follow the monotonic clock). */
	if (c->voters - c->bare >= majority(c))
		return false;
	return pl_now(p) - c->leader_since_ms >= p->c.raft.election_timeout_ms;
}

/* Whether the log may hold a stamp that machine_ms, the machine time
 * applied, does not show yet: a command after the applied index (a node
 * just restarted leads before it applied what its log holds) or one no
 * longer held. Asked only while nothing was stamped here. */
static bool stamps_pending(const struct baton_pipeline *p)
{
	struct baton_raft_status st;
	baton_raft_status(p->raft, &st);
	for (baton_index i = p->applied + 1; i <= st.last_index; i++) {
		const struct baton_entry *e = baton_raft_entry(p->raft, i);
		if (e == NULL || e->type == BATON_ENTRY_COMMAND)
			return true;
	}
	return false;
}

uint64_t baton_pipeline_machine_stamp(struct baton_pipeline *p,
				      uint64_t machine_ms)
{
	struct pl_clock *c = &p->clock;
	uint64_t mono = pl_now(p);
	/* What the log holds may be ahead of where we were (a former
	 * leader's stamps): move on from there. */
	uint64_t projected =
		c->anchored ? c->anchor_ms + (mono - c->anchor_mono_ms) : 0;
	uint64_t base = machine_ms;
	if (c->last_stamp_ms > base)
		base = c->last_stamp_ms;
	if (!c->anchored || base > projected) {
		c->anchored = true;
		c->anchor_ms = base;
		c->anchor_mono_ms = mono;
		projected = base;
	}
	uint64_t stamp = projected;
	if (p->env.wall_ms != NULL) {
		uint64_t wall = wall_now(p);
		/* Never stamped (a cluster's first leader, with no samples
		 * yet): nothing has a TTL to cut short. Machine time 0 is
		 * no proof of that while commands wait to be applied. */
		bool never = machine_ms == 0 && c->last_stamp_ms == 0 &&
			     !stamps_pending(p);
		if (never || trusted(p))
			stamp = wall > stamp ? wall : stamp;
	}
	if (stamp > INT64_MAX)
		stamp = INT64_MAX;
	if (stamp > projected) {
		c->anchor_ms = stamp;
		c->anchor_mono_ms = mono;
	}
	BATON_ASSERT(stamp >= c->last_stamp_ms || stamp == INT64_MAX);
	c->last_stamp_ms = stamp;
	return stamp;
}

void baton_pipeline_clock(const struct baton_pipeline *p,
			  struct baton_pipeline_clock *out)
{
	memset(out, 0, sizeof *out);
	const struct pl_clock *c = &p->clock;
	out->checked = checked(p);
	out->max_offset_ms = p->c.max_clock_offset_ms;
	out->barred = c->barred;
	out->barred_total = c->barred_total;
	out->warnings = c->warnings;
	out->trusted = trusted(p);
	uint64_t now = pl_now(p);
	/* Offsets of fresh samples, ours minus theirs, by closeness. */
	int64_t offs[BATON_CLOCK_PEERS_MAX];
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->n_peers; i++) {
		const struct pl_clock_peer *row = &c->peers[i];
		if (!row->known)
			continue;
		uint32_t k = out->n_peers++;
		out->peers[k].id = row->id;
		out->peers[k].known = true;
		out->peers[k].offset_ms = row->offset_ms;
		out->peers[k].rtt_ms = row->rtt_ms;
		out->peers[k].age_ms = now - row->sample_ms;
		if (now - row->sample_ms <= CLOCK_SAMPLE_FRESH_MS)
			offs[n++] = -row->offset_ms;
	}
	if (p->role != BATON_LEADER) {
		const struct pl_clock_peer *row = find_peer(c, p->leader);
		if (p->leader != 0 && row != NULL && row->known) {
			out->offset_known = true;
			out->offset_ms = -row->offset_ms;
		}
		return;
	}
	/* Sorted by closeness; the (majority - 1)th closest decides. */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i;
		     j > 0 && abs64(offs[j]) < abs64(offs[j - 1]); j--) {
			int64_t t = offs[j];
			offs[j] = offs[j - 1];
			offs[j - 1] = t;
		}
	uint32_t need = c->voters / 2; /* followers to make a majority */
	if (need >= 1 && n >= need) {
		out->offset_known = true;
		out->offset_ms = offs[need - 1];
	}
}
