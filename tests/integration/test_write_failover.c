/* test_write_failover - writes during failure detection (issue 14 item 4):
 * master + 3 nodes, replicas 2; one node is killed with SIGKILL and, before
 * the master's node_timeout_ms declares it dead, many SETs through a
 * gateway and mkv_puts through libmoonkv run. A put that cannot reach a
 * placed node tells the master (MOON.SUSPECT), is revoked and placed again
 * on live nodes: none may fail, every key reads back byte-exact, and the
 * master counts the suspicion, then declares the node dead as usual.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_GATEWAY (port0 + 1)
#define PORT_NODE(i) (port0 + 10 + 2 * (i))   /* RESP; its data plane is +1 */
#define NODES        3
#define VICTIM       1                   /* index of the node killed */
#define KEYS         150                 /* per path (gateway, libmoonkv) */
#define VAL_LEN      (64 * 1024)
#define TIME_LIMIT_S 150

static pid_t nodes[NODES];
static char master_addr[32];
static redisContext *master, *gw;
static mkv_client *mc;
static char *val, *back;

static long long cluster_field(const char *field) { return h_info_field(master, "cluster", field); }

/* Key i of a path (0: the gateway's "gw:", 1: the client's "mc:") and its
 * value into val; each key's value differs, so a mixed-up replica cannot pass. */
static void key_value(int path, int i, char *key, size_t len) {
    snprintf(key, len, "%s:%d", path ? "mc" : "gw", i);
    h_fill(val, VAL_LEN, (uint64_t)(path * 100000 + i + 1));
}

static int gw_set(int i) {
    char key[32];
    key_value(0, i, key, sizeof key);
    redisReply *r = redisCommand(gw, "SET %s %b", key, val, (size_t)VAL_LEN);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok) printf("# SET %s: %s\n", key, r && r->str ? r->str : "(no reply)");
    if (r) freeReplyObject(r);
    return ok;
}

static int gw_check(int i) {
    char key[32];
    key_value(0, i, key, sizeof key);
    redisReply *r = redisCommand(gw, "GET %s", key);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == VAL_LEN && memcmp(r->str, val, VAL_LEN) == 0;
    if (!ok) printf("# GET %s: wrong or missing\n", key);
    if (r) freeReplyObject(r);
    return ok;
}

static int mc_put(int i) {
    char key[32];
    key_value(1, i, key, sizeof key);
    int rc = mkv_put(mc, key, strlen(key), val, VAL_LEN, 2);
    if (rc != MKV_OK) printf("# mkv_put %s: %s\n", key, mkv_last_error(mc));
    return rc == MKV_OK;
}

static int mc_check(int i) {
    char key[32];
    key_value(1, i, key, sizeof key);
    size_t got = 0;
    int rc = mkv_get(mc, key, strlen(key), back, VAL_LEN, &got);
    int ok = rc == MKV_OK && got == VAL_LEN && memcmp(back, val, VAL_LEN) == 0;
    if (!ok) printf("# mkv_get %s: %d %s\n", key, rc, mkv_last_error(mc));
    return ok;
}

/* ---- the case ---- */

static void test_writes_survive_a_node_killed_before_it_is_declared_dead(void) {
    /* warm up: every node holds something and every path is connected */
    for (int i = 0; i < 10; i++) ASSERT(gw_set(1000 + i) && mc_put(1000 + i));
    ASSERT_EQ(cluster_field("suspicions"), 0);
    uint64_t t0 = mono_ms();
    h_kill(nodes[VICTIM]);
    int failed = 0;
    for (int i = 0; i < KEYS; i++) failed += !gw_set(i) + !mc_put(i);
    uint64_t took = mono_ms() - t0;
    long long dead_meanwhile = cluster_field("nodes_dead");
    printf("# %d puts in %llu ms after the kill, %d failed; suspicions %lld, nodes_suspect %lld, "
           "nodes_dead %lld\n", 2 * KEYS, (unsigned long long)took, failed,
           cluster_field("suspicions"), cluster_field("nodes_suspect"), dead_meanwhile);
    ASSERT_EQ(failed, 0);
    ASSERT_MSG(cluster_field("suspicions") >= 1, "the master was never told the node is suspect");
    /* every key, including the warm-up ones that had a replica there */
    int bad = 0;
    for (int i = 0; i < KEYS; i++) bad += !gw_check(i) + !mc_check(i);
    for (int i = 0; i < 10; i++) bad += !gw_check(1000 + i) + !mc_check(1000 + i);
    ASSERT_EQ(bad, 0);
    /* failure detection still ends in a dead node */
    uint64_t end = mono_ms() + 20000;
    while (cluster_field("nodes_dead") != 1 && mono_ms() < end) usleep(100 * 1000);
    ASSERT_EQ(cluster_field("nodes_dead"), 1);
    ASSERT_EQ(cluster_field("nodes_suspect"), 0);   /* dead, no longer counted as suspect */
}

/* ---- setup ---- */

static int start_all(void) {
    const char *const extra[] = {"--replicas", "2", NULL};
    if (h_start_master(PORT_MASTER, extra) < 0) return -1;
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    for (int i = 0; i < NODES; i++) {
        nodes[i] = h_ready(h_start_node(PORT_MASTER, PORT_NODE(i), PORT_NODE(i) + 1, "32MB"),
                           "127.0.0.1", PORT_NODE(i), NULL, 20000);
        if (nodes[i] < 0) return -1;
    }
    if (h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0) return -1;
    for (int i = 0; i < NODES; i++)
        if (h_wait_node_registered(PORT_NODE(i), 10000) != 0) return -1;
    const char *const staging[] = {"--segment-size", "16MB", NULL};
    if (h_start_gateway(PORT_MASTER, PORT_GATEWAY, staging, NULL) < 0) return -1;
    master = h_redis(PORT_MASTER);
    gw = h_redis(PORT_GATEWAY);
    if (!master || !gw || h_mkv_connect(&mc, master_addr, "tcp", 2) != MKV_OK) return -1;
    val = malloc(VAL_LEN);
    back = malloc(VAL_LEN);
    if (!val || !back) return -1;
    if (mkv_register_buffer(mc, val, VAL_LEN) != MKV_OK ||
        mkv_register_buffer(mc, back, VAL_LEN) != MKV_OK)
        return -1;
    return 0;
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(10 + 2 * NODES), "free ports");
    h_setup_or_exit(start_all(), "start master, nodes, gateway, client");
    RUN_TEST(test_writes_survive_a_node_killed_before_it_is_declared_dead);
    mkv_close(mc);
    redisFree(master);
    redisFree(gw);
    free(val);
    free(back);
    h_stop_all();
    TEST_EXIT();
}
