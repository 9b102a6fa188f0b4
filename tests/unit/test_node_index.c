/* Unit tests for the node's index (src/node/index.h): holds replace,
 * drops remove, reports give our extents with object offsets, objects
 * wholly here are proved by their CRC32C, and the bound holds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "node/index.h"
#include "test.h"

#define SEG 4096

static uint8_t seg[SEG];

static obj_replica rep_of(obj_extent *e, uint32_t n) { return (obj_replica){n, e}; }

static size_t report_all(node_index *ix, node_index_extent *out, size_t max) {
    uint64_t cursor = 0;
    size_t n = 0;
    do n += node_index_report(ix, &cursor, out + n, max - n, SIZE_MAX);
    while (cursor && n < max);
    return n;
}

static void test_hold_drop_report(void) {
    node_index *ix = node_index_create(seg, SEG);
    memset(seg, 0x5a, 128);
    uint32_t crc = crc32c(0, seg, 128);
    obj_extent whole[] = {{7, 0, 128}};
    obj_replica r = rep_of(whole, 1);
    ASSERT_EQ(node_index_hold(ix, "a", 1, 128, crc, 2, &r, NULL, 7), 0);
    /* striped over node 3 and us: our slice is object bytes [64, 128) */
    obj_extent striped[] = {{3, 512, 64}, {7, 1024, 64}};
    r = rep_of(striped, 2);
    ASSERT_EQ(node_index_hold(ix, "b", 1, 128, 1234, 2, &r, NULL, 7), 0);
    /* nothing of it here: refused */
    obj_extent elsewhere[] = {{3, 0, 64}};
    r = rep_of(elsewhere, 1);
    ASSERT_EQ(node_index_hold(ix, "c", 1, 64, 1, 1, &r, NULL, 7), -1);
    node_index_stats st;
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.objects, 2);
    ASSERT_EQ(st.extents, 2);
    ASSERT_EQ(st.refused, 1);
    node_index_extent out[8];
    ASSERT_EQ(report_all(ix, out, 8), 2);
    for (int i = 0; i < 2; i++) {
        if (out[i].key[0] == 'a') {
            ASSERT_EQ(out[i].obj_off, 0);
            ASSERT_EQ(out[i].crc, crc);
            ASSERT_EQ(out[i].want, 2);
        } else {
            ASSERT_EQ(out[i].obj_off, 64);
            ASSERT_EQ(out[i].seg_off, 1024);
            ASSERT_EQ(out[i].length, 64);
        }
    }
    node_index_drop(ix, "b", 1);
    node_index_drop(ix, "zz", 2);   /* unknown: nothing happens */
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.objects, 1);
    node_index_free(ix);
}

static void test_corrupt_object_is_dropped_at_report(void) {
    node_index *ix = node_index_create(seg, SEG);
    memset(seg, 0x11, 256);
    obj_extent e[] = {{1, 0, 128}, {1, 128, 128}};
    obj_replica r = rep_of(e, 2);
    ASSERT_EQ(node_index_hold(ix, "ok", 2, 256, crc32c(0, seg, 256), 1, &r, NULL, 1), 0);
    obj_extent f[] = {{1, 256, 64}};
    r = rep_of(f, 1);
    ASSERT_EQ(node_index_hold(ix, "bad", 3, 64, 42, 1, &r, NULL, 1), 0);   /* wrong CRC */
    node_index_extent out[8];
    ASSERT_EQ(report_all(ix, out, 8), 2);   /* both extents of "ok" */
    ASSERT_EQ(out[0].keylen, 2);
    node_index_stats st;
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.checksum_errors, 1);
    ASSERT_EQ(st.objects, 1);
    node_index_free(ix);
}

static void test_bounds(void) {
    /* an extent outside the segment is refused; the entry count is bounded */
    node_index *ix = node_index_create(seg, 128);
    obj_extent out_of[] = {{1, 100, 64}};
    obj_replica r = rep_of(out_of, 1);
    ASSERT_EQ(node_index_hold(ix, "o", 1, 64, 0, 1, &r, NULL, 1), -1);
    obj_extent e[] = {{1, 0, 64}};
    r = rep_of(e, 1);
    int refused = 0;
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        refused += node_index_hold(ix, key, strlen(key), 64, 0, 1, &r, NULL, 1) != 0;
    }
    node_index_stats st;
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.objects, 128 / 64 + 1);
    ASSERT_EQ(refused, 10 - (int)st.objects);
    node_index_free(ix);
}

