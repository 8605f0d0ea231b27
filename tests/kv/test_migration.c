/*
 * The map's part of a migration (docs/kv.md "Migration"): the export of
 * the live map imported through IMPORT_BEGIN, CHUNKs and END into a fresh
 * map, old entries replayed in order with resends skipped, a BEGIN
 * restarting an open snapshot, FENCE refusing writes, an importing map
 * refusing plain writes until AUTHORITY, the migration state through
 * snapshots (whole and incremental), and malformed payloads refused with
 * nothing changed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"

static const struct baton_machine_version V1 = {1}, V2 = {2}, V3 = {3};
#define T0 1700000000000ull

static struct baton_kv *old_kv, *new_kv;
static struct baton_buf payload, reply, text;

static void setup(void)
{
	old_kv = kvt_new();
	new_kv = kvt_new();
	baton_buf_init(&payload);
	baton_buf_init(&reply);
	baton_buf_init(&text);
}

static void teardown(void)
{
	kv_destroy(old_kv);
	kv_destroy(new_kv);
	baton_buf_free(&payload);
	baton_buf_free(&reply);
	baton_buf_free(&text);
}

TestSuite(migration, .init = setup, .fini = teardown);

/* The arguments of a line split on single spaces. */
struct line {
	int argc;
	const uint8_t *argv[64];
	size_t lens[64];
	char buf[1024];
};

static void split(const char *s, struct line *l)
{
	snprintf(l->buf, sizeof l->buf, "%s", s);
	l->argc = 0;
	for (char *p = l->buf; *p != '\0';) {
		char *sp = strchr(p, ' ');
		size_t n = sp != NULL ? (size_t)(sp - p) : strlen(p);
		l->argv[l->argc] = (const uint8_t *)p;
		l->lens[l->argc++] = n;
		p += n + (sp != NULL);
	}
}

/* The format-2 payload of a command line, stamped, in out (reset). */
static void encode(uint64_t stamp, const char *s, struct baton_buf *out)
{
	struct line l;
	split(s, &l);
	baton_buf_reset(out);
	cr_assert_eq(kv_encode_v2(stamp, l.argc, l.argv, l.lens, out), 0);
}

/* Apply p under v; the reply as a NUL-terminated string. */
static const char *apply(struct baton_kv *k, struct baton_machine_version v,
			 const struct baton_buf *p, int want)
{
	baton_buf_reset(&reply);
	int rv = kv_apply(k, v, p->data, p->len, &reply);
	cr_assert_eq(rv, want, "kv_apply: %d, not %d (%s)", rv, want,
		     kv_errmsg(k));
	baton_buf_append(&reply, "", 1);
	return (const char *)reply.data;
}

/* Run a command line as a stamped write under version 3. */
static const char *run(struct baton_kv *k, uint64_t stamp, const char *s)
{
	encode(stamp, s, &payload);
	return apply(k, V3, &payload, 0);
}

static const char *read_cmd(struct baton_kv *k, const char *s)
{
	struct line l;
	split(s, &l);
	baton_buf_reset(&reply);
	cr_assert_eq(kv_read(k, l.argc, l.argv, l.lens, &reply), 0);
	baton_buf_append(&reply, "", 1);
	return (const char *)reply.data;
}

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

static void snap(const struct baton_kv *k, struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(kv_snapshot(k, V3, sink, out), 0, "%s", kv_errmsg(k));
}

/* The map's version-3 snapshot read in steps of `budget` bytes. */
static void snap_sliced(struct baton_kv *k, size_t budget,
			struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(kv_snapshot_begin(k, V3), 0);
	bool done = false;
	while (!done)
		cr_assert_eq(kv_snapshot_step(k, budget, sink, out, &done), 0);
	kv_snapshot_end(k);
}

/* Both maps hold the same keys, values, expiries and machine time: their
 * snapshots agree but for the migration section (the new map's) and the
 * checksum. */
static void assert_same_contents(const struct baton_kv *a,
				 const struct baton_kv *b)
{
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	snap(a, &sa);
	snap(b, &sb);
	cr_assert_geq(sb.len, sa.len);
	cr_assert_eq(memcmp(sa.data, sb.data, sa.len - 8), 0,
		     "the maps' contents differ");
	baton_buf_free(&sa);
	baton_buf_free(&sb);
}

static void assert_same_bytes(const struct baton_buf *a,
			      const struct baton_buf *b)
{
	cr_assert_eq(a->len, b->len, "%zu bytes, not %zu", a->len, b->len);
	cr_assert_eq(memcmp(a->data, b->data, a->len), 0, "the bytes differ");
}

static struct kv_migration state(const struct baton_kv *k)
{
	struct kv_migration m;
	kv_migration_state(k, &m);
	return m;
}

/* A map of strings, hashes and expiries (some expired, not swept). */
static void fill(struct baton_kv *k, int n)
{
	char line[256];
	run(k, T0, "SET first 1");
	for (int i = 0; i < n; i++) {
		switch (i % 5) {
		case 0:
			snprintf(line, sizeof line, "SET s%d value-%d", i, i);
			break;
		case 1:
			snprintf(line, sizeof line, "SET e%d v%d PXAT %llu", i,
				 i,
				 (unsigned long long)(T0 + 1000 + (unsigned)i));
			break;
		case 2:
			snprintf(line, sizeof line,
				 "HSET h%d f1 a%d f2 b%d f3 %d", i, i, i, i);
			break;
		case 3:
			snprintf(line, sizeof line, "SET x%d gone PXAT %llu", i,
				 (unsigned long long)(T0 + 50));
			break;
		default:
			snprintf(line, sizeof line, "HSET g%d only %d", i, i);
			run(k, T0, line);
			snprintf(line, sizeof line, "PEXPIREAT g%d %llu", i,
				 (unsigned long long)(T0 + 99999));
		}
		run(k, T0, line);
	}
	/* Machine time moves past the x keys' expiry, without a sweep. */
	run(k, T0 + 100, "SET last 2");
}

