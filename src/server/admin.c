/*
 * The admin commands of batonctl (docs/batond.md): BATON.NODE,
 * BATON.MEMBERS, BATON.ADD, BATON.PROMOTE, BATON.REMOVE, BATON.TRANSFER
 * (and BATON.TEST.PROPOSE in test builds); BATON.DOWNGRADE is downgrade.c's.
 * commands.c dispatches to them. INFO is info.c's; the version facts it
 * shares with BATON.NODE are here.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "address.h"
#include "log.h"
#include "server.h"

/* A decimal argument; false if it is not one. */
static bool arg_u64(const struct command_ctx *x, int i, uint64_t *v)
{
	if (i >= x->argc || x->lens[i] == 0 || x->lens[i] > 20)
		return false;
	char buf[24];
	memcpy(buf, x->argv[i], x->lens[i]);
	buf[x->lens[i]] = '\0';
	char *end;
	unsigned long long n = strtoull(buf, &end, 10);
	if (*end != '\0' || buf[0] == '-')
		return false;
	*v = n;
	return true;
}

/* The node id of argument 1, positive; false once the error is in the
 * reply. */
static bool arg_node_id(struct command_ctx *x, uint64_t *id)
{
	if (arg_u64(x, 1, id) && *id != 0)
		return true;
	resp_error(command_out(x), "ERR node id must be a positive integer");
	return false;
}

static const char *role_name(uint32_t role)
{
	switch (role) {
	case BATON_LEADER:
		return "leader";
	case BATON_CANDIDATE:
		return "candidate";
	case BATON_PRE_CANDIDATE:
		return "pre-candidate";
	default:
		return "follower";
	}
}

/* ---- versions ------------------------------------------------------------ */

/* The version facts an operator watches (INFO "# Versions", BATON.NODE). */
struct versions_view {
	const struct baton_profile *profile; /* what this node runs */
	char release[BATON_RELEASE_STR_MAX];
	uint32_t machine; /* in force at the applied index */
	const char *strategy;
	/* "node 3: machine_max 1; node 2: unknown", or "". */
	char waits[BATON_MAX_MEMBERS * 40];
	/* "no", "yes (machine version 2)" or "yes (release 1.1.0)". */
	char needs[64];
	/* Leader eligibility and the release floor (of the log's latest
	 * version entry, committed or not: what rule 1 reads). */
	char floor[BATON_RELEASE_STR_MAX];
	char eligible[BATON_STALL_TEXT_MAX];
	const char *policy;
	char downgrade[96];
};

static void waits_add(struct versions_view *v, baton_node_id id,
		      const struct baton_profile *p)
{
	size_t used = strlen(v->waits);
	char item[64];
	if (p != NULL)
		snprintf(item, sizeof item, "node %" PRIu64 ": machine_max %u",
			 id, p->machine_max.value);
	else
		snprintf(item, sizeof item, "node %" PRIu64 ": unknown", id);
	snprintf(v->waits + used, sizeof v->waits - used, "%s%s",
		 used > 0 ? "; " : "", item);
}

/* What keeps the machine version from rising to this node's machine_max:
 * the leader knows it live (baton_raft_upgrade_status); elsewhere the
 * log's version table tells it, members without a row as unknown. */
static void upgrade_waits(struct server *s, const struct baton_node_status *st,
			  struct versions_view *v)
{
	static struct baton_upgrade_status us;
	baton_node_upgrade_status(s->node, &us);
	if (us.leader) {
		for (uint32_t i = 0; i < us.n_waiting; i++) {
			const struct baton_profile *p = NULL;
			for (uint32_t k = 0; k < us.n; k++)
				if (us.members[k].id == us.waiting[i] &&
				    us.members[k].known)
					p = &us.members[k].profile;
			waits_add(v, us.waiting[i], p);
		}
		return;
	}
	uint32_t target = v->profile->machine_max.value;
	if (st->raft.leader_id == 0 ||
	    target <= st->raft.versions.machine.value)
		return;
	for (uint32_t i = 0; i < st->raft.config.n; i++) {
		baton_node_id id = st->raft.config.members[i].id;
		const struct baton_member_versions *row =
			baton_version_state_find(&st->raft.versions, id);
		if (row == NULL)
			waits_add(v, id, NULL);
		else if (row->profile.machine_max.value < target)
			waits_add(v, id, &row->profile);
	}
}

