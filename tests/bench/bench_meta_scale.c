/* bench_meta_scale.c - what an object costs the master: RSS per object,
 * and put-start/put-end pairs per second of the master's own CPU time.
 *
 *   bench_meta_scale MASTER MASTER_PID COUNT [SINGLES]
 *
 * Creates COUNT objects of 64 bytes, replicas 1, keys of 13 bytes, in
 * MOON.MPUTSTART/MPUTEND batches of 1000 (a few batches in flight on one
 * connection), waits until the nodes took every holdings note, and reads
 * the master's VmRSS before and after: (after - before) / COUNT is the
 * bytes per object, key included (meta.rss.N), and less the 13 key bytes
 * (meta.rss_nokey.N). Then SINGLES (default 200000) pairs of MOON.PUTSTART
 * and MOON.PUTEND, pipelined 128 pairs deep. Rates are per second of the
 * master's CPU time (utime + stime from /proc/MASTER_PID/stat), so a
 * loaded machine's lost wall time does not count against them
 * (meta.cpu.batch, meta.cpu.single); the wall rates are given too.
 * Nothing touches the nodes' segments: a node simulator (tests/sim/node_sim)
 * serves as the node. Output: bench.h. */
#include <hiredis/hiredis.h>
#include <unistd.h>

#include "bench.h"
#include "integration/cluster_harness.h"
#include "link/master_link.h"
#include "support/harness.h"

#define SCALE_BATCH   1000
#define SCALE_WINDOW  4      /* batches in flight */
#define SCALE_DEPTH   128    /* single pairs in flight */
#define SCALE_KEYLEN  13

typedef struct scale {
    redisContext *rc;
    pid_t pid;
    uint64_t next;           /* key counter */
    char name[32];           /* the result suffix: COUNT as 10^k or the figure */
} scale;

static void fail(const char *what, const char *why) {
    fprintf(stderr, "bench_meta_scale: %s: %s\n", what, why);
    bench_skip("meta.rss", "%s: %s", what, why);
    exit(0);
}

/* The master's CPU seconds so far (utime + stime). */
static double master_cpu(const scale *s) {
    double cpu = h_cpu_s(s->pid);
    if (cpu < 0) fail("reading the master's stat", "/proc/PID/stat");
    return cpu;
}

static long master_rss_kb(const scale *s) { return h_rss_kb(s->pid); }

static int key_of(scale *s, char *buf) {
    return snprintf(buf, SCALE_KEYLEN + 1, "k%012llu", (unsigned long long)s->next++);
}

static redisReply *reply_of(scale *s) {
    void *r = NULL;
    if (redisGetReply(s->rc, &r) != REDIS_OK || !r) fail("reply", s->rc->errstr);
    return r;
}

