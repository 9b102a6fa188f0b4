/* bench_disk DIR - the node's disk tier store (src/node/disk_store.c) on
 * this machine's disk, for run.sh step 10 (tests/bench/disk.sh), which
 * runs fio with O_DIRECT on a file in the same DIR as the reference.
 *
 * For 1 MiB and 4 MiB values: BENCH_DISK_JOBS threads (the queue depth
 * fio gets) put BENCH_DISK_MB of values into a new file (write_fresh),
 * remove them and put them again (write: the blocks are now written, as
 * in a tier in use), then read them all back, each read CRC-checked
 * (fio's read is in order too); GB/s of each. A thread takes the next
 * value as it finishes one (fio keeps its depth to the end). Then one thread
 * reads 1 MiB values one at a time: p50 and p99 of a read's latency.
 * Last, the 4 MiB values' file is opened again as a restarted node does
 * (every record found and its CRC32C proved): GB/s of that scan (the
 * open's fixed cost, staging and rings, is logged beside it).
 * The values are aligned buffers (what a node's segment is), so they go
 * to the disk straight; BENCH_DISK_IO=plain measures the fallback. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "core/crc32c.h"
#include "node/disk_store.h"

/* The values a pass has not handed out yet: each thread takes the next
 * as it finishes one, so the depth stays at the thread count until the
 * last few (what fio's depth is). Thread t taking every jobs-th value
 * kept the depth only until the first thread finished: on this VM the
 * rings' requests are not served evenly, and the first of 4 threads
 * finished at 40-60 % of a 4 MiB write pass (the rest ran at depth 3, 2,
 * 1). */
typedef struct work {
    int next, count;
} work;

typedef struct job {
    disk_store *ds;
    work *w;
    size_t size;
    int write, errors;
    uint8_t *buf;
    uint32_t crc;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    char key[32];
    for (;;) {
        int k = __atomic_fetch_add(&j->w->next, 1, __ATOMIC_RELAXED);
        if (k >= j->w->count) break;
        snprintf(key, sizeof key, "v%d", k);
        uint64_t n;
        int rc = j->write ? disk_store_put(j->ds, key, strlen(key), j->buf, j->size, j->crc)
                          : disk_store_read(j->ds, key, strlen(key), j->buf, j->size, &n);
        if (rc != 0) j->errors++;
    }
    return NULL;
}

/* GB/s of nobj values of size put (write) or read by jobs threads. */
static double pass(disk_store *ds, size_t size, int nobj, int jobs, int write, int *errors) {
    pthread_t th[64];
    job js[64];
    work w = { 0, nobj / jobs * jobs };
    /* Buffers made and touched before the clock starts (a first touch of
     * each page costs this VM about 30 us). */
    for (int t = 0; t < jobs; t++) {
        js[t] = (job){ .ds = ds, .w = &w, .size = size, .write = write };
        if (posix_memalign((void **)&js[t].buf, 4096, size) != 0) exit(1);
        memset(js[t].buf, 0x5a + t, size);
        js[t].crc = crc32c(0, js[t].buf, size);
    }
    uint64_t t0 = mono_us();
    for (int t = 0; t < jobs; t++) pthread_create(&th[t], NULL, run_job, &js[t]);
    for (int t = 0; t < jobs; t++) {
        pthread_join(th[t], NULL);
        *errors += js[t].errors;
        free(js[t].buf);
    }
    double s = (double)(mono_us() - t0) / 1e6;
    return (double)size * (nobj / jobs * jobs) / s / 1e9;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void latency(disk_store *ds, int nobj) {
    uint8_t *buf;
    if (posix_memalign((void **)&buf, 4096, 1u << 20) != 0) exit(1);
    memset(buf, 0, 1u << 20);
    int n = nobj < 400 ? nobj : 400;
    uint64_t *us = calloc((size_t)n, sizeof *us);
    char key[32];
    int errors = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "v%d", (int)((i * 7919u) % (unsigned)nobj));
        uint64_t len, t0 = mono_us();
        if (disk_store_read(ds, key, strlen(key), buf, 1u << 20, &len) != 0) errors++;
        us[i] = mono_us() - t0;
    }
    qsort(us, (size_t)n, sizeof *us, cmp_u64);
    if (errors) bench_skip("get_lat_1MiB", "%d reads failed", errors);
    else {
        bench_result("get_p50_1MiB", (double)us[n / 2], "us");
        bench_result("get_p99_1MiB", (double)us[(n * 99) / 100], "us");
    }
    free(us);
    free(buf);
}

