/*
 * Seeded fuzzing of the peer codec: random bytes, random mutations of
 * valid frames, and random Raft messages through the encoder. Nothing may
 * crash (these tests run under ASan and UBSan in CI), and whatever the
 * decoder accepts must encode again and decode to the same thing.
 *
 * The seed comes from BATON_FUZZ_SEED (default fixed, so runs repeat) and
 * the iteration count from BATON_FUZZ_ITERS; every failure names the seed
 * and the iteration.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "peer_fixtures.h"

struct rng {
	uint64_t s;
};

static uint64_t next(struct rng *r)
{
	/* splitmix64 */
	uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static uint32_t below(struct rng *r, uint32_t n)
{
	return (uint32_t)(next(r) % n);
}

/* Values that find edge cases more often than uniform ones. */
static uint64_t interesting(struct rng *r)
{
	switch (below(r, 6)) {
	case 0:
		return 0;
	case 1:
		return below(r, 20);
	case 2:
		return UINT64_MAX - below(r, 3);
	case 3:
		return (uint64_t)1 << below(r, 64);
	default:
		return next(r);
	}
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);
	return s != NULL ? strtoull(s, NULL, 0) : dflt;
}

static uint64_t seed(void)
{
	return env_u64("BATON_FUZZ_SEED", 20240611);
}

static uint32_t iters(uint32_t dflt)
{
	return (uint32_t)env_u64("BATON_FUZZ_ITERS", dflt);
}

/* Decode exactly (data, len) from a copy of that size, so any overread is
 * caught; whatever decodes must survive encode -> decode unchanged. */
static bool check_decode(const uint8_t *data, size_t len, uint64_t s,
			 uint32_t it)
{
	uint8_t *copy = malloc(len > 0 ? len : 1);
	cr_assert_not_null(copy);
	if (len > 0)
		memcpy(copy, data, len);
	struct baton_peer_frame f;
	int rv = baton_peer_decode(FIX_P1, copy, len, &f);
	free(copy); /* the frame must not point into its input */
	if (rv != 0) {
		cr_assert(rv == BATON_ECORRUPT || rv == BATON_ETOOBIG,
			  "seed %" PRIu64 " iteration %u: code %d", s, it, rv);
		cr_assert_not_null(f.why);
		return false;
	}
	cr_assert_leq(f.kind, BATON_PEER_JOIN_REPLY);
	if (f.kind != BATON_PEER_UNKNOWN) {
		struct baton_buf b;
		baton_buf_init(&b);
		rv = fix_encode_frame(&f, &b);
		cr_assert_eq(rv, 0,
			     "seed %" PRIu64 " iteration %u: a decoded frame "
			     "of kind %u does not encode (%d)",
			     s, it, f.kind, rv);
		struct baton_peer_frame g;
		cr_assert_eq(fix_decode_one(b.data, b.len, &g), 0,
			     "seed %" PRIu64 " iteration %u", s, it);
		const char *diff = NULL;
		cr_assert(fix_frame_eq(&f, &g, &diff),
			  "seed %" PRIu64 " iteration %u: %s", s, it, diff);
		baton_peer_frame_free(&g);
		baton_buf_free(&b);
	}
	baton_peer_frame_free(&f);
	return true;
}

Test(peer_fuzz, random_bytes)
{
	uint64_t s = seed();
	struct rng r = {s};
	uint8_t buf[512];
	uint32_t n = iters(100000);
	for (uint32_t it = 0; it < n; it++) {
		size_t len = below(&r, sizeof buf + 1);
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)next(&r);
		/* Often start like an envelope body, to get past byte 0. */
		if (len > 0 && below(&r, 2) == 0)
			buf[0] = (uint8_t)((1 + below(&r, 6)) << 3 | 2);
		(void)check_decode(buf, len, s, it);
		size_t body = 0;
		int rv = baton_peer_split(buf, len, &body);
		cr_assert(rv == 0 || rv == 1 || rv == BATON_ETOOBIG);
		if (rv == 1)
			cr_assert_leq(body + BATON_PEER_PREFIX_LEN, len);
	}
}

