/* tests/integration/test_redis_compat.c - the Redis behaviours KV-cache
 * clients rely on, end to end: on_conflict keep, garbage collection that
 * lets a full store keep taking puts, SET EX/PX as collection hints with
 * TTL/PTTL, and redis-py's own RedisCluster and Sentinel clients - on a
 * standalone server and through master + nodes + gateway.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "test.h"
#include "cluster_harness.h"

static int port0;
#define PORT_GC       (port0 + 0)    /* standalone: GC on, on_conflict keep */
#define PORT_PLAIN    (port0 + 1)    /* standalone: defaults */
#define PORT_MASTER   (port0 + 10)   /* master with GC on */
#define PORT_GATEWAY  (port0 + 11)   /* its gateway, on_conflict keep */
#define PORT_GATEWAY2 (port0 + 12)   /* a second gateway, for the registry */
#define PORT_NODE(i)  (port0 + 20 + (i))
#define PORT_DATA(i)  (port0 + 26 + (i))
#define NODES         2
#define VALUE         (256 * 1024)
#define TIME_LIMIT_S  240

static redisContext *gc_srv, *plain, *gw;

/* ---- helpers ---- */

static int is_status(const redisReply *r, const char *s) {
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0;
}

static int is_error_prefix(const redisReply *r, const char *prefix) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

static long long int_reply(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
    freeReplyObject(r);
    return v;
}

/* A numeric INFO field (any section); -1 if missing. */
static long long info_ll(redisContext *c, const char *field) {
    return h_info_field(c, "everything", field);
}

/* SET key to VALUE pattern bytes of seed, with PX px_ms unless 0; the reply. */
static redisReply *set_pattern(redisContext *c, const char *key, uint64_t seed, int px_ms) {
    char *v = xmalloc(VALUE);
    h_fill(v, VALUE, seed);
    redisReply *r = px_ms ? redisCommand(c, "SET %s %b PX %d", key, v, (size_t)VALUE, px_ms)
                          : redisCommand(c, "SET %s %b", key, v, (size_t)VALUE);
    free(v);
    return r;
}

/* 1 if GET key is VALUE pattern bytes of seed, 0 if nil, -1 otherwise. */
static int get_pattern(redisContext *c, const char *key, uint64_t seed) {
    redisReply *r = redisCommand(c, "GET %s", key);
    int rc = -1;
    if (r && r->type == REDIS_REPLY_NIL) {
        rc = 0;
    } else if (r && r->type == REDIS_REPLY_STRING && r->len == VALUE) {
        char *v = xmalloc(VALUE);
        h_fill(v, VALUE, seed);
        rc = memcmp(v, r->str, VALUE) == 0 ? 1 : -1;
        free(v);
    }
    freeReplyObject(r);
    return rc;
}

/* Writes n values (4x what fits, say) and checks every SET answered OK,
 * then that every GET is byte-exact or nil, the newest present. */
static void fill_past_capacity(redisContext *c, const char *prefix, int n) {
    char key[64];
    int refused = 0, present = 0, wrong = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s:%d", prefix, i);
        redisReply *r = set_pattern(c, key, (uint64_t)i + 1, 0);
        if (!is_status(r, "OK")) {
            if (refused++ == 0) printf("# SET %s: %s\n", key, r && r->str ? r->str : c->errstr);
        }
        freeReplyObject(r);
    }
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s:%d", prefix, i);
        int g = get_pattern(c, key, (uint64_t)i + 1);
        if (g < 0) wrong++;
        present += g == 1;
    }
    snprintf(key, sizeof key, "%s:%d", prefix, n - 1);
    printf("# %s: %d puts, %d refused, %d still stored, %d wrong\n", prefix, n, refused, present, wrong);
    ASSERT_EQ(refused, 0);
    ASSERT_EQ(wrong, 0);
    ASSERT(present > 0 && present < n);
    ASSERT_EQ(get_pattern(c, key, (uint64_t)n), 1);   /* the newest survives */
}

