/*
 * What src/server/proxy.c (the upstream connections and their commands)
 * and proxy_greeting.c (what an upstream is told before any command)
 * share. Internal to the proxy.
 */
#ifndef BATON_SERVER_PROXY_INTERNAL_H
#define BATON_SERVER_PROXY_INTERNAL_H

#include <uv.h>

#include "address_uv.h"
#include "server.h"

struct proxy_cmd {
	struct slot *sl;
	char addr[BATON_ADDR_MAX];
	struct baton_buf request; /* the command in RESP; kept for a resend */
	bool read;		  /* a read: may be resent once */
	bool resent;
	uint64_t deadline_ms; /* once written: its reply is due */
	struct proxy_cmd *next;
};

struct cmd_queue {
	struct proxy_cmd *head, *tail;
	uint32_t n;
};

enum upstream_state {
	UP_CONNECTING,
	UP_PROVE,     /* BATON.MIGRATION.PROVE sent, its reply awaited */
	UP_HANDSHAKE, /* AUTH and BATON.PROXIED sent, replies awaited */
	UP_OPEN,
	UP_CLOSED,
};

struct upstream {
	struct server *s;
	struct proxy_client *pc; /* NULL once the client is gone */
	char addr[BATON_ADDR_MAX];
	enum upstream_state state;
	uv_tcp_t tcp;
	struct baton_addr_connect *connecting; /* resolving or connecting */
	uv_timer_t timer;
	int handles_open;		 /* freed when both are closed */
	uint64_t open_deadline_ms;	 /* connected and handshaken by then */
	uint32_t handshake_left;	 /* replies to AUTH, BATON.PROXIED */
	uint8_t expect[MIG_PROOF_BYTES]; /* UP_PROVE: the right proof */
	bool auth_sent;
	struct cmd_queue sent; /* written; their replies come in order */
	struct baton_buf in;   /* read; [0, in_start) passed on */
	size_t in_start;
	struct resp_reply_scanner scanner;
};

struct proxy_client {
	struct server *s;
	struct upstream *up;	  /* NULL: none open */
	struct cmd_queue waiting; /* not written yet, in order */
};

/* Write buf's bytes (taken over) to the upstream. 0, or a libuv error. */
int proxy__upstream_write(struct upstream *up, struct baton_buf *buf);

/* The greeting of a connected upstream: during a migration the proof of
 * the migration secret first, then AUTH (with a password) and
 * BATON.PROXIED. 0, a libuv error, or UV_EPERM with why when no proof
 * can be asked. */
int proxy__greeting_start(struct upstream *up, char *why, size_t cap);

/* A reply of n bytes at r to the greeting (the state UP_PROVE or
 * UP_HANDSHAKE): true, the greeting goes on (UP_OPEN once done); false,
 * with why, when the node is not to be used. */
bool proxy__greeting_reply(struct upstream *up, const uint8_t *r, size_t n,
			   char *why, size_t cap);

#endif /* BATON_SERVER_PROXY_INTERNAL_H */
