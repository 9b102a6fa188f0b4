/* The transfer engine over real in-process nodes, once per transport:
 * each row of `fixtures` says how to make a client transport and how to
 * start/stop/disturb a node for it, and every case runs over every row. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cap.h"
#include "backend/engine.h"
#include "backend/shm_handoff.h"
#include "backend/shm_transport.h"
#include "backend/stream_server.h"
#include "backend/tcp_transport.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "rdma/rdma_node.h"
#include "rdma/rdma_transport.h"
#include "support/verbs_fake.h"
#include "test.h"

#define SEG_SIZE (72ULL << 20)
#define NNODES 3
#define SECRET "engine-secret"
/* Requests, connects and handshakes. A node's payload bound stays at its
 * default (10 s), below the requests': a payload stuck on a node is
 * dropped there and retried before the client gives up on it. */
#define RIG_TIMEOUT_MS 30000

/* Under TSan the three large cases move a quarter of the bytes (16 MiB
 * striped, 16 MiB failover read, 8 MiB retried): the same nodes, paths,
 * threads and 16 or more units in flight, and the disturbance still lands
 * mid-read (a TSan read of 16 MiB takes about a second); only the byte
 * loops shrink, which were most of TSan's CPU here (64 MiB took 5-8 s per
 * case and transport). The plain and ASan builds keep the full sizes. */
#if defined(__SANITIZE_THREAD__)
#define BIG_DIV 4
#else
#define BIG_DIV 1
#endif

static const uint8_t KEY[TE_CAP_KEY_LEN] = "engine-test-key";

typedef struct node {
    uint32_t id;
    char *seg;
    int seg_fd;               /* shm row: the memfd behind seg */
    void *srv;
    char addrs[2][TE_ADDR_LEN];
} node;

typedef struct fixture {
    const char *name;
    te_transport *(*make)(const te_config *cfg, char *err, size_t errlen);
    int (*start)(node *n);       /* fills n->srv and n->addrs */
    void (*stop)(node *n);
    void (*drop_path)(node *n);  /* break the connections of one address */
    int memfd;                   /* segments must be shareable memfds */
    int (*leftovers)(void);      /* objects still alive after rig_down, or NULL */
    int shm_mode;                /* te_config.shm_mode (shm rows) */
    int client_checks_only;      /* no node sees the requests (shm map): a MAC is never checked */
} fixture;

/* ---- TCP row ---- */

static int tcp_start(node *n) {
    char err[256];
    te_server_config sc = { .base = n->seg, .size = SEG_SIZE, .node_id = n->id, .nlisten = 2,
                            .have_cap_key = 1, .auth_timeout_ms = RIG_TIMEOUT_MS };
    memcpy(sc.cap_key, KEY, sizeof KEY);
    snprintf(sc.secret, sizeof sc.secret, SECRET);
    snprintf(sc.listen[0], TE_ADDR_LEN, "127.0.0.1:0");
    snprintf(sc.listen[1], TE_ADDR_LEN, "127.0.0.1:0");
    te_stream_server *s = te_stream_server_start(&sc, err, sizeof err);
    if (!s) { printf("# %s\n", err); return -1; }
    for (int i = 0; i < 2; i++)
        snprintf(n->addrs[i], TE_ADDR_LEN, "127.0.0.1:%d", te_stream_server_port(s, i));
    n->srv = s;
    return 0;
}
static void tcp_stop(node *n) { te_stream_server_stop(n->srv); n->srv = NULL; }
static void tcp_drop(node *n) { te_stream_server_drop_conns(n->srv, 0, 0); }

/* ---- shm row: the same server, segment in a memfd, two connections
 * to its unix socket as the node's two paths ---- */

static int shm_start(node *n) {
    char err[256];
    te_server_config sc = { .base = n->seg, .size = SEG_SIZE, .node_id = n->id, .nlisten = 1,
                            .have_cap_key = 1, .seg_fd = n->seg_fd, .auth_timeout_ms = RIG_TIMEOUT_MS };
    memcpy(sc.cap_key, KEY, sizeof KEY);
    snprintf(sc.secret, sizeof sc.secret, SECRET);
    snprintf(sc.listen[0], TE_ADDR_LEN, "127.0.0.1:0");
    snprintf(sc.shm_path, sizeof sc.shm_path, "@moonkv-test-engine-%d-%u", (int)getpid(), n->id);
    te_stream_server *s = te_stream_server_start(&sc, err, sizeof err);
    if (!s) { printf("# %s\n", err); return -1; }
    for (int i = 0; i < 2; i++) snprintf(n->addrs[i], TE_ADDR_LEN, "unix:%s", sc.shm_path);
    n->srv = s;
    return 0;
}
static void shm_drop(node *n) { te_stream_server_drop_conns(n->srv, 1, 1); }

