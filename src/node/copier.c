/* node/copier.c - see copier.h.
 *
 * One thread, one engine: tasks run one after another, which keeps the
 * node's outgoing copy traffic from starving the clients it serves. The
 * engine learns other nodes' data addresses from MOON.TOPOLOGY on a
 * connection of its own (the control connection is the control
 * thread's). */
#include "node/copier.h"

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "node/control.h"
#include "proto/master_link.h"
#include "transports/registry.h"

#define COPIER_IO_TIMEOUT_MS 2000
#define COPIER_MAX_QUEUE     4096   /* tasks waiting; more are failed at once */
#define COPIER_MAX_NODE_ID   (1u << 20)

struct node_copier {
    node *n;
    jobqueue *q;
    /* Copier thread only. */
    te_engine *engine;
    redisContext *master;
    /* Nodes the engine knows. A master never reuses an id and a node
     * that registers again gets a new one, so an id's addresses never
     * change - until the master restarts, which is a new registration
     * of ours: the set is forgotten when the task generation moves. */
    uint8_t *known;
    size_t nknown;
    uint64_t known_gen;
};

static int is_known(const node_copier *c, uint32_t id) { return id < c->nknown && c->known[id]; }

static void set_known(node_copier *c, uint32_t id) {
    if (id >= c->nknown) {
        size_t n = (size_t)id * 2 + 16;
        c->known = xrealloc(c->known, n);
        memset(c->known + c->nknown, 0, n - c->nknown);
        c->nknown = n;
    }
    c->known[id] = 1;
}

/* ---- the engine and where nodes are ---- */

/* The engine for copies: shm alone reaches only this host, so a node
 * configured for shm copies with auto (shm for same-host sources, the
 * network for the rest). */
static const char *copy_transport(const char *configured) {
    return strcmp(configured, "shm") == 0 ? "auto" : configured;
}

static int engine_ready(node_copier *c, char *err, size_t errlen) {
    if (c->engine) return 0;
    te_config tc;
    memset(&tc, 0, sizeof tc);
    snprintf(tc.secret, sizeof tc.secret, "%s", c->n->srv->cfg.cluster_secret);
    te_config_defaults(&tc);
    c->engine = te_engine_create_named(copy_transport(c->n->srv->cfg.transport), &tc, NULL, err, errlen);
    if (!c->engine) return -1;
    if (te_engine_register_buffer(c->engine, c->n->seg.base, c->n->seg.size, err, errlen) != 0) {
        te_engine_destroy(c->engine);
        c->engine = NULL;
        return -1;
    }
    return 0;
}

static void add_node(node_copier *c, const redisReply *e) {
    /* Ids are bounded by the master (PROTO_MAX_NODES); a wild one is ignored. */
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[0]->integer < 1 || e->element[0]->integer > COPIER_MAX_NODE_ID ||
        e->element[2]->type != REDIS_REPLY_ARRAY || is_known(c, (uint32_t)e->element[0]->integer))
        return;
    /* The engine sends each address to the transport of its form. */
    const char *addrs[TE_MAX_PATHS];
    int n = 0;
    const redisReply *list = e->element[2];
    for (size_t i = 0; i < list->elements && n < TE_MAX_PATHS; i++) {
        const redisReply *a = list->element[i];
        if (a->type == REDIS_REPLY_STRING && a->len > 0 && a->len < TE_ADDR_LEN) addrs[n++] = a->str;
    }
    char err[256];
    if (n == 0) return;
    if (te_engine_add_node(c->engine, (uint32_t)e->element[0]->integer, addrs, n, err, sizeof err) != 0)
        log_info("node: copier cannot use node %lld: %s", e->element[0]->integer, err);
    else
        set_known(c, (uint32_t)e->element[0]->integer);
}

/* MOON.TOPOLOGY into the engine, unless it knows every source already. */
static int learn_topology(node_copier *c, const node_task *t, char *err, size_t errlen) {
    if (t->gen != c->known_gen) {
        if (c->known) memset(c->known, 0, c->nknown);
        c->known_gen = t->gen;
    }
    int all_known = 1;
    for (int i = 0; i < t->nsrc && all_known; i++) all_known = is_known(c, t->src[i].node_id);
    if (all_known) return 0;
    const mkv_config *cfg = &c->n->srv->cfg;
    if (!c->master) {
        /* The master the control thread last reached (the leader, with etcd). */
        char addr[CONFIG_STR_MAX];
        pthread_mutex_lock(&c->n->mu);
        snprintf(addr, sizeof addr, "%s", c->n->status.master);
        pthread_mutex_unlock(&c->n->mu);
        if (proto_master_open(&c->master, addr[0] ? addr : cfg->master, cfg->master_auth,
                              COPIER_IO_TIMEOUT_MS, COPIER_IO_TIMEOUT_MS, err, errlen) != PROTO_LINK_OK)
            return -1;
    }
    redisReply *r = redisCommand(c->master, "MOON.TOPOLOGY");
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "MOON.TOPOLOGY: %s", r ? "unexpected reply" : c->master->errstr);
        if (r) freeReplyObject(r);
        redisFree(c->master);
        c->master = NULL;
        return -1;
    }
    for (size_t i = 0; i < r->elements; i++) add_node(c, r->element[i]);
    freeReplyObject(r);
    return 0;
}

