/* tests/integration/test_gateway.c - the gateway role end to end: a
 * master, three memory nodes and a gateway (--replicas 2) as child
 * processes, driven over RESP with hiredis exactly as any Redis client
 * would. Ports: one block of h_free_ports. Every child dies on every exit path
 * (cluster_harness.h); the binary is bounded by an alarm. */
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "test.h"
#include "cluster_harness.h"

static int port0;
#define MASTER_PORT  (port0 + 0)
#define GATEWAY_PORT (port0 + 1)    /* the second and third gateways +1, +2 */
#define NODE_PORT    (port0 + 10)   /* + i; data plane on NODE_PORT + 10 + i */
#define NODES        3
#define TIME_LIMIT_S 420   /* the SAN build beside other binaries took 244 s at load 22 */

static pid_t master, nodes[NODES];
static pid_t gateway;
static redisContext *gw;

/* A staging pool smaller than the 20 MiB value: that one takes the
 * dedicated-allocation path. */
static pid_t start_gateway_on(int port, const char *replicas) {
    const char *const flags[] = {"--replicas", replicas, NULL};
    return h_start_gateway_staged(MASTER_PORT, port, flags);
}

static pid_t start_gateway(void) { return start_gateway_on(GATEWAY_PORT, "2"); }

static int start_cluster(void) {
    if ((master = h_start_master(MASTER_PORT, NULL)) < 0) return -1;
    for (int i = 0; i < NODES; i++) {
        nodes[i] = h_start_node(MASTER_PORT, NODE_PORT + i, NODE_PORT + 10 + i, "64MB");
        if (nodes[i] < 0) return -1;
    }
    if (h_wait_nodes(MASTER_PORT, "alive", NODES, 20000) != 0) return -1;
    if ((gateway = start_gateway()) < 0) return -1;
    gw = h_redis(GATEWAY_PORT);
    h_redis_room(gw, 20 * 1024 * 1024 + 64);   /* the largest value read whole: v:20m */
    return gw ? 0 : -1;
}

/* ---- helpers ---- */

static redisReply *cmd(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(gw, fmt, ap);
    va_end(ap);
    return r;
}

static int is_status(redisReply *r, const char *s) {
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0;
}

static int is_error_prefix(redisReply *r, const char *prefix) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

static long long integer_of(redisReply *r) { return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1; }

/* SET key to len pattern bytes of seed: 1 if +OK. */
static int set_pattern(const char *key, size_t len, uint64_t seed) {
    char *v = xmalloc(len);
    h_fill(v, len, seed);
    redisReply *r = cmd("SET %s %b", key, v, len);
    int ok = is_status(r, "OK");
    if (!ok) printf("# SET %s (%zu bytes): %s\n", key, len, r && r->str ? r->str : gw->errstr);
    freeReplyObject(r);
    free(v);
    return ok;
}

/* 1 if r is a bulk of exactly len pattern bytes of seed. */
static int is_pattern(redisReply *r, size_t len, uint64_t seed) {
    if (!r || r->type != REDIS_REPLY_STRING || r->len != len) return 0;
    char *v = xmalloc(len);
    h_fill(v, len, seed);
    int same = memcmp(v, r->str, len) == 0;
    free(v);
    return same;
}

static int get_is_pattern(const char *key, size_t len, uint64_t seed) {
    redisReply *r = cmd("GET %s", key);
    int ok = is_pattern(r, len, seed);
    freeReplyObject(r);
    return ok;
}

static long long exists_count(const char *key) {
    redisReply *r = cmd("EXISTS %s", key);
    long long n = integer_of(r);
    freeReplyObject(r);
    return n;
}

/* A numeric field of an INFO section; -1 if missing. */
static long long info_ll(const char *section, const char *field) {
    return h_info_field(gw, section, field);
}

static long long info_field_ll(const char *field) { return info_ll("gateway", field); }

/* Until INFO section's field reaches at least want, bounded. */
static int wait_info_at_least(const char *section, const char *field, long long want) {
    uint64_t end = mono_ms() + 10000;
    while (mono_ms() < end && info_ll(section, field) < want) usleep(10 * 1000);
    return info_ll(section, field) >= want;
}

/* Values that outlive the node kill at the end. */
static const struct {
    const char *key;
    size_t len;
} sized[] = {
    {"v:1b", 1},
    {"v:64k", 64 * 1024},
    {"v:4m", 4 * 1024 * 1024},
    {"v:20m", 20 * 1024 * 1024},
};
#define NSIZED (sizeof sized / sizeof sized[0])

/* ---- cases ---- */

static void test_set_get_byte_exact(void) {
    for (size_t i = 0; i < NSIZED; i++) {
        ASSERT_MSG(set_pattern(sized[i].key, sized[i].len, 100 + i), "SET %s", sized[i].key);
        ASSERT_MSG(get_is_pattern(sized[i].key, sized[i].len, 100 + i), "GET %s", sized[i].key);
    }
    /* The 20 MiB value went through a dedicated staging mapping, which is
     * gone again once its put ended and its reply was written. */
    ASSERT_EQ(info_field_ll("staging_dedicated"), 0);
    ASSERT_EQ(info_field_ll("staging_used_bytes"), 0);
}

static void test_get_missing_is_null(void) {
    redisReply *r = cmd("GET %s", "no:such:key");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    r = cmd("STRLEN %s", "no:such:key");
    ASSERT_EQ(integer_of(r), 0);
    freeReplyObject(r);
}

static void test_exists_semantics(void) {
    ASSERT(set_pattern("e:1", 1000, 7));
    /* The very bytes again: an idempotent OK, as standalone answers. */
    ASSERT(set_pattern("e:1", 1000, 7));
    /* Other bytes: the write-once conflict; the stored value stays. */
    redisReply *r = cmd("SET %s %s", "e:1", "different");
    ASSERT_MSG(is_error_prefix(r, "EXISTS key already exists"), "reply %s", r && r->str ? r->str : "?");
    freeReplyObject(r);
    r = cmd("SET %s %s NX", "e:1", "different");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    ASSERT(get_is_pattern("e:1", 1000, 7));
    r = cmd("EXISTS %s %s %s", "e:1", "e:missing", "e:1");
    ASSERT_EQ(integer_of(r), 2);
    freeReplyObject(r);
    r = cmd("STRLEN %s", "e:1");
    ASSERT_EQ(integer_of(r), 1000);
    freeReplyObject(r);
}

