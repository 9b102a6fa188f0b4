/* test_master_auth - a master with requirepass (issue 14 item 6, issue 13):
 * nodes, gateways and libmoonkv clients with master_auth join and work
 * end to end, also after the master restarts (every reconnection AUTHs);
 * with a wrong or missing password they fail with a message that says
 * so; an unauthenticated connection cannot place, remove or drain.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER   (port0 + 0)
#define PORT_NODE     (port0 + 10)   /* RESP of the good node; data plane +1 */
#define PORT_NODE_BAD (port0 + 12)   /* wrong password; data +1 */
#define PORT_NODE_NO  (port0 + 14)   /* no password; data +1 */
#define PORT_GATEWAY  (port0 + 20)
#define PORT_GW_BAD   (port0 + 21)
#define PASSWORD      "m4ster-pw"
#define TIME_LIMIT_S  90
#define LOG_BAD_NODE  "/tmp/moonkv-test-master-auth-node-bad.log"
#define LOG_NO_NODE   "/tmp/moonkv-test-master-auth-node-none.log"
#define LOG_BAD_GW    "/tmp/moonkv-test-master-auth-gw-bad.log"

static char master_addr[32];
static pid_t master_pid;

/* ---- helpers ---- */

static redisContext *master_conn(const char *password) { return h_redis_auth(PORT_MASTER, password); }

/* Alive nodes the master lists, asked with the password; -1 on error. */
static int alive_nodes(void) {
    redisContext *m = master_conn(PASSWORD);
    int n = m ? h_count_nodes(m, "alive") : -1;
    if (m) redisFree(m);
    return n;
}

static int wait_alive(int want, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    int got;
    while ((got = alive_nodes()) != want && mono_ms() < end) usleep(50 * 1000);
    return got;
}

static pid_t spawn_role(const char *role, int port, const char *password, const char *errlog) {
    h_args a = {0};
    h_role_args(&a, role, master_addr, port);
    if (strcmp(role, "node") == 0) h_argf(&a, "--data-addrs=127.0.0.1:%d", port + 1);
    if (password) {
        h_arg(&a, "--master-auth");
        h_arg(&a, password);
    }
    return h_spawn_ex(a.v, NULL, errlog);
}

static pid_t spawn_node(int port, const char *password, const char *errlog) {
    return spawn_role("node", port, password, errlog);
}

static pid_t spawn_gateway(int port, const char *password, const char *errlog) {
    return spawn_role("gateway", port, password, errlog);
}

static pid_t start_master(void) {
    const char *const extra[] = {"--requirepass", PASSWORD, "--replicas", "1", NULL};
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, "master");
    h_argf(&a, "--port=%d", PORT_MASTER);
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    return h_ready(h_spawn(a.v), "127.0.0.1", PORT_MASTER, PASSWORD, 20000);
}

static int client_connect(mkv_client **mc, const char *password) {
    mkv_options o;
    mkv_options_init(&o);
    o.master = master_addr;
    o.password = password;
    o.transport = "tcp";
    o.timeout_ms = 3000;
    return mkv_connect(mc, &o);
}

/* ---- nodes ---- */

static void test_node_with_password_joins(void) {
    ASSERT_MSG(wait_alive(1, 15000) == 1, "alive nodes: %d", alive_nodes());
    ASSERT(h_wait_node_registered(PORT_NODE, 10000) == 0);
}

static void test_node_with_wrong_password_is_told(void) {
    pid_t p = spawn_node(PORT_NODE_BAD, "not-the-password", LOG_BAD_NODE);
    ASSERT(p > 0);
    ASSERT_MSG(h_wait_file_has(LOG_BAD_NODE, "the master refused AUTH", 10000),
               "the node's log does not say the password was refused");
    ASSERT(h_file_has(LOG_BAD_NODE, "master_auth"));
    ASSERT_EQ(alive_nodes(), 1);
    h_stop(p);
}

static void test_node_without_password_is_told(void) {
    pid_t p = spawn_node(PORT_NODE_NO, NULL, LOG_NO_NODE);
    ASSERT(p > 0);
    ASSERT_MSG(h_wait_file_has(LOG_NO_NODE, "requirepass: set master_auth", 10000),
               "the node's log does not say a password is needed");
    ASSERT(!h_file_has(LOG_NO_NODE, "bad MOON.CHALLENGE reply"));
    ASSERT_EQ(alive_nodes(), 1);
    h_stop(p);
}

