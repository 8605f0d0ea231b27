/*
 * The simulated network: deep copies of messages in flight, loss,
 * duplication, delay and reordering drawn from the seed, and the links the
 * nemesis cut.
 */
#include "world.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- deep copies -------------------------------------------------------- */

void sim_copy_entries(struct baton_entry *dst, const struct baton_entry *src,
		      uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		dst[i] = src[i];
		dst[i].buf = sim_xdup(src[i].buf, src[i].len);
	}
}

void sim_free_entries(struct baton_entry *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(e[i].buf);
	free(e);
}

/* The bytes of m that its type uses: the header and its member of the
 * union (a snapshot's metadata makes the whole struct large, and every
 * message is copied at least once). */
static size_t msg_bytes(const struct baton_msg *m)
{
	size_t head = offsetof(struct baton_msg, u);
	switch (m->type) {
	case BATON_MSG_VOTE:
		return head + sizeof m->u.vote;
	case BATON_MSG_VOTE_RESULT:
		return head + sizeof m->u.vote_result;
	case BATON_MSG_APPEND:
		return head + sizeof m->u.append;
	case BATON_MSG_APPEND_RESULT:
		return head + sizeof m->u.append_result;
	case BATON_MSG_SNAPSHOT_RESULT:
		return head + sizeof m->u.snapshot_result;
	case BATON_MSG_READ_INDEX:
		return head + sizeof m->u.read_index;
	case BATON_MSG_READ_INDEX_RESULT:
		return head + sizeof m->u.read_index_result;
	case BATON_MSG_INFO:
		return head + sizeof m->u.info;
	case BATON_MSG_INFO_RESULT:
		return head + sizeof m->u.info_result;
	default:
		return sizeof *m;
	}
}

struct sim_packet *sim_packet_copy(const struct baton_msg *m)
{
	struct sim_packet *p = sim_xmalloc(sizeof *p);
	memcpy(&p->m, m, msg_bytes(m));
	p->sender_release = 0;
	p->entries = NULL;
	p->chunk = NULL;
	if (m->type == BATON_MSG_APPEND && m->u.append.n_entries > 0) {
		uint32_t n = m->u.append.n_entries;
		p->entries = sim_xmalloc(n * sizeof *p->entries);
		sim_copy_entries(p->entries, m->u.append.entries, n);
		p->m.u.append.entries = p->entries;
	}
	if (m->type == BATON_MSG_SNAPSHOT) {
		p->chunk =
			sim_xdup(m->u.snapshot.chunk, m->u.snapshot.chunk_len);
		p->m.u.snapshot.chunk = p->chunk;
	}
	return p;
}

void sim_packet_free(struct sim_packet *p)
{
	if (p == NULL)
		return;
	if (p->entries != NULL)
		sim_free_entries(p->entries, p->m.u.append.n_entries);
	free(p->chunk);
	free(p);
}

/* ---- the network ----------------------------------------------------------
 */

static void trace_msg(struct sim_world *w, const struct baton_msg *m)
{
	static const char *const names[] = {
		"?",
		"vote",
		"vote-result",
		"append",
		"append-result",
		"snapshot",
		"snapshot-result",
		"timeout-now",
		"read-index",
		"read-index-result",
		"info",
		"info-result",
	};
	const char *name = m->type < 12 ? names[m->type] : "?";
	unsigned long long a = 0, b = 0, c = 0;
	switch (m->type) {
	case BATON_MSG_VOTE:
		a = m->u.vote.last_log_index;
		b = m->u.vote.last_log_term;
		c = m->u.vote.pre_vote;
		break;
	case BATON_MSG_VOTE_RESULT:
		a = m->u.vote_result.granted;
		c = m->u.vote_result.pre_vote;
		break;
	case BATON_MSG_APPEND:
		a = m->u.append.prev_index;
		b = m->u.append.n_entries;
		c = m->u.append.leader_commit;
		break;
	case BATON_MSG_APPEND_RESULT:
		a = m->u.append_result.success;
		b = m->u.append_result.index;
		c = m->u.append_result.hint_index;
		break;
	case BATON_MSG_SNAPSHOT:
		a = m->u.snapshot.meta.index;
		b = m->u.snapshot.offset;
		c = m->u.snapshot.chunk_len;
		break;
	case BATON_MSG_READ_INDEX:
		a = m->u.read_index.request_id;
		break;
	case BATON_MSG_READ_INDEX_RESULT:
		a = m->u.read_index_result.request_id;
		b = m->u.read_index_result.read_index;
		c = (unsigned long long)(long long)
			    m->u.read_index_result.status;
		break;
	case BATON_MSG_SNAPSHOT_RESULT:
		a = m->u.snapshot_result.index;
		b = m->u.snapshot_result.next_offset;
		c = m->u.snapshot_result.done;
		break;
	case BATON_MSG_INFO:
		a = m->u.info.seq;
		break;
	case BATON_MSG_INFO_RESULT:
		a = m->u.info_result.seq;
		b = m->u.info_result.profile.machine_max.value;
		c = m->u.info_result.profile.proto_max.value;
		break;
	default:
		break;
	}
	sim_trace(w, "  %llu -> %llu %s term %llu (%llu %llu %llu)",
		  (unsigned long long)m->from, (unsigned long long)m->to, name,
		  (unsigned long long)m->term, a, b, c);
}

void sim_net_send(struct sim_world *w, struct sim_packet *p)
{
	if (w->verbose)
		trace_msg(w, &p->m);
	sim_buggify_send(w, &p->m);
	uint32_t from = (uint32_t)p->m.from, to = (uint32_t)p->m.to;
	w->stats.msgs_sent++;
	p->sender_release = w->nodes[from].release;
	/* Between releases without a common peer protocol there is no
	 * connection (the transport refuses it): nothing is sent. */
	if (to != 0 && to <= w->n_ids &&
	    !sim_versions_deliverable(w, p, &w->nodes[to])) {
		sim_packet_free(p);
		return;
	}
	if (to == 0 || to > w->n_ids || w->blocked[from][to]) {
		w->stats.msgs_lost++;
		sim_packet_free(p);
		return;
	}
	if (w->in_flight >= SIM_MAX_IN_FLIGHT ||
	    sim_chance(&w->rng, w->p.loss_per_mille)) {
		w->stats.msgs_lost++;
		sim_steady_sent(w, &p->m, true);
		sim_packet_free(p);
		return;
	}
	sim_steady_sent(w, &p->m, false);
	if (sim_chance(&w->rng, w->p.dup_per_mille)) {
		struct sim_packet *dup = sim_packet_copy(&p->m);
		dup->sender_release = p->sender_release;
		w->in_flight++;
		sim_schedule(
			w, sim_range(&w->rng, w->p.net_min_ms, w->p.net_max_ms),
			EV_DELIVER, 0, dup);
	}
	/* A link keeps order (as a TCP stream does) unless this message is
	 * one the seed chose to reorder. */
	uint64_t at = w->now_ms +
		      sim_range(&w->rng, w->p.net_min_ms, w->p.net_max_ms);
	if (!sim_chance(&w->rng, w->p.reorder_per_mille)) {
		if (at < w->link_last_ms[from][to])
			at = w->link_last_ms[from][to];
		w->link_last_ms[from][to] = at;
	}
	w->in_flight++;
	sim_schedule(w, at - w->now_ms, EV_DELIVER, 0, p);
}