/* Batches smaller than a bucket's extents: entries that share a bucket
 * go into consecutive batches, none skipped and none twice. */
static void test_full_buckets_split_across_batches(void) {
    enum { ENTRIES = 300, MINE = 50, MAX = 60 };
    static uint8_t seen[ENTRIES][MINE];
    static obj_extent e[1 + MINE];
    node_index *ix = node_index_create(seg, 1 << 20);
    e[0] = (obj_extent){9, 0, 1};   /* one byte elsewhere: not proved here, never read */
    for (int i = 0; i < ENTRIES; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        for (int k = 0; k < MINE; k++) e[1 + k] = (obj_extent){7, (uint64_t)(i * MINE + k), 1};
        obj_replica r = rep_of(e, 1 + MINE);
        ASSERT_EQ(node_index_hold(ix, key, strlen(key), 1 + MINE, 0, 1, &r, NULL, 7), 0);
    }
    node_index_extent out[MAX];
    uint64_t cursor = 0;
    size_t total = 0, batches = 0, twice = 0;
    do {
        size_t n = node_index_report(ix, &cursor, out, MAX, SIZE_MAX);
        ASSERT(n <= MAX);
        batches++;
        for (size_t j = 0; j < n; j++) {
            /* keys are not NUL-terminated: parse within keylen */
            char num[16] = {0};
            ASSERT(out[j].keylen > 1 && out[j].keylen < sizeof num + 1);
            memcpy(num, out[j].key + 1, out[j].keylen - 1);
            int i = atoi(num);
            ASSERT(i >= 0 && i < ENTRIES && out[j].obj_off >= 1 && out[j].obj_off <= MINE);
            twice += seen[i][out[j].obj_off - 1]++ != 0;
        }
        total += n;
    } while (cursor && batches < 10 * ENTRIES);
    ASSERT_EQ(cursor, 0);
    ASSERT_EQ(twice, 0);
    ASSERT_EQ(total, (size_t)ENTRIES * MINE);
    node_index_free(ix);
}

/* The scrub marks a mismatch but keeps the entry; confirming drops it
 * only if the entry is unchanged and still does not match. */
static void test_scrub_marks_then_confirms(void) {
    node_index *ix = node_index_create(seg, SEG);
    memset(seg, 0x22, 512);
    obj_extent a[] = {{1, 0, 256}}, b[] = {{1, 256, 256}};
    obj_replica r = rep_of(a, 1);
    ASSERT_EQ(node_index_hold(ix, "a", 1, 256, crc32c(0, seg, 256), 1, &r, NULL, 1), 0);
    r = rep_of(b, 1);
    ASSERT_EQ(node_index_hold(ix, "b", 1, 256, crc32c(0, seg + 256, 256), 1, &r, NULL, 1), 0);
    seg[10] ^= 1;   /* "a" rots */
    seg[300] ^= 1;  /* so does "b", but its key is put again before the confirmation */
    node_index_mark marks[4];
    size_t n = 0;
    uint64_t cursor = 0, bytes = 0;
    do bytes += node_index_scrub(ix, &cursor, 1 << 20, marks, &n, 4);
    while (cursor);
    ASSERT_EQ(bytes, 512);
    ASSERT_EQ(n, 2);
    node_index_stats st;
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.objects, 2);
    ASSERT_EQ(st.checksum_errors, 0);
    ASSERT_EQ(st.scrub_passes, 1);
    r = rep_of(b, 1);
    ASSERT_EQ(node_index_hold(ix, "b", 1, 256, crc32c(0, seg + 256, 256), 1, &r, NULL, 1), 0);
    int confirmed = 0;
    for (size_t i = 0; i < n; i++) {
        confirmed += node_index_confirm(ix, &marks[i]);
        node_index_mark_free(&marks[i]);
    }
    ASSERT_EQ(confirmed, 1);
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.objects, 1);
    ASSERT_EQ(st.checksum_errors, 1);
    node_index_free(ix);
}

