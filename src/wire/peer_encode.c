/*
 * The peer codec's encoders (peer.h): struct baton_msg and the connection
 * messages into the protobuf Envelope of proto/peer.proto, one framed
 * envelope appended to a buffer.
 *
 * Encoding builds protobuf-c structs on the stack that point at the
 * caller's data (nothing is copied twice) and packs them straight into the
 * output buffer. What the decoder would refuse is refused here first
 * (baton__peer_check_msg), so a node never sends a frame its peer drops.
 */
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "baton/buf.h"
#include "le.h"
#include "peer.pb-c.h"
#include "peer_internal.h"

/* The Envelope with its length prefix at the end of `out`. */
static int put_plain_frame(const Batonpeer__Envelope *env,
			   struct baton_buf *out)
{
	size_t size = batonpeer__envelope__get_packed_size(env);
	if (size > BATON_PEER_FRAME_MAX)
		return BATON_ETOOBIG;
	if (baton_buf_reserve(out, BATON_PEER_PREFIX_LEN + size) != 0)
		return BATON_ENOMEM;
	BATON_ASSERT(out->cap - out->len >= BATON_PEER_PREFIX_LEN + size);
	uint8_t *p = out->data + out->len;
	baton_le_put_u32(p, (uint32_t)size);
	size_t packed =
		batonpeer__envelope__pack(env, p + BATON_PEER_PREFIX_LEN);
	BATON_ASSERT(packed == size);
	out->len += BATON_PEER_PREFIX_LEN + packed;
	return 0;
}

/* The version the frozen handshake frames are framed in: none. */
#define FROZEN ((struct baton_proto_version){0})

/* The Envelope as one frame at the end of `out`, in the envelope of
 * version v (0: a frozen handshake frame, never checksummed). */
static int put_frame(struct baton_proto_version v,
		     const Batonpeer__Envelope *env, struct baton_buf *out)
{
	size_t start = out->len;
	int rv = put_plain_frame(env, out);
	if (rv == 0 && baton_peer_seal(v, out, start) != 0) {
		out->len = start;
		rv = BATON_ENOMEM;
	}
	return rv;
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

/* A string above its limit (NULL counts as ""). */
static bool too_long(const char *s, size_t max)
{
	return s != NULL && strlen(s) > max;
}

static Batonpeer__Release *release_in(Batonpeer__Release *pb,
				      struct baton_release r)
{
	batonpeer__release__init(pb);
	pb->major = r.major;
	pb->minor = r.minor;
	pb->patch = r.patch;
	return pb;
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
	pb->profile.release = release_in(&pb->release, in->release);
	pb->profile.proto_min = in->proto_min.value;
	pb->profile.proto_max = in->proto_max.value;
	pb->profile.machine_max = in->machine_max.value;
	return &pb->profile;
}

/* A version state (the version table included) on the encoder's stack. */
struct versions_pb {
	Batonpeer__VersionState state;
	Batonpeer__Release floor;
	Batonpeer__Downgrade downgrade;
	Batonpeer__Release target, prev_floor;
	Batonpeer__MemberVersions rows[BATON_MAX_MEMBERS];
	Batonpeer__MemberVersions *row_ptrs[BATON_MAX_MEMBERS];
	struct profile_pb profiles[BATON_MAX_MEMBERS];
};

/* Whether s is what a log without version entries holds: then nothing is
 * sent, as a release before the version state sent nothing. */
static bool release_none(struct baton_release r)
{
	return r.major == 0 && r.minor == 0 && r.patch == 0;
}

static bool versions_initial(const struct baton_version_state *s)
{
	return s->machine.value == 1 && s->n == 0 && release_none(s->floor) &&
	       release_none(s->downgrade.target) && !s->held;
}

/* The downgrade in progress, or NULL when there is none: the field is
 * then absent, and the frame what a release before downgrades sent. */
static Batonpeer__Downgrade *downgrade_in(struct versions_pb *pb,
					  const struct baton_downgrade *d)
{
	if (release_none(d->target))
		return NULL;
	batonpeer__downgrade__init(&pb->downgrade);
	pb->downgrade.target = release_in(&pb->target, d->target);
	pb->downgrade.prev_floor = release_in(&pb->prev_floor, d->prev_floor);
	pb->downgrade.prev_machine = d->prev_machine.value;
	pb->downgrade.since = d->since;
	return &pb->downgrade;
}

static Batonpeer__VersionState *versions_in(struct versions_pb *pb,
					    const struct baton_version_state *s)
{
	/* baton__peer_check_msg() let through only valid states. */
	BATON_ASSERT(s->machine.value >= 1 && s->n <= BATON_MAX_MEMBERS);
	if (versions_initial(s))
		return NULL;
	batonpeer__version_state__init(&pb->state);
	pb->state.machine = s->machine.value;
	pb->state.floor = release_in(&pb->floor, s->floor);
	for (uint32_t i = 0; i < s->n; i++) {
		Batonpeer__MemberVersions *row = &pb->rows[i];
		batonpeer__member_versions__init(row);
		row->id = s->members[i].id;
		row->profile =
			profile_in(&pb->profiles[i], &s->members[i].profile);
		pb->row_ptrs[i] = row;
	}
	pb->state.n_members = s->n;
	pb->state.members = pb->row_ptrs;
	pb->state.downgrade = downgrade_in(pb, &s->downgrade);
	pb->state.held = s->held; /* false: not sent, as before it existed */
	return &pb->state;
}

#define RAFT_PB_ENTRIES 64

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
		Batonpeer__Info info;
		Batonpeer__InfoResult info_result;
	} b;
	/* Info result: its extra key (memory_max_bytes), when told. */
	Batonpeer__KeyValue extra;
	Batonpeer__KeyValue *extra_ptrs[1];
	uint8_t extra_value[BATON_PEER_INFO_MEMORY_MAX_BYTES];
	/* Snapshot: the message, its meta, its members and versions. */
	Batonpeer__Snapshot snapshot;
	Batonpeer__SnapshotMeta meta;
	Batonpeer__Member members[BATON_MAX_MEMBERS];
	Batonpeer__Member *member_ptrs[BATON_MAX_MEMBERS];
	struct versions_pb versions;
	/* Append: n entries and n pointers to them, here when they fit (a
	 * batch of up to this many writes needs no allocation), else in one
	 * allocation. */
	Batonpeer__Entry entries[RAFT_PB_ENTRIES];
	Batonpeer__Entry *entry_ptrs[RAFT_PB_ENTRIES];
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