/* ---- unauthenticated peers ---- */

static int noauth(redisContext *c, const char *cmd) {
    redisReply *r = redisCommand(c, cmd);
    int ok = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0;
    if (!ok) printf("# %s answered %s\n", cmd, r && r->str ? r->str : "(no error)");
    if (r) freeReplyObject(r);
    return ok;
}

static void test_unauthenticated_cannot_place_remove_drain(void) {
    redisContext *c = master_conn(NULL);
    ASSERT(c != NULL);
    ASSERT(noauth(c, "MOON.PUTSTART junk 1000"));
    ASSERT(noauth(c, "MOON.PUTEND junk 0"));
    ASSERT(noauth(c, "MOON.REMOVE junk"));
    ASSERT(noauth(c, "MOON.DRAIN 1"));
    ASSERT(noauth(c, "MOON.TOPOLOGY"));
    redisFree(c);
    redisContext *m = master_conn(PASSWORD);
    ASSERT(m != NULL);
    redisReply *r = redisCommand(m, "MOON.GET junk");
    /* nothing was placed: the key is unknown */
    ASSERT_MSG(r && (r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_ERROR), "junk exists");
    if (r) freeReplyObject(r);
    ASSERT_EQ(alive_nodes(), 1);   /* not drained */
    redisFree(m);
}

/* With requirepass, AUTH is the gate of the commands that change the
 * cluster: an authenticated connection places without proving the
 * cluster secret (docs/SECURITY.md). */
static void test_authenticated_needs_no_proof(void) {
    redisContext *m = master_conn(PASSWORD);
    ASSERT(m != NULL);
    redisReply *r = redisCommand(m, "MOON.PUTSTART auth-noproof 1000 REPLICAS 1");
    ASSERT_MSG(r && r->type == REDIS_REPLY_ARRAY, "PUTSTART: %s", r && r->str ? r->str : "(not placed)");
    freeReplyObject(r);
    r = redisCommand(m, "MOON.PUTREVOKE auth-noproof");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(m);
}

/* ---- libmoonkv ---- */

static void test_client_with_password_puts_and_gets(void) {
    mkv_client *mc = NULL;
    int rc = client_connect(&mc, PASSWORD);
    ASSERT_MSG(rc == MKV_OK, "connect: %s", mkv_last_error(mc));
    static char val[100000], back[100000];
    h_fill(val, sizeof val, 7);
    ASSERT(mkv_register_buffer(mc, val, sizeof val) == MKV_OK);
    ASSERT(mkv_register_buffer(mc, back, sizeof back) == MKV_OK);
    ASSERT_MSG(mkv_put(mc, "auth-k1", 7, val, sizeof val, 1) == MKV_OK, "%s", mkv_last_error(mc));
    size_t got = 0;
    ASSERT_MSG(mkv_get(mc, "auth-k1", 7, back, sizeof back, &got) == MKV_OK, "%s", mkv_last_error(mc));
    ASSERT_EQ(got, sizeof val);
    ASSERT(memcmp(val, back, sizeof val) == 0);
    mkv_close(mc);
}

static void test_client_wrong_or_missing_password(void) {
    mkv_client *mc = NULL;
    int rc = client_connect(&mc, "wrong");
    ASSERT_EQ(rc, MKV_EAUTH);
    ASSERT_MSG(strstr(mkv_last_error(NULL), "WRONGPASS") != NULL, "%s", mkv_last_error(NULL));
    rc = client_connect(&mc, NULL);
    ASSERT_EQ(rc, MKV_EAUTH);
    ASSERT_MSG(strstr(mkv_last_error(NULL), "password") != NULL, "%s", mkv_last_error(NULL));
}

/* ---- gateways ---- */

static void test_gateway_with_password_works(void) {
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g != NULL);
    redisReply *r = redisCommand(g, "SET gw-k1 hello-through-the-gateway");
    ASSERT_MSG(r && r->type == REDIS_REPLY_STATUS, "SET: %s", r && r->str ? r->str : "(none)");
    freeReplyObject(r);
    r = redisCommand(g, "GET gw-k1");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "hello-through-the-gateway") == 0);
    freeReplyObject(r);
    r = redisCommand(g, "DBSIZE");   /* the gateway's own control connection AUTHs too */
    ASSERT_MSG(r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1, "DBSIZE %lld",
               r ? r->integer : -1);
    freeReplyObject(r);
    redisFree(g);
}

