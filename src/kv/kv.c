/*
 * The map's lifecycle and its entry points: kv_apply() for committed
 * payloads (a command, a transaction or a sweep), kv_read() for local
 * reads, and what the leader's sweeper and WATCH ask of the map.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "resp.h"

int kv_create(struct baton_kv **out)
{
	struct baton_kv *kv = kv__calloc(1, sizeof *kv);
	if (kv == NULL)
		return BATON_ENOMEM;
	int rv = kv__table_init(&kv->table, 0);
	if (rv != 0) {
		kv__free(kv);
		return rv;
	}
	baton_buf_init(&kv->scratch);
	*out = kv;
	return 0;
}

void kv_destroy(struct baton_kv *kv)
{
	if (kv == NULL)
		return;
	kv_snapshot_end(kv);
	kv_keys_end(kv);
	kv_export_end(kv);
	kv__table_free(&kv->table);
	baton_buf_free(&kv->scratch);
	kv__free(kv);
}

uint64_t kv_dbsize(const struct baton_kv *kv)
{
	return kv->table.count;
}

uint64_t kv_machine_time_ms(const struct baton_kv *kv)
{
	return (uint64_t)kv->now_ms;
}

uint64_t kv_expiry_count(const struct baton_kv *kv)
{
	return kv->table.expiring.n;
}

bool kv_expiry_next(const struct baton_kv *kv, uint64_t *at_ms)
{
	const struct kv__entry *e = kv__heap_top(&kv->table.expiring);
	if (e == NULL)
		return false;
	assert(e->expire_at_ms > 0);
	*at_ms = (uint64_t)e->expire_at_ms;
	return true;
}

bool kv_expiry_due(const struct baton_kv *kv, uint64_t now_ms)
{
	uint64_t at;
	return kv_expiry_next(kv, &at) && at <= now_ms;
}

const char *kv_errmsg(const struct baton_kv *kv)
{
	return kv->err;
}

/* Say why in kv->err and return rv. */
__attribute__((format(printf, 3, 4))) static int
fail(const struct baton_kv *kv, int rv, const char *fmt, ...)
{
	/* kv->err is a diagnostic, not state: writable through const. */
	char *err = (char *)kv->err;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, sizeof kv->err, fmt, ap);
	va_end(ap);
	return rv;
}

uint64_t kv_watch_hash(const struct baton_kv *kv, const uint8_t *key,
		       size_t len)
{
	const struct kv__entry *e = kv__table_find(&kv->table, key, len);
	if (e == NULL || kv__expired(e, kv->now_ms))
		return 0;
	/* A type byte (1: string, 2: hash), the expiry (0: none) and the
	 * length (a hash's: its field count), then the value, or each field
	 * in the canonical order chained to the hash so far. */
	uint8_t head[17];
	head[0] = kv__is_hash(e) ? 2 : 1;
	baton_le_put_u64(head + 1,
			 kv__has_expiry(e) ? (uint64_t)e->expire_at_ms : 0);
	baton_le_put_u64(head + 9,
			 kv__is_hash(e) ? e->fields->count : e->val_len);
	uint64_t h =
		kv__is_hash(e)
			? kv__fields_digest(e->fields,
					    baton__checksum(head, sizeof head))
			: baton__checksum2(head, sizeof head, e->val,
					   e->val_len);
	return h != 0 ? h : 1;
}

/* Machine time is the largest stamp applied (format 1 has none: -1). */
static void advance(struct baton_kv *kv, int64_t stamp_ms)
{
	if (stamp_ms > kv->now_ms)
		kv->now_ms = stamp_ms;
}

/* Delete the keys c names in a that have expired, so that the command
 * finds them absent and may insert them anew. */
static void expire_keys(struct baton_kv *kv, const struct kv_command *c,
			const struct kv__args *a)
{
	if (c->key_first <= 0)
		return;
	int last = c->key_last < 0 ? a->argc + c->key_last : c->key_last;
	for (int i = c->key_first; i <= last && i < a->argc; i += c->key_step)
		kv__expire_if_due(kv, a, i);
}

/* Run one command at apply: gate, check, lazy expiry, then the command.
 * 0 (its reply appended, maybe an -ERR) or BATON_ENOMEM (nothing). */
