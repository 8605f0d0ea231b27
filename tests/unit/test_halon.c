/*
 * Halon's rule and the machine version (src/core/upgrade.c): the floor
 * rises only to what a majority of the voters runs, so it may stay below
 * the leader's release; the effective machine version must then never rise
 * past what every node the floor lets lead can apply (the lowest
 * machine_max of the members on the floor's release or newer), whatever a
 * quorum implements. With the releases of the table (machine_max grows
 * with the release) that bound never bites; an embedder's table may not
 * be so ordered, which these profiles are.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <string.h>

static struct baton_profile prof(uint16_t minor, uint32_t machine_max)
{
	struct baton_profile p;
	memset(&p, 0, sizeof p);
	p.release = (struct baton_release){1, minor, 0};
	p.proto_min.value = 2;
	p.proto_max.value = 3;
	p.machine_max.value = machine_max;
	return p;
}

/* Nodes 1 and 2 run 1.3.0 (machine 3), node 3 1.0.0 with machine 3 too,
 * nodes 4 and 5 1.2.0 with machine 1. Three implement machine version 3
 * (a quorum), but the floor a majority allows is 1.2.0, and nodes 4 and 5
 * (at the floor, so they may lead) implement only 1. */
static void tweak(struct baton_raft_options *o)
{
	static const struct {
		uint16_t minor;
		uint32_t machine;
	} runs[] = {{0, 0}, {3, 3}, {3, 3}, {0, 3}, {2, 1}, {2, 1}};
	o->profile = prof(runs[o->id].minor, runs[o->id].machine);
	o->machine_upgrade = BATON_UPGRADE_QUORUM;
	if (o->id != 1)
		o->election_timeout_ms = 100000; /* node 1 leads */
}

Test(halon, quorum_never_raises_the_machine_past_the_floor_holders)
{
	struct harness h;
	h_init(&h, 5, tweak);
	h.info = true;
	cr_assert_eq(h_elect(&h), 1);
	h_run(&h, 1000);
	cr_assert_eq(h_leader(&h), 1);
	struct baton_upgrade_status u;
	baton_raft_upgrade_status(h.r[1], &u);
	for (uint32_t i = 0; i < u.n; i++)
		cr_assert(u.members[i].known, "node %llu unknown",
			  (unsigned long long)u.members[i].id);
	for (baton_node_id i = 1; i <= 5; i++) {
		struct baton_raft_status s = h_status(&h, i);
		cr_assert_eq(
			baton_release_compare(s.versions.floor,
					      (struct baton_release){1, 2, 0}),
			0, "node %llu: the floor a majority runs",
			(unsigned long long)i);
		cr_assert_eq(s.versions.machine.value, 1,
			     "node %llu: machine version %u",
			     (unsigned long long)i, s.versions.machine.value);
		/* Node 3, below the floor, holds; the others apply. */
		cr_assert_eq(s.stalled_index != 0, i == 3, "node %llu stalled",
			     (unsigned long long)i);
	}
	h_free(&h);
}
