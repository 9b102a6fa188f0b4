/* rdma/rdma_node.c - segment export and the QP set-up server.
 *
 * One thread serves every set-up socket with poll(): it accepts,
 * authenticates and connects new QPs, answers GRANTs, and destroys a
 * QP when its socket closes. Each step is bounded by timeout_ms, so a
 * stalled peer delays other set-ups by at most that, never the data
 * path, which does not pass through here.
 *
 * How the node validates capabilities: a QP starts with no remote
 * access at all, so knowing the rkey alone gets a peer nothing. A GRANT
 * carries a capability; te_cap_check() verifies the master's MAC, this
 * node's id, the rights, the expiry and that the range lies inside it
 * and inside the segment. Only then are the capability's rights (READ
 * and/or WRITE) opened on that QP (RTS->RTS access-flag change) and the
 * rkey returned. Per batch the node is not involved: one-sided verbs
 * bypass its CPU, so range checks per request happen in the client's
 * transport (te_cap_check_nokey) and the NIC enforces the segment bounds
 * and the QP's rights. README-rdma.md has the limits of this model. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/claims.h"
#include "core/log.h"
#include "core/util.h"
#include "rdma/rdma_node.h"

#include "backend/claims.h"
#include "rdma/rdma_oob.h"
#include "rdma/rdma_qp.h"

typedef struct node_qp {
    int fd;
    int dev;
    struct ibv_qp *qp;
    uint32_t rights;
} node_qp;

struct rdma_node {
    const verbs_ops *ops;
    rdma_node_config cfg;
    uint8_t *seg;
    size_t len;
    rdma_dev devs[RDMA_MAX_DEVS];
    struct ibv_mr *mr[RDMA_MAX_DEVS];
    int ndevs;
    int lfd, port;
    int wake[2];              /* destroy() writes here to stop the thread */
    pthread_t thread;
    int started;
    pthread_mutex_t lock;     /* guards nqps for rdma_node_qp_count */
    node_qp *qps;
    int nqps;
};

void rdma_node_config_default(rdma_node_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "0.0.0.0:0");
    c->timeout_ms = 2000;
    c->max_qps = 1024;
    c->gid_index = -1;
}

