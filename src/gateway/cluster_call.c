/* gateway/cluster_call.c - one key's call to the cluster on a given
 * client (cluster_call.h). */
#include <stdio.h>
#include <string.h>

#include "client/moonkv_internal.h"
#include "core/util.h"
#include "gateway/cluster_call.h"
#include "proto/limits.h"

/* EXISTS, NOSPACE and NOREPLICAS come only from the master's reply: the client shows
 * it as the gateway's own (the master knows why, the gateway does not). */
static void master_reply_text(mkv_client *mc, char *errstr, size_t len) {
    static const char prefix[] = "master: ";
    const char *msg = mkv_last_error(mc);
    if (strncmp(msg, prefix, sizeof prefix - 1) == 0) msg += sizeof prefix - 1;
    snprintf(errstr, len, "%s", msg);
}

/* The client's text for its master connection lost ("master h:p: ...")
 * or not opened again ("cannot reach the master at ..."): the process's
 * one connection may have broken under another thread's call, so either
 * comes, not a node's failure. */
static int master_unreachable(const char *msg) {
    return strncmp(msg, "master ", 7) == 0 || strncmp(msg, "cannot reach the master", 23) == 0;
}

/* MKV_E* to STORE_*, with the library's message in errstr for the
 * codes whose reply shows it. */
int cluster_store_code(int rc, mkv_client *mc, char *errstr, size_t len) {
    switch (rc) {
    case MKV_OK: return STORE_OK;
    case MKV_ENOTFOUND: return STORE_NOTFOUND;
    case MKV_EEXISTS:
        master_reply_text(mc, errstr, len);
        return STORE_EXISTS;
    case MKV_ENOSPACE:
        master_reply_text(mc, errstr, len);
        return STORE_NOSPACE;
    case MKV_ENOREPLICAS:   /* "NOREPLICAS ..." as the master said it */
    case MKV_ETRYAGAIN:     /* "TRYAGAIN ...": the master is rebuilding */
        master_reply_text(mc, errstr, len);
        return STORE_REFUSED;
    case MKV_ECONN:
    case MKV_ETIMEDOUT:
        if (!master_unreachable(mkv_last_error(mc))) break;
        /* The client retries: a SET whose reply was lost then finds
         * its own bytes stored (an idempotent OK). */
        snprintf(errstr, len, "TRYAGAIN the master is unreachable (%s)", mkv_last_error(mc));
        return STORE_REFUSED;
    default:
        break;
    }
    snprintf(errstr, len, "%s", mkv_last_error(mc));
    return STORE_ERR;
}

int cluster_store_lost(char *errstr, size_t len) {
    snprintf(errstr, len, "TRYAGAIN the master is unreachable (connection lost before its reply)");
    return STORE_REFUSED;
}

static uint64_t master_waits;   /* cluster_master_wait (atomic) */

void cluster_master_wait(void) { __atomic_fetch_add(&master_waits, 1, __ATOMIC_RELAXED); }

uint64_t cluster_master_waits(void) { return __atomic_load_n(&master_waits, __ATOMIC_RELAXED); }

int cluster_key_ok(size_t keylen) { return keylen >= 1 && keylen <= PROTO_MAX_KEY_LEN; }

/* The client is the process's, shared by the loops and their workers:
 * one relearn per new connection of this loop's, whichever worker sees
 * it first (the others go on with the table it learns). */
int cluster_worker_topology(workers *w, mkv_client *mc, uint64_t epoch) {
    uint64_t *learnt = workers_learnt(w), seen = __atomic_load_n(learnt, __ATOMIC_ACQUIRE);
    if (!epoch || seen == epoch || !__atomic_compare_exchange_n(learnt, &seen, epoch, 0, __ATOMIC_ACQ_REL,
                                                                  __ATOMIC_ACQUIRE))
        return 0;
    /* The first connection: the client learnt the table when it connected
     * (relearning would also cost the grants' time on new data paths). */
    return seen && mkv_topology_relearn(mc) == MKV_OK;
}

