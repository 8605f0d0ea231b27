/*
 * Versions: comparing, parsing and formatting releases; the one table of
 * releases this binary contains; the encoding of the version state carried
 * by BATON_ENTRY_VERSION entries (docs/core.md, "The version entry").
 *
 * Format 1 (little endian):
 *   u8  format (1)
 *   u32 effective machine version (>= 1)
 *   u16 floor major, u16 floor minor, u16 floor patch
 *   u8  n, the rows of the version table (<= BATON_MAX_MEMBERS)
 *   n times: u64 id (> 0, strictly increasing), u16 major, u16 minor,
 *            u16 patch, u32 proto_min, u32 proto_max (>= proto_min),
 *            u32 machine_max
 *   then, only while an explicit downgrade is in progress, its tail:
 *   u8  1, u16 x3 target, u16 x3 previous floor, u32 previous machine,
 *   u64 the index of the entry that enabled it
 *   then, only while the burn-in hold is on (docs/upgrading.md, "Hold and
 *   finalize"), its tail: u8 2, u8 flags (1: held; nothing else is valid,
 *   a later release appends a tail of its own)
 * Each tail begins with its tag, in increasing order. A release before the
 * hold reads the tag 2 as "what a later release appended" and stops there
 * (where there is no downgrade tail) or never reaches it (after one).
 * A later format only appends, so a decoder of format 1 ignores bytes after
 * the fields it knows; a higher format byte is a format it does not know.
 */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define VERSION_FORMAT 1u
#define VERSION_HEADER_LEN 12u
#define VERSION_ROW_LEN 26u
#define VERSION_DOWNGRADE_LEN 25u
#define VERSION_DOWNGRADE_TAG 1u
#define VERSION_HOLD_LEN 2u
#define VERSION_HOLD_TAG 2u
#define VERSION_HOLD_HELD 1u
_Static_assert(VERSION_HEADER_LEN + VERSION_ROW_LEN * BATON_MAX_MEMBERS +
			       VERSION_DOWNGRADE_LEN + VERSION_HOLD_LEN ==
		       BATON_VERSION_STATE_BYTES_MAX,
	       "version.h states the largest encoding");

/* ---- releases ----------------------------------------------------------- */

bool baton_release_none(struct baton_release r)
{
	return r.major == 0 && r.minor == 0 && r.patch == 0;
}

int baton_release_compare(struct baton_release a, struct baton_release b)
{
	if (a.major != b.major)
		return a.major < b.major ? -1 : 1;
	if (a.minor != b.minor)
		return a.minor < b.minor ? -1 : 1;
	if (a.patch != b.patch)
		return a.patch < b.patch ? -1 : 1;
	return 0;
}

/* One decimal part of a release, up to `end` (the dot or the NUL). */
static int parse_part(const char **s, char end, uint16_t *out)
{
	const char *p = *s;
	uint32_t v = 0;
	unsigned digits = 0;
	while (*p >= '0' && *p <= '9') {
		v = v * 10u + (uint32_t)(*p - '0');
		if (v > UINT16_MAX || ++digits > 5)
			return BATON_EINVAL;
		p++;
	}
	if (digits == 0 || *p != end)
		return BATON_EINVAL;
	BATON_ASSERT(digits <= 5 && v <= UINT16_MAX);
	*out = (uint16_t)v;
	*s = end == '\0' ? p : p + 1;
	return 0;
}

int baton_release_parse(const char *s, struct baton_release *out)
{
	struct baton_release r;
	if (s == NULL || parse_part(&s, '.', &r.major) != 0 ||
	    parse_part(&s, '.', &r.minor) != 0 ||
	    parse_part(&s, '\0', &r.patch) != 0)
		return BATON_EINVAL;
	BATON_ASSERT(*s == '\0'); /* all of it was read */
	*out = r;
	return 0;
}

char *baton_release_format(struct baton_release r,
			   char buf[BATON_RELEASE_STR_MAX])
{
	int n = snprintf(buf, BATON_RELEASE_STR_MAX, "%u.%u.%u",
			 (unsigned)r.major, (unsigned)r.minor,
			 (unsigned)r.patch);
	BATON_ASSERT(n > 0 && (size_t)n < BATON_RELEASE_STR_MAX);
	return buf;
}

/* ---- the table of releases ----------------------------------------------
 * The only place in the code where a version number is written down. Add a
 * row per release, oldest first; never change or remove an old row: a
 * newer binary emulates an older release (--as-release) from it. */

