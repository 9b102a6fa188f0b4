/* node/copier.c - see copier.h.
 *
 * One thread, one engine: the tasks of one heartbeat reply run as one
 * batch (the engine moves their extents together, many per round trip),
 * batches one after another, which keeps the node's copy traffic from
 * starving the clients it serves. The
 * engine learns other nodes' data addresses from MOON.TOPOLOGY on a
 * connection of its own (the control connection is the control
 * thread's). */
#include "node/copier.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "node/control.h"
#include "node/disk_store.h"
#include "node/disk_tier.h"
#include "proto/cmd.h"
#include "proto/replies.h"
#include "link/master_link.h"
#include "transports/registry.h"

#define COPIER_IO_TIMEOUT_MS 2000
#define COPIER_MAX_QUEUE     64     /* batches waiting; more are failed at once */
/* Bytes one engine call moves: the caps are checked between calls. */
#define COPIER_BATCH_BYTES   (64ULL << 20)
#define COPIER_MAX_NODE_ID   (1u << 20)

struct node_copier {
    node *n;
    jobqueue *q;
    atomic_int queued;          /* batches submitted and not finished */
    node_control *batch_ctl;    /* the control (group) of the batch being run */
    /* Copier thread only. */
    te_engine *engine;
    redisContext *master;
    char master_addr[CONFIG_STR_MAX];   /* where master is connected */
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
    /* Ids are bounded by the master (PROTO_MAX_NODES); a malformed entry is ignored. */
    proto_topo_node t;
    if (proto_dec_topo_node(e, &t) != 0 || t.id > COPIER_MAX_NODE_ID || is_known(c, t.id) || t.naddrs == 0) return;
    /* The engine sends each address to the transport of its form. */
    char err[256];
    if (te_engine_add_node(c->engine, t.id, t.addrs, t.naddrs, err, sizeof err) != 0)
        log_info("node: copier cannot use node %u: %s", t.id, err);
    else
        set_known(c, t.id);
}

/* The master the batch's group's control thread last reached (its
 * leader, with etcd): a shared node asks the group that sent the tasks,
 * so copies go on while another group's leader is away. */
static void batch_master(node_copier *c, const node_control *ctl, char *addr, size_t len) {
    node *n = c->n;
    const node_status *st = &n->status;
    for (int g = 0; g < n->ngroups; g++)
        if (n->groups[g].ctl == ctl) st = n->groups[g].st;
    pthread_mutex_lock(&n->mu);
    snprintf(addr, len, "%s", st->master[0] ? st->master : n->srv->cfg.master);
    pthread_mutex_unlock(&n->mu);
}

/* MOON.TOPOLOGY into the engine, unless it knows every source of the
 * batch's tasks already (they are of one registration, gen). */
static int learn_topology(node_copier *c, uint64_t gen, node_task *const *ts, int n, char *err, size_t errlen) {
    if (gen != c->known_gen) {
        if (c->known) memset(c->known, 0, c->nknown);
        c->known_gen = gen;
    }
    int all_known = 1;
    for (int k = 0; k < n && all_known; k++) {
        for (int i = 0; i < ts[k]->nsrc && all_known; i++) all_known = is_known(c, ts[k]->src[i].node_id);
        for (int i = 0; ts[k]->to_disk == NODE_TASK_PUSH && i < ts[k]->ndst && all_known; i++)
            all_known = is_known(c, ts[k]->dst[i].node_id);
    }
    if (all_known) return 0;
    const mkv_config *cfg = &c->n->srv->cfg;
    char addr[CONFIG_STR_MAX];
    batch_master(c, ts[0]->ctl, addr, sizeof addr);
    if (c->master && strcmp(addr, c->master_addr) != 0) {   /* another group's, or its leader changed */
        redisFree(c->master);
        c->master = NULL;
    }
    if (!c->master) {
        if (proto_master_open(&c->master, addr, cfg->master_auth, cfg->cluster_secret, COPIER_IO_TIMEOUT_MS,
                              COPIER_IO_TIMEOUT_MS, err, errlen) != PROTO_LINK_OK)
            return -1;
        snprintf(c->master_addr, sizeof c->master_addr, "%s", addr);
    }
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_TOPOLOGY);
    redisReply *r = redisCommandArgv(c->master, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "%s: %s", PROTO_VERB_TOPOLOGY, r ? "unexpected reply" : c->master->errstr);
        if (r) freeReplyObject(r);
        redisFree(c->master);
        c->master = NULL;
        return -1;
    }
    for (size_t i = 0; i < r->elements; i++) add_node(c, r->element[i]);
    freeReplyObject(r);
    return 0;
}

