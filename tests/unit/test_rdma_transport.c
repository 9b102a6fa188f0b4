/* test_rdma_transport.c - the RDMA transport and node export against the
 * verbs stand-in (tests/support/verbs_fake.h): the QP set-up runs over
 * real authenticated TCP on 127.0.0.1 (ephemeral port), the data path
 * through the fake NIC. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/cap.h"
#include "core/util.h"
#include "rdma/rdma_node.h"
#include "rdma/rdma_transport.h"
#include "support/verbs_fake.h"
#include "test.h"

#define SEG_LEN (1 << 20)
#define BUF_LEN (256 << 10)

static const uint8_t KEY[TE_CAP_KEY_LEN] = "0123456789abcdef";

typedef struct rig {
    uint8_t *seg, *buf;
    rdma_node *node;
    te_transport *t;
    te_path *path;
    te_mr *mr;
    te_cap cap;
    char addr[64];
    rdma_options o;   /* the transport's */
} rig;

/* A node and a transport connected to it: qps QPs per path, batches of
 * at most batch WRs, every every-th one signalled. */
static int rig_up(rig *r, int qps, int batch, int every) {
    char err[256];
    memset(r, 0, sizeof *r);
    rdma_options_default(&r->o);
    r->o.qps_per_path = qps;
    r->o.max_batch = batch;
    r->o.signal_every = every;
    fake_verbs_reset(2, 1);
    r->seg = xcalloc(1, SEG_LEN);
    r->buf = xcalloc(1, BUF_LEN);
    rdma_node_config nc;
    rdma_node_config_default(&nc);
    snprintf(nc.listen, sizeof nc.listen, "127.0.0.1:0");
    snprintf(nc.secret, sizeof nc.secret, "s3cret");
    memcpy(nc.cap_key, KEY, sizeof nc.cap_key);
    nc.node_id = 7;
    r->node = rdma_node_export(&nc, r->seg, SEG_LEN, &verbs_fake_ops, err, sizeof err);
    if (!r->node) { printf("# export: %s\n", err); return -1; }
    snprintf(r->addr, sizeof r->addr, "127.0.0.1:%d", rdma_node_port(r->node));
    te_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.secret, sizeof cfg.secret, "s3cret");
    cfg.window = 128;
    r->t = rdma_transport_create_ex(&cfg, &r->o, &verbs_fake_ops, err, sizeof err);
    if (!r->t) { printf("# create: %s\n", err); return -1; }
    if (te_connect(r->t, NULL, r->addr, &r->path, err, sizeof err) != 0) {
        printf("# connect: %s\n", err);
        return -1;
    }
    if (r->t->ops->reg_mem(r->t, r->buf, BUF_LEN, &r->mr, err, sizeof err) != 0) return -1;
    r->cap = (te_cap){.node_id = 7, .rights = TE_CAP_READ | TE_CAP_WRITE, .offset = 0,
                      .length = SEG_LEN, .expiry_ms = wall_ms() + 60000};
    te_cap_sign(&r->cap, KEY);
    return 0;
}

static void rig_down(rig *r) {
    if (r->t) r->t->ops->destroy(r->t);
    rdma_node_destroy(r->node);
    free(r->seg);
    free(r->buf);
}

static te_req req(rig *r, te_op op, size_t local_off, uint64_t remote_off, uint64_t len,
                  uint64_t cookie) {
    return (te_req){.op = op, .local = r->buf + local_off, .remote_off = remote_off, .len = len,
                    .cap = &r->cap, .cookie = cookie};
}

/* Collect n completions (bounded in time) into out. */
static int drain(rig *r, te_cqe *out, int n) {
    int got = 0;
    uint64_t end = mono_ms() + 3000;
    while (got < n && mono_ms() < end) got += te_poll(r->t, out + got, n - got, 100);
    return got;
}

static int live_objects(void) {
    fake_verbs_stats st;
    fake_verbs_get_stats(&st);
    return st.live_objects;
}

