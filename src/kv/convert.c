/*
 * Converting the map between machine versions (docs/kv.md, "Converting
 * down"): what the state machine's version_changed hook does at the index
 * of a version entry.
 *
 * Up (1 -> 2) needs nothing: a version-1 map is a version-2 map without
 * expiries, at machine time 0.
 *
 * Down (2 -> 1), at the entry that enables an explicit downgrade: version 1
 * has no expiry. Keys already expired at machine time are deleted (they
 * are absent to every command already; keeping them would bring them
 * back); every other key loses its expiry and persists; machine time goes
 * back to 0. The result is exactly the map a version-1 snapshot of it
 * restores to, so a node that converted in place and one that installed a
 * snapshot taken after the entry agree byte for byte, and so do their
 * replies should the cluster later upgrade again. It depends on the map
 * alone, so every node converts alike, and it cannot fail.
 */
#include <stdio.h>

#include "baton/assert.h"
#include "internal.h"

static bool known(struct baton_machine_version v)
{
	return v.value >= KV_MACHINE_VERSION_MIN &&
	       v.value <= KV_MACHINE_VERSION_MAX;
}

uint64_t kv_convert_loss(const struct baton_kv *kv,
			 struct baton_machine_version from,
			 struct baton_machine_version to)
{
	if (!(from.value >= 2 && to.value < 2))
		return 0;
	const struct kv__heap *h = &kv->table.expiring;
	uint64_t n = 0;
	for (size_t i = 0; i < h->n; i++)
		n += !kv__expired(h->v[i], kv->now_ms);
	return n;
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
	if (!(from.value >= 2 && to.value < 2))
		return 0;
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
	return 0;
}