/* Small objects cost the scrub's budget more than their bytes: a step
 * of a few entries' worth proves a few entries, not the whole index. */
static void test_scrub_charges_each_entry(void) {
    node_index *ix = node_index_create(seg, SEG);
    memset(seg, 0x33, SEG);
    enum { N = 64, LEN = 64 };
    for (int i = 0; i < N; i++) {
        char key[8];
        int klen = snprintf(key, sizeof key, "k%d", i);
        obj_extent e[] = {{1, (uint64_t)i * LEN, LEN}};
        obj_replica r = rep_of(e, 1);
        ASSERT_EQ(node_index_hold(ix, key, (size_t)klen, LEN, crc32c(0, seg + i * LEN, LEN), 1, &r, NULL, 1), 0);
    }
    node_index_mark marks[4];
    size_t n = 0;
    uint64_t cursor = 0, steps = 0, bytes = 0;
    do {
        uint64_t got = node_index_scrub(ix, &cursor, 4 * (LEN + 4096), marks, &n, 4);
        ASSERT_MSG(got <= 4 * LEN, "a step proved %llu bytes", (unsigned long long)got);
        bytes += got;
        steps++;
    } while (cursor && steps <= N);
    ASSERT_EQ(bytes, N * LEN);   /* every entry once per pass */
    ASSERT(steps >= N / 4);
    ASSERT_EQ(n, 0);
    node_index_free(ix);
}

/* One op of a scripted sequence: i's key and extents, or a drop. */
static void scripted(int i, char *key, size_t *klen, obj_extent *e, int *drop) {
    *drop = i % 7 == 6;
    int k = *drop ? (i + 3) % 1500 : i % 1500;   /* keys come back: replaced, dropped, held again */
    *klen = (size_t)snprintf(key, 16, "k%d", k);
    /* ours, then node 9's (striped: reports take it unproved); every
     * 11th none of ours: refused */
    e[0] = (obj_extent){i % 11 == 10 ? 8 : 1, (uint64_t)i * 64, 64};
    e[1] = (obj_extent){9, 0, 64};
}

static int by_key(const void *a, const void *b) {
    const node_index_extent *x = a, *y = b;
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->keylen > y->keylen) - (x->keylen < y->keylen);
}

/* A batch (committing itself when full, across the table's growth past
 * its first 1024 buckets) leaves what the same holds and drops one by
 * one leave. */
static void test_batch_matches_one_by_one(void) {
    enum { OPS = 4000, SEGB = 1 << 20 };
    uint8_t *big = calloc(1, SEGB);
    node_index *one = node_index_create(big, SEGB), *many = node_index_create(big, SEGB);
    node_index_batch *b = node_index_batch_new();
    static char keys[OPS][16];   /* the batch's keys stay valid until committed */
    for (int i = 0; i < OPS; i++) {
        char *key = keys[i];
        size_t klen;
        obj_extent e[2];
        int drop;
        scripted(i, key, &klen, e, &drop);
        obj_replica r = rep_of(e, 2);
        if (drop) {
            node_index_drop(one, key, klen);
            node_index_batch_drop(many, b, key, klen);
        } else {
            node_index_hold(one, key, klen, 128, (uint32_t)i, 1, &r, NULL, 1);
            node_index_batch_hold(many, b, key, klen, 128, (uint32_t)i, 1, &r, NULL, 1);
        }
        if (i % 100 == 99) node_index_commit(many, b);   /* and itself when full, in between */
    }
    node_index_commit(many, b);
    node_index_batch_free(b);
    node_index_stats sa, sb;
    node_index_get_stats(one, &sa);
    node_index_get_stats(many, &sb);
    ASSERT(sa.objects > 1024 && sa.refused > 0);
    ASSERT_EQ(sb.objects, sa.objects);
    ASSERT_EQ(sb.extents, sa.extents);
    ASSERT_EQ(sb.refused, sa.refused);
    ASSERT_EQ(sb.applied, sa.applied);
    ASSERT_EQ(sb.bytes, sa.bytes);
    node_index_extent *xa = calloc(OPS, sizeof *xa), *xb = calloc(OPS, sizeof *xb);
    size_t na = report_all(one, xa, OPS), nb = report_all(many, xb, OPS);
    ASSERT_EQ(na, sa.objects);
    ASSERT_EQ(nb, na);
    qsort(xa, na, sizeof *xa, by_key);
    qsort(xb, nb, sizeof *xb, by_key);
    for (size_t i = 0; i < na; i++)
        ASSERT_MSG(by_key(&xa[i], &xb[i]) == 0 && xa[i].seg_off == xb[i].seg_off && xa[i].crc == xb[i].crc,
                   "entry %zu", i);
    free(xa);
    free(xb);
    node_index_free(one);
    node_index_free(many);
    free(big);
}

