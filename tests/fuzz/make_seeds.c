/*
 * fuzz-seeds OUT TESTS: writes the seed corpora of the fuzz targets into
 * OUT/<target>/ at build time, from what the repository already holds, so
 * nothing is committed twice: the golden vectors of the peer protocol
 * (TESTS/wire/test_peer_golden.c), the sample frames of the peer tests
 * (peer_fixtures.c) re-encoded in every protocol version, the golden
 * storage directories (TESTS/storage/golden/v*), identity files made by
 * the storage's writer, and a few version
 * states, configurations, RESP requests and state machine payloads and
 * snapshots made with the encoders.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backup_file.h"
#include "baton/buf.h"
#include "baton/version.h"
#include "checksum.h"
#include "fuzz.h"
#include "le.h"
#include "internal.h"
#include "kv.h"
#include "migration.h"
#include "peer_fixtures.h"
#include "storage_target.h"

static const char *out_dir;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fuzz-seeds: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

/* OUT/target/name: the selector byte (when >= 0), then the bytes. */
static void seed(const char *target, const char *name, int selector,
		 const uint8_t *data, size_t len)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", out_dir, target);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("mkdir", path);
	snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL)
		die("create", path);
	if (selector >= 0)
		fputc(selector, f);
	if ((len > 0 && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
		die("write", path);
}

/* ---- protobuf: the fields that lead to each message ---------------------- */

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			return true;
	}
	return false;
}

/* The first length-delimited field `field` of the message (m, len). */
static bool find_field(const uint8_t *m, size_t len, uint32_t field,
		       const uint8_t **out, size_t *out_len)
{
	const uint8_t *p = m, *end = m + len;
	while (p < end) {
		uint64_t key, n = 0;
		if (!varint(&p, end, &key))
			return false;
		switch (key & 7) {
		case 0:
			if (!varint(&p, end, &n))
				return false;
			continue;
		case 1:
			n = 8;
			break;
		case 5:
			n = 4;
			break;
		case 2:
			if (!varint(&p, end, &n) || n > (uint64_t)(end - p))
				return false;
			if (key >> 3 == field) {
				*out = p;
				*out_len = (size_t)n;
				return true;
			}
			break;
		default:
			return false;
		}
		if (n > (uint64_t)(end - p))
			return false;
		p += n;
	}
	return false;
}

static const char *const body_target[] = {
	NULL,	     "peer_handshake",	"peer_handshake_reply",
	"peer_raft", "peer_forward",	"peer_forward_reply",
	"peer_join", "peer_join_reply",
};

/* A version state inside an envelope: a cluster view's or a snapshot's. */
static void version_state_seed(const uint8_t *env, size_t len, const char *name)
{
	static const uint32_t view_path[] = {2, 5, 3};
	static const uint32_t snap_path[] = {3, 9, 1, 5};
	const uint32_t *paths[] = {view_path, snap_path};
	const size_t depth[] = {3, 4};
	for (size_t k = 0; k < 2; k++) {
		const uint8_t *p = env;
		size_t n = len;
		size_t d = 0;
		while (d < depth[k] && find_field(p, n, paths[k][d], &p, &n))
			d++;
		if (d == depth[k])
			seed("peer_version_state", name, -1, p, n);
	}
}

/* One whole frame (prefix included) that travels in version v: a seed of
 * the stream target, of its message's target, and of the version state
 * target if it holds one. */
static void frame_seeds(const uint8_t *frame, size_t len, uint8_t v,
			const char *name)
{
	seed("peer_frame", name, v, frame, len);
	if (len < BATON_PEER_PREFIX_LEN + 1)
		return;
	const uint8_t *env = frame + BATON_PEER_PREFIX_LEN;
	size_t env_len = len - BATON_PEER_PREFIX_LEN;
	uint32_t announced = (uint32_t)frame[0] | (uint32_t)frame[1] << 8 |
			     (uint32_t)frame[2] << 16 |
			     (uint32_t)frame[3] << 24;
	if (env_len == (size_t)announced + BATON_PEER_CHECKSUM_LEN)
		env_len = announced; /* protocol 4's checksum ends it */
	uint32_t field = env[0] >> 3;
	const uint8_t *body = NULL;
	size_t body_len = 0;
	if (field >= 1 && field <= 7 &&
	    find_field(env, env_len, field, &body, &body_len))
		seed(body_target[field], name, v, body, body_len);
	version_state_seed(env, env_len, name);
}