static void test_del(void) {
    ASSERT(set_pattern("d:1", 5000, 9));
    redisReply *r = cmd("DEL %s %s", "d:1", "d:missing");
    ASSERT_EQ(integer_of(r), 1);
    freeReplyObject(r);
    ASSERT_EQ(exists_count("d:1"), 0);
    r = cmd("GET %s", "d:1");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    r = cmd("DEL %s", "d:1");
    ASSERT_EQ(integer_of(r), 0);
    freeReplyObject(r);
    ASSERT(set_pattern("d:u", 100, 11));
    r = cmd("UNLINK %s %s", "d:u", "d:missing");   /* the same as DEL, on the async path too */
    ASSERT_EQ(integer_of(r), 1);
    freeReplyObject(r);
    ASSERT_EQ(exists_count("d:u"), 0);
    /* Removed means free: the key takes new bytes. */
    ASSERT(set_pattern("d:1", 300, 10));
    ASSERT(get_is_pattern("d:1", 300, 10));
}

static void test_mget(void) {
    ASSERT(set_pattern("m:a", 10, 21));
    ASSERT(set_pattern("m:b", 70000, 22));
    redisReply *r = cmd("MGET %s %s %s", "m:a", "m:missing", "m:b");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT(is_pattern(r->element[0], 10, 21));
    ASSERT(r->element[1]->type == REDIS_REPLY_NIL);
    ASSERT(is_pattern(r->element[2], 70000, 22));
    freeReplyObject(r);
}

/* PREFIX:i for i < n, each base + i * step bytes of pattern seed + i: 1
 * if every SET was +OK. */
static int set_run(const char *prefix, int n, size_t base, size_t step, uint64_t seed) {
    char key[32];
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        snprintf(key, sizeof key, "%s:%d", prefix, i);
        ok = set_pattern(key, base + (size_t)i * step, seed + (uint64_t)i);
    }
    return ok;
}

/* DEL PREFIX:i for i < n. */
static void del_run(const char *prefix, int n) {
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s:%d", prefix, i);
        freeReplyObject(cmd("DEL %s", key));
    }
}

/* Small values on same-host nodes are read on the loop itself once its
 * client's paths are dialed and their chunks warm (cluster_gets_inline):
 * byte-exact, in order, a missing key among them still nil. Each round
 * is checked; the rounds stop once a round's worth was read inline. */
static void test_small_reads_inline(void) {
    enum { N = 100 };
    char key[32];
    ASSERT(set_run("in", N, 1, 41, 300));   /* 1 to 4060 bytes */
    long long before = info_field_ll("cluster_gets_inline");
    int ok = 1;
    uint64_t end = mono_ms() + 20000;
    do {
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof key, "in:%d", i);
            redisAppendCommand(gw, "GET %s", key);
        }
        redisAppendCommand(gw, "GET in:missing");
        for (int i = 0; ok && i <= N; i++) {
            redisReply *r = NULL;
            ok = redisGetReply(gw, (void **)&r) == REDIS_OK &&
                 (i < N ? is_pattern(r, 1 + (size_t)i * 41, 300 + (uint64_t)i) : r->type == REDIS_REPLY_NIL);
            if (!ok) printf("# reply %d of the round is wrong\n", i);
            freeReplyObject(r);
        }
        usleep(20 * 1000);
    } while (ok && mono_ms() < end && info_field_ll("cluster_gets_inline") < before + N);
    ASSERT(ok);
    ASSERT(info_field_ll("cluster_gets_inline") >= before + N);
    ASSERT_EQ(info_field_ll("staging_used_bytes"), 0);   /* the batches' shared ranges went back */
}

/* A GET costs the loop one master write and one wake-up for its reply
 * (INFO gateway master_wakeups): its read lease goes back ahead of the
 * next master command, in its write. Before, each GET's lease went in a
 * MOON.MRELEASE of its own right after, whose reply woke the loop a second
 * time (2 wake-ups a GET, the master read and answered twice). A lease
 * that no command takes goes by itself within a few ms
 * (master_lease_flushes), not at its expiry (lease_ms, 10 s): the value,
 * removed on the master behind the gateway's back, frees its extents at
 * once. */
static void test_get_one_master_wakeup(void) {
    enum { N = 40, LEN = 100 };
    ASSERT(set_pattern("lw:k", LEN, 77));
    ASSERT(get_is_pattern("lw:k", LEN, 77));
    /* its lease goes back by itself (no command follows to take it) */
    for (uint64_t end = mono_ms() + 3000; info_field_ll("master_lease_flushes") < 1 && mono_ms() < end;)
        usleep(5 * 1000);
    long long w0 = info_field_ll("master_wakeups"), f0 = info_field_ll("master_lease_flushes");
    ASSERT(w0 >= 0 && f0 >= 1);
    uint64_t t0 = mono_ms();
    for (int i = 0; i < N; i++) ASSERT_MSG(get_is_pattern("lw:k", LEN, 77), "GET %d", i);
    long long w1 = info_field_ll("master_wakeups"), f1 = info_field_ll("master_lease_flushes");
    long long beats = (long long)((mono_ms() - t0) / 1000) + 1;   /* the heartbeat's MOON.GATEWAY, once a second */
    printf("# %d GETs: %lld master wake-ups, %lld lease flushes\n", N, w1 - w0, f1 - f0);
    /* one a GET; a flush (a GET slower than its wait) wakes it once more */
    ASSERT(w1 - w0 <= N + (f1 - f0) + 2 * beats);
    redisContext *m = h_proven(h_redis(MASTER_PORT), "");   /* a member, as the gateway is */
    ASSERT(m != NULL);
    redisReply *r = redisCommand(m, "MOON.REMOVE lw:k");
    ASSERT_MSG(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1, "MOON.REMOVE: %s",
               r && r->str ? r->str : "?");
    freeReplyObject(r);
    uint64_t end = mono_ms() + 3000;
    while (mono_ms() < end && h_info_field(m, "cluster", "held_extents") != 0) usleep(10 * 1000);
    long long held = h_info_field(m, "cluster", "held_extents");
    redisFree(m);
    /* The last GET's lease went back by itself or with a heartbeat (a
     * slow sanitizer build may flush it before f1 is read): either way
     * well before lease_ms. */
    ASSERT_EQ(held, 0);
}

/* Large values read on the loop go about 1 MiB a loop iteration
 * (read_batch.h): GETs and an MGET of them pipelined in one write form
 * one batch that takes several iterations (cluster_gets_inline_deferred
 * grows), and every reply is byte-exact and in order, the MGET's too
 * (its keys are read in different iterations), a missing key among them
 * still nil. Rounds until one was read in steps (the first ones warm the
 * mappings through workers); the keys are removed after. */
