/*
 * Machine-time stamps of a node whose wall clock is wrong, just restarted
 * (src/node/clock.c, docs/kv.md "Machine time"). Node 1 of the voters
 * {1, 2, 3} runs through the pipeline that ships, with a storage in memory
 * and a clock an hour fast; the test plays peers 2 and 3 by hand: they
 * grant its votes, then answer its appends or not. A restart loses all the
 * pipeline knew of clocks (samples, a bar), so its stamps must follow its
 * wall clock only on evidence it gets after the restart: never on the
 * silence of peers that have not answered yet, nor on a machine time of 0
 * that only means the log is not applied yet. The first leader of a new
 * cluster, and peers of an older protocol that send no samples, keep the
 * wall clock as before.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mem_storage.h"
#include "pipeline.h"

#define EPOCH_MS 1767225600000ull
#define HOUR_MS 3600000ull
#define BOUND_MS 500u
/* Sent messages kept per round of the loop; the rest are dropped. */
#define SENT_MAX 64u

/* ---- a machine that counts what it applies --------------------------------
 */

struct count_machine {
	struct baton_machine base;
	uint64_t applied;
};

static int cm_apply(struct baton_machine *bm, struct baton_machine_version v,
		    const struct baton_entry *e, struct baton_buf *reply)
{
	(void)v, (void)e, (void)reply;
	((struct count_machine *)bm)->applied++;
	return 0;
}

static int cm_version_changed(struct baton_machine *bm, baton_index index,
			      struct baton_machine_version from,
			      struct baton_machine_version to)
{
	(void)bm, (void)index, (void)from, (void)to;
	return 0;
}

static int cm_snapshot(struct baton_machine *bm, struct baton_machine_version v,
		       struct baton_buf *out)
{
	(void)bm, (void)v, (void)out;
	return BATON_EIO;
}

static int cm_restore(struct baton_machine *bm, struct baton_machine_version v,
		      const uint8_t *buf, size_t len)
{
	(void)bm, (void)v, (void)buf, (void)len;
	return 0;
}

static const char *cm_errmsg(const struct baton_machine *bm)
{
	(void)bm;
	return "count";
}

static const struct baton_machine_ops cm_ops = {
	.apply = cm_apply,
	.version_changed = cm_version_changed,
	.snapshot = cm_snapshot,
	.restore = cm_restore,
	.errmsg = cm_errmsg,
};

/* ---- node 1 and its two peers played by the test ------------------------ */

enum peers_do { PEERS_SILENT, PEERS_OLD_PROTOCOL };

static struct mem_storage st;
static struct count_machine cm;
static struct baton_pipeline *p;
static uint64_t now;
static uint64_t skew_ms;
static struct baton_msg sent[SENT_MAX];
static uint32_t n_sent;

static uint64_t env_now(void *data)
{
	(void)data;
	return now;
}

static uint64_t env_wall(void *data)
{
	(void)data;
	return EPOCH_MS + now + skew_ms;
}

/* Kept without the entries: the peers answer from the header alone. */
static void env_send(void *data, const struct baton_msg *m)
{
	(void)data;
	if (n_sent < SENT_MAX) {
		sent[n_sent] = *m;
		if (m->type == BATON_MSG_APPEND)
			sent[n_sent].u.append.entries = NULL;
		n_sent++;
	}
}

static void setup(void)
{
	memset(&st, 0, sizeof st);
	st.refuse_snapshots = true; /* none is taken here */
	st.min_gap = UINT64_MAX;
	st.base.ops = &mem_storage_ops;
	memset(&cm, 0, sizeof cm);
	cm.base.ops = &cm_ops;
	p = NULL;
	now = 1000;
	skew_ms = 0;
	n_sent = 0;
}

static void teardown(void)
{
	baton_pipeline_destroy(p);
	baton_durable_state_free(&st.init);
}

TestSuite(clock_restart, .init = setup, .fini = teardown);

/* The durable log of a member of {1, 2, 3}: the configuration at index 1
 * and, with `command`, a client command of term 2 at index 2 (a log that
 * may hold stamps). */
static void durable_log(bool command)
{
	struct baton_config conf = {.n = 3};
	for (uint32_t i = 0; i < 3; i++)
		conf.members[i] = (struct baton_member){i + 1, BATON_VOTER};
	st.init.term = command ? 2 : 1;
	st.init.entries = calloc(2, sizeof *st.init.entries);
	cr_assert_not_null(st.init.entries);
	uint8_t *cbuf = malloc(128);
	cr_assert_not_null(cbuf);
	size_t clen;
	cr_assert_eq(baton_config_encode(&conf, cbuf, 128, &clen), 0);
	st.init.entries[0] = (struct baton_entry){1, 1, BATON_ENTRY_CONFIG,
						  (uint32_t)clen, cbuf};
	st.init.n_entries = 1;
	if (command) {
		uint8_t *c = malloc(1);
		cr_assert_not_null(c);
		c[0] = 's';
		st.init.entries[1] =
			(struct baton_entry){2, 2, BATON_ENTRY_COMMAND, 1, c};
		st.init.n_entries = 2;
	}
}

static void start(void)
{
	struct baton_pipeline_config c;
	memset(&c, 0, sizeof c);
	baton_raft_options_default(&c.raft);
	c.raft.id = 1;
	c.raft.random_seed = 7;
	/* The peers' answers may be lost for longer than an election
	 * timeout (a one-way partition; in the simulator the leader kept
	 * its term through that): with check_quorum it would step down
	 * at the moment this test looks at its stamps. */
	c.raft.check_quorum = false;
	c.storage = &st.base;
	c.machine = &cm.base;
	c.max_clock_offset_ms = BOUND_MS;
	struct baton_pipeline_env env = {
		.now_ms = env_now, .send = env_send, .wall_ms = env_wall};
	char err[256] = "";
	cr_assert_eq(baton_pipeline_create(&c, &env, &p, err, sizeof err), 0,
		     "%s", err);
}

