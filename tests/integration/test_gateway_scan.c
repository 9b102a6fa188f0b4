/* tests/integration/test_gateway_scan.c - key iteration through the
 * gateway: SCAN (MATCH, COUNT, TYPE), KEYS (also over several pages),
 * TYPE, DBSIZE served by the master's MOON.SCAN; redis-cli --scan and
 * --bigkeys; and SCAN over 100k
 * keys returning each exactly once while more are added. A master, one
 * node and a gateway (--replicas 1). Ports: one block of h_free_ports,
 * taken first in main(). */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "core/util.h"
#include "test.h"
#include "cluster_harness.h"

static int port0;
#define MASTER_PORT  (port0 + 0)
#define GATEWAY_PORT (port0 + 1)
#define NODE_PORT    (port0 + 10)   /* data plane on NODE_PORT + 10 */
#define TIME_LIMIT_S 120
#define BIG_KEYS     100000
#define ADDED_KEYS   5000

static redisContext *gw;

static int start_cluster(void) {
    if (h_start_master(MASTER_PORT, NULL) < 0) return -1;
    if (h_start_node(MASTER_PORT, NODE_PORT, NODE_PORT + 10, "256MB") < 0) return -1;
    if (h_wait_nodes(MASTER_PORT, "alive", 1, 20000) != 0) return -1;
    static const char *const flags[] = {"--replicas", "1", NULL};
    if (h_start_gateway_staged(MASTER_PORT, GATEWAY_PORT, flags) < 0) return -1;
    gw = h_redis(GATEWAY_PORT);
    return gw ? 0 : -1;
}

/* n SETs of "<prefix><i>" for i in [from, to), pipelined in windows. */
static int set_range(redisContext *c, const char *prefix, int from, int to) {
    const int window = 500;
    for (int i = from; i < to; i += window) {
        int end = i + window < to ? i + window : to;
        for (int j = i; j < end; j++) redisAppendCommand(c, "SET %s%d v%d", prefix, j, j);
        for (int j = i; j < end; j++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type != REDIS_REPLY_STATUS) {
                printf("# SET %s%d: %s\n", prefix, j, r && r->str ? r->str : c->errstr);
                freeReplyObject(r);
                return -1;
            }
            freeReplyObject(r);
        }
    }
    return 0;
}

/* The 100k keys straight through libmoonkv in batches (what a KV-cache
 * layer does), so the test spends its time on SCAN, not on preloading
 * through the gateway one SET at a time. */
static int preload_big(void) {
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", MASTER_PORT);
    mkv_client *mc = NULL;
    if (h_mkv_connect(&mc, master, NULL, 0) != MKV_OK) return -1;
    const size_t klen = 16;
    char *keys = xcalloc(BIG_KEYS, klen), *vals = xcalloc(BIG_KEYS, 8);
    mkv_obj *objs = xcalloc(BIG_KEYS, sizeof *objs);
    int rc = mkv_register_buffer(mc, vals, (size_t)BIG_KEYS * 8);
    for (int i = 0; i < BIG_KEYS; i++) {
        int n = snprintf(keys + i * klen, klen, "big:%d", i);
        snprintf(vals + i * 8, 8, "v%d", i % 100000);
        objs[i] = (mkv_obj){.key = keys + i * klen, .keylen = (size_t)n, .buf = vals + i * 8, .len = 8};
    }
    if (rc == MKV_OK) rc = mkv_put_batch(mc, objs, BIG_KEYS, 1);
    for (int i = 0; rc == MKV_OK && i < BIG_KEYS; i++)
        if (objs[i].status != MKV_OK) rc = objs[i].status;
    if (rc != MKV_OK) printf("# preload: %s\n", mkv_last_error(mc));
    mkv_close(mc);
    free(keys);
    free(vals);
    free(objs);
    return rc == MKV_OK ? 0 : -1;
}

/* The keys of one SCAN reply into seen[] (index from the key's number);
 * the next cursor, or -1 on a bad reply. */
static long long scan_step(unsigned long long cursor, const char *prefix, unsigned char *seen, int nseen,
                           int *dups, int *strangers) {
    redisReply *r = redisCommand(gw, "SCAN %llu COUNT 1000", cursor);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        freeReplyObject(r);
        return -1;
    }
    size_t plen = strlen(prefix);
    redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
        const char *k = keys->element[i]->str;
        if (strncmp(k, prefix, plen) != 0) continue;
        int idx = atoi(k + plen);
        if (idx < 0 || idx >= nseen) {
            (*strangers)++;
            continue;
        }
        if (seen[idx]++) (*dups)++;
    }
    long long next = strtoll(r->element[0]->str, NULL, 10);
    freeReplyObject(r);
    return next;
}

