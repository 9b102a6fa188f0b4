/* backend/engine.c - see engine.h: the engine as threads share it.
 *
 * The transfers themselves run on contexts (engine_ctx.h): a context's
 * transports are driven by one thread at a time, so a transfer takes a
 * free one for its duration, a new one while fewer than cfg.contexts
 * exist (made by the caller's te_transports_fn), else it waits for one.
 * One thread alone only ever uses the first. What must be the same on
 * every context lives here once: the nodes' addresses and the registered
 * buffers (a new context is given all of them; a change reaches every
 * context before the call returns, waiting for a transfer running on
 * one), and the counters. */
#include "backend/engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/engine_ctx.h"
#include "core/util.h"

#define GROW_RETRY_MS 1000   /* after a context could not be made */

typedef struct snode {
    uint32_t id;
    int naddrs;
    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
} snode;

typedef struct sregion {
    void *addr;
    size_t len;
} sregion;

struct te_engine {
    te_engine_config cfg;
    ectx_counts counts;
    /* Lock order: setup_mu, then a context's own, then pool_mu. */
    pthread_mutex_t setup_mu;     /* nodes, regions, the list of contexts grows */
    snode *nodes;
    int nnodes;
    sregion *regions;
    int nregions;
    pthread_mutex_t pool_mu;      /* idle, nctx, growing */
    pthread_cond_t idle_cv;
    ectx *ctx[TE_ENGINE_MAX_CONTEXTS];
    ectx *idle[TE_ENGINE_MAX_CONTEXTS];
    int nctx, nidle, growing, max_ctx;
    uint64_t grow_failed_ms;
    te_transports_fn make;
    void *make_arg;
    void (*make_free)(void *arg);
};

te_engine *te_engine_create(te_transport *t, const te_engine_config *cfg) {
    te_engine *e = xcalloc(1, sizeof *e);
    if (cfg) e->cfg = *cfg;
    e->max_ctx = e->cfg.contexts < 1 ? 1 : e->cfg.contexts > TE_ENGINE_MAX_CONTEXTS ? TE_ENGINE_MAX_CONTEXTS
                                                                                     : e->cfg.contexts;
    pthread_mutex_init(&e->setup_mu, NULL);
    pthread_mutex_init(&e->pool_mu, NULL);
    pthread_cond_init(&e->idle_cv, NULL);
    e->ctx[e->nctx++] = ectx_create(t, cfg, &e->counts);
    e->idle[e->nidle++] = e->ctx[0];
    return e;
}

void te_engine_set_maker(te_engine *e, te_transports_fn make, void *arg, void (*free_arg)(void *arg)) {
    pthread_mutex_lock(&e->setup_mu);
    e->make = make;
    e->make_arg = arg;
    e->make_free = free_arg;
    pthread_mutex_unlock(&e->setup_mu);
}

void te_engine_destroy(te_engine *e) {
    if (!e) return;
    for (int i = 0; i < e->nctx; i++) ectx_destroy(e->ctx[i]);
    if (e->make_free) e->make_free(e->make_arg);
    free(e->nodes);
    free(e->regions);
    pthread_mutex_destroy(&e->setup_mu);
    pthread_mutex_destroy(&e->pool_mu);
    pthread_cond_destroy(&e->idle_cv);
    free(e);
}

int te_engine_add_transport(te_engine *e, te_transport *t, char *err, size_t errlen) {
    pthread_mutex_lock(&e->setup_mu);
    int rc;
    if (e->nctx > 1) {   /* a maker makes the later contexts' */
        snprintf(err, errlen, "engine: transports are added before a second context");
        t->ops->destroy(t);
        rc = TE_EINVAL;
    } else {
        rc = ectx_add_transport(e->ctx[0], t, err, errlen);
    }
    pthread_mutex_unlock(&e->setup_mu);
    return rc;
}

/* ---- what every context holds ---- */

static snode *snode_find(te_engine *e, uint32_t id) {
    for (int i = 0; i < e->nnodes; i++)
        if (e->nodes[i].id == id) return &e->nodes[i];
    return NULL;
}

