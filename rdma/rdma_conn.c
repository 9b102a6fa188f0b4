/* rdma/rdma_conn.c - bringing one QP of a path up, down and granted.
 *
 * Why our own TCP exchange instead of librdmacm: the node already
 * authenticates data-plane peers on a TCP socket with the cluster
 * secret (backend/auth.h), and the capability check that gates the rkey
 * needs a request/reply channel anyway. rdma_cm's private data is too
 * small for a challenge-response plus a capability, its event channel
 * would be a second connection state machine to drive, and a plain
 * exchange of QPN/PSN/LID/GID works on IB and RoCE alike and runs
 * against the verbs stand-in in tests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cap.h"
#include "core/log.h"
#include "core/util.h"
#include "rdma/rdma_oob.h"
#include "rdma/rdma_priv.h"

/* Give c a table index; the generation tells its completions from those
 * of an earlier QP that had the same index. */
static int tab_take(rdma_t *t, rdma_conn *c) {
    int i = 0;
    while (i < t->ntab && t->tab[i].conn) i++;
    if (i == t->ntab) {
        if (t->ntab == CONN_TAB_MAX) return -1;
        int n = t->ntab ? t->ntab * 2 : 16;
        t->tab = xrealloc(t->tab, (size_t)n * sizeof *t->tab);
        memset(t->tab + t->ntab, 0, (size_t)(n - t->ntab) * sizeof *t->tab);
        t->ntab = n;
    }
    t->tab[i].conn = c;
    c->gen = ++t->tab[i].gen;
    c->tab = i;
    return 0;
}

static void conn_down(rdma_conn *c) {
    rdma_t *t = c->path->t;
    if (c->qp) {
        t->ops->destroy_qp(c->qp);
        rdma_dev_release_cq(&t->devs[c->dev], c->depth);
        t->tab[c->tab].conn = NULL;
        c->qp = NULL;
    }
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->rights = 0;
    c->rkey = 0;
}

/* HELLO/WELCOME on c->fd; fills the node's QP info. */
static int exchange(rdma_conn *c, const rdma_qp_info *local, rdma_qp_info *remote,
                    char *err, size_t errlen) {
    struct te_path *p = c->path;
    int to = p->t->base.cfg.connect_timeout_ms;
    rdma_msg m;
    memset(&m, 0, sizeof m);
    m.hello.qp = *local;
    m.hello.dev_hint = (uint32_t)c->pos;
    if (rdma_oob_send(c->fd, RDMA_MSG_HELLO, &m, to, err, errlen) != 0 ||
        rdma_oob_recv(c->fd, RDMA_MSG_WELCOME, &m, to, err, errlen) != 0)
        return -1;
    if (m.welcome.status != TE_OK || m.welcome.seg_len == 0) {
        snprintf(err, errlen, "rdma set-up: node at %s refused the QP (%d)", p->peer,
                 m.welcome.status);
        return -1;
    }
    /* All QPs of a path must reach the same segment. */
    if (p->seg_len && (m.welcome.node_id != p->node_id || m.welcome.seg_len != p->seg_len)) {
        snprintf(err, errlen, "rdma set-up: node at %s changed identity", p->peer);
        return -1;
    }
    p->node_id = m.welcome.node_id;
    p->seg_len = m.welcome.seg_len;
    c->seg_base = m.welcome.seg_base;
    *remote = m.welcome.qp;
    return 0;
}

