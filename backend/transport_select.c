/* backend/transport_select.c - see transport_select.h. */
#include "backend/transport_select.h"

#include <stdio.h>
#include <string.h>

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
