/*
 * The version state as a fact of the log (src/core/versions.c): version
 * entries through replication, truncation, snapshots taken and installed,
 * and restarts.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* Machine version `machine`, and rows for nodes 1..n as they truly run
 * (machine3 below): a leader finds nothing in such a table to correct. */
static struct baton_version_state table_of(uint32_t n, uint32_t machine)
{
	struct baton_version_state s;
	baton_version_state_initial(&s);
	s.machine.value = machine;
	s.floor = baton_release_current()->release;
	for (uint32_t i = 1; i <= n; i++) {
		s.members[s.n].id = i;
		s.members[s.n].profile = *baton_release_current();
		s.members[s.n].profile.machine_max.value = 3;
		s.n++;
	}
	return s;
}

static void assert_state_eq(const struct baton_version_state *a,
			    const struct baton_version_state *b)
{
	cr_assert_eq(a->machine.value, b->machine.value);
	cr_assert_eq(baton_release_compare(a->floor, b->floor), 0);
	cr_assert_eq(a->n, b->n);
	for (uint32_t i = 0; i < a->n; i++) {
		cr_assert_eq(a->members[i].id, b->members[i].id);
		cr_assert_eq(a->members[i].profile.machine_max.value,
			     b->members[i].profile.machine_max.value);
		cr_assert_eq(
			baton_release_compare(a->members[i].profile.release,
					      b->members[i].profile.release),
			0);
	}
}

/* The version state node id reports now. */
static void assert_node_state(struct harness *h, baton_node_id id,
			      const struct baton_version_state *want)
{
	struct baton_raft_status s = h_status(h, id);
	assert_state_eq(&s.versions, want);
}

/* The state a first leader l of a fresh cluster writes in its first entry
 * (at index 2): machine version 1, its own row alone (info replies are
 * dropped in these tests, so it knows nobody else), and no floor yet: one
 * voter of three is no majority (Halon's rule). */
static void assert_first(const struct baton_raft_status *s, baton_node_id l)
{
	struct baton_release none = {0, 0, 0};
	cr_assert_eq(s->versions.machine.value, 1);
	cr_assert_eq(baton_release_compare(s->versions.floor, none), 0);
	cr_assert_eq(s->versions.n, 1);
	cr_assert_eq(s->versions.members[0].id, l);
	cr_assert_eq(s->versions.members[0].profile.machine_max.value, 3);
	cr_assert_eq(s->versions_index, 2);
}

static int append_versions(struct harness *h, baton_node_id id,
			   const struct baton_version_state *s)
{
	struct baton_event ev = {.type = BATON_EVENT_VERSIONS};
	ev.u.versions.state = s;
	return h_step(h, id, &ev);
}

/* The nodes implement machine versions up to 3, so the entries below
 * raise the machine version without stalling them (the pipeline stalls a
 * node at a version its release does not implement). */
static void machine3(struct baton_raft_options *o)
{
	o->profile.machine_max.value = 3;
}

static void no_trailing(struct baton_raft_options *o)
{
	machine3(o);
	o->snapshot_trailing_entries = 0;
}

Test(versions, a_fresh_cluster_starts_from_the_initial_state)
{
	struct harness h;
	h_init(&h, 3, machine3);
	struct baton_version_state init;
	baton_version_state_initial(&init);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		assert_state_eq(&s.versions, &init);
		cr_assert_eq(s.versions_index, 0);
	}
	/* Its first leader's first entry records the state it sees. */
	baton_node_id l = h_elect(&h);
	h_run(&h, 100);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		assert_first(&s, l);
		cr_assert_eq(s.stalled_index, 0);
		cr_assert_geq(s.applied_index, 2);
	}
	h_free(&h);
}

