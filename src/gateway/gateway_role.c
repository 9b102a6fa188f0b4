/* gateway/gateway_role.c - running the gateway: the standard command
 * tables over the cluster store, a "# Gateway" INFO section and the
 * other gateways as CLUSTER peers (announce.c). */
#include "core/log.h"
#include "gateway/announce.h"
#include "gateway/gateway.h"
#include "server/commands.h"
#include "server/info.h"

static void gateway_info(server *srv, resp_buf *out, const char *section) {
    if (!info_wants(section, "gateway", 1)) return;
    info_section(out, "Gateway");
    cluster_store_info(srv->store, out);
}

static size_t gateway_peers(server *srv, resp_endpoint *out, size_t max) {
    return gw_announce_peers(srv->role, out, max);
}

int gateway_role_main(server *srv) {
    char err[512];
    srv->store = cluster_store_create(srv->loop, &srv->cfg, err, sizeof err);
    if (!srv->store) {
        log_warning("gateway: %s", err);
        return 1;
    }
    t_server_register(srv);
    t_object_register(srv);
    t_cluster_register(srv);
    t_multi_register(srv);
    gateway_async_register(srv);
    srv->role_info = gateway_info;
    if (server_listen(srv, err, sizeof err) < 0) {
        log_warning("%s", err);
        srv->role_info = NULL;
        return 1;   /* server_cleanup destroys the store */
    }
    srv->role = gw_announce_start(srv);
    srv->role_peers = gateway_peers;
    log_notice("gateway ready: master %s, replicas %d", srv->cfg.master, srv->cfg.replicas);
    server_run(srv);
    srv->role_peers = NULL;
    gw_announce_stop(srv->role);
    srv->role = NULL;
    srv->role_info = NULL;
    return 0;
}