static int access_of(uint32_t rights) {
    return (rights & TE_CAP_READ ? IBV_ACCESS_REMOTE_READ : 0) |
           (rights & TE_CAP_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
}

static void drop_qp(rdma_node *n, int i) {
    node_qp *q = &n->qps[i];
    n->ops->destroy_qp(q->qp);
    rdma_dev_release_cq(&n->devs[q->dev], 1);
    close(q->fd);
    pthread_mutex_lock(&n->lock);
    n->qps[i] = n->qps[--n->nqps];
    pthread_mutex_unlock(&n->lock);
}

static void refuse(rdma_node *n, int fd, int status) {
    char err[64];
    rdma_msg m;
    memset(&m, 0, sizeof m);
    m.welcome.status = status;
    rdma_oob_send(fd, RDMA_MSG_WELCOME, &m, n->cfg.timeout_ms, err, sizeof err);
}

/* Authenticate a new peer and give it a connected QP with no rights. */
static void serve_new(rdma_node *n, int fd) {
    char err[256];
    rdma_msg m;
    rdma_qp_info local;
    if (te_auth_server(fd, n->cfg.secret, n->cfg.timeout_ms, err, sizeof err) != TE_AUTH_OK ||
        rdma_oob_recv(fd, RDMA_MSG_HELLO, &m, n->cfg.timeout_ms, err, sizeof err) != 0) {
        log_warning("rdma node: set-up refused: %s", err);
        close(fd);
        return;
    }
    if (n->nqps == n->cfg.max_qps) {
        log_warning("rdma node: refusing QP: %d already served", n->nqps);
        refuse(n, fd, TE_EIO);
        close(fd);
        return;
    }
    int dev = (int)(m.hello.dev_hint % (uint32_t)n->ndevs);
    rdma_dev *d = &n->devs[dev];
    struct ibv_qp *qp = NULL;
    if (rdma_dev_reserve_cq(d, 1) != 0) {
        snprintf(err, sizeof err, "CQ of %s full", d->name);
        goto fail;
    }
    if (!(qp = rdma_qp_create(d, 1, err, sizeof err))) goto fail_cq;
    rdma_qp_local_info(d, qp, 1, &local);
    if (rdma_qp_connect(d, qp, &local, &m.hello.qp, 0, err, sizeof err) != 0) goto fail_qp;
    memset(&m, 0, sizeof m);
    m.welcome.status = TE_OK;
    m.welcome.qp = local;
    m.welcome.node_id = n->cfg.node_id;
    m.welcome.seg_base = (uint64_t)(uintptr_t)n->seg;
    m.welcome.seg_len = n->len;
    if (rdma_oob_send(fd, RDMA_MSG_WELCOME, &m, n->cfg.timeout_ms, err, sizeof err) != 0) {
        n->ops->destroy_qp(qp);
        rdma_dev_release_cq(d, 1);
        log_warning("rdma node: set-up: %s", err);
        close(fd);
        return;
    }
    pthread_mutex_lock(&n->lock);
    n->qps[n->nqps++] = (node_qp){.fd = fd, .dev = dev, .qp = qp, .rights = 0};
    pthread_mutex_unlock(&n->lock);
    return;
fail_qp:
    n->ops->destroy_qp(qp);
fail_cq:
    rdma_dev_release_cq(d, 1);
fail:
    log_warning("rdma node: set-up failed: %s", err);
    refuse(n, fd, TE_EIO);
    close(fd);
}

/* Check the capability in a GRANT; TE_OK or the refusal. */
static int check_grant(rdma_node *n, const rdma_grant *g, te_cap *cap) {
    if (te_cap_decode(cap, g->cap, TE_CAP_WIRE_LEN) != 0) return TE_EAUTH;
    int rc = te_cap_check(cap, n->cfg.cap_key, n->cfg.cap_term, n->cfg.node_id, (te_op)g->op, g->off, g->len,
                          wall_ms());
    if (rc != TE_OK) return rc;
    /* A genuine capability for a range past our segment is the master's
     * mistake; refuse it rather than open rights that can't be used. */
    if (cap->offset > n->len || cap->length > n->len - cap->offset) return TE_ERANGE;
    /* A write grant older than one that claimed its range is stale. The
     * QP's later one-sided writes are bounded by the NIC only. */
    if ((te_op)g->op == TE_WRITE && n->cfg.claims)
        return te_claims_write(n->cfg.claims, cap, wall_ms());
    return TE_OK;
}

/* A GRANT on an established QP; -1 drops the QP. */
static int serve_grant(rdma_node *n, node_qp *q) {
    char err[256];
    rdma_msg m;
    te_cap cap;
    if (rdma_oob_recv(q->fd, RDMA_MSG_GRANT, &m, n->cfg.timeout_ms, err, sizeof err) != 0) {
        if (strcmp(err, "rdma set-up: peer closed") != 0)
            log_warning("rdma node: dropping QP %u: %s", q->qp->qp_num, err);
        return -1;
    }
    int status = check_grant(n, &m.grant, &cap);
    if (status == TE_OK && (cap.rights & ~q->rights)) {
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof a);
        a.qp_access_flags = (unsigned)access_of(q->rights | cap.rights);
        if (n->ops->modify_qp(q->qp, &a, IBV_QP_ACCESS_FLAGS) != 0) {
            log_warning("rdma node: opening rights on QP %u failed", q->qp->qp_num);
            return -1;
        }
        q->rights |= cap.rights & (TE_CAP_READ | TE_CAP_WRITE);
    }
    memset(&m, 0, sizeof m);
    m.granted.status = status;
    m.granted.rights = q->rights;
    m.granted.rkey = status == TE_OK ? n->mr[q->dev]->rkey : 0;
    return rdma_oob_send(q->fd, RDMA_MSG_GRANTED, &m, n->cfg.timeout_ms, err, sizeof err);
}

