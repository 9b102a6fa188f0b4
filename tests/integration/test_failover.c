/* tests/integration/test_failover.c - standby masters and failover through
 * etcd: an etcd from the Debian package (etcd-server) on fixed ports with a
 * temporary data dir, a leader and a standby master, two nodes, a gateway
 * and a libmoonkv client, all with --etcd and no --master. The leader is
 * killed (-9): the standby must lead within about the lease TTL, and the
 * gateway and the library must place new objects through it (the times to
 * the first put and get are printed). A leader stopped (SIGSTOP) past its
 * lease must place nothing when it runs again, and a write grant it made
 * before it stopped is refused by the nodes, which serve the new leader's
 * term only (fencing).
 *
 * Objects stored before a failover are NOT expected to survive it: the new
 * leader starts with an empty table (the rebuild from node reports is not
 * built yet), so only new puts are asserted. Ports 25500-25599. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "etcd/etcd.h"
#include "grant_harness.h"
#include "test.h"

#define ETCD_PORT    25590
#define ETCD_PEER    25591
#define MASTER_A     25500
#define MASTER_B     25501
#define NODE_PORT    25510   /* + i; data plane on 25520 + i */
#define GATEWAY_PORT 25530
#define NODES        2
#define LEASE_S      2
#define TIME_LIMIT_S 100

static char etcd_url[64];
static char datadir[] = "/tmp/moonkv-etcd-XXXXXX";
static pid_t etcd_pid, master_a, master_b;
static redisContext *gw;
static mkv_client *mc;
static char *buf;   /* registered with mc */
#define BUF_LEN 4096

static void remove_datadir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", datadir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", datadir);
}

/* etcd answers a range request within timeout_ms. */
static int wait_etcd(int timeout_ms) {
    char err[ETCD_ERR_LEN], val[64];
    etcd_client *ec = etcd_create(etcd_url, 500, err, sizeof err);
    if (!ec) return -1;
    int found;
    int64_t rev;
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    int rc = -1;
    while (mono_ms() < end && rc != 0) {
        rc = etcd_get(ec, "/moonkv/probe", &found, val, sizeof val, &rev, err, sizeof err);
        if (rc != 0) usleep(100000);
    }
    etcd_free(ec);
    return rc;
}

static pid_t start_etcd(void) {
    char out[128];
    snprintf(out, sizeof out, "%s/etcd.log", datadir);
    h_args a = {0};
    h_arg(&a, "etcd");
    h_arg(&a, "--data-dir");
    h_argf(&a, "%s/data", datadir);
    h_argf(&a, "--listen-client-urls=http://127.0.0.1:%d", ETCD_PORT);
    h_argf(&a, "--advertise-client-urls=http://127.0.0.1:%d", ETCD_PORT);
    h_argf(&a, "--listen-peer-urls=http://127.0.0.1:%d", ETCD_PEER);
    h_argf(&a, "--initial-advertise-peer-urls=http://127.0.0.1:%d", ETCD_PEER);
    h_argf(&a, "--initial-cluster=default=http://127.0.0.1:%d", ETCD_PEER);
    pid_t pid = h_spawn_ex(a.v, out, out);
    if (pid > 0 && wait_etcd(15000) != 0) {
        h_kill(pid);
        return -1;
    }
    return pid;
}

/* A moonkv-server of role with --etcd and extra flags (NULL-terminated). */
static pid_t start_role(const char *role, int port, const char *const *extra) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, role);
    h_argf(&a, "--port=%d", port);
    h_argf(&a, "--etcd=%s", etcd_url);
    h_arg(&a, "--cluster-name");
    h_arg(&a, "failover-test");
    h_argf(&a, "--etcd-lease-ttl=%d", LEASE_S);
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    return h_ready(h_spawn(a.v), "127.0.0.1", port, NULL, 20000);
}

static pid_t start_node(int i) {
    char seg[] = "32MB", data[48];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT + 10 + i);
    const char *extra[] = {"--segment-size", seg, data, "--prefault", "no", NULL};
    return start_role("node", NODE_PORT + i, extra);
}

/* The ha_role field of a master's INFO cluster ("leader", "standby"), or "". */
static void ha_role(int port, char *out, size_t len) {
    out[0] = '\0';
    redisContext *c = h_redis_ms("127.0.0.1", port, 1000);
    if (!c) return;
    redisReply *r = redisCommand(c, "INFO cluster");
    const char *f = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "ha_role:") : NULL;
    if (f) snprintf(out, len, "%.*s", (int)strcspn(f + 8, "\r\n"), f + 8);
    freeReplyObject(r);
    redisFree(c);
}

