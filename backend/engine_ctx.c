/* backend/engine_ctx.c - one transfer context of an engine: see
 * engine_ctx.h (and engine.h for what a transfer does).
 *
 * A transfer becomes jobs: each object is cut at every extent boundary of
 * every replica and at unit_size, so one transfer unit maps onto exactly
 * one extent of each replica. A write has a job per (unit, replica); a
 * read a job per unit, starting on replica (unit index mod nrep) so hot
 * objects spread their load. Jobs are dispatched to the least-loaded
 * live path of their node and retried or failed over as completions
 * come back. */
#include "backend/engine_ctx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/xport_base.h"
#include "core/crc32c.h"
#include "core/util.h"

typedef struct epath {
    te_transport *t;          /* the transport that carries this address */
    int tier;                 /* 0: same host (ops->same_host), tried first; 1: the network */
    te_path *p;               /* NULL: not connected (or closed after breaking) */
    char local[TE_ADDR_LEN];  /* "" = any */
    char peer[TE_ADDR_LEN];
    int inflight;
} epath;

typedef struct enode {
    uint32_t id;
    epath *paths;
    int npaths;
    uint64_t connect_failed_ms;   /* when a connect last failed; 0 = none since */
    uint64_t stalled_until_ms;    /* a request timed out: not used before then */
    uint64_t stall_hold_ms;       /* current hold, doubled per stall (bounded); 0 = healthy */
    char last_err[160];
    int refused_us;           /* the last dial reached it and it refused our secret */
} enode;

typedef struct eregion {
    void *addr;
    size_t len;
    te_mr *mr[TE_ENGINE_MAX_TRANSPORTS];   /* one per transport, same index */
    struct eregion *next;
} eregion;

struct ectx {
    te_transport *t[TE_ENGINE_MAX_TRANSPORTS];
    ectx_counts *counts;      /* the engine's, shared with its other contexts */
    int nt;
    te_engine_config cfg;
    pthread_mutex_t mu;
    enode *nodes;
    int nnodes;
    eregion *regions;
};

typedef struct job {
    te_object *obj;
    uint64_t obj_off, len;
    int seg_first, nseg;      /* a segmented object's: run.segs[seg_first..+nseg) */
    int rep;                  /* replica in use */
    uint32_t tried;           /* read: replicas given up on */
    int attempts;
    int state;                /* JOB_* */
    enode *node;
    epath *on;
    te_path *tp;              /* the transport path it was submitted on */
    int has_crc;              /* done on a path that checksummed the bytes (shm map mode) */
    uint32_t crc;
} job;

enum { JOB_PENDING, JOB_INFLIGHT, JOB_DONE };

static void count(uint64_t *c, uint64_t n) { __atomic_fetch_add(c, n, __ATOMIC_RELAXED); }

ectx *ectx_create(te_transport *t, const te_engine_config *cfg, ectx_counts *counts) {
    ectx *e = xcalloc(1, sizeof *e);
    e->t[e->nt++] = t;
    e->counts = counts;
    if (cfg) e->cfg = *cfg;
    if (!e->cfg.unit_size) e->cfg.unit_size = TE_UNIT_DEFAULT;
    if (e->cfg.max_attempts <= 0) e->cfg.max_attempts = 4;
    if (e->cfg.reconnect_ms <= 0) e->cfg.reconnect_ms = 1000;
    if (e->cfg.nlocal < 0 || e->cfg.nlocal > TE_MAX_PATHS) e->cfg.nlocal = 0;
    if (e->cfg.streams < 1) e->cfg.streams = 1;
    if (e->cfg.streams > TE_MAX_STREAMS) e->cfg.streams = TE_MAX_STREAMS;
    pthread_mutex_init(&e->mu, NULL);
    return e;
}

static void node_close_paths(ectx *e, enode *n) {
    for (int i = 0; i < n->npaths; i++)
        if (n->paths[i].p) n->paths[i].t->ops->close(n->paths[i].p);
    free(n->paths);
    n->paths = NULL;
    n->npaths = 0;
}

