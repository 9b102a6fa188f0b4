/* backend/data_server.h - the node side's seam: one interface every data
 * server (TCP, shm, RDMA) implements.
 *
 * A memory node serves its segment to clients through data servers that
 * run in their own threads. The node's data plane (src/node/data_plane.c)
 * starts, restarts and stops them through te_data_server_ops only; which
 * servers exist is listed once, in the transport registry
 * (src/transports/registry.h). Every server gets the same configuration
 * and takes from it what it needs. */
#ifndef MKV_DATA_SERVER_H
#define MKV_DATA_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/transport.h"

/* The node's disk tier as a data server reads it (TE_READ_DISK,
 * docs/SSD_TIER.md). read hands put the bytes [from, to) (at least) of
 * the value of the record whose key tag is tag (cap.h), if it is size
 * bytes with CRC32C crc, in pieces in object order (at: a piece's
 * offset in the object). A read of the whole value holds its last piece
 * back until the whole value's CRC32C matched; a part is proved by its
 * reader's slice CRCs (only a reader that has them reads a part). 0;
 * -ENOENT no such record (or another size or CRC); -EBADMSG it failed
 * its CRC (and is dropped); another -errno; or put's non-zero return
 * (the reader went away). */
typedef int te_disk_put(void *sink, uint64_t at, const void *buf, size_t n);
typedef struct te_disk_reader {
    int (*read)(void *ctx, uint64_t tag, uint64_t size, uint32_t crc, uint64_t from, uint64_t to, te_disk_put *put,
                void *sink);
    void *ctx;
} te_disk_reader;

typedef struct te_server_config {
    void *base;                 /* the segment */
    uint64_t size;
    uint32_t node_id;
    char secret[TE_SECRET_MAX];
    int have_cap_key;           /* 0: refuse everything until a key is set */
    uint8_t cap_key[TE_CAP_KEY_LEN];
    uint64_t cap_term;          /* the master's term: caps of any other are refused */
    int nlisten;
    char listen[TE_MAX_PATHS][TE_ADDR_LEN];  /* "host:port" data addresses, port 0 allowed */
    /* Same-host shared memory (shm_transport.h): when shm_path is set
     * ("/tmp/x.sock", created 0600, or "@abstract"), local clients get
     * seg_fd (the memfd or file behind base, an open file description
     * holding no lock) after authenticating, with incarnation (random per
     * node process: a client that meets a new one maps the segment anew). */
    char shm_path[TE_ADDR_LEN - 5];   /* so "unix:" + it is a TE_ADDR_LEN address */
    int seg_fd;
    uint64_t incarnation;
    int max_conns;              /* per server, default 256 */
    int auth_timeout_ms;        /* the handshake's deadline, default 1000 */
    int io_timeout_ms;          /* a started payload must finish within (default 10000) */
    /* Unauthenticated connections (preauth_gate.h), besides max_conns: at
     * most preauth_max (default 64), preauth_per_source from one address
     * (default 16); over a cap the oldest of them is dropped. */
    int preauth_max, preauth_per_source;
    struct te_claims *claims;   /* the node's, shared by its servers; NULL: writes unclaimed */
    /* A node shared by master groups (shares.h): every group's key, term
     * and chunks; when set, caps are checked against it, not cap_key. */
    struct te_shares *shares;
    /* The disk tier, or NULL (TE_READ_DISK refused): the node's, kept
     * for as long as its servers run. */
    const te_disk_reader *disk;
} te_server_config;

typedef struct te_server_stats {
    uint64_t bytes_in, bytes_out;
    uint64_t requests, rejected;     /* rejected: answered with an error */
    uint64_t conns_accepted, auth_failures, conns_active;
} te_server_stats;

void te_server_stats_add(te_server_stats *sum, const te_server_stats *s);

typedef struct te_data_server_ops {
    const char *name;           /* "tcp", "shm", "rdma": for logs */
    /* 1: starts only once the node knows its id and the master's key
     * (have_cap_key); until then it is simply not running. */
    int needs_identity;
    /* Before anything starts (NULL: always 0): 0 serve; 1 skip this
     * server, the message saying why; -1 refuse the configuration. */
    int (*check)(const te_server_config *c, char *err, size_t errlen);
    /* Start serving. It may rewrite c to what it bound (a listen port 0
     * becomes the port it got) so that a restart binds the same. NULL
     * with a message in err. */
    void *(*start)(te_server_config *c, char *err, size_t errlen);
    /* The addresses clients dial, in order of preference, from the
     * configuration as start left it (known before a needs_identity
     * server runs: the node registers them to learn its id). */
    int (*addrs)(const te_server_config *c, char out[][TE_ADDR_LEN], int max);
    void (*stats)(void *srv, te_server_stats *out);   /* NULL: it counts nothing */
    void (*stop)(void *srv);    /* closes everything, joins its threads */
    /* A new identity without closing the listeners (NULL: stop and start
     * anew). pause closes every connection and joins its thread, leaving
     * the listening sockets open (connects queue in their backlog);
     * resume serves the identity in c (node_id, cap key and term, shares)
     * from then on, accepting what queued meanwhile. */
    void (*pause)(void *srv);
    void (*resume)(void *srv, const te_server_config *c);
} te_data_server_ops;

#endif
