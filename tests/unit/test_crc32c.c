/* tests/unit/test_crc32c.c - CRC32C: vectors, hw == sw, combine. */
#include "core/crc32c.h"
#include "core/crc32c_fold.h"
#include "core/workpool.h"
#include "test.h"

#include <stdint.h>

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint8_t rand_byte(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static void fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = rand_byte();
}

static void test_known_vectors(void) {
    ASSERT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
    ASSERT_EQ(crc32c_sw(0, "123456789", 9), 0xE3069283u);
    ASSERT_EQ(crc32c(0, "", 0), 0);
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof ones);
    /* RFC 3720 (iSCSI) B.4 vectors */
    ASSERT_EQ(crc32c(0, zeros, 32), 0x8A9136AAu);
    ASSERT_EQ(crc32c(0, ones, 32), 0x62A8AB43u);
}

static void test_incremental(void) {
    uint32_t c = crc32c(0, "1234", 4);
    c = crc32c(c, "56789", 5);
    ASSERT_EQ(c, 0xE3069283u);
}

static void test_hw_equals_sw_small(void) {
    uint8_t buf[300 + 8];
    fill(buf, sizeof buf);
    for (size_t align = 0; align < 8; align++)
        for (size_t len = 0; len <= 300; len++)
            ASSERT_MSG(crc32c(0, buf + align, len) == crc32c_sw(0, buf + align, len),
                       "align %zu len %zu", align, len);
}

static void test_hw_equals_sw_large(void) {
    size_t n = (4u << 20) + 13;
    uint8_t *buf = malloc(n);
    ASSERT(buf);
    fill(buf, n);
    /* lengths around the 3-stream block boundaries, and a few MB */
    static const size_t lens[] = {12287, 12288, 12289, 24576 + 7, 100000, 1u << 20, (4u << 20) + 5};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t align = 0; align < 8; align += 3) {
            uint32_t h = crc32c(0x12345678, buf + align, lens[i]);
            uint32_t s = crc32c_sw(0x12345678, buf + align, lens[i]);
            if (h != s) free(buf);
            ASSERT_MSG(h == s, "len %zu align %zu", lens[i], align);
        }
    free(buf);
}

static void test_combine(void) {
    size_t n = 70000;
    uint8_t *buf = malloc(n);
    ASSERT(buf);
    fill(buf, n);
    uint32_t whole = crc32c(0, buf, n);
    static const size_t cuts[] = {0, 1, 7, 8, 300, 4096, 12288, 69999, 70000};
    int bad = -1;
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t k = cuts[i];
        uint32_t a = crc32c(0, buf, k), b = crc32c(0, buf + k, n - k);
        if (crc32c_combine(a, b, n - k) != whole) bad = (int)i;
    }
    free(buf);
    ASSERT_EQ(bad, -1);
    /* combine of three slices in order */
    uint32_t c = crc32c_combine(crc32c(0, "123", 3), crc32c(0, "456", 3), 3);
    c = crc32c_combine(c, crc32c(0, "789", 3), 3);
    ASSERT_EQ(c, 0xE3069283u);
}

/* Lengths past 4 GiB exercise the high powers of the zero operator: the
 * combine of A with B = n zero bytes must equal crc(A || zeros), which
 * the incremental form gives for small n. */
static void test_combine_zero_runs(void) {
    uint8_t zeros[4096] = {0};
    uint32_t a = crc32c(0, "moonkv", 6);
    for (size_t n = 1; n <= sizeof zeros; n = n * 3 + 1)
        ASSERT_EQ(crc32c_combine(a, crc32c(0, zeros, n), n), crc32c(a, zeros, n));
    /* Associativity over a large length: (A, Z1) then Z2 == A with Z1||Z2. */
    uint64_t big = (5ULL << 32) + 12345;
    uint32_t z = crc32c(0, zeros, 100);
    uint32_t left = crc32c_combine(crc32c_combine(a, z, 100), crc32c(0, zeros, 200), 200);
    uint32_t right = crc32c_combine(a, crc32c(0, zeros, 300), 300);
    ASSERT_EQ(left, right);
    ASSERT(crc32c_combine(a, 0, big) != crc32c_combine(a, 0, big + 1));
}

