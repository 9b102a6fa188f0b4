/* backend/transport_select.c - see transport_select.h. */
#include "backend/transport_select.h"

#include <stdio.h>
#include <string.h>

#include "backend/engine.h"
#include "backend/shm_transport.h"
#include "backend/tcp_transport.h"
#include "core/log.h"
#include "rdma/rdma_transport.h"

te_transport *te_transport_create(const char *name, const te_config *cfg, char *err, size_t errlen) {
    char why[200];
    if (!name || !strcmp(name, "tcp")) return te_tcp_create(cfg, err, errlen);
    if (!strcmp(name, "shm")) return te_shm_create(cfg, err, errlen);
    if (!strcmp(name, "rdma") || !strcmp(name, "auto")) {
        if (rdma_devices_available(why, sizeof why) > 0) return rdma_transport_create(cfg, err, errlen);
        if (!strcmp(name, "rdma")) {
            snprintf(err, errlen, "transport rdma: no usable device (%s)", why);
            return NULL;
        }
        log_notice("RDMA: no usable device (%s), falling back to TCP", why);
        return te_tcp_create(cfg, err, errlen);
    }
    snprintf(err, errlen, "unknown transport '%s' (want tcp, shm, rdma or auto)", name);
    return NULL;
}

te_engine *te_engine_create_named(const char *name, const te_config *cfg, const te_engine_config *ecfg,
                                  char *err, size_t errlen) {
    int auto_ = name && !strcmp(name, "auto");
    te_transport *t = te_transport_create(name, cfg, err, errlen);
    if (!t) return NULL;
    te_engine *e = te_engine_create(t, ecfg);
    if (!auto_) return e;
    /* without shm, auto still works: every node over the network */
    char why[200];
    te_transport *shm = te_shm_create(cfg, why, sizeof why);
    if (!shm || te_engine_add_transport(e, shm, why, sizeof why) != TE_OK)
        log_notice("auto transport: no shm for same-host nodes (%s)", why);
    return e;
}
