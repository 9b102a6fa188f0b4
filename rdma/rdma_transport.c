/* rdma/rdma_transport.c - te_transport_ops over RC QPs: registration,
 * WR batching with selective signalling, completion harvesting.
 *
 * A request becomes one WR: RDMA WRITE (put) or READ (get) of one SGE
 * from registered client memory to segment base + remote_off. WRs are
 * chained per QP and posted once per batch; only every signal_every-th
 * WR and the last of each batch ask for a completion, and since an RC
 * send queue completes in order, a signalled completion also finishes
 * every unsignalled WR posted before it on that QP. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "core/log.h"
#include "core/util.h"
#include "rdma/rdma_priv.h"

#define POLL_BATCH 32
#define EXPIRE_STEP_US 100000

typedef struct rdma_mreg {
    te_mr pub;                            /* first: te_mr* is an rdma_mreg* */
    struct ibv_mr *mr[RDMA_MAX_DEVS];     /* one per port (each has a PD) */
} rdma_mreg;

static rdma_t *T(te_transport *t) { return (rdma_t *)t; }

void rdma_options_default(rdma_options *o) {
    memset(o, 0, sizeof *o);
    o->qps_per_path = 2;
    o->signal_every = 16;
    o->max_batch = 32;
    o->cq_depth = 8192;
    o->spin_us = 50;
    o->gid_index = -1;
}

/* ---- finished requests, handed out by poll ---- */

void rdma_complete(rdma_t *t, struct te_path *p, uint64_t cookie, int status) {
    if (t->rtail - t->rhead == t->rcap) {
        uint64_t ncap = t->rcap ? t->rcap * 2 : 256;
        te_cqe *n = xmalloc(ncap * sizeof *n);
        for (uint64_t i = t->rhead; i < t->rtail; i++) n[i - t->rhead] = t->ready[i & (t->rcap - 1)];
        free(t->ready);
        t->ready = n;
        t->rtail -= t->rhead;
        t->rhead = 0;
        t->rcap = ncap;
    }
    t->ready[t->rtail++ & (t->rcap - 1)] = (te_cqe){.cookie = cookie, .status = status, .path = p};
}

static int take_ready(rdma_t *t, te_cqe *out, int max) {
    int n = 0;
    while (n < max && t->rhead < t->rtail) out[n++] = t->ready[t->rhead++ & (t->rcap - 1)];
    return n;
}

/* ---- memory registration ---- */

static int rdma_reg_mem(te_transport *tt, void *addr, size_t len, te_mr **out,
                        char *err, size_t errlen) {
    rdma_t *t = T(tt);
    if (!addr || len == 0) {
        snprintf(err, errlen, "rdma: cannot register an empty region");
        return -1;
    }
    rdma_mreg *m = xcalloc(1, sizeof *m);
    for (int i = 0; i < t->ndevs; i++) {
        m->mr[i] = t->ops->reg_mr(t->devs[i].pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
        if (!m->mr[i]) {
            snprintf(err, errlen, "rdma %s: register %zu bytes failed (%s)", t->devs[i].name,
                     len, strerror(errno ? errno : EIO));
            while (i-- > 0) t->ops->dereg_mr(m->mr[i]);
            free(m);
            return -1;
        }
    }
    m->pub = (te_mr){.addr = addr, .len = len, .lkey = m->mr[0]->lkey, .priv = m};
    if (t->nmrs == t->mrcap) {
        t->mrcap = t->mrcap ? t->mrcap * 2 : 8;
        t->mrs = xrealloc(t->mrs, (size_t)t->mrcap * sizeof *t->mrs);
    }
    int at = t->nmrs;
    while (at > 0 && (uintptr_t)t->mrs[at - 1]->pub.addr > (uintptr_t)addr) at--;
    memmove(t->mrs + at + 1, t->mrs + at, (size_t)(t->nmrs - at) * sizeof *t->mrs);
    t->mrs[at] = m;
    t->nmrs++;
    *out = &m->pub;
    return 0;
}

static void rdma_dereg_mem(te_transport *tt, te_mr *pub) {
    rdma_t *t = T(tt);
    rdma_mreg *m = (rdma_mreg *)pub;
    for (int i = 0; i < t->nmrs; i++) {
        if (t->mrs[i] != m) continue;
        memmove(t->mrs + i, t->mrs + i + 1, (size_t)(t->nmrs - i - 1) * sizeof *t->mrs);
        t->nmrs--;
        break;
    }
    for (int i = 0; i < t->ndevs; i++) t->ops->dereg_mr(m->mr[i]);
    free(m);
}

/* The registration holding [p, p+len), or NULL. Regions are sorted by
 * start; search down from the last one starting at or below p. */
static rdma_mreg *find_mr(rdma_t *t, const void *p, uint64_t len) {
    uintptr_t a = (uintptr_t)p;
    int lo = 0, hi = t->nmrs;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((uintptr_t)t->mrs[mid]->pub.addr <= a) lo = mid + 1; else hi = mid;
    }
    for (int i = lo - 1; i >= 0; i--) {
        const te_mr *m = &t->mrs[i]->pub;
        uintptr_t off = a - (uintptr_t)m->addr;
        if (off <= m->len && len <= m->len - off) return t->mrs[i];
    }
    return NULL;
}

