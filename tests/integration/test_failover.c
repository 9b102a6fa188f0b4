/* tests/integration/test_failover.c - standby masters and failover through
 * etcd: an etcd from the Debian package (etcd-server) on fixed ports with a
 * temporary data dir, a leader and a standby master, two nodes, a gateway
 * and a libmoonkv client, all with --etcd and no --master. The leader is
 * killed (-9): the standby must lead within about the lease TTL, and the
 * gateway and the library must place new objects through it (the times to
 * the first put and get are printed). A leader stopped (SIGSTOP) past its
 * lease must place nothing when it runs again, and a write grant it made
 * before it stopped is refused by the nodes, which serve the new leader's
 * term only (fencing). A prefix lookup's pin is made again on the new
 * leader by the client that holds it, without a call of its own (its
 * keeper thread), and the new leader holds removes of the objects it
 * rebuilt until clients could do so. Puts of the async face submitted right
 * after the kill go out again until the new leader answers. The gateway's
 * asynchronous master connection is here its client's, through the
 * async face (it follows the leader): a GET, SET, EXISTS, DEL, ... waits
 * for the master on no thread, neither the loop nor a worker.
 *
 * The new leader rebuilds its table from the nodes' reports, so objects
 * stored before the failover survive it: the keys put before the kill
 * read back byte-exact through the gateway and the library, the pinned
 * ones by name. Ports (etcd's too): one block of h_free_ports, taken
 * first in main(). */
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "client/moonkv_async.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "etcd_harness.h"
#include "grant_harness.h"
#include "probe_harness.h"
#include "test.h"

static int port0;
#define ETCD_PORT    (port0 + 3)
#define ETCD_PEER    (port0 + 4)
#define MASTER_A     (port0 + 0)
#define MASTER_B     (port0 + 1)
#define NODE_PORT    (port0 + 10)   /* + i; data plane on NODE_PORT + 10 + i */
#define GATEWAY_PORT (port0 + 2)
#define NODES        2
#define LEASE_S      2
#define SETUP_WAIT_MS 30000  /* each setup step, on a loaded machine with the SAN build */
#define TIME_LIMIT_S 240

static h_etcd etcd;
static pid_t master_a, master_b;
static h_probe probe;

static void remove_datadir(void) { h_etcd_remove(&etcd); }

static pid_t start_role(const char *role, int port, const char *const *extra) {
    return h_start_etcd_role(role, port, etcd.url, "failover-test", LEASE_S, extra);
}

static pid_t start_node(int i) {
    char seg[] = "32MB", data[48];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT + 10 + i);
    const char *extra[] = {"--segment-size", seg, data, "--prefault", "no", NULL};
    return start_role("node", NODE_PORT + i, extra);
}

/* A master's reply to a placement; 1 if it is "-READONLY ...". */
static int refuses_placement(int port, const char *key, char *why, size_t whylen) {
    /* a member's connection: a standby takes the proof, then says READONLY */
    redisContext *c = h_proven(h_redis_ms("127.0.0.1", port, 2000), "");
    if (!c) return 0;
    redisReply *r = redisCommand(c, "MOON.PUTSTART %s 100", key);
    int ro = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0;
    snprintf(why, whylen, "%s", r && r->str ? r->str : "(no string reply)");
    freeReplyObject(r);
    redisFree(c);
    return ro;
}

/* ---- cases ---- */

static void test_leader_and_standby(void) {
    ASSERT(h_wait_role(MASTER_A, "leader", 10000) == 0);
    ASSERT(h_wait_role(MASTER_B, "standby", 5000) == 0);
    char why[256];
    ASSERT_MSG(refuses_placement(MASTER_B, "k", why, sizeof why), "standby said: %s", why);
    char want[64];
    snprintf(want, sizeof want, "READONLY leader is 127.0.0.1:%d", MASTER_A);
    ASSERT_STREQ(why, want);
}

/* The gateway's reply to cmd is the integer n or the status st. */
static int gw_answers(const char *cmd, long long n, const char *st) {
    redisReply *r = redisCommand(probe.gw, cmd);
    int ok = r && (st ? r->type == REDIS_REPLY_STATUS && strcmp(r->str, st) == 0
                      : r->type == REDIS_REPLY_INTEGER && r->integer == n);
    if (!ok) printf("# %s: type %d %s\n", cmd, r ? r->type : -1, r && r->str ? r->str : "");
    freeReplyObject(r);
    return ok;
}