/* redis-py's cluster and sentinel clients (their ok lines are counted). */
static void run_redis_py(int port, const char *label, const char *name) {
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    const char *argv[] = {"/usr/bin/python3", "tests/integration/redis_py_modes.py", portstr, label, name, NULL};
    fflush(stdout);
    pid_t pid = h_spawn(argv);
    ASSERT(pid > 0);
    int status = 0;
    ASSERT(h_wait_exit(pid, 120000, &status) == 0);
    ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "redis_py_modes.py %s failed", label);
}

/* ---- servers ---- */

static pid_t start_standalone(int port, const char *const *extra) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_argf(&a, "--port=%d", port);
    h_arg(&a, "--segment-size");
    h_arg(&a, "8MB");
    h_arg(&a, "--prefault");
    h_arg(&a, "no");
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    return h_ready(h_spawn(a.v), "127.0.0.1", port, NULL, 20000);
}

static int start_gateway(int port) {
    static const char *const flags[] = {"--on-conflict", "keep", "--heartbeat-ms", "200", NULL};
    return h_start_gateway_staged(PORT_MASTER, port, flags) > 0 ? 0 : -1;
}

static int start_cluster(void) {
    /* Short put and lease windows: an object is collectable once both
     * have passed, and the fill below is faster than the defaults. */
    static const char *const master_flags[] = {"--maxmemory-policy", "allkeys-lru",
                                               "--gc-high-watermark", "85", "--gc-low-watermark", "60",
                                               "--put-timeout-ms", "100", "--lease-ms", "100", NULL};
    if (h_start_master(PORT_MASTER, master_flags) < 0) return -1;
    for (int i = 0; i < NODES; i++)
        if (h_start_node(PORT_MASTER, PORT_NODE(i), PORT_DATA(i), "32MB") < 0) return -1;
    if (h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0) return -1;
    if (start_gateway(PORT_GATEWAY) != 0 || start_gateway(PORT_GATEWAY2) != 0) return -1;
    gw = h_redis(PORT_GATEWAY);
    return gw ? 0 : -1;
}

/* ---- on_conflict ---- */

static void conflict_keep(redisContext *c) {
    long long kept = info_ll(c, "conflicts_kept");
    ASSERT(h_command_is(c, is_status, "OK", "SET ck:a first"));
    ASSERT(h_command_is(c, is_status, "OK", "SET ck:a second"));
    redisReply *r = redisCommand(c, "GET ck:a");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "first") == 0);
    freeReplyObject(r);
    ASSERT_EQ(info_ll(c, "conflicts_kept"), kept + 1);
    /* The same bytes again stay an idempotent put, not a conflict. */
    long long idem = info_ll(c, "idempotent_puts");
    ASSERT(h_command_is(c, is_status, "OK", "SET ck:a first"));
    ASSERT_EQ(info_ll(c, "idempotent_puts"), idem + 1);
    ASSERT_EQ(info_ll(c, "conflicts_kept"), kept + 1);
}

static void test_conflict_keep_standalone(void) { conflict_keep(gc_srv); }
static void test_conflict_keep_gateway(void) { conflict_keep(gw); }

static void test_conflict_error_by_default(void) {
    ASSERT(h_command_is(plain, is_status, "OK", "SET ce:a first"));
    ASSERT(h_command_is(plain, is_error_prefix, "EXISTS", "SET ce:a second"));
    ASSERT_EQ(info_ll(plain, "conflicts_kept"), 0);
}

/* ---- expiry hints ---- */

/* The SET is refused with want, stores nothing; TTL says "no hint" for
 * a stored key and "no key" for a missing one. */
static void expiry_refused(redisContext *c, const char *set, const char *want, const char *stored) {
    redisReply *r = redisCommand(c, set);
    ASSERT(is_error_prefix(r, want));
    freeReplyObject(r);
    ASSERT_EQ(int_reply(c, "EXISTS ex:refused"), 0);
    ASSERT_EQ(int_reply(c, "TTL %s", stored), -1);
    ASSERT_EQ(int_reply(c, "PTTL ex:nosuch"), -2);
}

