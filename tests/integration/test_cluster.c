/* test_cluster - libmoonkv against a master and several node processes:
 * replicas land on distinct nodes, big objects stripe over nodes, a node
 * joining takes new placements, kill -9 of a node under reads with two
 * replicas loses no read, a drain loses no object, and bad placement
 * requests get clear errors. Then the same library against nodes in
 * network namespaces behind veth pairs (netns_harness.h), when root.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/engine.h"
#include "client/client.h"   /* placement decoding, to play a faulty writer */
#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/crc32c.h"
#include "netns_harness.h"
#include "test.h"
#include "transports/registry.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_GATEWAY (port0 + 1)
#define PORT_NODE(i) (port0 + 10 + 2 * (i))   /* RESP of node i (0-based) */
#define PORT_DATA(i) (port0 + 11 + 2 * (i))
#define MAX_NODES    5
#define MIB (1024u * 1024u)
#define BIG (64u * MIB)
#define NODE_TIMEOUT_MS 1500

static pid_t nodes[MAX_NODES];   /* node i has master id i + 1 */
static int nnodes;
static redisContext *adm;        /* hiredis to the master, for MOON.OBJECT etc. */
static mkv_client *cli;
static unsigned char *src, *dst;

static int start_node(const char *segment) {
    int i = nnodes;
    nodes[i] = h_start_node(PORT_MASTER, PORT_NODE(i), PORT_DATA(i), segment);
    if (nodes[i] < 0 || h_wait_nodes(PORT_MASTER, "alive", i + 1, 20000) != 0) return -1;
    nnodes++;
    return 0;
}

/* ---- MOON.OBJECT ---- */

/* The "replicas" value of MOON.OBJECT key, a map that RESP2 (all
 * hiredis 0.14 speaks) flattens into an array: per replica an array of
 * [node, offset, length]. */
static const redisReply *object_replicas(redisReply *obj) {
    if (!obj || obj->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < obj->elements; i += 2) {
        const redisReply *k = obj->element[i];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, "replicas") == 0)
            return obj->element[i + 1]->type == REDIS_REPLY_ARRAY ? obj->element[i + 1] : NULL;
    }
    return NULL;
}

/* Bit n set for every node n holding part of replica r. */
static uint64_t replica_nodes(const redisReply *reps, size_t r) {
    uint64_t mask = 0;
    const redisReply *ext = reps->element[r];
    for (size_t i = 0; ext->type == REDIS_REPLY_ARRAY && i < ext->elements; i++) {
        const redisReply *e = ext->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements == 3 && e->element[0]->integer < 64)
            mask |= 1ULL << e->element[0]->integer;
    }
    return mask;
}

static redisReply *object_of(const char *key) {
    return redisCommand(adm, "MOON.OBJECT %s", key);
}

/* The state of node id in MOON.NODES ("<id> <addr> <state> ...\n"). */
static int node_state_is(uint32_t id, const char *state) {
    redisReply *r = redisCommand(adm, "MOON.NODES");
    int yes = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        char want[64];
        snprintf(want, sizeof want, "%u ", id);
        for (char *line = r->str; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            if (strncmp(line, want, strlen(want)) != 0) continue;
            char addr[128], st[32];
            yes = sscanf(line, "%*u %127s %31s", addr, st) == 2 && strcmp(st, state) == 0;
            break;
        }
    }
    if (r) freeReplyObject(r);
    return yes;
}

/* ---- cases ---- */

/* r is an error starting with prefix; frees r. */
static int is_error(redisReply *r, const char *prefix) {
    int ok = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
    if (!ok) printf("# expected error '%s...', got type %d '%s'\n", prefix, r ? r->type : -1,
                    r && r->str ? r->str : "");
    if (r) freeReplyObject(r);
    return ok;
}

