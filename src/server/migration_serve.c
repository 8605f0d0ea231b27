/*
 * Which cluster answers a client during a migration (docs/relay.md, "Who
 * answers a client"): this node, a node of the other cluster (proxied over
 * RESP), or nobody for a moment; and the commands a new node holds while
 * its cluster takes write authority.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "migration_internal.h"

/* A command held during hand-off, with its own copy of the arguments. */
struct mig_parked {
	struct mig_parked *next;
	struct client_state *cs; /* valid while sl is not done */
	struct slot *sl;
	uint64_t since_ms;
	int argc;
	uint8_t **argv;
	size_t *lens;
};

static bool handing_off(const struct migration *g)
{
	uint64_t now = mig_now(g);
	return (g->handoff_seen_ms != 0 &&
		now - g->handoff_seen_ms < MIG_HANDOFF_WAIT_MS) ||
	       (g->authority_seen_ms != 0 &&
		now - g->authority_seen_ms < MIG_HANDOFF_WAIT_MS);
}

static void parked_free(struct mig_parked *p)
{
	for (int i = 0; i < p->argc; i++)
		free(p->argv[i]);
	free(p->argv);
	free(p->lens);
	free(p);
}

/* What was waited for came (authority, or a node to send to): run what
 * waited, in arrival order, so each connection's order holds (nothing
 * new runs before them). Only those held now: one held again meanwhile
 * waits for the next time. */
static void drain(struct migration *g)
{
	g->draining = true;
	for (uint32_t n = g->parked.n; n > 0 && g->parked.head != NULL; n--) {
		struct mig_parked *p = g->parked.head;
		g->parked.head = p->next;
		if (g->parked.head == NULL)
			g->parked.tail = NULL;
		g->parked.n--;
		/* A client that left meanwhile: nobody reads the reply, and
		 * a proxied command would open a connection for nobody. */
		if (slot_abandoned(p->sl))
			slot_done(p->sl);
		else
			command_dispatch(g->s, p->cs, p->sl, p->argc,
					 (const uint8_t *const *)p->argv,
					 p->lens);
		parked_free(p);
	}
	g->draining = false;
}

/* Is this node of `cluster` a candidate to answer for it: in the view
 * and connected, or (known from an earlier view) absent from this one, as
 * after a relay restart before it registered again? A node the view shows
 * disconnected is not; nor, while another is, one that could not be
 * reached in the last MIG_UNREACHABLE_MS. */
static bool candidate(struct migration *g, const struct mig_view_node *k,
		      bool skip_unreachable)
{
	for (uint32_t i = 0; i < g->n_view; i++) {
		const struct mig_view_node *v = &g->view[i];
		if (v->id == k->id && strcmp(v->cluster, k->cluster) == 0 &&
		    (!v->connected || v->incarnation != k->incarnation))
			return false;
	}
	return !skip_unreachable ||
	       !proxy_unreachable(g->s, k->address, MIG_UNREACHABLE_MS);
}

/* A node of `cluster` to proxy to: `prefer` (its leader, when known) if it
 * is a candidate, else the first candidate; NULL when none is. */
static const char *pick(struct migration *g, const char *cluster,
			baton_node_id prefer)
{
	for (int pass = 0; pass < 2; pass++) {
		bool skip = pass == 0;
		const struct mig_view_node *first = NULL;
		for (uint32_t i = 0; i < g->n_known; i++) {
			const struct mig_view_node *k = &g->known[i];
			if (strcmp(k->cluster, cluster) != 0 ||
			    !candidate(g, k, skip))
				continue;
			if (k->id == prefer)
				return k->address;
			if (first == NULL)
				first = k;
		}
		if (first != NULL)
			return first->address;
	}
	return NULL;
}

