/* bench_client.c - byte-moving benchmarks: libmoonkv zero-copy put/get and
 * its references (memcpy, redis-server through hiredis).
 *
 *   bench_client memcpy SIZE...          (between buffers not in cache)
 *   bench_client ping HOST:PORT          (median PING round trip, ping_us)
 *   bench_client redis HOST:PORT SIZE...
 *   bench_client moonkv LIBMOONKV.so MASTER TRANSPORT SIZE...
 *                (TRANSPORT tcp, shm, shm-fd: shm in its checked fd mode)
 *   bench_client kvcache LIBMOONKV.so MASTER TRANSPORT BLOCKS BLOCK_SIZE
 *   bench_client threads LIBMOONKV.so MASTER TRANSPORT SIZE THREADS...
 *                (put/get of SIZE from each count of threads, on one
 *                shared client and on a client per thread)
 *
 * libmoonkv is loaded with dlopen() from the path given, so this program
 * links (and CI builds it) whether or not the client library exists yet,
 * and it measures the shared library that `make` ships. A missing or
 * incomplete library is a SKIP line, not a failure. Output: bench.h. */
#include <dlfcn.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <unistd.h>

#include "bench.h"
#include "client/moonkv.h"

/* ---- libmoonkv, resolved at run time ---- */

/* The types come from moonkv.h, so a changed signature fails to compile. */
typedef struct mkv_api {
    void *dl;
    __typeof__(mkv_options_init) *options_init;
    __typeof__(mkv_connect) *connect;
    __typeof__(mkv_close) *close;
    __typeof__(mkv_last_error) *last_error;
    __typeof__(mkv_strerror) *strerror;
    __typeof__(mkv_register_buffer) *register_buffer;
    __typeof__(mkv_put) *put;
    __typeof__(mkv_get) *get;
    __typeof__(mkv_remove) *remove;
    __typeof__(mkv_put_batch) *put_batch;
    __typeof__(mkv_get_batch) *get_batch;
    __typeof__(mkv_transfer_stats_get) *transfer_stats_get;
} mkv_api;

#define API_LOAD(api, fn)                                                        \
    ((api)->fn = (__typeof__((api)->fn))dlsym((api)->dl, "mkv_" #fn), (api)->fn != NULL)

/* 0 when every entry point resolved; else why not in err. */
static int api_load(mkv_api *api, const char *path, char *err, size_t errlen) {
    memset(api, 0, sizeof *api);
    api->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api->dl) {
        snprintf(err, errlen, "cannot load libmoonkv: %s", dlerror());
        return -1;
    }
    if (API_LOAD(api, options_init) && API_LOAD(api, connect) && API_LOAD(api, close) &&
        API_LOAD(api, last_error) && API_LOAD(api, strerror) && API_LOAD(api, register_buffer) && API_LOAD(api, put) &&
        API_LOAD(api, get) && API_LOAD(api, remove) && API_LOAD(api, put_batch) &&
        API_LOAD(api, get_batch) && API_LOAD(api, transfer_stats_get))
        return 0;
    snprintf(err, errlen, "libmoonkv is incomplete: %s", dlerror());
    dlclose(api->dl);
    api->dl = NULL;
    return -1;
}

/* A connected client with the given transport, or NULL after a SKIP line. */
static mkv_client *api_connect(const mkv_api *api, const char *master, const char *transport,
                               const char *what) {
    mkv_options opt;
    api->options_init(&opt);
    opt.master = master;
    opt.transport = transport;
    if (!strcmp(transport, "shm-fd")) {
        opt.transport = "shm";
        opt.shm_mode = "fd";
    }
    if (!strcmp(transport, "shm-1t")) {   /* the calling thread copies alone */
        opt.transport = "shm";
        opt.copy_threads = 1;
    }
    opt.timeout_ms = 10000;
    mkv_client *c = NULL;
    int rc = api->connect(&c, &opt);
    if (rc != MKV_OK) {
        bench_skip(what, "mkv_connect(%s, transport %s): %s", master, transport,
                   c ? api->last_error(c) : "no client");
        if (c) api->close(c);
        return NULL;
    }
    return c;
}

/* Keys unique to this run, so reruns against one cluster never collide. */
static int make_key(char *buf, size_t len, const char *kind, size_t size, size_t i) {
    return snprintf(buf, len, "bench:%d:%s:%zu:%zu", (int)getpid(), kind, size, i);
}

/* ---- memcpy: the ceiling of the shared-memory path ---- */

#define COLD_SPAN ((size_t)256 << 20)   /* rotated over, so no copy finds its bytes in cache */

/* One thread's memcpy of SIZE between buffers that are not in cache: the
 * copies rotate over COLD_SPAN of touched memory (half sources, half
 * destinations), as a transfer meets its bytes. A copy of the same
 * buffers again would measure the cache, not the path. Also the mean
 * time of one copy (memcpy_us), for the latency bound. */
static void bench_memcpy(size_t size) {
    char sz[32], name[64];
    size_t half = COLD_SPAN / 2, slots = half / size < 2 ? 2 : half / size;
    unsigned char *src = bench_buffer(slots * size, 1), *dst = bench_buffer(slots * size, 2);
    bench_budget b;
    bench_budget_init(&b, 3, 100000, bench_seconds());
    while (bench_budget_more(&b)) {
        size_t i = (size_t)b.rounds % slots, j = ((size_t)b.rounds * 7 + 3) % slots;
        uint64_t t0 = mono_us();
        memcpy(dst + j * size, src + i * size, size);
        bench_budget_add(&b, mono_us() - t0);
    }
    /* Keep the copy observable so it cannot be optimised away. */
    if (dst[size / 2] == 0x5a && src[size / 2] == 0xa5) fprintf(stderr, "memcpy pattern\n");
    bench_size_name(size, sz, sizeof sz);
    snprintf(name, sizeof name, "memcpy.%s", sz);
    bench_result(name, bench_gbps((double)size * (double)b.rounds, b.spent_us), "GB/s");
    snprintf(name, sizeof name, "memcpy_us.%s", sz);
    bench_result(name, (double)b.spent_us / (double)b.rounds, "us");
    free(src);
    free(dst);
}

/* Median round trip of a PING to the master, as name (us). */
static void bench_ping(const char *master, const char *name) {
    char host[256];
    int port;
    struct timeval tv = {5, 0};
    redisContext *rc = parse_hostport(master, host, sizeof host, &port) == 0
                           ? redisConnectWithTimeout(host, port, tv) : NULL;
    if (!rc || rc->err) {
        bench_skip(name, "cannot connect to the master %s", master);
        if (rc) redisFree(rc);
        return;
    }
    uint64_t lat[200];
    size_t n = 0;
    for (; n < sizeof lat / sizeof lat[0]; n++) {
        uint64_t t0 = mono_us();
        redisReply *r = redisCommand(rc, "PING");
        lat[n] = mono_us() - t0;
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) break;
    }
    if (n == 0) bench_skip(name, "PING to the master failed");
    else bench_result(name, (double)bench_percentile(lat, n, 50), "us");
    redisFree(rc);
}

