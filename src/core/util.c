/* core/util.c - see util.h. */
#include "core/util.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static void oom(size_t n) {
    log_warning("out of memory allocating %zu bytes: aborting", n);
    abort();
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) oom(n * sz);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

#define HUGE_PAGE (2u << 20)

static size_t huge_len(size_t n) { return (n + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1); }

void *xhuge_alloc(size_t n) {
    if (n < HUGE_PAGE) return xcalloc(1, n);
    void *p = mmap(NULL, huge_len(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) oom(n);
    (void)madvise(p, huge_len(n), MADV_HUGEPAGE);   /* a hint: without THP, plain pages */
    return p;
}

void *xhuge_realloc(void *p, size_t old, size_t n) {
    if (!p) return xhuge_alloc(n);
    if (old < HUGE_PAGE && n < HUGE_PAGE) return xrealloc(p, n);
    if (old >= HUGE_PAGE && n >= HUGE_PAGE) {
        void *q = mremap(p, huge_len(old), huge_len(n), MREMAP_MAYMOVE);
        if (q == MAP_FAILED) oom(n);
        return q;
    }
    void *q = xhuge_alloc(n);   /* crossing the threshold: copy */
    memcpy(q, p, old < n ? old : n);
    xhuge_free(p, old);
    return q;
}

void xhuge_free(void *p, size_t n) {
    if (!p) return;
    if (n < HUGE_PAGE) free(p);
    else munmap(p, huge_len(n));
}

char *xstrdup(const char *s) { return xmemdup(s, strlen(s) + 1); }

void *xmemdup(const void *p, size_t n) {
    void *q = xmalloc(n);
    if (n) memcpy(q, p, n);
    return q;
}

static uint64_t clock_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mono_us(void) { return clock_us(CLOCK_MONOTONIC); }
uint64_t mono_ms(void) { return mono_us() / 1000u; }
uint64_t mono_ms_coarse(void) { return clock_us(CLOCK_MONOTONIC_COARSE) / 1000u; }
uint64_t wall_ms(void) { return clock_us(CLOCK_REALTIME) / 1000u; }

int parse_size(const char *s, uint64_t *out) {
    static const struct { const char *unit; uint64_t mul; } units[] = {
        {"", 1}, {"b", 1},
        {"k", 1000ULL}, {"kb", 1ULL << 10}, {"kib", 1ULL << 10},
        {"m", 1000000ULL}, {"mb", 1ULL << 20}, {"mib", 1ULL << 20},
        {"g", 1000000000ULL}, {"gb", 1ULL << 30}, {"gib", 1ULL << 30},
        {"t", 1000000000000ULL}, {"tb", 1ULL << 40}, {"tib", 1ULL << 40},
    };
    if (!s || !isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE) return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(end, units[i].unit) != 0) continue;
        if (units[i].mul != 0 && v > UINT64_MAX / units[i].mul) return -1;
        *out = (uint64_t)v * units[i].mul;
        return 0;
    }
    return -1;
}

int parse_hostport(const char *s, char *host, size_t hostlen, int *port) {
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s) return -1;
    size_t hl = (size_t)(colon - s);
    if (hl >= hostlen) return -1;
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p <= 0 || p > 65535) return -1;
    memcpy(host, s, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

int strieq_len(const char *a, size_t alen, const char *b) {
    size_t bl = strlen(b);
    return alen == bl && strncasecmp(a, b, alen) == 0;
}

static int hex_nibble(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if ((ch | 32) >= 'a' && (ch | 32) <= 'f') return (ch | 32) - 'a' + 10;
    return -1;
}

int hex_decode(const char *s, size_t len, uint8_t *out, size_t outlen) {
    if (len != 2 * outlen) return -1;
    for (size_t i = 0; i < outlen; i++) {
        int hi = hex_nibble(s[2 * i]), lo = hex_nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

size_t u64_decimal(uint64_t v, char out[21]) {
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

void hex_encode(const uint8_t *p, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = 0;
}
