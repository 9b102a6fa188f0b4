/* tests/support/verbs_fake.c - see verbs_fake.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tests/support/verbs_fake.h"

#define WR_LOG 4096
#define CH_PENDING 64

typedef struct fdev {
    struct ibv_device dev;
    int index, nports;
    enum ibv_port_state state[FAKE_MAX_PORTS + 1];
} fdev;

typedef struct fctx { struct ibv_context ctx; fdev *d; } fctx;
typedef struct fpd { struct ibv_pd pd; } fpd;

typedef struct fmr {
    struct ibv_mr mr;
    int access;
    struct fmr *next;
} fmr;

typedef struct fch {
    struct ibv_comp_channel ch;
    struct ibv_cq *pending[CH_PENDING];   /* CQs whose events are unread */
    int npending;
} fch;

typedef struct fcqe {
    struct ibv_wc wc;
    int retire;               /* send-queue slots this completion frees */
} fcqe;

typedef struct fcq {
    struct ibv_cq cq;
    fcqe *ring;
    int depth, head, count;
    int armed, overflow;
    unsigned unacked;
} fcq;

typedef struct fwr {          /* a posted WR waiting for progress */
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    int signalled;
    struct ibv_sge sge;
    uint64_t remote_addr;
    uint32_t rkey;
} fwr;

typedef struct fqp {
    struct ibv_qp qp;
    struct fqp *next;
    int port, access, max_send_wr;
    int outstanding;          /* SQ slots held (posted, not yet retired) */
    int unsig;                /* unsignalled WRs since the last signalled */
    uint32_t dest_qpn, rq_psn, sq_psn;
    struct ibv_ah_attr ah;
    enum ibv_mtu mtu;
    fwr *queue;               /* deferred WRs */
    int nqueue;
} fqp;

static struct world {
    pthread_mutex_t lock;
    fdev devs[FAKE_MAX_DEVS];
    int ndev, roce, deferred;
    fmr *mrs;
    fqp *qps;
    uint32_t next_key, next_qpn;
    long fail_countdown;
    enum ibv_wc_status fail_status;
    fake_verbs_stats st;
    fake_wr log[WR_LOG];
    int nlog;
} W = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define LOCK() pthread_mutex_lock(&W.lock)
#define UNLOCK() pthread_mutex_unlock(&W.lock)

/* ---- world control ---- */

void fake_verbs_reset(int ndev, int nports) {
    LOCK();
    memset(W.devs, 0, sizeof W.devs);
    W.ndev = ndev < FAKE_MAX_DEVS ? ndev : FAKE_MAX_DEVS;
    W.roce = W.deferred = 0;
    W.mrs = NULL;
    W.qps = NULL;
    W.next_key = 0x100;
    W.next_qpn = 0x40;
    W.fail_countdown = 0;
    memset(&W.st, 0, sizeof W.st);
    W.nlog = 0;
    for (int i = 0; i < W.ndev; i++) {
        fdev *d = &W.devs[i];
        d->index = i;
        d->nports = nports < FAKE_MAX_PORTS ? nports : FAKE_MAX_PORTS;
        snprintf(d->dev.name, sizeof d->dev.name, "fake%d", i);
        d->dev.node_type = IBV_NODE_CA;
        d->dev.transport_type = IBV_TRANSPORT_IB;
        for (int p = 1; p <= d->nports; p++) d->state[p] = IBV_PORT_ACTIVE;
    }
    UNLOCK();
}

void fake_verbs_set_port_state(int dev, int port, enum ibv_port_state st) {
    LOCK();
    if (dev >= 0 && dev < W.ndev && port >= 1 && port <= FAKE_MAX_PORTS) W.devs[dev].state[port] = st;
    UNLOCK();
}

void fake_verbs_set_roce(int on) { LOCK(); W.roce = on; UNLOCK(); }
void fake_verbs_set_deferred(int on) { LOCK(); W.deferred = on; UNLOCK(); }

void fake_verbs_fail_nth_wr(int n, enum ibv_wc_status status) {
    LOCK();
    W.fail_countdown = n;
    W.fail_status = status;
    UNLOCK();
}

