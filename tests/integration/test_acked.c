/* tests/integration/test_acked.c - what was acknowledged survives the
 * master: a master killed -9 right after its last answer and started
 * again with the same flags (no etcd) rebuilds its table from what the
 * nodes hold, and every put it acknowledged reads back byte-exact, every
 * remove and FLUSHALL it acknowledged stays done.
 *
 * A master, three nodes, a gateway (replicas 2) and a libmoonkv client
 * (replicas 2) keep running; the master is killed four times. Each time
 * the last answer came from a burst, so the kill falls in the stretch
 * where a node had not yet learnt the last notes before acknowledgements
 * waited for them (on that code this test loses keys). docs/DURABILITY.md. */
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

#define NODES        3
#define VALUE        4096
#define GW_KEYS      400     /* SETs pipelined through the gateway */
#define BATCH        64      /* objects per mkv_put_batch */
#define BATCHES      6
#define DEL_KEYS     200
#define READ_BOUND_MS 20000  /* restart to every key read back */
#define TIME_LIMIT_S 240

static int master_port, gw_port, node_port;   /* node i: RESP node_port + i, data + 10 + i */
static pid_t master, nodes[NODES], gateway;
static redisContext *gw;
static mkv_client *mc;
static char *buf;            /* registered: BATCH values, then one read */

/* The value of key k in round r: every byte depends on both. */
static void value_of(int r, int k, char *out) {
    uint32_t x = (uint32_t)(r * 7919 + k * 104729 + 1);
    for (int i = 0; i < VALUE; i++) {
        x = x * 1103515245u + 12345u;
        out[i] = (char)(x >> 16);
    }
}

static void key_of(const char *what, int r, int k, char *out, size_t n) {
    snprintf(out, n, "acked-%s-%d-%d", what, r, k);
}

static int master_info_has(const char *text) {
    redisContext *c = h_redis(master_port);
    redisReply *r = c ? redisCommand(c, "INFO cluster") : NULL;
    int has = r && r->type == REDIS_REPLY_STRING && strstr(r->str, text);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return has;
}

/* Kill the master -9 now, start it again with the same flags, and wait
 * until it has rebuilt its table from the nodes. */
static int restart_master(void) {
    h_kill(master);
    master = h_start_master(master_port, NULL);
    if (master < 0 || h_wait_nodes(master_port, "alive", NODES, 15000) != 0) return -1;
    uint64_t end = mono_ms() + 15000;
    while (!master_info_has("rebuild_state:done") && mono_ms() < end) usleep(50 * 1000);
    return master_info_has("rebuild_state:done") ? 0 : -1;
}

/* r is +OK (freed). */
static int status_ok(redisReply *r) {
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (r) freeReplyObject(r);
    return ok;
}

/* GET key through the gateway: 1 the value, 0 nil, -1 anything else. */
static int gw_get(const char *key, const char *want) {
    redisReply *r = redisCommand(gw, "GET %s", key);
    if (!r) {   /* the connection went: once more on a new one */
        redisFree(gw);
        gw = h_redis(gw_port);
        return -1;
    }
    int v = r->type == REDIS_REPLY_NIL ? 0
            : r->type == REDIS_REPLY_STRING && r->len == VALUE && memcmp(r->str, want, VALUE) == 0 ? 1
                                                                                                 : -1;
    if (r->type == REDIS_REPLY_STRING && v < 0) v = -2;   /* wrong bytes: never retried */
    freeReplyObject(r);
    return v;
}

/* Until key reads as want (want NULL: as nil, after a read of anchor
 * proved the table is back), bounded by end: 1, or 0. *wrong is set on
 * wrong bytes. */
static int gw_read_until(const char *key, const char *want, uint64_t end, int *wrong) {
    for (;;) {
        int v = gw_get(key, want);
        if (v == -2) *wrong = 1;
        if (v == 1 || v == -2) return v == 1;
        if (mono_ms() >= end) return 0;
        usleep(50 * 1000);
    }
}

/* SETs pipelined through the gateway, the master killed right after the
 * last +OK; every key answered OK reads back byte-exact. */
