/* test_client_shm - libmoonkv's transport choice against a real master
 * and one memory node on this host (shm export on, as --transport auto
 * gives it). The node's INFO shows which path carried the bytes: its
 * data-plane server counts payload bytes it moved over TCP
 * (data_bytes_in/out) and every request it checked (data_requests).
 * Over shm in map mode (the default) the client copies through its own
 * mapping and asks the node nothing, so neither rises; in fd mode the
 * node verifies the request headers first, so requests rise and payload
 * bytes do not. Ports: one block of h_free_ports, taken first in main().
 * Last, the node killed -9 and started again on its segment file while a
 * client keeps its path: idle, the client drops its mapping and fd of
 * the dead process's segment by itself (none left in /proc/self/maps or
 * /proc/self/fd), the node
 * starts (the client's fd holds no lock on the file), and the same
 * client reads every object byte-exact through a mapping of the new
 * incarnation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
static char master_addr[32];   /* 127.0.0.1:PORT_MASTER */
#define PORT_MASTER (port0 + 0)
#define PORT_NODE   (port0 + 1)
#define PORT_DATA   (port0 + 2)
#define OBJ         (4u << 20)

static pid_t h_node_pid;   /* the node's process, for its segment */
static char dir[256], seg_file[300];   /* the node's segment file, in the test's own directory */

typedef struct data_stats {
    unsigned long long in, out, requests;
} data_stats;

static int info_field(const char *info, const char *name, unsigned long long *v) {
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s:", name);
    const char *p = strstr(info, pat);
    if (!p) return -1;
    *v = strtoull(p + strlen(pat), NULL, 10);
    return 0;
}

static int node_stats(data_stats *s) {
    redisContext *c = h_redis(PORT_NODE);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "INFO node");
    int rc = -1;
    if (r && r->type == REDIS_REPLY_STRING && info_field(r->str, "data_bytes_in", &s->in) == 0 &&
        info_field(r->str, "data_bytes_out", &s->out) == 0 &&
        info_field(r->str, "data_requests", &s->requests) == 0)
        rc = 0;
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
}

static pid_t start_node(void) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, "node");
    h_arg(&a, "--master");
    h_arg(&a, master_addr);
    h_arg(&a, "--bind");
    h_arg(&a, "127.0.0.1");
    h_argf(&a, "--port=%d", PORT_NODE);
    h_arg(&a, "--segment-size");
    h_arg(&a, "64MB");
    h_argf(&a, "--data-addrs=127.0.0.1:%d", PORT_DATA);
    h_arg(&a, "--segment-file");
    h_arg(&a, seg_file);
    h_arg(&a, "--transport");
    h_arg(&a, "auto");          /* exports shm next to TCP */
    h_arg(&a, "--prefault");
    h_arg(&a, "no");
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    return h_spawn(a.v);
}

/* Opens c's path to the node with a small put, then waits (bounded) until
 * the process's mapping of the node's segment is warm: before that, map
 * mode sends transfers to cold parts the fd way, through the node. */
static int warm_paths(mkv_client *c, const void *buf) {
    int rc = mkv_put(c, "shm:warm-up", 11, buf, 1, 1);
    if (rc == MKV_OK) rc = mkv_remove(c, "shm:warm-up", 11);
    mkv_transfer_stats st;
    for (int i = 0; i < 1500; i++) {
        mkv_transfer_stats_get(c, &st);
        if (st.shm_cold_bytes == 0) return rc;
        usleep(20000);
    }
    return MKV_ETIMEDOUT;
}

/* Put len bytes from offset skew of a buffer under key and get them back
 * byte-exact (into another skew) through a client of `transport` and
 * shm_mode (NULL: the default); the node's stats before and after go to
 * before and after. */
