/*
 * The simulated application: a small key-value machine behind
 * include/baton/machine.h, whose operations the linearizability checker
 * models (tools/lincheck: one Redis string per key under set, append, incr,
 * del and get), plus a hash chain over every applied command so that the
 * invariants can tell two machine states apart cheaply.
 *
 * Keys are numbers; key k lives in slot k % SIM_KV_SLOTS. The workload
 * retires keys and moves on to fresh ones, so a slot is reused: a command
 * for a newer key resets the slot (the new key starts missing), and one for
 * an older key than the slot holds is refused with "RETIRED" and changes
 * nothing. Every node applies the same commands in the same order, so they
 * agree on all of it.
 *
 * A command (an entry's payload): op (u8), key (u32 little-endian), value
 * length (u8), the value, then padding the machine ignores (entries of
 * varied sizes, for the network's chunking).
 *
 * Machine versions. Version 1 is the above. Version 2 keeps the clients'
 * semantics (the checker's model does not change) but not the state: it
 * keeps a clock, `ticks`, that the conversion from version 1 sets to the
 * index of the version entry and every command applied under version 2
 * advances, and mixes it into the hash chain; its snapshots carry the
 * clock (format 2). So a node that applies a command under the wrong
 * version, or converts at another index, or restores a snapshot as the
 * wrong version, reaches another state, which state machine safety sees.
 * An explicit downgrade converts version 2 down to 1 at the entry enabling
 * it: the clock goes, the slots (what clients see) stay. Version 3 (release
 * 2.0.0's) keeps version 2's clock and also mixes the version into each
 * command's hash, so a command applied under 2 instead of 3 shows too.
 * The machine implements the versions of its node's release and refuses
 * (BATON_EVERSION) any other, as a real machine of that release would;
 * being asked at all is a "version safety:" violation (versions.c).
 */
#include "world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Snapshot bytes: applied, hash, commands (u64 each), under version 2 the
 * clock (u64), then each slot (key u32, present u8, length u8, value),
 * then padding derived from the hash, so snapshots span several chunks and
 * corruption shows. */
#define SNAP_HEAD 24u
#define SNAP_TICKS 8u
/* The machine versions the simulated machine has (a release implements
 * those up to its machine_max). */
#define SIM_KV_VERSION_MAX 3u
#define SNAP_SLOT_HEAD 6u

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

size_t sim_kv_encode(uint8_t *buf, size_t cap, uint8_t op, uint32_t key,
		     const char *value, size_t pad)
{
	size_t vlen = value != NULL ? strlen(value) : 0;
	if (vlen > SIM_KV_VALUE_MAX || 6 + vlen + pad > cap)
		abort(); /* the workload sizes its commands */
	buf[0] = op;
	put_u32(buf + 1, key);
	buf[5] = (uint8_t)vlen;
	if (vlen > 0)
		memcpy(buf + 6, value, vlen);
	memset(buf + 6 + vlen, 'x', pad);
	return 6 + vlen + pad;
}

/* ---- values: decimal integers, as the checker's model reads them -------- */

/* The value as an int64 the way Redis (and the checker) would accept it:
 * no sign, no leading zero, no overflow. */
