/* The golden frames' values (golden_frames.h). */
#include "golden_frames.h"

#include <stdint.h>
#include <stdio.h>

/* Two clusters, as in a migration: "old" (release 1.3.0) and "new"
 * (2.0.0); node 2 of "old" is registered but disconnected. */
#define INC_OLD_1 0x1122334455667788ull
#define INC_OLD_2 0x2233445566778899ull
#define INC_NEW_1 0x0123456789abcdefull
#define RELAY_INC 0x0102030405060708ull

static const uint8_t hello_ext_area[] = {
	0x01, 0x00, 0x03, 0x00, 'a', 'b', 'c', /* tag 1, 3 bytes */
	0x02, 0x00, 0x00, 0x00,		       /* tag 2, empty */
};
/* HELLO_PROOF (docs/relay-protocol.md "Allocated tags") for HELLO_OLD_1
 * with the relay secret 0x00 0x01 ... 0x1f (32 bytes), nonce 0xa0 ...
 * 0xaf and timestamp 1767225600000 ms (2026-01-01T00:00:00Z). The MAC was
 * computed apart from the C code, with Python's hmac, from the document;
 * tests/relay/test_proof.c checks that relay_auth.c gives the same. */
static const uint8_t hello_proof_area[] = {
	0x00, 0x01, 0x38, 0x00, /* tag 0x0100, 56 bytes */
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, /* nonce */
	0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, /* */
	0x00, 0xa8, 0xda, 0x76, 0x9b, 0x01, 0x00, 0x00, /* timestamp */
	0x03, 0x34, 0x78, 0xb5, 0x11, 0xef, 0xe5, 0xe4, /* MAC */
	0xcc, 0x67, 0xd8, 0x03, 0x12, 0xd2, 0xe4, 0x2e, /* */
	0x76, 0x9d, 0xf1, 0xd9, 0xf1, 0xfb, 0x53, 0xb0, /* */
	0xbf, 0x19, 0xb3, 0x32, 0xbb, 0x3a, 0xb3, 0xcb, /* */
};
static const uint8_t node_ext_area[] = {0x10, 0x00, 0x01, 0x00, 'x'};

static const struct baton_relay_node view_nodes[] = {
	{RELAY_STR_INIT("new"),
	 1,
	 INC_NEW_1,
	 {2, 0, 0},
	 RELAY_STR_INIT("10.0.1.1:7001"),
	 true,
	 {NULL, 0}},
	{RELAY_STR_INIT("old"),
	 1,
	 INC_OLD_1,
	 {1, 3, 0},
	 RELAY_STR_INIT("10.0.0.1:7001"),
	 true,
	 {NULL, 0}},
	{RELAY_STR_INIT("old"),
	 2,
	 INC_OLD_2,
	 {1, 3, 0},
	 RELAY_STR_INIT("10.0.0.2:7001"),
	 false,
	 {node_ext_area, sizeof node_ext_area}},
};

static const struct baton_relay_node_status status_nodes[] = {
	{RELAY_STR_INIT("new"),
	 1,
	 INC_NEW_1,
	 true,
	 3,
	 4096,
	 10,
	 990,
	 {NULL, 0}},
	{RELAY_STR_INIT("old"), 1, INC_OLD_1, true, 0, 0, 990, 10, {NULL, 0}},
};

static const uint8_t export_payload[] = "export 1..9";
static const uint8_t authority_payload[] = "authority: new from 1234";

#define HELLO_OLD_1                                                            \
	{                                                                      \
		RELAY_STR_INIT("old"), 1, INC_OLD_1, {1, 3, 0},                \
			RELAY_STR_INIT("10.0.0.1:7001")                        \
	}

