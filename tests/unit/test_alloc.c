/* tests/unit/test_alloc.c - the segment allocator against its contract
 * and against a byte-map model. */
#include "core/alloc.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static seg_alloc_stats stats(const seg_alloc *a) {
    seg_alloc_stats st;
    seg_alloc_get_stats(a, &st);
    return st;
}

static void test_create_args(void) {
    ASSERT(seg_alloc_create(1024, 0) == NULL);
    ASSERT(seg_alloc_create(1024, 48) == NULL);
    ASSERT(seg_alloc_create(0, 64) == NULL);
    seg_alloc *a = seg_alloc_create(1024, 64);
    ASSERT(a);
    ASSERT_EQ(seg_alloc_align(a), 64);
    seg_alloc_stats st = stats(a);
    ASSERT_EQ(st.size, 1024);
    ASSERT_EQ(st.free, 1024);
    ASSERT_EQ(st.largest_free, 1024);
    ASSERT_EQ(st.free_extents, 1);
    ASSERT_EQ(st.allocations, 0);
    ASSERT(st.fragmentation == 0.0);
    seg_alloc_destroy(a);
}

static void test_basic_and_alignment(void) {
    seg_alloc *a = seg_alloc_create(1 << 20, 64);
    uint64_t o1, o2, o3;
    ASSERT_EQ(seg_alloc_reserve(a, 1, &o1), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve(a, 100, &o2), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve(a, 64, &o3), ALLOC_OK);
    ASSERT_EQ(o1 % 64, 0);
    ASSERT_EQ(o2 % 64, 0);
    ASSERT_EQ(o3 % 64, 0);
    ASSERT(o2 >= o1 + 64 || o1 >= o2 + 128);
    seg_alloc_stats st = stats(a);
    ASSERT_EQ(st.used, 64 + 128 + 64);
    ASSERT_EQ(st.free, (1 << 20) - 256);
    ASSERT_EQ(st.allocations, 3);
    ASSERT_EQ(seg_alloc_reserve(a, 0, &o1), ALLOC_ERR);
    /* release accepts the requested or the aligned length */
    ASSERT_EQ(seg_alloc_release(a, o2, 100), ALLOC_OK);
    ASSERT_EQ(seg_alloc_release(a, o3, 64), ALLOC_OK);
    ASSERT_EQ(seg_alloc_release(a, o1, 64), ALLOC_OK);
    seg_alloc_destroy(a);
}

static void test_coalescing(void) {
    seg_alloc *a = seg_alloc_create(64 * 10, 64);
    uint64_t off[10];
    for (int i = 0; i < 10; i++) ASSERT_EQ(seg_alloc_reserve(a, 64, &off[i]), ALLOC_OK);
    ASSERT_EQ(stats(a).free_extents, 0);
    { uint64_t o; ASSERT_EQ(seg_alloc_reserve(a, 1, &o), ALLOC_ERR); }
    /* free every other one, then the rest: ends as one extent */
    for (int i = 0; i < 10; i += 2) ASSERT_EQ(seg_alloc_release(a, off[i], 64), ALLOC_OK);
    ASSERT_EQ(stats(a).free_extents, 5);
    ASSERT_EQ(stats(a).largest_free, 64);
    ASSERT(stats(a).fragmentation > 0.7);
    for (int i = 1; i < 10; i += 2) ASSERT_EQ(seg_alloc_release(a, off[i], 64), ALLOC_OK);
    seg_alloc_stats st = stats(a);
    ASSERT_EQ(st.free_extents, 1);
    ASSERT_EQ(st.largest_free, 640);
    ASSERT_EQ(st.used, 0);
    ASSERT(st.fragmentation == 0.0);
    seg_alloc_destroy(a);
}

static void test_best_fit(void) {
    /* free holes of 3, 1 and 2 units; a 2-unit request takes the 2-hole */
    seg_alloc *a = seg_alloc_create(1000, 1);
    ASSERT_EQ(seg_alloc_reserve_at(a, 0, 10), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve_at(a, 13, 10), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve_at(a, 24, 10), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve_at(a, 36, 964), ALLOC_OK);
    uint64_t off;
    ASSERT_EQ(seg_alloc_reserve(a, 2, &off), ALLOC_OK);
    ASSERT_EQ(off, 34);
    ASSERT_EQ(seg_alloc_reserve(a, 1, &off), ALLOC_OK);
    ASSERT_EQ(off, 23);
    ASSERT_EQ(seg_alloc_reserve(a, 2, &off), ALLOC_OK);
    ASSERT_EQ(off, 10);
    ASSERT_EQ(seg_alloc_reserve(a, 1, &off), ALLOC_OK);
    ASSERT_EQ(off, 12);
    ASSERT_EQ(stats(a).free_extents, 0);
    seg_alloc_destroy(a);
}

