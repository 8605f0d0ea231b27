/*
 * batond's flags and config file (src/server/config.c): the release flags
 * (--as-release, --version, --strict-release, --machine-upgrade,
 * --election-policy) and
 * active join (--join-seeds), on the command line and in a config file,
 * with their refusals.
 */
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

static struct server_config c;

/* Parse the common required flags followed by `extra`. */
static int parse(const char *const *extra, int n_extra)
{
	const char *base[] = {
		"batond",	  "--id",	    "7",
		"--listen",	  "127.0.0.1:6001", "--peer-listen",
		"127.0.0.1:7001", "--data",	    "/tmp/x"};
	char *argv[64];
	int argc = 0;
	for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
		argv[argc++] = (char *)base[i];
	for (int i = 0; i < n_extra && argc < 63; i++)
		argv[argc++] = (char *)extra[i];
	argv[argc] = NULL;
	return server_config_parse(&c, argc, argv);
}

#define PARSE(...)                                                             \
	parse((const char *const[]){__VA_ARGS__},                              \
	      (int)(sizeof((const char *const[]){__VA_ARGS__}) /               \
		    sizeof(const char *)))

static char *write_config(const char *text)
{
	static char path[] = "/tmp/baton-config-test-XXXXXX";
	strcpy(path, "/tmp/baton-config-test-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	size_t n = strlen(text);
	cr_assert_eq(write(fd, text, n), (ssize_t)n);
	close(fd);
	return path;
}

static bool same_release(struct baton_release a, const char *s)
{
	struct baton_release b;
	cr_assert_eq(baton_release_parse(s, &b), 0);
	return baton_release_compare(a, b) == 0;
}

Test(config, defaults_are_the_binary_release_and_all)
{
	cr_assert_eq(PARSE("--bootstrap", "7=127.0.0.1:7001/127.0.0.1:6001"),
		     0);
	const struct baton_profile *own = baton_release_current();
	cr_assert_eq(baton_release_compare(c.profile.release, own->release), 0);
	cr_assert_eq(c.profile.proto_max.value, own->proto_max.value);
	cr_assert_eq(c.machine_upgrade, BATON_UPGRADE_ALL);
	cr_assert(!c.strict_release);
	cr_assert(!c.join);
	cr_assert_eq(c.n_seeds, 0);
}

Test(config, as_release_takes_that_release_profile)
{
	cr_assert_eq(PARSE("--join", "--as-release", "1.0.0"), 0);
	cr_assert(same_release(c.profile.release, "1.0.0"));
	cr_assert_eq(c.profile.proto_min.value, 1);
	cr_assert_eq(c.profile.proto_max.value, 1);
	cr_assert_eq(c.profile.machine_max.value, 1);
	cr_assert_eq(PARSE("--join", "--as-release", "1.1.0"), 0);
	cr_assert_eq(c.profile.proto_max.value, 2);
	cr_assert_eq(c.profile.machine_max.value, 2);
	/* The last one wins, as for every flag. */
	cr_assert_eq(PARSE("--join", "--as-release", "1.0.0", "--as-release",
			   "1.1.0"),
		     0);
	cr_assert(same_release(c.profile.release, "1.1.0"));
}

Test(config, unknown_or_malformed_release_is_refused)
{
	cr_assert_eq(PARSE("--join", "--as-release", "9.9.9"), -1);
	cr_assert_eq(PARSE("--join", "--as-release", "1.0"), -1);
	cr_assert_eq(PARSE("--join", "--as-release", ""), -1);
	cr_assert_eq(PARSE("--join", "--as-release", "1.0.0x"), -1);
}

Test(config, version_needs_no_other_flag)
{
	char *argv[] = {"batond", "--version", "--as-release", "1.0.0", NULL};
	cr_assert_eq(server_config_parse(&c, 4, argv), 1);
	cr_assert(same_release(c.profile.release, "1.0.0"));
	char *bad[] = {"batond", "--as-release", "0.0.9", "--version", NULL};
	cr_assert_eq(server_config_parse(&c, 4, bad), -1);
}

Test(config, strict_release_and_machine_upgrade)
{
	cr_assert_eq(PARSE("--join", "--strict-release", "--machine-upgrade",
			   "quorum"),
		     0);
	cr_assert(c.strict_release);
	cr_assert_eq(c.machine_upgrade, BATON_UPGRADE_QUORUM);
	cr_assert_eq(PARSE("--join", "--machine-upgrade", "all"), 0);
	cr_assert_eq(c.machine_upgrade, BATON_UPGRADE_ALL);
	cr_assert_eq(PARSE("--join", "--machine-upgrade", "manual"), 0);
	cr_assert_eq(c.machine_upgrade, BATON_UPGRADE_MANUAL);
	cr_assert_eq(PARSE("--join", "--machine-upgrade", "most"), -1);
	cr_assert_eq(PARSE("--join", "--machine-upgrade", "ALL"), -1);
}

Test(config, election_policy)
{
	cr_assert_eq(PARSE("--join"), 0);
	cr_assert_eq(c.election_policy, BATON_ELECTION_VERSION_AWARE);
	cr_assert_eq(PARSE("--join", "--election-policy", "any"), 0);
	cr_assert_eq(c.election_policy, BATON_ELECTION_ANY);
	cr_assert_eq(PARSE("--join", "--election-policy", "version-aware"), 0);
	cr_assert_eq(c.election_policy, BATON_ELECTION_VERSION_AWARE);
	cr_assert_eq(PARSE("--join", "--election-policy", "Any"), -1);
	cr_assert_eq(PARSE("--join", "--election-policy", "strict"), -1);
	char *path = write_config("election-policy any\njoin\n");
	cr_assert_eq(PARSE("--config", path), 0);
	cr_assert_eq(c.election_policy, BATON_ELECTION_ANY);
	cr_assert_eq(
		PARSE("--config", path, "--election-policy", "version-aware"),
		0);
	cr_assert_eq(c.election_policy, BATON_ELECTION_VERSION_AWARE);
	unlink(path);
}

Test(config, join_seeds_are_parsed_and_imply_join)
{
	cr_assert_eq(PARSE("--join-seeds", "127.0.0.1:7001,10.0.0.2:7002"), 0);
	cr_assert(c.join);
	cr_assert_eq(c.n_seeds, 2);
	cr_assert_str_eq(c.seeds[0], "127.0.0.1:7001");
	cr_assert_str_eq(c.seeds[1], "10.0.0.2:7002");
}

Test(config, bad_join_seeds_are_refused)
{
	cr_assert_eq(PARSE("--join-seeds", "localhost"), -1);
	cr_assert_eq(PARSE("--join-seeds", "127.0.0.1:7001,nowhere:x"), -1);
	cr_assert_eq(PARSE("--join-seeds", ","), -1);
	cr_assert_eq(PARSE("--join-seeds", "127.0.0.1:99999"), -1);
	/* Joining and founding exclude each other. */
	cr_assert_eq(PARSE("--join-seeds", "127.0.0.1:7002", "--bootstrap",
			   "7=127.0.0.1:7001/127.0.0.1:6001"),
		     -1);
}

Test(config, too_many_join_seeds_are_refused)
{
	char list[BATON_MAX_MEMBERS * 24 + 64] = "";
	for (uint32_t i = 0; i <= BATON_MAX_MEMBERS; i++) {
		char one[32];
		snprintf(one, sizeof one, "%s127.0.0.1:%u", i ? "," : "",
			 7000 + i);
		strcat(list, one);
	}
	cr_assert_eq(PARSE("--join-seeds", list), -1);
}

Test(config, config_file_keys_and_flags_over_them)
{
	char *path = write_config("# a comment\n"
				  "as-release 1.1.0\n"
				  "strict-release\n"
				  "machine-upgrade quorum\n"
				  "join-seeds 127.0.0.1:7002,127.0.0.1:7003\n");
	cr_assert_eq(PARSE("--config", path), 0);
	cr_assert(same_release(c.profile.release, "1.1.0"));
	cr_assert(c.strict_release);
	cr_assert_eq(c.machine_upgrade, BATON_UPGRADE_QUORUM);
	cr_assert(c.join);
	cr_assert_eq(c.n_seeds, 2);
	cr_assert_eq(PARSE("--config", path, "--as-release", "1.0.0",
			   "--machine-upgrade", "all"),
		     0);
	cr_assert(same_release(c.profile.release, "1.0.0"));
	cr_assert_eq(c.machine_upgrade, BATON_UPGRADE_ALL);
	unlink(path);
}

Test(config, config_file_switches_take_on_and_off)
{
	char *path = write_config("join\nstrict-release off\n");
	cr_assert_eq(PARSE("--config", path), 0);
	cr_assert(c.join);
	cr_assert(!c.strict_release);
	unlink(path);
	path = write_config("join yes\nstrict-release maybe\n");
	cr_assert_eq(PARSE("--config", path), -1);
	unlink(path);
	path = write_config("as-release 9.0.0\njoin\n");
	cr_assert_eq(PARSE("--config", path), -1);
	unlink(path);
}

Test(config, bootstrap_refuses_a_founder_named_twice)
{
	cr_assert_eq(PARSE("--bootstrap", "7=127.0.0.1:7001/127.0.0.1:6001,"
					  "8=127.0.0.1:7002/127.0.0.1:6002,"
					  "7=127.0.0.1:7003/127.0.0.1:6003"),
		     -1, "one id twice");
	cr_assert_eq(PARSE("--bootstrap", "7=127.0.0.1:7001/127.0.0.1:6001,"
					  "8=127.0.0.1:7001/127.0.0.1:6002"),
		     -1, "one peer address for two ids");
	cr_assert_eq(PARSE("--bootstrap", "7=127.0.0.1:7001/127.0.0.1:6001,"
					  "8=127.0.0.1:7002/127.0.0.1:6001"),
		     -1, "one client address for two ids");
	cr_assert_eq(PARSE("--bootstrap", "7=127.0.0.1:7001/127.0.0.1:6001,"
					  "8=127.0.0.1:7002/127.0.0.1:6002"),
		     0);
	cr_assert_eq(c.n_founders, 2);
}

Test(config, empty_cluster_id_is_refused)
{
	cr_assert_eq(PARSE("--join", "--cluster-id", ""), -1);
	cr_assert_eq(PARSE("--join", "--cluster-id", "other"), 0);
	cr_assert_str_eq(c.cluster_id, "other");
}

/* A migration secret file (mode 0600, 32 bytes): its path. */
static char *migration_secret(void)
{
	char *path = write_config("0123456789abcdef0123456789abcdef");
	cr_assert_eq(chmod(path, 0600), 0);
	return path;
}

Test(config, a_migration_needs_the_relay_and_two_clusters,
     .init = cr_redirect_stderr)
{
	char secret[64];
	snprintf(secret, sizeof secret, "%s", migration_secret());
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000"), 0);
	/* The id at the relay is --cluster-id unless given. */
	cr_assert_str_eq(c.relay_cluster, "baton");
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--relay-cluster", "new", "--migrate-from", "old",
			   "--migration-secret-file", secret),
		     0);
	cr_assert(c.has_migration_secret);
	cr_assert_eq(c.migration_secret.len, 32);
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--cluster-id", "new", "--migrate-from", "old",
			   "--migration-secret-file", secret),
		     0);
	cr_assert_str_eq(c.relay_cluster, "new");
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--relay-cluster", "old", "--migrate-to", "new",
			   "--migration-secret-file", secret),
		     0);
	cr_assert_eq(PARSE("--join", "--migrate-to", "new",
			   "--migration-secret-file", secret),
		     -1);
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--relay-cluster", "old", "--migrate-to", "old",
			   "--migration-secret-file", secret),
		     -1);
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--migrate-to", "new", "--migrate-from", "old",
			   "--migration-secret-file", secret),
		     -1);
	cr_assert_eq(PARSE("--join", "--migrate-from", "old"), -1);
	cr_assert_eq(PARSE("--join", "--relay-cluster", "x"), -1);
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--migrate-from", "baton", "--migration-secret-file",
			   secret),
		     -1);
	unlink(secret);
}