/* Export k whole, a chunk per step of `budget` bytes, into chunks. */
static size_t export_chunks(struct baton_kv *k, size_t budget,
			    struct baton_buf *chunks, size_t max)
{
	cr_assert_eq(kv_export_begin(k), 0, "%s", kv_errmsg(k));
	bool done = false;
	size_t n = 0;
	while (!done) {
		cr_assert_lt(n, max);
		baton_buf_init(&chunks[n]);
		cr_assert_eq(kv_export_step(k, budget, &chunks[n], &done), 0);
		n++;
	}
	kv_export_end(k);
	return n;
}

static void free_chunks(struct baton_buf *chunks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		baton_buf_free(&chunks[i]);
}

static void begin(struct baton_kv *k, uint64_t s, uint64_t t)
{
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_import_begin(s, t, &payload), 0);
	cr_assert_str_eq(apply(k, V3, &payload, 0), "+OK\r\n");
}

static const char *chunk(struct baton_kv *k, uint64_t s, uint32_t seq,
			 const struct baton_buf *records)
{
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_import_chunk(s, seq, records->data, records->len,
					    &payload),
		     0);
	return apply(k, V3, &payload, 0);
}

static const char *end(struct baton_kv *k, uint64_t s, uint32_t n)
{
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_import_end(s, n, &payload), 0);
	return apply(k, V3, &payload, 0);
}

static const char *entry(struct baton_kv *k, uint64_t i,
			 const struct baton_buf *old)
{
	struct baton_buf p;
	baton_buf_init(&p);
	cr_assert_eq(kv_encode_import_entry(i, old->data, old->len, &p), 0);
	const char *r = apply(k, V3, &p, 0);
	baton_buf_free(&p);
	return r;
}

static const char *authority(struct baton_kv *k, uint64_t from)
{
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_authority(from, &payload), 0);
	return apply(k, V3, &payload, 0);
}

static const char *fence(struct baton_kv *k, struct baton_machine_version v,
			 uint64_t stamp, const char *target)
{
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_fence(stamp, target, &payload), 0);
	return apply(k, v, &payload, 0);
}

/* Import old_kv's export into new_kv at old index s. */
static void import_all(uint64_t s, size_t budget)
{
	static struct baton_buf chunks[4096];
	size_t n = export_chunks(old_kv, budget, chunks, 4096);
	begin(new_kv, s, kv_machine_time_ms(old_kv));
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(chunk(new_kv, s, (uint32_t)i, &chunks[i]),
				 "+OK\r\n");
	cr_assert_str_eq(end(new_kv, s, (uint32_t)n), "+OK\r\n");
	free_chunks(chunks, n);
}

/* Sweep every key due at machine time (it stays where it is). */
static void sweep_due(struct baton_kv *k)
{
	baton_buf_reset(&payload);
	cr_assert_eq(kv_encode_sweep(kv_machine_time_ms(k), KV_SWEEP_KEYS_MAX,
				     &payload),
		     0);
	apply(k, V3, &payload, 0);
}

Test(migration, export_import_gives_the_same_live_map)
{
	fill(old_kv, 3000);
	run(new_kv, T0 + 5, "SET stale 1"); /* BEGIN deletes it */
	import_all(77, 4096);
	struct kv_migration m = state(new_kv);
	cr_assert(m.importing && !m.snapshot_open && !m.authority);
	cr_assert_eq(m.import_index, 77);
	cr_assert_eq(m.snapshot_index, 77);
	cr_assert_gt(m.snapshot_chunks, 10);
	cr_assert_eq(kv_machine_time_ms(new_kv), T0 + 100);
	cr_assert_str_eq(read_cmd(new_kv, "GET stale"), "$-1\r\n");
	cr_assert_str_eq(read_cmd(new_kv, "HGET h2 f2"), "$2\r\nb2\r\n");
	cr_assert_str_eq(read_cmd(new_kv, "PTTL g4"), ":99899\r\n");
	/* The exporter skipped the expired keys the old map still holds. */
	cr_assert_eq(kv_dbsize(new_kv), kv_dbsize(old_kv) - 600);
	sweep_due(old_kv);
	assert_same_contents(old_kv, new_kv);
	/* The exporter's map is unchanged and has no migration state. */
	cr_assert_not(kv__migration_any(&old_kv->mig));
}

Test(migration, one_record_per_step_and_an_empty_map)
{
	/* An empty map exports nothing: BEGIN and END alone. */
	import_all(5, 1);
	cr_assert_eq(kv_dbsize(new_kv), 0);
	cr_assert_eq(state(new_kv).import_index, 5);
	fill(old_kv, 50);
	sweep_due(old_kv);
	import_all(6, 1); /* a record per chunk */
	cr_assert_eq(state(new_kv).snapshot_chunks, kv_dbsize(old_kv));
	assert_same_contents(old_kv, new_kv);
}

