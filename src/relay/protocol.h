/*
 * The relay protocol codec: the frames baton-relay and the nodes' relay
 * clients exchange over TCP (docs/relay-protocol.md, which this follows
 * byte by byte). The protocol is frozen: no frame, field or limit here
 * ever changes. A later release adds data only in the extension areas
 * (trailing tag-length-value entries that this codec validates and
 * skips), so every release decodes every other's frames.
 *
 * A frame is a 20-byte header (magic, type, flags, body length, checksum)
 * then its body: fixed fields in a fixed order, then the extension area.
 * Integers are little-endian; strings and byte arrays carry their length
 * first. The codec is pure: no I/O and no allocation. Decoded strings,
 * payloads, lists and extension areas point into the caller's input
 * buffer, which must outlive the decoded frame.
 *
 * Errors. Functions return 0 or a negative BATON_E* code (baton/errors.h):
 *   BATON_ECORRUPT  the input is malformed (split, decode);
 *   BATON_EAGAIN    more bytes are needed (split only);
 *   BATON_EINVAL    a value the protocol cannot carry (encode);
 *   BATON_ETOOBIG   the output buffer is too small (encode).
 * With ECORRUPT and EINVAL, err->code is the wire error code (the table
 * BATON_RELAY_CODES below, the one a receiver puts in its ERROR frame
 * before it closes the connection) and err->text says which field broke
 * which rule, with the value found and the limit.
 */
#ifndef BATON_RELAY_PROTOCOL_H
#define BATON_RELAY_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/types.h"
#include "baton/version.h"

/* ---- framing and limits ---------------------------------------------------
 * Part of the frozen specification: a receiver refuses anything above
 * them, so they can never be raised. */

/* The first 4 bytes of every frame: 0xBA 'R' 'L' 'Y'. Anything else is not
 * a relay peer; it is refused as soon as the first differing byte arrives.
 * The magic is also the protocol's only version: there is one. */
#define BATON_RELAY_MAGIC_LEN 4u
extern const uint8_t baton_relay_magic[BATON_RELAY_MAGIC_LEN];

/* magic[4] type:u16 flags:u16 body_len:u32 checksum:u64. */
#define BATON_RELAY_HEADER_LEN 20u

/* Bytes of a cluster id and of an address ("host:port"): 1 to this. */
#define BATON_RELAY_ID_MAX 255u
#define BATON_RELAY_ADDR_MAX 255u
/* Bytes of a reason or error text. */
#define BATON_RELAY_TEXT_MAX 1024u
/* Nodes in a VIEW, and node records in a STATUS_REPLY. */
#define BATON_RELAY_NODES_MAX 256u
/* Bytes of a DATA payload. */
#define BATON_RELAY_PAYLOAD_MAX (8u << 20)
/* The extension area of a frame and of one record (a VIEW's node, a
 * STATUS_REPLY's node), in bytes, and its entries. */
#define BATON_RELAY_EXT_MAX 16384u
#define BATON_RELAY_RECORD_EXT_MAX 1024u
#define BATON_RELAY_EXT_ENTRIES_MAX 64u
/* An extension entry's tag with this bit set is critical: a receiver that
 * does not know the tag refuses the frame instead of skipping it. */
#define BATON_RELAY_EXT_CRITICAL 0x8000u
/* Body lengths: every frame type has one of these three limits, which the
 * header's body length is checked against before anything is buffered. */
#define BATON_RELAY_CONTROL_BODY_MAX (64u << 10)
#define BATON_RELAY_LIST_BODY_MAX (1u << 20)
#define BATON_RELAY_DATA_BODY_MAX (BATON_RELAY_PAYLOAD_MAX + (64u << 10))

/* Which way a frame travels: the receiver knows, and a frame type sent the
 * wrong way is refused. */
enum baton_relay_dir {
	BATON_RELAY_TO_RELAY = 1, /* node (or monitor) to baton-relay */
	BATON_RELAY_TO_NODE = 2,  /* baton-relay to node */
	BATON_RELAY_BOTH = 3,	  /* in the type table: either way */
};

/* ---- frame types ----------------------------------------------------------
 * X(NAME, number, directions, body limit). */