static void test_large_reads_inline_in_steps(void) {
    enum { N = 5 };
    ASSERT(set_run("ls", N, 900000, 100000, 900));   /* 0.9 to 1.3 MB */
    int ok = 1;
    long long before = info_field_ll("cluster_gets_inline_deferred");
    uint64_t end = mono_ms() + 20000;
    do {
        for (int i = 0; i < N; i++) redisAppendCommand(gw, "GET ls:%d", i);
        redisAppendCommand(gw, "MGET ls:3 ls:missing ls:0 ls:4");
        redisAppendCommand(gw, "GET ls:missing");
        for (int i = 0; ok && i < N; i++) {
            redisReply *r = NULL;
            ok = redisGetReply(gw, (void **)&r) == REDIS_OK && is_pattern(r, 900000 + (size_t)i * 100000, 900 + (uint64_t)i);
            if (!ok) printf("# GET ls:%d is wrong\n", i);
            freeReplyObject(r);
        }
        redisReply *r = NULL;
        ok = ok && redisGetReply(gw, (void **)&r) == REDIS_OK && r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             is_pattern(r->element[0], 1200000, 903) && r->element[1]->type == REDIS_REPLY_NIL &&
             is_pattern(r->element[2], 900000, 900) && is_pattern(r->element[3], 1300000, 904);
        if (r && !ok) printf("# the MGET is wrong\n");
        freeReplyObject(r);
        r = NULL;
        ok = ok && redisGetReply(gw, (void **)&r) == REDIS_OK && r->type == REDIS_REPLY_NIL;
        freeReplyObject(r);
        usleep(20 * 1000);
    } while (ok && mono_ms() < end && info_field_ll("cluster_gets_inline_deferred") == before);
    ASSERT(ok);
    ASSERT(info_field_ll("cluster_gets_inline_deferred") > before);
    ASSERT_EQ(info_field_ll("staging_used_bytes"), 0);   /* every value's range went back */
    del_run("ls", N);
}

/* Small SETs whose replicas are all on same-host nodes with warm
 * mappings are written on the loop itself (cluster_puts_inline), with a
 * larger one among them (a worker's: the loop copies values up to 64 KiB
 * only): every reply OK, and every value reads back
 * byte-exact (a GET checks the bytes against the CRC the loop's copy
 * computed and MOON.MPUTEND published, on both replicas). Rounds of fresh
 * keys until a round's worth was written inline (bounded); the keys are
 * removed after (cases after it count objects). */
static void test_small_writes_inline(void) {
    enum { N = 100, BIG = 300000 };
    char key[48];
    long long before = info_field_ll("cluster_puts_inline");
    int ok = 1, rounds = 0;
    uint64_t end = mono_ms() + 20000;
    do {
        for (int i = 0; i <= N; i++) {
            size_t len = i < N ? 1 + (size_t)i * 41 : BIG;
            char *v = xmalloc(len);
            h_fill(v, len, 700 + (uint64_t)(rounds * 1000 + i));
            snprintf(key, sizeof key, "wi:%d:%d", rounds, i);
            redisAppendCommand(gw, "SET %s %b", key, v, len);
            free(v);
        }
        for (int i = 0; ok && i <= N; i++) {
            redisReply *r = NULL;
            ok = redisGetReply(gw, (void **)&r) == REDIS_OK && is_status(r, "OK");
            if (!ok) printf("# SET %d of round %d: %s\n", i, rounds, r && r->str ? r->str : "no reply");
            freeReplyObject(r);
        }
        rounds++;
        usleep(20 * 1000);
    } while (ok && mono_ms() < end && info_field_ll("cluster_puts_inline") < before + N);
    ASSERT(ok);
    ASSERT(info_field_ll("cluster_puts_inline") >= before + N);
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i <= N; i++) {
            snprintf(key, sizeof key, "wi:%d:%d", k, i);
            ASSERT_MSG(get_is_pattern(key, i < N ? 1 + (size_t)i * 41 : BIG, 700 + (uint64_t)(k * 1000 + i)),
                       "GET %s", key);
            freeReplyObject(cmd("DEL %s", key));
        }
}

/* The keys test_small_reads_inline stored (cases after it count objects). */
static void drop_inline_keys(void) { del_run("in", 100); }

static void test_dbsize_counts_cluster_objects(void) {
    /* sized[] 4, e:1, d:1, m:a, m:b (before the later cases add more) */
    redisReply *r = cmd("DBSIZE");
    ASSERT_EQ(integer_of(r), (long long)NSIZED + 4);
    freeReplyObject(r);
}

static void test_info_gateway_section(void) {
    redisReply *r = cmd("INFO");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    ASSERT(strstr(r->str, "# Gateway\r\n") != NULL);
    char want[64];
    snprintf(want, sizeof want, "\r\nmaster:127.0.0.1:%d\r\n", MASTER_PORT);
    ASSERT(strstr(r->str, want) != NULL);
    ASSERT(strstr(r->str, "\r\nreplicas:2\r\n") != NULL);
    freeReplyObject(r);
    ASSERT(info_field_ll("cluster_puts") >= (long long)NSIZED);
}

/* INFO memory/replication/keyspace answer as redis-server's do, with the
 * cluster's totals: maxmemory is the three 64 MiB node segments. */