static void test_expiry_refused_without_gc(void) {
    expiry_refused(plain, "SET ex:refused v EX 10",
                   "ERR moonkv objects are write-once and never expire: SET option 'EX' "
                   "is a garbage-collection hint and maxmemory_policy is noeviction", "ce:a");
}

static void test_expiry_refused_on_gateway(void) {
    expiry_refused(gw, "SET ex:refused v PX 100",
                   "ERR moonkv objects are write-once and never expire here: SET option 'PX'", "ck:a");
}

static void test_expiry_hint_ttl(void) {
    redisReply *r = redisCommand(gc_srv, "SET ex:a v EX 100");
    ASSERT(is_status(r, "OK"));
    freeReplyObject(r);
    long long ttl = int_reply(gc_srv, "TTL ex:a"), pttl = int_reply(gc_srv, "PTTL ex:a");
    ASSERT(ttl >= 99 && ttl <= 100);
    ASSERT(pttl > 98000 && pttl <= 100000);
    ASSERT_EQ(int_reply(gc_srv, "TTL ck:a"), -1);
    ASSERT_EQ(int_reply(gc_srv, "TTL ex:nosuch"), -2);
    r = redisCommand(gc_srv, "SET ex:b v EX 0");
    ASSERT(is_error_prefix(r, "ERR invalid expire time in 'set' command"));
    freeReplyObject(r);
    r = redisCommand(gc_srv, "SET ex:b v EX 5 PX 5");
    ASSERT(is_error_prefix(r, "ERR syntax error"));
    freeReplyObject(r);
    ASSERT_EQ(int_reply(gc_srv, "EXISTS ex:b"), 0);
    /* Once passed, the value stays readable (TTL 0) until collected. */
    r = redisCommand(gc_srv, "SET ex:c v PX 1");
    ASSERT(is_status(r, "OK"));
    freeReplyObject(r);
    usleep(20 * 1000);
    ASSERT_EQ(int_reply(gc_srv, "PTTL ex:c"), 0);
    ASSERT_EQ(int_reply(gc_srv, "EXISTS ex:c"), 1);
    /* test_gc_prefers_expired's hint must be the only expired key: with
     * ex:c left, a sample holding both picks ex:c (expired longer), and
     * the collection could stop before a sample held the hint. */
    ASSERT_EQ(int_reply(gc_srv, "DEL ex:c"), 1);
}

/* ---- garbage collection ---- */

/* An expired hint makes a key the first victim: with the segment nearly
 * full, one more put collects it before any older key without a hint. */
static void test_gc_prefers_expired(void) {
    long long expired = info_ll(gc_srv, "evicted_expired_keys");
    redisReply *r = set_pattern(gc_srv, "gx:hint", 7, 1);
    ASSERT(is_status(r, "OK"));
    freeReplyObject(r);
    usleep(20 * 1000);
    char key[32];
    for (int i = 0; i < 40 && info_ll(gc_srv, "evicted_expired_keys") == expired; i++) {
        snprintf(key, sizeof key, "gx:%d", i);
        freeReplyObject(set_pattern(gc_srv, key, 100 + (uint64_t)i, 0));
    }
    ASSERT(info_ll(gc_srv, "evicted_expired_keys") > expired);
    ASSERT_EQ(get_pattern(gc_srv, "gx:hint", 7), 0);
}

static void test_gc_fill_standalone(void) {
    long long before = info_ll(gc_srv, "evicted_keys");
    fill_past_capacity(gc_srv, "gs", 4 * 8 * 4);   /* 4x an 8 MiB segment of 256 KiB values */
    ASSERT(info_ll(gc_srv, "evicted_keys") > before);
    /* Redis users read it from INFO stats */
    ASSERT_EQ(h_info_field(gc_srv, "stats", "evicted_keys"), info_ll(gc_srv, "evicted_keys"));
    ASSERT_EQ(info_ll(gc_srv, "nospace_rejections"), 0);
    ASSERT(info_ll(gc_srv, "used_memory") <= 8LL << 20);
}

