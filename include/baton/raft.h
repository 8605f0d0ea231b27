/*
 * baton — the Raft core.
 *
 * The core is a pure state machine: it never touches sockets, clocks, files,
 * threads or a random source. Its driver (the real event loop in src/io, or
 * the deterministic simulator in tests/sim) hands it events through
 * baton_raft_step() together with the current time, and gets back one
 * struct baton_update describing everything the driver must now do:
 *
 *   1. persist, in this order: the hard state (term and vote), an installed
 *      snapshot (which replaces the log entries it covers), a truncation of
 *      the log suffix, new log entries, and a compaction of the log prefix;
 *   2. send `msgs` at once (a leader replicates in parallel with its own
 *      disk write);
 *   3. send `msgs_after_persist` only once everything asked to be persisted
 *      by this update *and every earlier update* is durable (votes and
 *      acknowledgements must never outrun the disk);
 *   4. if a snapshot was installed, restore the state machine from it; then
 *      apply `apply` in order (they are committed and durable locally). If
 *      the state machine cannot interpret the snapshot or an entry, stop
 *      there, apply nothing after it, keep the data, and report it with
 *      BATON_EVENT_APPLY_STOPPED (see "Stalling" below);
 *   5. serve the read requests of `reads` once the state machine has applied
 *      the index each one carries;
 *   6. when the persistence of step 1 completes, report it with a
 *      BATON_EVENT_PERSISTED event carrying `persist_index`/`persist_term`.
 *
 * Everything an update points to is owned by the core and stays valid only
 * until the next call on the same struct baton_raft: a driver that works
 * asynchronously copies what it keeps.
 *
 * Stalling. A node never skips what it cannot interpret: the nodes would
 * then disagree. A configuration or version entry of a format this release
 * does not know (or a malformed one), and any entry or snapshot the driver
 * reports with BATON_EVENT_APPLY_STOPPED, and a version entry or snapshot
 * raising the machine version above options.profile.machine_max
 * (needs-upgrade: status.needs_machine), stall the node at that index
 * (status.stalled_index, the lowest such index); a leader's snapshot of
 * such a machine version is never installed:
 *   - no entry at or after it is handed to `apply` (applied_index stays
 *     below it; one handed over already but reported is no longer counted
 *     as applied);
 *   - the node never stands for election (no pre-vote, no campaign, and it
 *     ignores TimeoutNow); as a leader it hands leadership to the most
 *     up-to-date voter, or steps down if there is none or that fails;
 *   - it keeps voting, replicating and acknowledging entries as a
 *     follower, and keeps its log and snapshot untouched; local reads fail
 *     with BATON_ESTALLED;
 *   - the stall lifts only when the entry that caused it is gone: truncated
 *     by a new leader, or covered by a snapshot installed from the leader
 *     (the driver judges that snapshot in its turn). A restart recomputes
 *     it from the log; the driver reports again what it still cannot read.
 * docs/core.md, "Stalling", says more.
 *
 * Errors are negative BATON_E* codes (see baton_strerror()); 0 is success.
 */
#ifndef BATON_RAFT_H
#define BATON_RAFT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Types, error codes (BATON_E*, baton_strerror) and versions have their own
 * headers; this one includes them. */
#include "baton/errors.h"
#include "baton/types.h"
#include "baton/version.h"

/* ------------------------------------------------------------------------ */
/* Log entries.                                                             */

/* The type travels with every entry, so new kinds need no format change.
 * Entries of a type the core does not know are replicated and handed to the
 * driver, which stops applying at the first one it cannot interpret and
 * says so (BATON_EVENT_APPLY_STOPPED). The core decodes CONFIG and VERSION
 * entries itself and stalls at one it cannot decode. */
enum baton_entry_type {
	/* Written by leaders of releases before the version rules; a leader
	 * now opens its term with a VERSION entry instead. Still replicated
	 * and applied (as nothing). */
	BATON_ENTRY_NOOP = 1,
	BATON_ENTRY_COMMAND = 2, /* an application command */
	BATON_ENTRY_CONFIG = 3,	 /* a membership configuration */
	/* The whole struct baton_version_state (effective machine version,
	 * release floor, version table) from this index on. */
	BATON_ENTRY_VERSION = 4,
};

