/* tests/integration/test_master_restart.c - a master killed (-9) and
 * started again with the same flags, without etcd: a master, three nodes,
 * a gateway (replicas 2) and a libmoonkv client that all keep running.
 *
 * Nodes claim their ids back from the new master, whatever order they
 * register in (the test makes it differ from the first: two nodes are
 * stopped until the third has registered). The gateway and the client
 * must notice the new master by the term in its capabilities, read the
 * topology again and serve new puts and gets within a bound. The new
 * master's term differs from the old one, and a write grant of the old
 * master is refused by the nodes. Objects stored before the restart are
 * asserted by test_restart. Ports: one block of h_free_ports, taken
 * first in main(). */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "grant_harness.h"
#include "probe_harness.h"
#include "test.h"

static int port0;
#define MASTER_PORT  (port0 + 0)
#define NODE_PORT    (port0 + 10)   /* + i; data plane on NODE_PORT + 10 + i */
#define GATEWAY_PORT (port0 + 30)
#define NODES        3
#define BOUND_MS     12000   /* restart to the first put and get */
#define TIME_LIMIT_S 120

static pid_t master, nodes[NODES];
static h_probe probe;

static long long info_of(int port, const char *section, const char *field) {
    redisContext *c = h_redis(port);
    long long v = c ? h_info_field(c, section, field) : -1;
    if (c) redisFree(c);
    return v;
}

/* The id the master on port gave the node with data port data_port; 0 if none. */
static uint32_t id_of(int data_port) {
    redisContext *c = h_redis(MASTER_PORT);
    gh_grant g;
    memset(&g, 0, sizeof g);
    int ok = c && gh_learn_nodes(c, &g) == 0;
    if (c) redisFree(c);
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", data_port);
    for (int i = 0; ok && i < g.nnodes; i++)
        if (strcmp(g.addrs[i], want) == 0) return g.ids[i];
    return 0;
}

static void test_serves_before(void) {
    ASSERT(h_gw_set(&probe, "before-gw", "value-1"));
    ASSERT(h_gw_get_is(&probe, "before-gw", "value-1"));
    ASSERT(h_lib_put(&probe, "before-lib", "value-2"));
    ASSERT(h_lib_get_is(&probe, "before-lib", "value-2"));
    long long term = info_of(MASTER_PORT, "cluster", "master_term");
    ASSERT(term > 0);
    for (int i = 0; i < NODES; i++) ASSERT_EQ(info_of(NODE_PORT + i, "node", "master_term"), term);
}

static void test_restart(void) {
    long long term0 = info_of(MASTER_PORT, "cluster", "master_term");
    uint32_t first_id = id_of(NODE_PORT + 10);
    gh_grant old;
    ASSERT(gh_take(MASTER_PORT, "old-grant", 4096, 2, &old) == 0);

    h_kill(master);
    /* Only the last node may register first with the new master. */
    for (int i = 0; i < NODES - 1; i++) ASSERT(h_sigstop(nodes[i]) == 0);
    master = h_start_master(MASTER_PORT, NULL);
    ASSERT(master > 0);
    uint64_t t0 = mono_ms();
    ASSERT(h_wait_nodes(MASTER_PORT, "alive", 1, 10000) == 0);
    for (int i = 0; i < NODES - 1; i++) ASSERT(kill(nodes[i], SIGCONT) == 0);
    ASSERT(h_wait_nodes(MASTER_PORT, "alive", NODES, 10000) == 0);
    /* An id names one node for the cluster's life. */
    ASSERT_EQ(id_of(NODE_PORT + 10), first_id);

    long long gw_put = h_until(h_gw_set, &probe, "after-gw", "value-3", t0, BOUND_MS);
    long long gw_get = gw_put < 0 ? -1 : h_until(h_gw_get_is, &probe, "after-gw", "value-3", t0, BOUND_MS);
    long long lib_p = h_until(h_lib_put, &probe, "after-lib", "value-4", t0, BOUND_MS);
    long long lib_g = lib_p < 0 ? -1 : h_until(h_lib_get_is, &probe, "after-lib", "value-4", t0, BOUND_MS);
    printf("# master restarted (kill -9, no etcd): gateway first put %lld ms, first get %lld ms; "
           "libmoonkv first put %lld ms, first get %lld ms\n", gw_put, gw_get, lib_p, lib_g);
    ASSERT(gw_put >= 0 && gw_get >= 0);
    ASSERT(lib_p >= 0 && lib_g >= 0);

    /* A new incarnation: a new term, which the nodes now serve. */
    long long term1 = info_of(MASTER_PORT, "cluster", "master_term");
    ASSERT(term1 > 0 && term1 != term0);
    for (int i = 0; i < NODES; i++) ASSERT_EQ(info_of(NODE_PORT + i, "node", "master_term"), term1);

    /* The old master's grant: refused by the nodes it names. */
    char err[256] = "";
    ASSERT_MSG(gh_refused(&old, NODE_PORT, NODES, err, sizeof err), "old grant: %s", err);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(31), "free ports");
    master = h_start_master(MASTER_PORT, NULL);
    /* One at a time, so that the first master's ids follow the ports. */
    for (int i = 0; i < NODES && master > 0; i++) {
        nodes[i] = h_start_node(MASTER_PORT, NODE_PORT + i, NODE_PORT + 10 + i, "16MB");
        if (nodes[i] < 0 || h_wait_nodes(MASTER_PORT, "alive", i + 1, 10000) != 0 ||
            h_wait_node_registered(NODE_PORT + i, 10000) != 0)
            master = -1;
    }
    const char *gw_extra[] = {"--segment-size", "16MB", NULL};
    pid_t gwp = master > 0 ? h_start_gateway(MASTER_PORT, GATEWAY_PORT, gw_extra, NULL) : -1;
    mkv_options opt;
    mkv_options_init(&opt);
    char maddr[32];
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", MASTER_PORT);
    opt.master = maddr;
    opt.timeout_ms = 3000;
    h_setup_or_exit(gwp >= 0 && h_probe_open(&probe, GATEWAY_PORT, &opt) == 0 ? 0 : -1, "master_restart/setup");
    probe.replicas = 2;
    RUN_TEST(test_serves_before);
    RUN_TEST(test_restart);
    h_probe_close(&probe);
    h_stop_all();
    TEST_EXIT();
}