static void test_writes_work(void) {
    ASSERT(h_wait_nodes(MASTER_A, "alive", NODES, 20000) == 0);
    ASSERT(h_gw_set(&probe, "before-gw", "value-1"));
    ASSERT(h_gw_get_is(&probe, "before-gw", "value-1"));
    ASSERT_MSG(h_lib_put(&probe, "before-lib", "value-2"), "libmoonkv put: %s", mkv_last_error(probe.mc));
    ASSERT_MSG(h_lib_get_is(&probe, "before-lib", "value-2"), "libmoonkv get: %s", mkv_last_error(probe.mc));
    /* Without a fixed master address the gateway's asynchronous master
     * connection is its client's async face (which follows the leader):
     * a key's GET, SET, EXISTS, STRLEN, TYPE, TTL and DEL, a SET of the
     * stored bytes, and INFO, DBSIZE, KEYS and SCAN are asked over it,
     * neither on the loop nor by a worker's blocking call (before, each
     * was a worker's: worker_master_waits grew by one per key). */
    long long blocking = h_info_field(probe.gw, "gateway", "loop_blocking_calls");
    long long waits = h_info_field(probe.gw, "gateway", "worker_master_waits");
    ASSERT(blocking >= 0);
    ASSERT(waits >= 0);
    ASSERT(h_gw_set(&probe, "ask-gw", "value-5"));
    ASSERT(h_gw_get_is(&probe, "ask-gw", "value-5"));
    ASSERT(h_gw_set(&probe, "ask-gw", "value-5"));   /* the same bytes: OK */
    ASSERT(gw_answers("EXISTS ask-gw nokey", 1, NULL));
    ASSERT(gw_answers("STRLEN ask-gw", 7, NULL));
    ASSERT(gw_answers("TYPE ask-gw", 0, "string"));
    ASSERT(gw_answers("TTL ask-gw", -1, NULL));
    /* and the master's INFO, DBSIZE, KEYS and SCAN, asked there too */
    ASSERT(gw_answers("DBSIZE", 3, NULL));
    redisReply *r = redisCommand(probe.gw, "KEYS *");
    int keys = r && r->type == REDIS_REPLY_ARRAY ? (int)r->elements : -1;
    freeReplyObject(r);
    r = redisCommand(probe.gw, "SCAN 0 COUNT 100");
    int scanned = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? (int)r->element[1]->elements : -1;
    freeReplyObject(r);
    r = redisCommand(probe.gw, "INFO");
    int info = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "db0:keys=3,") && strstr(r->str, "used_memory:");
    freeReplyObject(r);
    ASSERT_EQ(keys, 3);
    ASSERT_EQ(scanned, 3);
    ASSERT_MSG(info, "INFO lacks the cluster's keyspace or memory");
    ASSERT(gw_answers("DEL ask-gw nokey", 1, NULL));
    ASSERT(gw_answers("EXISTS ask-gw", 0, NULL));
    ASSERT_EQ(h_info_field(probe.gw, "gateway", "loop_blocking_calls"), blocking);
    ASSERT_EQ(h_info_field(probe.gw, "gateway", "worker_master_waits"), waits);
}

/* ---- the async face across the failover ----
 * A client of its own (timeout_ms 15 s) with a face of one thread:
 * ASYNC_N puts submitted right after the kill, while etcd still names
 * the dead leader or none, go out again every 50 ms until the new one
 * answers, as the blocking calls do: every one reaches it (OK, or
 * TRYAGAIN while it rebuilds its table, then submitted again), and
 * their gets are byte-exact. Without the repeat they fail at once. */
#define ASYNC_N 32
#define ASYNC_VAL 4096
static struct {
    mkv_client *c;
    mkv_async *a;
    mkv_op ops[2 * ASYNC_N];
    char keys[ASYNC_N][32];
    unsigned char *src, *dst;
    int done;                   /* the test drains on its own thread */
    uint64_t submitted_ms, last_ms;
} as;

static void as_done(mkv_op *op) {
    (void)op;
    as.done++;
    as.last_ms = mono_ms();
}

