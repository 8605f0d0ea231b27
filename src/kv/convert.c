/*
 * Converting the map between machine versions (docs/kv.md, "Converting
 * down"): what the state machine's version_changed hook does at the index
 * of a version entry.
 *
 * Up (1 -> 2 -> 3) needs nothing: a version-1 map is a version-2 map
 * without expiries, at machine time 0, and a version-2 map a version-3 map
 * without hashes.
 *
 * Down, at the entry that enables an explicit downgrade:
 * - below version 3, which has hashes: every hash key is deleted, expired
 *   or not (a string made of its fields would be a value no client wrote,
 *   and an expired one is absent already);
 * - below version 2, which has no expiry: keys already expired at machine
 *   time are deleted (they are absent to every command already; keeping
 *   them would bring them back); every other key loses its expiry and
 *   persists; machine time goes back to 0.
 * The result is exactly the map a snapshot in the lower version's format
 * restores to, so a node that converted in place and one that installed a
 * snapshot taken after the entry agree byte for byte, and so do their
 * replies should the cluster later upgrade again. It depends on the map
 * alone, so every node converts alike, and it cannot fail.
 */
#include <inttypes.h>
#include <stdio.h>

#include "baton/assert.h"
#include "internal.h"

static bool known(struct baton_machine_version v)
{
	return v.value >= KV_MACHINE_VERSION_MIN &&
	       v.value <= KV_MACHINE_VERSION_MAX;
}

/* Does going from `from` to `to` cross below `version` (lose what it
 * brought)? */
static bool drops(struct baton_machine_version from,
		  struct baton_machine_version to, uint32_t version)
{
	return from.value >= version && to.value < version;
}

/* What a conversion loses: live hash keys (deleted), and the other live
 * keys with an expiry (made persistent). */
struct loss {
	uint64_t hashes, ttls;
};

static struct loss loss_of(const struct baton_kv *kv,
			   struct baton_machine_version from,
			   struct baton_machine_version to)
{
	struct loss l = {0, 0};
	const struct kv__table *t = &kv->table;
	if (drops(from, to, 3) && t->hashes > 0) {
		uint64_t cursor = 0;
		do {
			const struct kv__entry *e = kv__table_bucket(t, cursor);
			for (; e != NULL; e = kv__table_after(t, e))
				l.hashes += kv__is_hash(e) &&
					    !kv__expired(e, kv->now_ms);
			cursor = kv__table_next(t, cursor);
		} while (cursor != 0);
	}
	if (drops(from, to, 2)) {
		const struct kv__heap *h = &t->expiring;
		for (size_t i = 0; i < h->n; i++)
			l.ttls += !kv__expired(h->v[i], kv->now_ms) &&
				  !(drops(from, to, 3) && kv__is_hash(h->v[i]));
	}
	return l;
}

uint64_t kv_convert_loss(const struct baton_kv *kv,
			 struct baton_machine_version from,
			 struct baton_machine_version to)
{
	struct loss l = loss_of(kv, from, to);
	return l.hashes + l.ttls;
}

void kv_convert_loss_text(const struct baton_kv *kv,
			  struct baton_machine_version from,
			  struct baton_machine_version to, char *buf,
			  size_t cap)
{
	BATON_ASSERT(cap > 0);
	struct loss l = loss_of(kv, from, to);
	buf[0] = '\0';
	const char *are = l.hashes == 1 ? " is a hash" : "s are hashes";
	const char *have = l.ttls == 1 ? " has" : "s have";
	if (l.hashes > 0 && l.ttls > 0)
		snprintf(buf, cap,
			 "%" PRIu64 " key%s, which machine version %u cannot "
			 "hold, and %" PRIu64 " other key%s a TTL that it "
			 "cannot keep; with FORCE the hashes are deleted and "
			 "the other keys become persistent",
			 l.hashes, are, to.value, l.ttls, have);
	else if (l.hashes > 0)
		snprintf(buf, cap,
			 "%" PRIu64 " key%s, which machine version %u cannot "
			 "hold; with FORCE %s deleted",
			 l.hashes, are, to.value,
			 l.hashes == 1 ? "it is" : "they are");
	else if (l.ttls > 0)
		snprintf(buf, cap,
			 "%" PRIu64 " key%s a TTL that machine version %u "
			 "cannot keep; with FORCE they become persistent",
			 l.ttls, have, to.value);
}

/* Delete every hash key. A walk in SCAN's order that deletes as it goes:
 * each bucket is looked at again after a delete, and SCAN's guarantee
 * (every key present for the whole walk is seen) holds through the
 * resizes the deletes may start. */
static void delete_hashes(struct kv__table *t)
{
	uint64_t cursor = 0;
	while (t->hashes > 0) {
		const struct kv__entry *e = kv__table_bucket(t, cursor);
		while (e != NULL && !kv__is_hash(e))
			e = kv__table_after(t, e);
		if (e != NULL) {
			bool deleted = kv__table_delete(t, e->key, e->key_len);
			BATON_ASSERT(deleted);
			continue;
		}
		cursor = kv__table_next(t, cursor);
		BATON_ASSERT(cursor != 0 || t->hashes == 0);
	}
}

/* Drop every expiry: expired keys are deleted, the others persist. */
static void drop_expiries(struct baton_kv *kv)
{
	struct kv__table *t = &kv->table;
	struct kv__entry *e;
	while ((e = kv__heap_top(&t->expiring)) != NULL) {
		if (kv__expired(e, kv->now_ms)) {
			bool deleted = kv__table_delete(t, e->key, e->key_len);
			BATON_ASSERT(deleted);
		} else {
			kv__expire_clear(t, e);
		}
	}
	BATON_ASSERT(t->expiring.n == 0);
	kv->now_ms = 0;
}

int kv_convert(struct baton_kv *kv, struct baton_machine_version from,
	       struct baton_machine_version to)
{
	kv_snapshot_end(kv);
	kv->err[0] = '\0';
	if (!known(from) || !known(to)) {
		snprintf(kv->err, sizeof kv->err,
			 "cannot convert from machine version %u to %u: kv "
			 "implements %u..%u",
			 from.value, to.value, KV_MACHINE_VERSION_MIN,
			 KV_MACHINE_VERSION_MAX);
		return BATON_EVERSION;
	}
	if (drops(from, to, 3))
		delete_hashes(&kv->table);
	if (drops(from, to, 2))
		drop_expiries(kv);
	BATON_ASSERT(to.value >= 3 || kv->table.hashes == 0);
	return 0;
}
