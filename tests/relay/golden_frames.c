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