/* Peers 2 and 3 grant every vote; they answer appends as `peers` says:
 * not at all, or as a release before clock samples (none in the result). */
static void answer(const struct baton_msg *m, enum peers_do peers)
{
	struct baton_msg r;
	memset(&r, 0, sizeof r);
	r.term = m->term;
	r.from = m->to;
	r.to = m->from;
	if (m->type == BATON_MSG_VOTE) {
		r.type = BATON_MSG_VOTE_RESULT;
		r.u.vote_result.pre_vote = m->u.vote.pre_vote;
		r.u.vote_result.granted = true;
	} else if (m->type == BATON_MSG_APPEND && peers == PEERS_OLD_PROTOCOL) {
		r.type = BATON_MSG_APPEND_RESULT;
		r.u.append_result.success = true;
		r.u.append_result.index =
			m->u.append.prev_index + m->u.append.n_entries;
		r.u.append_result.heartbeat_seq = m->u.append.heartbeat_seq;
	} else {
		return;
	}
	baton_pipeline_receive(p, &r);
}

static void run(uint32_t rounds, enum peers_do peers)
{
	for (uint32_t i = 0; i < rounds; i++) {
		now += 10;
		n_sent = 0;
		baton_pipeline_tick(p);
		baton_pipeline_storage_ready(p);
		baton_pipeline_flush(p);
		while (baton_pipeline_has_work(p))
			baton_pipeline_work(p);
		baton_pipeline_storage_ready(p);
		uint32_t n = n_sent;
		struct baton_msg out[SENT_MAX];
		memcpy(out, sent, n * sizeof *out);
		for (uint32_t k = 0; k < n; k++)
			answer(&out[k], peers);
	}
}

static struct baton_raft_status status(void)
{
	struct baton_pipeline_status s;
	baton_pipeline_status(p, &s);
	return s.raft;
}

static void run_until_leader(enum peers_do peers)
{
	for (int i = 0; i < 1000 && status().role != BATON_LEADER; i++)
		run(1, peers);
	cr_assert_eq(status().role, BATON_LEADER);
}

/* How far a stamp is ahead of the correct clocks. */
static int64_t ahead_ms(uint64_t stamp)
{
	return (int64_t)stamp - (int64_t)(EPOCH_MS + now);
}

/* Restarted an hour fast, it wins an election (votes carry no samples)
 * and hears no answer for more than an election timeout: no sample says
 * its peers measure nothing, so its clock is not trusted. */
Test(clock_restart, silent_peers_are_no_evidence_for_the_wall_clock)
{
	durable_log(true);
	skew_ms = HOUR_MS;
	start();
	run_until_leader(PEERS_SILENT);
	uint64_t machine = EPOCH_MS + now; /* the log's machine time */
	uint64_t elected = now;
	run(200, PEERS_SILENT); /* two election timeouts */
	cr_assert_eq(status().role, BATON_LEADER);
	cr_assert_gt(now - elected, 2 * 1000 - 100);
	uint64_t s = baton_pipeline_machine_stamp(p, machine);
	cr_assert_leq(ahead_ms(s), (int64_t)BOUND_MS,
		      "stamped %lld ms ahead from a wall clock nobody "
		      "measured",
		      (long long)ahead_ms(s));
	cr_assert_geq(s, machine, "machine time never goes back");
	struct baton_pipeline_clock k;
	baton_pipeline_clock(p, &k);
	cr_assert_not(k.trusted);
}

/* Restarted an hour fast, it leads before it applied its log, which holds
 * a command: the machine time it knows (0) is no proof that nothing was
 * ever stamped. */
Test(clock_restart, unapplied_log_is_not_a_log_never_stamped)
{
	durable_log(true);
	skew_ms = HOUR_MS;
	start();
	run_until_leader(PEERS_SILENT);
	cr_assert_lt(status().applied_index, 2, "the command is not applied");
	uint64_t s = baton_pipeline_machine_stamp(p, 0);
	cr_assert_leq(ahead_ms(s), (int64_t)BOUND_MS,
		      "stamped %lld ms ahead: machine time 0 taken for a log "
		      "never stamped",
		      (long long)ahead_ms(s));
}

/* Peers of an older protocol answer without samples: after an election
 * timeout as leader the wall clock is trusted, as before the check. */
Test(clock_restart, peers_of_an_older_protocol_keep_the_wall_clock)
{
	durable_log(true);
	start();
	run_until_leader(PEERS_OLD_PROTOCOL);
	uint64_t machine = EPOCH_MS + now - 5000; /* the log's, behind */
	run(150, PEERS_OLD_PROTOCOL);
	cr_assert_eq(status().role, BATON_LEADER);
	struct baton_pipeline_clock k;
	baton_pipeline_clock(p, &k);
	cr_assert(k.trusted, "peers that say they measure nothing");
	cr_assert_eq(baton_pipeline_machine_stamp(p, machine), EPOCH_MS + now);
}

/* A new cluster's first leader, before any sample: its log holds no
 * command, so it starts machine time from its wall clock. */
Test(clock_restart, a_new_clusters_first_leader_stamps_its_wall_clock)
{
	durable_log(false);
	start();
	run_until_leader(PEERS_SILENT);
	cr_assert_eq(baton_pipeline_machine_stamp(p, 0), EPOCH_MS + now);
}