/* ---- paths ---- */

/* "rdma:mlx5_0/1", "mlx5_0/1" or "mlx5_0": the port index, or -1. */
static int find_local_dev(rdma_t *t, const char *local) {
    if (strncmp(local, "rdma:", 5) == 0) local += 5;
    const char *slash = strchr(local, '/');
    size_t namelen = slash ? (size_t)(slash - local) : strlen(local);
    int port = slash ? atoi(slash + 1) : 0;
    for (int i = 0; i < t->ndevs; i++)
        if (strlen(t->devs[i].name) == namelen && memcmp(t->devs[i].name, local, namelen) == 0 &&
            (port == 0 || port == t->devs[i].port))
            return i;
    return -1;
}

static int pow2_at_least(int n) {
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}

static void path_free(struct te_path *p) {
    for (int i = 0; i < p->nconns; i++) {
        free(p->conns[i].ring);
        free(p->conns[i].wrs);
        free(p->conns[i].sges);
    }
    free(p);
}

static int rdma_connect(te_transport *tt, const char *local, const char *peer, te_path **out,
                        char *err, size_t errlen) {
    rdma_t *t = T(tt);
    int dev = -1;
    if (local && *local && (dev = find_local_dev(t, local)) < 0) {
        snprintf(err, errlen, "rdma: local address '%s' is not one of our ports", local);
        return -1;
    }
    if (strncmp(peer, "rdma:", 5) == 0) peer += 5;
    if (strlen(peer) >= TE_ADDR_LEN) {
        snprintf(err, errlen, "rdma: peer address too long");
        return -1;
    }
    struct te_path *p = xcalloc(1, sizeof *p);
    p->t = t;
    strcpy(p->peer, peer);
    p->nconns = t->opt.qps_per_path;
    /* A queue deep enough for the whole window on any one QP, within
     * what the port allows. */
    int depth = pow2_at_least(t->base.cfg.window);
    for (int i = 0; i < p->nconns; i++) {
        rdma_conn *c = &p->conns[i];
        c->path = p;
        c->pos = i;
        c->fd = -1;
        c->dev = dev >= 0 ? dev : (t->next_dev + i) % t->ndevs;
        c->depth = depth;
        while (c->depth > t->devs[c->dev].max_qp_wr) c->depth >>= 1;
        c->ring = xcalloc((size_t)c->depth, sizeof *c->ring);
        c->wrs = xcalloc((size_t)t->opt.max_batch, sizeof *c->wrs);
        c->sges = xcalloc((size_t)t->opt.max_batch, sizeof *c->sges);
    }
    t->next_dev++;
    for (int i = 0; i < p->nconns; i++) {
        if (rdma_conn_up(&p->conns[i], err, errlen) == 0) continue;
        while (i-- > 0) rdma_conn_fail(&p->conns[i], TE_ECLOSED);
        path_free(p);
        return -1;
    }
    p->next = t->paths;
    t->paths = p;
    *out = p;
    return 0;
}

