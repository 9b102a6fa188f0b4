/* backend/shm_transport.c - see shm_transport.h. */
#include "backend/shm_transport.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/cap.h"
#include "backend/netio.h"
#include "backend/shm_maps.h"
#include "backend/shm_handoff.h"
#include "backend/wire.h"
#include "backend/xport_base.h"
#include "core/anet.h"
#include "core/crc32c.h"
#include "core/log.h"
#include "core/util.h"
#include "core/workpool.h"

#define COPY_SHARE     (1ULL << 20)  /* copies are cut into shares of this for the pool */
/* A batch of fewer bytes than this is copied on the calling thread: for
 * small values (a gateway's batch of 64-byte SETs) waking the pool's
 * threads costs more than the copy. */
#define COPY_POOL_MIN  (256ULL << 10)
#define COPY_STREAM_MIN (256ULL << 10)   /* crc32c_copy streams from here (core/crc32c.c) */

/* ---- copies: into and out of the mapping, or pread/pwrite on the fd ---- */

/* Map mode copies with crc32c_copy, so every request completes with the
 * checksum of its bytes and the client needs no second pass over them;
 * only through chunks of the mapping that are warm (shm_maps.h), since a
 * first touch per page traps (microseconds each under this VM's
 * hypervisor) and would make the copy slower than pread/pwrite. FD mode,
 * and map mode where the mapping is still cold, let the kernel copy
 * through its own mapping: one system call per part, no checksum on the
 * way. Both directions stream their stores past the cache from
 * crc32c_copy's threshold up: reads up to 8 MiB used to store plainly,
 * but streamed, a 4 MiB get's fastest round fell from 213-228 us to
 * 173-210 us and its CPU from 237-250 to 214-238 us (a memcpy of 181-198
 * us alternating with it; 2 MiB and 8 MiB alike): plain stores fetch
 * every destination line before writing it. */

/* len bytes between local and the mapping at seg, in op's direction;
 * their CRC32C. */
static uint32_t copy_mapped(te_op op, uint32_t crc, void *local, char *seg, size_t len) {
    return op == TE_WRITE ? crc32c_copy(crc, seg, local, len) : crc32c_copy(crc, local, seg, len);
}

typedef struct copy_item {
    char *local;
    const struct iovec *iov;  /* else: a segmented request, whole, its segments in order */
    int niov;
    uint64_t off, len;
    int req;                  /* index in the path's queue */
    int first;                /* the request's first share */
    uint32_t crc;             /* map mode: of this share */
} copy_item;

typedef struct copy_batch {
    int fd;
    char *map;                /* NULL: fd mode */
    te_op op;
    copy_item *it;
    int *status;              /* per request; a failed share sets TE_EIO */
} copy_batch;