void ectx_destroy(ectx *e) {
    if (!e) return;
    for (int i = 0; i < e->nnodes; i++) node_close_paths(e, &e->nodes[i]);
    free(e->nodes);
    while (e->regions) ectx_unregister(e, e->regions->addr);
    for (int i = 0; i < e->nt; i++) e->t[i]->ops->destroy(e->t[i]);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static enode *find_node(ectx *e, uint32_t id) {
    for (int i = 0; i < e->nnodes; i++)
        if (e->nodes[i].id == id) return &e->nodes[i];
    return NULL;
}

static te_transport *transport_of_kind(ectx *e, const te_transport_ops *ops) {
    for (int i = 0; i < e->nt; i++)
        if (e->t[i]->ops == ops) return e->t[i];
    return NULL;
}

static int transport_index(const ectx *e, const te_transport *t) {
    for (int i = 0; i < e->nt; i++)
        if (e->t[i] == t) return i;
    return 0;
}

/* Does addr (scheme length sl, 0 = plain host:port) belong to t's scheme? */
static int scheme_is(const te_transport *t, const char *addr, size_t sl) {
    const char *s = t->ops->scheme;
    return sl ? s && strlen(s) == sl && strncmp(addr, s, sl) == 0 : s == NULL;
}

static int node_names_scheme(const te_transport *t, const char *const *addrs, int naddrs) {
    for (int a = 0; a < naddrs; a++)
        if (t->ops->scheme && scheme_is(t, addrs[a], te_addr_scheme_len(addrs[a]))) return 1;
    return 0;
}

/* The transport for one node address, or NULL when none of ours can use
 * it: the one whose scheme it has; a plain host:port goes to the
 * transport that owns those, else to one that may fall back on them
 * (bare_fallback) if the node names no address of its own scheme. */
static te_transport *route(ectx *e, const char *addr, const char *const *addrs, int naddrs) {
    size_t sl = te_addr_scheme_len(addr);
    for (int i = 0; i < e->nt; i++)
        if (scheme_is(e->t[i], addr, sl)) return e->t[i];
    if (sl) return NULL;
    for (int i = 0; i < e->nt; i++)
        if (e->t[i]->ops->bare_fallback && !node_names_scheme(e->t[i], addrs, naddrs)) return e->t[i];
    return NULL;
}

static void add_path(ectx *e, enode *n, te_transport *t, const char *local, const char *peer) {
    epath *p = &n->paths[n->npaths++];
    p->t = t;
    p->tier = t->ops->same_host ? 0 : 1;
    snprintf(p->local, sizeof p->local, "%s", local ? local : "");
    snprintf(p->peer, sizeof p->peer, "%s", peer);
}

/* One path per address, times the local addresses and the streams for
 * network ones (a same-host path such as a shm mapping has no local side
 * and needs no second connection: its copies are split over threads
 * already). */
static int node_paths(ectx *e, enode *n, const char *const *addrs, int naddrs) {
    int nl = e->cfg.nlocal ? e->cfg.nlocal : 1, ns = e->cfg.streams;
    n->paths = xcalloc((size_t)(nl * naddrs * ns), sizeof *n->paths);
    for (int a = 0; a < naddrs; a++) {
        te_transport *t = route(e, addrs[a], addrs, naddrs);
        if (!t) continue;   /* e.g. a unix: address when shm is not in use */
        if (t->ops->same_host) { add_path(e, n, t, NULL, addrs[a]); continue; }
        for (int l = 0; l < nl; l++)
            for (int k = 0; k < ns; k++) add_path(e, n, t, e->cfg.nlocal ? e->cfg.local[l] : NULL, addrs[a]);
    }
    return n->npaths;
}

int ectx_add_node(ectx *e, uint32_t node_id, const char *const *addrs, int naddrs,
                       char *err, size_t errlen) {
    if (naddrs < 1 || naddrs > TE_MAX_PATHS) {
        snprintf(err, errlen, "node %u: need 1..%d data addresses", node_id, TE_MAX_PATHS);
        return TE_EINVAL;
    }
    for (int i = 0; i < naddrs; i++)
        if (!addrs[i] || strlen(addrs[i]) >= TE_ADDR_LEN) {
            snprintf(err, errlen, "node %u: bad data address", node_id);
            return TE_EINVAL;
        }
    pthread_mutex_lock(&e->mu);
    enode fresh = { .id = node_id };
    if (node_paths(e, &fresh, addrs, naddrs) == 0) {
        pthread_mutex_unlock(&e->mu);
        free(fresh.paths);
        snprintf(err, errlen, "node %u: no data address for transport %s%s", node_id,
                 te_transport_name(e->t[0]), e->nt > 1 ? " or the others in use" : "");
        return TE_EINVAL;
    }
    enode *n = find_node(e, node_id);
    if (n) node_close_paths(e, n);
    else {
        e->nodes = xrealloc(e->nodes, (size_t)(e->nnodes + 1) * sizeof *e->nodes);
        n = &e->nodes[e->nnodes++];
    }
    *n = fresh;
    pthread_mutex_unlock(&e->mu);
    return TE_OK;
}

void ectx_remove_node(ectx *e, uint32_t node_id) {
    pthread_mutex_lock(&e->mu);
    enode *n = find_node(e, node_id);
    if (n) {
        node_close_paths(e, n);
        *n = e->nodes[--e->nnodes];
    }
    pthread_mutex_unlock(&e->mu);
}

static void region_dereg(ectx *e, eregion *r) {
    for (int i = 0; i < e->nt; i++)
        if (r->mr[i]) e->t[i]->ops->dereg_mem(e->t[i], r->mr[i]);
}

/* Registers [addr, addr+len) with every transport from index `from` on;
 * on failure undoes what it did there. */
static int region_reg(ectx *e, eregion *r, int from, char *err, size_t errlen) {
    for (int i = from; i < e->nt; i++) {
        if (e->t[i]->ops->reg_mem(e->t[i], r->addr, r->len, &r->mr[i], err, errlen) == 0) continue;
        r->mr[i] = NULL;
        while (i-- > from) {
            e->t[i]->ops->dereg_mem(e->t[i], r->mr[i]);
            r->mr[i] = NULL;
        }
        return -1;
    }
    return 0;
}

int ectx_add_transport(ectx *e, te_transport *t, char *err, size_t errlen) {
    pthread_mutex_lock(&e->mu);
    int rc = TE_OK;
    if (e->nt == TE_ENGINE_MAX_TRANSPORTS || transport_of_kind(e, t->ops)) {
        snprintf(err, errlen, "engine: no room for transport %s (or it is there already)", te_transport_name(t));
        rc = TE_EINVAL;
    } else {
        e->t[e->nt++] = t;
        /* buffers registered so far must be usable on the new one too */
        for (eregion *r = e->regions; r && rc == TE_OK; r = r->next)
            if (region_reg(e, r, e->nt - 1, err, errlen) != 0) rc = TE_EINVAL;
        if (rc != TE_OK) {
            for (eregion *r = e->regions; r; r = r->next) {
                if (r->mr[e->nt - 1]) t->ops->dereg_mem(t, r->mr[e->nt - 1]);
                r->mr[e->nt - 1] = NULL;
            }
            e->nt--;
        }
    }
    pthread_mutex_unlock(&e->mu);
    if (rc != TE_OK) t->ops->destroy(t);
    return rc;
}

int ectx_register(ectx *e, void *addr, size_t len, char *err, size_t errlen) {
    eregion *r = xcalloc(1, sizeof *r);
    r->addr = addr;
    r->len = len;
    pthread_mutex_lock(&e->mu);
    int rc = region_reg(e, r, 0, err, errlen);
    if (rc == 0) {
        r->next = e->regions;
        e->regions = r;
    }
    pthread_mutex_unlock(&e->mu);
    if (rc != 0) free(r);
    return rc == 0 ? TE_OK : TE_EINVAL;
}

static void unregister_locked(ectx *e, void *addr) {
    for (eregion **pp = &e->regions; *pp; pp = &(*pp)->next) {
        if ((*pp)->addr != addr) continue;
        eregion *r = *pp;
        *pp = r->next;
        region_dereg(e, r);
        free(r);
        return;
    }
}

void ectx_unregister(ectx *e, void *addr) {
    pthread_mutex_lock(&e->mu);
    unregister_locked(e, addr);
    pthread_mutex_unlock(&e->mu);
}

static int registered(ectx *e, const void *addr, uint64_t len) {
    for (eregion *r = e->regions; r; r = r->next)
        if (te_range_inside(r->addr, r->len, addr, len)) return 1;
    return 0;
}

/* ---- placement checks and slicing ---- */

static int check_segments(const te_object *o, char *err, size_t errlen) {
    uint64_t sum = 0;
    for (int i = 0; o->iov && i < o->niov; i++) {
        if (!o->iov[i].iov_base || !o->iov[i].iov_len) break;
        sum += o->iov[i].iov_len;
    }
    if (o->niov < 0 || !o->iov || sum != o->len) {
        snprintf(err, errlen, "segments must be non-empty and add up to the object");
        return TE_EINVAL;
    }
    return TE_OK;
}

static int check_object(const te_object *o, char *err, size_t errlen) {
    if ((!o->buf && !o->niov) || !o->len || o->nrep < 1 || o->nrep > TE_ENGINE_MAX_REPLICAS) {
        snprintf(err, errlen, "object needs a buffer, a length and 1..%d replicas", TE_ENGINE_MAX_REPLICAS);
        return TE_EINVAL;
    }
    if (o->niov && check_segments(o, err, errlen) != TE_OK) return TE_EINVAL;
    for (int r = 0; r < o->nrep; r++) {
        const te_replica *rp = &o->reps[r];
        uint64_t sum = 0;
        if (!rp->ext || rp->next < 1 || rp->next > TE_ENGINE_MAX_EXTENTS) {
            snprintf(err, errlen, "replica %d: needs 1..%d extents", r, TE_ENGINE_MAX_EXTENTS);
            return TE_EINVAL;
        }
        for (int i = 0; i < rp->next; i++) {
            if (!rp->ext[i].length || rp->ext[i].length > o->len - sum) {
                snprintf(err, errlen, "replica %d: extent lengths do not add up to the object", r);
                return TE_EINVAL;
            }
            sum += rp->ext[i].length;
        }
        if (sum != o->len) {
            snprintf(err, errlen, "replica %d: extents cover %llu of %llu bytes", r,
                     (unsigned long long)sum, (unsigned long long)o->len);
            return TE_EINVAL;
        }
    }
    return TE_OK;
}

/* The extent of replica rp holding object byte off; *ext_start gets its
 * object offset. */
static const te_extent *locate(const te_replica *rp, uint64_t off, uint64_t *ext_start) {
    uint64_t pos = 0;
    for (int i = 0; i < rp->next; i++) {
        if (off < pos + rp->ext[i].length) { *ext_start = pos; return &rp->ext[i]; }
        pos += rp->ext[i].length;
    }
    return NULL;
}

/* An extent on the node's disk tier (cap.h): read by TE_READ_DISK. */
static int ext_on_disk(const te_extent *x) { return (x->cap.rights & TE_CAP_DISK) != 0; }

/* Length of the unit starting at off: up to unit_size, never across an
 * extent boundary of any replica. A disk record goes as one unit: the
 * node proves its CRC32C over the whole before the last bytes leave. */
static uint64_t unit_len(const ectx *e, const te_object *o, uint64_t off) {
    int disk = 0;
    for (int r = 0; r < o->nrep && !disk; r++) {
        uint64_t start;
        disk = ext_on_disk(locate(&o->reps[r], off, &start));
    }
    uint64_t len = o->len - off < e->cfg.unit_size || disk ? o->len - off : e->cfg.unit_size;
    if (o->slice_crc && o->slice_size && !disk) {   /* to the slice's end at most: its sum is its units' */
        uint64_t to_end = o->slice_size - off % o->slice_size;
        if (to_end < len) len = to_end;
    }
    for (int r = 0; r < o->nrep; r++) {
        uint64_t start;
        const te_extent *x = locate(&o->reps[r], off, &start);
        uint64_t left = start + x->length - off;
        if (left < len) len = left;
    }
    return len;
}

typedef struct run run;
struct run {
    ectx *e;
    job *jobs;
    struct iovec *segs;       /* the local segments of jobs of segmented objects */
    int nsegs;
    int njobs, left, writing;
    char *err;
    size_t errlen;
    int first_err;
};

/* A segmented object's walk: segment si starts at object offset at. */
typedef struct seg_walk {
    int si;
    uint64_t at;
} seg_walk;

/* The local segments of o's bytes [off, off + *len), at most TE_REQ_SEGS
 * of them (*len is cut at a segment end to keep to that), appended to
 * r->segs (room grown as needed); w moves on to off + *len. */
static void cut_segments(run *r, int *cap, const te_object *o, uint64_t off, uint64_t *len, seg_walk *w, job *j) {
    uint64_t end = off + *len, at = off;
    j->seg_first = r->nsegs;
    j->nseg = 0;
    while (at < end && j->nseg < TE_REQ_SEGS) {
        const struct iovec *s = &o->iov[w->si];
        uint64_t seg_end = w->at + s->iov_len, stop = end < seg_end ? end : seg_end;
        if (r->nsegs == *cap) r->segs = xrealloc(r->segs, (size_t)(*cap *= 2) * sizeof *r->segs);
        r->segs[r->nsegs++] = (struct iovec){ (char *)s->iov_base + (at - w->at), (size_t)(stop - at) };
        j->nseg++;
        at = stop;
        if (at == seg_end) {
            w->at = seg_end;
            w->si++;
        }
    }
    *len = at - off;
}

static job *make_jobs(run *rn, te_object *objs, int n, int writing, int *njobs) {
    ectx *e = rn->e;
    int cap = 64, count = 0, segcap = 64;
    job *jobs = xmalloc((size_t)cap * sizeof *jobs);
    rn->segs = xmalloc((size_t)segcap * sizeof *rn->segs);
    for (int i = 0; i < n; i++) {
        if (objs[i].status != TE_OK) continue;
        uint64_t k = 0;
        seg_walk w = {0, 0};
        for (uint64_t off = 0; off < objs[i].len; k++) {
            uint64_t len = unit_len(e, &objs[i], off);
            job proto = { .obj = &objs[i], .obj_off = off };
            if (objs[i].niov) cut_segments(rn, &segcap, &objs[i], off, &len, &w, &proto);
            proto.len = len;
            for (int r = 0; r < (writing ? objs[i].nrep : 1); r++) {
                if (count == cap) jobs = xrealloc(jobs, (size_t)(cap *= 2) * sizeof *jobs);
                jobs[count] = proto;
                jobs[count++].rep = writing ? r : (int)(k % (uint64_t)objs[i].nrep);
            }
            off += len;
        }
    }
    *njobs = count;
    return jobs;
}

/* ---- paths ---- */

static int path_live(const epath *p) { return p->p != NULL; }

/* Dial one path. A shm socket name can be answered by another node on
 * this host (names carry a pid, and pids repeat across hosts and pid
 * namespaces): a path whose peer announces another node id counts as a
 * failed dial, so that node is reached over the network instead. */
static int path_connect(enode *n, epath *p) {
    p->inflight = 0;
    int rc = te_connect(p->t, p->local[0] ? p->local : NULL, p->peer, &p->p, n->last_err,
                        sizeof n->last_err);
    n->refused_us = rc == TE_EAUTH;
    if (rc != 0) {
        p->p = NULL;
        return -1;
    }
    uint32_t (*announced)(const te_path *) = p->t->ops->path_node_id;
    if (announced && announced(p->p) != n->id) {
        snprintf(n->last_err, sizeof n->last_err, "%s is node %u's, not node %u's", p->peer,
                 announced(p->p), n->id);
        p->t->ops->close(p->p);
        p->p = NULL;
        return -1;
    }
    return 0;
}

/* Dial the missing paths of one tier; 1 if the tier has a live path.
 * *failed is set when a dial failed. */
static int tier_connect(enode *n, int tier, int *failed) {
    int up = 0;
    const epath *bad = NULL;
    for (int i = 0; i < n->npaths; i++) {
        epath *p = &n->paths[i];
        if (p->tier != tier) continue;
        /* another stream to where a dial just failed would wait out the same timeout */
        if (!p->p && bad && strcmp(bad->local, p->local) == 0 && strcmp(bad->peer, p->peer) == 0) continue;
        if (!p->p && path_connect(n, p) != 0) { *failed = 1; bad = p; }
        up |= p->p != NULL;
    }
    return up;
}

/* (Re)connect a node's missing paths, shm first: an abstract unix socket
 * answers only on this host, so a node whose shm address connects is
 * local and its network addresses are not dialed at all; a remote one
 * costs one refused unix connect per reconnect.
 *
 * Only a failed connect of the tier in use holds the node off for
 * reconnect_ms, so a dead node costs one connect per window, not one per
 * unit; paths of a node that answers can break for reasons of their own
 * (a QP error) and are redialed at once, or two such breaks within the
 * window would make a live node unreachable. */
static void node_connect(ectx *e, enode *n) {
    uint64_t now = mono_ms();
    if (n->connect_failed_ms && now - n->connect_failed_ms < (uint64_t)e->cfg.reconnect_ms) return;
    n->connect_failed_ms = 0;
    for (int tier = 0; tier < 2; tier++) {
        int failed = 0;
        if (tier_connect(n, tier, &failed)) {
            if (failed) n->connect_failed_ms = now ? now : 1;
            return;
        }
    }
    n->connect_failed_ms = now ? now : 1;
}

/* A node that stays connected but silent (SIGSTOP, a hung process) is
 * no better than a dead one: a timeout closes all its paths (their
 * requests fail over now instead of each waiting out its own deadline)
 * and holds it off, twice as long per stall in a row up to
 * STALL_HOLD_MAX_MS, until an answer from it shows it is back. */
#define STALL_HOLD_MAX_MS 8000

static void stall_hold(ectx *e, enode *n) {
    uint64_t hold = n->stall_hold_ms ? n->stall_hold_ms * 2 : (uint64_t)e->cfg.reconnect_ms;
    n->stall_hold_ms = hold < STALL_HOLD_MAX_MS ? hold : STALL_HOLD_MAX_MS;
    n->stalled_until_ms = mono_ms() + n->stall_hold_ms;
}

static int any_live(const enode *n) {
    for (int i = 0; i < n->npaths; i++)
        if (path_live(&n->paths[i])) return 1;
    return 0;
}

static int node_up(ectx *e, enode *n) {
    if (n->stalled_until_ms && mono_ms() < n->stalled_until_ms) return 0;
    n->stalled_until_ms = 0;
    if (any_live(n)) return 1;
    uint64_t failed_before = n->connect_failed_ms;
    node_connect(e, n);
    if (any_live(n)) return 1;
    if (n->stall_hold_ms && n->connect_failed_ms != failed_before) {
        stall_hold(e, n);   /* redialed after its hold and still silent */
    }
    return 0;
}

/* A live path to n that carries disk reads (a network one: a same-host
 * node's are not dialed until one is needed); 1 if there is one now. */
static int disk_path_up(enode *n) {
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n->npaths; i++)
            if (path_live(&n->paths[i]) && n->paths[i].t->ops->disk_reads) return 1;
        int failed = 0;
        if (pass == 0) tier_connect(n, 1, &failed);
    }
    return 0;
}

