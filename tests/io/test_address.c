/* The address parser (src/util/address.c): every form it takes, every
 * refusal with its sentence, and the printer. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "address.h"
#include "address_uv.h"
#include "baton/errors.h"

static struct baton_addr parsed(const char *text)
{
	struct baton_addr a;
	char why[BATON_ADDR_WHY_MAX] = "";
	int rv = baton_addr_parse(text, &a, why, sizeof why);
	cr_assert_eq(rv, 0, "'%s' refused: %s", text, why);
	return a;
}

/* Refused, with a sentence that contains want. */
static void refused(const char *text, const char *want)
{
	struct baton_addr a;
	char why[BATON_ADDR_WHY_MAX] = "";
	cr_assert_eq(baton_addr_parse(text, &a, why, sizeof why), BATON_EINVAL,
		     "'%s' accepted", text);
	cr_assert(strstr(why, want) != NULL, "'%s': '%s' lacks '%s'", text, why,
		  want);
}

Test(address, ipv4_number)
{
	struct baton_addr a = parsed("127.0.0.1:7001");
	cr_assert_str_eq(a.host, "127.0.0.1");
	cr_assert_eq(a.port, 7001);
	cr_assert_eq(a.family, AF_INET);
	struct sockaddr_storage ss;
	cr_assert_eq(baton_addr_numeric(&a, &ss), 0);
	cr_assert_eq(ss.ss_family, AF_INET);
	char text[64];
	baton_sockaddr_text((struct sockaddr *)&ss, text, sizeof text);
	cr_assert_str_eq(text, "127.0.0.1:7001");
}

Test(address, ipv6_number_in_brackets)
{
	struct baton_addr a = parsed("[::1]:7001");
	cr_assert_str_eq(a.host, "::1");
	cr_assert_eq(a.port, 7001);
	cr_assert_eq(a.family, AF_INET6);
	struct sockaddr_storage ss;
	cr_assert_eq(baton_addr_numeric(&a, &ss), 0);
	cr_assert_eq(ss.ss_family, AF_INET6);
	char text[64];
	baton_sockaddr_text((struct sockaddr *)&ss, text, sizeof text);
	cr_assert_str_eq(text, "[::1]:7001");
	a = parsed("[2001:db8::5:1]:65535");
	cr_assert_eq(a.port, 65535);
	cr_assert_str_eq(a.host, "2001:db8::5:1");
	a = parsed("[::ffff:10.0.0.1]:1");
	cr_assert_eq(a.family, AF_INET6);
	a = parsed("[::]:9000");
	cr_assert_str_eq(a.host, "::");
}

Test(address, host_names)
{
	struct baton_addr a = parsed("localhost:7001");
	cr_assert_str_eq(a.host, "localhost");
	cr_assert_eq(a.family, AF_UNSPEC);
	struct sockaddr_storage ss;
	cr_assert_eq(baton_addr_numeric(&a, &ss), BATON_EINVAL,
		     "a name is not a number");
	a = parsed("node1.example:7001");
	cr_assert_str_eq(a.host, "node1.example");
	a = parsed("baton-2_x.svc.cluster.local:80");
	cr_assert_eq(a.port, 80);
	a = parsed("1node:7001"); /* a label may start with a digit */
	cr_assert_eq(a.family, AF_UNSPEC);
}

Test(address, longest_host_name)
{
	/* 253 characters: four labels of 63 and a dot between each, 4*63+3 =
	 * 255, so shorten the last label by 2. */
	char name[300];
	memset(name, 'a', 253);
	name[63] = name[127] = name[191] = '.';
	strcpy(name + 253, ":7001");
	struct baton_addr a = parsed(name);
	cr_assert_eq(strlen(a.host), 253);
	memset(name, 'a', 254);
	name[63] = name[127] = name[191] = '.';
	strcpy(name + 254, ":7001");
	refused(name, "more than the 253");
}

Test(address, refusals)
{
	refused("", "empty");
	refused("127.0.0.1", "no port");
	refused("localhost", "no port");
	refused(":7001", "no host");
	refused("[::1", "no ']'");
	refused("[::1]", "no port after ']'");
	refused("[::1]:", "no port after ']'");
	refused("[::1]7001", "no port after ']'");
	refused("[]:7001", "not an IPv6 number");
	refused("[127.0.0.1]:7001", "not an IPv6 number");
	refused("[nonsense]:7001", "not an IPv6 number");
	refused("::1:7001", "without brackets");
	refused("fe80::1:7001", "without brackets");
	refused("127.0.0.1:0", "from 1 to 65535");
	refused("127.0.0.1:65536", "from 1 to 65535");
	refused("127.0.0.1:99999999999999999999", "from 1 to 65535");
	refused("127.0.0.1:-1", "from 1 to 65535");
	refused("127.0.0.1:+80", "from 1 to 65535");
	refused("127.0.0.1:80x", "from 1 to 65535");
	refused("127.0.0.1: 80", "from 1 to 65535");
	refused("[::1]:70000", "from 1 to 65535");
	refused("localhost:", "from 1 to 65535");
	refused("999.0.0.1:7001", "not an IPv4 number");
	refused("1.2.3:7001", "not an IPv4 number");
	refused("bad name:7001", "not a host name");
	refused("a..b:7001", "not a host name");
	refused(".a:7001", "not a host name");
	refused("a/b:7001", "not a host name");
	char label[80];
	memset(label, 'x', 64);
	strcpy(label + 64, ":1");
	refused(label, "not a host name");
}

