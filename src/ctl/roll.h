/*
 * batonctl roll (docs/upgrading.md, "batonctl roll"): the pieces shared by
 * roll.c (options, pre-checks, plan, steps), roll_view.c (what the cluster
 * looks like now, as its members say) and roll_out.c (progress lines or
 * JSON events, and running the restart command).
 */
#ifndef BATON_CTL_ROLL_H
#define BATON_CTL_ROLL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/version.h"
#include "ctl.h"

/* Exit codes of roll beyond ctl.h's: a pre-check refused (nothing was
 * changed); rolled, but the machine version did not rise in time. */
#define ROLL_EXIT_REFUSED 3
#define ROLL_EXIT_MACHINE 4

/* One member as it answered BATON.NODE, with the leader's match index. */
struct roll_member {
	uint64_t id;
	bool voter;
	char client_addr[CTL_ADDR_MAX];
	bool up; /* answered BATON.NODE as this id */
	char err[CTL_ERR_MAX];
	char role[CTL_VALUE_MAX];
	char release[CTL_VALUE_MAX];
	uint64_t term, leader, commit, applied, last_index;
	uint64_t proto_min, proto_max, machine_max, machine_version;
	bool match_known; /* the leader's view */
	uint64_t match;
	uint64_t stalled_index; /* 0: it applies */
	char stalled[CTL_ERR_MAX];
	char upgrade_waits_for[CTL_ERR_MAX];
	char machine_upgrade[CTL_VALUE_MAX];
	char release_floor[CTL_VALUE_MAX];
	char downgrade[CTL_ERR_MAX];
	bool upgrade_hold; /* the log holds the burn-in hold */
};

struct roll_view {
	struct roll_member m[CTL_MEMBERS_MAX];
	size_t n;
	struct roll_member *leader; /* NULL: none reports leading */
	/* Set when no member list could be read at all. */
	char err[CTL_ERR_MAX];
};

/* Where the members may be asked: the node of the options first, then
 * every client address seen in a view (a restarted node does not answer
 * for a while, so the list never shrinks). */
struct roll_seeds {
	char addr[CTL_MEMBERS_MAX + 1][CTL_ADDR_MAX];
	size_t n;
};

/* ---- roll_view.c ------------------------------------------------------ */

void roll_seeds_init(struct roll_seeds *s, const struct ctl_opts *o);

/* Read the members (BATON.MEMBERS from the first seed that answers, the
 * leader's when one is known, for the match indexes), then every member's
 * BATON.NODE. Returns 0, or -1 with v->err set when no seed answered. */
int roll_observe(const struct ctl_opts *o, struct roll_seeds *s,
		 struct roll_view *v);

struct roll_member *roll_find(struct roll_view *v, uint64_t id);

/* Parse a release as a member reported it; false if it is not one. */
bool roll_release(const char *text, struct baton_release *out);

/* The leader's commit minus the member's match, or UINT64_MAX if either is
 * not known. */
uint64_t roll_lag(const struct roll_view *v, const struct roll_member *m);

/* ---- roll_out.c ------------------------------------------------------- */

/* A field of a JSON event: a string, a number or raw JSON (an array). */
enum roll_field_kind { ROLL_STR, ROLL_NUM, ROLL_RAW };
struct roll_field {
	const char *key;
	enum roll_field_kind kind;
	const char *str; /* ROLL_STR, ROLL_RAW */
	uint64_t num;	 /* ROLL_NUM */
};
#define ROLL_F_STR(k, v) ((struct roll_field){(k), ROLL_STR, (v), 0})
#define ROLL_F_NUM(k, v) ((struct roll_field){(k), ROLL_NUM, NULL, (v)})
#define ROLL_F_RAW(k, v) ((struct roll_field){(k), ROLL_RAW, (v), 0})

struct roll_out {
	bool json;
	uint64_t start_ns; /* CLOCK_MONOTONIC */
};

void roll_out_init(struct roll_out *out, bool json);
double roll_elapsed_s(const struct roll_out *out);
uint64_t roll_now_ns(void);

/* One progress line "[+12.3s] <message>" on stdout, or with --json one
 * object {"t": 12.3, "event": ..., "message": ..., <fields>}. */