Test(migration, the_export_is_the_map_at_begin)
{
	fill(old_kv, 600);
	sweep_due(old_kv);
	struct baton_kv *copy = kvt_new();
	struct baton_buf s;
	baton_buf_init(&s);
	snap(old_kv, &s);
	cr_assert_eq(kv_restore(copy, V3, s.data, s.len), 0);
	/* Only one view: a snapshot or a KEYS waits for the export. */
	cr_assert_eq(kv_export_begin(old_kv), 0);
	cr_assert(kv_export_open(old_kv));
	cr_assert_eq(kv_export_begin(old_kv), BATON_ESTATE);
	cr_assert_eq(kv_snapshot_begin(old_kv, V3), BATON_EBUSY);
	cr_assert_eq(kv_keys_begin(old_kv, (const uint8_t *)"*", 1),
		     BATON_EBUSY);
	bool done = false;
	uint32_t seq = 0;
	begin(new_kv, 9, kv_machine_time_ms(old_kv));
	char line[128];
	for (int i = 0; !done; i++) {
		struct baton_buf c;
		baton_buf_init(&c);
		cr_assert_eq(kv_export_step(old_kv, 512, &c, &done), 0);
		cr_assert_str_eq(chunk(new_kv, 9, seq++, &c), "+OK\r\n");
		baton_buf_free(&c);
		/* Writes between the steps: changes, deletes, new keys,
		 * hashes written in place. */
		snprintf(line, sizeof line, "SET s%d changed", (i * 7) % 600);
		run(old_kv, T0 + 100, line);
		snprintf(line, sizeof line, "DEL h%d", (i * 11 + 2) % 600);
		run(old_kv, T0 + 100, line);
		snprintf(line, sizeof line, "HSET g%d new %d",
			 (i * 5 + 4) % 600, i);
		run(old_kv, T0 + 100, line);
		snprintf(line, sizeof line, "SET born%d 1", i);
		run(old_kv, T0 + 100, line);
	}
	kv_export_end(old_kv);
	cr_assert_not(kv_export_open(old_kv));
	cr_assert_str_eq(end(new_kv, 9, seq), "+OK\r\n");
	assert_same_contents(copy, new_kv);
	kv_destroy(copy);
	baton_buf_free(&s);
	/* The view is free again. */
	cr_assert_eq(kv_snapshot_begin(old_kv, V3), 0);
	cr_assert_eq(kv_export_begin(old_kv), BATON_EBUSY);
	kv_snapshot_end(old_kv);
	cr_assert_eq(kv_export_step(old_kv, 1, &text, &done), BATON_ESTATE);
}

