/* backend/auth.h - peers prove they hold the cluster secret.
 *
 * A mutual challenge-response on a freshly connected stream socket, run
 * before any data-plane request is served: each side sends a random
 * nonce and answers the other's with a MAC keyed by the secret, so the
 * secret never crosses the wire. Used by the TCP data plane, the shm
 * unix-socket hand-off and the RDMA out-of-band connection set-up. */
#ifndef MKV_AUTH_H
#define MKV_AUTH_H

#include <stddef.h>

#define TE_AUTH_OK   0
#define TE_AUTH_ERR -1
#define TE_AUTH_REFUSED -2   /* client: the peer answered and the secrets differ
                              * (or it is no moonkv peer): our fault, not the node's */

/* Blocking (the fd may be non-blocking: these wait with poll()) and
 * bounded by timeout_ms. On failure err says why ("bad secret",
 * "timed out", "peer closed"); te_auth_client says TE_AUTH_REFUSED when
 * the peer was reached but the secrets do not match. */
int te_auth_client(int fd, const char *secret, int timeout_ms, char *err, size_t errlen);
int te_auth_server(int fd, const char *secret, int timeout_ms, char *err, size_t errlen);

#endif