static void etcd_options(mkv_options *opt, int timeout_ms);

static void test_async_before_failover(void) {
    mkv_options opt;
    etcd_options(&opt, 15000);
    as.src = malloc((size_t)ASYNC_N * ASYNC_VAL);
    as.dst = calloc(ASYNC_N, ASYNC_VAL);
    h_fill(as.src, (size_t)ASYNC_N * ASYNC_VAL, 4242);
    int rc = mkv_connect(&as.c, &opt);
    if (rc == MKV_OK) rc = mkv_register_buffer(as.c, as.src, (size_t)ASYNC_N * ASYNC_VAL);
    if (rc == MKV_OK) rc = mkv_register_buffer(as.c, as.dst, (size_t)ASYNC_N * ASYNC_VAL);
    if (rc == MKV_OK) rc = mkv_async_open(&as.a, as.c, 1, 0);
    ASSERT_MSG(rc == MKV_OK, "async client: %s (%s)", mkv_strerror(rc), mkv_last_error(as.c));
}

/* Right after the kill: the client's connection to the dead leader is
 * found broken first (a blocking call fails on it), then the puts go. */
static void async_submit_after_kill(void) {
    if (!as.a) return;
    mkv_exists(as.c, "probe", 5);
    as.submitted_ms = mono_ms();
    for (int i = 0; i < ASYNC_N; i++) {
        int n = snprintf(as.keys[i], sizeof as.keys[i], "async-fo:%d", i);
        as.ops[i] = (mkv_op){.kind = MKV_OP_PUT, .key = as.keys[i], .keylen = (size_t)n,
                             .buf = as.src + (size_t)i * ASYNC_VAL, .len = ASYNC_VAL, .done = as_done};
        mkv_async_submit(as.a, &as.ops[i]);
    }
}

/* Until want completions, draining on this thread; bounded by ms. */
static int as_wait(int want, int ms) {
    uint64_t end = mono_ms() + (uint64_t)ms;
    while (as.done < want && mono_ms() < end) {
        struct pollfd p = {.fd = mkv_async_fd(as.a), .events = POLLIN};
        if (poll(&p, 1, 100) > 0) mkv_async_drain(as.a);
    }
    return as.done;
}

/* Each op of ops[0..n) that ended ETRYAGAIN (the new leader rebuilding
 * its table, as a blocking call is told too) submitted again until none
 * is, bounded by ms: how many are OK. */
static int as_until_ok(mkv_op *ops, int n, int ms) {
    uint64_t end = mono_ms() + (uint64_t)ms;
    for (;;) {
        int again = 0, ok = 0;
        for (int i = 0; i < n; i++) ok += ops[i].status == MKV_OK;
        if (ok == n || mono_ms() >= end) return ok;
        for (int i = 0; i < n; i++)
            if (ops[i].status == MKV_ETRYAGAIN && mkv_async_submit(as.a, &ops[i]) == MKV_OK) again++;
        if (!again) return ok;
        usleep(100 * 1000);
        as.done -= again;   /* counted again as they complete */
        as_wait(n, (int)(end > mono_ms() ? end - mono_ms() : 0));
    }
}

