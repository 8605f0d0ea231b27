#include "peer_fixtures.h"

#include <assert.h>
#include <string.h>

struct baton_profile fix_profile(uint16_t major, uint16_t minor, uint16_t patch,
				 uint32_t proto_min, uint32_t proto_max,
				 uint32_t machine_max)
{
	struct baton_profile p;
	p.release.major = major;
	p.release.minor = minor;
	p.release.patch = patch;
	p.proto_min.value = proto_min;
	p.proto_max.value = proto_max;
	p.machine_max.value = machine_max;
	return p;
}

/* ---- sample data -----------------------------------------------------------
 */

static uint8_t all_bytes[256];
static uint8_t zeros[17];
static uint8_t hello[] = {'h', 'e', 'l', 'l', 'o'};
static struct baton_entry entries[5];
static struct baton_entry one_entry[1];
static uint8_t chunk[1000];

static void init_data(void)
{
	for (size_t i = 0; i < sizeof all_bytes; i++)
		all_bytes[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof chunk; i++)
		chunk[i] = (uint8_t)(i * 7 + 3);
	const struct baton_entry es[5] = {
		{.term = 3, .index = 101, .type = BATON_ENTRY_NOOP},
		{.term = 3,
		 .index = 102,
		 .type = BATON_ENTRY_COMMAND,
		 .len = sizeof all_bytes,
		 .buf = all_bytes},
		{.term = 4,
		 .index = 103,
		 .type = 99, /* unknown to this release: carried as is */
		 .len = sizeof hello,
		 .buf = hello},
		{.term = 4,
		 .index = 104,
		 .type = BATON_ENTRY_CONFIG,
		 .len = sizeof zeros,
		 .buf = zeros},
		{.term = 5, .index = 105, .type = UINT32_MAX},
	};
	memcpy(entries, es, sizeof es);
	one_entry[0] = (struct baton_entry){.term = UINT64_MAX,
					    .index = UINT64_MAX,
					    .type = BATON_ENTRY_COMMAND,
					    .len = 1,
					    .buf = hello};
}

static void full_config(struct baton_config *c)
{
	c->n = BATON_MAX_MEMBERS;
	for (uint32_t i = 0; i < BATON_MAX_MEMBERS; i++) {
		c->members[i].id = i == 0 ? UINT64_MAX : 1000 + i * 3;
		c->members[i].role = i % 3 == 0 ? BATON_LEARNER : BATON_VOTER;
	}
}

void fix_versions(uint32_t n, struct baton_version_state *out)
{
	assert(n <= BATON_MAX_MEMBERS);
	memset(out, 0, sizeof *out);
	out->machine.value = 3;
	out->floor = (struct baton_release){1, 4, 2};
	out->n = n;
	for (uint32_t i = 0; i < n; i++) {
		out->members[i].id = 1000 + i * 3;
		out->members[i].profile =
			fix_profile(1, (uint16_t)(3 + i % 3), (uint16_t)i,
				    1 + i % 2, 2 + i % 4, 2 + i % 5);
	}
	assert(baton_version_state_valid(out));
}

void fix_downgrade(struct baton_version_state *s)
{
	assert(baton_version_state_valid(s) && s->machine.value >= 1);
	struct baton_downgrade *d = &s->downgrade;
	d->prev_floor = s->floor;
	d->prev_machine = s->machine;
	/* Nothing is below 0.0.0. */
	if (s->floor.major == 0 && s->floor.minor == 0 && s->floor.patch == 0)
		d->prev_floor = (struct baton_release){1, 0, 0};
	d->target = (struct baton_release){0, 9, 7};
	d->since = 4321;
	s->floor = d->target;
	if (s->machine.value > 1)
		s->machine.value--;
	assert(baton_version_state_valid(s));
}