static int append_in(struct raft_pb *pb, struct baton_proto_version v,
		     const struct baton_msg_append *a)
{
	Batonpeer__Append *o = &pb->b.append;
	batonpeer__append__init(o);
	o->prev_index = a->prev_index;
	o->prev_term = a->prev_term;
	o->leader_commit = a->leader_commit;
	o->heartbeat_seq = a->heartbeat_seq;
	/* Protocol 3 drops the leader's profile: info requests carry it. */
	if (v.value < 3)
		o->leader = profile_in(&pb->profile, &a->leader);
	if (v.value >= BATON_PEER_PROTO_CLOCK) {
		o->wall_ms = a->clock.wall_ms;
		o->echo_wall_ms = a->clock.echo_wall_ms;
		o->echo_hold_ms = a->clock.echo_hold_ms;
	}
	if (a->n_entries > 0) {
		size_t n = a->n_entries;
		Batonpeer__Entry *es = pb->entries;
		Batonpeer__Entry **ptrs = pb->entry_ptrs;
		if (n > RAFT_PB_ENTRIES) {
			pb->entries_mem =
				malloc(n * (sizeof(Batonpeer__Entry) +
					    sizeof(Batonpeer__Entry *)));
			if (pb->entries_mem == NULL)
				return BATON_ENOMEM;
			es = pb->entries_mem;
			ptrs = (Batonpeer__Entry **)(es + n);
		}
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
	BATON_ASSERT(s->meta.config.n <= BATON_MAX_MEMBERS);
	for (uint32_t i = 0; i < s->meta.config.n; i++) {
		batonpeer__member__init(&pb->members[i]);
		pb->members[i].id = s->meta.config.members[i].id;
		pb->members[i].role = s->meta.config.members[i].role;
		pb->member_ptrs[i] = &pb->members[i];
	}
	meta->n_members = s->meta.config.n;
	meta->members = pb->member_ptrs;
	meta->versions = versions_in(&pb->versions, &s->meta.versions);
	meta->versions_index = s->meta.versions_index;

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
static void small_body_in(struct raft_pb *pb, struct baton_proto_version v,
			  const struct baton_msg *m)
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
		if (v.value >= BATON_PEER_PROTO_CLOCK) {
			o->wall_ms = a->clock.wall_ms;
			o->echo_wall_ms = a->clock.echo_wall_ms;
			o->echo_hold_ms = a->clock.echo_hold_ms;
		}
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
	case BATON_MSG_INFO:
		batonpeer__info__init(&pb->b.info);
		pb->b.info.seq = m->u.info.seq;
		r->body_case = BATONPEER__RAFT__BODY_INFO;
		r->info = &pb->b.info;
		break;
	case BATON_MSG_INFO_RESULT: {
		Batonpeer__InfoResult *o = &pb->b.info_result;
		batonpeer__info_result__init(o);
		o->seq = m->u.info_result.seq;
		o->profile =
			profile_in(&pb->profile, &m->u.info_result.profile);
		if (m->u.info_result.memory_max_bytes != 0) {
			/* Only when told: an info result without a bound is
			 * byte for byte what earlier releases send. */
			batonpeer__key_value__init(&pb->extra);
			pb->extra.key = (char *)BATON_PEER_INFO_KEY_MEMORY_MAX;
			baton_le_put_u64(pb->extra_value,
					 m->u.info_result.memory_max_bytes);
			pb->extra.value.data = pb->extra_value;
			pb->extra.value.len = sizeof pb->extra_value;
			pb->extra_ptrs[0] = &pb->extra;
			o->n_extra = 1;
			o->extra = pb->extra_ptrs;
		}
		r->body_case = BATONPEER__RAFT__BODY_INFO_RESULT;
		r->info_result = o;
		break;
	}
	default:
		/* baton__peer_check_msg() lets through only the types handled
		 * here and in baton_peer_encode_raft(). */
		BATON_ASSERT(false);
		break;
	}
}