static void test_async_across_failover(void) {
    ASSERT(as.a != NULL);
    int put = as_wait(ASYNC_N, 40000), reached = 0, put_ok = 0, got_ok = 0, same = 1;
    for (int i = 0; i < ASYNC_N; i++) {
        int st = as.ops[i].status, ok = st == MKV_OK || st == MKV_ETRYAGAIN;
        reached += ok;
        if (!ok) printf("# async put %d ended %s\n", i, mkv_strerror(st));
    }
    printf("# async: %d puts submitted after the kill, %d reached the new leader (the first: %s) after %lld ms\n",
           put, reached, mkv_strerror(as.ops[0].status), (long long)(as.last_ms - as.submitted_ms));
    if (reached == ASYNC_N) put_ok = as_until_ok(as.ops, ASYNC_N, 30000);
    as.done = 0;
    for (int i = 0; put_ok == ASYNC_N && i < ASYNC_N; i++) {
        as.ops[ASYNC_N + i] = (mkv_op){.kind = MKV_OP_GET, .key = as.keys[i], .keylen = strlen(as.keys[i]),
                                       .buf = as.dst + (size_t)i * ASYNC_VAL, .len = ASYNC_VAL, .done = as_done};
        mkv_async_submit(as.a, &as.ops[ASYNC_N + i]);
    }
    if (put_ok == ASYNC_N && as_wait(ASYNC_N, 40000) == ASYNC_N) got_ok = as_until_ok(as.ops + ASYNC_N, ASYNC_N, 30000);
    for (int i = 0; got_ok == ASYNC_N && i < ASYNC_N; i++) same &= as.ops[ASYNC_N + i].len == ASYNC_VAL;
    same &= memcmp(as.src, as.dst, (size_t)ASYNC_N * ASYNC_VAL) == 0;
    mkv_async_close(as.a);
    mkv_close(as.c);
    free(as.src);
    free(as.dst);
    ASSERT_EQ(put, ASYNC_N);
    ASSERT_EQ(reached, ASYNC_N);   /* none failed for want of a leader */
    ASSERT_EQ(put_ok, ASYNC_N);
    ASSERT_EQ(got_ok, ASYNC_N);
    ASSERT(same);
}

static uint64_t elected_ms;   /* when B was seen leading */

static void test_kill_leader(void) {
    h_kill(master_a);
    uint64_t t0 = mono_ms();
    async_submit_after_kill();
    ASSERT(h_wait_role(MASTER_B, "leader", 10000) == 0);
    elected_ms = mono_ms();
    long long elect = (long long)(mono_ms() - t0);
    long long gw_put = h_until(h_gw_set, &probe, "after-gw", "value-3", t0, 15000);
    long long gw_get = gw_put < 0 ? -1 : h_until(h_gw_get_is, &probe, "after-gw", "value-3", t0, 15000);
    long long lib_p = h_until(h_lib_put, &probe, "after-lib", "value-4", t0, 15000);
    long long lib_g = lib_p < 0 ? -1 : h_until(h_lib_get_is, &probe, "after-lib", "value-4", t0, 15000);
    /* what was stored before the kill, as the new leader rebuilt it */
    long long gw_old = h_until(h_gw_get_is, &probe, "before-gw", "value-1", t0, 15000);
    long long lib_old = h_until(h_lib_get_is, &probe, "before-lib", "value-2", t0, 15000);
    printf("# failover after kill -9 of the leader (lease %d s): standby leads after %lld ms; "
           "gateway first put %lld ms, first get %lld ms; libmoonkv first put %lld ms, first get %lld ms; "
           "keys from before read back after %lld ms (gateway) and %lld ms (libmoonkv)\n",
           LEASE_S, elect, gw_put, gw_get, lib_p, lib_g, gw_old, lib_old);
    /* Within the lease plus the standby's poll and one etcd round. */
    ASSERT_MSG(elect <= LEASE_S * 1000 + 1500, "election took %lld ms", elect);
    ASSERT(gw_put >= 0 && gw_get >= 0);
    ASSERT(lib_p >= 0 && lib_g >= 0);
    ASSERT(gw_old >= 0 && lib_old >= 0);
}

/* Pins (MOON.PREFIXPIN) live in the leader's memory: the client that
 * made one pins its keys again on each master connection it opens
 * (MOON.REPIN), and opens one to the new leader as soon as the old one
 * goes, so on the new leader it holds before or after the node reports
 * the key, against another client's remove; released there as before,
 * and a new pin there holds as before. What the engines see: a lookup's
 * lock outlasts a leader change. */
static uint64_t pin_before, pin_quiet;
static mkv_client *quiet;   /* pins before the kill, then makes no call until the end */

static void test_pin_before_failover(void) {
    ASSERT(h_lib_put(&probe, "pinned-lib", "value-6"));
    mkv_obj o = {.key = "pinned-lib", .keylen = 10};
    size_t hit = 0;
    ASSERT_EQ(mkv_exists_prefix_pin(probe.mc, &o, 1, 600000, &pin_before, &hit), MKV_OK);
    ASSERT_EQ(hit, 1);
    ASSERT_EQ(mkv_remove(probe.mc, "pinned-lib", 10), MKV_ETRYAGAIN);
    mkv_options opt;
    etcd_options(&opt, 3000);
    ASSERT_EQ(mkv_connect(&quiet, &opt), MKV_OK);
    ASSERT(h_lib_put(&probe, "pinned-quiet", "value-9"));
    o = (mkv_obj){.key = "pinned-quiet", .keylen = 12};
    ASSERT_EQ(mkv_exists_prefix_pin(quiet, &o, 1, 600000, &pin_quiet, &hit), MKV_OK);
    ASSERT_EQ(hit, 1);
}

