/* Connecting to an address on a libuv loop (see address_uv.h). */
#include "address_uv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"

struct baton_addr_connect {
	uv_getaddrinfo_t resolve;
	uv_connect_t connect;
	uv_tcp_t *tcp;
	baton_addr_connect_cb cb;
	void *data;
	bool cancelled;
	uint16_t port;
};

static void on_connected(uv_connect_t *connect, int status)
{
	struct baton_addr_connect *req = connect->data;
	if (!req->cancelled)
		req->cb(req->data, status);
	free(req);
}

static int start_connect(struct baton_addr_connect *req,
			 const struct sockaddr *sa)
{
	req->connect.data = req;
	return uv_tcp_connect(&req->connect, req->tcp, sa, on_connected);
}

static void on_resolved(uv_getaddrinfo_t *resolve, int status,
			struct addrinfo *res)
{
	struct baton_addr_connect *req = resolve->data;
	if (req->cancelled) {
		uv_freeaddrinfo(res);
		free(req);
		return;
	}
	if (status == 0 && res == NULL)
		status = UV_EAI_NONAME;
	if (status == 0) {
		struct sockaddr_storage ss;
		memset(&ss, 0, sizeof ss);
		memcpy(&ss, res->ai_addr, res->ai_addrlen);
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port =
				htons(req->port);
		else
			((struct sockaddr_in6 *)&ss)->sin6_port =
				htons(req->port);
		status = start_connect(req, (struct sockaddr *)&ss);
	}
	uv_freeaddrinfo(res);
	if (status != 0) {
		req->cb(req->data, status);
		free(req);
	}
}

int baton_addr_connect(uv_loop_t *loop, uv_tcp_t *tcp, const char *text,
		       baton_addr_connect_cb cb, void *data,
		       struct baton_addr_connect **out)
{
	struct baton_addr a;
	if (baton_addr_parse(text, &a, NULL, 0) != 0)
		return UV_EINVAL;
	struct baton_addr_connect *req = calloc(1, sizeof *req);
	if (req == NULL)
		return UV_ENOMEM;
	req->tcp = tcp;
	req->cb = cb;
	req->data = data;
	req->port = a.port;
	int rv;
	struct sockaddr_storage ss;
	if (a.family != AF_UNSPEC) {
		rv = baton_addr_numeric(&a, &ss) == 0
			     ? start_connect(req, (struct sockaddr *)&ss)
			     : UV_EINVAL;
	} else {
		struct addrinfo hints = {.ai_family = AF_UNSPEC,
					 .ai_socktype = SOCK_STREAM};
		req->resolve.data = req;
		rv = uv_getaddrinfo(loop, &req->resolve, on_resolved, a.host,
				    NULL, &hints);
	}
	if (rv != 0) {
		free(req);
		return rv;
	}
	*out = req;
	return 0;
}

void baton_addr_connect_cancel(struct baton_addr_connect *req)
{
	req->cancelled = true;
}

bool baton_addr_resolve_failed(int status)
{
	return status <= UV_EAI_ADDRFAMILY && status >= UV_EAI_PROTOCOL;
}