static const struct baton_profile releases[] = {
	/* Before the version rules: same profile as 1.0.0. */
	{.release = {0, 1, 0},
	 .proto_min = {1},
	 .proto_max = {1},
	 .machine_max = {1}},
	/* The first version-aware release. */
	{.release = {1, 0, 0},
	 .proto_min = {1},
	 .proto_max = {1},
	 .machine_max = {1}},
	/* Peer protocol 2 (forwarded transactions); machine version 2
	 * (expiry, transactions). */
	{.release = {1, 1, 0},
	 .proto_min = {1},
	 .proto_max = {2},
	 .machine_max = {2}},
	/* Drops peer protocol 1 (protocol 3 leaves out what the handshake
	 * and the info request made redundant). */
	{.release = {1, 2, 0},
	 .proto_min = {2},
	 .proto_max = {3},
	 .machine_max = {2}},
	/* Same protocols and machine version as 1.2.0, so the two mix
	 * freely in a cluster: snapshots written in slices between the
	 * loop's other work and committed in the background, incremental
	 * snapshots of the key-value store. (Peer authentication, cluster
	 * identity and per-connection order were already in 1.2.0, commit
	 * ac38bfc: see RELEASES.) */
	{.release = {1, 3, 0},
	 .proto_min = {2},
	 .proto_max = {3},
	 .machine_max = {2}},
	/* Peer protocol 4 only: the messages of 3, each frame ending with a
	 * checksum of its header and body (docs/peer-protocol.md). No 1.x
	 * release speaks it, so 2.0.0 cannot talk to 1.x nodes and a 1.x
	 * cluster cannot be rolled to it: it moves through the relay
	 * migration (docs/relay.md). Machine version 3: hashes (HSET, HGET,
	 * ...) and TYPE (docs/kv.md). */
	{.release = {2, 0, 0},
	 .proto_min = {4},
	 .proto_max = {4},
	 .machine_max = {3}},
};

#define N_RELEASES ((uint32_t)(sizeof releases / sizeof releases[0]))

/* The release whose leaders first wrote the cluster's identity into the
 * log (batond's 'U' and 'R' entries). */
static const struct baton_release identity_since = {1, 2, 0};

struct baton_release baton_release_identity_since(void)
{
	BATON_ASSERT(baton_release_find(identity_since) != NULL);
	BATON_ASSERT(baton_release_compare(identity_since,
					   releases[N_RELEASES - 1].release) <=
		     0);
	return identity_since;
}

/* The first release with the relay client that knows the migration's
 * fence (docs/relay.md): every member of an old cluster must run it. */
static const struct baton_release migration_since = {1, 3, 0};

struct baton_release baton_release_migration_since(void)
{
	BATON_ASSERT(baton_release_find(migration_since) != NULL);
	BATON_ASSERT(baton_release_compare(migration_since,
					   releases[N_RELEASES - 1].release) <=
		     0);
	return migration_since;
}

/* The first release whose migration messages are sealed (format 2,
 * --migration-secret-file): a new node speaks the unsealed format 1 only
 * to a cluster of a release before it, when told to
 * (--migrate-from-unsealed, docs/relay.md "Migrating from 1.3.0"). */
static const struct baton_release sealed_migration_since = {2, 0, 0};

struct baton_release baton_release_sealed_migration_since(void)
{
	BATON_ASSERT(baton_release_find(sealed_migration_since) != NULL);
	BATON_ASSERT(baton_release_compare(migration_since,
					   sealed_migration_since) < 0);
	return sealed_migration_since;
}

const struct baton_profile *baton_releases(uint32_t *n_out)
{
	BATON_ASSERT(N_RELEASES >= 1);
	*n_out = N_RELEASES;
	return releases;
}

const struct baton_profile *baton_release_find(struct baton_release r)
{
	for (uint32_t i = 0; i < N_RELEASES; i++) {
		if (baton_release_compare(releases[i].release, r) == 0) {
			/* Oldest first: the table never lists one twice. */
			BATON_ASSERT(i == 0 ||
				     baton_release_compare(
					     releases[i - 1].release, r) < 0);
			return &releases[i];
		}
	}
	return NULL;
}