Test(config, a_migration_needs_a_secret_in_a_regular_file,
     .init = cr_redirect_stderr)
{
	/* Without it, either side refuses to start, saying why. */
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--relay-cluster", "new", "--migrate-from", "old"),
		     -1);
	cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
			   "--relay-cluster", "old", "--migrate-to", "new"),
		     -1);
	/* A directory, a FIFO (which must not block the start), a file
	 * others may read, one too short. */
	char dir[] = "/tmp/baton-mig-secret-XXXXXX";
	cr_assert(mkdtemp(dir) != NULL);
	char fifo[128];
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	char *open_file = write_config("0123456789abcdef0123456789abcdef");
	cr_assert_eq(chmod(open_file, 0644), 0);
	char shared[64];
	snprintf(shared, sizeof shared, "%s", open_file);
	char *short_file = write_config("short");
	cr_assert_eq(chmod(short_file, 0600), 0);
	char small[64];
	snprintf(small, sizeof small, "%s", short_file);
	const char *bad[] = {dir, fifo, shared, small, "/nonexistent/secret"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(PARSE("--join", "--relay", "127.0.0.1:9000",
				   "--relay-cluster", "old", "--migrate-to",
				   "new", "--migration-secret-file", bad[i]),
			     -1, "%s", bad[i]);
	unlink(fifo);
	rmdir(dir);
	unlink(shared);
	unlink(small);
}

