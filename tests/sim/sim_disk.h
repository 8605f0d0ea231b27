/*
 * The simulated disk: an implementation of struct baton_storage
 * (include/baton/storage.h), so the simulator drives a node exactly through
 * the contract the server relies on.
 *
 * Two lifetimes, as on a real machine: the durable state (struct sim_disk)
 * belongs to the node and survives power loss; the storage object over it
 * lives as long as one incarnation of the node (opened at boot, closed at
 * the crash). Submissions wait in the storage's queue until the world says
 * the next one reached the platter (sim_disk_complete_next), so the world
 * keeps deciding when writes complete, from the seed: a hook tells it of
 * each submission (sim_disk_on_submit), as the real storage's notify
 * callback tells the event loop of completions.
 *
 * An application snapshot's commit in the background
 * (snapshot_commit_start) queues behind the submissions in the same FIFO
 * and calls the same hook: it ends (durable, or BATON_ESTATE when the
 * durable snapshot is as new) at the sim_disk_complete_next the world
 * schedules for it, after the submissions queued before it, and
 * snapshot_commit_wait answers BATON_EAGAIN until then. A blocking wait
 * ends it at once (its turn in the FIFO stays, empty). A crash loses it:
 * it never becomes durable, and its wait returns BATON_EIO and frees the
 * sink, even after the storage is closed. As on the real disk, one
 * snapshot is written or committed at a time (BATON_EBUSY).
 *
 * A snapshot's writes queue as on the real disk: the first write into an
 * empty queue puts a drain in the same FIFO (calling the same hook), and
 * the queue is empty again at its sim_disk_complete_next. Until then it
 * takes at most a few writes and bytes (sim_disk.c); a write that does
 * not fit gets BATON_EAGAIN, takes nothing, and fits after the drain
 * (the world then tells the node, as for a submission). Nothing of this
 * draws on the seed. A crash drops the drain with the sink. Without the
 * hook (sim_disk_on_submit) there is no drain: writes never wait.
 */
#ifndef BATON_SIM_DISK_H
#define BATON_SIM_DISK_H

#include <baton/storage.h>

/* What is durable on one node's disk. */
struct sim_disk {
	baton_term term;
	baton_node_id vote;
	bool has_snap;
	struct baton_snapshot_header snap;
	uint8_t *snap_data;
	size_t snap_len;
	struct baton_entry *log; /* deep copies, consecutive indexes */
	uint32_t log_n, log_cap;
};

/* A storage over d, which must outlive it; `id` names the node in
 * diagnostics. Never fails (aborts when out of memory). Release with
 * ops->close, which first makes every queued submission durable. */
struct baton_storage *sim_disk_open(struct sim_disk *d, baton_node_id id);

/* Call cb(data) after every submit, snapshot_commit_start and drain of a
 * snapshot's queue, so the world can schedule when it reaches the platter
 * (then call sim_disk_complete_next, once per call of cb). */
void sim_disk_on_submit(struct baton_storage *s, void (*cb)(void *data),
			void *data);

/* The oldest queued submission becomes durable; poll() reports it (or the
 * queued snapshot commit ends, or a snapshot's queue drains; the caller
 * then tells the node, as for a submission, so it calls
 * snapshot_commit_wait or writes again). Aborts if nothing is
 * queued, or if its entries would leave a gap in the log. */
void sim_disk_complete_next(struct baton_storage *s);

/* Power loss: the queued submissions never become durable and are never
 * reported; a snapshot commit in flight is lost (its wait returns
 * BATON_EIO). The durable state is untouched. */
void sim_disk_crash(struct baton_storage *s);

/* Free the durable state (at the end of a run). */
void sim_disk_free(struct sim_disk *d);

#endif
