/*
 * The peer protocol codec (peer.h): struct baton_msg and the connection
 * messages to and from the protobuf Envelope of proto/peer.proto, with the
 * length-prefixed framing and every limit checked on both sides.
 *
 * Encoding builds protobuf-c structs on the stack that point at the
 * caller's data (nothing is copied twice) and packs them straight into the
 * output buffer. Decoding unpacks with an allocator whose budget is the
 * frame's size plus BATON_PEER_DECODE_SLACK, so no frame can make a node
 * allocate without bound, then checks what the core relies on and exposes
 * the result as core structs pointing into the unpacked envelope.
 */
#include "peer.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/buf.h"
#include "peer.pb-c.h"

/* What a zero-length byte field points to, so that no pointer the decoder
 * hands out is NULL (memcpy(dst, NULL, 0) is undefined behaviour). */
static uint8_t empty_bytes[1];

/* ---- version negotiation ------------------------------------------------ */

int baton_peer_choose_proto(struct baton_profile mine,
			    struct baton_profile theirs,
			    struct baton_proto_version *out)
{
	uint32_t lo = mine.proto_min.value > theirs.proto_min.value
			      ? mine.proto_min.value
			      : theirs.proto_min.value;
	uint32_t hi = mine.proto_max.value < theirs.proto_max.value
			      ? mine.proto_max.value
			      : theirs.proto_max.value;
	out->value = 0;
	if (hi == 0 || lo > hi)
		return BATON_EVERSION;
	out->value = hi;
	return 0;
}

const char *baton_peer_proto_mismatch(struct baton_profile mine,
				      struct baton_profile theirs, char *buf,
				      size_t cap)
{
	assert(buf != NULL && cap > 0);
	snprintf(buf, cap,
		 "no common peer protocol version: this node (release "
		 "%u.%u.%u) speaks %u..%u, the peer (release %u.%u.%u) "
		 "speaks %u..%u",
		 mine.release.major, mine.release.minor, mine.release.patch,
		 mine.proto_min.value, mine.proto_max.value,
		 theirs.release.major, theirs.release.minor,
		 theirs.release.patch, theirs.proto_min.value,
		 theirs.proto_max.value);
	return buf;
}

/* ---- rules shared by the encoder and the decoder ---------------------------
 * What a struct baton_msg must satisfy to travel. The encoder refuses to
 * send what the decoder would refuse to accept. Returns 0, BATON_ETOOBIG or
 * BATON_ECORRUPT, with *why set. */

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
	return check_config(&s->meta.config, why);
}

static int check_msg(const struct baton_msg *m, const char **why)
{
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
		return 0;
	default:
		*why = "unknown Raft message type";
		return BATON_ECORRUPT;
	}
}

/* A string above its limit (NULL counts as ""). */
static bool too_long(const char *s, size_t max)
{
	return s != NULL && strlen(s) > max;
}

/* ---- encoding ------------------------------------------------------------ */

/* The Envelope as one frame at the end of `out`. */
static int put_frame(const Batonpeer__Envelope *env, struct baton_buf *out)
{
	size_t size = batonpeer__envelope__get_packed_size(env);
	if (size > BATON_PEER_FRAME_MAX)
		return BATON_ETOOBIG;
	if (baton_buf_reserve(out, BATON_PEER_PREFIX_LEN + size) != 0)
		return BATON_ENOMEM;
	assert(out->cap - out->len >= BATON_PEER_PREFIX_LEN + size);
	uint8_t *p = out->data + out->len;
	uint32_t n = (uint32_t)size;
	p[0] = (uint8_t)n;
	p[1] = (uint8_t)(n >> 8);
	p[2] = (uint8_t)(n >> 16);
	p[3] = (uint8_t)(n >> 24);
	size_t packed =
		batonpeer__envelope__pack(env, p + BATON_PEER_PREFIX_LEN);
	assert(packed == size);
	out->len += BATON_PEER_PREFIX_LEN + packed;
	return 0;
}

/* protobuf-c takes non-const pointers; it only reads them when packing. */
static char *str_in(const char *s)
{
	return (char *)(s != NULL ? s : "");
}

static ProtobufCBinaryData bytes_in(const uint8_t *p, size_t len)
{
	ProtobufCBinaryData b = {len, len > 0 ? (uint8_t *)p : NULL};
	return b;
}

