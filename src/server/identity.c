/*
 * Whose this node is (docs/batond.md, "Identity"): the cluster's UUID,
 * drawn by the first leader and recorded in every data directory once
 * applied; the ids removed from the cluster, which the state machine
 * remembers; and this node's own removal, which it learns by applying its
 * removed-id entry or from a member that refuses its connection, and after
 * which it never stands for election and serves no client.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

/* A leader writes the 'U' and 'R' entries only once the release floor of
 * the log is at least the release that introduced them (no older release
 * can then be a member that must apply them) and it runs that release or
 * a later one itself (not an emulated older one). */

_Static_assert(SERVER_UUID_LEN == BATON_CLUSTER_UUID_LEN,
	       "the machine's UUID is the data directory's");

bool identity_entries_allowed(struct server *s)
{
	struct baton_node_status *st = &s->identity.status;
	baton_node_status(s->node, st);
	struct baton_release identity_since = baton_release_identity_since();
	return baton_release_compare(s->cfg.profile.release, identity_since) >=
		       0 &&
	       baton_release_compare(st->raft.versions.floor, identity_since) >=
		       0;
}

/* 16 random bytes as a version-4 UUID (RFC 4122): getrandom, else
 * /dev/urandom. 0, or -1 when neither gives them. */
static int draw_uuid(uint8_t uuid[SERVER_UUID_LEN])
{
	ssize_t n = getrandom(uuid, SERVER_UUID_LEN, 0);
	if (n != (ssize_t)SERVER_UUID_LEN) {
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, uuid, SERVER_UUID_LEN) : -1;
		if (fd >= 0)
			close(fd);
		if (n != (ssize_t)SERVER_UUID_LEN)
			return -1;
	}
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
	return 0;
}

const char *identity_uuid_text(struct server *s, char *buf, size_t cap)
{
	char u[BATON_CLUSTER_UUID_STR_MAX];
	struct baton_identity id;
	baton_node_identity(s->node, &id);
	if (s->machine.has_uuid)
		snprintf(buf, cap, "%s",
			 baton_cluster_uuid_format(s->machine.uuid, u));
	else if (id.has_uuid) /* recorded; the log not applied that far */
		snprintf(buf, cap, "%s",
			 baton_cluster_uuid_format(id.cluster_uuid, u));
	else
		snprintf(buf, cap, "-");
	return buf;
}

/* ---- this node removed ----------------------------------------------------
 */

static void retire(struct server *s, const char *why)
{
	if (s->identity.removed)
		return;
	s->identity.removed = true;
	snprintf(s->identity.removed_why, sizeof s->identity.removed_why, "%s",
		 why);
	LOG_ERROR("removed: this node (id %" PRIu64 ") was removed from the "
		  "cluster: %s; it no longer stands for election or serves "
		  "clients; stop it (its data directory is no longer "
		  "needed). A node that should be a member again joins "
		  "under a new id (docs/batond.md, \"Replacing a member\")",
		  s->cfg.id, why);
	baton_node_retire(s->node);
	route_fail_all(s, "this node was removed from the cluster");
}

void identity_told_removed(struct server *s, baton_node_id by,
			   const char *reason)
{
	char why[SERVER_REMOVED_WHY_MAX];
	snprintf(why, sizeof why, "node %" PRIu64 " says so (%.400s)", by,
		 reason);
	retire(s, why);
}

bool identity_is_removed(struct server *s, baton_node_id id)
{
	return server_machine_removed(&s->machine, id);
}

bool server_reply_if_removed(struct server *s, struct baton_buf *b)
{
	if (!s->identity.removed)
		return false;
	resp_error(b,
		   "ERR this node was removed from the cluster (%s); it "
		   "serves no more: use another member",
		   s->identity.removed_why);
	return true;
}

/* ---- what the log says ----------------------------------------------------
 */

static void on_uuid_applied(void *data, int status, const uint8_t *reply,
			    size_t len)
{
	struct server *s = data;
	(void)reply;
	(void)len;
	s->identity.proposing_uuid = false;
	if (status != 0)
		LOG_DEBUG("proposing the cluster uuid: %s",
			  baton_strerror(status));
}

/* The leader of a cluster born without one draws its UUID, once the
 * floor allows the entry; the first one applied is the cluster's. */
