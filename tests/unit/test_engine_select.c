/* The engine's per-node transport choice (te_engine_create_named): one
 * in-process node serves its memfd segment over TCP and over its unix
 * socket; the engine's per-transport byte counts say which one carried
 * the data. The machine has no RDMA device, so "auto" is TCP + shm. */
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
#include "core/util.h"
#include "test.h"
#include "transports/registry.h"

#define SEG_SIZE (8ULL << 20)
#define OBJ_SIZE (4ULL << 20)
#define SECRET "select-secret"

static const uint8_t KEY[TE_CAP_KEY_LEN] = "select-test-key";

typedef struct snode {
    void *seg;
    int seg_fd;
    te_stream_server *srv;
    char tcp[TE_ADDR_LEN];
    char shm[TE_ADDR_LEN];
} snode;

static int node_up(snode *n, uint32_t id) {
    char err[256];
    memset(n, 0, sizeof *n);
    if (te_shm_segment_create(SEG_SIZE, 0, &n->seg, &n->seg_fd, err, sizeof err) != 0) {
        printf("# %s\n", err);
        return -1;
    }
    te_server_config sc = { .base = n->seg, .size = SEG_SIZE, .node_id = id, .nlisten = 1,
                            .have_cap_key = 1, .seg_fd = n->seg_fd };
    memcpy(sc.cap_key, KEY, sizeof KEY);
    snprintf(sc.secret, sizeof sc.secret, SECRET);
    snprintf(sc.listen[0], TE_ADDR_LEN, "127.0.0.1:0");
    snprintf(sc.shm_path, sizeof sc.shm_path, "@moonkv-test-select-%d-%u", (int)getpid(), id);
    n->srv = te_stream_server_start(&sc, err, sizeof err);
    if (!n->srv) { printf("# %s\n", err); return -1; }
    snprintf(n->tcp, sizeof n->tcp, "127.0.0.1:%d", te_stream_server_port(n->srv, 0));
    snprintf(n->shm, sizeof n->shm, "unix:%s", sc.shm_path);
    return 0;
}

static void node_down(snode *n) {
    if (n->srv) te_stream_server_stop(n->srv);
    if (n->seg) munmap(n->seg, SEG_SIZE);
    if (n->seg_fd > 0) close(n->seg_fd);
}

static te_engine *engine(const char *mode) {
    char err[256];
    te_config cfg = { .timeout_ms = 5000 };
    snprintf(cfg.secret, sizeof cfg.secret, SECRET);
    te_engine *e = te_engine_create_named(mode, &cfg, NULL, err, sizeof err);
    if (!e) printf("# %s: %s\n", mode, err);
    return e;
}

/* Writes and reads back OBJ_SIZE bytes on node id through e; 0 if the
 * bytes came back exactly. */
static int round_trip_on(te_engine *e, uint32_t id) {
    char err[256];
    te_extent x = { .node_id = id, .offset = 4096, .length = OBJ_SIZE,
                    .cap = { .node_id = id, .rights = TE_CAP_READ | TE_CAP_WRITE, .offset = 4096,
                             .length = OBJ_SIZE, .expiry_ms = wall_ms() + 600000, .issued_us = wall_ms() * 1000 } };
    te_cap_sign(&x.cap, KEY);
    te_replica rep = { .ext = &x, .next = 1 };
    char *out = xmalloc(OBJ_SIZE), *in = xcalloc(1, OBJ_SIZE);
    for (uint64_t i = 0; i < OBJ_SIZE; i++) out[i] = (char)(i * 131 + 7);
    int rc = te_engine_write(e, out, OBJ_SIZE, &rep, 1, err, sizeof err);
    if (rc == TE_OK) rc = te_engine_read(e, in, OBJ_SIZE, &rep, 1, err, sizeof err);
    if (rc != TE_OK) printf("# %s\n", err);
    else if (memcmp(out, in, OBJ_SIZE) != 0) rc = TE_EIO;
    free(out);
    free(in);
    return rc;
}

static int round_trip(te_engine *e) { return round_trip_on(e, 1); }

static int add_as(te_engine *e, uint32_t id, const char *a0, const char *a1) {
    char err[256];
    const char *a[2] = { a0, a1 };
    int rc = te_engine_add_node(e, id, a, a1 ? 2 : 1, err, sizeof err);
    if (rc != TE_OK) printf("# add_node: %s\n", err);
    return rc;
}

static int add(te_engine *e, const char *a0, const char *a1) { return add_as(e, 1, a0, a1); }

/* auto, node on this host: everything over shm, nothing over TCP. */
static void test_auto_same_host_uses_shm(void) {
    snode n;
    ASSERT(node_up(&n, 1) == 0);
    te_engine *e = engine("auto");
    ASSERT(e != NULL);
    ASSERT_EQ(add(e, n.tcp, n.shm), TE_OK);
    ASSERT_EQ(round_trip(e), TE_OK);
    ASSERT_EQ(te_engine_bytes_via(e, "shm"), 2 * OBJ_SIZE);
    ASSERT_EQ(te_engine_bytes_via(e, "tcp"), 0);
    te_engine_destroy(e);
    node_down(&n);
}