/* A path that broke: close it now so its remaining requests complete
 * (TE_ECLOSED) and get retried; it is reconnected on a later call. */
static void path_broken(ectx *e, epath *p) {
    if (!p->p) return;
    p->t->ops->close(p->p);
    p->p = NULL;
}

static void node_stalled(ectx *e, enode *n) {
    stall_hold(e, n);
    snprintf(n->last_err, sizeof n->last_err, "no answer within the request timeout");
    for (int i = 0; i < n->npaths; i++) path_broken(e, &n->paths[i]);
}

/* ---- running jobs ---- */


/* node: whose fault it was (0: not a node's), so a writer can place again
 * elsewhere. */
static void job_fail(run *r, job *j, int status, uint32_t node, const char *why) {
    j->state = JOB_DONE;
    r->left--;
    if (j->obj->status == TE_OK) {
        j->obj->status = status;
        j->obj->failed_node = node;
    }
    if (r->first_err == TE_OK) {
        r->first_err = status;
        snprintf(r->err, r->errlen, "%s", why);
    }
}

/* Read: move to a replica not yet given up on; 0 if none is left. */
static int job_failover(run *r, job *j) {
    if (r->writing) return 0;
    j->tried |= 1u << j->rep;
    for (int k = 1; k <= j->obj->nrep; k++) {
        int cand = (j->rep + k) % j->obj->nrep;
        if (j->tried & (1u << cand)) continue;
        j->rep = cand;
        j->attempts = 0;
        count(&r->e->counts->failovers, 1);
        return 1;
    }
    return 0;
}