struct baton_entry {
	baton_term term;
	baton_index index;
	uint32_t type;
	uint32_t len;
	uint8_t *buf; /* owned by whoever holds the entry; see each use */
};

/* ------------------------------------------------------------------------ */
/* Membership.                                                              */

enum baton_role_in_config {
	BATON_VOTER = 1,
	BATON_LEARNER = 2, /* receives the log, never votes or counts */
};

struct baton_member {
	baton_node_id id;
	uint32_t role; /* enum baton_role_in_config */
};

struct baton_config {
	uint32_t n;
	struct baton_member members[BATON_MAX_MEMBERS];
};

/* Encoded size of a configuration, in bytes. */
size_t baton_config_encoded_len(const struct baton_config *c);
/* Encode into buf (cap bytes); BATON_ETOOBIG if it does not fit. */
int baton_config_encode(const struct baton_config *c, uint8_t *buf, size_t cap,
			size_t *len_out);
/* Decode; BATON_ECORRUPT on malformed input, BATON_EVERSION on a format
 * from a future release. Never reads past len. */
int baton_config_decode(const uint8_t *buf, size_t len,
			struct baton_config *out);
/* The member with this id, or NULL. */
const struct baton_member *baton_config_find(const struct baton_config *c,
					     baton_node_id id);

/* ------------------------------------------------------------------------ */
/* Snapshots.                                                               */

struct baton_snapshot_meta {
	baton_index index; /* last index the snapshot covers */
	baton_term term;   /* term of that entry */
	struct baton_config config;
	baton_index config_index; /* index of the entry that made `config` */
	/* The version facts in force at `index`, and the index of the version
	 * entry that made them (0: the initial state, no entry yet). */
	struct baton_version_state versions;
	baton_index versions_index;
};

/* ------------------------------------------------------------------------ */
/* Messages. The core fills `to`; a receiver's driver fills `from`.        */

enum baton_msg_type {
	BATON_MSG_VOTE = 1,
	BATON_MSG_VOTE_RESULT = 2,
	BATON_MSG_APPEND = 3,
	BATON_MSG_APPEND_RESULT = 4,
	BATON_MSG_SNAPSHOT = 5,
	BATON_MSG_SNAPSHOT_RESULT = 6,
	BATON_MSG_TIMEOUT_NOW = 7,
	BATON_MSG_READ_INDEX = 8,
	BATON_MSG_READ_INDEX_RESULT = 9,
	/* The version rules (Ra's info request): a leader asks a member for
	 * its capability profile; the member answers with it, stalled or
	 * not. Sent on election, each heartbeat to members unknown this
	 * term or behind the leader, each election timeout to all
	 * (docs/core.md, "The version rules"). Nothing to persist. */
	BATON_MSG_INFO = 10,
	BATON_MSG_INFO_RESULT = 11,
};

struct baton_msg_vote {
	baton_index last_log_index;
	baton_term last_log_term;
	bool pre_vote;
	bool leadership_transfer; /* voters ignore their leader lease */
	/* Room for the version rules: the candidate's capabilities. */
	struct baton_profile candidate;
};

struct baton_msg_vote_result {
	bool pre_vote;
	bool granted;
};

/* Wall-clock samples carried by AppendEntries and their results, so that
 * nodes can measure how far their clocks are apart (src/node/clock.c,
 * docs/operations.md "Clocks"). The core neither fills nor reads them: the
 * node pipeline sets them on every Append and AppendResult it sends and
 * reads them from every one it receives. All 0: none (a peer of an older
 * protocol, or a driver without a wall clock). */
struct baton_clock_sample {
	/* The sender's wall clock when it sent this, unix ms. */
	uint64_t wall_ms;
	/* The last wall_ms the sender received from the receiver, and how
	 * long it held it (monotonic ms) before this send: the receiver
	 * gets its round trip from them. */
	uint64_t echo_wall_ms;
	uint64_t echo_hold_ms;
};

struct baton_msg_append {
	baton_index prev_index;
	baton_term prev_term;
	baton_index leader_commit;
	uint64_t heartbeat_seq; /* echoed back; confirms read-index rounds */
	uint32_t n_entries;
	const struct baton_entry *entries;
	/* Room for the version rules: the leader's capabilities. */
	struct baton_profile leader;
	struct baton_clock_sample clock; /* the driver's, see above */
};

