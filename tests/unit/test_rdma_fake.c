/* test_rdma_fake.c - the verbs stand-in behaves like a NIC where the
 * transport's tests rely on it: QP state machine, rkey/bounds/access
 * checks, signalled completions and send-queue slots, CQ events. Uses
 * the rdma/ helpers to bring a pair of QPs up in-process. */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "rdma/rdma_dev.h"
#include "rdma/rdma_qp.h"
#include "support/verbs_fake.h"
#include "test.h"

typedef struct pair {
    rdma_dev d[2];
    struct ibv_qp *qp[2];
    uint8_t src[4096], dst[4096];
    struct ibv_mr *lmr, *rmr;
} pair;

/* qp[0] on port 0 initiates; qp[1] on port 1 accepts remote_access. */
static int pair_up(pair *p, int remote_access, int depth) {
    char err[256];
    memset(p, 0, sizeof *p);
    if (rdma_devs_open(&verbs_fake_ops, "", 64, -1, p->d, err, sizeof err) != 2) return -1;
    rdma_qp_info info[2];
    for (int i = 0; i < 2; i++) {
        if (!(p->qp[i] = rdma_qp_create(&p->d[i], depth, err, sizeof err))) return -1;
        rdma_qp_local_info(&p->d[i], p->qp[i], i, &info[i]);
    }
    if (rdma_qp_connect(&p->d[0], p->qp[0], &info[0], &info[1], 0, err, sizeof err) != 0 ||
        rdma_qp_connect(&p->d[1], p->qp[1], &info[1], &info[0], remote_access, err, sizeof err) != 0) {
        printf("# %s\n", err);
        return -1;
    }
    p->lmr = verbs_fake_ops.reg_mr(p->d[0].pd, p->src, sizeof p->src, IBV_ACCESS_LOCAL_WRITE);
    p->rmr = verbs_fake_ops.reg_mr(p->d[1].pd, p->dst, sizeof p->dst,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    return p->lmr && p->rmr ? 0 : -1;
}

static void pair_down(pair *p) {
    verbs_fake_ops.dereg_mr(p->lmr);
    verbs_fake_ops.dereg_mr(p->rmr);
    for (int i = 0; i < 2; i++) verbs_fake_ops.destroy_qp(p->qp[i]);
    rdma_devs_close(p->d, 2);
}

static int post(pair *p, enum ibv_wr_opcode op, uint32_t len, uint64_t roff, uint32_t rkey,
                int signalled, uint64_t id) {
    struct ibv_sge sge = {.addr = (uintptr_t)p->src, .length = len, .lkey = p->lmr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = signalled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = (uintptr_t)p->dst + roff;
    wr.wr.rdma.rkey = rkey;
    return verbs_fake_ops.post_send(p->qp[0], &wr, &bad);
}

static void test_state_machine(void) {
    fake_verbs_reset(1, 2);
    char err[128];
    rdma_dev d[2];
    ASSERT_EQ(rdma_devs_open(&verbs_fake_ops, "fake0", 64, -1, d, err, sizeof err), 2);
    struct ibv_qp *qp = rdma_qp_create(&d[0], 8, err, sizeof err);
    ASSERT(qp != NULL);
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;          /* RESET -> RTS is not a transition */
    ASSERT(verbs_fake_ops.modify_qp(qp, &a, IBV_QP_STATE) != 0);
    ASSERT_EQ(fake_verbs_qp_state(qp->qp_num), IBV_QPS_RESET);
    uint8_t b[64];
    struct ibv_mr *mr = verbs_fake_ops.reg_mr(d[0].pd, b, sizeof b, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_sge sge = {.addr = (uintptr_t)b, .length = 8, .lkey = mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE}, *bad;
    ASSERT(verbs_fake_ops.post_send(qp, &wr, &bad) != 0);   /* not RTS: refused */
    ASSERT(bad == &wr);
    verbs_fake_ops.dereg_mr(mr);
    verbs_fake_ops.destroy_qp(qp);
    rdma_devs_close(d, 2);
    fake_verbs_stats st;
    fake_verbs_get_stats(&st);
    ASSERT_EQ(st.live_objects, 0);
}

static void test_write_read_and_signalling(void) {
    fake_verbs_reset(2, 1);
    pair p;
    ASSERT(pair_up(&p, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 4) == 0);
    memcpy(p.src, "hello rdma", 10);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 10, 100, p.rmr->rkey, 0, 1), 0);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 10, 200, p.rmr->rkey, 0, 2), 0);
    ASSERT_MEMEQ(p.dst + 100, "hello rdma", 10);
    struct ibv_wc wc[4];
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 4, wc), 0);   /* unsignalled: no CQE */
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 10, 300, p.rmr->rkey, 0, 3), 0);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_READ, 10, 100, p.rmr->rkey, 1, 4), 0);
    ASSERT(post(&p, IBV_WR_RDMA_WRITE, 1, 0, p.rmr->rkey, 1, 5) != 0);  /* SQ of 4 full */
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 4, wc), 1);
    ASSERT_EQ(wc[0].wr_id, 4);
    ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
    ASSERT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 1, 0, p.rmr->rkey, 1, 5), 0);  /* slots freed */
    pair_down(&p);
}

