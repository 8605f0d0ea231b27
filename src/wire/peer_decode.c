/*
 * The peer codec's decoders (peer.h): the protobuf Envelope of
 * proto/peer.proto into struct baton_msg and the connection messages.
 *
 * Decoding unpacks with an allocator whose budget is the frame's size plus
 * BATON_PEER_DECODE_SLACK, so no frame can make a node allocate without
 * bound, then checks what the core relies on (baton__peer_check_msg, the
 * same rules the encoder applies) and exposes the result as core structs
 * pointing into the unpacked envelope. The version facts (profiles,
 * version states) and the frozen handshake frames are decoded in
 * peer_decode_versions.c.
 */
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "le.h"
#include "peer.pb-c.h"
#include "peer_internal.h"

/* What a zero-length byte field points to, so that no pointer the decoder
 * hands out is NULL (memcpy(dst, NULL, 0) is undefined behaviour). */
static uint8_t empty_bytes[1];

/* The allocator protobuf-c unpacks with: a budget for the whole decode,
 * carved out of a few chunks that are freed together with the frame (an
 * Append of n entries was 2n + 2 mallocs and as many frees). */
struct arena_chunk {
	struct arena_chunk *next;
	size_t cap, used;
};

struct budget {
	size_t left;
	bool exceeded;		    /* the budget ran out */
	bool failed;		    /* malloc itself failed */
	struct arena_chunk *chunks; /* the newest first */
	size_t next_cap;
};

/* Each allocation also costs the allocator's own bookkeeping. */
#define ALLOC_OVERHEAD 16u
#define ARENA_ALIGN 16u
#define ARENA_ROUND(n) (((n) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))
#define ARENA_HEADER ARENA_ROUND(sizeof(struct arena_chunk))

static void *budget_alloc(void *data, size_t size)
{
	struct budget *b = data;
	if (size > b->left || b->left - size < ALLOC_OVERHEAD) {
		b->exceeded = true;
		return NULL;
	}
	b->left -= size + ALLOC_OVERHEAD;
	size_t need = ARENA_ROUND(size > 0 ? size : 1);
	struct arena_chunk *c = b->chunks;
	if (c == NULL || c->cap - c->used < need) {
		/* Doubling chunks, none much beyond what the budget allows. */
		size_t cap = b->next_cap < b->left + need ? b->next_cap
							  : b->left + need;
		if (cap < need)
			cap = need;
		c = malloc(ARENA_HEADER + cap);
		if (c == NULL) {
			b->failed = true;
			return NULL;
		}
		c->cap = cap;
		c->used = 0;
		c->next = b->chunks;
		b->chunks = c;
		b->next_cap = cap * 2;
	}
	void *p = (uint8_t *)c + ARENA_HEADER + c->used;
	c->used += need;
	return p;
}

/* What the arena hands out is freed with it, all at once. */
static void arena_free(void *data, void *p)
{
	(void)data;
	(void)p;
}

static void arena_release(struct arena_chunk *c)
{
	while (c != NULL) {
		struct arena_chunk *next = c->next;
		free(c);
		c = next;
	}
}

