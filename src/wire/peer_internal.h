/*
 * Shared by the files of the peer codec (peer_common.c, peer_encode.c,
 * peer_decode.c); not part of its interface, which is peer.h.
 */
#ifndef BATON_WIRE_PEER_INTERNAL_H
#define BATON_WIRE_PEER_INTERNAL_H

#include "peer.h"

/* What a struct baton_msg must satisfy to travel. The encoder refuses to
 * send what the decoder would refuse to accept, so both call this. Returns
 * 0, BATON_ETOOBIG or BATON_ECORRUPT, with *why set. */
int baton__peer_check_msg(const struct baton_msg *m, const char **why);

#endif /* BATON_WIRE_PEER_INTERNAL_H */
