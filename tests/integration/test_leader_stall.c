/* tests/integration/test_leader_stall.c - a leader that stalls (SIGSTOP)
 * past its lease: etcd, a leader A and a standby B (lease 2 s), two nodes,
 * a gateway and a libmoonkv client, all with --etcd.
 *
 * - The nodes, the gateway and the client leave the stalled leader for
 *   the elected one soon after the election (etcd/leader_watch.h): before
 *   it, a node's heartbeat waited out its 5 s timeout on the stalled
 *   connection and the gateway's requests hung as long. The times from
 *   the election are printed and bounded (generously: 2 s; they were
 *   5-8 s without the watch).
 * - A resumed after twice its lease acknowledges nothing as leader: on a
 *   connection opened before the stop, a MOON.PUTSTART, PUTEND, MPUTEND,
 *   REMOVE and FLUSH that were written to its socket while it was stopped
 *   (so it reads them the moment it runs again) are all refused, and so
 *   are the same sent after it ran again.
 * - A put through the gateway works within 2 s of the new leader.
 * - Every exit of a master leaves a line in its log (SIGTERM, a killing
 *   signal, a crash), and A logged why it stepped down. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "etcd_harness.h"
#include "probe_harness.h"
#include "test.h"

#define CLUSTER      "stall-test"
#define NODES        2
#define LEASE_S      2
#define SETUP_WAIT_MS 30000
#define TIME_LIMIT_S 240

static h_etcd etcd;
static int base;   /* etcd +0/+1, masters +2/+3, nodes +4.. (RESP, data +1), gateway +12 */
static pid_t master_a, master_b;
static h_probe probe;
static char log_a[64];

#define ETCD_PORT (base)
#define MASTER_A  (base + 2)
#define MASTER_B  (base + 3)
#define NODE_PORT(i) (base + 4 + 2 * (i))
#define GATEWAY_PORT (base + 12)

/* The logs stay when a case failed. */
static void remove_datadir(void) {
    if (test_failed_cases) printf("# logs kept in %s\n", etcd.dir);
    else h_etcd_remove(&etcd);
}

static pid_t start_role(const char *role, int port, const char *const *extra) {
    return h_start_etcd_role(role, port, etcd.url, CLUSTER, LEASE_S, extra);
}

/* Master A logs to a file: every exit must leave a line there. */
static pid_t start_master_logged(int port, const char *log) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, "master");
    h_argf(&a, "--port=%d", port);
    h_argf(&a, "--etcd=%s", etcd.url);
    h_arg(&a, "--cluster-name");
    h_arg(&a, CLUSTER);
    h_argf(&a, "--etcd-lease-ttl=%d", LEASE_S);
    h_arg(&a, "--replicas");
    h_arg(&a, "2");
    return h_start(a.v, port, log, log, 20000);
}

/* A role whose log goes to <etcd dir>/<role>-<port>.log (kept on failure). */
static pid_t start_logged(const char *role, int port, const char *const *extra) {
    char log[96];
    snprintf(log, sizeof log, "%s/%s-%d.log", etcd.dir, role, port);
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, role);
    h_argf(&a, "--port=%d", port);
    h_argf(&a, "--etcd=%s", etcd.url);
    h_arg(&a, "--cluster-name");
    h_arg(&a, CLUSTER);
    h_argf(&a, "--etcd-lease-ttl=%d", LEASE_S);
    h_argv(&a, extra);
    return h_start(a.v, port, log, log, 20000);
}

static pid_t start_node(int i) {
    char data[48];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT(i) + 1);
    const char *extra[] = {"--segment-size", "32MB", data, "--prefault", "no", NULL};
    return start_logged("node", NODE_PORT(i), extra);
}

/* The ha_term of the master on port (INFO cluster), -1 if unknown. */
static long long ha_term(int port) { return h_port_info(port, "cluster", "ha_term"); }

/* ---- what the stalled side's peers do meanwhile ---- */

/* A thread that keeps trying one kind of put from the stop on and
 * records when the first one after the election went through. */