int baton_peer_encode_raft(struct baton_proto_version v,
			   const struct baton_msg *m, struct baton_buf *out)
{
	BATON_ASSERT(m != NULL && out != NULL);
	if (!baton_peer_proto_supported(v))
		return BATON_EVERSION;
	const char *why = NULL;
	int rv = baton__peer_check_msg(m, &why);
	if (rv != 0)
		return rv == BATON_ECORRUPT ? BATON_EINVAL : rv;

	struct raft_pb pbs; /* a few KiB: the version table */
	struct raft_pb *pb = &pbs;
	pb->entries_mem = NULL;
	batonpeer__raft__init(&pb->raft);
	pb->raft.type = m->type;
	pb->raft.term = m->term;
	/* Protocol 3 drops `from`: the handshake's identity is the sender. */
	pb->raft.from = v.value < 3 ? m->from : 0;
	pb->raft.to = m->to;
	switch (m->type) {
	case BATON_MSG_VOTE:
		vote_in(pb, &m->u.vote);
		break;
	case BATON_MSG_APPEND:
		rv = append_in(pb, v, &m->u.append);
		break;
	case BATON_MSG_SNAPSHOT:
		snapshot_in(pb, &m->u.snapshot);
		break;
	default:
		small_body_in(pb, v, m);
		break;
	}
	if (rv == 0) {
		Batonpeer__Envelope env;
		batonpeer__envelope__init(&env);
		env.body_case = BATONPEER__ENVELOPE__BODY_RAFT;
		env.raft = &pb->raft;
		rv = put_frame(v, &env, out);
	}
	free(pb->entries_mem);
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
	if (h->has_auth)
		o->auth_nonce = bytes_in(h->auth_nonce, sizeof h->auth_nonce);
	if (h->has_cluster_uuid)
		o->cluster_uuid =
			bytes_in(h->cluster_uuid, sizeof h->cluster_uuid);
	return 0;
}

