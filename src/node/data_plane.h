/* node/data_plane.h - the node's data servers, whichever they are.
 *
 * The servers (backend/data_server.h: TCP, shm, RDMA; chosen by the
 * transport registry) run in their own threads straight on the segment.
 * They start before the node registers (so a bad address fails
 * start-up), refusing every request until the master's identity is
 * known: node id and capability key. A server that needs the key to run
 * at all (RDMA) starts only then. A node that registers again (master
 * restart, declared dead) gets a new id, so the identity can change;
 * the servers pause (TCP and shm keep their listeners open, so no client
 * is refused meanwhile) or restart on it. */
#ifndef MKV_NODE_DATA_PLANE_H
#define MKV_NODE_DATA_PLANE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/data_server.h"
#include "node/segment.h"

#define NODE_MAX_DATA_SERVERS 4

typedef struct node_data_config {
    const node_segment *seg;
    char secret[TE_SECRET_MAX];
    int ntcp;
    char tcp[TE_MAX_PATHS][TE_ADDR_LEN];   /* "host:port" data addresses */
    int nservers;                          /* which servers, in address order */
    const te_data_server_ops *servers[NODE_MAX_DATA_SERVERS];
    const te_disk_reader *disk;            /* the disk tier's (TE_READ_DISK), or NULL; outlives the servers */
} node_data_config;

typedef struct node_data node_data;

/* Starts the listeners. NULL with a message in err. */
node_data *node_data_start(const node_data_config *cfg, char *err, size_t errlen);
/* Serve as node id with the master's key from now on, honouring only
 * caps of the master's term and write grants issued from grants_from_ms
 * on (backend/claims.h). 0, or -1 with a message (the servers could not
 * be restarted). Thread-safe. */
int node_data_set_identity(node_data *d, uint32_t id, const uint8_t key[TE_CAP_KEY_LEN],
                           uint64_t term, uint64_t grants_from_ms, char *err, size_t errlen);
/* A node shared by master groups: serve as node id (one id for every
 * group) under shares' keys, terms and chunks (backend/shares.h), from
 * now on and honouring no write grant issued before started_ms. Set once,
 * before any group registers. 0, or -1 with a message. */
int node_data_set_shares(node_data *d, uint32_t id, struct te_shares *shares, uint64_t started_ms, char *err,
                         size_t errlen);
/* Forget the write claims in [off, end): it went to another group. */
void node_data_forget_claims(node_data *d, uint64_t off, uint64_t end);
/* Claim a write grant's range for a write the node makes itself (a copy
 * task): TE_OK, or TE_EAUTH when a newer grant owns part of it. */
int node_data_claim(node_data *d, const te_cap *cap);
/* The addresses to register, server by server in configured order:
 * "host:port" (TCP), "unix:@..." (shm), "rdma:host:port". */
int node_data_addrs(const node_data *d, char out[][TE_ADDR_LEN], int max);
void node_data_stats(node_data *d, te_server_stats *out);
void node_data_stop(node_data *d);

#endif