static void test_nospace_unchanged(void) {
    seg_alloc *a = seg_alloc_create(4096, 64);
    uint64_t o1, o2, off = 12345;
    ASSERT_EQ(seg_alloc_reserve(a, 1024, &o1), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve(a, 1024, &o2), ALLOC_OK);
    ASSERT_EQ(seg_alloc_release(a, o1, 1024), ALLOC_OK);
    seg_alloc_stats before = stats(a);
    ASSERT_EQ(seg_alloc_reserve(a, 2049, &off), ALLOC_ERR);
    ASSERT_EQ(off, 12345);
    seg_alloc_stats after = stats(a);
    ASSERT(memcmp(&before, &after, sizeof before) == 0);
    ASSERT_EQ(seg_alloc_reserve(a, 2048, &off), ALLOC_OK);
    seg_alloc_destroy(a);
}

static void test_reserve_at(void) {
    seg_alloc *a = seg_alloc_create(4096, 64);
    ASSERT_EQ(seg_alloc_reserve_at(a, 1024, 100), ALLOC_OK);   /* claims 128 */
    ASSERT_EQ(seg_alloc_reserve_at(a, 1024 + 64, 64), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_reserve_at(a, 960, 128), ALLOC_ERR);   /* overlaps start */
    ASSERT_EQ(seg_alloc_reserve_at(a, 1000, 8), ALLOC_ERR);    /* unaligned */
    ASSERT_EQ(seg_alloc_reserve_at(a, 4096, 64), ALLOC_ERR);   /* out of bounds */
    ASSERT_EQ(seg_alloc_reserve_at(a, 4032, 128), ALLOC_ERR);  /* crosses the end */
    ASSERT_EQ(seg_alloc_reserve_at(a, 4032, 64), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve_at(a, 0, 1024), ALLOC_OK);
    seg_alloc_stats st = stats(a);
    ASSERT_EQ(st.used, 128 + 64 + 1024);
    ASSERT_EQ(st.free_extents, 1);
    ASSERT_EQ(st.allocations, 3);
    ASSERT_EQ(seg_alloc_release(a, 1024, 100), ALLOC_OK);
    ASSERT_EQ(seg_alloc_release(a, 0, 1024), ALLOC_OK);
    ASSERT_EQ(seg_alloc_release(a, 4032, 64), ALLOC_OK);
    ASSERT_EQ(stats(a).free_extents, 1);
    ASSERT_EQ(stats(a).largest_free, 4096);
    seg_alloc_destroy(a);
}

static void test_invalid_release(void) {
    seg_alloc *a = seg_alloc_create(4096, 64);
    uint64_t o1, o2;
    ASSERT_EQ(seg_alloc_reserve(a, 256, &o1), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve(a, 256, &o2), ALLOC_OK);
    seg_alloc_stats before = stats(a);
    ASSERT_EQ(seg_alloc_release(a, o1, 128), ALLOC_ERR);      /* wrong length */
    ASSERT_EQ(seg_alloc_release(a, o1, 512), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_release(a, o1 + 64, 192), ALLOC_ERR); /* inside it */
    ASSERT_EQ(seg_alloc_release(a, 2048, 64), ALLOC_ERR);     /* free space */
    ASSERT_EQ(seg_alloc_release(a, o1, 0), ALLOC_ERR);
    seg_alloc_stats after = stats(a);
    ASSERT(memcmp(&before, &after, sizeof before) == 0);
    ASSERT_EQ(seg_alloc_release(a, o1, 256), ALLOC_OK);
    ASSERT_EQ(seg_alloc_release(a, o1, 256), ALLOC_ERR);      /* double free */
    ASSERT_EQ(stats(a).allocations, 1);
    seg_alloc_destroy(a);
}

