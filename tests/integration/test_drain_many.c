/* test_drain_many - moving many small objects: a node that leaves
 * (SIGTERM: the master drains it) with 20,000 objects of 64 bytes on it,
 * and a node killed -9 under objects with two replicas, are done within
 * bounds that copying one object per task, 16 tasks per heartbeat and
 * 256 copies per repair pass (about 250 objects a second) misses by far;
 * every object comes back byte-exact afterwards. The bounds are several
 * times what the batched copies take here under ASan on a loaded
 * machine: they say "in waves of thousands", not how fast.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE(i) (port0 + 2 + 2 * (i))
#define PORT_DATA(i) (port0 + 3 + 2 * (i))
#define NODES        4
#define VAL          64
#define N_DRAIN      20000   /* about half of them on the drained node */
#define N_KILL       10000   /* replicas 2, on both nodes then alive */
#define DRAIN_MS     15000   /* the old code: about 40 s for 10,000 */
#define REPAIR_MS    15000   /* the old code: about 20 s for 10,000 (a pass every 500 ms) */

static pid_t nodes[NODES];
static mkv_client *cli;
static char *vals, *back;
static redisContext *adm;

static long long master_field(const char *field) {
    return h_info_field(adm, "cluster", field);
}

/* Node i (id i + 1), once alive nodes are alive. */
static int start_node(int i, int alive) {
    nodes[i] = h_start_node(PORT_MASTER, PORT_NODE(i), PORT_DATA(i), "256MB");
    return nodes[i] > 0 && h_wait_nodes(PORT_MASTER, "alive", alive, 20000) == 0 ? 0 : -1;
}

/* Node 1 leaves with about 10,000 small objects: it exits once they
 * moved, and all 20,000 read back from node 2. */
static void test_drain_small_objects(void) {
    h_fill(vals, (size_t)N_DRAIN * VAL, 7);
    ASSERT_EQ(h_batches(cli, "d:", 0, N_DRAIN, 1000, VAL, vals, NULL, 1), 0);
    uint64_t t0 = mono_ms();
    ASSERT_EQ(h_stop_status(nodes[0], DRAIN_MS), 0);   /* exited by itself: drained */
    uint64_t took = mono_ms() - t0;
    printf("# drain of node 1 (%d objects of %d B over 2 nodes) took %llu ms\n", N_DRAIN, VAL,
           (unsigned long long)took);
    h_forget(nodes[0]);
    nodes[0] = 0;
    ASSERT_EQ(master_field("objects_lost"), 0);
    ASSERT_EQ(master_field("objects_complete"), N_DRAIN);
    ASSERT_EQ(h_batches(cli, "d:", 0, N_DRAIN, 1000, VAL, vals, back, 1), 0);
}

/* Replicas 2 over nodes 2 and 3 (node 4 joins as the spare): kill -9
 * node 3, and every object is at two replicas again within the bound. */
static void test_kill_rereplicates(void) {
    ASSERT_EQ(start_node(2, 2), 0);
    h_fill(vals, (size_t)N_KILL * VAL, 11);
    ASSERT_EQ(h_batches(cli, "k:", 0, N_KILL, 1000, VAL, vals, NULL, 2), 0);
    ASSERT_EQ(start_node(3, 3), 0);
    ASSERT_EQ(master_field("under_replicated"), 0);
    h_kill(nodes[2]);
    nodes[2] = 0;
    uint64_t end = mono_ms() + 20000;
    while (mono_ms() < end && master_field("nodes_dead") < 2) usleep(20 * 1000);
    ASSERT_EQ(master_field("nodes_dead"), 2);   /* node 1 (drained) and node 3 */
    uint64_t t0 = mono_ms();
    end = t0 + REPAIR_MS;
    long long under = -1;
    while (mono_ms() < end && (under = master_field("under_replicated")) != 0) usleep(20 * 1000);
    printf("# re-replication after kill -9: under_replicated 0 after %llu ms (%lld left)\n",
           (unsigned long long)(mono_ms() - t0), under);
    ASSERT_EQ(under, 0);
    ASSERT_EQ(master_field("objects_lost"), 0);
    ASSERT_EQ(h_batches(cli, "k:", 0, N_KILL, 1000, VAL, vals, back, 2), 0);
}

int main(void) {
    h_init(150);
    h_setup_or_exit(port0 = h_free_ports(2 + 2 * NODES), "free ports");
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    /* node_timeout 2 s: a kill is seen soon; the sweep runs every 500 ms. */
    const char *mflags[] = {"--node-timeout-ms", "2000", NULL};
    if (h_start_master(PORT_MASTER, mflags) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    adm = h_redis(PORT_MASTER);
    vals = malloc((size_t)N_DRAIN * VAL);
    back = malloc((size_t)N_DRAIN * VAL);
    if (!adm || !vals || !back || start_node(0, 1) != 0 || start_node(1, 2) != 0 ||
        h_mkv_connect_ms(&cli, master, NULL, 1, 10000) != MKV_OK ||
        mkv_register_buffer(cli, vals, (size_t)N_DRAIN * VAL) != MKV_OK ||
        mkv_register_buffer(cli, back, (size_t)N_DRAIN * VAL) != MKV_OK) {
        printf("not ok - cluster setup: %s\n", mkv_last_error(cli));
        h_kill_all();
        return 1;
    }
    RUN_TEST(test_drain_small_objects);
    RUN_TEST(test_kill_rereplicates);
    mkv_close(cli);
    redisFree(adm);
    free(vals);
    free(back);
    h_kill_all();
    TEST_EXIT();
}