static void test_gateway_with_wrong_password_exits(void) {
    pid_t p = spawn_gateway(PORT_GW_BAD, "wrong", LOG_BAD_GW);
    ASSERT(p > 0);
    int status = 0;
    ASSERT_MSG(h_wait_exit(p, 10000, &status) == 0, "the gateway kept running");
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    ASSERT_MSG(h_file_has(LOG_BAD_GW, "WRONGPASS"), "the gateway's log does not name the refusal");
}

/* ---- reconnections ---- */

static void test_everyone_reauthenticates_after_a_master_restart(void) {
    mkv_client *mc = NULL;
    ASSERT(client_connect(&mc, PASSWORD) == MKV_OK);
    /* the node knows what it holds (it took every holding) before the stop */
    redisContext *m = master_conn(PASSWORD);
    ASSERT(m);
    uint64_t taken_by = mono_ms() + 10000;
    while (h_info_field(m, "cluster", "holdings_pending") != 0 && mono_ms() < taken_by) usleep(20 * 1000);
    ASSERT_EQ(h_info_field(m, "cluster", "holdings_pending"), 0);
    redisFree(m);
    h_stop(master_pid);
    master_pid = start_master();
    ASSERT(master_pid > 0);
    /* the node reconnects, AUTHs, registers again and reports what it holds */
    ASSERT_MSG(wait_alive(1, 20000) == 1, "alive nodes after restart: %d", alive_nodes());
    ASSERT_MSG(h_wait_rebuilt(PORT_MASTER, PASSWORD, 20000) == 0, "the master did not rebuild its table");
    /* the client's broken connection reopens with AUTH */
    int rc = mkv_exists(mc, "auth-k1", 7);
    if (rc < 0) rc = mkv_exists(mc, "auth-k1", 7);   /* the first may see the old socket die */
    /* the node reported it: the restarted master has it again */
    ASSERT_MSG(rc == 1, "exists: %d %s", rc, mkv_last_error(mc));
    static char val[5000];
    h_fill(val, sizeof val, 9);
    ASSERT(mkv_register_buffer(mc, val, sizeof val) == MKV_OK);
    /* the client's topology names the old node id: refresh by reconnecting */
    mkv_close(mc);
    ASSERT(client_connect(&mc, PASSWORD) == MKV_OK);
    ASSERT(mkv_register_buffer(mc, val, sizeof val) == MKV_OK);
    /* a put while the node's report is still being taken is told to try again */
    uint64_t end = mono_ms() + 10000;
    while ((rc = mkv_put(mc, "auth-k2", 7, val, sizeof val, 1)) == MKV_ETRYAGAIN && mono_ms() < end)
        usleep(50 * 1000);
    ASSERT_MSG(rc == MKV_OK, "%s", mkv_last_error(mc));
    mkv_close(mc);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(22), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    master_pid = start_master();
    pid_t node = master_pid > 0 ? h_ready(spawn_node(PORT_NODE, PASSWORD, NULL), "127.0.0.1",
                                          PORT_NODE, NULL, 20000)
                                : -1;
    if (node < 0) {
        printf("not ok - start master and node\n");
        return 1;
    }
    RUN_TEST(test_node_with_password_joins);
    pid_t gw = h_ready(spawn_gateway(PORT_GATEWAY, PASSWORD, NULL), "127.0.0.1", PORT_GATEWAY,
                       NULL, 20000);
    if (gw < 0) printf("# the gateway with the right password did not start\n");
    RUN_TEST(test_node_with_wrong_password_is_told);
    RUN_TEST(test_node_without_password_is_told);
    RUN_TEST(test_unauthenticated_cannot_place_remove_drain);
    RUN_TEST(test_authenticated_needs_no_proof);
    RUN_TEST(test_client_with_password_puts_and_gets);
    RUN_TEST(test_client_wrong_or_missing_password);
    RUN_TEST(test_gateway_with_password_works);
    RUN_TEST(test_gateway_with_wrong_password_exits);
    RUN_TEST(test_everyone_reauthenticates_after_a_master_restart);
    unlink(LOG_BAD_NODE);
    unlink(LOG_NO_NODE);
    unlink(LOG_BAD_GW);
    h_stop_all();
    TEST_EXIT();
}