Test(address, resolve_numbers_and_localhost)
{
	struct sockaddr_storage ss;
	char why[BATON_ADDR_WHY_MAX];
	cr_assert_eq(baton_addr_resolve("[::1]:5", &ss, why, sizeof why), 0);
	cr_assert_eq(ss.ss_family, AF_INET6);
	cr_assert_eq(baton_addr_resolve("localhost:5", &ss, why, sizeof why), 0,
		     "%s", why);
	cr_assert(baton_addr_is_loopback("localhost:5"));
	cr_assert(baton_addr_is_loopback("127.0.0.2:5"));
	cr_assert(baton_addr_is_loopback("[::1]:5"));
	cr_assert(!baton_addr_is_loopback("10.0.0.1:5"));
	cr_assert(!baton_addr_is_loopback("[2001:db8::1]:5"));
	cr_assert(!baton_addr_is_loopback("::1:5"));
	/* .invalid never resolves (RFC 6761). */
	cr_assert_eq(
		baton_addr_resolve("nosuch.invalid:5", &ss, why, sizeof why),
		BATON_EINVAL);
	cr_assert(strstr(why, "cannot resolve 'nosuch.invalid'") != NULL, "%s",
		  why);
	cr_assert(!baton_addr_is_loopback("nosuch.invalid:5"));
}

/* ---- connecting on a loop (address_uv.c) ------------------------------- */

struct dial {
	int calls;
	int status;
};

static void on_dialled(void *data, int status)
{
	struct dial *d = data;
	d->calls++;
	d->status = status;
}

static void on_accept(uv_stream_t *server, int status)
{
	(void)server;
	(void)status;
}

/* A listener on 127.0.0.1, its port in *port. */
static void listen_local(uv_loop_t *loop, uv_tcp_t *server, int *port)
{
	struct sockaddr_in sa;
	uv_ip4_addr("127.0.0.1", 0, &sa);
	uv_tcp_init(loop, server);
	cr_assert_eq(uv_tcp_bind(server, (struct sockaddr *)&sa, 0), 0);
	cr_assert_eq(uv_listen((uv_stream_t *)server, 8, on_accept), 0);
	struct sockaddr_storage ss;
	int len = sizeof ss;
	uv_tcp_getsockname(server, (struct sockaddr *)&ss, &len);
	*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static struct dial dial_once(uv_loop_t *loop, const char *text)
{
	uv_tcp_t tcp;
	uv_tcp_init(loop, &tcp);
	struct dial d = {0};
	struct baton_addr_connect *req = NULL;
	cr_assert_eq(baton_addr_connect(loop, &tcp, text, on_dialled, &d, &req),
		     0);
	cr_assert_eq(d.calls, 0, "called before it returned");
	while (d.calls == 0)
		uv_run(loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&tcp, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	return d;
}

Test(address, connect_by_number_and_by_name)
{
	uv_loop_t loop;
	uv_loop_init(&loop);
	uv_tcp_t server;
	int port;
	listen_local(&loop, &server, &port);
	char text[64];
	snprintf(text, sizeof text, "127.0.0.1:%d", port);
	struct dial d = dial_once(&loop, text);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.status, 0, "%s", uv_strerror(d.status));
	snprintf(text, sizeof text, "localhost:%d", port);
	d = dial_once(&loop, text);
	/* localhost may resolve to ::1 first where the system says so, and
	 * nothing listens there: refused, but resolved. */
	cr_assert(d.status == 0 || d.status == UV_ECONNREFUSED, "%s",
		  uv_strerror(d.status));
	cr_assert(!baton_addr_resolve_failed(d.status));
	d = dial_once(&loop, "nosuch.invalid:7001");
	cr_assert(baton_addr_resolve_failed(d.status), "%s",
		  uv_strerror(d.status));
	uv_close((uv_handle_t *)&server, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(address, a_cancelled_connect_never_calls_back)
{
	uv_loop_t loop;
	uv_loop_init(&loop);
	uv_tcp_t tcp;
	uv_tcp_init(&loop, &tcp);
	struct dial d = {0};
	struct baton_addr_connect *req = NULL;
	cr_assert_eq(baton_addr_connect(&loop, &tcp, "nosuch.invalid:7001",
					on_dialled, &d, &req),
		     0);
	baton_addr_connect_cancel(req);
	uv_close((uv_handle_t *)&tcp, NULL);
	uv_run(&loop, UV_RUN_DEFAULT); /* until the resolution is back */
	cr_assert_eq(d.calls, 0);
	cr_assert_eq(uv_loop_close(&loop), 0);
	struct baton_addr_connect *none = NULL;
	cr_assert_eq(baton_addr_connect(&loop, &tcp, "::1:7001", on_dialled, &d,
					&none),
		     UV_EINVAL);
	cr_assert_null(none);
}