/* Try to put job on a path. 1 submitted, 0 wait (windows full), -1 done
 * with (it failed). */
static int job_dispatch(run *r, job *j, int idx) {
    ectx *e = r->e;
    char why[256];
    for (;;) {
        uint64_t start;
        const te_replica *rp = &j->obj->reps[j->rep];
        const te_extent *x = locate(rp, j->obj_off, &start);
        enode *n = find_node(e, x->node_id);
        if (!n || !node_up(e, n)) {
            if (n) snprintf(why, sizeof why, "node %u unreachable: %s", x->node_id, n->last_err);
            else {
                snprintf(why, sizeof why, "node %u is not known to the engine", x->node_id);
                j->obj->unknown_node = x->node_id;   /* the caller may learn it and try again */
            }
            if (job_failover(r, j)) continue;
            /* a node that refused our secret is alive: not its fault */
            job_fail(r, j, n ? TE_EIO : TE_EINVAL, n && !n->refused_us ? x->node_id : 0, why);
            return -1;
        }
        int disk = ext_on_disk(x);
        if (disk && !disk_path_up(n)) {
            snprintf(why, sizeof why, "node %u: no path that reads its disk: %s", x->node_id, n->last_err);
            if (job_failover(r, j)) continue;
            job_fail(r, j, TE_EIO, 0, why);
            return -1;
        }
        epath *best = NULL;
        for (int i = 0; i < n->npaths; i++) {
            epath *p = &n->paths[i];
            if (!path_live(p) || p->inflight >= p->t->cfg.window || (disk && !p->t->ops->disk_reads)) continue;
            if (!best || p->tier < best->tier || (p->tier == best->tier && p->inflight < best->inflight))
                best = p;
        }
        if (!best) return 0;
        te_req q = { .op = r->writing ? TE_WRITE : disk ? TE_READ_DISK : TE_READ,
                     .local = j->nseg ? NULL : (char *)j->obj->buf + j->obj_off,
                     .iov = j->nseg ? r->segs + j->seg_first : NULL, .niov = j->nseg,
                     .remote_off = x->offset + (j->obj_off - start), .len = j->len, .cap = &x->cap,
                     .cookie = (uint64_t)idx };
        int k = te_submit(best->t, best->p, &q, 1);
        if (k == 1) {
            best->inflight++;
            j->node = n;
            j->on = best;
            j->tp = best->p;
            j->state = JOB_INFLIGHT;
            j->attempts++;
            count(&e->counts->units, 1);
            return 1;
        }
        if (k < 0) { path_broken(e, best); continue; }
        best->inflight = best->t->cfg.window;   /* the transport says full */
        return 0;
    }
}

