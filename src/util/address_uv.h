/*
 * Connecting to an address as users write it (address.h) on a libuv loop:
 * a name is resolved with uv_getaddrinfo (the loop never blocks) on every
 * connection, so a peer whose name now points elsewhere is found; a number
 * is connected to at once.
 */
#ifndef BATON_UTIL_ADDRESS_UV_H
#define BATON_UTIL_ADDRESS_UV_H

#include <stdbool.h>
#include <uv.h>

struct baton_addr_connect;

/* Called once, unless cancelled first: status 0 (tcp is connected), a
 * libuv error of the connection, or of the resolution (see
 * baton_addr_resolve_failed). */
typedef void (*baton_addr_connect_cb)(void *data, int status);

/* Connect tcp (initialised, not yet connected) to text. 0 and *out is the
 * pending request, or a libuv error (UV_EINVAL: text is not an address;
 * UV_ENOMEM), and cb is never called. cb never runs before this returns. */
int baton_addr_connect(uv_loop_t *loop, uv_tcp_t *tcp, const char *text,
		       baton_addr_connect_cb cb, void *data,
		       struct baton_addr_connect **out);

/* Before closing tcp: cb will not be called. The request frees itself. */
void baton_addr_connect_cancel(struct baton_addr_connect *req);

/* True if a status given to the callback says the name did not resolve. */
bool baton_addr_resolve_failed(int status);

#endif /* BATON_UTIL_ADDRESS_UV_H */