static void test_rkey_bounds_and_rights_violations(void) {
    fake_verbs_reset(2, 1);
    pair p;
    struct ibv_wc wc[4];
    ASSERT(pair_up(&p, IBV_ACCESS_REMOTE_READ, 8) == 0);   /* responder: read only */
    ASSERT_EQ(post(&p, IBV_WR_RDMA_READ, 16, 0, p.rmr->rkey, 1, 1), 0);
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 4, wc), 1);
    ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 16, 0, p.rmr->rkey, 0, 2), 0);  /* no right */
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 4, wc), 1);   /* errors always complete */
    ASSERT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    ASSERT_EQ(fake_verbs_qp_state(p.qp[0]->qp_num), IBV_QPS_ERR);
    ASSERT_EQ(fake_verbs_qp_state(p.qp[1]->qp_num), IBV_QPS_ERR);
    pair_down(&p);

    ASSERT(pair_up(&p, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, 8) == 0);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 16, 0, p.rmr->rkey + 2, 1, 3), 0);  /* wrong rkey */
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 4, wc), 1);
    ASSERT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 16, 0, p.rmr->rkey, 0, 4), 0);      /* now flushed */
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 4, wc), 1);
    ASSERT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    pair_down(&p);

    ASSERT(pair_up(&p, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, 8) == 0);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 16, sizeof p.dst - 8, p.rmr->rkey, 1, 5), 0);
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 4, wc), 1);      /* past the MR's end */
    ASSERT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    uint8_t zero[8] = {0};
    ASSERT_MEMEQ(p.dst + sizeof p.dst - 8, zero, 8);             /* nothing written */
    pair_down(&p);
}

static void test_cq_event_on_armed_cq(void) {
    fake_verbs_reset(2, 1);
    pair p;
    ASSERT(pair_up(&p, IBV_ACCESS_REMOTE_WRITE, 8) == 0);
    struct pollfd pfd = {.fd = p.d[0].ch->fd, .events = POLLIN};
    ASSERT_EQ(poll(&pfd, 1, 0), 0);
    ASSERT_EQ(verbs_fake_ops.req_notify_cq(p.d[0].cq, 0), 0);
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 4, 0, p.rmr->rkey, 1, 9), 0);
    ASSERT_EQ(poll(&pfd, 1, 0), 1);
    struct ibv_cq *cq;
    void *ctx;
    ASSERT_EQ(verbs_fake_ops.get_cq_event(p.d[0].ch, &cq, &ctx), 0);
    ASSERT(cq == p.d[0].cq);
    ASSERT(ctx == &p.d[0]);
    verbs_fake_ops.ack_cq_events(cq, 1);
    struct ibv_wc wc;
    ASSERT_EQ(verbs_fake_ops.poll_cq(cq, 1, &wc), 1);
    pair_down(&p);
}

static void test_roce_addresses_by_gid(void) {
    fake_verbs_reset(2, 1);
    fake_verbs_set_roce(1);
    pair p;
    ASSERT(pair_up(&p, IBV_ACCESS_REMOTE_WRITE, 8) == 0);
    ASSERT(p.d[0].is_roce);
    ASSERT_EQ(p.d[0].gid_index, 1);             /* the IPv4-mapped entry */
    ASSERT_EQ(post(&p, IBV_WR_RDMA_WRITE, 4, 0, p.rmr->rkey, 1, 1), 0);
    struct ibv_wc wc;
    ASSERT_EQ(verbs_fake_ops.poll_cq(p.d[0].cq, 1, &wc), 1);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
    pair_down(&p);
    fake_verbs_set_roce(0);
}

int main(void) {
    RUN_TEST(test_state_machine);
    RUN_TEST(test_write_read_and_signalling);
    RUN_TEST(test_rkey_bounds_and_rights_violations);
    RUN_TEST(test_cq_event_on_armed_cq);
    RUN_TEST(test_roce_addresses_by_gid);
    TEST_EXIT();
}
