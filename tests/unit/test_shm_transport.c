/* Shared-memory transport against the node server's unix-socket hand-off,
 * in both modes: the client's mapping of the segment (map) and pread/
 * pwrite with the node verifying each request (fd). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cap.h"
#include "backend/shm_handoff.h"
#include "backend/shm_transport.h"
#include "backend/stream_server.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "test.h"
#include "transports/registry.h"

#define SEG_SIZE (72ULL << 20)
#define SECRET "shm-secret"

static const uint8_t KEY[TE_CAP_KEY_LEN] = "shm-test-cap-key";

typedef struct rig {
    void *seg;
    int seg_fd;
    te_stream_server *srv;
    te_transport *t;
    te_path *p;
    char *buf;
    te_mr *mr;
    char addr[TE_ADDR_LEN];
} rig;

static te_cap cap_for(uint32_t node, uint64_t off, uint64_t len, uint32_t rights, uint64_t expiry) {
    te_cap c = { .node_id = node, .rights = rights, .offset = off, .length = len, .expiry_ms = expiry,
                 .issued_us = wall_ms() * 1000 };
    te_cap_sign(&c, KEY);
    return c;
}
static te_cap rw(uint64_t off, uint64_t len) {
    return cap_for(5, off, len, TE_CAP_READ | TE_CAP_WRITE, wall_ms() + 60000);
}

/* warm_mbps: te_config.shm_warm_mbps (0: the default rate). */
static int rig_up_warming(rig *r, const char *secret, int mode, int warm_mbps) {
    char err[256];
    memset(r, 0, sizeof *r);
    if (te_shm_segment_create(SEG_SIZE, 0, &r->seg, &r->seg_fd, err, sizeof err) != 0) return -1;
    te_server_config sc = { .base = r->seg, .size = SEG_SIZE, .node_id = 5, .nlisten = 1,
                            .have_cap_key = 1, .seg_fd = r->seg_fd };
    memcpy(sc.cap_key, KEY, sizeof KEY);
    snprintf(sc.secret, sizeof sc.secret, SECRET);
    snprintf(sc.listen[0], TE_ADDR_LEN, "127.0.0.1:0");
    snprintf(sc.shm_path, sizeof sc.shm_path, "@moonkv-test-shm-%d", (int)getpid());
    snprintf(r->addr, sizeof r->addr, "unix:%s", sc.shm_path);
    r->srv = te_stream_server_start(&sc, err, sizeof err);
    if (!r->srv) { printf("# %s\n", err); return -1; }
    te_config cfg = { .shm_mode = mode, .shm_warm_mbps = warm_mbps };
    snprintf(cfg.secret, sizeof cfg.secret, "%s", secret);
    r->t = te_transport_create("shm", &cfg, err, sizeof err);
    r->buf = xmalloc(SEG_SIZE);
    r->t->ops->reg_mem(r->t, r->buf, SEG_SIZE, &r->mr, err, sizeof err);
    if (te_connect(r->t, NULL, r->addr, &r->p, err, sizeof err) != 0) {
        printf("# %s\n", err);
        return -2;
    }
    return 0;
}

/* Map mode: waits (bounded) until the whole mapping is warm, so every
 * transfer goes through it. */
static int wait_warm(rig *r) {
    for (int i = 0; i < 3000 && te_shm_path_cold_bytes(r->p) > 0; i++) usleep(10000);
    return te_shm_path_cold_bytes(r->p) == 0;
}

static int rig_up(rig *r, const char *secret, int mode) {
    int rc = rig_up_warming(r, secret, mode, 0);
    return rc == 0 && mode == TE_SHM_MAP && !wait_warm(r) ? -3 : rc;
}

static void rig_down(rig *r) {
    r->t->ops->destroy(r->t);
    if (r->srv) te_stream_server_stop(r->srv);
    munmap(r->seg, SEG_SIZE);
    close(r->seg_fd);
    free(r->buf);
}

