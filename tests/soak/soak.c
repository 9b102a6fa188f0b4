/* tests/soak/soak.c - the soak run behind `make soak` (not in CI): a
 * master, 2 nodes and a gateway (replicas 2) take MKV_SOAK_CYCLES
 * put/get/remove cycles (default 10 million), half through the gateway
 * (hiredis) and half through libmoonkv, from two threads. Each cycle
 * puts a fresh key (4-64 KiB, one in 64 up to 1 MiB), reads back a
 * random key of a window of live ones (byte-exact, or the run fails) and
 * removes the oldest once the window is full, so the segments keep
 * fragmenting and healing.
 *
 * Every MKV_SOAK_INTERVAL_S seconds (default 10) one CSV row: RSS and
 * open fds of every process (the driver too) and the master's view of
 * the segments (bytes used, free extents, worst fragmentation, held
 * extents). At the end each RSS and fd column is judged (but the
 * driver's own RSS): after warm-up (the first third of the samples),
 * flat within 5 % ("ok - ..." lines). Nodes prefault their segments, so
 * their RSS is their heap plus a constant.
 *
 * Usage: soak CSV [cycles]. Ports 31200-31249. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "client/moonkv.h"
#include "integration/cluster_harness.h"

#define PORT_MASTER  31200
#define PORT_GATEWAY 31201
#define PORT_NODE(i) (31210 + 2 * (i))
#define PORT_DATA(i) (31211 + 2 * (i))
#define NNODES       2
#define WINDOW       1000           /* live keys per thread */
#define MAX_VALUE    (1u << 20)
#define FLAT_PCT     5.0

static uint64_t key_hash(const char *key) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static size_t value_len(const char *key) {
    uint64_t h = key_hash(key);
    if (h % 64 == 0) return 256u * 1024 + (h >> 8) % (768u * 1024);
    return 4096 + (h >> 8) % (60u * 1024);
}

/* ---- the two drivers ---- */

typedef struct driver {
    int lib;                    /* 1: libmoonkv, 0: gateway */
    uint64_t cycles, done;      /* done: read by the sampler */
    redisContext *rc;
    mkv_client *mc;
    unsigned char *src, *dst;
    uint64_t window[WINDOW];    /* sequence numbers of the live keys, a ring */
    unsigned head, n;
    uint64_t errors;
    char first_error[256];
} driver;

static atomic_int failed;

static void key_of(const driver *d, uint64_t seq, char *key, size_t len) {
    snprintf(key, len, "soak:%c:%llu", d->lib ? 'l' : 'g', (unsigned long long)seq);
}

static void fail(driver *d, const char *what, const char *key, const char *why) {
    if (!d->errors++)
        snprintf(d->first_error, sizeof d->first_error, "%s %s: %s", what, key, why ? why : "?");
    atomic_store(&failed, 1);
}

static void d_put(driver *d, const char *key) {
    size_t len = value_len(key);
    h_fill(d->src, len, key_hash(key));
    if (d->lib) {
        if (mkv_put(d->mc, key, strlen(key), d->src, len, 2) != MKV_OK)
            fail(d, "put", key, mkv_last_error(d->mc));
        return;
    }
    redisReply *r = redisCommand(d->rc, "SET %s %b", key, d->src, len);
    if (!r || r->type != REDIS_REPLY_STATUS) fail(d, "SET", key, r ? r->str : d->rc->errstr);
    if (r) freeReplyObject(r);
}

static void d_get(driver *d, const char *key) {
    size_t want = value_len(key), got = 0;
    const unsigned char *v = d->dst;
    redisReply *r = NULL;
    if (d->lib) {
        if (mkv_get(d->mc, key, strlen(key), d->dst, MAX_VALUE, &got) != MKV_OK) {
            fail(d, "get", key, mkv_last_error(d->mc));
            return;
        }
    } else {
        r = redisCommand(d->rc, "GET %s", key);
        if (!r || r->type != REDIS_REPLY_STRING) {
            fail(d, "GET", key, r ? r->str ? r->str : "nil" : d->rc->errstr);
            if (r) freeReplyObject(r);
            return;
        }
        got = r->len;
        v = (const unsigned char *)r->str;
    }
    h_fill(d->src, want, key_hash(key));
    if (got != want || memcmp(v, d->src, want) != 0) fail(d, "read", key, "wrong bytes");
    if (r) freeReplyObject(r);
}

