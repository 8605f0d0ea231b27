/*
 * batond's state machine (src/server/machine.c) through the machine
 * interface alone (baton/machine.h), as the node pipeline drives it:
 * payload kinds (golden bytes), refusals that leave the state untouched
 * (an unknown payload kind, a newer kv format, a machine version this
 * release does not implement, damage), the address book and its limit,
 * the snapshot wrapper (golden bytes, round trips, refusals), version
 * changes (converting down to version 1), and the cluster's identity (its
 * UUID, removed ids, snapshot format 2).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "machine.h"

static const struct baton_machine_version V1 = {1}, V2 = {2}, V3 = {3};
/* A version kv does not implement, and how its refusals name it. */
static const struct baton_machine_version V_UNKNOWN = {KV_MACHINE_VERSION_MAX +
						       1};
#define V_UNKNOWN_TEXT "machine version 4"
_Static_assert(KV_MACHINE_VERSION_MAX + 1 == 4, "V_UNKNOWN_TEXT is stale");
#define T0 1700000000000ull

/* 'P' + id 7, "127.0.0.1:7001", "127.0.0.1:6001": an address entry as the
 * first release writes it. */
static const uint8_t golden_address[] = {
	'P', 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0e, 0x00,
	'1', '2',  '7',	 '.',  '0',  '.',  '0',	 '.',  '1',  ':',  '7',
	'0', '0',  '1',	 0x0e, 0x00, '1',  '2',	 '7',  '.',  '0',  '.',
	'0', '.',  '1',	 ':',  '6',  '0',  '0',	 '1'};

/* 'K' + the kv format 1 payload of "SET b xy". */
static const uint8_t golden_set[] = {
	'K', 0x01, 0x03, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 'S', 'E',
	'T', 0x01, 0x00, 0x00, 0x00, 'b',  0x02, 0x00, 0x00, 0x00, 'x', 'y'};

/* The snapshot (wrapper format 1, kv snapshot format 1) of the state after
 * golden_address, the address of node 3 ("10.0.0.3:7003",
 * "10.0.0.3:6003") and golden_set, as the first release writes it. */
static const uint8_t golden_snapshot_v1[] = {
	0x42, 0x53, 0x52, 0x56, 0x01, 0x02, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x31, 0x32, 0x37, 0x2e, 0x30,
	0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x37, 0x30, 0x30, 0x31, 0x0e, 0x00, 0x31,
	0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x36, 0x30, 0x30,
	0x31, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x31,
	0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x33, 0x3a, 0x37, 0x30, 0x30, 0x33,
	0x0d, 0x00, 0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x33, 0x3a, 0x36,
	0x30, 0x30, 0x33, 0x42, 0x4b, 0x56, 0x53, 0x01, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x62,
	0x02, 0x00, 0x00, 0x00, 0x78, 0x79, 0xad, 0x62, 0x04, 0xb9, 0x56, 0x17,
	0x03, 0x95};

static struct server_machine m;
static struct baton_buf reply, snap;
static int addresses_seen;

static void seen(void *data, const struct book_entry *e)
{
	(void)data;
	(void)e;
	addresses_seen++;
}

static void setup(void)
{
	cr_assert_eq(server_machine_init(&m), 0);
	m.address_changed = seen;
	addresses_seen = 0;
	baton_buf_init(&reply);
	baton_buf_init(&snap);
}

static void teardown(void)
{
	server_machine_free(&m);
	baton_buf_free(&reply);
	baton_buf_free(&snap);
}

TestSuite(machine, .init = setup, .fini = teardown);

static int apply_bytes(struct server_machine *sm,
		       struct baton_machine_version v, const uint8_t *buf,
		       size_t len, struct baton_buf *out)
{
	static uint64_t index;
	struct baton_entry e = {.term = 1,
				.index = ++index,
				.type = BATON_ENTRY_COMMAND,
				.len = (uint32_t)len,
				.buf = (uint8_t *)buf};
	return sm->base.ops->apply(&sm->base, v, &e, out);
}

static void snapshot_of(struct server_machine *sm, struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(sm->base.ops->snapshot(&sm->base, V1, out), 0);
}

static const char *errmsg(void)
{
	return m.base.ops->errmsg(&m.base);
}

/* Applying `buf` is refused with `code`, and nothing changes: not the
 * state (same snapshot bytes), not the reply. */
