/* fuzz_auth - the data-plane handshake (backend/auth.c) against a peer
 * that sends the input and hangs up: both the server side (input as the
 * client's hello and answer) and the client side (input as the server's
 * challenge and verdict). Neither may read past what it was sent, block
 * beyond its deadline, or accept a peer that does not know the secret. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/auth.h"

#define SECRET "fuzz-secret"
#define DEADLINE_MS 200

static int run_side(const uint8_t *data, size_t size, int server) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    /* The whole peer script first; a socketpair buffers far more than a
     * handshake, and EOF afterwards ends every wait at once. */
    if (size && write(sv[1], data, size) != (ssize_t)size) abort();
    shutdown(sv[1], SHUT_WR);
    char err[128];
    int rc = server ? te_auth_server(sv[0], SECRET, DEADLINE_MS, err, sizeof err)
                    : te_auth_client(sv[0], SECRET, DEADLINE_MS, err, sizeof err);
    close(sv[0]);
    close(sv[1]);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    /* The other side's nonce is fresh random bytes, so no fixed input
     * can hold the right MAC for it. */
    if (run_side(data, size, 1) == TE_AUTH_OK) abort();
    if (run_side(data, size, 0) == TE_AUTH_OK) abort();
    return 0;
}
