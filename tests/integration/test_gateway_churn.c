/* Space reused through a gateway: SET/GET/DEL churn of 64 KiB values
 * with few keys live (replicas 2) cycles the nodes' capacity many times
 * without one NOSPACE, while readers GET the same keys concurrently; the
 * master's quarantine (held_extents) stays near the reads in flight.
 *
 * Scaled for CI: three 16 MiB nodes for 12 s (the ratio of churn to
 * capacity is what matters; the run prints how many times it went round);
 * MOONKV_CHURN_SEGMENT_MB and MOONKV_CHURN_SECONDS for other sizes.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <pthread.h>
#include <stdatomic.h>

#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_GATEWAY (port0 + 1)
#define PORT_NODE    (port0 + 10)   /* + i; data plane on PORT_NODE + 10 + i */
#define NODES   3
#define WRITERS 4
#define READERS 2
#define LIVE    6            /* keys each writer keeps */
#define VALUE   (64u * 1024u)
#define CYCLES  5            /* capacities written at least */

static uint64_t segment_mb = 16, seconds = 12;
static atomic_int running = 1;
static atomic_ullong newest[WRITERS];   /* last sequence number each writer stored */

typedef struct worker {
    int id;
    uint64_t sets, gets, hits, dels, nospace, errors;
    char err[256];
} worker;

/* The value of writer w's key seq: a pattern a reader can check. */
static void value_of(int w, uint64_t seq, char *buf) {
    h_fill(buf, VALUE, ((uint64_t)w << 48) ^ (seq + 1));
}

static int key_of(int w, uint64_t seq, char *key, size_t len) {
    return snprintf(key, len, "churn:%d:%llu", w, (unsigned long long)seq);
}

