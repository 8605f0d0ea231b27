/*
 * --bootstrap on an empty data directory (docs/batond.md, "Identity"): a
 * node that lost its data, restarted with its usual command line, must not
 * found a second cluster over the one its peers still run (its lost votes
 * and log would let a quorum forget acknowledged writes). So before
 * founding, the node asks each other founder, by the handshake every
 * release answers, what it holds: a founder whose log goes beyond the
 * founding configuration (index 1), or that knows the cluster's UUID, or a
 * leader, holds the cluster's data, and this node refuses to found and
 * says how to replace a member. Founders start together, so the wait is
 * bounded: once every other founder answered with no data (they are
 * founding too), or after the wait with no answer, it founds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

/* How often an unanswered founder is asked again, and how long (in
 * election timeouts) the node waits for answers before founding anyway. */
#define FOUNDING_RETRY_MS 200u
#define FOUNDING_WAIT_TIMEOUTS 3u
#define FOUNDING_WAIT_MS_MIN 1000u

struct founder_probe {
	struct founding *f;
	uint32_t index; /* in s->cfg.founders */
	bool asking;
	bool answered;
};

struct founding {
	struct server *s;
	uv_timer_t timer;
	uint64_t deadline_ms;
	bool done;
	struct founder_probe probes[BATON_MAX_MEMBERS];
};

static uint64_t now_ms(struct founding *f)
{
	return uv_now(f->s->loop);
}

/* The founders that answered, as "2, 3" (or "none"). */
static void answered_list(struct founding *f, char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < f->s->cfg.n_founders; i++) {
		if (!f->probes[i].answered)
			continue;
		int k = snprintf(buf + used, cap - used, "%s%" PRIu64,
				 used > 0 ? ", " : "", f->s->cfg.founders[i]);
		if (k < 0 || (size_t)k >= cap - used)
			break;
		used += (size_t)k;
	}
	if (used == 0)
		snprintf(buf, cap, "none");
}

static void found(struct founding *f, const char *why)
{
	f->done = true;
	uv_timer_stop(&f->timer);
	char who[BATON_MAX_MEMBERS * 24];
	answered_list(f, who, sizeof who);
	int rv = baton_node_found(f->s->node);
	if (rv == 0)
		LOG_INFO("founding the cluster of --bootstrap: %s (founders "
			 "that answered with no data: %s)",
			 why, who);
	else
		LOG_WARN("not founding: this node received state meanwhile "
			 "(%s)",
			 baton_strerror(rv));
}

/* Another founder holds the cluster's data: stop, never found. */
static void refuse(struct founding *f, baton_node_id other, const char *what)
{
	struct server *s = f->s;
	f->done = true;
	uv_timer_stop(&f->timer);
	LOG_ERROR("refusing to found a new cluster: the data directory %s is "
		  "empty, but node %" PRIu64 " (a founder of --bootstrap) %s. "
		  "This node lost its data (or never had it): founding again "
		  "would start a second cluster over the first and could "
		  "lose acknowledged writes. To replace this member: start "
		  "a node with an empty data directory, --join and a new "
		  "--id, then on the cluster run `batonctl remove %" PRIu64
		  "` and `batonctl add <new id> <peer addr> <client addr>` "
		  "(docs/batond.md, \"Replacing a member\")",
		  s->cfg.data_dir, other, what, s->cfg.id);
	server_stop(s, SERVER_EXIT_REFUSED);
}

static void on_probe(void *data, const char *addr, int rv, const char *why,
		     const struct baton_peer_handshake_reply *r)
{
	struct founder_probe *p = data;
	struct founding *f = p->f;
	p->asking = false;
	if (f->done)
		return;
	baton_node_id id = f->s->cfg.founders[p->index];
	if (rv != 0) {
		LOG_DEBUG("founding: node %" PRIu64 " at %s: %s", id, addr,
			  why != NULL ? why : baton_strerror(rv));
		return;
	}
	char what[256];
	if (r->removed) {
		snprintf(what, sizeof what,
			 "says this node's id was removed from the cluster "
			 "(%s)",
			 r->reason);
		refuse(f, id, what);
		return;
	}
	if (r->self.has_cluster_uuid) {
		char u[BATON_CLUSTER_UUID_STR_MAX];
		snprintf(what, sizeof what,
			 "holds data of the cluster (cluster uuid %s)",
			 baton_cluster_uuid_format(r->self.cluster_uuid, u));
		refuse(f, id, what);
		return;
	}
	if (r->has_cluster &&
	    (r->cluster.last_index > 1 || r->cluster.leader_id != 0 ||
	     r->cluster.versions.n > 0)) {
		snprintf(what, sizeof what,
			 "holds data of the cluster (its log reaches index "
			 "%" PRIu64 ", leader %" PRIu64 ")",
			 r->cluster.last_index, r->cluster.leader_id);
		refuse(f, id, what);
		return;
	}
	if (!r->accepted) {
		LOG_WARN("founding: node %" PRIu64 " at %s refused us: %s", id,
			 addr, r->reason);
		return;
	}
	p->answered = true;
}

static void ask(struct founding *f)
{
	struct server *s = f->s;
	bool all = true;
	for (uint32_t i = 0; i < s->cfg.n_founders && !f->done; i++) {
		struct founder_probe *p = &f->probes[i];
		if (s->cfg.founders[i] == s->cfg.id || p->answered)
			continue;
		all = false;
		if (p->asking)
			continue;
		p->asking = baton_node_probe(s->node, s->cfg.founder_peer[i],
					     on_probe, p) == 0;
	}
	if (f->done)
		return;
	if (all)
		found(f, "every other founder answered");
	else if (now_ms(f) >= f->deadline_ms)
		found(f, "the wait for the other founders ended");
}

static void on_timer(uv_timer_t *t)
{
	ask(t->data);
}

int founding_start(struct server *s)
{
	if (s->cfg.n_founders == 0 || !baton_node_founding(s->node))
		return 0;
	struct founding *f = calloc(1, sizeof *f);
	if (f == NULL) {
		LOG_ERROR("out of memory");
		return -1;
	}
	f->s = s;
	s->founding = f;
	uint64_t wait_ms =
		(uint64_t)s->cfg.election_timeout_ms * FOUNDING_WAIT_TIMEOUTS;
	if (wait_ms < FOUNDING_WAIT_MS_MIN)
		wait_ms = FOUNDING_WAIT_MS_MIN;
	f->deadline_ms = now_ms(f) + wait_ms;
	for (uint32_t i = 0; i < s->cfg.n_founders; i++)
		f->probes[i] = (struct founder_probe){.f = f, .index = i};
	LOG_INFO("the data directory is empty: asking the other founders "
		 "whether the cluster exists already (up to %" PRIu64 " ms)",
		 wait_ms);
	uv_timer_init(s->loop, &f->timer);
	f->timer.data = f;
	uv_timer_start(&f->timer, on_timer, FOUNDING_RETRY_MS,
		       FOUNDING_RETRY_MS);
	ask(f);
	return 0;
}

static void free_on_close(uv_handle_t *h)
{
	free(h->data);
}

void founding_stop(struct server *s)
{
	struct founding *f = s->founding;
	if (f == NULL)
		return;
	s->founding = NULL;
	f->done = true;
	uv_timer_stop(&f->timer);
	uv_close((uv_handle_t *)&f->timer, free_on_close);
}