struct baton_msg_append_result {
	bool success;
	/* success: the last index now known to match the leader's log.
	 * failure: the prev_index that was rejected. */
	baton_index index;
	/* failure only: the follower's last index with a term <= hint_term,
	 * so the leader can skip a whole conflicting term at once. */
	baton_index hint_index;
	baton_term hint_term;
	uint64_t heartbeat_seq;
	struct baton_clock_sample clock; /* the driver's, see above */
};

struct baton_msg_snapshot {
	struct baton_snapshot_meta meta;
	uint64_t total_len;
	uint64_t offset;
	uint32_t chunk_len;
	/* NULL (chunk_len > 0) when the driver gave its snapshot without
	 * the bytes: it fills the chunk from storage before sending. */
	const uint8_t *chunk;
	bool last_chunk;
};

struct baton_msg_snapshot_result {
	baton_index index; /* meta.index of the snapshot being acknowledged */
	uint64_t next_offset; /* the next byte the follower expects */
	bool done;	      /* installed and durable */
};

struct baton_msg_read_index {
	uint64_t request_id;
};

struct baton_msg_read_index_result {
	uint64_t request_id;
	baton_index read_index;
	int status; /* 0 or a BATON_E* code */
};

struct baton_msg_info {
	uint64_t seq; /* the leader's, echoed back */
};

struct baton_msg_info_result {
	uint64_t seq;
	struct baton_profile profile; /* what the member runs */
	/* The bound the member's embedder holds its memory to (its
	 * options' memory_max_bytes; 0: none, or a release that does not
	 * tell): an extra key on the wire (docs/peer-protocol.md). */
	uint64_t memory_max_bytes;
};

struct baton_msg {
	uint32_t type; /* enum baton_msg_type */
	baton_term term;
	baton_node_id from;
	baton_node_id to;
	union {
		struct baton_msg_vote vote;
		struct baton_msg_vote_result vote_result;
		struct baton_msg_append append;
		struct baton_msg_append_result append_result;
		struct baton_msg_snapshot snapshot;
		struct baton_msg_snapshot_result snapshot_result;
		struct baton_msg_read_index read_index;
		struct baton_msg_read_index_result read_index_result;
		struct baton_msg_info info;
		struct baton_msg_info_result info_result;
	} u;
};

/* ------------------------------------------------------------------------ */
/* Events in.                                                               */

enum baton_event_type {
	BATON_EVENT_TICK = 1,		/* time passed: check timers */
	BATON_EVENT_RECEIVE = 2,	/* a message arrived */
	BATON_EVENT_PERSISTED = 3,	/* an update's persistence completed */
	BATON_EVENT_PROPOSE = 4,	/* client commands (leader only) */
	BATON_EVENT_SNAPSHOT_TAKEN = 5, /* the application saved a snapshot */
	BATON_EVENT_READ = 6,		/* linearizable read request */
	BATON_EVENT_TRANSFER = 7,	/* hand leadership to another voter */
	BATON_EVENT_ADD_LEARNER = 8,
	BATON_EVENT_PROMOTE = 9, /* learner to voter, after it catches up */
	BATON_EVENT_REMOVE = 10, /* any member, the leader included */
	/* Leader only: append a version entry recording u.versions.state
	 * (the version rules of later releases use it; tests use it now). It
	 * takes effect when appended, like a configuration. BATON_ENOTLEADER,
	 * BATON_EINVAL for a state baton_version_state_valid() refuses or a
	 * machine version above the leader's own machine_max, BATON_EBUSY
	 * during a leadership transfer (as a proposal). The leader's own
	 * rules (see "The version rules" in docs/core.md) correct the table
	 * and raise the machine version on later ticks. */
	BATON_EVENT_VERSIONS = 11,
	/* The driver cannot interpret the entry (or the snapshot) at
	 * u.apply_stopped.index and stopped applying there: the node stalls
	 * at min(stalled_index, index) (see "Stalling" at the top).
	 * BATON_EINVAL for index 0. */
	BATON_EVENT_APPLY_STOPPED = 12,
	/* Leader only: enable or cancel an explicit downgrade to
	 * u.downgrade.target (DESIGN.md, "Downgrade"); the same checks as
	 * baton_raft_downgrade_check(), whose errors it returns, then a
	 * version entry recording it. The state machine's half of validate
	 * (can it convert down?) is the driver's, before it sends this. */
	BATON_EVENT_DOWNGRADE = 13,
	/* The driver's last connection to peer u.peer_closed.id closed (EOF,
	 * reset, read error: the kernel closes a killed process's sockets).
	 * A follower whose leader that is drops its leader contact (it no
	 * longer counts as in lease) and, as a voter, stands for election
	 * within a heartbeat interval instead of an election timeout: the
	 * fast failure detection of docs/core.md. Only with pre_vote and
	 * check_quorum both on (otherwise ignored): the pre-vote it starts
	 * is refused by the leader and by every follower still in lease, so
	 * a close while the leader lives disturbs nothing. BATON_EINVAL for
	 * id 0. A peer that vanishes without a close is still caught by the
	 * election timeout. */
	BATON_EVENT_PEER_CLOSED = 14,
	/* The driver's judgement of this node's wall clock (u.clock.barred):
	 * true when a majority of the voters' clocks differ from ours by
	 * more than the driver's bound. A barred node does not stand for
	 * election and ignores TimeoutNow; a barred leader hands leadership
	 * to the most up-to-date voter (stepping down if that fails). False
	 * lifts the bar. Never fails. */
	BATON_EVENT_CLOCK = 15,
};