/* ---- a batch of tasks ---- */

/* A task of an earlier registration must not write: the master that
 * placed it is gone or has declared us dead, and the space may belong
 * to someone else by now. */
static int gen_current(node_copier *c, uint64_t gen) {
    return node_control_current(c->batch_ctl, gen);
}

/* Our own segment: the master's caps and our bounds, before any byte. */
static int check_dst(node_copier *c, const node_task *t, uint64_t now, char *err, size_t errlen) {
    for (int i = 0; i < t->ndst; i++) {
        const te_extent *d = &t->dst[i];
        int st = te_cap_check(&d->cap, t->cap_key, t->cap_term, t->node_id, TE_WRITE, d->offset,
                              d->length, now);
        if (st == TE_OK && (d->offset > c->n->seg.size || d->length > c->n->seg.size - d->offset))
            st = TE_ERANGE;
        /* Shared by groups: only into the chunks of the group that sent it. */
        if (st == TE_OK && c->n->shares)
            st = te_shares_check(c->n->shares, &d->cap, t->node_id, TE_WRITE, d->offset, d->length, now, NULL);
        if (st == TE_OK) st = node_data_claim(c->n->data, &d->cap);
        if (st != TE_OK) {
            snprintf(err, errlen, "destination %d refused: %s", i, te_strerror(st));
            return -1;
        }
    }
    return 0;
}

static void task_fail(node_task *t, const char *why) {
    if (!t->failed)
        log_warning("node: copy task %llu failed: %s", (unsigned long long)t->id, why);
    t->failed = 1;
}

/* One engine read per destination extent of the live tasks: objs[],
 * owner[] (the task of each), reps[] and pieces[] (room for every
 * task's nsrc + ndst pieces). Returns how many. */
static int plan_reads(node_copier *c, node_task *const *ts, int n, te_object *objs, node_task **owner,
                      te_replica *reps, te_extent *pieces) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        node_task *t = ts[i];
        if (t->failed || t->to_disk) continue;
        uint64_t pos = 0;
        for (int d = 0; d < t->ndst; d++) {
            const te_extent *x = &t->dst[d];
            reps[k] = (te_replica){pieces, node_task_src_range(t, pos, x->length, pieces)};
            pieces += reps[k].next;
            objs[k] = (te_object){.buf = (char *)c->n->seg.base + x->offset, .len = x->length,
                                  .reps = &reps[k], .nrep = 1};
            owner[k++] = t;
            pos += x->length;
        }
    }
    return k;
}

/* The plan's nobj reads, in engine batches of at most
 * COPIER_BATCH_BYTES: before each, tasks whose caps are about to end or
 * whose registration changed are failed and their reads left out (the
 * master may reuse that space once the caps are past). */
static void run_reads(node_copier *c, uint64_t gen, te_object *objs, node_task **owner, int nobj) {
    te_object *chunk = xcalloc((size_t)(nobj ? nobj : 1), sizeof *chunk);
    node_task **who = xcalloc((size_t)(nobj ? nobj : 1), sizeof *who);
    for (int at = 0; at < nobj;) {
        int cur = gen_current(c, gen), m = 0;
        uint64_t bytes = 0, now = wall_ms();
        for (; at < nobj && (m == 0 || bytes + objs[at].len <= COPIER_BATCH_BYTES); at++) {
            node_task *t = owner[at];
            if (!cur) task_fail(t, "registration changed mid-copy");
            else if (now >= t->expiry_ms) task_fail(t, "caps expired mid-copy");
            if (t->failed) continue;
            chunk[m] = objs[at];
            who[m++] = t;
            bytes += objs[at].len;
        }
        if (m == 0) continue;
        char err[256] = "";
        te_engine_read_batch(c->engine, chunk, m, err, sizeof err);
        for (int i = 0; i < m; i++)
            if (chunk[i].status != TE_OK) task_fail(who[i], err[0] ? err : te_strerror(chunk[i].status));
    }
    free(chunk);
    free(who);
}