/* One random change to the bytes in b. */
static void mutate(struct rng *r, struct baton_buf *b,
		   const struct baton_buf *other)
{
	size_t n = b->len;
	size_t at = n > 0 ? below(r, (uint32_t)n) : 0;
	switch (below(r, 8)) {
	case 0: /* flip a bit */
		if (n > 0)
			b->data[at] ^= (uint8_t)(1u << below(r, 8));
		break;
	case 1: /* a random byte */
		if (n > 0)
			b->data[at] = (uint8_t)next(r);
		break;
	case 2: { /* an interesting byte */
		static const uint8_t v[] = {0,	  1,	0x7f, 0x80,
					    0xff, 0x0a, 0x12, 0x1a};
		if (n > 0)
			b->data[at] = v[below(r, sizeof v)];
		break;
	}
	case 3: /* truncate */
		b->len = at;
		break;
	case 4: /* delete a byte */
		if (n > 0) {
			memmove(b->data + at, b->data + at + 1, n - at - 1);
			b->len--;
		}
		break;
	case 5: { /* insert a byte */
		uint8_t x = (uint8_t)next(r);
		cr_assert_eq(baton_buf_append(b, &x, 1), 0);
		memmove(b->data + at + 1, b->data + at, n - at);
		b->data[at] = x;
		break;
	}
	case 6: { /* duplicate a slice at the end */
		if (n == 0)
			break;
		size_t len = below(r, (uint32_t)(n - at)) + 1;
		uint8_t tmp[64];
		len = len > sizeof tmp ? sizeof tmp : len;
		memcpy(tmp, b->data + at, len);
		cr_assert_eq(baton_buf_append(b, tmp, len), 0);
		break;
	}
	default: { /* splice in part of another frame */
		if (other->len == 0)
			break;
		size_t from = below(r, (uint32_t)other->len);
		size_t len = other->len - from;
		b->len = at;
		cr_assert_eq(baton_buf_append(b, other->data + from, len), 0);
		break;
	}
	}
}

Test(peer_fuzz, mutated_frames)
{
	uint64_t s = seed();
	struct rng r = {s ^ 0x6d757461u};
	struct baton_buf samples[FIX_N_FRAMES];
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		baton_buf_init(&samples[i]);
		fix_encode_sample(i, &samples[i]);
	}
	struct baton_buf b;
	baton_buf_init(&b);
	uint32_t n = iters(100000);
	uint32_t accepted = 0;
	for (uint32_t it = 0; it < n; it++) {
		const struct baton_buf *base =
			&samples[below(&r, FIX_N_FRAMES)];
		const struct baton_buf *other =
			&samples[below(&r, FIX_N_FRAMES)];
		baton_buf_reset(&b);
		/* The envelope, without its prefix. */
		cr_assert_eq(
			baton_buf_append(&b, base->data + BATON_PEER_PREFIX_LEN,
					 base->len - BATON_PEER_PREFIX_LEN),
			0);
		uint32_t k = below(&r, 2) == 0 ? 1 : 2 + below(&r, 4);
		for (uint32_t j = 0; j < k; j++)
			mutate(&r, &b, other);
		accepted += check_decode(b.data, b.len, s, it);
	}
	/* Enough mutants must still decode for the re-encode check to
	 * matter, and enough must fail for the error paths to. */
	cr_log_info("seed %" PRIu64 ": %u of %u mutants decoded", s, accepted,
		    n);
	if (n >= 1000) {
		cr_assert_gt(accepted, n / 20, "%u of %u decoded", accepted, n);
		cr_assert_lt(accepted, n - n / 20, "%u of %u decoded", accepted,
			     n);
	}
	baton_buf_free(&b);
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++)
		baton_buf_free(&samples[i]);
}

/* A random version state, mostly valid: the initial one, or a table with
 * now and then a zero, repeated or descending id, an empty range or a
 * machine version of 0. */
static void random_versions(struct rng *r, struct baton_version_state *v)
{
	baton_version_state_initial(v);
	if (below(r, 3) == 0)
		return;
	v->machine.value =
		below(r, 20) == 0 ? (uint32_t)interesting(r) : 1 + below(r, 5);
	v->floor.major = (uint16_t)below(r, 3);
	v->floor.minor = (uint16_t)interesting(r);
	v->floor.patch = (uint16_t)below(r, 10);
	v->n = below(r, 20) == 0 ? below(r, BATON_MAX_MEMBERS + 2)
				 : below(r, 5);
	for (uint32_t i = 0; i < BATON_MAX_MEMBERS; i++) {
		struct baton_member_versions *m = &v->members[i];
		m->id = below(r, 30) == 0 ? below(r, 3) : 10 * (i + 1);
		m->profile.release.major = (uint16_t)interesting(r);
		m->profile.release.patch = (uint16_t)below(r, 4);
		m->profile.proto_min.value = below(r, 3);
		m->profile.proto_max.value =
			below(r, 30) == 0
				? (uint32_t)interesting(r)
				: m->profile.proto_min.value + below(r, 3);
		m->profile.machine_max.value = (uint32_t)interesting(r);
	}
}