#define BATON_RELAY_TYPES(X)                                                   \
	X(HELLO, 1, BATON_RELAY_TO_RELAY, BATON_RELAY_CONTROL_BODY_MAX)        \
	X(WELCOME, 2, BATON_RELAY_TO_NODE, BATON_RELAY_CONTROL_BODY_MAX)       \
	X(VIEW, 3, BATON_RELAY_TO_NODE, BATON_RELAY_LIST_BODY_MAX)             \
	X(LEAVE, 4, BATON_RELAY_TO_RELAY, BATON_RELAY_CONTROL_BODY_MAX)        \
	X(DATA, 5, BATON_RELAY_BOTH, BATON_RELAY_DATA_BODY_MAX)                \
	X(ACK, 6, BATON_RELAY_BOTH, BATON_RELAY_CONTROL_BODY_MAX)              \
	X(ACTIVATE, 7, BATON_RELAY_TO_NODE, BATON_RELAY_CONTROL_BODY_MAX)      \
	X(DEACTIVATE, 8, BATON_RELAY_TO_NODE, BATON_RELAY_CONTROL_BODY_MAX)    \
	X(STATUS, 9, BATON_RELAY_TO_RELAY, BATON_RELAY_CONTROL_BODY_MAX)       \
	X(STATUS_REPLY, 10, BATON_RELAY_TO_NODE, BATON_RELAY_LIST_BODY_MAX)    \
	X(PING, 11, BATON_RELAY_BOTH, BATON_RELAY_CONTROL_BODY_MAX)            \
	X(PONG, 12, BATON_RELAY_BOTH, BATON_RELAY_CONTROL_BODY_MAX)            \
	X(ERROR, 13, BATON_RELAY_BOTH, BATON_RELAY_CONTROL_BODY_MAX)

enum baton_relay_type {
#define BATON__RELAY_TYPE_ENUM(name, number, dirs, body_max)                   \
	BATON_RELAY_##name = number,
	BATON_RELAY_TYPES(BATON__RELAY_TYPE_ENUM)
#undef BATON__RELAY_TYPE_ENUM
};

/* "HELLO", ...; NULL for a number that is no frame type. Static. */
const char *baton_relay_type_name(uint16_t type);

/* ---- wire error codes -----------------------------------------------------
 * The code of an ERROR frame, of a refused WELCOME and of struct
 * baton_relay_err. 1-31: a malformed frame (the codec finds these);
 * 32-63: the session (the relay and the client decide these). A receiver
 * prints a code it does not know as its number. */
#define BATON_RELAY_CODES(X)                                                   \
	X(BAD_MAGIC, 1, "not a baton-relay peer: the frame lacks the magic")   \
	X(BAD_TYPE, 2, "unknown frame type")                                   \
	X(WRONG_DIRECTION, 3, "frame type not sent in this direction")         \
	X(BAD_FLAGS, 4, "reserved flag bits set")                              \
	X(TOO_BIG, 5, "frame body longer than its type's limit")               \
	X(TRUNCATED, 6, "frame or field ends before its length says")          \
	X(CHECKSUM, 7, "frame checksum mismatch")                              \
	X(TOO_LONG, 8, "string or payload longer than its limit")              \
	X(BAD_STRING, 9, "empty or forbidden byte in a string")                \
	X(BAD_VALUE, 10, "field outside its range")                            \
	X(TOO_MANY, 11, "more records than the limit")                         \
	X(BAD_ORDER, 12, "records not in strictly ascending order")            \
	X(BAD_EXTENSION, 13, "malformed extension area")                       \
	X(UNKNOWN_CRITICAL, 14, "unknown critical extension")                  \
	X(PAYLOAD_CHECKSUM, 15, "payload checksum mismatch")                   \
	X(BAD_LENGTH, 16, "bytes left after the frame or record")              \
	X(NOT_REGISTERED, 32, "frame before a HELLO was accepted")             \
	X(UNEXPECTED, 33, "frame not allowed at this point of the session")    \
	X(REPLACED, 34, "a newer connection registered the same node")         \
	X(VIEW_FULL, 35, "the view already holds the most nodes it may")       \
	X(REFUSED, 36, "registration refused (the reason says why)")           \
	X(SHUTTING_DOWN, 37, "the relay is stopping")                          \
	X(OVERLOADED, 38, "the node's queue exceeded its limit")               \
	X(TIMEOUT, 39, "nothing received within the idle limit")               \
	X(INTERNAL, 40, "internal error of the sender")