/* A profile and the release inside it, filled from *in. */
struct profile_pb {
	Batonpeer__Profile profile;
	Batonpeer__Release release;
};

static Batonpeer__Profile *profile_in(struct profile_pb *pb,
				      const struct baton_profile *in)
{
	batonpeer__profile__init(&pb->profile);
	batonpeer__release__init(&pb->release);
	pb->release.major = in->release.major;
	pb->release.minor = in->release.minor;
	pb->release.patch = in->release.patch;
	pb->profile.release = &pb->release;
	pb->profile.proto_min = in->proto_min.value;
	pb->profile.proto_max = in->proto_max.value;
	pb->profile.machine_max = in->machine_max.value;
	return &pb->profile;
}

/* Every body a Raft message may carry, on the encoder's stack. */
struct raft_pb {
	Batonpeer__Raft raft;
	struct profile_pb profile;
	union {
		Batonpeer__Vote vote;
		Batonpeer__VoteResult vote_result;
		Batonpeer__Append append;
		Batonpeer__AppendResult append_result;
		Batonpeer__SnapshotResult snapshot_result;
		Batonpeer__TimeoutNow timeout_now;
		Batonpeer__ReadIndex read_index;
		Batonpeer__ReadIndexResult read_index_result;
	} b;
	/* Snapshot: the message, its meta and its members. */
	Batonpeer__Snapshot snapshot;
	Batonpeer__SnapshotMeta meta;
	Batonpeer__Member members[BATON_MAX_MEMBERS];
	Batonpeer__Member *member_ptrs[BATON_MAX_MEMBERS];
	/* Append: n entries and n pointers to them, in one allocation. */
	void *entries_mem;
};

static void vote_in(struct raft_pb *pb, const struct baton_msg_vote *v)
{
	Batonpeer__Vote *o = &pb->b.vote;
	batonpeer__vote__init(o);
	o->last_log_index = v->last_log_index;
	o->last_log_term = v->last_log_term;
	o->pre_vote = v->pre_vote;
	o->leadership_transfer = v->leadership_transfer;
	o->candidate = profile_in(&pb->profile, &v->candidate);
	pb->raft.body_case = BATONPEER__RAFT__BODY_VOTE;
	pb->raft.vote = o;
}

static int append_in(struct raft_pb *pb, const struct baton_msg_append *a)
{
	Batonpeer__Append *o = &pb->b.append;
	batonpeer__append__init(o);
	o->prev_index = a->prev_index;
	o->prev_term = a->prev_term;
	o->leader_commit = a->leader_commit;
	o->heartbeat_seq = a->heartbeat_seq;
	o->leader = profile_in(&pb->profile, &a->leader);
	if (a->n_entries > 0) {
		size_t n = a->n_entries;
		pb->entries_mem = malloc(n * (sizeof(Batonpeer__Entry) +
					      sizeof(Batonpeer__Entry *)));
		if (pb->entries_mem == NULL)
			return BATON_ENOMEM;
		Batonpeer__Entry *es = pb->entries_mem;
		Batonpeer__Entry **ptrs = (Batonpeer__Entry **)(es + n);
		for (size_t i = 0; i < n; i++) {
			const struct baton_entry *e = &a->entries[i];
			batonpeer__entry__init(&es[i]);
			es[i].term = e->term;
			es[i].index = e->index;
			es[i].type = e->type;
			es[i].data = bytes_in(e->buf, e->len);
			ptrs[i] = &es[i];
		}
		o->n_entries = n;
		o->entries = ptrs;
	}
	pb->raft.body_case = BATONPEER__RAFT__BODY_APPEND;
	pb->raft.append = o;
	return 0;
}

static void snapshot_in(struct raft_pb *pb, const struct baton_msg_snapshot *s)
{
	Batonpeer__SnapshotMeta *meta = &pb->meta;
	batonpeer__snapshot_meta__init(meta);
	meta->index = s->meta.index;
	meta->term = s->meta.term;
	meta->config_index = s->meta.config_index;
	assert(s->meta.config.n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < s->meta.config.n; i++) {
		batonpeer__member__init(&pb->members[i]);
		pb->members[i].id = s->meta.config.members[i].id;
		pb->members[i].role = s->meta.config.members[i].role;
		pb->member_ptrs[i] = &pb->members[i];
	}
	meta->n_members = s->meta.config.n;
	meta->members = pb->member_ptrs;

	Batonpeer__Snapshot *o = &pb->snapshot;
	batonpeer__snapshot__init(o);
	o->meta = meta;
	o->total_len = s->total_len;
	o->offset = s->offset;
	o->chunk = bytes_in(s->chunk, s->chunk_len);
	o->last_chunk = s->last_chunk;
	pb->raft.body_case = BATONPEER__RAFT__BODY_SNAPSHOT;
	pb->raft.snapshot = o;
}