/* One request to completion; its completion in *out when out is given. */
static int run1_cqe(rig *r, te_op op, void *local, uint64_t off, uint64_t len, const te_cap *cap, te_cqe *out) {
    te_req q = { .op = op, .local = local, .remote_off = off, .len = len, .cap = cap, .cookie = 77 };
    int k = te_submit(r->t, r->p, &q, 1);
    if (k != 1) return 99 + k;
    te_cqe c;
    for (int i = 0; i < 1000; i++)
        if (te_poll(r->t, &c, 1, 10) == 1) {
            if (out) *out = c;
            return c.cookie == 77 ? c.status : 98;
        }
    return 97;
}

static int run1(rig *r, te_op op, void *local, uint64_t off, uint64_t len, const te_cap *cap) {
    return run1_cqe(r, op, local, off, len, cap, NULL);
}

static const char *mode_name(int mode) { return mode == TE_SHM_MAP ? "map" : "fd"; }

/* Byte-exact both ways at unaligned offsets and sizes; in map mode every
 * completion carries the CRC32C of the bytes it moved, in fd mode none. */
static void roundtrip_sizes(int mode) {
    rig r;
    ASSERT(rig_up(&r, SECRET, mode) == 0);
    static const uint64_t sizes[] = { 1, 4095, 65536, (1 << 20) + 3, 5 << 20, 64ULL << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t n = sizes[i], off = 333 + i;
        te_cap c = rw(off, n);
        te_cqe wq, rq;
        for (uint64_t k = 0; k < n; k++) r.buf[k] = (char)(k * 7 + i);
        uint32_t want = crc32c(0, r.buf, n);
        ASSERT_EQ(run1_cqe(&r, TE_WRITE, r.buf, off, n, &c, &wq), TE_OK);
        ASSERT_MEMEQ((char *)r.seg + off, r.buf, n);
        memset(r.buf, 0, n);
        ASSERT_EQ(run1_cqe(&r, TE_READ, r.buf + 1, off, n, &c, &rq), TE_OK);
        ASSERT_MEMEQ((char *)r.seg + off, r.buf + 1, n);
        ASSERT_EQ(wq.has_crc, mode == TE_SHM_MAP);
        ASSERT_EQ(rq.has_crc, mode == TE_SHM_MAP);
        if (mode == TE_SHM_MAP) {
            ASSERT_MSG(wq.crc == want && rq.crc == want, "%s size %llu", mode_name(mode), (unsigned long long)n);
        }
    }
    rig_down(&r);
}

static void test_roundtrip_sizes_map(void) { roundtrip_sizes(TE_SHM_MAP); }
static void test_roundtrip_sizes_fd(void) { roundtrip_sizes(TE_SHM_FD); }

/* Map mode never asks the node: the data server sees no request. */
static void test_map_mode_no_node_trip(void) {
    rig r;
    ASSERT(rig_up(&r, SECRET, TE_SHM_MAP) == 0);
    te_cap c = rw(0, 1 << 20);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 0, 1 << 20, &c), TE_OK);
    ASSERT_EQ(run1(&r, TE_READ, r.buf, 0, 1 << 20, &c), TE_OK);
    te_server_stats st;
    te_stream_server_stats(r.srv, &st);
    ASSERT_EQ(st.requests, 0);
    rig_down(&r);
}

/* The client refuses, before any byte moves, a request its capability
 * does not allow: outside its range or the segment, without the right,
 * expired, for another node. In map mode that check is all there is (the
 * node cannot police a mapping), so a forged capability that passes it
 * is written: only fd mode, where the node checks the MAC, refuses it. */