Test(versions, an_entry_replicates_to_every_node_and_is_applied)
{
	struct harness h;
	h_init(&h, 3, machine3);
	baton_node_id l = h_elect(&h);
	struct baton_version_state v = table_of(3, 2);
	cr_assert_eq(append_versions(&h, l, &v), 0);
	baton_index at = h_status(&h, l).last_index;
	/* The leader's state changes as soon as the entry is in its log. */
	assert_node_state(&h, l, &v);
	cr_assert_eq(h_status(&h, l).versions_index, at);
	h_deliver_all(&h);
	h_run(&h, 100);
	for (baton_node_id i = 1; i <= 3; i++) {
		struct baton_raft_status s = h_status(&h, i);
		assert_state_eq(&s.versions, &v);
		cr_assert_eq(s.versions_index, at);
		cr_assert_geq(s.commit_index, at);
		cr_assert_geq(h.applied[i], at, "node %llu applied it",
			      (unsigned long long)i);
		const struct baton_entry *e = baton_raft_entry(h.r[i], at);
		cr_assert_not_null(e);
		cr_assert_eq(e->type, BATON_ENTRY_VERSION);
	}
	/* A later entry replaces the state; the earlier index is history. */
	struct baton_version_state w = table_of(3, 3);
	cr_assert_eq(append_versions(&h, l, &w), 0);
	h_run(&h, 100);
	for (baton_node_id i = 1; i <= 3; i++) {
		assert_node_state(&h, i, &w);
		cr_assert_gt(h_status(&h, i).versions_index, at);
	}
	h_free(&h);
}

Test(versions, only_a_leader_appends_and_only_valid_states)
{
	struct harness h;
	h_init(&h, 3, machine3);
	baton_node_id l = h_elect(&h);
	baton_node_id f = l == 1 ? 2 : 1;
	struct baton_version_state v = table_of(3, 2);
	cr_assert_eq(append_versions(&h, f, &v), BATON_ENOTLEADER);
	v.machine.value = 0;
	baton_index last = h_status(&h, l).last_index;
	cr_assert_eq(append_versions(&h, l, &v), BATON_EINVAL);
	cr_assert_eq(h_status(&h, l).last_index, last, "nothing appended");
	h_free(&h);
}

Test(versions, the_core_refuses_no_state_at_all)
{
	/* The pipeline never passes NULL (it asserts); the core, driven by
	 * anyone, refuses it. */
	uint64_t now = 0;
	struct baton_raft *r = h_lone_leader(NULL, &now);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	baton_index last = s.last_index;
	struct baton_event ev = {.type = BATON_EVENT_VERSIONS};
	ev.u.versions.state = NULL;
	struct baton_update u;
	cr_assert_eq(baton_raft_step(r, now, &ev, &u), BATON_EINVAL);
	baton_raft_status(r, &s);
	cr_assert_eq(s.last_index, last, "nothing appended");
	baton_raft_destroy(r);
}

Test(versions, a_truncated_entry_takes_its_state_with_it)
{
	struct harness h;
	h_init(&h, 3, machine3);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	/* The leader appends a version entry nobody else receives. */
	for (baton_node_id i = 1; i <= 3; i++)
		h.down[i] = i != l;
	struct baton_version_state v = table_of(3, 2);
	cr_assert_eq(append_versions(&h, l, &v), 0);
	cr_assert_eq(h_status(&h, l).versions.machine.value, 2);
	h_deliver_all(&h);
	/* The others elect a leader of their own and commit an entry. */
	for (baton_node_id i = 1; i <= 3; i++)
		h.down[i] = i == l;
	baton_node_id l2 = 0;
	for (int k = 0; k < 200 && l2 == 0; k++) {
		h_run(&h, 10);
		for (baton_node_id i = 1; i <= 3; i++)
			if (i != l && h_status(&h, i).role == BATON_LEADER)
				l2 = i;
	}
	cr_assert_neq(l2, 0);
	cr_assert_eq(h_propose(&h, l2, "x"), 0);
	h_run(&h, 50);
	/* The old leader comes back: its suffix is replaced. */
	h.down[l] = false;
	h_run(&h, 500);
	struct baton_raft_status s = h_status(&h, l);
	cr_assert_neq(s.role, BATON_LEADER);
	/* Back to what the new leader wrote: machine version 1, the rows of
	 * both leaders. */
	struct baton_raft_status s2 = h_status(&h, l2);
	assert_state_eq(&s.versions, &s2.versions);
	cr_assert_eq(s.versions_index, s2.versions_index);
	cr_assert_eq(s.versions.machine.value, 1);
	cr_assert_eq(s.versions.n, 2);
	cr_assert_eq(s.last_index, s2.last_index);
	h_free(&h);
}