void fix_raft(uint32_t i, struct baton_msg *m)
{
	assert(i < FIX_N_RAFT);
	init_data();
	memset(m, 0, sizeof *m);
	m->term = 5 + i;
	m->from = 1;
	m->to = 2 + i;
	switch (i) {
	case 0:
		m->type = BATON_MSG_VOTE;
		m->u.vote = (struct baton_msg_vote){
			.last_log_index = 1234,
			.last_log_term = 4,
			.pre_vote = true,
			.candidate = fix_profile(1, 2, 3, 1, 4, 7)};
		break;
	case 1:
		m->type = BATON_MSG_VOTE;
		m->term = UINT64_MAX;
		m->from = UINT64_MAX;
		m->to = UINT64_MAX - 1;
		m->u.vote = (struct baton_msg_vote){
			.last_log_index = UINT64_MAX,
			.last_log_term = UINT64_MAX,
			.leadership_transfer = true,
			.candidate = fix_profile(UINT16_MAX, UINT16_MAX,
						 UINT16_MAX, UINT32_MAX,
						 UINT32_MAX, UINT32_MAX)};
		break;
	case 2:
		m->type = BATON_MSG_VOTE_RESULT;
		m->u.vote_result.pre_vote = true;
		m->u.vote_result.granted = true;
		break;
	case 3: /* a heartbeat */
		m->type = BATON_MSG_APPEND;
		m->u.append = (struct baton_msg_append){
			.prev_index = 77,
			.prev_term = 2,
			.leader_commit = 70,
			.heartbeat_seq = 9,
			.leader = fix_profile(0, 1, 0, 1, 1, 1)};
		break;
	case 4:
		m->type = BATON_MSG_APPEND;
		m->u.append = (struct baton_msg_append){
			.prev_index = 100,
			.prev_term = 3,
			.leader_commit = 99,
			.heartbeat_seq = UINT64_MAX,
			.n_entries = 5,
			.entries = entries,
			.leader = fix_profile(2, 0, 1, 2, 3, 5)};
		break;
	case 5:
		m->type = BATON_MSG_APPEND;
		m->u.append =
			(struct baton_msg_append){.prev_index = UINT64_MAX - 1,
						  .prev_term = UINT64_MAX,
						  .n_entries = 1,
						  .entries = one_entry};
		break;
	case 6:
		m->type = BATON_MSG_APPEND_RESULT;
		m->u.append_result = (struct baton_msg_append_result){
			.success = true, .index = 105, .heartbeat_seq = 9};
		break;
	case 7:
		m->type = BATON_MSG_APPEND_RESULT;
		m->u.append_result =
			(struct baton_msg_append_result){.index = 100,
							 .hint_index = 60,
							 .hint_term = 2,
							 .heartbeat_seq = 10};
		break;
	case 8:
		m->type = BATON_MSG_SNAPSHOT;
		m->u.snapshot.meta.index = 5000;
		m->u.snapshot.meta.term = 6;
		m->u.snapshot.meta.config_index = 4000;
		full_config(&m->u.snapshot.meta.config);
		fix_versions(BATON_MAX_MEMBERS, &m->u.snapshot.meta.versions);
		m->u.snapshot.meta.versions_index = 4500;
		m->u.snapshot.total_len = 3000;
		m->u.snapshot.offset = 1000;
		m->u.snapshot.chunk_len = sizeof chunk;
		m->u.snapshot.chunk = chunk;
		break;
	case 9: /* the last, empty chunk of an empty snapshot */
		m->type = BATON_MSG_SNAPSHOT;
		m->u.snapshot.meta.index = 1;
		m->u.snapshot.meta.term = 1;
		m->u.snapshot.meta.config.n = 1;
		m->u.snapshot.meta.config.members[0] =
			(struct baton_member){.id = 1, .role = BATON_VOTER};
		m->u.snapshot.meta.config_index = 1;
		baton_version_state_initial(&m->u.snapshot.meta.versions);
		m->u.snapshot.chunk = chunk; /* ignored: chunk_len is 0 */
		m->u.snapshot.last_chunk = true;
		break;
	case 10:
		m->type = BATON_MSG_SNAPSHOT_RESULT;
		m->u.snapshot_result = (struct baton_msg_snapshot_result){
			.index = 5000, .next_offset = 2000, .done = true};
		break;
	case 11:
		m->type = BATON_MSG_TIMEOUT_NOW;
		break;
	case 12:
		m->type = BATON_MSG_READ_INDEX;
		m->u.read_index.request_id = UINT64_MAX - 5;
		break;
	case 13:
		m->type = BATON_MSG_READ_INDEX_RESULT;
		m->u.read_index_result = (struct baton_msg_read_index_result){
			.request_id = 42, .read_index = 777, .status = 0};
		break;
	case 14:
		m->type = BATON_MSG_READ_INDEX_RESULT;
		m->u.read_index_result = (struct baton_msg_read_index_result){
			.request_id = 43, .status = BATON_ELEADERCHANGED};
		break;
	case 15: { /* version state at its extremes */
		m->type = BATON_MSG_SNAPSHOT;
		struct baton_snapshot_meta *meta = &m->u.snapshot.meta;
		meta->index = UINT64_MAX;
		meta->term = UINT64_MAX;
		meta->config.n = 1;
		meta->config.members[0] =
			(struct baton_member){.id = 1, .role = BATON_VOTER};
		meta->config_index = UINT64_MAX;
		meta->versions.machine.value = UINT32_MAX;
		meta->versions.floor = (struct baton_release){
			UINT16_MAX, UINT16_MAX, UINT16_MAX};
		meta->versions.n = 2;
		meta->versions.members[0] = (struct baton_member_versions){
			.id = 1}; /* a row of zeros: nothing known yet */
		meta->versions.members[1] = (struct baton_member_versions){
			.id = UINT64_MAX,
			.profile = fix_profile(UINT16_MAX, UINT16_MAX,
					       UINT16_MAX, UINT32_MAX,
					       UINT32_MAX, UINT32_MAX)};
		meta->versions_index = UINT64_MAX;
		m->u.snapshot.total_len = UINT64_MAX;
		m->u.snapshot.offset = UINT64_MAX - 1;
		m->u.snapshot.chunk_len = 1;
		m->u.snapshot.chunk = hello;
		break;
	}
	case 16:
		m->type = BATON_MSG_INFO;
		m->u.info.seq = UINT64_MAX - 2;
		break;
	case 17:
		m->type = BATON_MSG_INFO_RESULT;
		m->u.info_result.seq = 31;
		m->u.info_result.profile = fix_profile(1, 2, 0, 2, 3, 2);
		break;
	case 18: /* taken while a downgrade is in progress */
		fix_raft(8, m);
		m->term = 5 + i;
		m->to = 2 + i;
		fix_downgrade(&m->u.snapshot.meta.versions);
		break;
	}
}