Test(migration, entries_apply_in_order_and_resends_are_skipped)
{
	fill(old_kv, 200);
	sweep_due(old_kv);
	import_all(10, 2048);
	/* The old log goes on: each payload applied there and imported
	 * with its old index (gaps are entries that are not writes). */
	static struct baton_buf old[40];
	uint64_t index[40];
	char line[128];
	for (int i = 0; i < 40; i++) {
		switch (i % 4) {
		case 0:
			snprintf(line, sizeof line, "SET s%d after-%d", i * 5,
				 i);
			break;
		case 1:
			snprintf(line, sizeof line, "HINCRBY h%d n %d",
				 (i * 5 + 2) % 200, i);
			break;
		case 2:
			snprintf(line, sizeof line, "INCR counter");
			break;
		default:
			snprintf(line, sizeof line, "SET t%d x PX 5", i);
		}
		baton_buf_init(&old[i]);
		encode(T0 + 200 + (uint64_t)i * 3, line, &old[i]);
		baton_buf_reset(&reply);
		cr_assert_eq(
			kv_apply(old_kv, V3, old[i].data, old[i].len, &reply),
			0);
		index[i] = 11 + (uint64_t)i * 2;
	}
	for (int i = 0; i < 40; i++) {
		const char *r = entry(new_kv, index[i], &old[i]);
		cr_assert_neq(r[0], '-', "%s", r);
		cr_assert_eq(state(new_kv).import_index, index[i]);
		if (i == 20) {
			/* A resend from an earlier index: skipped. */
			for (int j = 10; j <= 20; j++)
				cr_assert_str_eq(
					entry(new_kv, index[j], &old[j]),
					"+SKIPPED\r\n");
			cr_assert_eq(state(new_kv).import_index, index[20]);
		}
	}
	/* A sweep and a transaction too. */
	struct baton_buf sw, tx;
	baton_buf_init(&sw);
	baton_buf_init(&tx);
	cr_assert_eq(kv_encode_sweep(T0 + 400, 100, &sw), 0);
	struct line a, b;
	split("SET tx 1", &a);
	split("INCR tx", &b);
	struct kv_txn_command cmds[2] = {{a.argc, a.argv, a.lens},
					 {b.argc, b.argv, b.lens}};
	cr_assert_eq(kv_encode_txn(T0 + 401, 0, NULL, 2, cmds, &tx), 0);
	baton_buf_reset(&reply);
	cr_assert_eq(kv_apply(old_kv, V3, sw.data, sw.len, &reply), 0);
	baton_buf_reset(&reply);
	cr_assert_eq(kv_apply(old_kv, V3, tx.data, tx.len, &reply), 0);
	cr_assert_str_eq(entry(new_kv, 200, &sw), ":10\r\n");
	cr_assert_str_eq(entry(new_kv, 201, &tx), "*2\r\n+OK\r\n:2\r\n");
	assert_same_contents(old_kv, new_kv);
	/* Resending everything again changes nothing. */
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	snap(new_kv, &before);
	for (int i = 0; i < 40; i++)
		cr_assert_str_eq(entry(new_kv, index[i], &old[i]),
				 "+SKIPPED\r\n");
	cr_assert_str_eq(entry(new_kv, 201, &tx), "+SKIPPED\r\n");
	snap(new_kv, &after);
	assert_same_bytes(&before, &after);
	for (int i = 0; i < 40; i++)
		baton_buf_free(&old[i]);
	baton_buf_free(&sw);
	baton_buf_free(&tx);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, a_begin_restarts_an_open_snapshot)
{
	fill(old_kv, 300);
	sweep_due(old_kv);
	static struct baton_buf chunks[512];
	size_t n = export_chunks(old_kv, 1024, chunks, 512);
	cr_assert_gt(n, 4);
	begin(new_kv, 40, kv_machine_time_ms(old_kv));
	for (size_t i = 0; i < n / 2; i++)
		cr_assert_str_eq(chunk(new_kv, 40, (uint32_t)i, &chunks[i]),
				 "+OK\r\n");
	/* An entry while the snapshot is open is refused. */
	encode(T0 + 500, "SET z 1", &text);
	cr_assert(strstr(entry(new_kv, 41, &text), "still open") != NULL);
	/* The stream broke: a new snapshot at index 50. */
	begin(new_kv, 50, kv_machine_time_ms(old_kv));
	cr_assert_eq(kv_dbsize(new_kv), 0);
	cr_assert_eq(state(new_kv).snapshot_chunks, 0);
	/* The old snapshot's chunks, and out-of-order ones, are refused. */
	cr_assert_str_eq(chunk(new_kv, 40, 0, &chunks[0]),
			 "-ERR import chunk refused: expected snapshot 50 "
			 "chunk 0, found snapshot 40 chunk 0\r\n");
	cr_assert_str_eq(chunk(new_kv, 50, 1, &chunks[1]),
			 "-ERR import chunk refused: expected snapshot 50 "
			 "chunk 0, found snapshot 50 chunk 1\r\n");
	cr_assert_eq(kv_dbsize(new_kv), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(chunk(new_kv, 50, (uint32_t)i, &chunks[i]),
				 "+OK\r\n");
	/* A chunk resent after the last: refused, nothing changed. */
	cr_assert(strncmp(chunk(new_kv, 50, 0, &chunks[0]), "-ERR", 4) == 0);
	cr_assert(strncmp(end(new_kv, 50, (uint32_t)n - 1), "-ERR", 4) == 0);
	cr_assert(strncmp(end(new_kv, 40, (uint32_t)n), "-ERR", 4) == 0);
	cr_assert_str_eq(end(new_kv, 50, (uint32_t)n), "+OK\r\n");
	cr_assert_eq(state(new_kv).import_index, 50);
	cr_assert_str_eq(end(new_kv, 50, (uint32_t)n),
			 "-ERR import end of snapshot 50 refused: no snapshot "
			 "is open (the import index is 50)\r\n");
	assert_same_contents(old_kv, new_kv);
	free_chunks(chunks, n);
}

Test(migration, a_fence_refuses_every_write_and_reads_go_on)
{
	fill(old_kv, 100);
	cr_assert_str_eq(fence(old_kv, V3, T0 + 1000, "cluster-b"), "+OK\r\n");
	struct kv_migration m = state(old_kv);
	cr_assert(m.fenced);
	cr_assert_str_eq(m.fence_target, "cluster-b");
	cr_assert_eq(kv_machine_time_ms(old_kv), T0 + 100); /* not moved */
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	snap(old_kv, &before);
	cr_assert_str_eq(run(old_kv, T0 + 2000, "SET s0 new"), KV_FENCED_REPLY);
	cr_assert_str_eq(run(old_kv, T0 + 2000, "FLUSHALL"), KV_FENCED_REPLY);
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_sweep(T0 + 9000000, 1000, &text), 0);
	cr_assert_str_eq(apply(old_kv, V3, &text, 0), KV_FENCED_REPLY);
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_txn(T0 + 3000, 0, NULL, 0, NULL, &text), 0);
	cr_assert_str_eq(apply(old_kv, V3, &text, 0), KV_FENCED_REPLY);
	baton_buf_reset(&text);
	kvt_encode("SET s0 v1", &text); /* format 1 */
	cr_assert_str_eq(apply(old_kv, V3, &text, 0), KV_FENCED_REPLY);
	/* Even a command this release does not know: never applied. */
	cr_assert_str_eq(run(old_kv, T0, "ZADD z 1 m"), KV_FENCED_REPLY);
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_import_begin(1, T0, &text), 0);
	cr_assert_str_eq(apply(old_kv, V3, &text, 0), KV_FENCED_REPLY);
	/* A second fence changes nothing, its target included. */
	cr_assert_str_eq(fence(old_kv, V3, T0 + 5000, "other"), "+OK\r\n");
	cr_assert_str_eq(state(old_kv).fence_target, "cluster-b");
	snap(old_kv, &after);
	assert_same_bytes(&before, &after);
	cr_assert_eq(kv_machine_time_ms(old_kv), T0 + 100);
	cr_assert_str_eq(read_cmd(old_kv, "GET s0"), "$7\r\nvalue-0\r\n");
	/* Machine version 2 fences too; version 1 cannot (format 2). */
	cr_assert_str_eq(fence(new_kv, V2, T0, ""), "+OK\r\n");
	cr_assert(state(new_kv).fenced);
	struct baton_kv *v1 = kvt_new();
	cr_assert(strstr(fence(v1, V1, T0, "b"), "machine version 1") != NULL);
	cr_assert_not(state(v1).fenced);
	kv_destroy(v1);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, importing_refuses_plain_writes_until_authority)
{
	fill(old_kv, 50);
	sweep_due(old_kv);
	import_all(30, 4096);
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	snap(new_kv, &before);
	cr_assert_str_eq(run(new_kv, T0 + 9000, "SET s0 x"),
			 KV_IMPORTING_REPLY);
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_sweep(T0 + 9000000, 1000, &text), 0);
	cr_assert_str_eq(apply(new_kv, V3, &text, 0), KV_IMPORTING_REPLY);
	snap(new_kv, &after);
	assert_same_bytes(&before, &after);
	/* Authority needs the import through its index. */
	cr_assert_str_eq(authority(new_kv, 31),
			 "-ERR authority from old index 31 refused: the "
			 "import has applied the old log through index 30 "
			 "only\r\n");
	encode(T0 + 300, "SET s0 from-old", &text);
	cr_assert_str_eq(entry(new_kv, 31, &text), "+OK\r\n");
	cr_assert_str_eq(authority(new_kv, 31), "+OK\r\n");
	struct kv_migration m = state(new_kv);
	cr_assert(m.authority && !m.importing);
	cr_assert_eq(m.authority_from, 31);
	cr_assert_str_eq(run(new_kv, T0 + 9000, "SET s0 x"), "+OK\r\n");
	cr_assert_eq(kv_machine_time_ms(new_kv), T0 + 9000);
	/* The import is over: its payloads are refused, AUTHORITY again
	 * changes nothing. */
	cr_assert(strstr(entry(new_kv, 32, &text), "holds write authority") !=
		  NULL);
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_import_begin(99, T0, &text), 0);
	cr_assert(strncmp(apply(new_kv, V3, &text, 0), "-ERR", 4) == 0);
	cr_assert_str_eq(authority(new_kv, 5), "+OK\r\n");
	cr_assert_eq(state(new_kv).authority_from, 31);
	cr_assert_str_eq(read_cmd(new_kv, "GET s0"), "$1\r\nx\r\n");
	/* Authority without an import, or with a snapshot open. */
	struct baton_kv *k = kvt_new();
	cr_assert(strstr(authority(k, 0), "no import") != NULL);
	begin(k, 3, T0);
	cr_assert(strstr(authority(k, 3), "still open") != NULL);
	encode(T0, "SET q 1", &text);
	cr_assert(strstr(entry(k, 4, &text), "still open") != NULL);
	kv_destroy(k);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, a_fence_in_an_entry_is_an_index_step)
{
	import_all(1, 4096);
	encode(T0 + 10, "SET a 1", &text);
	cr_assert_str_eq(entry(new_kv, 2, &text), "+OK\r\n");
	struct baton_buf f;
	baton_buf_init(&f);
	cr_assert_eq(kv_encode_fence(T0 + 20, "new", &f), 0);
	cr_assert_str_eq(entry(new_kv, 3, &f), "+OK\r\n");
	struct kv_migration m = state(new_kv);
	cr_assert_not(m.fenced);
	cr_assert_eq(m.import_fence_index, 3);
	cr_assert_eq(m.import_index, 3);
	cr_assert_eq(kv_machine_time_ms(new_kv), T0 + 10);
	/* The old map refused what came after its fence: so does this. */
	encode(T0 + 30, "SET a 2", &text);
	cr_assert_str_eq(entry(new_kv, 4, &text), KV_FENCED_REPLY);
	cr_assert_eq(state(new_kv).import_index, 4);
	cr_assert_str_eq(read_cmd(new_kv, "GET a"), "$1\r\n1\r\n");
	cr_assert_str_eq(authority(new_kv, 3), "+OK\r\n");
	cr_assert_str_eq(run(new_kv, T0 + 40, "SET a 3"), "+OK\r\n");
	baton_buf_free(&f);
}