enum baton_downgrade_op {
	BATON_DOWNGRADE_ENABLE = 1,
	BATON_DOWNGRADE_CANCEL = 2,
	/* Not a downgrade but the same kind of request (target ignored):
	 * end the burn-in hold's wait, raising the floor and the machine
	 * version to what the rules allow now (baton_raft_downgrade_check
	 * says what and what blocks it). The hold stays recorded under
	 * BATON_UPGRADE_MANUAL (for the next upgrade), else it ends. */
	BATON_UPGRADE_FINALIZE = 3,
};

struct baton_buffer {
	const void *base;
	size_t len;
};

struct baton_event {
	uint32_t type; /* enum baton_event_type */
	union {
		struct {
			const struct baton_msg *msg; /* copied as needed */
		} receive;
		struct {
			baton_index index; /* update.persist_index */
			baton_term term;   /* update.persist_term */
		} persisted;
		struct {
			uint32_t n; /* commands in this batch, >= 1 */
			const struct baton_buffer *bufs; /* copied */
			baton_index first_index_out;	 /* set on success */
		} propose;
		struct {
			/* Durable snapshot of the state machine after applying
			 * `index` (<= last applied). The core copies `data` to
			 * serve followers and compacts its log. With `data`
			 * NULL the core keeps only `len`, and its snapshot
			 * messages to followers carry chunk NULL: the driver
			 * reads each chunk (meta.index, offset, chunk_len)
			 * from its durable snapshot before sending. */
			baton_index index;
			const uint8_t *data;
			size_t len;
		} snapshot_taken;
		struct {
			uint64_t request_id; /* chosen by the driver */
		} read;
		struct {
			baton_node_id target; /* 0: the most up-to-date voter */
		} transfer;
		struct {
			baton_node_id id;
		} member;
		struct {
			const struct baton_version_state *state; /* copied */
		} versions;
		struct {
			baton_index index;
		} apply_stopped;
		struct {
			uint32_t op; /* enum baton_downgrade_op */
			struct baton_release target;
		} downgrade;
		struct {
			baton_node_id id;
		} peer_closed;
		struct {
			bool barred;
		} clock;
	} u;
};

/* ------------------------------------------------------------------------ */
/* The update out. See the top of this file for the driver's duties.       */

enum baton_role {
	BATON_FOLLOWER = 1,
	BATON_PRE_CANDIDATE = 2,
	BATON_CANDIDATE = 3,
	BATON_LEADER = 4,
};

struct baton_read_result {
	uint64_t request_id;
	baton_index read_index; /* serve once applied >= read_index */
	int status;		/* 0 or a BATON_E* code: fail the read */
};