/* Where a command goes, the held ones aside. */
static enum migration_route
decide(struct migration *g, const struct client_state *cs, const char **detail)
{
	struct server *s = g->s;
	struct kv_migration km;
	mig_kv_state(g, &km);
	const char *cluster;
	baton_node_id prefer = 0;
	if (mig_is_new_side(g)) {
		if (km.authority)
			return MIGRATION_HERE;
		/* Hand-off under way: the old cluster is fenced and this
		 * one takes authority within moments. Waiting is better
		 * than refusing (docs/relay.md, "Who answers a client"). */
		if (handing_off(g))
			return MIGRATION_WAIT;
		/* Before hand-off the old cluster answers: this one's state
		 * lags it. */
		cluster = s->cfg.migrate_from;
		prefer = g->im.from_node;
	} else {
		if (!km.fenced && g->authority_leader == 0)
			return MIGRATION_HERE;
		cluster = km.fenced ? km.fence_target : g->authority_cluster;
		if (cluster[0] == '\0')
			cluster = g->authority_cluster;
		prefer = g->authority_leader;
	}
	if (proxy_is_proxied(cs)) {
		/* The other cluster sent it here because it cannot answer
		 * it; sending it back would loop. */
		*detail = mig_is_new_side(g)
				  ? "this cluster is importing and takes no "
				    "commands yet; retry"
				  : "write authority moved to another cluster; "
				    "retry";
		return MIGRATION_REFUSE;
	}
	*detail = pick(g, cluster, prefer);
	if (*detail != NULL)
		return MIGRATION_PROXY;
	/* A new node that knows no old node yet (it just started, or the
	 * relay restarted) waits for a view rather than refuse. */
	if (mig_is_new_side(g))
		return MIGRATION_WAIT;
	*detail = "no node of the other cluster of the migration is known to "
		  "be reachable; retry";
	return MIGRATION_REFUSE;
}

enum migration_route migration_route(struct server *s,
				     const struct client_state *cs,
				     const char **detail)
{
	struct migration *g = s->migration;
	*detail = NULL;
	if (g == NULL)
		return MIGRATION_HERE;
	enum migration_route r = decide(g, cs, detail);
	if (g->parked.head != NULL && !g->draining) {
		/* Behind the held commands, so each connection's order holds;
		 * they go first once this one need not wait. */
		if (r == MIGRATION_WAIT)
			return r;
		drain(g);
		r = decide(g, cs, detail);
	}
	return r;
}

void migration_park(struct server *s, struct client_state *cs, struct slot *sl,
		    int argc, const uint8_t *const *argv, const size_t *lens)
{
	struct migration *g = s->migration;
	BATON_ASSERT(g != NULL);
	if (g->parked.n >= MIG_PARKED_MAX) {
		resp_error(slot_buf(sl), "TRYAGAIN this cluster is taking "
					 "write authority; retry");
		slot_done(sl);
		return;
	}
	struct mig_parked *p = calloc(1, sizeof *p);
	bool ok = p != NULL;
	if (ok) {
		p->argv = calloc((size_t)argc, sizeof *p->argv);
		p->lens = calloc((size_t)argc, sizeof *p->lens);
		ok = p->argv != NULL && p->lens != NULL;
	}
	for (int i = 0; ok && i < argc; i++) {
		p->argv[i] = malloc(lens[i] + 1);
		ok = p->argv[i] != NULL;
		if (ok) {
			memcpy(p->argv[i], argv[i], lens[i]);
			p->lens[i] = lens[i];
			p->argc = i + 1;
		}
	}
	if (!ok) {
		if (p != NULL)
			parked_free(p);
		slot_error(sl, BATON_ENOMEM);
		return;
	}
	p->cs = cs;
	p->sl = sl;
	p->since_ms = mig_now(g);
	if (g->parked.tail != NULL)
		g->parked.tail->next = p;
	else
		g->parked.head = p;
	g->parked.tail = p;
	g->parked.n++;
	g->stats.parked++;
}

void mig_serve_tick(struct migration *g)
{
	if (g->parked.head == NULL)
		return;
	const char *detail;
	if (decide(g, g->parked.head->cs, &detail) != MIGRATION_WAIT) {
		drain(g);
		return;
	}
	/* What they wait for did not come in time: those waiting longest
	 * give up, oldest first (so each connection's order holds). */
	uint64_t now = mig_now(g);
	while (g->parked.head != NULL &&
	       now - g->parked.head->since_ms >= MIG_PARK_MS) {
		struct mig_parked *p = g->parked.head;
		g->parked.head = p->next;
		if (g->parked.head == NULL)
			g->parked.tail = NULL;
		g->parked.n--;
		resp_error(slot_buf(p->sl),
			   handing_off(g)
				   ? "TRYAGAIN this cluster is taking write "
				     "authority; retry"
				   : "TRYAGAIN no node of the other cluster of "
				     "the migration is known to be reachable; "
				     "retry");
		slot_done(p->sl);
		parked_free(p);
	}
}

void mig_serve_close(struct migration *g)
{
	while (g->parked.head != NULL) {
		struct mig_parked *p = g->parked.head;
		g->parked.head = p->next;
		resp_error(slot_buf(p->sl), "TRYAGAIN shutting down; retry");
		slot_done(p->sl);
		parked_free(p);
	}
	g->parked.tail = NULL;
	g->parked.n = 0;
}