/* A client's first write to a node maps its segment, which on a slow
 * host can take longer than the master's put timeout: the grants run out
 * before the bytes go (MKV_EAUTH; the put is revoked), and the put is
 * placed again, a few times, now that more segments are mapped. */
#define SHIP_EAUTH_RETRIES 3

void cluster_ship(mkv_client *mc, store_put *p, int replicas) {
    int rc = staging_bind(mc, &p->buf);
    cluster_master_wait();
    if (rc == MKV_OK) {
        for (int tries = 0;; tries++) {
            rc = mkv_put(mc, p->key, p->keylen, p->buf.ptr, (size_t)p->buf.len, replicas);
            if (rc != MKV_EAUTH || tries == SHIP_EAUTH_RETRIES) break;
        }
        staging_unbind(mc, &p->buf);
    }
    p->ship_rc = cluster_store_code(rc, mc, p->errstr, sizeof p->errstr);
    p->shipped = 1;
}

typedef struct fetch_place {
    staging *pool;
    mkv_client *mc;
    gw_fetch *f;
} fetch_place;

/* Staging memory for a located value, registered with the reading
 * client; NULL (the get fails) when there is none. */
static void *fetch_buffer(void *ctx, uint64_t size) {
    fetch_place *fp = ctx;
    if (staging_get(fp->pool, size, &fp->f->buf) != STORE_OK) return NULL;
    if (staging_bind(fp->mc, &fp->f->buf) != MKV_OK) {
        staging_put(fp->pool, &fp->f->buf);   /* clears ptr */
        return NULL;
    }
    return fp->f->buf.ptr;
}

/* A key the cluster could not hold is not found, without asking. */
static int fetch_begin(gw_fetch *f) {
    f->buf.ptr = NULL;
    f->len = 0;
    if (cluster_key_ok(f->keylen)) return 1;
    f->rc = STORE_NOTFOUND;
    return 0;
}

/* f's outcome st (STORE_*), got bytes placed in its buffer. */
static void fetch_end_as(staging *pool, mkv_client *mc, gw_fetch *f, int st, uint64_t got) {
    if (f->buf.ptr) staging_unbind(mc, &f->buf);
    f->rc = st;
    if (f->rc == STORE_OK) f->len = got;
    else staging_put(pool, &f->buf);   /* none placed: a no-op */
}

/* The library's outcome rc for f, on the thread that made the call. */
static void fetch_end(staging *pool, mkv_client *mc, gw_fetch *f, int rc, uint64_t got) {
    fetch_end_as(pool, mc, f, cluster_store_code(rc, mc, f->errstr, sizeof f->errstr), got);
}

/* One MOON.GET: the size it tells gets staging memory, then the bytes
 * are read (checksum verified by the library). */
void cluster_fetch(staging *pool, mkv_client *mc, gw_fetch *f) {
    if (!fetch_begin(f)) return;
    fetch_place fp = {.pool = pool, .mc = mc, .f = f};
    uint64_t got = 0;
    cluster_master_wait();
    /* Two statements: as arguments of one call, got could be read before
     * mkv_get_placed set it (C leaves their order open), a hit of 0 bytes. */
    int rc = mkv_get_placed(mc, f->key, f->keylen, fetch_buffer, &fp, &got);
    fetch_end(pool, mc, f, rc, got);
    f->via = "mkv_get_placed";
}

void cluster_fetch_batch(staging *pool, mkv_client *mc, gw_fetch **f, size_t n) {
    mkv_pobj *o = xcalloc(n ? n : 1, sizeof *o);
    fetch_place *fp = xcalloc(n ? n : 1, sizeof *fp);
    size_t *idx = xcalloc(n ? n : 1, sizeof *idx), m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!fetch_begin(f[i])) continue;
        fp[m] = (fetch_place){.pool = pool, .mc = mc, .f = f[i]};
        o[m] = (mkv_pobj){.key = f[i]->key, .keylen = f[i]->keylen, .place = fetch_buffer, .ctx = &fp[m]};
        idx[m++] = i;
    }
    if (m) {
        cluster_master_wait();
        mkv_get_batch_placed(mc, o, m);   /* a failure of all is each object's status too */
    }
    /* In order: a failed one's message is the client's last (this thread's). */
    for (size_t k = 0; k < m; k++) {
        fetch_end(pool, mc, f[idx[k]], o[k].status, o[k].len);
        f[idx[k]]->via = "mkv_get_batch_placed";
    }
    free(o);
    free(fp);
    free(idx);
}