struct baton_update {
	/* State after the step. */
	uint32_t role; /* enum baton_role */
	baton_term term;
	baton_node_id leader_id;
	baton_index commit_index;

	/* --- to persist, in this order --- */
	bool hard_state_changed; /* persist (term, vote) atomically */
	baton_term hs_term;
	baton_node_id hs_vote;
	/* A snapshot received from the leader: persist it, delete stored
	 * entries up to its index, restore the state machine from it. If a
	 * newer snapshot of the driver's own became durable meanwhile, keep
	 * that one (it covers this). */
	const struct baton_snapshot_meta *snapshot;
	const uint8_t *snapshot_data;
	size_t snapshot_len;
	/* Delete stored log entries with index >= truncate_from (0: none). */
	baton_index truncate_from;
	/* Append these (consecutive indexes). */
	uint32_t n_entries;
	const struct baton_entry *entries;
	/* Stored entries with index <= compact_upto may be deleted: a durable
	 * snapshot covers them (0: none). Needs no completion report. */
	baton_index compact_upto;
	/* True when any of the above must be made durable; then report
	 * BATON_EVENT_PERSISTED with these two values once it is. */
	bool persist_needed;
	baton_index persist_index;
	baton_term persist_term;

	/* --- to send --- */
	uint32_t n_msgs;
	const struct baton_msg *msgs;
	uint32_t n_msgs_after_persist;
	const struct baton_msg *msgs_after_persist;

	/* --- to apply (committed, in order) --- */
	uint32_t n_apply;
	const struct baton_entry *apply;

	/* --- read requests resolved in this step --- */
	uint32_t n_reads;
	const struct baton_read_result *reads;

	/* A promotion abandoned because the learner did not catch up. */
	baton_node_id promotion_failed;
};

/* ------------------------------------------------------------------------ */
/* The instance.                                                            */

/* When a leader raises the effective machine version (DESIGN.md, "Machine
 * upgrade"). */
enum baton_machine_upgrade {
	/* Once every member (voters and learners, the leader included)
	 * reports a higher machine_max; an unknown member blocks. */
	BATON_UPGRADE_ALL = 1,
	/* Once a quorum of voters (the leader among them) does; members
	 * behind stop applying (needs-upgrade). */
	BATON_UPGRADE_QUORUM = 2,
	/* The burn-in hold: the leader records a hold in the log (struct
	 * baton_version_state, held) and neither the machine version nor
	 * the release floor rises until an operator finalizes
	 * (BATON_UPGRADE_FINALIZE), which raises both as ALL would. */
	BATON_UPGRADE_MANUAL = 3,
};

/* Who may lead (DESIGN.md, "Leader eligibility"). */
enum baton_election_policy {
	/* Rule 1 (hard): a node whose release is below the release floor in
	 * its log never stands, voters refuse it, and it does not apply
	 * (future data). Rule 2 (preference): a node whose release is not a
	 * majority release among the voters of the version table waits
	 * BATON_MINORITY_WAIT_TIMEOUTS election timeouts before standing; a
	 * leader that stops meeting it hands leadership to a preferred voter.
	 * The floor rises to a release only once a majority of the voters
	 * (the leader counting) told this leader they run it or newer, and
	 * never above the leader's own release: a leader of a minority
	 * release serves but does not raise it (Halon's rule). */
	BATON_ELECTION_VERSION_AWARE = 1,
	/* Plain Raft: any voter stands and is voted for, whatever its
	 * release; the floor is still raised and recorded but not enforced. */
	BATON_ELECTION_ANY = 2,
};

/* Election timeouts a node not of a majority release lets pass, without a
 * leader, before it stands (rule 2). */
#define BATON_MINORITY_WAIT_TIMEOUTS 3u