static void cap_checks(int mode) {
    rig r;
    ASSERT(rig_up(&r, SECRET, mode) == 0);
    te_cap c = rw(4096, 4096);
    memset(r.buf, 'q', 8192);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 4000, 200, &c), TE_ERANGE);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, UINT64_MAX - 1, 4, &c), TE_ERANGE);
    te_cap ro = cap_for(5, 4096, 4096, TE_CAP_READ, wall_ms() + 60000);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 4096, 10, &ro), TE_EAUTH);
    te_cap old = cap_for(5, 4096, 4096, TE_CAP_WRITE, wall_ms() - 1);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 4096, 10, &old), TE_EAUTH);
    te_cap other = cap_for(6, 4096, 4096, TE_CAP_WRITE, wall_ms() + 60000);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 4096, 10, &other), TE_EAUTH);
    te_cap past = cap_for(5, SEG_SIZE - 8, 100, TE_CAP_WRITE, wall_ms() + 60000);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, SEG_SIZE - 8, 16, &past), TE_ERANGE);
    /* Forged: passes every key-less check, only the node can refuse it. */
    te_cap forged = c;
    forged.offset = 0;
    forged.length = 1 << 20;
    for (int i = 0; i < 8192; i++) ASSERT(((char *)r.seg)[i] == 0);   /* no refused write landed */
    if (mode == TE_SHM_FD) {
        ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 0, 8192, &forged), TE_EAUTH);
        for (int i = 0; i < 8192; i++) ASSERT(((char *)r.seg)[i] == 0);
    } else {
        ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 0, 8192, &forged), TE_OK);
        memset(r.seg, 0, 8192);
    }
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 4096, 4096, &c), TE_OK);
    ASSERT_MEMEQ((char *)r.seg + 4096, r.buf, 4096);
    rig_down(&r);
}

static void test_cap_checks_map(void) { cap_checks(TE_SHM_MAP); }
static void test_cap_checks_fd(void) { cap_checks(TE_SHM_FD); }

static void test_wrong_secret(void) {
    rig r;
    ASSERT_EQ(rig_up(&r, "not-the-secret", TE_SHM_MAP), -2);
    te_server_stats st;
    /* The client hangs up first; the server counts it a moment later. */
    for (int i = 0; i < 200; i++) {
        te_stream_server_stats(r.srv, &st);
        if (st.auth_failures) break;
        usleep(5000);
    }
    rig_down(&r);
    ASSERT(st.auth_failures >= 1);
    ASSERT_EQ(st.requests, 0);
}

/* FD mode: reads are verified by the node too, even though it moves no
 * byte: a forged read capability completes with the node's refusal. */
static void test_forged_read_refused(void) {
    rig r;
    ASSERT(rig_up(&r, SECRET, TE_SHM_FD) == 0);
    te_cap c = rw(8192, 8192);
    memset(r.buf, 'w', 8192);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 8192, 8192, &c), TE_OK);
    te_server_stats st0, st1;
    te_stream_server_stats(r.srv, &st0);
    memset(r.buf, 0, 8192);
    ASSERT_EQ(run1(&r, TE_READ, r.buf, 8192, 8192, &c), TE_OK);
    ASSERT(r.buf[0] == 'w' && r.buf[8191] == 'w');
    te_cap forged = c;
    forged.offset = 0;
    forged.length = 1 << 20;
    ASSERT_EQ(run1(&r, TE_READ, r.buf, 0, 4096, &forged), TE_EAUTH);
    te_stream_server_stats(r.srv, &st1);
    ASSERT_EQ(st1.requests, st0.requests + 2);
    rig_down(&r);
}

/* A fresh map-mode client's first transfers complete at once while the
 * mapping is still cold (warming at 1 MB/s would take over a minute):
 * they go the fd way, the node verifying each (a forged capability is
 * refused there), and carry no CRC. The chunk a transfer found cold is
 * warmed next, after which transfers to it go through the mapping (a
 * CRC, no node request) while the rest of the segment is still cold. */