/* ---- redis-server through hiredis: the RESP client reference ---- */

/* Times one command; 0 and *us on a reply of the expected type. */
static int redis_timed(redisContext *rc, int want_type, uint64_t *us, const char *fmt,
                       const char *key, const void *val, size_t len) {
    uint64_t t0 = mono_us();
    redisReply *r = val ? redisCommand(rc, fmt, key, strlen(key), val, len)
                        : redisCommand(rc, fmt, key, strlen(key));
    *us = mono_us() - t0;
    int ok = r && r->type == want_type && (want_type != REDIS_REPLY_STRING || r->len == len);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static void bench_redis(const char *hostport, size_t size) {
    char host[256], sz[32], set_name[64], get_name[64];
    int port;
    bench_size_name(size, sz, sizeof sz);
    snprintf(set_name, sizeof set_name, "redis.set.%s", sz);
    snprintf(get_name, sizeof get_name, "redis.get.%s", sz);
    if (parse_hostport(hostport, host, sizeof host, &port) != 0) {
        bench_skip(set_name, "bad address %s", hostport);
        return;
    }
    struct timeval tv = {10, 0};
    redisContext *rc = redisConnectWithTimeout(host, port, tv);
    if (!rc || rc->err) {
        bench_skip(set_name, "cannot connect to redis-server at %s: %s", hostport,
                   rc ? rc->errstr : "out of memory");
        bench_skip(get_name, "cannot connect to redis-server at %s", hostport);
        if (rc) redisFree(rc);
        return;
    }
    redisSetTimeout(rc, tv);
    unsigned char *val = bench_buffer(size, 3);
    char key[96];
    make_key(key, sizeof key, "redis", size, 0);
    bench_budget b;
    uint64_t us;
    int failed = 0;
    bench_budget_init(&b, 3, 10000, bench_seconds());
    while (!failed && bench_budget_more(&b)) {
        failed = redis_timed(rc, REDIS_REPLY_STATUS, &us, "SET %b %b", key, val, size);
        bench_budget_add(&b, us);
    }
    if (failed) bench_skip(set_name, "SET failed: %s", rc->err ? rc->errstr : "error reply");
    else bench_result(set_name, bench_gbps((double)size * (double)b.rounds, b.spent_us), "GB/s");

    bench_budget_init(&b, 3, 10000, bench_seconds());
    while (!failed && bench_budget_more(&b)) {
        /* Reading the len back is how the checked length gets used. */
        failed = redis_timed(rc, REDIS_REPLY_STRING, &us, "GET %b", key, NULL, size);
        bench_budget_add(&b, us);
    }
    if (failed) bench_skip(get_name, "GET failed or returned a wrong size");
    else bench_result(get_name, bench_gbps((double)size * (double)b.rounds, b.spent_us), "GB/s");
    redisReply *r = redisCommand(rc, "DEL %b", key, strlen(key));
    if (r) freeReplyObject(r);
    redisFree(rc);
    free(val);
}

/* ---- libmoonkv put/get from registered buffers ---- */

typedef struct capi_run {
    const mkv_api *api;
    mkv_client *c;
    unsigned char *src, *dst;   /* both registered, `span` bytes each */
    size_t span;
    size_t size;                /* of the objects measured now */
    int ref;                    /* time a memcpy after each put and get */
    bench_budget copy;          /* those memcpys */
} capi_run;

/* Like the memcpy reference, transfers rotate over COLD_SPAN of local
 * memory (and gets over as many objects), so neither end of a copy is
 * still in cache from the one before (L3 here is 32 MiB). */
static size_t capi_slots(const capi_run *r) {
    size_t n = r->span / r->size;
    return n < 2 ? 2 : n > 128 ? 128 : n;
}

/* The memcpy reference timed alternately with the transfers (r->ref):
 * the same size between the same two spans, slots half a rotation away
 * from the transfer's, so the copies meet memory neither they nor the
 * transfers left in cache, and the load of a shared machine falls on
 * both sides alike (memcpy runs before and after a row met other
 * moments' loads: 9 to 19 GB/s within minutes here). */
static void capi_ref_copy(capi_run *r, uint64_t round) {
    size_t slots = capi_slots(r), half = slots / 2;
    unsigned char *to = r->dst + (((size_t)round * 7 + 3 + half) % slots) * r->size;
    const unsigned char *from = r->src + (((size_t)round + half) % slots) * r->size;
    uint64_t t0 = mono_us();
    memcpy(to, from, r->size);
    bench_budget_add(&r->copy, mono_us() - t0);
}

static void capi_ref_begin(capi_run *r) { bench_budget_init(&r->copy, 0, UINT64_MAX, 0); }

/* The rate over all rounds as name (op.SIZE); with the alternating
 * memcpy (r->ref) also the fastest round of each side (op_best.SIZE,
 * memcpy_op.SIZE, memcpy_op_best.SIZE). On a shared 2-core machine a
 * round of either side that a core was taken from for a few ms (other
 * processes' threads) reads slow; which side a few such rounds fall on
 * swung the all-rounds ratio from 0.3x to 1.1x between runs, while the
 * two sides' fastest rounds, alike free of it, compare the paths. */
static void capi_results(const capi_run *r, const bench_budget *b, const char *op, const char *name) {
    char sz[32], n[64];
    double size = (double)r->size;
    bench_result(name, bench_gbps(size * (double)b->rounds, b->spent_us), "GB/s");
    if (!r->ref || !r->copy.rounds) return;
    bench_size_name(r->size, sz, sizeof sz);
    snprintf(n, sizeof n, "%s_best.%s", op, sz);
    bench_result(n, bench_gbps(size, b->best_us), "GB/s");
    snprintf(n, sizeof n, "memcpy_%s.%s", op, sz);
    bench_result(n, bench_gbps(size * (double)r->copy.rounds, r->copy.spent_us), "GB/s");
    snprintf(n, sizeof n, "memcpy_%s_best.%s", op, sz);
    bench_result(n, bench_gbps(size, r->copy.best_us), "GB/s");
}

/* Timed puts of fresh keys, each removed afterwards (untimed) so the
 * segment never fills however long the budget: an object nobody read
 * goes back to the allocator at once, and the next put lands on the same
 * extents. Rounds as the gets have: capped at 512 MiB a size (8 rounds
 * of 64 MiB, while removed extents were held), the fastest 64 MiB put
 * was the best of 8 on a loaded machine, its memcpy too. */
static void capi_put(capi_run *r, const char *name) {
    bench_budget b;
    char key[96];
    bench_budget_init(&b, 3, 5000, bench_seconds());
    capi_ref_begin(r);
    while (bench_budget_more(&b)) {
        int n = make_key(key, sizeof key, "put", r->size, (size_t)b.rounds);
        unsigned char *from = r->src + ((size_t)b.rounds % capi_slots(r)) * r->size;
        uint64_t t0 = mono_us();
        int rc = r->api->put(r->c, key, (size_t)n, from, r->size, 1);
        uint64_t us = mono_us() - t0;
        if (rc != MKV_OK) {
            bench_skip(name, "mkv_put: %s", r->api->last_error(r->c));
            return;
        }
        bench_budget_add(&b, us);
        r->api->remove(r->c, key, (size_t)n);
        if (r->ref) capi_ref_copy(r, b.rounds);
    }
    capi_results(r, &b, "put", name);
}

/* One object per slot put, then timed gets rotating over them and over
 * the destination slots; the first get of each is checked byte by byte. */
static void capi_get(capi_run *r, const char *name, const char *lat_name) {
    size_t slots = capi_slots(r), nput = 0;
    char (*keys)[96] = xcalloc(slots, sizeof *keys);
    uint64_t *lat = xcalloc(5000, sizeof *lat);
    for (; nput < slots; nput++) {
        int n = make_key(keys[nput], sizeof keys[nput], "get", r->size, nput);
        if (r->api->put(r->c, keys[nput], (size_t)n, r->src + nput * r->size, r->size, 1) != MKV_OK) {
            bench_skip(name, "mkv_put before get: %s", r->api->last_error(r->c));
            goto out;
        }
    }
    bench_budget b;
    bench_budget_init(&b, 3, 5000, bench_seconds());
    capi_ref_begin(r);
    while (bench_budget_more(&b)) {
        size_t i = (size_t)b.rounds % slots, got = 0;
        unsigned char *to = r->dst + (((size_t)b.rounds * 7 + 3) % slots) * r->size;
        uint64_t t0 = mono_us();
        int rc = r->api->get(r->c, keys[i], strlen(keys[i]), to, r->size, &got);
        uint64_t us = mono_us() - t0;
        if (rc != MKV_OK || got != r->size) {
            bench_skip(name, "mkv_get: %s", rc != MKV_OK ? r->api->last_error(r->c) : "wrong size");
            break;
        }
        if (b.rounds < slots && memcmp(r->src + i * r->size, to, r->size) != 0) {
            bench_skip(name, "mkv_get returned different bytes than were put");
            break;
        }
        lat[b.rounds] = us;
        bench_budget_add(&b, us);
        if (r->ref) capi_ref_copy(r, b.rounds);
    }
    if (!bench_budget_more(&b)) {
        capi_results(r, &b, "get", name);
        bench_result(lat_name, (double)bench_percentile(lat, (size_t)b.rounds, 50), "us");
    }
out:
    for (size_t i = 0; i < nput; i++) r->api->remove(r->c, keys[i], strlen(keys[i]));
    free(keys);
    free(lat);
}

#define WARM_WAIT_MS 120000   /* a bound on waiting for shm mappings to warm */

/* Untimed puts and gets of a few small objects, so that the paths to the
 * nodes they land on are open before anything is timed; for shm, also
 * until the client's mappings of the nodes' segments are warm (in the
 * background: a long-running client's state, which the timed rows are
 * about; before that, transfers take the checked fd path). */
static void bench_warm_up(const mkv_api *api, mkv_client *c, unsigned char *buf, size_t room) {
    char key[96];
    for (size_t i = 0; i < 16 && (i + 1) * 65536 <= room; i++) {
        int n = make_key(key, sizeof key, "warm", 65536, i);
        size_t got;
        if (api->put(c, key, (size_t)n, buf + i * 65536, 65536, 1) == MKV_OK)
            api->get(c, key, (size_t)n, buf + i * 65536, 65536, &got);
        api->remove(c, key, (size_t)n);
    }
    mkv_transfer_stats st;
    for (uint64_t t0 = mono_ms(); mono_ms() - t0 < WARM_WAIT_MS; usleep(20000)) {
        api->transfer_stats_get(c, &st);
        if (st.shm_cold_bytes == 0) break;
    }
}

/* Every SIZE with one client and one pair of registered buffers of
 * COLD_SPAN / 2 each (or two of the largest SIZE), cut into slots. */
static void bench_moonkv(const mkv_api *api, const char *master, const char *transport,
                         char **sizes, int nsizes) {
    size_t max = 0;
    for (int i = 0; i < nsizes; i++)
        if (bench_size_arg(sizes[i]) > max) max = bench_size_arg(sizes[i]);
    /* The one-copy-thread rows race a one-thread memcpy: timed beside them. */
    capi_run r = {.api = api, .span = COLD_SPAN / 2 > 2 * max ? COLD_SPAN / 2 : 2 * max,
                  .ref = !strcmp(transport, "shm-1t")};
    r.c = api_connect(api, master, transport, "capi.connect");
    if (!r.c) return;
    r.src = bench_buffer(r.span, 4);
    r.dst = bench_buffer(r.span, 5);
    if (api->register_buffer(r.c, r.src, r.span) != MKV_OK ||
        api->register_buffer(r.c, r.dst, r.span) != MKV_OK) {
        bench_skip("capi.connect", "mkv_register_buffer: %s", api->last_error(r.c));
    } else {
        bench_warm_up(api, r.c, r.src, r.span);
        for (int i = 0; i < nsizes; i++) {
            char sz[32], put_name[64], get_name[64], lat_name[64];
            r.size = bench_size_arg(sizes[i]);
            bench_size_name(r.size, sz, sizeof sz);
            snprintf(put_name, sizeof put_name, "put.%s", sz);
            snprintf(get_name, sizeof get_name, "get.%s", sz);
            snprintf(lat_name, sizeof lat_name, "get_p50_us.%s", sz);
            capi_put(&r, put_name);
            capi_get(&r, get_name, lat_name);
        }
        bench_ping(master, "ping_us");
    }
    api->close(r.c);
    free(r.src);
    free(r.dst);
}

/* ---- KV-cache pattern: a batch of blocks versus a loop of singles ---- */

typedef struct kv_run {
    const mkv_api *api;
    mkv_client *c;
    unsigned char *src, *dst;
    size_t blocks, bsize;
    mkv_obj *objs;
    char (*keys)[96];
} kv_run;

static void kv_keys(kv_run *k, const char *kind) {
    for (size_t i = 0; i < k->blocks; i++) {
        int n = make_key(k->keys[i], sizeof k->keys[i], kind, k->bsize, i);
        k->objs[i] = (mkv_obj){.key = k->keys[i], .keylen = (size_t)n};
    }
}

/* How many objects of the batch failed; *first = the first one's status. */
static size_t kv_failed(const kv_run *k, int *first) {
    size_t bad = 0;
    *first = MKV_OK;
    for (size_t i = 0; i < k->blocks; i++) {
        if (k->objs[i].status == MKV_OK) continue;
        if (bad++ == 0) *first = k->objs[i].status;
    }
    return bad;
}

/* A SKIP line for a batch call that failed as a whole (rc) or in part. */
static int kv_batch_failed(const kv_run *k, int rc, const char *name, const char *call) {
    int first;
    size_t bad = kv_failed(k, &first);
    if (rc == MKV_OK && bad == 0) return 0;
    if (rc != MKV_OK)
        bench_skip(name, "%s: %s", call, k->api->last_error(k->c));
    else
        bench_skip(name, "%s: %zu of %zu blocks failed, the first with %s (%s)", call, bad, k->blocks,
                   k->api->strerror(first), k->api->last_error(k->c));
    return -1;
}

static void kv_remove_all(kv_run *k) {
    for (size_t i = 0; i < k->blocks; i++)
        k->api->remove(k->c, k->objs[i].key, k->objs[i].keylen);
}

/* One untimed batch put, get and remove of every block. Through a mapped
 * segment (shm), a process's first access to each page costs a trap on
 * some VMs (about 19 us per 4 KiB page here: shadow paging; populating
 * the mapping does not avoid it), paid once per client and page; the
 * timed rounds then land on the same, freed extents, as a long-running
 * client's would, and the one-transfer reference meets warm pages too. */
static void kv_warm(kv_run *k) {
    kv_keys(k, "kvw");
    for (size_t i = 0; i < k->blocks; i++) {
        k->objs[i].buf = k->src + i * k->bsize;
        k->objs[i].len = k->bsize;
    }
    if (k->api->put_batch(k->c, k->objs, k->blocks, 1) == MKV_OK) {
        for (size_t i = 0; i < k->blocks; i++) k->objs[i].buf = k->dst + i * k->bsize;
        k->api->get_batch(k->c, k->objs, k->blocks);
    }
    kv_remove_all(k);
}

/* The rounds of the batch and of its reference, alternating, so a load
 * swing on the shared machine meets both alike; each reports its median
 * round (microseconds per direction). */
#define KV_ROUNDS 3

typedef struct kv_times {
    uint64_t put_us[KV_ROUNDS], get_us[KV_ROUNDS];
    int n;
} kv_times;

/* One batch put then one batch get of every block (keys of this round);
 * -1 after a SKIP line. */
static int kv_batch(kv_run *k, int round, kv_times *t) {
    char kind[16];
    snprintf(kind, sizeof kind, "kvb%d", round);
    kv_keys(k, kind);
    for (size_t i = 0; i < k->blocks; i++) {
        k->objs[i].buf = k->src + i * k->bsize;
        k->objs[i].len = k->bsize;
    }
    uint64_t t0 = mono_us();
    int rc = k->api->put_batch(k->c, k->objs, k->blocks, 1);
    uint64_t put_us = mono_us() - t0;
    if (kv_batch_failed(k, rc, "batch_put_s", "mkv_put_batch") != 0) {
        kv_remove_all(k);
        return -1;
    }
    for (size_t i = 0; i < k->blocks; i++) {
        k->objs[i].buf = k->dst + i * k->bsize;
        k->objs[i].len = k->bsize;
    }
    memset(k->dst, 0, k->blocks * k->bsize);   /* untimed: a stale round must not pass the check */
    t0 = mono_us();
    rc = k->api->get_batch(k->c, k->objs, k->blocks);
    uint64_t get_us = mono_us() - t0;
    int bad = kv_batch_failed(k, rc, "batch_get_s", "mkv_get_batch");
    if (!bad && memcmp(k->src, k->dst, k->blocks * k->bsize) != 0) {
        bench_skip("batch_get_s", "mkv_get_batch returned different bytes than were put");
        bad = -1;
    }
    kv_remove_all(k);
    if (bad) return -1;
    t->put_us[t->n] = put_us;
    t->get_us[t->n++] = get_us;
    return 0;
}

/* The transport's bound for the batch: the same bytes as one object, one
 * put and one get; -1 after a SKIP line. */
static int kv_one_transfer(kv_run *k, int round, kv_times *t) {
    char key[96];
    size_t total = k->blocks * k->bsize, got = 0;
    int n = make_key(key, sizeof key, "kv1", total, (size_t)round);
    uint64_t t0 = mono_us();
    int rc = k->api->put(k->c, key, (size_t)n, k->src, total, 1);
    uint64_t put_us = mono_us() - t0;
    if (rc != MKV_OK) {
        bench_skip("one_put_gbps", "put of one %zu-byte object: %s (%s)", total, k->api->strerror(rc),
                   k->api->last_error(k->c));
        return -1;
    }
    memset(k->dst, 0, total);   /* as before the batch get: the same cache state */
    t0 = mono_us();
    rc = k->api->get(k->c, key, (size_t)n, k->dst, total, &got);
    uint64_t get_us = mono_us() - t0;
    k->api->remove(k->c, key, (size_t)n);
    if (rc != MKV_OK || got != total) {
        bench_skip("one_put_gbps", "get of one %zu-byte object: %s (%s)", total, k->api->strerror(rc),
                   k->api->last_error(k->c));
        return -1;
    }
    t->put_us[t->n] = put_us;
    t->get_us[t->n++] = get_us;
    return 0;
}

static uint64_t kv_median(uint64_t *us, int n) {
    qsort(us, (size_t)n, sizeof *us, bench_cmp_u64);
    return us[n / 2];
}

/* Batch and one-transfer rounds in turn, then their medians: batch_put_s,
 * batch_get_s and the rates of both (batch_*_gbps, one_*_gbps). */
static int kv_rounds(kv_run *k) {
    kv_times batch = {0}, one = {0};
    int one_ok = 1;
    for (int r = 0; r < KV_ROUNDS; r++) {
        if (kv_batch(k, r, &batch) != 0) return -1;
        if (one_ok && kv_one_transfer(k, r, &one) != 0) one_ok = 0;
    }
    double total = (double)k->blocks * (double)k->bsize;
    uint64_t put_us = kv_median(batch.put_us, batch.n), get_us = kv_median(batch.get_us, batch.n);
    bench_result("batch_put_s", (double)put_us / 1e6, "s");
    bench_result("batch_put_gbps", bench_gbps(total, put_us), "GB/s");
    bench_result("batch_get_s", (double)get_us / 1e6, "s");
    bench_result("batch_get_gbps", bench_gbps(total, get_us), "GB/s");
    if (one_ok) {
        bench_result("one_put_gbps", bench_gbps(total, kv_median(one.put_us, one.n)), "GB/s");
        bench_result("one_get_gbps", bench_gbps(total, kv_median(one.get_us, one.n)), "GB/s");
    }
    return 0;
}

/* Seconds for the same blocks one call at a time, and get latencies. */
static void kv_loop(kv_run *k) {
    kv_keys(k, "kvl");
    uint64_t put_us = 0, get_us = 0, *lat = xcalloc(k->blocks, sizeof *lat);
    size_t i;
    for (i = 0; i < k->blocks; i++) {
        uint64_t t0 = mono_us();
        int rc = k->api->put(k->c, k->objs[i].key, k->objs[i].keylen, k->src + i * k->bsize,
                             k->bsize, 1);
        put_us += mono_us() - t0;
        if (rc != MKV_OK) break;
    }
    if (i < k->blocks) {
        bench_skip("loop_put_s", "mkv_put of block %zu: %s", i, k->api->last_error(k->c));
        goto out;
    }
    bench_result("loop_put_s", (double)put_us / 1e6, "s");
    for (i = 0; i < k->blocks; i++) {
        size_t got = 0;
        uint64_t t0 = mono_us();
        int rc = k->api->get(k->c, k->objs[i].key, k->objs[i].keylen, k->dst + i * k->bsize,
                             k->bsize, &got);
        lat[i] = mono_us() - t0;
        get_us += lat[i];
        if (rc != MKV_OK || got != k->bsize) break;
    }
    if (i < k->blocks) {
        bench_skip("loop_get_s", "mkv_get of block %zu: %s", i, k->api->last_error(k->c));
        goto out;
    }
    bench_result("loop_get_s", (double)get_us / 1e6, "s");
    bench_result("get_p50_us", (double)bench_percentile(lat, k->blocks, 50), "us");
    bench_result("get_p99_us", (double)bench_percentile(lat, k->blocks, 99), "us");
out:
    kv_remove_all(k);
    free(lat);
}

static void bench_kvcache(const mkv_api *api, const char *master, const char *transport,
                          size_t blocks, size_t bsize) {
    if (blocks == 0 || blocks > 100000 || bsize > ((size_t)1 << 30) / blocks) {
        fprintf(stderr, "kvcache: want 1..100000 blocks and at most 1 GiB in all\n");
        exit(2);
    }
    kv_run k = {.api = api, .blocks = blocks, .bsize = bsize};
    k.c = api_connect(api, master, transport, "batch_put_s");
    if (!k.c) return;
    k.src = bench_buffer(blocks * bsize, 6);
    k.dst = bench_buffer(blocks * bsize, 7);
    k.objs = xcalloc(blocks, sizeof *k.objs);
    k.keys = xcalloc(blocks, sizeof *k.keys);
    if (api->register_buffer(k.c, k.src, blocks * bsize) != MKV_OK ||
        api->register_buffer(k.c, k.dst, blocks * bsize) != MKV_OK)
        bench_skip("batch_put_s", "mkv_register_buffer: %s", api->last_error(k.c));
    else if (bench_warm_up(api, k.c, k.src, blocks * bsize), kv_warm(&k), kv_rounds(&k) == 0) {
        kv_loop(&k);
        bench_ping(master, "ping_us");
    }
    api->close(k.c);
    free(k.src);
    free(k.dst);
    free(k.objs);
    free(k.keys);
}

/* ---- threads: one shared client against a client per thread ---- */

#define THR_MAX  8
#define THR_OBJS 16   /* objects per thread per round */

typedef struct thr_run thr_run;
typedef struct thr_one {
    thr_run *run;
    mkv_client *c;            /* the shared client or this thread's own */
    unsigned char *src, *dst; /* THR_OBJS objects each, registered with c */
    int id, failed;
} thr_one;

struct thr_run {
    const mkv_api *api;
    size_t size;
    int n, shared, stop;
    pthread_barrier_t start, done;
    uint64_t round;
    thr_one t[THR_MAX];
};

static int thr_key(char *buf, size_t len, const thr_run *r, int id, size_t i) {
    return snprintf(buf, len, "bench:%d:thr:%d:%d:%llu:%zu", (int)getpid(), r->shared, id,
                    (unsigned long long)r->round, i);
}

/* One phase of this thread's round: put (0), get (1) or remove (2) its objects. */
static void thr_phase(thr_one *o, int phase) {
    thr_run *r = o->run;
    char key[96];
    for (size_t i = 0; i < THR_OBJS && !o->failed; i++) {
        int n = thr_key(key, sizeof key, r, o->id, i), rc;
        size_t got;
        if (phase == 0) rc = r->api->put(o->c, key, (size_t)n, o->src + i * r->size, r->size, 1);
        else if (phase == 1) rc = r->api->get(o->c, key, (size_t)n, o->dst + i * r->size, r->size, &got);
        else rc = r->api->remove(o->c, key, (size_t)n);
        if (rc != MKV_OK) o->failed = rc;
    }
}

/* Each round: every thread puts, then (all past the barrier) gets, then removes. */
static void *thr_main(void *arg) {
    thr_one *o = arg;
    thr_run *r = o->run;
    for (;;) {
        for (int phase = 0; phase < 3; phase++) {
            pthread_barrier_wait(&r->start);
            if (r->stop) return NULL;
            thr_phase(o, phase);
            pthread_barrier_wait(&r->done);
        }
    }
}

/* The main thread's side of one phase: its wall time in us. */
static uint64_t thr_step(thr_run *r) {
    uint64_t t0 = mono_us();
    pthread_barrier_wait(&r->start);
    pthread_barrier_wait(&r->done);
    return mono_us() - t0;
}

static int thr_failed(const thr_run *r) {
    for (int i = 0; i < r->n; i++)
        if (r->t[i].failed) return r->t[i].failed;
    return 0;
}

/* n threads on one client (shared) or one client each; put and get GB/s
 * of all threads together, over rounds until the time budget, into
 * gbps[0] and [1] (left as they are when the pass fails: it says why). */
static void thr_measure(const mkv_api *api, const char *master, const char *transport, size_t size, int n,
                        int shared, double gbps[2]) {
    char sz[32], put_name[96], get_name[96];
    bench_size_name(size, sz, sizeof sz);
    snprintf(put_name, sizeof put_name, "%s.put.%s.%dt", shared ? "shared" : "own", sz, n);
    snprintf(get_name, sizeof get_name, "%s.get.%s.%dt", shared ? "shared" : "own", sz, n);
    thr_run *r = xcalloc(1, sizeof *r);
    *r = (thr_run){.api = api, .size = size, .n = n, .shared = shared};
    mkv_client *one = shared ? api_connect(api, master, transport, put_name) : NULL;
    int ok = !shared || one;
    for (int i = 0; ok && i < n; i++) {
        thr_one *o = &r->t[i];
        *o = (thr_one){.run = r, .id = i, .c = shared ? one : api_connect(api, master, transport, put_name)};
        o->src = bench_buffer(THR_OBJS * size, 11 + i);
        o->dst = bench_buffer(THR_OBJS * size, 31 + i);
        ok = o->c && api->register_buffer(o->c, o->src, THR_OBJS * size) == MKV_OK &&
             api->register_buffer(o->c, o->dst, THR_OBJS * size) == MKV_OK;
        if (o->c && !ok) bench_skip(put_name, "mkv_register_buffer: %s", api->last_error(o->c));
        if (ok && (!shared || i == 0)) bench_warm_up(api, o->c, o->src, THR_OBJS * size);
    }
    pthread_t th[THR_MAX];
    int started = 0;
    if (ok) {
        pthread_barrier_init(&r->start, NULL, (unsigned)n + 1);
        pthread_barrier_init(&r->done, NULL, (unsigned)n + 1);
        for (; started < n; started++) pthread_create(&th[started], NULL, thr_main, &r->t[started]);
        /* One round untimed: a shared client opens its lanes (master
         * connection, engine, paths) when threads first meet; clients of
         * their own did at connect. */
        for (int phase = 0; phase < 3; phase++) thr_step(r);
        r->round++;
        bench_budget put, get;
        bench_budget_init(&put, 3, 100000, bench_seconds());
        bench_budget_init(&get, 3, 100000, bench_seconds());
        while (!thr_failed(r) && (bench_budget_more(&put) || bench_budget_more(&get))) {
            bench_budget_add(&put, thr_step(r));
            bench_budget_add(&get, thr_step(r));
            thr_step(r);   /* remove */
            r->round++;
        }
        r->stop = 1;
        pthread_barrier_wait(&r->start);
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&r->start);
        pthread_barrier_destroy(&r->done);
        double bytes = (double)n * THR_OBJS * (double)size;
        if (thr_failed(r)) {
            bench_skip(put_name, "a call failed: %s", api->strerror(thr_failed(r)));
            bench_skip(get_name, "a call failed: %s", api->strerror(thr_failed(r)));
        } else {
            gbps[0] = bench_gbps(bytes * (double)put.rounds, put.spent_us);
            gbps[1] = bench_gbps(bytes * (double)get.rounds, get.spent_us);
        }
    }
    for (int i = 0; i < n; i++) {
        if (!shared && r->t[i].c) api->close(r->t[i].c);
        free(r->t[i].src);
        free(r->t[i].dst);
    }
    if (one) api->close(one);
    free(r);
}