static void test_bad_placement_requests(void) {
    ASSERT(is_error(redisCommand(adm, "MOON.PUTSTART bad 0"), "ERR object size must be at least 1 byte"));
    ASSERT(is_error(redisCommand(adm, "MOON.PUTSTART bad 10 REPLICAS 9"), "ERR "));
    ASSERT(is_error(redisCommand(adm, "MOON.PUTSTART bad -5"), "ERR value is not an integer"));
    ASSERT(is_error(redisCommand(adm, "MOON.PUTSTART bad 10 REPLICAS 4"), "NOREPLICAS"));
    ASSERT(is_error(redisCommand(adm, "MOON.PUTSTART bad 562949953421312"), "NOSPACE"));
    ASSERT(is_error(redisCommand(adm, "MOON.PUTEND bad 0"), "NOTFOUND no put in progress"));
    ASSERT(is_error(redisCommand(adm, "MOON.PUTSTART bad 10 REPLICAS"), "ERR"));
    ASSERT_EQ(mkv_put(cli, "bad", 3, src, 10, 4), MKV_ENOREPLICAS);
    ASSERT(strstr(mkv_last_error(cli), "NOREPLICAS") != NULL);
    ASSERT_EQ(mkv_exists(cli, "bad", 3), 0);
}

static void test_replicas_on_distinct_nodes(void) {
    h_fill(src, 3 * 65536, 21);
    for (int reps = 2; reps <= 3; reps++) {
        char key[32];
        snprintf(key, sizeof key, "distinct:%d", reps);
        ASSERT_EQ(mkv_put(cli, key, strlen(key), src, 65536 * reps, reps), MKV_OK);
        redisReply *o = object_of(key);
        const redisReply *rs = object_replicas(o);
        uint64_t seen = 0;
        int distinct = rs && rs->elements == (size_t)reps;
        for (size_t r = 0; distinct && r < rs->elements; r++) {
            uint64_t m = replica_nodes(rs, r);
            distinct = m != 0 && (m & seen) == 0;
            seen |= m;
        }
        freeReplyObject(o);
        ASSERT(distinct);
        size_t got;
        ASSERT_EQ(mkv_get(cli, key, strlen(key), dst, BIG, &got), MKV_OK);
        ASSERT_MEMEQ(src, dst, 65536 * (size_t)reps);
    }
}

static void test_striped_64m(void) {
    h_fill(src, BIG, 22);
    ASSERT_EQ(mkv_put(cli, "striped", 7, src, BIG, 1), MKV_OK);
    redisReply *o = object_of("striped");
    const redisReply *rs = object_replicas(o);
    uint64_t m = rs && rs->elements == 1 ? replica_nodes(rs, 0) : 0;
    freeReplyObject(o);
    ASSERT(__builtin_popcountll(m) >= 2);
    memset(dst, 0, BIG);
    size_t got;
    ASSERT_EQ(mkv_get(cli, "striped", 7, dst, BIG, &got), MKV_OK);
    ASSERT_EQ(got, BIG);
    ASSERT_MEMEQ(src, dst, BIG);
    ASSERT_EQ(mkv_remove(cli, "striped", 7), MKV_OK);
}

/* A writer that puts other bytes in some replicas than the checksum it
 * publishes: PUTSTART over hiredis, each replica written by an engine of
 * our own, PUTEND with the checksum of good. */
static int faulty_put(const char *key, const void *good, const void *bad, uint64_t len,
                      uint32_t bad_mask) {
    redisReply *r = redisCommand(adm, "MOON.PUTSTART %s %llu REPLICAS 2", key,
                                 (unsigned long long)len);
    mkv_client dummy;
    memset(&dummy, 0, sizeof dummy);
    mkv_placement pl;
    int rc = r ? mkv_placement_decode(&dummy, r, len, TE_CAP_WRITE, &pl) : -1;
    if (r) freeReplyObject(r);
    if (rc != MKV_OK) return -1;
    te_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char err[256];
    te_transport *t = te_transport_create("tcp", &cfg, err, sizeof err);
    te_engine *e = t ? te_engine_create(t, NULL) : NULL;
    for (int i = 0; e && i < nnodes; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", PORT_DATA(i));
        const char *addrs[1] = {addr};
        te_engine_add_node(e, (uint32_t)i + 1, addrs, 1, err, sizeof err);
    }
    for (uint32_t i = 0; e && rc == MKV_OK && i < pl.nreplicas; i++) {
        te_replica rep = {.ext = pl.replicas[i].extents, .next = (int)pl.replicas[i].nextents};
        if (te_engine_write(e, (bad_mask >> i) & 1 ? bad : good, len, &rep, 1, err, sizeof err) != TE_OK)
            rc = -1;
    }
    if (e) te_engine_destroy(e);
    else rc = -1;
    mkv_placement_free(&pl);
    r = redisCommand(adm, "MOON.PUTEND %s %u", key, crc32c(0, good, len));
    if (!r || r->type != REDIS_REPLY_STATUS) rc = -1;
    if (r) freeReplyObject(r);
    return rc;
}