/* The small bodies: plain fields only. */
static void small_body_in(struct raft_pb *pb, const struct baton_msg *m)
{
	Batonpeer__Raft *r = &pb->raft;
	switch (m->type) {
	case BATON_MSG_VOTE_RESULT:
		batonpeer__vote_result__init(&pb->b.vote_result);
		pb->b.vote_result.pre_vote = m->u.vote_result.pre_vote;
		pb->b.vote_result.granted = m->u.vote_result.granted;
		r->body_case = BATONPEER__RAFT__BODY_VOTE_RESULT;
		r->vote_result = &pb->b.vote_result;
		break;
	case BATON_MSG_APPEND_RESULT: {
		const struct baton_msg_append_result *a = &m->u.append_result;
		Batonpeer__AppendResult *o = &pb->b.append_result;
		batonpeer__append_result__init(o);
		o->success = a->success;
		o->index = a->index;
		o->hint_index = a->hint_index;
		o->hint_term = a->hint_term;
		o->heartbeat_seq = a->heartbeat_seq;
		r->body_case = BATONPEER__RAFT__BODY_APPEND_RESULT;
		r->append_result = o;
		break;
	}
	case BATON_MSG_SNAPSHOT_RESULT: {
		const struct baton_msg_snapshot_result *s =
			&m->u.snapshot_result;
		Batonpeer__SnapshotResult *o = &pb->b.snapshot_result;
		batonpeer__snapshot_result__init(o);
		o->index = s->index;
		o->next_offset = s->next_offset;
		o->done = s->done;
		r->body_case = BATONPEER__RAFT__BODY_SNAPSHOT_RESULT;
		r->snapshot_result = o;
		break;
	}
	case BATON_MSG_TIMEOUT_NOW:
		batonpeer__timeout_now__init(&pb->b.timeout_now);
		r->body_case = BATONPEER__RAFT__BODY_TIMEOUT_NOW;
		r->timeout_now = &pb->b.timeout_now;
		break;
	case BATON_MSG_READ_INDEX:
		batonpeer__read_index__init(&pb->b.read_index);
		pb->b.read_index.request_id = m->u.read_index.request_id;
		r->body_case = BATONPEER__RAFT__BODY_READ_INDEX;
		r->read_index = &pb->b.read_index;
		break;
	case BATON_MSG_READ_INDEX_RESULT: {
		const struct baton_msg_read_index_result *s =
			&m->u.read_index_result;
		Batonpeer__ReadIndexResult *o = &pb->b.read_index_result;
		batonpeer__read_index_result__init(o);
		o->request_id = s->request_id;
		o->read_index = s->read_index;
		o->status = (int32_t)s->status;
		r->body_case = BATONPEER__RAFT__BODY_READ_INDEX_RESULT;
		r->read_index_result = o;
		break;
	}
	default:
		/* check_msg() lets through only the types handled here and
		 * in baton_peer_encode_raft(). */
		assert(false);
		break;
	}
}

int baton_peer_encode_raft(const struct baton_msg *m, struct baton_buf *out)
{
	assert(m != NULL && out != NULL);
	const char *why = NULL;
	int rv = check_msg(m, &why);
	if (rv != 0)
		return rv == BATON_ECORRUPT ? BATON_EINVAL : rv;

	struct raft_pb pb;
	pb.entries_mem = NULL;
	batonpeer__raft__init(&pb.raft);
	pb.raft.type = m->type;
	pb.raft.term = m->term;
	pb.raft.from = m->from;
	pb.raft.to = m->to;
	switch (m->type) {
	case BATON_MSG_VOTE:
		vote_in(&pb, &m->u.vote);
		break;
	case BATON_MSG_APPEND:
		rv = append_in(&pb, &m->u.append);
		break;
	case BATON_MSG_SNAPSHOT:
		snapshot_in(&pb, &m->u.snapshot);
		break;
	default:
		small_body_in(&pb, m);
		break;
	}
	if (rv == 0) {
		Batonpeer__Envelope env;
		batonpeer__envelope__init(&env);
		env.body_case = BATONPEER__ENVELOPE__BODY_RAFT;
		env.raft = &pb.raft;
		rv = put_frame(&env, out);
	}
	free(pb.entries_mem);
	return rv;
}

