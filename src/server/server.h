/*
 * batond: one node serving the Redis protocol (see docs/batond.md).
 *
 *   main.c       flags, config file, signals, the loop
 *   config.c     parsing the configuration (config.h)
 *   client.c     client connections: RESP in, replies out in request order
 *   commands.c   the command table: connection and key-value commands
 *   admin.c      INFO and the admin commands of batonctl
 *   downgrade.c  BATON.DOWNGRADE: an explicit downgrade
 *   versions.c   the version facts as operators read them (pure)
 *   join.c       active join: the joiner's client and the leader's side
 *   machine.c    the replicated state machine: key-value map + address book
 *                (machine.h; free of the server, unit-tested alone)
 *   addresses.c  the server's side of the node: the address book in use
 *                (founders, the transport), leadership, the stall
 *   route.c      a client's write on its way to the leader: parked while
 *                no leader is known, sent on when one did not append it
 *   forward.c    writes to the log: stamped and proposed on the leader,
 *                forwarded there from followers
 *   held.c       writes a new leader holds until it applied its log
 *                (route.c, forward.c and held.c: write_path.h)
 *   txn.c        MULTI, EXEC, DISCARD, WATCH, UNWATCH
 *   expiry.c     the leader's expiry sweeper
 */
#ifndef BATON_SERVER_H
#define BATON_SERVER_H

#include <uv.h>

#include "baton/raft.h"
#include "baton/buf.h"
#include "config.h"
#include "histogram.h"
#include "write_path.h"
#include "id_index.h"
#include "kv.h"
#include "machine.h"
#include "migration.h"
#include "node.h"
#include "resp.h"
#include "value_limit.h"

/*
 * Planted bugs, compiled only into the test binaries batond-bug-* (see
 * CMakeLists.txt): the fault harness must catch each of them
 * (docs/jepsen.md, "Teeth"). Never set in a release build.
 *  - STALE_READS: every read is served from local state, without the read
 *    index (as if every connection had sent BATON.STALE ON);
 *  - EARLY_ACK: the leader answers a SET with OK as soon as it is
 *    proposed, before it is committed.
 */
#ifndef BATON_PLANTED_BUG_STALE_READS
#define BATON_PLANTED_BUG_STALE_READS 0
#endif
#ifndef BATON_PLANTED_BUG_EARLY_ACK
#define BATON_PLANTED_BUG_EARLY_ACK 0
#endif

/*
 * Not a bug but a test fixture, compiled only into batond-lose-unsynced:
 * the storage keeps its unsynced file writes in process memory
 * (src/storage/vfs_unsynced.c), so kill -9 loses what a power loss would
 * (the page cache would otherwise keep them). Never set in a release build.
 */
#ifndef BATON_TEST_LOSE_UNSYNCED
#define BATON_TEST_LOSE_UNSYNCED 0
#endif

/*
 * Test hooks, compiled only into batond-test-hooks: admin commands that
 * put into the log what no release of batond writes (BATON.TEST.PROPOSE
 * proposes raw payload bytes), so tests can give nodes data from a
 * "future release". Never set in a release build.
 */
#ifndef BATON_TEST_HOOKS
#define BATON_TEST_HOOKS 0
#endif

_Static_assert(SERVER_ADDR_MAX == BATON_ADDR_MAX,
	       "the book's addresses are the transport's");

/* Limits (docs/batond.md). */
/* Addresses proxy.c remembers as unreachable (proxy_unreachable). */
#define PROXY_UNREACHABLE_KEPT 8u
#define SERVER_REMOVED_WHY_MAX 512u
#define SERVER_FORWARD_TIMEOUT_MS 10000u
/* Shutting down, the longest wait for the answers owed to clients. */
#define SERVER_DRAIN_MAX_MS 1000u
/* Writes waiting for a leader to be known (route.c): at most this many
 * (as many as a leader's pipeline holds, which a hand-over may send on at
 * once), holding at most this many bytes, each at most two election
 * timeouts. */
#define SERVER_PARKED_MAX 100000u
#define SERVER_PARKED_BYTES_MAX ((size_t)64 << 20)
/* Times one write is sent to a leader, or parked, before it fails. */
#define SERVER_ROUTES_MAX 16u
/* One read from a client's socket takes at most this much. */
#define SERVER_CLIENT_READ_BYTES 65536u

