/*
 * batonctl snapshot save FILE [--force] | status FILE (docs/backup.md).
 *
 * save asks the leader for a consistent copy of the map (BATON.BACKUP
 * BEGIN, following -NOTLEADER and retrying -TRYAGAIN), then fetches it
 * chunk by chunk on the same connection (NEXT id) and writes it to
 * FILE.tmp as it comes, hashing as it goes: neither side ever holds the
 * whole copy. Then the header (which needs the payload's length) is
 * written in place, the trailer appended, the file fsynced and renamed
 * over FILE, and the directory fsynced: FILE is whole or absent.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backup_file.h"
#include "baton/assert.h"
#include "checksum.h"
#include "ctl.h"
#include "le.h"

/* How long BEGIN is retried while the node answers -TRYAGAIN (a snapshot
 * of its own or a backup holds the map, or no leader yet). */
#define SAVE_RETRY_MS 30000
#define SAVE_RETRY_STEP_MS 200

struct save {
	const struct ctl_opts *o;
	const char *path;
	char tmp[4096];
	int fd;
	struct ctl_conn c;
	struct backup_header h;
	struct baton__hasher *hasher;
	uint64_t id;
	uint64_t keys;
};

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static bool write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* "8-4-4-4-12" hex into 16 bytes; false if it is not one. */
static bool parse_uuid(const char *text, uint8_t out[BACKUP_UUID_BYTES])
{
	unsigned got = 0;
	for (const char *p = text; *p != '\0'; p++) {
		if (*p == '-')
			continue;
		unsigned v;
		if (got == 2 * BACKUP_UUID_BYTES || sscanf(p, "%1x", &v) != 1)
			return false;
		if (got % 2 == 0)
			out[got / 2] = (uint8_t)(v << 4);
		else
			out[got / 2] |= (uint8_t)v;
		got++;
	}
	return got == 2 * BACKUP_UUID_BYTES;
}

/* The key count of a kv snapshot payload (docs/kv.md): after the magic
 * and format, formats 2 and 3 have the machine time first. */
static bool payload_keys(const uint8_t *p, uint64_t len, uint64_t *keys)
{
	if (len < 16)
		return false;
	uint32_t format = baton_le_get_u32(p + 4);
	size_t at = format >= 2 ? 16 : 8;
	if (len < at + 8)
		return false;
	*keys = baton_le_get_u64(p + at);
	return true;
}

/* BEGIN on the leader: 0 with s->c open to it and the header filled. */
static int begin(struct save *s)
{
	char addr[CTL_ADDR_MAX];
	ctl_opts_addr(s->o, addr, sizeof addr);
	const char *argv[] = {"BATON.BACKUP", "BEGIN"};
	int waited = 0, hops = 0;
	for (;;) {
		if (ctl_conn_open(&s->c, s->o, addr) != 0) {
			ctl_error("node %s: %s", addr, s->c.err);
			return -1;
		}
		redisReply *r = ctl_conn_call(&s->c, 2, argv);
		if (r == NULL) {
			ctl_error("node %s: %s", addr, s->c.err);
			return -1;
		}
		if (r->type == REDIS_REPLY_ERROR &&
		    strncmp(r->str, "NOTLEADER ", 10) == 0 && hops++ < 3) {
			const char *at = strstr(r->str, " at ");
			char host[CTL_ADDR_MAX];
			int port;
			if (at == NULL ||
			    ctl_split_addr(at + 4, host, sizeof host, &port) !=
				    0) {
				ctl_error("node %s: %s", addr, r->str);
				freeReplyObject(r);
				return -1;
			}
			snprintf(addr, sizeof addr, "%s", at + 4);
			freeReplyObject(r);
			ctl_conn_close(&s->c);
			continue;
		}
		if (r->type == REDIS_REPLY_ERROR &&
		    strncmp(r->str, "TRYAGAIN ", 9) == 0 &&
		    waited < SAVE_RETRY_MS) {
			freeReplyObject(r);
			ctl_conn_close(&s->c);
			sleep_ms(SAVE_RETRY_STEP_MS);
			waited += SAVE_RETRY_STEP_MS;
			continue;
		}
		if (r->type == REDIS_REPLY_ERROR || !ctl_map_valid(r)) {
			ctl_error("node %s: %s", addr,
				  r->type == REDIS_REPLY_ERROR
					  ? r->str
					  : "BATON.BACKUP BEGIN: a malformed "
					    "reply (an older batond?)");
			freeReplyObject(r);
			return -1;
		}
		uint64_t mv = 0;
		char uuid[64] = "";
		struct backup_header *h = &s->h;
		bool ok = ctl_map_u64(r, "id", &s->id) &&
			  ctl_map_u64(r, "index", &h->index) &&
			  ctl_map_u64(r, "term", &h->term) &&
			  ctl_map_u64(r, "machine_version", &mv) &&
			  ctl_map_str(r, "release", h->release,
				      sizeof h->release) &&
			  ctl_map_str(r, "cluster_id", h->cluster_id,
				      sizeof h->cluster_id) &&
			  ctl_map_str(r, "cluster_uuid", uuid, sizeof uuid);
		freeReplyObject(r);
		if (!ok || mv == 0 || mv > UINT32_MAX) {
			ctl_error("node %s: BATON.BACKUP BEGIN's reply lacks "
				  "a field",
				  addr);
			return -1;
		}
		h->format = BACKUP_FORMAT;
		h->machine_version = (uint32_t)mv;
		h->created_ms = wall_ms();
		h->has_uuid = uuid[0] != '\0' && parse_uuid(uuid, h->uuid);
		return 0;
	}
}