static int encode_in(struct baton_proto_version v,
		     const struct baton_peer_frame *f, struct baton_buf *out)
{
	if (f->kind == BATON_PEER_HANDSHAKE)
		return baton_peer_encode_handshake(&f->handshake, out);
	if (f->kind == BATON_PEER_HANDSHAKE_REPLY)
		return baton_peer_encode_handshake_reply(&f->handshake_reply,
							 out);
	return baton_peer_encode_frame(v, f, out);
}

/* The samples of peer_fixtures.c, in every version that carries them. */
static void sample_seeds(void)
{
	for (uint32_t i = 0; i < FIX_N_FRAMES; i++) {
		struct baton_buf b;
		baton_buf_init(&b);
		fix_encode_sample(i, &b);
		struct baton_peer_frame f;
		if (fix_decode_one(b.data, b.len, &f) != 0) {
			fprintf(stderr, "fuzz-seeds: sample %u: %s\n", i,
				f.why);
			exit(1);
		}
		for (uint8_t v = 1; v <= 4; v++) {
			struct baton_buf e;
			baton_buf_init(&e);
			char name[64];
			snprintf(name, sizeof name, "sample-%02u-v%u", i, v);
			if (encode_in((struct baton_proto_version){v}, &f,
				      &e) == 0)
				frame_seeds(e.data, e.len, v, name);
			baton_buf_free(&e);
		}
		baton_peer_frame_free(&f);
		baton_buf_free(&b);
	}
}

/* Every `static const uint8_t golden_<name>[] = { 0x.., ... };` of the
 * peer protocol's golden test: protocol 1 frames. */
static void golden_wire_seeds(const char *tests)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/wire/test_peer_golden.c", tests);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		die("open", path);
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = '\0';
	const char *marker = "static const uint8_t golden_";
	int found = 0;
	for (char *p = strstr(text, marker); p != NULL; p = strstr(p, marker)) {
		p += strlen(marker);
		char name[64] = "golden-";
		size_t k = strlen(name);
		while (*p != '[' && *p != '\0' && k + 1 < sizeof name)
			name[k++] = *p++;
		name[k] = '\0';
		char *open = strchr(p, '{'), *close = strchr(p, '}');
		if (open == NULL || close == NULL)
			break;
		uint8_t bytes[4096];
		size_t len = 0;
		for (char *q = open + 1; q < close && len < sizeof bytes;) {
			char *next = NULL;
			unsigned long b = strtoul(q, &next, 16);
			if (next == q) {
				q++;
				continue;
			}
			bytes[len++] = (uint8_t)b;
			q = next;
		}
		frame_seeds(bytes, len, 1, name);
		found++;
		p = close;
	}
	if (found == 0) {
		fprintf(stderr, "fuzz-seeds: no golden vectors in %s\n", path);
		exit(1);
	}
}

/* ---- storage: the golden directories, copied -------------------------------
 */

static void copy_file(const char *from, const char *target, const char *name)
{
	FILE *f = fopen(from, "rb");
	if (f == NULL)
		die("open", from);
	static uint8_t buf[1 << 20];
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	seed(target, name, -1, buf, n);
}

static void golden_storage_seeds(const char *tests)
{
	static const char *const files[][2] = {
		{"meta", "storage_meta"},
		{"snapshot", "storage_snapshot"},
		{"wal-0000000000000001.log", "storage_wal"},
	};
	for (int v = 1;; v++) {
		char dir[4096];
		snprintf(dir, sizeof dir, "%s/storage/golden/v%d", tests, v);
		struct stat st;
		if (stat(dir, &st) != 0)
			break;
		for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
			char from[4200], name[64];
			snprintf(from, sizeof from, "%s/%s", dir, files[i][0]);
			snprintf(name, sizeof name, "golden-v%d-%s", v,
				 files[i][0]);
			copy_file(from, files[i][1], name);
			copy_file(from, "storage_file_header", name);
		}
	}
}

