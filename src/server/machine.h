/*
 * batond's replicated state machine (struct baton_machine, see
 * baton/machine.h): the key-value map (src/kv) and the address book (where
 * each member listens for peers and clients). Both change only by applying
 * committed entries, so every node agrees, and both go into snapshots, so
 * a node restored from one knows every address.
 *
 * Entry payloads (docs/batond.md, "Log payloads"): a kind byte, then
 *   'K'  a kv payload: format 1 (kv_encode) under machine version 1; the
 *        leader writes format 2 under version 2 (stamped with its wall
 *        clock: one command, a transaction or an expiry sweep);
 *   'P'  an address entry: u64 id, u16 length + peer address, u16 length +
 *        client address (little endian; bytes after them are left for a
 *        later release to append and ignored);
 *   'U'  the cluster's UUID: 16 bytes, drawn by the first leader; the
 *        first one applied is the cluster's, a later one changes nothing
 *        (bytes after the 16 are ignored);
 *   'R'  a removed member: u64 id, never to be a member again (bytes
 *        after it are ignored).
 * 'U' and 'R' come from release 1.2.0 on, and only once the release floor
 * of the log is 1.2.0 or newer (identity.c), so no release that does not
 * know them can be a member that must apply them.
 * Snapshots: "BSRV", u8 format, u32 entries, the address entries as
 * above; format 2 then has u8 has_uuid, the 16-byte UUID (zeros when
 * none), u32 removed ids and that many u64 ids (ascending); then the kv
 * snapshot. Format 2 is written only when there is a UUID or a removed
 * id, format 1 otherwise (byte for byte what older releases write).
 *
 * A payload this release cannot interpret (an unknown kind, a kv payload
 * of a newer format or machine version) is refused with BATON_EVERSION (a
 * damaged one with BATON_ECORRUPT) and the state is left unchanged: the
 * node stops applying there and says so; it never skips it.
 *
 * Kept free of the server and the event loop, so its unit tests
 * (tests/server) drive it through the machine interface alone.
 */
#ifndef BATON_SERVER_MACHINE_H
#define BATON_SERVER_MACHINE_H

#include "baton/machine.h"
#include "kv.h"

/* Entry payloads: a kind byte, then the body. */
#define PAYLOAD_KV 'K'
#define PAYLOAD_ADDRESS 'P'
#define PAYLOAD_CLUSTER_UUID 'U'
#define PAYLOAD_REMOVED 'R'

/* An address's room, its NUL included (the transport's BATON_ADDR_MAX). */
#define SERVER_ADDR_MAX 256u
/* Addresses the book holds: part of the machine's semantics (a full book
 * refuses a new member alike on every node). */
#define SERVER_BOOK_MAX (BATON_MAX_MEMBERS * 4u)

#define SERVER_SNAPSHOT_MAGIC "BSRV"
/* The newest format read; written when there is a UUID or a removed id. */
#define SERVER_SNAPSHOT_FORMAT 2u
/* Written otherwise. */
#define SERVER_SNAPSHOT_FORMAT_PLAIN 1u
#define SERVER_UUID_LEN 16u
/* Removed ids the machine remembers: part of its semantics (a full list
 * refuses a removal alike on every node). */
#define SERVER_REMOVED_MAX 1024u

/* One member's addresses, replicated through the log. */
struct book_entry {
	baton_node_id id;
	char peer[SERVER_ADDR_MAX];
	char client[SERVER_ADDR_MAX];
};

struct server_machine {
	struct baton_machine base; /* first: the machine interface */
	struct baton_kv *kv;
	struct book_entry book[SERVER_BOOK_MAX];
	uint32_t book_n;
	/* The cluster's UUID ('U'); has_uuid false until one is applied. */
	bool has_uuid;
	uint8_t uuid[SERVER_UUID_LEN];
	/* Ids removed from the cluster ('R'), ascending. */
	uint32_t removed_n;
	baton_node_id removed[SERVER_REMOVED_MAX];
	/* Told when the UUID is set or an id removed (applied or restored);
	 * may be NULL. */
	void (*identity_changed)(void *data);
	/* Told of each address the book takes (applied or restored); may be
	 * NULL. */
	void (*address_changed)(void *data, const struct book_entry *e);
	/* Told of each conversion down (version_changed to a lower machine
	 * version, docs/kv.md "Converting down") once done: the index and
	 * what it lost; may be NULL. */
	void (*converted)(void *data, baton_index index,
			  struct baton_machine_version from,
			  struct baton_machine_version to,
			  const struct baton_machine_loss *lost);
	/* Told of each kv payload applied (the migration's export,
	 * migration_export.c); may be NULL. */
	void (*kv_applied)(void *data, baton_index index,
			   const uint8_t *payload, size_t len);
	/* Asked before the node's own snapshot opens the map's one view:
	 * true while a backup waits for that view (backup.c), so the
	 * snapshot lets it go first and is asked again later; may be NULL.
	 * Without it, snapshots that follow each other closely could keep
	 * a backup out for good. */
	bool (*snapshot_yields)(void *data);
	void *data;
	/* --test-apply-delay-ms (tests only: a planted slow release for
	 * batonctl roll --soak): every key-value entry applied first
	 * sleeps this long, holding the loop as a slow apply would. */
	uint32_t test_apply_delay_ms;
	/* The index of the last entry applied, or of the snapshot restored. */
	baton_index applied_index;
	/* Counts restores and conversions, each of which ends the map's open
	 * view: a backup (backup.c) holding the view sees it ended. */
	uint64_t map_replaced;
	/* The wrapper of the snapshot being written, until its first step. */
	struct baton_buf snap_wrapper;
	char err[256];
};

/* An empty machine: 0 or BATON_ENOMEM. Free with server_machine_free. */
int server_machine_init(struct server_machine *m);
void server_machine_free(struct server_machine *m);

/* The book's entry for id, or NULL. */
const struct book_entry *
server_machine_book_find(const struct server_machine *m, baton_node_id id);

/* Whether id was removed from the cluster. */
bool server_machine_removed(const struct server_machine *m, baton_node_id id);
/* Append the payload of a 'U' entry (kind byte included) to out: 0 or
 * BATON_ENOMEM (out unchanged). */
int server_machine_encode_uuid(const uint8_t uuid[SERVER_UUID_LEN],
			       struct baton_buf *out);
/* Append the payload of an 'R' entry for id (kind byte included). */
int server_machine_encode_removed(baton_node_id id, struct baton_buf *out);

/* Append the payload of an address entry (kind byte included) to out:
 * 0, BATON_EINVAL for an address too long, or BATON_ENOMEM (out is then
 * unchanged). */
int server_machine_encode_address(const struct book_entry *e,
				  struct baton_buf *out);

#endif /* BATON_SERVER_MACHINE_H */
