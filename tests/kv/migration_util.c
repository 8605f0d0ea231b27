/*
 * The fixture and helpers shared by the kv migration tests
 * (migration_util.h): two maps, an old one exporting and a new one
 * importing, and the payloads of a migration applied to them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kv_util.h"
#include "migration_util.h"

static const struct baton_machine_version V3 = {3};

struct baton_kv *migt_old_kv, *migt_new_kv;
struct baton_buf migt_payload, migt_reply, migt_text;

void migt_setup(void)
{
	migt_old_kv = kvt_new();
	migt_new_kv = kvt_new();
	baton_buf_init(&migt_payload);
	baton_buf_init(&migt_reply);
	baton_buf_init(&migt_text);
}

void migt_teardown(void)
{
	kv_destroy(migt_old_kv);
	kv_destroy(migt_new_kv);
	baton_buf_free(&migt_payload);
	baton_buf_free(&migt_reply);
	baton_buf_free(&migt_text);
}

void migt_split(const char *s, struct migt_line *l)
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
void migt_encode(uint64_t stamp, const char *s, struct baton_buf *out)
{
	struct migt_line l;
	migt_split(s, &l);
	baton_buf_reset(out);
	cr_assert_eq(kv_encode_v2(stamp, l.argc, l.argv, l.lens, out), 0);
}

/* Apply p under v; the reply as a NUL-terminated string. */
const char *migt_apply(struct baton_kv *k, struct baton_machine_version v,
		       const struct baton_buf *p, int want)
{
	baton_buf_reset(&migt_reply);
	int rv = kv_apply(k, v, p->data, p->len, &migt_reply);
	cr_assert_eq(rv, want, "kv_apply: %d, not %d (%s)", rv, want,
		     kv_errmsg(k));
	baton_buf_append(&migt_reply, "", 1);
	return (const char *)migt_reply.data;
}

/* Run a command line as a stamped write under version 3. */
const char *migt_run(struct baton_kv *k, uint64_t stamp, const char *s)
{
	migt_encode(stamp, s, &migt_payload);
	return migt_apply(k, V3, &migt_payload, 0);
}

const char *migt_read_cmd(struct baton_kv *k, const char *s)
{
	struct migt_line l;
	migt_split(s, &l);
	baton_buf_reset(&migt_reply);
	cr_assert_eq(kv_read(k, l.argc, l.argv, l.lens, &migt_reply), 0);
	baton_buf_append(&migt_reply, "", 1);
	return (const char *)migt_reply.data;
}

int migt_sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

void migt_snap(const struct baton_kv *k, struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(kv_snapshot(k, V3, migt_sink, out), 0, "%s", kv_errmsg(k));
}

void migt_assert_same_bytes(const struct baton_buf *a,
			    const struct baton_buf *b)
{
	cr_assert_eq(a->len, b->len, "%zu bytes, not %zu", a->len, b->len);
	cr_assert_eq(memcmp(a->data, b->data, a->len), 0, "the bytes differ");
}

struct kv_migration migt_state(const struct baton_kv *k)
{
	struct kv_migration m;
	kv_migration_state(k, &m);
	return m;
}

/* A map of strings, hashes and expiries (some expired, not swept). */
void migt_fill(struct baton_kv *k, int n)
{
	char line[256];
	migt_run(k, T0, "SET first 1");
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
			migt_run(k, T0, line);
			snprintf(line, sizeof line, "PEXPIREAT g%d %llu", i,
				 (unsigned long long)(T0 + 99999));
		}
		migt_run(k, T0, line);
	}
	/* Machine time moves past the x keys' expiry, without a sweep. */
	migt_run(k, T0 + 100, "SET last 2");
}

/* Export k whole, a chunk per step of `budget` bytes, into chunks. */
size_t migt_export_chunks(struct baton_kv *k, size_t budget,
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

void migt_free_chunks(struct baton_buf *chunks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		baton_buf_free(&chunks[i]);
}

void migt_begin(struct baton_kv *k, uint64_t s, uint64_t t)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_import_begin(s, t, &migt_payload), 0);
	cr_assert_str_eq(migt_apply(k, V3, &migt_payload, 0), "+OK\r\n");
}

const char *migt_chunk(struct baton_kv *k, uint64_t s, uint32_t seq,
		       const struct baton_buf *records)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_import_chunk(s, seq, records->data, records->len,
					    &migt_payload),
		     0);
	return migt_apply(k, V3, &migt_payload, 0);
}

const char *migt_end(struct baton_kv *k, uint64_t s, uint32_t n)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_import_end(s, n, &migt_payload), 0);
	return migt_apply(k, V3, &migt_payload, 0);
}

const char *migt_entry(struct baton_kv *k, uint64_t i,
		       const struct baton_buf *old)
{
	struct baton_buf p;
	baton_buf_init(&p);
	cr_assert_eq(kv_encode_import_entry(i, old->data, old->len, &p), 0);
	const char *r = migt_apply(k, V3, &p, 0);
	baton_buf_free(&p);
	return r;
}

/* Import migt_old_kv's export into migt_new_kv at old index s. */
void migt_import_all(uint64_t s, size_t budget)
{
	static struct baton_buf chunks[4096];
	size_t n = migt_export_chunks(migt_old_kv, budget, chunks, 4096);
	migt_begin(migt_new_kv, s, kv_machine_time_ms(migt_old_kv));
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(
			migt_chunk(migt_new_kv, s, (uint32_t)i, &chunks[i]),
			"+OK\r\n");
	cr_assert_str_eq(migt_end(migt_new_kv, s, (uint32_t)n), "+OK\r\n");
	migt_free_chunks(chunks, n);
}

/* Sweep every key due at machine time (it stays where it is). */
void migt_sweep_due(struct baton_kv *k)
{
	baton_buf_reset(&migt_payload);
	cr_assert_eq(kv_encode_sweep(kv_machine_time_ms(k), KV_SWEEP_KEYS_MAX,
				     &migt_payload),
		     0);
	migt_apply(k, V3, &migt_payload, 0);
}
