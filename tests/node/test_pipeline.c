/*
 * The node pipeline (src/node) on one node, with a storage in memory that
 * completes writes when polled, a clock the test moves and a machine that
 * refuses what it is told to: proposals and their replies, the version
 * state in force, snapshots, and every kind of stall (a command the
 * machine refuses, an entry type nobody knows, a version entry above what
 * this release implements, a snapshot found at start that the machine
 * cannot restore or whose machine version is too new). A stall never
 * skips, never aborts, is announced once, and fails waiting requests with
 * BATON_ESTALLED.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mem_storage.h"
#include "pipeline.h"

/* ---- a machine ------------------------------------------------------------
 * Commands starting with 'x' are refused (BATON_EVERSION), anything else is
 * counted and answered with its index; snapshots are the count; restoring
 * bytes that start with "bad" is refused. */

struct test_machine {
	struct baton_machine base;
	uint64_t applied, sum;
	uint32_t last_version;
	uint32_t restores, version_changes;
	/* The last change of the machine version: where, from, to. */
	baton_index changed_at;
	uint32_t changed_from, changed_to;
};

static int tm_apply(struct baton_machine *bm, struct baton_machine_version v,
		    const struct baton_entry *e, struct baton_buf *reply)
{
	struct test_machine *m = (struct test_machine *)bm;
	cr_assert_eq(e->type, BATON_ENTRY_COMMAND);
	if (e->len > 0 && e->buf[0] == 'x')
		return BATON_EVERSION;
	m->applied++;
	m->sum += e->index;
	m->last_version = v.value;
	if (reply != NULL)
		return baton_buf_append(reply, &e->index, sizeof e->index);
	return 0;
}

static int tm_version_changed(struct baton_machine *bm, baton_index index,
			      struct baton_machine_version from,
			      struct baton_machine_version to)
{
	struct test_machine *m = (struct test_machine *)bm;
	m->version_changes++;
	m->changed_at = index;
	m->changed_from = from.value;
	m->changed_to = to.value;
	return 0;
}

static int tm_snapshot(struct baton_machine *bm, struct baton_machine_version v,
		       struct baton_buf *out)
{
	struct test_machine *m = (struct test_machine *)bm;
	cr_assert_geq(v.value, 1);
	cr_assert_leq(v.value, baton_release_current()->machine_max.value);
	return baton_buf_append(out, &m->applied, sizeof m->applied);
}

static int tm_restore(struct baton_machine *bm, struct baton_machine_version v,
		      const uint8_t *buf, size_t len)
{
	struct test_machine *m = (struct test_machine *)bm;
	(void)v;
	m->restores++;
	if (len >= 3 && memcmp(buf, "bad", 3) == 0)
		return BATON_EVERSION;
	if (len == sizeof m->applied)
		memcpy(&m->applied, buf, len);
	return 0;
}

static const char *tm_errmsg(const struct baton_machine *bm)
{
	(void)bm;
	return "a test refusal";
}

static const struct baton_machine_ops tm_ops = {
	.apply = tm_apply,
	.version_changed = tm_version_changed,
	.snapshot = tm_snapshot,
	.restore = tm_restore,
	.errmsg = tm_errmsg,
};

/* ---- the harness -----------------------------------------------------------
 */

static struct mem_storage st;
static struct test_machine tm;
static struct baton_pipeline *p;
static const struct baton_profile *runs; /* NULL: the newest release */
static uint64_t now;
static uint32_t stalls, sends;
static baton_index stalled_at;
static char stalled_why[BATON_STALL_TEXT_MAX];

static uint64_t env_now(void *data)
{
	(void)data;
	return now;
}

static void env_send(void *data, const struct baton_msg *m)
{
	(void)data, (void)m;
	sends++;
}

static void env_stalled(void *data, baton_index index, const char *why)
{
	(void)data;
	stalls++;
	stalled_at = index;
	snprintf(stalled_why, sizeof stalled_why, "%s", why);
}

static void setup(void)
{
	memset(&st, 0, sizeof st);
	st.min_gap = UINT64_MAX;
	st.base.ops = &mem_storage_ops;
	memset(&tm, 0, sizeof tm);
	tm.base.ops = &tm_ops;
	p = NULL;
	runs = NULL;
	now = 1000;
	stalls = sends = 0;
	stalled_at = 0;
	stalled_why[0] = '\0';
}