static int copy_range(int fd, te_op op, char *local, uint64_t off, uint64_t len) {
    while (len) {
        size_t n = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t r = op == TE_WRITE ? pwrite(fd, local, n, (off_t)off) : pread(fd, local, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        local += r;
        off += (uint64_t)r;
        len -= (uint64_t)r;
    }
    return 0;
}

/* A segmented request's segments on the fd in one pwritev/preadv (a
 * syscall per 16 KiB piece of a page cost 32 where the whole page took
 * one), resumed after a short one. iov is a copy the call may move. */
static int copy_rangev(int fd, te_op op, struct iovec *iov, int niov, uint64_t off) {
    while (niov > 0) {
        ssize_t r = op == TE_WRITE ? pwritev(fd, iov, niov, (off_t)off) : preadv(fd, iov, niov, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        off += (uint64_t)r;
        while (niov > 0 && (size_t)r >= iov->iov_len) {
            r -= (ssize_t)iov->iov_len;
            iov++;
            niov--;
        }
        if (niov > 0) {
            iov->iov_base = (char *)iov->iov_base + r;
            iov->iov_len -= (size_t)r;
        }
    }
    return 0;
}

/* A segmented request's segments one after the other, the checksum
 * carried across them (no combine per segment). A request as large as a
 * streamed copy gathers (scatters) its segments with streamed stores and
 * one fence, each next segment's source prefetched: with plain stores
 * each 16 KiB piece of a 512 KiB page fetched its destination lines
 * first, and the copy cost 1.5x the same bytes whole; with a fence and
 * no prefetch per piece, a layer-major arena's pieces still cost about
 * 1.3x (crc32c.h). */
static void copy_segments(copy_batch *b, copy_item *c) {
    if (b->map && c->len >= COPY_STREAM_MIN) {
        char *seg = b->map + c->off;
        c->crc = b->op == TE_WRITE ? crc32c_copy_gather(0, seg, c->iov, c->niov)
                                   : crc32c_copy_scatter(0, c->iov, c->niov, seg);
        return;
    }
    if (!b->map) {
        struct iovec v[TE_REQ_SEGS];
        int ok = c->niov <= TE_REQ_SEGS;   /* the engine's bound on a request's segments */
        if (ok) memcpy(v, c->iov, (size_t)c->niov * sizeof *v);
        if (!ok || copy_rangev(b->fd, b->op, v, c->niov, c->off) != 0)
            __atomic_store_n(&b->status[c->req], errno == EFAULT ? TE_EFAULT : TE_EIO, __ATOMIC_RELAXED);
        return;
    }
    uint64_t off = c->off;
    uint32_t crc = 0;
    for (int s = 0; s < c->niov; s++) {
        crc = copy_mapped(b->op, crc, c->iov[s].iov_base, b->map + off, c->iov[s].iov_len);
        off += c->iov[s].iov_len;
    }
    c->crc = crc;
}

static void copy_share(void *arg, int i) {
    copy_batch *b = arg;
    copy_item *c = &b->it[i];
    if (c->niov) {
        copy_segments(b, c);
    } else if (b->map) {
        char *seg = b->map + c->off;
        c->crc = copy_mapped(b->op, 0, c->local, seg, c->len);
    } else if (copy_range(b->fd, b->op, c->local, c->off, c->len) != 0) {
        /* EFAULT: the caller's buffer, not the node, is at fault */
        __atomic_store_n(&b->status[c->req], errno == EFAULT ? TE_EFAULT : TE_EIO, __ATOMIC_RELAXED);
    }
}

/* ---- client side ---- */

typedef struct shm_xport shm_xport;

struct te_path {
    te_link link;             /* first: in shm_xport.paths */
    shm_xport *x;
    int fd;                   /* unix socket to the node: verification (fd mode), liveness */
    int seg_fd;               /* the node's segment, copied with pread/pwrite (fd mode; map mode while cold:
                               * the mapping's, shm_map_fd, not the path's to close) */
    shm_map *sm;              /* map mode: the process's mapping of the segment */
    char *map;                /* its base, NULL in fd mode */
    uint64_t size;
    uint32_t node_id;
    uint64_t incarnation;     /* the node process's (shm_handoff.h) */
    int broken;
    uint64_t used_ms;         /* shm_copy_now's now_ms when it last marked the mapping used */
    te_req *q;                /* queued, not yet verified */
    int nq;
};

struct shm_xport {
    te_xport_base b;          /* first: an shm_xport is a te_transport */
    workpool *pool;
};

static shm_xport *SX(te_transport *t) { return (shm_xport *)t; }

/* Helpers that copy beside the caller; NULL (the caller alone) when the
 * configuration asks for one thread. */
static workpool *copy_pool_start(const te_config *cfg) {
    if (cfg->copy_threads == 1) return NULL;
    return workpool_start(cfg->copy_threads > 1 ? cfg->copy_threads - 1 : workpool_helpers_for_cores(3));
}

static void cq_push(shm_xport *x, te_path *p, uint64_t cookie, int status) {
    te_cq_push(&x->b.cq, p, cookie, status);
}

static void path_fail(te_path *p, int status) {
    for (int i = 0; i < p->nq; i++) cq_push(p->x, p, p->q[i].cookie, status);
    p->nq = 0;
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
    if (p->seg_fd >= 0 && !p->sm) close(p->seg_fd);
    p->seg_fd = -1;
    shm_map_put(p->sm);
    p->sm = NULL;
    p->map = NULL;
    p->broken = 1;
}

/* Everything a request must pass before the node is even asked; in map
 * mode all it must pass, since the node never sees the request: the
 * capability's node, rights, expiry and range are checked here (its MAC
 * only the node could check). This keeps a correct client inside its
 * capabilities; it cannot stop a process that holds the mapping from
 * writing elsewhere, which is why map mode is for trusted clients. */
static int local_check(te_path *p, const te_req *r, uint64_t now_ms) {
    if (!r->cap || r->len == 0 || r->len > TE_WIRE_MAX_LEN || (r->op != TE_READ && r->op != TE_WRITE) ||
        !te_mr_list_covers_req(&p->x->b.mrs, r))
        return TE_EINVAL;
    if (r->remote_off > p->size || r->len > p->size - r->remote_off) return TE_ERANGE;
    return te_cap_check_nokey(r->cap, p->node_id, r->op, r->remote_off, r->len, now_ms);
}

static int shm_submit(te_path *p, const te_req *reqs, int n) {
    if (p->broken) return -1;
    int accepted = 0;
    uint64_t now = wall_ms();   /* once per submit: a batch of small values has thousands */
    for (; accepted < n; accepted++) {
        const te_req *r = &reqs[accepted];
        int st = local_check(p, r, now);
        if (st != TE_OK) { cq_push(p->x, p, r->cookie, st); continue; }
        if (p->nq == p->x->b.t.cfg.window) break;
        p->q[p->nq++] = *r;
    }
    return accepted;
}

/* The node never speaks unasked, so a readable socket means it hung up:
 * a zero-timeout poll notices a dead node without a round trip. */
static int node_gone(const te_path *p) {
    struct pollfd pfd = { .fd = p->fd, .events = POLLIN | POLLRDHUP };
    return poll(&pfd, 1, 0) != 0;
}

/* Copies each of the first nq queued requests of direction op whose
 * status is TE_OK, through map (NULL: the fd), cut into shares of at most
 * COPY_SHARE bytes that the pool's threads take as they come free: a
 * batch of blocks spreads over the cores as well as one large object
 * does. Through the map crc[] gets each request's checksum. */
static void copy_queued(te_path *p, char *map, int nq, te_op op, int *status, uint32_t *crc) {
    int n = 0;
    uint64_t bytes = 0;
    for (int i = 0; i < nq; i++)
        if (p->q[i].op == op && status[i] == TE_OK) {
            n += p->q[i].niov ? 1 : (int)((p->q[i].len + COPY_SHARE - 1) / COPY_SHARE);
            bytes += p->q[i].len;
        }
    if (n == 0) return;
    copy_batch b = { .fd = p->seg_fd, .map = map, .op = op,
                     .it = xmalloc((size_t)n * sizeof *b.it), .status = status };
    int k = 0;
    for (int i = 0; i < nq; i++) {
        const te_req *q = &p->q[i];
        if (q->op != op || status[i] != TE_OK) continue;
        if (q->niov) {   /* at most a transfer unit: one item, its segments in order */
            b.it[k++] = (copy_item){ .iov = q->iov, .niov = q->niov, .off = q->remote_off, .len = q->len,
                                     .req = i, .first = 1 };
            continue;
        }
        for (uint64_t at = 0; at < q->len; at += COPY_SHARE, k++)
            b.it[k] = (copy_item){ .local = (char *)q->local + at, .off = q->remote_off + at, .req = i,
                                   .first = at == 0, .len = q->len - at < COPY_SHARE ? q->len - at : COPY_SHARE };
    }
    /* FD-mode writes stay on this thread: shmem serialises writers of one
     * file on its inode lock, so a second writer would only spin. Reads,
     * and copies through the mapping, take no lock. */
    int pooled = (op == TE_READ || map) && bytes >= COPY_POOL_MIN;
    workpool_run(pooled ? p->x->pool : NULL, k, copy_share, &b);   /* k: the items made (n bounds them) */
    for (int i = 0; crc && i < k; i++) {   /* shares come in request order */
        const copy_item *c = &b.it[i];
        crc[c->req] = c->first ? c->crc : crc32c_combine(crc[c->req], c->crc, c->len);
    }
    free(b.it);
}

/* Every queued request goes to the node in one round trip, which
 * verifies the capabilities. Writes wait for its verdict before copying;
 * reads are copied while it decides (copying into the reader's own buffer
 * harms nothing) and complete with its verdict, so the trip costs a read
 * only what the copy does not hide. */
static int send_headers(te_path *p, uint64_t dl) {
    int n = p->nq;
    uint8_t *hdr = xmalloc((size_t)n * TE_WIRE_REQ_LEN);
    for (int i = 0; i < n; i++) {
        te_wire_req w = { .op = p->q[i].op, .cookie = (uint64_t)i, .remote_off = p->q[i].remote_off,
                          .len = p->q[i].len };
        te_cap_encode(p->q[i].cap, w.cap);
        te_wire_req_encode(&w, hdr + (size_t)i * TE_WIRE_REQ_LEN);
    }
    int rc = te_write_full(p->fd, hdr, (size_t)n * TE_WIRE_REQ_LEN, dl);
    free(hdr);
    return rc;
}

/* The node's verdicts, in order, into status[]; TE_OK, else TE_ETIMEDOUT
 * when the node did not answer by dl (the engine then treats it as
 * stalled) or TE_EIO on a broken exchange. */
static int recv_verdicts(te_path *p, int *status, uint64_t dl) {
    int n = p->nq, ok = 1, late = 0;
    uint8_t *resp = xmalloc((size_t)n * TE_WIRE_RESP_LEN);
    if (te_read_full(p->fd, resp, (size_t)n * TE_WIRE_RESP_LEN, dl) != 0) {
        ok = 0;
        late = errno == ETIMEDOUT;
    }
    for (int i = 0; ok && i < n; i++) {
        te_wire_resp r;
        if (te_wire_resp_decode(&r, resp + (size_t)i * TE_WIRE_RESP_LEN) != 0 || r.cookie != (uint64_t)i) ok = 0;
        else status[i] = r.status;
    }
    free(resp);
    return ok ? TE_OK : late ? TE_ETIMEDOUT : TE_EIO;
}

static void path_exchange(te_path *p) {
    int n = p->nq;
    uint64_t dl = te_deadline(p->x->b.t.cfg.timeout_ms);
    if (send_headers(p, dl) != 0) {
        path_fail(p, errno == ETIMEDOUT ? TE_ETIMEDOUT : TE_EIO);
        return;
    }
    int *read_st = xcalloc((size_t)n, sizeof *read_st), *verdict = xcalloc((size_t)n, sizeof *verdict);
    copy_queued(p, NULL, n, TE_READ, read_st, NULL);        /* TE_OK == 0: all of them */
    int rc = recv_verdicts(p, verdict, dl);
    if (rc != TE_OK) {
        path_fail(p, rc);   /* no write was copied: every queued one fails */
    } else {
        copy_queued(p, NULL, n, TE_WRITE, verdict, NULL);   /* the accepted ones */
        for (int i = 0; i < n; i++) {
            int st = verdict[i] == TE_OK && p->q[i].op == TE_READ ? read_st[i] : verdict[i];
            cq_push(p->x, p, p->q[i].cookie, st);
        }
        p->nq = 0;
    }
    free(read_st);
    free(verdict);
}

/* Moves the queued requests whose range is warm in the mapping to the
 * front of the queue; how many. */
static int warm_first(te_path *p) {
    int w = 0;
    if (p->nq) shm_map_used(p->sm);
    for (int i = 0; i < p->nq; i++) {
        if (!shm_map_ready(p->sm, p->q[i].remote_off, p->q[i].len)) continue;
        te_req t = p->q[w];
        p->q[w++] = p->q[i];
        p->q[i] = t;
    }
    return w;
}

/* Map mode: requests to warm chunks are copied through the mapping with
 * no exchange with the node at all (each was checked against its
 * capability at submit); the rest, while their chunks are cold, go the
 * fd way, the node verifying them. The node's socket is polled first so
 * that a node that went away fails its paths rather than leaving us
 * writing into a segment nobody serves. */
static void path_run_mapped(te_path *p) {
    int w = warm_first(p);
    if (w) {
        int *st = xcalloc((size_t)w, sizeof *st);
        uint32_t *crc = xcalloc((size_t)w, sizeof *crc);
        copy_queued(p, p->map, w, TE_READ, st, crc);
        copy_queued(p, p->map, w, TE_WRITE, st, crc);
        for (int i = 0; i < w; i++) te_cq_push_crc(&p->x->b.cq, p, p->q[i].cookie, TE_OK, crc[i]);
        p->nq -= w;
        memmove(p->q, p->q + w, (size_t)p->nq * sizeof *p->q);
        free(st);
        free(crc);
    }
    if (p->nq) path_exchange(p);
}

/* A read or write the mapping can serve now: the checks a submit makes
 * (local_check: the cap allows r->op), then the copy, with no node
 * exchange (as path_run_mapped's warm requests). Both read_now and
 * write_now. */
static int shm_copy_now(te_path *p, const te_req *r, uint64_t now_ms, uint32_t *crc) {
    if (p->broken || !p->map || r->niov) return TE_EINVAL;   /* segments go the queued way */
    int st = local_check(p, r, now_ms);
    if (st != TE_OK) return st;
    if (!shm_map_ready(p->sm, r->remote_off, r->len)) return TE_EINVAL;
    if (p->used_ms != now_ms) {   /* once per batch, not a clock read per value */
        shm_map_used(p->sm);
        p->used_ms = now_ms;
    }
    char *seg = p->map + r->remote_off;
    *crc = copy_mapped(r->op, 0, r->local, seg, r->len);
    return TE_OK;
}

#define PREFETCH_MAX 256   /* bytes of a value brought in ahead: a small value, a large one's start */

static void shm_prefetch(te_path *p, const te_req *r) {
    if (p->broken || !p->map || r->remote_off > p->size || r->len > p->size - r->remote_off) return;
    const char *at = p->map + r->remote_off;
    uint64_t len = r->len < PREFETCH_MAX ? r->len : PREFETCH_MAX;
    for (uint64_t o = 0; o < len; o += 64) __builtin_prefetch(at + o);
    __builtin_prefetch(at + len - 1);   /* a value that straddles a line */
}

static void path_run(te_path *p) {
    if (node_gone(p)) path_fail(p, TE_EIO);
    else if (p->map) path_run_mapped(p);
    else path_exchange(p);
}

static int shm_poll(te_transport *t, te_cqe *out, int max, int timeout_ms) {
    shm_xport *x = SX(t);
    for (te_link *l = x->b.paths; l; l = l->next) {
        te_path *p = (te_path *)l;
        if (!p->broken && p->nq) path_run(p);
    }
    if (te_cq_empty(&x->b.cq) && timeout_ms > 0) {
        /* Nothing queued anywhere: the caller is waiting on nothing. */
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    return te_cq_pop(&x->b.cq, out, max);
}

/* The node restarted (another incarnation answered): this transport's
 * other paths to it lead to the dead process; failing them now lets go
 * of its mapping (and the memory of a memfd segment), where an idle
 * path would have held it until its next request. */
static void drop_older_incarnations(shm_xport *x, const te_shm_hello *h) {
    for (te_link *l = x->b.paths; l; l = l->next) {
        te_path *p = (te_path *)l;
        if (p->broken || p->node_id != h->node_id || p->incarnation == h->incarnation) continue;
        log_notice("shm: node %u restarted (incarnation %016llx, was %016llx): its segment is mapped anew",
                   h->node_id, (unsigned long long)h->incarnation, (unsigned long long)p->incarnation);
        path_fail(p, TE_ECLOSED);
    }
}

static int shm_connect(te_transport *t, const char *local, const char *peer, te_path **out,
                       char *err, size_t errlen) {
    shm_xport *x = SX(t);
    char why[ANET_ERR_LEN];
    int seg_fd = -1;
    te_shm_hello h;
    struct sockaddr_un sa;
    unsigned sl;
    if (!peer || te_unix_addr(peer, &sa, &sl) != 0) {
        snprintf(err, errlen, "shm: bad address '%s' (want unix:/path or unix:@name)", peer ? peer : "");
        return -1;
    }
    int fd = anet_unix_connect(why, peer + 5);
    if (fd == ANET_ERR) {
        snprintf(err, errlen, "shm: connect %s: %s", peer, why);
        return -1;
    }
    int auth = te_auth_client(fd, t->cfg.secret, t->cfg.connect_timeout_ms, why, sizeof why);
    if (auth != TE_AUTH_OK) {
        snprintf(err, errlen, "%s: %s", peer, why);
        close(fd);
        return auth == TE_AUTH_REFUSED ? TE_EAUTH : -1;   /* the engine does not blame the node */
    }
    if (te_shm_recv_segment(fd, &seg_fd, &h, t->cfg.connect_timeout_ms) < 0) {
        snprintf(err, errlen, "shm: %s: no segment received: %s", peer, strerror(errno));
        close(fd);
        return -1;
    }
    uint64_t size = h.size;
    struct stat sb;
    if (fstat(seg_fd, &sb) != 0 || sb.st_size < 0 || (uint64_t)sb.st_size < size) {
        snprintf(err, errlen, "shm: %s: the segment fd is smaller than the %llu bytes announced", peer,
                 (unsigned long long)size);
        close(seg_fd);
        close(fd);
        return -1;
    }
    drop_older_incarnations(x, &h);
    shm_map *sm = NULL;
    if (t->cfg.shm_mode == TE_SHM_MAP &&
        !(sm = shm_map_get(seg_fd, size, h.incarnation, t->cfg.shm_warm_mbps, why, sizeof why))) {
        snprintf(err, errlen, "shm: %s: %s", peer, why);
        close(seg_fd);
        close(fd);
        return -1;
    }
    struct ucred peer_cred;   /* the node process: its exit drops the mapping even if we stay idle */
    socklen_t cl = sizeof peer_cred;
    if (sm && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer_cred, &cl) == 0) shm_map_watch(sm, (int)peer_cred.pid);
    if (sm) {   /* cold chunks go through the mapping's fd, which it lets go of with the pages */
        close(seg_fd);
        seg_fd = shm_map_fd(sm);
    }
    te_path *p = xcalloc(1, sizeof *p);
    *p = (te_path){ .x = x, .fd = fd, .seg_fd = seg_fd, .sm = sm, .map = sm ? shm_map_base(sm) : NULL,
                    .size = size, .node_id = h.node_id, .incarnation = h.incarnation,
                    .q = xcalloc((size_t)t->cfg.window, sizeof(te_req)) };
    te_link_push(&x->b.paths, &p->link);
    if (!x->pool) x->pool = copy_pool_start(&t->cfg);
    *out = p;
    return 0;
}

static void shm_close(te_path *p) {
    shm_xport *x = p->x;
    if (!p->broken) path_fail(p, TE_ECLOSED);
    te_link_remove(&x->b.paths, &p->link);
    free(p->q);
    free(p);
}

static void shm_destroy(te_transport *t) {
    shm_xport *x = SX(t);
    te_xport_base_clear(&x->b, shm_close);
    workpool_stop(x->pool);
    free(x);
}

static uint32_t shm_path_node_id(const te_path *p) { return p->node_id; }

uint64_t te_shm_path_cold_bytes(const te_path *p) { return p->sm ? shm_map_cold_bytes(p->sm) : 0; }

uint64_t te_shm_cold_bytes(void) { return shm_maps_cold_bytes(); }

static const te_transport_ops shm_ops = {
    .name = "shm", .scheme = "unix", .same_host = 1, .segments = 1, .path_node_id = shm_path_node_id,
    .connect = shm_connect, .reg_mem = te_xport_reg_mem, .dereg_mem = te_xport_dereg_mem,
    .submit = shm_submit, .poll = shm_poll, .read_now = shm_copy_now, .write_now = shm_copy_now,
    .prefetch = shm_prefetch, .close = shm_close,
    .destroy = shm_destroy,
};

te_transport *te_shm_create(const te_config *cfg, char *err, size_t errlen) {
    shm_xport *x = xcalloc(1, sizeof *x);
    te_xport_base_init(&x->b, &shm_ops, cfg);
    return &x->b.t;
}