enum baton_relay_code {
	BATON_RELAY_OK = 0,
#define BATON__RELAY_CODE_ENUM(name, number, text) BATON_RELAY_E##name = number,
	BATON_RELAY_CODES(BATON__RELAY_CODE_ENUM)
#undef BATON__RELAY_CODE_ENUM
};

/* "BAD_MAGIC", ... and the code's meaning; "UNKNOWN" and "unknown code"
 * for a code not in the table. Static. */
const char *baton_relay_code_name(uint16_t code);
const char *baton_relay_code_text(uint16_t code);

/* Why a frame was refused. */
#define BATON_RELAY_ERR_TEXT_MAX 256u
struct baton_relay_err {
	uint16_t code; /* enum baton_relay_code; 0 when none */
	char text[BATON_RELAY_ERR_TEXT_MAX];
};

/* ---- field types ------------------------------------------------------- */

/* A length-prefixed string: not NUL-terminated. Decoded: points into the
 * input. */
struct baton_relay_str {
	const char *ptr;
	uint16_t len;
};

/* An extension area: a sequence of {tag:u16, len:u16, value} entries,
 * tags strictly ascending, none 0. Decoded: the validated bytes, to be
 * walked with baton_relay_ext_next(). To encode: the entries' bytes
 * (len 0: none), which the encoder validates like a decoder. */
struct baton_relay_ext {
	const uint8_t *ptr;
	uint32_t len;
};

struct baton_relay_ext_entry {
	uint16_t tag;
	uint16_t len;
	const uint8_t *value;
};

/* The next entry of *rest (a decoded or validated area), which is
 * advanced past it; false at the end. */
bool baton_relay_ext_next(struct baton_relay_ext *rest,
			  struct baton_relay_ext_entry *out);

/* One end of a stream: a node incarnation. In a DATA frame sent to the
 * relay as a multicast, node_id and incarnation are 0 and cluster_id
 * names the destination cluster. */
struct baton_relay_peer {
	struct baton_relay_str cluster_id;
	baton_node_id node_id;
	uint64_t incarnation;
};

/* Decoded records of a VIEW or STATUS_REPLY: walk them with
 * baton_relay_view_next() / baton_relay_status_next(). */
struct baton_relay_list {
	const uint8_t *ptr;
	uint32_t len;
};

/* ---- frame bodies ---------------------------------------------------------
 * Every frame has an extension area too: struct baton_relay_frame.ext. */

struct baton_relay_hello {
	struct baton_relay_str cluster_id;
	baton_node_id node_id; /* not 0 */
	/* Not 0; never reused by this node id: a new value is a restart. */
	uint64_t incarnation;
	struct baton_release release;	/* not 0.0.0 */
	struct baton_relay_str address; /* "host:port" */
};

struct baton_relay_welcome {
	/* 0: registered; else why not (enum baton_relay_code) and the relay
	 * closes the connection. */
	uint16_t code;
	uint64_t
		relay_incarnation; /* not 0; a new value: the relay restarted */
	struct baton_relay_str reason; /* not empty when code is not 0 */
};

/* A node of the global view. */
struct baton_relay_node {
	struct baton_relay_str cluster_id;
	baton_node_id node_id;
	uint64_t incarnation;
	struct baton_release release;
	struct baton_relay_str address;
	bool connected;
	struct baton_relay_ext ext;
};

struct baton_relay_view {
	uint64_t number; /* >= 1; never reused, across relay restarts too */
	uint16_t node_count;
	/* To encode: node_count nodes, sorted by (cluster id bytes, node id)
	 * strictly ascending. NULL once decoded. */
	const struct baton_relay_node *nodes;
	/* Decoded: the node_count records, for baton_relay_view_next(). */
	struct baton_relay_list records;
};

/* The next node of *rest (from a decoded VIEW), advanced past it; false
 * at the end. */
bool baton_relay_view_next(struct baton_relay_list *rest,
			   struct baton_relay_node *out);