/* A replica whose bytes fail the checksum is passed over for the other;
 * with both bad the read is ECORRUPT. */
static void test_bad_replica_skipped(void) {
    enum { LEN = 256 * 1024 };
    unsigned char *good = src, *bad = src + LEN;
    h_fill(good, LEN, 26);
    memcpy(bad, good, LEN);
    bad[LEN / 2] ^= 1;
    const char *keys[3] = {"faulty:0", "faulty:1", "faulty:both"};
    for (uint32_t k = 0; k < 3; k++) {
        ASSERT_EQ(faulty_put(keys[k], good, bad, LEN, k == 2 ? 3u : 1u << k), 0);
        size_t got = 0;
        memset(dst, 0, LEN);
        int rc = mkv_get(cli, keys[k], strlen(keys[k]), dst, LEN, &got);
        if (k == 2) {
            ASSERT_EQ(rc, MKV_ECORRUPT);
            ASSERT(strstr(mkv_last_error(cli), "checksum") != NULL);
        } else {
            ASSERT_EQ(rc, MKV_OK);
            ASSERT_MEMEQ(dst, good, LEN);
        }
    }
}

/* Puts keep going while node 4 starts; soon some land on it. Bounded by
 * time, not by a count of puts: a put that found the fresh node not yet
 * reachable makes it suspect for node_timeout_ms, and a fast loop could
 * run out of puts inside that window. "On it" is any node but the first
 * three, whatever id the master gave it. */
static void test_node_joins_mid_traffic(void) {
    const uint64_t old_nodes = 0xEull;   /* ids 1..3 */
    int started = 0, landed = 0;
    uint64_t end = 0, last_mask = 0;
    h_fill(src, 4096, 23);
    for (unsigned i = 0; !landed && (!started || mono_ms() < end); i++) {
        char key[32];
        snprintf(key, sizeof key, "join:%u", i);
        ASSERT_EQ(mkv_put(cli, key, strlen(key), src, 4096, 1), MKV_OK);
        if (i == 5) {
            ASSERT_EQ(start_node("128MB"), 0);   /* the most free: placement prefers it */
            started = 1;
            end = mono_ms() + 20000;
        }
        if (!started) continue;
        redisReply *o = object_of(key);
        const redisReply *rs = object_replicas(o);
        last_mask = rs && rs->elements == 1 ? replica_nodes(rs, 0) : 0;
        landed = (last_mask & ~old_nodes) != 0;
        freeReplyObject(o);
        if (!landed && i % 50 == 49) usleep(100 * 1000);   /* let a suspicion lapse */
    }
    if (!landed) {
        redisReply *r = redisCommand(adm, "MOON.NODES");
        printf("# last replica mask 0x%llx; nodes:\n%s\n", (unsigned long long)last_mask,
               r && r->type == REDIS_REPLY_STRING ? r->str : "?");
        if (r) freeReplyObject(r);
    }
    ASSERT(landed);
}

#define NREAD 40
#define RSIZE (64u * 1024)

/* Replicas 2; kill -9 one node in the middle of a bounded read loop:
 * every read succeeds byte-exact, and the master declares it dead. */