/* ---- on the async face ---- */

gw_face_op *cluster_face_op(mkv_op_kind kind, size_t n, size_t extra_each, mkv_op_done_fn *done) {
    gw_face_op *q = xcalloc(1, sizeof *q + n * (sizeof(mkv_obj) + sizeof(size_t) + sizeof(int) + extra_each));
    q->idx = (size_t *)(q->objs + n);
    q->extra = q->idx + n;
    q->res = (int *)((char *)q->extra + n * extra_each);
    q->op = (mkv_op){.kind = kind, .objs = q->objs, .results = q->res, .done = done};
    return q;
}

int cluster_face_code(const mkv_op *op, int st, char *errstr, size_t len) {
    if (st == CLUSTER_UNTOLD) st = op->status != MKV_OK ? op->status : MKV_EIO;
    switch (st) {
    case MKV_OK: return STORE_OK;
    case MKV_ENOTFOUND: return STORE_NOTFOUND;
    case MKV_EEXISTS:
        snprintf(errstr, len, "EXISTS %s", mkv_strerror(st));
        return STORE_EXISTS;
    case MKV_ENOSPACE:
        snprintf(errstr, len, "NOSPACE %s", mkv_strerror(st));
        return STORE_NOSPACE;
    case MKV_ENOREPLICAS:
        snprintf(errstr, len, "NOREPLICAS %s", mkv_strerror(st));
        return STORE_REFUSED;
    case MKV_ETRYAGAIN:
    case MKV_EMOVED:
    case MKV_ECONN:
    case MKV_ETIMEDOUT:
        snprintf(errstr, len, "TRYAGAIN %s", mkv_strerror(st));
        return STORE_REFUSED;
    default:
        snprintf(errstr, len, "%s", mkv_strerror(st));
        return STORE_ERR;
    }
}

static void face_fetched(mkv_op *op) {
    gw_face_op *q = (gw_face_op *)op;
    fetch_place *fp = q->extra;
    for (size_t k = 0; k < op->n; k++) {
        gw_fetch *f = fp[k].f;
        int st = cluster_face_code(op, q->objs[k].status, f->errstr, sizeof f->errstr);
        fetch_end_as(fp[k].pool, fp[k].mc, f, st, q->objs[k].len);
        f->via = "the async face's batch get";
    }
    q->then(q->ctx);
    free(q);
}

void cluster_fetch_face(mkv_async *face, staging *pool, mkv_client *mc, gw_fetch **f, size_t n,
                        void (*done)(void *ctx), void *ctx) {
    gw_face_op *q = cluster_face_op(MKV_OP_GET_BATCH, n, sizeof(fetch_place), face_fetched);
    fetch_place *fp = q->extra;
    for (size_t i = 0; i < n; i++) {
        if (!fetch_begin(f[i])) continue;
        fp[q->op.n] = (fetch_place){.pool = pool, .mc = mc, .f = f[i]};
        q->objs[q->op.n] = (mkv_obj){.key = f[i]->key, .keylen = f[i]->keylen, .buf = &fp[q->op.n],
                                     .status = CLUSTER_UNTOLD};
        q->op.n++;
    }
    q->op.place = fetch_buffer;
    q->then = done;
    q->ctx = ctx;
    if (q->op.n > 0 && mkv_async_submit(face, &q->op) == MKV_OK) return;
    for (size_t k = 0; k < q->op.n; k++) q->objs[k].status = MKV_ECONN;   /* no face: as a lost connection */
    face_fetched(&q->op);
}