void fake_verbs_get_stats(fake_verbs_stats *out) { LOCK(); *out = W.st; UNLOCK(); }

int fake_verbs_wr_count(void) { LOCK(); int n = W.nlog; UNLOCK(); return n; }

int fake_verbs_wr_at(int i, fake_wr *out) {
    LOCK();
    int ok = i >= 0 && i < W.nlog && i >= W.nlog - WR_LOG;
    if (ok) *out = W.log[i % WR_LOG];
    UNLOCK();
    return ok ? 0 : -1;
}

static fqp *qp_by_num(uint32_t qpn) {
    for (fqp *q = W.qps; q; q = q->next)
        if (q->qp.qp_num == qpn) return q;
    return NULL;
}

int fake_verbs_qp_state(uint32_t qpn) {
    LOCK();
    fqp *q = qp_by_num(qpn);
    int s = q ? (int)q->qp.state : -1;
    UNLOCK();
    return s;
}

int fake_verbs_qp_access(uint32_t qpn) {
    LOCK();
    fqp *q = qp_by_num(qpn);
    int a = q ? q->access : -1;
    UNLOCK();
    return a;
}

/* ---- port addressing ---- */

static uint16_t port_lid(int dev, int port) { return W.roce ? 0 : (uint16_t)(0x10 + dev * 8 + port); }

static void port_gid(int dev, int port, int index, union ibv_gid *g) {
    memset(g, 0, sizeof *g);
    if (index == 0) {
        g->raw[0] = 0xfe; g->raw[1] = 0x80;
        g->raw[14] = (uint8_t)dev; g->raw[15] = (uint8_t)port;
    } else if (index == 1 && W.roce) {
        g->raw[10] = 0xff; g->raw[11] = 0xff;
        g->raw[12] = 10; g->raw[14] = (uint8_t)dev; g->raw[15] = (uint8_t)port;
    }
}

static fdev *ctx_dev(struct ibv_context *ctx) { return ((fctx *)ctx)->d; }

/* ---- devices ---- */

static struct ibv_device **f_get_device_list(int *num) {
    LOCK();
    struct ibv_device **list = calloc((size_t)W.ndev + 1, sizeof *list);
    for (int i = 0; i < W.ndev; i++) list[i] = &W.devs[i].dev;
    *num = W.ndev;
    UNLOCK();
    return list;
}

static void f_free_device_list(struct ibv_device **list) { free(list); }
static const char *f_get_device_name(struct ibv_device *d) { return d->name; }

static struct ibv_context *f_open_device(struct ibv_device *dev) {
    fctx *c = calloc(1, sizeof *c);
    LOCK();
    c->d = (fdev *)dev;
    c->ctx.device = dev;
    c->ctx.num_comp_vectors = 1;
    W.st.live_objects++;
    UNLOCK();
    return &c->ctx;
}

static int f_close_device(struct ibv_context *ctx) {
    LOCK();
    W.st.live_objects--;
    UNLOCK();
    free(ctx);
    return 0;
}

static int f_query_device(struct ibv_context *ctx, struct ibv_device_attr *a) {
    memset(a, 0, sizeof *a);
    LOCK();
    a->phys_port_cnt = (uint8_t)ctx_dev(ctx)->nports;
    UNLOCK();
    a->max_qp = 4096;
    a->max_qp_wr = 16384;
    a->max_sge = 4;
    a->max_cq = 4096;
    a->max_cqe = 65536;
    a->max_mr = 1 << 20;
    a->max_pd = 1024;
    a->max_qp_rd_atom = 16;
    a->max_qp_init_rd_atom = 16;
    return 0;
}

static int f_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a) {
    memset(a, 0, sizeof *a);
    LOCK();
    fdev *d = ctx_dev(ctx);
    int ok = port >= 1 && port <= d->nports;
    if (ok) {
        a->state = d->state[port];
        a->max_mtu = a->active_mtu = IBV_MTU_4096;
        a->lid = port_lid(d->index, port);
        a->link_layer = W.roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
        a->max_msg_sz = 1u << 30;
        a->gid_tbl_len = 4;
    }
    UNLOCK();
    return ok ? 0 : EINVAL;
}