static void test_gateway_sets_survive(void) {
    char key[64], *val = malloc(VALUE);
    for (int k = 0; k < GW_KEYS; k++) {
        key_of("gw", 0, k, key, sizeof key);
        value_of(0, k, val);
        redisAppendCommand(gw, "SET %s %b", key, val, (size_t)VALUE);
    }
    int ok[GW_KEYS], nok = 0;
    for (int k = 0; k < GW_KEYS; k++) {
        redisReply *r = NULL;
        ok[k] = redisGetReply(gw, (void **)&r) == REDIS_OK && r && r->type == REDIS_REPLY_STATUS &&
                strcmp(r->str, "OK") == 0;
        nok += ok[k];
        if (r) freeReplyObject(r);
    }
    ASSERT_STEP(ASSERT_MSG(restart_master() == 0, "the master did not come back"));
    ASSERT(nok > GW_KEYS / 2);
    uint64_t end = mono_ms() + READ_BOUND_MS;
    int lost = 0, wrong = 0;
    for (int k = 0; k < GW_KEYS; k++) {
        if (!ok[k]) continue;
        key_of("gw", 0, k, key, sizeof key);
        value_of(0, k, val);
        lost += !gw_read_until(key, val, end, &wrong);
    }
    printf("# gateway: %d SETs acknowledged before kill -9, %d lost, %d wrong\n", nok, lost, wrong);
    ASSERT_EQ(wrong, 0);
    ASSERT_EQ(lost, 0);
    free(val);
}

/* mkv_put_batch: every object of a batch that returned OK reads back. */
static void test_batch_puts_survive(void) {
    char keys[BATCHES][BATCH][64];
    int ok[BATCHES][BATCH], nok = 0;
    /* The client finds the restarted master first (its first call may fail). */
    uint64_t until = mono_ms() + READ_BOUND_MS;
    memset(buf, 1, VALUE);
    while (mkv_put(mc, "acked-warm", 10, buf, VALUE, 2) != MKV_OK && mono_ms() < until) usleep(50 * 1000);
    for (int b = 0; b < BATCHES; b++) {
        mkv_obj objs[BATCH];
        for (int k = 0; k < BATCH; k++) {
            key_of("lib", b, k, keys[b][k], sizeof keys[b][k]);
            value_of(100 + b, k, buf + (size_t)k * VALUE);
            objs[k] = (mkv_obj){keys[b][k], strlen(keys[b][k]), buf + (size_t)k * VALUE, VALUE, 0};
        }
        int rc = mkv_put_batch(mc, objs, BATCH, 2);
        for (int k = 0; k < BATCH; k++) nok += ok[b][k] = rc == MKV_OK && objs[k].status == MKV_OK;
    }
    ASSERT_STEP(ASSERT_MSG(restart_master() == 0, "the master did not come back"));
    ASSERT_EQ(nok, BATCHES * BATCH);
    uint64_t end = mono_ms() + READ_BOUND_MS;
    int lost = 0, wrong = 0;
    char *want = malloc(VALUE), *got = buf + (size_t)BATCH * VALUE;
    for (int b = 0; b < BATCHES; b++)
        for (int k = 0; k < BATCH; k++) {
            if (!ok[b][k]) continue;
            value_of(100 + b, k, want);
            int found = 0;
            for (;;) {
                size_t n = 0;
                int rc = mkv_get(mc, keys[b][k], strlen(keys[b][k]), got, VALUE, &n);
                if (rc == MKV_OK) {
                    found = 1;
                    wrong += n != VALUE || memcmp(got, want, VALUE) != 0;
                    break;
                }
                if (mono_ms() >= end) break;
                usleep(50 * 1000);
            }
            lost += !found;
        }
    printf("# libmoonkv: %d batch puts acknowledged before kill -9, %d lost, %d wrong\n", nok, lost, wrong);
    ASSERT_EQ(wrong, 0);
    ASSERT_EQ(lost, 0);
    free(want);
}

/* The keys of what (written and left for the nodes to hold them for
 * sure) removed by del(): once answered, the master is killed; after the
 * rebuild they stay gone. */
