/*
 * Internal state of the Raft core, shared by the files of src/core.
 *
 * Each file owns one concern: election.c (roles, timers, votes),
 * replication.c (AppendEntries both ways, commit), snapshot.c (taking,
 * sending and installing snapshots), membership.c (configuration changes),
 * read_index.c (linearizable reads), transfer.c (leadership transfer),
 * versions.c (the version state of the log, and stalling on data this
 * node cannot interpret), upgrade.c (the version rules a leader follows:
 * info requests, the version table, the effective machine version, the
 * release floor), eligibility.c (who may lead, by release), downgrade.c
 * (explicit downgrades), log.c
 * (the in-memory log), raft.c (lifecycle, step dispatch, the update). config.c
 * and version.c hold the public codecs of configurations and version states,
 * and the table of releases.
 */
#ifndef BATON_CORE_H
#define BATON_CORE_H

#include <baton/raft.h>

#include <baton/assert.h>

#include "le.h"

/* Hard upper bound of max_inflight_appends (the ring below is fixed). */
#define BATON__INFLIGHT_MAX 64u
/* Hard upper bound of commands in one propose event or one AppendEntries. */
#define BATON__BATCH_MAX 4096u
/* Configuration and version entries are the core's own: max_entry_bytes
 * (a limit on commands) does not bound them below this, room for their
 * later formats. */
#define BATON__CORE_ENTRY_BYTES_MAX 4096u
/* Pending linearizable reads a leader holds at once. */
#define BATON__READS_MAX 4096u

/* ---- log.c: entries since the last compaction, held in memory ---------- */

struct baton__log {
	struct baton_entry *slots; /* live entries are slots[head, head+n) */
	size_t cap;
	size_t head;
	size_t n;
	/* Compacted slots before head whose payloads are not freed yet. */
	size_t garbage;
	/* The payload bytes held, garbage included (baton_raft_log_bytes). */
	uint64_t bytes;
	baton_index base; /* index just before the first held entry */
	baton_term base_term;
};

/* Payloads of compacted entries freed per step: a few tens of
 * microseconds, so a compaction of 100000 entries is done within about
 * fifty steps (a fraction of a second of a busy node) without a pause. */
#define BATON__LOG_COLLECT_PER_STEP 2048u

void baton__log_init(struct baton__log *l);
void baton__log_free(struct baton__log *l);
/* Free up to `budget` payloads of compacted entries (see log.c). */
void baton__log_collect(struct baton__log *l, size_t budget);
baton_index baton__log_last_index(const struct baton__log *l);
baton_term baton__log_last_term(const struct baton__log *l);
struct baton_entry *baton__log_get(const struct baton__log *l, baton_index i);
bool baton__log_term(const struct baton__log *l, baton_index i,
		     baton_term *term);
/* Append a copy of buf as the next entry. */
int baton__log_append(struct baton__log *l, baton_term term, uint32_t type,
		      const void *buf, uint32_t len);
/* Drop entries with index >= i. */
void baton__log_truncate(struct baton__log *l, baton_index i);
/* Drop entries with index <= i (i must be held or be the base). */
void baton__log_compact(struct baton__log *l, baton_index i);
/* Drop everything; the log restarts after (base, base_term). */
void baton__log_reset(struct baton__log *l, baton_index base,
		      baton_term base_term);

/* ---- per-follower replication state (leader only) --------------------- */

enum baton__progress_state {
	BATON__PROBE = 1, /* one append at a time until the match is found */
	BATON__REPLICATE = 2, /* pipelined appends */
	BATON__SNAPSHOT = 3,  /* sending a snapshot in chunks */
};

struct baton__progress {
	baton_node_id id;
	uint32_t state;
	baton_index next;
	baton_index match;
	bool probe_sent;
	bool recent_active; /* heard from since the last quorum check */
	bool chunk_acked;   /* a snapshot chunk answered since the last tick */
	uint64_t acked_seq; /* highest heartbeat_seq echoed */
	/* Ring of the AppendEntries in flight: the last index each carries
	 * and the heartbeat round it was sent in. */
	baton_index inflight[BATON__INFLIGHT_MAX];
	uint64_t inflight_seq[BATON__INFLIGHT_MAX];
	uint32_t inflight_head;
	uint32_t inflight_n;
	/* Snapshot transfer. */
	baton_index snap_index;
	uint64_t snap_offset;
};

