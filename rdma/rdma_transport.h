/* rdma/rdma_transport.h - the RDMA verbs transport (client side).
 *
 * Implements te_transport_ops over reliable-connected QPs: a put is an
 * RDMA WRITE and a get an RDMA READ straight between registered client
 * memory and the node's registered segment, with no node CPU on the data
 * path. Each path holds several QPs to one node (spread over our ports);
 * QPs are set up over an authenticated TCP connection (rdma_oob.h), and
 * the node hands out its segment rkey only against a capability it has
 * checked (README-rdma.md). The node side is rdma_node.h. */
#ifndef MKV_RDMA_TRANSPORT_H
#define MKV_RDMA_TRANSPORT_H

#include <stddef.h>

#include "backend/transport.h"
#include "rdma/rdma_dev.h"
#include "rdma/verbs_ops.h"

#define RDMA_MAX_QPS_PER_PATH 8

typedef struct rdma_options {
    char devices[RDMA_DEVSPEC_MAX]; /* "mlx5_0,mlx5_1:2"; "" = every active port */
    int qps_per_path;     /* RC QPs per path, spread over our ports (default 2) */
    int signal_every;     /* signal every Nth WR of a batch, and the last (16) */
    int max_batch;        /* WRs chained into one post (32) */
    int cq_depth;         /* per port; bounds QPs per port (8192) */
    int spin_us;          /* busy-poll this long before sleeping (50) */
    int gid_index;        /* -1 = choose (default) */
} rdma_options;

void rdma_options_default(rdma_options *o);

/* With the real verbs and default options. NULL with a message (for
 * example "no RDMA devices found") when no port can be opened. */
te_transport *rdma_transport_create(const te_config *cfg, char *err, size_t errlen);
/* opt: start from rdma_options_default(); NULL = defaults. Out-of-range
 * fields take their default. ops NULL = the real verbs. */
te_transport *rdma_transport_create_ex(const te_config *cfg, const rdma_options *opt,
                                       const verbs_ops *ops, char *err, size_t errlen);

/* Number of active RDMA ports; 0 with the reason in why when none. */
int rdma_devices_available(char *why, size_t whylen);
int rdma_devices_available_ops(const verbs_ops *ops, char *why, size_t whylen);

#endif