/* ---- rdma row: the verbs transport over the software NIC
 * (tests/support/verbs_fake.h); QP set-up runs over real TCP, and the
 * node's two paths both go to its one set-up address ---- */

/* Called first by rig_up: each rig gets a fresh fake world (2 devices,
 * one port each), the previous rig having destroyed all its objects. */
static te_transport *rdma_make(const te_config *cfg, char *err, size_t errlen) {
    fake_verbs_reset(2, 1);
    return rdma_transport_create_ex(cfg, NULL, &verbs_fake_ops, err, errlen);
}

static int rdma_start(node *n) {
    char err[256];
    rdma_node_config nc;
    rdma_node_config_default(&nc);
    snprintf(nc.listen, sizeof nc.listen, "127.0.0.1:0");
    snprintf(nc.secret, sizeof nc.secret, SECRET);
    memcpy(nc.cap_key, KEY, sizeof KEY);
    nc.node_id = n->id;
    nc.timeout_ms = RIG_TIMEOUT_MS;
    rdma_node *rn = rdma_node_export(&nc, n->seg, SEG_SIZE, &verbs_fake_ops, err, sizeof err);
    if (!rn) { printf("# %s\n", err); return -1; }
    for (int i = 0; i < 2; i++)
        snprintf(n->addrs[i], TE_ADDR_LEN, "127.0.0.1:%d", rdma_node_port(rn));
    n->srv = rn;
    return 0;
}
static void rdma_stop(node *n) { rdma_node_destroy(n->srv); n->srv = NULL; }

/* There is no connection to cut: break the live QP that last carried a WR
 * into this node's segment, as a failing link would on a real NIC; its
 * in-flight WRs flush with errors and its next post fails. */
static void rdma_drop(node *n) {
    uintptr_t lo = (uintptr_t)n->seg, hi = lo + SEG_SIZE;
    fake_wr w;
    for (int i = fake_verbs_wr_count() - 1; i >= 0 && fake_verbs_wr_at(i, &w) == 0; i--)
        if (w.remote_addr >= lo && w.remote_addr < hi && fake_verbs_break_qp(w.qpn) == 0) return;
}

/* Verbs objects (contexts, PDs, MRs, CQs, QPs) nobody destroyed. */
static int rdma_leftovers(void) {
    fake_verbs_stats st;
    fake_verbs_get_stats(&st);
    return st.live_objects;
}

static const fixture fixtures[] = {
    { "tcp", te_tcp_create, tcp_start, tcp_stop, tcp_drop, 0, NULL, 0, 0 },
    { "shm", te_shm_create, shm_start, tcp_stop, shm_drop, 1, NULL, TE_SHM_MAP, 1 },
    { "shm-fd", te_shm_create, shm_start, tcp_stop, shm_drop, 1, NULL, TE_SHM_FD, 0 },
    { "rdma", rdma_make, rdma_start, rdma_stop, rdma_drop, 0, rdma_leftovers, 0, 0 },
};

/* ---- the rig: nodes + engine ---- */

typedef struct rig {
    const fixture *fx;
    node nodes[NNODES];
    te_engine *e;
} rig;

static const fixture *FX;
static int STREAMS = 1;   /* te_engine_config.streams for the next rig */

static int rig_up(rig *r, uint64_t unit) {
    char err[256];
    memset(r, 0, sizeof *r);
    r->fx = FX;
    /* Generous bounds: no case waits for one to expire (a stopped node
     * closes its sockets), and a 64 MiB request under TSan on a loaded
     * machine passed the default 5 s (TE_ETIMEDOUT in test_stripe_64mib
     * and test_read_failover). */
    te_config cfg = { .timeout_ms = RIG_TIMEOUT_MS, .connect_timeout_ms = RIG_TIMEOUT_MS, .shm_mode = FX->shm_mode };
    snprintf(cfg.secret, sizeof cfg.secret, SECRET);
    te_transport *t = r->fx->make(&cfg, err, sizeof err);
    if (!t) { printf("# %s\n", err); return -1; }
    te_engine_config ec = { .unit_size = unit, .streams = STREAMS };
    r->e = te_engine_create(t, &ec);
    for (int i = 0; i < NNODES; i++) {
        node *n = &r->nodes[i];
        n->id = (uint32_t)i + 1;
        n->seg_fd = -1;
        if (r->fx->memfd) {
            void *base;
            if (te_shm_segment_create(SEG_SIZE, 0, &base, &n->seg_fd, err, sizeof err) != 0) return -1;
            n->seg = base;
        } else {
            n->seg = xcalloc(1, SEG_SIZE);
        }
        if (r->fx->start(n) != 0) return -1;
        const char *a[2] = { n->addrs[0], n->addrs[1] };
        if (te_engine_add_node(r->e, n->id, a, 2, err, sizeof err) != TE_OK) return -1;
    }
    return 0;
}