static int put_get_ex(const char *transport, const char *shm_mode, const char *key, size_t len, size_t skew,
                      data_stats *before, data_stats *after) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.transport = transport;
    opt.shm_mode = shm_mode;
    mkv_client *c;
    if (mkv_connect(&c, &opt) != MKV_OK) {
        printf("# connect: %s\n", mkv_last_error(NULL));
        return -1;
    }
    size_t room = len + 16;
    unsigned char *src = malloc(room), *dst = calloc(1, room);
    h_fill(src, room, (int)len);
    size_t n = 0;
    int rc = mkv_register_buffer(c, src, room);
    if (rc == MKV_OK) rc = mkv_register_buffer(c, dst, room);
    if (rc == MKV_OK) rc = warm_paths(c, src);
    if (rc == MKV_OK && node_stats(before) != 0) rc = MKV_EPROTO;
    if (rc == MKV_OK) rc = mkv_put(c, key, strlen(key), src + skew, len, 1);
    if (rc == MKV_OK) rc = mkv_get(c, key, strlen(key), dst + 16 - skew, len, &n);
    if (rc == MKV_OK && (n != len || memcmp(src + skew, dst + 16 - skew, len) != 0)) rc = MKV_ECORRUPT;
    if (rc == MKV_OK && node_stats(after) != 0) rc = MKV_EPROTO;
    if (rc == MKV_OK) rc = mkv_remove(c, key, strlen(key));
    if (rc != MKV_OK) printf("# %s/%s: %s: %s\n", transport, shm_mode ? shm_mode : "default", mkv_strerror(rc),
                             mkv_last_error(c));
    mkv_close(c);
    free(src);
    free(dst);
    return rc;
}

static int put_get(const char *transport, const char *key, data_stats *before, data_stats *after) {
    return put_get_ex(transport, NULL, key, OBJ, 0, before, after);
}

static void test_auto_goes_over_shm(void) {
    data_stats b, a;
    ASSERT_EQ(put_get("auto", "shm:auto", &b, &a), MKV_OK);
    ASSERT_EQ(a.requests - b.requests, 0);     /* map mode: the node was not asked */
    ASSERT_EQ(a.in - b.in, 0);                 /* and no payload crossed TCP */
    ASSERT_EQ(a.out - b.out, 0);
}

static void test_explicit_shm(void) {
    data_stats b, a;
    ASSERT_EQ(put_get("shm", "shm:shm", &b, &a), MKV_OK);
    ASSERT_EQ(a.requests - b.requests, 0);
    ASSERT_EQ(a.in - b.in, 0);
    ASSERT_EQ(a.out - b.out, 0);
}

/* FD mode: the node checks every slice, and still no payload on TCP. */
static void test_fd_mode(void) {
    data_stats b, a;
    ASSERT_EQ(put_get_ex("shm", "fd", "shm:fd", OBJ + 7, 3, &b, &a), MKV_OK);
    ASSERT(a.requests > b.requests);
    ASSERT_EQ(a.in - b.in, 0);
    ASSERT_EQ(a.out - b.out, 0);
}

/* Map mode byte-exact at sizes that end mid-page and mid-slice, from and
 * into buffers at odd offsets (the fused copy's unaligned heads/tails). */
static void test_map_unaligned(void) {
    static const size_t sizes[] = {1, 13, 4095, 65537, (1u << 20) + 13, (5u << 20) + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        data_stats b, a;
        char key[32];
        snprintf(key, sizeof key, "shm:map:%zu", sizes[i]);
        ASSERT_MSG(put_get_ex("shm", "map", key, sizes[i], 1 + i % 7, &b, &a) == MKV_OK, "size %zu", sizes[i]);
        ASSERT_EQ(a.requests - b.requests, 0);
    }
}

static void test_bad_shm_mode(void) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.shm_mode = "mmap";
    mkv_client *c = NULL;
    ASSERT_EQ(mkv_connect(&c, &opt), MKV_EINVAL);
    ASSERT(strstr(mkv_last_error(NULL), "shm_mode") != NULL);
}

/* The control: the same through TCP shows up as payload bytes. */
static void test_tcp_counts_bytes(void) {
    data_stats b, a;
    ASSERT_EQ(put_get("tcp", "shm:tcp", &b, &a), MKV_OK);
    ASSERT_EQ(a.in - b.in, OBJ);
    ASSERT_EQ(a.out - b.out, OBJ);
}

/* A get of a key read before copies from the place it was read from
 * while the master answers (client/get.c); what it returns must still be
 * what the master's answer names: a flipped byte there fails the get
 * (one replica) rather than passing with the copy ahead, a removed key
 * is not found although its old place holds another key's bytes, and a
 * key put again elsewhere reads its new bytes, not its old place's. */
/* A client of this cluster on the shm transport (map mode), or NULL. */
static mkv_client *shm_client(void) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.transport = "shm";
    mkv_client *c = NULL;
    if (mkv_connect(&c, &opt) != MKV_OK) printf("# connect: %s\n", mkv_last_error(NULL));
    return c;
}

