/* rdma/rdma_qp.c - RC QP creation and state transitions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rdma/rdma_qp.h"

/* Retry transport errors for about 7 x 67 ms before the QP goes to the
 * error state: long enough to ride out a switch hiccup, short enough
 * that the engine fails over well inside its request timeout. */
#define QP_TIMEOUT     14     /* 4.096 us * 2^14 = 67 ms */
#define QP_RETRY_CNT   7
#define QP_RNR_RETRY   7
#define QP_MIN_RNR     12
#define QP_MAX_RD_ATOM 16

struct ibv_qp *rdma_qp_create(rdma_dev *d, int max_send_wr, char *err, size_t errlen) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = d->cq;
    ia.recv_cq = d->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = (uint32_t)max_send_wr;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.sq_sig_all = 0;        /* we choose which WRs are signalled */
    struct ibv_qp *qp = d->ops->create_qp(d->pd, &ia);
    if (!qp) snprintf(err, errlen, "rdma %s: create qp failed (%s)", d->name,
                      strerror(errno ? errno : EIO));
    return qp;
}

static int clamp_rd_atomic(int v) {
    return v < 1 ? 1 : v > QP_MAX_RD_ATOM ? QP_MAX_RD_ATOM : v;
}

void rdma_qp_local_info(const rdma_dev *d, const struct ibv_qp *qp, int as_responder,
                        rdma_qp_info *out) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r = (uint32_t)random();
    memset(out, 0, sizeof *out);
    out->qpn = qp->qp_num;
    out->psn = r & 0xffffff;
    out->lid = d->lid;
    memcpy(out->gid, d->gid.raw, sizeof out->gid);
    out->mtu = (uint8_t)d->mtu;
    out->rd_atomic = (uint8_t)clamp_rd_atomic(as_responder ? d->max_dest_rd_atomic
                                                           : d->max_rd_atomic);
}

static int modify(rdma_dev *d, struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
                  const char *state, char *err, size_t errlen) {
    int rc = d->ops->modify_qp(qp, a, mask);
    if (rc == 0) return 0;
    snprintf(err, errlen, "rdma %s: qp %u to %s failed (%s)", d->name, qp->qp_num, state,
             strerror(rc > 0 ? rc : errno ? errno : EIO));
    return -1;
}

int rdma_qp_connect(rdma_dev *d, struct ibv_qp *qp, const rdma_qp_info *local,
                    const rdma_qp_info *remote, int access, char *err, size_t errlen) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = d->port;
    a.qp_access_flags = (unsigned)access;
    if (modify(d, qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
               "INIT", err, errlen) != 0)
        return -1;

    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(local->mtu < remote->mtu ? local->mtu : remote->mtu);
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = local->rd_atomic;
    a.min_rnr_timer = QP_MIN_RNR;
    a.ah_attr.port_num = d->port;
    a.ah_attr.dlid = remote->lid;
    /* RoCE has no LIDs, and IB needs a GRH to leave the subnet: route by
     * GID whenever the peer has no LID or we speak Ethernet. */
    if (d->is_roce || remote->lid == 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, sizeof remote->gid);
        a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (modify(d, qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
               "RTR", err, errlen) != 0)
        return -1;

    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = QP_TIMEOUT;
    a.retry_cnt = QP_RETRY_CNT;
    a.rnr_retry = QP_RNR_RETRY;
    a.sq_psn = local->psn;
    a.max_rd_atomic = local->rd_atomic < remote->rd_atomic ? local->rd_atomic : remote->rd_atomic;
    return modify(d, qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                  "RTS", err, errlen);
}
