/*
 * The nemesis: faults at random moments (crashes, pauses, partitions), and
 * faults timed to protocol moments ("buggify"), all drawn from the seed.
 */
#include "world.h"

#include <string.h>

/* ---- the nemesis ------------------------------------------------------------
 */

void sim_heal(struct sim_world *w)
{
	sim_steady_heal(w);
	memset(w->blocked, 0, sizeof w->blocked);
}

static void partition(struct sim_world *w)
{
	/* Half the time the leader is cut off: that is when a stale leader
	 * and a new one overlap. */
	uint32_t kind = sim_chance(&w->rng, 500)
				? 1
				: (uint32_t)sim_range(&w->rng, 0, 2);
	struct sim_node *leader = sim_find_leader(w);
	sim_heal(w);
	if (kind == 0 || (kind == 1 && leader == NULL)) {
		/* A random split in two. */
		bool side[SIM_MAX_NODES + 1];
		for (uint32_t i = 1; i <= w->n_ids; i++)
			side[i] = sim_chance(&w->rng, 500);
		for (uint32_t a = 1; a <= w->n_ids; a++)
			for (uint32_t b = 1; b <= w->n_ids; b++)
				w->blocked[a][b] = side[a] != side[b];
		sim_trace(w, "nemesis: random partition");
	} else if (kind == 1) {
		uint32_t l = (uint32_t)leader->id;
		for (uint32_t i = 1; i <= w->n_ids; i++)
			w->blocked[l][i] = w->blocked[i][l] = true;
		sim_trace(w, "nemesis: isolate leader %u", l);
		/* Its clients still reach it, while the others elect a new
		 * leader and it may still believe it leads. */
		uint32_t reads = (uint32_t)sim_range(&w->rng, 2, 6);
		for (uint32_t i = 0; i < reads; i++)
			sim_schedule(
				w,
				sim_range(
					&w->rng, 0,
					3 * (uint64_t)w->p.election_timeout_ms),
				EV_READ_AT, l, NULL);
	} else {
		/* Asymmetric: some links fail one way only. */
		uint32_t links = (uint32_t)sim_range(&w->rng, 1, 2 * w->n_ids);
		for (uint32_t k = 0; k < links; k++) {
			uint32_t a = (uint32_t)sim_range(&w->rng, 1, w->n_ids);
			uint32_t b = (uint32_t)sim_range(&w->rng, 1, w->n_ids);
			w->blocked[a][b] = true;
		}
		sim_trace(w, "nemesis: %u one-way link failures", links);
	}
	w->stats.partitions++;
	sim_schedule(w, sim_range(&w->rng, 50, w->p.partition_max_ms), EV_HEAL,
		     0, NULL);
}

/* ---- closed connections (fast failure detection) --------------------------
 */

void sim_crash_closes(struct sim_world *w, struct sim_node *n)
{
	if (w->done || !sim_chance(&w->rng, w->p.close_per_mille))
		return;
	uint32_t id = (uint32_t)n->id, told = 0, reachable = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++) {
		if (i == id || !w->nodes[i].alive)
			continue;
		reachable++;
		/* The FIN is lost across a cut link, as in a partition. */
		if (w->blocked[id][i])
			continue;
		told++;
		/* The FIN follows the data on the stream: after whatever
		 * the link still carries in order. */
		uint64_t at = w->now_ms + sim_range(&w->rng, w->p.net_min_ms,
						    w->p.net_max_ms);
		if (at < w->link_last_ms[id][i])
			at = w->link_last_ms[id][i];
		sim_schedule_close(w, at - w->now_ms, i, id);
	}
	w->stats.closes++;
	sim_trace(w, "node %u's kernel closes its connections (%u peers told)",
		  id, told);
	/* A leader's death that every live peer hears of: the next leader
	 * is timed against it. */
	if (n->role == BATON_LEADER && sim_usable(w, n) && told == reachable &&
	    told > 0) {
		w->kill_watch = true;
		w->kill_ms = w->now_ms;
		w->kill_term = n->term;
	}
}

/* A connection to the leader resets while both ends live, and both learn
 * it: the follower must not depose the leader (pre-vote and the other
 * followers' leases), nor the leader step down. */