Test(migration, import_payloads_need_machine_version_3)
{
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_import_begin(1, T0, &text), 0);
	cr_assert_str_eq(apply(new_kv, V2, &text, 0),
			 "-ERR an import payload (kind 5) needs machine "
			 "version 3; the effective machine version is 2\r\n");
	cr_assert(strstr(apply(new_kv, V1, &text, 0), "machine version 1") !=
		  NULL);
	cr_assert_not(kv__migration_any(&new_kv->mig));
}

/* The migration state and snapshots at each phase: restored whole, and
 * the incremental snapshot equal to the whole one. */
static void assert_round_trip(struct baton_kv *k)
{
	struct baton_buf whole, sliced, again;
	baton_buf_init(&whole);
	baton_buf_init(&sliced);
	baton_buf_init(&again);
	snap(k, &whole);
	snap_sliced(k, 1, &sliced);
	assert_same_bytes(&whole, &sliced);
	snap_sliced(k, 300, &sliced);
	assert_same_bytes(&whole, &sliced);
	struct baton_kv *r = kvt_new();
	cr_assert_eq(kv_restore(r, V3, whole.data, whole.len), 0, "%s",
		     kv_errmsg(r));
	struct kv_migration a = state(k), b = state(r);
	cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
	snap(r, &again);
	assert_same_bytes(&whole, &again);
	/* Under version 2 too, and a map without state restores to none. */
	baton_buf_reset(&again);
	if (k->table.hashes == 0) {
		cr_assert_eq(kv_snapshot(k, V2, sink, &again), 0);
		cr_assert_eq(kv_restore(r, V2, again.data, again.len), 0);
		b = state(r);
		cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
	}
	struct baton_kv *empty = kvt_new();
	snap(empty, &again);
	cr_assert_eq(kv_restore(r, V3, again.data, again.len), 0);
	cr_assert_not(kv__migration_any(&r->mig));
	kv_destroy(empty);
	kv_destroy(r);
	baton_buf_free(&whole);
	baton_buf_free(&sliced);
	baton_buf_free(&again);
}