static void test_info_memory_replication_keyspace(void) {
    ASSERT(set_pattern("info:k", 1000, 3));
    ASSERT_EQ(info_ll("memory", "maxmemory"), 3LL * 64 * 1024 * 1024);
    long long used = info_ll("memory", "used_memory");
    ASSERT(used >= 1000 && used < 3LL * 64 * 1024 * 1024);
    redisReply *r = cmd("INFO");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    ASSERT(strstr(r->str, "\r\nmaxmemory_human:192.00M\r\n") != NULL);
    ASSERT(strstr(r->str, "\r\nused_memory_human:") != NULL);
    ASSERT(strstr(r->str, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n") != NULL);
    redisReply *d = cmd("DBSIZE");
    char want[96];
    snprintf(want, sizeof want, "# Keyspace\r\ndb0:keys=%lld,expires=0,avg_ttl=0\r\n", integer_of(d));
    ASSERT(integer_of(d) >= 1);
    ASSERT(strstr(r->str, want) != NULL);
    freeReplyObject(d);
    freeReplyObject(r);
}


/* MULTI/EXEC through the gateway: the queued GETs and SETs block on the
 * workers one after another, and EXEC's array still comes back whole and
 * in order with byte-exact values. */
static void test_multi_exec_in_order(void) {
    char *v = xmalloc(300000);
    h_fill(v, 300000, 77);
    redisAppendCommand(gw, "MULTI");
    redisAppendCommand(gw, "SET tx:a %b", v, (size_t)300000);
    redisAppendCommand(gw, "GET tx:a");
    redisAppendCommand(gw, "SET tx:b small");
    redisAppendCommand(gw, "EXISTS tx:a tx:b tx:none");
    redisAppendCommand(gw, "GET tx:none");
    redisAppendCommand(gw, "SET tx:a other");
    redisAppendCommand(gw, "GET tx:b");
    redisAppendCommand(gw, "EXEC");
    redisAppendCommand(gw, "PING");
    redisReply *r = NULL;
    ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK && is_status(r, "OK"));
    freeReplyObject(r);
    for (int i = 0; i < 7; i++) {
        ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK && is_status(r, "QUEUED"));
        freeReplyObject(r);
    }
    ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 7);
    ASSERT(is_status(r->element[0], "OK"));
    ASSERT(is_pattern(r->element[1], 300000, 77));
    ASSERT(is_status(r->element[2], "OK"));
    ASSERT_EQ(integer_of(r->element[3]), 2);
    ASSERT(r->element[4]->type == REDIS_REPLY_NIL);
    ASSERT(is_error_prefix(r->element[5], "EXISTS"));
    ASSERT(r->element[6]->type == REDIS_REPLY_STRING && strcmp(r->element[6]->str, "small") == 0);
    freeReplyObject(r);
    ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK && is_status(r, "PONG"));
    freeReplyObject(r);
    ASSERT(get_is_pattern("tx:a", 300000, 77));
    free(v);
}

static void test_multi_queuing_error_aborts(void) {
    redisAppendCommand(gw, "MULTI");
    redisAppendCommand(gw, "SET tx:ab 1");
    redisAppendCommand(gw, "NOSUCH x");
    redisAppendCommand(gw, "EXEC");
    const char *want[] = {"OK", "QUEUED", "ERR unknown command", "EXECABORT"};
    for (int i = 0; i < 4; i++) {
        redisReply *r = NULL;
        ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK && r);
        ASSERT(i < 2 ? is_status(r, want[i]) : is_error_prefix(r, want[i]));
        freeReplyObject(r);
    }
    ASSERT_EQ(exists_count("tx:ab"), 0);
}

/* redis-py's default pipeline() is MULTI ... EXEC (the batching of
 * SGLang HiCache's Valkey backend). */
static void test_redis_py_transactional_pipeline(void) {
    char cmdline[512];
    snprintf(cmdline, sizeof cmdline,
             "timeout 60 /usr/bin/python3 tcl-tests/helpers/redis_py_multi.py %d gw 2>&1", GATEWAY_PORT);
    FILE *f = popen(cmdline, "r");
    ASSERT(f != NULL);
    char line[512];
    int ok = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        printf("# %s", line);
        ok += strncmp(line, "ok - ", 5) == 0;
        bad += strncmp(line, "not ok - ", 9) == 0;
    }
    int status = pclose(f);
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(ok, 6);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Several clients, each pipelining SETs then GETs: every blocked
 * command's reply comes back in order and byte-exact, and the work ran
 * on the workers. */
#define PIPE_CLIENTS 3
#define PIPE_DEPTH   20
static void test_pipelined_clients(void) {
    long long jobs_before = info_field_ll("jobs_done");
    redisContext *cl[PIPE_CLIENTS] = {0};
    char key[64];
    char *vals[PIPE_CLIENTS][PIPE_DEPTH] = {{0}};
    size_t lens[PIPE_CLIENTS][PIPE_DEPTH];
    int ok = 1;
    for (int i = 0; i < PIPE_CLIENTS && ok; i++) {
        cl[i] = h_redis(GATEWAY_PORT);
        if (!cl[i]) ok = 0;
        for (int j = 0; ok && j < PIPE_DEPTH; j++) {
            lens[i][j] = 1 + (size_t)(i * 7919 + j * 104729) % (300 * 1024);
            vals[i][j] = xmalloc(lens[i][j]);
            h_fill(vals[i][j], lens[i][j], (uint64_t)(i * 1000 + j));
            snprintf(key, sizeof key, "p:%d:%d", i, j);
            redisAppendCommand(cl[i], "SET %s %b", key, vals[i][j], lens[i][j]);
        }
        for (int j = 0; ok && j < PIPE_DEPTH; j++) {
            snprintf(key, sizeof key, "p:%d:%d", i, j);
            redisAppendCommand(cl[i], "GET %s", key);
        }
    }
    for (int i = 0; i < PIPE_CLIENTS && ok; i++) {
        for (int j = 0; ok && j < 2 * PIPE_DEPTH; j++) {
            redisReply *r = NULL;
            if (redisGetReply(cl[i], (void **)&r) != REDIS_OK) ok = 0;
            else if (j < PIPE_DEPTH) ok = is_status(r, "OK");
            else ok = r && r->type == REDIS_REPLY_STRING && r->len == lens[i][j - PIPE_DEPTH] &&
                      memcmp(r->str, vals[i][j - PIPE_DEPTH], r->len) == 0;
            if (r) freeReplyObject(r);
        }
    }
    for (int i = 0; i < PIPE_CLIENTS; i++) {
        if (cl[i]) redisFree(cl[i]);
        for (int j = 0; j < PIPE_DEPTH; j++) free(vals[i][j]);
    }
    ASSERT(ok);
    ASSERT(info_field_ll("jobs_done") > jobs_before);   /* the bytes moved on workers */
    for (int i = 0; i < PIPE_CLIENTS; i++)
        for (int j = 0; j < PIPE_DEPTH; j++) {
            snprintf(key, sizeof key, "p:%d:%d", i, j);
            redisReply *r = cmd("DEL %s", key);
            ASSERT_EQ(integer_of(r), 1);
            freeReplyObject(r);
        }
}

/* What one pipelined command must answer. */
typedef struct mix_want {
    enum { MW_OK, MW_NIL, MW_VALUE, MW_INT, MW_PAIR } kind;
    size_t len, len2;         /* MW_VALUE, MW_PAIR: pattern lengths (0: nil) */
    uint64_t seed, seed2;
    long long n;              /* MW_INT */
} mix_want;

#define MIX_CLIENTS 6
#define MIX_KEYS    12
#define MIX_MAX     (9 * MIX_KEYS + 8)

typedef struct mix_client {
    redisContext *c;
    mix_want want[MIX_MAX];
    size_t nwant, got;
    int wrote;                /* everything sent */
    int bad;
} mix_client;