struct client;
struct routed_write;
/* A list of routed writes (route.c's parked ones). */
struct route_list {
	struct routed_write *head, *tail;
	uint32_t n;
	size_t bytes;
};
struct keys_job;

struct server {
	uv_loop_t *loop;
	struct server_config cfg;
	struct baton_node *node;
	/* The replicated state: s->machine.kv and s->machine.book. */
	struct server_machine machine;
	uv_tcp_t listener;
	uv_signal_t sigterm, sigint;
	uv_timer_t housekeeping;
	uv_timer_t drain; /* shutting down: until clients are answered */
	uint64_t drain_until_ms;
	uint64_t started_ms;
	bool shutting_down;
	int exit_code;

	struct client *clients; /* a list */
	uint32_t n_clients;
	/* The open connections as CLIENT LIST shows them, newest first, and
	 * the next CLIENT ID (client_registry.c). */
	struct client_state *registry;
	uint64_t next_client_id;
	/* Replies queued and not yet written, over all open clients. */
	uint64_t output_bytes;
	/* client.c: the clients with replies finished in this loop turn,
	 * each sent in one write before the loop waits again; spare reply
	 * slots; the one buffer every client reads into (the parser copies
	 * out of it at once). */
	struct {
		uv_prepare_t turn_end;
		struct client *due;
		struct slot *spare;
		uint32_t n_spare;
		bool closed;
		bool read_buf_lent;
		uint8_t read_buf[SERVER_CLIENT_READ_BYTES];
	} client_io;

	struct join *join;	     /* join.c */
	struct migration *migration; /* migration.c; NULL without --relay */
	struct founding *founding;   /* founding.c */
	struct backup *backup;	     /* backup.c: a save or a restore */

	/* Whose this node is (identity.c). */
	struct {
		uv_timer_t soon; /* work after an identity entry applied */
		bool removed;	 /* removed from the cluster: serves no more */
		char removed_why[SERVER_REMOVED_WHY_MAX];
		bool proposing_uuid;	 /* the leader's 'U' entry in flight */
		bool uuid_recorded;	 /* in the data directory, or refused */
		baton_node_id removing;	 /* BATON.REMOVE under way (admin.c) */
		baton_node_id finishing; /* a removal the leader finishes */
		uint32_t forgotten;	 /* removed ids the transport forgot */
		struct baton_node_status status; /* scratch */
	} identity;

	/* Writes forwarded and not answered (forward.c): a list in the
	 * order they were sent, and an index by request id. */
	struct {
		struct routed_write *head, *tail;
		struct baton_id_index index;
		/* With --password: the proof every forward carries, made
		 * once (a digest per forward showed in the profile). */
		bool has_auth_proof;
		uint8_t auth_proof[BATON_PEER_CLIENT_AUTH_LEN];
		/* A write's log entry being encoded, kept between writes. */
		struct baton_buf payload;
	} forwards;
	uint64_t next_forward_id;
	/* The value limit's bounds over this leader's writes in flight
	 * (forward.c, kv's value_limit.h). */
	struct kv_limit value_limit;
	/* Writes a new leader holds until it applied the log it inherited
	 * (held.c): in arrival order; the last index of its log at the first
	 * write after its election, and whether it has applied that far. */
	struct {
		struct held_write *head, *tail;
		uint32_t n;
		uint64_t bytes;
		uv_timer_t timer;
		baton_index start_index;
		bool start_known, ready;
	} held;
	/* Writes waiting for a leader (route.c), in arrival order; and two
	 * lists route.c moves them to while it walks them. */
	struct route_list parked, parked_todo, parked_expired;
	bool routing_closed; /* failing everything: send nothing more */
	baton_node_id leader;

	/* KEYS over big maps, in slices between the loop's other work
	 * (keys.c): the jobs in arrival order, the first one running. */
	struct {
		uv_idle_t idle;
		bool started;
		struct keys_job *head, *tail;
	} keys;

	/* The leader's expiry sweeper (expiry.c). */
	struct {
		uv_timer_t timer;
		bool started;
		uint32_t in_flight; /* sweep entries proposed, not applied */
		bool backlog;	    /* the last sweep deleted a full batch */
		uint64_t entries;   /* sweep entries applied (INFO) */
		uint64_t deleted;   /* keys they deleted (INFO) */
	} sweeper;

