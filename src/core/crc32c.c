/* core/crc32c.c - CRC32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Three paths over one "raw" register (no pre/post inversion inside, so
 * the update is linear and pieces can be combined):
 *   - slicing-by-8 tables: 8 bytes per step, portable;
 *   - SSE4.2 crc32 instruction: 8 bytes per step;
 *   - for large buffers, three independent hardware streams over adjacent
 *     blocks, merged with precomputed "append N zero bytes" tables. The
 *     instruction has a 3-cycle latency but 1-cycle throughput, so three
 *     streams keep the unit busy.
 * crc32c_copy runs the same three streams while it copies, so a transfer
 * checksums its bytes on the way through (one read of the source).
 * Where the CPU has VPCLMULQDQ (crc32c_fold.h), buffers of FOLD_MIN bytes
 * or more are folded by carry-less multiplies instead, copy or not: the
 * crc32 unit alone ran a pass over memory not in cache at 0.6x a memcpy
 * of it, the folding at 0.9-1.1x. Copies of STREAM_MIN bytes or more
 * store streaming (a transfer's destination is rarely in cache).
 * crc32c_combine uses the same zero-append operator, as powers of two of
 * a 32x32 GF(2) matrix built once. crc32c_parallel splits a large buffer
 * over a workpool and combines the parts. */
#include "core/crc32c.h"

#include <string.h>

#include "core/crc32c_fold.h"
#include "core/workpool.h"

#define POLY 0x82F63B78u
#define STREAM_BLOCK 4096   /* bytes per stream per round of the 3-way loop */
#define FOLD_MIN 1024       /* from here on the folding pays its set-up */
#define STREAM_MIN (256u << 10)   /* copies this large store streaming (crc32c_fold.h) */

static uint32_t slice_tab[8][256];
/* shift_tab[s][k][b]: the register b << 8k advanced over s+1 blocks of zeros */
static uint32_t shift_tab[2][4][256];
static int use_hw;
#if defined(__x86_64__)
static int use_fold;
#endif

/* ---- GF(2) matrices: mat[i] is the image of register bit i ---- */

static uint32_t gf2_times(const uint32_t mat[32], uint32_t vec) {
    uint32_t sum = 0;
    for (int i = 0; vec; i++, vec >>= 1)
        if (vec & 1) sum ^= mat[i];
    return sum;
}

/* out = a after b (out may alias neither). */
static void gf2_compose(uint32_t out[32], const uint32_t a[32], const uint32_t b[32]) {
    for (int i = 0; i < 32; i++) out[i] = gf2_times(a, b[i]);
}

/* zeros_pow[k]: the operator that feeds 2^k zero bytes through the raw
 * register, built once by repeated squaring; any length is a product of
 * these, applied to the register one set bit at a time (cheap: no matrix
 * products per call). */
static uint32_t zeros_pow[64][32];

static void zeros_pow_init(void) {
    uint32_t sq[32], tmp[32];
    /* One zero bit: shift right, fold the polynomial in if bit 0 fell out. */
    sq[0] = POLY;
    for (int i = 1; i < 32; i++) sq[i] = 1u << (i - 1);
    for (int i = 0; i < 3; i++) {          /* 2, 4, 8 bits: one byte */
        gf2_compose(tmp, sq, sq);
        memcpy(sq, tmp, sizeof sq);
    }
    for (int k = 0; k < 64; k++) {
        memcpy(zeros_pow[k], sq, sizeof sq);
        gf2_compose(tmp, sq, sq);
        memcpy(sq, tmp, sizeof sq);
    }
}

/* The raw register c after nbytes zero bytes. */
static uint32_t feed_zeros(uint32_t c, uint64_t nbytes) {
    for (int k = 0; nbytes; k++, nbytes >>= 1)
        if (nbytes & 1) c = gf2_times(zeros_pow[k], c);
    return c;
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    /* crc(A||B) = zeros(|B|)(crc(A)) ^ crc(B): the ~0 start of B's own
     * checksum stands in for the final inversion of A, so they cancel. */
    return feed_zeros(crc_a, len_b) ^ crc_b;
}

/* ---- software: slicing-by-8 ---- */

static uint32_t sw_update(uint32_t c, const uint8_t *p, size_t len) {
    while (len && ((uintptr_t)p & 7)) {
        c = slice_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        len--;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint32_t lo = (uint32_t)w ^ c, hi = (uint32_t)(w >> 32);
        c = slice_tab[7][lo & 0xff] ^ slice_tab[6][(lo >> 8) & 0xff] ^
            slice_tab[5][(lo >> 16) & 0xff] ^ slice_tab[4][lo >> 24] ^
            slice_tab[3][hi & 0xff] ^ slice_tab[2][(hi >> 8) & 0xff] ^
            slice_tab[1][(hi >> 16) & 0xff] ^ slice_tab[0][hi >> 24];
    }
#endif
    while (len--) c = slice_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

/* ---- hardware: SSE4.2 ---- */

#if defined(__x86_64__)
#include <nmmintrin.h>
#include <xmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t hw_run(uint32_t c, const uint8_t *p, size_t len) {
    uint64_t c64 = c;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
    }
    c = (uint32_t)c64;
    while (len--) c = _mm_crc32_u8(c, *p++);
    return c;
}