static void rdma_close(te_path *p) {
    rdma_t *t = p->t;
    for (int i = 0; i < p->nconns; i++) rdma_conn_fail(&p->conns[i], TE_ECLOSED);
    for (struct te_path **pp = &t->paths; *pp; pp = &(*pp)->next)
        if (*pp == p) { *pp = p->next; break; }
    path_free(p);
}

/* ---- submit ---- */

/* Post c's batch with one call: every signal_every-th WR and the last
 * are signalled. A refused post fails the QP and its requests. */
static void flush_batch(rdma_conn *c) {
    rdma_t *t = c->path->t;
    int n = c->nbatch, every = t->opt.signal_every;
    if (n == 0) return;
    for (int i = 0; i < n; i++) {
        c->wrs[i].next = i + 1 < n ? &c->wrs[i + 1] : NULL;
        c->wrs[i].send_flags = (i + 1) % every == 0 || i == n - 1 ? IBV_SEND_SIGNALED : 0;
    }
    struct ibv_send_wr *bad = NULL;
    int rc = t->ops->post_send(c->qp, c->wrs, &bad);
    c->nbatch = 0;
    if (rc != 0) {
        log_warning("rdma: post to %s failed (%s); re-establishing", c->path->peer, strerror(rc));
        rdma_conn_fail(c, TE_EIO);
    }
}

static void add_wr(rdma_conn *c, const te_req *r, const rdma_mreg *m) {
    rdma_t *t = c->path->t;
    uint64_t seq = c->tail++;
    c->ring[seq & (uint64_t)(c->depth - 1)] = (rdma_slot){.cookie = r->cookie, .posted_us = mono_us()};
    struct ibv_sge *sge = &c->sges[c->nbatch];
    struct ibv_send_wr *wr = &c->wrs[c->nbatch];
    sge->addr = (uintptr_t)r->local;
    sge->length = (uint32_t)r->len;
    sge->lkey = m->mr[c->dev]->lkey;
    memset(wr, 0, sizeof *wr);
    wr->wr_id = rdma_conn_wrid(c, seq);
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->opcode = r->op == TE_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr->wr.rdma.remote_addr = c->seg_base + r->remote_off;
    wr->wr.rdma.rkey = c->rkey;
    c->path->inflight++;
    if (++c->nbatch == t->opt.max_batch) flush_batch(c);
}

/* What we can tell without the node: well formed, inside a registered
 * region, allowed by the capability, inside the segment. The node's
 * own check happens when it opens rights on the QP (rdma_conn_grant). */
static int check_req(struct te_path *p, const te_req *r, rdma_mreg **m) {
    rdma_t *t = p->t;
    if ((r->op != TE_READ && r->op != TE_WRITE) || !r->local || !r->cap || r->len == 0 ||
        r->len > t->devs[0].max_msg_sz || r->len > UINT32_MAX)
        return TE_EINVAL;
    int rc = te_cap_check_nokey(r->cap, p->node_id, r->op, r->remote_off, r->len, wall_ms());
    if (rc != TE_OK) return rc;
    if (r->remote_off > p->seg_len || r->len > p->seg_len - r->remote_off) return TE_ERANGE;
    return (*m = find_mr(t, r->local, r->len)) ? TE_OK : TE_EINVAL;
}

/* The next QP of p, round robin, with send-queue room: brought up again
 * if it broke (once per submit: `tried` remembers failures). */
static rdma_conn *pick_conn(struct te_path *p, unsigned *tried) {
    for (int k = 0; k < p->nconns; k++) {
        int i = (p->rr + k) % p->nconns;
        rdma_conn *c = &p->conns[i];
        if (!c->qp) {
            char err[256];
            if (*tried & (1u << i)) continue;
            *tried |= 1u << i;
            if (rdma_conn_up(c, err, sizeof err) != 0) {
                log_warning("rdma: re-establishing QP to %s failed: %s", p->peer, err);
                continue;
            }
        }
        if (c->tail - c->head >= (uint64_t)c->depth) continue;
        p->rr = i + 1;
        return c;
    }
    return NULL;
}