static void test_overflow(void) {
    seg_alloc *a = seg_alloc_create(UINT64_MAX, 64);
    ASSERT(a);
    uint64_t off;
    ASSERT_EQ(seg_alloc_reserve(a, UINT64_MAX, &off), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_reserve(a, UINT64_MAX - 62, &off), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_reserve_at(a, UINT64_MAX - 63, 128), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_reserve_at(a, 64, UINT64_MAX - 63), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_release(a, UINT64_MAX - 63, UINT64_MAX), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_reserve(a, UINT64_MAX - 126, &off), ALLOC_OK);  /* rounds to 2^64-64 */
    ASSERT_EQ(off, 0);
    ASSERT_EQ(seg_alloc_reserve(a, 64, &off), ALLOC_ERR);  /* only 63 bytes left */
    ASSERT_EQ(stats(a).free, 63);
    ASSERT_EQ(seg_alloc_release(a, 0, UINT64_MAX - 126), ALLOC_OK);
    ASSERT_EQ(stats(a).free, UINT64_MAX);
    seg_alloc_destroy(a);
}

/* ---- randomized test against a byte-map model ---- */

#define MODEL_SIZE 2048
#define MAX_LIVE 256

typedef struct model {
    uint8_t used[MODEL_SIZE];
    uint64_t off[MAX_LIVE], len[MAX_LIVE];
    int n;
    uint64_t align;
} model;

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(uint64_t n) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng % n;
}

static int model_is_free(const model *m, uint64_t off, uint64_t len) {
    if (off > MODEL_SIZE || len > MODEL_SIZE - off) return 0;
    for (uint64_t i = off; i < off + len; i++)
        if (m->used[i]) return 0;
    return 1;
}

static void model_mark(model *m, uint64_t off, uint64_t len, uint8_t v) {
    memset(m->used + off, v, len);
}

/* Best fit over the model's free runs; returns the offset or -1. Also
 * fills the stats the allocator must agree with. */
static int64_t model_scan(const model *m, uint64_t want, seg_alloc_stats *st) {
    int64_t best = -1;
    uint64_t best_len = UINT64_MAX;
    memset(st, 0, sizeof *st);
    for (uint64_t i = 0; i < MODEL_SIZE;) {
        if (m->used[i]) { st->used++; i++; continue; }
        uint64_t j = i;
        while (j < MODEL_SIZE && !m->used[j]) j++;
        uint64_t run = j - i;
        st->free_extents++;
        if (run > st->largest_free) st->largest_free = run;
        if (run >= want && run < best_len) { best = (int64_t)i; best_len = run; }
        i = j;
    }
    return best;
}

static uint64_t round_up(uint64_t len, uint64_t align) {
    return (len + align - 1) / align * align;
}

/* untracked: seg_alloc_create_untracked, whose bogus releases are
 * refused only when they touch free space (the model sends it no others). */
static void run_model(uint64_t align, int untracked) {
    static model m;
    memset(&m, 0, sizeof m);
    m.align = align;
    seg_alloc *a = untracked ? seg_alloc_create_untracked(MODEL_SIZE, align) : seg_alloc_create(MODEL_SIZE, align);
    ASSERT(a);
    int failed = 0;
    for (int step = 0; step < 20000 && !failed; step++) {
        int op = (int)rnd(10);
        seg_alloc_stats ms, st;
        if (op < 4 && m.n < MAX_LIVE) {
            uint64_t len = 1 + rnd(200), off;
            int64_t want = model_scan(&m, round_up(len, align), &ms);
            int rc = seg_alloc_reserve(a, len, &off);
            if (want < 0) { failed |= rc != ALLOC_ERR; }
            else if (rc != ALLOC_OK || (int64_t)off != want) { failed = 1; }
            else {
                m.off[m.n] = off; m.len[m.n++] = len;
                model_mark(&m, off, round_up(len, align), 1);
            }
        } else if (op < 6 && m.n < MAX_LIVE) {
            uint64_t off = rnd(MODEL_SIZE + 64) / align * align, len = 1 + rnd(100);
            int ok = model_is_free(&m, off, round_up(len, align));
            int rc = seg_alloc_reserve_at(a, off, len);
            if (rc != (ok ? ALLOC_OK : ALLOC_ERR)) failed = 2;
            else if (ok) {
                m.off[m.n] = off; m.len[m.n++] = len;
                model_mark(&m, off, round_up(len, align), 1);
            }
        } else if (op < 9 && m.n > 0) {
            int i = (int)rnd((uint64_t)m.n);
            if (seg_alloc_release(a, m.off[i], m.len[i]) != ALLOC_OK) failed = 3;
            model_mark(&m, m.off[i], round_up(m.len[i], align), 0);
            m.off[i] = m.off[m.n - 1]; m.len[i] = m.len[--m.n];
        } else {
            /* a bogus release: random range, maybe a live one with a bad length */
            uint64_t off = rnd(MODEL_SIZE), len = 1 + rnd(300);
            int live = 0;
            for (int i = 0; i < m.n; i++)
                if (m.off[i] == off && round_up(m.len[i], align) == round_up(len, align)) live = 1;
            int telling = !untracked || off % align != 0 || !model_is_free(&m, off, 0) ||
                          off + round_up(len, align) > MODEL_SIZE;
            for (uint64_t i = off; untracked && !telling && i < off + round_up(len, align); i++)
                telling = !m.used[i];
            if (!live && telling && seg_alloc_release(a, off, len) != ALLOC_ERR) failed = 4;
        }
        model_scan(&m, 1, &ms);
        seg_alloc_get_stats(a, &st);
        if (st.used != ms.used || st.free_extents != ms.free_extents ||
            st.largest_free != ms.largest_free || st.allocations != (uint64_t)m.n ||
            st.free != MODEL_SIZE - ms.used)
            failed = 5;
        if (failed) printf("# model mismatch %d at step %d (align %llu)\n", failed, step,
                           (unsigned long long)align);
    }
    seg_alloc_destroy(a);
    ASSERT_EQ(failed, 0);
}