static uint32_t shift_blocks(uint32_t c, int nblocks) {
    const uint32_t (*t)[256] = shift_tab[nblocks - 1];
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t hw_update(uint32_t c, const uint8_t *p, size_t len) {
    size_t head = (8 - ((uintptr_t)p & 7)) & 7;
    if (head > len) head = len;
    c = hw_run(c, p, head);
    p += head;
    len -= head;

    while (len >= 3 * STREAM_BLOCK) {
        uint64_t c0 = c, c1 = 0, c2 = 0;
        const uint8_t *p1 = p + STREAM_BLOCK, *p2 = p + 2 * STREAM_BLOCK;
        for (size_t i = 0; i < STREAM_BLOCK; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p1 + i, 8);
            memcpy(&w2, p2 + i, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c = shift_blocks((uint32_t)c0, 2) ^ shift_blocks((uint32_t)c1, 1) ^ (uint32_t)c2;
        p += 3 * STREAM_BLOCK;
        len -= 3 * STREAM_BLOCK;
    }
    return hw_run(c, p, len);
}

/* ---- fused copy and checksum: one pass over the bytes ---- */

/* 64 bytes of one stream: four 16-byte loads, each stored and its two
 * words fed to the register (plain stores: see crc32c_fold.h). */
__attribute__((target("sse4.2")))
static inline uint64_t copy_crc_line(uint64_t c, uint8_t *d, const uint8_t *s) {
    for (int k = 0; k < 64; k += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + k));
        _mm_storeu_si128((__m128i *)(void *)(d + k), v);
        c = _mm_crc32_u64(c, (uint64_t)_mm_cvtsi128_si64(v));
        c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(v, 1));
    }
    return c;
}

/* Three streams over adjacent blocks, as in hw_update, storing what they
 * load. */
__attribute__((target("sse4.2")))
static uint32_t hw_copy_blocks(uint32_t c, uint8_t *d, const uint8_t *s, size_t *lenp) {
    size_t len = *lenp;
    while (len >= 3 * STREAM_BLOCK) {
        uint64_t c0 = c, c1 = 0, c2 = 0;
        for (size_t i = 0; i < STREAM_BLOCK; i += 64) {
            c0 = copy_crc_line(c0, d + i, s + i);
            c1 = copy_crc_line(c1, d + STREAM_BLOCK + i, s + STREAM_BLOCK + i);
            c2 = copy_crc_line(c2, d + 2 * STREAM_BLOCK + i, s + 2 * STREAM_BLOCK + i);
        }
        c = shift_blocks((uint32_t)c0, 2) ^ shift_blocks((uint32_t)c1, 1) ^ (uint32_t)c2;
        d += 3 * STREAM_BLOCK;
        s += 3 * STREAM_BLOCK;
        len -= 3 * STREAM_BLOCK;
    }
    *lenp = len;
    return c;
}

__attribute__((target("sse4.2")))
static uint32_t hw_copy_update(uint32_t c, uint8_t *d, const uint8_t *s, size_t len) {
    size_t rest = len;
    c = hw_copy_blocks(c, d, s, &rest);
    d += len - rest;
    s += len - rest;
    memcpy(d, s, rest);
    return hw_run(c, s, rest);
}

/* The whole 256-byte rounds of a long buffer by folding; *len keeps
 * the rest. */
static uint32_t fold_head(uint32_t c, uint8_t *dst, const uint8_t *src, size_t *len) {
    size_t whole = *len & ~(size_t)(CRC32C_FOLD_BLOCK - 1);
    *len -= whole;
    return crc32c_fold(c, dst, src, whole);
}
#endif

#if defined(__x86_64__)
/* A large copy: plain up to dst's next 64-byte line, streamed from there,
 * unfenced; next as crc32c_fold_stream's. */
static uint32_t copy_streamed(uint32_t c, uint8_t *dst, const uint8_t *src, size_t len, const uint8_t *next) {
    size_t head = (64 - ((uintptr_t)dst & 63)) & 63;
    c = hw_copy_update(c, dst, src, head);
    size_t rest = len - head, whole = rest & ~(size_t)(CRC32C_FOLD_BLOCK - 1);
    c = crc32c_fold_stream(c, dst + head, src + head, whole, rest > whole ? NULL : next);
    return hw_copy_update(c, dst + head + whole, src + head + whole, rest - whole);
}
#endif

uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len) {
#if defined(__x86_64__)
    if (use_fold && len >= STREAM_MIN) {
        uint32_t c = ~copy_streamed(~crc, dst, src, len, NULL);
        _mm_sfence();   /* the streamed stores visible before the caller publishes them */
        return c;
    }
    if (use_fold && len >= FOLD_MIN) {
        size_t rest = len;
        uint32_t c = fold_head(~crc, dst, src, &rest);
        return ~hw_copy_update(c, (uint8_t *)dst + (len - rest), (const uint8_t *)src + (len - rest), rest);
    }
    if (use_hw) return ~hw_copy_update(~crc, dst, src, len);
#endif
    memcpy(dst, src, len);
    return crc32c_sw(crc, dst, len);
}