static void spurious_close(struct sim_world *w)
{
	struct sim_node *l = sim_find_leader(w);
	struct sim_node *f = sim_random_alive(w);
	if (l == NULL || f == NULL || f == l)
		return;
	w->stats.spurious_closes++;
	sim_trace(w, "nemesis: node %llu's connection to leader %llu resets",
		  (unsigned long long)f->id, (unsigned long long)l->id);
	sim_schedule_close(w, sim_range(&w->rng, 0, w->p.net_max_ms),
			   (uint32_t)f->id, (uint32_t)l->id);
	/* A reset reaches both ends: the leader must not step down either
	 * (steady.c). */
	sim_schedule_close(w, sim_range(&w->rng, 0, w->p.net_max_ms),
			   (uint32_t)l->id, (uint32_t)f->id);
}

void sim_failover_kill(struct sim_world *w)
{
	if (w->liveness)
		return;
	uint64_t every = w->p.failover_every_ms;
	sim_schedule(w, every, EV_FAILOVER, 0, NULL);
	struct sim_node *l = sim_find_leader(w);
	if (l == NULL)
		return;
	sim_trace(w, "failover: kill -9 of leader %llu",
		  (unsigned long long)l->id);
	sim_node_crash(w, l);
	sim_schedule(w, every / 2, EV_RESTART, (uint32_t)l->id, NULL);
}

void sim_failover_leader(struct sim_world *w, struct sim_node *n,
			 baton_term term)
{
	if (!w->kill_watch || term <= w->kill_term)
		return;
	w->kill_watch = false;
	uint64_t took = w->now_ms - w->kill_ms;
	uint64_t timeout = w->p.election_timeout_ms;
	if (took < timeout) {
		w->stats.fast_failovers++;
		return;
	}
	w->stats.slow_failovers++;
	sim_trace(w,
		  "failover: leader of term %llu killed at %llu ms, its peers "
		  "told; node %llu leads term %llu only %llu ms later "
		  "(election timeout %llu ms)",
		  (unsigned long long)w->kill_term,
		  (unsigned long long)w->kill_ms, (unsigned long long)n->id,
		  (unsigned long long)term, (unsigned long long)took,
		  (unsigned long long)timeout);
}

void sim_nemesis(struct sim_world *w)
{
	if (w->liveness)
		return;
	if (w->p.spurious_close_per_mille > 0 &&
	    sim_chance(&w->rng, w->p.spurious_close_per_mille))
		spurious_close(w);
	uint32_t action = (uint32_t)sim_range(&w->rng, 0, 11);
	if (action == 8 || action == 9) {
		/* SIGSTOP: a frozen leader wakes up still believing it
		 * leads, the classic source of stale reads. */
		struct sim_node *p = action == 8 ? sim_find_leader(w) : NULL;
		if (p == NULL)
			p = sim_random_alive(w);
		if (p != NULL) {
			uint64_t t = w->p.election_timeout_ms;
			p->paused_until_ms =
				w->now_ms + sim_range(&w->rng, t, 4 * t);
			sim_steady_node(w, p, p->paused_until_ms);
			sim_trace(w, "nemesis: pause node %llu until %llu",
				  (unsigned long long)p->id,
				  (unsigned long long)p->paused_until_ms);
			/* Reads reach it as soon as it wakes, while it may
			 * still believe in a leadership it lost meanwhile. */
			uint32_t reads = (uint32_t)sim_range(&w->rng, 2, 6);
			for (uint32_t i = 0; i < reads; i++)
				sim_schedule(
					w,
					p->paused_until_ms - w->now_ms +
						sim_range(
							&w->rng, 0,
							i % 2 ? t
							      : w->p.heartbeat_ms),
					EV_READ_AT, (uint32_t)p->id, NULL);
		}
		sim_schedule(w,
			     sim_range(&w->rng, 1, 2 * w->p.nemesis_every_ms),
			     EV_NEMESIS, 0, NULL);
		return;
	}
	struct sim_node *victim = NULL;
	if (action <= 2)
		victim = sim_random_alive(w);
	else if (action <= 4)
		victim = sim_find_leader(w);
	/* Mostly keep a majority up, so the cluster makes progress between
	 * faults; now and then take it below, to test recovery from that. */
	uint32_t alive = 0;
	for (uint32_t i = 1; i <= w->n_ids; i++)
		alive += w->nodes[i].alive;
	if (victim != NULL && alive <= w->p.n_nodes / 2 + 1 &&
	    !sim_chance(&w->rng, 100))
		victim = NULL;
	if (victim != NULL) {
		sim_node_crash(w, victim);
		sim_schedule(w, sim_range(&w->rng, 1, w->p.downtime_max_ms),
			     EV_RESTART, (uint32_t)victim->id, NULL);
	} else if (action <= 7 || action == 10) {
		partition(w);
	} else {
		sim_heal(w);
		sim_trace(w, "nemesis: heal");
	}
	sim_schedule(w, sim_range(&w->rng, 1, 2 * w->p.nemesis_every_ms),
		     EV_NEMESIS, 0, NULL);
}

