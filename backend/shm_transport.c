/* backend/shm_transport.c - see shm_transport.h. */
#include "backend/shm_transport.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/cap.h"
#include "backend/netio.h"
#include "backend/shm_handoff.h"
#include "backend/wire.h"
#include "backend/xport_base.h"
#include "core/anet.h"
#include "core/crc32c.h"
#include "core/log.h"
#include "core/util.h"
#include "core/workpool.h"

#define COPY_PIECE     (1ULL << 20)  /* copies are cut into pieces of this for the pool */

/* ---- copies: into and out of the mapping, or pread/pwrite on the fd ---- */

/* Map mode copies with crc32c_copy, so every request completes with the
 * checksum of its bytes and the client needs no second pass over them.
 * The mapping's page tables are filled when it is made (below): a first
 * touch per page would otherwise trap (several microseconds each under
 * this VM's hypervisor), which made an unpopulated mapping slower than
 * pread/pwrite. FD mode lets the kernel copy through its own mapping:
 * one system call per part, no checksum on the way. */

typedef struct copy_item {
    char *local;
    uint64_t off, len;
    int req;                  /* index in the path's queue */
    uint32_t crc;             /* map mode: of this piece */
} copy_item;

typedef struct copy_batch {
    int fd;
    char *map;                /* NULL: fd mode */
    te_op op;
    copy_item *it;
    int *status;              /* per request; a failed piece sets TE_EIO */
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

static void copy_piece(void *arg, int i) {
    copy_batch *b = arg;
    copy_item *c = &b->it[i];
    if (b->map) {
        char *seg = b->map + c->off;
        c->crc = b->op == TE_WRITE ? crc32c_copy(0, seg, c->local, c->len) : crc32c_copy(0, c->local, seg, c->len);
    } else if (copy_range(b->fd, b->op, c->local, c->off, c->len) != 0) {
        __atomic_store_n(&b->status[c->req], TE_EIO, __ATOMIC_RELAXED);
    }
}

/* ---- client side ---- */

typedef struct shm_xport shm_xport;

struct te_path {
    te_link link;             /* first: in shm_xport.paths */
    shm_xport *x;
    int fd;                   /* unix socket to the node: verification (fd mode), liveness */
    int seg_fd;               /* the node's segment, copied with pread/pwrite (fd mode) */
    char *map;                /* map mode: the segment, mapped read-write and populated */
    uint64_t size;
    uint32_t node_id;
    int broken;
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
    if (p->seg_fd >= 0) close(p->seg_fd);
    p->seg_fd = -1;
    if (p->map) munmap(p->map, p->size);
    p->map = NULL;
    p->broken = 1;
}

/* Everything a request must pass before the node is even asked; in map
 * mode all it must pass, since the node never sees the request: the
 * capability's node, rights, expiry and range are checked here (its MAC
 * only the node could check). This keeps a correct client inside its
 * capabilities; it cannot stop a process that holds the mapping from
 * writing elsewhere, which is why map mode is for trusted clients. */
static int local_check(te_path *p, const te_req *r) {
    if (!r->cap || r->len == 0 || r->len > TE_WIRE_MAX_LEN || (r->op != TE_READ && r->op != TE_WRITE) ||
        !te_mr_list_covers(&p->x->b.mrs, r->local, r->len))
        return TE_EINVAL;
    if (r->remote_off > p->size || r->len > p->size - r->remote_off) return TE_ERANGE;
    return te_cap_check_nokey(r->cap, p->node_id, r->op, r->remote_off, r->len, wall_ms());
}

static int shm_submit(te_path *p, const te_req *reqs, int n) {
    if (p->broken) return -1;
    int accepted = 0;
    for (; accepted < n; accepted++) {
        const te_req *r = &reqs[accepted];
        int st = local_check(p, r);
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

/* Copies every queued request of direction op whose status is TE_OK, cut
 * into pieces of at most COPY_PIECE bytes that the pool's threads take as
 * they come free: a batch of blocks spreads over the cores as well as one
 * large object does. In map mode crc[] gets each request's checksum. */
static void copy_queued(te_path *p, te_op op, int *status, uint32_t *crc) {
    int n = 0;
    for (int i = 0; i < p->nq; i++)
        if (p->q[i].op == op && status[i] == TE_OK) n += (int)((p->q[i].len + COPY_PIECE - 1) / COPY_PIECE);
    if (n == 0) return;
    copy_batch b = { .fd = p->seg_fd, .map = p->map, .op = op, .it = xmalloc((size_t)n * sizeof *b.it),
                     .status = status };
    int k = 0;
    for (int i = 0; i < p->nq; i++) {
        const te_req *q = &p->q[i];
        if (q->op != op || status[i] != TE_OK) continue;
        for (uint64_t at = 0; at < q->len; at += COPY_PIECE)
            b.it[k++] = (copy_item){ .local = (char *)q->local + at, .off = q->remote_off + at,
                                     .len = q->len - at < COPY_PIECE ? q->len - at : COPY_PIECE, .req = i };
    }
    /* FD-mode writes stay on this thread: shmem serialises writers of one
     * file on its inode lock, so a second writer would only spin. Reads,
     * and copies through the mapping, take no lock. */
    workpool_run(op == TE_READ || p->map ? p->x->pool : NULL, n, copy_piece, &b);
    for (int i = 0; crc && i < k; i++) {
        const copy_item *c = &b.it[i];
        int first = c->local == (char *)p->q[c->req].local;   /* pieces come in request order */
        crc[c->req] = first ? c->crc : crc32c_combine(crc[c->req], c->crc, c->len);
    }
    free(b.it);
}

/* Map mode: no exchange with the node at all. Each request was checked
 * against its capability at submit; the node's socket is only polled so
 * that a node that went away fails its paths rather than leaving us
 * writing into a segment nobody serves. */
static void path_run_mapped(te_path *p) {
    int n = p->nq;
    if (node_gone(p)) {
        path_fail(p, TE_EIO);
        return;
    }
    int *st = xcalloc((size_t)n, sizeof *st);
    uint32_t *crc = xcalloc((size_t)n, sizeof *crc);
    copy_queued(p, TE_READ, st, crc);
    copy_queued(p, TE_WRITE, st, crc);
    for (int i = 0; i < n; i++) te_cq_push_crc(&p->x->b.cq, p, p->q[i].cookie, TE_OK, crc[i]);
    p->nq = 0;
    free(st);
    free(crc);
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

static void path_run(te_path *p) {
    int n = p->nq;
    uint64_t dl = te_deadline(p->x->b.t.cfg.timeout_ms);
    if (node_gone(p)) {
        path_fail(p, TE_EIO);
        return;
    }
    if (send_headers(p, dl) != 0) {
        path_fail(p, errno == ETIMEDOUT ? TE_ETIMEDOUT : TE_EIO);
        return;
    }
    int *read_st = xcalloc((size_t)n, sizeof *read_st), *verdict = xcalloc((size_t)n, sizeof *verdict);
    copy_queued(p, TE_READ, read_st, NULL);        /* TE_OK == 0: all of them */
    int rc = recv_verdicts(p, verdict, dl);
    if (rc != TE_OK) {
        path_fail(p, rc);   /* no write was copied: every queued one fails */
    } else {
        copy_queued(p, TE_WRITE, verdict, NULL);   /* the accepted ones */
        for (int i = 0; i < n; i++) {
            int st = verdict[i] == TE_OK && p->q[i].op == TE_READ ? read_st[i] : verdict[i];
            cq_push(p->x, p, p->q[i].cookie, st);
        }
        p->nq = 0;
    }
    free(read_st);
    free(verdict);
}

static int shm_poll(te_transport *t, te_cqe *out, int max, int timeout_ms) {
    shm_xport *x = SX(t);
    for (te_link *l = x->b.paths; l; l = l->next) {
        te_path *p = (te_path *)l;
        if (!p->broken && p->nq) {
            if (p->map) path_run_mapped(p);
            else path_run(p);
        }
    }
    if (te_cq_empty(&x->b.cq) && timeout_ms > 0) {
        /* Nothing queued anywhere: the caller is waiting on nothing. */
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    return te_cq_pop(&x->b.cq, out, max);
}

#define POPULATE_CHUNK (64ULL << 20)
#define PAGE_BYTES 4096
#define PROBE_PAGES 256               /* pages timed to tell whether touching pays */
#define TRAP_US_PER_PAGE 1.0          /* above this a first touch is a trap */

typedef struct populate_job {
    char *base;
    uint64_t size;
    int touch;                /* also read a byte of every page from here */
    int failed;
} populate_job;

/* A load from every page of [p, p + len). */
static void touch_pages(const char *p, uint64_t len) {
    for (uint64_t off = 0; off < len; off += PAGE_BYTES) (void)*(const volatile char *)(p + off);
}

/* MADV_POPULATE_WRITE maps the pages writable too: MAP_POPULATE on a
 * shared mapping faults them in for reading only, so each first write
 * would still trap. */
static void populate_chunk(void *arg, int i) {
    populate_job *j = arg;
    uint64_t off = (uint64_t)i * POPULATE_CHUNK;
    size_t len = (size_t)(j->size - off < POPULATE_CHUNK ? j->size - off : POPULATE_CHUNK);
    int ok = 0;
#ifdef MADV_POPULATE_WRITE
    ok = madvise(j->base + off, len, MADV_POPULATE_WRITE) == 0;
#endif
#ifdef MADV_POPULATE_READ
    /* an older kernel: at least the read faults; writing a byte per page
     * ourselves could undo a concurrent write of another client */
    if (!ok) (void)madvise(j->base + off, len, MADV_POPULATE_READ);
#endif
    if (!ok) __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    if (j->touch) touch_pages(j->base + off, len);
}

/* Under a hypervisor that shadows the guest's page tables (this VM), the
 * first access by a process to each page of a mapping traps, about 6 us
 * a page, however well the kernel filled the page tables: a 4 MiB copy
 * into a fresh part of the segment ran at 0.6 GB/s instead of 17. A load
 * from every page at connect pays those traps once. Elsewhere a first
 * touch costs a TLB miss and touching a large segment would only waste
 * time, so a few pages are timed first: touch all only if they trapped. */
static int first_touch_traps(char *base, uint64_t size) {
    uint64_t len = size < PROBE_PAGES * PAGE_BYTES ? size : PROBE_PAGES * PAGE_BYTES;
#ifdef MADV_POPULATE_WRITE
    (void)madvise(base, (size_t)len, MADV_POPULATE_WRITE);
#endif
    uint64_t t0 = mono_us();
    touch_pages(base, len);
    return (double)(mono_us() - t0) > TRAP_US_PER_PAGE * (double)(len / PAGE_BYTES);
}

/* The whole segment, read-write, with its page tables filled now (and
 * touched where first touches trap, above): once per client and segment
 * instead of a trap at the first touch of every page, spread over the
 * pool's threads. Huge pages where the segment has them: a hugetlb memfd
 * maps huge anyway, and MADV_HUGEPAGE asks for them on shmem where the
 * system allows it (the node asks too). */
static char *map_segment(int seg_fd, uint64_t size, workpool *pool, char *why, size_t whylen) {
    if (size == 0 || size > SIZE_MAX) {
        snprintf(why, whylen, "segment of %llu bytes cannot be mapped", (unsigned long long)size);
        return NULL;
    }
    void *m = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, seg_fd, 0);
    if (m == MAP_FAILED) {
        snprintf(why, whylen, "mmap of the segment: %s", strerror(errno));
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(m, (size_t)size, MADV_HUGEPAGE);
#endif
    uint64_t t0 = mono_us();
    populate_job j = { .base = m, .size = size, .touch = first_touch_traps(m, size) };
    workpool_run(pool, (int)((size + POPULATE_CHUNK - 1) / POPULATE_CHUNK), populate_chunk, &j);
    if (j.failed) log_info("shm: segment mapped without populated page tables (old kernel?)");
    log_info("shm: %llu MB segment mapped in %llu ms%s", (unsigned long long)(size >> 20),
             (unsigned long long)((mono_us() - t0) / 1000), j.touch ? ", every page touched (first touches trap)" : "");
    return m;
}

static int shm_connect(te_transport *t, const char *local, const char *peer, te_path **out,
                       char *err, size_t errlen) {
    shm_xport *x = SX(t);
    char why[ANET_ERR_LEN];
    int seg_fd = -1;
    uint32_t node_id;
    uint64_t size;
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
    if (te_shm_recv_segment(fd, &seg_fd, &node_id, &size, t->cfg.connect_timeout_ms) < 0) {
        snprintf(err, errlen, "shm: %s: no segment received: %s", peer, strerror(errno));
        close(fd);
        return -1;
    }
    struct stat sb;
    if (fstat(seg_fd, &sb) != 0 || sb.st_size < 0 || (uint64_t)sb.st_size < size) {
        snprintf(err, errlen, "shm: %s: the segment fd is smaller than the %llu bytes announced", peer,
                 (unsigned long long)size);
        close(seg_fd);
        close(fd);
        return -1;
    }
    char *map = NULL;
    if (t->cfg.shm_mode == TE_SHM_MAP) {
        if (!x->pool) x->pool = copy_pool_start(&t->cfg);
        if (!(map = map_segment(seg_fd, size, x->pool, why, sizeof why))) {
            snprintf(err, errlen, "shm: %s: %s", peer, why);
            close(seg_fd);
            close(fd);
            return -1;
        }
        close(seg_fd);     /* the mapping keeps the segment */
        seg_fd = -1;
    }
    te_path *p = xcalloc(1, sizeof *p);
    *p = (te_path){ .x = x, .fd = fd, .seg_fd = seg_fd, .map = map, .size = size, .node_id = node_id,
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

static const te_transport_ops shm_ops = {
    .name = "shm", .scheme = "unix", .same_host = 1, .path_node_id = shm_path_node_id,
    .connect = shm_connect, .reg_mem = te_xport_reg_mem, .dereg_mem = te_xport_dereg_mem,
    .submit = shm_submit, .poll = shm_poll, .close = shm_close, .destroy = shm_destroy,
};

te_transport *te_shm_create(const te_config *cfg, char *err, size_t errlen) {
    shm_xport *x = xcalloc(1, sizeof *x);
    te_xport_base_init(&x->b, &shm_ops, cfg);
    return &x->b.t;
}
