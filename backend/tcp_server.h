/* backend/tcp_server.h - the node side of the TCP data plane.
 *
 * Serves a node's segment on one listener per data address, in its own
 * threads (an acceptor plus one thread per connection, capped by
 * max_conns) so data work never blocks the node's event loop or
 * heartbeat. Each connection authenticates with the cluster secret before
 * a single request is read; each request is bound-checked and its
 * capability verified, then its payload moves straight between the socket
 * and the segment. */
#ifndef MKV_TCP_SERVER_H
#define MKV_TCP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/transport.h"

typedef struct te_server_config {
    void *base;                 /* the segment */
    uint64_t size;
    uint32_t node_id;
    char secret[TE_SECRET_MAX];
    int have_cap_key;           /* 0: refuse everything until set_cap_key */
    uint8_t cap_key[TE_CAP_KEY_LEN];
    int nlisten;
    char listen[TE_MAX_PATHS][TE_ADDR_LEN];  /* "host:port", port 0 allowed */
    /* Same-host shared memory (shm_transport.h): when shm_path is set
     * ("/tmp/x.sock", created 0600, or "@abstract"), local clients get
     * seg_fd (the memfd behind base) after authenticating. */
    char shm_path[TE_ADDR_LEN - 5];   /* so "unix:" + it is a TE_ADDR_LEN address */
    int seg_fd;
    int max_conns;              /* default 256 */
    int auth_timeout_ms;        /* default 2000 */
    int io_timeout_ms;          /* a started payload must finish within (default 10000) */
} te_server_config;

typedef struct te_server_stats {
    uint64_t bytes_in, bytes_out;
    uint64_t requests, rejected;     /* rejected: answered with an error */
    uint64_t conns_accepted, auth_failures, conns_active;
} te_server_stats;

typedef struct te_tcp_server te_tcp_server;

te_tcp_server *te_tcp_server_start(const te_server_config *c, char *err, size_t errlen);
void te_tcp_server_set_cap_key(te_tcp_server *s, const uint8_t key[TE_CAP_KEY_LEN]);
/* Bound port of listener i (useful with port 0), -1 if out of range. */
int te_tcp_server_port(const te_tcp_server *s, int i);
void te_tcp_server_stats(const te_tcp_server *s, te_server_stats *out);
/* Cut up to max (<= 0: all) connections that came in on listener i (-1:
 * any; index nlisten is the shm socket), as when a NIC goes down:
 * clients see those paths break and retry elsewhere. */
void te_tcp_server_drop_conns(te_tcp_server *s, int listener, int max);
/* Closes listeners and connections, joins every thread. */
void te_tcp_server_stop(te_tcp_server *s);

/* The status a node gives a request header (cap, range, segment bounds);
 * shared with the shm hand-off, which verifies caps the same way. */
int te_tcp_server_check(te_tcp_server *s, te_op op, const uint8_t cap_wire[TE_CAP_WIRE_LEN],
                        uint64_t off, uint64_t len);

#endif