/* Identity files as the writer makes them: no golden one exists yet. */
static void identity_seeds(void)
{
	static const char *const names[] = {"c", "prod-cluster-7"};
	for (int i = 0; i < 2; i++) {
		struct baton_identity id = {.node_id = 11 + (uint64_t)i};
		snprintf(id.cluster_name, sizeof id.cluster_name, "%s",
			 names[i]);
		id.has_uuid = i == 1;
		for (size_t k = 0; k < sizeof id.cluster_uuid; k++)
			id.cluster_uuid[k] =
				id.has_uuid ? (uint8_t)(k * 17) : 0;
		struct fault_vfs *v = fuzz_vfs(NULL, NULL, 0);
		char err[STORAGE_ERR_MAX];
		uint8_t b[512];
		size_t n = 0;
		if (baton__identity_write(&v->base, FUZZ_DIR, &id, err,
					  sizeof err) != 0 ||
		    fault_vfs_read_durable(v, FUZZ_DIR "/identity", 0, b,
					   sizeof b, &n) != 0) {
			fprintf(stderr, "fuzz-seeds: identity: %s\n", err);
			exit(1);
		}
		char name[32];
		snprintf(name, sizeof name, "written-%d", i);
		seed("storage_identity", name, -1, b, n);
		seed("storage_file_header", name, -1, b, n);
		fault_vfs_free(v);
	}
}

/* ---- the core's entries and RESP ------------------------------------------
 */

static void core_seeds(void)
{
	static const uint32_t rows[] = {0, 1, 3, BATON_MAX_MEMBERS};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		/* Bit 0: a downgrade in progress; bit 1: the burn-in hold. */
		for (int k = 0; k <= 3; k++) {
			bool down = (k & 1) != 0, held = (k & 2) != 0;
			struct baton_version_state s;
			fix_versions(rows[i], &s);
			if (down)
				fix_downgrade(&s);
			s.held = held;
			uint8_t buf[BATON_VERSION_STATE_BYTES_MAX + 1];
			size_t len = 0;
			if (baton_version_state_encode(&s, buf, sizeof buf,
						       &len) != 0)
				continue;
			char name[64];
			snprintf(name, sizeof name, "rows-%u%s%s", rows[i],
				 down ? "-downgrade" : "", held ? "-held" : "");
			seed("core_version_state", name, -1, buf, len);
		}
		struct baton_config c = {.n = rows[i]};
		for (uint32_t m = 0; m < c.n; m++)
			c.members[m] = (struct baton_member){
				m + 1,
				m % 3 == 2 ? BATON_LEARNER : BATON_VOTER};
		uint8_t buf[256];
		size_t len = 0;
		if (baton_config_encode(&c, buf, sizeof buf, &len) == 0) {
			char name[64];
			snprintf(name, sizeof name, "members-%u", rows[i]);
			seed("core_config", name, -1, buf, len);
		}
	}
}

static void resp_seeds(void)
{
	static const char *const requests[] = {
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n",
		"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n",
		"PING\r\nSET a \"b c\\x41\\n\" 'it\\'s'\r\n\r\n",
		"*0\r\n*-1\r\n*1\r\n$0\r\n\r\n",
		"MULTI\r\nINCR n\r\nEXEC\r\n",
		"*2\r\n$4\r\nECHO\r\n$-1\r\n",
		"*1\r\n$3\r\nabc\r\n*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n",
	};
	for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "request-%zu", i);
		seed("resp_request", name, -1, (const uint8_t *)requests[i],
		     strlen(requests[i]));
	}
	/* Replies, RESP3's types too (the proxy's reply scanner). */
	static const char *const replies[] = {
		"+OK\r\n-ERR no\r\n:42\r\n$5\r\nhello\r\n$-1\r\n",
		"*3\r\n:1\r\n*2\r\n+x\r\n$-1\r\n*-1\r\n*0\r\n",
		"%1\r\n+k\r\n~2\r\n,1.5\r\n#t\r\n_\r\n(123\r\n",
		"|1\r\n+a\r\n:1\r\n>1\r\n=7\r\ntxt:abc\r\n!3\r\nERR\r\n",
	};
	for (size_t i = 0; i < sizeof replies / sizeof replies[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "reply-%zu", i);
		seed("resp_reply", name, -1, (const uint8_t *)replies[i],
		     strlen(replies[i]));
	}
	/* The metrics port's request heads: served, refused, half sent. */
	static const char *const heads[] = {
		"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /health?max_lag=10 HTTP/1.0\r\n\r\n",
		"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
		"GET /health HTTP/1.1\nTransfer-Encoding: chunked\n\n",
		"GET /x HTTP/1.1\r\nHost: x\r\n",
	};
	for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "head-%zu", i);
		seed("http_request", name, -1, (const uint8_t *)heads[i],
		     strlen(heads[i]));
	}
}

