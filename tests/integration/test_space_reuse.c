/* Space reused as soon as no lease needs it: put/get/remove churn of 1
 * and 4 MiB objects at full speed, many times the segment's size, with
 * live data never above half of it, sees no NOSPACE, and the master's
 * quarantine (held_extents) stays near the reads in flight.
 *
 * Scaled for CI: a 256 MiB segment for 10 s by default (the ratio of
 * churn to capacity is what matters: tens of segments' worth per run);
 * MOONKV_CHURN_SEGMENT_MB=2048 MOONKV_CHURN_SECONDS=30 for the full size.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER (port0 + 0)
#define PORT_NODE   (port0 + 1)
#define PORT_DATA   (port0 + 2)
#define MIB (1024u * 1024u)
#define THREADS 2
#define RING 512

static uint64_t segment_mb = 256, seconds = 10;
static char *bufs;                 /* per thread: src 4 MiB, dst 4 MiB */

typedef struct worker {
    int id;
    uint64_t puts, gets, nospace, errors, bytes;
    char err[256];
} worker;

static atomic_int running = 1;

static void *churn(void *arg) {
    worker *w = arg;
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    mkv_client *c = NULL;
    char *src = bufs + (size_t)w->id * 8 * MIB, *dst = src + 4 * MIB;
    if (h_mkv_connect_ms(&c, master, NULL, 0, 5000) != MKV_OK || mkv_register_buffer(c, src, 8 * MIB) != MKV_OK) {
        snprintf(w->err, sizeof w->err, "connect: %s", mkv_last_error(c));
        w->errors++;
        mkv_close(c);
        return NULL;
    }
    h_fill(src, 4 * MIB, (uint64_t)w->id + 1);
    uint64_t limit = segment_mb * MIB / 2 / THREADS, live = 0, seq = 0, oldest = 0;
    size_t sizes[RING];
    char key[48];
    while (atomic_load(&running)) {
        size_t len = (seq % 3 == 0 ? 4 : 1) * MIB;
        while (live + len > limit) {   /* remove the oldest until the new one fits */
            snprintf(key, sizeof key, "w%d:%llu", w->id, (unsigned long long)oldest);
            if (mkv_remove(c, key, strlen(key)) != MKV_OK) w->errors++;
            live -= sizes[oldest % RING];
            oldest++;
        }
        snprintf(key, sizeof key, "w%d:%llu", w->id, (unsigned long long)seq);
        int rc = mkv_put(c, key, strlen(key), src, len, 1);
        if (rc == MKV_ENOSPACE) { w->nospace++; continue; }
        if (rc != MKV_OK) {
            snprintf(w->err, sizeof w->err, "put: %s", mkv_last_error(c));
            w->errors++;
            break;
        }
        w->puts++;
        sizes[seq % RING] = len;
        live += len;
        seq++;
        size_t got = 0;
        if (mkv_get(c, key, strlen(key), dst, 4 * MIB, &got) != MKV_OK || got != len ||
            memcmp(src, dst, len) != 0) {
            snprintf(w->err, sizeof w->err, "get %s: %s", key, mkv_last_error(c));
            w->errors++;
            break;
        }
        w->gets++;
        w->bytes += len;
        if (seq - oldest >= RING) {   /* never more keys live than the ring holds */
            snprintf(key, sizeof key, "w%d:%llu", w->id, (unsigned long long)oldest);
            mkv_remove(c, key, strlen(key));
            live -= sizes[oldest % RING];
            oldest++;
        }
    }
    for (; oldest < seq; oldest++) {
        snprintf(key, sizeof key, "w%d:%llu", w->id, (unsigned long long)oldest);
        mkv_remove(c, key, strlen(key));
    }
    mkv_close(c);
    return NULL;
}

