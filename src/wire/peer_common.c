/*
 * The parts of the peer codec (peer.h) that both directions share: which
 * protocol versions exist and how two nodes settle on one, the refusal
 * texts, the rules a Raft message must satisfy to travel, and the framing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/buf.h"
#include "checksum.h"
#include "le.h"
#include "peer_internal.h"

/* ---- protocol versions --------------------------------------------------- */

bool baton_peer_proto_supported(struct baton_proto_version v)
{
	uint32_t n = 0;
	const struct baton_profile *table = baton_releases(&n);
	BATON_ASSERT(table != NULL && n >= 1);
	for (uint32_t i = 0; i < n; i++) {
		BATON_ASSERT(table[i].proto_min.value >= 1 &&
			     table[i].proto_min.value <=
				     table[i].proto_max.value);
		if (v.value >= table[i].proto_min.value &&
		    v.value <= table[i].proto_max.value)
			return true;
	}
	return false;
}

/* The first version whose frames end with a checksum (release 2.0.0). */
#define CHECKSUMMED_SINCE 4u

bool baton_peer_proto_checksummed(struct baton_proto_version v)
{
	return v.value >= CHECKSUMMED_SINCE;
}

int baton_peer_choose_proto(struct baton_profile mine,
			    struct baton_profile theirs,
			    struct baton_proto_version *out)
{
	BATON_ASSERT(out != NULL);
	/* The rule is the core's, so the join and downgrade checks agree
	 * with what a connection will do. */
	int rv = baton_proto_common(&mine, &theirs, out);
	BATON_ASSERT(rv != 0 ||
		     (out->value >= 1 && out->value <= mine.proto_max.value));
	return rv;
}

int baton_peer_check_choice(struct baton_profile mine,
			    struct baton_proto_version chosen)
{
	if (chosen.value == 0 || chosen.value < mine.proto_min.value ||
	    chosen.value > mine.proto_max.value)
		return BATON_EVERSION;
	/* Our own profile comes from the table, so this holds unless the
	 * profile was made up; refuse rather than speak what we cannot. */
	return baton_peer_proto_supported(chosen) ? 0 : BATON_EVERSION;
}

/* "node 3 (release 1.2.3) speaks 1..2" */
static void describe(const struct baton_member_versions *m, char *buf,
		     size_t cap)
{
	char rel[BATON_RELEASE_STR_MAX];
	snprintf(buf, cap, "node %" PRIu64 " (release %s) speaks %u..%u", m->id,
		 baton_release_format(m->profile.release, rel),
		 (unsigned)m->profile.proto_min.value,
		 (unsigned)m->profile.proto_max.value);
}

/* Whether a rolling upgrade can lead from one profile to the other: true
 * unless both releases are in the table and none of its releases speaks a
 * version of each range (then only the relay crosses: docs/relay.md). A
 * release the table does not know (a newer one, or made up) may have its
 * own way across, so it keeps the general text. */
static bool bridged(const struct baton_profile *a,
		    const struct baton_profile *b)
{
	if (baton_release_find(a->release) == NULL ||
	    baton_release_find(b->release) == NULL)
		return true;
	uint32_t n = 0;
	const struct baton_profile *table = baton_releases(&n);
	BATON_ASSERT(table != NULL && n >= 1);
	for (uint32_t i = 0; i < n; i++) {
		const struct baton_profile *p = &table[i];
		if (p->proto_min.value <= a->proto_max.value &&
		    a->proto_min.value <= p->proto_max.value &&
		    p->proto_min.value <= b->proto_max.value &&
		    b->proto_min.value <= p->proto_max.value)
			return true;
	}
	return false;
}

/* Room for describe() of the largest values. */
#define SIDE_MAX 96u