static bool value_int(const struct sim_kv_slot *s, int64_t *out)
{
	if (!s->present) {
		*out = 0;
		return true;
	}
	if (s->len == 0 || s->len > 19 || (s->val[0] == '0' && s->len > 1))
		return false;
	uint64_t v = 0;
	for (uint32_t i = 0; i < s->len; i++) {
		if (s->val[i] < '0' || s->val[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s->val[i] - '0');
	}
	if (v > (uint64_t)INT64_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

static int reply_text(struct baton_buf *reply, const char *fmt, long long v)
{
	if (reply == NULL)
		return 0;
	char text[32];
	int n = snprintf(text, sizeof text, fmt, v);
	if (n < 0 || (size_t)n >= sizeof text)
		return BATON_EINVAL;
	return baton_buf_append(reply, text, (size_t)n);
}

/* ---- the machine's operations ------------------------------------------- */

static struct sim_kv *to_kv(struct baton_machine *m)
{
	return (struct sim_kv *)m;
}

/* Apply one command to the slots; the reply says what a client sees. */
static int kv_command(struct sim_kv *kv, const uint8_t *b, uint32_t len,
		      struct baton_buf *reply)
{
	if (len < 6 || 6u + b[5] > len || b[5] > SIM_KV_VALUE_MAX) {
		kv->err = "malformed command";
		return BATON_ECORRUPT;
	}
	uint8_t op = b[0];
	uint32_t key = get_u32(b + 1);
	const char *val = (const char *)b + 6;
	uint32_t vlen = b[5];
	if (op == SIM_KV_MARKER || op == SIM_KV_NOISE)
		return reply_text(reply, "OK", 0);
	if (key == 0 || (op != SIM_KV_SET && op != SIM_KV_APPEND &&
			 op != SIM_KV_INCR && op != SIM_KV_DEL)) {
		kv->err = "unknown command";
		return BATON_ECORRUPT;
	}
	struct sim_kv_slot *s = &kv->slots[key % SIM_KV_SLOTS];
	if (s->key > key)
		return reply_text(reply, "RETIRED", 0);
	if (s->key < key)
		*s = (struct sim_kv_slot){.key = key};
	int64_t v;
	switch (op) {
	case SIM_KV_SET:
		s->present = true;
		s->len = vlen;
		memcpy(s->val, val, vlen);
		return reply_text(reply, "OK", 0);
	case SIM_KV_APPEND:
		if (s->len + vlen > SIM_KV_VALUE_MAX)
			return reply_text(reply, "ERR too long", 0);
		memcpy(s->val + s->len, val, vlen);
		s->len += vlen;
		s->present = true;
		return reply_text(reply, "%lld", (long long)s->len);
	case SIM_KV_INCR:
		if (!value_int(s, &v) || v == INT64_MAX)
			return reply_text(reply, "ERR not an integer", 0);
		s->present = true;
		s->len = (uint32_t)snprintf(s->val, sizeof s->val, "%lld",
					    (long long)(v + 1));
		return reply_text(reply, "%lld", (long long)(v + 1));
	default: /* SIM_KV_DEL */
		v = s->present;
		s->present = false;
		s->len = 0;
		return reply_text(reply, "%lld", (long long)v);
	}
}

/* Whether this node's release implements machine version v (asking for
 * one it does not is a violation, reported by versions.c). */
static bool implements(struct sim_kv *kv, uint32_t v, const char *what,
		       baton_index index)
{
	if (v >= 1 && v <= SIM_KV_VERSION_MAX &&
	    sim_check_machine_version(kv->n, v, what, index))
		return true;
	kv->err = "a machine version this release does not implement";
	return false;
}

static int kv_apply(struct baton_machine *m, struct baton_machine_version v,
		    const struct baton_entry *e, struct baton_buf *reply)
{
	struct sim_kv *kv = to_kv(m);
	if (!implements(kv, v.value, "apply entry", e->index))
		return BATON_EVERSION;
	if (kv->snap_open)
		kv->n->w->stats.applied_mid_snapshot++;
	if (e->type != BATON_ENTRY_COMMAND || e->index <= kv->applied) {
		kv->err = "not the next command";
		return BATON_ECORRUPT;
	}
	/* kv_command refuses before it changes anything, as the machine
	 * interface asks. */
	int rv = kv_command(kv, e->buf, e->len, reply);
	if (rv != 0)
		return rv;
	kv->applied = e->index;
	uint64_t seed = kv->hash ^ e->index;
	if (v.value >= 2) {
		kv->ticks++;
		seed ^= kv->ticks * 0x9e3779b97f4a7c15ull;
	}
	if (v.value >= 3)
		seed ^= 0xc2b2ae3d27d4eb4full;
	kv->hash = sim_hash_bytes(seed, e->buf, e->len);
	kv->commands++;
	sim_node_applied(kv->n, e, kv->hash);
	return 0;
}

static void put_u64(struct baton_buf *b, uint64_t v, int *rv)
{
	uint8_t p[8];
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	if (*rv == 0)
		*rv = baton_buf_append(b, p, 8);
}

/* The conversion between versions: version 2's clock starts at the index
 * of the version entry that brings it in; converting down to version 1
 * (an explicit downgrade) drops it, as version 1 has none. Both happen at
 * the same index on every node, so they agree on the state after. */
static bool snapshot_closed(struct sim_kv *kv, const char *call);

static int kv_version_changed(struct baton_machine *m, baton_index index,
			      struct baton_machine_version from,
			      struct baton_machine_version to)
{
	struct sim_kv *kv = to_kv(m);
	if (!snapshot_closed(kv, "version_changed"))
		return BATON_ESTATE;
	if (!implements(kv, to.value,
			"convert to a new machine version at entry", index))
		return BATON_EVERSION;
	if (from.value < 2 && to.value >= 2)
		kv->ticks = index;
	if (to.value < 2)
		kv->ticks = 0;
	kv->version = to.value;
	return 0;
}

static int kv_snapshot(struct baton_machine *m, struct baton_machine_version v,
		       struct baton_buf *out)
{
	struct sim_kv *kv = to_kv(m);
	if (!implements(kv, v.value, "write a snapshot whose last command is",
			kv->applied))
		return BATON_EVERSION;
	int rv = 0;
	put_u64(out, kv->applied, &rv);
	put_u64(out, kv->hash, &rv);
	put_u64(out, kv->commands, &rv);
	if (v.value >= 2)
		put_u64(out, kv->ticks, &rv);
	for (uint32_t i = 0; i < SIM_KV_SLOTS && rv == 0; i++) {
		const struct sim_kv_slot *s = &kv->slots[i];
		uint8_t head[SNAP_SLOT_HEAD];
		put_u32(head, s->key);
		head[4] = s->present;
		head[5] = (uint8_t)s->len;
		rv = baton_buf_append(out, head, sizeof head);
		if (rv == 0)
			rv = baton_buf_append(out, s->val, s->len);
	}
	for (size_t i = 0; i < kv->applied % 128 && rv == 0; i++) {
		uint8_t pad = (uint8_t)(kv->hash >> (8 * (i % 8)));
		rv = baton_buf_append(out, &pad, 1);
	}
	return rv;
}

/* The node's contract: one snapshot at a time, and no conversion, restore
 * or one-call snapshot while one is open. */
static bool snapshot_closed(struct sim_kv *kv, const char *call)
{
	if (!kv->snap_open)
		return true;
	sim_fail(kv->n->w,
		 "machine contract: node %llu called %s while a snapshot "
		 "was open",
		 (unsigned long long)kv->n->id, call);
	return false;
}

static int kv_snapshot_begin(struct baton_machine *m,
			     struct baton_machine_version v)
{
	struct sim_kv *kv = to_kv(m);
	if (!snapshot_closed(kv, "snapshot_begin"))
		return BATON_ESTATE;
	baton_buf_init(&kv->snap);
	int rv = kv_snapshot(m, v, &kv->snap);
	if (rv != 0) {
		baton_buf_free(&kv->snap);
		return rv;
	}
	kv->snap_open = true;
	kv->snap_sent = 0;
	return 0;
}

static int kv_snapshot_step(struct baton_machine *m, size_t budget,
			    struct baton_buf *out, bool *done)
{
	struct sim_kv *kv = to_kv(m);
	if (!kv->snap_open) {
		sim_fail(kv->n->w,
			 "machine contract: node %llu stepped a "
			 "snapshot that is not open",
			 (unsigned long long)kv->n->id);
		return BATON_ESTATE;
	}
	size_t left = kv->snap.len - kv->snap_sent;
	size_t n = budget == 0 ? 1 : budget < left ? budget : left;
	int rv = baton_buf_append(out, kv->snap.data + kv->snap_sent, n);
	if (rv != 0)
		return rv;
	kv->snap_sent += n;
	*done = kv->snap_sent == kv->snap.len;
	return 0;
}

static void kv_snapshot_end(struct baton_machine *m)
{
	struct sim_kv *kv = to_kv(m);
	baton_buf_free(&kv->snap);
	kv->snap_open = false;
	kv->snap_sent = 0;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int kv_restore(struct baton_machine *m, struct baton_machine_version v,
		      const uint8_t *buf, size_t len)
{
	struct sim_kv *kv = to_kv(m);
	if (!snapshot_closed(kv, "restore"))
		return BATON_ESTATE;
	if (!implements(kv, v.value, "restore a snapshot whose last command is",
			len >= 8 ? get_u64(buf) : 0))
		return BATON_EVERSION;
	struct sim_kv next = *kv;
	size_t head = SNAP_HEAD + (v.value >= 2 ? SNAP_TICKS : 0);
	if (len < head)
		goto corrupt;
	next.applied = get_u64(buf);
	next.hash = get_u64(buf + 8);
	next.commands = get_u64(buf + 16);
	next.ticks = v.value >= 2 ? get_u64(buf + SNAP_HEAD) : 0;
	next.version = v.value;
	size_t off = head;
	for (uint32_t i = 0; i < SIM_KV_SLOTS; i++) {
		struct sim_kv_slot *s = &next.slots[i];
		if (len - off < SNAP_SLOT_HEAD)
			goto corrupt;
		s->key = get_u32(buf + off);
		s->present = buf[off + 4] != 0;
		s->len = buf[off + 5];
		off += SNAP_SLOT_HEAD;
		if (s->len > SIM_KV_VALUE_MAX || len - off < s->len)
			goto corrupt;
		memcpy(s->val, buf + off, s->len);
		off += s->len;
	}
	if (len - off != next.applied % 128)
		goto corrupt;
	for (size_t i = 0; off + i < len; i++)
		if (buf[off + i] != (uint8_t)(next.hash >> (8 * (i % 8))))
			goto corrupt;
	*kv = next;
	sim_node_restored(kv->n, kv->applied, kv->hash, kv->commands);
	return 0;
corrupt:
	kv->err = "corrupt snapshot";
	return BATON_ECORRUPT;
}

static const char *kv_errmsg(const struct baton_machine *m)
{
	return ((const struct sim_kv *)m)->err;
}

static const struct baton_machine_ops kv_ops = {
	.apply = kv_apply,
	.version_changed = kv_version_changed,
	.snapshot = kv_snapshot,
	.snapshot_begin = kv_snapshot_begin,
	.snapshot_step = kv_snapshot_step,
	.snapshot_end = kv_snapshot_end,
	.restore = kv_restore,
	.errmsg = kv_errmsg,
};

void sim_kv_init(struct sim_kv *kv, struct sim_node *n)
{
	memset(kv, 0, sizeof *kv);
	kv->base.ops = &kv_ops;
	kv->n = n;
	kv->version = 1;
	kv->err = "no error";
}

bool sim_kv_get(const struct sim_kv *kv, uint32_t key, bool *present,
		const char **val, uint32_t *len)
{
	const struct sim_kv_slot *s = &kv->slots[key % SIM_KV_SLOTS];
	if (s->key > key)
		return false; /* retired: the slot serves a newer key */
	*present = s->key == key && s->present;
	*val = s->val;
	*len = s->key == key ? s->len : 0;
	return true;
}