	struct {
		uint64_t connections;
		uint64_t commands;
		uint64_t rejected_clients;
		uint64_t protocol_errors;
		uint64_t output_disconnects; /* slow readers cut off */
		uint64_t idle_disconnects;
		uint64_t writes_parked;	  /* waited for a leader */
		uint64_t writes_rerouted; /* not appended, sent on */
		uint64_t leader_changes;  /* to another known leader */
		/* Replies that were errors, every command (INFO
		 * total_error_replies, as Redis 7). */
		uint64_t error_replies;
		/* Key-value commands only (not INFO, PING or the admin
		 * commands a tool polls with): their error replies and the
		 * time from arrival to reply, always kept (INFO
		 * kv_error_replies, kv_latency_usec; batonctl roll --soak
		 * compares them before and after a restart). */
		uint64_t kv_error_replies;
		struct baton_histogram kv_latency;
	} stats;
	/* --metrics: the HTTP endpoint (http.c) and the figures only it
	 * shows (metrics.c); NULL without --metrics. */
	struct http *http;
	struct metrics *metrics;
	/* proxy.c's counters (proxy_stats). */
	struct {
		uint64_t commands, errors, upstreams_open;
		/* Addresses a connection could not be made to lately, and
		 * when (a ring): the migration picks others first. */
		char unreachable[PROXY_UNREACHABLE_KEPT][SERVER_ADDR_MAX];
		uint64_t unreachable_ms[PROXY_UNREACHABLE_KEPT];
		uint32_t unreachable_next;
	} proxy;
	/* --maxmemory (memory.c): above 80 % of it (warned once), the
	 * highest usage seen, and writes refused with -OOM. */
	struct {
		bool warned;
		uint64_t peak;
		uint64_t refused;
		/* The bound in force and whose it is (memory_bound). */
		uint64_t bound;
		baton_node_id bound_from;
	} memory;
};

/* ---- addresses.c ---- */
/* The node's callbacks (the machine, peer frames, leadership, the stall)
 * and the machine's (addresses into the transport). */
void server_node_app(struct server *s, struct baton_node_app *app);
/* Tell the transport every address the book holds (after the node
 * started: a snapshot restored at start fills the book before). */
void server_addresses_to_transport(struct server *s);
/* The book's entry, or a founder's from --bootstrap; NULL if unknown. The
 * pointer is valid until the next call. */
const struct book_entry *server_address(struct server *s, baton_node_id id);
/* On becoming leader: put founders' addresses into the replicated book. */
void server_publish_founders(struct server *s);
/* If this node stopped applying, append the error naming the index and
 * why to b and return true: the retryable -TRYAGAIN when it stopped for
 * want of a newer release (a command that cannot be passed on), else
 * -STALLED. */
bool server_reply_if_stalled(struct server *s, struct baton_buf *b);
/* This node stopped applying because it needs a newer release (the log's
 * machine version or release floor is above its own): its clients'
 * commands, reads included, are routed to the leader (route_write; parked
 * while no leader is known, as any follower's write) instead of failing. */
bool server_stall_routes(struct server *s);
/* This node stopped applying, for any reason. */
bool server_stalled_here(struct server *s);
/* The RESP error for a BATON_E* code, the stall's text for ESTALLED. */
void server_reply_error(struct server *s, struct baton_buf *b, int code);

/* ---- client.c ---- */
/* A reply slot: each command gets one, filled now or later; replies leave
 * in request order. */
struct slot;
int clients_listen(struct server *s);
void clients_close_all(struct server *s);
/* Shutting down: stop accepting clients and reading commands; each client
 * gets the replies to the commands it sent before, then a FIN. */
void clients_drain(struct server *s);
/* No client waits for a reply. */
bool clients_drained(const struct server *s);
/* Every housekeeping tick: close clients idle for longer than
 * --client-idle-timeout-s, and hung-up ones that linger. */