static int rdma_submit(te_path *p, const te_req *reqs, int n) {
    rdma_t *t = p->t;
    unsigned tried = 0;
    int done = 0;
    for (; done < n && p->inflight < t->base.cfg.window; done++) {
        const te_req *r = &reqs[done];
        rdma_mreg *m = NULL;
        int rc = check_req(p, r, &m);
        if (rc != TE_OK) { rdma_complete(t, p, r->cookie, rc); continue; }
        rdma_conn *c = pick_conn(p, &tried);
        if (!c) break;
        uint32_t need = r->op == TE_WRITE ? TE_CAP_WRITE : TE_CAP_READ;
        if (!(c->rights & need)) {
            flush_batch(c);     /* grant's round trip: don't hold back queued WRs */
            if ((rc = rdma_conn_grant(c, r)) != TE_OK) {
                rdma_complete(t, p, r->cookie, rc);
                continue;
            }
        }
        add_wr(c, r, m);
    }
    int up = 0;
    for (int i = 0; i < p->nconns; i++) {
        if (p->conns[i].qp) flush_batch(&p->conns[i]);
        up += p->conns[i].qp != NULL;
    }
    return done == 0 && n > 0 && !up ? -1 : done;    /* -1: no QP would come up */
}

/* ---- completions ---- */

static void on_wc(rdma_t *t, const struct ibv_wc *wc) {
    uint64_t seq;
    rdma_conn *c = rdma_conn_from_wrid(t, wc->wr_id, &seq);
    if (!c) return;           /* from a QP already failed or replaced */
    if (wc->status != IBV_WC_SUCCESS) {
        log_warning("rdma: %s on QP to %s; failing %llu request(s), QP re-established on next use",
                    ibv_wc_status_str(wc->status), c->path->peer,
                    (unsigned long long)(c->tail - c->head));
        rdma_conn_fail(c, TE_EIO);
        return;
    }
    c->path->inflight -= (int)(seq + 1 - c->head);
    for (; c->head <= seq; c->head++)
        rdma_complete(t, c->path, c->ring[c->head & (uint64_t)(c->depth - 1)].cookie, TE_OK);
}

static int harvest_dev(rdma_t *t, rdma_dev *d) {
    struct ibv_wc wc[POLL_BATCH];
    int total = 0, n;
    do {
        n = t->ops->poll_cq(d->cq, POLL_BATCH, wc);
        if (n < 0) {
            log_warning("rdma %s: CQ failed; failing its QPs", d->name);
            for (struct te_path *p = t->paths; p; p = p->next)
                for (int i = 0; i < p->nconns; i++)
                    if (p->conns[i].qp && &t->devs[p->conns[i].dev] == d)
                        rdma_conn_fail(&p->conns[i], TE_EIO);
            return total;
        }
        for (int i = 0; i < n; i++) on_wc(t, &wc[i]);
        total += n;
    } while (n == POLL_BATCH);
    return total;
}

static void harvest(rdma_t *t) {
    for (int i = 0; i < t->ndevs; i++) harvest_dev(t, &t->devs[i]);
}

/* A QP whose oldest request is older than the timeout is failed, so a
 * silent peer costs one timeout, not a hang. */
static void expire(rdma_t *t) {
    uint64_t limit = (uint64_t)t->base.cfg.timeout_ms * 1000, now = mono_us();
    for (struct te_path *p = t->paths; p; p = p->next)
        for (int i = 0; i < p->nconns; i++) {
            rdma_conn *c = &p->conns[i];
            if (c->head < c->tail && now - c->ring[c->head & (uint64_t)(c->depth - 1)].posted_us > limit)
                rdma_conn_fail(c, TE_ETIMEDOUT);
        }
}

static int busy(const rdma_t *t) {
    for (const struct te_path *p = t->paths; p; p = p->next)
        if (p->inflight) return 1;
    return 0;
}

/* Arm every CQ, look once more (a completion may have landed before the
 * arm), then sleep on the completion channels until one fires. */
static void sleep_for_events(rdma_t *t, uint64_t deadline_us) {
    struct pollfd pfd[RDMA_MAX_DEVS];
    for (int i = 0; i < t->ndevs; i++) {
        t->ops->req_notify_cq(t->devs[i].cq, 0);
        pfd[i] = (struct pollfd){.fd = t->devs[i].ch->fd, .events = POLLIN};
    }
    harvest(t);
    uint64_t now = mono_us();
    if (t->rtail > t->rhead || now >= deadline_us) return;
    int ms = (int)((deadline_us - now + 999) / 1000);
    if (poll(pfd, (nfds_t)t->ndevs, ms) <= 0) return;
    for (int i = 0; i < t->ndevs; i++) {
        struct ibv_cq *cq;
        void *ctx;
        if ((pfd[i].revents & POLLIN) && t->ops->get_cq_event(t->devs[i].ch, &cq, &ctx) == 0)
            t->ops->ack_cq_events(cq, 1);
    }
}