static void assert_refused(const uint8_t *buf, size_t len,
			   struct baton_machine_version v, int code,
			   const char *why)
{
	struct baton_buf before;
	baton_buf_init(&before);
	snapshot_of(&m, &before);
	baton_buf_reset(&reply);
	cr_assert_eq(baton_buf_append(&reply, "x", 1), 0);
	int seen_before = addresses_seen;
	cr_assert_eq(apply_bytes(&m, v, buf, len, &reply), code);
	cr_assert_eq(reply.len, 1, "a refusal appended a reply");
	cr_assert(strstr(errmsg(), why) != NULL, "errmsg '%s' lacks '%s'",
		  errmsg(), why);
	snapshot_of(&m, &snap);
	cr_assert_eq(snap.len, before.len);
	cr_assert_eq(memcmp(snap.data, before.data, snap.len), 0);
	cr_assert_eq(addresses_seen, seen_before);
	baton_buf_free(&before);
}

static void fill(struct server_machine *sm)
{
	cr_assert_eq(apply_bytes(sm, V1, golden_address, sizeof golden_address,
				 NULL),
		     0);
	struct book_entry e = {.id = 3};
	strcpy(e.peer, "10.0.0.3:7003");
	strcpy(e.client, "10.0.0.3:6003");
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(server_machine_encode_address(&e, &b), 0);
	cr_assert_eq(apply_bytes(sm, V1, b.data, b.len, NULL), 0);
	baton_buf_free(&b);
	cr_assert_eq(apply_bytes(sm, V1, golden_set, sizeof golden_set, NULL),
		     0);
}

/* ---- payloads ------------------------------------------------------------ */

Test(machine, golden_address_entry)
{
	cr_assert_eq(apply_bytes(&m, V1, golden_address, sizeof golden_address,
				 &reply),
		     0);
	cr_assert_eq(reply.len, 5);
	cr_assert_eq(memcmp(reply.data, "+OK\r\n", 5), 0);
	const struct book_entry *e = server_machine_book_find(&m, 7);
	cr_assert_not_null(e);
	cr_assert_str_eq(e->peer, "127.0.0.1:7001");
	cr_assert_str_eq(e->client, "127.0.0.1:6001");
	cr_assert_eq(addresses_seen, 1);
	/* The writer makes the same bytes. */
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(server_machine_encode_address(e, &b), 0);
	cr_assert_eq(b.len, sizeof golden_address);
	cr_assert_eq(memcmp(b.data, golden_address, b.len), 0);
	baton_buf_free(&b);
}

Test(machine, address_entry_with_appended_fields_is_read)
{
	/* A later release may append fields to an address entry. */
	uint8_t longer[sizeof golden_address + 3];
	memcpy(longer, golden_address, sizeof golden_address);
	memcpy(longer + sizeof golden_address, "new", 3);
	cr_assert_eq(apply_bytes(&m, V1, longer, sizeof longer, NULL), 0);
	cr_assert_not_null(server_machine_book_find(&m, 7));
}

Test(machine, golden_kv_entry)
{
	cr_assert_eq(apply_bytes(&m, V1, golden_set, sizeof golden_set, &reply),
		     0);
	cr_assert_eq(reply.len, 5);
	cr_assert_eq(memcmp(reply.data, "+OK\r\n", 5), 0);
	const uint8_t *argv[] = {(const uint8_t *)"GET", (const uint8_t *)"b"};
	size_t lens[] = {3, 1};
	baton_buf_reset(&reply);
	cr_assert_eq(kv_read(m.kv, 2, argv, lens, &reply), 0);
	cr_assert_eq(reply.len, 8);
	cr_assert_eq(memcmp(reply.data, "$2\r\nxy\r\n", 8), 0);
}

Test(machine, no_reply_when_nobody_waits)
{
	cr_assert_eq(apply_bytes(&m, V1, golden_set, sizeof golden_set, NULL),
		     0);
	cr_assert_eq(kv_dbsize(m.kv), 1);
}

Test(machine, unknown_payload_kind_is_refused)
{
	fill(&m);
	static const uint8_t future[] = {'Z', 1, 2, 3};
	assert_refused(future, sizeof future, V1, BATON_EVERSION, "kind 0x5a");
}

