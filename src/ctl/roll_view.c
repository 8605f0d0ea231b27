/*
 * What the cluster looks like now, for batonctl roll (roll.h): the members
 * from BATON.MEMBERS (the leader's, which has the match indexes), each
 * member's own BATON.NODE.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "roll.h"

void roll_seeds_init(struct roll_seeds *s, const struct ctl_opts *o)
{
	memset(s, 0, sizeof *s);
	ctl_opts_addr(o, s->addr[0], sizeof s->addr[0]);
	s->n = 1;
}

static void seeds_add(struct roll_seeds *s, const char *addr)
{
	if (addr[0] == '\0')
		return;
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->addr[i], addr) == 0)
			return;
	if (s->n < sizeof s->addr / sizeof s->addr[0])
		snprintf(s->addr[s->n++], CTL_ADDR_MAX, "%s", addr);
}

bool roll_release(const char *text, struct baton_release *out)
{
	return baton_release_parse(text, out) == 0;
}

struct roll_member *roll_find(struct roll_view *v, uint64_t id)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->m[i].id == id)
			return &v->m[i];
	return NULL;
}

uint64_t roll_lag(const struct roll_view *v, const struct roll_member *m)
{
	if (v->leader == NULL || !m->match_known)
		return UINT64_MAX;
	uint64_t commit = v->leader->commit;
	return m->match >= commit ? 0 : commit - m->match;
}

/* Merge one BATON.MEMBERS reply: new members are added, known ones get its
 * match index if it has one. Returns 0, or -1 with v->err set. */
static int merge_members(struct roll_view *v, const redisReply *r,
			 const char *addr)
{
	if (r->type != REDIS_REPLY_ARRAY) {
		snprintf(v->err, sizeof v->err,
			 "node %s: BATON.MEMBERS: unexpected reply", addr);
		return -1;
	}
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		uint64_t id;
		if (!ctl_map_valid(e) || !ctl_map_u64(e, "id", &id)) {
			snprintf(v->err, sizeof v->err,
				 "node %s: BATON.MEMBERS: member %zu is "
				 "malformed",
				 addr, i);
			return -1;
		}
		struct roll_member *m = roll_find(v, id);
		if (m == NULL) {
			if (v->n == CTL_MEMBERS_MAX) {
				snprintf(v->err, sizeof v->err,
					 "node %s: more than %u members", addr,
					 CTL_MEMBERS_MAX);
				return -1;
			}
			m = &v->m[v->n++];
			memset(m, 0, sizeof *m);
			m->id = id;
		}
		char role[CTL_VALUE_MAX] = "";
		ctl_map_str(e, "role", role, sizeof role);
		m->voter = strcmp(role, "learner") != 0;
		ctl_map_str(e, "client_addr", m->client_addr,
			    sizeof m->client_addr);
		uint64_t match;
		if (ctl_map_u64(e, "match", &match)) {
			m->match_known = true;
			m->match = match;
		}
	}
	return 0;
}

static void read_node(struct roll_member *m, const redisReply *r)
{
	uint64_t id = 0;
	if (!ctl_map_valid(r) || !ctl_map_u64(r, "id", &id)) {
		snprintf(m->err, sizeof m->err, "BATON.NODE: unexpected reply");
		return;
	}
	if (id != m->id) {
		snprintf(m->err, sizeof m->err, "%s answers as node %" PRIu64,
			 m->client_addr, id);
		return;
	}
	m->up = true;
	ctl_map_str(r, "role", m->role, sizeof m->role);
	ctl_map_str(r, "release", m->release, sizeof m->release);
	ctl_map_u64(r, "term", &m->term);
	ctl_map_u64(r, "leader", &m->leader);
	ctl_map_u64(r, "commit", &m->commit);
	ctl_map_u64(r, "applied", &m->applied);
	ctl_map_u64(r, "last_index", &m->last_index);
	ctl_map_u64(r, "proto_min", &m->proto_min);
	ctl_map_u64(r, "proto_max", &m->proto_max);
	ctl_map_u64(r, "machine_max", &m->machine_max);
	ctl_map_u64(r, "machine_version", &m->machine_version);
	ctl_map_u64(r, "stalled_index", &m->stalled_index);
	ctl_map_str(r, "stalled", m->stalled, sizeof m->stalled);
	ctl_map_str(r, "upgrade_waits_for", m->upgrade_waits_for,
		    sizeof m->upgrade_waits_for);
	ctl_map_str(r, "machine_upgrade", m->machine_upgrade,
		    sizeof m->machine_upgrade);
	ctl_map_str(r, "release_floor", m->release_floor,
		    sizeof m->release_floor);
	ctl_map_str(r, "downgrade", m->downgrade, sizeof m->downgrade);
	char hold[CTL_VALUE_MAX];
	ctl_map_str(r, "upgrade_hold", hold, sizeof hold);
	m->upgrade_hold = strcmp(hold, "yes") == 0;
}

static void probe(const struct ctl_opts *o, struct roll_member *m)
{
	if (m->up || m->err[0] != '\0')
		return; /* already asked */
	if (m->client_addr[0] == '\0') {
		snprintf(m->err, sizeof m->err, "no client address known");
		return;
	}
	redisReply *r = ctl_ask_cmd(o, m->client_addr, "BATON.NODE", m->err,
				    sizeof m->err);
	if (r != NULL)
		read_node(m, r);
	freeReplyObject(r);
}

static struct roll_member *find_leader(struct roll_view *v)
{
	struct roll_member *best = NULL;
	for (size_t i = 0; i < v->n; i++) {
		struct roll_member *m = &v->m[i];
		if (m->up && strcmp(m->role, "leader") == 0 &&
		    (best == NULL || m->term > best->term))
			best = m;
	}
	return best;
}

int roll_observe(const struct ctl_opts *o, struct roll_seeds *s,
		 struct roll_view *v)
{
	memset(v, 0, sizeof *v);
	char err[CTL_ERR_MAX] = "";
	size_t asked = s->n;
	for (size_t i = 0; i < s->n; i++) {
		redisReply *r = ctl_ask_cmd(o, s->addr[i], "BATON.MEMBERS", err,
					    sizeof err);
		int rv = r == NULL ? -1 : merge_members(v, r, s->addr[i]);
		freeReplyObject(r);
		if (rv == 0) {
			asked = i;
			break;
		}
		if (r == NULL)
			snprintf(v->err, sizeof v->err, "node %s: %s",
				 s->addr[i], err);
		v->n = 0;
	}
	if (asked == s->n)
		return -1;
	v->err[0] = '\0';
	for (size_t i = 0; i < v->n; i++) {
		seeds_add(s, v->m[i].client_addr);
		probe(o, &v->m[i]);
	}
	v->leader = find_leader(v);
	if (v->leader == NULL || v->leader->match_known)
		return 0;
	/* The asked node does not lead: the leader has the match indexes. */
	redisReply *r = ctl_ask_cmd(o, v->leader->client_addr, "BATON.MEMBERS",
				    err, sizeof err);
	if (r != NULL && merge_members(v, r, v->leader->client_addr) == 0) {
		for (size_t i = 0; i < v->n; i++)
			probe(o, &v->m[i]);
	}
	v->err[0] = '\0';
	freeReplyObject(r);
	v->leader = find_leader(v);
	assert(v->leader != NULL);
	return 0;
}