/* The chunks into the file: 0, or -1 reported. */
static int fetch(struct save *s)
{
	char id[24];
	snprintf(id, sizeof id, "%" PRIu64, s->id);
	const char *argv[] = {"BATON.BACKUP", "NEXT", id};
	for (;;) {
		redisReply *r = ctl_conn_call(&s->c, 3, argv);
		if (r == NULL) {
			ctl_error("node %s: %s", s->c.addr, s->c.err);
			return -1;
		}
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_INTEGER ||
		    r->element[1]->type != REDIS_REPLY_STRING) {
			ctl_error("node %s: %s", s->c.addr,
				  r->type == REDIS_REPLY_ERROR
					  ? r->str
					  : "BATON.BACKUP NEXT: a malformed "
					    "reply");
			freeReplyObject(r);
			return -1;
		}
		const redisReply *chunk = r->element[1];
		bool done = r->element[0]->integer != 0;
		if (s->h.payload_len == 0 && chunk->len > 0)
			payload_keys((const uint8_t *)chunk->str, chunk->len,
				     &s->keys);
		baton__hasher_update(s->hasher, chunk->str, chunk->len);
		s->h.payload_len += chunk->len;
		bool ok = write_all(s->fd, chunk->str, chunk->len);
		freeReplyObject(r);
		if (!ok) {
			ctl_error("cannot write %s: %s", s->tmp,
				  strerror(errno));
			return -1;
		}
		if (done)
			return 0;
	}
}