static void teardown(void)
{
	baton_pipeline_destroy(p);
	baton_durable_state_free(&st.init);
	baton_buf_free(&st.snap);
}

TestSuite(pipeline, .init = setup, .fini = teardown);

static uint64_t start_log_bytes;      /* the next start's snapshot_log_bytes */
static uint64_t start_trailing_bytes; /* and snapshot_trailing_bytes */

static void start(uint64_t snapshot_entries, bool bootstrap)
{
	struct baton_pipeline_config c;
	memset(&c, 0, sizeof c);
	baton_raft_options_default(&c.raft);
	c.raft.id = 1;
	c.raft.random_seed = 7;
	if (runs != NULL)
		c.raft.profile = *runs;
	c.storage = &st.base;
	c.machine = &tm.base;
	c.snapshot_entries = snapshot_entries;
	c.snapshot_log_bytes = start_log_bytes;
	c.raft.snapshot_trailing_bytes = start_trailing_bytes;
	if (bootstrap) {
		c.n_founders = 1;
		c.founders[0] = 1;
	}
	struct baton_pipeline_env env = {
		.now_ms = env_now, .send = env_send, .stalled = env_stalled};
	char err[256] = "";
	cr_assert_eq(baton_pipeline_create(&c, &env, &p, err, sizeof err), 0,
		     "%s", err);
}

/* Run the driver's loop for a while: time, storage, flush. */
static void run(uint32_t rounds)
{
	for (uint32_t i = 0; i < rounds; i++) {
		now += 10;
		baton_pipeline_tick(p);
		baton_pipeline_storage_ready(p);
		baton_pipeline_flush(p);
		while (baton_pipeline_has_work(p))
			baton_pipeline_work(p);
		baton_pipeline_storage_ready(p);
	}
}

static struct baton_pipeline_status status(void)
{
	struct baton_pipeline_status s;
	baton_pipeline_status(p, &s);
	return s;
}

static void run_until_leader(void)
{
	for (int i = 0; i < 1000 && status().raft.role != BATON_LEADER; i++)
		run(1);
	cr_assert_eq(status().raft.role, BATON_LEADER);
}

struct result {
	int calls, status;
	baton_index reply_index;
};

static void on_proposed(void *data, int st_, const uint8_t *reply, size_t len)
{
	struct result *r = data;
	r->calls++;
	r->status = st_;
	if (st_ == 0 && len == sizeof r->reply_index)
		memcpy(&r->reply_index, reply, len);
}

static void on_done(void *data, int st_)
{
	struct result *r = data;
	r->calls++;
	r->status = st_;
}

static void propose(const char *payload, struct result *r)
{
	cr_assert_eq(baton_pipeline_propose(p, (const uint8_t *)payload,
					    strlen(payload), on_proposed, r),
		     0);
}

/* A durable log to restart from: term 2, the configuration {1} at index 1,
 * then `e` at index 2 (its buffer copied). */
static void durable_log(uint32_t type, const uint8_t *buf, uint32_t len)
{
	struct baton_config conf = {.n = 1};
	conf.members[0] = (struct baton_member){1, BATON_VOTER};
	st.init.term = 2;
	st.init.entries = calloc(2, sizeof *st.init.entries);
	cr_assert_not_null(st.init.entries);
	uint8_t *cbuf = malloc(64);
	size_t clen;
	cr_assert_eq(baton_config_encode(&conf, cbuf, 64, &clen), 0);
	st.init.entries[0] = (struct baton_entry){1, 1, BATON_ENTRY_CONFIG,
						  (uint32_t)clen, cbuf};
	uint8_t *copy = malloc(len > 0 ? len : 1);
	memcpy(copy, buf, len);
	st.init.entries[1] = (struct baton_entry){2, 2, type, len, copy};
	st.init.n_entries = 2;
}

/* A durable snapshot at index 5 of the configuration {1} with `versions`,
 * holding `data`. */
static void durable_snapshot(const struct baton_version_state *versions,
			     const char *data)
{
	st.init.term = 2;
	st.init.has_snapshot = true;
	struct baton_snapshot_meta *m = &st.init.snapshot.meta;
	m->index = 5;
	m->term = 2;
	m->config.n = 1;
	m->config.members[0] = (struct baton_member){1, BATON_VOTER};
	m->config_index = 1;
	m->versions = *versions;
	st.init.snapshot_len = strlen(data);
	st.init.snapshot_data = malloc(st.init.snapshot_len);
	memcpy(st.init.snapshot_data, data, st.init.snapshot_len);
}