static void test_model_align1(void) { run_model(1, 0); }
static void test_model_align16(void) { run_model(16, 0); }
static void test_model_untracked_align1(void) { run_model(1, 1); }
static void test_model_untracked_align64(void) { run_model(64, 1); }

/* Untracked: what it can still refuse, unchanged; the right release and
 * then a second one of the same range. */
static void test_untracked_release(void) {
    seg_alloc *a = seg_alloc_create_untracked(4096, 64);
    uint64_t o1, o2;
    ASSERT_EQ(seg_alloc_reserve(a, 256, &o1), ALLOC_OK);
    ASSERT_EQ(seg_alloc_reserve(a, 256, &o2), ALLOC_OK);
    seg_alloc_stats before = stats(a);
    ASSERT_EQ(before.allocations, 2);
    ASSERT_EQ(seg_alloc_release(a, o1, 512 + 64), ALLOC_ERR);   /* runs into free space */
    ASSERT_EQ(seg_alloc_release(a, 2048, 64), ALLOC_ERR);       /* free space */
    ASSERT_EQ(seg_alloc_release(a, o1 + 32, 64), ALLOC_ERR);    /* misaligned */
    ASSERT_EQ(seg_alloc_release(a, 4096, 64), ALLOC_ERR);       /* out of bounds */
    ASSERT_EQ(seg_alloc_release(a, 4032, 128), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_release(a, o1, 0), ALLOC_ERR);
    seg_alloc_stats after = stats(a);
    ASSERT(memcmp(&before, &after, sizeof before) == 0);
    ASSERT_EQ(seg_alloc_release(a, o1, 256), ALLOC_OK);
    ASSERT_EQ(seg_alloc_release(a, o1, 256), ALLOC_ERR);        /* double free */
    ASSERT_EQ(seg_alloc_release(a, o1, 64), ALLOC_ERR);
    ASSERT_EQ(stats(a).allocations, 1);
    ASSERT_EQ(seg_alloc_dump(a, SEG_TREE_LIVE, NULL, 0), 0);
    ASSERT_EQ(seg_alloc_release(a, o2, 256), ALLOC_OK);
    ASSERT_EQ(stats(a).free_extents, 1);
    ASSERT_EQ(stats(a).used, 0);
    seg_alloc_destroy(a);
}

