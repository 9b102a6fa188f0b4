/* server/t_cluster.c - CLUSTER and SENTINEL, so cluster-mode and
 * sentinel-mode Redis clients find moonkv.
 *
 * moonkv has no slots: any server of a store (the standalone server, or
 * any gateway of one master) answers every key. So CLUSTER describes one
 * shard holding all 16384 slots, whose primary is the server asked (as
 * the client reached it) and whose replicas are its peers (the other
 * gateways the master knows, srv->role_peers); a cluster client then
 * never sees MOVED. SENTINEL names the server asked as the master of
 * cfg.sentinel_master_name, or of any name when it is unset: it answers,
 * so it is live. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/siphash.h"
#include "core/util.h"
#include "server/commands.h"

#define CLUSTER_SLOTS   16384
#define NODE_ID_LEN     40         /* hex, as Redis */
#define MAX_ENDPOINTS   64         /* this server and its peers */

typedef struct shard_node {
    resp_endpoint ep;
    char id[NODE_ID_LEN + 1];
} shard_node;

/* A stable id per address, so every gateway gives a peer the same id. */
static void node_id(const resp_endpoint *ep, char out[NODE_ID_LEN + 1]) {
    static const uint8_t key[SIPHASH_KEY_LEN] = "moonkv.node-id";
    char addr[96];
    int n = snprintf(addr, sizeof addr, "%s:%d", ep->host, ep->port);
    uint8_t h[20];
    siphash24_128(addr, (size_t)n, key, h);
    uint32_t crc = crc32c(0, addr, (size_t)n);
    memcpy(h + 16, &crc, 4);
    hex_encode(h, sizeof h, out);
}

/* c->laddr ("ip:port", the address the client reached) as an endpoint. */
static void self_endpoint(client *c, resp_endpoint *ep) {
    const char *colon = strrchr(c->laddr, ':');
    size_t n = colon ? (size_t)(colon - c->laddr) : 0;
    if (!colon || n == 0 || n >= sizeof ep->host) {
        snprintf(ep->host, sizeof ep->host, "%.63s", c->srv->cfg.bind);
        ep->port = c->srv->cfg.port;
        return;
    }
    memcpy(ep->host, c->laddr, n);
    ep->host[n] = '\0';
    ep->port = atoi(colon + 1);
}

static int same_endpoint(const resp_endpoint *a, const resp_endpoint *b) {
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* This server first, then each peer once. Returns how many. */
static size_t shard_nodes(client *c, shard_node *out) {
    resp_endpoint peers[MAX_ENDPOINTS - 1];
    size_t npeers = c->srv->role_peers ? c->srv->role_peers(c->srv, peers, MAX_ENDPOINTS - 1) : 0;
    size_t n = 0;
    self_endpoint(c, &out[n++].ep);
    for (size_t i = 0; i < npeers && n < MAX_ENDPOINTS; i++) {
        int dup = 0;
        for (size_t j = 0; j < n && !dup; j++) dup = same_endpoint(&out[j].ep, &peers[i]);
        if (!dup) out[n++].ep = peers[i];
    }
    for (size_t i = 0; i < n; i++) node_id(&out[i].ep, out[i].id);
    return n;
}

static void reply_kv_str(client *c, const char *k, const char *v) {
    reply_bulk_cstr(c, k);
    reply_bulk_cstr(c, v);
}

static void reply_kv_int(client *c, const char *k, long long v) {
    reply_bulk_cstr(c, k);
    reply_integer(c, v);
}

/* ---- CLUSTER ---- */

static void cluster_slots(client *c) {
    shard_node nodes[MAX_ENDPOINTS];
    size_t n = shard_nodes(c, nodes);
    reply_array(c, 1);
    reply_array(c, 2 + (long long)n);
    reply_integer(c, 0);
    reply_integer(c, CLUSTER_SLOTS - 1);
    for (size_t i = 0; i < n; i++) {
        reply_array(c, 3);
        reply_bulk_cstr(c, nodes[i].ep.host);
        reply_integer(c, nodes[i].ep.port);
        reply_bulk_cstr(c, nodes[i].id);
    }
}

static void cluster_shards(client *c) {
    shard_node nodes[MAX_ENDPOINTS];
    size_t n = shard_nodes(c, nodes);
    reply_array(c, 1);
    reply_map(c, 2);
    reply_bulk_cstr(c, "slots");
    reply_array(c, 2);
    reply_integer(c, 0);
    reply_integer(c, CLUSTER_SLOTS - 1);
    reply_bulk_cstr(c, "nodes");
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) {
        reply_map(c, 7);
        reply_kv_str(c, "id", nodes[i].id);
        reply_kv_int(c, "port", nodes[i].ep.port);
        reply_kv_str(c, "ip", nodes[i].ep.host);
        reply_kv_str(c, "endpoint", nodes[i].ep.host);
        reply_kv_str(c, "role", i == 0 ? "master" : "replica");
        reply_kv_int(c, "replication-offset", 0);
        reply_kv_str(c, "health", "online");
    }
}

