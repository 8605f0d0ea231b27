/*
 * batonctl roll (roll.h): the check made before every restart, so that a
 * roll never costs the cluster its majority (docs/upgrading.md, "batonctl
 * roll", "Before every restart"), the hand-over of leadership, and the
 * command that resumes a roll that stopped.
 *
 * The cluster is read again each time: a member that was killed during a
 * pause, or while another node restarted, is seen before the next restart,
 * and the roll waits for it rather than take a second member down.
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "roll.h"

/* A BATON.TRANSFER that did not move leadership is asked again after this
 * (the target may have died or fallen behind meanwhile: the successor is
 * read again first). */
#define TRANSFER_RESEND_NS 1500000000u
/* BATON.TRANSFER answers once the target leads; the roll does not wait
 * for that answer (a target that died never answers): it watches who
 * leads, so the ask is bounded short. */
#define TRANSFER_ASK_MS 500

/* ---- is it safe to restart a node now? ---------------------------------- */

/* A member stalled below the target release is fine: it keeps
 * acknowledging entries, and the roll restarts it. */
bool roll_member_ok(const struct roll *r, const struct roll_view *v,
		    const struct roll_member *m, char *why, size_t len)
{
	const struct roll_member *l = v->leader;
	if (!m->up) {
		snprintf(why, len, "node %" PRIu64 " does not answer (%s)",
			 m->id, m->err);
		return false;
	}
	if (m != l && (m->term != l->term || m->leader != l->id)) {
		snprintf(why, len,
			 "node %" PRIu64 " does not follow the leader (node "
			 "%" PRIu64 ", term %" PRIu64 ") yet",
			 m->id, l->id, l->term);
		return false;
	}
	uint64_t lag = roll_lag(v, m);
	if (m != l &&
	    (lag > r->max_lag || m->commit + r->max_lag < l->commit)) {
		snprintf(why, len,
			 "node %" PRIu64 " is not caught up (commit %" PRIu64
			 ", the leader's match for it %" PRIu64
			 ", the leader's commit %" PRIu64 ", --max-lag %" PRIu64
			 ")",
			 m->id, m->commit, m->match, l->commit, r->max_lag);
		return false;
	}
	struct baton_release rel;
	bool below = roll_release(m->release, &rel) &&
		     baton_release_compare(rel, r->target->release) < 0;
	if (m->stalled_index != 0 && !below) {
		snprintf(why, len,
			 "node %" PRIu64 " stopped applying at index %" PRIu64
			 " (%s)",
			 m->id, m->stalled_index,
			 m->stalled[0] ? m->stalled : "no reason given");
		return false;
	}
	return true;
}

bool roll_safe(struct roll *r, uint64_t id, char *why, size_t len,
	       uint64_t *blocker)
{
	*blocker = 0;
	roll_refresh(r);
	struct roll_view *v = &r->view;
	if (v->n == 0) {
		snprintf(why, len, "no member answers (%s)", v->err);
		return false;
	}
	const struct roll_member *target = roll_find(v, id);
	if (target == NULL) {
		snprintf(why, len, "node %" PRIu64 " is no longer a member",
			 id);
		*blocker = id;
		return false;
	}
	/* Every member answers first: that is the most useful thing to
	 * say, and a leader is then usually known. */
	for (size_t i = 0; i < v->n; i++) {
		if (!v->m[i].up) {
			snprintf(why, len,
				 "node %" PRIu64 " does not answer (%s)",
				 v->m[i].id, v->m[i].err);
			*blocker = v->m[i].id;
			return false;
		}
	}
	if (v->leader == NULL) {
		snprintf(why, len, "no member reports leading");
		return false;
	}
	size_t voters = 0, staying = 0;
	for (size_t i = 0; i < v->n; i++) {
		const struct roll_member *m = &v->m[i];
		voters += m->voter;
		if (m == target)
			continue;
		if (!roll_member_ok(r, v, m, why, len)) {
			*blocker = m->id;
			return false;
		}
		staying += m->voter;
	}
	/* With every other member fine this holds from 3 voters up (the
	 * pre-check refuses fewer); said here so that the rule is one
	 * place. */
	if (staying < voters / 2 + 1) {
		snprintf(why, len,
			 "with node %" PRIu64 " down, %zu of %zu voters "
			 "would be left: no majority",
			 id, staying, voters);
		return false;
	}
	return true;
}

