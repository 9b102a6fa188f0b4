/* bench_async.c - libmoonkv's asynchronous face (moonkv_async.h): how
 * many operations per second one event loop gets with WINDOW of them in
 * flight, on a face of THREADS threads.
 *
 *   bench_async LIBMOONKV.so MASTER TRANSPORT SIZE THREADS WINDOW
 *
 * Phases, each over its time budget: exists of absent keys (the master
 * alone), put of SIZE (at most 256 MiB of them), get of them (byte-exact, checked once), remove.
 * Results: async.<phase>.<SIZE>.<THREADS>t.w<WINDOW> in ops/s. The
 * library is loaded with dlopen() from the path given, so two builds
 * (before and after a change) are measured by the same program. */
#include <dlfcn.h>
#include <poll.h>
#include <unistd.h>

#include "bench.h"
#include "client/moonkv_async.h"

typedef struct api {
    void *dl;
    __typeof__(mkv_options_init) *options_init;
    __typeof__(mkv_connect) *connect;
    __typeof__(mkv_close) *close;
    __typeof__(mkv_last_error) *last_error;
    __typeof__(mkv_register_buffer) *register_buffer;
    __typeof__(mkv_async_open) *async_open;
    __typeof__(mkv_async_fd) *async_fd;
    __typeof__(mkv_async_submit) *async_submit;
    __typeof__(mkv_async_drain) *async_drain;
    __typeof__(mkv_async_close) *async_close;
} api;

#define LOAD(a, fn) ((a)->fn = (__typeof__((a)->fn))dlsym((a)->dl, "mkv_" #fn), (a)->fn != NULL)