static void assert_stalled_at(baton_index index, const char *found)
{
	struct baton_pipeline_status s = status();
	cr_assert_eq(s.stalled_index, index);
	cr_assert_eq(s.raft.stalled_index, index, "the core was not told");
	cr_assert_eq(stalls, 1, "announced %u times", stalls);
	cr_assert_eq(stalled_at, index);
	cr_assert(strstr(s.stalled_why, found) != NULL, "'%s' lacks '%s'",
		  s.stalled_why, found);
	/* It says what this node runs and what to do. */
	if (strncmp(s.stalled_why, "needs-upgrade: ", 15) == 0) {
		char rel[BATON_RELEASE_STR_MAX];
		baton_release_format(baton_release_current()->release, rel);
		cr_assert(strstr(s.stalled_why, rel) != NULL, "%s",
			  s.stalled_why);
		cr_assert(strstr(s.stalled_why, "restart this node with a "
						"release") != NULL,
			  "%s", s.stalled_why);
		cr_assert_eq(s.raft.needs_machine.value > 0, true);
	} else {
		cr_assert(strstr(s.stalled_why, "upgrade this node") != NULL,
			  "%s", s.stalled_why);
		cr_assert(strstr(s.stalled_why, "this node runs release") !=
				  NULL,
			  "%s", s.stalled_why);
		cr_assert_eq(s.raft.needs_machine.value, 0);
	}
	cr_assert_str_eq(s.stalled_why, stalled_why);
	cr_assert(s.applied < index);
	/* New requests are refused at once. */
	struct result r = {0};
	cr_assert_eq(baton_pipeline_read(p, on_done, &r), BATON_ESTALLED);
	cr_assert_eq(baton_pipeline_propose(p, (const uint8_t *)"a", 1,
					    on_proposed, &r),
		     BATON_ESTALLED);
	cr_assert_eq(r.calls, 0);
	/* Time passes: nothing more is applied or announced. */
	baton_index applied = s.applied;
	run(300);
	cr_assert_eq(status().applied, applied);
	cr_assert_eq(status().stalled_index, index);
	cr_assert_eq(stalls, 1);
	cr_assert_neq(status().raft.role, BATON_LEADER);
}

/* ---- tests
 * ------------------------------------------------------------------- */

Test(pipeline, proposals_are_applied_with_replies)
{
	start(0, true);
	run_until_leader();
	struct result a = {0}, b = {0};
	propose("a", &a);
	propose("b", &b);
	run(5);
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.status, 0);
	cr_assert_eq(b.status, 0);
	cr_assert_eq(b.reply_index, a.reply_index + 1);
	cr_assert_eq(tm.applied, 2);
	/* A one-node cluster runs at once the newest machine version its
	 * release implements (its leader's first entry raised it). */
	cr_assert_eq(tm.last_version,
		     baton_release_current()->machine_max.value);
	cr_assert_eq(tm.version_changes, 1);
	struct result r = {0};
	cr_assert_eq(baton_pipeline_read(p, on_done, &r), 0);
	run(5);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.status, 0);
	cr_assert_eq(status().stalled_index, 0);
	cr_assert_eq(stalls, 0);
}

Test(pipeline, snapshot_every_n_entries_records_versions)
{
	start(5, true);
	run_until_leader();
	struct result r[12];
	memset(r, 0, sizeof r);
	for (int i = 0; i < 12; i++)
		propose("a", &r[i]);
	run(10);
	cr_assert(st.snapshots >= 1);
	cr_assert(baton_version_state_valid(&st.snap_h.meta.versions));
	cr_assert_eq(st.snap_h.meta.versions.machine.value,
		     baton_release_current()->machine_max.value);
	cr_assert(st.snap_h.meta.index >= 5);
	cr_assert_eq(status().raft.snapshot_index, st.snap_h.meta.index);
}

/* A snapshot is due snapshot_entries after the last one: never a second
 * one right after (the update of the first's SNAPSHOT_TAKEN once judged
 * the next due from the one before). */