void clients_housekeeping(struct server *s);
/* The reply buffer of a slot, to fill; then slot_done(). */
struct baton_buf *slot_buf(struct slot *sl);
void slot_done(struct slot *sl);
/* Fill a slot with the RESP error for a BATON_E* code. */
void slot_error(struct slot *sl, int code);
/* Has the slot's client gone (nobody will read its reply)? */
bool slot_abandoned(const struct slot *sl);
void reply_error_for(struct baton_buf *b, int code);
/* CLIENT KILL: reply to what is in flight, then close the connection. */
void client_kill(struct client_state *cs);
/* Bytes of cs's replies queued and not yet written (CLIENT LIST omem). */
size_t client_output_queued(const struct client_state *cs);

/* ---- client_registry.c ---- */
/* A new connection (its fd and addresses are read from tcp). */
void client_registry_add(struct server *s, struct client_state *cs,
			 uv_tcp_t *tcp);
/* The connection is closing: CLIENT LIST no longer shows it. */
void client_registry_remove(struct server *s, struct client_state *cs);
/* CLIENT ID|INFO|LIST|KILL|SETNAME|GETNAME|SETINFO (docs/clients.md). */
int client_command(struct command_ctx *x);
/* HELLO [2|3] [AUTH user pass] [SETNAME name]. */
int client_hello(struct command_ctx *x);

/* ---- info.c ---- */
/* INFO [section ...] (docs/clients.md, "INFO"). */
int info_command(struct command_ctx *x);
/* The "# Versions" and "# Persistence" sections' fields, appended to b
 * (admin.c keeps the version facts BATON.NODE shares). */
void admin_info_versions(struct server *s, const struct baton_node_status *st,
			 struct baton_buf *b);
void admin_info_persistence(struct server *s,
			    const struct baton_node_status *st,
			    struct baton_buf *b);
const char *admin_role_name(uint32_t role);

/* ---- http.c: --metrics HOST:PORT (docs/metrics.md) ---- */
/* Listen (nothing without --metrics); also sets up metrics.c. */
int http_start(struct server *s);
/* Close the listener and every connection. */
void http_stop(struct server *s);
/* The endpoint's figures (metrics); all 0 without --metrics. */
struct http_stats {
	uint64_t open;		  /* connections open now */
	uint64_t evicted;	  /* closed half-sent for a newcomer */
	uint64_t deadline_closed; /* no whole request in time */
	uint64_t refused;	  /* every open one had sent its request */
};
void http_stats(struct server *s, struct http_stats *out);

/* ---- metrics.c ---- */
int metrics_init(struct server *s);
void metrics_free(struct server *s);
/* The counter a client command is counted in (-1 without --metrics). */
int metrics_command_slot(struct server *s, const uint8_t *name, size_t len);
/* A command counted in slot took ns from arrival to its reply. */
void metrics_command_done(struct server *s, int slot, uint64_t ns);
/* Every housekeeping tick: sample elections and members' contact. */
void metrics_tick(struct server *s);
/* The Prometheus text (format 0.0.4), appended to b. */
void metrics_render(struct server *s, struct baton_buf *b);
/* True when healthy; else one line per reason appended to b (the words of
 * batonctl health). With members (/health), a leader also speaks for the
 * members it replicates to: one down, or lagging by more than max_lag
 * entries, is a reason; without (/ready) only this node's own state counts. */
bool metrics_health(struct server *s, uint64_t max_lag, bool members,
		    struct baton_buf *b);

/* ---- memory.c: --maxmemory (docs/operations.md, "Memory") ---- */
/* At start: the default bound when none was given, said in the log. */
void memory_start(struct server *s);
/* The node's snapshot_log_bytes under the bound: a snapshot compacts the
 * log once this many bytes were applied (a quarter of it), so the
 * log's share of used memory stays bounded and deletes make room; 0
 * without a bound. */
uint64_t memory_snapshot_log_bytes(const struct server *s);
/* The node's snapshot_trailing_bytes under the bound: an eighth of it, so
 * the entries kept behind a snapshot for slow followers take at most that
 * (0 without a bound: --snapshot-trailing alone). */
uint64_t memory_snapshot_trailing_bytes(const struct server *s);
/* Used memory: the key-value machine's bytes and the log's in memory. */
uint64_t memory_used(struct server *s);
/* Every housekeeping tick: the bound in force, and the 80 % warning (once
 * per crossing). */
void memory_tick(struct server *s);
/* The bound in force (0: none) and in *from (may be NULL) the member
 * whose --maxmemory it is: on the leader the smallest of the members' it
 * knows this term, its own included; elsewhere its own. */
