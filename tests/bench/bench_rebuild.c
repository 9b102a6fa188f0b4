/* bench_rebuild.c - how fast a restarted master gets its table back from
 * the nodes (MOON.REPORT, src/master/recovery.c), against how fast the
 * same table is built by puts in the first place.
 *
 *   bench_rebuild fill MASTER COUNT    COUNT objects of 64 bytes, replicas 2,
 *                                      placed with MOON.MPUTSTART/MPUTEND in
 *                                      batches of 4096; waits until every node
 *                                      took its holdings (INFO holdings_pending 0)
 *   bench_rebuild wait MASTER COUNT    after the master's restart: waits for
 *                                      rebuild_state done, reads the rate
 *
 * No bytes are written: a node's fresh segment is zeros, so each object
 * is 64 zero bytes and is put with that CRC32C, which the nodes verify
 * when they report it (a wrong CRC would be dropped, not counted).
 * Output: bench.h (RESULT rebuild.fill, rebuild.rate in objects/s). */
#include <hiredis/hiredis.h>
#include <unistd.h>

#include "bench.h"
#include "core/crc32c.h"
#include "link/master_link.h"

#define OBJ_SIZE 64
#define BATCH    4096

/* The master's rebuild and holdings counters, from one INFO cluster. */
typedef struct rebuild_view {
    int done;                     /* rebuild_state:done */
    long long pending, ms, recovered;
} rebuild_view;

static long long field_in(const char *info, const char *name) {
    const char *p = strstr(info, name);
    return p ? atoll(p + strlen(name)) : -1;
}

static int view(redisContext *rc, rebuild_view *v) {
    redisReply *r = redisCommand(rc, "INFO cluster");
    int ok = r && r->type == REDIS_REPLY_STRING;
    if (ok) {
        v->done = strstr(r->str, "rebuild_state:done") != NULL;
        v->pending = field_in(r->str, "\r\nholdings_pending:");
        v->ms = field_in(r->str, "\r\nrebuild_ms:");
        v->recovered = field_in(r->str, "\r\nrebuild_recovered:");
    }
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* One batch of MPUTSTART then MPUTEND for keys [first, first+n); 0 or -1. */
static int fill_batch(redisContext *rc, long first, int n, const char *crc) {
    static const char *argv[3 + 2 * BATCH];
    static size_t lens[3 + 2 * BATCH];
    static char keys[BATCH][32];
    argv[0] = "MOON.MPUTSTART", argv[1] = "REPLICAS", argv[2] = "2";
    for (int i = 0; i < n; i++) {
        lens[3 + 2 * i] = (size_t)snprintf(keys[i], sizeof keys[i], "rb:%ld", first + i);
        argv[3 + 2 * i] = keys[i];
        argv[4 + 2 * i] = "64";
    }
    for (int pass = 0; pass < 2; pass++) {
        /* MPUTEND key crc ...: the same keys one argument earlier */
        const char **av = pass ? argv + 2 : argv;
        size_t *lv = pass ? lens + 2 : lens;
        if (pass) argv[2] = "MOON.MPUTEND";
        for (int i = 0; i < n; i++) argv[4 + 2 * i] = pass ? crc : "64";
        for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
        for (int i = 0; i < n; i++) lens[4 + 2 * i] = strlen(argv[4 + 2 * i]);
        redisReply *r = redisCommandArgv(rc, 3 - 2 * pass + 2 * n, av, lv);
        int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)n;
        for (size_t i = 0; ok && i < r->elements; i++) ok = r->element[i]->type != REDIS_REPLY_ERROR;
        if (!ok) bench_skip("rebuild.fill", "%s: %s", av[0],
                            !r ? rc->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "an element failed");
        if (r) freeReplyObject(r);
        if (!ok) return -1;
    }
    return 0;
}

static int fill(redisContext *rc, long count) {
    unsigned char zeros[OBJ_SIZE] = {0};
    char crc[16];
    snprintf(crc, sizeof crc, "%u", crc32c(0, zeros, sizeof zeros));
    uint64_t t0 = mono_us();
    for (long k = 0; k < count; k += BATCH)
        if (fill_batch(rc, k, (int)(count - k < BATCH ? count - k : BATCH), crc) != 0) return -1;
    bench_result("rebuild.fill", (double)count * 1e6 / (double)(mono_us() - t0), "objects/s");
    uint64_t end = mono_ms() + 120000;
    rebuild_view v = {0};
    while ((view(rc, &v) != 0 || v.pending != 0) && mono_ms() < end) usleep(100 * 1000);
    if (v.pending != 0) {
        bench_skip("rebuild.rate", "the nodes did not take their holdings within 120 s");
        return -1;
    }
    return 0;
}

static int wait_rebuilt(redisContext *rc, long count) {
    uint64_t end = mono_ms() + 180000;
    rebuild_view v = {0};
    while ((view(rc, &v) != 0 || !v.done) && mono_ms() < end) usleep(100 * 1000);
    long long ms = v.ms, got = v.recovered;
    if (!v.done || got != count || ms < 0) {
        bench_skip("rebuild.rate", "rebuild not done in 180 s or incomplete: %lld of %ld objects", got,
                   count);
        return -1;
    }
    fprintf(stderr, "rebuild: %lld objects in %lld ms\n", got, ms);
    bench_result("rebuild.rate", (double)got * 1000.0 / (double)(ms ? ms : 1), "objects/s");
    return 0;
}

int main(int argc, char **argv) {
    char host[256];
    int port;
    long count = argc == 4 ? atol(argv[3]) : 0;
    if (argc != 4 || parse_hostport(argv[2], host, sizeof host, &port) != 0 || count < 1 ||
        count > 100000000 || (strcmp(argv[1], "fill") && strcmp(argv[1], "wait"))) {
        fprintf(stderr, "usage: bench_rebuild fill|wait MASTER COUNT\n");
        return 2;
    }
    struct timeval tv = {30, 0};
    redisContext *rc = redisConnectWithTimeout(host, port, tv);
    char err[256] = "";
    if (!rc || rc->err || proto_master_prove(rc, bench_secret(), err, sizeof err) != PROTO_LINK_OK) {
        bench_skip(strcmp(argv[1], "fill") ? "rebuild.rate" : "rebuild.fill", "cannot use %s %s",
                   argv[2], err);
        if (rc) redisFree(rc);
        return 0;
    }
    redisSetTimeout(rc, tv);
    int rc2 = strcmp(argv[1], "fill") == 0 ? fill(rc, count) : wait_rebuilt(rc, count);
    redisFree(rc);
    return rc2 == 0 ? 0 : 1;
}
