/* backend/transport_select.c - see transport_select.h. */
#include "backend/transport_select.h"

#include <stdio.h>
#include <string.h>

#include "backend/shm_transport.h"
#include "backend/tcp_transport.h"
#include "core/log.h"
#include "rdma/rdma_transport.h"

static te_transport *rdma_or_fail(const te_config *cfg, char *err, size_t errlen) {
    char why[200];
    if (rdma_devices_available(why, sizeof why) <= 0) {
        snprintf(err, errlen, "transport rdma: no usable RDMA device (%s)", why);
        return NULL;
    }
    return rdma_transport_create(cfg, err, errlen);
}

te_transport *te_transport_create(const char *name, const te_config *cfg, char *err, size_t errlen) {
    if (!name || !strcmp(name, "tcp")) return te_tcp_create(cfg, err, errlen);
    if (!strcmp(name, "shm")) return te_shm_create(cfg, err, errlen);
    if (!strcmp(name, "rdma")) return rdma_or_fail(cfg, err, errlen);
    if (!strcmp(name, "auto")) {
        char why[256];
        te_transport *t = rdma_or_fail(cfg, why, sizeof why);
        if (t) return t;
        log_notice("RDMA: %s, falling back to TCP",
                   strncmp(why, "transport rdma: ", 16) ? why : why + 16);
        return te_tcp_create(cfg, err, errlen);
    }
    snprintf(err, errlen, "unknown transport '%s' (want tcp, shm, rdma or auto)", name);
    return NULL;
}