static void propose_uuid(struct server *s)
{
	if (s->machine.has_uuid || s->identity.proposing_uuid ||
	    s->leader != s->cfg.id || !identity_entries_allowed(s))
		return;
	uint8_t uuid[SERVER_UUID_LEN];
	if (draw_uuid(uuid) != 0) {
		LOG_ERROR("cannot draw a cluster uuid: no random bytes from "
			  "getrandom or /dev/urandom (%s)",
			  strerror(errno));
		return;
	}
	struct baton_buf b;
	baton_buf_init(&b);
	int rv = server_machine_encode_uuid(uuid, &b);
	if (rv == 0)
		rv = baton_node_propose(s->node, b.data, b.len, on_uuid_applied,
					s);
	baton_buf_free(&b);
	s->identity.proposing_uuid = rv == 0;
}

/* Record the applied UUID in the data directory (and the transport's
 * handshakes), once. */
static void record_uuid(struct server *s)
{
	if (!s->machine.has_uuid || s->identity.uuid_recorded)
		return;
	char err[512], u[BATON_CLUSTER_UUID_STR_MAX];
	int rv = baton_node_set_cluster_uuid(s->node, s->machine.uuid, err,
					     sizeof err);
	s->identity.uuid_recorded = true;
	if (rv == 0) {
		LOG_INFO("cluster uuid %s (recorded in %s)",
			 baton_cluster_uuid_format(s->machine.uuid, u),
			 s->cfg.data_dir);
		return;
	}
	/* The log of one cluster in the directory of another: refuse to
	 * take part rather than mix them. */
	LOG_ERROR("%s", err);
	char why[SERVER_REMOVED_WHY_MAX];
	snprintf(why, sizeof why, "its log belongs to another cluster: %.400s",
		 err);
	retire(s, why);
}

static void on_removal_done(void *data, int status)
{
	struct server *s = data;
	if (status != 0)
		LOG_DEBUG("finishing the removal of node %" PRIu64 ": %s",
			  s->identity.finishing, baton_strerror(status));
	s->identity.finishing = 0;
}

/* A removed id still in the configuration (its removal was interrupted
 * after its removed-id entry: a leader crashed): the leader finishes it. */
static void finish_removals(struct server *s)
{
	const struct baton_config *c = &s->identity.status.raft.config;
	if (s->leader != s->cfg.id || s->identity.finishing != 0 ||
	    s->identity.removing != 0)
		return;
	for (uint32_t i = 0; i < c->n; i++) {
		baton_node_id id = c->members[i].id;
		if (!server_machine_removed(&s->machine, id))
			continue;
		LOG_INFO("finishing the removal of node %" PRIu64 " (its "
			 "removed-id entry is applied, it is still in the "
			 "configuration)",
			 id);
		if (baton_node_remove(s->node, id, on_removal_done, s) == 0)
			s->identity.finishing = id;
		return;
	}
}

/* Stop dialling removed nodes (their addresses stay in the book). */
static void forget_removed(struct server *s)
{
	if (s->identity.forgotten == s->machine.removed_n)
		return;
	for (uint32_t i = 0; i < s->machine.removed_n; i++)
		baton_node_forget_peer(s->node, s->machine.removed[i]);
	s->identity.forgotten = s->machine.removed_n;
}

void identity_tick(struct server *s)
{
	if (s->node == NULL || s->identity.removed)
		return;
	record_uuid(s);
	if (s->identity.removed)
		return;
	baton_node_status(s->node, &s->identity.status);
	const struct baton_raft_status *rs = &s->identity.status.raft;
	/* Removed by an entry this node applied. The configuration change
	 * follows it (a leader finishes an interrupted one), and a follower
	 * never hears of it: the leader stops replicating to a node once the
	 * configuration without it is appended. A leader removing itself
	 * leads until that change commits. */
	if (server_machine_removed(&s->machine, s->cfg.id) &&
	    rs->role != BATON_LEADER) {
		retire(s, "the cluster's log records its removal");
		return;
	}
	forget_removed(s);
	propose_uuid(s);
	finish_removals(s);
}

static void on_soon(uv_timer_t *t)
{
	identity_tick(t->data);
}

/* Called while an entry is applied, inside a step of the node: the work
 * (a synced write, proposals, retiring) waits for the loop's next turn. */
static void on_identity_changed(void *data)
{
	struct server *s = data;
	uv_timer_start(&s->identity.soon, on_soon, 0, 0);
}

void identity_start(struct server *s)
{
	uv_timer_init(s->loop, &s->identity.soon);
	s->identity.soon.data = s;
	s->machine.identity_changed = on_identity_changed;
	identity_tick(s);
}

static bool app_is_removed(void *data, baton_node_id id)
{
	return identity_is_removed(data, id);
}

static void app_removed(void *data, baton_node_id by, const char *reason)
{
	identity_told_removed(data, by, reason);
}

void identity_node_app(struct server *s, struct baton_node_app *app)
{
	(void)s;
	app->is_removed = app_is_removed;
	app->removed = app_removed;
}
