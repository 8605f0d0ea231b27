/* One option of batond set from its text, wherever it came from
 * (config_internal.h), and refused with its range or allowed values. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/assert.h"
#include "address.h"
#include "config_internal.h"
#include "log.h"
#include "memory_limit.h"

/* Every option, in the order of --help. A new option is a row here, a
 * branch of config_set, a line of --help (config_help.c), of
 * packaging/batond.conf.example and of docs/batond.md's table
 * (tests/e2e/test_options.py checks the last two against --help). */
const struct config_option config_options[] = {
	{"id", "N"},
	{"listen", "HOST:PORT"},
	{"peer-listen", "HOST:PORT"},
	{"data", "DIR"},
	{"bootstrap", "ID=PEER/CLIENT,..."},
	{"join", NULL},
	{"join-seeds", "HOST:PORT,..."},
	{"cluster-id", "NAME"},
	{"password", "PW"},
	{"peer-secret-file", "PATH"},
	{"insecure-peers", NULL},
	{"config", "FILE"},
	{"max-clients", "N"},
	{"max-bulk-bytes", "N"},
	{"max-request-bytes", "N"},
	{"max-value-bytes", "N"},
	{"max-client-output-bytes", "N"},
	{"max-total-output-bytes", "N"},
	{"client-idle-timeout-s", "N"},
	{"snapshot-entries", "N"},
	{"snapshot-slice-bytes", "N"},
	{"snapshot-trailing", "N"},
	{"wal-segment-bytes", "N"},
	{"election-timeout-ms", "N"},
	{"heartbeat-ms", "N"},
	{"log-level", "debug|info|warn|error"},
	{"log-format", "text|json"},
	{"machine-upgrade", "all|quorum"},
	{"election-policy", "version-aware|any"},
	{"strict-release", NULL},
	{"accept-joins", NULL},
	{"as-release", "X.Y.Z"},
	{"relay", "HOST:PORT"},
	{"relay-cluster", "NAME"},
	{"relay-secret-file", "PATH"},
	{"migrate-from", "NAME"},
	{"migrate-from-unsealed", "X.Y.Z"},
	{"migrate-to", "NAME"},
	{"migration-secret-file", "PATH"},
	{"restore", "FILE"},
	{"metrics", "HOST:PORT"},
	{"max-clock-offset", "MS"},
	{"maxmemory", "BYTES"},
	{"test-apply-delay-ms", "MS"},
};
const size_t config_n_options =
	sizeof config_options / sizeof config_options[0];

const struct config_option *config_option_find(const char *name)
{
	for (size_t i = 0; i < config_n_options; i++)
		if (strcmp(config_options[i].name, name) == 0)
			return &config_options[i];
	return NULL;
}

/* Edits (insert, delete, replace) from a to b, at most 9. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return 9;
	size_t row[65];
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb] < 9 ? row[lb] : 9;
}

const struct config_option *config_option_nearest(const char *name)
{
	const struct config_option *best = NULL;
	size_t best_d = 4; /* farther than 3 edits is no hint */
	size_t n = strlen(name);
	for (size_t i = 0; i < config_n_options; i++) {
		const char *o = config_options[i].name;
		/* A beginning of a name ("--heartbeat") is a strong hint. */
		size_t d = n >= 3 && strncmp(o, name, n) == 0
				   ? 1
				   : edit_distance(name, o);
		if (d < best_d) {
			best = &config_options[i];
			best_d = d;
		}
	}
	return best;
}