/* run <-> pieces, in order (gather: pieces into run), the register carried
 * across; pieces of FOLD_MIN up streamed, each prefetching the next
 * piece's source, one fence after the last. */
static uint32_t copy_pieces(uint32_t crc, uint8_t *run, const struct iovec *iov, int n, int gather) {
#if defined(__x86_64__)
    if (use_fold) {
        uint32_t c = ~crc;
        for (int i = 0; i < n; i++) {
            uint8_t *piece = iov[i].iov_base;
            size_t len = iov[i].iov_len;
            const uint8_t *next = gather ? (i + 1 < n ? iov[i + 1].iov_base : NULL) : run + len;
            if (len < FOLD_MIN) c = gather ? hw_copy_update(c, run, piece, len) : hw_copy_update(c, piece, run, len);
            else c = gather ? copy_streamed(c, run, piece, len, next) : copy_streamed(c, piece, run, len, next);
            run += len;
        }
        _mm_sfence();
        return ~c;
    }
#endif
    for (int i = 0; i < n; i++) {
        uint8_t *piece = iov[i].iov_base;
        crc = gather ? crc32c_copy(crc, run, piece, iov[i].iov_len) : crc32c_copy(crc, piece, run, iov[i].iov_len);
        run += iov[i].iov_len;
    }
    return crc;
}

uint32_t crc32c_sumv(uint32_t crc, const struct iovec *iov, int n) {
#if defined(__x86_64__)
    if (use_fold) {
        uint32_t c = ~crc;
        for (int i = 0; i < n; i++) {
            const uint8_t *p = iov[i].iov_base, *next = i + 1 < n ? iov[i + 1].iov_base : p + iov[i].iov_len;
            size_t len = iov[i].iov_len, whole = len >= FOLD_MIN ? len & ~(size_t)(CRC32C_FOLD_BLOCK - 1) : 0;
            if (whole) c = crc32c_fold_ahead(c, p, whole, whole < len ? p + whole : next);
            c = hw_update(c, p + whole, len - whole);
        }
        return ~c;
    }
#endif
    for (int i = 0; i < n; i++) crc = crc32c(crc, iov[i].iov_base, iov[i].iov_len);
    return crc;
}

uint32_t crc32c_copy_gather(uint32_t crc, void *dst, const struct iovec *src, int n) {
    return copy_pieces(crc, dst, src, n, 1);
}

uint32_t crc32c_copy_scatter(uint32_t crc, const struct iovec *dst, int n, const void *src) {
    return copy_pieces(crc, (uint8_t *)src, dst, n, 0);
}

__attribute__((constructor))
static void crc32c_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        slice_tab[0][n] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int n = 0; n < 256; n++)
            slice_tab[k][n] = (slice_tab[k - 1][n] >> 8) ^ slice_tab[0][slice_tab[k - 1][n] & 0xff];

    zeros_pow_init();
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 4; k++)
            for (uint32_t b = 0; b < 256; b++)
                shift_tab[s][k][b] = feed_zeros(b << (8 * k), (uint64_t)(s + 1) * STREAM_BLOCK);
#if defined(__x86_64__)
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
    use_fold = crc32c_fold_init() && use_hw;
#endif
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len) {
    return ~sw_update(~crc, buf, len);
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len) {
#if defined(__x86_64__)
    if (use_fold && len >= FOLD_MIN) {
        size_t rest = len;
        uint32_t c = fold_head(~crc, NULL, buf, &rest);
        return ~hw_update(c, (const uint8_t *)buf + (len - rest), rest);
    }
    if (use_hw) return ~hw_update(~crc, buf, len);
#endif
    return crc32c_sw(crc, buf, len);
}

int crc32c_hw_available(void) {
    return use_hw;
}

/* ---- parallel: parts over a workpool, combined in order ---- */

typedef struct crc_job {
    const uint8_t *buf;
    size_t part, len;
    uint32_t crc[WORKPOOL_MAX_THREADS + 1];
} crc_job;

/* The bytes of the part at off: a full part, the tail, or none. */
static size_t part_len(size_t part, size_t len, size_t off) {
    return off >= len ? 0 : part <= len - off ? part : len - off;
}

static void crc_part(void *arg, int i) {
    crc_job *j = arg;
    size_t off = (size_t)i * j->part;
    j->crc[i] = crc32c(0, j->buf + off, part_len(j->part, j->len, off));
}

uint32_t crc32c_parallel(workpool *wp, const void *buf, size_t len) {
    int n = workpool_width(wp);
    if (len < CRC32C_PARALLEL_MIN || n == 1) return crc32c(0, buf, len);
    crc_job j = { .buf = buf, .len = len, .part = ((len + (size_t)n - 1) / (size_t)n + 63) & ~(size_t)63 };
    workpool_run(wp, n, crc_part, &j);
    uint32_t c = j.crc[0];
    for (int i = 1; i < n; i++) {
        size_t plen = part_len(j.part, len, (size_t)i * j.part);
        if (plen) c = crc32c_combine(c, j.crc[i], plen);
    }
    return c;
}