/* Header in place, trailer, fsync, rename, fsync the directory. */
static int finish(struct save *s, uint64_t *checksum)
{
	uint8_t header[BACKUP_HEADER_BYTES];
	backup_header_encode(&s->h, header);
	*checksum =
		backup_file_checksum(header, baton__hasher_digest(s->hasher));
	uint8_t trailer[BACKUP_TRAILER_BYTES];
	baton_le_put_u64(trailer, *checksum);
	if (pwrite(s->fd, header, sizeof header, 0) != (ssize_t)sizeof header ||
	    !write_all(s->fd, trailer, sizeof trailer) || fsync(s->fd) != 0) {
		ctl_error("cannot write %s: %s", s->tmp, strerror(errno));
		return -1;
	}
	close(s->fd);
	s->fd = -1;
	if (rename(s->tmp, s->path) != 0) {
		ctl_error("cannot rename %s to %s: %s", s->tmp, s->path,
			  strerror(errno));
		return -1;
	}
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", s->path);
	int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

static int cmd_save(const struct ctl_opts *o, const char *path, bool force)
{
	struct stat st;
	if (!force && stat(path, &st) == 0) {
		ctl_error("%s exists: give --force to overwrite it", path);
		return CTL_EXIT_ERROR;
	}
	struct save s = {.o = o, .path = path, .fd = -1};
	if ((size_t)snprintf(s.tmp, sizeof s.tmp, "%s.tmp", path) >=
	    sizeof s.tmp)
		return ctl_usage_error(
			"snapshot save: FILE's name is too long");
	s.hasher = baton__hasher_new();
	if (s.hasher == NULL) {
		ctl_error("out of memory");
		return CTL_EXIT_ERROR;
	}
	int rv = begin(&s);
	if (rv == 0) {
		s.fd = open(s.tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			    0600);
		uint8_t zeros[BACKUP_HEADER_BYTES] = {0};
		if (s.fd < 0 || !write_all(s.fd, zeros, sizeof zeros)) {
			ctl_error("cannot write %s: %s", s.tmp,
				  strerror(errno));
			rv = -1;
		}
	}
	if (rv == 0)
		rv = fetch(&s);
	uint64_t checksum = 0;
	if (rv == 0)
		rv = finish(&s, &checksum);
	if (rv != 0 && s.id != 0 && s.c.ctx != NULL) {
		char id[24];
		snprintf(id, sizeof id, "%" PRIu64, s.id);
		const char *end[] = {"BATON.BACKUP", "END", id};
		redisReply *r = ctl_conn_call(&s.c, 3, end);
		if (r != NULL)
			freeReplyObject(r);
	}
	ctl_conn_close(&s.c);
	baton__hasher_free(s.hasher);
	if (s.fd >= 0)
		close(s.fd);
	if (rv != 0) {
		unlink(s.tmp);
		return CTL_EXIT_ERROR;
	}
	printf("saved %s: index %" PRIu64 ", term %" PRIu64 ", %" PRIu64
	       " keys, %" PRIu64 " bytes, checksum %016" PRIx64
	       " (machine version %" PRIu32 ", from node %s)\n",
	       path, s.h.index, s.h.term, s.keys,
	       (uint64_t)BACKUP_HEADER_BYTES + s.h.payload_len +
		       BACKUP_TRAILER_BYTES,
	       checksum, s.h.machine_version, s.c.addr);
	return CTL_EXIT_OK;
}

static int cmd_status(const char *path)
{
	uint8_t *buf;
	size_t len;
	struct backup_header h;
	const uint8_t *payload;
	char why[512];
	if (backup_file_load(path, &buf, &len, &h, &payload, why, sizeof why) !=
	    0) {
		ctl_error("%s: %s", path, why);
		return CTL_EXIT_ERROR;
	}
	uint64_t keys = 0;
	bool counted = payload_keys(payload, h.payload_len, &keys);
	char uuid[37] = "-";
	if (h.has_uuid)
		backup_uuid_format(h.uuid, uuid);
	time_t secs = (time_t)(h.created_ms / 1000u);
	struct tm tm;
	char when[40] = "?";
	if (gmtime_r(&secs, &tm) != NULL)
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("file: %s\n"
	       "format: %" PRIu32 "\n"
	       "cluster_id: %s\n"
	       "cluster_uuid: %s\n"
	       "index: %" PRIu64 "\n"
	       "term: %" PRIu64 "\n"
	       "machine_version: %" PRIu32 "\n"
	       "release: %s\n"
	       "created: %s (%" PRIu64 " ms)\n"
	       "payload_bytes: %" PRIu64 "\n",
	       path, h.format, h.cluster_id, uuid, h.index, h.term,
	       h.machine_version, h.release, when, h.created_ms, h.payload_len);
	if (counted)
		printf("keys: %" PRIu64 "\n", keys);
	printf("checksum: %016" PRIx64 " (verified)\n",
	       baton_le_get_u64(payload + h.payload_len));
	free(buf);
	return CTL_EXIT_OK;
}

const struct ctl_option ctl_snapshot_options[] = {
	{"force", NULL},
	{NULL, NULL},
};

int ctl_cmd_snapshot(const struct ctl_opts *o, const struct ctl_args *a)
{
	BATON_ASSERT(a->n_positional == 2);
	const char *step = a->positional[0], *path = a->positional[1];
	bool force = ctl_args_flag(a, "force");
	if (strcmp(step, "save") == 0)
		return cmd_save(o, path, force);
	if (strcmp(step, "status") == 0 && force)
		return ctl_usage_error("snapshot status takes no --force");
	if (strcmp(step, "status") == 0)
		return cmd_status(path);
	return ctl_usage_error("snapshot: unknown step '%s' (save FILE "
			       "[--force] | status FILE)",
			       step);
}