const char *config_env_name(const char *name, char *buf, size_t cap)
{
	size_t n = (size_t)snprintf(buf, cap, "BATON_");
	for (const char *p = name; *p != '\0' && n + 1 < cap; p++)
		buf[n++] = *p == '-'		      ? '_'
			   : (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A')
						      : *p;
	buf[n < cap ? n : cap - 1] = '\0';
	return buf;
}

const char *config_origin_text(const struct config_origin *o, char *buf,
			       size_t cap)
{
	const char *v = o->value == NULL		   ? ""
			: strcmp(o->name, "password") == 0 ? "(not shown)"
							   : o->value;
	const char *space = o->value == NULL ? "" : " ";
	char env[128];
	switch (o->source) {
	case CONFIG_FROM_FLAG:
		snprintf(buf, cap, "--%s%s%s", o->name, space, v);
		break;
	case CONFIG_FROM_ENV:
		snprintf(buf, cap, "%s=%s",
			 config_env_name(o->name, env, sizeof env), v);
		break;
	case CONFIG_FROM_FILE:
		snprintf(buf, cap, "%s:%d: %s%s%s", o->file, o->line, o->name,
			 space, v);
		break;
	}
	return buf;
}

int config_refuse(const struct config_origin *o, const char *fmt, ...)
{
	char where[CONFIG_ORIGIN_MAX], why[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	/* One write, so the line stays whole. */
	fprintf(stderr, "batond: %s: %s\n",
		config_origin_text(o, where, sizeof where), why);
	return -1;
}

static int number(const struct config_origin *o, uint64_t min, uint64_t max,
		  uint64_t *out)
{
	const char *v = o->value;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || errno != 0 || *end != '\0')
		return config_refuse(o,
				     "not a number: must be a whole number in "
				     "%" PRIu64 "..%" PRIu64,
				     min, max);
	if (n < min || n > max)
		return config_refuse(
			o, "out of range: must be in %" PRIu64 "..%" PRIu64,
			min, max);
	*out = n;
	return 0;
}

static int number32(const struct config_origin *o, uint64_t min, uint64_t max,
		    uint32_t *out)
{
	uint64_t n;
	if (number(o, min, max, &n) != 0)
		return -1;
	*out = (uint32_t)n;
	return 0;
}

static int text(const struct config_origin *o, char *out, size_t cap)
{
	if (strlen(o->value) >= cap)
		return config_refuse(o, "too long: at most %zu bytes", cap - 1);
	snprintf(out, cap, "%s", o->value);
	return 0;
}

/* A switch: bare (a flag, or a key alone in a file), or with a value. */
static int on_off(const struct config_origin *o, bool *out)
{
	const char *v = o->value == NULL ? "" : o->value;
	if (v[0] == '\0' || strcmp(v, "on") == 0 || strcmp(v, "yes") == 0 ||
	    strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
		*out = true;
	} else if (strcmp(v, "off") == 0 || strcmp(v, "no") == 0 ||
		   strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
		*out = false;
	} else {
		return config_refuse(o, "a switch: on or off (also yes/no, "
					"true/false, 1/0)");
	}
	return 0;
}

/* One of `names` (NULL-terminated), as its index into *out. */
static int one_of(const struct config_origin *o, const char *const *names,
		  uint32_t *out)
{
	char list[256] = "";
	size_t used = 0;
	for (uint32_t i = 0; names[i] != NULL; i++) {
		if (strcmp(o->value, names[i]) == 0) {
			*out = i;
			return 0;
		}
		int k = snprintf(list + used, sizeof list - used, "%s%s",
				 i == 0			? ""
				 : names[i + 1] == NULL ? " or "
							: ", ",
				 names[i]);
		used += k > 0 && (size_t)k < sizeof list - used ? (size_t)k : 0;
	}
	return config_refuse(o, "must be %s", list);
}

/* Two founders with one id would never elect a leader (each vote is
 * counted once), and two ids at one address would talk to one node as
 * two: both are refused before anything starts. */
static int founders_distinct(const struct server_config *c,
			     const struct config_origin *o)
{
	for (uint32_t i = 0; i < c->n_founders; i++) {
		for (uint32_t j = 0; j < i; j++) {
			if (c->founders[i] == c->founders[j])
				return config_refuse(
					o,
					"--bootstrap lists node %" PRIu64
					" twice; each founder needs its own "
					"id",
					c->founders[i]);
			const char *what = strcmp(c->founder_peer[i],
						  c->founder_peer[j]) == 0
						   ? "peer"
					   : strcmp(c->founder_client[i],
						    c->founder_client[j]) == 0
						   ? "client"
						   : NULL;
			if (what != NULL)
				return config_refuse(
					o,
					"--bootstrap gives nodes %" PRIu64
					" and %" PRIu64
					" one %s address; each founder needs "
					"its own addresses",
					c->founders[j], c->founders[i], what);
		}
	}
	return 0;
}

/* id=peer/client,id=peer/client,... */
static int parse_bootstrap(struct server_config *c,
			   const struct config_origin *o)
{
	char list[CONFIG_LINE_MAX];
	if (text(o, list, sizeof list) != 0)
		return -1;
	c->n_founders = 0;
	char *save = NULL;
	for (char *item = strtok_r(list, ",", &save); item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '='), *slash = strchr(item, '/');
		if (eq == NULL || slash == NULL || slash < eq ||
		    c->n_founders == BATON_MAX_MEMBERS)
			return config_refuse(o,
					     "want id=peer_addr/client_addr,"
					     "... (at most %u), not '%s'",
					     BATON_MAX_MEMBERS, item);
		*eq = *slash = '\0';
		uint32_t i = c->n_founders;
		char *end;
		errno = 0;
		unsigned long long id = strtoull(item, &end, 10);
		if (item[0] < '0' || item[0] > '9' || errno != 0 ||
		    *end != '\0' || id == 0 || id > INT64_MAX)
			return config_refuse(o,
					     "node id '%s' must be a number in "
					     "1..%" PRId64,
					     item, INT64_MAX);
		if (strlen(eq + 1) >= BATON_ADDR_MAX ||
		    strlen(slash + 1) >= BATON_ADDR_MAX)
			return config_refuse(
				o,
				"an address of node %llu is longer "
				"than %u bytes",
				id, BATON_ADDR_MAX - 1);
		snprintf(c->founder_peer[i], BATON_ADDR_MAX, "%s", eq + 1);
		snprintf(c->founder_client[i], BATON_ADDR_MAX, "%s", slash + 1);
		c->founders[i] = id;
		c->n_founders++;
	}
	return founders_distinct(c, o);
}