static void test_gc_fill_cluster(void) {
    fill_past_capacity(gw, "gc", 3 * 2 * 32 * 4);   /* 3x two 32 MiB nodes */
    redisContext *m = h_redis(PORT_MASTER);
    ASSERT(m);
    long long evicted = info_ll(m, "evicted_keys");
    redisFree(m);
    ASSERT(evicted > 0);
    ASSERT(info_ll(gw, "evicted_keys") == evicted);
    ASSERT_EQ(h_info_field(gw, "stats", "evicted_keys"), evicted);
}

static void test_gc_off_fills_up(void) {
    /* The default store still refuses what does not fit, evicting nothing. */
    char key[32];
    int refused = 0;
    for (int i = 0; i < 40 && !refused; i++) {
        snprintf(key, sizeof key, "gp:%d", i);
        redisReply *r = set_pattern(plain, key, (uint64_t)i, 0);
        refused = is_error_prefix(r, "NOSPACE");
        freeReplyObject(r);
    }
    ASSERT(refused);
    ASSERT_EQ(info_ll(plain, "evicted_keys"), 0);
    ASSERT_EQ(h_info_field(plain, "stats", "evicted_keys"), 0);
    ASSERT_EQ(get_pattern(plain, "gp:0", 0), 1);
}

/* ---- cluster and sentinel clients ---- */

static void test_cluster_commands(void) {
    redisReply *r = redisCommand(gw, "CLUSTER SLOTS");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    redisReply *s = r->element[0];
    ASSERT(s->type == REDIS_REPLY_ARRAY && s->elements >= 3);
    ASSERT(s->element[0]->integer == 0 && s->element[1]->integer == 16383);
    ASSERT(s->element[2]->element[1]->integer == PORT_GATEWAY);
    char id[64];
    snprintf(id, sizeof id, "%s", s->element[2]->element[2]->str);
    freeReplyObject(r);
    r = redisCommand(gw, "CLUSTER MYID");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strlen(r->str) == 40 && strcmp(r->str, id) == 0);
    freeReplyObject(r);
    r = redisCommand(gw, "CLUSTER INFO");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok\r\n") &&
           strstr(r->str, "cluster_slots_assigned:16384\r\n"));
    freeReplyObject(r);
    r = redisCommand(gw, "CLUSTER SHARDS");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->elements == 4);
    freeReplyObject(r);
    r = redisCommand(gw, "CLUSTER BOGUS");
    ASSERT(is_error_prefix(r, "ERR unknown subcommand 'BOGUS'. Try CLUSTER HELP."));
    freeReplyObject(r);
    r = redisCommand(gc_srv, "SENTINEL get-master-addr-by-name mymaster");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && atoi(r->element[1]->str) == PORT_GC);
    freeReplyObject(r);
}

/* sentinel_master_name unset: any name is this server, and MASTERS lists
 * the names asked; set: only that name. */
static void test_sentinel_names(void) {
    redisReply *r = redisCommand(gc_srv, "SENTINEL get-master-addr-by-name lmcache-svc");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && atoi(r->element[1]->str) == PORT_GC);
    freeReplyObject(r);
    r = redisCommand(gc_srv, "SENTINEL MASTER lmcache-svc");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
           strcmp(r->element[1]->str, "lmcache-svc") == 0);
    freeReplyObject(r);
    r = redisCommand(gc_srv, "SENTINEL MASTERS");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT(strcmp(r->element[0]->element[1]->str, "mymaster") == 0);
    ASSERT(strcmp(r->element[1]->element[1]->str, "redismaster") == 0);
    ASSERT(strcmp(r->element[2]->element[1]->str, "lmcache-svc") == 0);
    freeReplyObject(r);
    r = redisCommand(plain, "SENTINEL get-master-addr-by-name other");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    r = redisCommand(plain, "SENTINEL get-master-addr-by-name svc-a");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && atoi(r->element[1]->str) == PORT_PLAIN);
    freeReplyObject(r);
    r = redisCommand(plain, "SENTINEL MASTERS");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && strcmp(r->element[0]->element[1]->str, "svc-a") == 0);
    freeReplyObject(r);
}