static int handshake_in(Batonpeer__Handshake *o, struct profile_pb *prof,
			const struct baton_peer_handshake *h)
{
	if (too_long(h->cluster_id, BATON_PEER_CLUSTER_ID_MAX) ||
	    too_long(h->peer_addr, BATON_PEER_ADDR_MAX))
		return BATON_ETOOBIG;
	batonpeer__handshake__init(o);
	o->cluster_id = str_in(h->cluster_id);
	o->node_id = h->node_id;
	o->profile = profile_in(prof, &h->profile);
	o->peer_addr = str_in(h->peer_addr);
	return 0;
}

int baton_peer_encode_handshake(const struct baton_peer_handshake *h,
				struct baton_buf *out)
{
	Batonpeer__Handshake hs;
	struct profile_pb prof;
	int rv = handshake_in(&hs, &prof, h);
	if (rv != 0)
		return rv;
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_HANDSHAKE;
	env.handshake = &hs;
	return put_frame(&env, out);
}

int baton_peer_encode_handshake_reply(
	const struct baton_peer_handshake_reply *r, struct baton_buf *out)
{
	if (r->accepted && r->proto.value == 0)
		return BATON_EINVAL;
	if (too_long(r->reason, BATON_PEER_REASON_MAX))
		return BATON_ETOOBIG;
	Batonpeer__Handshake self;
	struct profile_pb prof;
	int rv = handshake_in(&self, &prof, &r->self);
	if (rv != 0)
		return rv;
	Batonpeer__HandshakeReply o;
	batonpeer__handshake_reply__init(&o);
	o.accepted = r->accepted;
	o.proto = r->proto.value;
	o.reason = str_in(r->reason);
	o.self = &self;
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_HANDSHAKE_REPLY;
	env.handshake_reply = &o;
	return put_frame(&env, out);
}

int baton_peer_encode_forward(uint64_t request_id, int argc,
			      const uint8_t *const *argv, const size_t *lens,
			      struct baton_buf *out)
{
	if (argc < 1 || argv == NULL || lens == NULL)
		return BATON_EINVAL;
	if ((unsigned)argc > BATON_PEER_FORWARD_ARGS_MAX)
		return BATON_ETOOBIG;
	size_t n = (size_t)argc;
	for (size_t i = 0; i < n; i++) {
		if (lens[i] > BATON_PEER_FRAME_MAX)
			return BATON_ETOOBIG;
		if (lens[i] > 0 && argv[i] == NULL)
			return BATON_EINVAL;
	}
	ProtobufCBinaryData *args = malloc(n * sizeof *args);
	if (args == NULL)
		return BATON_ENOMEM;
	for (size_t i = 0; i < n; i++)
		args[i] = bytes_in(argv[i], lens[i]);
	Batonpeer__Forward o;
	batonpeer__forward__init(&o);
	o.request_id = request_id;
	o.n_argv = n;
	o.argv = args;
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_FORWARD;
	env.forward = &o;
	int rv = put_frame(&env, out);
	free(args);
	return rv;
}

int baton_peer_encode_forward_reply(const struct baton_peer_forward_reply *r,
				    struct baton_buf *out)
{
	Batonpeer__ForwardReply o;
	batonpeer__forward_reply__init(&o);
	o.request_id = r->request_id;
	if (r->error != NULL) {
		if (too_long(r->error, BATON_PEER_ERROR_MAX))
			return BATON_ETOOBIG;
		o.result_case = BATONPEER__FORWARD_REPLY__RESULT_ERROR;
		o.error = str_in(r->error);
	} else {
		if (r->resp_len > 0 && r->resp_reply == NULL)
			return BATON_EINVAL;
		if (r->resp_len > BATON_PEER_FRAME_MAX)
			return BATON_ETOOBIG;
		o.result_case = BATONPEER__FORWARD_REPLY__RESULT_RESP_REPLY;
		o.resp_reply = bytes_in(r->resp_reply, r->resp_len);
	}
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_FORWARD_REPLY;
	env.forward_reply = &o;
	return put_frame(&env, out);
}

/* ---- splitting a stream -------------------------------------------------- */