void fix_view(uint32_t n, struct baton_peer_cluster_view *out)
{
	memset(out, 0, sizeof *out);
	out->leader_id = 1003;
	out->leader_peer_addr = "10.0.0.2:7001";
	fix_versions(n, &out->versions);
}

void fix_encode_sample(uint32_t i, struct baton_buf *out)
{
	assert(i < FIX_N_FRAMES);
	int rv = -1;
	if (i < FIX_N_RAFT) {
		struct baton_msg m;
		fix_raft(i, &m);
		rv = baton_peer_encode_raft(FIX_P1, &m, out);
		assert(rv == 0);
		return;
	}
	struct baton_peer_handshake h = {.cluster_id = "prod-cluster",
					 .node_id = 3,
					 .profile =
						 fix_profile(1, 4, 2, 2, 5, 3),
					 .peer_addr = "10.0.0.3:7001"};
	struct baton_peer_handshake_reply r = {.self = h};
	static const uint8_t arg_bin[] = {0, 1, 2, 0xff, '\r', '\n'};
	const uint8_t *argv[4] = {(const uint8_t *)"SET", arg_bin, NULL,
				  (const uint8_t *)"v"};
	const size_t lens[4] = {3, sizeof arg_bin, 0, 1};
	struct baton_peer_forward_reply fr = {.request_id = 77};
	switch (i - FIX_N_RAFT) {
	case 0:
		rv = baton_peer_encode_handshake(&h, out);
		break;
	case 1: /* empty strings, zero profile */
		h = (struct baton_peer_handshake){.node_id = UINT64_MAX};
		rv = baton_peer_encode_handshake(&h, out);
		break;
	case 2:
		r.accepted = true;
		r.proto.value = 4;
		r.reason = "";
		rv = baton_peer_encode_handshake_reply(&r, out);
		break;
	case 3:
		r.reason = "no common peer protocol version";
		rv = baton_peer_encode_handshake_reply(&r, out);
		break;
	case 4:
		rv = fix_encode_forward(UINT64_MAX, 4, argv, lens, out);
		break;
	case 5:
		rv = fix_encode_forward(1, 1, argv, lens, out);
		break;
	case 6:
		fr.resp_reply = (const uint8_t *)"+OK\r\n";
		fr.resp_len = 5;
		rv = baton_peer_encode_forward_reply(FIX_P1, &fr, out);
		break;
	case 7:
		fr.error = "NOTLEADER the leader is node 2";
		rv = baton_peer_encode_forward_reply(FIX_P1, &fr, out);
		break;
	case 8: /* a refusal with the full cluster view, strict */
		r.reason = "no common peer protocol version";
		r.has_cluster = true;
		fix_view(BATON_MAX_MEMBERS, &r.cluster);
		r.cluster.strict_release = (struct baton_release){1, 2, 0};
		rv = baton_peer_encode_handshake_reply(&r, out);
		break;
	case 9: {
		struct baton_peer_join j = {
			.node_id = 4,
			.peer_addr = "10.0.0.4:7001",
			.client_addr = "10.0.0.4:6379",
			.profile = fix_profile(1, 2, 0, 2, 3, 2)};
		rv = baton_peer_encode_join(FIX_P1, &j, out);
		break;
	}
	case 10: {
		struct baton_peer_join_reply jr = {
			.reason = "machine_max 1 is below the effective "
				  "machine version 2",
			.leader_id = 2,
			.leader_peer_addr = "10.0.0.2:7001",
			.leader_client_addr = "10.0.0.2:6379",
			.leader = fix_profile(1, 1, 0, 1, 2, 2)};
		rv = baton_peer_encode_join_reply(FIX_P1, &jr, out);
		break;
	}
	case 11: /* an accepted reply, its view during a downgrade */
		r.accepted = true;
		r.proto.value = 2;
		r.has_cluster = true;
		fix_view(3, &r.cluster);
		fix_downgrade(&r.cluster.versions);
		rv = baton_peer_encode_handshake_reply(&r, out);
		break;
	}
	assert(rv == 0);
	(void)rv;
}