static int wait_role(int port, const char *want, int timeout_ms) {
    char role[32];
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    do {
        ha_role(port, role, sizeof role);
        if (strcmp(role, want) == 0) return 0;
        usleep(20000);
    } while (mono_ms() < end);
    return -1;
}

/* A master's reply to a placement; 1 if it is "-READONLY ...". */
static int refuses_placement(int port, const char *key, char *why, size_t whylen) {
    redisContext *c = h_redis_ms("127.0.0.1", port, 2000);
    if (!c) return 0;
    redisReply *r = redisCommand(c, "MOON.PUTSTART %s 100", key);
    int ro = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0;
    snprintf(why, whylen, "%s", r && r->str ? r->str : "(no string reply)");
    freeReplyObject(r);
    redisFree(c);
    return ro;
}

static int gw_set(const char *key, const char *val) {
    redisReply *r = redisCommand(gw, "SET %s %s", key, val);
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    return ok;
}

static int gw_get_is(const char *key, const char *val) {
    redisReply *r = redisCommand(gw, "GET %s", key);
    int ok = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, val) == 0;
    freeReplyObject(r);
    return ok;
}

static int lib_put(const char *key, const char *val) {
    size_t n = strlen(val);
    memcpy(buf, val, n);
    return mkv_put(mc, key, strlen(key), buf, n, 0) == MKV_OK;
}

static int lib_get_is(const char *key, const char *val) {
    size_t got = 0;
    memset(buf + 2048, 0, 1024);
    return mkv_get(mc, key, strlen(key), buf + 2048, 1024, &got) == MKV_OK && got == strlen(val) &&
           memcmp(buf + 2048, val, got) == 0;
}

/* ---- cases ---- */

static void test_leader_and_standby(void) {
    ASSERT(wait_role(MASTER_A, "leader", 10000) == 0);
    ASSERT(wait_role(MASTER_B, "standby", 5000) == 0);
    char why[256];
    ASSERT_MSG(refuses_placement(MASTER_B, "k", why, sizeof why), "standby said: %s", why);
    char want[64];
    snprintf(want, sizeof want, "READONLY leader is 127.0.0.1:%d", MASTER_A);
    ASSERT_STREQ(why, want);
}

static void test_writes_work(void) {
    ASSERT(h_wait_nodes(MASTER_A, "alive", NODES, 20000) == 0);
    ASSERT(gw_set("before-gw", "value-1"));
    ASSERT(gw_get_is("before-gw", "value-1"));
    ASSERT(lib_put("before-lib", "value-2"));
    ASSERT(lib_get_is("before-lib", "value-2"));
}

/* ms from t0 until f(key, val) holds (retrying), or -1 after limit_ms. */
static long long until(int (*f)(const char *, const char *), const char *key, const char *val,
                       uint64_t t0, int limit_ms) {
    while (mono_ms() - t0 < (uint64_t)limit_ms) {
        if (f(key, val)) return (long long)(mono_ms() - t0);
        usleep(20000);
    }
    return -1;
}

static void test_kill_leader(void) {
    h_kill(master_a);
    uint64_t t0 = mono_ms();
    ASSERT(wait_role(MASTER_B, "leader", 10000) == 0);
    long long elect = (long long)(mono_ms() - t0);
    long long gw_put = until(gw_set, "after-gw", "value-3", t0, 15000);
    long long gw_get = gw_put < 0 ? -1 : until(gw_get_is, "after-gw", "value-3", t0, 15000);
    long long lib_p = until(lib_put, "after-lib", "value-4", t0, 15000);
    long long lib_g = lib_p < 0 ? -1 : until(lib_get_is, "after-lib", "value-4", t0, 15000);
    printf("# failover after kill -9 of the leader (lease %d s): standby leads after %lld ms; "
           "gateway first put %lld ms, first get %lld ms; libmoonkv first put %lld ms, first get %lld ms\n",
           LEASE_S, elect, gw_put, gw_get, lib_p, lib_g);
    /* Within the lease plus the standby's poll and one etcd round. */
    ASSERT_MSG(elect <= LEASE_S * 1000 + 1500, "election took %lld ms", elect);
    ASSERT(gw_put >= 0 && gw_get >= 0);
    ASSERT(lib_p >= 0 && lib_g >= 0);
}

