/*
 * The version rules a leader follows (DESIGN.md, "Info" and "Machine
 * upgrade", after Ra): it asks the members for their capability profiles
 * with info requests and keeps what they answer this term (the live
 * table); it writes the version table into the log when the answers differ
 * from it; and it raises the effective machine version when its strategy
 * allows, never above its own machine_max and never down. Every node
 * answers info requests, stalled or not. docs/core.md, "The version
 * rules", says more.
 */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- the live table ------------------------------------------------------ */

static struct baton__live *live_find(const struct baton_raft *r,
				     baton_node_id id)
{
	BATON_ASSERT(r->n_live <= BATON_MAX_MEMBERS);
	BATON_ASSERT(id != 0);
	for (uint32_t i = 0; i < r->n_live; i++)
		if (r->live[i].id == id)
			return (struct baton__live *)&r->live[i];
	return NULL;
}

/* What the leader knows of member id this term (itself: its own profile),
 * or NULL while it is unknown. */
const struct baton_profile *baton__upgrade_known(const struct baton_raft *r,
						 baton_node_id id)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	if (id == r->o.id)
		return &r->o.profile;
	const struct baton__live *l = live_find(r, id);
	BATON_ASSERT(l == NULL || l->id == id);
	return l != NULL ? &l->profile : NULL;
}

bool baton__upgrade_heard_lately(const struct baton_raft *r, baton_node_id id)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->info_all_seq[1] <= r->info_all_seq[0]);
	if (id == r->o.id)
		return true;
	const struct baton__live *l = live_find(r, id);
	/* The older of the last two all-rounds went out at least an election
	 * timeout ago: an answer to it (or later) is recent; before a second
	 * round, any answer of this term is. */
	return l != NULL && l->seq >= r->info_all_seq[1];
}

static bool profile_equal(const struct baton_profile *a,
			  const struct baton_profile *b)
{
	BATON_ASSERT(a != NULL && b != NULL);
	BATON_ASSERT(a->proto_min.value <= a->proto_max.value);
	return baton_release_compare(a->release, b->release) == 0 &&
	       a->proto_min.value == b->proto_min.value &&
	       a->proto_max.value == b->proto_max.value &&
	       a->machine_max.value == b->machine_max.value;
}

static bool state_equal(const struct baton_version_state *a,
			const struct baton_version_state *b)
{
	BATON_ASSERT(baton_version_state_valid(a));
	BATON_ASSERT(baton_version_state_valid(b));
	if (a->machine.value != b->machine.value ||
	    baton_release_compare(a->floor, b->floor) != 0 || a->n != b->n ||
	    a->held != b->held ||
	    memcmp(&a->downgrade, &b->downgrade, sizeof a->downgrade) != 0)
		return false;
	for (uint32_t i = 0; i < a->n; i++)
		if (a->members[i].id != b->members[i].id ||
		    !profile_equal(&a->members[i].profile,
				   &b->members[i].profile))
			return false;
	return true;
}

/* Behind us: an older release or fewer machine versions. Such a member is
 * asked again every heartbeat, so the leader sees its upgrade soon. */
static bool behind(const struct baton_raft *r, const struct baton_profile *p)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(p->machine_max.value >= 1);
	return baton_release_compare(p->release, r->o.profile.release) < 0 ||
	       p->machine_max.value < r->o.profile.machine_max.value;
}

/* ---- info requests ------------------------------------------------------- */

/* One round: to every other member, or only to those unknown or behind. */
static void info_round(struct baton_raft *r, bool all)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
	r->info_seq++;
	if (all) {
		r->info_all_seq[1] = r->info_all_seq[0];
		r->info_all_seq[0] = r->info_seq;
	}
	for (uint32_t i = 0; i < r->config.n; i++) {
		baton_node_id id = r->config.members[i].id;
		if (id == r->o.id)
			continue;
		const struct baton_profile *p = baton__upgrade_known(r, id);
		if (!all && p != NULL && !behind(r, p))
			continue;
		struct baton_msg *m = baton__send(r, BATON_MSG_INFO, id);
		if (m != NULL)
			m->u.info.seq = r->info_seq;
	}
}

void baton__upgrade_start(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->leader_id == r->o.id);
	/* Answers of earlier terms say nothing of now: members may have
	 * restarted on other releases meanwhile. */
	r->n_live = 0;
	memset(r->info_all_seq, 0, sizeof r->info_all_seq);
	r->info_deadline_ms = r->now_ms + r->o.heartbeat_interval_ms;
	r->info_all_deadline_ms = r->now_ms + r->o.election_timeout_ms;
	info_round(r, true);
}