static void test_parallel_equals_serial(void) {
    size_t n = (9u << 20) + 777;
    uint8_t *buf = malloc(n);
    ASSERT(buf);
    fill(buf, n);
    workpool *wp = workpool_start(3);
    ASSERT_EQ(workpool_width(wp), 4);
    static const size_t lens[] = {0, 1, 4096, CRC32C_PARALLEL_MIN - 1, CRC32C_PARALLEL_MIN,
                                  CRC32C_PARALLEL_MIN + 3, (5u << 20) + 1, (9u << 20) + 777};
    int bad = -1;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint32_t serial = crc32c(0, buf, lens[i]);
        if (crc32c_parallel(wp, buf, lens[i]) != serial || crc32c_parallel(NULL, buf, lens[i]) != serial)
            bad = (int)i;
    }
    /* A flipped bit in the last part changes the combined checksum. */
    uint32_t before = crc32c_parallel(wp, buf, n);
    buf[n - 1] ^= 0x10;
    uint32_t after = crc32c_parallel(wp, buf, n);
    workpool_stop(wp);
    free(buf);
    ASSERT_EQ(bad, -1);
    ASSERT(before != after);
}

/* The fused copy gives the bytes and the checksum that a copy followed
 * by crc32c would, for lengths around every block boundary of the
 * 3-stream loop and every source/destination alignment, including the
 * streamed copies of 256 KiB and more (a plain head up to the
 * destination's 64-byte line, a tail after the last whole fold round). */
static void test_copy_fused_with(uint32_t (*copy)(uint32_t, void *, const void *, size_t)) {
    size_t n = (1u << 20) + 64;
    uint8_t *src = malloc(n), *dst = malloc(n + 64);
    ASSERT(src && dst);
    fill(src, n);
    static const size_t lens[] = {0, 1, 7, 8, 15, 16, 63, 64, 65, 1023, 1024, 1025, 1279, 1280, 4095, 4096,
                                  12287, 12288, 12289, 12288 + 63, 24576, 24576 + 9, 36864 - 1, 100000,
                                  (256u << 10) - 1, 256u << 10, (256u << 10) + 255, 300001, 1u << 20};
    int bad = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t sa = 0; sa < 16; sa += 5)
            for (size_t da = 0; da < 16; da += 3) {
                size_t len = lens[i];
                memset(dst, 0xA5, n + 64);
                uint32_t got = copy(0x9abcdef0u, dst + da, src + sa, len);
                int same = memcmp(dst + da, src + sa, len) == 0 && (da == 0 || dst[da - 1] == 0xA5) &&
                           dst[da + len] == 0xA5;
                if (got != crc32c_sw(0x9abcdef0u, src + sa, len) || !same) bad++;
            }
    free(src);
    free(dst);
    ASSERT_MSG(bad == 0, "%d mismatches", bad);
}

static void test_copy_fused(void) { test_copy_fused_with(crc32c_copy); }
/* One piece: the pieces' copy is the plain one's (bytes and checksum). */
static uint32_t gather_one(uint32_t crc, void *dst, const void *src, size_t len) {
    struct iovec v = {(void *)src, len};
    return crc32c_copy_gather(crc, dst, &v, 1);
}

static uint32_t scatter_one(uint32_t crc, void *dst, const void *src, size_t len) {
    struct iovec v = {dst, len};
    return crc32c_copy_scatter(crc, &v, 1, src);
}

static void test_copy_pieces_one(void) {
    test_copy_fused_with(gather_one);
    test_copy_fused_with(scatter_one);
}

/* Many pieces of mixed sizes (below and above the streamed size, odd
 * lengths, odd alignments, empty ones) far apart in a source: gathered,
 * the run is their concatenation with its checksum (crc32c_sumv's over
 * them in place); scattered back, every
 * piece holds its bytes again and nothing between them is touched. */