static int api_load(api *a, const char *path) {
    memset(a, 0, sizeof *a);
    if (!(a->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return -1;
    return LOAD(a, options_init) && LOAD(a, connect) && LOAD(a, close) && LOAD(a, last_error) &&
                   LOAD(a, register_buffer) && LOAD(a, async_open) && LOAD(a, async_fd) &&
                   LOAD(a, async_submit) && LOAD(a, async_drain) && LOAD(a, async_close)
               ? 0 : -1;
}

#define MAX_WINDOW 4096
#define MAX_KEYS   (1u << 16)
#define PUT_BYTES  (256ull << 20)   /* the puts stop here: the cluster keeps them all */

typedef struct run {
    const api *A;
    mkv_async *as;
    mkv_op ops[MAX_WINDOW];
    char keys[MAX_WINDOW][48];
    unsigned char *src, *dst;      /* WINDOW slots of size each */
    size_t size, window;
    mkv_op_kind kind;
    uint64_t next, done, failed, bad, stop_ms, nkeys;
    int first_err;
} run;

static void on_done(mkv_op *op);

/* Slot s's next operation on key number next (kept below nkeys). */
static void submit_slot(run *r, size_t s) {
    mkv_op *op = &r->ops[s];
    uint64_t k = r->next++;
    int n = snprintf(r->keys[s], sizeof r->keys[s], "%s:%d:%zu:%llu", r->kind == MKV_OP_EXISTS ? "absent" : "basync",
                     (int)getpid(), r->size, (unsigned long long)k);
    *op = (mkv_op){.kind = r->kind, .key = r->keys[s], .keylen = (size_t)n, .len = r->size, .done = on_done, .ctx = r};
    op->buf = (r->kind == MKV_OP_GET ? r->dst : r->src) + s * r->size;
    if (r->A->async_submit(r->as, op) != MKV_OK) r->failed++;
}

static void on_done(mkv_op *op) {
    run *r = op->ctx;
    size_t s = (size_t)(op - r->ops);
    int want = r->kind == MKV_OP_EXISTS ? 0 : MKV_OK;
    if (op->status != want) {
        if (!r->failed++) r->first_err = op->status;
    } else if (r->kind == MKV_OP_GET && r->done < r->window &&
               (op->len != r->size || memcmp(r->dst + s * r->size, r->src, r->size) != 0)) {
        r->bad++;   /* the first window checked byte for byte (every slot holds the same value) */
    }
    r->done++;
    if (mono_ms() < r->stop_ms && r->next < r->nkeys) submit_slot(r, s);
}

/* One phase: window ops in flight until the budget (seconds, 0: none)
 * or nkeys ran out; ops/s. Gets and removes reuse the keys the puts made, slot for slot. */
static double phase(run *r, mkv_op_kind kind, double seconds) {
    r->kind = kind;
    r->next = r->done = r->failed = r->bad = 0;
    uint64_t t0 = mono_us();
    r->stop_ms = seconds > 0 ? mono_ms() + (uint64_t)(seconds * 1000) : UINT64_MAX;
    for (size_t s = 0; s < r->window && r->next < r->nkeys; s++) submit_slot(r, s);
    while (r->done < r->next) {
        struct pollfd p = {.fd = r->A->async_fd(r->as), .events = POLLIN};
        if (poll(&p, 1, 1000) > 0) r->A->async_drain(r->as);
    }
    double s = (double)(mono_us() - t0) / 1e6;
    return s > 0 ? (double)r->done / s : 0;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: bench_async LIBMOONKV.so MASTER TRANSPORT SIZE THREADS WINDOW\n");
        return 2;
    }
    api A;
    size_t size = bench_size_arg(argv[4]);
    int threads = atoi(argv[5]);
    size_t window = (size_t)atol(argv[6]);
    char name[160], sz[32];
    bench_size_name(size, sz, sizeof sz);
    if (api_load(&A, argv[1]) != 0) {
        bench_skip("async", "no async face in %s: %s", argv[1], dlerror());
        return 0;
    }
    if (window == 0 || window > MAX_WINDOW || threads < 0) {
        fprintf(stderr, "window 1 to %d\n", MAX_WINDOW);
        return 2;
    }
    mkv_options opt;
    A.options_init(&opt);
    opt.master = argv[2];
    opt.transport = argv[3];
    opt.cluster_secret = bench_secret();
    mkv_client *c = NULL;
    run *r = calloc(1, sizeof *r);
    r->A = &A;
    r->size = size;
    r->window = window;
    r->src = aligned_alloc(4096, (window * size + 4095) / 4096 * 4096);
    r->dst = aligned_alloc(4096, (window * size + 4095) / 4096 * 4096);
    for (size_t i = 0; i < window * size; i++) r->src[i] = (unsigned char)((i % size) * 131 + 7);
    if (A.connect(&c, &opt) != MKV_OK || A.register_buffer(c, r->src, window * size) != MKV_OK ||
        A.register_buffer(c, r->dst, window * size) != MKV_OK || A.async_open(&r->as, c, threads, 0) != MKV_OK) {
        bench_skip("async", "setup: %s", A.last_error(c));
        return 0;
    }
    static const struct { mkv_op_kind kind; const char *name; } phases[] = {
        {MKV_OP_EXISTS, "exists"}, {MKV_OP_PUT, "put"}, {MKV_OP_GET, "get"}, {MKV_OP_REMOVE, "remove"}};
    /* The puts' keys bound the rest: gets and removes cycle through the slots' keys again. */
    r->nkeys = MAX_KEYS;
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        if (phases[i].kind == MKV_OP_PUT) r->nkeys = PUT_BYTES / size < MAX_KEYS ? PUT_BYTES / size : MAX_KEYS;
        double ops = phase(r, phases[i].kind, phases[i].kind == MKV_OP_REMOVE ? 0 : 3.0);   /* every key removed */
        if (phases[i].kind == MKV_OP_PUT) r->nkeys = r->done;   /* gets, removes: the keys put */
        snprintf(name, sizeof name, "async.%s.%s.%dt.w%zu", phases[i].name, sz, threads, window);
        if (r->failed || r->bad)
            bench_skip(name, "%llu failed (first: %d), %llu differed", (unsigned long long)r->failed, r->first_err,
                       (unsigned long long)r->bad);
        else
            bench_result(name, ops, "ops/s");
    }
    A.async_close(r->as);
    A.close(c);
    return 0;
}