/* Value sizes from 64 B to 8 MiB; the big ones for two clients only,
 * so the staging memory and the nodes hold them. */
static size_t mix_len(int i, int j) {
    static const size_t small[] = {64, 64, 1000, 64, 16 * 1024, 64, 300 * 1024, 64};
    if (j == MIX_KEYS - 1 && i < 2) return 8 * 1024 * 1024;
    if (j == MIX_KEYS - 2) return 1024 * 1024;
    return small[(size_t)(i + j) % (sizeof small / sizeof small[0])];
}

static void mix_expect(mix_client *m, mix_want w) {
    if (m->nwant < MIX_MAX) m->want[m->nwant++] = w;
}

static int mix_check(const mix_want *w, redisReply *r) {
    switch (w->kind) {
    case MW_OK: return is_status(r, "OK");
    case MW_NIL: return r && r->type == REDIS_REPLY_NIL;
    case MW_VALUE: return is_pattern(r, w->len, w->seed);
    case MW_INT: return integer_of(r) == w->n;
    case MW_PAIR:
        return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_pattern(r->element[0], w->len, w->seed) &&
               (w->len2 ? is_pattern(r->element[1], w->len2, w->seed2) : r->element[1]->type == REDIS_REPLY_NIL);
    }
    return 0;
}

/* Per key, on one connection, every command sent before any reply is
 * read: each one must see exactly the effect of those before it. */
static void mix_pipeline(mix_client *m, int i) {
    char key[64], prev[64];
    for (int j = 0; j < MIX_KEYS; j++) {
        size_t len = mix_len(i, j);
        uint64_t seed = (uint64_t)(5000 + i * 100 + j);
        char *v = xmalloc(len);
        h_fill(v, len, seed);
        snprintf(key, sizeof key, "mx:%d:%d", i, j);
        redisAppendCommand(m->c, "GET %s", key);
        mix_expect(m, (mix_want){.kind = MW_NIL});
        if (j % 3 == 1) redisAppendCommand(m->c, "SET %s %b NX", key, v, len);
        else redisAppendCommand(m->c, "SET %s %b", key, v, len);
        mix_expect(m, (mix_want){.kind = MW_OK});
        redisAppendCommand(m->c, "GET %s", key);
        mix_expect(m, (mix_want){.kind = MW_VALUE, .len = len, .seed = seed});
        redisAppendCommand(m->c, "SET %s %b", key, v, len);   /* the same bytes: OK */
        mix_expect(m, (mix_want){.kind = MW_OK});
        redisAppendCommand(m->c, "SET %s %s NX", key, "other");   /* exists: nil */
        mix_expect(m, (mix_want){.kind = MW_NIL});
        if (j > 0) {
            /* The previous key was deleted when j-1 is even. */
            size_t plen = (j - 1) % 2 ? mix_len(i, j - 1) : 0;
            snprintf(prev, sizeof prev, "mx:%d:%d", i, j - 1);
            redisAppendCommand(m->c, "MGET %s %s", key, prev);
            mix_expect(m, (mix_want){.kind = MW_PAIR, .len = len, .seed = seed, .len2 = plen, .seed2 = seed - 1});
        }
        if (j % 2 == 0) {
            redisAppendCommand(m->c, "DEL %s", key);
            mix_expect(m, (mix_want){.kind = MW_INT, .n = 1});
            redisAppendCommand(m->c, "GET %s", key);
            mix_expect(m, (mix_want){.kind = MW_NIL});
        }
        free(v);
    }
}

/* Writes what the socket takes and checks what came back, in order. */
static void mix_pump(mix_client *m, short revents) {
    if ((revents & POLLOUT) && !m->wrote && redisBufferWrite(m->c, &m->wrote) != REDIS_OK) m->bad = 1;
    if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
    if (redisBufferRead(m->c) != REDIS_OK) {
        m->bad = 1;
        return;
    }
    redisReply *r = NULL;
    while (!m->bad && redisGetReplyFromReader(m->c, (void **)&r) == REDIS_OK && r) {
        if (m->got >= m->nwant || !mix_check(&m->want[m->got], r)) {
            printf("# reply %zu of %zu: unexpected (type %d %s)\n", m->got, m->nwant, r->type,
                   r->type == REDIS_REPLY_ERROR ? r->str : "");
            m->bad = 1;
        }
        m->got++;
        freeReplyObject(r);
    }
}

/* Many clients pipelining mixed GET/SET/SET NX/MGET/DEL of 64 B to 8 MiB at
 * once: byte-exact values, and on each connection the replies in order
 * with the effects in order (a GET after a SET sees it, after a DEL
 * does not). Both directions are driven without blocking, so a client
 * reading late never stalls the others. */
static void test_pipelined_mixed(void) {
    mix_client *m = xcalloc(MIX_CLIENTS, sizeof *m);
    int ok = 1;
    for (int i = 0; i < MIX_CLIENTS && ok; i++) {
        if (!(m[i].c = h_redis(GATEWAY_PORT))) ok = 0;
        else {
            h_redis_room(m[i].c, mix_len(i, MIX_KEYS - 1) + 64);   /* its largest value */
            mix_pipeline(&m[i], i);
            m[i].c->flags &= ~REDIS_BLOCK;   /* driven by poll below */
            ok = fcntl(m[i].c->fd, F_SETFL, fcntl(m[i].c->fd, F_GETFL) | O_NONBLOCK) == 0;
        }
    }
    uint64_t end = mono_ms() + 60000;
    for (int busy = ok; busy && mono_ms() < end;) {
        struct pollfd pfd[MIX_CLIENTS];
        busy = 0;
        for (int i = 0; i < MIX_CLIENTS; i++) {
            pfd[i] = (struct pollfd){.fd = m[i].c->fd, .events = POLLIN | (m[i].wrote ? 0 : POLLOUT)};
            if (!m[i].bad && m[i].got < m[i].nwant) busy = 1;
            else pfd[i].fd = -1;
        }
        if (busy && poll(pfd, MIX_CLIENTS, 1000) > 0)
            for (int i = 0; i < MIX_CLIENTS; i++)
                if (pfd[i].fd >= 0) mix_pump(&m[i], pfd[i].revents);
    }
    for (int i = 0; i < MIX_CLIENTS; i++) {
        if (m[i].c && (m[i].bad || m[i].got != m[i].nwant)) {
            printf("# client %d: %zu of %zu replies%s\n", i, m[i].got, m[i].nwant, m[i].bad ? ", a wrong one" : "");
            ok = 0;
        }
        if (m[i].c) redisFree(m[i].c);
    }
    free(m);
    ASSERT(ok);
    char key[64];
    for (int i = 0; i < MIX_CLIENTS; i++)
        for (int j = 1; j < MIX_KEYS; j += 2) {
            snprintf(key, sizeof key, "mx:%d:%d", i, j);
            ASSERT(get_is_pattern(key, mix_len(i, j), (uint64_t)(5000 + i * 100 + j)));
            redisReply *r = cmd("DEL %s", key);
            ASSERT_EQ(integer_of(r), 1);
            freeReplyObject(r);
        }
}