/* ---- comparisons -----------------------------------------------------------
 */

#define SAME(field)                                                            \
	do {                                                                   \
		if (a->field != b->field) {                                    \
			*diff = #field;                                        \
			return false;                                          \
		}                                                              \
	} while (0)

static bool profile_eq(const struct baton_profile *a,
		       const struct baton_profile *b, const char **diff)
{
	SAME(release.major);
	SAME(release.minor);
	SAME(release.patch);
	SAME(proto_min.value);
	SAME(proto_max.value);
	SAME(machine_max.value);
	return true;
}

static bool bytes_eq(const uint8_t *a, const uint8_t *b, size_t len)
{
	return len == 0 || (a != NULL && b != NULL && memcmp(a, b, len) == 0);
}

static bool entry_eq(const struct baton_entry *a, const struct baton_entry *b,
		     const char **diff)
{
	SAME(term);
	SAME(index);
	SAME(type);
	SAME(len);
	if (!bytes_eq(a->buf, b->buf, a->len)) {
		*diff = "entry data";
		return false;
	}
	return true;
}

static bool append_eq(const struct baton_msg_append *a,
		      const struct baton_msg_append *b, const char **diff)
{
	SAME(prev_index);
	SAME(prev_term);
	SAME(leader_commit);
	SAME(heartbeat_seq);
	SAME(clock.wall_ms);
	SAME(clock.echo_wall_ms);
	SAME(clock.echo_hold_ms);
	SAME(n_entries);
	for (uint32_t i = 0; i < a->n_entries; i++)
		if (!entry_eq(&a->entries[i], &b->entries[i], diff))
			return false;
	return profile_eq(&a->leader, &b->leader, diff);
}