void roll_emit(const struct roll_out *out, const char *event,
	       const struct roll_field *fields, size_t n_fields,
	       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A line of text with no event (the state after a failure, the plan's
 * details): on stdout as text; left out with --json (the event has it). */
void roll_say(const struct roll_out *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Run `cmd` with /bin/sh -c in a process group of its own, its output
 * passed through line by line with `prefix` (to stdout, or stderr with
 * --json). Waits at most timeout_ms; then the group gets SIGTERM, SIGKILL
 * two seconds later. Returns its exit status (0..255), 128 + a signal, or
 * -1 if it could not be started or timed out; `why` says which. */
int roll_run_command(const struct roll_out *out, const char *cmd,
		     const char *prefix, int timeout_ms, char *why,
		     size_t why_len);

void roll_sleep_ms(int ms);
/* A command template with {id} replaced by `id` and {release} by
 * `release` (the restart command of roll, the start and stop commands of
 * upgrade). False if the result does not fit in `len` bytes. */
bool roll_command_expand(const char *templ, uint64_t id, const char *release,
			 char *out, size_t len);

/* ---- roll.c, roll_check.c: the command's state ------------------------ */

#define ROLL_POLL_MS 100
#define ROLL_REASON_MAX 1024u

/* Bounds of --soak and the health gate's thresholds (docs/upgrading.md,
 * "Health gates"), shared with batonctl upgrade, which passes them on. */
#define ROLL_SOAK_S_MAX 3600u
#define ROLL_GATE_RATIO_MAX 1000u
#define ROLL_GATE_MS_MAX 3600000u

struct roll_step {
	uint64_t id;
	bool done;		  /* node_done said */
	char from[CTL_VALUE_MAX]; /* its release before the roll */
	bool led;		  /* it led when the plan was made */
	uint64_t lag;		  /* behind the leader's commit, then */
};

struct roll {
	const struct ctl_opts *o;
	/* Options of the command. */
	const char *to_text;
	const struct baton_profile *target;
	const char *restart;
	const struct ctl_args *args; /* for the resume command */
	bool dry_run;
	bool restart_all; /* members already at the target too */
	int pause_ms;
	int step_timeout_s;
	int wait_s; /* bound on each wait for a safe cluster */
	uint64_t max_lag;
	uint64_t skip[CTL_MEMBERS_MAX]; /* --skip: not restarted */
	size_t n_skip;
	/* The health gate (roll_gate.c): --soak (0: none) and its
	 * thresholds, and the figures measured before the roll. */
	int soak_ms;
	uint64_t gate_p99_ratio;  /* p99 may grow this many times */
	uint64_t gate_p99_min_ms; /* ... and at least this much */
	uint64_t gate_errors_pct; /* error replies: percentage points */
	uint64_t gate_apply_lag;  /* entries beyond the baseline's */
	bool gate_failed;	  /* the gate found a node clearly worse */
	struct roll_gate_base {
		bool p99_known;
		uint64_t p99_usec;
		uint64_t commands, errors;
		uint64_t apply_lag_max;
		size_t members; /* measured in the baseline */
	} base;
	/* State. */
	struct roll_out out;
	struct roll_seeds seeds;
	struct roll_view view;
	struct roll_step plan[CTL_MEMBERS_MAX];
	size_t n_plan;
	size_t n_started; /* steps whose restart command ran */
};

/* The restart template with {id} and {release} replaced; false if it
 * does not fit in len bytes. */
bool roll_expand(const struct roll *r, uint64_t id, const char *release,
		 char *out, size_t len);

/* ---- roll_safe.c: the check before every restart, the hand-over ---- */

/* Whether member m may stay as it is while another restarts: it
 * answers, follows the leader of v (which must have one), is caught up
 * and applies (a member stalled below the target is fine). Else `why`. */
bool roll_member_ok(const struct roll *r, const struct roll_view *v,
		    const struct roll_member *m, char *why, size_t len);

/* Whether node `id` may be restarted now: a fresh view in which every
 * member answers, knows the leader and is caught up, none is stalled
 * (but a member below the target: the roll restarts it), and the voters
 * other than `id` that are so make a majority. If not, `why` says what
 * is missing and *blocker names the member (0: none in particular). */
bool roll_safe(struct roll *r, uint64_t id, char *why, size_t len,
	       uint64_t *blocker);

/* Wait (at most --wait-s) until roll_safe(id), saying once per change
 * what it waits for (event "waiting"). Returns 0, or the exit code of
 * roll_fail after the bound. */
int roll_wait_safe(struct roll *r, uint64_t id);

/* Node `id` leads: hand leadership over, to a voter read as answering and
 * caught up just before each BATON.TRANSFER, and wait until another node
 * leads. Returns 0, or an exit code after reporting. */
int roll_hand_over(struct roll *r, uint64_t id);

/* The command line that resumes this roll: the same options (with
 * --restart-all, --skip grows by the nodes this run restarted and saw
 * back and caught up). The password is not written: batonctl takes it
 * from BATON_PASSWORD. */
void roll_resume_command(const struct roll *r, char *out, size_t len);

/* ---- roll_gate.c: the health gate (--soak) --------------------------- */

/* Before the first restart: measure every member for the soak period
 * (r->base). */
void roll_gate_baseline(struct roll *r);

/* After plan step k's node is back: watch it for the soak period and
 * compare with r->base. Returns 0 when it passes; otherwise puts the node
 * back on its previous release when the release floor allows (a plain
 * restart) or says how to (a downgrade), and returns the exit code of
 * roll_fail. */
int roll_gate(struct roll *r, size_t k);

/* roll.c: whether the last batonctl roll run in this process stopped
 * because the health gate found a node clearly worse (batonctl upgrade
 * says so when it stops at that roll). */
bool roll_stopped_by_gate(void);

/* ---- roll_check.c: pre-checks, failure, the machine version ----------- */

/* Whether member m answers and reports the target release. */
bool roll_at_target(const struct roll *r, const struct roll_member *m);

/* A fresh r->view (empty when no member answers). */
void roll_refresh(struct roll *r);

/* Read the cluster into r->view and check that the roll may start; every
 * refusal is said. Returns how many there were. */
size_t roll_precheck(struct roll *r);

/* Stop the roll at node `id`: say why, the cluster's state now, how to
 * resume and how to roll back. Returns CTL_EXIT_ERROR. */
int roll_fail(struct roll *r, uint64_t id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* After the last node: wait (bounded) until every member reports the
 * effective machine version the members' machine_max allow. Returns 0,
 * or ROLL_EXIT_MACHINE after saying what holds it back. */
int roll_wait_machine(struct roll *r);

#endif /* BATON_CTL_ROLL_H */