static void accept_all(rdma_node *n) {
    for (;;) {
        int fd = accept4(n->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;   /* EAGAIN, or an error accept will report again */
        serve_new(n, fd);
    }
}

static void *serve_loop(void *arg) {
    rdma_node *n = arg;
    struct pollfd *pfd = xcalloc((size_t)n->cfg.max_qps + 2, sizeof *pfd);
    for (;;) {
        int nq = n->nqps;
        pfd[0] = (struct pollfd){.fd = n->wake[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = n->lfd, .events = POLLIN};
        for (int i = 0; i < nq; i++) pfd[i + 2] = (struct pollfd){.fd = n->qps[i].fd, .events = POLLIN};
        if (poll(pfd, (nfds_t)nq + 2, -1) < 0 && errno != EINTR) break;
        if (pfd[0].revents) break;
        /* Backwards, so that dropping swaps in an entry already seen. */
        for (int i = nq - 1; i >= 0; i--)
            if (pfd[i + 2].revents && serve_grant(n, &n->qps[i]) != 0) drop_qp(n, i);
        if (pfd[1].revents) accept_all(n);
    }
    free(pfd);
    return NULL;
}

void rdma_node_destroy(rdma_node *n) {
    if (!n) return;
    if (n->started) {
        ssize_t w = write(n->wake[1], "x", 1);
        (void)w;
        pthread_join(n->thread, NULL);
    }
    while (n->nqps) drop_qp(n, n->nqps - 1);
    for (int i = 0; i < n->ndevs; i++)
        if (n->mr[i]) n->ops->dereg_mr(n->mr[i]);
    rdma_devs_close(n->devs, n->ndevs);
    if (n->lfd >= 0) close(n->lfd);
    if (n->wake[0] >= 0) close(n->wake[0]);
    if (n->wake[1] >= 0) close(n->wake[1]);
    pthread_mutex_destroy(&n->lock);
    free(n->qps);
    free(n);
}

rdma_node *rdma_node_export(const rdma_node_config *cfg, void *seg, size_t len,
                            const verbs_ops *ops, char *err, size_t errlen) {
    if (!seg || len == 0) {
        snprintf(err, errlen, "rdma node: empty segment");
        return NULL;
    }
    rdma_node *n = xcalloc(1, sizeof *n);
    n->ops = ops ? ops : &verbs_real_ops;
    n->cfg = *cfg;
    if (n->cfg.timeout_ms <= 0) n->cfg.timeout_ms = 2000;
    if (n->cfg.max_qps <= 0) n->cfg.max_qps = 1024;
    n->seg = seg;
    n->len = len;
    n->lfd = n->wake[0] = n->wake[1] = -1;
    pthread_mutex_init(&n->lock, NULL);
    n->qps = xcalloc((size_t)n->cfg.max_qps, sizeof *n->qps);
    /* CQ room: each served QP reserves one entry (it posts nothing). */
    n->ndevs = rdma_devs_open(n->ops, n->cfg.devices, n->cfg.max_qps, n->cfg.gid_index,
                              n->devs, err, errlen);
    if (n->ndevs <= 0) { n->ndevs = 0; goto fail; }
    for (int i = 0; i < n->ndevs; i++) {
        n->mr[i] = n->ops->reg_mr(n->devs[i].pd, seg, len, IBV_ACCESS_LOCAL_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
        if (!n->mr[i]) {
            snprintf(err, errlen, "rdma node: registering %zu bytes on %s failed (%s)", len,
                     n->devs[i].name, strerror(errno ? errno : EIO));
            goto fail;
        }
    }
    if ((n->lfd = rdma_oob_listen(n->cfg.listen, &n->port, err, errlen)) < 0) goto fail;
    if (pipe2(n->wake, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "rdma node: pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&n->thread, NULL, serve_loop, n) != 0) {
        snprintf(err, errlen, "rdma node: cannot start the set-up thread");
        goto fail;
    }
    n->started = 1;
    log_info("rdma node: exporting %zu bytes on %d port(s), set-up on port %d", len, n->ndevs,
             n->port);
    return n;
fail:
    rdma_node_destroy(n);
    return NULL;
}

int rdma_node_port(const rdma_node *n) { return n->port; }

int rdma_node_qp_count(rdma_node *n) {
    pthread_mutex_lock(&n->lock);
    int c = n->nqps;
    pthread_mutex_unlock(&n->lock);
    return c;
}