typedef struct prober {
    pthread_t th;
    int gateway;            /* 1: SET through the gateway; 0: mkv_put */
    mkv_client *mc;
    redisContext *gw;
    uint64_t first_ok_ms;   /* mono ms of the first success after started_ms */
    uint64_t started_ms;
    uint64_t longest_ms;    /* the longest single attempt */
    char last_err[200];     /* the last failure's text */
    int fails;
    volatile int stop;
} prober;

static void *prober_main(void *arg) {
    prober *p = arg;
    char key[64];
    const char *val = "stalled-value";
    for (int i = 0; !p->stop && !p->first_ok_ms; i++) {
        snprintf(key, sizeof key, "%s-%d", p->gateway ? "gw" : "lib", i);
        uint64_t t = mono_ms();
        int ok;
        if (p->gateway) {
            if (!p->gw) p->gw = h_redis_ms("127.0.0.1", GATEWAY_PORT, 10000);
            redisReply *r = p->gw ? redisCommand(p->gw, "SET %s %s", key, val) : NULL;
            ok = r && r->type == REDIS_REPLY_STATUS;
            if (!ok) snprintf(p->last_err, sizeof p->last_err, "%s", r && r->str ? r->str : p->gw ? p->gw->errstr : "no connection");
            freeReplyObject(r);
            if (!r && p->gw) redisFree(p->gw), p->gw = NULL;   /* broken: a new one next time */
        } else {
            memcpy(probe.buf, val, strlen(val));   /* the registered buffer */
            ok = mkv_put(p->mc, key, strlen(key), probe.buf, strlen(val), 2) == MKV_OK;
            if (!ok) snprintf(p->last_err, sizeof p->last_err, "%s", mkv_last_error(p->mc));
        }
        uint64_t now = mono_ms();
        if (now - t > p->longest_ms) p->longest_ms = now - t;
        if (ok && t > p->started_ms) p->first_ok_ms = now;
        if (!ok) p->fails++, usleep(20000);
    }
    return NULL;
}

/* ---- the cases ---- */

/* Commands written on c while its master is stopped: read once it runs. */
static void pipeline_while_stopped(redisContext *c, const char *stale_key) {
    redisAppendCommand(c, "MOON.PUTEND %s 0", stale_key);
    redisAppendCommand(c, "MOON.PUTSTART stopped-new 64");
    redisAppendCommand(c, "MOON.MPUTEND %s 0", stale_key);
    redisAppendCommand(c, "MOON.REMOVE %s", stale_key);
    redisAppendCommand(c, "MOON.FLUSH");
    int done = 0;
    while (!done && redisBufferWrite(c, &done) == REDIS_OK) {}
}

/* n replies on c: how many were anything but an error (each printed). */
static int replies_not_refused(redisContext *c, int n, const char *when) {
    int accepted = 0;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
            printf("# %s: reply %d: connection lost (%s)\n", when, i, c->errstr);
            return accepted;   /* a lost reply acknowledged nothing */
        }
        if (r->type != REDIS_REPLY_ERROR) accepted++;
        printf("# %s: reply %d: %s\n", when, i, r->type == REDIS_REPLY_ERROR ? r->str : "(accepted)");
        freeReplyObject(r);
    }
    return accepted;
}

/* Until every node serves term (INFO node master_term): ms from t0 per
 * node into left[], -1 where it did not within limit_ms. */
static void wait_nodes_term(long long term, uint64_t t0, int limit_ms, long long *left) {
    for (int i = 0; i < NODES; i++) left[i] = -1;
    int pending = NODES;
    while (pending && mono_ms() - t0 < (uint64_t)limit_ms) {
        for (int i = 0; i < NODES; i++) {
            if (left[i] >= 0) continue;
            if (h_port_info(NODE_PORT(i), "node", "master_term") == term) {
                left[i] = (long long)(mono_ms() - t0);
                pending--;
            }
        }
        usleep(20000);
    }
}

