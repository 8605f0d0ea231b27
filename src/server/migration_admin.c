/*
 * What a migration shows and what an operator asks of it (docs/relay.md):
 * INFO's "# Migration" section and BATON.MIGRATION STATUS, the node's
 * readiness (INFO's migration_ready, /ready), and BATON.MIGRATION
 * HANDOFF, ABORT, RESUME and UNFENCE (ATTACH is migration_attach.c). The
 * relay client, the view and the ticks are in migration.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "migration_internal.h"

/* ---- INFO and BATON.MIGRATION ------------------------------------------- */

static const char *phase(struct migration *g, const struct kv_migration *km)
{
	if (km->aborted && !km->authority && !km->sealed)
		return "aborted";
	if (mig_is_new_side(g)) {
		if (km->authority)
			return "authority";
		if (g->im.fenced_at != 0 || g->im.handoff_sent_ms != 0)
			return "handoff";
		if (km->snapshot_open)
			return "snapshot";
		if (km->importing)
			return "mirror";
		return g->active ? "requesting" : "waiting-for-activation";
	}
	if (km->fenced || g->authority_leader != 0)
		return "fenced";
	if (g->ex.open)
		return g->ex.snap_running ? "exporting-snapshot" : "exporting";
	return g->active ? "idle" : "waiting-for-activation";
}

bool migration_ready(struct server *s, const char **why)
{
	struct migration *g = s->migration;
	*why = "";
	if (g == NULL || !mig_is_new_side(g))
		return true;
	return mig_import_ready(g, why);
}

void migration_info(struct server *s, struct baton_buf *b)
{
	struct migration *g = s->migration;
	if (g == NULL)
		return;
	struct kv_migration km;
	mig_kv_state(g, &km);
	struct relay_client_status rs;
	relay_client_status(g->relay, &rs);
	struct proxy_stats ps;
	proxy_stats(s, &ps);
	const char *why = "";
	bool ready = migration_ready(s, &why);
	char text[4096];
	int n = snprintf(
		text, sizeof text,
		"\r\n# Migration\r\nmigration_side:%s\r\nmigration_phase:%s"
		"\r\nmigration_ready:%d\r\nmigration_not_ready:%s"
		"\r\nrelay:%s\r\nrelay_cluster:%s\r\nrelay_connected:%d"
		"\r\nrelay_active:%d\r\nrelay_view:%" PRIu64
		"\r\nrelay_view_nodes:%u\r\nimport_index:%" PRIu64
		"\r\nimport_old_applied:%" PRIu64
		"\r\nimport_authority_from:%" PRIu64
		"\r\nexport_session:%" PRIu64 "\r\nexport_acked:%" PRIu64
		"\r\nexport_sent:%" PRIu64 "\r\nfence_index:%" PRIu64
		"\r\nfenced:%d\r\nmigration_msgs_in:%" PRIu64
		"\r\nmigration_msgs_out:%" PRIu64
		"\r\nmigration_bad_msgs:%" PRIu64
		"\r\nmigration_forged:%" PRIu64
		"\r\nmigration_replayed:%" PRIu64
		"\r\nmigration_refused:%" PRIu64
		"\r\nmigration_sessions:%" PRIu64
		"\r\nmigration_snapshots:%" PRIu64 "\r\nrelay_resent:%" PRIu64
		"\r\nrelay_reconnects:%" PRIu64 "\r\nrelay_last_error:%s"
		"\r\nproxy_commands:%" PRIu64 "\r\nproxy_errors:%" PRIu64
		"\r\nproxy_upstreams_open:%" PRIu64
		"\r\nmigration_held:%u\r\nmigration_held_total:%" PRIu64 "\r\n",
		mig_is_new_side(g) ? "new" : "old", phase(g, &km),
		ready ? 1 : 0, why, s->cfg.relay, s->cfg.relay_cluster,
		rs.connected ? 1 : 0, rs.active ? 1 : 0, g->view_number,
		g->n_view, km.import_index, g->im.old_applied,
		km.authority_from, g->ex.session, g->ex.acked, g->ex.sent_index,
		g->ex.fence_index, km.fenced ? 1 : 0, g->stats.msgs_in,
		g->stats.msgs_out, g->stats.bad_msgs, g->stats.forged,
		g->stats.replayed, g->stats.refused, g->stats.sessions,
		g->stats.snapshots, rs.resent, rs.reconnects, rs.last_error,
		ps.commands, ps.errors, ps.upstreams_open, g->parked.n,
		g->stats.parked);
	if (n > 0 && (size_t)n < sizeof text)
		baton_buf_append(b, text, (size_t)n);
	if (!s->cfg.has_unsealed_release)
		return;
	/* Said wherever an operator looks: this link proves nothing. */
	char r[BATON_RELEASE_STR_MAX];
	n = snprintf(text, sizeof text,
		     "migration_unsealed_from:%s"
		     "\r\nmigration_unsealed_release:%s"
		     "\r\nmigration_unsealed_warning:messages with cluster %s "
		     "are NOT authenticated (format 1, --migrate-from-unsealed)"
		     "\r\nmigration_unsealed_in:%" PRIu64
		     "\r\nmigration_unsealed_out:%" PRIu64 "\r\n",
		     s->cfg.migrate_from,
		     baton_release_format(s->cfg.unsealed_release, r),
		     s->cfg.migrate_from, g->stats.unsealed_in,
		     g->stats.unsealed_out);
	if (n > 0 && (size_t)n < sizeof text)
		baton_buf_append(b, text, (size_t)n);
}