/* Clients racing to SET one key with the same bytes all get OK, as in
 * standalone: none sees the key half-written. */
#define RACERS 4
static void test_same_key_racing_sets(void) {
    const size_t len = 512 * 1024;
    char *v = xmalloc(len);
    h_fill(v, len, 51);
    redisContext *cl[RACERS] = {0};
    int ok = 1;
    for (int i = 0; i < RACERS && ok; i++) {
        if (!(cl[i] = h_redis(GATEWAY_PORT))) ok = 0;
        else redisAppendCommand(cl[i], "SET %s %b", "race:1", v, len);
    }
    for (int i = 0; i < RACERS && ok; i++) {
        int done = 0;
        while (!done && redisBufferWrite(cl[i], &done) == REDIS_OK) {}
        ok = done;
    }
    for (int i = 0; i < RACERS && ok; i++) {
        redisReply *r = NULL;
        ok = redisGetReply(cl[i], (void **)&r) == REDIS_OK && is_status(r, "OK");
        if (!ok) printf("# racer %d: %s\n", i, r && r->str ? r->str : "no reply");
        if (r) freeReplyObject(r);
    }
    for (int i = 0; i < RACERS; i++)
        if (cl[i]) redisFree(cl[i]);
    free(v);
    ASSERT(ok);
    ASSERT(get_is_pattern("race:1", len, 51));
}

/* Half a value, then the client is gone: no key, no staging left. */
static void test_disconnect_mid_value_leaves_no_key(void) {
    long long aborted = info_ll("stats", "aborted_puts");
    redisContext *c = h_redis(GATEWAY_PORT);
    ASSERT(c);
    const size_t total = 3 * 1024 * 1024, sent = total / 2;
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "*3\r\n$3\r\nSET\r\n$6\r\nhalf:1\r\n$%zu\r\n", total);
    char *body = xcalloc(1, sent);
    int ok = write(c->fd, hdr, (size_t)n) == n;
    for (size_t off = 0; ok && off < sent;) {
        ssize_t w = write(c->fd, body + off, sent - off);
        if (w <= 0) ok = 0;
        else off += (size_t)w;
    }
    free(body);
    redisFree(c);
    ASSERT(ok);
    /* Once the gateway has dropped the half value, its staging is back. */
    ASSERT(wait_info_at_least("stats", "aborted_puts", aborted + 1));
    ASSERT_EQ(info_field_ll("staging_used_bytes"), 0);
    ASSERT_EQ(exists_count("half:1"), 0);
    redisReply *r = cmd("GET %s", "half:1");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    /* Nothing was left pending at the master either: the key is free. */
    ASSERT(set_pattern("half:1", 1234, 31));
    ASSERT(get_is_pattern("half:1", 1234, 31));
}

/* EXISTS, STRLEN and DEL wait for the master without stalling the gateway:
 * with the master stopped, another client's PING is answered while they
 * are still unanswered; once it runs again they answer as standalone. */
/* With the master stopped, a's queued commands go out and stay
 * unanswered while b is served: 1 if so (the master runs again after). */
static int only_its_client_waits(redisContext *a, redisContext *b) {
    h_sigstop(master);
    int wrote = 0;
    while (!wrote && redisBufferWrite(a, &wrote) == REDIS_OK) {}
    usleep(100 * 1000);
    redisReply *r = redisCommand(b, "PING");
    int pong = is_status(r, "PONG");
    freeReplyObject(r);
    struct pollfd p = {.fd = a->fd, .events = POLLIN};
    int early = poll(&p, 1, 0);
    kill(master, SIGCONT);
    if (!wrote || !pong || early != 0) printf("# wrote %d, pong %d, early replies %d\n", wrote, pong, early);
    return wrote && pong && early == 0;
}

static void test_del_exists_strlen_do_not_stall(void) {
    ASSERT(set_pattern("nb:1", 100, 3));
    redisContext *a = h_redis(GATEWAY_PORT), *b = h_redis(GATEWAY_PORT);
    ASSERT(a && b);
    redisAppendCommand(a, "EXISTS %s %s", "nb:1", "nb:none");
    redisAppendCommand(a, "STRLEN %s", "nb:1");
    redisAppendCommand(a, "DEL %s %s", "nb:1", "nb:none");
    ASSERT(only_its_client_waits(a, b));
    redisReply *e = NULL, *l = NULL, *d = NULL;
    ASSERT(redisGetReply(a, (void **)&e) == REDIS_OK && redisGetReply(a, (void **)&l) == REDIS_OK &&
           redisGetReply(a, (void **)&d) == REDIS_OK);
    ASSERT_EQ(integer_of(e), 1);
    ASSERT_EQ(integer_of(l), 100);
    ASSERT_EQ(integer_of(d), 1);
    freeReplyObject(e);
    freeReplyObject(l);
    freeReplyObject(d);
    redisFree(a);
    redisFree(b);
    ASSERT_EQ(exists_count("nb:1"), 0);
}

/* DBSIZE, SET ... NX NX and a SET of a stored key with its own bytes
 * (its size and CRC are asked) go over the asynchronous master
 * connection too: a stopped master stalls only their client, and a
 * DBSIZE still counts the SETs sent before it on its connection. */