/* Ports of the CLUSTER SLOTS entries asked at port, this one first. */
static int slot_ports(int port, int *out, int max) {
    redisContext *c = h_redis(port);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    int n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
        redisReply *s = r->element[0];
        n = 0;
        for (size_t i = 2; i < s->elements && n < max; i++) out[n++] = (int)s->element[i]->element[1]->integer;
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Each gateway lists itself first and the other as its replica, once
 * both have announced themselves to the master. */
static void test_cluster_lists_every_gateway(void) {
    int p[4], q[4], n = 0, m = 0;
    uint64_t end = mono_ms() + 10000;
    while (mono_ms() < end && ((n = slot_ports(PORT_GATEWAY, p, 4)) < 2 || (m = slot_ports(PORT_GATEWAY2, q, 4)) < 2))
        usleep(50 * 1000);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(m, 2);
    ASSERT(p[0] == PORT_GATEWAY && p[1] == PORT_GATEWAY2);
    ASSERT(q[0] == PORT_GATEWAY2 && q[1] == PORT_GATEWAY);
    redisReply *r = redisCommand(gw, "CLUSTER INFO");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_known_nodes:2\r\n"));
    freeReplyObject(r);
    r = redisCommand(gw, "CLUSTER NODES");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strstr(r->str, "myself,master") && strstr(r->str, " slave "));
    freeReplyObject(r);
}

static void test_redis_py_standalone(void) { run_redis_py(PORT_GC, "redis-py/standalone", "redismaster"); }   /* LMCache's default name */
static void test_redis_py_gateway(void) { run_redis_py(PORT_GATEWAY, "redis-py/gateway", "mymaster"); }

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(26 + NODES), "free ports");
    static const char *const gc_flags[] = {"--maxmemory-policy", "allkeys-lru", "--on-conflict", "keep", NULL};
    static const char *const plain_flags[] = {"--sentinel-master-name", "svc-a", NULL};
    if (start_standalone(PORT_GC, gc_flags) < 0 || start_standalone(PORT_PLAIN, plain_flags) < 0 ||
        !(gc_srv = h_redis(PORT_GC)) || !(plain = h_redis(PORT_PLAIN))) {
        printf("not ok - start: standalone servers did not come up\n");
        return 1;
    }
    RUN_TEST(test_conflict_keep_standalone);
    RUN_TEST(test_conflict_error_by_default);
    RUN_TEST(test_expiry_refused_without_gc);
    RUN_TEST(test_expiry_hint_ttl);
    RUN_TEST(test_gc_prefers_expired);
    RUN_TEST(test_gc_fill_standalone);
    RUN_TEST(test_gc_off_fills_up);
    RUN_TEST(test_redis_py_standalone);
    RUN_TEST(test_sentinel_names);
    if (start_cluster() != 0) {
        printf("not ok - start_cluster: master, %d nodes and a gateway did not come up\n", NODES);
        h_stop_all();
        return 1;
    }
    RUN_TEST(test_conflict_keep_gateway);
    RUN_TEST(test_expiry_refused_on_gateway);
    RUN_TEST(test_cluster_commands);
    RUN_TEST(test_cluster_lists_every_gateway);
    RUN_TEST(test_redis_py_gateway);
    RUN_TEST(test_gc_fill_cluster);
    redisFree(gc_srv);
    redisFree(plain);
    redisFree(gw);
    h_stop_all();
    TEST_EXIT();
}