static void test_kill_node_during_reads(void) {
    char key[32];
    h_fill(src, NREAD * RSIZE, 24);
    for (unsigned i = 0; i < NREAD; i++) {
        snprintf(key, sizeof key, "kill:%u", i);
        ASSERT_EQ(mkv_put(cli, key, strlen(key), src + i * RSIZE, RSIZE, 2), MKV_OK);
    }
    int victim = 0;   /* node id 1 */
    unsigned reads = 0, failed = 0, corrupt = 0;
    uint64_t killed_at = 0, dead_after = 0, end = mono_ms() + 20000;
    int rounds_after_dead = 0;
    while (mono_ms() < end && rounds_after_dead < 2) {
        for (unsigned i = 0; i < NREAD; i++) {
            snprintf(key, sizeof key, "kill:%u", i);
            size_t got = 0;
            int rc = mkv_get(cli, key, strlen(key), dst, RSIZE, &got);
            reads++;
            if (rc != MKV_OK) {
                if (failed++ < 3) printf("# read %s: %s: %s\n", key, mkv_strerror(rc), mkv_last_error(cli));
            } else if (got != RSIZE || memcmp(dst, src + i * RSIZE, RSIZE) != 0) {
                corrupt++;
            }
            if (reads == NREAD + NREAD / 2) {
                h_kill(nodes[victim]);
                nodes[victim] = 0;
                killed_at = mono_ms();
            }
        }
        if (killed_at && !dead_after && node_state_is((uint32_t)victim + 1, "dead"))
            dead_after = mono_ms() - killed_at;
        if (dead_after) rounds_after_dead++;
    }
    printf("# %u reads, %u failed, %u corrupt, dead after %llu ms\n", reads, failed, corrupt,
           (unsigned long long)dead_after);
    ASSERT(killed_at != 0);
    ASSERT_EQ(failed, 0);
    ASSERT_EQ(corrupt, 0);
    ASSERT(dead_after > 0);
    ASSERT(dead_after < NODE_TIMEOUT_MS + 3000);
}

/* MOON.DRAIN a live node: it leaves and every object stays readable. */
static void test_drain_loses_nothing(void) {
    enum { N = 30, SZ = 32 * 1024 };
    char key[32];
    h_fill(src, N * SZ, 25);
    for (unsigned i = 0; i < N; i++) {
        snprintf(key, sizeof key, "drain:%u", i);
        ASSERT_EQ(mkv_put(cli, key, strlen(key), src + i * SZ, SZ, 1), MKV_OK);
    }
    uint32_t id = 2;
    redisReply *r = redisCommand(adm, "MOON.DRAIN %u", id);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    ASSERT(ok);
    uint64_t end = mono_ms() + 20000;
    while (mono_ms() < end && !node_state_is(id, "dead")) usleep(100 * 1000);
    ASSERT(node_state_is(id, "dead"));
    for (unsigned i = 0; i < N; i++) {
        snprintf(key, sizeof key, "drain:%u", i);
        size_t got = 0;
        ASSERT_EQ(mkv_get(cli, key, strlen(key), dst, SZ, &got), MKV_OK);
        ASSERT_MEMEQ(dst, src + i * SZ, SZ);
        redisReply *o = object_of(key);
        const redisReply *rs = object_replicas(o);
        uint64_t m = rs && rs->elements >= 1 ? replica_nodes(rs, 0) : 0;
        freeReplyObject(o);
        ASSERT(m != 0 && !(m & (1ULL << id)));   /* nothing left on the drained node */
    }
}

/* The gateway speaks plain RESP: SET/GET through it. Skipped with a
 * note (no ok line) when the role is not in this build. */
