/* Write claims (backend/claims.h): a newer grant that has written locks
 * older ones out of its range, and nothing else. */
#include <stdint.h>
#include <string.h>

#include "backend/claims.h"
#include "test.h"

#define S 1000000ULL   /* one second in microseconds */

static te_cap wcap(uint64_t off, uint64_t len, uint64_t issued_s) {
    te_cap c = {.node_id = 1, .rights = TE_CAP_WRITE, .offset = off, .length = len,
                .issued_us = issued_s * S, .expiry_ms = issued_s * 1000 + 30000};
    return c;
}

static void test_newer_grant_locks_out_older(void) {
    te_claims c;
    te_claims_init(&c, 0);
    te_cap a = wcap(0, 4096, 10), b = wcap(1024, 1024, 11);
    ASSERT_EQ(te_claims_write(&c, &a, 10000), TE_OK);
    ASSERT_EQ(te_claims_write(&c, &a, 10001), TE_OK);   /* again: same claim */
    ASSERT_EQ(te_claims_count(&c), 1);
    ASSERT_EQ(te_claims_write(&c, &b, 11000), TE_OK);   /* reused space, newer grant */
    ASSERT_EQ(te_claims_count(&c), 3);                  /* a's left part, b, a's right part */
    ASSERT_EQ(te_claims_write(&c, &a, 11001), TE_EAUTH);
    /* an older grant elsewhere is none of the new one's business */
    te_cap elsewhere = wcap(8192, 64, 9);
    ASSERT_EQ(te_claims_write(&c, &elsewhere, 11002), TE_OK);   /* no overlap: allowed */
    ASSERT_EQ(te_claims_write(&c, &b, 11003), TE_OK);
    ASSERT(c.refused == 1);
    te_claims_free(&c);
}

static void test_newest_over_many(void) {
    te_claims c;
    te_claims_init(&c, 0);
    for (uint64_t i = 0; i < 100; i++) {
        te_cap x = wcap(i * 64, 64, 20 + i);
        ASSERT_EQ(te_claims_write(&c, &x, 20000), TE_OK);
    }
    ASSERT_EQ(te_claims_count(&c), 100);
    te_cap big = wcap(32, 64 * 98, 200);   /* covers parts of 0 and 98, all between */
    ASSERT_EQ(te_claims_write(&c, &big, 200000), TE_OK);
    ASSERT_EQ(te_claims_count(&c), 4);     /* 0's head, big, 98's tail, 99 */
    te_cap old = wcap(50 * 64, 64, 70);
    ASSERT_EQ(te_claims_write(&c, &old, 200001), TE_EAUTH);
    te_cap tail99 = wcap(99 * 64, 64, 119);
    ASSERT_EQ(te_claims_write(&c, &tail99, 200002), TE_OK);
    te_claims_free(&c);
}

static void test_grants_before_start_and_too_long(void) {
    te_claims c;
    te_claims_init(&c, 50000);   /* node (re)started at 50 s */
    te_cap before = wcap(0, 64, 49), after = wcap(0, 64, 50);
    ASSERT_EQ(te_claims_write(&c, &before, 50001), TE_EAUTH);
    ASSERT_EQ(te_claims_write(&c, &after, 50001), TE_OK);
    te_cap forever = wcap(128, 64, 60);
    forever.expiry_ms = 60000 + TE_CLAIM_HORIZON_MS + 1;
    ASSERT_EQ(te_claims_write(&c, &forever, 60001), TE_EAUTH);
    te_cap wrap = wcap(UINT64_MAX - 10, 64, 60);
    ASSERT_EQ(te_claims_write(&c, &wrap, 60001), TE_EAUTH);
    te_claims_free(&c);
}

static void test_claims_expire_after_horizon(void) {
    te_claims c;
    te_claims_init(&c, 0);
    for (uint64_t i = 0; i < 64; i++) {
        te_cap x = wcap(i * 64, 64, 1);
        x.issued_us += i;
        ASSERT_EQ(te_claims_write(&c, &x, 1000), TE_OK);
    }
    ASSERT_EQ(te_claims_count(&c), 64);
    /* growing past the array after the horizon drops the stale ones */
    te_cap late = wcap(64 * 64, 64, 1 + TE_CLAIM_HORIZON_MS / 1000 + 1);
    ASSERT_EQ(te_claims_write(&c, &late, late.issued_us / 1000), TE_OK);
    ASSERT_EQ(te_claims_count(&c), 1);
    te_claims_free(&c);
}

int main(void) {
    RUN_TEST(test_newer_grant_locks_out_older);
    RUN_TEST(test_newest_over_many);
    RUN_TEST(test_grants_before_start_and_too_long);
    RUN_TEST(test_claims_expire_after_horizon);
    TEST_EXIT();
}