struct baton__pending_read {
	baton_node_id from; /* 0: a local request */
	uint64_t request_id;
	baton_index read_index;
	uint64_t seq; /* heartbeat round that must be acknowledged */
};

/* What an info reply told the leader of one member, this term. */
struct baton__live {
	baton_node_id id;
	uint64_t seq; /* the info round it answered */
	struct baton_profile profile;
	uint64_t memory_max_bytes; /* as it told (0: none) */
};

/* A growable array of messages. */
struct baton__msgs {
	struct baton_msg *v;
	uint32_t n;
	uint32_t cap;
};

struct baton_raft {
	struct baton_raft_options o;
	uint64_t now_ms;
	uint64_t rng;

	/* Persistent state (mirrors what the driver made durable). */
	baton_term term;
	baton_node_id vote;
	struct baton__log log;
	struct baton_snapshot_meta snap;
	uint8_t *snap_data;
	size_t snap_len;

	/* Volatile state. */
	uint32_t role;
	baton_node_id leader_id;
	baton_index commit_index;
	baton_index applied_index;
	baton_index persisted_index;
	struct baton_config config; /* latest in the log, committed or not */
	baton_index config_index;
	/* The version facts, kept like the configuration: the latest in the
	 * log, committed or not (versions_index 0: the initial state). */
	struct baton_version_state versions;
	baton_index versions_index;
	/* The first index this node cannot interpret (0: none): nothing at or
	 * after it is applied, and the node does not stand for election. */
	baton_index stalled_index;
	/* Non-zero when the stall is a version entry or a snapshot raising
	 * the machine version to this, above our own machine_max. */
	struct baton_machine_version needs_machine;
	/* Non-zero when the stall is the floor hold: the log's floor (this
	 * one, the latest) is above our release (versions.c). */
	struct baton_release needs_release;
	/* A stalled leader tried to hand its leadership over once. */
	bool handover_tried;
	/* The driver found this node's wall clock too far from the others'
	 * (BATON_EVENT_CLOCK): it does not stand, and as leader hands over
	 * (clock.c). */
	bool clock_barred;
	/* Rule 2's wait (eligibility.c): election timeouts let pass without
	 * a leader, since when. */
	uint32_t minority_waits;
	uint64_t minority_since_ms;
	/* The last refusal under the version rules, for the driver's log. */
	char refusal[320];
	uint64_t refusal_seq;

	/* Timers (absolute, in ms). */
	uint64_t election_deadline_ms;
	uint64_t leader_contact_ms; /* last message from a current leader */
	/* The leader whose connection closed (BATON_EVENT_PEER_CLOSED),
	 * while no leader is known since; 0: none. */
	baton_node_id leader_closed;
	/* Campaigns since then on the short timer (election.c). */
	uint32_t fast_campaigns;
	uint64_t heartbeat_deadline_ms;
	uint64_t quorum_check_deadline_ms;

	/* Elections: who answered in this (pre-)campaign. */
	baton_node_id voters_answered[BATON_MAX_MEMBERS];
	bool vote_granted[BATON_MAX_MEMBERS];
	uint32_t n_answered;