int baton_peer_encode_handshake(const struct baton_peer_handshake *h,
				struct baton_buf *out)
{
	BATON_ASSERT(h != NULL && out != NULL);
	Batonpeer__Handshake hs;
	struct profile_pb prof;
	int rv = handshake_in(&hs, &prof, h);
	if (rv != 0)
		return rv;
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_HANDSHAKE;
	env.handshake = &hs;
	return put_frame(FROZEN, &env, out);
}

/* The cluster view of a handshake reply, on the encoder's stack. */
struct view_pb {
	Batonpeer__ClusterView view;
	Batonpeer__Release strict;
	struct versions_pb versions;
};

static int view_in(struct view_pb *pb, const struct baton_peer_cluster_view *v)
{
	if (too_long(v->leader_peer_addr, BATON_PEER_ADDR_MAX))
		return BATON_ETOOBIG;
	if (!baton_version_state_valid(&v->versions))
		return BATON_EINVAL;
	batonpeer__cluster_view__init(&pb->view);
	pb->view.leader_id = v->leader_id;
	pb->view.leader_peer_addr = str_in(v->leader_peer_addr);
	/* Unlike a snapshot's, a view's state is always sent: its presence
	 * is what tells a reader the sender has a view at all. */
	pb->view.versions = versions_in(&pb->versions, &v->versions);
	if (pb->view.versions == NULL) {
		batonpeer__version_state__init(&pb->versions.state);
		pb->versions.state.machine = v->versions.machine.value;
		pb->view.versions = &pb->versions.state;
	}
	if (!release_none(v->strict_release))
		pb->view.strict_release =
			release_in(&pb->strict, v->strict_release);
	pb->view.last_index = v->last_index;
	return 0;
}

int baton_peer_encode_handshake_reply(
	const struct baton_peer_handshake_reply *r, struct baton_buf *out)
{
	BATON_ASSERT(r != NULL && out != NULL);
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
	if (r->has_auth_mac)
		o.auth_mac = bytes_in(r->auth_mac, sizeof r->auth_mac);
	o.removed = r->removed;
	struct view_pb *view = NULL; /* a few KiB: the version table */
	if (r->has_cluster) {
		view = malloc(sizeof *view);
		if (view == NULL)
			return BATON_ENOMEM;
		rv = view_in(view, &r->cluster);
		o.cluster = &view->view;
	}
	if (rv == 0) {
		Batonpeer__Envelope env;
		batonpeer__envelope__init(&env);
		env.body_case = BATONPEER__ENVELOPE__BODY_HANDSHAKE_REPLY;
		env.handshake_reply = &o;
		rv = put_frame(FROZEN, &env, out);
	}
	free(view);
	return rv;
}

int baton_peer_encode_handshake_auth(const struct baton_peer_handshake_auth *a,
				     struct baton_buf *out)
{
	BATON_ASSERT(a != NULL && out != NULL);
	Batonpeer__HandshakeAuth o;
	batonpeer__handshake_auth__init(&o);
	o.mac = bytes_in(a->mac, sizeof a->mac);
	BATON_ASSERT(o.mac.len == BATON_PEER_AUTH_MAC_LEN);
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_HANDSHAKE_AUTH;
	env.handshake_auth = &o;
	return put_frame(FROZEN, &env, out);
}

/* What baton_peer_encode_forward() refuses before building anything. */
static int check_forward(struct baton_proto_version v,
			 const struct baton_peer_forward *f)
{
	if (f->n_commands > BATON_PEER_FORWARD_COMMANDS_MAX ||
	    f->n_watches > BATON_PEER_FORWARD_WATCHES_MAX)
		return BATON_ETOOBIG;
	if ((f->n_commands > 0 && f->commands == NULL) ||
	    (f->n_watches > 0 && f->watches == NULL))
		return BATON_EINVAL;
	/* A single command is exactly one command and watches nothing. */
	if (!f->transaction && (f->n_commands != 1 || f->n_watches > 0))
		return BATON_EINVAL;
	for (uint32_t c = 0; c < f->n_commands; c++) {
		const struct baton_peer_command *cmd = &f->commands[c];
		if (cmd->argc < 1 || cmd->argv == NULL || cmd->lens == NULL)
			return BATON_EINVAL;
		if ((unsigned)cmd->argc > BATON_PEER_FORWARD_ARGS_MAX)
			return BATON_ETOOBIG;
		for (size_t i = 0; i < (size_t)cmd->argc; i++) {
			if (cmd->lens[i] > BATON_PEER_FRAME_MAX)
				return BATON_ETOOBIG;
			if (cmd->lens[i] > 0 && cmd->argv[i] == NULL)
				return BATON_EINVAL;
		}
	}
	for (uint32_t w = 0; w < f->n_watches; w++) {
		if (f->watches[w].key_len > BATON_PEER_FRAME_MAX)
			return BATON_ETOOBIG;
		if (f->watches[w].key_len > 0 && f->watches[w].key == NULL)
			return BATON_EINVAL;
	}
	/* Protocol 1 has no transactions. */
	if (v.value < 2 && f->transaction)
		return BATON_EVERSION;
	return 0;
}