/* ---- one task ---- */

/* A task of an earlier registration must not write: the master that
 * placed it is gone or has declared us dead, and the space may belong
 * to someone else by now. */
static int task_current(node_copier *c, const node_task *t) {
    pthread_mutex_lock(&c->n->mu);
    int cur = c->n->status.registrations == t->gen;
    pthread_mutex_unlock(&c->n->mu);
    return cur;
}

static int run_task(node_copier *c, const node_task *t, char *err, size_t errlen) {
    uint64_t now = wall_ms();
    if (!task_current(c, t)) {
        snprintf(err, errlen, "from an earlier registration");
        return -1;
    }
    /* Our own segment: the master's caps and our bounds, before any byte. */
    for (int i = 0; i < t->ndst; i++) {
        const te_extent *d = &t->dst[i];
        int st = te_cap_check(&d->cap, t->cap_key, t->cap_term, t->node_id, TE_WRITE, d->offset,
                              d->length, now);
        if (st == TE_OK && (d->offset > c->n->seg.size || d->length > c->n->seg.size - d->offset))
            st = TE_ERANGE;
        if (st == TE_OK) st = node_data_claim(c->n->data, &d->cap);
        if (st != TE_OK) {
            snprintf(err, errlen, "destination %d refused: %s", i, te_strerror(st));
            return -1;
        }
    }
    if (engine_ready(c, err, errlen) != 0 || learn_topology(c, t, err, errlen) != 0) return -1;
    te_extent *piece = xcalloc((size_t)t->nsrc, sizeof *piece);
    uint64_t pos = 0;
    int rc = 0;
    for (int i = 0; i < t->ndst && rc == 0; i++) {
        const te_extent *d = &t->dst[i];
        if (!task_current(c, t) || wall_ms() >= d->cap.expiry_ms) {
            snprintf(err, errlen, "registration changed or caps expired mid-copy");
            rc = -1;
            break;
        }
        te_replica rep = {piece, node_task_src_range(t, pos, d->length, piece)};
        char *into = (char *)c->n->seg.base + d->offset;
        if (te_engine_read(c->engine, into, d->length, &rep, 1, err, errlen) != TE_OK) rc = -1;
        pos += d->length;
    }
    free(piece);
    return rc;
}

static node_task *task_of(jq_job *j) { return (node_task *)((char *)j - offsetof(node_task, job)); }

/* On the copier thread: one task, reported and freed. */
static void copy_job(jq_job *j, void *arg) {
    node_copier *c = arg;
    node_task *t = task_of(j);
    char err[256] = "";
    int ok = run_task(c, t, err, sizeof err) == 0;
    if (ok) {
        pthread_mutex_lock(&c->n->mu);
        c->n->status.bytes_copied += t->len;
        pthread_mutex_unlock(&c->n->mu);
        log_info("node: copy task %llu done (%llu bytes)", (unsigned long long)t->id,
                 (unsigned long long)t->len);
    } else {
        log_warning("node: copy task %llu failed: %s", (unsigned long long)t->id, err);
    }
    node_control_task_done(c->n->ctl, t->gen, t->id, ok);
    node_task_free(t);
}

node_copier *node_copier_start(node *n) {
    node_copier *c = xcalloc(1, sizeof *c);
    c->n = n;
    void *arg = c;
    char err[128];
    jobqueue_config cfg = {.nthreads = 1, .thread_arg = &arg, .max_pending = COPIER_MAX_QUEUE};
    if (!(c->q = jobqueue_start(&cfg, err, sizeof err))) log_warning("node: no copier: %s", err);
    return c;
}

void node_copier_submit(node_copier *c, node_task *t) {
    t->job.run = copy_job;
    if (!c->q || jobqueue_submit(c->q, &t->job) != 0) {
        node_control_task_done(c->n->ctl, t->gen, t->id, 0);
        node_task_free(t);
    }
}

void node_copier_stop(node_copier *c) {
    if (!c) return;
    if (c->q) {
        jobqueue_stop(c->q);
        for (jq_job *j = jobqueue_cancel(c->q), *next; j; j = next) {
            next = j->next;
            node_task_free(task_of(j));
        }
        jobqueue_free(c->q);
    }
    if (c->engine) te_engine_destroy(c->engine);
    if (c->master) redisFree(c->master);
    free(c->known);
    free(c);
}