Test(machine, newer_kv_payload_format_is_refused)
{
	fill(&m);
	uint8_t future[sizeof golden_set];
	memcpy(future, golden_set, sizeof future);
	future[1] = 2; /* kv payload format 2 */
	assert_refused(future, sizeof future, V1, BATON_EVERSION, "format 2");
}

Test(machine, machine_version_not_implemented_is_refused)
{
	fill(&m);
	assert_refused(golden_set, sizeof golden_set, V_UNKNOWN, BATON_EVERSION,
		       V_UNKNOWN_TEXT);
	struct baton_machine_version v0 = {0};
	assert_refused(golden_address, sizeof golden_address, v0,
		       BATON_EVERSION, "machine version 0");
}

/* A format-2 payload whose entry applies under version 1 (written before
 * a downgrade's entry, logged after it): a deterministic -ERR for the
 * client, the state unchanged, and no stall. */
Test(machine, format_2_payload_under_version_1_is_an_error_reply)
{
	fill(&m);
	struct baton_buf before, p;
	baton_buf_init(&before);
	baton_buf_init(&p);
	snapshot_of(&m, &before);
	const uint8_t *argv[] = {(const uint8_t *)"SET", (const uint8_t *)"a",
				 (const uint8_t *)"1"};
	const size_t lens[] = {3, 1, 1};
	cr_assert_eq(baton_buf_append(&p, "K", 1), 0);
	cr_assert_eq(kv_encode_v2(T0, 3, argv, lens, &p), 0);
	baton_buf_reset(&reply);
	cr_assert_eq(apply_bytes(&m, V1, p.data, p.len, &reply), 0);
	static const char want[] = "-ERR this write was encoded for machine "
				   "version 2 but its entry applies under "
				   "machine version 1";
	cr_assert(reply.len > sizeof want - 1 &&
			  memcmp(reply.data, want, sizeof want - 1) == 0,
		  "%.*s", (int)reply.len, (const char *)reply.data);
	snapshot_of(&m, &snap);
	cr_assert_eq(snap.len, before.len);
	cr_assert_eq(memcmp(snap.data, before.data, snap.len), 0);
	baton_buf_free(&before);
	baton_buf_free(&p);
}

Test(machine, damaged_payloads_are_refused)
{
	fill(&m);
	assert_refused((const uint8_t *)"", 0, V1, BATON_ECORRUPT, "empty");
	assert_refused(golden_address, sizeof golden_address - 1, V1,
		       BATON_ECORRUPT, "malformed address");
	assert_refused(golden_set, sizeof golden_set - 1, V1, BATON_ECORRUPT,
		       "malformed kv payload");
}

Test(machine, full_address_book_refuses_alike)
{
	struct book_entry e;
	struct baton_buf b;
	baton_buf_init(&b);
	for (uint32_t i = 1; i <= SERVER_BOOK_MAX + 1; i++) {
		memset(&e, 0, sizeof e);
		e.id = i;
		strcpy(e.peer, "127.0.0.1:1");
		strcpy(e.client, "127.0.0.1:2");
		baton_buf_reset(&b);
		cr_assert_eq(server_machine_encode_address(&e, &b), 0);
		baton_buf_reset(&reply);
		/* Applied (every node agrees), with an error reply. */
		cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, &reply), 0);
	}
	cr_assert_eq(m.book_n, SERVER_BOOK_MAX);
	cr_assert_null(server_machine_book_find(&m, SERVER_BOOK_MAX + 1));
	cr_assert(reply.len > 0 && reply.data[0] == '-');
	/* A member already in the book may still move. */
	e.id = 1;
	strcpy(e.peer, "127.0.0.1:9");
	baton_buf_reset(&b);
	cr_assert_eq(server_machine_encode_address(&e, &b), 0);
	cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, NULL), 0);
	cr_assert_str_eq(server_machine_book_find(&m, 1)->peer, "127.0.0.1:9");
	baton_buf_free(&b);
}

Test(machine, address_too_long_is_not_encoded)
{
	struct book_entry e = {.id = 1};
	memset(e.peer, 'a', sizeof e.peer); /* no NUL */
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(server_machine_encode_address(&e, &b), BATON_EINVAL);
	cr_assert_eq(b.len, 0);
	baton_buf_free(&b);
}

/* ---- snapshots ----------------------------------------------------------- */