Test(pipeline, snapshots_are_snapshot_entries_apart)
{
	start(5, true);
	run_until_leader();
	struct result r[40];
	memset(r, 0, sizeof r);
	for (int i = 0; i < 40; i++) {
		propose("a", &r[i]);
		run(1);
	}
	run(10);
	cr_assert_geq(st.snapshots, 3);
	cr_assert_geq(st.min_gap, 5, "two snapshots %" PRIu64 " entries apart",
		      st.min_gap);
}

/* snapshot_log_bytes: big entries make a snapshot due by their bytes
 * (the log is held in memory until one compacts it), long before
 * snapshot_entries; small ones do not. */
Test(pipeline, snapshots_are_due_by_the_bytes_applied)
{
	start_log_bytes = 1000;
	start(1000000, true);
	run_until_leader();
	static char big[301];
	memset(big, 'b', sizeof big - 1);
	struct result r[10];
	memset(r, 0, sizeof r);
	for (int i = 0; i < 3; i++) {
		propose("a", &r[i]); /* 3 bytes: not due */
		run(1);
	}
	run(5);
	cr_assert_eq(st.snapshots, 0);
	for (int i = 3; i < 10; i++) {
		propose(big, &r[i]); /* 7 x 300 bytes: due twice */
		run(1);
	}
	run(10);
	cr_assert_geq(st.snapshots, 1);
	cr_assert_leq(st.snapshots, 2);
	start_log_bytes = 0;
}

/* snapshot_trailing_bytes: of the entries kept behind a snapshot, no more
 * than that many payload bytes (the default keeps 1024 entries, whatever
 * their size). */
Test(pipeline, entries_kept_behind_a_snapshot_are_bounded_in_bytes)
{
	start_trailing_bytes = 700;
	start(8, true);
	run_until_leader();
	static char big[301];
	memset(big, 'b', sizeof big - 1);
	struct result r[12];
	memset(r, 0, sizeof r);
	for (int i = 0; i < 12; i++) {
		propose(big, &r[i]);
		run(1);
	}
	run(10);
	cr_assert_geq(st.snapshots, 1);
	struct baton_node_status_view {
		baton_index first, snap;
	} v = {status().raft.first_index, status().raft.snapshot_index};
	/* At most two 300-byte entries (700 bytes) behind the snapshot. */
	cr_assert_geq(v.first + 2, v.snap,
		      "first %" PRIu64 ", snapshot %" PRIu64, v.first, v.snap);
	start_trailing_bytes = 0;
}

/* Memory pressure (baton_pipeline_compact_soon): a snapshot at once when
 * enough was applied since the last, none otherwise. */
Test(pipeline, compact_soon_takes_a_snapshot_when_it_frees_enough)
{
	start(1000000, true);
	run_until_leader();
	struct result r[4];
	memset(r, 0, sizeof r);
	for (int i = 0; i < 4; i++) {
		propose("0123456789", &r[i]);
		run(1);
	}
	run(5);
	cr_assert_eq(st.snapshots, 0);
	cr_assert_not(baton_pipeline_compact_soon(p, 1000), "too little");
	cr_assert(baton_pipeline_compact_soon(p, 20));
	cr_assert_not(baton_pipeline_compact_soon(p, 20), "due already");
	run(10);
	cr_assert_eq(st.snapshots, 1);
	cr_assert_not(baton_pipeline_compact_soon(p, 1), "nothing since");
}

Test(pipeline, refused_command_stalls_and_fails_waiters)
{
	start(5, true);
	run_until_leader();
	struct result a = {0}, bad = {0}, after = {0}, rd = {0};
	propose("a", &a);
	run(3);
	cr_assert_eq(a.status, 0);
	baton_index bad_index = status().raft.last_index + 1;
	propose("x-future", &bad);
	propose("b", &after);
	cr_assert_eq(baton_pipeline_read(p, on_done, &rd), 0);
	uint32_t snapshots = st.snapshots;
	run(5);
	cr_assert_eq(bad.calls, 1);
	cr_assert_eq(bad.status, BATON_ESTALLED);
	cr_assert_eq(after.calls, 1);
	cr_assert_eq(after.status, BATON_ESTALLED);
	/* Its read index may lie before the stall: served or failed, but
	 * answered. */
	cr_assert_eq(rd.calls, 1);
	assert_stalled_at(bad_index, "a test refusal");
	cr_assert_eq(status().applied, bad_index - 1);
	cr_assert_eq(tm.applied, 1, "an entry after the stall was applied");
	/* Never a snapshot past the stall. */
	cr_assert(st.snapshots == snapshots ||
		  st.snap_h.meta.index < bad_index);
}

