/*
 * baton_raft_restore(): loading durable state after a restart.
 */
#include <baton/raft.h>

#include <criterion/criterion.h>
#include <string.h>

static struct baton_raft *make(baton_node_id id)
{
	struct baton_raft_options o;
	struct baton_raft *r = NULL;
	baton_raft_options_default(&o);
	o.id = id;
	o.random_seed = 7;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	return r;
}

static struct baton_config voters(uint32_t n)
{
	struct baton_config c;
	memset(&c, 0, sizeof c);
	for (uint32_t i = 0; i < n; i++)
		c.members[c.n++] = (struct baton_member){i + 1, BATON_VOTER};
	return c;
}

/* Encoded config entries live here so that entries can point at them. */
static uint8_t cfg_buf[4][2 + 9 * BATON_MAX_MEMBERS];

static struct baton_entry config_entry(int slot, baton_index index,
				       baton_term term,
				       const struct baton_config *c)
{
	size_t len = 0;
	cr_assert_eq(baton_config_encode(c, cfg_buf[slot], sizeof cfg_buf[slot],
					 &len),
		     0);
	return (struct baton_entry){term, index, BATON_ENTRY_CONFIG,
				    (uint32_t)len, cfg_buf[slot]};
}

static struct baton_entry command(baton_index index, baton_term term,
				  const char *s)
{
	return (struct baton_entry){term, index, BATON_ENTRY_COMMAND,
				    (uint32_t)strlen(s),
				    (uint8_t *)(uintptr_t)s};
}

static struct baton_snapshot_meta snap_meta(void)
{
	struct baton_snapshot_meta m;
	memset(&m, 0, sizeof m);
	m.index = 10;
	m.term = 3;
	m.config = voters(3);
	m.config_index = 5;
	baton_version_state_initial(&m.versions);
	return m;
}

Test(restore, snapshot_and_entries_give_the_status)
{
	struct baton_raft *r = make(2);
	struct baton_snapshot_meta meta = snap_meta();
	struct baton_config c4 = voters(3);
	c4.members[c4.n++] = (struct baton_member){4, BATON_LEARNER};
	struct baton_entry e[5] = {
		command(11, 3, "a"),	     command(12, 3, "b"),
		config_entry(0, 13, 4, &c4), command(14, 4, "c"),
		command(15, 4, "d"),
	};
	const uint8_t data[] = "state machine bytes";
	cr_assert_eq(
		baton_raft_restore(r, 5, 2, &meta, data, sizeof data, e, 5), 0);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.id, 2);
	cr_assert_eq(s.role, BATON_FOLLOWER);
	cr_assert_eq(s.term, 5);
	cr_assert_eq(s.vote, 2);
	cr_assert_eq(s.leader_id, 0);
	cr_assert_eq(s.commit_index, 10, "the snapshot is committed");
	cr_assert_eq(s.applied_index, 10);
	cr_assert_eq(s.persisted_index, 15);
	cr_assert_eq(s.first_index, 11);
	cr_assert_eq(s.last_index, 15);
	cr_assert_eq(s.last_term, 4);
	cr_assert_eq(s.snapshot_index, 10);
	cr_assert_eq(s.snapshot_term, 3);
	cr_assert_eq(s.config_index, 13, "the last config entry wins");
	cr_assert_eq(s.config.n, 4);
	const struct baton_member *m = baton_config_find(&s.config, 4);
	cr_assert_not_null(m);
	cr_assert_eq(m->role, BATON_LEARNER);

	/* The entries were copied, and the snapshot's term is known. */
	const struct baton_entry *x = baton_raft_entry(r, 14);
	cr_assert_not_null(x);
	cr_assert_eq(x->term, 4);
	cr_assert_arr_eq(x->buf, "c", 1);
	cr_assert_neq((const void *)x->buf, (const void *)e[3].buf);
	cr_assert_null(baton_raft_entry(r, 10));
	baton_term t = 0;
	cr_assert(baton_raft_term_at(r, 10, &t));
	cr_assert_eq(t, 3);
	cr_assert_not(baton_raft_term_at(r, 9, &t));
	cr_assert(baton_raft_term_at(r, 12, &t));
	cr_assert_eq(t, 3);

	/* Snapshot metadata can be derived again for an applied index. */
	struct baton_snapshot_meta again;
	cr_assert_eq(baton_raft_snapshot_meta(r, 10, &again), 0);
	cr_assert_eq(again.term, 3);
	cr_assert_eq(again.config_index, 5);
	cr_assert_eq(baton_raft_snapshot_meta(r, 11, &again), BATON_EINVAL,
		     "11 is not applied");

	/* A second restore is refused. */
	cr_assert_eq(
		baton_raft_restore(r, 5, 2, &meta, data, sizeof data, e, 5),
		BATON_ESTATE);
	baton_raft_destroy(r);
}

