/* main/roles.c - role dispatch: the configured role's entry. */
#include "main/roles.h"

#include "core/log.h"
#include "gateway/gateway.h"
#include "master/master.h"
#include "node/node.h"
#include "standalone/standalone.h"

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