const struct baton_profile *baton_release_current(void)
{
	const struct baton_profile *p = &releases[N_RELEASES - 1];
	BATON_ASSERT(p->proto_min.value <= p->proto_max.value);
	BATON_ASSERT(p->machine_max.value >= 1);
	/* The binary's own release is the newest it contains. */
	const struct baton_profile *prev = N_RELEASES > 1 ? p - 1 : NULL;
	BATON_ASSERT(prev == NULL ||
		     baton_release_compare(prev->release, p->release) < 0);
	return p;
}

const struct baton_profile *baton_release_previous(struct baton_release r)
{
	const struct baton_profile *p = baton_release_find(r);
	if (p == NULL || p == releases)
		return NULL;
	BATON_ASSERT(baton_release_compare(p[-1].release, r) < 0);
	return p - 1;
}

int baton_proto_common(const struct baton_profile *a,
		       const struct baton_profile *b,
		       struct baton_proto_version *out)
{
	BATON_ASSERT(a != NULL && b != NULL && out != NULL);
	uint32_t lo = a->proto_min.value > b->proto_min.value
			      ? a->proto_min.value
			      : b->proto_min.value;
	uint32_t hi = a->proto_max.value < b->proto_max.value
			      ? a->proto_max.value
			      : b->proto_max.value;
	out->value = 0;
	if (hi == 0 || lo > hi)
		return BATON_EVERSION;
	out->value = hi;
	BATON_ASSERT(out->value >= 1 && out->value <= a->proto_max.value &&
		     out->value <= b->proto_max.value);
	return 0;
}

/* ---- the version state -------------------------------------------------- */

void baton_version_state_initial(struct baton_version_state *out)
{
	memset(out, 0, sizeof *out);
	out->machine.value = 1;
	BATON_ASSERT(baton_version_state_valid(out));
}

const struct baton_member_versions *
baton_version_state_find(const struct baton_version_state *s, baton_node_id id)
{
	BATON_ASSERT(s->n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < s->n; i++)
		if (s->members[i].id == id)
			return &s->members[i];
	return NULL;
}

size_t baton_version_state_encoded_len(const struct baton_version_state *s)
{
	BATON_ASSERT(s->n <= BATON_MAX_MEMBERS);
	return VERSION_HEADER_LEN + (size_t)s->n * VERSION_ROW_LEN +
	       (baton_release_none(s->downgrade.target)
			? 0
			: VERSION_DOWNGRADE_LEN) +
	       (s->held ? VERSION_HOLD_LEN : 0);
}

/* A downgrade is all zero, or lowers the floor below what it was and the
 * machine version to at most what it was. */
static bool downgrade_valid(const struct baton_version_state *s)
{
	const struct baton_downgrade *d = &s->downgrade;
	if (baton_release_none(d->target))
		return baton_release_none(d->prev_floor) &&
		       d->prev_machine.value == 0 && d->since == 0;
	return baton_release_compare(d->target, d->prev_floor) < 0 &&
	       d->prev_machine.value >= 1 && d->since >= 1 &&
	       s->machine.value <= d->prev_machine.value;
}

/* Encode and decode both insist on it, so whatever is encoded decodes. */
bool baton_version_state_valid(const struct baton_version_state *s)
{
	if (s->n > BATON_MAX_MEMBERS || s->machine.value == 0 ||
	    !downgrade_valid(s))
		return false;
	for (uint32_t i = 0; i < s->n; i++) {
		const struct baton_member_versions *m = &s->members[i];
		if (m->id == 0 || (i > 0 && m->id <= s->members[i - 1].id) ||
		    m->profile.proto_min.value > m->profile.proto_max.value)
			return false;
	}
	return true;
}

static uint8_t *put_release(uint8_t *p, struct baton_release r)
{
	baton_le_put_u16(p, r.major);
	baton_le_put_u16(p + 2, r.minor);
	baton_le_put_u16(p + 4, r.patch);
	return p + 6;
}