/* auto, unix: address that nothing answers (another host's): TCP. */
static void test_auto_unreachable_shm_falls_back(void) {
    snode n;
    ASSERT(node_up(&n, 1) == 0);
    te_engine *e = engine("auto");
    ASSERT(e != NULL);
    char gone[TE_ADDR_LEN];
    snprintf(gone, sizeof gone, "unix:@moonkv-test-select-nobody-%d", (int)getpid());
    ASSERT_EQ(add(e, gone, n.tcp), TE_OK);
    ASSERT_EQ(round_trip(e), TE_OK);
    ASSERT_EQ(te_engine_bytes_via(e, "tcp"), 2 * OBJ_SIZE);
    ASSERT_EQ(te_engine_bytes_via(e, "shm"), 0);
    te_engine_destroy(e);
    node_down(&n);
}

/* auto, unix: address answered by another node of this host (socket
 * names carry a pid, which repeats across hosts): that hand-off is
 * refused and the node is reached over TCP. */
static void test_auto_wrong_node_on_socket_falls_back(void) {
    snode a, b;
    ASSERT(node_up(&a, 1) == 0);
    ASSERT(node_up(&b, 2) == 0);
    te_engine *e = engine("auto");
    ASSERT(e != NULL);
    ASSERT_EQ(add_as(e, 2, a.shm, b.tcp), TE_OK);
    ASSERT_EQ(round_trip_on(e, 2), TE_OK);
    ASSERT_EQ(te_engine_bytes_via(e, "tcp"), 2 * OBJ_SIZE);
    ASSERT_EQ(te_engine_bytes_via(e, "shm"), 0);
    te_engine_destroy(e);
    node_down(&a);
    node_down(&b);
}

/* Explicit modes keep to their own addresses. */
static void test_explicit_modes(void) {
    snode n;
    ASSERT(node_up(&n, 1) == 0);
    te_engine *t = engine("tcp"), *s = engine("shm");
    ASSERT(t != NULL && s != NULL);
    ASSERT_EQ(add(t, n.shm, n.tcp), TE_OK);
    ASSERT_EQ(round_trip(t), TE_OK);
    ASSERT_EQ(te_engine_bytes_via(t, "tcp"), 2 * OBJ_SIZE);
    ASSERT_EQ(te_engine_bytes_via(t, "shm"), 0);
    ASSERT_EQ(add(t, n.shm, NULL), TE_EINVAL);       /* tcp never dials unix: */
    ASSERT_EQ(add(s, n.tcp, NULL), TE_EINVAL);       /* shm needs a unix: address */
    ASSERT_EQ(add(s, n.tcp, n.shm), TE_OK);
    ASSERT_EQ(round_trip(s), TE_OK);
    ASSERT_EQ(te_engine_bytes_via(s, "shm"), 2 * OBJ_SIZE);
    te_engine_destroy(t);
    te_engine_destroy(s);
    node_down(&n);
}

/* A buffer registered before a transport joins works over it too. */
static void test_registered_before_add_transport(void) {
    snode n;
    ASSERT(node_up(&n, 1) == 0);
    char err[256];
    te_engine *e = engine("tcp");
    ASSERT(e != NULL);
    char *buf = xcalloc(1, OBJ_SIZE);
    ASSERT_EQ(te_engine_register_buffer(e, buf, OBJ_SIZE, err, sizeof err), TE_OK);
    te_config cfg = { .timeout_ms = 5000 };
    snprintf(cfg.secret, sizeof cfg.secret, SECRET);
    ASSERT_EQ(te_engine_add_transport(e, te_shm_create(&cfg, err, sizeof err), err, sizeof err), TE_OK);
    ASSERT_EQ(te_engine_add_transport(e, te_shm_create(&cfg, err, sizeof err), err, sizeof err), TE_EINVAL);
    ASSERT_EQ(add(e, n.tcp, n.shm), TE_OK);
    te_extent x = { .node_id = 1, .offset = 0, .length = OBJ_SIZE,
                    .cap = { .node_id = 1, .rights = TE_CAP_READ | TE_CAP_WRITE, .offset = 0,
                             .length = OBJ_SIZE, .expiry_ms = wall_ms() + 600000, .issued_us = wall_ms() * 1000 } };
    te_cap_sign(&x.cap, KEY);
    te_replica rep = { .ext = &x, .next = 1 };
    memset(buf, 'z', OBJ_SIZE);
    ASSERT_EQ(te_engine_write(e, buf, OBJ_SIZE, &rep, 1, err, sizeof err), TE_OK);
    ASSERT_EQ(((char *)n.seg)[OBJ_SIZE - 1], 'z');
    ASSERT_EQ(te_engine_bytes_via(e, "shm"), OBJ_SIZE);
    te_engine_unregister_buffer(e, buf);
    free(buf);
    te_engine_destroy(e);
    node_down(&n);
}

int main(void) {
    RUN_TEST(test_auto_same_host_uses_shm);
    RUN_TEST(test_auto_unreachable_shm_falls_back);
    RUN_TEST(test_auto_wrong_node_on_socket_falls_back);
    RUN_TEST(test_explicit_modes);
    RUN_TEST(test_registered_before_add_transport);
    TEST_EXIT();
}
