/*
 * batonctl upgrade --to RELEASE (docs/upgrading.md, "batonctl upgrade"):
 * from any supported release to RELEASE in one command. upgrade_path.c
 * plans the path from the releases the members run (rolls through
 * stepping stones, a relay migration where two releases share no peer
 * protocol) and runs each roll with batonctl roll's own code;
 * upgrade_migrate.c runs the relay migration step with the operator's
 * commands. The plan is made again from the cluster's state on every run,
 * so running the same command after an interruption goes on from where
 * the cluster is.
 */
#ifndef BATON_CTL_UPGRADE_PATH_H
#define BATON_CTL_UPGRADE_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/version.h"
#include "ctl.h"

/* Steps of a plan: at most one per row of the release table and one
 * migration. */
#define UPGRADE_STEPS_MAX 32u
#define UPGRADE_REASON_MAX 1024u
#define UPGRADE_COMMAND_MAX 4096u

enum upgrade_step_kind {
	UPGRADE_ROLL,	 /* batonctl roll --to the step's release */
	UPGRADE_MIGRATE, /* a new cluster of the release, through the relay */
};

struct upgrade_step {
	enum upgrade_step_kind kind;
	const struct baton_profile *to;
};

/* The path from members running `from` (n_from profiles, one per member,
 * repeats allowed: a cluster in the middle of a roll) to `target`. Each
 * roll goes to the newest release not above the target that speaks a
 * peer protocol with every member, which is what `batonctl roll` accepts
 * (the stepping stone its refusal names is one of these); where no
 * release above the members' speaks with them all, the cluster must run
 * one release, at least baton_release_migration_since(), and migrates to
 * the target through the relay. Returns 0 with the steps (none when every
 * member runs the target), or -1 with `why` saying what blocks the path
 * (a member above the target, no release to step to). */
int upgrade_plan(const struct baton_profile *const *from, size_t n_from,
		 const struct baton_profile *target, struct upgrade_step *steps,
		 size_t *n_steps, char *why, size_t why_len);

/* A node of the new cluster of a migration: --new ID=HOST:PORT. */
struct upgrade_new_node {
	uint64_t id;
	char client_addr[CTL_ADDR_MAX];
};

/* What the migration step needs from the operator. */
struct upgrade_migration {
	const struct ctl_opts *o;
	const struct baton_profile *to;
	const char *to_text;
	const char *start_new; /* 'COMMAND {id}': starts a new node */
	const char *stop_old;  /* 'COMMAND {id}': stops an old node */
	struct upgrade_new_node new_nodes[CTL_MEMBERS_MAX];
	size_t n_new;
	int step_timeout_s;
};

/* Parse --new: "ID=HOST:PORT[,ID=HOST:PORT...]". Returns 0, or -1 with
 * `why` set. */
int upgrade_parse_new(const char *text, struct upgrade_migration *m, char *why,
		      size_t why_len);

/* Whether any node of the new cluster answers as the new side of a
 * migration and holds write authority (the migration handed off). */
bool upgrade_new_has_authority(const struct upgrade_migration *m);

/* Whether any node of the new cluster answers. */
bool upgrade_new_answers(const struct upgrade_migration *m);

/* Run the migration step: start the new nodes not yet answering one at a
 * time (each until ready), wait until the new cluster holds write
 * authority, then stop the old members that still answer (followers
 * first). Prints progress lines. Returns CTL_EXIT_OK or CTL_EXIT_ERROR
 * after saying what failed and that rerunning the command resumes. */
int upgrade_migrate(struct upgrade_migration *m);

#endif /* BATON_CTL_UPGRADE_PATH_H */