static void versions_view(struct server *s, const struct baton_node_status *st,
			  struct versions_view *v)
{
	memset(v, 0, sizeof *v);
	v->profile = &s->cfg.profile;
	baton_release_format(v->profile->release, v->release);
	v->machine = st->applied_versions.machine.value;
	v->strategy = s->cfg.machine_upgrade == BATON_UPGRADE_QUORUM ? "quorum"
		      : s->cfg.machine_upgrade == BATON_UPGRADE_MANUAL
			      ? "manual"
			      : "all";
	upgrade_waits(s, st, v);
	char r[BATON_RELEASE_STR_MAX];
	if (st->raft.needs_machine.value != 0)
		snprintf(v->needs, sizeof v->needs, "yes (machine version %u)",
			 st->raft.needs_machine.value);
	else if (st->raft.needs_release.major != 0 ||
		 st->raft.needs_release.minor != 0 ||
		 st->raft.needs_release.patch != 0)
		snprintf(v->needs, sizeof v->needs, "yes (release %s)",
			 baton_release_format(st->raft.needs_release, r));
	else
		snprintf(v->needs, sizeof v->needs, "no");
	versions_floor_text(st->raft.versions.floor, v->floor);
	char why[BATON_STALL_TEXT_MAX - 8];
	uint32_t e = baton_node_eligibility(s->node, why, sizeof why);
	versions_eligible_text(e, why, v->eligible, sizeof v->eligible);
	v->policy = versions_policy_name(s->cfg.election_policy);
	versions_downgrade_text(&st->raft.versions.downgrade, v->downgrade,
				sizeof v->downgrade);
}

const char *admin_role_name(uint32_t role)
{
	return role_name(role);
}

void admin_info_versions(struct server *s, const struct baton_node_status *st,
			 struct baton_buf *b)
{
	struct versions_view v;
	versions_view(s, st, &v);
	char text[1024 + 2 * BATON_STALL_TEXT_MAX + sizeof v.waits];
	int n = snprintf(
		text, sizeof text,
		"# Versions\r\nrelease:%s\r\npeer_protocol:%u-%u\r\n"
		"machine_max:%u\r\nmachine_version:%u\r\nmachine_upgrade:%s"
		"\r\nupgrade_waits_for:%s\r\nneeds_upgrade:%s"
		"\r\nstrict_release:%s\r\nrelease_floor:%s"
		"\r\nleader_eligible:%s\r\nelection_policy:%s"
		"\r\ndowngrade:%s\r\nupgrade_hold:%s\r\n",
		v.release, v.profile->proto_min.value,
		v.profile->proto_max.value, v.profile->machine_max.value,
		v.machine, v.strategy, v.waits, v.needs,
		s->cfg.strict_release ? "yes" : "no", v.floor, v.eligible,
		v.policy, v.downgrade, st->raft.versions.held ? "yes" : "no");
	if (n > 0)
		baton_buf_append(b, text,
				 (size_t)n < sizeof text ? (size_t)n
							 : sizeof text - 1);
}

/* INFO "# Persistence": the node's own snapshots, written in slices
 * between the loop's other work (docs/node.md). */