int roll_wait_safe(struct roll *r, uint64_t id)
{
	uint64_t end = roll_now_ns() + (uint64_t)r->wait_s * 1000000000u;
	char why[ROLL_REASON_MAX], said[ROLL_REASON_MAX] = "";
	uint64_t blocker = 0, said_blocker = UINT64_MAX;
	while (!roll_safe(r, id, why, sizeof why, &blocker)) {
		/* Once per change of what is awaited: the numbers in `why`
		 * move while a member catches up. */
		size_t key = strcspn(why, "(");
		if (blocker != said_blocker || strncmp(why, said, key) != 0 ||
		    said[key] != why[key]) {
			struct roll_field f[] = {
				ROLL_F_NUM("node", id),
				ROLL_F_STR("reason", why),
				blocker ? ROLL_F_NUM("member", blocker)
					: ROLL_F_RAW("member", "null")};
			roll_emit(&r->out, "waiting", f, 3,
				  "waiting before restarting node %" PRIu64
				  ": %s",
				  id, why);
			snprintf(said, sizeof said, "%s", why);
			said_blocker = blocker;
		}
		if (roll_now_ns() >= end)
			return roll_fail(r, id,
					 "not restarting node %" PRIu64
					 ": after %d s (--wait-s), %s",
					 id, r->wait_s, why);
		roll_sleep_ms(ROLL_POLL_MS);
	}
	return 0;
}

/* ---- the hand-over ----------------------------------------------------- */

/* The voter to hand leadership to, from the view just read: it answers,
 * follows the leader in its term, is caught up and applies; of the target
 * release if any is (the preferred release); the highest match. */
static const struct roll_member *successor(struct roll *r, uint64_t leader)
{
	const struct roll_member *best = NULL;
	char why[ROLL_REASON_MAX];
	for (size_t i = 0; i < r->view.n; i++) {
		const struct roll_member *m = &r->view.m[i];
		if (m->id == leader || !m->voter || m->stalled_index != 0 ||
		    !roll_member_ok(r, &r->view, m, why, sizeof why))
			continue;
		bool better =
			best == NULL ||
			(roll_at_target(r, m) && !roll_at_target(r, best)) ||
			(roll_at_target(r, m) == roll_at_target(r, best) &&
			 m->match > best->match);
		if (better)
			best = m;
	}
	return best;
}

/* Ask the leader to hand over to `to_id`; false with `why` if refused. */
static bool ask_transfer(struct roll *r, const char *leader_addr,
			 uint64_t to_id, char *why, size_t len)
{
	char arg[24];
	snprintf(arg, sizeof arg, "%" PRIu64, to_id);
	struct ctl_conn c;
	const char *argv[] = {"BATON.TRANSFER", arg};
	redisReply *rep = NULL;
	struct ctl_opts o = *r->o;
	if (o.timeout_ms > TRANSFER_ASK_MS)
		o.timeout_ms = TRANSFER_ASK_MS;
	o.reply_timeout_ms = 0;
	if (ctl_conn_open(&c, &o, leader_addr) == 0)
		rep = ctl_conn_call(&c, 2, argv);
	bool ok = false;
	if (rep == NULL)
		snprintf(why, len, "%s", c.err);
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(why, len, "BATON.TRANSFER %" PRIu64 ": %s", to_id,
			 rep->str);
	else
		ok = true;
	freeReplyObject(rep);
	ctl_conn_close(&c);
	return ok;
}