static void test_cold_mapping_uses_fd(void) {
    rig r;
    ASSERT(rig_up_warming(&r, SECRET, TE_SHM_MAP, 1) == 0);
    const uint64_t off = 60ULL << 20, n = 1 << 20;
    te_cap c = rw(off, n);
    te_cqe q;
    for (uint64_t k = 0; k < n; k++) r.buf[k] = (char)(k * 5 + 1);
    ASSERT(te_shm_path_cold_bytes(r.p) > SEG_SIZE / 2);
    ASSERT_EQ(run1_cqe(&r, TE_WRITE, r.buf, off, n, &c, &q), TE_OK);
    ASSERT_EQ(q.has_crc, 0);
    ASSERT_MEMEQ((char *)r.seg + off, r.buf, n);
    te_server_stats st;
    te_stream_server_stats(r.srv, &st);
    ASSERT_EQ(st.requests, 1);
    te_cap forged = c;   /* passes the key-less checks; chunk 20 is still cold */
    forged.offset = 0;
    forged.length = SEG_SIZE;
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 40ULL << 20, 4096, &forged), TE_EAUTH);
    ASSERT(((char *)r.seg)[40ULL << 20] == 0);
    int mapped = 0;
    for (int i = 0; i < 1000 && !mapped; i++) {
        memset(r.buf + n, 0, n);
        ASSERT_EQ(run1_cqe(&r, TE_READ, r.buf + n, off, n, &c, &q), TE_OK);
        ASSERT_MEMEQ(r.buf + n, r.buf, n);
        mapped = q.has_crc;
        if (!mapped) usleep(20000);
    }
    ASSERT(mapped);
    ASSERT_EQ(q.crc, crc32c(0, r.buf, n));
    te_stream_server_stats(r.srv, &st);
    uint64_t before = st.requests;
    ASSERT_EQ(run1(&r, TE_READ, r.buf + n, off, n, &c), TE_OK);
    te_stream_server_stats(r.srv, &st);
    ASSERT_EQ(st.requests, before);
    ASSERT(te_shm_path_cold_bytes(r.p) > 0);
    rig_down(&r);   /* with the warmer still at work */
}

static void server_gone(int mode) {
    rig r;
    ASSERT(rig_up(&r, SECRET, mode) == 0);
    te_cap c = rw(0, 4096);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 0, 4096, &c), TE_OK);
    te_stream_server_stop(r.srv);
    r.srv = NULL;
    ASSERT_EQ(run1(&r, TE_READ, r.buf, 0, 4096, &c), TE_EIO);
    te_req q = { .op = TE_READ, .local = r.buf, .len = 1, .cap = &c };
    ASSERT_EQ(te_submit(r.t, r.p, &q, 1), -1);
    rig_down(&r);
}

/* A batch as the gateway's loop reads it: every value prefetched first
 * (a hint: it moves no byte, and one past the segment is ignored), then
 * read at once with the batch's one now_ms, byte-exact with its CRC32C.
 * In fd mode there is no mapping: the hint does nothing and read_now
 * refuses, so the caller submits as usual. */
static void read_now_batch(int mode) {
    rig r;
    ASSERT(rig_up(&r, SECRET, mode) == 0);
    enum { N = 64 };
    uint64_t off[N], len[N];
    te_cap caps[N];
    for (int i = 0; i < N; i++) {
        off[i] = (uint64_t)i * 40961 + (uint64_t)(i % 3) * 17;   /* spread over pages, some unaligned */
        len[i] = i % 8 == 7 ? 300 : 64;                           /* some past PREFETCH_MAX's lines */
        caps[i] = rw(off[i], len[i]);
        for (uint64_t k = 0; k < len[i]; k++) ((char *)r.seg)[off[i] + k] = (char)(k * 13 + i);
    }
    te_cap far = rw(0, SEG_SIZE);
    te_req past = { .op = TE_READ, .local = r.buf, .remote_off = SEG_SIZE - 16, .len = 64, .cap = &far };
    r.t->ops->prefetch(r.p, &past);
    te_req huge = { .op = TE_READ, .local = r.buf, .remote_off = UINT64_MAX - 8, .len = 64, .cap = &far };
    r.t->ops->prefetch(r.p, &huge);
    uint64_t now = wall_ms();
    te_req q[N];
    for (int i = 0; i < N; i++) {
        q[i] = (te_req){ .op = TE_READ, .local = r.buf + i * 512, .remote_off = off[i], .len = len[i],
                         .cap = &caps[i] };
        r.t->ops->prefetch(r.p, &q[i]);
    }
    for (int i = 0; i < N; i++) ASSERT(((char *)r.seg)[off[i]] == (char)i);   /* a hint moved nothing */
    memset(r.buf, 0, N * 512);
    for (int i = 0; i < N; i++) {
        uint32_t crc = 0;
        int st = r.t->ops->read_now(r.p, &q[i], now, &crc);
        if (mode == TE_SHM_FD) {
            ASSERT(st != TE_OK);
            continue;
        }
        ASSERT_EQ(st, TE_OK);
        ASSERT_MEMEQ(r.buf + i * 512, (char *)r.seg + off[i], len[i]);
        ASSERT_EQ(crc, crc32c(0, (char *)r.seg + off[i], len[i]));
    }
    rig_down(&r);
}