const char *
baton_peer_proto_mismatch(const struct baton_member_versions *mine,
			  const struct baton_member_versions *theirs, char *buf,
			  size_t cap)
{
	BATON_ASSERT(mine != NULL && theirs != NULL);
	BATON_ASSERT(buf != NULL && cap > 0);
	char a[SIDE_MAX], b[SIDE_MAX];
	if (!bridged(&mine->profile, &theirs->profile)) {
		snprintf(buf, cap,
			 "no common peer protocol (ours %u-%u, theirs %u-%u): "
			 "upgrade through the relay, docs/relay.md",
			 (unsigned)mine->profile.proto_min.value,
			 (unsigned)mine->profile.proto_max.value,
			 (unsigned)theirs->profile.proto_min.value,
			 (unsigned)theirs->profile.proto_max.value);
		return buf;
	}
	describe(mine, a, sizeof a);
	describe(theirs, b, sizeof b);
	snprintf(buf, cap, "no common peer protocol version: %s, %s", a, b);
	return buf;
}

const char *
baton_peer_proto_bad_choice(const struct baton_member_versions *mine,
			    const struct baton_member_versions *theirs,
			    struct baton_proto_version chosen, char *buf,
			    size_t cap)
{
	BATON_ASSERT(mine != NULL && theirs != NULL);
	BATON_ASSERT(buf != NULL && cap > 0);
	char a[SIDE_MAX], b[SIDE_MAX];
	describe(mine, a, sizeof a);
	describe(theirs, b, sizeof b);
	snprintf(buf, cap,
		 "node %" PRIu64 " chose peer protocol version %u, outside "
		 "the range of node %" PRIu64 ": %s, %s",
		 theirs->id, (unsigned)chosen.value, mine->id, a, b);
	return buf;
}

const char *
baton_peer_release_mismatch(const struct baton_member_versions *mine,
			    const struct baton_member_versions *theirs,
			    char *buf, size_t cap)
{
	BATON_ASSERT(mine != NULL && theirs != NULL);
	BATON_ASSERT(buf != NULL && cap > 0);
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	snprintf(buf, cap,
		 "strict release: node %" PRIu64 " runs release %s, node "
		 "%" PRIu64 " runs release %s, and mixed releases are refused",
		 mine->id, baton_release_format(mine->profile.release, a),
		 theirs->id, baton_release_format(theirs->profile.release, b));
	return buf;
}

/* ---- rules shared by the encoder and the decoder ---------------------------
 */

static int check_entries(const struct baton_msg_append *a, const char **why)
{
	if (a->n_entries > BATON_PEER_ENTRIES_MAX) {
		*why = "too many entries in one append";
		return BATON_ETOOBIG;
	}
	if (a->n_entries > 0 && a->entries == NULL) {
		*why = "entries missing";
		return BATON_ECORRUPT;
	}
	for (uint32_t i = 0; i < a->n_entries; i++) {
		const struct baton_entry *e = &a->entries[i];
		if (e->len > BATON_PEER_ENTRY_BYTES_MAX) {
			*why = "entry data above the limit";
			return BATON_ETOOBIG;
		}
		if (e->len > 0 && e->buf == NULL) {
			*why = "entry data missing";
			return BATON_ECORRUPT;
		}
		/* index == prev_index + 1 + i, without overflow. */
		if (e->index <= a->prev_index ||
		    e->index - a->prev_index != (uint64_t)i + 1) {
			*why = "entries not consecutive after prev_index";
			return BATON_ECORRUPT;
		}
	}
	return 0;
}

static int check_config(const struct baton_config *c, const char **why)
{
	if (c->n > BATON_MAX_MEMBERS) {
		*why = "more members than BATON_MAX_MEMBERS";
		return BATON_ECORRUPT;
	}
	for (uint32_t i = 0; i < c->n; i++) {
		const struct baton_member *m = &c->members[i];
		if (m->id == 0) {
			*why = "member id 0";
			return BATON_ECORRUPT;
		}
		if (m->role != BATON_VOTER && m->role != BATON_LEARNER) {
			*why = "unknown member role";
			return BATON_ECORRUPT;
		}
		for (uint32_t j = 0; j < i; j++) {
			if (c->members[j].id == m->id) {
				*why = "member listed twice";
				return BATON_ECORRUPT;
			}
		}
	}
	return 0;
}