static void d_del(driver *d, const char *key) {
    if (d->lib) {
        if (mkv_remove(d->mc, key, strlen(key)) != MKV_OK) fail(d, "remove", key, mkv_last_error(d->mc));
        return;
    }
    redisReply *r = redisCommand(d->rc, "DEL %s", key);
    if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1) fail(d, "DEL", key, r ? r->str : d->rc->errstr);
    if (r) freeReplyObject(r);
}

static void *d_run(void *arg) {
    driver *d = arg;
    uint64_t rng = d->lib ? 0x9e3779b97f4a7c15ULL : 0xbf58476d1ce4e5b9ULL;
    char key[48];
    for (uint64_t seq = 0; seq < d->cycles && !atomic_load(&failed); seq++) {
        if (d->n == WINDOW) {   /* remove the oldest */
            key_of(d, d->window[d->head], key, sizeof key);
            d_del(d, key);
            d->head = (d->head + 1) % WINDOW;
            d->n--;
        }
        key_of(d, seq, key, sizeof key);
        d_put(d, key);
        d->window[(d->head + d->n++) % WINDOW] = seq;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        key_of(d, d->window[(d->head + rng % d->n) % WINDOW], key, sizeof key);
        d_get(d, key);
        __atomic_store_n(&d->done, seq + 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static int d_open(driver *d, int lib, uint64_t cycles) {
    memset(d, 0, sizeof *d);
    d->lib = lib;
    d->cycles = cycles;
    d->src = mmap(NULL, 2 * (size_t)MAX_VALUE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d->src == MAP_FAILED) return -1;
    d->dst = d->src + MAX_VALUE;
    if (!lib) return (d->rc = h_redis_ms("127.0.0.1", PORT_GATEWAY, 10000)) ? 0 : -1;
    mkv_options opt;
    mkv_options_init(&opt);
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    opt.master = master;
    opt.transport = "tcp";
    opt.replicas = 2;
    return mkv_connect(&d->mc, &opt) == MKV_OK &&
                   mkv_register_buffer(d->mc, d->src, 2 * (size_t)MAX_VALUE) == MKV_OK
               ? 0
               : -1;
}

/* ---- sampling ---- */

enum { P_MASTER, P_NODE1, P_NODE2, P_GATEWAY, P_DRIVER, NPROC };
static const char *proc_name[NPROC] = {"master", "node1", "node2", "gateway", "driver"};
static pid_t pids[NPROC];

static long open_fds(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    long n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static redisContext *adm;

static double master_info(const char *field) {
    redisReply *r = redisCommand(adm, "INFO cluster");
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s:", field);
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, pat) : NULL;
    double v = p ? atof(p + strlen(pat)) : -1;
    if (r) freeReplyObject(r);
    return v;
}

#define MAX_SAMPLES 100000
#define NCOLS (2 * NPROC)        /* RSS then fds of each process: what is judged */
static double samples[MAX_SAMPLES][NCOLS];
static unsigned nsamples;

static void sample(FILE *csv, uint64_t t0, const driver *d) {
    double *row = samples[nsamples < MAX_SAMPLES ? nsamples++ : MAX_SAMPLES - 1];
    uint64_t cycles = __atomic_load_n(&d[0].done, __ATOMIC_RELAXED) + __atomic_load_n(&d[1].done, __ATOMIC_RELAXED);
    fprintf(csv, "%.1f,%llu", (double)(mono_ms() - t0) / 1000.0, (unsigned long long)cycles);
    for (int p = 0; p < NPROC; p++) row[p] = (double)h_rss_kb(pids[p]);
    for (int p = 0; p < NPROC; p++) row[NPROC + p] = (double)open_fds(pids[p]);
    for (int c = 0; c < NCOLS; c++) fprintf(csv, ",%.0f", row[c]);
    fprintf(csv, ",%.0f,%.0f,%.4f,%.0f\n", master_info("bytes_used"), master_info("free_extents"),
            master_info("fragmentation_max"), master_info("held_extents"));
    fflush(csv);
}

/* After warm-up, column c stays within FLAT_PCT of its first value (fds:
 * within 2 either way, a count that small jitters by a connection). */
static int judge_column(int c) {
    unsigned warm = nsamples / 3;
    double base = samples[warm][c], lo = base, hi = base;
    for (unsigned i = warm; i < nsamples; i++) {
        if (samples[i][c] < lo) lo = samples[i][c];
        if (samples[i][c] > hi) hi = samples[i][c];
    }
    int rss = c < NPROC;
    double pct = base > 0 ? 100.0 * (hi - lo) / base : 0;
    int flat = rss ? pct <= FLAT_PCT : hi - lo <= 2;
    printf("%s - flat %s %s: %.0f..%.0f after warm-up (%.1f %%)\n", flat ? "ok" : "not ok",
           proc_name[c % NPROC], rss ? "rss_kb" : "fds", lo, hi, pct);
    return flat;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: soak CSV [cycles]\n");
        return 2;
    }
    uint64_t cycles = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000ULL;
    const char *iv = getenv("MKV_SOAK_INTERVAL_S");
    unsigned interval = iv && atoi(iv) > 0 ? (unsigned)atoi(iv) : 10;
    h_init(0);
    /* Removed space comes back only when the object's last cap expires
     * (its put timeout, its read leases): short ones keep what a churn of
     * thousands of cycles a second holds well inside the segments. */
    const char *mflags[] = {"--lease-ms", "1000", "--put-timeout-ms", "1000", NULL};
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    pids[P_MASTER] = h_start_master(PORT_MASTER, mflags);
    for (int i = 0; i < NNODES; i++) {
        /* segment pages resident from the start: a node's RSS then shows
         * its heap, not how far the allocator has reached so far */
        h_args a = {0};
        h_node_argv(&a, master, "127.0.0.1", PORT_NODE(i), PORT_DATA(i), "1GB");
        h_arg(&a, "--prefault");
        h_arg(&a, "yes");
        pids[P_NODE1 + i] = h_spawn(a.v);
    }
    if (pids[P_MASTER] < 0 || h_wait_nodes(PORT_MASTER, "alive", NNODES, 20000) != 0 ||
        (pids[P_GATEWAY] = h_start_gateway(PORT_MASTER, PORT_GATEWAY, NULL, NULL)) < 0 ||
        !(adm = h_redis(PORT_MASTER))) {
        printf("not ok - soak cluster did not start\n");
        return 1;
    }
    pids[P_DRIVER] = getpid();
    static driver d[2];
    if (d_open(&d[0], 0, cycles / 2) != 0 || d_open(&d[1], 1, cycles - cycles / 2) != 0) {
        printf("not ok - soak clients did not connect\n");
        return 1;
    }
    FILE *csv = fopen(argv[1], "w");
    if (!csv) {
        perror(argv[1]);
        return 1;
    }
    fprintf(csv, "seconds,cycles");
    for (int c = 0; c < NCOLS; c++) fprintf(csv, ",%s_%s", proc_name[c % NPROC], c < NPROC ? "rss_kb" : "fds");
    fprintf(csv, ",bytes_used,free_extents,fragmentation_max,held_extents\n");
    uint64_t t0 = mono_ms();
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, d_run, &d[i]);
    sample(csv, t0, d);
    uint64_t next = t0 + interval * 1000ull;
    while (__atomic_load_n(&d[0].done, __ATOMIC_RELAXED) + __atomic_load_n(&d[1].done, __ATOMIC_RELAXED) < cycles &&
           !atomic_load(&failed)) {
        usleep(100 * 1000);
        if (mono_ms() >= next) {
            sample(csv, t0, d);
            next += interval * 1000ull;
        }
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    sample(csv, t0, d);
    fclose(csv);
    double secs = (double)(mono_ms() - t0) / 1000.0;
    uint64_t done = d[0].done + d[1].done;
    printf("# soak: %llu of %llu cycles in %.0f s (%.0f/s), %u samples\n", (unsigned long long)done,
           (unsigned long long)cycles, secs, (double)done / secs, nsamples);
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        bad |= d[i].errors != 0;
        if (d[i].errors) printf("not ok - soak %s: %llu errors, first: %s\n", d[i].lib ? "libmoonkv" : "gateway",
                                (unsigned long long)d[i].errors, d[i].first_error);
        else printf("ok - soak %s: every cycle exact\n", d[i].lib ? "libmoonkv" : "gateway");
    }
    if (nsamples < 4) printf("# too few samples to judge flatness (run longer or lower MKV_SOAK_INTERVAL_S)\n");
    else
        for (int c = 0; c < NCOLS; c++)   /* the driver's RSS follows glibc's 1 MiB reply buffers: shown, not judged */
            if (c != P_DRIVER) bad |= !judge_column(c);
    redisFree(adm);
    h_stop_all();
    return bad;
}