static void removed_stay_gone(const char *what, int (*del)(int nkeys)) {
    char key[64], *val = malloc(VALUE);
    for (int k = 0; k < DEL_KEYS; k++) {
        key_of(what, 0, k, key, sizeof key);
        value_of(200, k, val);
        redisAppendCommand(gw, "SET %s %b", key, val, (size_t)VALUE);
    }
    int set = 0, ok[DEL_KEYS];
    for (int k = 0; k < DEL_KEYS; k++) {
        redisReply *r = NULL;
        ok[k] = redisGetReply(gw, (void **)&r) == REDIS_OK && r && r->type == REDIS_REPLY_STATUS;
        if (!ok[k] && r && r->type == REDIS_REPLY_ERROR) printf("# SET %d answered %s\n", k, r->str);
        if (r) freeReplyObject(r);
    }
    /* Right after the last test's master restart a SET may meet TRYAGAIN
     * (the table is being rebuilt): such a key is set again, for up to 10 s. */
    uint64_t t0 = mono_ms();
    for (int k = 0; k < DEL_KEYS; k++) {
        key_of(what, 0, k, key, sizeof key);
        value_of(200, k, val);
        while (!ok[k] && mono_ms() - t0 < 10000) {
            redisReply *r = redisCommand(gw, "SET %s %b", key, val, (size_t)VALUE);
            ok[k] = r && r->type == REDIS_REPLY_STATUS;
            if (r) freeReplyObject(r);
            if (!ok[k]) usleep(50000);
        }
        set += ok[k];
    }
    ASSERT_STEP(ASSERT_EQ(set, DEL_KEYS));
    /* Held by the nodes before they are removed (the master has told
     * them: waited for, not slept): a nil later is the remove's. */
    uint64_t held_by = mono_ms() + 10000;
    while (!master_info_has("\r\nholdings_pending:0\r\n") && mono_ms() < held_by) usleep(20 * 1000);
    ASSERT_STEP(ASSERT(master_info_has("\r\nholdings_pending:0\r\n")));
    ASSERT_STEP(ASSERT_EQ(del(DEL_KEYS), DEL_KEYS));
    ASSERT_STEP(ASSERT_MSG(restart_master() == 0, "the master did not come back"));
    /* The gateway serves from the rebuilt table: a key put now reads back. */
    char probe[64];
    snprintf(probe, sizeof probe, "acked-probe-%s", what);
    value_of(7, 7, val);
    uint64_t end = mono_ms() + READ_BOUND_MS;
    int wrong = 0;
    while (!status_ok(redisCommand(gw, "SET %s %b", probe, val, (size_t)VALUE)) && mono_ms() < end) {
        if (gw->err) {
            redisFree(gw);
            gw = h_redis(gw_port);
        }
        usleep(50 * 1000);
    }
    ASSERT_STEP(ASSERT_MSG(gw_read_until(probe, val, end, &wrong), "the gateway does not serve"));
    int back = 0;
    for (int k = 0; k < DEL_KEYS; k++) {
        key_of(what, 0, k, key, sizeof key);
        back += gw_get(key, val) != 0;
    }
    printf("# %s: %d keys removed before kill -9, %d back after the rebuild\n", what, DEL_KEYS, back);
    ASSERT_EQ(back, 0);
    free(val);
}

/* DEL of each key, pipelined: how many answered 1. */
static int del_each(int nkeys) {
    char key[64];
    for (int k = 0; k < nkeys; k++) {
        key_of("del", 0, k, key, sizeof key);
        redisAppendCommand(gw, "DEL %s", key);
    }
    int gone = 0;
    for (int k = 0; k < nkeys; k++) {
        redisReply *r = NULL;
        gone += redisGetReply(gw, (void **)&r) == REDIS_OK && r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r) freeReplyObject(r);
    }
    return gone;
}

static void test_removes_stay_gone(void) { removed_stay_gone("del", del_each); }

/* FLUSHALL answered OK: every key is gone (the anchor is set after). */
static int flush_all(int nkeys) {
    return status_ok(redisCommand(gw, "FLUSHALL")) ? nkeys : -1;
}

static void test_flushall_stays_done(void) { removed_stay_gone("flush", flush_all); }

/* The nodes' indexes together: how many objects they hold (-1: a node
 * did not answer). */
static long long index_objects(void) {
    long long sum = 0;
    for (int i = 0; i < NODES; i++) {
        long long n = h_port_info(node_port + i, "node", "index_objects");
        if (n < 0) return -1;
        sum += n;
    }
    return sum;
}

/* A put's end is answered only once its nodes' indexes hold it. With
 * every node stopped (SIGSTOP) an MPUTEND of HELD_KEYS keys is not
 * answered (nothing acknowledges its notes; the master waits up to its
 * 2 s bound and declares nodes dead after 5 s, so 300 ms proves the
 * wait); once they run again it is, and by the time the answer is read
 * the indexes count every key: a node acknowledges notes after applying
 * them, and a batch this big takes long enough to apply that an ack
 * sent first would be seen here. The bytes are never written: only the
 * indexes are looked at, and the keys are removed after. */