Test(pipeline, unknown_entry_type_stalls_after_restart)
{
	static const uint8_t body[] = {1, 2, 3};
	durable_log(42, body, sizeof body);
	start(0, false);
	for (int i = 0; i < 1000 && status().stalled_index == 0; i++)
		run(1);
	assert_stalled_at(2, "type 42");
	cr_assert_eq(tm.applied, 0);
}

Test(pipeline, version_entry_above_machine_max_stalls)
{
	struct baton_version_state v;
	baton_version_state_initial(&v);
	v.machine.value = baton_release_current()->machine_max.value + 1;
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len;
	cr_assert_eq(baton_version_state_encode(&v, buf, sizeof buf, &len), 0);
	durable_log(BATON_ENTRY_VERSION, buf, (uint32_t)len);
	start(0, false);
	for (int i = 0; i < 1000 && status().stalled_index == 0; i++)
		run(1);
	char want[128];
	snprintf(want, sizeof want,
		 "needs-upgrade: the effective machine version becomes %u at "
		 "index 2",
		 v.machine.value);
	assert_stalled_at(2, want);
	cr_assert_eq(status().raft.needs_machine.value, v.machine.value);
	cr_assert_eq(status().applied_versions.machine.value, 1);
	cr_assert_eq(tm.version_changes, 0);
}

Test(pipeline, set_versions_applies_the_version_in_force)
{
	start(0, true);
	run_until_leader();
	run(5);
	struct baton_version_state v = status().raft.versions;
	v.floor = baton_release_current()->release;
	uint32_t changes = tm.version_changes;
	struct result r = {0};
	cr_assert_eq(baton_pipeline_set_versions(p, &v, on_done, &r), 0);
	run(5);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.status, 0);
	struct baton_pipeline_status s = status();
	cr_assert_eq(baton_release_compare(s.applied_versions.floor, v.floor),
		     0);
	/* The machine version stayed. */
	cr_assert_eq(tm.version_changes, changes);
	cr_assert_eq(s.applied_versions.machine.value, v.machine.value);
}

Test(pipeline, snapshot_the_machine_refuses_at_start_stalls)
{
	struct baton_version_state v;
	baton_version_state_initial(&v);
	durable_snapshot(&v, "bad bytes");
	start(1, false);
	cr_assert_eq(tm.restores, 1);
	assert_stalled_at(5, "snapshot at index 5");
	cr_assert_eq(status().applied, 0);
	cr_assert_eq(st.snapshots, 0, "a snapshot was taken while stalled");
}

Test(pipeline, snapshot_of_a_newer_machine_version_at_start_stalls)
{
	struct baton_version_state v;
	baton_version_state_initial(&v);
	v.machine.value = baton_release_current()->machine_max.value + 1;
	durable_snapshot(&v, "fine");
	start(0, false);
	cr_assert_eq(tm.restores, 0, "restored a version it does not know");
	char want[128];
	snprintf(want, sizeof want,
		 "needs-upgrade: the effective machine version becomes %u at "
		 "index 5",
		 v.machine.value);
	assert_stalled_at(5, want);
}

Test(pipeline, good_snapshot_at_start_is_restored)
{
	struct baton_version_state v;
	baton_version_state_initial(&v);
	durable_snapshot(&v, "12345678");
	start(0, false);
	cr_assert_eq(tm.restores, 1);
	cr_assert_eq(status().applied, 5);
	cr_assert_eq(status().stalled_index, 0);
	run_until_leader();
	struct result a = {0};
	propose("a", &a);
	run(5);
	cr_assert_eq(a.status, 0);
	cr_assert(a.reply_index > 5);
}

