/* tests/unit/test_staging.c - the gateway's staging pool: small ranges
 * put back are kept for the next gets of their size; buffers of a
 * read batch carved from one range (staging_get_shared) stay apart,
 * inside the pool, and give the range back only with the last of them,
 * put from any thread. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "gateway/staging.h"
#include "server/store.h"
#include "test.h"

#define POOL (64 * 1024)

static uint64_t pool_used(staging *sp) {
    staging_stats st;
    staging_get_stats(sp, &st);
    return st.pool_used;
}

static void test_shared_pieces(void) {
    char err[128];
    staging *sp = staging_create(POOL, POOL, err, sizeof err);
    ASSERT(sp != NULL);
    const uint64_t lens[] = {64, 1, 100, 4096};
    staging_buf b[4];
    ASSERT_EQ(staging_get_shared(sp, lens, 4, b), STORE_OK);
    ASSERT_EQ(pool_used(sp), 64 + 64 + 128 + 4096);   /* each piece 64-aligned */
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(b[i].len, lens[i]);
        ASSERT_EQ((uintptr_t)b[i].ptr % 64, 0);
        ASSERT_EQ(b[i].map_len, 0);   /* pool memory: registered already */
        memset(b[i].ptr, 'a' + i, lens[i]);
    }
    for (int i = 0; i < 4; i++)   /* no piece overlaps another */
        for (uint64_t k = 0; k < lens[i]; k++) ASSERT(((char *)b[i].ptr)[k] == 'a' + i);
    staging_put(sp, &b[2]);
    ASSERT(b[2].ptr == NULL);
    staging_put(sp, &b[2]);       /* a second put of the same buffer: a no-op */
    staging_put(sp, &b[0]);
    staging_put(sp, &b[3]);
    ASSERT_EQ(pool_used(sp), 64 + 64 + 128 + 4096);   /* b[1] still holds the range */
    staging_put(sp, &b[1]);
    ASSERT_EQ(pool_used(sp), 0);
    staging_destroy(sp);
}

/* Lengths the pool refuses: nothing is taken. */
static void test_shared_refused(void) {
    char err[128];
    staging *sp = staging_create(POOL, 8192, err, sizeof err);
    ASSERT(sp != NULL);
    staging_buf b[20];
    const uint64_t zero[] = {64, 0};
    ASSERT_EQ(staging_get_shared(sp, zero, 2, b), STORE_TOOBIG);
    const uint64_t big[] = {64, 8193};
    ASSERT_EQ(staging_get_shared(sp, big, 2, b), STORE_TOOBIG);
    uint64_t many[20];
    for (int i = 0; i < 20; i++) many[i] = 4000;   /* 80 KB: more than the pool */
    ASSERT_EQ(staging_get_shared(sp, many, 20, b), STORE_NOSPACE);
    ASSERT_EQ(pool_used(sp), 0);
    ASSERT_EQ(staging_get_shared(sp, many, 0, b), STORE_OK);
    ASSERT_EQ(pool_used(sp), 0);
    staging_destroy(sp);
}

typedef struct putter {
    staging *sp;
    staging_buf *b;
    int n;
} putter;

static void *put_all(void *arg) {
    putter *p = arg;
    for (int i = 0; i < p->n; i++) staging_put(p->sp, &p->b[i]);
    return NULL;
}

/* Pieces put by two threads at once (a worker puts a failed read's): the
 * range goes back exactly once, after the last (TSan checks the count). */
static void test_shared_put_from_threads(void) {
    char err[128];
    staging *sp = staging_create(POOL, POOL, err, sizeof err);
    ASSERT(sp != NULL);
    for (int round = 0; round < 200; round++) {
        uint64_t lens[16];
        staging_buf b[16];
        for (int i = 0; i < 16; i++) lens[i] = 64;
        ASSERT_EQ(staging_get_shared(sp, lens, 16, b), STORE_OK);
        putter a = {sp, b, 8}, c = {sp, b + 8, 8};
        pthread_t t;
        ASSERT_EQ(pthread_create(&t, NULL, put_all, &a), 0);
        put_all(&c);
        pthread_join(t, NULL);
        ASSERT_EQ(pool_used(sp), 0);
    }
    staging_destroy(sp);
}

/* A small range put back is kept for the next get of its size (the same
 * memory again), counts as free, and goes back to the allocator when a
 * get finds no room otherwise and when an idle pool is trimmed. */
static void test_small_ranges_kept(void) {
    char err[128];
    staging *sp = staging_create(POOL, POOL, err, sizeof err);
    ASSERT(sp != NULL);
    staging_buf a, b;
    ASSERT_EQ(staging_get(sp, 64, &a), STORE_OK);
    void *first = a.ptr;
    staging_put(sp, &a);
    ASSERT_EQ(pool_used(sp), 0);
    ASSERT_EQ(staging_get(sp, 60, &b), STORE_OK);   /* same aligned size: the kept range */
    ASSERT(b.ptr == first);
    ASSERT_EQ(pool_used(sp), 64);
    staging_put(sp, &b);
    /* the whole pool in kept 256-byte ranges; then one value of all of it */
    enum { N = POOL / 256 };
    staging_buf k[N];
    for (int i = 0; i < N - 1; i++) ASSERT_EQ(staging_get(sp, 256, &k[i]), STORE_OK);
    for (int i = 0; i < N - 1; i++) staging_put(sp, &k[i]);
    ASSERT_EQ(pool_used(sp), 0);
    staging_buf whole;
    ASSERT_EQ(staging_get(sp, POOL, &whole), STORE_OK);
    ASSERT_EQ(whole.map_len, 0);   /* from the pool, not a dedicated mapping */
    ASSERT_EQ(pool_used(sp), POOL);
    staging_put(sp, &whole);
    ASSERT_EQ(staging_get(sp, 64, &a), STORE_OK);
    staging_put(sp, &a);
    ASSERT(staging_trim(sp, 0) > 0);   /* idle: the kept range went back, the pages too */
    ASSERT_EQ(pool_used(sp), 0);
    ASSERT_EQ(staging_get(sp, POOL, &whole), STORE_OK);
    ASSERT_EQ(whole.map_len, 0);
    staging_put(sp, &whole);
    staging_destroy(sp);
}

int main(void) {
    RUN_TEST(test_shared_pieces);
    RUN_TEST(test_shared_refused);
    RUN_TEST(test_small_ranges_kept);
    RUN_TEST(test_shared_put_from_threads);
    TEST_EXIT();
}
