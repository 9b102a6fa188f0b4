/* tests/integration/test_gateway_rss.c - an idle gateway does not hold its
 * staging pool: the pool (512 MB by default) becomes resident only where
 * values use it, and is given back after a couple of idle seconds.
 * Anonymous RSS only (RssAnon): a same-host gateway also maps the nodes'
 * segments, whose pages are the nodes' memory, not the gateway's.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <hiredis/hiredis.h>

#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE    (port0 + 1)   /* + i; data plane on PORT_NODE + 10 + i */
#define PORT_GATEWAY (port0 + 8)
#define NODES 2
#define MiB (1024ull * 1024)
#define VALUE (4 * MiB)
#define KEYS 24
#define IDLE_BOUND_KB (64 * 1024)   /* far below the 512 MB pool */

static pid_t gateway_pid;

static long anon_kb(void) { return h_status_kb(gateway_pid, "RssAnon"); }

static long long gw_field(redisContext *g, const char *field) { return h_info_field(g, "gateway", field); }

/* Waits (bounded) until the pool was given back and RssAnon is in bound. */
static int settles(redisContext *g) {
    for (int i = 0; i < 150; i++) {
        if (gw_field(g, "staging_hot_bytes") == 0 && anon_kb() < IDLE_BOUND_KB) return 1;
        usleep(100000);
    }
    return 0;
}

/* KEYS values of 4 MiB each, then all of them read back at once
 * (pipelined: the reads stage together in the pool), byte-exact. */
static int set_and_get_all(redisContext *g, char *val) {
    h_redis_room(g, VALUE + 64);
    for (int k = 0; k < KEYS; k++) {
        h_fill(val, VALUE, (uint64_t)k + 1);
        redisReply *r = redisCommand(g, "SET rss:%d %b", k, val, (size_t)VALUE);
        int ok = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) return -1;
    }
    for (int k = 0; k < KEYS; k++) redisAppendCommand(g, "GET rss:%d", k);
    int bad = 0;
    for (int k = 0; k < KEYS; k++) {
        redisReply *r = NULL;
        if (redisGetReply(g, (void **)&r) != REDIS_OK) return -1;
        h_fill(val, VALUE, (uint64_t)k + 1);
        bad += !(r->type == REDIS_REPLY_STRING && r->len == VALUE && memcmp(r->str, val, VALUE) == 0);
        freeReplyObject(r);
    }
    return bad ? -1 : 0;
}

static void test_idle_pool_given_back(void) {
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g != NULL);
    ASSERT_EQ(gw_field(g, "staging_pool_bytes"), 512 * MiB);
    long fresh = anon_kb();
    printf("# fresh gateway: RssAnon %ld kB\n", fresh);
    ASSERT_MSG(fresh < IDLE_BOUND_KB, "a fresh gateway holds %ld kB", fresh);
    char *val = malloc(VALUE);
    for (int round = 0; round < 2; round++) {
        ASSERT_EQ(set_and_get_all(g, val), 0);
        long long hot = gw_field(g, "staging_hot_bytes");
        long busy = anon_kb();
        printf("# round %d: pool used up to %lld bytes, RssAnon %ld kB\n", round, hot, busy);
        ASSERT(hot >= (long long)VALUE);
        ASSERT(settles(g));
        long idle = anon_kb();
        printf("# round %d idle: RssAnon %ld kB\n", round, idle);
        /* the pages the reads used went back, not just the bookkeeping */
        ASSERT_MSG(busy - idle >= hot / 2048, "RssAnon %ld -> %ld kB with %lld pool bytes used", busy, idle, hot);
        for (int k = 0; k < KEYS; k++) freeReplyObject(redisCommand(g, "DEL rss:%d", k));
    }
    /* Pages given back read zero when used again: values stay byte-exact. */
    ASSERT_EQ(set_and_get_all(g, val), 0);
    free(val);
    redisFree(g);
}

/* minflt of the main thread's stat: the minor page faults the loop
 * took (not the process's: its mapping warmer faults the nodes' segments
 * in from a thread of its own). */
static long long loop_minor_faults(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');   /* the name may hold spaces */
    long long v = -1;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %lld", &v) != 1) v = -1;
    return v;
}

#define STEADY_KEYS 4096
#define STEADY_GETS 400000

/* redis-benchmark's GETs of key:000000000000 .. key:<STEADY_KEYS-1> at
 * -P 16 -c 50; 0 when it ran and every GET was answered. */
static int benchmark_gets(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "redis-benchmark -p %d -t get -n %d -r %d -P 16 -c 50 -d 64 --csv 2>&1 | grep -q '^\"GET\"'",
             PORT_GATEWAY, STEADY_GETS, STEADY_KEYS);
    return system(cmd);
}

/* Pipelined small GETs from many connections at a steady rate: the
 * gateway's batches allocate and free about the same every loop
 * iteration, and its heap keeps that memory (heap_steady_setup) instead
 * of giving its top back to the system and faulting it in again per
 * batch (glibc's default: about 6 minor faults per 1000 GETs). */
static void test_steady_gets_keep_heap(void) {
    if (system("command -v redis-benchmark >/dev/null 2>&1") != 0) {
        printf("# skipped: no redis-benchmark\n");
        return;
    }
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g != NULL);
    char v[64];
    memset(v, 'x', sizeof v);
    for (int k = 0; k < STEADY_KEYS; k++) redisAppendCommand(g, "SET key:%012d %b", k, v, sizeof v);
    for (int k = 0; k < STEADY_KEYS; k++) {
        redisReply *r = NULL;
        ASSERT(redisGetReply(g, (void **)&r) == REDIS_OK);
        ASSERT_MSG(r->type == REDIS_REPLY_STATUS, "SET key %d: %s", k, r->type == REDIS_REPLY_ERROR ? r->str : "?");
        freeReplyObject(r);
    }
    ASSERT_EQ(benchmark_gets(), 0);   /* buffers and tables grown */
    long long before = loop_minor_faults(gateway_pid);
    ASSERT_EQ(benchmark_gets(), 0);
    long long faults = loop_minor_faults(gateway_pid) - before;
    printf("# %d GETs at -P 16 -c 50: %lld minor faults in the gateway's loop\n", STEADY_GETS, faults);
    ASSERT(before >= 0);
#if !H_SANITIZED
    /* (sanitizers bring their own allocator: heap_steady_setup does nothing there) */
    ASSERT_MSG(faults * 1000 < STEADY_GETS, "%lld minor faults for %d GETs", faults, STEADY_GETS);
#endif
    redisReply *r = redisCommand(g, "GET key:%012d", STEADY_KEYS - 1);   /* and it still answers right */
    ASSERT(r && r->type == REDIS_REPLY_STRING && r->len == sizeof v && memcmp(r->str, v, sizeof v) == 0);
    freeReplyObject(r);
    redisFree(g);
}

int main(void) {
    h_init(240);
    h_setup_or_exit(port0 = h_free_ports(11 + NODES), "free ports");
    if (h_start_master(PORT_MASTER, NULL) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    for (int i = 0; i < NODES; i++)
        if (h_start_node(PORT_MASTER, PORT_NODE + i, PORT_NODE + 10 + i, "256MB") < 0) {
            printf("not ok - node did not start\n");
            return 1;
        }
    if (h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0 ||
        (gateway_pid = h_start_gateway(PORT_MASTER, PORT_GATEWAY, NULL, NULL)) < 0) {
        printf("not ok - cluster did not start\n");
        return 1;
    }
    RUN_TEST(test_idle_pool_given_back);
    RUN_TEST(test_steady_gets_keep_heap);
    TEST_EXIT();
}