/* The log of these tests: 1 the configuration, 2 the leader's first
 * (version) entry, 3 the test's version entry, then commands; a snapshot every
 * 4 applied entries lands on the first command. */
#define SNAP_EVERY 4u

Test(versions, snapshot_meta_records_the_state_in_force_at_its_index)
{
	struct harness h;
	h_init_snapshots(&h, 3, no_trailing, SNAP_EVERY);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_index before = h_status(&h, l).commit_index;
	struct baton_version_state v = table_of(3, 2);
	cr_assert_eq(append_versions(&h, l, &v), 0);
	baton_index at = h_status(&h, l).last_index;
	cr_assert_eq(at, SNAP_EVERY - 1);
	h_run(&h, 100);
	cr_assert_eq(h_status(&h, l).applied_index, at);
	cr_assert_eq(h_status(&h, l).snapshot_index, 0, "none yet");

	struct baton_snapshot_meta m;
	cr_assert_eq(baton_raft_snapshot_meta(h.r[l], before, &m), 0);
	struct baton_raft_status first;
	first.versions = m.versions;
	first.versions_index = m.versions_index;
	assert_first(&first, l);
	cr_assert_eq(baton_raft_snapshot_meta(h.r[l], 1, &m), 0);
	struct baton_version_state init;
	baton_version_state_initial(&init);
	assert_state_eq(&m.versions, &init);
	cr_assert_eq(m.versions_index, 0, "before any version entry");
	cr_assert_eq(baton_raft_snapshot_meta(h.r[l], at, &m), 0);
	assert_state_eq(&m.versions, &v);
	cr_assert_eq(m.versions_index, at);

	/* Taken, with the log compacted behind it: still known. */
	cr_assert_eq(h_propose(&h, l, "a"), 0);
	h_run(&h, 100);
	baton_index applied = h_status(&h, l).applied_index;
	cr_assert_eq(applied, SNAP_EVERY);
	struct baton_raft_status s = h_status(&h, l);
	cr_assert_eq(s.snapshot_index, applied);
	cr_assert_eq(s.first_index, applied + 1);
	assert_state_eq(&s.versions, &v);
	cr_assert_eq(s.versions_index, at);
	cr_assert_eq(baton_raft_snapshot_meta(h.r[l], applied, &m), 0);
	assert_state_eq(&m.versions, &v);
	cr_assert_eq(m.versions_index, at);
	/* And the file on the disk records the same. */
	const struct sim_disk *d = &h.node[l].disk.durable;
	cr_assert(d->has_snap && d->snap.meta.index == applied);
	assert_state_eq(&d->snap.meta.versions, &v);
	cr_assert_eq(d->snap.meta.versions_index, at);
	/* Below the snapshot the log no longer tells. */
	cr_assert_eq(baton_raft_snapshot_meta(h.r[l], applied - 1, &m),
		     BATON_EINVAL);
	/* A truncation-free refresh after the snapshot keeps it too: a new
	 * entry after the snapshot, then the state is still the same. */
	cr_assert_eq(h_propose(&h, l, "b"), 0);
	h_run(&h, 100);
	assert_node_state(&h, l, &v);
	h_free(&h);
}