/* Hundreds of thousands of extents: every other slot freed, then reused. */
static void test_scale(void) {
    enum { N = 200000 };
    seg_alloc *a = seg_alloc_create((uint64_t)N * 4096, 64);
    uint64_t *off = malloc(N * sizeof *off);
    ASSERT(a && off);
    int bad = 0;
    for (int i = 0; i < N; i++) bad |= seg_alloc_reserve(a, 4096, &off[i]) != ALLOC_OK;
    for (int i = 0; i < N; i += 2) bad |= seg_alloc_release(a, off[i], 4096) != ALLOC_OK;
    seg_alloc_stats st = stats(a);
    bad |= st.free_extents != N / 2 || st.largest_free != 4096 || st.allocations != N / 2;
    /* best fit puts small objects into the holes without new extents */
    for (int i = 0; i < N; i += 2) bad |= seg_alloc_reserve(a, 4096, &off[i]) != ALLOC_OK;
    bad |= stats(a).free_extents != 0;
    for (int i = 0; i < N; i++) bad |= seg_alloc_release(a, off[i], 4096) != ALLOC_OK;
    st = stats(a);
    bad |= st.free_extents != 1 || st.used != 0 || st.allocations != 0;
    free(off);
    seg_alloc_destroy(a);
    ASSERT_EQ(bad, 0);
}

/* ---- claims built in one pass ---- */

/* Every tree of x and y holds the same pairs, each in search and heap order. */
static int same_trees(const seg_alloc *x, const seg_alloc *y, size_t max) {
    uint64_t *px = malloc(2 * max * sizeof *px), *py = malloc(2 * max * sizeof *py);
    int same = px && py;
    for (int t = SEG_TREE_FREE_OFF; same && t <= SEG_TREE_LIVE; t++) {
        long nx = seg_alloc_dump(x, (seg_alloc_tree)t, px, max), ny = seg_alloc_dump(y, (seg_alloc_tree)t, py, max);
        same = nx >= 0 && nx == ny && (size_t)nx <= max && memcmp(px, py, 2 * (size_t)nx * sizeof *px) == 0;
    }
    free(px);
    free(py);
    return same;
}

/* n sorted, disjoint ranges over size bytes (align 64): random gaps (often
 * none) and lengths (often not a multiple of the alignment). */
static size_t random_ranges(seg_range *r, size_t n, uint64_t size, int tight) {
    uint64_t at = 0;
    size_t k = 0;
    while (k < n) {
        at += tight ? 64 * rnd(2) : 64 * rnd(20);
        uint64_t len = 1 + rnd(700);
        if (at >= size || round_up(len, 64) > size - at) break;
        r[k++] = (seg_range){at, len};
        at += round_up(len, 64);
    }
    return k;
}

/* The one-pass build holds what claims one at a time (in any order) make,
 * and both then answer every reserve and release alike. */
static void test_claim_sorted_matches_one_by_one(void) {
    enum { N = 20000 };
    seg_range *r = malloc(N * sizeof *r);
    size_t *order = malloc(N * sizeof *order);
    ASSERT(r && order);
    for (int round = 0; round < 6; round++) {
        uint64_t size = round == 5 ? 64 * 1000 : (uint64_t)N * 64 * 8;
        size_t n = random_ranges(r, round == 0 ? 0 : N, size, round % 2);
        seg_alloc *one = seg_alloc_create(size, 64), *bulk = seg_alloc_create(size, 64);
        seg_alloc *untracked = seg_alloc_create_untracked(size, 64);
        for (size_t i = 0; i < n; i++) order[i] = i;
        for (size_t i = n; i > 1; i--) {
            size_t j = rnd(i), t = order[i - 1];
            order[i - 1] = order[j], order[j] = t;
        }
        int bad = 0;
        for (size_t i = 0; i < n; i++) bad |= seg_alloc_reserve_at(one, r[order[i]].off, r[order[i]].len) != ALLOC_OK;
        ASSERT_EQ(bad, 0);
        ASSERT_EQ(seg_alloc_claim_sorted(bulk, r, n), ALLOC_OK);
        ASSERT_EQ(seg_alloc_claim_sorted(untracked, r, n), ALLOC_OK);
        ASSERT(same_trees(one, bulk, N + 2));
        seg_alloc_stats s1 = stats(one), s2 = stats(bulk);
        ASSERT(memcmp(&s1, &s2, sizeof s1) == 0);
        ASSERT_EQ(s1.allocations, n);
        /* the same operations on both give the same answers */
        for (int step = 0; step < 4000; step++) {
            uint64_t o1 = 0, o2 = 0, len = 1 + rnd(300);
            uint64_t o3 = 0;
            if (rnd(2) && n > 0) {
                size_t i = rnd(n);
                int rc = seg_alloc_release(one, r[i].off, r[i].len);
                bad |= rc != seg_alloc_release(bulk, r[i].off, r[i].len);
                /* A range released before and reserved again by others
                 * cannot be told apart there: only live ones go to it. */
                if (rc == ALLOC_OK) bad |= seg_alloc_release(untracked, r[i].off, r[i].len) != ALLOC_OK;
            } else {
                int rc = seg_alloc_reserve(one, len, &o1);
                bad |= rc != seg_alloc_reserve(bulk, len, &o2) || o1 != o2;
                bad |= rc != seg_alloc_reserve(untracked, len, &o3) || o1 != o3;
            }
        }
        ASSERT_EQ(bad, 0);
        ASSERT(same_trees(one, bulk, N + 4002));
        /* the untracked one: the same free trees and stats, no live tree */
        seg_alloc_stats s3 = stats(untracked);
        s1 = stats(one);
        ASSERT(memcmp(&s1, &s3, sizeof s1) == 0);
        ASSERT_EQ(seg_alloc_dump(untracked, SEG_TREE_LIVE, NULL, 0), 0);
        for (int t = SEG_TREE_FREE_OFF; t <= SEG_TREE_FREE_LEN; t++) {
            static uint64_t p1[2 * (N + 4002)], p3[2 * (N + 4002)];
            long n1 = seg_alloc_dump(one, (seg_alloc_tree)t, p1, N + 4002);
            long n3 = seg_alloc_dump(untracked, (seg_alloc_tree)t, p3, N + 4002);
            ASSERT(n1 >= 0 && n1 == n3 && memcmp(p1, p3, 2 * (size_t)n1 * sizeof *p1) == 0);
        }
        seg_alloc_destroy(untracked);
        seg_alloc_destroy(one);
        seg_alloc_destroy(bulk);
    }
    free(order);
    free(r);
}