static int f_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *g) {
    if (index < 0 || index >= 4) return -1;
    LOCK();
    port_gid(ctx_dev(ctx)->index, port, index, g);
    UNLOCK();
    return 0;
}

/* ---- PD, MR, channel, CQ ---- */

static struct ibv_pd *f_alloc_pd(struct ibv_context *ctx) {
    fpd *p = calloc(1, sizeof *p);
    p->pd.context = ctx;
    LOCK(); W.st.live_objects++; UNLOCK();
    return &p->pd;
}

static int f_dealloc_pd(struct ibv_pd *pd) {
    LOCK(); W.st.live_objects--; UNLOCK();
    free(pd);
    return 0;
}

static struct ibv_mr *f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
    /* As the kernel does: remote write (and atomics) need local write. */
    if (!addr || len == 0 || ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
        errno = EINVAL;
        return NULL;
    }
    fmr *m = calloc(1, sizeof *m);
    LOCK();
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = len;
    m->mr.lkey = W.next_key++;
    m->mr.rkey = W.next_key++ | 0x80000000u;
    m->access = access;
    m->next = W.mrs;
    W.mrs = m;
    W.st.live_objects++;
    UNLOCK();
    return &m->mr;
}

static int f_dereg_mr(struct ibv_mr *mr) {
    LOCK();
    for (fmr **pp = &W.mrs; *pp; pp = &(*pp)->next)
        if (&(*pp)->mr == mr) { *pp = (*pp)->next; break; }
    W.st.live_objects--;
    UNLOCK();
    free(mr);
    return 0;
}

static struct ibv_comp_channel *f_create_comp_channel(struct ibv_context *ctx) {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (fd < 0) return NULL;
    fch *c = calloc(1, sizeof *c);
    c->ch.context = ctx;
    c->ch.fd = fd;
    LOCK(); W.st.live_objects++; UNLOCK();
    return &c->ch;
}

static int f_destroy_comp_channel(struct ibv_comp_channel *ch) {
    close(ch->fd);
    LOCK(); W.st.live_objects--; UNLOCK();
    free(ch);
    return 0;
}

static struct ibv_cq *f_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                  struct ibv_comp_channel *ch, int comp_vector) {
    if (cqe < 1 || cqe > 65536) { errno = EINVAL; return NULL; }
    fcq *q = calloc(1, sizeof *q);
    q->cq.context = ctx;
    q->cq.channel = ch;
    q->cq.cq_context = cq_context;
    q->cq.cqe = cqe;
    q->depth = cqe;
    q->ring = calloc((size_t)cqe, sizeof *q->ring);
    LOCK(); W.st.live_objects++; UNLOCK();
    return &q->cq;
}

static int f_destroy_cq(struct ibv_cq *cq) {
    fcq *q = (fcq *)cq;
    LOCK();
    int busy = q->unacked != 0;
    for (fqp *p = W.qps; p; p = p->next)
        if (p->qp.send_cq == cq) busy = 1;
    if (!busy) W.st.live_objects--;
    UNLOCK();
    if (busy) return EBUSY;
    free(q->ring);
    free(q);
    return 0;
}

static int f_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
    LOCK();
    ((fcq *)cq)->armed = 1;
    UNLOCK();
    return 0;
}

/* Called with the lock held. */
static void cq_push(fcq *q, const struct ibv_wc *wc, int retire) {
    if (q->overflow || q->count == q->depth) {
        q->overflow = 1;
        W.st.cq_overflows++;
        return;
    }
    q->ring[(q->head + q->count++) % q->depth] = (fcqe){.wc = *wc, .retire = retire};
    if (wc->status != IBV_WC_SUCCESS) W.st.wc_errors++;
    fch *ch = (fch *)q->cq.channel;
    if (q->armed && ch && ch->npending < CH_PENDING) {
        q->armed = 0;
        ch->pending[ch->npending++] = &q->cq;
        uint64_t one = 1;
        ssize_t w = write(ch->ch.fd, &one, sizeof one);
        (void)w;
        W.st.notify_events++;
    }
}