Test(migration, the_state_survives_snapshots)
{
	fill(old_kv, 200);
	sweep_due(old_kv);
	assert_round_trip(old_kv);
	static struct baton_buf chunks[256];
	size_t n = export_chunks(old_kv, 2048, chunks, 256);
	begin(new_kv, 12, kv_machine_time_ms(old_kv));
	assert_round_trip(new_kv);
	cr_assert_str_eq(chunk(new_kv, 12, 0, &chunks[0]), "+OK\r\n");
	assert_round_trip(new_kv);
	for (size_t i = 1; i < n; i++)
		chunk(new_kv, 12, (uint32_t)i, &chunks[i]);
	end(new_kv, 12, (uint32_t)n);
	assert_round_trip(new_kv);
	struct baton_buf f;
	baton_buf_init(&f);
	cr_assert_eq(kv_encode_fence(T0 + 150, "x", &f), 0);
	entry(new_kv, 13, &f);
	assert_round_trip(new_kv);
	authority(new_kv, 13);
	assert_round_trip(new_kv);
	cr_assert_str_eq(fence(old_kv, V3, T0, "cluster-with-a-long-name"),
			 "+OK\r\n");
	assert_round_trip(old_kv);
	free_chunks(chunks, n);
	baton_buf_free(&f);
}

Test(migration, an_incremental_snapshot_keeps_the_state_at_begin)
{
	fill(old_kv, 300);
	struct baton_buf whole, sliced;
	baton_buf_init(&whole);
	baton_buf_init(&sliced);
	snap(old_kv, &whole);
	cr_assert_eq(kv_snapshot_begin(old_kv, V3), 0);
	bool done = false;
	cr_assert_eq(kv_snapshot_step(old_kv, 100, sink, &sliced, &done), 0);
	fence(old_kv, V3, T0 + 1, "b");
	while (!done)
		cr_assert_eq(
			kv_snapshot_step(old_kv, 100, sink, &sliced, &done), 0);
	kv_snapshot_end(old_kv);
	assert_same_bytes(&whole, &sliced);
	/* And the other way: the fence is in the next one. */
	snap(old_kv, &whole);
	cr_assert_eq(kv_snapshot_begin(old_kv, V3), 0);
	baton_buf_reset(&sliced);
	done = false;
	while (!done) {
		cr_assert_eq(
			kv_snapshot_step(old_kv, 100, sink, &sliced, &done), 0);
		run(old_kv, T0 + 5, "SET s0 refused");
	}
	kv_snapshot_end(old_kv);
	assert_same_bytes(&whole, &sliced);
	baton_buf_free(&whole);
	baton_buf_free(&sliced);
}

Test(migration, a_map_without_migration_has_no_section)
{
	fill(old_kv, 100);
	struct baton_buf s;
	baton_buf_init(&s);
	snap(old_kv, &s);
	for (size_t i = 0; i + 4 <= s.len; i++)
		cr_assert_neq(memcmp(s.data + i, "MIGR", 4), 0);
	/* Reads, exports and sweeps leave no migration state. */
	struct baton_buf c[64];
	free_chunks(c, export_chunks(old_kv, 4096, c, 64));
	cr_assert_not(kv__migration_any(&old_kv->mig));
	fence(old_kv, V3, T0, "b");
	snap(old_kv, &text);
	cr_assert_eq(text.len, s.len + 46 + 1);
	cr_assert_eq(memcmp(text.data + s.len - 8, "MIGR", 4), 0);
	/* Converting leaves the state alone. */
	cr_assert_eq(kv_convert(old_kv, V3, V2), 0);
	cr_assert(state(old_kv).fenced);
	baton_buf_free(&s);
}

/* Re-seal a snapshot's checksum after a change. */
static void reseal(struct baton_buf *s)
{
	baton_le_put_u64(s->data + s->len - 8,
			 baton__checksum(s->data, s->len - 8));
}

Test(migration, damaged_sections_are_refused)
{
	run(old_kv, T0, "SET a 1");
	fence(old_kv, V3, T0, "bb");
	struct baton_buf good, bad;
	baton_buf_init(&good);
	baton_buf_init(&bad);
	snap(old_kv, &good);
	size_t sec = good.len - 8 - 46 - 2;
	cr_assert_eq(memcmp(good.data + sec, "MIGR", 4), 0);
	struct baton_kv *r = kvt_new();
	run(r, T0, "SET keep 1");
	struct {
		size_t at;
		uint8_t v;
		int want;
	} cases[] = {
		{sec, 'X', BATON_ECORRUPT},	 /* the tag */
		{sec + 4, 0, BATON_ECORRUPT},	 /* section format 0 */
		{sec + 4, 2, BATON_EVERSION},	 /* a later one */
		{sec + 8, 0x10, BATON_ECORRUPT}, /* an unknown flag */
		{sec + 9, 3, BATON_ECORRUPT},	 /* the target's length */
		{sec + 10, 0, BATON_ECORRUPT},	 /* a NUL in the target */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		baton_buf_reset(&bad);
		baton_buf_append(&bad, good.data, good.len);
		bad.data[cases[i].at] = cases[i].v;
		reseal(&bad);
		cr_assert_eq(kv_restore(r, V3, bad.data, bad.len),
			     cases[i].want, "case %zu", i);
		cr_assert_str_eq(read_cmd(r, "GET keep"), "$1\r\n1\r\n");
		cr_assert_not(kv__migration_any(&r->mig));
	}
	/* A section of no state: one form per state, so refused. */
	baton_buf_reset(&bad);
	baton_buf_append(&bad, good.data, good.len);
	bad.data[sec + 8] = 0;
	memmove(bad.data + sec + 10, bad.data + sec + 12, bad.len - sec - 12);
	bad.len -= 2;
	bad.data[sec + 9] = 0;
	reseal(&bad);
	cr_assert_eq(kv_restore(r, V3, bad.data, bad.len), BATON_ECORRUPT);
	/* Every truncation, resealed. */
	for (size_t n = sec + 1; n < good.len - 8; n++) {
		baton_buf_reset(&bad);
		baton_buf_append(&bad, good.data, n);
		baton_buf_append(&bad, "01234567", 8);
		reseal(&bad);
		cr_assert_eq(kv_restore(r, V3, bad.data, bad.len),
			     BATON_ECORRUPT, "cut at %zu", n);
	}
	cr_assert_eq(kv_restore(r, V3, good.data, good.len), 0);
	cr_assert_str_eq(state(r).fence_target, "bb");
	kv_destroy(r);
	baton_buf_free(&good);
	baton_buf_free(&bad);
}

