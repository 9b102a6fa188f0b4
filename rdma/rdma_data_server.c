/* rdma/rdma_data_server.c - the RDMA export as a data server
 * (backend/data_server.h).
 *
 * Its QP set-up listener sits beside the node's first TCP data address:
 * the same host, that port + 1. It needs the master's key to hand out
 * the segment rkey, so it runs only once the node has its identity. */
#include "rdma/rdma_node.h"

#include <stdio.h>
#include <string.h>

#include "backend/data_server.h"
#include "backend/netio.h"

static int setup_addr(const te_server_config *c, char out[TE_ADDR_LEN], char *err, size_t errlen) {
    char host[TE_ADDR_LEN];
    int port;
    const char *first = c->nlisten > 0 ? c->listen[0] : "";
    if (te_split_hostport(first, host, sizeof host, &port) != 0 || port <= 0 || port >= 65535) {
        snprintf(err, errlen, "rdma: needs a fixed data port, not '%s'", first);
        return -1;
    }
    snprintf(out, TE_ADDR_LEN, "%.48s:%d", host, port + 1);
    return 0;
}

static int rdma_check(const te_server_config *c, char *err, size_t errlen) {
    char addr[TE_ADDR_LEN];
    return setup_addr(c, addr, err, errlen);
}

static void *rdma_start(te_server_config *c, char *err, size_t errlen) {
    rdma_node_config rc;
    rdma_node_config_default(&rc);
    if (setup_addr(c, rc.listen, err, errlen) != 0) return NULL;
    snprintf(rc.secret, sizeof rc.secret, "%s", c->secret);
    memcpy(rc.cap_key, c->cap_key, TE_CAP_KEY_LEN);
    rc.cap_term = c->cap_term;
    rc.claims = c->claims;
    rc.node_id = c->node_id;
    return rdma_node_export(&rc, c->base, c->size, NULL, err, errlen);
}

static int rdma_addrs(const te_server_config *c, char out[][TE_ADDR_LEN], int max) {
    char addr[TE_ADDR_LEN], why[128];
    if (max < 1 || setup_addr(c, addr, why, sizeof why) != 0) return 0;
    snprintf(out[0], TE_ADDR_LEN, "rdma:%.56s", addr);
    return 1;
}

static void rdma_stop(void *srv) { rdma_node_destroy(srv); }

const te_data_server_ops rdma_data_server = {
    .name = "rdma", .needs_identity = 1, .check = rdma_check, .start = rdma_start,
    .addrs = rdma_addrs, .stop = rdma_stop,
};
