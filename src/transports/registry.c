/* transports/registry.c - see registry.h. */
#include "transports/registry.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/engine.h"
#include "backend/shm_transport.h"
#include "backend/stream_server.h"
#include "backend/tcp_transport.h"
#include "core/log.h"
#include "core/util.h"
#include "rdma/rdma_node.h"
#include "rdma/rdma_transport.h"

static int is(const char *name, const char *want) { return name && strcmp(name, want) == 0; }

static int known(const char *name) {
    return is(name, "tcp") || is(name, "shm") || is(name, "rdma") || is(name, "auto");
}

te_transport *te_transport_create(const char *name, const te_config *cfg, char *err, size_t errlen) {
    char why[200];
    if (!name || is(name, "tcp")) return te_tcp_create(cfg, err, errlen);
    if (is(name, "shm")) return te_shm_create(cfg, err, errlen);
    if (is(name, "rdma") || is(name, "auto")) {
        if (rdma_devices_available(why, sizeof why) > 0) return rdma_transport_create(cfg, err, errlen);
        if (is(name, "rdma")) {
            snprintf(err, errlen, "transport rdma: no usable device (%s)", why);
            return NULL;
        }
        /* Once per process: a gateway or a client creates an engine per worker. */
        static atomic_int said;
        if (!atomic_exchange(&said, 1)) log_notice("RDMA: no usable device (%s), falling back to TCP", why);
        return te_tcp_create(cfg, err, errlen);
    }
    snprintf(err, errlen, "unknown transport '%s' (want tcp, shm, rdma or auto)", name);
    return NULL;
}

/* What a further context of a named engine is made of (te_engine_set_maker). */
typedef struct named_maker {
    char name[8];
    te_config cfg;
    int with_shm;             /* auto, and shm could be added to the first */
} named_maker;

static int make_named(void *arg, te_transport **out, int max, char *err, size_t errlen) {
    named_maker *m = arg;
    if (max < 2) return 0;
    int n = 0;
    if (!(out[n] = te_transport_create(m->name, &m->cfg, err, errlen))) return 0;
    n++;
    if (m->with_shm && (out[n] = te_shm_create(&m->cfg, err, errlen))) n++;
    return n;
}

te_engine *te_engine_create_named(const char *name, const te_config *cfg, const te_engine_config *ecfg,
                                  char *err, size_t errlen) {
    te_transport *t = te_transport_create(name, cfg, err, errlen);
    if (!t) return NULL;
    te_engine *e = te_engine_create(t, ecfg);
    named_maker *m = xcalloc(1, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name ? name : "tcp");
    m->cfg = *cfg;
    if (is(name, "auto")) {
        /* without shm, auto still works: every node over the network */
        char why[200];
        te_transport *shm = te_shm_create(cfg, why, sizeof why);
        if (!shm || te_engine_add_transport(e, shm, why, sizeof why) != TE_OK)
            log_notice("auto transport: no shm for same-host nodes (%s)", why);
        else
            m->with_shm = 1;
    }
    te_engine_set_maker(e, make_named, m, free);
    return e;
}

int te_data_servers_for(const char *name, const te_data_server_ops **out, int max, char *err,
                        size_t errlen) {
    const char *t = name && name[0] ? name : "auto";
    char why[256] = "";
    int n = 0, auto_ = is(t, "auto");
    if (!known(t)) {
        snprintf(err, errlen, "unknown transport '%s' (want auto, tcp, shm or rdma)", t);
        return -1;
    }
    if (max < 3) {
        snprintf(err, errlen, "room for %d data servers, need 3", max);
        return -1;
    }
    out[n++] = &te_tcp_data_server;
    if (auto_ || is(t, "shm")) out[n++] = &te_shm_data_server;
    if (auto_ || is(t, "rdma")) {
        int ndev = rdma_devices_available(why, sizeof why);
        if (ndev <= 0 && !auto_) {
            snprintf(err, errlen, "--transport rdma: %.200s", why[0] ? why : "no RDMA device");
            return -1;
        }
        if (ndev > 0) out[n++] = &rdma_data_server;
        else log_info("node: no RDMA export (%s)", why[0] ? why : "no device");
    }
    return n;
}