Test(restore, config_comes_from_the_snapshot_without_config_entries)
{
	struct baton_raft *r = make(1);
	struct baton_snapshot_meta meta = snap_meta();
	struct baton_entry e[2] = {command(11, 3, "a"), command(12, 4, "b")};
	cr_assert_eq(baton_raft_restore(r, 4, 0, &meta, NULL, 0, e, 2), 0);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.config_index, 5);
	cr_assert_eq(s.config.n, 3);
	cr_assert_eq(s.last_index, 12);
	cr_assert_eq(s.commit_index, 10);
	baton_raft_destroy(r);
}

Test(restore, entries_covered_by_the_snapshot_are_skipped)
{
	struct baton_raft *r = make(1);
	struct baton_snapshot_meta meta = snap_meta();
	struct baton_entry e[3] = {command(9, 3, "old"), command(10, 3, "old"),
				   command(11, 3, "new")};
	cr_assert_eq(baton_raft_restore(r, 3, 0, &meta, NULL, 0, e, 3), 0);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.first_index, 11);
	cr_assert_eq(s.last_index, 11);
	cr_assert_arr_eq(baton_raft_entry(r, 11)->buf, "new", 3);
	baton_raft_destroy(r);
}

Test(restore, term_is_at_least_the_last_entry_term)
{
	/* A hard state older than the log (a crash between the two writes):
	 * the term follows the log and the stale vote is dropped. */
	struct baton_raft *r = make(1);
	struct baton_config c = voters(3);
	struct baton_entry e[2] = {config_entry(1, 1, 1, &c),
				   command(2, 2, "x")};
	cr_assert_eq(baton_raft_restore(r, 1, 3, NULL, NULL, 0, e, 2), 0);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.term, 2);
	cr_assert_eq(s.vote, 0);
	cr_assert_eq(s.commit_index, 0, "nothing is known committed");
	cr_assert_eq(s.first_index, 1);
	cr_assert_eq(s.last_index, 2);
	cr_assert_eq(s.config_index, 1);
	baton_raft_destroy(r);
}

Test(restore, rejects_a_gap_or_a_decreasing_term)
{
	struct baton_config c = voters(3);
	struct baton_raft *r = make(1);
	struct baton_entry gap[2] = {config_entry(2, 1, 1, &c),
				     command(3, 1, "x")};
	cr_assert_eq(baton_raft_restore(r, 1, 0, NULL, NULL, 0, gap, 2),
		     BATON_ECORRUPT);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.last_index, 0, "a refused restore leaves nothing");
	baton_raft_destroy(r);

	r = make(1);
	struct baton_entry down[2] = {command(1, 2, "a"), command(2, 1, "b")};
	cr_assert_eq(baton_raft_restore(r, 2, 0, NULL, NULL, 0, down, 2),
		     BATON_ECORRUPT);
	baton_raft_destroy(r);
}

Test(restore, a_restored_single_voter_leads_and_commits)
{
	struct baton_raft *r = make(1);
	struct baton_snapshot_meta meta = snap_meta();
	meta.config = voters(1);
	struct baton_entry e[1] = {command(11, 3, "a")};
	cr_assert_eq(baton_raft_restore(r, 3, 1, &meta, NULL, 0, e, 1), 0);
	struct baton_event tick = {.type = BATON_EVENT_TICK};
	struct baton_update u;
	/* Past any election timeout: a single voter elects itself. */
	cr_assert_eq(baton_raft_step(r, 5000, &tick, &u), 0);
	cr_assert_eq(u.role, BATON_LEADER);
	cr_assert_eq(u.term, 4);
	cr_assert_eq(u.n_entries, 1, "the version entry at index 12");
	cr_assert_eq(u.entries[0].index, 12);
	cr_assert_eq(u.entries[0].type, BATON_ENTRY_VERSION);
	cr_assert(u.persist_needed);
	baton_index pi = u.persist_index;
	baton_term pt = u.persist_term;
	struct baton_event p = {.type = BATON_EVENT_PERSISTED};
	p.u.persisted.index = pi;
	p.u.persisted.term = pt;
	cr_assert_eq(baton_raft_step(r, 5000, &p, &u), 0);
	cr_assert_eq(u.commit_index, 12);
	cr_assert_eq(u.n_apply, 2, "11 (restored) and the version entry");
	cr_assert_eq(u.apply[0].index, 11);
	cr_assert_eq(u.apply[1].index, 12);
	baton_raft_destroy(r);
}