Test(machine, golden_snapshot)
{
	fill(&m);
	snapshot_of(&m, &snap);
	cr_assert_eq(snap.len, sizeof golden_snapshot_v1);
	cr_assert_eq(memcmp(snap.data, golden_snapshot_v1, snap.len), 0);

	struct server_machine r;
	cr_assert_eq(server_machine_init(&r), 0);
	cr_assert_eq(r.base.ops->restore(&r.base, V1, golden_snapshot_v1,
					 sizeof golden_snapshot_v1),
		     0);
	cr_assert_eq(r.book_n, 2);
	cr_assert_str_eq(server_machine_book_find(&r, 7)->client,
			 "127.0.0.1:6001");
	cr_assert_str_eq(server_machine_book_find(&r, 3)->peer,
			 "10.0.0.3:7003");
	cr_assert_eq(kv_dbsize(r.kv), 1);
	struct baton_buf again;
	baton_buf_init(&again);
	snapshot_of(&r, &again);
	cr_assert_eq(again.len, snap.len);
	cr_assert_eq(memcmp(again.data, snap.data, snap.len), 0);
	baton_buf_free(&again);
	server_machine_free(&r);
}

Test(machine, restore_replaces_the_state_and_tells_addresses)
{
	fill(&m);
	snapshot_of(&m, &snap);
	struct server_machine r;
	cr_assert_eq(server_machine_init(&r), 0);
	int seen_before = addresses_seen;
	r.address_changed = seen;
	static const uint8_t other[] = {'P', 9, 0, 0,	0, 0, 0,  0,
					0,   1, 0, 'x', 1, 0, 'y'};
	cr_assert_eq(apply_bytes(&r, V1, other, sizeof other, NULL), 0);
	cr_assert_eq(r.base.ops->restore(&r.base, V1, snap.data, snap.len), 0);
	cr_assert_null(server_machine_book_find(&r, 9)); /* replaced */
	cr_assert_eq(r.book_n, 2);
	cr_assert_eq(addresses_seen, seen_before + 1 + 2);
	server_machine_free(&r);
}

/* Restoring `buf` is refused with `code` and the state stays. */
static void assert_restore_refused(const uint8_t *buf, size_t len,
				   struct baton_machine_version v, int code,
				   const char *why)
{
	struct baton_buf before;
	baton_buf_init(&before);
	snapshot_of(&m, &before);
	cr_assert_eq(m.base.ops->restore(&m.base, v, buf, len), code);
	cr_assert(strstr(errmsg(), why) != NULL, "errmsg '%s' lacks '%s'",
		  errmsg(), why);
	snapshot_of(&m, &snap);
	cr_assert_eq(snap.len, before.len);
	cr_assert_eq(memcmp(snap.data, before.data, snap.len), 0);
	baton_buf_free(&before);
}

Test(machine, snapshot_refusals_leave_the_state)
{
	fill(&m);
	uint8_t s[sizeof golden_snapshot_v1];
	memcpy(s, golden_snapshot_v1, sizeof s);
	s[4] = 3; /* a newer wrapper format */
	assert_restore_refused(s, sizeof s, V1, BATON_EVERSION, "format 3");
	memcpy(s, golden_snapshot_v1, sizeof s);
	s[0] = 'X';
	assert_restore_refused(s, sizeof s, V1, BATON_ECORRUPT, "BSRV");
	assert_restore_refused(golden_snapshot_v1, 20, V1, BATON_ECORRUPT,
			       "address");
	assert_restore_refused(golden_snapshot_v1,
			       sizeof golden_snapshot_v1 - 1, V1,
			       BATON_ECORRUPT, "key-value");
	assert_restore_refused(golden_snapshot_v1, sizeof golden_snapshot_v1,
			       V_UNKNOWN, BATON_EVERSION, V_UNKNOWN_TEXT);
	memcpy(s, golden_snapshot_v1, sizeof s);
	s[5] = 0xff; /* too many addresses */
	assert_restore_refused(s, sizeof s, V1, BATON_ECORRUPT, "addresses");
}

Test(machine, snapshot_under_unknown_version_is_refused)
{
	fill(&m);
	cr_assert_eq(m.base.ops->snapshot(&m.base, V_UNKNOWN, &snap),
		     BATON_EVERSION);
	cr_assert_eq(snap.len, 0);
}