/* Ranges that break a rule, or an allocator already in use: refused, unchanged. */
static void test_claim_sorted_refuses(void) {
    seg_alloc *a = seg_alloc_create(64 * 100, 64);
    const seg_range overlap[] = {{0, 100}, {64, 64}}, unsorted[] = {{128, 64}, {0, 64}},
                    misaligned[] = {{32, 64}}, outside[] = {{64 * 99, 65}}, empty[] = {{0, 0}},
                    beyond[] = {{64 * 100, 1}};
    const seg_range *bad[] = {overlap, unsorted, misaligned, outside, empty, beyond};
    const size_t nbad[] = {2, 2, 1, 1, 1, 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(seg_alloc_claim_sorted(a, bad[i], nbad[i]), ALLOC_ERR);
        ASSERT_EQ(stats(a).free_extents, 1);
        ASSERT_EQ(stats(a).used, 0);
    }
    const seg_range whole[] = {{0, 64 * 50}, {64 * 50, 64 * 50}};
    ASSERT_EQ(seg_alloc_claim_sorted(a, whole, 2), ALLOC_OK);   /* the segment exactly: nothing free */
    ASSERT_EQ(stats(a).free_extents, 0);
    ASSERT_EQ(stats(a).free, 0);
    const seg_range again[] = {{0, 64}};
    ASSERT_EQ(seg_alloc_claim_sorted(a, again, 0), ALLOC_ERR);   /* in use */
    ASSERT_EQ(seg_alloc_release(a, 0, 64 * 50), ALLOC_OK);
    ASSERT_EQ(seg_alloc_claim_sorted(a, again, 1), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_release(a, 64 * 50, 64 * 50), ALLOC_OK);
    ASSERT_EQ(seg_alloc_claim_sorted(a, again, 1), ALLOC_OK);   /* free again as a whole */
    ASSERT_EQ(stats(a).allocations, 1);
    ASSERT_EQ(stats(a).largest_free, 64 * 99);
    seg_alloc_destroy(a);
}

int main(void) {
    RUN_TEST(test_create_args);
    RUN_TEST(test_basic_and_alignment);
    RUN_TEST(test_coalescing);
    RUN_TEST(test_best_fit);
    RUN_TEST(test_nospace_unchanged);
    RUN_TEST(test_reserve_at);
    RUN_TEST(test_invalid_release);
    RUN_TEST(test_overflow);
    RUN_TEST(test_model_align1);
    RUN_TEST(test_model_align16);
    RUN_TEST(test_model_untracked_align1);
    RUN_TEST(test_model_untracked_align64);
    RUN_TEST(test_untracked_release);
    RUN_TEST(test_scale);
    RUN_TEST(test_claim_sorted_matches_one_by_one);
    RUN_TEST(test_claim_sorted_refuses);
    TEST_EXIT();
}