static void cluster_info(client *c) {
    shard_node nodes[MAX_ENDPOINTS];
    size_t n = shard_nodes(c, nodes);
    char text[512];
    int len = snprintf(text, sizeof text,
                       "cluster_state:ok\r\ncluster_slots_assigned:%d\r\ncluster_slots_ok:%d\r\n"
                       "cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:%zu\r\n"
                       "cluster_size:1\r\ncluster_current_epoch:1\r\ncluster_my_epoch:1\r\n"
                       "cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n",
                       CLUSTER_SLOTS, CLUSTER_SLOTS, n);
    reply_verbatim(c, text, (size_t)len);
}

/* CLUSTER NODES: one line per node, this one flagged myself. */
static void cluster_nodes(client *c) {
    shard_node nodes[MAX_ENDPOINTS];
    size_t n = shard_nodes(c, nodes);
    char text[MAX_ENDPOINTS * 192];
    size_t off = 0;
    for (size_t i = 0; i < n && off < sizeof text; i++) {
        const shard_node *x = &nodes[i];
        off += (size_t)snprintf(text + off, sizeof text - off, "%s %s:%d@%d %s %s 0 0 1 connected%s\n",
                                x->id, x->ep.host, x->ep.port, x->ep.port,
                                i == 0 ? "myself,master" : "slave", i == 0 ? "-" : nodes[0].id,
                                i == 0 ? " 0-16383" : "");
    }
    if (off > sizeof text) off = sizeof text;
    reply_verbatim(c, text, off);
}

static void cluster_myid(client *c) {
    resp_endpoint ep;
    char id[NODE_ID_LEN + 1];
    self_endpoint(c, &ep);
    node_id(&ep, id);
    reply_bulk_cstr(c, id);
}

static const struct {
    const char *name;
    void (*proc)(client *c);
} cluster_subs[] = {
    {"slots", cluster_slots}, {"shards", cluster_shards}, {"info", cluster_info},
    {"nodes", cluster_nodes}, {"myid", cluster_myid},
};

static void reply_unknown_sub(client *c, const char *cmd) {
    const resp_arg *a = &c->argv[1];
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)(a->len > 64 ? 64 : a->len),
                 a->ptr, cmd);
}

static void cluster_command(client *c) {
    const resp_arg *a = &c->argv[1];
    for (size_t i = 0; i < sizeof cluster_subs / sizeof cluster_subs[0]; i++) {
        if (!strieq_len(a->ptr, a->len, cluster_subs[i].name)) continue;
        if (c->argc != 2) {
            reply_errorf(c, "ERR wrong number of arguments for 'cluster|%s' command", cluster_subs[i].name);
            return;
        }
        cluster_subs[i].proc(c);
        return;
    }
    reply_unknown_sub(c, "CLUSTER");
}

/* READONLY/READWRITE: every node of the shard serves reads and writes. */
static void readonly_command(client *c) { reply_ok(c); }

/* ---- SENTINEL ---- */

/* sentinel_master_name unset: every name is this server. Clients ask
 * under their own defaults (LMCache's REDIS_SERVICE_NAME, "mymaster"),
 * so a store that answers any name needs no setting on either side. */
static int names_master(client *c, const resp_arg *name) {
    const char *want = c->srv->cfg.sentinel_master_name;
    if (!want[0]) return 1;
    return name->len == strlen(want) && memcmp(name->ptr, want, name->len) == 0;
}

/* A name asked for by a client, kept so that MASTERS lists it too
 * (redis-py's Sentinel looks its service up in MASTERS alone). */
static void remember_name(client *c, const resp_arg *name) {
    server *srv = c->srv;
    if (srv->cfg.sentinel_master_name[0] || name->len == 0 || name->len >= SENTINEL_NAME_LEN) return;
    for (int i = 0; i < srv->nsentinel_names; i++)
        if (strlen(srv->sentinel_names[i]) == name->len && memcmp(srv->sentinel_names[i], name->ptr, name->len) == 0)
            return;
    int slot = srv->nsentinel_names < SENTINEL_NAMES ? srv->nsentinel_names++ : SENTINEL_NAMES - 1;
    memcpy(srv->sentinel_names[slot], name->ptr, name->len);
    srv->sentinel_names[slot][name->len] = 0;
}

/* The master's state as SENTINEL MASTERS / MASTER give it. */
static void reply_master_state(client *c, const char *name) {
    resp_endpoint ep;
    char id[NODE_ID_LEN + 1], port[16];
    self_endpoint(c, &ep);
    node_id(&ep, id);
    snprintf(port, sizeof port, "%d", ep.port);
    static const char *const fixed[][2] = {
        {"flags", "master"}, {"link-pending-commands", "0"}, {"link-refcount", "1"},
        {"last-ping-sent", "0"}, {"last-ok-ping-reply", "0"}, {"last-ping-reply", "0"},
        {"down-after-milliseconds", "30000"}, {"info-refresh", "0"}, {"role-reported", "master"},
        {"role-reported-time", "0"}, {"config-epoch", "0"}, {"num-slaves", "0"},
        {"num-other-sentinels", "0"}, {"quorum", "1"}, {"failover-timeout", "180000"},
        {"parallel-syncs", "1"},
    };
    size_t nfixed = sizeof fixed / sizeof fixed[0];
    reply_map(c, 4 + (long long)nfixed);
    reply_kv_str(c, "name", name);
    reply_kv_str(c, "ip", ep.host);
    reply_kv_str(c, "port", port);
    reply_kv_str(c, "runid", id);
    for (size_t i = 0; i < nfixed; i++) reply_kv_str(c, fixed[i][0], fixed[i][1]);
}