static bool snapshot_eq(const struct baton_msg_snapshot *a,
			const struct baton_msg_snapshot *b, const char **diff)
{
	SAME(meta.index);
	SAME(meta.term);
	SAME(meta.config_index);
	SAME(meta.config.n);
	for (uint32_t i = 0; i < a->meta.config.n; i++) {
		SAME(meta.config.members[i].id);
		SAME(meta.config.members[i].role);
	}
	SAME(meta.versions_index);
	if (!fix_versions_eq(&a->meta.versions, &b->meta.versions, diff))
		return false;
	SAME(total_len);
	SAME(offset);
	SAME(chunk_len);
	SAME(last_chunk);
	if (!bytes_eq(a->chunk, b->chunk, a->chunk_len)) {
		*diff = "chunk";
		return false;
	}
	return true;
}

bool fix_msg_eq(const struct baton_msg *a, const struct baton_msg *b,
		const char **diff)
{
	SAME(type);
	SAME(term);
	SAME(from);
	SAME(to);
	switch (a->type) {
	case BATON_MSG_VOTE:
		SAME(u.vote.last_log_index);
		SAME(u.vote.last_log_term);
		SAME(u.vote.pre_vote);
		SAME(u.vote.leadership_transfer);
		return profile_eq(&a->u.vote.candidate, &b->u.vote.candidate,
				  diff);
	case BATON_MSG_VOTE_RESULT:
		SAME(u.vote_result.pre_vote);
		SAME(u.vote_result.granted);
		return true;
	case BATON_MSG_APPEND:
		return append_eq(&a->u.append, &b->u.append, diff);
	case BATON_MSG_APPEND_RESULT:
		SAME(u.append_result.success);
		SAME(u.append_result.index);
		SAME(u.append_result.hint_index);
		SAME(u.append_result.hint_term);
		SAME(u.append_result.heartbeat_seq);
		SAME(u.append_result.clock.wall_ms);
		SAME(u.append_result.clock.echo_wall_ms);
		SAME(u.append_result.clock.echo_hold_ms);
		return true;
	case BATON_MSG_SNAPSHOT:
		return snapshot_eq(&a->u.snapshot, &b->u.snapshot, diff);
	case BATON_MSG_SNAPSHOT_RESULT:
		SAME(u.snapshot_result.index);
		SAME(u.snapshot_result.next_offset);
		SAME(u.snapshot_result.done);
		return true;
	case BATON_MSG_TIMEOUT_NOW:
		return true;
	case BATON_MSG_READ_INDEX:
		SAME(u.read_index.request_id);
		return true;
	case BATON_MSG_READ_INDEX_RESULT:
		SAME(u.read_index_result.request_id);
		SAME(u.read_index_result.read_index);
		SAME(u.read_index_result.status);
		return true;
	case BATON_MSG_INFO:
		SAME(u.info.seq);
		return true;
	case BATON_MSG_INFO_RESULT:
		SAME(u.info_result.seq);
		SAME(u.info_result.memory_max_bytes);
		return profile_eq(&a->u.info_result.profile,
				  &b->u.info_result.profile, diff);
	default:
		*diff = "type (unknown)";
		return false;
	}
}

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

static bool handshake_eq(const struct baton_peer_handshake *a,
			 const struct baton_peer_handshake *b,
			 const char **diff)
{
	SAME(node_id);
	if (!str_eq(a->cluster_id, b->cluster_id)) {
		*diff = "cluster_id";
		return false;
	}
	if (!str_eq(a->peer_addr, b->peer_addr)) {
		*diff = "peer_addr";
		return false;
	}
	SAME(has_auth);
	if (a->has_auth &&
	    !bytes_eq(a->auth_nonce, b->auth_nonce, sizeof a->auth_nonce)) {
		*diff = "auth_nonce";
		return false;
	}
	SAME(has_cluster_uuid);
	if (a->has_cluster_uuid && !bytes_eq(a->cluster_uuid, b->cluster_uuid,
					     sizeof a->cluster_uuid)) {
		*diff = "cluster_uuid";
		return false;
	}
	return profile_eq(&a->profile, &b->profile, diff);
}

static bool command_eq(const struct baton_peer_command *a,
		       const struct baton_peer_command *b, const char **diff)
{
	SAME(argc);
	for (int i = 0; i < a->argc; i++) {
		SAME(lens[i]);
		if (!bytes_eq(a->argv[i], b->argv[i], a->lens[i])) {
			*diff = "argv";
			return false;
		}
	}
	return true;
}

