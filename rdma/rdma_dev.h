/* rdma/rdma_dev.h - RDMA device discovery and per-port contexts.
 *
 * One rdma_dev is one (device, port) the transport or the node exporter
 * uses: its own verbs context, protection domain, completion channel and
 * one CQ shared by every QP on that port. Shared by client and node. */
#ifndef MKV_RDMA_DEV_H
#define MKV_RDMA_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "rdma/verbs_ops.h"

#define RDMA_MAX_DEVS     8
#define RDMA_DEV_NAME_MAX 64
#define RDMA_DEVSPEC_MAX  256

typedef struct rdma_dev {
    const verbs_ops *ops;
    char name[RDMA_DEV_NAME_MAX];
    uint8_t port;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    int cq_depth;
    int cq_reserved;          /* sum of max_send_wr of the QPs on cq */
    int is_roce;              /* Ethernet link layer: address by GID */
    uint16_t lid;
    int gid_index;
    union ibv_gid gid;
    enum ibv_mtu mtu;         /* active MTU of the port */
    uint32_t max_msg_sz;
    int max_qp_wr;
    int max_rd_atomic;        /* as initiator (max_qp_init_rd_atom) */
    int max_dest_rd_atomic;   /* as responder (max_qp_rd_atom) */
} rdma_dev;

/* Open the ports named by spec ("mlx5_0,mlx5_1:2": device[:port], comma
 * separated; NULL or "" = every active port of every device). A named
 * port that is missing or not active is an error; with an empty spec
 * inactive ports are skipped. gid_index -1 picks one (README-rdma.md).
 * Returns the number opened (>0) or -1 with a message in err. */
int rdma_devs_open(const verbs_ops *ops, const char *spec, int cq_depth, int gid_index,
                   rdma_dev *devs, char *err, size_t errlen);
void rdma_devs_close(rdma_dev *devs, int n);

/* Count active ports without keeping anything open; 0 and why when none. */
int rdma_devs_probe(const verbs_ops *ops, char *why, size_t whylen);

/* Reserve CQ room for a QP of max_send_wr; -1 if the CQ would overflow. */
int rdma_dev_reserve_cq(rdma_dev *d, int max_send_wr);
void rdma_dev_release_cq(rdma_dev *d, int max_send_wr);

#endif
