/* gateway/announce.c - MOON.GATEWAY every heartbeat (see announce.h).
 *
 * The address announced is the RESP one clients use: bind:port, or, when
 * bound to every interface, the local address of the connection to the
 * master (the interface the cluster is reached by). The call is
 * synchronous with a short timeout, as the gateway's INFO calls are; a
 * failed one keeps the last list and retries at the next tick. */
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
#include "gateway/master_link.h"

#define ANNOUNCE_TIMEOUT_MS 250
#define ANNOUNCE_MAX_PEERS  64

struct gw_announce {
    server *srv;
    loop_timer *timer;
    redisContext *conn;
    resp_endpoint peers[ANNOUNCE_MAX_PEERS];
    size_t npeers;
};

static redisContext *master_conn(gw_announce *a) {
    return master_link(&a->conn, a->srv->cfg.master, a->srv->cfg.master_auth, ANNOUNCE_TIMEOUT_MS);
}

static int bound_to_all(const char *bind) {
    return strcmp(bind, "0.0.0.0") == 0 || strcmp(bind, "::") == 0 || bind[0] == '\0';
}

/* This gateway's RESP address as clients should dial it. */
static void own_address(gw_announce *a, redisContext *rc, char *out, size_t len) {
    const mkv_config *cfg = &a->srv->cfg;
    char ip[INET6_ADDRSTRLEN];
    snprintf(ip, sizeof ip, "%.45s", cfg->bind);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (bound_to_all(cfg->bind) && getsockname(rc->fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
        else if (ss.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof ip);
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

static void announce_now(gw_announce *a) {
    redisContext *rc = master_conn(a);
    if (!rc) return;
    char addr[96];
    own_address(a, rc, addr, sizeof addr);
    redisReply *r = redisCommand(rc, "MOON.GATEWAY %s", addr);
    if (r && r->type == REDIS_REPLY_ARRAY) keep_peers(a, r);
    else log_info("gateway: MOON.GATEWAY %s: %s", addr, r && r->str ? r->str : rc->errstr);
    freeReplyObject(r);
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
    free(a);
}

size_t gw_announce_peers(gw_announce *a, resp_endpoint *out, size_t max) {
    size_t n = a->npeers < max ? a->npeers : max;
    memcpy(out, a->peers, n * sizeof *out);
    return n;
}