static void fail(worker *w, const char *what, const redisReply *r) {
    if (!w->err[0])
        snprintf(w->err, sizeof w->err, "%s: %s", what,
                 r ? (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply") : "no reply");
    w->errors++;
}

/* A worker's connection to the gateway and its value buffer in *buf;
 * NULL, the failure counted, if either is missing. */
static redisContext *worker_open(worker *w, char **buf) {
    redisContext *c = h_redis(PORT_GATEWAY);
    *buf = malloc(VALUE);
    if (c && *buf) return c;
    fail(w, "connect", NULL);
    if (c) redisFree(c);
    return NULL;
}

/* 1 if r is the value want. */
static int is_value(const redisReply *r, const char *want) {
    return r && r->type == REDIS_REPLY_STRING && r->len == VALUE && memcmp(r->str, want, VALUE) == 0;
}

static int del_key(redisContext *c, worker *w, uint64_t seq) {
    char key[48];
    key_of(w->id, seq, key, sizeof key);
    redisReply *r = redisCommand(c, "DEL %s", key);
    int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (ok) w->dels++;
    else fail(w, "DEL", r);
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* SET a new key, GET it back, DEL the oldest beyond LIVE. */
static void *writer(void *arg) {
    worker *w = arg;
    char *val, key[48];
    redisContext *c = worker_open(w, &val);
    if (!c) goto out;
    uint64_t seq = 0, oldest = 0;
    while (atomic_load(&running) && !w->errors) {
        key_of(w->id, seq, key, sizeof key);
        value_of(w->id, seq, val);
        redisReply *r = redisCommand(c, "SET %s %b", key, val, (size_t)VALUE);
        if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSPACE", 7) == 0) {
            w->nospace++;
            freeReplyObject(r);
            if (oldest < seq && del_key(c, w, oldest++) != 0) break;
            continue;
        }
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (!ok) fail(w, "SET", r);
        freeReplyObject(r);
        if (!ok) break;
        w->sets++;
        atomic_store(&newest[w->id], seq + 1);
        r = redisCommand(c, "GET %s", key);
        ok = is_value(r, val);
        if (!ok) fail(w, "GET own key", r);
        freeReplyObject(r);
        if (!ok) break;
        w->gets++;
        seq++;
        while (seq - oldest > LIVE)
            if (del_key(c, w, oldest++) != 0) break;
    }
    while (c && oldest < seq && del_key(c, w, oldest++) == 0) {}
out:
    if (c) redisFree(c);
    free(val);
    return NULL;
}

/* GET recent keys of every writer: a miss is fine (deleted meanwhile),
 * a hit must be exactly that key's value. */
static void *reader(void *arg) {
    worker *w = arg;
    char *want, key[48];
    redisContext *c = worker_open(w, &want);
    if (!c) goto out;
    uint64_t n = 0;
    while (atomic_load(&running) && !w->errors) {
        int wid = (int)(n++ % WRITERS);
        uint64_t top = atomic_load(&newest[wid]);
        if (top == 0) {
            usleep(1000);
            continue;
        }
        uint64_t seq = top - 1 - (n / WRITERS) % LIVE;
        if (seq >= top) continue;   /* below zero */
        key_of(wid, seq, key, sizeof key);
        redisReply *r = redisCommand(c, "GET %s", key);
        w->gets++;
        if (r && r->type == REDIS_REPLY_NIL) {
            freeReplyObject(r);
            continue;
        }
        value_of(wid, seq, want);
        int ok = is_value(r, want);
        if (ok) w->hits++;
        else fail(w, "GET", r);
        freeReplyObject(r);
    }
out:
    if (c) redisFree(c);
    free(want);
    return NULL;
}

/* Capacities written so far (each SET stores 2 replicas). */
static double cycles_written(void) {
    uint64_t sets = 0;
    for (int i = 0; i < WRITERS; i++) sets += atomic_load(&newest[i]);
    return (double)sets * VALUE * 2 / (double)(NODES * segment_mb << 20);
}

static long long cluster_field(redisContext *m, const char *field) {
    return h_info_field(m, "cluster", field);
}

static void test_gateway_churn(void) {
    redisContext *m = h_redis(PORT_MASTER);
    ASSERT(m);
    worker w[WRITERS + READERS];
    pthread_t th[WRITERS + READERS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < WRITERS + READERS; i++) {
        w[i].id = i;
        pthread_create(&th[i], NULL, i < WRITERS ? writer : reader, &w[i]);
    }
    /* seconds of churn, then on until CYCLES capacities went round (a loaded
     * machine writes fewer a second), at most 4 times as long */
    uint64_t t0 = mono_ms(), end = t0 + seconds * 1000, limit = t0 + 4 * seconds * 1000;
    long long max_held = 0, samples = 0, sum_held = 0;
    while (mono_ms() < end || (cycles_written() < CYCLES && mono_ms() < limit)) {
        usleep(100 * 1000);
        long long h = cluster_field(m, "held_extents");
        if (h > max_held) max_held = h;
        sum_held += h > 0 ? h : 0;
        samples++;
    }
    uint64_t took_s = (mono_ms() - t0) / 1000;
    atomic_store(&running, 0);
    worker t = {0};
    for (int i = 0; i < WRITERS + READERS; i++) {
        pthread_join(th[i], NULL);
        t.sets += w[i].sets;
        t.gets += w[i].gets;
        t.hits += w[i].hits;
        t.nospace += w[i].nospace;
        t.errors += w[i].errors;
        if (w[i].err[0]) printf("# worker %d: %s\n", i, w[i].err);
    }
    double cycles = cycles_written();
    usleep(300 * 1000);   /* the last leases go back with the gateway's next master request */
    long long held_after = cluster_field(m, "held_extents"), used = cluster_field(m, "bytes_used");
    printf("# %d x %llu MiB nodes, %llu s: %llu SETs (%.1f capacities written), %llu GETs "
           "(%llu reader hits), %llu NOSPACE, held_extents max %lld mean %.1f, after %lld; "
           "puts waited %lld; bytes_used after %lld\n",
           NODES, (unsigned long long)segment_mb, (unsigned long long)took_s,
           (unsigned long long)t.sets, cycles, (unsigned long long)t.gets,
           (unsigned long long)t.hits, (unsigned long long)t.nospace, max_held,
           samples ? (double)sum_held / (double)samples : 0.0, held_after,
           cluster_field(m, "puts_waited"), used);
    ASSERT_EQ(t.errors, 0);
    ASSERT_EQ(t.nospace, 0);
    ASSERT(cycles >= CYCLES);   /* many times round: without reuse the first would fail */
    /* each read in flight pins one object: 2 extents (replicas 2) */
    ASSERT(max_held <= 2 * (WRITERS + READERS) + 4);
    ASSERT(held_after <= 2 * (WRITERS + READERS));   /* the last reads, returned with the next request */
    redisFree(m);
}

int main(void) {
    segment_mb = h_env_at_least("MOONKV_CHURN_SEGMENT_MB", 8, segment_mb);
    seconds = h_env_at_least("MOONKV_CHURN_SECONDS", 1, seconds);
    h_init((unsigned)(4 * seconds + 90));
    h_setup_or_exit(port0 = h_free_ports(20 + NODES), "free ports");
    char seg[32];
    snprintf(seg, sizeof seg, "%lluMB", (unsigned long long)segment_mb);
    if (h_start_master(PORT_MASTER, NULL) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    for (int i = 0; i < NODES; i++)
        if (h_start_node(PORT_MASTER, PORT_NODE + i, PORT_NODE + 10 + i, seg) < 0) {
            printf("not ok - node did not start\n");
            return 1;
        }
    if (h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0 ||
        h_start_gateway(PORT_MASTER, PORT_GATEWAY, NULL, NULL) < 0) {
        printf("not ok - cluster did not start\n");
        return 1;
    }
    RUN_TEST(test_gateway_churn);
    TEST_EXIT();
}