static void test_stalled_leader(void) {
    /* A connection to the leader opened before it stops, with a put started. */
    redisContext *pre = h_proven(h_redis_ms("127.0.0.1", MASTER_A, 2000), "");   /* a client's */
    ASSERT(pre);
    redisReply *r = redisCommand(pre, "MOON.PUTSTART stale-put 64 REPLICAS 1");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    long long term_a = ha_term(MASTER_A);
    ASSERT(term_a > 0);

    /* Peers that keep working through the stall. */
    prober gw = {.gateway = 1, .gw = h_redis_ms("127.0.0.1", GATEWAY_PORT, 10000)};
    prober lib = {.gateway = 0, .mc = probe.mc};
    ASSERT(gw.gw && lib.mc);

    ASSERT(h_sigstop(master_a) == 0);
    uint64_t t_stop = mono_ms();
    gw.started_ms = lib.started_ms = t_stop;
    pthread_create(&gw.th, NULL, prober_main, &gw);
    pthread_create(&lib.th, NULL, prober_main, &lib);
    pipeline_while_stopped(pre, "stale-put");

    ASSERT(h_wait_role(MASTER_B, "leader", 15000) == 0);
    uint64_t t_elect = mono_ms();
    long long term_b = ha_term(MASTER_B);
    long long nodes_left[NODES];
    wait_nodes_term(term_b, t_elect, 10000, nodes_left);
    uint64_t join_end = mono_ms() + 15000;
    while ((!gw.first_ok_ms || !lib.first_ok_ms) && mono_ms() < join_end) usleep(20000);
    gw.stop = lib.stop = 1;
    pthread_join(gw.th, NULL);
    pthread_join(lib.th, NULL);
    long long gw_ok = gw.first_ok_ms ? (long long)gw.first_ok_ms - (long long)t_elect : -1;
    long long lib_ok = lib.first_ok_ms ? (long long)lib.first_ok_ms - (long long)t_elect : -1;
    printf("# leader stopped: B led %llu ms after the stop (term %lld -> %lld); from the election: "
           "nodes on B after %lld and %lld ms, first gateway SET %lld ms, first libmoonkv put %lld ms "
           "(longest single call: gateway %llu ms, libmoonkv %llu ms)\n",
           (unsigned long long)(t_elect - t_stop), term_a, term_b, nodes_left[0], nodes_left[1], gw_ok, lib_ok,
           (unsigned long long)gw.longest_ms, (unsigned long long)lib.longest_ms);
    printf("# failures meanwhile: gateway %d (last: %s), libmoonkv %d (last: %s)\n", gw.fails, gw.last_err,
           lib.fails, lib.last_err);
    for (int i = 0; i < NODES; i++) ASSERT_MSG(nodes_left[i] >= 0 && nodes_left[i] <= 2000, "node %d: %lld ms", i, nodes_left[i]);
    ASSERT_MSG(gw_ok >= 0 && gw_ok <= 2000, "first gateway SET %lld ms after the election", gw_ok);
    ASSERT_MSG(lib_ok >= 0 && lib_ok <= 2000, "first libmoonkv put %lld ms after the election", lib_ok);

    /* A stays stopped for twice its lease, then runs again. */
    while (mono_ms() - t_stop < 2 * LEASE_S * 1000) usleep(20000);
    ASSERT(kill(master_a, SIGCONT) == 0);
    ASSERT_EQ(replies_not_refused(pre, 5, "written while stopped"), 0);
    /* And sent after it ran again, on a connection of before the stop. */
    redisContext *pre2 = pre;
    if (pre->err) pre2 = NULL;
    if (pre2) {
        redisAppendCommand(pre2, "MOON.PUTEND stale-put 0");
        redisAppendCommand(pre2, "MOON.PUTSTART resumed-new 64");
        ASSERT_EQ(replies_not_refused(pre2, 2, "sent after SIGCONT"), 0);
    }
    redisFree(pre);
    if (gw.gw) redisFree(gw.gw);
    ASSERT(h_wait_role(MASTER_A, "standby", 10000) == 0);
    /* B serves; A, a standby now, is alive and said why it stepped down. */
    ASSERT(h_until(h_gw_set, &probe, "after-resume", "v", mono_ms(), 10000) >= 0);
    ASSERT(h_until(h_gw_get_is, &probe, "after-resume", "v", mono_ms(), 10000) >= 0);
    ASSERT(kill(master_a, 0) == 0);
    /* A reads as standby once its lease's deadline passed; the line comes
     * when its keep-alive thread hears etcd say so, a round trip later. */
    uint64_t t_log = mono_ms();
    while (!h_file_has(log_a, "leadership lost (term") && mono_ms() - t_log < 10000) usleep(20000);
    ASSERT_MSG(h_file_has(log_a, "leadership lost (term"), "A's log says nothing of its step down in 10 s");
}