static int f_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc) {
    fcq *q = (fcq *)cq;
    int n = 0;
    LOCK();
    if (q->overflow) { UNLOCK(); return -1; }
    while (n < num && q->count > 0) {
        fcqe *e = &q->ring[q->head];
        q->head = (q->head + 1) % q->depth;
        q->count--;
        fqp *p = qp_by_num(e->wc.qp_num);
        if (p) p->outstanding -= e->retire;
        wc[n++] = e->wc;
    }
    UNLOCK();
    return n;
}

static int f_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx) {
    uint64_t v;
    if (read(ch->fd, &v, sizeof v) != (ssize_t)sizeof v) return -1;
    fch *c = (fch *)ch;
    LOCK();
    int ok = c->npending > 0;
    if (ok) {
        *cq = c->pending[0];
        memmove(c->pending, c->pending + 1, (size_t)--c->npending * sizeof *c->pending);
        *ctx = (*cq)->cq_context;
        ((fcq *)*cq)->unacked++;
    }
    UNLOCK();
    return ok ? 0 : -1;
}

static void f_ack_cq_events(struct ibv_cq *cq, unsigned n) {
    LOCK();
    ((fcq *)cq)->unacked -= n;
    UNLOCK();
}

/* ---- QPs ---- */

static struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia) {
    if (ia->qp_type != IBV_QPT_RC || !ia->send_cq || ia->cap.max_send_wr < 1 ||
        ia->cap.max_send_wr > 16384 || ia->cap.max_send_sge > 4) {
        errno = EINVAL;
        return NULL;
    }
    fqp *q = calloc(1, sizeof *q);
    LOCK();
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = ia->send_cq;
    q->qp.recv_cq = ia->recv_cq;
    q->qp.qp_type = IBV_QPT_RC;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_num = W.next_qpn++;
    q->max_send_wr = (int)ia->cap.max_send_wr;
    q->queue = calloc((size_t)q->max_send_wr, sizeof *q->queue);
    q->next = W.qps;
    W.qps = q;
    W.st.qps_created++;
    W.st.qps_live++;
    W.st.live_objects++;
    UNLOCK();
    return &q->qp;
}

static void complete(fqp *q, const fwr *w, enum ibv_wc_status st) {
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    wc.wr_id = w->wr_id;
    wc.status = st;
    wc.opcode = w->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
    wc.byte_len = st == IBV_WC_SUCCESS ? w->sge.length : 0;
    wc.qp_num = q->qp.qp_num;
    cq_push((fcq *)q->qp.send_cq, &wc, q->unsig + 1);
    q->unsig = 0;
}

/* Error state: every queued WR is flushed with a completion. */
static void to_error(fqp *q) {
    q->qp.state = IBV_QPS_ERR;
    for (int i = 0; i < q->nqueue; i++) complete(q, &q->queue[i], IBV_WC_WR_FLUSH_ERR);
    q->nqueue = 0;
}

int fake_verbs_break_qp(uint32_t qpn) {
    LOCK();
    fqp *q = qp_by_num(qpn);
    if (q) to_error(q);
    UNLOCK();
    return q ? 0 : -1;
}

static int transition_ok(enum ibv_qp_state from, enum ibv_qp_state to, int mask) {
    if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return 1;
    const int init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    const int rtr = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    const int rts = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                    IBV_QP_MAX_QP_RD_ATOMIC;
    switch (to) {
    case IBV_QPS_INIT: return (from == IBV_QPS_RESET && (mask & init) == init) || from == IBV_QPS_INIT;
    case IBV_QPS_RTR: return from == IBV_QPS_INIT && (mask & rtr) == rtr;
    case IBV_QPS_RTS: return (from == IBV_QPS_RTR && (mask & rts) == rts) || from == IBV_QPS_RTS;
    default: return 0;
    }
}