Test(config, flag_equals_value_is_the_same_flag)
{
	cr_assert_eq(PARSE("--join", "--heartbeat-ms=40",
			   "--election-timeout-ms=400", "--log-format=text"),
		     0);
	cr_assert_eq(c.heartbeat_ms, 40);
	cr_assert_eq(c.election_timeout_ms, 400);
}

Test(config, refusals_of_flags, .init = cr_redirect_stderr)
{
	/* Out of range, not a number, beyond the election timeout. */
	cr_assert_eq(PARSE("--join", "--heartbeat-ms", "1"), -1);
	cr_assert_eq(PARSE("--join", "--heartbeat-ms", "x"), -1);
	cr_assert_eq(PARSE("--join", "--heartbeat-ms", "5000"), -1);
	cr_assert_eq(PARSE("--join", "--election-timeout-ms", "150"), -1);
	/* Unknown, abbreviated, a value for a switch, no value. */
	cr_assert_eq(PARSE("--join", "--heartbeat", "5"), -1);
	cr_assert_eq(PARSE("--join", "--heartbeat-m", "5"), -1);
	cr_assert_eq(PARSE("--join=on"), -1);
	cr_assert_eq(PARSE("--join", "--heartbeat-ms"), -1);
	cr_assert_eq(PARSE("--join", "stray"), -1);
}

