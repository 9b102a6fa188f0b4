/* bench_meta.c - master metadata rate: MOON.PUTSTART/MOON.PUTEND pairs per
 * second, one pair per round trip and in batches (MOON.MPUTSTART/MPUTEND).
 *
 *   bench_meta MASTER OBJECT_SIZE BATCH MAX_PAIRS
 *
 * Command syntax: docs/PROTOCOL.md. No bytes are written to the
 * nodes: the master only places objects and records a CRC, which is what
 * this measures. Each key is new (write-once); the node segment must hold
 * MAX_PAIRS * 2 objects of OBJECT_SIZE (it need not be prefaulted, as
 * nothing touches it). Output: bench.h. */
#include <hiredis/hiredis.h>
#include <unistd.h>

#include "bench.h"
#include "link/master_link.h"

typedef struct meta_run {
    redisContext *rc;
    size_t size;        /* of each placed object */
    uint64_t next;      /* key counter */
} meta_run;

static int meta_key(meta_run *m, char *buf, size_t len) {
    return snprintf(buf, len, "meta:%d:%llu", (int)getpid(), (unsigned long long)m->next++);
}

/* An error reply's text, or why there was no reply. */
static const char *reply_why(const meta_run *m, const redisReply *r) {
    if (!r) return m->rc->errstr;
    return r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply type";
}

/* One synchronous PUTSTART then PUTEND; 0 or -1 after a SKIP line. */
static int meta_pair(meta_run *m) {
    char key[64], size[32];
    int n = meta_key(m, key, sizeof key);
    snprintf(size, sizeof size, "%zu", m->size);
    redisReply *r = redisCommand(m->rc, "MOON.PUTSTART %b %s", key, (size_t)n, size);
    int ok = r && r->type == REDIS_REPLY_ARRAY;
    if (!ok) bench_skip("meta.single", "MOON.PUTSTART: %s", reply_why(m, r));
    if (r) freeReplyObject(r);
    if (!ok) return -1;
    r = redisCommand(m->rc, "MOON.PUTEND %b 0", key, (size_t)n);
    ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok) bench_skip("meta.single", "MOON.PUTEND: %s", reply_why(m, r));
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Sends argv and checks an array of n replies with no error element. */
static int meta_batch_cmd(meta_run *m, int argc, const char **argv, const size_t *lens, size_t n,
                          const char *what) {
    redisReply *r = redisCommandArgv(m->rc, argc, argv, lens);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == n;
    const char *why = ok ? NULL : reply_why(m, r);
    for (size_t i = 0; ok && i < n; i++)
        if (r->element[i]->type == REDIS_REPLY_ERROR) {
            ok = 0;
            why = r->element[i]->str;
        }
    if (!ok) bench_skip("meta.batch", "%s: %s", what, why);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* One MPUTSTART of `batch` keys then one MPUTEND of them. */
static int meta_batch(meta_run *m, size_t batch) {
    int argc = 3 + 2 * (int)batch;
    const char **argv = xcalloc((size_t)argc, sizeof *argv);
    size_t *lens = xcalloc((size_t)argc, sizeof *lens);
    char (*keys)[64] = xcalloc(batch, sizeof *keys), size[32];
    snprintf(size, sizeof size, "%zu", m->size);
    argv[0] = "MOON.MPUTSTART", argv[1] = "REPLICAS", argv[2] = "1";
    for (size_t i = 0; i < batch; i++) {
        lens[3 + 2 * i] = (size_t)meta_key(m, keys[i], sizeof keys[i]);
        argv[3 + 2 * i] = keys[i];
        argv[4 + 2 * i] = size;
    }
    for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
    for (size_t i = 0; i < batch; i++) lens[4 + 2 * i] = strlen(size);
    int rc = meta_batch_cmd(m, argc, argv, lens, batch, "MOON.MPUTSTART");
    if (rc == 0) {
        /* MPUTEND key crc ...: the same keys one argument earlier. */
        argv[2] = "MOON.MPUTEND";
        lens[2] = strlen(argv[2]);
        for (size_t i = 0; i < batch; i++) argv[4 + 2 * i] = "0", lens[4 + 2 * i] = 1;
        rc = meta_batch_cmd(m, argc - 2, argv + 2, lens + 2, batch, "MOON.MPUTEND");
    }
    free(argv);
    free(lens);
    free(keys);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: bench_meta MASTER OBJECT_SIZE BATCH MAX_PAIRS\n");
        return 2;
    }
    char host[256];
    int port;
    long batch = atol(argv[3]), max_pairs = atol(argv[4]);
    if (parse_hostport(argv[1], host, sizeof host, &port) != 0 || batch < 1 || batch > 4096 ||
        max_pairs < batch || max_pairs > 10000000) {
        fprintf(stderr, "bad arguments (BATCH 1..4096, MAX_PAIRS >= BATCH)\n");
        return 2;
    }
    struct timeval tv = {10, 0};
    meta_run m = {.rc = redisConnectWithTimeout(host, port, tv), .size = bench_size_arg(argv[2])};
    char err[256] = "";
    /* it places as a client does: on a connection that proved the secret */
    if (!m.rc || m.rc->err || proto_master_prove(m.rc, bench_secret(), err, sizeof err) != PROTO_LINK_OK) {
        bench_skip("meta.single", "cannot use the master at %s %s", argv[1], err);
        bench_skip("meta.batch", "cannot use the master at %s %s", argv[1], err);
        if (m.rc) redisFree(m.rc);
        return 0;
    }
    redisSetTimeout(m.rc, tv);

    bench_budget b;
    bench_budget_init(&b, 10, (uint64_t)max_pairs, bench_seconds());
    int failed = 0;
    while (!failed && bench_budget_more(&b)) {
        uint64_t t0 = mono_us();
        failed = meta_pair(&m);
        bench_budget_add(&b, mono_us() - t0);
    }
    if (!failed) bench_result("meta.single", (double)b.rounds * 1e6 / (double)b.spent_us, "pairs/s");

    bench_budget_init(&b, 2, (uint64_t)(max_pairs / batch), bench_seconds());
    failed = 0;
    while (!failed && bench_budget_more(&b)) {
        uint64_t t0 = mono_us();
        failed = meta_batch(&m, (size_t)batch);
        bench_budget_add(&b, mono_us() - t0);
    }
    if (!failed)
        bench_result("meta.batch", (double)b.rounds * (double)batch * 1e6 / (double)b.spent_us,
                     "pairs/s");
    redisFree(m.rc);
    return 0;
}