static void run_copies(node_copier *c, node_task *const *ts, int n);

static uint64_t extents_len(const te_extent *x, int n) {
    uint64_t len = 0;
    for (int i = 0; i < n; i++) len += x[i].length;
    return len;
}

/* t's key as the disk tier keeps it: its group's (disk_tier.h). */
static size_t task_disk_key(node *n, const node_task *t, char *out) {
    return node_disk_key(n->groups[node_control_group(t->ctl)].name, t->key, t->keylen, out);
}

/* An offload: our segment's bytes of the object (read caps of ours, in
 * bounds) into the disk store, which checks the CRC before it writes. */
_Static_assert(PROTO_MAX_EXTENTS <= DISK_MAX_PIECES, "a share's extents fit its record");

static void run_offload(node_copier *c, node_task *t, uint64_t now) {
    char err[160];
    node *n = c->n;
    for (int i = 0; i < t->nsrc; i++) {
        const te_extent *s = &t->src[i];
        int st = te_cap_check(&s->cap, t->cap_key, t->cap_term, t->node_id, TE_READ, s->offset, s->length, now);
        if (st == TE_OK && (s->node_id != t->node_id || s->offset > n->seg.size ||
                            s->length > n->seg.size - s->offset))
            st = TE_ERANGE;
        if (st != TE_OK) {
            snprintf(err, sizeof err, "offload source %d refused: %s", i, te_strerror(st));
            task_fail(t, err);
            return;
        }
    }
    if (!n->disk) {
        task_fail(t, "offload: no disk tier");
        return;
    }
    const char *base = (const char *)n->seg.base;
    uint64_t len = extents_len(t->src, t->nsrc);
    char *gather = NULL;
    const void *val = t->nsrc == 1 ? base + t->src[0].offset : NULL;
    if (!val) {   /* striped: our pieces in order (at most our segment) */
        gather = xmalloc(len ? len : 1);
        uint64_t at = 0;
        for (int i = 0; i < t->nsrc; i++) {
            memcpy(gather + at, base + t->src[i].offset, t->src[i].length);
            at += t->src[i].length;
        }
        val = gather;
    }
    /* Our share of an object striped over nodes is written as one record
     * of its own (each node offloads its own slices), with where each
     * piece lies in the object when the master said. */
    disk_piece *pieces = t->obj_off ? xmalloc((size_t)t->nsrc * sizeof *pieces) : NULL;
    for (int i = 0; pieces && i < t->nsrc; i++) pieces[i] = (disk_piece){t->obj_off[i], t->src[i].length};
    disk_obj of = {t->size, t->crc, pieces ? (uint32_t)t->nsrc : 0, pieces};
    char key[NODE_DISK_KEY_MAX];
    size_t klen = task_disk_key(n, t, key);
    int rc = len == t->size ? disk_store_put(n->disk, key, klen, val, t->size, t->crc)
           : len < t->size  ? disk_store_put_share(n->disk, key, klen, val, len, &of)
                            : -EINVAL;
    free(pieces);
    free(gather);
    if (rc != 0) {
        snprintf(err, sizeof err, "offload to disk: %s", strerror(-rc));
        task_fail(t, err);
    }
}

/* The disk holds the record of t's key the master means: of its object
 * (size and CRC), want bytes of it (the whole, or our share). */
static int record_is_there(node *n, const node_task *t, const char *key, size_t klen, uint64_t want) {
    uint64_t len = 0;
    uint32_t crc = 0;
    disk_obj of;
    return n->disk && disk_store_stat(n->disk, key, klen, &len, &crc, &of) == 0 && len == want &&
           of.size == t->size && of.crc == t->crc;
}

