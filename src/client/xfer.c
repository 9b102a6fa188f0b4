/* client/xfer.c - the bridge to the transfer engine (backend/engine.h).
 *
 * The engine does all the data-plane work: slicing, striping over paths
 * and nodes, retries and replica failover. This file only creates it,
 * keeps its node table in step with the master's topology and hands it
 * placements exactly as the master granted them. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shm_transport.h"
#include "client/client.h"
#include "core/util.h"
#include "transports/registry.h"

static int engine_status(int te) {
    switch (te) {
    case TE_OK:        return MKV_OK;
    case TE_EAUTH:     return MKV_EAUTH;
    case TE_ETIMEDOUT: return MKV_ETIMEDOUT;
    case TE_EINVAL:    return MKV_EINVAL;
    case TE_EFAULT:    return MKV_EFAULT;
    default:           return MKV_EIO;
    }
}

/* "a,b,c" into the engine's local addresses. */
static int parse_locals(mkv_client *c, te_engine_config *ec) {
    const char *p = c->data_addrs;
    while (p && *p) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= TE_ADDR_LEN || ec->nlocal == TE_MAX_PATHS)
            return mkv_fail(c, MKV_EINVAL, "data_addrs: at most %d addresses of 1 to %d bytes",
                            TE_MAX_PATHS, TE_ADDR_LEN - 1);
        memcpy(ec->local[ec->nlocal], p, n);
        ec->local[ec->nlocal++][n] = 0;
        p += n + (p[n] == ',');
    }
    return MKV_OK;
}

int mkv_engine_open(mkv_client *c) {
    te_engine_config ec;
    memset(&ec, 0, sizeof ec);
    int rc = parse_locals(c, &ec);
    if (rc != MKV_OK) return rc;
    /* Two connections per network path, half-MiB transfer units: a 1 MiB
     * object then moves as two units in parallel, on two of the node's
     * threads. On loopback (2 cores) this measured about 1.25x one stream
     * of 1 MiB units; four streams of 256 KiB were no better than two. */
    ec.streams = MKV_NET_STREAMS;
    ec.unit_size = MKV_TRANSFER_UNIT;
    te_config cfg;
    memset(&cfg, 0, sizeof cfg);
    memcpy(cfg.secret, c->secret, sizeof cfg.secret);
    cfg.timeout_ms = c->timeout_ms;
    cfg.shm_mode = c->shm_mode;
    cfg.copy_threads = c->copy_threads;
    cfg.connect_timeout_ms = c->timeout_ms < 2000 ? c->timeout_ms : 2000;
    ec.contexts = c->core->max_lanes;   /* as many transfers at once as calls */
    char err[MKV_ERR_LEN];
    c->engine = te_engine_create_named(c->transport, &cfg, &ec, err, sizeof err);
    if (!c->engine) return mkv_fail(c, MKV_EINVAL, "%s", err);
    c->core->engine = c->engine;
    return MKV_OK;
}

/* The engine's counters added to *sum. */
static void engine_stats(mkv_client *c, mkv_transfer_stats *sum) {
    te_engine *e = c->core->engine;
    if (!e) return;
    te_engine_stats st;
    te_engine_get_stats(e, &st);
    sum->retries += st.retries;
    sum->failovers += st.failovers;
    sum->bytes_tcp += te_engine_bytes_via(e, "tcp");
    sum->bytes_shm += te_engine_bytes_via(e, "shm");
    sum->bytes_rdma += te_engine_bytes_via(e, "rdma");
}

void mkv_transfer_stats_get(mkv_client *c, mkv_transfer_stats *out) {
    memset(out, 0, sizeof *out);
    out->shm_cold_bytes = te_shm_cold_bytes();
    if (c && c->route) mkv_route_stats(c, out);
    if (c && c->core) engine_stats(c, out);
}

void mkv_transfer_stats_add(mkv_client *c, mkv_transfer_stats *sum) {
    if (c && c->route) mkv_route_stats(c, sum);
    if (c && c->core) engine_stats(c, sum);
}

int mkv_connect_paths(mkv_client *c) {
    if (!c || c->route) return 0;
    MKV_ON_LANE(c);
    return c->engine ? te_engine_connect_local(c->engine) : 0;
}

int mkv_engine_reg(mkv_client *c, void *addr, size_t len) {
    char err[MKV_ERR_LEN];
    if (te_engine_register_buffer(c->engine, addr, len, err, sizeof err) != TE_OK)
        return mkv_fail(c, MKV_ENOMEM, "register buffer: %s", err);
    return MKV_OK;
}

void mkv_engine_dereg(mkv_client *c, void *addr) {
    if (c->engine) te_engine_unregister_buffer(c->engine, addr);
}

int mkv_engine_node(mkv_client *c, const mkv_node *n) {
    const char *addrs[TE_MAX_PATHS];
    for (int i = 0; i < n->naddrs; i++) addrs[i] = n->addrs[i];
    char err[MKV_ERR_LEN];
    if (te_engine_add_node(c->engine, n->id, addrs, n->naddrs, err, sizeof err) != TE_OK)
        return mkv_fail(c, MKV_ECONN, "node %u: %s", n->id, err);
    return MKV_OK;
}

void mkv_engine_drop(mkv_client *c, uint32_t id) {
    te_engine_remove_node(c->engine, id);
}

/* How many replicas of x move: every one, or just x->replica. */
static size_t xfer_replicas(const mkv_xfer *x) { return x->replica >= 0 ? 1 : x->pl->nreplicas; }

