/*
 * Membership changes, one server at a time (Raft dissertation, chapter 4).
 * A configuration takes effect as soon as its entry is in the log, committed
 * or not; a leader starts a new change only once the previous one is
 * committed. New servers join as learners and become voters only after
 * catching up, so adding one never stalls commits.
 */
#include "core.h"

#include <string.h>

void baton__config_appended(struct baton_raft *r, const struct baton_entry *e)
{
	struct baton_config c;
	BATON_ASSERT(e->type == BATON_ENTRY_CONFIG);
	BATON_ASSERT(e->index == baton__last_index(r));
	/* A configuration we cannot decode is a newer format (or damage):
	 * skipping it would make this node disagree with the others on who
	 * votes. Keep the one we have for our own conduct, stop applying
	 * here, and never lead on it. */
	if (baton_config_decode(e->buf, e->len, &c) != 0) {
		baton__stall(r, e->index);
		return;
	}
	BATON_ASSERT(e->index > r->config_index);
	r->config = c;
	r->config_index = e->index;
	if (r->role == BATON_LEADER) {
		baton__progress_reset(r);
		baton__upgrade_config_changed(r);
	}
	BATON_ASSERT(r->config_index == baton__last_index(r));
}

void baton__config_refresh(struct baton_raft *r)
{
	struct baton_config c;
	BATON_ASSERT(r->role != BATON_LEADER); /* leaders never truncate */
	for (baton_index i = baton__last_index(r); i > r->log.base; i--) {
		const struct baton_entry *e = baton__log_get(&r->log, i);
		if (e->type == BATON_ENTRY_CONFIG &&
		    baton_config_decode(e->buf, e->len, &c) == 0) {
			r->config = c;
			r->config_index = i;
			return;
		}
	}
	r->config = r->snap.config;
	r->config_index = r->snap.config_index;
	BATON_ASSERT(r->config_index <= r->snap.index);
	BATON_ASSERT(r->config.n <= BATON_MAX_MEMBERS);
}

static int change_allowed(const struct baton_raft *r)
{
	if (r->role != BATON_LEADER)
		return BATON_ENOTLEADER;
	BATON_ASSERT(r->config_index <= baton__last_index(r));
	BATON_ASSERT(r->leader_first_index > 0);
	/* One change at a time, and only once our term has committed an
	 * entry (otherwise an uncommitted change of an earlier leader could
	 * still be overwritten). */
	if (r->config_index > r->commit_index ||
	    r->commit_index < r->leader_first_index || r->transfer_target != 0)
		return BATON_EBUSY;
	return 0;
}

static int append_config(struct baton_raft *r, const struct baton_config *c)
{
	uint8_t buf[2 + 9 * BATON_MAX_MEMBERS];
	size_t len;
	BATON_ASSERT(r->role == BATON_LEADER);
	/* One change at a time: the new one differs from the last by one
	 * member or one role (Raft dissertation, 4.1). */
	BATON_ASSERT(c->n + 1 >= r->config.n && c->n <= r->config.n + 1);
	int rv = baton_config_encode(c, buf, sizeof buf, &len);
	if (rv != 0)
		return rv;
	rv = baton__leader_append(r, BATON_ENTRY_CONFIG, buf, (uint32_t)len);
	if (rv != 0)
		return rv;
	BATON_ASSERT(r->config_index == baton__last_index(r));
	baton__broadcast_append(r);
	return 0;
}

int baton__add_learner(struct baton_raft *r, baton_node_id id)
{
	int rv = change_allowed(r);
	if (rv != 0)
		return rv;
	if (id == 0)
		return BATON_EINVAL;
	if (baton_config_find(&r->config, id) != NULL)
		return BATON_EEXISTS;
	if (r->config.n == BATON_MAX_MEMBERS)
		return BATON_ETOOBIG;
	struct baton_config c = r->config;
	BATON_ASSERT(c.n < BATON_MAX_MEMBERS);
	c.members[c.n].id = id;
	c.members[c.n].role = BATON_LEARNER;
	c.n++;
	return append_config(r, &c);
}

int baton__promote(struct baton_raft *r, baton_node_id id)
{
	int rv = change_allowed(r);
	if (rv != 0)
		return rv;
	const struct baton_member *m = baton_config_find(&r->config, id);
	if (m == NULL)
		return BATON_ENOTFOUND;
	if (m->role != BATON_LEARNER)
		return BATON_EINVAL;
	if (r->promotee != 0)
		return BATON_EBUSY;
	BATON_ASSERT(id != 0 && id != r->o.id); /* a leader is a voter */
	r->promotee = id;
	r->promotee_target = baton__last_index(r);
	r->promotee_deadline_ms = r->now_ms + (uint64_t)r->o.promotion_rounds *
						      r->o.election_timeout_ms;
	baton__promotion_check(r);
	return 0;
}

/* Promote the learner once its log reaches the index the leader had when
 * the promotion was asked for; give up after promotion_rounds timeouts. */
void baton__promotion_check(struct baton_raft *r)
{
	if (r->promotee == 0 || r->role != BATON_LEADER)
		return;
	struct baton__progress *p = baton__progress_find(r, r->promotee);
	const struct baton_member *m =
		baton_config_find(&r->config, r->promotee);
	if (p == NULL || m == NULL || m->role != BATON_LEARNER) {
		r->promotion_failed = r->promotee;
		r->promotee = 0;
		return;
	}
	if (p->match < r->promotee_target ||
	    r->config_index > r->commit_index) {
		if (r->now_ms >= r->promotee_deadline_ms) {
			r->promotion_failed = r->promotee;
			r->promotee = 0;
		}
		return;
	}
	baton_node_id id = r->promotee;
	BATON_ASSERT(p->match >= r->promotee_target);
	BATON_ASSERT(r->config_index <= r->commit_index);
	struct baton_config c = r->config;
	for (uint32_t i = 0; i < c.n; i++)
		if (c.members[i].id == id)
			c.members[i].role = BATON_VOTER;
	r->promotee = 0;
	if (append_config(r, &c) != 0)
		r->promotion_failed = id;
}

int baton__remove(struct baton_raft *r, baton_node_id id)
{
	int rv = change_allowed(r);
	if (rv != 0)
		return rv;
	const struct baton_member *m = baton_config_find(&r->config, id);
	if (m == NULL)
		return BATON_ENOTFOUND;
	if (m->role == BATON_VOTER && baton__voter_count(r) == 1)
		return BATON_EINVAL; /* a cluster needs a voter */
	if (id == r->promotee)
		r->promotee = 0;
	struct baton_config c;
	memset(&c, 0, sizeof c);
	for (uint32_t i = 0; i < r->config.n; i++)
		if (r->config.members[i].id != id)
			c.members[c.n++] = r->config.members[i];
	BATON_ASSERT(c.n + 1 == r->config.n);
	return append_config(r, &c);
}
