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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

/* ---- what a conversion down loses ---------------------------------------
 *
 * One row per structure a machine version brought, newest first: a later
 * version that adds one (lists, say) adds a row here, and validate, enable
 * and batonctl report it with no change of theirs. Each live key is
 * counted once, by the first row that loses it (a hash with a TTL is a
 * hash deleted, not a TTL dropped): a later row says "other keys". */

struct loss_row {
	const char *name; /* baton_machine_loss_kind.name */
	uint32_t since;	  /* the version that brought the structure */
	uint64_t (*count)(const struct baton_kv *kv,
			  struct baton_machine_version from,
			  struct baton_machine_version to);
	/* "<n> key is a hash" / "<n> keys are hashes" */
	const char *one, *many;
	const char *what; /* ", which machine version %u cannot hold" */
	/* What FORCE does to them: alone, one or many; and in a list. */
	const char *force_one, *force_many, *force_listed;
};

/* Live hash keys (deleted). */
static uint64_t count_hashes(const struct baton_kv *kv,
			     struct baton_machine_version from,
			     struct baton_machine_version to)
{
	(void)from;
	(void)to;
	const struct kv__table *t = &kv->table;
	uint64_t n = 0;
	if (t->hashes == 0)
		return 0;
	uint64_t cursor = 0;
	do {
		const struct kv__entry *e = kv__table_bucket(t, cursor);
		for (; e != NULL; e = kv__table_after(t, e))
			n += kv__is_hash(e) && !kv__expired(e, kv->now_ms);
		cursor = kv__table_next(t, cursor);
	} while (cursor != 0);
	BATON_ASSERT(n <= t->hashes);
	return n;
}

/* Live keys with an expiry that no earlier row loses (made persistent). */
static uint64_t count_ttls(const struct baton_kv *kv,
			   struct baton_machine_version from,
			   struct baton_machine_version to)
{
	const struct kv__heap *h = &kv->table.expiring;
	bool hashes_go = drops(from, to, 3);
	uint64_t n = 0;
	for (size_t i = 0; i < h->n; i++)
		n += !kv__expired(h->v[i], kv->now_ms) &&
		     !(hashes_go && kv__is_hash(h->v[i]));
	return n;
}

static const struct loss_row loss_rows[] = {
	{"hashes_deleted", 3, count_hashes, "key is a hash", "keys are hashes",
	 ", which machine version %u cannot hold", "it is deleted",
	 "they are deleted", "the hashes are deleted"},
	{"ttls_dropped", 2, count_ttls, "key has a TTL", "keys have a TTL",
	 " that machine version %u cannot keep", "it becomes persistent",
	 "they become persistent", "the keys with a TTL become persistent"},
};

#define N_LOSS_ROWS ((uint32_t)(sizeof loss_rows / sizeof loss_rows[0]))
_Static_assert(N_LOSS_ROWS <= BATON_MACHINE_LOSS_KINDS_MAX,
	       "a loss kind per row");

/* Append to buf (cut to cap, always terminated); *used counts what was
 * asked for, so a cut text stays cut. */
__attribute__((format(printf, 4, 5))) static void
put(char *buf, size_t cap, size_t *used, const char *fmt, ...)
{
	BATON_ASSERT(cap > 0);
	size_t at = *used < cap ? *used : cap - 1;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + at, cap - at, fmt, ap);
	va_end(ap);
	BATON_ASSERT(n >= 0);
	*used = at + (size_t)n;
}

/* The row a kind came from (names are the rows' own pointers). */
static const struct loss_row *row_of(const char *name)
{
	for (uint32_t j = 0; j < N_LOSS_ROWS; j++)
		if (loss_rows[j].name == name)
			return &loss_rows[j];
	BATON_ASSERT(false); /* every kind is named by a row's pointer */
	return NULL;
}

static void word(const struct baton_machine_loss *l,
		 struct baton_machine_version to, char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < l->n; i++) {
		const struct loss_row *r = row_of(l->kinds[i].name);
		uint64_t k = l->kinds[i].items;
		put(buf, cap, &used, "%s%" PRIu64 " %s%s",
		    i > 0 ? ", and " : "", k, i > 0 ? "other " : "",
		    k == 1 ? r->one : r->many);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		put(buf, cap, &used, r->what, to.value);
#pragma GCC diagnostic pop
	}
	if (l->n == 0)
		return;
	put(buf, cap, &used, "; with FORCE ");
	for (uint32_t i = 0; i < l->n; i++) {
		const struct loss_row *r = row_of(l->kinds[i].name);
		if (l->n == 1)
			put(buf, cap, &used, "%s",
			    l->kinds[i].items == 1 ? r->force_one
						   : r->force_many);
		else
			put(buf, cap, &used, "%s%s", i > 0 ? " and " : "",
			    r->force_listed);
	}
}

int kv_convert_loss_describe(const struct baton_kv *kv,
			     struct baton_machine_version from,
			     struct baton_machine_version to,
			     struct baton_machine_loss *out)
{
	memset(out, 0, sizeof *out);
	if (!known(from) || !known(to))
		return BATON_EVERSION;
	for (uint32_t i = 0; i < N_LOSS_ROWS; i++) {
		const struct loss_row *r = &loss_rows[i];
		if (!drops(from, to, r->since))
			continue;
		uint64_t k = r->count(kv, from, to);
		if (k == 0)
			continue;
		BATON_ASSERT(out->n < BATON_MACHINE_LOSS_KINDS_MAX);
		out->kinds[out->n++] = (struct baton_machine_loss_kind){
			r->name, {r->since}, k};
		out->items += k;
	}
	word(out, to, out->text, sizeof out->text);
	return 0;
}

uint64_t kv_convert_loss(const struct baton_kv *kv,
			 struct baton_machine_version from,
			 struct baton_machine_version to)
{
	struct baton_machine_loss l;
	if (kv_convert_loss_describe(kv, from, to, &l) != 0)
		return 0;
	return l.items;
}

void kv_convert_loss_text(const struct baton_kv *kv,
			  struct baton_machine_version from,
			  struct baton_machine_version to, char *buf,
			  size_t cap)
{
	BATON_ASSERT(cap > 0);
	struct baton_machine_loss l;
	buf[0] = '\0';
	if (kv_convert_loss_describe(kv, from, to, &l) != 0)
		return;
	word(&l, to, buf, cap);
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