static int check_snapshot(const struct baton_msg_snapshot *s, const char **why)
{
	if (s->chunk_len > BATON_PEER_CHUNK_MAX) {
		*why = "snapshot chunk above the limit";
		return BATON_ETOOBIG;
	}
	if (s->chunk_len > 0 && s->chunk == NULL) {
		*why = "snapshot chunk missing";
		return BATON_ECORRUPT;
	}
	if (s->offset > s->total_len ||
	    s->chunk_len > s->total_len - s->offset) {
		*why = "snapshot chunk outside total_len";
		return BATON_ECORRUPT;
	}
	/* Machine version >= 1, at most BATON_MAX_MEMBERS rows with ids > 0
	 * in increasing order, each with proto_min <= proto_max. */
	if (!baton_version_state_valid(&s->meta.versions)) {
		*why = "snapshot version state not valid";
		return BATON_ECORRUPT;
	}
	return check_config(&s->meta.config, why);
}

int baton__peer_check_msg(const struct baton_msg *m, const char **why)
{
	BATON_ASSERT(m != NULL && why != NULL);
	switch (m->type) {
	case BATON_MSG_APPEND:
		return check_entries(&m->u.append, why);
	case BATON_MSG_SNAPSHOT:
		return check_snapshot(&m->u.snapshot, why);
	case BATON_MSG_READ_INDEX_RESULT:
		if (m->u.read_index_result.status > 0) {
			*why = "read index status is not 0 or an error code";
			return BATON_ECORRUPT;
		}
		return 0;
	case BATON_MSG_VOTE:
	case BATON_MSG_VOTE_RESULT:
	case BATON_MSG_APPEND_RESULT:
	case BATON_MSG_SNAPSHOT_RESULT:
	case BATON_MSG_TIMEOUT_NOW:
	case BATON_MSG_READ_INDEX:
	case BATON_MSG_INFO:
	case BATON_MSG_INFO_RESULT:
		return 0;
	default:
		*why = "unknown Raft message type";
		return BATON_ECORRUPT;
	}
}

/* ---- splitting a stream -------------------------------------------------- */

int baton_peer_split(const uint8_t *data, size_t len, size_t *body_len)
{
	BATON_ASSERT(body_len != NULL && (data != NULL || len == 0));
	if (len < BATON_PEER_PREFIX_LEN)
		return 0;
	uint32_t n = baton_le_get_u32(data);
	if (n > BATON_PEER_FRAME_MAX)
		return BATON_ETOOBIG;
	if (len - BATON_PEER_PREFIX_LEN < n)
		return 0;
	*body_len = n;
	return 1;
}

int baton_peer_split_framed(struct baton_proto_version v, const uint8_t *data,
			    size_t len, size_t *body_len, size_t *frame_len)
{
	BATON_ASSERT(frame_len != NULL);
	size_t n = 0;
	int rv = baton_peer_split(data, len, &n);
	if (rv != 1)
		return rv;
	size_t whole = BATON_PEER_PREFIX_LEN + n;
	if (baton_peer_proto_checksummed(v)) {
		if (len - whole < BATON_PEER_CHECKSUM_LEN)
			return 0;
		/* Before anything reads the envelope, even its length's
		 * meaning: the checksum covers the prefix too. */
		if (baton__checksum(data, whole) !=
		    baton_le_get_u64(data + whole))
			return BATON_ECORRUPT;
		whole += BATON_PEER_CHECKSUM_LEN;
	}
	BATON_ASSERT(whole <= len);
	*body_len = n;
	*frame_len = whole;
	return 1;
}

int baton_peer_seal(struct baton_proto_version v, struct baton_buf *out,
		    size_t start)
{
	BATON_ASSERT(out != NULL && start <= out->len);
	if (!baton_peer_proto_checksummed(v))
		return 0;
	BATON_ASSERT(out->len - start >= BATON_PEER_PREFIX_LEN &&
		     baton_le_get_u32(out->data + start) ==
			     out->len - start - BATON_PEER_PREFIX_LEN);
	if (baton_buf_reserve(out, BATON_PEER_CHECKSUM_LEN) != 0)
		return BATON_ENOMEM;
	uint64_t sum = baton__checksum(out->data + start, out->len - start);
	baton_le_put_u64(out->data + out->len, sum);
	out->len += BATON_PEER_CHECKSUM_LEN;
	return 0;
}