	/* Leader state. */
	struct baton__progress progress[BATON_MAX_MEMBERS];
	uint32_t n_progress;
	/* The first entry of this term: a version entry (it commits what
	 * came before and anchors read-index requests). */
	baton_index leader_first_index;
	uint64_t heartbeat_seq;
	bool read_round_wanted;
	struct baton__pending_read *reads;
	uint32_t n_reads;
	uint32_t reads_cap;
	baton_node_id transfer_target;
	uint64_t transfer_deadline_ms;
	bool timeout_now_sent;
	baton_node_id promotee;
	baton_index promotee_target;
	uint64_t promotee_deadline_ms;
	/* The live version table (upgrade.c): members known from info
	 * replies this term, the leader aside (it knows itself). */
	struct baton__live live[BATON_MAX_MEMBERS];
	uint32_t n_live;
	uint64_t info_seq;	       /* the last info round sent */
	uint64_t info_deadline_ms;     /* next round (unknown or behind) */
	uint64_t info_all_deadline_ms; /* next round asking every member */
	/* The rounds that asked every member, newest first (0: none yet
	 * this term): a member that answered neither has been silent for
	 * over an election timeout (downgrade.c). */
	uint64_t info_all_seq[2];

	/* A snapshot arriving in chunks (follower). */
	struct baton_snapshot_meta incoming;
	uint8_t *incoming_data;
	uint64_t incoming_len;
	uint64_t incoming_total;

	/* What the next update must carry. */
	bool hs_dirty;
	bool snapshot_installed;
	baton_index unstable_from; /* first entry not yet handed to persist */
	baton_index truncate_from;
	baton_index compact_upto;
	baton_node_id promotion_failed;
	struct baton__msgs msgs;
	struct baton__msgs msgs_after;
	struct baton_read_result *read_results;
	uint32_t n_read_results;
	uint32_t read_results_cap;
	bool alloc_failed; /* an output could not be queued: reported once */
};

/* ---- invariants.c ------------------------------------------------------ */

/* Check what holds between any two steps (stops the node if broken). */
void baton__assert_invariants(const struct baton_raft *r);

/* ---- raft.c: output helpers ------------------------------------------- */

/* A zeroed message to `to`, queued to send now (or after persistence).
 * Returns NULL if memory ran out (the message is then simply lost, which
 * Raft tolerates as network loss). */
struct baton_msg *baton__send(struct baton_raft *r, uint32_t type,
			      baton_node_id to);
struct baton_msg *baton__send_after_persist(struct baton_raft *r, uint32_t type,
					    baton_node_id to);
void baton__read_done(struct baton_raft *r, uint64_t request_id,
		      baton_index read_index, int status);
uint64_t baton__random(struct baton_raft *r);
/* Quorum of voters in the current configuration. */
uint32_t baton__voter_count(const struct baton_raft *r);
bool baton__is_voter(const struct baton_raft *r, baton_node_id id);
bool baton__is_member(const struct baton_raft *r, baton_node_id id);
bool baton__term_at(const struct baton_raft *r, baton_index i,
		    baton_term *term);
baton_index baton__last_index(const struct baton_raft *r);
baton_term baton__last_term(const struct baton_raft *r);

/* ---- election.c -------------------------------------------------------- */

void baton__become_follower(struct baton_raft *r, baton_term term,
			    baton_node_id leader);
void baton__reset_election_timer(struct baton_raft *r);
void baton__election_tick(struct baton_raft *r);
void baton__campaign(struct baton_raft *r, bool pre_vote, bool transfer);
void baton__recv_vote(struct baton_raft *r, const struct baton_msg *m);
void baton__recv_vote_result(struct baton_raft *r, const struct baton_msg *m);
bool baton__in_lease(const struct baton_raft *r);
/* BATON_EVENT_PEER_CLOSED: the connection to peer id closed. */
void baton__peer_closed(struct baton_raft *r, baton_node_id id);
/* clock.c: BATON_EVENT_CLOCK, and the barred leader's tick. */
void baton__clock_barred(struct baton_raft *r, bool barred);
void baton__clock_leader_tick(struct baton_raft *r);

/* ---- replication.c ----------------------------------------------------- */

void baton__progress_reset(struct baton_raft *r);
struct baton__progress *baton__progress_find(struct baton_raft *r,
					     baton_node_id id);
void baton__send_append(struct baton_raft *r, struct baton__progress *p);
void baton__broadcast_append(struct baton_raft *r);
void baton__broadcast_heartbeat(struct baton_raft *r);
void baton__leader_tick(struct baton_raft *r);
void baton__recv_append(struct baton_raft *r, const struct baton_msg *m);
void baton__recv_append_result(struct baton_raft *r, const struct baton_msg *m);
void baton__maybe_commit(struct baton_raft *r);
/* Append locally as leader and account for it. */
int baton__leader_append(struct baton_raft *r, uint32_t type, const void *buf,
			 uint32_t len);
