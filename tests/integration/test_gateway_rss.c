/* tests/integration/test_gateway_rss.c - an idle gateway does not hold its
 * staging pool: the pool (512 MB by default) becomes resident only where
 * values use it, and is given back after a couple of idle seconds.
 * Anonymous RSS only (RssAnon): a same-host gateway also maps the nodes'
 * segments, whose pages are the nodes' memory, not the gateway's. */
#include <hiredis/hiredis.h>

#include "cluster_harness.h"
#include "test.h"

#define PORT_MASTER  31410
#define PORT_NODE    31411   /* + i; data plane on 31421 + i */
#define PORT_GATEWAY 31418
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

int main(void) {
    h_init(240);
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
    TEST_EXIT();
}