int baton_version_state_encode(const struct baton_version_state *s,
			       uint8_t *buf, size_t cap, size_t *len_out)
{
	if (!baton_version_state_valid(s))
		return BATON_EINVAL;
	size_t len = baton_version_state_encoded_len(s);
	if (len > cap)
		return BATON_ETOOBIG;
	uint8_t *p = buf;
	*p++ = VERSION_FORMAT;
	baton_le_put_u32(p, s->machine.value);
	p = put_release(p + 4, s->floor);
	*p++ = (uint8_t)s->n;
	BATON_ASSERT(p == buf + VERSION_HEADER_LEN);
	for (uint32_t i = 0; i < s->n; i++) {
		const struct baton_member_versions *m = &s->members[i];
		baton_le_put_u64(p, m->id);
		p = put_release(p + 8, m->profile.release);
		baton_le_put_u32(p, m->profile.proto_min.value);
		baton_le_put_u32(p + 4, m->profile.proto_max.value);
		baton_le_put_u32(p + 8, m->profile.machine_max.value);
		p += 12;
	}
	if (!baton_release_none(s->downgrade.target)) {
		*p++ = VERSION_DOWNGRADE_TAG;
		p = put_release(p, s->downgrade.target);
		p = put_release(p, s->downgrade.prev_floor);
		baton_le_put_u32(p, s->downgrade.prev_machine.value);
		baton_le_put_u64(p + 4, s->downgrade.since);
		p += 12;
	}
	if (s->held) {
		*p++ = VERSION_HOLD_TAG;
		*p++ = VERSION_HOLD_HELD;
	}
	BATON_ASSERT((size_t)(p - buf) == len);
	BATON_ASSERT(len <= BATON_VERSION_STATE_BYTES_MAX);
	*len_out = len;
	return 0;
}

static bool read_release(struct baton_le_reader *rd, struct baton_release *r)
{
	return baton_le_read_u16(rd, &r->major) &&
	       baton_le_read_u16(rd, &r->minor) &&
	       baton_le_read_u16(rd, &r->patch);
}

static bool read_row(struct baton_le_reader *rd,
		     struct baton_member_versions *m)
{
	return baton_le_read_u64(rd, &m->id) &&
	       read_release(rd, &m->profile.release) &&
	       baton_le_read_u32(rd, &m->profile.proto_min.value) &&
	       baton_le_read_u32(rd, &m->profile.proto_max.value) &&
	       baton_le_read_u32(rd, &m->profile.machine_max.value);
}

int baton_version_state_decode(const uint8_t *buf, size_t len,
			       struct baton_version_state *out)
{
	if (len < 1 || buf == NULL)
		return BATON_ECORRUPT;
	if (buf[0] != VERSION_FORMAT)
		return buf[0] > VERSION_FORMAT ? BATON_EVERSION
					       : BATON_ECORRUPT;
	struct baton_le_reader rd = baton_le_reader(buf + 1, len - 1);
	struct baton_version_state s;
	memset(&s, 0, sizeof s);
	const uint8_t *n;
	if (!baton_le_read_u32(&rd, &s.machine.value) ||
	    !read_release(&rd, &s.floor) || !baton_le_read_bytes(&rd, 1, &n) ||
	    *n > BATON_MAX_MEMBERS)
		return BATON_ECORRUPT;
	s.n = *n;
	for (uint32_t i = 0; i < s.n; i++)
		if (!read_row(&rd, &s.members[i]))
			return BATON_ECORRUPT;
	/* The downgrade tail, when there is one; an unknown tag is what a
	 * later release appended after the fields we know. */
	const uint8_t *tag;
	bool more = baton_le_read_bytes(&rd, 1, &tag);
	if (more && *tag == VERSION_DOWNGRADE_TAG) {
		struct baton_downgrade *d = &s.downgrade;
		if (!read_release(&rd, &d->target) ||
		    !read_release(&rd, &d->prev_floor) ||
		    !baton_le_read_u32(&rd, &d->prev_machine.value) ||
		    !baton_le_read_u64(&rd, &d->since) ||
		    baton_release_none(d->target))
			return BATON_ECORRUPT;
		more = baton_le_read_bytes(&rd, 1, &tag);
	}
	/* The hold's tail, written only while held: its flags are exactly
	 * that (a later release appends a tail of its own instead, so what
	 * is decoded encodes again to a prefix of the input). */
	if (more && *tag == VERSION_HOLD_TAG) {
		const uint8_t *flags;
		if (!baton_le_read_bytes(&rd, 1, &flags) ||
		    *flags != VERSION_HOLD_HELD)
			return BATON_ECORRUPT;
		s.held = true;
	}
	if (!baton_version_state_valid(&s))
		return BATON_ECORRUPT;
	*out = s;
	return 0;
}

/* ---- join control --------------------------------------------------------
 * The joiner's own row is left out: a node re-joining on another release
 * must not be judged against what it ran before. */