/* The quiet client makes no call after the kill: its keeper thread
 * (client/pinkeep.c) follows the new leader and pins the key again, and
 * until then the new leader holds removes of the objects it rebuilt
 * (PROTO_REPIN_GRACE_MS). Another client's removes on the new leader,
 * from its election on, must never take the key; once the grace is over
 * the refusal must name the pin itself (the re-pin was made without a
 * call). */
static void test_pin_held_without_a_call(void) {
    ASSERT(quiet != NULL);
    h_pin_watch w;
    ASSERT_MSG(h_watch_pinned(MASTER_B, "pinned-quiet", elected_ms, 30000, "a client making no call after the kill",
                              &w), "removed: %d, last: %s", w.removed, w.last);
    size_t held = 0;
    ASSERT_EQ(mkv_unpin(quiet, pin_quiet, &held), MKV_OK);
    ASSERT_EQ(held, 1);
    mkv_close(quiet);
    quiet = NULL;
}

static void test_pin_after_failover(void) {
    /* the client's keeper pinned its key again (a call of its own on the
     * new leader would have too; one more does no harm) */
    ASSERT(h_lib_put(&probe, "pin-follow", "value-8"));
    char text[256] = "";
    int removed = 0, pinned = 0;
    for (uint64_t t0 = mono_ms(); !removed && !pinned && mono_ms() - t0 < 20000; usleep(100 * 1000)) {
        removed = h_remove_other(MASTER_B, "pinned-lib", text, sizeof text);
        pinned = strstr(text, "TRYAGAIN") && strstr(text, "pinned");   /* else NOTFOUND: not reported yet */
    }
    ASSERT_MSG(pinned, "another client's remove on the new leader: %s", text);
    size_t held = 99;
    ASSERT_EQ(mkv_unpin(probe.mc, pin_before, &held), MKV_OK);
    ASSERT_EQ(held, 1);
    ASSERT_MSG(h_remove_other(MASTER_B, "pinned-lib", text, sizeof text), "remove after the unpin: %s", text);
    ASSERT(h_lib_put(&probe, "pinned-lib2", "value-7"));
    mkv_obj o = {.key = "pinned-lib2", .keylen = 11};
    uint64_t pin = 0;
    size_t hit = 0;
    ASSERT_EQ(mkv_exists_prefix_pin(probe.mc, &o, 1, 600000, &pin, &hit), MKV_OK);
    ASSERT_EQ(hit, 1);
    ASSERT_EQ(mkv_remove(probe.mc, "pinned-lib2", 11), MKV_ETRYAGAIN);
    ASSERT_EQ(mkv_unpin(probe.mc, pin, &held), MKV_OK);
    ASSERT_EQ(held, 1);
    ASSERT_EQ(mkv_remove(probe.mc, "pinned-lib2", 11), MKV_OK);
}

static void test_fencing(void) {
    /* A new standby to take over while the leader (B) is stopped. */
    master_a = start_role("master", MASTER_A, NULL);
    ASSERT(master_a > 0);
    ASSERT(h_wait_role(MASTER_A, "standby", 5000) == 0);
    /* A grant of the leader that a client keeps past its fall. */
    gh_grant old;
    ASSERT(gh_take(MASTER_B, "stale-grant", 4096, 1, &old) == 0);
    ASSERT(h_sigstop(master_b) == 0);
    uint64_t t0 = mono_ms();
    ASSERT(h_wait_role(MASTER_A, "leader", 10000) == 0);
    long long took = (long long)(mono_ms() - t0);
    while (mono_ms() - t0 < (LEASE_S + 1) * 1000) usleep(50000);
    ASSERT(kill(master_b, SIGCONT) == 0);
    /* At once, before its keep-alive thread has heard from etcd. */
    char why[256];
    ASSERT_MSG(refuses_placement(MASTER_B, "fenced", why, sizeof why), "old leader said: %s", why);
    ASSERT(h_wait_role(MASTER_B, "standby", 5000) == 0);
    ASSERT(refuses_placement(MASTER_B, "fenced2", why, sizeof why));
    printf("# SIGSTOP of the leader: the standby led after %lld ms; old leader: %s\n", took, why);
    /* And the cluster goes on through the new leader. */
    ASSERT(h_until(h_gw_set, &probe, "after-fence", "value-5", mono_ms(), 15000) >= 0);
    ASSERT(h_until(h_gw_get_is, &probe, "after-fence", "value-5", mono_ms(), 15000) >= 0);
    /* The nodes serve the new term only: the old leader's grant is void. */
    char err[256] = "";
    ASSERT_MSG(gh_refused(&old, NODE_PORT, NODES, err, sizeof err), "old leader's grant: %s", err);
}