static int run_command(struct baton_kv *kv, struct baton_machine_version v,
		       const struct kv_command *c, const struct kv__args *a,
		       struct baton_buf *out)
{
	size_t start = out->len;
	int rv = kv_gate(c, a->argc, a->argv, a->lens, v, out);
	if (rv == BATON_EVERSION)
		return 0; /* refused alike everywhere: the -ERR is the reply */
	if (rv == 0)
		rv = kv__check(c, a, out);
	if (rv == BATON_EINVAL)
		return 0;
	if (rv == 0) {
		expire_keys(kv, c, a);
		rv = c->run(kv, a, out);
	}
	if (rv != 0) {
		assert(rv == BATON_ENOMEM);
		out->len = start;
	}
	return rv;
}

static int apply_single(struct baton_kv *kv, struct baton_machine_version v,
			const struct kv__decoded *d, struct baton_buf *out)
{
	const struct kv__args *a = &d->cmd.args;
	const struct kv_command *c = kv_lookup(a->argv[0], a->lens[0]);
	int n = (int)(a->lens[0] < 32 ? a->lens[0] : 32);
	if (c == NULL)
		return fail(kv, BATON_EVERSION,
			    "the command '%.*s' is unknown to this release", n,
			    (const char *)a->argv[0]);
	if (!(c->flags & KV_WRITE))
		return fail(kv, BATON_ECORRUPT,
			    "the read command '%s' in a payload", c->name);
	advance(kv, d->stamp_ms);
	return run_command(kv, v, c, a, out);
}

/* Look up command i of a transaction's reader into *c. */
static int txn_next(struct baton_le_reader *r, struct kv__payload *p,
		    const struct kv_command **c)
{
	int rv = kv__args_read(r, p);
	assert(rv != BATON_ECORRUPT); /* kv__decode walked them */
	if (rv != 0)
		return rv;
	*c = kv_lookup(p->args.argv[0], p->args.lens[0]);
	return 0;
}

static int apply_txn(struct baton_kv *kv, struct baton_machine_version v,
		     const struct kv__decoded *d, struct baton_buf *out)
{
	/* Every command must be known before anything changes. */
	struct baton_le_reader r = d->commands;
	for (uint32_t i = 0; i < d->n_commands; i++) {
		struct kv__payload p;
		const struct kv_command *c;
		int rv = txn_next(&r, &p, &c);
		kv__payload_free(&p);
		if (rv != 0)
			return fail(kv, rv, "out of memory");
		if (c == NULL)
			return fail(kv, BATON_EVERSION,
				    "command %u of a transaction is unknown "
				    "to this release",
				    i);
	}
	advance(kv, d->stamp_ms);
	r = d->watches;
	for (uint32_t i = 0; i < d->n_watches; i++) {
		const uint8_t *key;
		size_t len;
		uint64_t hash;
		kv__watch_read(&r, &key, &len, &hash);
		if (kv_watch_hash(kv, key, len) != hash)
			return resp_null_array(out); /* EXEC aborted */
	}
	int rv = resp_array(out, d->n_commands);
	r = d->commands;
	for (uint32_t i = 0; rv == 0 && i < d->n_commands; i++) {
		struct kv__payload p;
		const struct kv_command *c;
		rv = txn_next(&r, &p, &c);
		if (rv == 0)
			rv = run_command(kv, v, c, &p.args, out);
		kv__payload_free(&p);
	}
	return rv;
}

/* Delete up to max_keys keys due at machine time, earliest first. */
static int apply_sweep(struct baton_kv *kv, const struct kv__decoded *d,
		       struct baton_buf *out)
{
	int rv = baton_buf_reserve(out, KV_WRITE_REPLY_BYTES);
	if (rv != 0)
		return rv;
	advance(kv, d->stamp_ms);
	int64_t n = 0;
	for (; n < (int64_t)d->sweep_keys; n++) {
		struct kv__entry *e = kv__heap_top(&kv->table.expiring);
		if (e == NULL || e->expire_at_ms > kv->now_ms)
			break;
		bool deleted = kv__table_delete(&kv->table, e->key, e->key_len);
		assert(deleted);
		(void)deleted;
	}
	return resp_int(out, n);
}