/* An array reply of n elements, none an error. */
static void check_array(scale *s, size_t n, const char *what) {
    redisReply *r = reply_of(s);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        fail(what, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    for (size_t i = 0; i < n; i++)
        if (r->element[i]->type == REDIS_REPLY_ERROR) fail(what, r->element[i]->str);
    freeReplyObject(r);
}

/* MPUTSTART REPLICAS 1 and MPUTEND of one batch, appended back to back:
 * the master runs a connection's commands in order. */
static void append_batch(scale *s, const char **argv, size_t *lens, char (*keys)[SCALE_KEYLEN + 1]) {
    argv[0] = "MOON.MPUTSTART", argv[1] = "REPLICAS", argv[2] = "1";
    for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
    for (size_t i = 0; i < SCALE_BATCH; i++) {
        lens[3 + 2 * i] = (size_t)key_of(s, keys[i]);
        argv[3 + 2 * i] = keys[i];
        argv[4 + 2 * i] = "64", lens[4 + 2 * i] = 2;
    }
    redisAppendCommandArgv(s->rc, 3 + 2 * SCALE_BATCH, argv, lens);
    argv[2] = "MOON.MPUTEND", lens[2] = strlen(argv[2]);
    for (size_t i = 0; i < SCALE_BATCH; i++) argv[4 + 2 * i] = "0", lens[4 + 2 * i] = 1;
    redisAppendCommandArgv(s->rc, 1 + 2 * SCALE_BATCH, argv + 2, lens + 2);
}

static void fill(scale *s, uint64_t count) {
    const char **argv = xcalloc(3 + 2 * SCALE_BATCH, sizeof *argv);
    size_t *lens = xcalloc(3 + 2 * SCALE_BATCH, sizeof *lens);
    char (*keys)[SCALE_KEYLEN + 1] = xcalloc(SCALE_WINDOW * SCALE_BATCH, sizeof *keys);
    uint64_t batches = count / SCALE_BATCH, sent = 0, got = 0;
    while (got < batches) {
        while (sent < batches && sent - got < SCALE_WINDOW) {
            append_batch(s, argv, lens, keys + (sent % SCALE_WINDOW) * SCALE_BATCH);
            sent++;
        }
        check_array(s, SCALE_BATCH, "MOON.MPUTSTART");
        check_array(s, SCALE_BATCH, "MOON.MPUTEND");
        got++;
    }
    free(argv);
    free(lens);
    free(keys);
}

/* Until the nodes took their notes (they are the master's memory too,
 * but not per object kept): at most 120 s. */
static void settle(scale *s) {
    for (int i = 0; i < 1200 && h_info_field(s->rc, "cluster", "holdings_pending") > 0; i++) usleep(100 * 1000);
    usleep(500 * 1000);
}

static void singles(scale *s, uint64_t pairs) {
    char keys[SCALE_DEPTH][SCALE_KEYLEN + 1];
    for (uint64_t done = 0; done < pairs; done += SCALE_DEPTH) {
        for (int i = 0; i < SCALE_DEPTH; i++) {
            int n = key_of(s, keys[i]);
            redisAppendCommand(s->rc, "MOON.PUTSTART %b 64", keys[i], (size_t)n);
            redisAppendCommand(s->rc, "MOON.PUTEND %b 0", keys[i], (size_t)n);
        }
        for (int i = 0; i < SCALE_DEPTH; i++) {
            redisReply *r = reply_of(s);
            if (r->type != REDIS_REPLY_ARRAY) fail("MOON.PUTSTART", r->type == REDIS_REPLY_ERROR ? r->str : "reply");
            freeReplyObject(r);
            r = reply_of(s);
            if (r->type != REDIS_REPLY_STATUS) fail("MOON.PUTEND", r->type == REDIS_REPLY_ERROR ? r->str : "reply");
            freeReplyObject(r);
        }
    }
}

static void count_name(uint64_t n, char *buf, size_t len) {
    int k = 0;
    uint64_t v = n;
    while (v >= 10 && v % 10 == 0) v /= 10, k++;
    if (v == 1 && k > 0) snprintf(buf, len, "1e%d", k);
    else snprintf(buf, len, "%llu", (unsigned long long)n);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: bench_meta_scale MASTER MASTER_PID COUNT [SINGLES]\n");
        return 2;
    }
    char host[256], err[256] = "";
    int port;
    scale s = {.pid = (pid_t)atol(argv[2])};
    uint64_t count = strtoull(argv[3], NULL, 10), nsingles = argc == 5 ? strtoull(argv[4], NULL, 10) : 200000;
    if (parse_hostport(argv[1], host, sizeof host, &port) != 0 || s.pid <= 0 || count < SCALE_BATCH ||
        count > 100000000ULL || nsingles > 100000000ULL) {
        fprintf(stderr, "bad arguments (COUNT 1000..10^8)\n");
        return 2;
    }
    count -= count % SCALE_BATCH;
    count_name(count, s.name, sizeof s.name);
    struct timeval tv = {120, 0};
    s.rc = redisConnectWithTimeout(host, port, tv);
    if (!s.rc || s.rc->err || proto_master_prove(s.rc, bench_secret(), err, sizeof err) != PROTO_LINK_OK)
        fail("cannot use the master", err[0] ? err : "connect");
    redisSetTimeout(s.rc, tv);

    settle(&s);
    long rss0 = master_rss_kb(&s);
    double cpu0 = master_cpu(&s);
    uint64_t t0 = mono_us();
    fill(&s, count);
    uint64_t wall = mono_us() - t0;
    double cpu = master_cpu(&s) - cpu0;
    settle(&s);
    long rss1 = master_rss_kb(&s);
    char name[64];
    double per = (double)(rss1 - rss0) * 1024.0 / (double)count;
    fprintf(stderr, "bench_meta_scale: %llu objects: RSS %ld -> %ld kB, %.1f B/object (%d of key), "
                    "master CPU %.2f s over %.2f s wall\n", (unsigned long long)count, rss0, rss1, per,
            SCALE_KEYLEN, cpu, (double)wall / 1e6);
    snprintf(name, sizeof name, "meta.rss.%s", s.name);
    bench_result(name, per, "B/object");
    snprintf(name, sizeof name, "meta.rss_nokey.%s", s.name);
    bench_result(name, per - SCALE_KEYLEN, "B/object");
    if (cpu > 0) bench_result("meta.cpu.batch", (double)count / cpu, "pairs/cpu-s");
    bench_result("meta.wall.batch", (double)count * 1e6 / (double)wall, "pairs/s");

    if (nsingles) {
        cpu0 = master_cpu(&s);
        t0 = mono_us();
        singles(&s, nsingles);
        wall = mono_us() - t0;
        cpu = master_cpu(&s) - cpu0;
        nsingles = (nsingles + SCALE_DEPTH - 1) / SCALE_DEPTH * SCALE_DEPTH;
        if (cpu > 0) bench_result("meta.cpu.single", (double)nsingles / cpu, "pairs/cpu-s");
        bench_result("meta.wall.single", (double)nsingles * 1e6 / (double)wall, "pairs/s");
    }
    redisFree(s.rc);
    return 0;
}