struct baton_raft_options {
	baton_node_id id;
	/* What this node runs: advertised in votes, appends and info
	 * replies; the leader never raises the effective machine version
	 * above profile.machine_max. */
	struct baton_profile profile;
	/* enum baton_machine_upgrade (default ALL; anything else is
	 * BATON_EINVAL from baton_raft_create). */
	uint32_t machine_upgrade;
	/* enum baton_election_policy (default VERSION_AWARE; anything else
	 * is BATON_EINVAL from baton_raft_create). */
	uint32_t election_policy;
	uint64_t random_seed; /* all randomness comes from here */
	/* Each election timeout is drawn from [ms, 2*ms). */
	uint32_t election_timeout_ms;
	uint32_t heartbeat_interval_ms;
	/* Pipelining: AppendEntries in flight per follower. */
	uint32_t max_inflight_appends;
	/* Batching: limits of one AppendEntries. */
	uint32_t max_entries_per_append;
	uint32_t max_bytes_per_append;
	uint32_t snapshot_chunk_bytes;
	/* Entries kept behind a snapshot, for slow followers... */
	uint32_t snapshot_trailing_entries;
	/* ...and of those at most this many payload bytes (0: no bound), so
	 * that big entries do not keep the log's memory from a compaction. */
	uint64_t snapshot_trailing_bytes;
	/* Limits on what a peer may make this node hold. */
	uint64_t max_snapshot_bytes;
	uint32_t max_entry_bytes;
	/* Back-pressure: proposals are refused with BATON_EOVERLOADED while
	 * the leader holds this many entries beyond its commit index. */
	uint32_t max_uncommitted_entries;
	/* A learner must catch up within this many election timeouts. */
	uint32_t promotion_rounds;
	bool pre_vote;
	bool check_quorum;
	/* The bound the embedder holds this node's memory to, told to the
	 * leader in info replies (0: none). The core does nothing with it
	 * but report each member's (baton_upgrade_status): an embedder that
	 * refuses writes at a bound uses the smallest, so that no member is
	 * pushed past its own. */
	uint64_t memory_max_bytes;
};

void baton_raft_options_default(struct baton_raft_options *o);

struct baton_raft;

/* Allocate an instance with an empty state (term 0, empty log).
 * BATON_EINVAL on bad options, BATON_ENOMEM. Free with baton_raft_destroy. */
int baton_raft_create(const struct baton_raft_options *o,
		      struct baton_raft **out);
void baton_raft_destroy(struct baton_raft *r);

/* Load durable state after a restart, before the first step. `snap` may be
 * NULL; the driver has already restored its state machine from it. Entries
 * must be consecutive and follow the snapshot; all are copied. The version
 * state comes from the last version entry among them, else from
 * snap->versions, else it is the initial one; an entry it cannot decode
 * stalls the node. BATON_EINVAL if snap's version state is not valid or
 * its versions_index is above its index; BATON_ECORRUPT for entries that
 * do not follow on; BATON_ESTATE if the instance is not empty. */
int baton_raft_restore(struct baton_raft *r, baton_term term,
		       baton_node_id vote,
		       const struct baton_snapshot_meta *snap,
		       const uint8_t *snap_data, size_t snap_len,
		       const struct baton_entry *entries, uint32_t n);

/* Start a brand-new cluster: on an empty instance, make the configuration
 * entry (index 1, term 1). Every founding node is bootstrapped with the
 * same configuration, so their logs agree. The next update persists it. */
int baton_raft_bootstrap(struct baton_raft *r, const struct baton_config *c);

/* Feed one event at time now_ms (monotonic, never decreasing). Fills *out
 * (valid until the next call). Returns 0, or for requests:
 *   BATON_ENOTLEADER  propose/transfer/membership on a non-leader;
 *   BATON_EBUSY       a transfer or config change is already running;
 *   BATON_ENOTFOUND / BATON_EEXISTS / BATON_EINVAL  bad membership target;
 *   BATON_ETOOBIG     a command above max_entry_bytes;
 *   BATON_EOVERLOADED too many uncommitted entries (retry later);
 *   BATON_ESTALLED    a read on a stalled node (another node must serve it);
 *   BATON_ENOMEM.
 * A malformed or stale message is dropped silently (it is 0). Even on error
 * *out is valid and must be processed. */
int baton_raft_step(struct baton_raft *r, uint64_t now_ms,
		    struct baton_event *ev, struct baton_update *out);

/* The metadata a snapshot taken at `index` (<= last applied) must record:
 * its term, and the configuration and version state in force there with
 * the indexes of the entries that made them. A driver saves it with the
 * state machine's bytes before sending BATON_EVENT_SNAPSHOT_TAKEN.
 * BATON_EINVAL if the index is not applied, is below the node's current
 * snapshot (the log no longer tells what was in force there), or its term
 * is unknown. */