static const uint8_t *bytes_out(ProtobufCBinaryData b)
{
	return b.len > 0 ? b.data : empty_bytes;
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
	baton_version_state_initial(&out->meta.versions);
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
		out->meta.versions_index = meta->versions_index;
		int rv = baton__peer_versions_out(meta->versions,
						  &out->meta.versions, why);
		if (rv != 0)
			return rv;
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

/* The extra keys are room for later releases: checked against their
 * limits; memory_max_bytes is read, the others ignored. */
static int info_result_out(const Batonpeer__InfoResult *r,
			   struct baton_msg_info_result *out, const char **why)
{
	out->memory_max_bytes = 0;
	if (r->n_extra > BATON_PEER_INFO_EXTRA_MAX) {
		*why = "too many extra keys in an info result";
		return BATON_ETOOBIG;
	}
	for (size_t i = 0; i < r->n_extra; i++) {
		const Batonpeer__KeyValue *kv = r->extra[i];
		if (kv == NULL) {
			*why = "info result key missing";
			return BATON_ECORRUPT;
		}
		const char *key = NULL;
		int rv = baton__peer_string_out(
			kv->key, BATON_PEER_INFO_KEY_MAX, &key,
			"info result key above the limit", why);
		if (rv != 0)
			return rv;
		if (kv->value.len > BATON_PEER_INFO_VALUE_MAX) {
			*why = "info result value above the limit";
			return BATON_ETOOBIG;
		}
		if (strcmp(key, BATON_PEER_INFO_KEY_MEMORY_MAX) == 0 &&
		    kv->value.len == BATON_PEER_INFO_MEMORY_MAX_BYTES)
			out->memory_max_bytes =
				baton_le_get_u64(kv->value.data);
	}
	return baton__peer_profile_out(r->profile, &out->profile, why);
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
	case BATON_MSG_INFO:
		return BATONPEER__RAFT__BODY_INFO;
	case BATON_MSG_INFO_RESULT:
		return BATONPEER__RAFT__BODY_INFO_RESULT;
	default:
		return BATONPEER__RAFT__BODY__NOT_SET;
	}
}

static int raft_body_out(struct baton_proto_version v, const Batonpeer__Raft *r,
			 struct baton_msg *m, struct baton_peer_frame *f,
			 const char **why)
{
	switch (r->type) {
	case BATON_MSG_VOTE: {
		const Batonpeer__Vote *vo = r->vote;
		m->u.vote.last_log_index = vo->last_log_index;
		m->u.vote.last_log_term = vo->last_log_term;
		m->u.vote.pre_vote = vo->pre_vote;
		m->u.vote.leadership_transfer = vo->leadership_transfer;
		return baton__peer_profile_out(vo->candidate,
					       &m->u.vote.candidate, why);
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
		if (v.value >= BATON_PEER_PROTO_CLOCK) {
			m->u.append.clock.wall_ms = a->wall_ms;
			m->u.append.clock.echo_wall_ms = a->echo_wall_ms;
			m->u.append.clock.echo_hold_ms = a->echo_hold_ms;
		}
		/* Protocol 3 dropped the leader's profile: ignore one. */
		int rv = v.value < 3
				 ? baton__peer_profile_out(
					   a->leader, &m->u.append.leader, why)
				 : 0;
		return rv != 0 ? rv : entries_out(a, &m->u.append, f, why);
	}
	case BATON_MSG_APPEND_RESULT: {
		const Batonpeer__AppendResult *a = r->append_result;
		m->u.append_result.success = a->success;
		m->u.append_result.index = a->index;
		m->u.append_result.hint_index = a->hint_index;
		m->u.append_result.hint_term = a->hint_term;
		m->u.append_result.heartbeat_seq = a->heartbeat_seq;
		if (v.value >= BATON_PEER_PROTO_CLOCK) {
			m->u.append_result.clock.wall_ms = a->wall_ms;
			m->u.append_result.clock.echo_wall_ms = a->echo_wall_ms;
			m->u.append_result.clock.echo_hold_ms = a->echo_hold_ms;
		}
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
	case BATON_MSG_INFO:
		m->u.info.seq = r->info->seq;
		return 0;
	case BATON_MSG_INFO_RESULT:
		m->u.info_result.seq = r->info_result->seq;
		return info_result_out(r->info_result, &m->u.info_result, why);
	default:
		BATON_ASSERT(false); /* raft_out() checked the type */
		return BATON_ECORRUPT;
	}
}

static int raft_out(struct baton_proto_version v, const Batonpeer__Raft *r,
		    struct baton_peer_frame *f, const char **why)
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
	/* Protocol 3 dropped `from`: the handshake names the sender. */
	m->from = v.value < 3 ? r->from : 0;
	m->to = r->to;
	int rv = raft_body_out(v, r, m, f, why);
	if (rv == 0)
		rv = baton__peer_check_msg(m, why);
	return rv;
}

/* The commands a forward carries, as protobuf-c unpacked them: either
 * the single-command form (argv) or the list. */
struct forward_in {
	size_t n_commands;
	const Batonpeer__Command *single; /* argv as a one-command list */
	Batonpeer__Command *const *list;
};