void baton__upgrade_info_tick(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->info_all_deadline_ms <=
		     r->now_ms + r->o.election_timeout_ms);
	/* A clock of its own, not the heartbeat's: reads and appends push
	 * the heartbeat deadline back, and under steady load it may never
	 * fire, while the rounds must go on (found by the rolling-upgrade
	 * run of the fault harness: a member upgraded under load stayed
	 * "machine_max 1" for the leader). */
	if (r->now_ms < r->info_deadline_ms)
		return;
	r->info_deadline_ms = r->now_ms + r->o.heartbeat_interval_ms;
	/* Once per election timeout everyone, known or not: a member that
	 * restarted on another release says so. */
	bool all = r->now_ms >= r->info_all_deadline_ms;
	if (all)
		r->info_all_deadline_ms = r->now_ms + r->o.election_timeout_ms;
	info_round(r, all);
	/* The lease is renewed on this clock too: re-check rule 2. */
	baton__eligibility_leader_check(r);
}

void baton__upgrade_config_changed(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	uint32_t kept = 0;
	for (uint32_t i = 0; i < r->n_live; i++)
		if (baton__is_member(r, r->live[i].id))
			r->live[kept++] = r->live[i];
	BATON_ASSERT(kept <= r->n_live);
	r->n_live = kept;
}

void baton__recv_info(struct baton_raft *r, const struct baton_msg *m)
{
	BATON_ASSERT(m->type == BATON_MSG_INFO && m->term == r->term);
	BATON_ASSERT(m->from != r->o.id);
	/* Anyone asks, anyone answers: a profile is no secret, and a
	 * stalled node's answer is what tells the leader it lags. */
	struct baton_msg *reply =
		baton__send(r, BATON_MSG_INFO_RESULT, m->from);
	if (reply == NULL)
		return;
	reply->u.info_result.seq = m->u.info.seq;
	reply->u.info_result.profile = r->o.profile;
	reply->u.info_result.memory_max_bytes = r->o.memory_max_bytes;
}

void baton__recv_info_result(struct baton_raft *r, const struct baton_msg *m)
{
	const struct baton_msg_info_result *ir = &m->u.info_result;
	BATON_ASSERT(m->type == BATON_MSG_INFO_RESULT && m->term == r->term);
	/* Only this term's leader asked, and only members count. */
	if (r->role != BATON_LEADER || !baton__is_member(r, m->from))
		return;
	if (ir->seq == 0 || ir->seq > r->info_seq ||
	    ir->profile.proto_min.value > ir->profile.proto_max.value ||
	    ir->profile.machine_max.value == 0)
		return; /* not an answer to us, or malformed */
	struct baton__live *l = live_find(r, m->from);
	if (l == NULL) {
		BATON_ASSERT(r->n_live < BATON_MAX_MEMBERS);
		l = &r->live[r->n_live++];
		l->id = m->from;
	} else if (ir->seq < l->seq) {
		return; /* overtaken by the answer to a later round */
	}
	l->seq = ir->seq;
	l->profile = ir->profile;
	l->memory_max_bytes = ir->memory_max_bytes;
	BATON_ASSERT(l->id == m->from && l->seq <= r->info_seq);
}

/* ---- the effective machine version --------------------------------------- */

/* ALL: min(machine_max) over every member, the leader included, once all
 * are known this term; 0 while one is unknown. */
static uint32_t ready_all(const struct baton_raft *r)
{
	uint32_t v = r->o.profile.machine_max.value;
	BATON_ASSERT(r->config.n >= 1);
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_profile *p =
			baton__upgrade_known(r, r->config.members[i].id);
		if (p == NULL)
			return 0;
		if (p->machine_max.value < v)
			v = p->machine_max.value;
	}
	BATON_ASSERT(v <= r->o.profile.machine_max.value);
	return v;
}

/* QUORUM: the highest v up to our machine_max that a majority of the
 * voters implement (unknown voters do not count); 0 if none above `now`. */
static uint32_t ready_quorum(const struct baton_raft *r, uint32_t now)
{
	uint32_t quorum = baton__voter_count(r) / 2 + 1;
	BATON_ASSERT(now >= 1);
	for (uint32_t v = r->o.profile.machine_max.value; v > now; v--) {
		uint32_t ready = 0;
		for (uint32_t i = 0; i < r->config.n; i++) {
			const struct baton_member *mb = &r->config.members[i];
			const struct baton_profile *p =
				baton__upgrade_known(r, mb->id);
			ready += mb->role == BATON_VOTER && p != NULL &&
				 p->machine_max.value >= v;
		}
		BATON_ASSERT(ready <= baton__voter_count(r));
		if (ready >= quorum)
			return v;
	}
	return 0;
}

/* ---- the release floor (Halon's rule) ------------------------------------ */

