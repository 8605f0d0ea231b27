/*
 * baton — the four kinds of version (see DESIGN.md, "The four versions"),
 * kept as distinct types so they are never passed around interchangeably,
 * and the one table of releases this binary contains.
 *
 *   release           major.minor.patch of the binary, with its capability
 *                     profile: the peer protocol versions it speaks and the
 *                     highest machine version it implements;
 *   peer protocol     negotiated per connection: the highest both ends speak;
 *   machine version   the semantics of the replicated state machine; the
 *                     effective one is a fact of the log (a version entry);
 *   release floor     the release below which no node may lead: the newest
 *                     one a majority of the voters has run (Halon), also a
 *                     fact of the log.
 *
 * The effective machine version, the release floor and the version table
 * (each member's profile) together form struct baton_version_state: the
 * core keeps it as it keeps the configuration, from BATON_ENTRY_VERSION
 * entries, snapshots and restarts.
 */
#ifndef BATON_VERSION_H
#define BATON_VERSION_H

#include "baton/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A release of the binary, major.minor.patch. 0.0.0 means "none". */
struct baton_release {
	uint16_t major;
	uint16_t minor;
	uint16_t patch;
};

/* A peer protocol version, negotiated per connection. */
struct baton_proto_version {
	uint32_t value;
};

/* A version of the replicated state machine's semantics (1, 2, ...). */
struct baton_machine_version {
	uint32_t value;
};

/* What a release can do: advertised in handshakes, votes and heartbeats. */
struct baton_profile {
	struct baton_release release;
	struct baton_proto_version proto_min;
	struct baton_proto_version proto_max;
	struct baton_machine_version machine_max;
};

/* Whether r is 0.0.0, which means "none" (no floor yet, no downgrade). */
bool baton_release_none(struct baton_release r);

/* <0, 0, >0 as a is older, equal or newer than b. */
int baton_release_compare(struct baton_release a, struct baton_release b);

/* "1.2.3" into *out: 0, or BATON_EINVAL for anything else (no spaces, no
 * missing parts, each part <= 65535). */
int baton_release_parse(const char *s, struct baton_release *out);

/* Room for the longest "65535.65535.65535" and its NUL. */
#define BATON_RELEASE_STR_MAX 18u
/* Format as "major.minor.patch" into buf; returns buf. */
char *baton_release_format(struct baton_release r,
			   char buf[BATON_RELEASE_STR_MAX]);

/* ---- the table of releases ---------------------------------------------
 * Every release this binary contains, oldest first: the only place in the
 * code where a version number is written down. The last one is the
 * binary's own release; the older ones can be emulated (--as-release). */

/* The table; *n_out receives its length. Static storage. */
const struct baton_profile *baton_releases(uint32_t *n_out);
/* The profile of this release, or NULL if the binary does not contain it. */
const struct baton_profile *baton_release_find(struct baton_release r);
/* The binary's own (newest) release. */
const struct baton_profile *baton_release_current(void);
/* The first release that records the cluster's identity (its UUID and
 * removed members) in the log: batond writes those entries only once
 * every member runs it or a later one. */
struct baton_release baton_release_identity_since(void);
/* The first release that can be the old side of a migration through the
 * relay (it applies the FENCE entry): docs/relay.md. */
struct baton_release baton_release_migration_since(void);
/* The first release that seals its migration messages (format 2); the
 * releases from baton_release_migration_since() up to it speak the
 * unsealed format 1 (docs/relay.md, "Migrating from 1.3.0"). */
struct baton_release baton_release_sealed_migration_since(void);
/* The release just before r in the table (one step back: the only target
 * of an explicit downgrade), or NULL when r is the oldest or not in it. */
const struct baton_profile *baton_release_previous(struct baton_release r);
/* The highest peer protocol version both profiles speak, in *out: 0, or
 * BATON_EVERSION when their ranges [proto_min, proto_max] do not meet (or
 * one is empty), *out then zero. The one protocol-overlap rule: the
 * handshake (baton_peer_choose_proto), the join check and the downgrade
 * check call it. Pure and symmetric. */
int baton_proto_common(const struct baton_profile *a,
		       const struct baton_profile *b,
		       struct baton_proto_version *out);

/* ---- the version facts of the log -------------------------------------- */

/* One row of the version table: what a member said it can do. */
struct baton_member_versions {
	baton_node_id id;
	struct baton_profile profile;
};

/* An explicit downgrade in progress (DESIGN.md, "Downgrade"), recorded by
 * the entry that enabled it, which also lowered the floor to `target` and
 * the machine version to target's machine_max. While one is in progress no
 * leader raises the floor or the machine version; it ends (the leader
 * writes the state without it) once every member runs `target`. */
