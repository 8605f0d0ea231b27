/* batond: start a node, serve clients, stop cleanly on SIGTERM/SIGINT. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"
#if BATON_TEST_LOSE_UNSYNCED
#include "vfs.h" /* src/storage, on this test binary's include path */
#endif

static void on_housekeeping(uv_timer_t *t)
{
	route_expire(t->data);
	identity_tick(t->data);
	clients_housekeeping(t->data);
	metrics_tick(t->data);
	memory_tick(t->data);
}

static void close_any(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void close_and_exit(struct server *s)
{
	LOG_INFO("closing storage and exiting");
	clients_close_all(s);
	http_stop(s);
	keys_stop(s);
	held_fail_all(s);
	route_fail_all(s, "shutting down");
	migration_stop(s);
	expiry_stop(s);
	join_stop(s);
	founding_stop(s);
	backup_stop(s);
	baton_node_close(s->node);
	s->node = NULL;
	uv_timer_stop(&s->housekeeping);
	uv_walk(s->loop, close_any, NULL);
}

/* Once no client waits for a reply, or after SERVER_DRAIN_MAX_MS: a write
 * in flight then (no leader to take it) gets no answer, only the close. */
static void on_drain_tick(uv_timer_t *t)
{
	struct server *s = t->data;
	if (!clients_drained(s) && uv_now(s->loop) < s->drain_until_ms)
		return;
	uv_timer_stop(t);
	if (!clients_drained(s))
		LOG_WARN("exiting with client commands unanswered: no leader "
			 "took them within %u ms",
			 SERVER_DRAIN_MAX_MS);
	close_and_exit(s);
}

static void after_handover(void *data)
{
	struct server *s = data;
	s->drain_until_ms = uv_now(s->loop) + SERVER_DRAIN_MAX_MS;
	uv_timer_start(&s->drain, on_drain_tick, 0, 2);
}

/* Clients get the answers to what they sent (a write waiting in the
 * leader's pipeline during the hand-over goes on to the new leader), then
 * a FIN; meanwhile a leader hands leadership over. */
static void shut_down(struct server *s)
{
	s->shutting_down = true;
	clients_drain(s);
	/* LEAVE now, while the loop still runs the relay client's writes. */
	migration_stop(s);
	baton_node_shutdown(s->node, after_handover, s);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct server *s = h->data;
	if (s->shutting_down) {
		LOG_WARN("second signal: exiting at once");
		exit(1);
	}
	LOG_INFO("%s: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
	shut_down(s);
}

/* After EIO the disk cannot be trusted: hand leadership over and exit
 * with an error, so the operator (or a supervisor) sees it. */
static void on_storage_failed(void *data)
{
	struct server *s = data;
	if (s->shutting_down)
		return;
	LOG_ERROR("stopping: this node's storage failed");
	s->exit_code = SERVER_EXIT_REFUSED;
	shut_down(s);
}

void server_stop(struct server *s, int exit_code)
{
	if (s->shutting_down)
		return;
	s->exit_code = exit_code;
	shut_down(s);
}

static int run(struct server *s)
{
	s->loop = uv_default_loop();
	s->started_ms = uv_now(s->loop);
	s->value_limit.max = s->cfg.max_value_bytes;
	held_init(s);
	int rv = server_machine_init(&s->machine);
	if (rv != 0) {
		LOG_ERROR("out of memory");
		return SERVER_EXIT_FAILED;
	}
	s->machine.test_apply_delay_ms = s->cfg.test_apply_delay_ms;
	baton_histogram_init(&s->stats.kv_latency,
			     baton_histogram_latency_bounds,
			     BATON_HISTOGRAM_LATENCY_N_BOUNDS);
	if (s->cfg.test_apply_delay_ms > 0)
		LOG_WARN("--test-apply-delay-ms %" PRIu32 ": every key-value "
			 "entry is applied that much late (a switch for tests "
			 "only)",
			 s->cfg.test_apply_delay_ms);
	/* A backup to restore is checked whole before anything is written. */
	if (backup_restore_load(s) != 0) {
		backup_stop(s);
		uv_run(s->loop, UV_RUN_NOWAIT);
		return SERVER_EXIT_REFUSED;
	}
	memory_start(s);
	struct baton_node_config nc = {
		.id = s->cfg.id,
		.cluster_id = s->cfg.cluster_id,
		.profile = s->cfg.profile,
		.data_dir = s->cfg.data_dir,
		.peer_addr = s->cfg.peer_listen,
		.election_timeout_ms = s->cfg.election_timeout_ms,
		.heartbeat_ms = s->cfg.heartbeat_ms,
		.snapshot_entries = s->cfg.snapshot_entries,
		.snapshot_log_bytes = memory_snapshot_log_bytes(s),
		.memory_max_bytes = s->cfg.maxmemory,
		.snapshot_trailing_bytes = memory_snapshot_trailing_bytes(s),
		.snapshot_slice_bytes = s->cfg.snapshot_slice_bytes,
		.snapshot_trailing_set = s->cfg.snapshot_trailing_set,
		.snapshot_trailing = s->cfg.snapshot_trailing,
		.wal_segment_bytes = s->cfg.wal_segment_bytes,
		.n_founders = s->cfg.n_founders,
		.strict_release = s->cfg.strict_release,
		.machine_upgrade = s->cfg.machine_upgrade,
		.election_policy = s->cfg.election_policy,
		.peer_secret =
			s->cfg.has_peer_secret ? &s->cfg.peer_secret : NULL,
		.max_clock_offset_ms = s->cfg.max_clock_offset_ms,
	};
	for (uint32_t i = 0; i < s->cfg.n_founders; i++) {
		nc.founders[i] = s->cfg.founders[i];
		nc.founder_addrs[i] = s->cfg.founder_peer[i];
	}
	/* An empty directory asks the founders first (founding.c). */
	nc.defer_bootstrap = s->cfg.n_founders > 0;
#if BATON_TEST_LOSE_UNSYNCED
	nc.vfs = baton_vfs_unsynced();
	LOG_INFO("test build: writes not yet fsynced are lost on kill -9 "
		 "(as on power loss)");
#endif
	struct baton_node_app app;
	server_node_app(s, &app);
	app.storage_failed = on_storage_failed;
	identity_node_app(s, &app);
	char err[1024] = "";
	if (s->cfg.has_peer_secret)
		LOG_INFO("peer authentication on: peers must hold the secret "
			 "of %s",
			 s->cfg.peer_secret_file);
	else
		LOG_WARN("peer authentication off: no --peer-secret-file, so "
			 "anyone who reaches %s can speak for a member",
			 s->cfg.peer_listen);
	rv = baton_node_start(s->loop, &nc, &app, &s->node, err, sizeof err);
	if (rv != 0) {
		LOG_ERROR("cannot start: %s (%s)", err, baton_err_name(rv));
		/* Another node's or cluster's directory, or damage: the data
		 * stays as it is, so a restart meets the same. */
		return rv == BATON_ESTATE || rv == BATON_ECORRUPT
			       ? SERVER_EXIT_REFUSED
			       : SERVER_EXIT_FAILED;
	}
	server_addresses_to_transport(s);
	identity_start(s);
	int code = 0;
	/* The relay client (migration.c) proves the relay secret. */
	if (s->cfg.has_relay_secret) {
		LOG_INFO("relay %s: HELLO proves the relay secret of %s",
			 s->cfg.relay, s->cfg.relay_secret_file);
	} else if (s->cfg.relay[0] != '\0') {
		LOG_WARN("relay %s: no --relay-secret-file, so this node's "
			 "HELLO carries no proof: a relay that has a secret "
			 "for cluster %s refuses it",
			 s->cfg.relay, s->cfg.relay_cluster);
	}
	if (backup_restore_start(s) != 0)
		code = SERVER_EXIT_REFUSED; /* a directory with state */
	else if (join_start(s) != 0 || founding_start(s) != 0 ||
		 clients_listen(s) != 0 || migration_start(s) != 0 ||
		 http_start(s) != 0)
		code = SERVER_EXIT_FAILED;
	if (code != 0) {
		join_stop(s);
		founding_stop(s);
		backup_stop(s);
		baton_node_close(s->node);
		return code;
	}
	uv_signal_init(s->loop, &s->sigterm);
	uv_signal_init(s->loop, &s->sigint);
	s->sigterm.data = s->sigint.data = s;
	uv_signal_start(&s->sigterm, on_signal, SIGTERM);
	uv_signal_start(&s->sigint, on_signal, SIGINT);
	uv_timer_init(s->loop, &s->drain);
	s->drain.data = s;
	uv_timer_init(s->loop, &s->housekeeping);
	s->housekeeping.data = s;
	uv_timer_start(&s->housekeeping, on_housekeeping, 500, 500);
	expiry_start(s);
	keys_start(s);
	char release[BATON_RELEASE_STR_MAX], own[BATON_RELEASE_STR_MAX];
	const struct baton_profile *p = &s->cfg.profile;
	baton_release_format(baton_release_current()->release, own);
	baton_release_format(p->release, release);
	LOG_INFO("batond %s ready (id %" PRIu64 ", data %s; release %s, peer "
		 "protocol %u-%u, machine_max %u%s%s%s%s)",
		 own, s->cfg.id, s->cfg.data_dir, release, p->proto_min.value,
		 p->proto_max.value, p->machine_max.value,
		 strcmp(release, own) != 0 ? ", emulated" : "",
		 s->cfg.strict_release ? ", strict release" : "",
		 s->cfg.machine_upgrade == BATON_UPGRADE_QUORUM
			 ? ", machine upgrade by quorum"
		 : s->cfg.machine_upgrade == BATON_UPGRADE_MANUAL
			 ? ", machine upgrade held until finalized"
			 : "",
		 s->cfg.election_policy == BATON_ELECTION_ANY
			 ? ", election policy any"
			 : "");
	uv_run(s->loop, UV_RUN_DEFAULT);
	uv_loop_close(s->loop);
	server_machine_free(&s->machine);
	kv_limit_free(&s->value_limit);
	metrics_free(s);
	return s->exit_code;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	static struct server s;
	int rv = server_config_parse(&s.cfg, argc, argv);
	if (rv != 0)
		return rv > 0 ? 0 : SERVER_EXIT_USAGE;
	baton_log_init(s.cfg.id, (enum baton_log_level)s.cfg.log_level);
	return run(&s);
}