/* The protobuf-c side of a forward, in one allocation: the commands, the
 * watches, pointers to each, and every argument's bytes descriptor. */
struct forward_pb {
	Batonpeer__Forward o;
	Batonpeer__Command *cmds;
	Batonpeer__Command **cmd_ptrs;
	Batonpeer__Watch *watches;
	Batonpeer__Watch **watch_ptrs;
	ProtobufCBinaryData *args;
};

static int forward_in(struct forward_pb *pb, struct baton_proto_version v,
		      const struct baton_peer_forward *f, void **mem)
{
	size_t n_args = 0;
	for (uint32_t c = 0; c < f->n_commands; c++)
		n_args += (size_t)f->commands[c].argc;
	size_t nc = f->n_commands, nw = f->n_watches;
	*mem = malloc(
		nc * (sizeof(Batonpeer__Command) +
		      sizeof(Batonpeer__Command *)) +
		nw * (sizeof(Batonpeer__Watch) + sizeof(Batonpeer__Watch *)) +
		n_args * sizeof(ProtobufCBinaryData) + 1);
	if (*mem == NULL)
		return BATON_ENOMEM;
	/* Largest alignment first: every piece stays aligned. */
	pb->cmds = *mem;
	pb->watches = (Batonpeer__Watch *)(pb->cmds + nc);
	pb->args = (ProtobufCBinaryData *)(pb->watches + nw);
	pb->cmd_ptrs = (Batonpeer__Command **)(pb->args + n_args);
	pb->watch_ptrs = (Batonpeer__Watch **)(pb->cmd_ptrs + nc);
	ProtobufCBinaryData *arg = pb->args;
	for (size_t c = 0; c < nc; c++) {
		const struct baton_peer_command *cmd = &f->commands[c];
		batonpeer__command__init(&pb->cmds[c]);
		pb->cmds[c].n_argv = (size_t)cmd->argc;
		pb->cmds[c].argv = arg;
		for (size_t i = 0; i < (size_t)cmd->argc; i++)
			*arg++ = bytes_in(cmd->argv[i], cmd->lens[i]);
		pb->cmd_ptrs[c] = &pb->cmds[c];
	}
	for (size_t w = 0; w < nw; w++) {
		batonpeer__watch__init(&pb->watches[w]);
		pb->watches[w].key =
			bytes_in(f->watches[w].key, f->watches[w].key_len);
		pb->watches[w].hash = f->watches[w].hash;
		pb->watch_ptrs[w] = &pb->watches[w];
	}
	batonpeer__forward__init(&pb->o);
	pb->o.request_id = f->request_id;
	if (f->has_client_auth) /* every version: older releases skip it */
		pb->o.client_auth =
			bytes_in(f->client_auth, sizeof f->client_auth);
	if (v.value < 3 && !f->transaction) {
		/* Protocols 1 and 2: a single command in argv, as 1 sent it. */
		pb->o.n_argv = pb->cmds[0].n_argv;
		pb->o.argv = pb->cmds[0].argv;
		return 0;
	}
	pb->o.n_commands = nc;
	pb->o.commands = pb->cmd_ptrs;
	pb->o.n_watches = nw;
	pb->o.watches = pb->watch_ptrs;
	pb->o.transaction = f->transaction;
	return 0;
}

