/* bench_disk_zipf - step 10's KV workload over the disk tier
 * (tests/bench/disk.sh, docs/SSD_TIER.md):
 *
 *   bench_disk_zipf MASTER TAG [KEYS VALUE_BYTES READS]
 *
 * against a cluster run.sh started (one node; with or without its disk
 * tier and the master's offload flags). First LAT_KEYS objects of 1 MiB
 * are put (they become the coldest), then KEYS objects of VALUE_BYTES
 * once each (a NOSPACE is counted, not retried: without the tier the
 * store holds what fits); then READS gets in a Zipf order (s = 0.99,
 * ranks over a fixed shuffle of the keys), in batches of ZIPF_BATCH
 * (mkv_get_batch): the hit rate (byte-exact answers over reads) and the
 * GB/s of the bytes hit. With the tier, the 1 MiB keys (on disk by
 * then) are read one at a time, twice: with --disk-promote-after 2 the
 * first read comes straight from the node's disk (TAG.get_*), the second
 * promotes (a load into DRAM, then the read: TAG.load_*); p50, p99 and
 * the GB/s of one get at a time. These only with BENCH_ZIPF_PAR=1 (a
 * run with the tier: without one the PAR_KEYS would leave no DRAM for
 * the Zipf keys), which also puts PAR_KEYS more 1 MiB keys after the
 * first ones and, between the two passes (before the promotes' loads
 * make offloads), reads them PAR_DEPTH at a time (mkv_get_batch), each
 * from the disk: TAG.get_par_gbps_1MiB.
 * Results: TAG.hit_pct, TAG.gbps, TAG.put_nospace, TAG.get_p50_1MiB,
 * TAG.get_p99_1MiB, TAG.get_gbps_1MiB, TAG.load_p50_1MiB,
 * TAG.load_p99_1MiB, TAG.get_par_gbps_1MiB. */
#include <math.h>
#include <unistd.h>

#include "bench.h"
#include "client/moonkv.h"

#define LAT_KEYS   48
#define PAR_KEYS   48
#define PAR_DEPTH  4          /* fio's read rows' depth (disk.sh DISK_JOBS) */
#define LAT_BYTES  (1u << 20)
#define ZIPF_BATCH 8
#define ZIPF_S     0.99