int baton_peer_split(const uint8_t *data, size_t len, size_t *body_len)
{
	assert(body_len != NULL && (data != NULL || len == 0));
	if (len < BATON_PEER_PREFIX_LEN)
		return 0;
	uint32_t n = (uint32_t)data[0] | (uint32_t)data[1] << 8 |
		     (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
	if (n > BATON_PEER_FRAME_MAX)
		return BATON_ETOOBIG;
	if (len - BATON_PEER_PREFIX_LEN < n)
		return 0;
	*body_len = n;
	return 1;
}

/* ---- decoding ------------------------------------------------------------ */

/* The allocator protobuf-c unpacks with: a budget for the whole decode. */
struct budget {
	size_t left;
	bool exceeded; /* the budget ran out */
	bool failed;   /* malloc itself failed */
};

/* Each allocation also costs the allocator's own bookkeeping. */
#define ALLOC_OVERHEAD 16u

static void *budget_alloc(void *data, size_t size)
{
	struct budget *b = data;
	if (size > b->left || b->left - size < ALLOC_OVERHEAD) {
		b->exceeded = true;
		return NULL;
	}
	b->left -= size + ALLOC_OVERHEAD;
	void *p = malloc(size > 0 ? size : 1);
	if (p == NULL)
		b->failed = true;
	return p;
}

static void plain_free(void *data, void *p)
{
	(void)data;
	free(p);
}

static ProtobufCAllocator free_only = {NULL, plain_free, NULL};

/* A missing release reads as 0.0.0; false when a part does not fit. */
static bool release_out(const Batonpeer__Release *r, struct baton_release *out)
{
	memset(out, 0, sizeof *out);
	if (r == NULL)
		return true;
	if (r->major > UINT16_MAX || r->minor > UINT16_MAX ||
	    r->patch > UINT16_MAX)
		return false;
	out->major = (uint16_t)r->major;
	out->minor = (uint16_t)r->minor;
	out->patch = (uint16_t)r->patch;
	return true;
}

/* A missing profile reads as zeros (proto3: absent means default). */
static int profile_out(const Batonpeer__Profile *p, struct baton_profile *out,
		       const char **why)
{
	memset(out, 0, sizeof *out);
	if (p == NULL)
		return 0;
	if (!release_out(p->release, &out->release)) {
		*why = "release part above 65535";
		return BATON_ECORRUPT;
	}
	out->proto_min.value = p->proto_min;
	out->proto_max.value = p->proto_max;
	out->machine_max.value = p->machine_max;
	return 0;
}

static int string_out(const char *s, size_t max, const char **out,
		      const char *what, const char **why)
{
	if (s == NULL)
		s = "";
	if (strlen(s) > max) {
		*why = what;
		return BATON_ETOOBIG;
	}
	*out = s;
	return 0;
}

static const uint8_t *bytes_out(ProtobufCBinaryData b)
{
	return b.len > 0 ? b.data : empty_bytes;
}

static int handshake_out(const Batonpeer__Handshake *h,
			 struct baton_peer_handshake *out, const char **why)
{
	Batonpeer__Handshake none;
	if (h == NULL) {
		batonpeer__handshake__init(&none);
		h = &none;
	}
	out->node_id = h->node_id;
	int rv =
		string_out(h->cluster_id, BATON_PEER_CLUSTER_ID_MAX,
			   &out->cluster_id, "cluster id above the limit", why);
	if (rv == 0)
		rv = string_out(h->peer_addr, BATON_PEER_ADDR_MAX,
				&out->peer_addr, "address above the limit",
				why);
	if (rv == 0)
		rv = profile_out(h->profile, &out->profile, why);
	return rv;
}

static int handshake_reply_out(const Batonpeer__HandshakeReply *r,
			       struct baton_peer_handshake_reply *out,
			       const char **why)
{
	out->accepted = r->accepted;
	out->proto.value = r->proto;
	if (r->accepted && r->proto == 0) {
		*why = "handshake accepted without a protocol version";
		return BATON_ECORRUPT;
	}
	int rv = string_out(r->reason, BATON_PEER_REASON_MAX, &out->reason,
			    "refusal reason above the limit", why);
	if (rv == 0)
		rv = handshake_out(r->self, &out->self, why);
	return rv;
}

static int entries_out(const Batonpeer__Append *a, struct baton_msg_append *out,
		       struct baton_peer_frame *f, const char **why)
{
	out->n_entries = 0;
	out->entries = NULL;
	if (a->n_entries == 0)
		return 0;
	if (a->n_entries > BATON_PEER_ENTRIES_MAX) {
		*why = "too many entries in one append";
		return BATON_ETOOBIG;
	}
	struct baton_entry *es = calloc(a->n_entries, sizeof *es);
	if (es == NULL) {
		*why = "out of memory";
		return BATON_ENOMEM;
	}
	f->owned_arrays = es;
	for (size_t i = 0; i < a->n_entries; i++) {
		const Batonpeer__Entry *e = a->entries[i];
		if (e == NULL) {
			*why = "entry missing";
			return BATON_ECORRUPT;
		}
		if (e->data.len > BATON_PEER_ENTRY_BYTES_MAX) {
			*why = "entry data above the limit";
			return BATON_ETOOBIG;
		}
		es[i].term = e->term;
		es[i].index = e->index;
		es[i].type = e->type;
		es[i].len = (uint32_t)e->data.len;
		es[i].buf = (uint8_t *)bytes_out(e->data);
	}
	out->n_entries = (uint32_t)a->n_entries;
	out->entries = es;
	return 0;
}

static int snapshot_out(const Batonpeer__Snapshot *s,
			struct baton_msg_snapshot *out, const char **why)
{
	const Batonpeer__SnapshotMeta *meta = s->meta;
	if (meta != NULL) {
		if (meta->n_members > BATON_MAX_MEMBERS) {
			*why = "more members than BATON_MAX_MEMBERS";
			return BATON_ECORRUPT;
		}
		out->meta.index = meta->index;
		out->meta.term = meta->term;
		out->meta.config_index = meta->config_index;
		out->meta.config.n = (uint32_t)meta->n_members;
		for (size_t i = 0; i < meta->n_members; i++) {
			const Batonpeer__Member *m = meta->members[i];
			if (m == NULL) {
				*why = "member missing";
				return BATON_ECORRUPT;
			}
			out->meta.config.members[i].id = m->id;
			out->meta.config.members[i].role = m->role;
		}
	}
	if (s->chunk.len > BATON_PEER_CHUNK_MAX) {
		*why = "snapshot chunk above the limit";
		return BATON_ETOOBIG;
	}
	out->total_len = s->total_len;
	out->offset = s->offset;
	out->chunk_len = (uint32_t)s->chunk.len;
	out->chunk = bytes_out(s->chunk);
	out->last_chunk = s->last_chunk;
	return 0;
}

/* The body a Raft message of a known type must carry. */
static Batonpeer__Raft__BodyCase body_for_type(uint32_t type)
{
	switch (type) {
	case BATON_MSG_VOTE:
		return BATONPEER__RAFT__BODY_VOTE;
	case BATON_MSG_VOTE_RESULT:
		return BATONPEER__RAFT__BODY_VOTE_RESULT;
	case BATON_MSG_APPEND:
		return BATONPEER__RAFT__BODY_APPEND;
	case BATON_MSG_APPEND_RESULT:
		return BATONPEER__RAFT__BODY_APPEND_RESULT;
	case BATON_MSG_SNAPSHOT:
		return BATONPEER__RAFT__BODY_SNAPSHOT;
	case BATON_MSG_SNAPSHOT_RESULT:
		return BATONPEER__RAFT__BODY_SNAPSHOT_RESULT;
	case BATON_MSG_TIMEOUT_NOW:
		return BATONPEER__RAFT__BODY_TIMEOUT_NOW;
	case BATON_MSG_READ_INDEX:
		return BATONPEER__RAFT__BODY_READ_INDEX;
	case BATON_MSG_READ_INDEX_RESULT:
		return BATONPEER__RAFT__BODY_READ_INDEX_RESULT;
	default:
		return BATONPEER__RAFT__BODY__NOT_SET;
	}
}

static int raft_body_out(const Batonpeer__Raft *r, struct baton_msg *m,
			 struct baton_peer_frame *f, const char **why)
{
	switch (r->type) {
	case BATON_MSG_VOTE: {
		const Batonpeer__Vote *v = r->vote;
		m->u.vote.last_log_index = v->last_log_index;
		m->u.vote.last_log_term = v->last_log_term;
		m->u.vote.pre_vote = v->pre_vote;
		m->u.vote.leadership_transfer = v->leadership_transfer;
		return profile_out(v->candidate, &m->u.vote.candidate, why);
	}
	case BATON_MSG_VOTE_RESULT:
		m->u.vote_result.pre_vote = r->vote_result->pre_vote;
		m->u.vote_result.granted = r->vote_result->granted;
		return 0;
	case BATON_MSG_APPEND: {
		const Batonpeer__Append *a = r->append;
		m->u.append.prev_index = a->prev_index;
		m->u.append.prev_term = a->prev_term;
		m->u.append.leader_commit = a->leader_commit;
		m->u.append.heartbeat_seq = a->heartbeat_seq;
		int rv = profile_out(a->leader, &m->u.append.leader, why);
		return rv != 0 ? rv : entries_out(a, &m->u.append, f, why);
	}
	case BATON_MSG_APPEND_RESULT: {
		const Batonpeer__AppendResult *a = r->append_result;
		m->u.append_result.success = a->success;
		m->u.append_result.index = a->index;
		m->u.append_result.hint_index = a->hint_index;
		m->u.append_result.hint_term = a->hint_term;
		m->u.append_result.heartbeat_seq = a->heartbeat_seq;
		return 0;
	}
	case BATON_MSG_SNAPSHOT:
		return snapshot_out(r->snapshot, &m->u.snapshot, why);
	case BATON_MSG_SNAPSHOT_RESULT:
		m->u.snapshot_result.index = r->snapshot_result->index;
		m->u.snapshot_result.next_offset =
			r->snapshot_result->next_offset;
		m->u.snapshot_result.done = r->snapshot_result->done;
		return 0;
	case BATON_MSG_TIMEOUT_NOW:
		return 0;
	case BATON_MSG_READ_INDEX:
		m->u.read_index.request_id = r->read_index->request_id;
		return 0;
	case BATON_MSG_READ_INDEX_RESULT:
		m->u.read_index_result.request_id =
			r->read_index_result->request_id;
		m->u.read_index_result.read_index =
			r->read_index_result->read_index;
		m->u.read_index_result.status = r->read_index_result->status;
		return 0;
	default:
		assert(false); /* raft_out() checked the type */
		return BATON_ECORRUPT;
	}
}

static int raft_out(const Batonpeer__Raft *r, struct baton_peer_frame *f,
		    const char **why)
{
	if (r->type == 0) {
		*why = "Raft message without a type";
		return BATON_ECORRUPT;
	}
	Batonpeer__Raft__BodyCase want = body_for_type(r->type);
	if (want == BATONPEER__RAFT__BODY__NOT_SET) {
		/* A message type of a newer release. */
		f->kind = BATON_PEER_UNKNOWN;
		f->unknown.body = BATONPEER__ENVELOPE__BODY_RAFT;
		f->unknown.raft_type = r->type;
		return 0;
	}
	/* Every body member is a pointer in one union: check any one. */
	if (r->body_case != want || r->vote == NULL) {
		*why = "Raft message body does not match its type";
		return BATON_ECORRUPT;
	}
	f->kind = BATON_PEER_RAFT;
	struct baton_msg *m = &f->raft;
	memset(m, 0, sizeof *m);
	m->type = r->type;
	m->term = r->term;
	m->from = r->from;
	m->to = r->to;
	int rv = raft_body_out(r, m, f, why);
	if (rv == 0)
		rv = check_msg(m, why);
	return rv;
}

static int forward_out(const Batonpeer__Forward *fw, struct baton_peer_frame *f,
		       const char **why)
{
	if (fw->n_argv == 0) {
		*why = "forwarded command without arguments";
		return BATON_ECORRUPT;
	}
	if (fw->n_argv > BATON_PEER_FORWARD_ARGS_MAX) {
		*why = "forwarded command with too many arguments";
		return BATON_ETOOBIG;
	}
	size_t n = fw->n_argv;
	_Static_assert(_Alignof(const uint8_t *) <= _Alignof(size_t),
		       "argv follows lens in one allocation");
	size_t *lens = malloc(n * (sizeof(size_t) + sizeof(const uint8_t *)));
	if (lens == NULL) {
		*why = "out of memory";
		return BATON_ENOMEM;
	}
	f->owned_arrays = lens;
	const uint8_t **argv = (const uint8_t **)(void *)(lens + n);
	for (size_t i = 0; i < n; i++) {
		lens[i] = fw->argv[i].len;
		argv[i] = bytes_out(fw->argv[i]);
	}
	f->kind = BATON_PEER_FORWARD;
	f->forward.request_id = fw->request_id;
	f->forward.argc = (int)n;
	f->forward.argv = argv;
	f->forward.lens = lens;
	return 0;
}

static int forward_reply_out(const Batonpeer__ForwardReply *r,
			     struct baton_peer_forward_reply *out,
			     const char **why)
{
	out->request_id = r->request_id;
	switch (r->result_case) {
	case BATONPEER__FORWARD_REPLY__RESULT_RESP_REPLY:
		out->resp_reply = bytes_out(r->resp_reply);
		out->resp_len = r->resp_reply.len;
		out->error = NULL;
		return 0;
	case BATONPEER__FORWARD_REPLY__RESULT_ERROR:
		out->resp_reply = NULL;
		out->resp_len = 0;
		return string_out(r->error, BATON_PEER_ERROR_MAX, &out->error,
				  "forward error text above the limit", why);
	default:
		*why = "forward reply without a result";
		return BATON_ECORRUPT;
	}
}

static int envelope_out(const Batonpeer__Envelope *env,
			struct baton_peer_frame *f, const char **why)
{
	/* Every body member is a pointer in one union. */
	if (env->body_case != BATONPEER__ENVELOPE__BODY__NOT_SET &&
	    env->raft == NULL) {
		*why = "envelope body missing";
		return BATON_ECORRUPT;
	}
	switch (env->body_case) {
	case BATONPEER__ENVELOPE__BODY_HANDSHAKE:
		f->kind = BATON_PEER_HANDSHAKE;
		return handshake_out(env->handshake, &f->handshake, why);
	case BATONPEER__ENVELOPE__BODY_HANDSHAKE_REPLY:
		f->kind = BATON_PEER_HANDSHAKE_REPLY;
		return handshake_reply_out(env->handshake_reply,
					   &f->handshake_reply, why);
	case BATONPEER__ENVELOPE__BODY_RAFT:
		return raft_out(env->raft, f, why);
	case BATONPEER__ENVELOPE__BODY_FORWARD:
		return forward_out(env->forward, f, why);
	case BATONPEER__ENVELOPE__BODY_FORWARD_REPLY:
		f->kind = BATON_PEER_FORWARD_REPLY;
		return forward_reply_out(env->forward_reply, &f->forward_reply,
					 why);
	default:
		break;
	}
	/* No body this release knows. A body from a newer release shows up
	 * as an unknown field; an envelope with nothing at all is garbage. */
	if (env->base.n_unknown_fields == 0) {
		*why = "envelope without a body";
		return BATON_ECORRUPT;
	}
	f->kind = BATON_PEER_UNKNOWN;
	f->unknown.body = env->base.unknown_fields[0].tag;
	f->unknown.raft_type = 0;
	return 0;
}

int baton_peer_decode(const uint8_t *body, size_t len,
		      struct baton_peer_frame *out)
{
	assert(out != NULL);
	memset(out, 0, sizeof *out);
	if (len > BATON_PEER_FRAME_MAX) {
		out->why = "frame above BATON_PEER_FRAME_MAX";
		return BATON_ETOOBIG;
	}
	assert(body != NULL || len == 0);
	struct budget b = {len + BATON_PEER_DECODE_SLACK, false, false};
	ProtobufCAllocator alloc = {budget_alloc, plain_free, &b};
	Batonpeer__Envelope *env =
		batonpeer__envelope__unpack(&alloc, len, body);
	if (env == NULL) {
		if (b.failed) {
			out->why = "out of memory";
			return BATON_ENOMEM;
		}
		if (b.exceeded) {
			out->why = "frame needs more memory than allowed";
			return BATON_ETOOBIG;
		}
		out->why = "not a valid envelope";
		return BATON_ECORRUPT;
	}
	out->owned_envelope = env;
	const char *why = NULL;
	int rv = envelope_out(env, out, &why);
	if (rv != 0) {
		baton_peer_frame_free(out);
		assert(why != NULL);
		out->why = why;
		return rv;
	}
	return 0;
}

void baton_peer_frame_free(struct baton_peer_frame *f)
{
	if (f == NULL)
		return;
	if (f->owned_envelope != NULL)
		batonpeer__envelope__free_unpacked(f->owned_envelope,
						   &free_only);
	free(f->owned_arrays);
	memset(f, 0, sizeof *f);
}