static void test_get_again_follows_the_master(void) {
    const size_t len = 1u << 20;
    mkv_client *c = shm_client();
    ASSERT(c != NULL);
    unsigned char *v1 = malloc(len), *v2 = malloc(len), *dst = malloc(len);
    ASSERT(v1 && v2 && dst);
    h_fill(v1, len, 1);
    h_fill(v2, len, 2);
    ASSERT_EQ(mkv_register_buffer(c, v1, len), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, v2, len), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, dst, len), MKV_OK);
    ASSERT_EQ(warm_paths(c, v1), MKV_OK);
    uint32_t id;
    ASSERT(h_node_ids(PORT_MASTER, PORT_DATA, &id, 1) == 0);
    size_t n = 0;
    ASSERT_EQ(mkv_put(c, "again:a", 7, v1, len, 1), MKV_OK);
    for (int i = 0; i < 2; i++) {   /* located, then copied ahead */
        memset(dst, 0, len);
        ASSERT_EQ(mkv_get(c, "again:a", 7, dst, len, &n), MKV_OK);
        ASSERT_MEMEQ(dst, v1, len);
    }
    int node = -1;
    uint64_t off = 0;
    ASSERT(h_locate_byte(PORT_MASTER, "again:a", 0, 4321, &id, 1, &node, &off) == 0);
    ASSERT(h_flip_segment_byte(h_node_pid, off) == 0);
    ASSERT_EQ(mkv_get(c, "again:a", 7, dst, len, &n), MKV_ECORRUPT);
    ASSERT(h_flip_segment_byte(h_node_pid, off) == 0);
    ASSERT_EQ(mkv_get(c, "again:a", 7, dst, len, &n), MKV_OK);
    ASSERT_MEMEQ(dst, v1, len);
    ASSERT_EQ(mkv_remove(c, "again:a", 7), MKV_OK);
    ASSERT_EQ(mkv_put(c, "again:b", 7, v2, len, 1), MKV_OK);   /* freed at once: likely a's place */
    ASSERT_EQ(mkv_get(c, "again:a", 7, dst, len, &n), MKV_ENOTFOUND);
    ASSERT_EQ(mkv_put(c, "again:a", 7, v1, len, 1), MKV_OK);
    memset(dst, 0, len);
    ASSERT_EQ(mkv_get(c, "again:a", 7, dst, len, &n), MKV_OK);
    ASSERT_MEMEQ(dst, v1, len);
    ASSERT_EQ(mkv_remove(c, "again:a", 7), MKV_OK);
    ASSERT_EQ(mkv_remove(c, "again:b", 7), MKV_OK);
    mkv_close(c);
    free(v1);
    free(v2);
    free(dst);
}

/* Mappings of path in this process (lines of /proc/self/maps naming it). */
/* Every key read byte-exact, each retried for a while (a restored node's
 * replicas come back with its report). */
static int read_all(mkv_client *c, int count, size_t len, const unsigned char *vals, unsigned char *dst) {
    for (int i = 0; i < count; i++) {
        char key[32];
        snprintf(key, sizeof key, "restart:%d", i);
        size_t n = 0;
        int rc;
        uint64_t end = mono_ms() + 30000;
        memset(dst, 0, len);
        while ((rc = mkv_get(c, key, strlen(key), dst, len, &n)) != MKV_OK && mono_ms() < end) usleep(50 * 1000);
        if (rc != MKV_OK || n != len || memcmp(dst, vals + (size_t)i * len, len) != 0) {
            printf("# %s: %s (%s), %zu bytes\n", key, mkv_strerror(rc), mkv_last_error(c), n);
            return -1;
        }
    }
    return 0;
}