Test(config, neither_bootstrap_nor_join_on_an_empty_directory,
     .init = cr_redirect_stderr)
{
	char dir[] = "/tmp/baton-config-data-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char *argv[] = {"batond",
			"--id",
			"7",
			"--listen",
			"127.0.0.1:6001",
			"--peer-listen",
			"127.0.0.1:7001",
			"--data",
			dir,
			NULL};
	cr_assert_eq(server_config_parse(&c, 9, argv), -1);
	/* A node restarting on its own state needs neither. */
	char path[sizeof dir + 16];
	snprintf(path, sizeof path, "%s/identity", dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(server_config_parse(&c, 9, argv), 0);
	unlink(path);
	rmdir(dir);
}

Test(config, environment_between_file_and_flags, .init = cr_redirect_stderr)
{
	char *path =
		write_config("join\nheartbeat-ms 20\nsnapshot-entries 9\n");
	setenv("BATON_HEARTBEAT_MS", "30", 1);
	cr_assert_eq(PARSE("--config", path), 0);
	cr_assert_eq(c.heartbeat_ms, 30);
	cr_assert_eq(c.snapshot_entries, 9);
	cr_assert_eq(PARSE("--config", path, "--heartbeat-ms", "40"), 0);
	cr_assert_eq(c.heartbeat_ms, 40);
	setenv("BATON_HEARTBEAT_MS", "x", 1);
	cr_assert_eq(PARSE("--config", path), -1);
	unsetenv("BATON_HEARTBEAT_MS");
	unlink(path);
	path = write_config("join\nheartbeet-ms 20\n");
	cr_assert_eq(PARSE("--config", path), -1);
	unlink(path);
}

Test(config, max_clock_offset, .init = cr_redirect_stderr)
{
	cr_assert_eq(PARSE("--join"), 0);
	cr_assert_eq(c.max_clock_offset_ms, 500, "CockroachDB's default");
	cr_assert_eq(PARSE("--join", "--max-clock-offset", "0"), 0);
	cr_assert_eq(c.max_clock_offset_ms, 0, "0: not checked");
	cr_assert_eq(PARSE("--join", "--max-clock-offset=250"), 0);
	cr_assert_eq(c.max_clock_offset_ms, 250);
	cr_assert_eq(PARSE("--join", "--max-clock-offset", "3600001"), -1);
	cr_assert_eq(PARSE("--join", "--max-clock-offset", "-1"), -1);
	cr_assert_eq(PARSE("--join", "--max-clock-offset", "ms"), -1);
}
