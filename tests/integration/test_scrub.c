/* test_scrub - nodes re-check the objects they hold in the background
 * (issue 13): a byte flipped in one node's segment (through its memfd,
 * which this test opens from /proc like a stray writer would) is found
 * by that node's scrub, counted in INFO node checksum_errors, dropped
 * and told to the master (INFO cluster replicas_corrupt), whose repair
 * copies the object again; every object still reads back byte-exact and
 * no other node counts an error. Ports: one block of h_free_ports (below
 * the kernel's ephemeral range: a client's TIME-WAIT on a port there
 * blocks a listener). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE(i) (port0 + 2 + 2 * (i))   /* RESP; its data plane is +1 */
#define NODES        3
#define OBJS         20
#define OBJ_LEN      4096
#define TIME_LIMIT_S 120

static pid_t nodes[NODES];
static uint32_t node_ids[NODES];
static char master_addr[32];
static mkv_client *mc;
static char *vals, *back;

static const char *const master_flags[] = {"--replicas", "2", "--node-timeout-ms", "2000",
                                           "--heartbeat-ms", "200", NULL};

static long long master_field(const char *field) { return h_port_info(PORT_MASTER, "cluster", field); }

static long long node_field(int i, const char *field) { return h_port_info(PORT_NODE(i), "node", field); }

static long long nodes_sum(const char *field) {
    long long sum = 0;
    for (int i = 0; i < NODES; i++) sum += node_field(i, field);
    return sum;
}

/* Until the nodes' INFO field adds up to want (bounded). */
static int wait_sum(const char *field, long long want, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (nodes_sum(field) != want && mono_ms() < end) usleep(50 * 1000);
    return nodes_sum(field) == want ? 0 : -1;
}

static int wait_master(const char *field, long long want, int timeout_ms) {
    return h_wait_port_info(PORT_MASTER, "cluster", field, want, timeout_ms);
}

static void key_of(int i, char *key, size_t len) { snprintf(key, len, "scrub:%d", i); }

static int check_all(void) {
    int bad = 0;
    for (int i = 0; i < OBJS; i++) {
        char key[32];
        size_t got = 0;
        key_of(i, key, sizeof key);
        memset(back, 0, OBJ_LEN);
        int rc = mkv_get(mc, key, strlen(key), back, OBJ_LEN, &got);
        if (rc != MKV_OK || got != OBJ_LEN || memcmp(back, vals + (size_t)i * OBJ_LEN, OBJ_LEN) != 0) bad++;
    }
    return bad;
}

/* The first extent of key's first replica: node id and segment offset. */
static int first_extent(const char *key, uint32_t *node, uint64_t *off) {
    redisContext *m = h_redis(PORT_MASTER);
    redisReply *r = m ? redisCommand(m, "MOON.GET %s", key) : NULL;
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY &&
             r->element[2]->elements >= 1 && r->element[2]->element[0]->elements >= 1;
    if (ok) {
        const redisReply *e = r->element[2]->element[0]->element[0];
        *node = (uint32_t)e->element[0]->integer;
        *off = (uint64_t)e->element[1]->integer;
    }
    if (r) freeReplyObject(r);
    if (m) redisFree(m);
    return ok ? 0 : -1;
}

static int replicas_of(const char *key) {
    redisContext *m = h_redis(PORT_MASTER);
    redisReply *r = m ? redisCommand(m, "MOON.GET %s", key) : NULL;
    int n = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 ? (int)r->element[2]->elements : -1;
    if (r) freeReplyObject(r);
    if (m) redisFree(m);
    return n;
}

static void test_scrub_finds_and_replaces_a_rotten_replica(void) {
    /* every node indexes its replicas, and the scrub reads them clean */
    ASSERT(wait_sum("index_objects", 2 * OBJS, 20000) == 0);
    uint64_t end = mono_ms() + 10000;
    while (nodes_sum("scrub_passes") < 2 * NODES && mono_ms() < end) usleep(50 * 1000);
    ASSERT(nodes_sum("scrub_bytes") >= 2LL * OBJS * OBJ_LEN);
    ASSERT_EQ(nodes_sum("checksum_errors"), 0);
    ASSERT_EQ(master_field("replicas_corrupt"), 0);

    uint32_t node;
    uint64_t off;
    ASSERT(first_extent("scrub:7", &node, &off) == 0);
    int victim = -1;
    for (int i = 0; i < NODES; i++)
        if (node_ids[i] == node) victim = i;
    ASSERT(victim >= 0);
    ASSERT(h_flip_segment_byte(nodes[victim], off + 100) == 0);

    ASSERT(wait_master("replicas_corrupt", 1, 20000) == 0);
    ASSERT_EQ(node_field(victim, "checksum_errors"), 1);
    ASSERT_EQ(nodes_sum("checksum_errors"), 1);
    /* repair gives the object its second replica back */
    ASSERT(wait_master("under_replicated", 0, 30000) == 0);
    ASSERT(wait_master("tasks_pending", 0, 30000) == 0);
    ASSERT_EQ(replicas_of("scrub:7"), 2);
    ASSERT_EQ(master_field("objects_lost"), 0);
    ASSERT_EQ(check_all(), 0);
    /* the replaced replica scrubs clean: no second count */
    end = mono_ms() + 1000;
    while (mono_ms() < end) usleep(100 * 1000);
    ASSERT_EQ(nodes_sum("checksum_errors"), 1);
    ASSERT_EQ(master_field("replicas_corrupt"), 1);
}

/* ---- setup ---- */

static int start_all(void) {
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    if (h_start_master(PORT_MASTER, master_flags) < 0) return -1;
    for (int i = 0; i < NODES; i++) {
        h_args a = {0};
        h_node_argv(&a, master_addr, "127.0.0.1", PORT_NODE(i), PORT_NODE(i) + 1, "16MB");
        h_arg(&a, "--scrub-mb-per-s");
        h_arg(&a, "16");
        if ((nodes[i] = h_ready(h_spawn(a.v), "127.0.0.1", PORT_NODE(i), NULL, 20000)) < 0) return -1;
    }
    if (h_wait_members(PORT_MASTER, PORT_NODE(0), node_ids, NODES) != 0) return -1;
    if (h_mkv_connect(&mc, master_addr, "tcp", 2) != MKV_OK) return -1;
    vals = malloc((size_t)OBJS * OBJ_LEN);
    back = malloc(OBJ_LEN);
    if (!vals || !back) return -1;
    if (mkv_register_buffer(mc, vals, (size_t)OBJS * OBJ_LEN) != MKV_OK ||
        mkv_register_buffer(mc, back, OBJ_LEN) != MKV_OK)
        return -1;
    for (int i = 0; i < OBJS; i++) {
        char key[32];
        key_of(i, key, sizeof key);
        h_fill(vals + (size_t)i * OBJ_LEN, OBJ_LEN, (uint64_t)i + 1);
        if (mkv_put(mc, key, strlen(key), vals + (size_t)i * OBJ_LEN, OBJ_LEN, 2) != MKV_OK) return -1;
    }
    return 0;
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(2 + 2 * NODES), "free ports");
    h_setup_or_exit(start_all(), "start master, nodes, client");
    RUN_TEST(test_scrub_finds_and_replaces_a_rotten_replica);
    mkv_close(mc);
    free(vals);
    free(back);
    h_stop_all();
    TEST_EXIT();
}