Test(pipeline, destroy_fails_what_waits)
{
	/* A node going away (stopped, or its disk failed): a proposal not
	 * yet appended and a read may go to the next leader; neither is a
	 * plain refusal, which a client could not tell from "not done". */
	start(0, true);
	run_until_leader();
	struct result a = {0}, rd = {0};
	propose("a", &a);
	cr_assert_eq(baton_pipeline_read(p, on_done, &rd), 0);
	baton_pipeline_destroy(p);
	p = NULL;
	cr_assert_eq(a.calls, 1);
	cr_assert(a.status == BATON_ENOTLEADER ||
			  a.status == BATON_ELEADERCHANGED,
		  "status %d", a.status);
	cr_assert_eq(rd.calls, 1);
	cr_assert_eq(rd.status, BATON_ENOTLEADER);
}

Test(pipeline, destroy_tells_appended_from_not_appended)
{
	start(0, true);
	run_until_leader();
	struct result appended = {0}, queued = {0};
	propose("b", &appended);
	baton_pipeline_flush(p); /* in the log, not yet durable */
	propose("c", &queued);
	cr_assert_eq(appended.calls, 0);
	baton_pipeline_destroy(p);
	p = NULL;
	cr_assert_eq(appended.calls, 1);
	cr_assert_eq(appended.status, BATON_ELEADERCHANGED);
	cr_assert_eq(queued.calls, 1);
	cr_assert_eq(queued.status, BATON_ENOTLEADER);
}

/* ---- the version rules of the log ------------------------------------------
 */

Test(pipeline, a_floor_above_this_release_stalls_and_says_what_to_do)
{
	/* Data whose floor a newer release raised: this binary neither
	 * applies nor leads, and keeps the data. */
	struct baton_version_state v;
	baton_version_state_initial(&v);
	v.floor = (struct baton_release){9, 0, 0};
	uint8_t buf[BATON_VERSION_STATE_BYTES_MAX];
	size_t len;
	cr_assert_eq(baton_version_state_encode(&v, buf, sizeof buf, &len), 0);
	durable_log(BATON_ENTRY_VERSION, buf, (uint32_t)len);
	start(0, false);
	for (int i = 0; i < 1000 && status().stalled_index == 0; i++)
		run(1);
	struct baton_pipeline_status s = status();
	cr_assert_eq(s.stalled_index, 2);
	cr_assert_eq(s.raft.stalled_index, 2);
	cr_assert_eq(baton_release_compare(s.raft.needs_release, v.floor), 0);
	cr_assert_eq(s.raft.needs_machine.value, 0);
	cr_assert_eq(s.raft.eligibility, BATON_INELIGIBLE_FLOOR);
	cr_assert_eq(stalls, 1);
	cr_assert_eq(stalled_at, 2);
	cr_assert_str_eq(s.stalled_why, stalled_why);
	char rel[BATON_RELEASE_STR_MAX];
	baton_release_format(baton_release_current()->release, rel);
	cr_assert(strstr(s.stalled_why, "9.0.0") != NULL, "%s", s.stalled_why);
	cr_assert(strstr(s.stalled_why, rel) != NULL, "%s", s.stalled_why);
	cr_assert(strstr(s.stalled_why, "downgrade") != NULL, "%s",
		  s.stalled_why);
	struct result r = {0};
	cr_assert_eq(baton_pipeline_read(p, on_done, &r), BATON_ESTALLED);
	baton_index applied = s.applied;
	cr_assert_lt(applied, 2);
	run(300);
	cr_assert_eq(status().applied, applied);
	cr_assert_eq(status().stalled_index, 2);
	cr_assert_eq(stalls, 1, "announced once");
	cr_assert_neq(status().raft.role, BATON_LEADER);
	cr_assert_eq(tm.version_changes, 0);
}

