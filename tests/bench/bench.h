/* bench.h - what the benchmark programs of tests/bench share.
 *
 * Each program prints one line per measurement on stdout, for run.sh:
 *
 *   RESULT <name> <value> <unit>
 *   SKIP <name> <why, rest of the line>
 *
 * and everything meant for people on stderr. Every measuring loop is
 * bounded by a bench_budget: at least `min` rounds, then it stops at
 * `max` rounds or once `seconds` of measured time have passed. */
#ifndef MKV_BENCH_H
#define MKV_BENCH_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static inline void bench_result(const char *name, double value, const char *unit) {
    printf("RESULT %s %.6g %s\n", name, value, unit);
    fflush(stdout);
}

__attribute__((format(printf, 2, 3)))
static inline void bench_skip(const char *name, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    /* The reason ends the line: keep it on one. */
    for (char *p = why; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    printf("SKIP %s %s\n", name, why);
    fflush(stdout);
}

/* A size argument such as "4MiB" or "262144"; exits on a bad one. */
/* The cluster secret the tools that talk to a master prove
 * ($MOONKV_CLUSTER_SECRET, "" when unset: the bench's cluster has none). */
static inline const char *bench_secret(void) {
    const char *s = getenv("MOONKV_CLUSTER_SECRET");
    return s ? s : "";
}

static inline size_t bench_size_arg(const char *s) {
    uint64_t v;
    if (parse_size(s, &v) != 0 || v == 0 || v > ((uint64_t)1 << 40)) {
        fprintf(stderr, "bad size '%s' (want e.g. 64, 1MiB, 4MiB)\n", s);
        exit(2);
    }
    return (size_t)v;
}

/* "64B", "256KiB", "4MiB": the size part of a result name. */
static inline const char *bench_size_name(size_t n, char *buf, size_t len) {
    if (n >= (1u << 20) && n % (1u << 20) == 0) snprintf(buf, len, "%zuMiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0) snprintf(buf, len, "%zuKiB", n >> 10);
    else snprintf(buf, len, "%zuB", n);
    return buf;
}

/* Seconds of measured time per measurement: $BENCH_SECONDS, default 1.5. */
static inline double bench_seconds(void) {
    const char *s = getenv("BENCH_SECONDS");
    double v = s ? atof(s) : 0;
    return v > 0 && v <= 60 ? v : 1.5;
}

typedef struct bench_budget {
    uint64_t rounds;      /* done so far */
    uint64_t spent_us;    /* measured time so far */
    uint64_t best_us;     /* the fastest round's */
    uint64_t min, max;
    uint64_t limit_us;
} bench_budget;

static inline void bench_budget_init(bench_budget *b, uint64_t min, uint64_t max, double seconds) {
    /* A short run ($BENCH_SECONDS under 1) settles for two rounds. */
    if (seconds < 1 && min > 2) min = 2;
    b->rounds = b->spent_us = 0;
    b->best_us = UINT64_MAX;
    b->min = min;
    b->max = max < min ? min : max;
    b->limit_us = (uint64_t)(seconds * 1e6);
}

/* Counts one round of `us` measured microseconds. */
static inline void bench_budget_add(bench_budget *b, uint64_t us) {
    b->rounds++;
    b->spent_us += us;
    if (us < b->best_us) b->best_us = us;
}

static inline int bench_budget_more(const bench_budget *b) {
    if (b->rounds < b->min) return 1;
    return b->rounds < b->max && b->spent_us < b->limit_us;
}

/* Decimal gigabytes per second, like iperf3 and most vendors' sheets. */
static inline double bench_gbps(double bytes, uint64_t us) {
    return us ? bytes / (double)us / 1e3 : 0;
}

static inline int bench_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile (0..100, nearest rank) of v; sorts v. */
static inline uint64_t bench_percentile(uint64_t *v, size_t n, double p) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, bench_cmp_u64);
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}

/* A buffer of n bytes, every page touched, filled with a pattern that
 * no compressor or dedup path can shortcut. */
static inline unsigned char *bench_buffer(size_t n, uint32_t seed) {
    unsigned char *p = NULL;
    if (posix_memalign((void **)&p, 4096, n ? n : 1) != 0) {
        fprintf(stderr, "cannot allocate %zu bytes\n", n);
        exit(1);
    }
    uint64_t x = seed | 1;
    for (size_t i = 0; i < n; i += sizeof x) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(p + i, &x, n - i < sizeof x ? n - i : sizeof x);
    }
    return p;
}

#endif