/* Apply a malformed payload to new_kv: the error, nothing changed. */
static void assert_refused(const uint8_t *p, size_t len, int want)
{
	struct baton_buf before, after;
	baton_buf_init(&before);
	baton_buf_init(&after);
	snap(new_kv, &before);
	struct kv_migration m = state(new_kv);
	baton_buf_reset(&reply);
	cr_assert_eq(kv_apply(new_kv, V3, p, len, &reply), want,
		     "length %zu kind %u", len, len > 9 ? p[9] : 0);
	cr_assert_eq(reply.len, 0);
	cr_assert_neq(kv_errmsg(new_kv)[0], '\0');
	snap(new_kv, &after);
	assert_same_bytes(&before, &after);
	struct kv_migration m2 = state(new_kv);
	cr_assert_eq(memcmp(&m, &m2, sizeof m), 0);
	baton_buf_free(&before);
	baton_buf_free(&after);
}

Test(migration, malformed_payloads_change_nothing)
{
	fill(old_kv, 20);
	sweep_due(old_kv);
	struct baton_buf c[8];
	size_t n = export_chunks(old_kv, 1 << 20, c, 8);
	cr_assert_eq(n, 1);
	begin(new_kv, 3, T0);
	/* Every truncation of each kind (an entry and a chunk cut inside
	 * their body are malformed too). */
	struct baton_buf all[6];
	for (int i = 0; i < 6; i++)
		baton_buf_init(&all[i]);
	encode(T0, "SET a 1", &text);
	cr_assert_eq(kv_encode_fence(T0, "target", &all[0]), 0);
	cr_assert_eq(kv_encode_import_begin(3, T0, &all[1]), 0);
	cr_assert_eq(kv_encode_import_chunk(3, 0, c[0].data, c[0].len, &all[2]),
		     0);
	cr_assert_eq(kv_encode_import_end(3, 1, &all[3]), 0);
	cr_assert_eq(kv_encode_import_entry(4, text.data, text.len, &all[4]),
		     0);
	cr_assert_eq(kv_encode_authority(4, &all[5]), 0);
	for (int i = 0; i < 6; i++) {
		for (size_t len = 0; len < all[i].len; len++) {
			if (i == 2 && len >= 22) {
				/* A chunk cut between records is whole. */
				if (kv__records_check(all[i].data + 22,
						      len - 22) == 0)
					continue;
			}
			assert_refused(all[i].data, len, BATON_ECORRUPT);
		}
		/* A byte more. */
		baton_buf_append(&all[i], "x", 1);
		if (i != 2 && i != 4)
			assert_refused(all[i].data, all[i].len, BATON_ECORRUPT);
	}
	/* The import kinds carry stamp 0. */
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_authority(4, &text), 0);
	text.data[1] = 1;
	assert_refused(text.data, text.len, BATON_ECORRUPT);
	/* A kind after the migration's is a later release's. */
	text.data[1] = 0;
	text.data[9] = 10;
	assert_refused(text.data, text.len, BATON_EVERSION);
	/* A NUL in a fence's target. */
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_fence(T0, "ab", &text), 0);
	text.data[11] = 0;
	assert_refused(text.data, text.len, BATON_ECORRUPT);
	/* Huge lengths in a chunk's record: a key, a value, a field count. */
	static const uint8_t huge_key[] = {1, 0xff, 0xff, 0xff, 0xff, 'k'};
	static const uint8_t huge_val[] = {1,	 1,    0,    0,	   0,  'k',
					   0xff, 0xff, 0xff, 0x7f, 'v'};
	static const uint8_t huge_fields[] = {
		2,    1,    0,	  0, 0, 'k', 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0, 0, 0,   0,	   0,	 0,    0,    0};
	static const uint8_t no_field[] = {2, 1, 0, 0, 0, 'k', 0, 0, 0, 0, 0,
					   0, 0, 0, 0, 0, 0,   0, 0, 0, 0, 0};
	static const uint8_t bad_type[] = {3, 1, 0, 0, 0, 'k', 0, 0, 0,
					   0, 0, 0, 0, 0, 0,   0, 0, 0};
	static const uint8_t bad_expiry[] = {1, 1, 0, 0, 0, 'k', 0, 0, 0,
					     0, 0, 0, 0, 0, 0,	 0, 0, 0x80};
	static const uint8_t dup_field[] = {2, 1, 0, 0, 0, 'k', 2, 0,	0,   0,
					    0, 0, 0, 0, 1, 0,	0, 0,	'f', 0,
					    0, 0, 0, 1, 0, 0,	0, 'f', 0,   0,
					    0, 0, 0, 0, 0, 0,	0, 0,	0,   0};
	const struct {
		const uint8_t *p;
		size_t len;
	} records[] = {
		{huge_key, sizeof huge_key},
		{huge_val, sizeof huge_val},
		{huge_fields, sizeof huge_fields},
		{no_field, sizeof no_field},
		{bad_type, sizeof bad_type},
		{bad_expiry, sizeof bad_expiry},
		{dup_field, sizeof dup_field},
	};
	for (size_t i = 0; i < sizeof records / sizeof records[0]; i++) {
		baton_buf_reset(&text);
		int rv = kv_encode_import_chunk(3, 0, records[i].p,
						records[i].len, &text);
		if (records[i].p == dup_field) {
			/* Found only when applied. */
			cr_assert_eq(rv, 0);
		} else {
			cr_assert_eq(rv, BATON_EINVAL, "record %zu", i);
			uint8_t head[12];
			baton_le_put_u64(head, 3);
			baton_le_put_u32(head + 8, 0);
			uint8_t h[10] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 6};
			baton_buf_append(&text, h, sizeof h);
			baton_buf_append(&text, head, sizeof head);
			baton_buf_append(&text, records[i].p, records[i].len);
		}
		assert_refused(text.data, text.len, BATON_ECORRUPT);
	}
	/* An import entry holding an import kind, or nothing. */
	cr_assert_eq(
		kv_encode_import_entry(5, all[5].data, all[5].len - 1, &text),
		BATON_EINVAL);
	baton_buf_reset(&text);
	uint8_t h[10] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 8};
	uint8_t idx[8] = {5};
	baton_buf_append(&text, h, sizeof h);
	baton_buf_append(&text, idx, sizeof idx);
	assert_refused(text.data, text.len, BATON_ECORRUPT);
	baton_buf_append(&text, all[1].data, all[1].len);
	assert_refused(text.data, text.len, BATON_ECORRUPT);
	/* Bad arguments to the encoders. */
	char long_target[300];
	memset(long_target, 'a', sizeof long_target - 1);
	long_target[sizeof long_target - 1] = '\0';
	baton_buf_reset(&text);
	cr_assert_eq(kv_encode_fence(T0, long_target, &text), BATON_EINVAL);
	cr_assert_eq(kv_encode_fence(T0, NULL, &text), BATON_EINVAL);
	cr_assert_eq(kv_encode_fence(1ull << 63, "a", &text), BATON_EINVAL);
	cr_assert_eq(kv_encode_import_begin(1, 1ull << 63, &text),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_import_entry(0, all[0].data, all[0].len, &text),
		     BATON_EINVAL);
	cr_assert_eq(kv_encode_import_entry(1, NULL, 0, &text), BATON_EINVAL);
	cr_assert_eq(text.len, 0);
	for (int i = 0; i < 6; i++)
		baton_buf_free(&all[i]);
	free_chunks(c, n);
}