/* The nodes' data_rejected, summed. */
static long long rejected_by_nodes(void) {
    long long sum = 0;
    for (int i = 0; i < NODES; i++) {
        redisContext *c = h_redis(NODE_PORT + i);
        sum += c ? h_info_field(c, "node", "data_rejected") : 0;
        if (c) redisFree(c);
    }
    return sum;
}

static void test_fencing(void) {
    /* A new standby to take over while the leader (B) is stopped. */
    master_a = start_role("master", MASTER_A, NULL);
    ASSERT(master_a > 0);
    ASSERT(wait_role(MASTER_A, "standby", 5000) == 0);
    /* A grant of the leader that a client keeps past its fall. */
    gh_grant old;
    ASSERT(gh_take(MASTER_B, "stale-grant", 4096, 1, &old) == 0);
    ASSERT(kill(master_b, SIGSTOP) == 0);
    uint64_t t0 = mono_ms();
    ASSERT(wait_role(MASTER_A, "leader", 10000) == 0);
    long long took = (long long)(mono_ms() - t0);
    while (mono_ms() - t0 < (LEASE_S + 1) * 1000) usleep(50000);
    ASSERT(kill(master_b, SIGCONT) == 0);
    /* At once, before its keep-alive thread has heard from etcd. */
    char why[256];
    ASSERT_MSG(refuses_placement(MASTER_B, "fenced", why, sizeof why), "old leader said: %s", why);
    ASSERT(wait_role(MASTER_B, "standby", 5000) == 0);
    ASSERT(refuses_placement(MASTER_B, "fenced2", why, sizeof why));
    printf("# SIGSTOP of the leader: the standby led after %lld ms; old leader: %s\n", took, why);
    /* And the cluster goes on through the new leader. */
    ASSERT(until(gw_set, "after-fence", "value-5", mono_ms(), 15000) >= 0);
    ASSERT(until(gw_get_is, "after-fence", "value-5", mono_ms(), 15000) >= 0);
    /* The nodes serve the new term only: the old leader's grant is void. */
    char err[256] = "", data[4096];
    memset(data, 'x', sizeof data);
    long long rejected = rejected_by_nodes();
    int st = gh_write(&old, data, err, sizeof err);
    gh_free(&old);
    ASSERT_MSG(st == TE_EAUTH, "old leader's grant: status %d (%s)", st, err);
    ASSERT(rejected_by_nodes() > rejected);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    if (!mkdtemp(datadir)) return 1;
    h_cleanup_hook = remove_datadir;
    snprintf(etcd_url, sizeof etcd_url, "http://127.0.0.1:%d", ETCD_PORT);
    if ((etcd_pid = start_etcd()) < 0) {
        printf("not ok - etcd: cannot start etcd (package etcd-server; see %s/etcd.log)\n", datadir);
        return 1;
    }
    master_a = start_role("master", MASTER_A, NULL);
    if (master_a > 0 && wait_role(MASTER_A, "leader", 10000) == 0)
        master_b = start_role("master", MASTER_B, NULL);
    for (int i = 0; i < NODES && master_b > 0; i++)
        if (start_node(i) < 0) master_b = -1;
    const char *gw_extra[] = {"--segment-size", "16MB", NULL};
    pid_t gwp = master_b > 0 ? start_role("gateway", GATEWAY_PORT, gw_extra) : -1;
    if (gwp > 0) gw = h_redis(GATEWAY_PORT);
    mkv_options opt;
    mkv_options_init(&opt);
    opt.etcd = etcd_url;
    opt.cluster_name = "failover-test";
    opt.timeout_ms = 3000;
    buf = calloc(1, BUF_LEN);
    if (!gw || mkv_connect(&mc, &opt) != MKV_OK || mkv_register_buffer(mc, buf, BUF_LEN) != MKV_OK) {
        printf("not ok - failover/setup: %s\n", mc ? mkv_last_error(mc) : mkv_last_error(NULL));
        return 1;
    }
    RUN_TEST(test_leader_and_standby);
    RUN_TEST(test_writes_work);
    RUN_TEST(test_kill_leader);
    RUN_TEST(test_fencing);
    mkv_close(mc);
    redisFree(gw);
    free(buf);
    h_stop_all();
    TEST_EXIT();
}