uint64_t memory_bound(const struct server *s, baton_node_id *from);
/* On the leader, before a write is proposed: true after appending the
 * -OOM error to err when used memory is above --maxmemory and w may grow
 * it (a command flagged KV_GROWS, or a transaction holding one). */
struct write_req;
bool memory_refuses(struct server *s, const struct write_req *w,
		    struct baton_buf *err);

/* ---- command_table.c ---- */
/* COMMAND [COUNT | INFO name... | DOCS [name...] | LIST] from the kv
 * table and the local commands (docs/clients.md). */
int command_table_command(struct command_ctx *x);
/* The i-th local command (commands.c), for COMMAND: its name, arity and
 * Redis flags ("admin noscript", space-separated); false past the end. */
bool command_local_at(size_t i, const char **name, int *arity,
		      const char **flags);

/* ---- commands.c ---- */
/* How a command's reply goes to a connection in RESP3 (resp3.c). */
enum command_resp3 {
	RESP3_AS_RESP2 = 0, /* the connection speaks RESP2 */
	RESP3_NULLS,	    /* RESP2's nulls become RESP3's */
	RESP3_TOP_MAP,	    /* and the top array a map (HGETALL) */
};
enum command_resp3 command_resp3(const struct client_state *cs,
				 const uint8_t *name, size_t len);
struct txn;
/* One connection's writes not yet answered, in the order it sent them:
 * route.c keeps their effects in that order (zeroed with the client). */
struct route_chain {
	struct routed_write *head, *tail;
	uint32_t in_flight; /* sent to `dest`, not answered */
	baton_node_id dest;
	uint32_t parked;
	uint64_t next_seq;
	/* Inside route.c's work on the chain: answers wait in `answered`
	 * until it ends (an answer may end the connection's life). */
	uint32_t depth;
	struct routed_write *answered;
};
struct client_state {
	bool authenticated;
	bool stale_reads;
	bool quit;
	char name[128];
	/* MULTI's queue and the WATCHed keys (txn.c); NULL if neither. */
	struct txn *txn;
	/* Bumped whenever the watched keys are dropped (EXEC, DISCARD,
	 * UNWATCH), so a WATCH still waiting for its read index cannot
	 * touch a later set of watches. */
	uint64_t watch_epoch;
	struct route_chain writes; /* route.c */
	/* proxy.c: the connection's commands answered by another cluster's
	 * node (NULL until the first), and whether the connection is itself
	 * a proxy's (BATON.PROXIED: never proxied again). */
	struct proxy_client *proxy;
	bool proxied;
	/* Set while client.c runs the commands of one read: proxied ones
	 * are queued, then written together by proxy_client_flush(). */
	bool proxy_batching;
	/* What CLIENT LIST and HELLO show (client_registry.c): the id, unique
	 * and increasing on this node; the protocol (2, or 3 after HELLO 3);
	 * what CLIENT SETINFO stored; the last command and when. */
	uint64_t id;
	uint32_t resp;
	char lib_name[64], lib_ver[64];
	char last_command[32];
	uint64_t created_ms, last_command_ms;
	int fd;
	char addr[64], laddr[64];
	struct client_state *reg_prev, *reg_next; /* the registry's list */
};
/* One command being run: its client, reply slot and arguments. */
struct command_ctx {
	struct server *s;
	struct client_state *cs;
	struct slot *sl;
	int argc;
	const uint8_t *const *argv;
	const size_t *lens;
};
/* Helpers of the command files (commands.c, admin.c, txn.c). */
struct baton_buf *command_out(const struct command_ctx *x); /* the reply */
int command_done(const struct command_ctx *x);		    /* send it */
int command_fail(const struct command_ctx *x, int code);    /* a BATON_E* */
/* -ERR wrong number of arguments for the command; done. */
int command_wrong_args(const struct command_ctx *x);
/* Appends Redis 7.0's -ERR for an unknown command (its first arguments
 * quoted). */
void command_reply_unknown(struct baton_buf *b, int argc,
			   const uint8_t *const *argv, const size_t *lens);
/* Appends a text reply as Redis 7 sends INFO's: a bulk string, or in
 * RESP3 a verbatim string of format "txt". */
void command_reply_text(const struct command_ctx *x, const void *text,
			size_t len);
