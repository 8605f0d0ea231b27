/*
 * batonctl relay status|activate|deactivate: the operator's command for
 * baton-relay (docs/relay-server.md "Activation"). It speaks the relay's
 * frozen protocol (docs/relay-protocol.md) as a monitor: a STATUS, answered
 * by STATUS_REPLY. Activate and deactivate add an ADMIN_REQUEST extension
 * entry to a second STATUS, proven with the relay's admin secret and bound
 * to the relay incarnation the first reply named; the relay answers with
 * an ADMIN_RESULT entry. A relay that predates them answers the STATUS
 * without one, which this reports.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "address.h"
#include "baton/assert.h"
#include "ctl.h"
#include "protocol.h"
#include "relay_auth.h"

/* The largest frame a relay answers a monitor with (a STATUS_REPLY). */
#define RELAY_REPLY_MAX (BATON_RELAY_HEADER_LEN + BATON_RELAY_LIST_BODY_MAX)

const struct ctl_option ctl_relay_options[] = {
	{"relay", "HOST:PORT"},
	{"secret-file", "FILE"},
	{"cluster", "NAME"},
	{"migrate-to", "NAME"},
	{"migration-secret-file", "PATH"},
	{"relay-secret-file", "PATH"},
	{NULL, NULL},
};

struct relay_link {
	int fd;
	int timeout_ms;
	const char *addr;
	uint8_t *buf; /* RELAY_REPLY_MAX bytes: the last frame read */
};

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int link_open(struct relay_link *l, const char *addr, int timeout_ms)
{
	struct sockaddr_storage sa;
	char why[BATON_ADDR_WHY_MAX];
	l->fd = -1;
	l->addr = addr;
	l->timeout_ms = timeout_ms;
	l->buf = malloc(RELAY_REPLY_MAX);
	if (l->buf == NULL) {
		ctl_error("relay %s: out of memory", addr);
		return -1;
	}
	if (baton_addr_resolve(addr, &sa, why, sizeof why) != 0) {
		ctl_error("relay %s: %s", addr, why);
		return -1;
	}
	l->fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {.tv_sec = timeout_ms / 1000,
			     .tv_usec = (timeout_ms % 1000) * 1000};
	if (l->fd < 0 ||
	    setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
	    setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
	    connect(l->fd, (struct sockaddr *)&sa,
		    sa.ss_family == AF_INET6
			    ? sizeof(struct sockaddr_in6)
			    : sizeof(struct sockaddr_in)) != 0) {
		ctl_error("relay %s: cannot connect: %s", addr,
			  strerror(errno));
		return -1;
	}
	return 0;
}

static void link_close(struct relay_link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	free(l->buf);
	l->fd = -1;
	l->buf = NULL;
}