static void gateway_cases(void) {
    char master[32], port[16];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    snprintf(port, sizeof port, "%d", PORT_GATEWAY);
    const char *argv[] = {h_server_bin(), "--role", "gateway", "--master", master, "--bind",
                          "127.0.0.1", "--port", port, "--log-level", "warning", NULL};
    pid_t gw = h_spawn(argv);
    int up = gw > 0 && h_wait_ping("127.0.0.1", PORT_GATEWAY, gw, 20000) == 0;
    if (!up && gw > 0 && waitpid(gw, NULL, WNOHANG) == 0) {   /* running, yet silent */
        h_kill(gw);
        printf("not ok - test_gateway_set_get: gateway running but not answering PING\n");
        test_failed_cases++;
        return;
    }
    if (!up) {   /* it exited: the role is not in this build */
        h_forget(gw);
        printf("# gateway role not available in this build: gateway cases skipped\n");
        return;
    }
    test_case_failed = 0;
    test_case_name = "test_gateway_set_get";
    redisContext *g = h_redis(PORT_GATEWAY);
    redisReply *s = g ? redisCommand(g, "SET gw:key %b", src, (size_t)5000) : NULL;
    redisReply *v = g ? redisCommand(g, "GET gw:key") : NULL;
    int ok = s && s->type == REDIS_REPLY_STATUS && v && v->type == REDIS_REPLY_STRING &&
             v->len == 5000 && memcmp(v->str, src, 5000) == 0;
    /* one key space: what libmoonkv wrote, the gateway reads */
    ok = ok && mkv_put(cli, "gw:lib", 6, src + 8192, 7000, 1) == MKV_OK;
    redisReply *w = ok ? redisCommand(g, "GET gw:lib") : NULL;
    ok = ok && w && w->type == REDIS_REPLY_STRING && w->len == 7000 &&
         memcmp(w->str, src + 8192, 7000) == 0;
    if (s) freeReplyObject(s);
    if (v) freeReplyObject(v);
    if (w) freeReplyObject(w);
    if (g) redisFree(g);
    h_stop(gw);
    if (ok) printf("ok - test_gateway_set_get\n");
    else {
        printf("not ok - test_gateway_set_get: SET/GET through the gateway\n");
        test_failed_cases++;
    }
}

/* ---- nodes in network namespaces ---- */

#define NS_NODES       2
#define NS_PORT_MASTER (port0 + 20)
#define NS_PORT_NODE   (port0 + 21)
#define NS_PORT_DATA   (port0 + 22)
#define NS_OBJ         (8u * MIB)

static mkv_client *ns_cli;

/* Two replicas, one per namespace: both veths carry the object out, and
 * reading it back brings it in over them. */
static void test_netns_replicas_cross_veths(void) {
    uint64_t tx0 = netns_veth_bytes(0, "tx"), tx1 = netns_veth_bytes(1, "tx");
    h_fill(src, NS_OBJ, 31);
    ASSERT_EQ(mkv_put(ns_cli, "netns:obj", 9, src, NS_OBJ, 2), MKV_OK);
    ASSERT(netns_veth_bytes(0, "tx") - tx0 >= NS_OBJ);
    ASSERT(netns_veth_bytes(1, "tx") - tx1 >= NS_OBJ);
    uint64_t rx = netns_veth_bytes(0, "rx") + netns_veth_bytes(1, "rx");
    size_t got = 0;
    memset(dst, 0, NS_OBJ);
    ASSERT_EQ(mkv_get(ns_cli, "netns:obj", 9, dst, NS_OBJ, &got), MKV_OK);
    ASSERT_EQ(got, NS_OBJ);
    ASSERT_MEMEQ(src, dst, NS_OBJ);
    ASSERT(netns_veth_bytes(0, "rx") + netns_veth_bytes(1, "rx") - rx >= NS_OBJ);
}

/* One replica, striped: both namespaces get a share of it. */
static void test_netns_striped_over_both(void) {
    uint64_t tx0 = netns_veth_bytes(0, "tx"), tx1 = netns_veth_bytes(1, "tx");
    h_fill(src, NS_OBJ, 32);
    ASSERT_EQ(mkv_put(ns_cli, "netns:striped", 13, src, NS_OBJ, 1), MKV_OK);
    ASSERT(netns_veth_bytes(0, "tx") - tx0 >= NS_OBJ / 4);
    ASSERT(netns_veth_bytes(1, "tx") - tx1 >= NS_OBJ / 4);
    size_t got = 0;
    memset(dst, 0, NS_OBJ);
    ASSERT_EQ(mkv_get(ns_cli, "netns:striped", 13, dst, NS_OBJ, &got), MKV_OK);
    ASSERT_MEMEQ(src, dst, NS_OBJ);
}

