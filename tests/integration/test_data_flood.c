/* test_data_flood - idle connections on a node's data address (issue 14
 * item 3). A flooder holds 300 connections to node A's data plane that
 * never send a byte, from other loopback sources (127.0.0.2-4), replacing
 * each one the node drops. Meanwhile a new libmoonkv client must connect,
 * put and get, and a re-replication copy must read from A onto a new node;
 * the node's log must stay a few lines, not one per dropped peer.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_A       (port0 + 10)   /* data plane +1: the flooded node */
#define PORT_B       (port0 + 12)   /* data +1: killed, so its replicas are copied again */
#define PORT_C       (port0 + 14)   /* data +1: joins later, copies from A */
#define FLOOD        300
#define FLOOD_SOURCES 3      /* 127.0.0.2 .. 127.0.0.4 */
#define KEYS         20
#define VAL_LEN      (32 * 1024)
#define TIME_LIMIT_S 120
#define NODE_A_LOG   "/tmp/moonkv-test-data-flood-node-a.log"

static char master_addr[32];
static redisContext *master;
static pid_t node_b;

/* ---- the flooder ---- */

static atomic_int flood_stop;
static atomic_long flood_opened;

static int flood_connect(int i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in me = {.sin_family = AF_INET}, node = {.sin_family = AF_INET,
                                                             .sin_port = htons(PORT_A + 1)};
    char ip[20];
    snprintf(ip, sizeof ip, "127.0.0.%d", 2 + i % FLOOD_SOURCES);
    inet_pton(AF_INET, ip, &me.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &node.sin_addr);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 ||
        connect(fd, (struct sockaddr *)&node, sizeof node) != 0) {
        close(fd);
        return -1;
    }
    atomic_fetch_add(&flood_opened, 1);
    return fd;
}

/* Keeps FLOOD idle connections open, replacing dropped ones (at most
 * about 2000 a second, so the test's own work still gets the CPU). */
static void *flood_main(void *arg) {
    struct pollfd pf[FLOOD];
    for (int i = 0; i < FLOOD; i++) pf[i] = (struct pollfd){.fd = flood_connect(i), .events = POLLIN};
    while (!atomic_load(&flood_stop)) {
        for (int i = 0; i < FLOOD; i++) pf[i].revents = 0;
        poll(pf, FLOOD, 50);
        for (int i = 0; i < FLOOD && !atomic_load(&flood_stop); i++) {
            char b[64];
            if (pf[i].fd >= 0 && !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (pf[i].fd >= 0 && recv(pf[i].fd, b, sizeof b, MSG_DONTWAIT) > 0) continue;
            if (pf[i].fd >= 0) close(pf[i].fd);
            pf[i].fd = flood_connect(i);
            usleep(500);
        }
    }
    for (int i = 0; i < FLOOD; i++)
        if (pf[i].fd >= 0) close(pf[i].fd);
    return arg;
}

/* ---- helpers ---- */

static long long cluster_field(const char *field) { return h_info_field(master, "cluster", field); }

static int count_lines(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle)) n++;
    fclose(f);
    return n;
}

static int client_open(mkv_client **mc) {
    return h_mkv_connect(mc, master_addr, "tcp", 2);
}

static pid_t start_node(int port, const char *errlog, const char *level) {
    h_args a = {0};
    h_role_args(&a, "node", master_addr, port);
    h_argf(&a, "--data-addrs=127.0.0.1:%d", port + 1);
    h_arg(&a, "--log-level");
    h_arg(&a, level);
    return h_ready(h_spawn_ex(a.v, NULL, errlog), "127.0.0.1", port, NULL, 20000);
}

static char val[VAL_LEN], back[VAL_LEN];

/* ---- the case ---- */