static void test_scan_type_keys_dbsize(void) {
    ASSERT_EQ(set_range(gw, "s:", 0, 50), 0);
    redisReply *r = redisCommand(gw, "DBSIZE");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 50);
    freeReplyObject(r);
    r = redisCommand(gw, "TYPE s:7");
    ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "string") == 0);
    freeReplyObject(r);
    r = redisCommand(gw, "TYPE s:none");
    ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "none") == 0);
    freeReplyObject(r);
    r = redisCommand(gw, "KEYS s:4*");   /* s:4 and s:40..s:49 */
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 11);
    freeReplyObject(r);
    r = redisCommand(gw, "SCAN 0 COUNT 1000 TYPE hash");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->element[1]->elements == 0);
    freeReplyObject(r);
    /* MATCH over a full walk finds exactly the matching keys. */
    size_t found = 0;
    unsigned long long cursor = 0;
    do {
        r = redisCommand(gw, "SCAN %llu MATCH s:1? COUNT 7", cursor);
        ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        found += r->element[1]->elements;
        cursor = strtoull(r->element[0]->str, NULL, 10);
        freeReplyObject(r);
    } while (cursor != 0);
    ASSERT_EQ(found, 10);
}

/* KEYS over a walk of several pages (1000 keys each), the gateway asking
 * each page when the one before came back. */
static void test_keys_over_pages(void) {
    ASSERT_EQ(set_range(gw, "m:", 0, 2500), 0);
    redisReply *r = redisCommand(gw, "KEYS m:1??");   /* m:100..m:199 */
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 100);
    freeReplyObject(r);
    r = redisCommand(gw, "KEYS *");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2550);
    freeReplyObject(r);
    r = redisCommand(gw, "DBSIZE");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2550);
    freeReplyObject(r);
}

/* A shell line's output, or "" on failure (static buffer). */
static const char *run_line(const char *cmdline) {
    static char out[1 << 16];
    size_t n = 0;
    out[0] = '\0';
    FILE *f = popen(cmdline, "r");
    if (!f) return out;
    while (n < sizeof out - 1) {
        size_t got = fread(out + n, 1, sizeof out - 1 - n, f);
        if (got == 0) break;
        n += got;
    }
    out[n] = '\0';
    pclose(f);
    return out;
}

static void test_redis_cli_scan_and_bigkeys(void) {
    char cmdline[256];
    snprintf(cmdline, sizeof cmdline, "timeout 30 redis-cli -p %d --scan --pattern 's:*' | sort -u | wc -l",
             GATEWAY_PORT);
    ASSERT_EQ(atoi(run_line(cmdline)), 50);
    snprintf(cmdline, sizeof cmdline, "timeout 30 redis-cli -p %d --bigkeys 2>&1", GATEWAY_PORT);
    const char *out = run_line(cmdline);
    if (!strstr(out, "50 strings with")) printf("# --bigkeys said: %.400s\n", out);
    ASSERT(strstr(out, "50 strings with") != NULL);
    ASSERT(strstr(out, "Biggest string found") != NULL);
}

/* 100k keys, then a full SCAN through the gateway while another client adds keys between
 * steps: every key present from start to end is returned exactly once. */
static void test_scan_100k_exactly_once_while_adding(void) {
    uint64_t t0 = mono_ms();
    ASSERT_EQ(preload_big(), 0);
    printf("# %d keys put in batches in %llu ms\n", BIG_KEYS, (unsigned long long)(mono_ms() - t0));
    redisContext *adder = h_redis(GATEWAY_PORT);
    ASSERT(adder != NULL);
    unsigned char *seen = xcalloc(BIG_KEYS, 1);
    int dups = 0, strangers = 0, added = 0, steps = 0;
    long long cursor = 0;
    t0 = mono_ms();
    do {
        cursor = scan_step((unsigned long long)cursor, "big:", seen, BIG_KEYS, &dups, &strangers);
        if (added < ADDED_KEYS) {
            ASSERT_EQ(set_range(adder, "new:", added, added + 50), 0);
            added += 50;
        }
        steps++;
    } while (cursor > 0);
    printf("# full SCAN in %d steps, %llu ms, %d keys added meanwhile\n", steps,
           (unsigned long long)(mono_ms() - t0), added);
    ASSERT_EQ(cursor, 0);
    int missing = 0;
    for (int i = 0; i < BIG_KEYS; i++) missing += seen[i] == 0;
    ASSERT_EQ(missing, 0);
    ASSERT_EQ(dups, 0);
    ASSERT_EQ(strangers, 0);
    free(seen);
    redisFree(adder);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(21), "free ports");
    if (start_cluster() != 0) {
        printf("not ok - start_cluster: master, node and gateway did not come up\n");
        return 1;
    }
    RUN_TEST(test_scan_type_keys_dbsize);
    RUN_TEST(test_redis_cli_scan_and_bigkeys);
    RUN_TEST(test_keys_over_pages);
    RUN_TEST(test_scan_100k_exactly_once_while_adding);
    redisFree(gw);
    TEST_EXIT();
}
