/* A gateway's SETs onto a node that was declared dead and came back:
 * under the same id (SIGSTOP past the node timeout, then SIGCONT) or
 * under a new one (kill -9 and a restart on the same port).
 *
 * The gateway learns the table while the node is dead (a SET placed on a
 * node that joined meanwhile makes it read the topology), so its engine
 * drops the node. Once the node is back, every SET lands on it (2 nodes
 * alive, replicas 2): each must succeed, which needs the gateway to read
 * the topology again instead of failing with "node N is not known to the
 * engine", and GET must give the bytes back.
 * Ports: one block of h_free_ports, taken first in main(). */
#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_GATEWAY (port0 + 1)
#define PORT_NODE(i) (port0 + 10 + (i))   /* data plane on + 10 */
#define PORT_DATA(i) (port0 + 20 + (i))
#define NODE_A 0
#define NODE_B 1   /* the one that goes and comes back */
#define NODE_C 2   /* joins while B is dead, then leaves */
#define SETS   20
#define VALUE  (64u * 1024u)
#define WAIT_MS 30000

static redisContext *adm;
static pid_t pid_b;
static int round_no;

static pid_t start_node(int i) {
    h_args a = {0};
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    h_node_argv(&a, master, "127.0.0.1", PORT_NODE(i), PORT_DATA(i), "32MB");
    h_arg(&a, "--heartbeat-ms");
    h_arg(&a, "200");
    return h_ready(h_spawn(a.v), "127.0.0.1", PORT_NODE(i), NULL, 20000);
}

/* Until the master lists exactly n nodes in state, bounded by time. */
static int wait_count(const char *state, int n) {
    uint64_t end = mono_ms() + WAIT_MS;
    while (mono_ms() < end) {
        if (h_count_nodes(adm, state) == n) return 0;
        usleep(50 * 1000);
    }
    return -1;
}

/* The id of node i (by its data address) last listed, 0 if none: a
 * restarted node may be listed twice, dead and under a new id. */
static uint32_t id_of(int i) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", PORT_DATA(i));
    redisReply *r = redisCommand(adm, "MOON.TOPOLOGY");
    uint32_t id = 0;
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        const redisReply *n = r->element[k];
        if (n->type == REDIS_REPLY_ARRAY && n->elements == 3 && n->element[2]->type == REDIS_REPLY_ARRAY &&
            n->element[2]->elements > 0 && strcmp(n->element[2]->element[0]->str, addr) == 0)
            id = (uint32_t)n->element[0]->integer;
    }
    if (r) freeReplyObject(r);
    return id;
}

/* Until the master lists node id in state, bounded by time. */
static int wait_state(uint32_t id, const char *state) {
    uint64_t end = mono_ms() + WAIT_MS;
    while (mono_ms() < end) {
        redisReply *r = redisCommand(adm, "MOON.TOPOLOGY");
        int in = r && r->type == REDIS_REPLY_ARRAY && id >= 1 && id <= r->elements &&
                 r->element[id - 1]->type == REDIS_REPLY_ARRAY && r->element[id - 1]->elements == 3 &&
                 strcmp(r->element[id - 1]->element[1]->str, state) == 0;
        if (r) freeReplyObject(r);
        if (in) return 0;
        usleep(50 * 1000);
    }
    return -1;
}

/* SET key (a value from seed) through the gateway: 1 if OK, else the
 * error printed. */