static void test_churn_no_nospace(void) {
    redisContext *m = h_proven(h_redis(PORT_MASTER), "");
    ASSERT(m);
    worker w[THREADS];
    pthread_t th[THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        pthread_create(&th[i], NULL, churn, &w[i]);
    }
    uint64_t end = wall_ms() + seconds * 1000;
    long long max_held = 0;
    while (wall_ms() < end) {
        usleep(100 * 1000);
        long long h = h_info_field(m, "cluster", "held_extents");
        if (h > max_held) max_held = h;
    }
    atomic_store(&running, 0);
    uint64_t puts = 0, nospace = 0, errors = 0, bytes = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        puts += w[i].puts;
        nospace += w[i].nospace;
        errors += w[i].errors;
        bytes += w[i].bytes;
        if (w[i].err[0]) printf("# worker %d: %s\n", i, w[i].err);
    }
    long long held_after = h_info_field(m, "cluster", "held_extents"), used = h_info_field(m, "cluster", "bytes_used");
    printf("# %llu MiB segment, %llu s: %llu puts, %.1f segments of churn, %llu NOSPACE, "
           "max held_extents %lld, after %lld, bytes_used after %lld\n",
           (unsigned long long)segment_mb, (unsigned long long)seconds, (unsigned long long)puts,
           (double)bytes / (double)(segment_mb * MIB), (unsigned long long)nospace, max_held,
           held_after, used);
    ASSERT_EQ(errors, 0);
    ASSERT_EQ(nospace, 0);
    ASSERT(bytes > 4 * segment_mb * MIB);   /* the old 30 s hold would have run out */
    ASSERT(max_held <= 2 * THREADS);        /* only reads in flight pin space */
    ASSERT_EQ(held_after, 0);
    ASSERT_EQ(used, 0);
    redisFree(m);
}

/* A batch get of more objects than one MOON.RELEASE carries gives every
 * lease back: removing them all leaves nothing held. */
static void test_batch_leases_all_returned(void) {
    enum { N = 5000, SIZE = 2048 };   /* more leases than one MOON.RELEASE carries (4096) */
    redisContext *m = h_proven(h_redis(PORT_MASTER), "");
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", PORT_MASTER);
    mkv_client *c = NULL;
    ASSERT(m && h_mkv_connect(&c, master, NULL, 0) == MKV_OK);
    char *buf = bufs;   /* 8 MiB of the first worker's, idle now */
    ASSERT_EQ(mkv_register_buffer(c, buf, (size_t)N * SIZE), MKV_OK);
    mkv_obj *objs = calloc(N, sizeof *objs);
    char (*keys)[24] = calloc(N, sizeof *keys);
    for (int i = 0; i < N; i++) {
        int n = snprintf(keys[i], sizeof keys[i], "lease:%d", i);
        objs[i] = (mkv_obj){.key = keys[i], .keylen = (size_t)n, .buf = buf + (size_t)i * SIZE, .len = SIZE};
    }
    ASSERT_EQ(mkv_put_batch(c, objs, N, 1), MKV_OK);
    ASSERT_EQ(mkv_get_batch(c, objs, N), MKV_OK);
    for (int i = 0; i < N; i++) ASSERT_EQ(objs[i].status, MKV_OK);
    for (int i = 0; i < N; i++) ASSERT_EQ(mkv_remove(c, keys[i], strlen(keys[i])), MKV_OK);
    long long held = h_info_field(m, "cluster", "held_extents"), used = h_info_field(m, "cluster", "bytes_used");
    printf("# %d leases of one batch get: held_extents %lld, bytes_used %lld after removing all\n", N,
           held, used);
    ASSERT_EQ(held, 0);
    ASSERT_EQ(used, 0);
    free(objs);
    free(keys);
    mkv_close(c);
    redisFree(m);
}

int main(void) {
    segment_mb = h_env_at_least("MOONKV_CHURN_SEGMENT_MB", 64, segment_mb);
    seconds = h_env_at_least("MOONKV_CHURN_SECONDS", 1, seconds);
    h_init((unsigned)(seconds + 90));
    h_setup_or_exit(port0 = h_free_ports(3), "free ports");
    const char *mflags[] = {"--heartbeat-ms", "200", NULL};
    char seg[32];
    snprintf(seg, sizeof seg, "%lluMB", (unsigned long long)segment_mb);
    if (h_start_master(PORT_MASTER, mflags) < 0 ||
        h_start_node(PORT_MASTER, PORT_NODE, PORT_DATA, seg) < 0 ||
        h_wait_nodes(PORT_MASTER, "alive", 1, 20000) != 0) {
        printf("not ok - cluster did not start\n");
        return 1;
    }
    bufs = mmap(NULL, THREADS * 8 * (size_t)MIB, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bufs == MAP_FAILED) {
        printf("not ok - mmap\n");
        return 1;
    }
    RUN_TEST(test_churn_no_nospace);
    RUN_TEST(test_batch_leases_all_returned);
    TEST_EXIT();
}