int kv__apply_write(struct baton_kv *kv, struct baton_machine_version v,
		    const struct kv__decoded *d, struct baton_buf *out)
{
	switch (d->kind) {
	case KV_KIND_COMMAND:
		return apply_single(kv, v, d, out);
	case KV_KIND_TXN:
		return apply_txn(kv, v, d, out);
	default:
		assert(d->kind == KV_KIND_SWEEP);
		return apply_sweep(kv, d, out);
	}
}

int kv_apply(struct baton_kv *kv, struct baton_machine_version v,
	     const uint8_t *payload, size_t len, struct baton_buf *reply)
{
	kv->err[0] = '\0';
	if (v.value < KV_MACHINE_VERSION_MIN ||
	    v.value > KV_MACHINE_VERSION_MAX)
		return fail(kv, BATON_EVERSION,
			    "machine version %u is unknown (kv implements "
			    "%u..%u)",
			    v.value, KV_MACHINE_VERSION_MIN,
			    KV_MACHINE_VERSION_MAX);
	struct kv__decoded d;
	int rv = kv__decode(payload, len, &d);
	if (rv == BATON_EVERSION)
		return fail(kv, rv,
			    "a payload of format %u or kind %u unknown to "
			    "this release (it reads formats up to %u)",
			    payload[0], len > 9 ? payload[9] : 0u,
			    KV_PAYLOAD_FORMAT_MAX);
	if (rv != 0)
		return fail(kv, rv, "%s payload",
			    rv == BATON_ENOMEM ? "out of memory decoding a"
					       : "a malformed");
	struct baton_buf *out = reply != NULL ? reply : &kv->scratch;
	size_t start = out->len;
	if (d.format > v.value) {
		/* Written under version 2 but logged after the entry that
		 * lowered the version (a downgrade): known, so refused alike
		 * everywhere, as kv_gate refuses a version-2 command. */
		rv = resp_error(out,
				"ERR this write was encoded for machine "
				"version %u but its entry applies under "
				"machine version %u (a downgrade came first "
				"in the log); it was not applied",
				d.format, v.value);
		if (rv != 0)
			out->len = start;
		baton_buf_reset(&kv->scratch);
		kv__decoded_free(&d);
		return rv != 0 ? fail(kv, BATON_ENOMEM, "out of memory") : 0;
	}
	int64_t now = kv->now_ms;
	if (d.kind >= KV_KIND_FENCE)
		rv = kv__apply_migration(kv, v, &d, out);
	else if (kv->mig.fenced)
		rv = baton_buf_append(out, KV_FENCED_REPLY,
				      sizeof KV_FENCED_REPLY - 1);
	else if (kv->mig.importing)
		rv = baton_buf_append(out, KV_IMPORTING_REPLY,
				      sizeof KV_IMPORTING_REPLY - 1);
	else
		rv = kv__apply_write(kv, v, &d, out);
	if (rv != 0) {
		out->len = start;
		if (rv != BATON_ENOMEM)
			kv->now_ms = now; /* refused before any change */
		else if (kv->err[0] == '\0')
			fail(kv, rv, "out of memory");
	}
	baton_buf_reset(&kv->scratch);
	kv__decoded_free(&d);
	return rv;
}

int kv_read(struct baton_kv *kv, int argc, const uint8_t *const *argv,
	    const size_t *lens, struct baton_buf *reply)
{
	assert(argc >= 1);
	const struct kv_command *c = kv_lookup(argv[0], lens[0]);
	if (c == NULL || !(c->flags & KV_READ)) {
		resp_error(reply, "ERR '%.*s' is not a read command",
			   (int)(lens[0] < 64 ? lens[0] : 64),
			   (const char *)argv[0]);
		return BATON_EINVAL;
	}
	struct kv__args a = {argc, argv, lens};
	size_t start = reply->len;
	int rv = kv__check(c, &a, reply);
	if (rv == BATON_EINVAL)
		return 0; /* the -ERR is the reply */
	if (rv == 0)
		rv = c->run(kv, &a, reply);
	if (rv != 0)
		reply->len = start;
	return rv;
}