static void test_no_device_reports_and_refuses(void) {
    char why[128] = "", err[128] = "";
    fake_verbs_reset(0, 0);
    ASSERT_EQ(rdma_devices_available_ops(&verbs_fake_ops, why, sizeof why), 0);
    ASSERT_STREQ(why, "no RDMA devices found");
    te_config cfg;
    memset(&cfg, 0, sizeof cfg);
    ASSERT(rdma_transport_create_ex(&cfg, NULL, &verbs_fake_ops, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "no RDMA devices found");
    fake_verbs_reset(1, 1);
    fake_verbs_set_port_state(0, 1, IBV_PORT_DOWN);
    ASSERT_EQ(rdma_devices_available_ops(&verbs_fake_ops, why, sizeof why), 0);
    ASSERT(strstr(why, "no active port") != NULL);
    rdma_options o;
    rdma_options_default(&o);
    snprintf(o.devices, sizeof o.devices, "mlx5_9");
    fake_verbs_reset(1, 1);
    ASSERT(rdma_transport_create_ex(&cfg, &o, &verbs_fake_ops, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "rdma device 'mlx5_9' not found");
    ASSERT_EQ(live_objects(), 0);
}

static void test_put_get_maps_to_wrs(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    for (int i = 0; i < 8192; i++) r.buf[i] = (uint8_t)(i * 7 + 1);
    int before = fake_verbs_wr_count();
    te_req w = req(&r, TE_WRITE, 0, 12345, 8192, 42);
    ASSERT_EQ(te_submit(r.t, r.path, &w, 1), 1);
    te_cqe c[4];
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].cookie, 42);
    ASSERT_EQ(c[0].status, TE_OK);
    ASSERT(c[0].path == r.path);
    ASSERT_MEMEQ(r.seg + 12345, r.buf, 8192);
    fake_wr fw;
    ASSERT(fake_verbs_wr_at(before, &fw) == 0);
    ASSERT_EQ(fw.opcode, IBV_WR_RDMA_WRITE);
    ASSERT_EQ(fw.local_addr, (uintptr_t)r.buf);
    ASSERT_EQ(fw.length, 8192);
    ASSERT_EQ(fw.lkey, r.mr->lkey);
    ASSERT_EQ(fw.remote_addr, (uintptr_t)r.seg + 12345);   /* segment base + offset */
    ASSERT(fw.rkey & 0x80000000u);                         /* a node MR's rkey */
    ASSERT_EQ(fw.signalled, 1);
    /* Read it back into another part of the buffer. */
    te_req g = req(&r, TE_READ, 100000, 12345, 8192, 43);
    ASSERT_EQ(te_submit(r.t, r.path, &g, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_OK);
    ASSERT_MEMEQ(r.buf + 100000, r.buf, 8192);
    ASSERT(fake_verbs_wr_at(before + 1, &fw) == 0);
    ASSERT_EQ(fw.opcode, IBV_WR_RDMA_READ);
    ASSERT_EQ(fw.local_addr, (uintptr_t)r.buf + 100000);
    rig_down(&r);
    ASSERT_EQ(live_objects(), 0);
}

static void test_batching_and_selective_signalling(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    te_req warm = req(&r, TE_WRITE, 0, 0, 64, 999);     /* opens the WRITE right */
    te_cqe c[128];
    ASSERT_EQ(te_submit(r.t, r.path, &warm, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    fake_verbs_stats a, b;
    fake_verbs_get_stats(&a);
    te_req rs[64];
    for (int i = 0; i < 64; i++) rs[i] = req(&r, TE_WRITE, (size_t)i * 1024, (uint64_t)i * 4096, 1024, 1000 + (uint64_t)i);
    ASSERT_EQ(te_submit(r.t, r.path, rs, 64), 64);
    fake_verbs_get_stats(&b);
    ASSERT_EQ(b.post_calls - a.post_calls, 2);          /* 64 WRs / batches of 32 */
    ASSERT_EQ(b.wrs_posted - a.wrs_posted, 64);
    ASSERT_EQ(b.wrs_signalled - a.wrs_signalled, 4);    /* 16th and 32nd of each */
    ASSERT_EQ(drain(&r, c, 64), 64);
    for (int i = 0; i < 64; i++) {                      /* one QP: in order */
        ASSERT_EQ(c[i].cookie, 1000 + (uint64_t)i);
        ASSERT_EQ(c[i].status, TE_OK);
    }
    /* 20 WRs, every 8th and the last: 3 signalled, one post. */
    fake_verbs_get_stats(&a);
    ASSERT_EQ(te_submit(r.t, r.path, rs, 20), 20);
    fake_verbs_get_stats(&b);
    ASSERT_EQ(b.post_calls - a.post_calls, 1);
    ASSERT_EQ(b.wrs_signalled - a.wrs_signalled, 2);    /* 16th and 20th (last) */
    ASSERT_EQ(drain(&r, c, 20), 20);
    ASSERT_EQ(c[19].cookie, 1019);
    ASSERT_EQ(te_poll(r.t, c, 8, 0), 0);
    rig_down(&r);
}

static void test_slices_spread_over_qps(void) {
    rig r;
    ASSERT(rig_up(&r, 2, 32, 4) == 0);
    te_req rs[16];
    for (int i = 0; i < 16; i++) rs[i] = req(&r, TE_WRITE, (size_t)i * 512, (uint64_t)i * 512, 512, (uint64_t)i);
    int before = fake_verbs_wr_count();
    ASSERT_EQ(te_submit(r.t, r.path, rs, 16), 16);
    te_cqe c[16];
    ASSERT_EQ(drain(&r, c, 16), 16);
    uint64_t seen = 0;
    for (int i = 0; i < 16; i++) seen |= 1ull << c[i].cookie;
    ASSERT_EQ(seen, 0xffff);
    /* Round robin over 2 QPs on different ports: 8 WRs each. */
    fake_wr first, w;
    ASSERT(fake_verbs_wr_at(before, &first) == 0);
    int same = 0;
    for (int i = 0; i < 16; i++) {
        ASSERT(fake_verbs_wr_at(before + i, &w) == 0);
        if (w.qpn == first.qpn) { same++; ASSERT_EQ(w.lkey, first.lkey); }
        else ASSERT(w.lkey != first.lkey);
    }
    ASSERT_EQ(same, 8);
    rig_down(&r);
}

static void test_wc_error_fails_requests_and_reestablishes(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    te_req rs[10];
    for (int i = 0; i < 10; i++) rs[i] = req(&r, TE_WRITE, 0, (uint64_t)i * 64, 64, 100 + (uint64_t)i);
    te_cqe c[16];
    ASSERT_EQ(te_submit(r.t, r.path, rs, 1), 1);        /* open the right first */
    ASSERT_EQ(drain(&r, c, 1), 1);
    fake_verbs_stats a, b;
    fake_verbs_get_stats(&a);
    fake_verbs_fail_nth_wr(3, IBV_WC_RETRY_EXC_ERR);
    ASSERT_EQ(te_submit(r.t, r.path, rs, 10), 10);
    ASSERT_EQ(drain(&r, c, 10), 10);
    int eio = 0;
    for (int i = 0; i < 10; i++) eio += c[i].status == TE_EIO;
    ASSERT_EQ(eio, 10);    /* none signalled before the error: all fail over */
    /* The next use brings a new QP up and works. */
    ASSERT_EQ(te_submit(r.t, r.path, rs, 2), 2);
    ASSERT_EQ(drain(&r, c, 2), 2);
    ASSERT_EQ(c[0].status, TE_OK);
    ASSERT_EQ(c[1].status, TE_OK);
    fake_verbs_get_stats(&b);
    ASSERT_EQ(b.qps_created - a.qps_created, 2);        /* client + node side */
    ASSERT_EQ(te_poll(r.t, c, 16, 0), 0);
    rig_down(&r);
    ASSERT_EQ(live_objects(), 0);
}

static void test_broken_qp_recovers(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    te_req q = req(&r, TE_READ, 0, 0, 128, 1);
    te_cqe c[4];
    int before = fake_verbs_wr_count();
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    fake_wr fw;
    ASSERT(fake_verbs_wr_at(before, &fw) == 0);
    ASSERT_EQ(fake_verbs_break_qp(fw.qpn), 0);
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);        /* flushed by the broken QP */
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_EIO);
    ASSERT_EQ(fake_verbs_qp_state(fw.qpn), -1);         /* destroyed */
    q.cookie = 2;
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].cookie, 2);
    ASSERT_EQ(c[0].status, TE_OK);
    rig_down(&r);
}