/* Shared, own, own, shared: a pass that runs first meets a colder
 * cluster (segment pages, node threads), so each side runs once early
 * and once late, and its best pass is the figure. */
static void thr_pair(const mkv_api *api, const char *master, const char *transport, size_t size, int n) {
    double best[2][2] = {{0, 0}, {0, 0}};   /* [shared][put/get] */
    int failed[2] = {0, 0};                  /* a failed pass said why (SKIP): no figure */
    static const int order[4] = {1, 0, 0, 1};
    for (int i = 0; i < 4; i++) {
        double g[2] = {0, 0};
        thr_measure(api, master, transport, size, n, order[i], g);
        failed[order[i]] |= g[0] <= 0;
        for (int k = 0; k < 2; k++)
            if (g[k] > best[order[i]][k]) best[order[i]][k] = g[k];
    }
    char sz[32], name[96];
    bench_size_name(size, sz, sizeof sz);
    for (int sh = 0; sh < 2; sh++)
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s.%s.%s.%dt", sh ? "shared" : "own", k ? "get" : "put", sz, n);
            if (!failed[sh]) bench_result(name, best[sh][k], "GB/s");
        }
}

static void bench_threads(const mkv_api *api, const char *master, const char *transport, size_t size,
                          char **counts, int ncounts) {
    for (int i = 0; i < ncounts; i++) {
        int n = atoi(counts[i]);
        if (n < 1 || n > THR_MAX) {
            fprintf(stderr, "threads: 1 to %d threads\n", THR_MAX);
            exit(2);
        }
        thr_pair(api, master, transport, size, n);
    }
}

