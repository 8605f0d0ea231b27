/* The peer codec's handshake decoder (peer_target.h): the first byte
 * selects the protocol version, the rest is the handshake message. */
#include "fuzz.h"
#include "peer_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_peer_message(FUZZ_ENV_HANDSHAKE, data, size);
}
