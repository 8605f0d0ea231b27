/*
 * A storage in memory for the node tests (tests/node): writes complete
 * when polled, all at once and successfully; a snapshot the pipeline takes
 * is kept (its header and bytes), unless refuse_snapshots is set. A test
 * zeroes its struct mem_storage, sets min_gap to UINT64_MAX and base.ops
 * to &mem_storage_ops.
 */
#ifndef BATON_TESTS_NODE_MEM_STORAGE_H
#define BATON_TESTS_NODE_MEM_STORAGE_H

#include "pipeline.h"

struct mem_storage {
	struct baton_storage base;
	struct baton_durable_state init; /* what load() returns (moved) */
	uint64_t submitted, completed;
	/* Every snapshot_begin fails (BATON_EIO): for a test that takes
	 * none. */
	bool refuse_snapshots;
	bool has_snapshot;
	struct baton_snapshot_header snap_h;
	struct baton_buf snap;
	uint32_t snapshots;
	/* The smallest distance between the indexes of two snapshots in a
	 * row (UINT64_MAX: fewer than two). */
	uint64_t min_gap;
};

extern const struct baton_storage_ops mem_storage_ops;

#endif /* BATON_TESTS_NODE_MEM_STORAGE_H */
