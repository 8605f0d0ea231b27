/*
 * What the unit tests and the core benchmark give a node pipeline
 * (src/node/pipeline.h) in place of the world: a network they own (deep
 * copies of messages), a disk (the simulator's, tests/sim/sim_disk.c, made
 * durable at once or held until the test says), and state machines. The
 * pipeline does everything else — the persist chain, held messages,
 * proposals, reads, apply — so no test carries a second copy of it.
 *
 * Free of Criterion, so bench/core_bench.c links it too. Out of memory
 * aborts: these are fixtures.
 */
#ifndef BATON_UNIT_FIXTURE_H
#define BATON_UNIT_FIXTURE_H

#include <baton/machine.h>
#include <baton/raft.h>
#include <baton/storage.h>

#include "sim_disk.h"

/* ---- messages ------------------------------------------------------------ */

/* A message with a deep copy of what it points to (entries and their
 * payloads, a snapshot chunk) in one block. */
struct fx_msg {
	struct baton_msg m;
	void *mem;
};

void fx_msg_copy(struct fx_msg *out, const struct baton_msg *m);
void fx_msg_release(struct fx_msg *x);

/* ---- the disk ------------------------------------------------------------ */

/* A struct baton_storage over a simulated disk whose durable state
 * (`durable`) outlives the storage, as a real disk outlives a process.
 * Instant (the default): every submission is durable when submit returns;
 * the driver still learns it through poll (baton_pipeline_storage_ready).
 * Held: submissions wait for fx_disk_complete_next. */
struct fx_disk {
	struct baton_storage base; /* first: what the pipeline holds */
	struct sim_disk durable;
	struct baton_storage *inner; /* the simulated disk over `durable` */
	bool held;
	uint32_t queued;     /* submitted, not yet durable */
	uint64_t durable_n;  /* submissions durable so far */
	uint64_t reported_n; /* ... and reported by poll */
};

/* Open a storage over d->durable (kept from an earlier open, or zeroed
 * for a new disk). */
struct baton_storage *fx_disk_open(struct fx_disk *d, baton_node_id id);
/* Durable submissions the pipeline has not polled yet. */
bool fx_disk_unreported(const struct fx_disk *d);
/* Make the oldest queued submission durable; false if none is queued. */
bool fx_disk_complete_next(struct fx_disk *d);
/* Hold (or stop holding: everything queued becomes durable) writes. */
void fx_disk_hold(struct fx_disk *d, bool held);
/* Power loss: queued submissions never become durable. Closes the
 * storage; d->durable stays for the next fx_disk_open. */
void fx_disk_crash(struct fx_disk *d);
/* Close (queued writes become durable first), keeping d->durable. */
void fx_disk_close(struct fx_disk *d);
/* Free the durable state too. */
void fx_disk_free(struct fx_disk *d);

/* ---- a state machine that records what it applies ------------------------ */

/* Applies COMMAND entries by counting them (the reply is the payload); its
 * snapshot is the count (8 bytes, little-endian) followed by
 * `snapshot_pad` bytes of 'p' (to make snapshots of a chosen size); any
 * bytes restore (a count of 0 when shorter than 8).
 * Refuses (BATON_EVERSION) any entry at or after `refuse_from` (0: none),
 * and every snapshot while `refuse_restore` is set, as a machine of an
 * older release would. Records every change of the machine version. */
struct fx_machine {
	struct baton_machine base;
	uint64_t commands; /* applied since the start (or the last restore) */
	baton_index last;  /* index of the last command applied */
	uint64_t restores; /* snapshots restored */
	baton_index refuse_from;
	bool refuse_restore;
	size_t snapshot_pad;
	/* Changes of the effective machine version it was told of, and the
	 * last one: at which index, from which version to which. */
	uint32_t version_changes;
	baton_index changed_at;
	uint32_t changed_from, changed_to;
	char errmsg[128];
};

void fx_machine_init(struct fx_machine *m);

/* ---- driving a pipeline -------------------------------------------------- */

struct baton_pipeline;

/* End of a turn: flush, and hand the disk's completions back until there
 * are none (a held disk has none until it completes a write). */
void fx_settle(struct baton_pipeline *p, const struct fx_disk *d);

/* The requests a test makes of a pipeline that carry nothing back but
 * success (TICK, RECEIVE, TRANSFER, ADD_LEARNER, PROMOTE, REMOVE,
 * VERSIONS, DOWNGRADE): feed ev to p and return the pipeline's own refusal, or
 * 0. *handled is false for any other event (PROPOSE and READ, whose answers
 * each harness collects its own way, and the pipeline's own events). */
int fx_feed_request(struct baton_pipeline *p, const struct baton_event *ev,
		    bool *handled);

#endif /* BATON_UNIT_FIXTURE_H */