/* Random damage to valid migration payloads, applied to two maps: each
 * is applied or refused alike, a refusal changing nothing. */
Test(migration, random_damage)
{
	fill(old_kv, 30);
	sweep_due(old_kv);
	struct baton_buf c[4];
	size_t n = export_chunks(old_kv, 1 << 20, c, 4);
	struct baton_kv *twin = kvt_new();
	struct baton_buf p, r2;
	baton_buf_init(&p);
	baton_buf_init(&r2);
	uint64_t seed = 42;
	for (int round = 0; round < 3000; round++) {
		baton_buf_reset(&p);
		uint64_t x = kvt_rand(&seed);
		switch (x % 6) {
		case 0:
			kv_encode_import_begin(x % 3, T0, &p);
			break;
		case 1:
			kv_encode_import_chunk(x % 3, (uint32_t)(x >> 8) % 2,
					       c[0].data, c[0].len, &p);
			break;
		case 2:
			kv_encode_import_end(x % 3, (uint32_t)(x >> 8) % 2, &p);
			break;
		case 3:
			encode(T0 + x % 1000, "SET a 1", &text);
			kv_encode_import_entry(1 + x % 50, text.data, text.len,
					       &p);
			break;
		case 4:
			kv_encode_authority(x % 50, &p);
			break;
		default:
			kv_encode_fence(T0, "t", &p);
		}
		int flips = (int)(kvt_rand(&seed) % 3);
		for (int f = 0; f < flips && p.len > 0; f++)
			p.data[kvt_rand(&seed) % p.len] ^=
				(uint8_t)(1u << kvt_rand(&seed) % 8);
		if (kvt_rand(&seed) % 4 == 0 && p.len > 0)
			p.len = kvt_rand(&seed) % p.len;
		baton_buf_reset(&reply);
		baton_buf_reset(&r2);
		int a = kv_apply(new_kv, V3, p.data, p.len, &reply);
		int b = kv_apply(twin, V3, p.data, p.len, &r2);
		cr_assert_eq(a, b);
		cr_assert(a == 0 || a == BATON_ECORRUPT || a == BATON_EVERSION,
			  "%d", a);
		cr_assert_eq(reply.len, r2.len);
		cr_assert_eq(memcmp(reply.data, r2.data, reply.len), 0);
	}
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	snap(new_kv, &sa);
	snap(twin, &sb);
	assert_same_bytes(&sa, &sb);
	struct baton_kv *r = kvt_new();
	cr_assert_eq(kv_restore(r, V3, sa.data, sa.len), 0);
	kv_destroy(r);
	kv_destroy(twin);
	free_chunks(c, n);
	baton_buf_free(&p);
	baton_buf_free(&r2);
	baton_buf_free(&sa);
	baton_buf_free(&sb);
}