/* A load: key's disk record (its CRC checked by the read, and the one
 * the master means) into our segment, under the master's write caps. */
static void run_load(node_copier *c, node_task *t, uint64_t now) {
    char err[160];
    node *n = c->n;
    uint64_t len = 0;
    if (check_dst(c, t, now, err, sizeof err) != 0) {
        task_fail(t, err);
        return;
    }
    uint64_t want = extents_len(t->dst, t->ndst);   /* the whole, or our share of a striped one */
    char key[NODE_DISK_KEY_MAX];
    size_t klen = task_disk_key(n, t, key);
    if (!record_is_there(n, t, key, klen, want)) {
        task_fail(t, "load: no such record on the disk tier");
        return;
    }
    char *base = (char *)n->seg.base, *gather = NULL;
    void *into = t->ndst == 1 ? base + t->dst[0].offset : (gather = xmalloc(want ? want : 1));
    int rc = disk_store_read(n->disk, key, klen, into, want, &len);
    if (rc == 0 && len != want) rc = -EIO;
    uint64_t at = 0;
    for (int i = 0; rc == 0 && gather && i < t->ndst; at += t->dst[i].length, i++)
        memcpy(base + t->dst[i].offset, gather + at, t->dst[i].length);
    free(gather);
    if (rc != 0) {
        snprintf(err, sizeof err, "load from disk: %s", strerror(-rc));
        task_fail(t, err);
    }
}

/* A push: key's disk record (the one the master means, its CRC checked
 * by the read) written to other nodes' extents under the master's write
 * caps, which those nodes check. */
static void run_push(node_copier *c, node_task *t) {
    char err[256];
    node *n = c->n;
    uint64_t len = 0;
    uint64_t want = extents_len(t->dst, t->ndst);   /* the whole, or our share of a striped one */
    char key[NODE_DISK_KEY_MAX];
    size_t klen = task_disk_key(n, t, key);
    if (!record_is_there(n, t, key, klen, want)) {
        task_fail(t, "push: no such record on the disk tier");
        return;
    }
    if (engine_ready(c, err, sizeof err) != 0 || learn_topology(c, t->gen, &t, 1, err, sizeof err) != 0) {
        task_fail(t, err);
        return;
    }
    char *buf = xmalloc(want ? want : 1);
    int rc = disk_store_read(n->disk, key, klen, buf, want, &len);
    if (rc == 0 && len != want) rc = -EIO;
    if (rc != 0) {
        snprintf(err, sizeof err, "push: reading the record: %s", strerror(-rc));
        task_fail(t, err);
    } else if (wall_ms() >= t->expiry_ms) {
        task_fail(t, "push: caps expired");
    } else {
        te_replica rep = {t->dst, t->ndst};
        int st = te_engine_write(c->engine, buf, want, &rep, 1, err, sizeof err);
        if (st != TE_OK) task_fail(t, err[0] ? err : te_strerror(st));
    }
    free(buf);
}

static void run_batch(node_copier *c, node_task *const *ts, int n) {
    uint64_t gen0 = ts[0]->gen, now0 = wall_ms();
    c->batch_ctl = ts[0]->ctl;   /* a batch is one heartbeat reply's: one group */
    int copies = 0;
    for (int i = 0; i < n; i++) {
        if (!ts[i]->to_disk) copies = 1;
        else if (!gen_current(c, gen0)) task_fail(ts[i], "from an earlier registration");
        else if (ts[i]->to_disk == NODE_TASK_LOAD) run_load(c, ts[i], now0);
        else if (ts[i]->to_disk == NODE_TASK_PUSH) run_push(c, ts[i]);
        else run_offload(c, ts[i], now0);
    }
    if (copies) run_copies(c, ts, n);
}