/* The engine's view of x, its replicas into reps (xfer_replicas of them). */
static void engine_object(const mkv_xfer *x, te_replica *reps, te_object *o) {
    const mkv_placement *pl = x->pl;
    int first = x->replica >= 0 ? x->replica : 0;
    int last = x->replica >= 0 ? x->replica + 1 : (int)pl->nreplicas;
    int n = 0;
    for (int r = first; r < last; r++)
        reps[n++] = (te_replica){.ext = pl->replicas[r].extents,
                                 .next = (int)pl->replicas[r].nextents};
    *o = (te_object){.buf = x->buf, .len = pl->size, .reps = reps, .nrep = n, .iov = x->segs, .niov = x->nsegs,
                     .slice_size = x->sl ? x->sl->size : 0, .slice_crc = x->sl ? x->sl->crc : NULL};
}

/* The engine's objects of x[0..n) into *objs (their replicas in *reps,
 * sized to what moves: a batch of small reads is mostly one replica
 * each); the caller frees both. */
static void engine_objects(const mkv_xfer *x, size_t n, te_object **objs, te_replica **reps) {
    size_t nreps = 0;
    for (size_t i = 0; i < n; i++) nreps += xfer_replicas(&x[i]);
    *objs = xmalloc((n ? n : 1) * sizeof **objs);
    *reps = xmalloc((nreps ? nreps : 1) * sizeof **reps);
    for (size_t i = 0, at = 0; i < n; at += xfer_replicas(&x[i]), i++) engine_object(&x[i], *reps + at, &(*objs)[i]);
}

static void engine_results(mkv_xfer *x, size_t n, const te_object *objs) {
    for (size_t i = 0; i < n; i++) {
        x[i].status = engine_status(objs[i].status);
        x[i].failed_node = objs[i].failed_node;
        x[i].unknown_node = objs[i].unknown_node;
        x[i].crc_ok = objs[i].crc_ok;
        x[i].crc = objs[i].crc;
        x[i].slices_ok = objs[i].slices_ok;
    }
}

/* Moves x[0..n) once. */
static void xfer_once(mkv_client *c, te_op op, mkv_xfer *x, size_t n) {
    te_object *objs;
    te_replica *reps;
    engine_objects(x, n, &objs, &reps);
    char err[MKV_ERR_LEN] = "";
    int rc = op == TE_WRITE ? te_engine_write_batch(c->engine, objs, (int)n, err, sizeof err)
                            : te_engine_read_batch(c->engine, objs, (int)n, err, sizeof err);
    engine_results(x, n, objs);
    if (rc != TE_OK)
        mkv_fail(c, engine_status(rc), "%s: %s", op == TE_WRITE ? "write" : "read",
                 err[0] ? err : te_strerror(rc));
    free(objs);
    free(reps);
}

static int xfer_retryable(const mkv_xfer *x) { return x->status != MKV_OK && (x->failed_node || x->unknown_node); }

/* The objects that failed on node id, which the engine did not know and
 * the master has not up: the node's fault, as one that failed every path,
 * so a writer places them again elsewhere. */
static void blame_gone(mkv_xfer *x, size_t n, uint32_t id) {
    for (size_t i = 0; i < n; i++)
        if (x[i].status != MKV_OK && x[i].unknown_node == id && !x[i].failed_node) x[i].failed_node = id;
}

/* Whether the objects that failed may move once more: a node that failed
 * every path may be a restarted one at new addresses, and a node the
 * engine did not know may have (re)joined since our table was read (a
 * node declared dead that registered again, or a new id). Either way the
 * master's topology, read again, says so. */
static int xfer_retry_due(mkv_client *c, mkv_xfer *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i].status != MKV_OK && x[i].failed_node) return mkv_topology_readdressed(c, x[i].failed_node);
    for (size_t i = 0; i < n; i++) {
        if (x[i].status == MKV_OK || !x[i].unknown_node) continue;
        int up = mkv_topology_learnt(c, x[i].unknown_node);
        if (up == 0) blame_gone(x, n, x[i].unknown_node);
        return up == 1;
    }
    return 0;
}

/* When the master's topology says so (xfer_retry_due), the objects that
 * failed move once more, on the same grants, so a write lands where it
 * was placed. */
int mkv_xfer_run(mkv_client *c, te_op op, mkv_xfer *x, size_t n) {
    xfer_once(c, op, x, n);
    if (!xfer_retry_due(c, x, n)) return MKV_OK;
    mkv_xfer *again = xmalloc(n * sizeof *again);
    size_t *at = xmalloc(n * sizeof *at), k = 0;
    for (size_t i = 0; i < n; i++)
        if (xfer_retryable(&x[i])) {
            at[k] = i;
            again[k++] = x[i];
        }
    xfer_once(c, op, again, k);
    for (size_t i = 0; i < k; i++) x[at[i]] = again[i];
    free(again);
    free(at);
    return MKV_OK;
}

size_t mkv_xfer_now(mkv_client *c, te_op op, mkv_xfer *x, size_t n) {
    if (!c->engine || n == 0 || n > INT_MAX) return 0;
    te_object *objs;
    te_replica *reps;
    engine_objects(x, n, &objs, &reps);
    size_t done = (size_t)(op == TE_WRITE ? te_engine_write_now(c->engine, objs, (int)n)
                                          : te_engine_read_now(c->engine, objs, (int)n));
    engine_results(x, n, objs);
    for (size_t i = 0; i < n; i++)
        if (objs[i].status != TE_OK) x[i].status = MKV_PENDING;   /* not failed: move it the usual way */
    free(objs);
    free(reps);
    return done;
}
