#include "raw_peer.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <sys/socket.h>
#include <unistd.h>

#include "baton/buf.h"
#include "peer.h"

int raw_peer_connect(uint16_t port, const struct baton_profile *profile)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	struct baton_buf b;
	baton_buf_init(&b);
	struct baton_peer_handshake h = {.cluster_id = "test",
					 .node_id = 7,
					 .profile = *profile,
					 .peer_addr = "127.0.0.1:1"};
	cr_assert_eq(baton_peer_encode_handshake(&h, &b), 0);
	cr_assert_eq(write(fd, b.data, b.len), (ssize_t)b.len);
	baton_buf_free(&b);
	return fd;
}