static void run_copies(node_copier *c, node_task *const *ts, int n) {
    uint64_t gen = ts[0]->gen, now = wall_ms();
    char err[256] = "";
    int cur = gen_current(c, gen);
    size_t nobj = 0, npieces = 0;
    for (int i = 0; i < n; i++) {
        if (ts[i]->to_disk) continue;   /* run_offload's */
        if (!cur) task_fail(ts[i], "from an earlier registration");
        else if (check_dst(c, ts[i], now, err, sizeof err) != 0) task_fail(ts[i], err);
        nobj += (size_t)ts[i]->ndst;
        npieces += (size_t)ts[i]->nsrc + (size_t)ts[i]->ndst;
    }
    if (engine_ready(c, err, sizeof err) != 0 || learn_topology(c, gen, ts, n, err, sizeof err) != 0) {
        for (int i = 0; i < n; i++)
            if (!ts[i]->to_disk) task_fail(ts[i], err);
        return;
    }
    te_object *objs = xcalloc(nobj, sizeof *objs);
    node_task **owner = xcalloc(nobj, sizeof *owner);
    te_replica *reps = xcalloc(nobj, sizeof *reps);
    te_extent *pieces = xcalloc(npieces, sizeof *pieces);
    run_reads(c, gen, objs, owner, plan_reads(c, ts, n, objs, owner, reps, pieces));
    free(pieces);
    free(reps);
    free(owner);
    free(objs);
}

static node_task *task_of(jq_job *j) { return (node_task *)((char *)j - offsetof(node_task, job)); }

/* On the copier thread: a batch of tasks (linked by next from the one
 * queued), run together, reported together and freed. */
static void copy_job(jq_job *j, void *arg) {
    node_copier *c = arg;
    int n = 0;
    for (node_task *t = task_of(j); t; t = t->next) n++;
    node_task **ts = xcalloc((size_t)n, sizeof *ts);
    n = 0;
    for (node_task *t = task_of(j); t; t = t->next) ts[n++] = t;
    run_batch(c, ts, n);
    uint64_t *ids = xcalloc((size_t)n, sizeof *ids), bytes = 0;
    int *oks = xcalloc((size_t)n, sizeof *oks), nok = 0;
    for (int i = 0; i < n; i++) {
        ids[i] = ts[i]->id;
        oks[i] = !ts[i]->failed;
        nok += oks[i];
        if (oks[i]) bytes += ts[i]->len;
    }
    pthread_mutex_lock(&c->n->mu);
    c->n->status.bytes_copied += bytes;
    pthread_mutex_unlock(&c->n->mu);
    log_info("node: copy batch of %d task(s): %d done (%llu bytes), %d failed", n, nok,
             (unsigned long long)bytes, n - nok);
    node_control_tasks_done(ts[0]->ctl, ts[0]->gen, ids, oks, n);
    atomic_fetch_sub(&c->queued, 1);
    for (int i = 0; i < n; i++) node_task_free(ts[i]);
    free(oks);
    free(ids);
    free(ts);
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

void node_copier_submit(node_copier *c, node_task *batch) {
    batch->job.run = copy_job;
    atomic_fetch_add(&c->queued, 1);
    if (c->q && jobqueue_submit(c->q, &batch->job) == 0) return;
    atomic_fetch_sub(&c->queued, 1);
    for (node_task *t = batch, *next; t; t = next) {
        next = t->next;
        node_control_tasks_done(t->ctl, t->gen, &t->id, &(int){0}, 1);
        node_task_free(t);
    }
}

int node_copier_busy(node_copier *c) { return atomic_load(&c->queued) >= COPIER_MAX_QUEUE / 2; }

void node_copier_stop(node_copier *c) {
    if (!c) return;
    if (c->q) {
        jobqueue_stop(c->q);
        for (jq_job *j = jobqueue_cancel(c->q), *next; j; j = next) {
            next = j->next;
            for (node_task *t = task_of(j), *tn; t; t = tn) {
                tn = t->next;
                node_task_free(t);
            }
        }
        jobqueue_free(c->q);
    }
    if (c->engine) te_engine_destroy(c->engine);
    if (c->master) redisFree(c->master);
    free(c->known);
    free(c);
}