struct baton_release baton__upgrade_floor_allowed(const struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	/* The releases of the voters that told us this term (ourselves
	 * included), newest first. */
	struct baton_release rel[BATON_MAX_MEMBERS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_member *mb = &r->config.members[i];
		const struct baton_profile *p = baton__upgrade_known(r, mb->id);
		if (mb->role != BATON_VOTER || p == NULL)
			continue;
		uint32_t at = n++;
		while (at > 0 &&
		       baton_release_compare(rel[at - 1], p->release) < 0) {
			rel[at] = rel[at - 1];
			at--;
		}
		rel[at] = p->release;
	}
	uint32_t quorum = baton__voter_count(r) / 2 + 1;
	BATON_ASSERT(n <= baton__voter_count(r));
	struct baton_release floor = r->versions.floor;
	if (n < quorum)
		return floor; /* no majority heard from: nothing proven */
	/* The newest release a majority runs (or newer): the quorum-th
	 * newest. A row of the log is not enough: a member that answered
	 * a past leader may since have been rolled back. And never above
	 * our own release: a floor we could not lead under. */
	struct baton_release to = rel[quorum - 1];
	if (baton_release_compare(to, r->o.profile.release) > 0)
		to = r->o.profile.release;
	return baton_release_compare(to, floor) > 0 ? to : floor;
}

/* The lowest machine_max of the members known to run `floor` or newer
 * (0: none known). Under QUORUM the machine version stays within it, so
 * every node the floor lets lead can apply what it leads: the floor no
 * longer follows the leader's release up (Halon's rule), so a release
 * between the floor and the leader's may lack what a quorum has. */
static uint32_t floor_holders_max(const struct baton_raft *r,
				  struct baton_release floor)
{
	uint32_t v = 0;
	BATON_ASSERT(r->role == BATON_LEADER);
	for (uint32_t i = 0; i < r->config.n; i++) {
		const struct baton_profile *p =
			baton__upgrade_known(r, r->config.members[i].id);
		if (p == NULL || baton_release_compare(p->release, floor) < 0)
			continue;
		if (v == 0 || p->machine_max.value < v)
			v = p->machine_max.value;
	}
	BATON_ASSERT(v <= r->o.profile.machine_max.value ||
		     baton_release_compare(r->o.profile.release, floor) < 0);
	return v;
}

/* The effective machine version the strategy allows now (never lower),
 * under release floor `floor`. */
static struct baton_machine_version machine_allowed(const struct baton_raft *r,
						    struct baton_release floor)
{
	struct baton_machine_version now = r->versions.machine;
	uint32_t v = r->o.machine_upgrade == BATON_UPGRADE_QUORUM
			     ? ready_quorum(r, now.value)
			     : ready_all(r);
	uint32_t cap = floor_holders_max(r, floor);
	if (v > cap)
		v = cap;
	if (v > now.value)
		now.value = v;
	BATON_ASSERT(now.value >= r->versions.machine.value);
	BATON_ASSERT(now.value == r->versions.machine.value ||
		     baton__machine_ok(r, now));
	return now;
}

/* Insert a row, keeping the ids in increasing order. */
static void put_row(struct baton_version_state *s, baton_node_id id,
		    const struct baton_profile *p)
{
	BATON_ASSERT(s->n < BATON_MAX_MEMBERS && id != 0);
	uint32_t at = s->n;
	while (at > 0 && s->members[at - 1].id > id) {
		s->members[at] = s->members[at - 1];
		at--;
	}
	BATON_ASSERT(at == 0 || s->members[at - 1].id < id);
	s->members[at].id = id;
	s->members[at].profile = *p;
	s->n++;
}

static void desired(const struct baton_raft *r, bool finalize,
		    struct baton_version_state *out)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	struct baton_version_state s;
	memset(&s, 0, sizeof s);
	s.floor = r->versions.floor;
	s.downgrade = r->versions.downgrade;
	if (baton__downgrade_done(r))
		memset(&s.downgrade, 0, sizeof s.downgrade);
	bool downgrading = !baton_release_none(s.downgrade.target);
	bool manual = r->o.machine_upgrade == BATON_UPGRADE_MANUAL;
	/* The burn-in hold: recorded by a leader under MANUAL, honoured by
	 * every leader, lifted for one entry by a finalize (and for good
	 * when this leader is not under MANUAL). */
	bool held = !finalize && (r->versions.held || manual);
	s.held = finalize ? manual : held;
	/* A fresh log (no floor yet) is not an upgrade to hold: it takes
	 * its first floor and machine version together, once every member
	 * answered (so a quick majority does not fix the floor while the
	 * machine version waits for the last member, then held). */
	if (held && baton_release_none(r->versions.floor) && ready_all(r) != 0)
		held = false; /* recorded all the same */
	/* The release floor (DESIGN.md, Halon's rule): the newest release
	 * a majority of the voters runs, up to ours. Not while a downgrade
	 * lowers it on purpose, nor during a hold. */
	if (!downgrading && !held)
		s.floor = baton__upgrade_floor_allowed(r);
	/* One row per member: what it told us this term, else the row the
	 * log has (an unknown member keeps its old row), else none. Rows of
	 * non-members go. */
	for (uint32_t i = 0; i < r->config.n; i++) {
		baton_node_id id = r->config.members[i].id;
		const struct baton_profile *p = baton__upgrade_known(r, id);
		const struct baton_member_versions *old =
			baton_version_state_find(&r->versions, id);
		if (p == NULL && old != NULL)
			p = &old->profile;
		if (p != NULL)
			put_row(&s, id, p);
	}
	s.machine = downgrading || held ? r->versions.machine
					: machine_allowed(r, s.floor);
	BATON_ASSERT(baton_version_state_valid(&s));
	BATON_ASSERT(baton_release_compare(s.floor, r->versions.floor) >= 0 ||
		     downgrading);
	*out = s;
}

