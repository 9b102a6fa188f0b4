/* gateway/announce.c - MOON.GATEWAY every heartbeat (see announce.h).
 *
 * The address announced is the RESP one clients use: bind:port, or, when
 * bound to every interface, the local address of the client's master
 * connection (the interface the cluster is reached by). The call goes
 * over the store's asynchronous master connection (the process's
 * client's face), so a master that does not answer stalls no one (one
 * call is out at a time: a tick while it is skips). Over master groups
 * there is none: a short synchronous connection to --master, if given,
 * announces instead (registration, not the data path). A failed one
 * keeps the last list and retries at the next tick. */
#include "gateway/announce.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/log.h"
#include "core/util.h"
#include "gateway/master_async.h"
#include "gateway/store_cluster.h"
#include "link/master_link.h"
#include "proto/cmd.h"

#define ANNOUNCE_TIMEOUT_MS 250
#define ANNOUNCE_MAX_PEERS  64

struct gw_announce {
    server *srv;
    loop_timer *timer;
    redisContext *conn;       /* the synchronous path's */
    int asking;               /* a MOON.GATEWAY is out on the asynchronous connection */
    int stopped;              /* stopped while it was: its answer frees this */
    resp_endpoint peers[ANNOUNCE_MAX_PEERS];
    size_t npeers;
};

/* The synchronous path's connection, reopened after an error (AUTH and
 * the cluster-secret proof first, as every connection to the master). */
static redisContext *master_conn(gw_announce *a) {
    const mkv_config *cfg = &a->srv->cfg;
    if (a->conn && !a->conn->err) return a->conn;
    if (a->conn) redisFree(a->conn);
    char err[512];
    /* a refused password or proof is worth a line; an unreachable master is not */
    if (proto_master_open(&a->conn, cfg->master, cfg->master_auth, cfg->cluster_secret, ANNOUNCE_TIMEOUT_MS,
                          ANNOUNCE_TIMEOUT_MS, err, sizeof err) == PROTO_LINK_EAUTH)
        log_warning("gateway: %s", err);
    return a->conn;
}

static int bound_to_all(const char *bind) {
    return strcmp(bind, "0.0.0.0") == 0 || strcmp(bind, "::") == 0 || bind[0] == '\0';
}

/* This gateway's RESP address as clients should dial it; local: the
 * master connection's local address, or NULL. */
static void own_address(gw_announce *a, const struct sockaddr_storage *local, char *out, size_t len) {
    const mkv_config *cfg = &a->srv->cfg;
    char ip[INET6_ADDRSTRLEN];
    snprintf(ip, sizeof ip, "%.45s", cfg->bind);
    if (local && bound_to_all(cfg->bind)) {
        if (local->ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)local)->sin_addr, ip, sizeof ip);
        else if (local->ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)local)->sin6_addr, ip, sizeof ip);
    }
    snprintf(out, len, "%s:%d", ip, cfg->port);
}

static void keep_peers(gw_announce *a, const redisReply *r) {
    a->npeers = 0;
    for (size_t i = 0; i < r->elements && a->npeers < ANNOUNCE_MAX_PEERS; i++) {
        const redisReply *e = r->element[i];
        resp_endpoint *ep = &a->peers[a->npeers];
        if (e->type != REDIS_REPLY_STRING) continue;
        if (parse_hostport(e->str, ep->host, sizeof ep->host, &ep->port) == 0) a->npeers++;
    }
}

/* MOON.GATEWAY's answer: the gateways the master knows. */
static void took(gw_announce *a, const redisReply *r, const char *err) {
    if (r && r->type == REDIS_REPLY_ARRAY) keep_peers(a, r);
    else log_info("gateway: %s: %s", PROTO_VERB_GATEWAY, r && r->str ? r->str : err);
}

static void announce_sync(gw_announce *a) {
    redisContext *rc = master_conn(a);
    if (!rc) return;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[96];
    own_address(a, getsockname(rc->fd, (struct sockaddr *)&ss, &sl) == 0 ? &ss : NULL, addr, sizeof addr);
    proto_cmd cmd;
    proto_cmd_gateway(&cmd, addr);
    redisReply *r = redisCommandArgv(rc, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    took(a, r, rc->errstr);
    freeReplyObject(r);
}

/* Its answer's callback: 0 once freed (stopped meanwhile). */
static int answer_back(gw_announce *a) {
    a->asking = 0;
    if (!a->stopped) return 1;
    free(a);
    return 0;
}

static void announced(const redisReply *r, void *ctx) {
    gw_announce *a = ctx;
    if (answer_back(a)) took(a, r, "no answer");
}

static void announce_over(gw_announce *a, master_async *ma, int may_open);

/* The connection is open now (its PING came back): announce by it. */
static void opened(const redisReply *r, void *ctx) {
    gw_announce *a = ctx;
    if (answer_back(a) && r) announce_over(a, cluster_store_master(a->srv->store), 0);
}

/* Bound to all without the connection's address (none open now): a PING
 * opens it, once per chain (may_open), and the announce follows it. */
static void announce_over(gw_announce *a, master_async *ma, int may_open) {
    struct sockaddr_storage ss;
    char addr[96];
    int have = master_async_local_addr(ma, &ss) == 0;
    if (!have && bound_to_all(a->srv->cfg.bind)) {
        const char *ping = "PING";
        size_t len = 4;
        if (may_open && master_async_send(ma, 1, &ping, &len, opened, a) == 0) a->asking = 1;
        return;
    }
    own_address(a, have ? &ss : NULL, addr, sizeof addr);
    proto_cmd cmd;
    proto_cmd_gateway(&cmd, addr);
    if (master_async_send(ma, cmd.argc, cmd.argv, cmd.lens, announced, a) == 0) a->asking = 1;
    proto_cmd_free(&cmd);
}

static void announce_now(gw_announce *a) {
    master_async *ma = cluster_store_master(a->srv->store);
    if (!ma) announce_sync(a);   /* master groups */
    else if (!a->asking) announce_over(a, ma, 1);
}

static void tick(event_loop *el, void *data) { announce_now(data); }

gw_announce *gw_announce_start(server *srv) {
    gw_announce *a = xcalloc(1, sizeof *a);
    a->srv = srv;
    a->timer = loop_timer_create(srv->loop, tick, a);
    loop_timer_start(a->timer, srv->cfg.heartbeat_ms, srv->cfg.heartbeat_ms);
    announce_now(a);
    return a;
}

void gw_announce_stop(gw_announce *a) {
    if (!a) return;
    loop_timer_free(a->timer);
    if (a->conn) redisFree(a->conn);
    if (a->asking) a->stopped = 1;   /* the store's connection answers it, NULL at the latest */
    else free(a);
}

size_t gw_announce_peers(gw_announce *a, resp_endpoint *out, size_t max) {
    size_t n = a->npeers < max ? a->npeers : max;
    memcpy(out, a->peers, n * sizeof *out);
    return n;
}