int baton_peer_encode_forward(struct baton_proto_version v,
			      const struct baton_peer_forward *f,
			      struct baton_buf *out)
{
	BATON_ASSERT(f != NULL && out != NULL);
	if (!baton_peer_proto_supported(v))
		return BATON_EVERSION;
	int rv = check_forward(v, f);
	if (rv != 0)
		return rv;
	struct forward_pb pb;
	void *mem = NULL;
	rv = forward_in(&pb, v, f, &mem);
	if (rv == 0) {
		Batonpeer__Envelope env;
		batonpeer__envelope__init(&env);
		env.body_case = BATONPEER__ENVELOPE__BODY_FORWARD;
		env.forward = &pb.o;
		rv = put_frame(v, &env, out);
	}
	free(mem);
	return rv;
}

int baton_peer_encode_forward_reply(struct baton_proto_version v,
				    const struct baton_peer_forward_reply *r,
				    struct baton_buf *out)
{
	BATON_ASSERT(r != NULL && out != NULL);
	if (!baton_peer_proto_supported(v))
		return BATON_EVERSION;
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
	return put_frame(v, &env, out);
}

int baton_peer_encode_join(struct baton_proto_version v,
			   const struct baton_peer_join *j,
			   struct baton_buf *out)
{
	BATON_ASSERT(j != NULL && out != NULL);
	if (!baton_peer_proto_supported(v))
		return BATON_EVERSION;
	if (j->node_id == 0)
		return BATON_EINVAL;
	if (too_long(j->peer_addr, BATON_PEER_ADDR_MAX) ||
	    too_long(j->client_addr, BATON_PEER_ADDR_MAX))
		return BATON_ETOOBIG;
	struct profile_pb prof;
	Batonpeer__JoinRequest o;
	batonpeer__join_request__init(&o);
	o.node_id = j->node_id;
	o.peer_addr = str_in(j->peer_addr);
	o.client_addr = str_in(j->client_addr);
	o.profile = profile_in(&prof, &j->profile);
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_JOIN;
	env.join = &o;
	return put_frame(v, &env, out);
}

int baton_peer_encode_join_reply(struct baton_proto_version v,
				 const struct baton_peer_join_reply *r,
				 struct baton_buf *out)
{
	BATON_ASSERT(r != NULL && out != NULL);
	if (!baton_peer_proto_supported(v))
		return BATON_EVERSION;
	if (too_long(r->reason, BATON_PEER_REASON_MAX) ||
	    too_long(r->leader_peer_addr, BATON_PEER_ADDR_MAX) ||
	    too_long(r->leader_client_addr, BATON_PEER_ADDR_MAX))
		return BATON_ETOOBIG;
	struct profile_pb prof;
	Batonpeer__JoinReply o;
	batonpeer__join_reply__init(&o);
	o.accepted = r->accepted;
	o.reason = str_in(r->reason);
	o.leader_id = r->leader_id;
	o.leader_peer_addr = str_in(r->leader_peer_addr);
	o.leader_client_addr = str_in(r->leader_client_addr);
	o.leader = profile_in(&prof, &r->leader);
	Batonpeer__Envelope env;
	batonpeer__envelope__init(&env);
	env.body_case = BATONPEER__ENVELOPE__BODY_JOIN_REPLY;
	env.join_reply = &o;
	return put_frame(v, &env, out);
}

int baton_peer_encode_frame(struct baton_proto_version v,
			    const struct baton_peer_frame *f,
			    struct baton_buf *out)
{
	BATON_ASSERT(f != NULL && out != NULL);
	switch (f->kind) {
	case BATON_PEER_RAFT:
		return baton_peer_encode_raft(v, &f->raft, out);
	case BATON_PEER_FORWARD:
		return baton_peer_encode_forward(v, &f->forward, out);
	case BATON_PEER_FORWARD_REPLY:
		return baton_peer_encode_forward_reply(v, &f->forward_reply,
						       out);
	case BATON_PEER_JOIN:
		return baton_peer_encode_join(v, &f->join, out);
	case BATON_PEER_JOIN_REPLY:
		return baton_peer_encode_join_reply(v, &f->join_reply, out);
	default:
		return BATON_EINVAL;
	}
}