static void test_copy_pieces_many(void) {
    static const size_t lens[] = {16384, 1, 0, 1023, 1024, 16384, 4097, 65, 300001, 16384, 255, 16384 + 7};
    enum { N = sizeof lens / sizeof lens[0], GAP = 4099 };
    size_t total = 0, span = 0;
    for (int i = 0; i < N; i++) total += lens[i], span += lens[i] + GAP;
    uint8_t *src = malloc(span), *run = malloc(total + 128), *back = malloc(span);
    ASSERT(src && run && back);
    fill(src, span);
    int bad = 0;
    for (size_t ra = 0; ra < 64; ra += 13) {
        struct iovec in[N], out[N];
        for (size_t i = 0, at = 3; i < N; at += lens[i] + GAP, i++) {
            in[i] = (struct iovec){src + at, lens[i]};
            out[i] = (struct iovec){back + at, lens[i]};
        }
        memset(run, 0xA5, total + 128);
        uint32_t got = crc32c_copy_gather(7, run + ra, in, N), want = 7;
        for (size_t i = 0, at = 0; i < N; at += lens[i], i++) {
            want = crc32c_sw(want, in[i].iov_base, lens[i]);
            bad += memcmp(run + ra + at, in[i].iov_base, lens[i]) != 0;
        }
        bad += got != want || run[ra + total] != 0xA5 || (ra && run[ra - 1] != 0xA5);
        bad += crc32c_sumv(7, in, N) != want;
        memset(back, 0x5A, span);
        bad += crc32c_copy_scatter(7, out, N, run + ra) != want;
        for (size_t i = 0, at = 3; i < N; at += lens[i] + GAP, i++) {
            bad += memcmp(out[i].iov_base, in[i].iov_base, lens[i]) != 0;
            bad += back[at + lens[i]] != 0x5A || back[at - 1] != 0x5A;
        }
    }
    free(src);
    free(run);
    free(back);
    ASSERT_MSG(bad == 0, "%d mismatches", bad);
}

/* The folding kernel itself, where the CPU has it: every whole number of
 * rounds from one up, copying or not, any alignment,
 * against the table; a flipped bit anywhere changes the register. */
static void test_fold_kernel(void) {
    if (!crc32c_fold_init()) {
        printf("# no VPCLMULQDQ: folding not tested here\n");
        return;
    }
    size_t n = 64 * CRC32C_FOLD_BLOCK + 64;
    uint8_t *src = malloc(n), *dst = malloc(n);
    ASSERT(src && dst);
    fill(src, n);
    int bad = 0;
    for (size_t len = CRC32C_FOLD_BLOCK; len + 64 <= n; len += CRC32C_FOLD_BLOCK)
        for (size_t sa = 0; sa < 64; sa += 21) {
            uint32_t want = ~crc32c_sw(0x5eed, src + sa, len);
            memset(dst, 0, n);
            bad += crc32c_fold(want ^ 0x1234u, NULL, src + sa, len) == crc32c_fold(want, NULL, src + sa, len);
            bad += crc32c_fold(~0x5eedu, NULL, src + sa, len) != want;
            bad += crc32c_fold(~0x5eedu, dst + sa / 3, src + sa, len) != want ||
                   memcmp(dst + sa / 3, src + sa, len) != 0;
        }
    uint32_t before = crc32c_fold(0, NULL, src, 8 * CRC32C_FOLD_BLOCK);
    for (size_t bit = 0; bit < 8 * 8 * CRC32C_FOLD_BLOCK; bit += 997) {
        src[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        bad += crc32c_fold(0, NULL, src, 8 * CRC32C_FOLD_BLOCK) == before;
        src[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    free(src);
    free(dst);
    ASSERT_MSG(bad == 0, "%d mismatches", bad);
}

int main(void) {
    printf("# hardware crc32c: %s\n", crc32c_hw_available() ? "yes" : "no");
    RUN_TEST(test_known_vectors);
    RUN_TEST(test_incremental);
    RUN_TEST(test_hw_equals_sw_small);
    RUN_TEST(test_hw_equals_sw_large);
    RUN_TEST(test_copy_fused);
    RUN_TEST(test_copy_pieces_one);
    RUN_TEST(test_copy_pieces_many);
    RUN_TEST(test_fold_kernel);
    RUN_TEST(test_combine);
    RUN_TEST(test_combine_zero_runs);
    RUN_TEST(test_parallel_equals_serial);
    TEST_EXIT();
}