/* ---- the state machine: payloads and snapshots --------------------------- */

#define CMD(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Append one framed payload (u16 length, bytes) of kv_payload's input. */
static void frame_payload(struct baton_buf *seq, const struct baton_buf *p)
{
	uint8_t len[2] = {(uint8_t)(p->len & 0xff), (uint8_t)(p->len >> 8)};
	if (baton_buf_append(seq, len, 2) != 0 ||
	    baton_buf_append(seq, p->data, p->len) != 0)
		exit(1);
}

/* A command's arguments from NULL-terminated strings. */
static int args_of(const char *const *words, const uint8_t **argv, size_t *lens)
{
	int argc = 0;
	for (; words[argc] != NULL; argc++) {
		argv[argc] = (const uint8_t *)words[argc];
		lens[argc] = strlen(words[argc]);
	}
	return argc;
}

static void kv_sequence(uint8_t version, struct baton_buf *seq)
{
	const char *const *cmds[] = {
		CMD("SET", "k", "value"), CMD("INCR", "n"),
		CMD("APPEND", "k", "!"),  CMD("SET", "t", "1", "PX", "500"),
		CMD("DEL", "k", "n"),	  CMD("MSET", "a", "1", "b", "2"),
	};
	uint8_t selector = (uint8_t)(version - 1);
	if (baton_buf_append(seq, &selector, 1) != 0)
		exit(1);
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		const uint8_t *argv[8];
		size_t lens[8];
		int argc = args_of(cmds[i], argv, lens);
		struct baton_buf p;
		baton_buf_init(&p);
		int rv = version == 1
				 ? kv_encode(argc, argv, lens, &p)
				 : kv_encode_v2(1000 + i, argc, argv, lens, &p);
		if (rv == 0)
			frame_payload(seq, &p);
		baton_buf_free(&p);
	}
	if (version == 1)
		return;
	const char *const *hash_cmds[] = {
		CMD("HSET", "h", "f", "1", "g", "2"),
		CMD("HINCRBY", "h", "f", "5"),
		CMD("HDEL", "h", "g"),
		CMD("EXPIRE", "h", "100"),
		CMD("SETEX", "e", "10", "v"),
		CMD("SETRANGE", "e", "3", "xy"),
		CMD("RENAME", "e", "r"),
		CMD("COPY", "h", "c", "REPLACE"),
		CMD("GETSET", "r", "w"),
		CMD("MSETNX", "m", "1", "o", "2"),
		CMD("INCRBYFLOAT", "m", "0.5"),
		CMD("GETDEL", "o"),
		CMD("SETNX", "n", "1"),
		CMD("PSETEX", "p", "1500", "v"),
		CMD("RENAMENX", "p", "q"),
		CMD("UNLINK", "n", "q"),
		CMD("FLUSHDB", "ASYNC"),
	};
	size_t n_hash_cmds = sizeof hash_cmds / sizeof hash_cmds[0];
	for (size_t i = 0; version >= 3 && i < n_hash_cmds; i++) {
		const uint8_t *argv[8];
		size_t lens[8];
		int argc = args_of(hash_cmds[i], argv, lens);
		struct baton_buf p;
		baton_buf_init(&p);
		if (kv_encode_v2(1500 + i, argc, argv, lens, &p) == 0)
			frame_payload(seq, &p);
		baton_buf_free(&p);
	}
	const uint8_t *argv[4];
	size_t lens[4];
	int argc = args_of(CMD("INCR", "a"), argv, lens);
	struct kv_txn_command txn = {argc, argv, lens};
	struct kv_watch watch = {(const uint8_t *)"b", 1, 0};
	struct baton_buf p;
	baton_buf_init(&p);
	if (kv_encode_txn(2000, 1, &watch, 1, &txn, &p) == 0)
		frame_payload(seq, &p);
	baton_buf_reset(&p);
	if (kv_encode_sweep(3000, 10, &p) == 0)
		frame_payload(seq, &p);
	baton_buf_free(&p);
}