static const Batonpeer__Command *command_at(const struct forward_in *in,
					    size_t i)
{
	return in->single != NULL ? in->single : in->list[i];
}

/* Which form version v reads (see proto/peer.proto, Forward), into *in. */
static int forward_form(struct baton_proto_version v,
			const Batonpeer__Forward *fw,
			Batonpeer__Command *single, struct forward_in *in,
			const char **why)
{
	bool list = v.value >= 3 || (v.value == 2 && fw->transaction);
	if (v.value == 2 && !fw->transaction &&
	    (fw->n_commands > 0 || fw->n_watches > 0)) {
		*why = "single forwarded command with a command list";
		return BATON_ECORRUPT;
	}
	if (v.value == 2 && fw->transaction && fw->n_argv > 0) {
		*why = "forwarded transaction with a single command";
		return BATON_ECORRUPT;
	}
	if (list) {
		if (fw->n_commands > BATON_PEER_FORWARD_COMMANDS_MAX ||
		    fw->n_watches > BATON_PEER_FORWARD_WATCHES_MAX) {
			*why = "forwarded transaction above the limits";
			return BATON_ETOOBIG;
		}
		if (!fw->transaction &&
		    (fw->n_commands != 1 || fw->n_watches > 0)) {
			*why = "single forwarded command not exactly one "
			       "command";
			return BATON_ECORRUPT;
		}
		in->n_commands = fw->n_commands;
		in->single = NULL;
		in->list = fw->commands;
		return 0;
	}
	/* Protocol 1 (and 2's single command): argv; any list is what 1
	 * does not know, skipped as an old release skips it. */
	batonpeer__command__init(single);
	single->n_argv = fw->n_argv;
	single->argv = fw->argv;
	in->n_commands = 1;
	in->single = single;
	in->list = NULL;
	return 0;
}

static int check_commands(const struct forward_in *in, size_t *n_args,
			  const char **why)
{
	*n_args = 0;
	for (size_t c = 0; c < in->n_commands; c++) {
		const Batonpeer__Command *cmd = command_at(in, c);
		if (cmd == NULL || cmd->n_argv == 0) {
			*why = "forwarded command without arguments";
			return BATON_ECORRUPT;
		}
		if (cmd->n_argv > BATON_PEER_FORWARD_ARGS_MAX) {
			*why = "forwarded command with too many arguments";
			return BATON_ETOOBIG;
		}
		*n_args += cmd->n_argv;
	}
	return 0;
}