/* Returns how many transport objects outlived the rig (0 = clean). */
static int rig_down(rig *r) {
    te_engine_destroy(r->e);
    for (int i = 0; i < NNODES; i++) {
        node *n = &r->nodes[i];
        if (n->srv) r->fx->stop(n);
        if (n->seg_fd >= 0) {
            munmap(n->seg, SEG_SIZE);
            close(n->seg_fd);
        } else {
            free(n->seg);
        }
    }
    return r->fx->leftovers ? r->fx->leftovers() : 0;
}

static te_extent extent(uint32_t node, uint64_t off, uint64_t len) {
    te_extent x = { .node_id = node, .offset = off, .length = len,
                    .cap = { .node_id = node, .rights = TE_CAP_READ | TE_CAP_WRITE, .offset = off,
                             .length = len, .expiry_ms = wall_ms() + 600000, .issued_us = wall_ms() * 1000 } };
    te_cap_sign(&x.cap, KEY);
    return x;
}

static char *pattern(uint64_t n, unsigned seed) {
    char *p = xmalloc(n);
    for (uint64_t i = 0; i < n; i++) p[i] = (char)(seed * 7 + i * 131 + (i >> 13));
    return p;
}

/* 64 MiB (TSan: 16) striped over 3 nodes (2 paths each), one replica. */
static void test_stripe_64mib(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 0) == 0);
    uint64_t n = (64ULL << 20) / BIG_DIV, a = (20ULL << 20) / BIG_DIV, b = (24ULL << 20) / BIG_DIV;
    te_extent x[3] = { extent(1, 4096, a), extent(2, 0, b), extent(3, 1 << 20, n - a - b) };
    te_replica rep = { x, 3 };
    char *src = pattern(n, 1), *dst = xcalloc(1, n);
    uint64_t t0 = mono_us();
    ASSERT_EQ(te_engine_write(r.e, src, n, &rep, 1, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(r.nodes[0].seg + 4096, src, a);
    ASSERT_MEMEQ(r.nodes[1].seg, src + a, b);
    ASSERT_MEMEQ(r.nodes[2].seg + (1 << 20), src + a + b, n - a - b);
    ASSERT_EQ(te_engine_read(r.e, dst, n, &rep, 1, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(dst, src, n);
    printf("# %s: %llu MiB write+read striped in %.0f ms\n", r.fx->name, (unsigned long long)(n >> 20),
           (mono_us() - t0) / 1000.0);
    te_engine_stats st;
    te_engine_get_stats(r.e, &st);
    ASSERT_EQ(st.bytes, 2 * n);
    ASSERT(st.units >= 2 * n / TE_UNIT_DEFAULT);
    free(src);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

/* Two replicas with different extent cuts: both written, reads spread. */
static void test_replicas_spread(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 256 << 10) == 0);
    uint64_t n = (8 << 20) + 123;
    te_extent x1[1] = { extent(1, 0, n) };
    te_extent x2[2] = { extent(2, 777, 3 << 20), extent(3, 0, n - (3 << 20)) };
    te_replica reps[2] = { { x1, 1 }, { x2, 2 } };
    char *src = pattern(n, 2), *dst = xcalloc(1, n);
    ASSERT_EQ(te_engine_write(r.e, src, n, reps, 2, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(r.nodes[0].seg, src, n);
    ASSERT_MEMEQ(r.nodes[1].seg + 777, src, 3 << 20);
    ASSERT_EQ(te_engine_read(r.e, dst, n, reps, 2, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(dst, src, n);
    free(src);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

typedef struct later { rig *r; int node; int ms; int drop; } later;

static void *disturb_later(void *arg) {
    later *l = arg;
    usleep((useconds_t)l->ms * 1000);
    if (l->drop) l->r->fx->drop_path(&l->r->nodes[l->node]);
    else l->r->fx->stop(&l->r->nodes[l->node]);
    return NULL;
}

static void test_read_failover(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 512 << 10) == 0);
    uint64_t n = (64ULL << 20) / BIG_DIV;
    te_extent x1[1] = { extent(1, 0, n) }, x2[1] = { extent(2, 0, n) };
    te_replica reps[2] = { { x1, 1 }, { x2, 1 } };
    char *src = pattern(n, 3), *dst = xcalloc(1, n);
    ASSERT_EQ(te_engine_write(r.e, src, n, reps, 2, err, sizeof err), TE_OK);
    /* Node 1 dies while the read is in progress. */
    later l = { &r, 0, 5, 0 };
    pthread_t th;
    pthread_create(&th, NULL, disturb_later, &l);
    int rc = te_engine_read(r.e, dst, n, reps, 2, err, sizeof err);
    pthread_join(th, NULL);
    ASSERT_MSG(rc == TE_OK, "read: %s", err);
    ASSERT_MEMEQ(dst, src, n);
    /* With node 1 gone for good, reads still succeed from node 2 ... */
    memset(dst, 0, n);
    ASSERT_EQ(te_engine_read(r.e, dst, n, reps, 2, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(dst, src, n);
    te_engine_stats st;
    te_engine_get_stats(r.e, &st);
    ASSERT(st.failovers > 0);
    /* ... but a write needing node 1 fails with a clear error. */
    te_extent y1[1] = { extent(1, 0, 1 << 20) }, y2[1] = { extent(2, 0, 1 << 20) };
    te_replica small[2] = { { y1, 1 }, { y2, 1 } };
    rc = te_engine_write(r.e, src, 1 << 20, small, 2, err, sizeof err);
    ASSERT_MSG(rc == TE_EIO, "rc %d: %s", rc, err);
    ASSERT(strstr(err, "node 1") != NULL);
    free(src);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

static void test_unit_retry_on_broken_path(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 256 << 10) == 0);
    uint64_t n = (32ULL << 20) / BIG_DIV;
    te_extent x[1] = { extent(1, 0, n) };
    te_replica rep = { x, 1 };
    char *src = pattern(n, 4), *dst = xcalloc(1, n);
    ASSERT_EQ(te_engine_write(r.e, src, n, &rep, 1, err, sizeof err), TE_OK);
    for (int round = 0; round < 2; round++) {
        later l = { &r, 0, 3, 1 };
        pthread_t th;
        pthread_create(&th, NULL, disturb_later, &l);
        memset(dst, 0, n);
        int rc = te_engine_read(r.e, dst, n, &rep, 1, err, sizeof err);
        pthread_join(th, NULL);
        ASSERT_MSG(rc == TE_OK, "read: %s", err);
        ASSERT_MEMEQ(dst, src, n);
    }
    /* The drop landed during or between reads: either way units were
     * retried on the node's other path, and no replica was needed. */
    memset(dst, 0, n);
    int rc = te_engine_read(r.e, dst, n, &rep, 1, err, sizeof err);
    ASSERT_MSG(rc == TE_OK, "read: %s", err);
    ASSERT_MEMEQ(dst, src, n);
    te_engine_stats st;
    te_engine_get_stats(r.e, &st);
    ASSERT(st.retries > 0);
    ASSERT_EQ(st.failovers, 0);
    free(src);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

static void test_bad_cap_fails_over_or_fails(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 0) == 0);
    uint64_t n = 100000;
    te_extent good[1] = { extent(2, 0, n) }, bad[1] = { extent(1, 0, n) };
    /* Tampered after signing: where a node checks the MAC, a longer
     * range; shm map mode checks in the client, which sees expiry only. */
    if (FX->client_checks_only) bad[0].cap.expiry_ms = 1;
    else bad[0].cap.length = n * 2;
    te_replica reps[2] = { { bad, 1 }, { good, 1 } };
    char *src = pattern(n, 5), *dst = xcalloc(1, n);
    ASSERT_EQ(te_engine_write(r.e, src, n, reps, 2, err, sizeof err), TE_EAUTH);
    ASSERT_EQ(te_engine_write(r.e, src, n, reps + 1, 1, err, sizeof err), TE_OK);
    ASSERT_EQ(te_engine_read(r.e, dst, n, reps, 2, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(dst, src, n);
    ASSERT_EQ(te_engine_read(r.e, dst, n, reps, 1, err, sizeof err), TE_EAUTH);
    /* Placement that does not add up is refused before any I/O. */
    te_extent shortx[1] = { extent(2, 0, n - 1) };
    te_replica shortr = { shortx, 1 };
    ASSERT_EQ(te_engine_read(r.e, dst, n, &shortr, 1, err, sizeof err), TE_EINVAL);
    te_extent unknown[1] = { extent(9, 0, n) };
    te_replica ur = { unknown, 1 };
    ASSERT_EQ(te_engine_read(r.e, dst, n, &ur, 1, err, sizeof err), TE_EINVAL);
    ASSERT(strstr(err, "node 9") != NULL);
    free(src);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

/* Hundreds of KV blocks in one pass, registered buffer. */
static void test_batch(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 0) == 0);
    enum { N = 300, BLK = 16 << 10 };
    char *src = pattern((uint64_t)N * BLK, 6), *dst = xcalloc(N, BLK);
    ASSERT_EQ(te_engine_register_buffer(r.e, src, (size_t)N * BLK, err, sizeof err), TE_OK);
    ASSERT_EQ(te_engine_register_buffer(r.e, dst, (size_t)N * BLK, err, sizeof err), TE_OK);
    static te_extent x[N][2];
    static te_replica reps[N][2];
    te_object objs[N];
    for (int i = 0; i < N; i++) {
        x[i][0] = extent((uint32_t)(i % 3) + 1, (uint64_t)i * BLK, BLK);
        x[i][1] = extent((uint32_t)((i + 1) % 3) + 1, (32ULL << 20) + (uint64_t)i * BLK, BLK);
        reps[i][0] = (te_replica){ &x[i][0], 1 };
        reps[i][1] = (te_replica){ &x[i][1], 1 };
        objs[i] = (te_object){ .buf = src + (size_t)i * BLK, .len = BLK, .reps = reps[i], .nrep = 2 };
    }
    ASSERT_EQ(te_engine_write_batch(r.e, objs, N, err, sizeof err), TE_OK);
    for (int i = 0; i < N; i++) {
        ASSERT_EQ(objs[i].status, TE_OK);
        objs[i].buf = dst + (size_t)i * BLK;
    }
    ASSERT_EQ(te_engine_read_batch(r.e, objs, N, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(dst, src, (size_t)N * BLK);
    te_engine_unregister_buffer(r.e, src);
    te_engine_unregister_buffer(r.e, dst);
    free(src);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

/* Streams: each network address gets that many connections and units
 * spread over all of them; shm keeps one path per address. */
static void test_streams(void) {
    rig r;
    char err[256];
    STREAMS = 3;
    int up = rig_up(&r, 64 << 10);
    STREAMS = 1;
    ASSERT(up == 0);
    uint64_t n = 4 << 20;
    te_extent x[1] = { extent(1, 0, n) };
    te_replica rep = { x, 1 };
    char *src = pattern(n, 11), *dst = xcalloc(1, n);
    ASSERT_EQ(te_engine_write(r.e, src, n, &rep, 1, err, sizeof err), TE_OK);
    ASSERT_EQ(te_engine_read(r.e, dst, n, &rep, 1, err, sizeof err), TE_OK);
    ASSERT_MEMEQ(dst, src, n);
    if (strcmp(FX->name, "tcp") == 0) {
        te_server_stats st;
        te_stream_server_stats(r.nodes[0].srv, &st);
        /* 2 addresses x 3 streams: six connections to the node. */
        ASSERT_EQ(st.conns_accepted, 6);
    }
    free(src);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

/* An object over several 4 MiB slices, striped with cuts off the slice
 * ends and two replicas cut apart, written whole and in segments far
 * apart: where the paths sum what they send (TCP, shm by map) the
 * object's CRC and each slice's come from the units' sums (units cut at
 * the slices' ends), and they are the bytes' own; the nodes hold the
 * bytes exactly (read back whole and into the pieces). Rows that sum
 * nothing say so (crc_ok 0), and so do their slices. */
static void test_slice_sums(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 0) == 0);
    enum { SL = 4 << 20, PIECE = (16 << 10) + 3 };
    const uint64_t n = (10ULL << 20) + 5, a = (3ULL << 20) + 4096, b = (5ULL << 20) - 77;
    te_extent x0[3] = { extent(1, 0, a), extent(2, 0, b), extent(3, 0, n - a - b) };
    te_extent x1[2] = { extent(2, 16ULL << 20, 6ULL << 20), extent(3, 16ULL << 20, n - (6ULL << 20)) };
    te_replica reps[2] = { { x0, 3 }, { x1, 2 } };
    char *src = pattern(n, 8), *arena = pattern(2 * n + (1 << 20), 9), *dst = xcalloc(1, n);
    ASSERT_EQ(te_engine_register_buffer(r.e, src, n, err, sizeof err), TE_OK);
    ASSERT_EQ(te_engine_register_buffer(r.e, arena, 2 * n + (1 << 20), err, sizeof err), TE_OK);
    /* the same bytes as pieces of PIECE, every other one of the arena's */
    size_t np = (size_t)((n + PIECE - 1) / PIECE);
    struct iovec *iov = xcalloc(np, sizeof *iov);
    for (size_t i = 0; i < np; i++) {
        uint64_t off = (uint64_t)i * PIECE, len = n - off < PIECE ? n - off : PIECE;
        iov[i] = (struct iovec){ arena + 2 * off, (size_t)len };
        memcpy(iov[i].iov_base, src + off, len);
    }
    uint32_t want[3], got[3];
    for (int s = 0; s < 3; s++) {
        uint64_t off = (uint64_t)s * SL;
        want[s] = crc32c(0, src + off, n - off < SL ? n - off : SL);
    }
    int segs = te_engine_segments(r.e);
    for (int form = 0; form < 1 + segs; form++) {
        memset(got, 0, sizeof got);
        te_object o = { .buf = form ? NULL : src, .len = n, .iov = form ? iov : NULL, .niov = form ? (int)np : 0,
                        .reps = reps, .nrep = 2, .slice_size = SL, .slice_crc = got };
        ASSERT_EQ(te_engine_write_batch(r.e, &o, 1, err, sizeof err), TE_OK);
        ASSERT_EQ(o.status, TE_OK);
        if (strcmp(FX->name, "tcp") == 0) ASSERT_MSG(o.crc_ok, "form %d: TCP sums what it sends", form);
        ASSERT_EQ(o.slices_ok, o.crc_ok);
        printf("# %s, %s: summed on the way %d\n", FX->name, form ? "segments" : "whole", o.crc_ok);
        if (o.crc_ok) {
            ASSERT_EQ(o.crc, crc32c(0, src, n));
            for (int s = 0; s < 3; s++) ASSERT_MSG(got[s] == want[s], "form %d slice %d", form, s);
        }
        for (int rep = 0; rep < 2; rep++) {
            memset(dst, 0, n);
            te_object rd = { .buf = dst, .len = n, .reps = &reps[rep], .nrep = 1 };
            ASSERT_EQ(te_engine_read_batch(r.e, &rd, 1, err, sizeof err), TE_OK);
            ASSERT_MEMEQ(dst, src, n);
        }
    }
    if (segs) {   /* and read back into the pieces (cleared first) */
        for (size_t i = 0; i < np; i++) memset(iov[i].iov_base, 0, iov[i].iov_len);
        te_object rd = { .len = n, .iov = iov, .niov = (int)np, .reps = &reps[1], .nrep = 1 };
        ASSERT_EQ(te_engine_read_batch(r.e, &rd, 1, err, sizeof err), TE_OK);
        int same = 1;
        for (size_t i = 0; i < np && same; i++) same = !memcmp(iov[i].iov_base, src + (uint64_t)i * PIECE, iov[i].iov_len);
        ASSERT_MSG(same, "read back into the pieces");
    }
    te_engine_unregister_buffer(r.e, src);
    te_engine_unregister_buffer(r.e, arena);
    free(iov);
    free(src);
    free(arena);
    free(dst);
    ASSERT_EQ(rig_down(&r), 0);
}

/* RUN_TEST with the row in the name ("test_batch/rdma"), so a failure
 * says which transport it happened on. */
#define RUN_ROW_TEST(fn) do { \
    char name_[96]; \
    snprintf(name_, sizeof name_, "%s/%s", #fn, FX->name); \
    RUN_TEST_NAMED(fn, name_); \
} while (0)

int main(void) {
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        FX = &fixtures[i];
        printf("# transport %s\n", FX->name);
        RUN_ROW_TEST(test_stripe_64mib);
        RUN_ROW_TEST(test_replicas_spread);
        RUN_ROW_TEST(test_read_failover);
        RUN_ROW_TEST(test_unit_retry_on_broken_path);
        RUN_ROW_TEST(test_bad_cap_fails_over_or_fails);
        RUN_ROW_TEST(test_batch);
        RUN_ROW_TEST(test_streams);
        RUN_ROW_TEST(test_slice_sums);
    }
    TEST_EXIT();
}
