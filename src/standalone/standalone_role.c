/* standalone/standalone_role.c - running the standalone role: the local
 * segment store behind the standard command tables. */
#include "standalone/standalone.h"

#include "core/log.h"
#include "server/commands.h"
#include "standalone/store_local.h"

int standalone_role_main(server *srv) {
    char err[256];
    srv->store = store_local_create(srv->cfg.segment_size, srv->cfg.prefault, err, sizeof err);
    if (!srv->store) {
        log_warning("Cannot create the memory segment: %s", err);
        return 1;
    }
    store_local_gc(srv->store, srv->cfg.maxmemory_policy, (unsigned)srv->cfg.gc_high_watermark,
                   (unsigned)srv->cfg.gc_low_watermark);
    t_server_register(srv);
    t_object_register(srv);
    t_cluster_register(srv);
    t_multi_register(srv);
    if (server_listen(srv, err, sizeof err) < 0) {
        log_warning("%s", err);
        return 1;
    }
    server_run(srv);
    return 0;
}