/* Master here on 10.201.1.1, node N inside namespace N on 10.201.N.2. */
static int netns_cluster_start(char *why, size_t whylen) {
    char master[32];
    snprintf(master, sizeof master, "10.201.1.1:%d", NS_PORT_MASTER);
    if (h_start_master_on("10.201.1.1", NS_PORT_MASTER, NULL) < 0)
        return snprintf(why, whylen, "master did not start on %s", master), -1;
    for (int i = 0; i < NS_NODES; i++) {
        char bind[32];
        snprintf(bind, sizeof bind, "10.201.%d.2", i + 1);
        const char *prefix[] = {"ip", "netns", "exec", netns.name[i], NULL};
        if (h_start_node_ex(prefix, master, bind, NS_PORT_NODE, NS_PORT_DATA, "64MB") < 0)
            return snprintf(why, whylen, "cannot start node %d", i + 1), -1;
    }
    if (h_wait_nodes_on("10.201.1.1", NS_PORT_MASTER, "alive", NS_NODES, 20000) != 0)
        return snprintf(why, whylen, "nodes in the namespaces did not join"), -1;
    /* tcp: the point is the network path, never shm on this host */
    if (h_mkv_connect(&ns_cli, master, "tcp", 0) != MKV_OK)
        return snprintf(why, whylen, "connect: %s", mkv_last_error(NULL)), -1;
    if (mkv_register_buffer(ns_cli, src, 2 * (size_t)BIG) != MKV_OK)
        return snprintf(why, whylen, "register: %s", mkv_last_error(ns_cli)), -1;
    return 0;
}

static void netns_cases(void) {
    if (netns_setup(NS_NODES) != 0) {
        printf("# netns cases skipped: %s\n", netns.why);
        netns_teardown();
        return;
    }
    char why[256];
    if (netns_cluster_start(why, sizeof why) != 0) {
        printf("not ok - netns cluster: %s\n", why);
        test_failed_cases++;
    } else {
        RUN_TEST(test_netns_replicas_cross_veths);
        RUN_TEST(test_netns_striped_over_both);
    }
    mkv_close(ns_cli);
    ns_cli = NULL;
}

int main(void) {
    h_init(85);
    h_cleanup_hook = netns_teardown;
    h_setup_or_exit(port0 = h_free_ports(23), "free ports");
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    const char *mflags[] = {"--node-timeout-ms", "1500", "--heartbeat-ms", "200",
                            "--lease-ms", "2000", NULL};
    if (h_start_master(PORT_MASTER, mflags) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    for (int i = 0; i < 3; i++)
        if (start_node("128MB") != 0) {
            printf("not ok - node %d did not join\n", i + 1);
            return 1;
        }
    adm = h_proven(h_redis(PORT_MASTER), "");   /* places and drains as a client would */
    src = mmap(NULL, 2 * (size_t)BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!adm || src == MAP_FAILED || h_mkv_connect_ms(&cli, master, NULL, 0, 3000) != MKV_OK) {
        printf("not ok - connect: %s\n", mkv_last_error(NULL));
        return 1;
    }
    dst = src + BIG;
    if (mkv_register_buffer(cli, src, 2 * (size_t)BIG) != MKV_OK) {
        printf("not ok - register: %s\n", mkv_last_error(cli));
        return 1;
    }
    RUN_TEST(test_bad_placement_requests);
    RUN_TEST(test_replicas_on_distinct_nodes);
    RUN_TEST(test_striped_64m);
    RUN_TEST(test_bad_replica_skipped);
    RUN_TEST(test_node_joins_mid_traffic);
    RUN_TEST(test_kill_node_during_reads);
    RUN_TEST(test_drain_loses_nothing);
    gateway_cases();
    netns_cases();

    mkv_close(cli);
    redisFree(adm);
    munmap(src, 2 * (size_t)BIG);
    h_kill_all();
    TEST_EXIT();
}