static void fill(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

/* cdf[i]: probability of ranks 0..i (Zipf, exponent ZIPF_S). */
static double *zipf_cdf(int n) {
    double *cdf = malloc((size_t)n * sizeof *cdf), sum = 0;
    for (int i = 0; i < n; i++) sum += 1.0 / pow(i + 1, ZIPF_S);
    double acc = 0;
    for (int i = 0; i < n; i++) cdf[i] = (acc += 1.0 / pow(i + 1, ZIPF_S) / sum);
    return cdf;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static int zipf_rank(const double *cdf, int n) {
    double u = uniform();
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] < u) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int put_one(mkv_client *c, const char *key, uint8_t *buf, size_t len, uint64_t seed, int *nospace) {
    fill(buf, len, seed);
    int rc = mkv_put(c, key, strlen(key), buf, len, 1);
    if (rc == MKV_ENOSPACE) (*nospace)++;
    else if (rc != MKV_OK) fprintf(stderr, "put %s: %s\n", key, mkv_last_error(c));
    return rc;
}

/* The 1 MiB keys one at a time (results TAG.WHAT_*): p50, p99, and the
 * GB/s of the bytes over the time of the gets. */
static void latency(mkv_client *c, const char *tag, const char *what, uint8_t *buf, uint8_t *want) {
    uint64_t us[LAT_KEYS], sum = 0;
    int n = 0;
    char key[32], name[64];
    for (int i = 0; i < LAT_KEYS; i++) {
        snprintf(key, sizeof key, "lat%d", i);
        size_t got = 0;
        uint64_t t0 = mono_us();
        int rc = mkv_get(c, key, strlen(key), buf, LAT_BYTES, &got);
        uint64_t dt = mono_us() - t0;
        fill(want, LAT_BYTES, 1000000 + (uint64_t)i);
        if (rc == MKV_OK && got == LAT_BYTES && memcmp(buf, want, LAT_BYTES) == 0) us[n++] = dt, sum += dt;
    }
    if (n < LAT_KEYS / 2) {
        snprintf(name, sizeof name, "%s.%s_p50_1MiB", tag, what);
        bench_skip(name, "only %d of %d gets of 1 MiB from disk came back", n, LAT_KEYS);
        return;
    }
    qsort(us, (size_t)n, sizeof *us, cmp_u64);
    snprintf(name, sizeof name, "%s.%s_p50_1MiB", tag, what);
    bench_result(name, (double)us[n / 2], "us");
    snprintf(name, sizeof name, "%s.%s_p99_1MiB", tag, what);
    bench_result(name, (double)us[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], "us");
    snprintf(name, sizeof name, "%s.%s_gbps_1MiB", tag, what);
    bench_result(name, (double)n * LAT_BYTES / ((double)sum / 1e6) / 1e9, "GB/s");
}

/* The PAR_KEYS keys of 1 MiB, PAR_DEPTH a batch (each read from disk as
 * its first read): the GB/s of the bytes read byte-exact. */
static void parallel(mkv_client *c, const char *tag, uint8_t *buf, uint8_t *want) {
    mkv_obj objs[PAR_DEPTH];
    char names[PAR_DEPTH][32], name[64];
    uint64_t bytes = 0, t0 = mono_us();
    for (int b = 0; b < PAR_KEYS; b += PAR_DEPTH) {
        for (int j = 0; j < PAR_DEPTH; j++) {
            snprintf(names[j], sizeof names[j], "par%d", b + j);
            objs[j] = (mkv_obj){names[j], strlen(names[j]), buf + (size_t)j * LAT_BYTES, LAT_BYTES, 0};
        }
        if (mkv_get_batch(c, objs, PAR_DEPTH) != MKV_OK) continue;
        for (int j = 0; j < PAR_DEPTH; j++) {
            fill(want, LAT_BYTES, 2000000 + (uint64_t)(b + j));
            if (objs[j].status == MKV_OK && objs[j].len == LAT_BYTES &&
                memcmp(buf + (size_t)j * LAT_BYTES, want, LAT_BYTES) == 0)
                bytes += LAT_BYTES;
        }
    }
    double secs = (double)(mono_us() - t0) / 1e6;
    snprintf(name, sizeof name, "%s.get_par_gbps_1MiB", tag);
    if (bytes < (uint64_t)PAR_KEYS / 2 * LAT_BYTES) bench_skip(name, "fewer than half the gets came back");
    else bench_result(name, (double)bytes / secs / 1e9, "GB/s");
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 6) {
        fprintf(stderr, "usage: %s MASTER TAG [KEYS VALUE_BYTES READS]\n", argv[0]);
        return 2;
    }
    const char *tag = argv[2];
    int keys = argc == 6 ? atoi(argv[3]) : 1000, reads = argc == 6 ? atoi(argv[5]) : 3000;
    size_t len = argc == 6 ? bench_size_arg(argv[4]) : 256 * 1024;
    if (keys < 1 || keys > 100000 || reads < 1) return 2;
    mkv_options o;
    mkv_options_init(&o);
    o.master = argv[1];
    o.timeout_ms = 60000;
    mkv_client *c = NULL;
    if (mkv_connect(&c, &o) != MKV_OK) {
        fprintf(stderr, "connect %s failed\n", argv[1]);
        return 1;
    }
    size_t slot = len > LAT_BYTES ? len : LAT_BYTES;   /* ZIPF_BATCH >= PAR_DEPTH of them */
    uint8_t *buf = aligned_alloc(4096, slot * ZIPF_BATCH), *want = aligned_alloc(4096, slot);
    if (!buf || !want || mkv_register_buffer(c, buf, slot * ZIPF_BATCH) != MKV_OK ||
        mkv_register_buffer(c, want, slot) != MKV_OK)
        return 1;
    const char *par_env = getenv("BENCH_ZIPF_PAR");
    int nospace = 0, lat_ok = 0, par = par_env && strcmp(par_env, "1") == 0;
    char key[32], name[64];
    for (int i = 0; i < LAT_KEYS; i++) {
        snprintf(key, sizeof key, "lat%d", i);
        lat_ok += put_one(c, key, want, LAT_BYTES, 1000000 + (uint64_t)i, &nospace) == MKV_OK;
    }
    for (int i = 0; par && i < PAR_KEYS; i++) {   /* only for the run that measures reads from disk */
        snprintf(key, sizeof key, "par%d", i);
        lat_ok += put_one(c, key, want, LAT_BYTES, 2000000 + (uint64_t)i, &nospace) == MKV_OK;
    }
    nospace = 0;
    for (int i = 0; i < keys; i++) {
        snprintf(key, sizeof key, "z%d", i);
        put_one(c, key, want, len, (uint64_t)i, &nospace);
    }
    snprintf(name, sizeof name, "%s.put_nospace", tag);
    bench_result(name, nospace, "puts");
    /* Ranks over a fixed shuffle: the hottest keys are not the first put. */
    int *perm = malloc((size_t)keys * sizeof *perm);
    for (int i = 0; i < keys; i++) perm[i] = i;
    for (int i = keys - 1; i > 0; i--) {
        int j = (int)(uniform() * (i + 1));
        int t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    double *cdf = zipf_cdf(keys);
    mkv_obj objs[ZIPF_BATCH];
    char names[ZIPF_BATCH][32];
    int idx[ZIPF_BATCH];
    uint64_t hits = 0, hit_bytes = 0, t0 = mono_us();
    for (int done = 0; done < reads; done += ZIPF_BATCH) {
        int k = reads - done < ZIPF_BATCH ? reads - done : ZIPF_BATCH;
        for (int j = 0; j < k; j++) {
            idx[j] = perm[zipf_rank(cdf, keys)];
            snprintf(names[j], sizeof names[j], "z%d", idx[j]);
            objs[j] = (mkv_obj){names[j], strlen(names[j]), buf + (size_t)j * slot, len, 0};
        }
        if (mkv_get_batch(c, objs, (size_t)k) != MKV_OK) continue;
        for (int j = 0; j < k; j++) {
            if (objs[j].status != MKV_OK || objs[j].len != len) continue;
            fill(want, len, (uint64_t)idx[j]);
            if (memcmp(buf + (size_t)j * slot, want, len) != 0) {
                fprintf(stderr, "z%d: wrong bytes\n", idx[j]);
                return 1;
            }
            hits++;
            hit_bytes += len;
        }
    }
    double secs = (double)(mono_us() - t0) / 1e6;
    snprintf(name, sizeof name, "%s.hit_pct", tag);
    bench_result(name, 100.0 * (double)hits / reads, "%");
    snprintf(name, sizeof name, "%s.gbps", tag);
    bench_result(name, (double)hit_bytes / secs / 1e9, "GB/s");
    if (par && lat_ok == LAT_KEYS + PAR_KEYS) {
        latency(c, tag, "get", buf, want);    /* the first read of each: from the disk */
        if (par) parallel(c, tag, buf, want);
        latency(c, tag, "load", buf, want);   /* the second: promoted (with --disk-promote-after 2) */
    }
    free(cdf);
    free(perm);
    mkv_close(c);
    free(buf);
    free(want);
    return 0;
}
