/* master/gateways.c - the gateways the master knows, for cluster-mode
 * and sentinel-mode Redis clients (CLUSTER SLOTS lists every gateway).
 *
 * A gateway announces its RESP address with MOON.GATEWAY every heartbeat;
 * one silent for longer than node_timeout_ms is dropped. The table is
 * small and bounded (MASTER_MAX_GATEWAYS): the master never allocates for
 * a peer. */
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "master/master.h"
#include "server/commands.h"

static master *master_of(client *c) { return c->srv->role; }

/* Forget gateways silent for longer than the node timeout. */
static void expire_gateways(master *m, uint64_t now) {
    uint64_t window = (uint64_t)m->srv->cfg.node_timeout_ms;
    size_t w = 0;
    for (size_t i = 0; i < m->ngateways; i++)
        if (now - m->gateways[i].last_ms <= window) m->gateways[w++] = m->gateways[i];
    m->ngateways = w;
}

/* MOON.GATEWAY host:port -> every live gateway's "host:port" (this one
 * included). */
static void gateway_command(client *c) {
    master *m = master_of(c);
    const resp_arg *a = &c->argv[1];
    char addr[MASTER_GATEWAY_ADDR], host[MASTER_GATEWAY_ADDR];
    int port;
    if (a->len == 0 || a->len >= sizeof addr) {
        reply_errorf(c, "ERR gateway address must be 1 to %d bytes of host:port", MASTER_GATEWAY_ADDR - 1);
        return;
    }
    memcpy(addr, a->ptr, a->len);
    addr[a->len] = '\0';
    if (parse_hostport(addr, host, sizeof host, &port) != 0 || port <= 0) {
        reply_error(c, "ERR gateway address must be host:port");
        return;
    }
    uint64_t now = mono_ms();
    expire_gateways(m, now);
    size_t i = 0;
    while (i < m->ngateways && strcmp(m->gateways[i].addr, addr) != 0) i++;
    if (i == m->ngateways) {
        if (m->ngateways == MASTER_MAX_GATEWAYS) {
            reply_errorf(c, "ERR the master lists at most %d gateways", MASTER_MAX_GATEWAYS);
            return;
        }
        snprintf(m->gateways[m->ngateways++].addr, MASTER_GATEWAY_ADDR, "%s", addr);
    }
    m->gateways[i].last_ms = now;
    reply_array(c, (long long)m->ngateways);
    for (size_t j = 0; j < m->ngateways; j++) reply_bulk_cstr(c, m->gateways[j].addr);
}

static const command gateway_commands[] = {
    {"moon.gateway", gateway_command, 2, CMD_FAST | CMD_MEMBER, 0, 0, 0, 0, "moonkv", "0.1.0",
     "Announce a gateway's RESP address; answers every live gateway", "host:port"},
};

void master_register_gateway_commands(server *srv) {
    commands_register(srv, gateway_commands, sizeof gateway_commands / sizeof gateway_commands[0]);
}