void admin_info_persistence(struct server *s,
			    const struct baton_node_status *st,
			    struct baton_buf *b)
{
	const struct baton_pipeline_snapshot_stats *k = &st->snapshots;
	struct kv_snapshot_stats kv;
	kv_snapshot_stats(s->machine.kv, &kv);
	char text[1024];
	int n = snprintf(
		text, sizeof text,
		"# Persistence\r\nloading:0\r\nsnapshot_in_progress:%d"
		"\r\nsnapshots_taken:%" PRIu64
		"\r\nsnapshots_abandoned:%" PRIu64
		"\r\nsnapshot_last_index:%" PRIu64
		"\r\nsnapshot_last_bytes:%" PRIu64
		"\r\nsnapshot_last_slices:%u\r\nsnapshot_last_ms:%" PRIu64
		"\r\nsnapshot_slice_max_us:%" PRIu64
		"\r\nsnapshot_slice_max_us_ever:%" PRIu64
		"\r\nsnapshot_preimages:%" PRIu64
		"\r\nsnapshot_preimage_bytes:%" PRIu64 "\r\n",
		k->in_progress ? 1 : 0, k->snapshots_taken,
		k->snapshots_abandoned, k->last_index, k->last_bytes,
		k->last_slices, k->last_ms, st->snapshot_slice_max_us,
		st->snapshot_slice_max_us_ever, kv.preimages, kv.bytes_kept);
	if (n > 0 && (size_t)n < sizeof text)
		baton_buf_append(b, text, (size_t)n);
}

/* ---- admin commands -------------------------------------------------------
 */

