/*
 * What a proxied client's upstream (proxy.c) is told before any command:
 * during a migration, BATON.MIGRATION.PROVE first, whose answer must prove
 * the migration secret at the address dialled (docs/relay.md,
 * "Proxying"), so that a stranger registered at the relay under the other
 * cluster's name never gets the password; then AUTH with this node's
 * --password if one is set, and BATON.PROXIED. Their replies are awaited
 * before any command is written, so a refusal here has sent nothing.
 */
#include <stdio.h>
#include <string.h>

#include "baton/assert.h"
#include "log.h"
#include "proxy_internal.h"

/* AUTH with this node's password (if it has one), then BATON.PROXIED;
 * their replies are awaited before any command is written. 0 or a libuv
 * error. */
static int send_hello(struct upstream *up)
{
	struct baton_buf hello;
	baton_buf_init(&hello);
	const char *pw = up->s->cfg.password;
	int rv = 0;
	up->auth_sent = pw[0] != '\0';
	up->handshake_left = up->auth_sent ? 2 : 1;
	if (up->auth_sent &&
	    (resp_array(&hello, 2) != 0 || resp_bulk(&hello, "AUTH", 4) != 0 ||
	     resp_bulk(&hello, pw, strlen(pw)) != 0))
		rv = UV_ENOMEM;
	if (rv == 0 && (resp_array(&hello, 1) != 0 ||
			resp_bulk(&hello, "BATON.PROXIED", 13) != 0))
		rv = UV_ENOMEM;
	if (rv == 0)
		rv = proxy__upstream_write(up, &hello);
	baton_buf_free(&hello);
	if (rv == 0)
		up->state = UP_HANDSHAKE;
	return rv;
}

/* Ask the node to prove it holds the migration secret before it gets a
 * password (docs/relay.md, "Proxying"): anyone may register at the relay
 * under the other cluster's name with an address of their own. 0, a
 * libuv error, or UV_EPERM with why when no proof can be asked. */
static int send_prove(struct upstream *up, char *why, size_t cap)
{
	struct baton_buf b;
	baton_buf_init(&b);
	int rv = migration_proof_request(up->s, up->addr, &b, up->expect, why,
					 cap) == 0
			 ? proxy__upstream_write(up, &b)
			 : UV_EPERM;
	baton_buf_free(&b);
	if (rv == 0) {
		up->state = UP_PROVE;
		up->handshake_left = 1;
	}
	return rv;
}

/* A handshake reply: AUTH's must be +OK; BATON.PROXIED's +OK, or "unknown
 * command" from an older node (which never proxies). False, with what
 * went wrong in why, if refused. */
static bool handshake_accepted(struct upstream *up, const uint8_t *r, size_t n,
			       char *why, size_t cap)
{
	bool auth = up->auth_sent && up->handshake_left == 2;
	bool ok = n == 5 && memcmp(r, "+OK\r\n", 5) == 0;
	static const char unknown[] = "-ERR unknown command";
	if (!auth && !ok && n >= sizeof unknown - 1 &&
	    memcmp(r, unknown, sizeof unknown - 1) == 0)
		ok = true;
	if (!ok) {
		size_t shown = n > 2 ? n - 2 : 0; /* without the CRLF */
		snprintf(why, cap, "it answered %s with '%.*s'",
			 auth ? "AUTH" : "BATON.PROXIED",
			 (int)(shown < 200 ? shown : 200), (const char *)r);
	}
	return ok;
}

int proxy__greeting_start(struct upstream *up, char *why, size_t cap)
{
	return migration_proxy_needs_proof(up->s) ? send_prove(up, why, cap)
						  : send_hello(up);
}

bool proxy__greeting_reply(struct upstream *up, const uint8_t *r, size_t n,
			   char *why, size_t cap)
{
	if (up->state == UP_PROVE) {
		if (!migration_proof_check(up->expect, r, n, why, cap)) {
			LOG_WARN_LIMITED("proxy: the node at %s: %s", up->addr,
					 why);
			return false;
		}
		int rv = send_hello(up);
		if (rv != 0)
			snprintf(why, cap, "%s", uv_strerror(rv));
		return rv == 0;
	}
	BATON_ASSERT(up->state == UP_HANDSHAKE);
	if (!handshake_accepted(up, r, n, why, cap))
		return false;
	BATON_ASSERT(up->handshake_left > 0);
	if (--up->handshake_left == 0)
		up->state = UP_OPEN; /* the caller pumps */
	return true;
}