static void on_control_applied(void *data, int status, const uint8_t *reply,
			       size_t len)
{
	struct slot *sl = data;
	if (status != 0) {
		slot_error(sl, status);
		return;
	}
	/* The map's reply: +OK, or its -ERR saying why it refused. */
	int rv = baton_buf_append(slot_buf(sl), reply, len);
	if (rv != 0) {
		slot_error(sl, rv);
		return;
	}
	slot_done(sl);
}

/* BATON.MIGRATION ABORT | RESUME | UNFENCE: a CONTROL entry, proposed by
 * the leader; the reply is the map's. */
static int admin_control(struct command_ctx *x, enum kv_control_op op)
{
	struct server *s = x->s;
	struct migration *g = s->migration;
	const char *refusal = NULL;
	/* A fenced node restarted without the migration's flags may still
	 * be unfenced: the SEAL in its log refuses it once authority
	 * followed. */
	if (g == NULL && op != KV_CONTROL_UNFENCE)
		refusal = "ERR this node takes part in no migration (no "
			  "--relay)";
	else if (g == NULL)
		refusal = NULL;
	else if (!mig_is_new_side(g) && s->cfg.migrate_to[0] == '\0' &&
		 op != KV_CONTROL_UNFENCE)
		refusal = "ERR this node takes part in no migration (no "
			  "--migrate-to or --migrate-from)";
	else if (op == KV_CONTROL_UNFENCE && mig_is_new_side(g))
		refusal = "ERR unfence is for the old cluster (a node started "
			  "with --migrate-to)";
	else if (op == KV_CONTROL_UNFENCE &&
		 (g->ex.authority_seen || g->authority_leader != 0))
		refusal = "ERR unfence refused: the new cluster announced "
			  "write authority after this fence; lifting it would "
			  "give two clusters write authority";
	if (refusal != NULL) {
		resp_error(command_out(x), "%s", refusal);
		return command_done(x);
	}
	if (!admin_require_leader(x))
		return 0;
	struct baton_release its;
	baton_node_id old = mig_member_without_fence(s, &its);
	if (old != 0) {
		char r[BATON_RELEASE_STR_MAX];
		resp_error(command_out(x),
			   "ERR member %" PRIu64 " runs release %s, which "
			   "does not know this entry; upgrade it first",
			   old, baton_release_format(its, r));
		return command_done(x);
	}
	int rv = mig_propose_control(s, op, on_control_applied, x->sl);
	if (rv != 0)
		slot_error(x->sl, rv);
	else
		LOG_WARN("migration: %s asked by a client: proposed",
			 op == KV_CONTROL_ABORT	   ? "abort"
			 : op == KV_CONTROL_RESUME ? "resume"
						   : "unfence");
	return 0;
}

int admin_migration(struct command_ctx *x)
{
	if (x->argc == 2 && command_arg_is(x, 1, "ABORT"))
		return admin_control(x, KV_CONTROL_ABORT);
	if (x->argc == 2 && command_arg_is(x, 1, "RESUME"))
		return admin_control(x, KV_CONTROL_RESUME);
	if (x->argc == 2 && command_arg_is(x, 1, "UNFENCE"))
		return admin_control(x, KV_CONTROL_UNFENCE);
	if (x->argc >= 2 && command_arg_is(x, 1, "ATTACH"))
		return migration_attach(x);
	struct server *s = x->s;
	struct migration *g = s->migration;
	if (x->argc == 2 && command_arg_is(x, 1, "STATUS")) {
		struct baton_buf text;
		baton_buf_init(&text);
		if (g == NULL)
			baton_buf_append(&text, "migration_side:none\r\n", 21);
		else
			migration_info(s, &text);
		resp_bulk(command_out(x), text.data, text.len);
		baton_buf_free(&text);
		return command_done(x);
	}
	if (x->argc == 2 && command_arg_is(x, 1, "HANDOFF")) {
		if (g == NULL || !mig_is_new_side(g)) {
			resp_error(command_out(x),
				   "ERR this node imports nothing: hand-off is "
				   "asked of the new cluster (a node started "
				   "with --migrate-from)");
			return command_done(x);
		}
		g->im.handoff_asked = true;
		resp_simple(command_out(x), "OK");
		return command_done(x);
	}
	resp_error(command_out(x), "ERR usage: BATON.MIGRATION STATUS | "
				   "HANDOFF | ABORT | RESUME | UNFENCE | "
				   "ATTACH ...");
	return command_done(x);
}