static void job_complete(run *r, const te_cqe *c) {
    if (c->cookie >= (uint64_t)r->njobs) return;     /* not ours */
    job *j = &r->jobs[c->cookie];
    if (j->state != JOB_INFLIGHT) return;
    j->on->inflight--;
    if (c->status == TE_OK) {
        j->node->stall_hold_ms = 0;
        j->state = JOB_DONE;
        j->has_crc = c->has_crc;
        j->crc = c->crc;
        r->left--;
        count(&r->e->counts->bytes, j->len);
        count(&r->e->counts->bytes_via[transport_index(r->e, j->on->t)], j->len);
        return;
    }
    if (c->status == TE_EFAULT) {   /* the caller's buffer: no other path or replica helps */
        job_fail(r, j, TE_EFAULT, 0, "local buffer not readable or writable (bad address)");
        return;
    }
    j->state = JOB_PENDING;
    int path_fault = c->status == TE_EIO || c->status == TE_ETIMEDOUT || c->status == TE_ECLOSED;
    if (c->status == TE_ETIMEDOUT) {
        /* the node is silent: another replica now, not a retry on it */
        if (j->on->p == j->tp) node_stalled(r->e, j->node);
    } else if (path_fault) {
        if (j->on->p && j->on->p == j->tp) path_broken(r->e, j->on);
        if (j->attempts < r->e->cfg.max_attempts) { count(&r->e->counts->retries, 1); return; }
    }
    if (job_failover(r, j)) return;
    char why[200];
    snprintf(why, sizeof why, "node %u: %s", j->node->id, te_strerror(c->status));
    job_fail(r, j, c->status, path_fault ? j->node->id : 0, why);
}