#define HELD_KEYS 4096   /* the most one MPUTEND takes; every node holds each (REPLICAS 3) */
static void test_answer_waits_for_index(void) {
    for (int i = 0; i < NODES; i++)
        ASSERT_STEP(ASSERT_EQ(h_wait_port_info(node_port + i, "node", "holdings_linked", 1, 10000), 0));
    redisContext *c = h_proven(h_redis(master_port), "");   /* places as a client does */
    ASSERT_STEP(ASSERT(c != NULL));
    int argc = 3 + 2 * HELD_KEYS;
    const char **argv = calloc((size_t)argc, sizeof *argv);
    size_t *lens = calloc((size_t)argc, sizeof *lens);
    char (*keys)[32] = calloc(HELD_KEYS, sizeof *keys);
    argv[0] = "MOON.MPUTSTART", argv[1] = "REPLICAS", argv[2] = "3";
    for (int k = 0; k < HELD_KEYS; k++) {
        snprintf(keys[k], sizeof keys[k], "held-%d", k);
        argv[3 + 2 * k] = keys[k];
        argv[4 + 2 * k] = "1024";
    }
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    long long before = index_objects();
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    int placed = 0;
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++)
        placed += r->element[k]->type == REDIS_REPLY_ARRAY;
    if (r) freeReplyObject(r);
    ASSERT_EQ(placed, HELD_KEYS);
    /* MPUTEND key crc ...: the crc of bytes never written, as said */
    argv[0] = "MOON.MPUTEND";
    for (int k = 0; k < HELD_KEYS; k++) {
        argv[1 + 2 * k] = keys[k];
        argv[2 + 2 * k] = "0";
    }
    argc = 1 + 2 * HELD_KEYS;
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    for (int i = 0; i < NODES; i++) kill(nodes[i], SIGSTOP);
    int sent = redisAppendCommandArgv(c, argc, argv, lens) == REDIS_OK;
    for (int done = 0; sent && !done;) sent = redisBufferWrite(c, &done) == REDIS_OK;
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int early = sent ? poll(&pfd, 1, 300) : -1;
    for (int i = 0; i < NODES; i++) kill(nodes[i], SIGCONT);
    ASSERT_STEP(ASSERT(sent));
    ASSERT_MSG(early == 0, "MPUTEND was answered while no node could acknowledge it");
    r = NULL;
    int ok = 0;
    if (redisGetReply(c, (void **)&r) == REDIS_OK && r && r->type == REDIS_REPLY_ARRAY)
        for (size_t k = 0; k < r->elements; k++) ok += r->element[k]->type == REDIS_REPLY_STATUS;
    long long after = index_objects();   /* at once: no waiting for the nodes */
    if (r) freeReplyObject(r);
    ASSERT_EQ(ok, HELD_KEYS);
    printf("# indexes held %lld objects before, %lld when the MPUTEND of %d was answered\n", before, after,
           HELD_KEYS);
    ASSERT(before >= 0 && after >= before + NODES * HELD_KEYS);
    argv[0] = "MOON.MREMOVE";
    for (int k = 0; k < HELD_KEYS; k++) argv[1 + k] = keys[k], lens[1 + k] = strlen(keys[k]);
    r = redisCommandArgv(c, 1 + HELD_KEYS, argv, lens);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    if (r) freeReplyObject(r);
    redisFree(c);
    free(argv);
    free(lens);
    free(keys);
}

static void test_counters(void) {
    ASSERT(h_port_info(master_port, "cluster", "acks_waiting") >= 0);
    for (int i = 0; i < NODES; i++) {
        ASSERT_EQ(h_port_info(node_port + i, "node", "holdings_linked"), 1);
        ASSERT(h_port_info(node_port + i, "node", "holdings_pulls") > 0);
    }
}

int main(void) {
    h_init(TIME_LIMIT_S);
    int base = h_free_ports(20);
    master_port = base, gw_port = base + 1, node_port = base + 2;
    master = base > 0 ? h_start_master(master_port, NULL) : -1;
    for (int i = 0; i < NODES && master > 0; i++)
        nodes[i] = h_start_node(master_port, node_port + i, node_port + 10 + i, "64MB");
    int up = master > 0 && h_wait_nodes(master_port, "alive", NODES, 15000) == 0;
    for (int i = 0; i < NODES && up; i++) up = h_wait_node_registered(node_port + i, 10000) == 0;
    const char *gw_extra[] = {"--segment-size", "16MB", NULL};
    gateway = up ? h_start_gateway(master_port, gw_port, gw_extra, NULL) : -1;
    gw = gateway > 0 ? h_redis(gw_port) : NULL;
    mkv_options opt;
    mkv_options_init(&opt);
    char maddr[32];
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", master_port);
    opt.master = maddr;
    opt.timeout_ms = 3000;
    size_t bufsize = (size_t)(BATCH + 1) * VALUE;
    buf = calloc(1, bufsize);
    int lib = gw && mkv_connect(&mc, &opt) == MKV_OK && mkv_register_buffer(mc, buf, bufsize) == MKV_OK;
    h_setup_or_exit(lib ? 0 : -1, "acked/setup");
    RUN_TEST(test_gateway_sets_survive);
    RUN_TEST(test_batch_puts_survive);
    RUN_TEST(test_removes_stay_gone);
    RUN_TEST(test_flushall_stays_done);
    RUN_TEST(test_answer_waits_for_index);
    RUN_TEST(test_counters);
    mkv_close(mc);
    redisFree(gw);
    free(buf);
    h_stop_all();
    TEST_EXIT();
}