/* ---- setup ---- */

/* Why the role meant for port is not up: another process holds the port
 * (a bench run, a server left over), or ours exited or stayed silent. */
static const char *why_down(int port) {
    redisContext *c = h_redis_ms("127.0.0.1", port, 500);
    if (c) redisFree(c);
    return c ? "its port is held by another process" : "it exited or did not answer PING";
}

/* A client's options: the cluster through etcd. */
static void etcd_options(mkv_options *opt, int timeout_ms) {
    mkv_options_init(opt);
    opt->etcd = etcd.url;
    opt->cluster_name = "failover-test";
    opt->timeout_ms = timeout_ms;
}

/* A client through etcd, retried until SETUP_WAIT_MS. */
static int open_probe(void) {
    mkv_options opt;
    etcd_options(&opt, 3000);
    return h_probe_open_within(&probe, GATEWAY_PORT, &opt, SETUP_WAIT_MS);
}

/* Leader A, standby B, the nodes, a gateway and a client: 0, or -1 after
 * a "not ok - failover/setup: STEP ..." line. etcd is up. */
static int setup(void) {
    char step[160] = "";
    if ((master_a = start_role("master", MASTER_A, NULL)) < 0)
        snprintf(step, sizeof step, "master A on %d: %s", MASTER_A, why_down(MASTER_A));
    else if (h_wait_role(MASTER_A, "leader", SETUP_WAIT_MS) != 0)
        snprintf(step, sizeof step, "master A on %d did not lead within %d ms", MASTER_A, SETUP_WAIT_MS);
    else if ((master_b = start_role("master", MASTER_B, NULL)) < 0)
        snprintf(step, sizeof step, "master B on %d: %s", MASTER_B, why_down(MASTER_B));
    for (int i = 0; i < NODES && !step[0]; i++)
        if (start_node(i) < 0)
            snprintf(step, sizeof step, "node %d on %d: %s", i, NODE_PORT + i, why_down(NODE_PORT + i));
    const char *gw_extra[] = {"--segment-size", "16MB", NULL};
    if (!step[0] && start_role("gateway", GATEWAY_PORT, gw_extra) < 0)
        snprintf(step, sizeof step, "gateway on %d: %s", GATEWAY_PORT, why_down(GATEWAY_PORT));
    if (!step[0] && open_probe() != 0)
        snprintf(step, sizeof step, "gateway connection and libmoonkv client (see # probe above)");
    if (!step[0]) return 0;
    printf("not ok - failover/setup: %s\n", step);
    return -1;
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = remove_datadir;
    h_setup_or_exit(port0 = h_free_ports(20 + NODES), "free ports");
    if (h_etcd_up(&etcd, ETCD_PORT, ETCD_PEER) != 0) return 1;
    if (setup() != 0) return 1;
    RUN_TEST(test_leader_and_standby);
    RUN_TEST(test_writes_work);
    RUN_TEST(test_pin_before_failover);
    RUN_TEST(test_async_before_failover);
    RUN_TEST(test_kill_leader);
    RUN_TEST(test_pin_held_without_a_call);
    RUN_TEST(test_async_across_failover);
    RUN_TEST(test_pin_after_failover);
    RUN_TEST(test_fencing);
    h_probe_close(&probe);
    h_stop_all();
    TEST_EXIT();
}