/* Truncate the log from i, keeping the config and persistence in step. */
void baton__truncate(struct baton_raft *r, baton_index i);

/* ---- snapshot.c -------------------------------------------------------- */

void baton__send_snapshot_chunk(struct baton_raft *r,
				struct baton__progress *p);
void baton__recv_snapshot(struct baton_raft *r, const struct baton_msg *m);
void baton__recv_snapshot_result(struct baton_raft *r,
				 const struct baton_msg *m);
int baton__snapshot_taken(struct baton_raft *r, baton_index index,
			  const uint8_t *data, size_t len);

/* ---- membership.c ------------------------------------------------------ */

/* Recompute the latest configuration from the log (after a truncation). */
void baton__config_refresh(struct baton_raft *r);
/* A configuration entry was appended at index. */
void baton__config_appended(struct baton_raft *r, const struct baton_entry *e);
int baton__add_learner(struct baton_raft *r, baton_node_id id);
int baton__promote(struct baton_raft *r, baton_node_id id);
int baton__remove(struct baton_raft *r, baton_node_id id);
void baton__promotion_check(struct baton_raft *r);

/* ---- versions.c -------------------------------------------------------- */

/* A version entry was appended (leader, follower or restore). */
void baton__versions_appended(struct baton_raft *r,
			      const struct baton_entry *e);
/* Recompute the version state from the log and the snapshot (after a
 * truncation or a snapshot install). */
void baton__versions_refresh(struct baton_raft *r);
/* The entry that stalled the node is gone (truncated, or covered by an
 * installed snapshot): stall again at the first entry left that this node
 * cannot decode, if any. */
void baton__stall_recheck(struct baton_raft *r);
/* The version state in force at index (<= last index). */
void baton__versions_at(const struct baton_raft *r, baton_index index,
			struct baton_version_state *out,
			baton_index *index_out);
/* The node cannot interpret what is at index: stop applying there. */
void baton__stall(struct baton_raft *r, baton_index index);
/* A stalled leader hands leadership over, or steps down. */
void baton__stall_handover(struct baton_raft *r);
/* Leader only: append a version entry recording *s. */
int baton__append_versions(struct baton_raft *r,
			   const struct baton_version_state *s);

/* Like baton__stall, for a version entry or a snapshot at index that
 * raises the machine version to `machine`, above our own machine_max. */
void baton__stall_needs(struct baton_raft *r, baton_index index,
			struct baton_machine_version machine);
/* Whether this release implements the machine version (<= machine_max). */
bool baton__machine_ok(const struct baton_raft *r,
		       struct baton_machine_version machine);
/* Whether this node may live under the floor: its release is at least it
 * (always, under BATON_ELECTION_ANY). */
bool baton__floor_ok(const struct baton_raft *r, struct baton_release floor);
/* The latest version state changed: hold applying while its floor is above
 * our release, and resume once it is not (a downgrade lowered it). */
void baton__floor_check(struct baton_raft *r);
/* Leader only: append a version entry recording *s, without sending it
 * (the caller broadcasts). 0 or the error of baton__leader_append. */
int baton__versions_entry(struct baton_raft *r,
			  const struct baton_version_state *s);

/* ---- upgrade.c --------------------------------------------------------- */

/* What the leader knows of member id this term (itself: its own profile),
 * or NULL while it is unknown. */
/* Has member `id` answered an info request lately (one of the last two
 * rounds that asked every member, or any this term before there were
 * two)? The leader itself always has. */
bool baton__upgrade_heard_lately(const struct baton_raft *r, baton_node_id id);
const struct baton_profile *baton__upgrade_known(const struct baton_raft *r,
						 baton_node_id id);
/* The reason of a refusal (hold.c, downgrade.c), printf-style, cut at cap;
 * nothing when why is NULL or cap is 0 (the caller did not ask). */