/* The names MASTERS lists when sentinel_master_name is unset, besides
 * the ones asked: Redis's example name and LMCache's default
 * REDIS_SERVICE_NAME, which redis-py's Sentinel looks up in MASTERS. */
static const char *const default_names[] = {"mymaster", "redismaster"};
#define NDEFAULT_NAMES (int)(sizeof default_names / sizeof default_names[0])

static int is_default_name(const char *name) {
    for (int i = 0; i < NDEFAULT_NAMES; i++)
        if (strcmp(name, default_names[i]) == 0) return 1;
    return 0;
}

/* MASTERS: the configured name, or the default names and every name asked so far. */
static void reply_masters(client *c) {
    server *srv = c->srv;
    if (srv->cfg.sentinel_master_name[0]) {
        reply_array(c, 1);
        reply_master_state(c, srv->cfg.sentinel_master_name);
        return;
    }
    int extra = 0;
    for (int i = 0; i < srv->nsentinel_names; i++) extra += !is_default_name(srv->sentinel_names[i]);
    reply_array(c, NDEFAULT_NAMES + extra);
    for (int i = 0; i < NDEFAULT_NAMES; i++) reply_master_state(c, default_names[i]);
    for (int i = 0; i < srv->nsentinel_names; i++)
        if (!is_default_name(srv->sentinel_names[i])) reply_master_state(c, srv->sentinel_names[i]);
}

static void sentinel_command(client *c) {
    const resp_arg *sub = &c->argv[1];
    int named = c->argc == 3 && names_master(c, &c->argv[2]);
    char name[SENTINEL_NAME_LEN];
    if (c->argc == 3) {
        remember_name(c, &c->argv[2]);
        size_t n = c->argv[2].len < sizeof name - 1 ? c->argv[2].len : sizeof name - 1;
        memcpy(name, c->argv[2].ptr, n);
        name[n] = 0;
    }
    if (strieq_len(sub->ptr, sub->len, "get-master-addr-by-name") && c->argc == 3) {
        if (!named) {
            reply_null(c);
            return;
        }
        resp_endpoint ep;
        char port[16];
        self_endpoint(c, &ep);
        snprintf(port, sizeof port, "%d", ep.port);
        reply_array(c, 2);
        reply_bulk_cstr(c, ep.host);
        reply_bulk_cstr(c, port);
    } else if (strieq_len(sub->ptr, sub->len, "masters") && c->argc == 2) {
        reply_masters(c);
    } else if (strieq_len(sub->ptr, sub->len, "master") && c->argc == 3) {
        if (named) reply_master_state(c, name);
        else reply_error(c, "ERR No such master with that name");
    } else if ((strieq_len(sub->ptr, sub->len, "replicas") || strieq_len(sub->ptr, sub->len, "slaves") ||
                strieq_len(sub->ptr, sub->len, "sentinels")) && c->argc == 3) {
        if (named) reply_array(c, 0);   /* moonkv keeps copies itself, no Redis replicas */
        else reply_error(c, "ERR No such master with that name");
    } else {
        reply_unknown_sub(c, "SENTINEL");
    }
}

static const command cluster_commands[] = {
    {"cluster", cluster_command, -2, CMD_READONLY | CMD_STALE, 0, 0, 0, 0, "cluster", "0.1.0",
     "One shard holding every slot: SLOTS, SHARDS, INFO, NODES, MYID",
     "SLOTS|SHARDS|INFO|NODES|MYID"},
    {"readonly", readonly_command, 1, CMD_FAST, 0, 0, 0, 0, "cluster", "0.1.0",
     "Accepted: every server of the shard serves reads", ""},
    {"readwrite", readonly_command, 1, CMD_FAST, 0, 0, 0, 0, "cluster", "0.1.0",
     "Accepted: every server of the shard serves writes", ""},
    {"sentinel", sentinel_command, -2, CMD_READONLY | CMD_STALE, 0, 0, 0, 0, "sentinel", "0.1.0",
     "This server as the master of sentinel_master_name (unset: of any name)",
     "GET-MASTER-ADDR-BY-NAME name|MASTERS|MASTER name|REPLICAS name|SENTINELS name"},
};

void t_cluster_register(server *srv) {
    commands_register(srv, cluster_commands, sizeof cluster_commands / sizeof cluster_commands[0]);
}