struct baton_relay_leave {
	struct baton_relay_str reason; /* may be empty */
};

enum baton_relay_kind {
	BATON_RELAY_UNICAST = 0,
	BATON_RELAY_MULTICAST = 1, /* to every other node of one cluster */
};

/* An opaque message, or its acknowledgement (docs/relay-protocol.md,
 * "Streams"). `peer` is the other end: to the relay, the destination;
 * from the relay, the source (DATA) or the acknowledging receiver
 * (ACK). */
struct baton_relay_data {
	uint8_t kind; /* enum baton_relay_kind */
	struct baton_relay_peer peer;
	uint64_t seq;	    /* >= 1 */
	uint64_t first_seq; /* 1..seq: the oldest the sender still holds */
	/* XXH3-64 of the payload, set by the source, carried unchanged by
	 * the relay and checked by every decoder. The encoder writes it
	 * from the payload; decoded, it is the value that matched. */
	uint64_t payload_checksum;
	const uint8_t *payload;
	uint32_t payload_len;
};

struct baton_relay_ack {
	uint8_t kind; /* enum baton_relay_kind */
	struct baton_relay_peer peer;
	uint64_t seq; /* the last received in order; 0: none yet */
};

/* One node's counters in a STATUS_REPLY. */
struct baton_relay_node_status {
	struct baton_relay_str cluster_id;
	baton_node_id node_id;
	uint64_t incarnation;
	bool connected;
	uint32_t queue_messages; /* waiting in the relay to be sent to it */
	uint64_t queue_bytes;
	uint64_t messages_in;  /* DATA received from it */
	uint64_t messages_out; /* DATA sent to it */
	struct baton_relay_ext ext;
};

struct baton_relay_status_reply {
	uint64_t relay_incarnation; /* not 0 */
	uint64_t view_number;	    /* 0: no view installed yet */
	bool active;		    /* ACTIVATE sent, DEACTIVATE not since */
	uint64_t messages_relayed;
	uint64_t bytes_relayed;	   /* payload bytes */
	uint64_t messages_dropped; /* undeliverable: stale destination */
	uint16_t node_count;
	const struct baton_relay_node_status *nodes; /* to encode, sorted */
	struct baton_relay_list records;	     /* decoded */
};

bool baton_relay_status_next(struct baton_relay_list *rest,
			     struct baton_relay_node_status *out);

struct baton_relay_error {
	uint16_t code;		     /* not 0 */
	uint16_t frame_type;	     /* of the frame that caused it; 0: none */
	struct baton_relay_str text; /* not empty */
};

/* One frame. ACTIVATE, DEACTIVATE and STATUS have no fields. */
struct baton_relay_frame {
	enum baton_relay_type type;
	union {
		struct baton_relay_hello hello;
		struct baton_relay_welcome welcome;
		struct baton_relay_view view;
		struct baton_relay_leave leave;
		struct baton_relay_data data;
		struct baton_relay_ack ack;
		struct baton_relay_status_reply status_reply;
		uint64_t ping_token; /* PING and PONG: echoed by the PONG */
		struct baton_relay_error error;
	} u;
	struct baton_relay_ext ext;
};

/* ---- allocated extension tags ---------------------------------------------
 * docs/relay-protocol.md "Allocated tags". Each is non-critical, so that a
 * receiver of an older edition skips it. */

/* HELLO: proof that the node holds its cluster's relay secret (a fresh
 * nonce, the sender's clock and an HMAC-SHA-256 over every HELLO field,
 * the nonce and the clock). A relay that has no secret skips it. */
#define BATON_RELAY_TAG_HELLO_PROOF 0x0100u
#define BATON_RELAY_PROOF_NONCE_LEN 16u
#define BATON_RELAY_PROOF_MAC_LEN 32u
/* The value: nonce, timestamp (u64 ms since the epoch), MAC. */
#define BATON_RELAY_PROOF_LEN                                                  \
	(BATON_RELAY_PROOF_NONCE_LEN + 8u + BATON_RELAY_PROOF_MAC_LEN)
/* The whole entry: tag, length, value. */
#define BATON_RELAY_PROOF_ENTRY_LEN (4u + BATON_RELAY_PROOF_LEN)
/* The bytes the MAC covers (baton_relay_proof_message): a label, the
 * HELLO's fields as encoded, the nonce and the timestamp. */