/* write_now: the same checks and copy the other way. A write its cap
 * does not allow (read-only, or for another node) is refused and leaves
 * the segment as it was; in fd mode nothing is written at once. */
static void write_now_checks(int mode) {
    rig r;
    ASSERT(rig_up(&r, SECRET, mode) == 0);
    enum { N = 16 };
    uint64_t now = wall_ms();
    for (int i = 0; i < N; i++) {
        uint64_t off = 8192 + (uint64_t)i * 4099, len = 1 + (uint64_t)i * 37;
        te_cap c = rw(off, len);
        for (uint64_t k = 0; k < len; k++) r.buf[k] = (char)(k * 3 + i + 1);
        te_req q = { .op = TE_WRITE, .local = r.buf, .remote_off = off, .len = len, .cap = &c };
        uint32_t crc = 0;
        int st = r.t->ops->write_now(r.p, &q, now, &crc);
        if (mode == TE_SHM_FD) {
            ASSERT(st != TE_OK);
            ASSERT(((char *)r.seg)[off] == 0);
            continue;
        }
        ASSERT_EQ(st, TE_OK);
        ASSERT_MEMEQ((char *)r.seg + off, r.buf, len);
        ASSERT_EQ(crc, crc32c(0, r.buf, len));
    }
    memset(r.buf, 'z', 64);
    te_cap ro = cap_for(5, 0, 64, TE_CAP_READ, wall_ms() + 60000);
    te_cap other = cap_for(6, 0, 64, TE_CAP_READ | TE_CAP_WRITE, wall_ms() + 60000);
    te_req q = { .op = TE_WRITE, .local = r.buf, .remote_off = 0, .len = 64, .cap = &ro };
    uint32_t crc;
    ASSERT(r.t->ops->write_now(r.p, &q, now, &crc) != TE_OK);
    q.cap = &other;
    ASSERT(r.t->ops->write_now(r.p, &q, now, &crc) != TE_OK);
    for (int i = 0; i < 64; i++) ASSERT(((char *)r.seg)[i] == 0);
    rig_down(&r);
}

static void test_write_now_map(void) { write_now_checks(TE_SHM_MAP); }
static void test_write_now_fd(void) { write_now_checks(TE_SHM_FD); }

static void test_read_now_batch_map(void) { read_now_batch(TE_SHM_MAP); }
static void test_read_now_batch_fd(void) { read_now_batch(TE_SHM_FD); }

static void test_server_gone_map(void) { server_gone(TE_SHM_MAP); }
static void test_server_gone_fd(void) { server_gone(TE_SHM_FD); }

int main(void) {
    RUN_TEST(test_roundtrip_sizes_map);
    RUN_TEST(test_roundtrip_sizes_fd);
    RUN_TEST(test_map_mode_no_node_trip);
    RUN_TEST(test_cap_checks_map);
    RUN_TEST(test_cap_checks_fd);
    RUN_TEST(test_wrong_secret);
    RUN_TEST(test_forged_read_refused);
    RUN_TEST(test_read_now_batch_map);
    RUN_TEST(test_read_now_batch_fd);
    RUN_TEST(test_write_now_map);
    RUN_TEST(test_write_now_fd);
    RUN_TEST(test_server_gone_map);
    RUN_TEST(test_server_gone_fd);
    RUN_TEST(test_cold_mapping_uses_fd);
    TEST_EXIT();
}