/* A STATUS carrying the extension area ext (len 0: none). */
static int send_status(struct relay_link *l, const uint8_t *ext, size_t len)
{
	struct baton_relay_frame f = {.type = BATON_RELAY_STATUS};
	f.ext.ptr = ext;
	f.ext.len = (uint32_t)len;
	uint8_t out[BATON_RELAY_HEADER_LEN + 256];
	size_t n = 0;
	struct baton_relay_err err = {0};
	if (baton_relay_encode(&f, BATON_RELAY_TO_RELAY, out, sizeof out, &n,
			       &err) != 0) {
		ctl_error("relay %s: cannot encode STATUS: %s", l->addr,
			  err.text);
		return -1;
	}
	for (size_t off = 0; off < n;) {
		ssize_t w = send(l->fd, out + off, n - off, MSG_NOSIGNAL);
		if (w <= 0) {
			ctl_error("relay %s: write failed: %s", l->addr,
				  w < 0 ? strerror(errno) : "closed");
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}

/* Read one frame into l->buf and decode it into *f; PINGs are skipped (a
 * monitor that is slow may get one). 0 or -1 after reporting. */
static int read_frame(struct relay_link *l, struct baton_relay_frame *f)
{
	for (;;) {
		size_t have = 0, frame_len = 0, need = BATON_RELAY_HEADER_LEN;
		struct baton_relay_err err = {0};
		int rc;
		while ((rc = baton_relay_split(l->buf, have,
					       BATON_RELAY_TO_NODE, &frame_len,
					       &need, &err)) == BATON_EAGAIN) {
			BATON_ASSERT(have + need <= RELAY_REPLY_MAX);
			ssize_t r = recv(l->fd, l->buf + have, need, 0);
			if (r <= 0) {
				ctl_error("relay %s: %s", l->addr,
					  r == 0 ? "closed the connection"
					  : errno == EAGAIN
						  ? "no answer in time "
						    "(--timeout-ms)"
						  : strerror(errno));
				return -1;
			}
			have += (size_t)r;
		}
		if (rc == 0)
			rc = baton_relay_decode(l->buf, frame_len,
						BATON_RELAY_TO_NODE, f, &err);
		if (rc != 0) {
			ctl_error("relay %s: a malformed frame: %s (%s): is "
				  "it a baton-relay?",
				  l->addr, err.text,
				  baton_relay_code_name(err.code));
			return -1;
		}
		if (f->type == BATON_RELAY_ERROR) {
			ctl_error("relay %s: ERROR %s: %.*s", l->addr,
				  baton_relay_code_name(f->u.error.code),
				  (int)f->u.error.text.len,
				  f->u.error.text.ptr);
			return -1;
		}
		if (f->type == BATON_RELAY_STATUS_REPLY)
			return 0;
		if (f->type != BATON_RELAY_PING) {
			ctl_error("relay %s: answered %s to STATUS", l->addr,
				  baton_relay_type_name((uint16_t)f->type));
			return -1;
		}
	}
}

static void print_status(const char *addr, const struct baton_relay_frame *f)
{
	const struct baton_relay_status_reply *r = &f->u.status_reply;
	printf("relay %s: %s, view %" PRIu64 ", incarnation %" PRIu64 "\n",
	       addr, r->active ? "active" : "inactive", r->view_number,
	       r->relay_incarnation);
	printf("messages relayed %" PRIu64 " (%" PRIu64
	       " bytes), dropped %" PRIu64 ", %u nodes\n",
	       r->messages_relayed, r->bytes_relayed, r->messages_dropped,
	       r->node_count);
	if (r->node_count == 0)
		return;
	static const char *const head[] = {
		"cluster",     "node", "connected", "queue_msgs",
		"queue_bytes", "in",   "out"};
	struct ctl_table t;
	ctl_table_init(&t, 7, head);
	struct baton_relay_list rest = r->records;
	struct baton_relay_node_status n;
	while (baton_relay_status_next(&rest, &n) && ctl_table_row(&t)) {
		char id[CTL_CELL_MAX];
		baton_relay_escape(n.cluster_id.ptr, n.cluster_id.len, id,
				   sizeof id);
		ctl_table_set(&t, 0, "%s", id);
		ctl_table_set(&t, 1, "%" PRIu64, n.node_id);
		ctl_table_set(&t, 2, "%s", n.connected ? "yes" : "no");
		ctl_table_set(&t, 3, "%u", n.queue_messages);
		ctl_table_set(&t, 4, "%" PRIu64, n.queue_bytes);
		ctl_table_set(&t, 5, "%" PRIu64, n.messages_in);
		ctl_table_set(&t, 6, "%" PRIu64, n.messages_out);
	}
	ctl_table_print(&t);
}

/* The request, sent on l after a first STATUS_REPLY (f) named the relay's
 * incarnation; the result reported. */
static int admin(struct relay_link *l, const char *secret_file, uint8_t op,
		 struct baton_relay_frame *f)
{
	struct baton_peer_secret secret;
	char err[1536];
	if (relay_secret_load(secret_file, &secret, err, sizeof err) != 0) {
		ctl_error("--secret-file: %s", err);
		return CTL_EXIT_ERROR;
	}
	uint8_t key[RELAY_AUTH_KEY_LEN];
	relay_admin_key(&secret, key);
	baton_peer_secret_wipe(&secret);
	struct baton_relay_admin_request req;
	uint8_t entry[BATON_RELAY_ADMIN_ENTRY_LEN];
	if (relay_admin_prove(key, op, f->u.status_reply.relay_incarnation,
			      wall_ms(), &req) != 0) {
		ctl_error("no random bytes for the request's nonce");
		return CTL_EXIT_ERROR;
	}
	memset(key, 0, sizeof key);
	size_t n = baton_relay_admin_put(&req, entry);
	if (send_status(l, entry, n) != 0 || read_frame(l, f) != 0)
		return CTL_EXIT_ERROR;
	struct baton_relay_admin_result res;
	struct baton_relay_err e = {0};
	if (baton_relay_admin_result_get(&f->ext, &res, &e) != 0) {
		ctl_error("relay %s: %s", l->addr, e.text);
		return CTL_EXIT_ERROR;
	}
	if (!res.present) {
		ctl_error("relay %s: it does not take admin requests (a "
			  "release before them): use kill -USR1 (activate) "
			  "or -USR2 (deactivate) on its host",
			  l->addr);
		return CTL_EXIT_ERROR;
	}
	char text[BATON_RELAY_TEXT_MAX + 1];
	baton_relay_escape(res.text.ptr, res.text.len, text, sizeof text);
	if (res.code != 0) {
		ctl_error("relay %s: %s refused: %s", l->addr,
			  op == BATON_RELAY_ADMIN_ACTIVATE ? "activate"
							   : "deactivate",
			  text);
		return CTL_EXIT_ERROR;
	}
	printf("relay %s: %s\n", l->addr, text);
	return CTL_EXIT_OK;
}

/* batonctl relay attach: BATON.MIGRATION ATTACH to the node of -h/-p. The
 * secrets go as paths on the node's host, never as bytes. */
static int attach(const struct ctl_opts *o, const struct ctl_args *a,
		  const char *relay)
{
	const char *cluster = ctl_args_value(a, "cluster");
	const char *to = ctl_args_value(a, "migrate-to");
	const char *msf = ctl_args_value(a, "migration-secret-file");
	const char *rsf = ctl_args_value(a, "relay-secret-file");
	if (cluster == NULL || to == NULL || msf == NULL)
		return ctl_usage_error(
			"relay attach: --cluster NAME, --migrate-to NAME and "
			"--migration-secret-file PATH are required");
	if (msf[0] != '/' || (rsf != NULL && rsf[0] != '/'))
		return ctl_usage_error(
			"relay attach: the secret files are read by the node "
			"on its host: give absolute paths");
	const char *argv[7] = {
		"BATON.MIGRATION", "ATTACH", relay, cluster, to, msf, rsf};
	char addr[CTL_ADDR_MAX], err[CTL_ERR_MAX];
	ctl_opts_addr(o, addr, sizeof addr);
	redisReply *r =
		ctl_ask(o, addr, rsf != NULL ? 7 : 6, argv, err, sizeof err);
	if (r == NULL) {
		ctl_error("node %s: attach refused: %s", addr, err);
		return CTL_EXIT_ERROR;
	}
	freeReplyObject(r);
	printf("node %s: attached to relay %s as a node of cluster %s, "
	       "exporting to cluster %s (until it restarts: add the flags to "
	       "its start)\n",
	       addr, relay, cluster, to);
	return CTL_EXIT_OK;
}

int ctl_cmd_relay(const struct ctl_opts *o, const struct ctl_args *a)
{
	const char *what = a->positional[0];
	const char *addr = ctl_args_value(a, "relay");
	const char *secret_file = ctl_args_value(a, "secret-file");
	uint8_t op = 0;
	if (strcmp(what, "activate") == 0)
		op = BATON_RELAY_ADMIN_ACTIVATE;
	else if (strcmp(what, "deactivate") == 0)
		op = BATON_RELAY_ADMIN_DEACTIVATE;
	else if (strcmp(what, "status") != 0 && strcmp(what, "attach") != 0)
		return ctl_usage_error("relay: expected status, activate, "
				       "deactivate or attach, got '%s'",
				       what);
	if (addr == NULL || addr[0] == '\0')
		return ctl_usage_error("relay: --relay HOST:PORT is required");
	if (strcmp(what, "attach") == 0)
		return attach(o, a, addr);
	if (op != 0 && secret_file == NULL)
		return ctl_usage_error("relay %s: --secret-file FILE (the "
				       "relay's --admin-secret-file) is "
				       "required",
				       what);
	struct relay_link l;
	int rv = CTL_EXIT_ERROR;
	struct baton_relay_frame f;
	if (link_open(&l, addr, o->timeout_ms) == 0 &&
	    send_status(&l, NULL, 0) == 0 && read_frame(&l, &f) == 0) {
		if (op == 0) {
			print_status(addr, &f);
			rv = CTL_EXIT_OK;
		} else {
			rv = admin(&l, secret_file, op, &f);
		}
	}
	link_close(&l);
	return rv;
}