static bool forward_eq(const struct baton_peer_forward *a,
		       const struct baton_peer_forward *b, const char **diff)
{
	SAME(request_id);
	SAME(transaction);
	SAME(has_client_auth);
	if (a->has_client_auth &&
	    !bytes_eq(a->client_auth, b->client_auth, sizeof a->client_auth)) {
		*diff = "client_auth";
		return false;
	}
	SAME(n_commands);
	for (uint32_t c = 0; c < a->n_commands; c++)
		if (!command_eq(&a->commands[c], &b->commands[c], diff))
			return false;
	SAME(n_watches);
	for (uint32_t w = 0; w < a->n_watches; w++) {
		SAME(watches[w].key_len);
		SAME(watches[w].hash);
		if (!bytes_eq(a->watches[w].key, b->watches[w].key,
			      a->watches[w].key_len)) {
			*diff = "watched key";
			return false;
		}
	}
	return true;
}

bool fix_versions_eq(const struct baton_version_state *a,
		     const struct baton_version_state *b, const char **diff)
{
	SAME(machine.value);
	SAME(floor.major);
	SAME(floor.minor);
	SAME(floor.patch);
	SAME(n);
	for (uint32_t i = 0; i < a->n; i++) {
		SAME(members[i].id);
		if (!profile_eq(&a->members[i].profile, &b->members[i].profile,
				diff))
			return false;
	}
	SAME(downgrade.target.major);
	SAME(downgrade.target.minor);
	SAME(downgrade.target.patch);
	SAME(downgrade.prev_floor.major);
	SAME(downgrade.prev_floor.minor);
	SAME(downgrade.prev_floor.patch);
	SAME(downgrade.prev_machine.value);
	SAME(downgrade.since);
	SAME(held);
	return true;
}

static bool reply_eq(const struct baton_peer_handshake_reply *a,
		     const struct baton_peer_handshake_reply *b,
		     const char **diff)
{
	SAME(accepted);
	SAME(proto.value);
	if (!str_eq(a->reason, b->reason)) {
		*diff = "reason";
		return false;
	}
	if (!handshake_eq(&a->self, &b->self, diff))
		return false;
	SAME(has_auth_mac);
	if (a->has_auth_mac &&
	    !bytes_eq(a->auth_mac, b->auth_mac, sizeof a->auth_mac)) {
		*diff = "auth_mac";
		return false;
	}
	SAME(removed);
	SAME(has_cluster);
	if (!a->has_cluster)
		return true;
	SAME(cluster.leader_id);
	SAME(cluster.last_index);
	if (!str_eq(a->cluster.leader_peer_addr, b->cluster.leader_peer_addr)) {
		*diff = "cluster.leader_peer_addr";
		return false;
	}
	SAME(cluster.strict_release.major);
	SAME(cluster.strict_release.minor);
	SAME(cluster.strict_release.patch);
	return fix_versions_eq(&a->cluster.versions, &b->cluster.versions,
			       diff);
}

static bool join_eq(const struct baton_peer_join *a,
		    const struct baton_peer_join *b, const char **diff)
{
	SAME(node_id);
	if (!str_eq(a->peer_addr, b->peer_addr) ||
	    !str_eq(a->client_addr, b->client_addr)) {
		*diff = "join address";
		return false;
	}
	return profile_eq(&a->profile, &b->profile, diff);
}

static bool join_reply_eq(const struct baton_peer_join_reply *a,
			  const struct baton_peer_join_reply *b,
			  const char **diff)
{
	SAME(accepted);
	SAME(leader_id);
	if (!str_eq(a->reason, b->reason) ||
	    !str_eq(a->leader_peer_addr, b->leader_peer_addr) ||
	    !str_eq(a->leader_client_addr, b->leader_client_addr)) {
		*diff = "join reply string";
		return false;
	}
	return profile_eq(&a->leader, &b->leader, diff);
}