Test(pipeline, a_downgrade_converts_the_machine_at_its_index)
{
	runs = baton_release_find((struct baton_release){1, 1, 0});
	cr_assert_not_null(runs);
	cr_assert_eq(runs->machine_max.value, 2);
	start(0, true);
	run_until_leader();
	run(5);
	/* Alone, it upgraded to machine version 2 in its first entry. */
	cr_assert_eq(tm.version_changes, 1);
	cr_assert_eq(tm.changed_to, 2);
	struct result d = {0};
	struct baton_release target = {1, 0, 0};
	cr_assert_eq(baton_pipeline_downgrade(p, BATON_DOWNGRADE_ENABLE, target,
					      on_done, &d),
		     0);
	run(5);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.status, 0);
	struct baton_pipeline_status s = status();
	cr_assert_eq(tm.version_changes, 2);
	cr_assert_eq(tm.changed_from, 2);
	cr_assert_eq(tm.changed_to, 1);
	cr_assert_eq(tm.changed_at, s.raft.versions_index);
	cr_assert_eq(s.applied_versions.machine.value, 1);
	cr_assert_eq(baton_release_compare(s.applied_versions.floor, target),
		     0);
	cr_assert_eq(baton_release_compare(s.applied_versions.downgrade.target,
					   target),
		     0);
	/* Commands after it are applied under version 1. */
	struct result a = {0};
	propose("a", &a);
	run(5);
	cr_assert_eq(a.status, 0);
	cr_assert_eq(tm.last_version, 1);
	/* Refused requests are refused at once, without the callback. */
	struct result again = {0};
	cr_assert_eq(baton_pipeline_downgrade(p, BATON_DOWNGRADE_ENABLE, target,
					      on_done, &again),
		     BATON_ESTATE);
	run(5);
	cr_assert_eq(again.calls, 0);
	/* Cancelled: back to version 2 at the cancel's index. */
	struct result c = {0};
	cr_assert_eq(baton_pipeline_downgrade(p, BATON_DOWNGRADE_CANCEL, target,
					      on_done, &c),
		     0);
	run(5);
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.status, 0);
	s = status();
	cr_assert_eq(tm.version_changes, 3);
	cr_assert_eq(tm.changed_from, 1);
	cr_assert_eq(tm.changed_to, 2);
	cr_assert_eq(tm.changed_at, s.raft.versions_index);
	cr_assert_eq(s.applied_versions.machine.value, 2);
	struct result b = {0};
	propose("b", &b);
	run(5);
	cr_assert_eq(tm.last_version, 2);
}

/* A deferred bootstrap: the node starts empty with its founders, founds
 * only when told, and only while still empty. */
Test(pipeline, deferred_bootstrap_founds_when_told)
{
	struct baton_pipeline_config c;
	memset(&c, 0, sizeof c);
	baton_raft_options_default(&c.raft);
	c.raft.id = 1;
	c.raft.random_seed = 7;
	c.storage = &st.base;
	c.machine = &tm.base;
	c.n_founders = 1;
	c.founders[0] = 1;
	c.bootstrap_deferred = true;
	struct baton_pipeline_env env = {
		.now_ms = env_now, .send = env_send, .stalled = env_stalled};
	char err[256] = "";
	cr_assert_eq(baton_pipeline_create(&c, &env, &p, err, sizeof err), 0,
		     "%s", err);
	run(300);
	cr_assert(baton_pipeline_empty(p), "nothing founded yet");
	cr_assert_eq(status().raft.config.n, 0);
	cr_assert_eq(baton_pipeline_bootstrap(p), 0);
	cr_assert_not(baton_pipeline_empty(p));
	run_until_leader();
	cr_assert_eq(status().raft.config.n, 1);
	cr_assert_eq(baton_pipeline_bootstrap(p), BATON_ESTATE,
		     "not empty any more");
}

/* A retired node's core is no longer ticked: a follower never stands. */
Test(pipeline, retired_node_never_stands)
{
	start(0, true);
	baton_pipeline_retire(p);
	run(500);
	cr_assert_eq(status().raft.role, BATON_FOLLOWER);
	cr_assert_eq(status().raft.term, 1, "no election began");
}

/* A read made before any leader is known waits (asked again at each
 * flush), and is served once this node leads; one made while no leader can
 * ever be elected fails when its deadline passes. */
Test(pipeline, read_waits_for_a_leader_then_expires_without_one)
{
	start(0, true);
	struct result r = {0};
	cr_assert_eq(baton_pipeline_read(p, on_done, &r), 0);
	run(1);
	cr_assert_eq(r.calls, 0, "failed with %d before a leader", r.status);
	run_until_leader();
	run(5);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.status, 0);

	baton_pipeline_destroy(p);
	p = NULL;
	start(0, false); /* no configuration: never a leader */
	struct result late = {0};
	cr_assert_eq(baton_pipeline_read(p, on_done, &late), 0);
	run(10);
	cr_assert_eq(late.calls, 0);
	for (int i = 0; i < 2000 && late.calls == 0; i++)
		run(1);
	cr_assert_eq(late.calls, 1);
	cr_assert_eq(late.status, BATON_ENOLEADER);
}
