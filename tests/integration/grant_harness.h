/* tests/integration/grant_harness.h - playing a client that kept a write
 * grant: take a placement from a master (MOON.PUTSTART, not ended), note
 * where that master said its nodes are, and later write with it straight
 * to the nodes. The fencing tests use it to show that nodes refuse the
 * grants of a master that is no longer theirs (deposed, restarted). */
#ifndef MKV_GRANT_HARNESS_H
#define MKV_GRANT_HARNESS_H

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/engine.h"
#include "cluster_harness.h"   /* h_info_field */
#include "client/client.h"   /* placement decoding */
#include "transports/registry.h"

#define GH_MAX_NODES 16

typedef struct gh_grant {
    mkv_placement pl;
    uint64_t len;
    int nnodes;
    uint32_t ids[GH_MAX_NODES];
    char addrs[GH_MAX_NODES][TE_ADDR_LEN];   /* first data address of ids[i] */
} gh_grant;

/* MOON.TOPOLOGY of c: each node's id and first address. */
static inline int gh_learn_nodes(redisContext *c, gh_grant *g) {
    redisReply *r = redisCommand(c, "MOON.TOPOLOGY");
    int ok = r && r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements && g->nnodes < GH_MAX_NODES; i++) {
        const redisReply *n = r->element[i];
        if (n->type != REDIS_REPLY_ARRAY || n->elements != 3 || n->element[2]->elements == 0) continue;
        g->ids[g->nnodes] = (uint32_t)n->element[0]->integer;
        snprintf(g->addrs[g->nnodes++], TE_ADDR_LEN, "%s", n->element[2]->element[0]->str);
    }
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* A write grant for key (len bytes, replicas) from the master on port. */
static inline int gh_take(int port, const char *key, uint64_t len, int replicas, gh_grant *g) {
    memset(g, 0, sizeof *g);
    g->len = len;
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err || h_master_prove(c, "") != 0) {   /* a client's connection proves */
        if (c) redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "MOON.PUTSTART %s %llu REPLICAS %d", key, (unsigned long long)len,
                                 replicas);
    mkv_client dummy;
    memset(&dummy, 0, sizeof dummy);
    int rc = r && r->type == REDIS_REPLY_ARRAY
                 ? (mkv_placement_decode(&dummy, r, len, TE_CAP_WRITE, &g->pl) == MKV_OK ? 0 : -1)
                 : -1;
    freeReplyObject(r);
    if (rc == 0) rc = gh_learn_nodes(c, g);
    redisFree(c);
    return rc;
}

/* Write buf with the grant to every replica's nodes, at the addresses the
 * granting master gave: TE_OK, or the first refusal (TE_EAUTH: the node
 * did not honour the grant). */
static inline int gh_write(const gh_grant *g, const void *buf, char *err, size_t errlen) {
    te_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.timeout_ms = 3000;
    te_transport *t = te_transport_create("tcp", &cfg, err, errlen);
    te_engine *e = t ? te_engine_create(t, NULL) : NULL;
    if (!e) return TE_EIO;
    for (int i = 0; i < g->nnodes; i++) {
        const char *addrs[1] = {g->addrs[i]};
        te_engine_add_node(e, g->ids[i], addrs, 1, err, errlen);
    }
    int st = TE_OK;
    for (uint32_t i = 0; st == TE_OK && i < g->pl.nreplicas; i++) {
        te_replica rep = {.ext = g->pl.replicas[i].extents, .next = (int)g->pl.replicas[i].nextents};
        st = te_engine_write(e, buf, g->len, &rep, 1, err, errlen);
    }
    te_engine_destroy(e);
    return st;
}

/* data_rejected of INFO node, summed over the nodes on ports first..first+n-1. */
static inline long long gh_rejected(int first_port, int n) {
    long long sum = 0;
    for (int i = 0; i < n; i++) {
        redisContext *c = h_redis(first_port + i);
        sum += c ? h_info_field(c, "node", "data_rejected") : 0;
        if (c) redisFree(c);
    }
    return sum;
}

static inline void gh_free(gh_grant *g) { mkv_placement_free(&g->pl); }

/* Write with g (then freed) to the nodes on ports first..first+n-1: 1 if
 * they refused it (TE_EAUTH, counted in their data_rejected), else 0
 * with what happened in err. */
static inline int gh_refused(gh_grant *g, int first_port, int n, char *err, size_t errlen) {
    char *data = calloc(1, g->len);
    long long before = gh_rejected(first_port, n);
    int st = data ? gh_write(g, data, err, errlen) : TE_EIO;
    long long after = gh_rejected(first_port, n);
    free(data);
    gh_free(g);
    if (st == TE_EAUTH && after > before) return 1;
    if (st == TE_OK) snprintf(err, errlen, "the write went through");
    return 0;
}

#endif