/* Poll every transport with requests in flight. With one busy transport
 * it may block; with several, a blocking wait on one would stall the
 * others, so each gets a 1 ms wait instead. */
static void poll_all(run *r, int *busy) {
    ectx *e = r->e;
    te_cqe cq[64];
    int nbusy = 0;
    for (int i = 0; i < e->nt; i++) nbusy += busy[i] > 0;
    if (nbusy == 0) busy[0] = 1;    /* nothing in flight: a short wait paces the redials */
    for (int i = 0; i < e->nt; i++) {
        if (!busy[i]) continue;
        int n = te_poll(e->t[i], cq, 64, nbusy > 1 ? 1 : nbusy ? 100 : 10);
        for (int k = 0; k < n; k++) job_complete(r, &cq[k]);
    }
}

static int run_jobs(run *r) {
    while (r->left > 0) {
        int busy[TE_ENGINE_MAX_TRANSPORTS] = {0};
        for (int i = 0; i < r->njobs; i++) {
            job *j = &r->jobs[i];
            if (j->state == JOB_PENDING) job_dispatch(r, j, i);
            if (j->state == JOB_INFLIGHT) busy[transport_index(r->e, j->on->t)]++;
        }
        if (r->left == 0) break;
        poll_all(r, busy);
    }
    return r->first_err;
}