void baton__upgrade_desired(const struct baton_raft *r,
			    struct baton_version_state *out)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	desired(r, false, out);
	BATON_ASSERT(out->held ==
		     (r->versions.held ||
		      r->o.machine_upgrade == BATON_UPGRADE_MANUAL));
}

void baton__upgrade_final(const struct baton_raft *r,
			  struct baton_version_state *out)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	desired(r, true, out);
	BATON_ASSERT(out->held ==
		     (r->o.machine_upgrade == BATON_UPGRADE_MANUAL));
}

void baton__upgrade_tick(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER);
	BATON_ASSERT(r->versions_index <= baton__last_index(r));
	/* One version entry in flight at a time; none while leadership is
	 * handed over (the log must stop growing) or from a stalled leader
	 * (on its way out). */
	if (r->versions_index > r->commit_index || r->transfer_target != 0 ||
	    r->stalled_index != 0)
		return;
	struct baton_version_state want;
	baton__upgrade_desired(r, &want);
	if (state_equal(&want, &r->versions))
		return;
	if (baton__versions_entry(r, &want) != 0) {
		r->alloc_failed = true; /* the next tick tries again */
		return;
	}
	baton__broadcast_append(r);
}

/* ---- introspection --------------------------------------------------------
 */

/* Whether member mb keeps the effective version below target. */
static bool waits_for(const struct baton_raft *r, const struct baton_member *mb,
		      uint32_t target)
{
	const struct baton_profile *p = baton__upgrade_known(r, mb->id);
	BATON_ASSERT(target >= 1);
	if (r->o.machine_upgrade == BATON_UPGRADE_QUORUM &&
	    mb->role != BATON_VOTER)
		return false; /* learners do not count in a quorum */
	return p == NULL || p->machine_max.value < target;
}

void baton_raft_upgrade_status(const struct baton_raft *r,
			       struct baton_upgrade_status *out)
{
	memset(out, 0, sizeof *out);
	if (r->role != BATON_LEADER)
		return;
	out->leader = true;
	out->strategy = r->o.machine_upgrade;
	out->target = r->o.profile.machine_max;
	uint32_t target = out->target.value;
	/* Members by increasing id (a configuration keeps join order). */
	baton_node_id ids[BATON_MAX_MEMBERS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->config.n; i++) {
		baton_node_id id = r->config.members[i].id;
		uint32_t at = n++;
		while (at > 0 && ids[at - 1] > id) {
			ids[at] = ids[at - 1];
			at--;
		}
		ids[at] = id;
	}
	BATON_ASSERT(n == r->config.n && n <= BATON_MAX_MEMBERS);
	bool ready = r->versions.machine.value >= target ||
		     (r->o.machine_upgrade == BATON_UPGRADE_QUORUM &&
		      ready_quorum(r, target - 1) == target);
	for (uint32_t i = 0; i < n; i++) {
		const struct baton_member *mb =
			baton_config_find(&r->config, ids[i]);
		const struct baton_profile *p = baton__upgrade_known(r, ids[i]);
		out->members[i].id = ids[i];
		out->members[i].known = p != NULL;
		if (p != NULL)
			out->members[i].profile = *p;
		if (ids[i] == r->o.id) {
			out->members[i].memory_max_bytes =
				r->o.memory_max_bytes;
		} else {
			const struct baton__live *l = live_find(r, ids[i]);
			if (l != NULL)
				out->members[i].memory_max_bytes =
					l->memory_max_bytes;
		}
		if (!ready && waits_for(r, mb, target))
			out->waiting[out->n_waiting++] = ids[i];
	}
	out->n = n;
	BATON_ASSERT(out->n_waiting <= out->n);
}

void baton__say_why(char *why, size_t cap, const char *fmt, ...)
{
	if (why == NULL || cap == 0)
		return;
	BATON_ASSERT(fmt != NULL);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, cap, fmt, ap);
	va_end(ap);
}
