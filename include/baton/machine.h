/*
 * baton — the versioned state machine a node drives.
 *
 * A library user brings their own machine by filling struct
 * baton_machine_ops; batond's is the key-value store with its address book
 * (src/server/machine.c). The node pipeline (src/node) calls it on the
 * loop's thread only, one call at a time:
 *
 *   - apply() each committed COMMAND entry, in log order, with the machine
 *     version in force at the entry's index (the effective machine version
 *     is a fact of the log: see baton/version.h);
 *   - version_changed() at the index of a version entry that changes the
 *     effective machine version, before any entry after it is applied;
 *   - snapshot() (or snapshot_begin/step/end, in slices between applies)
 *     and restore() carry the machine version the bytes were written
 *     under.
 *
 * Determinism: given the same entries and versions, every node's machine
 * must produce the same state and the same replies.
 *
 * Refusal: a machine that meets an entry, a version or a snapshot it cannot
 * interpret returns BATON_EVERSION (or BATON_ECORRUPT) and writes why into
 * its error message. The node then stops applying at that index, keeps its
 * data untouched, reports the stall (status, INFO, log) and keeps serving
 * what it can; it never skips the entry and never aborts. A machine must
 * leave its state unchanged when it refuses.
 */
#ifndef BATON_MACHINE_H
#define BATON_MACHINE_H

#include "baton/buf.h"
#include "baton/raft.h"

#ifdef __cplusplus
extern "C" {
#endif

struct baton_machine;

/* Kinds of loss one conversion down may report; a machine whose later
 * versions add more structures reports more kinds. */
#define BATON_MACHINE_LOSS_KINDS_MAX 8u
/* Room for the wording of a loss, NUL included. */
#define BATON_MACHINE_LOSS_TEXT_MAX 512u

/* One kind of loss: what a structure of a newer machine version becomes
 * when the state is converted below that version. */
struct baton_machine_loss_kind {
	/* A stable name for machines and scripts, e.g. "hashes_deleted";
	 * static, owned by the machine. */
	const char *name;
	/* The machine version that brought the structure: converting to
	 * any version below it loses it. */
	struct baton_machine_version since;
	/* How many items would be lost, as the state is now. */
	uint64_t items;
};

/* What a conversion down would lose now, counted and worded by the
 * machine itself, so that a downgrade asks before it happens and does
 * exactly what it said (baton_machine_ops.convert_loss). */
struct baton_machine_loss {
	uint32_t n; /* kinds[0..n) lose something: items > 0 */
	struct baton_machine_loss_kind kinds[BATON_MACHINE_LOSS_KINDS_MAX];
	uint64_t items; /* the sum of kinds[].items */
	/* What is lost and what forcing the conversion does, e.g. "1 key
	 * is a hash, which machine version 2 cannot hold; with FORCE it is
	 * deleted"; empty when nothing is lost. */
	char text[BATON_MACHINE_LOSS_TEXT_MAX];
};

struct baton_machine_ops {
	/* Apply the committed COMMAND entry `e` under machine version `v`.
	 * Append the client's reply to `reply` when it is not NULL (somebody
	 * waits for it). A command that fails in a way every node agrees on
	 * (a wrong type, say) is applied: 0, with the error in the reply.
	 * BATON_EVERSION / BATON_ECORRUPT: cannot interpret it (stall).
	 * BATON_ENOMEM: the node stops (it cannot apply and must not skip). */
	int (*apply)(struct baton_machine *m, struct baton_machine_version v,
		     const struct baton_entry *e, struct baton_buf *reply);
	/* The effective machine version changes from `from` to `to` at
	 * `index` (a version entry). Convert the state if the versions need
	 * it. BATON_EVERSION if `to` is not implemented (stall). May be NULL
	 * when no version needs a conversion. */
	int (*version_changed)(struct baton_machine *m, baton_index index,
			       struct baton_machine_version from,
			       struct baton_machine_version to);
	/* What version_changed(from, to) would lose if it ran now, for an
	 * explicit downgrade's validate and enable steps (to < from): fill
	 * *loss, every kind with items > 0 and the text saying it. 0;
	 * BATON_EVERSION when the machine cannot convert from `from` to
	 * `to` at all (errmsg() says why; nothing may be forced then).
	 * Called on the loop's thread between applies, so the answer holds
	 * until the next apply. May be NULL: the conversion loses nothing. */
	int (*convert_loss)(struct baton_machine *m,
			    struct baton_machine_version from,
			    struct baton_machine_version to,
			    struct baton_machine_loss *loss);
	/* Append the whole state, as of machine version `v`, to `out`. */
	int (*snapshot)(struct baton_machine *m, struct baton_machine_version v,
			struct baton_buf *out);
	/* Incremental snapshots (optional: all three, or none and the node
	 * calls snapshot() in one go). snapshot_begin() fixes the state as
	 * it is now, under machine version `v`; snapshot_step() then appends
	 * the next part of that state's bytes to `out` (about `budget` bytes,
	 * more if one item is bigger; never nothing unless done) and sets
	 * *done with the last part. The bytes of all steps, in order, are
	 * exactly what snapshot() would have appended at begin. Between steps
	 * the node goes on calling apply(): the machine keeps what the
	 * snapshot still needs (a copy of an item before an apply changes
	 * it). snapshot_end() ends it, finished or abandoned, and frees what
	 * it kept. One snapshot at a time; the node never calls
	 * version_changed(), restore() or snapshot() while one is open.
	 * snapshot_begin() may return BATON_EBUSY when the machine cannot
	 * fix its state now (batond's map while a KEYS reads it in slices):
	 * nothing began, and the node asks again at its next flush. */
	int (*snapshot_begin)(struct baton_machine *m,
			      struct baton_machine_version v);
	int (*snapshot_step)(struct baton_machine *m, size_t budget,
			     struct baton_buf *out, bool *done);
	void (*snapshot_end)(struct baton_machine *m);
	/* Replace the state with a snapshot's bytes written under version
	 * `v`. BATON_EVERSION: a version or format this release cannot
	 * interpret; BATON_ECORRUPT: damaged. On error the state is
	 * unchanged. */
	int (*restore)(struct baton_machine *m, struct baton_machine_version v,
		       const uint8_t *buf, size_t len);
	/* What the last failed call found, for logs and status (static or
	 * owned by the machine; valid until the next call). May be NULL. */
	const char *(*errmsg)(const struct baton_machine *m);
};

/* Embed this as the first member of the machine's own struct. */
struct baton_machine {
	const struct baton_machine_ops *ops;
};

#ifdef __cplusplus
}
#endif

#endif /* BATON_MACHINE_H */
