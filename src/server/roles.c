/* server/roles.c - role dispatch and the standalone role.
 *
 * Standalone is the whole cache in one process: the local segment store
 * behind the standard command tables. The cluster roles live in their
 * own directories. */
#include "server/roles.h"

#include "core/log.h"
#include "server/commands.h"
#include "server/store_local.h"

int standalone_role_main(server *srv) {
    char err[256];
    srv->store = store_local_create(srv->cfg.segment_size, srv->cfg.prefault, err, sizeof err);
    if (!srv->store) {
        log_warning("Cannot create the memory segment: %s", err);
        return 1;
    }
    t_server_register(srv);
    t_object_register(srv);
    if (server_listen(srv, err, sizeof err) < 0) {
        log_warning("%s", err);
        return 1;
    }
    server_run(srv);
    return 0;
}

int role_main(server *srv) {
    switch (srv->cfg.role) {
    case ROLE_STANDALONE: return standalone_role_main(srv);
    case ROLE_MASTER: return master_role_main(srv);
    case ROLE_NODE: return node_role_main(srv);
    case ROLE_GATEWAY: return gateway_role_main(srv);
    }
    log_warning("Unknown role %d", (int)srv->cfg.role);
    return 1;
}