Test(machine, replicas_agree)
{
	struct server_machine a, b;
	cr_assert_eq(server_machine_init(&a), 0);
	cr_assert_eq(server_machine_init(&b), 0);
	fill(&a);
	fill(&b);
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	snapshot_of(&a, &sa);
	snapshot_of(&b, &sb);
	cr_assert_eq(sa.len, sb.len);
	cr_assert_eq(memcmp(sa.data, sb.data, sa.len), 0);
	baton_buf_free(&sa);
	baton_buf_free(&sb);
	server_machine_free(&a);
	server_machine_free(&b);
}

/* ---- version changes ----------------------------------------------------- */

static int conversions;
static uint64_t dropped_seen;
static baton_index converted_at;

static void converted(void *data, baton_index index,
		      struct baton_machine_version from,
		      struct baton_machine_version to,
		      const struct baton_machine_loss *lost)
{
	(void)data;
	cr_assert_eq(from.value, 2);
	cr_assert_eq(to.value, 1);
	conversions++;
	converted_at = index;
	dropped_seen = lost->items;
}

static void apply_at(struct server_machine *sm, struct baton_machine_version v,
		     uint64_t stamp, const char *a0, const char *a1,
		     const char *a2, const char *a3, const char *a4)
{
	const char *args[] = {a0, a1, a2, a3, a4};
	const uint8_t *argv[5];
	size_t lens[5];
	int argc = 0;
	for (; argc < 5 && args[argc] != NULL; argc++) {
		argv[argc] = (const uint8_t *)args[argc];
		lens[argc] = strlen(args[argc]);
	}
	struct baton_buf p;
	baton_buf_init(&p);
	cr_assert_eq(baton_buf_append(&p, "K", 1), 0);
	cr_assert_eq(kv_encode_v2(stamp, argc, argv, lens, &p), 0);
	cr_assert_eq(apply_bytes(sm, v, p.data, p.len, NULL), 0);
	baton_buf_free(&p);
}

static void apply_v2(struct server_machine *sm, uint64_t stamp, const char *a0,
		     const char *a1, const char *a2, const char *a3,
		     const char *a4)
{
	apply_at(sm, V2, stamp, a0, a1, a2, a3, a4);
}

/* Down to version 1 (a downgrade's entry): every expiry dropped, keys kept
 * (expired ones deleted), the same on every replica, and a version-1
 * snapshot possible again; up changes nothing. */
Test(machine, version_change_down_converts_alike)
{
	struct server_machine a, b;
	cr_assert_eq(server_machine_init(&a), 0);
	cr_assert_eq(server_machine_init(&b), 0);
	a.converted = converted;
	conversions = 0;
	const struct baton_machine_version v2 = V2;
	for (int i = 0; i < 2; i++) {
		struct server_machine *sm = i == 0 ? &a : &b;
		fill(sm);
		cr_assert_eq(
			sm->base.ops->version_changed(&sm->base, 4, V1, v2), 0);
		apply_v2(sm, T0, "SET", "t", "1", "PX", "100000");
		apply_v2(sm, T0, "SET", "gone", "1", "PX", "10");
		apply_v2(sm, T0 + 50, "SET", "u", "2", NULL, NULL);
		cr_assert_eq(kv_expiry_count(sm->kv), 2);
		cr_assert_eq(sm->base.ops->snapshot(&sm->base, V1, &snap),
			     BATON_EVERSION); /* format 1 holds no expiry */
		cr_assert_eq(
			sm->base.ops->version_changed(&sm->base, 9, v2, V1), 0);
		cr_assert_eq(kv_expiry_count(sm->kv), 0);
		cr_assert_eq(kv_dbsize(sm->kv), 3); /* b, t, u */
	}
	cr_assert_eq(conversions, 1);
	cr_assert_eq(converted_at, 9);
	cr_assert_eq(dropped_seen, 1);
	struct baton_buf sa, sb;
	baton_buf_init(&sa);
	baton_buf_init(&sb);
	snapshot_of(&a, &sa);
	snapshot_of(&b, &sb);
	cr_assert_eq(sa.len, sb.len);
	cr_assert_eq(memcmp(sa.data, sb.data, sa.len), 0);
	/* An unknown version is refused, the state left alone. */
	cr_assert_eq(a.base.ops->version_changed(&a.base, 10, V1, V_UNKNOWN),
		     BATON_EVERSION);
	cr_assert(strstr(a.base.ops->errmsg(&a.base), V_UNKNOWN_TEXT) != NULL);
	snapshot_of(&a, &sb);
	cr_assert_eq(sa.len, sb.len);
	cr_assert_eq(memcmp(sa.data, sb.data, sa.len), 0);
	baton_buf_free(&sa);
	baton_buf_free(&sb);
	server_machine_free(&a);
	server_machine_free(&b);
}