/* ---- faults at the worst moments ("buggify") ----------------------------- */

/* Cut node id off from all others, both ways, until the next heal. */
static void cut_off(struct sim_world *w, uint32_t id)
{
	for (uint32_t i = 1; i <= w->n_ids; i++)
		w->blocked[id][i] = w->blocked[i][id] = true;
	w->stats.partitions++;
	sim_schedule(w, sim_range(&w->rng, 50, w->p.partition_max_ms), EV_HEAL,
		     0, NULL);
}

/* A configuration entry past the bootstrap one (which the driver makes
 * durable before the cluster starts). */
static bool appends_config(const struct baton_update *u)
{
	for (uint32_t i = 0; i < u->n_entries; i++)
		if (u->entries[i].type == BATON_ENTRY_CONFIG &&
		    u->entries[i].index > 1)
			return true;
	return false;
}

/* Membership changes are safe only if configurations succeed each other
 * one at a time, each committed before the next: crash the node, or cut it
 * off, right after it appends one, so that a configuration lives on in a
 * minority, or only in memory. */
static void after_config(struct sim_world *w, struct sim_node *n,
			 const struct baton_update *u)
{
	if (!appends_config(u) ||
	    !sim_chance(&w->rng, w->p.fault_after_config_per_mille))
		return;
	uint32_t id = (uint32_t)n->id;
	if (sim_chance(&w->rng, 500)) {
		sim_trace(w, "buggify: node %u appended a configuration: crash",
			  id);
		sim_schedule(w, 0, EV_CRASH, id, NULL);
	} else {
		sim_trace(w,
			  "buggify: node %u appended a configuration: cut off",
			  id);
		cut_off(w, id);
	}
}

/* A new leader whose term and vote are not yet on its disk (a correct core
 * never gets there: its vote requests wait for them) crashes before they
 * are: restarted, it could vote again in the term it led. Candidates, right
 * after the update that changed their term, now and then too. Then, a
 * membership request right after the election, before the new leader has
 * committed anything of its own term. */
static void after_election(struct sim_world *w, struct sim_node *n,
			   const struct baton_update *u)
{
	uint32_t id = (uint32_t)n->id;
	bool elected = u->role == BATON_LEADER &&
		       (n->role != BATON_LEADER || n->term != u->term);
	bool undurable = n->disk.term != u->term || n->disk.vote != n->id;
	if ((elected && undurable &&
	     sim_chance(&w->rng, w->p.crash_undurable_leader_per_mille)) ||
	    (u->role == BATON_CANDIDATE && u->hard_state_changed &&
	     sim_chance(&w->rng, w->p.crash_undurable_leader_per_mille / 8))) {
		sim_trace(w,
			  "buggify: node %u crashes before its term %llu is "
			  "durable",
			  id, (unsigned long long)u->term);
		sim_schedule(w, 0, EV_CRASH, id, NULL);
		return;
	}
	if (elected &&
	    sim_chance(&w->rng, w->p.member_after_election_per_mille))
		sim_schedule(w, sim_range(&w->rng, 0, w->p.heartbeat_ms),
			     EV_MEMBER_NOW, 0, NULL);
}