static int forward_out(struct baton_proto_version v,
		       const Batonpeer__Forward *fw, struct baton_peer_frame *f,
		       const char **why)
{
	Batonpeer__Command single;
	struct forward_in in;
	int rv = forward_form(v, fw, &single, &in, why);
	size_t n_args = 0;
	if (rv == 0)
		rv = check_commands(&in, &n_args, why);
	if (rv != 0)
		return rv;
	bool watches = in.single == NULL;
	size_t nc = in.n_commands, nw = watches ? fw->n_watches : 0;
	for (size_t w = 0; w < nw; w++) {
		if (fw->watches[w] == NULL) {
			*why = "watched key missing";
			return BATON_ECORRUPT;
		}
	}
	_Static_assert(_Alignof(const uint8_t *) <= _Alignof(size_t),
		       "argv follows lens in one allocation");
	_Static_assert(_Alignof(struct baton_peer_command) <=
				       _Alignof(struct baton_peer_watch) &&
			       _Alignof(size_t) <=
				       _Alignof(struct baton_peer_command),
		       "commands, watches, lens, argv in one allocation");
	/* Watches, commands, lens, argv: one allocation, aligned in turn. */
	void *mem =
		malloc(nw * sizeof(struct baton_peer_watch) +
		       nc * sizeof(struct baton_peer_command) +
		       n_args * (sizeof(size_t) + sizeof(const uint8_t *)) + 1);
	if (mem == NULL) {
		*why = "out of memory";
		return BATON_ENOMEM;
	}
	f->owned_arrays = mem;
	struct baton_peer_watch *ws = mem;
	struct baton_peer_command *cs = (struct baton_peer_command *)(ws + nw);
	size_t *lens = (size_t *)(cs + nc);
	const uint8_t **argv = (const uint8_t **)(void *)(lens + n_args);
	for (size_t c = 0; c < nc; c++) {
		const Batonpeer__Command *cmd = command_at(&in, c);
		cs[c].argc = (int)cmd->n_argv;
		cs[c].argv = argv;
		cs[c].lens = lens;
		for (size_t i = 0; i < cmd->n_argv; i++) {
			*lens++ = cmd->argv[i].len;
			*argv++ = bytes_out(cmd->argv[i]);
		}
	}
	for (size_t w = 0; w < nw; w++) {
		ws[w].key = bytes_out(fw->watches[w]->key);
		ws[w].key_len = fw->watches[w]->key.len;
		ws[w].hash = fw->watches[w]->hash;
	}
	f->kind = BATON_PEER_FORWARD;
	f->forward.request_id = fw->request_id;
	int auth = baton__peer_fixed_out(
		fw->client_auth, sizeof f->forward.client_auth,
		f->forward.client_auth, &f->forward.has_client_auth,
		"client authentication proof not 32 bytes", why);
	if (auth != 0)
		return auth;
	f->forward.transaction = watches && fw->transaction;
	f->forward.n_commands = (uint32_t)nc;
	f->forward.commands = cs;
	f->forward.n_watches = (uint32_t)nw;
	f->forward.watches = ws;
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
		return baton__peer_string_out(
			r->error, BATON_PEER_ERROR_MAX, &out->error,
			"forward error text above the limit", why);
	default:
		*why = "forward reply without a result";
		return BATON_ECORRUPT;
	}
}

static int join_out(const Batonpeer__JoinRequest *j,
		    struct baton_peer_join *out, const char **why)
{
	out->node_id = j->node_id;
	if (j->node_id == 0) {
		*why = "join from node id 0";
		return BATON_ECORRUPT;
	}
	int rv = baton__peer_string_out(j->peer_addr, BATON_PEER_ADDR_MAX,
					&out->peer_addr,
					"address above the limit", why);
	if (rv == 0)
		rv = baton__peer_string_out(j->client_addr, BATON_PEER_ADDR_MAX,
					    &out->client_addr,
					    "address above the limit", why);
	return rv != 0 ? rv
		       : baton__peer_profile_out(j->profile, &out->profile,
						 why);
}

static int join_reply_out(const Batonpeer__JoinReply *r,
			  struct baton_peer_join_reply *out, const char **why)
{
	out->accepted = r->accepted;
	out->leader_id = r->leader_id;
	int rv = baton__peer_string_out(
		r->reason, BATON_PEER_REASON_MAX, &out->reason,
		"join refusal reason above the limit", why);
	if (rv == 0)
		rv = baton__peer_string_out(
			r->leader_peer_addr, BATON_PEER_ADDR_MAX,
			&out->leader_peer_addr, "address above the limit", why);
	if (rv == 0)
		rv = baton__peer_string_out(r->leader_client_addr,
					    BATON_PEER_ADDR_MAX,
					    &out->leader_client_addr,
					    "address above the limit", why);
	return rv != 0 ? rv
		       : baton__peer_profile_out(r->leader, &out->leader, why);
}