static void test_bounds_and_caps(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    te_cqe c[4];
    te_req q = req(&r, TE_WRITE, 0, SEG_LEN - 10, 64, 1);   /* past the segment */
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_ERANGE);
    q = req(&r, TE_WRITE, BUF_LEN - 10, 0, 64, 2);          /* local past its MR */
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_EINVAL);
    te_cap small = {.node_id = 7, .rights = TE_CAP_READ, .offset = 4096, .length = 4096,
                    .expiry_ms = wall_ms() + 60000};
    te_cap_sign(&small, KEY);
    q = req(&r, TE_READ, 0, 8000, 512, 3);                  /* outside the capability */
    q.cap = &small;
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_ERANGE);
    q = req(&r, TE_WRITE, 0, 4096, 512, 4);                 /* read-only capability */
    q.cap = &small;
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_EAUTH);
    te_cap forged = r.cap;
    forged.mac[0] ^= 1;                                     /* the node checks the MAC */
    q = req(&r, TE_READ, 0, 0, 512, 5);
    q.cap = &forged;
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_EAUTH);
    fake_verbs_stats st;
    fake_verbs_get_stats(&st);
    ASSERT_EQ(st.wrs_posted, 0);                            /* nothing reached the NIC */
    /* Read-only grant: the node's QP opens REMOTE_READ only. */
    q = req(&r, TE_READ, 0, 4096, 512, 6);
    q.cap = &small;
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_OK);
    rig_down(&r);
}

