/*
 * What client.c (connections: accept, read, parse, run, close) and
 * client_reply.c (reply slots, their writes, the output limits) share:
 * the connection and its queue of reply slots.
 */
#ifndef BATON_SERVER_CLIENT_INTERNAL_H
#define BATON_SERVER_CLIENT_INTERNAL_H

#include "server.h"

#define CLIENT_LINGER_MS 1000u
/* A hung-up client whose last replies make no progress for this long (it
 * reads nothing) is closed without waiting for them. */
#define CLIENT_HANGUP_STALL_MS 10000u
/* Room for "255.255.255.255:65535". */
#define CLIENT_ADDR_MAX 32u
/* Finished slots are kept for the next commands, with their reply buffer
 * if it is this small: a pipeline allocates nothing per command. */
#define CLIENT_SPARE_SLOTS_MAX 1024u
#define CLIENT_SLOT_KEEP_BYTES 2048u
/* Replies finished since the last write that are sent at once rather than
 * at the turn's end: the output limits see big replies as they come. */
#define CLIENT_WRITE_EARLY_BYTES (128u * 1024u)
/* Replies handed to one writev (IOV_MAX is 1024). */
#define CLIENT_WRITE_IOVS 64u

struct slot {
	struct client *c;
	struct baton_buf buf;
	enum command_order order;
	enum command_resp3 resp3; /* how the reply is sent in RESP3 */
	/* EXEC in RESP3: which of its replies become maps (HGETALL's), or
	 * NULL; owned, freed once the reply is rewritten. */
	bool *resp3_maps;
	uint32_t n_resp3_maps;
	bool done;
	/* --metrics: the command's counter (-1: none); its arrival time;
	 * whether it is a key-value command (stats.kv_latency). */
	int metrics_slot;
	uint64_t started_ns;
	bool kv_command;
	struct slot *next;
};

struct client {
	struct server *s;
	uv_tcp_t tcp;
	uv_shutdown_t shutdown;
	char addr[CLIENT_ADDR_MAX]; /* the peer, for logs */
	struct resp_parser parser;
	struct client_state st;
	struct slot *head, *tail;
	uint32_t in_flight; /* slots not yet done */
	uint32_t reads_in_flight, writes_in_flight;
	uint32_t alone_in_flight; /* ORDER_READ_ALONE, also in reads */
	/* A parsed command waiting for its turn (see the top); its argv
	 * points into the parser, which is left alone meanwhile. */
	bool has_waiting;
	struct resp_command waiting;
	bool processing; /* in process(): a nested call returns */
	bool reading;
	/* Reply, then close: QUIT, a protocol error, a refusal. */
	bool hangup;
	bool fin_queued;	  /* uv_shutdown called */
	bool shut;		  /* the FIN was sent; draining input */
	uint64_t linger_until_ms; /* once shut */
	uint64_t last_active_ms;  /* input read or output written */
	size_t output_queued;
	bool closing;
	bool handle_closed;
	struct client *prev, *next;
	/* In s->client_io.due: replies finished, written at the turn's end. */
	bool due;
	struct client *due_prev, *due_next;
	size_t finished_bytes; /* replies finished since the last flush() */
};

struct client_write {
	uv_write_t req;
	struct client *c;
	struct baton_buf buf;
};

/* client.c */
void client_close(struct client *c);
/* Frees a closed client once its last command in flight completed. */
void client_maybe_free(struct client *c);
/* Every reply is written: the FIN, then drain what the client sends. */
void client_hang_up(struct client *c);
/* Run what was read, as far as the order rules let it. */
void client_process(struct client *c);

/* client_reply.c */
struct slot *client_slot_new(struct client *c, enum command_order order);
void client_slot_free(struct slot *sl);
/* Take c off the list of clients whose replies leave at the turn's end. */
void client_due_remove(struct client *c);

#endif