static int envelope_out(struct baton_proto_version v,
			const Batonpeer__Envelope *env,
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
		return baton__peer_handshake_out(env->handshake, &f->handshake,
						 why);
	case BATONPEER__ENVELOPE__BODY_HANDSHAKE_REPLY:
		f->kind = BATON_PEER_HANDSHAKE_REPLY;
		return baton__peer_handshake_reply_out(
			env->handshake_reply, &f->handshake_reply, why);
	case BATONPEER__ENVELOPE__BODY_RAFT:
		return raft_out(v, env->raft, f, why);
	case BATONPEER__ENVELOPE__BODY_FORWARD:
		return forward_out(v, env->forward, f, why);
	case BATONPEER__ENVELOPE__BODY_JOIN:
		f->kind = BATON_PEER_JOIN;
		return join_out(env->join, &f->join, why);
	case BATONPEER__ENVELOPE__BODY_JOIN_REPLY:
		f->kind = BATON_PEER_JOIN_REPLY;
		return join_reply_out(env->join_reply, &f->join_reply, why);
	case BATONPEER__ENVELOPE__BODY_HANDSHAKE_AUTH:
		f->kind = BATON_PEER_HANDSHAKE_AUTH;
		return baton__peer_handshake_auth_out(env->handshake_auth,
						      &f->handshake_auth, why);
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

/* Unpack (body, len) within the memory budget; the envelope or NULL with
 * *rv and out->why set. */
static Batonpeer__Envelope *unpack(const uint8_t *body, size_t len,
				   struct baton_peer_frame *out, int *rv)
{
	if (len > BATON_PEER_FRAME_MAX) {
		out->why = "frame above BATON_PEER_FRAME_MAX";
		*rv = BATON_ETOOBIG;
		return NULL;
	}
	BATON_ASSERT(body != NULL || len == 0);
	/* Unpacked, a frame takes about its size again in structs. */
	struct budget b = {len + BATON_PEER_DECODE_SLACK, false, false, NULL,
			   2 * len + 256};
	ProtobufCAllocator alloc = {budget_alloc, arena_free, &b};
	Batonpeer__Envelope *env =
		batonpeer__envelope__unpack(&alloc, len, body);
	if (env != NULL) {
		out->owned_arena = b.chunks;
		return env;
	}
	arena_release(b.chunks);
	if (b.failed) {
		out->why = "out of memory";
		*rv = BATON_ENOMEM;
	} else if (b.exceeded) {
		out->why = "frame needs more memory than allowed";
		*rv = BATON_ETOOBIG;
	} else {
		out->why = "not a valid envelope";
		*rv = BATON_ECORRUPT;
	}
	return NULL;
}

/* Fill *out from env, which lives in out's arena; on error free it all. */
static int finish(struct baton_proto_version v, Batonpeer__Envelope *env,
		  struct baton_peer_frame *out)
{
	const char *why = NULL;
	int rv = envelope_out(v, env, out, &why);
	if (rv != 0) {
		baton_peer_frame_free(out);
		BATON_ASSERT(why != NULL);
		out->why = why;
		return rv;
	}
	BATON_ASSERT(out->kind <= BATON_PEER_HANDSHAKE_AUTH);
	return 0;
}

int baton_peer_decode(struct baton_proto_version v, const uint8_t *body,
		      size_t len, struct baton_peer_frame *out)
{
	BATON_ASSERT(out != NULL);
	memset(out, 0, sizeof *out);
	if (!baton_peer_proto_supported(v)) {
		out->why = "a peer protocol version this release does not "
			   "implement";
		return BATON_EVERSION;
	}
	int rv = 0;
	Batonpeer__Envelope *env = unpack(body, len, out, &rv);
	return env != NULL ? finish(v, env, out) : rv;
}

int baton_peer_decode_handshake(const uint8_t *body, size_t len,
				struct baton_peer_frame *out)
{
	BATON_ASSERT(out != NULL);
	memset(out, 0, sizeof *out);
	int rv = 0;
	Batonpeer__Envelope *env = unpack(body, len, out, &rv);
	if (env == NULL)
		return rv;
	if (env->body_case != BATONPEER__ENVELOPE__BODY_HANDSHAKE &&
	    env->body_case != BATONPEER__ENVELOPE__BODY_HANDSHAKE_REPLY &&
	    env->body_case != BATONPEER__ENVELOPE__BODY_HANDSHAKE_AUTH) {
		baton_peer_frame_free(out);
		out->why = "expected a handshake";
		return BATON_ECORRUPT;
	}
	/* The frozen frames read the same in every version. */
	return finish((struct baton_proto_version){0}, env, out);
}

void baton_peer_frame_free(struct baton_peer_frame *f)
{
	if (f == NULL)
		return;
	arena_release(f->owned_arena);
	free(f->owned_arrays);
	memset(f, 0, sizeof *f);
}
