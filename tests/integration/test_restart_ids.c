/* test_restart_ids - a node id means one node for the cluster's life,
 * across a master restart too (issue 13).
 * A master restarted without etcd knows no node. If a brand-new node
 * registers before the old nodes have claimed their ids back, it must
 * not get one of theirs (ids would start at 1 again): the master holds
 * new nodes for its rejoin grace, and while the old ones report.
 * - 3 nodes hold 2,000 objects (replicas 2); they are stopped (SIGSTOP),
 *   the master is killed (-9) and started again, a new node is started
 *   and tries to join first; then the old nodes run again: they keep
 *   their ids, the new node gets another, every object reads back
 *   byte-exact and the rebuild counts them all.
 * - Then one old node is stopped across two master restarts in a row:
 *   the second master waits for it too (the others name it).
 * Ports: one block of h_free_ports, taken first in main(). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE(i) (port0 + 2 + 2 * (i))   /* RESP; its data plane is +1 */
#define OLD_NODES    3
#define OBJS         2000
#define OBJ_LEN      512
#define BATCH        500
#define TIME_LIMIT_S 180

static pid_t master_pid, nodes[OLD_NODES + 1];
static uint32_t old_ids[OLD_NODES];
static char master_addr[32];
static mkv_client *mc;
static char *vals, *back;

/* The first master starts a new cluster: nothing to wait for. The
 * restarted one's grace is long enough for the test's steps on a loaded
 * machine. */
static const char *const first_flags[] = {"--replicas", "2", "--node-timeout-ms", "2000",
                                          "--heartbeat-ms", "200", "--rejoin-grace-ms", "0", NULL};
static const char *const restart_flags[] = {"--replicas", "2", "--node-timeout-ms", "2000",
                                            "--heartbeat-ms", "200", "--rejoin-grace-ms", "10000",
                                            NULL};

static long long master_field(const char *field) { return h_port_info(PORT_MASTER, "cluster", field); }

static long long node_field(int i, const char *field) { return h_port_info(PORT_NODE(i), "node", field); }

static long long index_total(void) {
    long long sum = 0;
    for (int i = 0; i < OLD_NODES; i++) sum += node_field(i, "index_objects");
    return sum;
}

/* Objects that failed to put. */
static int put_all(void) { return h_batches(mc, "id:", 0, OBJS, BATCH, OBJ_LEN, vals, NULL, 2); }

/* Objects missing or not byte-exact. */
static int check_all(void) { return h_batches(mc, "id:", 0, OBJS, BATCH, OBJ_LEN, vals, back, 0); }

static pid_t start_node(int i) {
    h_args a = {0};
    h_node_argv(&a, master_addr, "127.0.0.1", PORT_NODE(i), PORT_NODE(i) + 1, "32MB");
    return h_ready(h_spawn(a.v), "127.0.0.1", PORT_NODE(i), NULL, 20000);
}

static void signal_old(int sig) {
    for (int i = 0; i < OLD_NODES; i++) kill(nodes[i], sig);
}

/* Until the new node registered or the master told it to wait, bounded. */
static void wait_new_node_tried(void) {
    uint64_t end = mono_ms() + 10000;
    while (mono_ms() < end && master_field("rebuild_joins_held") < 1 &&
           node_field(OLD_NODES, "registrations") < 1)
        usleep(20 * 1000);
}

static void test_new_node_after_restart_gets_a_fresh_id(void) {
    ASSERT_EQ(put_all(), 0);
    /* every node learns what it holds within a moment of the put's end */
    uint64_t end = mono_ms() + 10000;
    while (index_total() != 2LL * OBJS && mono_ms() < end) usleep(50 * 1000);
    ASSERT_EQ(index_total(), 2LL * OBJS);

    /* the old nodes cannot come back before the new one tries */
    signal_old(SIGSTOP);
    h_kill(master_pid);
    master_pid = h_start_master(PORT_MASTER, restart_flags);
    ASSERT(master_pid > 0);
    nodes[OLD_NODES] = start_node(OLD_NODES);
    ASSERT(nodes[OLD_NODES] > 0);
    wait_new_node_tried();
    long long early_id = node_field(OLD_NODES, "node_id");
    signal_old(SIGCONT);

    ASSERT(h_wait_nodes(PORT_MASTER, "alive", OLD_NODES + 1, 30000) == 0);
    ASSERT(h_wait_rebuilt(PORT_MASTER, NULL, 30000) == 0);
    ASSERT(h_wait_node_registered(PORT_NODE(OLD_NODES), 30000) == 0);
    long long new_id = node_field(OLD_NODES, "node_id");
    printf("# the new node was told to wait %lld times; id %lld (before the old nodes came back: %lld); "
           "old ids %u %u %u\n", master_field("rebuild_joins_held"), new_id, early_id, old_ids[0],
           old_ids[1], old_ids[2]);
    for (int i = 0; i < OLD_NODES; i++) {
        ASSERT_EQ(node_field(i, "node_id"), old_ids[i]);
        ASSERT(new_id != old_ids[i]);
    }
    ASSERT(master_field("rebuild_joins_held") >= 1);
    ASSERT_EQ(master_field("rebuild_recovered"), OBJS);
    ASSERT_EQ(master_field("rebuild_lost"), 0);
    ASSERT_EQ(master_field("rebuild_nodes_reported"), OLD_NODES);
    int bad = check_all();
    if (bad) bad = check_all();   /* the first call may meet the dead connection */
    ASSERT_EQ(bad, 0);
}