static void test_members_get_in_while_idle_strangers_flood(void) {
    mkv_client *mc = NULL;
    ASSERT(client_open(&mc) == MKV_OK);
    ASSERT(mkv_register_buffer(mc, val, sizeof val) == MKV_OK);
    ASSERT(mkv_register_buffer(mc, back, sizeof back) == MKV_OK);
    for (int i = 0; i < KEYS; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        h_fill(val, sizeof val, (uint64_t)i + 1);
        ASSERT_MSG(mkv_put(mc, key, strlen(key), val, sizeof val, 2) == MKV_OK, "%s", mkv_last_error(mc));
    }
    mkv_close(mc);
    int lines_before = count_lines(NODE_A_LOG, "data plane");

    pthread_t th;
    ASSERT(pthread_create(&th, NULL, flood_main, NULL) == 0);
    usleep(1500 * 1000);   /* the flood is in place, past a handshake deadline */

    /* a new client: connects, writes (to A and B) and reads */
    mc = NULL;
    int rc = client_open(&mc);
    int ok = rc == MKV_OK && mkv_register_buffer(mc, val, sizeof val) == MKV_OK &&
             mkv_register_buffer(mc, back, sizeof back) == MKV_OK;
    h_fill(val, sizeof val, 777);
    int put = ok ? mkv_put(mc, "flood-new", 9, val, sizeof val, 2) : rc;
    size_t got = 0;
    int get = put == MKV_OK ? mkv_get(mc, "flood-new", 9, back, sizeof back, &got) : put;
    int same = get == MKV_OK && got == sizeof val && memcmp(val, back, sizeof val) == 0;
    char why[256];
    snprintf(why, sizeof why, "%s", mc ? mkv_last_error(mc) : mkv_last_error(NULL));

    /* a re-replication copy: B dies, C joins and copies B's replicas from A */
    h_kill(node_b);
    pid_t c = start_node(PORT_C, NULL, "warning");
    uint64_t end = mono_ms() + 30000;
    while (mono_ms() < end && (cluster_field("nodes_dead") < 1 || cluster_field("under_replicated") != 0))
        usleep(100 * 1000);
    long long under = cluster_field("under_replicated"), done = cluster_field("tasks_done");

    atomic_store(&flood_stop, 1);
    pthread_join(th, NULL);
    int lines = count_lines(NODE_A_LOG, "data plane") - lines_before;
    printf("# flood: %ld connections opened; client put %d get %d; under_replicated %lld, tasks_done "
           "%lld; node A wrote %d data-plane log lines\n", atomic_load(&flood_opened), put, get,
           under, done, lines);
    ASSERT_MSG(ok, "new client: %s", why);
    ASSERT_MSG(put == MKV_OK && same, "new client put %d get %d: %s", put, get, why);
    ASSERT(c > 0);
    ASSERT_MSG(under == 0 && done >= 1, "re-replication did not finish (under_replicated %lld)", under);
    ASSERT_MSG(atomic_load(&flood_opened) > FLOOD, "the node never dropped an idle connection");
    ASSERT_MSG(lines >= 0 && lines <= 4, "%d log lines", lines);
    /* every old key is still whole */
    for (int i = 0; i < KEYS; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        h_fill(val, sizeof val, (uint64_t)i + 1);
        ASSERT(mkv_get(mc, key, strlen(key), back, sizeof back, &got) == MKV_OK);
        ASSERT(got == sizeof val && memcmp(val, back, sizeof val) == 0);
    }
    mkv_close(mc);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(16), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    const char *const extra[] = {"--replicas", "2", "--node-timeout-ms", "1500", NULL};
    int up = h_start_master(PORT_MASTER, extra) > 0 && start_node(PORT_A, NODE_A_LOG, "notice") > 0 &&
             (node_b = start_node(PORT_B, NULL, "warning")) > 0 && h_wait_nodes(PORT_MASTER, "alive", 2, 20000) == 0 &&
             h_wait_node_registered(PORT_A, 10000) == 0 && h_wait_node_registered(PORT_B, 10000) == 0 &&
             (master = h_redis(PORT_MASTER)) != NULL;
    h_setup_or_exit(up ? 0 : -1, "start master and nodes");
    RUN_TEST(test_members_get_in_while_idle_strangers_flood);
    redisFree(master);
    h_stop_all();
    unlink(NODE_A_LOG);
    TEST_EXIT();
}