/* A restart: the file opened again, every record found and proved;
 * GB/s of the scan (what a node's restart spends on its disk). */
static disk_store *reopen(disk_store *ds, const disk_store_config *c, int nobj) {
    disk_store_close(ds, 0);
    char err[256];
    uint64_t t0 = mono_us();
    ds = disk_store_open(c, err, sizeof err);
    double s = (double)(mono_us() - t0) / 1e6;
    if (!ds) {
        bench_skip("scan", "%s", err);
        exit(1);
    }
    disk_store_stats st;
    disk_store_get_stats(ds, &st);
    if ((int)st.recovered != nobj)
        bench_skip("scan", "%llu of %d records back", (unsigned long long)st.recovered, nobj);
    else bench_result("scan", st.scan_ms ? (double)st.scan_bytes / (double)st.scan_ms / 1e6 : 0, "GB/s");
    fprintf(stderr, "bench_disk: reopened in %.3f s, of which the scan %llu ms (%llu bytes)\n", s,
            (unsigned long long)st.scan_ms, (unsigned long long)st.scan_bytes);
    return ds;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: bench_disk DIR\n"); return 2; }
    int jobs = getenv("BENCH_DISK_JOBS") ? atoi(getenv("BENCH_DISK_JOBS")) : 4;
    uint64_t mb = getenv("BENCH_DISK_MB") ? strtoull(getenv("BENCH_DISK_MB"), NULL, 10) : 512;
    disk_io_kind io = DISK_IO_AUTO;
    if (getenv("BENCH_DISK_IO")) disk_io_parse(getenv("BENCH_DISK_IO"), &io);
    if (jobs < 1 || jobs > 64) jobs = 4;
    size_t sizes[] = { 1u << 20, 4u << 20 };
    for (int s = 0; s < 2; s++) {
        size_t size = sizes[s];
        disk_store_config c = { .dir = argv[1], .name = "bench.disk", .size = (mb + 64) << 20, .io = io, .tag = 1 };
        char err[256], nm[64], sn[32];
        disk_store *ds = disk_store_open(&c, err, sizeof err);
        bench_size_name(size, sn, sizeof sn);
        if (!ds) {
            snprintf(nm, sizeof nm, "write_%s", sn);
            bench_skip(nm, "%s", err);
            continue;
        }
        int nobj = (int)((mb << 20) / size), errors = 0;
        /* The first pass writes blocks the file system has only
         * allocated (unwritten extents: about half the speed on ext4);
         * the second overwrites them, as a tier in use does. */
        double fresh = pass(ds, size, nobj, jobs, 1, &errors);
        char key[32];
        for (int i = 0; i < nobj; i++) {
            snprintf(key, sizeof key, "v%d", i);
            disk_store_remove(ds, key, strlen(key));
        }
        double w = pass(ds, size, nobj, jobs, 1, &errors);
        double r = pass(ds, size, nobj, jobs, 0, &errors);
        snprintf(nm, sizeof nm, "write_%s", sn);
        if (errors) bench_skip(nm, "%d puts or reads failed", errors);
        else {
            bench_result(nm, w, "GB/s");
            snprintf(nm, sizeof nm, "write_fresh_%s", sn);
            bench_result(nm, fresh, "GB/s");
            snprintf(nm, sizeof nm, "read_%s", sn);
            bench_result(nm, r, "GB/s");
        }
        if (s == 0) latency(ds, nobj);
        fprintf(stderr, "bench_disk: %s, %s I/O\n", sn, disk_store_io_name(ds));
        if (s == 1) ds = reopen(ds, &c, nobj);
        disk_store_close(ds, 1);
    }
    return 0;
}