static int kv_sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

/* A backup file (docs/backup.md) holding a kv snapshot. */
static void backup_seed(const uint8_t *payload, size_t len)
{
	struct backup_header h = {.format = BACKUP_FORMAT,
				  .index = 42,
				  .term = 3,
				  .machine_version = 3,
				  .release = "2.0.0",
				  .created_ms = 1790000000000ull,
				  .has_uuid = true,
				  .uuid = {1, 2, 3},
				  .cluster_id = "baton",
				  .payload_len = len};
	size_t size = BACKUP_HEADER_BYTES + len + BACKUP_TRAILER_BYTES;
	uint8_t *b = malloc(size);
	if (b == NULL)
		die("malloc", "a backup seed");
	backup_header_encode(&h, b);
	memcpy(b + BACKUP_HEADER_BYTES, payload, len);
	baton_le_put_u64(
		b + BACKUP_HEADER_BYTES + len,
		backup_file_checksum(b, baton__checksum(payload, len)));
	seed("backup_file", "map-migration-v3", -1, b, size);
	free(b);
}

/* A migration's new side under version 3 (docs/kv.md "Migration"): BEGIN,
 * a CHUNK of export records, END, entries (a write, a resend, a fence),
 * AUTHORITY, a write; and the old side's FENCE and a refused write. */
static void kv_migration_sequence(struct baton_buf *seq)
{
	uint8_t selector = 2; /* version 3 */
	struct baton_kv *old = NULL;
	struct baton_buf p, records, w;
	baton_buf_init(&p);
	baton_buf_init(&records);
	baton_buf_init(&w);
	if (baton_buf_append(seq, &selector, 1) != 0 || kv_create(&old) != 0)
		exit(1);
	const char *const *cmds[] = {
		CMD("SET", "k", "value"),
		CMD("SET", "t", "1", "PX", "500"),
		CMD("HSET", "h", "f", "1", "g", "2"),
	};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		const uint8_t *argv[8];
		size_t lens[8];
		int argc = args_of(cmds[i], argv, lens);
		baton_buf_reset(&p);
		if (kv_encode_v2(1000, argc, argv, lens, &p) != 0 ||
		    kv_apply(old, (struct baton_machine_version){3}, p.data,
			     p.len, NULL) != 0)
			exit(1);
	}
	bool done = false;
	if (kv_export_begin(old) != 0)
		exit(1);
	while (!done)
		if (kv_export_step(old, 1 << 16, &records, &done) != 0)
			exit(1);
	kv_export_end(old);
	kv_destroy(old);
	const uint8_t *argv[4];
	size_t lens[4];
	int argc = args_of(CMD("INCR", "n"), argv, lens);
	if (kv_encode_v2(2000, argc, argv, lens, &w) != 0)
		exit(1);
#define FRAME(call)                                                            \
	do {                                                                   \
		baton_buf_reset(&p);                                           \
		if ((call) != 0)                                               \
			exit(1);                                               \
		frame_payload(seq, &p);                                        \
	} while (0)
	FRAME(kv_encode_import_begin(7, 1000, &p));
	FRAME(kv_encode_import_chunk(7, 0, records.data, records.len, &p));
	FRAME(kv_encode_import_end(7, 1, &p));
	FRAME(kv_encode_import_entry(8, w.data, w.len, &p));
	FRAME(kv_encode_import_entry(8, w.data, w.len, &p));
	baton_buf_reset(&records);
	if (kv_encode_fence(2500, "new", &records) != 0)
		exit(1);
	FRAME(kv_encode_import_entry(9, records.data, records.len, &p));
	FRAME(kv_encode_authority(9, &p));
	FRAME(kv_encode_v2(3000, argc, argv, lens, &p));
	FRAME(kv_encode_fence(3500, "next", &p));
	FRAME(kv_encode_v2(4000, argc, argv, lens, &p));