static const struct golden_frame frames[] = {
	{"hello",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_HELLO, .u.hello = HELLO_OLD_1}},
	{"hello_ext",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_HELLO,
	  .u.hello = HELLO_OLD_1,
	  .ext = {hello_ext_area, sizeof hello_ext_area}}},
	{"hello_proof",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_HELLO,
	  .u.hello = HELLO_OLD_1,
	  .ext = {hello_proof_area, sizeof hello_proof_area}}},
	{"welcome",
	 BATON_RELAY_TO_NODE,
	 {.type = BATON_RELAY_WELCOME,
	  .u.welcome = {BATON_RELAY_OK, RELAY_INC, RELAY_STR_INIT("")}}},
	{"welcome_refused",
	 BATON_RELAY_TO_NODE,
	 {.type = BATON_RELAY_WELCOME,
	  .u.welcome = {BATON_RELAY_EVIEW_FULL, RELAY_INC,
			RELAY_STR_INIT(
				"the view holds 256 nodes, the most it may")}}},
	{"view",
	 BATON_RELAY_TO_NODE,
	 {.type = BATON_RELAY_VIEW, .u.view = {7, 3, view_nodes, {NULL, 0}}}},
	{"leave",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_LEAVE, .u.leave = {RELAY_STR_INIT("drained")}}},
	{"data",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_DATA,
	  .u.data = {BATON_RELAY_UNICAST,
		     {RELAY_STR_INIT("new"), 1, INC_NEW_1},
		     42,
		     40,
		     0,
		     export_payload,
		     sizeof export_payload - 1}}},
	{"data_from_relay",
	 BATON_RELAY_TO_NODE,
	 {.type = BATON_RELAY_DATA,
	  .u.data = {BATON_RELAY_UNICAST,
		     {RELAY_STR_INIT("old"), 1, INC_OLD_1},
		     42,
		     40,
		     0,
		     export_payload,
		     sizeof export_payload - 1}}},
	{"data_multicast",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_DATA,
	  .u.data = {BATON_RELAY_MULTICAST,
		     {RELAY_STR_INIT("old"), 0, 0},
		     5,
		     5,
		     0,
		     authority_payload,
		     sizeof authority_payload - 1}}},
	{"ack",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_ACK,
	  .u.ack = {BATON_RELAY_UNICAST,
		    {RELAY_STR_INIT("old"), 1, INC_OLD_1},
		    42}}},
	{"activate", BATON_RELAY_TO_NODE, {.type = BATON_RELAY_ACTIVATE}},
	{"deactivate", BATON_RELAY_TO_NODE, {.type = BATON_RELAY_DEACTIVATE}},
	{"status", BATON_RELAY_TO_RELAY, {.type = BATON_RELAY_STATUS}},
	{"status_reply",
	 BATON_RELAY_TO_NODE,
	 {.type = BATON_RELAY_STATUS_REPLY,
	  .u.status_reply = {RELAY_INC,
			     7,
			     true,
			     1000,
			     65536,
			     2,
			     2,
			     status_nodes,
			     {NULL, 0}}}},
	{"ping",
	 BATON_RELAY_TO_RELAY,
	 {.type = BATON_RELAY_PING, .u.ping_token = 0xfeedfacecafebeefull}},
	{"pong",
	 BATON_RELAY_TO_NODE,
	 {.type = BATON_RELAY_PONG, .u.ping_token = 0xfeedfacecafebeefull}},
	{"error",
	 BATON_RELAY_TO_NODE,
	 {.type = BATON_RELAY_ERROR,
	  .u.error = {BATON_RELAY_EBAD_MAGIC, 0,
		      RELAY_STR_INIT("byte 0 is 0x2a, the magic has 0xba "
				     "there: not a baton-relay peer")}}},
};

const struct golden_frame *golden_frames(size_t *n_out)
{
	*n_out = sizeof frames / sizeof frames[0];
	return frames;
}

size_t golden_read(const char *dir, const char *name, uint8_t *buf, size_t cap)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.bin", dir, name);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return SIZE_MAX;
	size_t n = fread(buf, 1, cap, f);
	bool whole = feof(f) || fgetc(f) == EOF;
	fclose(f);
	return whole ? n : SIZE_MAX;
}