static bool forward_reply_eq(const struct baton_peer_forward_reply *a,
			     const struct baton_peer_forward_reply *b,
			     const char **diff)
{
	SAME(request_id);
	if ((a->error == NULL) != (b->error == NULL) ||
	    !str_eq(a->error, b->error)) {
		*diff = "error";
		return false;
	}
	SAME(resp_len);
	if (!bytes_eq(a->resp_reply, b->resp_reply, a->resp_len)) {
		*diff = "resp_reply";
		return false;
	}
	return true;
}

bool fix_frame_eq(const struct baton_peer_frame *a,
		  const struct baton_peer_frame *b, const char **diff)
{
	SAME(kind);
	switch (a->kind) {
	case BATON_PEER_HANDSHAKE:
		return handshake_eq(&a->handshake, &b->handshake, diff);
	case BATON_PEER_HANDSHAKE_REPLY:
		return reply_eq(&a->handshake_reply, &b->handshake_reply, diff);
	case BATON_PEER_RAFT:
		return fix_msg_eq(&a->raft, &b->raft, diff);
	case BATON_PEER_FORWARD:
		return forward_eq(&a->forward, &b->forward, diff);
	case BATON_PEER_FORWARD_REPLY:
		return forward_reply_eq(&a->forward_reply, &b->forward_reply,
					diff);
	case BATON_PEER_JOIN:
		return join_eq(&a->join, &b->join, diff);
	case BATON_PEER_JOIN_REPLY:
		return join_reply_eq(&a->join_reply, &b->join_reply, diff);
	case BATON_PEER_HANDSHAKE_AUTH:
		if (!bytes_eq(a->handshake_auth.mac, b->handshake_auth.mac,
			      sizeof a->handshake_auth.mac)) {
			*diff = "handshake_auth.mac";
			return false;
		}
		return true;
	default:
		SAME(unknown.body);
		SAME(unknown.raft_type);
		return true;
	}
}

int fix_encode_frame(const struct baton_peer_frame *f, struct baton_buf *out)
{
	switch (f->kind) {
	case BATON_PEER_HANDSHAKE:
		return baton_peer_encode_handshake(&f->handshake, out);
	case BATON_PEER_HANDSHAKE_REPLY:
		return baton_peer_encode_handshake_reply(&f->handshake_reply,
							 out);
	case BATON_PEER_HANDSHAKE_AUTH:
		return baton_peer_encode_handshake_auth(&f->handshake_auth,
							out);
	default:
		return baton_peer_encode_frame(FIX_P1, f, out);
	}
}

int fix_encode_forward(uint64_t request_id, int argc,
		       const uint8_t *const *argv, const size_t *lens,
		       struct baton_buf *out)
{
	struct baton_peer_command c = {argc, argv, lens};
	struct baton_peer_forward f = {
		.request_id = request_id, .n_commands = 1, .commands = &c};
	return baton_peer_encode_forward(FIX_P1, &f, out);
}

int fix_decode_one(const uint8_t *data, size_t len, struct baton_peer_frame *f)
{
	size_t body_len = 0;
	int rv = baton_peer_split(data, len, &body_len);
	if (rv != 1 || body_len + BATON_PEER_PREFIX_LEN != len)
		return -1;
	return baton_peer_decode(FIX_P1, data + BATON_PEER_PREFIX_LEN, body_len,
				 f);
}

/* ---- a minimal protobuf writer ---------------------------------------------
 */

void pw_varint(struct baton_buf *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;
	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v != 0)
			b[n] |= 0x80;
		n++;
	} while (v != 0);
	int rv = baton_buf_append(w, b, n);
	assert(rv == 0);
	(void)rv;
}

void pw_uint(struct baton_buf *w, uint32_t field, uint64_t v)
{
	pw_varint(w, (uint64_t)field << 3 | 0);
	pw_varint(w, v);
}

void pw_bytes(struct baton_buf *w, uint32_t field, const void *p, size_t n)
{
	pw_varint(w, (uint64_t)field << 3 | 2);
	pw_varint(w, n);
	int rv = baton_buf_append(w, p, n);
	assert(rv == 0);
	(void)rv;
}

void pw_msg(struct baton_buf *w, uint32_t field, const struct baton_buf *m)
{
	pw_bytes(w, field, m->data, m->len);
}