/* Masters that close their window as soon as every node named reported
 * (no grace: the test is about whom the nodes name). */
static const char *const nograce_flags[] = {"--replicas", "2", "--node-timeout-ms", "4000",
                                            "--heartbeat-ms", "200", "--rejoin-grace-ms", "0", NULL};

static int rebuild_state_is(const char *state) {
    char want[48];
    snprintf(want, sizeof want, "rebuild_state:%s\r\n", state);
    redisContext *c = h_proven(h_redis(PORT_MASTER), "");
    redisReply *r = c ? redisCommand(c, "INFO cluster") : NULL;
    int yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want) != NULL;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return yes;
}

/* Until the master counts n nodes' MOON.REPORTDONE, bounded: 0 or -1. */
static int wait_reported(long long n) {
    uint64_t end = mono_ms() + 15000;
    while (mono_ms() < end && master_field("rebuild_nodes_reported") < n) usleep(20 * 1000);
    return master_field("rebuild_nodes_reported") >= n ? 0 : -1;
}

/* Two masters die in a row while an old node is away (stopped). The
 * second must still wait for it: the others' view of the members, read
 * from the first while it collected reports, lists the node it waited
 * for (MOON.NODES EXPECTED). Before, that view held only the nodes back
 * first, their MOON.REPORTDONEs named no one else, the second master
 * built its table without the stopped node, and that node's replicas
 * were refused when it came back. */
static void test_second_restart_waits_for_the_away_node(void) {
    pid_t away = nodes[1];
    long long others = OLD_NODES;   /* old nodes 0 and 2, and the new one */
    h_sigstop(away);
    h_kill(master_pid);
    master_pid = h_start_master(PORT_MASTER, nograce_flags);
    ASSERT(master_pid > 0);
    ASSERT(wait_reported(others) == 0);
    usleep(600 * 1000);   /* the others refresh their view from it (every 100 ms while young) */
    h_kill(master_pid);
    master_pid = h_start_master(PORT_MASTER, nograce_flags);
    ASSERT(master_pid > 0);
    ASSERT(wait_reported(others) == 0);
    usleep(200 * 1000);
    int collecting = rebuild_state_is("collecting");
    kill(away, SIGCONT);
    ASSERT(collecting);
    ASSERT(h_wait_rebuilt(PORT_MASTER, NULL, 30000) == 0);
    printf("# second restart: %lld nodes reported, %lld recovered, %lld extents refused\n",
           master_field("rebuild_nodes_reported"), master_field("rebuild_recovered"),
           master_field("rebuild_extents_refused"));
    ASSERT_EQ(master_field("rebuild_nodes_reported"), others + 1);
    ASSERT_EQ(master_field("rebuild_recovered"), OBJS);
    ASSERT_EQ(master_field("rebuild_extents_refused"), 0);
    int bad = check_all();
    if (bad) bad = check_all();   /* the first call may meet the dead connection */
    ASSERT_EQ(bad, 0);
}

static int start_all(void) {
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    master_pid = h_start_master(PORT_MASTER, first_flags);
    if (master_pid < 0) return -1;
    for (int i = 0; i < OLD_NODES; i++)
        if ((nodes[i] = start_node(i)) < 0) return -1;
    if (h_wait_members(PORT_MASTER, PORT_NODE(0), old_ids, OLD_NODES) != 0) return -1;
    if (h_mkv_connect(&mc, master_addr, "tcp", 2) != MKV_OK) return -1;
    vals = malloc((size_t)OBJS * OBJ_LEN);
    back = malloc((size_t)BATCH * OBJ_LEN);
    if (!vals || !back) return -1;
    for (int i = 0; i < OBJS; i++) h_fill(vals + (size_t)i * OBJ_LEN, OBJ_LEN, (uint64_t)i + 7);
    if (mkv_register_buffer(mc, vals, (size_t)OBJS * OBJ_LEN) != MKV_OK ||
        mkv_register_buffer(mc, back, (size_t)BATCH * OBJ_LEN) != MKV_OK)
        return -1;
    return 0;
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(4 + 2 * OLD_NODES), "free ports");   /* and one new node */
    h_setup_or_exit(start_all(), "start master, nodes, client");
    RUN_TEST(test_new_node_after_restart_gets_a_fresh_id);
    RUN_TEST(test_second_restart_waits_for_the_away_node);
    signal_old(SIGCONT);   /* a failed step may have left them stopped */
    mkv_close(mc);
    free(vals);
    free(back);
    h_stop_all();
    TEST_EXIT();
}
