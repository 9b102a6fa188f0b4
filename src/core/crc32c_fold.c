/* core/crc32c_fold.c - see crc32c_fold.h.
 *
 * The bits of a reflected CRC: a 16-byte chunk loaded little-endian has
 * bit k standing for x^(127-k) of its part of the message. A chunk A
 * followed by D more bits of message counts as A * x^D, so it may be
 * replaced by anything congruent to A * x^D mod P and XORed into the
 * chunk D bits on. Split A = H * x^64 + L (H in the low quadword) and
 * multiply each half by a 32-bit constant: H * (x^(64+D) mod P) and
 * L * (x^D mod P) both fit in 128 bits. A carry-less multiply of such
 * reflected operands yields the product times x^33 when the constant
 * sits in the low 32 bits of its quadword the way CRC registers hold
 * polynomials (bit 31-d for x^d), hence the constants x^(D+31) and
 * x^(D-33). The last chunk, followed by nothing, is turned into the
 * register by two crc32 instructions from zero, which compute exactly
 * chunk * x^32 mod P. */
#include "core/crc32c_fold.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define POLY 0x82F63B78u

/* x^e mod P, bit 31-d standing for x^d. */
static uint32_t xpow_mod(unsigned e) {
    uint32_t r = 0x80000000u;
    while (e--) r = (r >> 1) ^ ((r & 1) ? POLY : 0);
    return r;
}

/* {x^(D+31), x^(D-33)} mod P for a fold over D bits, one quadword each. */
typedef struct fold_k {
    uint64_t hi, lo;
} fold_k;

enum { K_256B, K_192B, K_128B, K_64B, K_48B, K_32B, K_16B, K_COUNT };
static const unsigned k_bytes[K_COUNT] = {256, 192, 128, 64, 48, 32, 16};
static fold_k fold_consts[K_COUNT];

#define FOLD_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

FOLD_TARGET static inline __m512i k512(int i) {
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)fold_consts[i].lo, (long long)fold_consts[i].hi));
}

/* acc carried D bits on (by k), XORed with the data found there. */
FOLD_TARGET static inline __m512i fold512(__m512i acc, __m512i k, __m512i data) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),
                                     _mm512_clmulepi64_epi128(acc, k, 0x11), data, 0x96);
}

FOLD_TARGET static inline __m128i fold128(__m128i acc, int ki, __m128i data) {
    __m128i k = _mm_set_epi64x((long long)fold_consts[ki].lo, (long long)fold_consts[ki].hi);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)),
                         data);
}

/* Four accumulators of four lanes, the lanes 16 bytes apart, down to
 * the one 128-bit chunk they are congruent to, then to the register. */
FOLD_TARGET static uint32_t fold_finish(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
    a3 = fold512(a0, k512(K_192B), a3);
    a3 = fold512(a1, k512(K_128B), a3);
    a3 = fold512(a2, k512(K_64B), a3);
    __m128i v = _mm512_extracti32x4_epi32(a3, 3);
    v = fold128(_mm512_extracti32x4_epi32(a3, 0), K_48B, v);
    v = fold128(_mm512_extracti32x4_epi32(a3, 1), K_32B, v);
    v = fold128(_mm512_extracti32x4_epi32(a3, 2), K_16B, v);
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(v));
    return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(v, 1));
}

/* One loop for every use; copy is a constant where it is inlined (0: sum
 * only, 1: plain stores, 2: streaming stores), so no copy of it branches
 * on it. With next (where the caller's source goes on after src + len) it
 * prefetches its source PREFETCH_AHEAD bytes on, into next near its end: a
 * 16 KiB piece of a layer-major arena is a stream the hardware prefetcher
 * has not seen, and the loop's clmul chains fill the reorder window long
 * before its misses are in (32 x 16 KiB pieces 2 MiB apart: 5.3-6.0 ms
 * of CPU a 64 MiB copy without, 2.9-4.4 ms with, the contiguous copy
 * 2.7-5.0 ms; load 10). */
#define PREFETCH_AHEAD 4096
FOLD_TARGET static inline uint32_t fold_loop(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len,
                                             const uint8_t *next, int copy) {
    __m512i v[4], a[4], k = k512(K_256B);
    for (int i = 0; i < 4; i++) {
        a[i] = _mm512_loadu_si512((const void *)(src + 64 * i));
        if (copy == 2) _mm512_stream_si512((void *)(dst + 64 * i), a[i]);
        else if (copy) _mm512_storeu_si512((void *)(dst + 64 * i), a[i]);
    }
    a[0] = _mm512_xor_si512(a[0], _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)reg)));
    for (size_t off = CRC32C_FOLD_BLOCK; off < len; off += CRC32C_FOLD_BLOCK) {
        if (next) {
            size_t ahead = off + PREFETCH_AHEAD;
            const char *pf = (const char *)(ahead < len ? src + ahead : next + (ahead - len));
            for (int i = 0; i < 4; i++) _mm_prefetch(pf + 64 * i, _MM_HINT_T0);
        }
        for (int i = 0; i < 4; i++) v[i] = _mm512_loadu_si512((const void *)(src + off + 64 * i));
        for (int i = 0; i < 4; i++) {
            if (copy == 2) _mm512_stream_si512((void *)(dst + off + 64 * i), v[i]);
            else if (copy) _mm512_storeu_si512((void *)(dst + off + 64 * i), v[i]);
            a[i] = fold512(a[i], k, v[i]);
        }
    }
    return fold_finish(a[0], a[1], a[2], a[3]);
}

FOLD_TARGET static uint32_t fold_sum(uint32_t reg, const uint8_t *src, size_t len) {
    return fold_loop(reg, NULL, src, len, NULL, 0);
}

FOLD_TARGET static uint32_t fold_copy(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len) {
    return fold_loop(reg, dst, src, len, NULL, 1);
}

FOLD_TARGET static uint32_t fold_sum_ahead(uint32_t reg, const uint8_t *src, size_t len, const uint8_t *next) {
    return fold_loop(reg, NULL, src, len, next, 0);
}

FOLD_TARGET static uint32_t fold_copy_stream(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len,
                                             const uint8_t *next) {
    return fold_loop(reg, dst, src, len, next ? next : src + len, 2);
}

uint32_t crc32c_fold(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len) {
    return dst ? fold_copy(reg, dst, src, len) : fold_sum(reg, src, len);
}

uint32_t crc32c_fold_stream(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len, const uint8_t *next) {
    return fold_copy_stream(reg, dst, src, len, next);
}

uint32_t crc32c_fold_ahead(uint32_t reg, const uint8_t *src, size_t len, const uint8_t *next) {
    return fold_sum_ahead(reg, src, len, next);
}

int crc32c_fold_init(void) {
    for (int i = 0; i < K_COUNT; i++) {
        unsigned d = 8 * k_bytes[i];
        fold_consts[i] = (fold_k){ .hi = xpow_mod(d + 31), .lo = xpow_mod(d - 33) };
    }
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("sse4.2");
}
#else
int crc32c_fold_init(void) {
    return 0;
}

uint32_t crc32c_fold(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len) {
    (void)dst, (void)src, (void)len;
    return reg;   /* never called: crc32c_fold_init() said no */
}

uint32_t crc32c_fold_stream(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len, const uint8_t *next) {
    (void)dst, (void)src, (void)len, (void)next;
    return reg;   /* never called either */
}

uint32_t crc32c_fold_ahead(uint32_t reg, const uint8_t *src, size_t len, const uint8_t *next) {
    (void)src, (void)len, (void)next;
    return reg;   /* nor this */
}
#endif