static void test_dbsize_and_set_options_do_not_stall(void) {
    char v[100];
    h_fill(v, sizeof v, 5);
    ASSERT(set_pattern("nb:2", sizeof v, 5));
    redisReply *r = cmd("DBSIZE");
    long long before = integer_of(r);
    freeReplyObject(r);
    ASSERT(before >= 1);
    redisContext *a = h_redis(GATEWAY_PORT), *b = h_redis(GATEWAY_PORT);
    ASSERT(a && b);
    redisAppendCommand(a, "DBSIZE");
    redisAppendCommand(a, "SET %s %b", "nb:2", v, sizeof v);
    redisAppendCommand(a, "SET %s %b NX nx", "nb:3", v, sizeof v);
    redisAppendCommand(a, "DBSIZE");
    ASSERT(only_its_client_waits(a, b));
    redisReply *rep[4] = {0};
    for (int i = 0; i < 4; i++) ASSERT(redisGetReply(a, (void **)&rep[i]) == REDIS_OK);
    long long first = integer_of(rep[0]), last = integer_of(rep[3]);
    int same_ok = is_status(rep[1], "OK"), nx_ok = is_status(rep[2], "OK");
    for (int i = 0; i < 4; i++) freeReplyObject(rep[i]);
    redisFree(a);
    redisFree(b);
    ASSERT_EQ(first, before);
    ASSERT(same_ok && nx_ok);
    ASSERT_EQ(last, before + 1);
    r = cmd("SET %s %b", "nb:2", "other", (size_t)5);   /* other bytes: refused, asked the same way */
    ASSERT(is_error_prefix(r, "EXISTS"));
    freeReplyObject(r);
}

/* A client that sends a whole SET and a big GET and goes away before
 * the workers are back: the value it sent in full is stored, the GET's
 * staging memory comes back, nothing else changes. */
static void test_disconnect_while_blocked(void) {
    long long jobs = info_field_ll("jobs_done");
    redisContext *c = h_redis(GATEWAY_PORT);
    ASSERT(c);
    const size_t len = 4 * 1024 * 1024;
    char *v = xmalloc(len);
    h_fill(v, len, 41);
    redisAppendCommand(c, "SET %s %b", "gone:1", v, len);
    free(v);
    redisAppendCommand(c, "GET %s", "v:20m");
    int done = 0;
    while (!done && redisBufferWrite(c, &done) == REDIS_OK) {}
    redisFree(c);
    ASSERT(done);
    /* Both finished: the SET's put is a worker job; the 20 MiB GET
     * streams, a job per slice, the last ones ending after the client
     * left, or, when the client was gone before its value was located,
     * needs no worker at all (its batch had nothing left to move). Its
     * buffers go with the client. */
    ASSERT(wait_info_at_least("gateway", "jobs_done", jobs + 1));
    uint64_t end = mono_ms() + 5000;
    while (mono_ms() < end && info_field_ll("staging_used_bytes") + info_field_ll("staging_dedicated") +
                                      info_field_ll("jobs_inflight") != 0)
        usleep(10 * 1000);
    ASSERT_EQ(info_field_ll("staging_used_bytes"), 0);
    ASSERT_EQ(info_field_ll("staging_dedicated"), 0);
    ASSERT_EQ(info_field_ll("jobs_inflight"), 0);
    ASSERT_EQ(exists_count("gone:1"), 1);
    redisReply *r = cmd("GET %s", "gone:1");
    int same = is_pattern(r, len, 41);
    freeReplyObject(r);
    ASSERT(same);
}

/* With two replicas, losing one node loses nothing. */
static void test_node_killed_values_survive(void) {
    h_kill(nodes[0]);
    nodes[0] = 0;
    for (size_t i = 0; i < NSIZED; i++)
        ASSERT_MSG(get_is_pattern(sized[i].key, sized[i].len, 100 + i), "GET %s after the kill",
                   sized[i].key);
    ASSERT(get_is_pattern("e:1", 1000, 7));
    ASSERT(get_is_pattern("m:b", 70000, 22));
}

/* FLUSHALL through the gateway: one MOON.FLUSH removes every object, the
 * space comes back (the gateway gave its read leases back), and a key
 * takes new bytes again. */
static void test_flushall(void) {
    redisReply *r = cmd("DBSIZE");
    ASSERT(integer_of(r) >= (long long)NSIZED);
    freeReplyObject(r);
    ASSERT(info_ll("memory", "used_memory") > 20 * 1024 * 1024);
    r = cmd("FLUSHALL");
    ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0);
    freeReplyObject(r);
    r = cmd("DBSIZE");
    ASSERT_EQ(integer_of(r), 0);
    freeReplyObject(r);
    r = cmd("GET %s", sized[2].key);
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    /* Usually at once; the bound covers the node killed just before
     * (until it is declared dead) and a slow sanitizer build. */
    uint64_t end = mono_ms() + 40000;
    while (mono_ms() < end && info_ll("memory", "used_memory") != 0) usleep(20 * 1000);
    if (info_ll("memory", "used_memory") != 0) {
        redisContext *m = h_redis(MASTER_PORT);
        redisReply *x = m ? redisCommand(m, "INFO cluster") : NULL;
        printf("# %s\n", x && x->str ? x->str : "?");
        if (x) freeReplyObject(x);
        if (m) redisFree(m);
    }
    ASSERT_EQ(info_ll("memory", "used_memory"), 0);
    r = cmd("FLUSHDB %s", "nonsense");
    ASSERT_MSG(is_error_prefix(r, "ERR syntax error"), "reply %s", r && r->str ? r->str : "?");
    freeReplyObject(r);
    ASSERT(set_pattern(sized[2].key, 1000, 77));   /* other bytes: no EXISTS */
    ASSERT(get_is_pattern(sized[2].key, 1000, 77));
}

/* SIGTERM with blocked clients' work done: exit 0 (under ASan that
 * also means no leak). */
/* A gateway asking for more replicas than there are nodes: the master's
 * NOREPLICAS reaches the client as is. */
static void test_noreplicas_error(void) {
    pid_t g = start_gateway_on(GATEWAY_PORT + 1, "4");
    ASSERT(g > 0);
    redisContext *c = h_redis(GATEWAY_PORT + 1);
    ASSERT(c != NULL);
    redisReply *r = redisCommand(c, "SET nr:k v");
    if (!is_error_prefix(r, "NOREPLICAS ")) printf("# got: %s\n", r && r->str ? r->str : "?");
    ASSERT(is_error_prefix(r, "NOREPLICAS "));
    freeReplyObject(r);
    redisFree(c);
    h_kill(g);
}

/* A node that joins after the gateway started is read on the loop too:
 * the inline client learns it (before, it never did, and every read of
 * a value held only there went through a worker). Keys of a replicas-1
 * gateway placed on the new node, GET until a round's worth was read
 * inline, bounded. Keys are SET for up to 30 s, not a count of them: a
 * put that meets the fresh node before the gateway can reach it makes
 * it suspect for the node timeout, and a fast loop (400 SETs once)
 * outruns that. */