/* Argument i, case-insensitively equal to word. */
bool command_arg_is(const struct command_ctx *x, int i, const char *word);
/* AUTH's and HELLO AUTH's check: the user at argument user_at (-1: none
 * given, the default user) with the password at pw_at. */
bool command_credentials_ok(const struct command_ctx *x, int user_at,
			    int pw_at);
/* Argument i as a NUL-terminated string, cut to cap - 1 bytes. */
void command_arg_str(const struct command_ctx *x, int i, char *buf, size_t cap);
/* How a command orders against the others of its connection: a read
 * waits for the connection's writes in flight, a write for its reads in
 * flight (client.c), so each sees the effects of those sent before it and
 * none of those sent after. */
enum command_order {
	ORDER_ANY = 0, /* answered at once, or touches no data */
	ORDER_READ,
	ORDER_WRITE,
	/* A read whose view of the data may begin after later reads were
	 * served (KEYS on a big map, keys.c): the connection's next
	 * command that touches data waits until it is answered. */
	ORDER_READ_ALONE,
};
enum command_order command_order(const struct client_state *cs, int argc,
				 const uint8_t *const *argv,
				 const size_t *lens);
/* Run one client command; fills sl now or later. */
void command_dispatch(struct server *s, struct client_state *cs,
		      struct slot *sl, int argc, const uint8_t *const *argv,
		      const size_t *lens);

/* ---- admin.c ---- */
/* INFO and the admin commands (docs/batond.md); each fills x->sl now or
 * later and returns 0. */
int admin_node(struct command_ctx *x);
int admin_members(struct command_ctx *x);
int admin_add(struct command_ctx *x);
int admin_promote(struct command_ctx *x);
int admin_remove(struct command_ctx *x);
int admin_transfer(struct command_ctx *x);
#if BATON_TEST_HOOKS
int admin_test_propose(struct command_ctx *x);
#endif
/* Admin writes go to the leader: true here; elsewhere the reply says where
 * it is (-NOTLEADER leader is <id> at <client_addr>, or -TRYAGAIN), the
 * slot is done and false. */
bool admin_require_leader(struct command_ctx *x);
/* One field of a map reply: the name and the printf-formatted value, both
 * bulk strings. */
