/* gateway/gateway_role.c - running the gateway: the standard command
 * tables over the cluster store, a "# Gateway" INFO section, a SCAN
 * that says the cluster cannot iterate keys (the master has no such
 * command, and an empty answer would claim there are none), and the
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

static void gateway_scan_command(client *c) {
    reply_error(c, "ERR SCAN is not supported by the gateway: the master offers no key iteration");
}

static size_t gateway_peers(server *srv, resp_endpoint *out, size_t max) {
    return gw_announce_peers(srv->role, out, max);
}

static const command gateway_commands[] = {
    {"scan", gateway_scan_command, -2, CMD_READONLY, 0, 0, 0, 0, "generic", "0.1.0",
     "Not available on the gateway: the cluster cannot iterate keys",
     "cursor [MATCH pattern] [COUNT count]"},
};

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
    commands_register(srv, gateway_commands, sizeof gateway_commands / sizeof gateway_commands[0]);
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