int baton_raft_snapshot_meta(const struct baton_raft *r, baton_index index,
			     struct baton_snapshot_meta *out);

/* Introspection, for status commands and simulator invariants. */
struct baton_raft_status {
	baton_node_id id;
	uint32_t role;
	baton_term term;
	baton_node_id vote;
	baton_node_id leader_id;
	baton_index commit_index;
	baton_index applied_index;
	baton_index persisted_index;
	baton_index first_index; /* first entry held in memory */
	baton_index last_index;
	baton_term last_term;
	baton_index snapshot_index;
	baton_term snapshot_term;
	struct baton_config config;
	baton_index config_index;
	baton_node_id transfer_target;
	/* The latest version facts in the log, committed or not. */
	struct baton_version_state versions;
	baton_index versions_index;
	/* First index this node cannot interpret (a configuration or version
	 * entry of an unknown format, or as told by APPLY_STOPPED); 0: none.
	 * Nothing at or after it is applied. */
	baton_index stalled_index;
	/* Non-zero when the stall is a version entry (or a snapshot) that
	 * makes the effective machine version this value, above this node's
	 * profile.machine_max: the node needs a newer release. */
	struct baton_machine_version needs_machine;
	/* Non-zero when the stall is a version entry (or a snapshot) whose
	 * release floor is this, above this node's own release (future
	 * data: DESIGN.md). Under BATON_ELECTION_ANY never set. */
	struct baton_release needs_release;
	/* enum baton_eligibility: whether this node may stand now. */
	uint32_t eligibility;
	/* BATON_EVENT_CLOCK barred this node: it does not stand. */
	bool clock_barred;
};
void baton_raft_status(const struct baton_raft *r,
		       struct baton_raft_status *out);

/* The stalled index of baton_raft_status, without copying the whole status
 * (the pipeline asks after every step). */
baton_index baton_raft_stalled_index(const struct baton_raft *r);

/* The effective machine version of the log's latest version state
 * (status.versions.machine), without copying the whole status: servers
 * gate every command on it. */
struct baton_machine_version
baton_raft_machine_version(const struct baton_raft *r);

/* The bytes of entry payloads the log holds in memory: every entry after
 * the last compaction, and compacted ones not freed yet. Cheap (a field):
 * a server compares it to its memory bound before every write. */
uint64_t baton_raft_log_bytes(const struct baton_raft *r);

/* The leader's view of how far member `id` matches its log (its own
 * persisted index for itself); 0 on a non-leader or for an unknown id. */
baton_index baton_raft_match_index(const struct baton_raft *r,
				   baton_node_id id);

/* The leader's live knowledge of member versions (from info replies, this
 * term), and what a machine upgrade waits for. On a non-leader `leader` is
 * false and nothing else is set. */
struct baton_upgrade_status {
	bool leader;
	uint32_t strategy; /* enum baton_machine_upgrade */
	/* The version the leader would raise to, were every member (or a
	 * quorum, by strategy) ready: its own machine_max. */
	struct baton_machine_version target;
	/* Members of the configuration, by increasing id: known is false
	 * until an info reply arrived this term. */
	uint32_t n;
	struct {
		baton_node_id id;
		bool known;
		struct baton_profile profile;
		/* Its memory_max_bytes (0: none, or not told); the
		 * leader's own row is its options'. */
		uint64_t memory_max_bytes;
	} members[BATON_MAX_MEMBERS];
	/* Members keeping the effective version below target: unknown, or
	 * machine_max below target (under QUORUM: empty once a quorum is
	 * ready). */
	uint32_t n_waiting;
	baton_node_id waiting[BATON_MAX_MEMBERS];
};
void baton_raft_upgrade_status(const struct baton_raft *r,
			       struct baton_upgrade_status *out);