static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
    fqp *q = (fqp *)qp;
    LOCK();
    enum ibv_qp_state to = mask & IBV_QP_STATE ? a->qp_state : qp->state;
    fdev *d = ctx_dev(qp->context);
    int ok = transition_ok(qp->state, to, mask);
    if (ok && (mask & IBV_QP_PORT)) ok = a->port_num >= 1 && a->port_num <= d->nports;
    if (ok && (mask & IBV_QP_PATH_MTU)) ok = a->path_mtu >= IBV_MTU_256 && a->path_mtu <= IBV_MTU_4096;
    /* An address must name something: a LID, or a GID when global. */
    if (ok && (mask & IBV_QP_AV))
        ok = a->ah_attr.is_global ? a->ah_attr.grh.dgid.global.interface_id != 0 ||
                                    a->ah_attr.grh.dgid.global.subnet_prefix != 0
                                  : a->ah_attr.dlid != 0;
    if (ok) {
        if (mask & IBV_QP_PORT) q->port = a->port_num;
        if (mask & IBV_QP_ACCESS_FLAGS) q->access = (int)a->qp_access_flags;
        if (mask & IBV_QP_AV) q->ah = a->ah_attr;
        if (mask & IBV_QP_PATH_MTU) q->mtu = a->path_mtu;
        if (mask & IBV_QP_DEST_QPN) q->dest_qpn = a->dest_qp_num;
        if (mask & IBV_QP_RQ_PSN) q->rq_psn = a->rq_psn;
        if (mask & IBV_QP_SQ_PSN) q->sq_psn = a->sq_psn;
        if (to == IBV_QPS_ERR) to_error(q);
        else if (to == IBV_QPS_RESET) { q->nqueue = 0; q->outstanding = 0; q->unsig = 0; }
        qp->state = to;
    }
    UNLOCK();
    return ok ? 0 : EINVAL;
}

static int f_destroy_qp(struct ibv_qp *qp) {
    fqp *q = (fqp *)qp;
    LOCK();
    for (fqp **pp = &W.qps; *pp; pp = &(*pp)->next)
        if (*pp == q) { *pp = q->next; break; }
    W.st.qps_live--;
    W.st.live_objects--;
    UNLOCK();
    free(q->queue);
    free(q);
    return 0;
}

/* ---- the data path ---- */

static fmr *mr_by_key(uint32_t key, int remote) {
    for (fmr *m = W.mrs; m; m = m->next)
        if ((remote ? m->mr.rkey : m->mr.lkey) == key) return m;
    return NULL;
}

static int inside(const fmr *m, uint64_t addr, uint64_t len) {
    uint64_t base = (uint64_t)(uintptr_t)m->mr.addr;
    return addr >= base && addr - base <= m->mr.length && len <= m->mr.length - (addr - base);
}

/* Does q's address vector reach peer's port? */
static int reaches(const fqp *q, const fqp *peer) {
    int pdev = ctx_dev(peer->qp.context)->index;
    if (q->ah.is_global) {
        union ibv_gid g;
        for (int i = 0; i < 4; i++) {
            port_gid(pdev, peer->port, i, &g);
            if (memcmp(&g, &q->ah.grh.dgid, sizeof g) == 0) return 1;
        }
        return 0;
    }
    return q->ah.dlid == port_lid(pdev, peer->port);
}

/* The connected responder of q, or NULL when the pair is not set up
 * consistently (which a real fabric shows as retries exhausted). */
static fqp *peer_of(const fqp *q) {
    fqp *p = qp_by_num(q->dest_qpn);
    if (!p || p->dest_qpn != q->qp.qp_num || !reaches(q, p)) return NULL;
    if (p->qp.state != IBV_QPS_RTR && p->qp.state != IBV_QPS_RTS) return NULL;
    if (q->sq_psn != p->rq_psn) return NULL;
    return p;
}

