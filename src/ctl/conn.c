/* One hiredis connection to one node (see ctl.h). */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "ctl.h"

int ctl_split_addr(const char *addr, char *host, size_t host_len, int *port)
{
	assert(addr != NULL && host != NULL && host_len > 0);
	struct baton_addr a;
	if (baton_addr_parse(addr, &a, NULL, 0) != 0 ||
	    strlen(a.host) >= host_len)
		return -1;
	snprintf(host, host_len, "%s", a.host); /* IPv6 without brackets */
	*port = a.port;
	return 0;
}

static struct timeval timeout_tv(int timeout_ms)
{
	assert(timeout_ms > 0);
	struct timeval tv;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	return tv;
}

/* Describe a failed context: hiredis' errstr is often empty for timeouts. */
static void context_error(struct ctl_conn *c, const char *what)
{
	const char *why = "out of memory";
	if (c->ctx != NULL)
		why = c->ctx->errstr[0] != '\0' ? c->ctx->errstr
						: "connection error";
	if (c->ctx != NULL && c->ctx->err == REDIS_ERR_IO &&
	    (strstr(why, "temporarily unavailable") != NULL ||
	     strstr(why, "timed out") != NULL))
		why = "timed out";
	snprintf(c->err, sizeof c->err, "%s: %s", what, why);
}

int ctl_conn_open(struct ctl_conn *c, const struct ctl_opts *o,
		  const char *addr)
{
	char host[CTL_ADDR_MAX];
	int port;
	memset(c, 0, sizeof *c);
	snprintf(c->addr, sizeof c->addr, "%s", addr);
	if (ctl_split_addr(addr, host, sizeof host, &port) != 0) {
		char why[BATON_ADDR_WHY_MAX];
		baton_addr_parse(addr, &(struct baton_addr){0}, why,
				 sizeof why);
		snprintf(c->err, sizeof c->err, "%s", why);
		return -1;
	}
	struct timeval tv = timeout_tv(o->timeout_ms);
	c->ctx = redisConnectWithTimeout(host, port, tv);
	if (c->ctx == NULL || c->ctx->err != 0) {
		context_error(c, "cannot connect");
		return -1;
	}
	struct timeval reply_tv =
		!o->timeout_given && o->reply_timeout_ms > o->timeout_ms
			? timeout_tv(o->reply_timeout_ms)
			: tv;
	if (redisSetTimeout(c->ctx, reply_tv) != REDIS_OK) {
		context_error(c, "cannot set the timeout");
		return -1;
	}
	if (o->password == NULL)
		return 0;
	const char *argv[] = {"AUTH", o->password};
	redisReply *r = ctl_conn_call(c, 2, argv);
	if (r == NULL)
		return -1;
	int rv = 0;
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(c->err, sizeof c->err, "AUTH failed: %s", r->str);
		rv = -1;
	}
	freeReplyObject(r);
	return rv;
}

redisReply *ctl_conn_call(struct ctl_conn *c, int argc, const char **argv)
{
	assert(argc > 0 && argc <= 8);
	if (c->ctx == NULL) {
		snprintf(c->err, sizeof c->err, "not connected");
		return NULL;
	}
	size_t lens[8];
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	redisReply *r = redisCommandArgv(c->ctx, argc, argv, lens);
	if (r == NULL) {
		context_error(c, argv[0]);
		return NULL;
	}
	return r;
}

redisReply *ctl_ask(const struct ctl_opts *o, const char *addr, int argc,
		    const char **argv, char *err, size_t err_len)
{
	struct ctl_conn c;
	redisReply *r = NULL;
	if (ctl_conn_open(&c, o, addr) == 0)
		r = ctl_conn_call(&c, argc, argv);
	if (r == NULL) {
		snprintf(err, err_len, "%s", c.err);
	} else if (r->type == REDIS_REPLY_ERROR) {
		snprintf(err, err_len, "%s: %s", argv[0], r->str);
		freeReplyObject(r);
		r = NULL;
	}
	ctl_conn_close(&c);
	return r;
}

redisReply *ctl_ask_cmd(const struct ctl_opts *o, const char *addr,
			const char *cmd, char *err, size_t err_len)
{
	const char *argv[] = {cmd};
	return ctl_ask(o, addr, 1, argv, err, err_len);
}

void ctl_conn_close(struct ctl_conn *c)
{
	if (c->ctx != NULL)
		redisFree(c->ctx);
	c->ctx = NULL;
}

#define NOTLEADER_PREFIX "NOTLEADER "

/* The leader's client address from a NOTLEADER error, into `addr`. Returns
 * true if the reply is one and names a usable address. */
static bool notleader_addr(const redisReply *r, char *addr, size_t len)
{
	if (r->type != REDIS_REPLY_ERROR ||
	    strncmp(r->str, NOTLEADER_PREFIX, strlen(NOTLEADER_PREFIX)) != 0)
		return false;
	const char *at = strstr(r->str, " at ");
	if (at == NULL)
		return false;
	at += strlen(" at ");
	char host[CTL_ADDR_MAX];
	int port;
	if (ctl_split_addr(at, host, sizeof host, &port) != 0)
		return false;
	snprintf(addr, len, "%s", at);
	return true;
}

redisReply *ctl_call_leader(const struct ctl_opts *o, int argc,
			    const char **argv, char *addr, size_t addr_len)
{
	ctl_opts_addr(o, addr, addr_len);
	for (int attempt = 0;; attempt++) {
		struct ctl_conn c;
		redisReply *r = NULL;
		if (ctl_conn_open(&c, o, addr) == 0)
			r = ctl_conn_call(&c, argc, argv);
		if (r == NULL)
			ctl_error("node %s: %s", addr, c.err);
		ctl_conn_close(&c);
		char next[CTL_ADDR_MAX];
		if (r == NULL || attempt > 0 ||
		    !notleader_addr(r, next, sizeof next))
			return r;
		freeReplyObject(r);
		snprintf(addr, addr_len, "%s", next);
	}
}