static void test_wrong_secret_refused(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    te_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.secret, sizeof cfg.secret, "wrong");
    char err[256];
    te_transport *t2 = rdma_transport_create_ex(&cfg, &r.o, &verbs_fake_ops, err, sizeof err);
    ASSERT(t2 != NULL);
    te_path *p;
    int rc = te_connect(t2, NULL, r.addr, &p, err, sizeof err);
    t2->ops->destroy(t2);
    ASSERT_EQ(rc, -1);
    ASSERT(strstr(err, "authentication") != NULL);
    ASSERT_EQ(rdma_node_qp_count(r.node), 1);              /* only the rig's own QP */
    rig_down(&r);
}

static void *progress_later(void *arg) {
    usleep(50000);
    fake_verbs_progress();
    return NULL;
}

static void test_sleeps_on_channel_when_idle(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    te_cqe c[4];
    uint64_t t0 = mono_ms();
    ASSERT_EQ(te_poll(r.t, c, 4, 60), 0);                  /* idle: waits, returns none */
    ASSERT(mono_ms() - t0 >= 55);
    fake_verbs_set_deferred(1);
    te_req q = req(&r, TE_WRITE, 0, 0, 256, 77);
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    fake_verbs_stats a, b;
    fake_verbs_get_stats(&a);
    pthread_t th;
    pthread_create(&th, NULL, progress_later, NULL);
    ASSERT_EQ(te_poll(r.t, c, 4, 2000), 1);                /* woken by the channel */
    pthread_join(th, NULL);
    fake_verbs_get_stats(&b);
    ASSERT_EQ(c[0].cookie, 77);
    ASSERT_EQ(c[0].status, TE_OK);
    ASSERT(b.notify_events > a.notify_events);
    /* Close with a request in flight: it completes TE_ECLOSED. */
    q.cookie = 78;
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    r.t->ops->close(r.path);
    ASSERT_EQ(te_poll(r.t, c, 4, 0), 1);
    ASSERT_EQ(c[0].cookie, 78);
    ASSERT_EQ(c[0].status, TE_ECLOSED);
    fake_verbs_set_deferred(0);
    fake_verbs_progress();
    rig_down(&r);
    ASSERT_EQ(live_objects(), 0);
}

static void test_window_bounds_submit(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    fake_verbs_set_deferred(1);
    static te_req rs[200];
    for (int i = 0; i < 200; i++) rs[i] = req(&r, TE_READ, 0, 0, 64, (uint64_t)i);
    ASSERT_EQ(te_submit(r.t, r.path, rs, 200), 128);       /* window 128 */
    ASSERT_EQ(te_submit(r.t, r.path, rs, 1), 0);
    fake_verbs_progress();
    static te_cqe c[200];
    ASSERT_EQ(drain(&r, c, 128), 128);
    fake_verbs_stats st;
    fake_verbs_get_stats(&st);
    ASSERT_EQ(st.cq_overflows, 0);
    fake_verbs_set_deferred(0);
    rig_down(&r);
}

static void test_silent_peer_times_out(void) {
    rig r;
    ASSERT(rig_up(&r, 1, 32, 16) == 0);
    r.t->cfg.timeout_ms = 50;
    te_req q = req(&r, TE_WRITE, 0, 0, 64, 5);
    te_cqe c[2];
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);        /* open the right */
    ASSERT_EQ(drain(&r, c, 1), 1);
    fake_verbs_set_deferred(1);                          /* the NIC never answers */
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);
    uint64_t t0 = mono_ms();
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_ETIMEDOUT);
    ASSERT(mono_ms() - t0 < 1000);
    fake_verbs_set_deferred(0);
    ASSERT_EQ(te_submit(r.t, r.path, &q, 1), 1);        /* a new QP serves again */
    ASSERT_EQ(drain(&r, c, 1), 1);
    ASSERT_EQ(c[0].status, TE_OK);
    rig_down(&r);
    ASSERT_EQ(live_objects(), 0);
}

int main(void) {
    RUN_TEST(test_no_device_reports_and_refuses);
    RUN_TEST(test_put_get_maps_to_wrs);
    RUN_TEST(test_batching_and_selective_signalling);
    RUN_TEST(test_slices_spread_over_qps);
    RUN_TEST(test_wc_error_fails_requests_and_reestablishes);
    RUN_TEST(test_broken_qp_recovers);
    RUN_TEST(test_bounds_and_caps);
    RUN_TEST(test_wrong_secret_refused);
    RUN_TEST(test_sleeps_on_channel_when_idle);
    RUN_TEST(test_window_bounds_submit);
    RUN_TEST(test_silent_peer_times_out);
    TEST_EXIT();
}