static void test_joined_node_read_inline(void) {
    enum { K = 12 };
    const int gport = GATEWAY_PORT + 2, joined = NODES;   /* the new node's index */
    pid_t g = start_gateway_on(gport, "1");
    ASSERT(g > 0);
    pid_t n = h_start_node(MASTER_PORT, NODE_PORT + joined, NODE_PORT + 10 + joined, "64MB");
    ASSERT(n > 0);
    uint32_t ids[NODES + 1];
    ASSERT(h_wait_nodes(MASTER_PORT, "alive", NODES, 20000) == 0);   /* nodes[0] died before */
    /* that count may still hold nodes[0] (not yet found dead): wait for
     * the new node itself in the topology */
    int listed = -1;
    for (uint64_t end = mono_ms() + 20000; (listed = h_node_ids(MASTER_PORT, NODE_PORT + 10, ids, NODES + 1)) != 0 &&
                                           mono_ms() < end;)
        usleep(50 * 1000);
    ASSERT(listed == 0);
    redisContext *c = h_redis(gport);
    ASSERT(c != NULL);
    char keys[K][32];
    int have = 0, tried = 0;
    for (uint64_t end = mono_ms() + 30000; have < K && mono_ms() < end; tried++) {
        snprintf(keys[have], sizeof keys[have], "jn:%d", tried);
        redisReply *r = redisCommand(c, "SET %s jn-value-%d", keys[have], tried);
        ASSERT(is_status(r, "OK"));
        freeReplyObject(r);
        int at = -1;
        uint64_t off;
        if (h_locate_byte(MASTER_PORT, keys[have], 0, 0, ids, NODES + 1, &at, &off) == 0 && at == joined) have++;
    }
    ASSERT_MSG(have == K, "%d of %d keys on the new node after %d SETs", have, K, tried);
    long long before = h_info_field(c, "gateway", "cluster_gets_inline");
    int ok = 1;
    uint64_t end = mono_ms() + 20000;
    do {
        for (int k = 0; ok && k < K; k++) {
            redisReply *r = redisCommand(c, "GET %s", keys[k]);
            char want[32];
            snprintf(want, sizeof want, "jn-value-%s", keys[k] + 3);
            ok = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0;
            freeReplyObject(r);
        }
        usleep(20 * 1000);
    } while (ok && mono_ms() < end && h_info_field(c, "gateway", "cluster_gets_inline") < before + K);
    ASSERT(ok);
    ASSERT(h_info_field(c, "gateway", "cluster_gets_inline") >= before + K);
    redisFree(c);
    h_kill(g);
    h_kill(n);
}

/* The master gone: SET, GET, FLUSHALL, SCAN, KEYS and DBSIZE say TRYAGAIN,
 * and the gateway serves on. */
/* r is the gateway's "master unreachable" answer (what it was said if not). */
static int says_unreachable(const char *what, redisReply *r) {
    int yes = is_error_prefix(r, "TRYAGAIN the master is unreachable");
    if (!yes) printf("# %s got type %d: %s\n", what, r ? r->type : -1, r && r->str ? r->str : "?");
    return yes;
}

static void test_master_down_is_tryagain(void) {
    h_kill(master);
    redisReply *r;
    /* Asked again and again: a worker whose client saw its connection
     * close tries a new one, which is refused, and that says TRYAGAIN too
     * (once answered ERR: the client's "cannot reach" was not known as
     * the master's). */
    for (int i = 0; i < 6; i++) {
        r = cmd("SET td:k v");
        ASSERT(says_unreachable("SET", r));
        freeReplyObject(r);
        r = cmd("GET v:1b");
        ASSERT(says_unreachable("GET", r));
        freeReplyObject(r);
    }
    r = cmd("FLUSHALL");
    ASSERT(says_unreachable("FLUSHALL", r));
    freeReplyObject(r);
    /* A walk or a count with no master is no answer, not an empty one. */
    const char *const walks[] = {"SCAN 0", "KEYS *", "DBSIZE"};
    for (size_t i = 0; i < sizeof walks / sizeof walks[0]; i++) {
        r = cmd(walks[i]);
        if (!is_error_prefix(r, "TRYAGAIN ")) printf("# %s got type %d\n", walks[i], r ? r->type : -1);
        ASSERT(is_error_prefix(r, "TRYAGAIN the master is unreachable"));
        freeReplyObject(r);
    }
    r = cmd("PING");
    ASSERT(is_status(r, "PONG"));
    freeReplyObject(r);
}

static void test_sigterm_exits_cleanly(void) {
    redisFree(gw);
    gw = NULL;
    kill(gateway, SIGTERM);
    int status = -1;
    uint64_t end = mono_ms() + 10000;
    pid_t got = 0;
    while (mono_ms() < end && (got = waitpid(gateway, &status, WNOHANG)) == 0) usleep(20 * 1000);
    if (got == gateway) h_forget(gateway);
    ASSERT_EQ(got, gateway);
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(21 + NODES), "free ports");   /* and one node joining */
    if (start_cluster() != 0) {
        printf("not ok - start_cluster: master, %d nodes and a gateway did not come up\n", NODES);
        return 1;
    }
    RUN_TEST(test_set_get_byte_exact);
    RUN_TEST(test_get_missing_is_null);
    RUN_TEST(test_exists_semantics);
    RUN_TEST(test_del);
    RUN_TEST(test_mget);
    RUN_TEST(test_small_reads_inline);
    RUN_TEST(test_get_one_master_wakeup);
    RUN_TEST(test_large_reads_inline_in_steps);
    RUN_TEST(test_small_writes_inline);
    drop_inline_keys();
    RUN_TEST(test_dbsize_counts_cluster_objects);
    RUN_TEST(test_info_gateway_section);
    RUN_TEST(test_info_memory_replication_keyspace);
    RUN_TEST(test_multi_exec_in_order);
    RUN_TEST(test_multi_queuing_error_aborts);
    RUN_TEST(test_redis_py_transactional_pipeline);
    RUN_TEST(test_pipelined_clients);
    RUN_TEST(test_pipelined_mixed);
    RUN_TEST(test_del_exists_strlen_do_not_stall);
    RUN_TEST(test_dbsize_and_set_options_do_not_stall);
    RUN_TEST(test_same_key_racing_sets);
    RUN_TEST(test_disconnect_mid_value_leaves_no_key);
    RUN_TEST(test_disconnect_while_blocked);
    RUN_TEST(test_node_killed_values_survive);
    RUN_TEST(test_flushall);
    RUN_TEST(test_noreplicas_error);
    RUN_TEST(test_joined_node_read_inline);
    RUN_TEST(test_master_down_is_tryagain);
    RUN_TEST(test_sigterm_exits_cleanly);
    if (gw) redisFree(gw);
    TEST_EXIT();
}