/* After node n stepped to update u, before the invariants look at it. */
void sim_buggify_update(struct sim_world *w, struct sim_node *n,
			const struct baton_update *u)
{
	if (!w->liveness) {
		after_config(w, n, u);
		after_election(w, n, u);
	}
	if (u->role == BATON_LEADER && u->commit_index > n->commit &&
	    !w->liveness) {
		/* A new leader's first commit is where Raft is subtlest
		 * (entries of earlier terms ride along with it). */
		uint32_t p = n->committed_this_term
				     ? w->p.crash_on_commit_per_mille
				     : w->p.crash_on_first_commit_per_mille;
		n->committed_this_term = true;
		if (sim_chance(&w->rng, p))
			sim_schedule(w, 0, EV_CRASH, (uint32_t)n->id, NULL);
	}
	if (u->role != BATON_LEADER || u->term != n->term)
		n->committed_this_term = false;
	if (u->role == BATON_LEADER && n->role != BATON_LEADER &&
	    !w->liveness &&
	    sim_chance(&w->rng, w->p.crash_on_election_per_mille))
		sim_schedule(w, sim_range(&w->rng, 0, w->p.net_max_ms),
			     EV_CRASH, (uint32_t)n->id, NULL);
}

/* A leadership transfer's TIMEOUT_NOW is leaving the old leader: one
 * direction of a link of the old leader fails (to or from the target, or
 * another node), and reads keep arriving at the old leader meanwhile. It
 * must not serve them from a leadership it has lost. */
static void at_transfer(struct sim_world *w, const struct baton_msg *m)
{
	uint32_t from = (uint32_t)m->from, to = (uint32_t)m->to;
	if (to == 0 || to > w->n_ids ||
	    !sim_chance(&w->rng, w->p.link_at_transfer_per_mille))
		return;
	uint32_t other = sim_chance(&w->rng, 500)
				 ? to
				 : (uint32_t)sim_range(&w->rng, 1, w->n_ids);
	if (other == from)
		other = to;
	bool inbound = sim_chance(&w->rng, 500);
	if (inbound)
		w->blocked[other][from] = true;
	else
		w->blocked[from][other] = true;
	sim_trace(w, "buggify: transfer from %u to %u: link %u -> %u lost",
		  from, to, inbound ? other : from, inbound ? from : other);
	w->stats.partitions++;
	sim_schedule(w, sim_range(&w->rng, 50, w->p.partition_max_ms), EV_HEAL,
		     0, NULL);
	uint32_t reads = (uint32_t)sim_range(&w->rng, 2, 6);
	for (uint32_t i = 0; i < reads; i++)
		sim_schedule(w,
			     sim_range(&w->rng, 0,
				       2 * (uint64_t)w->p.election_timeout_ms),
			     EV_READ_AT, from, NULL);
}

/* A node is about to send m. */
void sim_buggify_send(struct sim_world *w, const struct baton_msg *m)
{
	if (m->type == BATON_MSG_TIMEOUT_NOW && !w->liveness)
		at_transfer(w, m);
	if (m->type == BATON_MSG_VOTE_RESULT && m->u.vote_result.granted &&
	    !m->u.vote_result.pre_vote && !w->liveness &&
	    sim_chance(&w->rng, w->p.blip_after_vote_per_mille))
		sim_schedule(w, 0, EV_CRASH, (uint32_t)m->from, NULL);
}

/* Node n just accepted a proposal. */
void sim_buggify_propose(struct sim_world *w, struct sim_node *n)
{
	/* The leader dies while its entries are on their way:
	 * some followers have them, some do not. */
	if (sim_chance(&w->rng, w->p.crash_after_propose_per_mille))
		sim_schedule(w, sim_range(&w->rng, 0, w->p.net_max_ms),
			     EV_CRASH, (uint32_t)n->id, NULL);
}

/* A power blip: down, and back before long. */
void sim_power_blip(struct sim_world *w, struct sim_node *n)
{
	if (w->liveness)
		return;
	sim_trace(w, "buggify: power blip of node %u", (uint32_t)n->id);
	sim_node_crash(w, n);
	sim_schedule(w, sim_range(&w->rng, 0, 2 * w->p.net_max_ms), EV_RESTART,
		     (uint32_t)n->id, NULL);
}