static int gw_set(redisContext *g, const char *key, uint64_t seed, char *buf) {
    h_fill(buf, VALUE, seed);
    redisReply *r = redisCommand(g, "SET %s %b", key, buf, (size_t)VALUE);
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (!ok) printf("# SET %s: %s\n", key, r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
    if (r) freeReplyObject(r);
    return ok;
}

static int gw_get_is(redisContext *g, const char *key, uint64_t seed, char *buf) {
    h_fill(buf, VALUE, seed);
    redisReply *r = redisCommand(g, "GET %s", key);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == VALUE && memcmp(r->str, buf, VALUE) == 0;
    if (r) freeReplyObject(r);
    return ok;
}

/* B is gone (declared dead): the gateway learns the table so, then B
 * comes back (back()), and SETs land on A and B. */
static void rejoin_round(uint32_t id_b, int (*back)(void)) {
    round_no++;
    ASSERT(id_b != 0);
    ASSERT(wait_state(id_b, "dead") == 0);
    /* C joins; a SET placed on it (A and C are the live nodes) makes the
     * gateway read the topology, which has B dead. */
    pid_t pid_c = start_node(NODE_C);
    ASSERT(pid_c > 0);
    ASSERT(wait_count("alive", 2) == 0);
    redisContext *g = h_redis(PORT_GATEWAY);
    char *buf = malloc(VALUE), key[64];
    ASSERT(g && buf);
    snprintf(key, sizeof key, "rejoin:%d:c", round_no);
    ASSERT(gw_set(g, key, 1, buf));
    h_stop(pid_c);   /* leaves: A alone, until B is back */
    ASSERT(wait_count("alive", 1) == 0);
    ASSERT(back() == 0);
    ASSERT(wait_count("alive", 2) == 0);
    uint32_t id_back = id_of(NODE_B);
    printf("# round %d: node B was %u, back as %u\n", round_no, id_b, id_back);
    int ok = 0;
    for (int i = 0; i < SETS; i++) {
        snprintf(key, sizeof key, "rejoin:%d:%d", round_no, i);
        ok += gw_set(g, key, (uint64_t)(round_no * 100 + i), buf);
    }
    ASSERT_EQ(ok, SETS);   /* each placed on A and B (replicas 2) */
    for (int i = 0; i < SETS; i++) {
        snprintf(key, sizeof key, "rejoin:%d:%d", round_no, i);
        ASSERT_MSG(gw_get_is(g, key, (uint64_t)(round_no * 100 + i), buf), "GET %s", key);
    }
    free(buf);
    redisFree(g);
}

static int sigcont_b(void) { return kill(pid_b, SIGCONT); }

static int restart_b(void) {
    pid_b = start_node(NODE_B);
    return pid_b > 0 ? 0 : -1;
}

/* SIGSTOP past the node timeout, SIGCONT: the same process registers again. */
static void test_stopped_node_back(void) {
    uint32_t id = id_of(NODE_B);
    ASSERT(h_sigstop(pid_b) == 0);
    ASSERT_STEP(rejoin_round(id, sigcont_b));
}

/* kill -9, then a new process on the same port (it rejoins under a new
 * id: the placements name a node the gateway's table does not have). */
static void test_killed_node_restarted(void) {
    uint32_t id = id_of(NODE_B);
    h_kill(pid_b);
    ASSERT_STEP(rejoin_round(id, restart_b));
}

int main(void) {
    h_init(300);
    h_setup_or_exit(port0 = h_free_ports(30), "free ports");
    const char *mflags[] = {"--node-timeout-ms", "1500", "--heartbeat-ms", "200", NULL};
    h_setup_or_exit(h_start_master(PORT_MASTER, mflags), "master");
    h_setup_or_exit(start_node(NODE_A), "node A");
    h_setup_or_exit(pid_b = start_node(NODE_B), "node B");
    h_setup_or_exit(h_wait_nodes(PORT_MASTER, "alive", 2, 20000), "nodes join");
    h_setup_or_exit(h_start_gateway(PORT_MASTER, PORT_GATEWAY, NULL, NULL), "gateway");
    h_setup_or_exit((adm = h_redis(PORT_MASTER)) ? 0 : -1, "master connection");
    RUN_TEST(test_stopped_node_back);
    RUN_TEST(test_killed_node_restarted);
    redisFree(adm);
    TEST_EXIT();
}