int rdma_conn_up(rdma_conn *c, char *err, size_t errlen) {
    struct te_path *p = c->path;
    rdma_t *t = p->t;
    rdma_dev *d = &t->devs[c->dev];
    rdma_qp_info local, remote;

    c->fd = rdma_oob_dial(p->peer, t->base.cfg.secret, t->base.cfg.connect_timeout_ms,
                          err, errlen);
    if (c->fd < 0) return -1;
    if (rdma_dev_reserve_cq(d, c->depth) != 0) {
        snprintf(err, errlen, "rdma %s: CQ full (%d QPs of %d WRs; raise cq_depth)", d->name,
                 d->cq_reserved / c->depth, c->depth);
        goto fail;
    }
    if (!(c->qp = rdma_qp_create(d, c->depth, err, errlen))) {
        rdma_dev_release_cq(d, c->depth);
        goto fail;
    }
    if (tab_take(t, c) != 0) {
        snprintf(err, errlen, "rdma: too many QPs");
        t->ops->destroy_qp(c->qp);
        rdma_dev_release_cq(d, c->depth);
        c->qp = NULL;
        goto fail;
    }
    rdma_qp_local_info(d, c->qp, 0, &local);
    /* The client QP accepts no remote access: nodes never touch client
     * memory, they are only targets. */
    if (exchange(c, &local, &remote, err, errlen) != 0 ||
        rdma_qp_connect(d, c->qp, &local, &remote, 0, err, errlen) != 0)
        goto fail;
    log_debug("rdma: qp %u on %s/%d up to %s (node qp %u)", c->qp->qp_num, d->name, d->port,
              p->peer, remote.qpn);
    return 0;
fail:
    conn_down(c);
    return -1;
}

void rdma_conn_fail(rdma_conn *c, int status) {
    struct te_path *p = c->path;
    for (uint64_t seq = c->head; seq < c->tail; seq++)
        rdma_complete(p->t, p, c->ring[seq & (uint64_t)(c->depth - 1)].cookie, status);
    p->inflight -= (int)(c->tail - c->head);
    c->head = c->tail;
    c->nbatch = 0;
    conn_down(c);
}

int rdma_conn_grant(rdma_conn *c, const te_req *r) {
    struct te_path *p = c->path;
    int to = p->t->base.cfg.connect_timeout_ms;
    char err[256];
    rdma_msg m;
    memset(&m, 0, sizeof m);
    te_cap_encode(r->cap, m.grant.cap);
    m.grant.op = (uint8_t)r->op;
    m.grant.off = r->remote_off;
    m.grant.len = r->len;
    if (rdma_oob_send(c->fd, RDMA_MSG_GRANT, &m, to, err, sizeof err) != 0 ||
        rdma_oob_recv(c->fd, RDMA_MSG_GRANTED, &m, to, err, sizeof err) != 0) {
        log_warning("rdma: grant on %s failed: %s", p->peer, err);
        rdma_conn_fail(c, TE_EIO);
        return TE_EIO;
    }
    if (m.granted.status != TE_OK)
        return m.granted.status == TE_ERANGE ? TE_ERANGE : TE_EAUTH;
    c->rights = m.granted.rights;
    c->rkey = m.granted.rkey;
    return c->rights & (r->op == TE_WRITE ? TE_CAP_WRITE : TE_CAP_READ) ? TE_OK : TE_EAUTH;
}

uint64_t rdma_conn_wrid(const rdma_conn *c, uint64_t seq) {
    return (uint64_t)c->tab << 48 | (uint64_t)c->gen << WRID_SEQ_BITS | (seq & WRID_SEQ_MASK);
}

rdma_conn *rdma_conn_from_wrid(rdma_t *t, uint64_t wr_id, uint64_t *seq) {
    int i = (int)(wr_id >> 48);
    uint8_t gen = (uint8_t)(wr_id >> WRID_SEQ_BITS);
    if (i >= t->ntab || !t->tab[i].conn || t->tab[i].gen != gen) return NULL;
    rdma_conn *c = t->tab[i].conn;
    /* Rebuild the full sequence from its low bits, relative to head. */
    uint64_t s = c->head + (((wr_id & WRID_SEQ_MASK) - c->head) & WRID_SEQ_MASK);
    if (s >= c->tail - (uint64_t)c->nbatch) return NULL;
    *seq = s;
    return c;
}