/* o->value as a release of this binary's table: 0 with *r (and *p when p
 * is not NULL), or the refusal that lists the releases it contains. */
static int known_release(const struct config_origin *o, struct baton_release *r,
			 const struct baton_profile **p)
{
	const struct baton_profile *found =
		baton_release_parse(o->value, r) == 0 ? baton_release_find(*r)
						      : NULL;
	if (found == NULL) {
		char list[256];
		return config_refuse(o,
				     "this binary does not contain release "
				     "'%s'; it contains %s",
				     o->value,
				     config_release_list(list, sizeof list, 0));
	}
	if (p != NULL)
		*p = found;
	return 0;
}

/* --migrate-from-unsealed RELEASE: the old cluster runs RELEASE, which
 * predates sealed migration messages; this node speaks that release's
 * unsealed format 1 to it (docs/relay.md, "Migrating from 1.3.0"). Only a
 * release of the table from the first with the relay client up to, not
 * including, the first that seals. */
static int parse_unsealed_release(struct server_config *c,
				  const struct config_origin *o)
{
	struct baton_release r;
	char a[BATON_RELEASE_STR_MAX], b[BATON_RELEASE_STR_MAX];
	struct baton_release from = baton_release_migration_since();
	struct baton_release sealed = baton_release_sealed_migration_since();
	if (known_release(o, &r, NULL) != 0)
		return -1;
	if (baton_release_compare(r, sealed) >= 0)
		return config_refuse(
			o,
			"release %s seals its migration messages (format 2, "
			"since %s): migrate from it with "
			"--migration-secret-file only; the unsealed mode is "
			"for a cluster of a release before %s",
			o->value, baton_release_format(sealed, a),
			baton_release_format(sealed, b));
	if (baton_release_compare(r, from) < 0)
		return config_refuse(o,
				     "release %s has no relay client (the old "
				     "side of a migration needs %s or later: "
				     "roll it first)",
				     o->value, baton_release_format(from, a));
	c->has_unsealed_release = true;
	c->unsealed_release = r;
	return 0;
}

static int parse_as_release(struct server_config *c,
			    const struct config_origin *o)
{
	struct baton_release r;
	const struct baton_profile *p = NULL;
	if (known_release(o, &r, &p) != 0)
		return -1;
	c->profile = *p;
	return 0;
}

/* HOST:PORT,HOST:PORT,... */
static int parse_seeds(struct server_config *c, const struct config_origin *o)
{
	char list[CONFIG_LINE_MAX];
	if (text(o, list, sizeof list) != 0)
		return -1;
	c->n_seeds = 0;
	char *save = NULL;
	for (char *item = strtok_r(list, ",", &save); item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		char why[BATON_ADDR_WHY_MAX] = "";
		if (c->n_seeds == BATON_MAX_MEMBERS ||
		    baton_parse_addr(item, why, sizeof why) != 0 ||
		    strlen(item) >= sizeof c->seeds[0])
			return config_refuse(o,
					     "want HOST:PORT,... (at most %u), "
					     "not '%s'%s%s",
					     BATON_MAX_MEMBERS, item,
					     why[0] ? ": " : "", why);
		snprintf(c->seeds[c->n_seeds], sizeof c->seeds[0], "%s", item);
		c->n_seeds++;
	}
	if (c->n_seeds == 0)
		return config_refuse(o, "want at least one HOST:PORT");
	c->join = true;
	return 0;
}