/* Uncommitted ops are dropped with their batch, entries and all (the
 * ASan build checks nothing leaks). */
static void test_batch_free_uncommitted(void) {
    node_index *ix = node_index_create(seg, SEG);
    node_index_batch *b = node_index_batch_new();
    obj_extent e[] = {{1, 0, 64}};
    obj_replica r = rep_of(e, 1);
    node_index_batch_hold(ix, b, "a", 1, 64, 0, 1, &r, NULL, 1);
    node_index_batch_free(b);
    node_index_stats st;
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.objects, 0);
    ASSERT_EQ(st.applied, 0);
    node_index_free(ix);
}

/* Slice CRCs from a note are kept with the entry (counted in its bytes)
 * and reported with the first of our extents only; a list out of bounds
 * is not kept, and a newer note without one replaces it. */
static void test_slices_kept_and_reported(void) {
    node_index *ix = node_index_create(seg, SEG);
    uint8_t crcs[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    proto_slices_ref sl = {65536, 3, crcs}, odd = {65537, 3, crcs};
    /* 150000 bytes (three 64 KiB slices): ours are object bytes [0, 64) and [128, 192) here */
    obj_extent ext[] = {{7, 0, 64}, {3, 0, 64}, {7, 64, 64}, {3, 64, 149808}};
    obj_replica r = rep_of(ext, 4);
    ASSERT_EQ(node_index_hold(ix, "s", 1, 150000, 99, 2, &r, NULL, 7), 0);
    node_index_stats plain, st;
    node_index_get_stats(ix, &plain);
    ASSERT_EQ(node_index_hold(ix, "s", 1, 150000, 99, 2, &r, &sl, 7), 0);
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.bytes, plain.bytes + 12);
    node_index_extent out[4];
    ASSERT_EQ(report_all(ix, out, 4), 2);
    ASSERT(out[0].obj_off == 0 && out[1].obj_off == 128);
    ASSERT(proto_slices_ref_eq(&out[0].slices, &sl));
    ASSERT_EQ(out[1].slices.count, 0);
    ASSERT_EQ(node_index_hold(ix, "s", 1, 150000, 99, 2, &r, &odd, 7), 0);   /* not a power of two */
    node_index_get_stats(ix, &st);
    ASSERT_EQ(st.bytes, plain.bytes);
    ASSERT_EQ(report_all(ix, out, 4), 2);
    ASSERT(out[0].slices.count == 0 && out[1].slices.count == 0);
    ASSERT_EQ(node_index_hold(ix, "s", 1, 150000, 99, 2, &r, &sl, 7), 0);
    ASSERT_EQ(node_index_hold(ix, "s", 1, 150000, 99, 2, &r, NULL, 7), 0);
    ASSERT_EQ(report_all(ix, out, 4), 2);
    ASSERT_EQ(out[0].slices.count, 0);
    node_index_drop(ix, "s", 1);
    node_index_get_stats(ix, &st);
    ASSERT(st.objects == 0 && st.bytes == 0);
    node_index_free(ix);
}

int main(void) {
    RUN_TEST(test_hold_drop_report);
    RUN_TEST(test_corrupt_object_is_dropped_at_report);
    RUN_TEST(test_bounds);
    RUN_TEST(test_full_buckets_split_across_batches);
    RUN_TEST(test_scrub_marks_then_confirms);
    RUN_TEST(test_scrub_charges_each_entry);
    RUN_TEST(test_batch_matches_one_by_one);
    RUN_TEST(test_batch_free_uncommitted);
    RUN_TEST(test_slices_kept_and_reported);
    TEST_EXIT();
}