#undef FRAME
	baton_buf_free(&p);
	baton_buf_free(&records);
	baton_buf_free(&w);
}

static void kv_seeds(void)
{
	for (uint8_t version = 1; version <= 3; version++) {
		struct baton_buf seq;
		baton_buf_init(&seq);
		kv_sequence(version, &seq);
		char name[32];
		snprintf(name, sizeof name, "writes-v%u", version);
		seed("kv_payload", name, -1, seq.data, seq.len);
		/* The map those writes make, as a snapshot. */
		struct baton_kv *kv = NULL;
		if (kv_create(&kv) != 0)
			exit(1);
		struct baton_machine_version v = {version};
		for (size_t off = 1; off + 2 <= seq.len;) {
			size_t len = seq.data[off] | (size_t)seq.data[off + 1]
							     << 8;
			kv_apply(kv, v, seq.data + off + 2, len, NULL);
			off += 2 + len;
		}
		struct baton_buf snap;
		baton_buf_init(&snap);
		if (kv_snapshot(kv, v, kv_sink, &snap) == 0) {
			snprintf(name, sizeof name, "map-v%u", version);
			seed("kv_snapshot", name, version - 1, snap.data,
			     snap.len);
		}
		baton_buf_free(&snap);
		baton_buf_free(&seq);
		kv_destroy(kv);
	}
	struct baton_buf seq, snap;
	baton_buf_init(&seq);
	baton_buf_init(&snap);
	kv_migration_sequence(&seq);
	seed("kv_payload", "migration-v3", -1, seq.data, seq.len);
	/* The new map it makes: a snapshot with a migration section. */
	struct baton_kv *kv = NULL;
	if (kv_create(&kv) != 0)
		exit(1);
	for (size_t off = 1; off + 2 <= seq.len;) {
		size_t len = seq.data[off] | (size_t)seq.data[off + 1] << 8;
		kv_apply(kv, (struct baton_machine_version){3},
			 seq.data + off + 2, len, NULL);
		off += 2 + len;
	}
	if (kv_snapshot(kv, (struct baton_machine_version){3}, kv_sink,
			&snap) == 0) {
		seed("kv_snapshot", "map-migration-v3", 2, snap.data, snap.len);
		backup_seed(snap.data, snap.len);
	}
	kv_destroy(kv);
	baton_buf_free(&seq);
	baton_buf_free(&snap);
}

/* One message of every type the migration's leaders exchange, sealed
 * with the target's secret. */
static void migration_seeds(void)
{
	static struct migration_keys keys;
	if (migration_keys_init(&keys, (const uint8_t *)FUZZ_MIGRATION_SECRET,
				sizeof FUZZ_MIGRATION_SECRET - 1) != 0)
		die("keys", "the migration secret");
	static const uint8_t data[] = "new";
	static const uint8_t nonce[MIG_NONCE_BYTES] = {7};
	for (uint8_t t = 1; t <= MIG_MSG_TYPE_MAX; t++) {
		struct migration_msg m = {.type = t,
					  .from_node = 11,
					  .session = 0x1234,
					  .seq = 1000 + t,
					  .applied = 100,
					  .index = 99,
					  .value = t,
					  .data = data,
					  .len = 3};
		snprintf(m.from_cluster, sizeof m.from_cluster, "new");
		snprintf(m.to_cluster, sizeof m.to_cluster, "old");
		struct baton_buf b;
		baton_buf_init(&b);
		if (migration_msg_seal_nonce(&keys, &m, nonce, &b) != 0)
			die("seal", "a migration message");
		char name[32];
		snprintf(name, sizeof name, "%s", migration_msg_name(t));
		seed("migration_msg", name, -1, b.data, b.len);
		baton_buf_free(&b);
	}
	migration_keys_wipe(&keys);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz-seeds OUT_DIR TESTS_DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
		die("mkdir", out_dir);
	sample_seeds();
	golden_wire_seeds(argv[2]);
	golden_storage_seeds(argv[2]);
	identity_seeds();
	core_seeds();
	resp_seeds();
	kv_seeds();
	migration_seeds();
	return 0;
}