static int rdma_poll(te_transport *tt, te_cqe *out, int max, int timeout_ms) {
    rdma_t *t = T(tt);
    uint64_t start = mono_us();
    uint64_t deadline = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000;
    harvest(t);
    expire(t);
    while (t->rtail == t->rhead && timeout_ms > 0) {
        uint64_t now = mono_us();
        if (now >= deadline) break;
        if (busy(t) && now - start < (uint64_t)t->opt.spin_us) {
            harvest(t);
            continue;
        }
        /* Sleep in steps so a request timing out mid-wait is noticed. */
        sleep_for_events(t, deadline - now > EXPIRE_STEP_US ? now + EXPIRE_STEP_US : deadline);
        expire(t);
    }
    return take_ready(t, out, max);
}

/* ---- life ---- */

static void rdma_destroy(te_transport *tt) {
    rdma_t *t = T(tt);
    while (t->paths) rdma_close(t->paths);
    while (t->nmrs) rdma_dereg_mem(tt, &t->mrs[t->nmrs - 1]->pub);
    rdma_devs_close(t->devs, t->ndevs);
    free(t->mrs);
    free(t->tab);
    free(t->ready);
    free(t);
}

static const te_transport_ops rdma_ops = {
    .name = "rdma",
    .scheme = "rdma",
    .bare_fallback = 1,
    .connect = rdma_connect,
    .reg_mem = rdma_reg_mem,
    .dereg_mem = rdma_dereg_mem,
    .submit = rdma_submit,
    .poll = rdma_poll,
    .close = rdma_close,
    .destroy = rdma_destroy,
};

/* in as given, with out-of-range fields replaced by their defaults. */
static void fill_options(rdma_options *o, const rdma_options *in) {
    rdma_options def;
    rdma_options_default(&def);
    *o = in ? *in : def;
    o->devices[sizeof o->devices - 1] = '\0';
    if (o->qps_per_path <= 0) o->qps_per_path = def.qps_per_path;
    if (o->qps_per_path > RDMA_MAX_QPS_PER_PATH) o->qps_per_path = RDMA_MAX_QPS_PER_PATH;
    if (o->signal_every <= 0) o->signal_every = def.signal_every;
    if (o->max_batch <= 0) o->max_batch = def.max_batch;
    if (o->cq_depth <= 0) o->cq_depth = def.cq_depth;
    if (o->spin_us < 0) o->spin_us = def.spin_us;
    if (o->gid_index < -1) o->gid_index = -1;
}

te_transport *rdma_transport_create_ex(const te_config *cfg, const rdma_options *opt,
                                       const verbs_ops *ops, char *err, size_t errlen) {
    rdma_t *t = xcalloc(1, sizeof *t);
    t->base.ops = &rdma_ops;
    t->base.cfg = *cfg;
    te_config_defaults(&t->base.cfg);
    t->base.priv = t;
    t->ops = ops ? ops : &verbs_real_ops;
    fill_options(&t->opt, opt);
    t->ndevs = rdma_devs_open(t->ops, t->opt.devices, t->opt.cq_depth, t->opt.gid_index,
                              t->devs, err, errlen);
    if (t->ndevs <= 0) {
        free(t);
        return NULL;
    }
    return &t->base;
}

te_transport *rdma_transport_create(const te_config *cfg, char *err, size_t errlen) {
    return rdma_transport_create_ex(cfg, NULL, NULL, err, errlen);
}

int rdma_devices_available_ops(const verbs_ops *ops, char *why, size_t whylen) {
    return rdma_devs_probe(ops ? ops : &verbs_real_ops, why, whylen);
}

int rdma_devices_available(char *why, size_t whylen) {
    return rdma_devices_available_ops(NULL, why, whylen);
}
