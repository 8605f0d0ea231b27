/*
 * A hand-made peer for the transport tests: a raw socket that connects to
 * a transport's peer port and sends the handshake of node 7, as a peer of
 * the given release would; the tests then speak frames on it by hand.
 */
#ifndef BATON_TESTS_RAW_PEER_H
#define BATON_TESTS_RAW_PEER_H

#include <stdint.h>

#include "baton/version.h"

/* The connected socket, the handshake sent (asserts on failure). */
int raw_peer_connect(uint16_t port, const struct baton_profile *profile);

#endif