/* A unit's sum into its slice's (units come in order and never cross a
 * slice's end: unit_len). */
static void slice_add(te_object *o, uint64_t off, uint64_t len, uint32_t crc) {
    uint64_t k = off / o->slice_size, in = off % o->slice_size;
    o->slice_crc[k] = in ? crc32c_combine(o->slice_crc[k], crc, len) : crc;
}

/* Each object's checksum from its units' (jobs come in object order,
 * a write's replicas of one unit next to each other: any of them will
 * do, as they all copied the same local bytes), and its slices' where
 * asked. An object with a unit no path checksummed gets crc_ok 0 and
 * the caller sums it itself. */
static void object_crcs(run *r, te_object *objs, int n) {
    uint64_t *covered = xcalloc((size_t)(n ? n : 1), sizeof *covered);
    for (int i = 0; i < r->njobs; i++) {
        const job *j = &r->jobs[i];
        te_object *o = j->obj;
        uint64_t *at = &covered[o - objs];
        if (j->state != JOB_DONE || !j->has_crc || j->obj_off != *at) continue;
        o->crc = *at ? crc32c_combine(o->crc, j->crc, j->len) : j->crc;
        if (o->slice_crc && o->slice_size) slice_add(o, j->obj_off, j->len, j->crc);
        *at += j->len;
    }
    for (int i = 0; i < n; i++) {
        objs[i].crc_ok = objs[i].status == TE_OK && covered[i] == objs[i].len;
        objs[i].slices_ok = objs[i].crc_ok && objs[i].slice_crc && objs[i].slice_size;
    }
    free(covered);
}

/* Registers buffers the caller did not, for this call only. */
static eregion *temp_register(ectx *e, te_object *objs, int n) {
    eregion *tmp = xcalloc((size_t)n, sizeof *tmp);
    char err[128];
    for (int i = 0; i < n; i++) {
        if (objs[i].status != TE_OK) continue;
        if (objs[i].niov) {   /* segments are the caller's registered memory, or refused */
            for (int s = 0; s < objs[i].niov && objs[i].status == TE_OK; s++)
                if (!ectx_segments(e) || !registered(e, objs[i].iov[s].iov_base, objs[i].iov[s].iov_len))
                    objs[i].status = TE_EINVAL;
            continue;
        }
        if (registered(e, objs[i].buf, objs[i].len)) continue;
        tmp[i].addr = objs[i].buf;
        tmp[i].len = objs[i].len;
        if (region_reg(e, &tmp[i], 0, err, sizeof err) != 0) objs[i].status = TE_EINVAL;
    }
    return tmp;
}

static int transfer(ectx *e, te_object *objs, int n, int writing, char *err, size_t errlen) {
    int first = TE_OK;
    if (n < 0 || (n > 0 && !objs)) { snprintf(err, errlen, "bad object array"); return TE_EINVAL; }
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < n; i++) {
        char why[200];
        objs[i].status = check_object(&objs[i], why, sizeof why);
        objs[i].failed_node = objs[i].unknown_node = 0;
        if (objs[i].status != TE_OK && first == TE_OK) {
            first = objs[i].status;
            snprintf(err, errlen, "object %d: %s", i, why);
        }
    }
    eregion *tmp = temp_register(e, objs, n);
    run r = { .e = e, .writing = writing, .err = err, .errlen = errlen, .first_err = TE_OK };
    r.jobs = make_jobs(&r, objs, n, writing, &r.njobs);
    r.left = r.njobs;
    int rc = run_jobs(&r);
    object_crcs(&r, objs, n);
    if (first == TE_OK) first = rc;
    for (int i = 0; i < n; i++) region_dereg(e, &tmp[i]);
    free(tmp);
    free(r.jobs);
    free(r.segs);
    pthread_mutex_unlock(&e->mu);
    return first;
}

int ectx_transfer(ectx *e, te_object *objs, int n, int writing, char *err, size_t errlen) {
    return transfer(e, objs, n, writing, err, errlen);
}

/* ---- reads and writes that never wait ---- */

/* Extent x (object bytes from off) read or written (op) at once through a
 * live path of its node that can (ops->read_now, ops->write_now); 0 and
 * its checksum in *crc, or -1. */