#define BATON_RELAY_PROOF_MESSAGE_MAX                                          \
	(32u + 2u + BATON_RELAY_ID_MAX + 8u + 8u + 6u + 2u +                   \
	 BATON_RELAY_ADDR_MAX + BATON_RELAY_PROOF_NONCE_LEN + 8u)

struct baton_relay_hello_proof {
	bool present; /* decoded: the area held the entry */
	uint8_t nonce[BATON_RELAY_PROOF_NONCE_LEN];
	uint64_t timestamp_ms; /* the sender's clock, ms since the epoch */
	uint8_t mac[BATON_RELAY_PROOF_MAC_LEN];
};

/* The HELLO_PROOF entry of a decoded HELLO's extension area into *out
 * (present false when the area has none). Returns 0, or BATON_ECORRUPT
 * with err (code BAD_EXTENSION) when the entry's value is not exactly
 * BATON_RELAY_PROOF_LEN bytes. */
int baton_relay_proof_get(const struct baton_relay_ext *area,
			  struct baton_relay_hello_proof *out,
			  struct baton_relay_err *err);
/* The entry (tag, length, value) of *p into out; returns its length. */
size_t baton_relay_proof_put(const struct baton_relay_hello_proof *p,
			     uint8_t out[BATON_RELAY_PROOF_ENTRY_LEN]);
/* The message the MAC of *p covers, for HELLO *h, into out (cap at least
 * BATON_RELAY_PROOF_MESSAGE_MAX); returns its length. h must be valid
 * (as encode would accept it). */
size_t baton_relay_proof_message(const struct baton_relay_hello *h,
				 const struct baton_relay_hello_proof *p,
				 uint8_t *out, size_t cap);

/* STATUS: an operator's request to activate or deactivate the relay
 * (protocol_admin.c), proven with the relay's admin secret: op, the relay
 * incarnation it is meant for (from an earlier STATUS_REPLY), a fresh
 * nonce, the sender's clock and an HMAC-SHA-256 over them. A relay that
 * predates it answers the STATUS and ignores it. */
#define BATON_RELAY_TAG_ADMIN_REQUEST 0x0101u
/* STATUS_REPLY: what the relay did with an ADMIN_REQUEST: a code (0:
 * done; else an error code, REFUSED) and a text. */
#define BATON_RELAY_TAG_ADMIN_RESULT 0x0102u
/* STATUS from a registered node: its migration state (one byte of flags:
 * bit 0, its cluster holds write authority). Lets the relay deactivate
 * by itself once the old cluster is gone (docs/relay-server.md). */
#define BATON_RELAY_TAG_NODE_STATE 0x0103u
#define BATON_RELAY_NODE_STATE_AUTHORITY 0x01u

enum baton_relay_admin_op {
	BATON_RELAY_ADMIN_ACTIVATE = 1,
	BATON_RELAY_ADMIN_DEACTIVATE = 2,
};
/* The value: op (u8), relay incarnation (u64), nonce, timestamp (u64 ms
 * since the epoch), MAC. */
#define BATON_RELAY_ADMIN_LEN                                                  \
	(1u + 8u + BATON_RELAY_PROOF_NONCE_LEN + 8u + BATON_RELAY_PROOF_MAC_LEN)
#define BATON_RELAY_ADMIN_ENTRY_LEN (4u + BATON_RELAY_ADMIN_LEN)
/* The bytes its MAC covers: a label, then the value without the MAC. */
#define BATON_RELAY_ADMIN_MESSAGE_MAX (32u + BATON_RELAY_ADMIN_LEN)
#define BATON_RELAY_ADMIN_RESULT_ENTRY_MAX (4u + 2u + BATON_RELAY_TEXT_MAX)

struct baton_relay_admin_request {
	bool present; /* decoded: the area held the entry */
	uint8_t op;   /* enum baton_relay_admin_op; others are refused */
	uint64_t relay_incarnation;
	uint8_t nonce[BATON_RELAY_PROOF_NONCE_LEN];
	uint64_t timestamp_ms;
	uint8_t mac[BATON_RELAY_PROOF_MAC_LEN];
};
struct baton_relay_admin_result {
	bool present;
	uint16_t code; /* 0: done */
	struct baton_relay_str text;
};