/* The downgrade's question goes to the machine (convert_loss): one hash
 * and no TTL is a hash deleted below version 3, not a TTL, and the
 * conversion then does exactly what the answer said. */
Test(machine, convert_loss_says_what_the_conversion_does)
{
	struct server_machine a;
	cr_assert_eq(server_machine_init(&a), 0);
	const struct baton_machine_ops *ops = a.base.ops;
	cr_assert_not_null(ops->convert_loss);
	apply_at(&a, V3, T0, "HSET", "h", "f", "1", NULL);
	apply_at(&a, V3, T0, "SET", "s", "1", NULL, NULL);
	struct baton_machine_loss l;
	cr_assert_eq(ops->convert_loss(&a.base, V3, V2, &l), 0);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.items, 1);
	cr_assert_str_eq(l.kinds[0].name, "hashes_deleted");
	cr_assert_eq(l.kinds[0].since.value, 3);
	cr_assert_eq(l.kinds[0].items, 1);
	cr_assert_str_eq(l.text, "1 key is a hash, which machine version 2 "
				 "cannot hold; with FORCE it is deleted");
	cr_assert(strstr(l.text, "TTL") == NULL, "%s", l.text);
	/* Nothing changed by asking. */
	cr_assert_eq(kv_dbsize(a.kv), 2);
	/* A TTL is kept at version 2, dropped at 1, and the hash counted
	 * once (as a hash) even with a TTL of its own. */
	apply_at(&a, V3, T0, "SET", "t", "1", "PX", "100000");
	apply_at(&a, V3, T0, "PEXPIRE", "h", "100000", NULL, NULL);
	cr_assert_eq(ops->convert_loss(&a.base, V3, V2, &l), 0);
	cr_assert_eq(l.items, 1);
	cr_assert_eq(ops->convert_loss(&a.base, V3, V1, &l), 0);
	cr_assert_eq(l.n, 2);
	cr_assert_eq(l.items, 2);
	cr_assert_str_eq(l.kinds[1].name, "ttls_dropped");
	cr_assert_eq(l.kinds[1].items, 1);
	cr_assert_str_eq(l.text, "1 key is a hash, which machine version 1 "
				 "cannot hold, and 1 other key has a TTL "
				 "that machine version 1 cannot keep; with "
				 "FORCE the hashes are deleted and the keys "
				 "with a TTL become persistent");
	/* A conversion the machine cannot make: refused with why. */
	cr_assert_eq(ops->convert_loss(&a.base, V_UNKNOWN, V2, &l),
		     BATON_EVERSION);
	cr_assert(strstr(ops->errmsg(&a.base), V_UNKNOWN_TEXT) != NULL, "%s",
		  ops->errmsg(&a.base));
	/* Forced: exactly that. The hash goes, the TTL of 't' stays at 2. */
	cr_assert_eq(ops->convert_loss(&a.base, V3, V2, &l), 0);
	cr_assert_eq(l.items, 1);
	uint64_t before = kv_dbsize(a.kv);
	cr_assert_eq(ops->version_changed(&a.base, 7, V3, V2), 0);
	cr_assert_eq(kv_dbsize(a.kv), before - l.kinds[0].items);
	cr_assert_eq(kv_expiry_count(a.kv), 1);
	cr_assert_eq(ops->convert_loss(&a.base, V3, V2, &l), 0);
	cr_assert_eq(l.items, 0);
	cr_assert_str_eq(l.text, "");
	server_machine_free(&a);
}

/* The release table says which machine versions each release advertises;
 * the kv code says which it implements. No release advertises a machine
 * version kv does not implement (it would accept entries it cannot
 * apply). kv may implement one ahead of every release, as it did version
 * 3 (hashes) until release 2.0.0 advertised it. */
Test(machine, newest_release_advertises_what_kv_implements)
{
	const struct baton_profile *cur = baton_release_current();
	cr_assert_leq(cur->machine_max.value, KV_MACHINE_VERSION_MAX);
	uint32_t n;
	const struct baton_profile *all = baton_releases(&n);
	for (uint32_t i = 0; i < n; i++)
		cr_assert_geq(all[i].machine_max.value, KV_MACHINE_VERSION_MIN);
}