static int extent_now(ectx *e, te_op op, te_object *o, const te_extent *x, uint64_t off, uint64_t now_ms,
                      uint32_t *crc) {
    enode *n = find_node(e, x->node_id);
    if (!n || (n->stalled_until_ms && mono_ms() < n->stalled_until_ms) || ext_on_disk(x)) return -1;
    te_req q = {.op = op, .local = (char *)o->buf + off, .remote_off = x->offset, .len = x->length,
                .cap = &x->cap};
    for (int i = 0; i < n->npaths; i++) {
        epath *p = &n->paths[i];
        if (!path_live(p)) continue;
        int (*now)(te_path *, const te_req *, uint64_t, uint32_t *) =
            op == TE_WRITE ? p->t->ops->write_now : p->t->ops->read_now;
        if (!now || now(p->p, &q, now_ms, crc) != TE_OK) continue;
        count(&e->counts->units, 1);
        count(&e->counts->bytes, x->length);
        count(&e->counts->bytes_via[transport_index(e, p->t)], x->length);
        return 0;
    }
    return -1;
}

/* One replica of o read or written whole at once, checksum and all; 0 or -1. */
static int replica_now(ectx *e, te_op op, te_object *o, const te_replica *rp, uint64_t now_ms) {
    uint64_t off = 0;
    for (int i = 0; i < rp->next; i++) {
        uint32_t crc;
        if (extent_now(e, op, o, &rp->ext[i], off, now_ms, &crc) != 0) return -1;
        o->crc = off ? crc32c_combine(o->crc, crc, rp->ext[i].length) : crc;
        off += rp->ext[i].length;
    }
    return 0;
}

/* The first replica's extents of o (the one replica_now reads unless it
 * fails) handed to a path's prefetch, so the misses of a batch of small
 * values overlap instead of each copy waiting for its own. */
static void prefetch_now(ectx *e, const te_object *o) {
    if (o->nrep < 1 || !o->reps) return;
    const te_replica *rp = &o->reps[0];
    for (int i = 0; i < rp->next && i < 2; i++) {
        const te_extent *x = &rp->ext[i];
        enode *n = find_node(e, x->node_id);
        if (!n || ext_on_disk(x)) continue;
        te_req q = {.op = TE_READ, .remote_off = x->offset, .len = x->length, .cap = &x->cap};
        for (int k = 0; k < n->npaths; k++) {
            epath *p = &n->paths[k];
            if (path_live(p) && p->t->ops->prefetch) {
                p->t->ops->prefetch(p->p, &q);
                break;
            }
        }
    }
}

/* o moved at once: a read from the first replica that can, a write to
 * every replica (a write some replica could not take is not done). */
static int object_now(ectx *e, te_op op, te_object *o, uint64_t now_ms) {
    for (int r = 0; r < o->nrep; r++) {
        int rc = replica_now(e, op, o, &o->reps[r], now_ms);
        if (op == TE_READ && rc == 0) return TE_OK;
        if (op == TE_WRITE && rc != 0) return TE_EIO;
    }
    return op == TE_WRITE ? TE_OK : TE_EIO;
}

static int engine_now(ectx *e, te_op op, te_object *objs, int n) {
    int done = 0;
    uint64_t now_ms = wall_ms();
    pthread_mutex_lock(&e->mu);
    if (op == TE_READ)
        for (int i = 0; i < n; i++) prefetch_now(e, &objs[i]);
    for (int i = 0; i < n; i++) {
        te_object *o = &objs[i];
        char why[200];
        o->failed_node = o->unknown_node = 0;
        o->crc_ok = o->slices_ok = 0;   /* no slice sums on this path */
        o->status = check_object(o, why, sizeof why);
        if (o->status != TE_OK || o->niov || !registered(e, o->buf, o->len)) {
            o->status = TE_EINVAL;   /* segmented objects go the usual way */
            continue;
        }
        o->status = object_now(e, op, o, now_ms);
        o->crc_ok = o->status == TE_OK;
        done += o->status == TE_OK;
    }
    pthread_mutex_unlock(&e->mu);
    return done;
}

int ectx_now(ectx *e, te_op op, te_object *objs, int n) { return engine_now(e, op, objs, n); }

int ectx_connect_local(ectx *e) {
    int up = 0;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->nnodes; i++) {
        enode *n = &e->nodes[i];
        int failed = 0;
        if (n->stalled_until_ms && mono_ms() < n->stalled_until_ms) continue;
        up += tier_connect(n, 0, &failed);
    }
    pthread_mutex_unlock(&e->mu);
    return up;
}

int ectx_transport_kinds(const ectx *e, const te_transport_ops **ops) {
    for (int i = 0; i < e->nt; i++) ops[i] = e->t[i]->ops;
    return e->nt;
}

int ectx_segments(const ectx *e) {
    for (int i = 0; i < e->nt; i++)
        if (!e->t[i]->ops->segments) return 0;
    return e->nt > 0;
}
