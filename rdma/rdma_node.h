/* rdma/rdma_node.h - a memory node's side of the RDMA transport.
 *
 * Registers the node's segment with every port it uses and serves QP
 * set-up (rdma_oob.h) on its own TCP listener from a thread: peers that
 * prove the cluster secret get a connected QP with no remote access;
 * rights and the segment rkey are opened on a QP only when the peer
 * shows a capability this node verifies with the master's key. After
 * that the peer reads and writes the segment with one-sided verbs and
 * this node's CPU is not involved. */
#ifndef MKV_RDMA_NODE_H
#define MKV_RDMA_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/data_server.h"
#include "backend/transport.h"
#include "rdma/rdma_dev.h"
#include "rdma/verbs_ops.h"

typedef struct rdma_node_config {
    char listen[TE_ADDR_LEN];         /* "host:port" for QP set-up (port 0: any) */
    char devices[RDMA_DEVSPEC_MAX];   /* as rdma_options.devices; "" = all active */
    char secret[TE_SECRET_MAX];       /* cluster secret */
    uint8_t cap_key[TE_CAP_KEY_LEN];  /* verifies capabilities */
    uint64_t cap_term;                /* of the master that issues them */
    uint32_t node_id;
    int timeout_ms;                   /* per set-up message (default 2000) */
    int max_qps;                      /* peers' QPs served at once (default 1024) */
    int gid_index;                    /* -1 = choose */
    struct te_claims *claims;         /* the node's write claims (backend/claims.h), or NULL */
} rdma_node_config;

void rdma_node_config_default(rdma_node_config *c);

typedef struct rdma_node rdma_node;

/* Export seg[0, len) over RDMA. ops NULL = the real verbs. NULL with a
 * message when no port can be opened or the listener can't be bound. */
rdma_node *rdma_node_export(const rdma_node_config *cfg, void *seg, size_t len,
                            const verbs_ops *ops, char *err, size_t errlen);
int rdma_node_port(const rdma_node *n);       /* the bound set-up port */
int rdma_node_qp_count(rdma_node *n);         /* QPs being served now */
void rdma_node_destroy(rdma_node *n);

/* The export as a data server (backend/data_server.h): set-up listener
 * on the first data address's host, port + 1 (rdma_data_server.c). */
extern const te_data_server_ops rdma_data_server;

#endif