/* The ADMIN_REQUEST of a decoded STATUS's area into *out (present false
 * when none). 0, or BATON_ECORRUPT with err (BAD_EXTENSION) when its value
 * is not BATON_RELAY_ADMIN_LEN bytes. */
int baton_relay_admin_get(const struct baton_relay_ext *area,
			  struct baton_relay_admin_request *out,
			  struct baton_relay_err *err);
size_t baton_relay_admin_put(const struct baton_relay_admin_request *r,
			     uint8_t out[BATON_RELAY_ADMIN_ENTRY_LEN]);
/* The message r's MAC covers into out (cap at least
 * BATON_RELAY_ADMIN_MESSAGE_MAX); returns its length. */
size_t baton_relay_admin_message(const struct baton_relay_admin_request *r,
				 uint8_t *out, size_t cap);
/* The ADMIN_RESULT of a decoded STATUS_REPLY's area (present false when
 * none: a relay that predates admin requests). 0, or BATON_ECORRUPT with
 * err when its value is shorter than 2 bytes, its text longer than
 * BATON_RELAY_TEXT_MAX or holding a NUL. */
int baton_relay_admin_result_get(const struct baton_relay_ext *area,
				 struct baton_relay_admin_result *out,
				 struct baton_relay_err *err);
/* The entry of code and text (truncated to BATON_RELAY_TEXT_MAX). */
size_t
baton_relay_admin_result_put(uint16_t code, const char *text,
			     uint8_t out[BATON_RELAY_ADMIN_RESULT_ENTRY_MAX]);
/* The NODE_STATE flags of a decoded STATUS's area: 0 when none (or a
 * value that is not one byte: ignored, as an unknown entry would be). */
uint8_t baton_relay_node_state_get(const struct baton_relay_ext *area);
size_t baton_relay_node_state_put(uint8_t flags, uint8_t out[5]);

/* ---- streaming, decoding, encoding ------------------------------------- */

/* Where the next frame of a byte stream ends. buf holds len received bytes
 * that start at a frame boundary. Returns:
 *   0               a whole frame of *frame_len bytes starts buf (decode
 *                   it with baton_relay_decode(buf, *frame_len, ...));
 *   BATON_EAGAIN    *need more bytes at least are needed (at most the
 *                   rest of the header, then the rest of the frame);
 *   BATON_ECORRUPT  the header is malformed (bad magic, from the first
 *                   differing byte; unknown type; a type sent the wrong
 *                   way; flags set; a body above its type's limit): err
 *                   says why. Close the connection after an ERROR.
 * The checksum and body are checked by baton_relay_decode(). */
int baton_relay_split(const uint8_t *buf, size_t len, enum baton_relay_dir dir,
		      size_t *frame_len, size_t *need,
		      struct baton_relay_err *err);

/* Decode exactly one frame (buf, len: header included) travelling in
 * direction dir into *out, whose pointers then point into buf. Returns 0
 * or BATON_ECORRUPT with err filled (*out is then unspecified). */
int baton_relay_decode(const uint8_t *buf, size_t len, enum baton_relay_dir dir,
		       struct baton_relay_frame *out,
		       struct baton_relay_err *err);

/* Encode *f (travelling in direction dir) into buf (cap bytes). *len_out
 * receives the frame's length, also when it returns BATON_ETOOBIG (cap is
 * too small: nothing written), so a call with cap 0 sizes the buffer.
 * BATON_EINVAL: *f breaks a rule of the specification (err says which, as
 * a decoder would); nothing is written. DATA's payload_checksum is
 * computed, not read. */
int baton_relay_encode(const struct baton_relay_frame *f,
		       enum baton_relay_dir dir, uint8_t *buf, size_t cap,
		       size_t *len_out, struct baton_relay_err *err);

/* The len bytes at s with every byte outside printable ASCII as \xNN,
 * NUL-terminated in out (cap bytes, truncated with "..."); returns out. */
const char *baton_relay_escape(const char *s, size_t len, char *out,
			       size_t cap);

#endif /* BATON_RELAY_PROTOCOL_H */