/* ---- the cluster's identity ---------------------------------------------- */

static const uint8_t golden_uuid_entry[] = {'U',  0x1b, 0x4e, 0x28, 0xba, 0x2f,
					    0xa1, 0x41, 0xd2, 0x88, 0x3f, 0x00,
					    0x10, 0x5a, 0xcc, 0xde, 0x0f};
/* 'R' + node 9. */
static const uint8_t golden_removed_entry[] = {'R', 0x09, 0, 0, 0, 0, 0, 0, 0};

/* fill()'s state, then golden_uuid_entry and the removal of nodes 9 and 4:
 * wrapper format 2. */
static const uint8_t golden_snapshot_v2[] = {
	0x42, 0x53, 0x52, 0x56, 0x02, 0x02, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x31, 0x32, 0x37, 0x2e, 0x30,
	0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x37, 0x30, 0x30, 0x31, 0x0e, 0x00, 0x31,
	0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x3a, 0x36, 0x30, 0x30,
	0x31, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x31,
	0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x33, 0x3a, 0x37, 0x30, 0x30, 0x33,
	0x0d, 0x00, 0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x33, 0x3a, 0x36,
	0x30, 0x30, 0x33, 0x01, 0x1b, 0x4e, 0x28, 0xba, 0x2f, 0xa1, 0x41, 0xd2,
	0x88, 0x3f, 0x00, 0x10, 0x5a, 0xcc, 0xde, 0x0f, 0x02, 0x00, 0x00, 0x00,
	0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x42, 0x4b, 0x56, 0x53, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
	0x62, 0x02, 0x00, 0x00, 0x00, 0x78, 0x79, 0xad, 0x62, 0x04, 0xb9, 0x56,
	0x17, 0x03, 0x95};

static int identity_changes;

static void identity_seen(void *data)
{
	(void)data;
	identity_changes++;
}

static void fill_identity(struct server_machine *sm)
{
	fill(sm);
	cr_assert_eq(apply_bytes(sm, V1, golden_uuid_entry,
				 sizeof golden_uuid_entry, NULL),
		     0);
	cr_assert_eq(apply_bytes(sm, V1, golden_removed_entry,
				 sizeof golden_removed_entry, NULL),
		     0);
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(server_machine_encode_removed(4, &b), 0);
	cr_assert_eq(apply_bytes(sm, V1, b.data, b.len, NULL), 0);
	baton_buf_free(&b);
}

Test(machine, first_cluster_uuid_applied_is_kept)
{
	m.identity_changed = identity_seen;
	identity_changes = 0;
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(server_machine_encode_uuid(golden_uuid_entry + 1, &b), 0);
	cr_assert_eq(b.len, sizeof golden_uuid_entry);
	cr_assert_arr_eq(b.data, golden_uuid_entry, b.len);
	cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, &reply), 0);
	cr_assert_eq(reply.len, 5);
	cr_assert_eq(memcmp(reply.data, "+OK\r\n", 5), 0);
	cr_assert(m.has_uuid);
	cr_assert_arr_eq(m.uuid, golden_uuid_entry + 1, SERVER_UUID_LEN);
	cr_assert_eq(identity_changes, 1);
	/* A second leader's draw (its entry came later): no change. */
	uint8_t other[sizeof golden_uuid_entry];
	memcpy(other, golden_uuid_entry, sizeof other);
	other[5] ^= 0xff;
	cr_assert_eq(apply_bytes(&m, V2, other, sizeof other, NULL), 0);
	cr_assert_arr_eq(m.uuid, golden_uuid_entry + 1, SERVER_UUID_LEN);
	cr_assert_eq(identity_changes, 1);
	baton_buf_free(&b);
}

Test(machine, removed_ids_are_remembered_in_order)
{
	m.identity_changed = identity_seen;
	identity_changes = 0;
	struct baton_buf b;
	baton_buf_init(&b);
	cr_assert_eq(server_machine_encode_removed(9, &b), 0);
	cr_assert_arr_eq(b.data, golden_removed_entry, b.len);
	cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, NULL), 0);
	baton_buf_reset(&b);
	cr_assert_eq(server_machine_encode_removed(4, &b), 0);
	cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, NULL), 0);
	cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, NULL), 0, "again");
	cr_assert_eq(m.removed_n, 2);
	cr_assert_eq(m.removed[0], 4);
	cr_assert_eq(m.removed[1], 9);
	cr_assert(server_machine_removed(&m, 9));
	cr_assert_not(server_machine_removed(&m, 5));
	cr_assert_eq(identity_changes, 2);
	baton_buf_free(&b);
}