int te_engine_add_node(te_engine *e, uint32_t node_id, const char *const *addrs, int naddrs,
                       char *err, size_t errlen) {
    pthread_mutex_lock(&e->setup_mu);
    int rc = ectx_add_node(e->ctx[0], node_id, addrs, naddrs, err, errlen);   /* checks them */
    for (int i = 1; i < e->nctx && rc == TE_OK; i++) {   /* the same kinds of transport: they take them too */
        char why[64];
        ectx_add_node(e->ctx[i], node_id, addrs, naddrs, why, sizeof why);
    }
    if (rc == TE_OK) {
        snode *n = snode_find(e, node_id);
        if (!n) {
            e->nodes = xrealloc(e->nodes, (size_t)(e->nnodes + 1) * sizeof *e->nodes);
            n = &e->nodes[e->nnodes++];
        }
        n->id = node_id;
        n->naddrs = naddrs;
        for (int a = 0; a < naddrs; a++) snprintf(n->addrs[a], sizeof n->addrs[a], "%s", addrs[a]);
    }
    pthread_mutex_unlock(&e->setup_mu);
    return rc;
}

void te_engine_remove_node(te_engine *e, uint32_t node_id) {
    pthread_mutex_lock(&e->setup_mu);
    for (int i = 0; i < e->nctx; i++) ectx_remove_node(e->ctx[i], node_id);
    snode *n = snode_find(e, node_id);
    if (n) *n = e->nodes[--e->nnodes];
    pthread_mutex_unlock(&e->setup_mu);
}

int te_engine_register_buffer(te_engine *e, void *addr, size_t len, char *err, size_t errlen) {
    pthread_mutex_lock(&e->setup_mu);
    int rc = TE_OK, i;
    for (i = 0; i < e->nctx && rc == TE_OK; i++) rc = ectx_register(e->ctx[i], addr, len, err, errlen);
    if (rc != TE_OK) {
        for (int k = 0; k < i - 1; k++) ectx_unregister(e->ctx[k], addr);
    } else {
        e->regions = xrealloc(e->regions, (size_t)(e->nregions + 1) * sizeof *e->regions);
        e->regions[e->nregions++] = (sregion){addr, len};
    }
    pthread_mutex_unlock(&e->setup_mu);
    return rc;
}

void te_engine_unregister_buffer(te_engine *e, void *addr) {
    pthread_mutex_lock(&e->setup_mu);
    for (int i = 0; i < e->nctx; i++) ectx_unregister(e->ctx[i], addr);
    for (int i = 0; i < e->nregions; i++)
        if (e->regions[i].addr == addr) {
            e->regions[i] = e->regions[--e->nregions];
            break;
        }
    pthread_mutex_unlock(&e->setup_mu);
}

/* ---- the pool of contexts ---- */

/* A context with the maker's transports (the same kinds, in the same
 * order, as the first one's: the counters are kept by that index), every
 * node and every registered buffer; NULL if any part fails. setup_mu held. */
static ectx *ctx_new(te_engine *e) {
    te_transport *t[TE_ENGINE_MAX_TRANSPORTS];
    const te_transport_ops *want[TE_ENGINE_MAX_TRANSPORTS];
    char err[200];
    int nwant = ectx_transport_kinds(e->ctx[0], want);
    int nt = e->make(e->make_arg, t, TE_ENGINE_MAX_TRANSPORTS, err, sizeof err);
    if (nt != nwant) {
        while (nt-- > 0) t[nt]->ops->destroy(t[nt]);
        return NULL;
    }
    for (int i = 0; i < nt; i++)
        if (t[i]->ops != want[i]) {
            for (int k = 0; k < nt; k++) t[k]->ops->destroy(t[k]);
            return NULL;
        }
    ectx *x = ectx_create(t[0], &e->cfg, &e->counts);
    int ok = 1;
    for (int i = 1; i < nt; i++)
        if (!ok || ectx_add_transport(x, t[i], err, sizeof err) != TE_OK) {
            if (ok) ok = 0;
            else t[i]->ops->destroy(t[i]);
        }
    for (int i = 0; ok && i < e->nregions; i++)
        ok = ectx_register(x, e->regions[i].addr, e->regions[i].len, err, sizeof err) == TE_OK;
    for (int i = 0; ok && i < e->nnodes; i++) {
        const char *addrs[TE_MAX_PATHS];
        for (int a = 0; a < e->nodes[i].naddrs; a++) addrs[a] = e->nodes[i].addrs[a];
        ectx_add_node(x, e->nodes[i].id, addrs, e->nodes[i].naddrs, err, sizeof err);   /* the first took them */
    }
    if (!ok) {
        ectx_destroy(x);
        return NULL;
    }
    return x;
}