static void test_node_restart_same_client(void) {
    const int count = 8;
    const size_t len = 1u << 20;
    mkv_client *c = shm_client();
    ASSERT(c != NULL);
    unsigned char *vals = malloc((size_t)count * len), *dst = malloc(len);
    ASSERT(vals && dst);
    ASSERT_EQ(mkv_register_buffer(c, vals, (size_t)count * len), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, dst, len), MKV_OK);
    for (int i = 0; i < count; i++) {
        char key[32];
        snprintf(key, sizeof key, "restart:%d", i);
        h_fill(vals + (size_t)i * len, len, 100 + i);
        ASSERT_EQ(mkv_put(c, key, strlen(key), vals + (size_t)i * len, len, 1), MKV_OK);
    }
    ASSERT_EQ(read_all(c, count, len, vals, dst), 0);
    ASSERT_EQ(test_mappings_of(seg_file), 1);   /* the client maps the node's file */
    ASSERT_EQ(test_fds_of(seg_file), 1);        /* and holds one fd of it (for cold chunks) */
    long long restores = h_port_info(PORT_MASTER, "cluster", "node_restores");
    h_kill(h_node_pid);
    /* Idle, the client lets go of the dead process's mapping by itself
     * (it watches the node process: shm_map_watch), with no request to
     * find the path broken. */
    uint64_t end = mono_ms() + 10000;
    /* (the mapping goes first, then the fd: wait for both) */
    while ((test_mappings_of(seg_file) != 0 || test_fds_of(seg_file) != 0) && mono_ms() < end) usleep(20 * 1000);
    printf("# the dead node's mapping dropped %llu ms after its kill\n",
           (unsigned long long)(mono_ms() + 10000 - end));
    ASSERT_EQ(test_mappings_of(seg_file), 0);
    ASSERT_EQ(test_fds_of(seg_file), 0);
    /* With the client's fd of the file still open (its idle path's), the
     * node starts on it again (before, the handed fd held the file's
     * lock: "in use by another process") and its report keeps the
     * objects. */
    h_node_pid = h_ready(start_node(), "127.0.0.1", PORT_NODE, NULL, 30000);
    ASSERT(h_node_pid > 0);
    ASSERT(h_wait_node_registered(PORT_NODE, 20000) == 0);
    ASSERT(h_wait_port_info(PORT_MASTER, "cluster", "node_restores", restores + 1, 20000) == 0);
    ASSERT_EQ(read_all(c, count, len, vals, dst), 0);
    /* One mapping: the new incarnation's. */
    end = mono_ms() + 10000;
    while (test_mappings_of(seg_file) != 1 && mono_ms() < end) usleep(50 * 1000);
    ASSERT_EQ(test_mappings_of(seg_file), 1);
    /* and the new incarnation takes writes through it too, once the
     * master places on it again (its restore over) */
    ASSERT(h_wait_nodes(PORT_MASTER, "alive", 1, 20000) == 0);
    int rc;
    end = mono_ms() + 20000;
    while ((rc = mkv_put(c, "restart:new", 11, vals, len, 1)) == MKV_ENOREPLICAS && mono_ms() < end)
        usleep(100 * 1000);
    ASSERT_EQ(rc, MKV_OK);
    size_t n = 0;
    ASSERT_EQ(mkv_get(c, "restart:new", 11, dst, len, &n), MKV_OK);
    ASSERT_MEMEQ(dst, vals, len);
    mkv_close(c);
    free(vals);
    free(dst);
}

int main(void) {
    h_init(50);
    h_setup_or_exit(port0 = h_free_ports(3), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    h_setup_or_exit(h_temp_dir(dir, sizeof dir, "client-shm"), "temp dir");
    snprintf(seg_file, sizeof seg_file, "%s/moonkv-segment.seg", dir);   /* the name h_flip_segment_byte finds */
    /* a node killed -9 is still a member when it comes back (its restore) */
    static const char *const mflags[] = {"--node-timeout-ms", "15000", "--rejoin-grace-ms", "0", NULL};
    pid_t master = h_start_master(PORT_MASTER, mflags);
    pid_t node = master > 0 ? start_node() : -1;
    h_node_pid = node;
    if (master <= 0 || node <= 0 || h_wait_nodes(PORT_MASTER, "alive", 1, 20000) != 0) {
        printf("not ok - cluster did not come up\n");
        return 1;
    }
    RUN_TEST(test_auto_goes_over_shm);
    RUN_TEST(test_explicit_shm);
    RUN_TEST(test_fd_mode);
    RUN_TEST(test_map_unaligned);
    RUN_TEST(test_bad_shm_mode);
    RUN_TEST(test_tcp_counts_bytes);
    RUN_TEST(test_get_again_follows_the_master);
    RUN_TEST(test_node_restart_same_client);   /* last: it restarts the node */
    h_stop(h_node_pid);
    h_stop(master);
    h_temp_dir_remove(dir, "client-shm");
    TEST_EXIT();
}