/* A random Raft message, mostly valid. `es` holds up to 8 entries. */
static void random_msg(struct rng *r, struct baton_msg *m,
		       struct baton_entry *es, uint8_t *data, size_t data_len)
{
	memset(m, 0, sizeof *m);
	m->type =
		below(r, 20) == 0 ? (uint32_t)interesting(r) : 1 + below(r, 9);
	m->term = interesting(r);
	m->from = interesting(r);
	m->to = interesting(r);
	switch (m->type) {
	case BATON_MSG_VOTE:
		m->u.vote.last_log_index = interesting(r);
		m->u.vote.last_log_term = interesting(r);
		m->u.vote.pre_vote = below(r, 2);
		m->u.vote.leadership_transfer = below(r, 2);
		m->u.vote.candidate.release.major = (uint16_t)next(r);
		m->u.vote.candidate.proto_max.value = (uint32_t)interesting(r);
		break;
	case BATON_MSG_APPEND: {
		struct baton_msg_append *a = &m->u.append;
		a->prev_index = below(r, 4) == 0 ? interesting(r) : below(r, 9);
		a->prev_term = interesting(r);
		a->leader_commit = interesting(r);
		a->heartbeat_seq = interesting(r);
		a->n_entries = below(r, 9);
		a->entries = es;
		for (uint32_t i = 0; i < a->n_entries; i++) {
			es[i].term = interesting(r);
			es[i].index = below(r, 10) == 0 ? interesting(r)
							: a->prev_index + 1 + i;
			es[i].type = (uint32_t)interesting(r);
			es[i].len = below(r, (uint32_t)data_len + 1);
			es[i].buf = below(r, 20) == 0 ? NULL : data;
		}
		a->leader.machine_max.value = (uint32_t)interesting(r);
		break;
	}
	case BATON_MSG_SNAPSHOT: {
		struct baton_msg_snapshot *sn = &m->u.snapshot;
		sn->meta.index = interesting(r);
		sn->meta.term = interesting(r);
		sn->meta.config_index = interesting(r);
		sn->meta.config.n = below(r, BATON_MAX_MEMBERS + 2);
		for (uint32_t i = 0; i < BATON_MAX_MEMBERS; i++) {
			sn->meta.config.members[i].id =
				below(r, 10) == 0 ? below(r, 4) : i + 1;
			sn->meta.config.members[i].role =
				below(r, 10) == 0 ? below(r, 4)
						  : 1 + below(r, 2);
		}
		random_versions(r, &sn->meta.versions);
		sn->meta.versions_index = interesting(r);
		sn->total_len =
			below(r, 3) == 0 ? interesting(r) : below(r, 200);
		sn->offset = below(r, 3) == 0 ? interesting(r) : below(r, 100);
		sn->chunk_len = below(r, (uint32_t)data_len + 1);
		sn->chunk = below(r, 20) == 0 ? NULL : data;
		sn->last_chunk = below(r, 2);
		break;
	}
	case BATON_MSG_READ_INDEX_RESULT:
		m->u.read_index_result.request_id = interesting(r);
		m->u.read_index_result.read_index = interesting(r);
		m->u.read_index_result.status = (int)(int32_t)interesting(r);
		break;
	default:
		/* The small bodies: raw random bytes of the union, up to
		 * AppendResult's clock sample, which travels from protocol 4
		 * on only (this test encodes in 1). */
		for (size_t i = 0;
		     i < offsetof(struct baton_msg_append_result, clock); i++)
			((uint8_t *)&m->u)[i] = (uint8_t)next(r);
		m->u.vote_result.pre_vote = below(r, 2);
		m->u.vote_result.granted = below(r, 2);
		if (m->type == BATON_MSG_APPEND_RESULT)
			m->u.append_result.success = below(r, 2);
		if (m->type == BATON_MSG_SNAPSHOT_RESULT)
			m->u.snapshot_result.done = below(r, 2);
		break;
	}
}

Test(peer_fuzz, random_messages_encode_or_refuse)
{
	uint64_t s = seed();
	struct rng r = {s ^ 0x72616674u};
	struct baton_entry es[8];
	uint8_t data[100];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(i * 13);
	struct baton_buf b;
	baton_buf_init(&b);
	uint32_t n = iters(100000);
	uint32_t accepted = 0;
	for (uint32_t it = 0; it < n; it++) {
		struct baton_msg m;
		random_msg(&r, &m, es, data, sizeof data);
		baton_buf_reset(&b);
		int rv = baton_peer_encode_raft(FIX_P1, &m, &b);
		if (rv != 0) {
			cr_assert(rv == BATON_EINVAL || rv == BATON_ETOOBIG,
				  "seed %" PRIu64 " iteration %u: %d", s, it,
				  rv);
			cr_assert_eq(b.len, 0);
			continue;
		}
		accepted++;
		struct baton_peer_frame f;
		rv = fix_decode_one(b.data, b.len, &f);
		cr_assert_eq(rv, 0,
			     "seed %" PRIu64 " iteration %u: encoded but "
			     "refused: %s",
			     s, it, f.why);
		const char *diff = NULL;
		cr_assert(fix_msg_eq(&m, &f.raft, &diff),
			  "seed %" PRIu64 " iteration %u: %s", s, it, diff);
		baton_peer_frame_free(&f);
	}
	cr_log_info("seed %" PRIu64 ": %u of %u random messages encoded", s,
		    accepted, n);
	/* The generator must mostly make valid messages to be useful. */
	if (n >= 1000)
		cr_assert_gt(accepted, n / 2, "only %u of %u accepted",
			     accepted, n);
	baton_buf_free(&b);
}