/* A new context for the caller (pool_mu held, released meanwhile), or NULL. */
static ectx *grow(te_engine *e) {
    e->growing++;
    pthread_mutex_unlock(&e->pool_mu);
    pthread_mutex_lock(&e->setup_mu);
    ectx *x = ctx_new(e);
    pthread_mutex_lock(&e->pool_mu);
    if (x) e->ctx[e->nctx++] = x;   /* listed under both locks: a registration reaches it */
    else e->grow_failed_ms = mono_ms();
    e->growing--;
    pthread_mutex_unlock(&e->setup_mu);
    return x;
}

static int may_grow(const te_engine *e) {
    return e->make && e->nctx + e->growing < e->max_ctx &&
           (!e->grow_failed_ms || mono_ms() - e->grow_failed_ms >= GROW_RETRY_MS);
}

static ectx *take(te_engine *e) {
    ectx *x = NULL;
    pthread_mutex_lock(&e->pool_mu);
    while (!x) {
        if (e->nidle) x = e->idle[--e->nidle];
        else if (may_grow(e)) x = grow(e);
        else pthread_cond_wait(&e->idle_cv, &e->pool_mu);
    }
    pthread_mutex_unlock(&e->pool_mu);
    return x;
}

static void give(te_engine *e, ectx *x) {
    pthread_mutex_lock(&e->pool_mu);
    e->idle[e->nidle++] = x;
    pthread_cond_signal(&e->idle_cv);
    pthread_mutex_unlock(&e->pool_mu);
}

/* ---- transfers ---- */

static int transfer(te_engine *e, te_object *objs, int n, int writing, char *err, size_t errlen) {
    ectx *x = take(e);
    int rc = ectx_transfer(x, objs, n, writing, err, errlen);
    give(e, x);
    return rc;
}

int te_engine_write_batch(te_engine *e, te_object *objs, int n, char *err, size_t errlen) {
    return transfer(e, objs, n, 1, err, errlen);
}

int te_engine_read_batch(te_engine *e, te_object *objs, int n, char *err, size_t errlen) {
    return transfer(e, objs, n, 0, err, errlen);
}

int te_engine_write(te_engine *e, const void *buf, uint64_t len, const te_replica *reps, int nrep,
                    char *err, size_t errlen) {
    te_object o = { .buf = (void *)buf, .len = len, .reps = reps, .nrep = nrep };
    return transfer(e, &o, 1, 1, err, errlen);
}

int te_engine_read(te_engine *e, void *buf, uint64_t len, const te_replica *reps, int nrep,
                   char *err, size_t errlen) {
    te_object o = { .buf = buf, .len = len, .reps = reps, .nrep = nrep };
    return transfer(e, &o, 1, 0, err, errlen);
}

static int now(te_engine *e, te_op op, te_object *objs, int n) {
    ectx *x = take(e);
    int done = ectx_now(x, op, objs, n);
    give(e, x);
    return done;
}

int te_engine_read_now(te_engine *e, te_object *objs, int n) { return now(e, TE_READ, objs, n); }

int te_engine_write_now(te_engine *e, te_object *objs, int n) { return now(e, TE_WRITE, objs, n); }

int te_engine_connect_local(te_engine *e) {
    ectx *x = take(e);
    int up = ectx_connect_local(x);
    give(e, x);
    return up;
}

/* ---- counters ---- */

static uint64_t load(const uint64_t *c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }

void te_engine_get_stats(te_engine *e, te_engine_stats *out) {
    out->units = load(&e->counts.units);
    out->retries = load(&e->counts.retries);
    out->failovers = load(&e->counts.failovers);
    out->bytes = load(&e->counts.bytes);
}

uint64_t te_engine_bytes_via(te_engine *e, const char *transport) {
    const te_transport_ops *ops[TE_ENGINE_MAX_TRANSPORTS];
    pthread_mutex_lock(&e->setup_mu);   /* the first context's transports change only under it */
    int nt = ectx_transport_kinds(e->ctx[0], ops);
    pthread_mutex_unlock(&e->setup_mu);
    for (int i = 0; i < nt; i++)   /* a label asked for by the caller, not a route */
        if (strcmp(ops[i]->name, transport) == 0) return load(&e->counts.bytes_via[i]);
    return 0;
}

int te_engine_segments(te_engine *e) {
    pthread_mutex_lock(&e->setup_mu);
    int seg = ectx_segments(e->ctx[0]);
    pthread_mutex_unlock(&e->setup_mu);
    return seg;
}

int te_engine_contexts(te_engine *e) {
    pthread_mutex_lock(&e->pool_mu);
    int n = e->nctx;
    pthread_mutex_unlock(&e->pool_mu);
    return n;
}