int roll_hand_over(struct roll *r, uint64_t id)
{
	uint64_t end =
		roll_now_ns() + (uint64_t)r->step_timeout_s * 1000000000u;
	char why[ROLL_REASON_MAX] = "";
	uint64_t next_ask = 0, asked = 0;
	bool said_none = false;
	for (;;) {
		/* Read again before every decision: a member that died
		 * since the last look is never the one chosen. */
		roll_refresh(r);
		const struct roll_member *l = r->view.leader;
		if (l != NULL && l->id != id) {
			struct roll_field f[] = {ROLL_F_NUM("from", id),
						 ROLL_F_NUM("to", l->id),
						 ROLL_F_RAW("done", "true")};
			roll_emit(&r->out, "transfer", f, 3,
				  "node %" PRIu64 " leads now (term %" PRIu64
				  ")",
				  l->id, l->term);
			return 0;
		}
		const struct roll_member *to =
			l != NULL ? successor(r, id) : NULL;
		if (l != NULL && to == NULL && !said_none) {
			struct roll_field f[] = {ROLL_F_NUM("from", id)};
			roll_emit(&r->out, "transfer", f, 1,
				  "node %" PRIu64 " leads and no other voter "
				  "answers and is caught up: waiting for one",
				  id);
			said_none = true;
		}
		if (to != NULL && roll_now_ns() >= next_ask) {
			said_none = false;
			char to_release[CTL_VALUE_MAX];
			snprintf(to_release, sizeof to_release, "%s",
				 to->release);
			struct roll_field f[] = {
				ROLL_F_NUM("from", id),
				ROLL_F_NUM("to", to->id),
				ROLL_F_STR("to_release", to_release)};
			roll_emit(&r->out, "transfer", f, 3,
				  "node %" PRIu64 " leads: %shanding "
				  "leadership to node %" PRIu64 " (release %s)",
				  id, asked ? "again " : "", to->id,
				  to_release);
			asked = to->id;
			ask_transfer(r, l->client_addr, to->id, why,
				     sizeof why);
			next_ask = roll_now_ns() + TRANSFER_RESEND_NS;
		}
		if (roll_now_ns() >= end)
			return roll_fail(
				r, id,
				"leadership did not move from node %" PRIu64
				" within %d s%s%s",
				id, r->step_timeout_s, why[0] ? ": " : "", why);
		roll_sleep_ms(ROLL_POLL_MS);
	}
}

/* ---- resuming ------------------------------------------------------------ */

/* Append `s` to out (of len bytes, used at *at), quoted for /bin/sh when
 * it holds anything but plain characters. */
static void append_word(char *out, size_t len, size_t *at, const char *s)
{
	bool plain = s[0] != '\0';
	for (const char *p = s; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"
			    "YZ"
			    "0123456789-_.,:/=@%+",
			    *p))
			plain = false;
	char word[4096];
	size_t w = 0;
	if (plain) {
		w = (size_t)snprintf(word, sizeof word, "%s", s);
	} else {
		word[w++] = '\'';
		for (const char *p = s; *p && w + 5 < sizeof word; p++) {
			if (*p == '\'') {
				memcpy(word + w, "'\\''", 4);
				w += 4;
			} else {
				word[w++] = *p;
			}
		}
		word[w++] = '\'';
		word[w] = '\0';
	}
	if (*at < len)
		*at += (size_t)snprintf(out + *at, len - *at, "%s%s",
					*at ? " " : "", word);
}

void roll_resume_command(const struct roll *r, char *out, size_t len)
{
	size_t at = 0;
	char addr[CTL_ADDR_MAX + 16];
	out[0] = '\0';
	append_word(out, len, &at, "batonctl");
	append_word(out, len, &at, "-h");
	append_word(out, len, &at, r->o->host);
	snprintf(addr, sizeof addr, "%d", r->o->port);
	append_word(out, len, &at, "-p");
	append_word(out, len, &at, addr);
	if (r->o->timeout_given) {
		snprintf(addr, sizeof addr, "--timeout-ms=%d",
			 r->o->timeout_ms);
		append_word(out, len, &at, addr);
	}
	append_word(out, len, &at, "roll");
	for (const struct ctl_option *opt = ctl_roll_options; opt->name;
	     opt++) {
		const char *v = ctl_args_value(r->args, opt->name);
		if (v == NULL || strcmp(opt->name, "dry-run") == 0 ||
		    strcmp(opt->name, "skip") == 0)
			continue;
		char name[CTL_VALUE_MAX];
		snprintf(name, sizeof name, "--%s", opt->name);
		append_word(out, len, &at, name);
		if (opt->value_name != NULL)
			append_word(out, len, &at, v);
	}
	if (!r->restart_all)
		return;
	/* The nodes skipped before and those this run restarted. */
	char ids[CTL_MEMBERS_MAX * 24] = "";
	size_t n = 0;
	for (size_t i = 0; i < r->n_skip; i++)
		n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%" PRIu64,
				      n ? "," : "", r->skip[i]);
	for (size_t i = 0; i < r->n_started && i < r->n_plan; i++)
		if (r->plan[i].done) /* a node not seen back is done again */
			n += (size_t)snprintf(ids + n, sizeof ids - n,
					      "%s%" PRIu64, n ? "," : "",
					      r->plan[i].id);
	if (n > 0) {
		append_word(out, len, &at, "--skip");
		append_word(out, len, &at, ids);
	}
}
