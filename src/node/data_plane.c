/* node/data_plane.c - see data_plane.h. */
#include "node/data_plane.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/netio.h"
#include "core/log.h"
#include "core/util.h"
#include "rdma/rdma_node.h"

struct node_data {
    node_data_config cfg;
    pthread_mutex_t mu;          /* the servers below (restarted on identity) */
    te_tcp_server *tcp;
    rdma_node *rdma;
    char shm_path[TE_ADDR_LEN - 5];
    char rdma_listen[TE_ADDR_LEN];
    te_server_stats retired;     /* counters of servers already stopped */
};

static void stats_add(te_server_stats *a, const te_server_stats *b) {
    a->bytes_in += b->bytes_in;
    a->bytes_out += b->bytes_out;
    a->requests += b->requests;
    a->rejected += b->rejected;
    a->conns_accepted += b->conns_accepted;
    a->auth_failures += b->auth_failures;
}

static te_tcp_server *tcp_start(node_data *d, uint32_t id, const uint8_t *key, char *err,
                                size_t errlen) {
    te_server_config sc;
    memset(&sc, 0, sizeof sc);
    sc.base = d->cfg.seg->base;
    sc.size = d->cfg.seg->size;
    sc.node_id = id;
    snprintf(sc.secret, sizeof sc.secret, "%s", d->cfg.secret);
    if (key) {
        sc.have_cap_key = 1;
        memcpy(sc.cap_key, key, TE_CAP_KEY_LEN);
    }
    sc.nlisten = d->cfg.ntcp;
    for (int i = 0; i < d->cfg.ntcp; i++) memcpy(sc.listen[i], d->cfg.tcp[i], TE_ADDR_LEN);
    sc.seg_fd = -1;
    if (d->shm_path[0]) {
        memcpy(sc.shm_path, d->shm_path, sizeof sc.shm_path);
        sc.seg_fd = d->cfg.seg->fd;
    }
    return te_tcp_server_start(&sc, err, errlen);
}

static void tcp_retire(node_data *d) {
    if (!d->tcp) return;
    te_server_stats st;
    te_tcp_server_stats(d->tcp, &st);
    stats_add(&d->retired, &st);
    te_tcp_server_stop(d->tcp);
    d->tcp = NULL;
}

/* The RDMA set-up listener: the first TCP address's host, its port + 1. */
static int rdma_listen_addr(node_data *d, char *err, size_t errlen) {
    char host[TE_ADDR_LEN];
    int port;
    if (te_split_hostport(d->cfg.tcp[0], host, sizeof host, &port) != 0 || port <= 0 || port >= 65535) {
        snprintf(err, errlen, "rdma: needs a fixed data port, not '%s'", d->cfg.tcp[0]);
        return -1;
    }
    snprintf(d->rdma_listen, sizeof d->rdma_listen, "%.48s:%d", host, port + 1);
    return 0;
}

static int rdma_export(node_data *d, uint32_t id, const uint8_t *key, char *err, size_t errlen) {
    rdma_node_config rc;
    rdma_node_config_default(&rc);
    snprintf(rc.listen, sizeof rc.listen, "%s", d->rdma_listen);
    snprintf(rc.secret, sizeof rc.secret, "%s", d->cfg.secret);
    memcpy(rc.cap_key, key, TE_CAP_KEY_LEN);
    rc.node_id = id;
    d->rdma = rdma_node_export(&rc, d->cfg.seg->base, d->cfg.seg->size, NULL, err, errlen);
    return d->rdma ? 0 : -1;
}

/* "host:0" listeners become the port they got, so the address we
 * register is reachable and a restart binds the same port again. */
static void pin_ports(node_data *d) {
    for (int i = 0; i < d->cfg.ntcp; i++) {
        char host[TE_ADDR_LEN];
        int port;
        if (te_split_hostport(d->cfg.tcp[i], host, sizeof host, &port) == 0 && port == 0)
            snprintf(d->cfg.tcp[i], TE_ADDR_LEN, "%.56s:%d", host, te_tcp_server_port(d->tcp, i));
    }
}

node_data *node_data_start(const node_data_config *cfg, char *err, size_t errlen) {
    node_data *d = xcalloc(1, sizeof *d);
    d->cfg = *cfg;
    pthread_mutex_init(&d->mu, NULL);
    if (cfg->shm && cfg->seg->fd >= 0)
        snprintf(d->shm_path, sizeof d->shm_path, "@moonkv-node-%d", (int)getpid());
    else if (cfg->shm)
        log_warning("data plane: the segment is not a memfd, no shm export");
    if (cfg->rdma && rdma_listen_addr(d, err, errlen) != 0) goto fail;
    /* No key yet: every request is refused until registration. */
    d->tcp = tcp_start(d, 0, NULL, err, errlen);
    if (!d->tcp) goto fail;
    pin_ports(d);
    for (int i = 0; i < d->cfg.ntcp; i++)
        log_notice("data plane: tcp %s", d->cfg.tcp[i]);
    if (d->shm_path[0]) log_notice("data plane: shm unix:%s", d->shm_path);
    return d;
fail:
    pthread_mutex_destroy(&d->mu);
    free(d);
    return NULL;
}

int node_data_set_identity(node_data *d, uint32_t id, const uint8_t key[TE_CAP_KEY_LEN],
                           char *err, size_t errlen) {
    int rc = 0;
    pthread_mutex_lock(&d->mu);
    /* The node id is fixed per server instance: start anew under it. */
    tcp_retire(d);
    d->tcp = tcp_start(d, id, key, err, errlen);
    if (!d->tcp) rc = -1;
    if (d->rdma) rdma_node_destroy(d->rdma);
    d->rdma = NULL;
    if (rc == 0 && d->cfg.rdma) rc = rdma_export(d, id, key, err, errlen);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int node_data_addrs(const node_data *d, char out[][TE_ADDR_LEN], int max) {
    int n = 0;
    for (int i = 0; i < d->cfg.ntcp && n < max; i++) snprintf(out[n++], TE_ADDR_LEN, "%s", d->cfg.tcp[i]);
    if (d->shm_path[0] && n < max) snprintf(out[n++], TE_ADDR_LEN, "unix:%s", d->shm_path);
    if (d->cfg.rdma && n < max) snprintf(out[n++], TE_ADDR_LEN, "rdma:%.56s", d->rdma_listen);
    return n;
}

void node_data_stats(node_data *d, te_server_stats *out) {
    pthread_mutex_lock(&d->mu);
    *out = d->retired;
    out->conns_active = 0;
    if (d->tcp) {
        te_server_stats st;
        te_tcp_server_stats(d->tcp, &st);
        stats_add(out, &st);
        out->conns_active = st.conns_active;
    }
    pthread_mutex_unlock(&d->mu);
}

void node_data_stop(node_data *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    tcp_retire(d);
    if (d->rdma) rdma_node_destroy(d->rdma);
    d->rdma = NULL;
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_destroy(&d->mu);
    free(d);
}