void admin_map_field(struct baton_buf *b, const char *k, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A member's versions: the leader's live table (info replies of this
 * term) when it knows them ("live"), else the log's version table ("log");
 * "unknown" (out untouched) when neither has it. */
const char *server_member_versions(const struct baton_node_status *st,
				   const struct baton_upgrade_status *us,
				   baton_node_id id, struct baton_profile *out);

/* ---- downgrade.c ---- */
/* BATON.DOWNGRADE VALIDATE|ENABLE <release> [FORCE] | CANCEL <release> |
 * STATUS (docs/batond.md, "Downgrade"). */
int admin_downgrade(struct command_ctx *x);
/* The four map fields of a plan (4 of the reply's 2 * n elements):
 * floor_from, floor_to, machine_from, machine_to (BATON.DOWNGRADE
 * VALIDATE, BATON.UPGRADE STATUS). */
void admin_map_plan(struct baton_buf *b,
		    const struct baton_downgrade_plan *plan);
/* ---- upgrade_hold.c ---- */
/* BATON.UPGRADE STATUS|FINALIZE: the burn-in hold (docs/batond.md). */
int admin_upgrade(struct command_ctx *x);

/* ---- versions.c: the version facts as operators read them (pure) ---- */
/* "1.1.0", or "none" for 0.0.0; returns buf. */
const char *versions_floor_text(struct baton_release floor,
				char buf[BATON_RELEASE_STR_MAX]);
/* "none", or "1.0.0 (from floor 1.1.0, machine 2)". */
void versions_downgrade_text(const struct baton_downgrade *d, char *buf,
			     size_t cap);
/* "yes", or "no (<why>)" with baton_node_eligibility's text ("rule 1:
 * release 1.0.0 is below the release floor 1.1.0 of the log"). */
void versions_eligible_text(uint32_t eligibility, const char *why, char *buf,
			    size_t cap);
/* "version-aware" or "any". */
const char *versions_policy_name(uint32_t policy);
/* The members of c whose row in s runs a release other than target, as
 * "node 2: 1.1.0; node 3: unknown" ("" when none). */
void versions_pending_text(const struct baton_version_state *s,
			   const struct baton_config *c,
			   struct baton_release target, char *buf, size_t cap);
/* A machine's loss kind by kind, "hashes_deleted:1 ttls_dropped:3", or
 * "none" (cut to cap, always terminated). */
void versions_loss_kinds(const struct baton_machine_loss *l, char *buf,
			 size_t cap);

enum downgrade_sub {
	DOWNGRADE_VALIDATE = 1,
	DOWNGRADE_ENABLE = 2,
	DOWNGRADE_CANCEL = 3,
	DOWNGRADE_STATUS = 4,
};
struct downgrade_args {
	enum downgrade_sub sub;
	struct baton_release target; /* 0.0.0 for STATUS */
	bool force;
};
/* BATON.DOWNGRADE's arguments (argv[0] is the command's name): 0, or -1
 * with the error reply's text (no leading '-') in err. */
int versions_downgrade_parse(int argc, const uint8_t *const *argv,
			     const size_t *lens, struct downgrade_args *out,
			     char *err, size_t cap);

/* ---- identity.c: whose this node is (docs/batond.md, "Identity") ---- */
/* The node's identity callbacks (is_removed, removed) into app. */
void identity_node_app(struct server *s, struct baton_node_app *app);
/* After baton_node_start: follow the cluster's UUID and removed ids. */
void identity_start(struct server *s);
/* Now and then (and soon after an identity entry applied): record the
 * UUID in the data directory, draw it as the leader of a cluster without
 * one, finish interrupted removals as leader, retire once removed. */
void identity_tick(struct server *s);
/* The leader may write 'U' and 'R' entries: the log's release floor and
 * this node's release are at least the release that introduced them. */
bool identity_entries_allowed(struct server *s);
/* Whether id was removed from the cluster (the transport's question). */
bool identity_is_removed(struct server *s, baton_node_id id);
/* A member refused our connection saying this node was removed. */
void identity_told_removed(struct server *s, baton_node_id by,
			   const char *reason);
/* If this node was removed, append the error saying so to b; true. */
bool server_reply_if_removed(struct server *s, struct baton_buf *b);
/* The cluster's UUID as applied, or "-"; returns buf. */
const char *identity_uuid_text(struct server *s, char *buf, size_t cap);

/* ---- founding.c: --bootstrap on an empty data directory ---- */
/* After baton_node_start: when the node waits to found (it was empty),
 * ask the other founders whether the cluster exists already; found it
 * when none holds its data (or none answers in time), else stop the node
 * with an error saying how to replace a member. */
int founding_start(struct server *s);
void founding_stop(struct server *s);

/* ---- backup.c (docs/backup.md) ---- */
/* BATON.BACKUP BEGIN | NEXT id | END id: a consistent copy of the map,
 * streamed in chunks from the leader. */
int backup_command(struct command_ctx *x);
/* --restore FILE, before the node starts: read and check the file (0), or
 * say why it is refused (-1; nothing written). */
int backup_restore_load(struct server *s);
/* After the node started: refuse a data directory with state (-1), else
 * load the map through the log once this node leads (0). */
int backup_restore_start(struct server *s);
void backup_stop(struct server *s);

/* ---- main.c ---- */
/* Stop the node (leadership handed over first) and exit with code. */
void server_stop(struct server *s, int exit_code);

/* ---- join.c ---- */
/* Joining by itself (--join-seeds) and the leader's side of joins; after
 * baton_node_start. join_stop before baton_node_close. */
int join_start(struct server *s);
void join_stop(struct server *s);
/* JOIN and JOIN_REPLY frames from peers. */
void join_on_frame(struct server *s, baton_node_id from,
		   const struct baton_peer_frame *f);

/* ---- proxy.c: a client's commands answered by another cluster's node ---- */
struct proxy_client;
/* Bounds of one upstream connection (docs/batond.md, "Answering from
 * another cluster"): commands waiting or in flight, one reply's bytes
 * (a 512 MiB bulk and its framing), the wait for a reply. */
#define PROXY_INFLIGHT_MAX 10000u
#define PROXY_REPLY_MAX (((size_t)512 << 20) + 1024u)
#define PROXY_TIMEOUT_MS 10000u
/* Send the command to the node at addr ("ip:port", its client port) over
 * the connection's own upstream (opened lazily; AUTH with this node's
 * --password if set, then BATON.PROXIED), and answer sl with the reply's
 * exact bytes. The commands of one connection keep their order; one for
 * another address waits until the replies in flight are back. Every
 * failure answers sl with an error (docs/batond.md). */
void proxy_command(struct server *s, struct client_state *cs, struct slot *sl,
		   const char *addr, int argc, const uint8_t *const *argv,
		   const size_t *lens);
/* The client connection is closing: its upstream closes, the commands
 * waiting or in flight are dropped (their slots done). */
void proxy_client_closed(struct client_state *cs);
/* The commands of one read have run: write those proxy_command() queued
 * meanwhile (cs->proxy_batching) in one write. */
void proxy_client_flush(struct client_state *cs);
struct proxy_stats {
	uint64_t commands, errors, upstreams_open;
};
void proxy_stats(const struct server *s, struct proxy_stats *out);
/* Could no connection be made to addr within the last within_ms? */
bool proxy_unreachable(const struct server *s, const char *addr,
		       uint64_t within_ms);
/* This connection said BATON.PROXIED: it must not be proxied again. */
bool proxy_is_proxied(const struct client_state *cs);
/* BATON.PROXIED: marks the connection, +OK. */
int proxy_cmd_proxied(struct command_ctx *x);
#if BATON_TEST_HOOKS
/* BATON.TEST.PROXY <addr> <command> [args...]: proxy_command. */
int proxy_cmd_test_proxy(struct command_ctx *x);
#endif

/* ---- txn.c ---- */
/* MULTI, EXEC, DISCARD, WATCH, UNWATCH (docs/batond.md); each fills x->sl
 * now or later and returns 0. */
int txn_multi(struct command_ctx *x);
int txn_exec(struct command_ctx *x);
int txn_discard(struct command_ctx *x);
int txn_watch(struct command_ctx *x);
int txn_unwatch(struct command_ctx *x);
/* Between MULTI and EXEC/DISCARD? */
bool txn_in_multi(const struct client_state *cs);
/* The commands queued since MULTI (0 outside one): CLIENT LIST's multi=. */
uint32_t txn_queued(const struct client_state *cs);
/* The name of the i-th queued command; false past the last. */
bool txn_queued_name(const struct client_state *cs, uint32_t i,
		     const uint8_t **name, size_t *len);
/* Inside MULTI: queue the command (+QUEUED) or refuse it (an error that
 * makes EXEC fail with EXECABORT). `allowed`: the client may run it (it
 * authenticated, or the command needs no AUTH); `local`: one of the
 * server's own commands (not key-value). */
void txn_queue(struct command_ctx *x, bool allowed, bool local);
/* The connection closed: free its queue and watches. */
void txn_free(struct client_state *cs);

/* ---- expiry.c ---- */
/* The machine-time stamp of a payload this leader proposes now: never
 * below the machine time applied, moving with the monotonic clock, and
 * following the wall clock only while the clock check trusts it
 * (baton_pipeline_machine_stamp; docs/kv.md, "Machine time"). */
uint64_t server_machine_stamp(struct server *s);
/* The leader's sweeper: a timer proposing sweep entries for keys due by
 * the leader's wall clock, in bounded batches (after baton_node_start;
 * expiry_stop before baton_node_close). */
void expiry_start(struct server *s);
void expiry_stop(struct server *s);

/* ---- keys.c ---- */
/* KEYS on a map of at least this many keys is answered in slices. */
#define KEYS_SLICED_MIN_KEYS 16384u
/* Answer KEYS pattern (after its read barrier, or a stale read) into
 * sl: at once on a small map, else as a job of slices that begins the
 * map's KEYS view as soon as it is free (a snapshot may hold it) and
 * fills sl when done. The pattern is copied. */
void keys_answer(struct server *s, struct slot *sl, const uint8_t *pattern,
		 size_t len);
/* Is argv[0] KEYS? */
bool keys_is(const uint8_t *name, size_t len);
/* keys_start once the loop runs; keys_stop at shutdown (before the
 * handles close): the jobs left get an error. */
void keys_start(struct server *s);
void keys_stop(struct server *s);

#endif /* BATON_SERVER_H */