struct baton_downgrade {
	struct baton_release target; /* 0.0.0: no downgrade in progress */
	/* What a cancel restores (all zero when target is). */
	struct baton_release prev_floor;
	struct baton_machine_version prev_machine;
	/* The index of the entry that enabled it. Every node snapshots once
	 * it applied that entry: a node may restart on the target release
	 * once its snapshot covers this index (its log then holds nothing
	 * written under the newer versions). */
	baton_index since;
};

struct baton_version_state {
	/* The effective machine version: every entry is applied with the
	 * version in force at its index. */
	struct baton_machine_version machine;
	/* The release floor: the newest release a majority of the voters has
	 * run, as a leader of it or newer recorded it (0.0.0: none yet). */
	struct baton_release floor;
	struct baton_downgrade downgrade;
	/* The burn-in hold (docs/upgrading.md, "Hold and finalize"): while
	 * true no leader raises the floor or the machine version; only a
	 * finalize (BATON_UPGRADE_FINALIZE) does. Leaders under
	 * BATON_UPGRADE_MANUAL record it; every leader honours it. */
	bool held;
	/* The version table, one row per known member, by increasing id. */
	uint32_t n;
	struct baton_member_versions members[BATON_MAX_MEMBERS];
};

/* The state of a log without any version entry: machine version 1, no
 * floor, an empty table. */
void baton_version_state_initial(struct baton_version_state *out);

/* The row of member id, or NULL. */
const struct baton_member_versions *
baton_version_state_find(const struct baton_version_state *s, baton_node_id id);

/* Whether s is a state the log may hold: machine version >= 1, n <=
 * BATON_MAX_MEMBERS, rows with ids > 0 in strictly increasing order, each
 * with proto_min <= proto_max; a downgrade either all zero, or with a
 * target below prev_floor, prev_machine >= 1, machine <= prev_machine and
 * since >= 1.
 * Decoders of snapshot metadata check it. */
bool baton_version_state_valid(const struct baton_version_state *s);

/* Encoding of a BATON_ENTRY_VERSION payload (docs/core.md, "The version
 * entry"): a format byte, then the fields, little endian; later formats
 * only append. A downgrade in progress is an optional 25-byte tail after
 * the rows, a hold an optional 2-byte tail after that (format 1 decoders
 * before them ignore them). At most
 * 12 + 26 * BATON_MAX_MEMBERS + 25 + 2 bytes: */
#define BATON_VERSION_STATE_BYTES_MAX (12u + 26u * BATON_MAX_MEMBERS + 25u + 2u)
/* Encoded size in bytes (s->n <= BATON_MAX_MEMBERS). */
size_t baton_version_state_encoded_len(const struct baton_version_state *s);
/* BATON_ETOOBIG if cap is too small, BATON_EINVAL if the state is not
 * valid (see baton_version_state_valid). */
int baton_version_state_encode(const struct baton_version_state *s,
			       uint8_t *buf, size_t cap, size_t *len_out);
/* BATON_ECORRUPT on malformed input (too short, or not a valid state),
 * BATON_EVERSION on a format this release does not know. Bytes after the
 * fields of a known format are ignored: a later format appends there.
 * Never reads past len; *out is written only on success. */
int baton_version_state_decode(const uint8_t *buf, size_t len,
			       struct baton_version_state *out);

/* ---- join control ---------------------------------------------------------
 * The leader's half of the join rule (DESIGN.md, "Join"), pure so that the
 * joiner can run it too on what the frozen handshake told it: 0 if a node
 * with profile `joiner` may join a cluster whose log holds `s`, else
 * BATON_EVERSION with why (NUL-terminated, truncated to cap) naming the
 * versions on both sides. A joiner is refused when
 *   - strict (non-NULL: the cluster's release) and its release differs;
 *   - its release is below the release floor s->floor (it could neither
 *     lead nor apply: DESIGN.md, "Future data");
 *   - its machine_max is below s->machine (the effective version);
 *   - no peer protocol version is spoken by it and by every member with a
 *     row in s (the intersection of all the ranges is empty).
 * Checked in this order, the first failing rule giving the reason. Rows
 * of s for the joiner's own id are ignored (a node re-joining). A state
 * baton_version_state_valid refuses, or a joiner profile with proto_min >
 * proto_max or machine_max 0, is BATON_EINVAL ("malformed versions").
 * `why` may be NULL when cap is 0. */
int baton_join_check(const struct baton_version_state *s, baton_node_id id,
		     const struct baton_profile *joiner,
		     const struct baton_release *strict, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* BATON_VERSION_H */