void admin_map_field(struct baton_buf *b, const char *k, const char *fmt, ...)
{
	char v[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	resp_bulk(b, k, strlen(k));
	resp_bulk(b, v, n > 0 ? (size_t)n : 0);
}

int admin_node(struct command_ctx *x)
{
	struct server *s = x->s;
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	const struct book_entry *me = server_address(s, s->cfg.id);
	struct baton_buf *b = command_out(x);
	struct versions_view v;
	versions_view(s, &st, &v);
	resp_array(b, 2 * 29);
	admin_map_field(b, "id", "%" PRIu64, st.raft.id);
	const struct baton_member *self =
		baton_config_find(&st.raft.config, st.raft.id);
	admin_map_field(b, "role", "%s",
			s->identity.removed ? "removed"
			: self != NULL && self->role == BATON_LEARNER
				? "learner"
				: role_name(st.raft.role));
	admin_map_field(b, "term", "%" PRIu64, st.raft.term);
	admin_map_field(b, "leader", "%" PRIu64, st.raft.leader_id);
	admin_map_field(b, "commit", "%" PRIu64, st.raft.commit_index);
	admin_map_field(b, "applied", "%" PRIu64, st.applied);
	admin_map_field(b, "last_index", "%" PRIu64, st.raft.last_index);
	admin_map_field(b, "snapshot_index", "%" PRIu64,
			st.raft.snapshot_index);
	admin_map_field(b, "release", "%s", v.release);
	admin_map_field(b, "proto_min", "%u", v.profile->proto_min.value);
	admin_map_field(b, "proto_max", "%u", v.profile->proto_max.value);
	admin_map_field(b, "machine_max", "%u", v.profile->machine_max.value);
	admin_map_field(b, "machine_version", "%u", v.machine);
	admin_map_field(b, "machine_upgrade", "%s", v.strategy);
	admin_map_field(b, "upgrade_waits_for", "%s", v.waits);
	admin_map_field(b, "needs_upgrade", "%s", v.needs);
	admin_map_field(b, "strict_release", "%s",
			s->cfg.strict_release ? "yes" : "no");
	admin_map_field(b, "release_floor", "%s", v.floor);
	admin_map_field(b, "leader_eligible", "%s", v.eligible);
	admin_map_field(b, "election_policy", "%s", v.policy);
	admin_map_field(b, "downgrade", "%s", v.downgrade);
	admin_map_field(b, "peer_addr", "%s", s->cfg.peer_listen);
	admin_map_field(b, "client_addr", "%s",
			me ? me->client : s->cfg.listen);
	admin_map_field(b, "storage", "%s",
			st.storage_failed ? "failed" : "ok");
	admin_map_field(b, "stalled_index", "%" PRIu64, st.stalled_index);
	admin_map_field(b, "stalled", "%s", st.stalled_why);
	char uuid[BATON_CLUSTER_UUID_STR_MAX];
	admin_map_field(b, "cluster_id", "%s", s->cfg.cluster_id);
	admin_map_field(b, "cluster_uuid", "%s",
			identity_uuid_text(s, uuid, sizeof uuid));
	admin_map_field(b, "removed", "%s%s%s",
			s->identity.removed ? "yes (" : "no",
			s->identity.removed ? s->identity.removed_why : "",
			s->identity.removed ? ")" : "");
	return command_done(x);
}

/* A member's versions: the leader's live table (info replies of this
 * term) when it knows them, else the log's version table. */
const char *server_member_versions(const struct baton_node_status *st,
				   const struct baton_upgrade_status *us,
				   baton_node_id id, struct baton_profile *out)
{
	for (uint32_t k = 0; us->leader && k < us->n; k++) {
		if (us->members[k].id == id && us->members[k].known) {
			*out = us->members[k].profile;
			return "live";
		}
	}
	const struct baton_member_versions *row =
		baton_version_state_find(&st->raft.versions, id);
	if (row == NULL)
		return "unknown";
	*out = row->profile;
	return "log";
}

int admin_members(struct command_ctx *x)
{
	struct server *s = x->s;
	struct baton_node_status st;
	baton_node_status(s->node, &st);
	static struct baton_upgrade_status us;
	baton_node_upgrade_status(s->node, &us);
	struct baton_buf *b = command_out(x);
	resp_array(b, st.raft.config.n);
	for (uint32_t i = 0; i < st.raft.config.n; i++) {
		const struct baton_member *m = &st.raft.config.members[i];
		const struct book_entry *e = server_address(s, m->id);
		resp_array(b, 2 * 10);
		admin_map_field(b, "id", "%" PRIu64, m->id);
		admin_map_field(b, "role", "%s",
				m->role == BATON_VOTER ? "voter" : "learner");
		admin_map_field(b, "peer_addr", "%s", e ? e->peer : "");
		admin_map_field(b, "client_addr", "%s", e ? e->client : "");
		if (st.raft.role == BATON_LEADER)
			admin_map_field(b, "match", "%" PRIu64, st.match[i]);
		else
			admin_map_field(b, "match", "-");
		struct baton_profile p;
		const char *source =
			server_member_versions(&st, &us, m->id, &p);
		admin_map_field(b, "versions", "%s", source);
		if (strcmp(source, "unknown") == 0) {
			admin_map_field(b, "release", "-");
			admin_map_field(b, "proto_min", "-");
			admin_map_field(b, "proto_max", "-");
			admin_map_field(b, "machine_max", "-");
			continue;
		}
		char r[BATON_RELEASE_STR_MAX];
		admin_map_field(b, "release", "%s",
				baton_release_format(p.release, r));
		admin_map_field(b, "proto_min", "%u", p.proto_min.value);
		admin_map_field(b, "proto_max", "%u", p.proto_max.value);
		admin_map_field(b, "machine_max", "%u", p.machine_max.value);
	}
	return command_done(x);
}

bool admin_require_leader(struct command_ctx *x)
{
	struct server *s = x->s;
	if (s->leader == s->cfg.id)
		return true;
	const struct book_entry *e = server_address(s, s->leader);
	if (s->leader == 0)
		resp_error(command_out(x),
			   "TRYAGAIN no leader elected yet; retry");
	else
		resp_error(command_out(x),
			   "NOTLEADER leader is %" PRIu64 " at %s", s->leader,
			   e ? e->client : "?");
	command_done(x);
	return false;
}

static void on_admin_done(void *data, int status)
{
	struct slot *sl = data;
	if (status != 0) {
		slot_error(sl, status);
		return;
	}
	resp_simple(slot_buf(sl), "OK");
	slot_done(sl);
}

struct add_ctx {
	struct server *s;
	struct slot *sl;
	baton_node_id id;
};

static void on_address_applied(void *data, int status, const uint8_t *reply,
			       size_t len)
{
	struct add_ctx *a = data;
	(void)reply;
	(void)len;
	if (status == 0)
		status = baton_node_add_learner(a->s->node, a->id,
						on_admin_done, a->sl);
	if (status != 0)
		slot_error(a->sl, status);
	free(a);
}

int admin_add(struct command_ctx *x)
{
	uint64_t id;
	if (x->argc != 4)
		return command_wrong_args(x);
	if (!arg_node_id(x, &id))
		return command_done(x);
	if (!admin_require_leader(x))
		return 0;
	if (identity_is_removed(x->s, id)) {
		resp_error(command_out(x),
			   "ERR node %" PRIu64 " was removed from this "
			   "cluster, and a removed id is never a member "
			   "again: start the new node with another --id",
			   id);
		return command_done(x);
	}
	struct book_entry e = {.id = id};
	command_arg_str(x, 2, e.peer, sizeof e.peer);
	command_arg_str(x, 3, e.client, sizeof e.client);
	char why[BATON_ADDR_WHY_MAX];
	if (baton_parse_addr(e.peer, why, sizeof why) != 0 ||
	    baton_parse_addr(e.client, why, sizeof why) != 0) {
		resp_error(command_out(x), "ERR %s", why);
		return command_done(x);
	}
	/* First every node learns where it listens, then it joins. */
	struct add_ctx *a = calloc(1, sizeof *a);
	struct baton_buf b;
	baton_buf_init(&b);
	int rv = a == NULL ? BATON_ENOMEM
			   : server_machine_encode_address(&e, &b);
	if (rv == 0) {
		*a = (struct add_ctx){x->s, x->sl, id};
		rv = baton_node_propose(x->s->node, b.data, b.len,
					on_address_applied, a);
	}
	baton_buf_free(&b);
	if (rv != 0) {
		free(a);
		slot_error(x->sl, rv);
	}
	return 0;
}

static int cmd_member_change(struct command_ctx *x,
			     int (*op)(struct baton_node *, baton_node_id,
				       baton_node_done_cb, void *))
{
	uint64_t id = 0;
	bool optional = op == baton_node_transfer;
	if (x->argc != 2 && !(optional && x->argc == 1))
		return command_wrong_args(x);
	if (x->argc == 2 && !arg_u64(x, 1, &id)) {
		resp_error(command_out(x),
			   "ERR node id must be a positive integer");
		return command_done(x);
	}
	if (!admin_require_leader(x))
		return 0;
	int rv = op(x->s->node, id, on_admin_done, x->sl);
	if (rv != 0)
		slot_error(x->sl, rv);
	return 0;
}

int admin_promote(struct command_ctx *x)
{
	return cmd_member_change(x, baton_node_promote);
}

/* BATON.REMOVE: first the removed-id entry, so that the cluster never
 * takes the id back and the removed node learns it was removed (from its
 * own log, or from a member refusing its connections); then the
 * configuration change. A leader finishes a removal interrupted between
 * the two (identity.c). Without the entry (an older release floor), the
 * configuration change alone. */
struct remove_ctx {
	struct server *s;
	struct slot *sl;
	baton_node_id id;
};

static void on_removed_cleanup(struct remove_ctx *r)
{
	if (r->s->identity.removing == r->id)
		r->s->identity.removing = 0;
	free(r);
}

static void on_removed(void *data, int status)
{
	struct remove_ctx *r = data;
	on_admin_done(r->sl, status);
	on_removed_cleanup(r);
}

static void on_removed_id_applied(void *data, int status, const uint8_t *reply,
				  size_t len)
{
	struct remove_ctx *r = data;
	if (status == 0 && len > 0 && reply[0] == '-') {
		/* The machine refused it (its list is full): say why. */
		if (baton_buf_append(slot_buf(r->sl), reply, len) == 0)
			slot_done(r->sl);
		else
			slot_error(r->sl, BATON_ENOMEM);
		on_removed_cleanup(r);
		return;
	}
	if (status == 0)
		status = baton_node_remove(r->s->node, r->id, on_removed, r);
	if (status != 0) {
		slot_error(r->sl, status);
		on_removed_cleanup(r);
	}
}

/* A cluster needs a voter: the core refuses to remove the last one. */
static bool is_last_voter(const struct baton_config *c, baton_node_id id)
{
	const struct baton_member *m = baton_config_find(c, id);
	if (m == NULL || m->role != BATON_VOTER)
		return false;
	uint32_t voters = 0;
	for (uint32_t i = 0; i < c->n; i++)
		voters += c->members[i].role == BATON_VOTER ? 1u : 0u;
	return voters == 1;
}

int admin_remove(struct command_ctx *x)
{
	uint64_t id = 0;
	if (x->argc != 2)
		return command_wrong_args(x);
	if (!arg_node_id(x, &id))
		return command_done(x);
	if (!admin_require_leader(x))
		return 0;
	struct server *s = x->s;
	struct baton_node_status *st = &s->identity.status;
	baton_node_status(s->node, st);
	if (is_last_voter(&st->raft.config, id)) {
		/* Refused before the removed-id entry: once written, the
		 * leader would try forever to finish a removal the core
		 * refuses, with its own id on the removed list. */
		resp_error(command_out(x),
			   "ERR node %" PRIu64 " is the cluster's only voter: "
			   "add and promote another member before removing "
			   "it",
			   id);
		return command_done(x);
	}
	if (baton_config_find(&st->raft.config, id) == NULL ||
	    !identity_entries_allowed(s))
		return cmd_member_change(x, baton_node_remove);
	struct remove_ctx *r = calloc(1, sizeof *r);
	struct baton_buf b;
	baton_buf_init(&b);
	int rv = r == NULL ? BATON_ENOMEM
			   : server_machine_encode_removed(id, &b);
	if (rv == 0) {
		*r = (struct remove_ctx){s, x->sl, id};
		rv = baton_node_propose(s->node, b.data, b.len,
					on_removed_id_applied, r);
	}
	baton_buf_free(&b);
	if (rv != 0) {
		free(r);
		slot_error(x->sl, rv);
		return 0;
	}
	s->identity.removing = id;
	return 0;
}

int admin_transfer(struct command_ctx *x)
{
	return cmd_member_change(x, baton_node_transfer);
}

#if BATON_TEST_HOOKS
/* Test builds only (server.h): BATON.TEST.PROPOSE <payload> proposes the
 * raw bytes as a command entry, whatever they hold, so a test can give the
 * nodes an entry of a "future release". */
static void on_raw_applied(void *data, int status, const uint8_t *reply,
			   size_t len)
{
	struct slot *sl = data;
	if (status != 0) {
		slot_error(sl, status);
		return;
	}
	int rv = len > 0 ? baton_buf_append(slot_buf(sl), reply, len)
			 : resp_simple(slot_buf(sl), "OK");
	if (rv != 0) {
		slot_error(sl, rv);
		return;
	}
	slot_done(sl);
}

int admin_test_propose(struct command_ctx *x)
{
	if (x->argc != 2)
		return command_wrong_args(x);
	if (!admin_require_leader(x))
		return 0;
	int rv = baton_node_propose(x->s->node, x->argv[1], x->lens[1],
				    on_raw_applied, x->sl);
	if (rv != 0)
		slot_error(x->sl, rv);
	return 0;
}
#endif