/* Leader eligibility (DESIGN.md): what this node's release allows. */
enum baton_eligibility {
	BATON_ELIGIBLE = 0,
	/* Rule 1: the release is below the floor of the log (the node does
	 * not stand, voters refuse it, it does not apply). */
	BATON_INELIGIBLE_FLOOR = 1,
	/* Rule 2: not a majority release among the voters of the version
	 * table; the node stands only after BATON_MINORITY_WAIT_TIMEOUTS. */
	BATON_INELIGIBLE_MINORITY = 2,
	/* Not a voter (a learner, or removed): never stands. */
	BATON_INELIGIBLE_NOT_VOTER = 3,
};

/* Rule 2 alone, pure: whether `release` is a majority release among the
 * voters of c with a row in s, the row of `self` (0: none) replaced by
 * `release` (a node knows what it runs better than the table). A tie
 * counts every tied release; voters without a row do not count. */
bool baton_majority_release(const struct baton_version_state *s,
			    const struct baton_config *c, baton_node_id self,
			    struct baton_release release);

/* This node's eligibility now (enum baton_eligibility) and, when `why` is
 * not NULL, a line naming the rule and the versions behind it ("release
 * 1.0.0 is below the release floor 1.1.0 of the log", ...). Always
 * BATON_ELIGIBLE (or NOT_VOTER) under BATON_ELECTION_ANY. */
uint32_t baton_raft_eligibility(const struct baton_raft *r, char *why,
				size_t cap);

/* The last refusal this node made under the version rules (a vote or
 * pre-vote refused by rule 1, a candidacy deferred by rule 2, a leader
 * handing over or stepping down by them), for the driver to log: the text
 * (NUL-terminated, static until the next step) and a counter that grows by
 * one per refusal (seq_out may be NULL), so a driver logs each once. ""
 * and 0 before any. */
const char *baton_raft_last_refusal(const struct baton_raft *r,
				    uint64_t *seq_out);

/* What an explicit downgrade to `target` would do, checked by the leader
 * (DESIGN.md, "Downgrade"; op as in BATON_EVENT_DOWNGRADE):
 *   FINALIZE (target ignored): the floor and machine version a finalize
 *     of the burn-in hold would raise to; refused with BATON_ESTATE while
 *     a downgrade is in progress or when there is no hold (none in the
 *     log and the leader not under BATON_UPGRADE_MANUAL) or while a
 *     member runs a release below the newest one a member runs (the roll
 *     is not over: the floor would rise above it), BATON_EBUSY while a
 *     member has not answered this term; 0 with from == to when there is
 *     nothing to raise;
 *   ENABLE: no downgrade in progress; target is in this binary's table,
 *     the release one step back from the floor (baton_release_previous),
 *     and not older than the version rules (1.0.0); every member answered
 *     an info request lately (reachable) and runs a release >= target,
 *     with a peer protocol version in common with target's, and none runs
 *     the target already when the machine version must come down (its
 *     log would hold entries it cannot apply); no version entry
 *     uncommitted;
 *   CANCEL: a downgrade to target is in progress, every member answered
 *     lately, and none runs a release <= target yet (none has been
 *     downgraded);
 * 0 with *out filled (the floor and machine version before and after),
 * else BATON_ENOTLEADER, BATON_EINVAL (target not one step back, not in
 * the table, before the version rules, a member below it or sharing no
 * peer protocol with it), BATON_ESTATE (in progress / none to cancel / a
 * member downgraded already), BATON_EBUSY (a member unknown this term or
 * silent lately, a version entry or a transfer in flight), with why
 * (NUL-terminated,
 * `cap` bytes) naming the rule and versions. The state machine's conversion
 * check (machine_from -> machine_to) is the driver's. */
struct baton_downgrade_plan {
	struct baton_release target;
	struct baton_release floor_from, floor_to;
	struct baton_machine_version machine_from, machine_to;
};
int baton_raft_downgrade_check(const struct baton_raft *r, uint32_t op,
			       struct baton_release target,
			       struct baton_downgrade_plan *out, char *why,
			       size_t cap);

/* The entry at index, or NULL if not held (compacted or beyond the end). */
const struct baton_entry *baton_raft_entry(const struct baton_raft *r,
					   baton_index index);
/* Term of the entry at index; false if unknown (compacted or absent). */
bool baton_raft_term_at(const struct baton_raft *r, baton_index index,
			baton_term *term_out);

#ifdef __cplusplus
}
#endif

#endif /* BATON_RAFT_H */