/* Every exit of a master leaves a line in its log, at the default
 * warning level of the tests too: a shutdown (SIGTERM), a signal that
 * kills (SIGHUP), a crash (SIGSEGV; not under ASan/TSan, which report
 * their own way). */
static void test_exits_are_logged(void) {
    static const struct { int sig; const char *line; } cases[] = {
        {SIGTERM, "Received SIGTERM, scheduling shutdown"},
#if !H_SANITIZED
        {SIGHUP, "moonkv killed: SIGHUP (signal 1) sent by pid"},
        {SIGSEGV, "moonkv crashed: SIGSEGV (signal 11)"},
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char log[96];
        snprintf(log, sizeof log, "%s/exit-%d.log", etcd.dir, cases[i].sig);
        h_args a = {0};
        h_arg(&a, h_server_bin());
        h_arg(&a, "--role");
        h_arg(&a, "master");
        h_argf(&a, "--port=%d", base + 14);
        h_arg(&a, "--log-level");
        h_arg(&a, "warning");
        pid_t pid = h_start(a.v, base + 14, log, log, 20000);
        ASSERT(pid > 0);
        ASSERT(kill(pid, cases[i].sig) == 0);
        int status = h_stop_status(pid, 10000);
        ASSERT_MSG(h_file_has(log, cases[i].line), "no \"%s\" in %s (exit status 0x%x)", cases[i].line, log, status);
    }
}

/* ---- setup ---- */

static int open_probe(void) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.etcd = etcd.url;
    opt.cluster_name = CLUSTER;
    opt.timeout_ms = 10000;   /* longer than any wait below: only the watch cuts a stalled call short */
    return h_probe_open_within(&probe, GATEWAY_PORT, &opt, SETUP_WAIT_MS);
}

static int setup(void) {
    char step[160] = "";
    snprintf(log_a, sizeof log_a, "%s/master-a.log", etcd.dir);
    if ((master_a = start_master_logged(MASTER_A, log_a)) < 0)
        snprintf(step, sizeof step, "master A on %d", MASTER_A);
    else if (h_wait_role(MASTER_A, "leader", SETUP_WAIT_MS) != 0)
        snprintf(step, sizeof step, "master A did not lead");
    else if ((master_b = start_role("master", MASTER_B, NULL)) < 0)
        snprintf(step, sizeof step, "master B on %d", MASTER_B);
    for (int i = 0; i < NODES && !step[0]; i++)
        if (start_node(i) < 0) snprintf(step, sizeof step, "node %d on %d", i, NODE_PORT(i));
    const char *gw_extra[] = {"--segment-size", "16MB", "--replicas", "2", NULL};
    if (!step[0] && start_logged("gateway", GATEWAY_PORT, gw_extra) < 0)
        snprintf(step, sizeof step, "gateway on %d", GATEWAY_PORT);
    if (!step[0] && h_wait_nodes(MASTER_A, "alive", NODES, SETUP_WAIT_MS) != 0)
        snprintf(step, sizeof step, "nodes alive on A");
    if (!step[0] && open_probe() != 0) snprintf(step, sizeof step, "gateway and libmoonkv probes");
    if (!step[0] && h_until(h_gw_set, &probe, "warm", "v", mono_ms(), SETUP_WAIT_MS) < 0)
        snprintf(step, sizeof step, "a first SET through the gateway");
    if (!step[0]) return 0;
    printf("not ok - leader_stall/setup: %s\n", step);
    return -1;
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = remove_datadir;
    base = h_free_ports(16);
    if (base < 0 || h_etcd_up(&etcd, ETCD_PORT, ETCD_PORT + 1) != 0) return 1;
    if (setup() != 0) return 1;
    RUN_TEST(test_stalled_leader);
    RUN_TEST(test_exits_are_logged);
    h_probe_close(&probe);
    h_stop_all();
    TEST_EXIT();
}