Test(machine, full_removed_list_refuses_alike)
{
	struct baton_buf b;
	baton_buf_init(&b);
	for (baton_node_id id = 1; id <= SERVER_REMOVED_MAX; id++) {
		baton_buf_reset(&b);
		cr_assert_eq(server_machine_encode_removed(id, &b), 0);
		cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, NULL), 0);
	}
	baton_buf_reset(&b);
	cr_assert_eq(server_machine_encode_removed(SERVER_REMOVED_MAX + 1, &b),
		     0);
	baton_buf_reset(&reply);
	cr_assert_eq(apply_bytes(&m, V1, b.data, b.len, &reply), 0);
	cr_assert(reply.len > 0 && reply.data[0] == '-');
	cr_assert_not(server_machine_removed(&m, SERVER_REMOVED_MAX + 1));
	cr_assert_eq(m.removed_n, SERVER_REMOVED_MAX);
	baton_buf_free(&b);
}

Test(machine, damaged_identity_entries_are_refused)
{
	fill(&m);
	assert_refused(golden_uuid_entry, 10, V1, BATON_ECORRUPT,
		       "malformed cluster uuid");
	assert_refused(golden_removed_entry, 5, V1, BATON_ECORRUPT,
		       "malformed removed-id");
	static const uint8_t zero_id[] = {'R', 0, 0, 0, 0, 0, 0, 0, 0};
	assert_refused(zero_id, sizeof zero_id, V1, BATON_ECORRUPT,
		       "malformed removed-id");
}

Test(machine, snapshot_without_identity_stays_format_1)
{
	fill(&m);
	snapshot_of(&m, &snap);
	cr_assert_eq(snap.data[4], 1);
}

Test(machine, golden_snapshot_v2)
{
	fill_identity(&m);
	snapshot_of(&m, &snap);
	cr_assert_eq(snap.len, sizeof golden_snapshot_v2);
	cr_assert_arr_eq(snap.data, golden_snapshot_v2, snap.len);

	struct server_machine r;
	cr_assert_eq(server_machine_init(&r), 0);
	r.identity_changed = identity_seen;
	identity_changes = 0;
	cr_assert_eq(r.base.ops->restore(&r.base, V1, golden_snapshot_v2,
					 sizeof golden_snapshot_v2),
		     0);
	cr_assert_eq(identity_changes, 1);
	cr_assert(r.has_uuid);
	cr_assert_arr_eq(r.uuid, golden_uuid_entry + 1, SERVER_UUID_LEN);
	cr_assert(server_machine_removed(&r, 4) &&
		  server_machine_removed(&r, 9));
	cr_assert_eq(r.book_n, 2);
	cr_assert_eq(kv_dbsize(r.kv), 1);
	/* Restoring a format-1 snapshot forgets them. */
	cr_assert_eq(r.base.ops->restore(&r.base, V1, golden_snapshot_v1,
					 sizeof golden_snapshot_v1),
		     0);
	cr_assert_not(r.has_uuid);
	cr_assert_eq(r.removed_n, 0);
	server_machine_free(&r);
}

Test(machine, damaged_identity_in_snapshot_is_refused)
{
	fill(&m);
	uint8_t s[sizeof golden_snapshot_v2];
	size_t at = 87; /* the has_uuid flag */
	cr_assert_eq(golden_snapshot_v2[at], 1);
	memcpy(s, golden_snapshot_v2, sizeof s);
	s[at] = 2;
	assert_restore_refused(s, sizeof s, V1, BATON_ECORRUPT, "cluster uuid");
	memcpy(s, golden_snapshot_v2, sizeof s);
	s[at + 17 + 4] = 10; /* ids 10 then 9: not ascending */
	assert_restore_refused(s, sizeof s, V1, BATON_ECORRUPT, "removed ids");
	memcpy(s, golden_snapshot_v2, sizeof s);
	s[at + 17] = 0xff; /* too many ids */
	assert_restore_refused(s, sizeof s, V1, BATON_ECORRUPT, "removed ids");
}