/* Run one WR as the NIC would. Lock held. */
static void execute(fqp *q, const fwr *w) {
    enum ibv_wc_status st = IBV_WC_SUCCESS;
    int is_read = w->opcode == IBV_WR_RDMA_READ;
    if (q->qp.state == IBV_QPS_ERR) st = IBV_WC_WR_FLUSH_ERR;
    else if (W.fail_countdown > 0 && --W.fail_countdown == 0) st = W.fail_status;
    fmr *l = NULL, *r = NULL;
    fqp *p = NULL;
    if (st == IBV_WC_SUCCESS) {
        l = mr_by_key(w->sge.lkey, 0);
        if (!l || l->mr.pd != q->qp.pd || !inside(l, w->sge.addr, w->sge.length) ||
            (is_read && !(l->access & IBV_ACCESS_LOCAL_WRITE)))
            st = IBV_WC_LOC_PROT_ERR;
    }
    if (st == IBV_WC_SUCCESS && !(p = peer_of(q))) st = IBV_WC_RETRY_EXC_ERR;
    if (st == IBV_WC_SUCCESS) {
        int need = is_read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
        r = mr_by_key(w->rkey, 1);
        if (!r || r->mr.pd != p->qp.pd || !inside(r, w->remote_addr, w->sge.length) ||
            !(r->access & need) || !(p->access & need)) {
            st = IBV_WC_REM_ACCESS_ERR;
            to_error(p);      /* the responder's QP breaks too */
        }
    }
    if (st == IBV_WC_SUCCESS) {
        void *la = (void *)(uintptr_t)w->sge.addr, *ra = (void *)(uintptr_t)w->remote_addr;
        if (is_read) memcpy(la, ra, w->sge.length);
        else memcpy(ra, la, w->sge.length);
    }
    if (st != IBV_WC_SUCCESS || w->signalled) complete(q, w, st);
    else q->unsig++;
    if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR) to_error(q);
}

static void log_wr(const fqp *q, const fwr *w) {
    W.log[W.nlog++ % WR_LOG] = (fake_wr){
        .qpn = q->qp.qp_num, .opcode = w->opcode, .local_addr = w->sge.addr,
        .length = w->sge.length, .lkey = w->sge.lkey, .remote_addr = w->remote_addr,
        .rkey = w->rkey, .signalled = w->signalled, .wr_id = w->wr_id};
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    fqp *q = (fqp *)qp;
    int rc = 0;
    LOCK();
    W.st.post_calls++;
    for (; wr; wr = wr->next) {
        if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) { rc = EINVAL; break; }
        if ((wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_READ) ||
            wr->num_sge != 1) { rc = EINVAL; break; }
        if (q->outstanding >= q->max_send_wr) { rc = ENOMEM; break; }
        fwr w = {.wr_id = wr->wr_id, .opcode = wr->opcode, .sge = wr->sg_list[0],
                 .signalled = !!(wr->send_flags & IBV_SEND_SIGNALED),
                 .remote_addr = wr->wr.rdma.remote_addr, .rkey = wr->wr.rdma.rkey};
        q->outstanding++;
        W.st.wrs_posted++;
        W.st.wrs_signalled += (uint64_t)w.signalled;
        log_wr(q, &w);
        if (W.deferred && qp->state == IBV_QPS_RTS) q->queue[q->nqueue++] = w;
        else execute(q, &w);
    }
    UNLOCK();
    if (rc) *bad = wr;
    return rc;
}

int fake_verbs_progress(void) {
    int n = 0;
    LOCK();
    for (fqp *q = W.qps; q; q = q->next)
        while (q->nqueue > 0) {     /* execute() flushes the rest on error */
            fwr w = q->queue[0];
            memmove(q->queue, q->queue + 1, (size_t)--q->nqueue * sizeof *q->queue);
            execute(q, &w);
            n++;
        }
    UNLOCK();
    return n;
}

const verbs_ops verbs_fake_ops = {
    .name = "fake",
    .get_device_list = f_get_device_list,
    .free_device_list = f_free_device_list,
    .get_device_name = f_get_device_name,
    .open_device = f_open_device,
    .close_device = f_close_device,
    .query_device = f_query_device,
    .query_port = f_query_port,
    .query_gid = f_query_gid,
    .alloc_pd = f_alloc_pd,
    .dealloc_pd = f_dealloc_pd,
    .reg_mr = f_reg_mr,
    .dereg_mr = f_dereg_mr,
    .create_comp_channel = f_create_comp_channel,
    .destroy_comp_channel = f_destroy_comp_channel,
    .create_cq = f_create_cq,
    .destroy_cq = f_destroy_cq,
    .req_notify_cq = f_req_notify_cq,
    .get_cq_event = f_get_cq_event,
    .ack_cq_events = f_ack_cq_events,
    .poll_cq = f_poll_cq,
    .create_qp = f_create_qp,
    .modify_qp = f_modify_qp,
    .destroy_qp = f_destroy_qp,
    .post_send = f_post_send,
};