static int usage(void) {
    fprintf(stderr,
            "usage: bench_client memcpy SIZE...\n"
            "       bench_client ping HOST:PORT\n"
            "       bench_client redis HOST:PORT SIZE...\n"
            "       bench_client moonkv LIBMOONKV.so MASTER TRANSPORT SIZE...\n"
            "       bench_client kvcache LIBMOONKV.so MASTER TRANSPORT BLOCKS BLOCK_SIZE\n"
            "       bench_client threads LIBMOONKV.so MASTER TRANSPORT SIZE THREADS...\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    const char *mode = argv[1];
    if (!strcmp(mode, "memcpy")) {
        for (int i = 2; i < argc; i++) bench_memcpy(bench_size_arg(argv[i]));
        return 0;
    }
    if (!strcmp(mode, "ping")) {
        bench_ping(argv[2], "ping_us");
        return 0;
    }
    if (!strcmp(mode, "redis") && argc >= 4) {
        for (int i = 3; i < argc; i++) bench_redis(argv[2], bench_size_arg(argv[i]));
        return 0;
    }
    int is_kv = !strcmp(mode, "kvcache"), is_thr = !strcmp(mode, "threads");
    if ((!strcmp(mode, "moonkv") && argc >= 6) || (is_kv && argc == 7) || (is_thr && argc >= 7)) {
        mkv_api api;
        char err[512];
        if (api_load(&api, argv[2], err, sizeof err) != 0) {
            bench_skip(is_kv ? "batch_put_s" : is_thr ? "shared.put" : "capi.connect", "%s", err);
            return 0;
        }
        if (is_kv) bench_kvcache(&api, argv[3], argv[4], (size_t)atol(argv[5]), bench_size_arg(argv[6]));
        else if (is_thr) bench_threads(&api, argv[3], argv[4], bench_size_arg(argv[5]), argv + 6, argc - 6);
        else bench_moonkv(&api, argv[3], argv[4], argv + 5, argc - 5);
        dlclose(api.dl);
        return 0;
    }
    return usage();
}