void baton__say_why(char *why, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A new leader: forget the live table, ask every member. */
void baton__upgrade_start(struct baton_raft *r);
/* The version state the log should hold now: the table corrected with what
 * the live table knows, rows of non-members dropped, the effective machine
 * version raised as the strategy allows. */
void baton__upgrade_desired(const struct baton_raft *r,
			    struct baton_version_state *out);
/* The same, a burn-in hold lifted (a finalize): floor and machine version
 * raised as the rules allow, the hold kept only under MANUAL. */
void baton__upgrade_final(const struct baton_raft *r,
			  struct baton_version_state *out);
/* Halon's rule: the release floor the leader may record now, the log's or
 * the newest release that a majority of the voters (itself counted) told
 * it this term they run or newer, capped at its own release. */
struct baton_release baton__upgrade_floor_allowed(const struct baton_raft *r);
/* Leader tick: append the desired state if it differs from the log's (one
 * uncommitted version entry at a time). */
void baton__upgrade_tick(struct baton_raft *r);
/* A heartbeat round: info requests to members unknown or behind us, and
 * to every member once per election timeout. */
void baton__upgrade_info_tick(struct baton_raft *r);
/* The configuration changed: drop live rows of non-members. */
void baton__upgrade_config_changed(struct baton_raft *r);
void baton__recv_info(struct baton_raft *r, const struct baton_msg *m);
void baton__recv_info_result(struct baton_raft *r, const struct baton_msg *m);

/* ---- eligibility.c ----------------------------------------------------- */

/* Record a refusal under the version rules (baton_raft_last_refusal). */
void baton__refuse(struct baton_raft *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* enum baton_eligibility of this node now, with why (may be NULL). */
uint32_t baton__eligibility(const struct baton_raft *r, char *why, size_t cap);
/* Rule 1 for a voter: may it grant this (pre-)vote? Records a refusal. */
bool baton__vote_allowed(struct baton_raft *r, const struct baton_msg *m);
/* Rule 2 for a node whose election timer fired: true while it should let
 * this timeout pass (and it counts it). */
bool baton__candidacy_deferred(struct baton_raft *r);
/* Every heartbeat interval: a leader no longer of a majority release hands
 * over to a preferred voter, if one is reachable. */
void baton__eligibility_leader_check(struct baton_raft *r);

/* ---- downgrade.c ------------------------------------------------------- */

int baton__downgrade(struct baton_raft *r, uint32_t op,
		     struct baton_release target);
/* ---- hold.c ------------------------------------------------------------ */

/* BATON_UPGRADE_FINALIZE: baton_raft_downgrade_check's half, and the
 * version entry. */
int baton__finalize_check(const struct baton_raft *r,
			  struct baton_downgrade_plan *out, char *why,
			  size_t cap);
int baton__finalize(struct baton_raft *r);

/* For upgrade_desired: whether the downgrade in progress is over (every
 * member known this term runs the target). */
bool baton__downgrade_done(const struct baton_raft *r);

/* ---- read_index.c ------------------------------------------------------ */

int baton__read(struct baton_raft *r, uint64_t request_id);
void baton__recv_read_index(struct baton_raft *r, const struct baton_msg *m);
void baton__recv_read_index_result(struct baton_raft *r,
				   const struct baton_msg *m);
void baton__reads_check(struct baton_raft *r);
void baton__reads_fail_all(struct baton_raft *r, int status);
/* Fail the reads this node would have to serve itself (not followers'). */
void baton__reads_fail_local(struct baton_raft *r, int status);
void baton__reads_flush_round(struct baton_raft *r);

/* ---- transfer.c -------------------------------------------------------- */

int baton__transfer(struct baton_raft *r, baton_node_id target);
void baton__transfer_check(struct baton_raft *r, struct baton__progress *p);
void baton__transfer_tick(struct baton_raft *r);
void baton__recv_timeout_now(struct baton_raft *r, const struct baton_msg *m);

#endif /* BATON_CORE_H */
