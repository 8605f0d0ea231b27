/*
 * The operator's side of the relay (docs/relay-server.md "Activation"):
 * ACTIVATE and DEACTIVATE asked over the network (a STATUS carrying an
 * ADMIN_REQUEST, sent by `batonctl relay`), and the DEACTIVATE the relay
 * sends by itself once the old cluster of a migration is gone.
 */
#include <stdio.h>
#include <string.h>

#include "relay_auth.h"
#include "baton/assert.h"
#include "log.h"
#include "server_internal.h"

static const char *op_name(uint8_t op)
{
	return op == BATON_RELAY_ADMIN_ACTIVATE	    ? "activate"
	       : op == BATON_RELAY_ADMIN_DEACTIVATE ? "deactivate"
						    : "?";
}

/* Whether request r may be carried out: 0, or a code with why. */
static uint16_t admin_check(struct relay_server *srv,
			    const struct baton_relay_admin_request *r,
			    char *why, size_t cap)
{
	const struct relay_config *cfg = srv->cfg;
	if (!cfg->has_admin_key) {
		snprintf(why, cap,
			 "refused: this relay takes no admin requests (start "
			 "it with --admin-secret-file FILE; meanwhile kill "
			 "-USR1 activates it, -USR2 deactivates it)");
		return BATON_RELAY_EREFUSED;
	}
	if (r->op != BATON_RELAY_ADMIN_ACTIVATE &&
	    r->op != BATON_RELAY_ADMIN_DEACTIVATE) {
		snprintf(why, cap, "refused: unknown admin operation %u",
			 r->op);
		return BATON_RELAY_EREFUSED;
	}
	if (!relay_admin_verify(cfg->admin_key, r)) {
		snprintf(why, cap,
			 "authentication failed: wrong proof (the secret "
			 "file differs from the relay's --admin-secret-file)");
		return BATON_RELAY_EREFUSED;
	}
	/* Meant for this relay process: a request recorded on the way
	 * cannot be played to it after a restart. */
	if (r->relay_incarnation != srv->incarnation) {
		snprintf(why, cap,
			 "authentication failed: the request names relay "
			 "incarnation %llu, this relay is %llu (it restarted: "
			 "ask again)",
			 (unsigned long long)r->relay_incarnation,
			 (unsigned long long)srv->incarnation);
		return BATON_RELAY_EREFUSED;
	}
	uint64_t skew = 0;
	enum session_fresh fresh = session_check_fresh(
		srv, r->nonce, r->timestamp_ms, &skew, NULL);
	if (fresh == SESSION_SKEWED) {
		snprintf(why, cap,
			 "authentication failed: the request's time is %llu "
			 "ms from the relay's clock, more than %llu ms "
			 "(--proof-max-skew-ms)",
			 (unsigned long long)skew,
			 (unsigned long long)cfg->proof_skew_ms);
		return BATON_RELAY_EREFUSED;
	}
	if (fresh == SESSION_REPLAYED) {
		snprintf(why, cap,
			 "authentication failed: this request was already "
			 "used (a replay)");
		return BATON_RELAY_EREFUSED;
	}
	return 0;
}

size_t session_admin_request(struct relay_conn *c,
			     const struct baton_relay_ext *ext,
			     uint8_t out[BATON_RELAY_ADMIN_RESULT_ENTRY_MAX])
{
	struct relay_server *srv = c->srv;
	struct baton_relay_admin_request r;
	struct baton_relay_err err = {0};
	char why[BATON_RELAY_TEXT_MAX];
	uint16_t code = 0;
	if (baton_relay_admin_get(ext, &r, &err) != 0) {
		snprintf(why, sizeof why, "refused: %s", err.text);
		code = BATON_RELAY_EREFUSED;
	} else if (!r.present) {
		return 0;
	} else {
		code = admin_check(srv, &r, why, sizeof why);
	}
	if (code != 0) {
		relay_log(RELAY_LOG_WARN, "%s: admin request %s refused: %s",
			  c->name, op_name(r.op), why);
		return baton_relay_admin_result_put(code, why, out);
	}
	bool active = r.op == BATON_RELAY_ADMIN_ACTIVATE;
	relay_log(RELAY_LOG_INFO, "%s: admin request: %s (the relay was %s)",
		  c->name, op_name(r.op),
		  srv->state.active ? "active" : "inactive");
	session_set_active(srv, active);
	/* An operator's DEACTIVATE or ACTIVATE starts the watch anew. */
	srv->gone_since_ms = 0;
	snprintf(why, sizeof why, "%s", active ? "active" : "inactive");
	return baton_relay_admin_result_put(0, why, out);
}

static bool same_cluster(const struct relay_node *a, const struct relay_node *b)
{
	return a->cluster_id_len == b->cluster_id_len &&
	       memcmp(a->cluster_id, b->cluster_id, a->cluster_id_len) == 0;
}

/* The old cluster is gone when a node of cluster A said A holds write
 * authority (NODE_STATE), and no node of any other cluster has been
 * registered (in the view, connected or not) for --auto-deactivate-ms
 * since. Authority is the new cluster's own word (its AUTHORITY entry
 * applied): before hand-off the old nodes are still needed, whatever comes
 * and goes. Registered, not connected: an old node cut off for a while
 * after the hand-off must still hear AUTHORITY when it comes back (its
 * leader then seals the fence), so only a LEAVE or --forget-after-ms
 * removes it. */
void session_auto_deactivate(struct relay_server *srv)
{
	const struct relay_config *cfg = srv->cfg;
	if (!srv->state.active || cfg->auto_deactivate_ms == 0) {
		srv->gone_since_ms = 0;
		return;
	}
	const struct relay_table *t = &srv->table;
	const struct relay_node *holder = NULL;
	for (uint16_t i = 0; i < t->count && holder == NULL; i++)
		if (t->nodes[i].state_flags & BATON_RELAY_NODE_STATE_AUTHORITY)
			holder = &t->nodes[i];
	bool other = false;
	for (uint16_t i = 0; i < t->count && holder != NULL; i++)
		if (!same_cluster(&t->nodes[i], holder))
			other = true;
	uint64_t now = relay_now_ms(srv);
	if (holder == NULL || other) {
		srv->gone_since_ms = 0;
		return;
	}
	if (srv->gone_since_ms == 0) {
		srv->gone_since_ms = now > 0 ? now : 1;
		relay_log(RELAY_LOG_INFO,
			  "cluster %.*s holds write authority and no node of "
			  "another cluster is registered: deactivating in "
			  "%llu ms unless one registers",
			  (int)holder->cluster_id_len, holder->cluster_id,
			  (unsigned long long)cfg->auto_deactivate_ms);
		return;
	}
	if (now - srv->gone_since_ms < cfg->auto_deactivate_ms)
		return;
	relay_log(RELAY_LOG_INFO,
		  "the old cluster is gone: cluster %.*s holds write "
		  "authority and no node of another cluster was registered "
		  "for %llu ms (--auto-deactivate-ms)",
		  (int)holder->cluster_id_len, holder->cluster_id,
		  (unsigned long long)(now - srv->gone_since_ms));
	srv->gone_since_ms = 0;
	session_set_active(srv, false);
}