static int client_limits(struct server_config *c, const struct config_origin *o)
{
	const char *n = o->name;
	if (strcmp(n, "max-clients") == 0)
		return number32(o, 1, 1000000, &c->max_clients);
	if (strcmp(n, "max-bulk-bytes") == 0 ||
	    strcmp(n, "max-request-bytes") == 0) {
		uint64_t v;
		if (number(o, 16, RESP_REQUEST_BYTES_MAX_DEFAULT, &v) != 0)
			return -1;
		*(strcmp(n, "max-bulk-bytes") == 0 ? &c->max_bulk_bytes
						   : &c->max_request_bytes) = v;
		return 0;
	}
	if (strcmp(n, "max-value-bytes") == 0)
		return number(o, KV_LIMIT_BYTES_MIN, KV_VALUE_BYTES_MAX,
			      &c->max_value_bytes);
	if (strcmp(n, "max-client-output-bytes") == 0)
		return number(o, 1024, UINT64_MAX / 2,
			      &c->max_client_output_bytes);
	if (strcmp(n, "max-total-output-bytes") == 0)
		return number(o, 1024, UINT64_MAX / 2,
			      &c->max_total_output_bytes);
	BATON_ASSERT(strcmp(n, "client-idle-timeout-s") == 0);
	return number32(o, 0, 365u * 24 * 3600, &c->client_idle_timeout_s);
}

static int raft_timing(struct server_config *c, const struct config_origin *o)
{
	const char *n = o->name;
	if (strcmp(n, "snapshot-entries") == 0)
		return number(o, 1, UINT32_MAX, &c->snapshot_entries);
	if (strcmp(n, "snapshot-slice-bytes") == 0)
		return number(o, 4096, 64u << 20, &c->snapshot_slice_bytes);
	if (strcmp(n, "snapshot-trailing") == 0) {
		c->snapshot_trailing_set = true;
		return number32(o, 0, UINT32_MAX, &c->snapshot_trailing);
	}
	if (strcmp(n, "election-timeout-ms") == 0)
		return number32(o, 50, 60000, &c->election_timeout_ms);
	if (strcmp(n, "wal-segment-bytes") == 0)
		return number(o, SERVER_WAL_SEGMENT_BYTES_MIN,
			      SERVER_WAL_SEGMENT_BYTES_MAX,
			      &c->wal_segment_bytes);
	BATON_ASSERT(strcmp(n, "heartbeat-ms") == 0);
	return number32(o, 5, 10000, &c->heartbeat_ms);
}

static int policies(struct server_config *c, const struct config_origin *o)
{
	static const char *const upgrades[] = {"all", "quorum", "manual", NULL};
	static const char *const elections[] = {"version-aware", "any", NULL};
	static const char *const formats[] = {"text", "json", NULL};
	static const char *const levels[] = {"debug", "info", "warn", "error",
					     NULL};
	const char *n = o->name;
	uint32_t i;
	if (strcmp(n, "machine-upgrade") == 0) {
		if (one_of(o, upgrades, &i) != 0)
			return -1;
		c->machine_upgrade = i == 0   ? BATON_UPGRADE_ALL
				     : i == 1 ? BATON_UPGRADE_QUORUM
					      : BATON_UPGRADE_MANUAL;
		return 0;
	}
	if (strcmp(n, "election-policy") == 0) {
		if (one_of(o, elections, &i) != 0)
			return -1;
		c->election_policy = i == 0 ? BATON_ELECTION_VERSION_AWARE
					    : BATON_ELECTION_ANY;
		return 0;
	}
	if (strcmp(n, "log-format") == 0) {
		if (one_of(o, formats, &i) != 0)
			return -1;
		/* Set at once: lines written from here on take it. */
		baton_log_set_format(i == 1 ? BATON_LOG_JSON : BATON_LOG_TEXT);
		return 0;
	}
	BATON_ASSERT(strcmp(n, "log-level") == 0);
	if (one_of(o, levels, &i) != 0)
		return -1;
	c->log_level = baton_log_level_parse(levels[i]);
	return 0;
}