Test(versions, a_leaders_snapshot_carries_the_state_to_a_follower)
{
	struct harness h;
	/* The snapshot lands on the fifth command (entry 8). */
	h_init_snapshots(&h, 3, no_trailing, 2 * SNAP_EVERY);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	baton_node_id f = l == 3 ? 2 : 3;
	h.down[f] = true;
	struct baton_version_state v = table_of(3, 2);
	cr_assert_eq(append_versions(&h, l, &v), 0);
	baton_index at = h_status(&h, l).last_index;
	for (int i = 0; i < 5; i++)
		cr_assert_eq(h_propose(&h, l, "c"), 0);
	h_run(&h, 100);
	baton_index applied = h_status(&h, l).applied_index;
	cr_assert_eq(applied, 2 * SNAP_EVERY);
	cr_assert_eq(h_status(&h, l).snapshot_index, applied);
	cr_assert_eq(h_status(&h, l).first_index, applied + 1);
	struct baton_raft_status sf = h_status(&h, f);
	assert_first(&sf, l);
	h.down[f] = false;
	h_run(&h, 500);
	cr_assert_eq(h.snapshot_installed[f], applied, "installed a snapshot");
	struct baton_raft_status s = h_status(&h, f);
	cr_assert_eq(s.snapshot_index, applied);
	assert_state_eq(&s.versions, &v);
	cr_assert_eq(s.versions_index, at);
	/* And the follower's own snapshot of it records the same. */
	struct baton_snapshot_meta m;
	cr_assert_eq(baton_raft_snapshot_meta(h.r[f], applied, &m), 0);
	assert_state_eq(&m.versions, &v);
	cr_assert_eq(m.versions_index, at);
	h_free(&h);
}

Test(versions, a_restart_finds_the_state_in_its_log_and_snapshot)
{
	struct harness h;
	h_init_snapshots(&h, 3, no_trailing, SNAP_EVERY);
	baton_node_id l = h_elect(&h);
	h_run(&h, 50);
	struct baton_version_state v = table_of(3, 2);
	cr_assert_eq(append_versions(&h, l, &v), 0);
	baton_index at = h_status(&h, l).last_index;
	h_run(&h, 100);
	baton_node_id f = l == 1 ? 2 : 1;

	/* In the log only. */
	h_restart(&h, f, false);
	struct baton_raft_status s = h_status(&h, f);
	assert_state_eq(&s.versions, &v);
	cr_assert_eq(s.versions_index, at);
	cr_assert_eq(s.snapshot_index, 0);

	/* Covered by a snapshot (taken at the next entry), with a newer
	 * entry after it. */
	cr_assert_eq(h_propose(&h, l, "s"), 0);
	h_run(&h, 100);
	baton_index applied = h_status(&h, f).applied_index;
	cr_assert_eq(applied, SNAP_EVERY);
	cr_assert_eq(h_status(&h, f).snapshot_index, applied);
	h_restart(&h, f, false);
	s = h_status(&h, f);
	cr_assert_eq(s.snapshot_index, applied);
	assert_state_eq(&s.versions, &v);
	cr_assert_eq(s.versions_index, at);
	h_run(&h, 100);
	struct baton_version_state w = table_of(3, 3);
	cr_assert_eq(append_versions(&h, h_elect(&h), &w), 0);
	baton_index at2 = h_status(&h, h_leader(&h)).last_index;
	h_run(&h, 200);
	h_restart(&h, f, false);
	s = h_status(&h, f);
	assert_state_eq(&s.versions, &w);
	cr_assert_eq(s.versions_index, at2);
	cr_assert_eq(s.stalled_index, 0);
	h_free(&h);
}

Test(versions, restore_refuses_a_snapshot_without_a_valid_state)
{
	struct baton_raft_options o;
	baton_raft_options_default(&o);
	o.id = 1;
	struct baton_raft *r;
	cr_assert_eq(baton_raft_create(&o, &r), 0);
	struct baton_snapshot_meta m;
	memset(&m, 0, sizeof m);
	m.index = 5;
	m.term = 1;
	m.config.n = 1;
	m.config.members[0] = (struct baton_member){1, BATON_VOTER};
	cr_assert_eq(baton_raft_restore(r, 1, 0, &m, NULL, 0, NULL, 0),
		     BATON_EINVAL, "machine version 0");
	baton_version_state_initial(&m.versions);
	m.versions_index = 6;
	cr_assert_eq(baton_raft_restore(r, 1, 0, &m, NULL, 0, NULL, 0),
		     BATON_EINVAL, "version entry after the snapshot");
	m.versions_index = 4;
	cr_assert_eq(baton_raft_restore(r, 1, 0, &m, NULL, 0, NULL, 0), 0);
	struct baton_raft_status s;
	baton_raft_status(r, &s);
	cr_assert_eq(s.versions_index, 4);
	baton_raft_destroy(r);
}