/* The reason, cut at cap (why may be NULL when cap is 0). */
__attribute__((format(printf, 3, 4))) static void say(char *why, size_t cap,
						      const char *fmt, ...)
{
	if (why == NULL || cap == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(why, cap, fmt, ap);
	va_end(ap);
	BATON_ASSERT(n >= 0);
	BATON_ASSERT(why[cap - 1] == '\0' || (size_t)n < cap);
}

/* The peer protocol rule: 0, or BATON_EVERSION with why. */
static int join_protocols(const struct baton_version_state *s, baton_node_id id,
			  const struct baton_profile *j, char *why, size_t cap)
{
	/* The members' common range and the rows that bound it. */
	const struct baton_member_versions *lo = NULL, *hi = NULL;
	for (uint32_t i = 0; i < s->n; i++) {
		const struct baton_member_versions *m = &s->members[i];
		if (m->id == id)
			continue;
		if (lo == NULL ||
		    m->profile.proto_min.value > lo->profile.proto_min.value)
			lo = m;
		if (hi == NULL ||
		    m->profile.proto_max.value < hi->profile.proto_max.value)
			hi = m;
	}
	BATON_ASSERT((lo == NULL) == (hi == NULL));
	if (lo == NULL)
		return 0; /* no member known: nothing to meet */
	uint32_t clo = lo->profile.proto_min.value;
	uint32_t chi = hi->profile.proto_max.value;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	if (clo > chi) {
		say(why, cap,
		    "the members speak no peer protocol version in common: "
		    "node %llu (release %s) speaks %u..%u, node %llu "
		    "(release %s) %u..%u",
		    (unsigned long long)lo->id,
		    baton_release_format(lo->profile.release, a), clo,
		    lo->profile.proto_max.value, (unsigned long long)hi->id,
		    baton_release_format(hi->profile.release, b),
		    hi->profile.proto_min.value, chi);
		return BATON_EVERSION;
	}
	struct baton_profile common = *j;
	common.proto_min.value = clo;
	common.proto_max.value = chi;
	struct baton_proto_version v;
	if (baton_proto_common(j, &common, &v) == 0)
		return 0;
	/* The member that leaves the joiner out. */
	const struct baton_member_versions *m =
		j->proto_min.value > chi ? hi : lo;
	say(why, cap,
	    "release %s speaks peer protocol versions %u..%u, but the "
	    "members together speak only %u..%u (node %llu runs release "
	    "%s): no version in common",
	    baton_release_format(j->release, a), j->proto_min.value,
	    j->proto_max.value, clo, chi, (unsigned long long)m->id,
	    baton_release_format(m->profile.release, b));
	return BATON_EVERSION;
}

int baton_join_check(const struct baton_version_state *s, baton_node_id id,
		     const struct baton_profile *joiner,
		     const struct baton_release *strict, char *why, size_t cap)
{
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	say(why, cap, "%s", "");
	if (s == NULL || joiner == NULL || !baton_version_state_valid(s) ||
	    joiner->proto_min.value > joiner->proto_max.value ||
	    joiner->machine_max.value == 0) {
		say(why, cap, "malformed versions");
		return BATON_EINVAL;
	}
	BATON_ASSERT(s->machine.value >= 1);
	if (strict != NULL &&
	    baton_release_compare(*strict, joiner->release) != 0) {
		say(why, cap,
		    "strict release: the cluster runs release %s and admits "
		    "no other, the joiner runs %s",
		    baton_release_format(*strict, a),
		    baton_release_format(joiner->release, b));
		return BATON_EVERSION;
	}
	if (baton_release_compare(joiner->release, s->floor) < 0) {
		say(why, cap,
		    "release %s is below the cluster's release floor %s (the "
		    "newest release a majority of it has run): it could "
		    "neither lead nor apply; join with release %s or newer, or "
		    "downgrade the cluster first",
		    baton_release_format(joiner->release, a),
		    baton_release_format(s->floor, b),
		    baton_release_format(s->floor, b));
		return BATON_EVERSION;
	}
	if (joiner->machine_max.value < s->machine.value) {
		say(why, cap,
		    "release %s implements machine versions up to %u, but the "
		    "cluster's effective machine version is %u",
		    baton_release_format(joiner->release, a),
		    joiner->machine_max.value, s->machine.value);
		return BATON_EVERSION;
	}
	int rv = join_protocols(s, id, joiner, why, cap);
	BATON_ASSERT(rv == 0 || rv == BATON_EVERSION);
	return rv;
}
