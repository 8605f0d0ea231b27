/*
 * Apply: committed entries into the machine, in log order, each under the
 * machine version in force at its index; the version facts follow the
 * version entries. What this node cannot interpret (an entry type it does
 * not know, a command the machine refuses, a version entry it cannot
 * decode, a machine version above what this release implements, a
 * snapshot the machine cannot restore) stops applying there: the stall.
 * Nothing is skipped and nothing aborts; the data stays as it is, and the
 * node says what it found, what it runs and what to do.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Texts are cut to their buffer: the start says the most. */
__attribute__((format(printf, 3, 4))) static void text(char *buf, size_t len,
						       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static const char *machine_errmsg(const struct baton_pipeline *p)
{
	const char *m = p->machine->ops->errmsg != NULL
				? p->machine->ops->errmsg(p->machine)
				: NULL;
	return m != NULL && m[0] != '\0' ? m : "no detail given";
}

/* "release 1.2.3, machine versions 1..2" of this node. */
static void runs(const struct baton_pipeline *p, char *buf, size_t len)
{
	char rel[BATON_RELEASE_STR_MAX];
	const struct baton_profile *pr = &p->c.raft.profile;
	text(buf, len, "this node runs release %s (machine versions 1..%u)",
	     baton_release_format(pr->release, rel), pr->machine_max.value);
}

/* Stop applying at `index` (the entry of term `term`; 0 for a snapshot).
 * The same stall found again (the core handed the entry over once more)
 * is not announced twice. */
static void stall(struct baton_pipeline *p, baton_index index, baton_term term,
		  bool snapshot, const char *why)
{
	BATON_ASSERT(index > 0);
	BATON_ASSERT(p->stalled_index == 0 || index <= p->stalled_index);
	bool again = p->stalled_index == index && p->stalled_term == term &&
		     p->stalled_snapshot == snapshot;
	p->stalled_index = index;
	p->stalled_term = term;
	p->stalled_snapshot = snapshot;
	p->stalled_by_core = false; /* describe_core_stall says otherwise */
	p->stop_due = index;
	p->snapshot_due = false;
	if (again)
		return;
	text(p->stalled_why, sizeof p->stalled_why, "%s", why);
	/* Told first: the requests failed next are answered by callbacks
	 * that look at the stall (a node that needs a newer release sends
	 * its clients' reads on to the leader instead of failing them). */
	if (p->env.stalled != NULL)
		p->env.stalled(p->env.data, index, p->stalled_why);
	pl_requests_stalled(p);
}

static void clear_stall(struct baton_pipeline *p)
{
	p->stalled_index = 0;
	p->stalled_term = 0;
	p->stalled_snapshot = false;
	p->stalled_by_core = false;
	p->stalled_why[0] = '\0';
}

/* needs-upgrade: the log (an entry or a snapshot at index) makes the
 * effective machine version `machine`, above what this release
 * implements. The operator's one remedy is a newer release on the same
 * data; status and the log say so in these words. */
static void stall_needs(struct baton_pipeline *p, baton_index index,
			baton_term term, bool snapshot, uint32_t machine)
{
	char rel[BATON_RELEASE_STR_MAX], why[BATON_STALL_TEXT_MAX];
	const struct baton_profile *pr = &p->c.raft.profile;
	BATON_ASSERT(machine > pr->machine_max.value);
	text(why, sizeof why,
	     "needs-upgrade: the effective machine version becomes %u at "
	     "index %" PRIu64 ", but release %s implements machine versions "
	     "up to %u; restart this node with a release that implements "
	     "machine version %u",
	     machine, index, baton_release_format(pr->release, rel),
	     pr->machine_max.value, machine);
	stall(p, index, term, snapshot, why);
}

/* Future data: the release floor of the log (`floor`, from index) is above
 * this node's release. Held, not broken: a newer binary, or an explicit
 * downgrade that lowers the floor, lets it go on. */
static void stall_floor(struct baton_pipeline *p, baton_index index,
			baton_term term, struct baton_release floor)
{
	char rel[BATON_RELEASE_STR_MAX], fl[BATON_RELEASE_STR_MAX];
	char why[BATON_STALL_TEXT_MAX];
	const struct baton_profile *pr = &p->c.raft.profile;
	text(why, sizeof why,
	     "future data: the release floor of this log is %s (release %s "
	     "or newer ran on a majority of the voters), from index %" PRIu64
	     ", and release %s may neither lead nor apply under it; restart "
	     "this node with release %s or newer, or run an explicit "
	     "downgrade (batonctl downgrade) before running older releases",
	     baton_release_format(floor, fl), fl, index,
	     baton_release_format(pr->release, rel), fl);
	stall(p, index, term, false, why);
}

static void stall_entry(struct baton_pipeline *p, const struct baton_entry *e,
			const char *found, const char *todo)
{
	char me[160], why[BATON_STALL_TEXT_MAX];
	runs(p, me, sizeof me);
	text(why, sizeof why,
	     "stopped applying at index %" PRIu64 ": %s; %s; %s", e->index,
	     found, me, todo);
	stall(p, e->index, e->term, false, why);
}

/* ---- one entry ----------------------------------------------------------- */

/* 0 when applied; otherwise the node stalled at e. */
static int apply_versions(struct baton_pipeline *p, const struct baton_entry *e)
{
	struct baton_version_state v;
	char found[200];
	int rv = baton_version_state_decode(e->buf, e->len, &v);
	if (rv != 0) {
		text(found, sizeof found,
		     "a version entry of format %u that it cannot read "
		     "(%s)",
		     e->len > 0 ? e->buf[0] : 0u, baton_strerror(rv));
		stall_entry(p, e, found,
			    "upgrade this node to a newer release");
		return rv;
	}
	/* The core stalls at such an entry before handing it over; this
	 * is the machine's own line of defence. */
	if (v.machine.value > p->c.raft.profile.machine_max.value) {
		stall_needs(p, e->index, e->term, false, v.machine.value);
		return BATON_EVERSION;
	}
	struct baton_machine_version from = p->versions.machine;
	if (v.machine.value != from.value &&
	    p->machine->ops->version_changed != NULL) {
		/* The snapshot in progress is of the old version's state. */
		pl_snapshot_abandon(p, "the machine version changes");
		rv = p->machine->ops->version_changed(p->machine, e->index,
						      from, v.machine);
		if (rv != 0) {
			text(found, sizeof found,
			     "the machine cannot change from version %u to "
			     "%u: %s",
			     from.value, v.machine.value, machine_errmsg(p));
			stall_entry(p, e, found,
				    "upgrade this node to a release that "
				    "implements that machine version");
			return rv;
		}
	}
	p->versions = v;
	/* The entry that enabled a downgrade: snapshot at once, so that this
	 * node's log soon holds nothing written under the newer versions
	 * and it may restart on the target release (downgrade.since). */
	if (v.downgrade.since == e->index)
		p->snapshot_due = true;
	return 0;
}

static int apply_command(struct baton_pipeline *p, const struct baton_entry *e,
			 struct baton_buf *reply)
{
	int rv = p->machine->ops->apply(p->machine, p->versions.machine, e,
					reply);
	if (rv == BATON_ENOMEM) {
		/* The one place a node gives up: it can neither apply the
		 * entry nor skip it (the others applied it), and stalling on
		 * a transient shortage would leave it behind for good. A
		 * restart replays the log. */
		pl_log(p, BATON_PIPELINE_LOG_ERROR,
		       "out of memory applying entry %" PRIu64 "; stopping",
		       e->index);
		abort();
	}
	if (rv == 0)
		return 0;
	char found[BATON_STALL_TEXT_MAX / 2];
	text(found, sizeof found,
	     "the state machine refuses the command (%s) under machine "
	     "version %u",
	     machine_errmsg(p), p->versions.machine.value);
	stall_entry(p, e, found,
		    "upgrade this node to a release that can apply it");
	return rv;
}

/* 0 when applied; otherwise the node stalled at e. */
static int apply_entry(struct baton_pipeline *p, const struct baton_entry *e)
{
	BATON_ASSERT(e->index == p->applied + 1);
	pl_props_fail_upto(p, e->index - 1, BATON_ELEADERCHANGED);
	bool waited = pl_proposal_waits(p, e);
	int rv = 0;
	baton_buf_reset(&p->reply);
	switch (e->type) {
	case BATON_ENTRY_NOOP:
	case BATON_ENTRY_CONFIG: /* the core's own */
		break;
	case BATON_ENTRY_VERSION:
		rv = apply_versions(p, e);
		break;
	case BATON_ENTRY_COMMAND:
		rv = apply_command(p, e, waited ? &p->reply : NULL);
		break;
	default: {
		char found[80];
		text(found, sizeof found,
		     "an entry of type %u, unknown to this release", e->type);
		stall_entry(p, e, found,
			    "upgrade this node to a newer release");
		rv = BATON_EVERSION;
	}
	}
	if (rv != 0)
		return rv;
	/* Past an old stall: what caused it was replaced (a new leader
	 * overwrote it) in the same step. */
	if (p->stalled_index != 0 && e->index >= p->stalled_index)
		clear_stall(p);
	p->applied = e->index;
	p->applied_bytes += e->len;
	pl_proposal_applied(p, e, waited,
			    e->type == BATON_ENTRY_COMMAND ? &p->reply : NULL);
	if (e->type == BATON_ENTRY_VERSION)
		pl_versions_applied(p, e);
	return 0;
}

/* ---- snapshots ----------------------------------------------------------- */

/* Restore the machine from a snapshot: 0, or the node stalled there. */
static int restore(struct baton_pipeline *p,
		   const struct baton_snapshot_meta *meta, const uint8_t *data,
		   size_t len)
{
	char found[BATON_STALL_TEXT_MAX / 2], me[160],
		why[BATON_STALL_TEXT_MAX];
	struct baton_machine_version v = meta->versions.machine;
	if (v.value > p->c.raft.profile.machine_max.value) {
		/* Never handed to the machine (the core refuses such a
		 * snapshot from a leader; this one was on our disk). */
		stall_needs(p, meta->index, 0, true, v.value);
		return BATON_EVERSION;
	}
	int rv = p->machine->ops->restore(p->machine, v, data, len);
	if (rv == BATON_ENOMEM)
		text(found, sizeof found,
		     "out of memory restoring the snapshot at index %" PRIu64,
		     meta->index);
	else if (rv != 0)
		text(found, sizeof found,
		     "the snapshot at index %" PRIu64
		     " (machine version %u) cannot be restored (%s: %s)",
		     meta->index, v.value, baton_err_name(rv),
		     machine_errmsg(p));
	if (rv == 0) {
		p->applied = meta->index;
		p->versions = meta->versions;
		p->snapshot_index = meta->index;
		return 0;
	}
	runs(p, me, sizeof me);
	text(why, sizeof why,
	     "stopped applying at index %" PRIu64 ": %s; %s; %s", meta->index,
	     found, me,
	     rv == BATON_ENOMEM
		     ? "restart it with more memory"
		     : "upgrade this node to a release that implements "
		       "that machine version and format");
	stall(p, meta->index, 0, true, why);
	return rv;
}

void pl_restore_at_start(struct baton_pipeline *p,
			 const struct baton_snapshot_meta *meta,
			 const uint8_t *data, size_t len)
{
	BATON_ASSERT(meta->index > 0);
	/* Until the machine holds it, nothing is applied. */
	p->applied = 0;
	p->snapshot_index = meta->index;
	baton_version_state_initial(&p->versions);
	if (restore(p, meta, data, len) != 0) {
		struct baton_event ev = {.type = BATON_EVENT_APPLY_STOPPED};
		ev.u.apply_stopped.index = p->stop_due;
		p->stop_due = 0;
		pl_step(p, &ev);
	}
	BATON_ASSERT(p->applied == meta->index || p->stalled_index != 0);
}

void pl_apply_update(struct baton_pipeline *p, const struct baton_update *u)
{
	if (u->snapshot != NULL) {
		/* Installed from the leader: it replaces everything up to its
		 * index, a stall there included. */
		if (p->stalled_index != 0 &&
		    p->stalled_index <= u->snapshot->index)
			clear_stall(p);
		pl_props_fail_upto(p, u->snapshot->index, BATON_ELEADERCHANGED);
		pl_snapshot_abandon(p, "a snapshot from the leader replaces "
				       "the state");
		if (restore(p, u->snapshot, u->snapshot_data,
			    u->snapshot_len) != 0)
			return;
		pl_log(p, BATON_PIPELINE_LOG_INFO,
		       "installed a snapshot at index %" PRIu64
		       " from the leader (machine version %u)",
		       u->snapshot->index, u->snapshot->versions.machine.value);
	}
	for (uint32_t i = 0; i < u->n_apply; i++) {
		const struct baton_entry *e = &u->apply[i];
		if (e->index <= p->applied)
			continue; /* covered by the snapshot just installed */
		/* A gap: the machine does not hold what precedes (a snapshot
		 * it could not restore). The stall stands. */
		if (e->index != p->applied + 1)
			break;
		if (apply_entry(p, e) != 0)
			break;
	}
}

/* ---- following the core's stall ------------------------------------------ */

static void describe_core_stall(struct baton_pipeline *p,
				const struct baton_raft_status *s)
{
	baton_index index = s->stalled_index;
	const struct baton_entry *e = baton_raft_entry(p->raft, index);
	char found[160];
	if (s->needs_release.major != 0 || s->needs_release.minor != 0 ||
	    s->needs_release.patch != 0) {
		stall_floor(p, index, e != NULL ? e->term : 0,
			    s->needs_release);
		return;
	}
	if (s->needs_machine.value != 0) {
		/* A version entry, or a leader's snapshot it refused. */
		stall_needs(p, index, e != NULL ? e->term : 0, false,
			    s->needs_machine.value);
		return;
	}
	if (e == NULL) {
		text(found, sizeof found, "an entry the core cannot interpret");
		struct baton_entry none = {.index = index};
		stall_entry(p, &none, found,
			    "upgrade this node to a newer release");
		return;
	}
	const char *kind = e->type == BATON_ENTRY_CONFIG    ? "configuration"
			   : e->type == BATON_ENTRY_VERSION ? "version"
							    : "log";
	text(found, sizeof found,
	     "a %s entry of format %u that this release cannot read", kind,
	     e->len > 0 ? e->buf[0] : 0u);
	stall_entry(p, e, found, "upgrade this node to a newer release");
}

void pl_stall_sync(struct baton_pipeline *p)
{
	if (baton_raft_stalled_index(p->raft) == p->stalled_index)
		return; /* the common case, checked without a status copy */
	struct baton_raft_status s;
	baton_raft_status(p->raft, &s);
	if (s.stalled_index == p->stalled_index)
		return;
	if (p->stalled_index != 0 &&
	    (s.stalled_index == 0 || s.stalled_index > p->stalled_index)) {
		/* The core lifted the stall. If what caused ours is still
		 * there (the core looks again only at what it decodes
		 * itself), tell it again. */
		bool still = false;
		if (p->stalled_by_core) {
			still = false; /* the core knows its own */
		} else if (p->stalled_snapshot) {
			still = s.snapshot_index == p->stalled_index &&
				p->applied < p->stalled_index;
		} else {
			baton_term t;
			still = baton_raft_term_at(p->raft, p->stalled_index,
						   &t) &&
				t == p->stalled_term;
		}
		if (still) {
			struct baton_event ev = {
				.type = BATON_EVENT_APPLY_STOPPED};
			ev.u.apply_stopped.index = p->stalled_index;
			pl_step(p, &ev);
			return;
		}
		clear_stall(p);
		if (s.stalled_index == 0)
			return;
	}
	/* A stall of the core's own: a configuration or version entry it
	 * cannot decode. */
	if (s.stalled_index != 0 && s.stalled_index != p->stalled_index) {
		describe_core_stall(p, &s);
		p->stalled_by_core = true;
		p->stop_due = 0; /* the core knows */
	}
}