static int names(struct server_config *c, const struct config_origin *o)
{
	const char *n = o->name;
	if (strcmp(n, "listen") == 0)
		return text(o, c->listen, sizeof c->listen);
	if (strcmp(n, "peer-listen") == 0)
		return text(o, c->peer_listen, sizeof c->peer_listen);
	if (strcmp(n, "data") == 0)
		return text(o, c->data_dir, sizeof c->data_dir);
	if (strcmp(n, "cluster-id") == 0) {
		if (o->value[0] == '\0')
			return config_refuse(o, "must not be empty");
		return text(o, c->cluster_id, sizeof c->cluster_id);
	}
	if (strcmp(n, "relay") == 0)
		return text(o, c->relay, sizeof c->relay);
	if (strcmp(n, "relay-cluster") == 0)
		return text(o, c->relay_cluster, sizeof c->relay_cluster);
	if (strcmp(n, "relay-secret-file") == 0)
		return text(o, c->relay_secret_file,
			    sizeof c->relay_secret_file);
	if (strcmp(n, "migrate-from") == 0)
		return text(o, c->migrate_from, sizeof c->migrate_from);
	if (strcmp(n, "migrate-to") == 0)
		return text(o, c->migrate_to, sizeof c->migrate_to);
	if (strcmp(n, "password") == 0)
		return text(o, c->password, sizeof c->password);
	if (strcmp(n, "restore") == 0)
		return text(o, c->restore, sizeof c->restore);
	if (strcmp(n, "metrics") == 0)
		return text(o, c->metrics, sizeof c->metrics);
	if (strcmp(n, "migration-secret-file") == 0)
		return text(o, c->migration_secret_file,
			    sizeof c->migration_secret_file);
	BATON_ASSERT(strcmp(n, "peer-secret-file") == 0);
	return text(o, c->peer_secret_file, sizeof c->peer_secret_file);
}

/* --max-clock-offset MS: the clock check (src/node/clock.c). Up to an
 * hour: a bound beyond that checks nothing a TTL would notice. */
#define MAX_CLOCK_OFFSET_MS_LIMIT 3600000u

static int clock_offset(struct server_config *c, const struct config_origin *o)
{
	BATON_ASSERT(strcmp(o->name, "max-clock-offset") == 0);
	return number32(o, 0, MAX_CLOCK_OFFSET_MS_LIMIT,
			&c->max_clock_offset_ms);
}

/* --maxmemory BYTES: Redis's units (memory_limit.h); 0 for no bound. */
static int parse_maxmemory(struct server_config *c,
			   const struct config_origin *o)
{
	uint64_t v;
	if (!memory_parse_bytes(o->value, &v))
		return config_refuse(o,
				     "want a number of bytes, with a unit if "
				     "you like: 700mb, 1gb, 2g (kb, mb, gb "
				     "count by 1024; k, m, g by 1000); 0 for "
				     "no bound");
	if (v != 0 && v < MEMORY_LIMIT_MIN)
		return config_refuse(o, "below the smallest bound, 1mb (0 for "
					"no bound)");
	c->maxmemory = v;
	c->maxmemory_set = true;
	return 0;
}

int config_set(struct server_config *c, const struct config_origin *o)
{
	const struct config_option *opt = config_option_find(o->name);
	BATON_ASSERT(opt != NULL && strcmp(o->name, "config") != 0);
	BATON_ASSERT(opt->arg == NULL || o->value != NULL);
	const char *n = o->name;
	if (strcmp(n, "id") == 0) {
		uint64_t id;
		if (number(o, 1, INT64_MAX, &id) != 0)
			return -1;
		c->id = id;
		return 0;
	}
	if (strcmp(n, "join") == 0)
		return on_off(o, &c->join);
	if (strcmp(n, "strict-release") == 0)
		return on_off(o, &c->strict_release);
	if (strcmp(n, "accept-joins") == 0)
		return on_off(o, &c->accept_joins);
	if (strcmp(n, "insecure-peers") == 0)
		return on_off(o, &c->insecure_peers);
	if (strcmp(n, "bootstrap") == 0)
		return parse_bootstrap(c, o);
	if (strcmp(n, "join-seeds") == 0)
		return parse_seeds(c, o);
	if (strcmp(n, "as-release") == 0)
		return parse_as_release(c, o);
	if (strcmp(n, "migrate-from-unsealed") == 0)
		return parse_unsealed_release(c, o);
	if (strcmp(n, "max-clock-offset") == 0)
		return clock_offset(c, o);
	if (strcmp(n, "maxmemory") == 0)
		return parse_maxmemory(c, o);
	if (strcmp(n, "test-apply-delay-ms") == 0)
		return number32(o, 0, CONFIG_TEST_APPLY_DELAY_MS_MAX,
				&c->test_apply_delay_ms);
	if (strncmp(n, "max-", 4) == 0 ||
	    strcmp(n, "client-idle-timeout-s") == 0)
		return client_limits(c, o);
	if (strncmp(n, "snapshot-", 9) == 0 || strcmp(n, "heartbeat-ms") == 0 ||
	    strcmp(n, "election-timeout-ms") == 0 ||
	    strcmp(n, "wal-segment-bytes") == 0)
		return raft_timing(c, o);
	if (strcmp(n, "machine-upgrade") == 0 ||
	    strcmp(n, "election-policy") == 0 || strncmp(n, "log-", 4) == 0)
		return policies(c, o);
	return names(c, o);
}
